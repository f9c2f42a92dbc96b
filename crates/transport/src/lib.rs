//! rnfsd-transport
//! Transport: listening sockets, TCP record marking (RFC 5531 §11), event
//! loops, and the hand-off of each complete request to exactly one worker of
//! the pool. Knows nothing of RPC: it moves records.
//!
//! # Use
//! ```no_run
//! use std::sync::Arc;
//! use rnfsd_transport::{Reply, Request, Service, Transport, TransportConfig, reply_buffer};
//! struct Echo;
//! impl Service for Echo {
//!     fn call(&self, req: Request) -> Option<Reply> {
//!         let mut r = reply_buffer(req.data.len());
//!         r.extend_from_slice(&req.data);
//!         Some(r.into())
//!     }
//! }
//! let cfg = TransportConfig { listen: vec!["0.0.0.0:2049".parse().unwrap()], ..Default::default() };
//! let h = Transport::start(cfg, rnfsd_pool::PoolConfig::default(), Arc::new(Echo)).unwrap();
//! println!("listening on {:?}", h.local_addrs());
//! // ... from a signal-handling thread: h.shutdown();
//! h.wait();
//! ```
//!
//! # Design
//! - `event_threads` mio (epoll, edge-triggered) loops. Loop 0 accepts on
//!   every listener and deals connections to the loops: round-robin, or
//!   with `pin_loops` to the loop on the CPU the connection's packets
//!   arrive on (SO_INCOMING_CPU) as long as that keeps it within two
//!   connections of the least loaded loop. A loop
//!   reads records and submits each complete one to the pool: exactly one
//!   handoff, at most one wakeup, per request.
//! - The worker that ran the request writes the reply itself with a
//!   non-blocking write, under a per-connection write lock (replies never
//!   interleave, but may go out in any order: pipelining). What the socket
//!   does not take is queued on the connection and the owning loop finishes
//!   it on writability, so no third thread is woken in the common case and
//!   a slow client never holds a worker.
//! - Backpressure: a loop stops reading a connection that has
//!   `max_inflight_per_conn` requests in flight or more than
//!   `max_conn_output` reply bytes queued, and resumes when it drains; when
//!   the pool queue is full it retries every millisecond. Per-connection
//!   memory is thus bounded by about `max_record` + one 64 KiB read of
//!   records + `max_conn_output` + the replies of the in-flight requests;
//!   across connections, `max_buffered_bytes` bounds records, the room
//!   reserved for large replies ([`Plan::reply_bound`]) and queued
//!   replies together.
//! - Buffers: each loop reads into one reused 64 KiB buffer and copies each
//!   record into an exactly-sized `Vec` (capacity reserved from the
//!   fragment header, after the `max_record` check) that becomes
//!   `Request::data`; a large fragment body is read straight into that
//!   `Vec`, with no copy through the buffer; the reply `Vec` from the service is written as is, its
//!   4 reserved bytes holding the record mark. A reply may end in a pipe
//!   ([`Spliced`]): its bytes go from the pipe to the socket by splice(2),
//!   so file data reaches the socket with no user-space copy.
//! - Pools ([`PoolLayout`]): by default (`PerLoop`) each loop has its own
//!   pool, with the configured thread counts divided among the loops, and
//!   a connection's requests run on its loop's pool; `Shared` is one pool
//!   for all loops. `pin_loops` pins each loop, and its pool's workers, to
//!   one CPU, and steers connections as above. docs/pool-layout.md has
//!   the measurements behind the defaults.
//! - Counters are per loop (single writer) or per CPU ([`StripedCounter`]),
//!   summed by [`Handle::stats`].
//! - UDP ([`UdpTransport`], the `udp` module): one datagram per call and
//!   per reply, answered on the receiving thread; for the port mapper and
//!   the lock manager, not NFS.
//! - SIGPIPE: replies are written with `send(MSG_NOSIGNAL)` and `writev`;
//!   Rust binaries ignore SIGPIPE by default, which `writev` relies on.

mod conn;
mod event_loop;
mod pipe;
mod record;
mod responder;
mod sys;
mod udp;
mod work;

pub use event_loop::split_pool;
pub use pipe::{PipeLease, PipePool};
pub use responder::{Later, Responder};
pub use udp::{UdpConfig, UdpHandle, UdpStats, UdpTransport, UDP_CONN_ID};

