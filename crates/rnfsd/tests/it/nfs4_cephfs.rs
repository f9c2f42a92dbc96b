//! NFSv4.1 over a CephFS export, against a real cluster: the operations
//! a client needs through the pseudo-filesystem into the export, on two
//! heads serving one CephFS directory (`cephfs`'s setup and skip rules:
//! RNFSD_CEPH_CONF names the cluster); byte-range locks that are CephFS
//! locks, so NFSv4 owners on either head and NLM clients conflict; and
//! what a head's death does to its clients' NFSv4 state (each head keeps
//! its own: docs/scale-out.md, "NFSv4.1").

use std::path::Path;
use std::time::{Duration, Instant};

use crate::cephfs::{
    bounded_ceph, ceph_conf, pattern, Head, Scratch, Third, CEPH_TEST_TIMEOUT, CLUSTER, MNT,
};
use crate::common;
use common::nfs4::chan;

use common::nfs::*;
use common::{TempDir, TestServer};
use rnfsd_client::nfs3::{Ftype3, NfsFh3};
use rnfsd_client::nfs4::{common_mask, Attrs4, OpenArgs, OpenHow, SetAttrs4};
use rnfsd_client::{Auth, ClientConfig, ClientError, Nfs4Client, Nfs4Config, Nfs4Rpc, NlmClient};
use rnfsd_proto::nfs4::*;
use rnfsd_proto::nlm::{NetObj, Nlm4Stats, Nlm4TestArgs, Nlm4TestRply};

/// A head of the scratch directory serving NFSv4.1 too, with state
/// directory `state`.
fn v4_head(scratch: &Scratch, state: TempDir) -> Head {
    Head(TestServer::start_config(
        Path::new(&scratch.head_cfg_file),
        Path::new(MNT),
        state,
        &["--no-rpcbind"],
    ))
}

/// Heads A and B (A's handle key), both serving NFSv4.1.
fn v4_heads(scratch: &Scratch) -> (Head, Head) {
    let a = v4_head(scratch, TempDir::new("ceph4-a"));
    let b = v4_head(scratch, a.copy_handle_key("ceph4-b"));
    (a, b)
}

/// Heads A and B as `v4_heads`, with one NFSv4 boot verifier (as heads
/// started within one second have: it is the start's time in seconds):
/// their ids then differ only by what is random in each.
fn v4_heads_one_boot(scratch: &Scratch) -> (Head, Head) {
    let boot = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        + 100;
    // Each start takes the recorded boot verifier plus one.
    let seed = |state: &TempDir| {
        let dir = state.path().join("nfs4");
        std::fs::create_dir_all(&dir).expect("nfs4 records");
        std::fs::write(dir.join("boot"), format!("{}\n", boot - 1)).expect("boot");
    };
    let sa = TempDir::new("ceph4-a");
    seed(&sa);
    let a = v4_head(scratch, sa);
    let sb = a.copy_handle_key("ceph4-b");
    seed(&sb);
    let b = v4_head(scratch, sb);
    (a, b)
}

/// Bound on one call: a head's first call on a file a dead head held
/// waits for the MDS to end that head's session (the filesystem's
/// `session_timeout`, 30 s on the test cluster; docs/scale-out.md).
const CALL_TIMEOUT: Duration = Duration::from_secs(75);

fn client_cfg() -> ClientConfig {
    ClientConfig {
        auth: Auth::sys(0, 0, &[], "nfs4-ceph"),
        timeout: Some(CALL_TIMEOUT),
        ..ClientConfig::default()
    }
}

/// A new NFSv4.1 client of `srv` (a session, RECLAIM_COMPLETE sent).
async fn v4(srv: &TestServer) -> Nfs4Client {
    Nfs4Client::connect(srv.addr, &client_cfg(), &Nfs4Config::default())
        .await
        .expect("NFSv4.1 session")
}

/// Client `owner` (a fixed verifier: the same client instance on every
/// head) with a session on `srv`; `complete`: RECLAIM_COMPLETE sent.
async fn v4_owner(srv: &TestServer, owner: &str, complete: bool) -> Nfs4Client {
    let cfg = Nfs4Config {
        owner: Some(owner.as_bytes().to_vec()),
        verifier: Some(Verifier4(*b"ceph-v4!")),
        reclaim_complete: complete,
        ..Nfs4Config::default()
    };
    Nfs4Client::connect(srv.addr, &client_cfg(), &cfg)
        .await
        .expect("NFSv4.1 session")
}

fn status<T: std::fmt::Debug>(r: Result<T, ClientError>) -> Nfsstat4 {
    match r {
        Err(ClientError::Nfs4 { status, .. }) => status,
        other => panic!("expected an NFSv4 error, got {other:?}"),
    }
}

fn names(entries: &[Entry4]) -> Vec<String> {
    let mut v: Vec<String> = entries
        .iter()
        .map(|e| String::from_utf8_lossy(&e.name.0).into_owned())
        .collect();
    v.sort();
    v
}

fn v3(fh: &NfsFh4) -> NfsFh3 {
    NfsFh3::new(fh.0.clone())
}

/// LOCK of `len` bytes at `off` for a new lock owner `owner` of `open`.
async fn lock_new(
    c: &Nfs4Client,
    fh: &NfsFh4,
    write: bool,
    off: u64,
    len: u64,
    open: &Stateid4,
    owner: &[u8],
) -> Lock4Res {
    let t = if write {
        NfsLockType4::Write
    } else {
        NfsLockType4::Read
    };
    c.lock(fh, t, off, len, c.new_locker(open, owner))
        .await
        .expect("LOCK compound")
}

