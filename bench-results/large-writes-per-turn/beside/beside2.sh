#!/bin/bash
# beside.sh LABEL BIN STREAMS: GETATTR p50/p99 (1 in flight, 1,000 handles) alone and beside STREAMS streams of 1 MiB WRITEs (SZ MiB, default 1,024), fresh ext4
DIR=${DIR:-/tmp/prof}; mkdir -p $DIR
l=$1; bin=$2; ws=$3
B=/work/main/target/release/rnfsd-bench
cd $DIR
pkill -f "rnfsd serve"; sleep 0.3
mountpoint -q mnt && umount mnt
rm -f img; truncate -s 8G img; mkfs.ext4 -q -F img; mount -o loop img mnt; mkdir mnt/export
for d in $(seq 20); do mkdir mnt/export/d$d; for f in $(seq 60); do : > mnt/export/d$d/f$f; done; done
rm -rf st; mkdir st
$bin serve $DIR/mnt/export --listen 127.0.0.1:2049 --no-root-squash --no-rpcbind --insecure --state-dir $DIR/st --log-level warn > srv.log 2>&1 &
P=$!; sleep 0.7
out=$DIR/beside.jsonl
timeout 60 $B run --export $DIR/mnt/export --mix getattr --handles 1000 --streams 1 --conns 1 --seconds 2 --label "$l-alone" --json $out > /dev/null 2>&1
timeout 120 $B write --export $DIR/mnt/export --size ${SZ:-1024} --streams $ws --label "$l-writes" --server-pid $P --json $DIR/bw.jsonl > /dev/null 2>&1 &
W=$!
sleep 0.3
timeout 60 $B run --export $DIR/mnt/export --mix getattr --handles 1000 --streams 1 --conns 1 --seconds 2 --label "$l-beside" --json $out > /dev/null 2>&1
wait $W
kill $P; wait $P 2>/dev/null
