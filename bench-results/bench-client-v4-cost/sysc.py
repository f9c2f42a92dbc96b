#!/usr/bin/env python3
"""sysc.py BENCH SERVER_BIN: syscalls and context switches per call of the bench (perf stat), 2 s and 8 s runs differenced."""
import json, os, subprocess, sys, time, shutil
bench, server = sys.argv[1], sys.argv[2]
base = "/tmp/benchv4/srv"; exp = base + "/export"
shutil.rmtree(base + "/state", ignore_errors=True); os.makedirs(base + "/state")
pf = base + "/port"
if os.path.exists(pf): os.remove(pf)
srv = subprocess.Popen([server, "serve", exp, "--listen", "127.0.0.1:0", "--port-file", pf, "--state-dir", base + "/state",
                        "--no-rpcbind", "--no-root-squash", "--insecure", "--log-level", "warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(300):
    if os.path.exists(pf) and os.path.getsize(pf): break
    time.sleep(0.1)
port = open(pf).read().strip()
def one(v, secs):
    j = base + "/s.json"; o = base + "/perf.txt"
    for f in (j, o):
        if os.path.exists(f): os.remove(f)
    subprocess.run(["perf", "stat", "-x,", "-o", o, "-e", "raw_syscalls:sys_enter,context-switches,task-clock", bench, "run", "--addr", "127.0.0.1:" + port,
                    "--vers", v, "--export", exp, "--mix", "getattr", "--handles", "1000", "--streams", "64", "--conns", "1",
                    "--seconds", str(secs), "--json", j], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = [json.loads(l) for l in open(j)]
    calls = sum(r["calls"] + r.get("warmup_calls", 0) for r in rows)
    ev = {}
    for l in open(o):
        p = l.strip().split(",")
        if len(p) > 3 and p[0].replace(".", "").isdigit():
            ev[p[2]] = float(p[0])
    return ev, calls
try:
    for v in ["3", "4.1"]:
        e1, n1 = one(v, 2); e2, n2 = one(v, 8)
        dn = max(1, n2 - n1)
        d = {k: (e2[k] - e1[k]) / dn for k in e2 if k in e1}
        print(f"vers {v}: syscalls/call {d.get('raw_syscalls:sys_enter', 0):.3f}, csw/call {d.get('context-switches', 0):.3f}, task-clock us/call {d.get('task-clock', 0) * 1e3:.2f}, calls {n1}/{n2}", flush=True)
finally:
    srv.terminate(); srv.wait()
