//! The CephFS backend against a real cluster: every procedure on two heads
//! (two rnfsd processes with the same export id and handle key serving one
//! CephFS directory), handles and READDIR cookies of one head used on the
//! other, a head restarted under a client's handles, and a third CephFS
//! client's changes seen on both heads' next calls.
//!
//! The cluster is found through RNFSD_CEPH_CONF (a ceph.conf whose
//! `[client]` keyring is client.admin's; scripts/test.sh starts a cluster
//! and sets it). Unset, the tests skip; under CI they fail instead. Each
//! test works in a fresh directory of CephFS's root, made through a third
//! server exporting that root, and removes it at the end.

use crate::common;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::nfs::*;
use common::{write_config, TempDir, TestServer};
use rnfsd_client::nfs3::*;
use rnfsd_client::{Auth, Client, MountClient, NfsClient, NlmClient};
use rnfsd_proto::nlm::*;

/// The export id of the heads under test (the same on both: it is in
/// every handle), and the path clients MNT.
pub(super) const ID: u32 = 77;
pub(super) const MNT: &str = "/ceph";
/// The export of CephFS's root that makes and removes each test's
/// directory.
const TOP_ID: u32 = 78;
const TOP_MNT: &str = "/ceph-top";

/// Bound on one test (three servers, each mounting CephFS, and a few
/// hundred journaled namespace changes).
pub(super) const CEPH_TEST_TIMEOUT: Duration = Duration::from_secs(120);

/// The tests share one cluster: they run together (read), except the one
/// that freezes the MDS (write).
pub(super) static CLUSTER: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

pub(super) async fn bounded_ceph<F: Future>(f: F) -> F::Output {
    let _shared = CLUSTER.read().await;
    match tokio::time::timeout(CEPH_TEST_TIMEOUT, f).await {
        Ok(v) => v,
        Err(_) => panic!("test body exceeded {CEPH_TEST_TIMEOUT:?}"),
    }
}

/// The cluster's ceph.conf, or None when the test is skipped (under CI,
/// `skip` fails instead).
pub(super) fn ceph_conf(test: &str) -> Option<String> {
    // An explicit choice of whoever runs the suite (scripts/test.sh):
    // not a failure under CI either.
    if std::env::var_os("RNFSD_SKIP_CEPH").is_some_and(|v| v == "1") {
        eprintln!("SKIP {test}: RNFSD_SKIP_CEPH=1");
        return None;
    }
    let conf = std::env::var("RNFSD_CEPH_CONF")
        .ok()
        .filter(|c| !c.is_empty());
    if conf.is_none() {
        common::skip(
            test,
            Some("RNFSD_CEPH_CONF unset: no Ceph cluster (scripts/test.sh starts one)".into()),
        );
    }
    conf
}

/// A config file in `dir` exporting CephFS directory `root` as `mnt`.
fn ceph_config(dir: &Path, conf: &str, mnt: &str, id: u32, root: &str) -> String {
    write_config(
        dir,
        &format!(
            "[[export]]\npath = \"{mnt}\"\nid = {id}\nbackend = \"cephfs\"\n\
             clients = [\"127.0.0.1\"]\nroot_squash = false\nsecure = false\n\
             [export.cephfs]\nconf = \"{conf}\"\nroot = \"{root}\"\n"
        ),
    )
}

fn nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn name(n: &[u8]) -> String {
    String::from_utf8_lossy(n).into_owned()
}

/// A server of CephFS, stopped with SIGTERM when dropped, which must end
/// its CephFS session. A session left open (a killed server, TestServer's
/// drop) makes the MDS hold back every other client wanting the caps it
/// had until the session times out (a minute and more): later tests would
/// get JUKEBOX.
pub(super) struct Head(pub(super) TestServer);

impl std::ops::Deref for Head {
    type Target = TestServer;
    fn deref(&self) -> &TestServer {
        &self.0
    }
}

impl std::ops::DerefMut for Head {
    fn deref_mut(&mut self) -> &mut TestServer {
        &mut self.0
    }
}

impl Drop for Head {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// A test's directory in CephFS and the config of the heads serving it.
/// Dropping it removes the directory (best effort, also after a failure).
pub(super) struct Scratch {
    /// Serves CephFS's root: makes and removes `dir`.
    top: Head,
    pub(super) dir: String,
    _top_cfg: TempDir,
    _head_cfg: TempDir,
    pub(super) head_cfg_file: String,
}

impl Scratch {
    /// None: skipped (no cluster).
    pub(super) async fn new(test: &str) -> Option<Scratch> {
        let conf = ceph_conf(test)?;
        let top_cfg = TempDir::new("ceph-top-cfg");
        let f = ceph_config(top_cfg.path(), &conf, TOP_MNT, TOP_ID, "/");
        let top = Head(TestServer::start_config(
            Path::new(&f),
            Path::new(TOP_MNT),
            TempDir::new("ceph-top"),
            &["--no-rpcbind"],
        ));
        let dir = format!("t-{test}-{}-{}", std::process::id(), nanos());
        let s = mount(&top).await;
        mkdir(&s.nfs, &s.root, &dir).await;
        let head_cfg = TempDir::new("ceph-head-cfg");
        let head_cfg_file = ceph_config(head_cfg.path(), &conf, MNT, ID, &format!("/{dir}"));
        Some(Scratch {
            top,
            dir,
            _top_cfg: top_cfg,
            _head_cfg: head_cfg,
            head_cfg_file,
        })
    }

    /// A head serving the test's directory with state directory `state`.
    fn head(&self, state: TempDir) -> Head {
        Head(TestServer::start_config(
            Path::new(&self.head_cfg_file),
            Path::new(MNT),
            state,
            &["--no-rpcbind"],
        ))
    }

    /// Head A (a new handle key) and head B (A's key, its own state
    /// directory and port).
    fn heads(&self) -> (Head, Head) {
        let a = self.head(TempDir::new("ceph-a"));
        let b = self.head(a.copy_handle_key("ceph-b"));
        (a, b)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Our own runtime on another thread: this may run while a test's
        // runtime unwinds.
        let (addr, dir) = (self.top.addr, self.dir.clone());
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                let clean = async {
                    let client = Client::connect(addr, &config(1)).await.ok()?;
                    let root = MountClient::new(client.clone()).mnt(TOP_MNT).await.ok()?;
                    let root = NfsFh3::new(root.fhandle);
                    let nfs = NfsClient::new(client);
                    remove_tree(&nfs, &root, &dir).await;
                    let left = lookup_res(&nfs, &root, &dir).await.ok()?;
                    (left.status() == Nfsstat3::NoEnt).then_some(())
                };
                tokio::time::timeout(Duration::from_secs(60), clean)
                    .await
                    .ok()
                    .flatten()
            })
        })
        .join();
        if !matches!(done, Ok(Some(()))) {
            eprintln!("could not remove CephFS directory /{}", self.dir);
        }
    }
}

/// Removes `name` in `dir` and everything below it, as far as it can.
fn remove_tree<'a>(
    nfs: &'a NfsClient,
    dir: &'a NfsFh3,
    entry: &'a str,
) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
    Box::pin(async move {
        let Ok(NfsRes::Ok(r)) = lookup_res(nfs, dir, entry).await else {
            return;
        };
        let is_dir = r.obj_attributes.is_some_and(|a| a.ftype == Ftype3::Dir);
        if !is_dir {
            let _ = remove_res(nfs, dir, entry).await;
            return;
        }
        if let Ok(entries) = nfs.readdir_all(&r.object).await {
            for e in entries {
                let n = name(&e.name);
                if n != "." && n != ".." {
                    remove_tree(nfs, &r.object, &n).await;
                }
            }
        }
        let _ = rmdir_res(nfs, dir, entry).await;
    })
}

// ---- helpers ----

async fn create_how(
    nfs: &NfsClient,
    dir: &NfsFh3,
    n: &str,
    how: CreateHow3,
) -> Result<Create3Res, rnfsd_client::ClientError> {
    nfs.create(&Create3Args {
        where_: dirop(dir, n),
        how,
    })
    .await
}

async fn write_res(
    nfs: &NfsClient,
    fh: &NfsFh3,
    offset: u64,
    data: &[u8],
    stable: StableHow,
) -> Write3ResOk {
    let r = ok(
        &format!("WRITE {stable:?} at {offset}"),
        nfs.write(&Write3Args {
            file: fh.clone(),
            offset,
            count: data.len() as u32,
            stable,
            data: data.to_vec(),
        })
        .await,
    );
    assert_eq!(r.count as usize, data.len(), "short WRITE");
    assert!(
        r.committed >= stable,
        "asked {stable:?}, committed {:?}",
        r.committed
    );
    r
}

async fn rename(
    nfs: &NfsClient,
    fd: &NfsFh3,
    from: &str,
    td: &NfsFh3,
    to: &str,
) -> Result<Rename3Res, rnfsd_client::ClientError> {
    nfs.rename(&Rename3Args {
        from: dirop(fd, from),
        to: dirop(td, to),
    })
    .await
}

/// Deterministic test data.
pub(super) fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// Creates `n` empty files in `dir`, several at once; returns their names.
async fn make_names(nfs: &NfsClient, dir: &NfsFh3, n: usize) -> Vec<String> {
    let names: Vec<String> = (0..n)
        .map(|i| format!("entry-{i:04}-{}", "x".repeat(i % 17)))
        .collect();
    for chunk in names.chunks(32) {
        let mut set = tokio::task::JoinSet::new();
        for n in chunk {
            let (nfs, dir, n) = (nfs.clone(), dir.clone(), n.clone());
            set.spawn(async move { ok(&format!("CREATE {n}"), create_res(&nfs, &dir, &n).await) });
        }
        while let Some(r) = set.join_next().await {
            r.expect("CREATE task");
        }
    }
    names
}

