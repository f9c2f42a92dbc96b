#!/usr/bin/env bash
# CephFS: rnfsd through one head, rnfsd through two heads (the same load
# split between them), and nfs-ganesha's FSAL_CEPH, all over one
# single-node Ceph cluster (tests/ceph/cluster.sh), alternated round by
# round (rnfsd-1head, rnfsd-2heads, ganesha, rnfsd-1head, ...), then
# medians and ratios. See docs/scale-out.md ("Benchmark").
#
#   scripts/bench-ceph.sh [--rounds 3] [--seconds 5] [--files 5000]
#       [--streams 16] [--fsmark-files 1000] [--out DIR] [--work DIR]
#       [--workloads traverse,traverse1c,getattr,getattr1c,fsmark,fsmark-async]
#
# Workloads: traverse (rnfsd-bench run --mix traverse: ACCESS x2, GETATTR,
# LOOKUP per object and a READDIRPLUS every 16, on a tree of --files files
# made through ceph-fuse) at 1 stream, at --streams streams with a
# connection each (many hosts) and at --streams streams on one connection
# per head (one host); getattr and getattr1c (GETATTR of 1,000 non-root
# handles sampled from the tree, at 1 stream and at --streams streams, a
# connection each or all on one connection per head); fsmark (4 KiB
# files, UNSTABLE WRITE + COMMIT, creates journaled: `sync` exports) at
# --streams streams; fsmark-async, the same against rnfsd exports with
# `sync = false` (a CREATE answered before the MDS journals it, made
# durable by the file's COMMIT: what FSAL_CEPH promises; ganesha serves
# both from the same export). Two heads: half the streams on each head at
# once; the rate is their sum.
#
# --workloads: the ones to run (default all six; without a traverse or
# getattr workload the tree is not made). fsmark's log lines
# (OUT/bench.log) give each call's mean latency as the client saw it.
# BENCH_CEPH_PERF=1: the MDS's and the OSD's perf counters before and
# after every fsmark run, and every process's CPU ticks, in OUT/perf/
# (also the admin sockets of the servers' libcephfs mounts, one per
# process: the first export's).
# The files are kept then, so the counts are of the fsmark calls only,
# but later runs create in a larger directory: compare counts, not rates.
#
# RNFSD_SERVER_TOML: more [server] lines for rnfsd's heads (a variant,
# e.g. "worker_spin = \"off\"").
#
# Everything (cluster, a private rpcbind for ganesha, the servers, the load
# generator) runs inside a private network and mount namespace, on its own
# loopback. Needs root; installs nfs-ganesha-ceph and the ceph packages when
# missing; builds target/release/{rnfsd,rnfsd-bench} when absent. Every run
# is bounded (--seconds, fsmark's --max-seconds, timeout(1)).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

ROUNDS=3
SECONDS_PER=5
FILES=5000
STREAMS=16
FSMARK_FILES=1000
WORKLOADS=traverse,traverse1c,getattr,getattr1c,fsmark,fsmark-async
OUT=/tmp/rnfsd-bench-ceph/out
WORK=/tmp/rnfsd-bench-ceph/work
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --seconds) SECONDS_PER=$2; shift 2 ;;
    --files) FILES=$2; shift 2 ;;
    --streams) STREAMS=$2; shift 2 ;;
    --fsmark-files) FSMARK_FILES=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --workloads) WORKLOADS=$2; shift 2 ;;
    -h | --help) sed -n '2,43p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-ceph.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "[bench-ceph $(date +%T)] $*" >&2; }

