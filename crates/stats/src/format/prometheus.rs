//! Prometheus text exposition (format 0.0.4).
//!
//! The exposition is a list of groups ([`GROUPS`]), each a small function
//! writing its families in order. Families with one series per listener,
//! pool, cache or export are rows of a table ([`Family`]): adding one is
//! adding a row; a family of another shape is a new group function.

use std::fmt::Write as _;

use crate::snapshot::{CacheCounts, ConnCounts, ExportCounts, LockCounts, Nfs4Counts, PoolCounts};
use crate::snapshot::{ProcCounts, Snapshot};

/// The Prometheus text exposition of a snapshot. Labels are bounded: the
/// procedure tables, the status and error names, the listener names.
pub fn prometheus(s: &Snapshot) -> String {
    let mut o = String::with_capacity(64 * 1024);
    for group in GROUPS {
        group(&mut o, s);
    }
    o
}

/// The groups of families, in the order they are written.
const GROUPS: [fn(&mut String, &Snapshot); 12] = [
    server,
    rpc_calls,
    rpc_errors,
    nfs_replies,
    request_durations,
    connections,
    pools,
    caches,
    exports,
    locks,
    nfs4,
    // After the cache families, where it has always been written.
    pool_queue_time,
];

/// Prometheus bucket bounds: (µs, `le` label).
const LE: [(u64, &str); 19] = [
    (10, "1e-05"),
    (25, "2.5e-05"),
    (50, "5e-05"),
    (100, "0.0001"),
    (250, "0.00025"),
    (500, "0.0005"),
    (1_000, "0.001"),
    (2_500, "0.0025"),
    (5_000, "0.005"),
    (10_000, "0.01"),
    (25_000, "0.025"),
    (50_000, "0.05"),
    (100_000, "0.1"),
    (250_000, "0.25"),
    (500_000, "0.5"),
    (1_000_000, "1"),
    (2_500_000, "2.5"),
    (5_000_000, "5"),
    (10_000_000, "10"),
];

/// Escape a label value (text format: backslash, quote, newline).
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o
}

/// A family's HELP and TYPE lines.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A family of one unlabelled series.
fn single(o: &mut String, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
    family(o, name, kind, help);
    let _ = writeln!(o, "{name} {value}");
}

fn proc_labels(p: &ProcCounts) -> String {
    format!(
        "program=\"{}\",version=\"{}\",procedure=\"{}\"",
        esc(&p.program),
        p.version,
        esc(&p.name)
    )
}

/// A family read from one kind of counts: a table row.
struct Family<T> {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    get: fn(&T) -> u64,
}

const fn counter<T>(name: &'static str, help: &'static str, get: fn(&T) -> u64) -> Family<T> {
    Family {
        name,
        kind: "counter",
        help,
        get,
    }
}

const fn gauge<T>(name: &'static str, help: &'static str, get: fn(&T) -> u64) -> Family<T> {
    Family {
        name,
        kind: "gauge",
        help,
        get,
    }
}

/// Every family of `table`, each with one series per item: the item's
/// labels (already escaped) and counts.
fn table<T>(o: &mut String, table: &[Family<T>], items: &[(String, &T)]) {
    for f in table {
        family(o, f.name, f.kind, f.help);
        for (labels, counts) in items {
            let _ = writeln!(o, "{}{{{labels}}} {}", f.name, (f.get)(counts));
        }
    }
}

/// Uptime and the statistics mode.
fn server(o: &mut String, s: &Snapshot) {
    single(
        o,
        "rnfsd_uptime_seconds",
        "gauge",
        "Seconds since the server started.",
        s.uptime_secs,
    );
    family(
        o,
        "rnfsd_stats_mode",
        "gauge",
        "How RPC statistics are kept (1 for the mode in force).",
    );
    let _ = writeln!(o, "rnfsd_stats_mode{{mode=\"{}\"}} 1", s.mode);
}

/// Records handed to dispatch, and calls per procedure.
fn rpc_calls(o: &mut String, s: &Snapshot) {
    single(
        o,
        "rnfsd_rpc_records_total",
        "counter",
        "RPC records handed to dispatch.",
        s.rpc.records,
    );
    family(
        o,
        "rnfsd_rpc_calls_total",
        "counter",
        "RPC calls by program, version and procedure.",
    );
    for p in &s.procs {
        let _ = writeln!(o, "rnfsd_rpc_calls_total{{{}}} {}", proc_labels(p), p.calls);
    }
}

