//! The server's side of NFSv4 delegations (RFC 8881 §10.2-§10.4): each
//! client's back channel (the connection, credential and callback
//! program its session gave, §18.36, §18.33), the recalls (CB_RECALL in a
//! CB_COMPOUND after CB_SEQUENCE, §20.2, §20.9) sent by one thread from a
//! bounded queue, never on a worker, and the check every change makes
//! first ([`Delegations::access`]). The delegations themselves are
//! `rnfsd_v4state`'s. The same thread and back channels carry NFSv4.2's
//! CB_OFFLOAD (RFC 7862 §16.1) for asynchronous copies ([`CbQueue`]),
//! whether or not delegations are on.
//!
//! A recall that cannot be sent (the queue full, no back channel, the
//! client silent) changes nothing for safety: the delegation is revoked
//! once the lease has passed since the recall, and the conflicting call,
//! answered NFS4ERR_DELAY / NFS3ERR_JUKEBOX until then, goes on.

use std::collections::HashMap;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use rnfsd_fs::{Backend, Call, Fh, FileType};
use rnfsd_proto::nfs4::cb::{
    CbArgOp, CbCompoundArgs, CbCompoundRes, CbOffload4Args, CbRecall4Args, CbResOp,
    CbSequence4Args, CB_COMPOUND, NFS_CB,
};
use rnfsd_proto::nfs4::{NfsFh4, NfsRes4, Nfsstat4, SessionId4, Stateid4};
use rnfsd_rpc::{Auth, BackConn};
use rnfsd_v4state::{Access, ClientHandle, ClientId, FileKey, NoDeleg, Recall, State, Stateid};

use super::lease::Leases;
use rnfsd_xdr::{Dec, Enc};

/// Callbacks waiting for the sender; past this a recall is dropped (the
/// delegation is then revoked at its deadline), as is a CB_OFFLOAD (the
/// client can still ask OFFLOAD_STATUS).
pub const RECALL_QUEUE: usize = 1024;
/// How long the sender waits for a client's answer to a CB_RECALL.
const RECALL_WAIT: Duration = Duration::from_secs(5);
/// Longest tag and most results decoded from a CB_COMPOUND reply.
const CB_MAX_TAG: usize = 64;
const CB_MAX_RESULTS: usize = 4;

/// A client's back channel, as its last session with one gave it.
#[derive(Clone)]
struct CbPath {
    conn: BackConn,
    cred: Auth,
    prog: u32,
    session: SessionId4,
    /// The sequence id of back channel slot 0's next call.
    next_seq: u32,
}

/// A change must wait: a delegation on its file is being recalled (the
/// caller answers NFS4ERR_DELAY or NFS3ERR_JUKEBOX).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recalling;

/// What the sender sends.
enum Callback {
    Recall(Recall),
    /// CB_OFFLOAD to a client (RFC 7862 §16.1).
    Offload(ClientId, CbOffload4Args),
}

/// Queues CB_OFFLOADs for the sender, from any thread.
#[derive(Clone)]
pub struct CbQueue(SyncSender<Callback>);

impl CbQueue {
    /// Queues a recall (never blocks): false when the queue is full or the
    /// sender gone.
    pub fn recall(&self, r: Recall) -> bool {
        self.0.try_send(Callback::Recall(r)).is_ok()
    }

    /// Queues a CB_OFFLOAD for client `to` (never blocks): false when the
    /// queue is full or the sender gone.
    pub fn offload(&self, to: ClientId, args: CbOffload4Args) -> bool {
        self.0.try_send(Callback::Offload(to, args)).is_ok()
    }
}

