//! Write errors reach the client (the durability issue, item 1): a
//! writeback error injected under the export never lets a COMMIT succeed
//! with the verifier of the WRITEs whose data was lost.
//!
//! Injection: the export is ext4 on a loop device whose image is a file on
//! a small tmpfs (a thin-provisioned volume). The image holds every block
//! but those of the file written, which is preallocated (its metadata on
//! the device); once the tmpfs is filled, only that file's data writes
//! fail (ENOSPC from the loop device), never a metadata write that would
//! abort the journal;
//! the filesystem itself stays healthy and later syncs succeed: exactly the
//! case where an error seen once is easy to lose.

use crate::common;

use common::blockdev::{drop_caches, unavailable, LoopFs};
use common::nfs::*;
use common::TestServer;
use rnfsd_client::nfs3::*;
use rnfsd_client::NfsClient;

const CHUNK: usize = 1 << 20;
const MIB: usize = 8;

/// One UNSTABLE WRITE of `len` bytes of `byte` at `offset`, which must be
/// written whole.
async fn write_at(nfs: &NfsClient, fh: &NfsFh3, offset: u64, len: usize, byte: u8) -> Write3ResOk {
    let r = ok(
        "WRITE UNSTABLE",
        nfs.write(&Write3Args {
            file: fh.clone(),
            offset,
            count: len as u32,
            stable: StableHow::Unstable,
            data: vec![byte; len],
        })
        .await,
    );
    assert_eq!(r.count as usize, len);
    r
}

/// UNSTABLE writes of `mib` MiB; returns the verifier they all carried.
async fn write_unstable(nfs: &NfsClient, fh: &NfsFh3, mib: usize) -> Verf3 {
    let mut verf = None;
    for i in 0..mib {
        let r = write_at(nfs, fh, (i * CHUNK) as u64, CHUNK, (i % 251) as u8).await;
        if let Some(v) = verf {
            assert_eq!(r.verf, v, "the verifier changed between writes");
        }
        verf = Some(r.verf);
    }
    verf.expect("wrote something")
}

/// Whether the file under `fs` holds exactly what `write_unstable` wrote,
/// read back from the device (the page cache dropped first): what a COMMIT
/// that answered OK with the writes' verifier promised.
fn data_on_disk(path: &std::path::Path, mib: usize) -> bool {
    drop_caches();
    let Ok(d) = std::fs::read(path) else {
        return false;
    };
    d.len() == mib * CHUNK
        && (0..mib).all(|i| {
            d[i * CHUNK..(i + 1) * CHUNK]
                .iter()
                .all(|&b| b == (i % 251) as u8)
        })
}

/// A COMMIT that answered OK with the verifier the WRITEs carried promised
/// their data: it must be on the device.
fn assert_not_lost(r: &Result<Verf3, Nfsstat3>, writes: Verf3, fs: &LoopFs) {
    assert!(
        !matches!(r, Ok(v) if *v == writes) || data_on_disk(&fs.mnt.join("export/data"), MIB),
        "COMMIT answered OK with the verifier of writes whose data was lost"
    );
}

async fn commit(nfs: &NfsClient, fh: &NfsFh3) -> Result<Verf3, Nfsstat3> {
    match nfs
        .commit(&Commit3Args {
            file: fh.clone(),
            offset: 0,
            count: 0,
        })
        .await
        .expect("COMMIT RPC")
    {
        NfsRes::Ok(ok) => Ok(ok.verf),
        NfsRes::Fail(s, _) => Err(s),
    }
}

/// Write-behind off: the data must still be in the page cache when the
/// volume fills, so the injected error meets a COMMIT's flush.
fn start(tag: &str) -> Option<(LoopFs, TestServer)> {
    start_with(tag, &["--write-behind-bytes", "0"])
}

