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
//!
//! Admission is W-TinyLFU's shape: a miss that the doorkeeper does not
//! let into the main cache (its first miss while the cache or the
//! descriptor budget is full) is kept in a small probation window instead
//! of being closed, and its next use moves it to the main cache. A walk
//! (each object used a few times in a row, then never again) then opens
//! an object once, not once per call until admitted; a uniform working
//! set larger than the cache still cannot churn the main cache, and the
//! window adds no close: without it the miss's descriptor would be closed
//! at once, with it the window's oldest one is.
//!
//! Cached objects are also found by identity (device, inode) from a
//! `statx` by name (`by_identity`): LOOKUP and READDIRPLUS then take the
//! handle from the cache instead of opening the name and asking
//! `name_to_handle_at`. Sound because a cached descriptor pins its inode:
//! while it is open no other file can get that inode number, so an
//! object whose descriptor was open before the `statx` began, and still
//! is, is the object the `statx` saw. Without a descriptor (a map from
//! inode number and birth time to handle) it would not be: XFS gives a
//! freed inode number to the next file at once. Where the window promotes
//! almost nothing (a uniform working set far larger than the cache) it is
//! only probed, one refused miss in 16: there its inserts cost 15 % of
//! GETATTR's throughput and won 0.3 % hits.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

use crate::cache::{Caches, Counts, GenMap, Inserted, Lru, Permit, Reclaim};

use super::sys::{self, Key};

/// A resolved object kept between calls.
pub(super) struct Object {
    pub fd: OwnedFd,
    /// Backend clock (ms) when confinement was last proven; `FOREVER` when
    /// the whole filesystem is exported and nothing can leave it.
    verified: AtomicU64,
    /// Its descriptor's place in the budget; None: not cached (used by
    /// one call, never found by identity).
    permit: Option<Permit>,
    /// The handle it is cached under (empty when not cached: no copy made
    /// on the miss path), and when it was (its descriptor was open by
    /// then): for `by_identity`.
    fh: Box<[u8]>,
    born: Instant,
}

pub(super) const FOREVER: u64 = u64::MAX;

impl Object {
    fn new(fd: OwnedFd, verified: u64, permit: Option<Permit>, fh: &[u8]) -> Object {
        Object {
            fd,
            verified: AtomicU64::new(verified),
            fh: if permit.is_some() {
                fh.into()
            } else {
                Box::default()
            },
            permit,
            born: Instant::now(),
        }
    }

    /// The handle bytes it is cached under.
    pub fn fh(&self) -> &[u8] {
        &self.fh
    }

    pub fn verified_at(&self) -> u64 {
        self.verified.load(Ordering::Relaxed)
    }

    pub fn set_verified(&self, at: u64) {
        self.verified.store(at, Ordering::Relaxed);
    }
}

/// Entries the sweep looks at in a tick `elapsed` after the last (a statx
/// each, outside any lock): every entry about every 5 s, at least 16 a
/// tick and at most 1,024 per 100 ms.
pub(super) fn sweep_batch(len: usize, elapsed: std::time::Duration) -> usize {
    const ROUND_MS: u128 = 5_000;
    let ms = elapsed.as_millis().max(1);
    let share = (len as u128 * ms).div_ceil(ROUND_MS);
    let cap = 1024 * ms.div_ceil(100);
    share.min(cap).max(16) as usize
}

pub(super) struct ObjCache {
    lru: Lru<Box<[u8]>, Object>,
    /// First misses not admitted to `lru`, until their next use or until
    /// newer ones push them out (inline, bounded like any insert).
    window: Lru<Box<[u8]>, Object>,
    /// What the window earns: -1 per insert, +`WINDOW_USEFUL` per
    /// promotion, kept within +-`WINDOW_MEMORY` (a short memory: one
    /// promoted probe turns it back on).
    w_score: AtomicI32,
    caches: Arc<Caches>,
    /// Cached objects by identity (see the module text). A weak reference:
    /// an entry whose object has gone is a miss, and rotation drops it.
    ids: GenMap<Key, Weak<Object>>,
    ids_cap: usize,
}

/// The window is used while at least 1 in this many of its entries is
/// promoted (its score is not below -`WINDOW_USEFUL`); otherwise only 1
/// refused miss in `WINDOW_PROBE` goes in.
const WINDOW_USEFUL: i32 = 32;
const WINDOW_PROBE: u32 = 16;
const WINDOW_MEMORY: i32 = 2 * WINDOW_USEFUL;
// The score can fall below -WINDOW_USEFUL (turning the window off), and
// one probe in WINDOW_PROBE is a remainder.
const _: () = assert!(0 < WINDOW_USEFUL && WINDOW_USEFUL < WINDOW_MEMORY && WINDOW_PROBE > 0);

