#!/bin/bash
# usage: wl.sh BIN SECONDS: 4 KiB UNSTABLE WRITEs over 100k files, 16 conns, long window
set -e
BIN=$1; SECS=$2; shift 2
umount /tmp/exp/mnt 2>/dev/null || true
if [ ! -f /tmp/exp/wtree.img ]; then
  truncate -s 8G /tmp/exp/wtree.img; mkfs.ext4 -q -F /tmp/exp/wtree.img
  mkdir -p /tmp/exp/mnt; mount -o loop /tmp/exp/wtree.img /tmp/exp/mnt; mkdir -p /tmp/exp/mnt/export
  /work/main/target/release/rnfsd-bench prepare /tmp/exp/mnt/export --files 100000 --dirs 6667 --file-size 4096 >/dev/null
  umount /tmp/exp/mnt
fi
mkdir -p /tmp/exp/mnt; mount -o loop /tmp/exp/wtree.img /tmp/exp/mnt
dev=$(findmnt -n -o SOURCE /tmp/exp/mnt | sed 's#/dev/##')
rm -rf /tmp/exp/state; mkdir -m 700 /tmp/exp/state; rm -f /tmp/exp/port
$BIN serve /tmp/exp/mnt/export --listen 127.0.0.1:0 --port-file /tmp/exp/port --state-dir /tmp/exp/state --no-rpcbind --no-root-squash --insecure --log-level warn "$@" &
pid=$!
for i in $(seq 100); do [ -s /tmp/exp/port ] && break; sleep 0.1; done
w0=$(awk '{print $7}' /sys/block/$dev/stat)
timeout 300 /work/main/target/release/rnfsd-bench run --addr 127.0.0.1:$(cat /tmp/exp/port) --export /tmp/exp/mnt/export --mix write --handles 100000 --tree-limit 110000 --server-pid $pid --streams 16 --conns 0 --seconds $SECS --json /tmp/exp/wl.jsonl | tail -1
w1=$(awk '{print $7}' /sys/block/$dev/stat)
echo "written to $dev during the run: $(( (w1-w0)/2048 )) MiB"
kill $pid; wait $pid 2>/dev/null || true
umount /tmp/exp/mnt
