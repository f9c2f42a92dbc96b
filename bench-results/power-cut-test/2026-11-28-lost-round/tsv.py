import re, glob
pat = re.compile(r"^  round (\d+) \((\S+), (\w+), (\d+) clients, (\d+) KiB WRITEs, (?:write-behind (\d+) B, )?(\S+) direct I/O (\w+)\): cut at ([\d.]+)(ms|s): (\d+) acknowledged operations: (\d+) COMMITs and (\d+) FILE_SYNC WRITEs acknowledging (\d+) WRITEs, ([\d.]+) MiB")
chk = re.compile(r"^round (\d+) \(.*\): cut at .*: (\d+) acknowledged operations, (\d+) blocks and (\d+) names checked")
print("run\tround\tfs\tload\tclients\twrite_kib\twrite_behind\tloop_dio\tcut_s\tops\tcommits\tfile_syncs\twrites\tmib\tblocks_checked\tnames_checked\tlost")
for f in sorted(glob.glob("/tmp/powercut-runs/*-[0-9]*.log")):
    if "local" in f: continue
    run = re.sub(r"-\d+\.log$", "", f.split("/")[-1])
    last = None
    lost = set()
    for l in open(f, errors="replace"):
        if l.startswith("LOSS in round"): lost.add(int(l.split()[3].rstrip(":")))
    for l in open(f, errors="replace"):
        m = chk.match(l)
        if m: last = m.groups(); continue
        m = pat.match(l)
        if m and last and last[0] == m.group(1):
            g = m.groups()
            cut = float(g[8]) * (1 if g[9] == "s" else 0.001)
            print("\t".join([run, g[0], g[1], g[2], g[3], g[4], g[5] or "8192", g[7], f"{cut:.3f}", g[10], g[11], g[12], g[13], g[14], last[2], last[3], "yes" if int(g[0]) in lost else "no"]))
