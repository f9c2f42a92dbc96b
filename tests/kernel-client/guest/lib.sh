# Guest-side helpers, sourced by main.sh and every workload.
# Results go to /share/results.txt as "PASS name" / "FAIL name: why" lines;
# the host tallies them after the guest powers off.
# shellcheck shell=bash

RESULTS=/share/results.txt
CTL=/share/ctl
# Written by the host: SERVER_IP, NFS_PORT, MNT_PORT, EXPORT, WORKLOADS,
# MNT_OPTS.
# shellcheck source=/dev/null
. /share/params

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

# Base mount options: NFSv3 over TCP straight to the forwarded ports
# (MOUNT on the NFS port for rnfsd, on its own for ganesha); no rpcbind
# (port/mountport given), no NLM (nolock) unless a workload sets
# LOCK_OPT=lock (locks.sh, which runs rpcbind and rpc.statd first).
LOCK_OPT=nolock
base_opts() {
    echo "vers=3,proto=tcp,port=$NFS_PORT,mountport=${MNT_PORT:-$NFS_PORT},mountproto=tcp,$LOCK_OPT,addr=$SERVER_IP,mountaddr=$SERVER_IP${MNT_OPTS:+,$MNT_OPTS}"
}

# nfs_mount DIR [EXTRA_OPTS]: mount(2) with the kernel's text options
# (util-linux mount -i: no mount.nfs helper).
nfs_mount() {
    local dir=$1 extra=${2:-}
    mkdir -p "$dir"
    mount -i -t nfs -o "$(base_opts)${extra:+,$extra}" "$SERVER_IP:$EXPORT" "$dir"
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
