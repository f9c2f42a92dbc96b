//! Workloads beyond call mixes: create/remove, mkdir, fsmark, mount, and
//! sequential read/write. Only standard NFSv3 (RFC 1813) and MOUNT v3 calls,
//! nothing rnfsd-specific, so any NFSv3 server can be measured. Every phase
//! is bounded by a count and by a deadline.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use rnfsd_client::nfs3::{
    Commit3Args, Create3Args, CreateHow3, Diropargs3, FsInfo3Args, GetAttr3Args, Mkdir3Args,
    NfsFh3, Read3Args, Remove3Args, Rmdir3Args, Sattr3, StableHow, Write3ArgsRef,
};
use rnfsd_client::{check, Client, ClientError, MountClient, NfsClient};

use crate::proc_cost::ProcSample;
use crate::session;
use crate::stats::{self, histogram};
use crate::vers::Vers;
use crate::workload::{self, WALK_MAX_TIME};

/// Where and how to reach the server, and where results go.
#[derive(clap::Args, Clone, Debug)]
pub struct Target {
    /// Server address (NFS, and MOUNT unless --mount-addr).
    #[arg(long, default_value = "127.0.0.1:2049")]
    pub addr: SocketAddr,
    /// NFS version: 3 (with MOUNT), or 4.1 (sessions; create, mkdir, read
    /// and write only; --export is then the export's path from the
    /// server's root).
    #[arg(long, value_enum, default_value = "3")]
    pub vers: Vers,
    /// MOUNT's address when it is not the NFS port (nfs-ganesha).
    #[arg(long)]
    pub mount_addr: Option<SocketAddr>,
    /// Absolute export path to MNT.
    #[arg(long)]
    pub export: String,
    /// TCP connections the streams share; 0 (create, mkdir and fsmark
    /// only): a connection of its own per stream, as many client hosts
    /// with one process each would open.
    #[arg(long, default_value_t = 4)]
    pub conns: usize,
    /// Series name in the table, JSON and chart (e.g. rnfsd, ganesha).
    #[arg(long, default_value = "server")]
    pub label: String,
    /// Append one JSON object per result to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Upper bound on each phase's wall time, seconds (at most 3600).
    #[arg(long, default_value_t = 300.0)]
    pub max_seconds: f64,
    /// PID of the server on this machine: adds its CPU time and context
    /// switches per operation (from /proc) to each phase's row.
    #[arg(long)]
    pub server_pid: Option<u32>,
}

impl Target {
    fn deadline(&self) -> Duration {
        Duration::from_secs_f64(self.max_seconds.clamp(0.1, 3600.0))
    }

    /// `parallel` bounded by this target's deadline, with the server's cost
    /// over the phase when `--server-pid` is given.
    pub async fn phase<F, Fut>(&self, n: u64, streams: usize, msg: &str, op: F) -> Phase
    where
        F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), String>> + Send,
    {
        let sample = || self.server_pid.and_then(|p| ProcSample::read(p).ok());
        let before = sample();
        let mut p = parallel(n, streams, self.deadline(), msg, op).await;
        p.cost = before.zip(sample()).map(|(b, a)| b.delta(&a));
        p
    }
}

/// One result row: table line and JSON line.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OpResult {
    pub label: String,
    pub workload: String,
    /// "summary", or "iteration" for fsmark's per-iteration rows.
    pub kind: String,
    pub streams: usize,
    /// TCP connections the streams shared (none for local rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conns: Option<usize>,
    /// True when each stream had a connection of its own (`--conns 0`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub conn_per_stream: bool,
    pub count: u64,
    pub errors: u64,
    pub seconds: f64,
    pub rate: f64,
    pub unit: String,
    pub p50_us: u64,
    pub p99_us: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iteration: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spread: Option<stats::Spread>,
    /// True when the deadline stopped the phase before its count.
    pub truncated: bool,
    /// Server CPU microseconds (user + system) per operation counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu_us_per_op: Option<f64>,
    /// Server context switches (voluntary + involuntary) per operation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_csw_per_op: Option<f64>,
    /// `write`: seconds of the final COMMIT, included in `seconds` (so the
    /// wire phase alone is `seconds - commit_seconds`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_seconds: Option<f64>,
    /// Failed operations by reason.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub error_kinds: BTreeMap<String, u64>,
}

