//! rnfsd-pool: the worker pool that runs one job per RPC request.
//!
//! Written by hand because the wake policy IS the product: no crate gives a
//! LIFO stack of idle threads with a bound on woken-but-not-running threads.
//!
//! # Policy (knfsd's SVC_MAX_WAKING and the Lustre MDS creation-rate
//! threads, docs/lessons.md)
//! - Jobs queue FIFO in one bounded queue ([`PoolConfig::queue_limit`]);
//!   [`Pool::submit`] returns [`SubmitError::Full`] with the job when it is
//!   full, so the caller (the transport) applies backpressure.
//! - Idle workers wait on a LIFO stack, each parked on its own thread handle,
//!   so one specific worker (the most recently idle, cache-hot one) is woken.
//! - At most [`PoolConfig::max_waking`] workers are woken but not yet
//!   running (default 1). A woken worker, once it has taken a job, wakes the
//!   next idle worker only if more work is still queued.
//! - A worker that finishes a job takes the next queued one before it
//!   sleeps, so under load most jobs run "inline", with no wakeup at all.
//! - A job is handed over with at most one wakeup ([`Handoff::Direct`]).
//! - With [`PoolConfig::lazy_wake`], a job queued alone while a worker
//!   runs wakes nobody: the running worker takes it (Lustre's one handoff),
//!   and a
//!   timer wakes a worker for jobs left longer than the bound.
//! - With [`PoolConfig::spin`], the last worker to go idle spins for the
//!   next job before it parks; under [`SpinWhen::Alone`] only while jobs
//!   come one at a time (a bit per submit, kept under the queue lock),
//!   yielding its CPU to any other thread runnable there.
//! - Threads: fixed, or adaptive (default: 2..=128): one more thread starts
//!   only when work waits, no worker is idle and none is being woken or
//!   started; a worker idle for [`PoolConfig::idle_timeout`] (default 30 s)
//!   retires while more than `min` remain. With LIFO waking the retirees are
//!   naturally the coldest threads.
//!
//! # Experiment switches (for benchmarks, not for production)
//! [`PoolConfig::wake_order`] (`Fifo` wakes the coldest thread),
//! `max_waking = UNLIMITED` (wake an idle worker per submitted job) and
//! [`Handoff::Double`] (the two-step handoff Lustre removed: a woken
//! "receiver" moves the job to a processing queue and wakes another thread).
//!
//! # Use
//! ```
//! use rnfsd_pool::{BoxJob, Pool, PoolConfig};
//! let pool: Pool<BoxJob> = Pool::new(PoolConfig::default()).unwrap();
//! let (tx, rx) = std::sync::mpsc::channel();
//! pool.submit(Box::new(move || tx.send(42).unwrap())).ok().unwrap();
//! assert_eq!(rx.recv().unwrap(), 42);
//! let s = pool.stats();
//! assert_eq!(s.jobs_run(), 1);
//! pool.shutdown();
//! ```
//!
//! [`PoolConfig::cpu`] pins every worker to one CPU (the transport's
//! one-pool-per-event-loop layout uses it; see [`affinity`]).
//!
//! Counters live in per-worker cache-line-padded cells written only by their
//! worker and summed by [`Pool::stats`]. The only shared line written on the
//! hot path is the queue's mutex. [`StripedCounter`] is a per-CPU counter
//! for other crates' hot paths.
//!
//! Jobs that panic are caught and counted; the worker survives. The lost-
//! wakeup stress test loops: `RNFSD_POOL_STRESS_ITERS=100 cargo test -p
//! rnfsd-pool --release stress`.

pub mod affinity;
mod config;
pub mod counter;
mod lazy;
pub mod limits;
pub mod sched;
mod stats;
mod sys;

pub use config::{Handoff, PoolConfig, SpinWhen, SubmitError, Threads, WakeOrder, UNLIMITED};
pub use counter::StripedCounter;
pub use stats::PoolStats;

use counter::bump;
use limits::{PREALLOC_MAX, SPIN_OVERLAPS_MAX};
use stats::{Counters, Totals};

