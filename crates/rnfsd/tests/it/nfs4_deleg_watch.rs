//! NFSv4.1 read delegations and a program on the server's host that
//! changes a delegated file's metadata (chmod, chown, utimes, a hard
//! link, unlink, rename, setxattr): none of those breaks the server's
//! Linux file lease, the inotify watch beside it sees them, and the
//! holder gets CB_RECALL within a bound; the watch goes with the lease
//! on DELEGRETURN. The holder's own SETATTR, LINK, RENAME and REMOVE
//! through the server do not recall its delegation where the export's
//! filesystem gives every change its own ctime (multigrain: ext4, xfs,
//! btrfs, tmpfs since Linux 6.13), and do elsewhere.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common;

use common::nfs::*;
use common::{TempDir, TestServer};
use rnfsd_client::nfs4::{OpenArgs, SetAttrs4};
use rnfsd_client::{ClientError, Nfs4Client};
use rnfsd_proto::nfs4::*;

/// The lease (and so the recall deadline) of these servers.
const LEASE_SECS: u64 = 4;
/// A local change is recalled within this (the watch's event wakes the
/// lease thread at once; debug builds on a busy machine).
const RECALL_BOUND: Duration = Duration::from_secs(2);
/// How long the holder's own changes are watched for a recall that
/// must not come.
const QUIET: Duration = Duration::from_millis(1500);

fn start(tag: &str) -> (TempDir, TempDir, TestServer) {
    crate::nfs4_deleg::start_lease(tag, "", LEASE_SECS)
}

/// Opens `name` for reading with a read delegation: its stateid and
/// the file's handle.
async fn delegated(c: &Nfs4Client, root: &NfsFh4, name: &str) -> (Stateid4, NfsFh4) {
    let args = OpenArgs {
        access: OPEN4_SHARE_ACCESS_READ | OPEN4_SHARE_ACCESS_WANT_READ_DELEG,
        ..OpenArgs::read(name)
    };
    let o = c.open(root, &args).await.expect("OPEN");
    match o.delegation {
        OpenDelegation4::Read(r) => (r.stateid, o.fh),
        d => panic!("no read delegation on {name}: {d:?}"),
    }
}

fn was_recalled(c: &Nfs4Client, sid: &Stateid4) -> bool {
    c.recalls().iter().any(|r| r.stateid.other == sid.other)
}

/// Waits (at most 10 s) for `c`'s CB_RECALL of `sid`: how long it took.
async fn recalled(c: &Nfs4Client, sid: &Stateid4, what: &str) -> Duration {
    let t0 = Instant::now();
    while !was_recalled(c, sid) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{what}: no CB_RECALL came"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    t0.elapsed()
}

/// inotify watches the server process holds (its inotify descriptors'
/// `inotify wd:` lines in /proc/PID/fdinfo).
fn watches(srv: &TestServer) -> usize {
    let pid = srv.pid().expect("the server runs");
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return 0;
    };
    dir.filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .map(|s| s.lines().filter(|l| l.starts_with("inotify wd:")).count())
        .sum()
}

