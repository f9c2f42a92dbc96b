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
//! Three steps are allowed on the loop although they may wait: opening an
//! object by its kernel handle (a handle cache miss), which reads the disk
//! only when the kernel no longer holds the inode; reopening a cached
//! object to read it (an open-file cache miss; the inode is pinned); and
//! LOOKUP's `statx` of a name whose object is likely cached (its dentry
//! then mostly is too). With a large working set of handles
//! whose inodes the kernel keeps, handing each miss to a pool thread costs
//! more than the miss (a wakeup and two context switches). So a loop
//! *speculates*: it runs the step and sees whether the thread slept in it
//! (`watch`: a step of `SLOW_STEP` or more that slept); each step that
//! slept keeps this thread from speculating for a while, from 10 ms
//! doubling up to 1 s while they keep sleeping, so a loop waits for the
//! disk at most about once a second in a cold storm.
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
//!
//! A namespace change or SETATTR of an `async` export (`Leave::changes`)
//! runs on the loop too: on ext4 it costs tens of microseconds, nothing of
//! it waits for stable storage, and a handoff costs a wakeup and two
//! context switches. It is decided once its handles are resolved, before
//! anything changes (`run_to_end`); from there the call is no longer
//! inline for the backend (nothing in it can give up: the call would be
//! done twice) but stays on a loop for the caches (`on_loop`: nothing is
//! reclaimed or closed there), and the whole rest of it is watched as one
//! step when the guard drops. A `sync` export's changes never come here:
//! they wait for a journal commit in the blocking pool.
//!
//! A call on the loop may also leave a job for the end of the loop's turn
//! (`after_turn`: write-behind's writeback start). Once the turn's replies
//! are sent, the loop runs it where it would otherwise sleep, unless more
//! is ready or a recent job slept (`watch_job`, a backoff of the jobs' own):
//! then another thread gets it. A job is never a reason to quiet the
//! loop's calls.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use crate::FsError;

thread_local! {
    /// 0: normal; 1: inline; 2: inline, and gave up; 3: on a loop, running
    /// a change to its end (`run_to_end`); 4: on a loop, running the jobs
    /// left for its turn's end (`turn_ends`).
    static STATE: Cell<u8> = const { Cell::new(0) };
    /// While in state 3: the change under way.
    static CHANGE: Cell<Option<Change>> = const { Cell::new(None) };
    /// What this inline attempt may do beyond memory (see the module text).
    static MAY: Cell<Leave> = const { Cell::new(Leave::NONE) };
    /// No speculation on this thread before this instant.
    static QUIET_UNTIL: Cell<Option<Instant>> = const { Cell::new(None) };
    /// The quiet time a step that slept sets next.
    static BACKOFF: Cell<Duration> = const { Cell::new(BACKOFF_MIN) };
    /// The same for the jobs left for a turn's end (`watch_job`), apart:
    /// a job that slept sends the next ones elsewhere for a while, and
    /// leaves the calls' speculation alone.
    static JOBS_QUIET_UNTIL: Cell<Option<Instant>> = const { Cell::new(None) };
    static JOBS_BACKOFF: Cell<Duration> = const { Cell::new(BACKOFF_MIN) };
    /// This thread's voluntary sleeps when this loop turn's first
    /// speculative step began (None: none began yet this turn).
    static TURN_BASE: Cell<Option<u64>> = const { Cell::new(None) };
    /// Work this loop turn's calls left for its end (`after_turn`).
    static AFTER_TURN: RefCell<Vec<Box<dyn TurnJob>>> = const { RefCell::new(Vec::new()) };
}

/// Work left for the end of a loop turn.
pub trait TurnJob {
    /// Runs it on the loop: the turn is over and the loop would sleep.
    fn run(self: Box<Self>);
    /// Gives it to another thread: the loop has more work ready, or the
    /// job could not be left for the turn's end.
    fn hand_off(self: Box<Self>);
}

/// Jobs one loop turn may leave for its end; past it they go elsewhere
/// (`may_leave_for_turn_end`), so a turn's end stays short.
pub const AFTER_TURN_MAX: usize = 4;

