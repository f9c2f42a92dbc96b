# cthon: the Connectathon NFS tests (cthon04: basic, general, special,
# lock), built on the host by run.sh into /share/cthon, run on the NFS
# mount in the order and with the arguments the suite's own runtests
# scripts use (TESTARG -t, its tests.init default; Linux's LOCKTESTS
# tlocklfs and tlock64), but each test program is a check of its own: the
# suite's scripts stop at the first failure. The mount is made without
# nolock: at NFSv3 the lock tests go through NLM (rpcbind and rpc.statd in
# the guest, as the locks workload), at NFSv4.x through LOCK/LOCKT/LOCKU.
# CTHON_GROUPS (params) chooses groups; each group's output goes to
# /share/cthon-GROUP.out, its time to an INFO line.
# shellcheck shell=bash
. /share/guest/lib.sh
M=/mnt/nfs
C=/share/cthon
LOCK_OPT=lock
GROUPS_RUN=${CTHON_GROUPS:-basic general special lock}
TESTARG=-t

cleanup() {
    cd / && umount "$M" 2>/dev/null
    nlm_stop_daemons
    cp /tmp/statd.log /share/cthon-statd.log 2>/dev/null
    dmesg | tail -n 40 >/share/cthon-dmesg.log
}
trap cleanup EXIT

# ct GROUP NAME CMD...: one test program, run from the current directory,
# as the check cthon/GROUP/NAME; its output is appended to the group's file
# and the failure reason is its tail.
ct() {
    local group=$1 name=$2 out=/share/cthon-$1.out
    shift 2
    echo "=== $name: $*" >>"$out"
    check "cthon/$group/$name" ct_run "$out" "$@"
}
ct_run() {
    local out=$1 rc=0
    shift
    "$@" >/tmp/ct.out 2>&1 || rc=$?
    cat /tmp/ct.out >>"$out"
    if [ $rc -ne 0 ]; then
        grep -v '^[[:space:]]*$' /tmp/ct.out | tail -n 3
        exit $rc
    fi
}

# group_dir GROUP: a fresh test directory for the group (NFSTESTDIR).
group_dir() {
    NFSTESTDIR=$M/cthon-$1
    export NFSTESTDIR
    rm -rf "$NFSTESTDIR"
    mkdir "$NFSTESTDIR"
}

# basic/runtests: tree creation and removal, lookups across the mount
# point, setattr/getattr, write and read, readdir, rename and link,
# symlink and readlink, statfs.
g_basic() {
    local t
    group_dir basic
    for t in test1 test2 test3 test4 test5 test6 test7 test8 test9; do
        ct basic $t "$C/basic/$t" $TESTARG
    done
}

# general/runtests: the suite's sources copied into the test directory
# (its Makefile's copy target) and general/runtests.wrk run there: small
# and large compiles (cc from the host's /usr), tbl, nroff, four
# simultaneous compiles, make. One program, so one check.
g_general() {
    group_dir general
    (cd $C/general && cp Makefile runtests runtests.wrk ./*.sh ./*.c mkdummy rmdummy nroff.in makefile.tst "$NFSTESTDIR/")
    cd "$NFSTESTDIR" || return
    # tests.init sets PATH (with ".": runtests.wrk calls mkdummy so),
    # CFLAGS and LIBS; CC=gcc, its choice "if your distro doesn't provide a
    # cc": the guest has no /etc/alternatives, where Debian's cc points.
    ct general runtests.wrk sh -c ". $C/tests.init && CC=gcc && export PATH CC CFLAGS LIBS && exec sh runtests.wrk FROM_RUNTESTS"
    cd /
}

# special/runtests.wrk: the programs copied into the test directory and
# run there; HARDLINKS is not "no" and CIFS not "yes", so dupreq and
# nfsidem run too.
g_special() {
    group_dir special
    cp $C/special/{op_unlk,op_ren,op_chmod,dupreq,excltest,negseek,rename,truncate,holey,nfsidem,rewind,telldir,freesp,bigfile,bigfile2} "$NFSTESTDIR/"
    cd "$NFSTESTDIR" || return
    (
        umask 0
        ct special op_unlk env TMPDIR= ./op_unlk
        ct special op_ren env TMPDIR= ./op_ren
        ct special op_chmod env TMPDIR= ./op_chmod
        ct special dupreq ./dupreq 100 testfile
        ct special excltest ./excltest
        ct special negseek ./negseek testfile
        ct special rename ./rename 100
        ct special truncate ./truncate
        ct special holey ./holey
        ct special nfsidem ./nfsidem 50 testdir
        ct special rewind ./rewind
        ct special telldir ./telldir
        ct special freesp ./freesp
        ct special bigfile ./bigfile -s 30 bigfile$$
        ct special bigfile2 ./bigfile2 bigfile$$
    )
    cd /
}

# lock/runtests: LOCKTESTS (tlocklfs, tlock64) with -r (what TESTARG -t
# gives: the lock/unlock rate test too) on the test directory; umask 0.
g_lock() {
    local t
    group_dir lock
    for t in tlocklfs tlock64; do
        (umask 0 && ct lock $t "$C/lock/$t" -r "$NFSTESTDIR")
        # tlock's tallies, and each WARNING (a result the suite does not
        # fail: test 13.1, mmap of a file with a lock on part of a page).
        awk -v t=$t -v R="$RESULTS" '
            /^=== / { on = index($0, "=== " t ":") == 1; next }
            on && /results:/ { sub(/^\*\* */, ""); print "INFO cthon lock " t ": " $0 >> R }
            on && /WARNING!/ { w = $0; getline; $0 = w " " $0; gsub(/[ \t]+/, " "); sub(/^ /, ""); print "INFO cthon lock " t " warning: " $0 >> R }
        ' /share/cthon-lock.out
    done
}

t_mount() {
    nfs_mount $M
    mount_line $M
    if mount_line $M | grep -q nolock; then echo "mounted with nolock"; exit 1; fi
}

if [ "$VERS" = 3 ]; then
    nlm_start_daemons
    check cthon/rpcbind-statd nlm_daemons_ok
    if [ "$CHECK_RC" -ne 0 ]; then exit 1; fi
fi
check cthon/mount t_mount
if [ "$CHECK_RC" -ne 0 ]; then exit 1; fi
echo "INFO cthon: $(mount_line $M | awk '{ print $4 }')" >>"$RESULTS"
for g in $GROUPS_RUN; do
    start=$(date +%s)
    : >/share/cthon-$g.out
    log "cthon $g"
    "g_$g"
    echo "INFO cthon: $g took $(($(date +%s) - start)) s" >>"$RESULTS"
    # The test directory stays only when something in it failed.
    grep -q "^FAIL cthon/$g/" "$RESULTS" || rm -rf "${M:?}/cthon-$g"
done
check cthon/umount umount $M
exit 0
