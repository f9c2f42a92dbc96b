#!/usr/bin/env bash
# Runs inside run.sh's private network/mount/pid namespace (only `lo`):
# starts the server on 127.0.0.1:$NFS_PORT (MOUNT on $MNT_PORT), boots the
# guest (NET=tap: on a tap device of this namespace, 10.0.2.2 here and
# 10.0.2.15 in the guest, the server listening on 10.0.2.2 too; passt; or
# qemu user networking forwarding 10.0.2.100:$NFS_PORT and :$MNT_PORT, one
# socat per guest connection), and serves the guest's requests (server
# restarts, host-side files and locks) until qemu exits. SERVER=rnfsd
# runs $RNFSD_BIN with its port mapper on port 111 of its addresses (the
# guest's lockd finds NLM through 10.0.2.2:111); SERVER=ganesha runs a private rpcbind
# and ganesha.nfsd with $GANESHA_CONF; SERVER=knfsd-guest runs none (the
# guest serves itself). Environment from run.sh: VERS RUN EXPORT
# NFS_PORT MNT_PORT SERVER ACCEL NET QEMU_TIMEOUT VMLINUZ INITRD RNFSD_BIN
# GANESHA_CONF KC_WORKLOADS KC_BACKEND NFS_WRITE. The failover workload's heads, Ceph
# cluster and floating address: failover-host.sh. KC_BACKEND=cephfs: rnfsd
# serves EXPORT from a Ceph cluster started here, ceph-fuse mounts it at
# EXPORT for the host side (ceph-host.sh).
set -uo pipefail

say() { echo "[ns $(date +%T)] $*"; }

ip link set lo up
mount -t tmpfs tmpfs /run
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
FO_ON=
[[ " ${KC_WORKLOADS:-} " == *" failover "* ]] && FO_ON=1
CEPHFS_ON=
[ "${KC_BACKEND:-local}" = cephfs ] && CEPHFS_ON=1
if [ -n "$FO_ON" ] || [ -n "$CEPHFS_ON" ]; then
    # shellcheck source=ceph-host.sh
    . "$HERE/ceph-host.sh"
fi

