//! On a `sync` export every namespace change and SETATTR is durable before
//! its reply (RFC 1813 §4.8). Where one journal commit covers it (ext4 with
//! a journal, XFS), the reply waits for that commit without a thread
//! (`rnfsd_fs::owed`): the export's commit threads send it once the commit
//! is done; so do a COMMIT's and a stable WRITE's, once the data is
//! written back. Over TCP against the real server, on loop devices.
//! (That the
//! replies only leave after their commit is the power-cut test's to prove:
//! `crash.rs`.)

use crate::common;

use common::blockdev::{run, unavailable, LoopFs};
use common::nfs::*;
use common::TestServer;
use rnfsd_client::nfs3::*;
use rnfsd_stats::Snapshot;

fn snapshot(srv: &TestServer) -> Snapshot {
    let a = rnfsd::admin::query(&srv.state.path().join("admin.sock"), "snapshot")
        .expect("admin socket");
    Snapshot::from_json(&a).expect("snapshot JSON")
}

/// (durability requests, of them parked, syncs run, of them led by a
/// call's own thread) over all exports.
fn sync_counts(srv: &TestServer) -> (u64, u64, u64, u64) {
    let s = snapshot(srv);
    s.exports.iter().fold((0, 0, 0, 0), |(r, p, n, l), e| {
        (
            r + e.sync_requests,
            p + e.sync_requests_parked,
            n + e.syncs,
            l + e.syncs_led,
        )
    })
}

const STREAMS: usize = 8;
const ROUNDS: usize = 12;
/// Changes per round of one stream: CREATE, SETATTR, RENAME, MKDIR, RMDIR,
/// and a REMOVE every other round.
fn changes() -> u64 {
    (STREAMS * (ROUNDS * 5 + ROUNDS / 2)) as u64
}

/// The /proc task directories of the server's threads whose name starts
/// with `prefix`.
fn threads_named(srv: &TestServer, prefix: &str) -> Vec<std::path::PathBuf> {
    let pid = srv.pid().expect("server pid");
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("/proc/PID/task")
        .flatten()
        .map(|t| t.path())
        .filter(|t| std::fs::read_to_string(t.join("comm")).is_ok_and(|c| c.starts_with(prefix)))
        .collect()
}

/// The scheduling policies (field 41 of /proc/PID/task/TID/stat: 0
/// SCHED_OTHER, 3 SCHED_BATCH) of the server's threads named `prefix`*.
fn policies(srv: &TestServer, prefix: &str) -> Vec<u32> {
    threads_named(srv, prefix)
        .iter()
        .filter_map(|t| {
            let s = std::fs::read_to_string(t.join("stat")).ok()?;
            let rest = &s[s.rfind(')')? + 2..];
            rest.split(' ').nth(38)?.parse().ok()
        })
        .collect()
}

