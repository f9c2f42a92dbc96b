//! A lock owner's locks on one file, as the kernel holds them: each
//! (lock owner, file) pair has its own open file description of the file
//! (`LockFile`, fcntl OFD locks), so the kernel keeps lock owners apart
//! and NFSv4 clients, NLM clients (crates/lockd takes the same kind of
//! locks) and local programs see each other's locks. Closing the
//! description drops its locks. Below the stateids, whose lock stateids
//! hold one of these; LOCK, LOCKT and LOCKU (the `lock` module) drive it.

use std::sync::{Arc, Mutex};

use rnfsd_fs::lock::{Conflict, LockFile, LockKind, LockRange};
use rnfsd_fs::{Backend, Cred, Fh, FsResult};

use crate::error::V4Error;
use crate::ids::ClientId;
use crate::ranges::Ranges;
use crate::shards::locked;

/// Opens a lock owner's descriptor on the file a call is about (the
/// embedder knows the backend, the handle and the caller's credentials):
/// `write`, one that takes exclusive locks (read-write), else one for
/// shared locks and tests only (read-only: it breaks no read lease, so a
/// read delegation's holder locking its own file recalls nothing).
pub trait OpenLockFile {
    fn open_lock_file(&self, write: bool) -> FsResult<Arc<dyn LockFile>>;
}

impl<F: Fn(bool) -> FsResult<Arc<dyn LockFile>>> OpenLockFile for F {
    fn open_lock_file(&self, write: bool) -> FsResult<Arc<dyn LockFile>> {
        self(write)
    }
}

/// [`OpenLockFile`] through a backend's `open_for_locks`, as the caller
/// may (knfsd's NFSD_MAY_LOCK: read permission or ownership).
pub struct BackendLockFile<'a> {
    pub backend: &'a Arc<dyn Backend>,
    pub cred: &'a Cred,
    pub fh: &'a Fh,
    /// The caller holds a write delegation on the file and is returning
    /// it ([`rnfsd_fs::lock::LockOpen::holder`]).
    pub holder: bool,
}

impl OpenLockFile for BackendLockFile<'_> {
    fn open_lock_file(&self, write: bool) -> FsResult<Arc<dyn LockFile>> {
        self.backend.open_for_locks(
            &rnfsd_fs::Call::thread(self.cred, false),
            self.fh,
            rnfsd_fs::lock::LockOpen {
                write,
                holder: self.holder,
            },
        )
    }
}

/// One lock stateid's descriptor and our copy of its ranges. Its mutex
/// is held across the non-blocking fcntl that changes or tests the
/// kernel's locks, so both agree (see the crate doc's locking order).
#[derive(Default)]
pub(crate) struct LockHeld {
    m: Mutex<HeldInner>,
}

#[derive(Default)]
struct HeldInner {
    /// Open while it holds locks (or is about to).
    file: Option<Arc<dyn LockFile>>,
    /// `file` takes exclusive locks (opened read-write).
    rw: bool,
    ranges: Ranges,
}

impl std::fmt::Debug for LockHeld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LockHeld")
    }
}

pub(crate) fn kind(write: bool) -> LockKind {
    match write {
        true => LockKind::Exclusive,
        false => LockKind::Shared,
    }
}

impl LockHeld {
    pub(crate) fn holds_any(&self) -> bool {
        !locked(&self.m).ranges.is_empty()
    }

    pub(crate) fn overlaps(&self, r: LockRange) -> bool {
        locked(&self.m).ranges.overlaps(r.start, r.end())
    }