/// RPC-level errors by kind, AUTH_ERROR by auth_stat.
fn rpc_errors(o: &mut String, s: &Snapshot) {
    family(
        o,
        "rnfsd_rpc_errors_total",
        "counter",
        "RPC-level errors: rejected or unanswered calls, by kind.",
    );
    let r = &s.rpc;
    for (k, v) in [
        ("prog_unavail", r.prog_unavail),
        ("prog_mismatch", r.prog_mismatch),
        ("proc_unavail", r.proc_unavail),
        ("garbage_args", r.garbage_args),
        ("system_err", r.system_err),
        ("rpc_mismatch", r.rpc_mismatch),
        ("dropped", r.dropped),
    ] {
        let _ = writeln!(o, "rnfsd_rpc_errors_total{{error=\"{k}\"}} {v}");
    }
    for (k, v) in &r.auth_errors {
        let _ = writeln!(
            o,
            "rnfsd_rpc_errors_total{{error=\"auth_error\",auth_stat=\"{}\"}} {v}",
            esc(k)
        );
    }
}

/// NFSv3 replies by status (every status, zeros too), and payload bytes.
fn nfs_replies(o: &mut String, s: &Snapshot) {
    family(
        o,
        "rnfsd_nfs_replies_total",
        "counter",
        "NFSv3 replies by nfsstat3.",
    );
    for st in crate::NFS_STATUSES.iter().map(|x| x.1).chain(["other"]) {
        let _ = writeln!(
            o,
            "rnfsd_nfs_replies_total{{status=\"{st}\"}} {}",
            s.nfs_status(st)
        );
    }
    single(
        o,
        "rnfsd_read_bytes_total",
        "counter",
        "NFSv3 READ payload bytes.",
        s.io.read_bytes,
    );
    single(
        o,
        "rnfsd_write_bytes_total",
        "counter",
        "NFSv3 WRITE payload bytes.",
        s.io.write_bytes,
    );
}

/// The latency histogram of every procedure.
fn request_durations(o: &mut String, s: &Snapshot) {
    family(
        o,
        "rnfsd_request_duration_seconds",
        "histogram",
        "Time in RPC dispatch (decode, handler, encode) per procedure.",
    );
    for p in &s.procs {
        let l = proc_labels(p);
        for (us, le) in LE {
            let _ = writeln!(
                o,
                "rnfsd_request_duration_seconds_bucket{{{l},le=\"{le}\"}} {}",
                p.latency.count_le(us)
            );
        }
        let _ = writeln!(
            o,
            "rnfsd_request_duration_seconds_bucket{{{l},le=\"+Inf\"}} {}",
            p.latency.count
        );
        let _ = writeln!(
            o,
            "rnfsd_request_duration_seconds_sum{{{l}}} {}",
            p.latency.sum_us as f64 / 1e6
        );
        let _ = writeln!(
            o,
            "rnfsd_request_duration_seconds_count{{{l}}} {}",
            p.latency.count
        );
    }
}