/// The export on a thin volume with `data` preallocated; `extra` server
/// arguments.
fn start_with(tag: &str, extra: &[&str]) -> Option<(LoopFs, TestServer)> {
    let fs = thin_volume(tag)?;
    let mut args = vec!["--no-rpcbind"];
    args.extend_from_slice(extra);
    let srv = TestServer::start_with(&fs.mnt.join("export"), &args);
    Some((fs, srv))
}

/// A thin volume with `export/data` preallocated, or None (skipped).
fn thin_volume(tag: &str) -> Option<LoopFs> {
    if common::skip(tag, unavailable(&["fallocate", "filefrag"])) {
        return None;
    }
    let fs = LoopFs::thin(tag, 64, 80);
    fs.subdir("export");
    fs.preallocated("export/data", (MIB * CHUNK) as u64);
    Some(fs)
}

/// Client B's COMMIT sees the writeback error first; client A's COMMIT of
/// the same file must then fail or carry a new verifier, so A resends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_seen_by_another_commit_still_reaches_the_writer() {
    let Some((fs, srv)) = start("wberr-other") else {
        return;
    };
    bounded(async {
        let a = mount(&srv).await;
        let fh = lookup(&a.nfs, &a.root, "data").await;
        let v1 = write_unstable(&a.nfs, &fh, MIB).await;
        fs.exhaust();
        let b = mount(&srv).await;
        let rb = commit(&b.nfs, &fh).await;
        // The loop device passes its backing file's ENOSPC up: IO or NOSPC.
        assert!(
            matches!(rb, Err(Nfsstat3::Io | Nfsstat3::NoSpc)),
            "the injected error must fail the first COMMIT (else nothing was injected): {rb:?}"
        );
        let ra = commit(&a.nfs, &fh).await;
        assert_not_lost(&ra, v1, &fs);
        eprintln!("B's COMMIT: {rb:?}; A's COMMIT: {ra:?} (A's writes carried {v1:?})");
    })
    .await;
}

/// The server's counters, through its admin socket.
fn snapshot(srv: &TestServer) -> rnfsd_stats::Snapshot {
    let a = rnfsd::admin::query(&srv.state.path().join("admin.sock"), "snapshot")
        .expect("admin socket");
    rnfsd_stats::Snapshot::from_json(&a).expect("snapshot JSON")
}

/// Write-backs a commit thread waited for before its journal commit, over
/// all exports (`rnfsd_sync_writebacks_waited_total`).
fn writebacks_waited(srv: &TestServer) -> u64 {
    let snap = snapshot(srv);
    snap.exports.iter().map(|e| e.sync_writebacks_waited).sum()
}

/// While other clients' creates keep the journal commit thread busy, a
/// COMMIT starts its write-back and leaves the wait for it to that thread
/// (`rnfsd_fs::owed::Before`); the error that write-back meets must still
/// fail that COMMIT. Until it is seen on that path (a COMMIT that finds
/// nothing committing makes its own sync), the data is written again and
/// committed again, every COMMIT failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_reaches_a_commit_whose_write_back_the_commit_thread_waits_for() {
    let Some((fs, srv)) = start("wberr-owed") else {
        return;
    };
    bounded(async {
        let a = mount(&srv).await;
        let fh = lookup(&a.nfs, &a.root, "data").await;
        fs.exhaust();
        // First all of `MIB`, which takes whatever room was left: the loop
        // device reports a write that fitted only partly into the image as
        // done (it fails only the requests that found no room at all), and
        // the blocks it wrote take writes again.
        let v = write_unstable(&a.nfs, &fh, MIB).await;
        let r = commit(&a.nfs, &fh).await;
        assert_not_lost(&r, v, &fs);
        let load = create_load(&srv, 8).await;
        // Then the last MiB (where no room was left), at most
        // `owed_writeback_bytes` (1 MiB by default), whose wait the commit
        // thread may take; a byte of its own each time.
        let last = ((MIB - 1) * CHUNK) as u64;
        let mut seen = false;
        for attempt in 0..20u8 {
            let byte = 0x40 + attempt;
            let w = write_at(&a.nfs, &fh, last, CHUNK, byte).await;
            let before = writebacks_waited(&srv);
            let r = commit(&a.nfs, &fh).await;
            let owed = writebacks_waited(&srv) > before;
            eprintln!("attempt {attempt}: COMMIT {r:?}, on the commit thread's path: {owed}");
            if matches!(r, Ok(v) if v == w.verf) {
                drop_caches();
                let d = std::fs::read(fs.mnt.join("export/data")).expect("read back");
                assert!(
                    d[last as usize..].iter().all(|&b| b == byte),
                    "attempt {attempt}: COMMIT answered OK with the WRITE's verifier, its data lost"
                );
            }
            if owed {
                assert!(
                    matches!(r, Err(Nfsstat3::Io | Nfsstat3::NoSpc)),
                    "attempt {attempt}: the failed write-back must fail the COMMIT: {r:?}"
                );
                seen = true;
                break;
            }
        }
        load.stop().await;
        assert!(seen, "no COMMIT in 20 took the commit thread's path");
    })
    .await;
}

