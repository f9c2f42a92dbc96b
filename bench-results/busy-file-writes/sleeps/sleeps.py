# sleeps.py < perf script output (sched:sched_switch -a -g): for event-loop
# threads, each voluntary sleep's duration (switch out with prev_state S/D
# to switch back in), grouped by where it slept (first kernel frames below
# the scheduler).
import sys, re, collections
ev = re.compile(r'^\s*(\S+)\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+sched:sched_switch:\s+prev_comm=(.+?) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.+?) next_pid=(\d+)')
out = {}
hist = collections.defaultdict(list)
cur = None; frames = []
def flush():
    global cur, frames
    if cur is None: return
    ts, ppid, pstate, pcomm, npid, ncomm = cur
    if pcomm.startswith('rnfsd-evloop') and pstate.startswith(('S','D')):
        skip = ('__schedule','schedule','__traceiter','trace_','schedule_timeout','schedule_hrtimeout','io_schedule','__sched_text','preempt_schedule')
        fs = [f for f in frames if not f.startswith(skip)]
        out[ppid] = (ts, '<'.join(fs[:3]))
    if npid in out:
        t0, where = out.pop(npid)
        hist[where].append((ts - t0)*1e6)
    cur = None; frames = []
for line in sys.stdin:
    m = ev.match(line)
    if m:
        flush()
        cur = (float(m.group(3)), m.group(5), m.group(6), m.group(4), m.group(8), m.group(7))
        continue
    s = line.strip()
    if s and cur is not None:
        parts = s.split()
        if len(parts) >= 2:
            frames.append(parts[1].split('+')[0])
flush()
tot = sum(len(v) for v in hist.values())
for where, v in sorted(hist.items(), key=lambda kv: -len(kv[1]))[:15]:
    v.sort()
    p = lambda q: v[min(len(v)-1, int(q*len(v)))]
    print(f"{len(v):6d} sleeps  p50 {p(.5):8.0f} us  p90 {p(.9):8.0f}  max {v[-1]:8.0f}  {where}")
print("total", tot)
