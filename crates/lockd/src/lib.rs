//! rnfsd-lockd: the state of the NLM v4 lock manager (program 100021;
//! versions 1 and 3 are served on top of it): which host's owner holds
//! which byte ranges of which file, the blocked requests waiting for a
//! range, DOS share reservations, the grace period after a restart, and
//! the hosts file (`hosts`) that tells a restarted server whom to grant
//! reclaims and notify.
//!
//! Bounds: no wire types and no RPC. The NLM and NSM programs in the
//! `rnfsd` crate decode calls, find the export, check the caller and turn
//! an [`Outcome`] into an nlm4_stats; sending GRANTED is a closure they
//! hand to [`LockManager::lock`]. It depends on `rnfsd-fs` (backends and
//! their fcntl locks), `std`, libc's errno numbers and `tracing` only.
//! Every table is bounded
//! ([`Limits`], [`hosts::MAX_HOSTS`], [`ranges::MAX_PIECES`]).
//!
//! Locks are real: each (owner, file) pair has its own open file
//! description on the exported file (`Backend::open_for_locks`) and locks
//! through it with fcntl OFD locks, so the kernel decides conflicts, local
//! programs and NFS clients see each other, and dropping the description
//! (unlock of the last range, FREE_ALL, a client's reboot notice) drops its
//! locks. `ranges` keeps our copy of each owner's ranges, to know when that
//! is and whose lock a conflict is.
//!
//! One mutex over the table: lock calls come at human and application
//! rates, far below NFS traffic, and every operation under it is bounded
//! (no I/O but the non-blocking fcntl). Blocked requests are retried by one
//! thread (`waiters`), every `retry` and at once after an unlock here.

pub mod hosts;
pub mod ranges;
mod waiters;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use rnfsd_fs::lock::{LockFile, LockKind, LockOpen, LockRange};
use rnfsd_fs::{Backend, Cred, Fh, FsError};

use ranges::Ranges;

/// An NLM lock owner: the client host, known by the address it calls
/// from (as knfsd's `nlmsvc_lookup_host`: the caller_name a client
/// writes in its calls is its own choice, and two clients may share one),
/// with the owner handle `oh` and the process id `svid` it sends.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owner {
    /// The caller's address ([`canon`]: an IPv4-mapped address is IPv4).
    pub addr: IpAddr,
    pub oh: Vec<u8>,
    pub svid: u32,
}

/// `ip` as the lock manager keys hosts: an IPv4-mapped IPv6 address (a
/// dual-stack socket's IPv4 peer) as the IPv4 address.
pub fn canon(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The file a call is about: its export's backend, the caller's
/// credentials (descriptors are opened as the caller may), its handle.
#[derive(Clone, Copy)]
pub struct FileRef<'a> {
    pub backend: &'a Arc<dyn Backend>,
    pub cred: &'a Cred,
    pub export: u32,
    pub fh: &'a Fh,
}

impl FileRef<'_> {
    fn key(&self) -> FileKey {
        FileKey {
            export: self.export,
            fh: self.fh.0.clone(),
        }
    }
}

/// What one owner asks for: `kind` on `range`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockReq {
    pub owner: Owner,
    pub kind: LockKind,
    pub range: LockRange,
}

/// A DOS share reservation request (nlm4_share): `access` and `deny` are
/// fsh4 bits (1 read, 2 write). The client is its address, as a lock's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareReq {
    pub addr: IpAddr,
    pub oh: Vec<u8>,
    pub access: u32,
    pub deny: u32,
}

/// A lock in the way, as NLM reports it (nlm4_holder).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub exclusive: bool,
    /// The owner when it is an NLM client's (a local program's lock has
    /// none: svid 0 and an empty owner handle).
    pub svid: u32,
    pub oh: Vec<u8>,
    pub start: u64,
    pub len: u64,
}

/// What a call came to (the nlm4_stats it answers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Granted,
    Denied(Option<Holder>),
    /// A bound was reached (nlm4_denied_nolocks).
    NoLocks,
    Blocked,
    Grace,
    Stale,
    RoFs,
    FBig,
    Failed,
}

