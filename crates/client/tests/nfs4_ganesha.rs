//! The NFSv4.1 client against a real server: nfs-ganesha 4.3, run by
//! `scripts/ganesha.sh --v4` in its own network namespace.
//!
//! `v41_against_ganesha` starts ganesha with a fresh export and runs this
//! test binary again inside the namespace with `--ignored`, which runs the
//! `#[ignore]`d tests below against it; it fails if any of them fails and
//! skips (saying why) when ganesha cannot run here: not root, or no
//! ganesha installed (under CI as root, the latter fails instead). Run alone, an ignored test fails unless it is inside
//! the namespace (`GANESHA_NFS_PORT` set).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rnfsd_client::nfs4::*;
use rnfsd_client::{Auth, ClientConfig, ClientError};

/// The ignored tests below, which the outer test expects to see pass.
const INNER_TESTS: usize = 9;
/// Whole inner run, ganesha start-up included.
const OUTER_LIMIT: Duration = Duration::from_secs(300);
/// One inner test.
const LIMIT: Duration = Duration::from_secs(60);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Why ganesha cannot run here, if it cannot.
fn skip_reason() -> Option<String> {
    let euid = Command::new("id")
        .arg("-u")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    if euid != "0" {
        return Some(format!(
            "not root (euid {euid}): ganesha.sh needs namespaces and the VFS FSAL"
        ));
    }
    for tool in ["ganesha.nfsd", "rpcbind", "unshare"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if !found {
            return Some(format!(
                "{tool} is not installed (apt-get install nfs-ganesha nfs-ganesha-vfs rpcbind)"
            ));
        }
    }
    None
}

#[test]
fn v41_against_ganesha() {
    if std::env::var_os("GANESHA_NFS_PORT").is_some() {
        println!("v41_against_ganesha: already inside ganesha's namespace; nothing to start");
        return;
    }
    if let Some(why) = skip_reason() {
        // scripts/test.sh installs ganesha; under CI as root a skip would
        // hide a broken set-up.
        let ci_root = std::env::var_os("CI").is_some() && !why.starts_with("not root");
        assert!(!ci_root, "v41_against_ganesha cannot run under CI: {why}");
        println!("SKIPPED v41_against_ganesha: {why}");
        eprintln!("SKIPPED v41_against_ganesha: {why}");
        return;
    }
    let id = format!("{}-{}", std::process::id(), rand_suffix());
    let export = PathBuf::from(format!("/tmp/rnfsd-client-v4-export-{id}"));
    let run = PathBuf::from(format!("/tmp/rnfsd-client-v4-ganesha-{id}"));
    std::fs::create_dir_all(&export).unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new("timeout")
        .arg(OUTER_LIMIT.as_secs().to_string())
        .arg(repo_root().join("scripts/ganesha.sh"))
        .args(["exec", "--export"])
        .arg(&export)
        .arg("--v4")
        .arg("--")
        .arg(&exe)
        .args(["--ignored", "--test-threads=2", "--nocapture"])
        .env("GANESHA_RUN", &run)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run scripts/ganesha.sh");
    let out = {
        use std::io::Read;
        let mut s = String::new();
        if let Some(mut o) = child.stdout.take() {
            let _ = o.read_to_string(&mut s);
        }
        s
    };
    let status = child.wait().unwrap();
    println!("{out}");
    let _ = std::fs::remove_dir_all(&export);
    if status.success() {
        let _ = std::fs::remove_dir_all(&run);
    } else {
        println!("ganesha's files kept in {}", run.display());
    }
    assert!(status.success(), "inner run failed: {status}");
    let want = format!("test result: ok. {INNER_TESTS} passed");
    assert!(
        out.contains(&want),
        "expected \"{want}\" from the inner run"
    );
}

fn rand_suffix() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0)
}

// ---- inside the namespace ----

struct Env {
    addr: SocketAddr,
    export: String,
}

fn env() -> Env {
    let port = std::env::var("GANESHA_NFS_PORT")
        .expect("not inside ganesha's namespace: run v41_against_ganesha instead");
    Env {
        addr: format!("127.0.0.1:{port}").parse().unwrap(),
        export: std::env::var("GANESHA_EXPORT").unwrap(),
    }
}

