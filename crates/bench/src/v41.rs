//! `--vers 4.1`: the same workloads over NFSv4.1 (RFC 8881) sessions, for
//! a server that serves it (nfs-ganesha with `scripts/ganesha.sh --v4`,
//! rnfsd once its NFSv4.1 server is in).
//!
//! What changes from NFSv3:
//! - no MOUNT: the export's root is PUTROOTFH plus a LOOKUP per component
//!   of `--export` (the export's path in the server's pseudo file system);
//! - each connection has a session of its own (one EXCHANGE_ID and
//!   CREATE_SESSION each), with at least as many slots asked for as streams
//!   will share it; every call is one COMPOUND with SEQUENCE first;
//! - READ and WRITE of the mixes use the anonymous stateid (§8.2.3), as
//!   NFSv3 has no open; `open-read-close` and the `read`/`write` commands
//!   OPEN first;
//! - rows carry the workload name with "-v4.1" appended, so a report never
//!   mixes them with NFSv3 rows.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rnfsd_client::nfs4::*;
use rnfsd_client::{Auth, Client, ClientConfig, ClientError, Nfs4Client, Nfs4Config};

use crate::ops::{self, emit, fresh_name, print_header as print_op_header, why, CreateArgs};
use crate::print::{append_json, print_header, print_row, Measurement};
use crate::proc_cost::ProcSample;
use crate::run::RunArgs;
use crate::session::{actual_conns, check_streams, MAX_PER_STREAM_CONNS};
use crate::stats::{self, histogram};
use crate::workload::{sample_indices, Mix, RunResult, IO_BYTES, SAMPLE_SEED, WALK_MAX_TIME};

/// The suffix of an NFSv4.1 row's workload name.
pub const SUFFIX: &str = "-v4.1";

/// Slots asked for per session at the least (the server may grant fewer;
/// calls then wait for a slot, which shows as latency).
const MIN_SLOTS: u32 = 16;

/// The attributes GETATTR, LOOKUP and READDIR ask for: what NFSv3's fattr3
/// carries.
const ATTRS: &[u32] = &FATTR3_ATTRS;

fn attr_mask() -> Bitmap4 {
    // Every bit is below 64: within the bitmap's capacity.
    Bitmap4::from_bits(ATTRS).unwrap_or_default()
}

/// READDIR's mask in the traverse mix: the attributes and the handle, as
/// READDIRPLUS gives.
fn readdir_mask() -> Bitmap4 {
    let mut m = attr_mask();
    m.insert(FATTR4_FILEHANDLE);
    m
}

/// ACCESS bits asked for, as NFSv3's ACCESS_ALL.
const ACCESS_ALL: u32 = ACCESS4_READ
    | ACCESS4_LOOKUP
    | ACCESS4_MODIFY
    | ACCESS4_EXTEND
    | ACCESS4_DELETE
    | ACCESS4_EXECUTE;

fn bench_config() -> ClientConfig {
    ClientConfig {
        auth: Auth::unix(0, 0),
        connections: 1,
        ..ClientConfig::default()
    }
}

/// One connection with a session of `slots` slots. Its COMPOUNDs carry
/// an empty tag, as the Linux client's do (its NFS4_MAXTAGLEN is 0 unless
/// built for debugging): the server echoes the tag in every reply.
async fn connect_one(addr: SocketAddr, slots: u32) -> Result<Nfs4Client, String> {
    let v4 = Nfs4Config {
        slots: slots.clamp(MIN_SLOTS, MAX_SLOTS),
        tag: Vec::new(),
        ..Nfs4Config::default()
    };
    let c = Client::connect(addr, &bench_config())
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    Nfs4Client::establish(c, &v4)
        .await
        .map_err(|e| format!("NFSv4.1 session with {addr}: {e}"))
}

/// `n` connections, each with its own session of `slots` slots.
async fn connect_n(addr: SocketAddr, n: usize, slots: u32) -> Result<Vec<Nfs4Client>, String> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(connect_one(addr, slots).await?);
    }
    Ok(v)
}

/// DESTROY_SESSION and DESTROY_CLIENTID of each (errors ignored: the
/// server drops them at lease expiry anyway).
async fn shutdown(clients: &[Nfs4Client]) {
    for c in clients {
        let _ = c.shutdown().await;
    }
}

/// Stream `s`'s client.
fn stream_client(clients: &[Nfs4Client], s: usize) -> Option<&Nfs4Client> {
    clients.get(s % clients.len().max(1))
}

/// The export's root: PUTROOTFH, a LOOKUP per component, GETFH.
async fn export_root(c: &Nfs4Client, export: &str) -> Result<NfsFh4, String> {
    c.lookup_path(export)
        .await
        .map_err(|e| format!("LOOKUP of {export} from the root: {e}"))
}

/// One object of the walked tree.
#[derive(Debug, Clone)]
pub struct Item4 {
    pub dir: NfsFh4,
    pub name: Vec<u8>,
    pub fh: NfsFh4,
    pub ftype: Option<NfsFtype4>,
}

