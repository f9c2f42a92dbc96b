//! NFSv4.2's asynchronous copies (RFC 7862 §15.2, §15.8, §15.9, §16.1):
//! the copies in flight and finished, each named by a copy stateid
//! (wr_callback_id), run off the request path on a bounded set of copier
//! threads, reported by CB_OFFLOAD when done (sent by the copier thread
//! through `deleg`'s back channels), asked about by OFFLOAD_STATUS, stopped by OFFLOAD_CANCEL.
//!
//! Bounds: at most `nfs4_copies_max` copies run at once (one copier
//! thread each, started as needed and kept), at most
//! `nfs4_copies_per_client` of one client; a finished copy's stateid is
//! kept for OFFLOAD_STATUS for two leases, and the table never holds more
//! than `MAX_KEPT_PER_COPY` finished copies per running one. A copy
//! belongs to its client: another client's OFFLOAD_STATUS or
//! OFFLOAD_CANCEL sees NFS4ERR_BAD_STATEID (as knfsd), and a client that
//! goes (destroyed, expired) stops its copies at their next chunk and
//! frees their stateids.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rnfsd_proto::nfs4::cb::{CbOffload4Args, OffloadInfo4};
use rnfsd_proto::nfs4::{NfsFh4, Nfsstat4, Stateid4, WriteResponse4};
use rnfsd_v4state::ClientHandle;

use super::deleg::CbSender;

/// `nfs4_copies_max`'s default: asynchronous copies running at once.
pub const DEFAULT_COPIES_MAX: usize = 4;
/// `nfs4_copies_per_client`'s default.
pub const DEFAULT_COPIES_PER_CLIENT: usize = 2;
/// The most `nfs4_copies_max` may be (each running copy holds a thread).
pub const MAX_COPIES: usize = 64;
/// Finished copies kept (for OFFLOAD_STATUS) per copy that may run.
const MAX_KEPT_PER_COPY: usize = 16;

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How a copy ended: its status and, when NFS4_OK, its write_response4
/// (count, stability, verifier); otherwise the bytes copied before the
/// failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub status: Nfsstat4,
    pub response: WriteResponse4,
}

/// The copy itself, run on a copier thread: it copies in chunks, adding
/// each to [`Job::add`] and stopping when [`Job::stopped`].
pub type Work = Box<dyn FnOnce(&Job) -> Outcome + Send>;

/// One asynchronous copy.
pub struct Job {
    client: ClientHandle,
    other: [u8; 12],
    /// The destination file's handle, for CB_OFFLOAD.
    fh: Vec<u8>,
    copied: AtomicU64,
    cancelled: AtomicBool,
    /// Set once it finished: how, and when.
    end: Mutex<Option<(Outcome, Instant)>>,
    work: Mutex<Option<Work>>,
    cb: CbSender,
}

impl Job {
    /// `n` more bytes are copied.
    pub fn add(&self, n: u64) {
        self.copied.fetch_add(n, Ordering::Relaxed);
    }

    /// Bytes copied so far.
    pub fn copied(&self) -> u64 {
        self.copied.load(Ordering::Relaxed)
    }

    /// The copy must stop: cancelled, or its client is gone.
    pub fn stopped(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed) || self.client.is_expired()
    }

    /// Its stateid (seqid 1; a copy's stateid never changes).
    pub fn stateid(&self) -> Stateid4 {
        Stateid4 {
            seqid: 1,
            other: self.other,
        }
    }
}

/// What OFFLOAD_STATUS reports (§15.9.3): bytes copied, and the status
/// once finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    pub copied: u64,
    pub complete: Option<Nfsstat4>,
}

/// Why a copy cannot start asynchronously: the caller copies
/// synchronously instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy;

/// Where copier threads take their copies.
type Queue = Arc<Mutex<Receiver<Arc<Job>>>>;

