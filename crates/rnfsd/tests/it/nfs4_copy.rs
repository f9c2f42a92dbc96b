//! NFSv4.2's asynchronous COPY (RFC 7862 §15.2, §15.8, §15.9, §16.1)
//! against the real server over TCP, with the v4 client library's back
//! channel: a COPY past `nfs4_copy_sync_max` that the client lets run
//! asynchronously answers with a copy stateid at once and ends with a
//! CB_OFFLOAD carrying the count, stability and write verifier;
//! OFFLOAD_STATUS follows it; OFFLOAD_CANCEL stops it; past the copier
//! bounds a COPY is a synchronous short copy; a client that goes stops
//! its copies and frees their stateids and slots.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common;

use common::nfs::*;
use common::nfs4::{open_rw, status};
use common::{export_table, write_config, TempDir, TestServer};
use rnfsd_client::{ClientError, Nfs4Client};
use rnfsd_proto::nfs4::cb::OffloadInfo4;
use rnfsd_proto::nfs4::*;
use rnfsd_stats::Snapshot;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

fn server(dir: &Path, cfgdir: &TempDir, server_keys: &str) -> TestServer {
    let cfg = write_config(
        cfgdir.path(),
        &format!(
            "[server]\nnfs4 = true\nregister_rpcbind = false\n{server_keys}\n{}",
            export_table(dir, "sync = false")
        ),
    );
    TestServer::start_config(Path::new(&cfg), dir, TempDir::new("copy-state"), &[])
}

/// A minor version 2 session with a back channel (CB_OFFLOAD's path).
async fn client(srv: &TestServer, name: &str) -> Nfs4Client {
    common::nfs4::back_channel_client(srv, name)
        .await
        .with_minor(2)
}

