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
//! See `crate::handle` for the byte layout; every handle carries a keyed MAC, so
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
//!
//! # Layout
//! `resolve.rs` turns handles into objects and is the one place confinement
//! is decided; `attr.rs`, `dir.rs`, `data.rs` and `namespace.rs` hold the
//! procedures by area (`xattr.rs` the `user.` extended attributes;
//! `backend.rs`, the `Backend` impl, names the file
//! of each); `options.rs` holds what an export may be set to; `perm.rs`
//! decides what a caller may do; `creds.rs` switches identities;
//! `sys.rs` is the thin syscall layer; `khandle.rs` reads the inode inside a
//! kernel handle; `crate::handle` the handle bytes and MAC.

mod attr;
mod backend;
mod behind;
mod commit;
mod creds;
mod data;
mod dir;
mod files;
mod flusher;
mod journal;
mod khandle;
mod lock;
mod locmap;
mod namespace;
mod objects;
mod options;
mod perm;
mod resolve;
mod scan;
mod space;
pub(crate) mod sys;
mod sys42;
mod xattr;

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

pub use creds::reset_thread_creds;
pub use options::{
    HandleMode, LocalOptions, DEFAULT_CACHE_FDS, DEFAULT_FLUSH_DELAY, DEFAULT_OWED_WRITEBACK_BYTES,
    DEFAULT_WRITE_BEHIND_BYTES,
};

use crate::access::NAME_MAX;
use crate::cache::{Caches, GenMap, TtlSet};
use crate::durable::Committer;
use crate::handle::{self, Sealer};
use crate::limits::local::{
    ENOMEM_RETRIES, MAX_DEPTH, MAX_DIR_ENTRIES, MAX_READ, NEGATIVE_CAP, NEGATIVE_TTL, SYMLINK_MAX,
};
use crate::{Attr, Call, Cred, Fh, FsError, FsResult, PreAttr, Wcc, WriteVerifier};
use files::FileCache;
use locmap::LocMap;
use objects::{ObjCache, Object};
use scan::{ScanLimits, Scanner};
use sys::{Key, Stat};

/// Runs `step`, which almost never sleeps; for a call inline on an event
/// loop it is a speculation (`Call::watch`): a step that slept is
/// recorded, and quiets the loop's speculation for a while.
fn speculating<T>(call: &Call<'_>, step: impl FnOnce() -> T) -> T {
    call.watch(sys::thread_sleeps, step)
}

impl LocalFs {
    /// A change is about to be made (handles resolved, nothing changed
    /// yet). On an event loop (`crate::inline`) it is made there only on an
    /// `async` export, when the loop may change, and when it frees no
    /// blocks (`frees`: a size set, which may truncate; a large file's last
    /// link removed or renamed over), which may take milliseconds; else
    /// given up here. From here the call runs to its end, watched as one
    /// step.
    fn changing(&self, call: &Call<'_>, frees: bool) -> FsResult<()> {
        if !call.inline() {
            return Ok(());
        }
        if self.opts.sync || frees || !call.may_change() {
            return Err(call.give_up());
        }
        call.run_to_end(sys::thread_sleeps);
        Ok(())
    }
}

fn errno(e: i32) -> FsError {
    FsError::Errno(e)
}

fn io_errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// A resolved object's descriptor: the export root's (borrowed), one the
/// handle cache holds, or one this call owns.
enum FdRef<'a> {
    Borrowed(BorrowedFd<'a>),
    Cached(Arc<Object>),
    Owned(OwnedFd),
}

/// A resolved object: an O_PATH fd, its attributes at resolution time, and
/// when it was last proven inside the export (objects::FOREVER for the root
/// and whole-filesystem exports).
struct Obj<'a> {
    fd: FdRef<'a>,
    st: Stat,
    verified: u64,
}