impl OpResult {
    /// A summary row of `count` operations in `elapsed`, no latency.
    pub fn from_counts(
        label: &str,
        workload: &str,
        streams: usize,
        count: u64,
        errors: u64,
        elapsed: Duration,
        unit: &str,
    ) -> OpResult {
        let secs = elapsed.as_secs_f64();
        OpResult {
            label: label.to_string(),
            workload: workload.into(),
            kind: "summary".into(),
            streams,
            conns: None,
            conn_per_stream: false,
            count,
            errors,
            seconds: secs,
            rate: stats::rate(count, secs),
            unit: unit.into(),
            p50_us: 0,
            p99_us: 0,
            iteration: None,
            spread: None,
            truncated: false,
            server_cpu_us_per_op: None,
            server_csw_per_op: None,
            commit_seconds: None,
            error_kinds: BTreeMap::new(),
        }
    }
}

pub fn print_header() {
    println!(
        "{:<16} {:<14} {:>7} {:>5} {:>9} {:>12} {:<10} {:>8} {:>8} {:>6} {:>8}",
        "label",
        "workload",
        "streams",
        "conns",
        "count",
        "rate",
        "unit",
        "p50 us",
        "p99 us",
        "errors",
        "seconds"
    );
}

pub fn emit(r: &OpResult, json: Option<&std::path::Path>) {
    let it = r.iteration.map(|i| format!("#{i}")).unwrap_or_default();
    println!(
        "{:<16} {:<14} {:>7} {:>5} {:>9} {:>12.1} {:<10} {:>8} {:>8} {:>6} {:>8.2}{}",
        r.label,
        format!("{}{it}", r.workload),
        r.streams,
        r.conns.map_or("-".to_string(), |c| c.to_string()),
        r.count,
        r.rate,
        r.unit,
        r.p50_us,
        r.p99_us,
        r.errors,
        r.seconds,
        if r.truncated { " (deadline)" } else { "" }
    );
    for (k, n) in &r.error_kinds {
        println!("{:<16} {:<14} {:>7}   {n} failed: {k}", "", "  errors", "");
    }
    if let Some(s) = &r.spread {
        println!(
            "{:<16} {:<14} {:>7}   min {:.1}  max {:.1}  mean {:.1}  stddev {:.1} ({:.1}%)",
            "",
            "  spread",
            "",
            s.min,
            s.max,
            s.mean,
            s.stddev,
            if s.mean > 0.0 {
                100.0 * s.stddev / s.mean
            } else {
                0.0
            }
        );
    }
    if let Some(p) = json {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
        {
            if let Ok(s) = serde_json::to_string(r) {
                let _ = writeln!(f, "{s}");
            }
        }
    }
}

/// A mounted session with a client able to carry 1 MiB replies.
pub struct Conn {
    /// Where MOUNT calls go (the NFS connections unless --mount-addr).
    pub mnt: Client,
    pub nfs: NfsClient,
    pub root: NfsFh3,
}

/// Connect and MNT for a command whose streams share the connections.
pub async fn connect(t: &Target) -> Result<Conn, String> {
    if t.conns == 0 {
        return Err("--conns 0 (a connection per stream) is for create, mkdir and fsmark".into());
    }
    connect_any(t).await
}

/// Connect and MNT; with `--conns 0` one connection for the MNT and the
/// setup, the streams' own opened per phase ([`StreamClients`]).
async fn connect_any(t: &Target) -> Result<Conn, String> {
    let (client, mnt, root) = session::mount(t.addr, t.mount_addr, &t.export, t.conns).await?;
    Ok(Conn {
        mnt,
        nfs: NfsClient::new(client),
        root,
    })
}

/// The clients a phase's streams call through, as `run`'s
/// (`session::stream_clients`): the shared one, or with `--conns 0` one of
/// one connection per stream (many client hosts), opened before the phase
/// and not timed.
#[derive(Clone)]
pub struct StreamClients {
    shared: NfsClient,
    clients: Arc<Vec<NfsClient>>,
}

impl StreamClients {
    pub async fn open(t: &Target, c: &Conn, streams: usize) -> Result<StreamClients, String> {
        let clients = session::stream_clients(t.addr, t.conns, &c.nfs, streams.max(1)).await?;
        Ok(StreamClients {
            shared: c.nfs.clone(),
            clients: Arc::new(clients),
        })
    }

    /// Stream `s`'s client.
    pub fn get(&self, s: usize) -> NfsClient {
        session::stream_client(&self.clients, s)
            .unwrap_or(&self.shared)
            .clone()
    }
}

/// Commands that speak NFSv3 only.
fn v3_only(t: &Target, cmd: &str) -> Result<(), String> {
    match t.vers {
        Vers::V3 => Ok(()),
        Vers::V41 => Err(format!("{cmd} is NFSv3 only (no --vers 4.1)")),
    }
}

/// A name no earlier run used: ext4 reuses freed inodes slowly, so a
/// directory just emptied is never reused.
pub fn fresh_name(prefix: &str) -> String {
    let ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{prefix}-{}-{ns}", std::process::id())
}

