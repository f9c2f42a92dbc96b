import subprocess, re, sys, collections, glob
import os
PROF = os.environ.get("PROF", "/tmp/prof")
def load(tag, inclusive):
    files = sorted(glob.glob(f"{PROF}/cg.{tag}.out*"))
    out = subprocess.run(["callgrind_annotate", "--auto=no", f"--inclusive={'yes' if inclusive else 'no'}", "--threshold=100"] + files, capture_output=True, text=True).stdout
    d = collections.Counter()
    sec = out.split("file:function", 1)[1].split("\n-----", 2)[1]
    for l in sec.split("\n"):
        m = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+(.*)$", l)
        if m and "PROGRAM TOTALS" not in l:
            fn = m.group(2)
            fn = re.sub(r" \[[^\]]*\]$", "", fn)
            fn = fn.split(":", 1)[1] if ":" in fn else fn
            d[fn] += int(m.group(1).replace(",", ""))
    return d
def calls(tag):
    import json
    return sum(json.loads(l)["calls"] + json.loads(l)["warmup_calls"] for l in open(f"{PROF}/cg.{tag}.json"))
inc = len(sys.argv) > 3 and sys.argv[3] == "inc"
res = {}
for base in sys.argv[1:3]:
    a, b = load(base + "4", inc), load(base + "8", inc)
    n = calls(base + "8") - calls(base + "4")
    res[base] = {k: (b[k] - a.get(k, 0)) / n for k in b}
A, B = sys.argv[1], sys.argv[2]
keys = set(res[A]) | set(res[B])
rows = sorted(keys, key=lambda k: -max(abs(res[A].get(k, 0)), abs(res[B].get(k, 0))))
tA = sum(res[A].values()); tB = sum(res[B].values())
if not inc: print(f"TOTAL {A} {tA:.0f}  {B} {tB:.0f}")
for k in rows[:int(sys.argv[4]) if len(sys.argv) > 4 else 45]:
    print(f"{res[A].get(k,0):8.0f} {res[B].get(k,0):8.0f}  {k[:130]}")
