//! A bounded cache in independently locked shards with CLOCK (second
//! chance) replacement, as the dentry_unused soft-lockup thread teaches
//! (the dcache's list_lru; docs/lessons.md):
//!
//! * every operation under a shard lock is O(1) or bounded by a fixed scan
//!   budget: nothing ever walks a whole shard, let alone the whole cache;
//! * an entry some call still holds (its `Arc` is shared) is never evicted;
//! * evicted values are handed back to the caller, so their descriptors are
//!   closed after the lock is released, never under it;
//! * a hit sets a referenced bit; eviction clears it once before taking the
//!   entry (second chance), so a hot entry survives a reclaim pass.
//!
//! Hand-written rather than a crate: no cache crate offers in-use skipping,
//! values dropped outside the lock and a hard bound together.
//!
//! A key is hashed once per operation (keyed SipHash: keys are file handles
//! and inode numbers a client names): the hash picks the shard and probes
//! the shard's table, which holds slot numbers only (hashing twice cost an
//! NFSv3 GETATTR 5 % of its user instructions, counted under callgrind).

use std::borrow::Borrow;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use hashbrown::HashTable;

use crate::limits::lru::{MAX_SHARDS, MIN_PER_SHARD, SCAN_PER_EVICT};
use crate::limits::margin::{HIGH_WATER, TARGET};

pub struct Lru<K, V> {
    shards: Box<[Shard<K, V>]>,
    /// The hard bound on entries, counted in `len` (a slot is reserved
    /// before an insert, so the count never passes it). Written on inserts
    /// and evictions only, never by a hit.
    cap: usize,
    len: CachePadded,
    /// A shard holds at most twice its fair share: hashing is uneven, and a
    /// shard bound of exactly cap/n would evict while the cache has room.
    shard_max: usize,
    /// Inserts so far, and their number when `trim` last looked: a cache
    /// nobody inserts into is not trimmed (that would only cause misses).
    inserts: AtomicU64,
    trimmed_at: AtomicU64,
    door: Doorkeeper,
    hasher: RandomState,
    /// Where background reclaim and the sweep resume.
    reclaim_at: AtomicUsize,
    sweep_at: Mutex<(usize, usize)>,
}

#[repr(align(128))]
struct CachePadded(AtomicUsize);

/// One lock and what it guards, on a line of its own.
#[repr(align(128))]
struct Shard<K, V>(Mutex<Inner<K, V>>);

struct Inner<K, V> {
    /// Slot numbers, probed with their keys' hashes (`Lru::hash`).
    map: HashTable<u32>,
    slots: Vec<Slot<K, V>>,
    free: Vec<u32>,
    hand: usize,
    counts: Counts,
}

impl<K, V> Inner<K, V> {
    /// The slot holding `k`, whose hash is `h`.
    #[inline]
    fn find<Q>(&self, h: u64, k: &Q) -> Option<u32>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let slots = &self.slots;
        let same = |&i: &u32| {
            slots[i as usize]
                .entry
                .as_ref()
                .is_some_and(|(key, _)| key.borrow() == k)
        };
        self.map.find(h, same).copied()
    }

    /// Drops slot `i` (whose key's hash is `h`) from the table.
    fn forget(&mut self, h: u64, i: u32) {
        let found = self.map.find_entry(h, |&j| j == i);
        debug_assert!(found.is_ok(), "slot {i} not in its shard's table");
        if let Ok(e) = found {
            e.remove();
        }
    }
}

struct Slot<K, V> {
    entry: Option<(K, Arc<V>)>,
    referenced: bool,
}

/// Counters of one shard, kept under its lock (so counting costs no shared
/// write beyond the lock itself).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub hits: u64,
    pub misses: u64,
    pub inserts: u64,
    /// Inserts refused because the shard was full of entries in use.
    pub refused: u64,
    /// Entries evicted to make room for an insert (inline, on a call).
    pub evicted_inline: u64,
    /// Entries evicted by background reclaim.
    pub evicted_reclaim: u64,
    /// Entries removed because they went stale (deleted objects, idle files).
    pub removed: u64,
    pub entries: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.hits += o.hits;
        self.misses += o.misses;
        self.inserts += o.inserts;
        self.refused += o.refused;
        self.evicted_inline += o.evicted_inline;
        self.evicted_reclaim += o.evicted_reclaim;
        self.removed += o.removed;
        self.entries += o.entries;
    }
}