/// Every name of `names` exactly once; "." and ".." at most once; nothing
/// else.
fn check_listing(what: &str, seen: &BTreeMap<String, usize>, names: &[String]) {
    for n in names {
        match seen.get(n) {
            Some(1) => {}
            Some(k) => panic!("{what}: {n:?} listed {k} times"),
            None => panic!("{what}: {n:?} missing from the listing"),
        }
    }
    for d in [".", ".."] {
        assert!(
            seen.get(d).copied().unwrap_or(0) <= 1,
            "{what}: {d:?} listed {:?} times",
            seen.get(d)
        );
    }
    let extra: Vec<&String> = seen
        .keys()
        .filter(|k| !names.contains(k) && *k != "." && *k != "..")
        .collect();
    assert!(extra.is_empty(), "{what}: unexpected names {extra:?}");
}

/// READDIR from `cookie` (verifier `verf`) until eof with `count`-byte
/// pages, counting names into `seen`; returns the number of calls.
async fn readdir_from(
    nfs: &NfsClient,
    dir: &NfsFh3,
    cookie: u64,
    verf: Verf3,
    count: u32,
    seen: &mut BTreeMap<String, usize>,
) -> usize {
    let mut a = ReadDir3Args {
        dir: dir.clone(),
        cookie,
        cookieverf: verf,
        count,
    };
    let mut calls = 0;
    loop {
        calls += 1;
        assert!(calls < 2000, "READDIR never reached eof");
        let r = ok("READDIR", nfs.readdir(&a).await);
        assert!(r.dir_attributes.is_some(), "READDIR dir attributes");
        for e in &r.entries {
            *seen.entry(name(&e.name)).or_insert(0) += 1;
        }
        if r.eof {
            return calls;
        }
        a.cookie = r.entries.last().expect("no entries and no eof").cookie;
        a.cookieverf = r.cookieverf;
    }
}

// ---------------------------------------------------------------------------
// 1. Every procedure, on head A and on head B.

#[tokio::test(flavor = "multi_thread")]
async fn every_procedure_on_both_heads() {
    bounded_ceph(async {
        let Some(scratch) = Scratch::new("every_procedure").await else {
            return;
        };
        let (a, b) = scratch.heads();
        for (label, srv) in [("A", &a), ("B", &b)] {
            let s = mount(srv).await;
            every_procedure(label, &s).await;
        }
    })
    .await;
}

