#!/usr/bin/env bash
# The three guest runs as scripts/test.sh makes them (its guest section), with its xfstests --prepare beside the NFSv3 run.
cd /work/wt/kcfast || exit 1
B=$PWD/target/debug/rnfsd
rm -rf target/kernel-client/cache/xfstests-*
ts() { date -u +%T; }
echo "start $(ts) load $(cut -d' ' -f1-3 /proc/loadavg)"
s0=$(date +%s)
tests/kernel-client/run.sh --prepare xfstests >/tmp/final-prep.log 2>&1 &
pp=$!
s=$(date +%s)
KC_EXPORT_FS=ext4 RNFSD_BIN=$B CTHON_GROUPS="basic special lock" tests/kernel-client/run.sh smoke pjdfstest tar restart locks cthon failover >/tmp/final-v3.log 2>&1
echo "v3 rc=$? $(( $(date +%s) - s ))s end $(ts) load $(cut -d' ' -f1-3 /proc/loadavg)"
s=$(date +%s)
wait $pp; echo "prepare rc=$? waited $(( $(date +%s) - s ))s"; cat /tmp/final-prep.log
s=$(date +%s)
env TAR_FILES=1000 FSX_OPS=3000 KC_EXPORT_FS=ext4 RNFSD_BIN=$B CTHON_GROUPS="basic special lock" tests/kernel-client/run.sh --vers 4.1 smoke pjdfstest tar fsx restart locks cthon xfstests >/tmp/final-v41.log 2>&1
echo "v4.1 rc=$? $(( $(date +%s) - s ))s end $(ts) load $(cut -d' ' -f1-3 /proc/loadavg)"
s=$(date +%s)
env TAR_FILES=1000 FSX_OPS=3000 V42_SIZE_MIB=256 KC_EXPORT_FS=ext4 RNFSD_BIN=$B tests/kernel-client/run.sh --vers auto smoke pjdfstest tar fsx restart locks xattr v42data deleg >/tmp/final-auto.log 2>&1
echo "auto rc=$? $(( $(date +%s) - s ))s end $(ts) load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "all $(( $(date +%s) - s0 ))s"
