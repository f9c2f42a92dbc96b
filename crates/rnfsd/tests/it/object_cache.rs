//! End to end: the object layer's bounds hold in the real server under a
//! concurrent load of many connections over many more objects than the
//! caches may hold. Checked from inside (the caches' own counters, through
//! the admin socket) and from outside (the process's descriptors in
//! /proc/PID/fd and its resident memory), sampled while the load runs.

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::nfs::*;
use common::{TempDir, TestServer};
use rnfsd_client::nfs3::*;
use rnfsd_client::NfsClient;
use rnfsd_stats::Snapshot;

const CACHE_FDS: u64 = 48;
const THREADS: u64 = 8;
const CONNS: usize = 24;
const DIRS: usize = 10;
const FILES: usize = 30;

fn snapshot(srv: &TestServer) -> Snapshot {
    let a = rnfsd::admin::query(&srv.state.path().join("admin.sock"), "snapshot")
        .expect("admin socket");
    Snapshot::from_json(&a).expect("snapshot JSON")
}

/// The call succeeded at the RPC level and answered NFS3_OK.
fn good<T, F>(r: Result<NfsRes<T, F>, rnfsd_client::ClientError>) -> bool {
    matches!(r.map(rnfsd_client::check), Ok(Ok(_)))
}

fn fd_count(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count() as u64)
        .unwrap_or(0)
}

fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// What one sample saw: descriptors, RSS, and the caches' own view.
#[derive(Debug, Default, Clone, Copy)]
struct Peak {
    fds: u64,
    rss_kib: u64,
    cached_fds: u64,
    over_capacity: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounds_hold_under_load_from_inside_and_outside() {
    bounded(async {
        let dir = TempDir::new("objcache");
        for d in 0..DIRS {
            let p = dir.path().join(format!("d{d}"));
            std::fs::create_dir(&p).unwrap();
            for f in 0..FILES {
                std::fs::write(p.join(format!("f{f}")), vec![b'x'; 4096]).unwrap();
            }
        }
        let fds = CACHE_FDS.to_string();
        let threads = THREADS.to_string();
        let srv = TestServer::start_with(
            dir.path(),
            &[
                "--no-rpcbind",
                "--threads",
                &threads,
                "--cache-fds",
                &fds,
                "--object-cache-entries",
                "32",
                "--open-file-cache-entries",
                "16",
                "--path-cache-entries",
                "64",
            ],
        );
        let pid = srv.pid().expect("running");
        let s = mount(&srv).await;
        // Every object's handle, through the server (READDIRPLUS).
        let mut items: Vec<(NfsFh3, NfsFh3, Vec<u8>)> = Vec::new();
        for e in s.nfs.readdirplus_all(&s.root).await.unwrap() {
            if e.name.starts_with(b"d") {
                let dfh = e.name_handle.clone().unwrap();
                for f in s.nfs.readdirplus_all(&dfh).await.unwrap() {
                    if f.name.starts_with(b"f") {
                        items.push((dfh.clone(), f.name_handle.unwrap(), f.name));
                    }
                }
            }
        }
        assert_eq!(items.len(), DIRS * FILES);
        let items = Arc::new(items);
        let base_fds = fd_count(pid);
        let base_rss = rss_kib(pid);

        let stop = Arc::new(AtomicBool::new(false));
        // The load runs 3 s and until the sampler has seen it 25 times (a
        // loaded machine starves the sampler), at most 30 s.
        let sampled = Arc::new(AtomicU32::new(0));
        let sampler = {
            let stop = stop.clone();
            let sampled = sampled.clone();
            let srv_state = srv.state.path().to_path_buf();
            std::thread::spawn(move || {
                let mut peak = Peak::default();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    peak.fds = peak.fds.max(fd_count(pid));
                    peak.rss_kib = peak.rss_kib.max(rss_kib(pid));
                    if let Ok(a) = rnfsd::admin::query(&srv_state.join("admin.sock"), "snapshot") {
                        let snap = Snapshot::from_json(&a).expect("snapshot JSON");
                        for e in &snap.exports {
                            peak.cached_fds = peak.cached_fds.max(e.fds_cached);
                            for c in &e.caches {
                                peak.over_capacity += u64::from(c.entries > c.capacity);
                            }
                        }
                    }
                    n += 1;
                    sampled.store(n, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(10));
                }
                (peak, n)
            })
        };

        let mut tasks = Vec::new();
        for c in 0..CONNS {
            let client = connect(&srv).await;
            let nfs = NfsClient::new(client);
            let items = items.clone();
            let sampled = sampled.clone();
            tasks.push(tokio::spawn(async move {
                let start = Instant::now();
                let (end, cap) = (
                    start + Duration::from_secs(3),
                    start + Duration::from_secs(30),
                );
                let mut i = c * 7919;
                let mut calls = 0u64;
                let more = || {
                    let now = Instant::now();
                    now < cap && (now < end || sampled.load(Ordering::Relaxed) < 25)
                };
                while more() {
                    let (d, f, name) = &items[i % items.len()];
                    let (file, offset) = (f.clone(), 0);
                    let ok = match i % 6 {
                        0 => nfs.getattr_ok(f).await.is_ok(),
                        1 => good(
                            nfs.access(&Access3Args {
                                object: file,
                                access: 0x3f,
                            })
                            .await,
                        ),
                        2 => good(
                            nfs.lookup(&Lookup3Args {
                                what: Diropargs3 {
                                    dir: d.clone(),
                                    name: name.clone(),
                                },
                            })
                            .await,
                        ),
                        3 => good(
                            nfs.read(&Read3Args {
                                file,
                                offset,
                                count: 4096,
                            })
                            .await,
                        ),
                        4 => good(
                            nfs.write(&Write3Args {
                                file,
                                offset,
                                count: 512,
                                stable: StableHow::Unstable,
                                data: vec![b'y'; 512],
                            })
                            .await,
                        ),
                        _ => good(
                            nfs.commit(&Commit3Args {
                                file,
                                offset,
                                count: 0,
                            })
                            .await,
                        ),
                    };
                    assert!(ok, "call {} failed", i % 6);
                    calls += 1;
                    i = i.wrapping_mul(31).wrapping_add(17);
                }
                calls
            }));
        }
        let mut calls = 0;
        for t in tasks {
            calls += t.await.unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        let (peak, samples) = sampler.join().unwrap();
        assert!(samples > 20, "sampled only {samples} times");
        assert!(calls > 1000, "only {calls} calls");

        // Inside: the budget and every cache's bound.
        assert!(
            peak.cached_fds <= CACHE_FDS,
            "{} descriptors cached, bound {CACHE_FDS}",
            peak.cached_fds
        );
        assert_eq!(peak.over_capacity, 0, "a cache held more than its capacity");
        // Outside: whatever the process holds beyond its idle set is the
        // caches, the connections and a few per call.
        let allowed = base_fds + CACHE_FDS + CONNS as u64 + 4 * THREADS + 16;
        assert!(
            peak.fds <= allowed,
            "the server held {} descriptors (idle {base_fds}, allowed {allowed})",
            peak.fds
        );
        assert!(
            peak.rss_kib <= base_rss + 64 * 1024,
            "RSS grew from {base_rss} KiB to {} KiB",
            peak.rss_kib
        );
        // The bounds were reached, and the caches worked.
        let snap = snapshot(&srv);
        let e = &snap.exports[0];
        let objects = e.caches.iter().find(|c| c.name == "objects").unwrap();
        let files = e.caches.iter().find(|c| c.name == "files").unwrap();
        assert!(objects.hits > 0 && files.hits > 0, "{e:?}");
        assert!(
            objects.evicted_inline
                + objects.evicted_reclaim
                + files.evicted_inline
                + files.evicted_reclaim
                > 0,
            "300 objects over 32+16 entries must evict: {e:?}"
        );
        eprintln!(
            "{calls} calls; peak: {} fds (idle {base_fds}), RSS {} KiB (idle {base_rss}), \
             {} cached fds; objects hit {:.0}%, files hit {:.0}%",
            peak.fds,
            peak.rss_kib,
            peak.cached_fds,
            100.0 * objects.hit_rate(),
            100.0 * files.hit_rate()
        );
    })
    .await;
}

/// A working set larger than the descriptor budget, with entry bounds that
/// are not reached: the budget binds first, and admission must notice it.
/// Without that, every miss was inserted and the reclaimer evicted an entry
/// per miss (an insert, an eviction and a close for no hit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_set_beyond_the_descriptor_budget_does_not_churn_the_caches() {
    const N: usize = 1000;
    const CALLS: usize = 4000;
    bounded(async {
        let dir = TempDir::new("objchurn");
        for f in 0..N {
            std::fs::write(dir.path().join(format!("f{f}")), b"x").unwrap();
        }
        let srv = TestServer::start_with(
            dir.path(),
            &[
                "--no-rpcbind",
                "--cache-fds",
                "128",
                "--object-cache-entries",
                "256",
                "--open-file-cache-entries",
                "256",
            ],
        );
        let s = mount(&srv).await;
        let fhs: Vec<NfsFh3> = s
            .nfs
            .readdirplus_all(&s.root)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.name.starts_with(b"f"))
            .filter_map(|e| e.name_handle)
            .collect();
        assert_eq!(fhs.len(), N);
        let objects = |snap: &Snapshot| {
            let e = &snap.exports[0];
            e.caches
                .iter()
                .find(|c| c.name == "objects")
                .unwrap()
                .clone()
        };
        let before = objects(&snapshot(&srv));
        let mut i = 1usize;
        for _ in 0..CALLS {
            i = (i * 1_103_515_245 + 12_345) % (1 << 31);
            s.nfs.getattr_ok(&fhs[i % N]).await.expect("GETATTR");
        }
        let after = objects(&snapshot(&srv));
        let inserts = after.inserts - before.inserts;
        eprintln!(
            "{CALLS} GETATTRs over {N} files: {inserts} inserts, {} hits, budget 128",
            after.hits - before.hits
        );
        // About one miss in four is a second miss within the doorkeeper's
        // window; churning, nearly every call inserted.
        assert!(
            inserts < CALLS as u64 / 2,
            "{inserts} inserts for {CALLS} calls over {N} files: the caches churn"
        );
    })
    .await;
}

