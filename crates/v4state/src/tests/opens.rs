//! OPEN, OPEN_DOWNGRADE, CLOSE and share reservations across clients.

use super::*;
use crate::open::*;

#[test]
fn share_reservations_hold_across_clients() {
    let s = state();
    let (a, _) = handle(&s, "a");
    let (b, _) = handle(&s, "b");
    let o = open(&s, &a, "o", F, ACCESS_READ, DENY_WRITE).unwrap();
    assert!(!o.upgraded);
    assert_eq!(
        open(&s, &b, "o", F, ACCESS_WRITE, DENY_NONE),
        Err(V4Error::ShareDenied)
    );
    assert_eq!(
        open(&s, &a, "other owner", F, ACCESS_BOTH, DENY_NONE),
        Err(V4Error::ShareDenied),
        "another owner of the same client too"
    );
    // Reading alongside is fine; denying read to the reader is not.
    open(&s, &b, "o", F, ACCESS_READ, DENY_NONE).unwrap();
    assert_eq!(
        open(&s, &b, "p", F, ACCESS_READ, DENY_READ),
        Err(V4Error::ShareDenied)
    );
    // Other files are untouched.
    open(&s, &b, "o", G, ACCESS_WRITE, DENY_BOTH).unwrap();
    s.close(&a, &o.stateid).unwrap();
    open(&s, &b, "w", F, ACCESS_WRITE, DENY_NONE).unwrap();
    super::audit::audit(&s);
}

#[test]
fn upgrade_merges_and_checks_only_others() {
    let s = state();
    let (a, _) = handle(&s, "a");
    let o = open(&s, &a, "o", F, ACCESS_READ, DENY_WRITE).unwrap();
    // The owner's own deny-write does not stop its own write upgrade.
    let u = open(&s, &a, "o", F, ACCESS_WRITE, DENY_NONE).unwrap();
    assert!(u.upgraded);
    assert_eq!((u.access, u.deny), (ACCESS_BOTH, DENY_WRITE));
    assert_eq!(u.stateid.other, o.stateid.other);
    assert_eq!(u.stateid.seqid, 2);
    let (b, _) = handle(&s, "b");
    open(&s, &b, "o", F, ACCESS_READ, DENY_NONE).unwrap();
    assert_eq!(
        open(&s, &a, "o", F, ACCESS_READ, DENY_READ),
        Err(V4Error::ShareDenied),
        "the upgrade's new deny hits b's read"
    );
    assert_eq!(s.counts().stateids, 2);
    super::audit::audit(&s);
}

#[test]
fn downgrade_rules() {
    let s = state();
    let (a, _) = handle(&s, "a");
    let o1 = open(&s, &a, "o", F, ACCESS_READ, DENY_NONE).unwrap();
    let o2 = open(&s, &a, "o", F, ACCESS_WRITE, DENY_WRITE).unwrap();
    // BOTH/WRITE held; READ/NONE was asked by the first OPEN.
    assert_eq!(
        s.open_downgrade(&a, &o1.stateid, ACCESS_READ, DENY_NONE),
        Err(V4Error::OldStateid)
    );
    assert_eq!(
        s.open_downgrade(&a, &o2.stateid, ACCESS_BOTH, DENY_NONE),
        Err(V4Error::Inval),
        "BOTH was never asked for"
    );
    assert_eq!(
        s.open_downgrade(&a, &o2.stateid, ACCESS_READ, DENY_READ),
        Err(V4Error::Inval),
        "deny READ is not held"
    );
    let d = s
        .open_downgrade(&a, &o2.stateid, ACCESS_READ, DENY_NONE)
        .unwrap();
    assert_eq!(d.seqid, 3);
    // Now another client may write.
    let (b, _) = handle(&s, "b");
    open(&s, &b, "o", F, ACCESS_WRITE, DENY_NONE).unwrap();
    assert_eq!(
        s.open_downgrade(&a, &d, ACCESS_WRITE, DENY_NONE),
        Err(V4Error::Inval),
        "no longer held"
    );
    assert_eq!(s.open_downgrade(&a, &d, 0, DENY_NONE), Err(V4Error::Inval));
    super::audit::audit(&s);
}

