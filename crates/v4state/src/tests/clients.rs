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
