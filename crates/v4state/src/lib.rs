//! rnfsd-v4state: the state of an NFSv4.1 server (RFC 8881): clients
//! (EXCHANGE_ID, §18.35), sessions and their slot tables (§2.10,
//! CREATE_SESSION, SEQUENCE, DESTROY_SESSION, BIND_CONN_TO_SESSION),
//! stateids (§8.2), opens and share reservations (§9.1), byte-range
//! locks (§9.4), leases (§8.3), client records kept across restarts and
//! the grace period (§8.4, RECLAIM_COMPLETE).
//!
//! Written by hand, modelled on RFC 8881 and on knfsd's and nfs-ganesha's
//! state code (read, not copied): state machines are our edge.
//!
//! Bounds: no wire types and no RPC. Calls take and return plain Rust
//! values (owner bytes, verifiers, [`Stateid`]s, share bits, byte ranges)
//! and fail with a [`V4Error`] naming the nfsstat4; the protocol layer
//! decodes, calls, and encodes. Byte-range locks are the kernel's: each
//! (lock owner, file) pair locks through its own open file description
//! (`rnfsd_fs::lock::LockFile`, fcntl OFD locks), as the NLM lock manager
//! does, so NFSv4 clients, NLM clients and local programs see each
//! other's locks. Every table is bounded ([`Limits`]); hitting a bound is
//! an error (NFS4ERR_RESOURCE unless RFC 8881 names another) and counted
//! ([`Counts::limit_hits`]).
//!
//! # Modules
//!
//! The modules form layers: each imports only modules of the layers
//! below it, and a module's `impl State` block calls only `State` methods
//! of its own layer or below (`State`, its tables and counters are the
//! crate root's, as are the accessors over leaves such as `in_grace`).
//!
//! 1. Leaves, data with their own small methods: `ids`; `error` (over
//!    `ids`); `ranges`; `shards`; `slot`; `wake` (the reaper's wake-up);
//!    `grace`; `records`; `channel` (channel attributes and
//!    CREATE_SESSION's result).
//! 2. The kinds of state, each over the leaves and the kinds before it:
//!    `lockfile` (a lock owner's kernel locks on one file); `table` (a
//!    client's stateids and owners, the checks of a stateid); `files`
//!    (shares and lock stateids per file, across clients); `registry`
//!    (client records, by id and owner, and what concerns one client
//!    alone: lease, durable record, grace); `session` (sessions, slots,
//!    connections: CREATE_SESSION, SEQUENCE, DESTROY_SESSION,
//!    BIND_CONN_TO_SESSION, and dropping a client, whose sessions go at
//!    once).
//! 3. The calls that span kinds: `client` (EXCHANGE_ID and
//!    DESTROY_CLIENTID, which drop clients); `stateid` (the check of a
//!    stateid, TEST_STATEID, FREE_STATEID, freeing a stateid with what
//!    hangs off it); `open` (over `stateid`); `lock` (over `open`);
//!    `deleg` (delegations: grant, return, conflicts and recalls, over
//!    `stateid`); `lease` (the reaper and revocation, over `session`,
//!    `stateid` and `deleg`).
//!
//! # Locking
//!
//! Calls run on many threads at once. Locks, in the order they may be
//! taken (a thread holding one takes only later ones):
//!
//! 1. `Client::cs` (one per client): its CREATE_SESSION sequence and
//!    reply cache. Held across the durable write of the client's record
//!    when CREATE_SESSION confirms it (only that client's CREATE_SESSION
//!    waits on it; the write must land before the reply).
//! 2. `State::registry`: clients by id and by owner. Taken by
//!    EXCHANGE_ID, CREATE_SESSION, DESTROY_CLIENTID, revocation and the
//!    reaper's scan; on the SEQUENCE / OPEN / LOCK / I/O path only by a
//!    SEQUENCE that finds its client's lease run out.
//! 3. `Client::st` (one per client): the client's owners, stateids and
//!    session list. Every state call of a client takes it once or twice,
//!    briefly, with no I/O under it.
//! 4. The shards of `State::files` (share reservations and lock holders
//!    per file, checked across clients) and of `State::sessions`.
//! 5. `Session::inner` (one per session): the slot table and the bound
//!    connections. SEQUENCE takes only the session shard, then this (and
//!    the client's `st` briefly when it has revoked state to report).
//! 6. The shards of `State::conns` (which sessions a connection is bound
//!    to).
//! 7. `LockHeld::m` (one per lock stateid): the lock owner's descriptor on
//!    the file and our copy of its ranges. Held across the non-blocking
//!    fcntl (F_OFD_SETLK/GETLK) that changes or tests the kernel's locks,
//!    so the copy and the kernel agree; this is the one lock held across
//!    a filesystem call on the request path, and it is the owner's own:
//!    only calls on the same (lock owner, file) wait, and FREE_STATEID or
//!    revocation of that stateid (under the client's `st`: a wait of one
//!    non-blocking fcntl at most). Opening the descriptor (a path walk)
//!    happens with no lock held.
//!
//! Below all of these, with nothing taken under them: the queue of
//! dropped clients (`State::doomed`), the reaper's wake-up, the grace
//! period's state and the record store's mutex.
//!
//! `Client::cs` and `Client::st` are in `registry`, `Session::inner` in
//! `session`, `LockHeld::m` in `lockfile`; the tables are the fields of
//! [`State`].
//!
//! The reaper ([`State::reap`]) frees dropped clients' state in batches
//! of bounded size, taking the same locks in the same order, and drops
//! the freed descriptors (closing them releases their kernel locks)
//! after letting go of every lock. Record files are written with only
//! `Client::cs` held and removed by the reaper with no lock held,
//! serialised by the record store's own mutex, under which nothing else
//! is taken. Calls that free lock stateids (CLOSE, FREE_STATEID) likewise
//! drop the descriptors after their locks are let go.
//!
//! Each call is on one client's [`ClientHandle`] (from SEQUENCE's
//! [`SlotTicket::client`]), so no global table is searched on the request
//! path: a stateid is looked up in its client's own table (another
//! client's is NFS4ERR_BAD_STATEID there, as in knfsd).

