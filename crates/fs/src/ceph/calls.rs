//! Every libcephfs call is bounded in time: libcephfs blocks, with no
//! timeout of its own, while no MDS is active or an OSD is unreachable.
//!
//! * While the cluster answers, a call runs on the server worker that
//!   asked (no handoff: a handoff per call cost 2.5x the call itself at one
//!   call in flight), at most `direct_max` at once, each in a slot that
//!   records when it started.
//! * A watchdog looks at those slots every quarter of the time limit. When
//!   one has run past the limit the backend is *stalled*: from then on
//!   calls run on a bounded pool and the worker waits at most the limit
//!   for each; past it the client gets NFS3ERR_JUKEBOX (it retries the
//!   same call later) while the call finishes in the background, and a
//!   full pool answers JUKEBOX at once. Once no running call is past the
//!   limit (the cluster answered them), calls run directly again.
//! * So at most `direct_max` workers wait on a cluster that stopped
//!   answering, only the calls already running when it stopped, and every
//!   later call gets an answer within the limit.
//! * A call answered JUKEBOX never runs later: one still queued is dropped
//!   when a pool thread takes it. One already inside libcephfs cannot be
//!   called back, so until it ends it is *late*: a later call on any
//!   object it names (its handles; a lock owner) waits for it, at most the
//!   limit, then gets JUKEBOX itself. The client's retry, or the next
//!   write to the same range, can then never be overtaken by it.
//! * At exit (`close`) no call enters libcephfs any more, and the backend
//!   waits a while for those inside: unmounting under them would free
//!   what they use.
//! * Never on an event-loop thread (`crate::inline`): there a call gives up
//!   at once and runs again on a worker.
//!
//! Hand-written: a slot array and a few lines over std's bounded channel;
//! no thread-pool crate waits with a deadline or skips itself when healthy.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use crate::{Call, Fh, FsError, FsResult};

type Job = Box<dyn FnOnce() + Send>;

/// An object whose calls keep their order (see `late`): a handle, or a
/// lock owner (a tag byte first, so the two never meet).
pub type Key = Vec<u8>;

pub fn fh_key(fh: &Fh) -> Key {
    let mut k = Vec::with_capacity(fh.0.len() + 1);
    k.push(0);
    k.extend_from_slice(&fh.0);
    k
}

pub fn owner_key(owner: u64) -> Key {
    let mut k = vec![1];
    k.extend_from_slice(&owner.to_be_bytes());
    k
}

/// Where a pooled call is: `Late` when it was answered JUKEBOX while
/// running (with the objects that wait for it), `Abandoned` when it was
/// answered before it started (it never will).
enum State {
    Queued,
    Running,
    Late(Vec<Key>),
    Abandoned,
    Done,
}

/// Ends a running pooled call, also by unwinding: its state, its late
/// objects, the running count.
struct Ending {
    st: Arc<Mutex<State>>,
    gate: Arc<Gate>,
}

impl Ending {
    /// Done, and `tell` the caller under the state lock: a caller that
    /// finds it Done finds the result too.
    fn finish(&self, tell: impl FnOnce()) {
        let mut s = lock(&self.st);
        if let State::Late(keys) = std::mem::replace(&mut *s, State::Done) {
            self.gate.end_late(&keys);
        }
        tell();
    }
}

