//! Run to completion: a call answered on the event loop thread must never
//! sleep. For a call on a loop (`Call::on_loop`, between its [`Loop`]'s
//! `begin_call` and `end_call`), the local backend answers only from what
//! is in memory (its caches, the page cache, the
//! dentry cache); at the first step that could wait (a cache miss, data not
//! in the page cache, a name not in the dentry cache) it gives up with
//! EAGAIN and marks the attempt (`Call::give_up`), and the caller runs
//! the call again in the pool. Only calls that change nothing, and UNSTABLE WRITEs (below), are
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
//! (`Loop::watch`: a step of `SLOW_STEP` or more that slept); each step
//! that slept keeps this loop from speculating for a while, from 10 ms
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
//! anything changes (`Call::run_to_end`); from there the call is no longer
//! inline for the backend (nothing in it can give up: the call would be
//! done twice) but stays on a loop for the caches (`Call::runs_on_loop`:
//! nothing is reclaimed or closed there), and the whole rest of it is
//! watched as one step when the call ends (`Loop::end_call`). A `sync` export's changes never come here:
//! they wait for a journal commit in the blocking pool.
//!
//! A call on the loop may also leave a job for the end of the loop's turn
//! (`Call::after_turn`: write-behind's writeback start). Once the turn's
//! replies are sent, the loop runs it where it would otherwise sleep
//! (`Loop::turn_ends`), unless more is ready or a recent job slept
//! (`Loop::watch_job`, a backoff of the jobs' own):
//! then another thread gets it. A job is never a reason to quiet the
//! loop's calls.

//!
//! All of this state is the loop's own ([`Loop`], owned by one event
//! loop's calls and used on its thread only); what one call may do is
//! asked of its [`Call`](crate::Call).

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use crate::limits::inline::{AFTER_TURN_MAX, BACKOFF_MAX, BACKOFF_MIN, SLOW_STEP};

/// Work left for the end of a loop turn. `Send`: the [`Loop`] holding it
/// belongs to an event loop's calls, made on one thread and moved to the
/// loop's.
pub trait TurnJob: Send {
    /// Runs it on the loop `lp`: the turn is over and the loop would sleep.
    fn run(self: Box<Self>, lp: &Loop);
    /// Gives it to another thread: the loop has more work ready, or the
    /// job could not be left for the turn's end.
    fn hand_off(self: Box<Self>);
}

/// A change run to its end (`Loop::run_to_end`): when it began, the
/// thread's sleeps then, and how to read them again.
#[derive(Clone, Copy, Debug)]
struct Change {
    began: Instant,
    base: u64,
    sleeps: fn() -> u64,
}

/// Where a loop's call stands. `begin_call` goes from `Idle` to `Inline`;
/// a give-up from `Inline` to `GaveUp`; a change that begins from `Inline`
/// to `RunToEnd`, which never gives up; `end_call` back to `Idle`. The
/// jobs of a turn's end run in `TurnEnd`, between calls.
#[derive(Clone, Copy, Debug)]
enum Attempt {
    /// No call under way.
    Idle,
    /// A call answered from memory.
    Inline,
    /// The call gave up: it runs again in a pool.
    GaveUp,
    /// A change run to its end: no longer inline for the backend, still on
    /// the loop for the caches.
    RunToEnd(Change),
    /// The jobs left for the turn's end are running.
    TurnEnd,
}

/// Whether recent steps slept: no speculation before `quiet_until`; the
/// quiet time a step that slept sets next is `next`.
struct Backoff {
    quiet_until: Cell<Option<Instant>>,
    next: Cell<Duration>,
}

impl Backoff {
    fn new() -> Backoff {
        Backoff {
            quiet_until: Cell::new(None),
            next: Cell::new(BACKOFF_MIN),
        }
    }

    /// Whether a step may be taken now (a quiet time over is forgotten).
    fn may(&self) -> bool {
        match self.quiet_until.get() {
            None => true,
            Some(t) if Instant::now() >= t => {
                self.quiet_until.set(None);
                true
            }
            Some(_) => false,
        }
    }

    /// Whether a step that slept keeps the next ones off, now.
    fn quiet(&self) -> bool {
        self.quiet_until.get().is_some_and(|t| Instant::now() < t)
    }

