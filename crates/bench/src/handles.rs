//! `handles`: walk the export (READDIRPLUS, several directories at once) and
//! save samples of its handles as hex, one per line, for `storm` and
//! `run --handles-file`. Also the handle-file reader they use.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rnfsd_client::nfs3::{Ftype3, NfsFh3, NFS3_FHSIZE};
use rnfsd_client::NfsClient;

use crate::ops::{self, emit, print_header, Target};
use crate::workload::{sample_indices, XorShift};

/// Most handles a file may hold, and most objects one walk keeps.
pub const MAX_FILE_HANDLES: usize = 20_000_000;
/// Largest handle file read (a line is at most 129 bytes).
const MAX_FILE_BYTES: u64 = 3 << 30;

#[derive(clap::Args, Clone, Debug)]
pub struct HandlesArgs {
    #[command(flatten)]
    pub target: Target,
    /// Handles to save, comma separated: one file per count (--out), the
    /// samples disjoint.
    #[arg(long, value_delimiter = ',', required = true)]
    pub count: Vec<usize>,
    /// Output files, comma separated, one per --count.
    #[arg(long, value_delimiter = ',', required = true)]
    pub out: Vec<PathBuf>,
    /// Objects walked at most.
    #[arg(long, default_value_t = 2_000_000)]
    pub tree_limit: usize,
    /// Directories read at once during the walk.
    #[arg(long, default_value_t = 4)]
    pub walk_streams: usize,
    /// Only regular files (for READ, or a cold set of files only).
    #[arg(long)]
    pub files_only: bool,
}

/// What a walk saw.
pub struct Walked {
    /// (handle, is a regular file) of every object but the root.
    pub objects: Vec<(Box<[u8]>, bool)>,
    pub dirs: u64,
    pub errors: u64,
    pub truncated: bool,
    pub elapsed: Duration,
}

