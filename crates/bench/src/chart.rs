//! `rnfsd-bench chart`: a hand-written SVG line chart of rate against client
//! streams, one polyline per series (label, plus workload when several are in
//! one file), from the JSON lines `run`, `pool-matrix` and the workload
//! subcommands write.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One series: its name and (streams, rate) points sorted by streams.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// Build series from JSON lines. A line contributes if it has `streams` and
/// a rate (`rate`, else `calls_per_s`), and is not a per-iteration row
/// (`kind` "iteration") or a detail row ("detail"); with `only`, just rows of
/// that workload (or mix). Repeated (series, streams) points: their median.
/// Rows of different load shapes (handles, connections) are separate series
/// when the file mixes them.
pub fn series_from_json_lines(text: &str, only: Option<&str>) -> (Vec<Series>, String) {
    let mut acc: BTreeMap<String, BTreeMap<u64, Vec<f64>>> = BTreeMap::new();
    let mut units = BTreeMap::<String, ()>::new();
    let mut workloads = BTreeMap::<String, ()>::new();
    let rows: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| only.is_none_or(|w| workload_of(v).as_deref() == Some(&w.to_lowercase())))
        .collect();
    let mut shapes = BTreeMap::<String, ()>::new();
    for v in &rows {
        if let Some(w) = workload_of(v) {
            workloads.insert(w, ());
        }
        shapes.insert(series_shape(v), ());
    }
    for v in &rows {
        if matches!(
            v.get("kind").and_then(|k| k.as_str()),
            Some("iteration" | "detail")
        ) {
            continue;
        }
        let Some(streams) = v.get("streams").and_then(|s| s.as_u64()) else {
            continue;
        };
        let Some(rate) = v
            .get("rate")
            .or_else(|| v.get("calls_per_s"))
            .and_then(|r| r.as_f64())
        else {
            continue;
        };
        let label = v.get("label").and_then(|l| l.as_str()).unwrap_or("?");
        let mut name = match workload_of(v) {
            Some(w) if workloads.len() > 1 => format!("{label} {w}"),
            _ => label.to_string(),
        };
        let shape = series_shape(v);
        if shapes.len() > 1 && !shape.is_empty() {
            let _ = write!(name, " [{shape}]");
        }
        let unit = v
            .get("unit")
            .and_then(|u| u.as_str())
            .unwrap_or("calls/s")
            .to_string();
        units.insert(unit, ());
        acc.entry(name)
            .or_default()
            .entry(streams)
            .or_default()
            .push(rate);
    }
    let series = acc
        .into_iter()
        .map(|(name, pts)| Series {
            name,
            points: pts
                .into_iter()
                .filter_map(|(x, rates)| Some((x as f64, crate::report::median(&rates)?)))
                .collect(),
        })
        .collect();
    let unit = units.into_keys().collect::<Vec<_>>().join(", ");
    (series, if unit.is_empty() { "rate".into() } else { unit })
}

/// A row's shape as one series sees it: handles and connections, with a
/// connection per stream named as such (its count grows along the x axis).
/// Connections only for call mixes, as in the report: a workload command
/// and its local reference stay comparable.
fn series_shape(v: &serde_json::Value) -> String {
    let mut sh = crate::report::Shape::of(v);
    if v.get("mix").is_none() {
        sh.conns = None;
    }
    let mut parts = Vec::new();
    if sh.handles.is_some() {
        parts.push(format!("{} handles", sh.handles_cell()));
    }
    match sh.conns {
        Some(_) if sh.conn_per_stream => parts.push("1 conn/stream".into()),
        Some(1) => parts.push("1 conn".into()),
        Some(c) => parts.push(format!("{c} conns")),
        None => {}
    }
    parts.join(", ")
}

