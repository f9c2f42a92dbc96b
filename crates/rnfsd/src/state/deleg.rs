//! The server's side of NFSv4 delegations (RFC 8881 §10.2-§10.4): each
//! client's back channel (the connection, credential and callback
//! program its session gave, §18.36, §18.33) and its one slot, the
//! recalls (CB_RECALL in a CB_COMPOUND after CB_SEQUENCE, §20.2, §20.9)
//! sent by a few sender threads, never on a worker, and the check every
//! change makes first ([`Delegations::access`]). The delegations
//! themselves are `rnfsd_v4state`'s; the local leases under them
//! `lease.rs`'s. The same back channels carry NFSv4.2's CB_OFFLOAD (RFC
//! 7862 §16.1) for asynchronous copies ([`CbSender`], sent by the copier
//! thread), whether or not delegations are on.
//!
//! A recall is never dropped: it waits, one per delegation, until it is
//! delivered (the client answered CB_RECALL) or its delegation is
//! returned or revoked (a lease after the recall), tried again every
//! `RECALL_RETRY` while the client has no back channel, does not answer,
//! or answers with an error. A silent client holds one sender for
//! `CB_WAIT` at a time; the others serve other clients meanwhile.

use std::collections::{HashMap, VecDeque};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use rnfsd_fs::watch::Ctime;
use rnfsd_fs::{Backend, Call, Fh, FileType};
use rnfsd_proto::nfs4::cb::{
    CbArgOp, CbCompoundArgs, CbCompoundRes, CbGetAttr4Args, CbOffload4Args, CbRecall4Args, CbResOp,
    CbSequence4Args, CB_COMPOUND, NFS_CB,
};
use rnfsd_proto::nfs4::{
    Bitmap4, NfsFh4, NfsRes4, Nfsstat4, SessionId4, Stateid4, FATTR4_CHANGE, FATTR4_SIZE,
};
use rnfsd_rpc::{Auth, BackConn, CallError};
use rnfsd_v4state::{ClientHandle, ClientId, FileKey, NoDeleg, Recall, State, Stateid};

use super::lease::Leases;
use rnfsd_xdr::{Dec, Enc};

/// Threads sending callbacks: this many silent clients at once hold
/// them all (for `CB_WAIT` each); others are served meanwhile.
pub const RECALL_SENDERS: usize = 4;
/// How long a sender waits for a client's answer to a CB_COMPOUND.
const CB_WAIT: Duration = Duration::from_secs(5);
/// How long a GETATTR of a file under another client's write delegation
/// waits (on a worker thread) for the holder's answer to CB_GETATTR
/// (RFC 8881 §10.4.3): a client on a LAN answers in well under a
/// millisecond, one that takes longer is recalled and the GETATTR
/// answered NFS4ERR_DELAY. Bounded tightly because the worker waits: a
/// few such GETATTRs at once must not hold the pool (knfsd waits about
/// 30 ms; ours allows for a slower client on a busy host).
pub const CB_GETATTR_WAIT: Duration = Duration::from_millis(200);
/// A recall not delivered is sent again after this long, until its
/// delegation is returned or revoked.
const RECALL_RETRY: Duration = Duration::from_secs(1);
/// Longest tag and most results decoded from a CB_COMPOUND reply.
const CB_MAX_TAG: usize = 64;
const CB_MAX_RESULTS: usize = 4;

/// Back channel slot 0 of a session (RFC 8881 §2.10.6.3, §20.9): one
/// call at a time. A call that got no answer may have reached the
/// client, so its sequence id is not given to another call: it is sent
/// again, the same bytes, before anything else.
struct CbSlot {
    next_seq: u32,
    unanswered: Option<Vec<u8>>,
}

