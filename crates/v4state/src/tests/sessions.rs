//! CREATE_SESSION, SEQUENCE, DESTROY_SESSION, BIND_CONN_TO_SESSION.

use std::sync::Arc;

use super::*;

#[test]
fn create_session_sequence_and_replay() {
    let s = state();
    let e = exid(&s, "a", 1, "p").unwrap();
    let p = who("p");
    assert_eq!(
        s.create_session(&cs_args(e.clientid, e.sequenceid + 1, &p)),
        Err(V4Error::SeqMisordered)
    );
    assert_eq!(
        s.create_session(&cs_args(e.clientid, e.sequenceid, &who("q"))),
        Err(V4Error::ClidInUse)
    );
    let a = s
        .create_session(&cs_args(e.clientid, e.sequenceid, &p))
        .unwrap();
    // A retransmission gets the same session, not a second one.
    let again = s
        .create_session(&cs_args(e.clientid, e.sequenceid, &p))
        .unwrap();
    assert_eq!(a, again);
    assert_eq!(s.counts().sessions, 1);
    // The next sequence id makes a second session.
    let b = s
        .create_session(&cs_args(e.clientid, e.sequenceid + 1, &p))
        .unwrap();
    assert_ne!(a.sessionid, b.sessionid);
    assert_eq!(
        s.create_session(&cs_args(e.clientid, e.sequenceid + 5, &p)),
        Err(V4Error::SeqMisordered)
    );
    assert_eq!(
        s.create_session(&cs_args(ClientId(12345), 1, &p)),
        Err(V4Error::StaleClientId)
    );
}

#[test]
fn channel_attributes_are_clamped() {
    let s = state_with(Config {
        limits: Limits {
            slots_per_session: 4,
            max_response_size_cached: 1024,
            max_operations: 8,
            max_request_size: 65536,
            ..Limits::default()
        },
        ..Config::default()
    });
    let e = exid(&s, "a", 1, "p").unwrap();
    let p = who("p");
    let mut a = cs_args(e.clientid, e.sequenceid, &p);
    a.fore.max_requests = 1000;
    a.flags |= session::CREATE_SESSION_PERSIST;
    let r = s.create_session(&a).unwrap();
    assert_eq!(r.fore.max_requests, 4);
    assert_eq!(r.fore.max_response_size_cached, 1024);
    assert_eq!(r.fore.max_operations, 8);
    assert_eq!(r.fore.max_request_size, 65536);
    assert_eq!(
        r.flags,
        session::CREATE_SESSION_CONN_BACK_CHAN,
        "no PERSIST"
    );
    let mut small = cs_args(e.clientid, e.sequenceid + 1, &p);
    small.fore.max_request_size = 100;
    assert_eq!(s.create_session(&small), Err(V4Error::TooSmall));
    // Nothing was consumed: the same sequence id works.
    s.create_session(&cs_args(e.clientid, e.sequenceid + 1, &p))
        .unwrap();
    // Slot numbers past the table are BADSLOT.
    assert_eq!(seq(&s, r.sessionid, 4, 1, 1).unwrap_err(), V4Error::BadSlot);
    let t = ticket(&s, r.sessionid, 3, 1);
    assert_eq!(t.highest_slotid, 3);
    assert_eq!(t.target_highest_slotid, 3);
}

#[test]
fn reply_cache_budget_limits_slots() {
    let s = state_with(Config {
        limits: Limits {
            reply_cache_bytes: 10 * 4096,
            max_response_size_cached: 4096,
            ..Limits::default()
        },
        ..Config::default()
    });
    let (_, a) = client_with_session(&s, "a");
    assert_eq!(a.fore.max_requests, 10, "what the budget holds");
    let (_, b) = client_with_session(&s, "b");
    assert_eq!(b.fore.max_requests, 1, "always one slot");
    s.destroy_session(&a.sessionid, false).unwrap();
    assert_eq!(s.counts().reply_cache_bytes, 4096);
}

