//! Background reclaim: one thread per `Caches` keeps the descriptor budget
//! below its target and gives every registered cache a periodic, bounded
//! upkeep (stale entries, idle written files). Requests evict inline only
//! when a bound is actually hit.
//!
//! Wakeups: the thread sleeps on a condvar with a tick timeout and is
//! woken early only when an acquire crosses the budget's high-water mark
//! (once per crossing, see `FdBudget::try_acquire`).

use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

use super::budget::{FdBudget, Permit};

/// Upkeep period.
const TICK: Duration = Duration::from_millis(100);
/// Entries one `reclaim` call frees at most (one shard lock each time).
pub const BATCH: usize = 32;
/// Batches per tick at most, so one tick's work is bounded too.
const MAX_BATCHES: usize = 1024;

/// A cache the reclaimer looks after.
pub trait Reclaim: Send + Sync {
    /// Frees up to `max` unused entries that hold descriptors; returns how
    /// many were freed. Bounded work under any lock; values dropped after.
    fn reclaim(&self, max: usize) -> usize;
    /// Periodic upkeep, bounded in work: drop entries of deleted objects,
    /// close idle files, keep the cache's own bound's margin.
    fn tick(&self);
}

struct Shared {
    budget: Arc<FdBudget>,
    state: Mutex<State>,
    cv: Condvar,
}

struct State {
    caches: Vec<Weak<dyn Reclaim>>,
    kicked: bool,
    stop: bool,
}

/// The descriptor budget and the reclaimer thread, shared by every export.
pub struct Caches {
    shared: Arc<Shared>,
}

impl Caches {
    /// A budget of `fd_limit` descriptors and its reclaimer thread.
    pub fn new(fd_limit: usize) -> Arc<Caches> {
        let shared = Arc::new(Shared {
            budget: FdBudget::new(fd_limit.max(1)),
            state: Mutex::new(State {
                caches: Vec::new(),
                kicked: false,
                stop: false,
            }),
            cv: Condvar::new(),
        });
        let s = shared.clone();
        // If the thread cannot start, reclaim happens inline only (the
        // bounds still hold): log-worthy, not fatal.
        let _ = std::thread::Builder::new()
            .name("rnfsd-reclaim".into())
            .spawn(move || run(&s));
        Arc::new(Caches { shared })
    }

    pub fn budget(&self) -> &Arc<FdBudget> {
        &self.shared.budget
    }

    /// A descriptor permit; wakes the reclaimer when the acquire crossed the
    /// high-water mark. None at the limit.
    pub fn acquire(&self) -> Option<Permit> {
        let (p, crossed) = self.shared.budget.try_acquire();
        if crossed {
            self.kick();
        }
        p
    }

    /// A permit for a descriptor `own` is about to cache: at the budget's
    /// limit `own` first frees a batch of its unused entries, except on an
    /// event loop (`crate::inline`), which closes nothing (see
    /// `Lru::insert`). None: the descriptor is used once.
    pub fn acquire_for(&self, own: &dyn Reclaim) -> Option<Permit> {
        if let Some(p) = self.acquire() {
            return Some(p);
        }
        if crate::inline::on_loop() {
            return None;
        }
        own.reclaim(BATCH);
        self.acquire()
    }

    pub fn register(&self, c: Weak<dyn Reclaim>) {
        self.lock().caches.push(c);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the reclaimer now (it also runs every tick).
    pub fn kick(&self) {
        let mut g = self.lock();
        if !g.kicked {
            g.kicked = true;
            self.shared.cv.notify_one();
        }
    }
}

impl Drop for Caches {
    fn drop(&mut self) {
        self.lock().stop = true;
        self.shared.cv.notify_one();
    }
}

fn run(s: &Shared) {
    loop {
        let caches: Vec<Arc<dyn Reclaim>> = {
            let mut g = s.state.lock().unwrap_or_else(|e| e.into_inner());
            if !g.kicked && !g.stop {
                g =
                    s.cv.wait_timeout(g, TICK)
                        .map(|(g, _)| g)
                        .unwrap_or_else(|e| e.into_inner().0);
            }
            if g.stop {
                return;
            }
            g.kicked = false;
            g.caches.retain(|w| w.strong_count() > 0);
            g.caches.iter().filter_map(Weak::upgrade).collect()
        };
        for c in &caches {
            c.tick();
        }
        let b = &s.budget;
        let mut batches = 0;
        // Free down to the target, not past it: whatever is freed below it
        // lets misses in unfiltered (admission treats the caches as full
        // only from the target up), each a later insert and eviction.
        // The cache asked first rotates, so none pays for all.
        'reclaim: while batches < MAX_BATCHES && !caches.is_empty() {
            let mut freed = 0;
            for k in 0..caches.len() {
                let excess = b.used().saturating_sub(b.target());
                if excess == 0 {
                    break 'reclaim;
                }
                let c = &caches[(batches + k) % caches.len()];
                freed += c.reclaim(BATCH.min(excess));
            }
            batches += caches.len();
            if freed == 0 {
                break;
            }
        }
        b.relieved();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A cache of `n` permits that gives them back on reclaim.
    struct Fake {
        held: Mutex<Vec<Permit>>,
        ticks: AtomicUsize,
    }

    impl Reclaim for Fake {
        fn reclaim(&self, max: usize) -> usize {
            let mut h = self.held.lock().unwrap();
            let n = max.min(h.len());
            let out: Vec<Permit> = h.drain(..n).collect();
            drop(h);
            drop(out);
            n
        }
        fn tick(&self) {
            self.ticks.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn reclaimer_keeps_the_margin_and_ticks() {
        let c = Caches::new(100);
        let f = Arc::new(Fake {
            held: Mutex::new(Vec::new()),
            ticks: AtomicUsize::new(0),
        });
        let w: Weak<dyn Reclaim> = Arc::downgrade(&(f.clone() as Arc<dyn Reclaim>));
        c.register(w);
        // Held here, out of the reclaimer's reach, until the limit is
        // checked: it runs as soon as the high-water mark is crossed.
        let mine: Vec<Permit> = (0..100)
            .map(|_| c.acquire().expect("under the limit"))
            .collect();
        assert!(c.acquire().is_none(), "the limit is hard");
        f.held.lock().unwrap().extend(mine);
        c.kick();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while c.budget().used() > c.budget().target() {
            assert!(std::time::Instant::now() < deadline, "reclaimer never ran");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(c.budget().used() >= c.budget().target() - BATCH);
        while f.ticks.load(Ordering::Relaxed) == 0 {
            assert!(std::time::Instant::now() < deadline, "no tick");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
