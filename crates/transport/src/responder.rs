//! Replies sent later, by whichever thread learns they may leave: a call
//! whose answer waits for stable storage that another thread is already
//! making durable (one journal commit for many calls) need not hold its
//! worker asleep meanwhile.
//!
//! A pool job's [`Request`](crate::Request) carries a [`Responder`] that
//! can [`defer`](Responder::defer) its reply: the service takes a
//! [`Later`] and returns no reply, and the worker goes on to its next
//! call. A call tried on an event loop, or a UDP datagram, carries one
//! that cannot (a change that owes a commit is not made on a loop: see
//! `sync_route` in the NFS program). The call still counts as in flight
//! on its connection until the `Later` is sent or dropped, so the loop
//! neither closes the connection nor reads past `max_inflight_per_conn`
//! meanwhile: that is the bound on replies waiting this way.

use crate::conn::Conn;
use crate::Reply;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

/// How a call's reply may leave besides being returned by the service.
#[derive(Default)]
pub struct Responder {
    /// The connection of a pool job's call, until taken by `defer`.
    conn: Option<Arc<Conn>>,
}

impl Responder {
    /// A reply that can only be returned (inline calls, UDP, tests).
    pub fn now_only() -> Responder {
        Responder { conn: None }
    }

    /// A pool job's call on `conn`.
    pub(crate) fn for_conn(conn: Arc<Conn>) -> Responder {
        Responder { conn: Some(conn) }
    }

    /// Whether the reply may be deferred (`defer` would succeed).
    pub fn can_defer(&self) -> bool {
        self.conn.is_some()
    }

    /// Take the call, to answer it later from any thread: the service then
    /// returns no reply. None where it cannot be (see `now_only`).
    pub fn defer(&mut self) -> Option<Later> {
        let conn = self.conn.take()?;
        // In flight until sent (its pool job finishes its own count as usual).
        conn.inflight.fetch_add(1, SeqCst);
        Some(Later { conn: Some(conn) })
    }
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responder")
            .field("conn", &self.conn.as_ref().map(|c| c.id))
            .finish()
    }
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
