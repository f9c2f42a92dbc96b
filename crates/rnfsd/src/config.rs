//! Server configuration: the TOML file format, its defaults and validation,
//! and the resolution of exports (canonical paths, stable ids).
//!
//! ```toml
//! [server]
//! listen = ["127.0.0.1:2049"]
//! max_io = 1048576
//! exports = "/etc/exports"                # optional: a knfsd exports(5) file
//!
//! [[export]]
//! path = "/srv/a"
//! read_only = true
//! clients = ["127.0.0.1", "10.0.0.0/8"]   # default: loopback only
//! root_squash = true                      # default
//!
//! [[export.client]]                       # per-client options
//! match = "10.1.0.0/16"
//! read_only = false
//! ```
//!
//! See docs/security.md for the access-control semantics and
//! docs/exports.md for exports(5) files (`crate::exports`).
//!
//! Unknown keys are errors, so a typo cannot silently leave a default in
//! force.

use std::collections::HashSet;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A configuration problem, with the key or export it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

fn err<T>(msg: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(msg.into()))
}

/// How the local backend builds file handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HandleMode {
    /// Kernel handles (name_to_handle_at) where the filesystem and our
    /// privileges allow, else path-based.
    #[default]
    Auto,
    /// Kernel handles only (needs CAP_DAC_READ_SEARCH to open them).
    Kernel,
    /// Path/inode-based handles that work unprivileged.
    Path,
}

impl std::str::FromStr for HandleMode {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s {
            "auto" => Ok(HandleMode::Auto),
            "kernel" => Ok(HandleMode::Kernel),
            "path" => Ok(HandleMode::Path),
            _ => err(format!(
                "handle_mode must be \"auto\", \"kernel\" or \"path\", not {s:?}"
            )),
        }
    }
}

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
/// Bound of `server.reply_batch` (replies one worker may hold back).
pub const MAX_REPLY_BATCH: usize = 256;

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
    /// requests queue or share a sync (group commit). None: backend default.
    pub max_syncs_in_flight: Option<usize>,
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
    /// Run to completion: answer calls that need nothing but memory (cached
    /// GETATTR, ACCESS, LOOKUP, READ of cached pages, ...) on the event loop
    /// thread that read them, with no handoff; replies of one connection
    /// leave together.
    pub run_inline: bool,
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
    /// Event loops to run: `event_threads`, or one per CPU this process may
    /// run on when it is 0 (at most 64).
    pub fn event_loops(&self) -> usize {
        self.loops_for(allowed_cpus())
    }

    fn loops_for(&self, cpus: usize) -> usize {
        if self.event_threads > 0 {
            return self.event_threads;
        }
        cpus.clamp(1, 64)
    }

    /// Whether loops (and per-loop pools) are pinned to CPUs.
    pub fn pin(&self) -> bool {
        self.pin_for(allowed_cpus())
    }

    fn pin_for(&self, cpus: usize) -> bool {
        self.pin_loops
            .unwrap_or_else(|| cpus > 1 && self.loops_for(cpus) >= cpus)
    }

    /// The worker pool configuration before any per-loop split.
    pub fn pool_config(&self) -> rnfsd_pool::PoolConfig {
        use rnfsd_pool::Threads;
        rnfsd_pool::PoolConfig {
            threads: match self.threads {
                Some(n) => Threads::Fixed(n),
                None => Threads::Adaptive {
                    min: self.min_threads,
                    max: self.max_threads,
                },
            },
            idle_timeout: std::time::Duration::from_secs(self.thread_idle_secs),
            queue_limit: self.queue_limit,
            max_waking: match self.max_waking {
                MaxWaking::N(n) => n,
                MaxWaking::Unlimited => rnfsd_pool::UNLIMITED,
            },
            wake_order: match self.wake_order {
                WakeOrder::Lifo => rnfsd_pool::WakeOrder::Lifo,
                WakeOrder::Fifo => rnfsd_pool::WakeOrder::Fifo,
            },
            handoff: match self.handoff {
                Handoff::Direct => rnfsd_pool::Handoff::Direct,
                Handoff::Double => rnfsd_pool::Handoff::Double,
            },
            ..rnfsd_pool::PoolConfig::default()
        }
    }

    /// Where work runs on a host with `cpus` CPUs: event loops, each loop's
    /// pool (its share of the threads), and the blocking pool shared by all
    /// loops for calls that may wait for the disk or stable storage.
    pub fn layout_for(&self, cpus: usize) -> Layout {
        let loops = self.loops_for(cpus);
        let per = match self.pools {
            PoolLayout::PerLoop => rnfsd_transport::split_pool(&self.pool_config(), loops, 0, None),
            PoolLayout::Shared => self.pool_config(),
        };
        let (min, max) = match per.threads {
            rnfsd_pool::Threads::Fixed(n) => (n, n),
            rnfsd_pool::Threads::Adaptive { min, max } => (min, max),
        };
        Layout {
            loops,
            pinned: self.pin_for(cpus),
            loop_pool_min: min,
            loop_pool_max: max,
            loop_pool_queue: per.queue_limit,
            blocking_max: self.blocking_threads,
            // What one connection can have running at once: its quick calls
            // run on its loop; its slow ones in the shared blocking pool (or,
            // without one, its loop's pool).
            slow_calls_per_conn: self
                .max_inflight_per_conn
                .min(if self.blocking_threads > 0 {
                    self.blocking_threads
                } else {
                    max
                }),
        }
    }

    /// Descriptors the caches may hold, given the open-files limit
    /// `nofile`: `cache_fds` if set (an error if it leaves too little room),
    /// else half of what connections and per-call use leave. Per-call use:
    /// a few descriptors per worker, and one per level of a handle walk.
    pub fn cache_fd_budget(&self, nofile: u64) -> Result<usize, ConfigError> {
        let reserve = self.max_connections as u64
            + 4 * self.max_threads.max(self.threads.unwrap_or(0)) as u64
            + 2 * self.splice_pipes as u64
            + if self.nlm {
                self.nlm_max_files as u64
            } else {
                0
            }
            + 1024;
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
            ceph_call_timeout_ms: 5000,
            ceph_call_threads: 32,
            ceph_inode_cache_entries: 16384,
            blocking_threads: 64,
            blocking_nice: 0,
            run_inline: true,
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

fn yes() -> bool {
    true
}

fn nobody() -> u32 {
    crate::access::NOBODY
}

/// One `[[export.client]]` table: options for the clients `match` names
/// (an address, a network or "*"); options left out are the export's.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    #[serde(rename = "match")]
    pub match_: String,
    #[serde(default)]
    pub read_only: Option<bool>,
    #[serde(default)]
    pub root_squash: Option<bool>,
    #[serde(default)]
    pub all_squash: Option<bool>,
    #[serde(default)]
    pub anonuid: Option<u32>,
    #[serde(default)]
    pub anongid: Option<u32>,
    #[serde(default)]
    pub secure: Option<bool>,
}

