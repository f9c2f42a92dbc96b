//! The transport's interface to its service: the request it hands over,
//! what the service plans for it, where its call runs, and the reply.

use std::net::SocketAddr;
use std::sync::{Arc, Weak};

use crate::PipeLease;

/// One complete request record (all fragments joined), with what the
/// service's [`Service::plan`] made of it and how its reply may leave.
pub struct Request {
    pub data: Vec<u8>,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    /// Unique per connection for the life of the process.
    pub conn_id: u64,
    /// What `Service::plan` said of this record on the event loop
    /// (`Plan::default()` where nothing planned it: UDP).
    pub plan: Plan,
    /// Whether, and how, the reply may leave later from another thread
    /// instead of being returned (a pool job's call may; an inline call or
    /// a UDP datagram may not).
    pub responder: Responder,
}

/// The record's buffer is kept for the next record read on this thread
/// when it is small (`recycle.rs`).
impl Drop for Request {
    fn drop(&mut self) {
        crate::recycle::give_record(std::mem::take(&mut self.data));
    }
}

/// What a service made of a record when the event loop read it: where its
/// call runs, how much reply room to reserve, and an opaque word the
/// service reads back from [`Request::plan`] so it need not parse the
/// record's header again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Plan {
    pub route: Route,
    /// The largest reply this call may produce, when that is large (READ,
    /// READDIR): room reserved against `max_buffered_bytes` while the call
    /// runs. 0 for small replies.
    pub reply_bound: usize,
    /// The service's own; 0 means "not planned". Never read here.
    pub tag: u64,
}

/// What the transport calls for each request.
pub trait Service: Send + Sync + 'static {
    /// Handle one record on a pool worker (or a UDP thread). Return the
    /// reply, or None to send nothing (or to send it later: a call taken
    /// with [`Responder::defer`]).
    /// The returned buffer's first 4 bytes are reserved for the record mark:
    /// the transport overwrites them (saves a copy on the hot path), so the
    /// reply body starts at byte 4. Use `reply_buffer()` to start one.
    fn call(&self, req: Request) -> Option<Reply>;

    /// Where this record's call runs and what reply room it needs (see
    /// [`Plan`]). Called on the event loop for every record: must be
    /// cheap and must not block.
    fn plan(&self, _record: &[u8]) -> Plan {
        Plan::default()
    }

    /// The calls one event loop answers itself (run to completion), with
    /// that loop's own state; asked once per loop, on its thread, when
    /// `TransportConfig::run_inline` is on. None: every call goes to a pool.
    fn loop_calls(self: Arc<Self>) -> Option<Box<dyn LoopCalls>> {
        None
    }

    /// Whether a connection from `peer` may take a slot at all, asked once
    /// at accept (for NFS: some export lists it). Must be cheap.
    fn admit(&self, _peer: &SocketAddr) -> bool {
        true
    }

    /// A record `plan` routed [`Route::Reply`], read on connection
    /// `conn_id`: an answer to a record the service sent there itself
    /// ([`ConnHandle::send`]). Called on the event loop as soon as it is
    /// read: must be cheap and must not block. Default: dropped.
    fn reply_received(&self, _conn_id: u64, _record: Vec<u8>) {}

    /// Connection `conn_id` brings no more records: its peer finished
    /// sending, or it is closed. Called once per connection, on its loop;
    /// must be cheap. Whatever waits for a record from it may give up now.
    fn disconnected(&self, _conn_id: u64) {}
}

/// One event loop's own calls (run to completion): a `Quick` call is
/// offered here on the loop thread that read it (no handoff, no wakeup)
/// and goes to a pool if it is handed back. Owned by its loop, so its
/// state is that loop's alone.
pub trait LoopCalls: Send {
    /// Answer only what can finish without sleeping (from memory), and
    /// hand everything else back untouched for the pool.
    fn call(&mut self, req: Request) -> Inline;

    /// The loop woke (from epoll_wait) and is about to read its ready
    /// connections: the calls until the next wakeup form one turn.
    fn turn_begins(&mut self) {}

    /// The loop's turn is over and its replies are sent; `more`: it has
    /// more ready (it polls again at once), else it is about to wait for
    /// the next events. Work the turn's calls left for this moment runs
    /// here when it would otherwise sleep, instead of waking another
    /// thread, and goes to another thread when more is ready. Must be
    /// short.
    fn turn_ends(&mut self, _more: bool) {}
}