/// NFSv4.1: a compound whose COMMIT leaves its write-back to the commit
/// thread, then makes another change that owes a commit (SETATTR of
/// another file, which waits for the COMMIT's commit first): the failed
/// write-back fails the compound (NFS4ERR_IO), as it fails an NFSv3
/// COMMIT on that path. It must never answer the COMMIT with the
/// verifier of the WRITE whose data was lost (read before the failure
/// reset it), whatever the later change's commit did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_nfs4_compound_fails_when_an_earlier_operations_write_back_failed() {
    /// Compounds on the commit thread's path tried.
    const OWED_ATTEMPTS: usize = 3;
    use rnfsd_client::nfs4::SetAttrs4;
    use rnfsd_client::{Nfs4Client, Nfs4Config};
    use rnfsd_proto::nfs4::*;

    let Some((fs, srv)) = start_with("wberr-v4", &["--write-behind-bytes", "0"]) else {
        return;
    };
    std::fs::write(fs.mnt.join("export/other"), b"").expect("other");
    bounded(async {
        let a = mount(&srv).await;
        let fh = lookup(&a.nfs, &a.root, "data").await;
        let c = Nfs4Client::connect(srv.addr, &config(1), &Nfs4Config::default())
            .await
            .expect("NFSv4.1 session");
        let root = c
            .lookup_path(srv.export.to_str().unwrap())
            .await
            .expect("export root");
        let data4 = c.lookup_from(&root, "data").await.expect("data");
        let other = c.lookup_from(&root, "other").await.expect("other");
        fs.exhaust();
        // As in the NFSv3 test above: all of `MIB` first, which takes
        // whatever room was left.
        let v = write_unstable(&a.nfs, &fh, MIB).await;
        let r = commit(&a.nfs, &fh).await;
        assert_not_lost(&r, v, &fs);
        let load = create_load(&srv, 8).await;
        let last = ((MIB - 1) * CHUNK) as u64;
        let mut seen = 0;
        for attempt in 0..20u8 {
            let byte = 0x40 + attempt;
            // The WRITE over NFSv3 (no open needed): one server, one
            // write verifier.
            let w = write_at(&a.nfs, &fh, last, CHUNK, byte).await;
            let before = writebacks_waited(&srv);
            // One session throughout: the NFS4ERR_IO reply keeps
            // SEQUENCE's result, so the client's slot stays in step.
            let r = c
                .compound(&[
                    ArgOp::PutFh(PutFh4Args {
                        object: data4.clone(),
                    }),
                    ArgOp::Commit(Commit4Args {
                        offset: 0,
                        count: 0,
                    }),
                    ArgOp::PutFh(PutFh4Args {
                        object: other.clone(),
                    }),
                    ArgOp::SetAttr(Box::new(SetAttr4Args {
                        stateid: Stateid4::ANONYMOUS,
                        obj_attributes: SetAttrs4::mode(0o600 | u32::from(attempt % 2) << 2)
                            .to_fattr(),
                    })),
                ])
                .await
                .expect("COMPOUND");
            let owed = writebacks_waited(&srv) > before;
            let committed = match (r.status, r.results.get(2)) {
                (Nfsstat4::Ok, Some(ResOp::Commit(NfsRes4::Ok(v)))) => Some(v.0),
                _ => None,
            };
            eprintln!(
                "attempt {attempt}: compound {:?}, on the commit thread's path: {owed}",
                r.status
            );
            if committed == Some(w.verf.0) {
                drop_caches();
                let d = std::fs::read(fs.mnt.join("export/data")).expect("read back");
                assert!(
                    d[last as usize..].iter().all(|&b| b == byte),
                    "attempt {attempt}: COMMIT answered OK with the WRITE's verifier, its data lost"
                );
            }
            // A few of them: the SETATTR owes its commit only when
            // another is under way, which the load makes likely, not
            // sure (and the load's creates fill the small volume).
            if owed {
                assert!(
                    matches!(r.status, Nfsstat4::Io | Nfsstat4::NoSpc),
                    "attempt {attempt}: the failed write-back must fail the compound: {:?}",
                    r.results
                );
                // SEQUENCE's result first, the failed change last, as
                // the operations came.
                assert!(
                    matches!(r.results.first(), Some(ResOp::Sequence(NfsRes4::Ok(_)))),
                    "attempt {attempt}: {:?}",
                    r.results
                );
                let last = r.results.last().expect("a result");
                let want = [OP_SEQUENCE, OP_PUTFH, OP_COMMIT, OP_PUTFH, OP_SETATTR];
                assert_eq!(last.opnum(), want[r.results.len() - 1]);
                seen += 1;
                if seen == OWED_ATTEMPTS {
                    break;
                }
            }
        }
        load.stop().await;
        assert!(seen > 0, "no COMMIT in 20 took the commit thread's path");
    })
    .await;
}

