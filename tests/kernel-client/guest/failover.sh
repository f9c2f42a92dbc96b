# failover: two rnfsd heads serve one CephFS (tests/kernel-client/
# failover-host.sh builds them, the cluster and the floating address); this
# guest mounts the floating address FO_ADDR (vers=3, hard, tcp, nolock:
# locks across a failover are out of scope here) and runs fsx and a tar
# round trip at the same time. Mid-workload it asks the host to fail over:
# head A's link goes down and rnfsd A gets SIGKILL, its CephFS session is
# evicted, the address moves to head B. Both workloads must finish with no
# error, no ESTALE, and intact data (read back through head B after
# dropping the guest's caches). A probe on a second mount of the export
# (noac, nosharecache, the same transport) stats a file every 100 ms: the
# longest gap between two completed stats is the pause the client saw.
# Not in the default set (run.sh failover).
# shellcheck shell=bash
. /share/guest/lib.sh
M=/mnt/fo
P=/mnt/fo-probe
SRC=/tmp/fo-tree
N=${FO_TAR_FILES:-1000}
OPS=${FO_FSX_OPS:-5000}
OUT=/share/failover
mkdir -p $OUT

fo_mount() { # fo_mount DIR [EXTRA_OPTS]
    mkdir -p "$1"
    mount -i -t nfs -o "vers=3,proto=tcp,hard,nolock,port=2049,mountport=2049,mountproto=tcp,addr=$FO_ADDR,mountaddr=$FO_ADDR${2:+,$2}" \
        "$FO_ADDR:$FO_EXPORT" "$1"
}

opcount() { # opcount OP: calls of OP sent on the mount at $M
    awk -v m="$M" -v op="$1:" '$1 == "device" { on = ($5 == m) } on && $1 == op { print $2; exit }' /proc/self/mountstats
}

# Total calls sent on the mount at DIR (every procedure).
allops() {
    awk -v m="$1" '$1 == "device" { on = ($5 == m) } on && /^[[:space:]]+[A-Z_]+:/ && NF >= 9 { n += $2 } END { print n + 0 }' /proc/self/mountstats
}

t_mount() {
    fo_mount $M
    fo_mount $P noac,nosharecache
    grep " $M nfs " /proc/mounts | grep -q vers=3
    grep " $M nfs " /proc/mounts | grep -q hard
    rm -rf $M/fo && mkdir -p $M/fo/tree
    echo probe >$M/fo/probe
    [ "$(cat $P/fo/probe)" = probe ]
}

t_prepare() {
    rm -rf $SRC && mkdir $SRC
    perl /share/guest/tree.pl make $SRC "$N"
    perl /share/guest/tree.pl manifest $SRC >/tmp/fo-m.src
    tar -C $SRC -cf /tmp/fo-tree.tar .
    echo "$(wc -l </tmp/fo-m.src) entries, $(du -sh $SRC | cut -f1)"
}

