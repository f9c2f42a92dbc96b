//! Client records across a restart, the grace period, RECLAIM_COMPLETE.

use std::path::Path;

use super::locks::Env;
use super::*;
use crate::lock::*;
use crate::open::*;

fn at(dir: &Path) -> Arc<State> {
    let cfg = Config {
        grace_time: Duration::from_secs(10),
        ..Config::default()
    };
    State::with_records(cfg, dir).unwrap()
}

fn reclaim(s: &State, c: &ClientHandle, owner: &str, file: FileKey) -> Result<Opened, V4Error> {
    s.open(
        c,
        &OpenArgs {
            owner: owner.as_bytes(),
            file,
            access: ACCESS_BOTH,
            deny: DENY_NONE,
            claim: Claim::Previous,
        },
    )
}

#[test]
fn records_follow_clients() {
    let d = tempfile::tempdir().unwrap();
    let s = at(d.path());
    let owners = || s.records.as_ref().unwrap().owners().unwrap();
    let e = exid(&s, "a", 1, "p").unwrap();
    assert!(owners().is_empty(), "unconfirmed clients are not recorded");
    let p = who("p");
    let cs = s
        .create_session(&cs_args(e.clientid, e.sequenceid, &p))
        .unwrap();
    assert_eq!(owners(), vec![(e.clientid, b"a".to_vec())]);
    // A restarted client's record replaces the old one; the old one's
    // reaping does not remove it.
    let n = exid(&s, "a", 2, "p").unwrap();
    s.create_session(&cs_args(n.clientid, n.sequenceid, &p))
        .unwrap();
    s.reap(100);
    assert_eq!(owners(), vec![(n.clientid, b"a".to_vec())]);
    assert_eq!(
        s.destroy_session(&cs.sessionid, false),
        Err(V4Error::BadSession)
    );
    // Expiry removes it.
    s.clock.advance(Duration::from_secs(91));
    s.reap(100);
    assert!(owners().is_empty());
}

#[test]
fn record_write_failure_is_serverfault() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("v4");
    let s = at(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    let e = exid(&s, "a", 1, "p").unwrap();
    let p = who("p");
    assert_eq!(
        s.create_session(&cs_args(e.clientid, e.sequenceid, &p)),
        Err(V4Error::ServerFault)
    );
    std::fs::create_dir(&dir).unwrap();
    s.create_session(&cs_args(e.clientid, e.sequenceid, &p))
        .unwrap();
}

#[test]
fn restart_grace_and_reclaims() {
    let env = Env::new();
    let d = tempfile::tempdir().unwrap();
    let (old_id, old_open) = {
        let s = at(d.path());
        s.start_grace();
        assert!(!s.counts().in_grace, "no client known: no grace");
        let (a, _) = handle(&s, "a");
        handle(&s, "b");
        handle(&s, "gone");
        let o = open(&s, &a, "o", F, ACCESS_BOTH, DENY_NONE).unwrap();
        (a.id(), o.stateid)
    };
    let s = at(d.path());
    assert_ne!(s.boot(), old_id.boot());
    assert!(s.counts().in_grace, "before start, only reclaims");
    s.start_grace();
    assert!(s.grace().in_grace());
    // The old instance's ids are stale.
    assert_eq!(s.client(old_id).unwrap_err(), V4Error::StaleClientId);
    let (a, _) = handle(&s, "a");
    assert_eq!(
        s.check_stateid(&a, &old_open, None),
        Err(V4Error::StaleStateid)
    );
    // A known client reclaims; new state waits.
    let o = reclaim(&s, &a, "o", F).unwrap().stateid;
    assert_eq!(open(&s, &a, "n", G, 1, 0), Err(V4Error::Grace));
    let l = s.lock(
        &a,
        &LockArgs {
            locker: Locker4::New {
                open: o,
                owner: b"lo",
            },
            file: F,
            write: true,
            offset: 0,
            length: 10,
            reclaim: true,
        },
        &env.opener(),
    );
    assert!(l.is_ok(), "{l:?}");
    let mut plain = LockArgs {
        locker: Locker4::Existing(l.unwrap()),
        file: F,
        write: true,
        offset: 20,
        length: 1,
        reclaim: false,
    };
    assert_eq!(s.lock(&a, &plain, &env.opener()), Err(V4Error::Grace));
    let lt = LocktArgs {
        owner: b"x",
        file: F,
        write: false,
        offset: 0,
        length: 1,
    };
    assert_eq!(s.lockt(&a, &lt, &env.opener()), Err(V4Error::Grace));
    assert_eq!(
        s.check_io(&a, &Stateid::ANONYMOUS, F, false),
        Err(V4Error::Grace)
    );
    // An unknown client may not reclaim.
    let (c, _) = handle(&s, "c");
    assert_eq!(reclaim(&s, &c, "o", G), Err(V4Error::ReclaimBad));
    // RECLAIM_COMPLETE: a is done; b and "gone" are still awaited.
    s.reclaim_complete(&a, false).unwrap();
    assert_eq!(s.reclaim_complete(&a, false), Err(V4Error::CompleteAlready));
    assert_eq!(reclaim(&s, &a, "o2", G), Err(V4Error::NoGrace));
    assert!(s.grace().in_grace());
    let (b, _) = handle(&s, "b");
    s.reclaim_complete(&b, true).unwrap();
    assert!(s.grace().in_grace(), "rca_one_fs changes nothing");
    s.reclaim_complete(&b, false).unwrap();
    assert!(s.grace().in_grace(), "\"gone\" has not come back");
    s.clock.advance(Duration::from_secs(11));
    assert!(!s.grace().in_grace(), "the time limit");
    // Now new state is fine and reclaims are over.
    open(&s, &b, "n", G, 1, 0).unwrap();
    plain.locker = Locker4::Existing(Stateid {
        seqid: 0,
        ..plain.locker_stateid()
    });
    assert!(s.lock(&a, &plain, &env.opener()).is_ok());
    assert_eq!(reclaim(&s, &b, "o", G), Err(V4Error::NoGrace));
    // The reaper removes the records of clients that did not come back.
    s.reap(10);
    let owners: Vec<Vec<u8>> = s
        .records
        .as_ref()
        .unwrap()
        .owners()
        .unwrap()
        .into_iter()
        .map(|r| r.1)
        .collect();
    let mut want = vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()];
    want.sort();
    let mut got = owners;
    got.sort();
    assert_eq!(got, want);
}

#[test]
fn grace_ends_when_all_known_clients_complete() {
    let d = tempfile::tempdir().unwrap();
    {
        let s = at(d.path());
        handle(&s, "a");
    }
    let s = at(d.path());
    s.start_grace();
    let (a, _) = handle(&s, "a");
    assert!(s.grace().in_grace());
    assert!(!a.reclaim_completed());
    s.reclaim_complete(&a, true).unwrap();
    assert!(!a.reclaim_completed(), "rca_one_fs is not the whole client");
    s.reclaim_complete(&a, false).unwrap();
    assert!(a.reclaim_completed());
    assert!(!s.grace().in_grace());
    let (b, _) = handle(&s, "b");
    open(&s, &b, "o", F, 1, 0).unwrap();
}

impl LockArgs<'_> {
    fn locker_stateid(&self) -> Stateid {
        match self.locker {
            Locker4::Existing(s) => s,
            Locker4::New { open, .. } => open,
        }
    }
}
