//! Run to completion: a call answered on the event loop thread must never
//! sleep. While an [`Inline`] guard is held on a thread, the local backend
//! answers only from what is in memory (its caches, the page cache, the
//! dentry cache); at the first step that could wait (a cache miss, data not
//! in the page cache, a name not in the dentry cache) it gives up with
//! EAGAIN and marks the attempt, and the caller runs the call again in the
//! pool. Only calls that change nothing are run this way, so giving up
//! halfway leaves no trace.

use std::cell::Cell;

use crate::FsError;

thread_local! {
    /// 0: normal; 1: inline; 2: inline, and gave up.
    static STATE: Cell<u8> = const { Cell::new(0) };
}

/// Inline mode for this thread until dropped.
pub struct Inline(());

/// Enters inline mode on this thread.
pub fn enter() -> Inline {
    STATE.with(|s| s.set(1));
    Inline(())
}

impl Inline {
    /// Whether the backend gave up (the call must run again in the pool).
    pub fn gave_up(&self) -> bool {
        STATE.with(|s| s.get() == 2)
    }
}

impl Drop for Inline {
    fn drop(&mut self) {
        STATE.with(|s| s.set(0));
    }
}

/// Whether this thread must not wait.
pub fn active() -> bool {
    STATE.with(|s| s.get() != 0)
}

/// Gives up the inline attempt: the error to return up the call.
pub fn give_up() -> FsError {
    STATE.with(|s| s.set(2));
    FsError::Errno(libc::EAGAIN)
}