fn granted(r: &Lock4Res, what: &str) -> Stateid4 {
    match r {
        Lock4Res::Ok(s) => *s,
        other => panic!("{what}: {other:?}"),
    }
}

/// DENIED by a lock another head or an NLM client holds: this head knows
/// no NFSv4 owner for it (client id 0, an empty owner, as knfsd says).
fn denied_by_stranger(r: &Lock4Res, what: &str, off: u64, len: u64, t: NfsLockType4) {
    match r {
        Lock4Res::Denied(d) => {
            assert_eq!(
                (d.offset, d.length),
                (off, len),
                "{what}: the lock in the way"
            );
            assert_eq!(d.locktype, t, "{what}");
            assert_eq!(
                (d.owner.clientid, d.owner.owner.0.len()),
                (0, 0),
                "{what}: another head's lock has no owner here"
            );
        }
        other => panic!("{what}: expected DENIED, got {other:?}"),
    }
}

async fn nlm_test_denied(nlm: &NlmClient, fh: &NfsFh3, host: &str, off: u64, len: u64) -> bool {
    let t = nlm
        .test(&Nlm4TestArgs {
            cookie: NetObj(b"t".to_vec()),
            exclusive: true,
            alock: nlm_lock(fh, host, 9, off, len),
        })
        .await
        .expect("NLM TEST");
    matches!(t.stat, Nlm4TestRply::Denied(_))
}

// ---------------------------------------------------------------------------
// 1. The operations of a client, on both heads, and what each head sees of
// the other's changes (NFSv4 and NFSv3).

