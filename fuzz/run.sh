#!/usr/bin/env bash
# Fuzz rnfsd with cargo-fuzz (libFuzzer) on the stable toolchain.
#
#   fuzz/run.sh TARGET SECONDS   build, then fuzz TARGET for SECONDS
#   fuzz/run.sh --ci             every target briefly (~30 s of fuzzing in
#                                all) plus every saved regression input
#   fuzz/run.sh --build          build all targets only
#
# Targets: record rpc_header xdr_args dispatch nfs4_compound. See docs/fuzzing.md.
# Env: FUZZ_SANITIZER (default none; "address" works too, slower build),
#      FUZZ_TARGET_DIR (default fuzz/target; e.g. fuzz/target-asan for an
#      ASan build kept beside the plain one),
#      FUZZ_NO_BUILD=1 to reuse the binaries already built,
#      FUZZ_JOBS (libFuzzer -fork workers, default 1),
#      RNFSD_FUZZ_AS_ROOT=1 to run `dispatch` as root (default: as nobody,
#      so a handler that escaped the export could not harm the machine).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
TARGETS=(record rpc_header xdr_args dispatch nfs4_compound)
SAN="${FUZZ_SANITIZER:-none}"
TRIPLE="$(rustc -vV | sed -n 's/^host: //p')"
TDIR="${FUZZ_TARGET_DIR:-$HERE/target}"
BIN="$TDIR/$TRIPLE/release"

# cargo-fuzz passes -Z flags (sanitizer coverage); stable rustc accepts
# them only with RUSTC_BOOTSTRAP=1. No nightly toolchain needed.
export RUSTC_BOOTSTRAP=1

build() {
    [[ -n "${FUZZ_NO_BUILD:-}" ]] && return 0
    command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
    (cd "$ROOT" && cargo fuzz build -s "$SAN" --target-dir "$TDIR" "$@")
}

# run TARGET SECONDS [extra libFuzzer args]
run() {
    local t="$1" secs="$2"
    shift 2
    local corpus="$HERE/corpus/$t" art="$HERE/artifacts/$t" logs="$HERE/logs"
    mkdir -p "$corpus" "$art" "$logs"
    local -a cmd=("$BIN/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048
        -malloc_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$art/" "$@"
        "$corpus" "$HERE/seeds/$t")
    if [[ -n "${FUZZ_JOBS:-}" && "${FUZZ_JOBS}" != 1 ]]; then
        cmd+=(-fork="$FUZZ_JOBS")
    fi
    if [[ "$t" == dispatch && "$(id -u)" == 0 && -z "${RNFSD_FUZZ_AS_ROOT:-}" ]]; then
        chown -R nobody "$corpus" "$art"
        cmd=(setpriv --reuid=nobody --regid=nogroup --clear-groups
            env TMPDIR=/tmp HOME=/tmp "${cmd[@]}")
    fi
    echo "+ ${cmd[*]}" >&2
    "${cmd[@]}" 2>&1 | tee "$logs/$t.log" | grep -E --line-buffered \
        'INITED|DONE|NEW_FUNC|panicked|ERROR|SUMMARY|stat::|Test unit written' || true
    # dispatch's export directories (one per process; libFuzzer exits
    # without running destructors).
    [[ "$t" == dispatch ]] && rm -rf /tmp/rnfsd-fuzz-export-* 2>/dev/null
    # libFuzzer's exit status is lost in the pipe: look at its log instead.
    if grep -qE '^==[0-9]+== ERROR|deadly signal|panicked at|Test unit written' "$logs/$t.log"; then
        echo "FAIL: $t found a crash; see $logs/$t.log and $art/" >&2
        return 1
    fi
}

# Replay the saved crash inputs (regressions/TARGET/*) once each.
replay() {
    local t="$1" d="$HERE/regressions/$1"
    [[ -d "$d" ]] && compgen -G "$d/*" >/dev/null || return 0
    echo "replaying $d" >&2
    "$BIN/$t" -runs=1 "$d"/*
}

case "${1:-}" in
--build)
    build
    ;;
--ci)
    build
    fail=0
    for t in "${TARGETS[@]}"; do
        replay "$t" || fail=1
        run "$t" 7 || fail=1
    done
    exit "$fail"
    ;;
"" | -h | --help)
    sed -n '2,16p' "$0"
    exit 2
    ;;
*)
    t="$1"
    secs="${2:-600}"
    shift 2 || shift 1
    build "$t"
    replay "$t"
    run "$t" "$secs" "$@"
    ;;
esac
