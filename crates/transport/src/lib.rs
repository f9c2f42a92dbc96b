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
//!   replies together, shared fairly among client addresses (`budget.rs`):
//!   under pressure each client is held to its share (a client at or over
//!   it is not read and its calls wait), and one held there that drains
//!   nothing for `budget_hog_time` is disconnected.
//! - Buffers: each loop reads into one reused 64 KiB buffer and copies each
//!   record into an exactly-sized `Vec` (capacity reserved from the
//!   fragment header, after the `max_record` check) that becomes
//!   `Request::data`; a large fragment body is read straight into that
//!   `Vec`, with no copy through the buffer; the reply `Vec` from the service is written as is, its
//!   4 reserved bytes holding the record mark. A reply may end in a pipe
//!   ([`Spliced`]): its bytes go from the pipe to the socket by splice(2),
//!   so file data reaches the socket with no user-space copy. Each loop
//!   and worker keeps up to `recycled_buffers` small replies and records
//!   it let go, cleared, and reuses them before asking the allocator
//!   (`recycle.rs`).
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
//! - Back channel: a service may send records of its own on a client's
//!   connection ([`ConnHandle`], from [`Responder::conn`]), RFC 8881
//!   §2.10.3.1. The answers arrive among the client's calls; the
//!   service's `plan` routes each to [`Route::Reply`] (it reads the header
//!   anyway, and the transport knows nothing of RPC), and the loop hands
//!   it to [`Service::reply_received`] at once: not in flight, no pool
//!   slot. [`Service::disconnected`] says when a connection can bring no
//!   more.
//! - SIGPIPE: replies are written with `send(MSG_NOSIGNAL)` and `writev`;
//!   Rust binaries ignore SIGPIPE by default, which `writev` relies on.

mod api;
mod budget;
mod config;
mod conn;
mod event_loop;
mod handle;
pub mod limits;
mod pipe;
mod record;
mod recycle;
mod shared;
mod stats;
mod sys;
mod udp;
mod work;

pub use event_loop::split_pool;
pub use pipe::{PipeLease, PipePool};
pub use udp::{UdpConfig, UdpHandle, UdpStats, UdpTransport, UDP_CONN_ID};

pub use api::{
    reply_buffer, ConnHandle, Inline, Later, LoopCalls, Plan, Reply, Request, Responder, Route,
    SendError, Service, Spliced,
};
pub use config::{PoolLayout, TransportConfig};
pub use handle::{Handle, Transport};
pub use rnfsd_pool::{PoolConfig, PoolStats, StripedCounter};
pub use stats::TransportStats;

pub(crate) use config::Limits;
pub(crate) use rnfsd_pool::counter::bump;
pub(crate) use shared::{IdleConn, LoopNotify, Msg, Shared, DRAINING, FINAL, RUNNING};
pub(crate) use stats::{LoopStats, WorkerStats};
