#!/bin/bash
# GETATTR latency (1 stream, 1,000 handles) alone and beside 1 MiB WRITEs (4 streams).
cd /work/main
B=./target/release/rnfsd-bench
out=/tmp/bench/mixed.jsonl; : > $out
for r in 1 2 3 4; do
for lb in 64k=./target/release/rnfsd all=/tmp/bench/rnfsd-all-inline; do
  l=${lb%%=*}; bin=${lb#*=}
  pkill -f "rnfsd serve"; sleep 1
  $bin serve /tmp/wx/mnt/export --listen 127.0.0.1:2049 --no-root-squash --no-rpcbind --insecure --state-dir /tmp/wx/state --log-level warn > /tmp/wx/srv.log 2>&1 &
  P=$!; sleep 1
  timeout 120 $B run --export /tmp/wx/mnt/export --mix getattr --handles-file /tmp/wx/h1000.hex --streams 1 --conns 1 --seconds 2 --label "$l-alone" --json $out > /dev/null 2>&1
  timeout 120 $B write --export /tmp/wx/mnt/export --size 4096 --streams 4 --label "$l-writes" --json $out > /dev/null 2>&1 &
  W=$!
  sleep 0.3
  timeout 120 $B run --export /tmp/wx/mnt/export --mix getattr --handles-file /tmp/wx/h1000.hex --streams 1 --conns 1 --seconds 2 --label "$l-beside" --json $out > /dev/null 2>&1
  wait $W
  kill $P; wait $P 2>/dev/null
  rm -f /tmp/wx/mnt/export/bench-io*; sync
done
done
pkill -f "rnfsd serve"
