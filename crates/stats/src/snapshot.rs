//! A point-in-time sum of every counter, as the admin socket sends it (JSON).

use std::collections::BTreeMap;
use std::time::UNIX_EPOCH;

use rnfsd_transport::{PoolStats, TransportStats};
use serde::{Deserialize, Serialize};

use crate::hist::{self, Hist};
use crate::{
    rpc, Mode, Registry, PROC_SLOTS, S_AUTH, S_BAD_REPLY, S_DROPPED, S_GARBAGE_ARGS, S_NFS,
    S_PROCS, S_PROC_UNAVAIL, S_PROG_MISMATCH, S_PROG_UNAVAIL, S_READ_BYTES, S_RPC_MISMATCH,
    S_SUCCESS, S_SYSTEM_ERR, S_WRITE_BYTES,
};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub mode: Mode,
    pub shards: usize,
    /// Server start, seconds since the Unix epoch.
    pub started_unix: u64,
    pub uptime_secs: f64,
    /// Seconds since the last reset (or start).
    pub since_reset_secs: f64,
    pub rpc: RpcCounts,
    /// NFSv3 replies by nfsstat3 name (non-zero ones only).
    pub nfs_replies: BTreeMap<String, u64>,
    pub io: IoCounts,
    /// Every procedure served, in table order.
    pub procs: Vec<ProcCounts>,
    pub transports: Vec<TransportCounts>,
    /// Each export's backend caches and handle walks.
    #[serde(default)]
    pub exports: Vec<ExportCounts>,
    /// The lock manager's table (None: NLM not served).
    #[serde(default)]
    pub locks: Option<LockCounts>,
    /// The NFSv4 state (None: NFSv4 not served).
    #[serde(default)]
    pub nfs4: Option<Nfs4Counts>,
}

/// The NFSv4 state now: client records, sessions, stateids (gauges),
/// whether the grace period is on, and what it has counted since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nfs4Counts {
    pub clients: u64,
    pub sessions: u64,
    pub stateids: u64,
    pub reply_cache_bytes: u64,
    pub in_grace: bool,
    /// Since start: clients whose lease ran out, slot replays answered
    /// from the reply cache, stateids freed by the reaper.
    pub clients_expired: u64,
    pub replays: u64,
    pub reaped_stateids: u64,
    /// Delegations held now (gauge); recalls asked for and delegations
    /// revoked for want of a return, since start.
    #[serde(default)]
    pub delegations: u64,
    /// Of which write delegations (gauge).
    #[serde(default)]
    pub write_delegations: u64,
    #[serde(default)]
    pub recalls: u64,
    #[serde(default)]
    pub delegations_revoked: u64,
}

/// The lock manager's table now (gauges): files held open for lock
/// owners, their locked ranges, blocked requests, share reservations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockCounts {
    pub files: u64,
    pub ranges: u64,
    pub waiters: u64,
    pub shares: u64,
}

