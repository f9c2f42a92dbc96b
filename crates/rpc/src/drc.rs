//! Duplicate reply cache for non-idempotent procedures (the table rows with
//! `CacheClass::Reply`), after knfsd's nfscache.c.
//!
//! A client that lost a reply (dropped connection, timeout) retransmits the
//! call with the same xid. Executing a REMOVE or a CREATE GUARDED twice
//! would turn the first success into NOENT or EXIST, so the reply of the
//! first execution is kept and sent again. A call is a retransmission when
//! xid, client address and port, program, version, procedure, argument
//! length and a checksum of the first `CSUM_LEN` argument bytes all match
//! (knfsd's key); replies older than the expiry are not reused.
//!
//! A duplicate that arrives while the original still runs is dropped (no
//! reply): the original's reply answers both.
//!
//! Memory: `max_bytes` is split evenly over `BUCKETS` buckets, each with its
//! own lock and its own LRU list; an entry costs `ENTRY_OVERHEAD` plus its
//! reply. Allocations (the entry, the reply copy) are made before the bucket
//! lock is taken, so the lock covers only map updates.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::limits::{BUCKETS, CSUM_LEN, ENTRY_OVERHEAD, EXPIRE_BATCH, EXPIRE_EVERY};

/// Identifies a call across retransmissions.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub xid: u32,
    pub peer: SocketAddr,
    pub prog: u32,
    pub vers: u32,
    pub proc_: u32,
    /// Length of the arguments.
    pub len: u32,
    /// FNV-1a of the first `CSUM_LEN` argument bytes.
    pub csum: u64,
}

impl Key {
    pub fn new(xid: u32, peer: SocketAddr, prog: u32, vers: u32, proc_: u32, args: &[u8]) -> Key {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in args.iter().take(CSUM_LEN) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        Key {
            xid,
            peer,
            prog,
            vers,
            proc_,
            len: u32::try_from(args.len()).unwrap_or(u32::MAX),
            csum: h,
        }
    }

    fn bucket(&self, n: usize) -> usize {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.xid.hash(&mut h);
        self.peer.hash(&mut h);
        (h.finish() as usize) % n.max(1)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrcConfig {
    /// How long a reply may be replayed.
    pub expiry: Duration,
    /// Bound on all entries' bytes (split over the buckets).
    pub max_bytes: usize,
}

impl Default for DrcConfig {
    fn default() -> Self {
        DrcConfig {
            // knfsd's RC_EXPIRE.
            expiry: Duration::from_secs(120),
            max_bytes: 32 << 20,
        }
    }
}

/// What to do with a call.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Not seen (or expired): run it, then `finish` or `abandon`.
    New,
    /// A retransmission of a finished call: send this reply.
    Replay(Vec<u8>),
    /// A retransmission of a call still running: send nothing.
    InProgress,
}

enum State {
    InProgress,
    Done { reply: Arc<[u8]>, at: Instant },
}

struct Slot {
    seq: u64,
    state: State,
}

impl Slot {
    fn bytes(&self) -> usize {
        ENTRY_OVERHEAD
            + match &self.state {
                State::InProgress => 0,
                State::Done { reply, .. } => reply.len(),
            }
    }
}

#[derive(Default)]
struct Bucket {
    map: HashMap<Key, Slot>,
    /// Use order: sequence number -> key (oldest first).
    lru: BTreeMap<u64, Key>,
    seq: u64,
    bytes: usize,
}

impl Bucket {
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn remove(&mut self, key: &Key) {
        if let Some(s) = self.map.remove(key) {
            self.lru.remove(&s.seq);
            self.bytes -= s.bytes();
        }
    }

    /// Evict least recently used entries until within `max`.
    fn shrink(&mut self, max: usize) {
        while self.bytes > max {
            let Some((_, k)) = self.lru.pop_first() else {
                break;
            };
            if let Some(s) = self.map.remove(&k) {
                self.bytes -= s.bytes();
            }
        }
        self.check();
        // Once the LRU is empty nothing is charged: the bound holds.
        debug_assert!(self.bytes <= max, "{} bytes past {max}", self.bytes);
    }

    /// The books: every entry is in the map and the LRU once, and a bucket
    /// with no entry is charged nothing (`shrink` relies on both).
    fn check(&self) {
        debug_assert_eq!(self.map.len(), self.lru.len(), "map and LRU disagree");
        debug_assert!(
            !self.map.is_empty() || self.bytes == 0,
            "{} bytes charged to no entry",
            self.bytes
        );
    }