/// Bounds and timing, from `[server]` (nlm_*).
#[derive(Debug, Clone)]
pub struct Limits {
    /// (owner, file) descriptors held at once.
    pub max_files: usize,
    /// Blocked lock requests waiting at once.
    pub max_waiters: usize,
    /// Descriptors, blocked requests and share reservations of one client
    /// host (one address) at once, so one client cannot take the whole
    /// table.
    pub max_per_client: usize,
    /// DOS share reservations at once.
    pub max_shares: usize,
    /// How often blocked requests are retried (a local program's unlock is
    /// seen no later than this).
    pub retry: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_files: 4096,
            max_waiters: 1024,
            // An eighth of the descriptors: one client cannot take them
            // all, nor every waiter slot.
            max_per_client: 512,
            max_shares: 4096,
            retry: Duration::from_millis(100),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FileKey {
    export: u32,
    fh: Vec<u8>,
}

#[derive(Debug)]
struct Held {
    file: Arc<dyn LockFile>,
    ranges: Ranges,
}

/// A blocked LOCK: retried until granted or cancelled; `granted` then
/// tells the client (the NLM GRANTED callback).
struct Waiter {
    file: FileKey,
    req: LockReq,
    /// Opens the owner's descriptor when it has none yet.
    backend: Arc<dyn Backend>,
    cred: Cred,
    fh: Fh,
    granted: Box<dyn FnOnce() + Send>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Share {
    file: FileKey,
    addr: IpAddr,
    oh: Vec<u8>,
    /// fsh4_access and fsh4_mode bits: 1 read, 2 write.
    access: u32,
    deny: u32,
}

#[derive(Default)]
struct Table {
    held: HashMap<(FileKey, Owner), Held>,
    /// Entries of `held` per client address (for `max_per_client`).
    per_host: HashMap<IpAddr, usize>,
    waiters: Vec<Waiter>,
    shares: Vec<Share>,
    /// Descriptors opened for waiters may hold nothing now (a wait was
    /// cancelled or freed): the retry pass looks for them, else it does
    /// nothing while no one waits.
    maybe_idle: bool,
}

impl Table {
    fn insert_held(&mut self, k: (FileKey, Owner), h: Held) {
        let addr = k.1.addr;
        if self.held.insert(k, h).is_none() {
            *self.per_host.entry(addr).or_default() += 1;
        }
    }

    fn remove_held(&mut self, k: &(FileKey, Owner)) {
        if self.held.remove(k).is_some() {
            if let Some(n) = self.per_host.get_mut(&k.1.addr) {
                *n -= 1;
                if *n == 0 {
                    self.per_host.remove(&k.1.addr);
                }
            }
        }
    }

