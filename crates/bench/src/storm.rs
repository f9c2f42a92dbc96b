//! `storm`: warm GETATTR latency alone, then while many streams GETATTR
//! cold handles (objects the server has to look for: after a restart in
//! path mode, or after the host dropped its dentries), retrying each on
//! JUKEBOX as a client does. Does the storm move the warm calls' p99?

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rnfsd_client::nfs3::{
    Diropargs3, Ftype3, GetAttr3Args, Lookup3Args, NfsFh3, NfsRes, Nfsstat3, ReadDir3Args, Verf3,
};
use rnfsd_client::{check, Client, NfsClient};
use serde::Serialize;

use crate::ops::{self, Target};
use crate::proc_cost::{self, ProcSample};
use crate::stats::histogram;
use crate::workload::XorShift;

#[derive(clap::Args, Clone, Debug)]
pub struct StormArgs {
    #[command(flatten)]
    pub target: Target,
    /// Cold handles, hex, one per line (`rnfsd-bench handles` writes them).
    #[arg(long)]
    pub handles_file: PathBuf,
    /// Streams sending GETATTR to cold handles, each taking the next unused
    /// one (at most 4096).
    #[arg(long, default_value_t = 64)]
    pub cold_streams: usize,
    /// TCP connections of the cold streams (their own, not the warm ones').
    #[arg(long, default_value_t = 4)]
    pub cold_conns: usize,
    /// Streams sending GETATTR to warm handles (at most 512).
    #[arg(long, default_value_t = 4)]
    pub warm_streams: usize,
    /// Warm objects: got fresh by LOOKUP and READDIRPLUS of the first
    /// directories of the export root (at most 100,000).
    #[arg(long, default_value_t = 1000)]
    pub warm_handles: usize,
    /// Seconds of each measurement: warm alone, then warm during the storm
    /// (which ends sooner if every cold handle is done).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Delay before a cold handle answered JUKEBOX is tried again.
    #[arg(long, default_value_t = 100)]
    pub retry_ms: u64,
    /// Longest time one cold handle is retried, seconds.
    #[arg(long, default_value_t = 60.0)]
    pub handle_deadline: f64,
    /// Use at most the first N handles of the file.
    #[arg(long)]
    pub cold_limit: Option<usize>,
    /// The server's state directory: its admin socket (admin.sock) gives the
    /// cache and walk counters before and after the storm.
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// The admin socket itself, when not STATE_DIR/admin.sock.
    #[arg(long, conflicts_with = "state_dir")]
    pub admin_socket: Option<PathBuf>,
}

const MAX_COLD_STREAMS: usize = 4096;
const MAX_WARM_STREAMS: usize = 512;
const MAX_WARM_HANDLES: usize = 100_000;
/// Directories looked up for the warm set at most.
const MAX_WARM_DIRS: usize = 10_000;
/// A count bound on each loop besides its deadline.
const MAX_CALLS_PER_STREAM: u64 = 1 << 32;

/// Warm GETATTR latency over one phase.
#[derive(Debug, Clone, Serialize)]
pub struct WarmStats {
    pub seconds: f64,
    pub calls: u64,
    pub calls_per_s: f64,
    pub errors: u64,
    /// Of the errors, JUKEBOX replies to warm handles.
    pub jukebox: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu_s: Option<f64>,
}

/// What the cold streams did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ColdStats {
    /// Handles taken by a stream.
    pub tried: u64,
    pub ok: u64,
    /// Resolved as NFS3ERR_STALE (the object is gone).
    pub stale: u64,
    /// JUKEBOX replies (each retried after --retry-ms).
    pub jukebox_replies: u64,
    /// Given up after --handle-deadline of JUKEBOX.
    pub timed_out: u64,
    /// Still retrying when the storm phase ended.
    pub abandoned: u64,
    /// How long the longest-waiting of those had been retried, ms: the
    /// resolve times cover resolved handles only.
    pub abandoned_max_wait_ms: u64,
    /// Any other failure (not retried).
    pub errors: u64,
    pub error_kinds: BTreeMap<String, u64>,
    /// Time to resolve a handle (first call to OK or STALE), µs.
    pub resolve_p50_us: u64,
    pub resolve_p99_us: u64,
    pub resolve_max_us: u64,
    /// Latency of each cold GETATTR call, whatever it answered, µs.
    pub call_p50_us: u64,
    pub call_p99_us: u64,
    pub call_max_us: u64,
    /// Handles of the file not reached before the phase ended.
    pub unused: u64,
}

