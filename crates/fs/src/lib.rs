//! The filesystem layer: the backend trait every export is served through,
//! what backends share (handle format, ACCESS bits, caches, group commit),
//! the local-directory backend and the CephFS backend.
//!
//! Types here are protocol-neutral (no NFS wire types): the nfs3 program maps
//! them to RFC 1813 structures, and maps `FsError` to nfsstat3 in one place.

pub mod access;
pub mod cache;
pub mod call;
pub mod ceph;
pub mod durable;
pub mod handle;
pub mod inline;
pub mod lease;
pub mod limits;
pub mod local;
pub mod lock;
pub mod owed;
mod sleeps;
pub mod watch;
pub mod xattr;

use std::fmt;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use call::Call;

/// NFSv3 handles are at most 64 bytes (RFC 1813 §2.5 NFS3_FHSIZE).
pub const MAX_HANDLE: usize = 64;

/// An opaque file handle as issued by a backend. Layout (owned by this crate):
/// byte 0 = format version, bytes 1..5 = export id (big-endian), then the
/// backend's own bytes. `export_id_of` reads the export id so the server can
/// route a handle to its export without knowing the rest.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Fh(pub Vec<u8>);

impl fmt::Debug for Fh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fh(")?;
        for b in &self.0 {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

/// The export id a handle names, or None for a handle too short to hold one.
pub fn export_id_of(fh: &[u8]) -> Option<u32> {
    if fh.len() < 5 {
        return None;
    }
    Some(u32::from_be_bytes([fh[1], fh[2], fh[3], fh[4]]))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    Regular,
    Directory,
    BlockDev,
    CharDev,
    Symlink,
    Socket,
    Fifo,
}

/// Seconds and nanoseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct Time {
    pub sec: i64,
    pub nsec: u32,
}

/// Attributes of an object (the content of RFC 1813 fattr3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    pub ftype: FileType,
    /// Permission bits including setuid/setgid/sticky (0o7777).
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    /// Bytes of disk actually used.
    pub used: u64,
    /// Device major and minor for block and character devices.
    pub rdev: (u32, u32),
    pub fsid: u64,
    pub fileid: u64,
    pub atime: Time,
    pub mtime: Time,
    pub ctime: Time,
}

/// The attributes kept for weak cache consistency (RFC 1813 §2.6 wcc_attr).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreAttr {
    pub size: u64,
    pub mtime: Time,
    pub ctime: Time,
}

impl From<&Attr> for PreAttr {
    fn from(a: &Attr) -> Self {
        PreAttr {
            size: a.size,
            mtime: a.mtime,
            ctime: a.ctime,
        }
    }
}

/// Attributes before and after a change (RFC 1813 wcc_data).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Wcc {
    pub before: Option<PreAttr>,
    pub after: Option<Attr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SetTime {
    #[default]
    DontChange,
    ServerTime,
    ClientTime(Time),
}

/// What a SETATTR, CREATE, MKDIR, SYMLINK or MKNOD asks to set (sattr3).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: SetTime,
    pub mtime: SetTime,
}

/// What SEEK looks for (RFC 7862 §15.11; lseek's SEEK_DATA, SEEK_HOLE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content {
    Data,
    Hole,
}

/// A stretch of a regular file: data, or a hole (reads as zeros, holds no
/// blocks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub offset: u64,
    pub len: u64,
    pub data: bool,
}

/// The caller's identity (from AUTH_SYS, after any squashing).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cred {
    pub uid: u32,
    pub gid: u32,
    pub gids: Vec<u32>,
}

/// RFC 1813 stable_how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stable {
    Unstable = 0,
    DataSync = 1,
    FileSync = 2,
}

/// RFC 1813 createmode3 with its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateHow {
    Unchecked(SetAttr),
    Guarded(SetAttr),
    /// The client's createverf3: stored with the file so a retry with the same
    /// verifier succeeds and a different one gets EEXIST.
    Exclusive([u8; 8]),
}

/// What MKNOD makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    Fifo,
    Socket,
    Block { major: u32, minor: u32 },
    Char { major: u32, minor: u32 },
}

/// A newly made object.
#[derive(Debug, Clone)]
pub struct Created {
    pub fh: Fh,
    pub attr: Attr,
    /// The parent directory's change.
    pub dir: Wcc,
}