if [ -z "${BENCH_CEPH_INNER:-}" ]; then
    [ "$(id -u)" = 0 ] || { echo "bench-ceph.sh: needs root" >&2; exit 2; }
    need=()
    for p in nfs-ganesha nfs-ganesha-ceph rpcbind ceph-mon ceph-osd ceph-mds ceph-mgr ceph-common ceph-fuse libcephfs2; do
        dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || need+=("$p")
    done
    if [ ${#need[@]} -gt 0 ]; then
        scripts/apt-get-locked update -qq
        DEBIAN_FRONTEND=noninteractive scripts/apt-get-locked install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    fi
    [ -x target/release/rnfsd ] && [ -x target/release/rnfsd-bench ] ||
        cargo build --release -p rnfsd -p rnfsd-bench
    rm -rf "$OUT" "$WORK"
    mkdir -p "$OUT" "$WORK"
    exec env BENCH_CEPH_INNER=1 timeout -k 10 7200 \
        unshare --net --mount --propagation private -- "$0" --rounds "$ROUNDS" --seconds "$SECONDS_PER" \
        --files "$FILES" --streams "$STREAMS" --fsmark-files "$FSMARK_FILES" --out "$OUT" --work "$WORK" \
        --workloads "$WORKLOADS"
fi
for wl in ${WORKLOADS//,/ }; do
    case $wl in traverse | traverse1c | getattr | getattr1c | fsmark | fsmark-async) ;; *) echo "bench-ceph.sh: unknown workload $wl" >&2; exit 2 ;; esac
done

# ---- inside the namespace ----
ip link set lo up
mount -t tmpfs -o mode=755,size=16m tmpfs /run
mkdir -p /run/rpcbind /run/ganesha /var/lib/nfs/ganesha
mount -t tmpfs -o size=16m tmpfs /var/lib/nfs/ganesha

BIN=$REPO/target/release/rnfsd
BENCH=$REPO/target/release/rnfsd-bench
PIDS=()
FUSE=$WORK/fuse
cleanup() {
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    sleep 1
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    mountpoint -q "$FUSE" && umount -l "$FUSE"
    "$REPO/tests/ceph/cluster.sh" down "$WORK/ceph" >/dev/null 2>&1 || true
}
trap cleanup EXIT

conf_line=$("$REPO/tests/ceph/cluster.sh" up "$WORK/ceph")
CEPH_CONF=${conf_line#CEPH_CONF=}
export CEPH_CONF
log "cluster up ($CEPH_CONF)"

# The tree, made through ceph-fuse (local syscalls on CephFS).
mkdir -p "$FUSE"
ceph-fuse -c "$CEPH_CONF" "$FUSE" >"$WORK/fuse.log" 2>&1
mkdir -p "$FUSE/bench/fsmark" "$FUSE/bench/fsmark-async" "$FUSE/bench/tree"
if [[ ,$WORKLOADS, == *,traverse* || ,$WORKLOADS, == *,getattr* ]]; then
    "$BENCH" prepare "$FUSE/bench/tree" --files "$FILES" --dirs $((FILES / 20)) --threads 4 >/dev/null
    log "tree of $FILES files made"
fi
umount "$FUSE"

# rnfsd: two heads, the same export id and handle key.
head_conf() { # head_conf NAME PORT: exports /tree, /fsmark, /fsmark-async (ids 100-102)
    mkdir -p "$WORK/$1/state"
    {
        printf '[server]\nlisten = ["127.0.0.1:%s"]\nstate_dir = "%s"\nadmin_socket = "%s"\n' \
            "$2" "$WORK/$1/state" "$WORK/$1/admin.sock"
        # More [server] keys for rnfsd's heads (a variant to measure).
        [ -z "${RNFSD_SERVER_TOML:-}" ] || printf '%s\n' "$RNFSD_SERVER_TOML"
        local id=100 x
        for x in tree fsmark fsmark-async; do
            printf '[[export]]\npath = "/%s"\nid = %s\nbackend = "cephfs"\nclients = ["127.0.0.1"]\n' "$x" "$id"
            [ "$x" != fsmark-async ] || printf 'sync = false\n'
            printf 'root_squash = false\nsecure = false\n[export.cephfs]\nconf = "%s"\nroot = "/bench/%s"\n' \
                "$CEPH_CONF" "$x"
            id=$((id + 1))
        done
    } >"$WORK/$1/rnfsd.toml"
}
wait_tcp() {
    local i
    for ((i = 0; i < 300; i++)); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    log "nothing answers on port $1"
    return 1
}
head_conf a 21001
head_conf b 21002
"$BIN" serve --config "$WORK/a/rnfsd.toml" --no-rpcbind >"$WORK/a/log" 2>&1 &
A_PID=$!
PIDS+=("$A_PID")
wait_tcp 21001
install -m 600 "$WORK/a/state/handle.key" "$WORK/b/state/handle.key"
"$BIN" serve --config "$WORK/b/rnfsd.toml" --no-rpcbind >"$WORK/b/log" 2>&1 &
B_PID=$!
PIDS+=("$B_PID")
wait_tcp 21002
log "rnfsd heads up: pid $A_PID :21001, pid $B_PID :21002"

# nfs-ganesha 4.3, FSAL_CEPH, with a private rpcbind (it needs one).
rpcbind -f -w &
PIDS+=($!)
for ((i = 0; i < 50; i++)); do rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break; sleep 0.1; done
mkdir -p "$WORK/ganesha/recovery"
cat >"$WORK/ganesha/ganesha.conf" <<EOF
NFS_CORE_PARAM {
    NFS_Port = 21003;
    MNT_Port = 21004;
    NLM_Port = 0;
    Rquota_Port = 0;
    Protocols = 3;
    Enable_NLM = false;
    Enable_RQUOTA = false;
    Enable_UDP = false;
    Mount_Path_Pseudo = true;
    Plugins_Dir = "/usr/lib/x86_64-linux-gnu/ganesha";
}
NFSv4 { Graceless = true; RecoveryRoot = "$WORK/ganesha/recovery"; }
NFS_KRB5 { Active_krb5 = false; }
CEPH { Ceph_Conf = "$CEPH_CONF"; }
EXPORT {
    Export_Id = 100; Path = "/bench/tree"; Pseudo = "/tree";
    Protocols = 3; Transports = TCP; Access_Type = RW; Squash = No_Root_Squash; SecType = sys;
    FSAL { Name = CEPH; User_Id = "admin"; }
}
EXPORT {
    Export_Id = 101; Path = "/bench/fsmark"; Pseudo = "/fsmark";
    Protocols = 3; Transports = TCP; Access_Type = RW; Squash = No_Root_Squash; SecType = sys;
    FSAL { Name = CEPH; User_Id = "admin"; }
}
LOG { Default_Log_Level = EVENT; }
EOF
ganesha.nfsd -F -f "$WORK/ganesha/ganesha.conf" -L "$WORK/ganesha/log" -p "$WORK/ganesha/pid" &
G_PID=$!
PIDS+=("$G_PID")
for ((i = 0; i < 600; i++)); do
    rpcinfo -n 21003 -t 127.0.0.1 100003 3 >/dev/null 2>&1 &&
        rpcinfo -n 21004 -t 127.0.0.1 100005 3 >/dev/null 2>&1 && break
    kill -0 "$G_PID" 2>/dev/null || { tail -20 "$WORK/ganesha/log" >&2; exit 1; }
    sleep 0.1
done
log "ganesha (FSAL_CEPH) up: pid $G_PID :21003, MOUNT :21004"

RES=$OUT/results.jsonl
: >"$RES"
# One result row (JSON) per server, workload, streams and round; two
# heads' rows are summed by the report.
bench_run() { # bench_run MIX LABEL ADDR MNTADDR PID STREAMS JSON [CONNS]: 0 = one each
    local mix=$1 more=()
    shift
    [ "$mix" != getattr ] || more=(--handles 1000)
    timeout -k 5 $((SECONDS_PER * 4 + 120)) "$BENCH" run --addr "$2" --mount-addr "$3" --export /tree \
        --mix "$mix" "${more[@]}" --streams "$5" --conns "${7:-0}" --seconds "$SECONDS_PER" \
        --server-pid "$4" --label "$1" --json "$6" >>"$OUT/bench.log" 2>&1
}
traverse() { bench_run traverse "$@"; }
getattr() { bench_run getattr "$@"; }
# The other shape: all streams on one connection (one client host).
traverse1c() { bench_run traverse "$@" 1; }
getattr1c() { bench_run getattr "$@" 1; }
# BENCH_CEPH_PERF=1: perf counters of the cluster's daemons and of the
# servers' libcephfs clients (their admin sockets) into OUT/perf/.
perf_dump() { # perf_dump TAG
    [ -n "${BENCH_CEPH_PERF:-}" ] || return 0
    mkdir -p "$OUT/perf"
    local s
    for s in "$WORK"/ceph/run/*.asok; do
        timeout 10 ceph --admin-daemon "$s" perf dump >"$OUT/perf/$1.$(basename "$s" .asok).json" 2>/dev/null || true
    done
    # CPU ticks (user, system) of every process here: where the CPU goes.
    local p
    for p in /proc/[0-9]*; do
        awk '{ sub(/^[^)]*\) /, ""); print $12, $13 }' "$p/stat" 2>/dev/null |
            sed "s|^|${p#/proc/} $(tr -d '\n' <"$p/comm" 2>/dev/null) |" || true
    done >"$OUT/perf/$1.cpu"
}
fsmark() { # fsmark LABEL ADDR MNTADDR PID STREAMS JSON [EXPORT]
    echo "fsmark $1 streams $5 ${7:-/fsmark}:" >>"$OUT/bench.log"
    timeout -k 5 900 "$BENCH" fsmark --addr "$2" --mount-addr "$3" --export "${7:-/fsmark}" \
        --streams "$5" --conns "$5" --iterations 3 --files-per-iteration "$FSMARK_FILES" \
        --max-seconds 300 --server-pid "$4" --label "$1" --json "$6" ${BENCH_CEPH_PERF:+--keep} >>"$OUT/bench.log" 2>&1
}
# rnfsd's heads at ganesha's promise (their `sync = false` export);
# ganesha's one export answers the same either way.
fsmark-async() {
    case $1 in
    ganesha) fsmark "$@" ;;
    *) fsmark "$@" /fsmark-async ;;
    esac
}
half=$((STREAMS / 2))
for ((r = 1; r <= ROUNDS; r++)); do
    for wl in ${WORKLOADS//,/ }; do
        for s in 1 "$STREAMS"; do
            # One call in flight: traverse and getattr (the *1c shapes
            # differ only with many streams).
            [ "$wl" != traverse ] && [ "$wl" != getattr ] && [ "$s" = 1 ] && continue
            tag="round=$r wl=$wl streams=$s"
            log "$tag: rnfsd-1head"
            [[ $wl != fsmark* ]] || perf_dump "r$r-rnfsd-1head-before"
            $wl rnfsd-1head 127.0.0.1:21001 127.0.0.1:21001 "$A_PID" "$s" "$WORK/j" && sed "s/^/{\"round\":$r,\"wl\":\"$wl\",\"row\":/; s/\$/}/" "$WORK/j" >>"$RES"
            rm -f "$WORK/j"
            [[ $wl != fsmark* ]] || perf_dump "r$r-rnfsd-1head-after"
            if [ "$s" -gt 1 ]; then
                log "$tag: rnfsd-2heads ($half + $half)"
                $wl rnfsd-2heads 127.0.0.1:21001 127.0.0.1:21001 "$A_PID" "$half" "$WORK/ja" &
                pa=$!
                $wl rnfsd-2heads 127.0.0.1:21002 127.0.0.1:21002 "$B_PID" "$half" "$WORK/jb" &
                pb=$!
                wait "$pa" "$pb"
                cat "$WORK/ja" "$WORK/jb" | sed "s/^/{\"round\":$r,\"wl\":\"$wl\",\"row\":/; s/\$/}/" >>"$RES"
                rm -f "$WORK/ja" "$WORK/jb"
            fi
            log "$tag: ganesha"
            [[ $wl != fsmark* ]] || perf_dump "r$r-ganesha-before"
            $wl ganesha 127.0.0.1:21003 127.0.0.1:21004 "$G_PID" "$s" "$WORK/j" && sed "s/^/{\"round\":$r,\"wl\":\"$wl\",\"row\":/; s/\$/}/" "$WORK/j" >>"$RES"
            rm -f "$WORK/j"
            [[ $wl != fsmark* ]] || perf_dump "r$r-ganesha-after"
        done
    done
done

python3 - "$RES" "$STREAMS" >"$OUT/report.md" <<'PY'
import json, sys, statistics
from collections import defaultdict
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
streams = int(sys.argv[2])
# rate per (workload, total streams, label, round); two heads summed.
acc = defaultdict(lambda: defaultdict(float))
cpu = defaultdict(list)
for x in rows:
    r, row = x["round"], x["row"]
    if row.get("mix") in ("Traverse", "Getattr"):
        one = not row["conn_per_stream"] and row["streams"] > 1
        name = row["mix"].lower()
        wl, rate = (f"{name}, one connection" if one else name), row["calls_per_s"]
        c = row.get("server_cpu_us_per_call")
    elif row.get("workload") == "fsmark" and row.get("kind") == "summary":
        wl, rate = x.get("wl", "fsmark"), row["rate"]
        c = row.get("server_cpu_us_per_op")
    else:
        continue
    s = row["streams"] * (2 if row["label"] == "rnfsd-2heads" else 1)
    acc[(wl, s, row["label"])][r] += rate
    if c is not None:
        cpu[(wl, s, row["label"])].append(c)
labels = ["rnfsd-1head", "rnfsd-2heads", "ganesha"]
print("| workload | streams | rnfsd 1 head | rnfsd 2 heads | ganesha FSAL_CEPH | 1 head / ganesha | 2 heads / ganesha | 2 heads / 1 head |")
print("|---|---|---|---|---|---|---|---|")
for wl, unit in (("traverse", "calls/s"), ("traverse, one connection", "calls/s"), ("getattr", "calls/s"),
                 ("getattr, one connection", "calls/s"), ("fsmark", "files/s"), ("fsmark-async", "files/s")):
    for s in sorted({k[1] for k in acc if k[0] == wl}):
        med = {}
        for l in labels:
            v = list(acc.get((wl, s, l), {}).values())
            med[l] = statistics.median(v) if v else None
        def f(v): return "-" if v is None else f"{v:,.0f}"
        def ratio(a, b): return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}x"
        print(f"| {wl} ({unit}) | {s} | {f(med['rnfsd-1head'])} | {f(med['rnfsd-2heads'])} | {f(med['ganesha'])} | "
              f"{ratio(med['rnfsd-1head'], med['ganesha'])} | {ratio(med['rnfsd-2heads'], med['ganesha'])} | "
              f"{ratio(med['rnfsd-2heads'], med['rnfsd-1head'])} |")
print()
print("Medians of", len({x['round'] for x in rows}), "rounds; two heads: the sum of both heads' rates in the same round.")
for k, v in sorted(cpu.items()):
    if v and all(c is not None for c in v):
        what = "file (each head's own)" if k[0].startswith("fsmark") else "call"
        print(f"- server CPU per {what}, {k[0]} {k[1]} streams {k[2]}: median {statistics.median(v):.0f} us")
PY
cat "$OUT/report.md"