#[derive(Debug, Clone, Serialize)]
struct StormSummary {
    label: String,
    workload: &'static str,
    kind: &'static str,
    warm_streams: usize,
    warm_handles: usize,
    warm_files: usize,
    cold_streams: usize,
    cold_conns: usize,
    conns: usize,
    /// Handles of the file (at most --cold-limit): the cold row's
    /// `handles`, so repeated runs group together.
    cold_handles_file: usize,
    /// Cold handles used (after dropping the warm ones and --cold-limit).
    cold_handles: usize,
    /// Handles of the file dropped because they were in the warm set.
    cold_dropped_warm: usize,
    retry_ms: u64,
    handle_deadline_s: f64,
    baseline: WarmStats,
    /// Warm calls beside as many streams that only hit the cache (the warm
    /// set) as the storm has cold streams: the same offered load without a
    /// single miss. On a small machine the storm's own load moves warm
    /// latency; this row says how much of that is load alone.
    control: WarmStats,
    storm: WarmStats,
    p50_ratio: f64,
    p99_ratio: f64,
    max_ratio: f64,
    /// Warm p99 in the storm over warm p99 beside the hit-only control.
    p99_ratio_control: f64,
    /// How long the storm phase lasted: --seconds, or less when every cold
    /// handle was done first.
    storm_seconds: f64,
    cold_all_done: bool,
    cold: ColdStats,
    #[serde(skip_serializing_if = "Option::is_none")]
    server_rss_kib: Option<u64>,
    /// Export counters from the admin socket, flattened
    /// ("objects.misses"), before the baseline, before and after the storm.
    #[serde(skip_serializing_if = "Option::is_none")]
    server: Option<ServerCounters>,
    #[serde(skip_serializing_if = "Option::is_none")]
    server_note: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
struct ServerCounters {
    start: BTreeMap<String, u64>,
    before: BTreeMap<String, u64>,
    after: BTreeMap<String, u64>,
}

/// A row `report` reads (workload, streams, label, rate, p50/p99).
#[derive(Debug, Clone, Serialize)]
struct Row {
    label: String,
    workload: String,
    kind: &'static str,
    streams: usize,
    conns: usize,
    handles: usize,
    count: u64,
    errors: u64,
    seconds: f64,
    rate: f64,
    unit: &'static str,
    p50_us: u64,
    p99_us: u64,
    max_us: u64,
    truncated: bool,
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.clamp(0.1, 600.0))
}

