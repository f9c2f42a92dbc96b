//! Per-core counters: one cache-line-padded cell per CPU, summed on read, so
//! a counter bumped on every call never bounces one shared line between
//! cores (knfsd's per-CPU procedure counters: +24% call rate from exactly
//! this; docs/lessons.md).

use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::limits::MAX_CELLS;

/// CPUs configured (not just online or in our affinity mask or cgroup
/// quota): `sched_getcpu` may name any of them, so per-CPU cells are sized
/// by this, not by `available_parallelism`.
pub fn configured_cpus() -> usize {
    crate::sys::nprocessors_conf()
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The CPU the calling thread runs on (`sched_getcpu`, a vDSO call), 0 when
/// that fails.
#[inline]
pub fn current_cpu() -> usize {
    crate::sys::sched_getcpu().unwrap_or(0)
}

/// Single-writer increment: a load and a store, no locked instruction.
/// Only for a counter that one thread writes (others may read it).
#[inline]
pub fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// A `u64` event counter striped over per-CPU cells.
///
/// `add` picks the cell of the CPU the caller runs on (`sched_getcpu`, a vDSO
/// call); two threads on one CPU share a cell, which costs nothing since they
/// do not run at the same time. `sum` reads every cell: it is for stats, not
/// for the hot path.
pub struct StripedCounter {
    cells: Box<[CachePadded<AtomicU64>]>,
}

impl Default for StripedCounter {
    fn default() -> Self {
        Self::new()
    }
}

impl StripedCounter {
    pub fn new() -> Self {
        let n = configured_cpus().clamp(1, MAX_CELLS).next_power_of_two();
        let cells = (0..n)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect();
        StripedCounter { cells }
    }

    #[inline]
    fn cell(&self) -> &AtomicU64 {
        let i = current_cpu();
        // `cells.len()` is a power of two ≥ 1, so the mask is in bounds.
        &self.cells[i & (self.cells.len() - 1)]
    }

    /// Add `n` (relaxed: counters order nothing).
    #[inline]
    pub fn add(&self, n: u64) {
        self.cell().fetch_add(n, Ordering::Relaxed);
    }

    /// Sum of all cells. Not a snapshot: concurrent adds may or may not count.
    pub fn sum(&self) -> u64 {
        self.cells
            .iter()
            .fold(0u64, |a, c| a.wrapping_add(c.load(Ordering::Relaxed)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn sums_across_threads() {
        let c = Arc::new(StripedCounter::new());
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        c.add(1);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        c.add(5);
        assert_eq!(c.sum(), 40_005);
    }
}
