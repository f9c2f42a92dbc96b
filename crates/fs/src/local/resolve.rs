//! Handle resolution and confinement: the one place a client's handle
//! becomes an object, and the one place it is decided that the object lies
//! inside the export.
//!
//! Order of resolution:
//! 1. the export root's handle: the held root descriptor;
//! 2. the handle cache (`objects.rs`): the object's descriptor, kept from an
//!    earlier resolution; one statx, no credential switch. Its confinement
//!    verdict is trusted for `verify_ttl` (forever when the export is a
//!    whole filesystem), then proven again (knfsd with no_subtree_check
//!    never checks again);
//! 3. otherwise the MAC is checked and the handle decoded (`crate::handle`):
//!    kernel handles are opened with open_by_handle_at and proven inside
//!    the export (a proof younger than `verify_ttl`, kept without a
//!    descriptor in the verdict map, is reused); path handles are found by re-walking their remembered
//!    location from the root, every step checked by identity; locations not
//!    known are looked for by the background walk (`scan.rs`). The result
//!    is cached.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use super::khandle::Layout;
use super::objects::{Object, FOREVER};
use super::scan::Located;
use super::sys::{Key, Stat};
use super::{errno, io_errno, sys, FdRef, HandleMode, LocalFs, Obj, ENOMEM_RETRIES, MAX_DEPTH};
use crate::handle::Decoded;
use crate::{Call, Fh, FsError, FsResult};

/// A name now holds another object than the one just looked at.
pub(super) struct Renamed;

impl LocalFs {
    // ---- handles ----

    /// Generation of a regular file or directory (switches to the server's
    /// credentials: the caller may not be able to open it).
    pub(super) fn gen_of(&self, fd: RawFd, st: &Stat) -> Option<u32> {
        if !(st.is_reg() || st.is_dir()) {
            return None;
        }
        // Under a write lease of ours, its descriptor: an open would break
        // it.
        if let Some(f) = self.leased_fd(st.key()) {
            return sys::generation(f.ok()?.as_raw_fd());
        }
        self.as_server().ok()?;
        let f = sys::reopen(fd, libc::O_RDONLY | libc::O_NONBLOCK).ok()?;
        sys::generation(f.as_raw_fd())
    }

    /// What a path-mode handle carries to tell an object from a later one
    /// that reused its inode number: the inode generation where the
    /// filesystem gives one, else a fold of the birth time (overlayfs,
    /// FUSE and files the server cannot open have no generation for us),
    /// else 0, "nothing known", which `tag_ok` never accepts on its own.
    pub(super) fn tag_of(&self, fd: RawFd, st: &Stat) -> u32 {
        self.gen_of(fd, st)
            .filter(|g| *g != 0)
            .or_else(|| birth_tag(st))
            .unwrap_or(0)
    }

    pub(super) fn path_fh(&self, st: &Stat, gen: u32) -> Fh {
        let fs = if st.dev == self.root_key.dev {
            0
        } else {
            st.dev
        };
        self.sealer.seal_path(fs, st.ino, gen)
    }

    /// The handle of an object held by an fd.
    pub(super) fn make_fh(&self, call: &Call<'_>, fd: RawFd, st: &Stat) -> FsResult<Fh> {
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
        if call.inline() && (st.is_reg() || st.is_dir()) {
            // Its generation takes an open and an ioctl: not on the loop.
            return Err(call.give_up());
        }
        let tag = self.tag_of(fd, st);
        Ok(self.path_fh(st, tag))
    }

    /// The handle of `name` in `dir` whose stat is `st` (server
    /// credentials). `st` was taken by name a moment before: both handle
    /// kinds are checked to name that same object, and a rename in between
    /// gives `Renamed`. Ok(None): no handle can be made for it.
    pub(super) fn make_fh_at(
        &self,
        dir: RawFd,
        name: &CString,
        st: &Stat,
    ) -> Result<Option<Fh>, Renamed> {
        if st.key() == self.root_key {
            return Ok(Some(self.root_fh.clone()));
        }
        if self.mode == HandleMode::Kernel && st.mnt_id == self.root_mnt {
            if let Some(fh) = self.kernel_fh_at(dir, name, st)? {
                return Ok(Some(fh));
            }
        }
        if !(st.is_reg() || st.is_dir()) {
            return Ok(Some(self.path_fh(st, birth_tag(st).unwrap_or(0))));
        }
        let Ok(f) = sys::openat(
            dir,
            name,
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
            0,
        ) else {
            return Ok(None);
        };
        if sys::fstat(f.as_raw_fd()).ok().map(|s| s.key()) != Some(st.key()) {
            return Err(Renamed);
        }
        let tag = sys::generation(f.as_raw_fd())
            .filter(|g| *g != 0)
            .or_else(|| birth_tag(st))
            .unwrap_or(0);
        Ok(Some(self.path_fh(st, tag)))
    }

