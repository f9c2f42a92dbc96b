//! Finding objects whose location is not known (after a restart, a host
//! reboot that left kernel dentries disconnected, or a rename done outside
//! the server).
//!
//! One background walk of the export per pass looks for every wanted inode
//! at once and records where it saw them in the location map, with every
//! directory and, up to a quarter of the map, the other objects it passed
//! (so the misses that follow need no walk of their own); callers
//! register what they want and wait a bounded time, then answer JUKEBOX so
//! the client retries and finds the location recorded. No lock is held
//! across the walk, concurrent misses share one walk instead of each
//! scanning the export, and at most `max_waiters` workers wait at a time
//! (the rest answer JUKEBOX at once): warm calls always find free workers.
//!
//! The walk only says where an inode number was seen; the caller re-walks
//! that location from the export root and checks identity and generation
//! itself (resolve.rs), so nothing here decides confinement.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::cache::TtlSet;
use crate::limits::local::{
    MAX_SCAN_DEPTH, MAX_WANTED, MISSING_CAP, MISSING_TTL, REFRESH_EVERY, SCAN_BUF,
};

use super::locmap::LocMap;
use super::sys::{self, Key};

/// What a wait for a location ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Located {
    /// Recorded in the location map.
    Found,
    /// A complete walk that started after the request did not see it.
    Missing,
    /// Not known yet (the walk runs on) or too many waiting: JUKEBOX.
    Busy,
}

pub(super) struct ScanLimits {
    /// Directory entries one walk visits at most.
    pub entries: usize,
    /// Workers waiting for a walk at once, at most.
    pub max_waiters: usize,
    /// How long one waits before answering JUKEBOX.
    pub wait: Duration,
    pub cross_mounts: bool,
}

struct Want {
    /// The first walk pass that can answer for it (one that started after
    /// it was wanted).
    need_pass: u64,
    found: Option<bool>,
    waiters: u32,
}

struct State {
    wanted: HashMap<Key, Want>,
    /// Passes started; the running one is `pass` when `running`.
    pass: u64,
    running: bool,
    waiters: usize,
}

struct Shared {
    state: Mutex<State>,
    cv: Condvar,
    /// Bumped whenever an inode is newly wanted, so the walk refreshes its
    /// copy of the wanted set without taking the lock per entry.
    version: AtomicU64,
    missing: TtlSet<Key>,
    root: OwnedFd,
    root_key: Key,
    root_mnt: u64,
    locs: Arc<LocMap>,
    limits: ScanLimits,
    waited: AtomicU64,
    busy: AtomicU64,
    passes: AtomicU64,
}

pub(super) struct Scanner {
    s: Arc<Shared>,
}

impl Scanner {
    /// `root` is a descriptor of the export root opened for reading.
    pub fn new(
        root: OwnedFd,
        root_key: Key,
        root_mnt: u64,
        locs: Arc<LocMap>,
        limits: ScanLimits,
    ) -> Scanner {
        Scanner {
            s: Arc::new(Shared {
                state: Mutex::new(State {
                    wanted: HashMap::new(),
                    pass: 0,
                    running: false,
                    waiters: 0,
                }),
                cv: Condvar::new(),
                version: AtomicU64::new(0),
                missing: TtlSet::new(MISSING_CAP, MISSING_TTL),
                root,
                root_key,
                root_mnt,
                locs,
                limits,
                waited: AtomicU64::new(0),
                busy: AtomicU64::new(0),
                passes: AtomicU64::new(0),
            }),
        }
    }

    /// (waited, busy, passes) so far.
    pub fn counts(&self) -> (u64, u64, u64) {
        (
            self.s.waited.load(Ordering::Relaxed),
            self.s.busy.load(Ordering::Relaxed),
            self.s.passes.load(Ordering::Relaxed),
        )
    }

    /// Waits (bounded) for a walk of the export to record where `key` is.
    pub fn locate(&self, key: Key) -> Located {
        if self.s.missing.contains(&key) {
            return Located::Missing;
        }
        let r = self.wait_for(key);
        if r == Located::Busy {
            self.s.busy.fetch_add(1, Ordering::Relaxed);
        }
        r
    }

