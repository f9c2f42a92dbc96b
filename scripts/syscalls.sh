#!/usr/bin/env bash
# Server syscalls per NFS call: `strace -f -c` (or, with --perf, perf's
# syscall tracepoints) on a running server while one `rnfsd-bench run`
# drives it. See docs/benchmarks.md ("Syscalls per call").
#
#   scripts/syscalls.sh --pid PID [--seconds S] [--out DIR] [--perf] -- BENCH run ARGS...
#
# PID: the server (rnfsd, or ganesha's real PID). BENCH run ARGS: an
# `rnfsd-bench run` command line (one --mix; one --streams value is best);
# it may be wrapped (e.g. `scripts/ganesha.sh enter -- rnfsd-bench run ...`)
# as long as the arguments appended at its end reach rnfsd-bench. The script
# appends --seconds S (default 3), --json FILE and --start-file FILE: do not
# pass those.
#
# Sequence: the bench mounts and walks the tree, says it is ready and waits
# for the start file; strace attaches to every server thread; the start
# file is made; the bench opens its connections (--conns 0: one per
# stream), warms up, measures and exits; strace gets SIGINT, detaches (the
# server keeps running) and writes its summary. So the syscalls counted are
# those of the warm-up and the measurement (plus connection set-up and the
# idle server's few), and they are divided by the NFS calls of both: the
# sum over the bench's JSON rows of `calls + warmup_calls`.
#
# Prints, per syscall, its count and count per NFS call, then one line
# "syscalls per call: X". Under strace the server runs several times
# slower: read the counts, not the bench's rates; and every syscall stops
# the thread, so speculative handle misses back off (docs/benchmarks.md).
# --perf counts with `perf stat -e 'syscalls:sys_enter_*'` instead, which
# stops nothing: the counts are what the server does untraced. Needs root
# (ptrace, or perf on another user's process); installs strace with
# apt-get if missing. Bounded:
# the bench by timeout(1) (S x 10 + 660 s: its 60 s start wait and a walk),
# strace by timeout -s INT at the same bound plus 30 s.
set -euo pipefail

PID=
SECONDS_=3
OUT=

die() { echo "syscalls.sh: $*" >&2; exit 2; }
log() { echo "syscalls.sh: $*" >&2; }
usage() { sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
PERF=0

while [ $# -gt 0 ]; do
    case "$1" in
    --pid) PID=$2; shift 2 ;;
    --seconds) SECONDS_=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --perf) PERF=1; shift ;;
    -h | --help) usage 0 ;;
    --) shift; break ;;
    *) die "unknown argument: $1 (the bench command goes after --)" ;;
    esac
done
[ $# -gt 0 ] || die "no bench command after --"
[[ $PID =~ ^[0-9]+$ ]] || die "--pid PID (the server's process id)"
[ -d "/proc/$PID" ] || die "no process $PID"
[[ $SECONDS_ =~ ^[0-9]+$ ]] && [ "$SECONDS_" -ge 1 ] && [ "$SECONDS_" -le 600 ] ||
    die "--seconds must be a whole number, 1..600"
for a in "$@"; do
    case $a in
    --seconds | --seconds=* | --json | --json=* | --start-file | --start-file=*)
        die "$a is set by this script; remove it from the bench command" ;;
    esac
done
[ "$(id -u)" = 0 ] || die "must run as root (strace attaches to the server)"
if [ "$PERF" = 1 ]; then
    command -v perf >/dev/null || die "--perf: perf is not installed (Debian: linux-perf)"
    # Not `perf list | grep -q`: under pipefail grep's early exit kills
    # perf with SIGPIPE and the test fails whatever the kernel has.
    [ -n "$(perf list tracepoint 2>/dev/null | grep -m1 'syscalls:sys_enter_')" ] ||
        die "--perf: this kernel has no syscalls:sys_enter_* tracepoints"
elif ! command -v strace >/dev/null; then
    log "installing strace"
    apt="$(dirname "${BASH_SOURCE[0]}")/apt-get-locked"
    DEBIAN_FRONTEND=noninteractive "$apt" install -y strace >&2 ||
        { "$apt" update >&2 && DEBIAN_FRONTEND=noninteractive "$apt" install -y strace >&2; }
fi

WORK=$(mktemp -d /tmp/rnfsd-syscalls.XXXXXX)
[ -n "$OUT" ] || OUT=$WORK
mkdir -p "$OUT"
ROWS=$OUT/rows.jsonl STRACE_OUT=$OUT/strace.txt BENCH_ERR=$OUT/bench.stderr
GO=$WORK/go
: >"$ROWS"
BOUND=$((SECONDS_ * 10 + 660))
BENCH_PID= STRACE_PID=

# Never leave strace attached: SIGINT makes it detach and leave the server
# running (SIGKILL would not let it detach cleanly).
cleanup() {
    [ -n "$STRACE_PID" ] && kill -INT "$STRACE_PID" 2>/dev/null || true
    [ -n "$BENCH_PID" ] && kill -TERM "$BENCH_PID" 2>/dev/null || true
    wait 2>/dev/null || true
    [ "$OUT" = "$WORK" ] || rm -rf "$WORK"
}
trap cleanup EXIT

