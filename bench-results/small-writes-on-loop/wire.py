import sys, json, statistics as st
from collections import defaultdict
rows=defaultdict(list)
for f in sys.argv[1:]:
    for l in open(f):
        r=json.loads(l)
        if r.get('workload')!='write' or r.get('unit')!='MB/s': continue
        total=268.435456  # MB written per run (256 MiB)
        t=total/r['rate']
        wire=total/(t-r['commit_seconds'])
        rows[(r['label'],r['streams'])].append((round(wire),round(r['rate']),round(r['commit_seconds'],3),round(r['server_cpu_us_per_op']),round(r['server_csw_per_op'],2)))
for k in sorted(rows):
    v=rows[k]
    print(k, 'wire median', st.median(x[0] for x in v), 'total median', st.median(x[1] for x in v), 'commit median', st.median(x[2] for x in v), 'cpu', st.median(x[3] for x in v), 'csw', st.median(x[4] for x in v))