/// One directory entry. For READDIRPLUS `plus` carries the handle and
/// attributes (None where they could not be had, which RFC 1813 allows).
#[derive(Debug, Clone)]
pub struct DirEntry {
    pub fileid: u64,
    pub name: Vec<u8>,
    pub cookie: u64,
    pub plus: Option<(Fh, Attr)>,
}

/// A batch of entries starting after the cookie asked for.
#[derive(Debug, Clone)]
pub struct DirPage {
    pub verifier: [u8; 8],
    pub entries: Vec<DirEntry>,
    /// True when `entries` runs to the end of the directory.
    pub eof: bool,
    pub dir_attr: Option<Attr>,
}

/// RFC 1813 FSSTAT3resok content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsStat {
    pub tbytes: u64,
    pub fbytes: u64,
    pub abytes: u64,
    pub tfiles: u64,
    pub ffiles: u64,
    pub afiles: u64,
    pub invarsec: u32,
}

/// The backend's part of FSINFO (transfer sizes are the server's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsInfo {
    pub maxfilesize: u64,
    pub time_delta: Time,
    pub link: bool,
    pub symlink: bool,
    pub homogeneous: bool,
    pub cansettime: bool,
}

/// RFC 1813 PATHCONF3resok content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathConf {
    pub linkmax: u32,
    pub name_max: u32,
    pub no_trunc: bool,
    pub chown_restricted: bool,
    pub case_insensitive: bool,
    pub case_preserving: bool,
}

/// Why an operation failed. Errno values are raw Linux errnos; the nfs3
/// program maps them to nfsstat3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsError {
    Errno(i32),
    /// Not a handle this server could have issued (NFS3ERR_BADHANDLE).
    BadHandle,
    /// A well-formed handle whose object is gone (NFS3ERR_STALE).
    Stale,
    /// SETATTR guard ctime mismatch (NFS3ERR_NOT_SYNC).
    NotSync,
    /// A READDIR cookie or verifier that is no longer valid (NFS3ERR_BAD_COOKIE).
    BadCookie,
    /// The operation is not supported by this backend (NFS3ERR_NOTSUPP).
    NotSupported,
}

impl From<std::io::Error> for FsError {
    fn from(e: std::io::Error) -> Self {
        FsError::Errno(e.raw_os_error().unwrap_or(libc_eio()))
    }
}

const fn libc_eio() -> i32 {
    5
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsError::Errno(e) => write!(f, "{}", std::io::Error::from_raw_os_error(*e)),
            other => write!(f, "{other:?}"),
        }
    }
}

impl std::error::Error for FsError {}

pub type FsResult<T> = Result<T, FsError>;

/// RFC 1813 writeverf3 (§3.3.7, §3.3.21), shared by the server and every
/// backend: each WRITE and COMMIT reply carries it. It is new at every
/// start and changes whenever stable storage reported an error (knfsd's
/// `nfsd_reset_write_verifier`), so a client whose UNSTABLE writes may have
/// been lost sees a different verifier at COMMIT and sends them again.
/// WRITE replies must read it before writing, COMMIT replies after syncing.
pub struct WriteVerifier {
    v: AtomicU64,
    resets: AtomicU64,
}

/// Added at each reset: odd, so 2^64 resets pass before a value repeats.
const VERIFIER_STEP: u64 = 0x9e37_79b9_7f4a_7c15;

impl WriteVerifier {
    pub fn new(initial: [u8; 8]) -> WriteVerifier {
        WriteVerifier {
            v: AtomicU64::new(u64::from_be_bytes(initial)),
            resets: AtomicU64::new(0),
        }
    }

    pub fn get(&self) -> [u8; 8] {
        self.v.load(Ordering::Acquire).to_be_bytes()
    }

    /// Stable storage failed (`why`): every later reply carries a new value.
    pub fn reset(&self, why: &dyn fmt::Display) {
        self.v.fetch_add(VERIFIER_STEP, Ordering::AcqRel);
        let n = self.resets.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::warn!(error = %why, resets = n, "stable storage error: write verifier reset, clients resend uncommitted data");
    }

    /// Resets so far.
    pub fn resets(&self) -> u64 {
        self.resets.load(Ordering::Relaxed)
    }
}

/// One of a backend's caches, for statistics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheStat {
    /// "objects" (handle to object), "files" (open files), ...
    pub name: &'static str,
    pub capacity: u64,
    pub counts: cache::Counts,
}

