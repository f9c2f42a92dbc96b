#!/usr/bin/env python3
"""paired.py DIR...: NFSv4.1/NFSv3 GETATTR per round (compare.sh --vers 3,4.1
--servers rnfsd --workloads getattr-h): each round runs NFSv3's five shapes
then NFSv4.1's, so a round's two rates are neighbours in time."""
import collections, json, re, statistics as st, sys

SHAPES = ["1x1", "1x16", "1x64", "16x16", "64x64"]
for d in sys.argv[1:]:
    order = re.findall(r"round (\d+)/\d+ getattr-h on rnfsd over NFSv([0-9.]+)",
                       open(d + "/compare.log").read())
    rows = [json.loads(l) for l in open(d + "/results.jsonl")]
    assert len(rows) == 5 * len(order)
    seq = collections.defaultdict(dict)
    for b, (rnd, v) in enumerate(order):
        for j in rows[b * 5:b * 5 + 5]:
            n = j["streams"]
            shape = f"{n if j['conn_per_stream'] else 1}x{n}"
            seq[(shape, v)][rnd] = (j["calls_per_s"], j["server_cpu_us_per_call"])
    print(d)
    print("  shape  medians  paired  cpu v3/v4.1 µs  per-round v4.1/v3")
    for s in SHAPES:
        a, b = seq[(s, "3")], seq[(s, "4.1")]
        r = [b[k][0] / a[k][0] for k in sorted(a, key=int)]
        med = st.median(x[0] for x in b.values()) / st.median(x[0] for x in a.values())
        ca = st.median(x[1] for x in a.values())
        cb = st.median(x[1] for x in b.values())
        print(f"  {s:6} {med:7.2f} {st.median(r):7.2f}  {ca:5.1f} / {cb:4.1f}    "
              + " ".join(f"{x:.2f}" for x in r)
              + f"  (min {min(r):.2f}, max {max(r):.2f})")
