#!/usr/bin/env python3
# slice.py PID NS COMMPREFIX: set a custom EEVDF slice (sched_attr.sched_runtime) on matching threads
import ctypes, os, sys, struct
pid, ns, pref = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
libc = ctypes.CDLL(None, use_errno=True)
for t in os.listdir(f"/proc/{pid}/task"):
    comm = open(f"/proc/{pid}/task/{t}/comm").read().strip()
    if not comm.startswith(pref): continue
    # struct sched_attr: u32 size, u32 policy, u64 flags, s32 nice, u32 prio, u64 runtime, deadline, period
    attr = struct.pack("=IIQiIQQQ", 48, 0, 0, 0, 0, ns, 0, 0)
    buf = ctypes.create_string_buffer(attr)
    r = libc.syscall(314, int(t), buf, 0)
    print(comm, t, "ok" if r == 0 else os.strerror(ctypes.get_errno()))
