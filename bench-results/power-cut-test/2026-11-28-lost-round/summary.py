import re, sys, glob, collections
runs = collections.OrderedDict()
pat = re.compile(r"^  round (\d+) \((\S+), (\w+), (\d+) clients, (\d+) KiB WRITEs, (?:write-behind \d+ B, )?(\S+) direct I/O (\w+)\): cut at ([\d.]+)(ms|s): (\d+) acknowledged operations: (\d+) COMMITs and (\d+) FILE_SYNC WRITEs acknowledging (\d+) WRITEs, ([\d.]+) MiB")
chk = re.compile(r"^round (\d+) \(.*\): cut at .*: (\d+) acknowledged operations, (\d+) blocks and (\d+) names checked")
for f in sorted(glob.glob(sys.argv[1] if len(sys.argv) > 1 else "/tmp/powercut-runs/*-[0-9]*.log")):
    name = re.sub(r"-\d+\.log$", "", f.split("/")[-1])
    r = runs.setdefault(name, dict(rounds=0, losses=[], failed=[], commits=0, fsyncs=0, writes=0, mib=0.0, blocks=0, names=0, cuts=[], kinds=collections.Counter(), files=[], wmax=0, mibmax=0))
    r["files"].append(f.split("/")[-1])
    for l in open(f, errors="replace"):
        m = pat.match(l)
        if m:
            r["rounds"] += 1
            r["kinds"][m.group(3)] += 1
            c = float(m.group(8)) * (1 if m.group(9) == "s" else 0.001)
            r["cuts"].append(c)
            r["commits"] += int(m.group(11)); r["fsyncs"] += int(m.group(12)); r["writes"] += int(m.group(13)); r["mib"] += float(m.group(14))
            r["wmax"] = max(r["wmax"], int(m.group(13))); r["mibmax"] = max(r["mibmax"], float(m.group(14)))
        m = chk.match(l)
        if m:
            r["blocks"] += int(m.group(3)); r["names"] += int(m.group(4))
        if l.startswith("LOSS in round"): r["losses"].append(l.strip())
        if "FAILED:" in l and l.startswith("round"): r["failed"].append(l.strip())
for n, r in runs.items():
    if not r["rounds"]: continue
    print(f"{n}: {r['rounds']} rounds ({dict(r['kinds'])}), cuts {min(r['cuts']):.2f}-{max(r['cuts']):.2f} s; "
          f"acknowledged {r['commits']} COMMITs + {r['fsyncs']} FILE_SYNC WRITEs = {r['writes']} WRITEs, {r['mib']:.0f} MiB "
          f"(per round up to {r['wmax']} WRITEs, {r['mibmax']:.1f} MiB); checked {r['blocks']} blocks, {r['names']} names; "
          f"rounds with a loss: {len(r['losses'])}; failed: {len(r['failed'])}")
    for l in r["losses"] + r["failed"]: print("   ", l)