/// Per listener.
const CONNECTIONS: [Family<ConnCounts>; 13] = [
    gauge(
        "rnfsd_connections_open",
        "Open client connections.",
        |c| c.open,
    ),
    counter(
        "rnfsd_connections_opened_total",
        "Connections accepted.",
        |c| c.opened,
    ),
    counter(
        "rnfsd_connections_closed_total",
        "Connections closed.",
        |c| c.closed,
    ),
    counter(
        "rnfsd_connections_refused_total",
        "Connections refused (over max_connections with none idle, over the per-client limit, or not a listed client).",
        |c| c.refused,
    ),
    counter(
        "rnfsd_connections_evicted_total",
        "Idle connections closed to make room at max_connections.",
        |c| c.evicted,
    ),
    counter(
        "rnfsd_records_too_big_total",
        "Records over max_record (each closed its connection).",
        |c| c.records_too_big,
    ),
    counter(
        "rnfsd_transport_received_bytes_total",
        "Bytes read from clients.",
        |c| c.bytes_in,
    ),
    counter(
        "rnfsd_transport_sent_bytes_total",
        "Reply bytes written.",
        |c| c.bytes_out,
    ),
    counter(
        "rnfsd_transport_replies_total",
        "Replies fully written.",
        |c| c.replies_out,
    ),
    counter(
        "rnfsd_transport_writes_total",
        "Socket writes that carried replies (several replies may share one).",
        |c| c.writes_out,
    ),
    gauge(
        "rnfsd_transport_queued_reply_bytes",
        "Reply bytes waiting for a socket.",
        |c| c.reply_bytes_queued,
    ),
    counter(
        "rnfsd_transport_records_inline_total",
        "Records answered on the event loop thread.",
        |c| c.records_inline,
    ),
    counter(
        "rnfsd_transport_records_deferred_total",
        "Records offered to the event loop thread, run by a worker.",
        |c| c.records_deferred,
    ),
];

fn connections(o: &mut String, s: &Snapshot) {
    let items: Vec<_> = s
        .transports
        .iter()
        .map(|t| (format!("listener=\"{}\"", esc(&t.name)), &t.connections))
        .collect();
    table(o, &CONNECTIONS, &items);
}

/// Per listener's worker pool.
const POOLS: [Family<PoolCounts>; 19] = [
    gauge("rnfsd_pool_threads", "Live worker threads.", |p| p.threads),
    gauge("rnfsd_pool_idle_threads", "Workers parked idle.", |p| {
        p.idle
    }),
    gauge(
        "rnfsd_pool_waking_threads",
        "Workers woken, not yet running.",
        |p| p.waking,
    ),
    gauge("rnfsd_pool_running_threads", "Workers running jobs.", |p| {
        p.running
    }),
    gauge(
        "rnfsd_pool_queued_jobs",
        "Jobs waiting for a worker.",
        |p| p.queued,
    ),
    gauge(
        "rnfsd_pool_peak_waking_threads",
        "Most workers ever waking at once.",
        |p| p.peak_waking,
    ),
    counter("rnfsd_pool_wakeups_total", "Worker wakeups.", |p| p.wakeups),
    counter(
        "rnfsd_pool_wakeups_no_work_total",
        "Wakeups that found no work.",
        |p| p.wakeups_no_work,
    ),
    counter(
        "rnfsd_pool_spins_total",
        "Spins begun by a worker going idle (worker_spin).",
        |p| p.spins,
    ),
    counter(
        "rnfsd_pool_wakeups_spun_total",
        "Jobs that found a worker still spinning: no futex wake.",
        |p| p.wakeups_spun,
    ),
    counter(
        "rnfsd_pool_jobs_woken_total",
        "Jobs run right after a wakeup.",
        |p| p.jobs_woken,
    ),
    counter(
        "rnfsd_pool_jobs_inline_total",
        "Jobs run without a wakeup.",
        |p| p.jobs_inline,
    ),
    counter(
        "rnfsd_pool_jobs_left_total",
        "Jobs left to a running worker instead of waking one (blocking_lazy_wake_us).",
        |p| p.jobs_left,
    ),
    counter(
        "rnfsd_pool_overdue_kicks_total",
        "Wakeups for jobs left longer than blocking_lazy_wake_us.",
        |p| p.overdue_kicks,
    ),
    counter(
        "rnfsd_pool_jobs_panicked_total",
        "Jobs that panicked.",
        |p| p.jobs_panicked,
    ),
    counter(
        "rnfsd_pool_rejected_total",
        "Submissions refused: queue full.",
        |p| p.rejected_full,
    ),
    counter(
        "rnfsd_pool_threads_started_total",
        "Workers started.",
        |p| p.threads_started,
    ),
    counter(
        "rnfsd_pool_threads_retired_total",
        "Workers retired.",
        |p| p.threads_retired,
    ),
    counter(
        "rnfsd_pool_spawn_failures_total",
        "Worker spawns that failed.",
        |p| p.spawn_failures,
    ),
];

fn pool_items(s: &Snapshot) -> Vec<(String, &PoolCounts)> {
    s.transports
        .iter()
        .map(|t| (format!("pool=\"{}\"", esc(&t.name)), &t.pool))
        .collect()
}

