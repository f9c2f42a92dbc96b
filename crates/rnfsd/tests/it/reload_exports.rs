//! Exports added, removed and changed by a reload (SIGHUP) while clients
//! stay connected; `rnfsd exportfs` shows what is in force.

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::nfs::*;
use common::{export_table, write_config, TempDir, TestServer};
use rnfsd_client::nfs3::*;
use rnfsd_client::{MountClient, NfsClient};

/// `rnfsd exportfs` against the test server's admin socket.
fn exportfs(srv: &TestServer) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_rnfsd"))
        .arg("exportfs")
        .arg("--state-dir")
        .arg(srv.state.path())
        .output()
        .expect("run rnfsd exportfs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Polls `rnfsd exportfs` until `done` holds (reloads are asynchronous).
fn wait_exports(srv: &TestServer, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let t = exportfs(srv);
        if done(&t) {
            return t;
        }
        assert!(
            Instant::now() < deadline,
            "reload not applied: exports now:\n{t}\nlog: {}",
            log_tail(srv, 20)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn reload_adds_removes_and_reopens_exports_with_connections_kept() {
    let (a, b, cfgdir) = (
        TempDir::new("reload-a"),
        TempDir::new("reload-b"),
        TempDir::new("reload-cfg"),
    );
    let (pa, pb) = (a.path().to_str().unwrap(), b.path().to_str().unwrap());
    let cfg = write_config(cfgdir.path(), &export_table(a.path(), ""));
    // DIR (the harness needs one) is the config directory.
    let srv = TestServer::start_with(cfgdir.path(), &["--no-rpcbind", "--config", &cfg]);
    bounded(async {
        let client = connect(&srv).await;
        let (mount, nfs) = (
            MountClient::new(client.clone()),
            NfsClient::new(client.clone()),
        );
        let root_a = NfsFh3::new(mount.mnt(pa).await.expect("MNT a").fhandle);
        let (f, _) = create_file(&nfs, &root_a, "f").await;
        write(&nfs, &f, 0, b"kept").await;
        assert!(mount.mnt(pb).await.is_err(), "b is not exported yet");

        // a out, b in: one reload, the same connection.
        write_config(cfgdir.path(), &export_table(b.path(), ""));
        srv.hup();
        let t = wait_exports(&srv, |t| t.contains(pb) && !t.contains(pa));
        assert!(t.contains("127.0.0.1(sync,fsid="), "{t}");
        assert!(
            t.contains("rw,insecure,no_root_squash,no_all_squash"),
            "{t}"
        );
        let root_b = NfsFh3::new(mount.mnt(pb).await.expect("MNT b after reload").fhandle);
        create_file(&nfs, &root_b, "g").await;
        fail(
            "GETATTR in the removed export",
            nfs.getattr(&GetAttr3Args { object: f.clone() }).await,
            Nfsstat3::Stale,
        );
        assert!(mount.mnt(pa).await.is_err(), "a is no longer exported");
        assert!(!client.is_closed(), "the reload dropped the connection");

        // A reload that cannot be applied (a missing directory) changes
        // nothing.
        let missing = cfgdir.path().join("missing");
        write_config(
            cfgdir.path(),
            &format!(
                "{}{}",
                export_table(a.path(), ""),
                export_table(&missing, "")
            ),
        );
        srv.hup();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !log_tail(&srv, 10).contains("not reloaded") {
            assert!(
                Instant::now() < deadline,
                "no error logged: {}",
                log_tail(&srv, 20)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let t = exportfs(&srv);
        assert!(
            t.contains(pb) && !t.contains(pa),
            "a failed reload changed exports:\n{t}"
        );

        // a back, async and read-only: its old handles work again (same id,
        // same key), the new options apply.
        write_config(
            cfgdir.path(),
            &format!(
                "{}{}",
                export_table(b.path(), ""),
                export_table(a.path(), "sync = false\nread_only = true\n")
            ),
        );
        srv.hup();
        let t = wait_exports(&srv, |t| t.contains(pa));
        let line_a = t.lines().find(|l| l.starts_with(pa)).unwrap_or_default();
        assert!(line_a.contains("(async,") && line_a.contains(",ro,"), "{t}");
        let mut buf = Vec::new();
        let r = ok(
            "READ through a handle from before the removal",
            nfs.read(&Read3Args {
                file: f.clone(),
                offset: 0,
                count: 16,
            })
            .await,
        );
        buf.extend_from_slice(&r.data);
        assert_eq!(buf, b"kept");
        fail(
            "CREATE in the read-only export",
            create_res(&nfs, &root_a, "h").await,
            Nfsstat3::RoFs,
        );
        ok(
            "b untouched",
            nfs.getattr(&GetAttr3Args { object: root_b }).await,
        );
        assert!(!client.is_closed());
    })
    .await;
}

/// Points the symlink `link` at `to`, replacing it in one rename.
fn repoint(link: &std::path::Path, to: &std::path::Path) {
    let tmp = link.with_extension("new");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(to, &tmp).expect("symlink");
    std::fs::rename(&tmp, link).expect("rename symlink");
}

/// An export with `mountpoint` is served only while its mount point is
/// mounted, checked at start and at every reload of the same
/// configuration; one with exports(5) `mp` whose own path is not a mount
/// point is never served. A symlink stands for the mount: pointed at /proc
/// (a mount point), the check sees what mounting a filesystem would show.
#[tokio::test(flavor = "multi_thread")]
async fn mountpoint_exports_only_while_mounted() {
    let (a, b, cfgdir) = (
        TempDir::new("mp-a"),
        TempDir::new("mp-b"),
        TempDir::new("mp-cfg"),
    );
    let (pa, pb) = (a.path().to_str().unwrap(), b.path().to_str().unwrap());
    let plain = cfgdir.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let link = cfgdir.path().join("mnt");
    repoint(&link, &plain);
    let exports = cfgdir.path().join("exports");
    std::fs::write(
        &exports,
        format!("{pb} 127.0.0.1(rw,insecure,no_root_squash,mp)\n"),
    )
    .unwrap();
    let cfg = write_config(
        cfgdir.path(),
        &format!(
            "[server]\nexports = \"{}\"\n{}",
            exports.display(),
            export_table(a.path(), &format!("mountpoint = \"{}\"\n", link.display()))
        ),
    );
    let srv = TestServer::start_with(cfgdir.path(), &["--no-rpcbind", "--config", &cfg]);
    let served = |t: &str, p: &str| t.lines().any(|l| l.starts_with(p));
    let left_out = |t: &str, p: &str, at: &str| {
        t.lines().any(|l| {
            l.starts_with(&format!("# {p}"))
                && l.contains(&format!(
                    "not exported: {at} is not a mount point (mountpoint)"
                ))
        })
    };
    let t = exportfs(&srv);
    assert!(!served(&t, pa) && !served(&t, pb), "{t}");
    assert!(left_out(&t, pa, link.to_str().unwrap()), "{t}");
    assert!(left_out(&t, pb, pb), "{t}");
    assert!(
        log_tail(&srv, 50).contains("export NOT exported"),
        "{}",
        log_tail(&srv, 50)
    );
    bounded(async {
        let client = connect(&srv).await;
        let mount = MountClient::new(client.clone());
        assert!(mount.mnt(pa).await.is_err(), "a exported while not mounted");
        assert!(mount.mnt(pb).await.is_err(), "b exported while not mounted");

        // "Mounted": the same configuration, reloaded.
        repoint(&link, std::path::Path::new("/proc"));
        srv.hup();
        let t = wait_exports(&srv, |t| served(t, pa));
        assert!(!served(&t, pb) && left_out(&t, pb, pb), "{t}");
        assert!(!t.contains(&format!("# {pa}")), "{t}");
        mount.mnt(pa).await.expect("MNT a once mounted");

        // "Unmounted" again: left out at the next reload.
        repoint(&link, &plain);
        srv.hup();
        wait_exports(&srv, |t| {
            !served(t, pa) && left_out(t, pa, link.to_str().unwrap())
        });
        assert!(mount.mnt(pa).await.is_err(), "a exported after unmount");
        assert!(!client.is_closed());
    })
    .await;
}