fn workload_of(v: &serde_json::Value) -> Option<String> {
    v.get("workload")
        .or_else(|| v.get("mix"))
        .and_then(|w| w.as_str())
        .map(str::to_lowercase)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A "nice" step (1, 2 or 5 times a power of ten) giving about `n` ticks.
fn nice_step(max: f64, n: f64) -> f64 {
    let raw = (max / n).max(f64::MIN_POSITIVE);
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    let k = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    k * p
}

const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Render the chart. X is log2(streams) when every x is >= 1 (stream counts
/// grow geometrically), ticks at the stream counts present; Y is linear from 0.
pub fn render_svg(series: &[Series], title: &str, y_unit: &str) -> String {
    let (w, h) = (800.0, 500.0);
    let (l, r, t, b) = (80.0, 200.0, 40.0, 60.0);
    let (pw, ph) = (w - l - r, h - t - b);
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let log = !xs.is_empty() && xs.iter().all(|&x| x >= 1.0);
    let fx = |x: f64| if log { x.log2() } else { x };
    let (xmin, xmax) = xs
        .iter()
        .map(|&x| fx(x))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(x), b.max(x))
        });
    let (xmin, xmax) = if xs.is_empty() {
        (0.0, 1.0)
    } else if xmax - xmin < 1e-9 {
        (xmin - 1.0, xmax + 1.0)
    } else {
        (xmin, xmax)
    };
    let ymax_data = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max);
    let ystep = nice_step(if ymax_data > 0.0 { ymax_data } else { 1.0 }, 5.0);
    let ymax = ((ymax_data / ystep).ceil().max(1.0)) * ystep;
    let px = |x: f64| l + (fx(x) - xmin) / (xmax - xmin) * pw;
    let py = |y: f64| t + ph - (y / ymax) * ph;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" text-anchor="middle" font-size="16">{}</text>"#,
        l + pw / 2.0,
        esc(title)
    );
    // Axes.
    let _ = writeln!(
        s,
        r#"<line x1="{l}" y1="{}" x2="{}" y2="{}" stroke="black"/>"#,
        t + ph,
        l + pw,
        t + ph
    );
    let _ = writeln!(
        s,
        r#"<line x1="{l}" y1="{t}" x2="{l}" y2="{}" stroke="black"/>"#,
        t + ph
    );
    // Y ticks and grid.
    let mut y = 0.0;
    let mut guard = 0;
    while y <= ymax + ystep * 1e-9 && guard < 50 {
        let yy = py(y);
        let _ = writeln!(
            s,
            r##"<line x1="{l}" y1="{yy:.1}" x2="{}" y2="{yy:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            l + pw,
            l - 6.0,
            yy + 4.0,
            fmt_num(y)
        );
        y += ystep;
        guard += 1;
    }
    // X ticks at every distinct x.
    let mut ticks: Vec<f64> = xs.clone();
    ticks.sort_by(|a, b| a.total_cmp(b));
    ticks.dedup();
    for x in ticks {
        let xx = px(x);
        let _ = writeln!(
            s,
            r#"<line x1="{xx:.1}" y1="{}" x2="{xx:.1}" y2="{}" stroke="black"/><text x="{xx:.1}" y="{}" text-anchor="middle">{}</text>"#,
            t + ph,
            t + ph + 5.0,
            t + ph + 20.0,
            fmt_num(x)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">client streams{}</text>"#,
        l + pw / 2.0,
        h - 15.0,
        if log { " (log scale)" } else { "" }
    );
    let _ = writeln!(
        s,
        r#"<text x="20" y="{}" text-anchor="middle" transform="rotate(-90 20 {})">{}</text>"#,
        t + ph / 2.0,
        t + ph / 2.0,
        esc(y_unit)
    );
    // Series and legend.
    for (i, se) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let pts: Vec<String> = se
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
            pts.join(" ")
        );
        for &(x, y) in &se.points {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{c}"/>"#,
                px(x),
                py(y)
            );
        }
        let ly = t + 10.0 + 20.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{c}" stroke-width="2"/><text x="{}" y="{}">{}</text>"#,
            l + pw + 15.0,
            l + pw + 40.0,
            l + pw + 45.0,
            ly + 4.0,
            esc(&se.name)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn fmt_num(v: f64) -> String {
    if v.abs() >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v.abs() >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v.fract().abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINES: &str = r#"{"label":"rnfsd","workload":"create","streams":1,"rate":1000.0,"unit":"creates/s"}
{"label":"rnfsd","workload":"create","streams":4,"rate":3000.0,"unit":"creates/s"}
{"label":"ganesha <2>","workload":"create","streams":1,"rate":800.0,"unit":"creates/s"}
{"label":"ganesha <2>","workload":"create","streams":4,"rate":900.0,"unit":"creates/s"}
{"label":"rnfsd","workload":"create","streams":4,"rate":5000.0,"unit":"creates/s"}
{"label":"rnfsd","workload":"create","streams":4,"kind":"iteration","rate":1.0}
not json
"#;

    #[test]
    fn series_grouped_and_median() {
        let (s, unit) = series_from_json_lines(LINES, None);
        assert_eq!(unit, "creates/s");
        assert_eq!(s.len(), 2);
        let r = s.iter().find(|x| x.name == "rnfsd").unwrap();
        // Median of 3000 and 5000; the iteration row is skipped.
        assert_eq!(r.points, vec![(1.0, 1000.0), (4.0, 4000.0)]);
    }

    #[test]
    fn workload_filter() {
        let t = "{\"label\":\"a\",\"workload\":\"create\",\"streams\":1,\"rate\":10.0}\n\
                 {\"label\":\"a\",\"workload\":\"remove\",\"streams\":1,\"rate\":50.0}\n\
                 {\"label\":\"b\",\"workload\":\"mnt\",\"kind\":\"detail\",\"streams\":1,\"rate\":5.0}\n";
        let (s, _) = series_from_json_lines(t, None);
        let names: Vec<_> = s.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, vec!["a create", "a remove"]);
        let (s, _) = series_from_json_lines(t, Some("Remove"));
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].name, "a");
        assert_eq!(s[0].points, vec![(1.0, 50.0)]);
    }

    #[test]
    fn matrix_rows_use_calls_per_s_and_mix() {
        let t = "{\"label\":\"a\",\"mix\":\"Getattr\",\"streams\":2,\"calls_per_s\":10.0}\n\
                 {\"label\":\"a\",\"mix\":\"Traverse\",\"streams\":2,\"calls_per_s\":5.0}\n";
        let (s, unit) = series_from_json_lines(t, None);
        assert_eq!(unit, "calls/s");
        let names: Vec<_> = s.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, vec!["a getattr", "a traverse"]);
    }

    #[test]
    fn shapes_are_separate_series() {
        let t = "{\"label\":\"a\",\"mix\":\"Getattr\",\"streams\":16,\"handles\":1000,\"conns\":1,\"calls_per_s\":10.0}\n\
                 {\"label\":\"a\",\"mix\":\"Getattr\",\"streams\":16,\"handles\":1000,\"conns\":16,\"conn_per_stream\":true,\"calls_per_s\":30.0}\n\
                 {\"label\":\"a\",\"mix\":\"Getattr\",\"streams\":64,\"handles\":1000,\"conns\":64,\"conn_per_stream\":true,\"calls_per_s\":40.0}\n";
        let (s, _) = series_from_json_lines(t, Some("getattr"));
        let names: Vec<_> = s.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "a [1000 handles, 1 conn/stream]",
                "a [1000 handles, 1 conn]"
            ]
        );
        assert_eq!(s[0].points, vec![(16.0, 30.0), (64.0, 40.0)]);
        // Workload commands' connections do not split them from local rows.
        let t = "{\"label\":\"rnfsd\",\"workload\":\"create\",\"streams\":16,\"conns\":4,\"rate\":10.0}\n\
                 {\"label\":\"local\",\"workload\":\"create\",\"streams\":16,\"rate\":20.0}\n";
        let (s, _) = series_from_json_lines(t, None);
        let names: Vec<_> = s.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, vec!["local", "rnfsd"]);
    }

    #[test]
    fn svg_has_one_polyline_per_series_and_balanced_tags() {
        let (s, unit) = series_from_json_lines(LINES, None);
        let svg = render_svg(&s, "create & remove", &unit);
        assert!(svg.starts_with("<svg "));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<svg").count(), svg.matches("</svg>").count());
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
        // Labels and title are escaped.
        assert!(svg.contains("ganesha &lt;2&gt;"));
        assert!(svg.contains("create &amp; remove"));
        assert!(!svg.contains("ganesha <2>"));
        // Every element outside <text> bodies is self-closed or closed.
        let opens = svg.matches('<').count();
        let closes = svg.matches('>').count();
        assert_eq!(opens, closes);
    }

    #[test]
    fn svg_empty_and_single_point() {
        let svg = render_svg(&[], "empty", "rate");
        assert_eq!(svg.matches("<polyline").count(), 0);
        assert!(!svg.contains("NaN"));
        let one = vec![Series {
            name: "x".into(),
            points: vec![(8.0, 0.0)],
        }];
        let svg = render_svg(&one, "one", "rate");
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(100.0, 5.0), 20.0);
        assert_eq!(nice_step(4000.0, 5.0), 1000.0);
        assert_eq!(nice_step(7.0, 5.0), 2.0);
    }
}
