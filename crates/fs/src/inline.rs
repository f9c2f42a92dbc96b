//! Run to completion: a call answered on the event loop thread must never
//! sleep. While an [`Inline`] guard is held on a thread, the local backend
//! answers only from what is in memory (its caches, the page cache, the
//! dentry cache); at the first step that could wait (a cache miss, data not
//! in the page cache, a name not in the dentry cache) it gives up with
//! EAGAIN and marks the attempt, and the caller runs the call again in the
//! pool. Only calls that change nothing, and UNSTABLE WRITEs (below), are
//! run this way, and each gives up before it changes anything, so giving up
//! halfway leaves no trace.
//!
//! Two steps are allowed on the loop although they may wait: opening an
//! object by its kernel handle (a handle cache miss), which reads the disk
//! only when the kernel no longer holds the inode, and reopening a cached
//! object to read it (an open-file cache miss; the inode is pinned). With a large working set of handles
//! whose inodes the kernel keeps, handing each miss to a pool thread costs
//! more than the miss (a wakeup and two context switches). So a loop
//! *speculates*: it runs the step and sees whether the thread slept in it
//! (`speculated`); each step that slept keeps this thread from speculating
//! for a while, from 10 ms doubling up to 1 s while they keep sleeping, so
//! a loop waits for the disk at most about once a second in a cold storm.
//!
//! The one change allowed on the loop is an UNSTABLE WRITE (`Leave::writes`):
//! a write into the page cache rarely sleeps (dirty throttling, a journal
//! handle while a commit locks its transaction), and handing it to a pool
//! costs two context switches where the write of 4 KiB costs a few
//! microseconds. Its writer is opened on the loop on a miss when misses may
//! be too (a handoff would open the handle's object again: a loop cannot
//! cache it at a full bound). It is decided before anything changes (given
//! up, nothing is done) and then runs to its end; a write or an open that
//! slept quiets the loop as a miss does.

use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::FsError;

thread_local! {
    /// 0: normal; 1: inline; 2: inline, and gave up.
    static STATE: Cell<u8> = const { Cell::new(0) };
    /// What this inline attempt may do beyond memory (see the module text).
    static MAY: Cell<Leave> = const { Cell::new(Leave::NONE) };
    /// No speculation on this thread before this instant.
    static QUIET_UNTIL: Cell<Option<Instant>> = const { Cell::new(None) };
    /// The quiet time a step that slept sets next.
    static BACKOFF: Cell<Duration> = const { Cell::new(BACKOFF_MIN) };
}

const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Inline mode for this thread until dropped.
pub struct Inline(());

/// The steps an inline attempt may take although they may sleep, each
/// watched and backed off (see the module text).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Leave {
    /// Open a kernel handle's object on a handle cache miss, and reopen a
    /// cached object for reading.
    pub misses: bool,
    /// An UNSTABLE WRITE; with `misses`, its writer is opened on a miss.
    pub writes: bool,
}

impl Leave {
    pub const NONE: Leave = Leave {
        misses: false,
        writes: false,
    };
}

/// Enters inline mode on this thread: memory only.
pub fn enter() -> Inline {
    enter_with(Leave::NONE)
}

/// Inline mode that may also take the steps `leave` allows.
pub fn enter_with(leave: Leave) -> Inline {
    STATE.with(|s| s.set(1));
    MAY.with(|m| m.set(leave));
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
        MAY.with(|m| m.set(Leave::NONE));
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

/// Whether the inline attempt under way on this thread gave up (its reply
/// is thrown away and the call runs again in a pool: a reply cache must
/// not keep it).
pub fn gave_up() -> bool {
    STATE.with(|s| s.get() == 2)
}

/// Whether this inline attempt may open a miss (see the module text):
/// allowed, and no recent step on this thread slept.
pub fn may_speculate() -> bool {
    may(|l| l.misses)
}

/// Whether this inline attempt may write (see the module text): allowed,
/// and no recent step on this thread slept.
pub fn may_write() -> bool {
    may(|l| l.writes)
}

fn may(allowed: impl FnOnce(Leave) -> bool) -> bool {
    if !active() || !allowed(MAY.with(|m| m.get())) {
        return false;
    }
    match QUIET_UNTIL.with(|q| q.get()) {
        None => true,
        Some(t) if Instant::now() >= t => {
            QUIET_UNTIL.with(|q| q.set(None));
            true
        }
        Some(_) => false,
    }
}

/// Records how a speculative step went: one that slept quiets this thread
/// for the backoff, which doubles (to `BACKOFF_MAX`); one that did not
/// halves it (to `BACKOFF_MIN`).
pub fn speculated(slept: bool) {
    let b = BACKOFF.with(|b| b.get());
    if slept {
        QUIET_UNTIL.with(|q| q.set(Some(Instant::now() + b)));
        BACKOFF.with(|c| c.set((b * 2).min(BACKOFF_MAX)));
    } else if b > BACKOFF_MIN {
        BACKOFF.with(|c| c.set((b / 2).max(BACKOFF_MIN)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Speculation needs inline mode and the caller's leave; a step that
    /// slept quiets the thread for the backoff, which doubles while steps
    /// keep sleeping and halves when they do not.
    #[test]
    fn a_step_that_slept_quiets_the_thread_for_a_doubling_backoff() {
        assert!(!may_speculate(), "not inline");
        {
            let _g = enter();
            assert!(!may_speculate(), "inline, not allowed");
        }
        {
            let _g = enter_with(Leave {
                misses: false,
                writes: true,
            });
            assert!(may_write() && !may_speculate(), "each leave alone");
        }
        let _g = enter_with(Leave {
            misses: true,
            writes: true,
        });
        assert!(may_speculate() && may_write());
        speculated(false);
        assert_eq!(BACKOFF.with(|b| b.get()), BACKOFF_MIN);
        speculated(true);
        assert!(!may_speculate(), "quiet after a step that slept");
        assert!(!may_write(), "a write is quiet too");
        assert_eq!(BACKOFF.with(|b| b.get()), 2 * BACKOFF_MIN);
        std::thread::sleep(BACKOFF_MIN + Duration::from_millis(2));
        assert!(may_speculate(), "quiet time over");
        for _ in 0..20 {
            speculated(true);
        }
        assert_eq!(BACKOFF.with(|b| b.get()), BACKOFF_MAX);
        QUIET_UNTIL.with(|q| q.set(None));
        speculated(false);
        assert_eq!(BACKOFF.with(|b| b.get()), BACKOFF_MAX / 2);
        drop(_g);
        assert!(!may_speculate(), "left inline mode");
    }
}