use crossbeam_utils::CachePadded;
pub use rnfsd_pool::{PoolConfig, PoolStats, StripedCounter};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

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

/// How worker pools are laid out over the event loops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PoolLayout {
    /// One pool for all loops, with the configured thread counts.
    Shared,
    /// One pool per loop ("the pool of the core that received it"); a
    /// connection's requests go to its loop's pool. Each pool gets the
    /// configured counts divided by the number of loops, rounded up:
    /// `Fixed(n)` becomes `Fixed(ceil(n/loops))`, `Adaptive { min, max }`
    /// becomes `Adaptive { ceil(min/loops), ceil(max/loops) }`, and
    /// `queue_limit` becomes `ceil(queue_limit/loops)`, so the totals stay
    /// (within rounding) what was configured. `max_waking` stays per pool.
    /// With one loop it is exactly `Shared`. The default: measured better
    /// than `Shared` with 2 loops (docs/pool-layout.md).
    #[default]
    PerLoop,
}

/// Transport configuration. `Default` gives the production bounds and no
/// listen address.
#[derive(Debug)]
pub struct TransportConfig {
    /// Addresses to bind (std `bind`: SO_REUSEADDR, backlog 128).
    pub listen: Vec<SocketAddr>,
    /// Already-bound listeners (e.g. from a privileged port); used as well.
    pub listeners: Vec<TcpListener>,
    /// Event-loop threads. Default 1 (the loops only read; workers reply).
    pub event_threads: usize,
    /// Open connections at most; at the limit the oldest idle one is
    /// closed to make room, and a new one is accepted and closed at once
    /// only when none is idle. Default 1024 (the fd limit is 20,000).
    pub max_connections: usize,
    /// Open connections from one client address at most (0 = no limit
    /// beyond `max_connections`); more are accepted and closed at once.
    /// Default 0: NAT, containers and VMs behind one host often present
    /// many clients as one address, so a default cap would refuse real
    /// clients; set it where every client has its own address.
    pub max_connections_per_client: usize,
    /// Largest request record (all fragments). A bigger one closes the
    /// connection. Default 1 MiB + 64 KiB (a 1 MiB WRITE plus headers).
    pub max_record: usize,
    /// Requests of one connection in the pool at once before the loop stops
    /// reading it. Default 64.
    pub max_inflight_per_conn: usize,
    /// Queued (unsent) reply bytes of one connection before the loop stops
    /// reading it. Default 4 MiB.
    pub max_conn_output: usize,
    /// Bytes held across all connections for request records (received,
    /// or waiting for and in a worker) and queued replies. Past it the
    /// loops stop reading connections that have anything in flight or
    /// queued: a client that never reads its replies stops being read,
    /// instead of the server allocating, while a client with nothing
    /// outstanding is still read. 0: no bound. Default 256 MiB.
    pub max_buffered_bytes: usize,
    /// Close a connection that sent nothing for this long and has nothing in
    /// flight. Default 6 min (as knfsd).
    pub idle_timeout: Duration,
    /// On shutdown, how long to keep flushing queued replies. Default 10 s.
    pub shutdown_timeout: Duration,
    /// One pool for all loops, or one per loop. Default `PerLoop`.
    pub pools: PoolLayout,
    /// Pin event loop `i` to the `i`-th CPU this process may run on (modulo
    /// their number) and, with `PerLoop`, its pool's workers to the same
    /// CPU. A pin that fails is logged and ignored. Default false.
    pub pin_loops: bool,
    /// Most threads of one pool shared by every loop for calls that may
    /// wait for the disk or stable storage (`Route::Blocking`, and quick
    /// calls that gave up); 0: none, such calls run in the loops' pools.
    /// Shared, so no loop's share of threads limits how many slow calls one
    /// connection has running. Not pinned. Default 0.
    pub blocking_threads: usize,
    /// The blocking pool's threads' nice value (`PoolConfig::nice`); None:
    /// the process's. Default None.
    pub blocking_nice: Option<i32>,
    /// The blocking pool's threads run under SCHED_BATCH
    /// (`PoolConfig::sched_batch`): their wakeups do not preempt the loops.
    /// Default false.
    pub blocking_sched_batch: bool,
    /// The blocking pool leaves a job queued alone to a running worker, and
    /// a timer polled by loop 0 wakes one for it after this long
    /// (`PoolConfig::lazy_wake`). None: every job wakes a worker at once.
    /// Default None.
    pub blocking_lazy_wake: Option<Duration>,
    /// Offer `Quick` records to the loop's own [`LoopCalls`] on its thread;
    /// the replies a loop produces for one connection in one turn leave in
    /// one write. Default true.
    pub run_inline: bool,
    /// `Route::Alone` calls a loop runs itself in one turn while other
    /// calls of it are ready (each makes them wait for its copy); past it
    /// they go to its pool. 0: only when nothing else is ready. Default 0.
    pub alone_per_turn: usize,
    /// Most replies a pool worker holds back while it runs the next short
    /// call (`Route::Pool`) of the same connection, so a burst leaves in
    /// one write (`work.rs`); 0 or 1: each reply goes alone. Default 16.
    pub reply_batch: usize,
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            listen: Vec::new(),
            listeners: Vec::new(),
            event_threads: 1,
            max_connections: 1024,
            max_connections_per_client: 0,
            max_record: (1 << 20) + (64 << 10),
            max_inflight_per_conn: 64,
            max_conn_output: 4 << 20,
            max_buffered_bytes: 256 << 20,
            idle_timeout: Duration::from_secs(360),
            shutdown_timeout: Duration::from_secs(10),
            pools: PoolLayout::PerLoop,
            pin_loops: false,
            blocking_threads: 0,
            blocking_nice: None,
            blocking_sched_batch: false,
            blocking_lazy_wake: None,
            run_inline: true,
            alone_per_turn: 0,
            reply_batch: 16,
        }
    }
}

