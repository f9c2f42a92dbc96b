//! Written descriptors that leave the open-file cache before their data was
//! committed (evicted at a bound, closed idle, the server stopping) are
//! closed at once, and the export's filesystem owes a flush: a background
//! thread runs one `syncfs` for everything closed since the last one, and
//! every COMMIT settles what is owed before it answers, and waits for a
//! flush already running (`Running`).
//!
//! Why this keeps every writeback error visible: since Linux 5.8 every
//! writeback error of any file is also recorded in its superblock's error
//! sequence, and `syncfs` reports what was recorded since the last call
//! through the same open file. The flusher syncs through a directory it
//! opened for itself, so its cursor is its own: an error that hit data of
//! a closed writer (whether it happened before, during or after the close)
//! is reported by the next `syncfs`, which resets the write verifier, and
//! no COMMIT answers before that `syncfs` returned. A closed writer's inode
//! may then be evicted freely: the error no longer lives only in it.
//!
//! That includes a flush that took what was owed before the COMMIT came
//! and still runs: its `syncfs` may have met the error, and the inode,
//! clean, have been evicted with it, so the COMMIT's own fsync through a
//! fresh descriptor succeeds, and only that flush's result tells. Flushes
//! are numbered (`begun`, `ended`): a COMMIT that finds nothing owed waits
//! until the flushes begun before it have ended.
//!
//! One `syncfs` (one journal commit) per batch of closes, instead of one
//! `fdatasync` per closed file, and no descriptor kept open for it.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::durable::Committer;
use crate::WriteVerifier;

use super::sys;

struct Shared {
    /// Written descriptors closed dirty since the last flush started.
    owed: AtomicU64,
    /// Flushes begun: each counts itself here before it takes `owed`, so
    /// whoever finds `owed` taken finds the flush that took it counted.
    begun: AtomicU64,
    /// Flushes ended (their result applied: the verifier reset on a
    /// failure); they run one at a time, so in the order begun. Stored
    /// under `ended_lock`, which `Running` waits on.
    ended: AtomicU64,
    ended_lock: Mutex<Failed>,
    ended_cv: Condvar,
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

/// The last flush that failed: (its number, errno).
type Failed = Option<(u64, i32)>;

pub(super) struct Flusher {
    s: Arc<Shared>,
}

/// A flush a COMMIT must not answer before: one that had begun (and
/// taken what was owed) when the COMMIT came.
pub(super) struct Running {
    s: Arc<Shared>,
    /// The flushes to wait for: up to this number.
    upto: u64,
}

impl Shared {
    /// Flushes what is owed (if anything), sharing with concurrent callers.
    /// A flush running already is waited for first (the committer never
    /// joins a running sync), so its result has applied by the time this
    /// returns.
    fn flush_owed(&self) -> Result<(), i32> {
        if self.owed.load(Ordering::SeqCst) == 0 {
            return Ok(());
        }
        self.committer.sync(&(), || self.flush())
    }

    /// One flush (under the committer: never two at once).
    fn flush(&self) -> std::io::Result<()> {
        let n = self.begun.fetch_add(1, Ordering::SeqCst) + 1;
        let r = if self.owed.swap(0, Ordering::SeqCst) == 0 {
            Ok(())
        } else {
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
        };
        let mut failed = self.ended_guard();
        if let Err(e) = &r {
            *failed = Some((n, e.raw_os_error().unwrap_or(libc::EIO)));
        }
        self.ended.store(n, Ordering::SeqCst);
        drop(failed);
        self.ended_cv.notify_all();
        r
    }

    fn ended_guard(&self) -> MutexGuard<'_, Failed> {
        self.ended_lock.lock().unwrap_or_else(|e| e.into_inner())
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
            begun: AtomicU64::new(0),
            ended: AtomicU64::new(0),
            ended_lock: Mutex::new(None),
            ended_cv: Condvar::new(),
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

    /// Before a COMMIT answers: what closed writers owe is flushed, a
    /// flush running already has ended, and a failure of either has reset
    /// the verifier. All on this thread (the tests' shortcut for
    /// `settle_or_running`).
    #[cfg(test)]
    pub fn settle(&self) -> Result<(), i32> {
        match self.settle_or_running()? {
            Some(r) => r.wait(),
            None => Ok(()),
        }
    }