mod channel;
pub mod client;
pub mod deleg;
pub mod error;
mod files;
pub mod grace;
pub mod ids;
pub mod lease;
pub mod lock;
mod lockfile;
pub mod open;
mod ranges;
pub mod records;
mod registry;
pub mod session;
mod shards;
pub mod slot;
pub mod stateid;
mod table;
mod wake;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use client::{ClientHandle, ExchangeIdArgs, ExchangeIdOk};
pub use deleg::{Access, NoDeleg, Recall, WriteHolder};
pub use error::{Denied, V4Error};
pub use grace::{Grace, GraceHold};
pub use ids::{ClientId, ConnId, FileKey, Principal, SessionId, Special, Stateid, Verifier};
pub use lease::{Reaped, Reaper};
pub use lock::{BackendLockFile, LockArgs, Locker4, LocktArgs, OpenLockFile};
pub use open::{Claim, OpenArgs, Opened};
pub use session::{
    seq_status, BindDir, ChannelAttrs, ConnDir, CreateSessionArgs, SequenceArgs, Sequenced,
    SessionCreated, SlotTicket,
};
pub use slot::Digest;
pub use stateid::{StateInfo, StateKind};

use ids::{Clock, Minter};
use registry::Registry;
use shards::{locked, Shards};

/// Bounds on the state (each will be a config key). Defaults suit a
/// server of a few thousand clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Client records (confirmed and unconfirmed) at once. Default 4096.
    pub max_clients: usize,
    /// Sessions one client may hold. Default 8 (Linux clients use one per
    /// server).
    pub sessions_per_client: usize,
    /// Slots of a session's fore channel (the most ca_maxrequests we
    /// grant). Default 64.
    pub slots_per_session: usize,
    /// Connections bound to one session; binding one more unbinds the
    /// oldest. Default 16.
    pub conns_per_session: usize,
    /// Open owners of one client. Default 4096.
    pub open_owners_per_client: usize,
    /// Lock owners of one client. Default 4096.
    pub lock_owners_per_client: usize,
    /// Stateids (open, lock, delegation) of one client. Default 16384.
    pub stateids_per_client: usize,
    /// Stateids of all clients together. Default 1,048,576.
    pub total_stateids: usize,
    /// Bytes reserved for slot reply caches over all sessions (slots ×
    /// ca_maxresponsesize_cached each); a session that would exceed it
    /// gets fewer slots, down to one. Default 64 MiB.
    pub reply_cache_bytes: usize,
    /// The largest request we accept (ca_maxrequestsize). Default 1 MiB +
    /// 4 KiB (a 1 MiB WRITE and its compound).
    pub max_request_size: u32,
    /// The largest reply we send (ca_maxresponsesize). Default 1 MiB +
    /// 4 KiB.
    pub max_response_size: u32,
    /// The largest reply a slot caches (ca_maxresponsesize_cached).
    /// Default 4 KiB: the replies worth caching (non-idempotent ones) are
    /// small.
    pub max_response_size_cached: u32,
    /// The most operations in one compound (ca_maxoperations). Default 50.
    pub max_operations: u32,
    /// Delegations one client may hold. Default 1024.
    pub delegations_per_client: usize,
    /// Delegations of all clients together. Default 32768.
    pub max_delegations: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_clients: 4096,
            sessions_per_client: 8,
            slots_per_session: 64,
            conns_per_session: 16,
            open_owners_per_client: 4096,
            lock_owners_per_client: 4096,
            stateids_per_client: 16384,
            total_stateids: 1 << 20,
            reply_cache_bytes: 64 << 20,
            max_request_size: (1 << 20) + 4096,
            max_response_size: (1 << 20) + 4096,
            max_response_size_cached: 4096,
            max_operations: 50,
            delegations_per_client: 1024,
            max_delegations: 32768,
        }
    }
}

