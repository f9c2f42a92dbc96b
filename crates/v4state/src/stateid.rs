//! Stateids (RFC 8881 §8.2): each client's table of them, the checks a
//! stateid passes before use, TEST_STATEID (§18.48) and FREE_STATEID
//! (§18.38).
//!
//! A stateid's `other` is made by `ids::Minter` (boot
//! verifier, counter, MAC); its `seqid` starts at 1 and goes up by one on
//! every change of the state it names (an OPEN upgrade, OPEN_DOWNGRADE,
//! LOCK, LOCKU).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::client::{Client, ClientHandle, ClientState};
use crate::error::V4Error;
use crate::ids::{next_seqid, FileKey, Minter, Origin, Stateid};
use crate::shards::locked;
use crate::{Limit, State};

/// What a stateid stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateKind {
    Open,
    Lock,
    Delegation,
}

/// Why a stateid no longer works while it is still in the table (until
/// FREE_STATEID).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Revoked {
    Admin,
}

/// An open's share state (§9.1).
#[derive(Debug, Clone, Default)]
pub(crate) struct OpenBody {
    pub(crate) owner: Arc<[u8]>,
    /// OPEN4_SHARE_ACCESS_* bits held (1 read, 2 write).
    pub(crate) access: u32,
    /// OPEN4_SHARE_DENY_* bits held.
    pub(crate) deny: u32,
    /// Which access values (1..=3) and deny values (0..=3) OPENs asked
    /// for, as bits `1 << value`: OPEN_DOWNGRADE may only go back to one
    /// of them (knfsd's st_access_bmap; RFC 8881 §18.18.3).
    pub(crate) access_seen: u8,
    pub(crate) deny_seen: u8,
    /// Its lock stateids (open_to_lock_owner).
    pub(crate) locks: Vec<[u8; 12]>,
}

/// A lock owner's state on one file (§9.4).
#[derive(Debug, Clone)]
pub(crate) struct LockBody {
    pub(crate) owner: Arc<[u8]>,
    /// The open it came from.
    pub(crate) open: [u8; 12],
    pub(crate) held: Arc<crate::lock::LockHeld>,
}

#[derive(Debug, Clone)]
pub(crate) enum Body {
    Open(OpenBody),
    Lock(LockBody),
    /// A delegation (granted by the delegation work to come; only tests
    /// make one now).
    #[cfg_attr(not(test), allow(dead_code))]
    Delegation {
        write: bool,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) seqid: u32,
    pub(crate) file: FileKey,
    pub(crate) revoked: Option<Revoked>,
    pub(crate) body: Body,
}

impl Entry {
    pub(crate) fn kind(&self) -> StateKind {
        match self.body {
            Body::Open(_) => StateKind::Open,
            Body::Lock(_) => StateKind::Lock,
            Body::Delegation { .. } => StateKind::Delegation,
        }
    }

    pub(crate) fn bump(&mut self) -> u32 {
        let before = self.seqid;
        self.seqid = next_seqid(self.seqid);
        debug_assert!(self.seqid != before && self.seqid != 0);
        self.seqid
    }
}

/// Checks a client's stateid seqid against the state's current one
/// (§8.2.2): 0 is the current one; an older one is OLD_STATEID, a newer
/// one (never issued) BAD_STATEID.
pub(crate) fn check_seqid(given: u32, current: u32) -> Result<(), V4Error> {
    if given == 0 || given == current {
        return Ok(());
    }
    // Wrapping comparison: seqids wrap at 2^32 (skipping 0).
    if (given.wrapping_sub(current) as i32) > 0 {
        Err(V4Error::BadStateid)
    } else {
        Err(V4Error::OldStateid)
    }
}

/// Whether `other` could be one of ours: STALE_STATEID when another
/// instance issued it, BAD_STATEID when no instance did (its MAC is
/// wrong).
pub(crate) fn check_other(ids: &Minter, other: &[u8; 12]) -> Result<(), V4Error> {
    match ids.origin(other) {
        Origin::Ours => Ok(()),
        Origin::OtherInstance => Err(V4Error::StaleStateid),
        Origin::Forged => Err(V4Error::BadStateid),
    }
}

/// What a valid stateid names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateInfo {
    pub kind: StateKind,
    pub file: FileKey,
    /// Its current seqid.
    pub seqid: u32,
}