SRV_PID=
QEMU_PID=
PASST_PID=
TCPDUMP_PID=
RPCB_PID=
HOLD_PID=
SQL_PID=
STATD_PID=
cleanup() {
    [ -n "$STATD_PID" ] && kill -TERM "$STATD_PID" 2>/dev/null
    [ -n "$HOLD_PID" ] && kill -TERM "$HOLD_PID" 2>/dev/null
    [ -n "$SQL_PID" ] && kill -TERM "$SQL_PID" 2>/dev/null
    [ -n "$QEMU_PID" ] && kill -TERM "$QEMU_PID" 2>/dev/null
    stop_server TERM
    [ -n "$QEMU_PID" ] && wait "$QEMU_PID" 2>/dev/null
    [ -n "$PASST_PID" ] && kill -TERM "$PASST_PID" 2>/dev/null
    [ -n "$TCPDUMP_PID" ] && kill -TERM "$TCPDUMP_PID" 2>/dev/null
    [ -n "$RPCB_PID" ] && kill -TERM "$RPCB_PID" 2>/dev/null
    if [ -n "$FO_ON" ] && declare -F fo_cleanup >/dev/null; then fo_cleanup; fi
    if [ -n "$CEPHFS_ON" ]; then kc_cephfs_cleanup; fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT

wait_port() { # the server answers TCP on the port
    local i n=200
    # A CephFS export: the server mounts CephFS (and ends its earlier
    # session) before it listens.
    [ -n "$CEPHFS_ON" ] && n=1200
    for ((i = 0; i < n; i++)); do
        (exec 3<>/dev/tcp/127.0.0.1/"$NFS_PORT") 2>/dev/null && return 0
        kill -0 "$SRV_PID" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}

# ganesha: NFS and MOUNT both answer a NULL call on their own ports (asked
# directly, not through rpcbind, which keeps a killed instance's entries).
ganesha_up() {
    local i
    for ((i = 0; i < 600; i++)); do
        rpcinfo -n "$NFS_PORT" -t 127.0.0.1 100003 3 >/dev/null 2>&1 &&
            rpcinfo -n "$MNT_PORT" -t 127.0.0.1 100005 3 >/dev/null 2>&1 && return 0
        kill -0 "$SRV_PID" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}

start_server() {
    # knfsd-guest: the server is the guest's own kernel (guest/knfsd.sh).
    [ "$SERVER" != knfsd-guest ] || return 0
    if [ "$SERVER" = ganesha ]; then
        # Same config, log and recovery dir on every (re)start.
        ganesha.nfsd -F -f "$GANESHA_CONF" -L "$RUN/server.log" -p "$RUN/ganesha.pid" \
            >>"$RUN/server.log" 2>&1 &
        SRV_PID=$!
        ganesha_up
        return
    fi
    rm -f "$RUN/port"
    # --insecure: through passt or a guestfwd socat the guest's connections
    # come from ordinary ports, whatever port its client bound (and with
    # tap its mount.nfs's may too). --portmap: port 111 of the listen
    # addresses, for the guest's lockd (NLM is served on the NFS port).
    # A short grace period after a restart (locks.sh's reclaim check waits
    # it out): KC_GRACE seconds, default 15.
    printf '[server]\nnlm_grace_secs = %s\n' "${KC_GRACE:-15}" >"$RUN/rnfsd.toml"
    # --vers 4.x: NFSv4.1 and 4.2 beside NFSv3 (locks at v4 mounts v3
    # too); NFSv4's grace period is nlm_grace_secs as well.
    [ "${VERS:-3}" = 3 ] || echo 'nfs4 = true' >>"$RUN/rnfsd.toml"
    # KC_DELEGATIONS=on|off: NFSv4 read delegations (unset: the server's
    # default).
    case ${KC_DELEGATIONS:-} in
    on) echo 'nfs4_delegations = true' >>"$RUN/rnfsd.toml" ;;
    off) echo 'nfs4_delegations = false' >>"$RUN/rnfsd.toml" ;;
    esac
    local dir=("$EXPORT" --insecure --no-root-squash)
    # --net tap: the guest calls from its own address; the host's own
    # clients (nfswrite) from the loopback, the default's.
    KC_CLIENTS_TOML=
    if [ "$NET" = tap ]; then
        dir+=(--client 127.0.0.0/8 --client ::1 --client "$TAP_GUEST_IP")
        KC_CLIENTS_TOML="[\"127.0.0.0/8\", \"::1\", \"$TAP_GUEST_IP\"]"
    fi
    # xfstests' scratch export, as the other's options.
    [ -z "${SCRATCH:-}" ] || printf '[[export]]\npath = "%s"\nroot_squash = false\nsecure = false\n%s' "$SCRATCH" \
        "${KC_CLIENTS_TOML:+clients = $KC_CLIENTS_TOML
}" >>"$RUN/rnfsd.toml"
    if [ -n "$CEPHFS_ON" ]; then
        # The same options in the CephFS export's table (the DIR-only flags
        # do not apply to it).
        kc_cephfs_export_toml >>"$RUN/rnfsd.toml"
        dir=()
    fi
    # This instance's log starts after line SRV_LOG_FROM (grace_info).
    SRV_LOG_FROM=0
    [ -f "$RUN/server.log" ] && SRV_LOG_FROM=$(wc -l <"$RUN/server.log")
    # --net tap: also on the tap device's address, where the guest's
    # connections arrive from its own address (10.0.2.15).
    local listen=(--listen "127.0.0.1:$NFS_PORT")
    [ "$NET" != tap ] || listen+=(--listen "$TAP_HOST_IP:$NFS_PORT")
    "$RNFSD_BIN" serve "${dir[@]}" --config "$RUN/rnfsd.toml" "${listen[@]}" \
        --state-dir "$RUN/state" --no-rpcbind --portmap --port-file "$RUN/port" \
        >>"$RUN/server.log" 2>&1 &
    SRV_PID=$!
    wait_port
}