    /// Records how a step went: one that slept quiets for the backoff,
    /// which doubles (to `BACKOFF_MAX`); one that did not halves it (to
    /// `BACKOFF_MIN`).
    fn record(&self, slept: bool) {
        let b = self.next.get();
        if slept {
            self.quiet_until.set(Some(Instant::now() + b));
            self.next.set((b * 2).min(BACKOFF_MAX));
        } else if b > BACKOFF_MIN {
            self.next.set((b / 2).max(BACKOFF_MIN));
        }
        debug_assert!((BACKOFF_MIN..=BACKOFF_MAX).contains(&self.next.get()));
    }
}

/// One event loop's calls (run to completion): what they may do beyond
/// memory, the call under way, the speculation backoffs, and the loop's
/// turns. Owned by the loop and used on its thread only.
pub struct Loop {
    leave: Leave,
    attempt: Cell<Attempt>,
    /// The calls' speculation (`watch`).
    calls: Backoff,
    /// The jobs left for a turn's end (`watch_job`), apart: a job that
    /// slept sends the next ones elsewhere for a while, and leaves the
    /// calls' speculation alone.
    jobs: Backoff,
    /// The thread's voluntary sleeps when this turn's first speculative
    /// step began (None: none began yet this turn).
    turn_base: Cell<Option<u64>>,
    /// Work this turn's calls left for its end (`after_turn`), at most
    /// `AFTER_TURN_MAX`.
    after_turn: RefCell<Vec<Box<dyn TurnJob>>>,
}

// The transport moves each loop's calls, and so this, to the loop's thread.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<Loop>();
};

impl Loop {
    /// The calls of one loop, which may take the steps `leave` allows.
    pub fn new(leave: Leave) -> Loop {
        Loop {
            leave,
            attempt: Cell::new(Attempt::Idle),
            calls: Backoff::new(),
            jobs: Backoff::new(),
            turn_base: Cell::new(None),
            after_turn: RefCell::new(Vec::new()),
        }
    }

    /// What this loop's calls may do beyond memory.
    pub fn leave(&self) -> Leave {
        self.leave
    }

    /// A call is about to be tried here.
    pub fn begin_call(&self) {
        debug_assert!(
            matches!(self.attempt.get(), Attempt::Idle),
            "a call begins while {:?}",
            self.attempt.get()
        );
        self.attempt.set(Attempt::Inline);
    }

    /// Whether the call under way gave up (it runs again in a pool: its
    /// reply is thrown away and must not be kept by a reply cache).
    pub fn gave_up(&self) -> bool {
        matches!(self.attempt.get(), Attempt::GaveUp)
    }

    /// Gives up the call under way if it still may (it runs again in a
    /// pool): whether it did. False once it runs to its end (a change
    /// began) or for a step that must wait anyway. For a caller above
    /// the backend about to wait (an NFSv4 callback's answer).
    pub fn give_up_to_wait(&self) -> bool {
        match self.attempt.get() {
            Attempt::Inline | Attempt::GaveUp => {
                self.attempt.set(Attempt::GaveUp);
                true
            }
            _ => false,
        }
    }

    /// The call is over: returns whether it gave up. A change it ran to
    /// its end is judged now, as one speculative step.
    pub fn end_call(&self) -> bool {
        let was = self.attempt.replace(Attempt::Idle);
        match was {
            Attempt::RunToEnd(c) => self.judge(c.began, c.base, c.sleeps, &self.calls),
            Attempt::Idle | Attempt::TurnEnd => {
                debug_assert!(false, "a call ends that did not begin ({was:?})")
            }
            Attempt::Inline | Attempt::GaveUp => {}
        }
        matches!(was, Attempt::GaveUp)
    }

    /// A new turn of the loop: the next speculative step reads the
    /// thread's sleeps afresh (the loop slept in epoll_wait since the last
    /// one).
    pub fn turn_begins(&self) {
        debug_assert!(matches!(self.attempt.get(), Attempt::Idle));
        self.turn_base.set(None);
    }

