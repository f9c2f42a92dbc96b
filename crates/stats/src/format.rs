//! Renderings of a snapshot: Prometheus text exposition (format 0.0.4),
//! /proc/net/rpc/nfsd-style lines, an nfsstat-like report and a live view.

use std::fmt::Write as _;

use crate::hist::Hist;
use crate::snapshot::{ProcCounts, Snapshot};

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

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn proc_labels(p: &ProcCounts) -> String {
    format!(
        "program=\"{}\",version=\"{}\",procedure=\"{}\"",
        esc(&p.program),
        p.version,
        esc(&p.name)
    )
}

/// The Prometheus text exposition of a snapshot. Labels are bounded: the
/// procedure tables, the status and error names, the listener names.
pub fn prometheus(s: &Snapshot) -> String {
    let mut o = String::with_capacity(64 * 1024);
    family(
        &mut o,
        "rnfsd_uptime_seconds",
        "gauge",
        "Seconds since the server started.",
    );
    let _ = writeln!(o, "rnfsd_uptime_seconds {}", s.uptime_secs);
    family(
        &mut o,
        "rnfsd_stats_mode",
        "gauge",
        "How RPC statistics are kept (1 for the mode in force).",
    );
    let _ = writeln!(o, "rnfsd_stats_mode{{mode=\"{}\"}} 1", s.mode);

    family(
        &mut o,
        "rnfsd_rpc_records_total",
        "counter",
        "RPC records handed to dispatch.",
    );
    let _ = writeln!(o, "rnfsd_rpc_records_total {}", s.rpc.records);
    family(
        &mut o,
        "rnfsd_rpc_calls_total",
        "counter",
        "RPC calls by program, version and procedure.",
    );
    for p in &s.procs {
        let _ = writeln!(o, "rnfsd_rpc_calls_total{{{}}} {}", proc_labels(p), p.calls);
    }
    family(
        &mut o,
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
    family(
        &mut o,
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
    family(
        &mut o,
        "rnfsd_read_bytes_total",
        "counter",
        "NFSv3 READ payload bytes.",
    );
    let _ = writeln!(o, "rnfsd_read_bytes_total {}", s.io.read_bytes);
    family(
        &mut o,
        "rnfsd_write_bytes_total",
        "counter",
        "NFSv3 WRITE payload bytes.",
    );
    let _ = writeln!(o, "rnfsd_write_bytes_total {}", s.io.write_bytes);

    family(
        &mut o,
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

    type Get<T> = fn(&T) -> u64;
    let conn: [(&str, &str, &str, Get<crate::snapshot::ConnCounts>); 13] = [
        (
            "rnfsd_connections_open",
            "gauge",
            "Open client connections.",
            |c| c.open,
        ),
        (
            "rnfsd_connections_opened_total",
            "counter",
            "Connections accepted.",
            |c| c.opened,
        ),
        (
            "rnfsd_connections_closed_total",
            "counter",
            "Connections closed.",
            |c| c.closed,
        ),
        (
            "rnfsd_connections_refused_total",
            "counter",
            "Connections refused (over max_connections with none idle, over the per-client limit, or not a listed client).",
            |c| c.refused,
        ),
        (
            "rnfsd_connections_evicted_total",
            "counter",
            "Idle connections closed to make room at max_connections.",
            |c| c.evicted,
        ),
        (
            "rnfsd_records_too_big_total",
            "counter",
            "Records over max_record (each closed its connection).",
            |c| c.records_too_big,
        ),
        (
            "rnfsd_transport_received_bytes_total",
            "counter",
            "Bytes read from clients.",
            |c| c.bytes_in,
        ),
        (
            "rnfsd_transport_sent_bytes_total",
            "counter",
            "Reply bytes written.",
            |c| c.bytes_out,
        ),
        (
            "rnfsd_transport_replies_total",
            "counter",
            "Replies fully written.",
            |c| c.replies_out,
        ),
        (
            "rnfsd_transport_writes_total",
            "counter",
            "Socket writes that carried replies (several replies may share one).",
            |c| c.writes_out,
        ),
        (
            "rnfsd_transport_queued_reply_bytes",
            "gauge",
            "Reply bytes waiting for a socket.",
            |c| c.reply_bytes_queued,
        ),
        (
            "rnfsd_transport_records_inline_total",
            "counter",
            "Records answered on the event loop thread.",
            |c| c.records_inline,
        ),
        (
            "rnfsd_transport_records_deferred_total",
            "counter",
            "Records offered to the event loop thread, run by a worker.",
            |c| c.records_deferred,
        ),
    ];
    for (name, kind, help, get) in conn {
        family(&mut o, name, kind, help);
        for t in &s.transports {
            let _ = writeln!(
                o,
                "{name}{{listener=\"{}\"}} {}",
                esc(&t.name),
                get(&t.connections)
            );
        }
    }
    let pool: [(&str, &str, &str, Get<crate::snapshot::PoolCounts>); 17] = [
        ("rnfsd_pool_threads", "gauge", "Live worker threads.", |p| {
            p.threads
        }),
        (
            "rnfsd_pool_idle_threads",
            "gauge",
            "Workers parked idle.",
            |p| p.idle,
        ),
        (
            "rnfsd_pool_waking_threads",
            "gauge",
            "Workers woken, not yet running.",
            |p| p.waking,
        ),
        (
            "rnfsd_pool_running_threads",
            "gauge",
            "Workers running jobs.",
            |p| p.running,
        ),
        (
            "rnfsd_pool_queued_jobs",
            "gauge",
            "Jobs waiting for a worker.",
            |p| p.queued,
        ),
        (
            "rnfsd_pool_peak_waking_threads",
            "gauge",
            "Most workers ever waking at once.",
            |p| p.peak_waking,
        ),
        (
            "rnfsd_pool_wakeups_total",
            "counter",
            "Worker wakeups.",
            |p| p.wakeups,
        ),
        (
            "rnfsd_pool_wakeups_no_work_total",
            "counter",
            "Wakeups that found no work.",
            |p| p.wakeups_no_work,
        ),
        (
            "rnfsd_pool_jobs_woken_total",
            "counter",
            "Jobs run right after a wakeup.",
            |p| p.jobs_woken,
        ),
        (
            "rnfsd_pool_jobs_inline_total",
            "counter",
            "Jobs run without a wakeup.",
            |p| p.jobs_inline,
        ),
        (
            "rnfsd_pool_jobs_left_total",
            "counter",
            "Jobs left to a running worker instead of waking one (blocking_lazy_wake_us).",
            |p| p.jobs_left,
        ),
        (
            "rnfsd_pool_overdue_kicks_total",
            "counter",
            "Wakeups for jobs left longer than blocking_lazy_wake_us.",
            |p| p.overdue_kicks,
        ),
        (
            "rnfsd_pool_jobs_panicked_total",
            "counter",
            "Jobs that panicked.",
            |p| p.jobs_panicked,
        ),
        (
            "rnfsd_pool_rejected_total",
            "counter",
            "Submissions refused: queue full.",
            |p| p.rejected_full,
        ),
        (
            "rnfsd_pool_threads_started_total",
            "counter",
            "Workers started.",
            |p| p.threads_started,
        ),
        (
            "rnfsd_pool_threads_retired_total",
            "counter",
            "Workers retired.",
            |p| p.threads_retired,
        ),
        (
            "rnfsd_pool_spawn_failures_total",
            "counter",
            "Worker spawns that failed.",
            |p| p.spawn_failures,
        ),
    ];
    for (name, kind, help, get) in pool {
        family(&mut o, name, kind, help);
        for t in &s.transports {
            let _ = writeln!(o, "{name}{{pool=\"{}\"}} {}", esc(&t.name), get(&t.pool));
        }
    }
    cache_families(&mut o, s);
    family(
        &mut o,
        "rnfsd_pool_queue_time_seconds_total",
        "counter",
        "Total time jobs waited in the queue.",
    );
    for t in &s.transports {
        let _ = writeln!(
            o,
            "rnfsd_pool_queue_time_seconds_total{{pool=\"{}\"}} {}",
            esc(&t.name),
            t.pool.queue_time_ns as f64 / 1e9
        );
    }
    o
}

/// Per export and cache: rnfsd_cache_* families, plus the descriptor
/// budget, handle walks and write verifier resets.
fn cache_families(o: &mut String, s: &Snapshot) {
    type CGet = fn(&crate::snapshot::CacheCounts) -> u64;
    let cache: [(&str, &str, &str, CGet); 8] = [
        ("rnfsd_cache_entries", "gauge", "Entries held.", |c| {
            c.entries
        }),
        ("rnfsd_cache_capacity", "gauge", "Most entries held.", |c| {
            c.capacity
        }),
        (
            "rnfsd_cache_hits_total",
            "counter",
            "Lookups that hit.",
            |c| c.hits,
        ),
        (
            "rnfsd_cache_misses_total",
            "counter",
            "Lookups that missed.",
            |c| c.misses,
        ),
        (
            "rnfsd_cache_refused_total",
            "counter",
            "Inserts refused (no room).",
            |c| c.refused,
        ),
        (
            "rnfsd_cache_evicted_inline_total",
            "counter",
            "Entries evicted by a call at the bound.",
            |c| c.evicted_inline,
        ),
        (
            "rnfsd_cache_evicted_reclaim_total",
            "counter",
            "Entries evicted by background reclaim.",
            |c| c.evicted_reclaim,
        ),
        (
            "rnfsd_cache_removed_total",
            "counter",
            "Entries dropped: object deleted, or idle writer closed.",
            |c| c.removed,
        ),
    ];
    for (name, kind, help, get) in cache {
        family(o, name, kind, help);
        for e in &s.exports {
            for c in &e.caches {
                let _ = writeln!(
                    o,
                    "{name}{{export=\"{}\",cache=\"{}\"}} {}",
                    esc(&e.path),
                    esc(&c.name),
                    get(c)
                );
            }
        }
    }
    type EGet = fn(&crate::snapshot::ExportCounts) -> u64;
    let ex: [(&str, &str, &str, EGet); 16] = [
        (
            "rnfsd_sync_requests_total",
            "counter",
            "Requests for durability (COMMIT, stable WRITE, synced namespace changes).",
            |e| e.sync_requests,
        ),
        (
            "rnfsd_sync_requests_parked_total",
            "counter",
            "Durability requests whose reply waited for a journal commit with no thread waiting.",
            |e| e.sync_requests_parked,
        ),
        (
            "rnfsd_sync_writebacks_waited_total",
            "counter",
            "Parked requests whose data write-back a commit thread waited for before its commit.",
            |e| e.sync_writebacks_waited,
        ),
        (
            "rnfsd_syncs_led_total",
            "counter",
            "Journal commits a calling thread made itself, nothing else committing.",
            |e| e.syncs_led,
        ),
        (
            "rnfsd_syncs_total",
            "counter",
            "Syncs run (group commit shares them).",
            |e| e.syncs,
        ),
        (
            "rnfsd_sync_errors_total",
            "counter",
            "Syncs that failed.",
            |e| e.sync_errors,
        ),
        (
            "rnfsd_syncs_peak_in_flight",
            "gauge",
            "Most syncs running at once.",
            |e| e.syncs_peak_in_flight,
        ),
        (
            "rnfsd_write_behinds_total",
            "counter",
            "Writebacks started early for files that gathered write_behind_bytes of UNSTABLE data.",
            |e| e.write_behinds,
        ),
        (
            "rnfsd_write_behinds_on_loop_total",
            "counter",
            "Of the write-behinds, those an event loop started at the end of its turn.",
            |e| e.write_behinds_on_loop,
        ),
        (
            "rnfsd_cache_fds",
            "gauge",
            "Descriptors held by caches (budget shared by exports).",
            |e| e.fds_cached,
        ),
        (
            "rnfsd_cache_fd_limit",
            "gauge",
            "Bound on descriptors held by caches.",
            |e| e.fd_limit,
        ),
        (
            "rnfsd_handle_scan_waits_total",
            "counter",
            "Calls that waited for a walk of the export to find their object.",
            |e| e.scans_waited,
        ),
        (
            "rnfsd_handle_scan_busy_total",
            "counter",
            "Calls answered JUKEBOX while a walk had not found their object.",
            |e| e.scans_busy,
        ),
        (
            "rnfsd_backend_jukebox_total",
            "counter",
            "Calls a remote backend (CephFS) answered JUKEBOX under its time limit.",
            |e| e.calls_jukebox,
        ),
        (
            "rnfsd_backend_stalls_total",
            "counter",
            "Times a remote backend found its service stalled (a call past the limit).",
            |e| e.stalls,
        ),
        (
            "rnfsd_write_verifier_resets_total",
            "counter",
            "Write verifier resets after stable-storage errors.",
            |e| e.verifier_resets,
        ),
    ];
    for (name, kind, help, get) in ex {
        family(o, name, kind, help);
        for e in &s.exports {
            let _ = writeln!(o, "{name}{{export=\"{}\"}} {}", esc(&e.path), get(e));
        }
    }
    if let Some(l) = &s.locks {
        for (name, help, v) in [
            (
                "rnfsd_nlm_files",
                "Files held open for NLM lock owners.",
                l.files,
            ),
            (
                "rnfsd_nlm_ranges",
                "Byte ranges NLM clients hold locked.",
                l.ranges,
            ),
            (
                "rnfsd_nlm_waiters",
                "Blocked NLM lock requests waiting.",
                l.waiters,
            ),
            ("rnfsd_nlm_shares", "NLM share reservations held.", l.shares),
        ] {
            family(o, name, "gauge", help);
            let _ = writeln!(o, "{name} {v}");
        }
    }
}

/// /proc/net/rpc/nfsd-style lines (`io`, `th`, `net`, `rpc`, `proc3`) for
/// tools that parse them. `rpc`: calls badcalls badfmt badauth badclnt.
pub fn raw(s: &Snapshot) -> String {
    let mut o = String::new();
    let nfs = s.transports.iter().find(|t| t.name == "nfs");
    let _ = writeln!(o, "io {} {}", s.io.read_bytes, s.io.write_bytes);
    // knfsd's th line: threads, times all were busy, then a deprecated
    // histogram kept as zeros. Ours: queue-full rejections for the second.
    let _ = writeln!(
        o,
        "th {} {}{}",
        nfs.map_or(0, |t| t.pool.threads),
        nfs.map_or(0, |t| t.pool.rejected_full),
        " 0.000".repeat(10)
    );
    let _ = writeln!(
        o,
        "net {} 0 {} {}",
        s.rpc.records,
        s.rpc.records,
        nfs.map_or(0, |t| t.connections.opened)
    );
    let r = &s.rpc;
    let _ = writeln!(
        o,
        "rpc {} {} {} {} 0",
        r.records,
        r.badfmt() + r.badauth(),
        r.badfmt(),
        r.badauth()
    );
    let v3: Vec<&ProcCounts> = s
        .procs
        .iter()
        .filter(|p| p.program == "nfs" && p.version == 3)
        .collect();
    let _ = write!(o, "proc3 {}", v3.len());
    for p in v3 {
        let _ = write!(o, " {}", p.calls);
    }
    o.push('\n');
    o
}

fn bytes(n: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < U.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", U[i])
    }
}

fn duration(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

fn pct(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * part as f64 / total as f64
    }
}

/// The procedure tables: every NFSv3 row, other programs' rows with calls.
fn proc_table(o: &mut String, s: &Snapshot) {
    let mut groups: Vec<(&str, u32)> = Vec::new();
    for p in &s.procs {
        if !groups.contains(&(p.program.as_str(), p.version)) {
            groups.push((p.program.as_str(), p.version));
        }
    }
    for (prog, vers) in groups {
        let rows: Vec<&ProcCounts> = s
            .procs
            .iter()
            .filter(|p| p.program == prog && p.version == vers)
            .collect();
        let total: u64 = rows.iter().map(|p| p.calls).sum();
        if total == 0 && prog != "nfs" {
            continue;
        }
        let _ = writeln!(o, "\nServer {prog} v{vers}: {total} calls");
        let _ = writeln!(
            o,
            "{:<12} {:>12} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "proc", "calls", "%", "p50(us)", "p90(us)", "p99(us)", "max(us)", "mean(us)"
        );
        for p in rows {
            if p.calls == 0 && prog != "nfs" {
                continue;
            }
            let h = &p.latency;
            let _ = writeln!(
                o,
                "{:<12} {:>12} {:>5.1}% {:>9} {:>9} {:>9} {:>9} {:>9.1}",
                p.name.to_lowercase(),
                p.calls,
                pct(p.calls, total),
                h.quantile(0.5),
                h.quantile(0.9),
                h.quantile(0.99),
                h.max_us,
                h.mean_us()
            );
        }
    }
}

/// An nfsstat-like report.
pub fn report(s: &Snapshot) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "rnfsd statistics: mode {} ({} shard{}), up {}, since reset {}",
        s.mode,
        s.shards,
        if s.shards == 1 { "" } else { "s" },
        duration(s.uptime_secs),
        duration(s.since_reset_secs)
    );
    if s.mode == crate::Mode::Off {
        let _ = writeln!(o, "(RPC counting is off: only transport and pool counters)");
    }
    let r = &s.rpc;
    let _ = writeln!(o, "\nServer rpc stats:");
    let _ = writeln!(
        o,
        "{:<12} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "calls", "badcalls", "badfmt", "badauth", "syserr", "dropped"
    );
    let _ = writeln!(
        o,
        "{:<12} {:>12} {:>12} {:>12} {:>12} {:>12}",
        r.records,
        r.badfmt() + r.badauth(),
        r.badfmt(),
        r.badauth(),
        r.system_err,
        r.dropped
    );
    let _ = write!(
        o,
        "errors: prog_unavail {} prog_mismatch {} proc_unavail {} garbage_args {} rpc_mismatch {}",
        r.prog_unavail, r.prog_mismatch, r.proc_unavail, r.garbage_args, r.rpc_mismatch
    );
    for (k, v) in &r.auth_errors {
        let _ = write!(o, " {} {v}", k.to_lowercase());
    }
    o.push('\n');
    let _ = writeln!(
        o,
        "io: read {} ({}), written {} ({})",
        bytes(s.io.read_bytes),
        s.io.read_bytes,
        bytes(s.io.write_bytes),
        s.io.write_bytes
    );
    for t in &s.transports {
        let c = &t.connections;
        let p = &t.pool;
        let _ = writeln!(
            o,
            "{}: connections open {} opened {} closed {} refused {} evicted {}; calls on the loop thread {} \
             ({} sent on to a worker); threads {} (idle {}, running {}, waking {}), queued {}, \
             jobs {} ({} inline, {} left to a running worker), wakeups {} ({} idle, \
             {} for jobs left overdue), rejected {}",
            t.name,
            c.open,
            c.opened,
            c.closed,
            c.refused,
            c.evicted,
            c.records_inline,
            c.records_deferred,
            p.threads,
            p.idle,
            p.running,
            p.waking,
            p.queued,
            p.jobs_woken + p.jobs_inline,
            p.jobs_inline,
            p.jobs_left,
            p.wakeups,
            p.wakeups_no_work,
            p.overdue_kicks,
            p.rejected_full
        );
    }
    for e in &s.exports {
        let _ = write!(o, "export {}:", e.path);
        for c in &e.caches {
            let _ = write!(
                o,
                " {} {}/{} hit {:.1}% ({} hits, {} misses), evicted {} inline {} reclaim, \
                 removed {}, refused {};",
                c.name,
                c.entries,
                c.capacity,
                100.0 * c.hit_rate(),
                c.hits,
                c.misses,
                c.evicted_inline,
                c.evicted_reclaim,
                c.removed,
                c.refused
            );
        }
        let _ = writeln!(
            o,
            " descriptors {}/{}; handle walks {} ({} waits, {} jukebox); verifier resets {}; \
             write-behinds {} ({} by event loops)",
            e.fds_cached,
            e.fd_limit,
            e.scan_passes,
            e.scans_waited,
            e.scans_busy,
            e.verifier_resets,
            e.write_behinds,
            e.write_behinds_on_loop
        );
        if e.sync_requests > 0 {
            // Group commit at a glance: syncs per durability request.
            let _ = writeln!(
                o,
                " durability: {} requests, {} syncs ({:.2} per request; {} led by a call alone), \
                 {} replies parked on a journal commit ({} after a write-back the commit \
                 thread waited for), {} errors, at most {} at once",
                e.sync_requests,
                e.syncs,
                e.syncs as f64 / e.sync_requests as f64,
                e.syncs_led,
                e.sync_requests_parked,
                e.sync_writebacks_waited,
                e.sync_errors,
                e.syncs_peak_in_flight
            );
        }
        if e.calls_jukebox + e.stalls > 0 {
            let _ = writeln!(
                o,
                " remote backend: {} calls answered JUKEBOX under the time limit, {} stalls",
                e.calls_jukebox, e.stalls
            );
        }
    }
    if let Some(l) = &s.locks {
        let _ = writeln!(
            o,
            "locks (NLM): {} ranges in {} files, {} waiting, {} shares",
            l.ranges, l.files, l.waiters, l.shares
        );
    }
    if !s.nfs_replies.is_empty() {
        let total: u64 = s.nfs_replies.values().sum();
        let _ = write!(o, "nfs replies:");
        for (k, v) in &s.nfs_replies {
            let _ = write!(o, " {k} {v} ({:.1}%)", pct(*v, total));
        }
        o.push('\n');
    }
    proc_table(&mut o, s);
    o
}

