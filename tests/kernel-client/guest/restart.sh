# restart: the server is stopped (SIGTERM, then SIGKILL) and started again
# on the same port and state dir while this guest holds the mount, open
# files and a working directory inside it. File handles must keep working
# (no ESTALE: RFC 1813 handles outlive server restarts), and writes in
# flight across a SIGKILL must all be on the server's disk after fsync
# (RFC 1813 3.3.7, 3.3.21: the new write verifier makes the client resend).
# At NFSv4.x (rnfsd) also: with no client known the grace period ends at
# once; a guest process's lock and the open files survive each restart,
# reclaimed in the grace period (RFC 8881 §8.4.2: the server knows the
# client from its record in the state dir), and the grace period ends
# early once the client sent RECLAIM_COMPLETE (INFO lines give how long
# after the restart new opens were served).
# shellcheck shell=bash
. /share/guest/lib.sh
M=/mnt/nfs
R=$M/restart
V=$M/restart-v4 # the NFSv4 checks' files (R's listing is checked)
LK=(/usr/bin/perl /share/guest/lockf.pl)
# The NFSv4 state checks: rnfsd's grace period (ganesha runs Graceless,
# scripts/ganesha.sh) and its log (the graceinfo request).
V4=
[ "$VERS" != 3 ] && [ "$SERVER_KIND" = rnfsd ] && V4=1

# opcount OP: how many OP calls the client has sent on this mount.
opcount() {
    awk -v m="$M" -v op="$1:" '$1 == "device" { on = ($5 == m) } on && $1 == op { print $2; exit }' /proc/self/mountstats
}

# Perl for the syscalls the shell has no command for (on inherited fds).
fd_fsync() { # fd_fsync FD
    perl -MIO::Handle -e 'open(my $f, ">&=", $ARGV[0]) or die "fdopen: $!\n"; $f->sync or die "fsync: $!\n"' "$1"
}
fd_pread() { # fd_pread FD LEN: LEN bytes at offset 0, on stdout
    perl -e 'open(my $f, "<&=", $ARGV[0]) or die "fdopen: $!\n"; sysseek($f, 0, 0) or die "seek: $!\n";
             defined(sysread($f, my $b, $ARGV[1])) or die "read: $!\n"; print $b' "$1" "$2"
}
fd_pwrite() { # fd_pwrite FD OFFSET TEXT
    perl -e 'open(my $f, "+<&=", $ARGV[0]) or die "fdopen: $!\n"; sysseek($f, $ARGV[1], 0) or die "seek: $!\n";
             syswrite($f, $ARGV[2]) == length($ARGV[2]) or die "write: $!\n"' "$1" "$2" "$3"
}

t_setup() {
    mkdir -p $R/dir/sub
    echo content-a >$R/a
    head -c 200000 /dev/urandom >/tmp/b.bin
    cp /tmp/b.bin $R/b
    echo in-sub >$R/dir/sub/f
    sync
}

t_fd_read() { # through the descriptor opened before the restart
    dropcaches
    eq "read via fd" "$(fd_pread 5 100)" content-a
}

t_fd_write() { # SIG: write through the old rw descriptor, fsync, re-read
    fd_pwrite 6 1000 "written-after-$1"
    fd_fsync 6
    dropcaches
    eq "pwrite via fd" "$(dd if=$R/b bs=1 skip=1000 count=$((14 + ${#1})) status=none)" "written-after-$1"
}

t_cwd() { # SIG: the working directory's handle, from before the restart
    dropcaches
    ls | grep -qx sub || { echo "ls . lacks sub"; exit 1; }
    echo "made-after-$1" >"made-$1"
    dropcaches
    eq "new file" "$(cat "made-$1")" "made-after-$1"
    eq "old file" "$(cat sub/f)" in-sub
}

t_paths() { # lookups and readdir from the mount root
    dropcaches
    eq stat "$(stat -c %s $R/a)" 10
    eq readdir "$(ls $R | tr '\n' ' ')" "a b dir "
    find $R >/dev/null
}

t_unstable() {
    # 4 MiB written as 1024 WRITEs (wsize=4096); the server is SIGKILLed
    # and restarted once a quarter of them completed (often all have: the
    # INFO line says how many), then fsync: the data must be whole on the
    # client and on the server's disk. The client's WRITE count
    # shows whether it sent data again (INFO line). Not asserted: Linux 6.1
    # sends COMMIT right after each writeback pass (even for a 64 KiB
    # buffered write), so "UNSTABLE WRITE answered by one instance, COMMIT
    # answered by the next" cannot be forced from the guest; see
    # docs/kernel-client.md.
    local M=/mnt/w n=4194304 need=1024 w0 c0 w1 c1 w2 end
    nfs_mount $M wsize=4096
    mount_line $M | grep -q wsize=4096
    head -c $n /dev/urandom >/tmp/u.bin
    mkdir -p $M/restart-writes
    exec 7>$M/restart-writes/f
    w0=$(opcount WRITE) c0=$(opcount COMMIT)
    dd if=/tmp/u.bin bs=64k status=none >&7 &
    end=$(($(date +%s) + 60))
    while [ $(($(opcount WRITE) - w0)) -lt $((need / 4)) ] && [ "$(date +%s)" -lt $end ]; do sleep 0.1; done
    w1=$(opcount WRITE) c1=$(opcount COMMIT)
    host_request restart KILL
    wait
    fd_fsync 7
    exec 7>&-
    w2=$(opcount WRITE)
    echo "INFO restart: SIGKILL when $((w1 - w0)) WRITE / $((c1 - c0)) COMMIT calls had completed; $((w2 - w0)) WRITE calls in all for $need pages" >>"$RESULTS"
    dropcaches
    eq content "$(sha256sum <$M/restart-writes/f)" "$(sha256sum </tmp/u.bin)"
    umount $M
    hostcheck restart/writes-across-sigkill-on-server-disk restart-writes/f "$(sha256sum </tmp/u.bin | cut -d' ' -f1)"
}

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; } # since T0: seconds

