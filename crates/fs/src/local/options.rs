//! The local backend's options: what an export of a local directory may
//! be set to, their defaults, and a Debug that keeps the handle key out of
//! logs.

use std::sync::Arc;
use std::time::Duration;

use super::sys;
use crate::cache::Caches;
use crate::WriteVerifier;

/// How file handles are made and resolved (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandleMode {
    /// Kernel if open_by_handle_at works on the export root, else Path.
    Auto,
    Kernel,
    Path,
}

#[derive(Clone)]
pub struct LocalOptions {
    pub handle_mode: HandleMode,
    /// Secret for handle MACs; persist it so handles survive restarts.
    pub handle_key: [u8; 32],
    /// Enter other filesystems mounted inside the export (default false).
    pub cross_mounts: bool,
    /// Run each operation with the caller's fsuid/fsgid/groups (needs root).
    pub act_as_caller: bool,
    /// Bound of the inode -> location map (entries hold no descriptors).
    pub path_cache_entries: usize,
    /// Bound of the map of objects lately proven inside the export (no
    /// descriptors): an object opened by handle again within `verify_ttl`
    /// of its proof is not proven again.
    pub verdict_cache_entries: usize,
    /// Bound on directory entries one walk for lost handles visits.
    pub handle_scan_limit: usize,
    /// Workers waiting at once for a walk to find a handle's object; more
    /// answer JUKEBOX at once.
    pub handle_scan_waiters: usize,
    /// How long a worker waits for the walk before answering JUKEBOX.
    pub handle_scan_wait: Duration,
    /// How long a proof that a cached object lies inside the export is
    /// trusted before it is made again (a local user who moves an object out
    /// of the export keeps access through the server no longer than this).
    pub verify_ttl: Duration,
    /// Bound of the handle -> object cache (one O_PATH descriptor each).
    pub object_cache_entries: usize,
    /// Bound of the open-file cache (one descriptor each).
    pub open_file_cache_entries: usize,
    /// The descriptor budget and reclaimer shared with other exports; None:
    /// a private one of `DEFAULT_CACHE_FDS`.
    pub caches: Option<Arc<Caches>>,
    /// The server's write verifier, reset on stable-storage errors; None: a
    /// private one.
    pub write_verifier: Option<Arc<WriteVerifier>>,
    /// exports(5) `sync` (the default): namespace changes and SETATTR are on
    /// stable storage before the reply (RFC 1813 §4.8); false is `async`.
    /// COMMIT and stable WRITEs sync either way.
    pub sync: bool,
    /// Syncs (fsync) running at once for this export; more requests queue
    /// or share a running one's successor (group commit).
    pub max_syncs_in_flight: usize,
    /// Threads committing the journal of a `sync` export on ext4 or XFS for
    /// calls whose replies wait for it (`journal.rs`); 1 to
    /// `limits::owed::MAX_THREADS`, and at most `max_syncs_in_flight`.
    pub journal_commit_threads: usize,
    /// The journal commit threads run under SCHED_BATCH
    /// (`rnfsd_pool::sched`): their wakeups do not preempt a running
    /// thread.
    pub journal_commit_batch: bool,
    /// The most unsynced bytes of one file (`OpenFile::unsynced_bytes`)
    /// whose writeback a COMMIT or stable WRITE leaves the journal commit
    /// thread to wait for (`commit.rs`); a file with more is waited for by
    /// its call's own thread, so one large COMMIT never holds back the
    /// commits other calls wait for. 0: every call waits for its own.
    pub owed_writeback_bytes: u64,
    /// How long after a written descriptor was closed uncommitted the
    /// background `syncfs` runs (`flusher.rs`); a COMMIT does not wait for
    /// it.
    pub flush_delay: Duration,
    /// UNSTABLE bytes a writer gathers before a background thread starts
    /// their writeback (`behind.rs`); 0: COMMIT flushes everything.
    pub write_behind_bytes: u64,
}

/// `LocalOptions::flush_delay` by default.
pub const DEFAULT_FLUSH_DELAY: Duration = Duration::from_secs(5);

/// `LocalOptions::owed_writeback_bytes` by default: 1 MiB, one WRITE of
/// the largest size we offer, a few milliseconds of a disk's time; a
/// COMMIT of small files (fs_mark's 4 KiB) always hands its wait over.
pub const DEFAULT_OWED_WRITEBACK_BYTES: u64 = 1 << 20;

/// `LocalOptions::write_behind_bytes` by default: 4 MiB. With the loop
/// device under the export doing direct I/O (as a disk), 1 MiB WRITEs +
/// COMMIT ran 1.37x-1.64x at 1, 4 and 16 streams; over a loop device
/// caching its image file, 16 streams lost (each cache flush there is an
/// fsync of the image: docs/request-path.md, "Write-behind").
pub const DEFAULT_WRITE_BEHIND_BYTES: u64 = 4 << 20;

/// The descriptor budget of a backend opened without a shared one.
pub const DEFAULT_CACHE_FDS: usize = 4096;

/// Debug output leaves the secret key out (it ends up in logs).
impl std::fmt::Debug for LocalOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalOptions")
            .field("handle_mode", &self.handle_mode)
            .field("handle_key", &"<redacted>")
            .field("cross_mounts", &self.cross_mounts)
            .field("act_as_caller", &self.act_as_caller)
            .field("path_cache_entries", &self.path_cache_entries)
            .field("verdict_cache_entries", &self.verdict_cache_entries)
            .field("handle_scan_limit", &self.handle_scan_limit)
            .field("handle_scan_waiters", &self.handle_scan_waiters)
            .field("handle_scan_wait", &self.handle_scan_wait)
            .field("verify_ttl", &self.verify_ttl)
            .field("object_cache_entries", &self.object_cache_entries)
            .field("open_file_cache_entries", &self.open_file_cache_entries)
            .field("sync", &self.sync)
            .field("max_syncs_in_flight", &self.max_syncs_in_flight)
            .field("journal_commit_threads", &self.journal_commit_threads)
            .field("journal_commit_batch", &self.journal_commit_batch)
            .field("owed_writeback_bytes", &self.owed_writeback_bytes)
            .field("flush_delay", &self.flush_delay)
            .field("write_behind_bytes", &self.write_behind_bytes)
            .finish()
    }
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            handle_mode: HandleMode::Auto,
            handle_key: [0; 32],
            cross_mounts: false,
            act_as_caller: sys::geteuid() == 0,
            path_cache_entries: 1_000_000,
            verdict_cache_entries: 262_144,
            handle_scan_limit: 1_000_000,
            handle_scan_waiters: 8,
            handle_scan_wait: Duration::from_secs(1),
            verify_ttl: Duration::from_secs(5),
            object_cache_entries: 8192,
            open_file_cache_entries: 4096,
            caches: None,
            write_verifier: None,
            sync: true,
            // As many as the blocking pool's threads (64): measured against
            // 16 and 4 with fs_mark at 16-256 streams, 64 ran 1.0x, 1.19x
            // and 1.16x of 16 with fewer context switches per file and less
            // spread; 4 ran 0.57x-0.70x (docs/durability.md).
            max_syncs_in_flight: 64,
            // One gathers bigger batches than four (`limits::owed::MAX_THREADS`).
            journal_commit_threads: 1,
            journal_commit_batch: false,
            owed_writeback_bytes: DEFAULT_OWED_WRITEBACK_BYTES,
            flush_delay: DEFAULT_FLUSH_DELAY,
            write_behind_bytes: DEFAULT_WRITE_BEHIND_BYTES,
        }
    }
}
