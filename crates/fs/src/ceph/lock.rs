//! NLM byte-range locks on CephFS: each lock owner gets its own open file
//! and a lock owner number of its own (`ceph_ll_setlk`/`getlk`). The MDS
//! keeps CephFS locks for the whole cluster, so owners on different heads
//! and CephFS's own clients conflict as they should; closing the file
//! drops its locks, and a dead head's locks go with its MDS session.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::calls::Calls;
use super::ffi::File;
use super::{err, Inner};
use crate::access::{ACCESS3_EXECUTE, ACCESS3_READ};
use crate::lock::{Conflict, LockFile, LockKind, LockRange};
use crate::{Cred, Fh, FsError, FsResult};

/// Lock owner numbers: unique within this head's client session, which is
/// what CephFS keys owners by.
static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

pub(super) struct CephLocks {
    file: Arc<File>,
    inner: Arc<Inner>,
    owner: u64,
    calls: Arc<Calls>,
}

impl std::fmt::Debug for CephLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CephLocks(owner {})", self.owner)
    }
}

impl CephLocks {
    pub(super) fn new(opened: (Arc<File>, Arc<Inner>), calls: Arc<Calls>) -> CephLocks {
        CephLocks {
            file: opened.0,
            inner: opened.1,
            owner: NEXT_OWNER.fetch_add(1, Ordering::Relaxed),
            calls,
        }
    }

    /// One fcntl-style lock call on the pool, under its time limit.
    fn call(&self, get: bool, t: i32, r: LockRange) -> FsResult<libc::flock> {
        let off = |v: u64| i64::try_from(v).map_err(|_| FsError::Errno(libc::EFBIG));
        let mut fl = libc::flock {
            l_type: t as i16,
            l_whence: libc::SEEK_SET as i16,
            l_start: off(r.start)?,
            l_len: off(r.len)?,
            l_pid: 0,
        };
        let (file, inner, owner) = (self.file.clone(), self.inner.clone(), self.owner);
        self.calls
            .run(vec![super::calls::owner_key(owner)], move || {
                inner.m.lock(&file, &mut fl, owner, get).map_err(err)?;
                Ok(fl)
            })
    }
}

fn kind_type(k: LockKind) -> i32 {
    match k {
        LockKind::Shared => libc::F_RDLCK,
        LockKind::Exclusive => libc::F_WRLCK,
    }
}

impl LockFile for CephLocks {
    fn lock(&self, kind: LockKind, r: LockRange) -> FsResult<bool> {
        match self.call(false, kind_type(kind), r) {
            Ok(_) => Ok(true),
            Err(FsError::Errno(libc::EAGAIN | libc::EACCES)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn unlock(&self, r: LockRange) -> FsResult<()> {
        self.call(false, libc::F_UNLCK, r).map(drop)
    }

    fn test(&self, kind: LockKind, r: LockRange) -> FsResult<Option<Conflict>> {
        let fl = self.call(true, kind_type(kind), r)?;
        Ok(match i32::from(fl.l_type) {
            t @ (libc::F_RDLCK | libc::F_WRLCK) => Some(Conflict {
                kind: if t == libc::F_WRLCK {
                    LockKind::Exclusive
                } else {
                    LockKind::Shared
                },
                range: LockRange {
                    start: u64::try_from(fl.l_start).unwrap_or(0),
                    len: u64::try_from(fl.l_len).unwrap_or(0),
                },
            }),
            _ => None,
        })
    }
}

impl Inner {
    /// A file of its own for one lock owner (knfsd's NFSD_MAY_LOCK: read
    /// permission or ownership).
    pub(super) fn open_for_locks(
        self: &Arc<Self>,
        cred: &Cred,
        fh: &Fh,
    ) -> FsResult<(Arc<File>, Arc<Inner>)> {
        let n = self.resolve(fh)?;
        let st = self.attrs(&n)?;
        self.may_data(cred, &n, &st, ACCESS3_READ | ACCESS3_EXECUTE)?;
        // Read-write so exclusive locks work (as fcntl wants).
        let p = self.server_perm()?;
        let f = match self.m.open_file(&n.inode, libc::O_RDWR, p) {
            Ok(f) => f,
            Err(libc::EROFS | libc::EACCES | libc::EPERM) => {
                self.m.open_file(&n.inode, libc::O_RDONLY, p).map_err(err)?
            }
            Err(e) => return Err(err(e)),
        };
        Ok((Arc::new(f), self.clone()))
    }
}
