# Guest-side helpers, sourced by main.sh and every workload.
# Results go to /share/results.txt as "PASS name" / "FAIL name: why" lines;
# the host tallies them after the guest powers off.
# shellcheck shell=bash

RESULTS=/share/results.txt
CTL=/share/ctl
# Written by the host: SERVER_IP, NFS_PORT, MNT_PORT, EXPORT, VERS,
# WORKLOADS, MNT_OPTS.
# shellcheck source=/dev/null
. /share/params
# The NFS version mounted: 3, 4.1, 4.2 or auto (run.sh --vers).
VERS=${VERS:-3}

log() { echo "[guest $(date +%T)] $*"; }

pass() { echo "PASS $1" >>"$RESULTS"; log "PASS $1"; }
fail() { echo "FAIL $1: ${2:-}" >>"$RESULTS"; log "FAIL $1: ${2:-}"; }

# check NAME CMD...: one check; runs CMD in a subshell with errexit, so a
# check fails on its first failing command. The output tail is the reason.
# Never call it in a conditional (that would switch errexit off inside);
# it returns 0 and leaves the status in CHECK_RC.
check() {
    local name=$1 out rc
    shift
    out=$( (set -e; "$@") 2>&1 )
    rc=$?
    if [ $rc -eq 0 ]; then
        pass "$name"
    else
        fail "$name" "exit $rc: $(printf '%s' "$out" | tail -n 3 | tr '\n' '|')"
    fi
    CHECK_RC=$rc
    return 0
}

# Base mount options (base_opts [VERS], default $VERS), over TCP straight
# to the forwarded ports. NFSv3: MOUNT on the NFS port for rnfsd, on its own
# for ganesha; no rpcbind (port/mountport given), no NLM (nolock) unless a
# workload sets LOCK_OPT=lock (locks.sh, which runs rpcbind and rpc.statd
# first). NFSv4.x: port 2049 only; locking is in the protocol. auto: no
# vers= (mount.nfs picks; it adds addr= and clientaddr= itself).
LOCK_OPT=nolock
base_opts() {
    local v=${1:-$VERS}
    case $v in
    3) printf '%s' "vers=3,proto=tcp,port=$NFS_PORT,mountport=${MNT_PORT:-$NFS_PORT},mountproto=tcp,$LOCK_OPT,addr=$SERVER_IP,mountaddr=$SERVER_IP" ;;
    auto) printf '%s' "proto=tcp,port=$NFS_PORT" ;;
    *) printf '%s' "vers=$v,proto=tcp,port=$NFS_PORT,addr=$SERVER_IP" ;;
    esac
    echo "${MNT_OPTS:+,$MNT_OPTS}"
}

# rpc_etc: the /etc files the host's RPC programs (libtirpc, mount.nfs,
# rpcbind, rpc.statd) look things up in; the initramfs has none of them.
rpc_etc() {
    # libtirpc's transports (Debian's /etc/netconfig).
    [ -s /etc/netconfig ] || cat >/etc/netconfig <<'EOF'
udp        tpi_clts      v     inet     udp     -       -
tcp        tpi_cots_ord  v     inet     tcp     -       -
udp6       tpi_clts      v     inet6    udp     -       -
tcp6       tpi_cots_ord  v     inet6    tcp     -       -
rawip      tpi_raw       -     inet      -      -       -
local      tpi_cots_ord  -     loopback  -      -       -
unix       tpi_cots_ord  -     loopback  -      -       -
EOF
    # getprotobyname("tcp") (mount.nfs's proto=).
    grep -qw tcp /etc/protocols 2>/dev/null || printf '%s\n' 'ip 0 IP' 'tcp 6 TCP' 'udp 17 UDP' >>/etc/protocols
    # libtirpc finds the port mapper's port by the service name.
    grep -qw sunrpc /etc/services 2>/dev/null || printf '%s\n' 'sunrpc 111/tcp portmapper' 'sunrpc 111/udp portmapper' >>/etc/services
    grep -qw nlockmgr /etc/rpc 2>/dev/null || printf '%s\n' 'portmapper 100000 portmap sunrpc rpcbind' \
        'status 100024' 'nlockmgr 100021' 'nfs 100003' 'mountd 100005' >>/etc/rpc
}

# nfs_mount DIR [EXTRA_OPTS [VERS]]: mount(2) with the kernel's text options
# (util-linux mount -i: no mount.nfs helper; the kernel alone mounts NFSv3
# when no vers= is given). VERS auto: the host's mount.nfs (init keeps it
# at /run/mount.nfs.real), which tries 4.2, then 4.1, 4.0 and 3.
nfs_mount() {
    local dir=$1 extra=${2:-} v=${3:-$VERS}
    mkdir -p "$dir"
    if [ "$v" = auto ]; then
        rpc_etc
        /run/mount.nfs.real "$SERVER_IP:$EXPORT" "$dir" -o "$(base_opts auto)${extra:+,$extra}"
    else
        mount -i -t nfs -o "$(base_opts "$v")${extra:+,$extra}" "$SERVER_IP:$EXPORT" "$dir"
    fi
}

