//! Replies sent later, by whichever thread learns they may leave: a call
//! whose answer waits for stable storage that another thread is already
//! making durable (one journal commit for many calls) need not hold its
//! worker asleep meanwhile.
//!
//! A pool job offers its call this (`offered`) while the service runs it;
//! the service takes a [`Later`] (`take`) and returns no reply, and the
//! worker goes on to its next call. (Not a call tried on an event loop: a
//! change that owes a commit is not made there, see `sync_route` in the
//! NFS program.) The call still counts as in flight on
//! its connection until the `Later` is sent or dropped, so the loop neither
//! closes the connection nor reads past `max_inflight_per_conn` meanwhile:
//! that is the bound on replies waiting this way.

use crate::conn::Conn;
use crate::Reply;
use std::cell::RefCell;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

thread_local! {
    /// The connection of the call this pool thread runs now, while it may
    /// be answered later; taken by `take`.
    static OFFER: RefCell<Option<Arc<Conn>>> = const { RefCell::new(None) };
}

/// Offer the pool job's call about to run on this thread a later reply;
/// the service returns None if it took it.
pub(crate) fn run_offering<R>(conn: &Arc<Conn>, call: impl FnOnce() -> R) -> R {
    OFFER.with(|o| *o.borrow_mut() = Some(conn.clone()));
    let r = call();
    OFFER.with(|o| o.borrow_mut().take());
    r
}

/// Whether the call running on this thread may be answered later.
pub fn offered() -> bool {
    OFFER.with(|o| o.borrow().is_some())
}

/// Take the call running on this thread, to answer it later: the service
/// then returns no reply. None outside a pool job (the event loop, UDP).
pub fn take() -> Option<Later> {
    let conn = OFFER.with(|o| o.borrow_mut().take())?;
    // In flight until sent (its pool job finishes its own count as usual).
    conn.inflight.fetch_add(1, SeqCst);
    Some(Later { conn: Some(conn) })
}

/// A call to answer later, from any thread. Dropped unsent, the call
/// finishes with no reply (the client retransmits).
pub struct Later {
    conn: Option<Arc<Conn>>,
}

impl Later {
    /// Send the reply (a non-blocking write; the loop finishes what the
    /// socket does not take) and finish the call.
    pub fn send(mut self, reply: Option<Reply>) {
        if let Some(c) = self.conn.take() {
            if let Some(r) = reply {
                c.send(r);
            }
            c.finish_n(1);
        }
    }
}

impl Drop for Later {
    fn drop(&mut self) {
        if let Some(c) = self.conn.take() {
            c.finish_n(1);
        }
    }
}

impl std::fmt::Debug for Later {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Later")
            .field("conn", &self.conn.as_ref().map(|c| c.id))
            .finish()
    }
}
