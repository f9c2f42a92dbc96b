//! EXCHANGE_ID's cases (§18.35.5) and DESTROY_CLIENTID.

use super::*;

#[test]
fn new_owner_gets_an_unconfirmed_record() {
    let s = state();
    let r = exid(&s, "a", 1, "p").unwrap();
    assert!(!r.confirmed);
    assert_eq!(r.sequenceid, 1);
    assert_eq!(
        r.clientid.boot(),
        7,
        "the boot verifier is in the high bits"
    );
    let b = exid(&s, "b", 1, "p").unwrap();
    assert_ne!(r.clientid, b.clientid);
    assert_eq!(s.counts().clients, 2);
}

#[test]
fn unconfirmed_record_is_replaced() {
    // Case 4: a second EXCHANGE_ID before CREATE_SESSION replaces the
    // unconfirmed record (the first id is no longer known).
    let s = state();
    let a = exid(&s, "a", 1, "p").unwrap();
    let b = exid(&s, "a", 1, "p").unwrap();
    assert_ne!(a.clientid, b.clientid);
    assert_eq!(s.client(a.clientid).unwrap_err(), V4Error::StaleClientId);
    assert!(s.client(b.clientid).is_ok());
    assert_eq!(s.counts().clients, 1);
}

#[test]
fn update_without_confirmed_record_is_noent() {
    let s = state();
    exid(&s, "a", 1, "p").unwrap();
    let r = s.exchange_id(&ExchangeIdArgs {
        owner: b"a",
        verifier: Verifier([1; 8]),
        principal: &who("p"),
        update: true,
    });
    assert_eq!(r, Err(V4Error::NoEnt));
}

#[test]
fn client_limit() {
    let s = state_with(Config {
        limits: Limits {
            max_clients: 2,
            ..Limits::default()
        },
        ..Config::default()
    });
    exid(&s, "a", 1, "p").unwrap();
    exid(&s, "b", 1, "p").unwrap();
    assert_eq!(exid(&s, "c", 1, "p"), Err(V4Error::Resource));
    // Replacing one's own unconfirmed record is no new client.
    exid(&s, "b", 2, "p").unwrap();
    let hits = s.counts().limit_hits;
    assert!(hits.contains(&(Limit::Clients, 1)), "{hits:?}");
}

#[test]
fn destroy_clientid() {
    let s = state();
    let a = exid(&s, "a", 1, "p").unwrap();
    s.destroy_clientid(a.clientid).unwrap();
    assert_eq!(s.destroy_clientid(a.clientid), Err(V4Error::StaleClientId));
    assert_eq!(
        s.destroy_clientid(ClientId(a.clientid.0 ^ (1 << 40))),
        Err(V4Error::StaleClientId),
        "another boot's id"
    );
    assert_eq!(s.counts().clients, 0);
}

#[test]
fn retry_of_confirmed_record_returns_it() {
    // Case 2: same owner, verifier and principal.
    let s = state();
    let (id, _) = client_with_session(&s, "a");
    let r = exid(&s, "a", 1, "p").unwrap();
    assert_eq!(r.clientid, id);
    assert!(r.confirmed);
    assert_eq!(r.sequenceid, 2, "the next CREATE_SESSION's");
    // Case 6: an update of it.
    let u = s
        .exchange_id(&ExchangeIdArgs {
            owner: b"a",
            verifier: Verifier([1; 8]),
            principal: &who("p"),
            update: true,
        })
        .unwrap();
    assert_eq!(u.clientid, id);
    // Cases 8 and 9.
    let bad = |v: u8, p: &str| {
        s.exchange_id(&ExchangeIdArgs {
            owner: b"a",
            verifier: Verifier([v; 8]),
            principal: &who(p),
            update: true,
        })
    };
    assert_eq!(bad(2, "p"), Err(V4Error::NotSame));
    assert_eq!(bad(1, "q"), Err(V4Error::Perm));
}

#[test]
fn collision_with_state_is_clid_inuse() {
    // Case 3: another principal; the record has a session.
    let s = state();
    let (id, _) = client_with_session(&s, "a");
    assert_eq!(exid(&s, "a", 1, "q"), Err(V4Error::ClidInUse));
    assert!(s.client(id).is_ok());
}

#[test]
fn collision_without_state_replaces() {
    // Case 3 with nothing held: the old record goes.
    let s = state();
    let (id, c) = client_with_session(&s, "a");
    s.destroy_session(&c.sessionid, false).unwrap();
    let n = exid(&s, "a", 1, "q").unwrap();
    assert_ne!(n.clientid, id);
    assert_eq!(s.client(id).unwrap_err(), V4Error::StaleClientId);
}

#[test]
fn restarted_client_replaces_old_record_once_confirmed() {
    // Case 5: a new verifier. The old record and its session live on
    // until the new record's CREATE_SESSION.
    let s = state();
    let (old, oc) = client_with_session(&s, "a");
    let n = exid(&s, "a", 2, "p").unwrap();
    assert_ne!(n.clientid, old);
    assert!(!n.confirmed);
    assert!(
        s.client(old).is_ok(),
        "old one kept until the new is confirmed"
    );
    assert!(seq(&s, oc.sessionid, 0, 1, 1).is_ok());
    let p = who("p");
    s.create_session(&cs_args(n.clientid, n.sequenceid, &p))
        .unwrap();
    assert_eq!(s.client(old).unwrap_err(), V4Error::StaleClientId);
    assert_eq!(
        seq(&s, oc.sessionid, 0, 2, 2).unwrap_err(),
        V4Error::BadSession,
        "the old client's session went with it"
    );
    assert_eq!(s.counts().clients, 1);
}

#[test]
fn destroy_clientid_refused_while_sessions_remain() {
    let s = state();
    let (id, c) = client_with_session(&s, "a");
    assert_eq!(s.destroy_clientid(id), Err(V4Error::ClientIdBusy));
    s.destroy_session(&c.sessionid, false).unwrap();
    s.destroy_clientid(id).unwrap();
    assert_eq!(s.client(id).unwrap_err(), V4Error::StaleClientId);
}
