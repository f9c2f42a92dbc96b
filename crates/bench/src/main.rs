//! rnfsd-bench: load generator for rnfsd (and any NFSv3 server) on our client
//! library. Every run is bounded in time and count and talks to 127.0.0.1
//! unless told otherwise.

mod ceiling;
mod chart;
mod handles;
mod local;
mod matrix;
mod ops;
mod proc_cost;
mod report;
mod stats;
mod storm;
mod workload;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use rnfsd_client::nfs3::NfsFh3;
use rnfsd_client::{Auth, Client, ClientConfig, MountClient, NfsClient, MAX_CONNECTIONS};

use proc_cost::ProcSample;
use workload::{Load, Mix};

#[derive(Parser)]
#[command(name = "rnfsd-bench", about = "Benchmarks for rnfsd", version)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Drive a running server: calls/s and latency for each stream count.
    Run(RunArgs),
    /// Make a tree of files for the traverse and --handles mixes (local
    /// syscalls).
    Prepare {
        /// Directory to fill (created; must not exist or be empty).
        dir: PathBuf,
        #[arg(long, default_value_t = 20_000)]
        files: usize,
        #[arg(long, default_value_t = 1_000)]
        dirs: usize,
        /// The seed-000 tree instead: 161,480 files in 10,841 directories
        /// (overrides --files and --dirs).
        #[arg(long)]
        seed_size: bool,
        /// Bytes per file (at most 16 MiB): the file's number as 8 bytes,
        /// repeated; 4096 or more gives the read mix full READs.
        #[arg(long, default_value_t = 8)]
        file_size: usize,
        /// Create on T threads, each filling whole directories (the same
        /// tree: names, placement and contents); for trees of millions of
        /// files. Without it: one thread, as before.
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Walk the export (READDIRPLUS, several directories at once) and save
    /// disjoint samples of its non-root handles, hex, one per line.
    Handles(handles::HandlesArgs),
    /// Warm GETATTR p50/p99/max alone, then while cold streams GETATTR
    /// handles the server must look for (retrying JUKEBOX): the cold-handle
    /// storm after a host reboot or a server restart.
    Storm(storm::StormArgs),
    /// The service-core matrix: start rnfsd with each worker count and pool
    /// policy, run each mix at each stream count, alternating configurations
    /// run by run, and report medians and ratios.
    PoolMatrix(matrix::MatrixArgs),
    /// N CREATEs (UNCHECKED, or GUARDED) in one fresh directory by C
    /// concurrent creators, then REMOVE of them: creates/s and removes/s.
    Create(ops::CreateArgs),
    /// N MKDIRs in one fresh directory, then RMDIR of them.
    Mkdir(ops::CreateArgs),
    /// fs_mark-like: files of 4 KiB written UNSTABLE then COMMITted, per
    /// iteration files/s with min/max/stddev across iterations.
    Fsmark(ops::FsmarkArgs),
    /// MNT + GETATTR latency (p50, p99) over K repetitions.
    Mount(ops::MountArgs),
    /// Sequential 1 MiB READ throughput (the file is written first).
    Read(ops::IoArgs),
    /// Sequential 1 MiB WRITE throughput (UNSTABLE + COMMIT, or FILE_SYNC).
    Write(ops::IoArgs),
    /// A no-work RPC server (MNT and empty successes only): the machine's
    /// ceiling for calls/s, run beside the servers by compare.sh.
    Ceiling(ceiling::CeilingArgs),
    /// Local-filesystem reference for `create`: std::fs creates + removes.
    LocalCreate(local::LocalArgs),
    /// Local-filesystem reference for `fsmark`: 4 KiB write + fsync per file.
    LocalFsmark(local::LocalArgs),
    /// Medians over repeated runs per workload, stream count and label, with
    /// the ratios of the first label to the others (Markdown tables).
    Report {
        /// JSON-lines result files.
        #[arg(long, required = true, num_args = 1..)]
        json: Vec<PathBuf>,
        /// Column order, comma separated; ratios are of the first label.
        #[arg(long, value_delimiter = ',')]
        labels: Vec<String>,
        /// Also write the report as JSON here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// SVG chart of rate against client streams from JSON lines.
    Chart {
        /// JSON lines written by --json.
        #[arg(long)]
        json: PathBuf,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value = "rnfsd-bench")]
        title: String,
        /// Only rows of this workload (or mix); one line per label then.
        #[arg(long)]
        workload: Option<String>,
    },
}