pub async fn storm_cmd(a: StormArgs) -> Result<(), String> {
    if a.cold_streams == 0 || a.cold_streams > MAX_COLD_STREAMS {
        return Err(format!("--cold-streams must be 1..={MAX_COLD_STREAMS}"));
    }
    if a.warm_streams == 0 || a.warm_streams > MAX_WARM_STREAMS {
        return Err(format!("--warm-streams must be 1..={MAX_WARM_STREAMS}"));
    }
    if a.warm_handles == 0 || a.warm_handles > MAX_WARM_HANDLES {
        return Err(format!("--warm-handles must be 1..={MAX_WARM_HANDLES}"));
    }
    let dur = secs(a.seconds);
    let retry = Duration::from_millis(a.retry_ms.clamp(1, 60_000));
    let per_handle = secs(a.handle_deadline);
    let setup_limit = secs(a.target.max_seconds);
    let sock = a
        .admin_socket
        .clone()
        .or_else(|| a.state_dir.as_ref().map(|d| d.join("admin.sock")));
    let mut cold = crate::handles::read_handles(&a.handles_file)?;

    let c = ops::connect(&a.target).await?;
    let (warm, warm_files) = warm_set(&c.nfs, &c.root, a.warm_handles, setup_limit).await?;
    // Cold means cold: drop the file's handles that the warm set-up just
    // made known, and the root.
    let known: HashSet<&[u8]> = warm
        .iter()
        .map(|h| &h.data[..])
        .chain([&c.root.data[..]])
        .collect();
    if let Some(n) = a.cold_limit {
        cold.truncate(n);
    }
    let in_file = cold.len();
    cold.retain(|h| !known.contains(&h.data[..]));
    let dropped = in_file - cold.len();
    if cold.is_empty() {
        return Err("no cold handles left".into());
    }
    make_warm(&c.nfs, &warm, retry, per_handle).await?;
    eprintln!(
        "warm set: {} objects ({warm_files} files), each answered GETATTR OK; {} cold handles{}",
        warm.len(),
        cold.len(),
        if dropped > 0 {
            format!(" ({dropped} of the file dropped: in the warm set)")
        } else {
            String::new()
        }
    );
    let cold_client = NfsClient::new(
        Client::connect(a.target.addr, &crate::session::bench_config(a.cold_conns))
            .await
            .map_err(|e| format!("connect {}: {e}", a.target.addr))?,
    );

    let mut note = None;
    let snap = |when: &str| -> Option<BTreeMap<String, u64>> {
        let s = sock.as_ref()?;
        match admin_counters(s, &a.target.export) {
            Ok(m) => Some(m),
            Err(e) => {
                eprintln!("storm: server counters {when}: {e}");
                None
            }
        }
    };
    let s_start = snap("at start");
    let warm = Arc::new(
        warm.into_iter()
            .map(|object| GetAttr3Args { object })
            .collect::<Vec<_>>(),
    );
    let pid = a.target.server_pid;
    let cpu = || pid.and_then(|p| ProcSample::read(p).ok());

    // A short warm-up so first-touch costs stay out of the baseline.
    let never = Arc::new(AtomicBool::new(false));
    warm_phase(&c.nfs, &warm, a.warm_streams, dur / 10, never.clone()).await;
    let c0 = cpu();
    let mut base = warm_phase(&c.nfs, &warm, a.warm_streams, dur, never).await;
    base.server_cpu_s = c0.zip(cpu()).map(|(b, a)| b.delta(&a).cpu_s);

    // The control: the storm's concurrency, all hits, on the cold
    // streams' connections.
    let cstop = Arc::new(AtomicBool::new(false));
    let (lnfs, lfhs, lstop, ls) = (
        cold_client.clone(),
        warm.clone(),
        cstop.clone(),
        a.cold_streams,
    );
    let load = tokio::spawn(async move { warm_phase(&lnfs, &lfhs, ls, dur, lstop).await });
    let c2 = cpu();
    let mut control = warm_phase(&c.nfs, &warm, a.warm_streams, dur, never_stop()).await;
    control.server_cpu_s = c2.zip(cpu()).map(|(b, a)| b.delta(&a).cpu_s);
    cstop.store(true, Ordering::SeqCst);
    let _ = load.await;

    let s_before = snap("before the storm");
    let c1 = cpu();
    let stop = Arc::new(AtomicBool::new(false));
    let cold = Arc::new(cold);
    let next = Arc::new(AtomicUsize::new(0));
    let live = Arc::new(AtomicUsize::new(a.cold_streams));
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..a.cold_streams {
        let (nfs, cold, next, stop, live) = (
            cold_client.clone(),
            cold.clone(),
            next.clone(),
            stop.clone(),
            live.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let r = cold_stream(&nfs, &cold, &next, &stop, retry, per_handle).await;
            live.fetch_sub(1, Ordering::SeqCst);
            r
        }));
    }
    let (wnfs, wfhs, wstop, ws) = (c.nfs.clone(), warm.clone(), stop.clone(), a.warm_streams);
    let warm_task = tokio::spawn(async move { warm_phase(&wnfs, &wfhs, ws, dur, wstop).await });
    // The storm lasts `dur`, or until the cold streams are all done.
    while t0.elapsed() < dur && live.load(Ordering::SeqCst) > 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let storm_seconds = t0.elapsed().as_secs_f64();
    let all_done = live.load(Ordering::SeqCst) == 0;
    stop.store(true, Ordering::SeqCst);
    let mut storm = warm_task.await.map_err(|e| format!("warm streams: {e}"))?;
    storm.server_cpu_s = c1.zip(cpu()).map(|(b, a)| b.delta(&a).cpu_s);
    let mut cs = ColdStats::default();
    let mut resolve = histogram();
    let mut call = histogram();
    for t in tasks {
        if let Ok((s, r, c)) = t.await {
            cs.add(&s);
            let _ = resolve.add(&r);
            let _ = call.add(&c);
        }
    }
    cs.unused = (cold.len() as u64).saturating_sub(cs.tried);
    (cs.resolve_p50_us, cs.resolve_p99_us, cs.resolve_max_us) = quantiles(&resolve);
    (cs.call_p50_us, cs.call_p99_us, cs.call_max_us) = quantiles(&call);
    let s_after = snap("after the storm");

    let server = match (s_start, s_before, s_after) {
        (Some(start), Some(before), Some(after)) => Some(ServerCounters {
            start,
            before,
            after,
        }),
        _ => {
            note = Some(match &sock {
                None => "server counters skipped: no --state-dir or --admin-socket".to_string(),
                Some(s) => format!("server counters skipped: {} did not answer", s.display()),
            });
            None
        }
    };
    let ratio = |x: u64, y: u64| x as f64 / y.max(1) as f64;
    let sum = StormSummary {
        label: a.target.label.clone(),
        workload: "storm",
        kind: "storm",
        warm_streams: a.warm_streams,
        warm_handles: warm.len(),
        warm_files,
        cold_streams: a.cold_streams,
        cold_conns: a.cold_conns.clamp(1, rnfsd_client::MAX_CONNECTIONS),
        conns: a.target.conns.clamp(1, rnfsd_client::MAX_CONNECTIONS),
        cold_handles_file: in_file,
        cold_handles: cold.len(),
        cold_dropped_warm: dropped,
        retry_ms: retry.as_millis() as u64,
        handle_deadline_s: per_handle.as_secs_f64(),
        p50_ratio: ratio(storm.p50_us, base.p50_us),
        p99_ratio: ratio(storm.p99_us, base.p99_us),
        max_ratio: ratio(storm.max_us, base.max_us),
        p99_ratio_control: ratio(storm.p99_us, control.p99_us),
        baseline: base,
        control,
        storm,
        storm_seconds,
        cold_all_done: all_done,
        cold: cs,
        server_rss_kib: pid.and_then(proc_cost::rss_kib),
        server,
        server_note: note,
    };
    print_summary(&sum);
    if let Some(j) = &a.target.json {
        for r in rows(&sum) {
            append(j, &r);
        }
        append(j, &sum);
    }
    Ok(())
}