/// Transport counters, summed on read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransportStats {
    pub connections_open: u64,
    pub connections_accepted: u64,
    pub connections_closed: u64,
    /// Accepted and closed at once: over `max_connections` (no idle one to
    /// close), over the per-client limit, or not a listed client.
    pub connections_refused: u64,
    /// Idle connections closed to make room at `max_connections`.
    pub connections_evicted: u64,
    /// Complete request records received.
    pub records_in: u64,
    /// Records over `max_record` (each closed its connection).
    pub records_too_big: u64,
    pub bytes_in: u64,
    /// Replies fully written to sockets.
    pub replies_out: u64,
    /// Socket writes that carried reply bytes: replies_out / writes_out is
    /// how many replies left together (inline batches, `reply_batch`).
    pub writes_out: u64,
    pub bytes_out: u64,
    /// Reply bytes queued on connections, not yet taken by the socket.
    pub reply_bytes_queued: u64,
    /// Bytes held for records and queued replies (`max_buffered_bytes`).
    pub buffered_bytes: u64,
    /// Records answered on the loop thread (run to completion), and records
    /// offered there that went to the pool after all.
    pub records_inline: u64,
    pub records_deferred: u64,
}

/// Entry point: `Transport::start(...)`.
pub struct Transport;

impl Transport {
    /// Bind, start the worker pool and the event loops, and serve until
    /// [`Handle::shutdown`].
    pub fn start(
        cfg: TransportConfig,
        pool: PoolConfig,
        service: Arc<dyn Service>,
    ) -> io::Result<Handle> {
        event_loop::start(cfg, pool, service)
    }
}

pub(crate) struct Limits {
    pub run_inline: bool,
    pub alone_per_turn: usize,
    pub reply_batch: usize,
    pub max_connections: usize,
    pub max_connections_per_client: usize,
    pub max_record: usize,
    pub max_inflight_per_conn: usize,
    pub max_conn_output: usize,
    pub max_buffered_bytes: usize,
    pub idle_timeout: Duration,
    pub shutdown_timeout: Duration,
}

/// Counters written by workers (any thread): per-CPU cells.
#[derive(Default)]
pub(crate) struct WorkerStats {
    pub bytes_out: StripedCounter,
    pub replies_out: StripedCounter,
    /// Socket writes (write, writev, splice) that carried reply bytes.
    pub writes_out: StripedCounter,
    /// Reply bytes ever queued / ever drained (or dropped) from queues.
    pub queued_in: StripedCounter,
    pub queued_out: StripedCounter,
    /// Request bytes ever taken / let go: partial records and records
    /// handed to workers.
    pub held_in: StripedCounter,
    pub held_out: StripedCounter,
}