impl Drop for Ending {
    fn drop(&mut self) {
        self.finish(|| {});
        self.gate.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What the pool's jobs share with the backend.
struct Gate {
    /// Objects named by a late call, each with how many name it.
    late: Mutex<HashMap<Key, usize>>,
    /// Late calls now: 0 keeps every call off the lock above.
    late_n: AtomicUsize,
    ended: Condvar,
    /// Pooled calls inside libcephfs now.
    running: AtomicUsize,
    /// Set at exit: no call starts any more.
    closing: AtomicBool,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, HashMap<Key, usize>> {
        self.late.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add_late(&self, keys: &[Key]) {
        let mut m = self.lock();
        for k in keys {
            *m.entry(k.clone()).or_insert(0) += 1;
        }
        self.late_n.fetch_add(1, Ordering::SeqCst);
    }

    fn end_late(&self, keys: &[Key]) {
        let mut m = self.lock();
        for k in keys {
            if let Some(n) = m.get_mut(k) {
                *n -= 1;
                if *n == 0 {
                    m.remove(k);
                }
            }
        }
        self.late_n.fetch_sub(1, Ordering::SeqCst);
        drop(m);
        self.ended.notify_all();
    }
}

/// A start time on a cache line of its own (written by one worker per
/// call, read by the watchdog only).
#[repr(align(128))]
struct Slot(AtomicU64);

pub struct Calls {
    tx: SyncSender<Job>,
    gate: Arc<Gate>,
    timeout: Duration,
    epoch: Instant,
    /// Start of each direct call in flight (ns since `epoch`, +1), 0 = free.
    slots: Box<[Slot]>,
    stalled: AtomicBool,
    /// Calls answered JUKEBOX because they ran past the time limit, and
    /// because the pool was full; times the backend was found stalled.
    pub timed_out: AtomicU64,
    pub refused: AtomicU64,
    pub stalls: AtomicU64,
}

fn lock(s: &Mutex<State>) -> MutexGuard<'_, State> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

fn jukebox() -> FsError {
    // ETIMEDOUT maps to NFS3ERR_JUKEBOX (the nfs3 program's errno map).
    FsError::Errno(libc::ETIMEDOUT)
}

/// Frees a direct slot when the call ends, also by unwinding.
struct Held<'a>(&'a Slot);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0 .0.store(0, Ordering::Release);
    }
}

