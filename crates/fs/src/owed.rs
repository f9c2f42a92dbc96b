//! Journal commits that no request thread sleeps for.
//!
//! On a `sync` export a namespace change or SETATTR is durable before its
//! reply (RFC 1813 §4.8), as is a COMMIT's or stable WRITE's data on
//! every export. Where one journal commit covers it (`local/journal.rs`;
//! data once it is written back, `local/commit.rs`), the call's thread
//! need not sleep until that commit ends. When its caller allows it
//! (`Call::thread(cred, true)`: the reply can be sent by another thread),
//! the backend notes the commit as owed in the call (`Call::owe`) and
//! returns at once; the caller takes it (`Call::take_owed`) and gives it
//! what to do once the commit is done
//! (`Owed::then`: send the reply), and its thread goes on to the next
//! call. A few commit threads per filesystem (`Commits`) run journal
//! commits back to back: each takes every call waiting when it starts,
//! commits once, and finishes them all. So a synced change costs its
//! thread no sleep, and a commit one wakeup for all it answers (the XFS
//! aio_fsync thread's lesson, docs/lessons.md: batched wakeups, nobody
//! woken when nobody waits). A call that finds
//! nothing committing or waiting commits on its own thread instead
//! (`Commits::lead`): alone, it would sleep for its next call anyway.
//! A COMMIT or stable WRITE starts its file's writeback and owes the wait
//! for it too (`Call::owe_after`, `Before`): the commit thread waits for every
//! call's writeback of its batch before the commit, one sleep for all,
//! where each call's thread slept for its own.
//!
//! Hand-written: the rule (a commit answers only calls queued before it
//! began) is the point, and the jobs are our own replies.

use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::durable::CommitCounts;
use crate::limits::owed::MAX_THREADS;

/// Notes a commit of `commits` as owed in `owed` (a call's, see
/// `Call::owe`), after `before` if given. A second change of the same
/// call joins the commit it owes already (one commit after the call
/// covers both; a call changes one export, so one filesystem), except
/// that a second piece of work before it is given back.
pub(crate) fn owe_into(
    owed: &mut Option<Owed>,
    commits: &Arc<Commits>,
    before: Option<Box<dyn Before>>,
) -> Result<(), Option<Box<dyn Before>>> {
    match owed {
        Some(o) => match (&o.before, before) {
            (Some(_), Some(b)) => return Err(Some(b)),
            (None, Some(b)) => o.before = Some(b),
            (_, None) => {}
        },
        None => {
            commits.lock().owed += 1;
            *owed = Some(Owed {
                commits: Some(commits.clone()),
                before,
            });
        }
    }
    Ok(())
}

/// What must reach the disk before a call's commit can cover it: a file's
/// data, whose writeback the call started and the commit thread waits for
/// (for every call of its batch, one after another, before the commit),
/// so no request thread sleeps on that I/O, and it runs while the commit
/// before is still being made.
pub trait Before: Send {
    /// Waits for it: Err(errno) fails this call alone (its reply goes at
    /// once; whatever must rotate the write verifier has done so).
    fn finish(&self) -> Result<(), i32>;
}

/// A journal commit a call owes before its reply. The commit threads
/// outlive every one (`Commits::stop`).
pub struct Owed {
    /// None once handed its job.
    commits: Option<Arc<Commits>>,
    /// Done by the commit thread before the commit (`owe_after`).
    before: Option<Box<dyn Before>>,
}

impl Drop for Owed {
    fn drop(&mut self) {
        if let Some(c) = self.commits.take() {
            c.settled(c.lock());
        }
    }
}

/// What to run once the commit is done: Ok, or the errno it failed with
/// (the write verifier has been reset by then).
pub type Then = Box<dyn FnOnce(Result<(), i32>) + Send>;

impl Owed {
    /// Run `f` once a commit that began after now has ended, on the thread
    /// that made it.
    pub fn then(mut self, f: Then) {
        let c = self.commits.take();
        // Handed its job once: `then` and `wait` take the Owed, and only
        // they and its drop empty it.
        debug_assert!(c.is_some(), "an owed commit handed twice");
        if let Some(c) = c {
            c.push(f, self.before.take());
        }
    }