#[derive(clap::Args, Clone)]
struct RunArgs {
    /// Server address (NFS, and MOUNT unless --mount-addr).
    #[arg(long, default_value = "127.0.0.1:2049")]
    addr: SocketAddr,
    /// MOUNT's address when it is not the NFS port (nfs-ganesha).
    #[arg(long)]
    mount_addr: Option<SocketAddr>,
    /// Absolute export path to MNT.
    #[arg(long)]
    export: String,
    #[arg(long, value_enum, default_value = "getattr")]
    mix: Mix,
    /// Concurrent client streams, comma separated; each has one call in
    /// flight.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64,256")]
    streams: Vec<usize>,
    /// TCP connections the streams share, calls spread over them round-robin
    /// (at most 64); 0: one connection per stream (at most 512 streams), as
    /// many hosts each with one call in flight.
    #[arg(long, default_value_t = 4)]
    conns: usize,
    /// 0: getattr and access go to the export root's handle (which servers
    /// resolve without a handle lookup). N > 0: every call goes to one of N
    /// distinct objects sampled across the walked tree (regular files for
    /// read and write), picked at random per call; lookup, read and write
    /// need N > 0.
    #[arg(long, default_value_t = 0)]
    handles: usize,
    /// Instead of a walk and --handles: every call goes to one of the
    /// handles in this file (hex, one per line, as `handles` writes);
    /// getattr, access, read and write.
    #[arg(long, conflicts_with = "handles")]
    handles_file: Option<PathBuf>,
    /// Seconds per measurement (bounded: at most 600).
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// PID of the server on this machine, for CPU and context switches per
    /// 1,000 calls from /proc.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Objects of the tree walked at most (traverse visits them; --handles
    /// samples from them).
    #[arg(long, default_value_t = 50_000)]
    tree_limit: usize,
    /// Append one JSON object per measurement to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Series name in the table, JSON and chart (e.g. rnfsd, ganesha).
    #[arg(long, default_value = "server")]
    label: String,
    /// After the walk, wait (at most 60 s) until this file exists before the
    /// first connection and warm-up: lets a tool attach to the server first
    /// (scripts/syscalls.sh).
    #[arg(long)]
    start_file: Option<PathBuf>,
    /// With one stream, keep the client's thread on one CPU (the first it
    /// may use). On a small VM the scheduler otherwise moves a lone client
    /// thread to whichever vCPU is idle at each wakeup, and a round trip
    /// then mostly measures that (bimodal: about 15 or 80 µs on the 2-vCPU
    /// guest) rather than the server.
    #[arg(long)]
    pin_one_stream: bool,
}

/// One measurement, as printed and written to JSON.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Measurement {
    pub label: String,
    pub mix: Mix,
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

/// A mounted session: a client with `conns` connections (one for the MNT and
/// the walk when `conns` is 0) and the export root.
pub struct Session {
    pub nfs: NfsClient,
    pub root: NfsFh3,
    pub addr: SocketAddr,
    /// As asked: 0 means a connection per stream, opened per measurement.
    pub conns: usize,
}

pub async fn connect(
    addr: SocketAddr,
    mount_addr: Option<SocketAddr>,
    export: &str,
    conns: usize,
) -> Result<Session, String> {
    let (client, _mnt, root) = mount(addr, mount_addr, export, conns).await?;
    Ok(Session {
        nfs: NfsClient::new(client),
        root,
        addr,
        conns,
    })
}

