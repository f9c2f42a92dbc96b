//! Clients (RFC 8881 §2.4): EXCHANGE_ID (§18.35) with the cases of
//! §18.35.5 and DESTROY_CLIENTID (§18.50).
//!
//! A client record is unconfirmed from its EXCHANGE_ID until its first
//! CREATE_SESSION, confirmed after. Per owner there is at most one of
//! each: a restarted client (same owner, new verifier) gets a new
//! unconfirmed record while its old confirmed one stays, and the old one
//! goes (with all its state) when the new one is confirmed.
//!
//! The records themselves and the registry are in `registry`; this sits
//! above the sessions, as a client it drops loses its sessions at once
//! (`session`'s `doom`).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::V4Error;
use crate::ids::{ClientId, Principal, Verifier};
use crate::registry::{Client, CsSlot};
use crate::shards::locked;
use crate::table::ClientState;
use crate::{Limit, State};

pub use crate::registry::ClientHandle;

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
            hot: crate::registry::Hot {
                renewed_ms: AtomicU64::new(now),
                busy: AtomicU32::new(0),
            },
            clock: self.clock.clone(),
            expired: AtomicBool::new(false),
            confirmed: AtomicBool::new(false),
            cb_down: AtomicBool::new(false),
            cb_up: AtomicBool::new(false),
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
}
