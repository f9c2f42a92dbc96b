//! The Linux file leases behind NFSv4 delegations (RFC 8881 §10.4: a
//! delegation promises that no one changes the file unseen): one lease
//! per delegated file (`rnfsd_fs::lease`), taken before the first
//! delegation on it is granted and let go when the last one is returned,
//! revoked or freed. A program on the server's host that opens the file
//! for writing (or truncates it) breaks the lease: the kernel holds it
//! until we let the lease go or `/proc/sys/fs/lease-break-time` passes,
//! and tells the one thread here (`nfsv4-leases`), which recalls the
//! delegations on the file as an NFSv3 change would. They are revoked
//! just before the kernel would let the program go on by itself, so none
//! outlives its lease. No lease (EAGAIN: open for writing; EACCES; a
//! filesystem without leases; the bound `nfs4_max_leases`) means no
//! delegation.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use rnfsd_fs::lease::{Lease, LeaseBreaks};
use rnfsd_fs::{FsError, FsResult};
use rnfsd_v4state::{FileKey, NoDeleg, State, Stateid};

use super::deleg::Outbox;

/// How often the thread looks for leases to let go (their delegations
/// gone, or a break about to time out) when no break comes.
const TICK: Duration = Duration::from_millis(250);
/// A broken lease's delegations are revoked this long before the
/// kernel's lease break time ends.
const REVOKE_MARGIN: Duration = Duration::from_secs(1);
/// The kernel's default lease break time, when /proc does not say.
const DEFAULT_BREAK_TIME: Duration = Duration::from_secs(45);

struct Held {
    lease: Lease,
    /// When the kernel told us it broke.
    broken: Option<Instant>,
}

#[derive(Default)]
struct Table {
    by_file: HashMap<FileKey, Held>,
    by_fd: HashMap<RawFd, FileKey>,
}

impl Table {
    fn insert(&mut self, file: FileKey, lease: Lease, n: &AtomicUsize) {
        self.by_fd.insert(lease.raw_fd(), file);
        self.by_file.insert(
            file,
            Held {
                lease,
                broken: None,
            },
        );
        n.store(self.by_file.len(), Ordering::Relaxed);
    }

    fn remove(&mut self, file: &FileKey, n: &AtomicUsize) {
        if let Some(h) = self.by_file.remove(file) {
            self.by_fd.remove(&h.lease.raw_fd());
        }
        n.store(self.by_file.len(), Ordering::Relaxed);
    }
}

/// The leases held, and the thread told of their breaks.
pub struct Leases {
    table: Mutex<Table>,
    /// Leases held (the table's size, read without its lock).
    n: AtomicUsize,
    /// `nfs4_max_leases`: leases (each one open file) at most.
    max: usize,
    /// The thread the kernel tells of breaks.
    tid: libc::pid_t,
    /// /proc/sys/fs/lease-break-time, read at start.
    break_time: Duration,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// /proc/sys/fs/lease-break-time (seconds), or the kernel's default.
fn break_time() -> Duration {
    std::fs::read_to_string("/proc/sys/fs/lease-break-time")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_BREAK_TIME)
}