# grace_info: this rnfsd instance's NFSv4 grace period, from its log:
# "ok clients N over after S s: why" or "ok clients N in grace S s so far".
grace_info() {
    local log start over t0 t1 clients
    log=$(tail -n +"$((${SRV_LOG_FROM:-0} + 1))" "$RUN/server.log" | grep 'nfsv4: grace period')
    start=$(grep -m1 'grace period started' <<<"$log") || { echo "error no grace period in the log"; return; }
    clients=$(sed -n 's/.*clients=\([0-9]*\).*/\1/p' <<<"$start")
    t0=$(date -d "${start%% *}" +%s.%N)
    if over=$(grep -m1 -E 'grace period (over|ended)' <<<"$log"); then
        t1=$(date -d "${over%% *}" +%s.%N)
        echo "ok clients $clients over after $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s: ${over##*grace period }"
    else
        echo "ok clients $clients in grace $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s so far"
    fi
}

stop_server() { # stop_server TERM|KILL
    [ -n "$SRV_PID" ] || return 0
    kill -"$1" "$SRV_PID" 2>/dev/null
    local i
    for ((i = 0; i < 100; i++)); do
        kill -0 "$SRV_PID" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$SRV_PID" 2>/dev/null
    wait "$SRV_PID" 2>/dev/null
    SRV_PID=
}

# ganesha 4.3 does not start without rpcbind: a private one, in this
# namespace only (-f foreground, -w no warm-start files), kept across
# server restarts. /var/lib/nfs/ganesha is made private too (ganesha may
# write recovery data there despite RecoveryRoot).
if [ "$SERVER" = ganesha ]; then
    mkdir -p /run/rpcbind /run/ganesha
    mkdir -p /var/lib/nfs/ganesha 2>/dev/null && mount -t tmpfs -o size=16m tmpfs /var/lib/nfs/ganesha
    rpcbind -f -w >"$RUN/rpcbind.log" 2>&1 &
    RPCB_PID=$!
    for ((i = 0; i < 50; i++)); do rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break; sleep 0.1; done
    rpcinfo -p 127.0.0.1 >/dev/null 2>&1 || { say "private rpcbind did not start"; cat "$RUN/rpcbind.log"; exit 1; }
    # ganesha's NLM (KC_NLM=1) asks a local statd SM_MON: one with its
    # state in this namespace's /run (-P), sending no SM_NOTIFY (-L).
    if [ -n "${KC_NLM:-}" ]; then
        mkdir -p /run/statd/sm /run/statd/sm.bak
        rpc.statd -F -L -d -P /run/statd >"$RUN/statd.log" 2>&1 &
        STATD_PID=$!
        for ((i = 0; i < 50; i++)); do rpcinfo -p 127.0.0.1 2>/dev/null | grep -qw 100024 && break; sleep 0.1; done
    fi
fi

# KC_PCAP=1: capture the server side (loopback) for diagnosis.
if [ -n "${KC_PCAP:-}" ]; then
    pcap_filter=(tcp port "$NFS_PORT")
    [ "$MNT_PORT" = "$NFS_PORT" ] || pcap_filter+=(or tcp port "$MNT_PORT")
    tcpdump -i lo -s 512 -U -w "$RUN/nfs.pcap" "${pcap_filter[@]}" >"$RUN/tcpdump.log" 2>&1 &
    TCPDUMP_PID=$!
    sleep 1
fi
if [ -n "$CEPHFS_ON" ]; then
    kc_cephfs_setup || { say "CephFS export setup failed"; exit 1; }