/// Most streams `--conns 0` opens a connection for: a bound on the bench's
/// sockets, well under the servers' connection limits (rnfsd: 1,024).
pub const MAX_PER_STREAM_CONNS: usize = 512;

/// The root credential every bench connection calls with.
fn bench_config(conns: usize) -> ClientConfig {
    ClientConfig {
        auth: Auth::unix(0, 0),
        connections: conns.clamp(1, MAX_CONNECTIONS),
        ..ClientConfig::default()
    }
}

/// The clients a measurement's streams call through: `shared`, or with
/// `--conns 0` (`conns` 0) one client of one connection per stream, opened
/// now (not timed). Stream `s` calls through `stream_client(clients, s)`.
pub(crate) async fn stream_clients(
    addr: SocketAddr,
    conns: usize,
    shared: &NfsClient,
    streams: usize,
) -> Result<Vec<NfsClient>, String> {
    if conns == 0 {
        per_stream_clients(addr, streams).await
    } else {
        Ok(vec![shared.clone()])
    }
}

/// Stream `s`'s client among `clients` (`stream_clients`): the shared one,
/// or the stream's own.
pub(crate) fn stream_client(clients: &[NfsClient], s: usize) -> Option<&NfsClient> {
    clients.get(s % clients.len().max(1))
}

/// One client of one connection per stream (`--conns 0`). The library's
/// `Client` spreads calls round-robin over its connections, so a stream
/// keeps to its own connection only through a client of its own.
async fn per_stream_clients(addr: SocketAddr, streams: usize) -> Result<Vec<NfsClient>, String> {
    check_streams(0, streams)?;
    let cfg = bench_config(1);
    let mut v = Vec::with_capacity(streams);
    for _ in 0..streams {
        let c = Client::connect(addr, &cfg).await.map_err(|e| {
            format!(
                "connect {addr} (connection {} of {streams}): {e}",
                v.len() + 1
            )
        })?;
        v.push(NfsClient::new(c));
    }
    Ok(v)
}

/// `--conns 0` opens one connection per stream, up to a bound.
pub fn check_streams(conns: usize, streams: usize) -> Result<(), String> {
    if conns == 0 && streams > MAX_PER_STREAM_CONNS {
        return Err(format!(
            "--conns 0 opens a connection per stream: at most {MAX_PER_STREAM_CONNS} streams"
        ));
    }
    Ok(())
}

/// Connections a measurement uses: `streams` with `--conns 0`, else the
/// shared client's (clamped to the library's bound).
pub fn actual_conns(conns: usize, streams: usize) -> usize {
    if conns == 0 {
        streams
    } else {
        conns.min(MAX_CONNECTIONS)
    }
}

/// Connect `conns` connections to `addr` as root and MNT `export`, on
/// `mount_addr` when MOUNT has a port of its own (nfs-ganesha), else on
/// the NFS connections. Returns the NFS client, the MOUNT client and the
/// export's root handle.
pub async fn mount(
    addr: SocketAddr,
    mount_addr: Option<SocketAddr>,
    export: &str,
    conns: usize,
) -> Result<(Client, Client, NfsFh3), String> {
    let cfg = bench_config(conns);
    let client = Client::connect(addr, &cfg)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    let mnt_client = match mount_addr {
        None => client.clone(),
        Some(m) => Client::connect(
            m,
            &ClientConfig {
                connections: 1,
                ..cfg.clone()
            },
        )
        .await
        .map_err(|e| format!("connect {m}: {e}"))?,
    };
    let root = MountClient::new(mnt_client.clone())
        .mnt(export)
        .await
        .map_err(|e| format!("MNT {export}: {e}"))?;
    Ok((client, mnt_client, NfsFh3::new(root.fhandle)))
}

/// A mix ready to run: its calls' arguments and how they were chosen.
pub struct Prepared {
    pub mix: Mix,
    pub handles: usize,
    pub load: Arc<Load>,
}

