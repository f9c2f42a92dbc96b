#!/bin/bash
# callgrind-run.sh BIN VERS STREAMS CONNS TAG [SECONDS]: total Ir and calls under callgrind.
# PROF (default /tmp/prof) holds export/ (a tree: `rnfsd-bench prepare
# $PROF/export --files 1200 --dirs 20 --file-size 2`), the outputs
# cg.TAG.out* and cg.TAG.json; BENCH is the rnfsd-bench to drive it with
# (one build for every run compared). The server is stopped by its pid.
B=$1 V=$2 S=$3 C=$4 T=$5 SEC=${6:-4}
P0=${PROF:-/tmp/prof}
BENCH=${BENCH:-rnfsd-bench}
rm -f $P0/port $P0/cg.$T.json $P0/cg.$T.out*; rm -rf $P0/state; mkdir -p $P0/state
valgrind --tool=callgrind --callgrind-out-file=$P0/cg.$T.out $B serve $P0/export --listen 127.0.0.1:0 --port-file $P0/port --state-dir $P0/state --no-rpcbind --no-root-squash --insecure --log-level warn >$P0/cg.$T.log 2>&1 &
SP=$!; for i in $(seq 300); do [ -s $P0/port ] && break; sleep 0.1; done
P=$(cat $P0/port)
$BENCH run --addr 127.0.0.1:$P --vers $V --export $P0/export --mix getattr --handles 1000 --streams $S --conns $C --seconds $SEC --json $P0/cg.$T.json >/dev/null 2>&1
kill -INT $SP; wait $SP 2>/dev/null
calls=$(python3 -c "import json;print(sum(json.loads(l).get('calls',0)+json.loads(l).get('warmup_calls',0) for l in open('$P0/cg.$T.json')))")
ir=$(grep -h "^totals:" $P0/cg.$T.out* | awk '{s+=$2} END {print s}')
echo "$T $calls $ir"
