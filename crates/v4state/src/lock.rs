//! Byte-range locks (RFC 8881 §9.4): LOCK (§18.10), LOCKT (§18.11),
//! LOCKU (§18.12).
//!
//! A lock stateid stands for one lock owner on one file, made from an
//! open stateid (open_to_lock_owner) or used again (exist_lock_owner).
//! Its locks are the kernel's, through the owner's own open file
//! description of the file (`lockfile`): closing the description (the
//! last range unlocked, the stateid freed, its open closed, the client
//! gone) drops its locks.
//!
//! The top of the state: LOCK needs an open (`open`'s access bits), and a
//! lock stateid made for a LOCK that did not take is freed again
//! (`stateid`).

use std::sync::Arc;

use rnfsd_fs::lock::{Conflict, LockKind, LockRange};

use crate::error::{Denied, V4Error};
use crate::ids::{ClientId, FileKey, Stateid};
use crate::lockfile::{kind, LockHeld, Locker};
use crate::open::{ACCESS_READ, ACCESS_WRITE};
use crate::registry::ClientHandle;
use crate::shards::locked;
use crate::table::{Body, ClientState, Entry, LockBody};
use crate::{Limit, State};

pub use crate::lockfile::{BackendLockFile, OpenLockFile};

/// LOCK's locker4.
#[derive(Debug, Clone, Copy)]
pub enum Locker4<'a> {
    /// open_to_lock_owner4: the open stateid and the lock owner's bytes
    /// (the seqids and client id of 4.0 are not used in 4.1).
    New { open: Stateid, owner: &'a [u8] },
    /// exist_lock_owner4: the lock stateid.
    Existing(Stateid),
}

/// LOCK's arguments.
#[derive(Debug, Clone, Copy)]
pub struct LockArgs<'a> {
    pub locker: Locker4<'a>,
    /// The current filehandle's file.
    pub file: FileKey,
    /// WRITE_LT / WRITEW_LT (the W variants do not wait here).
    pub write: bool,
    pub offset: u64,
    /// `u64::MAX`: to the end of the file.
    pub length: u64,
    pub reclaim: bool,
}

/// LOCKT's arguments (its client id is the session's in 4.1).
#[derive(Debug, Clone, Copy)]
pub struct LocktArgs<'a> {
    pub owner: &'a [u8],
    pub file: FileKey,
    pub write: bool,
    pub offset: u64,
    pub length: u64,
}

/// NFSv4's offset and length as fcntl takes them (§18.10.3):
/// NFS4ERR_INVAL for length 0, or for a range past 2^64 - 1. Bytes past
/// what fcntl's signed offsets reach (2^63 - 1) are "to the end of the
/// file": a range starting there becomes the last byte fcntl can name
/// onwards, as knfsd clamps to OFFSET_MAX.
pub(crate) fn fcntl_range(offset: u64, length: u64) -> Result<LockRange, V4Error> {
    if length == 0 || (length != u64::MAX && offset.checked_add(length).is_none()) {
        return Err(V4Error::Inval);
    }
    let max = i64::MAX as u64;
    if offset > max || length == u64::MAX {
        return Ok(LockRange {
            start: offset.min(max),
            len: 0,
        });
    }
    let last = offset + (length - 1);
    Ok(LockRange {
        start: offset,
        len: match last > max {
            true => 0,
            false => length,
        },
    })
}

fn denied_of(c: &Conflict, owner: Option<(ClientId, Vec<u8>)>) -> V4Error {
    V4Error::Denied(Box::new(Denied {
        offset: c.range.start,
        length: match c.range.len {
            0 => u64::MAX,
            n => n,
        },
        write: c.kind == LockKind::Exclusive,
        owner,
    }))
}

