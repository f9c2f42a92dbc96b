//! One owner's locks on one file as POSIX keeps them (fcntl(2)): a lock
//! replaces whatever the same owner held in its range, an unlock splits
//! what it cuts, touching ranges of one kind merge. The kernel holds the
//! real locks; this copy tells the lock manager when an owner holds none
//! (its descriptor can go) and which owner a conflict belongs to.

use rnfsd_fs::lock::LockKind;

/// Bound on the pieces one owner's locks on one file may split into.
pub const MAX_PIECES: usize = 1024;

/// Sorted, non-overlapping `(start, end, kind)`, `end` exclusive, None =
/// to the end of the file.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Ranges {
    v: Vec<(u64, Option<u64>, LockKind)>,
}

fn overlaps(s1: u64, e1: Option<u64>, s2: u64, e2: Option<u64>) -> bool {
    e1.is_none_or(|e| s2 < e) && e2.is_none_or(|e| s1 < e)
}

impl Ranges {
    pub fn is_empty(&self) -> bool {
        self.v.is_empty()
    }

    pub fn len(&self) -> usize {
        self.v.len()
    }

    /// Drops what lies in `start..end`.
    pub fn clear(&mut self, start: u64, end: Option<u64>) {
        let mut out = Vec::with_capacity(self.v.len() + 1);
        for &(s, e, k) in &self.v {
            if !overlaps(s, e, start, end) {
                out.push((s, e, k));
                continue;
            }
            if s < start {
                out.push((s, Some(start), k));
            }
            if let Some(end) = end {
                if e.is_none_or(|e| end < e) {
                    out.push((end, e, k));
                }
            }
        }
        self.v = out;
    }

    /// Holds `kind` on `start..end`, replacing what was there. False (and
    /// nothing changed) when the result would exceed `MAX_PIECES`.
    pub fn set(&mut self, start: u64, end: Option<u64>, kind: LockKind) -> bool {
        let before = self.v.clone();
        self.clear(start, end);
        self.v.push((start, end, kind));
        self.v.sort_by_key(|&(s, _, _)| s);
        let mut merged: Vec<(u64, Option<u64>, LockKind)> = Vec::with_capacity(self.v.len());
        for &(s, e, k) in &self.v {
            match merged.last_mut() {
                Some(last) if last.2 == k && last.1 == Some(s) => last.1 = e,
                _ => merged.push((s, e, k)),
            }
        }
        if merged.len() > MAX_PIECES {
            self.v = before;
            return false;
        }
        self.v = merged;
        true
    }

    /// The first piece overlapping `start..end`.
    pub fn overlap(&self, start: u64, end: Option<u64>) -> Option<(u64, Option<u64>, LockKind)> {
        self.v
            .iter()
            .copied()
            .find(|&(s, e, _)| overlaps(s, e, start, end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use LockKind::{Exclusive as X, Shared as S};

    #[test]
    fn posix_merge_split_and_replace() {
        let mut r = Ranges::default();
        assert!(r.set(0, Some(10), S));
        assert!(r.set(10, Some(20), S));
        assert_eq!(r.v, vec![(0, Some(20), S)], "touching shared pieces merge");
        assert!(r.set(5, Some(8), X));
        assert_eq!(
            r.v,
            vec![(0, Some(5), S), (5, Some(8), X), (8, Some(20), S)]
        );
        r.clear(6, Some(7));
        assert_eq!(
            r.v,
            vec![
                (0, Some(5), S),
                (5, Some(6), X),
                (7, Some(8), X),
                (8, Some(20), S)
            ]
        );
        assert!(r.set(100, None, X));
        assert_eq!(r.overlap(1000, Some(1001)), Some((100, None, X)));
        assert_eq!(r.overlap(20, Some(100)), None);
        r.clear(0, None);
        assert!(r.is_empty(), "unlock to EOF drops everything");
    }

    #[test]
    fn unlock_in_the_middle_of_a_lock_to_eof() {
        let mut r = Ranges::default();
        assert!(r.set(10, None, X));
        r.clear(20, Some(30));
        assert_eq!(r.v, vec![(10, Some(20), X), (30, None, X)]);
        r.clear(u64::MAX - 1, None);
        assert_eq!(r.v, vec![(10, Some(20), X), (30, Some(u64::MAX - 1), X)]);
    }

    #[test]
    fn pieces_are_bounded() {
        let mut r = Ranges::default();
        for i in 0..MAX_PIECES as u64 {
            assert!(r.set(i * 2, Some(i * 2 + 1), X));
        }
        let before = r.clone();
        assert!(!r.set(u64::MAX - 10, Some(u64::MAX - 9), X));
        assert_eq!(r, before, "refused whole");
    }
}