/// One export's backend: its caches, the descriptor budget (shared by all
/// exports), the walks that look for handles' objects, write verifier
/// resets. Counters since the last reset; entries, capacities and
/// descriptors are gauges.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportCounts {
    pub path: String,
    pub caches: Vec<CacheCounts>,
    pub fds_cached: u64,
    pub fd_limit: u64,
    /// Group commit: requests for durability (COMMIT, stable WRITE, synced
    /// namespace changes: one or two each), syncs run for them (fewer when
    /// requests shared one), sync errors, and the most syncs run at once
    /// (a gauge).
    #[serde(default)]
    pub sync_requests: u64,
    #[serde(default)]
    pub syncs: u64,
    #[serde(default)]
    pub sync_errors: u64,
    #[serde(default)]
    pub syncs_peak_in_flight: u64,
    /// Of `sync_requests`, those whose reply waited for a journal commit
    /// with no thread waiting (sent by the thread that made the commit).
    #[serde(default)]
    pub sync_requests_parked: u64,
    /// Journal commits a calling thread made itself, nothing else
    /// committing or waiting (counted in `syncs` too).
    #[serde(default)]
    pub syncs_led: u64,
    /// Of `sync_requests_parked`, those whose data write-back a commit
    /// thread waited for before its commit (COMMIT, stable WRITE).
    #[serde(default)]
    pub sync_writebacks_waited: u64,
    /// Flushes (one syncfs each) run for written files closed before their
    /// data was committed (evicted, idle).
    #[serde(default)]
    pub flushes: u64,
    /// Writebacks started early for files that gathered
    /// `write_behind_bytes` of UNSTABLE data.
    #[serde(default)]
    pub write_behinds: u64,
    /// Of them, started by an event loop at the end of its turn.
    #[serde(default)]
    pub write_behinds_on_loop: u64,
    /// Calls that waited for a walk of the export; of them, answered
    /// JUKEBOX because it had not found the object yet (or too many waited).
    pub scans_waited: u64,
    pub scans_busy: u64,
    pub scan_passes: u64,
    pub verifier_resets: u64,
    /// Calls a remote backend (CephFS) answered JUKEBOX under its time
    /// limit, and times it found the remote service stalled.
    #[serde(default)]
    pub calls_jukebox: u64,
    #[serde(default)]
    pub stalls: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheCounts {
    /// "objects" (handle to object) or "files" (open files).
    pub name: String,
    pub capacity: u64,
    pub entries: u64,
    pub hits: u64,
    pub misses: u64,
    pub inserts: u64,
    /// Inserts refused: the shard was full of entries in use, or the
    /// descriptor budget was spent.
    pub refused: u64,
    pub evicted_inline: u64,
    pub evicted_reclaim: u64,
    /// Entries dropped because their object was deleted, or idle writers.
    pub removed: u64,
}

impl CacheCounts {
    /// Hits per lookup, 0 when there were none.
    pub fn hit_rate(&self) -> f64 {
        let n = self.hits + self.misses;
        if n == 0 {
            0.0
        } else {
            self.hits as f64 / n as f64
        }
    }

    fn since(&self, b: &CacheCounts) -> CacheCounts {
        CacheCounts {
            name: self.name.clone(),
            capacity: self.capacity,
            entries: self.entries,
            hits: self.hits.saturating_sub(b.hits),
            misses: self.misses.saturating_sub(b.misses),
            inserts: self.inserts.saturating_sub(b.inserts),
            refused: self.refused.saturating_sub(b.refused),
            evicted_inline: self.evicted_inline.saturating_sub(b.evicted_inline),
            evicted_reclaim: self.evicted_reclaim.saturating_sub(b.evicted_reclaim),
            removed: self.removed.saturating_sub(b.removed),
        }
    }
}

impl ExportCounts {
    /// Counters since `base` (gauges kept as they are now).
    pub fn since(&self, base: &ExportCounts) -> ExportCounts {
        ExportCounts {
            path: self.path.clone(),
            caches: self
                .caches
                .iter()
                .map(|c| match base.caches.iter().find(|b| b.name == c.name) {
                    Some(b) => c.since(b),
                    None => c.clone(),
                })
                .collect(),
            fds_cached: self.fds_cached,
            fd_limit: self.fd_limit,
            sync_requests: self.sync_requests.saturating_sub(base.sync_requests),
            syncs: self.syncs.saturating_sub(base.syncs),
            sync_errors: self.sync_errors.saturating_sub(base.sync_errors),
            syncs_peak_in_flight: self.syncs_peak_in_flight,
            sync_requests_parked: self
                .sync_requests_parked
                .saturating_sub(base.sync_requests_parked),
            syncs_led: self.syncs_led.saturating_sub(base.syncs_led),
            sync_writebacks_waited: self
                .sync_writebacks_waited
                .saturating_sub(base.sync_writebacks_waited),
            flushes: self.flushes.saturating_sub(base.flushes),
            write_behinds: self.write_behinds.saturating_sub(base.write_behinds),
            write_behinds_on_loop: self
                .write_behinds_on_loop
                .saturating_sub(base.write_behinds_on_loop),
            scans_waited: self.scans_waited.saturating_sub(base.scans_waited),
            scans_busy: self.scans_busy.saturating_sub(base.scans_busy),
            scan_passes: self.scan_passes.saturating_sub(base.scan_passes),
            verifier_resets: self.verifier_resets.saturating_sub(base.verifier_resets),
            calls_jukebox: self.calls_jukebox.saturating_sub(base.calls_jukebox),
            stalls: self.stalls.saturating_sub(base.stalls),
        }
    }
}

