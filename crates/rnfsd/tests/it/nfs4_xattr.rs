//! End to end, NFSv4.2's extended attributes (RFC 8276) through our client
//! at minor version 2 against the real server: what SETXATTR and
//! REMOVEXATTR change is checked on the server's disk (as `user.` names),
//! what is set there is read back by GETXATTR and LISTXATTRS; the
//! SETXATTR options, the bounds, read-only exports, permissions,
//! symlinks, the pseudo-filesystem, ACCESS's bits and minor version 1.

use crate::common;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use common::nfs::bounded;
use common::nfs4::{path_of, rw_and_ro_exports as start, status};
use common::TestServer;
use rnfsd_client::{Nfs4Client, Nfs4Config};
use rnfsd_proto::nfs4::*;
use rnfsd_xdr::{Dec, Xdr};

async fn client_as(srv: &TestServer, uid: u32, minor: u32) -> Nfs4Client {
    let v4 = Nfs4Config {
        minor,
        ..Nfs4Config::default()
    };
    common::nfs4::client_as(srv, uid, "nfs4-xattr", &v4).await
}

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// The value of extended attribute `name` of `p` on the server's disk.
fn disk_get(p: &Path, name: &str) -> Option<Vec<u8>> {
    let (p, n) = (cpath(p), CString::new(name).unwrap());
    let mut buf = vec![0u8; 1 << 16];
    // SAFETY: NUL-terminated strings; `buf` is writable for its length.
    let r = unsafe { libc::lgetxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    let n = usize::try_from(r).ok()?;
    buf.truncate(n);
    Some(buf)
}

/// Sets extended attribute `name` of `p` on the server's disk.
fn disk_set(p: &Path, name: &str, value: &[u8]) {
    let (p, n) = (cpath(p), CString::new(name).unwrap());
    // SAFETY: NUL-terminated strings; `value` is readable for its length.
    let r = unsafe {
        libc::lsetxattr(
            p.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    assert_eq!(r, 0, "setxattr {name}: {}", std::io::Error::last_os_error());
}

/// Whether the filesystem of `dir` takes user attributes (tmpfs before
/// Linux 6.6 does not): the tests need it.
fn user_xattrs_work(dir: &Path) -> bool {
    let f = dir.join(".xattr-probe");
    std::fs::write(&f, b"").unwrap();
    let (p, n) = (cpath(&f), CString::new("user.probe").unwrap());
    // SAFETY: NUL-terminated strings; the value is one readable byte.
    let r = unsafe { libc::lsetxattr(p.as_ptr(), n.as_ptr(), b"1".as_ptr().cast(), 1, 0) };
    std::fs::remove_file(&f).unwrap();
    r == 0
}

/// Durability requests over all exports (`sync` exports: every change
/// asks its commit before the reply).
fn sync_requests(srv: &TestServer) -> u64 {
    let a = rnfsd::admin::query(&srv.state.path().join("admin.sock"), "snapshot")
        .expect("admin socket");
    let s = rnfsd_stats::Snapshot::from_json(&a).expect("snapshot JSON");
    s.exports.iter().map(|e| e.sync_requests).sum()
}

/// xattr_support of `fh`, if the server answered it.
async fn xattr_support(c: &Nfs4Client, fh: &NfsFh4) -> Option<bool> {
    let mut want = Bitmap4::new();
    want.insert(FATTR4_XATTR_SUPPORT);
    let f = c.getattr(fh, &want).await.expect("GETATTR");
    if !f.attrmask.contains(FATTR4_XATTR_SUPPORT) {
        return None;
    }
    Some(Dec::new(&f.attr_vals).bool().expect("a bool"))
}

async fn change(c: &Nfs4Client, fh: &NfsFh4) -> u64 {
    c.getattr_decoded(fh).await.unwrap().change().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn attributes_reach_the_disk_and_come_back() {
    let (rw, _ro, _cfg, srv) = start("nfs4xattr-disk");
    if !user_xattrs_work(rw.path()) {
        eprintln!("skipped: the temporary directory's filesystem has no user xattrs");
        return;
    }
    let file = rw.path().join("f");
    std::fs::write(&file, b"data").unwrap();
    bounded(async {
        let c = client_as(&srv, 0, 2).await;
        let root = c.lookup_path(&path_of(&rw)).await.expect("export root");
        let fh = c.lookup_from(&root, "f").await.expect("file");
        assert_eq!(xattr_support(&c, &fh).await, Some(true));
        assert_eq!(xattr_support(&c, &root).await, Some(true));

        // SETXATTR CREATE: on the disk as user.colour; its change_info
        // moves and ends at the change attribute GETATTR then gives. The
        // export is `sync` (the default): the change asked for its commit
        // before the reply.
        let before = change(&c, &fh).await;
        let synced = sync_requests(&srv);
        let ci = c
            .setxattr(&fh, SETXATTR4_CREATE, "colour", b"blue")
            .await
            .expect("SETXATTR CREATE");
        assert!(sync_requests(&srv) > synced, "SETXATTR asked no commit");
        assert_eq!(
            disk_get(&file, "user.colour").as_deref(),
            Some(&b"blue"[..])
        );
        assert_eq!(ci.before, before);
        assert!(ci.after > ci.before, "{ci:?}");
        assert_eq!(ci.after, change(&c, &fh).await);
        assert_eq!(c.getxattr(&fh, "colour").await.unwrap(), b"blue");

        // The options (RFC 8276 §8.4.2).
        let s = c.setxattr(&fh, SETXATTR4_CREATE, "colour", b"red").await;
        assert_eq!(status(s), Nfsstat4::Exist);
        let s = c.setxattr(&fh, SETXATTR4_REPLACE, "shape", b"round").await;
        assert_eq!(status(s), Nfsstat4::NoXattr);
        assert_eq!(disk_get(&file, "user.shape"), None);
        c.setxattr(&fh, SETXATTR4_REPLACE, "colour", b"red")
            .await
            .expect("REPLACE");
        c.setxattr(&fh, SETXATTR4_EITHER, "shape", b"")
            .await
            .expect("EITHER, empty value");
        assert_eq!(disk_get(&file, "user.colour").as_deref(), Some(&b"red"[..]));
        assert_eq!(disk_get(&file, "user.shape").as_deref(), Some(&b""[..]));
        assert_eq!(c.getxattr(&fh, "shape").await.unwrap(), b"");
        let s = c.setxattr(&fh, 3, "colour", b"x").await;
        assert_eq!(status(s), Nfsstat4::Inval, "an unknown option");

        // Set on the disk, read through the server; other namespaces are
        // never listed.
        disk_set(&file, "user.from-disk", b"\x00\x01\xff");
        disk_set(&file, "trusted.hidden", b"t");
        assert_eq!(c.getxattr(&fh, "from-disk").await.unwrap(), b"\x00\x01\xff");
        assert_eq!(status(c.getxattr(&fh, "missing").await), Nfsstat4::NoXattr);
        let l = c.listxattrs(&fh, 0, 8192).await.expect("LISTXATTRS");
        assert!(l.eof);
        let mut names: Vec<Vec<u8>> = l.names.into_iter().map(|n| n.0).collect();
        names.sort();
        assert_eq!(
            names,
            vec![b"colour".to_vec(), b"from-disk".to_vec(), b"shape".to_vec()]
        );

        // Page by page, with room for one name at a time.
        let mut paged = Vec::new();
        let mut cookie = 0;
        loop {
            let l = c.listxattrs(&fh, cookie, 16 + 16).await.expect("a page");
            assert!(l.names.len() <= 1, "{l:?}");
            paged.extend(l.names.into_iter().map(|n| n.0));
            cookie = l.cookie;
            if l.eof {
                break;
            }
        }
        paged.sort();
        assert_eq!(paged, names);
        let s = c.listxattrs(&fh, 0, 16).await;
        assert_eq!(status(s), Nfsstat4::TooSmall);
        let s = c.listxattrs(&fh, 99, 8192).await;
        assert_eq!(status(s), Nfsstat4::BadCookie);

        // REMOVEXATTR.
        let synced = sync_requests(&srv);
        let ci = c.removexattr(&fh, "colour").await.expect("REMOVEXATTR");
        assert!(sync_requests(&srv) > synced, "REMOVEXATTR asked no commit");
        assert!(ci.after > ci.before);
        assert_eq!(disk_get(&file, "user.colour"), None);
        assert_eq!(
            status(c.removexattr(&fh, "colour").await),
            Nfsstat4::NoXattr
        );
        assert_eq!(
            disk_get(&file, "trusted.hidden").as_deref(),
            Some(&b"t"[..])
        );

        // A directory has them too.
        let d = c.mkdir(&root, "d", 0o755).await.expect("mkdir");
        c.setxattr(&d, SETXATTR4_EITHER, "on-dir", b"1")
            .await
            .expect("on a directory");
        assert_eq!(
            disk_get(&rw.path().join("d"), "user.on-dir").as_deref(),
            Some(&b"1"[..])
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bounds_permissions_and_places_without_attributes() {
    let (rw, ro, _cfg, srv) = start("nfs4xattr-bounds");
    if !user_xattrs_work(rw.path()) {
        eprintln!("skipped: the temporary directory's filesystem has no user xattrs");
        return;
    }
    let file = rw.path().join("f");
    std::fs::write(&file, b"data").unwrap();
    std::os::unix::fs::symlink("f", rw.path().join("l")).unwrap();
    disk_set(&ro.path().join("f"), "user.kept", b"k");
    bounded(async {
        let c = client_as(&srv, 0, 2).await;
        let root = c.lookup_path(&path_of(&rw)).await.expect("export root");
        let fh = c.lookup_from(&root, "f").await.expect("file");

        // Names: 250 bytes and "user." make Linux's 255.
        let longest = "n".repeat(250);
        c.setxattr(&fh, SETXATTR4_EITHER, &longest, b"v")
            .await
            .expect("the longest name");
        assert!(disk_get(&file, &format!("user.{longest}")).is_some());
        let s = c
            .setxattr(&fh, SETXATTR4_EITHER, "n".repeat(251), b"v")
            .await;
        assert_eq!(status(s), Nfsstat4::NameTooLong);
        assert_eq!(status(c.getxattr(&fh, "").await), Nfsstat4::Inval);
        // Values: Linux's XATTR_SIZE_MAX.
        let s = c
            .setxattr(&fh, SETXATTR4_EITHER, "big", vec![7u8; (1 << 16) + 1])
            .await;
        assert_eq!(status(s), Nfsstat4::Xattr2Big);

        // A symlink has no user attributes (Linux's rule).
        let l = c.lookup_from(&root, "l").await.expect("symlink");
        assert_eq!(status(c.getxattr(&l, "x").await), Nfsstat4::NoXattr);
        assert_eq!(
            status(c.setxattr(&l, SETXATTR4_EITHER, "x", b"1").await),
            Nfsstat4::Perm
        );
        assert!(c.listxattrs(&l, 0, 8192).await.unwrap().names.is_empty());

        // The pseudo-filesystem has none; its xattr_support is false.
        let pseudo = c.root_fh().await.unwrap();
        assert_eq!(xattr_support(&c, &pseudo).await, Some(false));
        assert_eq!(status(c.getxattr(&pseudo, "x").await), Nfsstat4::NotSupp);

        // A read-only export reads but does not change.
        let rof = c.lookup_path(&format!("{}/f", path_of(&ro))).await.unwrap();
        assert_eq!(c.getxattr(&rof, "kept").await.unwrap(), b"k");
        let s = c.setxattr(&rof, SETXATTR4_EITHER, "x", b"1").await;
        assert_eq!(status(s), Nfsstat4::RoFs);
        assert_eq!(status(c.removexattr(&rof, "kept").await), Nfsstat4::RoFs);

        // ACCESS's bits at minor version 2: root may do everything here;
        // read-only, XAWRITE is not granted.
        let xa = ACCESS4_XAREAD | ACCESS4_XAWRITE | ACCESS4_XALIST;
        let a = c.access(&fh, xa | ACCESS4_READ).await.unwrap();
        assert_eq!(
            (a.supported, a.access),
            (xa | ACCESS4_READ, xa | ACCESS4_READ)
        );
        let a = c.access(&rof, xa).await.unwrap();
        assert_eq!(a.access, ACCESS4_XAREAD | ACCESS4_XALIST);

        // Another user: the file is root's and 0644, so read but no write,
        // as the kernel decides for a local process.
        let u = client_as(&srv, 4321, 2).await;
        let ufh = u.lookup_path(&format!("{}/f", path_of(&rw))).await.unwrap();
        assert_eq!(u.getxattr(&ufh, "n".repeat(250)).await.unwrap(), b"v");
        let s = u.setxattr(&ufh, SETXATTR4_EITHER, "mine", b"1").await;
        assert_eq!(status(s), Nfsstat4::Access);
        assert_eq!(disk_get(&file, "user.mine"), None);
        let a = u.access(&ufh, xa).await.unwrap();
        assert_eq!(a.access, ACCESS4_XAREAD | ACCESS4_XALIST);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn minor_version_1_has_none_of_it() {
    let (rw, _ro, _cfg, srv) = start("nfs4xattr-minor1");
    std::fs::write(rw.path().join("f"), b"data").unwrap();
    bounded(async {
        let c = client_as(&srv, 0, 1).await;
        let root = c.lookup_path(&path_of(&rw)).await.expect("export root");
        let fh = c.lookup_from(&root, "f").await.expect("file");
        // Not an attribute of 4.1, nor in its supported_attrs.
        assert_eq!(xattr_support(&c, &fh).await, None);
        let mut want = Bitmap4::new();
        want.insert(FATTR4_SUPPORTED_ATTRS);
        let f = c.getattr(&fh, &want).await.unwrap();
        let sup = Bitmap4::decode(&mut Dec::new(&f.attr_vals)).unwrap();
        assert!(sup.contains(FATTR4_MODE));
        assert!(!sup.contains(FATTR4_XATTR_SUPPORT));
        // The operations are not 4.1's: OP_ILLEGAL (RFC 8881 §15.2).
        let r = c
            .compound(&[
                ArgOp::PutFh(PutFh4Args { object: fh.clone() }),
                ArgOp::GetXattr(GetXattr4Args {
                    name: Component4(b"x".to_vec()),
                }),
            ])
            .await
            .unwrap();
        assert_eq!(r.status, Nfsstat4::OpIllegal);
        assert_eq!(r.results.last(), Some(&ResOp::Illegal(Nfsstat4::OpIllegal)));
        // Nor are ACCESS's xattr bits.
        let s = c.access(&fh, ACCESS4_READ | ACCESS4_XAREAD).await;
        assert_eq!(status(s), Nfsstat4::Inval);
    })
    .await;
}