/// Records sent from an event loop to a pool thread after all, and the
/// handle cache's misses, so far.
fn deferred_and_misses(srv: &TestServer) -> (u64, u64) {
    let snap = snapshot(srv);
    let deferred = snap
        .transports
        .iter()
        .map(|t| t.connections.records_deferred)
        .sum();
    let misses = snap.exports[0]
        .caches
        .iter()
        .find(|c| c.name == "objects")
        .map_or(0, |c| c.misses);
    (deferred, misses)
}

/// Skips (saying why) unless kernel handles can be used: a path handle's
/// miss may walk directories and always goes to a pool.
fn skip_without_kernel_handles(what: &str) -> bool {
    // SAFETY: geteuid cannot fail.
    let why = (unsafe { libc::geteuid() } != 0).then(|| {
        "kernel handles need CAP_DAC_READ_SEARCH; a path handle's miss may \
         walk directories and always goes to a pool"
            .to_string()
    });
    common::skip(what, why)
}

/// A directory "d" of `n` files holding `content` (made, or rewritten).
fn files_in_d(dir: &TempDir, n: usize, content: &[u8]) -> std::path::PathBuf {
    let sub = dir.path().join("d");
    std::fs::create_dir_all(&sub).unwrap();
    for f in 0..n {
        std::fs::write(sub.join(format!("f{f}")), content).unwrap();
    }
    sub
}

/// The server on `dir` with `args`, restarted (its caches empty, the
/// kernel still holding the inodes) after it gave out the handles of
/// `dir/d`'s files, returned with their names.
async fn cold_server(dir: &TempDir, args: &[&str]) -> (TestServer, Vec<(Vec<u8>, NfsFh3)>) {
    let mut srv = TestServer::start_with(dir.path(), args);
    let files = {
        let s = mount(&srv).await;
        let d = s
            .nfs
            .readdirplus_all(&s.root)
            .await
            .unwrap()
            .into_iter()
            .find(|e| e.name == b"d")
            .and_then(|e| e.name_handle)
            .unwrap();
        s.nfs
            .readdirplus_all(&d)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.name.starts_with(b"f"))
            .map(|e| (e.name, e.name_handle.unwrap()))
            .collect()
    };
    srv.restart();
    (srv, files)
}