/// Walk the tree under `root` with `streams` directories in flight, keeping
/// each object's handle, up to `limit` objects or `max_time`. A directory
/// that fails to read is counted and skipped: one bad directory should not
/// void a walk of millions of objects.
pub async fn walk_handles(
    nfs: &NfsClient,
    root: &NfsFh3,
    limit: usize,
    streams: usize,
    max_time: Duration,
) -> Walked {
    struct Shared {
        queue: Mutex<Vec<NfsFh3>>,
        /// Directories popped and not yet finished.
        busy: AtomicUsize,
        out: Mutex<Vec<(Box<[u8]>, bool)>>,
        count: AtomicUsize,
        dirs: AtomicU64,
        errors: AtomicU64,
        full: AtomicBool,
    }
    let start = Instant::now();
    let deadline = start + max_time;
    let sh = Arc::new(Shared {
        queue: Mutex::new(vec![root.clone()]),
        busy: AtomicUsize::new(0),
        out: Mutex::new(Vec::new()),
        count: AtomicUsize::new(0),
        dirs: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        full: AtomicBool::new(false),
    });
    let pb = ops::progress(limit as u64, "walk");
    let mut tasks = Vec::new();
    for _ in 0..streams.clamp(1, 64) {
        let (sh, nfs, pb) = (sh.clone(), nfs.clone(), pb.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                if Instant::now() >= deadline || sh.full.load(Ordering::Relaxed) {
                    return;
                }
                // busy is raised under the queue lock, so "queue empty and
                // nothing busy" means no directory is left anywhere.
                let d = {
                    let Ok(mut q) = sh.queue.lock() else { return };
                    let d = q.pop();
                    if d.is_some() {
                        sh.busy.fetch_add(1, Ordering::SeqCst);
                    } else if sh.busy.load(Ordering::SeqCst) == 0 {
                        return;
                    }
                    d
                };
                let Some(d) = d else {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    continue;
                };
                let r = nfs.readdirplus_all(&d).await;
                sh.dirs.fetch_add(1, Ordering::Relaxed);
                let mut subdirs = Vec::new();
                let mut mine = Vec::new();
                match r {
                    Ok(entries) => {
                        for e in entries {
                            if e.name == b"." || e.name == b".." {
                                continue;
                            }
                            let Some(fh) = e.name_handle else { continue };
                            let t = e.name_attributes.as_ref().map(|a| a.ftype);
                            if t == Some(Ftype3::Dir) {
                                subdirs.push(fh.clone());
                            }
                            mine.push((fh.data.into_boxed_slice(), t == Some(Ftype3::Reg)));
                        }
                    }
                    Err(_) => {
                        sh.errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                // Keep at most `limit` objects in all.
                let room = limit.saturating_sub(sh.count.fetch_add(mine.len(), Ordering::SeqCst));
                if room < mine.len() {
                    mine.truncate(room);
                    sh.full.store(true, Ordering::Relaxed);
                }
                pb.inc(mine.len() as u64);
                if let Ok(mut o) = sh.out.lock() {
                    o.extend(mine);
                }
                if let Ok(mut q) = sh.queue.lock() {
                    q.extend(subdirs);
                    sh.busy.fetch_sub(1, Ordering::SeqCst);
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    pb.finish_and_clear();
    let timed_out = Instant::now() >= deadline;
    let full = sh.full.load(Ordering::Relaxed);
    let objects = sh
        .out
        .lock()
        .map(|mut o| std::mem::take(&mut *o))
        .unwrap_or_default();
    Walked {
        objects,
        dirs: sh.dirs.load(Ordering::Relaxed),
        errors: sh.errors.load(Ordering::Relaxed),
        truncated: timed_out || full,
        elapsed: start.elapsed(),
    }
}

/// Disjoint samples of sizes `counts` from `pool`. The pool is sorted by
/// handle bytes first, so the result does not depend on the order a
/// parallel walk met the objects; one stratified sample of the total (as
/// `run --handles` takes) spans the whole tree, then a fixed shuffle deals
/// it out so every sample is spread over the tree too.
pub fn disjoint_samples(
    mut pool: Vec<Box<[u8]>>,
    counts: &[usize],
) -> Result<Vec<Vec<Box<[u8]>>>, String> {
    pool.sort_unstable();
    pool.dedup();
    let total: usize = counts.iter().sum();
    if pool.len() < total {
        return Err(format!(
            "asked for {total} handles but the walk found only {} eligible objects; prepare a larger tree or raise --tree-limit",
            pool.len()
        ));
    }
    let mut picked: Vec<usize> = sample_indices(pool.len(), total, SEED);
    let mut rng = XorShift::new(SEED ^ 0xa5a5);
    for i in (1..picked.len()).rev() {
        picked.swap(i, rng.below(i + 1));
    }
    let mut out = Vec::with_capacity(counts.len());
    let mut it = picked.into_iter();
    for &c in counts {
        out.push(it.by_ref().take(c).map(|i| pool[i].clone()).collect());
    }
    Ok(out)
}

const SEED: u64 = 0x5eed_0000_0000_0002;

pub fn to_hex(b: &[u8]) -> String {
    const H: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for &x in b {
        s.push(H[usize::from(x >> 4)] as char);
        s.push(H[usize::from(x & 15)] as char);
    }
    s
}

pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    let s = s.as_bytes();
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let nib = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    s.chunks(2)
        .map(|p| Some((nib(p[0])? << 4) | nib(p[1])?))
        .collect()
}

/// Read a handle file: hex, one per line; blank lines and `#` comments
/// skipped. Bounded in size and count; every handle at most NFS3_FHSIZE.
pub fn read_handles(path: &Path) -> Result<Vec<NfsFh3>, String> {
    let p = path.display();
    let len = std::fs::metadata(path)
        .map_err(|e| format!("{p}: {e}"))?
        .len();
    if len > MAX_FILE_BYTES {
        return Err(format!("{p}: larger than {MAX_FILE_BYTES} bytes"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{p}: {e}"))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let b = from_hex(line).ok_or_else(|| format!("{p}:{}: not hex", n + 1))?;
        if b.is_empty() || b.len() > NFS3_FHSIZE {
            return Err(format!(
                "{p}:{}: a handle is 1..={NFS3_FHSIZE} bytes",
                n + 1
            ));
        }
        if out.len() >= MAX_FILE_HANDLES {
            return Err(format!("{p}: more than {MAX_FILE_HANDLES} handles"));
        }
        out.push(NfsFh3::new(b));
    }
    if out.is_empty() {
        return Err(format!("{p}: no handles"));
    }
    Ok(out)
}

fn write_handles(path: &Path, hs: &[Box<[u8]>]) -> Result<(), String> {
    let p = path.display();
    let f = std::fs::File::create(path).map_err(|e| format!("{p}: {e}"))?;
    let mut w = std::io::BufWriter::new(f);
    for h in hs {
        writeln!(w, "{}", to_hex(h)).map_err(|e| format!("{p}: {e}"))?;
    }
    w.flush().map_err(|e| format!("{p}: {e}"))
}

pub async fn handles_cmd(a: HandlesArgs) -> Result<(), String> {
    if a.count.len() != a.out.len() {
        return Err("--count and --out need the same number of values".into());
    }
    if a.count.contains(&0) {
        return Err("--count values must be > 0".into());
    }
    let limit = a.tree_limit.min(MAX_FILE_HANDLES);
    let c = ops::connect(&a.target).await?;
    let w = walk_handles(
        &c.nfs,
        &c.root,
        limit,
        a.walk_streams,
        Duration::from_secs_f64(a.target.max_seconds.clamp(0.1, 3600.0)),
    )
    .await;
    let walked = w.objects.len() as u64;
    eprintln!(
        "walked {walked} objects in {} directories in {:.1} s{}{}",
        w.dirs,
        w.elapsed.as_secs_f64(),
        if w.truncated {
            " (stopped by --tree-limit or --max-seconds)"
        } else {
            ""
        },
        if w.errors > 0 {
            format!(", {} directories failed to read", w.errors)
        } else {
            String::new()
        }
    );
    // A row like the other commands': the walk's rate, for the record.
    let mut r = ops::OpResult::from_counts(
        &a.target.label,
        "walk",
        a.walk_streams,
        walked,
        w.errors,
        w.elapsed,
        "objects/s",
    );
    r.truncated = w.truncated;
    r.conns = Some(a.target.conns.clamp(1, rnfsd_client::MAX_CONNECTIONS));
    print_header();
    emit(&r, a.target.json.as_deref());
    let pool: Vec<Box<[u8]>> = w
        .objects
        .into_iter()
        .filter(|(_, reg)| !a.files_only || *reg)
        .map(|(h, _)| h)
        .collect();
    // The root is never listed by the walk, but a handle file must not
    // hold it either.
    let root: HashSet<&[u8]> = [&c.root.data[..]].into_iter().collect();
    let pool: Vec<Box<[u8]>> = pool
        .into_iter()
        .filter(|h| !root.contains(&h[..]))
        .collect();
    let samples = disjoint_samples(pool, &a.count)?;
    for (s, out) in samples.iter().zip(&a.out) {
        write_handles(out, s)?;
        eprintln!("wrote {} handles to {}", s.len(), out.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip() {
        let b = vec![0u8, 1, 0xab, 0xff, 0x10];
        assert_eq!(to_hex(&b), "0001abff10");
        assert_eq!(from_hex("0001abff10").unwrap(), b);
        assert_eq!(from_hex("0001ABFF10").unwrap(), b);
        assert!(from_hex("abc").is_none());
        assert!(from_hex("zz").is_none());
    }

    #[test]
    fn samples_are_disjoint_spread_and_fixed() {
        let pool: Vec<Box<[u8]>> = (0u32..10_000).map(|i| i.to_be_bytes().into()).collect();
        let s = disjoint_samples(pool.clone(), &[100, 1000]).unwrap();
        assert_eq!((s[0].len(), s[1].len()), (100, 1000));
        let a: HashSet<_> = s[0].iter().collect();
        assert!(s[1].iter().all(|h| !a.contains(h)));
        // Spread: the small sample reaches both ends of the pool.
        let first = |v: &Vec<Box<[u8]>>| v.iter().map(|h| h[2]).min().unwrap();
        let last = |v: &Vec<Box<[u8]>>| v.iter().map(|h| h[2]).max().unwrap();
        assert!(
            first(&s[0]) < 5 && last(&s[0]) > 34,
            "{} {}",
            first(&s[0]),
            last(&s[0])
        );
        // Independent of the pool's order.
        let mut rev = pool.clone();
        rev.reverse();
        assert_eq!(disjoint_samples(rev, &[100, 1000]).unwrap(), s);
        assert!(disjoint_samples(pool, &[9_000, 1_001]).is_err());
    }

    #[test]
    fn handle_files_round_trip_and_are_checked() {
        let d = std::env::temp_dir().join(format!("rnfsd-bench-h-{}", std::process::id()));
        let hs: Vec<Box<[u8]>> = vec![vec![1u8, 2, 3].into(), vec![0xffu8; 28].into()];
        write_handles(&d, &hs).unwrap();
        let back = read_handles(&d).unwrap();
        assert_eq!(
            back,
            vec![NfsFh3::new(vec![1, 2, 3]), NfsFh3::new(vec![0xff; 28])]
        );
        std::fs::write(&d, "# c\n\n0102\nxyz\n").unwrap();
        assert!(read_handles(&d).unwrap_err().contains(":4: not hex"));
        std::fs::write(&d, "ab".repeat(NFS3_FHSIZE + 1)).unwrap();
        assert!(read_handles(&d).is_err());
        std::fs::write(&d, "# only a comment\n").unwrap();
        assert!(read_handles(&d).is_err());
        let _ = std::fs::remove_file(&d);
    }
}