/// A client's back channel, as its last session with one gave it.
#[derive(Clone)]
struct CbPath {
    conn: BackConn,
    cred: Auth,
    prog: u32,
    session: SessionId4,
    /// The minor version of the client's CREATE_SESSION: its callbacks'
    /// (a client finds the session by it too: Linux answers a 4.2
    /// client's CB_SEQUENCE of minor version 1 NFS4ERR_BADSESSION).
    minor: u32,
    slot: Arc<Mutex<CbSlot>>,
}

/// Why a CB_COMPOUND has no reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CbError {
    /// The client has no back channel, or its connection is closed.
    NoPath,
    /// No answer in time, or the connection closed meanwhile (the call
    /// may have reached the client: it is sent again first next time).
    Unanswered,
    /// Not sent (too many calls waiting, the connection's output full),
    /// or refused by the client's RPC layer: the slot was not used.
    NotSent,
    /// A reply that does not decode.
    Garbled,
}

type Paths = Mutex<HashMap<ClientId, CbPath>>;

/// One client's recalls waiting for a sender.
struct Pending {
    queue: VecDeque<Recall>,
    /// A sender has this client now.
    busy: bool,
    not_before: Instant,
}

/// The recalls not yet delivered, by client, and the senders' bell.
#[derive(Default)]
pub(crate) struct Outbox {
    by_client: Mutex<HashMap<ClientId, Pending>>,
    bell: Condvar,
}

impl Outbox {
    /// Queues `recalls` (one per delegation: a second is the same).
    pub(crate) fn push(&self, recalls: Vec<Recall>) {
        if recalls.is_empty() {
            return;
        }
        let mut m = locked(&self.by_client);
        for r in recalls {
            let p = m.entry(r.client.id()).or_insert_with(|| Pending {
                queue: VecDeque::new(),
                busy: false,
                not_before: Instant::now(),
            });
            if !p.queue.iter().any(|q| q.stateid.other == r.stateid.other) {
                p.queue.push_back(r);
            }
        }
        drop(m);
        self.bell.notify_all();
    }

