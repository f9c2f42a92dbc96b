//! The transport's interface to its service: the request it hands over,
//! what the service plans for it, where its call runs, and the reply.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::{PipeLease, Responder};

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

/// A buffer with the 4 record-mark bytes reserved at its front.
pub fn reply_buffer(capacity: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(capacity + 4);
    v.extend_from_slice(&[0u8; 4]);
    v
}