/// The volume is full before the writes: write-behind (`write_behind_bytes`
/// 4 KiB) starts their writeback in the background and meets the error
/// first, seen by no COMMIT; the test waits until that writeback is done,
/// so the COMMIT has nothing left to write and learns of the error only
/// from the writer's error cursor. It must still fail or carry a new
/// verifier: starting writeback consumes no error (a write-behind that
/// waited for it through the writer would, and this test then fails).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_met_by_write_behind_still_reaches_the_commit() {
    let Some((fs, srv)) = start_with("wberr-behind", &["--write-behind-bytes", "4096"]) else {
        return;
    };
    bounded(async {
        let a = mount(&srv).await;
        let fh = lookup(&a.nfs, &a.root, "data").await;
        fs.exhaust();
        let v1 = write_unstable(&a.nfs, &fh, MIB).await;
        let behinds = || {
            let snap = snapshot(&srv);
            snap.exports.iter().map(|e| e.write_behinds).sum::<u64>()
        };
        let settle = |n: u64| async move {
            let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while behinds() < n && std::time::Instant::now() < end {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            assert!(behinds() >= n, "write-behind did not run");
        };
        settle(1).await;
        // One more WRITE of the same bytes, queued on its own: its
        // writeback covers whatever the earlier ones left dirty.
        let n = behinds();
        let last = (MIB - 1) % 251;
        let w = write_at(&a.nfs, &fh, ((MIB - 1) * CHUNK) as u64, 4096, last as u8).await;
        assert_eq!(w.verf, v1);
        settle(n + 1).await;
        // Wait (through a descriptor of the test's own, whose error cursor
        // is its own) for that writeback to end; start none.
        let local = std::fs::File::open(fs.mnt.join("export/data")).expect("open data");
        use std::os::fd::AsRawFd;
        // SAFETY: sync_file_range on a descriptor this test owns.
        let waited = unsafe {
            libc::sync_file_range(local.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WAIT_BEFORE)
        };
        eprintln!("waiting for the writeback: {waited}");
        let ra = commit(&a.nfs, &fh).await;
        assert!(
            !matches!(ra, Ok(v) if v == v1),
            "COMMIT answered OK with the writes' verifier after their writeback failed"
        );
        assert_not_lost(&ra, v1, &fs);
        eprintln!("COMMIT after write-behind met the error: {ra:?} (writes carried {v1:?})");
    })
    .await;
}

