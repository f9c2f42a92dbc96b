# Shared by cold-handles.sh and cache-reclaim-mount.sh (source it, do not run it): a
# fresh ext4 filesystem on a loop device of its own, and rnfsd started and
# stopped on it. The caller sets WORK (a directory under /tmp), RNFSD and
# BENCH, and defines log and die.

LOOP=
FS=
SERVER_PID=
SERVER_PORT=

# Tools the scripts use; installs what is missing (as compare.sh does) and
# builds the release binaries when absent.
ensure_tools() { # ROOT
    local apt="$(dirname "${BASH_SOURCE[0]}")/apt-get-locked"
    command -v mkfs.ext4 >/dev/null || { log "installing e2fsprogs"; "$apt" install -y e2fsprogs >&2; }
    command -v losetup >/dev/null || { log "installing util-linux"; "$apt" install -y util-linux >&2; }
    command -v jq >/dev/null || { log "installing jq"; "$apt" install -y jq >&2; }
    if [ ! -x "$BENCH" ] || [ ! -x "$RNFSD" ]; then
        log "building release binaries"
        (cd "$1" && cargo build --release -p rnfsd -p rnfsd-bench >&2)
    fi
}

# fresh_ext4 INODES DATA_BYTES: a sparse image in $WORK on its own loop
# device, ext4 with INODES inodes (tables written now, not by a background
# thread during the run), mounted on $WORK/fs. Sized for the inodes: ext4
# keeps at most 32,768 inodes per 128 MiB block group (4 KiB blocks).
fresh_ext4() {
    local inodes=$1 data=$2 mib
    loopfs_cleanup
    mib=$(( (inodes + 32767) / 32768 * 128 * 3 / 2 + data / 1048576 * 12 / 10 + 1024 ))
    [ "$mib" -ge 16384 ] || mib=16384
    truncate -s "${mib}M" "$WORK/fs.img"
    LOOP=$(losetup --find --show "$WORK/fs.img")
    mkfs.ext4 -q -F -N "$inodes" -E lazy_itable_init=0,lazy_journal_init=0 "$LOOP"
    FS=$WORK/fs
    mkdir -p "$FS"
    mount "$LOOP" "$FS"
    log "fresh ext4: $LOOP (${mib} MiB sparse, $inodes inodes) on $FS"
}

# Unmount, detach the loop device, delete the image. Safe to call twice.
loopfs_cleanup() {
    if [ -n "$FS" ] && mountpoint -q "$FS" 2>/dev/null; then
        umount "$FS" 2>/dev/null || umount -l "$FS" 2>/dev/null || true
    fi
    if [ -n "$LOOP" ]; then
        losetup -d "$LOOP" 2>/dev/null || true
        LOOP=
    fi
    rm -f "$WORK/fs.img"
}

# The bench calls from ordinary ports: --insecure where the build has it
# (`secure` became the default; older builds accept any port already).
insecure_flag() {
    "$1" serve --help 2>/dev/null | grep -q -- '--insecure' && echo --insecure
    return 0
}

# start_rnfsd DIR STATE_DIR LOGFILE [SERVE ARGS...]: rnfsd on a free port of
# 127.0.0.1; waits (10 s at most) for its port file. Sets SERVER_PID and
# SERVER_PORT. --no-root-squash: the bench calls as uid 0 (as compare.sh).
start_rnfsd() {
    local dir=$1 state=$2 logf=$3
    shift 3
    rm -f "$WORK/port"
    mkdir -p "$state"
    "$RNFSD" serve "$dir" --listen 127.0.0.1:0 --port-file "$WORK/port" \
        --state-dir "$state" --no-rpcbind --no-root-squash --log-level warn \
        $(insecure_flag "$RNFSD") "$@" >>"$logf" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 100); do
        [ -s "$WORK/port" ] && break
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    if [ ! -s "$WORK/port" ]; then
        tail -5 "$logf" >&2
        SERVER_PID=
        die "rnfsd did not start (log: $logf)"
    fi
    SERVER_PORT=$(cat "$WORK/port")
}

# SIGTERM, then SIGKILL if it has not exited within 20 s.
stop_rnfsd() {
    [ -n "$SERVER_PID" ] || return 0
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 200); do
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
}

# VmRSS of a process, KiB.
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# Dentries the kernel holds now (first field of /proc/sys/fs/dentry-state).
dentries() { awk '{ print $1 }' /proc/sys/fs/dentry-state; }
