//! `prepare`: a tree of files made with local syscalls, for the traverse
//! and --handles mixes; the same tree whether made on one thread or many.

use std::path::Path;
use std::time::Duration;

/// The SVC_MAX_WAKING thread's rsync-like tree: 161,480 files in 10,841
/// directories (docs/lessons.md).
const SEED_FILES: usize = 161_480;
const SEED_DIRS: usize = 10_841;

/// Largest `prepare --file-size`.
const MAX_FILE_SIZE: usize = 16 << 20;

pub fn prepare(dir: &Path, files: usize, dirs: usize, file_size: usize) -> std::io::Result<()> {
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

/// The `prepare` command: `files` files in `dirs` directories (the rsync
/// tree's counts with `seed_size`), on one thread or on `threads`.
pub fn prepare_cmd(
    dir: &Path,
    files: usize,
    dirs: usize,
    seed_size: bool,
    file_size: usize,
    threads: Option<usize>,
) -> Result<(), String> {
    let (files, dirs) = if seed_size {
        (SEED_FILES, SEED_DIRS)
    } else {
        (files, dirs)
    };
    match threads {
        None => prepare(dir, files, dirs, file_size),
        Some(t) => prepare_parallel(dir, files, dirs, file_size, t),
    }
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

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
}