# mount_line DIR: DIR's line in /proc/mounts when an NFS mount (type nfs
# for NFSv3, nfs4 for NFSv4.x); fails when there is none.
mount_line() {
    awk -v m="$1" '$2 == m && ($3 == "nfs" || $3 == "nfs4") { print; f = 1 } END { exit !f }' /proc/mounts
}

# mount_vers DIR: the version the client mounted DIR with (3, 4.1, 4.2).
mount_vers() {
    mount_line "$1" | tr ',' '\n' | sed -n 's/^vers=//p' | tail -n 1
}

# host_request CMD...: asks the host-side harness to do something (restart
# the server) and waits for its answer; prints the answer.
host_request() {
    local id ans i
    id=$(date +%s%N)
    mkdir -p "$CTL"
    echo "$*" >"$CTL/tmp.$id"
    mv "$CTL/tmp.$id" "$CTL/req.$id"
    for ((i = 0; i < 600; i++)); do
        if [ -f "$CTL/ans.$id" ]; then
            ans=$(cat "$CTL/ans.$id")
            rm -f "$CTL/ans.$id"
            echo "$ans"
            [ "${ans%% *}" = ok ]
            return
        fi
        sleep 0.1
    done
    echo "timeout"
    return 1
}

# hostcheck NAME RELPATH SHA256: the host checks, after the guest is gone,
# that EXPORT/RELPATH has this content on the server's disk.
hostcheck() { echo "HOSTCHECK $1 $2 $3" >>"$RESULTS"; }

# hostxattr NAME RELPATH XATTR SHA256|absent: the host checks, after the
# guest is gone, that extended attribute XATTR of the server's file
# RELPATH has a value of that hash, or is absent.
hostxattr() { echo "HOSTXATTR $1 $2 $3 $4" >>"$RESULTS"; }

# eq WHAT GOT WANT: fails (for check) with a message when GOT != WANT.
eq() {
    [ "$2" = "$3" ] && return 0
    echo "$1: got '$2', want '$3'"
    return 1
}

# Drop the guest's page, dentry and inode caches so the next access goes to
# the server.
dropcaches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# opstats DIR: the client's per-procedure counts and mean round trip /
# execute times (ms) for the mount at DIR, from /proc/self/mountstats.
opstats() {
    awk -v m="$1" '
        $1 == "device" { on = ($5 == m) }
        on && /^[[:space:]]+[A-Z_]+:/ && NF >= 9 && $2 > 0 {
            printf "%s %d ops rtt %.1fms exec %.1fms; ", $1, $2, $8 / $2, $9 / $2
        }
        END { print "" }' /proc/self/mountstats
}

# NLM's client side (NFSv3 mounted without nolock): the guest's lockd needs
# a local rpcbind (it registers at start) and rpc.statd (the kernel asks it
# SM_MON before a lock), both from the host's /usr, with their state on
# tmpfs. nlm_start_daemons starts them (NLM_DAEMONS: their pids),
# nlm_daemons_ok checks both are registered, nlm_stop_daemons stops them.
NLM_DAEMONS=()
nlm_start_daemons() {
    mkdir -p /run/rpcbind /var/lib/nfs/sm /var/lib/nfs/sm.bak
    # The kernel's rpcbind client looks for /var/run/rpcbind.sock.
    [ -e /var/run ] || ln -s /run /var/run
    rpc_etc
    # rpcbind exits at once without its user (Debian's build: _rpc).
    grep -q '^_rpc:' /etc/passwd || echo '_rpc:x:102:65534::/run/rpcbind:/usr/sbin/nologin' >>/etc/passwd
    # NLM requests carry the node name as caller_name; statd resolves it.
    hostname kcguest
    grep -q kcguest /etc/hosts || echo "10.0.2.15 kcguest" >>/etc/hosts
    local i
    # Started once: the guest's own knfsd (--server knfsd-guest) runs them
    # before any workload.
    if ! rpcinfo -p 127.0.0.1 >/dev/null 2>&1; then
        rpcbind -f >/tmp/rpcbind.log 2>&1 &
        NLM_DAEMONS+=($!)
        for ((i = 0; i < 100; i++)); do rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break; sleep 0.1; done
    fi
    rpcinfo -p 127.0.0.1 2>/dev/null | grep -qw 100024 && return 0
    # -L: no SM_NOTIFY at start (nobody to tell); -d: log to stderr.
    rpc.statd -F -L -d >/tmp/statd.log 2>&1 &
    NLM_DAEMONS+=($!)
    for ((i = 0; i < 100; i++)); do rpcinfo -p 127.0.0.1 2>/dev/null | grep -qw 100024 && break; sleep 0.1; done
}
nlm_daemons_ok() {
    rpcinfo -p 127.0.0.1 >/tmp/rpcinfo.out 2>&1 || { cat /tmp/rpcinfo.out /tmp/rpcbind.log; exit 1; }
    grep -qw 100024 /tmp/rpcinfo.out || { echo "statd not registered"; tail -n 3 /tmp/statd.log; exit 1; }
}
nlm_stop_daemons() {
    local p
    for p in "${NLM_DAEMONS[@]}"; do kill -TERM "$p" 2>/dev/null; done
    NLM_DAEMONS=()
}
