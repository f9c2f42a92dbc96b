#!/usr/bin/env python3
"""stat.py ROUNDS BENCH:NAME... -- SERVER [VERS...]: per call of the bench (perf stat and wait4),
2 s and 8 s runs differenced, 1 conn x STREAMS (64) getattr --handles 1000, one fresh server per round;
builds alternated within each round."""
import json, os, subprocess, sys, time, shutil
args = sys.argv[1:]
rounds = int(args.pop(0))
sep = args.index("--")
benches = [a.split(":") for a in args[:sep]]
server = args[sep + 1]
vers = args[sep + 2:] or ["3", "4.1"]
streams = os.environ.get("STREAMS", "64")
conns = os.environ.get("CONNS", "1")
short, long_ = float(os.environ.get("SHORT", "2")), float(os.environ.get("LONG", "8"))
base = "/tmp/v4cli/srv"; exp = "/tmp/v4cli/export"
EV = ["task-clock", "context-switches", "syscalls:sys_enter_futex", "syscalls:sys_enter_sendto",
      "syscalls:sys_enter_recvfrom", "raw_syscalls:sys_enter"]
def start():
    shutil.rmtree(base, ignore_errors=True); os.makedirs(base + "/state")
    pf = base + "/port"
    srv = subprocess.Popen([server, "serve", exp, "--listen", "127.0.0.1:0", "--port-file", pf, "--state-dir", base + "/state",
                            "--no-rpcbind", "--no-root-squash", "--insecure", "--log-level", "warn"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        if os.path.exists(pf) and os.path.getsize(pf): break
        time.sleep(0.1)
    return srv, open(pf).read().strip()
def one(bench, port, v, secs):
    j = base + "/s.json"; o = base + "/perf.txt"
    for f in (j, o):
        if os.path.exists(f): os.remove(f)
    p = subprocess.Popen(["perf", "stat", "-x,", "-o", o, "-e", ",".join(EV), bench, "run", "--addr", "127.0.0.1:" + port,
                          "--vers", v, "--export", exp, "--mix", "getattr", "--handles", "1000", "--streams", streams,
                          "--conns", conns, "--seconds", str(secs), "--json", j], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, st, ru = os.wait4(p.pid, 0)
    rows = [json.loads(l) for l in open(j)]
    calls = sum(r["calls"] + r.get("warmup_calls", 0) for r in rows)
    ev = {"user": ru.ru_utime * 1e6, "sys": ru.ru_stime * 1e6, "errors": sum(r.get("errors", 0) for r in rows)}
    for l in open(o):
        q = l.strip().split(",")
        if len(q) > 3 and q[0].replace(".", "").isdigit():
            ev[q[2]] = float(q[0]) * (1e3 if q[2] == "task-clock" else 1)
    return ev, calls, rows[-1]["calls_per_s"]
for r in range(rounds):
    srv, port = start()
    try:
        for v in vers:
            for bench, name in benches:
                e1, n1, _ = one(bench, port, v, short)
                e2, n2, rate = one(bench, port, v, long_)
                dn = max(1, n2 - n1)
                d = {k: (e2[k] - e1[k]) / dn for k in e2 if k in e1}
                print(f"round {r} {name} vers {v}: task {d['task-clock']:.2f} us/call (user {d['user']:.2f} sys {d['sys']:.2f}), "
                      f"futex {d.get('syscalls:sys_enter_futex', 0):.3f} csw {d.get('context-switches', 0):.3f} "
                      f"sendto {d.get('syscalls:sys_enter_sendto', 0):.3f} recvfrom {d.get('syscalls:sys_enter_recvfrom', 0):.3f} "
                      f"syscalls {d.get('raw_syscalls:sys_enter', 0):.3f}, calls {n1}/{n2}, errors {e2['errors']}, rate {rate:.0f}/s", flush=True)
    finally:
        srv.terminate(); srv.wait()