async fn every_procedure(head: &str, s: &Session) {
    let nfs = &s.nfs;
    let at = |what: &str| format!("head {head}: {what}");

    // Found by pjdfstest and the smoke test through the kernel client:
    // SETATTR to the server's time.
    let (t, _) = create_file(nfs, &s.root, "touch").await;
    let now = std::time::SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let set = Sattr3 {
        atime: SetTime3::ServerTime,
        mtime: SetTime3::ServerTime,
        ..Sattr3::default()
    };
    ok(
        &at("SETATTR times to now"),
        setattr_res(nfs, &t, set, None).await,
    );
    let a = getattr(nfs, &t).await;
    for (what, v) in [("mtime", a.mtime.seconds), ("atime", a.atime.seconds)] {
        assert!(
            (i64::from(v) - now).abs() <= 5,
            "{}",
            at(&format!(
                "SETATTR {what} to server time gave {v}, now {now}"
            ))
        );
    }

    // NULL, GETATTR of the root, LOOKUP ".." of the root.
    nfs.null().await.expect("NULL");
    let root = getattr(nfs, &s.root).await;
    assert_eq!(root.ftype, Ftype3::Dir, "{}", at("root type"));
    let up = ok(
        &at("LOOKUP .. of root"),
        lookup_res(nfs, &s.root, "..").await,
    );
    assert_eq!(
        up.obj_attributes.expect("LOOKUP .. attrs").fileid,
        root.fileid,
        "{}",
        at(".. of the root is the root")
    );
    assert_eq!(
        up.object,
        s.root,
        "{}",
        at(".. of the root: the root's handle")
    );
    let dot = ok(&at("LOOKUP . of root"), lookup_res(nfs, &s.root, ".").await);
    assert_eq!(dot.object, s.root);

    // MKDIR: this head's own directory.
    let r = ok(
        &at("MKDIR"),
        nfs.mkdir(&Mkdir3Args {
            where_: dirop(&s.root, &format!("p-{head}")),
            attributes: sattr_mode(0o755),
        })
        .await,
    );
    let d = r.obj.expect("MKDIR handle");
    let da = r.obj_attributes.expect("MKDIR attrs");
    assert_eq!((da.ftype, da.mode, da.nlink), (Ftype3::Dir, 0o755, 2));
    assert_eq!(da.fsid, root.fsid, "{}", at("one export, one fsid"));
    assert!(r.dir_wcc.after.is_some(), "{}", at("MKDIR dir wcc"));
    fail(
        &at("MKDIR existing"),
        nfs.mkdir(&Mkdir3Args {
            where_: dirop(&s.root, &format!("p-{head}")),
            attributes: sattr_mode(0o755),
        })
        .await,
        Nfsstat3::Exist,
    );
    let d_parent = ok(&at("LOOKUP .."), lookup_res(nfs, &d, "..").await);
    assert_eq!(
        d_parent.obj_attributes.expect("attrs").fileid,
        root.fileid,
        "{}",
        at(".. of a subdirectory")
    );

    // CREATE UNCHECKED, WRITE FILE_SYNC and UNSTABLE, COMMIT, READ.
    let r = ok(
        &at("CREATE UNCHECKED"),
        create_how(nfs, &d, "f", CreateHow3::Unchecked(sattr_mode(0o644))).await,
    );
    let f = r.obj.expect("CREATE handle");
    let fa = r.obj_attributes.expect("CREATE attrs");
    assert_eq!((fa.ftype, fa.mode, fa.size), (Ftype3::Reg, 0o644, 0));
    let data = pattern(15_000, 1);
    let w1 = write_res(nfs, &f, 0, &data[..10_000], StableHow::FileSync).await;
    assert_eq!(w1.committed, StableHow::FileSync);
    assert_eq!(w1.file_wcc.after.expect("WRITE wcc after").size, 10_000);
    let w2 = write_res(nfs, &f, 10_000, &data[10_000..], StableHow::Unstable).await;
    assert_eq!(w1.verf, w2.verf, "{}", at("write verifier changed"));
    let c = commit(nfs, &f).await;
    assert_eq!(
        c.verf,
        w1.verf,
        "{}",
        at("COMMIT verifier differs from WRITE's")
    );
    assert_eq!(getattr(nfs, &f).await.size, 15_000);
    let r = ok(&at("READ all"), read_res(nfs, &f, 0, 15_000).await);
    assert!(
        r.data == data && r.eof,
        "{}",
        at("READ to the end: data, eof")
    );
    let r = ok(&at("READ part"), read_res(nfs, &f, 100, 50).await);
    assert!(r.data == data[100..150] && !r.eof, "{}", at("READ inside"));
    let r = ok(&at("READ past end"), read_res(nfs, &f, 20_000, 10).await);
    assert!(r.data.is_empty() && r.eof, "{}", at("READ past the end"));
    fail_any(
        &at("READ of a directory"),
        read_res(nfs, &d, 0, 10).await,
        &[Nfsstat3::IsDir, Nfsstat3::Inval],
    );

    // ACCESS: root gets read and write; another user none on a 0600 file.
    let want = ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND;
    let r = ok(
        &at("ACCESS"),
        nfs.access(&Access3Args {
            object: f.clone(),
            access: want,
        })
        .await,
    );
    assert_eq!(r.access & want, want, "{}", at("root's ACCESS"));
    let dirwant = ACCESS3_LOOKUP | ACCESS3_MODIFY | ACCESS3_DELETE;
    let r = ok(
        &at("ACCESS dir"),
        nfs.access(&Access3Args {
            object: d.clone(),
            access: dirwant,
        })
        .await,
    );
    assert_eq!(
        r.access & dirwant,
        dirwant,
        "{}",
        at("root's ACCESS of a dir")
    );

    // SETATTR: mode, size (truncate), times; a guard that does not match.
    let r = ok(
        &at("SETATTR mode"),
        setattr_res(nfs, &f, sattr_mode(0o600), None).await,
    );
    assert_eq!(r.obj_wcc.before.expect("wcc before").size, 15_000);
    assert_eq!(r.obj_wcc.after.expect("wcc after").mode, 0o600);
    let user = nfs.with_auth(Auth::unix(1000, 1000));
    let r = ok(
        &at("ACCESS as another user"),
        user.access(&Access3Args {
            object: f.clone(),
            access: want,
        })
        .await,
    );
    assert_eq!(r.access & want, 0, "{}", at("uid 1000 on a root 0600 file"));
    fail(
        &at("READ as another user"),
        read_res(&user, &f, 0, 10).await,
        Nfsstat3::Acces,
    );
    let r = ok(
        &at("SETATTR size"),
        setattr_res(
            nfs,
            &f,
            Sattr3 {
                size: Some(100),
                ..Sattr3::default()
            },
            None,
        )
        .await,
    );
    assert_eq!(r.obj_wcc.after.expect("after").size, 100);
    let r = ok(&at("READ truncated"), read_res(nfs, &f, 0, 1000).await);
    assert!(
        r.data == data[..100] && r.eof,
        "{}",
        at("READ after truncate")
    );
    let (atime, mtime) = (
        Nfstime3 {
            seconds: 1_000_000_000,
            nseconds: 123_456_789,
        },
        Nfstime3 {
            seconds: 1_100_000_000,
            nseconds: 987_654_321,
        },
    );
    ok(
        &at("SETATTR times"),
        setattr_res(
            nfs,
            &f,
            Sattr3 {
                atime: SetTime3::ClientTime(atime),
                mtime: SetTime3::ClientTime(mtime),
                ..Sattr3::default()
            },
            None,
        )
        .await,
    );
    let fa = getattr(nfs, &f).await;
    assert_eq!(
        (fa.atime, fa.mtime),
        (atime, mtime),
        "{}",
        at("client times")
    );
    let wrong = Nfstime3 {
        seconds: fa.ctime.seconds.wrapping_sub(100),
        nseconds: fa.ctime.nseconds,
    };
    let body = fail(
        &at("SETATTR wrong guard"),
        setattr_res(nfs, &f, sattr_mode(0o640), Some(wrong)).await,
        Nfsstat3::NotSync,
    );
    assert!(body.after.is_some(), "{}", at("NOT_SYNC carries wcc after"));
    assert_eq!(getattr(nfs, &f).await.mode, 0o600, "{}", at("guard failed"));
    let r = ok(
        &at("SETATTR right guard"),
        setattr_res(nfs, &f, sattr_mode(0o640), Some(fa.ctime)).await,
    );
    assert_eq!(r.obj_wcc.after.expect("after").mode, 0o640);

    // LOOKUP: found, missing.
    let l = ok(&at("LOOKUP f"), lookup_res(nfs, &d, "f").await);
    assert_eq!(l.object, f, "{}", at("LOOKUP gives CREATE's handle"));
    assert_eq!(l.obj_attributes.expect("attrs").fileid, fa.fileid);
    assert!(l.dir_attributes.is_some());
    fail(
        &at("LOOKUP missing"),
        lookup_res(nfs, &d, "missing").await,
        Nfsstat3::NoEnt,
    );

    // SYMLINK, READLINK.
    let target = b"some/where/../else".to_vec();
    let r = ok(
        &at("SYMLINK"),
        nfs.symlink(&Symlink3Args {
            where_: dirop(&d, "ln"),
            symlink_attributes: Sattr3::default(),
            symlink_data: target.clone(),
        })
        .await,
    );
    let ln = r.obj.expect("SYMLINK handle");
    assert_eq!(r.obj_attributes.expect("attrs").ftype, Ftype3::Lnk);
    let rl = ok(
        &at("READLINK"),
        nfs.readlink(&ReadLink3Args {
            symlink: ln.clone(),
        })
        .await,
    );
    assert_eq!(rl.data, target);
    fail(
        &at("READLINK of a file"),
        nfs.readlink(&ReadLink3Args { symlink: f.clone() }).await,
        Nfsstat3::Inval,
    );

    // CREATE GUARDED and EXCLUSIVE.
    ok(
        &at("CREATE GUARDED"),
        create_how(nfs, &d, "g", CreateHow3::Guarded(sattr_mode(0o600))).await,
    );
    fail(
        &at("CREATE GUARDED again"),
        create_how(nfs, &d, "g", CreateHow3::Guarded(sattr_mode(0o600))).await,
        Nfsstat3::Exist,
    );
    let v1 = Verf3(*b"verf-one");
    let x1 = ok(
        &at("CREATE EXCLUSIVE"),
        create_how(nfs, &d, "x", CreateHow3::Exclusive(v1)).await,
    );
    let x = x1.obj.expect("EXCLUSIVE handle");
    let x_id = getattr(nfs, &x).await.fileid;
    let x2 = ok(
        &at("CREATE EXCLUSIVE retried, same verifier"),
        create_how(nfs, &d, "x", CreateHow3::Exclusive(v1)).await,
    );
    let x2fh = x2.obj.expect("retry handle");
    assert_eq!(getattr(nfs, &x2fh).await.fileid, x_id, "{}", at("retry"));
    fail(
        &at("CREATE EXCLUSIVE, another verifier"),
        create_how(nfs, &d, "x", CreateHow3::Exclusive(Verf3(*b"verf-two"))).await,
        Nfsstat3::Exist,
    );
    fail(
        &at("CREATE EXCLUSIVE over a plain file"),
        create_how(nfs, &d, "g", CreateHow3::Exclusive(v1)).await,
        Nfsstat3::Exist,
    );

    // MKNOD fifo.
    let r = ok(
        &at("MKNOD fifo"),
        nfs.mknod(&Mknod3Args {
            where_: dirop(&d, "fifo"),
            what: MknodData3::Fifo(sattr_mode(0o600)),
        })
        .await,
    );
    let fifo = r.obj.expect("MKNOD handle");
    let fifo_a = getattr(nfs, &fifo).await;
    assert_eq!((fifo_a.ftype, fifo_a.mode), (Ftype3::Fifo, 0o600));

    // REMOVE; RMDIR of a non-empty and then an empty directory.
    ok(&at("REMOVE g"), remove_res(nfs, &d, "g").await);
    fail(
        &at("LOOKUP removed"),
        lookup_res(nfs, &d, "g").await,
        Nfsstat3::NoEnt,
    );
    fail(
        &at("REMOVE missing"),
        remove_res(nfs, &d, "g").await,
        Nfsstat3::NoEnt,
    );
    let sub = mkdir(nfs, &d, "sub").await;
    create_file(nfs, &sub, "in").await;
    fail(
        &at("RMDIR non-empty"),
        rmdir_res(nfs, &d, "sub").await,
        Nfsstat3::NotEmpty,
    );
    ok(&at("REMOVE sub/in"), remove_res(nfs, &sub, "in").await);
    ok(&at("RMDIR sub"), rmdir_res(nfs, &d, "sub").await);
    assert_eq!(
        getattr_status(nfs, &sub).await.expect("GETATTR rpc"),
        Nfsstat3::Stale,
        "{}",
        at("a removed directory's handle")
    );

    // RENAME: same directory, across, over an existing file.
    let r = ok(&at("RENAME f f2"), rename(nfs, &d, "f", &d, "f2").await);
    assert!(r.fromdir_wcc.after.is_some() && r.todir_wcc.after.is_some());
    assert_eq!(
        getattr(nfs, &f).await.fileid,
        fa.fileid,
        "{}",
        at("handle follows")
    );
    fail(
        &at("LOOKUP old name"),
        lookup_res(nfs, &d, "f").await,
        Nfsstat3::NoEnt,
    );
    let (victim, _) = create_file(nfs, &s.root, &format!("victim-{head}")).await;
    ok(
        &at("RENAME over a file"),
        rename(nfs, &d, "x", &s.root, &format!("victim-{head}")).await,
    );
    assert_eq!(
        getattr(nfs, &lookup(nfs, &s.root, &format!("victim-{head}")).await)
            .await
            .fileid,
        x_id,
        "{}",
        at("the renamed file replaced the target")
    );
    assert_eq!(
        getattr_status(nfs, &victim).await.expect("GETATTR rpc"),
        Nfsstat3::Stale,
        "{}",
        at("the replaced file's handle")
    );
    fail(
        &at("RENAME missing"),
        rename(nfs, &d, "ghost", &d, "g2").await,
        Nfsstat3::NoEnt,
    );

    // LINK.
    let r = ok(
        &at("LINK"),
        nfs.link(&Link3Args {
            file: f.clone(),
            link: dirop(&d, "hard"),
        })
        .await,
    );
    assert_eq!(r.file_attributes.expect("LINK attrs").nlink, 2);
    assert!(r.linkdir_wcc.after.is_some());
    assert_eq!(getattr(nfs, &f).await.nlink, 2);
    let hard = lookup(nfs, &d, "hard").await;
    assert_eq!(hard, f, "{}", at("both names, one handle"));
    fail(
        &at("LINK existing"),
        nfs.link(&Link3Args {
            file: f.clone(),
            link: dirop(&d, "f2"),
        })
        .await,
        Nfsstat3::Exist,
    );

    // READDIR and READDIRPLUS of 300 names in small pages.
    let many = mkdir(nfs, &d, "many").await;
    let names = make_names(nfs, &many, 300).await;
    let mut seen = BTreeMap::new();
    let calls = readdir_from(nfs, &many, 0, Verf3::default(), 600, &mut seen).await;
    check_listing(&at("READDIR"), &seen, &names);
    assert!(calls > 5, "{}", at(&format!("{calls} READDIR calls")));

    let mut a = ReadDirPlus3Args {
        dir: many.clone(),
        cookie: 0,
        cookieverf: Verf3::default(),
        dircount: 512,
        maxcount: 4096,
    };
    let (mut seen, mut calls) = (BTreeMap::new(), 0);
    loop {
        calls += 1;
        assert!(calls < 2000, "READDIRPLUS never reached eof");
        let r = ok(&at("READDIRPLUS"), nfs.readdirplus(&a).await);
        for e in &r.entries {
            let n = name(&e.name);
            *seen.entry(n.clone()).or_insert(0) += 1;
            if n == "." || n == ".." {
                continue;
            }
            let attrs = e.name_attributes.as_ref().expect("READDIRPLUS attributes");
            assert_eq!(attrs.fileid, e.fileid);
            assert_eq!(attrs.ftype, Ftype3::Reg);
            let fh = e.name_handle.as_ref().expect("READDIRPLUS handle");
            if n == names[7] {
                assert_eq!(getattr(nfs, fh).await.fileid, e.fileid);
                assert_eq!(fh, &lookup(nfs, &many, &n).await);
            }
        }
        if r.eof {
            break;
        }
        a.cookie = r.entries.last().expect("no entries and no eof").cookie;
        a.cookieverf = r.cookieverf;
    }
    check_listing(&at("READDIRPLUS"), &seen, &names);
    assert!(calls > 5, "{}", at(&format!("{calls} READDIRPLUS calls")));
    // The whole of `d`.
    let all: Vec<String> = nfs
        .readdir_all(&d)
        .await
        .expect("READDIR d")
        .iter()
        .map(|e| name(&e.name))
        .filter(|n| n != "." && n != "..")
        .collect();
    let mut all_sorted = all.clone();
    all_sorted.sort();
    assert_eq!(
        all_sorted,
        ["f2", "fifo", "hard", "ln", "many"],
        "{}",
        at("READDIR after the changes")
    );

    // FSSTAT, FSINFO, PATHCONF.
    let st = ok(
        &at("FSSTAT"),
        nfs.fsstat(&FsStat3Args {
            fsroot: s.root.clone(),
        })
        .await,
    );
    assert!(st.tbytes > 0 && st.fbytes <= st.tbytes && st.abytes <= st.fbytes);
    assert!(st.obj_attributes.is_some());
    let fi = ok(
        &at("FSINFO"),
        nfs.fsinfo(&FsInfo3Args {
            fsroot: s.root.clone(),
        })
        .await,
    );
    assert!(fi.rtmax >= 4096 && fi.wtmax >= 4096 && fi.dtpref > 0);
    assert!(fi.maxfilesize >= 1 << 32);
    let props = FSF3_LINK | FSF3_SYMLINK | FSF3_HOMOGENEOUS | FSF3_CANSETTIME;
    assert_eq!(fi.properties & props, props, "{}", at("FSINFO properties"));
    let pc = ok(
        &at("PATHCONF"),
        nfs.pathconf(&PathConf3Args { object: f.clone() }).await,
    );
    assert!(pc.name_max >= 255 && pc.no_trunc && pc.case_preserving && !pc.case_insensitive);
    assert!(pc.linkmax >= 2);
}