#[tokio::test(flavor = "multi_thread")]
async fn v4_operations_on_a_cephfs_export_across_heads() {
    bounded_ceph(async {
        let Some(scratch) = Scratch::new("v4ops").await else {
            return;
        };
        let (ha, hb) = v4_heads(&scratch);
        let (a, b) = (v4(&ha).await, v4(&hb).await);

        // The pseudo root lists the export; LOOKUP crosses into it, and
        // both heads give the same handle (the handle key and export id).
        let pseudo = a.root_fh().await.expect("PUTROOTFH");
        let listed = a
            .readdir_all(&pseudo, &Bitmap4::new())
            .await
            .expect("READDIR of the pseudo root");
        assert_eq!(names(&listed), ["ceph"]);
        let root = a.lookup_path(MNT).await.expect("LOOKUP into the export");
        assert_eq!(b.lookup_path(MNT).await.expect("on B"), root);
        assert_ne!(root, pseudo);
        let up = a
            .run(&[
                ArgOp::PutFh(PutFh4Args {
                    object: root.clone(),
                }),
                ArgOp::LookupP,
                ArgOp::GetFh,
            ])
            .await
            .expect("LOOKUPP out of the export");
        assert!(
            matches!(up.last(), Some(ResOp::GetFh(NfsRes4::Ok(fh))) if *fh == pseudo),
            "LOOKUPP: {up:?}"
        );
        let ra = a.getattr_decoded(&root).await.expect("GETATTR root");
        assert_eq!(ra.ftype(), Some(NfsFtype4::Dir));

        // OPEN create, WRITE UNSTABLE, COMMIT, READ, CLOSE on A.
        let data = pattern(300_000, 4);
        let o = a
            .open(&root, &OpenArgs::create("f"))
            .await
            .expect("OPEN create");
        assert_ne!(o.rflags & OPEN4_RESULT_LOCKTYPE_POSIX, 0);
        let mut off = 0;
        let mut verf = None;
        for chunk in data.chunks(65_536) {
            let w = a
                .write(&o.fh, &o.stateid, off, chunk, StableHow4::Unstable)
                .await
                .expect("WRITE");
            assert_eq!(w.count as usize, chunk.len());
            assert_eq!(*verf.get_or_insert(w.writeverf), w.writeverf);
            off += chunk.len() as u64;
        }
        let cv = a.commit(&o.fh, 0, 0).await.expect("COMMIT");
        assert_eq!(Some(cv), verf, "COMMIT's verifier is the WRITEs'");
        assert_eq!(a.read_all(&o.fh, &o.stateid).await.unwrap(), data);
        let fa = a.getattr_decoded(&o.fh).await.unwrap();
        assert_eq!(fa.size(), Some(data.len() as u64));
        a.close(&o.fh, &o.stateid).await.expect("CLOSE");

        // B reads what A committed, by NFSv4 and NFSv3, with the same
        // file handle, fileid and change attribute.
        let ob = b
            .open(&root, &OpenArgs::read("f"))
            .await
            .expect("OPEN on B");
        assert_eq!(ob.fh, o.fh, "one handle on both heads");
        assert_eq!(b.read_all(&ob.fh, &ob.stateid).await.unwrap(), data);
        let fb = b.getattr_decoded(&ob.fh).await.unwrap();
        assert_eq!(
            (fb.fileid(), fb.size(), fb.change(), fb.fsid()),
            (fa.fileid(), fa.size(), fa.change(), fa.fsid())
        );
        b.close(&ob.fh, &ob.stateid).await.expect("CLOSE on B");
        let s3 = mount(&hb).await;
        assert_eq!(
            read_data(&s3.nfs, &v3(&o.fh), 0, 100).await,
            data[..100].to_vec(),
            "NFSv3 on B"
        );

        // A FILE_SYNC WRITE on B, read on A.
        let ob = b.open(&root, &OpenArgs::create("f")).await.expect("OPEN");
        let w = b
            .write(
                &ob.fh,
                &ob.stateid,
                10,
                b"written on B",
                StableHow4::FileSync,
            )
            .await
            .expect("WRITE FILE_SYNC");
        assert_eq!(w.committed, StableHow4::FileSync);
        let r = a
            .read(&o.fh, &Stateid4::default(), 10, 12)
            .await
            .expect("READ, anonymous stateid");
        assert_eq!(r.data, b"written on B");

        // SETATTR through the open stateid: size and mode, seen on A.
        b.setattr(
            &ob.fh,
            &ob.stateid,
            &SetAttrs4 {
                size: Some(5),
                mode: Some(0o640),
                ..SetAttrs4::default()
            },
        )
        .await
        .expect("SETATTR");
        let fa = a.getattr_decoded(&o.fh).await.unwrap();
        assert_eq!((fa.size(), fa.mode()), (Some(5), Some(0o640)));
        assert_eq!(getattr(&s3.nfs, &v3(&o.fh)).await.size, 5, "NFSv3");
        b.close(&ob.fh, &ob.stateid).await.unwrap();

        // GUARDED of an existing name; EXCLUSIVE4_1 and its retry on the
        // other head.
        let g = OpenArgs {
            how: OpenHow::Guarded(SetAttrs4::mode(0o600)),
            ..OpenArgs::create("f")
        };
        assert_eq!(status(b.open(&root, &g).await), Nfsstat4::Exist);
        let ex = OpenArgs {
            how: OpenHow::Exclusive41(Verifier4(*b"excl4.1!"), SetAttrs4::mode(0o600)),
            ..OpenArgs::create("x")
        };
        let x1 = a.open(&root, &ex).await.expect("EXCLUSIVE4_1");
        let x2 = b.open(&root, &ex).await.expect("EXCLUSIVE4_1 again on B");
        assert_eq!(x1.fh, x2.fh);
        a.close(&x1.fh, &x1.stateid).await.unwrap();
        b.close(&x2.fh, &x2.stateid).await.unwrap();

        // Share reservations are each head's own (CephFS has none): a
        // DENY_WRITE open on A refuses a writer on A, not one on B.
        let deny = OpenArgs {
            deny: OPEN4_SHARE_DENY_WRITE,
            ..OpenArgs::read("x")
        };
        let both = OpenArgs {
            access: OPEN4_SHARE_ACCESS_BOTH,
            ..OpenArgs::read("x")
        };
        let d1 = a.open(&root, &deny).await.expect("OPEN DENY_WRITE on A");
        let a2 = v4(&ha).await;
        assert_eq!(status(a2.open(&root, &both).await), Nfsstat4::ShareDenied);
        let w = b.open(&root, &both).await.expect("a writer on B");
        b.close(&w.fh, &w.stateid).await.unwrap();
        a.close(&d1.fh, &d1.stateid).await.unwrap();

        // Directories: CREATE on A, READDIR on B, RENAME on B, REMOVE on A.
        let d = a.mkdir(&root, "d", 0o755).await.expect("mkdir");
        for i in 0..40 {
            let o = a
                .open(&d, &OpenArgs::create(format!("n{i:02}")))
                .await
                .expect("create in d");
            a.close(&o.fh, &o.stateid).await.unwrap();
        }
        let want: Vec<String> = (0..40).map(|i| format!("n{i:02}")).collect();
        let mask = Bitmap4::from_bits(&[FATTR4_TYPE, FATTR4_FILEID, FATTR4_SIZE]).expect("mask");
        let listed = b.readdir_all(&d, &mask).await.expect("READDIR on B");
        assert_eq!(names(&listed), want);
        assert!(listed.iter().all(|e| !e.attrs.attr_vals.is_empty()));
        b.rename(&root, "f", &d, "g").await.expect("RENAME on B");
        // A file over a non-empty directory: NFS4ERR_ISDIR, as rename(2)
        // says on a local filesystem (CephFS's MDS says ENOTEMPTY).
        let plain = a.open(&root, &OpenArgs::create("plain")).await.unwrap();
        a.close(&plain.fh, &plain.stateid).await.unwrap();
        assert_eq!(
            status(b.rename(&root, "plain", &root, "d").await),
            Nfsstat4::IsDir,
            "RENAME of a file over a non-empty directory"
        );
        fail(
            "NFSv3 RENAME of a file over a non-empty directory",
            s3.nfs
                .rename(&rnfsd_client::nfs3::Rename3Args {
                    from: dirop(&v3(&root), "plain"),
                    to: dirop(&v3(&root), "d"),
                })
                .await,
            rnfsd_client::nfs3::Nfsstat3::IsDir,
        );
        a.remove(&root, "plain").await.expect("REMOVE plain");
        assert_eq!(a.lookup_from(&d, "g").await.expect("g on A"), o.fh);
        assert_eq!(status(a.lookup_from(&root, "f").await), Nfsstat4::NoEnt);
        assert_eq!(status(a.remove(&root, "d").await), Nfsstat4::NotEmpty);
        for n in want.iter().chain(std::iter::once(&"g".to_string())) {
            a.remove(&d, n).await.expect("REMOVE");
        }
        a.remove(&root, "d").await.expect("REMOVE d");
        assert_eq!(status(b.lookup_from(&root, "d").await), Nfsstat4::NoEnt);
        // The handle of the removed file is stale on both heads.
        assert_eq!(status(b.getattr_decoded(&o.fh).await), Nfsstat4::Stale);
        assert_eq!(status(a.getattr_decoded(&o.fh).await), Nfsstat4::Stale);
        let t = getattr(&s3.nfs, &s3.root).await;
        assert_eq!(t.ftype, Ftype3::Dir);
    })
    .await;
}

// ---------------------------------------------------------------------------
// 2. NFSv4 locks are CephFS locks: NFSv4 owners on either head and NLM
// clients of either head conflict.

