//! The local-directory backend.
//!
//! # Confinement
//! All work is done relative to directory fds with the `*at` syscalls and
//! O_PATH|O_NOFOLLOW opens; symlinks are never followed on the server side.
//! Names are single components ('/' and NUL give EINVAL, > 255 bytes
//! ENAMETOOLONG, "." and ".." are only meaningful to LOOKUP and READDIR, where
//! ".." of the export root is the root itself; other operations refuse them
//! with EACCES as knfsd does). Objects on another mount than the export root
//! (compared by statx mount id, so bind mounts of the same filesystem count)
//! are never entered unless `cross_mounts`: LOOKUP of such a mountpoint gives
//! EACCES and READDIRPLUS lists it without handle or attributes.
//!
//! # File handles
//! See `handle.rs` for the byte layout; every handle carries a keyed MAC, so
//! only handles this server issued (with the same persisted key) decode.
//!
//! * Kernel mode (needs CAP_DAC_READ_SEARCH): the body is the kernel's own
//!   name_to_handle_at handle and resolution is open_by_handle_at on the
//!   export root's mount. It survives a server restart and any rename, done
//!   through the server or anywhere else, and goes stale exactly when the
//!   inode is freed (the filesystem's generation number protects against
//!   inode reuse). The kernel accepts any object of the filesystem, so the
//!   result is checked to be inside the export: directories by walking ".."
//!   up to the export root; other objects by re-walking their remembered
//!   location (see Path mode) or, failing that, a bounded scan of the export.
//!   Positive checks are cached for a few seconds (`VERIFY_TTL`).
//! * Path mode (no privilege needed): the body is (filesystem, inode,
//!   generation from FS_IOC_GETVERSION or 0 where it cannot be read).
//!   Resolution re-walks the object's location component by component from
//!   the export root (O_NOFOLLOW, each step checked by dev and inode) using a
//!   bounded map inode -> (parent inode, name) learned from LOOKUP, READDIRPLUS,
//!   CREATE, RENAME and the like. On a miss (after a restart, or a rename done
//!   outside the server) a bounded depth-first scan of the export
//!   (`handle_scan_limit` entries) refinds the object and refills the map; an
//!   object not found is Stale, and that answer is cached briefly
//!   (`NEGATIVE_TTL`) so stale handles cannot make the server rescan
//!   continuously. It survives restarts and renames anywhere inside the export;
//!   it fails (Stale) for objects deeper than the scan limit reaches, and with
//!   generation 0 (unreadable files) an inode number reused for another object
//!   at a scanned location would be taken for the old one.
//! * The export root's handle is always a Path-kind handle, so it stays valid
//!   across a change of mode.

mod cache;
mod creds;
mod handle;
mod sys;

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

pub use creds::reset_thread_creds;

use crate::{
    Attr, Backend, CreateHow, Created, Cred, DirEntry, DirPage, Fh, FsError, FsInfo, FsResult,
    FsStat, NodeKind, PathConf, PreAttr, SetAttr, SetTime, Stable, Time, Wcc,
};
use cache::{LocMap, TtlSet};
use handle::{Decoded, Sealer};
use sys::{Key, Stat};

/// How file handles are made and resolved (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandleMode {
    /// Kernel if open_by_handle_at works on the export root, else Path.
    Auto,
    Kernel,
    Path,
}

#[derive(Clone)]
pub struct LocalOptions {
    pub handle_mode: HandleMode,
    /// Secret for handle MACs; persist it so handles survive restarts.
    pub handle_key: [u8; 32],
    /// Enter other filesystems mounted inside the export (default false).
    pub cross_mounts: bool,
    /// Run each operation with the caller's fsuid/fsgid/groups (needs root).
    pub act_as_caller: bool,
    /// Bound of the inode -> location map.
    pub path_cache_entries: usize,
    /// Bound on directory entries one handle-recovery scan visits.
    pub handle_scan_limit: usize,
}

/// Debug output leaves the secret key out (it ends up in logs).
impl std::fmt::Debug for LocalOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalOptions")
            .field("handle_mode", &self.handle_mode)
            .field("handle_key", &"<redacted>")
            .field("cross_mounts", &self.cross_mounts)
            .field("act_as_caller", &self.act_as_caller)
            .field("path_cache_entries", &self.path_cache_entries)
            .field("handle_scan_limit", &self.handle_scan_limit)
            .finish()
    }
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            handle_mode: HandleMode::Auto,
            handle_key: [0; 32],
            cross_mounts: false,
            // SAFETY: geteuid cannot fail.
            act_as_caller: unsafe { libc::geteuid() } == 0,
            path_cache_entries: 65536,
            handle_scan_limit: 1_000_000,
        }
    }
}

/// Longest chain of directories followed when walking or verifying a path.
const MAX_DEPTH: usize = 2048;
/// Extra open_by_handle_at attempts after a transient ENOMEM.
const ENOMEM_RETRIES: u32 = 3;

/// Deepest directory a recovery scan descends into (one open fd per level).
const MAX_SCAN_DEPTH: usize = 256;
/// getdents buffer of each scan level.
const SCAN_BUF: usize = 8 * 1024;
/// How long a kernel-mode "inside the export" check is trusted.
const VERIFY_TTL: Duration = Duration::from_secs(5);
const VERIFY_CAP: usize = 16 * 1024;
/// How long "not found by a scan" is trusted.
const NEGATIVE_TTL: Duration = Duration::from_secs(10);
const NEGATIVE_CAP: usize = 4096;
/// Largest READ served in one call (the server's max_io is smaller).
const MAX_READ: u32 = 4 << 20;
/// Largest entry count one READDIR returns (bounds the page's memory).
const MAX_DIR_ENTRIES: usize = 64 * 1024;
const NAME_MAX: usize = 255;
const SYMLINK_MAX: usize = 4095;

