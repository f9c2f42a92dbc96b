//! The back channel's client (RFC 8881 §2.10.3.1): calls the server sends
//! on a connection its client opened (an NFSv4.1 session's CB_NULL,
//! CB_SEQUENCE, CB_RECALL...), whose REPLYs come back on the same
//! connection among the client's own calls. Generic: it sends what it is
//! given to whatever program the client serves there.
//!
//! A call is sent with [`BackConn::start`] (or [`BackConn::call`], which
//! also waits): it is numbered (xid) and kept, with its deadline, in one
//! table of the calls awaiting a REPLY, bounded per connection and in all.
//! The service ([`RpcService`](crate::RpcService) given the
//! [`BackChannel`]) plans each REPLY record to the transport's
//! `Route::Reply`, so the event loop hands it here as soon as it is read:
//! it is matched by connection and xid, its header checked, and its waiter
//! woken with the body. A REPLY that matches nothing (an unknown xid, one
//! that came too late) is dropped and counted; it makes nothing grow.
//! A call leaves the table when its REPLY comes, when its connection can
//! bring no more (`Service::disconnected`: its waiter fails at once), when
//! its deadline passes (its waiter times out; a call nobody waits for is
//! swept at the next use of the table), or when its [`PendingCall`] is
//! dropped.
//!
//! Blocking with a deadline, not callbacks: a callback's sender is a
//! background thread (a recall, a layout return), which may as well wait,
//! and [`PendingCall`] lets one thread send many calls and then wait for
//! each. A handler on a pool worker should not wait here for a REPLY on
//! its own connection: while that connection has `max_inflight_per_conn`
//! calls running, its REPLYs wait behind them in the socket (RFC 8881
//! servers answer NFS4ERR_DELAY and recall from elsewhere).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rnfsd_proto::rpc::{
    AcceptStat, RejectStat, ReplyHeader, AUTH_NONE, AUTH_SYS, MAX_AUTH_BYTES, MSG_CALL, RPC_VERSION,
};
use rnfsd_transport::{ConnHandle, SendError};
use rnfsd_xdr::{Dec, Enc};

use crate::auth::Auth;
use crate::limits::{BC_MAX_PENDING, BC_MAX_PENDING_PER_CONN, BC_MAX_WAIT};

/// The back channel's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackChannelConfig {
    /// Calls awaiting a REPLY on one connection; more are refused
    /// ([`CallError::TooMany`]).
    pub max_pending_per_conn: usize,
    /// Calls awaiting a REPLY on all connections.
    pub max_pending: usize,
    /// The longest a call waits for its REPLY: a later deadline is
    /// brought to this.
    pub max_wait: Duration,
}

impl Default for BackChannelConfig {
    fn default() -> Self {
        BackChannelConfig {
            max_pending_per_conn: BC_MAX_PENDING_PER_CONN,
            max_pending: BC_MAX_PENDING,
            max_wait: BC_MAX_WAIT,
        }
    }
}

/// Why a back-channel call has no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallError {
    /// The connection is closed, or its peer finished sending: no REPLY
    /// can come (before the call was sent, or while it waited).
    Closed,
    /// No REPLY by the deadline.
    Timeout,
    /// As many calls as the bounds allow await a REPLY already, on this
    /// connection or in all.
    TooMany,
    /// The connection's output is full: its peer is not reading.
    Busy,
    /// The credential does not fit an opaque_auth (RFC 5531 §8.2: 400
    /// bytes).
    BadCredential,
    /// The REPLY was accepted with this status, not SUCCESS.
    Accepted(AcceptStat),
    /// The REPLY was denied.
    Denied(RejectStat),
    /// The REPLY's header did not decode.
    Garbage,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Closed => f.write_str("back channel closed"),
            CallError::Timeout => f.write_str("no reply by the deadline"),
            CallError::TooMany => f.write_str("too many calls awaiting a reply"),
            CallError::Busy => f.write_str("connection output full"),
            CallError::BadCredential => f.write_str("credential over 400 bytes"),
            CallError::Accepted(s) => write!(f, "reply accepted with {s:?}"),
            CallError::Denied(s) => write!(f, "reply denied: {s:?}"),
            CallError::Garbage => f.write_str("reply header did not decode"),
        }
    }
}

impl std::error::Error for CallError {}

