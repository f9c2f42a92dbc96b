//! Delegations: when one is granted, the conflicts that recall it,
//! DELEGRETURN, revocation past the deadline, the bounds.

use super::*;
use crate::deleg::NoDeleg;
use crate::open::*;
use crate::session::seq_status;

/// A client whose back channel answered.
fn cb_client(s: &State, owner: &str) -> ClientHandle {
    let (h, _) = handle(s, owner);
    s.set_callback_down(&h, false);
    h
}

fn read_deleg(s: &State, c: &ClientHandle, owner: &str, file: FileKey) -> Stateid {
    open(s, c, owner, file, ACCESS_READ, DENY_NONE).unwrap();
    s.delegate(c, file, false, b"fh").unwrap()
}

#[test]
fn granted_only_with_a_back_channel_and_no_writer() {
    let s = state();
    let (a, _) = handle(&s, "a");
    open(&s, &a, "o", F, ACCESS_READ, DENY_NONE).unwrap();
    assert_eq!(
        s.delegate(&a, F, false, b"fh"),
        Err(NoDeleg::CallbackDown),
        "no CB_NULL answered yet"
    );
    s.set_callback_down(&a, true);
    assert_eq!(s.delegate(&a, F, false, b"fh"), Err(NoDeleg::CallbackDown));
    s.set_callback_down(&a, false);
    let d = s.delegate(&a, F, false, b"fh").unwrap();
    assert_eq!(s.delegate(&a, F, false, b"fh"), Err(NoDeleg::Held));
    assert_eq!(
        s.check_stateid(&a, &d, Some(F)).unwrap().kind,
        StateKind::Delegation
    );
    // Another client writing G: no read delegation on G.
    let b = cb_client(&s, "b");
    open(&s, &b, "w", G, ACCESS_WRITE, DENY_NONE).unwrap();
    open(&s, &a, "o", G, ACCESS_READ, DENY_NONE).unwrap();
    assert_eq!(s.delegate(&a, G, false, b"g"), Err(NoDeleg::Contention));
    // A write delegation only for the only opener.
    assert_eq!(s.delegate(&b, G, true, b"g"), Err(NoDeleg::Contention));
    let h = FileKey {
        fsid: 1,
        fileid: 300,
    };
    open(&s, &b, "w", h, ACCESS_BOTH, DENY_NONE).unwrap();
    let w = s.delegate(&b, h, true, b"h").unwrap();
    assert_eq!(s.counts().delegations, 2);
    s.delegreturn(&b, &w, h).unwrap();
    assert_eq!(s.counts().delegations, 1);
    super::audit::audit(&s);
}

#[test]
fn a_conflict_recalls_once_and_waits_for_the_return() {
    let s = state();
    let a = cb_client(&s, "a");
    let b = cb_client(&s, "b");
    let d = read_deleg(&s, &a, "o", F);
    // The holder's own accesses do not conflict (pynfs DELEG23).
    drop(s.begin_access(F, Some(a.id()), true).unwrap());
    // Another client's read does not conflict with a read delegation.
    drop(s.begin_access(F, Some(b.id()), false).unwrap());
    let r = s.begin_access(F, Some(b.id()), true).unwrap_err();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].stateid, d);
    assert_eq!(r[0].client.id(), a.id());
    assert_eq!(&r[0].fh[..], b"fh");
    // Asked again: still held, no second recall. NFSv3 (no client) too.
    assert!(s
        .begin_access(F, Some(b.id()), true)
        .unwrap_err()
        .is_empty());
    assert!(s.begin_access(F, None, true).unwrap_err().is_empty());
    assert_eq!(s.counts().recalls, 1);
    // The wrong file, or an open stateid, is not returned.
    assert_eq!(s.delegreturn(&a, &d, G), Err(V4Error::BadStateid));
    s.delegreturn(&a, &d, F).unwrap();
    assert_eq!(s.delegreturn(&a, &d, F), Err(V4Error::BadStateid));
    let acc = s.begin_access(F, None, true).unwrap();
    // No delegation while an access is in progress, nor (contention)
    // soon after a recall.
    assert_eq!(s.delegate(&a, F, false, b"fh"), Err(NoDeleg::Contention));
    drop(acc);
    assert_eq!(s.delegate(&a, F, false, b"fh"), Err(NoDeleg::Contention));
    s.clock
        .advance(Duration::from_millis(crate::deleg::RECALL_BACKOFF_MS + 1));
    s.renew(&a);
    s.delegate(&a, F, false, b"fh").unwrap();
    super::audit::audit(&s);
}

#[test]
fn an_access_in_progress_blocks_a_grant() {
    let s = state();
    let a = cb_client(&s, "a");
    let acc = s.begin_access(F, None, true).unwrap();
    open(&s, &a, "o", F, ACCESS_READ, DENY_NONE).unwrap();
    assert_eq!(s.delegate(&a, F, false, b"fh"), Err(NoDeleg::Contention));
    drop(acc);
    s.delegate(&a, F, false, b"fh").unwrap();
}

