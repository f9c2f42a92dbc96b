//! Opens and share reservations (RFC 8881 §9.1): OPEN (§18.16),
//! OPEN_DOWNGRADE (§18.18), CLOSE (§18.2), and the share check of I/O
//! (§9.1.2).
//!
//! One open stateid per (open owner, file); a second OPEN by the owner
//! upgrades it (access and deny bits merge). Share reservations hold
//! across all clients and owners: an OPEN whose access another open
//! denies, or whose deny another open's access hits, is
//! NFS4ERR_SHARE_DENIED. In 4.1 open owners carry no sequencing (the
//! session's slots do) and there is no OPEN_CONFIRM.
//!
//! Above the stateids: the share counts live in `files`, and CLOSE frees
//! through `stateid`.

use std::sync::Arc;

use crate::error::V4Error;
use crate::ids::{FileKey, Special, Stateid};
use crate::registry::ClientHandle;
use crate::shards::locked;
use crate::table::{Body, Entry, OpenBody, StateKind};
use crate::{Limit, State};

/// OPEN4_SHARE_ACCESS_READ.
pub const ACCESS_READ: u32 = 1;
/// OPEN4_SHARE_ACCESS_WRITE.
pub const ACCESS_WRITE: u32 = 2;
/// OPEN4_SHARE_ACCESS_BOTH.
pub const ACCESS_BOTH: u32 = 3;
/// OPEN4_SHARE_DENY_NONE.
pub const DENY_NONE: u32 = 0;
/// OPEN4_SHARE_DENY_READ.
pub const DENY_READ: u32 = 1;
/// OPEN4_SHARE_DENY_WRITE.
pub const DENY_WRITE: u32 = 2;
/// OPEN4_SHARE_DENY_BOTH.
pub const DENY_BOTH: u32 = 3;

/// How an OPEN claims the file (open_claim_type4, those this state
/// tells apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// CLAIM_NULL or CLAIM_FH: a new open.
    New,
    /// CLAIM_PREVIOUS: reclaim of an open held before a restart.
    Previous,
}

/// OPEN's arguments as this state needs them (the caller has resolved,
/// created or truncated the file and checked permissions; `access` has
/// no OPEN4_SHARE_WANT bits).
#[derive(Debug, Clone, Copy)]
pub struct OpenArgs<'a> {
    pub owner: &'a [u8],
    pub file: FileKey,
    pub access: u32,
    pub deny: u32,
    pub claim: Claim,
}

/// OPEN's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    pub stateid: Stateid,
    /// The access and deny now held (an upgrade merges).
    pub access: u32,
    pub deny: u32,
    /// An existing open of the owner was upgraded.
    pub upgraded: bool,
}

fn check_bits(access: u32, deny: u32) -> Result<(), V4Error> {
    if !(1..=3).contains(&access) || deny > 3 {
        return Err(V4Error::Inval);
    }
    Ok(())
}

impl State {
    /// OPEN (§18.16): the open stateid of (owner, file), new or upgraded.
    /// Errors: NFS4ERR_INVAL (bad share bits), NFS4ERR_SHARE_DENIED,
    /// NFS4ERR_GRACE (a new open in the grace period), NFS4ERR_NO_GRACE
    /// (a reclaim outside it, or by a client that may not reclaim),
    /// NFS4ERR_EXPIRED, NFS4ERR_RESOURCE (owner or stateid bounds).
    pub fn open(&self, c: &ClientHandle, a: &OpenArgs<'_>) -> Result<Opened, V4Error> {
        check_bits(a.access, a.deny)?;
        self.grace_check(&c.0, a.claim == Claim::Previous)?;
        let mut st = locked(&c.0.st);
        if c.0.is_expired() {
            return Err(V4Error::Expired);
        }
        let owner: Arc<[u8]> = match st.open_owners.get_key_value(a.owner) {
            Some((k, _)) => k.clone(),
            None => {
                if st.open_owners.len() >= self.cfg.limits.open_owners_per_client {
                    return Err(self.stats.hit(Limit::OpenOwnersPerClient));
                }
                Arc::from(a.owner)
            }
        };
        let existing = st
            .open_owners
            .get(&owner)
            .and_then(|f| f.get(&a.file))
            .copied()
            .filter(|o| st.stateids.get(o).is_some_and(|e| e.revoked.is_none()));
        if let Some(other) = existing {
            let Some(Entry {
                body: Body::Open(o),
                seqid,
                ..
            }) = st.stateids.get_mut(&other)
            else {
                return Err(V4Error::ServerFault);
            };
            {
                let mut files = self.files.shard(&a.file);
                let f = files.entry(a.file).or_default();
                if f.conflicts((o.access, o.deny), a.access, a.deny) {
                    return Err(V4Error::ShareDenied);
                }
                f.sub(o.access, o.deny);
                o.access |= a.access;
                o.deny |= a.deny;
                f.add(o.access, o.deny);
            }
            o.access_seen |= 1 << a.access;
            o.deny_seen |= 1 << a.deny;
            let (access, deny) = (o.access, o.deny);
            let before = *seqid;
            *seqid = crate::ids::next_seqid(*seqid);
            debug_assert!(*seqid != before);
            return Ok(Opened {
                stateid: Stateid {
                    seqid: *seqid,
                    other,
                },
                access,
                deny,
                upgraded: true,
            });
        }
        // A new open: check, take a stateid, then reserve.
        {
            let files = self.files.shard(&a.file);
            if files
                .get(&a.file)
                .is_some_and(|f| f.conflicts((0, 0), a.access, a.deny))
            {
                return Err(V4Error::ShareDenied);
            }
        }
        let other = st.add(
            self,
            Entry {
                seqid: 1,
                file: a.file,
                revoked: None,
                body: Body::Open(OpenBody {
                    owner: owner.clone(),
                    access: a.access,
                    deny: a.deny,
                    access_seen: 1 << a.access,
                    deny_seen: 1 << a.deny,
                    locks: Vec::new(),
                }),
            },
        )?;
        {
            let mut files = self.files.shard(&a.file);
            let f = files.entry(a.file).or_default();
            // Checked above; the shard was let go meanwhile, so check
            // again (another client may have opened since).
            if f.conflicts((0, 0), a.access, a.deny) {
                drop(files);
                st.take(self, &other);
                return Err(V4Error::ShareDenied);
            }
            f.add(a.access, a.deny);
        }
        st.open_owners
            .entry(owner)
            .or_default()
            .insert(a.file, other);
        debug_assert!(st.open_owners.len() <= self.cfg.limits.open_owners_per_client);
        Ok(Opened {
            stateid: Stateid { seqid: 1, other },
            access: a.access,
            deny: a.deny,
            upgraded: false,
        })
    }