#[test]
fn sequence_replays_cached_reply() {
    let s = state();
    let (_, c) = client_with_session(&s, "a");
    let t = ticket(&s, c.sessionid, 0, 1);
    assert_eq!(t.status_flags, 0);
    let reply: Arc<[u8]> = Arc::from(&b"reply one"[..]);
    // A retry while it runs waits.
    assert_eq!(seq(&s, c.sessionid, 0, 1, 1).unwrap_err(), V4Error::Delay);
    t.finish(Some(reply.clone())).unwrap();
    match seq(&s, c.sessionid, 0, 1, 1).unwrap() {
        Sequenced::Replay(r) => assert_eq!(r, reply),
        Sequenced::New(_) => panic!("not a replay"),
    }
    assert_eq!(
        seq(&s, c.sessionid, 0, 1, 99).unwrap_err(),
        V4Error::SeqFalseRetry
    );
    assert_eq!(
        seq(&s, c.sessionid, 0, 3, 3).unwrap_err(),
        V4Error::SeqMisordered
    );
    // Uncached (dropped ticket): RETRY_UNCACHED_REP.
    drop(ticket(&s, c.sessionid, 0, 2));
    assert_eq!(
        seq(&s, c.sessionid, 0, 2, 2).unwrap_err(),
        V4Error::RetryUncachedRep
    );
    // Too big to cache.
    let t = ticket(&s, c.sessionid, 0, 3);
    let big: Arc<[u8]> = vec![0u8; t.cache_limit() + 1].into();
    assert_eq!(t.finish(Some(big)), Err(V4Error::RepTooBigToCache));
    assert_eq!(
        seq(&s, c.sessionid, 0, 3, 3).unwrap_err(),
        V4Error::RetryUncachedRep
    );
    let n = s.counts();
    assert_eq!((n.replays, n.false_retries, n.misordered), (1, 1, 1));
}

#[test]
fn slots_are_independent() {
    let s = state();
    let (_, c) = client_with_session(&s, "a");
    let t0 = ticket(&s, c.sessionid, 0, 1);
    let t1 = ticket(&s, c.sessionid, 1, 1);
    assert_eq!(t0.client().id(), t1.client().id());
    t1.finish(None).unwrap();
    t0.finish(None).unwrap();
}

#[test]
fn destroy_session() {
    let s = state();
    let (_, c) = client_with_session(&s, "a");
    let t = ticket(&s, c.sessionid, 0, 1);
    assert_eq!(s.destroy_session(&c.sessionid, false), Err(V4Error::Delay));
    // From within its own compound, its own slot is allowed.
    s.destroy_session(&c.sessionid, true).unwrap();
    t.finish(None).unwrap();
    assert_eq!(
        s.destroy_session(&c.sessionid, false),
        Err(V4Error::BadSession)
    );
    assert_eq!(
        seq(&s, c.sessionid, 0, 2, 2).unwrap_err(),
        V4Error::BadSession
    );
    assert_eq!(s.counts().sessions, 0);
    assert_eq!(s.counts().reply_cache_bytes, 0);
}

#[test]
fn sessions_per_client_bound() {
    let s = state_with(Config {
        limits: Limits {
            sessions_per_client: 2,
            ..Limits::default()
        },
        ..Config::default()
    });
    let (id, _) = client_with_session(&s, "a");
    let p = who("p");
    s.create_session(&cs_args(id, 2, &p)).unwrap();
    assert_eq!(
        s.create_session(&cs_args(id, 3, &p)),
        Err(V4Error::Resource)
    );
    assert!(s
        .counts()
        .limit_hits
        .contains(&(Limit::SessionsPerClient, 1)));
}

#[test]
fn connections_bind_and_unbind() {
    let s = state_with(Config {
        limits: Limits {
            conns_per_session: 2,
            ..Limits::default()
        },
        ..Config::default()
    });
    let (_, c) = client_with_session(&s, "a");
    let id = c.sessionid;
    assert_eq!(s.conn_binding(&id, ConnId(1)), Some(ConnDir::Both));
    // SEQUENCE on a new connection binds it to the fore channel.
    s.sequence(&SequenceArgs {
        sessionid: id,
        sequenceid: 1,
        slotid: 0,
        highest_slotid: 0,
        conn: ConnId(2),
        digest: 0,
        ops: 1,
        request_size: 0,
    })
    .unwrap();
    assert_eq!(s.conn_binding(&id, ConnId(2)), Some(ConnDir::Fore));
    // A third connection unbinds the oldest fore-only one (2), keeping the
    // back channel's.
    assert_eq!(
        s.bind_conn_to_session(&id, ConnId(3), BindDir::ForeOrBoth),
        Ok(ConnDir::Both)
    );
    assert_eq!(s.conn_binding(&id, ConnId(2)), None);
    assert_eq!(s.conn_binding(&id, ConnId(1)), Some(ConnDir::Both));
    s.conn_closed(ConnId(1));
    s.conn_closed(ConnId(3));
    assert_eq!(s.conn_binding(&id, ConnId(1)), None);
    // No back channel left: the session says so.
    let t = match s
        .sequence(&SequenceArgs {
            sessionid: id,
            sequenceid: 2,
            slotid: 0,
            highest_slotid: 0,
            conn: ConnId(4),
            digest: 2,
            ops: 1,
            request_size: 0,
        })
        .unwrap()
    {
        Sequenced::New(t) => t,
        Sequenced::Replay(_) => panic!(),
    };
    assert_eq!(t.status_flags, seq_status::CB_PATH_DOWN_SESSION);
    drop(t);
    assert_eq!(
        s.bind_conn_to_session(&id, ConnId(4), BindDir::Back),
        Ok(ConnDir::Back)
    );
    assert_eq!(
        s.bind_conn_to_session(&SessionId([0; 16]), ConnId(4), BindDir::Back),
        Err(V4Error::BadSession)
    );
}