/// What the delegations need beside the state.
pub struct Delegations {
    /// `nfs4_delegations`: grant any at all.
    pub enabled: bool,
    paths: Arc<Mutex<HashMap<ClientId, CbPath>>>,
    queue: Option<SyncSender<Callback>>,
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
            queue: None,
            max_paths: 1,
            leases: None,
        }
    }

    /// Delegations for `state` (`enabled`: `nfs4_delegations`); starts the
    /// callback sender (recalls when enabled, CB_OFFLOAD always) and, when
    /// enabled, the lease thread (at most `max_leases` leases). Without
    /// leases (the break signal not blocked, as in a program that embeds
    /// the server without rnfsd's main) no delegation is granted.
    pub fn new(
        state: &Arc<State>,
        enabled: bool,
        max_paths: usize,
        max_leases: usize,
    ) -> std::io::Result<Self> {
        let paths: Arc<Mutex<HashMap<ClientId, CbPath>>> = Arc::default();
        let (tx, rx) = sync_channel(RECALL_QUEUE);
        let p = paths.clone();
        let st = Arc::downgrade(state);
        std::thread::Builder::new()
            .name("nfsv4-recall".into())
            .spawn(move || sender(rx, p, st))?;
        let mut leases = None;
        if enabled {
            let q = CbQueue(tx.clone());
            match Leases::start(state, move |r| q.recall(r), max_leases) {
                Ok(l) => leases = Some(l),
                Err(e) => tracing::warn!(error = %e, "nfsv4: no local leases: no delegations"),
            }
        }
        Ok(Delegations {
            enabled,
            paths,
            queue: Some(tx),
            max_paths: max_paths.max(1),
            leases,
        })
    }

    /// Grants client `c` a delegation on `file` (`fh` through `backend`,
    /// read or `write`) only while the server holds a local lease on it
    /// (`state/lease.rs`): none without one.
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
    ) -> Result<Stateid, NoDeleg> {
        let Some(l) = &self.leases else {
            return Err(NoDeleg::Resource);
        };
        l.grant(
            state,
            file,
            write,
            |to| backend.lease(call, fh, write, to),
            || state.delegate(c, file, write, &fh.0),
        )
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

    /// Client `id`'s back channel is `conn` (session `session`, program
    /// `prog`, credential `cred`): recalls go there. For the session
    /// already known, only the connection changes.
    pub fn set_path(&self, id: ClientId, conn: BackConn, cred: Auth, prog: u32, session: [u8; 16]) {
        if self.queue.is_none() {
            return;
        }
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
                next_seq: 1,
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
        self.enabled
            && locked(&self.paths)
                .get(&id)
                .is_some_and(|p| p.conn.is_open())
    }

    /// Whether callbacks other than recalls (CB_OFFLOAD) can reach
    /// client `id`: a back channel is open, delegations on or not.
    pub fn can_call(&self, id: ClientId) -> bool {
        locked(&self.paths)
            .get(&id)
            .is_some_and(|p| p.conn.is_open())
    }

    /// Where CB_OFFLOADs are queued (None: no sender).
    pub fn cb_queue(&self) -> Option<CbQueue> {
        self.queue.clone().map(CbQueue)
    }

    /// Queues `recalls` for the sender (never blocks).
    pub fn send(&self, recalls: Vec<Recall>) {
        let Some(q) = &self.queue else {
            return;
        };
        for r in recalls {
            match q.try_send(Callback::Recall(r)) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    tracing::warn!(
                        "nfsv4: recall queue full; the delegation is revoked at its deadline"
                    );
                }
                Err(TrySendError::Disconnected(_)) => return,
            }
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
        match state.begin_access(file, by, write) {
            Ok(a) => {
                // Delegations revoked just now leave their lease: it goes
                // before the change, which would break it. (The holder's
                // own change does break it, on the server's open for
                // writing: that open answers EWOULDBLOCK, the client
                // NFS4ERR_DELAY, and the break recalls the delegation.)
                if let Some(l) = &self.leases {
                    l.release_unused(state, &file);
                }
                Ok(Some(a))
            }
            Err(recalls) => {
                self.send(recalls);
                Err(Recalling)
            }
        }
    }
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
        let attr = match target {
            Changed::Fh(fh) => backend.getattr(call, fh).ok(),
            Changed::Name(dir, name) => backend.lookup(call, dir, name).ok().map(|l| l.1),
        };
        match attr {
            Some(a) if a.ftype == FileType::Regular => self.access(
                state,
                FileKey {
                    fsid: a.fsid,
                    fileid: a.fileid,
                },
                by,
                true,
            ),
            _ => Ok(None),
        }
    }
}