    /// OPEN_DOWNGRADE (§18.18): the open keeps `access` and `deny`, which
    /// must be within what it holds and be what one of its OPENs asked
    /// for (else NFS4ERR_INVAL). The new stateid.
    pub fn open_downgrade(
        &self,
        c: &ClientHandle,
        sid: &Stateid,
        access: u32,
        deny: u32,
    ) -> Result<Stateid, V4Error> {
        check_bits(access, deny)?;
        let mut st = locked(&c.0.st);
        let e = st.find_mut(self, c.0.is_expired(), sid)?;
        let file = e.file;
        let Body::Open(o) = &mut e.body else {
            return Err(V4Error::BadStateid);
        };
        if access & !o.access != 0
            || deny & !o.deny != 0
            || o.access_seen & (1 << access) == 0
            || o.deny_seen & (1 << deny) == 0
        {
            return Err(V4Error::Inval);
        }
        {
            let mut files = self.files.shard(&file);
            let f = files.entry(file).or_default();
            f.sub(o.access, o.deny);
            f.add(access, deny);
        }
        o.access = access;
        o.deny = deny;
        // Only what lies within the new bits can be gone back to.
        o.access_seen &= (0..4u8)
            .filter(|v| u32::from(*v) & !access == 0)
            .fold(0, |m, v| m | 1 << v);
        o.deny_seen &= (0..4u8)
            .filter(|v| u32::from(*v) & !deny == 0)
            .fold(0, |m, v| m | 1 << v);
        o.access_seen |= 1 << access;
        o.deny_seen |= 1 << deny;
        let seqid = e.bump();
        Ok(Stateid {
            seqid,
            other: sid.other,
        })
    }

    /// CLOSE (§18.2): the open goes, with its share reservation and its
    /// lock stateids (their locks are released, as knfsd does). The
    /// caller replies with the invalid special stateid (RFC 8881 §18.2.3).
    pub fn close(&self, c: &ClientHandle, sid: &Stateid) -> Result<(), V4Error> {
        let freed = {
            let mut st = locked(&c.0.st);
            let e = st.find_mut(self, c.0.is_expired(), sid)?;
            if e.kind() != StateKind::Open {
                return Err(V4Error::BadStateid);
            }
            self.release_stateid(&mut st, &sid.other)
        };
        // Dropped with no lock held: closing descriptors releases locks.
        drop(freed);
        Ok(())
    }

    /// Checks the stateid of a READ (`write` false) or WRITE/SETATTR of
    /// size on `file` (§8.2.3, §9.1.2): the anonymous stateid, and the
    /// READ bypass for a write, are refused (NFS4ERR_LOCKED) where an open
    /// denies that access, and NFS4ERR_GRACE in the grace period; the
    /// bypass reads anything; a regular stateid must be of this file
    /// (NFS4ERR_BAD_STATEID) and its open must allow the access
    /// (NFS4ERR_OPENMODE: writing needs write access, reading either);
    /// the current stateid must have been substituted by the caller.
    /// What it names (None: a special stateid).
    pub fn check_io(
        &self,
        c: &ClientHandle,
        sid: &Stateid,
        file: FileKey,
        write: bool,
    ) -> Result<Option<StateKind>, V4Error> {
        match sid.special() {
            Some(Special::Bypass) if !write => return Ok(None),
            Some(Special::Anonymous | Special::Bypass) => {
                if self.in_grace() {
                    return Err(V4Error::Grace);
                }
                let bit = if write { ACCESS_WRITE } else { ACCESS_READ };
                return match self.share_denies(&file, bit) {
                    true => Err(V4Error::Locked),
                    false => Ok(None),
                };
            }
            Some(Special::Current | Special::Invalid) => return Err(V4Error::BadStateid),
            None => {}
        }
        let mut st = locked(&c.0.st);
        let e = st.find_mut(self, c.0.is_expired(), sid)?;
        if e.file != file {
            return Err(V4Error::BadStateid);
        }
        let kind = e.kind();
        let access = match &e.body {
            Body::Open(o) => o.access,
            Body::Lock(l) => {
                let open = l.open;
                st.open_access(&open)
            }
            Body::Delegation { write, .. } => match write {
                true => ACCESS_BOTH,
                false => ACCESS_READ,
            },
        };
        if write && access & ACCESS_WRITE == 0 {
            return Err(V4Error::OpenMode);
        }
        Ok(Some(kind))
    }
}