/// Walk the tree under `root` (READDIR with type and handle) and list every
/// object, up to `limit` or `max_time`.
pub(crate) async fn walk(
    c: &Nfs4Client,
    root: &NfsFh4,
    limit: usize,
    max_time: Duration,
) -> Result<Vec<Item4>, ClientError> {
    let mask = Bitmap4::from_bits(&[FATTR4_TYPE, FATTR4_FILEHANDLE]).unwrap_or_default();
    let deadline = Instant::now() + max_time;
    let mut out = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(d) = dirs.pop() {
        if Instant::now() >= deadline {
            eprintln!(
                "walk stopped by its {} s bound after {} objects",
                max_time.as_secs(),
                out.len()
            );
            return Ok(out);
        }
        for e in c.readdir_all(&d, &mask).await? {
            // An entry whose attributes did not come (rdattr_error) is
            // left out, as READDIRPLUS entries without a handle are.
            let Ok(a) = Attrs4::decode(&e.attrs) else {
                continue;
            };
            let Some(fh) = a.filehandle() else { continue };
            let ftype = a.ftype();
            if ftype == Some(NfsFtype4::Dir) {
                dirs.push(fh.clone());
            }
            out.push(Item4 {
                dir: d.clone(),
                name: e.name.0,
                fh,
                ftype,
            });
            if out.len() >= limit {
                return Ok(out);
            }
        }
    }
    Ok(out)
}

/// A mix's targets, chosen once.
#[derive(Debug)]
enum Load4 {
    Null,
    /// Handles for getattr, access, read, write.
    Fhs(Vec<NfsFh4>),
    /// Objects with their directory and name: lookup, open-read-close,
    /// traverse.
    Items(Vec<Item4>),
    /// getattr and access: each handle's PUTFH and GETATTR (or ACCESS)
    /// encoded once.
    Prepared(Vec<PreparedOps>),
}

/// The compound `mix` sends to `fh`, for the mixes that send the same one
/// to a handle every time.
fn fixed_ops(mix: Mix, fh: &NfsFh4) -> Option<PreparedOps> {
    let second = match mix {
        Mix::Getattr => getattr(&attr_mask()),
        Mix::Access => ArgOp::Access(Access4Args { access: ACCESS_ALL }),
        _ => return None,
    };
    Some(PreparedOps::new(&[putfh(fh), second]))
}

/// `load` with each handle's compound encoded once where `mix` allows.
fn prepare(mix: Mix, load: Load4) -> Load4 {
    match load {
        Load4::Fhs(v) => match v.iter().map(|fh| fixed_ops(mix, fh)).collect() {
            Some(p) => Load4::Prepared(p),
            None => Load4::Fhs(v),
        },
        l => l,
    }
}

fn build(mix: Mix, root: &NfsFh4, items: Vec<Item4>, handles: usize) -> Result<Load4, String> {
    if mix == Mix::Null {
        return Ok(Load4::Null);
    }
    if mix == Mix::Traverse {
        if items.is_empty() {
            return Err("the export is empty: `rnfsd-bench prepare DIR` first".into());
        }
        return Ok(Load4::Items(items));
    }
    if mix.uses_root(handles) {
        return Ok(Load4::Fhs(vec![root.clone()]));
    }
    let regular = matches!(mix, Mix::Read | Mix::Write | Mix::OpenReadClose);
    let pool: Vec<Item4> = items
        .into_iter()
        .filter(|it| !regular || it.ftype == Some(NfsFtype4::Reg))
        .collect();
    if pool.len() < handles {
        return Err(format!(
            "--handles {handles}: the walk found only {} {}; prepare a larger tree or raise --tree-limit",
            pool.len(),
            if regular { "regular files" } else { "objects" }
        ));
    }
    let picked: Vec<Item4> = sample_indices(pool.len(), handles, SAMPLE_SEED)
        .into_iter()
        .filter_map(|i| pool.get(i).cloned())
        .collect();
    Ok(match mix {
        Mix::Lookup | Mix::OpenReadClose => Load4::Items(picked),
        _ => Load4::Fhs(picked.into_iter().map(|it| it.fh).collect()),
    })
}

#[cfg(test)]
impl Load4 {
    fn targets(&self) -> usize {
        match self {
            Load4::Null => 0,
            Load4::Fhs(v) => v.len(),
            Load4::Items(v) => v.len(),
            Load4::Prepared(v) => v.len(),
        }
    }
}

fn putfh(fh: &NfsFh4) -> ArgOp<'static> {
    ArgOp::PutFh(PutFh4Args { object: fh.clone() })
}

fn getattr(mask: &Bitmap4) -> ArgOp<'static> {
    ArgOp::GetAttr(GetAttr4Args {
        attr_request: *mask,
    })
}

