//! The `[server]` table: every bound and switch of the server, with its
//! default, its summary for `rnfsd serve --help` and the flags that set it,
//! each written once in the `server_keys!` table below (`keys.rs` says
//! what is made from it).

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

use super::keys::server_keys;
use super::{err, ConfigError};
use crate::limits::MAX_WRITE_OVERHEAD;

/// Experiment switch: which idle worker is woken first (see rnfsd-pool).
/// `lifo` (the most recently idle, cache-hot worker) is the design.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WakeOrder {
    Lifo,
    Fifo,
}

/// When the last worker to go idle spins `worker_spin_us` for the next
/// request (see rnfsd-pool `SpinWhen`): `alone` only while requests come
/// one at a time (none found another queued or a worker busy), `always`,
/// or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkerSpin {
    Off,
    Alone,
    Always,
}

/// Experiment switch: `direct` (the woken worker runs the request) is the
/// design; `double` is the naive two-wakeup hand-off, kept for comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Handoff {
    Direct,
    Double,
}

/// NFSv4 owner strings (RFC 8881 §5.9): `numeric` ids (what the Linux
/// client uses under AUTH_SYS) or `names`, "user@domain" from NSS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Idmap {
    Numeric,
    Names,
}

/// Worker pools over the event loops: `per-loop` (one per loop, thread
/// counts divided among them; the default, measured better with 2 loops
/// and the same as `shared` with 1) or `shared` (one pool for all loops).
/// See rnfsd-transport `PoolLayout` and docs/pool-layout.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PoolLayout {
    Shared,
    PerLoop,
}

/// Bound on woken-but-not-yet-running workers: a number, or "unlimited"
/// (experiment only: wake a worker for every request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxWaking {
    N(usize),
    Unlimited,
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

/// `FromStr` from the words of a key's values, and `word()` back.
macro_rules! parse_words {
    ($t:ty, $key:literal, $($word:literal => $v:path),*) => {
        impl std::str::FromStr for $t {
            type Err = ConfigError;
            fn from_str(s: &str) -> Result<Self, ConfigError> {
                match s {
                    $($word => Ok($v),)*
                    _ => err(format!(concat!($key, " must be one of {:?}, not {:?}"), [$($word),*], s)),
                }
            }
        }
        impl $t {
            /// The word the configuration uses for this value.
            pub fn word(self) -> &'static str {
                match self { $($v => $word,)* }
            }
        }
    };
}

parse_words!(WakeOrder, "wake_order", "lifo" => WakeOrder::Lifo, "fifo" => WakeOrder::Fifo);
parse_words!(WorkerSpin, "worker_spin", "off" => WorkerSpin::Off, "alone" => WorkerSpin::Alone, "always" => WorkerSpin::Always);
parse_words!(Handoff, "handoff", "direct" => Handoff::Direct, "double" => Handoff::Double);
parse_words!(Idmap, "nfs4_idmap", "numeric" => Idmap::Numeric, "names" => Idmap::Names);
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

// Defined beside the server state whose fields they set.
pub use crate::state::{DEFAULT_INLINE_WRITE_ALONE_MAX, DEFAULT_INLINE_WRITE_MAX, DEFAULT_MAX_IO};
/// Room beyond `max_io` for the RPC header, credentials and WRITE arguments
/// (`max_record`'s default).
pub const RECORD_OVERHEAD: u32 = 64 * 1024;
/// The least room beyond `max_io` a configured `max_record` may leave.
pub const MIN_RECORD_OVERHEAD: u32 = 4096;
// A WRITE of `max_io` bytes fits a record of the default size, and of
// the least size a configuration may set (`validate.rs`).
const _: () = assert!(RECORD_OVERHEAD >= MIN_RECORD_OVERHEAD);
const _: () = assert!(MIN_RECORD_OVERHEAD as usize >= MAX_WRITE_OVERHEAD);
// The server's default record is the transport's own default (what a
// transport started without the server would take).
const _: () = assert!(
    (DEFAULT_MAX_IO + RECORD_OVERHEAD) as usize == rnfsd_transport::limits::DEFAULT_MAX_RECORD
);
/// Port mapper and lock calls are few and quick: more UDP threads than
/// this per address would only sit idle.
pub const MAX_UDP_THREADS: usize = 16;
/// The journal's commits run one after another; more threads asking for
/// them would only wait (`rnfsd_fs::limits::owed::MAX_THREADS`).
pub const MAX_JOURNAL_COMMIT_THREADS: usize = rnfsd_fs::limits::owed::MAX_THREADS;
/// Most `ceph_mount_syncs`: each holds a caller's thread while it runs,
/// and more at once only split the batches they exist to gather.
pub const MAX_CEPH_MOUNT_SYNCS: usize = 64;
/// Most `blocking_lazy_wake_us` (100 ms): a call left behind a long one
/// waits this long at most.
pub const MAX_BLOCKING_LAZY_WAKE_US: u64 = 100_000;
/// Bound of `server.reply_batch` (replies one worker may hold back).
pub const MAX_REPLY_BATCH: usize = 256;
/// Bound of `server.recycled_buffers`: 4096 buffers of at most 4 KiB + 4
/// are 16 MiB per list, two lists per thread.
pub const MAX_RECYCLED_BUFFERS: usize = 4096;

