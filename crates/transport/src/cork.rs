//! Replies a worker holds back while it runs the next call of the same
//! connection, so that calls handed to a pool in a burst (a client's
//! pipelined UNSTABLE WRITEs) are answered in one `writev`, not one `send`
//! each. Hand-written: it lives between our pool and our output queue.
//!
//! A reply is held only while its worker goes straight on to another
//! short `Route::Pool` call (under `MAX_SHORT_RECORD`) of the same
//! connection; anything else (another
//! connection, a call that may wait for the disk, no call at all: the
//! pool's idle hook) sends what is held first. So a held reply waits for
//! at most one short call, and never while its worker sleeps. Held calls
//! still count as in flight on their connection until sent, so the loop
//! neither closes it nor reads past `max_inflight_per_conn` meanwhile.

use crate::conn::Conn;
use crate::Reply;
use std::cell::RefCell;
use std::sync::Arc;

/// A reply this large (a READ's data) is not held: it leaves at once,
/// with whatever is held.
const MAX_HELD_REPLY: usize = 16 << 10;

/// A call this large (a WRITE of 16 KiB or more) is not short: replies are
/// not held while it runs, nor is its own (a 1 MiB WRITE's pwrite takes
/// hundreds of microseconds, and a client with a few such calls in flight
/// would stall waiting for replies held behind them).
pub(crate) const MAX_SHORT_RECORD: usize = 16 << 10;

#[derive(Default)]
struct Held {
    conn: Option<Arc<Conn>>,
    replies: Vec<Reply>,
    /// Request bytes each held call still counts against
    /// `max_buffered_bytes`, let go when sent.
    held_bytes: usize,
    /// Calls held (a call without a reply is never held).
    calls: usize,
}

thread_local! {
    static HELD: RefCell<Held> = RefCell::new(Held::default());
}

/// Whether this thread holds replies.
pub(crate) fn pending() -> bool {
    HELD.with(|h| h.borrow().calls > 0)
}

/// Send what this thread holds, if anything.
pub(crate) fn flush() {
    let taken = HELD.with(|h| {
        let mut h = h.borrow_mut();
        let conn = h.conn.take()?;
        let out = (conn, std::mem::take(&mut h.replies), h.held_bytes, h.calls);
        h.held_bytes = 0;
        h.calls = 0;
        Some(out)
    });
    let Some((conn, mut replies, held_bytes, calls)) = taken else {
        return;
    };
    conn.send_batch(&mut replies);
    conn.shared.stats.held_out.add(held_bytes as u64);
    conn.finish_n(calls);
    // Keep the (drained) vector's room for the next batch.
    HELD.with(|h| h.borrow_mut().replies = replies);
}

/// Before a worker runs a call of `conn`: send what it holds unless the
/// call may join it (`may_hold`: a short call of the same connection).
pub(crate) fn before_call(conn: &Arc<Conn>, may_hold: bool) {
    let keep = may_hold
        && HELD.with(|h| match &h.borrow().conn {
            Some(c) => Arc::ptr_eq(c, conn),
            None => true,
        });
    if !keep {
        flush();
    }
}

/// Take a short call's reply (of `conn`, counted in flight and holding
/// `held_bytes`; `before_call` said it may join what is held). It waits
/// for the next call unless it is large (a READ's data, spliced or not)
/// or makes `limit`: then everything held leaves with it, in one write.
/// The cork finishes the call when it sends.
pub(crate) fn hold(conn: &Arc<Conn>, reply: Reply, held_bytes: usize, limit: usize) {
    let large = reply.spliced.is_some() || reply.buf.len() >= MAX_HELD_REPLY;
    let full = HELD.with(|h| {
        let mut h = h.borrow_mut();
        if h.conn.is_none() {
            h.conn = Some(conn.clone());
        }
        h.replies.push(reply);
        h.held_bytes += held_bytes;
        h.calls += 1;
        h.calls >= limit
    });
    if full || large {
        flush();
    }
}