/// What a backend reports about its caches and background work.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackendStats {
    pub caches: Vec<CacheStat>,
    /// Descriptors held by caches, and their bound (shared by exports).
    pub fds_cached: u64,
    pub fd_limit: u64,
    /// Group commit: sync requests, syncs run, requests that shared another
    /// request's sync, sync errors, most syncs at once.
    pub commits: durable::CommitCounts,
    /// Flushes (one `syncfs` each) run for written descriptors closed
    /// before their data was committed.
    pub flushes: u64,
    /// Writebacks started early for files that gathered
    /// `write_behind_bytes` of UNSTABLE data (local backend).
    pub write_behinds: u64,
    /// Of them, started by an event loop at the end of its turn.
    pub write_behinds_on_loop: u64,
    /// Handles whose location was searched for by a walk of the export;
    /// of them, answered JUKEBOX because the walk was still running.
    pub scans_waited: u64,
    pub scans_busy: u64,
    /// Walks of the export run (passes).
    pub scan_passes: u64,
    /// Calls a remote backend answered JUKEBOX under its time limit (past
    /// the limit, or its pool full), and times it found the remote
    /// service stalled (CephFS: `ceph/calls.rs`).
    pub calls_jukebox: u64,
    pub stalls: u64,
}

/// One exported tree. Every method takes the call's context ([`Call`]): the
/// caller's credentials, so a backend that can act as the caller (a root
/// run) does, and how the call may run (on an event loop, memory only; or
/// on a thread, where a change may owe its journal commit); names are single
/// path components as bytes (the backend rejects '/', NUL, and confines '..').
///
/// Methods that change something return wcc data they gathered around the
/// change; on error the caller fetches post-op attributes itself.
pub trait Backend: Send + Sync {
    /// The handle of the export root.
    fn root(&self) -> Fh;
    fn getattr(&self, call: &Call<'_>, fh: &Fh) -> FsResult<Attr>;
    /// `guard` is the ctime the client expects (RFC 1813 §3.3.2 sattrguard3).
    fn setattr(
        &self,
        call: &Call<'_>,
        fh: &Fh,
        set: &SetAttr,
        guard: Option<Time>,
    ) -> FsResult<Wcc>;
    /// Returns the object's handle and attributes, and the directory's.
    fn lookup(&self, call: &Call<'_>, dir: &Fh, name: &[u8]) -> FsResult<(Fh, Attr, Option<Attr>)>;
    /// `want` is an RFC 1813 ACCESS3 bit mask; returns the granted subset.
    fn access(&self, call: &Call<'_>, fh: &Fh, want: u32) -> FsResult<(u32, Attr)>;
    fn readlink(&self, call: &Call<'_>, fh: &Fh) -> FsResult<(Vec<u8>, Attr)>;
    /// Reads up to `count` bytes appended to `buf` (what it holds already is
    /// kept: the caller may read straight into a reply); returns eof.
    fn read(
        &self,
        call: &Call<'_>,
        fh: &Fh,
        offset: u64,
        count: u32,
        buf: &mut Vec<u8>,
    ) -> FsResult<(bool, Attr)>;
    /// READ by reference (splice(2)): up to `count` bytes at `offset` go
    /// from the page cache into the pipe whose write end is `pipe`, with no
    /// copy; returns the bytes moved, eof and attributes, as `read` (fewer
    /// bytes than asked only at end of file, or when the pipe is full). A
    /// backend that cannot answers `NotSupported` and the caller uses
    /// `read`.
    fn read_to_pipe(
        &self,
        _call: &Call<'_>,
        _fh: &Fh,
        _offset: u64,
        _count: u32,
        _pipe: BorrowedFd<'_>,
    ) -> FsResult<(u32, bool, Attr)> {
        Err(FsError::NotSupported)
    }
    /// Returns bytes written, the stability actually achieved (>= asked), wcc.
    fn write(
        &self,
        call: &Call<'_>,
        fh: &Fh,
        offset: u64,
        data: &[u8],
        stable: Stable,
    ) -> FsResult<(u32, Stable, Wcc)>;
    fn create(&self, call: &Call<'_>, dir: &Fh, name: &[u8], how: &CreateHow) -> FsResult<Created>;
    fn mkdir(&self, call: &Call<'_>, dir: &Fh, name: &[u8], set: &SetAttr) -> FsResult<Created>;
    fn symlink(
        &self,
        call: &Call<'_>,
        dir: &Fh,
        name: &[u8],
        target: &[u8],
        set: &SetAttr,
    ) -> FsResult<Created>;
    fn mknod(
        &self,
        call: &Call<'_>,
        dir: &Fh,
        name: &[u8],
        kind: NodeKind,
        set: &SetAttr,
    ) -> FsResult<Created>;
    fn remove(&self, call: &Call<'_>, dir: &Fh, name: &[u8]) -> FsResult<Wcc>;
    fn rmdir(&self, call: &Call<'_>, dir: &Fh, name: &[u8]) -> FsResult<Wcc>;
    /// Returns (from-dir wcc, to-dir wcc).
    fn rename(
        &self,
        call: &Call<'_>,
        from_dir: &Fh,
        from: &[u8],
        to_dir: &Fh,
        to: &[u8],
    ) -> FsResult<(Wcc, Wcc)>;
    /// Returns the file's attributes and the directory's wcc.
    fn link(&self, call: &Call<'_>, file: &Fh, dir: &Fh, name: &[u8]) -> FsResult<(Attr, Wcc)>;
    /// Entries after `cookie` (0 = from the start), at most `max_entries`.
    /// A nonzero cookie with a verifier that no longer matches gives BadCookie.
    fn readdir(
        &self,
        call: &Call<'_>,
        dir: &Fh,
        cookie: u64,
        verifier: [u8; 8],
        max_entries: usize,
        plus: bool,
    ) -> FsResult<DirPage>;
    fn fsstat(&self, call: &Call<'_>, fh: &Fh) -> FsResult<(FsStat, Attr)>;
    fn fsinfo(&self, call: &Call<'_>, fh: &Fh) -> FsResult<(FsInfo, Attr)>;
    fn pathconf(&self, call: &Call<'_>, fh: &Fh) -> FsResult<(PathConf, Attr)>;
    /// Flush `count` bytes at `offset` (0 = to the end) to stable storage.
    fn commit(&self, call: &Call<'_>, fh: &Fh, offset: u64, count: u32) -> FsResult<Wcc>;
    /// A fresh handle for one lock owner's byte-range locks on the regular
    /// file `fh` (NLM, NFSv4 LOCK), opened as `how` says. The caller must
    /// be able to read the file or own it, as knfsd asks for locks
    /// (`NFSD_MAY_LOCK`). None by default.
    fn open_for_locks(
        &self,
        _call: &Call<'_>,
        _fh: &Fh,
        _how: lock::LockOpen,
    ) -> FsResult<Arc<dyn lock::LockFile>> {
        Err(FsError::NotSupported)
    }
    /// A Linux file lease on the regular file `fh` for an NFSv4
    /// delegation (`write`: a write lease), its breaks told to thread
    /// `to` (`crate::lease`): a program on the server's host that would
    /// change the file waits for it. `NotSupported` where the backend
    /// cannot (then no delegation is granted); EAGAIN while the file is
    /// open in a conflicting way. None by default.
    fn lease(
        &self,
        _call: &Call<'_>,
        _fh: &Fh,
        _write: bool,
        _to: libc::pid_t,
    ) -> FsResult<lease::Lease> {
        Err(FsError::NotSupported)
    }
    /// Whether objects of this export may have `user.` extended
    /// attributes (NFSv4.2's xattr_support, RFC 8276): the methods below
    /// work. None by default.
    fn xattr_support(&self) -> bool {
        false
    }
    /// The value of `user.`+`name` (`crate::xattr`): ENODATA if there is
    /// none, ERANGE if it is longer than `max` bytes.
    fn getxattr(&self, _call: &Call<'_>, _fh: &Fh, _name: &[u8], _max: usize) -> FsResult<Vec<u8>> {
        Err(FsError::NotSupported)
    }
    /// Sets `user.`+`name` to `value` as `how` allows (EEXIST, ENODATA);
    /// returns the object's wcc (its ctime moves, as the change attribute).
    fn setxattr(
        &self,
        _call: &Call<'_>,
        _fh: &Fh,
        _name: &[u8],
        _value: &[u8],
        _how: xattr::XattrSet,
    ) -> FsResult<Wcc> {
        Err(FsError::NotSupported)
    }
    /// The object's `user.` names, without the prefix, in a stable order.
    fn listxattr(&self, _call: &Call<'_>, _fh: &Fh) -> FsResult<Vec<Vec<u8>>> {
        Err(FsError::NotSupported)
    }
    /// Removes `user.`+`name` (ENODATA if there is none); the object's wcc.
    fn removexattr(&self, _call: &Call<'_>, _fh: &Fh, _name: &[u8]) -> FsResult<Wcc> {
        Err(FsError::NotSupported)
    }
    /// Whether a change (an UNSTABLE WRITE; a namespace change or SETATTR
    /// of an `async` export) may be tried on an event loop (`inline`): the
    /// backend gives up there before changing anything at any step that
    /// may wait. One that always gives up (a remote service) says no, and
    /// its changes go straight to a pool.
    fn changes_inline(&self) -> bool {
        false
    }
    /// Whether every change to this backend's files passes through this
    /// server, so an NFSv4 delegation it grants is recalled before any
    /// conflicting change. Not for a shared filesystem (CephFS: other
    /// heads and clients change its files unseen).
    fn sees_every_change(&self) -> bool {
        false
    }
    /// The first offset at or after `offset` of the regular file `fh`
    /// holding `what` (lseek SEEK_DATA / SEEK_HOLE; every file ends with
    /// a hole), None if there is none; with the file's attributes.
    /// ENXIO when `offset` is at or past end of file.
    fn seek(
        &self,
        _call: &Call<'_>,
        _fh: &Fh,
        _offset: u64,
        _what: Content,
    ) -> FsResult<(Option<u64>, Attr)> {
        Err(FsError::NotSupported)
    }
    /// The data and holes of the regular file `fh` from `offset` for
    /// `len` bytes, cut at end of file, at most `max` extents (the last
    /// then ends where the rest was not looked at); with the file's
    /// attributes (of before the look).
    fn layout(
        &self,
        _call: &Call<'_>,
        _fh: &Fh,
        _offset: u64,
        _len: u64,
        _max: usize,
    ) -> FsResult<(Vec<Extent>, Attr)> {
        Err(FsError::NotSupported)
    }
    /// Reserves blocks for `len` bytes at `offset` of the regular file
    /// `fh` (fallocate; the size grows if they reach past it). The
    /// caller must be able to write the file; the change attribute
    /// moves.
    fn allocate(&self, _call: &Call<'_>, _fh: &Fh, _offset: u64, _len: u64) -> FsResult<Wcc> {
        Err(FsError::NotSupported)
    }
    /// Frees `len` bytes at `offset` of the regular file `fh`, which then
    /// read as zeros (a punched hole; the size stays). As `allocate`.
    fn deallocate(&self, _call: &Call<'_>, _fh: &Fh, _offset: u64, _len: u64) -> FsResult<Wcc> {
        Err(FsError::NotSupported)
    }
    /// Copies up to `len` bytes of `src` at `src_off` to `dst` at
    /// `dst_off` within the filesystem (sharing blocks where it can):
    /// returns the bytes copied (fewer only at the source's end of file),
    /// the stability achieved (>= `stable`, as `write`) and `dst`'s wcc.
    /// The caller must be able to read `src` and write `dst`.
    #[allow(clippy::too_many_arguments)]
    fn copy_range(
        &self,
        _call: &Call<'_>,
        _src: &Fh,
        _src_off: u64,
        _dst: &Fh,
        _dst_off: u64,
        _len: u64,
        _stable: Stable,
    ) -> FsResult<(u64, Stable, Wcc)> {
        Err(FsError::NotSupported)
    }
    /// Shares `len` bytes (0: to the source's end of file) of `src` at
    /// `src_off` into `dst` at `dst_off` (a reflink): `NotSupported`
    /// where the filesystem cannot; EINVAL for a range not aligned to
    /// `clone_blksize`. Returns `dst`'s wcc.
    #[allow(clippy::too_many_arguments)]
    fn clone_range(
        &self,
        _call: &Call<'_>,
        _src: &Fh,
        _src_off: u64,
        _dst: &Fh,
        _dst_off: u64,
        _len: u64,
    ) -> FsResult<Wcc> {
        Err(FsError::NotSupported)
    }
    /// The granularity of `clone_range` on `fh`'s filesystem, 0 if none
    /// is known.
    fn clone_blksize(&self, _call: &Call<'_>, _fh: &Fh) -> FsResult<u32> {
        Ok(0)
    }
    /// Cache and background-work counters (none by default).
    fn stats(&self) -> BackendStats {
        BackendStats::default()
    }
    /// The process is exiting: end sessions with remote services now
    /// (their servers would otherwise hold our state until a timeout).
    fn shutdown(&self) {}
}
