//! `run`: drive a running server with one call mix at each stream count,
//! measuring calls/s, latency and (given its PID) the server's cost.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rnfsd_client::NfsClient;

use crate::handles;
use crate::print::{append_json, print_header, print_row, Measurement};
use crate::proc_cost::ProcSample;
use crate::session::{
    actual_conns, check_streams, connect, per_stream_clients, stream_clients, Session,
};
use crate::vers::Vers;
use crate::workload::{self, Load, Mix};

#[derive(clap::Args, Clone)]
pub struct RunArgs {
    /// Server address (NFS, and MOUNT unless --mount-addr).
    #[arg(long, default_value = "127.0.0.1:2049")]
    pub addr: SocketAddr,
    /// NFS version: 3 (with MOUNT), or 4.1 (sessions; --export is then the
    /// export's path from the server's root, --mount-addr and
    /// --handles-file do not apply).
    #[arg(long, value_enum, default_value = "3")]
    pub vers: Vers,
    /// MOUNT's address when it is not the NFS port (nfs-ganesha).
    #[arg(long)]
    pub mount_addr: Option<SocketAddr>,
    /// Absolute export path to MNT.
    #[arg(long)]
    pub export: String,
    #[arg(long, value_enum, default_value = "getattr")]
    pub mix: Mix,
    /// Concurrent client streams, comma separated; each has one call in
    /// flight.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64,256")]
    pub streams: Vec<usize>,
    /// TCP connections the streams share, calls spread over them round-robin
    /// (at most 64); 0: one connection per stream (at most 512 streams), as
    /// many hosts each with one call in flight.
    #[arg(long, default_value_t = 4)]
    pub conns: usize,
    /// 0: getattr and access go to the export root's handle (which servers
    /// resolve without a handle lookup). N > 0: every call goes to one of N
    /// distinct objects sampled across the walked tree (regular files for
    /// read and write), picked at random per call; lookup, read and write
    /// need N > 0.
    #[arg(long, default_value_t = 0)]
    pub handles: usize,
    /// Instead of a walk and --handles: every call goes to one of the
    /// handles in this file (hex, one per line, as `handles` writes);
    /// getattr, access, read and write.
    #[arg(long, conflicts_with = "handles")]
    pub handles_file: Option<PathBuf>,
    /// Seconds per measurement (bounded: at most 600).
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// PID of the server on this machine, for CPU and context switches per
    /// 1,000 calls from /proc.
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// Objects of the tree walked at most (traverse visits them; --handles
    /// samples from them).
    #[arg(long, default_value_t = 50_000)]
    pub tree_limit: usize,
    /// Append one JSON object per measurement to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Series name in the table, JSON and chart (e.g. rnfsd, ganesha).
    #[arg(long, default_value = "server")]
    pub label: String,
    /// After the walk, wait (at most 60 s) until this file exists before the
    /// first connection and warm-up: lets a tool attach to the server first
    /// (scripts/syscalls.sh).
    #[arg(long)]
    pub start_file: Option<PathBuf>,
    /// With one stream, keep the client's thread on one CPU (the first it
    /// may use). On a small VM the scheduler otherwise moves a lone client
    /// thread to whichever vCPU is idle at each wakeup, and a round trip
    /// then mostly measures that (bimodal: about 15 or 80 µs on the 2-vCPU
    /// guest) rather than the server.
    #[arg(long)]
    pub pin_one_stream: bool,
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
        workload: None,
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
pub(crate) fn pin_first_cpu() -> Result<(), String> {
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

pub async fn run_cmd(a: RunArgs) -> Result<(), String> {
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
