# besides-malloc.py A B: per-call.py's totals for runs A and B (tags as
# per-call.py takes them, PROF as there), split into malloc/free (glibc's
# allocator functions) and the rest. Run beside per-call.py.
import sys, subprocess
out = subprocess.run(["python3", "per-call.py", sys.argv[1], sys.argv[2], "no", "100000"], capture_output=True, text=True).stdout.splitlines()
ex = ("_int_malloc", "_int_free", "malloc", "free", "unlink_chunk.constprop.0", "malloc_consolidate", "_int_free_merge_chunk", "_int_free_create_chunk", "_int_free_maybe_consolidate.part.0", "tcache_get", "__libc_malloc", "cfree")
ta = tb = 0
ma = mb = 0
for l in out[1:]:
    p = l.split(None, 2)
    if len(p) < 3: continue
    a, b, f = float(p[0]), float(p[1]), p[2]
    if f.strip() in ex or "malloc" in f or f.strip().endswith("free"):
        ma += a; mb += b
    else:
        ta += a; tb += b
print(f"{sys.argv[1]} {ta+ma:.0f} (malloc/free {ma:.0f}, rest {ta:.0f})   {sys.argv[2]} {tb+mb:.0f} (malloc/free {mb:.0f}, rest {tb:.0f})")
