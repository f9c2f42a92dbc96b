#!/usr/bin/env bash
# The cold-handle storm: after a host reboot with N distinct handles
# outstanding, do warm GETATTRs on other objects keep their p99? See
# docs/benchmarks.md ("The cold-handle storm").
#
#   scripts/cold-handles.sh [--files F] [--dirs D] [--handles N]
#       [--handle-mode kernel|path] [--cold-streams C] [--warm-streams W]
#       [--warm-handles K] [--seconds S] [--retry-ms MS]
#       [--handle-deadline S] [--scan-limit N] [--scan-waiters N]
#       [--scan-wait-ms MS] [--server-args "ARGS"] [--label L]
#       [--out DIR] [--work DIR] [--quick]
#
# In order: a fresh ext4 filesystem on a loop device (fresh every run);
# a tree of F files in D directories (default the bounded-wakeup lesson's
# rsync tree, docs/lessons.md: 161,480 files in
# 10,841 directories, `rnfsd-bench prepare --seed-size`); rnfsd on it
# (--handle-mode kernel by default; path: handles re-found by location,
# so the restart alone makes every handle cold); `rnfsd-bench handles`
# saves N (default 100,000) distinct non-root handles sampled across the
# tree; rnfsd stops; `sync; echo 2 > /proc/sys/vm/drop_caches` drops the
# host's dentries and inodes, standing in for a reboot (kernel handles then
# open disconnected, so rnfsd must find their place in the tree); rnfsd
# starts again with the same --state-dir (same handle key); `rnfsd-bench
# storm` measures warm GETATTR p50/p99/max alone for S seconds (default
# 10), then for S seconds while C (default 64) cold streams GETATTR the
# saved handles, retrying JUKEBOX after MS ms (default 100).
# --scan-limit/--scan-waiters/--scan-wait-ms set the server's
# handle_scan_limit, handle_scan_waiters and handle_scan_wait_ms (a
# config file); --server-args adds rnfsd serve options. --quick: 20,000
# files in 1,000 directories, 5,000 handles, 3 s (checks the set-up).
#
# Needs root (loop device, mount, drop_caches). Every step runs under
# timeout(1); the server is stopped, the filesystem unmounted and the loop
# device detached on exit. Output in --out (default /tmp/rnfsd-cold/out):
# results.jsonl (the walk's row, storm's three report rows and its summary
# object), storm.txt (storm's printout), summary.json, rnfsd.log,
# machine.txt, handles.hex.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BENCH=$ROOT/target/release/rnfsd-bench
RNFSD=$ROOT/target/release/rnfsd
FILES=161480 DIRS=10841
HANDLES=100000
MODE=kernel
COLD_STREAMS=64 WARM_STREAMS=4 WARM_HANDLES=1000
SECONDS_=10
RETRY_MS=100
HANDLE_DEADLINE=60
SCAN_LIMIT= SCAN_WAITERS= SCAN_WAIT_MS=
SERVER_ARGS=
LABEL=
OUT=
WORK=/tmp/rnfsd-cold

die() { echo "cold-handles.sh: $*" >&2; exit 2; }
log() { echo "cold-handles.sh $(date +%T): $*" >&2; }
num() { [[ $2 =~ ^[0-9]+$ ]] || die "$1 takes a whole number"; }
while [ $# -gt 0 ]; do
    case "$1" in
    --files) num "$1" "$2"; FILES=$2; shift 2 ;;
    --dirs) num "$1" "$2"; DIRS=$2; shift 2 ;;
    --handles) num "$1" "$2"; HANDLES=$2; shift 2 ;;
    --handle-mode) MODE=$2; shift 2 ;;
    --cold-streams) num "$1" "$2"; COLD_STREAMS=$2; shift 2 ;;
    --warm-streams) num "$1" "$2"; WARM_STREAMS=$2; shift 2 ;;
    --warm-handles) num "$1" "$2"; WARM_HANDLES=$2; shift 2 ;;
    --seconds) num "$1" "$2"; SECONDS_=$2; shift 2 ;;
    --retry-ms) num "$1" "$2"; RETRY_MS=$2; shift 2 ;;
    --handle-deadline) num "$1" "$2"; HANDLE_DEADLINE=$2; shift 2 ;;
    --scan-limit) num "$1" "$2"; SCAN_LIMIT=$2; shift 2 ;;
    --scan-waiters) num "$1" "$2"; SCAN_WAITERS=$2; shift 2 ;;
    --scan-wait-ms) num "$1" "$2"; SCAN_WAIT_MS=$2; shift 2 ;;
    --server-args) SERVER_ARGS=$2; shift 2 ;;
    --label) LABEL=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --quick) FILES=20000 DIRS=1000 HANDLES=5000 SECONDS_=3; shift ;;
    -h | --help) sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1" ;;
    esac
