//! Blocked lock requests: one thread retries them every `retry` and at
//! once when an unlock here (or a new waiter) kicks it. A lock freed by a
//! local program is seen at the next retry: the kernel has no way to tell
//! us of it short of a thread per waiter sleeping in F_OFD_SETLKW, which
//! a bounded pool could not cancel cleanly. With nothing blocked the
//! thread sleeps until kicked: an idle server makes no wakeups for it.

use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

use super::{Held, LockManager, Ranges};

/// Wakes the retry thread. Its own flag and condvar, not the table's, so
/// the thread sleeps holding only a weak reference to the manager, and
/// the manager's drop stops it.
#[derive(Default)]
pub(super) struct Wake {
    /// (kicked since the last wait, stopped).
    state: Mutex<(bool, bool)>,
    cv: Condvar,
    /// Retry passes made (for the tests).
    pub(super) passes: std::sync::atomic::AtomicU64,
}

impl Wake {
    fn lock(&self) -> std::sync::MutexGuard<'_, (bool, bool)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new waiter, an unlock, a cancel or a host's locks freed.
    pub(super) fn kick(&self) {
        self.lock().0 = true;
        self.cv.notify_one();
    }

    pub(super) fn stop(&self) {
        self.lock().1 = true;
        self.cv.notify_one();
    }

    /// Sleeps until kicked, stopped or `timeout` has passed (None: no
    /// timeout). False once stopped.
    fn wait(&self, timeout: Option<Duration>) -> bool {
        let mut g = self.lock();
        if !g.0 && !g.1 {
            g = match timeout {
                Some(t) => self
                    .cv
                    .wait_timeout(g, t)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|e| e.into_inner().0),
                None => self.cv.wait(g).unwrap_or_else(|e| e.into_inner()),
            };
        }
        g.0 = false;
        !g.1
    }
}

pub(super) fn start(m: &Arc<LockManager>) {
    let w: Weak<LockManager> = Arc::downgrade(m);
    let wake = m.wake.clone();
    let retry = m.limits.retry;
    let spawned = std::thread::Builder::new()
        .name("rnfsd-lockd".into())
        .spawn(move || loop {
            // The manager is held only for the pass, never while asleep.
            let busy = match w.upgrade() {
                Some(m) => {
                    m.retry_waiters();
                    wake.passes
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    !m.lock_table().waiters.is_empty()
                }
                None => return,
            };
            if !wake.wait(busy.then_some(retry)) {
                return;
            }
        });
    if let Err(e) = spawned {
        // Blocked requests then wait for the client's own retry (the
        // Linux client asks again every 30 s): slower, never wrong.
        tracing::warn!("lock manager: cannot start the retry thread: {e}");
    }
}

impl LockManager {
    /// One pass over the blocked requests: each granted one leaves the
    /// list and its callback runs (outside the table's lock).
    pub(super) fn retry_waiters(&self) {
        // Descriptors for owners that have none yet, opened unlocked (none
        // while the table is full: they could not be kept).
        let missing: Vec<_> = {
            let t = self.lock_table();
            if t.waiters.is_empty() && !t.maybe_idle {
                return;
            }
            let room = t.held.len() < self.limits.max_files;
            t.waiters
                .iter()
                .filter(|_| room)
                .filter(|w| !t.held.contains_key(&(w.file.clone(), w.req.owner.clone())))
                .map(|w| {
                    (
                        (w.file.clone(), w.req.owner.clone()),
                        w.backend.clone(),
                        w.cred.clone(),
                        w.fh.clone(),
                    )
                })
                .collect()
        };
        let opened: Vec<_> = missing
            .into_iter()
            .filter_map(|(k, b, c, fh)| {
                b.open_for_locks(
                    &rnfsd_fs::Call::thread(&c, false),
                    &fh,
                    rnfsd_fs::lock::LockOpen::plain(true),
                )
                .ok()
                .map(|f| (k, f))
            })
            .collect();
        let mut granted = Vec::new();
        {
            let mut t = self.lock_table();
            for (k, file) in opened {
                t.maybe_idle = true;
                if t.held.len() < self.limits.max_files && !t.held.contains_key(&k) {
                    t.insert_held(
                        k,
                        Held {
                            file,
                            ranges: Ranges::default(),
                        },
                    );
                }
            }
            let waiters = std::mem::take(&mut t.waiters);
            for w in waiters {
                let hk = (w.file.clone(), w.req.owner.clone());
                let ok = t.held.get_mut(&hk).is_some_and(|h| {
                    let mut next = h.ranges.clone();
                    let r = &w.req;
                    if !next.set(r.range.start, r.range.end(), r.kind) {
                        return false;
                    }
                    if h.file.lock(r.kind, r.range).unwrap_or(false) {
                        h.ranges = next;
                        true
                    } else {
                        false
                    }
                });
                if ok {
                    granted.push(w.granted);
                } else {
                    t.waiters.push(w);
                }
            }
            // Descriptors holding nothing that nobody waits on.
            let waiting: Vec<_> = t
                .waiters
                .iter()
                .map(|w| (w.file.clone(), w.req.owner.clone()))
                .collect();
            let idle: Vec<_> = t
                .held
                .iter()
                .filter(|(k, h)| h.ranges.is_empty() && !waiting.contains(k))
                .map(|(k, _)| k.clone())
                .collect();
            for k in idle {
                t.remove_held(&k);
                self.settle(&t, k.1.addr);
            }
            t.maybe_idle = false;
        }
        for g in granted {
            g();
        }
    }
}