    /// This loop's turn is over (its replies sent): with nothing more ready
    /// (`more` false: the loop would sleep now) it runs the jobs its calls
    /// left, between calls (each job watches itself, `watch_job`), until
    /// one sleeps; with more ready, or once one slept, it hands them off,
    /// so neither the calls waiting nor the next turn wait for them.
    pub fn turn_ends(&self, more: bool) {
        let jobs = std::mem::take(&mut *self.after_turn.borrow_mut());
        debug_assert!(jobs.len() <= AFTER_TURN_MAX, "{} turn-end jobs", jobs.len());
        if jobs.is_empty() {
            return;
        }
        debug_assert!(matches!(self.attempt.get(), Attempt::Idle));
        let prev = self.attempt.replace(Attempt::TurnEnd);
        for job in jobs {
            if more || self.jobs.quiet() {
                job.hand_off();
            } else {
                job.run(self);
            }
        }
        self.attempt.set(prev);
    }

    /// Records how a speculative step went (see `Backoff::record`). Public
    /// for tests that make a loop quiet as a step that slept would.
    pub fn speculated(&self, slept: bool) {
        self.calls.record(slept);
    }

    /// Whether a call is under way (between `begin_call` and `end_call`).
    pub(crate) fn call_under_way(&self) -> bool {
        matches!(
            self.attempt.get(),
            Attempt::Inline | Attempt::GaveUp | Attempt::RunToEnd(_)
        )
    }

    /// Whether the call under way must not wait: it answers from memory
    /// or gives up.
    pub(crate) fn inline(&self) -> bool {
        matches!(self.attempt.get(), Attempt::Inline | Attempt::GaveUp)
    }

    /// Gives up the call under way. Never once a change has begun
    /// (`run_to_end`): the call would run twice. Every give-up is asked
    /// only of an inline call, so one in another state is a bug.
    pub(crate) fn give_up(&self) {
        match self.attempt.get() {
            Attempt::Inline | Attempt::GaveUp => self.attempt.set(Attempt::GaveUp),
            a => debug_assert!(false, "a give-up in {a:?}"),
        }
    }

    /// Whether the call under way may make a change: allowed, no recent
    /// step slept, and it has not given up already (a step's give-up that
    /// its caller swallowed: the call runs again in a pool, and must not
    /// have changed anything by then).
    pub(crate) fn may_change(&self) -> bool {
        matches!(self.attempt.get(), Attempt::Inline) && self.may(|l| l.changes)
    }

    /// A change begins (`may_change` said yes, nothing changed yet): from
    /// here the call runs to its end as if in a pool, and when it ends
    /// the whole of it is judged as one speculative step (`watch`), with
    /// the thread's sleeps read by `sleeps`. Nothing once given up.
    pub(crate) fn run_to_end(&self, sleeps: fn() -> u64) {
        let a = self.attempt.get();
        debug_assert!(
            matches!(a, Attempt::Inline | Attempt::GaveUp),
            "a change run to its end in {a:?}"
        );
        if !matches!(a, Attempt::Inline) {
            return;
        }
        let base = self.turn_base(sleeps);
        self.attempt.set(Attempt::RunToEnd(Change {
            began: Instant::now(),
            base,
            sleeps,
        }));
    }

    /// The call is about to change state the server keeps in memory only
    /// (NFSv4's opens and stateids): from here it runs to its end
    /// (`run_to_end`), since a give-up would run the change twice. It
    /// changes no file, so it needs no `Leave::changes`. False for an
    /// attempt already given up: it must change nothing (it runs again).
    #[must_use]
    pub fn memory_change_begins(&self) -> bool {
        match self.attempt.get() {
            Attempt::Inline => {
                self.run_to_end(crate::sleeps::thread_sleeps);
                true
            }
            Attempt::GaveUp => false,
            _ => true,
        }
    }

    /// Whether the call under way may open a miss: allowed, and no recent
    /// step slept.
    pub(crate) fn may_speculate(&self) -> bool {
        self.may(|l| l.misses)
    }

    /// Whether the call under way may write: allowed, and no recent step
    /// slept.
    pub(crate) fn may_write(&self) -> bool {
        self.may(|l| l.writes)
    }

    fn may(&self, allowed: impl FnOnce(Leave) -> bool) -> bool {
        self.inline() && allowed(self.leave) && self.calls.may()
    }

