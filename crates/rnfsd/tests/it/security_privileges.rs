//! Least privilege (the hardening issue, items 1 and 2), read from outside:
//! every thread of a root server holds only the capabilities requests need
//! (none that bypass a caller's limits: CAP_SYS_RESOURCE, CAP_SYS_ADMIN),
//! in every set, with no_new_privs; and root that cannot switch identity
//! refuses to start rather than serve every request as root.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::nfs::*;
use common::{TempDir, TestServer};
use rnfsd_client::nfs3::*;
use rnfsd_client::{Auth, Client};

/// CHOWN, DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER, FSETID, SETGID, SETUID,
/// NET_BIND_SERVICE, MKNOD, LEASE (capability.h bit numbers).
const KEPT: u64 =
    1 << 0 | 1 << 1 | 1 << 2 | 1 << 3 | 1 << 4 | 1 << 6 | 1 << 7 | 1 << 10 | 1 << 27 | 1 << 28;
const CAP_SYS_ADMIN: u64 = 1 << 21;
const CAP_SYS_RESOURCE: u64 = 1 << 24;

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// (name, value) of one hex capability line of a task's status.
fn cap_field(status: &str, name: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or_else(|| panic!("{name} missing from task status"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_thread_holds_only_what_requests_need() {
    let why = (!is_root()).then(|| "needs root (a root server's capabilities)".to_string());
    if common::skip("privileges", why) {
        return;
    }
    let dir = TempDir::new("privs");
    std::fs::write(dir.path().join("f"), b"x").expect("write");
    let srv = TestServer::start_with(dir.path(), &["--no-rpcbind"]);
    let pid = srv.pid().expect("pid");
    bounded(async {
        // Calls as a non-root caller, so workers have switched identity.
        let s = mount(&srv).await;
        let mut cfg = config(1);
        cfg.auth = Auth::unix(1000, 1000);
        let user =
            rnfsd_client::NfsClient::new(Client::connect(srv.addr, &cfg).await.expect("connect"));
        for _ in 0..20 {
            ok(
                "GETATTR as uid 1000",
                user.getattr(&GetAttr3Args {
                    object: s.root.clone(),
                })
                .await,
            );
        }
    })
    .await;
    let tasks: Vec<_> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("tasks")
        .flatten()
        .collect();
    assert!(tasks.len() > 1, "expected worker threads");
    for t in tasks {
        let st = std::fs::read_to_string(t.path().join("status")).expect("status");
        let tid = t.file_name().to_string_lossy().into_owned();
        for set in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
            let v = cap_field(&st, set);
            assert_eq!(
                v & !KEPT,
                0,
                "task {tid} {set} {v:#x} holds capabilities beyond what requests need"
            );
            assert_eq!(v & (CAP_SYS_ADMIN | CAP_SYS_RESOURCE), 0);
        }
        assert!(
            st.lines().any(|l| l == "NoNewPrivs:\t1"),
            "task {tid} without no_new_privs"
        );
    }
}

#[test]
fn root_that_cannot_switch_identity_refuses_to_start() {
    let found = Command::new("sh")
        .args(["-c", "command -v setpriv"])
        .output()
        .is_ok_and(|o| o.status.success());
    let why = if !is_root() {
        Some("needs root (drops root's CAP_SETUID)".to_string())
    } else {
        (!found).then(|| "setpriv (util-linux) is not installed".to_string())
    };
    if common::skip("no-setuid", why) {
        return;
    }
    let dir = TempDir::new("nosetuid");
    let state = TempDir::new("nosetuid-state");
    let bin = std::env::var_os("RNFSD_TEST_BIN").map_or_else(
        || env!("CARGO_BIN_EXE_rnfsd").into(),
        std::path::PathBuf::from,
    );
    // Root's capabilities after exec are its bounding set: without SETUID
    // and SETGID there, the server is root that cannot act as a caller.
    let mut child = Command::new("setpriv")
        .args(["--bounding-set", "-setuid,-setgid", "--"])
        .arg(bin)
        .arg("serve")
        .arg(dir.path())
        .args(["--listen", "127.0.0.1:0", "--no-rpcbind", "--state-dir"])
        .arg(state.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn setpriv rnfsd");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Ok(Some(st)) = child.try_wait() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("root without CAP_SETUID kept running");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    assert!(!status.success(), "started without CAP_SETUID: {err}");
    assert!(err.contains("CAP_SETUID"), "no clear reason given: {err}");
}
