//! Blocked lock requests: one thread retries them every `retry` and at
//! once when an unlock here (or a new waiter) kicks it. A lock freed by a
//! local program is seen at the next retry: the kernel has no way to tell
//! us of it short of a thread per waiter sleeping in F_OFD_SETLKW, which
//! a bounded pool could not cancel cleanly.

use std::sync::{Arc, Weak};

use super::{Held, LockManager, Ranges};

pub(super) fn start(m: &Arc<LockManager>) {
    let w: Weak<LockManager> = Arc::downgrade(m);
    let spawned = std::thread::Builder::new()
        .name("rnfsd-lockd".into())
        .spawn(move || loop {
            let Some(m) = w.upgrade() else {
                return;
            };
            {
                let t = m.lock_table();
                let _ = m.kick.wait_timeout(t, m.limits.retry);
            }
            m.retry_waiters();
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
        // Descriptors for owners that have none yet, opened unlocked.
        let missing: Vec<_> = {
            let t = self.lock_table();
            if t.waiters.is_empty() && !t.maybe_idle {
                return;
            }
            t.waiters
                .iter()
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
            .filter_map(|(k, b, c, fh)| b.open_for_locks(&c, &fh).ok().map(|f| (k, f)))
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
            }
            t.maybe_idle = false;
        }
        for g in granted {
            g();
        }
    }
}
