//! The `[server]` table: every bound and switch of the server, with its
//! default.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

use super::{err, ConfigError};

/// Experiment switch: which idle worker is woken first (see rnfsd-pool).
/// `lifo` (the most recently idle, cache-hot worker) is the design.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WakeOrder {
    #[default]
    Lifo,
    Fifo,
}

/// Experiment switch: `direct` (the woken worker runs the request) is the
/// design; `double` is the naive two-wakeup hand-off seed thread 001 removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Handoff {
    #[default]
    Direct,
    Double,
}

/// Worker pools over the event loops: `per-loop` (one per loop, thread
/// counts divided among them; the default, measured better with 2 loops
/// and the same as `shared` with 1) or `shared` (one pool for all loops).
/// See rnfsd-transport `PoolLayout` and docs/pool-layout.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PoolLayout {
    Shared,
    #[default]
    PerLoop,
}

/// Bound on woken-but-not-yet-running workers: a number, or "unlimited"
/// (experiment only: wake a worker for every request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxWaking {
    N(usize),
    Unlimited,
}

impl Default for MaxWaking {
    fn default() -> Self {
        MaxWaking::N(1)
    }
}

impl<'de> Deserialize<'de> for MaxWaking {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(usize),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(MaxWaking::N(n)),
            Raw::S(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

macro_rules! parse_words {
    ($t:ty, $key:literal, $($word:literal => $v:expr),*) => {
        impl std::str::FromStr for $t {
            type Err = ConfigError;
            fn from_str(s: &str) -> Result<Self, ConfigError> {
                match s {
                    $($word => Ok($v),)*
                    _ => err(format!(concat!($key, " must be one of {:?}, not {:?}"), [$($word),*], s)),
                }
            }
        }
    };
}

parse_words!(WakeOrder, "wake_order", "lifo" => WakeOrder::Lifo, "fifo" => WakeOrder::Fifo);
parse_words!(Handoff, "handoff", "direct" => Handoff::Direct, "double" => Handoff::Double);
parse_words!(PoolLayout, "pools", "shared" => PoolLayout::Shared, "per-loop" => PoolLayout::PerLoop);

impl std::str::FromStr for MaxWaking {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        if s == "unlimited" {
            return Ok(MaxWaking::Unlimited);
        }
        s.parse::<usize>().map(MaxWaking::N).map_err(|_| {
            ConfigError(format!(
                "max_waking must be a number or \"unlimited\", not {s:?}"
            ))
        })
    }
}

pub const DEFAULT_MAX_IO: u32 = 1 << 20;
/// Room beyond `max_io` for the RPC header, credentials and WRITE arguments.
pub const RECORD_OVERHEAD: u32 = 64 * 1024;
/// RFC 1813 leaves the transfer size to the server; below a page is silly
/// and above 16 MiB a single call pins too much memory per worker.
pub const MIN_MAX_IO: u32 = 4096;
pub const MAX_MAX_IO: u32 = 16 << 20;
/// Port mapper and lock calls are few and quick: more UDP threads than
/// this per address would only sit idle.
pub const MAX_UDP_THREADS: usize = 16;
/// The journal's commits run one after another; more threads asking for
/// them would only wait (`rnfsd_fs::owed::MAX_THREADS`).
pub const MAX_JOURNAL_COMMIT_THREADS: usize = rnfsd_fs::owed::MAX_THREADS;
/// Most `blocking_lazy_wake_us` (100 ms): a call left behind a long one
/// waits this long at most.
pub const MAX_BLOCKING_LAZY_WAKE_US: u64 = 100_000;
/// Bound of `server.reply_batch` (replies one worker may hold back).
pub const MAX_REPLY_BATCH: usize = 256;

/// `inline_write_max`'s default: 4 KiB WRITEs gain 1.2x-1.5x on the loop,
/// 1 MiB ones make a loop's other calls wait (docs/request-path.md).
pub const DEFAULT_INLINE_WRITE_MAX: u32 = 64 << 10;
/// `inline_write_alone_max`'s default: `max_io`'s, so every UNSTABLE WRITE
/// may run on a loop that has nothing else ready (docs/request-path.md).
pub const DEFAULT_INLINE_WRITE_ALONE_MAX: u32 = DEFAULT_MAX_IO;
/// `inline_large_writes_per_turn`'s default (docs/request-path.md, "Large
/// WRITEs on the loop while others wait").
pub const DEFAULT_INLINE_LARGE_WRITES_PER_TURN: usize = 4;
/// Its bound: a call read in a turn waits for at most this many copies.
pub const MAX_INLINE_LARGE_WRITES_PER_TURN: usize = 64;

/// The `[server]` table. Every bound the server enforces has a key here.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// TCP addresses NFS and MOUNT answer on (both on each).
    pub listen: Vec<SocketAddr>,
    /// Serve a built-in port mapper (PMAP v2, RPCBIND v3/v4 read side) on
    /// port 111 of each listen address, instead of registering with the
    /// system rpcbind.
    pub portmap: bool,
    /// Register NFS and MOUNT with a running system rpcbind (ignored with
    /// `portmap`).
    pub register_rpcbind: bool,
    /// Serve the port mapper and the lock manager (NLM, NSM) over
    /// UDP too: the lock daemons and status monitors of Linux and the BSDs
    /// look services up over UDP. NFS and MOUNT stay TCP only.
    pub udp: bool,
    /// Threads per UDP address, each receiving and answering calls.
    pub udp_threads: usize,
    /// Serve the lock manager (NLM v1, v3, v4: program 100021) on the NFS
    /// addresses, over TCP and (with `udp`) UDP, so clients mount without
    /// `nolock`.
    pub nlm: bool,
    /// After a restart, how long only lock reclaims are granted (when
    /// clients held locks before it; XNFS grace period).
    pub nlm_grace_secs: u64,
    /// (owner, file) descriptors the lock manager holds at once (each is
    /// one open file; beyond it LOCK answers NLM4_DENIED_NOLOCKS).
    pub nlm_max_files: usize,
    /// Blocked lock requests waiting at once.
    pub nlm_max_waiters: usize,
    /// Descriptors and blocked requests of one client host at once.
    pub nlm_max_per_client: usize,
    /// How often blocked lock requests are retried (a lock freed by a
    /// local program is seen within this).
    pub nlm_retry_ms: u64,
    /// A fixed number of worker threads; overrides min/max_threads.
    pub threads: Option<usize>,
    /// Adaptive pool: threads kept even when idle.
    pub min_threads: usize,
    /// Adaptive pool: most threads (they block on disk I/O, so more than
    /// cores).
    pub max_threads: usize,
    /// Adaptive pool: retire a worker idle this many seconds.
    pub thread_idle_secs: u64,
    /// Requests queued for a worker before the transport stops reading.
    pub queue_limit: usize,
    /// Workers woken but not yet running at once (the bounded-wakeup rule).
    pub max_waking: MaxWaking,
    /// Experiment switch: "lifo" (design) or "fifo".
    pub wake_order: WakeOrder,
    /// Experiment switch: "direct" (design) or "double".
    pub handoff: Handoff,
    /// Largest RPC record accepted (all fragments); larger ones close the
    /// connection. Must exceed `max_io` by at least 4096. Default: `max_io`
    /// + 64 KiB.
    pub max_record: Option<u32>,
    /// Largest READ/WRITE/READDIR transfer, advertised in FSINFO.
    pub max_io: u32,
    /// Open client connections; at the limit the oldest idle one is closed
    /// to make room, and a new one is refused only when none is idle.
    pub max_connections: usize,
    /// Open connections from one client address; 0 = no limit beyond
    /// `max_connections` (the default: NAT, containers and VMs often put
    /// many clients behind one address).
    pub max_connections_per_client: usize,
    /// Requests of one connection being processed at once; the connection
    /// is not read further until one completes.
    pub max_inflight_per_conn: usize,
    /// Queued unsent reply bytes of one connection before it is not read
    /// further (a slow reader cannot pin unbounded memory).
    pub max_conn_output: usize,
    /// Bytes held across all connections for request records and queued
    /// replies; past it, connections with calls or replies outstanding are
    /// not read until it drains (0: no bound).
    pub max_buffered_bytes: usize,
    /// Close a connection that sent nothing for this many seconds and has
    /// nothing in flight.
    pub idle_timeout_secs: u64,
    /// Event-loop threads reading sockets (workers write replies); 0 = one
    /// per CPU this process may run on (the default: with per-loop pools and
    /// pinning this is knfsd's percpu pool mode, measured fastest in
    /// docs/service-core.md).
    pub event_threads: usize,
    /// "per-loop": one worker pool per event loop, serving the connections
    /// that loop reads, with the thread counts divided among the pools
    /// (rounded up); "shared": one pool for all loops.
    pub pools: PoolLayout,
    /// Pin each event loop (and, with per-loop pools, its workers) to one
    /// CPU. Unset = pin exactly when there is a loop for every CPU (pinning
    /// fewer loops than CPUs would confine the workers to few CPUs).
    pub pin_loops: Option<bool>,
    /// On shutdown, how long to keep flushing queued replies.
    pub shutdown_timeout_secs: u64,
    /// Local backend, per export: bound on the inode -> location map (no
    /// descriptors; None = backend default).
    pub path_cache_entries: Option<usize>,
    /// Local backend, per export: bound on the map of objects lately
    /// proven inside the export (no descriptors; None = backend default).
    pub verdict_cache_entries: Option<usize>,
    /// Local backend: bound on directory entries one walk of the export
    /// visits when looking for handles whose location is unknown (None =
    /// backend default).
    pub handle_scan_limit: Option<usize>,
    /// Local backend: calls waiting for that walk at once; more answer
    /// JUKEBOX at once (None = backend default).
    pub handle_scan_waiters: Option<usize>,
    /// Local backend: how long a call waits for the walk before JUKEBOX.
    pub handle_scan_wait_ms: Option<u64>,
    /// Local backend, per export: handle -> object cache entries (one
    /// descriptor each; None = backend default).
    pub object_cache_entries: Option<usize>,
    /// Local backend, per export: open-file cache entries (one descriptor
    /// each; None = backend default).
    pub open_file_cache_entries: Option<usize>,
    /// Descriptors all caches of all exports may hold together (None: from
    /// RLIMIT_NOFILE, see `cache_fd_budget`).
    pub cache_fds: Option<usize>,
    /// Local backend, per export: syncs (fsync) running at once; more
    /// requests queue or share a sync (group commit); also caps a `sync`
    /// export's journal commit threads. None: backend default.
    pub max_syncs_in_flight: Option<usize>,
    /// Local backend, per export: threads committing the journal of a
    /// `sync` export on ext4 or XFS for calls whose replies wait for it (1
    /// to 8). None: backend default (1).
    pub journal_commit_threads: Option<usize>,
    /// Local backend, per export: the most unsynced bytes of one file
    /// whose writeback a COMMIT or stable WRITE leaves to the journal
    /// commit thread to wait for (with the rest of its batch); a file with
    /// more is waited for by the call's own thread, so one large COMMIT
    /// never holds back the other calls' commits (0: every call waits for
    /// its own). None: backend default (1 MiB).
    pub owed_writeback_bytes: Option<u64>,
    /// Local backend, per export: how long after a written file was closed
    /// with uncommitted data its filesystem is flushed in the background
    /// (a COMMIT flushes at once). None: backend default (5 s).
    pub flush_delay_ms: Option<u64>,
    /// Local backend, per export: UNSTABLE bytes one open file gathers
    /// before their writeback is started (by the event loop that ran the
    /// WRITE, once its reply is sent, or else a background thread), so a
    /// COMMIT finds most of a large transfer already on its way to the disk
    /// (0: the COMMIT flushes everything). None: backend default (4 MiB).
    pub write_behind_bytes: Option<u64>,
    /// CephFS exports: how long one libcephfs call may take before the
    /// client gets JUKEBOX and retries (libcephfs waits, with no limit of
    /// its own, while no MDS is active).
    pub ceph_call_timeout_ms: u64,
    /// CephFS exports, each: libcephfs calls running at once (more wait in
    /// a queue of 8 per thread; a full queue answers JUKEBOX).
    pub ceph_call_threads: usize,
    /// CephFS exports, each: cached inodes (each pins an inode in
    /// libcephfs's cache and may hold open files).
    pub ceph_inode_cache_entries: usize,
    /// Threads of the pool that runs calls which wait for stable storage
    /// (COMMIT, stable WRITE, and namespace changes on `sync` exports), so
    /// they never make GETATTR, LOOKUP or READ queue behind them. 0: they
    /// run in the ordinary pools.
    pub blocking_threads: usize,
    /// Nice value of the blocking pool's threads (-20 to 19; 0: as the
    /// server was started). Above 0 the scheduler favours the event loops
    /// over them when CPUs are short, so warm calls answered on the loops
    /// keep their latency beside a storm of misses or syncs.
    pub blocking_nice: i32,
    /// The threads that wait for stable storage (the blocking pool's and
    /// the journal commit threads) run under SCHED_BATCH: their wakeups
    /// do not preempt a running thread, so an event loop finishes its turn
    /// first. False: SCHED_OTHER, as the server was started.
    pub sync_sched_batch: bool,
    /// Microseconds a call left to the blocking pool's running worker may
    /// wait for it, before a timer wakes another (seed 001's one handoff:
    /// a call queued alone while a worker runs, and the calls behind one a
    /// worker takes, wake nobody; a running call that sleeps long delays
    /// them this long at most). 0: every call wakes a worker at once.
    pub blocking_lazy_wake_us: u64,
    /// Run to completion: answer calls that need nothing but memory (cached
    /// GETATTR, ACCESS, LOOKUP, READ of cached pages, ...) on the event loop
    /// thread that read them, with no handoff; replies of one connection
    /// leave together.
    pub run_inline: bool,
    /// With `run_inline`: a handle cache miss is opened on the loop thread
    /// too (the kernel almost always holds the inode), and a loop whose
    /// open slept (read the disk) hands misses to the pool again for 10 ms
    /// to 1 s. False: every miss goes to a pool thread.
    pub inline_misses: bool,
    /// With `run_inline`: an UNSTABLE WRITE of at most this many bytes is
    /// written on the loop thread (into the page cache; with
    /// `inline_misses` its writer is opened there on a miss), and a loop
    /// whose write slept (dirty throttling, the journal) hands writes to
    /// the pool again for 10 ms to 1 s. Larger WRITEs follow
    /// `inline_write_alone_max`: a loop copying 1 MiB makes its other
    /// connections wait (docs/request-path.md). 0: every WRITE goes to a
    /// pool thread.
    pub inline_write_max: u32,
    /// With `inline_write_max` above 0: an UNSTABLE WRITE larger than it and
    /// of at most this many bytes is written on the loop too when nothing
    /// else of that loop is ready in its turn (no other connection to
    /// read, no other call of this one), or within
    /// `inline_large_writes_per_turn`; else the loop's pool. 0: none.
    pub inline_write_alone_max: u32,
    /// Of those larger WRITEs, how many a loop writes itself in one turn
    /// while other calls of it are ready: each makes them wait for its copy
    /// (a call already read waits for this many copies at most), and each
    /// saves a handoff's two context switches. 0: only when nothing else is
    /// ready.
    pub inline_large_writes_per_turn: usize,
    /// With `run_inline`: a namespace change or SETATTR of an `async`
    /// export (CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR, RENAME, LINK;
    /// SETATTR) is made on the loop thread once its handles are resolved
    /// there (nothing of it waits for stable storage), and a loop whose
    /// change slept hands changes to the pool again for 10 ms to 1 s. A
    /// change that sets a size (SETATTR, CREATE) or would free the last
    /// link of a file over 16 MiB (REMOVE, RENAME) goes to the pool. False:
    /// every change goes to a pool thread. `sync` exports' changes always
    /// wait in the blocking pool.
    pub inline_changes: bool,
    /// Most replies a worker holds back while it runs the next short call
    /// (UNSTABLE WRITE, a change on an `async` export) of the same
    /// connection, so a client's burst is answered in one write, not one
    /// per call (0 or 1: each reply leaves alone; at most 256).
    pub reply_batch: usize,
    /// Pipes for READ replies sent by splice(2) (file pages to the socket
    /// with no copy), two descriptors each; one is held per large READ
    /// until the socket has taken its data. 0: READ data is copied.
    pub splice_pipes: usize,
    /// Local backend: run filesystem calls with the caller's uid/gid (needs
    /// root; None = the backend decides from our privileges).
    pub act_as_caller: Option<bool>,
    /// Where the handle key lives (None: /var/lib/rnfsd as root, else
    /// $XDG_STATE_HOME/rnfsd or ~/.local/state/rnfsd).
    pub state_dir: Option<PathBuf>,
    /// A tracing filter such as "info" or "rnfsd=debug" (RUST_LOG wins).
    pub log_level: Option<String>,
    /// Accept AUTH_NONE (as nobody) for every procedure. Off: AUTH_NONE
    /// works only for NULL, MOUNT EXPORT and the port mapper.
    pub allow_auth_none: bool,
    /// The admin socket (statistics; owner-only). None: STATE_DIR/admin.sock.
    pub admin_socket: Option<PathBuf>,
    /// Serve Prometheus metrics (GET /metrics) on this address. None: off.
    pub metrics: Option<SocketAddr>,
    /// How RPC statistics are kept: "percore" (design), "shared" (one
    /// shared counter per procedure, for comparison) or "off".
    pub stats: rnfsd_stats::Mode,
    /// Duplicate reply cache: how long a non-idempotent call's reply is
    /// replayed to a retransmission (knfsd: 120 s).
    pub drc_expiry_secs: u64,
    /// Duplicate reply cache: bound on its memory; 0 turns it off.
    pub drc_max_bytes: usize,
    /// A knfsd exports(5) file (such as /etc/exports) whose exports are
    /// added to the `[[export]]` tables, with knfsd's defaults (read-only).
    /// A relative path is taken from the working directory. See
    /// docs/exports.md.
    pub exports: Option<PathBuf>,
}

