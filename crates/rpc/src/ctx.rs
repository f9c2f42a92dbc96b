//! What a handler sees besides its arguments ([`CallCtx`]), and what the
//! RPC layer asks of the server state it is generic over ([`State`]).

use std::cell::Cell;
use std::net::SocketAddr;
use std::time::Instant;

use rnfsd_transport::{Responder, Spliced};

use crate::auth::Auth;
use crate::back::{BackChannel, BackConn};

/// The server state a service's handlers share (for NFS: the exports and
/// their backends), and what the RPC layer needs of it.
pub trait State: Send + Sync + 'static {
    /// One event loop's own state for the calls it answers itself (run
    /// to completion), handed to those calls' handlers (`CallCtx::on_loop`).
    type Loop: LoopState;

    /// Made once per event loop, on its thread. None: every call of this
    /// state's services goes to a pool.
    fn new_loop(&self) -> Option<Self::Loop>;

    /// Connection `conn_id` closed (state kept per connection, such as
    /// NFSv4 sessions' bound connections, lets go of it).
    fn disconnected(&self, _conn_id: u64) {}
}

/// One event loop's state for the calls tried on it. A call tried there
/// may give up (it would have waited): it then runs again in a pool, and
/// its reply is thrown away.
pub trait LoopState: Send {
    /// A new turn of the loop (it woke from epoll_wait).
    fn turn_begins(&self) {}
    /// The turn is over, its replies sent; `more`: the loop has more ready.
    fn turn_ends(&self, _more: bool) {}
    /// A call is about to be tried here.
    fn begin_call(&self) {}
    /// Whether the call under way gave up.
    fn gave_up(&self) -> bool {
        false
    }
    /// The call is over; returns whether it gave up.
    fn end_call(&self) -> bool {
        false
    }
}

/// What a reply waits for before it may leave (a journal commit that makes
/// the call's change durable), kept by the handler that knows it.
pub trait Wait: Send {
    /// Runs `f` once it is over, with whether it succeeded, on the thread
    /// that sees it end.
    fn then(self: Box<Self>, f: Box<dyn FnOnce(bool) + Send>);
    /// Waits here for it (when nobody else can send the reply).
    fn wait(self: Box<Self>) -> bool;
}

/// A handler's reply that must wait (`Wait`), and the result body to
/// answer instead if what it waits for fails.
pub struct Park {
    pub until: Box<dyn Wait>,
    pub fail_body: Vec<u8>,
}

/// Data bytes a call moved, for statistics (READ and WRITE).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Moved {
    pub read: u64,
    pub written: u64,
}

/// Everything a procedure handler may look at besides its arguments.
pub struct CallCtx<'a, S: State> {
    pub xid: u32,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub auth: Auth,
    pub server: &'a S,
    /// The event loop the call is tried on (it must not sleep: answer from
    /// memory or give up), or None on a thread that may sleep.
    pub on_loop: Option<&'a S::Loop>,
    /// The reply may leave later from another thread (a pool job's call),
    /// so the handler may park it (`park`) instead of waiting.
    pub may_park: bool,
    /// The connection's id (0 where none: `CallCtx::new` alone).
    conn_id: u64,
    /// The service's back channel and the call's responder, whose
    /// connection it calls (`back_channel`).
    back: Option<(&'a BackChannel, &'a Responder)>,
    spliced: Cell<Option<Spliced>>,
    parked: Cell<Option<Park>>,
    moved: Cell<Moved>,
    /// When statistics time the call: its start, and the last clock
    /// reading a handler made (the call's time ends there: one clock read
    /// fewer per call, `clock_read`).
    started: Option<Instant>,
    clock_last: Cell<Option<Instant>>,
}

impl<'a, S: State> CallCtx<'a, S> {
    /// A call's context; `may_park` as the field says.
    pub fn new(
        xid: u32,
        peer: SocketAddr,
        local: SocketAddr,
        auth: Auth,
        server: &'a S,
        on_loop: Option<&'a S::Loop>,
        may_park: bool,
    ) -> Self {
        CallCtx {
            xid,
            peer,
            local,
            auth,
            server,
            on_loop,
            may_park,
            conn_id: 0,
            back: None,
            spliced: Cell::new(None),
            parked: Cell::new(None),
            moved: Cell::new(Moved::default()),
            started: None,
            clock_last: Cell::new(None),
        }
    }

