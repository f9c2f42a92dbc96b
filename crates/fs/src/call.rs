//! What one call carries into a backend besides its arguments: who asks
//! (the credential), and how it may run: on an event loop, where it must
//! answer from memory or give up (`crate::inline`), or on a thread that may
//! sleep, where a change may leave the journal commit it needs owed
//! (`crate::owed`) when its reply can leave later from another thread.
//!
//! Every [`Backend`](crate::Backend) method takes one, so a reader sees in
//! each signature what the call may do; the protocol layer makes one per
//! call and, after the backend calls, takes what it owes
//! ([`Call::take_owed`]) to send its reply once that commit is done.

use std::cell::RefCell;

use crate::inline;
use crate::owed::{self, Owed};
use crate::Cred;

/// One call's context (see the module text). Made by the protocol layer
/// for the whole of one call: several backend calls of one procedure share
/// it, so one commit covers all they changed.
pub struct Call<'a> {
    /// Who asks (after squashing).
    pub cred: &'a Cred,
    how: How<'a>,
    /// While held, a change may owe its commit (see `owed`).
    offer: RefCell<Option<owed::Offer>>,
}

/// Where the call runs.
#[derive(Clone, Copy)]
enum How<'a> {
    /// A thread that may sleep.
    Thread,
    /// An event loop's thread: memory only, or give up.
    Loop(&'a inline::Loop),
}

impl<'a> Call<'a> {
    /// A call on a thread that may sleep; `may_owe`: its reply can leave
    /// later from another thread, so a change may owe its journal commit
    /// instead of waiting for it.
    pub fn thread(cred: &'a Cred, may_owe: bool) -> Call<'a> {
        Call {
            cred,
            how: How::Thread,
            offer: RefCell::new(may_owe.then(owed::offer)),
        }
    }

    /// A call tried on the event loop `lp` (between its `begin_call` and
    /// `end_call`): answered from memory, or given up before it changes
    /// anything.
    pub fn on_loop(cred: &'a Cred, lp: &'a inline::Loop) -> Call<'a> {
        Call {
            cred,
            how: How::Loop(lp),
            offer: RefCell::new(None),
        }
    }

    /// The event loop this call runs on, if any.
    pub fn event_loop(&self) -> Option<&'a inline::Loop> {
        match self.how {
            How::Loop(l) => Some(l),
            How::Thread => None,
        }
    }

    /// Whether the call owes a journal commit now.
    pub fn owing(&self) -> bool {
        owed::owing()
    }

    /// The journal commit the call owes, if any: its reply may leave only
    /// once that commit is done (`Owed::then`). Taken once, after the
    /// backend calls.
    pub fn take_owed(&self) -> Option<Owed> {
        let o = owed::take();
        // Nothing more may be owed by this call.
        drop(self.offer.borrow_mut().take());
        o
    }
}

impl std::fmt::Debug for Call<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("cred", self.cred)
            .field("on_loop", &self.event_loop().is_some())
            .finish()
    }
}