/// The three rows `report` can take medians of: warm alone, warm in the
/// storm, and the cold handles resolved per second.
fn rows(s: &StormSummary) -> Vec<Row> {
    let warm = |w: &str, st: &WarmStats| Row {
        label: s.label.clone(),
        workload: w.into(),
        kind: "summary",
        streams: s.warm_streams,
        conns: s.conns,
        handles: s.warm_handles,
        count: st.calls,
        errors: st.errors,
        seconds: st.seconds,
        rate: st.calls_per_s,
        unit: "calls/s",
        p50_us: st.p50_us,
        p99_us: st.p99_us,
        max_us: st.max_us,
        truncated: false,
    };
    let c = &s.cold;
    let resolved = c.ok + c.stale;
    vec![
        warm("storm-warm-alone", &s.baseline),
        warm("storm-warm-storm", &s.storm),
        Row {
            label: s.label.clone(),
            workload: "storm-cold".into(),
            kind: "summary",
            streams: s.cold_streams,
            conns: s.cold_conns,
            handles: s.cold_handles_file,
            count: resolved,
            errors: c.errors + c.timed_out,
            seconds: s.storm_seconds,
            rate: resolved as f64 / s.storm_seconds.max(1e-9),
            unit: "handles/s",
            p50_us: c.resolve_p50_us,
            p99_us: c.resolve_p99_us,
            max_us: c.resolve_max_us,
            truncated: !s.cold_all_done,
        },
    ]
}

fn append<T: Serialize>(path: &Path, v: &T) {
    use std::io::Write;
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        if let Ok(s) = serde_json::to_string(v) {
            let _ = writeln!(f, "{s}");
        }
    }
}

