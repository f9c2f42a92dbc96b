//! The service-core matrix: worker counts x pool policies x mixes x
//! client streams, each configuration a fresh rnfsd process, configurations
//! alternated within every repeat (A B A B ...) so drift on a shared machine
//! hits all of them alike. Reports medians and the acceptance ratios.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::print::{append_json, print_header, print_row, Measurement};
use crate::report::median;
use crate::run::{measure, prepare_load};
use crate::session::connect;
use crate::workload::Mix;

#[derive(clap::Args)]
pub struct MatrixArgs {
    /// The rnfsd binary (default: next to this one).
    #[arg(long)]
    rnfsd: Option<PathBuf>,
    /// Export directory holding a prepared tree (made with 2,000 files in
    /// 100 directories if it does not exist).
    #[arg(long, default_value = "/tmp/rnfsd-bench-tree")]
    dir: PathBuf,
    #[arg(long, value_delimiter = ',', default_value = "8,32,128,512")]
    workers: Vec<usize>,
    #[arg(long, value_delimiter = ',', default_value = "1,16,64,256")]
    streams: Vec<usize>,
    #[arg(long, value_delimiter = ',', default_value = "getattr,traverse")]
    mixes: Vec<Mix>,
    /// Pool policies as wake_order/max_waking/handoff[/layout], comma
    /// separated; layout is "shared" (one loop, one pool; when omitted) or
    /// "percpu" (a loop and a pinned pool per CPU: the server's default).
    /// "all" = the 8 combinations of lifo|fifo, 1|unlimited, direct|double
    /// in the percpu layout, plus the naive and the design's policy in one
    /// shared pool.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    policies: Vec<String>,
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    #[arg(long, default_value_t = 4)]
    conns: usize,
    /// Extra arguments passed to every `rnfsd serve`.
    #[arg(long, allow_hyphen_values = true)]
    server_args: Vec<String>,
    /// Append every measurement as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// The server's defaults: LIFO, one waking, direct hand-off, and a loop and
/// a pinned pool per CPU.
pub const DEFAULT_POLICY: &str = "lifo/1/direct/percpu";
/// What the SVC_MAX_WAKING and Lustre threads started from: one pool, FIFO
/// wake-up, a wakeup
/// per request, two-step hand-off.
pub const NAIVE_POLICY: &str = "fifo/unlimited/double/shared";

/// The 8 switch combinations in the default (per-CPU) layout, plus the
/// naive single-pool policy and the design's policy in a single pool.
fn all_policies() -> Vec<String> {
    let mut v = Vec::new();
    for w in ["lifo", "fifo"] {
        for m in ["1", "unlimited"] {
            for h in ["direct", "double"] {
                v.push(format!("{w}/{m}/{h}/percpu"));
            }
        }
    }
    v.push(NAIVE_POLICY.to_string());
    v.push("lifo/1/direct/shared".to_string());
    v
}

struct ServerProc {
    child: Child,
    port: u16,
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server(
    bin: &Path,
    dir: &Path,
    workers: usize,
    policy: &str,
    extra: &[String],
) -> Result<ServerProc, String> {
    let parts: Vec<&str> = policy.split('/').collect();
    let (wake, waking, handoff, layout) = match parts[..] {
        [w, m, h] => (w, m, h, "shared"),
        [w, m, h, l] => (w, m, h, l),
        _ => {
            return Err(format!(
                "policy {policy}: want wake_order/max_waking/handoff[/shared|percpu]"
            ))
        }
    };
    // "percpu": one event loop and one pinned pool per CPU (knfsd's percpu
    // pool mode); "shared": one loop, one pool, no pinning.
    let layout_args: Vec<String> = match layout {
        "shared" => vec![
            "--event-threads".into(),
            "1".into(),
            "--pools".into(),
            "shared".into(),
        ],
        "percpu" => {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            vec![
                "--event-threads".into(),
                cpus.to_string(),
                "--pools".into(),
                "per-loop".into(),
                "--pin-loops".into(),
            ]
        }
        other => return Err(format!("policy {policy}: unknown layout {other}")),
    };
    let state = std::env::temp_dir().join(format!("rnfsd-bench-state-{}", std::process::id()));
    std::fs::create_dir_all(&state).map_err(|e| e.to_string())?;
    let port_file = state.join("port");
    let _ = std::fs::remove_file(&port_file);
    let child = Command::new(bin)
        .arg("serve")
        .arg(dir)
        .args(["--listen", "127.0.0.1:0", "--port-file"])
        .arg(&port_file)
        .arg("--state-dir")
        .arg(&state)
        .args(["--threads", &workers.to_string()])
        .args([
            "--wake-order",
            wake,
            "--max-waking",
            waking,
            "--handoff",
            handoff,
        ])
        .args(["--log-level", "warn"])
        // The bench calls from ordinary ports.
        .arg("--insecure")
        .args(&layout_args)
        .args(extra)
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", bin.display()))?;
    let mut sp = ServerProc { child, port: 0 };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(s) = std::fs::read_to_string(&port_file) {
            if let Ok(p) = s.trim().parse() {
                sp.port = p;
                return Ok(sp);
            }
        }
        if Instant::now() > deadline {
            return Err("rnfsd did not start within 30 s".into());
        }
        if let Ok(Some(st)) = sp.child.try_wait() {
            return Err(format!("rnfsd exited at start: {st}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub async fn run(a: MatrixArgs) -> Result<(), String> {
    let bin = match a.rnfsd.clone() {
        Some(b) => b,
        None => std::env::current_exe()
            .map_err(|e| e.to_string())?
            .with_file_name("rnfsd"),
    };
    if !a.dir.exists() {
        crate::prepare::prepare(&a.dir, 2_000, 100, 8).map_err(|e| e.to_string())?;
    }
    let dir = a.dir.canonicalize().map_err(|e| e.to_string())?;
    let export = dir.to_string_lossy().to_string();
    let policies = if a.policies.iter().any(|p| p == "all") {
        all_policies()
    } else {
        a.policies.clone()
    };
    let dur = Duration::from_secs_f64(a.seconds.clamp(0.1, 60.0));
    // (workers, policy, mix, streams) -> calls/s and csw/call per repeat.
    let mut rates: BTreeMap<(usize, String, String, usize), Vec<f64>> = BTreeMap::new();
    let mut csw: BTreeMap<(usize, String, String, usize), Vec<f64>> = BTreeMap::new();
    print_header();
    for rep in 0..a.repeats.max(1) {
        for &w in &a.workers {
            for p in &policies {
                let srv = start_server(&bin, &dir, w, p, &a.server_args)?;
                let addr = std::net::SocketAddr::from(([127, 0, 0, 1], srv.port));
                let s = connect(addr, None, &export, a.conns).await?;
                for &mix in &a.mixes {
                    let prep = prepare_load(&s, mix, 0, 50_000).await?;
                    for &n in &a.streams {
                        let label = format!("w{w} {p} r{rep}");
                        let m: Measurement =
                            measure(&s, &label, &prep, n, dur, Some(srv.child.id()), false).await?;
                        print_row(&m);
                        if let Some(j) = &a.json {
                            append_json(j, &m);
                        }
                        let key = (w, p.clone(), format!("{mix:?}").to_lowercase(), n);
                        rates.entry(key.clone()).or_default().push(m.calls_per_s);
                        csw.entry(key)
                            .or_default()
                            .push(m.server_csw_per_call.unwrap_or(f64::NAN));
                    }
                }
                drop(s);
                drop(srv);
            }
        }
    }
    summarize(&a, &policies, &mut rates, &mut csw);
    Ok(())
}

type Table = BTreeMap<(usize, String, String, usize), Vec<f64>>;

fn summarize(a: &MatrixArgs, policies: &[String], rates: &mut Table, csw: &mut Table) {
    println!(
        "\nmedians of {} runs (calls/s, server context switches per call)",
        a.repeats
    );
    let mut med: BTreeMap<(usize, String, String, usize), (f64, f64)> = BTreeMap::new();
    for (k, v) in rates.iter_mut() {
        let c = csw.get(k).and_then(|c| median(c)).unwrap_or(f64::NAN);
        med.insert(k.clone(), (median(v).unwrap_or(f64::NAN), c));
    }
    for mix in &a.mixes {
        let mix = format!("{mix:?}").to_lowercase();
        println!("\n[{mix}]");
        print!("{:<8} {:<24}", "workers", "policy");
        for n in &a.streams {
            print!(" {:>16}", format!("{n} streams"));
        }
        println!();
        for &w in &a.workers {
            for p in policies {
                print!("{:<8} {:<24}", w, p);
                for &n in &a.streams {
                    match med.get(&(w, p.clone(), mix.clone(), n)) {
                        Some((r, c)) => print!(" {:>9.0} {:>6.2}", r, c),
                        None => print!(" {:>16}", "-"),
                    }
                }
                println!();
            }
        }
        // Acceptance figures (docs/service-core.md).
        let get =
            |w: usize, p: &str, n: usize| med.get(&(w, p.to_string(), mix.clone(), n)).map(|x| x.0);
        if let Some(def) = get(128, DEFAULT_POLICY, 64) {
            let best = policies
                .iter()
                .filter_map(|p| get(128, p, 64).map(|r| (r, p.clone())))
                .fold((0.0, String::new()), |a, b| if b.0 > a.0 { b } else { a });
            println!(
                "128 workers, 64 streams: default {def:.0} calls/s; best {} {:.0} ({:.1}% of best)",
                best.1,
                best.0,
                100.0 * def / best.0
            );
            if let Some(naive) = get(128, NAIVE_POLICY, 64) {
                println!("  default / naive ({NAIVE_POLICY}) = {:.2}x", def / naive);
            }
        }
        if let (Some(w512), Some(w8)) = (get(512, DEFAULT_POLICY, 64), get(8, DEFAULT_POLICY, 64)) {
            println!(
                "64 streams, default policy: 512 workers / 8 workers = {:.1}%",
                100.0 * w512 / w8
            );
        }
        for &w in &a.workers {
            if let Some((_, c)) = med.get(&(w, DEFAULT_POLICY.to_string(), mix.clone(), 64)) {
                println!(
                    "  default policy, {w} workers, 64 streams: {c:.3} context switches per call"
                );
            }
        }
    }
}
