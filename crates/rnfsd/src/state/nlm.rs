//! NLM's callbacks in flight (`Server::nlm_callbacks`), bounded per server
//! and per client address.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::limits::MAX_CALLBACKS;

/// Default of `nlm_callbacks_per_client`.
pub const DEFAULT_CALLBACKS_PER_CLIENT: usize = 8;

/// The callbacks a server has in flight (`Server::nlm_callbacks`), in
/// all and per client address, so one slow client cannot take every
/// place; a clone counts into the same totals.
#[derive(Debug, Default, Clone)]
pub struct Callbacks(Arc<Slots>);

#[derive(Debug)]
struct Slots {
    /// (in flight, in flight per client address).
    used: Mutex<(usize, HashMap<IpAddr, usize>)>,
    per_client: AtomicUsize,
}

impl Default for Slots {
    fn default() -> Self {
        Slots {
            used: Mutex::default(),
            per_client: AtomicUsize::new(DEFAULT_CALLBACKS_PER_CLIENT),
        }
    }
}

/// One callback's place, given back when dropped: sent, failed, or its
/// thread not started.
pub(crate) struct Slot(Arc<Slots>, IpAddr);

impl Callbacks {
    /// At most `n` (at least 1) callbacks to one client at once
    /// (`nlm_callbacks_per_client`).
    pub fn set_per_client(&self, n: usize) {
        self.0.per_client.store(n.max(1), Ordering::Relaxed);
    }

    /// A place for one more callback to `peer`; None when all are taken,
    /// or all of that client's.
    pub(crate) fn slot(&self, peer: IpAddr) -> Option<Slot> {
        let per_client = self.0.per_client.load(Ordering::Relaxed);
        let mut u = self.0.used.lock().unwrap_or_else(|e| e.into_inner());
        let (total, per) = &mut *u;
        let mine = per.entry(peer).or_default();
        if *total >= MAX_CALLBACKS || *mine >= per_client {
            if *mine == 0 {
                per.remove(&peer);
            }
            return None;
        }
        *mine += 1;
        *total += 1;
        Some(Slot(self.0.clone(), peer))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut u = self.0.used.lock().unwrap_or_else(|e| e.into_inner());
        let (total, per) = &mut *u;
        // This slot was counted when taken, and is given back once.
        debug_assert!(*total > 0, "a callback slot given back twice");
        *total = total.saturating_sub(1);
        if let Some(n) = per.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                per.remove(&self.1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Server;

    fn server() -> Server {
        Server::new(
            vec![],
            Arc::new(rnfsd_fs::WriteVerifier::new([0; 8])),
            4096,
            None,
        )
    }

    #[test]
    fn each_server_bounds_its_own_callbacks() {
        let (a, b) = (server(), server());
        let ip = |i: u8| IpAddr::from([10, 0, 0, i]);
        let full: Vec<Slot> = (0..MAX_CALLBACKS)
            .map(|i| {
                let peer = ip((i / DEFAULT_CALLBACKS_PER_CLIENT) as u8);
                a.nlm_callbacks.slot(peer).expect("a free slot")
            })
            .collect();
        assert!(a.nlm_callbacks.slot(ip(200)).is_none());
        // A clone (as a GRANTED callback holds) counts into the same total.
        assert!(a.nlm_callbacks.clone().slot(ip(200)).is_none());
        // The other server's callbacks are not held up by this one's.
        let other = b.nlm_callbacks.slot(ip(200));
        assert!(other.is_some());
        drop(full);
        assert!(a.nlm_callbacks.slot(ip(200)).is_some());
    }

    /// One client's callbacks cannot take every place: another client's
    /// still go out.
    #[test]
    fn one_client_holds_at_most_its_share_of_callbacks() {
        let a = server();
        a.nlm_callbacks.set_per_client(3);
        let slow = IpAddr::from([10, 0, 0, 1]);
        let held: Vec<Slot> = (0..3)
            .map(|_| a.nlm_callbacks.slot(slow).expect("a free slot"))
            .collect();
        assert!(a.nlm_callbacks.slot(slow).is_none());
        assert!(a.nlm_callbacks.slot(IpAddr::from([10, 0, 0, 2])).is_some());
        drop(held);
        assert!(a.nlm_callbacks.slot(slow).is_some());
        assert_eq!(
            a.nlm_callbacks.0.used.lock().unwrap().1.len(),
            0,
            "no entry kept for clients with none in flight"
        );
    }

    #[test]
    fn the_per_client_default_is_the_keys() {
        let s = crate::config::ServerConfig::default();
        assert_eq!(s.nlm_callbacks_per_client, DEFAULT_CALLBACKS_PER_CLIENT);
    }
}
