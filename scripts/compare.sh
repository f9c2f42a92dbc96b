#!/usr/bin/env bash
# rnfsd against nfs-ganesha (and the local filesystem), every workload of
# rnfsd-bench, side by side: for each round and each workload, rnfsd then
# ganesha (A B A B ...), each run on a fresh ext4 filesystem of its own; then
# medians, run-to-run ranges and ratios (`rnfsd-bench report`) and charts.
# See docs/benchmarks.md ("rnfsd against nfs-ganesha").
#
#   scripts/compare.sh [--rounds 3] [--workloads getattr,traverse,...]
#       [--servers rnfsd,ganesha] [--no-local] [--quick] [--fresh-fs yes|no] [--loop-dio]
#       [--out DIR] [--work DIR] [--bench PATH] [--rnfsd PATH]
#       [--variant NAME=ARGS]... [--variant-bin NAME=PATH]... [--mount-files N]
#       [--seed-size] [--no-pin-client]
#       [--handles N[,M]] [--io-streams 1,4,16] [--io-mib 256] [--io-passes 4]
#       [--io-block-kib 1024]
#       [--fsmark-streams 16] [--fsmark-conns 4] [--vers 3|4.1|3,4.1]
#
# Workloads (default all): getattr traverse create mkdir fsmark mount write
# (and, when named, fsmark-sync: fsmark with one FILE_SYNC WRITE per file
# instead of UNSTABLE + COMMIT, what the Linux client sends for a small
# file's fsync)
# read null getattr-h access-h lookup-h read-h write-h open-read-close-h
# (NFSv4.1 only: OPEN, READ of 4 KiB, CLOSE, three compounds per file).
# The -h ones are
# `rnfsd-bench run` mixes at three load shapes each: 1 stream on 1
# connection (one call in flight), 16 and 64 streams on 1 connection (one
# host, many calls in flight), 16 and 64 streams with a connection each
# (--conns 0: many hosts, one call each). The -h ones send every call to
# one of --handles N objects (default 1000, a working set smaller than any
# server cache) sampled across the tree; "--handles 1000,100000" runs each
# count, on a tree big enough for the largest (the bounded-wakeup lesson's
# rsync tree when it fits, docs/lessons.md: 161,480 files in 10,841 directories; files of 4 KiB for read-h and
# write-h). traverse runs at the same three shapes; getattr keeps the
# export root's handle and its old stream counts, as before.
# With create and fsmark the local-filesystem reference (local-create,
# local-fsmark: the same work done with syscalls) runs in each round too,
# unless --no-local. With create also `local-sync`: the same creates and
# removes each waiting for a journal commit begun after it, shared by
# concurrent ones (local-create --group-commit $LOCAL_COMMITTERS, default
# 1 commit thread, the server's own `rnfsd_fs::owed`): what a `sync` export's creates can reach on this
# disk. With fsmark, `local-sync` is local-fsmark --sync-create: each file
# fsynced once made, then written and fsynced, the two syncs a `sync`
# export owes for a CREATE and a COMMIT. --quick: small counts, for checking the script.
# --servers ceiling adds `rnfsd-bench ceiling`, a no-work RPC server (MNT
# and empty successes only), to the null workload: the machine's ceiling
# for calls/s at each shape, measured in the same alternation (other
# workloads skip it).
# --variant NAME=ARGS adds a server `rnfsd-NAME`: rnfsd with extra serve
# arguments (e.g. --variant nopin=--no-pin-loops), alternated like the rest;
# name it in --servers to choose its place in the order.
# --variant-bin NAME=PATH: the server `rnfsd-NAME` runs the binary PATH (an
# older build, for before/after figures in one alternated run); combine
# with --variant NAME=ARGS for extra arguments.
# --mount-files N: the mount workload's tree has N files (in N/20
# directories) instead of the traverse tree, all walked before the MNTs so
# the server's caches hold about 1.05 N entries (mount time against cache
# size: the bounded-reclaim lesson, docs/lessons.md).
# --io-streams LIST: streams of the read and write workloads (default
# 1,4,16; each its own fresh file; read reads it 4 times over, from the
# page cache). --io-mib N: size of each stream's file (default 256);
# --io-passes N: times read reads it (default 4). --io-block-kib N: bytes
# per READ and WRITE call (default 1024, at most the server's rtmax/wtmax;
# other sizes name the rows write-Nk, read-Nk).
# --fsmark-streams LIST: fsmark's streams (default 16).
# --fsmark-conns N: the connections fsmark's (and fsmark-sync's) streams
# share (default 4: one client host); 0: a connection per stream (many
# hosts, one process each), rows marked "(1/stream)".
# --loop-dio: the loop device under each fresh filesystem uses direct I/O
# (losetup --direct-io=on): a journal commit's cache flush then does not
# wait for the host to write back every page of the image file.
# --no-pin-client: the one-stream shape's client thread is not kept on one
# CPU (it is by default: rnfsd-bench --pin-one-stream).
# --vers 4.1: every bench command speaks NFSv4.1 (`rnfsd-bench --vers
# 4.1`: a session per connection, rows named "<workload>-v4.1") and ganesha
# serves it (ganesha.sh --v4); fsmark, fsmark-sync, mount and the ceiling
# server are NFSv3 only, so the default workloads leave them out.
# --vers 3,4.1: each server runs each workload over NFSv3 then NFSv4.1 in
# every round (a fresh filesystem each), so the two versions are measured
# alternated in one run; a workload one version lacks is skipped for it.
# --seed-size: getattr/traverse/mount on the bounded-wakeup lesson's rsync
# tree (161,480 files in 10,841 directories) instead of 20,000 files in 1,000.
#
# Needs root (namespaces for ganesha, loop mounts). Installs what is missing:
# nfs-ganesha, nfs-ganesha-vfs and rpcbind (scripts/ganesha.sh), e2fsprogs;
# builds target/release/{rnfsd,rnfsd-bench} if absent. Every bench run is
# bounded by its own counts, --max-seconds per phase, and timeout(1); all
# traffic stays on 127.0.0.1 (ganesha's inside its private namespace).
#
# Output in --out (default /tmp/rnfsd-compare/out): results.jsonl (every
# row), report.md (the tables), summary.json, getattr.svg, traverse.svg
# (and null.svg, access.svg, lookup.svg with those workloads), machine.txt,
# compare.log.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BENCH=$ROOT/target/release/rnfsd-bench
RNFSD=$ROOT/target/release/rnfsd
ROUNDS=3
WORKLOADS=getattr,traverse,create,mkdir,fsmark,mount,write,read
WORKLOADS_ARG=
VERS=3
SERVERS=rnfsd,ganesha
LOCAL=1
QUICK=
FRESH_FS=yes
LOOP_DIO=
WORK=/tmp/rnfsd-compare
OUT=
declare -A VARIANT=()
declare -A VARIANT_BIN=()
MOUNT_FILES=
SEED_SIZE=
# The one-stream shape keeps its client thread on one CPU (rnfsd-bench
# --pin-one-stream; --no-pin-client: not): unpinned, the scheduler moves it
# to whichever vCPU is idle at each wakeup and the figure is bimodal.
PIN_ONE=(--pin-one-stream)
IO_MIB_ARG= IO_PASSES_ARG= IO_BLOCK_KIB=1024
HANDLES=1000
IO_STREAMS_ARG=
FSMARK_STREAMS_ARG=
FSMARK_CONNS=4