fn cfg() -> ClientConfig {
    ClientConfig {
        auth: Auth::unix(0, 0),
        timeout: Some(Duration::from_secs(20)),
        ..ClientConfig::default()
    }
}

async fn connect_with(v4: &Nfs4Config) -> (Nfs4Client, Env) {
    let e = env();
    let c = Nfs4Client::connect(e.addr, &cfg(), v4).await.unwrap();
    (c, e)
}

async fn connect() -> (Nfs4Client, Env) {
    connect_with(&Nfs4Config::default()).await
}

/// A fresh directory `name` in the export; its handle.
async fn test_dir(c: &Nfs4Client, e: &Env, name: &str) -> NfsFh4 {
    let root = c.lookup_path(&e.export).await.unwrap();
    c.mkdir(&root, name, 0o755).await.unwrap()
}

fn status_of(e: ClientError) -> Nfsstat4 {
    match e {
        ClientError::Nfs4 { status, .. } => status,
        other => panic!("not an NFSv4 status: {other}"),
    }
}

fn run<F: std::future::Future<Output = ()>>(f: F) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            tokio::time::timeout(LIMIT, f)
                .await
                .expect("test timed out")
        });
}

#[test]
#[ignore = "runs inside ganesha's namespace; started by v41_against_ganesha"]
fn session_setup_sequence_and_destroy() {
    run(async {
        let (c, _e) = connect().await;
        let s = *c.session();
        assert_ne!(s.sessionid, SessionId4::default());
        assert!(
            s.fore.maxrequests >= 1 && s.fore.maxoperations >= 2,
            "{s:?}"
        );
        assert_eq!(c.slot_count() as u32, s.fore.maxrequests.min(DEFAULT_SLOTS));
        // RFC 8881 §18.35.3: the server says which pNFS role it takes.
        assert_ne!(c.exchange().flags & EXCHGID4_FLAG_MASK_PNFS, 0);

        // SEQUENCE alone, twice on the same slot: ids move on.
        let mut slot = c.slot().await.unwrap();
        let first = slot.seqid();
        for _ in 0..2 {
            let seq = slot.next_seqid();
            let r = c.compound_on(&mut slot, seq, false, &[]).await.unwrap();
            assert_eq!(r.status, Nfsstat4::Ok);
            match &r.results[..] {
                [ResOp::Sequence(NfsRes4::Ok(ok))] => {
                    assert_eq!((ok.sessionid, ok.sequenceid), (s.sessionid, seq));
                    assert_eq!(ok.slotid, slot.id());
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(slot.seqid(), first.wrapping_add(2));
        drop(slot);

        // A second session of the same client (same owner), then both gone.
        c.destroy_session().await.unwrap();
        let r = c.compound(&[ArgOp::PutRootFh]).await.unwrap();
        assert_eq!(r.status, Nfsstat4::BadSession);
        assert_eq!(r.results.len(), 1);
        c.destroy_clientid().await.unwrap();
        // The client ID is gone too (RFC 8881 §18.50.3).
        assert_eq!(
            status_of(c.destroy_clientid().await.unwrap_err()),
            Nfsstat4::StaleClientId
        );
    });
}

#[test]
#[ignore = "runs inside ganesha's namespace; started by v41_against_ganesha"]
fn getattr_of_root_and_export() {
    run(async {
        let (c, e) = connect().await;
        // The pseudo root.
        let root = c.root_fh().await.unwrap();
        let a = c.getattr_decoded(&root).await.unwrap();
        assert_eq!(a.ftype(), Some(NfsFtype4::Dir));
        // The export's root, walked to one component at a time.
        let fh = c.lookup_path(&e.export).await.unwrap();
        assert_ne!(fh, root);
        let a = c.getattr_decoded(&fh).await.unwrap();
        let meta = std::fs::metadata(&e.export).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(a.ftype(), Some(NfsFtype4::Dir));
        assert_eq!(a.fileid(), Some(meta.ino()));
        assert_eq!(a.mode().map(|m| m & 0o7777), Some(meta.mode() & 0o7777));
        assert_eq!(a.nlink(), Some(meta.nlink() as u32));
        assert_eq!(a.mtime().map(|t| t.seconds), Some(meta.mtime()));
        assert!(a.owner().is_some_and(|o| !o.is_empty()));
        assert!(a.owner_group().is_some_and(|o| !o.is_empty()));
        assert!(a.change().is_some() && a.fsid().is_some());
        assert!(a.mounted_on_fileid().is_some());
        // The supported attributes cover what was asked for.
        let sup = c
            .getattr(
                &fh,
                &Bitmap4::from_bits(&[FATTR4_SUPPORTED_ATTRS, FATTR4_LEASE_TIME]).unwrap(),
            )
            .await
            .unwrap();
        let sup = Attrs4::decode(&sup).unwrap();
        let bits = sup.supported_attrs().unwrap();
        for b in COMMON_ATTRS {
            assert!(bits.contains(*b), "attribute {b} not supported");
        }
        assert!(sup.lease_time().is_some_and(|l| l > 0));
        // ACCESS on the export root as root.
        let acc = c
            .access(&fh, ACCESS4_READ | ACCESS4_LOOKUP | ACCESS4_MODIFY)
            .await
            .unwrap();
        assert_eq!(acc.access & ACCESS4_LOOKUP, ACCESS4_LOOKUP);
        // A name that is not there.
        assert_eq!(
            status_of(c.lookup_from(&fh, "no-such-name").await.unwrap_err()),
            Nfsstat4::NoEnt
        );
        c.shutdown().await.unwrap();
    });
}

#[test]
#[ignore = "runs inside ganesha's namespace; started by v41_against_ganesha"]
fn create_write_read_close() {
    run(async {
        let (c, e) = connect().await;
        let dir = test_dir(&c, &e, "cwrc").await;
        let o = c.open(&dir, &OpenArgs::create("f")).await.unwrap();
        assert!(!o.stateid.is_special());
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let c2 = c.with_io_size(64 * 1024, 64 * 1024);
        let committed = c2
            .write_all(&o.fh, &o.stateid, 0, &data, StableHow4::Unstable)
            .await
            .unwrap();
        if committed < StableHow4::FileSync {
            c.commit(&o.fh, 0, 0).await.unwrap();
        }
        let w = c
            .write(
                &o.fh,
                &o.stateid,
                data.len() as u64,
                b"tail",
                StableHow4::FileSync,
            )
            .await
            .unwrap();
        assert_eq!((w.count, w.committed), (4, StableHow4::FileSync));
        assert_eq!(
            c2.read_all(&o.fh, &o.stateid).await.unwrap().len(),
            data.len() + 4
        );
        let r = c.read(&o.fh, &o.stateid, 1000, 10).await.unwrap();
        assert_eq!(r.data, data[1000..1010]);
        let a = c.getattr_decoded(&o.fh).await.unwrap();
        assert_eq!(a.size(), Some(data.len() as u64 + 4));
        assert_eq!(a.ftype(), Some(NfsFtype4::Reg));
        c.close(&o.fh, &o.stateid).await.unwrap();
        // The bytes are on disk.
        let disk = std::fs::read(format!("{}/cwrc/f", e.export)).unwrap();
        assert_eq!(&disk[..data.len()], &data[..]);

        // Open it again, read only, from its name and from its handle.
        let o2 = c.open(&dir, &OpenArgs::read("f")).await.unwrap();
        assert_eq!(o2.fh, o.fh);
        assert_eq!(
            c.read(&o2.fh, &o2.stateid, 0, 3).await.unwrap().data,
            data[..3]
        );
        c.close(&o2.fh, &o2.stateid).await.unwrap();
        let o3 = c
            .open_fh(&o.fh, OPEN4_SHARE_ACCESS_READ, OPEN4_SHARE_DENY_NONE)
            .await
            .unwrap();
        c.close(&o3.fh, &o3.stateid).await.unwrap();

        // GUARDED on an existing name.
        let guarded = OpenArgs {
            how: OpenHow::Guarded(SetAttrs4::mode(0o600)),
            ..OpenArgs::create("f")
        };
        assert_eq!(
            status_of(c.open(&dir, &guarded).await.unwrap_err()),
            Nfsstat4::Exist
        );
        // EXCLUSIVE4_1: a retry with the same verifier opens the same file.
        let excl = OpenArgs {
            how: OpenHow::Exclusive41(Verifier4(*b"excl-v-1"), SetAttrs4::default()),
            ..OpenArgs::create("x")
        };
        let x1 = c.open(&dir, &excl).await.unwrap();
        c.close(&x1.fh, &x1.stateid).await.unwrap();
        let x2 = c.open(&dir, &excl).await.unwrap();
        assert_eq!(x1.fh, x2.fh);
        c.close(&x2.fh, &x2.stateid).await.unwrap();
        // A missing file without create.
        assert_eq!(
            status_of(c.open(&dir, &OpenArgs::read("missing")).await.unwrap_err()),
            Nfsstat4::NoEnt
        );
        c.remove(&dir, "f").await.unwrap();
        c.remove(&dir, "x").await.unwrap();
        c.shutdown().await.unwrap();
    });
}

#[test]
#[ignore = "runs inside ganesha's namespace; started by v41_against_ganesha"]
fn readdir_follows_cookies() {
    run(async {
        let (c, e) = connect().await;
        let dir = test_dir(&c, &e, "rd").await;
        let mut want = BTreeSet::new();
        for i in 0..60 {
            let name = format!("entry-with-a-longish-name-{i:03}");
            let o = c
                .open(&dir, &OpenArgs::create(name.as_bytes()))
                .await
                .unwrap();
            c.close(&o.fh, &o.stateid).await.unwrap();
            want.insert(name.into_bytes());
        }
        let mask = Bitmap4::from_bits(&[FATTR4_TYPE, FATTR4_FILEID]).unwrap();
        // Small pages: several READDIRs, each continuing from the last
        // cookie with the verifier of the first.
        let (mut cookie, mut verf, mut pages) = (0u64, Verifier4::default(), 0);
        let mut got = BTreeSet::new();
        loop {
            let r = c
                .readdir(&dir, cookie, verf, 512, 1024, &mask)
                .await
                .unwrap();
            pages += 1;
            for ent in &r.entries {
                let a = Attrs4::decode(&ent.attrs).unwrap();
                assert_eq!(a.ftype(), Some(NfsFtype4::Reg));
                assert!(got.insert(ent.name.0.clone()), "duplicate entry");
            }
            if r.eof {
                break;
            }
            cookie = r.entries.last().expect("entries or eof").cookie;
            verf = r.cookieverf;
            assert!(pages < 100);
        }
        assert!(pages > 1, "one page only: not a test of continuation");
        assert_eq!(got, want);
        let all = c.readdir_all(&dir, &mask).await.unwrap();
        assert_eq!(all.len(), want.len());
        c.shutdown().await.unwrap();
    });
}

#[test]
#[ignore = "runs inside ganesha's namespace; started by v41_against_ganesha"]
fn reply_cache_replays_the_same_slot_and_seqid() {
    run(async {
        let (c, e) = connect().await;
        let dir = test_dir(&c, &e, "replay").await;
        let mkdir = |name: &'static str| {
            vec![
                ArgOp::PutFh(PutFh4Args {
                    object: dir.clone(),
                }),
                ArgOp::Create(Box::new(Create4Args {
                    objtype: CreateType4::Dir,
                    objname: Component4(name.as_bytes().to_vec()),
                    createattrs: SetAttrs4::mode(0o755).to_fattr(),
                })),
                ArgOp::GetFh,
            ]
        };
        let mut slot = c.slot().await.unwrap();
        let seq = slot.next_seqid();
        let first = c
            .compound_on(&mut slot, seq, true, &mkdir("d"))
            .await
            .unwrap();
        assert_eq!(first.status, Nfsstat4::Ok, "{first:?}");
        // The same slot and sequence id: the cached reply, not EXIST.
        let again = c
            .compound_on(&mut slot, seq, true, &mkdir("d"))
            .await
            .unwrap();
        assert_eq!(again, first);
        // The next id is a new request: now the name exists.
        let next = slot.next_seqid();
        let r = c
            .compound_on(&mut slot, next, true, &mkdir("d"))
            .await
            .unwrap();
        assert_eq!(r.status, Nfsstat4::Exist);
        // An id two ahead is misordered (RFC 8881 §2.10.6.1).
        let ahead = slot.next_seqid().wrapping_add(1);
        let r = c.compound_on(&mut slot, ahead, true, &[]).await.unwrap();
        assert_eq!(r.status, Nfsstat4::SeqMisordered);
        assert_eq!(slot.seqid(), next);
        drop(slot);
        // The session still works on every slot.
        c.root_fh().await.unwrap();
        c.shutdown().await.unwrap();
    });
}

#[test]
#[ignore = "runs inside ganesha's namespace; started by v41_against_ganesha"]
fn unusual_compounds() {
    run(async {
        let (c, _e) = connect().await;
        let rpc = c.rpc();
        rpc.null().await.unwrap();
        // No SEQUENCE first: refused (RFC 8881 §2.6.3.1.1.1).
        let r = rpc
            .compound(1, &[ArgOp::PutRootFh, ArgOp::GetFh])
            .await
            .unwrap();
        assert_eq!(r.status, Nfsstat4::OpNotInSession);
        // §16.2.3 wants PUTROOTFH's result; ganesha 4.3 sends none.
        assert!(r.results.len() <= 1, "{r:?}");
        // A minor version the server does not have: no results at all.
        let r = rpc.compound(99, &[ArgOp::PutRootFh]).await.unwrap();
        assert_eq!(r.status, Nfsstat4::MinorVersMismatch);
        assert!(r.results.is_empty());
        // An empty COMPOUND succeeds with no results (§16.2.3).
        let r = rpc.compound(1, &[]).await.unwrap();
        assert_eq!((r.status, r.results.len()), (Nfsstat4::Ok, 0));
        // The tag comes back.
        assert_eq!(r.tag, rpc.tag());
        // Bytes that are not COMPOUND4args.
        match rpc.compound_bytes(&[0, 0, 0]).await {
            Err(ClientError::GarbageArgs) => {}
            Ok(b) => {
                let r = decode_compound_res(&b, 1).unwrap();
                assert_eq!(r.status, Nfsstat4::BadXdr);
            }
            Err(other) => panic!("{other}"),
        }
        // An operation number past 4.2's: OP_ILLEGAL.
        let mut raw = rnfsd_xdr::Enc::new();
        encode_compound(&mut raw, b"", 1, &[ArgOp::Illegal { opnum: 12345 }]);
        let b = rpc.compound_bytes(raw.as_slice()).await.unwrap();
        let r = decode_compound_res(&b, 1).unwrap();
        assert_eq!(r.status, Nfsstat4::OpIllegal);
        assert_eq!(r.results, vec![ResOp::Illegal(Nfsstat4::OpIllegal)]);
        // The session is unharmed.
        c.root_fh().await.unwrap();
        c.shutdown().await.unwrap();
    });
}

#[test]
#[ignore = "runs inside ganesha's namespace; started by v41_against_ganesha"]
fn names_links_attributes_and_locks() {
    run(async {
        let (c, e) = connect().await;
        let dir = test_dir(&c, &e, "names").await;
        let sub = c.mkdir(&dir, "sub", 0o700).await.unwrap();
        assert_eq!(
            c.getattr_decoded(&sub)
                .await
                .unwrap()
                .mode()
                .map(|m| m & 0o777),
            Some(0o700)
        );
        let l = c.symlink(&dir, "ln", "sub/target").await.unwrap();
        assert_eq!(c.readlink(&l).await.unwrap(), b"sub/target");
        let o = c.open(&dir, &OpenArgs::create("f")).await.unwrap();
        c.write(&o.fh, &o.stateid, 0, b"0123456789", StableHow4::FileSync)
            .await
            .unwrap();
        // Hard link, rename into the subdirectory.
        c.link(&o.fh, &dir, "f2").await.unwrap();
        assert_eq!(c.getattr_decoded(&o.fh).await.unwrap().nlink(), Some(2));
        c.rename(&dir, "f2", &sub, "moved").await.unwrap();
        assert_eq!(c.lookup_from(&sub, "moved").await.unwrap(), o.fh);
        // SETATTR size and mode with the open stateid; times to the server's.
        let set = c
            .setattr(
                &o.fh,
                &o.stateid,
                &SetAttrs4 {
                    size: Some(4),
                    mode: Some(0o640),
                    mtime: Some(Settime4::ServerTime),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert!(set.contains(FATTR4_SIZE) && set.contains(FATTR4_MODE));
        let a = c.getattr_decoded(&o.fh).await.unwrap();
        assert_eq!(
            (a.size(), a.mode().map(|m| m & 0o777)),
            (Some(4), Some(0o640))
        );

        // Byte-range locks: a write lock, a conflicting test by another
        // owner, unlock, then the test passes.
        let locker = c.new_locker(&o.stateid, b"lock-owner-1");
        let lock_sid = match c
            .lock(&o.fh, NfsLockType4::Write, 0, 100, locker)
            .await
            .unwrap()
        {
            Lock4Res::Ok(s) => s,
            other => panic!("{other:?}"),
        };
        match c
            .lockt(&o.fh, NfsLockType4::Write, 50, 10, b"other-owner")
            .await
            .unwrap()
        {
            LockT4Res::Denied(d) => assert_eq!((d.offset, d.length), (0, 100)),
            other => panic!("{other:?}"),
        }
        let more = Nfs4Client::existing_locker(&lock_sid);
        let lock_sid = match c
            .lock(&o.fh, NfsLockType4::Read, 200, 10, more)
            .await
            .unwrap()
        {
            Lock4Res::Ok(s) => s,
            other => panic!("{other:?}"),
        };
        let lock_sid = c
            .locku(&o.fh, NfsLockType4::Write, &lock_sid, 0, 100)
            .await
            .unwrap();
        assert_eq!(
            c.lockt(&o.fh, NfsLockType4::Write, 50, 10, b"other-owner")
                .await
                .unwrap(),
            LockT4Res::Ok
        );
        c.locku(&o.fh, NfsLockType4::Read, &lock_sid, 200, 10)
            .await
            .unwrap();
        c.close(&o.fh, &o.stateid).await.unwrap();

        c.remove(&dir, "f").await.unwrap();
        c.remove(&dir, "ln").await.unwrap();
        assert_eq!(
            status_of(c.remove(&dir, "sub").await.unwrap_err()),
            Nfsstat4::NotEmpty
        );
        c.remove(&sub, "moved").await.unwrap();
        c.remove(&dir, "sub").await.unwrap();
        c.shutdown().await.unwrap();
    });
}

#[test]
#[ignore = "runs inside ganesha's namespace; started by v41_against_ganesha"]
fn many_calls_in_flight_share_the_slots() {
    run(async {
        let v4 = Nfs4Config {
            slots: 8,
            ..Nfs4Config::default()
        };
        let (c, e) = connect_with(&v4).await;
        assert!(c.slot_count() <= 8);
        let root = c.lookup_path(&e.export).await.unwrap();
        let mut tasks = Vec::new();
        for _ in 0..64 {
            let (c, root) = (c.clone(), root.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..10 {
                    c.getattr_decoded(&root).await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        // Every slot came back.
        let mut held = Vec::new();
        for _ in 0..c.slot_count() {
            held.push(c.slot().await.unwrap());
        }
        drop(held);
        c.shutdown().await.unwrap();
    });
}

#[test]
#[ignore = "runs inside ganesha's namespace; started by v41_against_ganesha"]
fn back_channel_on_the_session_connection() {
    run(async {
        let v4 = Nfs4Config {
            back_channel: true,
            ..Nfs4Config::default()
        };
        let (c, e) = connect_with(&v4).await;
        assert_ne!(
            c.session().flags & CREATE_SESSION4_FLAG_CONN_BACK_CHAN,
            0,
            "the server gave no back channel on this connection"
        );
        // Work on the session while the server may probe the back channel.
        let root = c.lookup_path(&e.export).await.unwrap();
        for _ in 0..20 {
            c.getattr_decoded(&root).await.unwrap();
            if c.callback_calls() > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Whatever the server sent was answered, and it says the path is up.
        println!(
            "back channel: {} calls, {:?}",
            c.callback_calls(),
            c.callbacks()
        );
        assert!(!c.callbacks().contains(&CbEvent::Rejected));
        c.getattr_decoded(&root).await.unwrap();
        assert_eq!(
            c.status_flags() & (SEQ4_STATUS_CB_PATH_DOWN | SEQ4_STATUS_CB_PATH_DOWN_SESSION),
            0,
            "SEQUENCE says the back channel is down: {:#x}",
            c.status_flags()
        );
        c.shutdown().await.unwrap();
    });
}
