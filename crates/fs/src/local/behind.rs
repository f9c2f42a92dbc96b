//! Write-behind: once a writer holds `write_behind_bytes` of UNSTABLE data
//! not yet handed to the disk, the file's writeback is started
//! (`sync_file_range(SYNC_FILE_RANGE_WRITE)`, which waits for no I/O) by a
//! background thread, or by the event loop that ran the write, at the end
//! of its turn (`OnLoop`). The COMMIT that ends a large transfer then finds
//! most of it written instead of flushing all of it while its client
//! waits, and the disk works while the data still arrives.
//!
//! Durability does not depend on it: COMMIT still syncs, and starting
//! writeback consumes no writeback error (only a wait does), so the
//! COMMIT's fsync still reports one and resets the verifier (files.rs).
//!
//! Bounds: only a cached writer (one holding a descriptor permit) is
//! queued, and at most once at a time (`OpenFile::gather_behind`), so the
//! queue never holds more writers than the descriptor budget has permits;
//! a queued writer keeps its descriptor, and its permit, until the thread
//! is done with it; a loop's turn leaves at most
//! `crate::limits::inline::AFTER_TURN_MAX` writebacks for its end. Handing a
//! writer over is an atomic add and, past the threshold (once per
//! `write_behind_bytes`), one boxed job pushed to the loop's list or the
//! thread's queue (with one wakeup of the thread): never a wait, so an
//! event loop may do it.

use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use super::files::OpenFile;
use super::sys;
use crate::inline::{Loop, TurnJob};
use crate::Call;

struct State {
    jobs: VecDeque<Arc<OpenFile>>,
    stop: bool,
}

struct Shared {
    state: Mutex<State>,
    cv: Condvar,
    /// Writebacks started so far; of them, by event loops.
    started: AtomicU64,
    on_loop: AtomicU64,
}

pub(super) struct WriteBehind {
    /// Bytes a writer gathers before its writeback starts (0: never).
    threshold: u64,
    s: Arc<Shared>,
}

impl WriteBehind {
    pub fn new(threshold: u64) -> Arc<WriteBehind> {
        let s = Arc::new(Shared {
            state: Mutex::new(State {
                jobs: VecDeque::new(),
                stop: false,
            }),
            cv: Condvar::new(),
            started: AtomicU64::new(0),
            on_loop: AtomicU64::new(0),
        });
        if threshold > 0 {
            let t = s.clone();
            // Without the thread nothing is queued past what it would have
            // taken; COMMIT flushes everything as before.
            let spawned = std::thread::Builder::new()
                .name("rnfsd-behind".into())
                .spawn(move || run(&t));
            if spawned.is_err() {
                tracing::warn!("write-behind thread did not start: COMMIT flushes all");
                return Arc::new(WriteBehind { threshold: 0, s });
            }
        }
        Arc::new(WriteBehind { threshold, s })
    }

    /// `f` wrote `n` bytes UNSTABLE: queued for writeback once it has
    /// gathered the threshold since it was last queued. A write made on an
    /// event loop leaves the writeback for the end of the loop's turn
    /// (`Call::after_turn`), where the loop starts it itself once
    /// the reply is sent, instead of waking this thread: one context switch
    /// fewer per threshold's worth of data. A loop whose writebacks have
    /// been sleeping, or whose turn has its fill, queues it here.
    pub fn wrote(&self, call: &Call<'_>, f: &Arc<OpenFile>, n: u64) {
        if self.threshold == 0 || !f.gather_behind(n, self.threshold) {
            return;
        }
        // Left for the loop's turn end where that may be, else handed
        // off at once (`OnLoop::hand_off`: this thread's queue).
        call.after_turn(Box::new(OnLoop {
            f: Some(f.clone()),
            s: self.s.clone(),
        }));
    }

    /// Writebacks started so far.
    pub fn started(&self) -> u64 {
        self.s.started.load(Ordering::Relaxed)
    }

    /// Of them, started by event loops.
    pub fn started_on_loop(&self) -> u64 {
        self.s.on_loop.load(Ordering::Relaxed)
    }
}

/// Queues `f` for the thread.
fn queue(s: &Shared, f: Arc<OpenFile>) {
    {
        let mut g = s.state.lock().unwrap_or_else(|e| e.into_inner());
        if g.stop {
            drop(g);
            f.behind_done();
            return;
        }
        g.jobs.push_back(f);
    }
    s.cv.notify_one();
}

/// A writeback left for the end of an event loop's turn.
struct OnLoop {
    f: Option<Arc<OpenFile>>,
    s: Arc<Shared>,
}

impl TurnJob for OnLoop {
    /// Starts the writeback, watched (`Loop::watch_job`): if it slept,
    /// this loop's next ones go to the thread for a while.
    fn run(self: Box<Self>, lp: &Loop) {
        if let Some(f) = &self.f {
            let fd = f.fd.as_raw_fd();
            // An error here is the COMMIT's to report (its fsync sees it).
            if let Err(e) = lp.watch_job(sys::thread_sleeps, || sys::start_writeback(fd)) {
                tracing::debug!(error = %e, "write-behind: starting writeback failed");
            }
            self.s.started.fetch_add(1, Ordering::Relaxed);
            self.s.on_loop.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The thread starts it (its drop then finds nothing to do).
    fn hand_off(mut self: Box<Self>) {
        if let Some(f) = self.f.take() {
            queue(&self.s, f);
        }
    }
}

impl Drop for OnLoop {
    /// Done (or dropped unrun): the file may be queued again. Were this
    /// the last reference (the writer evicted meanwhile), closing it here
    /// could sleep on the loop: the thread drops it instead.
    fn drop(&mut self) {
        let Some(f) = self.f.take() else {
            return;
        };
        f.behind_done();
        if Arc::strong_count(&f) == 1 {
            queue(&self.s, f);
        }
    }
}

impl Drop for WriteBehind {
    fn drop(&mut self) {
        let mut g = self.s.state.lock().unwrap_or_else(|e| e.into_inner());
        g.stop = true;
        let jobs = std::mem::take(&mut g.jobs);
        drop(g);
        self.s.cv.notify_one();
        // Dropped outside the lock: a last reference closes its writer.
        drop(jobs);
    }
}

fn run(s: &Shared) {
    loop {
        let mut g = s.state.lock().unwrap_or_else(|e| e.into_inner());
        let f = loop {
            if g.stop {
                return;
            }
            if let Some(f) = g.jobs.pop_front() {
                break f;
            }
            g = s.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        };
        drop(g);
        // An error here is the COMMIT's to report (its fsync sees it).
        if let Err(e) = sys::start_writeback(f.fd.as_raw_fd()) {
            tracing::debug!(error = %e, "write-behind: starting writeback failed");
        }
        s.started.fetch_add(1, Ordering::Relaxed);
        f.behind_done();
        // The last reference to an evicted writer closes it here, off the
        // request path.
        drop(f);
    }
}
