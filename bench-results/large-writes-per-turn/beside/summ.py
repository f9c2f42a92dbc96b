import json,statistics as st,collections,sys
pre=sys.argv[1] if len(sys.argv)>1 else ''
d=collections.defaultdict(list)
for l in open(pre+'beside.jsonl'):
    r=json.loads(l); d[r['label']].append(r)
for k,v in sorted(d.items()):
    print(k, 'rate',round(st.median(x['calls_per_s'] for x in v)),'p50',st.median(x['p50_us'] for x in v),'p99',st.median(x['p99_us'] for x in v), [x['p99_us'] for x in v])
w=collections.defaultdict(list)
for l in open(pre+'bw.jsonl'):
    r=json.loads(l); w[r['label']].append(r)
for k,v in sorted(w.items()):
    print(k, 'MB/s', round(st.median(x['rate'] for x in v)), [round(x['rate']) for x in v], 'csw', [round(x.get('server_csw_per_op'),2) for x in v])