impl WorkerStats {
    /// Bytes held for records and queued replies, all connections (the
    /// `max_buffered_bytes` budget). Sums every cell: once per loop turn.
    pub fn buffered(&self) -> u64 {
        let q = self.queued_in.sum().saturating_sub(self.queued_out.sum());
        let h = self.held_in.sum().saturating_sub(self.held_out.sum());
        q + h
    }
}

/// Counters written only by one event loop (`open` excepted: see there).
#[derive(Default)]
pub(crate) struct LoopStats {
    pub accepted: AtomicU64,
    pub refused: AtomicU64,
    pub evicted: AtomicU64,
    pub closed: AtomicU64,
    pub records_in: AtomicU64,
    pub too_big: AtomicU64,
    pub bytes_in: AtomicU64,
    pub inline: AtomicU64,
    pub deferred: AtomicU64,
    /// Connections this loop holds now: counted by the accepting loop when
    /// it deals one here (`EventLoop::steer`, which balances on it),
    /// uncounted by this loop when it closes one or fails to add it.
    pub open: AtomicUsize,
}

pub(crate) use rnfsd_pool::counter::bump;

/// Messages to an event loop from other threads.
pub(crate) enum Msg {
    /// A connection accepted by loop 0 for this loop.
    NewConn(TcpStream, SocketAddr),
    /// Look at connection `token` again (if it is still connection `id`):
    /// resume reading, or close after EOF / write failure.
    Check { token: usize, id: u64 },
    /// Report this loop's connection idle the longest (loop 0, at the
    /// connection limit, looks for the oldest idle connection of all).
    OldestIdle(std::sync::mpsc::Sender<Option<IdleConn>>),
    /// Close connection `token` if it is still connection `id` and idle;
    /// else this loop's oldest idle one, so the limit holds.
    CloseIdle { token: usize, id: u64 },
}

/// An idle connection as one loop reports it to another.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IdleConn {
    pub since: std::time::Instant,
    pub lp: usize,
    pub token: usize,
    pub id: u64,
}

pub(crate) struct LoopNotify {
    pub waker: mio::Waker,
    /// Drained every loop iteration; at most a few messages per connection.
    pub inbox: Mutex<Vec<Msg>>,
}

impl LoopNotify {
    pub fn send(&self, m: Msg) {
        self.inbox.lock().unwrap_or_else(|e| e.into_inner()).push(m);
        self.wake();
    }

    pub fn wake(&self) {
        if let Err(e) = self.waker.wake() {
            tracing::error!("event loop wake failed: {e}");
        }
    }
}

pub(crate) const RUNNING: u8 = 0;
pub(crate) const DRAINING: u8 = 1;
pub(crate) const FINAL: u8 = 2;

impl Shared {
    /// Count a connection from `peer` as gone (every path that undoes an
    /// accept comes here).
    pub(crate) fn release(&self, peer: &SocketAddr) {
        self.open.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        if self.limits.max_connections_per_client > 0 {
            let mut m = self.per_client.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(n) = m.get_mut(&peer.ip()) {
                *n -= 1;
                if *n == 0 {
                    m.remove(&peer.ip());
                }
            }
        }
    }

    /// Admit one more connection from `peer` if its address is under the
    /// per-client limit.
    pub(crate) fn admit_client(&self, peer: &SocketAddr) -> bool {
        let max = self.limits.max_connections_per_client;
        if max == 0 {
            return true;
        }
        let mut m = self.per_client.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(peer.ip()).or_insert(0);
        if *n >= max {
            return false;
        }
        *n += 1;
        true
    }
}

pub(crate) struct Shared {
    pub service: Arc<dyn Service>,
    pub limits: Limits,
    pub loops: Vec<LoopNotify>,
    /// The CPU each loop is pinned to (None: not pinned).
    pub loop_cpus: Vec<Option<usize>>,
    pub stats: WorkerStats,
    pub loop_stats: Vec<CachePadded<LoopStats>>,
    /// Open connections (accepted and not yet closed), all loops.
    pub open: AtomicUsize,
    /// Open connections per client address, kept only with a per-client
    /// limit. At most one entry per open connection (entries at zero are
    /// removed); touched at accept and close, never per request.
    pub per_client: Mutex<std::collections::HashMap<std::net::IpAddr, usize>>,
    pub next_conn_id: AtomicU64,
    /// RUNNING → DRAINING (stop accepting and reading) → FINAL (flush
    /// replies, close, exit).
    pub phase: AtomicU8,
    /// Loops that have seen DRAINING and stopped submitting.
    pub drained: Mutex<usize>,
    pub drained_cv: Condvar,
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum State {
    Running,
    Stopping,
    Done,
}

struct HandleInner {
    shared: Arc<Shared>,
    /// One pool (`Shared`) or one per loop (`PerLoop`).
    pools: Vec<Arc<rnfsd_pool::Pool<work::Work>>>,
    addrs: Vec<SocketAddr>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    state: Mutex<State>,
    state_cv: Condvar,
}

/// A running transport. Cheap to clone; all clones control the same
/// transport. Dropping the last clone shuts it down.
#[derive(Clone)]
pub struct Handle {
    inner: Arc<HandleInner>,
}

impl Handle {
    /// The bound listening addresses (useful with port 0).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.inner.addrs.clone()
    }

