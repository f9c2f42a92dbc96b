//! Written descriptors that leave the open-file cache before their data was
//! committed (evicted at a bound, closed idle, the server stopping) are
//! closed at once, and the export's filesystem owes a flush: a background
//! thread runs one `syncfs` for everything closed since the last one, and
//! every COMMIT settles what is owed before it answers.
//!
//! Why this keeps every writeback error visible: since Linux 5.8 every
//! writeback error of any file is also recorded in its superblock's error
//! sequence, and `syncfs` reports what was recorded since the last call
//! through the same open file. The flusher syncs through a directory it
//! opened for itself, so its cursor is its own: an error that hit data of
//! a closed writer (whether it happened before, during or after the close)
//! is reported by the next `syncfs`, which resets the write verifier, and
//! no COMMIT answers before that `syncfs` ran. A closed writer's inode may
//! then be evicted freely: the error no longer lives only in it.
//!
//! One `syncfs` (one journal commit) per batch of closes, instead of one
//! `fdatasync` per closed file, and no descriptor kept open for it.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::durable::Committer;
use crate::WriteVerifier;

use super::sys;

struct Shared {
    /// Written descriptors closed dirty since the last flush started.
    owed: AtomicU64,
    /// The export's root, opened for this flusher alone (its own error
    /// cursor for `syncfs`).
    root: OwnedFd,
    verifier: Arc<WriteVerifier>,
    /// Flushes share like any sync: a request joins one that has not
    /// started, never one already running.
    committer: Committer<()>,
    stop: Mutex<bool>,
    cv: Condvar,
    flushes: AtomicU64,
    /// How long closes gather before the background flush (a COMMIT
    /// settles at once).
    delay: Duration,
    /// Test builds only: see `hold`; taken by the flush it holds.
    #[cfg(feature = "test-hooks")]
    hold: Mutex<Option<std::path::PathBuf>>,
}

pub(super) struct Flusher {
    s: Arc<Shared>,
}

impl Shared {
    /// Flushes what is owed (if anything), sharing with concurrent callers.
    fn settle(&self) -> Result<(), i32> {
        if self.owed.load(Ordering::Acquire) == 0 {
            return Ok(());
        }
        self.committer.sync(&(), || {
            if self.owed.swap(0, Ordering::AcqRel) == 0 {
                return Ok(());
            }
            self.flushes.fetch_add(1, Ordering::Relaxed);
            let r = sys::syncfs(self.root.as_raw_fd());
            #[cfg(feature = "test-hooks")]
            if let Some(p) = self.hold.lock().unwrap_or_else(|e| e.into_inner()).take() {
                hold(&p);
            }
            r.inspect_err(|e| {
                self.verifier.reset(e);
                tracing::warn!(error = %e, "flush of closed written files failed");
            })
        })
    }
}

impl Flusher {
    /// `root`: a fresh open of the export root (not a duplicate of another
    /// descriptor, so no one else advances its error cursor).
    /// `delay`: how long after the first unflushed close the background
    /// flush runs (`flush_delay_ms`).
    pub fn new(root: OwnedFd, verifier: Arc<WriteVerifier>, delay: Duration) -> Arc<Flusher> {
        Self::start(
            root,
            verifier,
            delay,
            #[cfg(feature = "test-hooks")]
            std::env::var_os(HOLD_ENV).map(Into::into),
        )
    }

    fn start(
        root: OwnedFd,
        verifier: Arc<WriteVerifier>,
        delay: Duration,
        #[cfg(feature = "test-hooks")] hold: Option<std::path::PathBuf>,
    ) -> Arc<Flusher> {
        let s = Arc::new(Shared {
            owed: AtomicU64::new(0),
            root,
            verifier,
            committer: Committer::new(1),
            stop: Mutex::new(false),
            cv: Condvar::new(),
            flushes: AtomicU64::new(0),
            delay,
            #[cfg(feature = "test-hooks")]
            hold: Mutex::new(hold),
        });
        let t = s.clone();
        // Without the thread only COMMITs flush what is owed: still never
        // an error lost, just later.
        let _ = std::thread::Builder::new()
            .name("rnfsd-flush".into())
            .spawn(move || run(&t));
        Arc::new(Flusher { s })
    }

    /// A written descriptor is being closed with data not yet committed.
    pub fn closed_dirty(&self) {
        if self.s.owed.fetch_add(1, Ordering::AcqRel) == 0 {
            // Under the lock the thread checks `owed` with: it has either
            // not checked yet or already waits, so the wakeup is not lost.
            let _g = self.s.stop.lock().unwrap_or_else(|e| e.into_inner());
            self.s.cv.notify_one();
        }
    }

    /// Before a COMMIT answers: what closed writers owe is flushed, and a
    /// failure has reset the verifier. Nothing to do, one atomic load, when
    /// nothing was closed dirty.
    pub fn settle(&self) -> Result<(), i32> {
        self.s.settle()
    }

    /// Flushes run so far.
    pub fn flushes(&self) -> u64 {
        self.s.flushes.load(Ordering::Relaxed)
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        *self.s.stop.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.s.cv.notify_one();
    }
}

/// Waits for a close that owes a flush, then `delay` more (so the closes
/// of that time share one `syncfs`, and data the kernel's own writeback
/// or a COMMIT flushed meanwhile is not flushed again), then flushes.
/// Stopping flushes what is owed at once.
fn run(s: &Shared) {
    loop {
        let mut g = s.stop.lock().unwrap_or_else(|e| e.into_inner());
        while !*g && s.owed.load(Ordering::Acquire) == 0 {
            g = s.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        if !*g {
            g =
                s.cv.wait_timeout_while(g, s.delay, |stop| !*stop)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
        }
        let stop = *g;
        drop(g);
        let _ = s.settle();
        if stop {
            return;
        }
    }
}

/// Test builds only (the `test-hooks` feature, which the server's own
/// integration tests turn on): the file a flush holds on (`hold`).
#[cfg(feature = "test-hooks")]
const HOLD_ENV: &str = "RNFSD_TEST_FLUSH_HOLD";

/// Test builds only: the first flush whose `syncfs` returned, before its
/// result counts, creates the file `p` and goes on once it is removed
/// (after a minute at most). A test can then call while a flush runs, as
/// a long `syncfs` would let it, at a moment it knows.
#[cfg(feature = "test-hooks")]
fn hold(p: &std::path::Path) {
    if std::fs::write(p, b"").is_err() {
        return;
    }
    let end = std::time::Instant::now() + Duration::from_secs(60);
    while p.exists() && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(5));
    }
}