    /// What the client at `addr` holds in the table: descriptors, waiting
    /// requests and share reservations (the waiters and shares are
    /// bounded by `max_waiters` and `max_shares`, counted on each new one).
    fn host_load(&self, addr: IpAddr) -> usize {
        self.per_host.get(&addr).copied().unwrap_or(0)
            + self
                .waiters
                .iter()
                .filter(|w| w.req.owner.addr == addr)
                .count()
            + self.shares.iter().filter(|s| s.addr == addr).count()
    }
}

/// Counters for `rnfsd stats` (a gauge each).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LockCounts {
    pub files: u64,
    pub ranges: u64,
    pub waiters: u64,
    pub shares: u64,
}

/// Where the grace period stands.
#[derive(Debug, Clone, Copy)]
enum Grace {
    /// None (a first start, no client held locks before, or it ended).
    Off,
    /// This long, from `start_grace` (the server is not listening yet).
    Pending(Duration),
    Until(Instant),
}

pub struct LockManager {
    table: Mutex<Table>,
    limits: Limits,
    /// The grace period after a restart: only reclaims are granted in it,
    /// and only in it.
    grace: Mutex<Grace>,
    /// Wakes the retry thread (an unlock, a new waiter, a cancel, shutdown).
    wake: Arc<waiters::Wake>,
    /// Hosts that took locks, kept across restarts (None: not kept).
    hosts: Option<hosts::Hosts>,
    /// This run's NSM state number (odd: up).
    state: i32,
    /// Another lock manager's grace period (NFSv4's) this one shares: while
    /// it lasts, only reclaims are granted here too.
    other_grace: OnceLock<OtherGrace>,
}

/// Whether another lock manager is in its grace period.
pub type OtherGrace = Box<dyn Fn() -> bool + Send + Sync>;

impl Drop for LockManager {
    fn drop(&mut self) {
        self.wake.stop();
    }
}

fn fs_outcome(e: &FsError) -> Outcome {
    match e {
        FsError::Stale | FsError::BadHandle => Outcome::Stale,
        FsError::Errno(libc::EROFS) => Outcome::RoFs,
        FsError::Errno(libc::EFBIG) => Outcome::FBig,
        FsError::Errno(libc::EACCES | libc::EPERM) => Outcome::Denied(None),
        // The server's open broke the lease of an NFSv4 delegation on
        // the file: held by another until it is returned (a blocked
        // request is retried).
        FsError::Errno(libc::EAGAIN) => Outcome::Denied(None),
        FsError::Errno(libc::EMFILE | libc::ENFILE | libc::ENOLCK) => Outcome::NoLocks,
        _ => Outcome::Failed,
    }
}

/// `r` as fcntl's signed off_t can hold it (XNFS leaves large ranges to
/// the server). A start past `i64::MAX` cannot be expressed: None
/// (NLM4_FBIG). A range whose last byte is past it reaches beyond the end
/// of any file: it becomes "to the end" (length 0), the same bytes, as
/// Linux lockd makes such an end OFFSET_MAX (UNLOCK of (0, 2^64-1), the
/// whole file, is common).
fn clamp(r: LockRange) -> Option<LockRange> {
    let max = i64::MAX as u64;
    if r.start > max {
        return None;
    }
    let fits = r.len <= max
        && r.start
            .checked_add(r.len.saturating_sub(1))
            .is_some_and(|last| last <= max);
    Some(match fits {
        true => r,
        false => LockRange {
            start: r.start,
            len: 0,
        },
    })
}

/// `req` with its range clamped (`clamp`).
fn clamped(req: &LockReq) -> Option<LockReq> {
    Some(LockReq {
        range: clamp(req.range)?,
        ..req.clone()
    })
}

impl LockManager {
    /// A manager with a grace period of `grace` from now (None: none, for
    /// a first start or when no client held locks before).
    pub fn new(limits: Limits, grace: Option<Duration>) -> Arc<LockManager> {
        let m = Self::with_hosts(limits, grace, None, 1);
        m.start_grace();
        m
    }

    /// As `new`, remembering the hosts that take locks in `hosts`, with
    /// NSM state number `state`; the grace period's clock starts at
    /// `start_grace` (when the server listens: clients cannot reclaim
    /// before), and until then only reclaims are granted.
    pub fn with_hosts(
        limits: Limits,
        grace: Option<Duration>,
        hosts: Option<hosts::Hosts>,
        state: i32,
    ) -> Arc<LockManager> {
        let m = Arc::new(LockManager {
            table: Mutex::new(Table::default()),
            limits,
            grace: Mutex::new(grace.map_or(Grace::Off, Grace::Pending)),
            wake: Arc::default(),
            hosts,
            state,
            other_grace: OnceLock::new(),
        });
        waiters::start(&m);
        m
    }

    /// This run's NSM state number.
    pub fn state(&self) -> i32 {
        self.state
    }

    /// `h` took (or waits for) a lock or a share: remembered for a
    /// restart (one record per client address and server address), while
    /// it holds something (it may have let go meanwhile).
    pub fn note_host(&self, h: hosts::Host) {
        if let Some(l) = &self.hosts {
            let t = self.lock_table();
            if t.host_load(canon(h.addr)) > 0 {
                l.add(h);
            }
        }
    }

