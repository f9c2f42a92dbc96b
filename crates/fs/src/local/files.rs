//! The open-file cache (knfsd's `nfsd_file`): (object, access) -> one
//! descriptor opened once, as the server. Permission is still decided on
//! every call, for the caller (`perm.rs`).
//!
//! Durability: a descriptor written UNSTABLE stays open until its data is
//! committed or flushed. A written descriptor that leaves the cache dirty
//! (eviction, idle close) leaves a flush owed, run in the background and
//! settled before any COMMIT answers (`flusher.rs`), and any error from a
//! flush, a
//! COMMIT or a stable WRITE resets the write verifier, so every client
//! resends what it has not seen committed (knfsd's
//! `nfsd_reset_write_verifier`): a writeback error seen first by another
//! caller, or lost with an evicted inode, can never let a COMMIT succeed
//! with the verifier of the lost WRITE.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::cache::{Caches, Counts, Lru, Permit, Reclaim};
use crate::limits::local::{LATER_KICK, LATER_MAX, MAX_IDLE_CLOSES, WRITE_IDLE_MS};
use crate::WriteVerifier;

use super::behind::WriteBehind;
use super::flusher::Flusher;
use super::objects::sweep_batch;
use super::sys::{self, Key};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Access {
    Read,
    Write,
}

impl Access {
    pub fn flags(self) -> libc::c_int {
        match self {
            // Non-blocking: a file an NFSv4 delegation's lease covers (a
            // write lease, for a reader) answers EWOULDBLOCK (the
            // caller's DELAY / JUKEBOX) rather than holding a worker or
            // an event loop for the lease break time; regular files'
            // reads and writes ignore the flag.
            Access::Read => libc::O_RDONLY | libc::O_NONBLOCK,
            Access::Write => libc::O_WRONLY | libc::O_NONBLOCK,
        }
    }
}

pub(super) struct OpenFile {
    pub fd: OwnedFd,
    access: Access,
    /// UNSTABLE writes done through this descriptor, and how many of them
    /// the last successful sync covered: dirty while they differ.
    written: AtomicU64,
    synced: AtomicU64,
    /// Bytes written through it since the last sync that succeeded began
    /// (at most: the kernel may have written some back meanwhile).
    unsynced: AtomicU64,
    /// Backend clock (ms) of the last use, for closing idle writers.
    last_used: AtomicU64,
    /// UNSTABLE bytes written since it was last queued for write-behind,
    /// and whether it is queued now (`behind.rs`).
    behind: AtomicU64,
    behind_queued: AtomicBool,
    verifier: Arc<WriteVerifier>,
    flusher: Arc<Flusher>,
    /// Its descriptor's place in the budget; None: not cached (used by one
    /// call and closed, never queued for write-behind).
    permit: Option<Permit>,
}

/// Whether an error from writing or syncing says stable storage may have
/// lost data (knfsd resets the verifier on all but these).
fn storage_error(e: &io::Error) -> bool {
    !matches!(
        e.raw_os_error(),
        Some(libc::EAGAIN | libc::ESTALE | libc::EINTR | libc::EBADF)
    )
}

impl OpenFile {
    pub fn touch(&self, now: u64) {
        // Only written when it changes by a tick, so a hot file's line is
        // not rewritten by every call.
        if now.saturating_sub(self.last_used.load(Ordering::Relaxed)) >= 100 {
            self.last_used.store(now, Ordering::Relaxed);
        }
    }

    /// Records a write of `n` bytes that completed.
    pub fn wrote(&self, n: u64) {
        self.unsynced.fetch_add(n, Ordering::AcqRel);
        self.written.fetch_add(1, Ordering::AcqRel);
    }

    /// Bytes written through it that no sync begun since covered (an upper
    /// bound on what its next sync writes back).
    pub fn unsynced_bytes(&self) -> u64 {
        self.unsynced.load(Ordering::Acquire)
    }

    /// Counts `n` UNSTABLE bytes toward write-behind: true when they reach
    /// `threshold` and the writer was not queued yet (the caller queues
    /// it). Only a cached writer (one holding a budget permit) is ever
    /// queued, so queued writers never hold descriptors past the budget;
    /// an uncached one is closed after its call, its flush owed to the
    /// flusher. Advisory: bytes added by a racing write may go uncounted.
    pub fn gather_behind(&self, n: u64, threshold: u64) -> bool {
        if self.permit.is_none() {
            return false;
        }
        let total = self.behind.fetch_add(n, Ordering::AcqRel).saturating_add(n);
        if total < threshold || self.behind_queued.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.behind.store(0, Ordering::Release);
        true
    }

