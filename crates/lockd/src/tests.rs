//! The lock manager on a real directory: the kernel's OFD locks decide.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rnfsd_fs::local::{LocalFs, LocalOptions};
use rnfsd_fs::lock::{LockKind, LockRange};
use rnfsd_fs::{Backend, Cred, Fh};

use super::*;

struct Env {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    fs: Arc<dyn Backend>,
    fh: Fh,
    m: Arc<LockManager>,
}

static ROOT: Cred = Cred {
    uid: 0,
    gid: 0,
    gids: Vec::new(),
};

fn env(grace: Option<Duration>) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, b"0123456789").unwrap();
    let fs: Arc<dyn Backend> =
        Arc::new(LocalFs::open(dir.path(), 7, LocalOptions::default()).unwrap());
    let (fh, _, _) = fs
        .lookup(&rnfsd_fs::Call::thread(&ROOT, false), &fs.root(), b"f")
        .unwrap();
    let limits = Limits {
        retry: Duration::from_millis(20),
        ..Limits::default()
    };
    Env {
        _dir: dir,
        path,
        fs,
        fh,
        m: LockManager::new(limits, grace),
    }
}

/// The address of test host `host` (named by a letter).
fn addr(host: &str) -> std::net::IpAddr {
    std::net::IpAddr::from([10, 0, 0, host.as_bytes()[0]])
}

fn owner(host: &str, svid: u32) -> Owner {
    Owner {
        addr: addr(host),
        oh: format!("{host}-{svid}").into_bytes(),
        svid,
    }
}

const X: LockKind = LockKind::Exclusive;
const S: LockKind = LockKind::Shared;

fn r(start: u64, len: u64) -> LockRange {
    LockRange { start, len }
}

fn req(o: &Owner, kind: LockKind, range: LockRange) -> LockReq {
    LockReq {
        owner: o.clone(),
        kind,
        range,
    }
}

/// A local program (another process) that tries an exclusive POSIX lock
/// on `path` without waiting and, if it got it, holds it until killed.
/// Returns the process and whether it locked.
fn local_lock(path: &std::path::Path) -> (std::process::Child, bool) {
    let script = "import fcntl, sys\nf = open(sys.argv[1], 'r+')\n\
                  fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n\
                  print('locked', flush=True)\nsys.stdin.read()\n";
    let mut c = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3 (the local program)");
    let mut line = String::new();
    use std::io::BufRead;
    let _ = std::io::BufReader::new(c.stdout.take().unwrap()).read_line(&mut line);
    (c, line.trim() == "locked")
}

/// A GRANTED callback that counts its calls.
fn counting_callback() -> (Arc<AtomicUsize>, Box<dyn FnOnce() + Send>) {
    let called = Arc::new(AtomicUsize::new(0));
    let c = called.clone();
    let then = Box::new(move || {
        c.fetch_add(1, Ordering::SeqCst);
    });
    (called, then)
}

/// Waits (at most 5 s) for `called` to be called.
fn wait_called(called: &AtomicUsize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while called.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "GRANTED never called");
        std::thread::sleep(Duration::from_millis(5));
    }
}

impl Env {
    fn file(&self) -> FileRef<'_> {
        FileRef {
            backend: &self.fs,
            cred: &ROOT,
            export: 7,
            fh: &self.fh,
        }
    }
    fn lock(&self, o: &Owner, k: LockKind, range: LockRange, block: bool) -> Outcome {
        self.lock_then(o, k, range, block, Box::new(|| {}))
    }
    fn lock_then(
        &self,
        o: &Owner,
        k: LockKind,
        range: LockRange,
        block: bool,
        then: Box<dyn FnOnce() + Send>,
    ) -> Outcome {
        self.m
            .lock(&self.file(), &req(o, k, range), block, false, then)
    }
    fn test(&self, o: &Owner, k: LockKind, range: LockRange) -> Outcome {
        self.m.test(&self.file(), &req(o, k, range))
    }
    fn share(&self, host: &str, access: u32, deny: u32) -> Outcome {
        let r = ShareReq {
            addr: addr(host),
            oh: b"1".to_vec(),
            access,
            deny,
        };
        self.m.share(&self.file(), &r, false)
    }
}

