//! Sessions (RFC 8881 §2.10): CREATE_SESSION (§18.36) with its own
//! sequence id and cached result, DESTROY_SESSION (§18.37), SEQUENCE
//! (§18.46) over the slot table, BIND_CONN_TO_SESSION (§18.34) and the
//! connections bound to each session.
//!
//! And dropping a client (its lease ran out, it was destroyed or
//! replaced): its sessions go at once, the rest of its state to the
//! reaper. Above the client records (a session holds its client);
//! EXCHANGE_ID and DESTROY_CLIENTID (`client`) and the reaper (`lease`)
//! drop clients through here.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::V4Error;
use crate::ids::{ClientId, ConnId, Principal, SessionId};
use crate::registry::{Client, ClientHandle};
use crate::shards::locked;
use crate::slot::{Digest, Slot, Verdict};
use crate::{Limit, State};

pub use crate::channel::{ChannelAttrs, SessionCreated};

/// CREATE_SESSION4_FLAG_PERSIST: not offered (the reply cache is lost on
/// restart).
pub const CREATE_SESSION_PERSIST: u32 = 0x1;
/// CREATE_SESSION4_FLAG_CONN_BACK_CHAN: the connection is the back
/// channel too.
pub const CREATE_SESSION_CONN_BACK_CHAN: u32 = 0x2;
/// CREATE_SESSION4_FLAG_CONN_RDMA: not offered.
pub const CREATE_SESSION_CONN_RDMA: u32 = 0x4;

/// The SEQ4_STATUS bits of SEQUENCE's reply (§18.46.3) this state sets.
/// The lease bits (EXPIRED_ALL/SOME_STATE_REVOKED) are never set: with no
/// courtesy clients an expired client keeps nothing, and its SEQUENCE is
/// NFS4ERR_BADSESSION.
pub mod seq_status {
    /// The client's callback path is down (the embedder says so).
    pub const CB_PATH_DOWN: u32 = 0x1;
    /// Some state was revoked by the administrator: FREE_STATEID what
    /// TEST_STATEID finds revoked.
    pub const ADMIN_STATE_REVOKED: u32 = 0x20;
    /// A delegation was revoked for want of a DELEGRETURN after its
    /// recall: FREE_STATEID what TEST_STATEID finds revoked.
    pub const RECALLABLE_STATE_REVOKED: u32 = 0x40;
    /// This session asked for a back channel and has no connection for it.
    pub const CB_PATH_DOWN_SESSION: u32 = 0x200;
}

/// The smallest request and reply sizes a channel may have: a SEQUENCE
/// alone and its reply, with room to spare. Less is NFS4ERR_TOOSMALL.
pub const MIN_CHANNEL_SIZE: u32 = 256;

/// Back channel slots we accept at most.
pub const MAX_BACK_SLOTS: u32 = 16;

/// Which channels a connection serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnDir {
    Fore,
    Back,
    Both,
}

impl ConnDir {
    fn fore(self) -> bool {
        self != ConnDir::Back
    }

    fn back(self) -> bool {
        self != ConnDir::Fore
    }
}

/// BIND_CONN_TO_SESSION's channel_dir_from_client4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindDir {
    Fore,
    Back,
    ForeOrBoth,
    BackOrBoth,
}

/// CREATE_SESSION's arguments.
#[derive(Debug, Clone)]
pub struct CreateSessionArgs<'a> {
    pub clientid: ClientId,
    /// csa_sequence.
    pub sequence: u32,
    pub principal: &'a Principal,
    /// CREATE_SESSION4_FLAG_* bits.
    pub flags: u32,
    pub fore: ChannelAttrs,
    pub back: ChannelAttrs,
    pub cb_program: u32,
    /// The connection it came on: bound to the fore channel (and the back
    /// one with CONN_BACK_CHAN).
    pub conn: ConnId,
}

/// SEQUENCE's arguments.
#[derive(Debug, Clone, Copy)]
pub struct SequenceArgs {
    pub sessionid: SessionId,
    pub sequenceid: u32,
    pub slotid: u32,
    pub highest_slotid: u32,
    /// The connection it came on (bound to the fore channel if it is not).
    pub conn: ConnId,
    /// The caller's digest of the compound (see [`Digest`]).
    pub digest: Digest,
    /// Operations in the compound (NFS4ERR_TOO_MANY_OPS past the
    /// session's ca_maxoperations).
    pub ops: u32,
    /// The compound's size in bytes (NFS4ERR_REQ_TOO_BIG past the
    /// session's ca_maxrequestsize).
    pub request_size: u32,
}