fi
# --net tap: the guest's network is a tap device of this namespace holding
# the gateway's address; the guest is 10.0.2.15 there. Up before the
# server, which listens on that address too.
TAP_HOST_IP=10.0.2.2
TAP_GUEST_IP=10.0.2.15
if [ "$NET" = tap ]; then
    ip tuntap add dev kctap mode tap && ip link set kctap up && ip addr add "$TAP_HOST_IP/24" dev kctap ||
        { say "tap setup failed"; exit 1; }
fi
start_server || { say "server did not start"; tail -n 20 "$RUN/server.log"; exit 1; }
if [ -n "$FO_ON" ]; then
    # shellcheck source=failover-host.sh
    . "$HERE/failover-host.sh"
    fo_setup || { say "failover setup failed"; exit 1; }
fi
say "server $SERVER up on 127.0.0.1:$NFS_PORT, MOUNT on $MNT_PORT (pid $SRV_PID)"

accel=tcg,thread=multi
[ "$ACCEL" = kvm ] && accel=kvm
case $NET in
tap)
    # The guest's packets reach this namespace's stack as they are: the
    # server sees the guest's own address and reaches back to it (NLM's
    # GRANTED callback and NSM's SM_NOTIFY to the guest's rpcbind, lockd
    # and statd). The failover heads are routed to (failover-host.sh).
    netdev=(-netdev tap,id=n0,ifname=kctap,script=no,downscript=no)
    ;;
passt)
    # passt: guest connections to the gateway (10.0.2.2) reach this
    # namespace's loopback. It needs a routable interface to copy: a veth
    # pair whose far end has no address, so nothing goes anywhere.
    ip link add kc0 type veth peer name kc1 && ip link set kc0 up && ip link set kc1 up &&
        ip addr add 10.0.2.15/24 dev kc0 && ip route add default via 10.0.2.2 ||
        { say "veth setup failed"; exit 1; }
    mkdir -p /run/passt && chmod 1777 /run/passt
    passt -f -s /run/passt/sock --no-dhcp-dns -t none -u none >"$RUN/passt.log" 2>&1 &
    PASST_PID=$!
    for ((i = 0; i < 50; i++)); do [ -S /run/passt/sock ] && break; sleep 0.1; done
    [ -S /run/passt/sock ] || { say "passt did not start"; cat "$RUN/passt.log"; exit 1; }
    netdev=(-netdev stream,id=n0,server=off,addr.type=unix,addr.path=/run/passt/sock)
    ;;
*)
    # qemu user networking; one socat per guest connection (cmd:), so
    # nconnect and reconnects get connections of their own.
    fwd="guestfwd=tcp:10.0.2.100:$NFS_PORT-cmd:socat - TCP:127.0.0.1:$NFS_PORT"
    [ "$MNT_PORT" = "$NFS_PORT" ] || fwd+=",guestfwd=tcp:10.0.2.100:$MNT_PORT-cmd:socat - TCP:127.0.0.1:$MNT_PORT"
    # The port mapper, for the guest's lockd (TCP only: guestfwd has no UDP).
    fwd+=",guestfwd=tcp:10.0.2.100:111-cmd:socat - TCP:127.0.0.1:111"
    # failover: the guest mounts 10.0.2.101, a socat per connection to the
    # floating address.
    [ -n "$FO_ON" ] && fwd+=",guestfwd=tcp:10.0.2.101:2049-cmd:socat - TCP:$FO_ADDR:2049"
    netdev=(-netdev "user,id=n0,restrict=on,$fwd")
    ;;
