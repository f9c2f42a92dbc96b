//! Starting a transport, and the handle that stops it and reads its
//! counters.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::shared::{LoopNotify, Shared, DRAINING, FINAL};
use crate::stats::TransportStats;
use crate::{event_loop, PoolConfig, PoolStats, Service, TransportConfig};

/// Entry point: `Transport::start(...)`.
pub struct Transport;

impl Transport {
    /// Bind, start the worker pool and the event loops, and serve until
    /// [`Handle::shutdown`].
    pub fn start(
        cfg: TransportConfig,
        pool: PoolConfig,
        service: Arc<dyn Service>,
    ) -> io::Result<Handle> {
        match event_loop::start(cfg, pool, service) {
            Ok(s) => Ok(Handle::of(s)),
            Err((e, started)) => {
                // Stop what started; the handle's shutdown does it all.
                if let Some(s) = started {
                    Handle::of(s).shutdown();
                }
                Err(e)
            }
        }
    }
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum State {
    Running,
    Stopping,
    Done,
}

struct HandleInner {
    shared: Arc<Shared>,
    /// One pool (`Shared`) or one per loop (`PerLoop`).
    pools: Vec<Arc<rnfsd_pool::Pool<crate::work::Work>>>,
    addrs: Vec<SocketAddr>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    state: Mutex<State>,
    state_cv: Condvar,
}

/// A running transport. Cheap to clone; all clones control the same
/// transport. Dropping the last clone shuts it down.
#[derive(Clone)]
pub struct Handle {
    inner: Arc<HandleInner>,
}

impl Handle {
    fn of(s: event_loop::Started) -> Handle {
        Handle {
            inner: Arc::new(HandleInner {
                shared: s.shared,
                pools: s.pools,
                addrs: s.addrs,
                threads: Mutex::new(s.threads),
                state: Mutex::new(State::Running),
                state_cv: Condvar::new(),
            }),
        }
    }

    /// The bound listening addresses (useful with port 0).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.inner.addrs.clone()
    }

    /// Stop accepting and reading, finish every request already handed to
    /// the pool, flush replies (up to `shutdown_timeout`), close all
    /// connections and join all threads. Idempotent; concurrent callers all
    /// return when it is done. Must not be called from a `Service::call`.
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }

    /// Block until the transport has shut down (someone called `shutdown`).
    pub fn wait(&self) {
        let mut st = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        while *st != State::Done {
            st = self
                .inner
                .state_cv
                .wait(st)
                .unwrap_or_else(|e| e.into_inner());
        }
    }

    pub fn stats(&self) -> TransportStats {
        let sh = &self.inner.shared;
        let mut t = TransportStats {
            connections_open: sh.open.load(Ordering::Relaxed) as u64,
            replies_out: sh.stats.replies_out.sum(),
            writes_out: sh.stats.writes_out.sum(),
            bytes_out: sh.stats.bytes_out.sum(),
            reply_bytes_queued: sh
                .stats
                .queued_in
                .sum()
                .saturating_sub(sh.stats.queued_out.sum()),
            buffered_bytes: sh.stats.buffered(),
            budget_clients_closed: sh.clients.hogs_closed.load(Ordering::Relaxed),
            back_calls_out: sh.stats.back_calls_out.sum(),
            ..Default::default()
        };
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        for l in &sh.loop_stats {
            t.connections_accepted += r(&l.accepted);
            t.connections_refused += r(&l.refused);
            t.connections_evicted += r(&l.evicted);
            t.connections_closed += r(&l.closed);
            t.records_in += r(&l.records_in);
            t.records_too_big += r(&l.too_big);
            t.bytes_in += r(&l.bytes_in);
            t.records_inline += r(&l.inline);
            t.records_deferred += r(&l.deferred);
            t.back_replies_in += r(&l.back_replies_in);
        }
        t
    }

    /// Worker pool counters, summed over the pools (see [`PoolStats::add`]).
    pub fn pool_stats(&self) -> PoolStats {
        let mut t = PoolStats::default();
        for p in &self.inner.pools {
            t.add(&p.stats());
        }
        t
    }

    /// Each pool's counters: one entry (`Shared`) or one per loop.
    pub fn pool_stats_each(&self) -> Vec<PoolStats> {
        self.inner.pools.iter().map(|p| p.stats()).collect()
    }
}

impl HandleInner {
    fn shutdown(&self) {
        {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            match *st {
                State::Done => return,
                State::Stopping => {
                    while *st != State::Done {
                        st = self.state_cv.wait(st).unwrap_or_else(|e| e.into_inner());
                    }
                    return;
                }
                State::Running => *st = State::Stopping,
            }
        }
        let sh = &self.shared;
        sh.phase.store(DRAINING, Ordering::SeqCst);
        sh.loops.iter().for_each(LoopNotify::wake);
        // Wait until no loop submits any more (bounded: a loop answers
        // within one iteration).
        {
            let mut n = sh.drained.lock().unwrap_or_else(|e| e.into_inner());
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while *n < sh.loops.len() {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    tracing::error!("event loops did not stop reading in 5 s");
                    break;
                }
                n = sh
                    .drained_cv
                    .wait_timeout(n, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
        // Finish every queued and running request; replies go out or queue.
        for p in &self.pools {
            p.shutdown();
        }
        sh.phase.store(FINAL, Ordering::SeqCst);
        sh.loops.iter().for_each(LoopNotify::wake);
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for t in threads {
            if t.join().is_err() {
                tracing::error!("event loop thread panicked");
            }
        }
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = State::Done;
        self.state_cv.notify_all();
    }
}

impl Drop for HandleInner {
    fn drop(&mut self) {
        self.shutdown();
    }
}