    /// Whether the call under way may leave a job for the end of the turn
    /// (`after_turn`): it may write (the jobs are writebacks, which may
    /// sleep as a write may), it has not given up, no recent job slept,
    /// and the turn has room. Such a job runs after the turn's replies are
    /// sent, in the time the loop would otherwise sleep, instead of waking
    /// another thread for it.
    fn may_leave_for_turn_end(&self) -> bool {
        matches!(self.attempt.get(), Attempt::Inline)
            && self.may_write()
            && !self.jobs.quiet()
            && self.after_turn.borrow().len() < AFTER_TURN_MAX
    }

    /// Leaves `job` for the end of this turn (`turn_ends`) when
    /// `may_leave_for_turn_end` says so; else hands it off at once.
    pub(crate) fn after_turn(&self, job: Box<dyn TurnJob>) {
        if !self.may_leave_for_turn_end() {
            job.hand_off();
            return;
        }
        let mut jobs = self.after_turn.borrow_mut();
        jobs.push(job);
        debug_assert!(jobs.len() <= AFTER_TURN_MAX);
    }

    /// Runs a speculative step and records whether it slept, reading the
    /// thread's voluntary sleeps (`sleeps`, a syscall) once per loop turn
    /// and again only after a step that took `SLOW_STEP` or longer: two
    /// reads per step cost two of an inline WRITE's seven syscalls, while
    /// a step that slept long enough to matter (the disk) is always that
    /// slow. A sleep elsewhere in the turn (a contended lock) is blamed on
    /// the next slow step; a slow step that did not sleep (the CPU was
    /// taken) is not.
    pub(crate) fn watch<T>(&self, sleeps: impl Fn() -> u64, step: impl FnOnce() -> T) -> T {
        self.watch_into(sleeps, step, &self.calls)
    }

    /// `watch` for a turn-end job, judged into the jobs' own backoff: one
    /// that slept sends this loop's next jobs to another thread for the
    /// backoff, which doubles while they keep sleeping, and leaves the
    /// calls' speculation alone.
    pub(crate) fn watch_job<T>(&self, sleeps: impl Fn() -> u64, step: impl FnOnce() -> T) -> T {
        debug_assert!(matches!(self.attempt.get(), Attempt::TurnEnd));
        self.watch_into(sleeps, step, &self.jobs)
    }

    /// The thread's sleeps at this turn's first step, read now if none
    /// was yet.
    fn turn_base(&self, sleeps: impl Fn() -> u64) -> u64 {
        match self.turn_base.get() {
            Some(v) => v,
            None => {
                let v = sleeps();
                self.turn_base.set(Some(v));
                v
            }
        }
    }

    fn watch_into<T>(
        &self,
        sleeps: impl Fn() -> u64,
        step: impl FnOnce() -> T,
        backoff: &Backoff,
    ) -> T {
        let base = self.turn_base(&sleeps);
        let t = Instant::now();
        let r = step();
        self.judge(t, base, &sleeps, backoff);
        r
    }

    /// A step that began at `t` with the thread at `base` sleeps is over:
    /// recorded in `backoff` as slept only if it was slow and the sleeps
    /// moved.
    fn judge(&self, t: Instant, base: u64, sleeps: impl Fn() -> u64, backoff: &Backoff) {
        if t.elapsed() < SLOW_STEP {
            backoff.record(false);
            return;
        }
        let now = sleeps();
        self.turn_base.set(Some(now));
        backoff.record(now != base);
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Call, Cred};
    use std::sync::{Arc, Mutex};

    /// A loop of `leave` with a call begun on it.
    fn begun(leave: Leave) -> Loop {
        let lp = Loop::new(leave);
        lp.begin_call();
        lp
    }

