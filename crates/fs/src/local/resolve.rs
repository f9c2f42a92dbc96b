//! Handle resolution and confinement.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::handle::Decoded;
use super::sys::{Key, Stat};
use super::{
    errno, io_errno, sys, FdRef, HandleMode, LocalFs, Obj, ENOMEM_RETRIES, MAX_DEPTH,
    MAX_SCAN_DEPTH, SCAN_BUF,
};
use crate::{Fh, FsError, FsResult};

impl LocalFs {
    // ---- handles ----

    /// Generation of a regular file or directory (server credentials).
    pub(super) fn gen_of(&self, fd: RawFd, st: &Stat) -> Option<u32> {
        if !(st.is_reg() || st.is_dir()) {
            return None;
        }
        let f = sys::reopen(fd, libc::O_RDONLY | libc::O_NONBLOCK).ok()?;
        sys::generation(f.as_raw_fd())
    }

    pub(super) fn path_fh(&self, st: &Stat, gen: u32) -> Fh {
        let fs = if st.dev == self.root_key.dev {
            0
        } else {
            st.dev
        };
        self.sealer.seal_path(fs, st.ino, gen)
    }

    /// The handle of an object held by an fd (server credentials).
    pub(super) fn make_fh(&self, fd: RawFd, st: &Stat) -> FsResult<Fh> {
        if st.key() == self.root_key {
            return Ok(self.root_fh.clone());
        }
        if self.mode == HandleMode::Kernel && st.mnt_id == self.root_mnt {
            if let Ok((h, _)) = sys::name_to_handle(fd, sys::EMPTY, libc::AT_EMPTY_PATH) {
                if let Some(fh) = self.sealer.seal_kernel(h.handle_type, h.bytes()) {
                    return Ok(fh);
                }
            }
        }
        let gen = self.gen_of(fd, st).unwrap_or(0);
        Ok(self.path_fh(st, gen))
    }

    /// The handle of `name` in `dir` whose stat is `st` (server credentials).
    pub(super) fn make_fh_at(&self, dir: RawFd, name: &CString, st: &Stat) -> Option<Fh> {
        if st.key() == self.root_key {
            return Some(self.root_fh.clone());
        }
        if self.mode == HandleMode::Kernel && st.mnt_id == self.root_mnt {
            if let Ok((h, _)) = sys::name_to_handle(dir, name, 0) {
                if let Some(fh) = self.sealer.seal_kernel(h.handle_type, h.bytes()) {
                    return Some(fh);
                }
            }
        }
        if !(st.is_reg() || st.is_dir()) {
            return Some(self.path_fh(st, 0));
        }
        let f = sys::openat(
            dir,
            name,
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
            0,
        )
        .ok()?;
        if sys::fstat(f.as_raw_fd()).ok()?.key() != st.key() {
            return None;
        }
        let gen = sys::generation(f.as_raw_fd()).unwrap_or(0);
        Some(self.path_fh(st, gen))
    }

