//! Where objects were last seen (path mode, and kernel-mode files whose
//! dentries are disconnected): inode -> (parent inode, name), bounded.

use crate::cache::GenMap;

use super::sys::Key;

/// Where an object was last seen: its parent directory and name there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loc {
    pub parent: Key,
    pub name: Name,
}

/// Longest name kept inside the entry (most are shorter), saving a heap
/// allocation and its overhead per entry.
const INLINE: usize = 22;

/// A name, inline when short.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Name {
    Inline(u8, [u8; INLINE]),
    Heap(Box<[u8]>),
}

impl Name {
    fn new(b: &[u8]) -> Name {
        if b.len() <= INLINE {
            let mut a = [0u8; INLINE];
            a[..b.len()].copy_from_slice(b);
            Name::Inline(b.len() as u8, a)
        } else {
            Name::Heap(b.into())
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Name::Inline(n, a) => &a[..usize::from(*n)],
            Name::Heap(b) => b,
        }
    }
}

/// ino -> (parent ino, name), bounded to `cap` entries.
pub struct LocMap(GenMap<Key, Loc>, usize);

impl LocMap {
    pub fn new(cap: usize) -> Self {
        LocMap(GenMap::new(cap), cap)
    }

    /// The bound on entries.
    pub fn capacity(&self) -> usize {
        self.1
    }

    pub fn insert(&self, k: Key, parent: Key, name: &[u8]) {
        self.0.insert_changed(
            k,
            Loc {
                parent,
                name: Name::new(name),
            },
        );
    }

    pub fn remove(&self, k: &Key) {
        self.0.remove(k)
    }

    /// Forgets `k` only if it is recorded at (parent, name).
    pub fn remove_at(&self, k: &Key, parent: &Key, name: &[u8]) {
        self.0
            .remove_if(k, |l| l.parent == *parent && l.name.as_bytes() == name);
    }

    /// The names from `root` down to `k` (root first), or None if a link of
    /// the chain is unknown or it is longer than `max_depth`. Each returned
    /// element is (key of the object named, name). Links are read one at a
    /// time; the caller re-walks and checks every step on the filesystem.
    pub fn chain(&self, k: Key, root: Key, max_depth: usize) -> Option<Vec<(Key, Box<[u8]>)>> {
        let mut out = Vec::new();
        let mut cur = k;
        while cur != root {
            if out.len() >= max_depth {
                return None;
            }
            let l = self.0.get(&cur)?;
            out.push((cur, l.name.as_bytes().into()));
            cur = l.parent;
        }
        out.reverse();
        Some(out)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(i: u64) -> Key {
        Key { dev: 1, ino: i }
    }

    #[test]
    fn locmap_is_bounded_and_chains() {
        let m = LocMap::new(8);
        for i in 2..100 {
            m.insert(k(i), k(i - 1), format!("n{i}").as_bytes());
            assert!(m.len() <= 8);
        }
        // Recent entries chain back only as far as they are known.
        assert!(m.chain(k(99), k(1), 100).is_none());
        let m = LocMap::new(100);
        m.insert(k(3), k(2), b"b");
        m.insert(k(2), k(1), b"a");
        let c = m.chain(k(3), k(1), 10).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(&*c[0].1, b"a");
        assert_eq!(c[1].0, k(3));
        assert!(m.chain(k(3), k(1), 1).is_none());
        m.remove_at(&k(3), &k(2), b"x");
        assert!(m.chain(k(3), k(1), 10).is_some());
        m.remove_at(&k(3), &k(2), b"b");
        assert!(m.chain(k(3), k(1), 10).is_none());
    }
}