#[test]
fn close_frees_owner_and_share() {
    let s = state();
    let (a, _) = handle(&s, "a");
    let o = open(&s, &a, "o", F, ACCESS_BOTH, DENY_BOTH).unwrap();
    assert!(s.share_denies(&F, ACCESS_READ));
    assert_eq!(
        s.close(
            &a,
            &Stateid {
                seqid: 2,
                ..o.stateid
            }
        ),
        Err(V4Error::BadStateid)
    );
    s.close(&a, &o.stateid).unwrap();
    assert!(!s.share_denies(&F, ACCESS_READ));
    assert_eq!(s.close(&a, &o.stateid), Err(V4Error::BadStateid));
    assert_eq!(s.counts().stateids, 0);
    // A new open of the owner starts over at seqid 1 with a new stateid.
    let n = open(&s, &a, "o", F, ACCESS_READ, DENY_NONE).unwrap();
    assert_ne!(n.stateid.other, o.stateid.other);
    assert_eq!(n.stateid.seqid, 1);
}

#[test]
fn open_owner_bound() {
    let s = state_with(Config {
        limits: Limits {
            open_owners_per_client: 1,
            ..Limits::default()
        },
        ..Config::default()
    });
    let (a, _) = handle(&s, "a");
    open(&s, &a, "o", F, 1, 0).unwrap();
    open(&s, &a, "o", G, 1, 0).unwrap();
    assert_eq!(open(&s, &a, "p", F, 1, 0), Err(V4Error::Resource));
    assert!(s
        .counts()
        .limit_hits
        .contains(&(Limit::OpenOwnersPerClient, 1)));
}

#[test]
fn bad_share_bits() {
    let s = state();
    let (a, _) = handle(&s, "a");
    assert_eq!(open(&s, &a, "o", F, 0, 0), Err(V4Error::Inval));
    assert_eq!(open(&s, &a, "o", F, 4, 0), Err(V4Error::Inval));
    assert_eq!(open(&s, &a, "o", F, 1, 4), Err(V4Error::Inval));
}

#[test]
fn io_checks() {
    let s = state();
    let (a, _) = handle(&s, "a");
    let r = open(&s, &a, "o", F, ACCESS_READ, DENY_WRITE)
        .unwrap()
        .stateid;
    assert_eq!(s.check_io(&a, &r, F, false), Ok(Some(StateKind::Open)));
    assert_eq!(s.check_io(&a, &r, F, true), Err(V4Error::OpenMode));
    assert_eq!(s.check_io(&a, &r, G, false), Err(V4Error::BadStateid));
    // Anonymous I/O meets the share reservation.
    assert_eq!(
        s.check_io(&a, &Stateid::ANONYMOUS, F, true),
        Err(V4Error::Locked)
    );
    assert_eq!(s.check_io(&a, &Stateid::ANONYMOUS, F, false), Ok(None));
    assert_eq!(s.check_io(&a, &Stateid::BYPASS, F, false), Ok(None));
    assert_eq!(
        s.check_io(&a, &Stateid::BYPASS, F, true),
        Err(V4Error::Locked)
    );
    assert_eq!(
        s.check_io(&a, &Stateid::CURRENT, F, false),
        Err(V4Error::BadStateid)
    );
    let w = open(&s, &a, "w", G, ACCESS_WRITE, DENY_NONE)
        .unwrap()
        .stateid;
    assert_eq!(s.check_io(&a, &w, G, true), Ok(Some(StateKind::Open)));
    assert_eq!(
        s.check_io(&a, &w, G, false),
        Ok(Some(StateKind::Open)),
        "write access reads too (knfsd's access_permit_read)"
    );
}

#[test]
fn reclaim_without_grace_is_no_grace() {
    let s = state();
    let (a, _) = handle(&s, "a");
    let r = s.open(
        &a,
        &OpenArgs {
            owner: b"o",
            file: F,
            access: 1,
            deny: 0,
            claim: Claim::Previous,
        },
    );
    assert_eq!(r, Err(V4Error::NoGrace));
}