die() { echo "compare.sh: $*" >&2; exit 2; }
log() { echo "compare.sh $(date +%T): $*" >&2; }
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --workloads) WORKLOADS_ARG=$2; shift 2 ;;
    --servers) SERVERS=$2; shift 2 ;;
    --no-local) LOCAL=; shift ;;
    --quick) QUICK=1; shift ;;
    --fresh-fs) FRESH_FS=$2; shift 2 ;;
    --loop-dio) LOOP_DIO=yes; shift ;;
    --out) OUT=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --bench) BENCH=$2; shift 2 ;;
    --rnfsd) RNFSD=$2; shift 2 ;;
    --mount-files) MOUNT_FILES=$2; shift 2 ;;
    --seed-size) SEED_SIZE=1; shift ;;
    --no-pin-client) PIN_ONE=(); shift ;;
    --variant)
        [[ $2 == [a-z0-9]*=* ]] || die "--variant NAME=ARGS"
        VARIANT[${2%%=*}]=${2#*=}
        [[ ,$SERVERS, == *,rnfsd-${2%%=*},* ]] || SERVERS+=",rnfsd-${2%%=*}"
        shift 2 ;;
    --variant-bin)
        [[ $2 == [a-z0-9]*=?* ]] || die "--variant-bin NAME=PATH"
        VARIANT_BIN[${2%%=*}]=$(readlink -f "${2#*=}")
        [ -x "${VARIANT_BIN[${2%%=*}]}" ] || die "--variant-bin: ${2#*=} is not executable"
        [ -n "${VARIANT[${2%%=*}]+x}" ] || VARIANT[${2%%=*}]=""
        [[ ,$SERVERS, == *,rnfsd-${2%%=*},* ]] || SERVERS+=",rnfsd-${2%%=*}"
        shift 2 ;;
    --handles) HANDLES=$2; shift 2 ;;
    --io-streams) IO_STREAMS_ARG=$2; shift 2 ;;
    --io-mib) IO_MIB_ARG=$2; shift 2 ;;
    --io-passes) IO_PASSES_ARG=$2; shift 2 ;;
    --io-block-kib) IO_BLOCK_KIB=$2; shift 2 ;;
    --fsmark-streams) FSMARK_STREAMS_ARG=$2; shift 2 ;;
    --fsmark-conns) FSMARK_CONNS=$2; shift 2 ;;
    --vers) VERS=$2; shift 2 ;;
    -h | --help) awk 'NR > 1 && /^set -euo/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1" ;;
    esac
