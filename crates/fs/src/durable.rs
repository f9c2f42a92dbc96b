//! Group commit (the XFS aio_fsync thread's lesson, docs/lessons.md):
//! durability requests that arrive together share
//! one sync, a bounded number of syncs run at once, and waiters are woken
//! in batches.
//!
//! A request names an object (its identity) and a descriptor to sync it
//! through, after its change is made. It needs a sync that *starts* after
//! it arrived:
//! * a sync of the object already queued (not started) is joined;
//! * a sync of the object running (started before) is not enough: the
//!   request queues the object's next sync, which later requests join;
//! * otherwise the request's thread leads a new sync.
//!
//! At most `max_in_flight` syncs run at once. A leader waits for a slot in
//! FIFO order; a finishing sync hands its slot directly to the next queued
//! leader (and the object's queued sync, if any, goes first in line), so a
//! completion wakes exactly the threads it concerns: the one leader it
//! hands off to, and the batch's own waiters, with one broadcast, only when
//! there are any. Nobody polls, nobody is woken for nothing.
//!
//! Hand-written: the coalescing rule (join a queued sync, never a running
//! one) and the direct slot handoff are the point; no crate offers them.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// One sync of one object and the requests it answers.
struct Batch {
    state: Mutex<Phase>,
    cv: Condvar,
}

#[derive(Clone)]
enum Phase {
    /// Waiting for the object's running sync to end and for a slot.
    Queued {
        waiters: usize,
    },
    /// Its leader holds a slot and syncs.
    Granted {
        waiters: usize,
    },
    Done(Result<(), i32>),
}

