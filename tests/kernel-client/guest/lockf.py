#!/usr/bin/python3
"""POSIX byte-range locks (fcntl F_SETLK/F_SETLKW through fcntl.lockf) for the
lock workload, in the guest (over NLM) and on the host (ns.sh, a local
process on the export).

  lockf.py try FILE START LEN ex|sh
      exit 0: granted (and released), 1: refused (EAGAIN/EACCES), 2: error
  lockf.py hold FILE START LEN ex|sh READY SECS [wait]
      take the lock (F_SETLKW with "wait", else F_SETLK; READY.trying
      is created just before asking), create READY,
      hold it SECS seconds or until SIGTERM, then unlock and exit 0
LEN 0 means to the end of the file (and beyond).
"""
import errno
import fcntl
import os
import signal
import sys
import time


def main():
    mode, path, start, length, kind = sys.argv[1:6]
    start, length = int(start), int(length)
    flags = fcntl.LOCK_EX if kind == "ex" else fcntl.LOCK_SH
    # A read lock needs a descriptor open for reading, a write lock one
    # open for writing (fcntl(2)): open read-write, creating the file.
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    wait = mode == "hold" and sys.argv[8:9] == ["wait"]
    if mode == "hold":
        open(sys.argv[6] + ".trying", "w").close()
    try:
        fcntl.lockf(fd, flags | (0 if wait else fcntl.LOCK_NB), length, start)
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EACCES):
            print(f"refused: {e.strerror}", file=sys.stderr)
            sys.exit(1)
        print(f"lock: {e}", file=sys.stderr)
        sys.exit(2)
    if mode == "try":
        fcntl.lockf(fd, fcntl.LOCK_UN, length, start)
        sys.exit(0)
    ready, secs = sys.argv[6], float(sys.argv[7])
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with open(ready, "w") as f:
        f.write(f"{os.getpid()}\n")
    end = time.monotonic() + secs
    while not stop and time.monotonic() < end:
        time.sleep(0.1)
    fcntl.lockf(fd, fcntl.LOCK_UN, length, start)
    os.close(fd)


if __name__ == "__main__":
    main()
