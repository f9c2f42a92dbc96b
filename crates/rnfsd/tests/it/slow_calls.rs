//! Slow calls of one connection run concurrently (the request-path issue,
//! item 5): with the export's filesystem frozen (`fsfreeze`), every stable
//! WRITE blocks in the kernel; 64 of them sent on one connection must all
//! be blocked at once (64 server threads in uninterruptible sleep), while
//! another client is still answered. Thawed, all 64 complete and their
//! data is there.

use crate::common;

use std::time::{Duration, Instant};

use common::blockdev::{run, unavailable, LoopFs};
use common::nfs::*;
use common::TestServer;
use rnfsd_client::nfs3::*;

const CALLS: usize = 64;

/// Thaws the filesystem however the test ends: a frozen mount left behind
/// would hang every later test that touches it.
struct Frozen<'a>(&'a std::path::Path);

impl Drop for Frozen<'_> {
    fn drop(&mut self) {
        let _ = std::process::Command::new("fsfreeze")
            .arg("--unfreeze")
            .arg(self.0)
            .status();
    }
}

/// Server threads in uninterruptible sleep (state D): blocked in the kernel
/// on the frozen filesystem.
fn threads_in_d(pid: u32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("stat")).is_ok_and(|s| {
                // The state follows the parenthesised command name.
                s.rsplit_once(") ")
                    .is_some_and(|(_, rest)| rest.starts_with('D'))
            })
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_blocked_writes_on_one_connection_run_at_once() {
    if common::skip("slow-calls", unavailable(&["fsfreeze"])) {
        return;
    }
    let fs = LoopFs::new("slow-calls", 256);
    let export = fs.subdir("export");
    for i in 0..CALLS {
        std::fs::write(export.join(format!("f{i}")), b"").expect("create");
    }
    let srv = TestServer::start_with(&export, &["--no-rpcbind"]);
    let pid = srv.pid().expect("server pid");
    bounded(async {
        let s = mount(&srv).await; // one connection
        let mut fhs = Vec::new();
        for i in 0..CALLS {
            fhs.push(lookup(&s.nfs, &s.root, &format!("f{i}")).await);
        }
        run("fsfreeze", &["--freeze", fs.mnt.to_str().expect("utf-8")]);
        let frozen = Frozen(&fs.mnt);
        let mut set = tokio::task::JoinSet::new();
        for (i, fh) in fhs.iter().enumerate() {
            let (nfs, fh) = (s.nfs.clone(), fh.clone());
            set.spawn(async move {
                nfs.write(&Write3Args {
                    file: fh,
                    offset: 0,
                    count: 4096,
                    stable: StableHow::FileSync,
                    data: vec![i as u8; 4096],
                })
                .await
            });
        }
        // Wait (bounded) until all of them are blocked in the kernel at once.
        let deadline = Instant::now() + Duration::from_secs(8);
        let mut peak = 0;
        while Instant::now() < deadline && peak < CALLS {
            peak = peak.max(threads_in_d(pid));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The connection is at its in-flight bound (max_inflight_per_conn
        // = 64) and is not read until one finishes; other clients are
        // still answered meanwhile.
        let other = mount(&srv).await;
        ok(
            "GETATTR while 64 writes are blocked",
            other
                .nfs
                .getattr(&GetAttr3Args {
                    object: fhs[0].clone(),
                })
                .await,
        );
        drop(frozen);
        while let Some(r) = set.join_next().await {
            let r = ok("WRITE FILE_SYNC", r.expect("task"));
            assert_eq!(r.count, 4096);
        }
        assert!(
            peak >= CALLS,
            "only {peak} of {CALLS} stable WRITEs of one connection were in the kernel at once"
        );
    })
    .await;
    for i in 0..CALLS {
        let d = std::fs::read(export.join(format!("f{i}"))).expect("read");
        assert_eq!(d, vec![i as u8; 4096], "f{i}");
    }
}
