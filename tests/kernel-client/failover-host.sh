# Host side of the failover workload (guest/failover.sh), sourced by ns.sh
# inside run.sh's private network/mount/pid namespace when the workload
# list names failover. Builds, in that namespace:
#
#   br0 10.77.0.1/24 (a bridge; the Ceph cluster binds this address, and
#   |                 passt's or socat's connections to the heads leave
#   |                 from it; with --net tap the guest's own packets are
#   |                 forwarded to the heads, which route 10.0.2.0/24 back
#   |                 through it)
#   +-- veth -- netns headA: vA 10.77.0.11/24 + the floating 10.77.0.100/24
#   +-- veth -- netns headB: vB 10.77.0.12/24
#
# a single-node Ceph cluster (tests/ceph/cluster.sh, RNFSD_CEPH_ADDR=
# 10.77.0.1, through ceph-host.sh's kc_ceph_up) and two rnfsd heads, one per netns, each `rnfsd serve
# --config` listening on 0.0.0.0:2049 with the same CephFS export (id
# FO_ID, path /ceph, CephFS root /) and the same handle key (head A's
# STATE_DIR/handle.key copied to head B's state dir, 0600), each with its
# own state dir. The guest mounts 10.77.0.100:/ceph (routed to with
# --net tap; passt proxies the guest's connection out of this namespace's
# own sockets; with --net slirp a guestfwd socat does).
#
# Guest request `failover` (answered "ok ..."): head A's machine dies and
# the address moves, as a VRRP/pacemaker failover with fencing would:
#   1. head A's link goes down (nothing more leaves head A: the client
#      gets no FIN or RST from it, as when a machine dies), rnfsd A gets
#      SIGKILL;
#   2. fencing: head A's CephFS session is evicted (`ceph tell mds.a client
#      evict id=N`), so the MDS revokes its capabilities at once instead
#      of waiting for the session to time out (session_timeout: 30 s on
#      the test cluster, tests/ceph/cluster.sh), and blocklists it;
#      FO_EVICT=0 skips this step (then head B waits for that timeout on
#      every inode head A held capabilities on);
#   3. 10.77.0.100 is removed from head A and added to head B;
#   4. the bridge side's neighbour entry for 10.77.0.100 is flushed (what a
#      gratuitous ARP from head B would do; no arping needed).
# The client's connection, still open towards head A, is reset by head B's
# kernel at its next segment; the client reconnects, to head B.
#
# Environment (from run.sh's caller): FO_EVICT=0 (no fencing, above),
# FO_CONTROL=1 (a control run: the request is answered, nothing fails
# over), FO_SERVER_TOML (extra lines for the heads' [server] table, e.g.
# "ceph_inode_cache_entries = 32"), KC_CEPH_TIMEOUT (cluster start, s).
# Logs: RUN/failover/{headA,headB}.log, cluster-up.log, evict.log,
# ceph-log/ (the cluster's logs, kept when it is stopped).
# shellcheck shell=bash

FO_NET=10.77.0
FO_ADDR=$FO_NET.100
FO_ID=4242
FO_EXPORT=/ceph
FO_DIR=$RUN/failover
FO_CEPH=$FO_DIR/ceph
declare -A FO_PID=()
FO_CLIENT_A=

fo_say() { echo "[failover $(date +%T.%3N)] $*"; }

# fo_head NAME: start rnfsd in netns NAME; waits until it answers.
fo_head() {
    local h=$1 st=$FO_DIR/$1
    mkdir -p "$st"
    rm -f "$st/port"
    ip netns exec "$h" "$RNFSD_BIN" serve --config "$FO_DIR/rnfsd.toml" --state-dir "$st" \
        --port-file "$st/port" >>"$FO_DIR/$h.log" 2>&1 &
    FO_PID[$h]=$!
    kc_wait_for "${FO_PID[$h]}" 600 test -s "$st/port" && return 0
    fo_say "head $h did not start:"
    tail -n 20 "$FO_DIR/$h.log"
    return 1
}