/// What `insert` did with the value.
pub enum Inserted<V> {
    /// Cached; here is the cache's handle on it.
    Cached(Arc<V>),
    /// Another caller cached the same key first: use theirs.
    Existing(Arc<V>),
    /// No room (every entry of the shard in use): the value is handed back
    /// to be used once and dropped.
    Refused(Arc<V>),
}

impl<V> Inserted<V> {
    pub fn into_arc(self) -> Arc<V> {
        match self {
            Inserted::Cached(v) | Inserted::Existing(v) | Inserted::Refused(v) => v,
        }
    }
}

impl<K: Hash + Eq + Clone, V> Lru<K, V> {
    /// A cache of at most `cap` entries (at least 1).
    pub fn new(cap: usize) -> Self {
        let cap = cap.max(1);
        let n = (cap / MIN_PER_SHARD).clamp(1, MAX_SHARDS);
        Lru {
            shards: (0..n)
                .map(|_| {
                    Shard(Mutex::new(Inner {
                        map: HashTable::new(),
                        slots: Vec::new(),
                        free: Vec::new(),
                        hand: 0,
                        counts: Counts::default(),
                    }))
                })
                .collect(),
            cap,
            len: CachePadded(AtomicUsize::new(0)),
            shard_max: (2 * cap.div_ceil(n)).max(4),
            inserts: AtomicU64::new(0),
            trimmed_at: AtomicU64::new(0),
            door: Doorkeeper::new(cap),
            hasher: RandomState::new(),
            reclaim_at: AtomicUsize::new(0),
            sweep_at: Mutex::new((0, 0)),
        }
    }