/// `inline_misses`: a GETATTR whose handle the server has never seen (a
/// restart emptied its caches; the kernel still holds the inodes) is
/// answered on the event loop, no pool thread woken; with
/// `--no-inline-misses` every one of them goes to a pool thread. N is well
/// past the descriptor table a started process has (256): the server grows
/// its table up front, since a growth on a loop sleeps (an RCU grace
/// period) and quiets its speculation for 10 ms, about 100 calls here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handle_misses_are_opened_on_the_loop_unless_turned_off() {
    if skip_without_kernel_handles("inline handle misses") {
        return;
    }
    const N: usize = 1200;
    bounded(async {
        let dir = TempDir::new("inlinemiss");
        files_in_d(&dir, N, b"x");
        for on in [true, false] {
            let args: &[&str] = if on {
                &["--no-rpcbind"]
            } else {
                &["--no-rpcbind", "--no-inline-misses"]
            };
            let (srv, files) = cold_server(&dir, args).await;
            assert_eq!(files.len(), N);
            let s = mount(&srv).await;
            let (d0, m0) = deferred_and_misses(&srv);
            for (_, fh) in &files {
                let a = s.nfs.getattr_ok(fh).await.expect("GETATTR");
                assert_eq!(a.size, 1);
            }
            let (d1, m1) = deferred_and_misses(&srv);
            let (deferred, misses) = (d1 - d0, m1 - m0);
            assert!(misses >= N as u64, "{misses} misses for {N} cold handles");
            if on {
                assert!(
                    deferred <= N as u64 / 10,
                    "{deferred} of {N} cold GETATTRs went to a pool thread"
                );
            } else {
                assert!(
                    deferred >= N as u64 * 9 / 10,
                    "only {deferred} of {N} cold GETATTRs went to a pool thread"
                );
            }
            eprintln!("inline_misses {on}: {deferred} of {N} deferred, {misses} misses");
        }
    })
    .await;
}

/// Records answered on an event loop, and sent from one to a pool thread
/// after all, so far.
fn inline_and_deferred(srv: &TestServer) -> (u64, u64) {
    let snap = snapshot(srv);
    let conns = || snap.transports.iter().map(|t| &t.connections);
    (
        conns().map(|c| c.records_inline).sum(),
        conns().map(|c| c.records_deferred).sum(),
    )
}

/// `inline_write_alone_max`: a 512 KiB UNSTABLE WRITE (above
/// `inline_write_max`) sent one at a time on one connection, so nothing
/// else of its loop is ready, is offered to the event loop (written there,
/// or given up when a write that slept has quieted the loop: counted
/// either way); with `--inline-write-alone-max 0` it goes straight to a
/// pool. Every byte lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_unstable_writes_run_on_the_loop_when_alone() {
    if skip_without_kernel_handles("inline writes") {
        return;
    }
    const N: usize = 12;
    const N64: u64 = N as u64;
    bounded(async {
        let dir = TempDir::new("alonewrite");
        let sub = dir.path().join("d");
        for (how, extra) in [("alone", None), ("off", Some("--inline-write-alone-max=0"))] {
            let mut args = vec!["--no-rpcbind"];
            args.extend(extra);
            files_in_d(&dir, N, b"");
            let (srv, files) = cold_server(&dir, &args).await;
            let s = mount(&srv).await;
            let content = |i: usize| -> Vec<u8> {
                (0..512 << 10)
                    .map(|j: usize| (j.wrapping_mul(7) ^ i) as u8)
                    .collect()
            };
            let (i0, d0) = inline_and_deferred(&srv);
            // One WRITE of 512 KiB per file (the client's default is less).
            let big = s.nfs.with_io_size(1 << 20, 1 << 20);
            for (i, (_, fh)) in files.iter().enumerate() {
                big.write_at(fh, 0, &content(i), StableHow::Unstable)
                    .await
                    .expect("WRITE");
            }
            let (i1, d1) = inline_and_deferred(&srv);
            let (inline, deferred) = (i1 - i0, d1 - d0);
            if how == "alone" {
                assert!(
                    inline + deferred >= N64 - 1,
                    "{inline} of {N} large WRITEs sent one at a time ran on the loop, \
                     {deferred} were given up there"
                );
            } else {
                assert_eq!(
                    (inline, deferred),
                    (0, 0),
                    "large WRITEs were offered to the loop with the limit 0"
                );
            }
            eprintln!("large writes {how}: {inline} on the loop, {deferred} given up there");
            for (i, (name, fh)) in files.iter().enumerate() {
                commit(&s.nfs, fh).await;
                let got = std::fs::read(sub.join(String::from_utf8_lossy(name).as_ref())).unwrap();
                assert!(
                    got == content(i),
                    "{how}: file {i} does not hold what was written"
                );
            }
        }
    })
    .await;
}