const ACCESS3_READ: u32 = 0x1;
const ACCESS3_LOOKUP: u32 = 0x2;
const ACCESS3_MODIFY: u32 = 0x4;
const ACCESS3_EXTEND: u32 = 0x8;
const ACCESS3_DELETE: u32 = 0x10;
const ACCESS3_EXECUTE: u32 = 0x20;

fn errno(e: i32) -> FsError {
    FsError::Errno(e)
}

fn io_errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// An fd that is either the export root (borrowed) or owned by the call.
enum FdRef<'a> {
    Borrowed(BorrowedFd<'a>),
    Owned(OwnedFd),
}

/// A resolved object: an O_PATH fd and its attributes at resolution time.
struct Obj<'a> {
    fd: FdRef<'a>,
    st: Stat,
}

impl Obj<'_> {
    fn raw(&self) -> RawFd {
        match &self.fd {
            FdRef::Borrowed(b) => b.as_raw_fd(),
            FdRef::Owned(o) => o.as_raw_fd(),
        }
    }
}

/// A directory exported from the local filesystem.
pub struct LocalFs {
    root: OwnedFd,
    /// The export root's path as the kernel reports it for `root`, with a
    /// trailing '/': the prefix of every object inside the export.
    root_prefix: Vec<u8>,
    root_key: Key,
    root_mnt: u64,
    root_fh: Fh,
    export_id: u32,
    sealer: Sealer,
    mode: HandleMode,
    opts: LocalOptions,
    server_uid: u32,
    server_gid: u32,
    locs: LocMap,
    verified: TtlSet<Key>,
    negative: TtlSet<(Key, u32)>,
    /// One recovery scan at a time; others wait and then find its results.
    scan_lock: Mutex<()>,
}

/// Checks a name from the client. `dots` = whether "." and ".." are allowed.
fn check_name(name: &[u8], dots: bool) -> FsResult<CString> {
    if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
        return Err(errno(libc::EINVAL));
    }
    if name.len() > NAME_MAX {
        return Err(errno(libc::ENAMETOOLONG));
    }
    if !dots && (name == b"." || name == b"..") {
        return Err(errno(libc::EACCES));
    }
    sys::cstr(name).map_err(FsError::from)
}

