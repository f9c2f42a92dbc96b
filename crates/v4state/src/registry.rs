//! Client records (RFC 8881 §2.4): one per client id, unconfirmed from
//! its EXCHANGE_ID until its first CREATE_SESSION, confirmed after; the
//! registry finding them by id and by owner; the handle the calls of a
//! compound use. And what concerns one client alone: its lease, its
//! durable record, its part in the grace period (reclaims,
//! RECLAIM_COMPLETE, §18.51), whether it has revoked state.
//!
//! Below the sessions (a session holds its client); EXCHANGE_ID and
//! DESTROY_CLIENTID, which drop clients with their sessions, are above
//! them in `client`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::channel::SessionCreated;
use crate::error::V4Error;
use crate::ids::{ClientId, Principal, Verifier};
use crate::shards::locked;
use crate::table::ClientState;
use crate::State;

/// One client record.
pub(crate) struct Client {
    pub(crate) id: ClientId,
    pub(crate) owner: Vec<u8>,
    pub(crate) verifier: Verifier,
    pub(crate) principal: Principal,
    /// What every request writes, on a cache line of its own (the flags
    /// below are read by every request: knfsd's per-CPU counters lesson,
    /// no line both written and read by all workers).
    pub(crate) hot: Hot,
    /// The state's clock (for the end of a request, without a clone of
    /// the state's `Arc` per request).
    pub(crate) clock: Arc<crate::ids::Clock>,
    /// Set once, when it expires or is destroyed or replaced: its
    /// sessions are gone and its stateids answer EXPIRED until freed.
    pub(crate) expired: AtomicBool,
    pub(crate) confirmed: AtomicBool,
    /// The embedder says its callback path is down.
    pub(crate) cb_down: AtomicBool,
    /// The embedder says its callback path answered (CB_NULL): only
    /// then may it get delegations.
    pub(crate) cb_up: AtomicBool,
    /// It was recorded before the restart: it may reclaim in the grace
    /// period.
    pub(crate) may_reclaim: AtomicBool,
    /// It sent RECLAIM_COMPLETE.
    pub(crate) reclaim_done: AtomicBool,
    /// It may have revoked stateids not freed yet (see `has_revoked`).
    pub(crate) has_revoked: AtomicBool,
    /// The last CREATE_SESSION sequence id it used (mirrors `cs`, for
    /// EXCHANGE_ID's reply without taking `cs`).
    pub(crate) cs_seqid: AtomicU32,
    pub(crate) cs: Mutex<CsSlot>,
    pub(crate) st: Mutex<ClientState>,
}

/// A client's counters every request writes.
#[repr(align(128))]
pub(crate) struct Hot {
    /// When its lease was last renewed (the state's clock, ms).
    pub(crate) renewed_ms: AtomicU64,
    /// Requests of it in progress (SEQUENCE to reply): its lease does not
    /// run out under them.
    pub(crate) busy: AtomicU32,
}

/// The CREATE_SESSION slot (§18.36.4): the sequence id of the last one
/// and its result, replayed to a retransmission.
#[derive(Default)]
pub(crate) struct CsSlot {
    pub(crate) seqid: u32,
    pub(crate) cached: Option<SessionCreated>,
}

impl Client {
    pub(crate) fn is_expired(&self) -> bool {
        self.expired.load(Ordering::Acquire)
    }

    pub(crate) fn renew(&self, now_ms: u64) {
        // The clock is coarse: most requests find it renewed already and
        // only read the line.
        if self.hot.renewed_ms.load(Ordering::Relaxed) < now_ms {
            self.hot.renewed_ms.fetch_max(now_ms, Ordering::Relaxed);
        }
    }
}

/// A client, as SEQUENCE finds it, for the calls of the rest of the
/// compound.
#[derive(Clone)]
pub struct ClientHandle(pub(crate) Arc<Client>);

impl ClientHandle {
    pub fn id(&self) -> ClientId {
        self.0.id
    }

    pub fn owner(&self) -> &[u8] {
        &self.0.owner
    }

    /// Whether its lease ran out (or it was destroyed) meanwhile.
    pub fn is_expired(&self) -> bool {
        self.0.is_expired()
    }

    /// Whether it sent RECLAIM_COMPLETE (rca_one_fs false). Until then a
    /// client may only reclaim: RFC 8881 §18.51.3 answers its other
    /// OPENs NFS4ERR_GRACE (the protocol layer asks, as knfsd's OPEN).
    pub fn reclaim_completed(&self) -> bool {
        self.0.reclaim_done.load(Ordering::Acquire)
    }
}

impl std::fmt::Debug for ClientHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClientHandle({:#x})", self.0.id.0)
    }
}

/// The records of one owner.
#[derive(Default)]
pub(crate) struct Owned {
    pub(crate) confirmed: Option<Arc<Client>>,
    pub(crate) unconfirmed: Option<Arc<Client>>,
}