done
case $MODE in kernel | path) ;; *) die "--handle-mode kernel|path" ;; esac
[ "$FILES" -ge 1 ] && [ "$FILES" -le 20000000 ] || die "--files must be 1..20000000"
[ "$DIRS" -ge 1 ] || die "--dirs must be >= 1"
[ "$HANDLES" -ge 1 ] && [ "$HANDLES" -le $((FILES + DIRS)) ] || die "--handles must be 1..files+dirs"
[ "$SECONDS_" -ge 1 ] && [ "$SECONDS_" -le 600 ] || die "--seconds must be 1..600"
[ "$HANDLE_DEADLINE" -ge 1 ] && [ "$HANDLE_DEADLINE" -le 600 ] || die "--handle-deadline must be 1..600"
case "$WORK" in /tmp/?*) ;; *) die "--work must be under /tmp (it is deleted)" ;; esac
[ "$(id -u)" = 0 ] || die "must run as root (loop device, mount, drop_caches)"
[ -n "$LABEL" ] || LABEL="rnfsd-$MODE"
read -r -a EXTRA <<<"$SERVER_ARGS"

# shellcheck source=bench-lib.sh
. "$HERE/bench-lib.sh"
ensure_tools "$ROOT"
BENCH=$(readlink -f "$BENCH") RNFSD=$(readlink -f "$RNFSD")

