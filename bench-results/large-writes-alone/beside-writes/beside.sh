#!/bin/bash
# beside.sh LABEL BIN [flags]: GETATTR p50/p99 (1 in flight) alone and beside 4 streams of 1 MiB WRITEs
l=$1; bin=$2; shift 2
B=/work/main/target/release/rnfsd-bench
pkill -f "rnfsd serve"; sleep 0.5; /tmp/wx/fresh.sh
for d in $(seq 20); do mkdir /tmp/wx/mnt/export/d$d; for f in $(seq 60); do : > /tmp/wx/mnt/export/d$d/f$f; done; done
$bin serve /tmp/wx/mnt/export --listen 127.0.0.1:2049 --no-root-squash --no-rpcbind --insecure --state-dir /tmp/wx/state --log-level warn "$@" > /tmp/wx/srv.log 2>&1 &
P=$!; sleep 1
out=/tmp/wx/beside.jsonl
timeout 60 $B run --export /tmp/wx/mnt/export --mix getattr --handles 1000 --streams 1 --conns 1 --seconds 2 --label "$l-alone" --json $out > /dev/null 2>&1
timeout 120 $B write --export /tmp/wx/mnt/export --size 1024 --streams 4 --label "$l-writes" --server-pid $P --json /tmp/wx/w.jsonl > /dev/null 2>&1 &
W=$!
sleep 0.3
timeout 60 $B run --export /tmp/wx/mnt/export --mix getattr --handles 1000 --streams 1 --conns 1 --seconds 2 --label "$l-beside" --json $out > /dev/null 2>&1
wait $W
kill $P; wait $P 2>/dev/null
