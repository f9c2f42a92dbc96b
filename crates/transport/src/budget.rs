//! The clients (one per address) and the fair sharing of
//! `max_buffered_bytes` among them.
//!
//! Every byte counted against the budget (partial and whole records,
//! records in a worker with the room reserved for their replies, queued
//! replies) is also counted on the client whose connection holds it, so
//! that one client cannot pin the budget for all. Past the budget, or
//! when a call finds no room in it, the budget is under pressure, and each
//! client is held to its share: the budget divided among the active
//! clients (holding bytes now or lately), never less than `floor` (one
//! largest record and one read, so a large READ always fits). Under
//! pressure a call that needs room is taken only if it fits its client's
//! share, room in the budget or not: a client within its share is served
//! with the budget spent, and room that frees does not go to a client
//! over its share. Past the budget, a client at or over its share is not
//! read.
//!
//! A client held by its share (over it, or with calls or reads waiting for
//! it) that lets go of nothing (no reply bytes taken by its sockets, no
//! call finished, no connection closed) for `hog_after` is disconnected,
//! which frees what it holds: a client that never reads its replies, once
//! its sockets' buffers are full, or that sends part of a record and
//! stops. A client that drains, however slowly, is only held to its
//! share.
//!
//! A periodic check, run by whichever loop finds it due while the budget
//! is under pressure, counts the active clients, publishes the share and
//! finds the clients to disconnect; it visits each client once (there is
//! at most one per open connection).

use crate::limits::{ACTIVE_FOR_MIN, CHECK_EVERY_MAX, CHECK_EVERY_MIN};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

/// One client address: what its connections hold against the budget.
/// Shared by its connections; the clients map keeps it while it has one.
pub(crate) struct Client {
    pub ip: IpAddr,
    /// Bytes ever counted / let go (the difference is what it holds now):
    /// two monotonic counters, so that adding or letting go of anything is
    /// visible.
    counts: CachePadded<(AtomicU64, AtomicU64)>,
    /// A call or read of it waited for its share since the last check.
    waiting: AtomicBool,
    /// Disconnect every connection of this client (it hogged the budget).
    evicted: AtomicBool,
}

impl Client {
    fn new(ip: IpAddr) -> Client {
        Client {
            ip,
            counts: CachePadded::new((AtomicU64::new(0), AtomicU64::new(0))),
            waiting: AtomicBool::new(false),
            evicted: AtomicBool::new(false),
        }
    }

    pub fn add(&self, n: u64) {
        if n > 0 {
            self.counts.0.fetch_add(n, SeqCst);
        }
    }

    pub fn let_go(&self, n: u64) {
        if n > 0 {
            self.counts.1.fetch_add(n, SeqCst);
        }
    }

    /// Bytes held now. Let-go first: every byte let go was counted before,
    /// so the difference read this way is never below the truth's floor.
    pub fn bytes(&self) -> u64 {
        let out = self.counts.1.load(SeqCst);
        self.counts.0.load(SeqCst).saturating_sub(out)
    }

    fn added_total(&self) -> u64 {
        self.counts.0.load(SeqCst)
    }

    fn let_go_total(&self) -> u64 {
        self.counts.1.load(SeqCst)
    }

    /// A call or read of this client waits for its share.
    pub fn waits(&self) {
        if !self.waiting.load(SeqCst) {
            self.waiting.store(true, SeqCst);
        }
    }

    pub fn evicted(&self) -> bool {
        self.evicted.load(SeqCst)
    }
}

/// A client held by its share: since when it let go of nothing, and how
/// much it had let go then.
struct Held {
    since: Instant,
    let_go: u64,
}

struct Slot {
    client: Arc<Client>,
    /// Open connections (accepted and not yet released).
    conns: usize,
    /// Bytes it had ever counted at the last check, and when a check last
    /// saw it hold or add bytes.
    added_seen: u64,
    active: Option<Instant>,
    held: Option<Held>,
}