    /// Resolves a handle to an object inside the export (server credentials).
    pub(super) fn resolve(&self, fh: &Fh) -> FsResult<Obj<'_>> {
        if fh.0 == self.root_fh.0 {
            return self.root_obj();
        }
        match self.sealer.open(&fh.0)? {
            Decoded::Path { fs, ino, gen } => {
                if fs != 0 && !self.opts.cross_mounts {
                    return Err(FsError::Stale);
                }
                let dev = if fs == 0 { self.root_key.dev } else { fs };
                let key = Key { dev, ino };
                if key == self.root_key {
                    return self.root_obj();
                }
                self.find(key, gen)
            }
            Decoded::Kernel { htype, bytes } => {
                if self.mode != HandleMode::Kernel {
                    return Err(FsError::Stale);
                }
                let fd = self.open_kernel_handle(htype, &bytes)?;
                let st = sys::fstat(fd.as_raw_fd())?;
                if st.nlink == 0 || st.mnt_id != self.root_mnt || st.dev != self.root_key.dev {
                    return Err(FsError::Stale);
                }
                if st.key() == self.root_key {
                    return self.root_obj();
                }
                if !self.verified.contains(&st.key()) && !self.kernel_path_inside(fd.as_raw_fd()) {
                    if st.is_dir() {
                        self.walk_up(fd.as_raw_fd(), &st)?;
                    } else {
                        let o = self.find(st.key(), 0)?;
                        if o.st.key() != st.key() {
                            return Err(FsError::Stale);
                        }
                    }
                    self.verified.insert(st.key());
                }
                Ok(Obj {
                    fd: FdRef::Owned(fd),
                    st,
                })
            }
        }
    }

    /// open_by_handle_at on the export's mount. An object freed a moment ago
    /// can make the kernel answer ENOMEM instead of ESTALE while its inode
    /// is being evicted (seen in 1 of 10 parallel test runs); asking again
    /// after a short wait gets the settled answer. A real shortage stays ENOMEM (JUKEBOX to the
    /// client, which retries); a missing object is Stale.
    pub(super) fn open_kernel_handle(&self, htype: i32, bytes: &[u8]) -> FsResult<OwnedFd> {
        let mut tries = 0;
        loop {
            match sys::open_by_handle(self.root.as_raw_fd(), htype, bytes, libc::O_PATH) {
                Ok(fd) => return Ok(fd),
                Err(e) => match io_errno(&e) {
                    libc::ESTALE | libc::ENOENT | libc::EINVAL => return Err(FsError::Stale),
                    libc::ENOMEM if tries < ENOMEM_RETRIES => {
                        // 0.1 ms, 1 ms, 10 ms: only this rare path waits.
                        std::thread::sleep(std::time::Duration::from_micros(
                            100 * 10u64.pow(tries),
                        ));
                        tries += 1;
                    }
                    n => return Err(errno(n)),
                },
            }
        }
    }

    /// Whether the kernel's own path for `fd` (its dentry, as /proc/self/fd
    /// shows it) lies below the export root. One readlink instead of a walk
    /// or a scan: directory dentries are always connected, and so is any
    /// file whose dentry is cached, which after a server restart (not a host
    /// reboot) is the common case. A disconnected dentry shows as a single
    /// "/name" component and fails the test, falling back to the slow check.
    pub(super) fn kernel_path_inside(&self, fd: RawFd) -> bool {
        match sys::fd_path(fd) {
            Ok(p) => {
                p.len() > self.root_prefix.len()
                    && p.starts_with(&self.root_prefix)
                    && !p.ends_with(b" (deleted)")
            }
            Err(_) => false,
        }
    }

    /// Confirms a directory is the export root or below it by walking "..".
    pub(super) fn walk_up(&self, fd: RawFd, st: &Stat) -> FsResult<()> {
        // A directory removed meanwhile has no ".." any more: Stale.
        let up = |fd: RawFd| {
            sys::openat(fd, sys::DOTDOT, libc::O_PATH | libc::O_DIRECTORY, 0)
                .map_err(|_| FsError::Stale)
        };
        let mut prev = st.key();
        let mut cur = up(fd)?;
        for _ in 0..MAX_DEPTH {
            let s = sys::fstat(cur.as_raw_fd()).map_err(|_| FsError::Stale)?;
            if s.key() == self.root_key {
                return Ok(());
            }
            if s.key() == prev {
                // Reached the top of the filesystem without meeting the root.
                return Err(FsError::Stale);
            }
            prev = s.key();
            cur = up(cur.as_raw_fd())?;
        }
        Err(FsError::Stale)
    }

    /// Whether `o` has generation `want` (0 = not known when issued).
    pub(super) fn gen_ok(&self, o: &Obj<'_>, want: u32) -> bool {
        want == 0 || self.gen_of(o.raw(), &o.st).is_none_or(|g| g == want)
    }

    /// Finds an object by identity: remembered location, else a scan.
    pub(super) fn find(&self, key: Key, gen: u32) -> FsResult<Obj<'_>> {
        if let Some(o) = self.walk_chain(key)? {
            return if self.gen_ok(&o, gen) {
                Ok(o)
            } else {
                Err(FsError::Stale)
            };
        }
        if self.negative.contains(&(key, gen)) {
            return Err(FsError::Stale);
        }
        let _g = self.scan_lock.lock().unwrap_or_else(|e| e.into_inner());
        // Another caller's scan may have found it meanwhile.
        if let Some(o) = self.walk_chain(key)? {
            return if self.gen_ok(&o, gen) {
                Ok(o)
            } else {
                Err(FsError::Stale)
            };
        }
        match self.scan(key, gen)? {
            Some(o) => Ok(o),
            None => {
                self.negative.insert((key, gen));
                Err(FsError::Stale)
            }
        }
    }

    /// Re-walks a remembered location from the root, checking each step.
    pub(super) fn walk_chain(&self, key: Key) -> FsResult<Option<Obj<'_>>> {
        let Some(chain) = self.locs.chain(key, self.root_key, MAX_DEPTH) else {
            return Ok(None);
        };
        let mut cur: Option<(OwnedFd, Stat)> = None;
        for (k, name) in chain {
            let dirfd = cur
                .as_ref()
                .map_or(self.root.as_raw_fd(), |(f, _)| f.as_raw_fd());
            let step = sys::cstr(&name)
                .and_then(|c| sys::open_path(dirfd, &c))
                .and_then(|f| sys::fstat(f.as_raw_fd()).map(|s| (f, s)));
            match step {
                Ok((f, s)) if s.key() == k && self.on_export_fs(&s) => cur = Some((f, s)),
                _ => {
                    self.locs.remove(&k);
                    return Ok(None);
                }
            }
        }
        Ok(cur.map(|(fd, st)| Obj {
            fd: FdRef::Owned(fd),
            st,
        }))
    }

    /// Bounded depth-first search of the export for `target`. Depth-first so
    /// the open fds are bounded by the depth (MAX_SCAN_DEPTH), not the width.
    /// Directories seen are remembered in the location map.
    pub(super) fn scan(&self, target: Key, gen: u32) -> FsResult<Option<Obj<'_>>> {
        let top = sys::openat(
            self.root.as_raw_fd(),
            sys::DOT,
            libc::O_RDONLY | libc::O_DIRECTORY,
            0,
        )?;
        let mut stack = vec![(sys::DirReader::new(top, SCAN_BUF), self.root_key)];
        let mut visited = 0usize;
        while let Some((rd, dkey)) = stack.last_mut() {
            let dkey = *dkey;
            let e = match rd.next_entry() {
                Ok(Some(e)) => e,
                Ok(None) | Err(_) => {
                    stack.pop();
                    continue;
                }
            };
            if e.name == b"." || e.name == b".." {
                continue;
            }
            visited += 1;
            if visited > self.opts.handle_scan_limit {
                return Ok(None);
            }
            let dfd = rd.fd();
            let Ok(c) = sys::cstr(&e.name) else { continue };
            if e.ino == target.ino {
                if let Ok(fd) = sys::open_path(dfd, &c) {
                    if let Ok(st) = sys::fstat(fd.as_raw_fd()) {
                        let o = Obj {
                            fd: FdRef::Owned(fd),
                            st,
                        };
                        if st.key() == target && self.on_export_fs(&st) && self.gen_ok(&o, gen) {
                            self.locs.insert(target, dkey, &e.name);
                            return Ok(Some(o));
                        }
                    }
                }
            }
            let maybe_dir = e.dtype == libc::DT_DIR || e.dtype == libc::DT_UNKNOWN;
            if maybe_dir && stack.len() < MAX_SCAN_DEPTH {
                let flags =
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
                if let Ok(sub) = sys::openat(dfd, &c, flags, 0) {
                    if let Ok(st) = sys::fstat(sub.as_raw_fd()) {
                        if self.on_export_fs(&st) {
                            self.locs.insert(st.key(), dkey, &e.name);
                            stack.push((sys::DirReader::new(sub, SCAN_BUF), st.key()));
                        }
                    }
                }
            }
        }
        Ok(None)
    }

    /// Resolves a handle that must name a directory.
    pub(super) fn dir(&self, fh: &Fh) -> FsResult<Obj<'_>> {
        let o = self.resolve(fh)?;
        if !o.st.is_dir() {
            return Err(errno(libc::ENOTDIR));
        }
        Ok(o)
    }
}
