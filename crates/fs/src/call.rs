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

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use crate::inline::{self, TurnJob};
use crate::owed::{self, Before, Commits, Owed};
use crate::{Cred, FsError};

/// One call's context (see the module text). Made by the protocol layer
/// for the whole of one call: several backend calls of one procedure share
/// it, so one commit covers all they changed. Used by one thread.
pub struct Call<'a> {
    /// Who asks (after squashing).
    pub cred: &'a Cred,
    how: How<'a>,
    /// A change may still owe its commit (see `owed`): a thread call whose
    /// reply may leave later, until what it owes is taken.
    may_owe: Cell<bool>,
    /// The commit it owes.
    owed: RefCell<Option<Owed>>,
    /// `take_owed` was called.
    taken: Cell<bool>,
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
    /// instead of waiting for it. Whoever makes such a call must take what
    /// it owes (`take_owed`) and honour it; a commit owed and never taken
    /// is waited for when the call drops, so no reply leaves before it.
    pub fn thread(cred: &'a Cred, may_owe: bool) -> Call<'a> {
        Call {
            cred,
            how: How::Thread,
            may_owe: Cell::new(may_owe),
            owed: RefCell::new(None),
            taken: Cell::new(false),
        }
    }

    /// A call tried on the event loop `lp` (between its `begin_call` and
    /// `end_call`): answered from memory, or given up before it changes
    /// anything. It never owes a commit.
    pub fn on_loop(cred: &'a Cred, lp: &'a inline::Loop) -> Call<'a> {
        debug_assert!(lp.call_under_way(), "a loop's call made outside begin_call");
        Call {
            cred,
            how: How::Loop(lp),
            may_owe: Cell::new(false),
            owed: RefCell::new(None),
            taken: Cell::new(false),
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
        self.owed.borrow().is_some()
    }

    /// Whether a change of this call may owe its commit (`owe`) now.
    pub fn may_owe(&self) -> bool {
        self.may_owe.get()
    }

    /// Called by a backend instead of waiting for a commit of `commits`:
    /// true if the call may owe it (it is now owed, or joined the one owed
    /// already), false if the backend must wait itself.
    pub fn owe(&self, commits: &Arc<Commits>) -> bool {
        self.owe_with(commits, None).is_ok()
    }

    /// As `owe`, for a commit that must follow `before` (a file's data
    /// written back: `Before`), which the commit thread then does for the
    /// call. Given back if the call may not owe, or if it owes a commit
    /// with work before it already: the backend does it itself then (and
    /// `owe`s).
    pub fn owe_after(
        &self,
        commits: &Arc<Commits>,
        before: Box<dyn Before>,
    ) -> Result<(), Box<dyn Before>> {
        self.owe_with(commits, Some(before))
            .map_err(|b| b.expect("given back as given"))
    }

    fn owe_with(
        &self,
        commits: &Arc<Commits>,
        before: Option<Box<dyn Before>>,
    ) -> Result<(), Option<Box<dyn Before>>> {
        if !self.may_owe.get() {
            return Err(before);
        }
        debug_assert!(self.event_loop().is_none(), "a call on a loop owes nothing");
        owed::owe_into(&mut self.owed.borrow_mut(), commits, before)
    }

    /// The journal commit the call owes, if any: its reply may leave only
    /// once that commit is done (`Owed::then`). Taken once, after the
    /// backend calls: nothing more may be owed by this call.
    pub fn take_owed(&self) -> Option<Owed> {
        debug_assert!(
            !self.taken.replace(true),
            "a call's owed commit taken twice"
        );
        self.may_owe.set(false);
        self.owed.borrow_mut().take()
    }
}

/// How a call on a loop may run (`crate::inline`); a call on a thread
/// may do anything, gives up nothing and leaves no job.
impl Call<'_> {
    /// Whether the call must not wait: it answers from memory or gives up
    /// (`give_up`). Not once a change has begun on the loop
    /// (`run_to_end`).
    pub(crate) fn inline(&self) -> bool {
        self.event_loop().is_some_and(inline::Loop::inline)
    }

    /// Whether the call runs on an event loop, inline or running a change
    /// to its end: nothing may be reclaimed or closed here (the caches'
    /// `on_loop`).
    pub(crate) fn runs_on_loop(&self) -> bool {
        self.event_loop().is_some()
    }

    /// Gives up the inline call: the error to return up the call, which
    /// then runs again in a pool. Asked only of an inline call.
    pub(crate) fn give_up(&self) -> FsError {
        debug_assert!(self.inline(), "a give-up off the loop");
        if let Some(l) = self.event_loop() {
            l.give_up();
        }
        FsError::Errno(libc::EAGAIN)
    }

    /// Whether the inline call may open a miss now (`Leave::misses`).
    pub(crate) fn may_speculate(&self) -> bool {
        self.event_loop().is_some_and(inline::Loop::may_speculate)
    }

    /// Whether the inline call may write now (`Leave::writes`).
    pub(crate) fn may_write(&self) -> bool {
        self.event_loop().is_some_and(inline::Loop::may_write)
    }

    /// Whether the inline call may make a change now (`Leave::changes`).
    pub(crate) fn may_change(&self) -> bool {
        self.event_loop().is_some_and(inline::Loop::may_change)
    }

    /// A change begins on the loop (`may_change` said yes, nothing changed
    /// yet): it runs to its end, judged as one step with the thread's
    /// sleeps read by `sleeps` when the call ends.
    pub(crate) fn run_to_end(&self, sleeps: fn() -> u64) {
        if let Some(l) = self.event_loop() {
            l.run_to_end(sleeps);
        }
    }

    /// Runs `step`, which almost never sleeps: for an inline call, a
    /// speculation watched by its loop (`Loop::watch`).
    pub(crate) fn watch<T>(&self, sleeps: impl Fn() -> u64, step: impl FnOnce() -> T) -> T {
        match self.event_loop() {
            Some(l) if l.inline() => l.watch(sleeps, step),
            _ => step(),
        }
    }

    /// Leaves `job` for the end of the loop's turn where the call may
    /// (`Loop::after_turn`); else hands it off at once.
    pub(crate) fn after_turn(&self, job: Box<dyn TurnJob>) {
        match self.event_loop() {
            Some(l) => l.after_turn(job),
            None => job.hand_off(),
        }
    }
}

/// The safety net: a commit owed and never taken is waited for here, so
/// no reply of this call can leave before it.
impl Drop for Call<'_> {
    fn drop(&mut self) {
        if let Some(o) = self.owed.get_mut().take() {
            let _ = o.wait();
        }
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