#[test]
fn a_quick_access_holds_off_the_first_grant_and_none_is_quick_after() {
    let s = state();
    let a = cb_client(&s, "a");
    open(&s, &a, "o", F, ACCESS_READ, DENY_NONE).unwrap();
    // No delegation anywhere: a change needs no file lookup.
    let q = s.quick_access(7).expect("quick with no delegation");
    assert_eq!(s.delegate(&a, F, false, b"fh"), Err(NoDeleg::Contention));
    assert_eq!(s.counts().delegations, 0, "the declined grant is undone");
    drop(q);
    let d = s.delegate(&a, F, false, b"fh").unwrap();
    // From the first delegation on, every access goes by the table.
    assert!(s.quick_access(7).is_none());
    assert!(s.quick_access(8).is_none());
    s.delegreturn(&a, &d, F).unwrap();
    drop(s.quick_access(7).expect("quick again once none is held"));
    super::audit::audit(&s);
}

#[test]
fn quick_accesses_and_grants_race_without_a_miss() {
    // Each side: a change that saw no delegation and a grant that saw no
    // quick change may not both go on at once.
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    let s = state();
    let a = cb_client(&s, "a");
    open(&s, &a, "o", F, ACCESS_READ, DENY_NONE).unwrap();
    let stop = AtomicBool::new(false);
    let inside = AtomicUsize::new(0);
    let grants = AtomicUsize::new(0);
    let granted = AtomicBool::new(false);
    std::thread::scope(|sc| {
        for t in 0..2u64 {
            let (s, stop, inside, granted) = (&s, &stop, &inside, &granted);
            sc.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(q) = s.quick_access(t) {
                        inside.fetch_add(1, Ordering::SeqCst);
                        assert!(
                            !granted.load(Ordering::SeqCst),
                            "a quick change under a delegation"
                        );
                        inside.fetch_sub(1, Ordering::SeqCst);
                        drop(q);
                    }
                }
            });
        }
        for _ in 0..2000 {
            if let Ok(d) = s.delegate(&a, F, false, b"fh") {
                granted.store(true, Ordering::SeqCst);
                grants.fetch_add(1, Ordering::Relaxed);
                assert_eq!(
                    inside.load(Ordering::SeqCst),
                    0,
                    "a grant during a quick change"
                );
                granted.store(false, Ordering::SeqCst);
                s.delegreturn(&a, &d, F).unwrap();
                s.clock
                    .advance(Duration::from_millis(crate::deleg::RECALL_BACKOFF_MS + 1));
                s.renew(&a);
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(
        grants.load(Ordering::Relaxed) > 0,
        "no grant ever drained the quick changes"
    );
}

#[test]
fn not_returned_in_time_is_revoked() {
    let s = state();
    let a = cb_client(&s, "a");
    let b = cb_client(&s, "b");
    let d = read_deleg(&s, &a, "o", F);
    assert_eq!(s.begin_access(F, Some(b.id()), true).unwrap_err().len(), 1);
    s.clock.advance(Duration::from_secs(60));
    s.renew(&a);
    s.renew(&b);
    assert_eq!(s.reap(100).expired, 0);
    assert!(
        s.begin_access(F, Some(b.id()), true).is_err(),
        "lease not over"
    );
    s.clock.advance(Duration::from_secs(31));
    s.renew(&a);
    s.renew(&b);
    // The reaper revokes it; the access goes on.
    s.reap(100);
    assert_eq!(s.counts().delegations_revoked, 1);
    assert_eq!(s.counts().delegations, 0);
    drop(s.begin_access(F, Some(b.id()), true).unwrap());
    assert_eq!(s.check_stateid(&a, &d, None), Err(V4Error::DelegRevoked));
    assert_eq!(s.test_stateids(&a, &[d]), vec![Err(V4Error::DelegRevoked)]);
    assert_eq!(
        s.check_io(&a, &d, F, false),
        Err(V4Error::DelegRevoked),
        "READ with it"
    );
    let (admin, deleg) = s.has_revoked(&a.0);
    assert!(deleg && !admin);
    assert_eq!(s.client_status(&a.0), seq_status::RECALLABLE_STATE_REVOKED);
    s.free_stateid(&a, &d).unwrap();
    assert_eq!(s.client_status(&a.0), 0);
    super::audit::audit(&s);
}

#[test]
fn an_overdue_recall_is_revoked_by_the_conflicting_call_too() {
    let s = state();
    let a = cb_client(&s, "a");
    read_deleg(&s, &a, "o", F);
    assert_eq!(s.begin_access(F, None, true).unwrap_err().len(), 1);
    s.clock.advance(Duration::from_secs(91));
    s.renew(&a);
    drop(s.begin_access(F, None, true).unwrap());
    assert_eq!(s.counts().delegations_revoked, 1);
    super::audit::audit(&s);
}

#[test]
fn bounds_per_client_and_in_all() {
    let mut cfg = Config::default();
    cfg.limits.delegations_per_client = 2;
    cfg.limits.max_delegations = 3;
    let s = state_with(cfg);
    let a = cb_client(&s, "a");
    let b = cb_client(&s, "b");
    let files: Vec<FileKey> = (0..4).map(|i| FileKey { fsid: 9, fileid: i }).collect();
    read_deleg(&s, &a, "o", files[0]);
    read_deleg(&s, &a, "o", files[1]);
    open(&s, &a, "o", files[2], ACCESS_READ, DENY_NONE).unwrap();
    assert_eq!(
        s.delegate(&a, files[2], false, b"x"),
        Err(NoDeleg::Resource)
    );
    read_deleg(&s, &b, "o", files[2]);
    open(&s, &b, "o", files[3], ACCESS_READ, DENY_NONE).unwrap();
    assert_eq!(
        s.delegate(&b, files[3], false, b"x"),
        Err(NoDeleg::Resource)
    );
    assert_eq!(s.counts().delegations, 3);
    super::audit::audit(&s);
}

#[test]
fn freed_with_the_client() {
    let s = state();
    let a = cb_client(&s, "a");
    read_deleg(&s, &a, "o", F);
    s.clock.advance(Duration::from_secs(200));
    let r = s.reap(1000);
    assert_eq!(r.expired, 1);
    s.reap(1000);
    assert_eq!(s.counts().delegations, 0);
    assert_eq!(s.counts().stateids, 0);
    // Nothing left on the file: a v3 change goes at once.
    drop(s.begin_access(F, None, true).unwrap());
    super::audit::audit(&s);
}

/// A write delegation (§10.4): only for the one opener, and any other
/// client's access recalls it, a read as well as a change; NFSv3's (no
/// client) too. Counted apart from read ones while held.
#[test]
fn a_write_delegation_is_recalled_by_any_other_access() {
    let s = state();
    let a = cb_client(&s, "a");
    let b = cb_client(&s, "b");
    // Two opens (two owners of the same client): no write delegation.
    open(&s, &a, "o1", G, ACCESS_BOTH, DENY_NONE).unwrap();
    open(&s, &a, "o2", G, ACCESS_READ, DENY_NONE).unwrap();
    assert_eq!(s.delegate(&a, G, true, b"g"), Err(NoDeleg::Contention));
    assert!(!s.any_write_delegation());
    open(&s, &a, "o", F, ACCESS_BOTH, DENY_NONE).unwrap();
    let d = s.delegate_at(&a, F, true, b"fh", 77).unwrap();
    assert!(s.any_write_delegation());
    assert_eq!(s.counts().write_delegations, 1);
    // No read delegation beside it, not even to its holder's other file
    // opener.
    open(&s, &b, "r", F, ACCESS_READ, DENY_NONE).unwrap();
    assert_eq!(s.delegate(&b, F, false, b"fh"), Err(NoDeleg::Contention));
    // The holder is found for CB_GETATTR by others, with its change.
    let h = s.write_holder(&F, Some(b.id())).unwrap();
    assert_eq!(
        (h.recall.stateid, h.recall.client.id(), h.change, h.recalled),
        (d, a.id(), 77, false)
    );
    assert!(s.write_holder(&F, Some(a.id())).is_none(), "its own");
    // The holder's own reads and writes do not conflict.
    drop(s.begin_access(F, Some(a.id()), false).unwrap());
    drop(s.begin_access(F, Some(a.id()), true).unwrap());
    // Another client's read does: one recall, then "wait".
    let r = s.begin_access(F, Some(b.id()), false).unwrap_err();
    assert_eq!(r.len(), 1);
    assert!(r[0].write);
    assert_eq!(r[0].stateid, d);
    assert!(s.begin_access(F, None, false).unwrap_err().is_empty());
    // Recalled: said so (no CB_GETATTR then: the recall is under way).
    assert!(s.write_holder(&F, None).unwrap().recalled);
    s.delegreturn(&a, &d, F).unwrap();
    assert!(!s.any_write_delegation());
    assert_eq!(s.counts().write_delegations, 0);
    drop(s.begin_access(F, None, false).unwrap());
    super::audit::audit(&s);
}

/// A write delegation revoked, or freed with its client, is no longer
/// counted.
#[test]
fn a_write_delegation_revoked_or_freed_is_uncounted() {
    let s = state();
    let a = cb_client(&s, "a");
    open(&s, &a, "o", F, ACCESS_BOTH, DENY_NONE).unwrap();
    s.delegate(&a, F, true, b"fh").unwrap();
    assert_eq!(s.revoke_delegations_on(&F), 1);
    assert!(!s.any_write_delegation());
    let b = cb_client(&s, "b");
    open(&s, &b, "o", G, ACCESS_BOTH, DENY_NONE).unwrap();
    s.delegate(&b, G, true, b"g").unwrap();
    assert!(s.any_write_delegation());
    s.clock.advance(Duration::from_secs(200));
    s.reap(1000);
    s.reap(1000);
    assert!(!s.any_write_delegation());
    assert_eq!(s.counts().delegations, 0);
    super::audit::audit(&s);
}