/// Which backend serves an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    #[default]
    Local,
    Cephfs,
}

/// An `[export.cephfs]` table: which CephFS, as whom, and which directory.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CephfsConfig {
    /// The Ceph configuration file (monitors, keyring).
    #[serde(default = "ceph_conf")]
    pub conf: PathBuf,
    /// The cephx client id: "admin" is client.admin.
    #[serde(default = "ceph_client")]
    pub client: String,
    /// The filesystem's name (unset: the cluster's default).
    #[serde(default)]
    pub fs: Option<String>,
    /// The exported directory inside CephFS.
    #[serde(default = "ceph_root")]
    pub root: String,
}

impl Default for CephfsConfig {
    fn default() -> Self {
        CephfsConfig {
            conf: ceph_conf(),
            client: ceph_client(),
            fs: None,
            root: ceph_root(),
        }
    }
}

fn ceph_conf() -> PathBuf {
    PathBuf::from("/etc/ceph/ceph.conf")
}

fn ceph_client() -> String {
    "admin".into()
}

fn ceph_root() -> String {
    "/".into()
}

/// Which backend, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolvedBackend {
    Local,
    Cephfs(CephfsConfig),
}

/// One `[[export]]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportConfig {
    /// The directory; its canonical absolute path is what clients mount.
    pub path: PathBuf,
    #[serde(default)]
    pub read_only: bool,
    /// Clients allowed with the export's options: addresses, networks
    /// (addr/len) or "*". Unset and no `[[export.client]]` tables: the
    /// loopback addresses only (`access::DEFAULT_CLIENTS`).
    #[serde(default)]
    pub clients: Option<Vec<String>>,
    /// Map uid 0 (and gid 0) to anonuid/anongid (exports(5) root_squash).
    #[serde(default = "yes")]
    pub root_squash: bool,
    /// Map every caller to anonuid/anongid.
    #[serde(default)]
    pub all_squash: bool,
    #[serde(default = "nobody")]
    pub anonuid: u32,
    #[serde(default = "nobody")]
    pub anongid: u32,
    /// Require a privileged source port (< 1024) from clients (exports(5)
    /// `secure`, the default as with knfsd).
    #[serde(default = "yes")]
    pub secure: bool,
    /// Per-client options (`[[export.client]]` tables).
    #[serde(default, rename = "client")]
    pub client_rules: Vec<ClientConfig>,
    /// A fixed export id (it is in every handle); default: a hash of the
    /// canonical path, stable across restarts.
    #[serde(default)]
    pub id: Option<u32>,
    #[serde(default)]
    pub handle_mode: HandleMode,
    /// Let clients cross into filesystems mounted below the export.
    #[serde(default)]
    pub cross_mounts: bool,
    /// exports(5) `sync` (default): namespace changes and SETATTR are on
    /// stable storage before the reply (RFC 1813 §4.8). `false` is
    /// exports(5) `async`: faster, and a crash of the server's host can
    /// undo changes clients were told were done.
    #[serde(default = "yes")]
    pub sync: bool,
    /// Where the files live: "local" (`path` is a directory of this host)
    /// or "cephfs" (`path` is only the name clients mount; the files are
    /// in CephFS, see the `[export.cephfs]` table).
    #[serde(default)]
    pub backend: BackendKind,
    /// The CephFS to serve (`backend = "cephfs"`).
    #[serde(default)]
    pub cephfs: Option<CephfsConfig>,
    /// Where an export from an exports(5) file was read ("FILE:LINE").
    /// Such an export may end up with no client (all its names failed to
    /// resolve): nobody can use it, and a reload can add them back.
    #[serde(skip)]
    pub origin: Option<String>,
}