    /// Speculation needs a call on a loop and the loop's leave; a step
    /// that slept quiets the loop for the backoff, which doubles while
    /// steps keep sleeping and halves when they do not.
    #[test]
    fn a_step_that_slept_quiets_the_thread_for_a_doubling_backoff() {
        let cred = Cred::default();
        assert!(!Call::thread(&cred, false).may_speculate(), "not on a loop");
        {
            let lp = begun(Leave::NONE);
            assert!(
                !Call::on_loop(&cred, &lp).may_speculate(),
                "inline, not allowed"
            );
            lp.end_call();
        }
        {
            let lp = begun(Leave {
                misses: false,
                writes: true,
                changes: false,
            });
            let call = Call::on_loop(&cred, &lp);
            assert!(
                call.may_write() && !call.may_speculate(),
                "each leave alone"
            );
            lp.end_call();
        }
        let lp = begun(Leave {
            misses: true,
            writes: true,
            changes: false,
        });
        let call = Call::on_loop(&cred, &lp);
        assert!(call.may_speculate() && call.may_write());
        lp.speculated(false);
        assert_eq!(lp.calls.next.get(), BACKOFF_MIN);
        lp.speculated(true);
        assert!(!call.may_speculate(), "quiet after a step that slept");
        assert!(!call.may_write(), "a write is quiet too");
        assert_eq!(lp.calls.next.get(), 2 * BACKOFF_MIN);
        std::thread::sleep(BACKOFF_MIN + Duration::from_millis(2));
        assert!(call.may_speculate(), "quiet time over");
        for _ in 0..20 {
            lp.speculated(true);
        }
        assert_eq!(lp.calls.next.get(), BACKOFF_MAX);
        lp.calls.quiet_until.set(None);
        lp.speculated(false);
        assert_eq!(lp.calls.next.get(), BACKOFF_MAX / 2);
        lp.end_call();
        assert!(!call.may_speculate(), "the call ended");
    }

    /// A change run to its end: no longer inline for the backend (nothing
    /// gives up, not even by mistake), still on a loop for the caches, and
    /// judged as one step when the call ends.
    #[test]
    fn a_change_runs_to_its_end_and_is_judged_when_the_guard_drops() {
        use std::sync::atomic::{AtomicU64, Ordering};
        static SLEPT: AtomicU64 = AtomicU64::new(0);
        fn sleeping() -> u64 {
            SLEPT.load(Ordering::SeqCst)
        }
        let cred = Cred::default();
        let changes = Leave {
            changes: true,
            ..Leave::NONE
        };
        {
            let lp = begun(Leave::NONE);
            assert!(!Call::on_loop(&cred, &lp).may_change(), "not allowed");
            lp.end_call();
        }
        let lp = Loop::new(changes);
        {
            lp.begin_call();
            let call = Call::on_loop(&cred, &lp);
            let _ = call.give_up();
            assert!(
                !call.may_change(),
                "an attempt that gave up changes nothing"
            );
            call.run_to_end(sleeping);
            assert!(lp.gave_up() && call.inline(), "still given up");
            assert!(lp.end_call());
        }
        {
            lp.turn_begins();
            lp.begin_call();
            let call = Call::on_loop(&cred, &lp);
            assert!(call.may_change());
            call.run_to_end(sleeping);
            assert!(!call.inline() && call.runs_on_loop());
            // A give-up now is a bug: debug builds say so; either way the
            // change begun is never given up.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call.give_up()));
            assert_eq!(r.is_err(), cfg!(debug_assertions));
            assert!(!lp.gave_up(), "a change begun is never given up");
            // Slow, and the thread slept: quiet once the call ends.
            std::thread::sleep(SLOW_STEP * 2);
            SLEPT.store(1, Ordering::SeqCst);
            assert!(!lp.end_call());
        }
        assert!(!Call::thread(&cred, false).runs_on_loop());
        lp.begin_call();
        assert!(
            !Call::on_loop(&cred, &lp).may_change(),
            "quiet after a change that slept"
        );
        lp.end_call();
    }

