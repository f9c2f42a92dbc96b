#!/usr/bin/env bash
# Side-by-side rnfsd vs nfs-ganesha: the same `rnfsd-bench run` arguments
# against each server, alternating rnfsd ganesha rnfsd ganesha ... for
# --rounds rounds, each run on a fresh copy of one prepared tree. Prints the
# medians per server and the ratio rnfsd/ganesha. See docs/ganesha.md.
#
#   scripts/compare.sh [--mix getattr|traverse] [--streams 16,64] [--conns 4]
#       [--seconds 3] [--rounds 3] [--files 20000] [--dirs 1000]
#       [--bench PATH] [--rnfsd PATH] [--out FILE.jsonl] [--work DIR]
#
# rnfsd runs on host loopback (127.0.0.1, a free port); ganesha runs through
# scripts/ganesha.sh exec (private netns + private rpcbind), with the bench
# inside its namespace. ganesha 4.3 serves MOUNT on its own port, so the
# bench must send MNT there: with `--mount-addr` if the bench has it, else
# through RNFSD_BENCH_MOUNT_ADDR (the scratch build in docs/ganesha.md).
# Time is bounded: every bench run is bounded by --seconds per stream count,
# and each server start by a timeout.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BENCH=$ROOT/target/release/rnfsd-bench
RNFSD=$ROOT/target/release/rnfsd
MIX=getattr STREAMS=16,64 CONNS=4 SECONDS_=3 ROUNDS=3 FILES=20000 DIRS=1000
WORK=/tmp/rnfsd-compare
OUT=

die() { echo "compare.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
    --mix) MIX=$2; shift 2 ;;
    --streams) STREAMS=$2; shift 2 ;;
    --conns) CONNS=$2; shift 2 ;;
    --seconds) SECONDS_=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --files) FILES=$2; shift 2 ;;
    --dirs) DIRS=$2; shift 2 ;;
    --bench) BENCH=$2; shift 2 ;;
    --rnfsd) RNFSD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    *) die "unknown argument: $1" ;;
    esac
done
[ -x "$BENCH" ] || die "no bench at $BENCH"
[ -x "$RNFSD" ] || die "no rnfsd at $RNFSD"
[ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 10 ] || die "--rounds must be 1..10"
BENCH=$(readlink -f "$BENCH") RNFSD=$(readlink -f "$RNFSD")
case "$WORK" in /tmp/?*) ;; *) die "--work must be under /tmp (it is deleted)" ;; esac
rm -rf "$WORK"
mkdir -p "$WORK"
[ -n "$OUT" ] || OUT=$WORK/results.jsonl
: >"$OUT"

# Per-run budget: warm-up + --seconds per stream count, plus start-up.
NSTREAMS=$(echo "$STREAMS" | tr ',' '\n' | grep -c .)
BUDGET=$(awk -v s="$SECONDS_" -v n="$NSTREAMS" 'BEGIN { printf "%d", 60 + n * (s + 5) * 2 }')

RUN_ARGS=(run --mix "$MIX" --streams "$STREAMS" --conns "$CONNS" --seconds "$SECONDS_")
MOUNT_OPT=()
if "$BENCH" run --help 2>/dev/null | grep -q -- '--mount-addr'; then
    MOUNT_OPT=(--mount-addr 127.0.0.1:20048)
fi
RNFSD_OPTS=(--no-rpcbind)
if "$RNFSD" serve --help 2>/dev/null | grep -q -- '--no-root-squash'; then
    RNFSD_OPTS+=(--no-root-squash) # as ganesha's Squash = No_Root_Squash
fi

echo "compare.sh: preparing tree ($FILES files, $DIRS dirs)" >&2
"$BENCH" prepare "$WORK/tree.src" --files "$FILES" --dirs "$DIRS" >&2

label() { # FILE LABEL ROUND: relabel the bench's JSON lines into $OUT
    python3 - "$1" "$2" "$3" "$OUT" <<'EOF'
import json, sys
src, label, rnd, out = sys.argv[1:5]
with open(src) as f, open(out, "a") as o:
    for line in f:
        line = line.strip()
        if not line:
            continue
        m = json.loads(line)
        m["label"], m["round"] = label, int(rnd)
        o.write(json.dumps(m) + "\n")
EOF
}

