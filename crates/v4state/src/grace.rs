//! The grace period after a restart (RFC 8881 §8.4.2): only reclaims are
//! allowed in it (CLAIM_PREVIOUS opens, reclaim locks), and only by the
//! clients recorded before the restart; new opens and locks wait
//! (NFS4ERR_GRACE). It ends when every recorded client has sent
//! RECLAIM_COMPLETE (§18.51), at once when no client was recorded, or at
//! the time limit.
//!
//! One [`Grace`] can serve every lock manager of the server: the NLM lock
//! manager (crates/lockd) would consult [`Grace::in_grace`] instead of its
//! own clock, and take a [`GraceHold`] when its hosts file says NLM
//! clients may reclaim (it has no RECLAIM_COMPLETE, so its hold keeps the
//! grace to the time limit unless released).

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::ids::{ms, Clock};
use crate::shards::locked;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The server is not listening yet: the clock has not started.
    NotStarted,
    /// Until this time (the state's clock, ms).
    Until(u64),
    Over,
}

/// The server's grace period.
pub struct Grace {
    clock: Arc<Clock>,
    limit_ms: u64,
    m: Mutex<Inner>,
    holds: AtomicUsize,
}

struct Inner {
    phase: Phase,
    /// The owners recorded before the restart.
    known: HashSet<Vec<u8>>,
    /// Those of them that have not sent RECLAIM_COMPLETE.
    pending: HashSet<Vec<u8>>,
}

/// Another lock manager's claim on the grace period: it does not end
/// before the time limit while held (dropping it releases it).
pub struct GraceHold {
    g: Arc<Grace>,
}

impl Drop for GraceHold {
    fn drop(&mut self) {
        self.g.holds.fetch_sub(1, Ordering::AcqRel);
        self.g.maybe_end();
    }
}

impl Grace {
    /// A grace period of at most `limit` for the clients whose owners are
    /// `previous` (known before the restart), with its own clock.
    pub fn new(limit: Duration, previous: Vec<Vec<u8>>) -> Arc<Grace> {
        Self::with_clock(Arc::new(Clock::default()), limit, previous)
    }

    pub(crate) fn with_clock(
        clock: Arc<Clock>,
        limit: Duration,
        previous: Vec<Vec<u8>>,
    ) -> Arc<Grace> {
        let known: HashSet<Vec<u8>> = previous.into_iter().collect();
        Arc::new(Grace {
            clock,
            limit_ms: ms(limit),
            m: Mutex::new(Inner {
                phase: Phase::NotStarted,
                pending: known.clone(),
                known,
            }),
            holds: AtomicUsize::new(0),
        })
    }

    /// Starts the clock (once the server listens: clients cannot reclaim
    /// before). With no client known and no hold, the grace period is
    /// over at once.
    pub fn start(&self) {
        let mut g = locked(&self.m);
        if g.phase == Phase::NotStarted {
            g.phase = Phase::Until(self.clock.now_ms().saturating_add(self.limit_ms));
            tracing::info!(clients = g.known.len(), "nfsv4: grace period started");
        }
        drop(g);
        self.maybe_end();
    }

    /// Whether only reclaims are allowed now.
    pub fn in_grace(&self) -> bool {
        self.left().is_some()
    }

    /// What is left of it (None: over; before `start`, the whole limit).
    pub fn left(&self) -> Option<Duration> {
        let mut g = locked(&self.m);
        match g.phase {
            Phase::NotStarted => {
                match g.pending.is_empty() && self.holds.load(Ordering::Acquire) == 0 {
                    true => None,
                    false => Some(Duration::from_millis(self.limit_ms)),
                }
            }
            Phase::Until(t) => match t.checked_sub(self.clock.now_ms()) {
                Some(left) if left > 0 => Some(Duration::from_millis(left)),
                _ => {
                    g.phase = Phase::Over;
                    tracing::info!(
                        unreclaimed = g.pending.len(),
                        "nfsv4: grace period over (time limit)"
                    );
                    None
                }
            },
            Phase::Over => None,
        }
    }

    /// Whether it has ended for good.
    pub fn is_over(&self) -> bool {
        !self.in_grace() && locked(&self.m).phase == Phase::Over
    }

    /// Keeps the grace period from ending before its time limit (another
    /// lock manager's clients may reclaim). Take it before `start`.
    pub fn hold(self: &Arc<Self>) -> GraceHold {
        self.holds.fetch_add(1, Ordering::AcqRel);
        GraceHold { g: self.clone() }
    }

    /// Ends it now (the administrator's word).
    pub fn end(&self) {
        let mut g = locked(&self.m);
        if g.phase != Phase::Over {
            g.phase = Phase::Over;
            tracing::info!("nfsv4: grace period ended");
        }
    }

    /// Whether `owner`'s client was recorded before the restart (it may
    /// reclaim).
    pub fn was_known(&self, owner: &[u8]) -> bool {
        locked(&self.m).known.contains(owner)
    }

    /// `owner`'s client sent RECLAIM_COMPLETE: the grace period ends once
    /// every known client has (and nothing holds it).
    pub fn reclaim_complete(&self, owner: &[u8]) {
        locked(&self.m).pending.remove(owner);
        self.maybe_end();
    }

    fn maybe_end(&self) {
        let mut g = locked(&self.m);
        if matches!(g.phase, Phase::Until(_))
            && g.pending.is_empty()
            && self.holds.load(Ordering::Acquire) == 0
        {
            g.phase = Phase::Over;
            tracing::info!("nfsv4: grace period over (every client reclaimed)");
        }
    }

    #[cfg(test)]
    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grace(owners: &[&str]) -> Arc<Grace> {
        Grace::new(
            Duration::from_secs(90),
            owners.iter().map(|o| o.as_bytes().to_vec()).collect(),
        )
    }

    #[test]
    fn none_known_means_none() {
        let g = grace(&[]);
        assert!(!g.in_grace());
        g.start();
        assert!(g.is_over());
    }

    #[test]
    fn ends_when_all_reclaimed() {
        let g = grace(&["a", "b"]);
        assert!(g.in_grace(), "before start: only reclaims");
        g.start();
        assert!(g.was_known(b"a") && !g.was_known(b"c"));
        g.reclaim_complete(b"a");
        assert!(g.in_grace());
        g.reclaim_complete(b"c");
        assert!(g.in_grace(), "an unknown client does not count");
        g.reclaim_complete(b"b");
        assert!(!g.in_grace());
    }

    #[test]
    fn ends_at_the_limit() {
        let g = grace(&["a"]);
        g.start();
        g.clock().advance(Duration::from_secs(89));
        assert!(g.in_grace());
        assert!(g.left().unwrap() <= Duration::from_secs(1));
        g.clock().advance(Duration::from_secs(2));
        assert!(!g.in_grace());
        assert!(g.is_over());
    }

    #[test]
    fn a_hold_keeps_it_to_the_limit_or_its_release() {
        let g = grace(&[]);
        let h = g.hold();
        g.start();
        assert!(g.in_grace(), "NLM clients may reclaim");
        drop(h);
        assert!(!g.in_grace());
        let g = grace(&["a"]);
        let h = g.hold();
        g.start();
        g.reclaim_complete(b"a");
        assert!(g.in_grace());
        g.clock().advance(Duration::from_secs(91));
        assert!(!g.in_grace());
        drop(h);
    }
}
