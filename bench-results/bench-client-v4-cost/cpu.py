#!/usr/bin/env python3
"""cpu.py BENCH SERVER_BIN ROUNDS SHORT LONG [VERS...]: the bench's user+sys
per call, differenced (LONG run minus SHORT run), 1 conn x 64 streams,
getattr --handles 1000, against one fresh server."""
import json, os, subprocess, sys, time, shutil, resource
bench, server, rounds, short, long_ = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
vers = sys.argv[6:] or ["3", "4.1"]
streams = os.environ.get("STREAMS", "64")
base = "/tmp/benchv4/srv"
exp = base + "/export"
if not os.path.isdir(exp):
    os.makedirs(exp)
    subprocess.run([bench, "prepare", exp, "--files", "2000", "--dirs", "100", "--file-size", "8"], check=True, stdout=subprocess.DEVNULL)
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
def one(v, secs):
    j = base + "/r.json"
    if os.path.exists(j): os.remove(j)
    t0 = time.time()
    p = subprocess.Popen([bench, "run", "--addr", "127.0.0.1:" + port, "--vers", v, "--export", exp, "--mix", "getattr",
                          "--handles", "1000", "--streams", streams, "--conns", "1", "--seconds", str(secs), "--json", j],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, st, ru = os.wait4(p.pid, 0)
    rows = [json.loads(l) for l in open(j)]
    calls = sum(r["calls"] + r.get("warmup_calls", 0) for r in rows)
    errs = sum(r.get("errors", 0) for r in rows)
    rate = rows[-1]["calls_per_s"]
    return (ru.ru_utime, ru.ru_stime, ru.ru_nvcsw + ru.ru_nivcsw), calls, errs, rate
try:
    for r in range(rounds):
        for v in vers:
            c1, n1, e1, _ = one(v, short)
            c2, n2, e2, rate = one(v, long_)
            dn = max(1, n2 - n1)
            u, sy, cs = ((c2[k] - c1[k]) / dn for k in range(3))
            print(f"round {r} vers {v}: {(u + sy) * 1e6:.2f} us/call client (user+sys), user {u * 1e6:.2f} sys {sy * 1e6:.2f}, csw/call {cs:.3f}, calls {n1}/{n2}, errors {e1}/{e2}, rate {rate:.0f}/s", flush=True)
finally:
    srv.terminate(); srv.wait()
