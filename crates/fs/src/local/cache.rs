//! Bounded in-memory caches of the local backend.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::sys::Key;

/// Where an object was last seen: its parent directory and name there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loc {
    pub parent: Key,
    pub name: Box<[u8]>,
}

/// ino -> (parent ino, name), bounded to `cap` entries in two generations:
/// when the current generation is half full it becomes the old one and the
/// previous old one is dropped; a hit in the old generation moves the entry
/// back to the current. An approximate LRU at O(1) cost per operation.
pub struct LocMap {
    inner: Mutex<Gens>,
    half: usize,
}

#[derive(Default)]
struct Gens {
    cur: HashMap<Key, Loc>,
    old: HashMap<Key, Loc>,
}

impl Gens {
    fn put(&mut self, half: usize, k: Key, v: Loc) {
        if self.cur.len() >= half && !self.cur.contains_key(&k) {
            self.old = std::mem::take(&mut self.cur);
        }
        self.old.remove(&k);
        self.cur.insert(k, v);
    }

    fn get(&mut self, half: usize, k: &Key) -> Option<Loc> {
        if let Some(v) = self.cur.get(k) {
            return Some(v.clone());
        }
        let v = self.old.remove(k)?;
        self.put(half, *k, v.clone());
        Some(v)
    }
}

impl LocMap {
    pub fn new(cap: usize) -> Self {
        LocMap {
            inner: Mutex::new(Gens::default()),
            half: (cap / 2).max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Gens> {
        // A panic while holding the lock leaves consistent maps: recover.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn insert(&self, k: Key, parent: Key, name: &[u8]) {
        let v = Loc {
            parent,
            name: name.into(),
        };
        self.lock().put(self.half, k, v);
    }

    pub fn remove(&self, k: &Key) {
        let mut g = self.lock();
        g.cur.remove(k);
        g.old.remove(k);
    }

    /// Forgets `k` only if it is recorded at (parent, name).
    pub fn remove_at(&self, k: &Key, parent: &Key, name: &[u8]) {
        let mut g = self.lock();
        let g = &mut *g;
        for m in [&mut g.cur, &mut g.old] {
            if m.get(k)
                .is_some_and(|l| l.parent == *parent && &*l.name == name)
            {
                m.remove(k);
            }
        }
    }

    /// The names from `root` down to `k` (root first), or None if a link of
    /// the chain is unknown or it is longer than `max_depth`. Each returned
    /// element is (key of the object named, name).
    pub fn chain(&self, k: Key, root: Key, max_depth: usize) -> Option<Vec<(Key, Box<[u8]>)>> {
        let mut out = Vec::new();
        let mut g = self.lock();
        let mut cur = k;
        while cur != root {
            if out.len() >= max_depth {
                return None;
            }
            let l = g.get(self.half, &cur)?;
            out.push((cur, l.name));
            cur = l.parent;
        }
        out.reverse();
        Some(out)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        let g = self.lock();
        g.cur.len() + g.old.len()
    }
}

/// A bounded set of keys, each valid for a fixed time after insertion.
pub struct TtlSet<K> {
    inner: Mutex<HashMap<K, Instant>>,
    cap: usize,
    ttl: Duration,
}

impl<K: std::hash::Hash + Eq + Clone> TtlSet<K> {
    pub fn new(cap: usize, ttl: Duration) -> Self {
        TtlSet {
            inner: Mutex::new(HashMap::new()),
            cap: cap.max(1),
            ttl,
        }
    }

    pub fn contains(&self, k: &K) -> bool {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.get(k).is_some_and(|t| t.elapsed() < self.ttl)
    }

    pub fn insert(&self, k: K) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if g.len() >= self.cap {
            let ttl = self.ttl;
            g.retain(|_, t| t.elapsed() < ttl);
            if g.len() >= self.cap {
                g.clear();
            }
        }
        g.insert(k, Instant::now());
    }

    pub fn remove(&self, k: &K) {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(k);
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

    #[test]
    fn ttlset_bounded() {
        let s = TtlSet::new(4, Duration::from_secs(60));
        for i in 0..10u32 {
            s.insert(i);
        }
        assert!(s.contains(&9));
        assert!(!s.contains(&0));
        s.remove(&9);
        assert!(!s.contains(&9));
    }
}