#[test]
fn owners_conflict_share_and_release() {
    let e = env(None);
    let (a, b) = (owner("a", 1), owner("b", 2));
    assert_eq!(e.lock(&a, X, r(0, 5), false), Outcome::Granted);
    // Not a's own lock to a: a may convert and extend.
    assert_eq!(e.test(&a, X, r(0, 10)), Outcome::Granted);
    assert_eq!(e.lock(&b, S, r(5, 5), false), Outcome::Granted);
    assert_eq!(e.lock(&b, S, r(4, 1), false), Outcome::Denied(None));
    match e.test(&b, S, r(0, 1)) {
        Outcome::Denied(Some(h)) => {
            assert!(h.exclusive);
            assert_eq!((h.svid, &h.oh[..], h.start, h.len), (1, &b"a-1"[..], 0, 5));
        }
        o => panic!("TEST: {o:?}"),
    }
    // Shared with shared is fine.
    assert_eq!(e.lock(&a, S, r(7, 1), false), Outcome::Granted);
    assert_eq!(e.m.unlock(7, &e.fh, &a, r(0, 0)), Outcome::Granted);
    assert_eq!(e.lock(&b, X, r(0, 5), false), Outcome::Granted);
    assert_eq!(
        e.m.counts().files,
        1,
        "a's descriptor went with its last lock"
    );
    e.m.free_client(addr("b"));
    assert_eq!(e.m.counts(), LockCounts::default());
    assert_eq!(e.lock(&a, X, r(0, 0), false), Outcome::Granted);
}

#[test]
fn local_programs_and_nfs_clients_see_each_other() {
    let e = env(None);
    let a = owner("a", 1);
    assert_eq!(e.lock(&a, X, r(0, 0), false), Outcome::Granted);
    // A local program (another process) meets the client's lock, then
    // takes its own POSIX lock once the client unlocked.
    let local = || local_lock(&e.path);
    let (mut c, locked) = local();
    assert!(!locked, "the local lock must conflict with the client's");
    let _ = c.wait();
    assert_eq!(e.m.unlock(7, &e.fh, &a, r(0, 0)), Outcome::Granted);
    let (mut holder, locked) = local();
    assert!(locked, "free after the client's unlock");
    // And the client now meets the local lock.
    assert_eq!(e.lock(&a, S, r(3, 1), false), Outcome::Denied(None));
    match e.test(&a, S, r(3, 1)) {
        Outcome::Denied(Some(h)) => assert_eq!((h.svid, h.oh.len()), (0, 0), "not an NLM owner"),
        o => panic!("{o:?}"),
    }
    let _ = holder.kill();
    let _ = holder.wait();
}

#[test]
fn a_blocked_lock_is_granted_when_freed_and_calls_back() {
    let e = env(None);
    let (a, b) = (owner("a", 1), owner("b", 2));
    assert_eq!(e.lock(&a, X, r(0, 0), false), Outcome::Granted);
    let (called, then) = counting_callback();
    assert_eq!(e.lock_then(&b, X, r(2, 2), true, then), Outcome::Blocked);
    // A retransmission is the same wait.
    assert_eq!(e.lock(&b, X, r(2, 2), true), Outcome::Blocked);
    assert_eq!(e.m.counts().waiters, 1);
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(called.load(Ordering::SeqCst), 0);
    assert_eq!(e.m.unlock(7, &e.fh, &a, r(0, 0)), Outcome::Granted);
    wait_called(&called);
    assert_eq!(e.m.counts().waiters, 0);
    assert_eq!(
        e.lock(&a, S, r(2, 1), false),
        Outcome::Denied(None),
        "b holds it now"
    );
    // Cancelled waits are forgotten.
    assert_eq!(e.lock(&a, S, r(3, 1), true), Outcome::Blocked);
    assert_eq!(e.m.cancel(7, &e.fh, &req(&a, S, r(3, 1))), Outcome::Granted);
    assert_eq!(e.m.counts().waiters, 0);
}

