//! Wakes the reaper thread early (a client was dropped) or stops it:
//! below the sessions, which drop clients, and the reaper, which waits.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::shards::locked;

/// Wakes the reaper thread early (a client was dropped) or stops it.
#[derive(Default)]
pub(crate) struct Wake {
    m: Mutex<(bool, bool)>,
    cv: Condvar,
}

impl Wake {
    pub(crate) fn kick(&self) {
        locked(&self.m).0 = true;
        self.cv.notify_all();
    }

    pub(crate) fn stop(&self) {
        locked(&self.m).1 = true;
        self.cv.notify_all();
    }

    /// Waits for a kick, a stop or `d`: false once stopped.
    pub(crate) fn wait(&self, d: Duration) -> bool {
        let g = locked(&self.m);
        let (mut g, _) = self
            .cv
            .wait_timeout_while(g, d, |(kicked, stop)| !*kicked && !*stop)
            .unwrap_or_else(|e| e.into_inner());
        g.0 = false;
        !g.1
    }
}