fn print_summary(s: &StormSummary) {
    println!(
        "storm: {} warm streams on {} warm objects ({} files); {} cold streams on {} conns over {} cold handles (retry {} ms, per-handle deadline {:.0} s)",
        s.warm_streams,
        s.warm_handles,
        s.warm_files,
        s.cold_streams,
        s.cold_conns,
        s.cold_handles,
        s.retry_ms,
        s.handle_deadline_s
    );
    println!(
        "{:<16} {:>8} {:>10} {:>10} {:>8} {:>8} {:>9} {:>7} {:>8} {:>9}",
        "warm GETATTR",
        "seconds",
        "calls",
        "calls/s",
        "p50 us",
        "p99 us",
        "max us",
        "errors",
        "jukebox",
        "srv cpu s"
    );
    for (n, w) in [
        ("alone", &s.baseline),
        ("beside hits", &s.control),
        ("during storm", &s.storm),
    ] {
        println!(
            "{:<16} {:>8.2} {:>10} {:>10.0} {:>8} {:>8} {:>9} {:>7} {:>8} {:>9}",
            n,
            w.seconds,
            w.calls,
            w.calls_per_s,
            w.p50_us,
            w.p99_us,
            w.max_us,
            w.errors,
            w.jukebox,
            w.server_cpu_s.map_or("-".into(), |c| format!("{c:.2}"))
        );
    }
    println!(
        "ratio storm/alone: p50 {:.2}x  p99 {:.2}x  max {:.2}x; p99 storm/beside hits {:.2}x",
        s.p50_ratio, s.p99_ratio, s.max_ratio, s.p99_ratio_control
    );
    let c = &s.cold;
    println!(
        "cold: {} handles tried in {:.2} s ({}): {} ok, {} stale, {} timed out, {} abandoned at the end (retried for up to {:.1} s), {} errors, {} unused; {} JUKEBOX replies",
        c.tried,
        s.storm_seconds,
        if s.cold_all_done { "all done" } else { "stopped at --seconds" },
        c.ok,
        c.stale,
        c.timed_out,
        c.abandoned,
        c.abandoned_max_wait_ms as f64 / 1e3,
        c.errors,
        c.unused,
        c.jukebox_replies
    );
    println!(
        "cold time to resolve: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; each cold GETATTR: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        c.resolve_p50_us as f64 / 1e3,
        c.resolve_p99_us as f64 / 1e3,
        c.resolve_max_us as f64 / 1e3,
        c.call_p50_us as f64 / 1e3,
        c.call_p99_us as f64 / 1e3,
        c.call_max_us as f64 / 1e3
    );
    for (k, n) in &c.error_kinds {
        println!("  {n} failed: {k}");
    }
    if let Some(r) = s.server_rss_kib {
        println!("server RSS after: {r} KiB");
    }
    match (&s.server, &s.server_note) {
        (Some(sv), _) => {
            println!(
                "server counters (admin socket): {:<28} {:>12} {:>12} {:>12}",
                "", "at start", "before storm", "storm delta"
            );
            for (k, after) in &sv.after {
                let b = sv.before.get(k).copied().unwrap_or(0);
                let st = sv.start.get(k).copied().unwrap_or(0);
                let d = if is_gauge(k) {
                    format!("now {after}")
                } else {
                    format!("{:+}", *after as i128 - b as i128)
                };
                println!("  {k:<58} {st:>12} {b:>12} {d:>12}");
            }
        }
        (None, Some(n)) => println!("{n}"),
        _ => {}
    }
}

/// Fields that are levels rather than counts since start.
fn is_gauge(k: &str) -> bool {
    k.ends_with(".entries")
        || k.ends_with(".capacity")
        || k.ends_with("fds_cached")
        || k.ends_with("fd_limit")
}

fn quantiles(h: &Histogram<u64>) -> (u64, u64, u64) {
    if h.is_empty() {
        return (0, 0, 0);
    }
    (h.value_at_quantile(0.5), h.value_at_quantile(0.99), h.max())
}

impl ColdStats {
    fn add(&mut self, o: &ColdStats) {
        self.tried += o.tried;
        self.ok += o.ok;
        self.stale += o.stale;
        self.jukebox_replies += o.jukebox_replies;
        self.timed_out += o.timed_out;
        self.abandoned += o.abandoned;
        self.abandoned_max_wait_ms = self.abandoned_max_wait_ms.max(o.abandoned_max_wait_ms);
        self.errors += o.errors;
        for (k, n) in &o.error_kinds {
            *self.error_kinds.entry(k.clone()).or_insert(0) += n;
        }
    }

    fn failed(&mut self, why: String) {
        self.errors += 1;
        // Few distinct reasons kept, as the other commands do.
        let key = if self.error_kinds.len() < 8 || self.error_kinds.contains_key(&why) {
            why
        } else {
            "other".into()
        };
        *self.error_kinds.entry(key).or_insert(0) += 1;
    }
}

