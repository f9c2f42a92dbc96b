//! The nfsstat-like report: one section per part of the snapshot, then the
//! procedure tables.

use std::fmt::Write as _;

use super::{bytes, duration};
use crate::snapshot::{ExportCounts, ProcCounts, Snapshot, TransportCounts};

/// An nfsstat-like report.
pub fn report(s: &Snapshot) -> String {
    let mut o = String::new();
    header(&mut o, s);
    rpc(&mut o, s);
    let _ = writeln!(
        o,
        "io: read {} ({}), written {} ({})",
        bytes(s.io.read_bytes),
        s.io.read_bytes,
        bytes(s.io.write_bytes),
        s.io.write_bytes
    );
    for t in &s.transports {
        transport(&mut o, t);
    }
    for e in &s.exports {
        export(&mut o, e);
    }
    if let Some(l) = &s.locks {
        let _ = writeln!(
            o,
            "locks (NLM): {} ranges in {} files, {} waiting, {} shares",
            l.ranges, l.files, l.waiters, l.shares
        );
    }
    if let Some(n) = &s.nfs4 {
        let _ = writeln!(
            o,
            "nfsv4: {} clients, {} sessions, {} stateids, {} reply cache bytes{}; {} expired, {} replays",
            n.clients,
            n.sessions,
            n.stateids,
            n.reply_cache_bytes,
            if n.in_grace { ", in grace" } else { "" },
            n.clients_expired,
            n.replays
        );
    }
    nfs_replies(&mut o, s);
    proc_table(&mut o, s);
    o
}

fn pct(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * part as f64 / total as f64
    }
}

fn header(o: &mut String, s: &Snapshot) {
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
}

/// RPC-level outcomes, knfsd's columns first.
fn rpc(o: &mut String, s: &Snapshot) {
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
}

/// One listener's line: its connections and its pool.
fn transport(o: &mut String, t: &TransportCounts) {
    let c = &t.connections;
    let p = &t.pool;
    let _ = writeln!(
        o,
        "{}: connections open {} opened {} closed {} refused {} evicted {}; calls on the loop thread {} \
         ({} sent on to a worker); threads {} (idle {}, running {}, waking {}), queued {}, \
         jobs {} ({} inline, {} left to a running worker), wakeups {} ({} idle, \
         {} for jobs left overdue), spins {} ({} met a job), rejected {}",
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
        p.spins,
        p.wakeups_spun,
        p.rejected_full
    );
}

/// One export's line (caches, descriptors, walks), then its durability
/// and remote-backend lines when they have anything to say.
fn export(o: &mut String, e: &ExportCounts) {
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

/// NFSv3 replies by status, with shares of the total.
fn nfs_replies(o: &mut String, s: &Snapshot) {
    if s.nfs_replies.is_empty() {
        return;
    }
    let total: u64 = s.nfs_replies.values().sum();
    let _ = write!(o, "nfs replies:");
    for (k, v) in &s.nfs_replies {
        let _ = write!(o, " {k} {v} ({:.1}%)", pct(*v, total));
    }
    o.push('\n');
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