fn pools(o: &mut String, s: &Snapshot) {
    table(o, &POOLS, &pool_items(s));
}

/// Queue time is in seconds, not a count: not a table row.
fn pool_queue_time(o: &mut String, s: &Snapshot) {
    family(
        o,
        "rnfsd_pool_queue_time_seconds_total",
        "counter",
        "Total time jobs waited in the queue.",
    );
    for (labels, p) in pool_items(s) {
        let _ = writeln!(
            o,
            "rnfsd_pool_queue_time_seconds_total{{{labels}}} {}",
            p.queue_time_ns as f64 / 1e9
        );
    }
}

/// Per export and cache.
const CACHES: [Family<CacheCounts>; 8] = [
    gauge("rnfsd_cache_entries", "Entries held.", |c| c.entries),
    gauge("rnfsd_cache_capacity", "Most entries held.", |c| c.capacity),
    counter("rnfsd_cache_hits_total", "Lookups that hit.", |c| c.hits),
    counter("rnfsd_cache_misses_total", "Lookups that missed.", |c| {
        c.misses
    }),
    counter(
        "rnfsd_cache_refused_total",
        "Inserts refused (no room).",
        |c| c.refused,
    ),
    counter(
        "rnfsd_cache_evicted_inline_total",
        "Entries evicted by a call at the bound.",
        |c| c.evicted_inline,
    ),
    counter(
        "rnfsd_cache_evicted_reclaim_total",
        "Entries evicted by background reclaim.",
        |c| c.evicted_reclaim,
    ),
    counter(
        "rnfsd_cache_removed_total",
        "Entries dropped: object deleted, or idle writer closed.",
        |c| c.removed,
    ),
];

fn caches(o: &mut String, s: &Snapshot) {
    let items: Vec<_> = s
        .exports
        .iter()
        .flat_map(|e| {
            e.caches.iter().map(|c| {
                let labels = format!("export=\"{}\",cache=\"{}\"", esc(&e.path), esc(&c.name));
                (labels, c)
            })
        })
        .collect();
    table(o, &CACHES, &items);
}

/// Per export: durability, write-behind, the descriptor budget, handle
/// walks, remote backends, write verifier resets.
const EXPORTS: [Family<ExportCounts>; 16] = [
    counter(
        "rnfsd_sync_requests_total",
        "Requests for durability (COMMIT, stable WRITE, synced namespace changes).",
        |e| e.sync_requests,
    ),
    counter(
        "rnfsd_sync_requests_parked_total",
        "Durability requests whose reply waited for a journal commit with no thread waiting.",
        |e| e.sync_requests_parked,
    ),
    counter(
        "rnfsd_sync_writebacks_waited_total",
        "Parked requests whose data write-back a commit thread waited for before its commit.",
        |e| e.sync_writebacks_waited,
    ),
    counter(
        "rnfsd_syncs_led_total",
        "Journal commits a calling thread made itself, nothing else committing.",
        |e| e.syncs_led,
    ),
    counter(
        "rnfsd_syncs_total",
        "Syncs run (group commit shares them).",
        |e| e.syncs,
    ),
    counter("rnfsd_sync_errors_total", "Syncs that failed.", |e| {
        e.sync_errors
    }),
    gauge(
        "rnfsd_syncs_peak_in_flight",
        "Most syncs running at once.",
        |e| e.syncs_peak_in_flight,
    ),
    counter(
        "rnfsd_write_behinds_total",
        "Writebacks started early for files that gathered write_behind_bytes of UNSTABLE data.",
        |e| e.write_behinds,
    ),
    counter(
        "rnfsd_write_behinds_on_loop_total",
        "Of the write-behinds, those an event loop started at the end of its turn.",
        |e| e.write_behinds_on_loop,
    ),
    gauge(
        "rnfsd_cache_fds",
        "Descriptors held by caches (budget shared by exports).",
        |e| e.fds_cached,
    ),
    gauge(
        "rnfsd_cache_fd_limit",
        "Bound on descriptors held by caches.",
        |e| e.fd_limit,
    ),
    counter(
        "rnfsd_handle_scan_waits_total",
        "Calls that waited for a walk of the export to find their object.",
        |e| e.scans_waited,
    ),
    counter(
        "rnfsd_handle_scan_busy_total",
        "Calls answered JUKEBOX while a walk had not found their object.",
        |e| e.scans_busy,
    ),
    counter(
        "rnfsd_backend_jukebox_total",
        "Calls a remote backend (CephFS) answered JUKEBOX under its time limit.",
        |e| e.calls_jukebox,
    ),
    counter(
        "rnfsd_backend_stalls_total",
        "Times a remote backend found its service stalled (a call past the limit).",
        |e| e.stalls,
    ),
    counter(
        "rnfsd_write_verifier_resets_total",
        "Write verifier resets after stable-storage errors.",
        |e| e.verifier_resets,
    ),
];

