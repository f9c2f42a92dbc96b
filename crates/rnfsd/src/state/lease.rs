//! The Linux file leases behind NFSv4 delegations (RFC 8881 §10.4: a
//! delegation promises that no one changes the file unseen): one lease
//! per delegated file (`rnfsd_fs::lease`), taken before the first
//! delegation on it is granted and let go when the last one is returned,
//! revoked or freed (a write lease for a write delegation, on a
//! descriptor the backend also serves the holder's I/O through). A
//! program on the server's host that opens the file for writing (or
//! truncates it; any open, under a write lease) breaks the lease: the
//! kernel holds it until we let the lease go or
//! `/proc/sys/fs/lease-break-time` passes, and tells the one thread here
//! (`nfsv4-leases`), which recalls the delegations on the file as an
//! NFSv3 change would. They are revoked just before the kernel would let
//! the program go on by itself, so none outlives its lease. Beside each
//! lease an inotify watch (`watch.rs`) tells the same thread of what does
//! not break a lease (chmod, chown, utimes, link, unlink, rename), which
//! recalls the same way. No lease (EAGAIN: open for writing, or at all
//! for a write lease; EACCES; a filesystem without leases; the bound
//! `nfs4_max_leases`; no watch, `/proc/sys/fs/inotify/max_user_watches`
//! reached) means no delegation.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use rnfsd_fs::lease::{Lease, LeaseBreaks};
use rnfsd_fs::watch::{self, Ctime, Watches, Wd};
use rnfsd_fs::{FsError, FsResult};
use rnfsd_v4state::{FileKey, NoDeleg, State, Stateid};

use super::deleg::Outbox;
use super::watch::{Verdict, Watch};

/// How often the thread looks for leases to let go (their delegations
/// gone, or a break about to time out) when no break comes.
const TICK: Duration = Duration::from_millis(250);
/// A broken lease's delegations are revoked this long before the
/// kernel's lease break time ends.
const REVOKE_MARGIN: Duration = Duration::from_secs(1);
/// The kernel's default lease break time, when /proc does not say.
const DEFAULT_BREAK_TIME: Duration = Duration::from_secs(45);
/// How often the thread looks again at an event it could not judge yet
/// (a change through the server on its file in progress).
const DEFER_POLL: Duration = Duration::from_millis(5);

struct Held {
    lease: Lease,
    /// When the kernel told us it broke, or its watch saw a change (its
    /// delegations are recalled either way).
    broken: Option<Instant>,
    watch: Watch,
}

#[derive(Default)]
struct Table {
    by_file: HashMap<FileKey, Held>,
    by_fd: HashMap<RawFd, FileKey>,
    by_wd: HashMap<Wd, FileKey>,
    /// Files whose watch saw an event not judged yet.
    pending: HashSet<FileKey>,
    /// Whether a device's filesystem has multigrain ctimes (asked once).
    fine: HashMap<u64, bool>,
}

impl Table {
    /// Holds `lease` on `file` with a watch on it (none: the lease goes).
    fn insert(
        &mut self,
        file: FileKey,
        lease: Lease,
        n: &AtomicUsize,
        watches: &Watches,
    ) -> std::io::Result<()> {
        let wd = watches.add(&lease)?;
        // Read after the watch is there: a change between the two
        // recalls (its event finds nothing of the server's to explain it).
        let now = watch::ctime(lease.as_fd()).and_then(|c| Ok((c, watch::device(lease.as_fd())?)));
        let (now, dev) = match now {
            Ok(v) => v,
            Err(e) => {
                watches.remove(wd);
                return Err(e);
            }
        };
        let fine = *self
            .fine
            .entry(dev)
            .or_insert_with(|| watch::fine_ctimes(dev));
        self.by_fd.insert(lease.raw_fd(), file);
        self.by_wd.insert(wd, file);
        self.by_file.insert(
            file,
            Held {
                lease,
                broken: None,
                watch: Watch::new(wd, now, fine),
            },
        );
        n.store(self.by_file.len(), Ordering::Relaxed);
        Ok(())
    }