/// Back-channel counters, from [`BackChannel::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackChannelStats {
    /// Calls sent.
    pub sent: u64,
    /// REPLYs matched to a call: SUCCESS, and anything else.
    pub replied: u64,
    pub failed: u64,
    /// Calls that reached their deadline with no REPLY.
    pub timed_out: u64,
    /// Calls failed because their connection closed or its peer stopped
    /// sending (waiting, or when sent).
    pub closed: u64,
    /// Calls refused: over the bounds, or the connection's output full.
    pub refused: u64,
    /// REPLYs that matched no call awaiting one (unknown xid, too late):
    /// dropped.
    pub unmatched: u64,
    /// Calls awaiting a REPLY now.
    pub pending: u64,
}

/// The calls awaiting a REPLY on every connection of one transport's
/// service (connection ids are unique within one transport: give each
/// service its own). Cheap to clone; all clones share the table.
#[derive(Clone)]
pub struct BackChannel {
    inner: Arc<Inner>,
}

struct Inner {
    cfg: BackChannelConfig,
    table: Mutex<Table>,
    next_xid: AtomicU32,
    sent: AtomicU64,
    replied: AtomicU64,
    failed: AtomicU64,
    timed_out: AtomicU64,
    closed: AtomicU64,
    refused: AtomicU64,
    unmatched: AtomicU64,
}

/// The calls awaiting a REPLY, by connection id, then xid.
#[derive(Default)]
struct Table {
    conns: HashMap<u64, HashMap<u32, Entry>>,
    total: usize,
    /// No call's deadline is before this (None: no call): nothing to
    /// sweep until then.
    next_due: Option<Instant>,
}

struct Entry {
    slot: Arc<Slot>,
    deadline: Instant,
}

/// Where a call's outcome is left for its waiter.
#[derive(Default)]
struct Slot {
    done: Mutex<Option<Result<Vec<u8>, CallError>>>,
    cv: Condvar,
}

impl Slot {
    fn lock(&self) -> MutexGuard<'_, Option<Result<Vec<u8>, CallError>>> {
        self.done.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn complete(&self, r: Result<Vec<u8>, CallError>) {
        *self.lock() = Some(r);
        self.cv.notify_all();
    }
}

impl Table {
    /// Take a call out (the caller completes it), freeing its
    /// connection's map when it was the last there.
    fn remove(&mut self, conn: u64, xid: u32) -> Option<Entry> {
        let calls = self.conns.get_mut(&conn)?;
        let e = calls.remove(&xid)?;
        if calls.is_empty() {
            self.conns.remove(&conn);
        }
        self.total -= 1;
        if self.total == 0 {
            self.next_due = None;
        }
        Some(e)
    }
}

impl Default for BackChannel {
    fn default() -> Self {
        BackChannel::new(BackChannelConfig::default())
    }
}