    /// The next recall of a client no sender has, whose time has come
    /// (waiting for one); None once `stop` says so.
    fn next(&self, stop: &dyn Fn() -> bool) -> Option<Recall> {
        let mut m = locked(&self.by_client);
        loop {
            if stop() {
                return None;
            }
            let now = Instant::now();
            let mut wait = RECALL_RETRY;
            for p in m.values_mut() {
                if p.busy || p.queue.is_empty() {
                    continue;
                }
                if p.not_before <= now {
                    if let Some(r) = p.queue.pop_front() {
                        p.busy = true;
                        return Some(r);
                    }
                }
                wait = wait.min(p.not_before - now);
            }
            m = self
                .bell
                .wait_timeout(m, wait.max(Duration::from_millis(10)))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// A sender is done with `r`'s client; `again`: `r` is to be sent
    /// again after `RECALL_RETRY`.
    fn done(&self, r: Recall, again: bool) {
        let id = r.client.id();
        let mut m = locked(&self.by_client);
        if let Some(p) = m.get_mut(&id) {
            p.busy = false;
            if again {
                p.queue.push_front(r);
                p.not_before = Instant::now() + RECALL_RETRY;
            }
            if p.queue.is_empty() {
                m.remove(&id);
            }
        }
        drop(m);
        self.bell.notify_all();
    }
}

/// Sends CB_OFFLOADs (RFC 7862 §16.1) from a copier thread.
#[derive(Clone)]
pub struct CbSender(Arc<Paths>);

impl CbSender {
    /// Sends a CB_OFFLOAD to client `to` and waits for its answer
    /// (`CB_WAIT` at most; blocks, so never on a worker): whether the
    /// client took it. Not sent again: the client can still ask
    /// OFFLOAD_STATUS (§15.9).
    pub fn offload(&self, to: ClientId, args: CbOffload4Args) -> bool {
        // A minor version 2 callback (RFC 7862 §16.1), whatever minor
        // version the session was made at: its client asked for the copy
        // in a 4.2 compound.
        match cb_compound(&self.0, to, 2, vec![CbArgOp::Offload(args)]) {
            Ok(res) => res.status == Nfsstat4::Ok,
            Err(e) => {
                tracing::info!(clientid = format!("{:#x}", to.0), error = ?e,
                    "nfsv4: CB_OFFLOAD not delivered");
                false
            }
        }
    }
}

/// A change must wait: a delegation on its file is being recalled (the
/// caller answers NFS4ERR_DELAY or NFS3ERR_JUKEBOX).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recalling;

/// What the delegations need beside the state.
pub struct Delegations {
    /// `nfs4_delegations`: grant any at all.
    pub enabled: bool,
    paths: Arc<Paths>,
    outbox: Arc<Outbox>,
    /// Most back channels remembered (`nfs4_max_clients`).
    max_paths: usize,
    /// The local leases every delegation needs (None: none can be
    /// taken, so none is granted).
    leases: Option<Arc<Leases>>,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Delegations {
    /// No delegations.
    pub fn off() -> Self {
        Delegations {
            enabled: false,
            paths: Arc::default(),
            outbox: Arc::default(),
            max_paths: 1,
            leases: None,
        }
    }

    /// Delegations for `state` (`enabled`: `nfs4_delegations`); starts the
    /// recall senders and the lease thread (at most `max_leases` leases)
    /// when enabled. Without leases (the break signal not blocked, as
    /// in a program that embeds the server without rnfsd's main) none is
    /// granted.
    pub fn new(
        state: &Arc<State>,
        enabled: bool,
        max_paths: usize,
        max_leases: usize,
    ) -> std::io::Result<Self> {
        let paths: Arc<Paths> = Arc::default();
        let outbox: Arc<Outbox> = Arc::default();
        let mut leases = None;
        if enabled {
            for i in 0..RECALL_SENDERS {
                let (p, o) = (paths.clone(), outbox.clone());
                let st = Arc::downgrade(state);
                std::thread::Builder::new()
                    .name(format!("nfsv4-recall-{i}"))
                    .spawn(move || sender(&o, &p, &st))?;
            }
            match Leases::start(state, outbox.clone(), max_leases) {
                Ok(l) => leases = Some(l),
                Err(e) => tracing::warn!(error = %e, "nfsv4: no local leases: no delegations"),
            }
        }
        Ok(Delegations {
            enabled,
            paths,
            outbox,
            max_paths: max_paths.max(1),
            leases,
        })
    }

    /// Grants client `c` a delegation on `file` (`fh` through `backend`,
    /// read or `write`; its change attribute now `change`) only while the
    /// server holds a local lease on it (`state/lease.rs`; a write lease
    /// for a write delegation): none without one.
    #[allow(clippy::too_many_arguments)]
    pub fn grant(
        &self,
        state: &State,
        backend: &dyn Backend,
        call: &Call<'_>,
        fh: &Fh,
        c: &ClientHandle,
        file: FileKey,
        write: bool,
        change: u64,
    ) -> Result<Stateid, NoDeleg> {
        let Some(l) = &self.leases else {
            return Err(NoDeleg::Resource);
        };
        l.grant(
            state,
            file,
            write,
            |to| backend.lease(call, fh, write, to),
            || state.delegate_at(c, file, write, &fh.0, change),
        )
    }

    /// CB_GETATTR (§20.1) of the file `fh` to client `to`, which holds a
    /// write delegation on it: its size and change attribute as the
    /// client sees them, or None when it does not answer within
    /// `CB_GETATTR_WAIT` (or cannot be asked: no back channel, its slot
    /// busy with a recall, an error). Blocks that long at most: never on
    /// an event loop.
    pub fn cb_getattr(&self, to: ClientId, fh: &[u8]) -> Option<CbAttrs> {
        if !self.enabled {
            return None;
        }
        let mut want = Bitmap4::new();
        want.insert(FATTR4_CHANGE);
        want.insert(FATTR4_SIZE);
        let op = CbArgOp::GetAttr(CbGetAttr4Args {
            fh: NfsFh4(fh.to_vec()),
            attr_request: want,
        });
        let res = match cb_compound_within(&self.paths, to, 1, vec![op], CB_GETATTR_WAIT, true) {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(clientid = format!("{:#x}", to.0), error = ?e,
                    "nfsv4: CB_GETATTR not answered");
                return None;
            }
        };
        match res.results.get(1) {
            Some(CbResOp::GetAttr(NfsRes4::Ok(f))) => cb_attrs(&f.attrmask, &f.attr_vals),
            _ => None,
        }
    }

    /// A delegation on `file` was returned: its lease goes with the last.
    pub fn returned(&self, state: &State, file: &FileKey) {
        if let Some(l) = &self.leases {
            l.release_unused(state, file);
        }
    }

    /// Local leases held now.
    pub fn leases(&self) -> usize {
        self.leases.as_ref().map_or(0, |l| l.count())
    }

    /// Client `id`'s back channel is `conn` (session `session` made at
    /// minor version `minor`, program `prog`, credential `cred`): recalls
    /// and CB_OFFLOADs go there. For the session already known, only the
    /// connection changes.
    pub fn set_path(
        &self,
        id: ClientId,
        conn: BackConn,
        cred: Auth,
        prog: u32,
        session: [u8; 16],
        minor: u32,
    ) {
        // Kept with delegations off too: CB_OFFLOAD goes there.
        let mut m = locked(&self.paths);
        if m.len() >= self.max_paths && !m.contains_key(&id) {
            m.retain(|_, p| p.conn.is_open());
            if m.len() >= self.max_paths {
                return;
            }
        }
        // The same session on a new connection (BIND_CONN_TO_SESSION):
        // its credential (CREATE_SESSION's, or BACKCHANNEL_CTL's) and its
        // slot's sequence stay.
        if let Some(p) = m.get_mut(&id).filter(|p| p.session.0 == session) {
            p.conn = conn;
            return;
        }
        m.insert(
            id,
            CbPath {
                conn,
                cred,
                prog,
                session: SessionId4(session),
                minor,
                slot: Arc::new(Mutex::new(CbSlot {
                    next_seq: 1,
                    unanswered: None,
                })),
            },
        );
    }

    /// BACKCHANNEL_CTL (§18.33): client `id`'s callbacks use `cred` and
    /// `prog` from now on.
    pub fn set_cred(&self, id: ClientId, cred: Auth, prog: u32) {
        if let Some(p) = locked(&self.paths).get_mut(&id) {
            p.cred = cred;
            p.prog = prog;
        }
    }

    /// Whether recalls can reach client `id`.
    pub fn has_path(&self, id: ClientId) -> bool {
        self.enabled && self.can_call(id)
    }

    /// Whether callbacks other than recalls (CB_OFFLOAD) can reach
    /// client `id`: a back channel is open, delegations on or not.
    pub fn can_call(&self, id: ClientId) -> bool {
        locked(&self.paths)
            .get(&id)
            .is_some_and(|p| p.conn.is_open())
    }

    /// What CB_OFFLOADs are sent through.
    pub fn cb_sender(&self) -> CbSender {
        CbSender(self.paths.clone())
    }

    /// Queues `recalls` for the senders (never blocks; at most one
    /// waits per delegation, so they are as bounded as delegations).
    pub fn send(&self, recalls: Vec<Recall>) {
        if self.enabled {
            self.outbox.push(recalls);
        }
    }

    /// Starts an access to `file` by NFSv4 client `by` (None: NFSv3, NLM)
    /// that changes it (`write`) or reads it (an OPEN for read): `Ok` to
    /// go on (with the access to hold until done: no delegation is
    /// granted on the file meanwhile), or `Err` when a delegation must be
    /// returned first (the recalls are sent; the caller answers
    /// NFS4ERR_DELAY or NFS3ERR_JUKEBOX). Off (`nfs4_delegations =
    /// false`): always `Ok(None)`.
    pub fn access(
        &self,
        state: &Arc<State>,
        file: FileKey,
        by: Option<ClientId>,
        write: bool,
    ) -> Result<Option<Access>, Recalling> {
        if !self.enabled {
            return Ok(None);
        }
        if let Some(a) = self.quick(state, file.fileid) {
            return Ok(Some(a));
        }
        match state.begin_access(file, by, write) {
            Ok(a) => {
                // Delegations revoked just now leave their lease: it goes
                // before the change, which would break it. (A read
                // delegation holder's own change does break it, on the
                // server's open for writing: that open answers
                // EWOULDBLOCK, the client NFS4ERR_DELAY, and the break
                // recalls the delegation. A write delegation holder's I/O
                // goes through its lease's descriptor: nothing breaks.)
                if let Some(l) = &self.leases {
                    l.release_unused(state, &file);
                }
                // Read after the release: a lease still held is one of
                // the changer's own delegations.
                let own = match write {
                    true => self.own_change(file),
                    false => OwnChange(None),
                };
                Ok(Some(Access {
                    _own: own,
                    _access: a,
                }))
            }
            Err(recalls) => {
                self.send(recalls);
                Err(Recalling)
            }
        }
    }
}

impl Delegations {
    /// [`State::quick_access`] while no local lease is held either (one
    /// left by a delegation just revoked goes on the slower path, which
    /// lets it go before the change would break it). Nothing is watched
    /// then, so no own change to tell a watch of.
    fn quick(&self, state: &State, hint: u64) -> Option<Access> {
        match &self.leases {
            Some(l) if l.count() > 0 => None,
            _ => state.quick_access(hint).map(|a| Access {
                _own: OwnChange(None),
                _access: a,
            }),
        }
    }
}

/// Spreads quick accesses over their shards: a handle's last bytes (its
/// object's own, in every backend's handle format).
fn hint(b: &[u8]) -> u64 {
    b.iter()
        .rev()
        .take(8)
        .fold(0, |h, &x| (h << 8) | u64::from(x))
}

/// An access to a file through the server in progress ([`Delegations::
/// access`]): hold it until done. No delegation is granted on the file
/// meanwhile; a change to a file whose lease is watched is told to the
/// watch at its start and end, so its own inotify event does not recall
/// the changer's delegation (`watch.rs`).
pub struct Access {
    /// A change, told to the file's watch (dropped first: the watch hears
    /// of its end while no delegation can be granted yet).
    _own: OwnChange,
    _access: rnfsd_v4state::Access,
}

/// A change the server makes to a delegated file, for a client's access
/// ([`Access`]) or for none (CB_GETATTR's mtime): its watch takes the
/// event for the server's own.
pub struct OwnChange(Option<Own>);

/// An own change told to a watch: its leases, file, ctime before, and the
/// descriptor to read the ctime after through.
type Own = (Arc<Leases>, FileKey, Option<Ctime>, Arc<OwnedFd>);

impl Drop for OwnChange {
    fn drop(&mut self) {
        if let Some((l, file, pre, fd)) = self.0.take() {
            l.end_own(&file, pre, &fd);
        }
    }
}

impl Delegations {
    /// Tells `file`'s watch (if it has one) of a change the server is
    /// about to make itself; hold the result until it is made.
    pub fn own_change(&self, file: FileKey) -> OwnChange {
        OwnChange(self.leases.as_ref().and_then(|l| {
            l.begin_own(&file)
                .map(|(pre, fd)| (l.clone(), file, pre, fd))
        }))
    }
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self._access.fmt(f)
    }
}

/// The delegation key of a regular file (only those are delegated).
fn regular_key(attr: Option<rnfsd_fs::Attr>) -> Option<FileKey> {
    attr.filter(|a| a.ftype == FileType::Regular)
        .map(|a| FileKey {
            fsid: a.fsid,
            fileid: a.fileid,
        })
}

/// What a change through the backend touches, for the check before it.
pub enum Changed<'a> {
    /// The object `fh`.
    Fh(&'a Fh),
    /// The object named `name` in directory `dir` (REMOVE, RENAME's
    /// source and target): nothing if there is none.
    Name(&'a Fh, &'a [u8]),
}

impl Delegations {
    /// [`access`](Self::access) for a change to `target` through `backend`
    /// (its key from a GETATTR or LOOKUP, only when delegations are on;
    /// an object that cannot be looked up holds no delegation we could
    /// break, and the change itself then fails).
    pub fn change(
        &self,
        state: &Arc<State>,
        backend: &dyn Backend,
        call: &Call<'_>,
        target: Changed<'_>,
        by: Option<ClientId>,
    ) -> Result<Option<Access>, Recalling> {
        if !self.enabled {
            return Ok(None);
        }
        // No delegation anywhere (most servers, most of the time): no
        // GETATTR or LOOKUP to learn the file, no table to touch.
        let near = match target {
            Changed::Fh(fh) | Changed::Name(fh, _) => fh,
        };
        if let Some(a) = self.quick(state, hint(&near.0)) {
            return Ok(Some(a));
        }
        let attr = match target {
            Changed::Fh(fh) => backend.getattr(call, fh).ok(),
            Changed::Name(dir, name) => backend.lookup(call, dir, name).ok().map(|l| l.1),
        };
        match regular_key(attr) {
            Some(k) => self.access(state, k, by, true),
            None => Ok(None),
        }
    }