impl Batch {
    fn new() -> Arc<Batch> {
        Arc::new(Batch {
            state: Mutex::new(Phase::Queued { waiters: 1 }),
            cv: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Phase> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

struct PerObject {
    /// Syncs of this object running now (at most `depth`).
    running: usize,
    /// How many may run at once: 1 for an object's own sync; more where a
    /// sync that starts later covers every change before it regardless of
    /// the ones running (a journal commit, see `sync_depth`).
    depth: usize,
    /// The batch not yet started, which new requests join.
    queued: Option<Arc<Batch>>,
    /// Whether `queued` is already in the ready list.
    queued_ready: bool,
}

struct State<K> {
    objects: HashMap<K, PerObject>,
    in_flight: usize,
    /// Batches whose object is free, waiting for a slot, oldest first.
    ready: VecDeque<(K, Arc<Batch>)>,
}

/// Counters: requests, syncs run, requests that joined another's sync.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CommitCounts {
    pub requests: u64,
    pub syncs: u64,
    pub joined: u64,
    pub errors: u64,
    /// Most syncs running at once.
    pub peak_in_flight: u64,
    /// Requests whose reply waited for the sync with no thread waiting
    /// (`crate::owed`).
    pub parked: u64,
    /// Commits a calling thread made itself, nothing else committing
    /// (`crate::owed::Commits::lead`; its sync counted with the rest).
    pub led: u64,
    /// Parked requests whose data write-back the commit thread waited for
    /// before its commit (`crate::owed::Before`).
    pub waited_before: u64,
}

impl CommitCounts {
    /// Both sets of counts (the most in flight: at most their sum).
    pub fn plus(&self, o: &CommitCounts) -> CommitCounts {
        CommitCounts {
            requests: self.requests + o.requests,
            syncs: self.syncs + o.syncs,
            joined: self.joined + o.joined,
            errors: self.errors + o.errors,
            peak_in_flight: self.peak_in_flight + o.peak_in_flight,
            parked: self.parked + o.parked,
            led: self.led + o.led,
            waited_before: self.waited_before + o.waited_before,
        }
    }
}

pub struct Committer<K> {
    state: Mutex<State<K>>,
    counts: Mutex<CommitCounts>,
    max_in_flight: usize,
}

impl<K: Hash + Eq + Clone> Committer<K> {
    pub fn new(max_in_flight: usize) -> Committer<K> {
        Committer {
            state: Mutex::new(State {
                objects: HashMap::new(),
                in_flight: 0,
                ready: VecDeque::new(),
            }),
            counts: Mutex::new(CommitCounts::default()),
            max_in_flight: max_in_flight.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn count(&self, f: impl FnOnce(&mut CommitCounts)) {
        f(&mut self.counts.lock().unwrap_or_else(|e| e.into_inner()));
    }

    pub fn counts(&self) -> CommitCounts {
        *self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes `key`'s changes so far durable, sharing a sync with concurrent
    /// requests for the same object. `sync` runs (on this thread) only if
    /// this request leads the batch; every request of the batch gets its
    /// result (an errno on failure).
    pub fn sync(&self, key: &K, sync: impl FnOnce() -> io::Result<()>) -> Result<(), i32> {
        self.sync_depth(key, 1, sync)
    }

    /// As `sync`, but up to `depth` syncs of `key` may run at once: for a
    /// sync that covers every change made before it *starts*, whatever
    /// runs already (a journal commit: jbd2 and the XFS log commit in
    /// order). A batch is joinable until its leader is granted a slot;
    /// `sync` is called after that, so every joined change precedes it.
    /// `depth` is fixed per key (the first request's value holds).
    pub fn sync_depth(
        &self,
        key: &K,
        depth: usize,
        sync: impl FnOnce() -> io::Result<()>,
    ) -> Result<(), i32> {
        self.sync_depth_alone(key, depth, |_| sync())
    }

    /// As `sync_depth`, telling `sync` whether the batch answers this
    /// request alone: granted a slot the moment it was made, under the
    /// state lock, so no other request could see it to join. A sync that
    /// covers only this request's own change is then enough.
    pub fn sync_depth_alone(
        &self,
        key: &K,
        depth: usize,
        sync: impl FnOnce(bool) -> io::Result<()>,
    ) -> Result<(), i32> {
        self.count(|c| c.requests += 1);
        let mut g = self.lock();
        let obj = g.objects.entry(key.clone()).or_insert(PerObject {
            running: 0,
            depth: depth.max(1),
            queued: None,
            queued_ready: false,
        });
        if let Some(q) = &obj.queued {
            // A sync that has not started yet covers this change: join it.
            let b = q.clone();
            drop(g);
            let joined = {
                let mut p = b.lock();
                match &mut *p {
                    Phase::Queued { waiters } | Phase::Granted { waiters } => {
                        *waiters += 1;
                        true
                    }
                    Phase::Done(_) => false,
                }
            };
            if joined {
                self.count(|c| c.joined += 1);
                return wait_done(&b);
            }
            // It finished between the two locks (it had started after this
            // request arrived, so its result answers it).
            return match &*b.lock() {
                Phase::Done(r) => *r,
                _ => Err(libc::EIO),
            };
        }
        let b = Batch::new();
        let obj_free = obj.running < obj.depth;
        obj.queued = Some(b.clone());
        let mut alone = false;
        if obj_free {
            if g.in_flight < self.max_in_flight && g.ready.is_empty() {
                g.in_flight += 1;
                // Made and closed under this lock: nobody can join it.
                self.grant(&mut g, key, &b);
                alone = true;
            } else {
                if let Some(o) = g.objects.get_mut(key) {
                    o.queued_ready = true;
                }
                g.ready.push_back((key.clone(), b.clone()));
            }
        }
        // Otherwise a running sync of the object queues this batch when it
        // ends.
        drop(g);
        // Lead: wait for the slot, then sync.
        {
            let mut p = b.lock();
            while matches!(*p, Phase::Queued { .. }) {
                p = b.cv.wait(p).unwrap_or_else(|e| e.into_inner());
            }
        }
        let r = sync(alone).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO));
        self.count(|c| {
            c.syncs += 1;
            c.errors += u64::from(r.is_err());
        });
        let waiters = {
            let mut p = b.lock();
            let w = match &*p {
                Phase::Granted { waiters } => *waiters,
                _ => 1,
            };
            *p = Phase::Done(r);
            w
        };
        if waiters > 1 {
            b.cv.notify_all();
        }
        self.finish(key);
        r
    }

    /// Marks `b` (queued for `key`) as running with a slot already taken,
    /// and wakes its leader.
    fn grant(&self, g: &mut State<K>, key: &K, b: &Arc<Batch>) {
        // A slot was taken below the bound, or passed on by a sync that
        // ended.
        debug_assert!(g.in_flight <= self.max_in_flight, "syncs past the slots");
        if let Some(o) = g.objects.get_mut(key) {
            o.running += 1;
            // One batch of an object is queued at a time, and made ready
            // only while fewer than `depth` of its syncs run.
            debug_assert!(o.running <= o.depth, "{} syncs of one object", o.running);
            if o.queued.as_ref().is_some_and(|q| Arc::ptr_eq(q, b)) {
                // Closed: later requests start the next batch.
                o.queued = None;
                o.queued_ready = false;
            }
        }
        let peak = g.in_flight as u64;
        {
            let mut p = b.lock();
            if let Phase::Queued { waiters } = *p {
                *p = Phase::Granted { waiters };
            }
        }
        b.cv.notify_all();
        self.count(|c| c.peak_in_flight = c.peak_in_flight.max(peak));
    }

    /// A sync of `key` ended: its object's queued sync becomes ready, and
    /// the slot goes straight to the oldest ready batch.
    fn finish(&self, key: &K) {
        let mut g = self.lock();
        let mut drop_key = false;
        let mut ready = None;
        if let Some(o) = g.objects.get_mut(key) {
            // This sync was counted when granted: its object's entry stays
            // while a sync of it runs.
            debug_assert!(o.running > 0, "a sync ended that never ran");
            o.running = o.running.saturating_sub(1);
            match o.queued.clone() {
                Some(q) if !o.queued_ready => {
                    o.queued_ready = true;
                    ready = Some(q);
                }
                Some(_) => {}
                None => drop_key = o.running == 0,
            }
        }
        if let Some(q) = ready {
            g.ready.push_back((key.clone(), q));
        }
        if drop_key {
            g.objects.remove(key);
        }
        match g.ready.pop_front() {
            // The slot passes on: in_flight unchanged.
            Some((k, next)) => self.grant(&mut g, &k, &next),
            None => g.in_flight -= 1,
        }
    }
}

fn wait_done(b: &Batch) -> Result<(), i32> {
    let mut p = b.lock();
    loop {
        if let Phase::Done(r) = &*p {
            return *r;
        }
        p = b.cv.wait(p).unwrap_or_else(|e| e.into_inner());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// `threads` threads each make `rounds` requests (key from thread and
    /// round) whose sync takes `ms`; returns (most syncs seen running at
    /// once, syncs run).
    fn hammer(
        c: &Arc<Committer<u32>>,
        threads: usize,
        rounds: usize,
        depth: usize,
        key: fn(usize, usize) -> u32,
        ms: u64,
    ) -> (usize, usize) {
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let syncs = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (c, running, peak, syncs) =
                    (c.clone(), running.clone(), peak.clone(), syncs.clone());
                std::thread::spawn(move || {
                    for i in 0..rounds {
                        let r = c.sync_depth(&key(t, i), depth, || {
                            let n = running.fetch_add(1, Ordering::SeqCst) + 1;
                            peak.fetch_max(n, Ordering::SeqCst);
                            syncs.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(ms));
                            running.fetch_sub(1, Ordering::SeqCst);
                            Ok(())
                        });
                        assert_eq!(r, Ok(()));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        (peak.load(Ordering::SeqCst), syncs.load(Ordering::SeqCst))
    }

    /// A batch granted at once answers its request alone; one that waited
    /// for a slot is not told so, even if nobody joined it.
    #[test]
    fn only_a_batch_granted_at_once_is_alone() {
        let c = Arc::new(Committer::<u32>::new(1));
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let first = {
            let c = c.clone();
            std::thread::spawn(move || {
                let mut seen = None;
                let r = c.sync_depth_alone(&1, usize::MAX, |alone| {
                    seen = Some(alone);
                    started_tx.send(()).unwrap();
                    release_rx.recv().unwrap();
                    Ok(())
                });
                (r, seen)
            })
        };
        started_rx.recv().unwrap();
        // The only slot is taken: these two queue; the second joins the
        // first's batch.
        let queued: Vec<_> = (0..2)
            .map(|_| {
                let c = c.clone();
                let h = std::thread::spawn(move || {
                    let mut seen = None;
                    let r = c.sync_depth_alone(&1, usize::MAX, |alone| {
                        seen = Some(alone);
                        Ok(())
                    });
                    (r, seen)
                });
                // Let it reach the queue before the next one.
                std::thread::sleep(Duration::from_millis(50));
                h
            })
            .collect();
        release_tx.send(()).unwrap();
        assert_eq!(first.join().unwrap(), (Ok(()), Some(true)));
        let seen: Vec<_> = queued.into_iter().map(|h| h.join().unwrap()).collect();
        // One of them led the queued batch (not alone), the other joined it
        // and ran nothing.
        assert!(seen.iter().all(|(r, _)| *r == Ok(())));
        assert_eq!(
            seen.iter().filter(|(_, s)| *s == Some(false)).count(),
            1,
            "{seen:?}"
        );
        assert_eq!(seen.iter().filter(|(_, s)| s.is_none()).count(), 1);
        assert_eq!(c.counts().joined, 1);
    }

    #[test]
    fn concurrent_requests_share_syncs_and_the_bound_holds() {
        let c = Arc::new(Committer::<u32>::new(2));
        // 4 objects, so requests pile up on each.
        let (peak, syncs) = hammer(&c, 32, 20, 1, |t, i| ((t + i) % 4) as u32, 2);
        let k = c.counts();
        assert_eq!(k.requests, 640);
        assert!(peak <= 2, "bound of 2 syncs in flight");
        assert_eq!(k.syncs as usize, syncs);
        assert_eq!(k.syncs + k.joined, 640, "every request synced or joined");
        assert!(
            k.syncs < 320,
            "{} syncs for 640 requests: too little sharing",
            k.syncs
        );
        assert!(c.lock().objects.is_empty() && c.lock().in_flight == 0);
    }

    type Done = std::thread::JoinHandle<Result<(), i32>>;

    /// A first sync of key 7 (at `depth`) that runs until the returned
    /// sender says so, and a second request for 7 made once the first
    /// runs; `ran` counts the second's sync.
    fn second_during_first(
        c: &Arc<Committer<u32>>,
        depth: usize,
    ) -> (std::sync::mpsc::Sender<()>, Done, Done, Arc<AtomicUsize>) {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
        let c1 = c.clone();
        let first = std::thread::spawn(move || {
            c1.sync_depth(&7, depth, || {
                started_tx.send(()).unwrap();
                rx.recv().unwrap();
                Ok(())
            })
        });
        started_rx.recv().unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let (c2, ran2) = (c.clone(), ran.clone());
        let second = std::thread::spawn(move || {
            c2.sync_depth(&7, depth, || {
                ran2.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
        });
        (tx, first, second, ran)
    }

    #[test]
    fn a_running_sync_is_not_joined() {
        // A request that arrives while its object's sync runs must get a
        // sync that starts after it.
        let c = Arc::new(Committer::<u32>::new(4));
        let (release, first, second, ran) = second_during_first(&c, 1);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(ran.load(Ordering::SeqCst), 0, "waits for the running sync");
        release.send(()).unwrap();
        assert_eq!(first.join().unwrap(), Ok(()));
        assert_eq!(second.join().unwrap(), Ok(()));
        assert_eq!(ran.load(Ordering::SeqCst), 1, "a sync of its own ran after");
    }

    #[test]
    fn with_depth_a_later_sync_starts_beside_a_running_one() {
        // Depth 2: a request arriving while one sync runs leads its own at
        // once (it is not joined to the running one, nor made to wait).
        let c = Arc::new(Committer::<u32>::new(8));
        let (release, first, second, ran) = second_during_first(&c, 2);
        assert_eq!(second.join().unwrap(), Ok(()));
        assert_eq!(ran.load(Ordering::SeqCst), 1, "ran while the first ran");
        release.send(()).unwrap();
        assert_eq!(first.join().unwrap(), Ok(()));
        let k = c.counts();
        assert_eq!((k.syncs, k.joined), (2, 0));
        assert!(c.lock().objects.is_empty() && c.lock().in_flight == 0);
    }

    #[test]
    fn with_depth_the_bound_per_key_and_overall_hold() {
        let c = Arc::new(Committer::<u32>::new(3));
        let (peak, _) = hammer(&c, 24, 10, 2, |_, _| 1, 1);
        let k = c.counts();
        assert!(peak <= 2, "depth 2 per key");
        assert_eq!(k.syncs + k.joined, 240);
        assert!(k.joined > 0, "requests that arrive together share");
        assert!(c.lock().objects.is_empty() && c.lock().in_flight == 0);
    }

    #[test]
    fn an_error_reaches_every_waiter_of_the_batch() {
        let c = Arc::new(Committer::<u32>::new(1));
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let c0 = c.clone();
        // Occupy the only slot so the next requests queue and batch.
        let blocker = std::thread::spawn(move || {
            c0.sync(&1, || {
                rx.recv().unwrap();
                Ok(())
            })
        });
        std::thread::sleep(Duration::from_millis(20));
        let waiters: Vec<_> = (0..5)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || {
                    c.sync(&2, || Err(io::Error::from_raw_os_error(libc::EIO)))
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50));
        tx.send(()).unwrap();
        blocker.join().unwrap().unwrap();
        for w in waiters {
            assert_eq!(w.join().unwrap(), Err(libc::EIO));
        }
        let k = c.counts();
        assert_eq!(k.syncs, 2, "one sync for the five queued requests");
        assert_eq!(k.errors, 1);
    }
}