rm -rf "$WORK"
mkdir -p "$WORK"
[ -n "$OUT" ] || OUT=$WORK/out
mkdir -p "$OUT"
OUT=$(readlink -f "$OUT")
RESULTS=$OUT/results.jsonl
: >"$RESULTS"
STATE=$WORK/state
cleanup() {
    stop_rnfsd
    loopfs_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Bounds: making and walking the tree scale with F; the storm with S and
# the per-handle deadline.
PREP_TIMEOUT=$((600 + FILES / 500))
WALK_SECONDS=$((300 + FILES / 2000))
STORM_TIMEOUT=$((SECONDS_ * 3 + HANDLE_DEADLINE + 600))

CONFIG=()
if [ -n "$SCAN_LIMIT$SCAN_WAITERS$SCAN_WAIT_MS" ]; then
    {
        echo "[server]"
        [ -z "$SCAN_LIMIT" ] || echo "handle_scan_limit = $SCAN_LIMIT"
        [ -z "$SCAN_WAITERS" ] || echo "handle_scan_waiters = $SCAN_WAITERS"
        [ -z "$SCAN_WAIT_MS" ] || echo "handle_scan_wait_ms = $SCAN_WAIT_MS"
    } >"$WORK/rnfsd.toml"
    cp "$WORK/rnfsd.toml" "$OUT/rnfsd.toml"
    CONFIG=(--config "$WORK/rnfsd.toml")
fi
SERVE_ARGS=(--handle-mode "$MODE" "${CONFIG[@]}" "${EXTRA[@]}")

{
    echo "date: $(date -Is)"
    echo "host: $(uname -srm), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
    echo "rnfsd: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (modified tree)')"
    echo "tree: $FILES files in $DIRS directories; handles: $HANDLES; handle mode: $MODE"
    echo "storm: $COLD_STREAMS cold streams, $WARM_STREAMS warm streams on $WARM_HANDLES handles, $SECONDS_ s, retry $RETRY_MS ms, per-handle deadline $HANDLE_DEADLINE s"
    echo "rnfsd serve ... ${SERVE_ARGS[*]}"
    [ -z "${CONFIG[*]}" ] || sed 's/^/config: /' "$WORK/rnfsd.toml"
    echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/machine.txt"
cat "$OUT/machine.txt" >&2

fresh_ext4 $(((FILES + DIRS) * 12 / 10 + 100000)) $((FILES * 4096))
log "preparing $FILES files in $DIRS directories"
timeout "$PREP_TIMEOUT" "$BENCH" prepare "$FS/export" --files "$FILES" --dirs "$DIRS" --threads "$(nproc)" >&2

start_rnfsd "$FS/export" "$STATE" "$OUT/rnfsd.log" "${SERVE_ARGS[@]}"
log "rnfsd $SERVER_PID on port $SERVER_PORT; saving $HANDLES handles"
timeout $((WALK_SECONDS + 60)) "$BENCH" handles --addr "127.0.0.1:$SERVER_PORT" --export "$FS/export" \
    --count "$HANDLES" --out "$OUT/handles.hex" --tree-limit $((FILES + DIRS + 1)) \
    --max-seconds "$WALK_SECONDS" --label "$LABEL" --json "$RESULTS" >&2
stop_rnfsd

# The reboot, as far as the filesystem is concerned: no dentry or inode of
# the tree is cached when the server comes back.
D0=$(dentries)
sync
echo 2 >/proc/sys/vm/drop_caches
D1=$(dentries)
log "dropped the host's dentry and inode caches: $D0 -> $D1 dentries"

start_rnfsd "$FS/export" "$STATE" "$OUT/rnfsd.log" "${SERVE_ARGS[@]}"
log "rnfsd restarted ($SERVER_PID, port $SERVER_PORT, same state dir); storm"
timeout "$STORM_TIMEOUT" "$BENCH" storm --addr "127.0.0.1:$SERVER_PORT" --export "$FS/export" \
    --handles-file "$OUT/handles.hex" --cold-streams "$COLD_STREAMS" \
    --warm-streams "$WARM_STREAMS" --warm-handles "$WARM_HANDLES" --seconds "$SECONDS_" \
    --retry-ms "$RETRY_MS" --handle-deadline "$HANDLE_DEADLINE" --state-dir "$STATE" \
    --server-pid "$SERVER_PID" --label "$LABEL" --json "$RESULTS" | tee "$OUT/storm.txt"
stop_rnfsd

jq -c --arg mode "$MODE" --argjson files "$FILES" --argjson dirs "$DIRS" \
    --argjson d0 "$D0" --argjson d1 "$D1" \
    'select(.kind == "storm") + {handle_mode: $mode, tree_files: $files, tree_dirs: $dirs,
      dentries_before_drop: $d0, dentries_after_drop: $d1}' "$RESULTS" >"$OUT/summary.json"
echo
echo "== cold-handle storm: $FILES files, $HANDLES cold handles, handle mode $MODE =="
jq -r '
  "warm GETATTR p50/p99/max, µs: alone \(.baseline.p50_us)/\(.baseline.p99_us)/\(.baseline.max_us), beside as many hit-only streams \(.control.p50_us)/\(.control.p99_us)/\(.control.max_us), during the storm \(.storm.p50_us)/\(.storm.p99_us)/\(.storm.max_us)",
  "p99 during/alone: \(.p99_ratio * 100 | round / 100)x (p50 \(.p50_ratio * 100 | round / 100)x); p99 during/beside hits: \(.p99_ratio_control * 100 | round / 100)x; warm errors \(.storm.errors), of them JUKEBOX \(.storm.jukebox)",
  "storm: \(.storm_seconds * 100 | round / 100) s, \(if .cold_all_done then "every cold handle done" else "stopped at --seconds" end); cold handles \(.cold_handles): ok \(.cold.ok), stale \(.cold.stale), timed out \(.cold.timed_out), abandoned \(.cold.abandoned) (retried up to \(.cold.abandoned_max_wait_ms // 0) ms), errors \(.cold.errors), unused \(.cold.unused)",
  "JUKEBOX replies \(.cold.jukebox_replies); time to resolve p50 \(.cold.resolve_p50_us / 1000) ms, p99 \(.cold.resolve_p99_us / 1000) ms",
  (if .server then "server: walks \(.server.after.scan_passes - .server.before.scan_passes), calls waited \(.server.after.scans_waited - .server.before.scans_waited), JUKEBOX at once (too many waiting) \(.server.after.scans_busy - .server.before.scans_busy)" else (.server_note // "") end)
' "$OUT/summary.json"
echo "results: $OUT (results.jsonl, storm.txt, summary.json, machine.txt, rnfsd.log)"
