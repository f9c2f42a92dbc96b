#!/usr/bin/env bash
# What one call costs the server, per procedure, for one or more rnfsd
# builds side by side: GETATTR, ACCESS, LOOKUP, READ and WRITE (4 KiB) on
# non-root handles. See docs/benchmarks.md ("Cost per call").
#
#   scripts/percall.sh [--mixes LIST] [--handles N] [--streams S]
#       [--conns C] [--rounds R] [--seconds S] [--files F] [--dirs D]
#       [--no-strace] [--perf] [--out DIR] [--work DIR]
#       LABEL=BINARY [LABEL=BINARY...]
#
# In order: a fresh ext4 filesystem on a loop device; a tree of F (20,000)
# files of 4 KiB in D (1,000) directories (`rnfsd-bench prepare`); then R
# rounds (default 3), each starting every build in turn (A B A B) on that
# tree and running every mix for S seconds (default 5) with
# `--server-pid`: calls/s, server CPU µs and context switches per call.
# Around each measured run the server's counters are reset and read
# (`rnfsd stats`), giving each cache's hit rate where the build has caches.
# Last, unless --no-strace, one traced run per build and mix
# (scripts/syscalls.sh, 3 s): syscalls per call (--perf: counted with
# perf's syscall tracepoints, which unlike strace do not stop the server
# and so leave its speculative misses alone). Defaults: --handles 1000
# (a working set inside the caches), --streams 16 on --conns 1 (one client
# host, many calls).
#
# Output in --out (default /tmp/rnfsd-percall/out): results.jsonl (bench
# rows), hits.tsv (label, mix, cache, hits, misses), syscalls.tsv (label,
# mix, syscalls per call, and the top syscalls), report.md (medians and
# ratios to the first label, then the two tables). Needs root (loop
# device, strace). Bounded: every bench and strace run under timeout(1).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
MIXES=getattr,access,lookup,read,write
HANDLES=1000
STREAMS=16
CONNS=1
ROUNDS=3
SECS=5
FILES=20000
DIRS=1000
STRACE=1
TRACER=
WORK=/tmp/rnfsd-percall
OUT=
BENCH=$ROOT/target/release/rnfsd-bench
RNFSD=$ROOT/target/release/rnfsd

log() { echo "percall.sh: $*" >&2; }
die() { log "$*"; exit 2; }
usage() { sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

while [ $# -gt 0 ]; do
    case "$1" in
    --mixes) MIXES=$2; shift 2 ;;
    --handles) HANDLES=$2; shift 2 ;;
    --streams) STREAMS=$2; shift 2 ;;
    --conns) CONNS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --seconds) SECS=$2; shift 2 ;;
    --files) FILES=$2; shift 2 ;;
    --dirs) DIRS=$2; shift 2 ;;
    --no-strace) STRACE=; shift ;;
    --perf) TRACER=--perf; shift ;;
    --out) OUT=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    -h | --help) usage 0 ;;
    -*) die "unknown option $1" ;;
    *) break ;;
    esac
