//! `Config::validate`: the checks that need no filesystem, in the order
//! their errors are reported (the first one found is).

use std::collections::HashSet;

use super::{err, Config, ConfigError, MaxWaking, ServerConfig};
use super::{MAX_BLOCKING_LAZY_WAKE_US, MAX_INLINE_LARGE_WRITES_PER_TURN, MIN_RECORD_OVERHEAD};
use super::{
    MAX_CEPH_MOUNT_SYNCS, MAX_JOURNAL_COMMIT_THREADS, MAX_RECYCLED_BUFFERS, MAX_REPLY_BATCH,
    MAX_UDP_THREADS,
};
use crate::limits::{MAX_MAX_IO, MIN_MAX_IO, ROOM_HEAD};

impl Config {
    /// Check the values that do not need the filesystem.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let s = &self.server;
        listen(s)?;
        threads_and_sizes(s)?;
        at_least_one(s)?;
        durations(s)?;
        backends(s)?;
        idmap_domain(s)?;
        if s.nfs4_copy_sync_max > MAX_NFS4_COPY_SYNC {
            return err(format!(
                "server.nfs4_copy_sync_max must be at most {MAX_NFS4_COPY_SYNC} (one COPY holds a thread while it copies)"
            ));
        }
        if s.nfs4_copies_max > crate::state::copy::MAX_COPIES {
            return err(format!(
                "server.nfs4_copies_max must be at most {} (each running copy holds a thread)",
                crate::state::copy::MAX_COPIES
            ));
        }
        s.check_identity(rustix::process::geteuid().is_root())?;
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

fn listen(s: &ServerConfig) -> Result<(), ConfigError> {
    if s.listen.is_empty() {
        return err("server.listen: at least one address is needed");
    }
    let mut seen = HashSet::new();
    for a in &s.listen {
        if !seen.insert(a) {
            return err(format!("server.listen: {a} is listed twice"));
        }
    }
    Ok(())
}

fn threads_and_sizes(s: &ServerConfig) -> Result<(), ConfigError> {
    if s.worker_spin_us > 1000 {
        return err(format!(
            "server.worker_spin_us must be at most 1000, not {}",
            s.worker_spin_us
        ));
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
    // A thread each, only at start.
    if !(1..=1024).contains(&s.nlm_notify_parallel) {
        return err(format!(
            "server.nlm_notify_parallel must be in 1..=1024, not {}",
            s.nlm_notify_parallel
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
    if s.recycled_buffers > MAX_RECYCLED_BUFFERS {
        return err(format!(
            "server.recycled_buffers must be at most {MAX_RECYCLED_BUFFERS}, not {}",
            s.recycled_buffers
        ));
    }
    if s.inline_large_writes_per_turn > MAX_INLINE_LARGE_WRITES_PER_TURN {
        return err(format!(
            "server.inline_large_writes_per_turn must be at most \
             {MAX_INLINE_LARGE_WRITES_PER_TURN}, not {}",
            s.inline_large_writes_per_turn
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
    let least = u64::from(s.max_io) + u64::from(MIN_RECORD_OVERHEAD);
    if u64::from(s.max_record()) < least {
        return err(format!(
            "server.max_record ({}) must be at least server.max_io + {MIN_RECORD_OVERHEAD} \
             ({least})",
            s.max_record(),
        ));
    }
    // A READ (READDIR, READDIRPLUS) of up to max_io bytes reserves that
    // much reply room and ROOM_HEAD against the budget before it runs, and
    // waits until it fits: under a smaller budget it would wait forever.
    let room = u64::from(s.max_io) + ROOM_HEAD as u64;
    if s.max_buffered_bytes != 0 && (s.max_buffered_bytes as u64) < room {
        return err(format!(
            "server.max_buffered_bytes ({}) must be 0 or at least server.max_io + {ROOM_HEAD} \
             ({room}): a READ of max_io bytes reserves that much before it runs",
            s.max_buffered_bytes,
        ));
    }
    Ok(())
}

/// Bounds that 0 would turn into "nothing ever runs".
fn at_least_one(s: &ServerConfig) -> Result<(), ConfigError> {
    let waking = match s.max_waking {
        MaxWaking::N(n) => n,
        MaxWaking::Unlimited => usize::MAX,
    };
    for (k, v) in [
        ("queue_limit", s.queue_limit),
        ("max_waking", waking),
        ("max_connections", s.max_connections),
        ("max_inflight_per_conn", s.max_inflight_per_conn),
        ("max_conn_output", s.max_conn_output),
        ("idle_timeout_secs", s.idle_timeout_secs as usize),
        ("nlm_max_files", s.nlm_max_files),
        ("nlm_max_waiters", s.nlm_max_waiters),
        ("nlm_max_per_client", s.nlm_max_per_client),
        ("nlm_retry_ms", s.nlm_retry_ms as usize),
        ("nlm_callbacks_per_client", s.nlm_callbacks_per_client),
        ("nfs4_lease_secs", s.nfs4_lease_secs as usize),
        ("nfs4_max_clients", s.nfs4_max_clients),
        ("nfs4_sessions_per_client", s.nfs4_sessions_per_client),
        ("nfs4_slots_per_session", s.nfs4_slots_per_session),
        ("nfs4_owners_per_client", s.nfs4_owners_per_client),
        ("nfs4_stateids_per_client", s.nfs4_stateids_per_client),
        ("nfs4_max_stateids", s.nfs4_max_stateids),
        ("nfs4_reply_cache_bytes", s.nfs4_reply_cache_bytes),
        ("nfs4_idmap_cache", s.nfs4_idmap_cache),
        (
            "nfs4_copy_sync_max",
            s.nfs4_copy_sync_max.min(usize::MAX as u64) as usize,
        ),
        ("nfs4_copies_max", s.nfs4_copies_max),
        ("nfs4_delegations_per_client", s.nfs4_delegations_per_client),
        ("nfs4_max_delegations", s.nfs4_max_delegations),
        ("nfs4_max_leases", s.nfs4_max_leases),
    ] {
        if v == 0 {
            return err(format!("server.{k} must be at least 1"));
        }
    }
    Ok(())
}

/// The most `nfs4_copy_sync_max` may be: 4 GiB, seconds of copying on a
/// fast disk for the one thread a COPY holds.
pub const MAX_NFS4_COPY_SYNC: u64 = 4 << 30;

/// A domain of owner strings: a DNS name, not empty, without '@'.
fn idmap_domain(s: &ServerConfig) -> Result<(), ConfigError> {
    match &s.nfs4_idmap_domain {
        Some(d) if d.is_empty() || d.len() > 255 || d.contains('@') || d.contains(char::is_whitespace) => err(format!(
            "server.nfs4_idmap_domain must be a domain name (1 to 255 bytes, no '@' or spaces), not {d:?}"
        )),
        _ => Ok(()),
    }
}

/// Large durations would overflow Instant arithmetic.
fn durations(s: &ServerConfig) -> Result<(), ConfigError> {
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
    Ok(())
}

/// The caches and threads of the backends.
fn backends(s: &ServerConfig) -> Result<(), ConfigError> {
    for (k, v) in [
        ("path_cache_entries", s.path_cache_entries),
        ("verdict_cache_entries", s.verdict_cache_entries),
        ("handle_scan_waiters", s.handle_scan_waiters),
        ("object_cache_entries", s.object_cache_entries),
        ("open_file_cache_entries", s.open_file_cache_entries),
        // Unset: from RLIMIT_NOFILE.
        ("cache_fds", s.cache_fds.unwrap_or(1)),
        ("max_syncs_in_flight", s.max_syncs_in_flight),
    ] {
        if v == 0 {
            return err(format!("server.{k} must be at least 1"));
        }
    }
    if s.ceph_call_timeout_ms == 0 || s.ceph_call_timeout_ms > 600_000 {
        return err("server.ceph_call_timeout_ms must be 1 to 600000");
    }
    if s.ceph_call_threads == 0 || s.ceph_call_threads > 1024 {
        return err("server.ceph_call_threads must be 1 to 1024");
    }
    if s.ceph_listings == 0 || s.ceph_listings > 65_536 {
        return err("server.ceph_listings must be 1 to 65536");
    }
    if s.ceph_mount_syncs > MAX_CEPH_MOUNT_SYNCS {
        return err(format!(
            "server.ceph_mount_syncs must be 0 to {MAX_CEPH_MOUNT_SYNCS}"
        ));
    }
    if s.ceph_inode_cache_entries == 0 {
        return err("server.ceph_inode_cache_entries must be at least 1");
    }
    if !(1..=MAX_JOURNAL_COMMIT_THREADS).contains(&s.journal_commit_threads) {
        return err(format!(
            "server.journal_commit_threads must be 1 to {MAX_JOURNAL_COMMIT_THREADS}"
        ));
    }
    if s.blocking_lazy_wake_us > MAX_BLOCKING_LAZY_WAKE_US {
        // A call behind a long one waits this long at most: keep it short.
        return err(format!(
            "server.blocking_lazy_wake_us must be at most {MAX_BLOCKING_LAZY_WAKE_US}"
        ));
    }
    if s.flush_delay_ms > 60_000 {
        return err("server.flush_delay_ms must be at most 60000");
    }
    if s.handle_scan_wait_ms > 60_000 {
        return err("server.handle_scan_wait_ms must be at most 60000");
    }
    Ok(())
}
