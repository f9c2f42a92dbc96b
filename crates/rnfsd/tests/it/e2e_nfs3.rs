//! End to end: the 22 NFSv3 procedures (RFC 1813 §3.3) against the real
//! server over TCP through our client library, success and failure paths.
//! Each test runs its own server on its own temporary export.

use crate::common;

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use common::nfs::*;
use common::{TempDir, TestServer};
use rnfsd_client::nfs3::*;
use rnfsd_client::{Auth, Client, ClientError, NfsClient};

fn start(tag: &str) -> (TempDir, TestServer) {
    let dir = TempDir::new(tag);
    let srv = TestServer::start_with(dir.path(), &["--no-rpcbind"]);
    (dir, srv)
}

fn now_secs() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(0)
}

fn name(n: &[u8]) -> String {
    String::from_utf8_lossy(n).into_owned()
}

// ---------------------------------------------------------------------------
// NULL, GETATTR

#[tokio::test(flavor = "multi_thread")]
async fn null_and_getattr() {
    let (dir, srv) = start("e2e-getattr");
    std::fs::write(dir.path().join("f"), b"hello world").expect("write");
    std::fs::set_permissions(dir.path().join("f"), std::fs::Permissions::from_mode(0o640))
        .expect("chmod");
    bounded(async {
        let s = mount(&srv).await;
        s.nfs.null().await.expect("NFS NULL");
        // NULL takes AUTH_NONE whatever the policy (RFC 5531 §8.2 pings).
        s.nfs
            .with_auth(Auth::none())
            .null()
            .await
            .expect("NULL with AUTH_NONE");

        let root = getattr(&s.nfs, &s.root).await;
        assert_eq!(root.ftype, Ftype3::Dir);
        let md = std::fs::metadata(dir.path()).expect("stat export");
        assert_eq!(root.mode, md.mode() & 0o7777);
        assert_eq!(root.nlink as u64, md.nlink());

        let fh = lookup(&s.nfs, &s.root, "f").await;
        let a = getattr(&s.nfs, &fh).await;
        let md = std::fs::metadata(dir.path().join("f")).expect("stat f");
        assert_eq!(a.ftype, Ftype3::Reg);
        assert_eq!(a.mode, 0o640, "mode carries permission bits only");
        assert_eq!(a.size, 11);
        assert_eq!((a.uid, a.gid), (md.uid(), md.gid()));
        assert_eq!(a.nlink, 1);
        assert_eq!(a.mtime.seconds as i64, md.mtime());
        assert_eq!(a.mtime.nseconds as i64, md.mtime_nsec());
        assert_eq!(a.used, md.blocks() * 512, "used is the allocated bytes");
        assert_ne!(a.fileid, root.fileid);
        assert_eq!(a.fsid, root.fsid, "one export, one fsid");
        // fileid is stable across calls and across a fresh LOOKUP.
        let again = getattr(&s.nfs, &lookup(&s.nfs, &s.root, "f").await).await;
        assert_eq!(again.fileid, a.fileid);
        assert_eq!(getattr(&s.nfs, &fh).await.fileid, a.fileid);
    })
    .await;
}

// ---------------------------------------------------------------------------
// SETATTR