impl ExportConfig {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        ExportConfig {
            path: path.into(),
            read_only: false,
            clients: None,
            root_squash: true,
            all_squash: false,
            anonuid: crate::access::NOBODY,
            anongid: crate::access::NOBODY,
            secure: true,
            client_rules: Vec::new(),
            sync: true,
            id: None,
            handle_mode: HandleMode::Auto,
            cross_mounts: false,
            backend: BackendKind::Local,
            cephfs: None,
            origin: None,
        }
    }

    /// The export's access rules: `clients` (or the loopback default) with
    /// the export's options, then each `[[export.client]]` table.
    pub fn access(&self) -> Result<crate::access::ExportAccess, ConfigError> {
        use crate::access::{ClientOpts, ClientSpec, ExportAccess, Rule, DEFAULT_CLIENTS};
        let at = |m: String| ConfigError(format!("export {}: {m}", self.path.display()));
        let base = ClientOpts {
            read_only: self.read_only,
            root_squash: self.root_squash,
            all_squash: self.all_squash,
            anonuid: self.anonuid,
            anongid: self.anongid,
            secure: self.secure,
        };
        let mut rules: Vec<Rule> = Vec::new();
        let default: Vec<String> = DEFAULT_CLIENTS.iter().map(|s| s.to_string()).collect();
        let listed = match &self.clients {
            Some(c) => c.as_slice(),
            None if self.client_rules.is_empty() => default.as_slice(),
            None => &[],
        };
        let mut push = |spec: ClientSpec, opts: ClientOpts| {
            if rules.iter().any(|r| r.spec == spec) {
                return Err(at(format!("client {spec} is listed twice")));
            }
            rules.push(Rule { spec, opts });
            Ok(())
        };
        for c in listed {
            push(ClientSpec::parse(c).map_err(at)?, base)?;
        }
        for c in &self.client_rules {
            let opts = ClientOpts {
                read_only: c.read_only.unwrap_or(base.read_only),
                root_squash: c.root_squash.unwrap_or(base.root_squash),
                all_squash: c.all_squash.unwrap_or(base.all_squash),
                anonuid: c.anonuid.unwrap_or(base.anonuid),
                anongid: c.anongid.unwrap_or(base.anongid),
                secure: c.secure.unwrap_or(base.secure),
            };
            push(ClientSpec::parse(&c.match_).map_err(at)?, opts)?;
        }
        if rules.is_empty() && self.origin.is_none() {
            return Err(at(
                "clients is empty: no client could use it (list \"*\" to allow any)".into(),
            ));
        }
        Ok(ExportAccess::new(rules))
    }
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default, rename = "export")]
    pub exports: Vec<ExportConfig>,
    /// Problems that did not stop the load (from the exports(5) file:
    /// ignored options, names that did not resolve), for the log.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

