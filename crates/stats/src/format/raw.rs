//! /proc/net/rpc/nfsd-style lines.

use std::fmt::Write as _;

use crate::snapshot::{ProcCounts, Snapshot};

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
