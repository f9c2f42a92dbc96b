//! What the event loops and the workers share: the service, the bounds,
//! the loops' inboxes, the counters, and the shutdown phases.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize};
use std::sync::{Arc, Condvar, Mutex};

use crossbeam_utils::CachePadded;

use crate::budget::{Client, Clients};
use crate::config::Limits;
use crate::stats::{LoopStats, WorkerStats};
use crate::Service;

/// Messages to an event loop from other threads.
pub(crate) enum Msg {
    /// A connection accepted by loop 0 for this loop, and its client.
    NewConn(TcpStream, SocketAddr, Arc<Client>),
    /// Look at connection `token` again (if it is still connection `id`):
    /// resume reading, or close after EOF / write failure.
    Check { token: usize, id: u64 },
    /// Report this loop's connection idle the longest (loop 0, at the
    /// connection limit, looks for the oldest idle connection of all).
    OldestIdle(std::sync::mpsc::Sender<Option<IdleConn>>),
    /// Close connection `token` if it is still connection `id` and idle;
    /// else this loop's oldest idle one, so the limit holds.
    CloseIdle { token: usize, id: u64 },
    /// Close the connections of clients marked for disconnection (they
    /// held more than their share of the budget without draining).
    Evict,
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
        self.clients.release(peer.ip());
    }

    /// Admit one more connection from `peer`: its client, unless its
    /// address is at the per-client limit or being disconnected.
    pub(crate) fn admit_client(&self, peer: &SocketAddr) -> Option<Arc<Client>> {
        self.clients.admit(peer.ip())
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
    /// The clients (one per address with an open connection: touched at
    /// accept and close, never per request) and their shares of
    /// `max_buffered_bytes`.
    pub clients: Clients,
    pub next_conn_id: AtomicU64,
    /// RUNNING → DRAINING (stop accepting and reading) → FINAL (flush
    /// replies, close, exit).
    pub phase: AtomicU8,
    /// Loops that have seen DRAINING and stopped submitting.
    pub drained: Mutex<usize>,
    pub drained_cv: Condvar,
}