    /// The kernel handle of `name` in `dir`, checked to name the object
    /// `st` describes (made by name a moment before: a rename in between
    /// gives `Renamed`). Ok(None): no kernel handle for it.
    pub(super) fn kernel_fh_at(
        &self,
        dir: RawFd,
        name: &CString,
        st: &Stat,
    ) -> Result<Option<Fh>, Renamed> {
        if self.handle_layout != Layout::Unknown {
            let Ok((h, _)) = sys::name_to_handle(dir, name, 0) else {
                return Ok(None); // none by name: none by descriptor either
            };
            match self.handle_layout.ino(h.handle_type, h.bytes()) {
                Some(ino) if ino != st.ino => return Err(Renamed),
                Some(_) => return Ok(self.sealer.seal_kernel(h.handle_type, h.bytes())),
                None => {} // a type this layout does not cover
            }
        }
        // Layout (or this handle type) not known: open the name once and
        // ask both of the descriptor.
        let Ok(f) = sys::openat(dir, name, libc::O_PATH | libc::O_NOFOLLOW, 0) else {
            return Ok(None);
        };
        if sys::fstat(f.as_raw_fd()).ok().map(|s| s.key()) != Some(st.key()) {
            return Err(Renamed);
        }
        Ok(
            sys::name_to_handle(f.as_raw_fd(), sys::EMPTY, libc::AT_EMPTY_PATH)
                .ok()
                .and_then(|(h, _)| self.sealer.seal_kernel(h.handle_type, h.bytes())),
        )
    }

    /// Milliseconds on the backend's clock.
    pub(super) fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The confinement verdict to give an object just proven inside:
    /// permanent on the export's own mount when it exports a whole
    /// filesystem (nothing can be moved out of it).
    pub(super) fn verdict_now(&self, st: &Stat) -> u64 {
        if self.whole_fs && st.mnt_id == self.root_mnt {
            FOREVER
        } else {
            self.now_ms()
        }
    }