    /// The check before a read of `fh` by `by` (None: NFSv3): another
    /// client's write delegation on it is recalled first (§10.4: its
    /// holder may have data the server has not seen). Nothing at all
    /// while no write delegation is held anywhere, the common case,
    /// which keeps it off the cost of every READ.
    pub fn read(
        &self,
        state: &Arc<State>,
        backend: &dyn Backend,
        call: &Call<'_>,
        fh: &Fh,
        by: Option<ClientId>,
    ) -> Result<Option<Access>, Recalling> {
        if !self.enabled || !state.any_write_delegation() {
            return Ok(None);
        }
        match regular_key(backend.getattr(call, fh).ok()) {
            Some(k) => self.access(state, k, by, false),
            None => Ok(None),
        }
    }
}

/// A write delegation holder's answer to CB_GETATTR (§20.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CbAttrs {
    pub size: u64,
    pub change: u64,
}

/// The size and change of a CB_GETATTR answer's fattr4 (`mask`,
/// `vals`): both must be there. Attributes we did not ask for (a client
/// that adds the delegated times, RFC 9754) come after them in bit order
/// and are not read; one before them is a reply we cannot read.
fn cb_attrs(mask: &Bitmap4, vals: &[u8]) -> Option<CbAttrs> {
    let mut d = Dec::new(vals);
    let (mut size, mut change) = (None, None);
    for bit in mask.iter() {
        match bit {
            FATTR4_CHANGE => change = Some(d.u64().ok()?),
            FATTR4_SIZE => size = Some(d.u64().ok()?),
            b if b > FATTR4_SIZE => break,
            _ => return None,
        }
    }
    Some(CbAttrs {
        size: size?,
        change: change?,
    })
}