#[tokio::test(flavor = "multi_thread")]
async fn v4_locks_conflict_across_heads_and_with_nlm() {
    bounded_ceph(async {
        let Some(scratch) = Scratch::new("v4locks").await else {
            return;
        };
        let (ha, hb) = v4_heads(&scratch);
        let (a, a2, b) = (v4(&ha).await, v4(&ha).await, v4(&hb).await);
        let root = a.lookup_path(MNT).await.expect("export root");
        let oa = a.open(&root, &OpenArgs::create("f")).await.expect("OPEN");
        a.write(&oa.fh, &oa.stateid, 0, &[7; 100], StableHow4::FileSync)
            .await
            .expect("WRITE");
        let f = oa.fh.clone();
        let oa2 = a2.open(&root, &OpenArgs::create("f")).await.expect("OPEN");
        let ob = b.open(&root, &OpenArgs::create("f")).await.expect("OPEN");
        let (sa, sb) = (mount(&ha).await, mount(&hb).await);
        let (na, nb) = (
            NlmClient::new(sa.client.clone()),
            NlmClient::new(sb.client.clone()),
        );
        let f3 = v3(&f);

        // A write lock through A.
        let la = granted(
            &lock_new(&a, &f, true, 0, 10, &oa.stateid, b"la").await,
            "LOCK on A",
        );
        // Another client of A: its head names the owner.
        match lock_new(&a2, &f, true, 5, 1, &oa2.stateid, b"la2").await {
            Lock4Res::Denied(d) => {
                assert_eq!((d.offset, d.length), (0, 10));
                assert_eq!(d.owner.clientid, a.clientid());
                assert_eq!(d.owner.owner.0, b"la");
            }
            other => panic!("LOCK of another client on A: {other:?}"),
        }
        // A client of B is denied by CephFS.
        let r = lock_new(&b, &f, true, 5, 10, &ob.stateid, b"lb").await;
        denied_by_stranger(&r, "LOCK on B", 0, 10, NfsLockType4::Write);
        match b.lockt(&f, NfsLockType4::Read, 9, 1, b"lb").await.unwrap() {
            LockT4Res::Denied(d) => assert_eq!((d.offset, d.length), (0, 10)),
            other => panic!("LOCKT on B: {other:?}"),
        }
        // NLM clients of either head see it.
        assert!(
            nlm_test_denied(&na, &f3, "hosta", 3, 1).await,
            "NLM TEST on A"
        );
        assert!(
            nlm_test_denied(&nb, &f3, "hostb", 3, 1).await,
            "NLM TEST on B"
        );
        assert_eq!(
            lock(&nb, &nlm_lock(&f3, "hostb", 1, 0, 1), true, false).await,
            Nlm4Stats::Denied,
            "NLM LOCK on B"
        );

        // B's client locks what nobody holds; A's clients and NLM clients
        // are denied by it.
        let lb = granted(
            &lock_new(&b, &f, false, 20, 10, &ob.stateid, b"lb").await,
            "read LOCK on B",
        );
        denied_by_stranger(
            &lock_new(&a2, &f, true, 25, 1, &oa2.stateid, b"la2").await,
            "write LOCK on A over B's read lock",
            20,
            10,
            NfsLockType4::Read,
        );
        granted(
            &lock_new(&a2, &f, false, 25, 1, &oa2.stateid, b"la2").await,
            "read LOCK on A beside B's",
        );
        assert_eq!(
            lock(&na, &nlm_lock(&f3, "hosta", 2, 20, 1), true, false).await,
            Nlm4Stats::Denied,
            "NLM write LOCK on A over B's read lock"
        );

        // An NLM lock through A denies B's NFSv4 client.
        let nl = nlm_lock(&f3, "hosta", 3, 50, 10);
        assert_eq!(lock(&na, &nl, true, false).await, Nlm4Stats::Granted);
        match b
            .lock(
                &f,
                NfsLockType4::Write,
                55,
                1,
                Nfs4Client::existing_locker(&lb),
            )
            .await
            .unwrap()
        {
            Lock4Res::Denied(d) => assert_eq!((d.offset, d.length), (50, 10)),
            other => panic!("LOCK on B over an NLM lock on A: {other:?}"),
        }
        assert_eq!(unlock(&na, &nl).await, Nlm4Stats::Granted);
        let lb2 = granted(
            &b.lock(
                &f,
                NfsLockType4::Write,
                55,
                1,
                Nfs4Client::existing_locker(&lb),
            )
            .await
            .unwrap(),
            "LOCK on B once the NLM lock went",
        );

        // LOCKU on A lets B's client in.
        a.locku(&f, NfsLockType4::Write, &la, 0, 10)
            .await
            .expect("LOCKU");
        let lb3 = granted(
            &b.lock(
                &f,
                NfsLockType4::Write,
                0,
                10,
                Nfs4Client::existing_locker(&lb2),
            )
            .await
            .unwrap(),
            "LOCK on B after A's LOCKU",
        );
        assert_eq!(lb3.other, lb.other, "one lock stateid per owner and file");
        assert!(nlm_test_denied(&na, &f3, "hosta", 0, 1).await);
        // CLOSE drops the open's locks from CephFS too (A2's read lock at
        // 25 stays).
        b.close(&f, &ob.stateid).await.expect("CLOSE on B");
        assert!(!nlm_test_denied(&na, &f3, "hosta", 0, 20).await);
        assert!(nlm_test_denied(&na, &f3, "hosta", 25, 1).await);
        assert_eq!(
            lock(&na, &nlm_lock(&f3, "hosta", 4, 0, 20), true, false).await,
            Nlm4Stats::Granted,
            "NLM LOCK on A where B's closed open held locks"
        );
        a2.close(&f, &oa2.stateid).await.expect("CLOSE");
        a.close(&f, &oa.stateid).await.expect("CLOSE");
    })
    .await;
}