struct Inner {
    jobs: Mutex<HashMap<[u8; 12], Arc<Job>>>,
    /// Copies running (started, not yet finished).
    running: AtomicUsize,
    /// Copier threads started.
    threads: Mutex<usize>,
    tx: SyncSender<Arc<Job>>,
    rx: Queue,
    next: AtomicU64,
}

/// The asynchronous copies of the server.
pub struct Copies {
    max: usize,
    per_client: usize,
    /// How long a finished copy stays for OFFLOAD_STATUS.
    keep: Duration,
    boot: u32,
    inner: Arc<Inner>,
}

impl Copies {
    /// At most `max` copies at once, `per_client` of one client (0: no
    /// asynchronous copies); finished ones kept `keep`; stateids carry
    /// `boot` (the state's boot verifier) as every stateid here does.
    pub fn new(max: usize, per_client: usize, keep: Duration, boot: u32) -> Copies {
        let max = max.min(MAX_COPIES);
        // Never more queued than may run.
        let (tx, rx) = sync_channel(max);
        Copies {
            max,
            per_client: per_client.min(max),
            keep,
            boot,
            inner: Arc::new(Inner {
                jobs: Mutex::new(HashMap::new()),
                running: AtomicUsize::new(0),
                threads: Mutex::new(0),
                tx,
                rx: Arc::new(Mutex::new(rx)),
                next: AtomicU64::new(1),
            }),
        }
    }

    /// Whether asynchronous copies are on at all.
    pub fn enabled(&self) -> bool {
        self.per_client > 0
    }

    /// Starts `work` for `client` (CB_OFFLOAD on `cb` when it is done,
    /// naming `fh`, the destination): its stateid, or `Busy` when the
    /// bounds are reached.
    pub fn start(
        &self,
        client: &ClientHandle,
        fh: &[u8],
        cb: CbSender,
        work: Work,
    ) -> Result<Stateid4, Busy> {
        if !self.enabled() {
            return Err(Busy);
        }
        let id = client.id();
        let job = {
            let mut jobs = locked(&self.inner.jobs);
            self.sweep(&mut jobs);
            let mine = jobs
                .values()
                .filter(|j| j.client.id() == id && locked(&j.end).is_none())
                .count();
            if mine >= self.per_client || jobs.len() >= self.max * MAX_KEPT_PER_COPY {
                return Err(Busy);
            }
            // A slot among the running copies.
            if self
                .inner
                .running
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    (n < self.max).then_some(n + 1)
                })
                .is_err()
            {
                return Err(Busy);
            }
            let n = self.inner.next.fetch_add(1, Ordering::Relaxed);
            let mut other = [0u8; 12];
            other[..4].copy_from_slice(&self.boot.to_be_bytes());
            // The top bit marks a copy's stateid (the state's own carry a
            // MAC there and are refused by OFFLOAD_STATUS anyway).
            other[4..].copy_from_slice(&(n | 1 << 63).to_be_bytes());
            let job = Arc::new(Job {
                client: client.clone(),
                other,
                fh: fh.to_vec(),
                copied: AtomicU64::new(0),
                cancelled: AtomicBool::new(false),
                end: Mutex::new(None),
                work: Mutex::new(Some(work)),
                cb,
            });
            jobs.insert(other, job.clone());
            job
        };
        let sid = job.stateid();
        if self.dispatch(job).is_err() {
            locked(&self.inner.jobs).remove(&sid.other);
            self.inner.running.fetch_sub(1, Ordering::AcqRel);
            return Err(Busy);
        }
        Ok(sid)
    }

    /// Hands `job` to a copier thread, starting one if fewer run than
    /// copies may.
    fn dispatch(&self, job: Arc<Job>) -> Result<(), ()> {
        let mut t = locked(&self.inner.threads);
        if *t < self.max && *t < self.inner.running.load(Ordering::Acquire) {
            let rx = self.inner.rx.clone();
            let inner = Arc::downgrade(&self.inner);
            std::thread::Builder::new()
                .name("nfsv4-copy".into())
                .spawn(move || copier(&inner, &rx))
                .map_err(|_| ())?;
            *t += 1;
        }
        self.inner.tx.try_send(job).map_err(|_| ())
    }

    /// Frees finished copies kept past `keep` and every copy of a client
    /// that is gone.
    fn sweep(&self, jobs: &mut HashMap<[u8; 12], Arc<Job>>) {
        let now = Instant::now();
        jobs.retain(|_, j| {
            !j.client.is_expired()
                && locked(&j.end).is_none_or(|(_, at)| now.duration_since(at) < self.keep)
        });
    }

    /// The copy `sid` names for `client`, if it is one of its.
    fn find(&self, client: &ClientHandle, sid: &Stateid4) -> Option<Arc<Job>> {
        let mut jobs = locked(&self.inner.jobs);
        self.sweep(&mut jobs);
        jobs.get(&sid.other)
            .filter(|j| j.client.id() == client.id())
            .cloned()
    }

    /// OFFLOAD_STATUS (§15.9): None for a stateid naming no copy of
    /// `client` (NFS4ERR_BAD_STATEID).
    pub fn status(&self, client: &ClientHandle, sid: &Stateid4) -> Option<Status> {
        let j = self.find(client, sid)?;
        let end = *locked(&j.end);
        Some(Status {
            copied: end.map_or(j.copied(), |(o, _)| match o.status {
                Nfsstat4::Ok => o.response.count,
                _ => j.copied(),
            }),
            complete: end.map(|(o, _)| o.status),
        })
    }

    /// OFFLOAD_CANCEL (§15.8): the copy stops at its next chunk, sends no
    /// CB_OFFLOAD and its stateid is freed (what it copied stays). False
    /// for a stateid naming no copy of `client`.
    pub fn cancel(&self, client: &ClientHandle, sid: &Stateid4) -> bool {
        let Some(j) = self.find(client, sid) else {
            return false;
        };
        j.cancelled.store(true, Ordering::Relaxed);
        locked(&self.inner.jobs).remove(&sid.other);
        true
    }

    /// Copies running now, and copy stateids held (running or kept).
    pub fn counts(&self) -> (usize, usize) {
        let mut jobs = locked(&self.inner.jobs);
        self.sweep(&mut jobs);
        (self.inner.running.load(Ordering::Acquire), jobs.len())
    }
}

