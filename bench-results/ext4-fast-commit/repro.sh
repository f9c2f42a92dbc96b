#!/bin/bash
# ext4 with fast commits: does the journal replay after a shutdown when a
# program keeps fsyncing a file? usage: repro.sh unlinked|tmpfile|named|exclusive [TRIES]
# exclusive: 8 threads each make files as an EXCLUSIVE create does (O_TMPFILE,
# times set, linked in by linkat(AT_EMPTY_PATH), then fsync).
# Needs root, mkfs.ext4, xfs_io. Works in a temporary directory.
set -u
MODE=${1:-unlinked} TRIES=${2:-4}
W=$(mktemp -d)
trap 'umount "$W/m" 2>/dev/null; rm -rf "$W"' EXIT
mkdir "$W/m"
cat > "$W/load.py" <<'PY'
import os, sys, threading, time, ctypes
d, mode = sys.argv[1], sys.argv[2]
stop = time.time() + 3
libc = ctypes.CDLL(None, use_errno=True)
def exclusive(t):
    i = 0
    while time.time() < stop:
        fd = os.open(d, os.O_TMPFILE | os.O_WRONLY, 0o644)
        os.utime(fd, (1000 + i, 2000 + i))
        # linkat(fd, "", AT_FDCWD, name, AT_EMPTY_PATH)
        assert libc.linkat(fd, b"", -100, f"{d}/x{t}_{i}".encode(), 0x1000) == 0
        os.fsync(fd)
        os.close(fd)
        i += 1
if mode == "exclusive":
    ts = [threading.Thread(target=exclusive, args=(t,)) for t in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    sys.exit(0)
if mode == "tmpfile":
    m = os.open(d, os.O_TMPFILE | os.O_RDWR, 0o600)
else:
    m = os.open(d + "/.marker", os.O_CREAT | os.O_RDWR, 0o600)
    if mode == "unlinked":
        os.unlink(d + "/.marker")
lock = threading.Lock()
def creator(t):
    i = 0
    while time.time() < stop:
        os.mknod(f"{d}/t{t}_{i}", 0o100644)
        with lock:
            os.utime(m)
            os.fsync(m)
        i += 1
ts = [threading.Thread(target=creator, args=(t,)) for t in range(8)]
[t.start() for t in ts]
[t.join() for t in ts]
PY
for t in $(seq "$TRIES"); do
    truncate -s 512M "$W/fs.img"
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0,nodiscard -O fast_commit "$W/fs.img"
    mount -o loop "$W/fs.img" "$W/m"
    python3 "$W/load.py" "$W/m" "$MODE" 2>/dev/null &
    sleep "1.$t"
    xfs_io -x -c shutdown "$W/m"
    wait
    umount "$W/m"
    if mount -o loop "$W/fs.img" "$W/m" 2>/dev/null; then
        echo "$MODE try $t: remounted, $(ls "$W/m" | wc -l) names"
        umount "$W/m"
    else
        echo "$MODE try $t: remount FAILED: $(dmesg | grep -E 'JBD2|EXT4-fs' | tail -2 | tr '\n' ' ')"
    fi
    rm -f "$W/fs.img"
done
