//! The descriptor budget shared by every cache of every export: a hard
//! bound on descriptors held by caches, kept well below RLIMIT_NOFILE so
//! connections and per-call opens always have room.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::limits::margin::{HIGH_WATER, TARGET};

pub struct FdBudget {
    limit: usize,
    used: AtomicUsize,
    /// Set when `used` crossed the high-water mark and the reclaimer has not
    /// yet run: one wakeup per crossing, not one per acquire.
    pressed: AtomicBool,
}

/// One descriptor of the budget, given back when dropped.
pub struct Permit(Arc<FdBudget>);

impl Drop for Permit {
    fn drop(&mut self) {
        let was = self.0.used.fetch_sub(1, Ordering::Relaxed);
        // Each permit was counted once, under the limit (`try_acquire`).
        debug_assert!(
            (1..=self.0.limit).contains(&was),
            "{was} descriptors held at a permit's drop"
        );
    }
}

impl FdBudget {
    pub fn new(limit: usize) -> Arc<FdBudget> {
        Arc::new(FdBudget {
            limit,
            used: AtomicUsize::new(0),
            pressed: AtomicBool::new(false),
        })
    }

    /// A permit, or None at the limit. Returns whether this acquire crossed
    /// the high-water mark (the caller then wakes the reclaimer).
    pub fn try_acquire(self: &Arc<Self>) -> (Option<Permit>, bool) {
        // A compare-and-swap, not add-then-undo: `used` never reads above
        // the limit, even for a moment.
        let r = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.limit).then_some(n + 1)
            });
        match r {
            Ok(n) => {
                let crossed =
                    n + 1 > self.high_water() && !self.pressed.swap(true, Ordering::Relaxed);
                (Some(Permit(self.clone())), crossed)
            }
            Err(_) => (None, !self.pressed.swap(true, Ordering::Relaxed)),
        }
    }

    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Above this the reclaimer is woken (1/64 below the limit).
    pub fn high_water(&self) -> usize {
        self.limit - self.limit / HIGH_WATER
    }

    /// The reclaimer frees down to this (1/32 below the limit), leaving
    /// room for misses to insert without evicting inline; a narrow margin,
    /// since every entry freed early may be a miss later.
    pub fn target(&self) -> usize {
        self.limit - self.limit / TARGET
    }

    /// At or above the reclaimer's target: the caches sharing the budget
    /// are full, whatever their own bounds say (admission asks this).
    pub fn full(&self) -> bool {
        self.used() >= self.target()
    }

    /// The reclaimer ran: the next crossing wakes it again.
    pub fn relieved(&self) {
        self.pressed.store(false, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hard_limit_and_one_wakeup_per_crossing() {
        let b = FdBudget::new(20);
        let mut held = Vec::new();
        let mut wakes = 0;
        for _ in 0..25 {
            let (p, crossed) = b.try_acquire();
            wakes += usize::from(crossed);
            if let Some(p) = p {
                held.push(p);
            }
        }
        assert_eq!(held.len(), 20);
        assert_eq!(b.used(), 20);
        assert_eq!(wakes, 1, "one wakeup until the reclaimer ran");
        held.truncate(10);
        assert_eq!(b.used(), 10);
        b.relieved();
        for _ in 0..10 {
            let (p, _) = b.try_acquire();
            held.push(p.unwrap());
        }
        assert_eq!(b.used(), 20);
    }
}