impl Config {
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError(e.to_string()))
    }

    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read {}: {e}", path.display())))?;
        Config::from_toml(&text).map_err(|e| ConfigError(format!("{}: {e}", path.display())))
    }

    /// Adds the exports of the `server.exports` file, if set, resolving its
    /// host names and netgroups with `r`; its warnings go to `warnings`.
    /// A path exported both here and by an `[[export]]` table is an error.
    pub fn add_exports_file(
        &mut self,
        r: &dyn crate::exports::Resolver,
    ) -> Result<(), ConfigError> {
        let Some(file) = &self.server.exports else {
            return Ok(());
        };
        let parsed = crate::exports::load(file, r)?;
        for e in &parsed.exports {
            let same = |o: &&ExportConfig| o.path.components().eq(e.path.components());
            if let Some(o) = self.exports.iter().find(same) {
                return err(format!(
                    "export {} is in both {} and {}",
                    e.path.display(),
                    e.origin.as_deref().unwrap_or("the exports file"),
                    o.origin.as_deref().unwrap_or("the configuration"),
                ));
            }
        }
        self.exports.extend(parsed.exports);
        self.warnings.extend(parsed.warnings);
        Ok(())
    }

    /// Check the values that do not need the filesystem.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let s = &self.server;
        if s.listen.is_empty() {
            return err("server.listen: at least one address is needed");
        }
        let mut seen = HashSet::new();
        for a in &s.listen {
            if !seen.insert(a) {
                return err(format!("server.listen: {a} is listed twice"));
            }
        }
        if s.threads == Some(0) {
            return err("server.threads must be at least 1");
        }
        if s.max_threads == 0 {
            return err("server.max_threads must be at least 1");
        }
        if !(1..=MAX_UDP_THREADS).contains(&s.udp_threads) {
            return err(format!(
                "server.udp_threads must be in 1..={MAX_UDP_THREADS}, not {}",
                s.udp_threads
            ));
        }
        if !(-20..=19).contains(&s.blocking_nice) {
            return err(format!(
                "server.blocking_nice must be in -20..=19, not {}",
                s.blocking_nice
            ));
        }
        if s.reply_batch > MAX_REPLY_BATCH {
            return err(format!(
                "server.reply_batch must be at most {MAX_REPLY_BATCH}, not {}",
                s.reply_batch
            ));
        }
        if s.min_threads > s.max_threads {
            return err(format!(
                "server.min_threads ({}) is above server.max_threads ({})",
                s.min_threads, s.max_threads
            ));
        }
        if !(MIN_MAX_IO..=MAX_MAX_IO).contains(&s.max_io) || !s.max_io.is_multiple_of(4) {
            return err(format!(
                "server.max_io must be a multiple of 4 in {MIN_MAX_IO}..={MAX_MAX_IO}, not {}",
                s.max_io
            ));
        }
        if u64::from(s.max_record()) < u64::from(s.max_io) + 4096 {
            return err(format!(
                "server.max_record ({}) must be at least server.max_io + 4096 ({})",
                s.max_record(),
                u64::from(s.max_io) + 4096
            ));
        }
        for (k, v) in [
            ("queue_limit", s.queue_limit),
            (
                "max_waking",
                match s.max_waking {
                    MaxWaking::N(n) => n,
                    MaxWaking::Unlimited => usize::MAX,
                },
            ),
            ("max_connections", s.max_connections),
            ("max_inflight_per_conn", s.max_inflight_per_conn),
            ("max_conn_output", s.max_conn_output),
            ("idle_timeout_secs", s.idle_timeout_secs as usize),
            ("nlm_max_files", s.nlm_max_files),
            ("nlm_max_waiters", s.nlm_max_waiters),
            ("nlm_max_per_client", s.nlm_max_per_client),
            ("nlm_retry_ms", s.nlm_retry_ms as usize),
        ] {
            if v == 0 {
                return err(format!("server.{k} must be at least 1"));
            }
        }
        // Large durations would overflow Instant arithmetic.
        const YEAR: u64 = 365 * 24 * 3600;
        for (k, v) in [
            ("idle_timeout_secs", s.idle_timeout_secs),
            ("thread_idle_secs", s.thread_idle_secs),
            ("shutdown_timeout_secs", s.shutdown_timeout_secs),
            ("drc_expiry_secs", s.drc_expiry_secs),
            ("nlm_grace_secs", s.nlm_grace_secs),
            ("nlm_retry_ms", s.nlm_retry_ms / 1000),
        ] {
            if v > YEAR {
                return err(format!("server.{k} must be at most {YEAR} (a year)"));
            }
        }
        for (k, v) in [
            ("path_cache_entries", s.path_cache_entries),
            ("verdict_cache_entries", s.verdict_cache_entries),
            ("handle_scan_waiters", s.handle_scan_waiters),
            ("object_cache_entries", s.object_cache_entries),
            ("open_file_cache_entries", s.open_file_cache_entries),
            ("cache_fds", s.cache_fds),
            ("max_syncs_in_flight", s.max_syncs_in_flight),
        ] {
            if v == Some(0) {
                return err(format!("server.{k} must be at least 1"));
            }
        }
        if s.ceph_call_timeout_ms == 0 || s.ceph_call_timeout_ms > 600_000 {
            return err("server.ceph_call_timeout_ms must be 1 to 600000");
        }
        if s.ceph_call_threads == 0 || s.ceph_call_threads > 1024 {
            return err("server.ceph_call_threads must be 1 to 1024");
        }
        if s.ceph_inode_cache_entries == 0 {
            return err("server.ceph_inode_cache_entries must be at least 1");
        }
        if s.handle_scan_wait_ms.is_some_and(|v| v > 60_000) {
            return err("server.handle_scan_wait_ms must be at most 60000");
        }
        // No exports is legal: a packaged server starts with none and gets
        // them by a reload (SIGHUP), as knfsd with an empty /etc/exports.
        for e in &self.exports {
            if e.path.as_os_str().is_empty() {
                return err("export.path is empty");
            }
            e.access()?;
        }
        Ok(())
    }
}