/// Measure one mix at one stream count, with server cost if `pid` is given.
/// With `--conns 0` the stream's connections are opened first (not timed)
/// and closed after.
pub async fn measure(
    s: &Session,
    label: &str,
    p: &Prepared,
    streams: usize,
    dur: Duration,
    pid: Option<u32>,
    pin_one: bool,
) -> Result<Measurement, String> {
    let (warm, r, cost) = if streams == 1 {
        single_stream(s.addr, p.load.clone(), dur, pid, pin_one).await?
    } else {
        let clients = stream_clients(s.addr, s.conns, &s.nfs, streams).await?;
        timed_run(&clients, p.load.clone(), streams, dur, pid).await
    };
    let per = |x: f64| x / (r.calls.max(1) as f64);
    Ok(Measurement {
        label: label.to_string(),
        mix: p.mix,
        streams,
        handles: p.handles,
        root_handle: p.mix.uses_root(p.handles),
        // One stream has a connection of its own (`single_stream`).
        conns: if streams == 1 {
            1
        } else {
            actual_conns(s.conns, streams)
        },
        conn_per_stream: s.conns == 0,
        client_pinned: streams == 1 && pin_one,
        calls: r.calls,
        warmup_calls: warm.calls,
        errors: r.errors,
        seconds: r.elapsed.as_secs_f64(),
        calls_per_s: r.calls_per_s(),
        p50_us: r.lat.value_at_quantile(0.5),
        p99_us: r.lat.value_at_quantile(0.99),
        server_cpu_us_per_call: cost.map(|c| per(c.cpu_s * 1e6)),
        server_csw_per_call: cost.map(|c| per((c.voluntary + c.involuntary) as f64)),
        server_vol_csw_per_call: cost.map(|c| per(c.voluntary as f64)),
        server_threads: cost.map(|c| c.threads),
    })
}

/// A warm-up (so thread start-up and first-touch costs stay out), then the
/// measured run with the server's CPU and context switches around it.
async fn timed_run(
    clients: &[NfsClient],
    load: Arc<Load>,
    streams: usize,
    dur: Duration,
    pid: Option<u32>,
) -> (workload::RunResult, workload::RunResult, Option<ProcSample>) {
    let warm = workload::run(clients, load.clone(), streams, dur / 10).await;
    let before = pid.and_then(|p| ProcSample::read(p).ok());
    let r = workload::run(clients, load, streams, dur).await;
    let after = pid.and_then(|p| ProcSample::read(p).ok());
    let cost = match (before, after) {
        (Some(b), Some(a)) => Some(b.delta(&a)),
        _ => None,
    };
    (warm, r, cost)
}

/// Pins the calling thread to the first CPU it may run on.
fn pin_first_cpu() -> Result<(), String> {
    let cpu = rnfsd_pool::affinity::allowed_cpus()
        .ok()
        .and_then(|c| c.first().copied())
        .ok_or("--pin-one-stream: cannot read the CPU affinity")?;
    rnfsd_pool::affinity::pin_current_thread(cpu)
        .map_err(|e| format!("--pin-one-stream: pinning to CPU {cpu}: {e}"))
}

/// One call in flight: the stream runs with a connection of its own on a
/// single-threaded runtime in a thread of its own, so the task that reads
/// a reply is the one that sent the call, and `pin` can keep that one
/// thread on one CPU. The single-threaded runtime alone did not end the
/// bimodal one-in-flight figures (measured); keeping the thread on one CPU,
/// with the server's loop on the same one, did (docs/benchmarks.md).
async fn single_stream(
    addr: SocketAddr,
    load: Arc<Load>,
    dur: Duration,
    pid: Option<u32>,
    pin: bool,
) -> Result<(workload::RunResult, workload::RunResult, Option<ProcSample>), String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("bench-one-stream".into())
        .spawn(move || {
            let pinned = if pin { pin_first_cpu() } else { Ok(()) };
            let r = pinned
                .and_then(|()| {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| format!("tokio: {e}"))
                })
                .and_then(|rt| {
                    rt.block_on(async move {
                        let clients = per_stream_clients(addr, 1).await?;
                        Ok(timed_run(&clients, load, 1, dur, pid).await)
                    })
                });
            let _ = tx.send(r);
        })
        .map_err(|e| format!("starting the single-stream thread: {e}"))?;
    rx.await
        .map_err(|_| "the single-stream thread ended without a result".to_string())?
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
        m.mix.name(),
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

