#!/bin/bash
# sleeprun.sh BIN STREAMS: loop sleeps by place during one 256 MiB write run, and the loop's calls sent on
bin=$1; s=$2
cd /tmp/prof
pkill -f " serve /tmp/prof"; sleep 0.5
mountpoint -q mnt && umount mnt
rm -f img; truncate -s 8G img; mkfs.ext4 -q -F img; mount -o loop img mnt; mkdir mnt/export
rm -rf st; mkdir st
$bin serve /tmp/prof/mnt/export --listen 127.0.0.1:2049 --no-root-squash --no-rpcbind --insecure --state-dir /tmp/prof/st --log-level warn > srv.log 2>&1 &
P=$!; sleep 0.7
perf record -q -a -g -e sched:sched_switch -o /tmp/prof/sw.data -- sh -c "timeout 60 /work/main/target/release/rnfsd-bench write --export /tmp/prof/mnt/export --size 256 --streams $s --label x --server-pid $P > /tmp/w.out 2>&1" 2>/dev/null
tail -1 /tmp/w.out
perf script -i /tmp/prof/sw.data 2>/dev/null | python3 sleeps.py
$bin stats --state-dir /tmp/prof/st 2>&1 | grep -o "calls on the loop thread [0-9]* ([0-9]* sent on to a worker)"
kill $P; wait $P 2>/dev/null