impl BackChannel {
    pub fn new(cfg: BackChannelConfig) -> BackChannel {
        // xids that differ from one run to the next, as clients' do, so a
        // REPLY meant for a call of an earlier run matches none of ours.
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.subsec_nanos() ^ d.as_secs() as u32);
        BackChannel {
            inner: Arc::new(Inner {
                cfg: BackChannelConfig {
                    max_pending_per_conn: cfg.max_pending_per_conn.max(1),
                    max_pending: cfg.max_pending.max(1),
                    max_wait: cfg.max_wait,
                },
                table: Mutex::new(Table::default()),
                next_xid: AtomicU32::new(seed),
                sent: AtomicU64::new(0),
                replied: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                timed_out: AtomicU64::new(0),
                closed: AtomicU64::new(0),
                refused: AtomicU64::new(0),
                unmatched: AtomicU64::new(0),
            }),
        }
    }

    /// The back channel of the connection `conn` (from a call's
    /// [`CallCtx::back_channel`](crate::CallCtx::back_channel), or the
    /// transport's `Responder::conn`).
    pub fn on(&self, conn: ConnHandle) -> BackConn {
        BackConn {
            bc: self.clone(),
            conn,
        }
    }

    pub fn stats(&self) -> BackChannelStats {
        let i = &*self.inner;
        let pending = {
            let mut t = i.lock();
            i.sweep(&mut t, Instant::now());
            t.total as u64
        };
        BackChannelStats {
            sent: i.sent.load(Relaxed),
            replied: i.replied.load(Relaxed),
            failed: i.failed.load(Relaxed),
            timed_out: i.timed_out.load(Relaxed),
            closed: i.closed.load(Relaxed),
            refused: i.refused.load(Relaxed),
            unmatched: i.unmatched.load(Relaxed),
            pending,
        }
    }

    /// A REPLY record read on connection `conn` (on its event loop: short,
    /// never blocks beyond the table's lock). Returns whether it matched a
    /// call awaiting one; if not it is dropped.
    pub fn deliver(&self, conn: u64, mut record: Vec<u8>) -> bool {
        let i = &*self.inner;
        // The header first, outside the lock.
        let mut d = Dec::new(&record);
        let (xid, outcome) = match ReplyHeader::decode(&mut d) {
            Ok((xid, ReplyHeader::Accepted(AcceptStat::Success))) => (xid, Ok(d.position())),
            Ok((xid, ReplyHeader::Accepted(s))) => (xid, Err(CallError::Accepted(s))),
            Ok((xid, ReplyHeader::Denied(s))) => (xid, Err(CallError::Denied(s))),
            // Its xid still names the call, which gets no answer now.
            Err(_) => match rnfsd_proto::rpc::peek_xid(&record) {
                Some(xid) => (xid, Err(CallError::Garbage)),
                None => {
                    i.unmatched.fetch_add(1, Relaxed);
                    return false;
                }
            },
        };
        let result = outcome.map(|at| {
            // The body in place: its bytes move to the front, no copy.
            record.drain(..at.min(record.len()));
            record
        });
        let mut t = i.lock();
        let Some(e) = t.remove(conn, xid) else {
            drop(t);
            i.unmatched.fetch_add(1, Relaxed);
            tracing::debug!(conn, xid, "back channel: reply matches no call; dropped");
            return false;
        };
        let ctr = if result.is_ok() {
            &i.replied
        } else {
            &i.failed
        };
        ctr.fetch_add(1, Relaxed);
        // Completed under the table's lock: a waiter that finds its call
        // gone from the table finds its outcome in its slot.
        e.slot.complete(result);
        true
    }

    /// Connection `conn` can bring no more REPLYs: its calls fail now.
    pub fn disconnected(&self, conn: u64) {
        let i = &*self.inner;
        let mut t = i.lock();
        let Some(calls) = t.conns.remove(&conn) else {
            return;
        };
        t.total -= calls.len();
        if t.total == 0 {
            t.next_due = None;
        }
        i.closed.fetch_add(calls.len() as u64, Relaxed);
        for e in calls.into_values() {
            e.slot.complete(Err(CallError::Closed));
        }
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Time out every call past its deadline, once one may be: a pass
    /// over the table (bounded by `max_pending`), at most once per
    /// deadline.
    fn sweep(&self, t: &mut Table, now: Instant) {
        if t.next_due.is_none_or(|d| now < d) {
            return;
        }
        let mut next: Option<Instant> = None;
        let mut gone = 0;
        t.conns.retain(|_, calls| {
            calls.retain(|_, e| {
                if e.deadline <= now {
                    e.slot.complete(Err(CallError::Timeout));
                    gone += 1;
                    false
                } else {
                    next = Some(next.map_or(e.deadline, |n| n.min(e.deadline)));
                    true
                }
            });
            !calls.is_empty()
        });
        t.total -= gone;
        t.next_due = next;
        self.timed_out.fetch_add(gone as u64, Relaxed);
    }
}

/// One connection's back channel: what a session keeps to call its
/// client. Cheap to clone; holds the connection weakly (its calls fail
/// with [`CallError::Closed`] once it is gone).
#[derive(Clone)]
pub struct BackConn {
    bc: BackChannel,
    conn: ConnHandle,
}

impl std::fmt::Debug for BackConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackConn")
            .field("conn", &self.conn)
            .finish()
    }
}

impl BackConn {
    /// The connection's id (`Request::conn_id`, `CallCtx::conn_id`).
    pub fn id(&self) -> u64 {
        self.conn.id()
    }

    /// Whether a call sent now may be answered: the connection is open
    /// and its peer still sending (NFSv4.1's SEQ4_STATUS_CB_PATH_DOWN when
    /// not).
    pub fn is_open(&self) -> bool {
        self.conn.is_open()
    }

    /// The connection, to send records of one's own on it.
    pub fn conn(&self) -> &ConnHandle {
        &self.conn
    }

