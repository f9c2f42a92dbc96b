# xfstests over NFS (FSTYP=nfs): the suite run.sh built on the host into
# /share/xfstests, run there in place (a copy would cost minutes over 9p
# under TCG; the suite writes only its results dir and /tmp) with a test
# export ($EXPORT at /mnt/test) and a scratch export ($SCRATCH_EXPORT at
# /mnt/scratch), mounted by the suite itself with this harness's options
# (without nolock: at NFSv3 locks go through NLM, rpcbind and rpc.statd in
# the guest, as the cthon workload). One `check` for all the tests, under
# XFSTESTS_DEADLINE seconds, each test under XFSTESTS_TEST_LIMIT (a
# watchdog stops it); tests the run did not reach are reported as such.
# Per test: PASS xfstests/T, FAIL xfstests/T: why, or NOTRUN
# xfstests/T: the suite's reason. A test listed in /share/xfstests-expected
# ("T reason" lines: the expected failures of this server and version)
# passes when it fails and fails when it passes. Output of every test:
# /share/xfstests-results/ (the suite's results dir) and
# /share/xfstests.out.
# shellcheck shell=bash
. /share/guest/lib.sh
X=/share/xfstests
R=/share/xfstests-results
OUT=/share/xfstests.out
LOCK_OPT=lock
DEADLINE=$(($(date +%s) + ${XFSTESTS_DEADLINE:-540}))
TLIMIT=${XFSTESTS_TEST_LIMIT:-180}

cleanup() {
    cd / || true
    umount /mnt/test /mnt/scratch 2>/dev/null
    nlm_stop_daemons
    dmesg | tail -n 60 >/share/xfstests-dmesg.log
}
trap cleanup EXIT

# The users and groups the suite's tests ask for (_require_user,
# _require_group, _require_user 123456-fsgqa); the guest's /etc is the
# initramfs's, writable.
x_users() {
    [ -f /kmod/order ] || { echo "not in the harness's guest: /etc is not ours to change"; return 1; }
    grep -q '^fsgqa:' /etc/passwd || cat >>/etc/passwd <<'EOF'
fsgqa:x:2000:2000:fsgqa:/tmp:/bin/bash
fsgqa2:x:2001:2001:fsgqa2:/tmp:/bin/bash
123456-fsgqa:x:2002:2002:123456-fsgqa:/tmp:/bin/bash
EOF
    grep -q '^fsgqa:' /etc/group || cat >>/etc/group <<'EOF'
fsgqa:x:2000:
fsgqa2:x:2001:
123456-fsgqa:x:2002:
EOF
    # The suite runs commands as them with su (util-linux's, PAM): root may
    # (pam_rootok), nothing else is asked. The initramfs has no /etc/pam.d.
    mkdir -p /etc/pam.d
    local f
    for f in su su-l other; do
        [ -f /etc/pam.d/$f ] || printf '%s\n' 'auth sufficient pam_rootok.so' 'auth required pam_deny.so' \
            'account required pam_permit.so' 'session required pam_permit.so' 'password required pam_deny.so' >/etc/pam.d/$f
    done
}

x_setup() {
    rm -rf "$R" && mkdir -p "$R" /mnt/test /mnt/scratch
    cat >"$X/local.config" <<EOF
export FSTYP=nfs
export TEST_DEV=$SERVER_IP:$EXPORT
export TEST_DIR=/mnt/test
export SCRATCH_DEV=$SERVER_IP:$SCRATCH_EXPORT
export SCRATCH_MNT=/mnt/scratch
export NFS_MOUNT_OPTIONS="-o $(base_opts)"
export RESULT_BASE=$R
EOF
    cat "$X/local.config"
    # A mount both exports take, before the suite's own (a plain error
    # here instead of each test's).
    mount -t nfs -o "$(base_opts)" "$SERVER_IP:$EXPORT" /mnt/test
    mount -t nfs -o "$(base_opts)" "$SERVER_IP:$SCRATCH_EXPORT" /mnt/scratch
    mount_line /mnt/test
    mount_line /mnt/scratch
    umount /mnt/scratch
}

# The tests: XFSTESTS (names), else XFSTESTS_GROUP (./check -n lists the
# group without running it), else the CI list (/share/xfstests-ci.list).
x_list() {
    if [ -n "${XFSTESTS:-}" ]; then
        printf '%s\n' $XFSTESTS
    elif [ -n "${XFSTESTS_GROUP:-}" ]; then
        (cd "$X" && ./check -nfs -n -g "$XFSTESTS_GROUP" 2>/dev/null) |
            grep -E '^(generic|nfs|shared)/[0-9]+' | awk '{ print $1 }'
    else
        grep -v '^#' /share/xfstests-ci.list | awk 'NF { print $1 }'
    fi
}

if [ "$VERS" = 3 ]; then
    nlm_start_daemons
    check xfstests/rpcbind-statd nlm_daemons_ok
    [ "$CHECK_RC" -eq 0 ] || exit 1