/// Whether the server's threads named `prefix`* come to all run under
/// `policy` within 10 s (a thread sets its own when it starts, so one just
/// started may not have yet); the last policies seen.
fn all_under(srv: &TestServer, prefix: &str, policy: u32) -> (bool, Vec<u32>) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let p = policies(srv, prefix);
        if !p.is_empty() && p.iter().all(|&x| x == policy) {
            return (true, p);
        }
        if std::time::Instant::now() > end {
            return (false, p);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `threads`: `journal_commit_threads`, None for the default (1).
async fn changes_answered_after_shared_commits(fs: &LoopFs, how: &str, threads: Option<usize>) {
    let export = fs.subdir("export");
    let n = threads.map(|n| n.to_string());
    let mut args = vec!["--no-rpcbind"];
    if let Some(n) = &n {
        args.extend(["--journal-commit-threads", n]);
    }
    let srv = TestServer::start_with(&export, &args);
    // The export's journal gets the commit threads it was given (started
    // beside the server's start: on a loaded machine after it answers).
    let want = threads.unwrap_or(1);
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut got = threads_named(&srv, "rnfsd-journal").len();
    while got != want && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(20));
        got = threads_named(&srv, "rnfsd-journal").len();
    }
    assert_eq!(got, want, "{how}: journal commit threads");
    // Threads that wait for stable storage do not preempt the loops
    // (`sync_sched_batch`, default true): SCHED_BATCH.
    for group in ["rnfsd-journal", "rnfsd-sync"] {
        let (ok, p) = all_under(&srv, group, 3);
        assert!(
            ok,
            "{how}: {group} threads' policies {p:?}, not all SCHED_BATCH"
        );
    }
    let s = mount(&srv).await;
    let c = connect_n(&srv, 4).await;
    let nfs = rnfsd_client::NfsClient::new(c);
    let (r0, p0, n0, l0) = sync_counts(&srv);
    let mut tasks = Vec::new();
    for t in 0..STREAMS {
        let (nfs, root) = (nfs.clone(), s.root.clone());
        tasks.push(tokio::spawn(async move {
            for k in 0..ROUNDS {
                let (f, g, d) = (
                    format!("f{t}-{k}"),
                    format!("g{t}-{k}"),
                    format!("d{t}-{k}"),
                );
                let fh = ok("CREATE", create_res(&nfs, &root, &f).await)
                    .obj
                    .expect("CREATE returns a handle");
                ok(
                    "SETATTR",
                    setattr_res(&nfs, &fh, sattr_mode(0o600), SattrGuard3::default()).await,
                );
                ok(
                    "RENAME",
                    nfs.rename(&Rename3Args {
                        from: dirop(&root, &f),
                        to: dirop(&root, &g),
                    })
                    .await,
                );
                ok(
                    "MKDIR",
                    nfs.mkdir(&Mkdir3Args {
                        where_: dirop(&root, &d),
                        attributes: sattr_mode(0o755),
                    })
                    .await,
                );
                ok("RMDIR", rmdir_res(&nfs, &root, &d).await);
                if k % 2 == 0 {
                    ok("REMOVE", remove_res(&nfs, &root, &g).await);
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("stream");
    }
    let (r1, p1, n1, l1) = sync_counts(&srv);
    let (requests, parked, syncs, led) = (r1 - r0, p1 - p0, n1 - n0, l1 - l0);
    eprintln!(
        "{how}: {} changes, {requests} durability requests, {parked} parked, {led} led, {syncs} commits",
        changes()
    );
    // Every change asked for one commit: owed to the commit threads, or
    // made by its own thread when nothing else committed. Under 8 streams
    // most owe theirs.
    assert_eq!(requests, changes(), "{how}: durability requests");
    assert_eq!(parked + led, requests, "{how}: parked or led");
    assert!(
        parked > requests / 2,
        "{how}: {parked} of {requests} parked"
    );
    // Calls that arrived together shared a commit.
    assert!(
        syncs < requests,
        "{how}: {syncs} commits for {requests} changes"
    );
    // Data syncs, one call at a time: nothing else commits, so each call's
    // thread syncs itself (led); beside a commit in flight it would write
    // the data back and owe the journal commit (parked).
    let (fh, _) = create_file(&s.nfs, &s.root, "data").await;
    let (r0, p0, _, l0) = sync_counts(&srv);
    let write = |offset: u64, data: Vec<u8>, stable: StableHow| {
        let (nfs, fh) = (s.nfs.clone(), fh.clone());
        async move {
            let count = data.len() as u32;
            let w = ok(
                "WRITE",
                nfs.write(&Write3Args {
                    file: fh,
                    offset,
                    count,
                    stable,
                    data,
                })
                .await,
            );
            assert_eq!(w.committed, stable);
            w
        }
    };
    let u = write(0, vec![7u8; 8192], StableHow::Unstable).await;
    assert_eq!(commit(&s.nfs, &fh).await.verf, u.verf);
    write(8192, vec![9u8; 4096], StableHow::FileSync).await;
    let (r1, p1, _, l1) = sync_counts(&srv);
    assert_eq!(
        (r1 - r0, (p1 - p0) + (l1 - l0)),
        (2, 2),
        "{how}: data syncs (requests, parked or led)"
    );
    let d = std::fs::read(export.join("data")).expect("data file");
    assert!(
        d.len() == 12288 && d[..8192].iter().all(|&b| b == 7) && d[8192..].iter().all(|&b| b == 9)
    );
    // Stable writes of many streams at once: most owe the journal commit
    // after writing their data back (parked).
    let (r0, p0, _, l0) = sync_counts(&srv);
    let mut tasks = Vec::new();
    for t in 0..STREAMS {
        let (nfs, root) = (nfs.clone(), s.root.clone());
        tasks.push(tokio::spawn(async move {
            let fh = ok("CREATE", create_res(&nfs, &root, &format!("w{t}")).await)
                .obj
                .expect("CREATE returns a handle");
            for k in 0..ROUNDS as u64 {
                let w = ok(
                    "WRITE",
                    nfs.write(&Write3Args {
                        file: fh.clone(),
                        offset: k * 4096,
                        count: 4096,
                        stable: StableHow::FileSync,
                        data: vec![t as u8; 4096],
                    })
                    .await,
                );
                assert_eq!(w.committed, StableHow::FileSync);
            }
        }));
    }
    for t in tasks {
        t.await.expect("stream");
    }
    let (r1, p1, _, l1) = sync_counts(&srv);
    let (requests, parked, led) = (r1 - r0, p1 - p0, l1 - l0);
    eprintln!("{how}: stable writes: {requests} durability requests, {parked} parked, {led} led");
    assert_eq!(requests, (STREAMS * (ROUNDS + 1)) as u64, "{how}");
    assert_eq!(parked + led, requests, "{how}: parked or led");
    assert!(
        parked > requests / 2,
        "{how}: {parked} of {requests} parked"
    );
    for t in 0..STREAMS {
        let d = std::fs::read(export.join(format!("w{t}"))).expect("written file");
        assert!(
            d.len() == 4096 * ROUNDS && d.iter().all(|&b| b == t as u8),
            "{how}: w{t}"
        );
    }
    for t in 0..STREAMS {
        for k in 0..ROUNDS {
            let there = |n: String| export.join(n).exists();
            assert!(!there(format!("f{t}-{k}")), "{how}: f{t}-{k} not renamed");
            assert!(!there(format!("d{t}-{k}")), "{how}: d{t}-{k} not removed");
            assert_eq!(there(format!("g{t}-{k}")), k % 2 == 1, "{how}: g{t}-{k}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_changes_are_answered_by_the_journal_commit_threads() {
    if common::skip("sync replies", unavailable(&[])) {
        return;
    }
    bounded(async {
        let fs = LoopFs::new("syncreplies", 128);
        changes_answered_after_shared_commits(&fs, "ext4", None).await;
        // Off: the threads keep the server's SCHED_OTHER.
        let srv = TestServer::start_with(
            &fs.subdir("export"),
            &["--no-rpcbind", "--no-sync-sched-batch"],
        );
        for group in ["rnfsd-journal", "rnfsd-sync", "rnfsd-evloop"] {
            let (ok, p) = all_under(&srv, group, 0);
            assert!(ok, "--no-sync-sched-batch: {group} threads' policies {p:?}");
        }
        drop(srv);
        if unavailable(&["mkfs.xfs"]).is_none() {
            let fs = LoopFs::xfs("syncrepliesxfs", 320);
            changes_answered_after_shared_commits(&fs, "xfs", Some(3)).await;
        } else {
            eprintln!("skipped: sync replies on XFS (mkfs.xfs is not installed)");
        }
    })
    .await;
}

/// Write-backs a commit thread waited for (`sync_writebacks_waited`).
fn writebacks_waited(srv: &TestServer) -> u64 {
    let s = snapshot(srv);
    s.exports.iter().map(|e| e.sync_writebacks_waited).sum()
}

/// UNSTABLE WRITEs of `bytes` to `fh` from offset 0 in 64 KiB pieces,
/// then its COMMIT; whether a commit thread waited for its writeback.
async fn write_and_commit(c: &Session, srv: &TestServer, fh: &NfsFh3, bytes: usize) -> bool {
    const PIECE: usize = 64 << 10;
    for off in (0..bytes).step_by(PIECE) {
        let data = vec![0x5a; PIECE.min(bytes - off)];
        let w = c
            .nfs
            .write_at(fh, off as u64, &data, StableHow::Unstable)
            .await
            .unwrap_or_else(|e| panic!("WRITE at {off}: {e}"));
        assert_eq!(w.written, data.len() as u64);
    }
    let before = writebacks_waited(srv);
    commit(&c.nfs, fh).await;
    writebacks_waited(srv) > before
}

/// While other clients' creates keep the journal commit thread busy, a
/// COMMIT of a small file leaves the wait for its writeback to that thread;
/// one of a file with more than `owed_writeback_bytes` unsynced waits on
/// its own thread, so that it never holds back the others' commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_small_writeback_is_left_to_the_commit_thread() {
    if common::skip("owed writeback bound", unavailable(&[])) {
        return;
    }
    let fs = LoopFs::new("owedwb", 128);
    let export = fs.subdir("export");
    let srv = TestServer::start_with(&export, &["--no-rpcbind"]);
    bounded(async {
        let load = create_load(&srv, 8).await;
        let a = mount(&srv).await;
        let (small, _) = create_file(&a.nfs, &a.root, "small").await;
        let (large, _) = create_file(&a.nfs, &a.root, "large").await;
        // A COMMIT that finds nothing committing makes its own sync: try
        // until one was left to the thread (the load keeps it busy).
        let mut left = false;
        for _ in 0..50 {
            if write_and_commit(&a, &srv, &small, 4096).await {
                left = true;
                break;
            }
        }
        // 4 MiB unsynced, four times the default bound: never left over.
        let mut large_left = 0;
        for _ in 0..5 {
            large_left += usize::from(write_and_commit(&a, &srv, &large, 4 << 20).await);
        }
        load.stop().await;
        assert!(
            left,
            "no small file's COMMIT in 50 left its wait to the commit thread"
        );
        assert_eq!(
            large_left, 0,
            "a 4 MiB writeback was left to the commit thread"
        );
    })
    .await;
}

/// Thaws a filesystem however the test ends (a frozen mount left behind
/// hangs whatever touches it next).
struct Frozen<'a>(&'a std::path::Path);

impl Drop for Frozen<'_> {
    fn drop(&mut self) {
        let _ = std::process::Command::new("fsfreeze")
            .arg("--unfreeze")
            .arg(self.0)
            .status();
    }
}

/// NFSv4.1: a compound whose reply waits for the journal commit its
/// change owes keeps its slot until that commit ends. A retry meanwhile
/// (the same slot and sequence id, as a client sends after losing its
/// connection) is NFS4ERR_DELAY (RFC 8881 §2.10.6.2), never the cached
/// success of a change not yet durable; once the commit is done the
/// retry gets the reply the client was sent. The commit is held by
/// freezing the filesystem that holds the export's image: the export's
/// changes in memory go on, its journal's writes wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_nfs4_retry_does_not_overtake_the_commit_its_reply_waits_for() {
    use rnfsd_client::nfs4::{SetAttrs4, Slot};
    use rnfsd_client::{Nfs4Client, Nfs4Config};
    use rnfsd_proto::nfs4::*;
    use std::time::Duration;

    if common::skip(
        "NFSv4.1 retry of a reply waiting for its commit",
        unavailable(&["fsfreeze"]),
    ) {
        return;
    }
    let outer = LoopFs::new("v4retry-outer", 512);
    let inner = LoopFs::in_dir("v4retry", &outer.mnt, 128);
    let export = inner.subdir("export");
    // `b`'s inode in another inode-table block than `a`'s and the
    // server's marker's (made at start): the held commit writes those
    // blocks, and a change to an inode in one would wait for it.
    let files = std::iter::once("b".to_owned())
        .chain((0..64).map(|i| format!("f{i}")))
        .chain(std::iter::once("a".to_owned()));
    for f in files {
        std::fs::write(export.join(f), b"").expect("file");
    }
    let srv = TestServer::start_with(&export, &["--no-rpcbind"]);
    bounded(async {
        let c = Nfs4Client::connect(srv.addr, &config(1), &Nfs4Config::default())
            .await
            .expect("NFSv4.1 session");
        let root = c
            .lookup_path(export.to_str().unwrap())
            .await
            .expect("export root");
        let a = c.lookup_from(&root, "a").await.expect("a");
        let b = c.lookup_from(&root, "b").await.expect("b");
        let mode = |fh: &NfsFh4, m: u32| {
            let (c, fh) = (c.clone(), fh.clone());
            async move {
                c.setattr(&fh, &Stateid4::ANONYMOUS, &SetAttrs4::mode(m))
                    .await
            }
        };
        // Both inodes and the journal in memory, every change durable.
        for fh in [&a, &b] {
            mode(fh, 0o600).await.expect("SETATTR");
        }
        run("fsfreeze", &["--freeze", outer.mnt.to_str().unwrap()]);
        let frozen = Frozen(&outer.mnt);
        // A change whose commit is under way, held: nothing else commits,
        // so its own thread leads the commit and waits in the kernel.
        let first = tokio::spawn(mode(&a, 0o640));
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!first.is_finished(), "the commit was not held");
        // A change meanwhile owes its commit: its reply waits, parked. On
        // a slot of its own, sa_cachethis set.
        let slot: Slot = c.slot().await.expect("slot");
        let ops = vec![
            ArgOp::Sequence(Sequence4Args {
                sessionid: c.sessionid(),
                sequenceid: slot.next_seqid(),
                slotid: slot.id(),
                highest_slotid: slot.id(),
                cachethis: true,
            }),
            ArgOp::PutFh(PutFh4Args { object: b.clone() }),
            ArgOp::SetAttr(Box::new(SetAttr4Args {
                stateid: Stateid4::ANONYMOUS,
                obj_attributes: SetAttrs4::mode(0o604).to_fattr(),
            })),
        ];
        let send = |ops: Vec<ArgOp<'static>>| {
            let rpc = c.rpc().clone();
            async move { rpc.compound(1, &ops).await.expect("COMPOUND") }
        };
        let second = tokio::spawn(send(ops.clone()));
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            !second.is_finished(),
            "a change was answered while the journal could not commit"
        );
        // The retry, as after a lost connection.
        let retry = tokio::time::timeout(Duration::from_secs(10), send(ops.clone()))
            .await
            .expect("the retry was not answered");
        assert!(
            matches!(
                retry.results.first(),
                Some(ResOp::Sequence(NfsRes4::Fail(Nfsstat4::Delay)))
            ),
            "a retry while its reply waits for the journal commit: {:?}",
            retry.results
        );
        assert!(!second.is_finished(), "the change was answered early");
        drop(frozen);
        first.await.expect("task").expect("the held SETATTR");
        let sent = second.await.expect("task");
        assert_eq!(sent.status, Nfsstat4::Ok, "{:?}", sent.results);
        // Committed now: the retry gets the reply that was sent.
        let again = send(ops).await;
        assert_eq!(again.status, Nfsstat4::Ok, "{:?}", again.results);
        assert_eq!(again.results.len(), sent.results.len());
        drop(slot);
    })
    .await;
    use std::os::unix::fs::PermissionsExt;
    let m = std::fs::metadata(export.join("b"))
        .expect("b")
        .permissions();
    assert_eq!(m.mode() & 0o7777, 0o604);
}