impl LocalFs {
    /// Opens `root` for export under `export_id`.
    pub fn open(root: &Path, export_id: u32, opts: LocalOptions) -> io::Result<LocalFs> {
        let c = sys::cstr(root.as_os_str().as_bytes())?;
        // Not O_PATH: open_by_handle_at refuses an O_PATH mount fd.
        let rootfd = sys::openat(libc::AT_FDCWD, &c, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        let st = sys::fstat(rootfd.as_raw_fd())?;
        // SAFETY: geteuid/getegid cannot fail.
        let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
        if opts.act_as_caller && euid != 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "act_as_caller needs the server to run as root",
            ));
        }
        creds::capture_process_groups();
        // Data access reopens O_PATH fds through /proc/self/fd.
        let probe = sys::reopen(rootfd.as_raw_fd(), libc::O_RDONLY | libc::O_DIRECTORY)
            .map_err(|e| io::Error::new(e.kind(), format!("/proc/self/fd unusable: {e}")))?;
        let root_gen = sys::generation(probe.as_raw_fd()).unwrap_or(0);
        drop(probe);
        let kernel_ok = probe_kernel(rootfd.as_raw_fd(), &st);
        let mode = match opts.handle_mode {
            HandleMode::Auto if kernel_ok => HandleMode::Kernel,
            HandleMode::Auto => HandleMode::Path,
            HandleMode::Kernel if !kernel_ok => {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "kernel file handles unavailable (needs CAP_DAC_READ_SEARCH)",
                ))
            }
            m => m,
        };
        let sealer = Sealer::new(&opts.handle_key, export_id);
        let root_fh = sealer.seal_path(0, st.ino, root_gen);
        let mut root_prefix = sys::fd_path(rootfd.as_raw_fd())?;
        if !root_prefix.ends_with(b"/") {
            root_prefix.push(b'/');
        }
        Ok(LocalFs {
            root: rootfd,
            root_prefix,
            root_key: st.key(),
            root_mnt: st.mnt_id,
            root_fh,
            export_id,
            sealer,
            mode,
            server_uid: euid,
            server_gid: egid,
            locs: LocMap::new(opts.path_cache_entries),
            verified: TtlSet::new(VERIFY_CAP, VERIFY_TTL),
            negative: TtlSet::new(NEGATIVE_CAP, NEGATIVE_TTL),
            scan_lock: Mutex::new(()),
            opts,
        })
    }

    /// The handle mode in use (never Auto).
    pub fn handle_mode(&self) -> HandleMode {
        self.mode
    }

    /// A handle for any path, inside the export or not, made with this
    /// export's key. For tests of confinement only: the server never calls it.
    #[doc(hidden)]
    pub fn handle_for_path_unchecked(&self, path: &Path) -> io::Result<Fh> {
        let c = sys::cstr(path.as_os_str().as_bytes())?;
        let fd = sys::open_path(libc::AT_FDCWD, &c)?;
        let st = sys::fstat(fd.as_raw_fd())?;
        self.make_fh(fd.as_raw_fd(), &st).map_err(|e| match e {
            FsError::Errno(n) => io::Error::from_raw_os_error(n),
            _ => io::Error::other("handle"),
        })
    }

    fn root_obj(&self) -> FsResult<Obj<'_>> {
        let st = sys::fstat(self.root.as_raw_fd())?;
        Ok(Obj {
            fd: FdRef::Borrowed(self.root.as_fd_borrowed()),
            st,
        })
    }

    fn srv(&self) -> FsResult<()> {
        creds::become_server(self.server_uid, self.server_gid)
    }

    fn usr(&self, cred: &Cred) -> FsResult<()> {
        if self.opts.act_as_caller {
            creds::become_caller(cred)
        } else {
            self.srv()
        }
    }

    fn on_export_fs(&self, st: &Stat) -> bool {
        self.opts.cross_mounts || st.mnt_id == self.root_mnt
    }

    fn attr(&self, st: &Stat) -> Attr {
        let fsid = if st.dev == self.root_key.dev {
            u64::from(self.export_id)
        } else {
            (u64::from(self.export_id) << 32) ^ st.dev ^ (1 << 63)
        };
        let fileid = st.ino;
        Attr {
            ftype: st.ftype(),
            mode: st.mode & 0o7777,
            nlink: st.nlink,
            uid: st.uid,
            gid: st.gid,
            size: st.size,
            used: st.blocks.saturating_mul(512),
            rdev: st.rdev,
            fsid,
            fileid,
            atime: st.atime,
            mtime: st.mtime,
            ctime: st.ctime,
        }
    }

    fn post(&self, fd: RawFd) -> Option<Attr> {
        sys::fstat(fd).ok().map(|s| self.attr(&s))
    }

    fn wcc(&self, before: &Stat, fd: RawFd) -> Wcc {
        Wcc {
            before: Some(PreAttr {
                size: before.size,
                mtime: before.mtime,
                ctime: before.ctime,
            }),
            after: self.post(fd),
        }
    }

    // ---- handles ----

    /// Generation of a regular file or directory (server credentials).
    fn gen_of(&self, fd: RawFd, st: &Stat) -> Option<u32> {
        if !(st.is_reg() || st.is_dir()) {
            return None;
        }
        let f = sys::reopen(fd, libc::O_RDONLY | libc::O_NONBLOCK).ok()?;
        sys::generation(f.as_raw_fd())
    }

    fn path_fh(&self, st: &Stat, gen: u32) -> Fh {
        let fs = if st.dev == self.root_key.dev {
            0
        } else {
            st.dev
        };
        self.sealer.seal_path(fs, st.ino, gen)
    }

    /// The handle of an object held by an fd (server credentials).
    fn make_fh(&self, fd: RawFd, st: &Stat) -> FsResult<Fh> {
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
    fn make_fh_at(&self, dir: RawFd, name: &CString, st: &Stat) -> Option<Fh> {
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
    fn resolve(&self, fh: &Fh) -> FsResult<Obj<'_>> {
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

    /// Opens a regular file's data as the caller (READ, WRITE): EISDIR for a
    /// directory, EINVAL for anything else that is not a regular file.
    /// Returns the resolved object (its attributes before the call, for
    /// wcc) and the open file.
    fn open_regular(
        &self,
        cred: &Cred,
        fh: &Fh,
        flags: libc::c_int,
    ) -> FsResult<(Obj<'_>, OwnedFd)> {
        self.srv()?;
        let o = self.resolve(fh)?;
        if o.st.is_dir() {
            return Err(errno(libc::EISDIR));
        }
        if !o.st.is_reg() {
            return Err(errno(libc::EINVAL));
        }
        self.usr(cred)?;
        let f = self.open_data(cred, &o, flags)?;
        Ok((o, f))
    }

    /// open_by_handle_at on the export's mount. An object freed a moment ago
    /// can make the kernel answer ENOMEM instead of ESTALE while its inode
    /// is being evicted (seen in 1 of 10 parallel test runs); asking again
    /// after a short wait gets the settled answer. A real shortage stays ENOMEM (JUKEBOX to the
    /// client, which retries); a missing object is Stale.
    fn open_kernel_handle(&self, htype: i32, bytes: &[u8]) -> FsResult<OwnedFd> {
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

    /// Whether `o` has generation `want` (0 = not known when issued).
    fn gen_ok(&self, o: &Obj<'_>, want: u32) -> bool {
        want == 0 || self.gen_of(o.raw(), &o.st).is_none_or(|g| g == want)
    }

    /// Finds an object by identity: remembered location, else a scan.
    fn find(&self, key: Key, gen: u32) -> FsResult<Obj<'_>> {
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
    fn walk_chain(&self, key: Key) -> FsResult<Option<Obj<'_>>> {
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
    fn scan(&self, target: Key, gen: u32) -> FsResult<Option<Obj<'_>>> {
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
    fn dir(&self, fh: &Fh) -> FsResult<Obj<'_>> {
        let o = self.resolve(fh)?;
        if !o.st.is_dir() {
            return Err(errno(libc::ENOTDIR));
        }
        Ok(o)
    }

    /// Opens a regular file's data as the caller; if that is refused and the
    /// caller owns the file (or, for reading, may execute it), opens it with
    /// the server's credentials, as knfsd's owner override does (a client
    /// may write a file it created read-only: permissions are checked at
    /// open time on the client).
    fn open_data(&self, cred: &Cred, o: &Obj<'_>, flags: libc::c_int) -> FsResult<OwnedFd> {
        match sys::reopen(o.raw(), flags) {
            Ok(f) => Ok(f),
            Err(e) if io_errno(&e) == libc::EACCES && self.opts.act_as_caller => {
                let reading = flags & libc::O_ACCMODE == libc::O_RDONLY;
                let may_exec = access_bits(&o.st, cred, ACCESS3_EXECUTE) != 0;
                if o.st.uid != cred.uid && !(reading && may_exec) {
                    return Err(e.into());
                }
                self.srv()?;
                let r = sys::reopen(o.raw(), flags);
                self.usr(cred)?;
                Ok(r?)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Applies a sattr3 to an object (caller credentials).
    fn apply_set(&self, cred: &Cred, o: &Obj<'_>, set: &SetAttr) -> FsResult<()> {
        let fd = o.raw();
        if set.uid.is_some() || set.gid.is_some() {
            sys::fchownat_empty(fd, set.uid, set.gid)?;
        }
        // knfsd ignores mode changes on symlinks (Linux has no lchmod).
        if let Some(m) = set.mode {
            if !o.st.is_lnk() {
                sys::fchmod_path(fd, m & 0o7777)?;
            }
        }
        if let Some(size) = set.size {
            if o.st.is_dir() {
                return Err(errno(libc::EISDIR));
            }
            if !o.st.is_reg() {
                return Err(errno(libc::EINVAL));
            }
            let len = i64::try_from(size).map_err(|_| errno(libc::EFBIG))?;
            let f = self.open_data(cred, o, libc::O_WRONLY)?;
            // SAFETY: plain ftruncate on an owned fd.
            sys::cvt(unsafe { libc::ftruncate(f.as_raw_fd(), len) })?;
        }
        if set.atime != SetTime::DontChange || set.mtime != SetTime::DontChange {
            sys::set_times(fd, &set.atime, &set.mtime)?;
        }
        Ok(())
    }

    /// Finishes a create-type call: stat, fix the mode the process umask
    /// changed, apply the rest of `set`, make the handle, remember the name.
    fn finish_create(
        &self,
        cred: &Cred,
        dir: &Obj<'_>,
        name: &[u8],
        c: &CString,
        set: &SetAttr,
    ) -> FsResult<Created> {
        let fd = sys::open_path(dir.raw(), c)?;
        let st = sys::fstat(fd.as_raw_fd())?;
        let o = Obj {
            fd: FdRef::Owned(fd),
            st,
        };
        let mut set = set.clone();
        // The process umask only clears permission bits; keep a setgid bit a
        // new directory inherited (as knfsd, which creates without umask).
        if let Some(m) = set.mode {
            let inherited = if st.is_dir() {
                st.mode & libc::S_ISGID
            } else {
                0
            };
            let want = (m & 0o7777) | inherited;
            set.mode = (want != st.mode & 0o7777).then_some(want);
        }
        set.uid = set.uid.filter(|&u| u != st.uid);
        set.gid = set.gid.filter(|&g| g != st.gid);
        if set != SetAttr::default() {
            self.apply_set(cred, &o, &set)?;
        }
        self.created(dir, name, &o)
    }

    fn created(&self, dir: &Obj<'_>, name: &[u8], o: &Obj<'_>) -> FsResult<Created> {
        self.srv()?;
        let st = sys::fstat(o.raw())?;
        let fh = self.make_fh(o.raw(), &st)?;
        self.locs.insert(st.key(), dir.st.key(), name);
        Ok(Created {
            fh,
            attr: self.attr(&st),
            dir: self.wcc(&dir.st, dir.raw()),
        })
    }

    /// Entry handle and attributes for READDIRPLUS (server credentials).
    fn plus_entry(&self, dir: &Obj<'_>, name: &[u8]) -> Option<(Fh, Attr)> {
        if name == b"." || (name == b".." && dir.st.key() == self.root_key) {
            let st = sys::fstat(dir.raw()).ok()?;
            let fh = self.make_fh(dir.raw(), &st).ok()?;
            return Some((fh, self.attr(&st)));
        }
        let c = sys::cstr(name).ok()?;
        let st = sys::statx_at(dir.raw(), &c, 0).ok()?;
        if !self.on_export_fs(&st) {
            return None;
        }
        let fh = self.make_fh_at(dir.raw(), &c, &st)?;
        if name != b".." {
            self.locs.insert(st.key(), dir.st.key(), name);
        }
        Some((fh, self.attr(&st)))
    }
}

/// Whether kernel handles work on this export root.
fn probe_kernel(root: RawFd, st: &Stat) -> bool {
    let Ok((h, _)) = sys::name_to_handle(root, sys::EMPTY, libc::AT_EMPTY_PATH) else {
        return false;
    };
    if h.bytes().len() > handle::MAX_KERNEL_BYTES || u8::try_from(h.handle_type).is_err() {
        return false;
    }
    let Ok(fd) = sys::open_by_handle(root, h.handle_type, h.bytes(), libc::O_PATH) else {
        return false;
    };
    sys::fstat(fd.as_raw_fd()).is_ok_and(|s| s.key() == st.key())
}

/// RFC 1813 ACCESS3 bits `cred` holds on an object with `st`, from the mode
/// bits as knfsd maps them (directories: READ=r, LOOKUP=x, MODIFY/EXTEND/
/// DELETE=w+x; others: READ=r, MODIFY/EXTEND=w, EXECUTE=x). Root gets all
/// but EXECUTE on a non-directory with no x bit at all.
fn access_bits(st: &Stat, cred: &Cred, want: u32) -> u32 {
    let dir = st.is_dir();
    let all = if dir {
        ACCESS3_READ | ACCESS3_LOOKUP | ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE
    } else {
        ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_EXECUTE
    };
    if cred.uid == 0 {
        let mut g = all;
        if !dir && st.mode & 0o111 == 0 {
            g &= !ACCESS3_EXECUTE;
        }
        return g & want;
    }
    let perm = if st.uid == cred.uid {
        (st.mode >> 6) & 7
    } else if st.gid == cred.gid || cred.gids.contains(&st.gid) {
        (st.mode >> 3) & 7
    } else {
        st.mode & 7
    };
    let (r, w, x) = (perm & 4 != 0, perm & 2 != 0, perm & 1 != 0);
    let mut g = 0;
    if r {
        g |= ACCESS3_READ;
    }
    if dir {
        if x {
            g |= ACCESS3_LOOKUP;
        }
        if w && x {
            g |= ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE;
        }
    } else {
        if w {
            g |= ACCESS3_MODIFY | ACCESS3_EXTEND;
        }
        if x {
            g |= ACCESS3_EXECUTE;
        }
    }
    g & want
}

trait AsFdBorrowed {
    fn as_fd_borrowed(&self) -> BorrowedFd<'_>;
}

impl AsFdBorrowed for OwnedFd {
    fn as_fd_borrowed(&self) -> BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(self)
    }
}

impl Backend for LocalFs {
    fn root(&self) -> Fh {
        self.root_fh.clone()
    }

    fn getattr(&self, _cred: &Cred, fh: &Fh) -> FsResult<Attr> {
        self.srv()?;
        let o = self.resolve(fh)?;
        Ok(self.attr(&o.st))
    }

    fn setattr(&self, cred: &Cred, fh: &Fh, set: &SetAttr, guard: Option<Time>) -> FsResult<Wcc> {
        self.srv()?;
        let o = self.resolve(fh)?;
        // RFC 1813 §3.3.2: the guard is checked against the current ctime.
        if guard.is_some_and(|g| g != o.st.ctime) {
            return Err(FsError::NotSync);
        }
        self.usr(cred)?;
        self.apply_set(cred, &o, set)?;
        Ok(self.wcc(&o.st, o.raw()))
    }

    fn lookup(&self, cred: &Cred, dir: &Fh, name: &[u8]) -> FsResult<(Fh, Attr, Option<Attr>)> {
        let c = check_name(name, true)?;
        self.srv()?;
        let d = self.dir(dir)?;
        self.usr(cred)?;
        // Every lookup needs search permission on the directory; opening
        // "." through it checks that for "." and ".." too.
        let fd = if name == b".." && d.st.key() == self.root_key {
            sys::open_path(d.raw(), sys::DOT)?
        } else if name == b".." {
            sys::openat(d.raw(), sys::DOTDOT, libc::O_PATH | libc::O_DIRECTORY, 0)?
        } else {
            sys::open_path(d.raw(), &c)?
        };
        let st = sys::fstat(fd.as_raw_fd())?;
        if !self.on_export_fs(&st) {
            return Err(errno(libc::EACCES));
        }
        self.srv()?;
        let fh = self.make_fh(fd.as_raw_fd(), &st)?;
        if name != b"." && name != b".." {
            self.locs.insert(st.key(), d.st.key(), name);
        }
        Ok((fh, self.attr(&st), self.post(d.raw())))
    }

    fn access(&self, cred: &Cred, fh: &Fh, want: u32) -> FsResult<(u32, Attr)> {
        self.srv()?;
        let o = self.resolve(fh)?;
        Ok((access_bits(&o.st, cred, want), self.attr(&o.st)))
    }

    fn readlink(&self, _cred: &Cred, fh: &Fh) -> FsResult<(Vec<u8>, Attr)> {
        self.srv()?;
        let o = self.resolve(fh)?;
        if !o.st.is_lnk() {
            return Err(errno(libc::EINVAL));
        }
        let target = sys::readlink_fd(o.raw())?;
        Ok((target, self.attr(&o.st)))
    }

    fn read(
        &self,
        cred: &Cred,
        fh: &Fh,
        offset: u64,
        count: u32,
        buf: &mut Vec<u8>,
    ) -> FsResult<(bool, Attr)> {
        buf.clear();
        // `resolve` (in open_regular) has just stat'ed the object: no second
        // statx before the pread.
        let (o, f) = self.open_regular(cred, fh, libc::O_RDONLY)?;
        // RFC 1813 §3.3.6: a READ at or past end of file is no data and eof,
        // whatever the offset (pread would say EINVAL above i64::MAX).
        if offset >= o.st.size {
            return Ok((true, self.attr(&o.st)));
        }
        // The kernel refuses offset + count beyond i64::MAX (EINVAL).
        let room = (i64::MAX as u64).saturating_sub(offset);
        let want = u64::from(count.min(MAX_READ)).min(room) as usize;
        let n = sys::pread_full(f.as_raw_fd(), offset, want, buf)?;
        let st = sys::fstat(f.as_raw_fd())?;
        let eof = offset.saturating_add(n as u64) >= st.size;
        Ok((eof, self.attr(&st)))
    }

    fn write(
        &self,
        cred: &Cred,
        fh: &Fh,
        offset: u64,
        data: &[u8],
        stable: Stable,
    ) -> FsResult<(u32, Stable, Wcc)> {
        if u32::try_from(data.len()).is_err() {
            return Err(errno(libc::EINVAL));
        }
        let (o, f) = self.open_regular(cred, fh, libc::O_WRONLY)?;
        let n = sys::pwrite_full(f.as_raw_fd(), offset, data)?;
        let fd = f.as_raw_fd();
        // SAFETY: plain fdatasync/fsync on an owned fd.
        match stable {
            Stable::Unstable => {}
            Stable::DataSync => {
                sys::cvt(unsafe { libc::fdatasync(fd) })?;
            }
            Stable::FileSync => {
                sys::cvt(unsafe { libc::fsync(fd) })?;
            }
        }
        Ok((n as u32, stable, self.wcc(&o.st, fd)))
    }

    fn create(&self, cred: &Cred, dir: &Fh, name: &[u8], how: &CreateHow) -> FsResult<Created> {
        let c = check_name(name, false)?;
        self.srv()?;
        let d = self.dir(dir)?;
        self.usr(cred)?;
        let mknod = |mode: u32| -> io::Result<()> {
            // SAFETY: valid C string; S_IFREG creates a regular file.
            sys::cvt(unsafe { libc::mknodat(d.raw(), c.as_ptr(), libc::S_IFREG | mode, 0) })?;
            Ok(())
        };
        match how {
            CreateHow::Unchecked(set) | CreateHow::Guarded(set) => {
                let guarded = matches!(how, CreateHow::Guarded(_));
                match mknod(set.mode.unwrap_or(0o666) & 0o7777) {
                    Ok(()) => self.finish_create(cred, &d, name, &c, set),
                    Err(e) if io_errno(&e) == libc::EEXIST && !guarded => {
                        // UNCHECKED over an existing regular file: only the
                        // size is applied, as knfsd does (RFC 1813 §3.3.8).
                        let fd = sys::open_path(d.raw(), &c)?;
                        let st = sys::fstat(fd.as_raw_fd())?;
                        if !st.is_reg() {
                            return Err(errno(libc::EEXIST));
                        }
                        let o = Obj {
                            fd: FdRef::Owned(fd),
                            st,
                        };
                        if set.size.is_some() {
                            let s = SetAttr {
                                size: set.size,
                                ..SetAttr::default()
                            };
                            self.apply_set(cred, &o, &s)?;
                        }
                        self.created(&d, name, &o)
                    }
                    Err(e) => Err(e.into()),
                }
            }
            CreateHow::Exclusive(verf) => {
                // The verifier lives in mtime/atime seconds as in knfsd (top
                // bit cleared so any filesystem can store the times).
                let vm = u32::from_be_bytes([verf[0], verf[1], verf[2], verf[3]]) & 0x7fff_ffff;
                let va = u32::from_be_bytes([verf[4], verf[5], verf[6], verf[7]]) & 0x7fff_ffff;
                match mknod(0) {
                    Ok(()) => {
                        let fd = sys::open_path(d.raw(), &c)?;
                        let t = |s: u32| {
                            SetTime::ClientTime(Time {
                                sec: i64::from(s),
                                nsec: 0,
                            })
                        };
                        if let Err(e) = sys::set_times(fd.as_raw_fd(), &t(va), &t(vm)) {
                            // SAFETY: valid C string.
                            unsafe { libc::unlinkat(d.raw(), c.as_ptr(), 0) };
                            return Err(e.into());
                        }
                        let st = sys::fstat(fd.as_raw_fd())?;
                        let o = Obj {
                            fd: FdRef::Owned(fd),
                            st,
                        };
                        self.created(&d, name, &o)
                    }
                    Err(e) if io_errno(&e) == libc::EEXIST => {
                        let fd = sys::open_path(d.raw(), &c)?;
                        let st = sys::fstat(fd.as_raw_fd())?;
                        let same = st.is_reg()
                            && st.mtime.sec == i64::from(vm)
                            && st.atime.sec == i64::from(va)
                            && st.size == 0;
                        if !same {
                            return Err(errno(libc::EEXIST));
                        }
                        let o = Obj {
                            fd: FdRef::Owned(fd),
                            st,
                        };
                        self.created(&d, name, &o)
                    }
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    fn mkdir(&self, cred: &Cred, dir: &Fh, name: &[u8], set: &SetAttr) -> FsResult<Created> {
        let c = check_name(name, false)?;
        self.srv()?;
        let d = self.dir(dir)?;
        self.usr(cred)?;
        let mode = set.mode.unwrap_or(0o777) & 0o7777;
        // SAFETY: valid C string.
        sys::cvt(unsafe { libc::mkdirat(d.raw(), c.as_ptr(), mode) })?;
        self.finish_create(cred, &d, name, &c, set)
    }

    fn symlink(
        &self,
        cred: &Cred,
        dir: &Fh,
        name: &[u8],
        target: &[u8],
        set: &SetAttr,
    ) -> FsResult<Created> {
        let c = check_name(name, false)?;
        if target.len() > SYMLINK_MAX {
            return Err(errno(libc::ENAMETOOLONG));
        }
        let t = sys::cstr(target)?;
        self.srv()?;
        let d = self.dir(dir)?;
        self.usr(cred)?;
        // SAFETY: valid C strings.
        sys::cvt(unsafe { libc::symlinkat(t.as_ptr(), d.raw(), c.as_ptr()) })?;
        let set = SetAttr {
            mode: None,
            ..set.clone()
        };
        self.finish_create(cred, &d, name, &c, &set)
    }

    fn mknod(
        &self,
        cred: &Cred,
        dir: &Fh,
        name: &[u8],
        kind: NodeKind,
        set: &SetAttr,
    ) -> FsResult<Created> {
        let c = check_name(name, false)?;
        let (fmt, dev) = match kind {
            NodeKind::Fifo => (libc::S_IFIFO, 0),
            NodeKind::Socket => (libc::S_IFSOCK, 0),
            NodeKind::Block { major, minor } => (libc::S_IFBLK, sys::makedev(major, minor)),
            NodeKind::Char { major, minor } => (libc::S_IFCHR, sys::makedev(major, minor)),
        };
        self.srv()?;
        let d = self.dir(dir)?;
        self.usr(cred)?;
        let mode = set.mode.unwrap_or(0o666) & 0o7777;
        // SAFETY: valid C string.
        sys::cvt(unsafe { libc::mknodat(d.raw(), c.as_ptr(), fmt | mode, dev) })?;
        self.finish_create(cred, &d, name, &c, set)
    }

    fn remove(&self, cred: &Cred, dir: &Fh, name: &[u8]) -> FsResult<Wcc> {
        let c = check_name(name, false)?;
        self.srv()?;
        let d = self.dir(dir)?;
        self.usr(cred)?;
        let st = sys::statx_at(d.raw(), &c, 0)?;
        if st.is_dir() {
            return Err(errno(libc::EISDIR));
        }
        // SAFETY: valid C string.
        sys::cvt(unsafe { libc::unlinkat(d.raw(), c.as_ptr(), 0) })?;
        self.locs.remove_at(&st.key(), &d.st.key(), name);
        Ok(self.wcc(&d.st, d.raw()))
    }

    fn rmdir(&self, cred: &Cred, dir: &Fh, name: &[u8]) -> FsResult<Wcc> {
        let c = check_name(name, false)?;
        self.srv()?;
        let d = self.dir(dir)?;
        self.usr(cred)?;
        let st = sys::statx_at(d.raw(), &c, 0)?;
        if !st.is_dir() {
            return Err(errno(libc::ENOTDIR));
        }
        // SAFETY: valid C string.
        sys::cvt(unsafe { libc::unlinkat(d.raw(), c.as_ptr(), libc::AT_REMOVEDIR) })?;
        self.locs.remove_at(&st.key(), &d.st.key(), name);
        self.verified.remove(&st.key());
        Ok(self.wcc(&d.st, d.raw()))
    }

    fn rename(
        &self,
        cred: &Cred,
        from_dir: &Fh,
        from: &[u8],
        to_dir: &Fh,
        to: &[u8],
    ) -> FsResult<(Wcc, Wcc)> {
        let cf = check_name(from, false)?;
        let ct = check_name(to, false)?;
        self.srv()?;
        let d1 = self.dir(from_dir)?;
        let d2 = self.dir(to_dir)?;
        self.usr(cred)?;
        let moved = sys::statx_at(d1.raw(), &cf, 0)?;
        let replaced = sys::statx_at(d2.raw(), &ct, 0).ok();
        // SAFETY: valid C strings. Renaming a name onto a link of the same
        // inode is a successful no-op in the kernel, as POSIX asks.
        sys::cvt(unsafe { libc::renameat(d1.raw(), cf.as_ptr(), d2.raw(), ct.as_ptr()) })?;
        if let Some(r) = replaced {
            if r.key() != moved.key() {
                self.locs.remove_at(&r.key(), &d2.st.key(), to);
                self.verified.remove(&r.key());
            }
        }
        self.locs.insert(moved.key(), d2.st.key(), to);
        Ok((self.wcc(&d1.st, d1.raw()), self.wcc(&d2.st, d2.raw())))
    }

    fn link(&self, cred: &Cred, file: &Fh, dir: &Fh, name: &[u8]) -> FsResult<(Attr, Wcc)> {
        let c = check_name(name, false)?;
        self.srv()?;
        let f = self.resolve(file)?;
        if f.st.is_dir() {
            return Err(errno(libc::EISDIR));
        }
        let d = self.dir(dir)?;
        self.usr(cred)?;
        // linkat(fd, "", AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH; the /proc
        // magic link does the same for any caller.
        let src = sys::cstr(format!("/proc/self/fd/{}", f.raw()).as_bytes())?;
        // SAFETY: valid C strings.
        sys::cvt(unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                src.as_ptr(),
                d.raw(),
                c.as_ptr(),
                libc::AT_SYMLINK_FOLLOW,
            )
        })?;
        let st = sys::fstat(f.raw())?;
        Ok((self.attr(&st), self.wcc(&d.st, d.raw())))
    }

    fn readdir(
        &self,
        cred: &Cred,
        dir: &Fh,
        cookie: u64,
        verifier: [u8; 8],
        max_entries: usize,
        plus: bool,
    ) -> FsResult<DirPage> {
        self.srv()?;
        let d = self.dir(dir)?;
        // Cookies are getdents offsets; on ext4 (hash offsets) they stay
        // valid across changes to the directory, so the verifier only names
        // the directory (a keyed hash of its handle) and never changes. An
        // all-zero verifier is accepted with any cookie (a client that kept
        // none, e.g. after its own restart).
        let verf = self.sealer.cookie_verifier(&dir.0);
        if cookie != 0 && verifier != verf && verifier != [0; 8] {
            return Err(FsError::BadCookie);
        }
        self.usr(cred)?;
        let rfd = sys::openat(d.raw(), sys::DOT, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        let mut rd = sys::DirReader::new(rfd, sys::DIR_BUF);
        if cookie != 0 {
            rd.seek(cookie).map_err(|_| FsError::BadCookie)?;
        }
        let max = max_entries.min(MAX_DIR_ENTRIES);
        let mut raw = Vec::with_capacity(max.min(1024));
        let eof = loop {
            if raw.len() >= max {
                break rd.next_entry()?.is_none();
            }
            match rd.next_entry()? {
                Some(e) => raw.push(e),
                None => break true,
            }
        };
        drop(rd);
        if plus {
            self.srv()?;
        }
        let at_root = d.st.key() == self.root_key;
        let entries = raw
            .into_iter()
            .map(|e| {
                let fileid = if e.name == b".." && at_root {
                    self.root_key.ino
                } else {
                    e.ino
                };
                let plus = if plus {
                    self.plus_entry(&d, &e.name)
                } else {
                    None
                };
                DirEntry {
                    fileid,
                    name: e.name,
                    cookie: e.off as u64,
                    plus,
                }
            })
            .collect();
        Ok(DirPage {
            verifier: verf,
            entries,
            eof,
            dir_attr: self.post(d.raw()),
        })
    }

    fn fsstat(&self, _cred: &Cred, fh: &Fh) -> FsResult<(FsStat, Attr)> {
        self.srv()?;
        let o = self.resolve(fh)?;
        // SAFETY: zeroed statvfs is valid; fstatvfs fills it.
        let mut v: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: v is a valid out-pointer.
        sys::cvt(unsafe { libc::fstatvfs(o.raw(), &mut v) })?;
        let fr = v.f_frsize;
        Ok((
            FsStat {
                tbytes: v.f_blocks.saturating_mul(fr),
                fbytes: v.f_bfree.saturating_mul(fr),
                abytes: v.f_bavail.saturating_mul(fr),
                tfiles: v.f_files,
                ffiles: v.f_ffree,
                afiles: v.f_favail,
                invarsec: 0,
            },
            self.attr(&o.st),
        ))
    }

    fn fsinfo(&self, _cred: &Cred, fh: &Fh) -> FsResult<(FsInfo, Attr)> {
        self.srv()?;
        let o = self.resolve(fh)?;
        Ok((
            FsInfo {
                // The VFS limit; a filesystem's smaller one shows as EFBIG.
                maxfilesize: i64::MAX as u64,
                time_delta: Time { sec: 0, nsec: 1 },
                link: true,
                symlink: true,
                homogeneous: true,
                cansettime: true,
            },
            self.attr(&o.st),
        ))
    }

    fn pathconf(&self, _cred: &Cred, fh: &Fh) -> FsResult<(PathConf, Attr)> {
        self.srv()?;
        let o = self.resolve(fh)?;
        // SAFETY: zeroed statvfs is valid; fstatvfs fills it.
        let mut v: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: v is a valid out-pointer.
        sys::cvt(unsafe { libc::fstatvfs(o.raw(), &mut v) })?;
        // SAFETY: fpathconf only reads the fd (works on O_PATH via fstatfs).
        let linkmax = unsafe { libc::fpathconf(o.raw(), libc::_PC_LINK_MAX) };
        Ok((
            PathConf {
                linkmax: u32::try_from(linkmax).unwrap_or(u32::MAX),
                name_max: u32::try_from(v.f_namemax).unwrap_or(NAME_MAX as u32),
                no_trunc: true,
                chown_restricted: true,
                case_insensitive: false,
                case_preserving: true,
            },
            self.attr(&o.st),
        ))
    }

    fn commit(&self, _cred: &Cred, fh: &Fh, _offset: u64, _count: u32) -> FsResult<Wcc> {
        self.srv()?;
        let o = self.resolve(fh)?;
        if !(o.st.is_reg() || o.st.is_dir()) {
            return Err(errno(libc::EINVAL));
        }
        // The whole file is flushed (allowed by RFC 1813 §3.3.21); as the
        // server, since flushing exposes nothing.
        let f = sys::reopen(o.raw(), libc::O_RDONLY | libc::O_NONBLOCK)?;
        // SAFETY: plain fsync on an owned fd.
        sys::cvt(unsafe { libc::fsync(f.as_raw_fd()) })?;
        Ok(self.wcc(&o.st, f.as_raw_fd()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(mode: u32, uid: u32, gid: u32) -> Stat {
        Stat {
            mode,
            nlink: 1,
            uid,
            gid,
            size: 0,
            blocks: 0,
            rdev: (0, 0),
            dev: 1,
            ino: 2,
            mnt_id: 3,
            atime: Time::default(),
            mtime: Time::default(),
            ctime: Time::default(),
        }
    }

    fn cred(uid: u32, gid: u32, gids: &[u32]) -> Cred {
        Cred {
            uid,
            gid,
            gids: gids.to_vec(),
        }
    }

    #[test]
    fn access_mapping() {
        let all = 0x3f;
        let f = st(libc::S_IFREG | 0o640, 10, 20);
        assert_eq!(access_bits(&f, &cred(10, 1, &[]), all), 0x1 | 0x4 | 0x8);
        assert_eq!(access_bits(&f, &cred(11, 20, &[]), all), 0x1);
        assert_eq!(access_bits(&f, &cred(11, 1, &[20]), all), 0x1);
        assert_eq!(access_bits(&f, &cred(11, 1, &[]), all), 0);
        assert_eq!(access_bits(&f, &cred(0, 0, &[]), all), 0x1 | 0x4 | 0x8);
        let x = st(libc::S_IFREG | 0o701, 10, 20);
        assert_eq!(
            access_bits(&x, &cred(0, 0, &[]), all),
            0x1 | 0x4 | 0x8 | 0x20
        );
        assert_eq!(access_bits(&x, &cred(12, 1, &[]), all), 0x20);
        let d = st(libc::S_IFDIR | 0o750, 10, 20);
        assert_eq!(access_bits(&d, &cred(10, 1, &[]), all), 0x1f);
        assert_eq!(access_bits(&d, &cred(11, 20, &[]), all), 0x3);
        assert_eq!(access_bits(&d, &cred(0, 0, &[]), all), 0x1f);
        assert_eq!(access_bits(&d, &cred(10, 1, &[]), 0x2), 0x2);
    }

    #[test]
    fn names() {
        assert_eq!(check_name(b"", true).err(), Some(errno(libc::EINVAL)));
        assert_eq!(check_name(b"a/b", true).err(), Some(errno(libc::EINVAL)));
        assert_eq!(check_name(b"a\0b", true).err(), Some(errno(libc::EINVAL)));
        assert_eq!(
            check_name(&[b'a'; 256], true).err(),
            Some(errno(libc::ENAMETOOLONG))
        );
        assert!(check_name(&[b'a'; 255], true).is_ok());
        assert!(check_name(b"..", true).is_ok());
        assert_eq!(check_name(b"..", false).err(), Some(errno(libc::EACCES)));
        assert_eq!(check_name(b".", false).err(), Some(errno(libc::EACCES)));
    }
}
