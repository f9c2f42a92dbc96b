#!/usr/bin/env bash
# NFSv4.2 COPY within the server against cp on the server's own
# filesystem: is a server-side copy of a large file as fast as a local
# one, and does its data stay off the network?
#
#   scripts/copy-bench.sh [--size-mib N] [--runs R] [--out DIR] [--work DIR]
#
# Each run, for each variant in turn, on a fresh ext4 filesystem on a loop
# device: a random source file of N MiB (default 1024) written and synced,
# the page cache dropped, then the copy timed:
#   cp          cp SRC DST (coreutils: copy_file_range), then sync
#   cp-never    cp --reflink=never SRC DST, then sync
#   rnfsd       rnfsd serving the filesystem (a `sync` export, the
#               default), `rnfsd-bench copy` (NFSv4.2 COPY from 127.0.0.1,
#               asynchronous past nfs4_copy_sync_max, ended by CB_OFFLOAD:
#               on a `sync` export after the server committed the copy),
#               then its COMMIT
#   rnfsd-async the same on an `async` export (--async): CB_OFFLOAD says
#               UNSTABLE4, the COMMIT after it makes the copy durable
# Times: to the copy's end (cp's exit; the COPY reply or CB_OFFLOAD) and
# to durable (after sync; after COMMIT). For rnfsd also the server's own
# transport byte counters (bytes in and out over the run) and the copy's
# COPY calls. The copy is checked byte for byte (cmp). R runs (default 3),
# variants alternated run by run; medians in summary.txt.
#
# Needs root (loop device, mount, drop_caches) and the release binaries
# (built when missing). Run under `flock /work/bench.lock` where the
# machine is shared.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SIZE_MIB=1024
RUNS=3
WORK=/tmp/rnfsd-copy-bench
OUT=
while [ $# -gt 0 ]; do
    case $1 in
    --size-mib) SIZE_MIB=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    *) echo "copy-bench: unknown argument $1" >&2; exit 2 ;;
    esac
done
OUT=${OUT:-$WORK/out}
RNFSD=${RNFSD:-$ROOT/target/release/rnfsd}
BENCH=${BENCH:-$ROOT/target/release/rnfsd-bench}

log() { echo "copy-bench: $*" >&2; }
die() { log "$*"; exit 1; }
# shellcheck source=bench-lib.sh
. "$HERE/bench-lib.sh"

cleanup() {
    stop_rnfsd
    loopfs_cleanup
}
trap cleanup EXIT

mkdir -p "$WORK" "$OUT"
ensure_tools "$ROOT"
: >"$OUT/results.jsonl"
{
    echo "date: $(date -u +%FT%TZ)"
    echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "kernel: $(uname -r)"
    echo "cpus: $(nproc)"
    echo "load: $(cat /proc/loadavg)"
    echo "size_mib: $SIZE_MIB runs: $RUNS"
} >"$OUT/machine.txt"

# now: seconds since the epoch, with nanoseconds.
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", b - a }'; }

# Transport bytes in and out of the running rnfsd so far (every transport).
wire_bytes() {
    "$RNFSD" stats --state-dir "$WORK/state" --json | jq '[.transports[].connections | .bytes_in + .bytes_out] | add'
}

fresh_source() {
    fresh_ext4 65536 $((SIZE_MIB * 3 << 20))
    head -c $((SIZE_MIB << 20)) /dev/urandom >"$FS/src"
    : >"$FS/dst"
    sync
    echo 3 >/proc/sys/vm/drop_caches
}

run_one() { # VARIANT RUN
    local v=$1 run=$2 t0 t1 t2 r b0 b1
    fresh_source
    case $v in
    cp | cp-never)
        t0=$(now)
        if [ "$v" = cp ]; then cp "$FS/src" "$FS/dst"; else cp --reflink=never "$FS/src" "$FS/dst"; fi
        t1=$(now)
        sync
        t2=$(now)
        r="{\"copy_s\":$(secs "$t0" "$t1"),\"copy_commit_s\":$(secs "$t0" "$t2")}"
        ;;
    rnfsd | rnfsd-async)
        rm -rf "$WORK/state"
        if [ "$v" = rnfsd ]; then start_rnfsd "$FS" "$WORK/state" "$OUT/rnfsd.log"
        else start_rnfsd "$FS" "$WORK/state" "$OUT/rnfsd.log" --async; fi
        b0=$(wire_bytes)
        r=$(timeout 900 "$BENCH" copy --addr "127.0.0.1:$SERVER_PORT" --export "$FS" --src src --dst dst)
        b1=$(wire_bytes)
        stop_rnfsd
        r=$(echo "$r" | jq -c --argjson w $((b1 - b0)) '. + {wire_bytes: $w}')
        ;;
    esac
    cmp "$FS/src" "$FS/dst" || die "$v run $run: the copy differs"
    echo "$r" | jq -c --arg v "$v" --argjson run "$run" --argjson mib "$SIZE_MIB" \
        '{variant: $v, run: $run, size_mib: $mib} + .' | tee -a "$OUT/results.jsonl"
    loopfs_cleanup
}

for run in $(seq 1 "$RUNS"); do
    for v in cp cp-never rnfsd rnfsd-async; do
        log "run $run: $v"
        run_one "$v" "$run"
    done
done

# Medians per variant, and rnfsd's against cp's (speed: cp's time over
# rnfsd's, so above 1 is faster than cp).
jq -s -r '
  def median: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  group_by(.variant) | map({variant: .[0].variant, copy_s: (map(.copy_s) | median),
    copy_commit_s: (map(.copy_commit_s) | median), wire_bytes: (map(.wire_bytes // 0) | median),
    calls: (map(.calls // 0) | median)}) as $m
  | ($m | map({(.variant): .}) | add) as $by
  | ($m[] | "\(.variant): copy \(.copy_s) s, to durable \(.copy_commit_s) s, wire bytes \(.wire_bytes), COPY calls \(.calls)"),
    (["rnfsd", "rnfsd-async"][] as $r | ["cp", "cp-never"][] as $c |
      "\($r) speed against \($c): \($by[$c].copy_s / $by[$r].copy_s * 1000 | round / 1000)x (to the end), \($by[$c].copy_commit_s / $by[$r].copy_commit_s * 1000 | round / 1000)x (to durable)")
' "$OUT/results.jsonl" | tee "$OUT/summary.txt"