timeout "$BOUND" "$@" --seconds "$SECONDS_" --json "$ROWS" --start-file "$GO" \
    2>"$BENCH_ERR" &
BENCH_PID=$!
# The bench says "ready" once it has mounted and walked (bounded by BOUND).
until grep -q 'rnfsd-bench: ready' "$BENCH_ERR" 2>/dev/null; do
    kill -0 "$BENCH_PID" 2>/dev/null || { cat "$BENCH_ERR" >&2; die "the bench exited before it was ready"; }
    sleep 0.05
done

THREADS=$(ls "/proc/$PID/task" | wc -l)
if [ "$PERF" = 1 ]; then
    # Every thread that exists now (perf stat -p attaches to each); the
    # threads they start later inherit the counters. CSV: count,unit,event,...
    timeout -s INT $((BOUND + 30)) perf stat -x, -e 'syscalls:sys_enter_*' -p "$PID" \
        -o "$STRACE_OUT" 2>"$WORK/strace.err" &
    STRACE_PID=$!
    sleep 1
    kill -0 "$STRACE_PID" 2>/dev/null || { cat "$WORK/strace.err" >&2; die "perf stat failed"; }
    log "perf stat attached ($THREADS threads)"
else
    timeout -s INT $((BOUND + 30)) strace -f -c -p "$PID" -o "$STRACE_OUT" 2>"$WORK/strace.err" &
    STRACE_PID=$!
    # Wait (at most 10 s) until strace says it attached to every thread: one
    # "attached with N threads" line, or (older strace) a line per thread.
    for _ in $(seq 1 200); do
        grep -q 'attached with' "$WORK/strace.err" 2>/dev/null && break
        [ "$(grep -c 'attached' "$WORK/strace.err" 2>/dev/null || true)" -ge "$THREADS" ] && break
        kill -0 "$STRACE_PID" 2>/dev/null || { cat "$WORK/strace.err" >&2; die "strace failed"; }
        sleep 0.05
    done
    log "$(grep -m1 attached "$WORK/strace.err" || echo "strace: no attach message yet") ($THREADS threads)"
fi
touch "$GO"

st=0
wait "$BENCH_PID" || st=$?
BENCH_PID=
kill -INT "$STRACE_PID" 2>/dev/null || true
wait "$STRACE_PID" 2>/dev/null || true
STRACE_PID=
grep -v 'rnfsd-bench: ready' "$BENCH_ERR" >&2 || true
[ "$st" = 0 ] || die "the bench failed (status $st)"
kill -0 "$PID" 2>/dev/null || log "warning: the server $PID is no longer running"

# NFS calls the server handled while traced: measured + warm-up, every row.
CALLS=$(grep -o -E '"(warmup_)?calls":[0-9]+' "$ROWS" | awk -F: '{ n += $2 } END { print n + 0 }')
[ "$CALLS" -gt 0 ] || die "the bench reported no calls (rows: $ROWS)"

echo "server $PID: syscalls per NFS call over $CALLS NFS calls (measured + warm-up)"
echo "bench: $*"
if [ "$PERF" = 1 ]; then
    # perf's CSV: "count,,syscalls:sys_enter_NAME,..."; a total line added.
    awk -F, '$3 ~ /^syscalls:sys_enter_/ && $1 ~ /^[0-9]+$/ && $1 > 0 {
        n = $3; sub(/^syscalls:sys_enter_/, "", n); print n, $1; t += $1 }
        END { print "total", t + 0 }' "$STRACE_OUT" >"$WORK/counts"
else
    # strace -c's table: "% time seconds usecs/call calls [errors] syscall",
    # a "total" line last. calls is the 4th field with or without errors.
    awk '$1 ~ /^[0-9.]+$/ && NF >= 5 && $4 ~ /^[0-9]+$/ { print $NF, $4 }' "$STRACE_OUT" >"$WORK/counts"
fi
TOTAL=$(awk '$1 == "total" { print $2 }' "$WORK/counts")
[ -n "$TOTAL" ] || die "no summary in $STRACE_OUT"
printf "%-24s %12s %10s\n" syscall count per-call
awk '$1 != "total"' "$WORK/counts" | sort -k2,2nr |
    awk -v c="$CALLS" '{ printf "%-24s %12d %10.3f\n", $1, $2, $2 / c }'
printf "%-24s %12d %10.3f\n" total "$TOTAL" "$(awk -v t="$TOTAL" -v c="$CALLS" 'BEGIN { print t / c }')"
awk -v t="$TOTAL" -v c="$CALLS" 'BEGIN { printf "syscalls per call: %.2f (%d syscalls / %d NFS calls)\n", t / c, t, c }'
echo "raw: $STRACE_OUT, rows: $ROWS"