/// A change run to its end (`run_to_end`): when it began, the thread's
/// sleeps then, and how to read them again.
type Change = (Instant, u64, fn() -> u64);

/// A speculative step that took at least this long is checked for a
/// sleep; a shorter one held the loop's other calls for less than a
/// handoff's wakeup across CPUs costs (about 35 µs here), sleep or not.
pub const SLOW_STEP: Duration = Duration::from_micros(50);

const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// One event loop's calls (run to completion): what they may do beyond
/// memory, the call under way, and the loop's turns.
pub struct Loop {
    leave: Leave,
    /// The call under way (between `begin_call` and `end_call`).
    attempt: std::cell::RefCell<Option<Inline>>,
}

impl Loop {
    /// The calls of one loop, which may take the steps `leave` allows.
    pub fn new(leave: Leave) -> Loop {
        Loop {
            leave,
            attempt: std::cell::RefCell::new(None),
        }
    }

    /// What this loop's calls may do beyond memory.
    pub fn leave(&self) -> Leave {
        self.leave
    }

    /// A call is about to be tried here.
    pub fn begin_call(&self) {
        debug_assert!(self.attempt.borrow().is_none(), "a call already under way");
        *self.attempt.borrow_mut() = Some(enter_with(self.leave));
    }

    /// Whether the call under way gave up (it runs again in a pool: its
    /// reply is thrown away and must not be kept by a reply cache).
    pub fn gave_up(&self) -> bool {
        self.attempt.borrow().as_ref().is_some_and(Inline::gave_up)
    }

    /// The call is over: returns whether it gave up. A change it ran to
    /// its end is judged now.
    pub fn end_call(&self) -> bool {
        let g = self.attempt.borrow_mut().take();
        g.is_some_and(|g| g.gave_up())
    }

    /// A new turn of the loop (see `new_turn`).
    pub fn turn_begins(&self) {
        new_turn();
    }

    /// The turn is over (see `turn_ends`).
    pub fn turn_ends(&self, more: bool) {
        turn_ends(more);
    }
}

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
    /// A namespace change or SETATTR of an `async` export.
    pub changes: bool,
}

impl Leave {
    pub const NONE: Leave = Leave {
        misses: false,
        writes: false,
        changes: false,
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
        if let Some((t, base, sleeps)) = CHANGE.with(|c| c.take()) {
            judge(t, base, sleeps, &QUIET_UNTIL, &BACKOFF);
        }
        STATE.with(|s| s.set(0));
        MAY.with(|m| m.set(Leave::NONE));
    }
}

/// Whether this thread must not wait: the backend answers from memory or
/// gives up.
pub fn active() -> bool {
    STATE.with(|s| matches!(s.get(), 1 | 2))
}

/// Whether this thread is an event loop running a call (inline, or a
/// change run to its end): nothing may be reclaimed or closed here.
pub fn on_loop() -> bool {
    STATE.with(|s| s.get() != 0)
}

/// Gives up the inline attempt: the error to return up the call. Never
/// once a change has begun (`run_to_end`): the call would run twice, so
/// the client gets the error (a retry) instead.
pub fn give_up() -> FsError {
    STATE.with(|s| {
        if s.get() != 3 {
            s.set(2)
        }
    });
    FsError::Errno(libc::EAGAIN)
}

/// Whether this inline attempt may make a change (see the module text):
/// allowed, no recent step on this thread slept, and the attempt has not
/// given up already (a step's give-up that its caller swallowed: the call
/// runs again in a pool, and must not have changed anything by then).
pub fn may_change() -> bool {
    STATE.with(|s| s.get() == 1) && may(|l| l.changes)
}