/// Sends one CB_COMPOUND of `ops` after CB_SEQUENCE on client `id`'s
/// back channel slot 0 (§20.9), a call left unanswered before sent
/// again first (§2.10.6.3).
fn cb_compound(
    paths: &Paths,
    id: ClientId,
    min_minor: u32,
    ops: Vec<CbArgOp>,
) -> Result<CbCompoundRes, CbError> {
    cb_compound_within(paths, id, min_minor, ops, CB_WAIT, false)
}

/// [`cb_compound`], waiting `wait` for each answer; `no_queue`: not
/// sent (`NotSent`) while another call has the slot, nor when a call
/// left unanswered must go first.
fn cb_compound_within(
    paths: &Paths,
    id: ClientId,
    min_minor: u32,
    ops: Vec<CbArgOp>,
    wait: Duration,
    no_queue: bool,
) -> Result<CbCompoundRes, CbError> {
    let p = locked(paths).get(&id).cloned().ok_or(CbError::NoPath)?;
    if !p.conn.is_open() {
        return Err(CbError::NoPath);
    }
    let mut slot = match no_queue {
        false => locked(&p.slot),
        true => match p.slot.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Err(CbError::NotSent),
        },
    };
    if no_queue && slot.unanswered.is_some() {
        return Err(CbError::NotSent);
    }
    if let Some(body) = slot.unanswered.clone() {
        // Its answer is not ours to read: it only frees the slot.
        let seq = slot.next_seq;
        match call(&p, &body, wait) {
            Ok(res) => {
                slot.unanswered = None;
                if seq_moves(&res) {
                    slot.next_seq = next_seq(seq);
                }
            }
            Err(e) => return Err(e),
        }
    }
    let seq = slot.next_seq;
    let mut all = Vec::with_capacity(ops.len() + 1);
    all.push(CbArgOp::Sequence(CbSequence4Args {
        sessionid: p.session,
        sequenceid: seq,
        slotid: 0,
        highest_slotid: 0,
        cachethis: false,
        referring_call_lists: Vec::new(),
    }));
    all.extend(ops);
    let args = CbCompoundArgs {
        tag: Vec::new(),
        minorversion: p.minor.max(min_minor),
        callback_ident: 0,
        ops: all,
    };
    let mut e = Enc::new();
    args.encode(&mut e);
    let body = e.as_slice().to_vec();
    match call(&p, &body, wait) {
        Ok(res) => {
            if seq_moves(&res) {
                slot.next_seq = next_seq(seq);
            }
            Ok(res)
        }
        Err(CbError::Unanswered) => {
            slot.unanswered = Some(body);
            Err(CbError::Unanswered)
        }
        Err(e) => Err(e),
    }
}