/// Seed 000's rsync-like tree: 161,480 files in 10,841 directories.
const SEED_FILES: usize = 161_480;
const SEED_DIRS: usize = 10_841;

/// Largest `prepare --file-size`.
const MAX_FILE_SIZE: usize = 16 << 20;

fn prepare(dir: &Path, files: usize, dirs: usize, file_size: usize) -> std::io::Result<()> {
    if file_size > MAX_FILE_SIZE {
        return Err(std::io::Error::other(format!(
            "--file-size is at most {MAX_FILE_SIZE}"
        )));
    }
    std::fs::create_dir_all(dir)?;
    let dirs = dirs.max(1);
    for d in 0..dirs {
        std::fs::create_dir_all(dir.join(format!("d{d:05}")))?;
    }
    let mut buf = Vec::with_capacity(file_size);
    for f in 0..files {
        let p = dir
            .join(format!("d{:05}", f % dirs))
            .join(format!("f{f:07}"));
        file_content(f as u64, file_size, &mut buf);
        std::fs::write(p, &buf)?;
    }
    Ok(())
}

/// Most `prepare --threads`.
const MAX_PREPARE_THREADS: usize = 256;

/// `prepare` on `threads` threads: thread t makes directories t, t + T, ...
/// and each one's files (f = d, d + dirs, ...), so every file lands where
/// and as `prepare` puts it, and no two threads share a directory (ext4
/// serialises creates in one directory). Progress on stderr every 10 s.
fn prepare_parallel(
    dir: &Path,
    files: usize,
    dirs: usize,
    file_size: usize,
    threads: usize,
) -> std::io::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    if file_size > MAX_FILE_SIZE {
        return Err(std::io::Error::other(format!(
            "--file-size is at most {MAX_FILE_SIZE}"
        )));
    }
    std::fs::create_dir_all(dir)?;
    let dirs = dirs.max(1);
    let threads = threads.clamp(1, MAX_PREPARE_THREADS).min(dirs);
    let done = AtomicU64::new(0);
    let start = std::time::Instant::now();
    std::thread::scope(|sc| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let done = &done;
                sc.spawn(move || -> std::io::Result<()> {
                    let mut buf = Vec::with_capacity(file_size);
                    for d in (t..dirs).step_by(threads) {
                        let dp = dir.join(format!("d{d:05}"));
                        std::fs::create_dir_all(&dp)?;
                        for f in (d..files).step_by(dirs) {
                            file_content(f as u64, file_size, &mut buf);
                            std::fs::write(dp.join(format!("f{f:07}")), &buf)?;
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        let mut last = std::time::Instant::now();
        while !workers.iter().all(|w| w.is_finished()) {
            std::thread::sleep(Duration::from_millis(100));
            if last.elapsed() >= Duration::from_secs(10) {
                last = std::time::Instant::now();
                let n = done.load(Ordering::Relaxed);
                eprintln!(
                    "prepare: {n}/{files} files, {:.0}/s",
                    n as f64 / start.elapsed().as_secs_f64()
                );
            }
        }
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("prepare thread panicked")))
            })
            .collect::<std::io::Result<Vec<()>>>()
            .map(drop)
    })
}

/// File `f`'s content: its number as 8 little-endian bytes, repeated to
/// `size` (size 8: exactly what earlier trees held).
fn file_content(f: u64, size: usize, buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend(f.to_le_bytes().iter().copied().cycle().take(size));
}