/// Where a record's call runs (`Plan::route`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Route {
    /// Usually answered from memory: offered to the loop's [`LoopCalls`].
    Quick,
    /// Offered to the loop's [`LoopCalls`] when nothing else of its loop
    /// is ready in this turn (no other connection to read, no other
    /// record of this one), or while the turn has run fewer than
    /// `TransportConfig::alone_per_turn` of them with others ready; else
    /// the loop's pool: a call that can finish without sleeping but copies
    /// long enough (a 1 MiB WRITE) that other calls should wait behind it
    /// only a bounded number of times.
    Alone,
    /// The loop's pool.
    #[default]
    Pool,
    /// May wait for the disk or stable storage: the blocking pool, if
    /// there is one.
    Blocking,
    /// Not a call: an answer to a record the service sent on this
    /// connection (a back channel's call, RFC 8881 §2.10.3.1). Handed to
    /// [`Service::reply_received`] on the loop as soon as it is read: it
    /// is not in flight, takes no pool slot and no `max_inflight_per_conn`
    /// place, and no reply room (`reply_bound` is ignored).
    Reply,
}

/// A reply: bytes, optionally followed by bytes waiting in a pipe.
#[derive(Debug)]
pub struct Reply {
    /// The first 4 bytes are reserved for the record mark.
    pub buf: Vec<u8>,
    pub spliced: Option<Spliced>,
}

/// The tail of a reply that is in a pipe (file data spliced into it), then
/// `pad` zero bytes (XDR's 4-byte alignment, RFC 4506 §4.10).
#[derive(Debug)]
pub struct Spliced {
    pub pipe: PipeLease,
    pub pad: usize,
}

impl Reply {
    /// Bytes of the record after its mark.
    pub fn body_len(&self) -> usize {
        self.buf.len().saturating_sub(4)
            + self
                .spliced
                .as_ref()
                .map_or(0, |s| s.pipe.held().saturating_add(s.pad))
    }
}

impl From<Vec<u8>> for Reply {
    fn from(buf: Vec<u8>) -> Reply {
        Reply { buf, spliced: None }
    }
}

/// What [`LoopCalls::call`] did.
pub enum Inline {
    /// Answered (or, None, nothing to send).
    Done(Option<Reply>),
    /// Not here: run it in the pool.
    Defer(Request),
}

/// A buffer with the 4 record-mark bytes reserved at its front: one this
/// thread kept from a written reply (cleared) when it has one large
/// enough, else a new one.
pub fn reply_buffer(capacity: usize) -> Vec<u8> {
    let mut v = crate::recycle::take_reply(capacity.saturating_add(4));
    v.extend_from_slice(&[0u8; 4]);
    v
}

// Replies sent later ([`Responder`], [`Later`]), by whichever thread learns
// they may leave: a call
// whose answer waits for stable storage that another thread is already
// making durable (one journal commit for many calls) need not hold its
// worker asleep meanwhile.
//
// A pool job's [`Request`](crate::Request) carries a [`Responder`] that
// can [`defer`](Responder::defer) its reply: the service takes a
// [`Later`] and returns no reply, and the worker goes on to its next
// call. A call tried on an event loop, or a UDP datagram, carries one
// that cannot (a change that owes a commit is not made on a loop: see
// `sync_route` in the NFS program). The call still counts as in flight
// on its connection until the `Later` is sent or dropped, so the loop
// neither closes the connection nor reads past `max_inflight_per_conn`
// meanwhile: that is the bound on replies waiting this way.

/// A connection as a deferred reply or a [`ConnHandle`] sees it: the
/// transport's connections implement it, so this interface names no
/// connection type.
pub(crate) trait ReplySink: Send + Sync {
    /// The connection's id, for logs.
    fn id(&self) -> u64;
    /// One more call in flight: its reply was deferred.
    fn begin(&self);
    /// Send a reply (non-blocking; the loop finishes what the socket does
    /// not take).
    fn send(&self, reply: Reply);
    /// A deferred call finished (its reply sent, or none).
    fn finish(&self);
    /// Send a record of the service's own ([`ConnHandle::send`]).
    fn send_record(&self, record: Reply) -> Result<(), SendError>;
    /// Not closed, and its peer has not finished sending.
    fn is_open(&self) -> bool;
}