    /// Its write-behind ran (or was dropped): it may be queued again.
    pub fn behind_done(&self) {
        self.behind_queued.store(false, Ordering::Release);
    }

    /// Whether it holds a place in the cache's descriptor budget.
    pub fn is_cached(&self) -> bool {
        self.permit.is_some()
    }

    pub fn is_dirty(&self) -> bool {
        self.written.load(Ordering::Acquire) != self.synced.load(Ordering::Acquire)
    }

    /// fsync (or fdatasync) through this descriptor. Success marks the
    /// writes done before it started as clean; a storage error resets the
    /// write verifier before it is returned.
    pub fn sync(&self, data_only: bool) -> io::Result<()> {
        let w = self.written.load(Ordering::Acquire);
        let u = self.unsynced.load(Ordering::Acquire);
        let r = if data_only {
            sys::fdatasync(self.fd.as_raw_fd())
        } else {
            sys::fsync(self.fd.as_raw_fd())
        };
        self.synced_to(w, u, r)
    }

    /// Writes back this descriptor's file data and waits for it: the first
    /// half of a sync, whose second, the journal commit, the caller then
    /// owes (`commit.rs`). Errors as `sync`'s. Its writes count as synced
    /// here: should that commit fail, the verifier is reset, which makes
    /// clients resend them anyway.
    pub fn write_back(&self) -> io::Result<()> {
        let w = self.written.load(Ordering::Acquire);
        let u = self.unsynced.load(Ordering::Acquire);
        self.synced_to(w, u, sys::write_back(self.fd.as_raw_fd()))
    }

    /// A sync that began after write number `w`, with `u` bytes unsynced,
    /// ended with `r`.
    fn synced_to(&self, w: u64, u: u64, r: io::Result<()>) -> io::Result<()> {
        // Its bytes left the page cache's dirty set either way (written, or
        // lost and reported: clients resend them as new writes). Writes
        // since it began stay counted (a concurrent sync may have taken
        // some off already).
        let _ = self
            .unsynced
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                Some(v.saturating_sub(u))
            });
        match r {
            Ok(()) => {
                self.synced.fetch_max(w, Ordering::AcqRel);
                Ok(())
            }
            Err(e) => {
                if storage_error(&e) {
                    self.verifier.reset(&e);
                }
                Err(e)
            }
        }
    }

    /// A write through this descriptor failed: a storage error resets the
    /// verifier (data written earlier may be what was lost).
    pub fn write_failed(&self, e: &io::Error) {
        if matches!(
            e.raw_os_error(),
            Some(libc::EIO | libc::ENOSPC | libc::EDQUOT)
        ) {
            self.verifier.reset(e);
        }
    }
}

impl OpenFile {
    /// Its writes leave uncommitted (it is being closed): the export owes
    /// a flush, counted now, so a COMMIT that starts after this settles it
    /// (flusher.rs); nothing is owed for it again.
    fn leave_dirty(&self) {
        if self.access != Access::Write || !self.is_dirty() {
            return;
        }
        let w = self.written.load(Ordering::Acquire);
        // A deleted file's data matters to nobody: nothing is owed for it.
        let linked = sys::fstat(self.fd.as_raw_fd()).is_ok_and(|s| s.nlink > 0);
        if linked {
            self.flusher.closed_dirty();
        }
        self.synced.fetch_max(w, Ordering::AcqRel);
    }
}

impl Drop for OpenFile {
    fn drop(&mut self) {
        self.leave_dirty();
    }
}

pub(super) struct FileCache {
    lru: Lru<(Key, Access), OpenFile>,
    caches: Arc<Caches>,
    flusher: Arc<Flusher>,
    behind: Arc<WriteBehind>,
    epoch: std::time::Instant,
    /// Writers released on an event loop, closed by the reclaimer.
    later: std::sync::Mutex<Vec<OpenFile>>,
}

