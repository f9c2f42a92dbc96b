#!/bin/bash
# bench-ab.sh BIN ROUNDS SECS OUT NAME=BENCH...: GETATTR on 1000 non-root handles at the five shapes,
# NFSv3 and NFSv4.1, each bench build in turn per round (a fresh server each).
B=$1 R=$2 SEC=$3 OUT=$4; shift 4
P=/tmp/prof; mkdir -p $OUT
for r in $(seq $R); do for nb in "$@"; do N=${nb%%=*}; BENCH=${nb#*=}
  rm -rf $P/state $P/port; mkdir -p $P/state
  $B serve $P/export --listen 127.0.0.1:0 --port-file $P/port --state-dir $P/state --no-rpcbind --no-root-squash --insecure --log-level warn >$P/srv.log 2>&1 &
  SP=$!; for i in $(seq 100); do [ -s $P/port ] && break; sleep 0.1; done
  PORT=$(cat $P/port)
  for V in 3 4.1; do
    $BENCH run --addr 127.0.0.1:$PORT --vers $V --export $P/export --mix getattr --handles 1000 --streams 1,16,64 --conns 1 --pin-one-stream --seconds $SEC --server-pid $SP --label $N:$V --json $OUT/r.jsonl >/dev/null 2>&1
    $BENCH run --addr 127.0.0.1:$PORT --vers $V --export $P/export --mix getattr --handles 1000 --streams 16,64 --conns 0 --seconds $SEC --server-pid $SP --label $N:$V --json $OUT/r.jsonl >/dev/null 2>&1
  done
  kill -INT $SP; wait $SP
done; done
python3 - $OUT/r.jsonl <<'PY'
import json,sys,statistics as st,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    j=json.loads(l); shape=f"{'1' if not j['conn_per_stream'] else j['streams']}x{j['streams']}"
    d[(shape,j['label'])].append((j['calls_per_s'],j['server_cpu_us_per_call']))
shapes=['1x1','1x16','1x64','16x16','64x64']
labels=sorted({k[1] for k in d})
print('shape  '+'  '.join(f"{l:>22}" for l in labels))
for s in shapes:
    row=[]
    for l in labels:
        v=d.get((s,l),[])
        if v: row.append(f"{st.median([x[0] for x in v]):9.0f} {st.median([x[1] for x in v]):5.2f}us [{len(v)}]")
        else: row.append(' '*22)
    print(f"{s:6} "+'  '.join(row))
PY