    /// Takes `write`/`r` through the owner's descriptor (opened first if
    /// it has none, with no lock held): None when granted, else the lock
    /// in the way.
    ///
    /// `rw`: the owner's open has write access, so its descriptor is
    /// opened read-write (else read-only: only shared locks, which
    /// NFS4ERR_OPENMODE already ensures). An owner whose open was upgraded
    /// since its read-only descriptor was opened moves its (shared) locks
    /// to a read-write one for its first exclusive lock.
    pub(crate) fn take(
        &self,
        opener: &dyn OpenLockFile,
        write: bool,
        r: LockRange,
        rw: bool,
    ) -> Result<Option<Conflict>, V4Error> {
        let mut opened: Option<Arc<dyn LockFile>> = None;
        loop {
            let mut m = locked(&self.m);
            if write && !m.rw && m.file.is_some() {
                if let Some(new) = opened.take() {
                    // The owner's shared locks, taken again through the
                    // new descriptor (shared with our own, they conflict
                    // with nothing we do not already hold off).
                    for (start, end, _) in m.ranges.pieces() {
                        let piece = LockRange {
                            start,
                            len: end.map_or(0, |e| e - start),
                        };
                        if !new
                            .lock(LockKind::Shared, piece)
                            .map_err(|e| V4Error::from_fs(&e))?
                        {
                            return Err(V4Error::Delay);
                        }
                    }
                    let old = m.file.replace(new);
                    m.rw = true;
                    // Its locks go with it before the exclusive one is
                    // tried (they would refuse it), with no lock held.
                    drop(m);
                    drop(old);
                    continue;
                } else {
                    drop(m);
                    opened = Some(
                        opener
                            .open_lock_file(true)
                            .map_err(|e| V4Error::from_fs(&e))?,
                    );
                    continue;
                }
            }
            if m.file.is_none() {
                m.file = opened.take();
                m.rw = rw;
            }
            if let Some(file) = m.file.clone() {
                let mut next = m.ranges.clone();
                if !next.set(r.start, r.end(), write) {
                    return Err(V4Error::Resource);
                }
                // Twice: a conflict that is gone by the time we ask whose
                // it was is tried again once.
                for _ in 0..2 {
                    if file
                        .lock(kind(write), r)
                        .map_err(|e| V4Error::from_fs(&e))?
                    {
                        m.ranges = next;
                        return Ok(None);
                    }
                    if let Some(c) = file
                        .test(kind(write), r)
                        .map_err(|e| V4Error::from_fs(&e))?
                    {
                        return Ok(Some(c));
                    }
                }
                return Ok(Some(Conflict {
                    kind: kind(write),
                    range: r,
                }));
            }
            drop(m);
            opened = Some(
                opener
                    .open_lock_file(rw)
                    .map_err(|e| V4Error::from_fs(&e))?,
            );
        }
    }

    /// Lets go of `r`: the descriptor when it now holds nothing, for the
    /// caller to drop with no lock held.
    pub(crate) fn release(&self, r: LockRange) -> Result<Option<Arc<dyn LockFile>>, V4Error> {
        let mut m = locked(&self.m);
        if let Some(file) = &m.file {
            file.unlock(r).map_err(|e| V4Error::from_fs(&e))?;
        }
        m.ranges.clear(r.start, r.end());
        Ok(match m.ranges.is_empty() {
            true => m.file.take(),
            false => None,
        })
    }

    /// Drops every lock (revocation): the descriptor, to be dropped with
    /// no lock held.
    pub(crate) fn revoke(&self) -> Option<Arc<dyn LockFile>> {
        let mut m = locked(&self.m);
        m.ranges = Ranges::default();
        m.file.take()
    }

    /// Tests `write`/`r` through the descriptor, if it has one.
    pub(crate) fn test(&self, write: bool, r: LockRange) -> Option<FsResult<Option<Conflict>>> {
        let m = locked(&self.m);
        m.file.as_ref().map(|f| f.test(kind(write), r))
    }
}

/// A lock owner's lock stateid on a file, as the file's table lists it
/// (to name the owner of a conflicting lock).
#[derive(Clone)]
pub(crate) struct Locker {
    pub(crate) client: ClientId,
    pub(crate) owner: Arc<[u8]>,
    pub(crate) held: Arc<LockHeld>,
}