    /// Once the client at `addr` holds no lock, wait or share, its records
    /// leave the hosts list: a restart need not tell it (knfsd's host
    /// collection unmonitors such hosts, SM_UNMON). Called with the table
    /// locked, after what may have been its last.
    fn settle(&self, t: &Table, addr: IpAddr) {
        if let Some(l) = &self.hosts {
            if t.host_load(addr) == 0 {
                l.forget(addr);
            }
        }
    }

    /// Forgets the client at `addr` if it holds nothing (a host of the
    /// previous run that did not answer our restart notice).
    pub fn forget_if_idle(&self, addr: IpAddr) {
        let t = self.lock_table();
        self.settle(&t, canon(addr));
    }

    /// Forgets every remembered host that holds nothing (at the end of the
    /// grace period: hosts of the previous run that reclaimed nothing).
    /// Returns how many addresses went.
    pub fn prune_hosts(&self) -> usize {
        let Some(l) = &self.hosts else {
            return 0;
        };
        let t = self.lock_table();
        let mut idle: Vec<IpAddr> = l
            .list()
            .iter()
            .map(|h| h.addr)
            .filter(|&a| t.host_load(a) == 0)
            .collect();
        idle.dedup();
        for &a in &idle {
            l.forget(a);
        }
        idle.len()
    }

    /// Waits (at most `timeout`) until the hosts file holds every change
    /// made so far (at shutdown: a clean restart finds every host). False
    /// on timeout.
    pub fn sync_hosts(&self, timeout: Duration) -> bool {
        self.hosts.as_ref().is_none_or(|h| h.sync(timeout))
    }

    fn lock_table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts the grace period's clock (once the server listens).
    pub fn start_grace(&self) {
        let mut g = self.grace.lock().unwrap_or_else(|e| e.into_inner());
        if let Grace::Pending(d) = *g {
            *g = Grace::Until(Instant::now() + d);
        }
    }

    /// Whether only reclaims are granted now: in our grace period, or in
    /// the one we share.
    pub fn in_grace(&self) -> bool {
        self.grace_left().is_some() || self.other_grace.get().is_some_and(|g| g())
    }

    /// Shares another lock manager's grace period (once; NFSv4's, so a v4
    /// client reclaiming after a restart finds its ranges free of NLM
    /// clients' new locks).
    pub fn share_grace(&self, other: OtherGrace) {
        let _ = self.other_grace.set(other);
    }

    /// What is left of the grace period (None: not in one).
    pub fn grace_left(&self) -> Option<Duration> {
        let mut g = self.grace.lock().unwrap_or_else(|e| e.into_inner());
        match *g {
            Grace::Pending(d) => Some(d),
            Grace::Until(t) => match t.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => {
                    *g = Grace::Off;
                    tracing::info!("lock manager: grace period over");
                    None
                }
            },
            Grace::Off => None,
        }
    }

    /// Whether a call may go on now: in the grace period only reclaims
    /// (XNFS), and outside it none (a reclaim after grace would take back
    /// a range others may have held and changed meanwhile: Linux lockd
    /// answers NLM4_DENIED_GRACE_PERIOD).
    fn grace_allows(&self, reclaim: bool) -> bool {
        self.in_grace() == reclaim
    }

    /// TEST: would the owner get what it asks? (XNFS nlm4_test.)
    pub fn test(&self, f: &FileRef<'_>, req: &LockReq) -> Outcome {
        if self.in_grace() {
            return Outcome::Grace;
        }
        let Some(req) = &clamped(req) else {
            return Outcome::FBig;
        };
        let key = f.key();
        // The owner's own descriptor ignores the owner's own locks, as
        // fcntl's F_GETLK does for a process; else a fresh one.
        let own = self
            .lock_table()
            .held
            .get(&(key.clone(), req.owner.clone()))
            .map(|h| h.file.clone());
        let file = match own {
            Some(file) => file,
            None => {
                match f.backend.open_for_locks(
                    &rnfsd_fs::Call::thread(f.cred, false),
                    f.fh,
                    LockOpen::plain(true),
                ) {
                    Ok(file) => file,
                    Err(e) => return fs_outcome(&e),
                }
            }
        };
        match file.test(req.kind, req.range) {
            Ok(None) => Outcome::Granted,
            Ok(Some(c)) => {
                let t = self.lock_table();
                let end = c.range.end();
                let who = t.held.iter().find(|((k, o), h)| {
                    *k == key && *o != req.owner && h.ranges.overlap(c.range.start, end).is_some()
                });
                Outcome::Denied(Some(Holder {
                    exclusive: c.kind == LockKind::Exclusive,
                    svid: who.map_or(0, |((_, o), _)| o.svid),
                    oh: who.map(|((_, o), _)| o.oh.clone()).unwrap_or_default(),
                    start: c.range.start,
                    len: c.range.len,
                }))
            }
            Err(e) => fs_outcome(&e),
        }
    }