/// What SEQUENCE found.
#[derive(Debug)]
pub enum Sequenced {
    /// A new request: run the rest of the compound, then
    /// [`SlotTicket::finish`].
    New(SlotTicket),
    /// A retry of the slot's last request: send this cached reply.
    Replay(Arc<[u8]>),
}

pub(crate) struct SessionInner {
    slots: Vec<Slot>,
    /// Bound connections, oldest first.
    conns: Vec<(ConnId, ConnDir)>,
}

pub(crate) struct Session {
    pub(crate) id: SessionId,
    pub(crate) client: Arc<Client>,
    pub(crate) fore: ChannelAttrs,
    pub(crate) back: ChannelAttrs,
    pub(crate) cb_program: u32,
    /// It asked for a back channel (at creation or with a bind since).
    back_wanted: AtomicBool,
    /// Reply cache bytes reserved for it.
    reserved: usize,
    pub(crate) inner: Mutex<SessionInner>,
}

/// A request in progress on a slot: say how it ended with [`finish`]
/// (dropping it unfinished leaves the reply uncached).
///
/// [`finish`]: SlotTicket::finish
pub struct SlotTicket {
    session: Arc<Session>,
    slot: u32,
    seqid: u32,
    done: bool,
    /// sr_highest_slotid.
    pub highest_slotid: u32,
    /// sr_target_highest_slotid.
    pub target_highest_slotid: u32,
    /// sr_status_flags ([`seq_status`]).
    pub status_flags: u32,
}

impl std::fmt::Debug for SlotTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotTicket")
            .field("slot", &self.slot)
            .field("seqid", &self.seqid)
            .field("status_flags", &self.status_flags)
            .finish()
    }
}

impl SlotTicket {
    /// The session's client, for the rest of the compound.
    pub fn client(&self) -> ClientHandle {
        ClientHandle(self.session.client.clone())
    }

    pub fn sessionid(&self) -> SessionId {
        self.session.id
    }

    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// The largest reply the slot may cache.
    pub fn cache_limit(&self) -> usize {
        self.session.fore.max_response_size_cached as usize
    }

    /// The largest reply the session takes (ca_maxresponsesize).
    pub fn max_response_size(&self) -> usize {
        self.session.fore.max_response_size as usize
    }

    /// The request is done. `reply` (the encoded compound reply, when
    /// sa_cachethis asked for it) is kept for a retry; one larger than
    /// [`cache_limit`] is not, and is NFS4ERR_REP_TOO_BIG_TO_CACHE (the
    /// caller should have checked before).
    ///
    /// [`cache_limit`]: SlotTicket::cache_limit
    pub fn finish(mut self, reply: Option<Arc<[u8]>>) -> Result<(), V4Error> {
        let too_big = reply.as_ref().is_some_and(|r| r.len() > self.cache_limit());
        let reply = if too_big { None } else { reply };
        self.end(reply);
        match too_big {
            true => Err(V4Error::RepTooBigToCache),
            false => Ok(()),
        }
    }

    /// The request changed nothing and will be sent again from the start
    /// (an event loop tried it and it would have waited): the slot goes
    /// back to what it was, so the retry is a new request, not a replay.
    pub fn abandon(mut self) {
        self.end_with(|s, seqid| s.abandon(seqid));
    }

    fn end(&mut self, reply: Option<Arc<[u8]>>) {
        self.end_with(|s, seqid| s.finish(seqid, reply));
    }

    fn end_with(&mut self, f: impl FnOnce(&mut Slot, u32)) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        {
            let mut i = locked(&self.session.inner);
            if let Some(s) = i.slots.get_mut(self.slot as usize) {
                f(s, self.seqid);
            }
        }
        let c = &self.session.client;
        c.renew(c.clock.now_ms());
        let before = c.hot.busy.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(before > 0);
    }
}

impl Drop for SlotTicket {
    fn drop(&mut self) {
        self.end(None);
    }
}

pub(crate) type CreateSessionResult = Result<SessionCreated, V4Error>;