/// One compound; true if it has a result for every operation sent, each
/// NFS4_OK, and its status is NFS4_OK.
async fn ok(c: &Nfs4Client, ops: &[ArgOp<'_>]) -> bool {
    matches!(c.compound(ops).await, Ok(r) if all_ok(&r, ops.len() + 1))
}

fn all_ok(r: &CompoundRes, sent: usize) -> bool {
    r.status == Nfsstat4::Ok
        && r.results.len() == sent
        && r.results.iter().all(|x| x.status() == Nfsstat4::Ok)
}

/// A compound encoded once; true on the same terms as `ok`, the results
/// checked without being decoded into values and every GETATTR's
/// attributes read as NFSv3's fattr3 is (`ReplyCheck::all_ok`).
async fn prepared_ok(c: &Nfs4Client, p: &PreparedOps) -> bool {
    matches!(c.compound_prepared(p, true).await, Ok(r) if r.all_ok(p.nops()))
}

async fn timed<F: std::future::Future<Output = bool>>(
    f: F,
    h: &mut Histogram<u64>,
    calls: &mut u64,
) -> bool {
    let t = Instant::now();
    let good = f.await;
    let _ = h.record(t.elapsed().as_micros().max(1) as u64);
    *calls += 1;
    good
}

/// Per-stream state of a run: the histogram and call count, and the
/// constant arguments.
struct Stream<'a> {
    c: &'a Nfs4Client,
    h: Histogram<u64>,
    calls: u64,
    attrs: Bitmap4,
    dir_attrs: Bitmap4,
    data: &'a [u8],
    /// This stream's open owner: streams sharing a session must not share
    /// one, or one stream's CLOSE ends the open another is reading with
    /// (RFC 8881 §9.1.4: one open stateid per owner and file).
    owner: Vec<u8>,
}

impl Stream<'_> {
    async fn call(&mut self, ops: &[ArgOp<'_>]) -> bool {
        let c = self.c;
        timed(ok(c, ops), &mut self.h, &mut self.calls).await
    }

    /// One step of `mix` at target `i` (as many compounds as the mix
    /// sends per step, each counted).
    async fn step(&mut self, mix: Mix, load: &Load4, i: usize) -> bool {
        let anon = Stateid4::ANONYMOUS;
        match (mix, load) {
            (_, Load4::Null) => {
                let c = self.c;
                timed(
                    async { c.rpc().null().await.is_ok() },
                    &mut self.h,
                    &mut self.calls,
                )
                .await
            }
            (Mix::Getattr | Mix::Access, Load4::Prepared(v)) => {
                let Some(p) = v.get(i % v.len()) else {
                    return false;
                };
                let c = self.c;
                timed(prepared_ok(c, p), &mut self.h, &mut self.calls).await
            }
            (Mix::Getattr, Load4::Fhs(v)) => {
                let Some(fh) = v.get(i % v.len()) else {
                    return false;
                };
                let a = self.attrs;
                self.call(&[putfh(fh), getattr(&a)]).await
            }
            (Mix::Access, Load4::Fhs(v)) => {
                let Some(fh) = v.get(i % v.len()) else {
                    return false;
                };
                self.call(&[putfh(fh), ArgOp::Access(Access4Args { access: ACCESS_ALL })])
                    .await
            }
            (Mix::Read, Load4::Fhs(v)) => {
                let Some(fh) = v.get(i % v.len()) else {
                    return false;
                };
                let read = ArgOp::Read(Read4Args {
                    stateid: anon,
                    offset: 0,
                    count: IO_BYTES as u32,
                });
                self.call(&[putfh(fh), read]).await
            }
            (Mix::Write, Load4::Fhs(v)) => {
                let Some(fh) = v.get(i % v.len()) else {
                    return false;
                };
                let write = ArgOp::Write(Write4ArgsRef {
                    stateid: anon,
                    offset: 0,
                    stable: StableHow4::Unstable,
                    data: self.data,
                });
                self.call(&[putfh(fh), write]).await
            }
            (Mix::Lookup, Load4::Items(v)) => {
                let Some(it) = v.get(i % v.len()) else {
                    return false;
                };
                let a = self.attrs;
                self.call(&[putfh(&it.dir), lookup(&it.name), ArgOp::GetFh, getattr(&a)])
                    .await
            }
            (Mix::OpenReadClose, Load4::Items(v)) => {
                let Some(it) = v.get(i % v.len()) else {
                    return false;
                };
                self.open_read_close(it).await
            }
            (Mix::Traverse, Load4::Items(v)) => {
                let Some(it) = v.get(i % v.len()) else {
                    return false;
                };
                self.traverse(it, i).await
            }
            _ => false,
        }
    }

    /// OPEN (read, by name), READ 4096 at 0, CLOSE: three compounds.
    async fn open_read_close(&mut self, it: &Item4) -> bool {
        let c = self.c;
        let t = Instant::now();
        let args = OpenArgs {
            owner: Some(self.owner.clone()),
            ..OpenArgs::read(it.name.clone())
        };
        let opened = c.open(&it.dir, &args).await;
        let _ = self.h.record(t.elapsed().as_micros().max(1) as u64);
        self.calls += 1;
        let Ok(o) = opened else { return false };
        let read = ArgOp::Read(Read4Args {
            stateid: o.stateid,
            offset: 0,
            count: IO_BYTES as u32,
        });
        let mut good = self.call(&[putfh(&o.fh), read]).await;
        let close = ArgOp::Close(Close4Args {
            seqid: 0,
            open_stateid: o.stateid,
        });
        good &= self.call(&[putfh(&o.fh), close]).await;
        good
    }

    /// As NFSv3's traverse step: ACCESS of the directory and of the object,
    /// GETATTR, LOOKUP (with GETFH and GETATTR, as a client sends it), and
    /// every 16 objects a READDIR of the directory with attributes and
    /// handles.
    async fn traverse(&mut self, it: &Item4, i: usize) -> bool {
        let a = self.attrs;
        let acc = || {
            ArgOp::Access(Access4Args {
                access: ACCESS4_READ | ACCESS4_LOOKUP,
            })
        };
        let mut good = self.call(&[putfh(&it.dir), acc()]).await;
        good &= self.call(&[putfh(&it.fh), acc()]).await;
        good &= self.call(&[putfh(&it.fh), getattr(&a)]).await;
        good &= self
            .call(&[putfh(&it.dir), lookup(&it.name), ArgOp::GetFh, getattr(&a)])
            .await;
        if i.is_multiple_of(16) {
            let rd = ArgOp::ReadDir(ReadDir4Args {
                cookie: 0,
                cookieverf: Verifier4::default(),
                dircount: 4096,
                maxcount: 32768,
                attr_request: self.dir_attrs,
            });
            good &= self.call(&[putfh(&it.dir), rd]).await;
        }
        good
    }
}