use crossbeam_utils::CachePadded;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle, Thread};
use std::time::Instant;

/// Work the pool runs. Implement it on a small struct to avoid boxing on the
/// hot path; [`BoxJob`] covers closures.
pub trait Job: Send + 'static {
    /// What one worker thread keeps from one job to the next (the
    /// transport's replies held back to leave together): made when the
    /// worker starts, handed to every job it runs, dropped when it exits.
    /// Owned by the worker and passed in, so no job reaches it through a
    /// thread-local.
    type Worker: Default;

    fn run(self, worker: &mut Self::Worker);

    /// The worker holds something back that must go out before it sleeps.
    fn idle_pending(_worker: &Self::Worker) -> bool {
        false
    }

    /// Called when `idle_pending` said so: the worker found no job and is
    /// about to park. Runs without the pool's lock.
    fn on_idle(_worker: &mut Self::Worker) {}
}

/// A boxed closure job (one allocation per job; fine for tests and rare work).
pub type BoxJob = Box<dyn FnOnce() + Send + 'static>;

impl Job for BoxJob {
    type Worker = ();

    fn run(self, _worker: &mut ()) {
        self()
    }
}

/// One worker's wake handle and counters.
struct Slot {
    /// Set (under the queue lock) by the waker; read by the parked worker.
    woken: CachePadded<AtomicBool>,
    thread: Thread,
    counters: CachePadded<Counters>,
}

struct Queued<J> {
    job: J,
    at: Instant,
}

struct Inner<J> {
    /// Submitted jobs, FIFO (the incoming queue under `Handoff::Double`).
    queue: VecDeque<Queued<J>>,
    /// `Handoff::Double` only: jobs moved by a receiver, waiting to run.
    proc_queue: VecDeque<Queued<J>>,
    /// Idle workers; the back is the most recently idle.
    idle: VecDeque<Arc<Slot>>,
    waking: usize,
    peak_waking: usize,
    /// Live threads plus threads being started.
    threads: usize,
    /// Spawns in progress (their JoinHandle is not yet in `handles`).
    spawning: usize,
    shutdown: bool,
    /// Every live worker's slot, for `stats`. At most `max` entries.
    slots: Vec<Arc<Slot>>,
    /// Counters of exited workers.
    retired: Totals,
    threads_started: u64,
    threads_retired: u64,
    spawn_failures: u64,
    rejected_full: u64,
    jobs_left: u64,
    overdue_kicks: u64,
    /// `lazy_wake`: a job was left longer than the bound; until the queue
    /// empties, jobs wake workers as without `lazy_wake`.
    overdue: bool,
    /// Join handles; finished ones are pruned at each spawn.
    handles: Vec<JoinHandle<()>>,
    next_id: u64,
    /// `SpinWhen::Alone`: one bit per recent submitted job, newest lowest,
    /// set when it found a job queued or a worker not idle. Under the
    /// lock every submit takes anyway: no cache line of its own.
    overlaps: u64,
}

struct Shared<J> {
    inner: Mutex<Inner<J>>,
    /// Signalled when a worker exits or a spawn completes during shutdown.
    exit_cv: Condvar,
    cfg: PoolConfig,
    max_waking: usize,
    min_threads: usize,
    max_threads: usize,
    adaptive: bool,
    /// A pin failure was logged (log it once, not per worker).
    pin_warned: AtomicBool,
    /// A nice value or policy failure was logged (once).
    sched_warned: AtomicBool,
    /// Submits record whether they overlapped (`SpinWhen::Alone` with a
    /// spin to decide).
    track_overlaps: bool,
    /// Origin of `left_since`.
    epoch: Instant,
    /// `lazy_wake`: 1 + nanoseconds from `epoch` to when a job was first
    /// left queued for a running worker; 0 when none is. Written under the
    /// lock, read without it by `lazy_deadline` and `kick_overdue`.
    left_since: AtomicU64,
    /// `lazy_wake`: armed (one shot, `lazy_wake` ahead) while jobs are
    /// left, so the owner's poll wakes for an overdue one even when
    /// nothing else would wake it ([`Pool::lazy_timer`]). Set under the
    /// lock, so arming and disarming keep the order of the changes.
    timer: Option<std::os::fd::OwnedFd>,
}

