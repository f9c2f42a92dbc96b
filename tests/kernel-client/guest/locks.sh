# locks: the kernel's NLM client (mounted without nolock) against the
# server's NLM: fcntl byte-range locks and flock (whole-file NLM locks on
# Linux) between guest processes, and against a local process on the host
# (ns.sh's lockhold/lockdrop/lockprobe requests: POSIX locks on the export,
# which the server's OFD locks must conflict with). Then sqlite3 writing one
# database from both sides.
# The guest's lockd needs a local rpcbind (it registers at start) and
# rpc.statd (the kernel asks it SM_MON before a lock): both from the host's
# /usr, with their state on tmpfs (lib.sh's nlm_start_daemons).
# At NFSv4.x the same checks go through NFSv4 LOCK/LOCKT/LOCKU (flock too:
# Linux sends it as a whole-file byte-range lock), with no daemons in the
# guest; then the export is mounted a second time with vers=3,lock (the
# daemons started for it) and locks taken through one mount must refuse
# those through the other. The NLM reclaim check is NFSv3's; the NFSv4
# reclaim is the restart workload's.
# shellcheck shell=bash
. /share/guest/lib.sh
M=/mnt/nfs
D=$M/locks
M3=/mnt/nfs3 # at NFSv4: the NFSv3 mount beside it
D3=$M3/locks
LOCK_OPT=lock
LK=(/usr/bin/perl /share/guest/lockf.pl)
# A blocked NLM lock is granted this soon after the conflicting lock goes
# (the client's own retry comes 30 s after it asked),
# when the server's GRANTED callback can reach the guest (--net tap).
GRANTED_SECS=10

# Holders an earlier failed check left behind (they would keep the mount
# busy and the files locked).
kill_holders() {
    local p i left pids=()
    for p in /tmp/hold.*.pid /tmp/flock.pid; do
        [ -f "$p" ] || continue
        pids+=("$(cat "$p")")
        kill -TERM "${pids[-1]}" 2>/dev/null
        rm -f "$p"
    done
    # flock's own process holds its lock until its child is gone.
    [ -f /tmp/flock.outer ] && pids+=("$(cat /tmp/flock.outer)")
    # Until they are gone (their files closed, locks released), at most 1 s.
    for ((i = 0; i < 10; i++)); do
        left=0
        for p in "${pids[@]}"; do alive "$p" && left=1; done
        [ "$left" = 0 ] && break
        sleep 0.1
    done
}

cleanup() {
    kill_holders
    cd / && umount "$M" 2>/dev/null
    umount "$M3" 2>/dev/null
    nlm_stop_daemons
    # For diagnosis (kept in the run dir's share/).
    cp /tmp/statd.log /share/locks-statd.log 2>/dev/null
    cp /tmp/rpcbind.log /share/locks-rpcbind.log 2>/dev/null
    dmesg | tail -n 40 >/share/locks-dmesg.log
}
trap cleanup EXIT

t_mount() {
    nfs_mount $M
    mount_line $M
    if mount_line $M | grep -q nolock; then echo "mounted with nolock"; exit 1; fi
    mkdir -p $D
    : >$D/fcntl
    : >$D/flock
    : >$D/host
}

# lk try FILE START LEN ex|sh: the exit status of a non-blocking attempt.
lk_try() { "${LK[@]}" try "$@" 2>/dev/null; }

# want_try RC FILE START LEN KIND: the attempt ends with RC (0 granted,
# 1 refused).
want_try() {
    local want=$1 rc
    shift
    rc=0
    lk_try "$@" || rc=$? # (errexit: a refusal is a result here)
    eq "lock $* (0 granted, 1 refused)" "$rc" "$want"
}

# hold NAME FILE START LEN KIND [wait]: a background process holds (or
# waits for, then holds) the lock, up to 300 s; /tmp/hold.NAME.ready
# appears once it holds it.
hold() {
    local name=$1 file=$2 start=$3 len=$4 kind=$5
    rm -f /tmp/hold.$name.ready /tmp/hold.$name.ready.trying
    # Output to a file: a holder on check's stdout would keep it waiting.
    "${LK[@]}" hold "$file" "$start" "$len" "$kind" /tmp/hold.$name.ready 300 ${6:-} >/tmp/hold.$name.log 2>&1 &
    echo $! >/tmp/hold.$name.pid
    [ -n "${6:-}" ] || wait_ready $name 30
}

# alive PID: running (holders outlive check's subshell, so PID 1 reaps
# them, maybe late: a zombie has already closed its files).
alive() { [ -e /proc/$1/stat ] && ! grep -q '^[0-9]* (.*) Z' /proc/$1/stat 2>/dev/null; }