fn lookup(name: &[u8]) -> ArgOp<'static> {
    ArgOp::Lookup(Lookup4Args {
        objname: Component4(name.to_vec()),
    })
}

/// A count bound on each stream besides the deadline (as NFSv3's).
const MAX_CALLS_PER_STREAM: u64 = 1 << 32;

/// Whether every stream of a run can keep a slot of its own: no session
/// is shared by more streams than it has slots (stream `s` uses client
/// `s % clients.len()`).
fn streams_own_slots(clients: &[Nfs4Client], streams: usize) -> bool {
    let per = streams.div_ceil(clients.len().max(1));
    !clients.is_empty() && clients.iter().all(|c| per <= c.slot_count())
}

/// A stream of prepared compounds that keeps one slot for all its calls,
/// as its calls are one at a time: no slot taken and returned per call. A
/// slot lost with a reply is dropped (retired) and another taken. Each
/// call is checked as [`prepared_ok`] checks it.
async fn prepared_stream(
    c: &Nfs4Client,
    v: &[PreparedOps],
    stop: &AtomicBool,
    errors: &AtomicU64,
    mut i: usize,
) -> (u64, Histogram<u64>) {
    let (mut h, mut calls) = (histogram(), 0u64);
    let mut slot: Option<Slot> = None;
    while !stop.load(Ordering::Relaxed) && calls < MAX_CALLS_PER_STREAM {
        let Some(p) = v.get(i % v.len().max(1)) else {
            break;
        };
        let good = timed(
            async {
                if slot.as_ref().is_none_or(Slot::is_lost) {
                    slot = None;
                    slot = c.slot().await.ok();
                }
                let Some(sl) = slot.as_mut() else {
                    return false;
                };
                matches!(c.compound_prepared_on(sl, p, true).await, Ok(r) if r.all_ok(p.nops()))
            },
            &mut h,
            &mut calls,
        )
        .await;
        if !good {
            errors.fetch_add(1, Ordering::Relaxed);
        }
        i = i.wrapping_add(1);
    }
    (calls, h)
}

