#!/usr/bin/env bash
# Mount and cache reclaim at full size (the bounded-reclaim lesson,
# docs/lessons.md: an unbounded dentry LRU scanned under one lock made NFS
# mounts take a minute): with every cache at its configured maximum, do MNT
# and GETATTR of the export root keep p99 <= 1 ms and within 2x of an empty
# cache, and does a reclaim burst leave warm GETATTR p99 within 2x? And
# what does a cache entry cost in memory? See docs/benchmarks.md ("Mount
# and reclaim at full size").
#
#   scripts/cache-reclaim-mount.sh [--files F] [--dirs D] [--file-size B]
#       [--path-cache-entries N] [--reps R] [--seconds S]
#       [--fill-handles M] [--burst-handles N] [--burst-streams N]
#       [--server-args "ARGS"] [--out DIR] [--work DIR] [--quick]
#
# F files (default 10,000,000) in D directories (default F/10,000: at most
# about 10,000 entries in any directory, the root included), empty
# (--file-size 0: the question is about metadata caches, and 10 million 4 KiB
# data blocks would be 40 GB), on a fresh ext4 filesystem on a loop device
# made with enough inodes (mkfs -N). rnfsd runs with --path-cache-entries
# N (default (F + D) x 1.1, so the location map holds the whole tree; its
# two generations rotate per shard) and default descriptor caches. Then:
#   (a) empty caches: `rnfsd-bench mount --reps R` (MNT + GETATTR of the
#       root, p50/p99), the server's VmRSS and admin snapshot;
#   (b) `rnfsd-bench handles` walks the whole tree (READDIRPLUS, which
#       records every object's location) and saves disjoint handle sets of
#       regular files; VmRSS before and after the walk gives bytes per
#       location entry; then GETATTR and READ of M (default 50,000) of
#       them, more than the object and open-file caches and the descriptor
#       budget hold, fill the descriptor caches (VmRSS again: bytes per
#       descriptor-cache entry);
#   (c) full caches: `mount --reps R` again;
#   (d) warm GETATTR (1,000 handles, 4 streams, S seconds) alone; while a
#       second bench hits 1,000 other cached handles (control: the same
#       CPU load, no misses); and while it misses over N (default 500,000)
#       handles (inserts, evictions, background reclaim).
# --quick: F = 200,000, M = 20,000, N = 100,000, R = 300, S = 3, and 3 s
# per fill mix (checks the set-up; about a minute).
#
# Needs root (loop device, mount). Every step runs under timeout(1); the
# server is stopped, the filesystem unmounted and the loop device detached
# on exit. Output in --out (default /tmp/rnfsd-cache-reclaim/out): results.jsonl
# (every bench row), snap-*.json (admin snapshots), summary.json,
# summary.md, machine.txt, rnfsd.log.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BENCH=$ROOT/target/release/rnfsd-bench
RNFSD=$ROOT/target/release/rnfsd
FILES=10000000 DIRS= FILE_SIZE=0
PATH_CACHE=
REPS=1000
SECONDS_=10
FILL=50000 BURST=500000 BURST_STREAMS=16
WARM=1000
SERVER_ARGS=
OUT=
WORK=/tmp/rnfsd-cache-reclaim
QUICK=

die() { echo "cache-reclaim-mount.sh: $*" >&2; exit 2; }
log() { echo "cache-reclaim-mount.sh $(date +%T): $*" >&2; }
num() { [[ $2 =~ ^[0-9]+$ ]] || die "$1 takes a whole number"; }
while [ $# -gt 0 ]; do
    case "$1" in
    --files) num "$1" "$2"; FILES=$2; shift 2 ;;
    --dirs) num "$1" "$2"; DIRS=$2; shift 2 ;;
    --file-size) num "$1" "$2"; FILE_SIZE=$2; shift 2 ;;
    --path-cache-entries) num "$1" "$2"; PATH_CACHE=$2; shift 2 ;;
    --reps) num "$1" "$2"; REPS=$2; shift 2 ;;
    --seconds) num "$1" "$2"; SECONDS_=$2; shift 2 ;;
    --fill-handles) num "$1" "$2"; FILL=$2; shift 2 ;;
    --burst-handles) num "$1" "$2"; BURST=$2; shift 2 ;;
    --burst-streams) num "$1" "$2"; BURST_STREAMS=$2; shift 2 ;;
    --server-args) SERVER_ARGS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --quick) QUICK=1 FILES=200000 FILL=20000 BURST=100000 REPS=300 SECONDS_=3; shift ;;
    -h | --help) sed -n '2,41p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1" ;;
    esac
