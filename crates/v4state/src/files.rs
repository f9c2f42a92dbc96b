//! What all clients hold on each file (RFC 8881 §9.1, §9.4): the share
//! reservations, counted over every open of the file, and the lock
//! stateids on it (to name the owner of a conflicting lock). Share
//! reservations hold across clients and owners: an OPEN whose access
//! another open denies, or whose deny another open's access hits, is
//! NFS4ERR_SHARE_DENIED.
//!
//! One entry per file in `State::files`, gone when it holds nothing.
//! Below the stateid calls, which free shares and lockers with their
//! stateids.

use crate::ids::{ClientId, FileKey};
use crate::lockfile::Locker;
use crate::State;

/// A delegation on a file, as the file lists it (the stateid's entry in
/// its client's table is the truth).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DelegRef {
    pub(crate) client: ClientId,
    pub(crate) other: [u8; 12],
    pub(crate) write: bool,
}

/// The share reservations on one file, counted over all opens: how many
/// hold read / write access, and deny read / write.
#[derive(Default)]
pub(crate) struct FileState {
    access: [u32; 2],
    deny: [u32; 2],
    /// The lock stateids on the file, of all clients.
    pub(crate) lockers: Vec<Locker>,
    /// Opens (each counted once, whatever its bits).
    pub(crate) opens: u32,
    /// The delegations on the file (§10.4).
    pub(crate) delegs: Vec<DelegRef>,
    /// Accesses in progress that a delegation must not be granted
    /// under (an OPEN, a WRITE, a SETATTR, a REMOVE...): see
    /// `State::begin_access`.
    pub(crate) busy: u32,
}

impl FileState {
    pub(crate) fn add(&mut self, access: u32, deny: u32) {
        self.opens += 1;
        for (i, bit) in [1u32, 2].into_iter().enumerate() {
            self.access[i] += u32::from(access & bit != 0);
            self.deny[i] += u32::from(deny & bit != 0);
        }
    }

    pub(crate) fn sub(&mut self, access: u32, deny: u32) {
        debug_assert!(self.opens > 0);
        self.opens = self.opens.saturating_sub(1);
        for (i, bit) in [1u32, 2].into_iter().enumerate() {
            debug_assert!(access & bit == 0 || self.access[i] > 0);
            debug_assert!(deny & bit == 0 || self.deny[i] > 0);
            self.access[i] -= u32::from(access & bit != 0);
            self.deny[i] -= u32::from(deny & bit != 0);
        }
    }

    /// The bits others hold, `own` (access, deny) left out.
    pub(crate) fn others(&self, own: (u32, u32)) -> (u32, u32) {
        let mut a = 0;
        let mut d = 0;
        for (i, bit) in [1u32, 2].into_iter().enumerate() {
            if self.access[i] > u32::from(own.0 & bit != 0) {
                a |= bit;
            }
            if self.deny[i] > u32::from(own.1 & bit != 0) {
                d |= bit;
            }
        }
        (a, d)
    }

    /// Whether asking `access`/`deny` conflicts with the opens of others
    /// (the asker's own open holds `own`).
    pub(crate) fn conflicts(&self, own: (u32, u32), access: u32, deny: u32) -> bool {
        let (a, d) = self.others(own);
        d & access != 0 || a & deny != 0
    }

    /// Whether it holds nothing but (maybe) lockers.
    pub(crate) fn is_empty(&self) -> bool {
        self.access == [0, 0]
            && self.deny == [0, 0]
            && self.opens == 0
            && self.delegs.is_empty()
            && self.busy == 0
    }

    /// Whether some open holds write access.
    pub(crate) fn written(&self) -> bool {
        self.access[1] > 0
    }

    /// The counts, for the state audit of the tests.
    #[cfg(test)]
    pub(crate) fn counts(&self) -> ([u32; 2], [u32; 2]) {
        (self.access, self.deny)
    }
}

impl State {
    /// Gives back share bits `access`/`deny` on `file`.
    pub(crate) fn unshare(&self, file: &FileKey, access: u32, deny: u32) {
        let mut files = self.files.shard(file);
        if let Some(f) = files.get_mut(file) {
            f.sub(access, deny);
            if f.is_empty() && f.lockers.is_empty() {
                files.remove(file);
            }
        }
    }

    /// Whether some open of `file` denies `access` (READ/WRITE bits): for
    /// I/O with the anonymous stateid, and for NLM's view of NFSv4 shares.
    pub fn share_denies(&self, file: &FileKey, access: u32) -> bool {
        let files = self.files.shard(file);
        files
            .get(file)
            .is_some_and(|f| f.others((0, 0)).1 & access != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The counts agree with the opens they were built from, and the
        /// conflict test is the RFC's: another open's deny hits the access
        /// asked, or another's access the deny asked.
        #[test]
        fn share_counts(opens in prop::collection::vec((1u32..4, 0u32..4), 0..12),
                        remove in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
                        ask in (1u32..4, 0u32..4)) {
            let mut f = FileState::default();
            let mut live = opens.clone();
            for &(a, d) in &opens {
                f.add(a, d);
            }
            for i in remove {
                if live.is_empty() { break; }
                let (a, d) = live.remove(i.index(live.len()));
                f.sub(a, d);
            }
            let want = live.iter().any(|&(a, d)| d & ask.0 != 0 || a & ask.1 != 0);
            prop_assert_eq!(f.conflicts((0, 0), ask.0, ask.1), want);
            // Leaving one open out is checking against the rest.
            if let Some(&(a, d)) = live.first() {
                let rest = &live[1..];
                let want = rest.iter().any(|&(ra, rd)| rd & ask.0 != 0 || ra & ask.1 != 0);
                prop_assert_eq!(f.conflicts((a, d), ask.0, ask.1), want);
            }
            for &(a, d) in &live {
                f.sub(a, d);
            }
            prop_assert!(f.is_empty());
        }
    }
}