/// How a call's reply may leave besides being returned by the service.
#[derive(Default)]
pub struct Responder {
    /// The connection of a pool job's call, until taken by `defer`.
    conn: Option<Arc<dyn ReplySink>>,
}

impl Responder {
    /// A reply that can only be returned (inline calls, UDP, tests).
    pub fn now_only() -> Responder {
        Responder { conn: None }
    }

    /// A pool job's call on `conn`.
    pub(crate) fn for_conn(conn: Arc<dyn ReplySink>) -> Responder {
        Responder { conn: Some(conn) }
    }

    /// Whether the reply may be deferred (`defer` would succeed).
    pub fn can_defer(&self) -> bool {
        self.conn.is_some()
    }

    /// A handle to send records of the service's own on the call's
    /// connection later, from any thread (a back channel): made only when
    /// asked. None where the call cannot be deferred (`can_defer`): a call
    /// tried on an event loop, a UDP datagram, or one already deferred.
    pub fn conn(&self) -> Option<ConnHandle> {
        self.conn.as_ref().map(|c| ConnHandle {
            id: c.id(),
            conn: Arc::downgrade(c),
        })
    }

    /// Take the call, to answer it later from any thread: the service then
    /// returns no reply. None where it cannot be (see `now_only`).
    pub fn defer(&mut self) -> Option<Later> {
        let conn = self.conn.take()?;
        // In flight until sent (its pool job finishes its own count as usual).
        conn.begin();
        Some(Later { conn: Some(conn) })
    }
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responder")
            .field("conn", &self.conn.as_ref().map(|c| c.id()))
            .finish()
    }
}

/// A call to answer later, from any thread. Dropped unsent, the call
/// finishes with no reply (the client retransmits).
pub struct Later {
    conn: Option<Arc<dyn ReplySink>>,
}

impl Later {
    /// Send the reply (a non-blocking write; the loop finishes what the
    /// socket does not take) and finish the call.
    pub fn send(mut self, reply: Option<Reply>) {
        if let Some(c) = self.conn.take() {
            if let Some(r) = reply {
                c.send(r);
            }
            c.finish();
        }
    }
}

impl Drop for Later {
    fn drop(&mut self) {
        if let Some(c) = self.conn.take() {
            c.finish();
        }
    }
}

impl std::fmt::Debug for Later {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Later")
            .field("conn", &self.conn.as_ref().map(|c| c.id()))
            .finish()
    }
}

/// Why [`ConnHandle::send`] sent nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The connection is closed, failed, or its peer finished sending.
    Closed,
    /// More than `max_conn_output` bytes wait to be sent on it: its peer
    /// is not reading.
    Full,
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SendError::Closed => "connection closed",
            SendError::Full => "connection output full",
        })
    }
}

impl std::error::Error for SendError {}

/// A connection as the service may keep it, to send records of its own on
/// it later from any thread: the calls of a back channel (RFC 8881
/// §2.10.3.1), whose REPLYs come back through [`Route::Reply`] and
/// [`Service::reply_received`]. Taken from a pool job's call
/// ([`Responder::conn`]). Cheap to clone; it holds the connection weakly,
/// so it never keeps a closed connection (or its socket) alive nor delays
/// its close: once the connection is gone, `send` fails.
#[derive(Clone)]
pub struct ConnHandle {
    id: u64,
    conn: Weak<dyn ReplySink>,
}

impl ConnHandle {
    /// The connection's id: [`Request::conn_id`] of its calls, and what
    /// `Service::reply_received` and `Service::disconnected` name.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether the connection is open and its peer still sending (so a
    /// record sent now may be answered).
    pub fn is_open(&self) -> bool {
        self.conn.upgrade().is_some_and(|c| c.is_open())
    }

    /// Send one record (non-blocking, as a reply is: the loop finishes
    /// what the socket does not take). Its first 4 bytes are reserved for
    /// the record mark, as a reply's (start it with `reply_buffer`). It
    /// may leave before or after replies of calls under way, never inside
    /// one.
    pub fn send(&self, record: Vec<u8>) -> Result<(), SendError> {
        match self.conn.upgrade() {
            Some(c) => c.send_record(Reply::from(record)),
            None => Err(SendError::Closed),
        }
    }
}

impl std::fmt::Debug for ConnHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnHandle")
            .field("id", &self.id)
            .field("open", &self.is_open())
            .finish()
    }
}