    /// Stop accepting and reading, finish every request already handed to
    /// the pool, flush replies (up to `shutdown_timeout`), close all
    /// connections and join all threads. Idempotent; concurrent callers all
    /// return when it is done. Must not be called from a `Service::call`.
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }

    /// Block until the transport has shut down (someone called `shutdown`).
    pub fn wait(&self) {
        let mut st = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        while *st != State::Done {
            st = self
                .inner
                .state_cv
                .wait(st)
                .unwrap_or_else(|e| e.into_inner());
        }
    }

    pub fn stats(&self) -> TransportStats {
        let sh = &self.inner.shared;
        let mut t = TransportStats {
            connections_open: sh.open.load(Ordering::Relaxed) as u64,
            replies_out: sh.stats.replies_out.sum(),
            writes_out: sh.stats.writes_out.sum(),
            bytes_out: sh.stats.bytes_out.sum(),
            reply_bytes_queued: sh
                .stats
                .queued_in
                .sum()
                .saturating_sub(sh.stats.queued_out.sum()),
            buffered_bytes: sh.stats.buffered(),
            ..Default::default()
        };
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        for l in &sh.loop_stats {
            t.connections_accepted += r(&l.accepted);
            t.connections_refused += r(&l.refused);
            t.connections_evicted += r(&l.evicted);
            t.connections_closed += r(&l.closed);
            t.records_in += r(&l.records_in);
            t.records_too_big += r(&l.too_big);
            t.bytes_in += r(&l.bytes_in);
            t.records_inline += r(&l.inline);
            t.records_deferred += r(&l.deferred);
        }
        t
    }

    /// Worker pool counters, summed over the pools (see [`PoolStats::add`]).
    pub fn pool_stats(&self) -> PoolStats {
        let mut t = PoolStats::default();
        for p in &self.inner.pools {
            t.add(&p.stats());
        }
        t
    }

    /// Each pool's counters: one entry (`Shared`) or one per loop.
    pub fn pool_stats_each(&self) -> Vec<PoolStats> {
        self.inner.pools.iter().map(|p| p.stats()).collect()
    }
}

impl HandleInner {
    fn shutdown(&self) {
        {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            match *st {
                State::Done => return,
                State::Stopping => {
                    while *st != State::Done {
                        st = self.state_cv.wait(st).unwrap_or_else(|e| e.into_inner());
                    }
                    return;
                }
                State::Running => *st = State::Stopping,
            }
        }
        let sh = &self.shared;
        sh.phase.store(DRAINING, Ordering::SeqCst);
        sh.loops.iter().for_each(LoopNotify::wake);
        // Wait until no loop submits any more (bounded: a loop answers
        // within one iteration).
        {
            let mut n = sh.drained.lock().unwrap_or_else(|e| e.into_inner());
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while *n < sh.loops.len() {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    tracing::error!("event loops did not stop reading in 5 s");
                    break;
                }
                n = sh
                    .drained_cv
                    .wait_timeout(n, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
        // Finish every queued and running request; replies go out or queue.
        for p in &self.pools {
            p.shutdown();
        }
        sh.phase.store(FINAL, Ordering::SeqCst);
        sh.loops.iter().for_each(LoopNotify::wake);
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for t in threads {
            if t.join().is_err() {
                tracing::error!("event loop thread panicked");
            }
        }
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = State::Done;
        self.state_cv.notify_all();
    }
}

impl Drop for HandleInner {
    fn drop(&mut self) {
        self.shutdown();
    }
}
