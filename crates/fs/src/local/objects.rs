//! The handle -> object cache. Key: the handle's bytes (a hit means these
//! exact bytes passed the MAC once). Value: the object's O_PATH descriptor
//! (which is its identity: it pins the inode) and when the object was last
//! proven inside the export; its type and attributes come from the statx
//! every hit makes.
//!
//! The descriptor pins the inode, so a cached handle can never reach
//! another object that reused the inode number; an object deleted behind
//! our back shows nlink 0 on its next use (and in the periodic sweep) and
//! is released.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::cache::reclaim::BATCH;
use crate::cache::{Caches, Counts, Inserted, Lru, Permit, Reclaim};

use super::sys;

/// A resolved object kept between calls.
pub(super) struct Object {
    pub fd: OwnedFd,
    /// Backend clock (ms) when confinement was last proven; `FOREVER` when
    /// the whole filesystem is exported and nothing can leave it.
    verified: AtomicU64,
    _permit: Option<Permit>,
}

pub(super) const FOREVER: u64 = u64::MAX;

impl Object {
    pub fn verified_at(&self) -> u64 {
        self.verified.load(Ordering::Relaxed)
    }

    pub fn set_verified(&self, at: u64) {
        self.verified.store(at, Ordering::Relaxed);
    }
}

/// Entries the sweep looks at per tick (a statx each, outside any lock):
/// every entry about every 5 s (50 ticks), at least 16 and at most 1024 a
/// tick.
pub(super) fn sweep_batch(len: usize) -> usize {
    (len / 50).clamp(16, 1024)
}

pub(super) struct ObjCache {
    lru: Lru<Box<[u8]>, Object>,
    caches: Arc<Caches>,
}

impl ObjCache {
    pub fn new(cap: usize, caches: Arc<Caches>) -> Arc<ObjCache> {
        let c = Arc::new(ObjCache {
            lru: Lru::new(cap),
            caches,
        });
        let w: std::sync::Weak<dyn Reclaim> = Arc::downgrade(&(c.clone() as Arc<dyn Reclaim>));
        c.caches.register(w);
        c
    }

    pub fn get(&self, fh: &[u8]) -> Option<Arc<Object>> {
        self.lru.get(fh)
    }

    /// Caches a freshly resolved object and returns it (uncached when the
    /// cache is full and the handle missed for the first time lately, or
    /// when the descriptor budget or the cache bound cannot make room).
    pub fn insert(&self, fh: &[u8], fd: OwnedFd, verified: u64) -> Arc<Object> {
        let permit = if self.lru.admit(fh, self.caches.budget().full()) {
            self.permit()
        } else {
            None
        };
        let cache = permit.is_some();
        let o = Arc::new(Object {
            fd,
            verified: AtomicU64::new(verified),
            _permit: permit,
        });
        if !cache {
            return o;
        }
        let mut dropped = Vec::new();
        let r = self.lru.insert(fh.into(), o, &mut dropped);
        drop(dropped);
        match r {
            Inserted::Cached(o) | Inserted::Refused(o) => o,
            // Another call resolved the same handle first: the newer
            // descriptor is closed when `o` goes.
            Inserted::Existing(e) => e,
        }
    }

    /// A descriptor permit; at the budget's limit, first frees a batch of
    /// this cache's own unused entries (inline only when the bound is hit).
    fn permit(&self) -> Option<Permit> {
        if let Some(p) = self.caches.acquire() {
            return Some(p);
        }
        self.reclaim(BATCH);
        self.caches.acquire()
    }

    /// Forgets `fh` if it still maps to `o` (found stale by its user).
    pub fn forget(&self, fh: &[u8], o: &Arc<Object>) {
        let gone = self.lru.remove_if_same(fh, o);
        drop(gone);
    }

    pub fn counts(&self) -> Counts {
        self.lru.counts()
    }

    pub fn capacity(&self) -> usize {
        self.lru.capacity()
    }

    /// Removes entries whose object was deleted: a bounded batch per call,
    /// statx outside the lock.
    fn sweep(&self) {
        let mut batch = Vec::new();
        self.lru
            .sample_next(sweep_batch(self.lru.len()), &mut batch);
        for (k, o) in batch {
            let dead = sys::fstat(o.fd.as_raw_fd()).map_or(true, |s| s.nlink == 0);
            if dead {
                let gone = self.lru.remove_if_same(&k, &o);
                drop(gone);
            }
        }
    }
}

impl Reclaim for ObjCache {
    fn reclaim(&self, max: usize) -> usize {
        let mut out = Vec::new();
        let freed = self.lru.reclaim(max, &mut out);
        // Descriptors close here, after every lock is released.
        drop(out);
        freed
    }

    fn tick(&self) {
        let mut out = Vec::new();
        self.lru.trim(&mut out);
        drop(out);
        self.sweep();
    }
}
