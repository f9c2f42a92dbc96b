//! The inotify watch beside each delegated file's lease (`lease.rs`,
//! `rnfsd_fs::watch`): a Linux read lease is not broken by a local
//! chmod, chown, utimes, link, unlink or rename, the watch is, and its
//! event recalls the file's delegations as a lease break does.
//!
//! The server's own changes make events too. Another client's change
//! recalls first and waits (`Delegations::access`), so the only
//! delegations left when a change through the server is made are the
//! changer's own; its event must not recall them when it provably is
//! that change's. Each change through the server on a watched file
//! reads the file's ctime just before (`pre`) and just after (`post`)
//! it; the thread, given an event, reads the ctime now and follows the
//! server's changes from the last ctime it accounted for: the event is
//! the server's own only when that chain of (`pre`, `post`) ends at the
//! ctime now. On a filesystem with multigrain ctimes (ext4, xfs, btrfs,
//! tmpfs since Linux 6.13) every change after a ctime was read gets a
//! later one, so any other change breaks the chain; elsewhere two
//! changes may share a ctime and every event recalls. What stays
//! unproven: a local change in the microseconds between the server's
//! ctime read and its own change (either side).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rnfsd_fs::watch::{Ctime, Wd};

/// Own changes remembered per file between events; more (a burst of
/// the holder's changes with no event read yet) forgets the oldest, so
/// the next event recalls (safe).
const MAX_OWN: usize = 16;
/// An event is judged no later than this after it came, even while a
/// change through the server on its file has not ended (it then
/// recalls).
pub(super) const MAX_DEFER: Duration = Duration::from_secs(1);

/// What an event on a watched file means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Not only the server's own changes: recall.
    Recall,
    /// The server's own change(s): nothing to do.
    Own,
    /// A change through the server is in progress: judge it when it
    /// ended.
    Later,
}

/// The watch on one leased file.
#[derive(Debug)]
pub(super) struct Watch {
    pub wd: Wd,
    /// Every change is told by a distinct ctime (multigrain): only then
    /// can an event be proved the server's own.
    fine: bool,
    /// The ctime every event so far is accounted for up to, and whether
    /// it is the server's own change's (not the lease's first).
    known: Ctime,
    known_own: bool,
    /// Changes through the server in progress.
    changing: u32,
    /// Changes through the server done: their ctime before and after.
    own: VecDeque<(Ctime, Ctime)>,
    /// An event came (when) and is not judged yet.
    pending: Option<Instant>,
}

impl Watch {
    /// Watch `wd`, added when the file's ctime was `now`.
    pub fn new(wd: Wd, now: Ctime, fine: bool) -> Watch {
        Watch {
            wd,
            fine,
            known: now,
            known_own: false,
            changing: 0,
            own: VecDeque::new(),
            pending: None,
        }
    }

    /// An event came at `at`.
    pub fn seen(&mut self, at: Instant) {
        self.pending.get_or_insert(at);
    }

    /// Forgets the event waiting (its delegations are recalled already).
    pub fn clear(&mut self) {
        self.pending = None;
    }

    /// A change through the server starts (its caller read the file's
    /// ctime just before).
    pub fn begin_own(&mut self) {
        self.changing += 1;
    }

    /// A change through the server ended: the file's ctime before it
    /// and after (None: not read, the change is not the server's for
    /// the judgment).
    pub fn end_own(&mut self, pre: Option<Ctime>, post: Option<Ctime>) {
        self.changing = self.changing.saturating_sub(1);
        if let (Some(pre), Some(post)) = (pre, post) {
            if self.own.len() >= MAX_OWN {
                self.own.pop_front();
            }
            self.own.push_back((pre, post));
        }
    }

