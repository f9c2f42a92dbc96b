#!/usr/bin/env bash
# Run nfs-ganesha (Debian package, VFS FSAL, NFSv3 over TCP; with --v4 also
# NFSv4.1 and 4.2) beside rnfsd for side-by-side benchmarks and as a reference
# server for the NFSv4.1 client's tests. See docs/ganesha.md.
#
# ganesha 4.3 will not start without rpcbind, and a loopback-only rpcbind
# (`rpcbind -h 127.0.0.1`) crashes, so ganesha always runs with a PRIVATE
# rpcbind inside its own network + mount namespace (`unshare --net --mount`,
# only `lo` up, a tmpfs on /run so rpcbind's socket and lock files are
# private). Nothing outside the namespace can reach it, and it cannot touch
# the host's rpcbind. The client therefore has to run inside the namespace:
#
#   scripts/ganesha.sh exec --export DIR [--port N] [--mnt-port M] [--v4] -- CMD ARGS...
#       namespace + rpcbind + ganesha, wait until NFS and MOUNT answer, run
#       CMD in the namespace (NFS at 127.0.0.1:N, default 2049; MOUNT at
#       127.0.0.1:M, default 20048: ganesha 4.3 cannot serve MOUNT on the NFS
#       port), stop both by PID, exit with CMD's status. CMD sees
#       GANESHA_NFS_PORT, GANESHA_MNT_PORT and GANESHA_EXPORT.
#   scripts/ganesha.sh start --export DIR [--port N] [--mnt-port M] [--v4]
#       the same in the background, until `stop`; run clients with
#       `scripts/ganesha.sh enter -- CMD ARGS...` (nsenter into it).
#   scripts/ganesha.sh stop | status
#   scripts/ganesha.sh config --export DIR [--port N] [--mnt-port M] [--nlm]
#       only write $GANESHA_RUN/ganesha.conf (installing ganesha if needed)
#       and print its path; for harnesses that run ganesha themselves
#       (tests/kernel-client/ns.sh). --nlm turns ganesha's NLM on (off
#       by default; it then needs an rpc.statd beside it).
#   --v4: serve NFSv4.1 and 4.2 as well as NFSv3 (Protocols = 3, 4 and
#       Minor_Versions = 1, 2); the export's v4 path is DIR too. Without
#       it, NFSv3 only, as before.
#
# Environment: GANESHA_RUN (run dir, default /tmp/rnfsd-ganesha),
# GANESHA_WAIT (seconds to wait for ganesha to answer, default 30).
set -euo pipefail

RUN=${GANESHA_RUN:-/tmp/rnfsd-ganesha}
WAIT=${GANESHA_WAIT:-30}
PORT=2049
MNT_PORT=
EXPORT=
NLM=false
V4=false

die() { echo "ganesha.sh: $*" >&2; exit 2; }
log() { echo "ganesha.sh: $*" >&2; }

usage() {
    sed -n '2,/^set -euo pipefail/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2
    exit 2
}

ensure_installed() {
    if command -v ganesha.nfsd >/dev/null 2>&1 &&
        dpkg-query -W -f='${Status}' nfs-ganesha-vfs 2>/dev/null | grep -q 'install ok installed' &&
        command -v rpcbind >/dev/null 2>&1 && command -v rpcinfo >/dev/null 2>&1; then
        return 0
    fi
    log "installing nfs-ganesha nfs-ganesha-vfs rpcbind"
    export DEBIAN_FRONTEND=noninteractive
    local apt="$(dirname "${BASH_SOURCE[0]}")/apt-get-locked"
    if ! "$apt" install -y --no-install-recommends nfs-ganesha nfs-ganesha-vfs rpcbind >&2; then
        "$apt" update >&2
        "$apt" install -y --no-install-recommends nfs-ganesha nfs-ganesha-vfs rpcbind >&2
    fi
    # The package may have started a service in the host namespace; we never
    # use it, and leave it to the host's administrator.
}