    /// Most entries the cache holds.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Entries held now (one atomic load).
    pub fn len(&self) -> usize {
        self.len.0.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether a key that missed should be cached (TinyLFU's doorkeeper):
    /// always while the cache has room; once full, only a key that missed
    /// before, recently. A working set larger than the cache then does not
    /// churn it (every insert evicting another entry, every miss paying an
    /// insert and a close) for no more hits: under uniform access any
    /// content hits as often, and a key used repeatedly gets in on its
    /// second miss. `full_elsewhere`: a bound the cache shares (the
    /// descriptor budget) is at its reclaim target, so the cache is full
    /// whatever its own count says; without it, a budget reached first let
    /// every miss in and the reclaimer evicted one entry per miss.
    pub fn admit<Q>(&self, k: &Q, full_elsewhere: bool) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if !full_elsewhere && self.len() + self.cap / HIGH_WATER < self.cap {
            return true;
        }
        self.door.seen_before(self.hasher.hash_one(k))
    }

    /// Reserves room for one entry under the hard bound.
    fn try_reserve(&self) -> bool {
        self.len
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.cap).then_some(n + 1)
            })
            .is_ok()
    }

    fn released(&self, n: usize) {
        if n > 0 {
            let was = self.len.0.fetch_sub(n, Ordering::Relaxed);
            debug_assert!(was >= n, "released {n} of {was} entries");
        }
    }

    /// A shard's bookkeeping: every slot holds an entry of the map or is
    /// free, and the shard holds no more than its share (`shard_max`),
    /// which `insert` keeps and the count in `len` relies on.
    fn check_shard(&self, g: &Inner<K, V>) {
        debug_assert_eq!(g.map.len() + g.free.len(), g.slots.len());
        debug_assert!(g.map.len() <= self.shard_max, "a shard past its share");
    }

    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// `k`'s hash, for its shard and its shard's table.
    fn hash<Q: Hash + ?Sized>(&self, k: &Q) -> u64 {
        self.hasher.hash_one(k)
    }

    /// The shard of hash `h`: its high half (the table's buckets take the
    /// low bits, which must not be the same for a whole shard).
    fn shard_of(&self, h: u64) -> usize {
        ((h >> 32) as usize) % self.shards.len()
    }

    fn lock(&self, i: usize) -> MutexGuard<'_, Inner<K, V>> {
        // Nothing under the lock can leave the maps inconsistent: recover.
        self.shards[i].0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cached value for `k`, marked recently used.
    pub fn get<Q>(&self, k: &Q) -> Option<Arc<V>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let (mut g, i) = self.find_counted(self.hash(k), k);
        let slot = &mut g.slots[i? as usize];
        slot.referenced = true;
        slot.entry.as_ref().map(|(_, v)| v.clone())
    }

    /// Whether `k` is cached, marking it recently used, without counting a
    /// hit or a miss (a call that found its object otherwise and only
    /// keeps the entry warm).
    pub fn touch<Q>(&self, k: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let h = self.hash(k);
        let mut g = self.lock(self.shard_of(h));
        let Some(i) = g.find(h, k) else {
            return false;
        };
        g.slots[i as usize].referenced = true;
        true
    }

    /// Takes `k`'s value out of the cache (a hit) or counts a miss: for a
    /// cache whose entries move elsewhere on their next use.
    pub fn take<Q>(&self, k: &Q) -> Option<Arc<V>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let h = self.hash(k);
        let (mut g, i) = self.find_counted(h, k);
        self.unlink(&mut g, i?, h)
    }

    /// `k`'s shard, locked, and its slot (`h`: `k`'s hash): counted as a
    /// hit or a miss.
    fn find_counted<Q>(&self, h: u64, k: &Q) -> (MutexGuard<'_, Inner<K, V>>, Option<u32>)
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let mut g = self.lock(self.shard_of(h));
        let i = g.find(h, k);
        if i.is_some() {
            g.counts.hits += 1;
        } else {
            g.counts.misses += 1;
        }
        (g, i)
    }

    /// Caches `v` under `k`. When the shard is full, frees room first by a
    /// bounded eviction; the evicted values are pushed to `dropped`, for the
    /// caller to drop once no lock is held. `on_loop`: the caller is an
    /// event loop running a call (`crate::inline`), where nothing is
    /// evicted: at the bound the value is refused, since dropping an
    /// evicted descriptor may be the last reference to a deleted file (its
    /// close frees the inode, which can wait for the journal) or a
    /// writer's close; the reclaimer keeps the margin.
    pub fn insert(&self, k: K, v: Arc<V>, on_loop: bool, dropped: &mut Vec<Arc<V>>) -> Inserted<V> {
        let h = self.hash(&k);
        let mut g = self.lock(self.shard_of(h));
        if let Some(i) = g.find(h, &k) {
            if let Some((_, old)) = &g.slots[i as usize].entry {
                return Inserted::Existing(old.clone());
            }
        }
        let reserved = g.map.len() < self.shard_max && self.try_reserve();
        if !reserved {
            if on_loop {
                g.counts.refused += 1;
                return Inserted::Refused(v);
            }
            // At a bound: evict here, and the evicted entry's place in the
            // count passes to the new one.
            let n = dropped.len();
            Self::evict(&self.hasher, &mut g, 1, SCAN_PER_EVICT * 4, dropped);
            let freed = (dropped.len() - n) as u64;
            g.counts.evicted_inline += freed;
            if freed == 0 {
                g.counts.refused += 1;
                return Inserted::Refused(v);
            }
        }
        let slot = Slot {
            entry: Some((k.clone(), v.clone())),
            // A new entry starts unreferenced: one use does not make it hot.
            referenced: false,
        };
        let i = match g.free.pop() {
            Some(i) => {
                g.slots[i as usize] = slot;
                i
            }
            None => {
                g.slots.push(slot);
                (g.slots.len() - 1) as u32
            }
        };
        let Inner { map, slots, .. } = &mut *g;
        // Growing rehashes the entries from their keys.
        map.insert_unique(h, i, |&j| {
            let e = slots[j as usize].entry.as_ref();
            debug_assert!(e.is_some(), "an empty slot {j} in its shard's table");
            e.map_or(0, |(k, _)| self.hasher.hash_one(k))
        });
        g.counts.inserts += 1;
        self.inserts.fetch_add(1, Ordering::Relaxed);
        g.counts.entries = g.map.len() as u64;
        // A slot was reserved under both bounds, or an evicted entry's
        // passed to this one: neither bound moved past.
        self.check_shard(&g);
        debug_assert!(self.len() <= self.cap, "entries past the bound");
        Inserted::Cached(v)
    }

    /// Removes `k` if its value is `v` (the same allocation): a caller that
    /// found its entry stale removes that entry, never a newer one.
    pub fn remove_if_same<Q>(&self, k: &Q, v: &Arc<V>) -> Option<Arc<V>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let h = self.hash(k);
        let mut g = self.lock(self.shard_of(h));
        let i = g.find(h, k)?;
        let same = matches!(&g.slots[i as usize].entry, Some((_, cur)) if Arc::ptr_eq(cur, v));
        if !same {
            return None;
        }
        self.take_slot(&mut g, i, h)
    }

    /// Removes `k` whatever its value.
    pub fn remove<Q>(&self, k: &Q) -> Option<Arc<V>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let h = self.hash(k);
        let mut g = self.lock(self.shard_of(h));
        let i = g.find(h, k)?;
        self.take_slot(&mut g, i, h)
    }

    /// Removes slot `i`'s entry as stale (counted as removed).
    fn take_slot(&self, g: &mut Inner<K, V>, i: u32, h: u64) -> Option<Arc<V>> {
        let v = self.unlink(g, i, h)?;
        g.counts.removed += 1;
        Some(v)
    }

    /// Frees slot `i` (its key's hash `h`) and returns its value.
    fn unlink(&self, g: &mut Inner<K, V>, i: u32, h: u64) -> Option<Arc<V>> {
        let (_, v) = g.slots[i as usize].entry.take()?;
        self.released(1);
        g.slots[i as usize].referenced = false;
        g.forget(h, i);
        g.free.push(i);
        g.counts.entries = g.map.len() as u64;
        self.check_shard(g);
        Some(v)
    }

    /// Second-chance eviction from one shard: at most `max` entries freed
    /// and at most `scan` slots looked at, entries in use skipped.
    fn evict(
        hasher: &RandomState,
        g: &mut Inner<K, V>,
        max: usize,
        scan: usize,
        out: &mut Vec<Arc<V>>,
    ) {
        let n = g.slots.len();
        if n == 0 {
            return;
        }
        let mut freed = 0;
        for _ in 0..scan.min(2 * n) {
            let i = g.hand % n;
            g.hand = (i + 1) % n;
            let slot = &mut g.slots[i];
            let Some((_, v)) = &slot.entry else { continue };
            if Arc::strong_count(v) > 1 {
                continue;
            }
            if slot.referenced {
                slot.referenced = false;
                continue;
            }
            if let Some((k, v)) = slot.entry.take() {
                g.forget(hasher.hash_one(&k), i as u32);
                g.free.push(i as u32);
                out.push(v);
                freed += 1;
                if freed >= max {
                    break;
                }
            }
        }
        g.counts.entries = g.map.len() as u64;
    }

    /// Background reclaim: frees up to `max` unused entries from shard `i`
    /// (bounded scan), pushing them to `out` for dropping outside the lock.
    pub fn reclaim_shard(&self, i: usize, max: usize, out: &mut Vec<Arc<V>>) -> usize {
        let mut g = self.lock(i % self.shards.len());
        let n = out.len();
        Self::evict(&self.hasher, &mut g, max, max * SCAN_PER_EVICT, out);
        let freed = out.len() - n;
        debug_assert!(freed <= max);
        self.check_shard(&g);
        g.counts.evicted_reclaim += freed as u64;
        self.released(freed);
        freed
    }

    /// Background reclaim across shards, resuming where the last call
    /// stopped: frees up to `max` unused entries into `out`, one bounded
    /// scan per shard lock.
    pub fn reclaim(&self, max: usize, out: &mut Vec<Arc<V>>) -> usize {
        let n = self.shards.len();
        let mut freed = 0;
        for _ in 0..n {
            if freed >= max {
                break;
            }
            let i = self.reclaim_at.fetch_add(1, Ordering::Relaxed) % n;
            freed += self.reclaim_shard(i, max - freed, out);
        }
        freed
    }

    /// Keeps a margin under the bound (background): when entries are being
    /// inserted and the cache is above 1/64 from its bound, frees unused
    /// entries down to 1/32 below it, so calls rarely evict inline. A cache
    /// no one inserts into keeps its entries (trimming would only cause
    /// misses).
    pub fn trim(&self, out: &mut Vec<Arc<V>>) -> usize {
        let (len, cap) = (self.len(), self.cap);
        let inserts = self.inserts.load(Ordering::Relaxed);
        if self.trimmed_at.swap(inserts, Ordering::Relaxed) == inserts {
            return 0;
        }
        if len <= cap - cap / HIGH_WATER {
            return 0;
        }
        self.reclaim(len - (cap - cap / TARGET), out)
    }

    /// The next `n` slots of the sweep (entries cloned, for checks made
    /// outside the lock), taken from as many shards in turn as it needs,
    /// each locked on its own; one call visits every shard at most once.
    pub fn sample_next(&self, n: usize, out: &mut Vec<(K, Arc<V>)>) {
        let mut at = self.sweep_at.lock().unwrap_or_else(|e| e.into_inner());
        let mut left = n;
        for _ in 0..self.shards.len() {
            let (shard, from) = *at;
            let g = self.lock(shard % self.shards.len());
            let end = from.saturating_add(left).min(g.slots.len());
            for s in g.slots.get(from..end).unwrap_or(&[]) {
                if let Some((k, v)) = &s.entry {
                    out.push((k.clone(), v.clone()));
                }
            }
            left -= end.saturating_sub(from).min(left);
            let done = end >= g.slots.len();
            drop(g);
            *at = if done {
                ((shard + 1) % self.shards.len(), 0)
            } else {
                (shard, end)
            };
            if left == 0 {
                break;
            }
        }
    }

    /// The sum of every shard's counters.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for i in 0..self.shards.len() {
            c.add(&self.lock(i).counts);
        }
        c
    }
}

