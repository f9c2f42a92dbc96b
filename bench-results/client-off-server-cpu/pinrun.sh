#!/bin/bash
# pinrun.sh ROUNDS: 1-stream 256 MiB write; shared CPUs vs server on CPU 0 and bench on CPU 1
R=$1; B=/work/main/target/release; OUT=/tmp/prof/pin.jsonl; : > $OUT
for r in $(seq $R); do for v in shared split; do
  cd /tmp/fs1; umount -q mnt 2>/dev/null; rm -f img; truncate -s 4G img; mkfs.ext4 -q -F img; mount -o loop img mnt; mkdir -p mnt/exp; rm -rf st; mkdir st
  S=""; C=""; [ $v = split ] && { S="taskset -c 0"; C="taskset -c 1"; }
  $S $B/rnfsd serve /tmp/fs1/mnt/exp --listen 127.0.0.1:2049 --state-dir /tmp/fs1/st --no-rpcbind --no-root-squash --insecure --log-level warn > srv.log 2>&1 & P=$!
  sleep 0.7; kill -0 $P || { echo server died; exit 1; }
  $C $B/rnfsd-bench write --export /tmp/fs1/mnt/exp --streams 1 --size 256 --label $v-w --server-pid $P --json $OUT > /dev/null 2>&1
  $C $B/rnfsd-bench read --export /tmp/fs1/mnt/exp --streams 1 --size 256 --passes 4 --label $v-r --server-pid $P --json $OUT > /dev/null 2>&1
  kill $P; wait $P 2>/dev/null
done; done
cd /tmp/fs1; umount -q mnt