done
[ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 10 ] || die "--rounds must be 1..10"
IFS=, read -r -a VL <<<"$VERS"
case "$VERS" in
3) ;;
# The NFSv3-only workloads leave the default set.
4.1 | 3,4.1) WORKLOADS=getattr,traverse,create,mkdir,write,read ;;
*) die "--vers 3|4.1|3,4.1" ;;
esac
# Appended to every bench command; ganesha's extra option (set_vers).
VERS_ARGS=() GANESHA_VERS=()
set_vers() { # 3|4.1
    case $1 in
    3) VERS_ARGS=() GANESHA_VERS=() ;;
    *) VERS_ARGS=(--vers "$1") GANESHA_VERS=(--v4) ;;
    esac
}
# Whether version $2 has workload $1.
vers_has() { # WORKLOAD VERS
    case $2:$1 in
    3:open-read-close-h) return 1 ;;
    3:*) return 0 ;;
    *:fsmark | *:fsmark-sync | *:mount) return 1 ;;
    esac
}
[ -z "$WORKLOADS_ARG" ] || WORKLOADS=$WORKLOADS_ARG
[[ $FSMARK_CONNS =~ ^[0-9]+$ ]] && [ "$FSMARK_CONNS" -le 64 ] || die "--fsmark-conns must be 0..64"
if [ -n "$MOUNT_FILES" ]; then
    [ "$MOUNT_FILES" -ge 1 ] && [ "$MOUNT_FILES" -le 2000000 ] || die "--mount-files must be 1..2000000"
fi
case "$FRESH_FS" in yes | no) ;; *) die "--fresh-fs yes|no" ;; esac
case "$WORK" in /tmp/?*) ;; *) die "--work must be under /tmp (it is deleted)" ;; esac
IFS=, read -r -a WL <<<"$WORKLOADS"
IFS=, read -r -a SV <<<"$SERVERS"
IFS=, read -r -a HL <<<"$HANDLES"
for w in "${WL[@]}"; do
    case $w in
    getattr | traverse | create | mkdir | fsmark | fsmark-sync | mount | write | read) ;;
    null | getattr-h | access-h | lookup-h | read-h | write-h | open-read-close-h) ;;
    *) die "unknown workload: $w" ;;
    esac
    ok=
    for v in "${VL[@]}"; do vers_has "$w" "$v" && ok=1; done
    [ -n "$ok" ] || die "workload $w is not in NFS version $VERS"
