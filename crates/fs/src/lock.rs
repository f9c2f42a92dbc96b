//! Byte-range locks for the lock manager (NLM). One [`LockFile`] per lock
//! owner and file: on the local backend an open file description holding
//! fcntl OFD locks, so the kernel keeps owners apart, local programs and
//! NFS clients see each other's locks, and closing it drops its locks.

use crate::FsResult;

/// A shared (read) or exclusive (write) lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockKind {
    Shared,
    Exclusive,
}

/// Bytes `start ..` for `len` bytes; `len` 0 runs to the end of the file
/// and beyond (as NLM and fcntl say). Both fit fcntl's off_t (i64): the
/// lock manager refuses others (NLM4_FBIG) before they get here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LockRange {
    pub start: u64,
    pub len: u64,
}

impl LockRange {
    /// The first byte past the range (None: to the end of the file).
    pub fn end(&self) -> Option<u64> {
        (self.len != 0).then(|| self.start.saturating_add(self.len))
    }
}

/// How a lock owner's description is opened ([`Backend::open_for_locks`]).
///
/// [`Backend::open_for_locks`]: crate::Backend::open_for_locks
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockOpen {
    /// It takes exclusive locks (read-write), else shared locks and
    /// tests only (read-only: it breaks no read lease).
    pub write: bool,
    /// The NFSv4 holder of a write delegation on the file, returning it:
    /// a copy of the server's write lease's own description, since any
    /// new open would break that lease, and the holder's client re-sends
    /// the locks it kept under the delegation before it returns it (the
    /// Linux client's delegation return). Its lock owners then share one
    /// description on the server while their locks last; its client keeps
    /// them apart (Linux checks its own processes' locks before asking).
    pub holder: bool,
}

impl LockOpen {
    /// For an owner's locks of this kind, not a returning holder's.
    pub fn plain(write: bool) -> LockOpen {
        LockOpen {
            write,
            holder: false,
        }
    }
}

/// A lock of another owner in the way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conflict {
    pub kind: LockKind,
    pub range: LockRange,
}

/// One owner's locks on one file.
pub trait LockFile: Send + Sync + std::fmt::Debug {
    /// Takes (or converts, or merges into) a lock without waiting: false
    /// when another owner holds a conflicting one.
    fn lock(&self, kind: LockKind, range: LockRange) -> FsResult<bool>;
    /// Drops this owner's locks in `range` (none there is no error).
    fn unlock(&self, range: LockRange) -> FsResult<()>;
    /// A lock of another owner that `kind` on `range` would conflict with.
    fn test(&self, kind: LockKind, range: LockRange) -> FsResult<Option<Conflict>>;
}