wait_ready() { # wait_ready NAME SECS
    local i
    for ((i = 0; i < $2 * 10; i++)); do
        [ -f /tmp/hold.$1.ready ] && return 0
        alive "$(cat /tmp/hold.$1.pid)" || { echo "holder $1 exited: $(cat /tmp/hold.$1.log)"; return 1; }
        sleep 0.1
    done
    echo "holder $1 did not get its lock in $2 s"
    return 1
}

release() { # release NAME: the holder unlocks and exits
    local pid i
    pid=$(cat /tmp/hold.$1.pid)
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < 300; i++)); do alive "$pid" || break; sleep 0.1; done
    rm -f /tmp/hold.$1.pid
    if alive "$pid"; then echo "holder $1 did not exit"; return 1; fi
}

t_fcntl_granted() {
    want_try 0 $D/fcntl 0 100 ex
    want_try 0 $D/fcntl 0 0 sh
}

t_fcntl_conflict() { # another process holds [0,100) for writing
    hold a $D/fcntl 0 100 ex
    want_try 1 $D/fcntl 0 100 ex
    want_try 1 $D/fcntl 50 100 sh
    want_try 1 $D/fcntl 99 1 ex
}

t_fcntl_other_range() {
    want_try 0 $D/fcntl 100 100 ex
    want_try 0 $D/fcntl 1000 0 sh
}

t_fcntl_release_retake() {
    release a
    want_try 0 $D/fcntl 0 100 ex
    hold a $D/fcntl 0 100 ex
    release a
}

t_fcntl_shared() { # read locks share, a write lock does not
    hold a $D/fcntl 0 100 sh
    want_try 0 $D/fcntl 0 100 sh
    want_try 1 $D/fcntl 0 100 ex
    release a
}

# flock(1) holder: -o keeps the lock in flock itself (not the sleep), so
# killing the sleep makes flock exit and unlock.
flock_hold() { # flock_hold -x|-s FILE
    rm -f /tmp/flock.pid
    flock "$1" -o "$2" -c 'echo $$ >/tmp/flock.pid; exec sleep 300' >/tmp/flock.log 2>&1 &
    echo $! >/tmp/flock.outer
    local i
    for ((i = 0; i < 300; i++)); do [ -s /tmp/flock.pid ] && return 0; sleep 0.1; done
    echo "flock holder did not start: $(cat /tmp/flock.log)"
    return 1
}
flock_release() {
    local i outer
    outer=$(cat /tmp/flock.outer)
    kill -TERM "$(cat /tmp/flock.pid)"
    for ((i = 0; i < 300; i++)); do alive "$outer" || return 0; sleep 0.1; done
    echo "flock holder did not exit"
    return 1
}
want_flock() { # want_flock RC ARGS...: flock -n ARGS true ends with RC
    local want=$1 rc
    shift
    rc=0
    flock -n "$@" true || rc=$?
    eq "flock -n $* (0 granted, 1 refused)" "$rc" "$want"
}

t_flock_granted() {
    want_flock 0 -x $D/flock
    want_flock 0 -s $D/flock
}

t_flock_conflict() {
    flock_hold -x $D/flock
    want_flock 1 -x $D/flock
    want_flock 1 -s $D/flock
}

t_flock_release_retake() {
    flock_release
    want_flock 0 -x $D/flock
}

t_flock_shared() {
    flock_hold -s $D/flock
    want_flock 0 -s $D/flock
    want_flock 1 -x $D/flock
    flock_release
}

t_host_holds() { # a local process on the host holds a write lock
    host_request lockhold locks/host 240
    want_try 1 $D/host 0 100 ex
    want_try 1 $D/host 500 0 sh
    want_flock 1 -x $D/host
}

t_blocked_then_granted() {
    # The guest waits (F_SETLKW); the host releases after a few seconds;
    # the server grants it then, the guest learns it from the GRANTED
    # callback or, failing that, its own retry (every 30 s on Linux). With
    # --net tap (the guest's own address) the callback must come: granted
    # within GRANTED_SECS (at NFSv4 the client polls, every 1 to 30 s).
    local t0 t1 i
    hold b $D/host 0 0 ex wait
    # The request must be waiting at the server before the host releases:
    # from when the locker is about to ask, 2 s.
    for ((i = 0; i < 300; i++)); do [ -f /tmp/hold.b.ready.trying ] && break; sleep 0.1; done
    [ -f /tmp/hold.b.ready.trying ] || { echo "the blocking locker did not start"; exit 1; }
    sleep 2
    [ ! -f /tmp/hold.b.ready ] || { echo "granted while the host held the lock"; exit 1; }
    t0=$(date +%s)
    host_request lockdrop
    wait_ready b 90
    t1=$(date +%s)
    echo "INFO locks: blocked guest lock granted $((t1 - t0)) s after the host released it" >>"$RESULTS"
    if [ "$VERS" = 3 ] && [ "$NET" = tap ] && [ $((t1 - t0)) -gt "$GRANTED_SECS" ]; then
        echo "granted $((t1 - t0)) s after the release: no GRANTED callback (the client's own retry)"
        exit 1
    fi
}