done
MAX_HANDLES=0
[ "${#HL[@]}" -ge 1 ] && [ "${#HL[@]}" -le 4 ] || die "--handles takes 1 to 4 counts"
for n in "${HL[@]}"; do
    [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 2000000 ] || die "--handles counts must be 1..2000000"
    [ "$n" -le "$MAX_HANDLES" ] || MAX_HANDLES=$n
done
for s in "${SV[@]}"; do
    case $s in
    rnfsd | ganesha | ceiling) ;;
    rnfsd-*) [ -n "${VARIANT[${s#rnfsd-}]+x}" ] || die "server $s needs --variant ${s#rnfsd-}=ARGS" ;;
    *) die "unknown server: $s" ;;
    esac
    [ "$s" != ceiling ] || [ "$VERS" = 3 ] || die "the ceiling server answers NFSv3 only (--vers $VERS)"
done
[ "$(id -u)" = 0 ] || die "must run as root (ganesha's namespace, loop mounts)"

# ---- sizes: the lessons' defaults, or small ones with --quick -------------
if [ -z "$QUICK" ]; then
    TREE_FILES=20000 TREE_DIRS=1000   # traverse/mount tree
    CALL_STREAMS=1,16,64 CALL_SECONDS=3
    CREATE_FILES=150000 CREATE_STREAMS=16 # Lustre's MDS create test: 150k, one dir
    MKDIR_FILES=20000 MKDIR_STREAMS=16
    FSMARK_ITER=5 FSMARK_FILES=2000 FSMARK_STREAMS=16 # XFS aio_fsync thread's fs_mark
    MOUNT_REPS=1000
    IO_MIB=256 IO_STREAMS=1,4,16 IO_PASSES=4
else
    TREE_FILES=2000 TREE_DIRS=100
    CALL_STREAMS=1,16 CALL_SECONDS=1
    CREATE_FILES=3000 CREATE_STREAMS=16
    MKDIR_FILES=1000 MKDIR_STREAMS=16
    FSMARK_ITER=2 FSMARK_FILES=300 FSMARK_STREAMS=16
    MOUNT_REPS=200
    IO_MIB=32 IO_STREAMS=1,4 IO_PASSES=1
fi
[ -z "$IO_STREAMS_ARG" ] || IO_STREAMS=$IO_STREAMS_ARG
[ -z "$IO_MIB_ARG" ] || IO_MIB=$IO_MIB_ARG
[ -z "$IO_PASSES_ARG" ] || IO_PASSES=$IO_PASSES_ARG
[ -z "$FSMARK_STREAMS_ARG" ] || FSMARK_STREAMS=$FSMARK_STREAMS_ARG
[ -z "$SEED_SIZE" ] || { TREE_FILES=161480 TREE_DIRS=10841; }
# The --handles workloads' tree: the traverse tree, or one with at least
# as many files as the largest count (the rsync tree if that is enough).
HTREE_FILES=$TREE_FILES HTREE_DIRS=$TREE_DIRS
if [ "$MAX_HANDLES" -gt "$HTREE_FILES" ]; then
    if [ "$MAX_HANDLES" -le 161480 ]; then
        HTREE_FILES=161480 HTREE_DIRS=10841
    else
        HTREE_FILES=$MAX_HANDLES HTREE_DIRS=$((MAX_HANDLES / 15 + 1))
    fi
fi
SHAPE_STREAMS=16,64 # --conns 1 and --conns 0; plus 1 stream on 1 connection
[ -z "$QUICK" ] || SHAPE_STREAMS=16
MAX_SECONDS=300 # per bench phase
# Inodes of each fresh filesystem: room for the largest workload.
max() { local m=$1; shift; for x in "$@"; do [ "$x" -le "$m" ] || m=$x; done; echo "$m"; }
INODES=$(( $(max "${MOUNT_FILES:-0}" "$CREATE_FILES" $((TREE_FILES + TREE_DIRS)) \
    $((HTREE_FILES + HTREE_DIRS))) * 12 / 10 + 100000 ))