// ---------------------------------------------------------------------------
// 2. Handles, cookies and data of one head used on the other.

#[tokio::test(flavor = "multi_thread")]
async fn handles_and_cookies_cross_heads() {
    bounded_ceph(async {
        let Some(scratch) = Scratch::new("cross_heads").await else {
            return;
        };
        let (ha, hb) = scratch.heads();
        let (a, b) = (mount(&ha).await, mount(&hb).await);
        assert_eq!(a.root, b.root, "the heads' root handles differ");

        // Objects made on A, used on B (which never saw them).
        let d = mkdir(&a.nfs, &a.root, "d").await;
        let (f, _) = create_file(&a.nfs, &d, "f").await;
        write(&a.nfs, &f, 0, b"hello").await;
        for (what, fh) in [("root", &a.root), ("dir", &d), ("file", &f)] {
            let (x, y) = (getattr(&a.nfs, fh).await, getattr(&b.nfs, fh).await);
            assert_eq!(x.fsid, y.fsid, "{what}: fsid differs between heads");
            assert_eq!(x.fileid, y.fileid, "{what}: fileid differs between heads");
            assert_eq!(
                (x.ftype, x.mode, x.nlink, x.mtime, x.ctime),
                (y.ftype, y.mode, y.nlink, y.mtime, y.ctime),
                "{what}"
            );
            // A directory's size is CephFS's recursive byte count, which
            // reaches other clients lazily: only a file's is compared.
            if x.ftype == Ftype3::Reg {
                assert_eq!(x.size, y.size, "{what}: size differs between heads");
            }
        }
        assert_eq!(
            lookup(&b.nfs, &d, "f").await,
            f,
            "B's LOOKUP gives another handle than A's CREATE"
        );
        assert_eq!(read_data(&b.nfs, &f, 0, 100).await, b"hello", "READ on B");
        // WRITE on B through A's handle, read back on A.
        let w = write_res(&b.nfs, &f, 5, b" world", StableHow::FileSync).await;
        assert_eq!(w.file_wcc.after.expect("after").size, 11);
        assert_eq!(
            read_data(&a.nfs, &f, 0, 100).await,
            b"hello world",
            "READ on A"
        );

        // Each head sees the other's change at once, also while it holds
        // the file's attributes cached (GETATTR may be answered from the
        // libcephfs cache only while capabilities vouch for it).
        let (h, _) = create_file(&a.nfs, &d, "h").await;
        for i in 0..20u64 {
            let (w, r) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
            getattr(&r.nfs, &h).await;
            write_res(&w.nfs, &h, i, b"x", StableHow::FileSync).await;
            let mode = 0o600 | (i as u32 % 8) << 3;
            ok(
                "SETATTR mode",
                setattr_res(&w.nfs, &h, sattr_mode(mode), None).await,
            );
            let (x, y) = (getattr(&w.nfs, &h).await, getattr(&r.nfs, &h).await);
            assert_eq!((y.size, y.mode), (i + 1, mode), "round {i}: the other head");
            assert_eq!(
                (x.size, x.mtime, x.ctime),
                (y.size, y.mtime, y.ctime),
                "round {i}"
            );
        }

        // UNSTABLE + COMMIT through A, byte-exact through B.
        let (g, _) = create_file(&a.nfs, &d, "g").await;
        let data = pattern(3 << 20, 2);
        let mut verf = None;
        for (i, chunk) in data.chunks(256 * 1024).enumerate() {
            let off = (i * 256 * 1024) as u64;
            let r = write_res(&a.nfs, &g, off, chunk, StableHow::Unstable).await;
            assert!(verf.is_none_or(|v| v == r.verf), "verifier changed");
            verf = Some(r.verf);
        }
        assert_eq!(commit(&a.nfs, &g).await.verf, verf.expect("verf"));
        assert_eq!(getattr(&b.nfs, &g).await.size, data.len() as u64);
        let back = b.nfs.read_all(&g).await.expect("READ g on B");
        assert!(back == data, "data written on A read differently on B");

        // READDIR begun on A, continued on B.
        let many = mkdir(&a.nfs, &d, "many").await;
        let names = make_names(&a.nfs, &many, 300).await;
        let first = ok(
            "READDIR on A",
            a.nfs
                .readdir(&ReadDir3Args {
                    dir: many.clone(),
                    cookie: 0,
                    cookieverf: Verf3::default(),
                    count: 1024,
                })
                .await,
        );
        assert!(!first.eof && first.entries.len() > 2, "one page listed all");
        let mut seen = BTreeMap::new();
        for e in &first.entries {
            *seen.entry(name(&e.name)).or_insert(0) += 1;
        }
        let cookie = first.entries.last().expect("entries").cookie;
        let calls = readdir_from(&b.nfs, &many, cookie, first.cookieverf, 1024, &mut seen).await;
        assert!(calls > 1);
        check_listing("READDIR A then B", &seen, &names);

        // Removed through A: STALE on B, whether B had it cached or not.
        let (cached, _) = create_file(&a.nfs, &d, "cached").await;
        let (cold, _) = create_file(&a.nfs, &d, "cold").await;
        getattr(&b.nfs, &cached).await;
        ok("REMOVE cached", remove_res(&a.nfs, &d, "cached").await);
        ok("REMOVE cold", remove_res(&a.nfs, &d, "cold").await);
        for (what, fh) in [("cached on B", &cached), ("never seen by B", &cold)] {
            assert_eq!(
                getattr_status(&b.nfs, fh).await.expect("GETATTR rpc"),
                Nfsstat3::Stale,
                "removed on A, {what}: GETATTR on B"
            );
            assert_eq!(
                getattr_status(&a.nfs, fh).await.expect("GETATTR rpc"),
                Nfsstat3::Stale,
                "removed on A, {what}: GETATTR on A"
            );
        }

        // One byte changed: BADHANDLE on both heads.
        for at in [10, f.data.len() / 2, f.data.len() - 1] {
            let mut bad = f.clone();
            bad.data[at] ^= 0x40;
            for (h, s) in [("A", &a), ("B", &b)] {
                assert_eq!(
                    getattr_status(&s.nfs, &bad).await.expect("GETATTR rpc"),
                    Nfsstat3::BadHandle,
                    "byte {at} of {} flipped, on {h}",
                    f.data.len()
                );
            }
        }
    })
    .await;
}

// ---------------------------------------------------------------------------
// 3. A head restarted under a client's handles.

#[tokio::test(flavor = "multi_thread")]
async fn restarted_head_resolves_old_handles() {
    bounded_ceph(async {
        let Some(scratch) = Scratch::new("restart").await else {
            return;
        };
        let (ha, mut hb) = scratch.heads();
        let a = mount(&ha).await;
        let b = mount(&hb).await;
        let d = mkdir(&a.nfs, &a.root, "d").await;
        let (fa, _) = create_file(&a.nfs, &d, "from-a").await;
        write(&a.nfs, &fa, 0, b"written on A").await;
        let (fb, _) = create_file(&b.nfs, &d, "from-b").await;
        let wb = write_res(&b.nfs, &fb, 0, b"written on B", StableHow::FileSync).await;
        let wa = write_res(&a.nfs, &fa, 0, b"written", StableHow::Unstable).await;
        let db = mkdir(&b.nfs, &d, "dir-b").await;
        let ids: Vec<u64> = {
            let mut v = Vec::new();
            for fh in [&d, &fa, &fb, &db] {
                v.push(getattr(&b.nfs, fh).await.fileid);
            }
            v
        };
        drop(b);

        hb.restart();
        let b = mount(&hb).await;
        assert_eq!(b.root, a.root, "root handle changed across the restart");
        for (i, (what, fh)) in [
            ("dir", &d),
            ("A's file", &fa),
            ("B's file", &fb),
            ("B's dir", &db),
        ]
        .into_iter()
        .enumerate()
        {
            let at = ok(
                &format!("GETATTR {what} on the restarted B"),
                b.nfs.getattr(&GetAttr3Args { object: fh.clone() }).await,
            )
            .obj_attributes;
            assert_eq!(
                at.fileid, ids[i],
                "{what}: another object after the restart"
            );
        }
        assert_eq!(read_data(&b.nfs, &fa, 0, 100).await, b"written on A");
        assert_eq!(read_data(&b.nfs, &fb, 0, 100).await, b"written on B");
        assert_eq!(lookup(&b.nfs, &d, "from-a").await, fa);
        create_file(&b.nfs, &db, "after-restart").await;

        // A new instance, a new write verifier; A's is unchanged.
        let wb2 = write_res(&b.nfs, &fb, 0, b"W", StableHow::Unstable).await;
        assert_ne!(wb2.verf, wb.verf, "B's write verifier survived its restart");
        assert_eq!(commit(&b.nfs, &fb).await.verf, wb2.verf);
        let wa2 = write_res(&a.nfs, &fa, 0, b"W", StableHow::Unstable).await;
        assert_eq!(wa2.verf, wa.verf, "A's verifier changed when B restarted");
        assert_eq!(read_data(&a.nfs, &fb, 0, 100).await, b"Written on B");
    })
    .await;
}

// ---------------------------------------------------------------------------
// 3b. NLM locks are CephFS locks: owners conflict across heads.

