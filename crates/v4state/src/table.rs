//! A client's table of state (RFC 8881 §8.2): its stateids and what each
//! stands for (an open, a lock owner's locks on a file, a delegation),
//! its open and lock owners, its sessions' ids, and the checks a stateid
//! passes before use (§8.2.2, §8.2.4).
//!
//! A stateid's `other` is made by `ids::Minter` (boot verifier, counter,
//! MAC); its `seqid` starts at 1 and goes up by one on every change of
//! the state it names (an OPEN upgrade, OPEN_DOWNGRADE, LOCK, LOCKU).
//!
//! Plain data below the client records (`registry::Client` holds a
//! table); the calls that use and free stateids are above, in `stateid`,
//! `open` and `lock`.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::error::V4Error;
use crate::ids::{next_seqid, FileKey, Minter, Origin, SessionId, Stateid};
use crate::lockfile::LockHeld;
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
    /// A delegation recalled and not returned in time (§10.4.6).
    Deleg,
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
    pub(crate) held: Arc<LockHeld>,
}

#[derive(Debug, Clone)]
pub(crate) enum Body {
    Open(OpenBody),
    Lock(LockBody),
    /// A delegation (§10.4): `fh` is the file's handle, for CB_RECALL;
    /// `recalled_ms` when a recall was sent (the state's clock).
    Delegation {
        write: bool,
        fh: Arc<[u8]>,
        recalled_ms: Option<u64>,
        /// The file's change attribute when granted (CB_GETATTR's
        /// reference, RFC 8881 §10.4.3).
        change: u64,
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

/// The owners of a client (open or lock owners): each one's stateid
/// per file.
pub(crate) type Owners = HashMap<Arc<[u8]>, HashMap<FileKey, [u8; 12]>>;

/// What a client holds.
#[derive(Default)]
pub(crate) struct ClientState {
    pub(crate) sessions: Vec<SessionId>,
    pub(crate) stateids: HashMap<[u8; 12], Entry>,
    pub(crate) open_owners: Owners,
    pub(crate) lock_owners: Owners,
    /// Stateids revoked and not freed yet.
    pub(crate) revoked: usize,
    /// Of those, delegations revoked for want of a DELEGRETURN
    /// (SEQ4_STATUS_RECALLABLE_STATE_REVOKED).
    pub(crate) deleg_revoked: usize,
    /// Delegations held (not revoked).
    pub(crate) delegs: usize,
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

/// Owner `owner` no longer has stateid `other` on `file`; an owner left
/// with none goes.
pub(crate) fn forget_owner(
    owners: &mut Owners,
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

impl ClientState {
    /// Whether it holds sessions or state (DESTROY_CLIENTID refuses then,
    /// and §18.35.5's client collision keeps the record).
    pub(crate) fn has_state(&self) -> bool {
        !self.sessions.is_empty() || !self.stateids.is_empty()
    }

    /// The entry `sid` names, checked (§8.2.2, §8.2.4), for a client that
    /// is `expired` or not: NFS4ERR_BAD_STATEID for a special or unknown
    /// one, NFS4ERR_STALE_STATEID for another instance's, NFS4ERR_EXPIRED
    /// when the client's lease ran out, NFS4ERR_ADMIN_REVOKED /
    /// NFS4ERR_DELEG_REVOKED for revoked state, NFS4ERR_OLD_STATEID /
    /// NFS4ERR_BAD_STATEID for a seqid other than the current one (0
    /// stands for the current one).
    pub(crate) fn find_mut(
        &mut self,
        s: &State,
        expired: bool,
        sid: &Stateid,
    ) -> Result<&mut Entry, V4Error> {
        if sid.special().is_some() {
            return Err(V4Error::BadStateid);
        }
        check_other(&s.ids, &sid.other)?;
        if expired {
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
        if e.revoked == Some(Revoked::Deleg) {
            self.deleg_revoked -= 1;
        }
        let before = s.total_stateids.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(before > 0);
        Some(e)
    }

    /// The access of open stateid `open` (0 if gone).
    pub(crate) fn open_access(&self, open: &[u8; 12]) -> u32 {
        match self.stateids.get(open) {
            Some(Entry {
                body: Body::Open(o),
                ..
            }) => o.access,
            _ => 0,
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