fn file_attrs() -> Sattr3 {
    Sattr3 {
        mode: Some(0o644),
        ..Sattr3::default()
    }
}

/// MKDIR `name` in `dir`, returning its handle (LOOKUP if the reply has none).
pub async fn mkdir(nfs: &NfsClient, dir: &NfsFh3, name: &str) -> Result<NfsFh3, ClientError> {
    let ok = check(
        nfs.mkdir(&Mkdir3Args {
            where_: Diropargs3 {
                dir: dir.clone(),
                name: name.as_bytes().to_vec(),
            },
            attributes: Sattr3 {
                mode: Some(0o755),
                ..Sattr3::default()
            },
        })
        .await?,
    )?;
    match ok.obj {
        Some(fh) => Ok(fh),
        None => Ok(nfs.lookup_name(dir, name).await?.object),
    }
}

/// CREATE `name` in `dir` (UNCHECKED or GUARDED), returning its handle.
pub async fn create(
    nfs: &NfsClient,
    dir: &NfsFh3,
    name: &str,
    guarded: bool,
) -> Result<NfsFh3, ClientError> {
    let how = if guarded {
        CreateHow3::Guarded(file_attrs())
    } else {
        CreateHow3::Unchecked(file_attrs())
    };
    let ok = check(
        nfs.create(&Create3Args {
            where_: Diropargs3 {
                dir: dir.clone(),
                name: name.as_bytes().to_vec(),
            },
            how,
        })
        .await?,
    )?;
    match ok.obj {
        Some(fh) => Ok(fh),
        None => Ok(nfs.lookup_name(dir, name).await?.object),
    }
}

async fn remove(nfs: &NfsClient, dir: &NfsFh3, name: &str) -> Result<(), ClientError> {
    check(
        nfs.remove(&Remove3Args {
            object: Diropargs3 {
                dir: dir.clone(),
                name: name.as_bytes().to_vec(),
            },
        })
        .await?,
    )
    .map(|_| ())
}

async fn rmdir(nfs: &NfsClient, dir: &NfsFh3, name: &str) -> Result<(), ClientError> {
    check(
        nfs.rmdir(&Rmdir3Args {
            object: Diropargs3 {
                dir: dir.clone(),
                name: name.as_bytes().to_vec(),
            },
        })
        .await?,
    )
    .map(|_| ())
}

/// What one parallel phase did.
pub struct Phase {
    pub done: u64,
    pub errors: u64,
    pub elapsed: Duration,
    pub lat: Histogram<u64>,
    pub truncated: bool,
    /// The server's cost over the phase, when its PID is known.
    pub cost: Option<ProcSample>,
    /// Failed operations by reason (at most MAX_ERROR_KINDS + "other").
    pub error_kinds: BTreeMap<String, u64>,
}

pub fn progress(len: u64, msg: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    if let Ok(st) = ProgressStyle::with_template(
        "{msg:>16} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec})",
    ) {
        pb.set_style(st);
    }
    pb.set_message(msg.to_string());
    pb
}