    /// Send a call and wait for its REPLY until `deadline` (at most
    /// `max_wait` from now): the REPLY's body (the procedure's results)
    /// when accepted with SUCCESS.
    pub fn call(
        &self,
        prog: u32,
        vers: u32,
        proc_: u32,
        cred: &Auth,
        args: &[u8],
        deadline: Instant,
    ) -> Result<Vec<u8>, CallError> {
        self.start(prog, vers, proc_, cred, args, deadline)?.wait()
    }

    /// Send a call and return at once: its REPLY is waited for with
    /// [`PendingCall::wait`] (until `deadline`, at most `max_wait` from
    /// now). Dropping the `PendingCall` forgets the call (a REPLY then
    /// matches nothing).
    pub fn start(
        &self,
        prog: u32,
        vers: u32,
        proc_: u32,
        cred: &Auth,
        args: &[u8],
        deadline: Instant,
    ) -> Result<PendingCall, CallError> {
        let i = &self.bc.inner;
        let conn = self.conn.id();
        if !self.conn.is_open() {
            i.closed.fetch_add(1, Relaxed);
            return Err(CallError::Closed);
        }
        let mut record = encode_call(prog, vers, proc_, cred, args)?;
        let now = Instant::now();
        let deadline = now
            .checked_add(i.cfg.max_wait)
            .map_or(deadline, |m| deadline.min(m));
        let slot = Arc::new(Slot::default());
        let xid = {
            let mut t = i.lock();
            i.sweep(&mut t, now);
            let here = t.conns.get(&conn).map_or(0, HashMap::len);
            if t.total >= i.cfg.max_pending || here >= i.cfg.max_pending_per_conn {
                drop(t);
                i.refused.fetch_add(1, Relaxed);
                return Err(CallError::TooMany);
            }
            let calls = t.conns.entry(conn).or_default();
            // Unique among this connection's calls (the counter wraps).
            let mut xid = i.next_xid.fetch_add(1, Relaxed);
            while calls.contains_key(&xid) {
                xid = i.next_xid.fetch_add(1, Relaxed);
            }
            calls.insert(
                xid,
                Entry {
                    slot: slot.clone(),
                    deadline,
                },
            );
            t.total += 1;
            t.next_due = Some(t.next_due.map_or(deadline, |d| d.min(deadline)));
            xid
        };
        // After the record mark's 4 bytes.
        if let Some(w) = record.get_mut(4..8) {
            w.copy_from_slice(&xid.to_be_bytes());
        }
        let mut pending = PendingCall {
            bc: i.clone(),
            conn,
            xid,
            slot,
            deadline,
            settled: false,
        };
        // In the table before it leaves: its REPLY may come at once.
        match self.conn.send(record) {
            Ok(()) => {}
            Err(e) => {
                let (err, ctr) = match e {
                    SendError::Closed => (CallError::Closed, &i.closed),
                    SendError::Full => (CallError::Busy, &i.refused),
                };
                // Unless `disconnected` took it first (and counted it).
                if pending.forget() {
                    ctr.fetch_add(1, Relaxed);
                }
                return Err(err);
            }
        }
        i.sent.fetch_add(1, Relaxed);
        // Its peer may have stopped sending after the check above and
        // before the call was in the table, when nobody failed it: then
        // it fails here (after, `disconnected` fails it, and its outcome
        // is in its slot).
        if !self.conn.is_open() && pending.forget() {
            i.closed.fetch_add(1, Relaxed);
            return Err(CallError::Closed);
        }
        Ok(pending)
    }
}

/// The call message (RFC 5531 §9 call_body) in a record buffer, its xid
/// left 0 (set once numbered).
fn encode_call(
    prog: u32,
    vers: u32,
    proc_: u32,
    cred: &Auth,
    args: &[u8],
) -> Result<Vec<u8>, CallError> {
    let sys = match cred {
        Auth::None => None,
        Auth::Sys(s) => Some(rnfsd_xdr::to_vec(s)),
    };
    if sys.as_ref().is_some_and(|b| b.len() > MAX_AUTH_BYTES) {
        return Err(CallError::BadCredential);
    }
    let cred_len = sys.as_ref().map_or(0, |b| 4 + b.len().next_multiple_of(4));
    let mut e = Enc::from_vec(rnfsd_transport::reply_buffer(40 + cred_len + args.len()));
    e.u32(0); // xid
    e.u32(MSG_CALL);
    e.u32(RPC_VERSION);
    e.u32(prog);
    e.u32(vers);
    e.u32(proc_);
    match &sys {
        None => {
            e.u32(AUTH_NONE);
            e.u32(0);
        }
        Some(b) => {
            e.u32(AUTH_SYS);
            e.opaque(b);
        }
    }
    // A null verifier.
    e.u32(AUTH_NONE);
    e.u32(0);
    e.raw(args);
    Ok(e.into_vec())
}

