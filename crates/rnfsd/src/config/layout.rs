//! Where work runs on a host with N CPUs: event loops, their pools and
//! the blocking pool shared by all loops (docs/pool-layout.md).

use super::{lower, PoolLayout, ServerConfig};

impl ServerConfig {
    /// Event loops to run: `event_threads`, or one per CPU this process may
    /// run on when it is 0 (at most 64).
    pub fn event_loops(&self) -> usize {
        self.loops_for(allowed_cpus())
    }

    fn loops_for(&self, cpus: usize) -> usize {
        if self.event_threads > 0 {
            return self.event_threads;
        }
        cpus.clamp(1, 64)
    }

    /// Whether loops (and per-loop pools) are pinned to CPUs.
    pub fn pin(&self) -> bool {
        self.pin_for(allowed_cpus())
    }

    fn pin_for(&self, cpus: usize) -> bool {
        self.pin_loops
            .unwrap_or_else(|| cpus > 1 && self.loops_for(cpus) >= cpus)
    }

    /// Where work runs on a host with `cpus` CPUs: event loops, each loop's
    /// pool (its share of the threads), and the blocking pool shared by all
    /// loops for calls that may wait for the disk or stable storage.
    pub fn layout_for(&self, cpus: usize) -> Layout {
        let loops = self.loops_for(cpus);
        let per = match self.pools {
            PoolLayout::PerLoop => rnfsd_transport::split_pool(&lower::pool(self), loops, 0, None),
            PoolLayout::Shared => lower::pool(self),
        };
        let (min, max) = match per.threads {
            rnfsd_pool::Threads::Fixed(n) => (n, n),
            rnfsd_pool::Threads::Adaptive { min, max } => (min, max),
        };
        Layout {
            loops,
            pinned: self.pin_for(cpus),
            loop_pool_min: min,
            loop_pool_max: max,
            loop_pool_queue: per.queue_limit,
            blocking_max: self.blocking_threads,
            // What one connection can have running at once: its quick calls
            // run on its loop; its slow ones in the shared blocking pool (or,
            // without one, its loop's pool).
            slow_calls_per_conn: self
                .max_inflight_per_conn
                .min(if self.blocking_threads > 0 {
                    self.blocking_threads
                } else {
                    max
                }),
        }
    }
}

fn allowed_cpus() -> usize {
    rnfsd_pool::affinity::allowed_cpus()
        .map(|c| c.len())
        .unwrap_or(1)
}

/// The computed worker layout (see `ServerConfig::layout_for`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub loops: usize,
    pub pinned: bool,
    pub loop_pool_min: usize,
    pub loop_pool_max: usize,
    pub loop_pool_queue: usize,
    pub blocking_max: usize,
    /// Slow calls (disk, stable storage) one connection can have running.
    pub slow_calls_per_conn: usize,
}

#[cfg(test)]
mod tests {
    use crate::config::*;

    #[test]
    fn pool_layout_keys() {
        let c = Config::from_toml("[server]\npools = \"per-loop\"\npin_loops = true").unwrap();
        assert_eq!(c.server.pin_loops, Some(true));
        assert_eq!(
            (c.server.pools, c.server.pin_loops.unwrap_or(false)),
            (PoolLayout::PerLoop, true)
        );
        let d = ServerConfig::default();
        assert_eq!((d.pools, d.pin_loops), (PoolLayout::PerLoop, None));
        assert_eq!(d.event_threads, 0, "one loop per CPU by default");
        assert!(Config::from_toml("[server]\npools = \"per_loop\"").is_err());
        assert_eq!("shared".parse::<PoolLayout>().unwrap(), PoolLayout::Shared);
        assert_eq!(
            "per-loop".parse::<PoolLayout>().unwrap(),
            PoolLayout::PerLoop
        );
        assert!("perloop"
            .parse::<PoolLayout>()
            .unwrap_err()
            .0
            .contains("pools"));
    }

    /// The default layout on 2, 16, 64 and 256 CPUs: a loop per CPU (at
    /// most 64), pinned when there is a loop for every CPU; every loop's pool keeps a share of at least two
    /// workers; and whatever the split, one connection can have 64 slow
    /// calls (uncached READs, COMMITs) running at once, in the blocking pool
    /// all loops share.
    #[test]
    fn layout_holds_from_2_to_256_cpus() {
        let c = ServerConfig::default();
        let want = [
            // cpus, loops, loop pool max, loop queue
            (2, 2, 64, 512),
            (16, 16, 8, 64),
            (64, 64, 2, 16),
            (256, 64, 2, 16),
        ];
        for (cpus, loops, max, queue) in want {
            let l = c.layout_for(cpus);
            assert_eq!(l.loops, loops, "{cpus} CPUs: {l:?}");
            assert_eq!(
                (l.loop_pool_max, l.loop_pool_queue),
                (max, queue),
                "{cpus} CPUs: {l:?}"
            );
            assert_eq!(l.pinned, loops >= cpus, "{cpus} CPUs");
            assert_eq!(l.blocking_max, 64);
            assert_eq!(l.slow_calls_per_conn, 64, "{cpus} CPUs: {l:?}");
        }
        // Without the blocking pool a connection's slow calls are limited by
        // its loop's share: what the shared pool is for.
        let no_blocking = ServerConfig {
            blocking_threads: 0,
            ..ServerConfig::default()
        };
        assert_eq!(no_blocking.layout_for(64).slow_calls_per_conn, 2);
    }
}
