//! Duplicate reply cache end to end: retransmissions with the same xid are
//! sent as raw records on one TCP connection (our client library picks its
//! own xids), and the replies compared byte for byte.

use crate::common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::nfs::*;
use common::{TempDir, TestServer};
use rnfsd_client::nfs3::*;
use rnfsd_proto::rpc::{AuthSys, CallHeader, OpaqueAuth, ReplyHeader, AUTH_SYS};
use rnfsd_xdr::{Dec, Enc, Xdr};

fn start(tag: &str, server_toml: &str, extra: &[&str]) -> (TempDir, TempDir, TestServer) {
    let dir = TempDir::new(tag);
    let cfgdir = TempDir::new(&format!("{tag}-cfg"));
    let cfg = cfgdir.path().join("rnfsd.toml");
    std::fs::write(&cfg, format!("[server]\n{server_toml}\n")).unwrap();
    let mut args = vec![
        "--no-rpcbind",
        "--no-root-squash",
        "--config",
        cfg.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let srv = TestServer::start_with(dir.path(), &args);
    (dir, cfgdir, srv)
}

async fn root_handle(srv: &TestServer) -> NfsFh3 {
    bounded(async { mount(srv).await.root }).await
}

/// One NFSv3 call record (with its record mark), AUTH_SYS root.
fn record<A: Xdr>(xid: u32, proc_: u32, args: &A) -> Vec<u8> {
    let cred = rnfsd_xdr::to_vec(&AuthSys {
        stamp: 1,
        machine_name: b"drc-test".to_vec(),
        uid: 0,
        gid: 0,
        gids: vec![],
    });
    let mut e = Enc::new();
    e.u32(0); // record mark, patched below
    CallHeader {
        xid,
        rpcvers: 2,
        prog: NFS_PROGRAM,
        vers: 3,
        proc_,
        cred: OpaqueAuth {
            flavor: AUTH_SYS,
            body: &cred,
        },
        verf: OpaqueAuth::NONE,
    }
    .encode(&mut e);
    args.encode(&mut e);
    let mut v = e.into_vec();
    let len = (v.len() - 4) as u32;
    v[..4].copy_from_slice(&(0x8000_0000 | len).to_be_bytes());
    v
}

fn conn(srv: &TestServer) -> TcpStream {
    let s = TcpStream::connect(srv.addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s
}

/// The next reply record (one fragment), or None if nothing arrives within
/// `wait`.
fn read_reply(s: &mut TcpStream, wait: Duration) -> Option<Vec<u8>> {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut mark = [0u8; 4];
    match s.read_exact(&mut mark) {
        Ok(()) => {}
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return None,
        Err(e) => panic!("reading reply: {e}"),
    }
    let m = u32::from_be_bytes(mark);
    assert!(m & 0x8000_0000 != 0, "one-fragment replies expected");
    let mut body = vec![0u8; (m & 0x7fff_ffff) as usize];
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s.read_exact(&mut body).expect("reply body");
    Some(body)
}

fn call(s: &mut TcpStream, rec: &[u8]) -> Vec<u8> {
    s.write_all(rec).expect("send");
    read_reply(s, Duration::from_secs(15)).expect("a reply")
}

/// The nfsstat3 of a reply and its xid.
fn status(reply: &[u8]) -> (u32, Nfsstat3) {
    let mut d = Dec::new(reply);
    let (xid, h) = ReplyHeader::decode(&mut d).expect("reply header");
    assert_eq!(
        h,
        ReplyHeader::Accepted(rnfsd_proto::rpc::AcceptStat::Success)
    );
    let st = Nfsstat3::decode(&mut d).expect("nfsstat3");
    (xid, st)
}

fn create_guarded(dir: &NfsFh3, name: &str) -> Create3Args {
    Create3Args {
        where_: dirop(dir, name),
        how: CreateHow3::Guarded(sattr_mode(0o644)),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn create_guarded_retransmission_gets_the_cached_reply() {
    let (_dir, _cfg, srv) = start("drc-create", "", &[]);
    let root = root_handle(&srv).await;
    let mut s = conn(&srv);
    let rec = record(0x1111, NFSPROC3_CREATE, &create_guarded(&root, "f"));
    let first = call(&mut s, &rec);
    assert_eq!(status(&first), (0x1111, Nfsstat3::Ok));
    let again = call(&mut s, &rec);
    assert_eq!(again, first, "retransmission executed again");
    // A new xid is a new call: GUARDED over the file now fails.
    let other = call(
        &mut s,
        &record(0x1112, NFSPROC3_CREATE, &create_guarded(&root, "f")),
    );
    assert_eq!(status(&other), (0x1112, Nfsstat3::Exist));
}

#[tokio::test(flavor = "multi_thread")]
async fn remove_retransmission_gets_ok_not_noent() {
    let (dir, _cfg, srv) = start("drc-remove", "", &[]);
    std::fs::write(dir.path().join("victim"), b"x").unwrap();
    let root = root_handle(&srv).await;
    let mut s = conn(&srv);
    let args = Remove3Args {
        object: dirop(&root, "victim"),
    };
    let rec = record(0x2222, NFSPROC3_REMOVE, &args);
    let first = call(&mut s, &rec);
    assert_eq!(status(&first), (0x2222, Nfsstat3::Ok));
    assert!(!dir.path().join("victim").exists());
    assert_eq!(call(&mut s, &rec), first);
    let other = call(&mut s, &record(0x2223, NFSPROC3_REMOVE, &args));
    assert_eq!(status(&other), (0x2223, Nfsstat3::NoEnt));
}

#[tokio::test(flavor = "multi_thread")]
async fn retransmission_after_expiry_runs_again() {
    let (_dir, _cfg, srv) = start("drc-expiry", "drc_expiry_secs = 1", &[]);
    let root = root_handle(&srv).await;
    let mut s = conn(&srv);
    let rec = record(0x3333, NFSPROC3_CREATE, &create_guarded(&root, "f"));
    assert_eq!(status(&call(&mut s, &rec)).1, Nfsstat3::Ok);
    assert_eq!(status(&call(&mut s, &rec)).1, Nfsstat3::Ok, "within expiry");
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(
        status(&call(&mut s, &rec)).1,
        Nfsstat3::Exist,
        "after expiry"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_cache_off_a_retransmission_runs_again() {
    // The control for the cases above: the same exchange without a cache.
    let (_dir, _cfg, srv) = start("drc-off", "drc_max_bytes = 0", &[]);
    let root = root_handle(&srv).await;
    let mut s = conn(&srv);
    let rec = record(0x4444, NFSPROC3_CREATE, &create_guarded(&root, "f"));
    assert_eq!(status(&call(&mut s, &rec)).1, Nfsstat3::Ok);
    assert_eq!(status(&call(&mut s, &rec)).1, Nfsstat3::Exist);
}

#[tokio::test(flavor = "multi_thread")]
async fn another_connection_port_is_another_client() {
    let (_dir, _cfg, srv) = start("drc-port", "", &[]);
    let root = root_handle(&srv).await;
    let rec = record(0x5555, NFSPROC3_CREATE, &create_guarded(&root, "f"));
    let mut a = conn(&srv);
    assert_eq!(status(&call(&mut a, &rec)).1, Nfsstat3::Ok);
    let mut b = conn(&srv);
    assert_eq!(status(&call(&mut b, &rec)).1, Nfsstat3::Exist);
}

#[tokio::test(flavor = "multi_thread")]
async fn duplicate_of_a_call_in_progress_is_dropped() {
    let (dir, _cfg, srv) = start("drc-inprogress", "", &["--threads", "4"]);
    let root = root_handle(&srv).await;
    // The duplicate must arrive while the original is still in its fsync.
    // Another test's sync of the same filesystem may flush the dirty pages
    // first and make the write quick: then the duplicate rightly finds it
    // done and is replayed, and the try is made again (a few times).
    for attempt in 0u32..3 {
        let name = format!("big{attempt}");
        let fh = {
            let m = bounded(mount(&srv)).await;
            create_file(&m.nfs, &root, &name).await.0
        };
        // Make the FILE_SYNC write slow: its fsync must first flush 64 MiB
        // of dirty pages written behind the server's back (the temp dir is
        // on a disk filesystem, not tmpfs).
        {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(dir.path().join(&name))
                .unwrap();
            let chunk = vec![0x5au8; 1 << 20];
            for _ in 0..64 {
                f.write_all(&chunk).unwrap();
            }
        }
        let rec = record(
            0x6666 + attempt,
            NFSPROC3_WRITE,
            &Write3Args {
                file: fh,
                offset: 0,
                count: 4096,
                stable: StableHow::FileSync,
                data: vec![0xab; 4096],
            },
        );
        let mut s = conn(&srv);
        // Original and duplicate in one send.
        let mut both = rec.clone();
        both.extend_from_slice(&rec);
        let t0 = std::time::Instant::now();
        s.write_all(&both).expect("send");
        let first = read_reply(&mut s, Duration::from_secs(30)).expect("the first reply");
        let took = t0.elapsed();
        assert_eq!(status(&first), (0x6666 + attempt, Nfsstat3::Ok));
        let second = read_reply(&mut s, Duration::from_millis(700));
        if second.is_some() && took < Duration::from_millis(300) && attempt < 2 {
            // The write was quick: no duplicate could find it in progress.
            continue;
        }
        assert_eq!(
            second, None,
            "the in-progress duplicate was answered (the write took {took:?})"
        );
        // The connection still works, and a later retransmission is replayed.
        assert_eq!(call(&mut s, &rec), first);
        assert_eq!(
            std::fs::metadata(dir.path().join(&name)).unwrap().len(),
            64 << 20
        );
        return;
    }
}