/// `streams` concurrent loops of `mix` for `dur`.
async fn run_streams(
    clients: &[Nfs4Client],
    mix: Mix,
    load: Arc<Load4>,
    streams: usize,
    dur: Duration,
) -> RunResult {
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let data: Arc<[u8]> = Arc::from(vec![0x5au8; IO_BYTES]);
    let own_slots = streams_own_slots(clients, streams);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for s in 0..streams {
        let Some(c) = stream_client(clients, s).cloned() else {
            break;
        };
        let (stop, errors, load, data) = (stop.clone(), errors.clone(), load.clone(), data.clone());
        // Streams start at different targets, as NFSv3's do.
        let first = s.wrapping_mul(7919);
        tasks.push(tokio::spawn(async move {
            if let (true, Load4::Prepared(v)) = (own_slots, &*load) {
                return prepared_stream(&c, v, &stop, &errors, first).await;
            }
            let mut st = Stream {
                c: &c,
                h: histogram(),
                calls: 0,
                attrs: attr_mask(),
                dir_attrs: readdir_mask(),
                data: &data,
                owner: format!("rnfsd-bench stream {s}").into_bytes(),
            };
            let mut i = first;
            while !stop.load(Ordering::Relaxed) && st.calls < MAX_CALLS_PER_STREAM {
                if !st.step(mix, &load, i).await {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                i = i.wrapping_add(1);
            }
            (st.calls, st.h)
        }));
    }
    tokio::time::sleep(dur).await;
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    let mut lat = histogram();
    for t in tasks {
        if let Ok((c, h)) = t.await {
            total += c;
            let _ = lat.add(&h);
        }
    }
    RunResult {
        calls: total,
        errors: errors.load(Ordering::Relaxed),
        elapsed: start.elapsed(),
        lat,
    }
}

/// Warm-up, then the measured run with the server's cost around it.
async fn timed_run(
    clients: &[Nfs4Client],
    mix: Mix,
    load: Arc<Load4>,
    streams: usize,
    dur: Duration,
    pid: Option<u32>,
) -> (RunResult, RunResult, Option<ProcSample>) {
    let warm = run_streams(clients, mix, load.clone(), streams, dur / 10).await;
    let before = pid.and_then(|p| ProcSample::read(p).ok());
    let r = run_streams(clients, mix, load, streams, dur).await;
    let after = pid.and_then(|p| ProcSample::read(p).ok());
    let cost = before.zip(after).map(|(b, a)| b.delta(&a));
    (warm, r, cost)
}

/// One stream on a connection and session of its own, on a thread of its
/// own with a single-threaded runtime, optionally pinned (see NFSv3's
/// `single_stream` for why).
async fn single_stream(
    addr: SocketAddr,
    mix: Mix,
    load: Arc<Load4>,
    dur: Duration,
    pid: Option<u32>,
    pin: bool,
) -> Result<(RunResult, RunResult, Option<ProcSample>), String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("bench-one-stream-v4".into())
        .spawn(move || {
            let pinned = if pin {
                crate::run::pin_first_cpu()
            } else {
                Ok(())
            };
            let r = pinned
                .and_then(|()| {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| format!("tokio: {e}"))
                })
                .and_then(|rt| {
                    rt.block_on(async move {
                        let c = vec![connect_one(addr, MIN_SLOTS).await?];
                        let r = timed_run(&c, mix, load, 1, dur, pid).await;
                        shutdown(&c).await;
                        Ok(r)
                    })
                });
            let _ = tx.send(r);
        })
        .map_err(|e| format!("starting the single-stream thread: {e}"))?;
    rx.await
        .map_err(|_| "the single-stream thread ended without a result".to_string())?
}

/// `run --vers 4.1`.
pub async fn run_cmd(a: RunArgs) -> Result<(), String> {
    if a.handles_file.is_some() {
        return Err("--handles-file holds NFSv3 handles: not with --vers 4.1".into());
    }
    crate::workload::validate(a.mix, a.handles, a.tree_limit)?;
    for &n in &a.streams {
        check_streams(a.conns, n)?;
    }
    let max_streams = a.streams.iter().copied().max().unwrap_or(1).max(1);
    // Slots per session: enough for the streams that share it.
    let shared_conns = a.conns.clamp(1, rnfsd_client::MAX_CONNECTIONS);
    let slots = max_streams.div_ceil(shared_conns).min(MAX_SLOTS as usize) as u32;
    let shared = connect_n(a.addr, shared_conns, slots).await?;
    let first = shared.first().ok_or("no connection")?;
    let root = export_root(first, &a.export).await?;
    let items = if a.mix.walks(a.handles) {
        walk(first, &root, a.tree_limit, WALK_MAX_TIME)
            .await
            .map_err(|e| format!("walking the tree: {e}"))?
    } else {
        Vec::new()
    };
    let load = Arc::new(prepare(a.mix, build(a.mix, &root, items, a.handles)?));
    let dur = Duration::from_secs_f64(a.seconds.clamp(0.1, 600.0));
    eprintln!(
        "NFSv4.1: {} session(s), {} slots each (asked for {})",
        shared.len(),
        first.slot_count(),
        slots.clamp(MIN_SLOTS, MAX_SLOTS)
    );
    if a.conns == 0 {
        println!("conns marked *: one connection (and session) per stream");
    }
    print_header();
    for &n in &a.streams {
        let streams = n.max(1);
        let (warm, r, cost) = if streams == 1 {
            single_stream(
                a.addr,
                a.mix,
                load.clone(),
                dur,
                a.server_pid,
                a.pin_one_stream,
            )
            .await?
        } else if a.conns == 0 {
            let own = connect_n(a.addr, streams.min(MAX_PER_STREAM_CONNS), 1).await?;
            let r = timed_run(&own, a.mix, load.clone(), streams, dur, a.server_pid).await;
            shutdown(&own).await;
            r
        } else {
            timed_run(&shared, a.mix, load.clone(), streams, dur, a.server_pid).await
        };
        let per = |x: f64| x / (r.calls.max(1) as f64);
        let m = Measurement {
            label: a.label.clone(),
            mix: a.mix,
            workload: Some(format!("{}{SUFFIX}", a.mix.name())),
            streams,
            handles: a.handles,
            root_handle: a.mix.uses_root(a.handles),
            conns: if streams == 1 {
                1
            } else {
                actual_conns(a.conns, streams)
            },
            conn_per_stream: a.conns == 0,
            client_pinned: streams == 1 && a.pin_one_stream,
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
        };
        print_row(&m);
        if let Some(j) = &a.json {
            append_json(j, &m);
        }
    }
    shutdown(&shared).await;
    Ok(())
}