#[tokio::test(flavor = "multi_thread")]
async fn locks_conflict_across_heads() {
    bounded_ceph(async {
        let Some(scratch) = Scratch::new("locks").await else {
            return;
        };
        let (ha, hb) = scratch.heads();
        let (a, b) = (mount(&ha).await, mount(&hb).await);
        let (f, _) = create_file(&a.nfs, &a.root, "f").await;
        write(&a.nfs, &f, 0, b"0123456789").await;
        let (na, nb) = (
            NlmClient::new(a.client.clone()),
            NlmClient::new(b.client.clone()),
        );
        let one = nlm_lock(&f, "hosta", 1, 0, 5);
        assert_eq!(lock(&na, &one, true, false).await, Nlm4Stats::Granted);
        // Another owner on the same head, and owners on the other head.
        let two = nlm_lock(&f, "hosta", 2, 4, 2);
        assert_eq!(lock(&na, &two, false, false).await, Nlm4Stats::Denied);
        let three = nlm_lock(&f, "hostb", 3, 0, 10);
        assert_eq!(
            lock(&nb, &three, true, false).await,
            Nlm4Stats::Denied,
            "head B"
        );
        let four = nlm_lock(&f, "hostb", 4, 5, 5);
        assert_eq!(
            lock(&nb, &four, true, false).await,
            Nlm4Stats::Granted,
            "head B, a range nobody holds"
        );
        let t = nb
            .test(&Nlm4TestArgs {
                cookie: NetObj(b"t".to_vec()),
                exclusive: false,
                alock: nlm_lock(&f, "hostb", 5, 0, 1),
            })
            .await
            .expect("TEST");
        assert!(
            matches!(t.stat, Nlm4TestRply::Denied(_)),
            "TEST on B of A's range: {:?}",
            t.stat
        );
        assert_eq!(unlock(&na, &one).await, Nlm4Stats::Granted);
        assert_eq!(
            lock(&nb, &nlm_lock(&f, "hostb", 3, 0, 5), true, false).await,
            Nlm4Stats::Granted,
            "head B once A's owner unlocked"
        );
    })
    .await;
}

// ---------------------------------------------------------------------------
// 4. No MDS answers: later calls get JUKEBOX within the time limit, and
// all is well again once it answers.

/// SIGSTOP of the cluster's MDS until dropped (SIGCONT, also on a panic).
struct FrozenMds(String);

impl FrozenMds {
    fn new(conf: &str) -> FrozenMds {
        let run = Path::new(conf).parent().expect("conf dir").join("run");
        let pid = std::fs::read_dir(&run)
            .expect("the cluster's run directory")
            .filter_map(|e| e.ok())
            .find(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with("mds.") && n.ends_with(".pid")
            })
            .and_then(|e| std::fs::read_to_string(e.path()).ok())
            .expect("the MDS pid file")
            .trim()
            .to_owned();
        let st = std::process::Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .expect("kill -STOP");
        assert!(st.success(), "kill -STOP {pid}");
        FrozenMds(pid)
    }
}

impl Drop for FrozenMds {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &self.0])
            .status();
    }
}

async fn mkdir_status(nfs: &NfsClient, dir: &NfsFh3, name: &str) -> Nfsstat3 {
    nfs.mkdir(&Mkdir3Args {
        where_: dirop(dir, name),
        attributes: sattr_mode(0o755),
    })
    .await
    .expect("MKDIR rpc")
    .status()
}