#[test]
fn sequence_renews_and_expired_lease_is_badsession() {
    let s = state();
    let (id, c) = client_with_session(&s, "a");
    s.clock.advance(Duration::from_secs(60));
    ticket(&s, c.sessionid, 0, 1).finish(None).unwrap();
    s.clock.advance(Duration::from_secs(60));
    // 120 s after creation, 60 s after the last SEQUENCE: alive.
    ticket(&s, c.sessionid, 0, 2).finish(None).unwrap();
    s.clock.advance(Duration::from_secs(91));
    assert_eq!(
        seq(&s, c.sessionid, 0, 3, 3).unwrap_err(),
        V4Error::BadSession
    );
    assert_eq!(s.client(id).unwrap_err(), V4Error::StaleClientId);
    assert_eq!(s.counts().clients_expired, 1);
}

#[test]
fn callback_down_flag() {
    let s = state();
    let (_, c) = client_with_session(&s, "a");
    let t = ticket(&s, c.sessionid, 0, 1);
    s.set_callback_down(&t.client(), true);
    drop(t);
    let t = ticket(&s, c.sessionid, 0, 2);
    assert_eq!(t.status_flags, seq_status::CB_PATH_DOWN);
}

#[test]
fn back_channel_is_reported() {
    let s = state();
    let (_, c) = client_with_session(&s, "a");
    let (attrs, prog, conns) = s.back_channel(&c.sessionid).unwrap();
    assert_eq!(prog, 0x40000000);
    assert_eq!(attrs.max_response_size_cached, 0);
    assert_eq!(attrs.max_requests, session::MAX_BACK_SLOTS);
    assert_eq!(conns, vec![ConnId(1)]);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// SEQUENCE through the state, over several slots: a new request
        /// only on a slot's next id, each replay the reply its slot cached
        /// for its last request, and slots never disturb each other.
        #[test]
        fn sequence_over_slots(ops in prop::collection::vec((0u32..3, -1i32..3, any::<bool>()), 1..80)) {
            let s = state();
            let (_, c) = client_with_session(&s, "a");
            let mut last = [0u32; 3];
            let mut cached: [Option<Arc<[u8]>>; 3] = [None, None, None];
            for (slot, delta, cache) in ops {
                let i = slot as usize;
                let id = last[i].wrapping_add(delta as u32);
                let digest = id as u64 * 10 + slot as u64;
                match seq(&s, c.sessionid, slot, id, digest) {
                    Ok(Sequenced::New(t)) => {
                        prop_assert_eq!(id, last[i].wrapping_add(1));
                        last[i] = id;
                        let reply: Option<Arc<[u8]>> =
                            cache.then(|| Arc::from(digest.to_be_bytes().as_slice()));
                        t.finish(reply.clone()).unwrap();
                        cached[i] = reply;
                    }
                    Ok(Sequenced::Replay(r)) => {
                        prop_assert_eq!(id, last[i]);
                        prop_assert_eq!(Some(r), cached[i].clone());
                    }
                    Err(V4Error::RetryUncachedRep) => {
                        prop_assert_eq!(id, last[i]);
                        prop_assert!(cached[i].is_none());
                    }
                    Err(V4Error::SeqMisordered) => {
                        prop_assert!(id != last[i].wrapping_add(1));
                        prop_assert!(id != last[i] || last[i] == 0);
                    }
                    Err(e) => prop_assert!(false, "unexpected {:?}", e),
                }
            }
        }

        /// CREATE_SESSION's own sequence: one session per new sequence id,
        /// the same one again for a retransmission, nothing for any other.
        #[test]
        fn create_session_sequence(deltas in prop::collection::vec(-2i32..3, 1..30)) {
            let s = state();
            let e = exid(&s, "a", 1, "p").unwrap();
            let p = who("p");
            let mut last = e.sequenceid - 1;
            let mut made: Option<SessionCreated> = None;
            let mut sessions = 0;
            for d in deltas {
                let seq = last.wrapping_add(d as u32);
                let r = s.create_session(&cs_args(e.clientid, seq, &p));
                if seq == last.wrapping_add(1) {
                    let r = r.unwrap();
                    last = seq;
                    sessions += 1;
                    made = Some(r);
                } else if seq == last && made.is_some() {
                    prop_assert_eq!(Some(r.unwrap()), made.clone());
                } else {
                    prop_assert!(r.is_err());
                }
                if sessions > 7 {
                    break; // sessions_per_client
                }
            }
            prop_assert_eq!(s.counts().sessions, sessions);
        }
    }
}