fsal_dir() {
    local d
    for d in /usr/lib/x86_64-linux-gnu/ganesha /usr/lib/*/ganesha /usr/lib64/ganesha /usr/lib/ganesha; do
        [ -e "$d/libfsalvfs.so" ] && { echo "$d"; return 0; }
    done
    die "libfsalvfs.so not found (is nfs-ganesha-vfs installed?)"
}

write_config() {
    mkdir -p "$RUN/recovery" "$RUN/state"
    local protocols=3 minor=
    if [ "$V4" = true ]; then
        protocols="3, 4"
        # NFSv4.0 stays off: the client under test speaks 4.1.
        minor="Minor_Versions = 1, 2;"
    fi
    cat >"$RUN/ganesha.conf" <<EOF
# Written by scripts/ganesha.sh; regenerated on every start.
NFS_CORE_PARAM {
    NFS_Port = $PORT;
    MNT_Port = $MNT_PORT;
    NLM_Port = 0;
    Rquota_Port = 0;
    # No Bind_addr: getaddrinfo("127.0.0.1") fails in a namespace with only
    # lo (AI_ADDRCONFIG), and lo is all there is here anyway.
    Protocols = $protocols;
    Enable_NLM = $NLM;
    Enable_RQUOTA = false;
    Enable_UDP = false;
    # NFSv3 MNT by the export's path (Path = Pseudo = DIR anyway).
    Mount_Path_Pseudo = true;
    Plugins_Dir = "$(fsal_dir)";
}
NFSv4 {
    Graceless = true;
    RecoveryRoot = "$RUN/recovery";
    $minor
}
NFS_KRB5 { Active_krb5 = false; }
EXPORT_DEFAULTS {
    Transports = TCP;
}
EXPORT {
    Export_Id = 77;
    Path = "$EXPORT";
    Pseudo = "$EXPORT";
    Protocols = $protocols;
    Transports = TCP;
    Access_Type = RW;
    Squash = No_Root_Squash;
    SecType = sys;
    FSAL { Name = VFS; }
}
LOG {
    Default_Log_Level = EVENT;
}
EOF
}

# Runs inside the namespace (as `ganesha.sh __inner`): private /run and lo,
# rpcbind + ganesha, wait, then CMD (or, with no CMD, wait for a signal).
inner() {
    ip link set lo up
    mount -t tmpfs -o mode=755,size=16m tmpfs /run
    mkdir -p /run/rpcbind /run/ganesha
    # Our own /var/lib/nfs/ganesha too (ganesha writes its v4 recovery data
    # there on some paths even with RecoveryRoot set).
    mkdir -p /var/lib/nfs/ganesha 2>/dev/null || true
    mount -t tmpfs -o size=16m tmpfs /var/lib/nfs/ganesha 2>/dev/null || true

    local rpcb_pid= gan_pid= st=0
    cleanup() {
        [ -n "$gan_pid" ] && kill -TERM "$gan_pid" 2>/dev/null || true
        local i
        for i in $(seq 1 50); do
            [ -n "$gan_pid" ] && kill -0 "$gan_pid" 2>/dev/null || break
            sleep 0.1
        done
        [ -n "$gan_pid" ] && kill -KILL "$gan_pid" 2>/dev/null || true
        [ -n "$rpcb_pid" ] && kill -TERM "$rpcb_pid" 2>/dev/null || true
        [ -n "$gan_pid" ] && wait "$gan_pid" 2>/dev/null || true
        [ -n "$rpcb_pid" ] && wait "$rpcb_pid" 2>/dev/null || true
    }
    trap 'cleanup; exit 143' TERM INT

    # -f: foreground (we own its PID); -w: no warm-start state files.
    rpcbind -f -w &
    rpcb_pid=$!
    local i
    for i in $(seq 1 50); do
        rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break
        sleep 0.1
    done
    rpcinfo -p 127.0.0.1 >/dev/null 2>&1 || { cleanup; die "private rpcbind did not start"; }

    ganesha.nfsd -F -f "$RUN/ganesha.conf" -L "$RUN/ganesha.log" -p "$RUN/ganesha.pid" &
    gan_pid=$!
    echo "$gan_pid" >"$RUN/ganesha.realpid"
    local ok=
    for i in $(seq 1 $((WAIT * 10))); do
        kill -0 "$gan_pid" 2>/dev/null || break
        if rpcinfo -t 127.0.0.1 nfs 3 >/dev/null 2>&1 &&
            rpcinfo -t 127.0.0.1 mountd 3 >/dev/null 2>&1; then
            ok=1
            break
        fi
        sleep 0.1
    done
    if [ -z "$ok" ]; then
        log "ganesha exited or did not answer within ${WAIT}s; last log lines:"
        tail -n 20 "$RUN/ganesha.log" >&2 || true
        cleanup
        exit 1
    fi
    log "ganesha pid $gan_pid: NFS 127.0.0.1:$PORT MOUNT 127.0.0.1:$MNT_PORT export $EXPORT"
    rpcinfo -p 127.0.0.1 >&2 || true

    if [ $# -gt 0 ]; then
        GANESHA_NFS_PORT=$PORT GANESHA_MNT_PORT=$MNT_PORT GANESHA_EXPORT=$EXPORT "$@" || st=$?
        cleanup
        exit "$st"
    fi
    # start mode: stay until stop (TERM) or until ganesha exits.
    echo ready >"$RUN/ready"
    wait "$gan_pid" || st=$?
    gan_pid=
    cleanup
    exit "$st"
}

parse_opts() {
    while [ $# -gt 0 ]; do
        case "$1" in
        --export) EXPORT=${2:?}; shift 2 ;;
        --port) PORT=${2:?}; shift 2 ;;
        --mnt-port) MNT_PORT=${2:?}; shift 2 ;;
        --nlm) NLM=true; shift ;;
        --v4 | --nfs4) V4=true; shift ;;
        --) shift; CMD=("$@"); return 0 ;;
        *) die "unknown argument: $1" ;;
        esac
    done
}

prepare() {
    [ "$(id -u)" = 0 ] || die "must run as root (namespaces, ganesha VFS FSAL)"
    [ -n "$EXPORT" ] || die "--export DIR is required"
    [ -d "$EXPORT" ] || die "export $EXPORT is not a directory"
    EXPORT=$(readlink -f "$EXPORT")
    [ -n "$MNT_PORT" ] || MNT_PORT=20048
    # Measured with 4.3: with MNT_Port = NFS_Port it registers mountd on the
    # NFS port, but that socket answers MOUNT calls PROG_UNAVAIL.
    [ "$MNT_PORT" != "$PORT" ] || die "--mnt-port must differ from --port (ganesha 4.3 answers MOUNT on the NFS port with PROG_UNAVAIL)"
    ensure_installed
    mkdir -p "$RUN"
    rm -f "$RUN/ready" "$RUN/ganesha.pid" "$RUN/ganesha.realpid"
    write_config
}

ns_pid() { # PID of the namespace's holder (the unshare'd inner shell)
    [ -f "$RUN/ns.pid" ] && kill -0 "$(cat "$RUN/ns.pid")" 2>/dev/null && cat "$RUN/ns.pid"
}

CMD=()
sub=${1:-}
[ $# -gt 0 ] && shift
case "$sub" in
__inner)
    PORT=$1 MNT_PORT=$2 EXPORT=$3
    shift 3
    inner "$@"
    ;;
exec)
    parse_opts "$@"
    [ ${#CMD[@]} -gt 0 ] || die "exec needs -- CMD ARGS..."
    prepare
    st=0
    # In the background so a TERM/INT to us is passed on to the inner shell
    # (whose trap stops ganesha and rpcbind by PID) instead of orphaning it.
    unshare --net --mount --propagation private -- "$0" __inner "$PORT" "$MNT_PORT" "$EXPORT" "${CMD[@]}" &
    inner_pid=$!
    trap 'kill -TERM "$inner_pid" 2>/dev/null || true' TERM INT
    while :; do
        wait "$inner_pid" && st=0 || st=$?
        kill -0 "$inner_pid" 2>/dev/null || break
    done
    exit "$st"
    ;;
start)
    parse_opts "$@"
    [ -z "$(ns_pid || true)" ] || die "already running (pid $(cat "$RUN/ns.pid")); stop first"
    prepare
    # setsid: its own session, so the caller's terminal signals don't reach it.
    setsid unshare --net --mount --propagation private -- "$0" __inner "$PORT" "$MNT_PORT" "$EXPORT" \
        </dev/null >>"$RUN/inner.log" 2>&1 &
    echo $! >"$RUN/ns.pid"
    for _ in $(seq 1 $((WAIT * 10))); do
        [ -f "$RUN/ready" ] && break
        kill -0 "$(cat "$RUN/ns.pid")" 2>/dev/null || break
        sleep 0.1
    done
    if [ ! -f "$RUN/ready" ]; then
        tail -n 20 "$RUN/inner.log" >&2 || true
        "$0" stop || true
        die "ganesha did not start"
    fi
    echo "ganesha running in namespace of pid $(cat "$RUN/ns.pid"); clients: $0 enter -- CMD"
    ;;
enter)
    parse_opts "$@"
    p=$(ns_pid) || die "not running"
    # unshare (no --fork) exec'd the inner shell: $p holds the namespaces.
    PORT=$(sed -n 's/^ *NFS_Port = \([0-9]*\);/\1/p' "$RUN/ganesha.conf")
    MNT_PORT=$(sed -n 's/^ *MNT_Port = \([0-9]*\);/\1/p' "$RUN/ganesha.conf")
    EXPORT=$(sed -n 's/^ *Path = "\(.*\)";/\1/p' "$RUN/ganesha.conf")
    GANESHA_NFS_PORT=$PORT GANESHA_MNT_PORT=$MNT_PORT GANESHA_EXPORT=$EXPORT \
        exec nsenter --target "$p" --net --mount -- "${CMD[@]}"
    ;;
stop)
    p=$(ns_pid) || { echo "not running"; exit 0; }
    # TERM the inner shell ($p, exec'd by unshare): its trap stops ganesha
    # and rpcbind by PID.
    kill -TERM "$p" 2>/dev/null || true
    for _ in $(seq 1 100); do
        kill -0 "$p" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$p" 2>/dev/null; then
        log "namespace holder $p still alive after 10 s; killing it"
        kill -KILL "$p" 2>/dev/null || true
    fi
    rm -f "$RUN/ns.pid" "$RUN/ready"
    echo "stopped"
    ;;
config)
    parse_opts "$@"
    [ -z "$(ns_pid || true)" ] || die "an instance runs with this GANESHA_RUN ($RUN); stop it first"
    prepare
    echo "$RUN/ganesha.conf"
    ;;
status)
    if p=$(ns_pid); then
        echo "running: namespace holder pid $p, ganesha pid $(cat "$RUN/ganesha.realpid" 2>/dev/null || echo '?')"
        exit 0
    fi
    echo "not running"
    exit 3
    ;;
*) usage ;;
esac
