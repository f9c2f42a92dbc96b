//! What a service manager sees: systemd's notify protocol (READY,
//! RELOADING, STOPPING) and socket activation (LISTEN_FDS), through
//! systemd's own `systemd-socket-activate`.

use crate::common;

use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::nfs::*;
use common::{export_table, write_config, TempDir};
use rnfsd_client::nfs3::*;
use rnfsd_client::{Client, MountClient, NfsClient};

/// Reads one notify datagram, bounded.
fn recv(sock: &UnixDatagram) -> String {
    let mut buf = [0u8; 4096];
    let n = sock
        .recv(&mut buf)
        .expect("a notify message within the timeout");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn speaks_the_systemd_notify_protocol_and_starts_with_no_exports() {
    let state = TempDir::new("notify-state");
    let cfgdir = TempDir::new("notify-cfg");
    let sock_path = state.path().join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // A packaged server: a config file that exports nothing yet.
    let cfg = write_config(cfgdir.path(), "[server]\nlisten = [\"127.0.0.1:0\"]\n");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rnfsd"))
        .args(["serve", "--no-rpcbind", "--config", &cfg, "--state-dir"])
        .arg(state.path())
        .env("NOTIFY_SOCKET", &sock_path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ready = recv(&sock);
    assert!(ready.contains("READY=1"), "{ready:?}");
    assert!(ready.contains("STATUS=serving 0 export(s)"), "{ready:?}");

    let dir = TempDir::new("notify-export");
    write_config(
        cfgdir.path(),
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\n{}",
            export_table(dir.path(), "")
        ),
    );
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap()
        .success());
    let reloading = recv(&sock);
    assert!(
        reloading.contains("RELOADING=1") && reloading.contains("MONOTONIC_USEC="),
        "{reloading:?}"
    );
    let again = recv(&sock);
    assert!(
        again.contains("READY=1") && again.contains("serving 1 export(s)"),
        "{again:?}"
    );

    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let stopping = recv(&sock);
    assert!(stopping.contains("STOPPING=1"), "{stopping:?}");
    let st = child.wait().unwrap();
    assert!(st.success(), "{st:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn serves_on_sockets_from_socket_activation() {
    let tool = Command::new("sh")
        .args(["-c", "command -v systemd-socket-activate"])
        .output()
        .is_ok_and(|o| o.status.success());
    let why =
        (!tool).then(|| "systemd-socket-activate (package systemd) is not installed".to_owned());
    if common::skip("socket activation", why) {
        return;
    }
    let dir = TempDir::new("activate-export");
    let state = TempDir::new("activate-state");
    std::fs::write(dir.path().join("f"), b"activated").unwrap();
    // A free port for systemd-socket-activate to listen on (it binds it
    // again at once: only a bind of port 0 elsewhere that draws this very
    // port in that instant could take it).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // `listen` names another port: the passed socket must win.
    let mut child = Command::new("systemd-socket-activate")
        .arg(format!("--listen=127.0.0.1:{port}"))
        .arg(env!("CARGO_BIN_EXE_rnfsd"))
        .arg("serve")
        .arg(dir.path())
        .args([
            "--listen",
            "127.0.0.1:1",
            "--insecure",
            "--no-rpcbind",
            "--state-dir",
        ])
        .arg(state.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn systemd-socket-activate");
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    bounded(async {
        // The first connection starts the server; retry while the tool
        // itself is not listening yet.
        let mut client = None;
        for _ in 0..250 {
            if let Ok(c) = Client::connect(addr, &config(1)).await {
                client = Some(c);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let client = client.expect("connect to the activated socket");
        let fh = MountClient::new(client.clone())
            .mnt(dir.path().to_str().unwrap())
            .await
            .expect("MNT on the activated socket");
        let nfs = NfsClient::new(client);
        let f = lookup(&nfs, &NfsFh3::new(fh.fhandle), "f").await;
        assert_eq!(read_data(&nfs, &f, 0, 64).await, b"activated");
    })
    .await;
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}