impl State {
    /// LOCK (§18.10): takes the lock, the lock stateid (its seqid bumped).
    /// A new lock owner is made from an open stateid of the client (one
    /// lock stateid per lock owner and file; one existing for the pair is
    /// used again). Errors: NFS4ERR_DENIED (with the lock in the way, and
    /// its owner when it is one of ours), NFS4ERR_INVAL (bad range),
    /// NFS4ERR_OPENMODE (a write lock on an open without write access,
    /// or a read lock without read), NFS4ERR_GRACE / NFS4ERR_NO_GRACE,
    /// the stateid errors, NFS4ERR_RESOURCE (bounds), and the
    /// filesystem's errors opening the file.
    pub fn lock(
        &self,
        c: &ClientHandle,
        a: &LockArgs<'_>,
        opener: &dyn OpenLockFile,
    ) -> Result<Stateid, V4Error> {
        let r = fcntl_range(a.offset, a.length)?;
        self.grace_check(&c.0, a.reclaim)?;
        let (other, held, created, rw) = {
            let mut st = locked(&c.0.st);
            if c.0.is_expired() {
                return Err(V4Error::Expired);
            }
            self.lock_stateid(&mut st, c, a)?
        };
        let conflict = held.take(opener, a.write, r, rw);
        let mut st = locked(&c.0.st);
        match conflict {
            Ok(None) => match st.stateids.get_mut(&other) {
                Some(e) => {
                    let seqid = e.bump();
                    Ok(Stateid { seqid, other })
                }
                // Freed meanwhile (its open closed): its descriptor goes
                // with the last reference, and the lock with it.
                None => Err(V4Error::BadStateid),
            },
            Ok(Some(conflict)) => {
                let freed = self.undo_new_lock(&mut st, created, &other, &held);
                drop(st);
                drop(freed);
                let owner = self.owner_of(&a.file, &conflict, &held);
                Err(denied_of(&conflict, owner))
            }
            Err(e) => {
                let freed = self.undo_new_lock(&mut st, created, &other, &held);
                drop(st);
                drop(freed);
                Err(e)
            }
        }
    }

    /// A lock stateid made for a LOCK that did not take: it goes (as
    /// knfsd's), unless it holds locks from elsewhere.
    fn undo_new_lock(
        &self,
        st: &mut ClientState,
        created: bool,
        other: &[u8; 12],
        held: &LockHeld,
    ) -> Vec<Arc<LockHeld>> {
        if created && !held.holds_any() {
            return self.release_stateid(st, other);
        }
        Vec::new()
    }

    /// The lock stateid LOCK works on (made if new): its `other`, its
    /// descriptor, whether it was made now, whether its open has write
    /// access.
    fn lock_stateid(
        &self,
        st: &mut ClientState,
        c: &ClientHandle,
        a: &LockArgs<'_>,
    ) -> Result<([u8; 12], Arc<LockHeld>, bool, bool), V4Error> {
        let need = if a.write { ACCESS_WRITE } else { ACCESS_READ };
        match a.locker {
            Locker4::Existing(sid) => {
                let e = st.find_mut(self, c.0.is_expired(), &sid)?;
                let (file, Body::Lock(l)) = (e.file, &e.body) else {
                    return Err(V4Error::BadStateid);
                };
                if file != a.file {
                    return Err(V4Error::BadStateid);
                }
                let (open, held) = (l.open, l.held.clone());
                let access = st.open_access(&open);
                if access & need == 0 {
                    return Err(V4Error::OpenMode);
                }
                Ok((sid.other, held, false, access & ACCESS_WRITE != 0))
            }
            Locker4::New { open, owner } => {
                let e = st.find_mut(self, c.0.is_expired(), &open)?;
                let (file, Body::Open(o)) = (e.file, &e.body) else {
                    return Err(V4Error::BadStateid);
                };
                if file != a.file {
                    return Err(V4Error::BadStateid);
                }
                if o.access & need == 0 {
                    return Err(V4Error::OpenMode);
                }
                let rw = o.access & ACCESS_WRITE != 0;
                let owner: Arc<[u8]> = match st.lock_owners.get_key_value(owner) {
                    Some((k, files)) => {
                        if let Some(other) = files.get(&a.file).copied() {
                            if let Some(Entry {
                                body: Body::Lock(l),
                                revoked: None,
                                ..
                            }) = st.stateids.get(&other)
                            {
                                return Ok((other, l.held.clone(), false, rw));
                            }
                        }
                        k.clone()
                    }
                    None => {
                        if st.lock_owners.len() >= self.cfg.limits.lock_owners_per_client {
                            return Err(self.stats.hit(Limit::LockOwnersPerClient));
                        }
                        Arc::from(owner)
                    }
                };
                let held = Arc::new(LockHeld::default());
                let other = st.add(
                    self,
                    Entry {
                        seqid: 0,
                        file: a.file,
                        revoked: None,
                        body: Body::Lock(LockBody {
                            owner: owner.clone(),
                            open: open.other,
                            held: held.clone(),
                        }),
                    },
                )?;
                if let Some(Entry {
                    body: Body::Open(o),
                    ..
                }) = st.stateids.get_mut(&open.other)
                {
                    o.locks.push(other);
                }
                st.lock_owners
                    .entry(owner.clone())
                    .or_default()
                    .insert(a.file, other);
                debug_assert!(st.lock_owners.len() <= self.cfg.limits.lock_owners_per_client);
                self.files
                    .shard(&a.file)
                    .entry(a.file)
                    .or_default()
                    .lockers
                    .push(Locker {
                        client: c.id(),
                        owner,
                        held: held.clone(),
                    });
                // Seqid 0 until granted: the first grant makes it 1.
                Ok((other, held, true, rw))
            }
        }
    }

