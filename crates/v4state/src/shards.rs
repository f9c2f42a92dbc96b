//! A hash map split into independently locked shards, so threads working
//! on different keys rarely wait for each other.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::{Mutex, MutexGuard};

pub(crate) const SHARDS: usize = 32;

pub(crate) struct Shards<K, V> {
    hasher: RandomState,
    v: Box<[Mutex<HashMap<K, V>>]>,
}

pub(crate) fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not wedge the server: the data under every
    // lock here stays consistent between statements that can panic.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<K: Hash + Eq, V> Shards<K, V> {
    pub(crate) fn new() -> Self {
        Shards {
            hasher: RandomState::new(),
            v: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }

    /// The shard holding `k`, locked.
    pub(crate) fn shard(&self, k: &K) -> MutexGuard<'_, HashMap<K, V>> {
        let i = self.hasher.hash_one(k) as usize % self.v.len();
        locked(&self.v[i])
    }

    /// Each shard in turn, locked (one at a time).
    pub(crate) fn each(&self) -> impl Iterator<Item = MutexGuard<'_, HashMap<K, V>>> {
        self.v.iter().map(|m| locked(m))
    }

    pub(crate) fn len(&self) -> usize {
        self.each().map(|s| s.len()).sum()
    }
}