    /// Drop expired replies from the old end: on every `EXPIRE_EVERY`th
    /// call only (finding the old end walks the tree's left edge, a cache
    /// miss per level: 1 % of a CREATE's server CPU when done every call),
    /// at most `EXPIRE_BATCH` each time, so it keeps up with one new entry
    /// per call. Expiry frees memory only: a reply past it is never
    /// replayed (`begin`), and the byte bound holds regardless.
    fn expire(&mut self, now: Instant, expiry: Duration) {
        if !self.seq.is_multiple_of(EXPIRE_EVERY) {
            return;
        }
        for _ in 0..EXPIRE_BATCH {
            let Some((_, k)) = self.lru.first_key_value() else {
                return;
            };
            let old = matches!(
                self.map.get(k).map(|s| &s.state),
                Some(State::Done { at, .. }) if now.duration_since(*at) > expiry
            );
            if !old {
                return;
            }
            let k = k.clone();
            self.remove(&k);
        }
    }
}

pub struct Drc {
    buckets: Box<[Mutex<Bucket>]>,
    expiry: Duration,
    bucket_max: usize,
}

impl Drc {
    pub fn new(cfg: DrcConfig) -> Drc {
        Drc {
            buckets: (0..BUCKETS).map(|_| Mutex::default()).collect(),
            expiry: cfg.expiry,
            bucket_max: cfg.max_bytes / BUCKETS,
        }
    }

    fn lock(&self, key: &Key) -> MutexGuard<'_, Bucket> {
        let i = key.bucket(self.buckets.len());
        // Every bucket operation leaves the maps consistent between
        // statements that can panic (none allocate after a removal), so a
        // poisoned lock is still usable.
        self.buckets[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Called before running a cacheable call.
    pub fn begin(&self, key: &Key) -> Lookup {
        // Built before the lock; only moved into the map under it.
        let fresh = key.clone();
        let now = Instant::now();
        let reply = {
            let mut b = self.lock(key);
            b.expire(now, self.expiry);
            let seq = b.next_seq();
            let hit = match b.map.get_mut(key) {
                None => None,
                Some(s) => {
                    let old = s.seq;
                    match &s.state {
                        State::InProgress => {
                            s.seq = seq;
                            Some((old, None))
                        }
                        State::Done { reply, at } if now.duration_since(*at) <= self.expiry => {
                            s.seq = seq;
                            Some((old, Some(reply.clone())))
                        }
                        State::Done { .. } => None,
                    }
                }
            };
            match hit {
                Some((old, r)) => {
                    b.lru.remove(&old);
                    b.lru.insert(seq, fresh);
                    b.check();
                    match r {
                        None => return Lookup::InProgress,
                        Some(r) => r,
                    }
                }
                None => {
                    b.remove(key);
                    b.bytes += ENTRY_OVERHEAD;
                    b.lru.insert(seq, fresh.clone());
                    b.map.insert(
                        fresh,
                        Slot {
                            seq,
                            state: State::InProgress,
                        },
                    );
                    let max = self.bucket_max;
                    b.shrink(max);
                    return Lookup::New;
                }
            }
        };
        Lookup::Replay(reply.to_vec())
    }

    /// Keep the reply of a call `begin` answered `New` for.
    pub fn finish(&self, key: &Key, reply: &[u8]) {
        if reply.len().saturating_add(ENTRY_OVERHEAD) > self.bucket_max {
            // Could never fit: do not evict the whole bucket for it.
            self.abandon(key);
            return;
        }
        let reply: Arc<[u8]> = Arc::from(reply);
        let at = Instant::now();
        let mut b = self.lock(key);
        let Some(s) = b.map.get_mut(key) else {
            // Evicted while running: the call is simply not cached.
            return;
        };
        if !matches!(s.state, State::InProgress) {
            return;
        }
        let len = reply.len();
        s.state = State::Done { reply, at };
        b.bytes += len;
        let max = self.bucket_max;
        b.shrink(max);
    }

    /// Forget a call that produced no cacheable reply.
    pub fn abandon(&self, key: &Key) {
        let mut b = self.lock(key);
        if matches!(b.map.get(key).map(|s| &s.state), Some(State::InProgress)) {
            b.remove(key);
        }
        b.check();
    }

    /// Bytes charged to all entries (for tests and statistics).
    pub fn bytes(&self) -> usize {
        self.buckets
            .iter()
            .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()).bytes)
            .sum()
    }

    pub fn entries(&self) -> usize {
        self.buckets
            .iter()
            .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()).map.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(xid: u32, args: &[u8]) -> Key {
        Key::new(xid, "127.0.0.1:800".parse().unwrap(), 100003, 3, 8, args)
    }

    fn drc(max: usize, expiry: Duration) -> Drc {
        Drc::new(DrcConfig {
            expiry,
            max_bytes: max,
        })
    }

