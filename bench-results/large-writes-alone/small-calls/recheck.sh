#!/bin/bash
# ga.sh: alternated GETATTR 1 conn 64 streams over 1000 handles; args: label=bin ...
out=/tmp/wx/ga.jsonl; : > $out
/tmp/wx/fresh.sh
for d in $(seq 20); do mkdir -p /tmp/wx/mnt/export/d$d; for f in $(seq 60); do : > /tmp/wx/mnt/export/d$d/f$f; done; done
for r in 1 2 3 4 5; do
for lb in "$@"; do
  l=${lb%%=*}; bin=${lb#*=}
  pkill -f "rnfsd serve"; sleep 0.5
  $bin serve /tmp/wx/mnt/export --listen 127.0.0.1:2049 --no-root-squash --no-rpcbind --insecure --state-dir /tmp/wx/state --log-level warn > /tmp/wx/srv.log 2>&1 &
  P=$!; sleep 1
  timeout 60 /work/main/target/release/rnfsd-bench run --export /tmp/wx/mnt/export --mix ${MIX:-getattr} --handles 1000 --streams ${ST:-64} --conns ${CONNS:-1} --seconds 3 --server-pid $P --label "$l" --json $out > /dev/null 2>&1
  kill $P; wait $P 2>/dev/null
done; done
python3 -c "
import json,collections,statistics as st
d=collections.defaultdict(list)
for l in open('$out'):
    r=json.loads(l); d[r['label']].append((r['calls_per_s'], r['server_cpu_us_per_call']))
for k,v in d.items(): print(k, 'median %.0f'%st.median(x[0] for x in v), 'cpu %.2f'%st.median(x[1] for x in v), [round(x[0]) for x in v])
"