fn exports(o: &mut String, s: &Snapshot) {
    let items: Vec<_> = s
        .exports
        .iter()
        .map(|e| (format!("export=\"{}\"", esc(&e.path)), e))
        .collect();
    table(o, &EXPORTS, &items);
}

/// The lock manager's table, when NLM is served.
const LOCKS: [Family<LockCounts>; 4] = [
    gauge(
        "rnfsd_nlm_files",
        "Files held open for NLM lock owners.",
        |l| l.files,
    ),
    gauge(
        "rnfsd_nlm_ranges",
        "Byte ranges NLM clients hold locked.",
        |l| l.ranges,
    ),
    gauge(
        "rnfsd_nlm_waiters",
        "Blocked NLM lock requests waiting.",
        |l| l.waiters,
    ),
    gauge("rnfsd_nlm_shares", "NLM share reservations held.", |l| {
        l.shares
    }),
];

/// The NFSv4 state, when NFSv4 is served.
const NFS4: [Family<Nfs4Counts>; 12] = [
    gauge("rnfsd_nfs4_clients", "NFSv4 client records.", |n| n.clients),
    gauge("rnfsd_nfs4_sessions", "NFSv4 sessions.", |n| n.sessions),
    gauge(
        "rnfsd_nfs4_stateids",
        "NFSv4 open and lock stateids.",
        |n| n.stateids,
    ),
    gauge(
        "rnfsd_nfs4_reply_cache_bytes",
        "Bytes reserved for NFSv4 slot reply caches.",
        |n| n.reply_cache_bytes,
    ),
    gauge(
        "rnfsd_nfs4_in_grace",
        "1 while the NFSv4 grace period lasts.",
        |n| u64::from(n.in_grace),
    ),
    counter(
        "rnfsd_nfs4_clients_expired_total",
        "NFSv4 clients whose lease ran out.",
        |n| n.clients_expired,
    ),
    counter(
        "rnfsd_nfs4_replays_total",
        "NFSv4 requests answered from a slot's reply cache.",
        |n| n.replays,
    ),
    counter(
        "rnfsd_nfs4_reaped_stateids_total",
        "NFSv4 stateids of dropped clients freed by the reaper.",
        |n| n.reaped_stateids,
    ),
    gauge("rnfsd_nfs4_delegations", "NFSv4 delegations held.", |n| {
        n.delegations
    }),
    gauge(
        "rnfsd_nfs4_write_delegations",
        "NFSv4 write delegations held (of rnfsd_nfs4_delegations).",
        |n| n.write_delegations,
    ),
    counter(
        "rnfsd_nfs4_recalls_total",
        "NFSv4 delegations recalled (CB_RECALL asked for).",
        |n| n.recalls,
    ),
    counter(
        "rnfsd_nfs4_delegations_revoked_total",
        "NFSv4 delegations revoked, not returned a lease after their recall.",
        |n| n.delegations_revoked,
    ),
];

fn nfs4(o: &mut String, s: &Snapshot) {
    if let Some(n) = &s.nfs4 {
        for f in &NFS4 {
            single(o, f.name, f.kind, f.help, (f.get)(n));
        }
    }
}

fn locks(o: &mut String, s: &Snapshot) {
    if let Some(l) = &s.locks {
        for f in &LOCKS {
            single(o, f.name, f.kind, f.help, (f.get)(l));
        }
    }
}