/// A change begins on this loop thread (`may_change` said yes, nothing
/// changed yet): from here the call runs to its end as if in a pool, and
/// when the guard drops the whole of it is judged as one speculative step
/// (`watch`), with the thread's sleeps read by `sleeps`.
pub fn run_to_end(sleeps: fn() -> u64) {
    if STATE.with(|s| s.get() != 1) {
        return;
    }
    let base = TURN_BASE.with(|b| match b.get() {
        Some(v) => v,
        None => {
            let v = sleeps();
            b.set(Some(v));
            v
        }
    });
    STATE.with(|s| s.set(3));
    CHANGE.with(|c| c.set(Some((Instant::now(), base, sleeps))));
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

/// Whether the inline call under way may leave a job for the end of its
/// loop's turn (`after_turn`): it may write (the jobs are writebacks, which
/// may sleep as a write may), it has not given up, no recent job slept,
/// and the turn has room. Such a job runs after the turn's replies are
/// sent, in the time the loop would otherwise sleep, instead of waking
/// another thread for it.
fn may_leave_for_turn_end() -> bool {
    STATE.with(|s| s.get() == 1)
        && may_write()
        && !jobs_quiet()
        && AFTER_TURN.with(|a| a.borrow().len() < AFTER_TURN_MAX)
}

/// Leaves `job` for the end of this loop's turn (`turn_ends`) when
/// `may_leave_for_turn_end` says so; else hands it off at once.
pub fn after_turn(job: Box<dyn TurnJob>) {
    if !may_leave_for_turn_end() {
        job.hand_off();
        return;
    }
    AFTER_TURN.with(|a| a.borrow_mut().push(job));
}

/// This loop's turn is over (its replies sent): with nothing more ready
/// (`more` false: the loop would sleep now) it runs the jobs its calls
/// left, on a loop (`on_loop`: nothing is closed here) but not inline
/// (each job watches itself, `watch_job`), until one sleeps; with more
/// ready, or once one slept, it hands them off, so neither the calls
/// waiting nor the next turn wait for them.
pub fn turn_ends(more: bool) {
    let jobs = AFTER_TURN.with(|a| std::mem::take(&mut *a.borrow_mut()));
    if jobs.is_empty() {
        return;
    }
    let prev = STATE.with(|s| s.replace(4));
    for job in jobs {
        if more || jobs_quiet() {
            job.hand_off();
        } else {
            job.run();
        }
    }
    STATE.with(|s| s.set(prev));
}

/// Whether a turn-end job that slept keeps this thread's next ones off it.
fn jobs_quiet() -> bool {
    JOBS_QUIET_UNTIL.with(|q| q.get().is_some_and(|t| Instant::now() < t))
}

/// `watch` for a turn-end job, judged into the jobs' own backoff: one that
/// slept sends this loop's next jobs to another thread for the backoff,
/// which doubles while they keep sleeping, and leaves the calls'
/// speculation alone.
pub fn watch_job<T>(sleeps: impl Fn() -> u64, step: impl FnOnce() -> T) -> T {
    watch_into(sleeps, step, &JOBS_QUIET_UNTIL, &JOBS_BACKOFF)
}

/// A new loop turn: the next speculative step reads the thread's sleeps
/// afresh (the loop slept in epoll_wait since the last one).
pub fn new_turn() {
    TURN_BASE.with(|b| b.set(None));
}

/// Runs a speculative step and records whether it slept, reading the
/// thread's voluntary sleeps (`sleeps`, a syscall) once per loop turn and
/// again only after a step that took `SLOW_STEP` or longer: two reads per
/// step cost two of an inline WRITE's seven syscalls, while a step that
/// slept long enough to matter (the disk) is always that slow. A sleep
/// elsewhere in the turn (a contended lock) is blamed on the next slow
/// step; a slow step that did not sleep (the CPU was taken) is not.
pub fn watch<T>(sleeps: impl Fn() -> u64, step: impl FnOnce() -> T) -> T {
    watch_into(sleeps, step, &QUIET_UNTIL, &BACKOFF)
}

fn watch_into<T>(
    sleeps: impl Fn() -> u64,
    step: impl FnOnce() -> T,
    quiet: &'static Quiet,
    backoff: &'static Backoff,
) -> T {
    let base = TURN_BASE.with(|b| match b.get() {
        Some(v) => v,
        None => {
            let v = sleeps();
            b.set(Some(v));
            v
        }
    });
    let t = Instant::now();
    let r = step();
    judge(t, base, &sleeps, quiet, backoff);
    r
}

/// A step that began at `t` with the thread at `base` sleeps is over:
/// recorded (in `quiet` and `backoff`) as slept only if it was slow and the
/// sleeps moved.
fn judge(
    t: Instant,
    base: u64,
    sleeps: impl Fn() -> u64,
    quiet: &'static Quiet,
    backoff: &'static Backoff,
) {
    if t.elapsed() < SLOW_STEP {
        back_off(false, quiet, backoff);
        return;
    }
    let now = sleeps();
    TURN_BASE.with(|b| b.set(Some(now)));
    back_off(now != base, quiet, backoff);
}

/// Records how a speculative step went: one that slept quiets this thread
/// for the backoff, which doubles (to `BACKOFF_MAX`); one that did not
/// halves it (to `BACKOFF_MIN`).
pub fn speculated(slept: bool) {
    back_off(slept, &QUIET_UNTIL, &BACKOFF);
}

type Quiet = std::thread::LocalKey<Cell<Option<Instant>>>;
type Backoff = std::thread::LocalKey<Cell<Duration>>;

fn back_off(slept: bool, quiet: &'static Quiet, backoff: &'static Backoff) {
    let b = backoff.with(|b| b.get());
    if slept {
        quiet.with(|q| q.set(Some(Instant::now() + b)));
        backoff.with(|c| c.set((b * 2).min(BACKOFF_MAX)));
    } else if b > BACKOFF_MIN {
        backoff.with(|c| c.set((b / 2).max(BACKOFF_MIN)));
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
                changes: false,
            });
            assert!(may_write() && !may_speculate(), "each leave alone");
        }
        let _g = enter_with(Leave {
            misses: true,
            writes: true,
            changes: false,
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

    /// A change run to its end: no longer inline for the backend (nothing
    /// gives up, not even by mistake), still on a loop for the caches, and
    /// judged as one step when the guard drops.
    #[test]
    fn a_change_runs_to_its_end_and_is_judged_when_the_guard_drops() {
        fn sleeping() -> u64 {
            SLEPT.with(|s| s.get())
        }
        thread_local! {
            static SLEPT: Cell<u64> = const { Cell::new(0) };
        }
        let changes = Leave {
            changes: true,
            ..Leave::NONE
        };
        {
            let _g = enter();
            assert!(!may_change(), "not allowed");
        }
        {
            let g = enter_with(changes);
            let _ = give_up();
            assert!(!may_change(), "an attempt that gave up changes nothing");
            run_to_end(sleeping);
            assert!(g.gave_up() && active(), "still given up");
        }
        {
            let g = enter_with(changes);
            new_turn();
            assert!(may_change());
            run_to_end(sleeping);
            assert!(!active() && on_loop());
            let _ = give_up();
            assert!(!g.gave_up(), "a change begun is never given up");
            // Slow, and the thread slept: quiet after the guard drops.
            std::thread::sleep(SLOW_STEP * 2);
            SLEPT.with(|s| s.set(1));
        }
        assert!(!on_loop() && !active());
        let g = enter_with(changes);
        assert!(!may_change(), "quiet after a change that slept");
        drop(g);
        QUIET_UNTIL.with(|q| q.set(None));
        BACKOFF.with(|b| b.set(BACKOFF_MIN));
    }

    /// The sleeps are read once per turn and after a slow step only; a
    /// slow step that slept quiets the thread, one that did not (the CPU
    /// was taken) does not.
    #[test]
    fn watch_reads_sleeps_once_a_turn_and_after_slow_steps() {
        let sleeps = Cell::new(0u64);
        let reads = Cell::new(0u32);
        let read = || {
            reads.set(reads.get() + 1);
            sleeps.get()
        };
        let _g = enter_with(Leave {
            misses: true,
            writes: true,
            changes: false,
        });
        new_turn();
        for _ in 0..3 {
            assert_eq!(watch(read, || 7), 7);
        }
        assert_eq!(reads.get(), 1, "one read for three fast steps");
        assert!(may_speculate());
        // Slow, no sleep of its own: not quieted.
        watch(read, || spin(SLOW_STEP + Duration::from_millis(1)));
        assert_eq!(reads.get(), 2);
        assert!(may_speculate(), "a slow step that did not sleep");
        // Slow, and slept.
        watch(read, || {
            spin(SLOW_STEP + Duration::from_millis(1));
            sleeps.set(sleeps.get() + 1);
        });
        assert!(!may_speculate(), "a slow step that slept");
        QUIET_UNTIL.with(|q| q.set(None));
        // A new turn reads again; the loop's own sleep in between (epoll)
        // is not blamed on the next slow step.
        sleeps.set(sleeps.get() + 5);
        new_turn();
        watch(read, || spin(SLOW_STEP + Duration::from_millis(1)));
        assert_eq!(reads.get(), 5);
        assert!(
            may_speculate(),
            "the sleep before the turn is not the step's"
        );
    }

    fn spin(d: Duration) {
        let t = Instant::now();
        while t.elapsed() < d {
            std::hint::spin_loop();
        }
    }

    /// Jobs left for a turn's end: bounded per turn, run at its end when
    /// nothing more is ready and handed off otherwise; a job that slept
    /// sends the next ones elsewhere for a while without quieting the
    /// loop's calls.
    #[test]
    fn turn_end_jobs_run_or_go_elsewhere_and_back_off_on_their_own() {
        use std::rc::Rc;
        struct Job(Rc<Cell<(u32, u32)>>, bool);
        impl TurnJob for Job {
            fn run(self: Box<Self>) {
                let slept = self.1;
                // Slow, and the sleeps move during the step when `slept`.
                let n = Cell::new(0u64);
                watch_job(
                    || n.get(),
                    || {
                        std::thread::sleep(SLOW_STEP * 2);
                        if slept {
                            n.set(1);
                        }
                    },
                );
                self.0.set((self.0.get().0 + 1, self.0.get().1));
            }
            fn hand_off(self: Box<Self>) {
                self.0.set((self.0.get().0, self.0.get().1 + 1));
            }
        }
        let ran = Rc::new(Cell::new((0, 0)));
        let writes = Leave {
            writes: true,
            ..Leave::NONE
        };
        {
            let _g = enter();
            assert!(!may_leave_for_turn_end(), "memory only: no writes");
            after_turn(Box::new(Job(ran.clone(), false)));
        }
        assert_eq!(ran.get(), (0, 1), "not allowed: handed off at once");
        {
            let _g = enter_with(writes);
            for _ in 0..AFTER_TURN_MAX {
                assert!(may_leave_for_turn_end());
                after_turn(Box::new(Job(ran.clone(), false)));
            }
            assert!(!may_leave_for_turn_end(), "the turn's room is full");
        }
        assert!(!may_leave_for_turn_end(), "not inline");
        turn_ends(true);
        assert_eq!(
            ran.get(),
            (0, 1 + AFTER_TURN_MAX as u32),
            "more ready: handed off"
        );
        turn_ends(false);
        assert_eq!(
            ran.get(),
            (0, 1 + AFTER_TURN_MAX as u32),
            "nothing left twice"
        );
        {
            let _g = enter_with(writes);
            after_turn(Box::new(Job(ran.clone(), true)));
            after_turn(Box::new(Job(ran.clone(), false)));
        }
        turn_ends(false);
        assert_eq!(
            ran.get(),
            (1, 2 + AFTER_TURN_MAX as u32),
            "the first ran and slept, the second went elsewhere"
        );
        let g = enter_with(writes);
        assert!(!may_leave_for_turn_end(), "jobs back off after one slept");
        assert!(may_write(), "the calls' speculation is not quieted");
        drop(g);
        JOBS_QUIET_UNTIL.with(|q| q.set(None));
        JOBS_BACKOFF.with(|b| b.set(BACKOFF_MIN));
    }
}
