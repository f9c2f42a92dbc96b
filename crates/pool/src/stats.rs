//! Pool counters: the public snapshot ([`PoolStats`]) and the per-worker
//! cells it is summed from.

use std::sync::atomic::{AtomicU64, Ordering};

/// Pool counters, summed on read. Gauges are read under the queue lock, so
/// they are consistent with each other; event counts may lag by in-flight
/// increments.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Live worker threads (including ones being started).
    pub threads: usize,
    /// Workers parked on the idle stack.
    pub idle: usize,
    /// Workers woken (or started) but not yet running.
    pub waking: usize,
    /// Workers neither idle nor waking: running jobs or about to.
    pub running: usize,
    /// Jobs queued, not yet taken.
    pub queued: usize,
    /// Highest `waking` ever seen (excluding shutdown and `Handoff::Double`'s
    /// second wakeup): the instrument for the `max_waking` bound.
    pub peak_waking: usize,
    /// Wakeups observed by workers (each woken or started worker counts 1).
    pub wakeups: u64,
    /// Wakeups that found no work (someone else took it).
    pub wakeups_no_work: u64,
    /// Wakeups that found the worker still spinning
    /// ([`PoolConfig::spin`]): no futex wake, no sleeping CPU woken.
    ///
    /// [`PoolConfig::spin`]: crate::PoolConfig::spin
    pub wakeups_spun: u64,
    /// Spins begun by a worker going idle ([`PoolConfig::spin_when`]),
    /// whether a job came during it or not.
    ///
    /// [`PoolConfig::spin_when`]: crate::PoolConfig::spin_when
    pub spins: u64,
    /// Jobs taken by a worker right after a wakeup.
    pub jobs_woken: u64,
    /// Jobs taken by an already-running worker, with no wakeup.
    pub jobs_inline: u64,
    /// Jobs that panicked (the worker survives).
    pub jobs_panicked: u64,
    /// Total time jobs spent queued, in ns.
    pub queue_time_ns: u64,
    /// Submissions refused because the queue was full.
    pub rejected_full: u64,
    /// Jobs left to a running worker ([`PoolConfig::lazy_wake`]).
    ///
    /// [`PoolConfig::lazy_wake`]: crate::PoolConfig::lazy_wake
    pub jobs_left: u64,
    /// Wakeups for a job left longer than the bound ([`Pool::kick_overdue`]).
    ///
    /// [`Pool::kick_overdue`]: crate::Pool::kick_overdue
    pub overdue_kicks: u64,
    pub threads_started: u64,
    pub threads_retired: u64,
    pub spawn_failures: u64,
}

impl PoolStats {
    /// All jobs taken for running.
    pub fn jobs_run(&self) -> u64 {
        self.jobs_woken + self.jobs_inline
    }

    /// Fold in another pool's stats (several pools serving one transport):
    /// gauges and counts add; `peak_waking` takes the maximum, since the
    /// `max_waking` bound it checks is per pool.
    pub fn add(&mut self, o: &PoolStats) {
        self.threads += o.threads;
        self.idle += o.idle;
        self.waking += o.waking;
        self.running += o.running;
        self.queued += o.queued;
        self.peak_waking = self.peak_waking.max(o.peak_waking);
        self.wakeups += o.wakeups;
        self.wakeups_no_work += o.wakeups_no_work;
        self.wakeups_spun += o.wakeups_spun;
        self.spins += o.spins;
        self.jobs_woken += o.jobs_woken;
        self.jobs_inline += o.jobs_inline;
        self.jobs_panicked += o.jobs_panicked;
        self.queue_time_ns += o.queue_time_ns;
        self.rejected_full += o.rejected_full;
        self.jobs_left += o.jobs_left;
        self.overdue_kicks += o.overdue_kicks;
        self.threads_started += o.threads_started;
        self.threads_retired += o.threads_retired;
        self.spawn_failures += o.spawn_failures;
    }
}

/// A worker's own counters: written only by that worker (plain load+store,
/// no locked instruction), read by `stats`.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) wakeups: AtomicU64,
    pub(crate) wakeups_no_work: AtomicU64,
    pub(crate) wakeups_spun: AtomicU64,
    pub(crate) spins: AtomicU64,
    pub(crate) jobs_woken: AtomicU64,
    pub(crate) jobs_inline: AtomicU64,
    pub(crate) jobs_panicked: AtomicU64,
    pub(crate) queue_time_ns: AtomicU64,
}

#[derive(Default, Clone, Copy)]
pub(crate) struct Totals {
    pub(crate) wakeups: u64,
    pub(crate) wakeups_no_work: u64,
    pub(crate) wakeups_spun: u64,
    pub(crate) spins: u64,
    pub(crate) jobs_woken: u64,
    pub(crate) jobs_inline: u64,
    pub(crate) jobs_panicked: u64,
    pub(crate) queue_time_ns: u64,
}

impl Totals {
    pub(crate) fn add(&mut self, c: &Counters) {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        self.wakeups += r(&c.wakeups);
        self.wakeups_no_work += r(&c.wakeups_no_work);
        self.wakeups_spun += r(&c.wakeups_spun);
        self.spins += r(&c.spins);
        self.jobs_woken += r(&c.jobs_woken);
        self.jobs_inline += r(&c.jobs_inline);
        self.jobs_panicked += r(&c.jobs_panicked);
        self.queue_time_ns += r(&c.queue_time_ns);
    }
}