impl Obj<'_> {
    fn raw(&self) -> RawFd {
        match &self.fd {
            FdRef::Borrowed(b) => b.as_raw_fd(),
            FdRef::Cached(o) => o.fd.as_raw_fd(),
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
    /// How the export's filesystem lays out its kernel handles.
    handle_layout: khandle::Layout,
    /// The export root is the root of its filesystem and of its mount, so
    /// every object of that mount is inside the export.
    whole_fs: bool,
    export_id: u32,
    sealer: Sealer,
    mode: HandleMode,
    opts: LocalOptions,
    server_uid: u32,
    server_gid: u32,
    epoch: Instant,
    locs: Arc<LocMap>,
    negative: TtlSet<(Key, u32)>,
    /// Objects proven inside the export, and when (`now_ms`): a verdict
    /// that outlives the object cache's descriptor, so an object the cache
    /// could not keep is not proven again (a readlink of its /proc link)
    /// at every call. Trusted for `verify_ttl`, as a cached object's.
    verdicts: GenMap<Key, u64>,
    objects: Arc<ObjCache>,
    files: Arc<FileCache>,
    scanner: Scanner,
    caches: Arc<Caches>,
    verifier: Arc<WriteVerifier>,
    /// Group commit of this export's syncs (`commit::SyncOf`).
    committer: Committer<commit::SyncOf>,
    /// The export filesystem's journal, where one commit covers every
    /// metadata change before it (`sync` exports on ext4 and XFS).
    journal: Option<Arc<journal::Journal>>,
    /// Its commit threads, for calls that owe a commit rather than wait
    /// for one (`crate::owed`).
    journal_commits: Option<Arc<crate::owed::Commits>>,
    /// EXCLUSIVE creates may make the file unnamed first (`O_TMPFILE`):
    /// not on ext4 with fast commits (`journal::fast_commits_at`).
    tmpfile_creates: bool,
    /// The filesystem takes `user.` extended attributes (`xattr::probe`).
    xattrs: bool,
    /// The largest file it takes (`attr::probe_max_file_size`).
    max_file_size: u64,
    /// The descriptors of the write leases held (`lock::lease`), by
    /// object: the open-file cache copies them rather than open the file
    /// again, which would break the lease. An entry stays after its lease
    /// went, until the next lease on the object drops the copies the
    /// cache still holds (a read-write description, which would refuse
    /// it); at `MAX_LENT` entries the dead ones go.
    leased: std::sync::Mutex<std::collections::HashMap<Key, std::sync::Weak<OwnedFd>>>,
    /// `leased`'s size, read without its lock: an open-file cache miss
    /// asks, and there is most often no write lease at all.
    leased_n: std::sync::atomic::AtomicUsize,
}

use crate::access::check_name;

/// Entries of `LocalFs::leased` past which those of leases gone are let
/// go (the lease bound, `nfs4_max_leases`, is 4096 by default).
const MAX_LENT: usize = 8192;

impl Drop for LocalFs {
    fn drop(&mut self) {
        if let Some(c) = &self.journal_commits {
            c.stop();
        }
    }
}

impl LocalFs {
    /// `fd` is a write lease's descriptor of object `key` while it lives.
    fn lend_lease(&self, key: Key, fd: std::sync::Weak<OwnedFd>) {
        let mut m = self.leased.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() >= MAX_LENT {
            m.retain(|_, w| w.strong_count() > 0);
        }
        m.insert(key, fd);
        self.leased_n
            .store(m.len(), std::sync::atomic::Ordering::Release);
    }

    /// Before a lease on `key`: the copies of an earlier write lease's
    /// descriptor the open-file cache still holds go (they would refuse
    /// the lease).
    fn drop_lent_copies(&self, key: Key) {
        let mut m = self.leased.lock().unwrap_or_else(|e| e.into_inner());
        if m.get(&key).is_some_and(|w| w.strong_count() == 0) {
            m.remove(&key);
            self.leased_n
                .store(m.len(), std::sync::atomic::Ordering::Release);
            drop(m);
            self.files.forget(key);
        }
    }

    /// A copy of the live write lease's descriptor of `key`, if any.
    fn leased_fd(&self, key: Key) -> Option<io::Result<OwnedFd>> {
        // No lock while none was ever lent (a lease is lent before the
        // OPEN that grants its delegation answers, so before the holder's
        // I/O can ask).
        if self.leased_n.load(std::sync::atomic::Ordering::Acquire) == 0 {
            return None;
        }
        let m = self.leased.lock().unwrap_or_else(|e| e.into_inner());
        let fd = m.get(&key)?.upgrade()?;
        drop(m);
        Some(fd.try_clone())
    }

    /// Opens `root` for export under `export_id`.
    pub fn open(root: &Path, export_id: u32, opts: LocalOptions) -> io::Result<LocalFs> {
        let c = sys::cstr(root.as_os_str().as_bytes())?;
        // Not O_PATH: open_by_handle_at refuses an O_PATH mount fd.
        let rootfd = sys::openat(libc::AT_FDCWD, &c, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        let st = sys::fstat(rootfd.as_raw_fd())?;
        let (euid, egid) = (sys::geteuid(), sys::getegid());
        if opts.act_as_caller && euid != 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "act_as_caller needs the server to run as root",
            ));
        }
        creds::capture_process_groups();
        if opts.act_as_caller {
            creds::verify_switching()?;
        }
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
        let whole_fs =
            is_mount_root(rootfd.as_raw_fd(), &st) && sys::mount_shows_fs_root(st.mnt_id);
        let epoch = Instant::now();
        let caches = opts
            .caches
            .clone()
            .unwrap_or_else(|| Caches::new(DEFAULT_CACHE_FDS));
        let verifier = opts
            .write_verifier
            .clone()
            .unwrap_or_else(|| Arc::new(WriteVerifier::new(private_verifier())));
        let locs = Arc::new(LocMap::new(opts.path_cache_entries));
        let rootfd_raw = rootfd.as_raw_fd();
        let scanner = Scanner::new(
            sys::reopen(rootfd.as_raw_fd(), libc::O_RDONLY | libc::O_DIRECTORY)?,
            st.key(),
            st.mnt_id,
            locs.clone(),
            ScanLimits {
                entries: opts.handle_scan_limit,
                max_waiters: opts.handle_scan_waiters.max(1),
                wait: opts.handle_scan_wait,
                cross_mounts: opts.cross_mounts,
            },
        );
        // An operator sees why syncs cost more here (docs/durability.md).
        let fast_commits = journal::fast_commits_at(rootfd_raw, st.dev);
        if fast_commits {
            tracing::info!(
                export = %root.display(),
                "ext4 with fast commits: syncs per object, EXCLUSIVE creates by name \
                 (its journal does not replay after an fsync of an unnamed file)"
            );
        }
        let journal = if opts.sync && !fast_commits {
            journal::Journal::open(rootfd_raw, st.dev, st.mnt_id).map(Arc::new)
        } else {
            None
        };
        let journal_commits = match &journal {
            Some(j) => Some(journal::commit_threads(
                j,
                opts.journal_commit_threads.min(opts.max_syncs_in_flight),
                opts.journal_commit_batch,
                &verifier,
                euid,
                egid,
            )?),
            None => None,
        };
        Ok(LocalFs {
            root: rootfd,
            root_prefix,
            root_key: st.key(),
            root_mnt: st.mnt_id,
            root_fh,
            handle_layout: khandle::Layout::of(sys::fs_type(rootfd_raw).unwrap_or(0)),
            whole_fs,
            export_id,
            sealer,
            mode,
            server_uid: euid,
            server_gid: egid,
            epoch,
            locs,
            negative: TtlSet::new(NEGATIVE_CAP, NEGATIVE_TTL),
            verdicts: GenMap::new(opts.verdict_cache_entries.max(1)),
            objects: ObjCache::new(opts.object_cache_entries, caches.clone()),
            leased: std::sync::Mutex::default(),
            leased_n: std::sync::atomic::AtomicUsize::new(0),
            files: FileCache::new(
                opts.open_file_cache_entries,
                caches.clone(),
                flusher::Flusher::new(
                    sys::reopen(rootfd_raw, libc::O_RDONLY | libc::O_DIRECTORY)?,
                    verifier.clone(),
                    opts.flush_delay,
                ),
                behind::WriteBehind::new(opts.write_behind_bytes),
                epoch,
            ),
            scanner,
            caches,
            verifier,
            committer: Committer::new(opts.max_syncs_in_flight),
            journal_commits,
            journal,
            tmpfile_creates: !fast_commits,
            xattrs: xattr::probe(rootfd_raw),
            max_file_size: attr::probe_max_file_size(rootfd_raw),
            opts,
        })
    }

    /// Whether every object of the export root's mount is inside the
    /// export (then no handle needs a confinement proof).
    pub fn exports_whole_fs(&self) -> bool {
        self.whole_fs
    }

    /// The write verifier this backend resets on stable-storage errors.
    pub fn write_verifier(&self) -> &Arc<WriteVerifier> {
        &self.verifier
    }

    /// The handle mode in use (never Auto).
    pub fn handle_mode(&self) -> HandleMode {
        self.mode
    }

    /// A handle for any path, inside the export or not, made with this
    /// export's key. For tests of confinement only (the `test-hooks`
    /// feature, which only test builds turn on).
    #[cfg(feature = "test-hooks")]
    pub fn handle_for_path_unchecked(&self, path: &Path) -> io::Result<Fh> {
        let c = sys::cstr(path.as_os_str().as_bytes())?;
        let fd = sys::open_path(libc::AT_FDCWD, &c)?;
        let st = sys::fstat(fd.as_raw_fd())?;
        let cred = Cred::default();
        let call = Call::thread(&cred, false);
        self.make_fh(&call, fd.as_raw_fd(), &st)
            .map_err(|e| match e {
                FsError::Errno(n) => io::Error::from_raw_os_error(n),
                _ => io::Error::other("handle"),
            })
    }

    fn root_obj(&self) -> FsResult<Obj<'_>> {
        let st = sys::fstat(self.root.as_raw_fd())?;
        Ok(Obj {
            fd: FdRef::Borrowed(std::os::fd::AsFd::as_fd(&self.root)),
            st,
            verified: objects::FOREVER,
        })
    }

    /// This thread acts as the server from here (its own identity): for
    /// what the server opens and checks for itself.
    fn as_server(&self) -> FsResult<()> {
        creds::become_server(self.server_uid, self.server_gid)
    }

    /// This thread acts as the caller `cred` from here (`act_as_caller`),
    /// so the kernel judges what it does; else as the server.
    fn as_caller(&self, cred: &Cred) -> FsResult<()> {
        if self.opts.act_as_caller {
            creds::become_caller(cred)
        } else {
            self.as_server()
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
}

/// Whether `fd` (with stat `st`) is the root of its mount: its ".." is on
/// another mount, or is itself (the process's root).
fn is_mount_root(fd: RawFd, st: &Stat) -> bool {
    let Ok(up) = sys::openat(fd, sys::DOTDOT, libc::O_PATH | libc::O_DIRECTORY, 0) else {
        return false;
    };
    sys::fstat(up.as_raw_fd()).is_ok_and(|u| u.mnt_id != st.mnt_id || u.key() == st.key())
}

/// A verifier for a backend the server did not give one: the clock's
/// nanoseconds, so it differs from the previous run's.
fn private_verifier() -> [u8; 8] {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    t.to_be_bytes()
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

#[cfg(test)]
mod tests {
    use super::resolve::Renamed;
    use super::*;

    /// Where the handle layout is not known, the name is opened once and
    /// both the identity and the handle come from that descriptor: a name
    /// now holding another object than the attributes describe is refused
    /// (`crates/fs/tests/local.rs` races real renames against both paths'
    /// known layouts).
    #[test]
    fn an_unknown_handle_layout_checks_the_name_by_its_descriptor() {
        if sys::geteuid() != 0 {
            eprintln!("skipped: kernel handles need root");
            return;
        }
        let d = tempfile::tempdir_in("/tmp").unwrap();
        std::fs::write(d.path().join("a"), b"1").unwrap();
        std::fs::write(d.path().join("b"), b"22").unwrap();
        let opts = LocalOptions {
            handle_mode: HandleMode::Kernel,
            handle_key: [7; 32],
            ..LocalOptions::default()
        };
        let mut fs = LocalFs::open(d.path(), 3, opts).unwrap();
        fs.handle_layout = khandle::Layout::Unknown;
        let root = fs.root.as_raw_fd();
        let (a, b) = (sys::cstr(b"a").unwrap(), sys::cstr(b"b").unwrap());
        let (sa, sb) = (
            sys::statx_at(root, &a, 0).unwrap(),
            sys::statx_at(root, &b, 0).unwrap(),
        );
        // As if "a" had been renamed over between its stat and its handle.
        assert!(matches!(fs.kernel_fh_at(root, &a, &sb), Err(Renamed)));
        let fh = fs.kernel_fh_at(root, &a, &sa).ok().flatten().unwrap();
        let cred = Cred::default();
        assert_eq!(
            crate::Backend::getattr(&fs, &crate::Call::thread(&cred, false), &fh)
                .unwrap()
                .fileid,
            sa.ino
        );
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
