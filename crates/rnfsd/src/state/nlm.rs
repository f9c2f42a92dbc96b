//! NLM's callbacks in flight (`Server::nlm_callbacks`), bounded per server.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Callbacks (GRANTED, *_RES) being sent at once; past it a callback is
/// dropped: the client asks again on its own (GRANTED) or its *_MSG
/// times out and is retransmitted. Each takes a thread for up to a few
/// timeouts, so a flood of *_MSG calls cannot make threads without end.
pub const MAX_CALLBACKS: usize = 64;

/// The callbacks a server has in flight (`Server::nlm_callbacks`); a clone
/// counts into the same total.
#[derive(Debug, Default, Clone)]
pub struct Callbacks(Arc<AtomicUsize>);

/// One callback's place among `MAX_CALLBACKS`, given back when dropped:
/// sent, failed, or its thread not started.
pub(crate) struct Slot(Arc<AtomicUsize>);

impl Callbacks {
    /// A place for one more callback; None when all are taken.
    pub(crate) fn slot(&self) -> Option<Slot> {
        if self.0.fetch_add(1, Ordering::AcqRel) >= MAX_CALLBACKS {
            self.0.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Slot(self.0.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
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
        let full: Vec<Slot> = (0..MAX_CALLBACKS)
            .map(|_| a.nlm_callbacks.slot().expect("a free slot"))
            .collect();
        assert!(a.nlm_callbacks.slot().is_none());
        // A clone (as a GRANTED callback holds) counts into the same total.
        assert!(a.nlm_callbacks.clone().slot().is_none());
        // The other server's callbacks are not held up by this one's.
        let other = b.nlm_callbacks.slot();
        assert!(other.is_some());
        drop(full);
        assert!(a.nlm_callbacks.slot().is_some());
    }
}