impl Calls {
    /// `direct_max` calls run on their workers at once; once stalled,
    /// `threads` calls run on the pool at once and `queue` more wait.
    pub fn new(
        name: &str,
        direct_max: usize,
        threads: usize,
        queue: usize,
        timeout: Duration,
    ) -> Arc<Calls> {
        let (tx, rx) = mpsc::sync_channel::<Job>(queue.max(1));
        let rx: Arc<Mutex<Receiver<Job>>> = Arc::new(Mutex::new(rx));
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || loop {
                    let job = {
                        let g = rx.lock().unwrap_or_else(|e| e.into_inner());
                        g.recv()
                    };
                    match job {
                        Ok(j) => j(),
                        // The backend is gone: so is this thread.
                        Err(_) => return,
                    }
                });
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "cannot start a CephFS call thread");
            }
        }
        let calls = Arc::new(Calls {
            tx,
            gate: Arc::new(Gate {
                late: Mutex::new(HashMap::new()),
                late_n: AtomicUsize::new(0),
                ended: Condvar::new(),
                running: AtomicUsize::new(0),
                closing: AtomicBool::new(false),
            }),
            timeout,
            epoch: Instant::now(),
            slots: (0..direct_max).map(|_| Slot(AtomicU64::new(0))).collect(),
            stalled: AtomicBool::new(false),
            timed_out: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            stalls: AtomicU64::new(0),
        });
        let w = Arc::downgrade(&calls);
        let tick = (timeout / 4).clamp(Duration::from_millis(10), Duration::from_millis(500));
        let spawned = std::thread::Builder::new()
            .name(format!("{name}-watch"))
            .spawn(move || watch(w, tick));
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the CephFS call watchdog");
        }
        calls
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64 + 1
    }

    /// A free direct slot, marked with the start time (bounded scan).
    fn take_slot(&self) -> Option<Held<'_>> {
        let n = self.slots.len();
        if n == 0 {
            return None;
        }
        // From the calling CPU's own slot: threads running at once are on
        // different CPUs, so they start apart.
        let start = rnfsd_pool::counter::current_cpu() % n;
        let now = self.now();
        for k in 0..n {
            let i = (start + k) % n;
            let s = &self.slots[i];
            if s.0.load(Ordering::Relaxed) == 0
                && s.0
                    .compare_exchange(0, now, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok()
            {
                return Some(Held(s));
            }
        }
        None
    }

    /// Whether a call on `keys` may run here and now: a direct slot while
    /// the cluster answers (hold it while the call runs), None when the
    /// call must go through the timed pool (`pooled`), an error for a call
    /// inline on an event loop (which must never wait on the cluster), and
    /// JUKEBOX for one that waited the limit for a late call on its
    /// objects, or one at exit.
    pub fn direct(&self, call: &Call<'_>, keys: &[&Fh]) -> FsResult<Option<impl Drop + '_>> {
        if call.inline() {
            return Err(call.give_up());
        }
        self.after_late(|k| keys.iter().any(|f| k.split_first() == Some((&0, &f.0[..]))))?;
        self.direct_slot()
    }

    /// A direct slot while the cluster answers; JUKEBOX at exit.
    fn direct_slot(&self) -> FsResult<Option<Held<'_>>> {
        let held = if self.stalled.load(Ordering::Acquire) {
            None
        } else {
            self.take_slot()
        };
        // After the slot is taken: `close` sees the slot, or this sees it
        // closing (both SeqCst).
        if self.gate.closing.load(Ordering::SeqCst) {
            return Err(jukebox());
        }
        Ok(held)
    }

    /// Waits (at most the limit) until no late call names an object
    /// `named` picks; JUKEBOX past the limit.
    fn after_late(&self, named: impl Fn(&Key) -> bool) -> FsResult<()> {
        if self.gate.late_n.load(Ordering::SeqCst) == 0 {
            return Ok(());
        }
        let m = self.gate.lock();
        let (_m, waited) = self
            .gate
            .ended
            .wait_timeout_while(m, self.timeout, |m| m.keys().any(&named))
            .unwrap_or_else(|e| e.into_inner());
        if waited.timed_out() {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(jukebox());
        }
        Ok(())
    }

    /// Runs `f`, a call on `keys`, within the time limit (see the module
    /// docs), for a caller on a thread that may wait (a lock call: never
    /// on an event loop).
    pub fn run<T: Send + 'static>(
        &self,
        keys: Vec<Key>,
        f: impl FnOnce() -> FsResult<T> + Send + 'static,
    ) -> FsResult<T> {
        self.after_late(|k| keys.contains(k))?;
        match self.direct_slot()? {
            Some(_held) => f(),
            None => self.pooled(keys, f),
        }
    }

    /// Runs `f`, a call on `keys`, on the pool; waits for it at most the
    /// time limit. Answered JUKEBOX, it never starts later, or if it had
    /// started, it is late until it ends.
    pub fn pooled<T: Send + 'static>(
        &self,
        keys: Vec<Key>,
        f: impl FnOnce() -> FsResult<T> + Send + 'static,
    ) -> FsResult<T> {
        let (rtx, rrx) = mpsc::sync_channel(1);
        let state = Arc::new(Mutex::new(State::Queued));
        let (st, gate) = (state.clone(), self.gate.clone());
        let job: Job = Box::new(move || {
            {
                let mut s = lock(&st);
                if matches!(*s, State::Abandoned) {
                    return;
                }
                // Counted before the check: `close` sees it running, or
                // this sees it closing (both SeqCst).
                gate.running.fetch_add(1, Ordering::SeqCst);
                if gate.closing.load(Ordering::SeqCst) {
                    gate.running.fetch_sub(1, Ordering::SeqCst);
                    *s = State::Done;
                    let _ = rtx.send(Err(jukebox()));
                    return;
                }
                *s = State::Running;
            }
            let end = Ending { st, gate };
            let r = f();
            // The caller may have given up: nobody to tell then.
            end.finish(|| drop(rtx.send(r)));
        });
        match self.tx.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return Err(jukebox());
            }
            Err(TrySendError::Disconnected(_)) => return Err(FsError::Errno(libc::EIO)),
        }
        match rrx.recv_timeout(self.timeout) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => {
                {
                    let mut s = lock(&state);
                    match std::mem::replace(&mut *s, State::Abandoned) {
                        State::Queued => {}
                        State::Running => {
                            self.gate.add_late(&keys);
                            *s = State::Late(keys);
                        }
                        // Ended just now: its result is there.
                        other => {
                            *s = other;
                            if let Ok(r) = rrx.try_recv() {
                                return r;
                            }
                        }
                    }
                }
                let n = self.timed_out.fetch_add(1, Ordering::Relaxed) + 1;
                if n.is_power_of_two() {
                    tracing::warn!(
                        timeout_ms = self.timeout.as_millis() as u64,
                        calls = n,
                        "CephFS call ran past its time limit (no active MDS, or an OSD down?): answered JUKEBOX"
                    );
                }
                Err(jukebox())
            }
            Err(RecvTimeoutError::Disconnected) => Err(FsError::Errno(libc::EIO)),
        }
    }

    /// At exit: no call starts from now on (each gets JUKEBOX), and this
    /// waits at most `wait` for those inside libcephfs. Whether none is.
    pub fn close(&self, wait: Duration) -> bool {
        self.gate.closing.store(true, Ordering::SeqCst);
        let end = Instant::now() + wait;
        loop {
            let busy = self.gate.running.load(Ordering::SeqCst) != 0
                || self.slots.iter().any(|s| s.0.load(Ordering::SeqCst) != 0);
            if !busy {
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Whether calls now go through the timed pool.
    #[cfg(test)]
    pub fn is_stalled(&self) -> bool {
        self.stalled.load(Ordering::Acquire)
    }

    /// One watchdog pass: stalled exactly while a direct call is past the
    /// time limit.
    fn check(&self) {
        let now = self.now();
        let limit = self.timeout.as_nanos() as u64;
        let late = self.slots.iter().any(|s| {
            let t = s.0.load(Ordering::Acquire);
            t != 0 && now.saturating_sub(t) > limit
        });
        let was = self.stalled.swap(late, Ordering::AcqRel);
        if late && !was {
            self.stalls.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                timeout_ms = self.timeout.as_millis() as u64,
                "a CephFS call ran past its time limit: calls now wait at most the limit and get JUKEBOX past it, until the cluster answers"
            );
        } else if was && !late {
            tracing::info!("CephFS answers again: calls run directly");
        }
    }
}

fn watch(w: Weak<Calls>, tick: Duration) {
    loop {
        std::thread::sleep(tick);
        match w.upgrade() {
            Some(c) => c.check(),
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cred;

    static CRED: Cred = Cred {
        uid: 0,
        gid: 0,
        gids: Vec::new(),
    };

    #[test]
    fn pool_answers_times_out_and_refuses() {
        // No direct slots: every call goes through the pool.
        let c = Calls::new("t", 0, 1, 1, Duration::from_millis(50));
        assert_eq!(c.run(vec![], || Ok(7)), Ok(7));
        assert_eq!(
            c.run(vec![], || -> FsResult<()> { Err(FsError::Stale) }),
            Err(FsError::Stale)
        );
        let (tx, rx) = mpsc::channel::<()>();
        // A call stuck past the limit answers ETIMEDOUT (JUKEBOX) ...
        assert_eq!(
            c.run(vec![], move || {
                let _ = rx.recv_timeout(Duration::from_secs(5));
                Ok(())
            }),
            Err(FsError::Errno(libc::ETIMEDOUT))
        );
        // ... the one queue slot fills, and the next call is refused at once.
        assert_eq!(
            c.run(vec![], || Ok(1)),
            Err(FsError::Errno(libc::ETIMEDOUT))
        );
        assert_eq!(
            c.run(vec![], || Ok(2)),
            Err(FsError::Errno(libc::ETIMEDOUT))
        );
        assert_eq!(c.refused.load(Ordering::Relaxed), 1);
        drop(tx);
        // Unstuck, the pool serves again.
        let ok = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            c.run(vec![], || Ok(3)) == Ok(3)
        });
        assert!(ok);
    }

    #[test]
    fn a_stuck_direct_call_turns_on_the_time_limit() {
        let c = Calls::new("t", 1, 2, 4, Duration::from_millis(100));
        // Healthy: runs on the calling thread.
        let me = std::thread::current().id();
        assert_eq!(
            c.run(vec![], move || Ok(std::thread::current().id() == me)),
            Ok(true)
        );
        let (tx, rx) = mpsc::channel::<()>();
        let c2 = c.clone();
        let stuck = std::thread::spawn(move || {
            c2.run(vec![], move || {
                let _ = rx.recv_timeout(Duration::from_secs(10));
                Ok(())
            })
        });
        // The watchdog notices within the limit and a tick or two.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !c.is_stalled() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(c.is_stalled());
        assert_eq!(c.stalls.load(Ordering::Relaxed), 1);
        // Stalled: a call goes to the pool, off this thread, and one stuck
        // there is answered JUKEBOX within the limit.
        assert_eq!(
            c.run(vec![], move || Ok(std::thread::current().id() == me)),
            Ok(false)
        );
        let t0 = Instant::now();
        assert_eq!(
            c.run(vec![], || {
                std::thread::sleep(Duration::from_millis(400));
                Ok(())
            }),
            Err(FsError::Errno(libc::ETIMEDOUT))
        );
        assert!(t0.elapsed() < Duration::from_millis(350));
        // The cluster answers the stuck call: direct again.
        drop(tx);
        assert_eq!(stuck.join().ok(), Some(Ok(())));
        let deadline = Instant::now() + Duration::from_secs(5);
        while c.is_stalled() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!c.is_stalled());
    }

    /// A pool of one thread held by a call until the returned sender
    /// sends or drops: that call is answered JUKEBOX (late, on `keys`).
    fn hold_pool(
        c: &Arc<Calls>,
        keys: Vec<Key>,
        ran: Arc<Mutex<Vec<&'static str>>>,
    ) -> mpsc::Sender<()> {
        let (tx, rx) = mpsc::channel::<()>();
        let r = c.pooled(keys, move || {
            let _ = rx.recv_timeout(Duration::from_secs(10));
            ran.lock().unwrap().push("held");
            Ok(())
        });
        assert_eq!(r, Err(FsError::Errno(libc::ETIMEDOUT)));
        tx
    }

    #[test]
    fn a_call_answered_before_it_started_never_runs() {
        // No direct slots: every call goes through the one pool thread.
        let c = Calls::new("t", 0, 1, 4, Duration::from_millis(50));
        let ran = Arc::new(Mutex::new(Vec::new()));
        let held = hold_pool(&c, vec![owner_key(9)], ran.clone());
        // A WRITE of "A" waits in the queue past the limit: JUKEBOX.
        let f = fh_key(&Fh(b"file".to_vec()));
        let r2 = ran.clone();
        let a = c.run(vec![f.clone()], move || {
            r2.lock().unwrap().push("A");
            Ok(())
        });
        assert_eq!(a, Err(FsError::Errno(libc::ETIMEDOUT)));
        // The pool frees up: "A" is dropped, the next call runs.
        drop(held);
        let r3 = ran.clone();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut b = Err(FsError::Stale);
        while b.is_err() && Instant::now() < deadline {
            let r3 = r3.clone();
            b = c.run(vec![f.clone()], move || {
                r3.lock().unwrap().push("B");
                Ok(())
            });
        }
        assert_eq!(b, Ok(()));
        std::thread::sleep(Duration::from_millis(100));
        // "B" more than once where a loaded machine timed out an attempt
        // that had already started (it runs on, its caller answered
        // JUKEBOX); never "A", which had not.
        let ran = ran.lock().unwrap();
        assert_eq!(ran.first(), Some(&"held"));
        assert!(
            ran[1..].iter().all(|r| *r == "B"),
            "the JUKEBOX'd call ran: {ran:?}"
        );
        assert!(ran.len() >= 2, "{ran:?}");
    }

    #[test]
    fn a_late_call_holds_back_later_calls_on_its_objects() {
        // One direct slot: the cluster answers, calls run here.
        let c = Calls::new("t", 1, 1, 4, Duration::from_millis(100));
        let ran = Arc::new(Mutex::new(Vec::new()));
        let (file, other) = (Fh(b"file".to_vec()), Fh(b"other".to_vec()));
        // A call on the file answered JUKEBOX while it runs on the pool.
        let held = hold_pool(&c, vec![fh_key(&file)], ran.clone());
        let cred = Call::thread(&CRED, false);
        // Another object: at once.
        let t0 = Instant::now();
        assert!(matches!(c.direct(&cred, &[&other]), Ok(Some(_))));
        assert!(t0.elapsed() < Duration::from_millis(50));
        // The same object, while the late call runs on: JUKEBOX at the
        // limit, and nothing of it ran.
        let t0 = Instant::now();
        assert!(matches!(
            c.direct(&cred, &[&other, &file]),
            Err(FsError::Errno(libc::ETIMEDOUT))
        ));
        assert!(t0.elapsed() >= Duration::from_millis(100));
        let r2 = ran.clone();
        let k = fh_key(&file);
        assert_eq!(
            c.run(vec![k.clone()], move || {
                r2.lock().unwrap().push("too early");
                Ok(())
            }),
            Err(FsError::Errno(libc::ETIMEDOUT))
        );
        // It ends while a later call waits: that one runs after it.
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            drop(held);
        });
        let r3 = ran.clone();
        assert_eq!(
            c.run(vec![k], move || {
                r3.lock().unwrap().push("after");
                Ok(())
            }),
            Ok(())
        );
        release.join().unwrap();
        assert_eq!(*ran.lock().unwrap(), ["held", "after"]);
        assert!(matches!(c.direct(&cred, &[&file]), Ok(Some(_))));
    }

    #[test]
    fn close_waits_for_calls_inside_then_refuses_new_ones() {
        let c = Calls::new("t", 1, 1, 4, Duration::from_millis(50));
        let (tx, rx) = mpsc::channel::<()>();
        let c2 = c.clone();
        let inside = std::thread::spawn(move || {
            c2.run(vec![], move || {
                let _ = rx.recv_timeout(Duration::from_secs(10));
                Ok(())
            })
        });
        std::thread::sleep(Duration::from_millis(20));
        // A direct call inside libcephfs: not idle within the wait.
        assert!(!c.close(Duration::from_millis(50)));
        drop(tx);
        assert_eq!(inside.join().ok(), Some(Ok(())));
        assert!(c.close(Duration::from_secs(1)));
        // Closed: nothing runs, directly or on the pool.
        assert_eq!(
            c.run(vec![], || -> FsResult<()> { panic!("ran after close") }),
            Err(FsError::Errno(libc::ETIMEDOUT))
        );
        assert_eq!(
            c.pooled(vec![], || -> FsResult<()> { panic!("ran after close") }),
            Err(FsError::Errno(libc::ETIMEDOUT))
        );
    }

    #[test]
    fn never_waits_on_an_event_loop_thread() {
        let c = Calls::new("t", 4, 1, 1, Duration::from_millis(100));
        let lp = crate::inline::Loop::new(crate::inline::Leave::NONE);
        lp.begin_call();
        let call = Call::on_loop(&CRED, &lp);
        assert!(matches!(
            c.direct(&call, &[]),
            Err(FsError::Errno(libc::EAGAIN))
        ));
        assert!(lp.end_call());
        // On a thread it may wait, directly while the cluster answers.
        assert!(matches!(
            c.direct(&Call::thread(&CRED, false), &[]),
            Ok(Some(_))
        ));
    }
}