/// Write-behind of writes made on the loop: a 512 KiB UNSTABLE WRITE sent
/// alone crosses `write_behind_bytes` (256 KiB here), and the loop that
/// wrote it starts the file's writeback itself once the reply is sent
/// (counted as on a loop), waking no thread; with the writes sent to a
/// pool (`--inline-write-alone-max=0`) the write-behind thread starts
/// every one. Every byte lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_behind_of_loop_writes_is_started_by_the_loop() {
    if skip_without_kernel_handles("inline writes") {
        return;
    }
    const N: u64 = 8;
    const LEN: usize = 512 << 10;
    bounded(async {
        let dir = TempDir::new("loopbehind");
        let sub = dir.path().join("d");
        // Whether writes run on the loop at all is the loop's own choice
        // (it gives them to the pool while it is busy or lately slept): on
        // a loaded machine the loop case may see none, and is tried again
        // (a few times at most).
        let mut tries = 0;
        for (how, extra) in [
            ("loop", None),
            ("loop", None),
            ("loop", None),
            ("pool", Some("--inline-write-alone-max=0")),
        ] {
            if how == "loop" && tries == usize::MAX {
                continue;
            }
            let mut args = vec!["--no-rpcbind", "--write-behind-bytes=262144"];
            args.extend(extra);
            files_in_d(&dir, 1, b"");
            let (srv, files) = cold_server(&dir, &args).await;
            let s = mount(&srv).await;
            let (name, fh) = &files[0];
            let behinds = || {
                let snap = snapshot(&srv);
                let e = snap.exports.iter();
                e.fold((0, 0), |(a, b), e| {
                    (a + e.write_behinds, b + e.write_behinds_on_loop)
                })
            };
            let content: Vec<u8> = (0..N as usize * LEN).map(|j| (j % 253) as u8).collect();
            let (_, d0) = inline_and_deferred(&srv);
            let big = s.nfs.with_io_size(1 << 20, 1 << 20);
            for (i, c) in content.chunks(LEN).enumerate() {
                big.write_at(fh, (i * LEN) as u64, c, StableHow::Unstable)
                    .await
                    .expect("WRITE");
            }
            // A crossing while the file's last write-behind is still queued
            // is not queued again: at least one, at most one per WRITE.
            let end = Instant::now() + Duration::from_secs(10);
            while behinds().0 == 0 && Instant::now() < end {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let (all, on_loop) = behinds();
            let (_, d1) = inline_and_deferred(&srv);
            let gave_up = d1 - d0;
            eprintln!(
                "write-behind, writes on the {how}: {all} started, {on_loop} by the loop, \
                 {gave_up} writes given up on the loop"
            );
            assert!(
                (1..=N).contains(&all),
                "{how}: {all} write-behinds for {N} WRITEs"
            );
            if how == "loop" {
                tries += 1;
                // A loop whose step slept is quiet for a while: its writes
                // are given up there (counted) and its jobs go to the thread.
                let seen = on_loop > 0 || gave_up > 0;
                assert!(
                    seen || tries < 3,
                    "no write-behind started by the loop, none of its writes given up"
                );
                if seen {
                    // Done with the loop case (after this try's checks).
                    tries = usize::MAX;
                }
            } else {
                assert_eq!(
                    on_loop, 0,
                    "write-behind on a loop of writes made in a pool"
                );
            }
            commit(&s.nfs, fh).await;
            let got = std::fs::read(sub.join(String::from_utf8_lossy(name).as_ref())).unwrap();
            assert!(
                got == content,
                "{how}: the file does not hold what was written"
            );
        }
    })
    .await;
}

