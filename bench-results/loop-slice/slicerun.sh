#!/bin/bash
# slicerun.sh ROUNDS SLICE_NS: alternate base / loops-with-slice, 256 MiB write at 1,4,16 streams
R=$1; NS=$2; B=/work/main/target/release; OUT=/tmp/prof/slice.jsonl; : > $OUT
for r in $(seq $R); do for v in base slice; do
  cd /tmp/fs1; umount -q mnt 2>/dev/null; rm -f img; truncate -s 4G img; mkfs.ext4 -q -F img; mount -o loop img mnt; mkdir -p mnt/exp; rm -rf st; mkdir st
  $B/rnfsd serve /tmp/fs1/mnt/exp --listen 127.0.0.1:2049 --state-dir /tmp/fs1/st --no-rpcbind --no-root-squash --insecure --log-level warn > srv.log 2>&1 & P=$!
  sleep 0.7; kill -0 $P || { echo server died; exit 1; }
  [ $v = slice ] && python3 /tmp/prof/slice.py $P $NS rnfsd-evloop > /dev/null
  $B/rnfsd-bench write --export /tmp/fs1/mnt/exp --streams 1,4,16 --size 256 --label $v --server-pid $P --json $OUT > /dev/null 2>&1
  kill $P; wait $P 2>/dev/null
done; done
cd /tmp/fs1; umount -q mnt
