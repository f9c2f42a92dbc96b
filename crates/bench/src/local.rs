//! Local-filesystem references for the create and fsmark workloads: the
//! same work with direct syscalls (std::fs) on threads, so a server's rate
//! can be compared with the disk's own (as the Lustre thread compared MDS
//! create rate with the local fs).

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rnfsd_fs::limits::owed::MAX_THREADS;
use rnfsd_fs::owed::Commits;
use rnfsd_fs::{Call, Cred};
use std::time::{Duration, Instant};

use crate::ops::{emit, fresh_name, print_header, progress, OpResult, Phase};
use crate::stats;

#[derive(clap::Args, Clone, Debug)]
pub struct LocalArgs {
    /// Directory in which a fresh run directory is made.
    #[arg(long)]
    pub dir: PathBuf,
    /// Files per run (per iteration for local-fsmark).
    #[arg(long, default_value_t = 150_000)]
    pub files: u64,
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    pub streams: Vec<usize>,
    /// local-fsmark: iterations.
    #[arg(long, default_value_t = 5)]
    pub iterations: usize,
    /// local-fsmark: bytes per file.
    #[arg(long, default_value_t = 4096)]
    pub file_size: usize,
    #[arg(long, default_value = "local")]
    pub label: String,
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Upper bound on each phase's wall time, seconds (at most 3600).
    #[arg(long, default_value_t = 300.0)]
    pub max_seconds: f64,
    /// local-create: also make each create and remove durable as a `sync`
    /// export must, the way the server does: it waits for a journal commit
    /// begun after it, made by this many commit threads (1 to 8, as the
    /// server's `journal_commit_threads`: a marker file's change, then its
    /// fsync), so concurrent calls share one (0: none, the `async`
    /// reference). The best a server's `sync` creates can do on this disk.
    #[arg(long, default_value_t = 0)]
    pub group_commit: usize,
    /// local-fsmark: fsync each file once made, before its write, as a
    /// `sync` export must answer the CREATE (RFC 1813 §4.8): two syncs per
    /// file, the least a `sync` export's fs_mark can cost.
    #[arg(long)]
    pub sync_create: bool,
}

/// After a change: wait for a journal commit begun after it, made by
/// `commits`' threads and shared with every change that arrived
/// meanwhile: the server's own group commit (`rnfsd_fs::owed`, as a pool
/// call that owes its commit), with no RPC around it. False if that
/// commit failed.
fn synced(commits: &Arc<Commits>) -> bool {
    let cred = Cred::default();
    let call = Call::thread(&cred, true);
    call.owe(commits) && call.take_owed().is_some_and(|o| o.wait().is_ok())
}

/// `parallel`, each op then waiting for a group commit when `committers` > 0.
fn parallel_synced<F>(
    n: u64,
    threads: usize,
    committers: usize,
    limit: Duration,
    msg: &str,
    dir: &Path,
    op: F,
) -> Result<(Phase, u64), String>
where
    F: Fn(u64) -> bool + Send + Sync,
{
    if committers == 0 {
        return Ok((parallel(n, threads, limit, msg, op), 0));
    }
    let path = dir.join(".marker");
    let marker = Arc::new(
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?,
    );
    // The commit of `journal.rs`: a change to the marker, then its fsync.
    let commits = Commits::start(
        "local-commit",
        committers,
        || {},
        move || {
            marker.set_modified(std::time::SystemTime::now())?;
            marker.sync_all()
        },
        |_| {},
    )
    .map_err(|e| format!("commit threads: {e}"))?;
    let p = parallel(n, threads, limit, msg, |i| op(i) && synced(&commits));
    let syncs = commits.counts().syncs;
    commits.stop();
    let _ = fs::remove_file(&path);
    Ok((p, syncs))
}

/// Run `op(i)` for i in 0..n on `threads` OS threads until done or `limit`.
fn parallel<F>(n: u64, threads: usize, limit: Duration, msg: &str, op: F) -> Phase
where
    F: Fn(u64) -> bool + Send + Sync,
{
    let pb = progress(n, msg);
    let next = AtomicU64::new(0);
    let errors = AtomicU64::new(0);
    let start = Instant::now();
    let deadline = start + limit;
    let mut lat = stats::histogram();
    let mut done = 0;
    let mut truncated = false;
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads.max(1))
            .map(|_| {
                s.spawn(|| {
                    let mut h = stats::histogram();
                    let (mut d, mut cut) = (0u64, false);
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
                        if op(i) {
                            d += 1;
                        } else {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                        let _ = h.record(t.elapsed().as_micros().max(1) as u64);
                        pb.inc(1);
                    }
                    (d, h, cut)
                })
            })
            .collect();
        for j in hs {
            if let Ok((d, h, cut)) = j.join() {
                done += d;
                truncated |= cut;
                let _ = lat.add(&h);
            }
        }
    });
    pb.finish_and_clear();
    Phase {
        done,
        errors: errors.load(Ordering::Relaxed),
        elapsed: start.elapsed(),
        lat,
        truncated,
        cost: None,
        error_kinds: Default::default(),
    }
}

fn row(a: &LocalArgs, workload: &str, streams: usize, p: &Phase, unit: &str) -> OpResult {
    p.row(&a.label, workload, streams, unit)
}

/// A phase's row; with group commit, the commits per operation to stderr.
fn emit_synced(
    a: &LocalArgs,
    workload: &str,
    streams: usize,
    p: &Phase,
    unit: &str,
    commits: u64,
    json: &Option<PathBuf>,
) {
    emit(&row(a, workload, streams, p, unit), json.as_deref());
    if commits > 0 {
        eprintln!(
            "{}: {workload} at {streams} streams: {commits} commits, {:.1} operations each",
            a.label,
            p.done as f64 / commits as f64
        );
    }
}