/// The fore channel as we grant it: the client's wishes within our
/// bounds.
fn clamp_fore(a: &ChannelAttrs, l: &crate::Limits) -> Result<ChannelAttrs, V4Error> {
    if a.max_request_size < MIN_CHANNEL_SIZE || a.max_response_size < MIN_CHANNEL_SIZE {
        return Err(V4Error::TooSmall);
    }
    Ok(ChannelAttrs {
        header_pad_size: 0,
        max_request_size: a.max_request_size.min(l.max_request_size),
        max_response_size: a.max_response_size.min(l.max_response_size),
        max_response_size_cached: a.max_response_size_cached.min(l.max_response_size_cached),
        max_operations: a.max_operations.clamp(1, l.max_operations),
        max_requests: a
            .max_requests
            .clamp(1, l.slots_per_session.clamp(1, u32::MAX as usize) as u32),
    })
}

/// The back channel as we accept it (the client's callback service's
/// limits, which we only narrow).
fn clamp_back(a: &ChannelAttrs) -> Result<ChannelAttrs, V4Error> {
    if a.max_request_size < MIN_CHANNEL_SIZE || a.max_response_size < MIN_CHANNEL_SIZE {
        return Err(V4Error::TooSmall);
    }
    Ok(ChannelAttrs {
        header_pad_size: 0,
        max_response_size_cached: 0,
        max_operations: a.max_operations.max(1),
        max_requests: a.max_requests.clamp(1, MAX_BACK_SLOTS),
        ..*a
    })
}

/// Reply cache bytes in use, over all sessions.
#[derive(Default)]
pub(crate) struct CacheBudget(AtomicUsize);

impl CacheBudget {
    /// Reserves room for up to `want` slots of `each` bytes within
    /// `limit`: the slots granted (at least one, even past the limit) and
    /// the bytes reserved.
    fn reserve(&self, want: u32, each: usize, limit: usize) -> (u32, usize) {
        let each = each.max(1);
        let mut cur = self.0.load(Ordering::Relaxed);
        loop {
            let room = limit.saturating_sub(cur) / each;
            let n = (want as usize).min(room).max(1);
            let bytes = n * each;
            match self
                .0
                .compare_exchange(cur, cur + bytes, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return (n as u32, bytes),
                Err(now) => cur = now,
            }
        }
    }

    fn release(&self, bytes: usize) {
        let before = self.0.fetch_sub(bytes, Ordering::AcqRel);
        debug_assert!(before >= bytes);
    }

