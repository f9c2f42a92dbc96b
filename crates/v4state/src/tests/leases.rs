//! Leases, the reaper, revocation.

use std::time::Instant;

use super::locks::{new_lock, Env};
use super::*;
use crate::open::*;

#[test]
fn expired_client_state_is_freed_in_batches() {
    let e = Env::new();
    let s = state();
    let (a, sa) = handle(&s, "a");
    let (b, sb) = handle(&s, "b");
    let oa = open(&s, &a, "o", F, ACCESS_BOTH, DENY_WRITE)
        .unwrap()
        .stateid;
    for n in 0..4 {
        open(&s, &a, "o", FileKey { fsid: 2, fileid: n }, 1, 0).unwrap();
    }
    new_lock(&s, &e, &a, oa, "lo", true, 0, 10).unwrap();
    assert_eq!(s.counts().stateids, 6);
    // b keeps renewing; a goes quiet.
    for i in 0..3 {
        s.clock.advance(Duration::from_secs(40));
        ticket(&s, sb, 0, 2 + i).finish(None).unwrap();
    }
    let r = s.reap(2);
    assert_eq!(r.expired, 1);
    assert!(r.freed >= 2 && r.freed <= 4, "{r:?}");
    assert_eq!(r.finished, 0);
    assert_eq!(seq(&s, sa, 0, 2, 2).unwrap_err(), V4Error::BadSession);
    assert_eq!(s.client(a.id()).unwrap_err(), V4Error::StaleClientId);
    assert!(s.counts().doomed_clients == 1);
    let mut passes = 1;
    while s.counts().doomed_clients > 0 {
        let r = s.reap(2);
        assert!(r.freed <= 3, "bounded: {r:?}");
        passes += 1;
        assert!(passes < 10);
    }
    assert!(passes >= 3);
    assert_eq!(s.counts().stateids, 0);
    assert_eq!(s.counts().clients_expired, 1);
    // a's share and lock are gone: b may write-open and lock.
    let ob = open(&s, &b, "o", F, ACCESS_BOTH, DENY_NONE)
        .unwrap()
        .stateid;
    new_lock(&s, &e, &b, ob, "lo", true, 0, 10).unwrap();
    // a's handle, kept from before, sees EXPIRED.
    assert_eq!(open(&s, &a, "o", G, 1, 0), Err(V4Error::Expired));
    assert_eq!(s.check_stateid(&a, &oa, None), Err(V4Error::Expired));
    super::audit::audit(&s);
}

#[test]
fn a_running_request_holds_the_lease() {
    let s = state();
    let (_, c) = client_with_session(&s, "a");
    let t = ticket(&s, c.sessionid, 0, 1);
    s.clock.advance(Duration::from_secs(200));
    assert_eq!(s.reap(10).expired, 0, "a request of it runs");
    t.finish(None).unwrap();
    s.clock.advance(Duration::from_secs(60));
    assert_eq!(s.reap(10).expired, 0, "finishing renewed it");
    s.clock.advance(Duration::from_secs(31));
    assert_eq!(s.reap(10).expired, 1);
}

#[test]
fn unconfirmed_records_expire() {
    let s = state();
    let e = exid(&s, "a", 1, "p").unwrap();
    s.clock.advance(Duration::from_secs(91));
    assert_eq!(s.reap(10).expired, 1);
    assert_eq!(s.client(e.clientid).unwrap_err(), V4Error::StaleClientId);
    assert_eq!(s.counts().clients, 0);
}

#[test]
fn reaper_thread_expires_and_frees() {
    let s = state_with(Config {
        lease_time: Duration::from_millis(100),
        ..Config::default()
    });
    let (a, _) = handle(&s, "a");
    open(&s, &a, "o", F, 1, 3).unwrap();
    let _r = s.spawn_reaper(Duration::from_millis(20), 16).unwrap();
    let t = Instant::now();
    while s.counts().stateids > 0 || s.counts().clients > 0 {
        assert!(t.elapsed() < Duration::from_secs(10), "reaper did not run");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!s.share_denies(&F, ACCESS_READ));
}

#[test]
fn admin_revocation() {
    let e = Env::new();
    let s = state();
    let (a, sa) = handle(&s, "a");
    let (b, _) = handle(&s, "b");
    let o = open(&s, &a, "o", F, ACCESS_BOTH, DENY_BOTH)
        .unwrap()
        .stateid;
    let l = new_lock(&s, &e, &a, o, "lo", true, 0, 10).unwrap();
    let other = open(&s, &a, "o", G, 1, 0).unwrap().stateid;
    assert_eq!(s.revoke_files(|f| *f == F), 2);
    assert_eq!(s.check_stateid(&a, &o, None), Err(V4Error::AdminRevoked));
    assert_eq!(
        s.test_stateids(&a, &[o, l, other]),
        vec![
            Err(V4Error::AdminRevoked),
            Err(V4Error::AdminRevoked),
            Ok(())
        ]
    );
    let t = ticket(&s, sa, 0, 2);
    assert_eq!(t.status_flags, seq_status::ADMIN_STATE_REVOKED);
    drop(t);
    // Its share and lock are gone at once.
    let ob = open(&s, &b, "o", F, ACCESS_BOTH, DENY_NONE)
        .unwrap()
        .stateid;
    new_lock(&s, &e, &b, ob, "lo", true, 0, 10).unwrap();
    // FREE_STATEID clears them; then the flag goes.
    s.free_stateid(&a, &l).unwrap();
    s.free_stateid(&a, &o).unwrap();
    let t = ticket(&s, sa, 0, 3);
    assert_eq!(t.status_flags, 0);
    assert_eq!(s.counts().stateids, 3);
    super::audit::audit(&s);
}