impl ServerConfig {
    /// Descriptors the caches may hold, given the open-files limit
    /// `nofile`: `cache_fds` if set (an error if it leaves too little room),
    /// else half of what connections and per-call use leave. Per-call use:
    /// a few descriptors per worker, and one per level of a handle walk.
    pub fn cache_fd_budget(&self, nofile: u64) -> Result<usize, ConfigError> {
        let reserve = self.fd_reserve();
        let room = nofile.saturating_sub(reserve);
        match self.cache_fds {
            Some(n) if n as u64 > room => Err(ConfigError(format!(
                "server.cache_fds = {n} leaves too few descriptors: the open-files limit is \
                 {nofile} and connections and calls need {reserve}; lower cache_fds or \
                 max_connections, or raise the hard RLIMIT_NOFILE"
            ))),
            Some(n) => Ok(n),
            None if room < 128 => Err(ConfigError(format!(
                "the open-files limit ({nofile}) leaves no room for caches after \
                 {reserve} for connections and calls: lower max_connections or raise the \
                 hard RLIMIT_NOFILE"
            ))),
            None => Ok(((room / 2) as usize).min(1 << 20)),
        }
    }

    /// Descriptors connections and per-call use may hold beside the
    /// caches' `cache_fd_budget`.
    pub fn fd_reserve(&self) -> u64 {
        self.max_connections as u64
            + 4 * self.max_threads.max(self.threads.unwrap_or(0)) as u64
            + 2 * self.splice_pipes as u64
            + if self.nlm {
                self.nlm_max_files as u64
            } else {
                0
            }
            + 1024
    }

