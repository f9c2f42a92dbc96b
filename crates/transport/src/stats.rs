//! The transport's counters: per loop (single writer) or per CPU, summed
//! on read.

use std::sync::atomic::{AtomicU64, AtomicUsize};

use crate::StripedCounter;

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
    /// Complete records received (back-channel REPLYs included).
    pub records_in: u64,
    /// Records over `max_record` (each closed its connection).
    pub records_too_big: u64,
    pub bytes_in: u64,
    /// Records fully written to sockets: replies, and back-channel calls.
    pub replies_out: u64,
    /// Socket writes that carried reply bytes: replies_out / writes_out is
    /// how many replies left together (inline batches, `reply_batch`).
    pub writes_out: u64,
    pub bytes_out: u64,
    /// Reply bytes queued on connections, not yet taken by the socket.
    pub reply_bytes_queued: u64,
    /// Bytes held for records and queued replies (`max_buffered_bytes`).
    pub buffered_bytes: u64,
    /// Clients (addresses) disconnected for holding more than their share
    /// of `max_buffered_bytes` without draining (`budget_hog_time`).
    pub budget_clients_closed: u64,
    /// Records answered on the loop thread (run to completion), and records
    /// offered there that went to the pool after all.
    pub records_inline: u64,
    pub records_deferred: u64,
    /// Back channel (RFC 8881 §2.10.3.1): records the service sent on
    /// connections of its own accord (`ConnHandle::send`), and REPLY
    /// records received, handed to `Service::reply_received`.
    pub back_calls_out: u64,
    pub back_replies_in: u64,
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
    /// Records sent through a `ConnHandle`.
    pub back_calls_out: StripedCounter,
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
    /// Records routed `Route::Reply`.
    pub back_replies_in: AtomicU64,
    /// Connections this loop holds now: counted by the accepting loop when
    /// it deals one here (`EventLoop::steer`, which balances on it),
    /// uncounted by this loop when it closes one or fails to add it.
    pub open: AtomicUsize,
}