/// What to do, after dropping the lock, to get queued work moving.
enum Kick {
    None,
    Wake(Arc<Slot>),
    Spawn,
}

/// The worker pool. Dropping it shuts it down (like [`Pool::shutdown`]).
pub struct Pool<J: Job> {
    shared: Arc<Shared<J>>,
}

impl<J: Job> Shared<J> {
    fn lock(&self) -> MutexGuard<'_, Inner<J>> {
        // Jobs never run under this lock, so poisoning would mean a bug in
        // this crate; the state is still consistent enough to keep going.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pop_idle(&self, g: &mut Inner<J>) -> Option<Arc<Slot>> {
        match self.cfg.wake_order {
            WakeOrder::Lifo => g.idle.pop_back(),
            WakeOrder::Fifo => g.idle.pop_front(),
        }
    }

    fn note_waking(&self, g: &mut Inner<J>) {
        g.waking += 1;
        if g.waking > g.peak_waking {
            g.peak_waking = g.waking;
        }
        debug_assert!(g.waking <= self.max_waking, "waking bound broken");
        self.check(g);
    }

    /// The counts' invariants (under the lock): every idle or woken
    /// worker is a thread counted in `threads` (which `stats` subtracts
    /// them from), `threads` stays within its bound, and the waking bound
    /// holds except where it is lifted: at shutdown (every idle worker is
    /// woken) and under `Handoff::Double` (its receiver wakes regardless).
    fn check(&self, g: &Inner<J>) {
        debug_assert!(
            g.idle.len() + g.waking <= g.threads,
            "{} idle + {} waking of {} threads",
            g.idle.len(),
            g.waking,
            g.threads
        );
        debug_assert!(g.threads <= self.max_threads, "threads past their bound");
        // Not `spawning <= threads`: a new worker may retire (idle_timeout)
        // before its spawner takes the lock again to uncount `spawning`.
        debug_assert!(g.slots.len() <= g.threads);
        debug_assert!(
            g.shutdown || self.cfg.handoff == Handoff::Double || g.waking <= self.max_waking,
            "waking bound broken"
        );
    }

    /// Work is queued: wake one idle worker if the waking bound allows, or
    /// start one more thread if adaptive and nobody is idle or on the way.
    fn kick(&self, g: &mut Inner<J>) -> Kick {
        if g.shutdown {
            return Kick::None;
        }
        if g.waking < self.max_waking {
            if let Some(s) = self.pop_idle(g) {
                s.woken.store(true, Ordering::Release);
                self.note_waking(g);
                return Kick::Wake(s);
            }
        }
        if self.adaptive && g.idle.is_empty() && g.waking == 0 && g.threads < self.max_threads {
            g.threads += 1;
            g.spawning += 1;
            self.note_waking(g);
            return Kick::Spawn;
        }
        Kick::None
    }

    fn queued(g: &Inner<J>) -> usize {
        g.queue.len() + g.proc_queue.len()
    }

    /// A job is about to be queued (under the lock): note whether it
    /// comes alone, with nothing queued and every worker idle.
    fn note_submit(&self, g: &mut Inner<J>) {
        if self.track_overlaps {
            let overlapped = Self::queued(g) > 0 || g.idle.len() < g.threads;
            g.overlaps = (g.overlaps << 1) | u64::from(overlapped);
        }
    }

    /// Whether a worker going idle as the last one spins (under the lock).
    fn should_spin(&self, g: &Inner<J>) -> bool {
        if self.cfg.spin.is_zero() {
            return false;
        }
        match self.cfg.spin_when {
            SpinWhen::Never => false,
            SpinWhen::Always => true,
            SpinWhen::Alone => g.overlaps.count_ones() <= SPIN_OVERLAPS_MAX,
        }
    }
}

