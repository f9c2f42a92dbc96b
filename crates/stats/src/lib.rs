//! rnfsd-stats: the server's counters.
//!
//! Every counter lives in per-core cells: each shard is a run of 128-byte
//! aligned lines, the recording thread picks its shard once per call with
//! `sched_getcpu()` and does relaxed adds there; readers sum the shards.
//! No cache line is written by two cores in the common case (knfsd's
//! "move hot procedure count field out of svc_procedure" thread: a shared
//! hot counter line cost it 24% of its call rate; docs/lessons.md).
//! Hand-written rather than a metrics crate because the hot path is ours:
//! one CPU lookup and a few uncontended adds per call, nothing else.
//!
//! [`Mode::Shared`] keeps one shard written by every core (the design before
//! that fix) and [`Mode::Off`] records nothing, to measure what this costs.
//!
//! The registry knows the programs it counts from plain [`ProcDesc`] rows,
//! not from any configuration object, so it can outlive a reload.

pub mod format;
pub mod hist;
pub mod limits;
mod rpc;
pub mod snapshot;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Instant, SystemTime};

pub use rpc::{auth_stat_name, nfsstat3_name, Outcome, AUTH_STATS, NFS_STATUSES};
pub use snapshot::{CacheCounts, ExportCounts, LockCounts, Nfs4Counts, Snapshot};

use rnfsd_transport::{PoolStats, TransportStats};

use limits::{MAX_SHARDS, SLOTS_PER_LINE};

/// What to count, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Count nothing (transport and pool counters are still read).
    Off,
    /// Per-core cells, summed on read (the design).
    #[default]
    Percore,
    /// One cell per counter written by every core (for comparison only).
    Shared,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Percore => "percore",
            Mode::Shared => "shared",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Mode::Off),
            "percore" => Ok(Mode::Percore),
            "shared" => Ok(Mode::Shared),
            _ => Err(format!(
                "stats must be \"off\", \"percore\" or \"shared\", not {s:?}"
            )),
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One procedure of one program version to count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcDesc {
    /// Program name as in tables and labels ("nfs", "mount", "portmap").
    pub program: &'static str,
    pub prog: u32,
    pub vers: u32,
    pub proc_: u32,
    pub name: &'static str,
}

/// One cache line pair (adjacent-line prefetch makes 128 the safe unit).
#[repr(align(128))]
struct Line([AtomicU64; SLOTS_PER_LINE]);

