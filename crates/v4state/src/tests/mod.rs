//! Tests of the state as the protocol layer drives it.

mod audit;
mod clients;
mod delegs;
mod grace;
mod leases;
mod locks;
mod opens;
mod sessions;
mod stateids;
mod stress;

use std::sync::Arc;
use std::time::Duration;

use crate::*;

pub(crate) fn state() -> Arc<State> {
    state_with(Config::default())
}

pub(crate) fn state_with(cfg: Config) -> Arc<State> {
    State::with_key(cfg, 7, [9; 32], None, Vec::new())
}

pub(crate) fn who(name: &str) -> Principal {
    Principal(name.as_bytes().to_vec())
}

pub(crate) fn exid(
    s: &State,
    owner: &str,
    verf: u8,
    principal: &str,
) -> Result<ExchangeIdOk, V4Error> {
    s.exchange_id(&ExchangeIdArgs {
        owner: owner.as_bytes(),
        verifier: Verifier([verf; 8]),
        principal: &who(principal),
        update: false,
    })
}

pub(crate) fn attrs() -> ChannelAttrs {
    ChannelAttrs {
        header_pad_size: 0,
        max_request_size: 1 << 20,
        max_response_size: 1 << 20,
        max_response_size_cached: 8192,
        max_operations: 16,
        max_requests: 32,
    }
}

pub(crate) fn cs_args<'a>(id: ClientId, seq: u32, p: &'a Principal) -> CreateSessionArgs<'a> {
    CreateSessionArgs {
        clientid: id,
        sequence: seq,
        principal: p,
        flags: session::CREATE_SESSION_CONN_BACK_CHAN,
        fore: attrs(),
        back: attrs(),
        cb_program: 0x40000000,
        conn: ConnId(1),
    }
}

/// A confirmed client `owner` (principal "p") with one session.
pub(crate) fn client_with_session(s: &State, owner: &str) -> (ClientId, SessionCreated) {
    let e = exid(s, owner, 1, "p").unwrap();
    let p = who("p");
    let c = s
        .create_session(&cs_args(e.clientid, e.sequenceid, &p))
        .unwrap();
    (e.clientid, c)
}

pub(crate) fn seq(
    s: &State,
    id: SessionId,
    slot: u32,
    seqid: u32,
    digest: u64,
) -> Result<Sequenced, V4Error> {
    s.sequence(&SequenceArgs {
        sessionid: id,
        sequenceid: seqid,
        slotid: slot,
        highest_slotid: slot,
        conn: ConnId(1),
        digest,
        ops: 1,
        request_size: 0,
    })
}

/// A new request on `slot` with `seqid`: its ticket.
pub(crate) fn ticket(s: &State, id: SessionId, slot: u32, seqid: u32) -> SlotTicket {
    match seq(s, id, slot, seqid, seqid as u64).unwrap() {
        Sequenced::New(t) => t,
        Sequenced::Replay(_) => panic!("a replay"),
    }
}

/// A confirmed client `owner` with a session: its handle (from a
/// SEQUENCE) and session id.
pub(crate) fn handle(s: &State, owner: &str) -> (ClientHandle, SessionId) {
    let (_, c) = client_with_session(s, owner);
    let t = ticket(s, c.sessionid, 0, 1);
    let h = t.client();
    t.finish(None).unwrap();
    (h, c.sessionid)
}

pub(crate) const F: FileKey = FileKey {
    fsid: 1,
    fileid: 100,
};
pub(crate) const G: FileKey = FileKey {
    fsid: 1,
    fileid: 200,
};

pub(crate) fn open(
    s: &State,
    c: &ClientHandle,
    owner: &str,
    file: FileKey,
    access: u32,
    deny: u32,
) -> Result<Opened, V4Error> {
    s.open(
        c,
        &OpenArgs {
            owner: owner.as_bytes(),
            file,
            access,
            deny,
            claim: Claim::New,
        },
    )
}
