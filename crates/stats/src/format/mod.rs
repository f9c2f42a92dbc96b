//! Renderings of a snapshot: Prometheus text exposition (format 0.0.4),
//! /proc/net/rpc/nfsd-style lines, an nfsstat-like report and a live view.
//! One module each; the helpers they share are here.

mod prometheus;
mod raw;
mod report;
mod watch;

pub use prometheus::prometheus;
pub use raw::raw;
pub use report::report;
pub use watch::watch_frame;

/// A byte count for people: "512 B", "1.5 KiB", ... "2.0 TiB".
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

/// A duration for people: "42s", "5m07s", "3h02m".
fn duration(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}