done
[ $# -gt 0 ] || die "give at least one LABEL=BINARY"
[ "$(id -u)" = 0 ] || die "must run as root (loop device, strace)"
for n in "$HANDLES" "$STREAMS" "$CONNS" "$ROUNDS" "$SECS" "$FILES" "$DIRS"; do
    [[ $n =~ ^[0-9]+$ ]] || die "counts must be whole numbers: $n"
done
# The bench walks the whole tree (it samples --handles from it).
TREE=$((FILES + DIRS + 1))
[ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 20 ] || die "--rounds 1..20"
[ "$SECS" -ge 1 ] && [ "$SECS" -le 120 ] || die "--seconds 1..120"
LABELS=()
declare -A BIN
for a in "$@"; do
    [[ $a == *=* ]] || die "not LABEL=BINARY: $a"
    l=${a%%=*} b=${a#*=}
    [ -x "$b" ] || die "$b is not executable"
    LABELS+=("$l")
    BIN[$l]=$b
done
OUT=${OUT:-$WORK/out}
mkdir -p "$WORK" "$OUT"
RESULTS=$OUT/results.jsonl
: >"$RESULTS"
printf 'label\tmix\tcache\thits\tmisses\n' >"$OUT/hits.tsv"
printf 'label\tmix\tsyscalls_per_call\ttop\n' >"$OUT/syscalls.tsv"

# shellcheck source=scripts/bench-lib.sh
. "$HERE/bench-lib.sh"
trap 'stop_rnfsd; loopfs_cleanup' EXIT
ensure_tools "$ROOT"

fresh_ext4 $((FILES + DIRS + 50000)) $((FILES * 4096 * 2))
timeout 1800 "$BENCH" prepare --files "$FILES" --dirs "$DIRS" --file-size 4096 --threads 2 "$FS/export" >&2
sync
{
    echo "date: $(date -u +%FT%TZ)"
    echo "host: $(nproc) CPUs, $(uname -r)"
    for l in "${LABELS[@]}"; do echo "$l: ${BIN[$l]}"; done
    echo "tree $FILES files in $DIRS dirs; mixes $MIXES, handles $HANDLES, streams $STREAMS, conns $CONNS, $ROUNDS rounds of $SECS s"
} >"$OUT/machine.txt"

bench_run() { # LABEL MIX [EXTRA...]
    local l=$1 m=$2 h=$HANDLES
    shift 2
    # null and traverse take no handles (traverse walks the tree).
    case $m in null | traverse) h=0 ;; esac
    timeout $((SECS * 10 + 600)) "$BENCH" run --addr "127.0.0.1:$SERVER_PORT" \
        --export "$FS/export" --label "$l" --mix "$m" --handles "$h" \
        --streams "$STREAMS" --conns "$CONNS" --tree-limit "$TREE" "$@"
}

# The caches' hits and misses since the last reset, one line per cache
# (nothing for a build without caches or without `stats --json`).
cache_hits() { # LABEL MIX
    RNFSD=${BIN[$1]} "${BIN[$1]}" stats --state-dir "$WORK/state-$1" --json 2>/dev/null |
        jq -r --arg l "$1" --arg m "$2" \
            '.exports[]?.caches[]? | [$l, $m, .name, .hits, .misses] | @tsv' \
            >>"$OUT/hits.tsv" || true
}

for r in $(seq 1 "$ROUNDS"); do
    for l in "${LABELS[@]}"; do
        RNFSD=${BIN[$l]}
        start_rnfsd "$FS/export" "$WORK/state-$l" "$OUT/rnfsd-$l.log"
        for m in ${MIXES//,/ }; do
            log "round $r: $l $m"
            "$RNFSD" stats --state-dir "$WORK/state-$l" --reset 2>/dev/null || true
            bench_run "$l" "$m" --seconds "$SECS" --server-pid "$SERVER_PID" \
                --json "$RESULTS" >/dev/null
            [ "$r" = 1 ] && cache_hits "$l" "$m"
        done
        stop_rnfsd
    done
done

for l in "${LABELS[@]}"; do
    [ -n "$STRACE" ] || break
    RNFSD=${BIN[$l]}
    start_rnfsd "$FS/export" "$WORK/state-$l" "$OUT/rnfsd-$l.log"
    for m in ${MIXES//,/ }; do
        log "strace: $l $m"
        h=$HANDLES
        case $m in null | traverse) h=0 ;; esac
        s=$("$HERE/syscalls.sh" --pid "$SERVER_PID" --seconds 3 --out "$OUT/strace-$l-$m" $TRACER -- \
            "$BENCH" run --addr "127.0.0.1:$SERVER_PORT" --export "$FS/export" \
            --label "$l" --mix "$m" --handles "$h" --streams "$STREAMS" \
            --conns "$CONNS" --tree-limit "$TREE" 2>/dev/null) || s=
        per=$(awk '/^syscalls per call:/ { print $4 }' <<<"$s")
        # The five most frequent, as name=count-per-call.
        top=$(grep -E '^[a-z_0-9]+ +[0-9]+ +[0-9.]+$' <<<"$s" | grep -v '^total ' | head -5 |
            awk '{ printf "%s%s=%s", (NR > 1 ? " " : ""), $1, $3 }') || top=
        printf '%s\t%s\t%s\t%s\n' "$l" "$m" "${per:--}" "$top" >>"$OUT/syscalls.tsv"
    done
    stop_rnfsd
done

{
    "$BENCH" report --json "$RESULTS" --labels "$(IFS=,; echo "${LABELS[*]}")"
    echo
    echo "Cache hit rates (round 1, warm-up included):"
    echo
    echo "| build | mix | cache | hits | misses | hit rate |"
    echo "|---|---|---|---:|---:|---:|"
    tail -n +2 "$OUT/hits.tsv" | awk -F'\t' '$4 + $5 > 0 {
        printf "| %s | %s | %s | %d | %d | %.1f %% |\n", $1, $2, $3, $4, $5, 100 * $4 / ($4 + $5) }'
    echo
    how="strace -f -c"
    [ -z "$TRACER" ] || how="perf's syscall tracepoints"
    echo "Syscalls per call ($how, all server threads):"
    echo
    echo "| build | mix | syscalls per call | most frequent (per call) |"
    echo "|---|---|---:|---|"
    tail -n +2 "$OUT/syscalls.tsv" | awk -F'\t' '{ printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4 }'
} >"$OUT/report.md"
cat "$OUT/report.md"