    fn wait_for(&self, key: Key) -> Located {
        let s = &self.s;
        let mut g = lock(&s.state);
        // Wanted first, waiting second: a call that cannot wait still gets
        // its inode looked for, so its retry finds the location recorded.
        let next = g.pass + 1;
        if !g.wanted.contains_key(&key) {
            if g.wanted.len() >= MAX_WANTED {
                return Located::Busy;
            }
            g.wanted.insert(
                key,
                Want {
                    need_pass: next,
                    found: None,
                    waiters: 0,
                },
            );
            s.version.fetch_add(1, Ordering::Release);
        }
        if !g.running {
            g.running = true;
            g.pass += 1;
            let sh = s.clone();
            let spawned = std::thread::Builder::new()
                .name("rnfsd-scan".into())
                .spawn(move || run(&sh));
            if spawned.is_err() {
                g.running = false;
                g.wanted.remove(&key);
                return Located::Busy;
            }
        }
        match g.wanted.get(&key).map(|w| w.found) {
            Some(Some(true)) => return Located::Found,
            Some(Some(false)) => return Located::Missing,
            _ => {}
        }
        if g.waiters >= s.limits.max_waiters {
            return Located::Busy;
        }
        g.waiters += 1;
        if let Some(w) = g.wanted.get_mut(&key) {
            w.waiters += 1;
        }
        s.waited.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + s.limits.wait;
        let r = loop {
            match g.wanted.get(&key).map(|w| w.found) {
                Some(Some(true)) => break Located::Found,
                Some(Some(false)) => break Located::Missing,
                // Cleared by a pass end that saw no waiter: cannot happen
                // while we count as one; treat as not yet known.
                None => break Located::Busy,
                Some(None) => {}
            }
            let now = Instant::now();
            if now >= deadline {
                break Located::Busy;
            }
            g =
                s.cv.wait_timeout(g, deadline - now)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|e| e.into_inner().0);
        };
        g.waiters -= 1;
        if let Some(w) = g.wanted.get_mut(&key) {
            w.waiters -= 1;
            if w.waiters == 0 && w.found.is_some() {
                g.wanted.remove(&key);
            }
        }
        r
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The walker thread: passes until nothing is wanted that a new pass could
/// answer.
fn run(s: &Shared) {
    loop {
        let pass = lock(&s.state).pass;
        walk(s);
        s.passes.fetch_add(1, Ordering::Relaxed);
        let mut g = lock(&s.state);
        let mut again = false;
        g.wanted.retain(|k, w| {
            if w.found.is_none() && w.need_pass <= pass {
                w.found = Some(false);
                s.missing.insert(*k);
            }
            again |= w.found.is_none();
            // Answered and nobody waiting: the location map (or the missing
            // set) holds the answer now.
            w.found.is_none() || w.waiters > 0
        });
        s.cv.notify_all();
        if !again {
            g.running = false;
            return;
        }
        g.pass += 1;
    }
}

/// The inode numbers still wanted (the walk compares numbers first; dev is
/// checked on a match).
fn wanted_inos(s: &Shared) -> HashSet<u64> {
    lock(&s.state)
        .wanted
        .iter()
        .filter(|(_, w)| w.found.is_none())
        .map(|(k, _)| k.ino)
        .collect()
}

/// One bounded depth-first walk (open fds bounded by the depth, not the
/// width). Directories and what is wanted are recorded in the location map
/// (chains to what is found can be re-walked), and other objects up to a
/// budget (later misses need no walk).
fn walk(s: &Shared) {
    let Ok(top) = sys::openat(
        s.root.as_raw_fd(),
        sys::DOT,
        libc::O_RDONLY | libc::O_DIRECTORY,
        0,
    ) else {
        return;
    };
    let mut seen_version = s.version.load(Ordering::Acquire);
    let mut want = wanted_inos(s);
    let mut stack = vec![(sys::DirReader::new(top, SCAN_BUF), s.root_key)];
    let mut visited = 0usize;
    // Objects recorded in passing, at most a quarter of the location map
    // per walk: on a tree larger than the map, recording everything would
    // push out the locations of what was wanted before their callers retry.
    let mut bulk = s.locs.capacity() / 4;
    while let Some((rd, dkey)) = stack.last_mut() {
        let dkey = *dkey;
        let e = match rd.next_entry() {
            Ok(Some(e)) => e,
            Ok(None) | Err(_) => {
                stack.pop();
                continue;
            }
        };
        if e.name == b"." || e.name == b".." {
            continue;
        }
        visited += 1;
        if visited > s.limits.entries {
            return;
        }
        if visited.is_multiple_of(REFRESH_EVERY) {
            let v = s.version.load(Ordering::Acquire);
            if v != seen_version {
                seen_version = v;
                want = wanted_inos(s);
            }
            if want.is_empty() {
                return;
            }
        }
        let dfd = rd.fd();
        let Ok(c) = sys::cstr(&e.name) else { continue };
        if want.contains(&e.ino) {
            if let Ok(fd) = sys::open_path(dfd, &c) {
                if let Ok(st) = sys::fstat(fd.as_raw_fd()) {
                    let on_fs = s.limits.cross_mounts || st.mnt_id == s.root_mnt;
                    if on_fs {
                        found(s, st.key(), dkey, &e.name);
                    }
                }
            }
        }
        let maybe_dir = e.dtype == libc::DT_DIR || e.dtype == libc::DT_UNKNOWN;
        let mut is_dir = false;
        if maybe_dir && stack.len() < MAX_SCAN_DEPTH {
            let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
            if let Ok(sub) = sys::openat(dfd, &c, flags, 0) {
                is_dir = true;
                if let Ok(st) = sys::fstat(sub.as_raw_fd()) {
                    if s.limits.cross_mounts || st.mnt_id == s.root_mnt {
                        s.locs.insert(st.key(), dkey, &e.name);
                        stack.push((sys::DirReader::new(sub, SCAN_BUF), st.key()));
                    }
                }
            }
        }
        if !is_dir && e.dtype != libc::DT_DIR && bulk > 0 {
            // Objects passed are recorded too (a non-directory is on its
            // directory's filesystem), so the misses that follow a restart
            // find their location without a walk of their own.
            bulk -= 1;
            let k = Key {
                dev: dkey.dev,
                ino: e.ino,
            };
            s.locs.insert(k, dkey, &e.name);
        }
    }
}

/// Records where `key` was seen and wakes whoever waits for it.
fn found(s: &Shared, key: Key, parent: Key, name: &[u8]) {
    let mut g = lock(&s.state);
    if let Some(w) = g.wanted.get_mut(&key) {
        if w.found.is_none() {
            s.locs.insert(key, parent, name);
            w.found = Some(true);
            if w.waiters > 0 {
                s.cv.notify_all();
            }
        }
    }
}
