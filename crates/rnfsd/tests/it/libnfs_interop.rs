//! Interop with a third-party client: libnfs's command-line tools (Debian
//! `libnfs-utils`) against the real server over TCP on 127.0.0.1.
//!
//! These tests need `nfs-ls`, `nfs-cp` and `nfs-cat`. Outside CI a machine
//! without them skips with a message; under CI (`RNFSD_REQUIRE_LIBNFS` set by
//! scripts/test.sh) their absence fails the run.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use common::{TempDir, TestServer};

fn libnfs_present() -> bool {
    let found = ["nfs-ls", "nfs-cp", "nfs-cat"].iter().all(|t| {
        Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    });
    if !found {
        let required = std::env::var("RNFSD_REQUIRE_LIBNFS").unwrap_or_default();
        assert!(
            required.is_empty(),
            "libnfs-utils is required here (RNFSD_REQUIRE_LIBNFS is set) but not installed"
        );
        eprintln!("SKIP: libnfs-utils (nfs-ls, nfs-cp, nfs-cat) not installed; `apt-get install libnfs-utils`");
    }
    found
}

fn url(srv: &TestServer, path: &Path) -> String {
    format!(
        "nfs://127.0.0.1{}?version=3&nfsport={}&mountport={}",
        path.display(),
        srv.port(),
        srv.port()
    )
}

fn run(cmd: &str, args: &[&str]) -> Output {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .expect("spawn libnfs tool");
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Deterministic pseudo-random bytes (xorshift), so a mismatch is
/// reproducible and no two offsets hold the same pattern.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

#[test]
fn files_round_trip_byte_exact_both_ways() {
    if !libnfs_present() {
        return;
    }
    let export = TempDir::new("libnfs-export");
    let local = TempDir::new("libnfs-local");
    let srv = TestServer::start(export.path());
    for (i, len) in [0usize, 1, (1 << 20) + 1, 100 << 20]
        .into_iter()
        .enumerate()
    {
        let data = pattern(len, i as u64 + 7);
        let src = local.path().join(format!("src{i}"));
        std::fs::write(&src, &data).unwrap();
        // Local -> server.
        let remote = export.path().join(format!("up{i}"));
        run("nfs-cp", &[src.to_str().unwrap(), &url(&srv, &remote)]);
        let on_server = std::fs::read(&remote).unwrap();
        assert!(on_server == data, "upload of {len} bytes differs");
        // Server -> local.
        let back = local.path().join(format!("back{i}"));
        run("nfs-cp", &[&url(&srv, &remote), back.to_str().unwrap()]);
        assert!(
            std::fs::read(&back).unwrap() == data,
            "download of {len} bytes differs"
        );
        if len <= (1 << 20) + 1 {
            let out = run("nfs-cat", &[&url(&srv, &remote)]);
            assert!(out.stdout == data, "nfs-cat of {len} bytes differs");
        }
    }
}

#[test]
fn tree_of_1000_files_lists_and_copies_exactly() {
    if !libnfs_present() {
        return;
    }
    let export = TempDir::new("libnfs-tree");
    let local = TempDir::new("libnfs-tree-local");
    let srv = TestServer::start(export.path());
    // A tree made on the server side: 1,000 files in 20 directories.
    let mut expect = BTreeSet::new();
    for d in 0..20 {
        let dir = export.path().join(format!("d{d:02}"));
        std::fs::create_dir(&dir).unwrap();
        expect.insert(format!("d{d:02}"));
        for f in 0..50 {
            let name = format!("d{d:02}/f{f:03}");
            std::fs::write(
                export.path().join(&name),
                pattern(d * 97 + f, (d * 50 + f) as u64),
            )
            .unwrap();
            expect.insert(name);
        }
    }
    let out = run("nfs-ls", &["-R", &url(&srv, export.path())]);
    let text = String::from_utf8_lossy(&out.stdout);
    let listed: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .map(|n| n.trim_start_matches('/').to_string())
        .filter(|n| n != "." && n != ".." && !n.ends_with("/.") && !n.ends_with("/.."))
        .collect();
    assert_eq!(listed, expect, "nfs-ls -R output:\n{text}");

    // Copy every file out and back in (into a second tree), in parallel
    // batches to keep the run short, and compare bytes.
    let names: Vec<&String> = expect.iter().filter(|n| n.contains('/')).collect();
    for d in 0..20 {
        std::fs::create_dir(export.path().join(format!("u{d:02}"))).unwrap();
    }
    for chunk in names.chunks(16) {
        let mut kids = Vec::new();
        for name in chunk {
            let dst = local.path().join(name.replace('/', "_"));
            kids.push(
                Command::new("nfs-cp")
                    .arg(url(&srv, &export.path().join(name)))
                    .arg(&dst)
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap(),
            );
        }
        for mut k in kids {
            assert!(k.wait().unwrap().success());
        }
        let mut kids = Vec::new();
        for name in chunk {
            let src = local.path().join(name.replace('/', "_"));
            let dst = export.path().join(name.replacen('d', "u", 1));
            kids.push(
                Command::new("nfs-cp")
                    .arg(&src)
                    .arg(url(&srv, &dst))
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap(),
            );
        }
        for mut k in kids {
            assert!(k.wait().unwrap().success());
        }
    }
    for name in names {
        let orig = std::fs::read(export.path().join(name)).unwrap();
        let out = std::fs::read(local.path().join(name.replace('/', "_"))).unwrap();
        let back = std::fs::read(export.path().join(name.replacen('d', "u", 1))).unwrap();
        assert!(orig == out, "{name}: download differs");
        assert!(orig == back, "{name}: upload differs");
    }
}