    /// Whose lock `conflict` is, when one of our lock owners holds a lock
    /// there (not `asker`): its client and owner.
    fn owner_of(
        &self,
        file: &FileKey,
        conflict: &Conflict,
        asker: &Arc<LockHeld>,
    ) -> Option<(ClientId, Vec<u8>)> {
        let lockers: Vec<Locker> = self
            .files
            .shard(file)
            .get(file)
            .map(|f| f.lockers.clone())
            .unwrap_or_default();
        lockers
            .into_iter()
            .filter(|l| !Arc::ptr_eq(&l.held, asker))
            .find(|l| l.held.overlaps(conflict.range))
            .map(|l| (l.client, l.owner.to_vec()))
    }

    /// LOCKT (§18.11): whether `owner` of this client could take the
    /// lock. NFS4ERR_DENIED with the lock in the way; NFS4ERR_GRACE in the
    /// grace period; NFS4ERR_INVAL for a bad range. The owner's own locks
    /// never conflict.
    pub fn lockt(
        &self,
        c: &ClientHandle,
        a: &LocktArgs<'_>,
        opener: &dyn OpenLockFile,
    ) -> Result<(), V4Error> {
        let LocktArgs {
            owner,
            file,
            write,
            offset,
            length,
        } = *a;
        let r = fcntl_range(offset, length)?;
        if self.in_grace() {
            return Err(V4Error::Grace);
        }
        let own = {
            let st = locked(&c.0.st);
            if c.0.is_expired() {
                return Err(V4Error::Expired);
            }
            st.lock_owners
                .get(owner)
                .and_then(|f| f.get(&file))
                .and_then(|o| st.stateids.get(o))
                .and_then(|e| match &e.body {
                    Body::Lock(l) => Some(l.held.clone()),
                    _ => None,
                })
        };
        // Through the owner's own descriptor (its locks do not count),
        // else a fresh one (opened with no lock held).
        let tested = match own.as_ref().and_then(|h| h.test(write, r)) {
            Some(t) => t,
            // Read-only: a test takes nothing, and breaks no read lease.
            None => opener
                .open_lock_file(false)
                .and_then(|f| f.test(kind(write), r)),
        };
        match tested.map_err(|e| V4Error::from_fs(&e))? {
            None => Ok(()),
            Some(conflict) => {
                let asker = own.unwrap_or_default();
                Err(denied_of(
                    &conflict,
                    self.owner_of(&file, &conflict, &asker),
                ))
            }
        }
    }

    /// LOCKU (§18.12): lets go of the range (nothing held there is no
    /// error); the lock stateid with its seqid bumped. Errors: the
    /// stateid's, NFS4ERR_INVAL for a bad range.
    pub fn locku(
        &self,
        c: &ClientHandle,
        sid: &Stateid,
        file: FileKey,
        offset: u64,
        length: u64,
    ) -> Result<Stateid, V4Error> {
        let r = fcntl_range(offset, length)?;
        let held = {
            let mut st = locked(&c.0.st);
            let e = st.find_mut(self, c.0.is_expired(), sid)?;
            match &e.body {
                Body::Lock(l) if e.file == file => l.held.clone(),
                _ => return Err(V4Error::BadStateid),
            }
        };
        let dropped = held.release(r)?;
        // The descriptor closes here, with no lock held.
        drop(dropped);
        let mut st = locked(&c.0.st);
        let e = st.stateids.get_mut(&sid.other).ok_or(V4Error::BadStateid)?;
        let seqid = e.bump();
        Ok(Stateid {
            seqid,
            other: sid.other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_convert() {
        let r = |o, l| fcntl_range(o, l);
        assert_eq!(r(0, 0), Err(V4Error::Inval));
        assert_eq!(r(2, u64::MAX - 1), Err(V4Error::Inval), "past 2^64 - 1");
        assert_eq!(r(1, u64::MAX - 1), Ok(LockRange { start: 1, len: 0 }));
        assert_eq!(r(0, u64::MAX), Ok(LockRange { start: 0, len: 0 }));
        assert_eq!(r(10, 5), Ok(LockRange { start: 10, len: 5 }));
        let max = i64::MAX as u64;
        assert_eq!(
            r(max - 1, 2),
            Ok(LockRange {
                start: max - 1,
                len: 2
            })
        );
        assert_eq!(
            r(max - 1, 3),
            Ok(LockRange {
                start: max - 1,
                len: 0
            }),
            "past fcntl's reach: to the end"
        );
        assert_eq!(r(u64::MAX - 5, 5), Ok(LockRange { start: max, len: 0 }));
    }
}