#[test]
fn a_wait_on_a_local_lock_is_retried_and_an_idle_retry_thread_sleeps() {
    let e = env(None);
    let passes = || e.m.wake.passes.load(Ordering::Relaxed);
    // Nothing waits: after its first pass the thread sleeps until kicked
    // (it used to pass every `retry`, 20 ms here).
    let deadline = Instant::now() + Duration::from_secs(5);
    while passes() == 0 {
        assert!(Instant::now() < deadline, "the retry thread never ran");
        std::thread::sleep(Duration::from_millis(5));
    }
    let idle = passes();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        passes() <= idle + 1,
        "{} passes while idle",
        passes() - idle
    );
    // A local program's lock: no unlock here kicks the thread, so the
    // wait is granted by a periodic retry once the program is gone.
    let (mut local, locked) = local_lock(&e.path);
    assert!(locked);
    let (called, then) = counting_callback();
    let b = owner("b", 2);
    assert_eq!(e.lock_then(&b, X, r(0, 1), true, then), Outcome::Blocked);
    let waiting = passes();
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        passes() >= waiting + 3,
        "a wait must be retried every `retry`"
    );
    assert_eq!(called.load(Ordering::SeqCst), 0);
    let _ = local.kill();
    let _ = local.wait();
    wait_called(&called);
    // Dropping the manager ends the thread (it holds no strong reference).
    let wake = Arc::downgrade(&e.m.wake);
    drop(e);
    let deadline = Instant::now() + Duration::from_secs(5);
    while wake.upgrade().is_some() {
        assert!(
            Instant::now() < deadline,
            "the retry thread outlived its manager"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn grace_period_refuses_all_but_reclaims() {
    let e = env(Some(Duration::from_millis(300)));
    let a = owner("a", 1);
    assert_eq!(e.lock(&a, X, r(0, 1), false), Outcome::Grace);
    assert_eq!(e.test(&a, X, r(0, 1)), Outcome::Grace);
    let reclaim = e.m.lock(
        &e.file(),
        &req(&a, X, r(0, 1)),
        false,
        true,
        Box::new(|| {}),
    );
    assert_eq!(reclaim, Outcome::Granted);
    std::thread::sleep(Duration::from_millis(350));
    assert_eq!(e.lock(&a, X, r(5, 1), false), Outcome::Granted);
}

#[test]
fn bounds_and_unrepresentable_ranges() {
    let e = env(None);
    let a = owner("a", 1);
    assert_eq!(e.lock(&a, X, r(u64::MAX - 1, 1), false), Outcome::FBig);
    assert_eq!(
        e.lock(&a, X, r(i64::MAX as u64, 1), false),
        Outcome::Granted
    );
    let small = LockManager::new(
        Limits {
            max_files: 1,
            ..Limits::default()
        },
        None,
    );
    let take = |o: &Owner| {
        small.lock(
            &e.file(),
            &req(o, S, r(100, 1)),
            false,
            false,
            Box::new(|| {}),
        )
    };
    assert_eq!(take(&owner("b", 1)), Outcome::Granted);
    assert_eq!(take(&owner("c", 1)), Outcome::NoLocks);
    // One client host cannot take the whole table.
    let per = LockManager::new(
        Limits {
            max_per_client: 2,
            ..Limits::default()
        },
        None,
    );
    let take = |o: &Owner| {
        per.lock(
            &e.file(),
            &req(o, S, r(200, 1)),
            false,
            false,
            Box::new(|| {}),
        )
    };
    assert_eq!(take(&owner("h", 1)), Outcome::Granted);
    assert_eq!(take(&owner("h", 2)), Outcome::Granted);
    assert_eq!(take(&owner("h", 3)), Outcome::NoLocks);
    assert_eq!(
        take(&owner("i", 1)),
        Outcome::Granted,
        "another host still can"
    );
    assert_eq!(
        per.unlock(7, &e.fh, &owner("h", 1), r(0, 0)),
        Outcome::Granted
    );
    assert_eq!(
        take(&owner("h", 3)),
        Outcome::Granted,
        "room again after an unlock"
    );
}

#[test]
fn share_reservations() {
    let e = env(None);
    // fsh4_access/fsh4_mode: 1 read, 2 write, 3 both.
    assert_eq!(e.share("a", 3, 2), Outcome::Granted);
    assert_eq!(e.share("b", 2, 0), Outcome::Denied(None));
    assert_eq!(e.share("b", 1, 0), Outcome::Granted);
    assert_eq!(e.share("c", 1, 1), Outcome::Denied(None));
    assert_eq!(e.m.unshare(7, &e.fh, addr("b"), b"1"), Outcome::Granted);
    assert_eq!(e.share("c", 1, 0), Outcome::Granted);
    e.m.free_client(addr("a"));
    assert_eq!(e.share("d", 3, 3), Outcome::Denied(None), "c reads");
}

/// Two clients that send the same caller name, owner handle and svid (two
/// VMs cloned from one image) are two owners: they conflict, and one's
/// UNLOCK or FREE_ALL leaves the other's locks alone.
#[test]
fn owners_are_keyed_by_the_callers_address() {
    let e = env(None);
    let same = |host: &str| Owner {
        addr: addr(host),
        oh: b"1@ubuntu".to_vec(),
        svid: 1,
    };
    let (a, b) = (same("a"), same("b"));
    assert_eq!(e.lock(&a, X, r(0, 10), false), Outcome::Granted);
    assert_eq!(e.lock(&b, X, r(5, 1), false), Outcome::Denied(None));
    assert!(matches!(e.test(&b, S, r(0, 1)), Outcome::Denied(Some(_))));
    assert_eq!(e.m.unlock(7, &e.fh, &b, r(0, 0)), Outcome::Granted);
    assert_eq!(e.lock(&b, X, r(20, 1), false), Outcome::Granted);
    assert_eq!(e.m.free_client(addr("b")), 1, "b's own descriptor");
    assert_eq!(
        e.lock(&b, X, r(5, 1), false),
        Outcome::Denied(None),
        "a's lock survives b's UNLOCK and FREE_ALL"
    );
    // An IPv4-mapped peer is the same client as its IPv4 address.
    let mapped = match addr("a") {
        std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        _ => unreachable!(),
    };
    assert_eq!(e.m.free_client(mapped.into()), 1);
    assert_eq!(e.lock(&b, X, r(5, 1), false), Outcome::Granted);
}

/// A share's handle is checked through the backend, and shares count in
/// the per-client bound.
#[test]
fn shares_are_checked_and_bounded_per_client() {
    let e = env(None);
    let mut junk = e.fh.clone();
    if let Some(b) = junk.0.last_mut() {
        *b ^= 0xff;
    }
    let sh = |oh: &str| ShareReq {
        addr: addr("a"),
        oh: oh.as_bytes().to_vec(),
        access: 1,
        deny: 0,
    };
    let junk_file = FileRef {
        fh: &junk,
        ..e.file()
    };
    assert_eq!(e.m.share(&junk_file, &sh("1"), false), Outcome::Stale);
    let per = LockManager::new(
        Limits {
            max_per_client: 2,
            ..Limits::default()
        },
        None,
    );
    assert_eq!(per.share(&e.file(), &sh("1"), false), Outcome::Granted);
    assert_eq!(per.share(&e.file(), &sh("2"), false), Outcome::Granted);
    assert_eq!(per.share(&e.file(), &sh("3"), false), Outcome::NoLocks);
    assert_eq!(
        per.share(&e.file(), &sh("2"), false),
        Outcome::Granted,
        "a share replacing the owner's own is no new one"
    );
    let other = ShareReq {
        addr: addr("b"),
        ..sh("1")
    };
    assert_eq!(per.share(&e.file(), &other, false), Outcome::Granted);
    assert_eq!(
        per.lock(
            &e.file(),
            &req(&owner("a", 1), S, r(0, 1)),
            false,
            false,
            Box::new(|| {})
        ),
        Outcome::NoLocks,
        "shares count with locks"
    );
}

/// The grace period's clock starts when the server listens; a reclaim is
/// granted only within it (after it, Linux lockd answers
/// NLM4_DENIED_GRACE_PERIOD: the range may have been another's meanwhile).
#[test]
fn grace_starts_when_listening_and_late_reclaims_are_refused() {
    let e = env(None);
    let m = LockManager::with_hosts(Limits::default(), Some(Duration::from_millis(200)), None, 1);
    let a = owner("a", 1);
    let reclaim = |o: &Owner, start| {
        m.lock(
            &e.file(),
            &req(o, X, r(start, 1)),
            false,
            true,
            Box::new(|| {}),
        )
    };
    std::thread::sleep(Duration::from_millis(300));
    assert!(m.in_grace(), "the clock runs only once listening");
    m.start_grace();
    assert_eq!(reclaim(&a, 0), Outcome::Granted);
    std::thread::sleep(Duration::from_millis(300));
    assert!(!m.in_grace());
    assert_eq!(reclaim(&a, 1), Outcome::Grace, "a reclaim after grace");
    let share = ShareReq {
        addr: addr("a"),
        oh: b"1".to_vec(),
        access: 1,
        deny: 0,
    };
    assert_eq!(m.share(&e.file(), &share, true), Outcome::Grace);
    assert_eq!(
        m.lock(
            &e.file(),
            &req(&a, X, r(1, 1)),
            false,
            false,
            Box::new(|| {})
        ),
        Outcome::Granted
    );
}

/// The hosts list keeps the clients that hold something: a client that
/// let go of its last lock, wait or share leaves it, and hosts of the
/// previous run that reclaimed nothing are pruned.
#[test]
fn hosts_that_hold_nothing_leave_the_list() {
    let e = env(None);
    let d = tempfile::tempdir().unwrap();
    let note = |m: &LockManager, who: &str| {
        m.note_host(hosts::Host {
            name: who.as_bytes().to_vec(),
            addr: addr(who),
            server: "10.9.9.9".parse().unwrap(),
        })
    };
    {
        let (h, _, _) = hosts::Hosts::load(d.path()).unwrap();
        h.add(hosts::Host {
            name: b"old".to_vec(),
            addr: addr("o"),
            server: "10.9.9.9".parse().unwrap(),
        });
        assert!(h.sync(Duration::from_secs(10)));
    }
    let (h, before, state) = hosts::Hosts::load(d.path()).unwrap();
    assert_eq!(before.len(), 1);
    let m = LockManager::with_hosts(Limits::default(), None, Some(h), state);
    let listed = || -> Vec<std::net::IpAddr> {
        m.hosts
            .as_ref()
            .unwrap()
            .list()
            .iter()
            .map(|h| h.addr)
            .collect()
    };
    let lock = |o: &Owner, range, block| {
        m.lock(&e.file(), &req(o, X, range), block, false, Box::new(|| {}))
    };
    let (a, b) = (owner("a", 1), owner("b", 1));
    note(&m, "z");
    assert_eq!(listed(), [addr("o")], "z holds nothing: not remembered");
    assert_eq!(lock(&a, r(0, 1), false), Outcome::Granted);
    note(&m, "a");
    assert_eq!(lock(&b, r(0, 1), true), Outcome::Blocked);
    note(&m, "b");
    assert_eq!(listed(), [addr("a"), addr("b"), addr("o")]);
    assert_eq!(m.cancel(7, &e.fh, &req(&b, X, r(0, 1))), Outcome::Granted);
    let deadline = Instant::now() + Duration::from_secs(5);
    while listed().contains(&addr("b")) {
        assert!(
            Instant::now() < deadline,
            "b's cancelled wait kept it listed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(m.unlock(7, &e.fh, &a, r(0, 0)), Outcome::Granted);
    assert_eq!(listed(), [addr("o")]);
    let share = ShareReq {
        addr: addr("a"),
        oh: b"1".to_vec(),
        access: 1,
        deny: 0,
    };
    assert_eq!(m.share(&e.file(), &share, false), Outcome::Granted);
    note(&m, "a");
    assert_eq!(m.unshare(7, &e.fh, addr("a"), b"1"), Outcome::Granted);
    assert_eq!(listed(), [addr("o")]);
    assert_eq!(m.prune_hosts(), 1);
    assert!(listed().is_empty());
    assert!(m.sync_hosts(Duration::from_secs(10)));
    drop(m);
    let (_, before, _) = hosts::Hosts::load(d.path()).unwrap();
    assert!(before.is_empty(), "{before:?}");
}

/// A range whose end is past `i64::MAX` reaches the end of the file (as
/// Linux lockd clamps it to OFFSET_MAX), rather than NLM4_FBIG: UNLOCK of
/// (0, 2^64-1) is the whole file.
#[test]
fn ranges_past_off_t_reach_the_end_of_the_file() {
    let e = env(None);
    let (a, b) = (owner("a", 1), owner("b", 1));
    assert_eq!(e.lock(&a, X, r(0, u64::MAX), false), Outcome::Granted);
    assert_eq!(e.lock(&b, S, r(1 << 40, 1), false), Outcome::Denied(None));
    assert_eq!(e.m.unlock(7, &e.fh, &a, r(0, u64::MAX)), Outcome::Granted);
    assert_eq!(e.m.counts().files, 0, "all of a's locks went");
    let max = i64::MAX as u64;
    assert_eq!(e.lock(&a, X, r(5, max), false), Outcome::Granted);
    match e.test(&b, S, r(max, 1)) {
        Outcome::Denied(Some(h)) => assert_eq!((h.start, h.len), (5, 0), "to the end"),
        o => panic!("TEST: {o:?}"),
    }
    assert_eq!(e.lock(&b, X, r(max + 1, 1), false), Outcome::FBig);
}

/// UNLOCK cancels the owner's blocked requests within its range (Linux's
/// nlmsvc_unlock cancels the blocked lock): a late grant must not take
/// back a range the client let go.
#[test]
fn unlock_cancels_the_owners_waits() {
    let e = env(None);
    let (a, b) = (owner("a", 1), owner("b", 2));
    assert_eq!(e.lock(&a, X, r(0, 10), false), Outcome::Granted);
    let (called, then) = counting_callback();
    assert_eq!(e.lock_then(&b, X, r(2, 2), true, then), Outcome::Blocked);
    let c = owner("c", 3);
    assert_eq!(e.lock(&c, X, r(20, 1), false), Outcome::Granted);
    let (other, then) = counting_callback();
    assert_eq!(e.lock_then(&b, X, r(20, 1), true, then), Outcome::Blocked);
    assert_eq!(e.m.unlock(7, &e.fh, &b, r(0, 10)), Outcome::Granted);
    assert_eq!(e.m.counts().waiters, 1, "only the wait within 0..10 went");
    assert_eq!(e.m.unlock(7, &e.fh, &a, r(0, 0)), Outcome::Granted);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(called.load(Ordering::SeqCst), 0, "granted after its UNLOCK");
    assert_eq!(e.lock(&c, X, r(2, 2), false), Outcome::Granted);
    assert_eq!(e.m.unlock(7, &e.fh, &c, r(20, 1)), Outcome::Granted);
    wait_called(&other);
}

/// A blocking LOCK by an owner with no descriptor yet races the retry
/// pass, which closes descriptors that hold nothing and that nobody waits
/// on: the request's new descriptor is such a one until the request
/// blocks, and closing it under the request answered it `Failed`.
#[test]
fn a_new_owners_blocking_lock_survives_the_retry_pass() {
    let e = Arc::new(env(None));
    let a = owner("a", 1);
    assert_eq!(e.lock(&a, X, r(0, 10), false), Outcome::Granted);
    // One waiter, so every retry pass looks at the descriptors.
    assert_eq!(e.lock(&owner("w", 1), X, r(0, 1), true), Outcome::Blocked);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let passes = {
        let (e, stop) = (e.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                e.m.retry_waiters();
                n += 1;
            }
            n
        })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut tried = 0;
    while tried < 3000 && Instant::now() < deadline {
        let o = owner("b", 100 + tried);
        let got = e.lock(&o, X, r(5, 1), true);
        assert_eq!(got, Outcome::Blocked, "owner {tried}");
        assert_eq!(e.m.unlock(7, &e.fh, &o, r(5, 1)), Outcome::Granted);
        tried += 1;
    }
    stop.store(true, Ordering::Relaxed);
    assert!(passes.join().unwrap() > 0);
    assert!(tried > 100, "only {tried} tries in 20 s");
}

/// Locks, waits and shares of an export or client a reload dropped are
/// freed; the others stay.
#[test]
fn locks_of_dropped_exports_and_clients_are_freed() {
    let e = env(None);
    let (a, b) = (owner("a", 1), owner("b", 1));
    assert_eq!(e.lock(&a, X, r(0, 1), false), Outcome::Granted);
    assert_eq!(e.lock(&b, X, r(5, 1), false), Outcome::Granted);
    assert_eq!(e.lock(&b, X, r(0, 1), true), Outcome::Blocked);
    assert_eq!(e.share("a", 1, 0), Outcome::Granted);
    // b is no longer listed.
    assert_eq!(e.m.release_where(|_, who| who != addr("b")), 1);
    assert_eq!(
        e.m.counts(),
        LockCounts {
            files: 1,
            ranges: 1,
            waiters: 0,
            shares: 1
        }
    );
    assert_eq!(e.lock(&owner("c", 1), X, r(5, 1), false), Outcome::Granted);
    // Export 7 is gone.
    assert_eq!(e.m.release_where(|export, _| export != 7), 2);
    assert_eq!(e.m.counts(), LockCounts::default());
}

#[test]
fn a_shared_grace_period_holds_new_locks_back_until_it_ends() {
    let e = env(None);
    let m = LockManager::with_hosts(Limits::default(), None, None, 1);
    m.start_grace();
    let other = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let o = other.clone();
    m.share_grace(Box::new(move || {
        o.load(std::sync::atomic::Ordering::Relaxed)
    }));
    let a = owner("a", 1);
    let lock = |reclaim| {
        m.lock(
            &e.file(),
            &req(&a, X, r(0, 1)),
            false,
            reclaim,
            Box::new(|| {}),
        )
    };
    assert!(
        m.in_grace() && m.grace_left().is_none(),
        "the other's grace only"
    );
    assert_eq!(
        lock(false),
        Outcome::Grace,
        "a new lock in the shared grace"
    );
    other.store(false, std::sync::atomic::Ordering::Relaxed);
    assert!(!m.in_grace());
    assert_eq!(lock(false), Outcome::Granted);
}
