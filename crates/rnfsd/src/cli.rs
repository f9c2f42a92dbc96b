//! Command line. Options given here override the configuration file.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::{
    Config, ConfigError, ExportConfig, HandleMode, Handoff, MaxWaking, PoolLayout, WakeOrder,
};

#[derive(Debug, Parser)]
#[command(
    name = "rnfsd",
    version,
    about = "A userspace NFSv3 server (NFSv3 + MOUNT v3 over TCP)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Export directories over NFSv3 until SIGINT or SIGTERM.
    #[command(after_long_help = CONFIG_HELP)]
    Serve(Box<ServeArgs>),
    /// Load and validate a configuration file (and the export paths), then
    /// exit: 0 when it is usable.
    CheckConfig {
        /// The TOML configuration file.
        file: PathBuf,
    },
    /// Show a running server's statistics (through its admin socket):
    /// an nfsstat-like report, --raw lines, or a --watch live view.
    Stats(crate::stats_cmd::StatsArgs),
    /// List what a running server exports, with the effective options of
    /// each client, as `exportfs -v` does (through its admin socket).
    Exportfs(crate::stats_cmd::AdminArgs),
    /// Write man pages (DIR/man) and shell completions (DIR/completions),
    /// for packaging.
    #[command(hide = true)]
    GenerateDocs {
        /// Output directory.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

/// The configuration file's keys, shown by `rnfsd serve --help`.
const CONFIG_HELP: &str = "\
CONFIGURATION FILE (--config, TOML; unknown keys are errors; defaults shown):
  [server]
  listen = [\"127.0.0.1:2049\"]   NFS + MOUNT addresses
  portmap = false                built-in port mapper on port 111
  register_rpcbind = true        register with a running system rpcbind
  udp = true                     serve the port mapper and the lock manager
                                 over UDP too
  udp_threads = 1                threads per UDP address (1..=16)
  nlm = true                     lock manager (NLM 1/3/4) and status monitor
                                 (NSM) on the NFS addresses, TCP and UDP
  nlm_grace_secs = 90            after a restart: only reclaims, this long
  nlm_max_files = 4096           open files held for lock owners
  nlm_max_waiters = 1024         blocked lock requests at once
  nlm_max_per_client = 1024      files and blocked requests of one client
  nlm_retry_ms = 100             blocked requests retried this often
  threads = (unset)              fixed worker count; else adaptive:
  min_threads = 2, max_threads = 128, thread_idle_secs = 30
  queue_limit = 1024             requests waiting for a worker
  max_waking = 1                 workers woken but not yet running
  wake_order = \"lifo\"            experiment switch: lifo | fifo
  handoff = \"direct\"             experiment switch: direct | double
  max_io = 1048576               READ/WRITE/READDIR transfer size
  max_record = (max_io + 65536)  largest RPC record
  max_connections = 1024
  max_connections_per_client = 0 per client address; 0 = no limit
  max_inflight_per_conn = 64
  max_conn_output = 4194304      queued reply bytes per connection
  max_buffered_bytes = 268435456 records + queued replies, all connections;
                                 past it only idle connections are read
  idle_timeout_secs = 360        close idle connections
  event_threads = 0              event loops; 0 = one per CPU
  pools = \"per-loop\"             worker pools: per-loop (one per loop) | shared
  pin_loops = (auto)             pin each loop and its pool to a CPU; auto =
                                 when there is a loop for every CPU
  shutdown_timeout_secs = 10     reply flushing at shutdown
  cache_fds = (from RLIMIT_NOFILE) descriptors held by all caches of all
                                 exports; RLIMIT_NOFILE is raised to its hard
                                 limit at start and must leave room for
                                 connections and per-call descriptors
  object_cache_entries = 8192    per export: handle -> object (1 fd each)
  open_file_cache_entries = 4096 per export: open files (1 fd each)
  path_cache_entries = 1000000   per export: inode -> location (no fds,
                                 about 150 bytes each)
  verdict_cache_entries = 262144 per export: objects lately proven inside
                                 the export (no fds, about 50 bytes each)
  handle_scan_limit = 1000000    entries one walk for lost handles visits
  handle_scan_waiters = 8        calls waiting for that walk at once
  handle_scan_wait_ms = 1000     then JUKEBOX (the client retries)
  act_as_caller = (root: true)   run calls as the caller's uid/gids
  max_syncs_in_flight = 64       per export: fsyncs at once (group commit)
  journal_commit_threads = 1     per export: threads committing a sync
                                 export's journal (ext4, XFS; 1 to 8)
  owed_writeback_bytes = 1048576 per export: a file's unsynced bytes up to
                                 which that thread waits for a COMMIT's
                                 writeback (more: the call's own thread)
  write_behind_bytes = 4194304   per export: UNSTABLE bytes of a file before
                                 its writeback starts (by the event loop that
                                 wrote them, or a background thread; 0: off)
  flush_delay_ms = 5000          per export: closed uncommitted writers flushed
                                 in the background after this (COMMIT: at once)
  ceph_call_timeout_ms = 5000    CephFS: a libcephfs call's limit, then JUKEBOX
  ceph_call_threads = 32         CephFS, per export: libcephfs calls at once
  ceph_inode_cache_entries = 16384  CephFS, per export: cached inodes
  blocking_threads = 64          pool for calls that wait for stable storage
  blocking_nice = 0              its threads' nice value (> 0: loops first)
  sync_sched_batch = true        its and the journal commit threads' wakeups
                                 do not preempt the loops (SCHED_BATCH)
  blocking_lazy_wake_us = 2000   a call queued alone there waits this long at
                                 most for the running worker (0: wake one)
  run_inline = true              answer from-memory calls on the loop thread
  inline_misses = true           ... and open handle cache misses there too
  inline_write_max = 65536       ... and UNSTABLE WRITEs up to this size (0: none)
  inline_write_alone_max = 1048576  ... and up to this size when nothing else
                                 of that loop is ready (0: none)
  inline_large_writes_per_turn = 4  ... or this many a turn while others are
                                 ready (0: only when nothing else is)
  inline_changes = true          ... and `async` exports' namespace changes
  reply_batch = 16               a worker's replies of one connection sent together
  splice_pipes = 32              pipes for READ by splice (2 fds each; 0:
                                 READ data is copied)
  state_dir = (see --state-dir)  log_level = \"info\"
  allow_auth_none = false
  stats = \"percore\"              RPC counters: percore | shared | off
  drc_expiry_secs = 120          duplicate reply cache: replay window
  drc_max_bytes = 33554432       duplicate reply cache memory (0: off)
  admin_socket = STATE_DIR/admin.sock   `rnfsd stats` reads it (0600)
  metrics = (unset)              Prometheus GET /metrics on this ADDR:PORT
  exports = (unset)              a knfsd exports(5) file (/etc/exports) whose
                                 exports are added, with exports(5) defaults
                                 (ro, sync, root_squash, secure); --exports
                                 overrides it; see docs/exports.md

  [[export]]                     one table per export
  path = \"/srv/a\"                required; clients mount its canonical path
  read_only = false
  id = (hash of the path)        fixed export id (it is in every handle)
  handle_mode = \"auto\"           auto | kernel | path
  cross_mounts = false
  sync = true                    exports(5) sync; false = async (namespace
                                 changes and SETATTR answered before synced)
  clients = [\"127.0.0.0/8\", \"::1\"]  addresses, networks (ADDR/LEN) or \"*\"
  root_squash = true, all_squash = false, anonuid = 65534, anongid = 65534
  secure = true                  clients must use a port < 1024 (exports(5)
                                 secure); false = insecure
  [[export.client]]              per-client options: match = \"10.0.0.0/8\",
                                 then any of the keys above (default: export's)
  backend = \"local\"              local | cephfs (path is then only the name
                                 clients mount; id required, the same on
                                 every head; see docs/scale-out.md)
  [export.cephfs]                conf = \"/etc/ceph/ceph.conf\", client =
                                 \"admin\", fs = (default), root = \"/\"
  SIGHUP re-reads the file (and the exports file, resolving its names
  again): exports added, removed or changed go live, connections kept;
  [server] keys need a restart. `rnfsd exportfs` lists what is exported.";

#[derive(Debug, Clone, Default, Args)]
pub struct ServeArgs {
    /// Directory to export. Clients mount its canonical absolute path
    /// (`mount -t nfs -o vers=3,tcp HOST:/that/path /mnt`). May be combined
    /// with [[export]] tables of --config.
    pub dir: Option<PathBuf>,

    /// TCP address NFS and MOUNT listen on; repeat for several. Port 0
    /// picks a free port (reported on the start line and in --port-file).
    /// Replaces server.listen. [default: 127.0.0.1:2049]
    #[arg(long = "listen", value_name = "ADDR:PORT")]
    pub listen: Vec<SocketAddr>,

    /// TOML configuration file ([server] table and [[export]] tables; see
    /// the rnfsd::config documentation). Unknown keys are errors.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// A knfsd exports(5) file (such as /etc/exports) to serve as well,
    /// with knfsd's defaults (read-only, root_squash, secure); replaces
    /// server.exports. Host names and netgroups are resolved at start and
    /// on SIGHUP. See docs/exports.md.
    #[arg(long, value_name = "FILE")]
    pub exports: Option<PathBuf>,

    /// Serve a built-in port mapper on port 111 of each listen address
    /// instead of registering with the system rpcbind.
    #[arg(long)]
    pub portmap: bool,

    /// Do not register with a running system rpcbind.
    #[arg(long)]
    pub no_rpcbind: bool,

    /// Log filter: error, warn, info, debug, trace, or a tracing directive
    /// such as "rnfsd=debug". RUST_LOG overrides it. [default: info]
    #[arg(long, value_name = "LEVEL")]
    pub log_level: Option<String>,

    /// A fixed number of worker threads (default: adaptive between
    /// --min-threads and --max-threads).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,

    /// Adaptive pool: threads kept even when idle. [default: 2]
    #[arg(long, value_name = "N")]
    pub min_threads: Option<usize>,

    /// Adaptive pool: most worker threads. [default: 128]
    #[arg(long, value_name = "N")]
    pub max_threads: Option<usize>,

    /// Requests queued for workers before connections stop being read.
    /// [default: 1024]
    #[arg(long, value_name = "N")]
    pub queue_limit: Option<usize>,

    /// Workers woken but not yet running at once, or "unlimited"
    /// (experiment). [default: 1]
    #[arg(long, value_name = "N|unlimited")]
    pub max_waking: Option<MaxWaking>,

    /// Experiment switch: wake the most recently idle worker (lifo) or the
    /// longest idle (fifo). [default: lifo]
    #[arg(long, value_name = "lifo|fifo")]
    pub wake_order: Option<WakeOrder>,

    /// Experiment switch: the woken worker runs the request (direct) or
    /// hands it on with a second wakeup (double). [default: direct]
    #[arg(long, value_name = "direct|double")]
    pub handoff: Option<Handoff>,

    /// Event-loop threads reading sockets; 0 = one per CPU. [default: 0]
    #[arg(long, value_name = "N")]
    pub event_threads: Option<usize>,

    /// Worker pools: one per event loop serving the connections that loop
    /// reads (thread counts divided among them), or one shared by all loops.
    /// [default: per-loop]
    #[arg(long, value_name = "shared|per-loop")]
    pub pools: Option<PoolLayout>,

    /// Pin each event loop, and with per-loop pools its workers, to one CPU.
    /// [default: when there is a loop for every CPU]
    #[arg(long, conflicts_with = "no_pin_loops")]
    pub pin_loops: bool,

    /// Never pin event loops or workers to CPUs.
    #[arg(long)]
    pub no_pin_loops: bool,

    /// Largest READ/WRITE/READDIR transfer in bytes. [default: 1048576]
    #[arg(long, value_name = "BYTES")]
    pub max_io: Option<u32>,

    /// Largest RPC record in bytes. [default: max-io + 65536]
    #[arg(long, value_name = "BYTES")]
    pub max_record: Option<u32>,

    /// Most open client connections. [default: 1024]
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,

    /// Most open connections from one client address; 0 = no limit.
    /// [default: 0]
    #[arg(long, value_name = "N")]
    pub max_connections_per_client: Option<usize>,

    /// Requests of one connection processed at once. [default: 64]
    #[arg(long, value_name = "N")]
    pub max_inflight_per_conn: Option<usize>,

    /// Bytes held for request records and queued replies across all
    /// connections (0: no bound). [default: 268435456]
    #[arg(long, value_name = "BYTES")]
    pub max_buffered_bytes: Option<usize>,

    /// Descriptors all caches of all exports may hold. [default: half of
    /// what RLIMIT_NOFILE leaves after connections and per-call use]
    #[arg(long, value_name = "N")]
    pub cache_fds: Option<usize>,

    /// Per export: handle -> object cache entries (one descriptor each).
    /// [default: 8192]
    #[arg(long, value_name = "N")]
    pub object_cache_entries: Option<usize>,

    /// Per export: open-file cache entries (one descriptor each).
    /// [default: 4096]
    #[arg(long, value_name = "N")]
    pub open_file_cache_entries: Option<usize>,

    /// Per export: inode -> location map entries (no descriptors; about
    /// 150 bytes each). [default: 1000000]
    #[arg(long, value_name = "N")]
    pub path_cache_entries: Option<usize>,

    /// Per export: objects lately proven inside the export, so one opened
    /// by handle again is not proven again within the proof's lifetime (no
    /// descriptors; about 50 bytes each). [default: 262144]
    #[arg(long, value_name = "N")]
    pub verdict_cache_entries: Option<usize>,

    /// Per export: syncs (fsync) running at once; more requests queue or
    /// share one (group commit). [default: 64]
    #[arg(long, value_name = "N")]
    pub max_syncs_in_flight: Option<usize>,

    /// Per export: threads committing the journal of a `sync` export on
    /// ext4 or XFS for calls whose replies wait for it (1 to 8). [default: 1]
    #[arg(long, value_name = "N")]
    pub journal_commit_threads: Option<usize>,

    /// Per export: milliseconds after a written file was closed with
    /// uncommitted data before its filesystem is flushed in the background
    /// (a COMMIT flushes at once). [default: 5000]
    #[arg(long, value_name = "MS")]
    pub flush_delay_ms: Option<u64>,

    /// Per export: UNSTABLE bytes one open file gathers before their
    /// writeback is started, by the event loop that ran the WRITE once its
    /// reply is sent, or by a background thread (0: a COMMIT flushes
    /// everything). [default: 4194304]
    #[arg(long, value_name = "BYTES")]
    pub write_behind_bytes: Option<u64>,

    /// Per export: the most unsynced bytes of one file whose writeback a
    /// COMMIT or stable WRITE leaves to the journal commit thread to wait
    /// for; more are waited for by the call's own thread (0: always).
    /// [default: 1048576]
    #[arg(long, value_name = "BYTES")]
    pub owed_writeback_bytes: Option<u64>,

    /// Do not answer calls on the event loop thread (run to completion);
    /// every call goes to a worker. For comparison.
    #[arg(long)]
    pub no_run_inline: bool,

    /// Send every handle cache miss to a pool thread instead of opening it
    /// on the loop (`inline_misses = false`). For comparison.
    #[arg(long)]
    pub no_inline_misses: bool,

    /// Largest UNSTABLE WRITE written on the event loop thread, bytes
    /// (0: every WRITE goes to a pool thread). [default: 65536]
    #[arg(long, value_name = "BYTES")]
    pub inline_write_max: Option<u32>,

    /// Send every WRITE to a pool thread (`inline_write_max = 0`). For
    /// comparison.
    #[arg(long, conflicts_with = "inline_write_max")]
    pub no_inline_writes: bool,

    /// Send every namespace change and SETATTR of an `async` export to a
    /// pool thread (`inline_changes = false`). For comparison.
    #[arg(long)]
    pub no_inline_changes: bool,

    /// Run the blocking pool's and the journal commit threads under
    /// SCHED_OTHER, so their wakeups preempt the event loops
    /// (`sync_sched_batch = false`). For comparison.
    #[arg(long)]
    pub no_sync_sched_batch: bool,

    /// Microseconds a call left to the blocking pool's running worker may
    /// wait for it before a timer wakes another (0: at once; at most
    /// 100000).
    /// [default: 2000]
    #[arg(long, value_name = "US")]
    pub blocking_lazy_wake_us: Option<u64>,

    /// Largest UNSTABLE WRITE written on the event loop when nothing else
    /// of that loop is ready, bytes (0: none above `inline_write_max`;
    /// `inline_write_max = 0` turns this off too).
    /// [default: 1048576]
    #[arg(long, value_name = "BYTES")]
    pub inline_write_alone_max: Option<u32>,

    /// Of those, how many a loop writes itself in one turn while other
    /// calls of it are ready (0: only when nothing else is; at most 64).
    /// [default: 4]
    #[arg(long, value_name = "N")]
    pub inline_large_writes_per_turn: Option<usize>,

    /// Replies a worker holds back while it runs the next short call of
    /// the same connection (0 or 1 = each alone). [default: 16]
    #[arg(long, value_name = "N")]
    pub reply_batch: Option<usize>,

    /// Pipes for READ replies sent by splice (no copy of the data); 0 =
    /// copy. [default: 32]
    #[arg(long, value_name = "N")]
    pub splice_pipes: Option<usize>,

    /// Threads of the pool for calls that wait for stable storage (COMMIT,
    /// stable WRITE, namespace changes on sync exports); 0 = the ordinary
    /// pools. [default: 64]
    #[arg(long, value_name = "N")]
    pub blocking_threads: Option<usize>,

    /// Nice value of the blocking pool's threads (-20 to 19; 0 = as
    /// started): above 0 the event loops' calls go first when CPUs are
    /// short. [default: 0]
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub blocking_nice: Option<i32>,

    /// Directory for the persistent handle key. [default: /var/lib/rnfsd as
    /// root, else $XDG_STATE_HOME/rnfsd or ~/.local/state/rnfsd]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Write the bound NFS port (first listen address) to this file once
    /// the server is ready, for test harnesses.
    #[arg(long, value_name = "PATH")]
    pub port_file: Option<PathBuf>,

    /// Accept AUTH_NONE credentials (as nobody) for every procedure.
    #[arg(long)]
    pub allow_auth_none: bool,

    /// Serve Prometheus metrics (HTTP GET /metrics) on this address.
    /// Off unless given.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<SocketAddr>,

    /// How RPC statistics are kept: percore (default), shared (one shared
    /// counter per procedure; experiment) or off.
    #[arg(long, value_name = "percore|shared|off")]
    pub stats: Option<rnfsd_stats::Mode>,

    /// DIR only: refuse every change.
    #[arg(long, requires = "dir")]
    pub read_only: bool,

    /// DIR only: a fixed export id instead of the hash of its path.
    #[arg(long, value_name = "ID", requires = "dir")]
    pub export_id: Option<u32>,

    /// DIR only: file handle kind: auto, kernel or path. [default: auto]
    #[arg(long, value_name = "MODE", requires = "dir")]
    pub handle_mode: Option<HandleMode>,

    /// DIR only: let clients cross into filesystems mounted below DIR.
    #[arg(long, requires = "dir")]
    pub cross_mounts: bool,

    /// DIR only: exports(5) `async`: reply to namespace changes and SETATTR
    /// before they reach stable storage (faster; a crash of this host can
    /// undo changes clients were told were done). Default: `sync`.
    #[arg(long = "async", requires = "dir")]
    pub async_: bool,

    /// DIR only: a client allowed to use it: an address, a network
    /// (ADDR/LEN) or "*"; repeat for several. [default: 127.0.0.0/8 and ::1]
    #[arg(long = "client", value_name = "SPEC", requires = "dir")]
    pub clients: Vec<String>,

    /// DIR only: let uid 0 act as root (default: root is mapped to the
    /// anonymous user, as knfsd's root_squash).
    #[arg(long, requires = "dir")]
    pub no_root_squash: bool,

    /// DIR only: map every caller to the anonymous user.
    #[arg(long, requires = "dir")]
    pub all_squash: bool,

    /// DIR only: the anonymous uid. [default: 65534]
    #[arg(long, value_name = "UID", requires = "dir")]
    pub anonuid: Option<u32>,

    /// DIR only: the anonymous gid. [default: 65534]
    #[arg(long, value_name = "GID", requires = "dir")]
    pub anongid: Option<u32>,

    /// DIR only: accept only clients calling from a privileged port (< 1024),
    /// the default (exports(5) secure).
    #[arg(long, requires = "dir", conflicts_with = "insecure")]
    pub secure: bool,

    /// DIR only: accept clients calling from any port (exports(5) insecure):
    /// any local user of a client host can then claim any uid.
    #[arg(long, requires = "dir")]
    pub insecure: bool,
}

impl ServeArgs {
    /// The configuration file (or defaults) with these options applied.
    pub fn to_config(&self) -> Result<Config, ConfigError> {
        let mut c = match &self.config {
            Some(p) => Config::load(p)?,
            None => Config::default(),
        };
        let s = &mut c.server;
        if !self.listen.is_empty() {
            s.listen = self.listen.clone();
        }
        if self.portmap {
            s.portmap = true;
        }
        if self.no_rpcbind {
            s.register_rpcbind = false;
        }
        if self.allow_auth_none {
            s.allow_auth_none = true;
        }
        if self.no_pin_loops {
            s.pin_loops = Some(false);
        }
        if self.pin_loops {
            s.pin_loops = Some(true);
        }
        macro_rules! over {
            ($($f:ident),*) => { $( if let Some(v) = self.$f { s.$f = v; } )* };
        }
        over!(
            min_threads,
            max_threads,
            queue_limit,
            max_io,
            max_connections,
            max_connections_per_client,
            max_inflight_per_conn,
            max_buffered_bytes,
            max_waking,
            wake_order,
            handoff,
            event_threads,
            pools
        );
        if self.metrics.is_some() {
            s.metrics = self.metrics;
        }
        if let Some(m) = self.stats {
            s.stats = m;
        }
        if self.threads.is_some() {
            s.threads = self.threads;
        }
        if self.max_record.is_some() {
            s.max_record = self.max_record;
        }
        if let Some(n) = self.blocking_threads {
            s.blocking_threads = n;
        }
        if let Some(n) = self.blocking_nice {
            s.blocking_nice = n;
        }
        if let Some(n) = self.splice_pipes {
            s.splice_pipes = n;
        }
        if let Some(n) = self.reply_batch {
            s.reply_batch = n;
        }
        if self.no_run_inline {
            s.run_inline = false;
        }
        if self.no_inline_misses {
            s.inline_misses = false;
        }
        if let Some(n) = self.inline_write_max {
            s.inline_write_max = n;
        }
        if let Some(n) = self.inline_write_alone_max {
            s.inline_write_alone_max = n;
        }
        if let Some(n) = self.inline_large_writes_per_turn {
            s.inline_large_writes_per_turn = n;
        }
        if self.no_inline_changes {
            s.inline_changes = false;
        }
        if self.no_sync_sched_batch {
            s.sync_sched_batch = false;
        }
        if let Some(n) = self.blocking_lazy_wake_us {
            s.blocking_lazy_wake_us = n;
        }
        if self.no_inline_writes {
            s.inline_write_max = 0;
            s.inline_write_alone_max = 0;
        }
        if self.flush_delay_ms.is_some() {
            s.flush_delay_ms = self.flush_delay_ms;
        }
        if self.write_behind_bytes.is_some() {
            s.write_behind_bytes = self.write_behind_bytes;
        }
        if self.owed_writeback_bytes.is_some() {
            s.owed_writeback_bytes = self.owed_writeback_bytes;
        }
        for (dst, src) in [
            (&mut s.cache_fds, self.cache_fds),
            (&mut s.object_cache_entries, self.object_cache_entries),
            (&mut s.open_file_cache_entries, self.open_file_cache_entries),
            (&mut s.path_cache_entries, self.path_cache_entries),
            (&mut s.verdict_cache_entries, self.verdict_cache_entries),
            (&mut s.max_syncs_in_flight, self.max_syncs_in_flight),
            (&mut s.journal_commit_threads, self.journal_commit_threads),
        ] {
            if src.is_some() {
                *dst = src;
            }
        }
        if self.state_dir.is_some() {
            s.state_dir = self.state_dir.clone();
        }
        if self.log_level.is_some() {
            s.log_level = self.log_level.clone();
        }
        if self.exports.is_some() {
            s.exports = self.exports.clone();
        }
        if let Some(d) = &self.dir {
            c.exports.push(ExportConfig {
                read_only: self.read_only,
                clients: (!self.clients.is_empty()).then(|| self.clients.clone()),
                root_squash: !self.no_root_squash,
                all_squash: self.all_squash,
                anonuid: self.anonuid.unwrap_or(crate::access::NOBODY),
                anongid: self.anongid.unwrap_or(crate::access::NOBODY),
                secure: !self.insecure,
                id: self.export_id,
                handle_mode: self.handle_mode.unwrap_or_default(),
                cross_mounts: self.cross_mounts,
                sync: !self.async_,
                ..ExportConfig::new(d.clone())
            });
        }
        c.add_exports_file(&crate::exports::SystemResolver)?;
        // A file may export nothing yet (a reload adds exports); a command
        // line with nothing to export is a mistake.
        if c.exports.is_empty() && self.config.is_none() && self.exports.is_none() {
            return Err(ConfigError(
                "nothing to export: give a directory, --config FILE or --exports FILE".into(),
            ));
        }
        c.validate()?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::path::Path;

    fn parse(args: &[&str]) -> Result<ServeArgs, clap::Error> {
        let mut v = vec!["rnfsd", "serve"];
        v.extend_from_slice(args);
        match Cli::try_parse_from(v)?.command {
            Command::Serve(s) => Ok(*s),
            c => panic!("unexpected {c:?}"),
        }
    }

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn dir_alone_exports_on_loopback_2049() {
        let c = parse(&["/srv/x"]).unwrap().to_config().unwrap();
        assert_eq!(c.server.listen, vec!["127.0.0.1:2049".parse().unwrap()]);
        assert_eq!(c.exports, vec![ExportConfig::new("/srv/x")]);
        assert!(!c.server.portmap);
    }

    #[test]
    fn options_override() {
        let a = parse(&[
            "/srv/x",
            "--listen",
            "127.0.0.1:0",
            "--listen",
            "[::1]:0",
            "--read-only",
            "--handle-mode",
            "path",
            "--export-id",
            "9",
            "--threads",
            "4",
            "--max-io",
            "65536",
            "--portmap",
            "--allow-auth-none",
            "--metrics",
            "127.0.0.1:9100",
            "--stats",
            "shared",
        ])
        .unwrap();
        let c = a.to_config().unwrap();
        assert_eq!(c.server.listen.len(), 2);
        assert_eq!(c.server.threads, Some(4));
        assert_eq!(c.server.max_io, 65536);
        assert_eq!(c.server.max_record(), 65536 + 65536);
        assert!(c.server.portmap && c.server.allow_auth_none);
        assert_eq!(c.server.metrics, Some("127.0.0.1:9100".parse().unwrap()));
        assert_eq!(c.server.stats, rnfsd_stats::Mode::Shared);
        assert!(c.exports[0].read_only);
        assert!(c.exports[0].root_squash && c.exports[0].secure);
        assert_eq!(c.exports[0].clients, None);
        assert_eq!(c.exports[0].id, Some(9));
        assert_eq!(c.exports[0].handle_mode, HandleMode::Path);
    }

    #[test]
    fn access_flags() {
        let c = parse(&[
            "/srv/x",
            "--client",
            "10.0.0.0/8",
            "--client",
            "::1",
            "--no-root-squash",
            "--all-squash",
            "--anonuid",
            "7",
            "--anongid",
            "8",
            "--secure",
        ])
        .unwrap()
        .to_config()
        .unwrap();
        let e = &c.exports[0];
        assert_eq!(e.clients, Some(vec!["10.0.0.0/8".into(), "::1".into()]));
        assert!(!e.root_squash && e.all_squash && e.secure);
        assert_eq!((e.anonuid, e.anongid), (7, 8));
        let c = parse(&["/srv/x", "--insecure"])
            .unwrap()
            .to_config()
            .unwrap();
        assert!(!c.exports[0].secure);
        assert!(parse(&["/x", "--secure", "--insecure"]).is_err());
        assert!(parse(&["/x", "--client", "nonsense"])
            .unwrap()
            .to_config()
            .is_err());
        assert!(parse(&["--no-root-squash"]).is_err(), "needs DIR");
    }

    #[test]
    fn pool_layout_flags() {
        let c = parse(&["/srv/x"]).unwrap().to_config().unwrap();
        assert_eq!(
            (c.server.pools, c.server.pin_loops, c.server.event_threads),
            (PoolLayout::PerLoop, None, 0)
        );
        let a = parse(&[
            "/srv/x",
            "--pools",
            "shared",
            "--pin-loops",
            "--event-threads",
            "2",
        ])
        .unwrap();
        let c = a.to_config().unwrap();
        assert_eq!(
            (c.server.pools, c.server.pin_loops, c.server.event_threads),
            (PoolLayout::Shared, Some(true), 2)
        );
        assert!(parse(&["/srv/x", "--pools", "perloop"]).is_err());
    }

    #[test]
    fn config_file_and_dir_combine() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("c.toml");
        std::fs::write(
            &f,
            "[server]\nlisten = [\"127.0.0.1:3049\"]\nmax_threads = 9\n[[export]]\npath = \"/a\"\n",
        )
        .unwrap();
        let f = f.to_str().unwrap();
        let c = parse(&["--config", f, "/b"]).unwrap().to_config().unwrap();
        assert_eq!(c.exports.len(), 2);
        assert_eq!(c.server.max_threads, 9);
        assert_eq!(c.server.listen, vec!["127.0.0.1:3049".parse().unwrap()]);
        let c = parse(&["--config", f, "--listen", "127.0.0.1:1"])
            .unwrap()
            .to_config()
            .unwrap();
        assert_eq!(c.server.listen, vec!["127.0.0.1:1".parse().unwrap()]);
    }

    #[test]
    fn exports_file() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("exports");
        std::fs::write(&f, "# knfsd\n/e 10.0.0.1(rw,wdelay)\n").unwrap();
        let toml = d.path().join("c.toml");
        std::fs::write(
            &toml,
            "[server]\nexports = \"/nonexistent/exports\"\n[[export]]\npath = \"/a\"\n",
        )
        .unwrap();
        let (f, toml) = (f.to_str().unwrap(), toml.to_str().unwrap());
        // --exports replaces server.exports.
        let c = parse(&["--config", toml, "--exports", f, "/b"])
            .unwrap()
            .to_config()
            .unwrap();
        let paths: Vec<_> = c.exports.iter().map(|e| e.path.to_str().unwrap()).collect();
        assert_eq!(paths, ["/a", "/b", "/e"]);
        assert_eq!(c.server.exports.as_deref(), Some(Path::new(f)));
        let e = &c.exports[2];
        assert!(e.read_only, "exports(5) default: ro");
        let o = e.access().unwrap();
        assert!(!o.lookup("10.0.0.1".parse().unwrap()).unwrap().read_only);
        assert!(o.lookup("127.0.0.1".parse().unwrap()).is_none());
        assert_eq!(c.warnings.len(), 1);
        assert!(c.warnings[0].starts_with(&format!("{f}:2: option \"wdelay\" ignored")));
        // A missing exports file is an error naming it.
        let e = parse(&["--config", toml]).unwrap().to_config().unwrap_err();
        assert!(e.0.contains("/nonexistent/exports"), "{e}");
        // A path in both the TOML file (or DIR) and the exports file.
        std::fs::write(f, "/b 10.0.0.1\n").unwrap();
        let e = parse(&["--exports", f, "/b"])
            .unwrap()
            .to_config()
            .unwrap_err();
        assert!(e.0.contains("/b is in both") && e.0.contains(":1"), "{e}");
        // The exports file alone is enough to serve.
        let c = parse(&["--exports", f]).unwrap().to_config().unwrap();
        assert_eq!(c.exports.len(), 1);
    }

    #[test]
    fn stats_subcommand() {
        let p = |v: &[&str]| Cli::try_parse_from(v.iter().copied()).map(|c| c.command);
        match p(&[
            "rnfsd",
            "stats",
            "--state-dir",
            "/s",
            "--watch",
            "--count",
            "3",
        ]) {
            Ok(Command::Stats(a)) => {
                assert_eq!(a.socket_path(), PathBuf::from("/s/admin.sock"));
                assert_eq!((a.watch, a.count), (true, Some(3)));
            }
            other => panic!("{other:?}"),
        }
        match p(&["rnfsd", "stats", "--socket", "/x.sock", "--raw"]) {
            Ok(Command::Stats(a)) => {
                assert!(a.raw && a.socket_path() == std::path::Path::new("/x.sock"))
            }
            other => panic!("{other:?}"),
        }
        assert!(
            p(&["rnfsd", "stats", "--count", "3"]).is_err(),
            "--count needs --watch"
        );
        assert!(p(&["rnfsd", "stats", "--raw", "--watch"]).is_err());
        assert!(p(&["rnfsd", "stats", "--socket", "/a", "--state-dir", "/b"]).is_err());
    }

    #[test]
    fn errors() {
        assert!(parse(&["--read-only"]).is_err(), "--read-only needs DIR");
        assert!(parse(&["/x", "--listen", "nonsense"]).is_err());
        assert!(parse(&["/x", "--handle-mode", "fast"]).is_err());
        assert!(parse(&["/x", "--bogus"]).is_err());
        assert!(parse(&["/x", "--stats", "fast"]).is_err());
        let e = parse(&[]).unwrap().to_config().unwrap_err();
        assert!(e.0.contains("nothing to export"));
        let e = parse(&["--config", "/nonexistent/rnfsd.toml"])
            .unwrap()
            .to_config()
            .unwrap_err();
        assert!(e.0.contains("/nonexistent/rnfsd.toml"));
    }
}