    pub(crate) fn used(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

impl State {
    /// CREATE_SESSION (§18.36). The client's CREATE_SESSION sequence id:
    /// the last one again replays its cached result, the next one is a new
    /// request, any other NFS4ERR_SEQ_MISORDERED. An unconfirmed client is
    /// confirmed by its first: its record is written durably first, and an
    /// older confirmed record of the same owner (a restarted client) goes
    /// with all its state. Errors: NFS4ERR_STALE_CLIENTID (unknown client),
    /// NFS4ERR_CLID_INUSE (another principal), NFS4ERR_TOOSMALL (channel
    /// sizes below [`MIN_CHANNEL_SIZE`]), NFS4ERR_RESOURCE (sessions per
    /// client), NFS4ERR_SERVERFAULT (the record could not be written).
    /// Only successes are cached: a failed request changed nothing and
    /// may be sent again.
    pub fn create_session(&self, a: &CreateSessionArgs<'_>) -> CreateSessionResult {
        let c = locked(&self.registry)
            .by_id
            .get(&a.clientid)
            .filter(|c| !c.is_expired())
            .cloned()
            .ok_or(V4Error::StaleClientId)?;
        let mut cs = locked(&c.cs);
        let confirmed = c.confirmed.load(Ordering::Acquire);
        if confirmed && a.sequence == cs.seqid {
            if let Some(r) = &cs.cached {
                return Ok(r.clone());
            }
        }
        if a.sequence != cs.seqid.wrapping_add(1) {
            self.stats.misordered.fetch_add(1, Ordering::Relaxed);
            return Err(V4Error::SeqMisordered);
        }
        if c.principal != *a.principal {
            return Err(V4Error::ClidInUse);
        }
        let fore = clamp_fore(&a.fore, &self.cfg.limits)?;
        let back = clamp_back(&a.back)?;
        if !confirmed {
            self.confirm(&c)?;
        }
        let r = self.new_session(&c, a, fore, back)?;
        cs.seqid = a.sequence;
        c.cs_seqid.store(a.sequence, Ordering::Release);
        cs.cached = Some(r.clone());
        c.renew(self.clock.now_ms());
        Ok(r)
    }

    /// Confirms `c` (its first CREATE_SESSION): its record is made
    /// durable, then it replaces any confirmed record of its owner.
    fn confirm(&self, c: &Arc<Client>) -> Result<(), V4Error> {
        self.record_client(c)?;
        let mut reg = locked(&self.registry);
        let o = reg
            .by_owner
            .get_mut(&c.owner)
            .filter(|o| o.unconfirmed.as_ref().is_some_and(|u| Arc::ptr_eq(u, c)))
            // Replaced meanwhile by another EXCHANGE_ID of its owner.
            .ok_or(V4Error::StaleClientId)?;
        o.unconfirmed = None;
        let old = o.confirmed.replace(c.clone());
        c.confirmed.store(true, Ordering::Release);
        if let Some(old) = old {
            // §18.35.5 case 5: the restarted client's old state goes.
            reg.unlink(&old);
            if !Arc::ptr_eq(&old, c) {
                self.doom(&old, "client restarted");
            }
        }
        Ok(())
    }

    fn new_session(
        &self,
        c: &Arc<Client>,
        a: &CreateSessionArgs<'_>,
        mut fore: ChannelAttrs,
        back: ChannelAttrs,
    ) -> CreateSessionResult {
        let limits = &self.cfg.limits;
        let (slots, reserved) = self.cache.reserve(
            fore.max_requests,
            fore.max_response_size_cached as usize,
            limits.reply_cache_bytes,
        );
        fore.max_requests = slots;
        let want_back = a.flags & CREATE_SESSION_CONN_BACK_CHAN != 0;
        let dir = match want_back {
            true => ConnDir::Both,
            false => ConnDir::Fore,
        };
        let mut id = self.ids.session_id();
        let s = {
            let mut st = locked(&c.st);
            if c.is_expired() {
                self.cache.release(reserved);
                return Err(V4Error::StaleClientId);
            }
            if st.sessions.len() >= limits.sessions_per_client {
                self.cache.release(reserved);
                return Err(self.stats.hit(Limit::SessionsPerClient));
            }
            let mut shard = self.sessions.shard(&id);
            while shard.contains_key(&id) {
                drop(shard);
                id = self.ids.session_id();
                shard = self.sessions.shard(&id);
            }
            let s = Arc::new(Session {
                id,
                client: c.clone(),
                fore,
                back,
                cb_program: a.cb_program,
                back_wanted: AtomicBool::new(want_back),
                reserved,
                inner: Mutex::new(SessionInner {
                    slots: vec![Slot::default(); slots as usize],
                    conns: vec![(a.conn, dir)],
                }),
            });
            shard.insert(id, s.clone());
            st.sessions.push(id);
            debug_assert!(st.sessions.len() <= limits.sessions_per_client);
            s
        };
        self.index_conn(a.conn, s.id);
        Ok(SessionCreated {
            sessionid: s.id,
            sequence: a.sequence,
            flags: a.flags & CREATE_SESSION_CONN_BACK_CHAN,
            fore,
            back,
        })
    }

    /// DESTROY_SESSION (§18.37). `in_it`: the compound's SEQUENCE is on
    /// this session (its own slot is then the one in use allowed).
    /// NFS4ERR_BADSESSION when unknown, NFS4ERR_DELAY while another
    /// request of it runs.
    pub fn destroy_session(&self, id: &SessionId, in_it: bool) -> Result<(), V4Error> {
        let s = self
            .sessions
            .shard(id)
            .get(id)
            .cloned()
            .ok_or(V4Error::BadSession)?;
        let busy = locked(&s.inner).slots.iter().filter(|x| x.in_use).count();
        if busy > usize::from(in_it) {
            return Err(V4Error::Delay);
        }
        let c = s.client.clone();
        let mut st = locked(&c.st);
        st.sessions.retain(|x| x != id);
        self.remove_session(id);
        Ok(())
    }

    /// Takes session `id` out of the index and gives back what it held.
    /// Called with its client's `st` held.
    fn remove_session(&self, id: &SessionId) {
        let Some(s) = self.sessions.shard(id).remove(id) else {
            return;
        };
        self.cache.release(s.reserved);
        let conns: Vec<ConnId> = locked(&s.inner).conns.iter().map(|c| c.0).collect();
        for conn in conns {
            self.unindex_conn(conn, id);
        }
    }

    /// Drops every session of `c` (it expired or was replaced).
    fn drop_sessions(&self, c: &Arc<Client>) {
        let mut st = locked(&c.st);
        for id in std::mem::take(&mut st.sessions) {
            self.remove_session(&id);
        }
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

    /// `c`'s lease ran out: it goes, with everything it holds.
    pub(crate) fn expire(&self, c: &Arc<Client>) {
        locked(&self.registry).unlink(c);
        if !c.is_expired() {
            self.stats.clients_expired.fetch_add(1, Ordering::Relaxed);
        }
        self.doom(c, "lease expired");
    }

    /// SEQUENCE (§18.46): finds the session and applies the slot's rules
    /// (see [`Sequenced`]); renews the client's lease. Errors:
    /// NFS4ERR_BADSESSION (unknown, destroyed, or its client's lease ran
    /// out), NFS4ERR_TOO_MANY_OPS, NFS4ERR_REQ_TOO_BIG, NFS4ERR_BADSLOT, NFS4ERR_SEQ_MISORDERED, NFS4ERR_DELAY (a
    /// retry of a request still running), NFS4ERR_RETRY_UNCACHED_REP,
    /// NFS4ERR_SEQ_FALSE_RETRY.
    pub fn sequence(&self, a: &SequenceArgs) -> Result<Sequenced, V4Error> {
        let s = self
            .sessions
            .shard(&a.sessionid)
            .get(&a.sessionid)
            .cloned()
            .ok_or(V4Error::BadSession)?;
        let c = &s.client;
        let now = self.clock.now_ms();
        if c.is_expired() {
            return Err(V4Error::BadSession);
        }
        if self.lease_over(c, now) {
            self.expire(c);
            return Err(V4Error::BadSession);
        }
        // The session's bounds, before the slot: a compound past them
        // is refused without using the slot (§18.46.3, as knfsd).
        if a.ops > s.fore.max_operations {
            return Err(V4Error::TooManyOps);
        }
        if a.request_size > s.fore.max_request_size {
            return Err(V4Error::ReqTooBig);
        }
        let mut evicted = None;
        let mut newly_bound = false;
        let (v, highest, back_bound) = {
            let mut i = locked(&s.inner);
            if !i.conns.iter().any(|&(id, d)| id == a.conn && d.fore()) {
                // A connection not bound yet is bound to the fore channel
                // (SP4_NONE, §2.10.3.1).
                newly_bound = true;
                evicted = bind(
                    &mut i.conns,
                    a.conn,
                    ConnDir::Fore,
                    self.cfg.limits.conns_per_session,
                );
            }
            let highest = i.slots.len() as u32 - 1;
            let slot = i.slots.get_mut(a.slotid as usize).ok_or(V4Error::BadSlot)?;
            let v = slot.begin(a.sequenceid, a.digest).inspect_err(|e| match e {
                V4Error::SeqMisordered => {
                    self.stats.misordered.fetch_add(1, Ordering::Relaxed);
                }
                V4Error::SeqFalseRetry => {
                    self.stats.false_retries.fetch_add(1, Ordering::Relaxed);
                }
                _ => {}
            });
            if matches!(v, Ok(Verdict::New)) {
                c.hot.busy.fetch_add(1, Ordering::AcqRel);
            }
            (v, highest, i.conns.iter().any(|&(_, d)| d.back()))
        };
        if let Some(old) = evicted {
            self.unindex_conn(old, &s.id);
        }
        // Indexed once, when bound: not on every request.
        if newly_bound {
            self.index_conn(a.conn, s.id);
        }
        let v = v?;
        c.renew(now);
        let mut flags = self.client_status(c);
        if s.back_wanted.load(Ordering::Relaxed) && !back_bound {
            flags |= seq_status::CB_PATH_DOWN_SESSION;
        }
        match v {
            Verdict::Replay(r) => {
                self.stats.replays.fetch_add(1, Ordering::Relaxed);
                Ok(Sequenced::Replay(r))
            }
            Verdict::New => Ok(Sequenced::New(SlotTicket {
                session: s,
                slot: a.slotid,
                seqid: a.sequenceid,
                done: false,
                highest_slotid: highest,
                target_highest_slotid: highest,
                status_flags: flags,
            })),
        }
    }

    /// The client-wide SEQ4_STATUS bits.
    pub(crate) fn client_status(&self, c: &Client) -> u32 {
        let mut f = 0;
        if c.cb_down.load(Ordering::Relaxed) {
            f |= seq_status::CB_PATH_DOWN;
        }
        let (admin, deleg) = self.has_revoked(c);
        if admin {
            f |= seq_status::ADMIN_STATE_REVOKED;
        }
        if deleg {
            f |= seq_status::RECALLABLE_STATE_REVOKED;
        }
        f
    }

    /// The embedder's word on `c`'s callback path (SEQ4_STATUS_CB_PATH_DOWN
    /// while down).
    pub fn set_callback_down(&self, c: &ClientHandle, down: bool) {
        c.0.cb_down.store(down, Ordering::Relaxed);
        c.0.cb_up.store(!down, Ordering::Release);
    }

    /// BIND_CONN_TO_SESSION (§18.34): binds `conn` to the session's
    /// channels; the channels granted. Binding past
    /// [`Limits::conns_per_session`](crate::Limits::conns_per_session)
    /// unbinds the oldest connection (one serving the fore channel only,
    /// if any). NFS4ERR_BADSESSION when unknown.
    pub fn bind_conn_to_session(
        &self,
        id: &SessionId,
        conn: ConnId,
        dir: BindDir,
    ) -> Result<ConnDir, V4Error> {
        let s = self
            .sessions
            .shard(id)
            .get(id)
            .cloned()
            .ok_or(V4Error::BadSession)?;
        if s.client.is_expired() {
            return Err(V4Error::BadSession);
        }
        let granted = match dir {
            BindDir::Fore => ConnDir::Fore,
            BindDir::Back => ConnDir::Back,
            BindDir::ForeOrBoth | BindDir::BackOrBoth => ConnDir::Both,
        };
        if granted.back() {
            s.back_wanted.store(true, Ordering::Relaxed);
        }
        let evicted = {
            let mut i = locked(&s.inner);
            i.conns.retain(|&(c, _)| c != conn);
            bind(
                &mut i.conns,
                conn,
                granted,
                self.cfg.limits.conns_per_session,
            )
        };
        if let Some(old) = evicted {
            self.unindex_conn(old, id);
        }
        self.index_conn(conn, *id);
        Ok(granted)
    }

    /// The connection `conn` closed: it leaves every session it was bound
    /// to.
    pub fn conn_closed(&self, conn: ConnId) {
        let Some(ids) = self.conns.shard(&conn).remove(&conn) else {
            return;
        };
        for id in ids {
            let s = self.sessions.shard(&id).get(&id).cloned();
            if let Some(s) = s {
                locked(&s.inner).conns.retain(|&(c, _)| c != conn);
            }
        }
    }

    /// The back channel of session `id` as accepted, its callback program
    /// and the connections serving it (newest last), for the callback
    /// client.
    pub fn back_channel(&self, id: &SessionId) -> Option<(ChannelAttrs, u32, Vec<ConnId>)> {
        let s = self.sessions.shard(id).get(id).cloned()?;
        let conns = locked(&s.inner)
            .conns
            .iter()
            .filter(|c| c.1.back())
            .map(|c| c.0)
            .collect();
        Some((s.back, s.cb_program, conns))
    }

    /// The client session `id` belongs to.
    pub fn session_client(&self, id: &SessionId) -> Option<ClientId> {
        self.sessions.shard(id).get(id).map(|s| s.client.id)
    }

    /// The channels `conn` serves in session `id` (None: not bound).
    pub fn conn_binding(&self, id: &SessionId, conn: ConnId) -> Option<ConnDir> {
        let s = self.sessions.shard(id).get(id).cloned()?;
        let i = locked(&s.inner);
        i.conns.iter().find(|x| x.0 == conn).map(|x| x.1)
    }

    fn index_conn(&self, conn: ConnId, id: SessionId) {
        let mut sh = self.conns.shard(&conn);
        let v = sh.entry(conn).or_default();
        if !v.contains(&id) {
            v.push(id);
        }
    }

    fn unindex_conn(&self, conn: ConnId, id: &SessionId) {
        let mut sh = self.conns.shard(&conn);
        if let Some(v) = sh.get_mut(&conn) {
            v.retain(|x| x != id);
            if v.is_empty() {
                sh.remove(&conn);
            }
        }
    }
}

/// Adds `conn` (not bound yet) to `conns`, unbinding the oldest when
/// full: the one it unbound.
fn bind(
    conns: &mut Vec<(ConnId, ConnDir)>,
    conn: ConnId,
    dir: ConnDir,
    max: usize,
) -> Option<ConnId> {
    let mut out = None;
    if conns.len() >= max.max(1) {
        let i = conns
            .iter()
            .position(|&(_, d)| d == ConnDir::Fore)
            .unwrap_or(0);
        out = Some(conns.remove(i).0);
    }
    conns.push((conn, dir));
    debug_assert!(conns.len() <= max.max(1));
    out
}