/// One call in `WINDOW_PROBE` on this thread (a per-thread count: no shared
/// line written on every miss).
fn probe_now() -> bool {
    thread_local! {
        static N: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }
    N.with(|n| {
        let v = n.get().wrapping_add(1);
        n.set(v);
        v % WINDOW_PROBE == 0
    })
}

/// The window's share of the entry bound: enough to hold one object per
/// call in flight (64 streams) with few collisions, small enough that the
/// main cache keeps most of the bound.
const WINDOW_SHARE: usize = 16;
const _: () = assert!(WINDOW_SHARE > 1);

impl ObjCache {
    /// At most `cap` entries: `cap / 16` (at least 1) in the window, the
    /// rest in the main cache.
    pub fn new(cap: usize, caches: Arc<Caches>) -> Arc<ObjCache> {
        let w = (cap / WINDOW_SHARE).max(1);
        let ids_cap = cap.saturating_mul(2).max(1);
        let c = Arc::new(ObjCache {
            lru: Lru::new(cap.saturating_sub(w).max(1)),
            window: Lru::new(w),
            w_score: AtomicI32::new(0),
            caches,
            // Twice the entries: a rotation forgets half of a shard's.
            ids: GenMap::new(ids_cap),
            ids_cap,
        });
        let w: std::sync::Weak<dyn Reclaim> = Arc::downgrade(&(c.clone() as Arc<dyn Reclaim>));
        c.caches.register(w);
        c
    }

    /// The cached object of `fh`: from the main cache, else from the
    /// window, whence this second use promotes it to the main cache
    /// (`on_loop`: as `Lru::insert`).
    pub fn get(&self, fh: &[u8], on_loop: bool) -> Option<Arc<Object>> {
        if let Some(o) = self.lru.get(fh) {
            return Some(o);
        }
        if self.window.is_empty() {
            return None;
        }
        let o = self.window.take(fh)?;
        self.score(WINDOW_USEFUL);
        Some(self.put(fh, o, on_loop))
    }

    /// Whether `fh` is cached (its entry marked used; a window entry is
    /// promoted, this being its second use). Counted nowhere: the caller
    /// found the object by other means.
    pub fn touch(&self, fh: &[u8], on_loop: bool) -> bool {
        if self.lru.touch(fh) {
            return true;
        }
        if self.window.is_empty() || !self.window.touch(fh) {
            return false;
        }
        match self.window.take(fh) {
            Some(o) => {
                self.score(WINDOW_USEFUL);
                drop(self.put(fh, o, on_loop));
                true
            }
            None => false,
        }
    }

    /// The cached object with identity `key` whose descriptor was open
    /// before `before` (taken before the `statx` that gave `key`) and
    /// still is: that `statx` saw this very object (see the module text).
    pub fn by_identity(&self, key: &Key, before: Instant) -> Option<Arc<Object>> {
        let o = self.ids.get_counted(key)?.upgrade()?;
        (o.born < before).then_some(o)
    }

    /// The identity index's bound and counts: hits are identities found
    /// (the object may have gone since), misses identities not known.
    pub fn identity_counts(&self) -> (usize, Counts) {
        let (entries, hits, misses) = self.ids.counts();
        let counts = Counts {
            entries: entries as u64,
            hits,
            misses,
            ..Counts::default()
        };
        (self.ids_cap, counts)
    }

    /// Caches a freshly resolved object (identity `key`) and returns it:
    /// in the main cache when admitted, else in the window (uncached when
    /// the descriptor budget or the cache bound cannot make room;
    /// `on_loop`: as `Lru::insert`).
    pub fn insert(
        &self,
        fh: &[u8],
        key: Key,
        fd: OwnedFd,
        verified: u64,
        on_loop: bool,
    ) -> Arc<Object> {
        let o = self.insert_keyless(fh, fd, verified, on_loop);
        if o.permit.is_some() {
            self.ids.insert(key, Arc::downgrade(&o));
        }
        o
    }

