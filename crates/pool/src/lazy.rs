//! Lazy wake (`lazy_wake`, the one handoff of the Lustre MDS creation-rate
//! thread, docs/lessons.md): jobs left to a running
//! worker, and the timer that wakes one for those left too long.

use crate::{do_kick, sys, Inner, Job, Kick, Pool, Shared};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

impl<J: Job> Shared<J> {
    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX - 1)
    }

    /// Jobs are left from now (under the lock): note when, and arm the
    /// timer one bound ahead.
    fn mark_left(&self) {
        self.left_since.store(1 + self.now_ns(), Ordering::Release);
        if let Some(t) = &self.timer {
            let _ = sys::timerfd_set(t, self.cfg.lazy_wake);
        }
    }

    /// Nothing is left (under the lock): disarm the timer.
    fn clear_left(&self) {
        // A load first: most takes find nothing left, and write no line.
        if self.left_since.load(Ordering::Relaxed) != 0 {
            self.left_since.store(0, Ordering::Release);
            if let Some(t) = &self.timer {
                let _ = sys::timerfd_set(t, None);
            }
        }
    }

    /// Work is queued by `submit`, or remains after a worker took a job
    /// (`by_worker`). With `lazy_wake`, unless a job was left overdue:
    /// leave it to a running worker when it is the only job queued and no
    /// worker is on its way; and a worker that took a job wakes nobody for
    /// the rest (it takes them itself; `kick_overdue` wakes another if its
    /// job sleeps long). Otherwise `kick`.
    pub(crate) fn kick_or_leave(&self, g: &mut Inner<J>, by_worker: bool) -> Kick {
        if self.cfg.lazy_wake.is_some() && !g.overdue && !g.shutdown {
            let running = g.threads > g.idle.len() + g.waking;
            if by_worker || (g.waking == 0 && running && Self::queued(g) == 1) {
                g.jobs_left += 1;
                if self.left_since.load(Ordering::Relaxed) == 0 {
                    self.mark_left();
                }
                return Kick::None;
            }
        }
        self.kick(g)
    }

    /// A job was taken: once the queue is empty nothing is left waiting.
    /// Without `lazy_wake` nothing is ever left: no write at all.
    pub(crate) fn taken(&self, g: &mut Inner<J>) {
        if self.timer.is_some() && Self::queued(g) == 0 {
            g.overdue = false;
            self.clear_left();
        }
    }
}

impl<J: Job> Pool<J> {
    /// When a job left for a running worker ([`PoolConfig::lazy_wake`])
    /// becomes overdue, if one is; None otherwise (and always without
    /// `lazy_wake`). No lock: an atomic load. (The timer fires then; this
    /// is for owners and tests that keep their own time.)
    ///
    /// [`PoolConfig::lazy_wake`]: crate::PoolConfig::lazy_wake
    pub fn lazy_deadline(&self) -> Option<Instant> {
        let sh = &self.shared;
        let bound = sh.cfg.lazy_wake?;
        let since = sh.left_since.load(Ordering::Acquire);
        (since != 0).then(|| sh.epoch + Duration::from_nanos(since - 1) + bound)
    }

    /// Wake a worker for jobs left longer than `lazy_wake` (their running
    /// worker may be asleep in a long job), as far as `max_waking` and the
    /// thread bound allow; the bound starts again for what stays queued.
    /// Cheap when nothing is overdue: an atomic load.
    pub fn kick_overdue(&self) {
        let sh = &self.shared;
        let Some(bound) = sh.cfg.lazy_wake else {
            return;
        };
        let since = sh.left_since.load(Ordering::Acquire);
        if since == 0 {
            return;
        }
        let bound_ns = u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX);
        if sh.now_ns().saturating_sub(since - 1) < bound_ns {
            return;
        }
        self.wake_for_left();
    }

    /// The descriptor to poll for readable ([`PoolConfig::lazy_wake`]): it
    /// fires one bound after jobs were first left, unless they were taken
    /// first. Then call [`Pool::on_lazy_timer`]. None without `lazy_wake`.
    ///
    /// [`PoolConfig::lazy_wake`]: crate::PoolConfig::lazy_wake
    pub fn lazy_timer(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        self.shared.timer.as_ref().map(|t| t.as_raw_fd())
    }

    /// The timer fired: consume it and wake a worker for what is left.
    pub fn on_lazy_timer(&self) {
        if let Some(t) = &self.shared.timer {
            sys::timerfd_clear(t);
        }
        if self.shared.left_since.load(Ordering::Acquire) != 0 {
            self.wake_for_left();
        }
    }

    fn wake_for_left(&self) {
        let sh = &self.shared;
        let mut g = sh.lock();
        if Shared::queued(&g) == 0 {
            g.overdue = false;
            sh.clear_left();
            return;
        }
        // Until the queue empties, the woken worker wakes the next as
        // without `lazy_wake`, so a burst of slow jobs all start.
        g.overdue = true;
        let k = sh.kick(&mut g);
        g.overdue_kicks += 1;
        // What stays queued gets another bound.
        sh.mark_left();
        drop(g);
        do_kick(sh, k);
    }
}