    /// Resolves a handle to an object inside the export. Switches to the
    /// server's credentials only when the handle is not cached.
    pub(super) fn resolve(&self, call: &Call<'_>, fh: &Fh) -> FsResult<Obj<'_>> {
        if fh.0 == self.root_fh.0 {
            return self.root_obj();
        }
        if let Some(o) = self.objects.get(&fh.0, call.runs_on_loop()) {
            return self.cached(call, fh, o);
        }
        // Opening by handle may read the inode from disk: on an event loop
        // only a kernel handle's open is tried (`inline` on speculation); a
        // path handle's object may take a walk.
        if call.inline() && !(self.mode == HandleMode::Kernel && call.may_speculate()) {
            return Err(call.give_up());
        }
        self.as_server()?;
        match super::speculating(call, || self.resolve_uncached(call, fh))? {
            None => self.root_obj(),
            Some((fd, st, verified)) => {
                let o = self
                    .objects
                    .insert(&fh.0, st.key(), fd, verified, call.runs_on_loop());
                Ok(Obj {
                    fd: FdRef::Cached(o),
                    st,
                    verified,
                })
            }
        }
    }

    /// Caches an object a call found in directory `dir` (LOOKUP, CREATE,
    /// ...) under its handle. An entry of a directory inside the export is
    /// inside as long as the directory is: it gets the directory's verdict
    /// (the root's is permanent only for the root itself).
    pub(super) fn remember(&self, call: &Call<'_>, fh: &Fh, fd: OwnedFd, st: &Stat, dir: &Obj<'_>) {
        if fh.0 == self.root_fh.0 {
            return;
        }
        // Already cached (a client that LOOKUPs what it just used): a use
        // of that entry; `fd` closes without taking a permit or a slot.
        if self.objects.touch(&fh.0, call.runs_on_loop()) {
            return;
        }
        let verified = self.inherited_verdict(st, dir);
        let o = self
            .objects
            .insert(&fh.0, st.key(), fd, verified, call.runs_on_loop());
        drop(o);
    }

    /// The verdict of an object found by name in `dir`: inside the export
    /// as long as the directory is (the root's permanent verdict holds for
    /// the root alone).
    fn inherited_verdict(&self, st: &Stat, dir: &Obj<'_>) -> u64 {
        if dir.verified == FOREVER {
            self.verdict_now(st)
        } else {
            dir.verified
        }
    }

    /// Records that an object listed in `dir` (a READDIRPLUS entry, which
    /// gets no descriptor) lies inside the export, so that its handle's
    /// first use, which a client makes soon after, is not proven again by
    /// a readlink of its /proc link. Nothing to record where the whole
    /// filesystem is exported: no proof is ever made there.
    pub(super) fn seen_inside(&self, st: &Stat, dir: &Obj<'_>) {
        if self.whole_fs {
            return;
        }
        let at = self.inherited_verdict(st, dir);
        if at != FOREVER {
            self.verdicts.insert(st.key(), at);
        }
    }

    /// A cache hit: one statx; the object is released if it was deleted,
    /// and proven inside the export again once its verdict is old.
    fn cached(&self, call: &Call<'_>, fh: &Fh, o: Arc<Object>) -> FsResult<Obj<'_>> {
        let st = sys::fstat(o.fd.as_raw_fd())?;
        if st.nlink == 0 {
            self.objects.forget(&fh.0, &o);
            return Err(FsError::Stale);
        }
        let at = o.verified_at();
        if at != FOREVER
            && self.now_ms().saturating_sub(at) > self.opts.verify_ttl.as_millis() as u64
        {
            self.as_server()?;
            match self.proven_inside(call, o.fd.as_raw_fd(), &st) {
                Ok(at) => o.set_verified(at),
                Err(e) => {
                    if e == FsError::Stale {
                        self.objects.forget(&fh.0, &o);
                    }
                    return Err(e);
                }
            }
        }
        let verified = o.verified_at();
        Ok(Obj {
            fd: FdRef::Cached(o),
            st,
            verified,
        })
    }

    /// Decodes and finds a handle's object: None for the export root; else
    /// the object and when it was proven inside the export.
    fn resolve_uncached(&self, call: &Call<'_>, fh: &Fh) -> FsResult<Option<(OwnedFd, Stat, u64)>> {
        match self.sealer.open(&fh.0)? {
            Decoded::Path { fs, ino, gen } => {
                if fs != 0 && !self.opts.cross_mounts {
                    return Err(FsError::Stale);
                }
                let dev = if fs == 0 { self.root_key.dev } else { fs };
                let key = Key { dev, ino };
                if key == self.root_key {
                    return Ok(None);
                }
                if call.inline() {
                    // A path handle's object may take a walk to find.
                    return Err(call.give_up());
                }
                let (fd, st) = self.find(key, gen)?;
                Ok(Some((fd, st, self.verdict_now(&st))))
            }
            Decoded::Kernel { htype, bytes } => {
                if self.mode != HandleMode::Kernel {
                    return Err(FsError::Stale);
                }
                let fd = self.open_kernel_handle(call, htype, &bytes)?;
                let st = sys::fstat(fd.as_raw_fd())?;
                if st.nlink == 0 || st.mnt_id != self.root_mnt || st.dev != self.root_key.dev {
                    return Err(FsError::Stale);
                }
                if st.key() == self.root_key {
                    return Ok(None);
                }
                let verified = if self.whole_fs {
                    self.verdict_now(&st)
                } else {
                    self.proven_inside(call, fd.as_raw_fd(), &st)?
                };
                Ok(Some((fd, st, verified)))
            }
            // Sealed with our key for a CephFS export of the same id.
            Decoded::Ceph { .. } => Err(FsError::Stale),
        }
    }

    /// When the object `fd` refers to was proven inside the export: a proof
    /// younger than `verify_ttl` is reused, else one is made now. The handle
    /// opened this very object (inode and generation), and a verdict is
    /// trusted as long as a cached object's, so the reuse changes nothing a
    /// client can reach.
    fn proven_inside(&self, call: &Call<'_>, fd: RawFd, st: &Stat) -> FsResult<u64> {
        let now = self.now_ms();
        let ttl = self.opts.verify_ttl.as_millis() as u64;
        if let Some(at) = self.verdicts.get(&st.key()) {
            if now.saturating_sub(at) <= ttl {
                return Ok(at);
            }
        }
        self.prove_inside(call, fd, st)?;
        self.verdicts.insert(st.key(), now);
        Ok(now)
    }

    /// Proves that the object `fd` refers to lies below the export root
    /// (server credentials): the kernel's path for it, else for a directory
    /// a walk up "..", else its remembered or searched-for location.
    fn prove_inside(&self, call: &Call<'_>, fd: RawFd, st: &Stat) -> FsResult<()> {
        if self.kernel_path_inside(fd) {
            return Ok(());
        }
        if call.inline() {
            // Walks and searches read directories: not on the loop.
            return Err(call.give_up());
        }
        if st.is_dir() {
            return self.walk_up(fd, st);
        }
        let (found, _) = self.find(st.key(), 0)?;
        drop(found);
        Ok(())
    }

    /// open_by_handle_at on the export's mount. An object freed a moment ago
    /// can make the kernel answer ENOMEM instead of ESTALE while its inode
    /// is being evicted (seen in 1 of 10 parallel test runs); asking again
    /// after a short wait gets the settled answer. A real shortage stays
    /// ENOMEM (JUKEBOX to the client, which retries); a missing object is
    /// Stale.
    fn open_kernel_handle(&self, call: &Call<'_>, htype: i32, bytes: &[u8]) -> FsResult<OwnedFd> {
        let mut tries = 0;
        loop {
            match sys::open_by_handle(self.root.as_raw_fd(), htype, bytes, libc::O_PATH) {
                Ok(fd) => return Ok(fd),
                Err(e) => match io_errno(&e) {
                    libc::ESTALE | libc::ENOENT | libc::EINVAL => return Err(FsError::Stale),
                    libc::ENOMEM if call.inline() => return Err(call.give_up()),
                    libc::ENOMEM if tries < ENOMEM_RETRIES => {
                        // 0.1 ms, 1 ms, 10 ms: only this rare path waits.
                        std::thread::sleep(Duration::from_micros(100 * 10u64.pow(tries)));
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
    fn kernel_path_inside(&self, fd: RawFd) -> bool {
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
    fn walk_up(&self, fd: RawFd, st: &Stat) -> FsResult<()> {
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

    /// Whether the object carries tag `want` (its generation, or its birth
    /// time's fold). Never guessed: an object whose tag cannot be read now
    /// does not match, and `want` 0 (nothing known when issued) matches
    /// nothing here (see `find`).
    fn tag_ok(&self, fd: RawFd, st: &Stat, want: u32) -> bool {
        want != 0 && (self.gen_of(fd, st) == Some(want) || birth_tag(st) == Some(want))
    }

    /// Finds an object by identity: its remembered location, else where the
    /// background walk sees it. Stale when it is not in the export; EAGAIN
    /// (JUKEBOX) while the walk has not answered yet. A handle that carries
    /// no tag is revalidated by path only (the name it was found under
    /// still leads to that inode number); found by inode number alone it
    /// could be a newer object that reused the number, so it is STALE.
    fn find(&self, key: Key, gen: u32) -> FsResult<(OwnedFd, Stat)> {
        if let Some(found) = self.walk_chain(key)? {
            if gen == 0 {
                return Ok(found);
            }
            return self.check_gen(found, gen);
        }
        if gen == 0 {
            return Err(FsError::Stale);
        }
        if self.negative.contains(&(key, gen)) {
            return Err(FsError::Stale);
        }
        match self.scanner.locate(key) {
            Located::Found => match self.walk_chain(key)? {
                Some(found) => self.check_gen(found, gen),
                None => Err(FsError::Stale),
            },
            Located::Missing => {
                self.negative.insert((key, gen));
                Err(FsError::Stale)
            }
            Located::Busy => Err(errno(libc::EAGAIN)),
        }
    }

    fn check_gen(&self, (fd, st): (OwnedFd, Stat), gen: u32) -> FsResult<(OwnedFd, Stat)> {
        if self.tag_ok(fd.as_raw_fd(), &st, gen) {
            Ok((fd, st))
        } else {
            Err(FsError::Stale)
        }
    }

    /// Re-walks a remembered location from the root, checking each step.
    fn walk_chain(&self, key: Key) -> FsResult<Option<(OwnedFd, Stat)>> {
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
        Ok(cur)
    }

    /// Resolves a handle that must name a directory.
    pub(super) fn dir(&self, call: &Call<'_>, fh: &Fh) -> FsResult<Obj<'_>> {
        let o = self.resolve(call, fh)?;
        if !o.st.is_dir() {
            return Err(errno(libc::ENOTDIR));
        }
        Ok(o)
    }
}

/// A 32-bit fold of the birth time (never 0), or None without one.
fn birth_tag(st: &Stat) -> Option<u32> {
    let b = st.btime?;
    let x = (b.sec as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(b.nsec);
    let t = (x >> 32) as u32 ^ x as u32;
    Some(t.max(1))
}