/// `inline_large_writes_per_turn`'s default (docs/request-path.md, "Large
/// WRITEs on the loop while others wait").
pub const DEFAULT_INLINE_LARGE_WRITES_PER_TURN: usize = 4;
/// Its bound: a call read in a turn waits for at most this many copies.
pub const MAX_INLINE_LARGE_WRITES_PER_TURN: usize = 64;
const _: () = assert!(DEFAULT_INLINE_LARGE_WRITES_PER_TURN <= MAX_INLINE_LARGE_WRITES_PER_TURN);

server_keys! {
    /// TCP addresses NFS and MOUNT answer on (both on each).
    listen: Vec<SocketAddr> = vec![SocketAddr::from(([127, 0, 0, 1], 2049))],
        "NFS + MOUNT addresses",
        flag "listen" "ADDR:PORT" => "TCP address NFS and MOUNT listen on; repeat for \
            several. Port 0 picks a free port (reported on the start line and in \
            --port-file). Replaces server.listen.";
    /// Serve a built-in port mapper (PMAP v2, RPCBIND v3/v4 read side) on
    /// port 111 of each listen address, instead of registering with the
    /// system rpcbind.
    portmap: bool = false, "built-in port mapper on port 111",
        switch "portmap" => true, "Serve a built-in port mapper on port 111 of each listen \
            address instead of registering with the system rpcbind";
    /// Register NFS and MOUNT with a running system rpcbind (ignored with
    /// `portmap`).
    register_rpcbind: bool = true, "register with a running system rpcbind",
        switch "no-rpcbind" => false, "Do not register with a running system rpcbind";
    /// Serve the port mapper and the lock manager (NLM, NSM) over
    /// UDP too: the lock daemons and status monitors of Linux and the BSDs
    /// look services up over UDP. NFS and MOUNT stay TCP only.
    udp: bool = true, "serve the port mapper and the lock manager over UDP too";
    /// Threads per UDP address, each receiving and answering calls.
    udp_threads: usize = 1, "threads per UDP address (1..=16)";
    /// Serve the lock manager (NLM v1, v3, v4: program 100021) on the NFS
    /// addresses, over TCP and (with `udp`) UDP, so clients mount without
    /// `nolock`.
    nlm: bool = true, "lock manager (NLM 1/3/4) and status monitor (NSM) on the NFS \
        addresses, TCP and UDP";
    /// After a restart, how long only lock reclaims are granted (when
    /// clients held locks before it; XNFS grace period). 90: as knfsd's
    /// default grace (its lease time).
    nlm_grace_secs: u64 = 90, "after a restart: only reclaims, this long";
    /// (owner, file) descriptors the lock manager holds at once (each is
    /// one open file; beyond it LOCK answers NLM4_DENIED_NOLOCKS).
    nlm_max_files: usize = 4096, "open files held for lock owners";
    /// Blocked lock requests waiting at once.
    nlm_max_waiters: usize = 1024, "blocked lock requests at once";
    /// Descriptors, blocked requests and share reservations of one client
    /// host (one address) at once: an eighth of `nlm_max_files`, so one
    /// client cannot take the table or every waiter slot.
    nlm_max_per_client: usize = 512, "files, blocked requests and shares of one client address";
    /// How often blocked lock requests are retried (a lock freed by a
    /// local program is seen within this).
    nlm_retry_ms: u64 = 100, "blocked requests retried this often";
    /// NLM callbacks (GRANTED, `*_RES`) to one client address in flight at
    /// once, of the 64 in all: a client slow to answer cannot hold every
    /// place and make the others' callbacks be dropped.
    nlm_callbacks_per_client: usize = crate::state::nlm::DEFAULT_CALLBACKS_PER_CLIENT,
        "NLM callbacks to one client in flight at once";
    /// After a restart, hosts told at once that we restarted (SM_NOTIFY,
    /// each within 30 s and the grace period), so hosts that are gone do
    /// not use up the grace period of those that are there.
    nlm_notify_parallel: usize = 32, "hosts told of a restart at once (SM_NOTIFY)";
    /// Serve NFSv4.1 (program 100003 version 4) on the NFS addresses
    /// beside NFSv3: clients mount with nothing but port 2049.
    nfs4: bool = true, "NFSv4.1 on the NFS addresses",
        switch "no-nfs4" => false, "Do not serve NFSv4.1 (program 100003 version 4); NFSv3 \
            only";
    /// Answer minor version 2 too: its data operations (SEEK, ALLOCATE,
    /// DEALLOCATE, READ_PLUS, COPY, CLONE) and extended attribute ones
    /// served, the rest NFS4ERR_NOTSUPP.
    nfs4_minor2: bool = true, "NFSv4.2 compounds answered (data operations served)";
    /// Bytes one synchronous NFSv4.2 COPY copies at most: a longer COPY
    /// the client lets run asynchronously (ca_synchronous false) runs on
    /// a copier thread and ends with CB_OFFLOAD (RFC 7862 §15.2.3,
    /// §16.1); any other is answered with a short copy the client
    /// continues, so no request thread copies for long.
    nfs4_copy_sync_max: u64 = crate::state::nfs4::DEFAULT_COPY_SYNC_MAX,
        "NFSv4.2 COPY: bytes copied per synchronous call at most";
    /// Asynchronous NFSv4.2 COPYs running at once, each on its own copier
    /// thread (at most 64). Past it a COPY is done synchronously, short.
    nfs4_copies_max: usize = crate::state::copy::DEFAULT_COPIES_MAX,
        "NFSv4.2 asynchronous COPYs at once";
    /// Asynchronous NFSv4.2 COPYs one client may run at once (0: none,
    /// every COPY synchronous); past it a COPY is done synchronously.
    nfs4_copies_per_client: usize = crate::state::copy::DEFAULT_COPIES_PER_CLIENT,
        "NFSv4.2 asynchronous COPYs per client at once (0: none)";
    /// NFSv4 lease (RFC 8881 §8.3): a client silent this long loses its
    /// state. 90: as knfsd and nfs-ganesha.
    nfs4_lease_secs: u64 = 90, "NFSv4 lease: a silent client's state goes after this";
    /// NFSv4 client records at once (confirmed and unconfirmed).
    nfs4_max_clients: usize = 4096, "NFSv4 clients at once";
    /// Sessions one NFSv4 client may hold.
    nfs4_sessions_per_client: usize = 8, "NFSv4 sessions per client";
    /// Slots of a session (the most concurrent requests a session gets).
    nfs4_slots_per_session: usize = 64, "NFSv4 slots per session";
    /// Open and lock owners of one client, each.
    nfs4_owners_per_client: usize = 4096, "NFSv4 open owners, and lock owners, per client";
    /// Stateids (open, lock) of one client.
    nfs4_stateids_per_client: usize = 16384, "NFSv4 stateids per client";
    /// Stateids of all clients together.
    nfs4_max_stateids: usize = 1_048_576, "NFSv4 stateids in all";
    /// NFSv4 owner and owner_group strings: "numeric" (ids as numbers, as
    /// the Linux client and knfsd use under AUTH_SYS) or "names"
    /// ("user@domain" from the system's user and group databases, for
    /// clients that map names; numbers are still accepted).
    nfs4_idmap: Idmap = Idmap::Numeric, "NFSv4 owner strings: numeric | names";
    /// The domain of "user@domain" owner strings. Unset: Domain of
    /// /etc/idmapd.conf, else the host's DNS domain, else "localdomain".
    nfs4_idmap_domain: Option<String> = None, "NFSv4 owner strings' domain",
        unset "idmapd.conf, DNS domain or localdomain";
    /// Names cached per direction and kind (uid to name, name to uid, and
    /// the same for groups) with `nfs4_idmap = "names"`.
    nfs4_idmap_cache: usize = 4096, "NFSv4 id-mapping cache entries, each way";
    /// Bytes for the sessions' reply caches together (slots x 4 KiB each).
    nfs4_reply_cache_bytes: usize = 64 << 20, "NFSv4 slot reply caches in all, bytes";
    /// Grant NFSv4 read and write delegations (RFC 8881 §10.4) to
    /// clients whose back channel answers; conflicting NFSv4 and NFSv3
    /// accesses recall them first, and so does a program on the server's
    /// host opening the file for writing or truncating it (any open, for
    /// a write delegation: the server holds a Linux file lease on every
    /// delegated file; where it cannot take one, as on CephFS, it grants
    /// none).
    nfs4_delegations: bool = true, "NFSv4 read and write delegations";
    /// Delegations one NFSv4 client may hold.
    nfs4_delegations_per_client: usize = 1024, "NFSv4 delegations per client";
    /// Delegations of all NFSv4 clients together.
    nfs4_max_delegations: usize = 32768, "NFSv4 delegations in all";
    /// Files with delegations at once: each holds a Linux file lease on
    /// a descriptor of its own, counted against the open-files limit.
    nfs4_max_leases: usize = 4096, "delegated files (one open file each)";
    /// A fixed number of worker threads; overrides min/max_threads.
    threads: Option<usize> = None, "a fixed worker count", unset "adaptive",
        flag "threads" "N" => "A fixed number of worker threads instead of the adaptive \
            pool of --min-threads to --max-threads.";
    /// Adaptive pool: threads kept even when idle.
    min_threads: usize = 2, "adaptive pool: threads kept even when idle",
        flag "min-threads" "N" => "Adaptive pool: threads kept even when idle.";
    /// Adaptive pool: most threads (they block on disk I/O, so more than
    /// cores).
    max_threads: usize = 128, "adaptive pool: most threads",
        flag "max-threads" "N" => "Adaptive pool: most worker threads.";
    /// Adaptive pool: retire a worker idle this many seconds.
    thread_idle_secs: u64 = 30, "adaptive pool: a worker idle this long is retired";
    /// The last worker to go idle spins this many microseconds for the
    /// next request before it sleeps (0: sleeps at once; at most 1000),
    /// when `worker_spin` says so.
    worker_spin_us: u64 = 50, "the last idle worker spins this long (us) before it sleeps";
    /// When that worker spins: "alone" (only while requests come one at
    /// a time: of the last 64, at most 4 found another queued or a
    /// worker busy), "always" or "off".
    worker_spin: WorkerSpin = WorkerSpin::Alone, "when the last idle worker spins: alone | always | off";
    /// Requests queued for a worker before the transport stops reading.
    queue_limit: usize = 1024, "requests waiting for a worker",
        flag "queue-limit" "N" => "Requests queued for workers before connections stop \
            being read.";
    /// Workers woken but not yet running at once (the bounded-wakeup rule).
    max_waking: MaxWaking = MaxWaking::N(1), "workers woken but not yet running",
        flag "max-waking" "N|unlimited" => "Workers woken but not yet running at once, or \
            \"unlimited\" (experiment).";
    /// Experiment switch: "lifo" (design) or "fifo".
    wake_order: WakeOrder = WakeOrder::Lifo, "experiment switch: lifo | fifo",
        flag "wake-order" "lifo|fifo" => "Experiment switch: wake the most recently idle \
            worker (lifo) or the longest idle (fifo).";
    /// Experiment switch: "direct" (design) or "double".
    handoff: Handoff = Handoff::Direct, "experiment switch: direct | double",
        flag "handoff" "direct|double" => "Experiment switch: the woken worker runs the \
            request (direct) or hands it on with a second wakeup (double).";
    /// Largest RPC record accepted (all fragments); larger ones close the
    /// connection. Must exceed `max_io` by at least 4096. Unset: `max_io`
    /// + `RECORD_OVERHEAD`.
    max_record: Option<u32> = None, "largest RPC record",
        unset format!("max_io + {RECORD_OVERHEAD}"),
        flag "max-record" "BYTES" => "Largest RPC record in bytes.";
    /// Largest READ/WRITE/READDIR transfer, advertised in FSINFO.
    max_io: u32 = DEFAULT_MAX_IO, "READ/WRITE/READDIR transfer size",
        flag "max-io" "BYTES" => "Largest READ/WRITE/READDIR transfer in bytes.";
    /// Open client connections; at the limit the oldest idle one is closed
    /// to make room, and a new one is refused only when none is idle. Far
    /// below the usual open-files limit: each backend holds descriptors too.
    max_connections: usize = 1024, "open client connections",
        flag "max-connections" "N" => "Most open client connections.";
    /// Open connections from one client address; 0 = no limit beyond
    /// `max_connections` (the default: NAT, containers and VMs often put
    /// many clients behind one address).
    max_connections_per_client: usize = 0, "per client address; 0 = no limit",
        flag "max-connections-per-client" "N" => "Most open connections from one client \
            address; 0 = no limit.";
    /// Requests of one connection being processed at once; the connection
    /// is not read further until one completes.
    max_inflight_per_conn: usize = 64, "requests of one connection processed at once",
        flag "max-inflight-per-conn" "N" => "Requests of one connection processed at once.";
    /// Queued unsent reply bytes of one connection before it is not read
    /// further (a slow reader cannot pin unbounded memory).
    max_conn_output: usize = 4 << 20, "queued reply bytes per connection";
    /// Bytes held across all connections for request records, the room
    /// reserved for large replies and queued replies, shared fairly among
    /// client addresses: under pressure (past it, or a call finding no
    /// room) each client is held to its share, this divided among the
    /// active clients and at least `max_record` + 64 KiB, and a client at
    /// or over its share is not read until it drains (0: no bound).
    max_buffered_bytes: usize = 256 << 20, "records + queued replies, all connections; \
        past it each client address is held to its share",
        flag "max-buffered-bytes" "BYTES" => "Bytes held for request records and queued \
            replies across all connections, shared fairly among client addresses (0: no \
            bound).";
    /// A client address held by its share of `max_buffered_bytes` (over
    /// it, or with calls waiting for it) that drains nothing (no reply
    /// bytes taken by its sockets, no call finished) for this many seconds
    /// has its connections closed, which frees what they hold (0: never).
    budget_hog_secs: u64 = 5, "close a client held by its share of max_buffered_bytes \
        that drains nothing this long; 0 = never",
        flag "budget-hog-secs" "SECS" => "Close the connections of a client address held by \
            its share of max-buffered-bytes that drains nothing for this many seconds (0: \
            never).";
    /// Close a connection that sent nothing for this many seconds and has
    /// nothing in flight (360: as knfsd).
    idle_timeout_secs: u64 = 360, "close idle connections";
    /// Event-loop threads reading sockets (workers write replies); 0 = one
    /// per CPU this process may run on (the default: with per-loop pools and
    /// pinning this is knfsd's percpu pool mode, measured fastest in
    /// docs/service-core.md).
    event_threads: usize = 0, "event loops; 0 = one per CPU",
        flag "event-threads" "N" => "Event-loop threads reading sockets; 0 = one per CPU.";
    /// "per-loop": one worker pool per event loop, serving the connections
    /// that loop reads, with the thread counts divided among the pools
    /// (rounded up); "shared": one pool for all loops.
    pools: PoolLayout = PoolLayout::PerLoop, "worker pools: per-loop (one per loop) | shared",
        flag "pools" "shared|per-loop" => "Worker pools: one per event loop serving the \
            connections that loop reads (thread counts divided among them), or one shared \
            by all loops.";
    /// Pin each event loop (and, with per-loop pools, its workers) to one
    /// CPU. Unset = pin exactly when there is a loop for every CPU (pinning
    /// fewer loops than CPUs would confine the workers to few CPUs).
    pin_loops: Option<bool> = None, "pin each loop and its pool to a CPU; auto = when there \
        is a loop for every CPU",
        unset "auto",
        switch "pin-loops" .conflicts_with("no-pin-loops") => Some(true),
            "Pin each event loop, and with per-loop pools its workers, to one CPU (unset: \
            when there is a loop for every CPU)",
        switch "no-pin-loops" => Some(false), "Never pin event loops or workers to CPUs";
    /// On shutdown, how long to keep flushing queued replies.
    shutdown_timeout_secs: u64 = 10, "reply flushing at shutdown";
    /// Local backend, per export: bound on the inode -> location map (no
    /// descriptors).
    path_cache_entries: usize = 1_000_000, "per export: inode -> location (no fds, about 150 \
        bytes each)",
        flag "path-cache-entries" "N" => "Per export: inode -> location map entries (no \
            descriptors; about 150 bytes each).";
    /// Local backend, per export: bound on the map of objects lately
    /// proven inside the export (no descriptors).
    verdict_cache_entries: usize = 262_144, "per export: objects lately proven inside the \
        export (no fds, about 50 bytes each)",
        flag "verdict-cache-entries" "N" => "Per export: objects lately proven inside the \
            export, so one opened by handle again is not proven again within the proof's \
            lifetime (no descriptors; about 50 bytes each).";
    /// Local backend: bound on directory entries one walk of the export
    /// visits when looking for handles whose location is unknown.
    handle_scan_limit: usize = 1_000_000, "entries one walk for lost handles visits";
    /// Local backend: calls waiting for that walk at once; more answer
    /// JUKEBOX at once.
    handle_scan_waiters: usize = 8, "calls waiting for that walk at once";
    /// Local backend: how long a call waits for the walk before JUKEBOX.
    handle_scan_wait_ms: u64 = 1000, "then JUKEBOX (the client retries)";
    /// Local backend, per export: handle -> object cache entries (one
    /// descriptor each).
    object_cache_entries: usize = 8192, "per export: handle -> object (1 fd each)",
        flag "object-cache-entries" "N" => "Per export: handle -> object cache entries (one \
            descriptor each).";
    /// Local backend, per export: open-file cache entries (one descriptor
    /// each).
    open_file_cache_entries: usize = 4096, "per export: open files (1 fd each)",
        flag "open-file-cache-entries" "N" => "Per export: open-file cache entries (one \
            descriptor each).";
    /// Descriptors all caches of all exports may hold together (None: from
    /// RLIMIT_NOFILE, see `cache_fd_budget`).
    cache_fds: Option<usize> = None, "descriptors held by all caches of all exports; \
        RLIMIT_NOFILE is raised to its hard limit at start and must leave room for \
        connections and per-call descriptors",
        unset "from RLIMIT_NOFILE",
        flag "cache-fds" "N" => "Descriptors all caches of all exports may hold (unset: half \
            of what RLIMIT_NOFILE leaves after connections and per-call use).";
    /// Local backend, per export: syncs (fsync) running at once; more
    /// requests queue or share a sync (group commit); also caps a `sync`
    /// export's journal commit threads. 64, as many as the blocking pool's
    /// threads: measured against 16 and 4 with fs_mark at 16-256 streams,
    /// 64 ran 1.0x, 1.19x and 1.16x of 16 (docs/durability.md).
    max_syncs_in_flight: usize = 64, "per export: fsyncs at once (group commit)",
        flag "max-syncs-in-flight" "N" => "Per export: syncs (fsync) running at once; more \
            requests queue or share one (group commit).";
    /// Local backend, per export: threads committing the journal of a
    /// `sync` export on ext4 or XFS for calls whose replies wait for it (1
    /// to 8). One gathers bigger batches than four.
    journal_commit_threads: usize = 1, "per export: threads committing a sync export's \
        journal (ext4, XFS; 1 to 8)",
        flag "journal-commit-threads" "N" => "Per export: threads committing the journal of a \
            `sync` export on ext4 or XFS for calls whose replies wait for it (1 to 8).";
    /// Local backend, per export: the most unsynced bytes of one file
    /// whose writeback a COMMIT or stable WRITE leaves to the journal
    /// commit thread to wait for (with the rest of its batch); a file with
    /// more is waited for by the call's own thread, so one large COMMIT
    /// never holds back the other calls' commits (0: every call waits for
    /// its own).
    owed_writeback_bytes: u64 = rnfsd_fs::local::DEFAULT_OWED_WRITEBACK_BYTES,
        "per export: a file's unsynced bytes up to which that thread waits for a COMMIT's \
        writeback (more: the call's own thread)",
        flag "owed-writeback-bytes" "BYTES" => "Per export: the most unsynced bytes of one \
            file whose writeback a COMMIT or stable WRITE leaves to the journal commit \
            thread to wait for; more are waited for by the call's own thread (0: always).";
    /// Local backend, per export: how long after a written file was closed
    /// with uncommitted data its filesystem is flushed in the background
    /// (a COMMIT flushes at once).
    flush_delay_ms: u64 = rnfsd_fs::local::DEFAULT_FLUSH_DELAY.as_millis() as u64,
        "per export: closed uncommitted writers flushed in the background after this \
        (COMMIT: at once)",
        flag "flush-delay-ms" "MS" => "Per export: milliseconds after a written file was \
            closed with uncommitted data before its filesystem is flushed in the background \
            (a COMMIT flushes at once).";
    /// Local backend, per export: UNSTABLE bytes one open file gathers
    /// before their writeback is started (by the event loop that ran the
    /// WRITE, once its reply is sent, or else a background thread), so a
    /// COMMIT finds most of a large transfer already on its way to the disk
    /// (0: the COMMIT flushes everything).
    write_behind_bytes: u64 = rnfsd_fs::local::DEFAULT_WRITE_BEHIND_BYTES,
        "per export: UNSTABLE bytes of a file before its writeback starts (by the event \
        loop that wrote them, or a background thread; 0: off)",
        flag "write-behind-bytes" "BYTES" => "Per export: UNSTABLE bytes one open file \
            gathers before their writeback is started, by the event loop that ran the WRITE \
            once its reply is sent, or by a background thread (0: a COMMIT flushes \
            everything).";
    /// CephFS exports: how long one libcephfs call may take before the
    /// client gets JUKEBOX and retries (libcephfs waits, with no limit of
    /// its own, while no MDS is active).
    ceph_call_timeout_ms: u64 = 5000, "CephFS: a libcephfs call's limit, then JUKEBOX";
    /// CephFS exports, each: libcephfs calls running at once (more wait in
    /// a queue of 8 per thread; a full queue answers JUKEBOX).
    ceph_call_threads: usize = 32, "CephFS, per export: libcephfs calls at once";
    /// CephFS exports, each: cached inodes (each pins an inode in
    /// libcephfs's cache and may hold open files).
    ceph_inode_cache_entries: usize = 16384, "CephFS, per export: cached inodes";
    /// CephFS exports, each: directory listings kept, each valid while its
    /// directory's mtime and ctime stay (of at most 1024 entries: at most
    /// 256 KiB of names each).
    ceph_listings: usize = 512, "CephFS, per export: directory listings kept";
    /// CephFS exports, each: syncs of the whole mount at once, each
    /// answering every COMMIT and stable WRITE that waited for it: one MDS
    /// journal flush for the batch (group commit). 0: each syncs its own
    /// inode only.
    ceph_mount_syncs: usize = 1, "CephFS, per export: whole-mount syncs at once (group commit)";
    /// Threads of the pool that runs calls which wait for stable storage
    /// (COMMIT, stable WRITE, and namespace changes on `sync` exports), so
    /// they never make GETATTR, LOOKUP or READ queue behind them. 0: they
    /// run in the ordinary pools.
    blocking_threads: usize = 64, "pool for calls that wait for stable storage",
        flag "blocking-threads" "N" => "Threads of the pool for calls that wait for stable \
            storage (COMMIT, stable WRITE, namespace changes on sync exports); 0 = the \
            ordinary pools.";
    /// Nice value of the blocking pool's threads (-20 to 19; 0: as the
    /// server was started). Above 0 the scheduler favours the event loops
    /// over them when CPUs are short, so warm calls answered on the loops
    /// keep their latency beside a storm of misses or syncs.
    blocking_nice: i32 = 0, "its threads' nice value (> 0: loops first)",
        flag "blocking-nice" "N" .allow_hyphen_values(true) => "Nice value of the blocking \
            pool's threads (-20 to 19; 0 = as started): above 0 the event loops' calls go \
            first when CPUs are short.";
    /// The threads that wait for stable storage (the blocking pool's and
    /// the journal commit threads) run under SCHED_BATCH: their wakeups
    /// do not preempt a running thread, so an event loop finishes its turn
    /// first. False: SCHED_OTHER, as the server was started.
    sync_sched_batch: bool = true, "its and the journal commit threads' wakeups do not \
        preempt the loops (SCHED_BATCH)",
        switch "no-sync-sched-batch" => false, "Run the blocking pool's and the journal \
            commit threads under SCHED_OTHER, so their wakeups preempt the event loops \
            (`sync_sched_batch = false`). For comparison";
    /// Microseconds a call left to the blocking pool's running worker may
    /// wait for it, before a timer wakes another (the one-handoff rule: a
    /// call queued alone while a worker runs, and the calls behind one a
    /// worker takes, wake nobody; a running call that sleeps long delays
    /// them this long at most). 0: every call wakes a worker at once.
    blocking_lazy_wake_us: u64 = 2000, "a call queued alone there waits this long at most \
        for the running worker (0: wake one)",
        flag "blocking-lazy-wake-us" "US" => "Microseconds a call left to the blocking pool's \
            running worker may wait for it before a timer wakes another (0: at once; at most \
            100000).";
    /// Run to completion: answer calls that need nothing but memory (cached
    /// GETATTR, ACCESS, LOOKUP, READ of cached pages, ...) on the event loop
    /// thread that read them, with no handoff; replies of one connection
    /// leave together.
    run_inline: bool = true, "answer from-memory calls on the loop thread",
        switch "no-run-inline" => false, "Do not answer calls on the event loop thread (run \
            to completion); every call goes to a worker. For comparison";
    /// With `run_inline`: a handle cache miss is opened on the loop thread
    /// too (the kernel almost always holds the inode), and a loop whose
    /// open slept (read the disk) hands misses to the pool again for 10 ms
    /// to 1 s. False: every miss goes to a pool thread.
    inline_misses: bool = true, "... and open handle cache misses there too",
        switch "no-inline-misses" => false, "Send every handle cache miss to a pool thread \
            instead of opening it on the loop (`inline_misses = false`). For comparison";
    /// With `run_inline`: an UNSTABLE WRITE of at most this many bytes is
    /// written on the loop thread (into the page cache; with
    /// `inline_misses` its writer is opened there on a miss), and a loop
    /// whose write slept (dirty throttling, the journal) hands writes to
    /// the pool again for 10 ms to 1 s. Larger WRITEs follow
    /// `inline_write_alone_max`: a loop copying 1 MiB makes its other
    /// connections wait (docs/request-path.md). 0: every WRITE goes to a
    /// pool thread.
    inline_write_max: u32 = DEFAULT_INLINE_WRITE_MAX, "... and UNSTABLE WRITEs up to this \
        size (0: none)",
        flag "inline-write-max" "BYTES" => "Largest UNSTABLE WRITE written on the event loop \
            thread, bytes (0: every WRITE goes to a pool thread).";
    /// With `inline_write_max` above 0: an UNSTABLE WRITE larger than it and
    /// of at most this many bytes is written on the loop too when nothing
    /// else of that loop is ready in its turn (no other connection to
    /// read, no other call of this one), or within
    /// `inline_large_writes_per_turn`; else the loop's pool. 0: none.
    inline_write_alone_max: u32 = DEFAULT_INLINE_WRITE_ALONE_MAX, "... and up to this size \
        when nothing else of that loop is ready (0: none)",
        flag "inline-write-alone-max" "BYTES" => "Largest UNSTABLE WRITE written on the event \
            loop when nothing else of that loop is ready, bytes (0: none above \
            `inline_write_max`; `inline_write_max = 0` turns this off too).";
    /// Of those larger WRITEs, how many a loop writes itself in one turn
    /// while other calls of it are ready: each makes them wait for its copy
    /// (a call already read waits for this many copies at most), and each
    /// saves a handoff's two context switches. 0: only when nothing else is
    /// ready.
    inline_large_writes_per_turn: usize = DEFAULT_INLINE_LARGE_WRITES_PER_TURN, "... or this \
        many a turn while others are ready (0: only when nothing else is)",
        flag "inline-large-writes-per-turn" "N" => "Of those, how many a loop writes itself in \
            one turn while other calls of it are ready (0: only when nothing else is; at \
            most 64).";
    /// With `run_inline`: a namespace change or SETATTR of an `async`
    /// export (CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR, RENAME, LINK;
    /// SETATTR) is made on the loop thread once its handles are resolved
    /// there (nothing of it waits for stable storage), and a loop whose
    /// change slept hands changes to the pool again for 10 ms to 1 s. A
    /// change that sets a size (SETATTR, CREATE) or would free the last
    /// link of a file over 16 MiB (REMOVE, RENAME) goes to the pool. False:
    /// every change goes to a pool thread. `sync` exports' changes always
    /// wait in the blocking pool.
    inline_changes: bool = true, "... and `async` exports' namespace changes",
        switch "no-inline-changes" => false, "Send every namespace change and SETATTR of an \
            `async` export to a pool thread (`inline_changes = false`). For comparison";
    /// Most replies a worker holds back while it runs the next short call
    /// (UNSTABLE WRITE, a change on an `async` export) of the same
    /// connection, so a client's burst is answered in one write, not one
    /// per call (0 or 1: each reply leaves alone; at most 256).
    reply_batch: usize = 16, "a worker's replies of one connection sent together",
        flag "reply-batch" "N" => "Replies a worker holds back while it runs the next short \
            call of the same connection (0 or 1 = each alone).";
    /// Small reply buffers and request records (at most 4 KiB + 4 bytes
    /// each) that each event loop and pool worker keeps, cleared, for its
    /// next ones instead of freeing them, of each kind (a worker keeps at
    /// most 8 replies and no records): with many calls in flight on a connection the C
    /// library's per-thread cache runs dry, and malloc and free cost
    /// hundreds of instructions a call. 0: none kept; at most 4096.
    recycled_buffers: usize = rnfsd_transport::limits::DEFAULT_RECYCLED_BUFFERS,
        "small reply and record buffers each loop and worker keeps for reuse (0: none)",
        flag "recycled-buffers" "N" => "Small reply and record buffers each event loop and \
            pool worker keeps for reuse, of each kind (0 = none).";
    /// Pipes for READ replies sent by splice(2) (file pages to the socket
    /// with no copy), two descriptors each; one is held per large READ
    /// until the socket has taken its data. 0: READ data is copied.
    splice_pipes: usize = 32, "pipes for READ by splice (2 fds each; 0: READ data is copied)",
        flag "splice-pipes" "N" => "Pipes for READ replies sent by splice (no copy of the \
            data); 0 = copy.";
    /// Local backend: run filesystem calls with the caller's uid/gid (needs
    /// root; None = as root only).
    act_as_caller: Option<bool> = None, "run calls as the caller's uid/gids",
        unset "true as root";
    /// Confirms `act_as_caller = false` for a server running as root:
    /// every call then runs as root, with root's file capabilities,
    /// whatever uid the client claims and whatever root_squash and
    /// all_squash say. Without it, that combination is refused at start.
    all_calls_as_root: bool = false, "with act_as_caller = false as root: confirm that every \
        call runs as root (squashing then means nothing)";
    /// Where the handle key lives (None: /var/lib/rnfsd as root, else
    /// $XDG_STATE_HOME/rnfsd or ~/.local/state/rnfsd).
    state_dir: Option<PathBuf> = None, "the handle key, lock state and admin socket",
        unset "/var/lib/rnfsd as root, else $XDG_STATE_HOME/rnfsd or ~/.local/state/rnfsd",
        flag "state-dir" "DIR" => "Directory for the persistent handle key.";
    /// A tracing filter such as "info" or "rnfsd=debug" (RUST_LOG wins).
    log_level: String = "info".into(), "log filter (RUST_LOG wins)",
        flag "log-level" "LEVEL" => "Log filter: error, warn, info, debug, trace, or a \
            tracing directive such as \"rnfsd=debug\". RUST_LOG overrides it.";
    /// Accept AUTH_NONE (as nobody) for every procedure. Off: AUTH_NONE
    /// works only for NULL, MOUNT EXPORT and the port mapper.
    allow_auth_none: bool = false, "AUTH_NONE (as nobody) for every procedure",
        switch "allow-auth-none" => true, "Accept AUTH_NONE credentials (as nobody) for \
            every procedure";
    /// The admin socket (statistics; owner-only). None: STATE_DIR/admin.sock.
    admin_socket: Option<PathBuf> = None, "`rnfsd stats` reads it (0600)",
        unset format!("STATE_DIR/{}", crate::admin::DEFAULT_NAME);
    /// Serve Prometheus metrics (GET /metrics) on this address. None: off.
    metrics: Option<SocketAddr> = None, "Prometheus GET /metrics on this ADDR:PORT",
        unset "off",
        flag "metrics" "ADDR:PORT" => "Serve Prometheus metrics (HTTP GET /metrics) on this \
            address.";
    /// How RPC statistics are kept: "percore" (design), "shared" (one
    /// shared counter per procedure, for comparison) or "off".
    stats: rnfsd_stats::Mode = rnfsd_stats::Mode::Percore, "RPC counters: percore | shared \
        | off",
        flag "stats" "percore|shared|off" => "How RPC statistics are kept: percore, shared \
            (one shared counter per procedure; experiment) or off.";
    /// Duplicate reply cache: how long a non-idempotent call's reply is
    /// replayed to a retransmission (knfsd: 120 s).
    drc_expiry_secs: u64 = 120, "duplicate reply cache: replay window";
    /// Duplicate reply cache: bound on its memory; 0 turns it off.
    drc_max_bytes: usize = 32 << 20, "duplicate reply cache memory (0: off)";
    /// A knfsd exports(5) file (such as /etc/exports) whose exports are
    /// added to the `[[export]]` tables, with knfsd's defaults (read-only).
    /// A relative path is taken from the working directory. See
    /// docs/exports.md.
    exports: Option<PathBuf> = None, "a knfsd exports(5) file (/etc/exports) whose exports \
        are added, with exports(5) defaults (ro, sync, root_squash, secure); see \
        docs/exports.md",
        unset "none",
        flag "exports" "FILE" => "A knfsd exports(5) file (such as /etc/exports) to serve as \
            well, with knfsd's defaults (read-only, root_squash, secure); replaces \
            server.exports. Host names and netgroups are resolved at start and on SIGHUP. See \
            docs/exports.md.";
}