/// One frame of the live view: rates over the interval from `prev` to
/// `cur`, and latency percentiles of the calls in that interval.
pub fn watch_frame(prev: &Snapshot, cur: &Snapshot) -> String {
    let mut o = String::new();
    let dt = (cur.since_reset_secs - prev.since_reset_secs).max(1e-3);
    // A reset in between makes the deltas meaningless: show totals.
    let reset = cur.since_reset_secs < prev.since_reset_secs;
    let d = |a: u64, b: u64| if reset { a } else { a.saturating_sub(b) };
    let rate = |a: u64, b: u64| d(a, b) as f64 / dt;
    let (r, pr) = (&cur.rpc, &prev.rpc);
    let _ = writeln!(
        o,
        "rnfsd: up {}, mode {}, interval {:.2}s",
        duration(cur.uptime_secs),
        cur.mode,
        dt
    );
    let _ = writeln!(
        o,
        "calls/s {:>10.0}  errors/s {:>8.0}  read {}/s  written {}/s",
        rate(r.records, pr.records),
        rate(r.errors(), pr.errors()),
        bytes(rate(cur.io.read_bytes, prev.io.read_bytes) as u64),
        bytes(rate(cur.io.write_bytes, prev.io.write_bytes) as u64)
    );
    for t in &cur.transports {
        let pt = prev.transports.iter().find(|x| x.name == t.name);
        let po = pt.map_or(0, |x| x.connections.opened);
        let pw = pt.map_or(0, |x| x.pool.wakeups);
        let _ = writeln!(
            o,
            "{}: conns {} (+{}/s)  threads {} running {} queued {}  wakeups/s {:.0}",
            t.name,
            t.connections.open,
            rate(t.connections.opened, po) as u64,
            t.pool.threads,
            t.pool.running,
            t.pool.queued,
            rate(t.pool.wakeups, pw)
        );
    }
    let _ = writeln!(
        o,
        "\n{:<8} {:<12} {:>10} {:>9} {:>9} {:>9} {:>12}",
        "program", "proc", "calls/s", "p50(us)", "p99(us)", "max(us)", "total"
    );
    let mut rows: Vec<(f64, &ProcCounts, Hist)> = cur
        .procs
        .iter()
        .map(|p| {
            let old = prev
                .procs
                .iter()
                .find(|q| q.prog == p.prog && q.version == p.version && q.proc_ == p.proc_);
            let h = match (old, reset) {
                (Some(q), false) => p.latency.since(&q.latency),
                _ => p.latency.clone(),
            };
            (rate(p.calls, old.map_or(0, |q| q.calls)), p, h)
        })
        .filter(|(r, p, _)| *r > 0.0 || p.calls > 0)
        .collect();
    rows.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.calls.cmp(&a.1.calls)));
    for (r, p, h) in rows.iter().take(30) {
        let _ = writeln!(
            o,
            "{:<8} {:<12} {:>10.0} {:>9} {:>9} {:>9} {:>12}",
            format!("{}{}", p.program, p.version),
            p.name.to_lowercase(),
            r,
            h.quantile(0.5),
            h.quantile(0.99),
            p.latency.max_us,
            p.calls
        );
    }
    o
}