# fo_ceph_client PID: the CephFS client (global) id of the libcephfs mount
# of process PID, from the MDS's session list (client_metadata.pid).
fo_ceph_client() {
    timeout 20 ceph -c "$FO_CEPH/ceph.conf" --connect-timeout 10 tell mds.a session ls -f json 2>/dev/null |
        python3 -c '
import json, sys
for s in json.load(sys.stdin):
    if str(s.get("client_metadata", {}).get("pid")) == sys.argv[1]:
        print(s["id"]); break' "$1"
}

fo_setup() {
    local h i fo_clients
    mkdir -p "$FO_DIR"
    ip link add br0 type bridge && ip link set br0 up && ip addr add "$FO_NET.1/24" dev br0 ||
        { fo_say "bridge setup failed"; return 1; }
    i=11
    for h in headA headB; do
        ip netns add "$h" &&
            ip link add "v$h" type veth peer name "v${h#head}" netns "$h" &&
            ip link set "v$h" master br0 up &&
            ip -n "$h" link set lo up && ip -n "$h" link set "v${h#head}" up &&
            ip -n "$h" addr add "$FO_NET.$i/24" dev "v${h#head}" ||
            { fo_say "netns $h setup failed"; return 1; }
        i=$((i + 1))
    done
    ip -n headA addr add "$FO_ADDR/24" dev vA || return 1
    # --net tap: the guest (10.0.2.15, on this namespace's tap device)
    # reaches the heads through this namespace, which forwards; they answer
    # it through the bridge's address, and let it mount.
    fo_clients="\"$FO_NET.0/24\""
    if [ "$NET" = tap ]; then
        sysctl -qw net.ipv4.ip_forward=1 || { fo_say "no forwarding"; return 1; }
        for h in headA headB; do
            ip -n "$h" route add 10.0.2.0/24 via "$FO_NET.1" || { fo_say "no route in $h"; return 1; }
        done
        fo_clients+=', "10.0.2.0/24"'
    fi

    fo_say "starting the Ceph cluster on $FO_NET.1"
    kc_ceph_up "$FO_CEPH" "$FO_NET.1" "$FO_DIR/cluster-up.log" ||
        { fo_say "Ceph cluster did not come up:"; tail -n 30 "$FO_DIR/cluster-up.log"; return 1; }
    fo_say "Ceph cluster ready"

    # The same export on both heads; MOUNT on the NFS port; no rpcbind.
    cat >"$FO_DIR/rnfsd.toml" <<EOF
[server]
listen = ["0.0.0.0:2049"]
register_rpcbind = false
${FO_SERVER_TOML:-}
[[export]]
path = "$FO_EXPORT"
id = $FO_ID
backend = "cephfs"
clients = [$fo_clients]
root_squash = false
secure = false
[export.cephfs]
conf = "$FO_CEPH/ceph.conf"
root = "/"
EOF
    fo_head headA || return 1
    [ -s "$FO_DIR/headA/handle.key" ] || { fo_say "head A wrote no handle.key"; return 1; }
    mkdir -p "$FO_DIR/headB"
    install -m 0600 "$FO_DIR/headA/handle.key" "$FO_DIR/headB/handle.key"
    fo_head headB || return 1
    FO_CLIENT_A=$(fo_ceph_client "${FO_PID[headA]}")
    fo_say "heads up: A pid ${FO_PID[headA]} (CephFS client ${FO_CLIENT_A:-?}), B pid ${FO_PID[headB]}; $FO_ADDR on A"
    # This namespace reaches head A's port 2049 through the floating address.
    timeout 10 bash -c "exec 3<>/dev/tcp/$FO_ADDR/2049" || { fo_say "no connection to $FO_ADDR:2049"; return 1; }
}

