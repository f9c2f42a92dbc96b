//! Background reclaim: one thread per `Caches` keeps the descriptor budget
//! below its target and gives every registered cache a periodic, bounded
//! upkeep (stale entries, idle written files). Requests evict inline only
//! when a bound is actually hit.
//!
//! Wakeups: the thread sleeps on a condvar with a tick timeout and is
//! woken early only when an acquire crosses the budget's high-water mark
//! (once per crossing, see `FdBudget::try_acquire`). The tick is `TICK`
//! while ticks find work, and doubles up to `MAX_TICK` after each that
//! finds none: an idle server wakes for upkeep less than once a second, and
//! the sweeps, scaled by the time since the last tick, keep their pace.

use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use super::budget::{FdBudget, Permit};
use crate::limits::reclaim::{BATCH, MAX_BATCHES, MAX_TICK, TICK};

/// A cache the reclaimer looks after.
pub trait Reclaim: Send + Sync {
    /// Frees up to `max` unused entries that hold descriptors; returns how
    /// many were freed. Bounded work under any lock; values dropped after.
    fn reclaim(&self, max: usize) -> usize;
    /// Periodic upkeep, bounded in work: drop entries of deleted objects,
    /// close idle files, keep the cache's own bound's margin. `elapsed`:
    /// the time since the last tick (sweeps scale by it). Returns whether
    /// it found anything to do.
    fn tick(&self, elapsed: Duration) -> bool;
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
    /// limit `own` first frees a batch of its unused entries, except
    /// `on_loop` (an event loop running a call, `crate::inline`), which
    /// closes nothing (see `Lru::insert`). None: the descriptor is used
    /// once.
    pub fn acquire_for(&self, own: &dyn Reclaim, on_loop: bool) -> Option<Permit> {
        if let Some(p) = self.acquire() {
            return Some(p);
        }
        if on_loop {
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
    let mut wait = TICK;
    let mut last = Instant::now();
    loop {
        let (caches, kicked): (Vec<Arc<dyn Reclaim>>, bool) = {
            let mut g = s.state.lock().unwrap_or_else(|e| e.into_inner());
            if !g.kicked && !g.stop {
                g =
                    s.cv.wait_timeout(g, wait)
                        .map(|(g, _)| g)
                        .unwrap_or_else(|e| e.into_inner().0);
            }
            if g.stop {
                return;
            }
            let kicked = std::mem::take(&mut g.kicked);
            g.caches.retain(|w| w.strong_count() > 0);
            (g.caches.iter().filter_map(Weak::upgrade).collect(), kicked)
        };
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(last);
        last = now;
        let mut busy = kicked;
        for c in &caches {
            busy |= c.tick(elapsed);
        }
        busy |= s.budget.used() > s.budget.target();
        wait = next_wait(wait, busy);
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

/// The next upkeep period: `TICK` after a tick with work, else twice the
/// last, up to `MAX_TICK`.
fn next_wait(last: Duration, busy: bool) -> Duration {
    if busy {
        TICK
    } else {
        (last * 2).min(MAX_TICK)
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
        /// What its ticks say they found.
        busy: std::sync::atomic::AtomicBool,
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
        fn tick(&self, _elapsed: Duration) -> bool {
            self.ticks.fetch_add(1, Ordering::Relaxed);
            self.busy.load(Ordering::Relaxed)
        }
    }

    /// A fake cache registered with `c`, its ticks finding nothing.
    fn registered(c: &Caches) -> Arc<Fake> {
        let f = Arc::new(Fake {
            held: Mutex::new(Vec::new()),
            ticks: AtomicUsize::new(0),
            busy: false.into(),
        });
        let w: Weak<dyn Reclaim> = Arc::downgrade(&(f.clone() as Arc<dyn Reclaim>));
        c.register(w);
        f
    }

    #[test]
    fn reclaimer_keeps_the_margin_and_ticks() {
        let c = Caches::new(100);
        let f = registered(&c);
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

    #[test]
    fn upkeep_backs_off_while_it_finds_nothing_and_not_while_it_does() {
        assert_eq!(next_wait(TICK, true), TICK);
        assert_eq!(next_wait(MAX_TICK, true), TICK);
        assert_eq!(next_wait(TICK, false), TICK * 2);
        assert_eq!(next_wait(MAX_TICK, false), MAX_TICK);
        let c = Caches::new(100);
        let f = registered(&c);
        // Idle: 100 + 200 + 400 + 800 + 1600 ms, about 5 ticks in 3.5 s
        // (35 at a fixed 100 ms).
        std::thread::sleep(Duration::from_millis(3500));
        let idle = f.ticks.swap(0, Ordering::Relaxed);
        assert!((1..=10).contains(&idle), "{idle} idle ticks");
        // Work found: back to every 100 ms (a kick ends the long wait).
        f.busy.store(true, Ordering::Relaxed);
        c.kick();
        std::thread::sleep(Duration::from_millis(2000));
        let busy = f.ticks.load(Ordering::Relaxed);
        assert!(busy >= 10, "{busy} ticks with work in 2 s");
    }
}