fn chart_cmd(json: &Path, out: &Path, title: &str, only: Option<&str>) -> Result<(), String> {
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

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // No runtime for the ceiling server: idle threads of its own only.
    let cli = match cli.cmd {
        Cmd::Ceiling(a) => {
            return match ceiling::ceiling_cmd(a) {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("rnfsd-bench: {e}");
                    std::process::ExitCode::FAILURE
                }
            }
        }
        cmd => Cli { cmd },
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rnfsd-bench: tokio: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let r = match cli.cmd {
        Cmd::Prepare {
            dir,
            files,
            dirs,
            seed_size,
            file_size,
            threads,
        } => {
            let (files, dirs) = if seed_size {
                (SEED_FILES, SEED_DIRS)
            } else {
                (files, dirs)
            };
            match threads {
                None => prepare(&dir, files, dirs, file_size),
                Some(t) => prepare_parallel(&dir, files, dirs, file_size, t),
            }
            .map_err(|e| e.to_string())
        }
        Cmd::Handles(a) => rt.block_on(handles::handles_cmd(a)),
        Cmd::Storm(a) => rt.block_on(storm::storm_cmd(a)),
        Cmd::Run(a) => rt.block_on(run_cmd(a)),
        Cmd::PoolMatrix(a) => rt.block_on(matrix::run(a)),
        Cmd::Create(a) => rt.block_on(ops::create_cmd(a, false)),
        Cmd::Mkdir(a) => rt.block_on(ops::create_cmd(a, true)),
        Cmd::Fsmark(a) => rt.block_on(ops::fsmark_cmd(a)),
        Cmd::Mount(a) => rt.block_on(ops::mount_cmd(a)),
        Cmd::Read(a) => rt.block_on(ops::io_cmd(a, true)),
        Cmd::Write(a) => rt.block_on(ops::io_cmd(a, false)),
        Cmd::Ceiling(_) => Ok(()), // returned above
        Cmd::LocalCreate(a) => local::create_cmd(a),
        Cmd::LocalFsmark(a) => local::fsmark_cmd(a),
        Cmd::Report { json, labels, out } => report::report_cmd(&json, &labels, out.as_deref()),
        Cmd::Chart {
            json,
            out,
            title,
            workload,
        } => chart_cmd(&json, &out, &title, workload.as_deref()),
    };
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rnfsd-bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run_cmd(a: RunArgs) -> Result<(), String> {
    // A handle file replaces the walk (and the --handles sample).
    let from_file = match &a.handles_file {
        Some(f) => Some(Load::from_handles(a.mix, handles::read_handles(f)?)?),
        None => {
            workload::validate(a.mix, a.handles, a.tree_limit)?;
            None
        }
    };
    for &n in &a.streams {
        check_streams(a.conns, n)?;
    }
    let s = connect(a.addr, a.mount_addr, &a.export, a.conns).await?;
    let p = match from_file {
        Some(load) => Prepared {
            mix: a.mix,
            handles: load.targets(),
            load: Arc::new(load),
        },
        None => prepare_load(&s, a.mix, a.handles, a.tree_limit).await?,
    };
    let dur = Duration::from_secs_f64(a.seconds.clamp(0.1, 600.0));
    if let Some(f) = &a.start_file {
        // The line scripts/syscalls.sh waits for: the walk is done.
        eprintln!("rnfsd-bench: ready, waiting for {}", f.display());
        wait_for_file(f, Duration::from_secs(60)).await?;
    }
    if a.conns == 0 {
        println!("conns marked *: one connection per stream");
    }
    print_header();
    for &n in &a.streams {
        let m = measure(
            &s,
            &a.label,
            &p,
            n.max(1),
            dur,
            a.server_pid,
            a.pin_one_stream,
        )
        .await?;
        print_row(&m);
        if let Some(j) = &a.json {
            append_json(j, &m);
        }
    }
    Ok(())
}

/// Poll for `path` every 10 ms, up to `limit`.
async fn wait_for_file(path: &Path, limit: Duration) -> Result<(), String> {
    let deadline = std::time::Instant::now() + limit;
    while !path.exists() {
        if std::time::Instant::now() >= deadline {
            return Err(format!(
                "{} did not appear within {} s",
                path.display(),
                limit.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

/// Walk the tree when the mix needs it (traverse, or --handles N) and build
/// the calls' arguments.
pub async fn prepare_load(
    s: &Session,
    mix: Mix,
    handles: usize,
    limit: usize,
) -> Result<Prepared, String> {
    workload::validate(mix, handles, limit)?;
    let items = if mix.walks(handles) {
        workload::walk(&s.nfs, &s.root, limit, workload::WALK_MAX_TIME)
            .await
            .map_err(|e| format!("walking the tree: {e}"))?
    } else {
        Vec::new()
    };
    let load = Load::build(mix, &s.root, items, handles)?;
    Ok(Prepared {
        mix,
        handles,
        load: Arc::new(load),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_content_keeps_the_old_eight_bytes() {
        let mut b = Vec::new();
        file_content(0x0102, 8, &mut b);
        assert_eq!(b, 0x0102u64.to_le_bytes());
        file_content(7, 20, &mut b);
        assert_eq!(b.len(), 20);
        assert_eq!(&b[8..16], &7u64.to_le_bytes());
        assert_eq!(&b[16..], &7u64.to_le_bytes()[..4]);
        file_content(7, 0, &mut b);
        assert!(b.is_empty());
    }

    /// Every file under `root` with its contents, sorted.
    fn listing(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    out.push((p.strip_prefix(root).unwrap().to_path_buf(), Vec::new()));
                    stack.push(p);
                } else {
                    let c = std::fs::read(&p).unwrap();
                    out.push((p.strip_prefix(root).unwrap().to_path_buf(), c));
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn threaded_prepare_makes_the_same_tree() {
        let base = std::env::temp_dir().join(format!("rnfsd-bench-prep-{}", std::process::id()));
        let (a, b, c) = (base.join("a"), base.join("b"), base.join("c"));
        prepare(&a, 103, 7, 12).unwrap();
        prepare_parallel(&b, 103, 7, 12, 3).unwrap();
        prepare_parallel(&c, 103, 7, 12, 64).unwrap();
        let la = listing(&a);
        assert_eq!(la.len(), 110);
        assert_eq!(la, listing(&b));
        assert_eq!(la, listing(&c));
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn conns_zero_is_one_per_stream_and_bounded() {
        assert_eq!(actual_conns(0, 16), 16);
        assert_eq!(actual_conns(1, 64), 1);
        assert_eq!(actual_conns(4, 1), 4);
        assert_eq!(actual_conns(1000, 1), MAX_CONNECTIONS);
        assert!(check_streams(0, 256).is_ok());
        assert!(check_streams(0, MAX_PER_STREAM_CONNS + 1).is_err());
        assert!(check_streams(1, 100_000).is_ok());
    }

    #[test]
    fn run_arguments_parse() {
        let cli = Cli::try_parse_from([
            "rnfsd-bench",
            "run",
            "--export",
            "/x",
            "--mix",
            "lookup",
            "--handles",
            "1000",
            "--conns",
            "0",
            "--streams",
            "16,64",
        ])
        .unwrap();
        let Cmd::Run(a) = cli.cmd else {
            panic!("not run")
        };
        assert_eq!((a.mix, a.handles, a.conns), (Mix::Lookup, 1000, 0));
        assert_eq!(a.streams, vec![16, 64]);
        for m in ["null", "getattr", "access", "read", "write", "traverse"] {
            assert!(
                Cli::try_parse_from(["rnfsd-bench", "run", "--export", "/x", "--mix", m]).is_ok()
            );
        }
        let cli = Cli::try_parse_from(["rnfsd-bench", "prepare", "/tmp/t", "--file-size", "4096"])
            .unwrap();
        assert!(matches!(
            cli.cmd,
            Cmd::Prepare {
                file_size: 4096,
                ..
            }
        ));
    }
}
