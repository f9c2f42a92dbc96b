//! NFSv4.1 read delegations against the real server over TCP (RFC 8881
//! §10.4, §18.16, §18.6, §20.2): granted to a client whose back channel
//! answers, recalled (CB_RECALL) by another NFSv4 client's OPEN for
//! write or WRITE and by NFSv3 WRITE, SETATTR, REMOVE, RENAME, LINK and
//! CREATE UNCHECKED over the file,
//! the conflicting call answered NFS4ERR_DELAY / NFS3ERR_JUKEBOX until
//! the holder's DELEGRETURN; a holder that does not return it is revoked
//! after the lease (NFS4ERR_DELEG_REVOKED,
//! SEQ4_STATUS_RECALLABLE_STATE_REVOKED); another NFSv4 client's WRITE,
//! SETATTR, RENAME, LINK and REMOVE; the per-client bound; on by
//! default. A program on the server's host that opens a delegated file
//! for writing or truncates it is held by the server's Linux file lease
//! until the delegation is returned or revoked, and recalls it; the
//! holder's own WRITE does too; `nfs4_max_leases` bounds the delegated
//! files; a file open for writing gets none.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common;

use common::nfs::*;
use common::{export_table, write_config, TempDir, TestServer};
use rnfsd_client::nfs4::OpenArgs;
use rnfsd_client::{ClientConfig, ClientError, Nfs4Client, Nfs4Config};
use rnfsd_proto::nfs3::{NfsRes, Nfsstat3};
use rnfsd_proto::nfs4::*;

/// The lease (and so the recall deadline) of these servers.
const LEASE_SECS: u64 = 4;

fn start(tag: &str, extra: &str) -> (TempDir, TempDir, TestServer) {
    start_lease(tag, extra, LEASE_SECS)
}

pub(crate) fn start_lease(tag: &str, extra: &str, lease: u64) -> (TempDir, TempDir, TestServer) {
    let dir = TempDir::new(tag);
    let cfgdir = TempDir::new(&format!("{tag}-cfg"));
    let state = TempDir::new(&format!("{tag}-state"));
    let cfg = write_config(
        cfgdir.path(),
        &format!(
            "[server]\nnfs4 = true\nregister_rpcbind = false\n\
             nfs4_lease_secs = {lease}\n{extra}\n{}",
            export_table(dir.path(), "")
        ),
    );
    let srv = TestServer::start_config(Path::new(&cfg), dir.path(), state, &[]);
    (dir, cfgdir, srv)
}

/// A client with a back channel whose CB_NULL probe was answered.
async fn client(srv: &TestServer) -> Nfs4Client {
    common::nfs4::back_channel_client(srv, "nfs4-deleg").await
}

fn read_wanting(name: &str) -> OpenArgs {
    OpenArgs {
        access: OPEN4_SHARE_ACCESS_READ | OPEN4_SHARE_ACCESS_WANT_READ_DELEG,
        ..OpenArgs::read(name)
    }
}

fn write_open(name: &str) -> OpenArgs {
    OpenArgs {
        access: OPEN4_SHARE_ACCESS_WRITE,
        owner: Some(b"writer".to_vec()),
        ..OpenArgs::read(name)
    }
}

/// Opens `name` for reading with a read delegation: its stateid and
/// the file's handle.
async fn delegated(c: &Nfs4Client, root: &NfsFh4, name: &str) -> (Stateid4, NfsFh4) {
    let o = c.open(root, &read_wanting(name)).await.expect("OPEN");
    match o.delegation {
        OpenDelegation4::Read(r) => (r.stateid, o.fh),
        d => panic!("no read delegation: {d:?}"),
    }
}

fn is_delay<T: std::fmt::Debug>(r: &Result<T, ClientError>) -> bool {
    matches!(
        r,
        Err(ClientError::Nfs4 {
            status: Nfsstat4::Delay,
            ..
        })
    )
}

