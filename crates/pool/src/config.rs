//! Pool configuration: thread counts, wake order, handoff, bounds, and the
//! error a refused submit hands back.

use std::time::Duration;

/// `max_waking` value meaning "no bound": wake an idle worker for every
/// submitted job (experiment switch; the pre-SVC_MAX_WAKING behaviour).
pub const UNLIMITED: usize = usize::MAX;

/// How many worker threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threads {
    /// Exactly this many (at least 1), started up front, never retired.
    Fixed(usize),
    /// Start `min` (may be 0); grow one at a time to `max` (at least 1) when
    /// work waits and nobody is idle; retire idle ones down to `min`.
    Adaptive { min: usize, max: usize },
}

/// Which idle worker to wake (experiment switch; `Lifo` is the design).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WakeOrder {
    /// Most recently idle first: its stack and caches are still hot.
    Lifo,
    /// Longest idle first (what a FIFO wait queue does; what the Lustre MDS
    /// thread measured against).
    Fifo,
}

/// How a job reaches the thread that runs it (experiment switch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handoff {
    /// The woken worker runs the job: at most one wakeup per job.
    Direct,
    /// The naive two-step: a woken "receiver" moves the job from the
    /// incoming queue to a processing queue and wakes ANOTHER idle worker
    /// (unconditionally, ignoring `max_waking`), then loops and may well run
    /// the job itself, so the second wakeup often finds nothing. Exists only
    /// so a benchmark can show what it costs.
    Double,
}

/// When the last worker to go idle spins ([`PoolConfig::spin`]) before it
/// parks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpinWhen {
    /// Never (as a zero `spin`).
    Never,
    /// Only while calls come one at a time: of the last
    /// [`SPIN_HISTORY`](crate::limits::SPIN_HISTORY) submitted jobs at most
    /// [`SPIN_OVERLAPS_MAX`](crate::limits::SPIN_OVERLAPS_MAX) found a job
    /// queued or a worker busy. Where calls overlap, the CPU a spinner
    /// burns is what the running workers and event loops need, and the
    /// next job mostly goes to a running worker anyway. The spinner also
    /// yields its CPU every few turns to any thread runnable there (a
    /// pinned pool's event loop, busy with calls it answers itself, which
    /// this pool never sees).
    Alone,
    /// Whenever it is the last to go idle, spinning without yielding.
    Always,
}

/// Pool configuration. `Default` is the production setting.
#[derive(Clone, Debug)]
pub struct PoolConfig {
    /// Default `Adaptive { min: 2, max: 128 }` (128 = the knfsd thread count
    /// of the SVC_MAX_WAKING thread; threads block on disk I/O, so more than
    /// cores).
    pub threads: Threads,
    /// Adaptive only: retire a worker idle this long. Default 30 s.
    pub idle_timeout: Duration,
    /// Bound on queued (not yet taken) jobs. Default 1024.
    pub queue_limit: usize,
    /// Bound on woken-but-not-yet-running workers (0 is taken as 1);
    /// [`UNLIMITED`] for the experiment. Default 1.
    pub max_waking: usize,
    /// Default `Lifo`.
    pub wake_order: WakeOrder,
    /// Default `Direct`.
    pub handoff: Handoff,
    /// Thread name prefix. Default "rnfsd-worker".
    pub name: String,
    /// Worker stack size; `None` = the std default (2 MiB).
    pub stack_size: Option<usize>,
    /// Pin every worker to this CPU (kernel CPU number) when it starts; a
    /// failure is logged once and the worker runs unpinned. Default `None`.
    pub cpu: Option<usize>,
    /// Every worker's nice value (-20 to 19), set when it starts; `None`
    /// leaves the process's. A higher value lets the scheduler favour
    /// other threads (the event loops) when CPUs are short. A failure (a
    /// lower value without CAP_SYS_NICE) is logged once. Default `None`.
    pub nice: Option<i32>,
    /// Every worker runs under SCHED_BATCH ([`sched`]): its wakeup does not
    /// preempt a running thread. Threads a worker starts inherit it (a
    /// handle walk begun by a miss it resolves, for one). A failure is
    /// logged once. Default false.
    ///
    /// [`sched`]: crate::sched
    pub sched_batch: bool,
    /// The Lustre MDS thread's one handoff: a job queued alone while a worker runs is
    /// left to that worker, which takes it when its job ends, instead of
    /// waking an idle one; and a worker that takes a job wakes nobody for
    /// those queued behind it. Jobs left so for longer than this get a
    /// worker woken (then the woken worker wakes the next, until the queue
    /// empties): the owner polls [`Pool::lazy_timer`] and calls
    /// [`Pool::on_lazy_timer`] when it fires (the transport's first event
    /// loop does), and may call [`Pool::kick_overdue`] whenever it is
    /// awake anyway. A running job that sleeps long holds those behind it
    /// this long at most. `None`: every job wakes a worker at once (as far
    /// as `max_waking` allows). Default `None`.
    ///
    /// [`Pool::lazy_timer`]: crate::Pool::lazy_timer
    /// [`Pool::on_lazy_timer`]: crate::Pool::on_lazy_timer
    /// [`Pool::kick_overdue`]: crate::Pool::kick_overdue
    pub lazy_wake: Option<Duration>,
    /// The last worker to go idle (none other running) spins this long
    /// (checking for a handoff, never the queue's lock) before it parks:
    /// a job handed to it meanwhile costs no futex wake and, on a virtual
    /// machine, no halted vCPU to wake (tens of microseconds each with one
    /// call in flight). Zero: park at once. Default zero.
    pub spin: Duration,
    /// When `spin` applies. Default [`SpinWhen::Alone`].
    pub spin_when: SpinWhen,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            threads: Threads::Adaptive { min: 2, max: 128 },
            idle_timeout: Duration::from_secs(30),
            queue_limit: 1024,
            max_waking: 1,
            wake_order: WakeOrder::Lifo,
            handoff: Handoff::Direct,
            name: "rnfsd-worker".into(),
            stack_size: None,
            cpu: None,
            nice: None,
            sched_batch: false,
            lazy_wake: None,
            spin: Duration::ZERO,
            spin_when: SpinWhen::Alone,
        }
    }
}

/// Why [`Pool::submit`] refused a job; the job comes back.
///
/// [`Pool::submit`]: crate::Pool::submit
#[derive(Debug)]
pub enum SubmitError<J> {
    /// `queue_limit` jobs already wait: retry later (backpressure).
    Full(J),
    /// The pool is shutting down.
    Closed(J),
}

impl<J> SubmitError<J> {
    pub fn into_job(self) -> J {
        match self {
            SubmitError::Full(j) | SubmitError::Closed(j) => j,
        }
    }
}
