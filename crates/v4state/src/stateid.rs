//! Stateids (RFC 8881 §8.2) as calls use them: the check of a stateid
//! for use, TEST_STATEID (§18.48), FREE_STATEID (§18.38), and freeing a
//! stateid with everything hanging off it (CLOSE, FREE_STATEID, a LOCK
//! that did not take, and the reaper free through it).
//!
//! What a stateid stands for, each client's table of them and the rules
//! of their seqids are in `table`; the per-file shares and lockers a
//! freed stateid gives back are in `files`.

use std::sync::Arc;

use crate::error::V4Error;
use crate::ids::{FileKey, Stateid};
use crate::lockfile::LockHeld;
use crate::registry::ClientHandle;
use crate::shards::locked;
use crate::table::{forget_owner, Body, ClientState, Entry, LockBody};
use crate::State;

pub use crate::table::StateKind;

/// What a valid stateid names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateInfo {
    pub kind: StateKind,
    pub file: FileKey,
    /// Its current seqid.
    pub seqid: u32,
}

/// Open stateids' own table entries, for the tests of the stateid rules.
#[cfg(test)]
pub(crate) fn add_test_delegation(s: &State, c: &ClientHandle, file: FileKey) -> Stateid {
    let mut st = locked(&c.0.st);
    let other = st
        .add(
            s,
            Entry {
                seqid: 1,
                file,
                revoked: None,
                body: Body::Delegation {
                    write: false,
                    fh: Arc::from(&b"fh"[..]),
                    recalled_ms: None,
                    change: 0,
                },
            },
        )
        .unwrap();
    Stateid { seqid: 1, other }
}

impl State {
    /// Checks `sid` for use by `c` on `file` (None: any file): what it
    /// names. Errors: NFS4ERR_BAD_STATEID for a special, unknown or
    /// forged one or one of another file, NFS4ERR_STALE_STATEID for
    /// another instance's, NFS4ERR_EXPIRED when the client's lease ran
    /// out, NFS4ERR_ADMIN_REVOKED / NFS4ERR_DELEG_REVOKED for revoked
    /// state, NFS4ERR_OLD_STATEID for an older seqid (0 is the current
    /// one) and NFS4ERR_BAD_STATEID for a newer one.
    pub fn check_stateid(
        &self,
        c: &ClientHandle,
        sid: &Stateid,
        file: Option<FileKey>,
    ) -> Result<StateInfo, V4Error> {
        let mut st = locked(&c.0.st);
        let e = st.find_mut(self, c.0.is_expired(), sid)?;
        if file.is_some_and(|f| f != e.file) {
            return Err(V4Error::BadStateid);
        }
        Ok(StateInfo {
            kind: e.kind(),
            file: e.file,
            seqid: e.seqid,
        })
    }

    /// TEST_STATEID (§18.48): each stateid's status for `c`: Ok,
    /// BAD_STATEID (special, unknown, another instance's or client's),
    /// OLD_STATEID, EXPIRED, ADMIN_REVOKED or DELEG_REVOKED.
    pub fn test_stateids(&self, c: &ClientHandle, sids: &[Stateid]) -> Vec<Result<(), V4Error>> {
        let mut st = locked(&c.0.st);
        sids.iter()
            .map(|sid| match st.find_mut(self, c.0.is_expired(), sid) {
                Ok(_) => Ok(()),
                Err(V4Error::StaleStateid) => Err(V4Error::BadStateid),
                Err(e) => Err(e),
            })
            .collect()
    }

    /// FREE_STATEID (§18.38): frees a lock stateid with no locks held, or
    /// any revoked stateid. NFS4ERR_LOCKS_HELD for a lock stateid with
    /// locks, an open (CLOSE it) or a delegation (return it); the errors
    /// of a stateid check otherwise.
    pub fn free_stateid(&self, c: &ClientHandle, sid: &Stateid) -> Result<(), V4Error> {
        let freed = {
            let mut st = locked(&c.0.st);
            match st.find_mut(self, c.0.is_expired(), sid) {
                Ok(e) => match &e.body {
                    Body::Lock(l) if !l.held.holds_any() => {}
                    _ => return Err(V4Error::LocksHeld),
                },
                // Revoked state of any kind is freed.
                Err(V4Error::AdminRevoked | V4Error::DelegRevoked) => {}
                Err(e) => return Err(e),
            }
            self.release_stateid(&mut st, &sid.other)
        };
        // Closing freed descriptors (none hold locks here) outside locks.
        drop(freed);
        Ok(())
    }

    /// Removes stateid `other` of a client and everything hanging off it
    /// (an open's lock stateids, share reservations, owners left with
    /// nothing): the lock descriptors it freed, for the caller to drop
    /// with no lock held (closing them releases their kernel locks).
    pub(crate) fn release_stateid(
        &self,
        st: &mut ClientState,
        other: &[u8; 12],
    ) -> Vec<Arc<LockHeld>> {
        let mut out = Vec::new();
        let Some(e) = st.take(self, other) else {
            return out;
        };
        let revoked = e.revoked.is_some();
        match e.body {
            Body::Open(o) => {
                for l in &o.locks {
                    if let Some(le) = st.take(self, l) {
                        if let Body::Lock(lb) = le.body {
                            self.forget_lock(st, &le.file, l, lb, &mut out);
                        }
                    }
                }
                if !revoked {
                    self.unshare(&e.file, o.access, o.deny);
                }
                forget_owner(&mut st.open_owners, &o.owner, &e.file, other);
            }
            Body::Lock(lb) => {
                if let Some(Entry {
                    body: Body::Open(o),
                    ..
                }) = st.stateids.get_mut(&lb.open)
                {
                    o.locks.retain(|x| x != other);
                }
                self.forget_lock(st, &e.file, other, lb, &mut out);
            }
            Body::Delegation { .. } => {
                if !revoked {
                    st.delegs = st.delegs.saturating_sub(1);
                    self.delegations
                        .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                    self.unlist_deleg(&e.file, other);
                }
            }
        }
        out
    }

    /// Forgets lock stateid body `lb` on `file` (taken out of the table):
    /// out of its owner and the file's lockers; its descriptor goes to
    /// `out`, to be dropped with no lock held.
    fn forget_lock(
        &self,
        st: &mut ClientState,
        file: &FileKey,
        other: &[u8; 12],
        lb: LockBody,
        out: &mut Vec<Arc<LockHeld>>,
    ) {
        forget_owner(&mut st.lock_owners, &lb.owner, file, other);
        let mut files = self.files.shard(file);
        if let Some(f) = files.get_mut(file) {
            f.lockers.retain(|l| !Arc::ptr_eq(&l.held, &lb.held));
            if f.is_empty() && f.lockers.is_empty() {
                files.remove(file);
            }
        }
        out.push(lb.held);
    }
}
