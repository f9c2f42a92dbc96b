#!/bin/bash
# fsrun.sh ROUNDS: fsmark (UNSTABLE+COMMIT) and fsmark-sync (FILE_SYNC) at 16 streams, fresh ext4 each
R=$1; B=/work/main/target/release; OUT=/tmp/prof/fs.jsonl; : > $OUT
for r in $(seq $R); do for w in sync unstable; do
  cd /tmp/fs1; umount -q mnt 2>/dev/null; rm -f img; truncate -s 4G img; mkfs.ext4 -q -F img; mount -o loop img mnt; mkdir -p mnt/exp; rm -rf st; mkdir st
  $B/rnfsd serve /tmp/fs1/mnt/exp --listen 127.0.0.1:2049 --state-dir /tmp/fs1/st --no-rpcbind --no-root-squash --insecure --log-level warn > srv.log 2>&1 & P=$!
  sleep 0.7; kill -0 $P || { echo server died; exit 1; }
  F=""; [ $w = sync ] && F=--file-sync
  $B/rnfsd-bench fsmark --export /tmp/fs1/mnt/exp --streams 16 $F --iterations 3 --files-per-iteration 5000 --label $w --server-pid $P --json $OUT > /dev/null 2>&1
  kill $P; wait $P 2>/dev/null
done; done
cd /tmp/fs1; umount -q mnt
