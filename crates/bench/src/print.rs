//! What `run` (and `pool-matrix`) print and write: the table of
//! measurements, one JSON line per measurement, and SVG charts of those
//! lines.

use std::path::Path;

use crate::chart;
use crate::workload::Mix;

/// One measurement, as printed and written to JSON.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Measurement {
    pub label: String,
    pub mix: Mix,
    /// The row's name when it is not the mix's: NFSv4.1 rows are
    /// "<mix>-v4.1" (absent for NFSv3, whose rows are named by `mix`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    pub streams: usize,
    /// Distinct objects the calls went to (--handles; 0: see root_handle).
    pub handles: usize,
    /// True when every call went to the export root's handle.
    pub root_handle: bool,
    /// TCP connections the streams used.
    pub conns: usize,
    /// True when each stream had a connection of its own (--conns 0).
    pub conn_per_stream: bool,
    /// One stream whose client thread was kept on one CPU
    /// (`--pin-one-stream`).
    pub client_pinned: bool,
    pub calls: u64,
    /// Calls of the warm-up before the measurement (not in `calls`): the
    /// server did them too, so per-call counts taken over the whole run
    /// (scripts/syscalls.sh) divide by calls + warmup_calls.
    pub warmup_calls: u64,
    pub errors: u64,
    pub seconds: f64,
    pub calls_per_s: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub server_cpu_us_per_call: Option<f64>,
    pub server_csw_per_call: Option<f64>,
    pub server_vol_csw_per_call: Option<f64>,
    pub server_threads: Option<u64>,
}

pub fn print_header() {
    println!(
        "{:<28} {:>8} {:>7} {:>7} {:>6} {:>11} {:>8} {:>8} {:>10} {:>9} {:>7}",
        "config",
        "mix",
        "handles",
        "streams",
        "conns",
        "calls/s",
        "p50 us",
        "p99 us",
        "cpu us/c",
        "csw/call",
        "errors"
    );
}

/// The handles column: "root" for the export root's handle, "-" for none.
fn handles_cell(m: &Measurement) -> String {
    if m.root_handle {
        "root".into()
    } else if m.handles == 0 {
        "-".into()
    } else {
        m.handles.to_string()
    }
}

/// The conns column; "*" marks one connection per stream.
fn conns_cell(m: &Measurement) -> String {
    format!("{}{}", m.conns, if m.conn_per_stream { "*" } else { "" })
}

pub fn print_row(m: &Measurement) {
    let opt = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |x| format!("{x:.p$}"));
    println!(
        "{:<28} {:>8} {:>7} {:>7} {:>6} {:>11.0} {:>8} {:>8} {:>10} {:>9} {:>7}",
        m.label,
        m.workload.as_deref().unwrap_or(m.mix.name()),
        handles_cell(m),
        m.streams,
        conns_cell(m),
        m.calls_per_s,
        m.p50_us,
        m.p99_us,
        opt(m.server_cpu_us_per_call, 1),
        opt(m.server_csw_per_call, 3),
        m.errors
    );
}

pub fn append_json(path: &Path, m: &Measurement) {
    use std::io::Write;
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        if let Ok(s) = serde_json::to_string(m) {
            let _ = writeln!(f, "{s}");
        }
    }
}

pub fn chart_cmd(json: &Path, out: &Path, title: &str, only: Option<&str>) -> Result<(), String> {
    // Bounded read: JSON result files are small; refuse anything huge.
    let meta = std::fs::metadata(json).map_err(|e| format!("{}: {e}", json.display()))?;
    if meta.len() > 64 << 20 {
        return Err(format!("{}: larger than 64 MiB", json.display()));
    }
    let text = std::fs::read_to_string(json).map_err(|e| format!("{}: {e}", json.display()))?;
    let (series, unit) = chart::series_from_json_lines(&text, only);
    if series.is_empty() {
        return Err(format!(
            "{}: no rows with streams and a rate",
            json.display()
        ));
    }
    std::fs::write(out, chart::render_svg(&series, title, &unit))
        .map_err(|e| format!("{}: {e}", out.display()))
}
