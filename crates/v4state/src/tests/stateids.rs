//! Stateid checks, TEST_STATEID, FREE_STATEID.

use super::*;
use crate::stateid::add_test_delegation;

#[test]
fn checks_give_the_rfc_errors() {
    let s = state();
    let (c, _) = handle(&s, "a");
    let o = open(&s, &c, "o", F, 1, 0).unwrap().stateid;
    let info = s.check_stateid(&c, &o, Some(F)).unwrap();
    assert_eq!((info.kind, info.file, info.seqid), (StateKind::Open, F, 1));
    // seqid 0 is "the current one".
    assert!(s
        .check_stateid(&c, &Stateid { seqid: 0, ..o }, None)
        .is_ok());
    let up = open(&s, &c, "o", F, 2, 0).unwrap().stateid;
    assert_eq!(up.other, o.other);
    assert_eq!(up.seqid, 2, "an upgrade bumps the seqid");
    assert_eq!(s.check_stateid(&c, &o, None), Err(V4Error::OldStateid));
    assert_eq!(
        s.check_stateid(&c, &Stateid { seqid: 3, ..o }, None),
        Err(V4Error::BadStateid),
        "a seqid never issued"
    );
    assert_eq!(
        s.check_stateid(&c, &up, Some(G)),
        Err(V4Error::BadStateid),
        "another file's"
    );
    let mut forged = up;
    forged.other[5] ^= 0x40;
    assert_eq!(s.check_stateid(&c, &forged, None), Err(V4Error::BadStateid));
    let mut stale = up;
    stale.other[..4].copy_from_slice(&8u32.to_be_bytes());
    assert_eq!(
        s.check_stateid(&c, &stale, None),
        Err(V4Error::StaleStateid)
    );
    for sp in [
        Stateid::ANONYMOUS,
        Stateid::BYPASS,
        Stateid::CURRENT,
        Stateid::INVALID,
    ] {
        assert_eq!(s.check_stateid(&c, &sp, None), Err(V4Error::BadStateid));
    }
    // Another client's stateid is unknown to this one.
    let (d, _) = handle(&s, "b");
    assert_eq!(s.check_stateid(&d, &up, None), Err(V4Error::BadStateid));
}

#[test]
fn test_stateid() {
    let s = state();
    let (c, _) = handle(&s, "a");
    let o = open(&s, &c, "o", F, 1, 0).unwrap().stateid;
    let mut stale = o;
    stale.other[0] ^= 1;
    let r = s.test_stateids(
        &c,
        &[o, Stateid { seqid: 9, ..o }, Stateid::ANONYMOUS, stale],
    );
    assert_eq!(
        r,
        vec![
            Ok(()),
            Err(V4Error::BadStateid),
            Err(V4Error::BadStateid),
            Err(V4Error::BadStateid),
        ]
    );
}

#[test]
fn free_stateid() {
    let s = state();
    let (c, _) = handle(&s, "a");
    let o = open(&s, &c, "o", F, 1, 0).unwrap().stateid;
    assert_eq!(s.free_stateid(&c, &o), Err(V4Error::LocksHeld), "an open");
    let d = add_test_delegation(&s, &c, G);
    assert_eq!(
        s.free_stateid(&c, &d),
        Err(V4Error::LocksHeld),
        "a delegation"
    );
    assert_eq!(s.counts().stateids, 2);
    s.close(&c, &o).unwrap();
    assert_eq!(s.free_stateid(&c, &o), Err(V4Error::BadStateid));
    assert_eq!(s.counts().stateids, 1);
}

#[test]
fn stateid_bounds() {
    let s = state_with(Config {
        limits: Limits {
            stateids_per_client: 2,
            total_stateids: 3,
            ..Limits::default()
        },
        ..Config::default()
    });
    let (c, _) = handle(&s, "a");
    let (d, _) = handle(&s, "b");
    let f = |n| FileKey { fsid: 1, fileid: n };
    open(&s, &c, "o", f(1), 1, 0).unwrap();
    open(&s, &c, "o", f(2), 1, 0).unwrap();
    assert_eq!(open(&s, &c, "o", f(3), 1, 0), Err(V4Error::Resource));
    open(&s, &d, "o", f(1), 1, 0).unwrap();
    assert_eq!(open(&s, &d, "o", f(2), 1, 0), Err(V4Error::Resource));
    let hits = s.counts().limit_hits;
    assert!(hits.contains(&(Limit::StateidsPerClient, 1)), "{hits:?}");
    assert!(hits.contains(&(Limit::TotalStateids, 1)), "{hits:?}");
    // A refused open holds nothing: no share reservation left behind.
    assert!(!s.share_denies(&f(3), 1));
    assert_eq!(s.counts().stateids, 3);
}
