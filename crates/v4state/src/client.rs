//! Clients (RFC 8881 §2.4): EXCHANGE_ID (§18.35) with the cases of
//! §18.35.5, DESTROY_CLIENTID (§18.50), and the records of each client.
//!
//! A client record is unconfirmed from its EXCHANGE_ID until its first
//! CREATE_SESSION, confirmed after. Per owner there is at most one of
//! each: a restarted client (same owner, new verifier) gets a new
//! unconfirmed record while its old confirmed one stays, and the old one
//! goes (with all its state) when the new one is confirmed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::V4Error;
use crate::ids::{ClientId, FileKey, Principal, SessionId, Verifier};
use crate::shards::locked;
use crate::{Limit, State};

/// One client record.
pub(crate) struct Client {
    pub(crate) id: ClientId,
    pub(crate) owner: Vec<u8>,
    pub(crate) verifier: Verifier,
    pub(crate) principal: Principal,
    /// When its lease was last renewed (the state's clock, ms).
    pub(crate) renewed_ms: AtomicU64,
    /// Requests of it in progress (SEQUENCE to reply): its lease does not
    /// run out under them.
    pub(crate) busy: AtomicU32,
    /// Set once, when it expires or is destroyed or replaced: its
    /// sessions are gone and its stateids answer EXPIRED until freed.
    pub(crate) expired: AtomicBool,
    pub(crate) confirmed: AtomicBool,
    /// The embedder says its callback path is down.
    pub(crate) cb_down: AtomicBool,
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

/// The CREATE_SESSION slot (§18.36.4): the sequence id of the last one
/// and its result, replayed to a retransmission.
#[derive(Default)]
pub(crate) struct CsSlot {
    pub(crate) seqid: u32,
    pub(crate) cached: Option<crate::session::SessionCreated>,
}

/// The owners of a client (open or lock owners): each one's stateid
/// per file.
pub(crate) type Owners = HashMap<Arc<[u8]>, HashMap<FileKey, [u8; 12]>>;

/// What a client holds.
#[derive(Default)]
pub(crate) struct ClientState {
    pub(crate) sessions: Vec<SessionId>,
    pub(crate) stateids: HashMap<[u8; 12], crate::stateid::Entry>,
    pub(crate) open_owners: Owners,
    pub(crate) lock_owners: Owners,
    /// Stateids revoked and not freed yet.
    pub(crate) revoked: usize,
}

impl ClientState {
    /// Whether it holds sessions or state (DESTROY_CLIENTID refuses then,
    /// and §18.35.5's client collision keeps the record).
    pub(crate) fn has_state(&self) -> bool {
        !self.sessions.is_empty() || !self.stateids.is_empty()
    }
}

impl Client {
    pub(crate) fn is_expired(&self) -> bool {
        self.expired.load(Ordering::Acquire)
    }