fn limit(a: &LocalArgs) -> Duration {
    Duration::from_secs_f64(a.max_seconds.clamp(0.1, 3600.0))
}

fn name(d: &Path, i: u64) -> PathBuf {
    d.join(format!("f{i:07}"))
}

/// Create (O_CREAT|O_EXCL, closed at once) then unlink N files; with
/// `--group-commit`, each made durable before the next.
pub fn create_cmd(a: LocalArgs) -> Result<(), String> {
    print_header();
    let json = a.json.clone();
    if a.sync_create {
        return Err("--sync-create is local-fsmark's; local-create has --group-commit".into());
    }
    let k = a.group_commit;
    if k > MAX_THREADS {
        return Err(format!("--group-commit: 0 to {} threads", MAX_THREADS));
    }
    for &streams in &a.streams {
        let streams = streams.max(1);
        let d = a.dir.join(fresh_name("local"));
        fs::create_dir_all(&d).map_err(|e| format!("mkdir {}: {e}", d.display()))?;
        let (p, commits) = parallel_synced(a.files, streams, k, limit(&a), "create", &d, |i| {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(name(&d, i))
                .is_ok()
        })?;
        emit_synced(&a, "create", streams, &p, "creates/s", commits, &json);
        let tried = (p.done + p.errors).min(a.files);
        let (p, commits) = parallel_synced(tried, streams, k, limit(&a), "remove", &d, |i| {
            fs::remove_file(name(&d, i)).is_ok()
        })?;
        emit_synced(&a, "remove", streams, &p, "removes/s", commits, &json);
        let _ = fs::remove_dir(&d);
    }
    Ok(())
}

/// fs_mark's default: per file create, write `file_size` bytes, fsync, close.
pub fn fsmark_cmd(a: LocalArgs) -> Result<(), String> {
    if a.group_commit > 0 {
        return Err("--group-commit is local-create's; local-fsmark has --sync-create".into());
    }
    print_header();
    let json = a.json.clone();
    let data = vec![0xa5u8; a.file_size.min(1 << 20)];
    for &streams in &a.streams {
        let streams = streams.max(1);
        let d = a.dir.join(fresh_name("local-fsmark"));
        fs::create_dir_all(&d).map_err(|e| format!("mkdir {}: {e}", d.display()))?;
        let mut rates = Vec::new();
        let mut total = 0u64;
        let mut errors = 0u64;
        let mut secs = 0.0;
        let mut lat = stats::histogram();
        let mut truncated = false;
        for it in 0..a.iterations.max(1) {
            let p = parallel(a.files, streams, limit(&a), "fsmark", |i| {
                let path = d.join(format!("i{it:03}-f{i:07}"));
                let f = OpenOptions::new().write(true).create_new(true).open(path);
                match f {
                    Ok(mut f) => {
                        (!a.sync_create || f.sync_all().is_ok())
                            && f.write_all(&data).is_ok()
                            && f.sync_all().is_ok()
                    }
                    Err(_) => false,
                }
            });
            let mut r = row(&a, "fsmark", streams, &p, "files/s");
            r.kind = "iteration".into();
            r.iteration = Some(it);
            emit(&r, json.as_deref());
            rates.push(r.rate);
            total += p.done;
            errors += p.errors;
            secs += p.elapsed.as_secs_f64();
            let _ = lat.add(&p.lat);
            truncated |= p.truncated;
            if p.truncated {
                break;
            }
        }
        if let Some(s) = stats::spread(&rates) {
            let r = OpResult {
                label: a.label.clone(),
                workload: "fsmark".into(),
                kind: "summary".into(),
                streams,
                conns: None,
                conn_per_stream: false,
                count: total,
                errors,
                seconds: secs,
                rate: s.mean,
                unit: "files/s".into(),
                p50_us: lat.value_at_quantile(0.5),
                p99_us: lat.value_at_quantile(0.99),
                iteration: None,
                server_cpu_us_per_op: None,
                server_csw_per_op: None,
                commit_seconds: None,
                error_kinds: Default::default(),
                spread: Some(s),
                truncated,
            };
            emit(&r, json.as_deref());
        }
        // Clean up: bounded by the directory's own listing.
        if let Ok(rd) = fs::read_dir(&d) {
            for e in rd.flatten() {
                let _ = fs::remove_file(e.path());
            }
        }
        let _ = fs::remove_dir(&d);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synced_creates_all_succeed_and_share_commits() {
        let d = std::env::temp_dir().join(fresh_name("gc-test"));
        fs::create_dir_all(&d).unwrap();
        let (p, commits) = parallel_synced(200, 8, 2, Duration::from_secs(60), "create", &d, |i| {
            fs::File::create_new(name(&d, i)).is_ok()
        })
        .unwrap();
        assert_eq!((p.done, p.errors), (200, 0));
        // One commit at least, never more than one per create.
        assert!((1..=200).contains(&commits), "{commits} commits");
        // The marker is gone; only the 200 files are left.
        assert_eq!(fs::read_dir(&d).unwrap().count(), 200);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_failed_group_commit_fails_its_waiters() {
        let c = Commits::start(
            "gc-fail",
            1,
            || {},
            || Err(std::io::Error::from_raw_os_error(libc::EIO)),
            |_| {},
        )
        .unwrap();
        // The commit failed: the waiter is told its change is not durable.
        assert!(!synced(&c));
        c.stop();
    }
}
