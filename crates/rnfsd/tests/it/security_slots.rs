//! Connection slots cannot be taken by strangers (the hardening issue,
//! item 5): a host no export lists is closed at accept, before it holds a
//! slot; and at `max_connections` the oldest idle connection makes room,
//! so a flood of idle connections (1,100 against the default 1,024) does
//! not lock a listed client out.

use crate::common;

use std::time::Duration;

use common::nfs::*;
use common::{TempDir, TestServer};
use rnfsd_client::nfs3::*;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpSocket, TcpStream};

async fn connect_from(srv: &TestServer, local: &str) -> TcpStream {
    let sock = TcpSocket::new_v4().expect("socket");
    sock.bind(format!("{local}:0").parse().expect("addr"))
        .expect("bind");
    sock.connect(srv.addr).await.expect("connect")
}

/// Whether the server closed `s` within `wait` (EOF or reset).
async fn closed_by_server(s: &mut TcpStream, wait: Duration) -> bool {
    let mut b = [0u8; 16];
    match tokio::time::timeout(wait, s.read(&mut b)).await {
        Ok(Ok(0)) | Ok(Err(_)) => true,
        Ok(Ok(_)) => false,
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_and_idle_floods_cannot_take_every_slot() {
    let dir = TempDir::new("slots");
    std::fs::write(dir.path().join("f"), b"x").expect("write");
    // Only 127.0.0.1 is listed; 127.0.0.2 is a stranger.
    let srv = TestServer::start_with(dir.path(), &["--no-rpcbind", "--client", "127.0.0.1"]);
    bounded(async {
        for _ in 0..20 {
            let mut s = connect_from(&srv, "127.0.0.2").await;
            assert!(
                closed_by_server(&mut s, Duration::from_secs(5)).await,
                "an unlisted host's connection was kept open"
            );
        }
        // 1,100 idle connections from the listed address: more than the
        // 1,024 slots.
        let mut idle = Vec::new();
        for _ in 0..1100 {
            idle.push(connect_from(&srv, "127.0.0.1").await);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        // A listed client still gets in and is served.
        let s = mount(&srv).await;
        let f = lookup(&s.nfs, &s.root, "f").await;
        ok(
            "GETATTR after an idle flood",
            s.nfs.getattr(&GetAttr3Args { object: f }).await,
        );
        // The oldest idle ones made room; the newest are still open.
        let mut closed = 0;
        for c in idle.iter_mut() {
            if closed_by_server(c, Duration::from_millis(5)).await {
                closed += 1;
            }
        }
        assert!(
            (1100 - 1024..1100).contains(&closed),
            "{closed} of 1,100 idle connections closed; expected the oldest beyond 1,024 (and the session's)"
        );
        assert!(
            !closed_by_server(idle.last_mut().expect("idle"), Duration::from_millis(5)).await,
            "the newest idle connection should be kept"
        );
    })
    .await;
}