fn next_seq(s: u32) -> u32 {
    s.wrapping_add(1).max(1)
}

/// One call of encoded CB_COMPOUND arguments `body`, and its reply
/// (waiting `wait` for it).
fn call(p: &CbPath, body: &[u8], wait: Duration) -> Result<CbCompoundRes, CbError> {
    let deadline = Instant::now() + wait;
    let reply = match p
        .conn
        .call(p.prog, NFS_CB, CB_COMPOUND, &p.cred, body, deadline)
    {
        Ok(b) => b,
        Err(err) => {
            tracing::info!(error = %err, "nfsv4: CB_COMPOUND not answered");
            return Err(match err {
                CallError::Closed | CallError::Timeout => CbError::Unanswered,
                _ => CbError::NotSent,
            });
        }
    };
    CbCompoundRes::decode(&mut Dec::new(&reply), CB_MAX_TAG, CB_MAX_RESULTS)
        .map_err(|_| CbError::Garbled)
}

/// Whether the slot's sequence moves on after `res`: the client took
/// the call; also when it says the sequence is misordered (we fell
/// behind it), and when it says it took this sequence id before
/// without caching the reply (§2.10.6.1.3: a call that timed out here
/// after reaching it), so the next call can get through instead of
/// repeating the id.
fn seq_moves(res: &CbCompoundRes) -> bool {
    matches!(
        res.results.first(),
        Some(CbResOp::Sequence(
            NfsRes4::Ok(_) | NfsRes4::Fail(Nfsstat4::SeqMisordered | Nfsstat4::RetryUncachedRep)
        ))
    )
}