    /// What is owed is flushed here, now (after any flush running, whose
    /// result this then covers); with nothing owed, a flush that took what
    /// was (it had begun) and has not ended is returned, for the COMMIT to
    /// wait for before it answers. Nothing to do, a few atomic loads, when
    /// nothing was closed dirty.
    pub fn settle_or_running(&self) -> Result<Option<Running>, i32> {
        let s = &self.s;
        if s.owed.load(Ordering::SeqCst) != 0 {
            s.flush_owed()?;
            return Ok(None);
        }
        // `owed` read 0 after the close (if any) that this COMMIT must
        // cover: a flush took it, counted in `begun` before.
        let upto = s.begun.load(Ordering::SeqCst);
        if s.ended.load(Ordering::SeqCst) >= upto {
            return Ok(None);
        }
        Ok(Some(Running { s: s.clone(), upto }))
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
        let _ = s.flush_owed();
        if stop {
            return;
        }
    }
}

impl Running {
    /// Waits until the flush has ended: Err(errno) if it (or a later one)
    /// failed, the verifier reset by then.
    pub fn wait(&self) -> Result<(), i32> {
        let mut failed = self.s.ended_guard();
        while self.s.ended.load(Ordering::SeqCst) < self.upto {
            failed = self
                .s
                .ended_cv
                .wait(failed)
                .unwrap_or_else(|e| e.into_inner());
        }
        match *failed {
            Some((n, e)) if n >= self.upto => Err(e),
            _ => Ok(()),
        }
    }
}

/// A COMMIT whose journal commit is owed (`crate::owed`) leaves the wait
/// to the commit thread, with its data's writeback (`commit.rs`).
impl crate::owed::Before for Running {
    fn finish(&self) -> Result<(), i32> {
        self.wait()
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::sync::mpsc;
    use std::time::Instant;

    /// A flusher of a fresh directory whose first flush holds on `held`
    /// (see `hold`), flushing as soon as a close owes it.
    fn flusher(dir: &Path, held: &Path) -> (Arc<Flusher>, Arc<WriteVerifier>) {
        let root: OwnedFd = std::fs::File::open(dir).unwrap().into();
        let verifier = Arc::new(WriteVerifier::new([7; 8]));
        let f = Flusher::start(
            root,
            verifier.clone(),
            Duration::ZERO,
            Some(held.to_path_buf()),
        );
        (f, verifier)
    }

    fn wait_for(what: &str, cond: impl Fn() -> bool) {
        let end = Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(Instant::now() < end, "{what}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// A COMMIT that comes while the background flush runs (it took what
    /// was owed: nothing is owed now) does not answer before that flush
    /// has ended, whether it waits itself (`settle`) or leaves the wait
    /// to whoever sends its reply (`Running`); one that comes after has
    /// nothing to wait for.
    #[test]
    fn a_commit_waits_for_the_flush_running() {
        let d = tempfile::tempdir().unwrap();
        let held = d.path().join("held");
        for leave_it in [false, true] {
            std::fs::remove_file(&held).ok();
            let (f, _v) = flusher(d.path(), &held);
            f.closed_dirty();
            wait_for("the flush never ran", || held.exists());
            assert_eq!(f.flushes(), 1);
            let (tx, rx) = mpsc::channel();
            let waiter = if leave_it {
                let r = f.settle_or_running().unwrap().expect("a flush runs");
                std::thread::spawn(move || tx.send(r.wait()).unwrap())
            } else {
                let f = f.clone();
                std::thread::spawn(move || tx.send(f.settle()).unwrap())
            };
            assert!(
                rx.recv_timeout(Duration::from_millis(200)).is_err(),
                "settled while the flush still ran (waiting itself: {})",
                !leave_it
            );
            std::fs::remove_file(&held).unwrap();
            assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(Ok(())));
            waiter.join().unwrap();
            assert!(f.settle_or_running().unwrap().is_none(), "nothing left");
            assert_eq!(f.flushes(), 1, "no flush of its own: nothing was owed");
        }
    }

    /// A close while a flush runs owes another flush: a COMMIT then runs
    /// it itself, once the running one has ended (never joining it).
    #[test]
    fn a_close_during_a_flush_owes_the_next() {
        let d = tempfile::tempdir().unwrap();
        let held = d.path().join("held");
        let (f, _v) = flusher(d.path(), &held);
        f.closed_dirty();
        wait_for("the flush never ran", || held.exists());
        f.closed_dirty();
        let (tx, rx) = mpsc::channel();
        let commit = {
            let f = f.clone();
            std::thread::spawn(move || tx.send(f.settle_or_running().map(|r| r.is_none())).unwrap())
        };
        assert!(
            rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "flushed what was owed while a flush still ran"
        );
        std::fs::remove_file(&held).unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(Ok(true)));
        commit.join().unwrap();
        assert_eq!(f.flushes(), 2, "what the second close owed was flushed");
    }
}