impl Leases {
    /// Starts the thread told of lease breaks (recalls go to `outbox`).
    /// Fails (and no delegation may be granted) unless the break signal
    /// is blocked in this thread, as main blocks it before any thread
    /// starts: a thread that did not block it would die of it.
    pub(crate) fn start(
        state: &Arc<State>,
        outbox: Arc<Outbox>,
        max: usize,
    ) -> std::io::Result<Arc<Leases>> {
        if !rnfsd_fs::lease::signal_blocked() {
            return Err(std::io::Error::other(
                "the lease break signal is not blocked (main blocks it before any thread starts)",
            ));
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let st = Arc::downgrade(state);
        std::thread::Builder::new()
            .name("nfsv4-leases".into())
            .spawn(move || {
                let breaks = LeaseBreaks::new();
                let breaks = match breaks {
                    Ok(b) => b,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                let leases = Arc::new(Leases {
                    table: Mutex::default(),
                    n: AtomicUsize::new(0),
                    max: max.max(1),
                    tid: breaks.thread(),
                    break_time: break_time(),
                });
                if tx.send(Ok(leases.clone())).is_err() {
                    return;
                }
                run(&breaks, &leases, &st, &outbox);
            })?;
        rx.recv()
            .map_err(|_| std::io::Error::other("the lease thread ended"))?
    }

    /// Grants a delegation on `file` (`delegate`) while holding a lease
    /// on it: the one held already, or one `take` takes now (given the
    /// thread to tell of its break). No lease, no delegation: a broken
    /// one or a conflicting open is contention, anything else (no
    /// leases on this filesystem, the bound) a lack of resources.
    pub fn grant(
        &self,
        state: &State,
        file: FileKey,
        write: bool,
        take: impl FnOnce(libc::pid_t) -> FsResult<Lease>,
        delegate: impl FnOnce() -> Result<Stateid, NoDeleg>,
    ) -> Result<Stateid, NoDeleg> {
        let mut t = locked(&self.table);
        if !t.by_file.contains_key(&file) {
            if t.by_file.len() >= self.max {
                return Err(NoDeleg::Resource);
            }
            // Not under the lock: opening may be slow.
            drop(t);
            let lease = take(self.tid).map_err(|e| match e {
                FsError::Errno(libc::EAGAIN) => NoDeleg::Contention,
                e => {
                    tracing::debug!(error = %e, "nfsv4: no lease, no delegation");
                    NoDeleg::Resource
                }
            })?;
            t = locked(&self.table);
            if t.by_file.len() >= self.max {
                return Err(NoDeleg::Resource);
            }
            // Another grant may have taken one meanwhile: ours then goes.
            if !t.by_file.contains_key(&file) {
                t.insert(file, lease, &self.n);
            }
        }
        let h = t.by_file.get(&file).ok_or(NoDeleg::Resource)?;
        if h.broken.is_some() || h.lease.is_write() != write {
            return Err(NoDeleg::Contention);
        }
        // Under the lock: the lease cannot go between the check and the
        // grant.
        let r = delegate();
        if r.is_err() && !state.delegated(&file) {
            t.remove(&file, &self.n);
        }
        r
    }

    /// Lets `file`'s lease go if no delegation on it is left.
    pub fn release_unused(&self, state: &State, file: &FileKey) {
        // Every change asks: most often none is held at all.
        if self.count() == 0 {
            return;
        }
        let mut t = locked(&self.table);
        if t.by_file.contains_key(file) && !state.delegated(file) {
            t.remove(file, &self.n);
        }
    }

    /// Leases held now.
    pub fn count(&self) -> usize {
        self.n.load(Ordering::Relaxed)
    }

    /// Marks the leases of `fds` broken: the files newly so.
    fn note_broken(&self, fds: &[RawFd]) -> Vec<FileKey> {
        let now = Instant::now();
        let mut t = locked(&self.table);
        let mut out = Vec::new();
        for fd in fds {
            let Some(file) = t.by_fd.get(fd).copied() else {
                continue;
            };
            if let Some(h) = t.by_file.get_mut(&file) {
                if h.broken.is_none() {
                    h.broken = Some(now);
                    out.push(file);
                }
            }
        }
        out
    }

    /// Lets go the leases whose delegations are gone; revokes those on a
    /// file whose lease break is about to time out.
    fn sweep(&self, state: &State) {
        if self.count() == 0 {
            return;
        }
        let due = self.break_time.saturating_sub(REVOKE_MARGIN);
        let overdue: Vec<FileKey> = locked(&self.table)
            .by_file
            .iter()
            .filter(|(_, h)| h.broken.is_some_and(|b| b.elapsed() >= due))
            .map(|(f, _)| *f)
            .collect();
        for f in &overdue {
            let n = state.revoke_delegations_on(f);
            if n > 0 {
                tracing::info!(
                    revoked = n,
                    "nfsv4: delegations not returned before the local lease break time: revoked"
                );
            }
        }
        let mut t = locked(&self.table);
        let gone: Vec<FileKey> = t
            .by_file
            .keys()
            .filter(|f| !state.delegated(f))
            .copied()
            .collect();
        for f in gone {
            t.remove(&f, &self.n);
        }
    }
}

/// The lease thread: each break recalls the delegations on its file (as
/// a change by no NFSv4 client); every tick, leases no longer needed go.
fn run(breaks: &LeaseBreaks, leases: &Leases, state: &Weak<State>, outbox: &Outbox) {
    let tick = TICK.as_millis() as i32;
    loop {
        let fds = match breaks.wait(tick) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, "nfsv4: reading lease breaks");
                std::thread::sleep(TICK);
                Vec::new()
            }
        };
        let Some(state) = state.upgrade() else {
            return;
        };
        for file in leases.note_broken(&fds) {
            tracing::debug!(?file, "nfsv4: a local process broke a delegation's lease");
            // The access ends here: it only names the recalls.
            if let Err(recalls) = state.begin_access(file, None, true) {
                outbox.push(recalls);
            }
        }
        leases.sweep(&state);
    }
}