/// A recall sender: takes the next recall of a client no other sender
/// has, sends it while its delegation is still held and recalled, and
/// queues it again (after `RECALL_RETRY`) until the client took it.
fn sender(outbox: &Outbox, paths: &Paths, state: &Weak<State>) {
    let stop = || state.strong_count() == 0;
    while let Some(r) = outbox.next(&stop) {
        let Some(s) = state.upgrade() else {
            return;
        };
        let again = s.recall_outstanding(&r) && !recall(paths, &s, &r);
        outbox.done(r, again);
    }
}

/// Sends one CB_RECALL: whether the client took it.
fn recall(paths: &Paths, s: &State, r: &Recall) -> bool {
    let id = r.client.id();
    let res = cb_compound(
        paths,
        id,
        1,
        vec![CbArgOp::Recall(CbRecall4Args {
            stateid: Stateid4 {
                seqid: r.stateid.seqid,
                other: r.stateid.other,
            },
            truncate: false,
            fh: NfsFh4(r.fh.to_vec()),
        })],
    );
    let res = match res {
        Ok(res) => res,
        Err(e) => {
            tracing::info!(clientid = format!("{:#x}", id.0), error = ?e,
                "nfsv4: CB_RECALL not delivered; sent again while the delegation is held");
            if e == CbError::NoPath || !locked(paths).get(&id).is_some_and(|p| p.conn.is_open()) {
                // SEQ4_STATUS_CB_PATH_DOWN tells the client to give one.
                s.set_callback_down(&r.client, true);
            }
            return false;
        }
    };
    // Taken: CB_RECALL answered NFS4_OK, or CB_SEQUENCE says this
    // sequence id was taken before (a call that timed out here reached
    // the client). Anything else (NFS4ERR_BAD_STATEID from a client
    // that has not seen the OPEN reply yet, NFS4ERR_DELAY, a slot
    // error): sent again.
    let taken = matches!(
        res.results.first(),
        Some(CbResOp::Sequence(NfsRes4::Fail(Nfsstat4::RetryUncachedRep)))
    ) || (res.status == Nfsstat4::Ok && res.results.len() >= 2);
    if !taken {
        tracing::debug!(status = ?res.status, "nfsv4: CB_RECALL answered with an error; sent again");
    }
    taken
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fattr(bits: &[u32], vals: &[u64]) -> (Bitmap4, Vec<u8>) {
        let mut e = Enc::new();
        for v in vals {
            e.u64(*v);
        }
        (Bitmap4::from_bits(bits).unwrap(), e.as_slice().to_vec())
    }

    /// A CB_GETATTR answer: change and size read; what follows them
    /// (the delegated times a client may add) left unread; one missing,
    /// short, or an attribute before them: not an answer.
    #[test]
    fn cb_getattr_answers_are_read_as_far_as_change_and_size() {
        let (m, v) = fattr(&[FATTR4_CHANGE, FATTR4_SIZE], &[7, 9]);
        assert_eq!(cb_attrs(&m, &v), Some(CbAttrs { size: 9, change: 7 }));
        let (m, v) = fattr(&[FATTR4_CHANGE, FATTR4_SIZE, 84, 85], &[7, 9, 1, 2, 3, 4]);
        assert_eq!(cb_attrs(&m, &v), Some(CbAttrs { size: 9, change: 7 }));
        let (m, v) = fattr(&[FATTR4_SIZE], &[9]);
        assert_eq!(cb_attrs(&m, &v), None, "no change");
        let (m, v) = fattr(&[FATTR4_CHANGE, FATTR4_SIZE], &[7]);
        assert_eq!(cb_attrs(&m, &v[..8]), None, "short");
        let (m, v) = fattr(&[1, FATTR4_CHANGE, FATTR4_SIZE], &[1, 7, 9]);
        assert_eq!(cb_attrs(&m, &v), None, "type first");
    }
}
