//! LOCK, LOCKT, LOCKU on a real file: the kernel's OFD locks decide, so
//! NFSv4 owners, another lock manager's descriptor and a local program
//! see each other.

use std::os::fd::AsRawFd;
use std::sync::Arc;

use rnfsd_fs::local::{LocalFs, LocalOptions};
use rnfsd_fs::{Backend, Cred, Fh};

use super::*;
use crate::lock::*;
use crate::open::*;

static ROOT: Cred = Cred {
    uid: 0,
    gid: 0,
    gids: Vec::new(),
};

pub(crate) struct Env {
    _dir: tempfile::TempDir,
    pub(crate) path: std::path::PathBuf,
    pub(crate) fs: Arc<dyn Backend>,
    pub(crate) fh: Fh,
}

impl Env {
    pub(crate) fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        let fs: Arc<dyn Backend> =
            Arc::new(LocalFs::open(dir.path(), 3, LocalOptions::default()).unwrap());
        let (fh, _, _) = fs
            .lookup(&rnfsd_fs::Call::thread(&ROOT, false), &fs.root(), b"f")
            .unwrap();
        Env {
            _dir: dir,
            path,
            fs,
            fh,
        }
    }

    pub(crate) fn opener(&self) -> BackendLockFile<'_> {
        BackendLockFile {
            backend: &self.fs,
            cred: &ROOT,
            fh: &self.fh,
            holder: false,
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn new_lock(
    s: &State,
    e: &Env,
    c: &ClientHandle,
    open: Stateid,
    owner: &str,
    write: bool,
    offset: u64,
    length: u64,
) -> Result<Stateid, V4Error> {
    s.lock(
        c,
        &LockArgs {
            locker: Locker4::New {
                open,
                owner: owner.as_bytes(),
            },
            file: F,
            write,
            offset,
            length,
            reclaim: false,
        },
        &e.opener(),
    )
}

fn more_lock(
    s: &State,
    e: &Env,
    c: &ClientHandle,
    lock: Stateid,
    write: bool,
    offset: u64,
    length: u64,
) -> Result<Stateid, V4Error> {
    s.lock(
        c,
        &LockArgs {
            locker: Locker4::Existing(lock),
            file: F,
            write,
            offset,
            length,
            reclaim: false,
        },
        &e.opener(),
    )
}

fn denied(r: Result<Stateid, V4Error>) -> Denied {
    match r {
        Err(V4Error::Denied(d)) => *d,
        other => panic!("not denied: {other:?}"),
    }
}

#[test]
fn conflicts_name_our_owner() {
    let e = Env::new();
    let s = state();
    let (a, _) = handle(&s, "a");
    let (b, _) = handle(&s, "b");
    let oa = open(&s, &a, "o", F, ACCESS_BOTH, DENY_NONE)
        .unwrap()
        .stateid;
    let ob = open(&s, &b, "o", F, ACCESS_BOTH, DENY_NONE)
        .unwrap()
        .stateid;
    let la = new_lock(&s, &e, &a, oa, "lo-a", true, 0, 10).unwrap();
    assert_eq!(la.seqid, 1);
    let d = denied(new_lock(&s, &e, &b, ob, "lo-b", false, 5, 1));
    assert_eq!((d.offset, d.length, d.write), (0, 10, true));
    assert_eq!(d.owner, Some((a.id(), b"lo-a".to_vec())));
    // The failed LOCK left no lock stateid behind.
    assert_eq!(s.counts().stateids, 3);
    // Non-overlapping ranges are fine, and shared locks share.
    let lb = new_lock(&s, &e, &b, ob, "lo-b", false, 10, 5).unwrap();
    let la2 = more_lock(&s, &e, &a, la, false, 12, u64::MAX).unwrap();
    assert_eq!(la2.seqid, 2);
    assert_eq!(la2.other, la.other);
    // LOCKT: b's own read lock does not conflict with b; a's write does.
    let lt = |offset, length| LocktArgs {
        owner: b"lo-b",
        file: F,
        write: true,
        offset,
        length,
    };
    s.lockt(&b, &lt(10, 2), &e.opener()).unwrap();
    let t = s.lockt(&b, &lt(0, 1), &e.opener());
    match t {
        Err(V4Error::Denied(d)) => assert_eq!(d.owner, Some((a.id(), b"lo-a".to_vec()))),
        other => panic!("{other:?}"),
    }
    // LOCKU frees the range for b.
    let u = s.locku(&a, &la2, F, 0, 10).unwrap();
    assert_eq!(u.seqid, 3);
    more_lock(&s, &e, &b, lb, true, 0, 10).unwrap();
    super::audit::audit(&s);
}

#[test]
fn other_lock_managers_and_local_programs_conflict() {
    let e = Env::new();
    let s = state();
    let (a, _) = handle(&s, "a");
    let oa = open(&s, &a, "o", F, ACCESS_BOTH, DENY_NONE)
        .unwrap()
        .stateid;
    // What an NLM client's lock is: another description's OFD lock.
    let nlm = e.opener().open_lock_file(true).unwrap();
    assert!(nlm
        .lock(
            rnfsd_fs::lock::LockKind::Exclusive,
            rnfsd_fs::lock::LockRange {
                start: 100,
                len: 10
            }
        )
        .unwrap());
    let d = denied(new_lock(&s, &e, &a, oa, "lo", false, 105, 1));
    assert_eq!(
        (d.offset, d.length, d.write, d.owner),
        (100, 10, true, None)
    );
    drop(nlm);
    let l = new_lock(&s, &e, &a, oa, "lo", true, 105, 1).unwrap();
    // A local program's POSIX lock meets ours.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&e.path)
        .unwrap();
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as _;
    fl.l_whence = libc::SEEK_SET as _;
    fl.l_start = 105;
    fl.l_len = 1;
    // SAFETY: a valid descriptor and flock.
    let r = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &fl) };
    assert_eq!(r, -1, "the program is refused: the v4 lock is the kernel's");
    s.locku(&a, &l, F, 105, 1).unwrap();
    // SAFETY: as above.
    let r = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &fl) };
    assert_eq!(r, 0);
    let d = denied(more_lock(
        &s,
        &e,
        &a,
        Stateid { seqid: 0, ..l },
        false,
        100,
        10,
    ));
    assert_eq!((d.offset, d.length, d.owner), (105, 1, None));
}