#[tokio::test(flavor = "multi_thread")]
async fn setattr_mode_size_owner_times() {
    let (dir, srv) = start("e2e-setattr");
    bounded(async {
        let s = mount(&srv).await;
        let (fh, _) = create_file(&s.nfs, &s.root, "f").await;
        write(&s.nfs, &fh, 0, &[7u8; 1000]).await;
        let local = dir.path().join("f");

        // mode, with wcc before/after (RFC 1813 §3.3.2).
        let r = ok(
            "SETATTR mode",
            setattr_res(&s.nfs, &fh, sattr_mode(0o600), None).await,
        );
        let before = r.obj_wcc.before.expect("SETATTR wcc before");
        let after = r.obj_wcc.after.expect("SETATTR wcc after");
        assert_eq!(before.size, 1000);
        assert_eq!(after.mode, 0o600);
        assert_eq!(
            std::fs::metadata(&local).expect("stat").mode() & 0o7777,
            0o600
        );

        // truncate then extend.
        for size in [10u64, 5000] {
            let r = ok(
                "SETATTR size",
                setattr_res(
                    &s.nfs,
                    &fh,
                    Sattr3 {
                        size: Some(size),
                        ..Sattr3::default()
                    },
                    None,
                )
                .await,
            );
            assert_eq!(r.obj_wcc.after.expect("after").size, size);
            assert_eq!(std::fs::metadata(&local).expect("stat").len(), size);
        }
        let data = s.nfs.read_all(&fh).await.expect("READ");
        assert_eq!(data.len(), 5000);
        assert_eq!(&data[..10], &[7u8; 10]);
        assert!(
            data[10..].iter().all(|&b| b == 0),
            "extension reads as zeros"
        );

        // uid/gid as root.
        let r = ok(
            "SETATTR uid/gid",
            setattr_res(
                &s.nfs,
                &fh,
                Sattr3 {
                    uid: Some(1234),
                    gid: Some(5678),
                    ..Sattr3::default()
                },
                None,
            )
            .await,
        );
        let a = r.obj_wcc.after.expect("after");
        assert_eq!((a.uid, a.gid), (1234, 5678));
        let md = std::fs::metadata(&local).expect("stat");
        assert_eq!((md.uid(), md.gid()), (1234, 5678));

        // Client times are stored exactly.
        let at = Nfstime3 {
            seconds: 1_000_000_000,
            nseconds: 123_456_789,
        };
        let mt = Nfstime3 {
            seconds: 1_100_000_000,
            nseconds: 987_654_321,
        };
        ok(
            "SETATTR client times",
            setattr_res(
                &s.nfs,
                &fh,
                Sattr3 {
                    atime: SetTime3::ClientTime(at),
                    mtime: SetTime3::ClientTime(mt),
                    ..Sattr3::default()
                },
                None,
            )
            .await,
        );
        let a = getattr(&s.nfs, &fh).await;
        assert_eq!(a.atime, at);
        assert_eq!(a.mtime, mt);
        let md = std::fs::metadata(&local).expect("stat");
        assert_eq!((md.mtime(), md.mtime_nsec()), (1_100_000_000, 987_654_321));

        // Server time: now, not the old client time.
        ok(
            "SETATTR server times",
            setattr_res(
                &s.nfs,
                &fh,
                Sattr3 {
                    atime: SetTime3::ServerTime,
                    mtime: SetTime3::ServerTime,
                    ..Sattr3::default()
                },
                None,
            )
            .await,
        );
        let a = getattr(&s.nfs, &fh).await;
        let now = now_secs();
        for t in [a.atime, a.mtime] {
            assert!(
                t.seconds + 60 >= now && t.seconds <= now + 60,
                "server time {t:?} not near now {now}"
            );
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn setattr_guard() {
    let (dir, srv) = start("e2e-guard");
    bounded(async {
        let s = mount(&srv).await;
        let (fh, _) = create_file(&s.nfs, &s.root, "g").await;
        let ctime = getattr(&s.nfs, &fh).await.ctime;
        let wrong = Nfstime3 {
            seconds: ctime.seconds.wrapping_sub(100),
            nseconds: ctime.nseconds,
        };
        // RFC 1813 §3.3.2: a guard not matching ctime gives NOT_SYNC and
        // changes nothing.
        let body = fail(
            "SETATTR wrong guard",
            setattr_res(&s.nfs, &fh, sattr_mode(0o600), Some(wrong)).await,
            Nfsstat3::NotSync,
        );
        assert!(body.after.is_some(), "NOT_SYNC carries wcc after");
        assert_eq!(
            std::fs::metadata(dir.path().join("g"))
                .expect("stat")
                .mode()
                & 0o7777,
            0o644,
            "guard failure changed the mode"
        );
        let r = ok(
            "SETATTR right guard",
            setattr_res(&s.nfs, &fh, sattr_mode(0o600), Some(ctime)).await,
        );
        assert_eq!(r.obj_wcc.after.expect("after").mode, 0o600);
    })
    .await;
}

// ---------------------------------------------------------------------------
// LOOKUP

#[tokio::test(flavor = "multi_thread")]
async fn lookup_semantics() {
    let (dir, srv) = start("e2e-lookup");
    std::fs::create_dir(dir.path().join("d")).expect("mkdir");
    std::fs::write(dir.path().join("d/f"), b"x").expect("write");
    bounded(async {
        let s = mount(&srv).await;
        let root_attr = getattr(&s.nfs, &s.root).await;
        let r = ok("LOOKUP d", lookup_res(&s.nfs, &s.root, "d").await);
        let d = r.object;
        let d_attr = r.obj_attributes.expect("LOOKUP obj attrs");
        assert_eq!(d_attr.ftype, Ftype3::Dir);
        assert_eq!(
            r.dir_attributes.expect("LOOKUP dir attrs").fileid,
            root_attr.fileid
        );

        let f = ok("LOOKUP d/f", lookup_res(&s.nfs, &d, "f").await);
        assert_eq!(f.obj_attributes.expect("attrs").ftype, Ftype3::Reg);

        // NOENT, with the directory's post-op attributes.
        let body = fail(
            "LOOKUP missing",
            lookup_res(&s.nfs, &d, "missing").await,
            Nfsstat3::NoEnt,
        );
        assert_eq!(body.expect("NOENT dir attrs").fileid, d_attr.fileid);

        // "." is the directory itself, ".." its parent.
        let dot = ok("LOOKUP .", lookup_res(&s.nfs, &d, ".").await);
        assert_eq!(getattr(&s.nfs, &dot.object).await.fileid, d_attr.fileid);
        let dotdot = ok("LOOKUP ..", lookup_res(&s.nfs, &d, "..").await);
        assert_eq!(
            getattr(&s.nfs, &dotdot.object).await.fileid,
            root_attr.fileid
        );

        // ".." at the export root stays at the root (no escape), and is the
        // root's own handle so clients see one object.
        let up = ok("LOOKUP .. at root", lookup_res(&s.nfs, &s.root, "..").await);
        assert_eq!(
            getattr(&s.nfs, &up.object).await.fileid,
            root_attr.fileid,
            "'..' at the export root escaped the export"
        );
        assert_eq!(up.object, s.root, "'..' at root: not the root handle");

        // A name with '/' is not a path.
        let (st, _) = fail_any(
            "LOOKUP d/f as one name",
            lookup_res(&s.nfs, &s.root, "d/f").await,
            &[Nfsstat3::Inval, Nfsstat3::Acces, Nfsstat3::NoEnt],
        );
        let _ = st;
        // Name over NAME_MAX (255).
        let long = "n".repeat(256);
        fail(
            "LOOKUP 256-byte name",
            lookup_res(&s.nfs, &s.root, &long).await,
            Nfsstat3::NameTooLong,
        );
        // Empty name.
        fail_any(
            "LOOKUP empty name",
            lookup_res(&s.nfs, &s.root, "").await,
            &[Nfsstat3::Inval, Nfsstat3::NoEnt, Nfsstat3::Acces],
        );
        // LOOKUP in a regular file.
        fail(
            "LOOKUP in a file",
            lookup_res(&s.nfs, &f.object, "x").await,
            Nfsstat3::NotDir,
        );
    })
    .await;
}

// ---------------------------------------------------------------------------
// ACCESS

#[tokio::test(flavor = "multi_thread")]
async fn access_root_and_user() {
    let (dir, srv) = start("e2e-access");
    std::fs::create_dir(dir.path().join("d")).expect("mkdir");
    std::fs::set_permissions(dir.path().join("d"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    std::fs::write(dir.path().join("x"), b"#!/bin/sh\n").expect("write");
    std::fs::set_permissions(dir.path().join("x"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    std::fs::write(dir.path().join("secret"), b"s").expect("write");
    std::fs::set_permissions(
        dir.path().join("secret"),
        std::fs::Permissions::from_mode(0o600),
    )
    .expect("chmod");
    std::fs::write(dir.path().join("public"), b"p").expect("write");
    std::fs::set_permissions(
        dir.path().join("public"),
        std::fs::Permissions::from_mode(0o644),
    )
    .expect("chmod");
    bounded(async {
        let s = mount(&srv).await;
        let all = ACCESS3_READ
            | ACCESS3_LOOKUP
            | ACCESS3_MODIFY
            | ACCESS3_EXTEND
            | ACCESS3_DELETE
            | ACCESS3_EXECUTE;
        let access = |nfs: NfsClient, fh: NfsFh3, bits: u32| async move {
            let r = ok(
                "ACCESS",
                nfs.access(&Access3Args {
                    object: fh,
                    access: bits,
                })
                .await,
            );
            assert!(r.obj_attributes.is_some(), "ACCESS post-op attrs");
            assert_eq!(r.access & !bits, 0, "granted bits not asked for");
            r.access
        };
        let d = lookup(&s.nfs, &s.root, "d").await;
        let x = lookup(&s.nfs, &s.root, "x").await;
        let secret = lookup(&s.nfs, &s.root, "secret").await;
        let public = lookup(&s.nfs, &s.root, "public").await;

        // Root: everything that applies to the type.
        let want_dir =
            ACCESS3_READ | ACCESS3_LOOKUP | ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE;
        let got = access(s.nfs.clone(), d.clone(), all).await;
        assert_eq!(got & want_dir, want_dir, "root on a 0755 dir: {got:#x}");
        let want_file = ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_EXECUTE;
        let got = access(s.nfs.clone(), x.clone(), all).await;
        assert_eq!(got & want_file, want_file, "root on a 0755 file: {got:#x}");
        let got = access(s.nfs.clone(), secret.clone(), all).await;
        let rw = ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND;
        assert_eq!(got & rw, rw, "root on a 0600 file: {got:#x}");

        // uid 1000: nothing on a root-owned 0600 file; read only on 0644.
        let user = s.nfs.with_auth(Auth::unix(1000, 1000));
        let got = access(user.clone(), secret.clone(), all).await;
        assert_eq!(
            got & (ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_EXECUTE),
            0,
            "uid 1000 on root's 0600 file: {got:#x}"
        );
        let got = access(user.clone(), public.clone(), all).await;
        assert_ne!(got & ACCESS3_READ, 0, "uid 1000 may read a 0644 file");
        assert_eq!(got & ACCESS3_MODIFY, 0, "uid 1000 may not modify it");
        let got = access(user.clone(), d.clone(), all).await;
        assert_eq!(
            got & (ACCESS3_READ | ACCESS3_LOOKUP),
            ACCESS3_READ | ACCESS3_LOOKUP
        );
        assert_eq!(got & (ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE), 0);

        // ACCESS says no, and READ really is refused for that user.
        fail(
            "READ of 0600 root file as uid 1000",
            read_res(&user, &secret, 0, 10).await,
            Nfsstat3::Acces,
        );
        // A user with the root-owned file's group but no group bits: still no.
        let grp = s.nfs.with_auth(Auth::sys(1000, 0, &[0], "t"));
        let got = access(grp, secret.clone(), ACCESS3_READ).await;
        assert_eq!(got, 0);
    })
    .await;
}

// ---------------------------------------------------------------------------
// SYMLINK, READLINK

#[tokio::test(flavor = "multi_thread")]
async fn symlink_and_readlink() {
    let (dir, srv) = start("e2e-symlink");
    std::fs::write(dir.path().join("plain"), b"x").expect("write");
    bounded(async {
        let s = mount(&srv).await;
        let target = b"some/where/../else".to_vec();
        let r = ok(
            "SYMLINK",
            s.nfs
                .symlink(&Symlink3Args {
                    where_: dirop(&s.root, "ln"),
                    symlink_attributes: Sattr3::default(),
                    symlink_data: target.clone(),
                })
                .await,
        );
        let fh = r.obj.expect("SYMLINK handle");
        assert_eq!(r.obj_attributes.expect("attrs").ftype, Ftype3::Lnk);
        let wcc = r.dir_wcc;
        assert!(wcc.before.is_some() && wcc.after.is_some(), "dir wcc");
        assert_eq!(
            std::fs::read_link(dir.path().join("ln")).expect("readlink"),
            Path::new("some/where/../else")
        );
        let rl = ok(
            "READLINK",
            s.nfs
                .readlink(&ReadLink3Args {
                    symlink: fh.clone(),
                })
                .await,
        );
        assert_eq!(rl.data, target);
        assert_eq!(
            rl.symlink_attributes.expect("attrs").size,
            target.len() as u64
        );
        // LOOKUP does not follow the link.
        let l = lookup(&s.nfs, &s.root, "ln").await;
        assert_eq!(getattr(&s.nfs, &l).await.ftype, Ftype3::Lnk);

        // A link created behind the server's back, pointing outside: READLINK
        // returns the text; nothing is followed.
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("out")).expect("symlink");
        let out = lookup(&s.nfs, &s.root, "out").await;
        let rl = ok(
            "READLINK out",
            s.nfs
                .readlink(&ReadLink3Args {
                    symlink: out.clone(),
                })
                .await,
        );
        assert_eq!(rl.data, b"/etc/passwd");
        // READ of a symlink must not read its target.
        let r = s
            .nfs
            .read(&Read3Args {
                file: out,
                offset: 0,
                count: 100,
            })
            .await
            .expect("READ rpc");
        assert!(
            r.status() != Nfsstat3::Ok,
            "READ through a symlink to /etc/passwd succeeded"
        );

        // READLINK of a regular file: INVAL (RFC 1813 §3.3.5).
        let plain = lookup(&s.nfs, &s.root, "plain").await;
        fail(
            "READLINK of a file",
            s.nfs.readlink(&ReadLink3Args { symlink: plain }).await,
            Nfsstat3::Inval,
        );
        // SYMLINK over an existing name.
        fail(
            "SYMLINK existing",
            s.nfs
                .symlink(&Symlink3Args {
                    where_: dirop(&s.root, "plain"),
                    symlink_attributes: Sattr3::default(),
                    symlink_data: b"x".to_vec(),
                })
                .await,
            Nfsstat3::Exist,
        );
    })
    .await;
}

// ---------------------------------------------------------------------------
// READ, WRITE, COMMIT

#[tokio::test(flavor = "multi_thread")]
async fn read_semantics() {
    let (dir, srv) = start("e2e-read");
    let content: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.path().join("f"), &content).expect("write");
    std::fs::create_dir(dir.path().join("d")).expect("mkdir");
    bounded(async {
        let s = mount(&srv).await;
        let fh = lookup(&s.nfs, &s.root, "f").await;
        let read = |offset: u64, count: u32| {
            let nfs = s.nfs.clone();
            let fh = fh.clone();
            async move { ok("READ", read_res(&nfs, &fh, offset, count).await) }
        };
        let r = read(0, 100).await;
        assert_eq!((r.count, r.eof), (100, false));
        assert_eq!(r.data, &content[..100]);
        assert_eq!(r.file_attributes.expect("attrs").size, 10_000);

        // Up to the end exactly: eof.
        let r = read(9_900, 100).await;
        assert_eq!(r.data, &content[9_900..]);
        assert!(r.eof, "READ ending at EOF must say eof");
        // Past the end: short with eof.
        let r = read(9_990, 100).await;
        assert_eq!((r.count, r.eof), (10, true));
        assert_eq!(r.data, &content[9_990..]);
        // Beyond EOF: nothing, eof.
        let r = read(20_000, 100).await;
        assert_eq!((r.count, r.eof, r.data.len()), (0, true, 0));
        // count 0.
        let r = read(0, 0).await;
        assert_eq!((r.count, r.data.len()), (0, 0));

        // Count capped at rtmax.
        let info = ok(
            "FSINFO",
            s.nfs
                .fsinfo(&FsInfo3Args {
                    fsroot: s.root.clone(),
                })
                .await,
        );
        let big: Vec<u8> = (0..(info.rtmax as usize + 8192))
            .map(|i| (i % 253) as u8)
            .collect();
        std::fs::write(dir.path().join("big"), &big).expect("write big");
        let bfh = lookup(&s.nfs, &s.root, "big").await;
        let r = ok(
            "READ over rtmax",
            read_res(&s.nfs, &bfh, 0, info.rtmax + 4096).await,
        );
        assert!(r.count <= info.rtmax, "READ returned {} > rtmax", r.count);
        assert!(r.count > 0);
        assert_eq!(r.data.len(), r.count as usize);
        assert_eq!(r.data, &big[..r.count as usize]);
        assert!(!r.eof);

        // READ of a directory.
        let d = lookup(&s.nfs, &s.root, "d").await;
        fail_any(
            "READ of a directory",
            read_res(&s.nfs, &d, 0, 10).await,
            &[Nfsstat3::IsDir, Nfsstat3::Inval],
        );
    })
    .await;
}

/// Large READs come back byte-exact whichever path serves them: spliced
/// from the page cache through a pipe (the default), copied (`--splice-pipes
/// 0`), or a mix when one pipe is shared by many calls in flight on one
/// connection. Odd offsets and counts, page-straddling, up to and past EOF.
#[tokio::test(flavor = "multi_thread")]
async fn large_reads_are_exact_on_every_path() {
    const SIZE: usize = 3 * 1024 * 1024 + 777;
    let content: Vec<u8> = (0..SIZE as u64)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let offsets = [
        0u64,
        1,
        4095,
        4096,
        32_767,
        65_537,
        (1 << 20) + 3,
        SIZE as u64 - 40_000,
        SIZE as u64 - 1,
    ];
    let counts = [32_768u32, 32_769, 65_541, 131_072, (1 << 20) - 1, 1 << 20];
    for pipes in ["32", "1", "0"] {
        let dir = TempDir::new("e2e-bigread");
        std::fs::write(dir.path().join("f"), &content).expect("write");
        let srv = TestServer::start_with(dir.path(), &["--no-rpcbind", "--splice-pipes", pipes]);
        bounded(async {
            let s = mount(&srv).await;
            let fh = lookup(&s.nfs, &s.root, "f").await;
            // All in flight at once on the session's one connection.
            let mut set = tokio::task::JoinSet::new();
            for &off in &offsets {
                for &count in &counts {
                    let (nfs, fh) = (s.nfs.clone(), fh.clone());
                    set.spawn(async move { (off, count, read_res(&nfs, &fh, off, count).await) });
                }
            }
            while let Some(r) = set.join_next().await {
                let (off, count, r) = r.expect("task");
                let r = ok("READ", r);
                let start = off as usize;
                let end = (start + count as usize).min(SIZE);
                assert_eq!(
                    r.count as usize,
                    end - start,
                    "pipes {pipes}: count at {off}+{count}"
                );
                assert_eq!(r.eof, end == SIZE, "pipes {pipes}: eof at {off}+{count}");
                assert!(
                    r.data == content[start..end],
                    "pipes {pipes}: data differs at {off}+{count}"
                );
            }
        })
        .await;
    }
}

/// RFC 1813 §3.3.6: a READ at or beyond EOF returns no data and eof, for
/// any offset3 value. Offsets near or past i64::MAX cannot be passed to
/// pread(2) as is (EINVAL); knfsd clamps them to OFFSET_MAX
/// (nfsd3_proc_read) and answers OK, 0 bytes, eof.
#[tokio::test(flavor = "multi_thread")]
async fn read_at_huge_offsets() {
    let (dir, srv) = start("e2e-hugeread");
    std::fs::write(dir.path().join("f"), b"0123456789").expect("write");
    bounded(async {
        let s = mount(&srv).await;
        let fh = lookup(&s.nfs, &s.root, "f").await;
        let mut bad = Vec::new();
        for off in [
            1u64 << 62,
            i64::MAX as u64 - 200,
            i64::MAX as u64,
            1 << 63,
            u64::MAX - 10,
            u64::MAX,
        ] {
            let r = s
                .nfs
                .read(&Read3Args {
                    file: fh.clone(),
                    offset: off,
                    count: 100,
                })
                .await
                .expect("READ rpc");
            match r {
                NfsRes::Ok(r) if r.count == 0 && r.eof && r.data.is_empty() => {}
                NfsRes::Ok(r) => bad.push(format!("{off:#x}: count {} eof {}", r.count, r.eof)),
                NfsRes::Fail(st, _) => bad.push(format!("{off:#x}: {st}")),
            }
        }
        assert!(bad.is_empty(), "READ beyond EOF not OK/eof at: {bad:?}");
    })
    .await;
}

/// A WRITE that would end past the largest file offset cannot succeed:
/// knfsd answers FBIG (nfsd3_proc_write); EINVAL is tolerable. Nothing may
/// be written anywhere.
#[tokio::test(flavor = "multi_thread")]
async fn write_at_huge_offsets() {
    let (dir, srv) = start("e2e-hugewrite");
    std::fs::write(dir.path().join("f"), b"0123456789").expect("write");
    bounded(async {
        let s = mount(&srv).await;
        let fh = lookup(&s.nfs, &s.root, "f").await;
        for off in [i64::MAX as u64 - 2, 1u64 << 63, u64::MAX - 10, u64::MAX] {
            fail_any(
                &format!("WRITE at offset {off:#x}"),
                s.nfs
                    .write(&Write3Args {
                        file: fh.clone(),
                        offset: off,
                        count: 4,
                        stable: StableHow::FileSync,
                        data: b"abcd".to_vec(),
                    })
                    .await,
                &[Nfsstat3::FBig, Nfsstat3::Inval],
            );
        }
        assert_eq!(
            std::fs::read(dir.path().join("f")).expect("read"),
            b"0123456789"
        );
        assert_eq!(getattr(&s.nfs, &fh).await.size, 10);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn write_stability_and_commit() {
    let (dir, srv) = start("e2e-write");
    std::fs::create_dir(dir.path().join("d")).expect("mkdir");
    bounded(async {
        let s = mount(&srv).await;
        let (fh, _) = create_file(&s.nfs, &s.root, "w").await;
        let mut verfs = Vec::new();
        let mut offset = 0u64;
        for stable in [
            StableHow::Unstable,
            StableHow::DataSync,
            StableHow::FileSync,
        ] {
            let data = vec![stable as u8 + 1; 3000];
            let r = ok(
                "WRITE",
                s.nfs
                    .write(&Write3Args {
                        file: fh.clone(),
                        offset,
                        count: data.len() as u32,
                        stable,
                        data: data.clone(),
                    })
                    .await,
            );
            assert_eq!(r.count, 3000);
            assert!(
                r.committed >= stable,
                "asked {stable:?}, committed {:?}",
                r.committed
            );
            let before = r.file_wcc.before.expect("WRITE wcc before");
            let after = r.file_wcc.after.expect("WRITE wcc after");
            assert_eq!(before.size, offset);
            assert_eq!(after.size, offset + 3000);
            verfs.push(r.verf);
            offset += 3000;
        }
        assert!(
            verfs.windows(2).all(|w| w[0] == w[1]),
            "write verifier changed between calls: {verfs:?}"
        );
        let c = commit(&s.nfs, &fh).await;
        assert_eq!(c.verf, verfs[0], "COMMIT verifier differs from WRITE's");
        assert!(c.file_wcc.after.is_some());
        let c = ok(
            "COMMIT range",
            s.nfs
                .commit(&Commit3Args {
                    file: fh.clone(),
                    offset: 100,
                    count: 200,
                })
                .await,
        );
        assert_eq!(c.verf, verfs[0]);

        let on_disk = std::fs::read(dir.path().join("w")).expect("read back");
        assert_eq!(on_disk.len(), 9000);
        assert!(on_disk[..3000].iter().all(|&b| b == 1));
        assert!(on_disk[3000..6000].iter().all(|&b| b == 2));
        assert!(on_disk[6000..].iter().all(|&b| b == 3));

        // Write in the middle leaves the size alone.
        write(&s.nfs, &fh, 10, b"abc").await;
        assert_eq!(getattr(&s.nfs, &fh).await.size, 9000);
        let r = ok("READ", read_res(&s.nfs, &fh, 9, 5).await);
        assert_eq!(r.data, [1, b'a', b'b', b'c', 1]);

        // WRITE of a directory; count not matching the data is bad args or
        // INVAL, never a write of the wrong length.
        let d = lookup(&s.nfs, &s.root, "d").await;
        fail_any(
            "WRITE to a directory",
            s.nfs
                .write(&Write3Args {
                    file: d,
                    offset: 0,
                    count: 1,
                    stable: StableHow::FileSync,
                    data: vec![1],
                })
                .await,
            &[Nfsstat3::IsDir, Nfsstat3::Inval],
        );
        let r = s
            .nfs
            .write(&Write3Args {
                file: fh.clone(),
                offset: 0,
                count: 10,
                stable: StableHow::FileSync,
                data: vec![9; 4],
            })
            .await;
        match r {
            Err(ClientError::GarbageArgs) | Ok(NfsRes::Fail(Nfsstat3::Inval, _)) => {}
            Ok(NfsRes::Ok(w)) => assert!(w.count <= 4, "wrote {} of 4 bytes sent", w.count),
            other => panic!("WRITE count 10 with 4 bytes: {other:?}"),
        }
        // COMMIT of a directory is not meaningful.
        let r = s
            .nfs
            .commit(&Commit3Args {
                file: lookup(&s.nfs, &s.root, "d").await,
                offset: 0,
                count: 0,
            })
            .await
            .expect("COMMIT rpc");
        assert!(
            matches!(
                r.status(),
                Nfsstat3::Ok | Nfsstat3::IsDir | Nfsstat3::Inval | Nfsstat3::BadType
            ),
            "COMMIT of a dir: {}",
            r.status()
        );
    })
    .await;
}

// ---------------------------------------------------------------------------
// CREATE, MKDIR, MKNOD

#[tokio::test(flavor = "multi_thread")]
async fn create_modes() {
    let (dir, srv) = start("e2e-create");
    bounded(async {
        let s = mount(&srv).await;
        let create = |name: &'static str, how: CreateHow3| {
            let nfs = s.nfs.clone();
            let root = s.root.clone();
            async move {
                nfs.create(&Create3Args {
                    where_: dirop(&root, name),
                    how,
                })
                .await
            }
        };
        // UNCHECKED: creates, with the mode asked; again: OK, same file.
        let r = ok(
            "CREATE UNCHECKED",
            create("u", CreateHow3::Unchecked(sattr_mode(0o640))).await,
        );
        let a = r.obj_attributes.expect("attrs");
        assert_eq!((a.ftype, a.mode, a.size), (Ftype3::Reg, 0o640, 0));
        let wcc = r.dir_wcc;
        assert!(wcc.before.is_some() && wcc.after.is_some(), "dir wcc");
        let fh = r.obj.expect("handle");
        write(&s.nfs, &fh, 0, b"data").await;
        let r = ok(
            "CREATE UNCHECKED again",
            create("u", CreateHow3::Unchecked(Sattr3::default())).await,
        );
        assert_eq!(r.obj_attributes.expect("attrs").fileid, a.fileid);
        assert_eq!(std::fs::read(dir.path().join("u")).expect("read"), b"data");
        // UNCHECKED with size 0 truncates the existing file (knfsd does).
        let r = ok(
            "CREATE UNCHECKED size 0",
            create(
                "u",
                CreateHow3::Unchecked(Sattr3 {
                    size: Some(0),
                    ..Sattr3::default()
                }),
            )
            .await,
        );
        assert_eq!(r.obj_attributes.expect("attrs").fileid, a.fileid);
        assert_eq!(
            std::fs::metadata(dir.path().join("u")).expect("stat").len(),
            0
        );

        // GUARDED: EXIST on an existing name.
        ok(
            "CREATE GUARDED",
            create("g", CreateHow3::Guarded(sattr_mode(0o600))).await,
        );
        let body = fail(
            "CREATE GUARDED existing",
            create("g", CreateHow3::Guarded(sattr_mode(0o600))).await,
            Nfsstat3::Exist,
        );
        assert!(body.after.is_some(), "EXIST carries dir wcc");

        // EXCLUSIVE: a retry with the same verifier is the same create.
        let v1 = Verf3(*b"verf-one");
        let r1 = ok(
            "CREATE EXCLUSIVE",
            create("x", CreateHow3::Exclusive(v1)).await,
        );
        let fh1 = r1.obj.expect("handle");
        let id1 = getattr(&s.nfs, &fh1).await.fileid;
        let r2 = ok(
            "CREATE EXCLUSIVE retry",
            create("x", CreateHow3::Exclusive(v1)).await,
        );
        let id2 = match (&r2.obj, &r2.obj_attributes) {
            (_, Some(a)) => a.fileid,
            (Some(fh), None) => getattr(&s.nfs, fh).await.fileid,
            (None, None) => lookup_fileid(&s.nfs, &s.root, "x").await,
        };
        assert_eq!(id1, id2, "retry made another file");
        fail(
            "CREATE EXCLUSIVE other verifier",
            create("x", CreateHow3::Exclusive(Verf3(*b"verf-two"))).await,
            Nfsstat3::Exist,
        );
        // An existing file created otherwise is not ours either.
        fail(
            "CREATE EXCLUSIVE over a plain file",
            create("g", CreateHow3::Exclusive(v1)).await,
            Nfsstat3::Exist,
        );
        // After the client's follow-up SETATTR the file is ordinary.
        ok(
            "SETATTR after EXCLUSIVE",
            setattr_res(
                &s.nfs,
                &fh1,
                Sattr3 {
                    mode: Some(0o644),
                    atime: SetTime3::ServerTime,
                    mtime: SetTime3::ServerTime,
                    ..Sattr3::default()
                },
                None,
            )
            .await,
        );
        assert_eq!(getattr(&s.nfs, &fh1).await.mode, 0o644);

        // CREATE in a regular file's "directory"; bad names.
        let r = s
            .nfs
            .create(&Create3Args {
                where_: dirop(&fh, "z"),
                how: CreateHow3::Unchecked(Sattr3::default()),
            })
            .await;
        fail("CREATE in a file", r, Nfsstat3::NotDir);
        for bad in [".", "..", "a/b"] {
            let r = create(
                match bad {
                    "." => ".",
                    ".." => "..",
                    _ => "a/b",
                },
                CreateHow3::Guarded(Sattr3::default()),
            )
            .await;
            fail_any(
                &format!("CREATE {bad:?}"),
                r,
                &[Nfsstat3::Exist, Nfsstat3::Inval, Nfsstat3::Acces],
            );
        }
        let long = Box::leak("n".repeat(256).into_boxed_str());
        fail(
            "CREATE 256-byte name",
            create(long, CreateHow3::Unchecked(Sattr3::default())).await,
            Nfsstat3::NameTooLong,
        );
    })
    .await;
}

async fn lookup_fileid(nfs: &NfsClient, dir: &NfsFh3, n: &str) -> u64 {
    getattr(nfs, &lookup(nfs, dir, n).await).await.fileid
}

#[tokio::test(flavor = "multi_thread")]
async fn mkdir_and_mknod() {
    let (dir, srv) = start("e2e-mkdir");
    bounded(async {
        let s = mount(&srv).await;
        let r = ok(
            "MKDIR",
            s.nfs
                .mkdir(&Mkdir3Args {
                    where_: dirop(&s.root, "d"),
                    attributes: sattr_mode(0o750),
                })
                .await,
        );
        let a = r.obj_attributes.expect("attrs");
        assert_eq!((a.ftype, a.mode), (Ftype3::Dir, 0o750));
        assert!(r.dir_wcc.after.is_some());
        assert!(dir.path().join("d").is_dir());
        let body = fail(
            "MKDIR existing",
            s.nfs
                .mkdir(&Mkdir3Args {
                    where_: dirop(&s.root, "d"),
                    attributes: sattr_mode(0o750),
                })
                .await,
            Nfsstat3::Exist,
        );
        assert!(body.after.is_some());
        // Parent nlink grows with a subdirectory (ext4).
        let root_nlink = getattr(&s.nfs, &s.root).await.nlink;
        mkdir(&s.nfs, &s.root, "d2").await;
        assert_eq!(getattr(&s.nfs, &s.root).await.nlink, root_nlink + 1);

        // MKNOD FIFO and socket.
        for (n, what, t) in [
            ("fifo", MknodData3::Fifo(sattr_mode(0o600)), Ftype3::Fifo),
            ("sock", MknodData3::Sock(sattr_mode(0o600)), Ftype3::Sock),
        ] {
            let r = ok(
                &format!("MKNOD {n}"),
                s.nfs
                    .mknod(&Mknod3Args {
                        where_: dirop(&s.root, n),
                        what,
                    })
                    .await,
            );
            let fh = r.obj.expect("MKNOD handle");
            let a = getattr(&s.nfs, &fh).await;
            assert_eq!((a.ftype, a.mode), (t, 0o600), "{n}");
            let md = std::fs::symlink_metadata(dir.path().join(n)).expect("stat node");
            use std::os::unix::fs::FileTypeExt;
            match t {
                Ftype3::Fifo => assert!(md.file_type().is_fifo()),
                _ => assert!(md.file_type().is_socket()),
            }
        }
        // Existing name.
        fail(
            "MKNOD existing",
            s.nfs
                .mknod(&Mknod3Args {
                    where_: dirop(&s.root, "fifo"),
                    what: MknodData3::Fifo(Sattr3::default()),
                })
                .await,
            Nfsstat3::Exist,
        );
        // RFC 1813 §3.3.11: regular files, directories and links are made
        // otherwise: NFS3ERR_BADTYPE.
        for t in [Ftype3::Reg, Ftype3::Dir, Ftype3::Lnk] {
            fail(
                &format!("MKNOD {t:?}"),
                s.nfs
                    .mknod(&Mknod3Args {
                        where_: dirop(&s.root, "bad"),
                        what: MknodData3::Other(t),
                    })
                    .await,
                Nfsstat3::BadType,
            );
        }
        assert!(!dir.path().join("bad").exists());
        // A non-root user may not make device nodes.
        let user = s.nfs.with_auth(Auth::unix(1000, 1000));
        let r = user
            .mknod(&Mknod3Args {
                where_: dirop(&s.root, "chr"),
                what: MknodData3::Chr(Sattr3::default(), Specdata3::default()),
            })
            .await
            .expect("MKNOD rpc");
        assert!(
            matches!(r.status(), Nfsstat3::Perm | Nfsstat3::Acces),
            "MKNOD chr as uid 1000: {}",
            r.status()
        );
    })
    .await;
}

// ---------------------------------------------------------------------------
// REMOVE, RMDIR, RENAME, LINK

#[tokio::test(flavor = "multi_thread")]
async fn remove_and_rmdir() {
    let (dir, srv) = start("e2e-remove");
    std::fs::create_dir_all(dir.path().join("full/inner")).expect("mkdir");
    std::fs::create_dir(dir.path().join("empty")).expect("mkdir");
    std::fs::write(dir.path().join("f"), b"x").expect("write");
    bounded(async {
        let s = mount(&srv).await;
        let fh = lookup(&s.nfs, &s.root, "f").await;
        let r = ok("REMOVE", remove_res(&s.nfs, &s.root, "f").await);
        let (b, a) = (r.dir_wcc.before, r.dir_wcc.after);
        assert!(b.is_some() && a.is_some(), "REMOVE dir wcc");
        assert!(!dir.path().join("f").exists());
        // The removed file's handle is stale now.
        assert_eq!(
            getattr_status(&s.nfs, &fh).await.expect("GETATTR rpc"),
            Nfsstat3::Stale
        );
        let body = fail(
            "REMOVE missing",
            remove_res(&s.nfs, &s.root, "f").await,
            Nfsstat3::NoEnt,
        );
        assert!(body.after.is_some());
        // REMOVE of a directory: knfsd says ISDIR (Linux unlink(2) EISDIR).
        fail_any(
            "REMOVE of a directory",
            remove_res(&s.nfs, &s.root, "empty").await,
            &[Nfsstat3::IsDir, Nfsstat3::Perm, Nfsstat3::Acces],
        );
        assert!(dir.path().join("empty").is_dir());

        // RMDIR: NOTEMPTY, NOTDIR, NOENT, then success.
        fail(
            "RMDIR nonempty",
            rmdir_res(&s.nfs, &s.root, "full").await,
            Nfsstat3::NotEmpty,
        );
        std::fs::write(dir.path().join("file"), b"x").expect("write");
        fail(
            "RMDIR of a file",
            rmdir_res(&s.nfs, &s.root, "file").await,
            Nfsstat3::NotDir,
        );
        fail(
            "RMDIR missing",
            rmdir_res(&s.nfs, &s.root, "nope").await,
            Nfsstat3::NoEnt,
        );
        fail_any(
            "RMDIR '.'",
            rmdir_res(&s.nfs, &s.root, ".").await,
            &[
                Nfsstat3::Inval,
                Nfsstat3::Acces,
                Nfsstat3::Exist,
                Nfsstat3::NotEmpty,
            ],
        );
        let r = ok("RMDIR", rmdir_res(&s.nfs, &s.root, "empty").await);
        assert!(r.dir_wcc.after.is_some());
        assert!(!dir.path().join("empty").exists());
        // uid 1000 may not remove in root's 0755 directory.
        let user = s.nfs.with_auth(Auth::unix(1000, 1000));
        fail(
            "REMOVE as uid 1000",
            remove_res(&user, &s.root, "file").await,
            Nfsstat3::Acces,
        );
        assert!(dir.path().join("file").exists());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rename_cases() {
    let (dir, srv) = start("e2e-rename");
    let p = dir.path();
    std::fs::create_dir_all(p.join("a")).expect("mkdir");
    std::fs::create_dir_all(p.join("b")).expect("mkdir");
    std::fs::create_dir_all(p.join("full/x")).expect("mkdir");
    std::fs::create_dir_all(p.join("emptydir")).expect("mkdir");
    std::fs::write(p.join("a/one"), b"1").expect("write");
    std::fs::write(p.join("a/two"), b"22").expect("write");
    std::fs::write(p.join("victim"), b"v").expect("write");
    bounded(async {
        let s = mount(&srv).await;
        let a = lookup(&s.nfs, &s.root, "a").await;
        let b = lookup(&s.nfs, &s.root, "b").await;
        let one = lookup(&s.nfs, &a, "one").await;
        let one_id = getattr(&s.nfs, &one).await.fileid;
        let rename = |fd: NfsFh3, fname: &'static str, td: NfsFh3, tname: &'static str| {
            let nfs = s.nfs.clone();
            async move {
                nfs.rename(&Rename3Args {
                    from: dirop(&fd, fname),
                    to: dirop(&td, tname),
                })
                .await
            }
        };
        // Same directory.
        let r = ok(
            "RENAME same dir",
            rename(a.clone(), "one", a.clone(), "uno").await,
        );
        assert!(r.fromdir_wcc.after.is_some() && r.todir_wcc.after.is_some());
        assert!(p.join("a/uno").exists() && !p.join("a/one").exists());
        // The handle follows the object.
        assert_eq!(getattr(&s.nfs, &one).await.fileid, one_id);
        assert_eq!(lookup_fileid(&s.nfs, &a, "uno").await, one_id);

        // Across directories.
        ok(
            "RENAME across",
            rename(a.clone(), "uno", b.clone(), "eins").await,
        );
        assert!(p.join("b/eins").exists() && !p.join("a/uno").exists());
        assert_eq!(lookup_fileid(&s.nfs, &b, "eins").await, one_id);
        let r = s.nfs.read_all(&one).await.expect("READ via old handle");
        assert_eq!(r, b"1");

        // Over an existing file: it is replaced.
        let victim = lookup(&s.nfs, &s.root, "victim").await;
        ok(
            "RENAME over a file",
            rename(a.clone(), "two", s.root.clone(), "victim").await,
        );
        assert_eq!(std::fs::read(p.join("victim")).expect("read"), b"22");
        assert!(!p.join("a/two").exists());
        assert_eq!(
            getattr_status(&s.nfs, &victim).await.expect("rpc"),
            Nfsstat3::Stale,
            "the replaced file's handle must be stale"
        );

        // Over a non-empty directory.
        std::fs::create_dir(p.join("a/d")).expect("mkdir");
        fail_any(
            "RENAME dir over a nonempty dir",
            rename(a.clone(), "d", s.root.clone(), "full").await,
            &[Nfsstat3::NotEmpty, Nfsstat3::Exist],
        );
        assert!(p.join("a/d").is_dir() && p.join("full/x").is_dir());
        // A directory over an empty directory is fine.
        ok(
            "RENAME dir over an empty dir",
            rename(a.clone(), "d", s.root.clone(), "emptydir").await,
        );
        // File over a directory and directory over a file.
        std::fs::write(p.join("a/f"), b"f").expect("write");
        fail_any(
            "RENAME file over a dir",
            rename(a.clone(), "f", s.root.clone(), "full").await,
            &[Nfsstat3::IsDir, Nfsstat3::Exist],
        );
        fail_any(
            "RENAME dir over a file",
            rename(s.root.clone(), "full", a.clone(), "f").await,
            &[Nfsstat3::NotDir, Nfsstat3::Exist],
        );
        // Missing source.
        fail(
            "RENAME missing",
            rename(a.clone(), "ghost", a.clone(), "g2").await,
            Nfsstat3::NoEnt,
        );
        // A directory into its own subdirectory.
        let full = lookup(&s.nfs, &s.root, "full").await;
        let x = lookup(&s.nfs, &full, "x").await;
        fail_any(
            "RENAME dir into its own child",
            rename(s.root.clone(), "full", x.clone(), "loop").await,
            &[Nfsstat3::Inval, Nfsstat3::Acces],
        );
        // Renaming onto itself is a no-op success (rename(2) semantics).
        ok(
            "RENAME onto itself",
            rename(a.clone(), "f", a.clone(), "f").await,
        );
        assert!(p.join("a/f").exists());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn hard_link() {
    let (dir, srv) = start("e2e-link");
    std::fs::create_dir(dir.path().join("d")).expect("mkdir");
    std::fs::write(dir.path().join("f"), b"linked").expect("write");
    bounded(async {
        let s = mount(&srv).await;
        let f = lookup(&s.nfs, &s.root, "f").await;
        let d = lookup(&s.nfs, &s.root, "d").await;
        let r = ok(
            "LINK",
            s.nfs
                .link(&Link3Args {
                    file: f.clone(),
                    link: dirop(&d, "g"),
                })
                .await,
        );
        assert_eq!(r.file_attributes.expect("LINK file attrs").nlink, 2);
        assert!(r.linkdir_wcc.after.is_some());
        assert_eq!(getattr(&s.nfs, &f).await.nlink, 2);
        let g = lookup(&s.nfs, &d, "g").await;
        assert_eq!(
            getattr(&s.nfs, &g).await.fileid,
            getattr(&s.nfs, &f).await.fileid
        );
        assert_eq!(s.nfs.read_all(&g).await.expect("READ"), b"linked");
        assert_eq!(
            std::fs::metadata(dir.path().join("d/g"))
                .expect("stat")
                .ino(),
            std::fs::metadata(dir.path().join("f")).expect("stat").ino()
        );
        // Existing name.
        fail(
            "LINK existing",
            s.nfs
                .link(&Link3Args {
                    file: f.clone(),
                    link: dirop(&d, "g"),
                })
                .await,
            Nfsstat3::Exist,
        );
        // Directories cannot be hard-linked.
        let r = s
            .nfs
            .link(&Link3Args {
                file: d.clone(),
                link: dirop(&s.root, "dlink"),
            })
            .await
            .expect("LINK rpc");
        assert!(
            matches!(
                r.status(),
                Nfsstat3::IsDir | Nfsstat3::Perm | Nfsstat3::Inval
            ),
            "LINK of a directory: {}",
            r.status()
        );
        // Removing one name leaves the other.
        ok("REMOVE f", remove_res(&s.nfs, &s.root, "f").await);
        assert_eq!(getattr(&s.nfs, &g).await.nlink, 1);
        assert_eq!(s.nfs.read_all(&g).await.expect("READ"), b"linked");
    })
    .await;
}

// ---------------------------------------------------------------------------
// READDIR, READDIRPLUS

const NAMES: usize = 300;

fn make_names(dir: &Path) -> Vec<String> {
    let names: Vec<String> = (0..NAMES)
        .map(|i| format!("entry-{i:04}-{}", "x".repeat(i % 17)))
        .collect();
    for n in &names {
        std::fs::write(dir.join(n), b"").expect("create entry");
    }
    names
}

/// One raw READDIR: the reply's result bytes (status + body) and the
/// decoded result.
async fn readdir_raw(c: &Client, a: &ReadDir3Args) -> (usize, ReadDir3Res) {
    let args = rnfsd_xdr::to_vec(a);
    let raw = c
        .call_raw(NFS_PROGRAM, NFS_V3, NFSPROC3_READDIR, &args)
        .await
        .expect("READDIR rpc");
    let res: ReadDir3Res = rnfsd_xdr::from_slice(&raw).expect("decode READDIR reply");
    (raw.len(), res)
}

async fn readdirplus_raw(c: &Client, a: &ReadDirPlus3Args) -> (usize, ReadDirPlus3Res) {
    let args = rnfsd_xdr::to_vec(a);
    let raw = c
        .call_raw(NFS_PROGRAM, NFS_V3, NFSPROC3_READDIRPLUS, &args)
        .await
        .expect("READDIRPLUS rpc");
    let res: ReadDirPlus3Res = rnfsd_xdr::from_slice(&raw).expect("decode READDIRPLUS reply");
    (raw.len(), res)
}

fn check_listing(seen: &BTreeMap<String, usize>, names: &[String]) {
    for n in names.iter().map(String::as_str).chain([".", ".."]) {
        match seen.get(n) {
            Some(1) => {}
            Some(k) => panic!("{n:?} listed {k} times"),
            None => panic!("{n:?} missing from the listing"),
        }
    }
    assert_eq!(
        seen.len(),
        names.len() + 2,
        "unexpected names: {:?}",
        seen.keys()
            .filter(|k| !names.contains(k) && *k != "." && *k != "..")
            .collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn readdir_paging() {
    let (dir, srv) = start("e2e-readdir");
    let names = make_names(dir.path());
    bounded(async {
        let s = mount(&srv).await;
        for count in [600u32, 1024] {
            let mut a = ReadDir3Args {
                dir: s.root.clone(),
                cookie: 0,
                cookieverf: Verf3::default(),
                count,
            };
            let mut seen = BTreeMap::new();
            let mut calls = 0;
            loop {
                calls += 1;
                assert!(calls < 1000, "READDIR never reached eof");
                let (len, res) = readdir_raw(&s.client, &a).await;
                let r = ok("READDIR", Ok(res));
                // RFC 1813 §3.3.16: count bounds the READDIR3resok.
                assert!(
                    len - 4 <= count as usize,
                    "READDIR reply body {} bytes > count {count}",
                    len - 4
                );
                assert!(r.dir_attributes.is_some());
                for e in &r.entries {
                    *seen.entry(name(&e.name)).or_insert(0) += 1;
                }
                if r.eof {
                    break;
                }
                let last = r.entries.last().expect("no entries and no eof");
                a.cookie = last.cookie;
                a.cookieverf = r.cookieverf;
            }
            check_listing(&seen, &names);
            assert!(calls > 5, "count {count}: {calls} calls for 300 names");
        }
        // The helper agrees; fileids match GETATTR.
        let all = s.nfs.readdir_all(&s.root).await.expect("readdir_all");
        let e = all
            .iter()
            .find(|e| e.name == names[7].as_bytes())
            .expect("entry");
        assert_eq!(e.fileid, lookup_fileid(&s.nfs, &s.root, &names[7]).await);

        // Too small for any entry: TOOSMALL (RFC 1813 §3.3.16).
        let (_, res) = readdir_raw(
            &s.client,
            &ReadDir3Args {
                dir: s.root.clone(),
                cookie: 0,
                cookieverf: Verf3::default(),
                count: 40,
            },
        )
        .await;
        fail("READDIR count 40", Ok(res), Nfsstat3::TooSmall);

        // A cookie with a wrong verifier: BAD_COOKIE.
        let (_, res) = readdir_raw(
            &s.client,
            &ReadDir3Args {
                dir: s.root.clone(),
                cookie: 0,
                cookieverf: Verf3::default(),
                count: 1024,
            },
        )
        .await;
        let first = ok("READDIR", Ok(res));
        let mut bad = first.cookieverf;
        assert_ne!(
            bad,
            Verf3::default(),
            "server does not use cookie verifiers"
        );
        bad.0[0] ^= 0xff;
        let (_, res) = readdir_raw(
            &s.client,
            &ReadDir3Args {
                dir: s.root.clone(),
                cookie: first.entries.last().expect("entries").cookie,
                cookieverf: bad,
                count: 1024,
            },
        )
        .await;
        fail("READDIR bad verifier", Ok(res), Nfsstat3::BadCookie);

        // READDIR of a file.
        let f = lookup(&s.nfs, &s.root, &names[0]).await;
        let (_, res) = readdir_raw(
            &s.client,
            &ReadDir3Args {
                dir: f,
                cookie: 0,
                cookieverf: Verf3::default(),
                count: 1024,
            },
        )
        .await;
        fail("READDIR of a file", Ok(res), Nfsstat3::NotDir);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn readdirplus_paging() {
    let (dir, srv) = start("e2e-readdirplus");
    let names = make_names(dir.path());
    bounded(async {
        let s = mount(&srv).await;
        for (dircount, maxcount) in [(600u32, 1024u32), (1024, 4096), (300, 600)] {
            let mut a = ReadDirPlus3Args {
                dir: s.root.clone(),
                cookie: 0,
                cookieverf: Verf3::default(),
                dircount,
                maxcount,
            };
            let mut seen = BTreeMap::new();
            let mut calls = 0;
            loop {
                calls += 1;
                assert!(calls < 2000, "READDIRPLUS never reached eof");
                let (len, res) = readdirplus_raw(&s.client, &a).await;
                let r = ok("READDIRPLUS", Ok(res));
                // RFC 1813 §3.3.17: maxcount bounds the READDIRPLUS3resok.
                assert!(
                    len - 4 <= maxcount as usize,
                    "READDIRPLUS reply body {} bytes > maxcount {maxcount}",
                    len - 4
                );
                let dirpart: usize = r.entries.iter().map(EntryPlus3::dir_len).sum();
                assert!(
                    r.entries.len() <= 1 || dirpart <= dircount as usize,
                    "READDIRPLUS dir info {dirpart} bytes > dircount {dircount}"
                );
                for e in &r.entries {
                    let n = name(&e.name);
                    *seen.entry(n.clone()).or_insert(0) += 1;
                    if n != ".." {
                        let at = e.name_attributes.as_ref().expect("entry attributes");
                        assert_eq!(at.fileid, e.fileid, "{n}: attrs fileid");
                        assert!(e.name_handle.is_some(), "{n}: no handle");
                    }
                }
                if r.eof {
                    break;
                }
                let last = r.entries.last().expect("no entries and no eof");
                a.cookie = last.cookie;
                a.cookieverf = r.cookieverf;
            }
            check_listing(&seen, &names);
        }
        // The handles work.
        let all = s
            .nfs
            .readdirplus_all(&s.root)
            .await
            .expect("readdirplus_all");
        for e in all
            .iter()
            .filter(|e| e.name.starts_with(b"entry-0"))
            .take(20)
        {
            let fh = e.name_handle.as_ref().expect("handle");
            assert_eq!(getattr(&s.nfs, fh).await.fileid, e.fileid);
        }
        // "." carries the directory itself.
        let dot = all.iter().find(|e| e.name == b".").expect(".");
        assert_eq!(
            dot.fileid,
            getattr(&s.nfs, &s.root).await.fileid,
            "'.' fileid"
        );
        // Too small.
        let (_, res) = readdirplus_raw(
            &s.client,
            &ReadDirPlus3Args {
                dir: s.root.clone(),
                cookie: 0,
                cookieverf: Verf3::default(),
                dircount: 40,
                maxcount: 40,
            },
        )
        .await;
        fail("READDIRPLUS maxcount 40", Ok(res), Nfsstat3::TooSmall);
        // Wrong verifier.
        let first = ok(
            "READDIRPLUS",
            Ok(readdirplus_raw(
                &s.client,
                &ReadDirPlus3Args {
                    dir: s.root.clone(),
                    cookie: 0,
                    cookieverf: Verf3::default(),
                    dircount: 512,
                    maxcount: 2048,
                },
            )
            .await
            .1),
        );
        let mut bad = first.cookieverf;
        bad.0[7] ^= 0x5a;
        let (_, res) = readdirplus_raw(
            &s.client,
            &ReadDirPlus3Args {
                dir: s.root.clone(),
                cookie: first.entries.last().expect("entries").cookie,
                cookieverf: bad,
                dircount: 512,
                maxcount: 2048,
            },
        )
        .await;
        fail("READDIRPLUS bad verifier", Ok(res), Nfsstat3::BadCookie);
    })
    .await;
}

// ---------------------------------------------------------------------------
// FSSTAT, FSINFO, PATHCONF

fn statvfs(p: &Path) -> libc::statvfs {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).expect("path without NUL");
    // SAFETY: all-zero is a valid statvfs (plain integers).
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path, `st` a valid out pointer.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    assert_eq!(rc, 0, "statvfs {}", p.display());
    st
}

#[tokio::test(flavor = "multi_thread")]
async fn fsstat_fsinfo_pathconf() {
    let (dir, srv) = start("e2e-fsstat");
    std::fs::write(dir.path().join("f"), b"x").expect("write");
    bounded(async {
        let s = mount(&srv).await;
        let r = ok(
            "FSSTAT",
            s.nfs
                .fsstat(&FsStat3Args {
                    fsroot: s.root.clone(),
                })
                .await,
        );
        let st = statvfs(dir.path());
        let frsize = st.f_frsize;
        assert_eq!(r.tbytes, st.f_blocks * frsize, "tbytes vs statvfs");
        assert_eq!(r.tfiles, st.f_files, "tfiles vs statvfs");
        let close = |a: u64, b: u64, slack: u64| a.abs_diff(b) <= slack;
        // Free space moves as other tests write; allow 256 MiB.
        assert!(
            close(r.fbytes, st.f_bfree * frsize, 256 << 20),
            "fbytes {} vs {}",
            r.fbytes,
            st.f_bfree * frsize
        );
        assert!(close(r.abytes, st.f_bavail * frsize, 256 << 20));
        assert!(r.abytes <= r.fbytes && r.fbytes <= r.tbytes);
        assert!(r.afiles <= r.ffiles && r.ffiles <= r.tfiles);
        assert!(r.obj_attributes.is_some());

        let i = ok(
            "FSINFO",
            s.nfs
                .fsinfo(&FsInfo3Args {
                    fsroot: s.root.clone(),
                })
                .await,
        );
        assert!(i.rtmax > 0 && i.rtpref > 0 && i.rtpref <= i.rtmax);
        assert!(i.wtmax > 0 && i.wtpref > 0 && i.wtpref <= i.wtmax);
        assert!(i.dtpref > 0);
        assert!(i.maxfilesize >= 1 << 40, "maxfilesize {}", i.maxfilesize);
        assert!(
            i.time_delta.seconds == 0 && i.time_delta.nseconds <= 1_000_000,
            "ext4 has fine timestamps: {:?}",
            i.time_delta
        );
        for bit in [FSF3_LINK, FSF3_SYMLINK, FSF3_HOMOGENEOUS, FSF3_CANSETTIME] {
            assert_ne!(i.properties & bit, 0, "FSINFO properties lack {bit:#x}");
        }

        let f = lookup(&s.nfs, &s.root, "f").await;
        for fh in [s.root.clone(), f] {
            let p = ok(
                "PATHCONF",
                s.nfs.pathconf(&PathConf3Args { object: fh }).await,
            );
            assert_eq!(p.name_max, 255);
            assert!(p.linkmax >= 1000, "linkmax {}", p.linkmax);
            assert!(p.no_trunc && p.chown_restricted && p.case_preserving);
            assert!(!p.case_insensitive);
        }
        // FSSTAT/FSINFO on a non-root handle works too (any object).
        let f = lookup(&s.nfs, &s.root, "f").await;
        ok(
            "FSSTAT on a file",
            s.nfs.fsstat(&FsStat3Args { fsroot: f }).await,
        );
    })
    .await;
}

// ---------------------------------------------------------------------------
// Large files

#[tokio::test(flavor = "multi_thread")]
async fn file_above_4gib() {
    let (dir, srv) = start("e2e-big");
    bounded(async {
        let s = mount(&srv).await;
        let (fh, _) = create_file(&s.nfs, &s.root, "sparse").await;
        let off = 5u64 << 30;
        let data = b"beyond four gibibytes";
        write(&s.nfs, &fh, off, data).await;
        let a = getattr(&s.nfs, &fh).await;
        assert_eq!(a.size, off + data.len() as u64);
        assert!(a.used < 1 << 20, "sparse file uses {} bytes", a.used);
        assert_eq!(
            std::fs::metadata(dir.path().join("sparse"))
                .expect("stat")
                .len(),
            a.size
        );
        let r = ok("READ at 5 GiB", read_res(&s.nfs, &fh, off, 100).await);
        assert_eq!(r.data, data);
        assert!(r.eof);
        // The hole reads as zeros.
        let r = ok(
            "READ in the hole",
            read_res(&s.nfs, &fh, 4u64 << 30, 64).await,
        );
        assert_eq!(r.data, vec![0u8; 64]);
        assert!(!r.eof);
        // SETATTR size above 4 GiB.
        let r = ok(
            "SETATTR size 6 GiB",
            setattr_res(
                &s.nfs,
                &fh,
                Sattr3 {
                    size: Some(6u64 << 30),
                    ..Sattr3::default()
                },
                None,
            )
            .await,
        );
        assert_eq!(r.obj_wcc.after.expect("after").size, 6u64 << 30);
    })
    .await;
}

// ---------------------------------------------------------------------------
// Read-only export

#[tokio::test(flavor = "multi_thread")]
async fn read_only_export() {
    let dir = TempDir::new("e2e-ro");
    std::fs::create_dir(dir.path().join("d")).expect("mkdir");
    std::fs::create_dir_all(dir.path().join("e")).expect("mkdir");
    std::fs::write(dir.path().join("f"), b"read me").expect("write");
    let srv = TestServer::start_with(dir.path(), &["--no-rpcbind", "--read-only"]);
    bounded(async {
        let s = mount(&srv).await;
        let root = s.root.clone();
        let f = lookup(&s.nfs, &root, "f").await;
        let d = lookup(&s.nfs, &root, "d").await;
        // Reads work.
        assert_eq!(s.nfs.read_all(&f).await.expect("READ"), b"read me");
        assert!(s.nfs.readdir_all(&root).await.expect("READDIR").len() >= 5);
        let ro = Nfsstat3::RoFs;
        fail(
            "SETATTR",
            setattr_res(&s.nfs, &f, sattr_mode(0o600), None).await,
            ro,
        );
        fail(
            "WRITE",
            s.nfs
                .write(&Write3Args {
                    file: f.clone(),
                    offset: 0,
                    count: 1,
                    stable: StableHow::FileSync,
                    data: vec![1],
                })
                .await,
            ro,
        );
        fail("CREATE", create_res(&s.nfs, &root, "new").await, ro);
        fail(
            "MKDIR",
            s.nfs
                .mkdir(&Mkdir3Args {
                    where_: dirop(&root, "nd"),
                    attributes: Sattr3::default(),
                })
                .await,
            ro,
        );
        fail(
            "SYMLINK",
            s.nfs
                .symlink(&Symlink3Args {
                    where_: dirop(&root, "ln"),
                    symlink_attributes: Sattr3::default(),
                    symlink_data: b"f".to_vec(),
                })
                .await,
            ro,
        );
        fail(
            "MKNOD",
            s.nfs
                .mknod(&Mknod3Args {
                    where_: dirop(&root, "fifo"),
                    what: MknodData3::Fifo(Sattr3::default()),
                })
                .await,
            ro,
        );
        fail("REMOVE", remove_res(&s.nfs, &root, "f").await, ro);
        fail("RMDIR", rmdir_res(&s.nfs, &root, "e").await, ro);
        fail(
            "RENAME",
            s.nfs
                .rename(&Rename3Args {
                    from: dirop(&root, "f"),
                    to: dirop(&d, "f2"),
                })
                .await,
            ro,
        );
        fail(
            "LINK",
            s.nfs
                .link(&Link3Args {
                    file: f.clone(),
                    link: dirop(&d, "l"),
                })
                .await,
            ro,
        );
        // Nothing changed on disk.
        assert_eq!(
            std::fs::read(dir.path().join("f")).expect("read"),
            b"read me"
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("ls").count(),
            3,
            "read-only export changed"
        );
        // ACCESS does not grant what would fail (knfsd masks write bits).
        let r = ok(
            "ACCESS",
            s.nfs
                .access(&Access3Args {
                    object: f.clone(),
                    access: ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND,
                })
                .await,
        );
        assert_eq!(r.access, ACCESS3_READ, "ACCESS on read-only export");
    })
    .await;
}

// ---------------------------------------------------------------------------
// Credentials reach the filesystem

#[tokio::test(flavor = "multi_thread")]
async fn creates_are_owned_by_the_caller() {
    let (dir, srv) = start("e2e-owner");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777))
        .expect("chmod export");
    bounded(async {
        let s = mount(&srv).await;
        let user = s.nfs.with_auth(Auth::sys(1000, 1001, &[1001, 2000], "t"));
        let (fh, a) = create_file(&user, &s.root, "mine").await;
        assert_eq!((a.uid, a.gid), (1000, 1001));
        let md = std::fs::metadata(dir.path().join("mine")).expect("stat");
        assert_eq!((md.uid(), md.gid()), (1000, 1001));
        // The owner may chmod, another user may not.
        ok(
            "SETATTR by owner",
            setattr_res(&user, &fh, sattr_mode(0o600), None).await,
        );
        let other = s.nfs.with_auth(Auth::unix(1002, 1002));
        fail(
            "SETATTR by another user",
            setattr_res(&other, &fh, sattr_mode(0o666), None).await,
            Nfsstat3::Perm,
        );
        // A user may not give a file away (chown restricted).
        fail(
            "SETATTR uid by owner",
            setattr_res(
                &user,
                &fh,
                Sattr3 {
                    uid: Some(0),
                    ..Sattr3::default()
                },
                None,
            )
            .await,
            Nfsstat3::Perm,
        );
        // AUTH_NONE is refused for non-NULL procedures by default.
        match s
            .nfs
            .with_auth(Auth::none())
            .getattr(&GetAttr3Args { object: fh.clone() })
            .await
        {
            Err(ClientError::AuthError(rnfsd_client::AuthStat::TooWeak)) => {}
            other => panic!("GETATTR with AUTH_NONE: {other:?}"),
        }
    })
    .await;
}

// ---------------------------------------------------------------------------
// More semantics: concurrency, groups, changes behind the server's back,
// symlinks that point out of the export, listings that change while paged.

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_unstable_writes_then_commit() {
    let (dir, srv) = start("e2e-concurrent");
    bounded(async {
        let s = mount(&srv).await;
        let (fh, _) = create_file(&s.nfs, &s.root, "c").await;
        let nfs = NfsClient::new(connect_n(&srv, 4).await);
        const BLOCK: usize = 4096;
        const BLOCKS: usize = 256;
        let mut set = tokio::task::JoinSet::new();
        for i in 0..BLOCKS {
            let nfs = nfs.clone();
            let fh = fh.clone();
            set.spawn(async move {
                let data = vec![(i % 251) as u8 + 1; BLOCK];
                nfs.write(&Write3Args {
                    file: fh,
                    offset: (i * BLOCK) as u64,
                    count: BLOCK as u32,
                    stable: StableHow::Unstable,
                    data,
                })
                .await
            });
        }
        let mut verfs = std::collections::HashSet::new();
        while let Some(r) = set.join_next().await {
            let w = ok("concurrent WRITE", r.expect("task"));
            assert_eq!(w.count as usize, BLOCK);
            verfs.insert(w.verf);
        }
        assert_eq!(verfs.len(), 1, "verifier changed under load");
        let c = commit(&nfs, &fh).await;
        assert!(verfs.contains(&c.verf));
        let back = nfs.read_all(&fh).await.expect("READ back");
        assert_eq!(back.len(), BLOCK * BLOCKS);
        for (i, b) in back.chunks(BLOCK).enumerate() {
            assert!(
                b.iter().all(|&x| x == (i % 251) as u8 + 1),
                "block {i} corrupted"
            );
        }
        assert_eq!(std::fs::read(dir.path().join("c")).expect("read"), back);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn supplementary_groups_are_honoured() {
    let (dir, srv) = start("e2e-groups");
    let f = dir.path().join("grp");
    std::fs::write(&f, b"group data").expect("write");
    std::os::unix::fs::chown(&f, Some(0), Some(2000)).expect("chown");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    bounded(async {
        let s = mount(&srv).await;
        let fh = lookup(&s.nfs, &s.root, "grp").await;
        let member = s.nfs.with_auth(Auth::sys(1000, 1000, &[1000, 2000], "t"));
        let primary = s.nfs.with_auth(Auth::sys(1000, 2000, &[], "t"));
        let outsider = s.nfs.with_auth(Auth::sys(1000, 1000, &[1000, 3000], "t"));
        for (who, c) in [("member", &member), ("primary", &primary)] {
            let r = ok(&format!("READ as {who}"), read_res(c, &fh, 0, 100).await);
            assert_eq!(r.data, b"group data", "{who}");
            // Group has no write bit.
            fail(
                &format!("WRITE as {who}"),
                c.write(&Write3Args {
                    file: fh.clone(),
                    offset: 0,
                    count: 1,
                    stable: StableHow::FileSync,
                    data: vec![0],
                })
                .await,
                Nfsstat3::Acces,
            );
        }
        fail(
            "READ as outsider",
            read_res(&outsider, &fh, 0, 100).await,
            Nfsstat3::Acces,
        );
        // Calls from different users interleave on one connection without
        // one's identity leaking into the other's call.
        let mut set = tokio::task::JoinSet::new();
        for i in 0..200 {
            let c = if i % 2 == 0 {
                member.clone()
            } else {
                outsider.clone()
            };
            let fh = fh.clone();
            set.spawn(async move {
                let r = read_res(&c, &fh, 0, 10).await.expect("READ rpc");
                (i, r.status())
            });
        }
        while let Some(r) = set.join_next().await {
            let (i, st) = r.expect("task");
            let want = if i % 2 == 0 {
                Nfsstat3::Ok
            } else {
                Nfsstat3::Acces
            };
            assert_eq!(
                st,
                want,
                "interleaved call {i}; server log:\n{}",
                log_tail(&srv, 40)
            );
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn changes_behind_the_servers_back_are_seen() {
    let (dir, srv) = start("e2e-behind");
    std::fs::write(dir.path().join("f"), b"short").expect("write");
    bounded(async {
        let s = mount(&srv).await;
        let fh = lookup(&s.nfs, &s.root, "f").await;
        assert_eq!(getattr(&s.nfs, &fh).await.size, 5);
        std::fs::write(dir.path().join("f"), b"a bit longer now").expect("write");
        assert_eq!(getattr(&s.nfs, &fh).await.size, 16, "stale size");
        assert_eq!(
            s.nfs.read_all(&fh).await.expect("READ"),
            b"a bit longer now"
        );
        std::fs::write(dir.path().join("late"), b"").expect("write");
        let names: Vec<_> = s
            .nfs
            .readdir_all(&s.root)
            .await
            .expect("READDIR")
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert!(names.contains(&b"late".to_vec()), "new name not listed");
        lookup(&s.nfs, &s.root, "late").await;
        std::fs::remove_file(dir.path().join("late")).expect("rm");
        fail(
            "LOOKUP of a locally removed name",
            lookup_res(&s.nfs, &s.root, "late").await,
            Nfsstat3::NoEnt,
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn symlinks_pointing_out_are_not_followed() {
    let (dir, srv) = start("e2e-escape");
    std::os::unix::fs::symlink("/", dir.path().join("up")).expect("symlink");
    std::os::unix::fs::symlink("..", dir.path().join("dotdot")).expect("symlink");
    bounded(async {
        let s = mount(&srv).await;
        for n in ["up", "dotdot"] {
            let l = lookup(&s.nfs, &s.root, n).await;
            assert_eq!(getattr(&s.nfs, &l).await.ftype, Ftype3::Lnk, "{n}");
            fail(
                &format!("LOOKUP through {n}"),
                lookup_res(&s.nfs, &l, "etc").await,
                Nfsstat3::NotDir,
            );
            let r = s
                .nfs
                .readdir(&ReadDir3Args {
                    dir: l.clone(),
                    cookie: 0,
                    cookieverf: Verf3::default(),
                    count: 4096,
                })
                .await
                .expect("READDIR rpc");
            assert_eq!(r.status(), Nfsstat3::NotDir, "READDIR of symlink {n}");
            let r = s
                .nfs
                .create(&Create3Args {
                    where_: dirop(&l, "planted"),
                    how: CreateHow3::Unchecked(Sattr3::default()),
                })
                .await
                .expect("CREATE rpc");
            assert_eq!(r.status(), Nfsstat3::NotDir, "CREATE through symlink {n}");
        }
        assert!(!Path::new("/planted").exists());
        // MNT through a symlink is refused too (knfsd wants a real directory).
        let r = s
            .mount
            .mnt_res(format!("{}/up/etc", export_path(&srv)))
            .await
            .expect("MNT rpc");
        assert!(
            matches!(r, rnfsd_client::mount::MountRes3::Err(_)),
            "MNT through a symlink to /: {r:?}"
        );
        // Writing to a symlink's handle must not write its target.
        std::fs::write(dir.path().join("target"), b"keep").expect("write");
        std::os::unix::fs::symlink("target", dir.path().join("ln")).expect("symlink");
        let ln = lookup(&s.nfs, &s.root, "ln").await;
        let r = s
            .nfs
            .write(&Write3Args {
                file: ln,
                offset: 0,
                count: 4,
                stable: StableHow::FileSync,
                data: b"gone".to_vec(),
            })
            .await
            .expect("WRITE rpc");
        assert_ne!(r.status(), Nfsstat3::Ok, "WRITE via a symlink handle");
        assert_eq!(
            std::fs::read(dir.path().join("target")).expect("read"),
            b"keep"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn names_with_nul_or_slash_create_nothing() {
    let (dir, srv) = start("e2e-badnames");
    bounded(async {
        let s = mount(&srv).await;
        for bad in [&b"a\0b"[..], b"a/b", b"/", b"\0"] {
            let r = s
                .nfs
                .create(&Create3Args {
                    where_: Diropargs3 {
                        dir: s.root.clone(),
                        name: bad.to_vec(),
                    },
                    how: CreateHow3::Unchecked(Sattr3::default()),
                })
                .await;
            match r {
                Err(ClientError::GarbageArgs) => {}
                Ok(NfsRes::Fail(Nfsstat3::Inval | Nfsstat3::Acces | Nfsstat3::NoEnt, _)) => {}
                other => panic!("CREATE {bad:?}: {other:?}"),
            }
            let r = s
                .nfs
                .mkdir(&Mkdir3Args {
                    where_: Diropargs3 {
                        dir: s.root.clone(),
                        name: bad.to_vec(),
                    },
                    attributes: Sattr3::default(),
                })
                .await;
            assert!(!matches!(r, Ok(NfsRes::Ok(_))), "MKDIR {bad:?} succeeded");
        }
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("ls").count(),
            0,
            "something was created"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn readdir_while_the_directory_changes() {
    let (dir, srv) = start("e2e-readdir-change");
    let names = make_names(dir.path());
    bounded(async {
        let s = mount(&srv).await;
        let mut a = ReadDir3Args {
            dir: s.root.clone(),
            cookie: 0,
            cookieverf: Verf3::default(),
            count: 1024,
        };
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let mut removed = std::collections::BTreeSet::new();
        let mut calls = 0;
        loop {
            calls += 1;
            assert!(calls < 1000, "READDIR never reached eof");
            let r = ok("READDIR", s.nfs.readdir(&a).await);
            for e in &r.entries {
                *seen.entry(name(&e.name)).or_insert(0) += 1;
            }
            if r.eof {
                break;
            }
            // After each page remove two names not yet listed and add one.
            for n in names
                .iter()
                .filter(|n| !seen.contains_key(*n) && !removed.contains(*n))
                .take(2)
                .cloned()
                .collect::<Vec<_>>()
            {
                std::fs::remove_file(dir.path().join(&n)).expect("rm");
                removed.insert(n);
            }
            std::fs::write(dir.path().join(format!("added-{calls}")), b"").expect("add");
            a.cookie = r.entries.last().expect("entries").cookie;
            a.cookieverf = r.cookieverf;
        }
        for (n, k) in &seen {
            assert_eq!(*k, 1, "{n:?} listed {k} times while the directory changed");
        }
        for n in &names {
            if !removed.contains(n) {
                assert!(seen.contains_key(n), "{n:?} (never removed) was skipped");
            }
        }
        assert!(!removed.is_empty());
    })
    .await;
}

/// Many concurrent calls as a non-root user make the adaptive worker pool
/// start threads while a worker runs as that user. Every call must still
/// work: a new thread must not inherit the last caller's filesystem
/// identity in place of the server's.
#[tokio::test(flavor = "multi_thread")]
async fn user_calls_under_load_all_succeed() {
    let (dir, srv) = start("e2e-userload");
    std::fs::write(dir.path().join("pub"), b"public").expect("write");
    bounded(async {
        let s = mount(&srv).await;
        let fh = lookup(&s.nfs, &s.root, "pub").await;
        let user = s.nfs.with_auth(Auth::unix(1000, 1000));
        let mut set = tokio::task::JoinSet::new();
        for i in 0..400 {
            let c = user.clone();
            let fh = fh.clone();
            set.spawn(async move {
                let r = read_res(&c, &fh, 0, 10).await.expect("READ rpc");
                (i, r.status())
            });
        }
        let mut bad = Vec::new();
        while let Some(r) = set.join_next().await {
            let (i, st) = r.expect("task");
            if st != Nfsstat3::Ok {
                bad.push((i, st));
            }
        }
        assert!(
            bad.is_empty(),
            "{} of 400 READs of a 0644 file as uid 1000 failed, e.g. {:?}",
            bad.len(),
            &bad[..bad.len().min(5)]
        );
    })
    .await;
}
