//! The first run as the README shows it: an ordinary user runs
//! `rnfsd serve DIR` on their own directory, with no other option, and a
//! client mounting as root (as the kernel client does, from a reserved
//! port) can write there at once; the start line says what to know.

use crate::common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::nfs::*;
use common::TempDir;
use rnfsd_client::nfs3::*;
use rnfsd_client::{Client, ClientConfig, MountClient, NfsClient};

/// The unprivileged user the server runs as (nobody, as on Debian).
const USER: u32 = 65534;

fn chown(p: &std::path::Path, uid: u32) {
    let st = Command::new("chown")
        .arg(format!("{uid}:{uid}"))
        .arg(p)
        .status()
        .expect("chown");
    assert!(st.success());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ordinary_users_directory_works_on_the_first_try() {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let setpriv = Command::new("sh")
        .args(["-c", "command -v setpriv"])
        .output()
        .is_ok_and(|o| o.status.success());
    let why = if !root {
        Some("needs root to become another user and to call from a reserved port".to_owned())
    } else {
        (!setpriv).then(|| "setpriv (util-linux) is not installed".to_owned())
    };
    if common::skip("first run as an ordinary user", why) {
        return;
    }
    let share = TempDir::new("first-run-share");
    let home = TempDir::new("first-run-home");
    let run = TempDir::new("first-run-port");
    for d in [share.path(), home.path(), run.path()] {
        chown(d, USER);
    }
    let port_file = run.path().join("port");
    let mut child = Command::new("setpriv")
        .args([
            &format!("--reuid={USER}"),
            &format!("--regid={USER}"),
            "--clear-groups",
            "--",
        ])
        .arg(env!("CARGO_BIN_EXE_rnfsd"))
        .arg("serve")
        .arg(share.path())
        // Only what a test needs: a free port, and where to find it.
        .args(["--listen", "127.0.0.1:0", "--port-file"])
        .arg(&port_file)
        .env("HOME", home.path())
        .env_remove("XDG_STATE_HOME")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn rnfsd as an ordinary user");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let port = loop {
        if let Some(p) = std::fs::read_to_string(&port_file)
            .ok()
            .and_then(|s| s.trim().parse::<u16>().ok())
        {
            break p;
        }
        assert!(
            !matches!(child.try_wait(), Ok(Some(_))) && Instant::now() < deadline,
            "the server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut lines = Vec::new();
    while let Ok(l) = rx.recv_timeout(Duration::from_secs(5)) {
        let done = l.contains("running without root");
        lines.push(l);
        if done {
            break;
        }
    }
    assert!(
        lines.iter().any(|l| l.starts_with("rnfsd: serving")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("rnfsd: note: running without root")),
        "no note on running unprivileged: {lines:?}"
    );

    bounded(async {
        let client = Client::connect(
            std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            &ClientConfig {
                privileged_port: true,
                ..config(1)
            },
        )
        .await
        .expect("connect from a reserved port");
        let fh = MountClient::new(client.clone())
            .mnt(share.path().to_str().unwrap())
            .await
            .expect("MNT with the defaults");
        let nfs = NfsClient::new(client);
        let root = NfsFh3::new(fh.fhandle);
        let (f, _) = create_file(&nfs, &root, "hello").await;
        write(&nfs, &f, 0, b"first try").await;
        assert_eq!(read_data(&nfs, &f, 0, 64).await, b"first try");
    })
    .await;
    let m = std::fs::metadata(share.path().join("hello")).unwrap();
    assert_eq!(m.uid(), USER, "the file belongs to the user who serves");
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}