// ---------------------------------------------------------------------------
// 3. A head dies: its clients' NFSv4 state was its own; their locks stay in
// CephFS with its session.

/// Evicts the CephFS session of the head that ran as process `pid`
/// (libcephfs's `client_metadata.pid`), as a cluster's fencing step does
/// before the address moves (docs/scale-out.md, "Fencing").
fn evict_ceph_session(pid: u32) {
    let conf = std::env::var("RNFSD_CEPH_CONF").expect("RNFSD_CEPH_CONF");
    let filter = format!("client_metadata.pid={pid}");
    let out = std::process::Command::new("timeout")
        .args(["30", "ceph", "-c", &conf, "--connect-timeout", "10"])
        .args(["tell", "mds.a", "client", "evict", &filter])
        .output()
        .expect("ceph tell");
    assert!(
        out.status.success(),
        "evict {filter}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// OPEN CLAIM_PREVIOUS of `fh` for owner `owner`: the compound's status.
async fn open_previous(c: &Nfs4Client, fh: &NfsFh4, owner: &[u8]) -> Nfsstat4 {
    c.compound(&[
        ArgOp::PutFh(PutFh4Args { object: fh.clone() }),
        ArgOp::Open(Box::new(Open4Args {
            seqid: 0,
            share_access: OPEN4_SHARE_ACCESS_BOTH,
            share_deny: OPEN4_SHARE_DENY_NONE,
            owner: StateOwner4 {
                clientid: c.clientid(),
                owner: Opaque1024(owner.to_vec()),
            },
            openhow: OpenFlag4::NoCreate,
            claim: OpenClaim4::Previous(OpenDelegationType4::None),
        })),
    ])
    .await
    .expect("OPEN compound")
    .status
}

/// LOCK with reclaim set, for a new lock owner of `open`.
async fn lock_reclaim(c: &Nfs4Client, fh: &NfsFh4, open: &Stateid4, owner: &[u8]) -> Lock4Res {
    let r = c
        .compound(&[
            ArgOp::PutFh(PutFh4Args { object: fh.clone() }),
            ArgOp::Lock(Box::new(Lock4Args {
                locktype: NfsLockType4::Write,
                reclaim: true,
                offset: 0,
                length: 10,
                locker: c.new_locker(open, owner),
            })),
        ])
        .await
        .expect("LOCK compound");
    match r.results.get(2) {
        Some(ResOp::Lock(l)) => l.clone(),
        other => panic!("LOCK reclaim: {other:?} ({:?})", r.status),
    }
}

/// The filesystem's `session_timeout` (seconds): how long the MDS waits
/// for a silent client before it evicts it.
fn session_timeout() -> u64 {
    let conf = std::env::var("RNFSD_CEPH_CONF").expect("RNFSD_CEPH_CONF");
    let out = std::process::Command::new("timeout")
        .args(["30", "ceph", "-c", &conf, "--connect-timeout", "10"])
        .args(["fs", "get", "cephfs", "-f", "json"])
        .output()
        .expect("ceph fs get");
    let text = String::from_utf8_lossy(&out.stdout);
    let key = "\"session_timeout\":";
    let at = text.find(key).expect("session_timeout in `ceph fs get`") + key.len();
    text[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .expect("session_timeout")
}

/// Head A (killed) served client `owner`, which opened "f", wrote
/// "before" and locked bytes 0-9: the file's handle, A's open and lock
/// stateids, A's client's session, and A's process id.
struct DeadHead {
    fh: NfsFh4,
    open: Stateid4,
    lock: Stateid4,
    session: SessionId4,
    clientid: u64,
    /// The client's next CREATE_SESSION sequence id.
    cs_seq: u32,
    pid: u32,
}

async fn kill_a_with_a_lock(ha: &mut Head, owner: &str) -> DeadHead {
    let c = v4_owner(ha, owner, true).await;
    let root = c.lookup_path(MNT).await.expect("export root");
    let o = c.open(&root, &OpenArgs::create("f")).await.expect("OPEN");
    c.write(&o.fh, &o.stateid, 0, b"before", StableHow4::FileSync)
        .await
        .expect("WRITE");
    let lock = granted(
        &lock_new(&c, &o.fh, true, 0, 10, &o.stateid, b"lk").await,
        "LOCK on A",
    );
    let pid = ha.pid().expect("head A runs");
    ha.kill();
    DeadHead {
        fh: o.fh,
        open: o.stateid,
        lock,
        session: c.sessionid(),
        clientid: c.clientid(),
        cs_seq: c.exchange().sequenceid.wrapping_add(1),
        pid,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_heads_v4_state_is_lost_and_fencing_frees_its_locks() {
    bounded_ceph(async {
        let Some(scratch) = Scratch::new("v4failover").await else {
            return;
        };
        // The worst case: heads started in the same second.
        let (mut ha, hb) = v4_heads_one_boot(&scratch);
        let owner = "failover-client";
        let dead = kill_a_with_a_lock(&mut ha, owner).await;
        // Fencing, before the address moves: A's CephFS session goes, and
        // with it the capabilities and locks it held.
        evict_ceph_session(dead.pid);
        let t0 = Instant::now();

        // The client's session is unknown on B.
        let rpc = Nfs4Rpc::connect(hb.addr, &client_cfg())
            .await
            .expect("connect to B");
        let r = rpc
            .compound(
                1,
                &[
                    ArgOp::Sequence(Sequence4Args {
                        sessionid: dead.session,
                        sequenceid: 100,
                        slotid: 0,
                        highest_slotid: 0,
                        cachethis: false,
                    }),
                    ArgOp::PutRootFh,
                ],
            )
            .await
            .expect("COMPOUND");
        assert_eq!(r.status, Nfsstat4::BadSession, "A's session on B");
        // Another client of B's, made first there.
        let other = v4(&hb).await;
        assert_ne!(other.clientid(), dead.clientid);
        // A client recovering its session (as Linux does after
        // NFS4ERR_BADSESSION) is told its client ID is unknown, though
        // both heads have one boot verifier, and B's own client's is not
        // taken over.
        let r = rpc
            .compound(
                1,
                &[ArgOp::CreateSession(Box::new(CreateSession4Args {
                    clientid: dead.clientid,
                    sequence: dead.cs_seq,
                    flags: 0,
                    fore_chan_attrs: chan(),
                    back_chan_attrs: chan(),
                    cb_program: 0x4000_0000,
                    sec_parms: vec![CallbackSecParms4::None],
                }))],
            )
            .await
            .expect("COMPOUND");
        assert_eq!(r.status, Nfsstat4::StaleClientId, "A's client ID on B");

        // The same client (owner and verifier) on B: a new, unconfirmed
        // client ID; nothing of A's state.
        let n = v4_owner(&hb, owner, false).await;
        assert_eq!(
            n.exchange().flags & EXCHGID4_FLAG_CONFIRMED_R,
            0,
            "B knew the client"
        );
        // B is not in a grace period (it did not restart, and never knew
        // the client): reclaims are NFS4ERR_NO_GRACE.
        assert_eq!(open_previous(&n, &dead.fh, b"o").await, Nfsstat4::NoGrace);
        // New state waits for the client's RECLAIM_COMPLETE (§18.51.3).
        let root = n.lookup_path(MNT).await.expect("export root on B");
        assert_eq!(
            status(n.open(&root, &OpenArgs::create("f")).await),
            Nfsstat4::Grace
        );
        n.reclaim_complete(false).await.expect("RECLAIM_COMPLETE");
        let no = n
            .open_fh(&dead.fh, OPEN4_SHARE_ACCESS_BOTH, 0)
            .await
            .expect("OPEN by handle");
        assert!(
            t0.elapsed() < Duration::from_secs(session_timeout()),
            "fenced, B answered only after {:?}",
            t0.elapsed()
        );
        assert_eq!(
            n.read(&dead.fh, &no.stateid, 0, 6).await.unwrap().data,
            b"before"
        );
        // Stateids of A's mean nothing on B (with one boot verifier, B
        // cannot tell them from forgeries: NFS4ERR_BAD_STATEID, not
        // NFS4ERR_STALE_STATEID).
        assert_eq!(
            status(n.read(&dead.fh, &dead.open, 0, 6).await),
            Nfsstat4::BadStateid,
            "A's open stateid on B"
        );
        match n
            .lock(
                &dead.fh,
                NfsLockType4::Write,
                0,
                10,
                Nfs4Client::existing_locker(&dead.lock),
            )
            .await
            .unwrap()
        {
            Lock4Res::Fail(s) => assert_eq!(s, Nfsstat4::BadStateid, "A's lock stateid on B"),
            other => panic!("LOCK with A's lock stateid on B: {other:?}"),
        }
        // TEST_STATEID says so too (a Linux client then counts the lock
        // lost).
        let r = n
            .run(&[ArgOp::TestStateid(TestStateid4Args {
                stateids: vec![dead.open, dead.lock],
            })])
            .await
            .expect("TEST_STATEID");
        match r.first() {
            Some(ResOp::TestStateid(NfsRes4::Ok(t))) => {
                assert_eq!(t.status_codes, [Nfsstat4::BadStateid, Nfsstat4::BadStateid])
            }
            other => panic!("TEST_STATEID: {other:?}"),
        }
        match lock_reclaim(&n, &dead.fh, &no.stateid, b"lk").await {
            Lock4Res::Fail(s) => assert_eq!(s, Nfsstat4::NoGrace, "LOCK reclaim on B"),
            other => panic!("LOCK reclaim on B: {other:?}"),
        }
        // A's lock went with its session: the client locks again, as new.
        granted(
            &lock_new(&n, &dead.fh, true, 0, 10, &no.stateid, b"lk").await,
            "LOCK on B once A was fenced",
        );
        let sb = mount(&hb).await;
        let nb = NlmClient::new(sb.client.clone());
        assert!(nlm_test_denied(&nb, &v3(&dead.fh), "hostb", 0, 1).await);
        n.close(&dead.fh, &no.stateid).await.expect("CLOSE");
        assert!(!nlm_test_denied(&nb, &v3(&dead.fh), "hostb", 0, 1).await);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unfenced_a_dead_heads_files_wait_for_its_session_timeout() {
    // Alone on the cluster: until the MDS evicts the dead head, the
    // others' calls on what it held (CephFS's root directory, above every
    // test's directory) would wait too.
    let _alone = CLUSTER.write().await;
    let body = async {
        let Some(scratch) = Scratch::new("v4unfenced").await else {
            return;
        };
        let (mut ha, hb) = v4_heads(&scratch);
        let owner = "unfenced-client";
        let dead = kill_a_with_a_lock(&mut ha, owner).await;
        let t0 = Instant::now();
        let n = v4_owner(&hb, owner, true).await;
        let other = v4(&hb).await;

        // The first call on the file waits inside libcephfs until the MDS
        // evicts A's session, which held the file's capabilities and its
        // lock: the filesystem's session_timeout after A last renewed
        // them (it renews every third of it).
        let first = {
            let (n, fh) = (n.clone(), dead.fh.clone());
            tokio::spawn(async move {
                let o = n.open_fh(&fh, OPEN4_SHARE_ACCESS_BOTH, 0).await;
                (o, t0.elapsed())
            })
        };
        // Meanwhile, once the head noticed a call past its limit
        // (`ceph_call_timeout_ms`, 5 s), later calls on the file answer
        // NFS4ERR_DELAY within the limit.
        tokio::time::sleep(Duration::from_secs(7)).await;
        let t1 = Instant::now();
        assert_eq!(
            status(other.open_fh(&dead.fh, OPEN4_SHARE_ACCESS_READ, 0).await),
            Nfsstat4::Delay,
            "OPEN while another waits"
        );
        assert!(t1.elapsed() < Duration::from_secs(15), "{:?}", t1.elapsed());
        let (no, took) = first.await.expect("first OPEN");
        let no = no.expect("OPEN by handle on B");
        let timeout = session_timeout();
        assert!(
            took >= Duration::from_secs(timeout * 2 / 3),
            "the first OPEN on B took {took:?}, session_timeout is {timeout} s"
        );
        eprintln!("unfenced: the first OPEN on B took {took:?} (session_timeout {timeout} s)");
        // A's lock went with its evicted session.
        granted(
            &lock_new(&n, &dead.fh, true, 0, 10, &no.stateid, b"lk").await,
            "LOCK on B after A's session timed out",
        );
        assert_eq!(
            n.read(&dead.fh, &no.stateid, 0, 6).await.unwrap().data,
            b"before"
        );
        n.close(&dead.fh, &no.stateid).await.expect("CLOSE");
    };
    if tokio::time::timeout(CEPH_TEST_TIMEOUT, body).await.is_err() {
        panic!("test body exceeded {CEPH_TEST_TIMEOUT:?}");
    }
}

// ---------------------------------------------------------------------------
// 4. A head restarted in place: its clients reclaim in its grace period,
// but the other head is in none, and its clients may take the locks first.

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_heads_grace_period_does_not_hold_the_other_head() {
    bounded_ceph(async {
        let Some(scratch) = Scratch::new("v4restart").await else {
            return;
        };
        let (mut ha, hb) = v4_heads(&scratch);
        let owner = "restart-client";
        let c = v4_owner(&ha, owner, true).await;
        let root = c.lookup_path(MNT).await.expect("export root");
        let o = c.open(&root, &OpenArgs::create("f")).await.expect("OPEN");
        granted(
            &lock_new(&c, &o.fh, true, 0, 10, &o.stateid, b"lk").await,
            "LOCK on A",
        );
        // A dies and starts again on its state directory: its new CephFS
        // session ends the one it left, and with it the lock.
        ha.kill();
        ha.respawn();
        let f3 = v3(&o.fh);
        let sb = mount(&hb).await;
        let nb = NlmClient::new(sb.client.clone());
        let nl = nlm_lock(&f3, "hostb", 1, 5, 1);
        assert_eq!(
            lock(&nb, &nl, true, false).await,
            Nlm4Stats::Granted,
            "NLM LOCK on B while A is in its grace period"
        );
        let b4 = v4(&hb).await;
        let ob = b4
            .open(&root, &OpenArgs::read("f"))
            .await
            .expect("OPEN on B");
        b4.close(&ob.fh, &ob.stateid).await.unwrap();

        // On A the client reclaims its open, and its lock, which B's NLM
        // client now holds part of.
        let n = v4_owner(&ha, owner, false).await;
        let other = v4(&ha).await;
        assert_eq!(
            status(other.open(&root, &OpenArgs::read("f")).await),
            Nfsstat4::Grace,
            "A is in its grace period"
        );
        let r = n
            .compound(&[
                ArgOp::PutFh(PutFh4Args {
                    object: o.fh.clone(),
                }),
                ArgOp::Open(Box::new(Open4Args {
                    seqid: 0,
                    share_access: OPEN4_SHARE_ACCESS_BOTH,
                    share_deny: OPEN4_SHARE_DENY_NONE,
                    owner: StateOwner4 {
                        clientid: n.clientid(),
                        owner: Opaque1024(b"o".to_vec()),
                    },
                    openhow: OpenFlag4::NoCreate,
                    claim: OpenClaim4::Previous(OpenDelegationType4::None),
                })),
            ])
            .await
            .expect("OPEN CLAIM_PREVIOUS");
        let Some(ResOp::Open(NfsRes4::Ok(reopened))) = r.results.get(2) else {
            panic!("OPEN CLAIM_PREVIOUS on A: {r:?}");
        };
        match lock_reclaim(&n, &o.fh, &reopened.stateid, b"lk").await {
            Lock4Res::Denied(d) => assert_eq!((d.offset, d.length), (5, 1)),
            other => panic!("LOCK reclaim on A over B's NLM lock: {other:?}"),
        }
        assert_eq!(unlock(&nb, &nl).await, Nlm4Stats::Granted);
        granted(
            &lock_reclaim(&n, &o.fh, &reopened.stateid, b"lk").await,
            "LOCK reclaim once B's NLM client let go",
        );
        n.reclaim_complete(false).await.expect("RECLAIM_COMPLETE");
    })
    .await;
}

// ---------------------------------------------------------------------------
// 4. Coherence over NFSv4.1, as `cephfs`'s tests check it over NFSv3: a WRITE
// and SETATTR on one head seen by GETATTR on the other at once, 20 rounds
// each way; and a third CephFS client's changes of a file's size, mode and
// times and of a directory's entries seen on both heads' next GETATTR,
// LOOKUP and READDIR, whatever they hold cached.

/// (size, mode, mtime, atime seconds) of decoded attributes.
fn smt(x: &Attrs4) -> (Option<u64>, Option<u32>, Option<Nfstime4>, Option<i64>) {
    (x.size(), x.mode(), x.mtime(), x.atime().map(|t| t.seconds))
}

#[tokio::test(flavor = "multi_thread")]
async fn v4_changes_on_one_head_or_a_third_client_are_seen_on_both_heads() {
    bounded_ceph(async {
        let Some(scratch) = Scratch::new("v4coherent").await else {
            return;
        };
        let Some(conf) = ceph_conf("v4coherent") else {
            return;
        };
        let (ha, hb) = v4_heads(&scratch);
        let (a, b) = (v4(&ha).await, v4(&hb).await);
        let root = a.lookup_path(MNT).await.expect("LOOKUP into the export");
        let d = a.mkdir(&root, "d", 0o755).await.expect("mkdir d");

        // WRITE and SETATTR on one head, GETATTR on the other.
        let h = a.open(&d, &OpenArgs::create("h")).await.expect("OPEN h");
        a.close(&h.fh, &h.stateid).await.expect("CLOSE h");
        for i in 0..20u64 {
            let (w, r) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
            r.getattr_decoded(&h.fh).await.expect("GETATTR before");
            let o = w.open(&d, &OpenArgs::create("h")).await.expect("OPEN");
            w.write(&o.fh, &o.stateid, i, b"x", StableHow4::FileSync)
                .await
                .expect("WRITE");
            let mode = 0o600 | (i as u32 % 8) << 3;
            w.setattr(&o.fh, &o.stateid, &SetAttrs4::mode(mode))
                .await
                .expect("SETATTR");
            w.close(&o.fh, &o.stateid).await.expect("CLOSE");
            let x = w.getattr_decoded(&h.fh).await.expect("GETATTR writer");
            let y = r.getattr_decoded(&h.fh).await.expect("GETATTR other");
            assert_eq!(
                (y.size(), y.mode()),
                (Some(i + 1), Some(mode)),
                "round {i}: the other head"
            );
            assert_eq!(
                (x.size(), x.mtime(), x.ctime(), x.change()),
                (y.size(), y.mtime(), y.ctime(), y.change()),
                "round {i}"
            );
        }
        // MKDIR on one head: the parent's nlink on the other.
        let n0 = b.getattr_decoded(&d).await.expect("GETATTR d").nlink();
        a.mkdir(&d, "sub", 0o755).await.expect("mkdir sub");
        assert_eq!(
            b.getattr_decoded(&d).await.expect("GETATTR d").nlink(),
            n0.map(|n| n + 1),
            "nlink of the parent on the other head"
        );
        a.remove(&d, "sub").await.expect("REMOVE sub");
        a.remove(&d, "h").await.expect("REMOVE h");

        // The third client.
        let f = a.open(&d, &OpenArgs::create("f")).await.expect("OPEN f");
        a.close(&f.fh, &f.stateid).await.expect("CLOSE f");
        let third = Third::new(&conf);
        let tf = third.walk(&[&scratch.dir, "d", "f"]);
        let td = third.walk(&[&scratch.dir, "d"]);
        let mask = common_mask();
        for i in 0..10u32 {
            let mut before = Vec::new();
            for s in [&a, &b] {
                before.push(s.getattr_decoded(&f.fh).await.expect("GETATTR f"));
                s.getattr_decoded(&d).await.expect("GETATTR d");
                assert_eq!(s.lookup_from(&d, "f").await.expect("LOOKUP f"), f.fh);
                s.readdir_all(&d, &mask).await.expect("READDIR d");
            }
            let (size, mode, (ms, mns), asec) = third.set_round(&tf, i);
            let want = (
                Some(size),
                Some(mode),
                Some(Nfstime4 {
                    seconds: ms,
                    nseconds: mns,
                }),
                Some(asec),
            );
            for ((h, s), old) in [("A", &a), ("B", &b)].into_iter().zip(&before) {
                let x = s.getattr_decoded(&f.fh).await.expect("GETATTR f");
                assert_eq!(smt(&x), want, "round {i}: GETATTR on head {h}");
                assert_ne!(
                    x.change(),
                    old.change(),
                    "round {i}: change attribute on head {h}"
                );
                assert_eq!(s.lookup_from(&d, "f").await.expect("LOOKUP f"), f.fh);
                let listed = s.readdir_all(&d, &mask).await.expect("READDIR d");
                let e = listed.iter().find(|e| e.name.0 == b"f").expect("f listed");
                let ea = Attrs4::decode(&e.attrs).expect("READDIR attributes");
                assert_eq!(
                    smt(&ea),
                    want,
                    "round {i}: READDIR's attributes on head {h}"
                );
            }

            let new = format!("n{i}");
            let new_ino = third.entries_round(&td, i);
            for (h, s) in [("A", &a), ("B", &b)] {
                let at = |w: &str| {
                    format!("round {i}: {w} on head {h} after the third client's changes")
                };
                let fh = s.lookup_from(&d, &new).await.expect("LOOKUP new");
                assert_eq!(
                    s.getattr_decoded(&fh).await.expect("GETATTR new").fileid(),
                    Some(new_ino),
                    "{}",
                    at("LOOKUP new")
                );
                if i > 0 {
                    assert_eq!(
                        status(s.lookup_from(&d, &format!("n{}", i - 1)).await),
                        Nfsstat4::NoEnt,
                        "{}",
                        at("LOOKUP removed")
                    );
                }
                let listed = s.readdir_all(&d, &mask).await.expect("READDIR d");
                assert_eq!(
                    names(&listed),
                    Third::names_after(i, false),
                    "{}",
                    at("READDIR")
                );
                assert_eq!(
                    s.getattr_decoded(&d).await.expect("GETATTR d").nlink(),
                    Some(2 + i + 1),
                    "{}",
                    at("GETATTR dir nlink")
                );
            }
        }
    })
    .await;
}