# grace_over_within INFO SECS: the graceinfo answer INFO says the grace
# period is over, and it lasted less than SECS seconds.
grace_over_within() {
    local secs
    [[ $1 == "ok clients "*" over after "* ]] || { echo "grace period not over: $1"; return 1; }
    secs=$(awk '{ print $6 }' <<<"$1")
    awk -v s="$secs" -v l="$2" 'BEGIN { exit !(s < l) }' || { echo "grace period lasted $secs s (want < $2 s): $1"; return 1; }
}

t_no_client_known() {
    # No mount (earlier workloads unmounted: DESTROY_CLIENTID), so no client
    # record: after a restart the grace period is over at once and the
    # first open is served without NFS4ERR_GRACE.
    local t0 info
    host_request restart TERM >/dev/null
    t0=$(now)
    nfs_mount $M
    : >$M/restart-no-client-known
    echo "INFO restart: no client known: first open served $(since "$t0") s after the restart (mount included)" >>"$RESULTS"
    info=$(host_request graceinfo)
    [[ $info == "ok clients 0 "* ]] || { echo "server knew clients at the restart: $info"; exit 1; }
    grace_over_within "$info" 1
    rm $M/restart-no-client-known
}

t_lock_setup() { # holder L keeps a write lock on all of restart-v4/locked
    mkdir -p $V
    : >$V/locked
    rm -f /tmp/hold.L.ready
    "${LK[@]}" hold $V/locked 0 0 ex /tmp/hold.L.ready 600 >/tmp/hold.L.log 2>&1 &
    echo $! >/tmp/hold.L.pid
    local i
    for ((i = 0; i < 300; i++)); do [ -f /tmp/hold.L.ready ] && break; sleep 0.1; done
    [ -f /tmp/hold.L.ready ] || { echo "lock holder: $(cat /tmp/hold.L.log)"; exit 1; }
    eq "host probe" "$(host_request lockprobe restart-v4/locked)" "ok held"
}

t_reclaimed() { # SIG: after the restart, before anything else reaches it
    local t0=$1 took info
    # A new open: NFS4ERR_GRACE until the grace period ends, which the
    # client's reclaim (opens, the lock, RECLAIM_COMPLETE) ends early.
    : >"$V/new-after-$2"
    took=$(since "$t0")
    info=$(host_request graceinfo)
    echo "INFO restart: $2: new opens served $took s after the restart (grace limit $GRACE_SECS s; server: ${info#ok })" >>"$RESULTS"
    # The server knew this client from its record (with none it would end
    # the grace period at once, and refuse the reclaims NFS4ERR_NO_GRACE).
    [[ $info == "ok clients "[1-9]* ]] || { echo "the server knew no client at the restart: $info"; exit 1; }
    [[ $info == *"every client reclaimed"* ]] || { echo "grace period did not end by RECLAIM_COMPLETE: $info"; exit 1; }
    grace_over_within "$info" "$GRACE_SECS"
    # The lock is the guest's again (the server lost it with its process).
    eq "host probe" "$(host_request lockprobe restart-v4/locked)" "ok held"
    alive "$(cat /tmp/hold.L.pid)" || { echo "lock holder exited: $(cat /tmp/hold.L.log)"; exit 1; }
}

# alive PID: running (the holder outlives check's subshell, so PID 1 reaps
# it, maybe late: a zombie has already closed its files).
alive() { [ -e /proc/$1/stat ] && ! grep -q '^[0-9]* (.*) Z' /proc/$1/stat 2>/dev/null; }

lock_release() {
    local pid i
    [ -f /tmp/hold.L.pid ] || return 0
    pid=$(cat /tmp/hold.L.pid)
    rm -f /tmp/hold.L.pid
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < 300; i++)); do alive "$pid" || return 0; sleep 0.1; done
    echo "lock holder did not exit"
    return 1
}

t_lock_release() {
    lock_release
    eq "host probe after release" "$(host_request lockprobe restart-v4/locked)" "ok free"
}

if [ -n "$V4" ]; then
    check restart/v4-no-client-known-grace-ends-at-once t_no_client_known
    umount $M 2>/dev/null
fi
check restart/mount nfs_mount $M
if [ "$CHECK_RC" -ne 0 ]; then exit 1; fi
check restart/setup t_setup
if [ "$CHECK_RC" -ne 0 ]; then exit 1; fi
[ -n "$V4" ] && check restart/v4-lock-held t_lock_setup
exec 5<$R/a 6<>$R/b
cd $R/dir || exit 1
for sig in TERM KILL; do
    check "restart/$sig-server-restarted" host_request restart $sig
    t0=$(now)
    [ -n "$V4" ] && check "restart/$sig-v4-reclaimed-grace-ended-early" t_reclaimed "$t0" $sig
    check "restart/$sig-open-fd-read" t_fd_read
    check "restart/$sig-open-fd-write-fsync" t_fd_write $sig
    check "restart/$sig-cwd-handle" t_cwd $sig
    check "restart/$sig-lookup-readdir" t_paths
done
[ -n "$V4" ] && check restart/v4-lock-released t_lock_release
check restart/writes-across-sigkill t_unstable
lock_release >/dev/null # when a failed check left it
cd / && exec 5<&- 6<&-
check restart/umount umount $M
exit 0