/// All clients with an open connection, and the share.
pub(crate) struct Clients {
    map: Mutex<HashMap<IpAddr, Slot>>,
    max_per_client: usize,
    /// `max_buffered_bytes` (0: no budget, no shares).
    budget: u64,
    /// The least share.
    floor: u64,
    /// Disconnect a client held by its share this long while it lets go
    /// of nothing (None: never).
    hog_after: Option<Duration>,
    every: Duration,
    active_for: Duration,
    base: Instant,
    /// When the next check is due (ns after `base`); claimed by the loop
    /// that runs it.
    next_check: AtomicU64,
    /// The share published by the last check (u64::MAX: none yet).
    share: AtomicU64,
    /// Checks run (a loop retries the connections it stopped for their
    /// client's share after each).
    epoch: AtomicU64,
    /// Clients disconnected for hogging.
    pub hogs_closed: AtomicU64,
}

impl Clients {
    pub fn new(max_per_client: usize, budget: usize, floor: usize, hog_after: Duration) -> Self {
        let every = (hog_after / 8).clamp(CHECK_EVERY_MIN, CHECK_EVERY_MAX);
        Clients {
            map: Mutex::new(HashMap::new()),
            max_per_client,
            budget: budget as u64,
            floor: floor as u64,
            hog_after: (!hog_after.is_zero()).then_some(hog_after),
            every,
            active_for: hog_after.saturating_mul(2).max(ACTIVE_FOR_MIN),
            base: Instant::now(),
            next_check: AtomicU64::new(0),
            share: AtomicU64::new(u64::MAX),
            epoch: AtomicU64::new(0),
            hogs_closed: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<IpAddr, Slot>> {
        // Nothing panics under this lock except allocation failure.
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One more connection from `ip`: its client (made if it is the
    /// first), or None if the address is at the per-client limit or being
    /// disconnected.
    pub fn admit(&self, ip: IpAddr) -> Option<Arc<Client>> {
        let mut m = self.lock();
        let slot = m.entry(ip).or_insert_with(|| Slot {
            client: Arc::new(Client::new(ip)),
            conns: 0,
            added_seen: 0,
            active: None,
            held: None,
        });
        if (self.max_per_client > 0 && slot.conns >= self.max_per_client) || slot.client.evicted() {
            if slot.conns == 0 {
                m.remove(&ip);
            }
            return None;
        }
        slot.conns += 1;
        Some(slot.client.clone())
    }

    /// A connection from `ip` is gone (every path that undoes an admit).
    pub fn release(&self, ip: IpAddr) {
        let mut m = self.lock();
        if let Some(s) = m.get_mut(&ip) {
            s.conns -= 1;
            if s.conns == 0 {
                m.remove(&ip);
            }
        }
    }

    /// The share of the last check; the floor before the first one.
    pub fn share(&self) -> u64 {
        match self.share.load(SeqCst) {
            u64::MAX => self.floor.max(self.budget),
            s => s,
        }
    }

    pub fn epoch(&self) -> u64 {
        self.epoch.load(SeqCst)
    }

    /// When the next check is due.
    pub fn next_check(&self) -> Instant {
        self.base + Duration::from_nanos(self.next_check.load(SeqCst))
    }

    /// The budget is under pressure: a check ran within the last two
    /// periods (checks run only while the budget is spent or calls wait
    /// for a share).
    pub fn pressed(&self, now: Instant) -> bool {
        let next = self.next_check.load(SeqCst);
        next > 0 && self.ns(now) < next.saturating_add(self.ns_every())
    }

    fn ns_every(&self) -> u64 {
        u64::try_from(self.every.as_nanos()).unwrap_or(u64::MAX)
    }

    fn ns(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Run the check if it is due and no other loop took it. Returns
    /// whether a client was marked for disconnection (the caller tells
    /// every loop to close its connections).
    pub fn check_if_due(&self, now: Instant) -> bool {
        if self.budget == 0 {
            return false;
        }
        let due = self.next_check.load(SeqCst);
        let t = self.ns(now);
        if t < due {
            return false;
        }
        let next = self.ns(now + self.every);
        if self
            .next_check
            .compare_exchange(due, next, SeqCst, SeqCst)
            .is_err()
        {
            return false;
        }
        self.check(now)
    }

    fn check(&self, now: Instant) -> bool {
        let mut m = self.lock();
        let mut active = 0u64;
        for s in m.values_mut() {
            let added = s.client.added_total();
            if added != s.added_seen || s.client.bytes() > 0 {
                s.added_seen = added;
                s.active = Some(now);
            }
            if s.active
                .is_some_and(|t| now.saturating_duration_since(t) < self.active_for)
            {
                active += 1;
            }
        }
        let share = (self.budget / active.max(1)).max(self.floor);
        self.share.store(share, SeqCst);
        let mut evict = false;
        for s in m.values_mut() {
            let c = &s.client;
            let bytes = c.bytes();
            let waited = c.waiting.swap(false, SeqCst);
            // Held by its share: over it, or wanting more than it allows.
            if !(bytes > share || (waited && bytes > 0)) || c.evicted() {
                s.held = None;
                continue;
            }
            let let_go = c.let_go_total();
            match &mut s.held {
                // It let go of something: it drains.
                Some(h) if let_go != h.let_go => {
                    h.since = now;
                    h.let_go = let_go;
                }
                Some(h) => {
                    let held_for = now.saturating_duration_since(h.since);
                    if self.hog_after.is_some_and(|d| held_for >= d) {
                        tracing::warn!(
                            client = %c.ip,
                            "client held {bytes} bytes of max_buffered_bytes ({}), its share \
                             being {share}, and drained nothing for {held_for:?}; closing its {} \
                             connections",
                            self.budget,
                            s.conns
                        );
                        c.evicted.store(true, SeqCst);
                        self.hogs_closed.fetch_add(1, SeqCst);
                        evict = true;
                    }
                }
                None => {
                    s.held = Some(Held { since: now, let_go });
                }
            }
        }
        drop(m);
        self.epoch.fetch_add(1, SeqCst);
        evict
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn the_share_is_the_budget_over_active_clients_never_below_the_floor() {
        let cs = Clients::new(0, 1000, 100, Duration::from_secs(1));
        let t0 = Instant::now();
        let a = cs.admit(ip(1)).unwrap();
        assert_eq!(cs.share(), 1000, "before any check: the whole budget");
        a.add(10);
        cs.check(t0);
        assert_eq!(cs.share(), 1000);
        let b = cs.admit(ip(2)).unwrap();
        b.add(10);
        cs.check(t0 + MS);
        assert_eq!(cs.share(), 500);
        // A client that held bytes lately still counts (twice hog_after).
        b.let_go(10);
        cs.check(t0 + 1500 * MS);
        assert_eq!(cs.share(), 500);
        cs.check(t0 + 2500 * MS);
        assert_eq!(cs.share(), 1000, "b is no longer active");
        // Twenty active clients: a tenth each would be 50, under the floor.
        let more: Vec<_> = (10..30).map(|i| cs.admit(ip(i)).unwrap()).collect();
        more.iter().for_each(|c| c.add(1));
        cs.check(t0 + 2600 * MS);
        assert_eq!(cs.share(), 100);
    }

    #[test]
    fn a_client_held_by_its_share_that_lets_go_of_nothing_is_marked_after_hog_after() {
        let hog_after = Duration::from_secs(1);
        let cs = Clients::new(0, 1000, 100, hog_after);
        let t0 = Instant::now();
        let hog = cs.admit(ip(2)).unwrap();
        let good = cs.admit(ip(1)).unwrap();
        hog.add(900);
        good.add(300);
        assert!(!cs.check(t0));
        assert_eq!(cs.share(), 500);
        // Letting go of anything restarts the clock.
        assert!(!cs.check(t0 + 800 * MS));
        hog.let_go(1);
        assert!(!cs.check(t0 + 1200 * MS));
        assert!(!hog.evicted());
        // The good client within its share is never marked, however long.
        assert!(!cs.check(t0 + 2100 * MS));
        assert!(
            cs.check(t0 + 2200 * MS),
            "over its share for 1 s, nothing let go"
        );
        assert!(hog.evicted() && !good.evicted());
        assert_eq!(cs.hogs_closed.load(SeqCst), 1);
        // Marked once; no new connection meanwhile.
        assert!(!cs.check(t0 + 3000 * MS));
        assert!(cs.admit(ip(2)).is_none());
        // Once its connections are gone the address starts afresh.
        cs.release(ip(2));
        let again = cs.admit(ip(2)).unwrap();
        assert!(!again.evicted() && again.bytes() == 0);
    }

    #[test]
    fn a_client_at_its_share_with_calls_waiting_that_lets_go_of_nothing_is_marked() {
        let cs = Clients::new(0, 1000, 100, Duration::from_secs(1));
        let t0 = Instant::now();
        let a = cs.admit(ip(1)).unwrap();
        let b = cs.admit(ip(2)).unwrap();
        a.add(450);
        b.add(450);
        // Within its share and wanting nothing more: never held.
        for ms in [0, 1100, 2200] {
            assert!(!cs.check(t0 + ms * MS));
        }
        // Its calls wait for the share (each retry after a check says so),
        // and nothing it holds moves.
        for ms in [2300, 2800, 3200] {
            a.waits();
            assert!(!cs.check(t0 + ms * MS));
        }
        a.waits();
        assert!(cs.check(t0 + 3300 * MS));
        assert!(a.evicted() && !b.evicted());
        // Over its share and waiting, but draining: never marked.
        let cs = Clients::new(0, 1000, 100, Duration::from_secs(1));
        let c = cs.admit(ip(3)).unwrap();
        c.add(2000);
        for ms in (0..5000).step_by(100) {
            c.waits();
            c.let_go(1);
            c.add(1);
            assert!(!cs.check(t0 + ms * MS));
        }
    }

    #[test]
    fn no_disconnection_with_a_zero_hog_time_and_the_per_client_limit_holds() {
        let cs = Clients::new(2, 1000, 100, Duration::ZERO);
        let t0 = Instant::now();
        let a = cs.admit(ip(1)).unwrap();
        let a2 = cs.admit(ip(1)).unwrap();
        assert!(Arc::ptr_eq(&a, &a2), "one client per address");
        assert!(cs.admit(ip(1)).is_none(), "per-client limit");
        a.add(5000);
        for s in 0..100 {
            assert!(!cs.check(t0 + Duration::from_secs(s)));
        }
        cs.release(ip(1));
        assert!(cs.admit(ip(1)).is_some());
        cs.release(ip(1));
        cs.release(ip(1));
        assert!(cs.lock().is_empty(), "dropped with its last connection");
    }

    #[test]
    fn a_check_is_run_by_one_loop_per_period() {
        let cs = Clients::new(0, 1000, 100, Duration::from_secs(1));
        let t0 = Instant::now();
        let e0 = cs.epoch();
        cs.check_if_due(t0);
        cs.check_if_due(t0);
        assert_eq!(cs.epoch(), e0 + 1);
        assert!(cs.next_check() > t0);
        cs.check_if_due(t0 + CHECK_EVERY_MAX);
        assert_eq!(cs.epoch(), e0 + 2);
        // No budget: no checks.
        let none = Clients::new(0, 0, 100, Duration::from_secs(1));
        none.check_if_due(t0);
        assert_eq!(none.epoch(), 0);
    }
}
