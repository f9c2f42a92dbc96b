//! The pool job (one complete request record of one connection), and the
//! replies a worker holds back while it runs the next call of the same
//! connection, so that calls handed to a pool in a burst (a client's
//! pipelined UNSTABLE WRITEs) are answered in one `writev`, not one `send`
//! each. Hand-written: it lives between our pool and our output queue.
//!
//! A reply is held only while its worker goes straight on to another
//! short `Route::Pool` call (under `MAX_SHORT_RECORD`) of the same
//! connection; anything else (another connection, a call that may wait for
//! the disk, no call at all: the pool's idle hook) sends what is held
//! first. So a held reply waits for at most one short call, and never
//! while its worker sleeps. Held calls still count as in flight on their
//! connection until sent, so the loop neither closes it nor reads past
//! `max_inflight_per_conn` meanwhile. What is held is the worker's own
//! ([`Held`], the pool's per-worker state), passed to each job it runs.

use crate::conn::Conn;
use crate::limits::{MAX_HELD_REPLY, MAX_SHORT_RECORD};
use crate::{Plan, Reply, Request, Responder};
use rnfsd_pool::Job;
use std::sync::Arc;

/// Replies one worker holds back, all of one connection.
#[derive(Default)]
pub(crate) struct Held {
    conn: Option<Arc<Conn>>,
    replies: Vec<Reply>,
    /// Request bytes each held call still counts against
    /// `max_buffered_bytes`, let go when sent.
    held_bytes: usize,
    /// Calls held (a call without a reply is never held).
    calls: usize,
    /// This worker's thread keeps buffers (`recycle::set_limits` done).
    recycling: bool,
}

impl Held {
    /// Whether anything is held.
    fn pending(&self) -> bool {
        self.calls > 0
    }

    /// Send what is held, if anything.
    fn flush(&mut self) {
        let Some(conn) = self.conn.take() else {
            debug_assert_eq!(self.calls, 0, "held calls without a connection");
            return;
        };
        debug_assert_eq!(self.calls, self.replies.len());
        conn.send_batch(&mut self.replies);
        conn.let_go(self.held_bytes);
        conn.finish_n(self.calls);
        self.held_bytes = 0;
        self.calls = 0;
    }

    /// Before a worker runs a call of `conn`: send what it holds unless the
    /// call may join it (`may_hold`: a short call of the same connection).
    fn before_call(&mut self, conn: &Arc<Conn>, may_hold: bool) {
        let keep = may_hold && self.conn.as_ref().is_none_or(|c| Arc::ptr_eq(c, conn));
        if !keep {
            self.flush();
        }
    }

    /// Take a short call's reply (of `conn`, counted in flight and holding
    /// `held_bytes`; `before_call` said it may join what is held). It waits
    /// for the next call unless it is large (a READ's data, spliced or
    /// not) or makes `limit`: then everything held leaves with it, in one
    /// write. The holder finishes the call when it sends.
    fn hold(&mut self, conn: &Arc<Conn>, reply: Reply, held_bytes: usize, limit: usize) {
        let large = reply.spliced.is_some() || reply.buf.len() >= MAX_HELD_REPLY;
        if self.conn.is_none() {
            self.conn = Some(conn.clone());
        }
        self.replies.push(reply);
        self.held_bytes += held_bytes;
        self.calls += 1;
        if self.calls >= limit || large {
            self.flush();
        }
        debug_assert!(self.calls < limit.max(1), "held past reply_batch");
    }
}

impl Drop for Held {
    /// A worker exits only after its idle hook sent what it held; this is
    /// the net for any other way out.
    fn drop(&mut self) {
        self.flush();
    }
}

/// The pool job: one complete request record of one connection.
pub(crate) struct Work {
    pub conn: Arc<Conn>,
    pub data: Vec<u8>,
    pub plan: Plan,
    /// Bytes counted against `max_buffered_bytes` (the record's capacity
    /// and the room reserved for its reply), let go when the job is done
    /// (its reply, if unsent, is counted as queued by then).
    pub held: usize,
    /// A short call (`Route::Pool`): its reply may wait for the worker's
    /// next call of the same connection and leave with it (`Held`).
    pub may_hold: bool,
    /// Its reply is held by the worker, which finishes the call when it
    /// sends.
    handed_on: bool,
}

impl Work {
    pub fn new(conn: Arc<Conn>, data: Vec<u8>, plan: Plan) -> Work {
        let held = data.capacity() + plan.reply_bound;
        conn.hold(held);
        Work {
            conn,
            data,
            plan,
            held,
            may_hold: false,
            handed_on: false,
        }
    }
}

impl Job for Work {
    type Worker = Held;

    fn run(mut self, worker: &mut Held) {
        let data = std::mem::take(&mut self.data);
        let c = &self.conn;
        let limit = c.shared.limits.reply_batch;
        if !worker.recycling {
            // Replies only: a worker reads no records (those it finishes
            // were read by a loop, and would only pile up here).
            let keep = c.shared.limits.recycled_buffers;
            crate::recycle::set_limits(keep.min(crate::limits::WORKER_RECYCLED_REPLIES), 0);
            worker.recycling = true;
        }
        let may_hold = self.may_hold && limit > 1 && data.len() < MAX_SHORT_RECORD;
        worker.before_call(c, may_hold);
        let req = Request {
            data,
            peer: c.peer,
            local: c.local,
            conn_id: c.id,
            plan: self.plan,
            // A reply deferred (`Responder::defer`) keeps the call in
            // flight itself.
            responder: Responder::for_conn(c.clone()),
        };
        let Some(reply) = c.shared.service.call(req) else {
            return;
        };
        if !may_hold {
            c.send(reply);
            return;
        }
        worker.hold(c, reply, self.held, limit);
        self.handed_on = true;
        // `Drop` accounts the request as finished (also on panic), unless
        // the worker took that over.
    }

    fn idle_pending(worker: &Held) -> bool {
        worker.pending()
    }

    fn on_idle(worker: &mut Held) {
        worker.flush();
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        if self.handed_on {
            return;
        }
        self.conn.let_go(self.held);
        self.conn.finish_one();
    }
}