/// One cold stream: take the next unused handle, GETATTR it until OK or
/// STALE, sleeping `retry` after each JUKEBOX, for at most `per_handle`;
/// stop when the handles run out or `stop` is set.
async fn cold_stream(
    nfs: &NfsClient,
    cold: &[NfsFh3],
    next: &AtomicUsize,
    stop: &AtomicBool,
    retry: Duration,
    per_handle: Duration,
) -> (ColdStats, Histogram<u64>, Histogram<u64>) {
    let mut s = ColdStats::default();
    let mut resolve = histogram();
    let mut call = histogram();
    let mut calls = 0u64;
    while !stop.load(Ordering::Relaxed) && calls < MAX_CALLS_PER_STREAM {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(fh) = cold.get(i) else { break };
        s.tried += 1;
        let first = Instant::now();
        let a = GetAttr3Args { object: fh.clone() };
        loop {
            let t = Instant::now();
            let r = nfs.getattr(&a).await;
            calls += 1;
            let _ = call.record(us(t.elapsed()));
            match r {
                Ok(NfsRes::Ok(_)) => {
                    s.ok += 1;
                    let _ = resolve.record(us(first.elapsed()));
                    break;
                }
                Ok(NfsRes::Fail(Nfsstat3::Stale, _)) => {
                    s.stale += 1;
                    let _ = resolve.record(us(first.elapsed()));
                    break;
                }
                Ok(NfsRes::Fail(Nfsstat3::Jukebox, _)) => {
                    s.jukebox_replies += 1;
                    if first.elapsed() + retry > per_handle {
                        s.timed_out += 1;
                        break;
                    }
                    tokio::time::sleep(retry).await;
                    if stop.load(Ordering::Relaxed) {
                        s.abandoned += 1;
                        let waited = first.elapsed().as_millis() as u64;
                        s.abandoned_max_wait_ms = s.abandoned_max_wait_ms.max(waited);
                        break;
                    }
                }
                Ok(NfsRes::Fail(st, _)) => {
                    s.failed(st.to_string());
                    break;
                }
                Err(e) => {
                    s.failed(e.to_string());
                    break;
                }
            }
        }
    }
    (s, resolve, call)
}

fn us(d: Duration) -> u64 {
    d.as_micros().max(1) as u64
}

/// `streams` loops of GETATTR to random warm handles for `dur` or until
/// `stop`.
fn never_stop() -> Arc<AtomicBool> {
    Arc::new(AtomicBool::new(false))
}