t_guest_lock_seen_by_host() { # holder b (previous check) still holds it
    eq "host probe" "$(host_request lockprobe locks/host)" "ok held"
    release b
    eq "host probe after release" "$(host_request lockprobe locks/host)" "ok free"
}

t_guest_flock_seen_by_host() {
    flock_hold -x $D/flock
    eq "host probe" "$(host_request lockprobe locks/flock)" "ok held"
    flock_release
    eq "host probe after release" "$(host_request lockprobe locks/flock)" "ok free"
}

SQL_N=100
t_sqlite() {
    # Both sides insert SQL_N rows, one transaction each, at once.
    local db=$D/db.sqlite i
    sqlite3 $db "CREATE TABLE t(who TEXT, n INTEGER);"
    host_request sqlite locks/db.sqlite $SQL_N
    for ((i = 1; i <= SQL_N; i++)); do echo "INSERT INTO t(who, n) VALUES ('guest', $i);"; done |
        sqlite3 -cmd ".timeout 120000" $db
    host_request sqlitewait
    eq integrity "$(sqlite3 $db 'PRAGMA integrity_check;')" ok
    eq rows "$(sqlite3 $db "SELECT who, count(*), count(DISTINCT n) FROM t GROUP BY who ORDER BY who;" | tr '\n' ' ')" \
        "guest|$SQL_N|$SQL_N host|$SQL_N|$SQL_N "
}

# sm_notify MON_NAME STATE: SM_NOTIFY (NSM 100024 v1 proc 6, AUTH_NULL,
# over UDP) to this guest's own statd, as the host MON_NAME would send it
# after a reboot; waits for the (void) reply, 3 tries of 2 s.
sm_notify() {
    local port
    port=$(rpcinfo -p 127.0.0.1 | awk '$1 == 100024 && $3 == "udp" { print $4; exit }')
    [ -n "$port" ] || { echo "statd has no UDP port"; return 1; }
    /usr/bin/python3 - "$port" "$1" "$2" <<'PY'
import os, socket, struct, sys
port, name, state = int(sys.argv[1]), sys.argv[2].encode(), int(sys.argv[3])
xid = struct.unpack(">I", os.urandom(4))[0]
pad = name + b"\0" * (-len(name) % 4)
msg = struct.pack(">IIIIII", xid, 0, 2, 100024, 1, 6) + struct.pack(">IIII", 0, 0, 0, 0) \
    + struct.pack(">I", len(name)) + pad + struct.pack(">i", state)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
for _ in range(3):
    s.sendto(msg, ("127.0.0.1", port))
    try:
        r = s.recv(512)
    except socket.timeout:
        continue
    rxid, mtype, stat = struct.unpack(">III", r[:12])
    # accepted (0), verifier (flavor, empty body), accept_stat 0 (SUCCESS)
    if rxid == xid and mtype == 1 and stat == 0 and struct.unpack(">I", r[20:24])[0] == 0:
        sys.exit(0)
    sys.exit(f"statd answered {r.hex()}")
sys.exit("statd did not answer SM_NOTIFY")
PY
}