/// The writeback error happens while no COMMIT runs, and memory pressure
/// evicts what it can: the written file's descriptor is held until its data
/// is committed, so the error cannot go with an evicted inode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_is_not_lost_with_an_evicted_inode() {
    let Some((fs, srv)) = start("wberr-evict") else {
        return;
    };
    bounded(async {
        let a = mount(&srv).await;
        let fh = lookup(&a.nfs, &a.root, "data").await;
        let v1 = write_unstable(&a.nfs, &fh, MIB).await;
        fs.exhaust();
        // Writeback now, outside any fsync: the error is recorded on the
        // file's mapping and seen by nobody yet. Then evict what can go.
        common::blockdev::run("sync", &[]);
        drop_caches();
        let r = commit(&a.nfs, &fh).await;
        // OK with the writes' verifier is right only if the data made it
        // (writeback may have finished before the volume filled up).
        assert_not_lost(&r, v1, &fs);
        eprintln!("COMMIT after writeback failed and caches dropped: {r:?}");
    })
    .await;
}

/// A written file's descriptor is evicted from a one-entry open-file cache
/// by a write to another file before its data was committed; its
/// writeback then fails: the COMMIT still must not answer OK with the
/// verifier of the lost writes (the flush owed by the closed writer is
/// settled first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_of_an_evicted_writer_still_reaches_the_client() {
    // Every WRITE on a pool thread: on an event loop an insert into a full
    // cache is refused rather than evicting, and the writer meant to be
    // evicted would stay.
    let args = [
        "--write-behind-bytes",
        "0",
        "--open-file-cache-entries",
        "1",
        "--inline-write-max",
        "0",
    ];
    let Some((fs, srv)) = start_with("wberr-evicted", &args) else {
        return;
    };
    bounded(async {
        let a = mount(&srv).await;
        let fh = lookup(&a.nfs, &a.root, "data").await;
        // Made first: a CREATE syncs its file, which may evict (and so
        // flush) a writer before the volume is full.
        let (other, _) = create_file(&a.nfs, &a.root, "other").await;
        let v1 = write_unstable(&a.nfs, &fh, MIB).await;
        fs.exhaust();
        // Another file's writer takes the only slot: data's writer closes
        // with its data still in memory, and its flush fails.
        write_at(&a.nfs, &other, 0, 1, 1).await;
        let r = commit(&a.nfs, &fh).await;
        // Nothing started the data's writeback before the volume filled
        // (write-behind off, no sync since the writes): the flush owed by
        // the closed writer met the error.
        assert!(
            !matches!(r, Ok(v) if v == v1),
            "COMMIT answered OK with the writes' verifier: {r:?}"
        );
        assert_not_lost(&r, v1, &fs);
        eprintln!(
            "COMMIT after the writer was evicted and writeback failed: {r:?} (writes: {v1:?})"
        );
    })
    .await;
}