    fn insert_keyless(&self, fh: &[u8], fd: OwnedFd, verified: u64, on_loop: bool) -> Arc<Object> {
        let admitted = self.lru.admit(fh, self.caches.budget().full());
        if !admitted && !self.window_wanted() {
            // Uncached: the call's descriptor closes when it is done.
            return Arc::new(Object::new(fd, verified, None, fh));
        }
        // The window never reclaims inline for its permit: a first miss
        // is not worth evicting a main entry on the call's time.
        let permit = if admitted {
            self.caches.acquire_for(self, on_loop)
        } else {
            self.caches.acquire()
        };
        let cache = permit.is_some();
        let o = Arc::new(Object::new(fd, verified, permit, fh));
        if !cache {
            return o;
        }
        if admitted {
            return self.put(fh, o, on_loop);
        }
        let mut dropped = Vec::new();
        let r = self.window.insert(fh.into(), o, on_loop, &mut dropped);
        drop(dropped);
        r.into_arc()
    }

    /// Whether a refused miss goes into the window: while it promotes at
    /// least 1 in `WINDOW_USEFUL` of its entries (a walk promotes nearly
    /// all), else 1 in `WINDOW_PROBE`, so that a change of load is seen.
    fn window_wanted(&self) -> bool {
        let useful = self.w_score.load(Ordering::Relaxed) >= -WINDOW_USEFUL;
        if !useful && !probe_now() {
            return false;
        }
        self.score(-1);
        true
    }

    /// Relaxed and unlocked: a lost update only blurs an estimate.
    fn score(&self, d: i32) {
        let v = self.w_score.load(Ordering::Relaxed);
        let n = (v + d).clamp(-WINDOW_MEMORY, WINDOW_MEMORY);
        if n != v {
            self.w_score.store(n, Ordering::Relaxed);
        }
    }

    /// Puts `o` (holding its permit) in the main cache.
    fn put(&self, fh: &[u8], o: Arc<Object>, on_loop: bool) -> Arc<Object> {
        let mut dropped = Vec::new();
        let r = self.lru.insert(fh.into(), o, on_loop, &mut dropped);
        drop(dropped);
        match r {
            Inserted::Cached(o) | Inserted::Refused(o) => o,
            // Another call resolved the same handle first: the newer
            // descriptor is closed when `o` goes.
            Inserted::Existing(e) => e,
        }
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

    /// The window's counters: hits are promotions to the main cache.
    pub fn window_counts(&self) -> Counts {
        self.window.counts()
    }

    pub fn window_capacity(&self) -> usize {
        self.window.capacity()
    }

    /// Removes entries whose object was deleted (from the main cache and
    /// the window, whose entries would otherwise keep a deleted file's
    /// space while idle): a bounded batch per call, statx outside the lock.
    /// Returns how many it removed.
    fn sweep(&self, elapsed: std::time::Duration) -> usize {
        let mut removed = 0;
        for lru in [&self.lru, &self.window] {
            let mut batch = Vec::new();
            lru.sample_next(sweep_batch(lru.len(), elapsed), &mut batch);
            for (k, o) in batch {
                let dead = sys::fstat(o.fd.as_raw_fd()).map_or(true, |s| s.nlink == 0);
                if dead {
                    let gone = lru.remove_if_same(&k, &o);
                    removed += usize::from(gone.is_some());
                    drop(gone);
                }
            }
        }
        removed
    }
}

impl Reclaim for ObjCache {
    fn reclaim(&self, max: usize) -> usize {
        let mut out = Vec::new();
        // The main cache first: the window is a fixed share of the bound,
        // and emptying it at every reclaim would undo its purpose.
        let mut freed = self.lru.reclaim(max, &mut out);
        if freed < max {
            freed += self.window.reclaim(max - freed, &mut out);
        }
        // Descriptors close here, after every lock is released.
        drop(out);
        freed
    }

    fn tick(&self, elapsed: std::time::Duration) -> bool {
        let mut out = Vec::new();
        let trimmed = self.lru.trim(&mut out);
        drop(out);
        trimmed + self.sweep(elapsed) > 0
    }
}

#[cfg(test)]
mod tests {
    use super::sweep_batch;
    use std::time::Duration;

    #[test]
    fn the_sweep_keeps_its_pace_whatever_the_tick() {
        let ms = Duration::from_millis;
        // Every entry about every 5 s: a fiftieth per 100 ms tick, sixteen
        // times that per 1.6 s tick.
        assert_eq!(sweep_batch(10_000, ms(100)), 200);
        assert_eq!(sweep_batch(10_000, ms(1600)), 3_200);
        // At least 16 a tick; at most 1,024 per 100 ms.
        assert_eq!(sweep_batch(10, ms(100)), 16);
        assert_eq!(sweep_batch(10_000_000, ms(100)), 1_024);
        assert_eq!(sweep_batch(10_000_000, ms(1600)), 16 * 1_024);
        assert_eq!(sweep_batch(0, Duration::ZERO), 16);
    }
}