cmp_manifest() { # cmp_manifest WHAT FILE: the diff is kept in $OUT
    if ! cmp -s /tmp/fo-m.src "$2"; then
        diff /tmp/fo-m.src "$2" >"$OUT/diff-${2##*/}.txt" || true
        echo "$1: $(grep -c '^[<>]' "$OUT/diff-${2##*/}.txt") manifest lines differ (share/failover/diff-${2##*/}.txt), e.g.:"
        grep '^[<>]' "$OUT/diff-${2##*/}.txt" | head -n 2 | sed 's/^\(.\) .*\//\1 /; s/ [0-9a-f]\{64\}$//'
        exit 1
    fi
}

# The probe: stat a file of the noac mount every 100 ms until /tmp/fo-stop
# exists; one line per stat: start, end (guest clock, s), ok|err.
probe() {
    perl -MTime::HiRes=time,sleep -e '
        my ($f, $stop) = @ARGV;
        $| = 1;
        until (-e $stop) {
            my $t0 = time; my @s = stat($f); my $t1 = time;
            printf "%.3f %.3f %s\n", $t0, $t1, @s ? "ok" : "err:$!";
            sleep 0.1;
        }' "$P/fo/probe" /tmp/fo-stop
}

# The tar round trip, in the background: each step's exit status in
# /tmp/fo-tar.STEP, its output in $OUT/tar-STEP.out.
tar_job() {
    (tar -C $SRC -cf - . | tar -C $M/fo/tree -xpf -) >$OUT/tar-extract.out 2>&1
    echo $? >/tmp/fo-tar.extract
    (cp /tmp/fo-tree.tar $M/fo/tree.tar && sync) >$OUT/tar-archive.out 2>&1
    echo $? >/tmp/fo-tar.archive
}

t_fsx_result() {
    [ "$(cat /tmp/fo-fsx.rc)" = 0 ] || { echo "fsx exit $(cat /tmp/fo-fsx.rc)"; tail -n 5 $OUT/fsx.out; exit 1; }
    grep -q 'All operations completed A-OK' $OUT/fsx.out || { echo "no A-OK line"; tail -n 3 $OUT/fsx.out; exit 1; }
}

t_step_rc() { # t_step_rc STEP
    [ "$(cat /tmp/fo-tar.$1 2>/dev/null)" = 0 ] || { echo "exit $(cat /tmp/fo-tar.$1 2>/dev/null)"; tail -n 3 $OUT/tar-$1.out; exit 1; }
}

t_tree_on_mount() {
    t_step_rc extract
    dropcaches
    perl /share/guest/tree.pl manifest $M/fo/tree >/tmp/fo-m.nfs
    cmp_manifest "on the mount" /tmp/fo-m.nfs
}

t_archive_on_mount() {
    t_step_rc archive
    dropcaches
    eq archive "$(sha256sum <$M/fo/tree.tar)" "$(sha256sum </tmp/fo-tree.tar)"
}

t_back_out() {
    rm -rf /tmp/fo-back && mkdir /tmp/fo-back
    dropcaches
    tar -C $M/fo/tree -cf - . | tar -C /tmp/fo-back -xpf -
    perl /share/guest/tree.pl manifest /tmp/fo-back >/tmp/fo-m.back
    rm -rf /tmp/fo-back
    cmp_manifest "copied back out" /tmp/fo-m.back
}

t_probe() { # every probe stat succeeded; prints the pause
    [ -s /tmp/fo-probe.out ] || { echo "no probe output"; exit 1; }
    cp /tmp/fo-probe.out $OUT/probe.out
    local bad
    bad=$(grep -vc ' ok$' /tmp/fo-probe.out || true)
    [ "$bad" = 0 ] || { echo "$bad probe stats failed, e.g. $(grep -v ' ok$' /tmp/fo-probe.out | head -n 2 | tr '\n' '|')"; exit 1; }
}

t_no_estale() { # nothing stale anywhere: kernel log, tool output
    local d f
    d=$(dmesg | grep -ci 'stale' || true)
    [ "$d" = 0 ] || { echo "dmesg: $(dmesg | grep -i stale | head -n 2 | tr '\n' '|')"; exit 1; }
    f=$(cat $OUT/*.out | grep -ci 'stale' || true)
    [ "$f" = 0 ] || { echo "output: $(cat $OUT/*.out | grep -i stale | head -n 2 | tr '\n' '|')"; exit 1; }
}

t_remove() {
    rm -rf $M/fo
    [ ! -e $M/fo ]
}

check failover/mount t_mount
if [ "$CHECK_RC" -ne 0 ]; then exit 1; fi
check failover/prepare-tree t_prepare
if [ "$CHECK_RC" -ne 0 ]; then exit 1; fi
dmesg -C 2>/dev/null
rm -f /tmp/fo-stop /tmp/fo-tar.* /tmp/fo-fsx.rc
probe >/tmp/fo-probe.out 2>&1 &
probe_pid=$!
start=$(date +%s)
ops0=$(allops $M)
c0=$(opcount CREATE)
mkdir -p /tmp/fo-fsx
(/share/bin/fsx -N "$OPS" -S 3 -f /share/fsx-plain.toml -P /tmp/fo-fsx $M/fo/fsx >$OUT/fsx.out 2>&1; echo $? >/tmp/fo-fsx.rc) &
fsx_pid=$!
tar_job &
tar_pid=$!

# Fail over once the tar extraction has made a third of its files (and
# no later than 300 s from now).
end=$((start + 300))
while [ $(($(opcount CREATE) - c0)) -lt $((N / 3)) ] && [ "$(date +%s)" -lt $end ] &&
    kill -0 $tar_pid 2>/dev/null; do
    sleep 0.2
done
running=
kill -0 $fsx_pid 2>/dev/null && [ ! -e /tmp/fo-fsx.rc ] && running+=" fsx"
[ ! -e /tmp/fo-tar.extract ] && running+=" tar-extract"
t_req=$(date +%s.%N)
log "failover requested after $(($(date +%s) - start))s; running:${running:-nothing}"
ans=$(host_request failover)
rc=$?
t_ans=$(date +%s.%N)
if [ $rc -eq 0 ]; then pass failover/host-failover; else fail failover/host-failover "$ans"; fi
echo "INFO failover: host: $ans" >>"$RESULTS"
check failover/mid-fsx-and-tar eq "workloads running at the failover" "${running# }" "fsx tar-extract"

wait $fsx_pid
wait $tar_pid
touch /tmp/fo-stop
wait $probe_pid
secs=$(($(date +%s) - start))
check "failover/fsx-${OPS}-ops" t_fsx_result
check failover/tar-extract-into-mount t_tree_on_mount
check failover/tar-archive-on-mount t_archive_on_mount
check failover/tar-copy-back-out t_back_out
check failover/probe-stats-all-ok t_probe
check failover/no-estale t_no_estale

# The pause: the longest gap between two completed probe stats, the
# longest single stat, and the first completion after the request.
pause=$(awk -v r="$t_req" '
    $3 == "ok" { if (prev && $2 - prev > gap) { gap = $2 - prev; at = prev }
                 if ($2 - $1 > lon) lon = $2 - $1
                 if (!first && $2 > r) first = $2
                 prev = $2; n++ }
    END { printf "longest gap between completed stats %.1fs (from %.1fs after the request), longest stat %.1fs, first stat done %.1fs after the request; %d stats",
                 gap, at - r, lon, first - r, n }' /tmp/fo-probe.out)
echo "INFO failover: client pause: $pause" >>"$RESULTS"
echo "INFO failover: fsx and tar ran ${secs}s; $(($(allops $M) - ops0)) NFS calls on the mount (the failover request took $(awk -v a="$t_ans" -v r="$t_req" 'BEGIN { printf "%.1f", a - r }')s)" >>"$RESULTS"
nfsmsg=$(dmesg | grep -iE 'nfs|rpc' | sed 's/^\[[ 0-9.]*\] //' | sort | uniq -c | tr -s ' ' | tr '\n' ';')
echo "INFO failover: guest kernel NFS messages: ${nfsmsg:-none}" >>"$RESULTS"
log "opstats: $(opstats $M)"
check failover/remove-tree t_remove
umount $P
check failover/umount umount $M
exit 0