/// A call sent that awaits its REPLY ([`BackConn::start`]).
pub struct PendingCall {
    bc: Arc<Inner>,
    conn: u64,
    xid: u32,
    slot: Arc<Slot>,
    deadline: Instant,
    /// Out of the table (its outcome taken, or it was forgotten).
    settled: bool,
}

impl std::fmt::Debug for PendingCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingCall")
            .field("conn", &self.conn)
            .field("xid", &self.xid)
            .finish()
    }
}

impl PendingCall {
    pub fn xid(&self) -> u32 {
        self.xid
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether its outcome is in (`wait` would not block).
    pub fn is_done(&self) -> bool {
        self.slot.lock().is_some()
    }

    /// Wait for the REPLY, or the failure, until the call's deadline: the
    /// REPLY's body when accepted with SUCCESS.
    pub fn wait(mut self) -> Result<Vec<u8>, CallError> {
        // Whatever happens now, the call is out of the table after.
        self.settled = true;
        let mut g = self.slot.lock();
        loop {
            if let Some(r) = g.take() {
                return r;
            }
            let now = Instant::now();
            if now >= self.deadline {
                break;
            }
            g = self
                .slot
                .cv
                .wait_timeout(g, self.deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        // Never the slot's lock while taking the table's (the other order
        // is the completers').
        drop(g);
        let mine = self.bc.lock().remove(self.conn, self.xid).is_some();
        if mine {
            self.bc.timed_out.fetch_add(1, Relaxed);
            return Err(CallError::Timeout);
        }
        // Someone took it from the table first, and completed it then.
        let r = self.slot.lock().take();
        r.unwrap_or(Err(CallError::Timeout))
    }

    /// Take the call out of the table if it is still there (uncounted);
    /// whether it was.
    fn forget(&mut self) -> bool {
        self.settled = true;
        self.bc.lock().remove(self.conn, self.xid).is_some()
    }
}

impl Drop for PendingCall {
    /// A call nobody waits for any more frees its place at once.
    fn drop(&mut self) {
        if !self.settled {
            self.forget();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rnfsd_proto::rpc::AuthSys;

    /// A call we send is one our own server would read: header, the
    /// credential, and the arguments where the header says.
    #[test]
    fn a_call_reads_back_with_the_servers_parsers() {
        let sys = AuthSys {
            stamp: 3,
            machine_name: b"nfs-server".to_vec(),
            uid: 0,
            gid: 0,
            gids: vec![4, 5],
        };
        for cred in [Auth::None, Auth::Sys(sys)] {
            let rec = encode_call(0x4000_0000, 1, 1, &cred, &[9, 8, 7, 6]).unwrap();
            let body = &rec[4..];
            let p = crate::header::peek(body).unwrap();
            assert_eq!((p.rpcvers, p.prog, p.vers, p.proc_), (2, 0x4000_0000, 1, 1));
            let at = p.args_at.unwrap();
            assert_eq!(&body[at..], [9, 8, 7, 6]);
            let mut d = Dec::new(&body[crate::header::FIXED..]);
            assert_eq!(crate::auth::decode(&mut d), Ok(cred));
            assert_eq!(d.position() + crate::header::FIXED, at);
        }
    }

    #[test]
    fn a_credential_over_its_bound_is_refused() {
        let sys = AuthSys {
            machine_name: vec![b'x'; MAX_AUTH_BYTES],
            ..AuthSys::default()
        };
        assert_eq!(
            encode_call(1, 1, 0, &Auth::Sys(sys), &[]),
            Err(CallError::BadCredential)
        );
    }

    /// REPLYs for no call, on no connection, leave the table empty.
    #[test]
    fn unmatched_replies_leave_nothing() {
        let bc = BackChannel::default();
        let mut e = Enc::new();
        rnfsd_proto::rpc::encode_accepted(&mut e, 5, AcceptStat::Success);
        assert!(!bc.deliver(1, e.into_vec()));
        assert!(!bc.deliver(1, vec![0, 0]));
        bc.disconnected(1);
        let st = bc.stats();
        assert_eq!((st.unmatched, st.pending, st.closed), (2, 0, 0));
        assert!(bc.inner.lock().conns.is_empty());
    }
}