#[test]
fn free_stateid_and_close_with_locks() {
    let e = Env::new();
    let s = state();
    let (a, _) = handle(&s, "a");
    let (b, _) = handle(&s, "b");
    let oa = open(&s, &a, "o", F, ACCESS_BOTH, DENY_NONE)
        .unwrap()
        .stateid;
    let ob = open(&s, &b, "o", F, ACCESS_BOTH, DENY_NONE)
        .unwrap()
        .stateid;
    let l = new_lock(&s, &e, &a, oa, "lo", true, 0, u64::MAX).unwrap();
    assert_eq!(s.free_stateid(&a, &l), Err(V4Error::LocksHeld));
    let l = s.locku(&a, &l, F, 0, u64::MAX).unwrap();
    s.free_stateid(&a, &l).unwrap();
    assert_eq!(s.check_stateid(&a, &l, None), Err(V4Error::BadStateid));
    // CLOSE drops the open's locks (and their stateids).
    let l = new_lock(&s, &e, &a, oa, "lo", true, 0, u64::MAX).unwrap();
    denied(new_lock(&s, &e, &b, ob, "lb", true, 0, 1));
    s.close(&a, &oa).unwrap();
    assert_eq!(s.check_stateid(&a, &l, None), Err(V4Error::BadStateid));
    new_lock(&s, &e, &b, ob, "lb", true, 0, 1).unwrap();
    assert_eq!(s.counts().stateids, 2, "b's open and lock");
    super::audit::audit(&s);
}

#[test]
fn lock_owner_and_stateid_rules() {
    let e = Env::new();
    let s = state();
    let (a, _) = handle(&s, "a");
    let r = open(&s, &a, "o", F, ACCESS_READ, DENY_NONE)
        .unwrap()
        .stateid;
    assert_eq!(
        new_lock(&s, &e, &a, r, "lo", true, 0, 1),
        Err(V4Error::OpenMode),
        "a write lock needs write access"
    );
    let l = new_lock(&s, &e, &a, r, "lo", false, 0, 1).unwrap();
    // The same owner again from the open: the same lock stateid.
    let again = new_lock(&s, &e, &a, r, "lo", false, 2, 1).unwrap();
    assert_eq!(again.other, l.other);
    assert_eq!(again.seqid, 2);
    assert_eq!(
        more_lock(&s, &e, &a, l, false, 4, 1),
        Err(V4Error::OldStateid)
    );
    assert_eq!(
        more_lock(&s, &e, &a, r, false, 4, 1),
        Err(V4Error::BadStateid),
        "an open stateid is no lock stateid"
    );
    assert_eq!(
        new_lock(&s, &e, &a, again, "x", false, 4, 1),
        Err(V4Error::BadStateid),
        "a lock stateid is no open stateid"
    );
    assert_eq!(
        new_lock(&s, &e, &a, r, "lo", false, 0, 0),
        Err(V4Error::Inval)
    );
    assert_eq!(
        s.locku(&a, &again, G, 0, 1),
        Err(V4Error::BadStateid),
        "another file"
    );
    assert_eq!(s.check_io(&a, &again, F, false), Ok(Some(StateKind::Lock)));
    assert_eq!(s.check_io(&a, &again, F, true), Err(V4Error::OpenMode));
    super::audit::audit(&s);
}