/// A bitset of keys that missed recently, cleared after about as many
/// misses as the cache holds entries: "recently" is one cache's worth.
struct Doorkeeper {
    bits: Box<[AtomicU64]>,
    seen: AtomicUsize,
    window: usize,
}

impl Doorkeeper {
    fn new(cap: usize) -> Doorkeeper {
        // 8 bits per entry: few false "seen" answers.
        let words = (cap * 8).div_ceil(64).max(64);
        Doorkeeper {
            bits: (0..words).map(|_| AtomicU64::new(0)).collect(),
            seen: AtomicUsize::new(0),
            window: cap.max(64),
        }
    }

    /// Records a miss of the key hashing to `h`; true if it missed before
    /// in this window. Clearing is a pass over a few thousand words once
    /// per window of misses; a set racing with it is lost, harmlessly.
    fn seen_before(&self, h: u64) -> bool {
        let n = self.bits.len() * 64;
        let i = (h % n as u64) as usize;
        let m = 1u64 << (i % 64);
        let prev = self.bits[i / 64].fetch_or(m, Ordering::Relaxed);
        if self.seen.fetch_add(1, Ordering::Relaxed) + 1 >= self.window {
            self.seen.store(0, Ordering::Relaxed);
            for w in self.bits.iter() {
                w.store(0, Ordering::Relaxed);
            }
        }
        prev & m != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ins(c: &Lru<u32, u32>, k: u32) -> Vec<Arc<u32>> {
        let mut d = Vec::new();
        c.insert(k, Arc::new(k), false, &mut d);
        d
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u32),
        Get(u32),
        Remove(u32),
        Take(u32),
        Reclaim(usize, usize),
    }

