#!/usr/bin/env bash
# A single-node Ceph cluster for the CephFS backend's tests: 1 mon, 1 mgr,
# 1 bluestore OSD on a sparse 8 GiB file, 1 MDS and a CephFS named "cephfs",
# all on 127.0.0.1 (or RNFSD_CEPH_ADDR), no systemd, every file under DIR.
# Needs Debian's ceph-mon ceph-osd ceph-mds ceph-mgr ceph-common
# (scripts/test.sh installs them); root is not required by Ceph itself.
# docs/scale-out.md has figures.
#
#   tests/ceph/cluster.sh up DIR      start it, or find it running; prints
#                                     CEPH_CONF=DIR/ceph.conf once HEALTH_OK,
#                                     every PG active+clean and the MDS active
#   tests/ceph/cluster.sh down DIR    stop its daemons, remove DIR
#   tests/ceph/cluster.sh status DIR  exit 0 when it answers
#
# The mon listens on RNFSD_CEPH_MON_PORT (msgr2, default 13300) and the next
# port (msgr1), not Ceph's 3300/6789, so a developer's own cluster and the
# tests' can run side by side. One cluster per port per network namespace.
# RNFSD_CEPH_ADDR (default 127.0.0.1): the address every daemon binds, for
# clients in other network namespaces (it must be on a local interface).
# RNFSD_CEPH_TIMEOUT (seconds, default 120) bounds `up`.
set -Eeuo pipefail