impl Line {
    fn new() -> Line {
        Line(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

// Fixed slots of every shard.
// The records are not counted apart: every record adds to exactly one
// outcome below, whose sum is the count (one atomic add fewer a call).
const S_DROPPED: usize = 0;
const S_SUCCESS: usize = 1;
const S_RPC_MISMATCH: usize = 2;
const S_PROG_UNAVAIL: usize = 3;
const S_PROG_MISMATCH: usize = 4;
const S_PROC_UNAVAIL: usize = 5;
const S_GARBAGE_ARGS: usize = 6;
const S_SYSTEM_ERR: usize = 7;
const S_BAD_REPLY: usize = 8;
const S_READ_BYTES: usize = 9;
const S_WRITE_BYTES: usize = 10;
/// AUTH_ERROR replies by auth_stat (index from `rpc::auth_index`).
const S_AUTH: usize = 11;
/// NFS replies by nfsstat3 (index from `rpc::nfs_index`).
const S_NFS: usize = S_AUTH + rpc::AUTH_SLOTS;
const S_PROCS: usize = S_NFS + rpc::NFS_SLOTS;
/// Per procedure: latency sum, latency max, then the buckets (the calls
/// are the buckets' sum: one atomic add fewer a call and an operation).
const PROC_SLOTS: usize = 2 + hist::BUCKETS;

// The status ranges start past the last fixed slot.
const _: () = assert!(S_WRITE_BYTES < S_AUTH);

/// Where a program version's procedures start among the procedure rows.
struct VersIndex {
    prog: u32,
    vers: u32,
    first: usize,
    count: usize,
}

/// Counters read from a transport (and its pool), with the values at the
/// last reset to report counts since then.
struct Source {
    name: String,
    read: Box<dyn Fn() -> (TransportStats, PoolStats) + Send + Sync>,
    base: (TransportStats, PoolStats),
}

/// Counters read from an export's backend, with the values at the last
/// reset (counters are reported since then; gauges as they are).
struct ExportSource {
    /// None once the export is gone (removed by a reload): then dropped.
    read: Box<dyn Fn() -> Option<ExportCounts> + Send + Sync>,
    base: ExportCounts,
}

/// The shard a call records into. Copy it once per call.
#[derive(Debug, Clone, Copy)]
pub struct Shard(usize);

/// One program version's rows ([`Registry::rows`]).
#[derive(Debug, Clone, Copy)]
pub struct Rows {
    first: usize,
    count: usize,
}

/// All counters of a server.
pub struct Registry {
    mode: Mode,
    procs: Vec<ProcDesc>,
    versions: Vec<VersIndex>,
    shards: usize,
    lines_per_shard: usize,
    cells: Box<[Line]>,
    started: Instant,
    started_wall: SystemTime,
    reset_at: Mutex<Instant>,
    sources: Mutex<Vec<Source>>,
    exports: Mutex<Vec<ExportSource>>,
    /// Reads the lock manager's gauges, when NLM is served.
    locks: Mutex<Option<LockSource>>,
    /// Reads the NFSv4 state's gauges, when NFSv4 is served.
    nfs4: Mutex<Option<Nfs4Source>>,
}

type LockSource = Box<dyn Fn() -> snapshot::LockCounts + Send + Sync>;
type Nfs4Source = Box<dyn Fn() -> snapshot::Nfs4Counts + Send + Sync>;

impl Registry {
    /// A registry for these procedures. Rows of one program version must be
    /// contiguous and in procedure order starting at 0 (as program tables
    /// are).
    pub fn new(mode: Mode, procs: Vec<ProcDesc>) -> Registry {
        let mut versions: Vec<VersIndex> = Vec::new();
        for (i, p) in procs.iter().enumerate() {
            match versions.last_mut() {
                Some(v) if v.prog == p.prog && v.vers == p.vers && p.proc_ as usize == v.count => {
                    v.count += 1
                }
                _ => {
                    assert_eq!(p.proc_, 0, "procedure rows must start at 0: {p:?}");
                    versions.push(VersIndex {
                        prog: p.prog,
                        vers: p.vers,
                        first: i,
                        count: 1,
                    })
                }
            }
        }
        let shards = match mode {
            Mode::Off | Mode::Shared => 1,
            Mode::Percore => rnfsd_pool::counter::configured_cpus()
                .clamp(1, MAX_SHARDS)
                .next_power_of_two(),
        };
        let (shards, slots) = match mode {
            // Nothing is recorded: keep a single empty-ish shard.
            Mode::Off => (1, S_PROCS),
            _ => (shards, S_PROCS + procs.len() * PROC_SLOTS),
        };
        let lines_per_shard = slots.div_ceil(SLOTS_PER_LINE);
        let cells = (0..shards * lines_per_shard).map(|_| Line::new()).collect();
        let now = Instant::now();
        Registry {
            mode,
            procs,
            versions,
            shards,
            lines_per_shard,
            cells,
            started: now,
            started_wall: SystemTime::now(),
            reset_at: Mutex::new(now),
            sources: Mutex::new(Vec::new()),
            exports: Mutex::new(Vec::new()),
            locks: Mutex::new(None),
            nfs4: Mutex::new(None),
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn shards(&self) -> usize {
        self.shards
    }

    pub fn procs(&self) -> &[ProcDesc] {
        &self.procs
    }

    /// The shard for this call, or None when counting is off.
    #[inline]
    pub fn shard(&self) -> Option<Shard> {
        match self.mode {
            Mode::Off => None,
            Mode::Shared => Some(Shard(0)),
            Mode::Percore => {
                let cpu = rnfsd_pool::counter::current_cpu();
                // shards is a power of two, so this is in range.
                Some(Shard(cpu & (self.shards - 1)))
            }
        }
    }

    #[inline]
    fn cell(&self, s: Shard, slot: usize) -> &AtomicU64 {
        let line = s.0 * self.lines_per_shard + slot / SLOTS_PER_LINE;
        &self.cells[line].0[slot % SLOTS_PER_LINE]
    }

    #[inline]
    fn add(&self, s: Shard, slot: usize, n: u64) {
        self.cell(s, slot).fetch_add(n, Ordering::Relaxed);
    }

    /// The procedure row of a call, if we serve it.
    #[inline]
    fn proc_row(&self, prog: u32, vers: u32, proc_: u32) -> Option<usize> {
        let v = self
            .versions
            .iter()
            .find(|v| v.prog == prog && v.vers == vers)?;
        ((proc_ as usize) < v.count).then(|| v.first + proc_ as usize)
    }

    /// Count one request record and its outcome, as dispatch decoded and
    /// answered it: `call` is its program, version and procedure (None when
    /// it had no RPC version 2 header), `moved` the data bytes it read and
    /// wrote, `elapsed_us` the time spent in dispatch. Nothing is parsed
    /// here.
    #[inline]
    pub fn record(
        &self,
        s: Shard,
        call: Option<(u32, u32, u32)>,
        outcome: Outcome,
        moved: (u64, u64),
        elapsed_us: u64,
    ) {
        if let Some(r) = call.and_then(|(p, v, c)| self.proc_row(p, v, c)) {
            self.count_row(s, r, elapsed_us);
        }
        match outcome {
            Outcome::Dropped => self.add(s, S_DROPPED, 1),
            Outcome::Success { status } => {
                self.add(s, S_SUCCESS, 1);
                let nfs3 = call.is_some_and(|(p, v, _)| p == rpc::NFS_PROGRAM && v == 3);
                if let (true, Some(st)) = (nfs3, status) {
                    self.add(s, S_NFS + rpc::nfs_index(st), 1);
                }
                if moved.0 > 0 {
                    self.add(s, S_READ_BYTES, moved.0);
                }
                if moved.1 > 0 {
                    self.add(s, S_WRITE_BYTES, moved.1);
                }
            }
            Outcome::ProgUnavail => self.add(s, S_PROG_UNAVAIL, 1),
            Outcome::ProgMismatch => self.add(s, S_PROG_MISMATCH, 1),
            Outcome::ProcUnavail => self.add(s, S_PROC_UNAVAIL, 1),
            Outcome::GarbageArgs => self.add(s, S_GARBAGE_ARGS, 1),
            Outcome::SystemErr => self.add(s, S_SYSTEM_ERR, 1),
            Outcome::RpcMismatch => self.add(s, S_RPC_MISMATCH, 1),
            Outcome::AuthError(a) => self.add(s, S_AUTH + rpc::auth_index(a), 1),
        }
    }

    /// Count one call of row `r` taking `elapsed_us`.
    #[inline]
    fn count_row(&self, s: Shard, r: usize, elapsed_us: u64) {
        let base = S_PROCS + r * PROC_SLOTS;
        // Most calls and operations take under a microsecond: adding 0 to
        // the sum would cost an atomic add and change nothing.
        if elapsed_us > 0 {
            self.add(s, base, elapsed_us);
        }
        let max = self.cell(s, base + 1);
        // Plain load first: the max rarely moves, so the RMW is rare.
        if elapsed_us > max.load(Ordering::Relaxed) {
            max.fetch_max(elapsed_us, Ordering::Relaxed);
        }
        self.add(s, base + 2 + hist::index(elapsed_us), 1);
    }

    /// The rows of program `prog` version `vers`, found once for several
    /// [`record_in`](Registry::record_in) calls (a COMPOUND's operations):
    /// finding them is a walk of every registered version.
    #[inline]
    pub fn rows(&self, prog: u32, vers: u32) -> Option<Rows> {
        let v = self
            .versions
            .iter()
            .find(|v| v.prog == prog && v.vers == vers)?;
        Some(Rows {
            first: v.first,
            count: v.count,
        })
    }

    /// Count a part of a call that has rows of its own (an NFSv4
    /// operation inside COMPOUND: row `proc_` of `rows`), with its
    /// latency; the record itself is counted by [`record`](Registry::record).
    #[inline]
    pub fn record_in(&self, s: Shard, rows: Rows, proc_: u32, elapsed_us: u64) {
        if (proc_ as usize) < rows.count {
            self.count_row(s, rows.first + proc_ as usize, elapsed_us);
        }
    }

    /// [`record_in`](Registry::record_in) of a part that took no time
    /// (0 µs: the histogram's first bucket, which counts it too; the sum
    /// and the maximum cannot move), without the latency's arithmetic.
    /// One layout of a row's cells (`count_row`'s): inlined here with 0,
    /// its sum and maximum steps fold away.
    #[inline]
    pub fn record_in_untimed(&self, s: Shard, rows: Rows, proc_: u32) {
        self.record_in(s, rows, proc_, 0)
    }

    /// A transport (and its pool) whose counters snapshots include.
    pub fn add_source(
        &self,
        name: &str,
        read: impl Fn() -> (TransportStats, PoolStats) + Send + Sync + 'static,
    ) {
        let mut v = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        v.push(Source {
            name: name.to_owned(),
            read: Box::new(read),
            base: Default::default(),
        });
    }

    /// An export whose backend counters (caches, handle walks) snapshots
    /// include; `read` is called on every snapshot, off the request path.
    pub fn add_export(&self, read: impl Fn() -> Option<ExportCounts> + Send + Sync + 'static) {
        let mut v = self.exports.lock().unwrap_or_else(|e| e.into_inner());
        v.push(ExportSource {
            read: Box::new(read),
            base: ExportCounts::default(),
        });
    }

    /// Report the lock manager's gauges from `read`.
    pub fn set_locks(&self, read: impl Fn() -> snapshot::LockCounts + Send + Sync + 'static) {
        *self.locks.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(read));
    }

    /// Report the NFSv4 state's gauges from `read`.
    pub fn set_nfs4(&self, read: impl Fn() -> snapshot::Nfs4Counts + Send + Sync + 'static) {
        *self.nfs4.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(read));
    }

    /// Zero every counter. Concurrent adds may land on either side of it.
    /// Transport and pool counters are not ours to zero: their values now
    /// become the baseline that later snapshots subtract.
    pub fn reset(&self) {
        for l in self.cells.iter() {
            for c in &l.0 {
                c.store(0, Ordering::Relaxed);
            }
        }
        let mut src = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        for s in src.iter_mut() {
            s.base = (s.read)();
        }
        drop(src);
        let mut ex = self.exports.lock().unwrap_or_else(|e| e.into_inner());
        ex.retain_mut(|e| match (e.read)() {
            Some(now) => {
                e.base = now;
                true
            }
            None => false,
        });
        *self.reset_at.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    /// Sum of one slot over the shards.
    fn sum(&self, slot: usize) -> u64 {
        (0..self.shards).fold(0u64, |a, s| {
            a.wrapping_add(self.cell(Shard(s), slot).load(Ordering::Relaxed))
        })
    }

    fn max(&self, slot: usize) -> u64 {
        (0..self.shards)
            .map(|s| self.cell(Shard(s), slot).load(Ordering::Relaxed))
            .max()
            .unwrap_or(0)
    }

    /// Everything, summed over shards now.
    pub fn snapshot(&self) -> Snapshot {
        snapshot::take(self)
    }
}

#[cfg(test)]
mod tests;