    /// The sleeps are read once per turn and after a slow step only; a
    /// slow step that slept quiets the loop, one that did not (the CPU
    /// was taken) does not.
    #[test]
    fn watch_reads_sleeps_once_a_turn_and_after_slow_steps() {
        let sleeps = Cell::new(0u64);
        let reads = Cell::new(0u32);
        let read = || {
            reads.set(reads.get() + 1);
            sleeps.get()
        };
        let cred = Cred::default();
        let lp = Loop::new(Leave {
            misses: true,
            writes: true,
            changes: false,
        });
        lp.turn_begins();
        lp.begin_call();
        let call = Call::on_loop(&cred, &lp);
        for _ in 0..3 {
            assert_eq!(call.watch(read, || 7), 7);
        }
        assert_eq!(reads.get(), 1, "one read for three fast steps");
        assert!(call.may_speculate());
        // Slow, no sleep of its own: not quieted.
        call.watch(read, || spin(SLOW_STEP + Duration::from_millis(1)));
        assert_eq!(reads.get(), 2);
        assert!(call.may_speculate(), "a slow step that did not sleep");
        // Slow, and slept.
        call.watch(read, || {
            spin(SLOW_STEP + Duration::from_millis(1));
            sleeps.set(sleeps.get() + 1);
        });
        assert!(!call.may_speculate(), "a slow step that slept");
        lp.calls.quiet_until.set(None);
        lp.end_call();
        // A new turn reads again; the loop's own sleep in between (epoll)
        // is not blamed on the next slow step.
        sleeps.set(sleeps.get() + 5);
        lp.turn_begins();
        lp.begin_call();
        let call = Call::on_loop(&cred, &lp);
        call.watch(read, || spin(SLOW_STEP + Duration::from_millis(1)));
        assert_eq!(reads.get(), 5);
        assert!(
            call.may_speculate(),
            "the sleep before the turn is not the step's"
        );
        lp.end_call();
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
        /// Jobs (run, handed off) so far.
        type Ran = Arc<Mutex<(u32, u32)>>;
        struct Job(Ran, bool);
        impl TurnJob for Job {
            fn run(self: Box<Self>, lp: &Loop) {
                let slept = self.1;
                // Slow, and the sleeps move during the step when `slept`.
                let n = Cell::new(0u64);
                lp.watch_job(
                    || n.get(),
                    || {
                        std::thread::sleep(SLOW_STEP * 2);
                        if slept {
                            n.set(1);
                        }
                    },
                );
                self.0.lock().unwrap().0 += 1;
            }
            fn hand_off(self: Box<Self>) {
                self.0.lock().unwrap().1 += 1;
            }
        }
        let ran: Ran = Arc::new(Mutex::new((0, 0)));
        let get = || *ran.lock().unwrap();
        let cred = Cred::default();
        let writes = Leave {
            writes: true,
            ..Leave::NONE
        };
        {
            let lp = begun(Leave::NONE);
            assert!(!lp.may_leave_for_turn_end(), "memory only: no writes");
            Call::on_loop(&cred, &lp).after_turn(Box::new(Job(ran.clone(), false)));
            lp.end_call();
        }
        assert_eq!(get(), (0, 1), "not allowed: handed off at once");
        Call::thread(&cred, false).after_turn(Box::new(Job(ran.clone(), false)));
        assert_eq!(get(), (0, 2), "not on a loop: handed off at once");
        let lp = Loop::new(writes);
        {
            lp.begin_call();
            let call = Call::on_loop(&cred, &lp);
            for _ in 0..AFTER_TURN_MAX {
                assert!(lp.may_leave_for_turn_end());
                call.after_turn(Box::new(Job(ran.clone(), false)));
            }
            assert!(!lp.may_leave_for_turn_end(), "the turn's room is full");
            lp.end_call();
        }
        assert!(!lp.may_leave_for_turn_end(), "no call under way");
        lp.turn_ends(true);
        assert_eq!(
            get(),
            (0, 2 + AFTER_TURN_MAX as u32),
            "more ready: handed off"
        );
        lp.turn_ends(false);
        assert_eq!(get(), (0, 2 + AFTER_TURN_MAX as u32), "nothing left twice");
        {
            lp.begin_call();
            let call = Call::on_loop(&cred, &lp);
            call.after_turn(Box::new(Job(ran.clone(), true)));
            call.after_turn(Box::new(Job(ran.clone(), false)));
            lp.end_call();
        }
        lp.turn_ends(false);
        assert_eq!(
            get(),
            (1, 3 + AFTER_TURN_MAX as u32),
            "the first ran and slept, the second went elsewhere"
        );
        lp.begin_call();
        assert!(
            !lp.may_leave_for_turn_end(),
            "jobs back off after one slept"
        );
        assert!(
            Call::on_loop(&cred, &lp).may_write(),
            "the calls' speculation is not quieted"
        );
        lp.end_call();
    }
}