    fn remove(&mut self, file: &FileKey, n: &AtomicUsize, watches: &Watches) {
        if let Some(h) = self.by_file.remove(file) {
            self.by_fd.remove(&h.lease.raw_fd());
            self.by_wd.remove(&h.watch.wd);
            self.pending.remove(file);
            watches.remove(h.watch.wd);
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
    /// The watch beside every lease.
    watches: Watches,
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
                let breaks = breaks.and_then(|b| Ok((b, Watches::new()?)));
                let (breaks, watches) = match breaks {
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
                    watches,
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
                if let Err(e) = t.insert(file, lease, &self.n, &self.watches) {
                    tracing::debug!(error = %e, "nfsv4: no watch, no lease, no delegation");
                    return Err(NoDeleg::Resource);
                }
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
            t.remove(&file, &self.n, &self.watches);
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
            t.remove(file, &self.n, &self.watches);
        }
    }

    /// A change through the server to `file` starts: if it is watched,
    /// its event is judged after the change ends ([`end_own`]
    /// (Self::end_own)), given what this returns: the file's ctime now
    /// and the descriptor to read it again through. The ctimes are read
    /// outside the table's lock (every change to a leased file comes
    /// here: no system call under a lock all of them take).
    pub fn begin_own(&self, file: &FileKey) -> Option<(Option<Ctime>, Arc<OwnedFd>)> {
        if self.count() == 0 {
            return None;
        }
        let fd = {
            let mut t = locked(&self.table);
            let h = t.by_file.get_mut(file)?;
            // Counted before the ctime is read: an event meanwhile waits
            // for this change's end.
            h.watch.begin_own();
            h.lease.descriptor()
        };
        Some((watch::ctime(fd.as_fd()).ok(), fd))
    }

    /// The change [`begin_own`](Self::begin_own) told of ended (`pre`:
    /// the file's ctime then, `fd` the descriptor it gave).
    pub fn end_own(&self, file: &FileKey, pre: Option<Ctime>, fd: &OwnedFd) {
        let post = watch::ctime(fd.as_fd()).ok();
        let mut t = locked(&self.table);
        if let Some(h) = t.by_file.get_mut(file) {
            h.watch.end_own(pre, post);
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

    /// Notes the watches' events and judges those waiting: the files
    /// whose delegations are to be recalled now (as a break's), and
    /// whether an event is left to judge later.
    fn note_changed(&self, ev: &watch::Events) -> (Vec<FileKey>, bool) {
        let now = Instant::now();
        let mut t = locked(&self.table);
        let Table {
            by_file,
            by_wd,
            pending,
            ..
        } = &mut *t;
        if ev.overflow {
            // Events lost: any file may have changed.
            pending.extend(by_file.keys());
        }
        pending.extend(ev.changed.iter().filter_map(|wd| by_wd.get(wd)));
        let mut out = Vec::new();
        pending.retain(|file| {
            let Some(h) = by_file.get_mut(file) else {
                return false;
            };
            if h.broken.is_some() {
                // Recalled already.
                h.watch.clear();
                return false;
            }
            h.watch.seen(now);
            match h.watch.judge(watch::ctime(h.lease.as_fd()).ok(), now) {
                Verdict::Own => false,
                Verdict::Later => true,
                Verdict::Recall => {
                    h.broken = Some(now);
                    out.push(*file);
                    false
                }
            }
        });
        let later = !pending.is_empty();
        (out, later)
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
            t.remove(&f, &self.n, &self.watches);
        }
    }
}

/// The lease thread: each break, and each change a watch saw that is
/// not provably the server's own, recalls the delegations on its file
/// (as a change by no NFSv4 client); every tick, leases no longer
/// needed go.
fn run(breaks: &LeaseBreaks, leases: &Leases, state: &Weak<State>, outbox: &Outbox) {
    let mut later = false;
    loop {
        let wait = if later { DEFER_POLL } else { TICK };
        let ready = watch::poll_in(
            &[breaks.as_fd(), leases.watches.as_fd()],
            wait.as_millis() as i32,
        );
        let (fds, ev) = match ready.as_deref() {
            Ok(&[b, w]) => (
                read_or_log(b, || breaks.read(), "lease breaks"),
                read_or_log(w, || leases.watches.read(), "file watches"),
            ),
            Ok(_) => (Vec::new(), watch::Events::default()),
            Err(e) => {
                tracing::warn!(error = %e, "nfsv4: waiting for lease breaks");
                std::thread::sleep(TICK);
                (Vec::new(), watch::Events::default())
            }
        };
        let Some(state) = state.upgrade() else {
            return;
        };
        let broken = leases.note_broken(&fds);
        let changed;
        (changed, later) = leases.note_changed(&ev);
        for file in &broken {
            tracing::debug!(?file, "nfsv4: a local process broke a delegation's lease");
        }
        for file in &changed {
            tracing::debug!(?file, "nfsv4: a local process changed a delegated file");
        }
        for file in broken.into_iter().chain(changed) {
            // The access ends here: it only names the recalls.
            if let Err(recalls) = state.begin_access(file, None, true) {
                outbox.push(recalls);
            }
        }
        leases.sweep(&state);
    }
}

/// `read()` when `ready`; nothing (logged) when it fails.
fn read_or_log<T: Default>(
    ready: bool,
    read: impl FnOnce() -> std::io::Result<T>,
    what: &str,
) -> T {
    if !ready {
        return T::default();
    }
    read().unwrap_or_else(|e| {
        tracing::warn!(error = %e, "nfsv4: reading {what}");
        T::default()
    })
}