/// Why an operation failed, as counted in a row's `error_kinds`.
pub(crate) fn why(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Distinct error kinds kept per phase; the rest are counted as "other".
const MAX_ERROR_KINDS: usize = 8;

/// Run `op(s, i)` for i in 0..n on `streams` concurrent tasks (s: the
/// task's number) pulling from one counter, until all are done or `limit`
/// has passed. `op` returns why it failed, if it did.
pub async fn parallel<F, Fut>(n: u64, streams: usize, limit: Duration, msg: &str, op: F) -> Phase
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send,
{
    let pb = progress(n, msg);
    let op = Arc::new(op);
    let next = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let kinds = Arc::new(std::sync::Mutex::new(BTreeMap::<String, u64>::new()));
    let start = Instant::now();
    let deadline = start + limit;
    let mut tasks = Vec::new();
    for s in 0..streams.max(1) {
        let (op, next, errors, pb) = (op.clone(), next.clone(), errors.clone(), pb.clone());
        let kinds = kinds.clone();
        tasks.push(tokio::spawn(async move {
            let mut h = histogram();
            let mut done = 0u64;
            let mut cut = false;
            loop {
                if Instant::now() >= deadline {
                    cut = true;
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let t = Instant::now();
                match op(s, i).await {
                    Ok(()) => done += 1,
                    Err(e) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        if let Ok(mut k) = kinds.lock() {
                            let key = if k.len() < MAX_ERROR_KINDS || k.contains_key(&e) {
                                e
                            } else {
                                "other".to_string()
                            };
                            *k.entry(key).or_insert(0) += 1;
                        }
                    }
                }
                let _ = h.record(t.elapsed().as_micros().max(1) as u64);
                pb.inc(1);
            }
            (done, h, cut)
        }));
    }
    let mut lat = histogram();
    let mut done = 0;
    let mut truncated = false;
    for t in tasks {
        if let Ok((d, h, cut)) = t.await {
            done += d;
            truncated |= cut;
            let _ = lat.add(&h);
        }
    }
    pb.finish_and_clear();
    Phase {
        done,
        errors: errors.load(Ordering::Relaxed),
        elapsed: start.elapsed(),
        lat,
        truncated,
        cost: None,
        error_kinds: kinds.lock().map(|k| k.clone()).unwrap_or_default(),
    }
}

pub(crate) fn row(t: &Target, workload: &str, streams: usize, p: &Phase, unit: &str) -> OpResult {
    let mut r = p.row(&t.label, workload, streams, unit);
    r.conns = Some(session::actual_conns(t.conns, streams));
    r.conn_per_stream = t.conns == 0;
    r
}

impl Phase {
    /// The summary row of one phase.
    pub fn row(&self, label: &str, workload: &str, streams: usize, unit: &str) -> OpResult {
        let p = self;
        let secs = p.elapsed.as_secs_f64();
        OpResult {
            label: label.to_string(),
            workload: workload.into(),
            kind: "summary".into(),
            streams,
            conns: None,
            conn_per_stream: false,
            count: p.done,
            errors: p.errors,
            seconds: secs,
            rate: stats::rate(p.done, secs),
            unit: unit.into(),
            p50_us: p.lat.value_at_quantile(0.5),
            p99_us: p.lat.value_at_quantile(0.99),
            iteration: None,
            spread: None,
            truncated: p.truncated,
            server_cpu_us_per_op: p.cost.map(|c| c.cpu_s * 1e6 / p.done.max(1) as f64),
            server_csw_per_op: p
                .cost
                .map(|c| (c.voluntary + c.involuntary) as f64 / p.done.max(1) as f64),
            commit_seconds: None,
            error_kinds: p.error_kinds.clone(),
        }
    }
}

#[derive(clap::Args, Clone, Debug)]
pub struct CreateArgs {
    #[command(flatten)]
    pub target: Target,
    /// Files (or directories for `mkdir`) per run, all in one fresh directory.
    #[arg(long, default_value_t = 150_000)]
    pub files: u64,
    /// Concurrent creators, comma separated: one run per value.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
    pub streams: Vec<usize>,
    /// CREATE GUARDED instead of UNCHECKED.
    #[arg(long)]
    pub guarded: bool,
}

/// `create` (CREATE then REMOVE) or `mkdir` (MKDIR then RMDIR) of N entries
/// in one fresh directory per stream count.
pub async fn create_cmd(a: CreateArgs, dirs: bool) -> Result<(), String> {
    let c = connect_any(&a.target).await?;
    let json = a.target.json.clone();
    print_header();
    let (w1, w2, u1, u2) = if dirs {
        ("mkdir", "rmdir", "mkdirs/s", "rmdirs/s")
    } else {
        ("create", "remove", "creates/s", "removes/s")
    };
    for &streams in &a.streams {
        let streams = streams.max(1);
        let top = fresh_name("bench");
        let dir = mkdir(&c.nfs, &c.root, &top)
            .await
            .map_err(|e| format!("MKDIR {top}: {e}"))?;
        let cl = StreamClients::open(&a.target, &c, streams).await?;
        let (nfs, d, g) = (cl.clone(), dir.clone(), a.guarded);
        let p = a
            .target
            .phase(a.files, streams, w1, move |s, i| {
                let (nfs, d) = (nfs.get(s), d.clone());
                async move {
                    let name = format!("f{i:07}");
                    if dirs {
                        mkdir(&nfs, &d, &name).await.map(drop).map_err(why)
                    } else {
                        create(&nfs, &d, &name, g).await.map(drop).map_err(why)
                    }
                }
            })
            .await;
        emit(&row(&a.target, w1, streams, &p, u1), json.as_deref());
        // Remove every name tried (the counter may have passed `done`).
        let tried = (p.done + p.errors).min(a.files);
        let (nfs, d) = (cl.clone(), dir.clone());
        let p = a
            .target
            .phase(tried, streams, w2, move |s, i| {
                let (nfs, d) = (nfs.get(s), d.clone());
                async move {
                    let name = format!("f{i:07}");
                    if dirs {
                        rmdir(&nfs, &d, &name).await.map_err(why)
                    } else {
                        remove(&nfs, &d, &name).await.map_err(why)
                    }
                }
            })
            .await;
        emit(&row(&a.target, w2, streams, &p, u2), json.as_deref());
        // The top directory is left if not empty (deadline): never reused.
        let _ = rmdir(&c.nfs, &c.root, &top).await;
    }
    Ok(())
}

#[derive(clap::Args, Clone, Debug)]
pub struct FsmarkArgs {
    #[command(flatten)]
    pub target: Target,
    #[arg(long, default_value_t = 5)]
    pub iterations: usize,
    /// Files per iteration, shared among the streams.
    #[arg(long, default_value_t = 5_000)]
    pub files_per_iteration: u64,
    /// Bytes written per file.
    #[arg(long, default_value_t = 4096)]
    pub file_size: usize,
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    pub streams: Vec<usize>,
    /// Keep the files (fs_mark keeps them); default removes them at the end.
    #[arg(long)]
    pub keep: bool,
    /// One WRITE FILE_SYNC per file instead of WRITE UNSTABLE + COMMIT (what
    /// the Linux client sends when an application fsyncs a small file).
    #[arg(long)]
    pub file_sync: bool,
}

/// fs_mark-like: per file CREATE, WRITE UNSTABLE of `file_size` bytes, then
/// COMMIT (the NFS counterpart of write + fsync), on all streams at once;
/// with `--file-sync`, CREATE and one WRITE FILE_SYNC.
pub async fn fsmark_cmd(a: FsmarkArgs) -> Result<(), String> {
    v3_only(&a.target, "fsmark")?;
    let c = connect_any(&a.target).await?;
    let lim = a.target.deadline();
    let json = a.target.json.clone();
    let size = a.file_size.min(rnfsd_client::nfs3::MAX_DATA);
    let data = Arc::new(vec![0xa5u8; size]);
    print_header();
    for &streams in &a.streams {
        let streams = streams.max(1);
        let top = fresh_name("fsmark");
        let dir = mkdir(&c.nfs, &c.root, &top)
            .await
            .map_err(|e| format!("MKDIR {top}: {e}"))?;
        let mut rates = Vec::new();
        let mut total = Phase {
            done: 0,
            errors: 0,
            elapsed: Duration::ZERO,
            lat: histogram(),
            truncated: false,
            cost: None,
            error_kinds: BTreeMap::new(),
        };
        let mut made: Vec<String> = Vec::new();
        let workload = if a.file_sync { "fsmark-sync" } else { "fsmark" };
        let cl = StreamClients::open(&a.target, &c, streams).await?;
        let times = Arc::new(OpTimes::default());
        for it in 0..a.iterations.max(1) {
            let (nfs, d, data, fsync) = (cl.clone(), dir.clone(), data.clone(), a.file_sync);
            let times = times.clone();
            let p = a
                .target
                .phase(a.files_per_iteration, streams, workload, move |s, i| {
                    let (nfs, d, data, times) =
                        (nfs.get(s), d.clone(), data.clone(), times.clone());
                    async move {
                        let name = format!("i{it:03}-f{i:07}");
                        fsmark_file(&nfs, &d, &name, &data, fsync, &times)
                            .await
                            .map_err(why)
                    }
                })
                .await;
            let tried = (p.done + p.errors).min(a.files_per_iteration);
            made.extend((0..tried).map(|i| format!("i{it:03}-f{i:07}")));
            let mut r = row(&a.target, workload, streams, &p, "files/s");
            r.kind = "iteration".into();
            r.iteration = Some(it);
            emit(&r, json.as_deref());
            rates.push(r.rate);
            total.done += p.done;
            total.errors += p.errors;
            total.elapsed += p.elapsed;
            total.truncated |= p.truncated;
            for (k, n) in &p.error_kinds {
                *total.error_kinds.entry(k.clone()).or_insert(0) += n;
            }
            total.cost = match (total.cost, p.cost) {
                (Some(t), Some(c)) => Some(t.plus(&c)),
                (t, c) => t.or(c),
            };
            let _ = total.lat.add(&p.lat);
            if p.truncated {
                break;
            }
        }
        eprintln!("{workload} {streams} streams: {}", times.summary());
        let mut r = row(&a.target, workload, streams, &total, "files/s");
        // The summary rate is the mean of the iterations' rates.
        r.spread = stats::spread(&rates);
        if let Some(s) = &r.spread {
            r.rate = s.mean;
        }
        emit(&r, json.as_deref());
        if !a.keep {
            let names = Arc::new(made);
            let (nfs, d, ns) = (cl.clone(), dir.clone(), names.clone());
            let _ = parallel(names.len() as u64, streams, lim, "cleanup", move |s, i| {
                let (nfs, d, ns) = (nfs.get(s), d.clone(), ns.clone());
                async move {
                    match ns.get(i as usize) {
                        Some(n) => remove(&nfs, &d, n).await.map_err(why),
                        None => Err("no such name".into()),
                    }
                }
            })
            .await;
            let _ = rmdir(&c.nfs, &c.root, &top).await;
        }
    }
    Ok(())
}

/// Each fsmark call's total time and count (CREATE, WRITE, COMMIT), as the
/// client saw it: where a file's time goes.
#[derive(Default)]
struct OpTimes([(AtomicU64, AtomicU64); 3]);

impl OpTimes {
    fn add(&self, op: usize, since: std::time::Instant) {
        let (ns, n) = &self.0[op];
        ns.fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
        n.fetch_add(1, Ordering::Relaxed);
    }

    fn summary(&self) -> String {
        let mean = |op: usize| {
            let (ns, n) = &self.0[op];
            ns.load(Ordering::Relaxed) as f64 / 1e3 / n.load(Ordering::Relaxed).max(1) as f64
        };
        format!(
            "mean latency CREATE {:.0} us, WRITE {:.0} us, COMMIT {:.0} us",
            mean(0),
            mean(1),
            mean(2)
        )
    }
}

async fn fsmark_file(
    nfs: &NfsClient,
    dir: &NfsFh3,
    name: &str,
    data: &[u8],
    file_sync: bool,
    times: &OpTimes,
) -> Result<(), ClientError> {
    let t = std::time::Instant::now();
    let fh = create(nfs, dir, name, false).await?;
    times.add(0, t);
    let t = std::time::Instant::now();
    let w = check(
        nfs.write_ref(&Write3ArgsRef {
            file: fh.clone(),
            offset: 0,
            count: data.len() as u32,
            stable: if file_sync {
                StableHow::FileSync
            } else {
                StableHow::Unstable
            },
            data,
        })
        .await?,
    )?;
    times.add(1, t);
    if file_sync {
        if w.committed != StableHow::FileSync {
            return Err(ClientError::Protocol(format!(
                "FILE_SYNC WRITE answered {:?}",
                w.committed
            )));
        }
        return Ok(());
    }
    let t = std::time::Instant::now();
    check(
        nfs.commit(&Commit3Args {
            file: fh,
            offset: 0,
            count: 0,
        })
        .await?,
    )?;
    times.add(2, t);
    Ok(())
}

#[derive(clap::Args, Clone, Debug)]
pub struct MountArgs {
    #[command(flatten)]
    pub target: Target,
    /// MNT + GETATTR repetitions per stream count.
    #[arg(long, default_value_t = 1_000)]
    pub reps: u64,
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub streams: Vec<usize>,
    /// First walk up to this many objects of the export (READDIRPLUS), as a
    /// preceding traverse would, to warm the server's caches.
    #[arg(long)]
    pub warm_tree: Option<usize>,
}

/// MNT then GETATTR of the returned root, K times: latency of each call.
pub async fn mount_cmd(a: MountArgs) -> Result<(), String> {
    v3_only(&a.target, "mount")?;
    let c = connect(&a.target).await?;
    if let Some(limit) = a.warm_tree {
        let items = workload::walk(&c.nfs, &c.root, limit, WALK_MAX_TIME)
            .await
            .map_err(|e| format!("warming walk: {e}"))?;
        eprintln!("warmed: {} objects walked", items.len());
    }
    let json = a.target.json.clone();
    print_header();
    for &streams in &a.streams {
        let streams = streams.max(1);
        let mnt_lat = Arc::new(std::sync::Mutex::new(histogram()));
        let ga_lat = Arc::new(std::sync::Mutex::new(histogram()));
        let (cl, nfs, ex) = (c.mnt.clone(), c.nfs.clone(), a.target.export.clone());
        let (ml, gl) = (mnt_lat.clone(), ga_lat.clone());
        let p = a
            .target
            .phase(a.reps, streams, "mnt+getattr", move |_, _| {
                let (m, nfs, ex) = (MountClient::new(cl.clone()), nfs.clone(), ex.clone());
                let (ml, gl) = (ml.clone(), gl.clone());
                async move {
                    let t = Instant::now();
                    let ok = m.mnt(&ex).await.map_err(|e| format!("MNT: {e}"))?;
                    let us = t.elapsed().as_micros().max(1) as u64;
                    if let Ok(mut h) = ml.lock() {
                        let _ = h.record(us);
                    }
                    let t = Instant::now();
                    let r = nfs
                        .getattr(&GetAttr3Args {
                            object: NfsFh3::new(ok.fhandle),
                        })
                        .await
                        .map(check);
                    let us = t.elapsed().as_micros().max(1) as u64;
                    if let Ok(mut h) = gl.lock() {
                        let _ = h.record(us);
                    }
                    r.map_err(why)?.map(drop).map_err(why)
                }
            })
            .await;
        emit(
            &row(&a.target, "mnt+getattr", streams, &p, "pairs/s"),
            json.as_deref(),
        );
        for (name, h) in [("mnt", &mnt_lat), ("getattr", &ga_lat)] {
            let Ok(h) = h.lock() else { continue };
            let mut r = row(&a.target, &format!("mount-{name}"), streams, &p, "calls/s");
            r.kind = "detail".into();
            // The phase's server cost is per MNT+GETATTR pair, on the summary row.
            (r.server_cpu_us_per_op, r.server_csw_per_op) = (None, None);
            r.count = h.len();
            r.rate = stats::rate(h.len(), p.elapsed.as_secs_f64());
            r.p50_us = h.value_at_quantile(0.5);
            r.p99_us = h.value_at_quantile(0.99);
            emit(&r, json.as_deref());
        }
    }
    Ok(())
}

#[derive(clap::Args, Clone, Debug)]
pub struct IoArgs {
    #[command(flatten)]
    pub target: Target,
    /// File size in MiB.
    #[arg(long, default_value_t = 256)]
    pub size: u64,
    /// Streams, each reading/writing its own contiguous slice of the file.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub streams: Vec<usize>,
    /// WRITE FILE_SYNC instead of UNSTABLE + one COMMIT at the end.
    #[arg(long)]
    pub file_sync: bool,
    /// Keep the test file.
    #[arg(long)]
    pub keep: bool,
    /// `read`: read the file this many times over (a longer phase from the
    /// page cache, e.g. for profiling the server).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub passes: u64,
    /// Bytes per READ or WRITE call in KiB (a client's rsize/wsize), at
    /// most the server's rtmax/wtmax. Other than 1024, the rows' workload
    /// names carry it ("write-64k"), so a report never mixes block sizes.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub block_kib: u64,
}

const CHUNK: u64 = 1 << 20;

/// The transfer sizes to use: 1 MiB, lowered to the server's FSINFO rtmax
/// and wtmax (RFC 1813 §3.3.19) so a server with smaller limits is still
/// measured with full-size calls rather than failing.
async fn io_sizes(nfs: &NfsClient, root: &NfsFh3) -> (u64, u64) {
    let lim = |v: u32| {
        if v == 0 {
            CHUNK
        } else {
            CHUNK.min(u64::from(v))
        }
    };
    match nfs
        .fsinfo(&FsInfo3Args {
            fsroot: root.clone(),
        })
        .await
        .map(check)
    {
        Ok(Ok(i)) => (lim(i.rtmax), lim(i.wtmax)),
        _ => (CHUNK, CHUNK),
    }
}

/// Sequential 1 MiB WRITEs (`write`) or READs (`read`, after writing the file
/// UNSTABLE + COMMIT) of a fresh file; throughput in MB/s.
pub async fn io_cmd(a: IoArgs, read: bool) -> Result<(), String> {
    let c = connect(&a.target).await?;
    let json = a.target.json.clone();
    let total = a.size.clamp(1, 1 << 20) * CHUNK;
    let (rsize, wsize) = io_sizes(&c.nfs, &c.root).await;
    let (rsize, wsize) = (rsize.min(a.block_kib << 10), wsize.min(a.block_kib << 10));
    let buf = Arc::new(vec![0x5au8; wsize as usize]);
    let sized = |w: &str| match a.block_kib {
        1024 => w.to_string(),
        k => format!("{w}-{k}k"),
    };
    print_header();
    for &streams in &a.streams {
        let streams = streams.max(1);
        let name = fresh_name("bench-io");
        let fh = create(&c.nfs, &c.root, &name, false)
            .await
            .map_err(|e| format!("CREATE {name}: {e}"))?;
        let stable = if a.file_sync && !read {
            StableHow::FileSync
        } else {
            StableHow::Unstable
        };
        let wbytes = Arc::new(AtomicU64::new(0));
        let (nfs, f, b, wb) = (c.nfs.clone(), fh.clone(), buf.clone(), wbytes.clone());
        // Chunks are handed out in offset order: with one stream strictly
        // sequential, with several each stream advances in order.
        let wp = a
            .target
            .phase(total.div_ceil(wsize), streams, "write", move |_, i| {
                let (nfs, f, b, wb) = (nfs.clone(), f.clone(), b.clone(), wb.clone());
                async move {
                    let off = i * wsize;
                    let n = wsize.min(total - off.min(total)) as usize;
                    let r = nfs
                        .write_ref(&Write3ArgsRef {
                            file: f,
                            offset: off,
                            count: n as u32,
                            stable,
                            data: b.get(..n).unwrap_or(&b[..]),
                        })
                        .await;
                    match r.map(check) {
                        Ok(Ok(w)) => {
                            wb.fetch_add(u64::from(w.count), Ordering::Relaxed);
                            if w.count as usize == n {
                                Ok(())
                            } else {
                                Err("short write".into())
                            }
                        }
                        Ok(Err(e)) | Err(e) => Err(why(e)),
                    }
                }
            })
            .await;
        let t = Instant::now();
        let committed = stable == StableHow::FileSync
            || matches!(
                c.nfs
                    .commit(&Commit3Args {
                        file: fh.clone(),
                        offset: 0,
                        count: 0,
                    })
                    .await
                    .map(check),
                Ok(Ok(_))
            );
        let commit_time = t.elapsed();
        if !read {
            let mut p = wp;
            p.elapsed += commit_time;
            if !committed {
                p.errors += 1;
            }
            let mut r = row(&a.target, "write", streams, &p, "MB/s");
            r.workload = sized(if a.file_sync { "write-sync" } else { "write" });
            r.commit_seconds = Some(commit_time.as_secs_f64());
            r.rate = stats::mb_per_s(wbytes.load(Ordering::Relaxed), p.elapsed.as_secs_f64());
            emit(&r, json.as_deref());
        } else {
            let written = wbytes.load(Ordering::Relaxed);
            let rbytes = Arc::new(AtomicU64::new(0));
            let (nfs, f, rb) = (c.nfs.clone(), fh.clone(), rbytes.clone());
            let chunks = written.div_ceil(rsize);
            let p = a
                .target
                .phase(chunks * a.passes, streams, "read", move |_, i| {
                    let (nfs, f, rb) = (nfs.clone(), f.clone(), rb.clone());
                    async move {
                        let off = (i % chunks.max(1)) * rsize;
                        let n = rsize.min(written - off.min(written));
                        let r = nfs
                            .read(&Read3Args {
                                file: f,
                                offset: off,
                                count: n as u32,
                            })
                            .await;
                        match r.map(check) {
                            Ok(Ok(d)) => {
                                rb.fetch_add(d.data.len() as u64, Ordering::Relaxed);
                                if d.data.len() as u64 == n {
                                    Ok(())
                                } else {
                                    Err("short read".into())
                                }
                            }
                            Ok(Err(e)) | Err(e) => Err(why(e)),
                        }
                    }
                })
                .await;
            let mut r = row(&a.target, "read", streams, &p, "MB/s");
            r.workload = sized("read");
            r.rate = stats::mb_per_s(rbytes.load(Ordering::Relaxed), p.elapsed.as_secs_f64());
            emit(&r, json.as_deref());
        }
        if !a.keep {
            let _ = remove(&c.nfs, &c.root, &name).await;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(conns: usize) -> Target {
        Target {
            vers: Vers::V3,
            addr: "127.0.0.1:9".parse().unwrap(),
            mount_addr: None,
            export: "/x".into(),
            conns,
            label: "t".into(),
            json: None,
            max_seconds: 1.0,
            server_pid: None,
        }
    }

    fn phase() -> Phase {
        Phase {
            done: 10,
            errors: 0,
            elapsed: Duration::from_secs(1),
            lat: histogram(),
            truncated: false,
            cost: None,
            error_kinds: BTreeMap::new(),
        }
    }

    #[test]
    fn rows_say_whether_each_stream_had_its_own_connection() {
        let r = row(&target(0), "fsmark", 16, &phase(), "files/s");
        assert_eq!((r.conns, r.conn_per_stream), (Some(16), true));
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["conn_per_stream"], true);
        let r = row(&target(4), "fsmark", 16, &phase(), "files/s");
        assert_eq!((r.conns, r.conn_per_stream), (Some(4), false));
        let j = serde_json::to_value(&r).unwrap();
        assert!(j.get("conn_per_stream").is_none());
    }

    #[test]
    fn a_connection_per_stream_is_refused_where_streams_share_one() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let e = rt.block_on(connect(&target(0))).err().unwrap();
        assert!(e.contains("--conns 0"), "{e}");
    }

    #[test]
    fn parallel_gives_each_task_its_own_stream_number() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .unwrap();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let p = rt.block_on(parallel(
            40,
            4,
            Duration::from_secs(10),
            "t",
            move |s, i| {
                let seen = s2.clone();
                async move {
                    seen.lock().unwrap().push((s, i));
                    tokio::task::yield_now().await;
                    Ok(())
                }
            },
        ));
        assert_eq!(p.done, 40);
        let v = seen.lock().unwrap().clone();
        assert!(v.iter().all(|&(s, _)| s < 4), "{v:?}");
        let mut is: Vec<u64> = v.iter().map(|&(_, i)| i).collect();
        is.sort_unstable();
        assert_eq!(is, (0..40).collect::<Vec<_>>());
    }
}