#[tokio::test(flavor = "multi_thread")]
async fn no_mds_gets_jukebox_within_the_limit() {
    let Some(conf) = ceph_conf("no_mds_gets_jukebox_within_the_limit") else {
        return;
    };
    // Alone on the cluster: the others wait (their calls would stall too).
    let _alone = CLUSTER.write().await;
    let body = async {
        let Some(scratch) = Scratch::new("no_mds").await else {
            return;
        };
        // This head's calls have a limit of 1 s.
        let cfg = TempDir::new("ceph-limit-cfg");
        let text = std::fs::read_to_string(&scratch.head_cfg_file).expect("head config");
        let f = write_config(
            cfg.path(),
            &format!("[server]\nceph_call_timeout_ms = 1000\n{text}"),
        );
        let head = Head(TestServer::start_config(
            Path::new(&f),
            Path::new(MNT),
            TempDir::new("ceph-limit"),
            &["--no-rpcbind"],
        ));
        let s = mount(&head).await;
        mkdir(&s.nfs, &s.root, "before").await;

        let frozen = FrozenMds::new(&conf);
        // A call already running when the MDS stopped waits for it...
        let nfs = s.nfs.clone();
        let root = s.root.clone();
        let stuck = tokio::spawn(async move { mkdir_status(&nfs, &root, "stuck").await });
        // ...and once it is past the limit, later calls get JUKEBOX within it.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        for name in ["late1", "late2", "late3"] {
            let t0 = std::time::Instant::now();
            let st = mkdir_status(&s.nfs, &s.root, name).await;
            assert_eq!(st, Nfsstat3::Jukebox, "MKDIR {name} with no MDS");
            assert!(
                t0.elapsed() < Duration::from_millis(2500),
                "MKDIR {name}: JUKEBOX after {:?}, limit 1 s",
                t0.elapsed()
            );
        }
        assert!(
            !stuck.is_finished(),
            "the call running when the MDS stopped returned"
        );
        drop(frozen);
        // The MDS answers again: the stuck call completes, new calls work.
        assert_eq!(stuck.await.expect("task"), Nfsstat3::Ok, "MKDIR stuck");
        let mut st = Nfsstat3::Jukebox;
        for _ in 0..100 {
            st = mkdir_status(&s.nfs, &s.root, "after").await;
            if st != Nfsstat3::Jukebox {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert_eq!(st, Nfsstat3::Ok, "MKDIR after the MDS came back");
        // Counted where operators look (`rnfsd stats --json`).
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rnfsd"))
            .args(["stats", "--json", "--state-dir"])
            .arg(head.state.path())
            .output()
            .expect("rnfsd stats");
        let snap = rnfsd_stats::Snapshot::from_json(&String::from_utf8_lossy(&out.stdout))
            .expect("a JSON snapshot");
        let e = &snap.exports[0];
        assert!(e.calls_jukebox >= 3 && e.stalls >= 1, "stats: {e:?}");
        // A JUKEBOX'd MKDIR may still have been made in the background.
        for name in ["before", "stuck", "after"] {
            lookup(&s.nfs, &s.root, name).await;
        }
    };
    match tokio::time::timeout(CEPH_TEST_TIMEOUT, body).await {
        Ok(()) => {}
        Err(_) => panic!("test body exceeded {CEPH_TEST_TIMEOUT:?}"),
    }
}

// ---------------------------------------------------------------------------
// 5. POSIX ACLs set on CephFS (here through libcephfs, as a kernel mount or
// another rnfsd would) are honoured for READ, WRITE, ACCESS and LOOKUP.

const ACL_USER_OBJ: u16 = 0x01;
const ACL_USER: u16 = 0x02;
const ACL_GROUP_OBJ: u16 = 0x04;
const ACL_MASK: u16 = 0x10;
const ACL_OTHER: u16 = 0x20;

/// A system.posix_acl_access value: version 2, then (tag, perm, id).
fn acl_xattr(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut v = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in entries {
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(&perm.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
    }
    v
}

/// Sets the access ACL of `path` (from CephFS's root) as root, through a
/// libcephfs client of this test's own.
fn set_acl(conf: &str, path: &[&str], acl: &[u8]) {
    use rnfsd_fs::ceph::ffi::{Mount, MountArgs, Perm};
    let m = Mount::open(&MountArgs {
        conf,
        client: "admin",
        fs: None,
        root: "/",
        mount_timeout_secs: 30,
        uuid: None,
    })
    .expect("libcephfs mount");
    let root = Perm::new(0, 0, &[]).expect("perm");
    let mut at = m.lookup_root().expect("root");
    for p in path {
        at = m.lookup(&at, p.as_bytes(), &root).expect("lookup").0;
    }
    m.setxattr(&at, "system.posix_acl_access", acl, 0, &root)
        .unwrap_or_else(|e| panic!("setxattr {path:?}: errno {e}"));
}

#[tokio::test(flavor = "multi_thread")]
async fn posix_acls_are_honoured() {
    let Some(conf) = ceph_conf("posix_acls_are_honoured") else {
        return;
    };
    bounded_ceph(async {
        let Some(scratch) = Scratch::new("acls").await else {
            return;
        };
        let head = scratch.head(TempDir::new("ceph-acls"));
        let s = mount(&head).await;
        let any = u32::MAX;
        let (bob, carol) = (1001, 1002);
        // Mode 0644, but not for bob.
        let (denied, _) = create_file(&s.nfs, &s.root, "denied").await;
        write(&s.nfs, &denied, 0, b"secret").await;
        // Mode 0640 (root's group), and for bob too.
        let (granted, _) = create_file(&s.nfs, &s.root, "granted").await;
        write(&s.nfs, &granted, 0, b"shared").await;
        ok(
            "SETATTR 0640",
            setattr_res(&s.nfs, &granted, sattr_mode(0o640), None).await,
        );
        // A directory bob may not search.
        let closed = mkdir(&s.nfs, &s.root, "closed").await;
        create_file(&s.nfs, &closed, "inner").await;
        let dir = scratch.dir.clone();
        let conf2 = conf.clone();
        tokio::task::spawn_blocking(move || {
            let conf = conf2.as_str();
            set_acl(
                conf,
                &[&dir, "denied"],
                &acl_xattr(&[
                    (ACL_USER_OBJ, 6, any),
                    (ACL_USER, 0, bob),
                    (ACL_GROUP_OBJ, 4, any),
                    (ACL_MASK, 4, any),
                    (ACL_OTHER, 4, any),
                ]),
            );
            set_acl(
                conf,
                &[&dir, "granted"],
                &acl_xattr(&[
                    (ACL_USER_OBJ, 6, any),
                    (ACL_USER, 4, bob),
                    (ACL_GROUP_OBJ, 4, any),
                    (ACL_MASK, 4, any),
                    (ACL_OTHER, 0, any),
                ]),
            );
            set_acl(
                conf,
                &[&dir, "closed"],
                &acl_xattr(&[
                    (ACL_USER_OBJ, 7, any),
                    (ACL_USER, 0, bob),
                    (ACL_GROUP_OBJ, 5, any),
                    (ACL_MASK, 5, any),
                    (ACL_OTHER, 5, any),
                ]),
            );
        })
        .await
        .expect("setting ACLs");
        let as_bob = s.nfs.with_auth(Auth::unix(bob, bob));
        let as_carol = s.nfs.with_auth(Auth::unix(carol, carol));
        let access = |nfs: NfsClient, fh: NfsFh3| async move {
            ok(
                "ACCESS",
                nfs.access(&Access3Args {
                    object: fh,
                    access: ACCESS3_READ | ACCESS3_LOOKUP | ACCESS3_MODIFY,
                })
                .await,
            )
            .access
        };
        // Denied to bob by his entry, though "other" may read.
        fail(
            "bob's READ of denied",
            read_res(&as_bob, &denied, 0, 100).await,
            Nfsstat3::Acces,
        );
        assert_eq!(
            access(as_bob.clone(), denied.clone()).await & ACCESS3_READ,
            0,
            "bob's ACCESS of denied"
        );
        assert_eq!(read_data(&as_carol, &denied, 0, 100).await, b"secret");
        assert_ne!(
            access(as_carol.clone(), denied.clone()).await & ACCESS3_READ,
            0
        );
        // Granted to bob by his entry, though "other" may not read.
        assert_eq!(read_data(&as_bob, &granted, 0, 100).await, b"shared");
        assert_ne!(
            access(as_bob.clone(), granted.clone()).await & ACCESS3_READ,
            0,
            "bob's ACCESS of granted"
        );
        fail(
            "carol's READ of granted",
            read_res(&as_carol, &granted, 0, 100).await,
            Nfsstat3::Acces,
        );
        fail(
            "bob's WRITE of granted (his entry is r--)",
            as_bob
                .write(&Write3Args {
                    file: granted.clone(),
                    offset: 0,
                    count: 1,
                    stable: StableHow::FileSync,
                    data: b"x".to_vec(),
                })
                .await,
            Nfsstat3::Acces,
        );
        // libcephfs checks the caller's LOOKUP against the ACL too.
        assert_eq!(
            access(as_bob.clone(), closed.clone()).await & ACCESS3_LOOKUP,
            0,
            "bob's ACCESS of closed"
        );
        fail(
            "bob's LOOKUP in closed",
            lookup_res(&as_bob, &closed, "inner").await,
            Nfsstat3::Acces,
        );
        lookup(&as_carol, &closed, "inner").await;
    })
    .await;
}

// ---------------------------------------------------------------------------
// 6. UNCHECKED CREATE of a file that exists changes only its size (as
// knfsd does): a racing open(O_CREAT) must not chmod another's file.

fn sattr(mode: Option<u32>, size: Option<u64>) -> Sattr3 {
    Sattr3 {
        mode,
        size,
        ..Sattr3::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unchecked_create_of_an_existing_file_changes_only_its_size() {
    bounded_ceph(async {
        let Some(scratch) = Scratch::new("unchecked").await else {
            return;
        };
        let head = scratch.head(TempDir::new("ceph-unchecked"));
        let s = mount(&head).await;
        let d = mkdir(&s.nfs, &s.root, "d").await;
        // A private file of uid 1000.
        let (f, _) = create_file(&s.nfs, &d, "f").await;
        write(&s.nfs, &f, 0, b"private").await;
        let own = Sattr3 {
            mode: Some(0o600),
            uid: Some(1000),
            gid: Some(1000),
            ..Sattr3::default()
        };
        ok(
            "SETATTR owner",
            setattr_res(&s.nfs, &f, own.clone(), None).await,
        );
        let owner = s.nfs.with_auth(Auth::unix(1000, 1000));
        let other = s.nfs.with_auth(Auth::unix(2000, 2000));
        let check = |what: &'static str| {
            let nfs = s.nfs.clone();
            let f = f.clone();
            async move {
                let a = getattr(&nfs, &f).await;
                assert_eq!((a.mode, a.uid, a.gid), (0o600, 1000, 1000), "{what}");
                a
            }
        };
        // The owner's open(O_CREAT, 0644) of the file it has.
        let r = ok(
            "UNCHECKED by the owner",
            create_how(
                &owner,
                &d,
                "f",
                CreateHow3::Unchecked(sattr(Some(0o644), None)),
            )
            .await,
        );
        assert_eq!(r.obj, Some(f.clone()), "UNCHECKED gave another object");
        assert_eq!(check("after the owner's UNCHECKED").await.size, 7);
        // Someone else's: it opens, nothing changes (not EPERM for a
        // chmod it may not do).
        ok(
            "UNCHECKED by another user",
            create_how(
                &other,
                &d,
                "f",
                CreateHow3::Unchecked(sattr(Some(0o666), None)),
            )
            .await,
        );
        assert_eq!(check("after another user's UNCHECKED").await.size, 7);
        // The size is applied (O_TRUNC).
        ok(
            "UNCHECKED size 0",
            create_how(
                &owner,
                &d,
                "f",
                CreateHow3::Unchecked(sattr(Some(0o644), Some(0))),
            )
            .await,
        );
        assert_eq!(check("after UNCHECKED size 0").await.size, 0);
        // A file the call makes gets every attribute asked for.
        let r = ok(
            "UNCHECKED of a new file",
            create_how(&s.nfs, &d, "new", CreateHow3::Unchecked(own)).await,
        );
        let a = getattr(&s.nfs, &r.obj.expect("handle")).await;
        assert_eq!((a.mode, a.uid, a.gid), (0o600, 1000, 1000), "a new file");
        // Over a directory: EEXIST.
        mkdir(&s.nfs, &d, "sub").await;
        fail(
            "UNCHECKED over a directory",
            create_how(
                &owner,
                &d,
                "sub",
                CreateHow3::Unchecked(sattr(Some(0o644), None)),
            )
            .await,
            Nfsstat3::Exist,
        );
    })
    .await;
}

// ---------------------------------------------------------------------------
// 7. EXCLUSIVE CREATE survives a head killed mid-create: the client's retry
// on another head makes its file, not EEXIST.

/// A head of the scratch directory with `server` lines in its config.
fn head_with(scratch: &Scratch, tag: &str, server: &str, env: &[(&str, &str)]) -> (Head, TempDir) {
    let cfg = TempDir::new(&format!("{tag}-cfg"));
    let text = std::fs::read_to_string(&scratch.head_cfg_file).expect("head config");
    let f = write_config(cfg.path(), &format!("[server]\n{server}\n{text}"));
    let head = Head(TestServer::start_config_env(
        Path::new(&f),
        Path::new(MNT),
        TempDir::new(tag),
        &["--no-rpcbind"],
        env,
    ));
    (head, cfg)
}

#[tokio::test(flavor = "multi_thread")]
async fn exclusive_create_survives_a_head_killed_mid_create() {
    bounded_ceph(async {
        let Some(scratch) = Scratch::new("exclusive").await else {
            return;
        };
        let lock_name = "lock-file";
        // Head A aborts (test builds only) once the file exists, before
        // the verifier is set.
        let (mut a, _cfg) = head_with(
            &scratch,
            "ceph-abort",
            "",
            &[("RNFSD_TEST_CEPH_ABORT_EXCLUSIVE", lock_name)],
        );
        let b = scratch.head(a.copy_handle_key("ceph-b"));
        let (sa, sb) = (mount(&a).await, mount(&b).await);
        assert_eq!(sa.root, sb.root);
        let d = mkdir(&sa.nfs, &sa.root, "d").await;
        let verf = Verf3(*b"\x12\x34\x56\x78\x9a\xbc\xde\xf0");
        let died = create_how(&sa.nfs, &d, lock_name, CreateHow3::Exclusive(verf)).await;
        assert!(died.is_err(), "head A answered: {died:?}");
        // A restarts: its new session ends the one it left (whose
        // capabilities the other head would otherwise wait for).
        a.kill();
        a.respawn();
        // The client retries on B: its own create, made whole.
        let r = ok(
            "EXCLUSIVE retried on B",
            create_how(&sb.nfs, &d, lock_name, CreateHow3::Exclusive(verf)).await,
        );
        let fh = r.obj.expect("handle");
        let at = getattr(&sb.nfs, &fh).await;
        assert_eq!((at.ftype, at.size, at.nlink), (Ftype3::Reg, 0, 1));
        let again = ok(
            "EXCLUSIVE retried again",
            create_how(&sb.nfs, &d, lock_name, CreateHow3::Exclusive(verf)).await,
        );
        assert_eq!(again.obj, Some(fh.clone()));
        fail(
            "EXCLUSIVE, another verifier",
            create_how(
                &sb.nfs,
                &d,
                lock_name,
                CreateHow3::Exclusive(Verf3(*b"another!")),
            )
            .await,
            Nfsstat3::Exist,
        );
        // The client's SETATTR after the create (RFC 1813 §3.3.8).
        ok(
            "SETATTR after EXCLUSIVE",
            setattr_res(&sb.nfs, &fh, sattr_mode(0o644), None).await,
        );
        // Nothing else is left in the directory.
        let names: Vec<String> = sb
            .nfs
            .readdir_all(&d)
            .await
            .expect("READDIR")
            .iter()
            .map(|e| name(&e.name))
            .filter(|n| n != "." && n != "..")
            .collect();
        assert_eq!(names, [lock_name], "left in the directory");
    })
    .await;
}

// ---------------------------------------------------------------------------
// 8. A call answered JUKEBOX never runs later: a WRITE that timed out while
// queued cannot land after the client's next WRITE to the same range.

/// SIGSTOP of a process until dropped (SIGCONT, also on a panic).
struct Frozen(u32);

impl Frozen {
    fn new(pid: u32) -> Frozen {
        let st = std::process::Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status()
            .expect("kill -STOP");
        assert!(st.success(), "kill -STOP {pid}");
        Frozen(pid)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

async fn write_status(nfs: &NfsClient, fh: &NfsFh3, data: &[u8]) -> Nfsstat3 {
    nfs.write(&Write3Args {
        file: fh.clone(),
        offset: 0,
        count: data.len() as u32,
        stable: StableHow::FileSync,
        data: data.to_vec(),
    })
    .await
    .expect("WRITE rpc")
    .status()
}

async fn getattr_took(nfs: &NfsClient, fh: &NfsFh3) -> (Nfsstat3, Duration) {
    let t0 = std::time::Instant::now();
    let st = getattr_status(nfs, fh).await.expect("GETATTR rpc");
    (st, t0.elapsed())
}

/// Two other CephFS clients (heads T1, T2 of the same directory) each
/// holding the write capabilities of a file of their own (g1, g2): while
/// one is frozen, a call of the head under test on its file waits for it,
/// and nothing else does.
struct Blockers {
    t: [Head; 2],
    /// g1 and g2 through the head under test.
    g: [NfsFh3; 2],
}

impl Blockers {
    async fn new(scratch: &Scratch, s: &Session) -> Blockers {
        let t = [
            scratch.head(TempDir::new("ceph-t1")),
            scratch.head(TempDir::new("ceph-t2")),
        ];
        let mut g = Vec::new();
        for (t, name) in t.iter().zip(["g1", "g2"]) {
            let ts = mount(t).await;
            let (gt, _) = create_file(&ts.nfs, &ts.root, name).await;
            let gh = lookup(&s.nfs, &s.root, name).await;
            getattr(&s.nfs, &gh).await;
            // Buffered by the other client: it holds the file's write
            // capabilities until it is asked for them.
            write_res(&ts.nfs, &gt, 0, b"x", StableHow::Unstable).await;
            g.push(gh);
        }
        let g = [g[0].clone(), g[1].clone()];
        Blockers { t, g }
    }

    fn freeze(&self) -> (Frozen, Frozen) {
        let pid = |h: &Head| h.pid().expect("blocker runs");
        (Frozen::new(pid(&self.t[0])), Frozen::new(pid(&self.t[1])))
    }

    /// GETATTR of g1 or g2 (`i`) through `s`, in the background.
    fn call(&self, s: &Session, i: usize) -> tokio::task::JoinHandle<(Nfsstat3, Duration)> {
        let (nfs, g) = (s.nfs.clone(), self.g[i].clone());
        tokio::spawn(async move { getattr_took(&nfs, &g).await })
    }
}

/// Until a call on the root answers at once: `s`'s head runs calls
/// directly again.
async fn until_direct(s: &Session) {
    for _ in 0..50 {
        let (st, took) = getattr_took(&s.nfs, &s.root).await;
        if st == Nfsstat3::Ok && took < Duration::from_millis(500) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the head never ran calls directly again");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_answered_jukebox_never_lands_later() {
    let Some(_conf) = ceph_conf("a_write_answered_jukebox_never_lands_later") else {
        return;
    };
    // Alone on the cluster: two of its clients are frozen for a while.
    let _alone = CLUSTER.write().await;
    let body = async {
        let Some(scratch) = Scratch::new("jukebox_write").await else {
            return;
        };
        // One call at a time directly and one on the pool, limit 1 s.
        let (h, _cfg) = head_with(
            &scratch,
            "ceph-one",
            "ceph_call_timeout_ms = 1000\nceph_call_threads = 1",
            &[],
        );
        let s = mount(&h).await;
        let (f, _) = create_file(&s.nfs, &s.root, "f").await;
        assert_eq!(write_status(&s.nfs, &f, b"0000").await, Nfsstat3::Ok);
        let b = Blockers::new(&scratch, &s).await;
        let (frozen1, frozen2) = b.freeze();
        // g1 holds the direct slot past the limit: the head is stalled...
        let on_g1 = b.call(&s, 0);
        tokio::time::sleep(Duration::from_millis(1600)).await;
        // ... g2 holds the pool's one thread ...
        let on_g2 = b.call(&s, 1);
        tokio::time::sleep(Duration::from_millis(300)).await;
        // ... and a WRITE of "AAAA" waits behind it, past the limit.
        assert_eq!(
            write_status(&s.nfs, &f, b"AAAA").await,
            Nfsstat3::Jukebox,
            "WRITE A, queued behind a stuck call"
        );
        assert_eq!(
            on_g2.await.expect("task").0,
            Nfsstat3::Jukebox,
            "GETATTR g2"
        );
        // g1's client answers: the head runs calls directly again.
        drop(frozen1);
        assert_eq!(on_g1.await.expect("task").0, Nfsstat3::Ok, "GETATTR g1");
        until_direct(&s).await;
        // The client's next WRITE to the same range, answered at once.
        assert_eq!(
            write_status(&s.nfs, &f, b"BBBB").await,
            Nfsstat3::Ok,
            "WRITE B"
        );
        // g2's client answers: the pool's thread is free for what waits.
        drop(frozen2);
        tokio::time::sleep(Duration::from_millis(2000)).await;
        assert_eq!(
            read_data(&s.nfs, &f, 0, 100).await,
            b"BBBB",
            "the WRITE answered JUKEBOX landed after the later one"
        );
    };
    match tokio::time::timeout(CEPH_TEST_TIMEOUT, body).await {
        Ok(()) => {}
        Err(_) => panic!("test body exceeded {CEPH_TEST_TIMEOUT:?}"),
    }
}

// ---------------------------------------------------------------------------
// 9. Exit while a call answered JUKEBOX still waits inside libcephfs: no
// unmount under it (that would free what it uses); the session is left,
// and the head's next start ends it.

#[tokio::test(flavor = "multi_thread")]
async fn exit_with_a_call_stuck_in_libcephfs() {
    let Some(_conf) = ceph_conf("exit_with_a_call_stuck_in_libcephfs") else {
        return;
    };
    // Alone on the cluster: two of its clients are frozen for a while.
    let _alone = CLUSTER.write().await;
    let body = async {
        let Some(scratch) = Scratch::new("stuck_exit").await else {
            return;
        };
        let (mut h, _cfg) = head_with(
            &scratch,
            "ceph-exit",
            "ceph_call_timeout_ms = 1000\nceph_call_threads = 1\nshutdown_timeout_secs = 1",
            &[],
        );
        let s = mount(&h).await;
        let b = Blockers::new(&scratch, &s).await;
        let (frozen1, frozen2) = b.freeze();
        // g1 stalls the head; g2 then holds the pool's thread, answered
        // JUKEBOX; g1 is answered once its client is back.
        let on_g1 = b.call(&s, 0);
        tokio::time::sleep(Duration::from_millis(1600)).await;
        assert_eq!(b.call(&s, 1).await.expect("task").0, Nfsstat3::Jukebox);
        drop(frozen1);
        assert_eq!(on_g1.await.expect("task").0, Nfsstat3::Ok, "GETATTR g1");
        // Exit with the GETATTR of g2 inside libcephfs.
        let t0 = std::time::Instant::now();
        let code = tokio::task::block_in_place(|| h.0.stop());
        let took = t0.elapsed();
        drop(frozen2);
        let log = std::fs::read_to_string(h.state.path().join("server.log")).unwrap_or_default();
        assert_eq!(code, Some(0), "exit (after {took:?}):\n{log}");
        assert!(took < Duration::from_secs(10), "exit took {took:?}");
        assert!(log.contains("session is left"), "{log}");
        // Its next start ends the session it left.
        h.respawn();
        let s = mount(&h).await;
        getattr(&s.nfs, &b.g[1]).await;
        assert_eq!(h.0.stop(), Some(0), "a clean exit");
    };
    match tokio::time::timeout(CEPH_TEST_TIMEOUT, body).await {
        Ok(()) => {}
        Err(_) => panic!("test body exceeded {CEPH_TEST_TIMEOUT:?}"),
    }
}

// ---------------------------------------------------------------------------
// 10. A third CephFS client (libcephfs, as ceph-fuse or a kernel mount would)
// changes a file's size, mode and times and the directory's entries while
// both heads serve GETATTR, LOOKUP, READDIR and READDIRPLUS of them: each
// head sees every change on its next call, whatever it holds cached.

/// The third client: a libcephfs mount of CephFS's root, as root.
pub(super) struct Third {
    pub(super) m: std::sync::Arc<rnfsd_fs::ceph::ffi::Mount>,
    pub(super) root: rnfsd_fs::ceph::ffi::Perm,
}

impl Third {
    pub(super) fn new(conf: &str) -> Third {
        use rnfsd_fs::ceph::ffi::{Mount, MountArgs, Perm};
        let m = Mount::open(&MountArgs {
            conf,
            client: "admin",
            fs: None,
            root: "/",
            mount_timeout_secs: 30,
            uuid: None,
        })
        .expect("libcephfs mount");
        Third {
            m,
            root: Perm::new(0, 0, &[]).expect("perm"),
        }
    }

    pub(super) fn walk(&self, path: &[&str]) -> rnfsd_fs::ceph::ffi::Inode {
        let mut at = self.m.lookup_root().expect("root");
        for p in path {
            at = self
                .m
                .lookup(&at, p.as_bytes(), &self.root)
                .unwrap_or_else(|e| panic!("third client: lookup {p}: errno {e}"))
                .0;
        }
        at
    }

    /// Round `i`'s change of `f`'s size, mode and times: returns them
    /// (size, mode, mtime (s, ns), atime s).
    pub(super) fn set_round(
        &self,
        f: &rnfsd_fs::ceph::ffi::Inode,
        i: u32,
    ) -> (u64, u32, (i64, u32), i64) {
        use rnfsd_fs::ceph::ffi;
        let want = (
            100 + u64::from(i),
            0o600 | (i % 8) << 3,
            (1_000_000 + i64::from(i), 7 + i),
            2_000_000 + i64::from(i),
        );
        // The size first: a size change sets mtime to now.
        let mut st = ffi::Statx {
            size: want.0,
            ..Default::default()
        };
        self.m
            .setattr(f, &mut st, ffi::SETATTR_SIZE, &self.root)
            .unwrap_or_else(|e| panic!("round {i}: third client truncate: errno {e}"));
        let mut st = ffi::Statx {
            mode: want.1 as u16,
            ..Default::default()
        };
        st.mtime.tv_sec = want.2 .0;
        st.mtime.tv_nsec = i64::from(want.2 .1);
        st.atime.tv_sec = want.3;
        let mask = ffi::SETATTR_MODE | ffi::SETATTR_MTIME | ffi::SETATTR_ATIME;
        self.m
            .setattr(f, &mut st, mask, &self.root)
            .unwrap_or_else(|e| panic!("round {i}: third client setattr: errno {e}"));
        want
    }

    /// Round `i`'s change of directory `d`'s entries: file `n{i}` made,
    /// the previous round's removed, directory `s{i}` made (the parent's
    /// nlink). Returns the new file's inode number.
    pub(super) fn entries_round(&self, d: &rnfsd_fs::ceph::ffi::Inode, i: u32) -> u64 {
        let (_, _, st) = self
            .m
            .create(
                d,
                format!("n{i}").as_bytes(),
                0o644,
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
                &self.root,
            )
            .unwrap_or_else(|e| panic!("round {i}: third client create: errno {e}"));
        if i > 0 {
            self.m
                .unlink(d, format!("n{}", i - 1).as_bytes(), &self.root)
                .unwrap_or_else(|e| panic!("round {i}: third client unlink: errno {e}"));
        }
        self.m
            .mkdir(d, format!("s{i}").as_bytes(), 0o755, &self.root)
            .unwrap_or_else(|e| panic!("round {i}: third client mkdir: errno {e}"));
        st.ino
    }

    /// The names `d` holds after round `i` (with "." and ".."), sorted.
    pub(super) fn names_after(i: u32, dot: bool) -> Vec<String> {
        let mut v: Vec<String> = ["f".to_string(), format!("n{i}")]
            .into_iter()
            .chain((0..=i).map(|k| format!("s{k}")))
            .chain(
                dot.then(|| [".".to_string(), "..".to_string()])
                    .into_iter()
                    .flatten(),
            )
            .collect();
        v.sort();
        v
    }
}

/// Every name READDIR and READDIRPLUS list in `dir` on `nfs`, and the
/// attributes READDIRPLUS gives for `of`.
async fn listing(nfs: &NfsClient, dir: &NfsFh3, of: &str) -> (Vec<String>, Option<Fattr3>) {
    let mut seen = BTreeMap::new();
    readdir_from(nfs, dir, 0, Verf3::default(), 4096, &mut seen).await;
    let mut plus = BTreeMap::new();
    let mut attrs = None;
    let mut a = ReadDirPlus3Args {
        dir: dir.clone(),
        cookie: 0,
        cookieverf: Verf3::default(),
        dircount: 4096,
        maxcount: 32768,
    };
    for _ in 0..100 {
        let r = ok("READDIRPLUS", nfs.readdirplus(&a).await);
        for e in &r.entries {
            let n = name(&e.name);
            if n == of {
                attrs = e.name_attributes.clone();
            }
            plus.insert(n, ());
        }
        if r.eof {
            break;
        }
        a.cookie = r.entries.last().expect("no entries and no eof").cookie;
        a.cookieverf = r.cookieverf;
    }
    let names: Vec<String> = seen.into_keys().collect();
    assert_eq!(
        names,
        plus.into_keys().collect::<Vec<_>>(),
        "READDIR and READDIRPLUS list different names"
    );
    (names, attrs)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_third_clients_changes_are_seen_on_both_heads() {
    bounded_ceph(async {
        let Some(scratch) = Scratch::new("third_client").await else {
            return;
        };
        let Some(conf) = ceph_conf("third_client") else {
            return;
        };
        let (ha, hb) = scratch.heads();
        let (a, b) = (mount(&ha).await, mount(&hb).await);
        let d = mkdir(&a.nfs, &a.root, "d").await;
        let (f, _) = create_file(&a.nfs, &d, "f").await;
        write(&a.nfs, &f, 0, b"hello").await;

        let third = Third::new(&conf);
        let tf = third.walk(&[&scratch.dir, "d", "f"]);
        let td = third.walk(&[&scratch.dir, "d"]);
        for i in 0..10u32 {
            // Both heads serve the file and the directory first, so
            // whatever they cache of them is warm.
            for s in [&a, &b] {
                getattr(&s.nfs, &f).await;
                getattr(&s.nfs, &d).await;
                assert_eq!(lookup(&s.nfs, &d, "f").await, f);
                listing(&s.nfs, &d, "f").await;
            }

            // Size, mode and both times, changed by the third client.
            let want = third.set_round(&tf, i);
            let want = (
                want.0,
                want.1,
                Nfstime3 {
                    seconds: want.2 .0 as u32,
                    nseconds: want.2 .1,
                },
                want.3 as u32,
            );
            for (h, s) in [("A", &a), ("B", &b)] {
                let x = getattr(&s.nfs, &f).await;
                assert_eq!(
                    (x.size, x.mode, x.mtime, x.atime.seconds),
                    want,
                    "round {i}: GETATTR on head {h} after the third client's SETATTR"
                );
                let l = ok("LOOKUP", lookup_res(&s.nfs, &d, "f").await);
                let la = l.obj_attributes.expect("LOOKUP attributes");
                assert_eq!(
                    (la.size, la.mode, la.mtime, la.atime.seconds),
                    want,
                    "round {i}: LOOKUP's attributes on head {h}"
                );
                let (_, pa) = listing(&s.nfs, &d, "f").await;
                let pa = pa.expect("READDIRPLUS attributes of f");
                assert_eq!(
                    (pa.size, pa.mode, pa.mtime, pa.atime.seconds),
                    want,
                    "round {i}: READDIRPLUS's attributes on head {h}"
                );
            }

            // Entries: a new file, the previous round's file removed, a
            // directory made (the parent's nlink).
            let new = format!("n{i}");
            let new_ino = third.entries_round(&td, i);
            for (h, s) in [("A", &a), ("B", &b)] {
                let at = |w: &str| {
                    format!("round {i}: {w} on head {h} after the third client's changes")
                };
                let n = ok(&at("LOOKUP new"), lookup_res(&s.nfs, &d, &new).await);
                assert_eq!(
                    n.obj_attributes.expect("attributes").fileid,
                    new_ino,
                    "{}",
                    at("LOOKUP new")
                );
                if i > 0 {
                    let gone = lookup_res(&s.nfs, &d, &format!("n{}", i - 1))
                        .await
                        .expect("LOOKUP removed");
                    assert_eq!(gone.status(), Nfsstat3::NoEnt, "{}", at("LOOKUP removed"));
                }
                let (names, _) = listing(&s.nfs, &d, "f").await;
                assert_eq!(names, Third::names_after(i, true), "{}", at("READDIR"));
                assert_eq!(
                    getattr(&s.nfs, &d).await.nlink,
                    2 + i + 1,
                    "{}",
                    at("GETATTR dir nlink")
                );
            }
        }
    })
    .await;
}

// ---------------------------------------------------------------------------
// 11. COMMITs of many files in flight at once share syncs of the whole mount
// (`ceph_mount_syncs`, `ceph/mod.rs` `sync_node`): every one answered has
// its data and size durable, so they survive the head killed right after
// the replies (its buffered data and unflushed capabilities die with it).

/// Files committed at once: more than one batch at 16 COMMITs in flight.
const GROUP_FILES: usize = 48;

#[tokio::test(flavor = "multi_thread")]
async fn commits_of_many_files_at_once_survive_a_killed_head() {
    bounded_ceph(async {
        let Some(scratch) = Scratch::new("mount-syncs").await else {
            return;
        };
        // A keeps committed files open for writing (test builds): their
        // last close would start a write-back that hides a skipped sync.
        let (mut a, _cfg) = head_with(
            &scratch,
            "ceph-group",
            "ceph_mount_syncs = 1",
            &[("RNFSD_TEST_CEPH_KEEP_WRITERS", "1")],
        );
        let b = scratch.head(a.copy_handle_key("ceph-b"));
        let sa = mount(&a).await;
        let d = mkdir(&sa.nfs, &sa.root, "d").await;
        let data = |i: usize| pattern(4096 + i * 37, i as u32);
        // Every file written UNSTABLE before any COMMIT: all of them dirty
        // in A's cache at once.
        let mut fhs = Vec::new();
        for i in 0..GROUP_FILES {
            let (fh, _) = create_file(&sa.nfs, &d, &format!("f{i:02}")).await;
            write_res(&sa.nfs, &fh, 0, &data(i), StableHow::Unstable).await;
            fhs.push(fh);
        }
        // Every COMMIT in flight at once, on a connection each.
        let mut set = tokio::task::JoinSet::new();
        for fh in &fhs {
            let (srv, fh) = (a.addr, fh.clone());
            set.spawn(async move {
                let c = Client::connect(srv, &config(1)).await.expect("connect");
                commit(&NfsClient::new(c), &fh).await
            });
        }
        while let Some(r) = set.join_next().await {
            r.expect("COMMIT task");
        }
        // A dies: what it had not made durable is gone. Its restart ends
        // the session it left (B would otherwise wait for its caps).
        a.kill();
        a.respawn();
        let sb = mount(&b).await;
        for (i, fh) in fhs.iter().enumerate() {
            let want = data(i);
            let got = read_data(&sb.nfs, fh, 0, want.len() as u32 + 100).await;
            assert!(
                got == want,
                "f{i:02}: {} bytes read back through B, {} committed through A",
                got.len(),
                want.len()
            );
        }
    })
    .await;
}