/// Timing and bounds.
#[derive(Debug, Clone)]
pub struct Config {
    /// The lease (§8.3): a client that sends no SEQUENCE for this long
    /// loses its state. Default 90 s.
    pub lease_time: Duration,
    /// The longest grace period after a restart (§8.4.2). Default 90 s.
    pub grace_time: Duration,
    pub limits: Limits,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            lease_time: Duration::from_secs(90),
            grace_time: Duration::from_secs(90),
            limits: Limits::default(),
        }
    }
}

/// A bound of [`Limits`] that a call ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    Clients,
    SessionsPerClient,
    OpenOwnersPerClient,
    LockOwnersPerClient,
    StateidsPerClient,
    TotalStateids,
}

const LIMITS: [Limit; 6] = [
    Limit::Clients,
    Limit::SessionsPerClient,
    Limit::OpenOwnersPerClient,
    Limit::LockOwnersPerClient,
    Limit::StateidsPerClient,
    Limit::TotalStateids,
];

/// Event counters (monotonic).
#[derive(Default)]
pub(crate) struct Stats {
    limit_hits: [AtomicU64; LIMITS.len()],
    pub(crate) clients_expired: AtomicU64,
    pub(crate) replays: AtomicU64,
    pub(crate) false_retries: AtomicU64,
    pub(crate) misordered: AtomicU64,
    pub(crate) reaped_stateids: AtomicU64,
    pub(crate) delegations_granted: AtomicU64,
    pub(crate) recalls: AtomicU64,
    pub(crate) delegations_revoked: AtomicU64,
}

impl Stats {
    pub(crate) fn hit(&self, l: Limit) -> V4Error {
        if let Some(i) = LIMITS.iter().position(|&x| x == l) {
            self.limit_hits[i].fetch_add(1, Ordering::Relaxed);
        }
        tracing::debug!(limit = ?l, "nfsv4 state: bound reached");
        V4Error::Resource
    }
}

/// A snapshot of the state's size and its event counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub clients: u64,
    pub sessions: u64,
    pub in_grace: bool,
    /// Bytes reserved for slot reply caches.
    pub reply_cache_bytes: u64,
    pub stateids: u64,
    /// Clients whose state is being freed.
    pub doomed_clients: u64,
    pub limit_hits: Vec<(Limit, u64)>,
    pub clients_expired: u64,
    pub replays: u64,
    pub false_retries: u64,
    pub misordered: u64,
    pub reaped_stateids: u64,
    /// Delegations held now.
    pub delegations: u64,
    /// Of which write delegations.
    pub write_delegations: u64,
    pub delegations_granted: u64,
    /// Recalls (CB_RECALL) asked for.
    pub recalls: u64,
    /// Delegations revoked for want of a DELEGRETURN.
    pub delegations_revoked: u64,
}

/// The NFSv4.1 state of one server instance.
pub struct State {
    pub(crate) cfg: Config,
    pub(crate) ids: Minter,
    pub(crate) clock: Arc<Clock>,
    pub(crate) registry: Mutex<Registry>,
    /// Clients expired or destroyed whose state the reaper still frees.
    pub(crate) doomed: Mutex<VecDeque<Arc<registry::Client>>>,
    pub(crate) stats: Stats,
    pub(crate) total_stateids: AtomicUsize,
    pub(crate) sessions: Shards<SessionId, Arc<session::Session>, shards::MadeIds>,
    /// The sessions each connection is bound to (each session's own list
    /// is the truth; this finds them when a connection closes).
    pub(crate) conns: Shards<ConnId, Vec<SessionId>>,
    pub(crate) cache: session::CacheBudget,
    /// Share reservations per file, over all clients.
    pub(crate) files: Shards<FileKey, files::FileState>,
    /// Wakes the reaper thread.
    pub(crate) wake: Arc<wake::Wake>,
    pub(crate) grace: Arc<Grace>,
    pub(crate) records: Option<records::Records>,
    /// The previous run's unreclaimed records were swept (grace is over).
    pub(crate) swept: AtomicBool,
    /// Delegations held by all clients (and grants in progress).
    pub(crate) delegations: AtomicUsize,
    /// Accesses in progress that began while no delegation existed.
    pub(crate) quick: Box<[Arc<deleg::QuickShard>]>,
    /// Of which write delegations (listed on their files).
    pub(crate) write_delegations: AtomicUsize,
    /// Recalls in progress, for the reaper's deadline check.
    pub(crate) recalled: Mutex<Vec<deleg::Pending>>,
    /// Files recalled lately (the state's clock, ms): no delegation on
    /// them for a while (`deleg::RECALL_BACKOFF`).
    pub(crate) contended: Mutex<HashMap<FileKey, u64>>,
}