impl ServerConfig {
    /// A server running as root (`root`) with `act_as_caller = false` does
    /// every call as root: no client's uid, no squashing reaches the
    /// filesystem. That needs `all_calls_as_root = true` to say so.
    pub fn check_identity(&self, root: bool) -> Result<(), ConfigError> {
        match (self.act_as_caller, self.all_calls_as_root) {
            (Some(false), false) if root => err(
                "server.act_as_caller = false while running as root: every call would run as \
                 root, whatever uid the client claims and whatever root_squash or all_squash \
                 say. Remove act_as_caller (root then acts as each caller), run as an \
                 unprivileged user, or set server.all_calls_as_root = true to confirm",
            ),
            (Some(false), _) | (_, false) => Ok(()),
            (_, true) => err(
                "server.all_calls_as_root = true only confirms act_as_caller = false: set \
                 both, or neither",
            ),
        }
    }

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
            + if self.nfs4 && self.nfs4_delegations {
                self.nfs4_max_leases as u64
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

#[cfg(test)]
mod tests {
    use crate::config::Config;

    /// Root with `act_as_caller = false` runs every call as root: refused
    /// unless `all_calls_as_root` confirms it.
    #[test]
    fn root_without_acting_as_caller_needs_confirming() {
        let cfg = |t: &str| Config::from_toml(&format!("[server]\n{t}")).unwrap();
        let off = cfg("act_as_caller = false\n");
        let e = off.server.check_identity(true).unwrap_err().0;
        assert!(
            e.contains("act_as_caller = false while running as root")
                && e.contains("all_calls_as_root = true"),
            "{e}"
        );
        assert_eq!(off.server.check_identity(false), Ok(()), "not root");
        let confirmed = cfg("act_as_caller = false\nall_calls_as_root = true\n");
        assert_eq!(confirmed.server.check_identity(true), Ok(()));
        assert_eq!(confirmed.server.check_identity(false), Ok(()));
        for t in ["", "act_as_caller = true\n"] {
            assert_eq!(cfg(t).server.check_identity(true), Ok(()), "{t:?}");
        }
        // Alone it would read as "run as root": it only confirms.
        for t in [
            "all_calls_as_root = true\n",
            "act_as_caller = true\nall_calls_as_root = true\n",
        ] {
            let e = cfg(t).server.check_identity(true).unwrap_err().0;
            assert!(e.contains("only confirms"), "{t:?}: {e}");
        }
        // validate() checks it against this process's euid.
        let root = rustix::process::geteuid().is_root();
        assert_eq!(off.validate().is_err(), root);
        assert_eq!(confirmed.validate(), Ok(()));
    }
}