/// `inline_write_max`: UNSTABLE WRITEs to files the server has never
/// opened (a restart emptied its caches) are written on the event loop,
/// the writer opened there, no pool thread woken. With
/// `--no-inline-misses` the loop may not open the writer: each WRITE gives
/// up there and runs in a pool, and the reply cache must not keep the
/// attempt's reply (the pool's run would meet it and answer with it). With
/// `--no-inline-writes` they go straight to a pool. Every byte lands, and a
/// COMMIT's verifier matches the WRITEs'.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unstable_writes_run_on_the_loop_unless_turned_off() {
    if skip_without_kernel_handles("inline writes") {
        return;
    }
    const N: usize = 400;
    const N64: u64 = N as u64;
    bounded(async {
        let dir = TempDir::new("inlinewrite");
        let sub = dir.path().join("d");
        for (how, extra) in [
            ("on the loop", None),
            ("given up", Some("--no-inline-misses")),
            ("off", Some("--no-inline-writes")),
        ] {
            let mut args = vec!["--no-rpcbind"];
            args.extend(extra);
            // Each configuration writes into empty files.
            files_in_d(&dir, N, b"");
            let (srv, files) = cold_server(&dir, &args).await;
            assert_eq!(files.len(), N);
            let s = mount(&srv).await;
            let content = |name: &[u8]| format!("{how}:{}", String::from_utf8_lossy(name));
            let (i0, d0) = inline_and_deferred(&srv);
            let mut verfs = Vec::new();
            for (name, fh) in &files {
                let w = s
                    .nfs
                    .write_at(fh, 0, content(name).as_bytes(), StableHow::Unstable)
                    .await
                    .expect("WRITE");
                verfs.push(w.verf);
            }
            let (i1, d1) = inline_and_deferred(&srv);
            let (inline, deferred) = (i1 - i0, d1 - d0);
            match how {
                "on the loop" => assert!(
                    inline >= N64 && deferred <= N64 / 10,
                    "{inline} answered on the loop, {deferred} of {N} cold UNSTABLE WRITEs \
                     went to a pool thread"
                ),
                "given up" => assert!(
                    deferred >= N64 * 9 / 10,
                    "only {deferred} of {N} UNSTABLE WRITEs went to a pool thread"
                ),
                _ => assert!(
                    inline < N64 / 10 && deferred == 0,
                    "{inline} answered on the loop, {deferred} given up there"
                ),
            }
            for ((name, fh), verf) in files.iter().zip(&verfs) {
                let c = commit(&s.nfs, fh).await;
                assert_eq!(&c.verf, verf, "COMMIT's verifier against the WRITE's");
                let got = std::fs::read(sub.join(String::from_utf8_lossy(name).as_ref())).unwrap();
                assert_eq!(got, content(name).as_bytes());
            }
            eprintln!("inline writes {how}: {inline} on the loop, {deferred} of {N} deferred");
        }
    })
    .await;
}

/// `inline_changes`: on an `async` export CREATE, RENAME and REMOVE are
/// offered to the event loop (made there, or given up when a change that
/// slept has quieted the loop: counted either way); with
/// `--no-inline-changes`, and on a `sync` export (the default), none is.
/// Every change lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_namespace_changes_run_on_the_loop() {
    const N: usize = 40;
    bounded(async {
        for (how, args) in [
            ("async", &["--no-rpcbind", "--async"][..]),
            (
                "off",
                &["--no-rpcbind", "--async", "--no-inline-changes"][..],
            ),
            ("sync", &["--no-rpcbind"][..]),
        ] {
            let dir = TempDir::new("inlinechange");
            let srv = TestServer::start_with(dir.path(), args);
            let s = mount(&srv).await;
            let (i0, d0) = inline_and_deferred(&srv);
            for i in 0..N {
                let (f, g) = (format!("f{i}"), format!("g{i}"));
                ok("CREATE", create_res(&s.nfs, &s.root, &f).await);
                let moved = s
                    .nfs
                    .rename(&Rename3Args {
                        from: dirop(&s.root, &f),
                        to: dirop(&s.root, &g),
                    })
                    .await;
                ok("RENAME", moved);
                if i % 2 == 0 {
                    ok("REMOVE", remove_res(&s.nfs, &s.root, &g).await);
                }
            }
            let (i1, d1) = inline_and_deferred(&srv);
            let (inline, deferred) = (i1 - i0, d1 - d0);
            let calls = (N * 5 / 2) as u64;
            if how == "async" {
                assert_eq!(
                    inline + deferred,
                    calls,
                    "{inline} changes ran on the loop, {deferred} were given up there"
                );
                assert!(inline > 0, "no change ran on the loop");
            } else {
                assert_eq!(
                    (inline, deferred),
                    (0, 0),
                    "{how}: changes were offered to the loop"
                );
            }
            eprintln!("changes {how}: {inline} on the loop, {deferred} given up there");
            for i in 0..N {
                let there = |n: String| dir.path().join(n).exists();
                assert!(!there(format!("f{i}")), "{how}: f{i} not renamed");
                assert_eq!(there(format!("g{i}")), i % 2 == 1, "{how}: g{i}");
            }
        }
    })
    .await;
}