    /// LOCK (XNFS nlm4_lock). With `block`, a conflict queues the request
    /// (BLOCKED) and `granted` runs once it is granted later.
    pub fn lock(
        &self,
        f: &FileRef<'_>,
        req: &LockReq,
        block: bool,
        reclaim: bool,
        granted: Box<dyn FnOnce() + Send>,
    ) -> Outcome {
        if !self.grace_allows(reclaim) {
            return Outcome::Grace;
        }
        let Some(req) = &clamped(req) else {
            return Outcome::FBig;
        };
        let key = f.key();
        match self.try_take(f, &key, req) {
            Ok(true) => Outcome::Granted,
            Ok(false) if !block => Outcome::Denied(None),
            Ok(false) => {
                let mut t = self.lock_table();
                // A retransmitted blocking LOCK is the same wait.
                if !t.waiters.iter().any(|w| w.file == key && w.req == *req) {
                    if t.waiters.len() >= self.limits.max_waiters
                        || t.host_load(req.owner.addr) >= self.limits.max_per_client
                    {
                        return Outcome::NoLocks;
                    }
                    t.waiters.push(Waiter {
                        file: key,
                        req: req.clone(),
                        backend: f.backend.clone(),
                        cred: f.cred.clone(),
                        fh: f.fh.clone(),
                        granted,
                    });
                    self.wake.kick();
                }
                Outcome::Blocked
            }
            Err(o) => o,
        }
    }

    /// Takes the lock through the owner's descriptor (opened if it has
    /// none): Ok(false) on a conflict. From finding or inserting the
    /// descriptor to trying the lock the table stays locked: the retry
    /// pass closes descriptors that hold nothing and that nobody waits on,
    /// which a new owner's is until its request blocks.
    fn try_take(&self, f: &FileRef<'_>, key: &FileKey, req: &LockReq) -> Result<bool, Outcome> {
        let hk = (key.clone(), req.owner.clone());
        let mut t = self.lock_table();
        if !t.held.contains_key(&hk) {
            drop(t);
            // Opened outside the table's lock (it is a filesystem call).
            let file = f
                .backend
                .open_for_locks(
                    &rnfsd_fs::Call::thread(f.cred, false),
                    f.fh,
                    LockOpen::plain(true),
                )
                .map_err(|e| fs_outcome(&e))?;
            t = self.lock_table();
            if !t.held.contains_key(&hk) {
                if t.held.len() >= self.limits.max_files
                    || t.host_load(req.owner.addr) >= self.limits.max_per_client
                {
                    return Err(Outcome::NoLocks);
                }
                t.insert_held(
                    hk.clone(),
                    Held {
                        file,
                        ranges: Ranges::default(),
                    },
                );
            }
        }
        let Some(h) = t.held.get_mut(&hk) else {
            debug_assert!(
                false,
                "the descriptor was found or inserted under this lock"
            );
            return Err(Outcome::Failed);
        };
        let mut next = h.ranges.clone();
        if !next.set(req.range.start, req.range.end(), req.kind) {
            return Err(Outcome::NoLocks);
        }
        let r = match h.file.lock(req.kind, req.range) {
            Ok(true) => {
                h.ranges = next;
                Ok(true)
            }
            Ok(false) => Ok(false),
            Err(e) => Err(fs_outcome(&e)),
        };
        if h.ranges.is_empty() {
            t.remove_held(&hk);
        }
        r
    }