fo_failover() { # sets FO_ANSWER: "ok STEPS" or "error WHY"
    local t0 a=${FO_PID[headA]:-} steps=() id
    t0=$(date +%s%N)
    FO_ANSWER=
    [ "${FO_CONTROL:-}" = 1 ] && { FO_ANSWER="ok control run (FO_CONTROL=1): no failover"; return; }
    [ -n "$a" ] || { FO_ANSWER="error head A is not running"; return; }
    ip -n headA link set vA down
    kill -KILL "$a" 2>/dev/null
    wait "$a" 2>/dev/null
    FO_PID[headA]=
    steps+=("A down+killed $(fo_ms "$t0")ms")
    if [ "${FO_EVICT:-1}" = 1 ]; then
        id=${FO_CLIENT_A:-$(fo_ceph_client "$a")}
        if [ -n "$id" ] && timeout 30 ceph -c "$FO_CEPH/ceph.conf" --connect-timeout 10 \
            tell mds.a client evict id="$id" >>"$FO_DIR/evict.log" 2>&1; then
            steps+=("CephFS client $id evicted $(fo_ms "$t0")ms")
        else
            FO_ANSWER="error could not evict head A's CephFS session (client ${id:-unknown}; see $FO_DIR/evict.log)"
            return
        fi
    fi
    ip -n headA addr del "$FO_ADDR/24" dev vA &&
        ip -n headB addr add "$FO_ADDR/24" dev vB ||
        { FO_ANSWER="error moving $FO_ADDR failed"; return; }
    ip neigh flush to "$FO_ADDR" dev br0 2>/dev/null
    steps+=("$FO_ADDR on B $(fo_ms "$t0")ms")
    FO_ANSWER="ok ${steps[*]}"
    fo_say "$FO_ANSWER"
}

fo_ms() { echo $((($(date +%s%N) - $1) / 1000000)); }

# After the guest is gone: head B's view, as result lines for run.sh: it
# served calls after the failover and answered none NFS3ERR_STALE
# (NFS3ERR_BADHANDLE would mean a key or export id mismatch).
fo_report() {
    local b=${FO_PID[headB]:-} out
    out=$RUN/share/results.txt
    if [ -z "$b" ] || ! kill -0 "$b" 2>/dev/null; then
        echo "FAIL failover/head-B-alive: head B exited (see $FO_DIR/headB.log)" >>"$out"
        return
    fi
    "$RNFSD_BIN" stats --state-dir "$FO_DIR/headB" --json >"$FO_DIR/headB-stats.json" 2>>"$FO_DIR/headB.log" || {
        echo "FAIL failover/head-B-stats: rnfsd stats failed" >>"$out"
        return
    }
    python3 - "$FO_DIR/headB-stats.json" >>"$out" <<'PY'
import json, os, sys
s = json.load(open(sys.argv[1]))
r = s.get("nfs_replies") or {}
if isinstance(r, list):  # [[status, count], ...] or [{status:, count:}]
    r = {(x[0] if isinstance(x, list) else x.get("status")): (x[1] if isinstance(x, list) else x.get("count")) for x in r}
calls = sum(p["calls"] for p in s["procs"] if p["program"] == "nfs")
errs = ", ".join(f"{k} {v}" for k, v in sorted(r.items()) if k != "NFS3_OK") or "none"
print(f"INFO failover: head B served {calls} NFS calls after the failover; non-OK replies: {errs}")
if os.environ.get("FO_CONTROL") == "1":
    print("INFO failover: control run (FO_CONTROL=1): no failover")
    sys.exit(0)
print("PASS failover/head-B-served-calls" if calls > 0 else "FAIL failover/head-B-served-calls: no NFS call reached head B")
bad = {k: v for k, v in r.items() if k in ("NFS3ERR_STALE", "NFS3ERR_BADHANDLE") and v}
print("PASS failover/head-B-no-stale-or-badhandle" if not bad else f"FAIL failover/head-B-no-stale-or-badhandle: {bad}")
PY
}

fo_cleanup() {
    local h p i
    for h in headA headB; do
        p=${FO_PID[$h]:-}
        [ -n "$p" ] || continue
        kill -TERM "$p" 2>/dev/null
    done
    for h in headA headB; do
        p=${FO_PID[$h]:-}
        [ -n "$p" ] || continue
        for ((i = 0; i < 50; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
        FO_PID[$h]=
    done
    kc_ceph_down "$FO_CEPH" "$FO_DIR/ceph-log" "$FO_DIR/cluster-down.log"
    for h in headA headB; do ip netns del "$h" 2>/dev/null; done
    ip link del br0 2>/dev/null
    return 0
}