/// Waits (at most `within`) until the server holds `n` watches; `c`
/// keeps its lease meanwhile.
async fn watches_become(srv: &TestServer, c: &Nfs4Client, n: usize, within: Duration) {
    let t0 = Instant::now();
    while watches(srv) != n {
        assert!(
            t0.elapsed() < within,
            "the server holds {} inotify watches, not {n}",
            watches(srv)
        );
        c.run(&[]).await.expect("SEQUENCE");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn setxattr(p: &Path) -> std::io::Result<()> {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let (k, v) = (c"user.rnfsd-test", b"v");
    // SAFETY: valid C strings and a value of the length given.
    match unsafe { libc::setxattr(c.as_ptr(), k.as_ptr(), v.as_ptr().cast(), v.len(), 0) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// What a local program does to the delegated file at `p`.
type Change = fn(&Path) -> std::io::Result<()>;

fn with_ext(p: &Path, ext: &str) -> PathBuf {
    p.with_extension(ext)
}

const LOCAL_CHANGES: &[(&str, Change)] = &[
    ("chmod", |p| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600))
    }),
    // To its own owner: a chown all the same (ctime, IN_ATTRIB).
    ("chown", |p| {
        let m = std::fs::metadata(p)?;
        std::os::unix::fs::chown(p, Some(m.uid()), Some(m.gid()))
    }),
    // Through a read-only descriptor, which breaks no read lease.
    ("utimes", |p| {
        let old = std::time::SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::open(p)?.set_modified(old)
    }),
    ("link", |p| std::fs::hard_link(p, with_ext(p, "l"))),
    ("unlink", |p| std::fs::remove_file(p)),
    ("rename", |p| std::fs::rename(p, with_ext(p, "r"))),
    ("setxattr", setxattr),
];

#[tokio::test(flavor = "multi_thread")]
async fn local_metadata_changes_recall_and_the_watch_goes_with_the_lease() {
    let (dir, _cfg, srv) = start("deleg-watch-local");
    bounded(async {
        let a = common::nfs4::back_channel_client(&srv, "nfs4-deleg-watch").await;
        let root = common::nfs4::root_of(&a, &dir).await;
        assert_eq!(watches(&srv), 0, "no delegation, no watch");
        // A file each, made first: one recalled lately gets none, and an
        // unlinked file's inode number may come again.
        for (what, _) in LOCAL_CHANGES {
            std::fs::write(dir.path().join(what), b"hello").unwrap();
        }
        for (what, change) in LOCAL_CHANGES {
            let p = dir.path().join(what);
            let (sid, fh) = delegated(&a, &root, what).await;
            assert_eq!(watches(&srv), 1, "{what}: a watch beside the lease");
            // A read by a local program changes nothing.
            assert_eq!(std::fs::read(&p).unwrap(), b"hello");
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(!was_recalled(&a, &sid), "{what}: a local read recalled");
            change(&p).unwrap_or_else(|e| panic!("local {what}: {e}"));
            let took = recalled(&a, &sid, what).await;
            assert!(took < RECALL_BOUND, "{what}: recalled after {took:?}");
            // An unlinked file's handle is stale (PUTFH): its delegation
            // is revoked at the recall's deadline instead.
            match a.delegreturn(&fh, &sid).await {
                Ok(()) => {}
                Err(ClientError::Nfs4 {
                    status: Nfsstat4::Stale,
                    ..
                }) if *what == "unlink" => {}
                Err(e) => panic!("{what}: DELEGRETURN: {e}"),
            }
            watches_become(&srv, &a, 0, Duration::from_secs(LEASE_SECS + 6)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_holders_own_changes_recall_only_where_unprovable() {
    let (dir, _cfg, srv) = start("deleg-watch-own");
    let p = dir.path().join("own");
    std::fs::write(&p, b"hello").unwrap();
    // Whether the export's filesystem tells each change by its ctime
    // (the server's judgment of its own changes' events rests on it).
    let dev = std::fs::metadata(&p).unwrap().dev();
    let provable = rnfsd_fs::watch::fine_ctimes(dev);
    bounded(async {
        let a = common::nfs4::back_channel_client(&srv, "nfs4-deleg-watch").await;
        let root = common::nfs4::root_of(&a, &dir).await;
        let (sid, fh) = delegated(&a, &root, "own").await;
        let anon = Stateid4::default();
        if !provable {
            a.setattr(&fh, &anon, &SetAttrs4::mode(0o600))
                .await
                .expect("the holder's SETATTR");
            let took = recalled(&a, &sid, "the holder's SETATTR").await;
            assert!(took < RECALL_BOUND, "recalled after {took:?}");
            return;
        }
        // SETATTR (mode, times), LINK, RENAME, REMOVE of a link: each
        // makes an inotify event on the file, none a recall.
        a.setattr(&fh, &anon, &SetAttrs4::mode(0o600))
            .await
            .expect("the holder's SETATTR");
        let times = SetAttrs4 {
            mtime: Some(Settime4::ServerTime),
            ..SetAttrs4::default()
        };
        a.setattr(&fh, &anon, &times).await.expect("SETATTR times");
        a.link(&fh, &root, "own2").await.expect("the holder's LINK");
        a.rename(&root, "own", &root, "own3")
            .await
            .expect("the holder's RENAME");
        a.remove(&root, "own2").await.expect("the holder's REMOVE");
        tokio::time::sleep(QUIET).await;
        assert!(
            !was_recalled(&a, &sid),
            "the holder's own changes recalled its delegation"
        );
        assert_eq!(watches(&srv), 1);
        // The watch still tells a local change after them.
        std::fs::set_permissions(
            dir.path().join("own3"),
            std::os::unix::fs::PermissionsExt::from_mode(0o644),
        )
        .unwrap();
        let took = recalled(&a, &sid, "a local chmod after").await;
        assert!(took < RECALL_BOUND, "recalled after {took:?}");
        a.delegreturn(&fh, &sid).await.unwrap();
        watches_become(&srv, &a, 0, Duration::from_secs(2)).await;
    })
    .await;
}