    /// UNLOCK (XNFS nlm4_unlock): unlocking what is not held is no error.
    /// The owner's blocked requests within the range are cancelled first
    /// (as Linux's `nlmsvc_unlock` cancels the blocked lock): else a late
    /// grant would take back a range the client just let go.
    pub fn unlock(&self, export: u32, fh: &Fh, owner: &Owner, range: LockRange) -> Outcome {
        if self.in_grace() {
            return Outcome::Grace;
        }
        let Some(range) = clamp(range) else {
            return Outcome::FBig;
        };
        {
            let key = FileKey {
                export,
                fh: fh.0.clone(),
            };
            let within = |r: LockRange| {
                r.start >= range.start
                    && range
                        .end()
                        .is_none_or(|e| r.end().is_some_and(|re| re <= e))
            };
            let mut t = self.lock_table();
            let before = t.waiters.len();
            t.waiters
                .retain(|w| !(w.file == key && w.req.owner == *owner && within(w.req.range)));
            if t.waiters.len() != before {
                // The retry pass closes what the cancelled wait had opened.
                t.maybe_idle = true;
            }
        }
        self.release(export, fh, owner, range)
    }

    /// Drops `owner`'s locks on `range` of the file, grace or not: for
    /// UNLOCK, and for a lock granted to a client that no longer wants it
    /// (it answered our GRANTED with a refusal: Linux lockd's
    /// `nlmsvc_grant_reply` unlocks it too).
    pub fn release(&self, export: u32, fh: &Fh, owner: &Owner, range: LockRange) -> Outcome {
        let hk = (
            FileKey {
                export,
                fh: fh.0.clone(),
            },
            owner.clone(),
        );
        let mut t = self.lock_table();
        let Some(h) = t.held.get_mut(&hk) else {
            self.settle(&t, owner.addr);
            return Outcome::Granted;
        };
        if let Err(e) = h.file.unlock(range) {
            return fs_outcome(&e);
        }
        h.ranges.clear(range.start, range.end());
        if h.ranges.is_empty() {
            // Closing the descriptor drops whatever is left in the kernel.
            t.remove_held(&hk);
        }
        self.settle(&t, owner.addr);
        self.wake.kick();
        Outcome::Granted
    }

    /// CANCEL (XNFS nlm4_cancel): forget a blocked request.
    pub fn cancel(&self, export: u32, fh: &Fh, req: &LockReq) -> Outcome {
        if self.in_grace() {
            return Outcome::Grace;
        }
        let Some(req) = &clamped(req) else {
            return Outcome::Denied(None);
        };
        let key = FileKey {
            export,
            fh: fh.0.clone(),
        };
        let mut t = self.lock_table();
        let before = t.waiters.len();
        t.waiters.retain(|w| !(w.file == key && w.req == *req));
        t.maybe_idle = true;
        self.settle(&t, req.owner.addr);
        // The retry pass closes what the cancelled wait had opened.
        self.wake.kick();
        if t.waiters.len() < before {
            Outcome::Granted
        } else {
            // Nothing was waiting (granted meanwhile, or never blocked).
            Outcome::Denied(None)
        }
    }

    /// FREE_ALL, or the client at `addr` rebooted (its SM_NOTIFY): every
    /// lock, wait and share taken from that address goes, and only those
    /// (as knfsd finds the host of FREE_ALL by the caller's address). The
    /// name the call carries selects nothing: any client may write any
    /// name. Returns the number of (owner, file) descriptors closed.
    pub fn free_client(&self, addr: IpAddr) -> usize {
        let addr = canon(addr);
        let mut t = self.lock_table();
        let files: Vec<_> = t
            .held
            .keys()
            .filter(|(_, o)| o.addr == addr)
            .cloned()
            .collect();
        let n = files.len();
        for k in files {
            t.remove_held(&k);
        }
        t.waiters.retain(|w| w.req.owner.addr != addr);
        t.shares.retain(|s| s.addr != addr);
        drop(t);
        if let Some(l) = &self.hosts {
            l.forget(addr);
        }
        self.wake.kick();
        tracing::info!(client = %addr, files = n, "lock manager: client's locks freed");
        n
    }