/// The clients of a phase's streams: the shared ones, or with `--conns 0`
/// one connection and session per stream.
async fn phase_clients(
    t: &ops::Target,
    shared: &[Nfs4Client],
    streams: usize,
) -> Result<Arc<Vec<Nfs4Client>>, String> {
    if t.conns == 0 {
        check_streams(0, streams)?;
        Ok(Arc::new(connect_n(t.addr, streams, 1).await?))
    } else {
        Ok(Arc::new(shared.to_vec()))
    }
}

fn pick(clients: &[Nfs4Client], s: usize) -> Result<Nfs4Client, String> {
    stream_client(clients, s)
        .cloned()
        .ok_or_else(|| "no client".to_string())
}

/// `create --vers 4.1` (OPEN UNCHECKED or GUARDED + CLOSE, then REMOVE) or
/// `mkdir --vers 4.1` (CREATE of a directory, then REMOVE) of N entries in
/// one fresh directory per stream count.
pub async fn create_cmd(a: CreateArgs, dirs: bool) -> Result<(), String> {
    let t = &a.target;
    let max_streams = a.streams.iter().copied().max().unwrap_or(1).max(1);
    let conns = t.conns.clamp(1, rnfsd_client::MAX_CONNECTIONS);
    let slots = max_streams.div_ceil(conns).min(MAX_SLOTS as usize) as u32;
    let shared = connect_n(t.addr, conns, slots).await?;
    let first = shared.first().ok_or("no connection")?.clone();
    let root = export_root(&first, &t.export).await?;
    let json = t.json.clone();
    print_op_header();
    let (w1, w2, u1, u2) = if dirs {
        ("mkdir", "rmdir", "mkdirs/s", "rmdirs/s")
    } else {
        ("create", "remove", "creates/s", "removes/s")
    };
    for &streams in &a.streams {
        let streams = streams.max(1);
        let top = fresh_name("bench");
        let dir = first
            .mkdir(&root, &top, 0o755)
            .await
            .map_err(|e| format!("CREATE {top}: {e}"))?;
        let cl = phase_clients(t, &shared, streams).await?;
        let (c2, d, guarded) = (cl.clone(), dir.clone(), a.guarded);
        let p = t
            .phase(a.files, streams, w1, move |s, i| {
                let (c, d) = (pick(&c2, s), d.clone());
                async move {
                    let c = c?;
                    let name = format!("f{i:07}");
                    if dirs {
                        return c.mkdir(&d, &name, 0o755).await.map(drop).map_err(why);
                    }
                    let attrs = SetAttrs4::mode(0o644);
                    let how = if guarded {
                        OpenHow::Guarded(attrs)
                    } else {
                        OpenHow::Unchecked(attrs)
                    };
                    let args = OpenArgs {
                        how,
                        ..OpenArgs::create(name)
                    };
                    let o = c.open(&d, &args).await.map_err(why)?;
                    c.close(&o.fh, &o.stateid).await.map(drop).map_err(why)
                }
            })
            .await;
        let mut r = ops::row(t, w1, streams, &p, u1);
        r.workload = format!("{w1}{SUFFIX}");
        emit(&r, json.as_deref());
        let tried = (p.done + p.errors).min(a.files);
        let (c2, d) = (cl.clone(), dir.clone());
        let p = t
            .phase(tried, streams, w2, move |s, i| {
                let (c, d) = (pick(&c2, s), d.clone());
                async move {
                    c?.remove(&d, format!("f{i:07}"))
                        .await
                        .map(drop)
                        .map_err(why)
                }
            })
            .await;
        let mut r = ops::row(t, w2, streams, &p, u2);
        r.workload = format!("{w2}{SUFFIX}");
        emit(&r, json.as_deref());
        let _ = first.remove(&root, &top).await;
        if t.conns == 0 {
            shutdown(&cl).await;
        }
    }
    shutdown(&shared).await;
    Ok(())
}

