//! The live view (`rnfsd stats --watch`): one frame per interval.

use std::fmt::Write as _;

use super::{bytes, duration};
use crate::hist::Hist;
use crate::snapshot::{ProcCounts, Snapshot};

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