/// The callback sender: one CB_COMPOUND at a time, each waited for at
/// most `RECALL_WAIT`.
fn sender(
    rx: Receiver<Callback>,
    paths: Arc<Mutex<HashMap<ClientId, CbPath>>>,
    state: Weak<State>,
) {
    while let Ok(cb) = rx.recv() {
        let id = match &cb {
            Callback::Recall(r) => r.client.id(),
            Callback::Offload(id, _) => *id,
        };
        let Some(p) = locked(&paths).get(&id).cloned() else {
            tracing::info!(
                clientid = format!("{:#x}", id.0),
                "nfsv4: no back channel for a callback"
            );
            continue;
        };
        let r = match cb {
            Callback::Recall(r) => r,
            Callback::Offload(id, args) => {
                // CB_OFFLOAD is minor version 2's (RFC 7862 §16.1).
                let ok = call(&p, 2, CbArgOp::Offload(args), id, "CB_OFFLOAD");
                if ok {
                    moved_on(&paths, id, &p);
                }
                continue;
            }
        };
        let ok = recall(&p, &r);
        if ok {
            moved_on(&paths, id, &p);
        }
        if let Some(s) = state.upgrade() {
            if !ok && !p.conn.is_open() {
                s.set_callback_down(&r.client, true);
            }
        }
    }
}

/// Back channel slot 0 of client `id` moves on past `p`'s call.
fn moved_on(paths: &Mutex<HashMap<ClientId, CbPath>>, id: ClientId, p: &CbPath) {
    if let Some(q) = locked(paths).get_mut(&id) {
        if q.session == p.session {
            q.next_seq = p.next_seq.wrapping_add(1).max(1);
        }
    }
}

/// Sends one CB_RECALL: whether the slot's sequence moves on.
fn recall(p: &CbPath, r: &Recall) -> bool {
    let op = CbArgOp::Recall(CbRecall4Args {
        stateid: Stateid4 {
            seqid: r.stateid.seqid,
            other: r.stateid.other,
        },
        truncate: false,
        fh: NfsFh4(r.fh.to_vec()),
    });
    call(p, 1, op, r.client.id(), "CB_RECALL")
}

/// Sends `op` after CB_SEQUENCE in one CB_COMPOUND of minor version
/// `minor`: whether the slot's sequence moves on.
fn call(p: &CbPath, minor: u32, op: CbArgOp, id: ClientId, what: &str) -> bool {
    let args = CbCompoundArgs {
        tag: Vec::new(),
        minorversion: minor,
        callback_ident: 0,
        ops: vec![
            CbArgOp::Sequence(CbSequence4Args {
                sessionid: p.session,
                sequenceid: p.next_seq,
                slotid: 0,
                highest_slotid: 0,
                cachethis: false,
                referring_call_lists: Vec::new(),
            }),
            op,
        ],
    };
    let mut e = Enc::new();
    args.encode(&mut e);
    let deadline = Instant::now() + RECALL_WAIT;
    let body = match p
        .conn
        .call(p.prog, NFS_CB, CB_COMPOUND, &p.cred, e.as_slice(), deadline)
    {
        Ok(b) => b,
        Err(err) => {
            tracing::info!(clientid = format!("{:#x}", id.0), error = %err, what,
                "nfsv4: callback not answered");
            return false;
        }
    };
    let res = CbCompoundRes::decode(&mut Dec::new(&body), CB_MAX_TAG, CB_MAX_RESULTS);
    let Ok(res) = res else {
        return false;
    };
    // The slot moves on when the client took the call; also when it
    // says the sequence is misordered (we fell behind it), and when it
    // says it took this sequence id before without caching the reply
    // (RFC 8881 §2.10.6.1.3: a call that timed out here after reaching
    // it), so the next call can get through instead of repeating the id.
    let seq_ok = matches!(
        res.results.first(),
        Some(CbResOp::Sequence(
            NfsRes4::Ok(_) | NfsRes4::Fail(Nfsstat4::SeqMisordered | Nfsstat4::RetryUncachedRep)
        ))
    );
    if res.status != Nfsstat4::Ok {
        tracing::debug!(status = ?res.status, what, "nfsv4: callback answered with an error");
    }
    seq_ok
}