fresh() { # a fresh copy of the prepared tree
    rm -rf "$WORK/tree"
    cp -a "$WORK/tree.src" "$WORK/tree"
}

run_rnfsd() { # ROUND
    fresh
    rm -f "$WORK/port" "$WORK/run.jsonl"
    mkdir -p "$WORK/rnfsd-state"
    "$RNFSD" serve "$WORK/tree" --listen 127.0.0.1:0 --port-file "$WORK/port" \
        --state-dir "$WORK/rnfsd-state" "${RNFSD_OPTS[@]}" --log-level warn \
        >"$WORK/rnfsd.log" 2>&1 &
    local pid=$! st=0
    for _ in $(seq 1 100); do
        [ -s "$WORK/port" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if [ -s "$WORK/port" ]; then
        timeout "$BUDGET" "$BENCH" "${RUN_ARGS[@]}" --addr "127.0.0.1:$(cat "$WORK/port")" \
            --export "$WORK/tree" --server-pid "$pid" --json "$WORK/run.jsonl" || st=$?
    else
        echo "compare.sh: rnfsd did not start" >&2
        st=1
    fi
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    [ "$st" = 0 ] && label "$WORK/run.jsonl" rnfsd "$1"
    return "$st"
}

run_ganesha() { # ROUND
    fresh
    rm -f "$WORK/run.jsonl"
    local st=0
    # $GANESHA_RUN/ganesha.realpid is ganesha's PID (same PID namespace).
    GANESHA_RUN=$WORK/ganesha RNFSD_BENCH_MOUNT_ADDR=127.0.0.1:20048 \
        timeout "$BUDGET" "$HERE/ganesha.sh" exec --export "$WORK/tree" --port 2049 --mnt-port 20048 -- \
        sh -c 'exec "$@" --server-pid "$(cat "$GANESHA_RUN/ganesha.realpid")"' sh \
        "$BENCH" "${RUN_ARGS[@]}" "${MOUNT_OPT[@]}" --addr 127.0.0.1:2049 --export "$WORK/tree" \
        --json "$WORK/run.jsonl" 2> >(grep -v -E '^ +[0-9]+ +[0-9]+ +(tcp|udp)|program vers' >&2) || st=$?
    [ "$st" = 0 ] && label "$WORK/run.jsonl" ganesha "$1"
    return "$st"
}

fail=0
for r in $(seq 1 "$ROUNDS"); do
    echo "compare.sh: round $r/$ROUNDS rnfsd (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    run_rnfsd "$r" || { echo "compare.sh: rnfsd run failed" >&2; fail=1; }
    echo "compare.sh: round $r/$ROUNDS ganesha (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    run_ganesha "$r" || { echo "compare.sh: ganesha run failed" >&2; fail=1; }
done
rm -rf "$WORK/tree" "$WORK/tree.src"

python3 - "$OUT" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for m in rows:
    by.setdefault((m["mix"], m["streams"], m["label"]), []).append(m)
def med(ms, k):
    v = [m[k] for m in ms if m.get(k) is not None]
    return statistics.median(v) if v else None
print(f"{'mix':<9} {'streams':>7} {'server':<8} {'n':>2} {'calls/s':>10} {'p50us':>7} {'p99us':>7} {'cpu_us/call':>11} {'errors':>6}")
keys = sorted({(k[0], k[1]) for k in by})
for mix, st in keys:
    meds = {}
    for lab in ("rnfsd", "ganesha"):
        ms = by.get((mix, st, lab), [])
        if not ms:
            continue
        c = med(ms, "calls_per_s"); meds[lab] = c
        cpu = med(ms, "server_cpu_us_per_call")
        print(f"{mix:<9} {st:>7} {lab:<8} {len(ms):>2} {c:>10.0f} {med(ms,'p50_us'):>7.0f} {med(ms,'p99_us'):>7.0f} "
              f"{(f'{cpu:.1f}' if cpu is not None else '-'):>11} {sum(m['errors'] for m in ms):>6}")
    if meds.get("rnfsd") and meds.get("ganesha"):
        print(f"{mix:<9} {st:>7} ratio rnfsd/ganesha (median calls/s): {meds['rnfsd']/meds['ganesha']:.2f}")
EOF
echo "compare.sh: JSON lines in $OUT" >&2
exit "$fail"