usage() {
    echo "usage: $0 up|down|status DIR" >&2
    exit 2
}
[ $# = 2 ] || usage
cmd=$1
D=$(realpath -m -- "$2")
[ "$D" != / ] || { echo "$0: refusing DIR=/" >&2; exit 2; }
conf=$D/ceph.conf
port2=${RNFSD_CEPH_MON_PORT:-13300}
port1=$((port2 + 1))
addr=${RNFSD_CEPH_ADDR:-127.0.0.1}
[[ $addr =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "$0: RNFSD_CEPH_ADDR must be an IPv4 address" >&2; exit 2; }
# The mon's address is in the monmap; the other daemons pick theirs from
# the public network: the loopback net by default, else exactly ADDR.
if [ "$addr" = 127.0.0.1 ]; then pubnet=127.0.0.0/8; else pubnet=$addr/32; fi
limit=${RNFSD_CEPH_TIMEOUT:-120}
# Our files, never a caller's CEPH_CONF or CEPH_ARGS.
unset CEPH_ARGS
export CEPH_CONF=$conf

t0=$(date +%s%N)
ms() { echo $((($(date +%s%N) - t0) / 1000000)); }
say() {
    local m
    m=$(ms)
    printf '[%3d.%ds] %s\n' $((m / 1000)) $((m % 1000 / 100)) "$*" >&2
}
# Seconds left before the deadline, for timeout(1): at least 1, since
# timeout 0 would mean none.
left() {
    local l=$((limit - $(ms) / 1000))
    [ "$l" -gt 0 ] || l=1
    echo "$l"
}
expired() { [ "$(ms)" -ge $((limit * 1000)) ]; }
c() { timeout "$(left)" ceph -c "$conf" "$@"; }

# A directory this script (or the shared ceph-up.sh it is modelled on) made:
# down removes nothing else.
ours() { [ -f "$conf" ] && grep -qxF "run dir = $D/run" "$conf"; }

answers() {
    [ -f "$conf" ] && timeout 15 ceph -c "$conf" --connect-timeout 10 health 2>/dev/null
}

# HEALTH_OK, every PG active+clean, rank 0 up:active, from one `ceph -s`
# (each ceph call costs about 0.3 s of Python start-up).
ready() {
    local s
    s=$(timeout 10 ceph -c "$conf" --connect-timeout 5 -s -f json 2>/dev/null) || return 1
    python3 -c '
import json, sys
s = json.loads(sys.argv[1])
pg = s["pgmap"]
clean = sum(x["count"] for x in pg.get("pgs_by_state", []) if x["state_name"] == "active+clean")
mds = [r["status"] for r in s.get("fsmap", {}).get("by_rank", [])]
ok = s["health"]["status"] == "HEALTH_OK" and pg["num_pgs"] > 0 and clean == pg["num_pgs"] and "up:active" in mds
sys.exit(0 if ok else 1)' "$s"
}

wait_ready() {
    while ! ready; do
        if expired; then
            say "not ready after ${limit} s"
            return 1
        fi
        sleep 0.5
    done
}

# Daemons of this cluster: the pid files, and any ceph-* process started
# with this ceph.conf (one killed before it wrote its pid file). Each pid is
# checked, so a stale pid file never kills another process.
daemons() {
    local p f args
    {
        for f in "$D"/run/*.pid; do
            if [ -f "$f" ]; then cat "$f"; fi
        done
        for f in /proc/[0-9]*; do echo "${f#/proc/}"; done
    } | sort -un | while read -r p; do
        case $(cat "/proc/$p/comm" 2>/dev/null) in ceph-*) ;; *) continue ;; esac
        args=$(tr '\0' '\n' 2>/dev/null <"/proc/$p/cmdline"; tr '\0' '\n' 2>/dev/null <"/proc/$p/environ") || true
        if grep -qxF -e "$conf" -e "CEPH_CONF=$conf" <<<"$args"; then
            echo "$p"
        fi
    done
}

# A zombie counts as gone: a container's PID 1 may never reap it.
alive() {
    local p st
    for p in "$@"; do
        st=$(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null) || continue
        if [ "$st" != Z ]; then echo "$p"; fi
    done
}

# TERM, then KILL after 3 s: the data is thrown away, and a lone MDS takes
# about 10 s to stop cleanly (the others about 2 s).
stop_daemons() {
    local pids i
    pids=$(daemons)
    [ -n "$pids" ] || return 0
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null || true
    for i in $(seq 30); do
        pids=$(alive $pids)
        [ -n "$pids" ] || return 0
        [ "$i" = 30 ] || sleep 0.1
    done
    say "killing what TERM did not stop in 3 s: $pids"
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    for i in $(seq 50); do
        pids=$(alive $pids)
        [ -n "$pids" ] || return 0
        sleep 0.1
    done
    say "cannot stop: $pids"
    return 1
}

# A ceph-fuse mount a test left under DIR: rm -rf must not walk into it.
unmount_under() {
    findmnt -rn -o TARGET | { grep -E "^$D(/|$)" || true; } | sort -r | while read -r m; do
        umount -l "$m" 2>/dev/null || fusermount -uz "$m" 2>/dev/null || true
    done
}

remove() {
    unmount_under
    rm -rf --one-file-system "$D"
}

port_busy() {
    local hex
    hex=$(printf '%04X' "$1")
    cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
        awk -v p="$hex" '$4 == "0A" && toupper(substr($2, index($2, ":") + 1)) == p { f = 1 } END { exit !f }'
}

failed() {
    trap - ERR
    say "FAILED: the cluster in $D did not come up; last logs:"
    for f in "$D"/log/*.log; do
        [ -s "$f" ] || continue
        echo "== $f" >&2
        grep -v '^[[:space:]]*$' "$f" | tail -n 15 >&2 || true
    done
    timeout 10 ceph -c "$conf" --connect-timeout 5 -s >&2 2>/dev/null || true
    stop_daemons || true
    say "daemons stopped; logs kept in $D/log ('$0 down $D' removes them)"
    exit 1
}

write_conf() {
    local fsid=$1
    cat >"$conf" <<CONF
[global]
fsid = $fsid
mon host = [v2:$addr:$port2,v1:$addr:$port1]
mon initial members = a
public network = $pubnet
ms bind ipv6 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
# Otherwise HEALTH_WARN on a fresh cluster.
auth allow insecure global id reclaim = false
# One OSD: pools of size 1, few PGs, no replica warnings.
osd pool default size = 1
osd pool default min size = 1
osd pool default pg autoscale mode = off
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
# A fullish /tmp must not turn health to WARN.
mon data avail warn = 2
mon data avail crit = 1
run dir = $D/run
admin socket = $D/run/\$name.asok
log file = $D/log/\$name.log
pid file = $D/run/\$name.pid
[mon]
mon data = $D/mon/\$cluster-\$id
keyring = \$mon_data/keyring
[osd]
osd data = $D/osd/\$cluster-\$id
keyring = \$osd_data/keyring
osd objectstore = bluestore
# The block file must live outside the OSD's data directory.
bluestore block path = $D/osd/\$cluster-\$id.block
bluestore block create = true
bluestore block size = 8589934592
bluestore block db create = false
bluestore block wal create = false
# Ceph's minimum; the default would be 4 GiB.
osd memory target = 939524096
bluestore cache autotune = false
bluestore cache size = 134217728
[mds]
mds data = $D/mds/\$cluster-\$id
keyring = \$mds_data/keyring
# An MDS restart takes about 5 s instead of 45 s (read by the MDS, so here).
mds reconnect timeout = 5
[mgr]
mgr data = $D/mgr/\$cluster-\$id
keyring = \$mgr_data/keyring
[client]
keyring = $D/admin.keyring
# \$pid: every client (the tests run many) needs its own socket and pid file.
admin socket = $D/run/\$name.\$pid.asok
pid file = $D/run/\$name.\$pid.pid
log file = $D/log/client.log
# A mount fails after 30 s instead of hanging for 300 s.
client mount timeout = 30
CONF
}

up() {
    # No daemon of ours alive: do not wait 10 s for a mon that is not there.
    if [ -n "$(daemons)" ] && answers >/dev/null; then
        say "a cluster answers in $D; waiting until it is ready"
        wait_ready || failed
        echo "CEPH_CONF=$conf"
        return 0
    fi
    if [ -e "$D" ]; then
        if ours; then
            say "$D holds a cluster that does not answer: starting afresh"
            stop_daemons
            remove
        elif [ -n "$(ls -A "$D")" ]; then
            echo "$0: $D exists and holds no cluster of ours; not touching it" >&2
            exit 1
        fi
    fi
    local p
    for p in "$port2" "$port1"; do
        if port_busy "$p"; then
            echo "$0: port $p is in use (another cluster in this network namespace?); set RNFSD_CEPH_MON_PORT" >&2
            exit 1
        fi
    done
    trap failed ERR

    mkdir -p "$D"/{mon/ceph-a,mds/ceph-a,mgr/ceph-x,run,log}
    local fsid osd_uuid osd_key id
    # What the set-up commands print, for failed() to show.
    setup=$D/log/setup.log
    fsid=$(cat /proc/sys/kernel/random/uuid)
    write_conf "$fsid"
    ceph-authtool --create-keyring "$D/mon.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
    ceph-authtool --create-keyring "$D/admin.keyring" --gen-key -n client.admin \
        --cap mon 'allow *' --cap osd 'allow *' --cap mds 'allow *' --cap mgr 'allow *' >/dev/null
    ceph-authtool "$D/mon.keyring" --import-keyring "$D/admin.keyring" >/dev/null
    monmaptool --create --addv a "[v2:$addr:$port2,v1:$addr:$port1]" --fsid "$fsid" "$D/monmap" >/dev/null
    timeout "$(left)" ceph-mon -c "$conf" --mkfs -i a --monmap "$D/monmap" --keyring "$D/mon.keyring" >>"$setup" 2>&1
    ceph-mon -c "$conf" -i a >>"$setup" 2>&1
    c -s >>"$setup" 2>&1
    say "mon answers"

    c auth get-or-create mgr.x mon 'allow profile mgr' osd 'allow *' mds 'allow *' \
        -o "$D/mgr/ceph-x/keyring" 2>>"$setup"
    ceph-mgr -c "$conf" -i x >>"$setup" 2>&1
    say "mgr started"

    osd_uuid=$(cat /proc/sys/kernel/random/uuid)
    osd_key=$(ceph-authtool --gen-print-key)
    printf '{"cephx_secret": "%s"}\n' "$osd_key" >"$D/osd-new.json"
    id=$(c osd new "$osd_uuid" -i "$D/osd-new.json" 2>>"$setup")
    mkdir -p "$D/osd/ceph-$id"
    printf '[osd.%s]\n\tkey = %s\n' "$id" "$osd_key" >"$D/osd/ceph-$id/keyring"
    timeout "$(left)" ceph-osd -c "$conf" -i "$id" --mkfs --osd-uuid "$osd_uuid" >>"$setup" 2>&1
    ceph-osd -c "$conf" -i "$id" >>"$setup" 2>&1
    say "osd.$id started"

    c auth get-or-create mds.a mon 'allow profile mds' osd 'allow rwx' mds 'allow *' mgr 'allow profile mds' \
        -o "$D/mds/ceph-a/keyring" 2>>"$setup"
    ceph-mds -c "$conf" -i a >>"$setup" 2>&1
    c osd pool create cephfs_metadata 8 8 >>"$setup" 2>&1
    c osd pool create cephfs_data 8 8 >>"$setup" 2>&1
    c fs new cephfs cephfs_metadata cephfs_data >>"$setup" 2>&1
    # A killed client's capabilities are given back after 30 s (the least
    # Ceph allows), not 60:
    # tests kill servers (failover, a failed test's leftovers) and the next
    # client would wait for them.
    c fs set cephfs session_timeout 30 >>"$setup" 2>&1
    say "mds started, fs created"

    wait_ready || failed
    trap - ERR
    say "ready: HEALTH_OK, PGs active+clean, MDS up:active"
    echo "CEPH_CONF=$conf"
}

down() {
    [ -e "$D" ] || return 0
    if ! ours; then
        if [ -d "$D" ] && [ -z "$(ls -A "$D")" ]; then
            rmdir "$D"
            return 0
        fi
        echo "$0: $D holds no cluster of ours; not touching it" >&2
        exit 1
    fi
    stop_daemons
    remove
    say "stopped, $D removed"
}

status() {
    [ -f "$conf" ] || { echo "$0: no $conf" >&2; exit 1; }
    answers
}

case $cmd in
up) up ;;
down) down ;;
status) status ;;
*) usage ;;
esac