    #[test]
    fn replay_in_progress_and_keys() {
        let d = drc(1 << 20, Duration::from_secs(60));
        let k = key(1, b"args");
        assert_eq!(d.begin(&k), Lookup::New);
        assert_eq!(d.begin(&k), Lookup::InProgress);
        d.finish(&k, b"reply-1");
        assert_eq!(d.begin(&k), Lookup::Replay(b"reply-1".to_vec()));
        assert_eq!(d.begin(&k), Lookup::Replay(b"reply-1".to_vec()));
        // Any field of the key differing is another call.
        assert_eq!(d.begin(&key(2, b"args")), Lookup::New);
        assert_eq!(d.begin(&key(1, b"argz")), Lookup::New);
        assert_eq!(d.begin(&key(1, b"args+")), Lookup::New);
        let mut other_port = k.clone();
        other_port.peer = "127.0.0.1:801".parse().unwrap();
        assert_eq!(d.begin(&other_port), Lookup::New);
        let mut other_proc = k.clone();
        other_proc.proc_ = 12;
        assert_eq!(d.begin(&other_proc), Lookup::New);
        // Bytes past CSUM_LEN are not checksummed, but the length is.
        let mut a = vec![0u8; 400];
        let k1 = key(9, &a);
        a[300] = 1;
        assert_eq!(k1, key(9, &a));
        // Abandoned calls run again.
        let k3 = key(3, b"x");
        assert_eq!(d.begin(&k3), Lookup::New);
        d.abandon(&k3);
        assert_eq!(d.begin(&k3), Lookup::New);
    }

    #[test]
    fn expired_replies_are_not_replayed() {
        let d = drc(1 << 20, Duration::from_millis(30));
        let k = key(1, b"a");
        assert_eq!(d.begin(&k), Lookup::New);
        d.finish(&k, b"r");
        assert_eq!(d.begin(&k), Lookup::Replay(b"r".to_vec()));
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(d.begin(&k), Lookup::New);
    }

    /// Expired entries leave memory as new calls arrive, although expiry
    /// is looked for on every `EXPIRE_EVERY`th call of a bucket only.
    #[test]
    fn expired_entries_are_dropped_as_calls_arrive() {
        let d = drc(64 << 20, Duration::from_millis(20));
        for xid in 0..4_000u32 {
            let k = key(xid, b"old");
            assert_eq!(d.begin(&k), Lookup::New);
            d.finish(&k, &[1; 100]);
        }
        std::thread::sleep(Duration::from_millis(40));
        for xid in 10_000..14_000u32 {
            let k = key(xid, b"new");
            assert_eq!(d.begin(&k), Lookup::New);
            d.finish(&k, &[1; 100]);
        }
        // Every old entry is expired; each bucket saw about 62 new calls,
        // so 3 or 4 expiry passes of up to EXPIRE_BATCH: most old ones are
        // gone.
        assert!(
            d.entries() < 4_000 + 1_000,
            "{} entries kept of 8,000, of which 4,000 expired",
            d.entries()
        );
    }

    #[test]
    fn memory_bound_is_respected() {
        let max = BUCKETS * 4096;
        let d = drc(max, Duration::from_secs(60));
        let reply = vec![7u8; 500];
        for xid in 0..20_000u32 {
            let k = key(xid, &xid.to_be_bytes());
            assert_eq!(d.begin(&k), Lookup::New);
            d.finish(&k, &reply);
            if xid % 1000 == 0 {
                assert!(d.bytes() <= max);
            }
        }
        assert!(d.bytes() <= max, "{} > {max}", d.bytes());
        // 4096 / (500 + 160) = 6 entries per bucket at most.
        assert!(d.entries() <= BUCKETS * 6, "{}", d.entries());
        assert!(d.entries() >= BUCKETS, "every bucket keeps recent entries");
        // The most recent call is still cached; the oldest is gone.
        let last = key(19_999, &19_999u32.to_be_bytes());
        assert_eq!(d.begin(&last), Lookup::Replay(reply.clone()));
        let first = key(0, &0u32.to_be_bytes());
        assert_eq!(d.begin(&first), Lookup::New);
        // A reply that can never fit is not cached and evicts nothing.
        let before = d.entries();
        let big = key(50_000, b"big");
        assert_eq!(d.begin(&big), Lookup::New);
        d.finish(&big, &vec![0u8; 8192]);
        assert_eq!(d.begin(&big), Lookup::New);
        assert!(d.entries() >= before - 1);
    }

    #[test]
    fn lru_keeps_recently_used() {
        // One bucket's worth: find keys landing in the same bucket.
        let d = drc(
            BUCKETS * (3 * (ENTRY_OVERHEAD + 10)),
            Duration::from_secs(60),
        );
        let b0 = key(0, b"").bucket(BUCKETS);
        let same: Vec<Key> = (0..10_000u32)
            .map(|x| key(x, b""))
            .filter(|k| k.bucket(BUCKETS) == b0)
            .take(4)
            .collect();
        for k in &same[..3] {
            assert_eq!(d.begin(k), Lookup::New);
            d.finish(k, &[1; 10]);
        }
        // Touch the oldest, then add a fourth: the second is evicted.
        assert!(matches!(d.begin(&same[0]), Lookup::Replay(_)));
        assert_eq!(d.begin(&same[3]), Lookup::New);
        d.finish(&same[3], &[1; 10]);
        assert!(matches!(d.begin(&same[0]), Lookup::Replay(_)));
        assert_eq!(d.begin(&same[1]), Lookup::New);
    }
}