    /// Judges the pending event given the file's ctime `now` (None: not
    /// readable) at `at`.
    pub fn judge(&mut self, now: Option<Ctime>, at: Instant) -> Verdict {
        let Some(came) = self.pending else {
            return Verdict::Own;
        };
        if self.changing > 0 && at.duration_since(came) < MAX_DEFER {
            return Verdict::Later;
        }
        self.pending = None;
        let (Some(now), true) = (now, self.fine) else {
            return Verdict::Recall;
        };
        // Follow the server's changes from the ctime accounted for.
        let (mut k, mut own) = (self.known, self.known_own);
        while let Some(i) = self.own.iter().position(|(pre, _)| *pre == k) {
            if let Some((_, post)) = self.own.remove(i) {
                if post != k {
                    (k, own) = (post, true);
                }
            }
        }
        self.own.clear();
        if own && k == now && self.changing == 0 {
            (self.known, self.known_own) = (now, true);
            Verdict::Own
        } else {
            Verdict::Recall
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Ctime {
        (s, 0)
    }

    fn event(w: &mut Watch, now: Ctime) -> Verdict {
        w.seen(Instant::now());
        w.judge(Some(now), Instant::now())
    }

    #[test]
    fn an_event_nothing_explains_recalls() {
        // Even with the ctime unchanged (a change between the watch and
        // its first ctime read).
        let mut w = Watch::new(1, t(10), true);
        assert_eq!(event(&mut w, t(10)), Verdict::Recall);
        let mut w = Watch::new(1, t(10), true);
        assert_eq!(event(&mut w, t(11)), Verdict::Recall);
    }

    #[test]
    fn the_servers_own_changes_do_not_recall() {
        let mut w = Watch::new(1, t(10), true);
        w.begin_own();
        w.end_own(Some(t(10)), Some(t(11)));
        assert_eq!(event(&mut w, t(11)), Verdict::Own);
        // Its second event (IN_MOVE_SELF after IN_ATTRIB, read later):
        // nothing new.
        assert_eq!(event(&mut w, t(11)), Verdict::Own);
        // Two own changes, their events coalesced.
        for (a, b) in [(11, 12), (12, 13)] {
            w.begin_own();
            w.end_own(Some(t(a)), Some(t(b)));
        }
        assert_eq!(event(&mut w, t(13)), Verdict::Own);
    }

    #[test]
    fn a_local_change_before_or_after_an_own_one_recalls() {
        // Before: the own change did not start from the ctime known.
        let mut w = Watch::new(1, t(10), true);
        w.begin_own();
        w.end_own(Some(t(11)), Some(t(12)));
        assert_eq!(event(&mut w, t(12)), Verdict::Recall);
        // After: the ctime now is past the own change's.
        let mut w = Watch::new(1, t(10), true);
        w.begin_own();
        w.end_own(Some(t(10)), Some(t(11)));
        assert_eq!(event(&mut w, t(12)), Verdict::Recall);
        // After an own change already judged.
        let mut w = Watch::new(1, t(10), true);
        w.begin_own();
        w.end_own(Some(t(10)), Some(t(11)));
        assert_eq!(event(&mut w, t(11)), Verdict::Own);
        assert_eq!(event(&mut w, t(12)), Verdict::Recall);
    }

    #[test]
    fn coarse_ctimes_or_none_always_recall() {
        let mut w = Watch::new(1, t(10), false);
        w.begin_own();
        w.end_own(Some(t(10)), Some(t(11)));
        assert_eq!(event(&mut w, t(11)), Verdict::Recall);
        let mut w = Watch::new(1, t(10), true);
        w.begin_own();
        w.end_own(Some(t(10)), Some(t(11)));
        w.seen(Instant::now());
        assert_eq!(w.judge(None, Instant::now()), Verdict::Recall);
        // An own change whose ctimes were not read explains nothing.
        let mut w = Watch::new(1, t(10), true);
        w.begin_own();
        w.end_own(Some(t(10)), None);
        assert_eq!(event(&mut w, t(11)), Verdict::Recall);
    }

    #[test]
    fn an_event_during_an_own_change_waits_for_its_end_within_a_bound() {
        let mut w = Watch::new(1, t(10), true);
        w.begin_own();
        let came = Instant::now();
        w.seen(came);
        assert_eq!(w.judge(Some(t(11)), came), Verdict::Later);
        w.end_own(Some(t(10)), Some(t(11)));
        assert_eq!(w.judge(Some(t(11)), came), Verdict::Own);
        // One that never ends: recalled after MAX_DEFER.
        w.begin_own();
        w.seen(came);
        assert_eq!(w.judge(Some(t(11)), came + MAX_DEFER), Verdict::Recall);
    }

    #[test]
    fn own_changes_are_bounded() {
        let mut w = Watch::new(1, t(0), true);
        for i in 0..(MAX_OWN as i64 + 1) {
            w.begin_own();
            w.end_own(Some(t(i)), Some(t(i + 1)));
        }
        assert_eq!(w.own.len(), MAX_OWN);
        // The first was forgotten: the chain from t(0) breaks.
        assert_eq!(event(&mut w, t(MAX_OWN as i64 + 1)), Verdict::Recall);
    }
}