    pub(crate) fn renew(&self, now_ms: u64) {
        self.renewed_ms.fetch_max(now_ms, Ordering::Relaxed);
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

/// EXCHANGE_ID's arguments as this crate needs them.
#[derive(Debug, Clone, Copy)]
pub struct ExchangeIdArgs<'a> {
    /// co_ownerid.
    pub owner: &'a [u8],
    /// co_verifier.
    pub verifier: Verifier,
    /// Who sent it.
    pub principal: &'a Principal,
    /// EXCHGID4_FLAG_UPD_CONFIRMED_REC_A: update a confirmed record.
    pub update: bool,
}

/// EXCHANGE_ID's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExchangeIdOk {
    pub clientid: ClientId,
    /// eir_sequenceid: what the next CREATE_SESSION must carry.
    pub sequenceid: u32,
    /// EXCHGID4_FLAG_CONFIRMED_R: the record is confirmed.
    pub confirmed: bool,
}

fn ok(c: &Client, confirmed: bool) -> ExchangeIdOk {
    ExchangeIdOk {
        clientid: c.id,
        sequenceid: c.cs_seqid.load(Ordering::Acquire).wrapping_add(1),
        confirmed,
    }
}

impl State {
    /// EXCHANGE_ID (§18.35), by the cases of §18.35.5:
    ///
    /// 1. a new owner: a new unconfirmed record;
    /// 2. a confirmed record, same verifier and principal: that record
    ///    (a retry, or a client checking in);
    /// 3. a confirmed record, another principal: NFS4ERR_CLID_INUSE while
    ///    it holds sessions or state, else it is replaced by a new one;
    /// 4. an unconfirmed record only: it is replaced by a new one;
    /// 5. a confirmed record, a new verifier (the client restarted): a new
    ///    unconfirmed record; the old one and its state go when the new
    ///    one is confirmed (CREATE_SESSION);
    /// 6. update of a confirmed record, same verifier and principal: that
    ///    record;
    /// 7. update with no confirmed record: NFS4ERR_NOENT;
    /// 8. update with another verifier: NFS4ERR_NOT_SAME;
    /// 9. update with another principal: NFS4ERR_PERM.
    ///
    /// A new record past [`Limits::max_clients`](crate::Limits::max_clients): NFS4ERR_RESOURCE.
    pub fn exchange_id(&self, a: &ExchangeIdArgs<'_>) -> Result<ExchangeIdOk, V4Error> {
        let now = self.clock.now_ms();
        let mut reg = locked(&self.registry);
        let conf = reg
            .by_owner
            .get(a.owner)
            .and_then(|o| o.confirmed.clone())
            .filter(|c| !c.is_expired());
        let mut replace = None;
        if let Some(conf) = conf {
            let same_principal = conf.principal == *a.principal;
            let same_verifier = conf.verifier == a.verifier;
            if a.update {
                if !same_principal {
                    return Err(V4Error::Perm);
                }
                if !same_verifier {
                    return Err(V4Error::NotSame);
                }
                conf.renew(now);
                return Ok(ok(&conf, true));
            }
            if !same_principal {
                if locked(&conf.st).has_state() {
                    return Err(V4Error::ClidInUse);
                }
                // Case 3 with nothing held: the old record goes now.
                replace = Some(conf);
            } else if same_verifier {
                conf.renew(now);
                return Ok(ok(&conf, true));
            }
            // Case 5: the old record stays until the new one is
            // confirmed.
        } else if a.update {
            return Err(V4Error::NoEnt);
        }
        // Cases 1, 3, 4, 5: a new unconfirmed record, replacing an
        // unconfirmed one of this owner.
        let old_unconf = reg
            .by_owner
            .get_mut(a.owner)
            .and_then(|o| o.unconfirmed.take());
        let freed = usize::from(old_unconf.is_some()) + usize::from(replace.is_some());
        if reg.by_id.len().saturating_sub(freed) >= self.cfg.limits.max_clients {
            // Nothing changed: put the unconfirmed record back.
            if let (Some(u), Some(o)) = (old_unconf, reg.by_owner.get_mut(a.owner)) {
                o.unconfirmed = Some(u);
            }
            return Err(self.stats.hit(Limit::Clients));
        }
        for c in old_unconf.iter().chain(replace.iter()) {
            reg.unlink(c);
            self.doom(c, "replaced");
        }
        let mut id = self.ids.client_id();
        // After 2^32 ids in one run the counter wraps: skip live ones.
        while reg.by_id.contains_key(&id) {
            id = self.ids.client_id();
        }
        let c = Arc::new(Client {
            id,
            owner: a.owner.to_vec(),
            verifier: a.verifier,
            principal: a.principal.clone(),
            renewed_ms: AtomicU64::new(now),
            busy: AtomicU32::new(0),
            expired: AtomicBool::new(false),
            confirmed: AtomicBool::new(false),
            cb_down: AtomicBool::new(false),
            has_revoked: AtomicBool::new(false),
            may_reclaim: AtomicBool::new(false),
            reclaim_done: AtomicBool::new(false),
            cs_seqid: AtomicU32::new(0),
            cs: Mutex::new(CsSlot::default()),
            st: Mutex::new(ClientState::default()),
        });
        reg.by_id.insert(id, c.clone());
        reg.by_owner
            .entry(a.owner.to_vec())
            .or_default()
            .unconfirmed = Some(c.clone());
        debug_assert!(reg.by_id.len() <= self.cfg.limits.max_clients);
        tracing::debug!(
            clientid = format!("{:#x}", id.0),
            "nfsv4: new client record"
        );
        Ok(ok(&c, false))
    }

    /// The client with id `id`, confirmed or not: NFS4ERR_STALE_CLIENTID
    /// when there is none (another instance's id, or one that expired or
    /// was destroyed).
    pub fn client(&self, id: ClientId) -> Result<ClientHandle, V4Error> {
        locked(&self.registry)
            .by_id
            .get(&id)
            .filter(|c| !c.is_expired())
            .map(|c| ClientHandle(c.clone()))
            .ok_or(V4Error::StaleClientId)
    }

    /// DESTROY_CLIENTID (§18.50): NFS4ERR_CLIENTID_BUSY while it holds
    /// sessions or state, NFS4ERR_STALE_CLIENTID when unknown.
    pub fn destroy_clientid(&self, id: ClientId) -> Result<(), V4Error> {
        let c = {
            let mut reg = locked(&self.registry);
            let c = reg
                .by_id
                .get(&id)
                .filter(|c| !c.is_expired())
                .cloned()
                .ok_or(V4Error::StaleClientId)?;
            if locked(&c.st).has_state() {
                return Err(V4Error::ClientIdBusy);
            }
            reg.unlink(&c);
            c
        };
        self.doom(&c, "destroyed");
        Ok(())
    }

    /// Marks `c` expired and hands it to the reaper, which frees what it
    /// holds. Its sessions go at once (the client sees BADSESSION).
    pub(crate) fn doom(&self, c: &Arc<Client>, why: &'static str) {
        if c.expired.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::info!(
            clientid = format!("{:#x}", c.id.0),
            why,
            "nfsv4: client state dropped"
        );
        self.drop_sessions(c);
        locked(&self.doomed).push_back(c.clone());
        self.wake.kick();
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

    /// `c`'s lease ran out: it goes, with everything it holds.
    pub(crate) fn expire(&self, c: &Arc<Client>) {
        locked(&self.registry).unlink(c);
        if !c.is_expired() {
            self.stats.clients_expired.fetch_add(1, Ordering::Relaxed);
        }
        self.doom(c, "lease expired");
    }

    /// Whether `c`'s lease ran out by `now` (never while a request of it
    /// runs).
    pub(crate) fn lease_over(&self, c: &Client, now: u64) -> bool {
        let lease = crate::ids::ms(self.cfg.lease_time);
        now.saturating_sub(c.renewed_ms.load(Ordering::Relaxed)) > lease
            && c.busy.load(Ordering::Acquire) == 0
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
}
