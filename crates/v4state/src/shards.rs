//! A hash map split into independently locked shards, so threads working
//! on different keys rarely wait for each other.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Mutex, MutexGuard};

pub(crate) const SHARDS: usize = 32;

pub(crate) struct Shards<K, V, S = RandomState> {
    hasher: S,
    v: Box<[Mutex<HashMap<K, V, S>>]>,
}

/// A hasher for ids the server made with a MAC in them (session ids):
/// their bytes are already unpredictable to a client, so a keyed SipHash
/// (twice per SEQUENCE: the shard, then the map) buys nothing; a client
/// naming an id that does not exist only misses.
#[derive(Clone, Copy, Default)]
pub(crate) struct MadeIds;

impl BuildHasher for MadeIds {
    type Hasher = MadeIdHasher;
    fn build_hasher(&self) -> MadeIdHasher {
        MadeIdHasher(0)
    }
}

/// Folds the bytes in 8 at a time (the length prefix is ignored: the ids
/// are of one size).
pub(crate) struct MadeIdHasher(u64);

impl Hasher for MadeIdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.0 = (self.0.rotate_left(29) ^ u64::from_le_bytes(w))
                .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_usize(&mut self, _: usize) {}
    fn finish(&self) -> u64 {
        // The high bits picked the shard and hashbrown's tag bits come
        // from the top too: mix them down as well.
        self.0 ^ (self.0 >> 32)
    }
}

pub(crate) fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not wedge the server: the data under every
    // lock here stays consistent between statements that can panic.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<K: Hash + Eq, V, S: BuildHasher + Clone + Default> Shards<K, V, S> {
    pub(crate) fn new() -> Self {
        let hasher = S::default();
        Shards {
            v: (0..SHARDS)
                .map(|_| Mutex::new(HashMap::with_hasher(hasher.clone())))
                .collect(),
            hasher,
        }
    }

    /// The shard holding `k`, locked.
    pub(crate) fn shard(&self, k: &K) -> MutexGuard<'_, HashMap<K, V, S>> {
        // Bits the maps do not use (hashbrown takes its bucket from the
        // low bits, its tag from the top 7): one hasher serves both.
        let i = (self.hasher.hash_one(k) >> 32) as usize % self.v.len();
        locked(&self.v[i])
    }

    /// Each shard in turn, locked (one at a time).
    pub(crate) fn each(&self) -> impl Iterator<Item = MutexGuard<'_, HashMap<K, V, S>>> {
        self.v.iter().map(|m| locked(m))
    }

    pub(crate) fn len(&self) -> usize {
        self.each().map(|s| s.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_ids_spread_over_shards_and_buckets() {
        // Ids as `Ids::session_id` lays them out, with a MAC that is a
        // plain counter too (the worst case for the fold).
        let m: Shards<[u8; 16], u32, MadeIds> = Shards::new();
        for n in 0u32..32_000 {
            let mut id = [0u8; 16];
            id[..4].copy_from_slice(&7u32.to_be_bytes());
            id[4..8].copy_from_slice(&n.to_be_bytes());
            id[8..12].copy_from_slice(&n.to_le_bytes());
            m.shard(&id).insert(id, n);
        }
        let per: Vec<usize> = m.each().map(|s| s.len()).collect();
        assert_eq!(per.iter().sum::<usize>(), 32_000);
        // Each shard within a quarter of the even 1,000.
        assert!(per.iter().all(|&n| (750..=1250).contains(&n)), "{per:?}");
        // The low bits (buckets) differ within a shard too.
        let s = m.v.first().map(|s| locked(s)).unwrap();
        let low: std::collections::HashSet<u64> =
            s.keys().map(|k| MadeIds.hash_one(k) & 0x3ff).collect();
        assert!(low.len() > 500, "{} distinct low bits", low.len());
    }
}