    /// `max_record`, or its default from `max_io`.
    pub fn max_record(&self) -> u32 {
        self.max_record
            .unwrap_or(self.max_io.saturating_add(RECORD_OVERHEAD))
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: vec![SocketAddr::from(([127, 0, 0, 1], 2049))],
            portmap: false,
            register_rpcbind: true,
            udp: true,
            udp_threads: 1,
            nlm: true,
            // As knfsd's default grace (its lease time).
            nlm_grace_secs: 90,
            nlm_max_files: 4096,
            nlm_max_waiters: 1024,
            nlm_max_per_client: 1024,
            nlm_retry_ms: 100,
            threads: None,
            min_threads: 2,
            max_threads: 128,
            thread_idle_secs: 30,
            queue_limit: 1024,
            max_waking: MaxWaking::N(1),
            wake_order: WakeOrder::Lifo,
            handoff: Handoff::Direct,
            max_record: None,
            max_io: DEFAULT_MAX_IO,
            // Far below the 20,000 open-files limit: each backend holds
            // descriptors too.
            max_connections: 1024,
            max_connections_per_client: 0,
            max_inflight_per_conn: 64,
            max_conn_output: 4 << 20,
            max_buffered_bytes: 256 << 20,
            // As knfsd.
            idle_timeout_secs: 360,
            event_threads: 0,
            pools: PoolLayout::PerLoop,
            pin_loops: None,
            shutdown_timeout_secs: 10,
            path_cache_entries: None,
            verdict_cache_entries: None,
            handle_scan_limit: None,
            handle_scan_waiters: None,
            handle_scan_wait_ms: None,
            object_cache_entries: None,
            open_file_cache_entries: None,
            cache_fds: None,
            max_syncs_in_flight: None,
            journal_commit_threads: None,
            owed_writeback_bytes: None,
            flush_delay_ms: None,
            write_behind_bytes: None,
            ceph_call_timeout_ms: 5000,
            ceph_call_threads: 32,
            ceph_inode_cache_entries: 16384,
            blocking_threads: 64,
            blocking_nice: 0,
            sync_sched_batch: true,
            blocking_lazy_wake_us: 2000,
            run_inline: true,
            inline_misses: true,
            inline_write_max: DEFAULT_INLINE_WRITE_MAX,
            inline_write_alone_max: DEFAULT_INLINE_WRITE_ALONE_MAX,
            inline_large_writes_per_turn: DEFAULT_INLINE_LARGE_WRITES_PER_TURN,
            inline_changes: true,
            reply_batch: 16,
            splice_pipes: 32,
            act_as_caller: None,
            state_dir: None,
            log_level: None,
            allow_auth_none: false,
            admin_socket: None,
            metrics: None,
            stats: rnfsd_stats::Mode::Percore,
            drc_expiry_secs: 120,
            drc_max_bytes: 32 << 20,
            exports: None,
        }
    }
}