impl FileCache {
    pub fn new(
        cap: usize,
        caches: Arc<Caches>,
        flusher: Arc<Flusher>,
        behind: Arc<WriteBehind>,
        epoch: std::time::Instant,
    ) -> Arc<FileCache> {
        let c = Arc::new(FileCache {
            lru: Lru::new(cap),
            caches,
            flusher,
            behind,
            epoch,
            later: std::sync::Mutex::new(Vec::with_capacity(LATER_MAX)),
        });
        let w: std::sync::Weak<dyn Reclaim> = Arc::downgrade(&(c.clone() as Arc<dyn Reclaim>));
        c.caches.register(w);
        c
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub fn get(&self, key: Key, access: Access) -> Option<Arc<OpenFile>> {
        let f = self.lru.get(&(key, access))?;
        f.touch(self.now());
        Some(f)
    }

    /// Caches a descriptor just opened and returns it (used once and closed
    /// when the cache cannot take it; `on_loop`: as `Lru::insert`).
    pub fn insert(
        &self,
        key: Key,
        access: Access,
        fd: OwnedFd,
        verifier: Arc<WriteVerifier>,
        on_loop: bool,
    ) -> Arc<OpenFile> {
        // A reader is cached on its second miss once the cache is full; a
        // writer always (a writer used once would be flushed at its close).
        let admit =
            access == Access::Write || self.lru.admit(&(key, access), self.caches.budget().full());
        let permit = if admit {
            self.caches.acquire_for(self, on_loop)
        } else {
            None
        };
        let cache = permit.is_some();
        let f = Arc::new(OpenFile {
            fd,
            access,
            written: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            unsynced: AtomicU64::new(0),
            last_used: AtomicU64::new(self.now()),
            behind: AtomicU64::new(0),
            behind_queued: AtomicBool::new(false),
            verifier,
            flusher: self.flusher.clone(),
            permit,
        });
        if !cache {
            return f;
        }
        let mut dropped = Vec::new();
        let r = self.lru.insert((key, access), f, on_loop, &mut dropped);
        drop(dropped);
        r.into_arc()
    }

    /// Done with `f`. `on_loop` (an event loop running a call,
    /// `crate::inline`): the last reference
    /// to a writer is not closed there: a writer's release may start
    /// writeback (ext4 flushes a file truncated to zero at its close), the
    /// sleep the loop must not take, so the reclaimer closes it (at its
    /// next tick, or sooner when `LATER_KICK` wait). The flush its writes
    /// owe is counted at once, before the call's reply. Anywhere else, or
    /// not the last reference, an ordinary drop.
    pub fn release(&self, f: Arc<OpenFile>, on_loop: bool) {
        if f.access != Access::Write || !on_loop {
            return;
        }
        let Ok(f) = Arc::try_unwrap(f) else {
            return;
        };
        f.leave_dirty();
        let mut g = self.later.lock().unwrap_or_else(|e| e.into_inner());
        if g.len() >= LATER_MAX {
            drop(g);
            drop(f);
            return;
        }
        g.push(f);
        debug_assert!(g.len() <= LATER_MAX, "{} writers wait", g.len());
        let kick = g.len() == LATER_KICK;
        drop(g);
        if kick {
            self.caches.kick();
        }
    }

    /// Forgets every descriptor of `key` (its last name was removed): each
    /// is closed once its current users are done.
    pub fn forget(&self, key: Key) {
        let gone = [
            self.lru.remove(&(key, Access::Read)),
            self.lru.remove(&(key, Access::Write)),
        ];
        drop(gone);
    }

    pub fn counts(&self) -> Counts {
        self.lru.counts()
    }

    pub fn capacity(&self) -> usize {
        self.lru.capacity()
    }

    pub fn flusher(&self) -> &Flusher {
        &self.flusher
    }

    pub fn behind(&self) -> &WriteBehind {
        &self.behind
    }

    /// Closes descriptors of deleted files and idle writers, a bounded
    /// batch per tick; statx, flushes and closes happen outside the lock.
    /// Returns how many it removed.
    fn sweep(&self, elapsed: std::time::Duration) -> usize {
        let mut batch = Vec::new();
        self.lru
            .sample_next(sweep_batch(self.lru.len(), elapsed), &mut batch);
        let mut removed = 0;
        let now = self.now();
        let mut closes = 0;
        for (k, f) in batch {
            let idle = f.access == Access::Write
                && now.saturating_sub(f.last_used.load(Ordering::Relaxed)) >= WRITE_IDLE_MS;
            let dead = sys::fstat(f.fd.as_raw_fd()).map_or(true, |s| s.nlink == 0);
            if (idle && closes < MAX_IDLE_CLOSES) || dead {
                closes += usize::from(idle);
                let gone = self.lru.remove_if_same(&k, &f);
                removed += usize::from(gone.is_some());
                drop(gone);
            }
        }
        removed
    }
}

impl Reclaim for FileCache {
    fn reclaim(&self, max: usize) -> usize {
        let mut out = Vec::new();
        let freed = self.lru.reclaim(max, &mut out);
        // Descriptors close here, after every lock is released.
        drop(out);
        freed
    }