/// Waits until `c` got a CB_RECALL of `sid`.
async fn recalled(c: &Nfs4Client, sid: &Stateid4) {
    let t0 = Instant::now();
    while !c.recalls().iter().any(|r| r.stateid.other == sid.other) {
        assert!(t0.elapsed() < Duration::from_secs(10), "no CB_RECALL came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_open_for_write_recalls_and_waits_for_the_return() {
    let (dir, _cfg, srv) = start("deleg-open", "");
    std::fs::write(dir.path().join("f"), b"hello").unwrap();
    bounded(async {
        let a = client(&srv).await;
        let b = client(&srv).await;
        let root = common::nfs4::root_of(&a, &dir).await;
        let (sid, fh) = delegated(&a, &root, "f").await;
        // The holder reads with its delegation stateid.
        assert_eq!(a.read_all(&fh, &sid).await.unwrap(), b"hello");
        // No OPEN4_SHARE_ACCESS_WANT: a read open may still get one;
        // asking for none is told why not (§18.16.3).
        let o = b
            .open(
                &root,
                &OpenArgs {
                    access: OPEN4_SHARE_ACCESS_READ | OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
                    ..OpenArgs::read("f")
                },
            )
            .await
            .unwrap();
        assert_eq!(
            o.delegation,
            OpenDelegation4::NoneExt(OpenNoneDelegation4::Why(WhyNoDelegation4::NotWanted))
        );
        // b's OPEN for write conflicts: DELAY, and a is recalled.
        let r = b.open(&root, &write_open("f")).await;
        assert!(is_delay(&r), "OPEN for write under a delegation: {r:?}");
        recalled(&a, &sid).await;
        assert!(
            is_delay(&b.open(&root, &write_open("f")).await),
            "still held"
        );
        a.delegreturn(&fh, &sid).await.unwrap();
        let w = b
            .open(&root, &write_open("f"))
            .await
            .expect("after DELEGRETURN");
        b.write(&w.fh, &w.stateid, 0, b"HELLO", StableHow4::FileSync)
            .await
            .unwrap();
        // The returned delegation is gone; a new one is not granted
        // while b writes (nor soon after a recall).
        let again = a.open(&root, &read_wanting("f")).await.unwrap();
        assert!(
            matches!(again.delegation, OpenDelegation4::NoneExt(_)),
            "{:?}",
            again.delegation
        );
        assert!(a.delegreturn(&fh, &sid).await.is_err());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn nfsv3_changes_recall_and_get_jukebox_until_returned() {
    let (dir, _cfg, srv) = start("deleg-v3", "");
    for n in ["w", "s", "r", "m", "l", "c"] {
        std::fs::write(dir.path().join(n), b"data").unwrap();
    }
    bounded(async {
        let a = client(&srv).await;
        let ret = a.return_on_recall(Duration::from_millis(20));
        let root = common::nfs4::root_of(&a, &dir).await;
        let v3 = mount(&srv).await;
        let fh = |n: &'static str| {
            let v3 = &v3;
            async move { lookup(&v3.nfs, &v3.root, n).await }
        };
        // Each change: JUKEBOX first, then (the holder returns its
        // delegation on the recall) it goes through.
        async fn retried<T, F, Fut>(what: &str, mut f: F) -> (bool, T)
        where
            F: FnMut() -> Fut,
            Fut: std::future::Future<Output = (Option<Nfsstat3>, T)>,
        {
            let mut jukebox = false;
            let t0 = Instant::now();
            loop {
                match f().await {
                    (Some(Nfsstat3::Jukebox), _) => jukebox = true,
                    (None, v) => return (jukebox, v),
                    (Some(s), _) => panic!("{what}: {s}"),
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "{what} never went through"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        fn status<T, F>(r: Result<NfsRes<T, F>, ClientError>) -> (Option<Nfsstat3>, ()) {
            match r {
                Ok(NfsRes::Ok(_)) => (None, ()),
                Ok(NfsRes::Fail(s, _)) => (Some(s), ()),
                Err(e) => panic!("RPC: {e}"),
            }
        }

        let (sid, _) = delegated(&a, &root, "w").await;
        let w = fh("w").await;
        let (j, ()) = retried("WRITE", || async {
            status(
                v3.nfs
                    .write(&rnfsd_proto::nfs3::Write3Args {
                        file: w.clone(),
                        offset: 0,
                        count: 4,
                        stable: rnfsd_proto::nfs3::StableHow::FileSync,
                        data: b"DATA".to_vec(),
                    })
                    .await,
            )
        })
        .await;
        assert!(j, "WRITE: JUKEBOX while the delegation was held");
        recalled(&a, &sid).await;
        assert_eq!(std::fs::read(dir.path().join("w")).unwrap(), b"DATA");

        delegated(&a, &root, "s").await;
        let s = fh("s").await;
        let (j, ()) = retried("SETATTR", || async {
            status(
                v3.nfs
                    .setattr(&rnfsd_proto::nfs3::SetAttr3Args {
                        object: s.clone(),
                        new_attributes: rnfsd_proto::nfs3::Sattr3 {
                            size: Some(0),
                            ..Default::default()
                        },
                        guard: None,
                    })
                    .await,
            )
        })
        .await;
        assert!(j, "SETATTR");

        delegated(&a, &root, "r").await;
        let (j, ()) = retried("RENAME", || async {
            status(
                v3.nfs
                    .rename(&rnfsd_proto::nfs3::Rename3Args {
                        from: dirop(&v3.root, "r"),
                        to: dirop(&v3.root, "r2"),
                    })
                    .await,
            )
        })
        .await;
        assert!(j, "RENAME");

        delegated(&a, &root, "l").await;
        let l = fh("l").await;
        let (j, ()) = retried("LINK", || async {
            status(
                v3.nfs
                    .link(&rnfsd_proto::nfs3::Link3Args {
                        file: l.clone(),
                        link: dirop(&v3.root, "l2"),
                    })
                    .await,
            )
        })
        .await;
        assert!(j, "LINK");

        delegated(&a, &root, "c").await;
        let (j, ()) = retried("CREATE UNCHECKED", || async {
            status(
                v3.nfs
                    .create(&rnfsd_proto::nfs3::Create3Args {
                        where_: dirop(&v3.root, "c"),
                        how: rnfsd_proto::nfs3::CreateHow3::Unchecked(rnfsd_proto::nfs3::Sattr3 {
                            size: Some(0),
                            ..Default::default()
                        }),
                    })
                    .await,
            )
        })
        .await;
        assert!(j, "CREATE UNCHECKED over the file");
        assert_eq!(std::fs::read(dir.path().join("c")).unwrap(), b"");

        delegated(&a, &root, "m").await;
        let (j, ()) = retried("REMOVE", || async {
            status(
                v3.nfs
                    .remove(&rnfsd_proto::nfs3::Remove3Args {
                        object: dirop(&v3.root, "m"),
                    })
                    .await,
            )
        })
        .await;
        assert!(j, "REMOVE");
        assert!(!dir.path().join("m").exists());
        ret.abort();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_holder_that_does_not_return_is_revoked_after_the_lease() {
    let (dir, _cfg, srv) = start("deleg-revoke", "");
    std::fs::write(dir.path().join("f"), b"x").unwrap();
    bounded(async {
        let a = client(&srv).await;
        a.ignore_recalls(true);
        let b = client(&srv).await;
        let root = common::nfs4::root_of(&a, &dir).await;
        let (sid, fh) = delegated(&a, &root, "f").await;
        let t0 = Instant::now();
        let w = loop {
            let r = b.open(&root, &write_open("f")).await;
            match r {
                Ok(w) => break w,
                Err(_) if is_delay(&r) => {}
                Err(e) => panic!("OPEN: {e}"),
            }
            // The holder keeps its lease; only the delegation goes.
            a.run(&[]).await.unwrap();
            assert!(
                t0.elapsed() < Duration::from_secs(4 * LEASE_SECS),
                "never revoked"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let waited = t0.elapsed();
        assert!(
            waited >= Duration::from_secs(LEASE_SECS) - Duration::from_millis(500),
            "revoked after the lease, not before ({waited:?})"
        );
        recalled(&a, &sid).await;
        b.write(&w.fh, &w.stateid, 0, b"y", StableHow4::FileSync)
            .await
            .unwrap();
        let r = a.read(&fh, &sid, 0, 10).await;
        assert!(
            matches!(
                r,
                Err(ClientError::Nfs4 {
                    status: Nfsstat4::DelegRevoked,
                    ..
                })
            ),
            "READ with a revoked delegation: {r:?}"
        );
        a.run(&[]).await.unwrap();
        assert_ne!(
            a.status_flags() & SEQ4_STATUS_RECALLABLE_STATE_REVOKED,
            0,
            "SEQUENCE says a delegation was revoked"
        );
        let r = a
            .run(&[ArgOp::TestStateid(TestStateid4Args {
                stateids: vec![sid],
            })])
            .await
            .unwrap();
        let Some(ResOp::TestStateid(NfsRes4::Ok(t))) = r.first() else {
            panic!("TEST_STATEID: {r:?}");
        };
        assert_eq!(t.status_codes, vec![Nfsstat4::DelegRevoked]);
        a.run(&[ArgOp::FreeStateid(FreeStateid4Args { stateid: sid })])
            .await
            .unwrap();
        a.run(&[]).await.unwrap();
        assert_eq!(a.status_flags() & SEQ4_STATUS_RECALLABLE_STATE_REVOKED, 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_per_client_bound_holds_and_no_back_channel_gets_none() {
    let (dir, _cfg, srv) = start("deleg-bound", "nfs4_delegations_per_client = 2");
    for i in 0..3 {
        std::fs::write(dir.path().join(format!("f{i}")), b"x").unwrap();
    }
    bounded(async {
        let a = client(&srv).await;
        let root = common::nfs4::root_of(&a, &dir).await;
        delegated(&a, &root, "f0").await;
        delegated(&a, &root, "f1").await;
        let o = a.open(&root, &read_wanting("f2")).await.unwrap();
        assert_eq!(
            o.delegation,
            OpenDelegation4::NoneExt(OpenNoneDelegation4::Resource {
                server_will_signal_avail: false
            }),
            "a third is past nfs4_delegations_per_client"
        );
        // A client without a back channel gets none.
        let cfg = ClientConfig {
            auth: rnfsd_client::Auth::sys(0, 0, &[], "nfs4-deleg"),
            ..ClientConfig::default()
        };
        let plain = Nfs4Client::connect(srv.addr, &cfg, &Nfs4Config::default())
            .await
            .unwrap();
        let o = plain.open(&root, &read_wanting("f2")).await.unwrap();
        assert!(
            matches!(o.delegation, OpenDelegation4::NoneExt(_)),
            "{:?}",
            o.delegation
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn another_v4_clients_changes_get_delay_until_returned() {
    let (dir, _cfg, srv) = start("deleg-v4", "");
    for n in ["w", "s", "r", "l", "m", "own", "xa", "pu"] {
        std::fs::write(dir.path().join(n), b"data").unwrap();
    }
    bounded(async {
        let a = client(&srv).await;
        let b = client(&srv).await;
        let ret = a.return_on_recall(Duration::from_millis(20));
        let root = common::nfs4::root_of(&a, &dir).await;
        // The anonymous stateid (§8.2.3): no open needed to write.
        let anon = Stateid4 {
            seqid: 0,
            other: [0; 12],
        };
        /// Retries `f` while it answers DELAY: whether it did at first.
        async fn delayed<T: std::fmt::Debug, Fut>(what: &str, mut f: impl FnMut() -> Fut) -> bool
        where
            Fut: std::future::Future<Output = Result<T, ClientError>>,
        {
            let mut delay = false;
            let t0 = Instant::now();
            loop {
                let r = f().await;
                match r {
                    Ok(_) => return delay,
                    Err(_) if is_delay(&r) => delay = true,
                    Err(e) => panic!("{what}: {e}"),
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "{what} never went through"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let (sid, w) = delegated(&a, &root, "w").await;
        assert!(
            delayed("WRITE", || b.write(
                &w,
                &anon,
                0,
                b"DATA",
                StableHow4::FileSync
            ))
            .await,
            "WRITE"
        );
        recalled(&a, &sid).await;
        assert_eq!(std::fs::read(dir.path().join("w")).unwrap(), b"DATA");
        let (_, s) = delegated(&a, &root, "s").await;
        let mode = rnfsd_client::nfs4::SetAttrs4::mode(0o600);
        assert!(
            delayed("SETATTR", || b.setattr(&s, &anon, &mode)).await,
            "SETATTR"
        );
        delegated(&a, &root, "r").await;
        assert!(
            delayed("RENAME", || b.rename(&root, "r", &root, "r2")).await,
            "RENAME"
        );
        let (_, l) = delegated(&a, &root, "l").await;
        assert!(delayed("LINK", || b.link(&l, &root, "l2")).await, "LINK");
        delegated(&a, &root, "m").await;
        assert!(delayed("REMOVE", || b.remove(&root, "m")).await, "REMOVE");
        assert!(!dir.path().join("m").exists());
        // NFSv4.2's changes recall too: SETXATTR (the file's ctime) and
        // DEALLOCATE (its data).
        let b2 = b.with_minor(2);
        delegated(&a, &root, "xa").await;
        let xa = b2.lookup_from(&root, "xa").await.unwrap();
        assert!(
            delayed("SETXATTR", || b2.setxattr(&xa, SETXATTR4_EITHER, "k", "v")).await,
            "SETXATTR"
        );
        delegated(&a, &root, "pu").await;
        let pu = b2.lookup_from(&root, "pu").await.unwrap();
        assert!(
            delayed("DEALLOCATE", || b2.deallocate(&pu, &anon, 0, 2)).await,
            "DEALLOCATE"
        );
        // A file recalled lately gets none for a while (l2 is l).
        let o = a.open(&root, &read_wanting("l2")).await.unwrap();
        assert_eq!(
            o.delegation,
            OpenDelegation4::NoneExt(OpenNoneDelegation4::Contention {
                server_will_push_deleg: false
            })
        );
        // The holder's own changes do not wait.
        let (_, own) = delegated(&a, &root, "own").await;
        a.setattr(&own, &anon, &mode)
            .await
            .expect("the holder's own SETATTR");
        ret.abort();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn on_by_default_and_off_when_set_so() {
    let dir = TempDir::new("deleg-default");
    std::fs::write(dir.path().join("f"), b"x").unwrap();
    let srv = TestServer::start_with(dir.path(), &["--no-rpcbind"]);
    bounded(async {
        let a = client(&srv).await;
        let root = common::nfs4::root_of(&a, &dir).await;
        delegated(&a, &root, "f").await;
    })
    .await;
    drop(srv);
    let (dir, _cfg, srv) = start("deleg-off", "nfs4_delegations = false");
    std::fs::write(dir.path().join("f"), b"x").unwrap();
    bounded(async {
        let a = client(&srv).await;
        let root = common::nfs4::root_of(&a, &dir).await;
        let o = a.open(&root, &read_wanting("f")).await.unwrap();
        assert_eq!(
            o.delegation,
            OpenDelegation4::NoneExt(OpenNoneDelegation4::Resource {
                server_will_signal_avail: false
            }),
            "nfs4_delegations = false grants none"
        );
    })
    .await;
}

/// Runs `f` on a thread of its own (a local program's system call that
/// the kernel may hold): a handle to wait on.
fn local<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> std::thread::JoinHandle<T> {
    std::thread::spawn(f)
}

/// Waits for `h` (at most 30 s): its result, and when it ended.
async fn finished<T: Send + 'static>(h: std::thread::JoinHandle<T>) -> (T, Instant) {
    let t0 = Instant::now();
    while !h.is_finished() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the local program never went on"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (h.join().expect("local program"), Instant::now())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_local_writer_recalls_and_waits_for_the_return_or_revocation() {
    let (dir, _cfg, srv) = start("deleg-local", "");
    for n in ["w", "t"] {
        std::fs::write(dir.path().join(n), b"hello").unwrap();
    }
    bounded(async {
        let a = client(&srv).await;
        let root = common::nfs4::root_of(&a, &dir).await;

        // A local open for writing: held until DELEGRETURN.
        let (sid, fh) = delegated(&a, &root, "w").await;
        assert_eq!(a.read_all(&fh, &sid).await.unwrap(), b"hello");
        let p = dir.path().join("w");
        let writer = local(move || {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().write(true).open(&p)?;
            f.write_all(b"HELLO")
        });
        recalled(&a, &sid).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            !writer.is_finished(),
            "the local writer waits for the return"
        );
        let returned = Instant::now();
        a.delegreturn(&fh, &sid).await.unwrap();
        let (r, done) = finished(writer).await;
        r.expect("the local write");
        assert!(
            done - returned < Duration::from_secs(2),
            "the writer goes on at the return ({:?})",
            done - returned
        );
        let o = a.open(&root, &OpenArgs::read("w")).await.unwrap();
        assert_eq!(a.read_all(&o.fh, &o.stateid).await.unwrap(), b"HELLO");

        // truncate(2) by path, the holder silent: held until revoked
        // (the recall's deadline, nfs4_lease_secs, before the kernel's
        // lease break time).
        a.ignore_recalls(true);
        let (sid, fh) = delegated(&a, &root, "t").await;
        let p = dir.path().join("t");
        let t0 = Instant::now();
        let truncater = local(move || {
            let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid C string.
            match unsafe { libc::truncate(c.as_ptr(), 2) } {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        });
        recalled(&a, &sid).await;
        // The holder keeps its lease; only the delegation goes.
        while !truncater.is_finished() && t0.elapsed() < Duration::from_secs(30) {
            a.run(&[]).await.unwrap();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let (r, done) = finished(truncater).await;
        r.expect("the local truncate");
        let waited = done - t0;
        assert!(
            waited >= Duration::from_secs(LEASE_SECS) - Duration::from_millis(500),
            "held until the revocation ({waited:?})"
        );
        let r = a.read(&fh, &sid, 0, 10).await;
        assert!(
            matches!(
                r,
                Err(ClientError::Nfs4 {
                    status: Nfsstat4::DelegRevoked,
                    ..
                })
            ),
            "READ with the revoked delegation: {r:?}"
        );
        assert_eq!(std::fs::read(dir.path().join("t")).unwrap(), b"he");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_holders_own_write_recalls_its_delegation() {
    let (dir, _cfg, srv) = start("deleg-own-write", "");
    std::fs::write(dir.path().join("f"), b"hello").unwrap();
    bounded(async {
        let a = client(&srv).await;
        let root = common::nfs4::root_of(&a, &dir).await;
        let (sid, fh) = delegated(&a, &root, "f").await;
        let w = a
            .open(&root, &write_open("f"))
            .await
            .expect("own OPEN for write");
        // The server's own open for writing would break the lease:
        // DELAY, and the delegation is recalled.
        let r = a
            .write(&w.fh, &w.stateid, 0, b"HELLO", StableHow4::FileSync)
            .await;
        assert!(is_delay(&r), "WRITE under the holder's lease: {r:?}");
        recalled(&a, &sid).await;
        a.delegreturn(&fh, &sid).await.unwrap();
        a.write(&w.fh, &w.stateid, 0, b"HELLO", StableHow4::FileSync)
            .await
            .expect("WRITE after DELEGRETURN");
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"HELLO");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_holders_own_shared_lock_keeps_its_read_delegation() {
    // knfsd never recalls a delegation for its own holder's LOCK; the
    // Linux client holding one would wait for its LOCK (answered DELAY)
    // before it returned the delegation: stuck until revocation.
    let (dir, _cfg, srv) = start("deleg-own-lock", "");
    std::fs::write(dir.path().join("f"), b"hello").unwrap();
    bounded(async {
        let a = client(&srv).await;
        let root = common::nfs4::root_of(&a, &dir).await;
        let o = a.open(&root, &read_wanting("f")).await.expect("OPEN");
        let OpenDelegation4::Read(d) = o.delegation else {
            panic!("no read delegation: {:?}", o.delegation);
        };
        let locker = a.new_locker(&o.stateid, b"lo");
        let r = a
            .lock(&o.fh, NfsLockType4::Read, 0, u64::MAX, locker)
            .await
            .expect("LOCK");
        assert!(
            matches!(r, Lock4Res::Ok(_)),
            "the holder's shared LOCK: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !a.recalls()
                .iter()
                .any(|r| r.stateid.other == d.stateid.other),
            "the holder's own shared lock recalled its delegation"
        );
        // Another client's write lock conflicts with the shared lock (and
        // its open for writing recalls the delegation: no DENIED before).
        let b = client(&srv).await;
        let w = loop {
            match b.open(&root, &write_open("f")).await {
                Ok(w) => break w,
                Err(e) if is_delay::<()>(&Err(e.clone())) => {
                    if a.recalls()
                        .iter()
                        .any(|r| r.stateid.other == d.stateid.other)
                    {
                        let _ = a.delegreturn(&o.fh, &d.stateid).await;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("OPEN for write: {e:?}"),
            }
        };
        let locker = b.new_locker(&w.stateid, b"lo-b");
        let r = b
            .lock(&w.fh, NfsLockType4::Write, 0, 1, locker)
            .await
            .expect("LOCK");
        assert!(
            matches!(r, Lock4Res::Denied(_)),
            "a write lock over a read one: {r:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn leases_are_bounded_and_none_for_a_file_open_for_writing() {
    let (dir, _cfg, srv) = start("deleg-leases", "nfs4_max_leases = 1");
    for n in ["a", "b", "w"] {
        std::fs::write(dir.path().join(n), b"x").unwrap();
    }
    bounded(async {
        let a = client(&srv).await;
        let root = common::nfs4::root_of(&a, &dir).await;
        let (sid, fh) = delegated(&a, &root, "a").await;
        let o = a.open(&root, &read_wanting("b")).await.unwrap();
        assert_eq!(
            o.delegation,
            OpenDelegation4::NoneExt(OpenNoneDelegation4::Resource {
                server_will_signal_avail: false
            }),
            "a second file is past nfs4_max_leases"
        );
        a.delegreturn(&fh, &sid).await.unwrap();
        // The lease went with the return.
        delegated(&a, &root, "b").await;

        // Open for writing on the server's host: no lease, no delegation.
        let held = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join("w"))
            .unwrap();
        let c = client(&srv).await;
        let o = c.open(&root, &read_wanting("w")).await.unwrap();
        assert!(
            matches!(o.delegation, OpenDelegation4::NoneExt(_)),
            "a file open for writing: {:?}",
            o.delegation
        );
        drop(held);
    })
    .await;
}

/// The CB_SEQUENCE sequence ids of the CB_COMPOUNDs recalling `sid`
/// that `c` got, and the status each was answered with.
fn recall_calls(c: &Nfs4Client, sid: &Stateid4) -> Vec<(u32, Nfsstat4)> {
    use rnfsd_client::nfs4::CbEvent;
    use rnfsd_proto::nfs4::cb::CbArgOp;
    c.callbacks()
        .into_iter()
        .filter_map(|e| match e {
            CbEvent::Compound { ops, status } => {
                let recalls = ops
                    .iter()
                    .any(|o| matches!(o, CbArgOp::Recall(r) if r.stateid.other == sid.other));
                let seq = ops.iter().find_map(|o| match o {
                    CbArgOp::Sequence(s) => Some(s.sequenceid),
                    _ => None,
                });
                recalls.then_some((seq?, status))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_silent_client_holds_up_no_other_and_its_recall_is_sent_again() {
    let (dir, _cfg, srv) = start_lease("deleg-silent", "", 20);
    for n in ["s", "t"] {
        std::fs::write(dir.path().join(n), b"x").unwrap();
    }
    bounded(async {
        let a = client(&srv).await;
        let b = client(&srv).await;
        let w = client(&srv).await;
        let root = common::nfs4::root_of(&a, &dir).await;
        let (sa, fa) = delegated(&a, &root, "s").await;
        let (sb, _) = delegated(&b, &root, "t").await;
        a.ignore_recalls(true);
        assert!(is_delay(&w.open(&root, &write_open("s")).await));
        recalled(&a, &sa).await;
        // a's recall waits for an answer that does not come; b's goes on.
        let t0 = Instant::now();
        assert!(is_delay(&w.open(&root, &write_open("t")).await));
        recalled(&b, &sb).await;
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "b's recall waited for a's silence ({:?})",
            t0.elapsed()
        );
        // Unanswered, a's recall is sent again, the same call on the same
        // slot sequence id (RFC 8881 §2.10.6.3), until answered.
        a.ignore_recalls(false);
        let t0 = Instant::now();
        let calls = loop {
            let calls = recall_calls(&a, &sa);
            if calls.iter().any(|(_, st)| *st == Nfsstat4::Ok) {
                break calls;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(15),
                "never sent again: {calls:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(calls.len() >= 2, "{calls:?}");
        assert_eq!(calls[0].0, calls[1].0, "the same sequence id: {calls:?}");
        a.delegreturn(&fa, &sa).await.unwrap();
        w.open(&root, &write_open("s"))
            .await
            .expect("OPEN for write after the return");
    })
    .await;
}

/// OPEN for reading and writing, wanting a write delegation.
fn both_wanting_write(name: &str) -> OpenArgs {
    OpenArgs {
        access: OPEN4_SHARE_ACCESS_BOTH | OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG,
        ..OpenArgs::read(name)
    }
}

/// Opens `name` for reading and writing with a write delegation: the
/// open's stateid, the delegation's and the file's handle.
async fn write_delegated(
    c: &Nfs4Client,
    root: &NfsFh4,
    name: &str,
) -> (Stateid4, Stateid4, NfsFh4) {
    let o = c.open(root, &both_wanting_write(name)).await.expect("OPEN");
    match o.delegation {
        OpenDelegation4::Write(w) => {
            // We reserve no space: the client writes back by CLOSE.
            assert_eq!(w.space_limit, NfsSpaceLimit4::Size(0));
            (o.stateid, w.stateid, o.fh)
        }
        d => panic!("no write delegation: {d:?}"),
    }
}

/// Size and change of `fh` by GETATTR.
async fn size_change(c: &Nfs4Client, fh: &NfsFh4) -> Result<(u64, u64), ClientError> {
    let mask = Bitmap4::from_bits(&[FATTR4_CHANGE, FATTR4_SIZE]).unwrap();
    let f = c.getattr(fh, &mask).await?;
    let a = rnfsd_client::nfs4::Attrs4::decode(&f)?;
    Ok((a.size().unwrap(), a.change().unwrap()))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_delegation_goes_to_the_sole_opener_and_is_recalled_by_another_open() {
    let (dir, _cfg, srv) = start("deleg-write", "");
    for n in ["f", "g"] {
        std::fs::write(dir.path().join(n), b"hello").unwrap();
    }
    bounded(async {
        let a = client(&srv).await;
        let b = client(&srv).await;
        let root = common::nfs4::root_of(&a, &dir).await;
        let (open, sid, fh) = write_delegated(&a, &root, "f").await;
        // The holder's own WRITE and READ go through under its write
        // lease (the server's descriptor of the file is the lease's).
        a.write(&fh, &open, 0, b"HELLO", StableHow4::FileSync)
            .await
            .expect("the holder's WRITE");
        assert_eq!(a.read_all(&fh, &sid).await.unwrap(), b"HELLO");
        assert!(a.recalls().is_empty(), "nothing recalled by its own I/O");

        // Another opener first: no write delegation, told why.
        let no_deleg = OpenArgs {
            access: OPEN4_SHARE_ACCESS_READ | OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
            ..OpenArgs::read("g")
        };
        b.open(&root, &no_deleg).await.unwrap();
        let o = a.open(&root, &both_wanting_write("g")).await.unwrap();
        assert_eq!(
            o.delegation,
            OpenDelegation4::NoneExt(OpenNoneDelegation4::Contention {
                server_will_push_deleg: false
            })
        );
        // A write-only open gets none either.
        let o = a
            .open(
                &root,
                &OpenArgs {
                    access: OPEN4_SHARE_ACCESS_WRITE,
                    owner: Some(b"w-only".to_vec()),
                    ..OpenArgs::read("g")
                },
            )
            .await
            .unwrap();
        assert!(
            matches!(o.delegation, OpenDelegation4::None),
            "{:?}",
            o.delegation
        );

        // Another client's OPEN, even for reading, recalls it.
        let r = b.open(&root, &OpenArgs::read("f")).await;
        assert!(
            is_delay(&r),
            "OPEN for read under a write delegation: {r:?}"
        );
        recalled(&a, &sid).await;
        assert!(a.recalls().iter().all(|r| r.stateid.other == sid.other));
        a.delegreturn(&fh, &sid).await.unwrap();
        let o = b
            .open(&root, &OpenArgs::read("f"))
            .await
            .expect("after DELEGRETURN");
        assert_eq!(b.read_all(&o.fh, &o.stateid).await.unwrap(), b"HELLO");
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"HELLO");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn another_clients_read_and_nfsv3_read_and_write_recall_a_write_delegation() {
    let (dir, _cfg, srv) = start("deleg-write-v3", "");
    for n in ["r", "w", "v"] {
        std::fs::write(dir.path().join(n), b"hello").unwrap();
    }
    bounded(async {
        let a = client(&srv).await;
        let b = client(&srv).await;
        let root = common::nfs4::root_of(&a, &dir).await;
        let v3 = mount(&srv).await;

        // NFSv3 READ: JUKEBOX until returned.
        let (_, sid, fh) = write_delegated(&a, &root, "r").await;
        let r3 = lookup(&v3.nfs, &v3.root, "r").await;
        let read3 = || async {
            v3.nfs
                .read(&rnfsd_proto::nfs3::Read3Args {
                    file: r3.clone(),
                    offset: 0,
                    count: 100,
                })
                .await
                .unwrap()
        };
        match read3().await {
            NfsRes::Fail(Nfsstat3::Jukebox, _) => {}
            r => panic!("NFSv3 READ under a write delegation: {r:?}"),
        }
        recalled(&a, &sid).await;
        assert!(matches!(read3().await, NfsRes::Fail(Nfsstat3::Jukebox, _)));
        a.delegreturn(&fh, &sid).await.unwrap();
        match read3().await {
            NfsRes::Ok(r) => assert_eq!(r.data, b"hello"),
            r => panic!("after DELEGRETURN: {r:?}"),
        }

        // NFSv3 WRITE.
        let (_, sid, fh) = write_delegated(&a, &root, "w").await;
        let w3 = lookup(&v3.nfs, &v3.root, "w").await;
        let write3 = || async {
            v3.nfs
                .write(&rnfsd_proto::nfs3::Write3Args {
                    file: w3.clone(),
                    offset: 0,
                    count: 4,
                    stable: rnfsd_proto::nfs3::StableHow::FileSync,
                    data: b"DATA".to_vec(),
                })
                .await
                .unwrap()
        };
        assert!(matches!(write3().await, NfsRes::Fail(Nfsstat3::Jukebox, _)));
        recalled(&a, &sid).await;
        a.delegreturn(&fh, &sid).await.unwrap();
        assert!(matches!(write3().await, NfsRes::Ok(_)));
        assert_eq!(std::fs::read(dir.path().join("w")).unwrap(), b"DATAo");

        // Another NFSv4 client's READ with the anonymous stateid.
        let (_, sid, fh) = write_delegated(&a, &root, "v").await;
        let r = b.read(&fh, &Stateid4::ANONYMOUS, 0, 10).await;
        assert!(is_delay(&r), "READ under a write delegation: {r:?}");
        recalled(&a, &sid).await;
        a.delegreturn(&fh, &sid).await.unwrap();
        let r = b.read(&fh, &Stateid4::ANONYMOUS, 0, 10).await.unwrap();
        assert_eq!(r.data, b"hello");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_local_reader_recalls_a_write_delegation_and_waits_for_the_return() {
    let (dir, _cfg, srv) = start("deleg-write-local", "");
    std::fs::write(dir.path().join("f"), b"hello").unwrap();
    bounded(async {
        let a = client(&srv).await;
        let root = common::nfs4::root_of(&a, &dir).await;
        let (open, sid, fh) = write_delegated(&a, &root, "f").await;
        a.write(&fh, &open, 0, b"HELLO", StableHow4::FileSync)
            .await
            .unwrap();
        // A write lease breaks on any open, for reading too.
        let p = dir.path().join("f");
        let reader = local(move || std::fs::read(&p));
        recalled(&a, &sid).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            !reader.is_finished(),
            "the local reader waits for the return"
        );
        a.delegreturn(&fh, &sid).await.unwrap();
        let (r, _) = finished(reader).await;
        assert_eq!(r.expect("the local read"), b"HELLO");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cb_getattr_answers_for_the_holder_and_a_silent_holder_is_recalled() {
    // A lease long enough for a recall sent again after a silence
    // (CB_WAIT, then RECALL_RETRY) to come before the revocation.
    let (dir, _cfg, srv) = start_lease("deleg-cbgetattr", "", 20);
    std::fs::write(dir.path().join("f"), b"hello").unwrap();
    bounded(async {
        let a = client(&srv).await;
        let b = client(&srv).await;
        let root = common::nfs4::root_of(&a, &dir).await;
        let (_, sid, fh) = write_delegated(&a, &root, "f").await;
        let (size0, change0) = size_change(&a, &fh).await.unwrap();
        assert_eq!(size0, 5);
        let asked = |c: &Nfs4Client| {
            c.callbacks()
                .iter()
                .filter(|e| {
                    matches!(e, rnfsd_client::nfs4::CbEvent::Compound { ops, .. }
                        if ops.iter().any(|o| matches!(o, rnfsd_proto::nfs4::cb::CbArgOp::GetAttr(_))))
                })
                .count()
        };
        // The holder's own GETATTR asks nobody.
        assert_eq!(asked(&a), 0);
        // Unchanged by the holder: the server's own.
        a.answer_cb_getattr(Some((size0, change0)));
        assert_eq!(size_change(&b, &fh).await.unwrap(), (size0, change0));
        assert_eq!(asked(&a), 1, "one CB_GETATTR");
        // Changed by the holder (cached writes): its size, and a change
        // past any seen.
        a.answer_cb_getattr(Some((9, change0 + 1)));
        let mtime0 = std::fs::metadata(dir.path().join("f"))
            .unwrap()
            .modified()
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let (size, change) = size_change(&b, &fh).await.unwrap();
        assert_eq!(size, 9);
        assert!(change > change0, "change moves on: {change} > {change0}");
        // The file's mtime moved (a stat opens nothing: no recall); its
        // size is the server's until the holder writes back.
        let m = std::fs::metadata(dir.path().join("f")).unwrap();
        assert!(m.modified().unwrap() > mtime0, "mtime moved on");
        assert_eq!(m.len(), 5);
        // Attributes not size or change ask nobody.
        let n = asked(&a);
        b.getattr(&fh, &Bitmap4::from_bits(&[FATTR4_MODE]).unwrap())
            .await
            .unwrap();
        assert_eq!(asked(&a), n);
        assert!(a.recalls().is_empty());
        // A holder that does not answer in time is recalled: DELAY
        // meanwhile. (The recall follows the CB_GETATTR sent again, once
        // the holder answers again.)
        a.ignore_cb_getattrs(true);
        let r = size_change(&b, &fh).await;
        assert!(is_delay(&r), "GETATTR of a silent holder's file: {r:?}");
        a.ignore_cb_getattrs(false);
        recalled(&a, &sid).await;
        assert!(is_delay(&size_change(&b, &fh).await), "still held");
        a.delegreturn(&fh, &sid).await.unwrap();
        assert_eq!(size_change(&b, &fh).await.unwrap().0, 5);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn write_delegations_are_bounded_and_granted_again_after_use() {
    let (dir, _cfg, srv) = start("deleg-write-bound", "nfs4_max_leases = 1");
    for n in ["a", "b", "c"] {
        std::fs::write(dir.path().join(n), b"x").unwrap();
    }
    bounded(async {
        let a = client(&srv).await;
        let root = common::nfs4::root_of(&a, &dir).await;
        let (_, sid, fh) = write_delegated(&a, &root, "a").await;
        let o = a.open(&root, &both_wanting_write("b")).await.unwrap();
        assert_eq!(
            o.delegation,
            OpenDelegation4::NoneExt(OpenNoneDelegation4::Resource {
                server_will_signal_avail: false
            }),
            "a second file is past nfs4_max_leases"
        );
        a.delegreturn(&fh, &sid).await.unwrap();
        // The lease went with the return: another file gets one now.
        let (_, csid, cfh) = write_delegated(&a, &root, "c").await;
        a.delegreturn(&cfh, &csid).await.unwrap();

        // Used (the server's descriptors of it cached), returned and
        // closed, a file gets a read delegation, then a write one again.
        let (open, sid, fh) = write_delegated(&a, &root, "b").await;
        a.write(&fh, &open, 0, b"y", StableHow4::FileSync)
            .await
            .unwrap();
        assert_eq!(a.read_all(&fh, &open).await.unwrap(), b"y");
        a.delegreturn(&fh, &sid).await.unwrap();
        a.close(&fh, &open).await.unwrap();
        let (rsid, _) = delegated(&a, &root, "b").await;
        a.delegreturn(&fh, &rsid).await.unwrap();
        let (_, wsid, _) = write_delegated(&a, &root, "b").await;
        a.delegreturn(&fh, &wsid).await.unwrap();
    })
    .await;
}

/// Whether a local program's write lock on `0..len` of `path` is refused
/// now (an OFD lock through its own open).
fn locally_locked(path: &Path, len: i64) -> bool {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    // SAFETY: zeroed is a valid flock.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as _;
    fl.l_whence = libc::SEEK_SET as _;
    fl.l_len = len;
    // SAFETY: a valid descriptor and flock.
    unsafe { libc::fcntl(f.as_raw_fd(), libc::F_OFD_SETLK, &fl) == -1 }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_returning_write_holder_sends_its_locks_then_returns() {
    // The Linux client keeps a write delegation's locks to itself and,
    // recalled, sends them as LOCKs before its DELEGRETURN, which it
    // sends only once they are granted: a LOCK answered NFS4ERR_DELAY
    // (the lock owner's new open would break the server's own write
    // lease) held the delegation, and a local program waiting on its
    // lease break, until the revocation.
    let (dir, _cfg, srv) = start("deleg-write-return-locks", "");
    let path = dir.path().join("f");
    std::fs::write(&path, b"hello").unwrap();
    bounded(async {
        let a = client(&srv).await;
        let root = common::nfs4::root_of(&a, &dir).await;
        let (open, sid, fh) = write_delegated(&a, &root, "f").await;
        // A local program opens the file: the lease breaks, the
        // delegation is recalled, the program waits.
        let p = path.clone();
        let prog = local(move || locally_locked(&p, 10));
        recalled(&a, &sid).await;
        let t0 = Instant::now();
        // The holder's locks, sent during its return, by two owners.
        for (owner, start) in [(&b"lo-1"[..], 0), (&b"lo-2"[..], 5)] {
            let r = a
                .lock(
                    &fh,
                    NfsLockType4::Write,
                    start,
                    5,
                    a.new_locker(&open, owner),
                )
                .await
                .expect("LOCK");
            assert!(
                matches!(r, Lock4Res::Ok(_)),
                "the returning holder's LOCK: {r:?}"
            );
        }
        a.delegreturn(&fh, &sid).await.unwrap();
        let (refused, _) = finished(prog).await;
        assert!(
            t0.elapsed() < Duration::from_secs(LEASE_SECS),
            "the program waited for a revocation"
        );
        assert!(refused, "the program's lock must meet the holder's");
        // Another client's lock meets them too.
        let b = client(&srv).await;
        let w = b.open(&root, &write_open("f")).await.expect("OPEN");
        let r = b
            .lock(
                &w.fh,
                NfsLockType4::Write,
                7,
                1,
                b.new_locker(&w.stateid, b"lo-b"),
            )
            .await
            .expect("LOCK");
        assert!(matches!(r, Lock4Res::Denied(_)), "{r:?}");
        assert!(locally_locked(&path, 10), "still held after the return");
    })
    .await;
}