RUN_TIMEOUT=1800 # per bench command (several phases)

# ---- tools -----------------------------------------------------------------
command -v mkfs.ext4 >/dev/null || { log "installing e2fsprogs"; "$HERE/apt-get-locked" install -y e2fsprogs >&2; }
if [ ! -x "$BENCH" ] || [ ! -x "$RNFSD" ]; then
    log "building release binaries"
    (cd "$ROOT" && cargo build --release -p rnfsd -p rnfsd-bench >&2)
fi
BENCH=$(readlink -f "$BENCH") RNFSD=$(readlink -f "$RNFSD")

rm -rf "$WORK"
mkdir -p "$WORK"
[ -n "$OUT" ] || OUT=$WORK/out
mkdir -p "$OUT"
OUT=$(readlink -f "$OUT")
RESULTS=$OUT/results.jsonl
: >"$RESULTS"
exec 2> >(tee -a "$OUT/compare.log" >&2)

FS=$WORK/fs
cleanup() {
    mountpoint -q "$FS" 2>/dev/null && umount "$FS" 2>/dev/null
    rm -f "$WORK/fs.img"
}
trap cleanup EXIT

# A fresh ext4 filesystem for one run: ext4 reuses freed inodes slowly, so
# creating after a previous run's removes would be slower for whoever runs
# second. Inode tables are initialised now, not by a background thread
# during the run. --fresh-fs no: a fresh directory instead.
fresh_fs() {
    cleanup
    if [ "$FRESH_FS" = yes ]; then
        truncate -s 16G "$WORK/fs.img"
        mkfs.ext4 -q -F -N "$INODES" -E lazy_itable_init=0,lazy_journal_init=0 "$WORK/fs.img"
        mkdir -p "$FS"
        mount -o loop "$WORK/fs.img" "$FS"
        # --loop-dio: the loop device reads and writes the image with
        # O_DIRECT, so a cache flush of the filesystem is not an fsync of
        # every page the host holds for the image (closer to a disk).
        [ -z "$LOOP_DIO" ] || losetup --direct-io=on "$(findmnt -no SOURCE "$FS")" \
            || die "--loop-dio: losetup --direct-io=on failed for $FS"
    else
        rm -rf "$FS"
        mkdir -p "$FS"
    fi
    mkdir -p "$FS/export"
}

needs_tree() { case $1 in getattr | traverse | mount) return 0 ;; *) return 1 ;; esac; }

# One bench command of a workload, quoted, added to STEPS.
step() { STEPS+=("$(printf '%q ' "$@")"); }

