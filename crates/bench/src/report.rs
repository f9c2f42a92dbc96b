//! `report`: medians across repeated runs of every workload, one column per
//! label (server or policy), and the ratios of the first label to each other
//! label. Reads the JSON lines `run`, `pool-matrix` and the workload commands
//! write, so one file can hold a whole comparison. Rows are grouped by
//! workload (or mix), handles, connections and streams: runs of different
//! load shapes never share a median.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

/// One measured row, whichever command wrote it.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    workload: String,
    /// The grouping key beside workload and streams.
    shape: Shape,
    /// Connections as recorded (and whether each stream had its own), also
    /// where they are not part of `shape`.
    conns_seen: Option<(u64, bool)>,
    streams: u64,
    label: String,
    unit: String,
    rate: f64,
    p50_us: f64,
    p99_us: f64,
    cpu_us: Option<f64>,
    csw: Option<f64>,
    errors: u64,
    truncated: bool,
    /// fsmark: stddev of the iterations' rates as a percentage of their mean.
    iter_cv_pct: Option<f64>,
    error_kinds: BTreeMap<String, u64>,
}

/// How a row's load was shaped beyond its stream count: which handles and
/// how many connections. `None` where older rows did not record it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
pub struct Shape {
    /// Distinct objects the calls went to (`--handles`).
    pub handles: Option<u64>,
    /// Every call to the export root's handle.
    pub root_handle: bool,
    /// One connection per stream (`--conns 0`); sorts the shared ones first.
    pub conn_per_stream: bool,
    /// TCP connections used.
    pub conns: Option<u64>,
}

impl Shape {
    pub fn of(v: &serde_json::Value) -> Shape {
        Shape {
            handles: v.get("handles").and_then(|x| x.as_u64()),
            root_handle: v.get("root_handle").and_then(|x| x.as_bool()) == Some(true),
            conn_per_stream: v.get("conn_per_stream").and_then(|x| x.as_bool()) == Some(true),
            conns: v.get("conns").and_then(|x| x.as_u64()),
        }
    }

    /// The handles cell: "root", a count, or "–" (none recorded or none
    /// used, as by null and traverse).
    pub fn handles_cell(&self) -> String {
        match self.handles {
            _ if self.root_handle => "root".into(),
            Some(n) if n > 0 => n.to_string(),
            _ => "–".into(),
        }
    }

    /// The conns cell: a count, "(1/stream)" when each stream had its own.
    pub fn conns_cell(&self) -> String {
        match self.conns {
            Some(c) if self.conn_per_stream => format!("{c} (1/stream)"),
            Some(c) => c.to_string(),
            None => "–".into(),
        }
    }

    fn recorded(&self) -> bool {
        self.handles.is_some() || self.conns.is_some()
    }

    /// "1000 handles, 16 conns (1/stream)"; empty when nothing recorded.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.handles.is_some() {
            parts.push(format!("{} handles", self.handles_cell()));
        }
        if self.conns.is_some() {
            parts.push(format!("{} conns", self.conns_cell()));
        }
        parts.join(", ")
    }
}

/// The shape rows are grouped by. Only call mixes (`run`, `pool-matrix`:
/// rows with `mix`) are keyed by connections: the workload commands'
/// rows stay beside their local reference, which has none.
fn key_shape(v: &serde_json::Value) -> Shape {
    let mut sh = Shape::of(v);
    if v.get("mix").is_none() {
        sh.conns = None;
        sh.conn_per_stream = false;
    }
    sh
}

fn num(v: &serde_json::Value, k: &str) -> Option<f64> {
    v.get(k).and_then(|x| x.as_f64())
}