fn do_kick<J: Job>(shared: &Arc<Shared<J>>, k: Kick) {
    match k {
        Kick::None => {}
        Kick::Wake(s) => s.thread.unpark(),
        Kick::Spawn => spawn_worker(shared, true),
    }
}

/// Start one worker. `woken`: it was counted in `waking` and must take work
/// (or uncount itself) first; otherwise it goes straight to the idle stack.
/// The caller has already counted it in `threads` and `spawning`.
fn spawn_worker<J: Job>(shared: &Arc<Shared<J>>, woken: bool) {
    let id = {
        let mut g = shared.lock();
        g.next_id += 1;
        g.next_id
    };
    let mut b = thread::Builder::new().name(format!("{}-{}", shared.cfg.name, id));
    if let Some(sz) = shared.cfg.stack_size {
        b = b.stack_size(sz);
    }
    let sh = shared.clone();
    let res = b.spawn(move || worker_main(sh, woken));
    let mut g = shared.lock();
    g.spawning -= 1;
    match res {
        Ok(h) => {
            g.handles.retain(|h| !h.is_finished());
            g.handles.push(h);
        }
        Err(e) => {
            g.threads -= 1;
            if woken {
                g.waking -= 1;
            }
            shared.check(&g);
            g.spawn_failures += 1;
            tracing::warn!("rnfsd-pool: cannot start worker thread: {e}");
        }
    }
    drop(g);
    shared.exit_cv.notify_all();
}

