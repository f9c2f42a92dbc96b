#!/usr/bin/env bash
# Where a server's context switches go: voluntary and involuntary switches
# per operation, by thread group (rnfsd's thread names less their numbers:
# rnfsd-evloop, rnfsd-sync, rnfsd-journal, ...), over one bench command.
# See docs/benchmarks.md ("Context switches by thread").
#
#   scripts/thread-switches.sh --pid PID --ops N -- COMMAND...
#
# PID: the server. N: the operations COMMAND makes (files for fsmark, calls
# for run), which the counts are divided by. COMMAND runs as given, in the
# foreground (e.g. `rnfsd-bench fsmark --iterations 2
# --files-per-iteration 2000 ...`, then --ops 4000). Counts come from
# /proc/PID/task/*/status before and after; a thread that ended meanwhile
# is not counted, one that started is counted from zero.
#
# Prints one line per thread group with more than 0.005 per operation:
# "GROUP voluntary V involuntary I" (per operation), then "total V I".
set -euo pipefail

PID= OPS=
while [ $# -gt 0 ]; do
    case $1 in
    --pid) PID=$2; shift 2 ;;
    --ops) OPS=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: $0 --pid PID --ops N -- COMMAND..." >&2; exit 2 ;;
    esac
done
[ -n "$PID" ] && [ -n "$OPS" ] && [ $# -gt 0 ] \
    || { echo "usage: $0 --pid PID --ops N -- COMMAND..." >&2; exit 2; }
[ "$OPS" -gt 0 ] 2>/dev/null || { echo "--ops must be a positive count" >&2; exit 2; }
[ -d "/proc/$PID/task" ] || { echo "no process $PID" >&2; exit 1; }

# "TID GROUP VOLUNTARY INVOLUNTARY" for every thread of PID.
snapshot() {
    local t comm
    for t in /proc/"$PID"/task/*; do
        comm=$(cat "$t/comm" 2>/dev/null) || continue
        comm=${comm%%[0-9]*}
        awk -v tid="${t##*/}" -v g="${comm%-}" '
            /^voluntary_ctxt_switches/ { v = $2 }
            /^nonvoluntary_ctxt_switches/ { n = $2 }
            END { if (v != "") print tid, g, v, n }' "$t/status" 2>/dev/null || true
    done
}

before=$(mktemp) after=$(mktemp)
trap 'rm -f "$before" "$after"' EXIT
snapshot >"$before"
"$@"
snapshot >"$after"

# Per thread: after minus before (0 if it started meanwhile); summed by
# group, the groups sorted, the total last.
awk -v ops="$OPS" '
    NR == FNR { v0[$1] = $3; n0[$1] = $4; next }
    { v[$2] += $3 - v0[$1]; n[$2] += $4 - n0[$1] }
    END {
        for (g in v) {
            tv += v[g]; tn += n[g]
            if ((v[g] + n[g]) / ops > 0.005)
                printf "%-16s voluntary %.2f involuntary %.2f\n", g, v[g] / ops, n[g] / ops | "sort"
        }
        close("sort")
        printf "%-16s voluntary %.2f involuntary %.2f\n", "total", tv / ops, tn / ops
    }' "$before" "$after"