done
[ "$FILES" -ge 1000 ] && [ "$FILES" -le 20000000 ] || die "--files must be 1000..20000000"
[ -n "$DIRS" ] || DIRS=$(((FILES + 9999) / 10000))
[ "$DIRS" -ge 1 ] || die "--dirs must be >= 1"
[ -n "$PATH_CACHE" ] || PATH_CACHE=$(((FILES + DIRS) * 11 / 10))
[ "$FILE_SIZE" -le 16777216 ] || die "--file-size is at most 16 MiB"
[ "$REPS" -ge 1 ] && [ "$REPS" -le 100000 ] || die "--reps must be 1..100000"
[ "$SECONDS_" -ge 1 ] && [ "$SECONDS_" -le 600 ] || die "--seconds must be 1..600"
[ "$BURST_STREAMS" -ge 1 ] && [ "$BURST_STREAMS" -le 256 ] || die "--burst-streams must be 1..256"
# Four disjoint sets of regular files from one walk: fill, warm, control, burst.
[ $((FILL + 2 * WARM + BURST)) -le "$FILES" ] ||
    die "--fill-handles + --burst-handles + $((2 * WARM)) must not exceed --files"
case "$WORK" in /tmp/?*) ;; *) die "--work must be under /tmp (it is deleted)" ;; esac
[ "$(id -u)" = 0 ] || die "must run as root (loop device, mount)"
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
BURST_PID=
cleanup() {
    [ -z "$BURST_PID" ] || kill -TERM "$BURST_PID" 2>/dev/null || true
    stop_rnfsd
    loopfs_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Bounds, scaled by the tree where the work is.
PREP_TIMEOUT=$((600 + FILES / 1000))
WALK_SECONDS=$((300 + FILES / 2000))
RUN_TIMEOUT=$((SECONDS_ * 3 + 600))
# Enough for about twice the fill set's calls at a few thousand misses/s.
FILL_SECONDS=$((FILL / 5000 + 2))
[ -z "$QUICK" ] || FILL_SECONDS=3
SERVE_ARGS=(--path-cache-entries "$PATH_CACHE" "${EXTRA[@]}")
B() { timeout "$1" "$BENCH" "${@:2}"; }
TARGET=()
snapshot() { # NAME: the admin snapshot, saved as snap-NAME.json
    timeout 20 "$RNFSD" stats --json --state-dir "$STATE" >"$OUT/snap-$1.json"
}

{
    echo "date: $(date -Is)"
    echo "host: $(uname -srm), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
    echo "rnfsd: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (modified tree)')"
    echo "tree: $FILES files of $FILE_SIZE bytes in $DIRS directories"
    echo "rnfsd serve ... ${SERVE_ARGS[*]}"
    echo "mount reps: $REPS; fill: $FILL handles; warm: $WARM handles, 4 streams, $SECONDS_ s; burst: $BURST handles, $BURST_STREAMS streams"
    echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/machine.txt"
cat "$OUT/machine.txt" >&2

fresh_ext4 $(((FILES + DIRS) * 11 / 10 + 100000)) $((FILES * ((FILE_SIZE + 4095) / 4096) * 4096))
log "preparing $FILES files in $DIRS directories"
T0=$(date +%s)
B "$PREP_TIMEOUT" prepare "$FS/export" --files "$FILES" --dirs "$DIRS" \
    --file-size "$FILE_SIZE" --threads "$(nproc)" >&2
log "tree made in $(($(date +%s) - T0)) s"

start_rnfsd "$FS/export" "$STATE" "$OUT/rnfsd.log" "${SERVE_ARGS[@]}"
TARGET=(--addr "127.0.0.1:$SERVER_PORT" --export "$FS/export" --json "$RESULTS")
log "rnfsd $SERVER_PID on port $SERVER_PORT"

# (a) empty caches.
snapshot empty
RSS_EMPTY=$(rss_kib "$SERVER_PID")
log "(a) empty caches: MNT + GETATTR x $REPS (VmRSS $RSS_EMPTY KiB)"
B "$RUN_TIMEOUT" mount "${TARGET[@]}" --reps "$REPS" --label empty --server-pid "$SERVER_PID"

# (b) the location map: one READDIRPLUS walk of the whole tree, which also
# gives the handle sets (regular files).
RSS_WALK0=$(rss_kib "$SERVER_PID")
log "(b) walking the tree (VmRSS before $RSS_WALK0 KiB)"
B $((WALK_SECONDS + 60)) handles "${TARGET[@]}" --label walk --files-only \
    --tree-limit $((FILES + DIRS + 1)) --max-seconds "$WALK_SECONDS" \
    --count "$FILL,$WARM,$WARM,$BURST" \
    --out "$WORK/fill.hex,$WORK/warm.hex,$WORK/control.hex,$WORK/burst.hex"
RSS_WALK1=$(rss_kib "$SERVER_PID")
snapshot walked
log "(b) filling the descriptor caches: GETATTR and READ of $FILL files, ${FILL_SECONDS} s each"
for mix in getattr read; do
    B "$RUN_TIMEOUT" run "${TARGET[@]}" --mix "$mix" --handles-file "$WORK/fill.hex" \
        --streams 16 --conns 4 --seconds "$FILL_SECONDS" --label "fill" --server-pid "$SERVER_PID"
done
RSS_FULL=$(rss_kib "$SERVER_PID")
snapshot full

# (c) full caches.
log "(c) full caches: MNT + GETATTR x $REPS (VmRSS $RSS_FULL KiB)"
B "$RUN_TIMEOUT" mount "${TARGET[@]}" --reps "$REPS" --label full --server-pid "$SERVER_PID"

# (d) warm GETATTR alone, beside a hit-only burst, beside a miss burst.
# The burst runs in a second process, started first and lasting longer
# than the warm run (its own warm-up is a tenth of its seconds).
warm_run() { # LABEL
    B "$RUN_TIMEOUT" run "${TARGET[@]}" --mix getattr --handles-file "$WORK/warm.hex" \
        --streams 4 --conns 1 --seconds "$SECONDS_" --label "$1" --server-pid "$SERVER_PID"
}
with_burst() { # LABEL HANDLES_FILE
    local bs=$((SECONDS_ + 3))
    B "$RUN_TIMEOUT" run "${TARGET[@]}" --mix getattr --handles-file "$2" \
        --streams "$BURST_STREAMS" --conns 4 --seconds "$bs" --label "burst-$1" \
        >"$OUT/burst-$1.txt" 2>&1 &
    BURST_PID=$!
    sleep "$(awk -v s="$bs" 'BEGIN { print 1 + s / 10 }')"
    warm_run "warm-$1"
    wait "$BURST_PID" || log "the $1 burst failed (see $OUT/burst-$1.txt)"
    BURST_PID=
}
log "(d) warm GETATTR alone"
warm_run warm-alone
snapshot burst0
log "(d) warm GETATTR beside a burst of hits ($WARM other cached handles, $BURST_STREAMS streams)"
# Touch the control set first so its burst is all hits.
B "$RUN_TIMEOUT" run --addr "127.0.0.1:$SERVER_PORT" --export "$FS/export" --mix getattr \
    --handles-file "$WORK/control.hex" --streams 4 --seconds 1 --label touch >/dev/null
with_burst control "$WORK/control.hex"
snapshot burst1
log "(d) warm GETATTR beside a burst of misses ($BURST handles, $BURST_STREAMS streams)"
with_burst misses "$WORK/burst.hex"
snapshot burst2
RSS_END=$(rss_kib "$SERVER_PID")
stop_rnfsd

# ---- summary ------------------------------------------------------------
row() { # LABEL WORKLOAD FIELD: one field of one bench row
    jq -rs --arg l "$1" --arg w "$2" --arg f "$3" \
        '[.[] | select(.label == $l and ((.workload // .mix) | ascii_downcase) == $w)][-1][$f] // empty' "$RESULTS"
}
cache() { # SNAP NAME FIELD
    jq -r --arg n "$2" --arg f "$3" '[.exports[0].caches[] | select(.name == $n)][0][$f] // 0' "$OUT/snap-$1.json"
}
WALKED=$(row walk walk count)
WALK_S=$(row walk walk seconds)
# The location map is the snapshot's "locations" cache where the server
# lists it (older servers did not: then every walked object counts, which
# the map holds when it is large enough: PATH_CACHE >= walked).
LOC_SNAP=$(jq -r '[.exports[0].caches[] | select(.name == "locations") | .entries] | first // empty' "$OUT/snap-walked.json")
if [ -n "$LOC_SNAP" ]; then
    LOC_ENTRIES=$LOC_SNAP LOC_SRC="snapshot"
else
    LOC_ENTRIES=$((WALKED + 1 < PATH_CACHE ? WALKED : PATH_CACHE)) LOC_SRC="objects walked (the snapshot does not list the location map)"
fi
DESC_ADDED=$(( $(cache full objects entries) + $(cache full files entries) - $(cache walked objects entries) - $(cache walked files entries) ))

jq -n \
    --argjson files "$FILES" --argjson dirs "$DIRS" --argjson path_cache "$PATH_CACHE" \
    --argjson rss_empty "$RSS_EMPTY" --argjson rss_walk0 "$RSS_WALK0" --argjson rss_walk1 "$RSS_WALK1" \
    --argjson rss_full "$RSS_FULL" --argjson rss_end "$RSS_END" \
    --argjson walked "$WALKED" --argjson walk_s "$WALK_S" \
    --argjson loc "$LOC_ENTRIES" --arg loc_src "$LOC_SRC" --argjson desc "$DESC_ADDED" \
    --slurpfile rows "$RESULTS" \
    --slurpfile s_empty "$OUT/snap-empty.json" --slurpfile s_full "$OUT/snap-full.json" \
    --slurpfile b0 "$OUT/snap-burst0.json" --slurpfile b1 "$OUT/snap-burst1.json" \
    --slurpfile b2 "$OUT/snap-burst2.json" '
  def r($l; $w): [$rows[] | select(.label == $l and ((.workload // .mix) | ascii_downcase) == $w)][-1];
  def lat($l; $w): r($l; $w) | {p50_us, p99_us, count: (.count // .calls)};
  def ratio($a; $b): if $b > 0 then ($a / $b * 100 | round / 100) else null end;
  def caches($s): [$s[0].exports[0].caches[] | {name, capacity, entries, inserts, evicted_inline, evicted_reclaim, refused}];
  def delta($a; $b): [$b[0].exports[0].caches[] as $c
      | ($a[0].exports[0].caches[] | select(.name == $c.name)) as $p
      | {name: $c.name, misses: ($c.misses - $p.misses), inserts: ($c.inserts - $p.inserts),
         evicted_inline: ($c.evicted_inline - $p.evicted_inline),
         evicted_reclaim: ($c.evicted_reclaim - $p.evicted_reclaim), refused: ($c.refused - $p.refused)}];
  {
    tree: {files: $files, dirs: $dirs}, path_cache_entries: $path_cache,
    empty: {mnt: lat("empty"; "mount-mnt"), getattr: lat("empty"; "mount-getattr"), rss_kib: $rss_empty,
            caches: caches($s_empty), fds_cached: $s_empty[0].exports[0].fds_cached},
    walk: {objects: $walked, seconds: $walk_s, rss_before_kib: $rss_walk0, rss_after_kib: $rss_walk1,
           location_entries: $loc, location_entries_from: $loc_src,
           bytes_per_location_entry: (if $loc > 0 then (($rss_walk1 - $rss_walk0) * 1024 / $loc | round) else null end)},
    full: {mnt: lat("full"; "mount-mnt"), getattr: lat("full"; "mount-getattr"), rss_kib: $rss_full,
           caches: caches($s_full), fds_cached: $s_full[0].exports[0].fds_cached, fd_limit: $s_full[0].exports[0].fd_limit,
           descriptor_entries_added: $desc,
           bytes_per_descriptor_entry: (if $desc > 0 then (($rss_full - $rss_walk1) * 1024 / $desc | round) else null end)},
    ratios: {mnt_p99_full_over_empty: ratio(r("full"; "mount-mnt").p99_us; r("empty"; "mount-mnt").p99_us),
             getattr_p99_full_over_empty: ratio(r("full"; "mount-getattr").p99_us; r("empty"; "mount-getattr").p99_us)},
    burst: {alone: lat("warm-alone"; "getattr"), control: lat("warm-control"; "getattr"), misses: lat("warm-misses"; "getattr"),
            control_burst: (r("burst-control"; "getattr") | {calls_per_s, p99_us, errors}),
            miss_burst: (r("burst-misses"; "getattr") | {calls_per_s, p99_us, errors}),
            p99_misses_over_alone: ratio(r("warm-misses"; "getattr").p99_us; r("warm-alone"; "getattr").p99_us),
            p99_misses_over_control: ratio(r("warm-misses"; "getattr").p99_us; r("warm-control"; "getattr").p99_us),
            p99_control_over_alone: ratio(r("warm-control"; "getattr").p99_us; r("warm-alone"; "getattr").p99_us),
            server_during_control: delta($b0; $b1), server_during_misses: delta($b1; $b2)},
    rss_end_kib: $rss_end
  }' >"$OUT/summary.json"

# The requirements, and the summary as Markdown.
S=$OUT/summary.json
q() { jq -r "$1" "$S"; }
verdict() { # VALUE LIMIT -> meets / MISSES
    awk -v v="$1" -v l="$2" 'BEGIN { if (v != "" && v != "null" && v + 0 <= l + 0) print "meets"; else print "MISSES" }'
}
{
    echo "## Mount and cache reclaim at full size: $(q .tree.files) files in $(q .tree.dirs) directories"
    echo
    echo "rnfsd $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown), --path-cache-entries $(q .path_cache_entries), $(date -Is); $(nproc) CPUs"
    echo
    echo "| measure | empty caches | full caches | full/empty | requirement |"
    echo "|---|---:|---:|---:|---|"
    for c in mnt getattr; do
        e=$(q ".empty.$c.p99_us") f=$(q ".full.$c.p99_us") r=$(q ".ratios.${c}_p99_full_over_empty")
        echo "| $(echo "$c" | tr a-z A-Z) p50 / p99 µs ($(q ".full.$c.count") calls) | $(q ".empty.$c.p50_us") / $e | $(q ".full.$c.p50_us") / $f | $r | p99 <= 1000 µs: $(verdict "$f" 1000); <= 2x: $(verdict "$r" 2) |"
    done
    echo "| server VmRSS | $(q .empty.rss_kib) KiB | $(q .full.rss_kib) KiB | | |"
    echo
    echo "| cache (full) | capacity | entries | inserts | evicted inline | evicted by reclaim | refused |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    q '.full.caches[] | "| \(.name) | \(.capacity) | \(.entries) | \(.inserts) | \(.evicted_inline) | \(.evicted_reclaim) | \(.refused) |"'
    echo "| location map | $(q .path_cache_entries) | $(q .walk.location_entries) ($(q .walk.location_entries_from)) | | | | |"
    echo
    echo "Descriptors cached: $(q .full.fds_cached) of a budget of $(q .full.fd_limit)."
    echo
    echo "Memory (upper bounds: VmRSS deltas include allocator slack and hash-table growth):"
    echo "- location map: $(q .walk.bytes_per_location_entry) bytes per entry ($(q .walk.rss_before_kib) -> $(q .walk.rss_after_kib) KiB over $(q .walk.location_entries) entries; walk of $(q .walk.objects) objects in $(q .walk.seconds | cut -c1-6) s)"
    echo "- object and open-file caches: $(q .full.bytes_per_descriptor_entry) bytes per entry ($(q .walk.rss_after_kib) -> $(q .full.rss_kib) KiB over $(q .full.descriptor_entries_added) entries; the kernel's side of each descriptor is not in VmRSS)"
    echo
    echo "| warm GETATTR, 1000 handles, 4 streams | p50 µs | p99 µs | calls | p99 / alone |"
    echo "|---|---:|---:|---:|---:|"
    echo "| alone | $(q .burst.alone.p50_us) | $(q .burst.alone.p99_us) | $(q .burst.alone.count) | 1 |"
    echo "| beside a burst of hits (control) | $(q .burst.control.p50_us) | $(q .burst.control.p99_us) | $(q .burst.control.count) | $(q .burst.p99_control_over_alone) |"
    echo "| beside a burst of misses (reclaim) | $(q .burst.misses.p50_us) | $(q .burst.misses.p99_us) | $(q .burst.misses.count) | $(q .burst.p99_misses_over_alone) |"
    echo
    echo "Bursts: hits $(q '.burst.control_burst.calls_per_s | round') calls/s, misses $(q '.burst.miss_burst.calls_per_s | round') calls/s ($(q .burst.miss_burst.errors) errors)."
    q '.burst.server_during_misses[] | "During the miss burst, \(.name): \(.misses) misses, \(.inserts) inserts, \(.evicted_inline) evicted inline, \(.evicted_reclaim) by reclaim, \(.refused) refused."'
    echo
    echo "Reclaim burst: warm p99 beside misses / alone = $(q .burst.p99_misses_over_alone) (<= 2x: $(verdict "$(q .burst.p99_misses_over_alone)" 2)); beside misses / beside hits = $(q .burst.p99_misses_over_control) (the share of the reclaim itself, CPU contention taken out)."
} >"$OUT/summary.md"
echo
cat "$OUT/summary.md"
echo
echo "results: $OUT (results.jsonl, summary.json, summary.md, snap-*.json, burst-*.txt, machine.txt, rnfsd.log)"