    /// Wait here for that commit (when nobody else can send the reply).
    pub fn wait(self) -> Result<(), i32> {
        let done = Arc::new((Mutex::new(None), Condvar::new()));
        let d = done.clone();
        self.then(Box::new(move |r| {
            *d.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            d.1.notify_one();
        }));
        let mut g = done.0.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(r) = g.take() {
                return r;
            }
            g = done.1.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// A commit made by the calling thread (`Commits::lead`).
pub struct Lead(Arc<Commits>);

impl Drop for Lead {
    fn drop(&mut self) {
        let mut s = self.0.lock();
        // Counted in `running` when made (`Commits::lead`), dropped once.
        debug_assert!(s.running > 0, "a lead's commit ended twice");
        s.running = s.running.saturating_sub(1);
    }
}

/// A call waiting for the next commit, and what must be done before it.
type Queued = (Then, Option<Box<dyn Before>>);

struct State {
    /// Calls waiting for the next commit. Bounded by the calls in flight
    /// (the transport's `max_inflight_per_conn` per connection).
    queued: Vec<Queued>,
    /// Calls owing a commit not queued yet: the threads stop only once
    /// none is left (an export dropped while a call still runs).
    owed: usize,
    stop: bool,
    counts: CommitCounts,
    running: u64,
}

/// The commit threads of one filesystem's journal.
pub struct Commits {
    state: Mutex<State>,
    cv: Condvar,
}

impl Commits {
    /// Starts `threads` threads (1 to `MAX_THREADS`) named `name`, each
    /// running `setup` once and then `commit` whenever calls wait;
    /// `failed` learns of each failure before the calls do.
    pub fn start(
        name: &str,
        threads: usize,
        setup: impl Fn() + Send + Sync + 'static,
        commit: impl Fn() -> io::Result<()> + Send + Sync + 'static,
        failed: impl Fn(&io::Error) + Send + Sync + 'static,
    ) -> io::Result<Arc<Commits>> {
        let c = Arc::new(Commits {
            state: Mutex::new(State {
                queued: Vec::new(),
                owed: 0,
                stop: false,
                counts: CommitCounts::default(),
                running: 0,
            }),
            cv: Condvar::new(),
        });
        let work = Arc::new((setup, commit, failed));
        for i in 0..threads.clamp(1, MAX_THREADS) {
            let (c2, w) = (c.clone(), work.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || {
                    (w.0)();
                    c2.run(&w.1, &w.2)
                });
            if let Err(e) = spawned {
                c.stop();
                return Err(e);
            }
        }
        Ok(c)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics under this lock but allocation.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, f: Then, before: Option<Box<dyn Before>>) {
        let mut s = self.lock();
        s.counts.requests += 1;
        s.counts.parked += 1;
        s.counts.waited_before += u64::from(before.is_some());
        let first = s.queued.is_empty();
        s.queued.push((f, before));
        // Only the first call of a batch wakes a thread; the rest join it.
        // With every thread committing, none is woken: the first to end
        // takes the batch.
        if first {
            self.cv.notify_one();
        }
        self.settled(s);
    }

    /// An owed commit was queued or given up.
    fn settled(&self, mut s: MutexGuard<'_, State>) {
        // Each Owed counted once when made (`owe_into`), settled once.
        debug_assert!(s.owed > 0, "an owed commit settled twice");
        s.owed = s.owed.saturating_sub(1);
        if s.stop && s.owed == 0 {
            // Threads waiting for the last owed call may end now.
            self.cv.notify_all();
        }
    }

    fn run(
        &self,
        commit: &(impl Fn() -> io::Result<()> + ?Sized),
        failed: &(impl Fn(&io::Error) + ?Sized),
    ) {
        loop {
            let batch = {
                let mut s = self.lock();
                while s.queued.is_empty() && !(s.stop && s.owed == 0) {
                    s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
                }
                if s.queued.is_empty() {
                    return;
                }
                s.running += 1;
                s.counts.syncs += 1;
                s.counts.joined += s.queued.len() as u64 - 1;
                s.counts.peak_in_flight = s.counts.peak_in_flight.max(s.running);
                std::mem::take(&mut s.queued)
            };
            // Work before the commit; a call whose work failed is
            // answered now and needs no commit.
            let mut ready = Vec::with_capacity(batch.len());
            for (f, b) in batch {
                match b.map_or(Ok(()), |b| b.finish()) {
                    Ok(()) => ready.push(f),
                    Err(e) => f(Err(e)),
                }
            }
            // Every call of the batch changed what it changed before it
            // was queued (its data written back just now), so before this
            // commit's change to the marker.
            let r = commit().map_err(|e| {
                failed(&e);
                e.raw_os_error().unwrap_or(libc::EIO)
            });
            {
                let mut s = self.lock();
                s.running -= 1;
                if r.is_err() {
                    s.counts.errors += 1;
                }
            }
            for f in ready {
                f(r);
            }
        }
    }

    /// When nothing is committing or waiting (one client calling alone),
    /// the calling thread had better make the commit itself: it would
    /// sleep for its next call anyway, where a commit thread woken for it
    /// costs two more switches. Held while it commits, the lead counts as
    /// a commit running, so calls meanwhile owe theirs to the threads and
    /// batch there as before. None when anything commits or waits, or
    /// when the call asking (`owing`) owes a commit already (which covers
    /// this change too).
    pub fn lead(self: &Arc<Self>, owing: bool) -> Option<Lead> {
        if owing {
            return None;
        }
        let mut s = self.lock();
        if s.running > 0 || !s.queued.is_empty() {
            return None;
        }
        s.running += 1;
        s.counts.led += 1;
        Some(Lead(self.clone()))
    }

    /// Stop the threads once every call queued or owing is answered.
    pub fn stop(&self) {
        self.lock().stop = true;
        self.cv.notify_all();
    }

    pub fn counts(&self) -> CommitCounts {
        self.lock().counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    use crate::{Call, Cred};

    /// A call on a thread whose reply may leave later (`may_owe`).
    fn call(cred: &Cred, may_owe: bool) -> Call<'_> {
        Call::thread(cred, may_owe)
    }

    /// Commit threads in the tests that run several.
    const SEVERAL: usize = 4;

    #[test]
    fn owed_only_when_offered_and_answered_after_a_later_commit() {
        let commits_run = Arc::new(AtomicUsize::new(0));
        let n = commits_run.clone();
        let c = Commits::start(
            "test-commit",
            SEVERAL,
            || {},
            move || {
                std::thread::sleep(Duration::from_millis(2));
                n.fetch_add(1, Ordering::SeqCst);
                Ok(())
            },
            |_| {},
        )
        .unwrap();
        let cred = Cred::default();
        // Not offered: the backend must wait itself.
        let not_offered = call(&cred, false);
        assert!(!not_offered.owe(&c));
        assert!(not_offered.take_owed().is_none());
        let (tx, rx) = mpsc::channel();
        for _ in 0..20 {
            let offer = call(&cred, true);
            assert!(offer.owe(&c));
            assert!(offer.owe(&c), "a second change joins the first");
            let o = offer.take_owed().expect("owed");
            drop(offer);
            let before = commits_run.load(Ordering::SeqCst);
            let (tx, n) = (tx.clone(), commits_run.clone());
            o.then(Box::new(move |r| {
                // Answered only after a commit that ended after it was owed.
                tx.send((r, before, n.load(Ordering::SeqCst))).unwrap();
            }));
        }
        for _ in 0..20 {
            let (r, before, after) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
            assert_eq!(r, Ok(()));
            assert!(after > before);
        }
        let k = c.counts();
        assert_eq!(k.requests, 20);
        assert!(k.syncs >= 1 && k.syncs <= 20, "{k:?}");
        assert_eq!(k.syncs + k.joined, 20);
        assert!(k.peak_in_flight <= SEVERAL as u64);
        c.stop();
    }

    #[test]
    fn a_failed_commit_fails_its_calls_and_an_unclaimed_offer_waits() {
        let seen = Arc::new(AtomicUsize::new(0));
        let s = seen.clone();
        let c = Commits::start(
            "test-commit",
            SEVERAL,
            || {},
            || Err(io::Error::from_raw_os_error(libc::EIO)),
            move |_| {
                s.fetch_add(1, Ordering::SeqCst);
            },
        )
        .unwrap();
        let cred = Cred::default();
        {
            let offer = call(&cred, true);
            assert!(offer.owe(&c));
            assert_eq!(offer.take_owed().expect("owed").wait(), Err(libc::EIO));
        }
        assert_eq!(seen.load(Ordering::SeqCst), 1);
        // Owed and never taken: the call's drop waits for the commit.
        {
            let offer = call(&cred, true);
            assert!(offer.owe(&c));
        }
        assert_eq!(seen.load(Ordering::SeqCst), 2);
        assert_eq!(c.counts().errors, 2);
        c.stop();
    }

    /// Work owed before a commit is finished by the commit thread before
    /// that commit; a call whose work fails is answered with its error and
    /// no commit, the others after the commit.
    #[test]
    fn work_before_the_commit_runs_first_and_fails_its_call_alone() {
        /// Its result, and the commits made when it finished.
        struct Work(Arc<AtomicUsize>, Arc<Mutex<Option<usize>>>, Result<(), i32>);
        impl Before for Work {
            fn finish(&self) -> Result<(), i32> {
                *self.1.lock().unwrap() = Some(self.0.load(Ordering::SeqCst));
                self.2
            }
        }
        let commits_run = Arc::new(AtomicUsize::new(0));
        let n = commits_run.clone();
        let c = Commits::start(
            "test-commit",
            1,
            || {},
            move || {
                n.fetch_add(1, Ordering::SeqCst);
                Ok(())
            },
            |_| {},
        )
        .unwrap();
        let work = |r| {
            let at = Arc::new(Mutex::new(None));
            (Box::new(Work(commits_run.clone(), at.clone(), r)), at)
        };
        let cred = Cred::default();
        // Not offered: given back, for the backend to do itself.
        assert!(call(&cred, false).owe_after(&c, work(Ok(())).0).is_err());
        let (tx, rx) = mpsc::channel();
        for r in [Ok(()), Err(libc::EIO), Ok(())] {
            let offer = call(&cred, true);
            let (w, at) = work(r);
            assert!(offer.owe_after(&c, w).is_ok());
            // A second piece of work for the same call: given back.
            assert!(offer.owe_after(&c, work(Ok(())).0).is_err());
            assert!(offer.owe(&c), "a plain change joins it");
            let (tx, n) = (tx.clone(), commits_run.clone());
            offer.take_owed().expect("owed").then(Box::new(move |res| {
                let finished_at = at.lock().unwrap().expect("finished before the answer");
                tx.send((r, res, finished_at, n.load(Ordering::SeqCst)))
                    .unwrap()
            }));
        }
        for _ in 0..3 {
            let (r, res, finished_at, answered_at) =
                rx.recv_timeout(Duration::from_secs(10)).unwrap();
            assert_eq!(r, res);
            if r.is_ok() {
                assert!(answered_at > finished_at, "a commit after the work");
            }
        }
        let k = c.counts();
        assert_eq!(k.requests, 3);
        c.stop();
    }

    /// The calling thread leads a commit only when nothing else commits or
    /// waits; while it does, calls owe theirs to the threads.
    #[test]
    fn a_call_alone_leads_and_others_owe_meanwhile() {
        let (started_tx, started) = mpsc::channel();
        let (go, go_rx) = mpsc::channel::<()>();
        let go_rx = Mutex::new(go_rx);
        let c = Commits::start(
            "test-commit",
            1,
            || {},
            move || {
                started_tx.send(()).unwrap();
                go_rx.lock().unwrap().recv().unwrap();
                Ok(())
            },
            |_| {},
        )
        .unwrap();
        let cred = Cred::default();
        let alone = call(&cred, true);
        let lead = c.lead(alone.owing()).expect("alone: lead");
        assert!(c.lead(alone.owing()).is_none(), "one leads at a time");
        // A call meanwhile owes its commit to the thread, which starts it.
        let (tx, rx) = mpsc::channel();
        {
            let offer = call(&cred, true);
            assert!(offer.owe(&c));
            offer
                .take_owed()
                .expect("owed")
                .then(Box::new(move |r| tx.send(r).unwrap()));
        }
        started.recv_timeout(Duration::from_secs(10)).unwrap();
        drop(lead);
        assert!(
            c.lead(alone.owing()).is_none(),
            "the thread commits: no lead"
        );
        go.send(()).unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(Ok(())));
        // A call that owes a commit joins it rather than lead another.
        {
            let offer = call(&cred, true);
            assert!(offer.owe(&c));
            assert!(c.lead(offer.owing()).is_none(), "owing: no lead");
            let (tx, rx) = mpsc::channel();
            offer
                .take_owed()
                .expect("owed")
                .then(Box::new(move |r| tx.send(r).unwrap()));
            started.recv_timeout(Duration::from_secs(10)).unwrap();
            go.send(()).unwrap();
            assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(Ok(())));
        }
        // Nothing commits or waits any more: a call leads again.
        let mut lead = None;
        for _ in 0..1000 {
            lead = c.lead(alone.owing());
            if lead.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(lead.is_some(), "alone again: lead");
        drop(lead);
        let k = c.counts();
        assert_eq!((k.led, k.parked, k.syncs), (2, 2, 2), "{k:?}");
        c.stop();
        drop(go);
    }

    /// A call that owes a commit when its export stops (dropped by a
    /// reload) is still answered: the threads wait for it.
    #[test]
    fn threads_stopped_still_answer_a_call_owing_then() {
        let c = Commits::start("test-commit", 1, || {}, || Ok(()), |_| {}).unwrap();
        let cred = Cred::default();
        let owed = {
            let offer = call(&cred, true);
            assert!(offer.owe(&c));
            offer.take_owed().expect("owed")
        };
        c.stop();
        std::thread::sleep(Duration::from_millis(20));
        let (tx, rx) = mpsc::channel();
        owed.then(Box::new(move |r| tx.send(r).unwrap()));
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(Ok(())));
        // And one given up lets them end.
        let owed = {
            let offer = call(&cred, true);
            let c2 = Commits::start("test-commit", 1, || {}, || Ok(()), |_| {}).unwrap();
            assert!(offer.owe(&c2));
            let o = offer.take_owed().expect("owed");
            c2.stop();
            o
        };
        drop(owed);
    }
}