    /// Statistics time the call from `t0`.
    pub(crate) fn timed_from(mut self, t0: Option<Instant>) -> Self {
        self.started = t0;
        self
    }

    /// When the call began, if statistics time it: a handler timing its
    /// own parts starts there instead of reading the clock again.
    pub fn started(&self) -> Option<Instant> {
        self.started
    }

    /// A handler's clock reading made as it finished its work: the call's
    /// time ends there (the little after it is not counted), and the
    /// statistics read the clock once fewer.
    pub fn clock_read(&self, t: Instant) {
        self.clock_last.set(Some(t));
    }

    pub(crate) fn clock_last(&self) -> Option<Instant> {
        self.clock_last.get()
    }

    /// The call arrived on connection `conn_id`, of a service with the back
    /// channel `back` (if any), and may leave by `responder`.
    pub(crate) fn on_conn(
        mut self,
        conn_id: u64,
        back: Option<&'a BackChannel>,
        responder: &'a Responder,
    ) -> Self {
        self.conn_id = conn_id;
        self.back = back.map(|b| (b, responder));
        self
    }

    /// The id of the connection the call arrived on (the transport's
    /// `Request::conn_id`; the same for every call of one connection).
    pub fn conn_id(&self) -> u64 {
        self.conn_id
    }

    /// The back channel of the connection the call arrived on, to call
    /// its client later from any thread (RFC 8881 §2.10.3.1: what
    /// CREATE_SESSION and BIND_CONN_TO_SESSION bind). Made only when
    /// asked. None when the service has no back channel
    /// (`RpcService::with_back_channel`), or the call has no connection
    /// to keep: tried on an event loop (give up, and it runs again in a
    /// pool, where it has one), or a UDP datagram.
    pub fn back_channel(&self) -> Option<BackConn> {
        let (b, r) = self.back?;
        Some(b.on(r.conn()?))
    }

    /// The result ends in data waiting in a pipe (READ by splice): it
    /// follows the encoded result on the wire.
    pub fn splice(&self, s: Spliced) {
        self.spliced.set(Some(s));
    }

    /// The reply may leave only once `until` is over; `fail_body` answers
    /// instead if it fails. Without `may_park`, dispatch waits for it.
    pub fn park(&self, until: Box<dyn Wait>, fail_body: Vec<u8>) {
        debug_assert!(self.parked_is_none(), "a call parks once");
        self.parked.set(Some(Park { until, fail_body }));
    }

    /// Count data bytes the call moved (statistics).
    pub fn moved(&self, read: u64, written: u64) {
        let m = self.moved.get();
        self.moved.set(Moved {
            read: m.read + read,
            written: m.written + written,
        });
    }

    pub(crate) fn take_spliced(&self) -> Option<Spliced> {
        self.spliced.take()
    }

    /// What the handler parked, if anything (taken once).
    pub fn take_parked(&self) -> Option<Park> {
        self.parked.take()
    }

    pub(crate) fn moved_total(&self) -> Moved {
        self.moved.get()
    }

    fn parked_is_none(&self) -> bool {
        let p = self.parked.take();
        let none = p.is_none();
        self.parked.set(p);
        none
    }
}

/// An RPC-level failure a handler reports instead of a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcError {
    /// The arguments did not decode (RFC 5531 GARBAGE_ARGS).
    GarbageArgs,
    /// The server could not run the call (RFC 5531 SYSTEM_ERR).
    SystemErr,
    /// Send no reply at all (for example a duplicate still in progress).
    Drop,
    /// The credential is not acceptable for this call (AUTH_ERROR TOOWEAK).
    TooWeak,
    /// The program does not serve this procedure (RFC 5531 PROC_UNAVAIL).
    ProcUnavail,
}