/// A written file's descriptor is evicted dirty; the background flush it
/// owes starts, its `syncfs` meets the writeback error, and before that
/// `syncfs` is over (held there by the test build's hook: the server
/// creates the file `RNFSD_TEST_FLUSH_HOLD` names and waits until it is
/// removed) the file's clean inode is evicted (`drop_caches`; one-entry
/// caches hold it no longer), so the error lives only in the superblock's
/// error sequence. A COMMIT that comes now finds nothing owed, and its own
/// fsync, through a descriptor opened afresh, succeeds: it must wait for
/// the running flush and fail or carry the verifier that flush's failure
/// reset, never OK with the verifier the WRITEs had. `load`: other
/// clients' creates keep the journal commit thread busy, so the COMMIT
/// owes its commit and the commit thread waits for the flush
/// (`rnfsd_fs::owed::Before`); else the COMMIT's own thread waits.
async fn commit_during_a_running_flush(tag: &str, load: bool) {
    let Some(fs) = thin_volume(tag) else {
        return;
    };
    let held = fs.dir.path().join("flush-held");
    let held_env = held.to_str().expect("UTF-8 path");
    // Every WRITE on a pool thread, where a cache at its bound evicts (an
    // event loop's insert is refused instead).
    let args = [
        "--no-rpcbind",
        "--no-root-squash",
        "--write-behind-bytes",
        "0",
        "--open-file-cache-entries",
        "1",
        "--object-cache-entries",
        "1",
        "--flush-delay-ms",
        "50",
        "--inline-write-max",
        "0",
    ];
    let srv = TestServer::start_env(
        &fs.mnt.join("export"),
        &args,
        &[("RNFSD_TEST_FLUSH_HOLD", held_env)],
    );
    bounded(async {
        let a = mount(&srv).await;
        let fh = lookup(&a.nfs, &a.root, "data").await;
        let (other, _) = create_file(&a.nfs, &a.root, "other").await;
        let v1 = write_unstable(&a.nfs, &fh, MIB).await;
        fs.exhaust();
        // Another file's writer and object take the only slots: the data's
        // writer closes with its data still in memory, and nothing pins
        // its inode.
        for i in 0..4 {
            write_at(&a.nfs, &other, i, 1, 1).await;
            getattr(&a.nfs, &other).await;
        }
        // The flush owed by that close ran its syncfs and is held.
        let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !held.exists() {
            assert!(
                std::time::Instant::now() < end,
                "no flush ran (a server built without the test hooks?)"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        drop_caches();
        // The scenario needs the inode gone with its error: a descriptor
        // opened afresh would see an error its inode still held.
        let fresh = std::fs::File::open(fs.mnt.join("export/data")).expect("open data");
        assert!(
            fresh.sync_all().is_ok(),
            "the data's inode outlived drop_caches (something holds it): nothing to test"
        );
        drop(fresh);
        let load = if load {
            // Under way once the commit thread answers creates.
            let parked = || {
                let snap = snapshot(&srv);
                snap.exports.iter().map(|e| e.sync_requests_parked).sum::<u64>()
            };
            let start = parked();
            let l = create_load(&srv, 8).await;
            while parked() < start + 50 {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            Some(l)
        } else {
            None
        };
        let before = writebacks_waited(&srv);
        let r = {
            let c = commit(&a.nfs, &fh);
            tokio::pin!(c);
            // A COMMIT answered while the flush is held did not wait for it.
            let early = tokio::time::timeout(std::time::Duration::from_secs(2), &mut c).await;
            std::fs::remove_file(&held).expect("release the flush");
            match early {
                Ok(r) => {
                    eprintln!("COMMIT answered during the flush: {r:?}");
                    r
                }
                Err(_) => c.await,
            }
        };
        let owed = writebacks_waited(&srv) > before;
        if let Some(l) = load {
            l.stop().await;
        }
        eprintln!("COMMIT during a failing flush: {r:?} (writes: {v1:?}); waited for by the commit thread: {owed}");
        assert!(
            !matches!(r, Ok(v) if v == v1),
            "COMMIT answered OK with the writes' verifier while the flush that failed ran"
        );
        assert_not_lost(&r, v1, &fs);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_waits_for_a_flush_already_running() {
    commit_during_a_running_flush("wberr-running", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_thread_waits_for_a_flush_already_running() {
    commit_during_a_running_flush("wberr-running-owed", true).await;
}
