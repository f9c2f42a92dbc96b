#!/bin/bash
# cg.sh BIN VERS STREAMS CONNS TAG [SECONDS]: total Ir and calls under callgrind
B=$1 V=$2 S=$3 C=$4 T=$5 SEC=${6:-4}
pkill -f "serve /tmp/prof/export"; sleep 0.3
rm -f /tmp/prof/port /tmp/prof/cg.$T.json /tmp/prof/cg.$T.out*; rm -rf /tmp/prof/state; mkdir -p /tmp/prof/state
valgrind --tool=callgrind --callgrind-out-file=/tmp/prof/cg.$T.out $B serve /tmp/prof/export --listen 127.0.0.1:0 --port-file /tmp/prof/port --state-dir /tmp/prof/state --no-rpcbind --no-root-squash --insecure --log-level warn >/tmp/prof/cg.$T.log 2>&1 &
SP=$!; for i in $(seq 300); do [ -s /tmp/prof/port ] && break; sleep 0.1; done
P=$(cat /tmp/prof/port)
/work/main/target/release/rnfsd-bench run --addr 127.0.0.1:$P --vers $V --export /tmp/prof/export --mix getattr --handles 1000 --streams $S --conns $C --seconds $SEC --json /tmp/prof/cg.$T.json >/dev/null 2>&1
kill -INT $SP; wait $SP 2>/dev/null
calls=$(python3 -c "import json;print(sum(json.loads(l).get('calls',0)+json.loads(l).get('warmup_calls',0) for l in open('/tmp/prof/cg.$T.json')))")
ir=$(grep -h "^totals:" /tmp/prof/cg.$T.out* | awk '{s+=$2} END {print s}')
echo "$T $calls $ir"