/// RPC-level outcomes of every record handed to dispatch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcCounts {
    /// Records received (every call of the service).
    pub records: u64,
    /// Replies with accept_stat SUCCESS.
    pub success: u64,
    /// No reply sent: unparseable header, not a CALL, or a handler's Drop.
    pub dropped: u64,
    pub rpc_mismatch: u64,
    pub prog_unavail: u64,
    pub prog_mismatch: u64,
    pub proc_unavail: u64,
    pub garbage_args: u64,
    pub system_err: u64,
    /// AUTH_ERROR replies by auth_stat name (non-zero only).
    pub auth_errors: BTreeMap<String, u64>,
    /// Replies we could not classify (should stay 0).
    pub bad_reply: u64,
}

impl RpcCounts {
    /// knfsd's rpcbadfmt: calls refused for their form.
    pub fn badfmt(&self) -> u64 {
        self.rpc_mismatch
            + self.prog_unavail
            + self.prog_mismatch
            + self.proc_unavail
            + self.garbage_args
    }
    pub fn badauth(&self) -> u64 {
        self.auth_errors.values().sum()
    }
    /// Every RPC-level error, drops included.
    pub fn errors(&self) -> u64 {
        self.badfmt() + self.badauth() + self.system_err + self.dropped
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoCounts {
    /// NFSv3 READ payload bytes returned.
    pub read_bytes: u64,
    /// NFSv3 WRITE payload bytes written (the reply's count).
    pub write_bytes: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcCounts {
    pub program: String,
    pub prog: u32,
    pub version: u32,
    pub proc_: u32,
    pub name: String,
    pub calls: u64,
    /// p50/p90/p99, computed server-side for tools that only read JSON.
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    /// Time in dispatch (decode, handler, encode), µs.
    pub latency: Hist,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransportCounts {
    pub name: String,
    pub connections: ConnCounts,
    pub pool: PoolCounts,
}

/// `rnfsd_transport::TransportStats`; counters since the last reset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnCounts {
    pub open: u64,
    pub opened: u64,
    pub closed: u64,
    pub refused: u64,
    /// Idle connections closed to make room at max_connections.
    #[serde(default)]
    pub evicted: u64,
    /// Bytes held now for records and queued replies (max_buffered_bytes).
    #[serde(default)]
    pub buffered_bytes: u64,
    pub records_in: u64,
    pub records_too_big: u64,
    pub bytes_in: u64,
    pub replies_out: u64,
    /// Socket writes that carried replies (replies_out / writes_out: how
    /// many left together).
    #[serde(default)]
    pub writes_out: u64,
    pub bytes_out: u64,
    pub reply_bytes_queued: u64,
    /// Records answered on the event loop thread (run to completion), and
    /// offered there but sent to a worker after all.
    #[serde(default)]
    pub records_inline: u64,
    #[serde(default)]
    pub records_deferred: u64,
}

/// `rnfsd_pool::PoolStats`: gauges now, counters since the last reset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolCounts {
    pub threads: u64,
    pub idle: u64,
    pub waking: u64,
    pub running: u64,
    pub queued: u64,
    pub peak_waking: u64,
    pub wakeups: u64,
    pub wakeups_no_work: u64,
    pub jobs_woken: u64,
    pub jobs_inline: u64,
    pub jobs_panicked: u64,
    pub queue_time_ns: u64,
    pub rejected_full: u64,
    /// Jobs left to a running worker (`lazy_wake`, the blocking pool).
    #[serde(default)]
    pub jobs_left: u64,
    /// Wakeups for jobs left longer than the bound.
    #[serde(default)]
    pub overdue_kicks: u64,
    /// Spins begun by a worker going idle (`worker_spin`).
    #[serde(default)]
    pub spins: u64,
    /// Jobs that found a worker still spinning: no futex wake.
    #[serde(default)]
    pub wakeups_spun: u64,
    pub threads_started: u64,
    pub threads_retired: u64,
    pub spawn_failures: u64,
}

impl Snapshot {
    pub fn to_json(&self) -> String {
        // Plain data with string keys: serialization cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn from_json(s: &str) -> Result<Snapshot, String> {
        serde_json::from_str(s).map_err(|e| e.to_string())
    }

    /// Calls of every procedure of one program.
    pub fn program_calls(&self, program: &str) -> u64 {
        self.procs
            .iter()
            .filter(|p| p.program == program)
            .map(|p| p.calls)
            .sum()
    }

    pub fn proc(&self, program: &str, name: &str) -> Option<&ProcCounts> {
        self.procs
            .iter()
            .find(|p| p.program == program && p.name == name)
    }

    pub fn nfs_status(&self, name: &str) -> u64 {
        self.nfs_replies.get(name).copied().unwrap_or(0)
    }
}

pub(crate) fn take(r: &Registry) -> Snapshot {
    let now = std::time::Instant::now();
    let reset_at = *r.reset_at.lock().unwrap_or_else(|e| e.into_inner());
    let on = r.mode != Mode::Off;
    let rpc = rpc_counts(r, on);
    let nfs_replies = nfs_replies(r, on);
    let procs = proc_counts(r, on);
    let transports = {
        let src = r.sources.lock().unwrap_or_else(|e| e.into_inner());
        src.iter()
            .map(|s| {
                let (t, p) = (s.read)();
                let (bt, bp) = &s.base;
                TransportCounts {
                    name: s.name.clone(),
                    connections: conn_counts(&t, bt),
                    pool: pool_counts(&p, bp),
                }
            })
            .collect()
    };
    let exports = export_counts(r);
    let nfs4 = r
        .nfs4
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|f| f());
    let locks = r
        .locks
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|f| f());
    Snapshot {
        exports,
        locks,
        nfs4,
        mode: r.mode,
        shards: r.shards,
        started_unix: r
            .started_wall
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        uptime_secs: now.duration_since(r.started).as_secs_f64(),
        since_reset_secs: now.duration_since(reset_at).as_secs_f64(),
        rpc,
        nfs_replies,
        io: IoCounts {
            read_bytes: r.sum(S_READ_BYTES),
            write_bytes: r.sum(S_WRITE_BYTES),
        },
        procs,
        transports,
    }
}