# The bench commands of one workload (each completed with the common target
# options by run_steps), in STEPS.
bench_args() { # WORKLOAD LABEL -> STEPS
    local w=$1 l=$2 n
    STEPS=()
    case $w in
    getattr)
        step run --mix "$w" --streams "$CALL_STREAMS" --seconds "$CALL_SECONDS" --label "$l" \
            --tree-limit $((TREE_FILES + TREE_DIRS + 1)) "${PIN_ONE[@]}" ;;
    traverse)
        # The three shapes, as the -h workloads.
        step run --mix traverse --streams "1,$SHAPE_STREAMS" --conns 1 --seconds "$CALL_SECONDS" \
            --label "$l" --tree-limit $((TREE_FILES + TREE_DIRS + 1)) "${PIN_ONE[@]}"
        step run --mix traverse --streams "$SHAPE_STREAMS" --conns 0 --seconds "$CALL_SECONDS" \
            --label "$l" --tree-limit $((TREE_FILES + TREE_DIRS + 1)) ;;
    create) step create --files "$CREATE_FILES" --streams "$CREATE_STREAMS" --label "$l" --max-seconds "$MAX_SECONDS" ;;
    mkdir) step mkdir --files "$MKDIR_FILES" --streams "$MKDIR_STREAMS" --label "$l" --max-seconds "$MAX_SECONDS" ;;
    fsmark) step fsmark --iterations "$FSMARK_ITER" --files-per-iteration "$FSMARK_FILES" \
        --streams "$FSMARK_STREAMS" --conns "$FSMARK_CONNS" --label "$l" --max-seconds "$MAX_SECONDS" ;;
    fsmark-sync) step fsmark --iterations "$FSMARK_ITER" --files-per-iteration "$FSMARK_FILES" \
        --streams "$FSMARK_STREAMS" --conns "$FSMARK_CONNS" --file-sync --label "$l" --max-seconds "$MAX_SECONDS" ;;
    mount) step mount --reps "$MOUNT_REPS" --warm-tree $((${MOUNT_FILES:-$TREE_FILES} * 2 + 1)) \
        --label "$l" --max-seconds "$MAX_SECONDS" ;;
    write) step write --size "$IO_MIB" --streams "$IO_STREAMS" --block-kib "$IO_BLOCK_KIB" --label "$l" --max-seconds "$MAX_SECONDS" ;;
    read) step read --size "$IO_MIB" --streams "$IO_STREAMS" --passes "$IO_PASSES" --block-kib "$IO_BLOCK_KIB" --label "$l" \
        --max-seconds "$MAX_SECONDS" ;;
    null)
        # The three shapes: 1 and SHAPE_STREAMS streams on one connection,
        # SHAPE_STREAMS streams with a connection each.
        step run --mix null --streams "1,$SHAPE_STREAMS" --conns 1 --seconds "$CALL_SECONDS" --label "$l" \
            "${PIN_ONE[@]}"
        step run --mix null --streams "$SHAPE_STREAMS" --conns 0 --seconds "$CALL_SECONDS" --label "$l" ;;
    *-h)
        for n in "${HL[@]}"; do
            local common=(--mix "${w%-h}" --handles "$n" --seconds "$CALL_SECONDS" --label "$l"
                --tree-limit $((HTREE_FILES + HTREE_DIRS + 1)))
            step run "${common[@]}" --streams "1,$SHAPE_STREAMS" --conns 1 "${PIN_ONE[@]}"
            step run "${common[@]}" --streams "$SHAPE_STREAMS" --conns 0
        done ;;
    esac
}

# Run every command of STEPS with the common options appended ("$@"), each
# under timeout(1); all are tried, the status says whether any failed.
# Written as a script so ganesha's namespace can run it as one command.
write_steps() { # -> $WORK/steps.sh
    local s
    {
        echo 'st=0'
        for s in "${STEPS[@]}"; do
            echo "timeout $RUN_TIMEOUT \"\$BENCH\" $s \"\$@\" || st=1"
        done
        echo 'exit $st'
    } >"$WORK/steps.sh"
}