impl State {
    /// A state for a server instance with boot verifier `boot` (distinct
    /// for each start: ids carry it, so ones from before a restart are
    /// recognised as stale; never 0 or `u32::MAX`).
    ///
    /// No client records are kept: after a restart no client may reclaim,
    /// and there is no grace period.
    pub fn new(cfg: Config, boot: u32) -> std::io::Result<Arc<State>> {
        Ok(Self::with_key(
            cfg,
            boot,
            ids::random_key()?,
            None,
            Vec::new(),
        ))
    }

    /// A state keeping its client records in `dir` (made if missing),
    /// which also gives the boot verifier: the clients recorded by the
    /// previous run may reclaim in the grace period, whose clock starts at
    /// [`start_grace`](State::start_grace).
    pub fn with_records(cfg: Config, dir: &std::path::Path) -> std::io::Result<Arc<State>> {
        let (r, loaded) = records::Records::open(dir)?;
        tracing::info!(
            boot = loaded.boot,
            clients = loaded.previous.len(),
            "nfsv4: client records loaded"
        );
        Ok(Self::with_key(
            cfg,
            loaded.boot,
            ids::random_key()?,
            Some(r),
            loaded.previous,
        ))
    }

    pub(crate) fn with_key(
        cfg: Config,
        boot: u32,
        key: [u8; 32],
        records: Option<records::Records>,
        previous: Vec<Vec<u8>>,
    ) -> Arc<State> {
        debug_assert!(boot != 0 && boot != u32::MAX);
        let clock = Arc::new(Clock::default());
        Arc::new(State {
            grace: Grace::with_clock(clock.clone(), cfg.grace_time, previous),
            records,
            swept: AtomicBool::new(false),
            cfg,
            ids: Minter::new(boot, key),
            clock,
            registry: Mutex::new(Registry {
                by_id: HashMap::new(),
                by_owner: HashMap::new(),
            }),
            doomed: Mutex::new(VecDeque::new()),
            stats: Stats::default(),
            total_stateids: AtomicUsize::new(0),
            sessions: Shards::new(),
            conns: Shards::new(),
            cache: session::CacheBudget::default(),
            files: Shards::new(),
            wake: Arc::default(),
            delegations: AtomicUsize::new(0),
            quick: (0..deleg::QUICK_SHARDS).map(|_| Arc::default()).collect(),
            write_delegations: AtomicUsize::new(0),
            recalled: Mutex::new(Vec::new()),
            contended: Mutex::new(HashMap::new()),
        })
    }

    /// This instance's boot verifier.
    pub fn boot(&self) -> u32 {
        self.ids.boot
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The grace period, to share with the NLM lock manager.
    pub fn grace(&self) -> &Arc<Grace> {
        &self.grace
    }

    /// Starts the grace period's clock (once the server listens).
    pub fn start_grace(&self) {
        self.grace.start();
    }

    pub(crate) fn in_grace(&self) -> bool {
        self.grace.in_grace()
    }

    pub fn counts(&self) -> Counts {
        let s = &self.stats;
        Counts {
            clients: locked(&self.registry).by_id.len() as u64,
            sessions: self.sessions.len() as u64,
            in_grace: self.grace.in_grace(),
            reply_cache_bytes: self.cache.used() as u64,
            stateids: self.total_stateids.load(Ordering::Relaxed) as u64,
            doomed_clients: locked(&self.doomed).len() as u64,
            limit_hits: LIMITS
                .iter()
                .zip(&s.limit_hits)
                .map(|(&l, n)| (l, n.load(Ordering::Relaxed)))
                .collect(),
            clients_expired: s.clients_expired.load(Ordering::Relaxed),
            replays: s.replays.load(Ordering::Relaxed),
            false_retries: s.false_retries.load(Ordering::Relaxed),
            misordered: s.misordered.load(Ordering::Relaxed),
            reaped_stateids: s.reaped_stateids.load(Ordering::Relaxed),
            delegations: self.delegations.load(Ordering::Relaxed) as u64,
            write_delegations: self.write_delegations.load(Ordering::Relaxed) as u64,
            delegations_granted: s.delegations_granted.load(Ordering::Relaxed),
            recalls: s.recalls.load(Ordering::Relaxed),
            delegations_revoked: s.delegations_revoked.load(Ordering::Relaxed),
        }
    }
}