async fn warm_phase(
    nfs: &NfsClient,
    fhs: &Arc<Vec<GetAttr3Args>>,
    streams: usize,
    dur: Duration,
    stop: Arc<AtomicBool>,
) -> WarmStats {
    let start = Instant::now();
    let deadline = start + dur;
    let mut tasks = Vec::new();
    for s in 0..streams {
        let (nfs, fhs, stop) = (nfs.clone(), fhs.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut h = histogram();
            let (mut calls, mut errors, mut jukebox) = (0u64, 0u64, 0u64);
            let mut rng = XorShift::new(0x3a7 + s as u64);
            while !stop.load(Ordering::Relaxed)
                && Instant::now() < deadline
                && calls < MAX_CALLS_PER_STREAM
            {
                let Some(a) = fhs.get(rng.below(fhs.len())) else {
                    break;
                };
                let t = Instant::now();
                let r = nfs.getattr(a).await;
                let _ = h.record(us(t.elapsed()));
                calls += 1;
                match r {
                    Ok(NfsRes::Ok(_)) => {}
                    Ok(NfsRes::Fail(Nfsstat3::Jukebox, _)) => {
                        errors += 1;
                        jukebox += 1;
                    }
                    _ => errors += 1,
                }
            }
            (calls, errors, jukebox, h)
        }));
    }
    let mut lat = histogram();
    let (mut calls, mut errors, mut jukebox) = (0, 0, 0);
    for t in tasks {
        if let Ok((c, e, j, h)) = t.await {
            calls += c;
            errors += e;
            jukebox += j;
            let _ = lat.add(&h);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let (p50, p99, max) = quantiles(&lat);
    WarmStats {
        seconds: secs,
        calls,
        calls_per_s: crate::stats::rate(calls, secs),
        errors,
        jukebox,
        p50_us: p50,
        p99_us: p99,
        max_us: max,
        server_cpu_s: None,
    }
}

/// `k` objects known to the server afresh: names from one READDIR page of
/// the root (READDIR records no locations), a LOOKUP of each in turn and a
/// READDIRPLUS of each directory found, regular files first. Only these
/// few directories' objects become known, so the rest of the tree stays
/// cold. Returns the handles and how many are regular files.
async fn warm_set(
    nfs: &NfsClient,
    root: &NfsFh3,
    k: usize,
    limit: Duration,
) -> Result<(Vec<NfsFh3>, usize), String> {
    let deadline = Instant::now() + limit;
    let page = check(
        nfs.readdir(&ReadDir3Args {
            dir: root.clone(),
            cookie: 0,
            cookieverf: Verf3::default(),
            count: 32 * 1024,
        })
        .await
        .map_err(|e| format!("READDIR of the root: {e}"))?,
    )
    .map_err(|e| format!("READDIR of the root: {e}"))?;
    let (mut files, mut others) = (Vec::new(), Vec::new());
    for (n, e) in page.entries.iter().enumerate() {
        if e.name == b"." || e.name == b".." {
            continue;
        }
        if files.len() >= k || n >= MAX_WARM_DIRS || Instant::now() >= deadline {
            break;
        }
        let l = check(
            nfs.lookup(&Lookup3Args {
                what: Diropargs3 {
                    dir: root.clone(),
                    name: e.name.clone(),
                },
            })
            .await
            .map_err(|er| format!("LOOKUP {}: {er}", String::from_utf8_lossy(&e.name)))?,
        )
        .map_err(|er| format!("LOOKUP {}: {er}", String::from_utf8_lossy(&e.name)))?;
        let ftype = l.obj_attributes.as_ref().map(|a| a.ftype);
        if ftype != Some(Ftype3::Dir) {
            if ftype == Some(Ftype3::Reg) {
                files.push(l.object);
            } else {
                others.push(l.object);
            }
            continue;
        }
        let entries = nfs
            .readdirplus_all(&l.object)
            .await
            .map_err(|er| format!("READDIRPLUS {}: {er}", String::from_utf8_lossy(&e.name)))?;
        others.push(l.object);
        for en in entries {
            if en.name == b"." || en.name == b".." {
                continue;
            }
            let Some(fh) = en.name_handle else { continue };
            if en.name_attributes.as_ref().map(|a| a.ftype) == Some(Ftype3::Reg) {
                files.push(fh);
            } else {
                others.push(fh);
            }
        }
    }
    files.truncate(k);
    let nfiles = files.len();
    files.extend(others.into_iter().take(k - nfiles));
    if files.len() < k {
        return Err(format!(
            "--warm-handles {k}: the first {} names of the root gave only {} objects",
            page.entries.len(),
            files.len()
        ));
    }
    Ok((files, nfiles))
}

/// GETATTR every warm handle until it answers OK (retrying JUKEBOX), so the
/// server has them all before the baseline.
async fn make_warm(
    nfs: &NfsClient,
    fhs: &[NfsFh3],
    retry: Duration,
    per_handle: Duration,
) -> Result<(), String> {
    for fh in fhs {
        let first = Instant::now();
        let a = GetAttr3Args { object: fh.clone() };
        loop {
            match nfs.getattr(&a).await {
                Ok(NfsRes::Ok(_)) => break,
                Ok(NfsRes::Fail(Nfsstat3::Jukebox, _)) if first.elapsed() < per_handle => {
                    tokio::time::sleep(retry).await;
                }
                Ok(NfsRes::Fail(s, _)) => return Err(format!("warm GETATTR: {s}")),
                Err(e) => return Err(format!("warm GETATTR: {e}")),
            }
        }
    }
    Ok(())
}

/// The export's counters from the server's admin socket (`snapshot`),
/// flattened: "scans_waited", "objects.misses", ...; plus the NFS replies
/// answered JUKEBOX and STALE. The export is the one whose path is
/// `export`, else the only one.
pub fn admin_counters(sock: &Path, export: &str) -> Result<BTreeMap<String, u64>, String> {
    let v = admin_snapshot(sock)?;
    let exports = v
        .get("exports")
        .and_then(|e| e.as_array())
        .ok_or("the snapshot has no exports[]")?;
    let e = exports
        .iter()
        .find(|e| e.get("path").and_then(|p| p.as_str()) == Some(export))
        .or(if exports.len() == 1 {
            exports.first()
        } else {
            None
        })
        .ok_or_else(|| format!("no export {export} in the snapshot"))?;
    let mut m = BTreeMap::new();
    for (k, x) in e.as_object().into_iter().flatten() {
        if let Some(n) = x.as_u64() {
            m.insert(k.clone(), n);
        }
    }
    for c in e
        .get("caches")
        .and_then(|c| c.as_array())
        .into_iter()
        .flatten()
    {
        let name = c.get("name").and_then(|n| n.as_str()).unwrap_or("cache");
        for (k, x) in c.as_object().into_iter().flatten() {
            if let Some(n) = x.as_u64() {
                m.insert(format!("{name}.{k}"), n);
            }
        }
    }
    for st in ["NFS3ERR_JUKEBOX", "NFS3ERR_STALE"] {
        let n = v
            .get("nfs_replies")
            .and_then(|r| r.get(st))
            .and_then(|x| x.as_u64())
            .unwrap_or(0);
        m.insert(format!("replies.{st}"), n);
    }
    Ok(m)
}

/// One `snapshot` from the admin socket (one command line, the answer read
/// until the server closes; bounded in time and size).
pub fn admin_snapshot(sock: &Path) -> Result<serde_json::Value, String> {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    let p = sock.display();
    let mut c = UnixStream::connect(sock).map_err(|e| format!("{p}: {e}"))?;
    let t = Some(Duration::from_secs(10));
    c.set_read_timeout(t).map_err(|e| format!("{p}: {e}"))?;
    c.set_write_timeout(t).map_err(|e| format!("{p}: {e}"))?;
    c.write_all(b"snapshot\n")
        .map_err(|e| format!("{p}: {e}"))?;
    c.shutdown(std::net::Shutdown::Write)
        .map_err(|e| format!("{p}: {e}"))?;
    let mut s = String::new();
    (&mut c)
        .take(64 << 20)
        .read_to_string(&mut s)
        .map_err(|e| format!("{p}: {e}"))?;
    serde_json::from_str(&s).map_err(|e| format!("{p}: not a JSON snapshot: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_and_quantiles() {
        assert!(is_gauge("objects.entries") && is_gauge("fds_cached"));
        assert!(!is_gauge("objects.misses") && !is_gauge("scans_waited"));
        assert_eq!(quantiles(&histogram()), (0, 0, 0));
        let mut h = histogram();
        for v in 1..=100 {
            h.record(v * 10).unwrap();
        }
        let (p50, p99, max) = quantiles(&h);
        assert!((495..=505).contains(&p50) && (985..=995).contains(&p99) && max >= 1000);
    }

    #[test]
    fn cold_stats_add_and_bound_error_kinds() {
        let mut a = ColdStats::default();
        for i in 0..20 {
            a.failed(format!("e{i}"));
        }
        a.failed("e0".into());
        assert_eq!(a.errors, 21);
        assert_eq!(a.error_kinds.len(), 9);
        assert_eq!(a.error_kinds["e0"], 2);
        assert_eq!(a.error_kinds["other"], 12);
        let mut b = ColdStats {
            ok: 3,
            jukebox_replies: 5,
            ..ColdStats::default()
        };
        b.add(&a);
        assert_eq!((b.ok, b.jukebox_replies, b.errors), (3, 5, 21));
    }

    #[test]
    fn storm_arguments_parse() {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from([
            "rnfsd-bench",
            "storm",
            "--export",
            "/x",
            "--handles-file",
            "/tmp/h",
            "--cold-streams",
            "32",
            "--warm-streams",
            "2",
            "--warm-handles",
            "500",
            "--seconds",
            "5",
            "--state-dir",
            "/tmp/s",
        ])
        .unwrap();
        let crate::cli::Cmd::Storm(a) = cli.cmd else {
            panic!("not storm")
        };
        assert_eq!(
            (a.cold_streams, a.warm_streams, a.warm_handles),
            (32, 2, 500)
        );
        assert_eq!(a.retry_ms, 100);
    }
}