fn allowed_cpus() -> usize {
    rnfsd_pool::affinity::allowed_cpus()
        .map(|c| c.len())
        .unwrap_or(1)
}

/// The computed worker layout (see `ServerConfig::layout_for`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub loops: usize,
    pub pinned: bool,
    pub loop_pool_min: usize,
    pub loop_pool_max: usize,
    pub loop_pool_queue: usize,
    pub blocking_max: usize,
    /// Slow calls (disk, stable storage) one connection can have running.
    pub slow_calls_per_conn: usize,
}

/// An export after its path was resolved and its id fixed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedExport {
    pub id: u32,
    /// Canonical absolute path: the MNT argument.
    pub path: PathBuf,
    pub read_only: bool,
    pub handle_mode: HandleMode,
    pub cross_mounts: bool,
    pub sync: bool,
    /// Client list and options.
    pub access: crate::access::ExportAccess,
    pub backend: ResolvedBackend,
}

/// The default export id: FNV-1a over the canonical path. Hand-written so
/// it cannot change with a std or crate upgrade (ids are in every handle
/// clients hold).
pub fn export_id_for(path: &Path) -> u32 {
    use std::os::unix::ffi::OsStrExt;
    let mut h: u32 = 0x811c_9dc5;
    for &b in path.as_os_str().as_bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Canonicalize every export path, check it is a directory, assign ids and
/// reject duplicates.
pub fn resolve_exports(exports: &[ExportConfig]) -> Result<Vec<ResolvedExport>, ConfigError> {
    let mut out: Vec<ResolvedExport> = Vec::with_capacity(exports.len());
    for e in exports {
        let (path, backend) = resolve_backend(e)?;
        if path.to_str().is_none() {
            return err(format!(
                "export {}: path is not valid UTF-8",
                path.display()
            ));
        }
        if path.as_os_str().len() > rnfsd_proto::mount::MNTPATHLEN {
            return err(format!(
                "export {}: path longer than MOUNT's 1024 bytes",
                path.display()
            ));
        }
        let id = e.id.unwrap_or_else(|| export_id_for(&path));
        if let Some(o) = out.iter().find(|o| o.path == path) {
            return err(format!(
                "export {} is listed twice (as {} and {})",
                path.display(),
                o.path.display(),
                e.path.display()
            ));
        }
        if let Some(o) = out.iter().find(|o| o.id == id) {
            return err(format!(
                "exports {} and {} have the same id {id}: set `id` on one of them",
                o.path.display(),
                path.display()
            ));
        }
        out.push(ResolvedExport {
            id,
            path,
            read_only: e.read_only,
            handle_mode: e.handle_mode,
            cross_mounts: e.cross_mounts,
            sync: e.sync,
            access: e.access()?,
            backend,
        });
    }
    Ok(out)
}

/// The path clients mount and the backend: a local export's canonical
/// directory; a CephFS export's name as written (it names no local file).
fn resolve_backend(e: &ExportConfig) -> Result<(PathBuf, ResolvedBackend), ConfigError> {
    let at = |m: &str| ConfigError(format!("export {}: {m}", e.path.display()));
    match e.backend {
        BackendKind::Local => {
            if e.cephfs.is_some() {
                return Err(at("an [export.cephfs] table needs backend = \"cephfs\""));
            }
            let path = std::fs::canonicalize(&e.path).map_err(|x| at(&x.to_string()))?;
            if !path.is_dir() {
                return err(format!("export {}: not a directory", path.display()));
            }
            Ok((path, ResolvedBackend::Local))
        }
        BackendKind::Cephfs => {
            use std::path::Component;
            let clean = e.path.is_absolute()
                && e.path
                    .components()
                    .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
            if !clean {
                return Err(at(
                    "a CephFS export's path must be absolute, with no . or ..",
                ));
            }
            if e.id.is_none() {
                return Err(at("a CephFS export needs an `id`: the same number on every head (it is in every handle)"));
            }
            if e.handle_mode != HandleMode::Auto || e.cross_mounts {
                return Err(at("handle_mode and cross_mounts are for local exports"));
            }
            let c = e.cephfs.clone().unwrap_or_default();
            if !c.root.starts_with('/') {
                return Err(at("cephfs.root must be absolute"));
            }
            Ok((e.path.components().collect(), ResolvedBackend::Cephfs(c)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_defaults() {
        let c = Config::from_toml("").unwrap();
        assert_eq!(c.server, ServerConfig::default());
        assert_eq!(c.server.listen, vec!["127.0.0.1:2049".parse().unwrap()]);
        assert_eq!(c.server.max_io, 1048576);
        assert_eq!(c.server.max_record(), 1048576 + 65536);
        assert!(!c.server.allow_auth_none);
        assert_eq!(c.server.stats, rnfsd_stats::Mode::Percore);
        assert_eq!(
            (c.server.metrics, c.server.admin_socket.as_ref()),
            (None, None)
        );
        assert!(c.exports.is_empty());
        // No exports is legal in a file (added later by a reload).
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn udp_keys() {
        let c = Config::from_toml("").unwrap();
        assert!(c.server.udp);
        assert_eq!(c.server.udp_threads, 1);
        let c = Config::from_toml("[server]\nudp = false\nudp_threads = 2\n").unwrap();
        assert_eq!((c.server.udp, c.server.udp_threads), (false, 2));
        assert_eq!(c.validate(), Ok(()));
        for bad in [0, MAX_UDP_THREADS + 1] {
            let c = Config::from_toml(&format!("[server]\nudp_threads = {bad}\n")).unwrap();
            assert!(c.validate().is_err(), "udp_threads = {bad}");
        }
    }

    #[test]
    fn full_file() {
        let c = Config::from_toml(
            r#"
            [server]
            listen = ["127.0.0.1:2049", "[::1]:2049"]
            threads = 8
            max_record = 2162688
            max_io = 2097152
            state_dir = "/tmp/st"
            log_level = "debug"
            allow_auth_none = true
            path_cache_entries = 1000
            stats = "shared"
            metrics = "127.0.0.1:9100"
            admin_socket = "/run/rnfsd.sock"

            [[export]]
            path = "/srv/a"
            read_only = true
            id = 7
            handle_mode = "path"

            [[export]]
            path = "/srv/b"
            cross_mounts = true
            "#,
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.server.listen.len(), 2);
        assert_eq!(c.server.threads, Some(8));
        assert_eq!(c.server.max_io, 2 << 20);
        assert_eq!(c.server.state_dir, Some(PathBuf::from("/tmp/st")));
        assert_eq!(c.server.path_cache_entries, Some(1000));
        assert_eq!(c.server.stats, rnfsd_stats::Mode::Shared);
        assert_eq!(c.server.metrics, Some("127.0.0.1:9100".parse().unwrap()));
        assert_eq!(
            c.server.admin_socket,
            Some(PathBuf::from("/run/rnfsd.sock"))
        );
        assert_eq!(c.server.min_threads, 2, "unset keys keep defaults");
        assert_eq!(c.exports.len(), 2);
        assert_eq!(c.exports[0].id, Some(7));
        assert!(c.exports[0].read_only);
        assert_eq!(c.exports[0].handle_mode, HandleMode::Path);
        assert_eq!(c.exports[1].handle_mode, HandleMode::Auto);
        assert!(c.exports[1].cross_mounts);
        assert!(!c.exports[1].read_only);
    }

    #[test]
    fn export_access_keys() {
        use crate::access::{ClientSpec, NOBODY};
        let c = Config::from_toml(
            r#"
            [server]
            drc_expiry_secs = 30
            drc_max_bytes = 0

            [[export]]
            path = "/srv/a"

            [[export]]
            path = "/srv/b"
            clients = ["10.0.0.0/8", "::1"]
            read_only = true
            all_squash = true
            anonuid = 1000
            anongid = 1001
            secure = true

            [[export.client]]
            match = "10.1.2.3"
            read_only = false
            root_squash = false

            [[export]]
            path = "/srv/c"
            [[export.client]]
            match = "*"
            "#,
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!((c.server.drc_expiry_secs, c.server.drc_max_bytes), (30, 0));
        let d = ServerConfig::default();
        assert_eq!((d.drc_expiry_secs, d.drc_max_bytes), (120, 32 << 20));
        // Defaults as knfsd's: loopback only, root squashed to nobody,
        // reserved ports only.
        let a = c.exports[0].access().unwrap();
        let lo = a.lookup("127.0.0.5".parse().unwrap()).unwrap();
        assert!(lo.root_squash && !lo.all_squash && lo.secure && !lo.read_only);
        assert_eq!((lo.anonuid, lo.anongid), (NOBODY, NOBODY));
        assert!(a.lookup("::1".parse().unwrap()).is_some());
        assert!(a.lookup("10.0.0.1".parse().unwrap()).is_none());
        let b = c.exports[1].access().unwrap();
        let host = b.lookup("10.1.2.3".parse().unwrap()).unwrap();
        assert!(!host.read_only && !host.root_squash);
        assert!(host.all_squash && host.secure, "inherited");
        assert_eq!(host.anonuid, 1000);
        let net = b.lookup("10.9.9.9".parse().unwrap()).unwrap();
        assert!(net.read_only && net.all_squash && net.secure);
        assert_eq!((net.anonuid, net.anongid), (1000, 1001));
        assert!(b.lookup("127.0.0.1".parse().unwrap()).is_none());
        // Client tables alone replace the loopback default.
        let cc = c.exports[2].access().unwrap();
        assert_eq!(cc.rules().len(), 1);
        assert_eq!(cc.rules()[0].spec, ClientSpec::parse("*").unwrap());

        let bad = |t: &str| {
            let c = Config::from_toml(t).map_err(|e| e.0)?;
            c.validate().map_err(|e| e.0)
        };
        assert!(
            bad("[[export]]\npath = \"/a\"\nclients = [\"example.com\"]")
                .unwrap_err()
                .contains("host names")
        );
        assert!(bad("[[export]]\npath = \"/a\"\nclients = []")
            .unwrap_err()
            .contains("empty"));
        assert!(bad(
            "[[export]]\npath = \"/a\"\nclients = [\"*\"]\n[[export.client]]\nmatch = \"*\""
        )
        .unwrap_err()
        .contains("twice"));
        assert!(
            bad("[[export]]\npath = \"/a\"\n[[export.client]]\nmatch = \"*\"\nrw = true")
                .unwrap_err()
                .contains("unknown")
        );
        assert!(
            bad("[[export]]\npath = \"/a\"\n[[export.client]]\nread_only = true")
                .unwrap_err()
                .contains("match")
        );
    }

    #[test]
    fn unknown_keys_are_errors() {
        for text in [
            "[server]\nlisten_on = [\"127.0.0.1:1\"]",
            "[[export]]\npath = \"/a\"\nreadonly = true",
            "[srever]\n",
            "threads = 3",
        ] {
            let e = Config::from_toml(text).unwrap_err();
            assert!(e.0.contains("unknown"), "{text:?}: {e}");
        }
    }

    #[test]
    fn pool_layout_keys() {
        let c = Config::from_toml("[server]\npools = \"per-loop\"\npin_loops = true").unwrap();
        assert_eq!(c.server.pin_loops, Some(true));
        assert_eq!(
            (c.server.pools, c.server.pin_loops.unwrap_or(false)),
            (PoolLayout::PerLoop, true)
        );
        let d = ServerConfig::default();
        assert_eq!((d.pools, d.pin_loops), (PoolLayout::PerLoop, None));
        assert_eq!(d.event_threads, 0, "one loop per CPU by default");
        assert!(Config::from_toml("[server]\npools = \"per_loop\"").is_err());
        assert_eq!("shared".parse::<PoolLayout>().unwrap(), PoolLayout::Shared);
        assert_eq!(
            "per-loop".parse::<PoolLayout>().unwrap(),
            PoolLayout::PerLoop
        );
        assert!("perloop"
            .parse::<PoolLayout>()
            .unwrap_err()
            .0
            .contains("pools"));
    }

    #[test]
    fn bad_values_are_clear_errors() {
        assert!(Config::from_toml("[server]\nlisten = [\"nonsense\"]").is_err());
        assert!(Config::from_toml("[[export]]\npath = \"/a\"\nhandle_mode = \"fast\"").is_err());
        assert!(
            Config::from_toml("[[export]]\nread_only = true").is_err(),
            "path required"
        );
        assert!(Config::from_toml("[server]\nmax_io = -1").is_err());
        let check = |server: &str| {
            let mut c = Config::from_toml(server).unwrap();
            c.exports.push(ExportConfig::new("/x"));
            c.validate().map_err(|e| e.0)
        };
        assert!(check("").is_ok());
        assert!(check("[server]\nlisten = []")
            .unwrap_err()
            .contains("listen"));
        assert!(
            check("[server]\nlisten = [\"127.0.0.1:1\", \"127.0.0.1:1\"]")
                .unwrap_err()
                .contains("twice")
        );
        assert!(check("[server]\nmax_io = 100")
            .unwrap_err()
            .contains("max_io"));
        assert!(check("[server]\nmax_io = 2097152").is_ok());
        assert!(check("[server]\nmax_record = 8192")
            .unwrap_err()
            .contains("max_record"));
        assert!(check("[server]\nmin_threads = 9\nmax_threads = 4")
            .unwrap_err()
            .contains("min_threads"));
        assert!(check("[server]\nthreads = 0")
            .unwrap_err()
            .contains("threads"));
        assert!(check("[server]\nqueue_limit = 0")
            .unwrap_err()
            .contains("queue_limit"));
    }

    #[test]
    fn export_ids_are_stable_and_exports_resolve() {
        // Fixed values: changing the hash would invalidate clients' handles.
        assert_eq!(export_id_for(Path::new("")), 0x811c_9dc5);
        assert_eq!(export_id_for(Path::new("a")), 0xe40c_292c);
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        let f = d.path().join("f");
        std::fs::create_dir(&a).unwrap();
        std::fs::write(&f, b"").unwrap();
        let canon = std::fs::canonicalize(&a).unwrap();
        let with_dots = d.path().join("a/../a");
        let r = resolve_exports(&[ExportConfig::new(&with_dots)]).unwrap();
        assert_eq!(r[0].path, canon);
        assert_eq!(r[0].id, export_id_for(&canon));
        let again = resolve_exports(&[ExportConfig::new(&a)]).unwrap();
        assert_eq!(again[0].id, r[0].id);

        let mut fixed = ExportConfig::new(&a);
        fixed.id = Some(42);
        assert_eq!(resolve_exports(&[fixed.clone()]).unwrap()[0].id, 42);

        let e = |x: &[ExportConfig]| resolve_exports(x).unwrap_err().0;
        assert!(e(&[ExportConfig::new(&f)]).contains("not a directory"));
        assert!(e(&[ExportConfig::new(d.path().join("missing"))]).contains("missing"));
        assert!(e(&[ExportConfig::new(&a), ExportConfig::new(&with_dots)]).contains("twice"));
        let mut other = ExportConfig::new(d.path());
        other.id = Some(42);
        assert!(e(&[fixed, other]).contains("same id"));
    }

    /// The default layout on 2, 16, 64 and 256 CPUs: a loop per CPU (at
    /// most 64), pinned when there is a loop for every CPU; every loop's pool keeps a share of at least two
    /// workers; and whatever the split, one connection can have 64 slow
    /// calls (uncached READs, COMMITs) running at once, in the blocking pool
    /// all loops share.
    #[test]
    fn layout_holds_from_2_to_256_cpus() {
        let c = ServerConfig::default();
        let want = [
            // cpus, loops, loop pool max, loop queue
            (2, 2, 64, 512),
            (16, 16, 8, 64),
            (64, 64, 2, 16),
            (256, 64, 2, 16),
        ];
        for (cpus, loops, max, queue) in want {
            let l = c.layout_for(cpus);
            assert_eq!(l.loops, loops, "{cpus} CPUs: {l:?}");
            assert_eq!(
                (l.loop_pool_max, l.loop_pool_queue),
                (max, queue),
                "{cpus} CPUs: {l:?}"
            );
            assert_eq!(l.pinned, loops >= cpus, "{cpus} CPUs");
            assert_eq!(l.blocking_max, 64);
            assert_eq!(l.slow_calls_per_conn, 64, "{cpus} CPUs: {l:?}");
        }
        // Without the blocking pool a connection's slow calls are limited by
        // its loop's share: what the shared pool is for.
        let no_blocking = ServerConfig {
            blocking_threads: 0,
            ..ServerConfig::default()
        };
        assert_eq!(no_blocking.layout_for(64).slow_calls_per_conn, 2);
    }

    #[test]
    fn cephfs_exports() {
        let c = Config::from_toml(
            "[[export]]\npath = \"/shared\"\nid = 7\nbackend = \"cephfs\"\n\
             [export.cephfs]\nconf = \"/etc/ceph/x.conf\"\nfs = \"fs1\"\nroot = \"/vol\"\n",
        )
        .unwrap();
        c.validate().unwrap();
        let r = resolve_exports(&c.exports).unwrap();
        // The path names no local directory: kept as written.
        assert_eq!(r[0].path, PathBuf::from("/shared"));
        assert_eq!(r[0].id, 7);
        assert_eq!(
            r[0].backend,
            ResolvedBackend::Cephfs(CephfsConfig {
                conf: "/etc/ceph/x.conf".into(),
                client: "admin".into(),
                fs: Some("fs1".into()),
                root: "/vol".into(),
            })
        );
        // Defaults without a table.
        let c =
            Config::from_toml("[[export]]\npath = \"/s\"\nid = 1\nbackend = \"cephfs\"\n").unwrap();
        let r = resolve_exports(&c.exports).unwrap();
        assert_eq!(
            r[0].backend,
            ResolvedBackend::Cephfs(CephfsConfig::default())
        );
        let fails = |t: &str, want: &str| {
            let c = Config::from_toml(t).unwrap();
            let e = resolve_exports(&c.exports).unwrap_err().to_string();
            assert!(e.contains(want), "{t:?}: {e}");
        };
        fails(
            "[[export]]\npath = \"/s\"\nbackend = \"cephfs\"\n",
            "needs an `id`",
        );
        fails(
            "[[export]]\npath = \"s\"\nid = 1\nbackend = \"cephfs\"\n",
            "absolute",
        );
        fails(
            "[[export]]\npath = \"/a/../b\"\nid = 1\nbackend = \"cephfs\"\n",
            "absolute",
        );
        fails(
            "[[export]]\npath = \"/s\"\nid = 1\nbackend = \"cephfs\"\n[export.cephfs]\nroot = \"vol\"\n",
            "root must be absolute",
        );
        fails(
            "[[export]]\npath = \"/tmp\"\n[export.cephfs]\n",
            "needs backend",
        );
        assert!(Config::from_toml("[[export]]\npath = \"/s\"\nbackend = \"nfs\"\n").is_err());
        assert!(Config::from_toml(
            "[[export]]\npath = \"/s\"\nbackend = \"cephfs\"\n[export.cephfs]\nkeyring = \"x\"\n"
        )
        .is_err());
    }
}