#[test]
fn lock_owner_bound() {
    let e = Env::new();
    let s = state_with(Config {
        limits: Limits {
            lock_owners_per_client: 1,
            ..Limits::default()
        },
        ..Config::default()
    });
    let (a, _) = handle(&s, "a");
    let o = open(&s, &a, "o", F, ACCESS_BOTH, DENY_NONE)
        .unwrap()
        .stateid;
    new_lock(&s, &e, &a, o, "l1", true, 0, 1).unwrap();
    assert_eq!(
        new_lock(&s, &e, &a, o, "l2", true, 5, 1),
        Err(V4Error::Resource)
    );
    assert!(s
        .counts()
        .limit_hits
        .contains(&(Limit::LockOwnersPerClient, 1)));
}

#[test]
fn open_errors_come_back() {
    let s = state();
    let (a, _) = handle(&s, "a");
    let o = open(&s, &a, "o", F, ACCESS_BOTH, DENY_NONE)
        .unwrap()
        .stateid;
    let gone = |_: bool| Err(rnfsd_fs::FsError::Stale);
    let r = s.lock(
        &a,
        &LockArgs {
            locker: Locker4::New {
                open: o,
                owner: b"l",
            },
            file: F,
            write: true,
            offset: 0,
            length: 1,
            reclaim: false,
        },
        &gone,
    );
    assert_eq!(r, Err(V4Error::Stale));
    assert_eq!(s.counts().stateids, 1, "no lock stateid left behind");
}

/// Whether a read lease can be had on the file now (no one has it open
/// for writing: the kernel's own test), let go at once.
fn read_lease_possible(path: &std::path::Path) -> bool {
    let f = std::fs::File::open(path).unwrap();
    // SAFETY: fcntl with an int argument on a descriptor we own.
    let r = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLEASE, libc::F_RDLCK) };
    if r == 0 {
        // SAFETY: as above.
        unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
    }
    r == 0
}

#[test]
fn a_read_opens_owner_locks_read_only_and_moves_to_read_write_on_upgrade() {
    let e = Env::new();
    let s = state();
    let (a, _) = handle(&s, "a");
    let (b, _) = handle(&s, "b");
    let oa = open(&s, &a, "o", F, ACCESS_READ, DENY_NONE)
        .unwrap()
        .stateid;
    assert!(read_lease_possible(&e.path), "nothing open for writing yet");
    let l = new_lock(&s, &e, &a, oa, "lo", false, 0, 10).unwrap();
    // The owner's descriptor is read-only: a read lease (a read
    // delegation's) is still possible, so this lock broke none.
    assert!(
        read_lease_possible(&e.path),
        "the shared lock opened for writing"
    );
    // No exclusive lock on a read open (NFS4ERR_OPENMODE, as knfsd).
    assert_eq!(
        more_lock(&s, &e, &a, l, true, 0, 10),
        Err(V4Error::OpenMode)
    );
    // The open upgraded: the owner's shared lock moves to a read-write
    // descriptor and becomes exclusive.
    let up = open(&s, &a, "o", F, ACCESS_BOTH, DENY_NONE).unwrap();
    assert_eq!(up.stateid.other, oa.other, "an upgrade of the same open");
    let l2 = more_lock(&s, &e, &a, l, true, 0, 10).unwrap();
    assert!(!read_lease_possible(&e.path), "now open for writing");
    let ob = open(&s, &b, "o", F, ACCESS_READ, DENY_NONE)
        .unwrap()
        .stateid;
    let d = denied(new_lock(&s, &e, &b, ob, "lo-b", false, 5, 1));
    assert_eq!((d.offset, d.length, d.write), (0, 10, true));
    // The shared lock on 10.. taken before the move is still held.
    s.locku(&a, &l2, F, 0, 10).unwrap();
    new_lock(&s, &e, &b, ob, "lo-b", false, 5, 1).unwrap();
}