impl ClientState {
    /// The entry `sid` names, checked (§8.2.2, §8.2.4): NFS4ERR_BAD_STATEID
    /// for a special or unknown one, NFS4ERR_STALE_STATEID for another
    /// instance's, NFS4ERR_EXPIRED when the client's lease ran out,
    /// NFS4ERR_ADMIN_REVOKED / NFS4ERR_DELEG_REVOKED for revoked state,
    /// NFS4ERR_OLD_STATEID / NFS4ERR_BAD_STATEID for a seqid other than
    /// the current one (0 stands for the current one).
    pub(crate) fn find_mut(
        &mut self,
        s: &State,
        c: &Client,
        sid: &Stateid,
    ) -> Result<&mut Entry, V4Error> {
        if sid.special().is_some() {
            return Err(V4Error::BadStateid);
        }
        check_other(&s.ids, &sid.other)?;
        if c.is_expired() {
            return Err(V4Error::Expired);
        }
        let e = self
            .stateids
            .get_mut(&sid.other)
            .ok_or(V4Error::BadStateid)?;
        if e.revoked.is_some() {
            return Err(match e.body {
                Body::Delegation { .. } => V4Error::DelegRevoked,
                _ => V4Error::AdminRevoked,
            });
        }
        check_seqid(sid.seqid, e.seqid)?;
        Ok(e)
    }

    /// A new stateid for `e`, within the client's and the server's bounds
    /// (NFS4ERR_RESOURCE past them).
    pub(crate) fn add(&mut self, s: &State, e: Entry) -> Result<[u8; 12], V4Error> {
        if self.stateids.len() >= s.cfg.limits.stateids_per_client {
            return Err(s.stats.hit(Limit::StateidsPerClient));
        }
        let total = s
            .total_stateids
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < s.cfg.limits.total_stateids).then_some(n + 1)
            });
        if total.is_err() {
            return Err(s.stats.hit(Limit::TotalStateids));
        }
        let mut other = s.ids.stateid_other();
        // The counter wraps after 2^32 stateids in one run: skip live ones.
        while self.stateids.contains_key(&other) {
            other = s.ids.stateid_other();
        }
        self.stateids.insert(other, e);
        debug_assert!(self.stateids.len() <= s.cfg.limits.stateids_per_client);
        Ok(other)
    }

    /// Takes stateid `other` out of the table (and out of the count).
    pub(crate) fn take(&mut self, s: &State, other: &[u8; 12]) -> Option<Entry> {
        let e = self.stateids.remove(other)?;
        if e.revoked.is_some() {
            self.revoked -= 1;
        }
        let before = s.total_stateids.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(before > 0);
        Some(e)
    }
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
                body: Body::Delegation { write: false },
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
        let e = st.find_mut(self, &c.0, sid)?;
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
            .map(|sid| match st.find_mut(self, &c.0, sid) {
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
            match st.find_mut(self, &c.0, sid) {
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
    ) -> Vec<Arc<crate::lock::LockHeld>> {
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
            Body::Delegation { .. } => {}
        }
        out
    }
}

/// Owner `owner` no longer has stateid `other` on `file`; an owner left
/// with none goes.
pub(crate) fn forget_owner(
    owners: &mut crate::client::Owners,
    owner: &Arc<[u8]>,
    file: &FileKey,
    other: &[u8; 12],
) {
    if let Some(files) = owners.get_mut(owner) {
        if files.get(file) == Some(other) {
            files.remove(file);
        }
        if files.is_empty() {
            owners.remove(owner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seqid_rules() {
        assert_eq!(check_seqid(0, 9), Ok(()));
        assert_eq!(check_seqid(9, 9), Ok(()));
        assert_eq!(check_seqid(8, 9), Err(V4Error::OldStateid));
        assert_eq!(check_seqid(10, 9), Err(V4Error::BadStateid));
        // Across the wrap: 1 follows u32::MAX.
        assert_eq!(next_seqid(u32::MAX), 1);
        assert_eq!(check_seqid(u32::MAX, 1), Err(V4Error::OldStateid));
        assert_eq!(check_seqid(2, u32::MAX), Err(V4Error::BadStateid));
    }
}