/// RPC-level outcomes; AUTH_ERROR reasons only when counting is `on`.
fn rpc_counts(r: &Registry, on: bool) -> RpcCounts {
    let mut auth_errors = BTreeMap::new();
    if on {
        for i in 0..rpc::AUTH_SLOTS {
            let n = r.sum(S_AUTH + i);
            if n > 0 {
                auth_errors.insert(rpc::auth_stat_name(i).to_owned(), n);
            }
        }
    }
    let mut c = RpcCounts {
        records: 0,
        success: r.sum(S_SUCCESS),
        dropped: r.sum(S_DROPPED),
        rpc_mismatch: r.sum(S_RPC_MISMATCH),
        prog_unavail: r.sum(S_PROG_UNAVAIL),
        prog_mismatch: r.sum(S_PROG_MISMATCH),
        proc_unavail: r.sum(S_PROC_UNAVAIL),
        garbage_args: r.sum(S_GARBAGE_ARGS),
        system_err: r.sum(S_SYSTEM_ERR),
        auth_errors,
        bad_reply: r.sum(S_BAD_REPLY),
    };
    // Every record has one outcome (`Registry::record`).
    let auth: u64 = (0..rpc::AUTH_SLOTS).map(|i| r.sum(S_AUTH + i)).sum();
    c.records = c.success
        + c.dropped
        + c.rpc_mismatch
        + c.prog_unavail
        + c.prog_mismatch
        + c.proc_unavail
        + c.garbage_args
        + c.system_err
        + auth;
    c
}

/// NFSv3 replies by status, the non-zero ones (none when counting is off).
fn nfs_replies(r: &Registry, on: bool) -> BTreeMap<String, u64> {
    let mut nfs_replies = BTreeMap::new();
    if on {
        for i in 0..rpc::NFS_SLOTS {
            let n = r.sum(S_NFS + i);
            if n > 0 {
                nfs_replies.insert(rpc::nfsstat3_name(i).to_owned(), n);
            }
        }
    }
    nfs_replies
}

