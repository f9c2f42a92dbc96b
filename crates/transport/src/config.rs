//! The transport's configuration, and the bounds the loops read from it.

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

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
    /// or waiting for and in a worker), the room reserved for large
    /// replies, and queued replies, shared fairly among client addresses:
    /// under pressure (past it, or a call finding no room) each client is
    /// held to its share, this divided among the active clients and at
    /// least `max_record` + 64 KiB (a large READ always fits); a client at
    /// or over its share is not read and its calls wait, one within it is
    /// read and served up to its share (`budget.rs`). What that bounds in
    /// all is in docs/security.md ("Limits"). 0: no bound. Default 256 MiB.
    pub max_buffered_bytes: usize,
    /// A client held by its share of `max_buffered_bytes` (over it, or
    /// with calls waiting for it) that lets go of nothing (no reply bytes
    /// taken by its sockets, no call finished) for this long has its
    /// connections closed, which frees what they hold. Zero: never.
    /// Default 5 s.
    pub budget_hog_time: Duration,
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
    /// Small reply buffers and small request records (at most
    /// `limits::MAX_RECYCLED_CAPACITY`, 4 KiB + 4, each) each event loop
    /// and pool worker keeps, cleared, for its next replies and records
    /// instead of freeing them, each kind (`recycle.rs`): with many calls
    /// in flight glibc's per-thread cache runs dry. Memory: at most twice
    /// this many 4 KiB buffers per thread. 0: none kept. Default 256.
    pub recycled_buffers: usize,
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            listen: Vec::new(),
            listeners: Vec::new(),
            event_threads: 1,
            max_connections: 1024,
            max_connections_per_client: 0,
            max_record: crate::limits::DEFAULT_MAX_RECORD,
            max_inflight_per_conn: 64,
            max_conn_output: crate::limits::DEFAULT_MAX_CONN_OUTPUT,
            max_buffered_bytes: 256 << 20,
            budget_hog_time: Duration::from_secs(5),
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
            recycled_buffers: crate::limits::DEFAULT_RECYCLED_BUFFERS,
        }
    }
}

pub(crate) struct Limits {
    pub run_inline: bool,
    pub alone_per_turn: usize,
    pub reply_batch: usize,
    pub recycled_buffers: usize,
    pub max_connections: usize,
    pub max_connections_per_client: usize,
    pub max_record: usize,
    pub max_inflight_per_conn: usize,
    pub max_conn_output: usize,
    pub max_buffered_bytes: usize,
    pub idle_timeout: Duration,
    pub shutdown_timeout: Duration,
}