/// `read --vers 4.1` / `write --vers 4.1`: a fresh file OPENed (create,
/// read and write), sequential WRITEs of `--block-kib` (UNSTABLE + one
/// COMMIT, or FILE_SYNC) with the open stateid, then for `read` sequential
/// READs; CLOSE and REMOVE at the end.
pub async fn io_cmd(a: ops::IoArgs, read: bool) -> Result<(), String> {
    let t = &a.target;
    if t.conns == 0 {
        return Err("--conns 0 (a connection per stream) is for create and mkdir".into());
    }
    let max_streams = a.streams.iter().copied().max().unwrap_or(1).max(1);
    let conns = t.conns.clamp(1, rnfsd_client::MAX_CONNECTIONS);
    let slots = max_streams.div_ceil(conns).min(MAX_SLOTS as usize) as u32;
    let shared = Arc::new(connect_n(t.addr, conns, slots).await?);
    let first = shared.first().ok_or("no connection")?.clone();
    let root = export_root(&first, &t.export).await?;
    // Calls of at most the session's request and reply sizes, with room for
    // the compound around the data.
    let room = |v: u32| u64::from(v).saturating_sub(4096).max(4096);
    let fore = first.session().fore;
    // Whole 4 KiB pages, so the row's name can say the size in KiB.
    let block = ((a.block_kib << 10)
        .min(room(fore.maxrequestsize))
        .min(room(fore.maxresponsesize))
        .min(MAX_DATA as u64)
        & !4095)
        .max(4096);
    if block < a.block_kib << 10 {
        eprintln!(
            "NFSv4.1: {} KiB per call, the most the session allows (requests {}, replies {} bytes)",
            block >> 10,
            fore.maxrequestsize,
            fore.maxresponsesize
        );
    }
    let total = a.size.clamp(1, 1 << 20) << 20;
    let buf: Arc<Vec<u8>> = Arc::new(vec![0x5a; block as usize]);
    // As NFSv3's rows: the size in the name unless it is 1 MiB.
    let sized = |w: &str| match block >> 10 {
        1024 => format!("{w}{SUFFIX}"),
        k => format!("{w}-{k}k{SUFFIX}"),
    };
    let json = t.json.clone();
    print_op_header();
    for &streams in &a.streams {
        let streams = streams.max(1);
        let name = fresh_name("bench-io");
        let o = first
            .open(&root, &OpenArgs::create(name.as_bytes()))
            .await
            .map_err(|e| format!("OPEN {name}: {e}"))?;
        // Each connection is a client of its own, and a stateid is its
        // client's (RFC 8881 §8.2.4: another's gets NFS4ERR_BAD_STATEID),
        // so every client opens the file and its streams use its stateid.
        let mut sids = vec![o.stateid];
        for c in shared.iter().skip(1) {
            let mine = c
                .open(&root, &OpenArgs::create(name.as_bytes()))
                .await
                .map_err(|e| format!("OPEN {name}: {e}"))?;
            sids.push(mine.stateid);
        }
        let sids = Arc::new(sids);
        let stable = if a.file_sync && !read {
            StableHow4::FileSync
        } else {
            StableHow4::Unstable
        };
        let wbytes = Arc::new(AtomicU64::new(0));
        let (cl, fh, ids, b, wb) = (
            shared.clone(),
            o.fh.clone(),
            sids.clone(),
            buf.clone(),
            wbytes.clone(),
        );
        let wp = t
            .phase(total.div_ceil(block), streams, "write", move |s, i| {
                let (c, fh, b, wb) = (pick(&cl, s), fh.clone(), b.clone(), wb.clone());
                let sid = ids[s % ids.len()];
                async move {
                    let off = i * block;
                    let n = block.min(total - off.min(total)) as usize;
                    let data = b.get(..n).unwrap_or(&b[..]);
                    let w = c?.write(&fh, &sid, off, data, stable).await.map_err(why)?;
                    wb.fetch_add(u64::from(w.count), Ordering::Relaxed);
                    if w.count as usize == n {
                        Ok(())
                    } else {
                        Err("short write".into())
                    }
                }
            })
            .await;
        let tc = Instant::now();
        let committed = stable == StableHow4::FileSync || first.commit(&o.fh, 0, 0).await.is_ok();
        let commit_time = tc.elapsed();
        if !read {
            let mut p = wp;
            p.elapsed += commit_time;
            if !committed {
                p.errors += 1;
            }
            let mut r = ops::row(t, "write", streams, &p, "MB/s");
            r.workload = sized(if a.file_sync { "write-sync" } else { "write" });
            r.commit_seconds = Some(commit_time.as_secs_f64());
            r.rate = stats::mb_per_s(wbytes.load(Ordering::Relaxed), p.elapsed.as_secs_f64());
            emit(&r, json.as_deref());
        } else {
            let written = wbytes.load(Ordering::Relaxed);
            let chunks = written.div_ceil(block).max(1);
            let rbytes = Arc::new(AtomicU64::new(0));
            let (cl, fh, rb, ids) = (shared.clone(), o.fh.clone(), rbytes.clone(), sids.clone());
            let p = t
                .phase(chunks * a.passes, streams, "read", move |s, i| {
                    let (c, fh, rb) = (pick(&cl, s), fh.clone(), rb.clone());
                    let sid = ids[s % ids.len()];
                    async move {
                        let off = (i % chunks) * block;
                        let n = block.min(written - off.min(written));
                        let d = c?.read(&fh, &sid, off, n as u32).await.map_err(why)?;
                        rb.fetch_add(d.data.len() as u64, Ordering::Relaxed);
                        if d.data.len() as u64 == n {
                            Ok(())
                        } else {
                            Err("short read".into())
                        }
                    }
                })
                .await;
            let mut r = ops::row(t, "read", streams, &p, "MB/s");
            r.workload = sized("read");
            r.rate = stats::mb_per_s(rbytes.load(Ordering::Relaxed), p.elapsed.as_secs_f64());
            emit(&r, json.as_deref());
        }
        for (c, sid) in shared.iter().zip(sids.iter()) {
            let _ = c.close(&o.fh, sid).await;
        }
        if !a.keep {
            let _ = first.remove(&root, &name).await;
        }
    }
    shutdown(&shared).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(i: usize, ftype: NfsFtype4) -> Item4 {
        Item4 {
            dir: NfsFh4(vec![0xd]),
            name: format!("n{i}").into_bytes(),
            fh: NfsFh4((i as u32).to_be_bytes().to_vec()),
            ftype: Some(ftype),
        }
    }

    #[test]
    fn loads_pick_regular_files_for_io_and_the_root_for_zero_handles() {
        let root = NfsFh4(vec![1]);
        let items: Vec<Item4> = (0..40)
            .map(|i| {
                item(
                    i,
                    if i < 10 {
                        NfsFtype4::Dir
                    } else {
                        NfsFtype4::Reg
                    },
                )
            })
            .collect();
        match build(Mix::Getattr, &root, Vec::new(), 0).unwrap() {
            Load4::Fhs(v) => assert_eq!(v, vec![root.clone()]),
            l => panic!("{l:?}"),
        }
        match build(Mix::Read, &root, items.clone(), 30).unwrap() {
            Load4::Fhs(v) => {
                assert_eq!(v.len(), 30);
                assert!(v.iter().all(|fh| fh.0 >= 10u32.to_be_bytes().to_vec()));
            }
            l => panic!("{l:?}"),
        }
        assert!(build(Mix::Read, &root, items.clone(), 31)
            .unwrap_err()
            .contains("only 30 regular files"));
        match build(Mix::OpenReadClose, &root, items.clone(), 5).unwrap() {
            Load4::Items(v) => assert!(v.iter().all(|i| i.ftype == Some(NfsFtype4::Reg))),
            l => panic!("{l:?}"),
        }
        assert_eq!(
            build(Mix::Lookup, &root, items.clone(), 40)
                .unwrap()
                .targets(),
            40
        );
        assert!(build(Mix::Traverse, &root, Vec::new(), 0).is_err());
        assert_eq!(build(Mix::Null, &root, Vec::new(), 0).unwrap().targets(), 0);
    }

    #[test]
    fn getattr_and_access_loads_are_encoded_once_per_handle() {
        let fhs = vec![NfsFh4(vec![1; 8]), NfsFh4(vec![2; 30])];
        match prepare(Mix::Getattr, Load4::Fhs(fhs.clone())) {
            Load4::Prepared(v) => {
                assert_eq!(v.len(), 2);
                for (p, fh) in v.iter().zip(&fhs) {
                    assert_eq!(p.opnums(), &[OP_SEQUENCE, OP_PUTFH, OP_GETATTR]);
                    let mut e = rnfsd_xdr::Enc::new();
                    putfh(fh).encode(&mut e);
                    getattr(&attr_mask()).encode(&mut e);
                    assert_eq!(p.bytes(), e.as_slice());
                }
            }
            l => panic!("{l:?}"),
        }
        match prepare(Mix::Access, Load4::Fhs(fhs.clone())) {
            Load4::Prepared(v) => assert_eq!(v[1].opnums(), &[OP_SEQUENCE, OP_PUTFH, OP_ACCESS]),
            l => panic!("{l:?}"),
        }
        assert!(matches!(
            prepare(Mix::Read, Load4::Fhs(fhs.clone())),
            Load4::Fhs(_)
        ));
        assert!(matches!(prepare(Mix::Getattr, Load4::Null), Load4::Null));
    }

    #[test]
    fn masks_ask_for_what_fattr3_has_and_readdir_adds_the_handle() {
        let m = attr_mask();
        assert!(m.contains(FATTR4_TYPE) && m.contains(FATTR4_TIME_MODIFY));
        assert!(!m.contains(FATTR4_FILEHANDLE));
        assert!(readdir_mask().contains(FATTR4_FILEHANDLE));
        assert!(ATTRS.iter().all(|&b| rnfsd_client::nfs4::decodable(b)));
    }
}