# Waits (10 s at most) for the port file of the server just started as
# PID, runs the workload's bench steps against it, then stops it.
drive_server() { # PID WORKLOAD LABEL
    local pid=$1 w=$2 label=$3 st=0
    for _ in $(seq 1 100); do
        [ -s "$WORK/port" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if [ -s "$WORK/port" ]; then
        bench_args "$w" "$label"
        write_steps
        BENCH=$BENCH bash "$WORK/steps.sh" --addr "127.0.0.1:$(cat "$WORK/port")" \
            --export "$FS/export" --server-pid "$pid" --json "$RESULTS" "${VERS_ARGS[@]}" || st=$?
    else
        log "$label did not start"
        st=1
    fi
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    return "$st"
}

run_rnfsd() { # WORKLOAD [LABEL [EXTRA SERVE ARGS [BINARY]]]
    local w=$1 label=${2:-rnfsd} extra=() bin=${4:-$RNFSD}
    [ -n "${3:-}" ] && read -r -a extra <<<"$3"
    rm -f "$WORK/port"
    rm -rf "$WORK/rnfsd-state"
    mkdir -p "$WORK/rnfsd-state"
    # --no-root-squash: as ganesha's Squash = No_Root_Squash (the bench
    # sends AUTH_SYS uid 0).
    # --insecure where the build has it: the bench calls from ordinary
    # ports (as ganesha's default accepts).
    local ins=
    "$bin" serve --help 2>/dev/null | grep -q -- '--insecure' && ins=--insecure
    "$bin" serve "$FS/export" --listen 127.0.0.1:0 --port-file "$WORK/port" \
        --state-dir "$WORK/rnfsd-state" --no-rpcbind --no-root-squash --log-level warn \
        $ins "${extra[@]}" >>"$OUT/rnfsd.log" 2>&1 &
    drive_server $! "$w" "$label"
}

run_ganesha() { # WORKLOAD
    local w=$1 st=0
    bench_args "$w" ganesha
    write_steps
    # Inside ganesha's namespace; $GANESHA_RUN/ganesha.realpid is its PID
    # (same PID namespace). MOUNT has a port of its own (ganesha 4.3). One
    # ganesha for all of the workload's steps, each bounded inside.
    GANESHA_RUN=$WORK/ganesha BENCH=$BENCH timeout $((RUN_TIMEOUT * ${#STEPS[@]})) "$HERE/ganesha.sh" exec \
        --export "$FS/export" --port 2049 --mnt-port 20048 "${GANESHA_VERS[@]}" -- \
        sh -c 'exec "$@" --server-pid "$(cat "$GANESHA_RUN/ganesha.realpid")"' sh \
        bash "$WORK/steps.sh" --addr 127.0.0.1:2049 --mount-addr 127.0.0.1:20048 \
        --export "$FS/export" --json "$RESULTS" "${VERS_ARGS[@]}" \
        2> >(grep -v -E '^ +[0-9]+ +[0-9]+ +(tcp|udp)|program vers' >&2) || st=$?
    return "$st"
}

# The no-work RPC server (`rnfsd-bench ceiling`): the machine's ceiling,
# for the null workload only (it answers nothing else).
run_ceiling() { # WORKLOAD
    [ "$1" = null ] || { log "ceiling runs the null workload only: $1 skipped"; return 0; }
    rm -f "$WORK/port"
    "$BENCH" ceiling --listen 127.0.0.1:0 --port-file "$WORK/port" >>"$OUT/ceiling.log" 2>&1 &
    drive_server $! "$1" ceiling
}

run_local() { # WORKLOAD (create or fsmark)
    local w=$1
    case $w in
    create) BARGS=(local-create --files "$CREATE_FILES" --streams "$CREATE_STREAMS") ;;
    fsmark | fsmark-sync) BARGS=(local-fsmark --files "$FSMARK_FILES" --iterations "$FSMARK_ITER" --streams "$FSMARK_STREAMS") ;;
    *) return 0 ;;
    esac
    timeout "$RUN_TIMEOUT" "$BENCH" "${BARGS[@]}" --dir "$FS/export" --label local \
        --max-seconds "$MAX_SECONDS" --json "$RESULTS" || return 1
    # local-sync: what a `sync` export owes, done locally.
    case $w in
    create) BARGS+=(--group-commit "${LOCAL_COMMITTERS:-1}") ;;
    *) BARGS+=(--sync-create) ;;
    esac
    fresh_fs
    timeout "$RUN_TIMEOUT" "$BENCH" "${BARGS[@]}" --dir "$FS/export" --label local-sync \
        --max-seconds "$MAX_SECONDS" --json "$RESULTS"
}

