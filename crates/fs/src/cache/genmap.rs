//! Bounded maps without descriptors: a two-generation approximate LRU, and
//! a set of keys that expire.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::limits::genmap::{MAX_SHARDS, MIN_PER_SHARD};

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
    /// What `get_counted` found (kept under the shard's lock, which it
    /// takes anyway: no shared line written).
    hits: u64,
    misses: u64,
}

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
                        hits: 0,
                        misses: 0,
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

    /// Inserts; on a rotation returns the dropped generation, for the
    /// caller to free after the lock is released.
    #[must_use]
    fn put(g: &mut Gens<K, V>, half: usize, k: K, v: V) -> Option<HashMap<K, V>> {
        let mut dead = None;
        if g.cur.len() >= half && !g.cur.contains_key(&k) {
            std::mem::swap(&mut g.cur, &mut g.old);
            dead = Some(std::mem::take(&mut g.cur));
        }
        g.old.remove(&k);
        g.cur.insert(k, v);
        // Each generation holds at most `half`: the map's bound.
        debug_assert!(g.cur.len() <= half && g.old.len() <= half);
        dead
    }

    pub fn insert(&self, k: K, v: V) {
        let mut g = self.shard(&k);
        let dead = Self::put(&mut g, self.half, k, v);
        drop(g);
        drop(dead);
    }

    /// As `insert`, but leaves an entry of the current generation that
    /// already holds `v` alone: the common re-insert (a name seen again)
    /// then costs one lookup, no insert and no drop.
    pub fn insert_changed(&self, k: K, v: V)
    where
        V: PartialEq,
    {
        let mut g = self.shard(&k);
        if g.cur.get(&k) == Some(&v) {
            return;
        }
        let dead = Self::put(&mut g, self.half, k, v);
        drop(g);
        drop(dead);
    }

    pub fn get(&self, k: &K) -> Option<V> {
        self.get_in(k, false)
    }

    /// As `get`, counting a hit or a miss (`counts`).
    pub fn get_counted(&self, k: &K) -> Option<V> {
        self.get_in(k, true)
    }

    fn get_in(&self, k: &K, count: bool) -> Option<V> {
        let mut g = self.shard(k);
        if let Some(v) = g.cur.get(k) {
            let v = v.clone();
            g.hits += u64::from(count);
            return Some(v);
        }
        let Some(v) = g.old.remove(k) else {
            g.misses += u64::from(count);
            return None;
        };
        g.hits += u64::from(count);
        let dead = Self::put(&mut g, self.half, k.clone(), v.clone());
        drop(g);
        drop(dead);
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

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// (entries held, hits, misses of `get_counted`): locks every shard in
    /// turn (statistics, not the request path).
    pub fn counts(&self) -> (usize, u64, u64) {
        self.shards.iter().fold((0, 0, 0), |(n, h, m), s| {
            let g = s.lock().unwrap_or_else(|e| e.into_inner());
            (n + g.cur.len() + g.old.len(), h + g.hits, m + g.misses)
        })
    }

    /// Entries held: locks every shard in turn (statistics, not the request
    /// path).
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
    fn insert_changed_replaces_only_a_different_value() {
        let m: GenMap<u64, u64> = GenMap::new(4);
        m.insert_changed(1, 10);
        m.insert_changed(1, 10);
        assert_eq!(m.get(&1), Some(10));
        m.insert_changed(1, 11);
        assert_eq!(m.get(&1), Some(11));
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn get_counted_counts_and_get_does_not() {
        let m: GenMap<u64, u64> = GenMap::new(4096);
        m.insert(1, 10);
        assert_eq!(m.get_counted(&1), Some(10));
        assert_eq!(m.get_counted(&2), None);
        assert_eq!(m.get(&1), Some(10));
        assert_eq!(m.get(&3), None);
        assert_eq!(m.counts(), (1, 1, 1));
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