    /// Frees every lock, wait and share that `keep(export, client)` no
    /// longer allows: after a reload removed an export, or a client from
    /// its list (as knfsd's `unlock_filesystem`). Else those locks would
    /// keep blocking others with no one able to UNLOCK them, and the
    /// waits keep a removed export's backend alive. Returns the number of
    /// (owner, file) descriptors closed.
    pub fn release_where(&self, keep: impl Fn(u32, IpAddr) -> bool) -> usize {
        let mut t = self.lock_table();
        let gone: Vec<_> = t
            .held
            .keys()
            .filter(|(k, o)| !keep(k.export, o.addr))
            .cloned()
            .collect();
        let n = gone.len();
        let mut addrs: Vec<IpAddr> = gone.iter().map(|(_, o)| o.addr).collect();
        for k in &gone {
            t.remove_held(k);
        }
        let waiters = std::mem::take(&mut t.waiters);
        for w in waiters {
            if keep(w.file.export, w.req.owner.addr) {
                t.waiters.push(w);
            } else {
                addrs.push(w.req.owner.addr);
            }
        }
        t.shares.retain(|s| {
            let k = keep(s.file.export, s.addr);
            if !k {
                addrs.push(s.addr);
            }
            k
        });
        addrs.sort();
        addrs.dedup();
        for a in addrs {
            self.settle(&t, a);
        }
        drop(t);
        self.wake.kick();
        n
    }

    /// SHARE (XNFS nlm4_share). The handle is checked by opening the file
    /// as the caller, as a LOCK's is (a share on a file that does not
    /// exist, or that the caller may not open, is refused).
    pub fn share(&self, f: &FileRef<'_>, req: &ShareReq, reclaim: bool) -> Outcome {
        if !self.grace_allows(reclaim) {
            return Outcome::Grace;
        }
        if let Err(e) = f.backend.open_for_locks(
            &rnfsd_fs::Call::thread(f.cred, false),
            f.fh,
            LockOpen::plain(true),
        ) {
            return fs_outcome(&e);
        }
        let file = f.key();
        let mut t = self.lock_table();
        let mine = |s: &Share| s.file == file && s.addr == req.addr && s.oh == req.oh;
        let conflict = t
            .shares
            .iter()
            .filter(|s| s.file == file && !mine(s))
            .any(|s| s.deny & req.access != 0 || req.deny & s.access != 0);
        if conflict {
            return Outcome::Denied(None);
        }
        let replaced = t.shares.len();
        t.shares.retain(|s| !mine(s));
        let new = t.shares.len() == replaced;
        if t.shares.len() >= self.limits.max_shares
            || (new && t.host_load(req.addr) >= self.limits.max_per_client)
        {
            return Outcome::NoLocks;
        }
        t.shares.push(Share {
            file,
            addr: req.addr,
            oh: req.oh.clone(),
            access: req.access,
            deny: req.deny,
        });
        Outcome::Granted
    }

    /// UNSHARE (XNFS nlm4_unshare).
    pub fn unshare(&self, export: u32, fh: &Fh, addr: IpAddr, oh: &[u8]) -> Outcome {
        if self.in_grace() {
            return Outcome::Grace;
        }
        let file = FileKey {
            export,
            fh: fh.0.clone(),
        };
        let mut t = self.lock_table();
        t.shares
            .retain(|s| !(s.file == file && s.addr == addr && s.oh == oh));
        self.settle(&t, addr);
        Outcome::Granted
    }

    pub fn counts(&self) -> LockCounts {
        let t = self.lock_table();
        LockCounts {
            files: t.held.len() as u64,
            ranges: t.held.values().map(|h| h.ranges.len() as u64).sum(),
            waiters: t.waiters.len() as u64,
            shares: t.shares.len() as u64,
        }
    }
}

#[cfg(test)]
mod tests;
