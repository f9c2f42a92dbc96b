//! One lock owner's byte ranges on one file, as fcntl keeps them: a lock
//! replaces what the owner held under it, an unlock cuts what it covers,
//! touching pieces of one kind join. The kernel holds the real locks;
//! this copy says when the owner holds none (FREE_STATEID, dropping the
//! descriptor) and whose lock a conflict the kernel reports is.

/// Bound on the pieces one owner's locks on one file may split into.
pub(crate) const MAX_PIECES: usize = 1024;

/// A piece: `start..end` (`end` exclusive, None: to the end of the
/// file), exclusive or not.
type Piece = (u64, Option<u64>, bool);

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Ranges {
    /// Sorted by start, disjoint.
    v: Vec<Piece>,
}

fn meets(a_start: u64, a_end: Option<u64>, b_start: u64, b_end: Option<u64>) -> bool {
    a_end.is_none_or(|e| b_start < e) && b_end.is_none_or(|e| a_start < e)
}

impl Ranges {
    pub(crate) fn is_empty(&self) -> bool {
        self.v.is_empty()
    }

    /// The pieces: start, end (exclusive; None: to the end of the file),
    /// exclusive or not.
    pub(crate) fn pieces(&self) -> impl Iterator<Item = (u64, Option<u64>, bool)> + '_ {
        self.v.iter().copied()
    }

    /// Drops what lies in `start..end`, splitting pieces it cuts.
    pub(crate) fn clear(&mut self, start: u64, end: Option<u64>) {
        let mut out = Vec::with_capacity(self.v.len() + 1);
        for &(s, e, x) in &self.v {
            if !meets(s, e, start, end) {
                out.push((s, e, x));
                continue;
            }
            if s < start {
                out.push((s, Some(start), x));
            }
            if let Some(end) = end {
                if e.is_none_or(|e| end < e) {
                    out.push((end, e, x));
                }
            }
        }
        self.v = out;
    }

    /// Holds `start..end` (exclusive or not) in place of what was there.
    /// False, with nothing changed, when that would make more than
    /// [`MAX_PIECES`] pieces.
    pub(crate) fn set(&mut self, start: u64, end: Option<u64>, excl: bool) -> bool {
        let mut next = self.clone();
        next.clear(start, end);
        let at = next.v.partition_point(|p| p.0 < start);
        next.v.insert(at, (start, end, excl));
        // Join neighbours of one kind that touch.
        let mut joined: Vec<Piece> = Vec::with_capacity(next.v.len());
        for p in next.v {
            match joined.last_mut() {
                Some(last) if last.2 == p.2 && last.1 == Some(p.0) => last.1 = p.1,
                _ => joined.push(p),
            }
        }
        if joined.len() > MAX_PIECES {
            return false;
        }
        self.v = joined;
        true
    }

    /// Whether some piece meets `start..end`.
    pub(crate) fn overlaps(&self, start: u64, end: Option<u64>) -> bool {
        self.v.iter().any(|&(s, e, _)| meets(s, e, start, end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn split_join_replace() {
        let mut r = Ranges::default();
        assert!(r.set(0, Some(10), false));
        assert!(r.set(10, Some(20), false));
        assert_eq!(r.v, vec![(0, Some(20), false)]);
        assert!(r.set(5, Some(8), true));
        assert_eq!(
            r.v,
            vec![
                (0, Some(5), false),
                (5, Some(8), true),
                (8, Some(20), false)
            ]
        );
        r.clear(6, Some(7));
        assert_eq!(r.v.len(), 4);
        assert!(r.set(100, None, true));
        assert!(r.overlaps(1 << 40, Some((1 << 40) + 1)));
        assert!(!r.overlaps(20, Some(100)));
        r.clear(0, None);
        assert!(r.is_empty());
    }

    #[test]
    fn bounded() {
        let mut r = Ranges::default();
        for i in 0..MAX_PIECES as u64 {
            assert!(r.set(i * 2, Some(i * 2 + 1), true));
        }
        let before = r.clone();
        assert!(!r.set(u64::MAX - 10, Some(u64::MAX - 9), true));
        assert_eq!(r, before);
    }

    /// What each byte of 0..128 holds: None, Some(exclusive). (Ranges
    /// start below 64 and end below 84 or run to the end.)
    fn bytes(r: &Ranges) -> [Option<bool>; 128] {
        let mut out = [None; 128];
        for (i, b) in out.iter_mut().enumerate() {
            let i = i as u64;
            *b =
                r.v.iter()
                    .find(|&&(s, e, _)| s <= i && e.is_none_or(|e| i < e))
                    .map(|p| p.2);
        }
        out
    }

    proptest! {
        /// Against a byte map: set and clear do to every byte what fcntl
        /// does, and the pieces stay sorted, disjoint and joined.
        #[test]
        fn matches_a_byte_map(ops in prop::collection::vec(
            (any::<bool>(), 0u64..64, 0u64..20, any::<bool>()), 1..40)) {
            let mut r = Ranges::default();
            let mut model = [None; 128];
            for (lock, start, len, excl) in ops {
                // len 0 stands for "to the end".
                let end = (len != 0).then_some(start + len);
                let last = end.unwrap_or(128);
                if lock {
                    prop_assert!(r.set(start, end, excl));
                    for b in &mut model[start as usize..last as usize] { *b = Some(excl); }
                } else {
                    r.clear(start, end);
                    for b in &mut model[start as usize..last as usize] { *b = None; }
                }
                prop_assert_eq!(bytes(&r), model);
                for w in r.v.windows(2) {
                    let (a, b) = (w[0], w[1]);
                    prop_assert!(a.1.is_some_and(|e| e <= b.0), "sorted, disjoint");
                    prop_assert!(!(a.1 == Some(b.0) && a.2 == b.2), "joined");
                }
                prop_assert_eq!(r.is_empty(), model.iter().all(|b| b.is_none()));
            }
        }
    }
}