    fn op(keys: u32) -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0..keys).prop_map(Op::Insert),
            2 => (0..keys).prop_map(Op::Get),
            1 => (0..keys).prop_map(Op::Remove),
            1 => (0..keys).prop_map(Op::Take),
            1 => (0..64usize, 1..8usize).prop_map(|(i, n)| Op::Reclaim(i, n)),
        ]
    }

    /// Runs `ops` against a cache of `cap` and a map of what it must hold:
    /// every entry stays findable through its shard's table growing,
    /// evictions, reclaims and removals, and nothing removed is found.
    fn against_model(cap: usize, ops: &[Op]) {
        use std::collections::HashMap;
        let c: Lru<u32, u32> = Lru::new(cap);
        let mut model: HashMap<u32, u32> = HashMap::new();
        for o in ops {
            match *o {
                Op::Insert(k) => {
                    let mut d = Vec::new();
                    match c.insert(k, Arc::new(k), false, &mut d) {
                        Inserted::Existing(v) => assert_eq!(model.get(&k), Some(&*v), "{o:?}"),
                        Inserted::Cached(v) => {
                            assert!(!model.contains_key(&k), "{o:?} cached twice");
                            assert_eq!(*v, k);
                            model.insert(k, k);
                        }
                        // Nothing is held here, but a scan may find every
                        // entry referenced: then nothing changed.
                        Inserted::Refused(_) => assert!(d.is_empty()),
                    }
                    for v in d {
                        assert_eq!(model.remove(&*v), Some(*v), "{o:?} evicted {v}");
                    }
                }
                Op::Get(k) => assert_eq!(c.get(&k).map(|v| *v), model.get(&k).copied(), "{o:?}"),
                Op::Remove(k) => {
                    assert_eq!(c.remove(&k).map(|v| *v), model.remove(&k), "{o:?}")
                }
                Op::Take(k) => assert_eq!(c.take(&k).map(|v| *v), model.remove(&k), "{o:?}"),
                Op::Reclaim(i, n) => {
                    let mut out = Vec::new();
                    c.reclaim_shard(i, n, &mut out);
                    for v in out {
                        assert_eq!(model.remove(&*v), Some(*v), "{o:?} reclaimed {v}");
                    }
                }
            }
            assert_eq!(c.len(), model.len(), "after {o:?}");
        }
        for (k, v) in &model {
            assert_eq!(c.get(k).map(|x| *x), Some(*v), "{k} lost");
        }
    }

    proptest::proptest! {
        /// Room for every key: the tables grow several times, nothing is
        /// evicted but what reclaims take.
        #[test]
        fn the_index_follows_a_model_as_its_tables_grow(
            ops in proptest::collection::vec(op(3000), 1..2000)
        ) {
            against_model(100_000, &ops);
        }

        /// A small cache: evictions at every insert past the bound.
        #[test]
        fn the_index_follows_a_model_under_eviction(
            ops in proptest::collection::vec(op(200), 1..1000)
        ) {
            against_model(64, &ops);
        }
    }

    #[test]
    fn bounded_and_second_chance() {
        let c: Lru<u32, u32> = Lru::new(8);
        assert_eq!(c.shard_count(), 1);
        for k in 0..8 {
            assert!(ins(&c, k).is_empty());
        }
        // Touch 0..4 so they survive the next evictions.
        for k in 0..4 {
            assert!(c.get(&k).is_some());
        }
        for k in 8..12 {
            let d = ins(&c, k);
            assert_eq!(d.len(), 1, "one evicted per insert at the bound");
            assert!(*d[0] >= 4, "a referenced entry was evicted: {}", d[0]);
        }
        assert_eq!(c.len(), 8);
        for k in 0..4 {
            assert!(c.get(&k).is_some(), "hot entry {k} kept");
        }
    }

    #[test]
    fn entries_in_use_are_never_evicted() {
        let c: Lru<u32, u32> = Lru::new(4);
        let held: Vec<_> = (0..4)
            .map(|k| {
                ins(&c, k);
                c.get(&k).unwrap()
            })
            .collect();
        let mut d = Vec::new();
        match c.insert(99, Arc::new(99), false, &mut d) {
            Inserted::Refused(v) => assert_eq!(*v, 99),
            _ => panic!("an insert into a shard full of held entries must be refused"),
        }
        assert!(d.is_empty());
        assert_eq!(c.counts().refused, 1);
        drop(held);
        // Referenced bits are cleared on the first pass, then entries go.
        let mut d = Vec::new();
        assert!(matches!(
            c.insert(99, Arc::new(99), false, &mut d),
            Inserted::Cached(_)
        ));
        assert_eq!(d.len(), 1);
        assert_eq!(c.len(), 4);
    }

    #[test]
    fn existing_wins_and_remove_if_same() {
        let c: Lru<u32, u32> = Lru::new(4);
        ins(&c, 1);
        let mut d = Vec::new();
        let first = c.get(&1).unwrap();
        match c.insert(1, Arc::new(100), false, &mut d) {
            Inserted::Existing(v) => assert!(Arc::ptr_eq(&v, &first)),
            _ => panic!("expected the existing entry"),
        }
        assert!(c.remove_if_same(&1, &Arc::new(1)).is_none());
        assert!(c.remove_if_same(&1, &first).is_some());
        assert!(c.get(&1).is_none());
    }

    #[test]
    fn an_insert_on_an_event_loop_refuses_at_the_bound_and_evicts_nothing() {
        let c: Lru<u32, u32> = Lru::new(4);
        let mut dropped = Vec::new();
        let mut k = 0;
        while c.len() < c.capacity() && k < 1000 {
            assert!(matches!(
                c.insert(k, Arc::new(k), true, &mut dropped),
                Inserted::Cached(_)
            ));
            k += 1;
        }
        assert_eq!(c.len(), c.capacity(), "filled below the bound");
        let before = c.counts();
        assert!(matches!(
            c.insert(5000, Arc::new(5000), true, &mut dropped),
            Inserted::Refused(_)
        ));
        let after = c.counts();
        assert!(dropped.is_empty());
        assert_eq!(c.len(), c.capacity());
        assert_eq!(after.evicted_inline, before.evicted_inline);
        assert_eq!(after.refused, before.refused + 1);
        assert!(c.get(&5000).is_none());
        // An existing key is still found.
        assert!(matches!(
            c.insert(0, Arc::new(0), true, &mut dropped),
            Inserted::Existing(_)
        ));
        // Off the loop the same insert evicts.
        assert!(matches!(
            c.insert(5000, Arc::new(5000), false, &mut dropped),
            Inserted::Cached(_)
        ));
        assert_eq!(dropped.len(), 1);
    }

    #[test]
    fn reclaim_is_bounded_per_call() {
        // Room to spare in every shard, so no insert evicts.
        let c: Lru<u32, u32> = Lru::new(16384);
        for k in 0..4096 {
            ins(&c, k);
        }
        assert_eq!(c.len(), 4096);
        let mut out = Vec::new();
        let freed = c.reclaim(100, &mut out);
        assert_eq!(freed, out.len());
        assert!(freed <= 100);
        assert!(freed > 0);
        assert_eq!(c.len(), 4096 - freed);
        // The sweep visits every entry over enough calls.
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            let mut b = Vec::new();
            c.sample_next(64, &mut b);
            seen.extend(b.into_iter().map(|(k, _)| k));
        }
        assert_eq!(seen.len(), c.len());
    }

    #[test]
    fn take_removes_and_counts_a_hit() {
        let c: Lru<u32, u32> = Lru::new(8);
        drop(ins(&c, 1));
        assert_eq!(c.take(&1).as_deref(), Some(&1));
        assert!(c.take(&1).is_none());
        assert!(c.get(&1).is_none());
        let n = c.counts();
        assert_eq!((n.hits, n.misses, n.removed, n.entries), (1, 2, 0, 0));
        assert_eq!(c.len(), 0);
    }

    #[test]
    fn a_full_cache_admits_keys_on_their_second_miss() {
        let c: Lru<u32, u32> = Lru::new(64);
        assert!(c.admit(&0, false), "room: admitted");
        for k in 0..64 {
            ins(&c, k);
        }
        assert!(!c.admit(&1000, false), "full: a first miss is not admitted");
        assert!(c.admit(&1000, false), "its second miss is");
        // One window of misses later (64 here, 1000's two included), it is
        // forgotten. The misses end the window exactly: one more key would
        // set a bit that 1000 could share (the hash is seeded at random).
        for k in 2000..2062 {
            c.admit(&k, false);
        }
        assert!(!c.admit(&1000, false));
    }

    #[test]
    fn a_cache_with_room_is_full_when_its_shared_bound_is() {
        // The descriptor budget binds before the entry bound: admission
        // must then filter as if the cache were full, or every miss
        // inserts and the reclaimer evicts one entry per miss.
        let c: Lru<u32, u32> = Lru::new(1000);
        ins(&c, 1);
        assert!(c.admit(&7, false), "room and no other bound: admitted");
        assert!(!c.admit(&8, true), "shared bound full: a first miss waits");
        assert!(c.admit(&8, true), "its second miss is admitted");
    }

    #[test]
    fn a_cache_below_its_bound_evicts_nothing() {
        // Hashing spreads keys unevenly over shards: no shard may evict
        // while the cache as a whole has room.
        let c: Lru<u32, u32> = Lru::new(1000);
        assert!(c.shard_count() > 1);
        for k in 0..1000 {
            assert!(ins(&c, k).is_empty(), "evicted at {k}");
        }
        assert_eq!(c.len(), 1000);
        let mut out = Vec::new();
        assert!(c.trim(&mut out) > 0, "full and inserted into: trimmed");
        assert_eq!(c.len(), 1000 - 1000 / 32);
        assert_eq!(c.trim(&mut out), 0, "no inserts since: left alone");
    }

    #[test]
    fn sharded_cache_never_exceeds_capacity() {
        let c: Lru<u32, u32> = Lru::new(1000);
        for k in 0..100_000 {
            ins(&c, k);
            if k % 997 == 0 {
                assert!(c.len() <= c.capacity());
            }
        }
        assert!(c.len() <= c.capacity());
        assert_eq!(c.capacity(), 1000);
        let exact: usize = (0..c.shard_count()).map(|i| c.lock(i).map.len()).sum();
        assert_eq!(exact, c.len(), "the count matches the maps");
    }
}
