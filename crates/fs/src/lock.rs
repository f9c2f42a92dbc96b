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