fn pattern(len: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

async fn offload_status(
    c: &Nfs4Client,
    fh: &NfsFh4,
    sid: &Stateid4,
) -> Result<OffloadStatus4ResOk, ClientError> {
    let r = c
        .run(&[
            ArgOp::PutFh(PutFh4Args { object: fh.clone() }),
            ArgOp::OffloadStatus(Offload4Args { stateid: *sid }),
        ])
        .await?;
    match r.into_iter().nth(1) {
        Some(ResOp::OffloadStatus(NfsRes4::Ok(v))) => Ok(v),
        other => panic!("OFFLOAD_STATUS: {other:?}"),
    }
}

async fn offload_cancel(c: &Nfs4Client, fh: &NfsFh4, sid: &Stateid4) -> Result<(), ClientError> {
    c.run(&[
        ArgOp::PutFh(PutFh4Args { object: fh.clone() }),
        ArgOp::OffloadCancel(Offload4Args { stateid: *sid }),
    ])
    .await
    .map(drop)
}

fn op_calls(srv: &TestServer, name: &str) -> u64 {
    let a = rnfsd::admin::query(&srv.state.path().join("admin.sock"), "snapshot")
        .expect("admin socket");
    let s = Snapshot::from_json(&a).expect("snapshot JSON");
    s.proc("nfs4_op", name).map_or(0, |p| p.calls)
}

/// The CB_OFFLOAD for `sid`, waited for up to 20 s.
async fn cb_offload(c: &Nfs4Client, sid: &Stateid4) -> rnfsd_proto::nfs4::cb::CbOffload4Args {
    let t = Instant::now();
    loop {
        if let Some(o) = c.offloads().into_iter().find(|o| o.stateid == *sid) {
            return o;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "no CB_OFFLOAD");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `path`'s size stays the same for 300 ms: its size then.
async fn settled_size(path: &Path) -> u64 {
    let mut last = u64::MAX;
    loop {
        let now = std::fs::metadata(path).unwrap().len();
        if now == last {
            return now;
        }
        last = now;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn async_copy_ends_with_cb_offload_and_offload_status_follows_it() {
    let dir = TempDir::new("copy-async");
    let cfgdir = TempDir::new("copy-async-cfg");
    let src = pattern(8 * MIB + 123);
    let len = src.len() as u64;
    std::fs::write(dir.path().join("src"), &src).unwrap();
    std::fs::write(dir.path().join("dst"), b"").unwrap();
    std::fs::write(dir.path().join("short"), b"").unwrap();
    let srv = server(
        dir.path(),
        &cfgdir,
        &format!("nfs4_copy_sync_max = {}", 64 * KIB),
    );
    bounded(async {
        let c = client(&srv, "copy-a").await;
        let (sfh, ssid) = open_rw(&c, &srv, "src").await;
        let (dfh, dsid) = open_rw(&c, &srv, "dst").await;

        // Past the bound, asynchronous allowed: a copy stateid at once.
        let r = c
            .copy(&sfh, &ssid, 0, &dfh, &dsid, 0, 0, false)
            .await
            .expect("COPY");
        let sid = r.response.callback_id.expect("an asynchronous copy");
        assert!(!r.requires.synchronous);
        assert_eq!(r.response.count, 0);

        // OFFLOAD_STATUS follows it: counts grow to the length, and the
        // status shows once it finished.
        let mut last = 0;
        let t = Instant::now();
        let done = loop {
            let st = offload_status(&c, &dfh, &sid)
                .await
                .expect("OFFLOAD_STATUS");
            assert!(st.count >= last && st.count <= len, "count {}", st.count);
            last = st.count;
            if let Some(s) = st.complete {
                break (s, st.count);
            }
            assert!(t.elapsed() < Duration::from_secs(30), "copy never ends");
        };
        assert_eq!(done, (Nfsstat4::Ok, len));

        // CB_OFFLOAD: this copy, the destination, every byte, unstable
        // on an async export, WRITE's verifier (COMMIT vouches for it).
        let o = cb_offload(&c, &sid).await;
        assert_eq!(o.fh, dfh);
        let OffloadInfo4::Ok(w) = o.info else {
            panic!("copy failed: {:?}", o.info);
        };
        assert_eq!(w.count, len);
        assert_eq!(w.callback_id, None);
        assert_eq!(w.committed, StableHow4::Unstable);
        assert_eq!(w.writeverf, r.response.writeverf);
        let v = c.commit(&dfh, 0, 0).await.expect("COMMIT");
        assert_eq!(v, w.writeverf);
        let got = std::fs::read(dir.path().join("dst")).unwrap();
        assert!(got == src, "copied byte for byte");

        // A synchronous copy asked for past the bound: short, no stateid.
        let (xfh, xsid) = open_rw(&c, &srv, "short").await;
        let r = c
            .copy(&sfh, &ssid, 0, &xfh, &xsid, 0, 0, true)
            .await
            .expect("COPY");
        assert_eq!(r.response.callback_id, None);
        assert_eq!(r.response.count, 64 * KIB);
        // Within the bound: synchronous though asynchronous is allowed.
        let r = c
            .copy(&sfh, &ssid, 0, &xfh, &xsid, 0, 1000, false)
            .await
            .expect("COPY");
        assert_eq!(r.response.callback_id, None);
        assert_eq!(r.response.count, 1000);

        // Only copy stateids name copies; only their client sees them.
        let r = offload_status(&c, &dfh, &dsid).await;
        assert_eq!(status(r), Nfsstat4::BadStateid);
        let other = client(&srv, "copy-a2").await;
        let r = offload_status(&other, &dfh, &sid).await;
        assert_eq!(status(r), Nfsstat4::BadStateid, "another client's copy");
        let r = offload_cancel(&other, &dfh, &sid).await;
        assert_eq!(status(r), Nfsstat4::BadStateid);
        // Its own still sees the finished copy.
        let st = offload_status(&c, &dfh, &sid).await.expect("kept");
        assert_eq!(st.complete, Some(Nfsstat4::Ok));
        assert!(op_calls(&srv, "OFFLOAD_STATUS") >= 2);
    })
    .await;
}

/// A sparse file of `len` bytes with data at its start.
fn sparse(path: &Path, len: u64) {
    let f = std::fs::File::create(path).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(&pattern(MIB), 0).unwrap();
    f.set_len(len).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn offload_cancel_stops_a_copy_and_past_the_bounds_copies_are_synchronous() {
    let dir = TempDir::new("copy-cancel");
    let cfgdir = TempDir::new("copy-cancel-cfg");
    // 4 KiB chunks: a 256 MiB copy takes far longer than this test.
    let len = 256 * MIB;
    sparse(&dir.path().join("src"), len);
    for n in ["a", "b", "c"] {
        std::fs::write(dir.path().join(n), b"").unwrap();
    }
    let srv = server(
        dir.path(),
        &cfgdir,
        "nfs4_copy_sync_max = 4096\nnfs4_copies_max = 1\nnfs4_copies_per_client = 1",
    );
    bounded(async {
        let c = client(&srv, "copy-c").await;
        let (sfh, ssid) = open_rw(&c, &srv, "src").await;
        let (afh, asid) = open_rw(&c, &srv, "a").await;
        let (bfh, bsid) = open_rw(&c, &srv, "b").await;
        let r = c
            .copy(&sfh, &ssid, 0, &afh, &asid, 0, 0, false)
            .await
            .expect("COPY");
        let sid = r.response.callback_id.expect("asynchronous");

        // The one copier is busy: the next COPY is synchronous and short.
        let r = c
            .copy(&sfh, &ssid, 0, &bfh, &bsid, 0, 0, false)
            .await
            .expect("COPY");
        assert_eq!(r.response.callback_id, None, "past nfs4_copies_max");
        assert_eq!(r.response.count, 4096);

        // Mid-copy: some copied, not finished.
        let t = Instant::now();
        let st = loop {
            let st = offload_status(&c, &afh, &sid)
                .await
                .expect("OFFLOAD_STATUS");
            if st.count > 0 {
                break st;
            }
            assert!(t.elapsed() < Duration::from_secs(10), "copy never starts");
        };
        assert_eq!(st.complete, None, "a 256 MiB copy by 4 KiB is not done");
        assert!(st.count < len);

        // Cancelled: it stops, its stateid goes, no CB_OFFLOAD comes.
        offload_cancel(&c, &afh, &sid)
            .await
            .expect("OFFLOAD_CANCEL");
        let r = offload_status(&c, &afh, &sid).await;
        assert_eq!(status(r), Nfsstat4::BadStateid);
        let r = offload_cancel(&c, &afh, &sid).await;
        assert_eq!(status(r), Nfsstat4::BadStateid);
        let size = settled_size(&dir.path().join("a")).await;
        assert!(size >= st.count && size < len, "stopped at {size}");
        // What it copied stays, byte for byte.
        let got = std::fs::read(dir.path().join("a")).unwrap();
        let n = got.len().min(MIB as usize);
        assert!(got[..n] == pattern(MIB)[..n]);

        // The copier is free again: the next COPY is asynchronous.
        let (cfh, csid) = open_rw(&c, &srv, "c").await;
        let t = Instant::now();
        let sid2 = loop {
            let r = c
                .copy(&sfh, &ssid, 0, &cfh, &csid, 0, 0, false)
                .await
                .expect("COPY");
            if let Some(s) = r.response.callback_id {
                break s;
            }
            assert!(t.elapsed() < Duration::from_secs(10), "copier never free");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_ne!(sid2, sid);
        offload_cancel(&c, &cfh, &sid2)
            .await
            .expect("OFFLOAD_CANCEL");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !c.offloads()
                .iter()
                .any(|o| o.stateid == sid || o.stateid == sid2),
            "no CB_OFFLOAD for a cancelled copy"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_gone_mid_copy_stops_it_and_frees_its_slot() {
    let dir = TempDir::new("copy-gone");
    let cfgdir = TempDir::new("copy-gone-cfg");
    let len = 256 * MIB;
    sparse(&dir.path().join("src"), len);
    for n in ["a", "b"] {
        std::fs::write(dir.path().join(n), b"").unwrap();
    }
    let srv = server(
        dir.path(),
        &cfgdir,
        "nfs4_copy_sync_max = 4096\nnfs4_copies_max = 1\nnfs4_copies_per_client = 1",
    );
    bounded(async {
        let a = client(&srv, "copy-gone-a").await;
        let (sfh, ssid) = open_rw(&a, &srv, "src").await;
        let (afh, asid) = open_rw(&a, &srv, "a").await;
        let r = a
            .copy(&sfh, &ssid, 0, &afh, &asid, 0, 0, false)
            .await
            .expect("COPY");
        let sid = r.response.callback_id.expect("asynchronous");
        let b = client(&srv, "copy-gone-b").await;
        let (bsfh, bssid) = open_rw(&b, &srv, "src").await;
        let (bfh, bsid) = open_rw(&b, &srv, "b").await;
        let r = b
            .copy(&bsfh, &bssid, 0, &bfh, &bsid, 0, 0, false)
            .await
            .expect("COPY");
        assert_eq!(r.response.callback_id, None, "the one copier is a's");

        // a goes: its state closed, its session and client destroyed.
        a.close(&afh, &asid).await.expect("CLOSE");
        a.close(&sfh, &ssid).await.expect("CLOSE");
        a.destroy_session().await.expect("DESTROY_SESSION");
        a.destroy_clientid().await.expect("DESTROY_CLIENTID");
        let size = settled_size(&dir.path().join("a")).await;
        assert!(size < len, "a's copy stopped at {size}");

        // Its copy's slot is free for b; its stateid is no one's.
        let t = Instant::now();
        let sid2 = loop {
            let r = b
                .copy(&bsfh, &bssid, 0, &bfh, &bsid, 0, 0, false)
                .await
                .expect("COPY");
            if let Some(s) = r.response.callback_id {
                break s;
            }
            assert!(t.elapsed() < Duration::from_secs(10), "slot never freed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let r = offload_status(&b, &bfh, &sid).await;
        assert_eq!(status(r), Nfsstat4::BadStateid);
        offload_cancel(&b, &bfh, &sid2)
            .await
            .expect("OFFLOAD_CANCEL");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn each_client_has_its_own_bound_within_the_servers() {
    let dir = TempDir::new("copy-bounds");
    let cfgdir = TempDir::new("copy-bounds-cfg");
    let len = 256 * MIB;
    sparse(&dir.path().join("src"), len);
    for n in ["a1", "a2", "b1", "b2"] {
        std::fs::write(dir.path().join(n), b"").unwrap();
    }
    let srv = server(
        dir.path(),
        &cfgdir,
        "nfs4_copy_sync_max = 4096\nnfs4_copies_max = 2\nnfs4_copies_per_client = 1",
    );
    bounded(async {
        let mut started = Vec::new();
        for name in ["a", "b"] {
            let c = client(&srv, &format!("copy-bounds-{name}")).await;
            let (sfh, ssid) = open_rw(&c, &srv, "src").await;
            let (fh1, sid1) = open_rw(&c, &srv, &format!("{name}1")).await;
            let (fh2, sid2) = open_rw(&c, &srv, &format!("{name}2")).await;
            let r = c
                .copy(&sfh, &ssid, 0, &fh1, &sid1, 0, 0, false)
                .await
                .expect("COPY");
            let sid = r.response.callback_id.expect("room for one per client");
            let r = c
                .copy(&sfh, &ssid, 0, &fh2, &sid2, 0, 0, false)
                .await
                .expect("COPY");
            assert_eq!(r.response.callback_id, None, "past nfs4_copies_per_client");
            assert_eq!(r.response.count, 4096);
            started.push((c, fh1, sid));
        }
        for (c, fh, sid) in &started {
            offload_cancel(c, fh, sid).await.expect("OFFLOAD_CANCEL");
        }
    })
    .await;
}