/// A copier thread: runs copies as they come, reports each by
/// CB_OFFLOAD.
fn copier(inner: &std::sync::Weak<Inner>, rx: &Mutex<Receiver<Arc<Job>>>) {
    loop {
        let job = match locked(rx).recv() {
            Ok(j) => j,
            Err(_) => return,
        };
        // The server is gone.
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let work = locked(&job.work).take();
        if let Some(work) = work {
            let outcome = work(&job);
            *locked(&job.end) = Some((outcome, Instant::now()));
            if !job.stopped() {
                offload(&job, &outcome);
            }
        }
        inner.running.fetch_sub(1, Ordering::AcqRel);
        if job.stopped() {
            locked(&inner.jobs).remove(&job.other);
        }
    }
}

/// CB_OFFLOAD (RFC 7862 §16.1) for a finished copy.
fn offload(job: &Job, o: &Outcome) {
    let cb = &job.cb;
    let info = match o.status {
        Nfsstat4::Ok => OffloadInfo4::Ok(WriteResponse4 {
            callback_id: None,
            ..o.response
        }),
        status => OffloadInfo4::Fail {
            status,
            bytes_copied: job.copied(),
        },
    };
    let args = CbOffload4Args {
        fh: NfsFh4(job.fh.clone()),
        stateid: job.stateid(),
        info,
    };
    if !cb.offload(job.client.id(), args) {
        tracing::info!(
            clientid = format!("{:#x}", job.client.id().0),
            "nfsv4: CB_OFFLOAD not taken (OFFLOAD_STATUS still answers)"
        );
    }
}
