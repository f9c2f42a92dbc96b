//! Bounded in-memory caches of the local backend.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::sys::Key;

/// Where an object was last seen: its parent directory and name there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loc {
    pub parent: Key,
    pub name: Box<[u8]>,
}

/// A bounded map in independently locked shards, each kept as two
/// generations: when a shard's current generation is half its share full it
/// becomes the old one and the previous old one is dropped whole; a hit in
/// the old generation moves the entry back. An approximate LRU at O(1) per
/// operation: nothing ever scans a shard, and callers touching different
/// keys rarely share a lock (or a written cache line).
pub struct GenMap<K, V> {
    shards: Box<[Mutex<Gens<K, V>>]>,
    /// Entries per generation per shard.
    half: usize,
    hasher: RandomState,
}

struct Gens<K, V> {
    cur: HashMap<K, V>,
    old: HashMap<K, V>,
}

/// Shards at most; a map this small or smaller stays one shard.
const MAX_SHARDS: usize = 64;
const MIN_PER_SHARD: usize = 1024;

impl<K: Hash + Eq + Clone, V: Clone> GenMap<K, V> {
    /// At most `cap` entries (two generations of `cap / 2` in all).
    pub fn new(cap: usize) -> Self {
        let n = (cap / MIN_PER_SHARD).clamp(1, MAX_SHARDS);
        GenMap {
            shards: (0..n)
                .map(|_| {
                    Mutex::new(Gens {
                        cur: HashMap::new(),
                        old: HashMap::new(),
                    })
                })
                .collect(),
            half: (cap / n / 2).max(1),
            hasher: RandomState::new(),
        }
    }

    fn shard(&self, k: &K) -> MutexGuard<'_, Gens<K, V>> {
        let i = (self.hasher.hash_one(k) as usize) % self.shards.len();
        // A panic while holding the lock leaves consistent maps: recover.
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    fn put(g: &mut Gens<K, V>, half: usize, k: K, v: V) {
        if g.cur.len() >= half && !g.cur.contains_key(&k) {
            // Rotate keeping `cur`'s capacity: the same bound, no regrowth
            // under the shard lock.
            std::mem::swap(&mut g.cur, &mut g.old);
            g.cur.clear();
        }
        g.old.remove(&k);
        g.cur.insert(k, v);
    }

    pub fn insert(&self, k: K, v: V) {
        let mut g = self.shard(&k);
        Self::put(&mut g, self.half, k, v);
    }

    pub fn get(&self, k: &K) -> Option<V> {
        let mut g = self.shard(k);
        if let Some(v) = g.cur.get(k) {
            return Some(v.clone());
        }
        let v = g.old.remove(k)?;
        Self::put(&mut g, self.half, k.clone(), v.clone());
        Some(v)
    }

    pub fn remove(&self, k: &K) {
        let mut g = self.shard(k);
        g.cur.remove(k);
        g.old.remove(k);
    }

    /// Removes `k` only where its value satisfies `pred`.
    pub fn remove_if(&self, k: &K, pred: impl Fn(&V) -> bool) {
        let mut g = self.shard(k);
        let g = &mut *g;
        for m in [&mut g.cur, &mut g.old] {
            if m.get(k).is_some_and(&pred) {
                m.remove(k);
            }
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let g = s.lock().unwrap_or_else(|e| e.into_inner());
                g.cur.len() + g.old.len()
            })
            .sum()
    }
}

/// ino -> (parent ino, name), bounded to `cap` entries.
pub struct LocMap(GenMap<Key, Loc>);

impl LocMap {
    pub fn new(cap: usize) -> Self {
        LocMap(GenMap::new(cap))
    }

    pub fn insert(&self, k: Key, parent: Key, name: &[u8]) {
        self.0.insert(
            k,
            Loc {
                parent,
                name: name.into(),
            },
        );
    }

    pub fn remove(&self, k: &Key) {
        self.0.remove(k)
    }

    /// Forgets `k` only if it is recorded at (parent, name).
    pub fn remove_at(&self, k: &Key, parent: &Key, name: &[u8]) {
        self.0
            .remove_if(k, |l| l.parent == *parent && &*l.name == name);
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
            out.push((cur, l.name));
            cur = l.parent;
        }
        out.reverse();
        Some(out)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

/// A bounded set of keys, each valid for a fixed time after insertion.
pub struct TtlSet<K> {
    map: GenMap<K, Instant>,
    ttl: Duration,
}

impl<K: Hash + Eq + Clone> TtlSet<K> {
    pub fn new(cap: usize, ttl: Duration) -> Self {
        TtlSet {
            map: GenMap::new(cap.max(1)),
            ttl,
        }
    }

    pub fn contains(&self, k: &K) -> bool {
        self.map.get(k).is_some_and(|t| t.elapsed() < self.ttl)
    }

    pub fn insert(&self, k: K) {
        self.map.insert(k, Instant::now());
    }

    pub fn remove(&self, k: &K) {
        self.map.remove(k)
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
    fn sharded_map_stays_within_its_cap() {
        let m: GenMap<u64, u64> = GenMap::new(100_000);
        assert!(m.shards.len() > 1, "a large map is sharded");
        for i in 0..400_000 {
            m.insert(i, i);
        }
        assert!(m.len() <= 100_000, "{} entries", m.len());
        assert_eq!(m.get(&399_999), Some(399_999), "recent entries stay");
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