t_reclaim_after_restart() {
    # A guest process holds a lock; the server restarts (same state dir);
    # the guest's statd hears of it and the guest's lockd reclaims the
    # lock within the server's grace period (GRACE_SECS). With --net tap
    # the notice is the server's own SM_NOTIFY to this guest's statd; with
    # passt and slirp (every guest connection comes from 127.0.0.1, the
    # server's notice cannot reach this statd) one naming the server's
    # address as this guest mounted it, sent from inside the guest.
    local ans state t0 t1 i got
    : >$D/reclaim
    hold r $D/reclaim 0 0 ex
    eq "host probe before the restart" "$(host_request lockprobe locks/reclaim)" "ok held"
    ans=$(host_request restart TERM)
    t0=$(date +%s)
    state=$(echo "$ans" | awk '$4 == "state" { print $5 }')
    [ -n "$state" ] || { echo "no NSM state in the restart answer: $ans"; exit 1; }
    if [ "$NET" != tap ]; then
        # The server forgot the lock (a host process may take it meanwhile)
        # until it hears from the guest. (With tap its notice is out at
        # once, and the reclaim may already be in.)
        eq "host probe after the restart" "$(host_request lockprobe locks/reclaim)" "ok free"
        sm_notify "$SERVER_IP" "$state"
    fi
    for ((i = 0; i < GRACE_SECS * 2; i++)); do
        got=$(host_request lockprobe locks/reclaim)
        [ "$got" = "ok held" ] && break
        sleep 0.5
    done
    t1=$(date +%s)
    eq "host probe after the reboot notice" "$got" "ok held"
    [ $((t1 - t0)) -lt "$GRACE_SECS" ] || { echo "reclaimed $((t1 - t0)) s after the restart, grace is $GRACE_SECS s"; exit 1; }
    local by="the server's SM_NOTIFY"
    [ "$NET" = tap ] || by="an SM_NOTIFY sent in the guest"
    echo "INFO locks: lock reclaimed $((t1 - t0)) s after the server restart (state $state, told by $by)" >>"$RESULTS"
    alive "$(cat /tmp/hold.r.pid)" || { echo "holder exited: $(cat /tmp/hold.r.log)"; exit 1; }
    # Release once the grace period is over (UNLOCK is refused during it).
    while [ $(($(date +%s) - t0)) -le "$GRACE_SECS" ]; do sleep 1; done
    release r
    eq "host probe after release" "$(host_request lockprobe locks/reclaim)" "ok free"
    host_request lockhold locks/reclaim 60 >/dev/null
    want_try 1 $D/reclaim 0 0 ex
    host_request lockdrop >/dev/null
}

# NFSv4 and NFSv3 (NLM) locks on one file refuse each other, both ways.
t_v4_v3_fcntl() {
    : >$D/mixed
    hold a $D/mixed 0 100 ex # through the NFSv4 mount
    want_try 1 $D3/mixed 0 100 ex
    want_try 1 $D3/mixed 50 0 sh
    want_try 0 $D3/mixed 100 100 ex
    release a
    hold a $D3/mixed 0 0 sh # through the NFSv3 mount
    want_try 1 $D/mixed 0 100 ex
    want_try 0 $D/mixed 0 100 sh
    release a
    want_try 0 $D/mixed 0 0 ex
    want_try 0 $D3/mixed 0 0 ex
}

t_v4_v3_flock() {
    flock_hold -x $D/flock
    want_flock 1 -x $D3/flock
    want_flock 1 -s $D3/flock
    flock_release
    flock_hold -x $D3/flock
    want_flock 1 -x $D/flock
    flock_release
    want_flock 0 -x $D/flock
    want_flock 0 -x $D3/flock
}

if [ "$VERS" = 3 ]; then
    nlm_start_daemons
    check locks/rpcbind-statd nlm_daemons_ok
    if [ "$CHECK_RC" -ne 0 ]; then exit 1; fi
fi
check locks/mount t_mount
if [ "$CHECK_RC" -ne 0 ]; then tail -n 5 /tmp/statd.log; exit 1; fi
check locks/fcntl-granted t_fcntl_granted
check locks/fcntl-conflict-refused t_fcntl_conflict
check locks/fcntl-other-range-granted t_fcntl_other_range
check locks/fcntl-release-retake t_fcntl_release_retake
check locks/fcntl-shared t_fcntl_shared
check locks/flock-granted t_flock_granted
check locks/flock-conflict-refused t_flock_conflict
check locks/flock-release-retake t_flock_release_retake
check locks/flock-shared t_flock_shared
check locks/host-lock-refuses-guest t_host_holds
check locks/guest-blocked-until-host-releases t_blocked_then_granted
check locks/guest-fcntl-seen-by-host t_guest_lock_seen_by_host
check locks/guest-flock-seen-by-host t_guest_flock_seen_by_host
check locks/sqlite-guest-and-host t_sqlite
# rnfsd only: ganesha's restart and grace are its own.
[ "$SERVER_KIND" = rnfsd ] && [ "$VERS" = 3 ] && check locks/reclaim-after-restart t_reclaim_after_restart
if [ "$VERS" != 3 ]; then
    nlm_start_daemons
    check locks/v3-rpcbind-statd nlm_daemons_ok
    check locks/v3-mount-beside-v4 nfs_mount $M3 "" 3
    if [ "$CHECK_RC" -eq 0 ]; then
        check locks/v4-and-v3-fcntl-conflict t_v4_v3_fcntl
        check locks/v4-and-v3-flock-conflict t_v4_v3_flock
        kill_holders
        check locks/v3-umount umount $M3
    fi
fi
kill_holders
check locks/umount umount $M
exit 0