    fn tick(&self, elapsed: std::time::Duration) -> bool {
        let mut out = Vec::new();
        let mut work = self.lru.trim(&mut out);
        drop(out);
        let mut g = self.later.lock().unwrap_or_else(|e| e.into_inner());
        if !g.is_empty() {
            let later = std::mem::replace(&mut *g, Vec::with_capacity(LATER_MAX));
            drop(g);
            work += later.len();
            drop(later);
        }
        work + self.sweep(elapsed) > 0
    }
}

#[cfg(test)]
mod tests {
    use super::super::behind::WriteBehind;
    use super::*;
    use std::time::{Duration, Instant};

    /// A file cache whose descriptor budget is taken, so nothing it opens
    /// can be cached: every writer is used once (as on a loop at a bound).
    fn full_cache(dir: &std::path::Path) -> (Arc<FileCache>, Arc<Flusher>, Permit) {
        let caches = Caches::new(1);
        let taken = caches.acquire().expect("the one descriptor");
        let root = std::fs::File::open(dir).unwrap().into();
        let verifier = Arc::new(WriteVerifier::new([1; 8]));
        let flusher = Flusher::new(root, verifier, Duration::from_secs(3600));
        let files = FileCache::new(
            16,
            caches,
            flusher.clone(),
            WriteBehind::new(0),
            Instant::now(),
        );
        (files, flusher, taken)
    }

    /// An empty file "f" in a fresh directory, and `full_cache` there.
    fn file_and_full_cache() -> (
        tempfile::TempDir,
        std::path::PathBuf,
        (Arc<FileCache>, Arc<Flusher>, Permit),
    ) {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("f");
        std::fs::write(&path, b"").unwrap();
        let cache = full_cache(d.path());
        (d, path, cache)
    }

    /// A writer of `path` that wrote, inserted as a call `on_loop` would.
    fn written_writer(files: &FileCache, path: &std::path::Path, on_loop: bool) -> Arc<OpenFile> {
        let fd: OwnedFd = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap()
            .into();
        let key = sys::fstat(fd.as_raw_fd()).unwrap().key();
        let verifier = Arc::new(WriteVerifier::new([1; 8]));
        let f = files.insert(key, Access::Write, fd, verifier, on_loop);
        sys::pwrite_full(f.fd.as_raw_fd(), 0, b"data").unwrap();
        f.wrote(4);
        f
    }

    /// A writer the cache could not keep (the budget is taken) is never
    /// queued for write-behind, however much it writes: a queued writer
    /// keeps its descriptor, which only a permit may do.
    #[test]
    fn an_uncached_writer_is_not_queued_for_write_behind() {
        let (_d, path, (files, _flusher, taken)) = file_and_full_cache();
        let f = written_writer(&files, &path, false);
        assert!(f.permit.is_none(), "the budget is taken: not cached");
        assert!(
            !f.gather_behind(1 << 30, 1),
            "an uncached writer was queued"
        );
        drop(taken);
        let cached = written_writer(&files, &path, false);
        assert!(cached.permit.is_some(), "a descriptor is free: cached");
        assert!(
            cached.gather_behind(1 << 20, 1),
            "a cached writer past the threshold"
        );
        assert!(
            !cached.gather_behind(1 << 20, 1),
            "queued at most once at a time"
        );
        cached.behind_done();
        assert!(cached.gather_behind(1 << 20, 1), "queued again once done");
    }

    fn waiting(files: &FileCache) -> usize {
        files.later.lock().unwrap().len()
    }

    /// An event loop lets go of the last reference to a written writer
    /// the cache could not keep: the writer is not closed there but left
    /// to the reclaimer, which closes it within a tick, and the flush its
    /// data owes is counted before `release` returns, so a COMMIT right
    /// after settles it. Off a loop, `release` is an ordinary drop.
    #[test]
    fn a_loop_leaves_a_writers_close_to_the_reclaimer() {
        let (_d, path, (files, flusher, _taken)) = file_and_full_cache();

        let f = written_writer(&files, &path, false);
        files.release(f, false);
        assert_eq!(waiting(&files), 0, "off a loop: closed at once");
        assert_eq!(flusher.settle(), Ok(()));
        let settled = flusher.flushes();
        assert_eq!(settled, 1, "the close counted the flush it owes");

        {
            let f = written_writer(&files, &path, true);
            files.release(f, true);
        }
        // The reclaimer ticks every 100 ms: this check lands in its tick
        // about once in 100,000 runs.
        assert_eq!(waiting(&files), 1, "on a loop: left to the reclaimer");
        assert_eq!(flusher.settle(), Ok(()));
        assert_eq!(
            flusher.flushes(),
            settled + 1,
            "owed before release returned"
        );
        let end = Instant::now() + Duration::from_secs(5);
        while waiting(&files) > 0 {
            assert!(Instant::now() < end, "the reclaimer never closed it");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
