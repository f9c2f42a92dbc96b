#!/usr/bin/env python3
"""cg.py BENCH SERVER_BIN TAG SHORT LONG [VERS...]: the bench under callgrind, instructions per call differenced."""
import json, os, subprocess, sys, time, shutil, glob
bench, server, tag, short, long_ = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
vers = sys.argv[6:] or ["3", "4.1"]
base = "/tmp/benchv4/srv"; exp = base + "/export"
shutil.rmtree(base + "/state", ignore_errors=True); os.makedirs(base + "/state")
pf = base + "/port"
if os.path.exists(pf): os.remove(pf)
log = open(base + "/log", "w")
srv = subprocess.Popen([server, "serve", exp, "--listen", "127.0.0.1:0", "--port-file", pf, "--state-dir", base + "/state",
                        "--no-rpcbind", "--no-root-squash", "--insecure", "--log-level", "warn"], stdout=log, stderr=log)
for _ in range(300):
    if os.path.exists(pf) and os.path.getsize(pf): break
    time.sleep(0.1)
port = open(pf).read().strip()
def one(v, secs, name):
    j = base + "/cg.json"
    if os.path.exists(j): os.remove(j)
    out = f"/tmp/benchv4/cg.{name}.out"
    for f in glob.glob(out + "*"): os.remove(f)
    subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, bench, "run", "--addr", "127.0.0.1:" + port,
                    "--vers", v, "--export", exp, "--mix", "getattr", "--handles", "1000", "--streams", "64", "--conns", "1",
                    "--seconds", str(secs), "--json", j], stdout=subprocess.DEVNULL, stderr=open(f"/tmp/benchv4/cg.{name}.err", "w"))
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
        i1, n1 = one(v, short, f"{tag}.{v}.s")
        i2, n2 = one(v, long_, f"{tag}.{v}.l")
        print(f"{tag} vers {v}: {(i2-i1)/max(1,n2-n1):.0f} instructions/call (client), calls {n1}/{n2}", flush=True)
finally:
    srv.terminate(); srv.wait()