esac
timeout -k 10 "$QEMU_TIMEOUT" qemu-system-x86_64 \
    -accel "$accel" -cpu max -smp 2 -m 1024 \
    -nodefaults -no-user-config -display none -no-reboot \
    -kernel "$VMLINUZ" -initrd "$INITRD" \
    -append "console=ttyS0 panic=-1 quiet loglevel=4 rdinit=/init" \
    -serial "file:$RUN/console.log" \
    -device virtio-net-pci,netdev=n0 \
    "${netdev[@]}" \
    -virtfs local,path=/usr,mount_tag=usr,security_model=none,readonly=on,id=usr \
    -virtfs "local,path=$RUN/share,mount_tag=share,security_model=none,id=share" \
    -virtfs "local,path=$RUN/share,mount_tag=sharec,security_model=none,id=sharec" \
    >"$RUN/qemu.log" 2>&1 &
QEMU_PID=$!
say "qemu pid $QEMU_PID"

# The most files one mktree request makes.
MKTREE_MAX=100000

# lockf.pl (guest/lockf.pl): POSIX locks taken by a local process.
LOCKF=(/usr/bin/perl "$RUN/share/guest/lockf.pl")

# Serve guest requests (files share/ctl/req.ID, answered in ans.ID).
answer() { echo "$2" >"$RUN/share/ctl/ans.$1.tmp" && mv "$RUN/share/ctl/ans.$1.tmp" "$RUN/share/ctl/ans.$1"; }
while kill -0 "$QEMU_PID" 2>/dev/null; do
    for req in "$RUN"/share/ctl/req.*; do
        [ -f "$req" ] || continue
        id=${req##*/req.}
        read -r cmd arg opt <"$req"
        rm -f "$req"
        say "guest request $id: $cmd $arg ${opt:-}"
        case $cmd in
        restart)
            # restart KILL|TERM [lose=RELPATH]: same port, state dir and
            # export. lose= truncates that file while the server is down: the
            # uncommitted (UNSTABLE) writes a real crash may lose (RFC 1813
            # 3.3.7, 3.3.21); the client must send them again. The answer
            # ends with rnfsd's new NSM state number (STATE_DIR/nlm/state)
            # when there is one: "ok pid PID [state N]".
            stop_server "${arg:-KILL}"
            case ${opt:-} in lose=*) truncate -s 0 "$EXPORT/${opt#lose=}" ;; esac
            if start_server; then
                nsm=
                [ -s "$RUN/state/nlm/state" ] && nsm=" state $(cat "$RUN/state/nlm/state")"
                answer "$id" "ok pid $SRV_PID$nsm"
            else answer "$id" "error server did not restart"; fi
            ;;
        lockhold)
            # lockhold RELPATH SECS: a local process holds a whole-file write
            # lock on EXPORT/RELPATH (at most SECS seconds, or until
            # lockdrop); answered once it holds it.
            [ -z "$HOLD_PID" ] || { kill -TERM "$HOLD_PID" 2>/dev/null; wait "$HOLD_PID" 2>/dev/null; }
            rm -f "$RUN/lockhold.ready"
            "${LOCKF[@]}" hold "$EXPORT/$arg" 0 0 ex "$RUN/lockhold.ready" "${opt:-60}" >>"$RUN/hostlock.log" 2>&1 &
            HOLD_PID=$!
            for ((i = 0; i < 100; i++)); do
                [ -f "$RUN/lockhold.ready" ] && break
                kill -0 "$HOLD_PID" 2>/dev/null || break
                sleep 0.1
            done
            if [ -f "$RUN/lockhold.ready" ]; then answer "$id" "ok held"; else
                kill -TERM "$HOLD_PID" 2>/dev/null; wait "$HOLD_PID" 2>/dev/null; HOLD_PID=
                answer "$id" "error host could not take the lock"
            fi
            ;;
        hostwrite)
            # hostwrite RELPATH TEXT: a program on the host writes TEXT over
            # EXPORT/RELPATH (open for writing with O_TRUNC: it waits while
            # an NFSv4 delegation on the file is recalled); answered when
            # done, with how long it took.
            t0=$(date +%s%N)
            if timeout 55 sh -c 'printf %s "$2" >"$1"' sh "$EXPORT/$arg" "${opt:-}"; then
                answer "$id" "ok took $((($(date +%s%N) - t0) / 1000000)) ms"
            else answer "$id" "error host write failed"; fi
            ;;
        nfswrite3 | nfswrite4)
            # nfswrite3|nfswrite4 RELPATH TEXT: another NFS client of the
            # server (NFSv3, or NFSv4.1) writes TEXT at offset 0 of
            # EXPORT/RELPATH, retrying while it is answered JUKEBOX / DELAY.
            t0=$(date +%s%N)
            if [ -n "${NFS_WRITE:-}" ] && timeout 55 "$NFS_WRITE" "${cmd#nfswrite}" "127.0.0.1:$NFS_PORT" \
                "$EXPORT" "$arg" "${opt:-}" >>"$RUN/nfswrite.log" 2>&1; then
                answer "$id" "ok took $((($(date +%s%N) - t0) / 1000000)) ms"
            else answer "$id" "error the NFS write failed (nfswrite.log)"; fi
            ;;
        delegs | wdelegs)
            # delegs: the NFSv4 delegations the server holds now; wdelegs:
            # the write delegations of them.
            g=rnfsd_nfs4_delegations
            [ "$cmd" = wdelegs ] && g=rnfsd_nfs4_write_delegations
            n=$("$RNFSD_BIN" stats --state-dir "$RUN/state" --prometheus 2>/dev/null |
                awk -v g="$g" '$1 == g { print $2 }')
            answer "$id" "ok ${n:-unknown}"
            ;;
        hostread)
            # hostread RELPATH: a program on the host reads EXPORT/RELPATH
            # (its open waits while an NFSv4 write delegation on the file
            # is recalled); answered with what it read.
            if txt=$(timeout 55 cat "$EXPORT/$arg"); then
                answer "$id" "ok $txt"
            else answer "$id" "error host read failed"; fi
            ;;
        lockdrop) # the lockhold process unlocks and exits
            if [ -n "$HOLD_PID" ]; then
                kill -TERM "$HOLD_PID" 2>/dev/null; wait "$HOLD_PID"; rc=$?; HOLD_PID=
                answer "$id" "ok dropped (exit $rc)"
            else
                answer "$id" "error no lock held"
            fi
            ;;
        lockprobe)
            # lockprobe RELPATH [START]: a local process tries a write lock
            # from START to the end without waiting: "ok held" (refused), "ok free" (granted).
            timeout 10 "${LOCKF[@]}" try "$EXPORT/$arg" "${opt:-0}" 0 ex >>"$RUN/hostlock.log" 2>&1
            case $? in
            0) answer "$id" "ok free" ;;
            1) answer "$id" "ok held" ;;
            *) answer "$id" "error probe failed" ;;
            esac
            ;;
        sqlite)
            # sqlite RELPATH N: a local sqlite3 inserts N rows into the
            # database EXPORT/RELPATH, one transaction each, in the
            # background (sqlitewait collects it).
            seq "${opt:-100}" | awk -v q="'" '{ printf "INSERT INTO t(who, n) VALUES (%shost%s, %d);\n", q, q, $1 }' |
                sqlite3 -cmd ".timeout 120000" "$EXPORT/$arg" >>"$RUN/sqlite-host.log" 2>&1 &
            SQL_PID=$!
            answer "$id" "ok started"
            ;;
        sqlitewait)
            rc=none
            if [ -n "$SQL_PID" ]; then
                # Within the guest's 60 s wait for an answer.
                for ((i = 0; i < 500; i++)); do kill -0 "$SQL_PID" 2>/dev/null || break; sleep 0.1; done
                kill -0 "$SQL_PID" 2>/dev/null && kill -TERM "$SQL_PID"
                wait "$SQL_PID"; rc=$?; SQL_PID=
            fi
            if [ "$rc" = 0 ]; then answer "$id" "ok"; else answer "$id" "error host sqlite3 exit $rc: $(tail -n 2 "$RUN/sqlite-host.log" | tr '\n' '|')"; fi
            ;;
        mkfiles)
            # mkfiles RELDIR N: the new directory EXPORT/RELDIR with regular
            # files entry-00001-with-a-longer-name to N, made on the host
            # (smoke's readdir-10000).
            if [[ ${opt:-} =~ ^[0-9]+$ ]] && [[ $arg != *..* ]] && mkdir "$EXPORT/$arg" &&
                (cd "$EXPORT/$arg" && seq -f 'entry-%05g-with-a-longer-name' 1 "$opt" | xargs touch); then
                answer "$id" "ok made $opt"
            else answer "$id" "error could not make $opt files in $arg"; fi
            ;;
        mktree)
            # mktree RELDIR N: N files in EXPORT/RELDIR/dNN/fNNNN (100 a
            # directory), file I holding "revalidate file I\n" 16 times
            # (revalidate's tree, made here so the guest has none cached).
            if [[ ${opt:-} =~ ^[0-9]+$ ]] && [ "$opt" -le "$MKTREE_MAX" ] && [[ $arg != *..* ]] && mkdir "$EXPORT/$arg" &&
                /usr/bin/python3 -c 'import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    s = "%s/d%02d" % (d, i // 100)
    os.makedirs(s, exist_ok=True)
    with open("%s/f%04d" % (s, i), "wb") as f:
        f.write(b"revalidate file %d\n" % i * 16)' "$EXPORT/$arg" "$opt"; then
                answer "$id" "ok made $opt"
            else answer "$id" "error could not make $opt files in $arg"; fi
            ;;
        mkrand)
            # mkrand RELPATH MIB: EXPORT/RELPATH of MIB random MiB, made on
            # the host; answered with its SHA-256 (v42data's copy source).
            if [[ ${opt:-} =~ ^[0-9]+$ ]] && [[ $arg != *..* ]] && mkdir -p "$(dirname "$EXPORT/$arg")" &&
                head -c "$((opt << 20))" /dev/urandom >"$EXPORT/$arg"; then
                answer "$id" "ok $(sha256sum "$EXPORT/$arg" | cut -d' ' -f1)"
            else answer "$id" "error could not make $arg"; fi
            ;;
        opcalls)
            # opcalls OP: how many NFSv4 operations OP the running rnfsd
            # has counted (rnfsd stats --json, the nfs4_op rows).
            if [ "$SERVER" = rnfsd ] && n=$("$RNFSD_BIN" stats --state-dir "$RUN/state" --json |
                /usr/bin/python3 -c 'import json, sys
s = json.load(sys.stdin)
print(sum(p["calls"] for p in s["procs"] if p["program"] == "nfs4_op" and p["name"] == sys.argv[1]))' "$arg"); then
                answer "$id" "ok $n"
            else answer "$id" "error no counts (rnfsd only)"; fi
            ;;
        graceinfo) # the running rnfsd's NFSv4 grace period (grace_info)
            if [ "$SERVER" = rnfsd ]; then answer "$id" "$(grace_info)"; else answer "$id" "error rnfsd only"; fi
            ;;
        failover) # failover-host.sh: head A dies, the address moves to B
            if [ -n "$FO_ON" ]; then fo_failover; answer "$id" "$FO_ANSWER"; else answer "$id" "error no failover setup"; fi
            ;;
        *) answer "$id" "error unknown request" ;;
        esac
    done
    sleep 0.1
done
wait "$QEMU_PID"
rc=$?
QEMU_PID=
say "qemu exited $rc"
if [ -n "$FO_ON" ]; then fo_report; fi
if [ -n "$CEPHFS_ON" ]; then
    # The server ends its CephFS session first: ceph-fuse then reads what
    # it wrote back.
    stop_server TERM
    kc_cephfs_hostchecks
fi
[ $rc -eq 124 ] && { say "qemu timed out after ${QEMU_TIMEOUT}s"; exit 124; }
exit 0
