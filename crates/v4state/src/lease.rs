//! Leases (RFC 8881 §8.3) and the reaper, and revocation by the
//! administrator.
//!
//! Any SEQUENCE of a client renews its lease. A client whose lease ran
//! out (no request of it running) is expired: it leaves the registry, its
//! sessions go at once (BADSESSION), its stateids answer EXPIRED, and the
//! reaper frees what it held in batches of bounded size, off the request
//! path. There are no "courtesy" clients: an expired client's state is
//! not kept for it.
//!
//! At the top with `lock`: a pass expires clients through `session` and
//! frees their stateids through `stateid`; revocation gives back shares
//! through `files`.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::lockfile::LockHeld;
use crate::registry::{Client, ClientHandle};
use crate::shards::locked;
use crate::table::{Body, Revoked};
use crate::wake::Wake;
use crate::State;

/// What one reaper pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reaped {
    /// Clients found with their lease run out.
    pub expired: usize,
    /// Stateids freed.
    pub freed: usize,
    /// Clients whose state is all freed now.
    pub finished: usize,
}

/// The reaper thread: stops when dropped.
pub struct Reaper {
    wake: Arc<Wake>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Reaper {
    fn drop(&mut self) {
        self.wake.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl State {
    /// Starts the reaper: every `every` (and at once when a client is
    /// dropped) it runs [`reap`](State::reap) with `batch`.
    pub fn spawn_reaper(
        self: &Arc<Self>,
        every: Duration,
        batch: usize,
    ) -> std::io::Result<Reaper> {
        let wake = self.wake.clone();
        let state: Weak<State> = Arc::downgrade(self);
        let w = wake.clone();
        let thread = std::thread::Builder::new()
            .name("nfsv4-reaper".into())
            .spawn(move || {
                while w.wait(every) {
                    let Some(s) = state.upgrade() else { return };
                    let r = s.reap(batch);
                    if r.freed > 0 && !locked(&s.doomed).is_empty() {
                        // More to free: go on soon, without hogging.
                        w.kick();
                    }
                }
            })?;
        Ok(Reaper {
            wake,
            thread: Some(thread),
        })
    }

    /// One reaper pass: expires the clients whose lease ran out, then
    /// frees at most about `budget` stateids of dropped clients (a
    /// stateid's own lock stateids go with it), dropping their lock
    /// descriptors with no lock held.
    pub fn reap(&self, budget: usize) -> Reaped {
        let now = self.clock.now_ms();
        let mut out = Reaped::default();
        let over: Vec<Arc<Client>> = locked(&self.registry)
            .by_id
            .values()
            .filter(|c| self.lease_over(c, now))
            .cloned()
            .collect();
        for c in &over {
            self.expire(c);
        }
        out.expired = over.len();
        self.revoke_overdue();
        let mut left = budget.max(1);
        while left > 0 {
            let Some(c) = locked(&self.doomed).pop_front() else {
                break;
            };
            let (freed, n, done) = self.free_some(&c, left);
            drop(freed);
            out.freed += n;
            left = left.saturating_sub(n);
            if done {
                out.finished += 1;
                self.forget_client(&c);
            } else {
                locked(&self.doomed).push_front(c);
            }
        }
        self.stats
            .reaped_stateids
            .fetch_add(out.freed as u64, Ordering::Relaxed);
        self.after_reap();
        out
    }

    /// Work at the end of a reaper pass: once the grace period is over,
    /// the records of the previous run's clients that did not come back
    /// go (once).
    fn after_reap(&self) {
        let Some(r) = &self.records else {
            return;
        };
        if self.grace.is_over() && !self.swept.swap(true, Ordering::AcqRel) {
            match r.sweep(self.ids.boot) {
                Ok(n) => tracing::info!(records = n, "nfsv4: unreclaimed client records removed"),
                Err(e) => {
                    tracing::warn!(error = %e, "nfsv4: client records not swept");
                    self.swept.store(false, Ordering::Release);
                }
            }
        }
    }

    /// Frees up to `n` stateids of dropped client `c`: the descriptors
    /// freed, how many stateids went, whether none is left.
    fn free_some(&self, c: &Client, n: usize) -> (Vec<Arc<LockHeld>>, usize, bool) {
        let mut st = locked(&c.st);
        let before = st.stateids.len();
        let pick: Vec<[u8; 12]> = st.stateids.keys().take(n).copied().collect();
        let mut freed = Vec::new();
        for o in pick {
            freed.extend(self.release_stateid(&mut st, &o));
        }
        debug_assert!(st.sessions.is_empty(), "sessions go when it is dropped");
        (freed, before - st.stateids.len(), st.stateids.is_empty())
    }

    /// Revokes (NFS4ERR_ADMIN_REVOKED until FREE_STATEID) every stateid
    /// on a file `on(file)` selects: after a reload removed its export, as
    /// knfsd's unlock_filesystem. Share reservations and locks go now; the
    /// clients see SEQ4_STATUS_ADMIN_STATE_REVOKED. Returns how many were
    /// revoked.
    pub fn revoke_files(&self, on: impl Fn(&crate::FileKey) -> bool) -> usize {
        let clients: Vec<Arc<Client>> = locked(&self.registry).by_id.values().cloned().collect();
        let mut n = 0;
        for c in clients {
            let mut dropped = Vec::new();
            {
                let mut st = locked(&c.st);
                let mut shares = Vec::new();
                let mut delegs = Vec::new();
                for (other, e) in st.stateids.iter_mut() {
                    if e.revoked.is_some() || !on(&e.file) {
                        continue;
                    }
                    e.revoked = Some(Revoked::Admin);
                    n += 1;
                    match &e.body {
                        Body::Open(o) => shares.push((e.file, o.access, o.deny)),
                        Body::Lock(l) => dropped.push(l.held.revoke()),
                        Body::Delegation { .. } => delegs.push((e.file, *other)),
                    }
                }
                let k = st.stateids.values().filter(|e| e.revoked.is_some()).count();
                st.revoked = k;
                st.delegs = st.delegs.saturating_sub(delegs.len());
                for (file, access, deny) in shares {
                    self.unshare(&file, access, deny);
                }
                for (file, other) in &delegs {
                    self.delegations.fetch_sub(1, Ordering::AcqRel);
                    self.unlist_deleg(file, other);
                }
                if k > 0 {
                    c.has_revoked.store(true, Ordering::Release);
                }
            }
            drop(dropped);
        }
        n
    }

    /// Renews `c`'s lease (for a caller that serves it outside a
    /// SEQUENCE).
    pub fn renew(&self, c: &ClientHandle) {
        c.0.renew(self.clock.now_ms());
    }
}