thread_local! {
    /// Address of the pool `Shared` this thread works for (0: none), so a
    /// shutdown called from inside a job does not wait for itself.
    static WORKER_OF: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn worker_main<J: Job>(shared: Arc<Shared<J>>, mut just_woken: bool) {
    WORKER_OF.with(|w| w.set(Arc::as_ptr(&shared) as usize));
    if let Some(cpu) = shared.cfg.cpu {
        if let Err(e) = affinity::pin_current_thread(cpu) {
            if !shared.pin_warned.swap(true, Ordering::Relaxed) {
                tracing::warn!("rnfsd-pool: cannot pin worker to cpu {cpu}: {e}");
            }
        }
    }
    if let Some(n) = shared.cfg.nice {
        if let Err(e) = sys::set_thread_nice(n) {
            if !shared.sched_warned.swap(true, Ordering::Relaxed) {
                tracing::warn!("rnfsd-pool: cannot set worker nice value {n}: {e}");
            }
        }
    }
    if shared.cfg.sched_batch {
        if let Err(e) = sched::batch_current_thread() {
            if !shared.sched_warned.swap(true, Ordering::Relaxed) {
                tracing::warn!("rnfsd-pool: cannot set SCHED_BATCH on a worker: {e}");
            }
        }
    }
    let slot = Arc::new(Slot {
        woken: CachePadded::new(AtomicBool::new(false)),
        thread: thread::current(),
        counters: CachePadded::new(Counters::default()),
    });
    let c = &slot.counters;
    let mut local = J::Worker::default();
    let double = shared.cfg.handoff == Handoff::Double;
    let mut g = shared.lock();
    g.slots.push(slot.clone());
    g.threads_started += 1;
    loop {
        if just_woken {
            g.waking -= 1;
        }
        shared.check(&g);
        if double {
            if let Some(q) = g.queue.pop_front() {
                // The receiver step: move the job, wake another thread to run
                // it, then loop (and maybe run it ourselves, as Lustre did).
                g.proc_queue.push_back(q);
                let other = if g.shutdown {
                    None
                } else {
                    shared.pop_idle(&mut g)
                };
                if let Some(s) = &other {
                    s.woken.store(true, Ordering::Release);
                    g.waking += 1;
                }
                drop(g);
                if let Some(s) = other {
                    s.thread.unpark();
                }
                if just_woken {
                    bump(&c.wakeups, 1);
                    just_woken = false;
                }
                g = shared.lock();
                continue;
            }
        }
        let next = if double {
            g.proc_queue.pop_front()
        } else {
            g.queue.pop_front()
        };
        if let Some(q) = next {
            shared.taken(&mut g);
            let k = if g.queue.is_empty() {
                Kick::None
            } else {
                shared.kick_or_leave(&mut g, true)
            };
            drop(g);
            do_kick(&shared, k);
            if just_woken {
                bump(&c.wakeups, 1);
                bump(&c.jobs_woken, 1);
                just_woken = false;
            } else {
                bump(&c.jobs_inline, 1);
            }
            let waited = q.at.elapsed().as_nanos();
            bump(&c.queue_time_ns, u64::try_from(waited).unwrap_or(u64::MAX));
            if catch_unwind(AssertUnwindSafe(|| q.job.run(&mut local))).is_err() {
                bump(&c.jobs_panicked, 1);
                tracing::error!("rnfsd-pool: a job panicked; worker continues");
            }
            g = shared.lock();
            continue;
        }
        // No work.
        if just_woken {
            bump(&c.wakeups, 1);
            bump(&c.wakeups_no_work, 1);
            just_woken = false;
        }
        if J::idle_pending(&local) {
            // Send what the last jobs held back, then look again: work may
            // have come meanwhile.
            drop(g);
            J::on_idle(&mut local);
            g = shared.lock();
            continue;
        }
        if g.shutdown {
            exit_worker(&shared, g, &slot);
            return;
        }
        g.idle.push_back(slot.clone());
        // Only the last worker to go idle spins: with others still
        // running, the CPU it would burn is theirs (and the next job
        // likely goes to one of them anyway); under `SpinWhen::Alone` only
        // while the recent jobs came one at a time.
        let spin = g.idle.len() + g.waking >= g.threads && shared.should_spin(&g);
        drop(g);
        if !park_idle(&shared, &slot, spin) {
            return; // retired (already unregistered)
        }
        just_woken = true;
        g = shared.lock();
    }
}

/// Spins up to `spin` for a handoff to `slot` (its waker's `unpark` then
/// only leaves a token, no system call): whether one came. `yield_cpu`:
/// every 64 turns it also yields its CPU to any other thread runnable
/// there (the pinned event loop whose next call it waits for, a busy
/// loop's other calls), so it spins only on time nobody else wants.
fn spin_for_handoff(slot: &Slot, spin: std::time::Duration, yield_cpu: bool) -> bool {
    if spin.is_zero() {
        return false;
    }
    let until = Instant::now() + spin;
    loop {
        // The clock read every 64 turns: a vDSO call each is most of a turn.
        for _ in 0..64 {
            if slot.woken.load(Ordering::Acquire) {
                return true;
            }
            std::hint::spin_loop();
        }
        if Instant::now() >= until {
            return false;
        }
        if yield_cpu {
            thread::yield_now();
        }
    }
}

/// Park until woken. Returns false if the worker retired instead.
fn park_idle<J: Job>(shared: &Arc<Shared<J>>, slot: &Arc<Slot>, spin: bool) -> bool {
    let mut since = Instant::now();
    if spin {
        bump(&slot.counters.spins, 1);
    }
    let yield_cpu = shared.cfg.spin_when == SpinWhen::Alone;
    if spin && spin_for_handoff(slot, shared.cfg.spin, yield_cpu) {
        // Its waker's unpark left a token: a later park returns at once,
        // and the loop below parks again.
        slot.woken.store(false, Ordering::Relaxed);
        bump(&slot.counters.wakeups_spun, 1);
        return true;
    }
    loop {
        if slot.woken.load(Ordering::Acquire) {
            break;
        }
        if !shared.adaptive {
            thread::park();
            continue;
        }
        let timeout = shared.cfg.idle_timeout;
        let left = timeout.saturating_sub(since.elapsed());
        if !left.is_zero() {
            thread::park_timeout(left);
            continue;
        }
        // Idle for idle_timeout: retire if more than min remain. Decide
        // under the lock, where `woken` is authoritative.
        let mut g = shared.lock();
        if slot.woken.load(Ordering::Acquire) {
            break;
        }
        if g.threads > shared.min_threads && !g.shutdown {
            if let Some(i) = g.idle.iter().position(|s| Arc::ptr_eq(s, slot)) {
                g.idle.remove(i);
                g.threads_retired += 1;
                exit_worker(shared, g, slot);
                return false;
            }
        }
        drop(g);
        since = Instant::now();
    }
    slot.woken.store(false, Ordering::Relaxed);
    true
}

fn exit_worker<J: Job>(shared: &Arc<Shared<J>>, mut g: MutexGuard<'_, Inner<J>>, slot: &Arc<Slot>) {
    g.threads -= 1;
    g.retired.add(&slot.counters);
    if let Some(i) = g.slots.iter().position(|s| Arc::ptr_eq(s, slot)) {
        g.slots.swap_remove(i);
    }
    shared.check(&g);
    drop(g);
    shared.exit_cv.notify_all();
}

impl<J: Job> Pool<J> {
    /// Start the pool (fixed threads, or adaptive `min` threads).
    pub fn new(cfg: PoolConfig) -> std::io::Result<Pool<J>> {
        let timer = match cfg.lazy_wake {
            Some(_) => Some(sys::timerfd()?),
            None => None,
        };
        let (min, max, adaptive) = match cfg.threads {
            Threads::Fixed(n) => (n.max(1), n.max(1), false),
            Threads::Adaptive { min, max } => (min, max.max(min).max(1), true),
        };
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                queue: VecDeque::with_capacity(cfg.queue_limit.min(PREALLOC_MAX)),
                proc_queue: VecDeque::new(),
                idle: VecDeque::with_capacity(max.min(PREALLOC_MAX)),
                waking: 0,
                peak_waking: 0,
                threads: 0,
                spawning: 0,
                shutdown: false,
                slots: Vec::new(),
                retired: Totals::default(),
                threads_started: 0,
                threads_retired: 0,
                spawn_failures: 0,
                rejected_full: 0,
                jobs_left: 0,
                overdue_kicks: 0,
                overdue: false,
                handles: Vec::new(),
                next_id: 0,
                overlaps: 0,
            }),
            exit_cv: Condvar::new(),
            max_waking: cfg.max_waking.max(1),
            min_threads: min,
            max_threads: max,
            adaptive,
            pin_warned: AtomicBool::new(false),
            sched_warned: AtomicBool::new(false),
            track_overlaps: cfg.spin_when == SpinWhen::Alone && !cfg.spin.is_zero(),
            epoch: Instant::now(),
            left_since: AtomicU64::new(0),
            timer,
            cfg,
        });
        for _ in 0..min {
            {
                let mut g = shared.lock();
                g.threads += 1;
                g.spawning += 1;
            }
            spawn_worker(&shared, false);
        }
        let pool = Pool { shared };
        let s = pool.stats();
        if s.spawn_failures > 0 && s.threads == 0 && !adaptive {
            pool.shutdown();
            return Err(std::io::Error::other(
                "rnfsd-pool: no worker thread started",
            ));
        }
        Ok(pool)
    }

    /// Queue a job. Never blocks on a worker: the cost is one lock, a push
    /// and at most one unpark (or, rarely, one thread spawn).
    pub fn submit(&self, job: J) -> Result<(), SubmitError<J>> {
        let at = Instant::now();
        let sh = &self.shared;
        let mut g = sh.lock();
        if g.shutdown {
            return Err(SubmitError::Closed(job));
        }
        if Shared::queued(&g) >= sh.cfg.queue_limit {
            g.rejected_full += 1;
            return Err(SubmitError::Full(job));
        }
        sh.note_submit(&mut g);
        g.queue.push_back(Queued { job, at });
        let k = sh.kick_or_leave(&mut g, false);
        drop(g);
        do_kick(sh, k);
        Ok(())
    }

    /// Queue a job only if nothing waits in this pool: it then starts on
    /// an idle worker, on a new one (adaptive, below the bound) or on the
    /// worker that is running when it finishes its job, with no job ahead
    /// of it. Otherwise the job is handed back, for the caller to send
    /// elsewhere. For a call that would rather run on this pool (a pinned
    /// one, on its loop's CPU) but must not queue behind its work.
    pub fn submit_if_free(&self, job: J) -> Result<(), J> {
        let sh = &self.shared;
        let mut g = sh.lock();
        if g.shutdown || g.threads == 0 || Shared::queued(&g) > 0 {
            return Err(job);
        }
        sh.note_submit(&mut g);
        g.queue.push_back(Queued {
            job,
            at: Instant::now(),
        });
        let k = sh.kick(&mut g);
        drop(g);
        do_kick(sh, k);
        Ok(())
    }

    /// Counters and gauges, summed on read.
    pub fn stats(&self) -> PoolStats {
        let g = self.shared.lock();
        // `running` below cannot underflow.
        self.shared.check(&g);
        let mut t = g.retired;
        for s in &g.slots {
            t.add(&s.counters);
        }
        PoolStats {
            threads: g.threads,
            idle: g.idle.len(),
            waking: g.waking,
            running: g.threads.saturating_sub(g.idle.len() + g.waking),
            queued: Shared::queued(&g),
            peak_waking: g.peak_waking,
            wakeups: t.wakeups,
            wakeups_no_work: t.wakeups_no_work,
            wakeups_spun: t.wakeups_spun,
            spins: t.spins,
            jobs_woken: t.jobs_woken,
            jobs_inline: t.jobs_inline,
            jobs_panicked: t.jobs_panicked,
            queue_time_ns: t.queue_time_ns,
            rejected_full: g.rejected_full,
            jobs_left: g.jobs_left,
            overdue_kicks: g.overdue_kicks,
            threads_started: g.threads_started,
            threads_retired: g.threads_retired,
            spawn_failures: g.spawn_failures,
        }
    }

    /// The configuration the pool runs with.
    pub fn config(&self) -> &PoolConfig {
        &self.shared.cfg
    }

    /// Stop accepting jobs, finish queued and in-flight ones, join every
    /// thread. Idempotent; safe to call from several threads (all return
    /// after the workers have exited). Called from one of the pool's own jobs
    /// it only stops the pool and returns without joining.
    pub fn shutdown(&self) {
        let sh = &self.shared;
        let mut g = sh.lock();
        g.shutdown = true;
        let wake: Vec<Arc<Slot>> = g.idle.drain(..).collect();
        for s in &wake {
            s.woken.store(true, Ordering::Release);
        }
        g.waking += wake.len();
        drop(g);
        for s in wake {
            s.thread.unpark();
        }
        if WORKER_OF.with(|w| w.get()) == Arc::as_ptr(sh) as usize {
            // Called from one of our own jobs (e.g. the last owner dropped on
            // a worker): waiting would deadlock; the workers exit on their own.
            tracing::warn!("rnfsd-pool: shutdown called from a worker; not joining");
            return;
        }
        let mut g = sh.lock();
        while g.threads > 0 || g.spawning > 0 {
            g = sh.exit_cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        let handles = std::mem::take(&mut g.handles);
        // Only non-empty if no worker could ever start: run them here rather
        // than drop work that was accepted.
        let mut left: Vec<Queued<J>> = g.proc_queue.drain(..).collect();
        left.extend(g.queue.drain(..));
        drop(g);
        for h in handles {
            if h.join().is_err() {
                tracing::error!("rnfsd-pool: worker thread panicked");
            }
        }
        let mut local = J::Worker::default();
        for q in left {
            let _ = catch_unwind(AssertUnwindSafe(|| q.job.run(&mut local)));
        }
        if J::idle_pending(&local) {
            J::on_idle(&mut local);
        }
    }
}

impl<J: Job> Drop for Pool<J> {
    fn drop(&mut self) {
        self.shutdown();
    }
}
