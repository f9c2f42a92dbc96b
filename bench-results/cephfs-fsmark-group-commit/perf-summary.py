# Per-file counts of an OUT/perf directory (bench-ceph.sh with BENCH_CEPH_PERF=1):
# MDS journal writes, MDS session and cap messages, OSD writes, and the CPU
# of each process kind, per fsmark window (before/after each server's run).
import json, sys, glob, os, collections
d, files = sys.argv[1], float(sys.argv[2])
def flat(j, pre=""):
    out = {}
    for k, v in j.items():
        if isinstance(v, dict):
            if "avgcount" in v: out[pre+k] = v["avgcount"]; out[pre+k+"~sum"] = float(v["sum"])
            else: out.update(flat(v, pre+k+"."))
        elif isinstance(v, (int, float)): out[pre+k] = v
    return out
def cpu(f):
    m = {}
    for l in open(f):
        p = l.split()
        if len(p) >= 4: m[(p[0], p[1])] = int(p[2]) + int(p[3])
    return m
tags = sorted({os.path.basename(f).split("-before.")[0] for f in glob.glob(f"{d}/*-before.mds.a.json")})
print("| window | journal writes | journal latency ms | MDS session msgs | MDS cap msgs | OSD writes | OSD write ms | CPU ms/file: server | MDS | OSD |")
print("|---|---|---|---|---|---|---|---|---|---|")
for t in tags:
    m = {}
    for dm in ("mds.a", "osd.0"):
        b = flat(json.load(open(f"{d}/{t}-before.{dm}.json"))); a = flat(json.load(open(f"{d}/{t}-after.{dm}.json")))
        for k in a: m[dm+":"+k] = a[k] - b.get(k, 0)
    cb, ca = cpu(f"{d}/{t}-before.cpu"), cpu(f"{d}/{t}-after.cpu")
    c = collections.Counter()
    for k, v in ca.items():
        if k in cb: c[k[1]] += v - cb[k]
    server = c["ganesha.nfsd"] if "ganesha" in t else c["rnfsd"]
    jl = m["mds.a:mds_log.jlat"]; ow = m["osd.0:osd.op_w_latency"]
    print(f"| {t} | {jl/files:.2f} | {m['mds.a:mds_log.jlat~sum']/max(jl,1)*1e3:.1f} | {m['mds.a:mds_server.handle_client_session']/files:.2f} | "
          f"{m['mds.a:mds.handle_client_caps']/files:.2f} | {ow/files:.2f} | {m['osd.0:osd.op_w_latency~sum']/max(ow,1)*1e3:.1f} | "
          f"{server*10/files:.2f} | {c['ceph-mds']*10/files:.2f} | {c['ceph-osd']*10/files:.2f} |")