{
    echo "date: $(date -Is)"
    echo "host: $(uname -srm), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
    echo "rnfsd: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (modified tree)')"
    echo "ganesha: $(dpkg-query -W -f '${Version}' nfs-ganesha 2>/dev/null || echo 'not installed yet')"
    echo "fresh filesystem per run: $FRESH_FS (ext4 on a loop device under $WORK${LOOP_DIO:+, direct I/O})"
    echo "one-stream client pinned to one CPU: $([ ${#PIN_ONE[@]} -gt 0 ] && echo yes || echo no)"
    echo "NFS version: $VERS"
    echo "rounds: $ROUNDS; workloads: $WORKLOADS; servers: $SERVERS; local: ${LOCAL:-no}; quick: ${QUICK:-no}"
    echo "handles: $HANDLES (tree of $HTREE_FILES files in $HTREE_DIRS dirs for the -h workloads)"
    for v in "${!VARIANT[@]}"; do echo "variant rnfsd-$v: ${VARIANT_BIN[$v]:-rnfsd} serve ... ${VARIANT[$v]}"; done
    echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/machine.txt"
cat "$OUT/machine.txt" >&2

fail=0
T0=$(date +%s)
for r in $(seq 1 "$ROUNDS"); do
    for w in "${WL[@]}"; do
        for s in "${SV[@]}"; do
          for v in "${VL[@]}"; do
            vers_has "$w" "$v" || continue
            set_vers "$v"
            log "round $r/$ROUNDS $w on $s over NFSv$v (load $(cut -d' ' -f1-3 /proc/loadavg))"
            fresh_fs
            # getattr, traverse and mount: the export is the prepared tree.
            if [ "$w" = mount ] && [ -n "$MOUNT_FILES" ]; then
                "$BENCH" prepare "$FS/export" --files "$MOUNT_FILES" --dirs $((MOUNT_FILES / 20 + 1)) >&2
            elif needs_tree "$w"; then
                "$BENCH" prepare "$FS/export" --files "$TREE_FILES" --dirs "$TREE_DIRS" >&2
            elif [[ $w == *-h ]]; then
                # READ and WRITE of 4 KiB: files that size; 8 bytes otherwise.
                "$BENCH" prepare "$FS/export" --files "$HTREE_FILES" --dirs "$HTREE_DIRS" \
                    --file-size "$(case $w in read-h | write-h | open-read-close-h) echo 4096 ;; *) echo 8 ;; esac)" >&2
            fi
            case $s in
            rnfsd-*) run_rnfsd "$w" "$s" "${VARIANT[${s#rnfsd-}]}" "${VARIANT_BIN[${s#rnfsd-}]:-$RNFSD}" ;;
            *) "run_$s" "$w" ;;
            esac || { log "$w on $s over NFSv$v failed"; fail=1; }
          done
        done
        # fsmark-sync's local reference is fsmark's (write + fsync per file).
        if [ -n "$LOCAL" ] && { [ "$w" = create ] || [ "$w" = fsmark ]; }; then
            log "round $r/$ROUNDS $w on the local filesystem"
            fresh_fs
            run_local "$w" || { log "local $w failed"; fail=1; }
        fi
    done
done
cleanup
log "all runs done in $(( $(date +%s) - T0 )) s"

# The local columns only when a local reference ran (create, fsmark).
grep -q '"label":"local"' "$RESULTS" || LOCAL=
LOCALS=${LOCAL:+,local}
grep -q '"label":"local-sync"' "$RESULTS" && LOCALS+=,local-sync
"$BENCH" report --json "$RESULTS" --labels "$SERVERS$LOCALS" \
    --out "$OUT/summary.json" >"$OUT/report.md"
# NFSv4.1 rows are named "<mix>-v4.1" (their "workload").
for v in "${VL[@]}"; do
    SUFFIX=
    [ "$v" = 3 ] || SUFFIX=-v$v
    for m in getattr traverse null access lookup; do
        grep -qi "\"mix\":\"$m\"" "$RESULTS" || continue
        "$BENCH" chart --json "$RESULTS" --workload "$m$SUFFIX" --title "$m$SUFFIX: calls/s against client streams" \
            --out "$OUT/$m$SUFFIX.svg" || true
    done
done
cat "$OUT/report.md"
echo
echo "results: $OUT (results.jsonl, report.md, summary.json, *.svg, machine.txt)"
[ "$fail" = 0 ] || { echo "compare.sh: some runs failed (see $OUT/compare.log)"; exit 1; }