pub(crate) struct Registry {
    pub(crate) by_id: HashMap<ClientId, Arc<Client>>,
    pub(crate) by_owner: HashMap<Vec<u8>, Owned>,
}

impl Registry {
    /// Takes `c` out of both maps (it may already be out).
    pub(crate) fn unlink(&mut self, c: &Arc<Client>) {
        if self.by_id.get(&c.id).is_some_and(|x| Arc::ptr_eq(x, c)) {
            self.by_id.remove(&c.id);
        }
        if let Some(o) = self.by_owner.get_mut(&c.owner) {
            if o.confirmed.as_ref().is_some_and(|x| Arc::ptr_eq(x, c)) {
                o.confirmed = None;
            }
            if o.unconfirmed.as_ref().is_some_and(|x| Arc::ptr_eq(x, c)) {
                o.unconfirmed = None;
            }
            if o.confirmed.is_none() && o.unconfirmed.is_none() {
                self.by_owner.remove(&c.owner);
            }
        }
    }
}

impl State {
    /// Whether `c`'s lease ran out by `now` (never while a request of it
    /// runs).
    pub(crate) fn lease_over(&self, c: &Client, now: u64) -> bool {
        let lease = crate::ids::ms(self.cfg.lease_time);
        now.saturating_sub(c.hot.renewed_ms.load(Ordering::Relaxed)) > lease
            && c.hot.busy.load(Ordering::Acquire) == 0
    }

    /// Makes `c`'s record durable before it is confirmed: NFS4ERR_SERVERFAULT
    /// when it cannot be written (a client whose record may be lost must
    /// not be told it is known). Called with only `c.cs` held.
    pub(crate) fn record_client(&self, c: &Arc<Client>) -> Result<(), V4Error> {
        c.may_reclaim
            .store(self.grace.was_known(&c.owner), Ordering::Release);
        let Some(r) = &self.records else {
            return Ok(());
        };
        r.write(&c.owner, c.id).map_err(|e| {
            tracing::warn!(clientid = format!("{:#x}", c.id.0), error = %e,
                "nfsv4: client record not written");
            V4Error::ServerFault
        })
    }

    /// A dropped client's state is all freed: its record goes (unless a
    /// newer record of its owner replaced it). Called by the reaper, with
    /// no lock held.
    pub(crate) fn forget_client(&self, c: &Arc<Client>) {
        if let (Some(r), true) = (&self.records, c.confirmed.load(Ordering::Acquire)) {
            if let Err(e) = r.remove(&c.owner, c.id) {
                tracing::warn!(clientid = format!("{:#x}", c.id.0), error = %e,
                    "nfsv4: client record not removed");
            }
        }
    }

    /// Whether `c` has revoked stateids not freed yet (lock-free while it
    /// has none): (any by the administrator, any delegation revoked
    /// for want of a DELEGRETURN).
    pub(crate) fn has_revoked(&self, c: &Client) -> (bool, bool) {
        if !c.has_revoked.load(Ordering::Acquire) {
            return (false, false);
        }
        let (all, deleg) = {
            let st = locked(&c.st);
            (st.revoked, st.deleg_revoked)
        };
        if all == 0 {
            c.has_revoked.store(false, Ordering::Release);
        }
        (all > deleg, deleg > 0)
    }

    /// Whether `c` may reclaim (`reclaim`) or make new state now: a new
    /// open or lock in the grace period is NFS4ERR_GRACE; a reclaim after
    /// it, or by a client that already sent RECLAIM_COMPLETE, is
    /// NFS4ERR_NO_GRACE; one by a client not recorded before the restart
    /// NFS4ERR_RECLAIM_BAD.
    pub(crate) fn grace_check(&self, c: &Client, reclaim: bool) -> Result<(), V4Error> {
        let in_grace = self.in_grace();
        if !reclaim {
            return match in_grace {
                true => Err(V4Error::Grace),
                false => Ok(()),
            };
        }
        if !in_grace || c.reclaim_done.load(Ordering::Acquire) {
            return Err(V4Error::NoGrace);
        }
        if !c.may_reclaim.load(Ordering::Acquire) {
            return Err(V4Error::ReclaimBad);
        }
        Ok(())
    }

    /// RECLAIM_COMPLETE (§18.51): `c` has reclaimed all it will; the
    /// grace period ends once every recorded client has said so.
    /// `one_fs` (rca_one_fs) is accepted and changes nothing, as knfsd.
    /// NFS4ERR_COMPLETE_ALREADY the second time.
    pub fn reclaim_complete(&self, c: &ClientHandle, one_fs: bool) -> Result<(), V4Error> {
        if one_fs {
            return Ok(());
        }
        if c.0.is_expired() {
            return Err(V4Error::Expired);
        }
        if c.0.reclaim_done.swap(true, Ordering::AcqRel) {
            return Err(V4Error::CompleteAlready);
        }
        if c.0.may_reclaim.load(Ordering::Acquire) {
            self.grace.reclaim_complete(&c.0.owner);
        }
        Ok(())
    }
}