/// A summary row (or a mount detail row) of any of our JSON shapes; `None`
/// for per-iteration rows and lines that are not ours.
fn parse(v: &serde_json::Value) -> Option<Row> {
    let kind = v.get("kind").and_then(|k| k.as_str()).unwrap_or("summary");
    if kind == "iteration" {
        return None;
    }
    let workload = v
        .get("workload")
        .or_else(|| v.get("mix"))
        .and_then(|w| w.as_str())?
        .to_lowercase();
    let rate = num(v, "rate").or_else(|| num(v, "calls_per_s"))?;
    let iter_cv_pct = v.get("spread").and_then(|s| {
        let (sd, mean) = (num(s, "stddev")?, num(s, "mean")?);
        (mean > 0.0).then(|| 100.0 * sd / mean)
    });
    Some(Row {
        workload,
        shape: key_shape(v),
        conns_seen: {
            let sh = Shape::of(v);
            sh.conns.map(|c| (c, sh.conn_per_stream))
        },
        streams: v.get("streams").and_then(|s| s.as_u64())?,
        label: v.get("label").and_then(|l| l.as_str())?.to_string(),
        unit: v
            .get("unit")
            .and_then(|u| u.as_str())
            .unwrap_or("calls/s")
            .to_string(),
        rate,
        p50_us: num(v, "p50_us").unwrap_or(0.0),
        p99_us: num(v, "p99_us").unwrap_or(0.0),
        cpu_us: num(v, "server_cpu_us_per_op").or_else(|| num(v, "server_cpu_us_per_call")),
        csw: num(v, "server_csw_per_op").or_else(|| num(v, "server_csw_per_call")),
        errors: v.get("errors").and_then(|e| e.as_u64()).unwrap_or(0),
        truncated: v.get("truncated").and_then(|t| t.as_bool()) == Some(true),
        iter_cv_pct,
        error_kinds: v
            .get("error_kinds")
            .and_then(|k| k.as_object())
            .map(|m| {
                m.iter()
                    .filter_map(|(k, n)| Some((k.clone(), n.as_u64()?)))
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// Median of a series (mean of the middle two for an even count).
pub fn median(xs: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// One label's figures for one workload and stream count.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Cell {
    pub runs: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub server_cpu_us_per_op: Option<f64>,
    pub server_csw_per_op: Option<f64>,
    pub iteration_cv_pct: Option<f64>,
    /// Operations that failed, summed over the runs.
    pub errors: u64,
    /// Runs the deadline cut short.
    pub truncated: usize,
    /// Failed operations by reason, summed over the runs.
    pub error_kinds: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Line {
    pub workload: String,
    #[serde(flatten)]
    pub shape: Shape,
    pub streams: u64,
    pub unit: String,
    pub by_label: BTreeMap<String, Cell>,
    /// "A/B" -> median(A) / median(B), A the first label.
    pub ratios: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    pub labels: Vec<String>,
    pub lines: Vec<Line>,
}

fn cell(rows: &[&Row]) -> Option<Cell> {
    let col = |f: &dyn Fn(&Row) -> Option<f64>| {
        let v: Vec<f64> = rows.iter().filter_map(|r| f(r)).collect();
        median(&v)
    };
    let rates: Vec<f64> = rows.iter().map(|r| r.rate).collect();
    Some(Cell {
        runs: rows.len(),
        median: median(&rates)?,
        min: rates.iter().copied().fold(f64::INFINITY, f64::min),
        max: rates.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        p50_us: col(&|r| Some(r.p50_us)),
        p99_us: col(&|r| Some(r.p99_us)),
        server_cpu_us_per_op: col(&|r| r.cpu_us),
        server_csw_per_op: col(&|r| r.csw),
        iteration_cv_pct: col(&|r| r.iter_cv_pct),
        errors: rows.iter().map(|r| r.errors).sum(),
        truncated: rows.iter().filter(|r| r.truncated).count(),
        error_kinds: rows.iter().fold(BTreeMap::new(), |mut m, r| {
            for (k, n) in &r.error_kinds {
                *m.entry(k.clone()).or_insert(0) += n;
            }
            m
        }),
    })
}

/// Build the report from JSON-lines text. `labels` fixes the column order
/// (the first is the one ratios are taken of); empty: order of appearance.
pub fn build(text: &str, labels: &[String]) -> Report {
    let rows: Vec<Row> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| parse(&v))
        .collect();
    let mut order: Vec<String> = labels.to_vec();
    let mut workloads: Vec<String> = Vec::new();
    for r in &rows {
        if labels.is_empty() && !order.contains(&r.label) {
            order.push(r.label.clone());
        }
        if !workloads.contains(&r.workload) {
            workloads.push(r.workload.clone());
        }
    }
    let mut lines = Vec::new();
    for w in &workloads {
        // One line per (handles, conns, streams) of this workload: shapes
        // grouped, streams ascending inside each.
        let mut keys: Vec<(Shape, u64)> = rows
            .iter()
            .filter(|r| &r.workload == w)
            .map(|r| (r.shape, r.streams))
            .collect();
        keys.sort_unstable_by_key(|&(sh, s)| {
            (sh.handles, sh.root_handle, sh.conn_per_stream, s, sh.conns)
        });
        keys.dedup();
        for (shape, s) in keys {
            let here: Vec<&Row> = rows
                .iter()
                .filter(|r| &r.workload == w && r.shape == shape && r.streams == s)
                .collect();
            let mut by_label = BTreeMap::new();
            for l in &order {
                let mine: Vec<&Row> = here.iter().copied().filter(|r| &r.label == l).collect();
                if let Some(c) = cell(&mine) {
                    by_label.insert(l.clone(), c);
                }
            }
            if by_label.is_empty() {
                continue;
            }
            // Show the connections of unkeyed rows when they all agree.
            let mut shape = shape;
            if shape.conns.is_none() {
                let seen: std::collections::BTreeSet<(u64, bool)> =
                    here.iter().filter_map(|r| r.conns_seen).collect();
                if let (1, Some(&(c, own))) = (seen.len(), seen.first()) {
                    shape.conns = Some(c);
                    shape.conn_per_stream = own;
                }
            }
            let mut ratios = BTreeMap::new();
            if let Some(first) = order.first().and_then(|l| by_label.get(l)) {
                for l in order.iter().skip(1) {
                    if let Some(c) = by_label.get(l).filter(|c| c.median > 0.0) {
                        ratios.insert(format!("{}/{l}", order[0]), first.median / c.median);
                    }
                }
            }
            lines.push(Line {
                workload: w.clone(),
                shape,
                streams: s,
                unit: here.first().map(|r| r.unit.clone()).unwrap_or_default(),
                by_label,
                ratios,
            });
        }
    }
    Report {
        labels: order,
        lines,
    }
}

fn fmt_rate(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// Markdown tables: rates with run-to-run range and ratios, then latency
/// and server cost.
pub fn markdown(r: &Report) -> String {
    let mut out = String::new();
    let first = r.labels.first().cloned().unwrap_or_default();
    let others: Vec<&String> = r.labels.iter().skip(1).collect();
    // Handles and conns columns only when some row recorded them, so
    // reports of older files read as before.
    let shaped = r.lines.iter().any(|l| l.shape.recorded());
    let shape_head = if shaped { " handles | conns |" } else { "" };
    let shape_rule = if shaped { "---:|---:|" } else { "" };
    let shape_cells = |ln: &Line| {
        if shaped {
            format!(" {} | {} |", ln.shape.handles_cell(), ln.shape.conns_cell())
        } else {
            String::new()
        }
    };
    let _ = write!(out, "| workload |{shape_head} streams | unit |");
    for l in &r.labels {
        let _ = write!(out, " {l} median (min–max, n) |");
    }
    for l in &others {
        let _ = write!(out, " {first}/{l} |");
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "|---|{shape_rule}---:|---|{}{}",
        "---:|".repeat(r.labels.len()),
        "---:|".repeat(others.len())
    );
    let mut notes = Vec::new();
    for ln in &r.lines {
        let _ = write!(
            out,
            "| {} |{} {} | {} |",
            ln.workload,
            shape_cells(ln),
            ln.streams,
            ln.unit
        );
        for l in &r.labels {
            match ln.by_label.get(l) {
                Some(c) => {
                    let mark = if c.errors > 0 || c.truncated > 0 {
                        let kinds: Vec<String> = c
                            .error_kinds
                            .iter()
                            .map(|(k, n)| format!("{n} × {k}"))
                            .collect();
                        let shape = ln.shape.describe();
                        notes.push(format!(
                            "{} {} streams{}, {l}: {} errors{}, {} of {} runs cut by the deadline",
                            ln.workload,
                            ln.streams,
                            if shape.is_empty() {
                                String::new()
                            } else {
                                format!(" ({shape})")
                            },
                            c.errors,
                            if kinds.is_empty() {
                                String::new()
                            } else {
                                format!(" ({})", kinds.join("; "))
                            },
                            c.truncated,
                            c.runs
                        ));
                        " (!)"
                    } else {
                        ""
                    };
                    let _ = write!(
                        out,
                        " {} ({}–{}, {}){mark} |",
                        fmt_rate(c.median),
                        fmt_rate(c.min),
                        fmt_rate(c.max),
                        c.runs
                    );
                }
                None => out.push_str(" – |"),
            }
        }
        for l in &others {
            match ln.ratios.get(&format!("{first}/{l}")) {
                Some(x) => {
                    let _ = write!(out, " {x:.2}x |");
                }
                None => out.push_str(" – |"),
            }
        }
        let _ = writeln!(out);
    }
    for n in &notes {
        let _ = writeln!(out, "\n(!) {n}");
    }
    let _ = writeln!(out);
    let _ = write!(out, "| workload |{shape_head} streams |");
    for l in &r.labels {
        let _ = write!(out, " {l} p50 / p99 µs | {l} server µs/op, csw/op |");
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "|---|{shape_rule}---:|{}",
        "---:|---:|".repeat(r.labels.len())
    );
    for ln in &r.lines {
        let _ = write!(
            out,
            "| {} |{} {} |",
            ln.workload,
            shape_cells(ln),
            ln.streams
        );
        for l in &r.labels {
            let c = ln.by_label.get(l);
            let lat = c
                .and_then(|c| Some(format!("{:.0} / {:.0}", c.p50_us?, c.p99_us?)))
                .unwrap_or_else(|| "–".into());
            let cost = c
                .and_then(|c| {
                    Some(format!(
                        "{:.1}, {:.2}",
                        c.server_cpu_us_per_op?, c.server_csw_per_op?
                    ))
                })
                .unwrap_or_else(|| "–".into());
            let cv = c
                .and_then(|c| c.iteration_cv_pct)
                .map(|v| format!(" (iter. sd {v:.1}%)"))
                .unwrap_or_default();
            let _ = write!(out, " {lat}{cv} | {cost} |");
        }
        let _ = writeln!(out);
    }
    out
}

pub fn report_cmd(
    json: &[std::path::PathBuf],
    labels: &[String],
    out: Option<&Path>,
) -> Result<(), String> {
    let mut text = String::new();
    for p in json {
        // Result files are small; refuse anything huge rather than read it.
        let len = std::fs::metadata(p)
            .map_err(|e| format!("{}: {e}", p.display()))?
            .len();
        if len > 64 << 20 {
            return Err(format!("{}: larger than 64 MiB", p.display()));
        }
        text.push_str(&std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?);
        text.push('\n');
    }
    let r = build(&text, labels);
    if r.lines.is_empty() {
        return Err("no result rows in the input".into());
    }
    print!("{}", markdown(&r));
    if let Some(o) = out {
        let s = serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?;
        std::fs::write(o, s).map_err(|e| format!("{}: {e}", o.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINES: &str = r#"
{"label":"rnfsd","mix":"getattr","streams":16,"calls_per_s":1000.0,"p50_us":10,"p99_us":50,"server_cpu_us_per_call":5.0,"server_csw_per_call":0.5,"errors":0}
{"label":"ganesha","mix":"getattr","streams":16,"calls_per_s":400.0,"p50_us":30,"p99_us":90,"errors":0}
{"label":"rnfsd","mix":"getattr","streams":16,"calls_per_s":1200.0,"p50_us":12,"p99_us":60,"errors":0}
{"label":"ganesha","mix":"getattr","streams":16,"calls_per_s":600.0,"p50_us":20,"p99_us":70,"errors":0}
{"label":"rnfsd","mix":"getattr","streams":16,"calls_per_s":900.0,"p50_us":14,"p99_us":40,"errors":0}
{"label":"ganesha","mix":"getattr","streams":16,"calls_per_s":500.0,"p50_us":25,"p99_us":80,"errors":0}
{"label":"rnfsd","workload":"fsmark","kind":"iteration","iteration":0,"streams":4,"rate":1.0,"unit":"files/s","p50_us":1,"p99_us":1,"errors":0,"truncated":false}
{"label":"rnfsd","workload":"fsmark","kind":"summary","streams":4,"rate":300.0,"unit":"files/s","p50_us":1,"p99_us":2,"errors":2,"error_kinds":{"NFS3ERR_IO":2},"truncated":true,"spread":{"min":1,"max":2,"mean":300.0,"stddev":30.0}}
{"label":"local","workload":"fsmark","kind":"summary","streams":4,"rate":600.0,"unit":"files/s","p50_us":1,"p99_us":2,"errors":0,"truncated":false}
not json
"#;

    #[test]
    fn medians_and_ratios() {
        let labels = vec!["rnfsd".into(), "ganesha".into(), "local".into()];
        let r = build(LINES, &labels);
        assert_eq!(r.lines.len(), 2);
        let g = &r.lines[0];
        assert_eq!((g.workload.as_str(), g.streams), ("getattr", 16));
        let rn = &g.by_label["rnfsd"];
        assert_eq!(
            (rn.runs, rn.median, rn.min, rn.max),
            (3, 1000.0, 900.0, 1200.0)
        );
        assert_eq!(rn.p50_us, Some(12.0));
        assert_eq!(rn.server_cpu_us_per_op, Some(5.0));
        assert_eq!(g.by_label["ganesha"].median, 500.0);
        assert_eq!(g.ratios["rnfsd/ganesha"], 2.0);
        assert!(!g.ratios.contains_key("rnfsd/local"));
        // The iteration row is skipped; errors and truncation are carried.
        let f = &r.lines[1];
        assert_eq!(f.by_label["rnfsd"].runs, 1);
        assert_eq!(f.by_label["rnfsd"].errors, 2);
        assert_eq!(f.by_label["rnfsd"].truncated, 1);
        assert_eq!(f.by_label["rnfsd"].iteration_cv_pct, Some(10.0));
        assert_eq!(f.ratios["rnfsd/local"], 0.5);
        let md = markdown(&r);
        assert!(md.contains("| getattr | 16 | calls/s | 1000 (900–1200, 3) |"));
        assert!(md.contains("2.00x"));
        assert!(md.contains("(!) fsmark 4 streams, rnfsd: 2 errors (2 × NFS3ERR_IO), 1 of 1 runs"));
    }

    #[test]
    fn workload_rows_with_a_connection_per_stream_stay_beside_their_local_reference() {
        let lines = r#"
{"label":"rnfsd","workload":"fsmark","kind":"summary","streams":16,"conns":16,"conn_per_stream":true,"rate":300.0,"unit":"files/s","p50_us":1,"p99_us":2,"errors":0,"truncated":false}
{"label":"ganesha","workload":"fsmark","kind":"summary","streams":16,"conns":16,"conn_per_stream":true,"rate":200.0,"unit":"files/s","p50_us":1,"p99_us":2,"errors":0,"truncated":false}
{"label":"local","workload":"fsmark","kind":"summary","streams":16,"rate":600.0,"unit":"files/s","p50_us":1,"p99_us":2,"errors":0,"truncated":false}
"#;
        let labels = vec!["rnfsd".into(), "ganesha".into(), "local".into()];
        let r = build(lines, &labels);
        assert_eq!(r.lines.len(), 1);
        let f = &r.lines[0];
        assert_eq!(f.ratios["rnfsd/ganesha"], 1.5);
        assert_eq!(f.ratios["rnfsd/local"], 0.5);
        assert_eq!(f.shape.conns_cell(), "16 (1/stream)");
    }

    #[test]
    fn median_of_even_and_empty() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[f64::NAN, 7.0]), Some(7.0));
    }

    const SHAPED: &str = r#"
{"label":"rnfsd","mix":"Getattr","streams":16,"handles":0,"root_handle":true,"conns":1,"conn_per_stream":false,"calls_per_s":100.0}
{"label":"rnfsd","mix":"Getattr","streams":16,"handles":1000,"root_handle":false,"conns":1,"conn_per_stream":false,"calls_per_s":200.0}
{"label":"rnfsd","mix":"Getattr","streams":16,"handles":1000,"root_handle":false,"conns":16,"conn_per_stream":true,"calls_per_s":300.0}
{"label":"rnfsd","mix":"Getattr","streams":16,"handles":1000,"root_handle":false,"conns":16,"conn_per_stream":true,"calls_per_s":500.0}
{"label":"rnfsd","mix":"Getattr","streams":1,"handles":1000,"root_handle":false,"conns":1,"conn_per_stream":false,"calls_per_s":50.0}
{"label":"rnfsd","mix":"Getattr","streams":16,"handles":100000,"root_handle":false,"conns":1,"conn_per_stream":false,"calls_per_s":150.0}
{"label":"ganesha","mix":"Getattr","streams":16,"handles":1000,"root_handle":false,"conns":16,"conn_per_stream":true,"calls_per_s":200.0}
{"label":"rnfsd","mix":"Null","streams":16,"handles":0,"root_handle":false,"conns":16,"conn_per_stream":true,"calls_per_s":900.0}
{"label":"rnfsd","workload":"create","streams":16,"conns":4,"rate":10.0,"unit":"creates/s"}
{"label":"local","workload":"create","streams":16,"rate":20.0,"unit":"creates/s"}
"#;

    #[test]
    fn shapes_never_share_a_median() {
        let r = build(SHAPED, &["rnfsd".into(), "ganesha".into(), "local".into()]);
        let keys: Vec<(String, String, String, u64)> = r
            .lines
            .iter()
            .map(|l| {
                (
                    l.workload.clone(),
                    l.shape.handles_cell(),
                    l.shape.conns_cell(),
                    l.streams,
                )
            })
            .collect();
        let k =
            |w: &str, h: &str, c: &str, s: u64| (w.to_string(), h.to_string(), c.to_string(), s);
        assert_eq!(
            keys,
            vec![
                k("getattr", "root", "1", 16),
                k("getattr", "1000", "1", 1),
                k("getattr", "1000", "1", 16),
                k("getattr", "1000", "16 (1/stream)", 16),
                k("getattr", "100000", "1", 16),
                k("null", "–", "16 (1/stream)", 16),
                k("create", "–", "4", 16),
            ]
        );
        // The two per-stream runs are one cell; ganesha's is beside them.
        let per = &r.lines[3];
        assert_eq!(per.by_label["rnfsd"].runs, 2);
        assert_eq!(per.by_label["rnfsd"].median, 400.0);
        assert_eq!(per.ratios["rnfsd/ganesha"], 2.0);
        assert_eq!(r.lines[2].by_label["rnfsd"].median, 200.0);
        let md = markdown(&r);
        assert!(md.contains("| workload | handles | conns | streams | unit |"));
        assert!(md.contains("| getattr | 1000 | 16 (1/stream) | 16 | calls/s | 400 (300–500, 2) | 200 (200–200, 1) | – | 2.00x | – |"), "{md}");
        assert!(md.contains("| create | – | 4 | 16 | creates/s | 10.0 (10.0–10.0, 1) | – | 20.0 (20.0–20.0, 1) | – | 0.50x |"), "{md}");
        assert!(md.contains("| getattr | root | 1 | 16 |"));
        // A workload command's row and its local reference share a line.
        let c = r.lines.last().unwrap();
        assert_eq!(c.by_label.len(), 2);
        assert_eq!(c.ratios["rnfsd/local"], 0.5);
    }

    #[test]
    fn unshaped_rows_keep_the_old_columns() {
        let md = markdown(&build(LINES, &[]));
        assert!(md.starts_with("| workload | streams | unit |"));
        assert!(!md.contains("handles"));
    }

    #[test]
    fn labels_in_order_of_appearance() {
        let r = build(LINES, &[]);
        assert_eq!(r.labels, vec!["rnfsd", "ganesha", "local"]);
    }
}