fi
x_users
check xfstests/setup x_setup
[ "$CHECK_RC" -eq 0 ] || exit 1
echo "INFO xfstests: $(mount_line /mnt/test | awk '{ print $4 }')" >>"$RESULTS"
# The list in a file: mapfile reads it whole.
x_list >/tmp/x.list
mapfile -t TESTS </tmp/x.list
[ ${#TESTS[@]} -gt 0 ] || { fail xfstests/list "no tests to run"; exit 1; }
log "xfstests: ${#TESTS[@]} tests"
: >"$OUT"
declare -A EXPECT=()
if [ -f /share/xfstests-expected ]; then
    while read -r t why; do
        case $t in '' | '#'*) continue ;; esac
        EXPECT[$t]=$why
    done </share/xfstests-expected
fi
# One ./check for every test: its start (the suite's setup, mounts and
# program checks) costs a minute or two under TCG, too much to pay per
# test. The run is bounded by XFSTESTS_DEADLINE; a test it cuts short is a
# failure, those it never reached are named as such.
start=$(date +%s)
left=$((DEADLINE - start))
# The watchdog: a test running longer than XFSTESTS_TEST_LIMIT seconds is
# stopped (its process and what it started, by pid), so one slow or hung
# test costs only itself; check then counts it failed.
x_descendants() { # x_descendants PID: PID's processes below it, deepest first
    local c
    for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
        x_descendants "$c"
        echo "$c"
    done
}
x_watchdog() {
    local cur= since=0 pid t now f a
    : >/tmp/x.killed
    while sleep 5; do
        pid= t=
        # Builtins only: a fork per process every 5 s is dear under TCG.
        for f in /proc/[0-9]*/cmdline; do
            mapfile -d '' -t a 2>/dev/null <"$f" || continue
            [ "${#a[@]}" -ge 2 ] || continue
            # "/bin/bash /path/tests/generic/NNN" (bash runs the script by
            # its full path).
            case ${a[1]} in
            */tests/generic/[0-9]* | */tests/nfs/[0-9]*)
                pid=${f#/proc/} pid=${pid%/cmdline} t=${a[1]##*/tests/}
                break ;;
            esac
        done
        printf -v now '%(%s)T' -1
        [ -n "$t" ] || { cur= ; continue; }
        [ "$t" = "$cur" ] || { cur=$t since=$now; continue; }
        if [ $((now - since)) -ge "$TLIMIT" ]; then
            echo "$t" >>/tmp/x.killed
            log "xfstests: $t over ${TLIMIT}s: stopping it"
            kill -KILL $(x_descendants "$pid") "$pid" 2>/dev/null
            cur=
        fi
    done
}
x_watchdog &
WD=$!
(cd "$X" && timeout -k 10 "$left" ./check -nfs "${TESTS[@]}") >"$OUT" 2>&1
rc=$?
kill "$WD" 2>/dev/null
log "xfstests: check exit $rc after $(($(date +%s) - start)) s"
# check's own output, a block per test: "T ... Ns" (passed), "T [not run]
# why", "T - output mismatch" or "T [failed, ...]" and its diff, or a
# _check_dmesg/_check_* complaint.
x_block() {
    awk -v t="$1" '
        $1 == t { on = 1; print; next }
        on && $1 ~ /^(generic|nfs|shared)\/[0-9]+$/ { exit }
        on && /^(Ran|Not run|Failures|Failed|Passed all)/ { exit }
        on { print }' "$OUT"
}
np=0 nf=0 nn=0 nx=0
for t in "${TESTS[@]}"; do
    b=$(x_block "$t")
    if [ -z "$b" ]; then
        if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
            fail "xfstests/$t" "not reached: the run's time (XFSTESTS_DEADLINE, ${left}s) was up"
        else
            fail "xfstests/$t" "not in check's output (exit $rc): $(tail -n 2 "$OUT" | tr '\n' '|')"
        fi
        nx=$((nx + 1))
        continue
    fi
    if [ -f "$R/$t.notrun" ] || grep -q '\[not run\]' <<<"$b"; then
        echo "NOTRUN xfstests/$t: $(head -n 1 "$R/$t.notrun" 2>/dev/null || sed -n 's/.*\[not run\] *//p' <<<"$b" | head -n 1)" >>"$RESULTS"
        nn=$((nn + 1))
        continue
    fi
    why=
    if grep -qx "$t" /tmp/x.killed; then
        why="over the ${TLIMIT}s limit for one test (XFSTESTS_TEST_LIMIT): stopped"
    elif grep -qE 'output mismatch|\[failed|_check_|\[expunged\]' <<<"$b" || [ -f "$R/$t.out.bad" ] || [ -f "$R/$t.dmesg" ]; then
        why=$(grep -v '^[[:space:]]*$' <<<"$b" | head -n 1 | sed "s|^$t *||")
        [ -f "$R/$t.out.bad" ] &&
            why+=" | diff: $(diff "$X/tests/$t.out" "$R/$t.out.bad" 2>/dev/null | grep '^[<>]' | head -n 4 | tr '\n' '|')"
        [ -f "$R/$t.dmesg" ] && why+=" | dmesg: $(grep -m1 -iE 'warn|bug|error' "$R/$t.dmesg")"
    elif ! grep -qE "^$t .*[0-9]+s *\$" <<<"$b"; then
        why="did not finish: the run's time (XFSTESTS_DEADLINE, ${left}s) was up"
    fi
    secs=$(grep -m1 "^$t " <<<"$b" | grep -oE '[0-9]+s *$' | tr -d ' ')
    [ -z "$secs" ] || echo "INFO xfstests time $t $secs" >>"$RESULTS"
    if [ -n "${EXPECT[$t]+x}" ]; then
        if [ -n "$why" ]; then
            pass "xfstests/$t (expected failure: ${EXPECT[$t]})"
            echo "INFO xfstests $t failed as expected: ${why:0:200}" >>"$RESULTS"
        else
            fail "xfstests/$t" "listed as an expected failure but passed: take it off the list"
        fi
        np=$((np + 1))
    elif [ -z "$why" ]; then
        pass "xfstests/$t"
        np=$((np + 1))
    else
        fail "xfstests/$t" "${why:0:400}"
        nf=$((nf + 1))
    fi
done
echo "INFO xfstests: ${#TESTS[@]} tests in $(($(date +%s) - start)) s: $np passed, $nf failed, $nn not run, $nx not reached" >>"$RESULTS"
exit 0
