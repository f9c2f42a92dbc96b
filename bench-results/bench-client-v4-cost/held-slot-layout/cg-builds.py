#!/usr/bin/env python3
"""cg.py SERVER SHORT LONG BENCH:NAME... -- [VERS...]: the bench under callgrind (server native), instructions
per call differenced (LONG minus SHORT), 1 conn x 64 getattr --handles 1000."""
import json, os, subprocess, sys, time, shutil, glob
a = sys.argv[1:]
server, short, long_ = a[0], float(a[1]), float(a[2])
rest = a[3:]
sep = rest.index("--") if "--" in rest else len(rest)
benches = [x.split(":") for x in rest[:sep]]
vers = rest[sep + 1:] or ["3", "4.1"]
base = "/tmp/v4cli/cgsrv"; exp = "/tmp/v4cli/export"
shutil.rmtree(base, ignore_errors=True); os.makedirs(base + "/state")
pf = base + "/port"
srv = subprocess.Popen([server, "serve", exp, "--listen", "127.0.0.1:0", "--port-file", pf, "--state-dir", base + "/state",
                        "--no-rpcbind", "--no-root-squash", "--insecure", "--log-level", "warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(300):
    if os.path.exists(pf) and os.path.getsize(pf): break
    time.sleep(0.1)
port = open(pf).read().strip()
def one(bench, v, secs, name):
    j = base + "/cg.json"
    if os.path.exists(j): os.remove(j)
    out = f"/tmp/v4cli/cg.{name}.out"
    for f in glob.glob(out + "*"): os.remove(f)
    subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, bench, "run", "--addr", "127.0.0.1:" + port,
                    "--vers", v, "--export", exp, "--mix", "getattr", "--handles", "1000", "--streams", "64", "--conns", "1",
                    "--seconds", str(secs), "--json", j], stdout=subprocess.DEVNULL, stderr=open(f"/tmp/v4cli/cg.{name}.err", "w"))
    rows = [json.loads(l) for l in open(j)]
    calls = sum(r["calls"] + r.get("warmup_calls", 0) for r in rows)
    ir = 0
    for f in glob.glob(out + "*"):
        for l in open(f):
            if l.startswith("totals:") or l.startswith("summary:"):
                ir += int(l.split()[1]); break
    return ir, calls
try:
    for v in vers:
        for bench, name in benches:
            i1, n1 = one(bench, v, short, f"{name}.{v}.s")
            i2, n2 = one(bench, v, long_, f"{name}.{v}.l")
            print(f"{name} vers {v}: {(i2-i1)/max(1,n2-n1):.0f} instructions/call (client), calls {n1}/{n2}", flush=True)
finally:
    srv.terminate(); srv.wait()