/// Every procedure row with its calls and latency (zeros when off).
fn proc_counts(r: &Registry, on: bool) -> Vec<ProcCounts> {
    let mut dense = vec![0u64; hist::BUCKETS];
    r.procs
        .iter()
        .enumerate()
        .map(|(row, p)| {
            let mut pc = ProcCounts {
                program: p.program.to_owned(),
                prog: p.prog,
                version: p.vers,
                proc_: p.proc_,
                name: p.name.to_owned(),
                ..ProcCounts::default()
            };
            if on {
                let base = S_PROCS + row * PROC_SLOTS;
                for (b, d) in dense.iter_mut().enumerate() {
                    *d = r.sum(base + 2 + b);
                }
                pc.latency = Hist::from_dense(&dense, r.sum(base), r.max(base + 1));
                // Every call lands in one bucket.
                pc.calls = pc.latency.count;
                pc.p50_us = pc.latency.quantile(0.5);
                pc.p90_us = pc.latency.quantile(0.9);
                pc.p99_us = pc.latency.quantile(0.99);
            }
            pc
        })
        .collect()
}

/// A transport's counters since `bt` (its values at the last reset);
/// gauges as they are.
fn conn_counts(t: &TransportStats, bt: &TransportStats) -> ConnCounts {
    ConnCounts {
        open: t.connections_open,
        opened: t
            .connections_accepted
            .saturating_sub(bt.connections_accepted),
        closed: t.connections_closed.saturating_sub(bt.connections_closed),
        refused: t.connections_refused.saturating_sub(bt.connections_refused),
        evicted: t.connections_evicted.saturating_sub(bt.connections_evicted),
        buffered_bytes: t.buffered_bytes,
        records_in: t.records_in.saturating_sub(bt.records_in),
        records_too_big: t.records_too_big.saturating_sub(bt.records_too_big),
        bytes_in: t.bytes_in.saturating_sub(bt.bytes_in),
        replies_out: t.replies_out.saturating_sub(bt.replies_out),
        writes_out: t.writes_out.saturating_sub(bt.writes_out),
        bytes_out: t.bytes_out.saturating_sub(bt.bytes_out),
        reply_bytes_queued: t.reply_bytes_queued,
        records_inline: t.records_inline.saturating_sub(bt.records_inline),
        records_deferred: t.records_deferred.saturating_sub(bt.records_deferred),
    }
}

/// A pool's counters since `bp`; gauges as they are.
fn pool_counts(p: &PoolStats, bp: &PoolStats) -> PoolCounts {
    PoolCounts {
        threads: p.threads as u64,
        idle: p.idle as u64,
        waking: p.waking as u64,
        running: p.running as u64,
        queued: p.queued as u64,
        peak_waking: p.peak_waking as u64,
        wakeups: p.wakeups.saturating_sub(bp.wakeups),
        wakeups_no_work: p.wakeups_no_work.saturating_sub(bp.wakeups_no_work),
        jobs_woken: p.jobs_woken.saturating_sub(bp.jobs_woken),
        jobs_inline: p.jobs_inline.saturating_sub(bp.jobs_inline),
        jobs_panicked: p.jobs_panicked.saturating_sub(bp.jobs_panicked),
        queue_time_ns: p.queue_time_ns.saturating_sub(bp.queue_time_ns),
        rejected_full: p.rejected_full.saturating_sub(bp.rejected_full),
        jobs_left: p.jobs_left.saturating_sub(bp.jobs_left),
        overdue_kicks: p.overdue_kicks.saturating_sub(bp.overdue_kicks),
        spins: p.spins.saturating_sub(bp.spins),
        wakeups_spun: p.wakeups_spun.saturating_sub(bp.wakeups_spun),
        threads_started: p.threads_started.saturating_sub(bp.threads_started),
        threads_retired: p.threads_retired.saturating_sub(bp.threads_retired),
        spawn_failures: p.spawn_failures.saturating_sub(bp.spawn_failures),
    }
}

/// Each export's counters since its last reset; exports that are gone
/// (removed by a reload) are dropped here.
fn export_counts(r: &Registry) -> Vec<ExportCounts> {
    let mut ex = r.exports.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = Vec::with_capacity(ex.len());
    ex.retain(|e| match (e.read)() {
        Some(now) => {
            out.push(now.since(&e.base));
            true
        }
        None => false,
    });
    out
}
