//! The NFSv4.1 client's session set-up, slot table and back channel
//! against a small fake server written here (decoding with the proto
//! types), for what a real server will not do on demand: send scripted
//! callbacks, or leave a call unanswered.

use std::net::SocketAddr;
use std::time::Duration;

use rnfsd_client::nfs4::cb::*;
use rnfsd_client::nfs4::*;
use rnfsd_client::record::read_record;
use rnfsd_client::{Auth, ClientConfig, ClientError};
use rnfsd_proto::rpc::{
    encode_accepted, AcceptStat, CallHeader, Incoming, OpaqueAuth, ReplyHeader, RPC_VERSION,
};
use rnfsd_xdr::{Dec, Enc};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(10);
const SESSION: SessionId4 = SessionId4([5; 16]);
const CLIENTID: u64 = 77;
/// Slots the fake grants.
const GRANTED_SLOTS: u32 = 2;

fn framed(msg: &[u8]) -> Vec<u8> {
    let mut out = (0x8000_0000u32 | msg.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(msg);
    out
}

fn cb_call(xid: u32, prog: u32, proc_: u32, args: &[u8]) -> Vec<u8> {
    let mut e = Enc::new();
    CallHeader {
        xid,
        rpcvers: RPC_VERSION,
        prog,
        vers: NFS_CB,
        proc_,
        cred: OpaqueAuth::NONE,
        verf: OpaqueAuth::NONE,
    }
    .encode(&mut e);
    e.raw(args);
    e.into_vec()
}

fn cb_compound(seqid: u32, slotid: u32, recall: bool) -> Vec<u8> {
    let mut ops = vec![CbArgOp::Sequence(CbSequence4Args {
        sessionid: SESSION,
        sequenceid: seqid,
        slotid,
        highest_slotid: 0,
        cachethis: false,
        referring_call_lists: vec![],
    })];
    if recall {
        ops.push(CbArgOp::Recall(CbRecall4Args {
            stateid: Stateid4 {
                seqid: 1,
                other: [3; 12],
            },
            truncate: false,
            fh: NfsFh4(vec![1, 2, 3]),
        }));
    }
    let mut e = Enc::new();
    CbCompoundArgs {
        tag: b"cb".to_vec(),
        minorversion: 1,
        callback_ident: 0,
        ops,
    }
    .encode(&mut e);
    e.into_vec()
}

/// The fake's answer to one COMPOUND; `None` leaves it unanswered.
fn answer(ops: &[ArgOp<'_>], created: &mut Option<CreateSession4Args>) -> Option<CompoundRes> {
    let mut results = Vec::new();
    for op in ops {
        let r = match op {
            ArgOp::ExchangeId(_) => ResOp::ExchangeId(NfsRes4::Ok(ExchangeId4ResOk {
                clientid: CLIENTID,
                sequenceid: 1,
                flags: EXCHGID4_FLAG_USE_NON_PNFS,
                state_protect: StateProtect4R::None,
                server_owner: ServerOwner4::default(),
                server_scope: Opaque1024::default(),
                server_impl_id: None,
            })),
            ArgOp::CreateSession(a) => {
                assert_eq!((a.clientid, a.sequence), (CLIENTID, 1));
                *created = Some((**a).clone());
                let mut fore = a.fore_chan_attrs;
                fore.maxrequests = GRANTED_SLOTS;
                ResOp::CreateSession(NfsRes4::Ok(CreateSession4ResOk {
                    sessionid: SESSION,
                    sequence: a.sequence,
                    flags: a.flags & CREATE_SESSION4_FLAG_CONN_BACK_CHAN,
                    fore_chan_attrs: fore,
                    back_chan_attrs: a.back_chan_attrs,
                }))
            }
            ArgOp::Sequence(s) => {
                assert_eq!(s.sessionid, SESSION);
                assert!(s.slotid < GRANTED_SLOTS && s.highest_slotid < GRANTED_SLOTS);
                ResOp::Sequence(NfsRes4::Ok(Sequence4ResOk {
                    sessionid: s.sessionid,
                    sequenceid: s.sequenceid,
                    slotid: s.slotid,
                    highest_slotid: GRANTED_SLOTS - 1,
                    target_highest_slotid: GRANTED_SLOTS - 1,
                    status_flags: 0,
                }))
            }
            ArgOp::ReclaimComplete(_) => ResOp::ReclaimComplete(Nfsstat4::Ok),
            ArgOp::PutRootFh => ResOp::PutRootFh(Nfsstat4::Ok),
            ArgOp::GetFh => ResOp::GetFh(NfsRes4::Ok(NfsFh4(vec![1, 2, 3]))),
            // The fake's way to lose a reply.
            ArgOp::LookupP => return None,
            other => ResOp::error(other.opnum(), Nfsstat4::NotSupp),
        };
        results.push(r);
    }
    Some(CompoundRes {
        status: Nfsstat4::Ok,
        tag: b"rnfsd-client".to_vec(),
        results,
    })
}

/// Serves one connection: answers the client's calls; after
/// CREATE_SESSION sends `callbacks` one at a time, each after the reply to
/// the one before, and passes the replies (from the xid) to `replies`.
async fn serve(
    s: TcpStream,
    callbacks: Vec<Vec<u8>>,
    replies: mpsc::UnboundedSender<Vec<u8>>,
) -> Option<CreateSession4Args> {
    let (r, mut w) = s.into_split();
    let mut r = BufReader::new(r);
    let mut created = None;
    let mut pending = callbacks.into_iter();
    let mut rec = Vec::new();
    while read_record(&mut r, 1 << 22, &mut rec)
        .await
        .unwrap_or(false)
    {
        let mut d = Dec::new(&rec);
        match CallHeader::decode(&mut d).unwrap() {
            Incoming::NotACall { .. } => {
                // A reply to our callback: next one.
                replies.send(rec.clone()).unwrap();
                if let Some(next) = pending.next() {
                    w.write_all(&framed(&next)).await.unwrap();
                }
            }
            Incoming::Call(h) => {
                assert_eq!(
                    (h.prog, h.vers, h.proc_),
                    (NFS4_PROGRAM, NFS_V4, NFSPROC4_COMPOUND)
                );
                let (_, ops) = decode_compound(&mut d, 64, 64).unwrap();
                let was_created = created.is_some();
                let Some(res) = answer(&ops, &mut created) else {
                    continue;
                };
                let mut e = Enc::new();
                encode_accepted(&mut e, h.xid, AcceptStat::Success);
                res.encode(&mut e);
                w.write_all(&framed(e.as_slice())).await.unwrap();
                if !was_created && created.is_some() {
                    if let Some(first) = pending.next() {
                        w.write_all(&framed(&first)).await.unwrap();
                    }
                }
            }
        }
    }
    created
}

async fn listen() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

fn cfg(t: Duration) -> ClientConfig {
    ClientConfig {
        auth: Auth::unix(0, 0),
        timeout: Some(t),
        ..ClientConfig::default()
    }
}

/// Results of a callback reply: the accept status, and the bytes after.
fn reply_body(rec: &[u8]) -> (u32, ReplyHeader, Vec<u8>) {
    let mut d = Dec::new(rec);
    let (xid, h) = ReplyHeader::decode(&mut d).unwrap();
    (xid, h, d.rest().to_vec())
}

fn cb_res(body: &[u8]) -> CbCompoundRes {
    let mut d = Dec::new(body);
    let r = CbCompoundRes::decode(&mut d, 64, 16).unwrap();
    assert_eq!(d.remaining(), 0);
    r
}

#[tokio::test]
async fn callbacks_on_the_session_connection_are_answered() {
    let (l, addr) = listen().await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let script = vec![
        cb_call(0xcb01, NFS4_CALLBACK, CB_NULL, &[]),
        cb_call(0xcb02, NFS4_CALLBACK, CB_COMPOUND, &cb_compound(1, 0, true)),
        // The same slot and id again: the cached reply.
        cb_call(0xcb03, NFS4_CALLBACK, CB_COMPOUND, &cb_compound(1, 0, true)),
        // Skipping ahead, a slot past the table, another program, bytes
        // that are not CB_COMPOUND4args.
        cb_call(
            0xcb04,
            NFS4_CALLBACK,
            CB_COMPOUND,
            &cb_compound(5, 0, false),
        ),
        cb_call(
            0xcb05,
            NFS4_CALLBACK,
            CB_COMPOUND,
            &cb_compound(1, 99, false),
        ),
        cb_call(0xcb06, 12345, CB_NULL, &[]),
        cb_call(0xcb07, NFS4_CALLBACK, CB_COMPOUND, &[0, 0, 0, 9]),
        // The next id on the slot is new again.
        cb_call(
            0xcb08,
            NFS4_CALLBACK,
            CB_COMPOUND,
            &cb_compound(2, 0, false),
        ),
    ];
    let n = script.len();
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        serve(s, script, tx).await
    });
    let v4 = Nfs4Config {
        back_channel: true,
        ..Nfs4Config::default()
    };
    let c = timeout(LIMIT, Nfs4Client::connect(addr, &cfg(LIMIT), &v4))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c.sessionid(), SESSION);
    assert_eq!(c.slot_count() as u32, GRANTED_SLOTS);
    let mut got = Vec::new();
    for _ in 0..n {
        got.push(reply_body(
            &timeout(LIMIT, rx.recv()).await.unwrap().unwrap(),
        ));
    }
    // Fore-channel calls still work beside the callbacks.
    assert_eq!(c.root_fh().await.unwrap(), NfsFh4(vec![1, 2, 3]));

    let ok = ReplyHeader::Accepted(AcceptStat::Success);
    let xids: Vec<u32> = got.iter().map(|g| g.0).collect();
    assert_eq!(xids, (0xcb01..=0xcb08).collect::<Vec<_>>());
    assert_eq!((got[0].1, got[0].2.len()), (ok, 0));
    let first = cb_res(&got[1].2);
    assert_eq!(first.status, Nfsstat4::Ok);
    assert_eq!(first.tag, b"cb");
    match &first.results[..] {
        [CbResOp::Sequence(NfsRes4::Ok(s)), CbResOp::Recall(Nfsstat4::Ok)] => {
            assert_eq!((s.sessionid, s.sequenceid, s.slotid), (SESSION, 1, 0));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(got[2].2, got[1].2, "a retry gets the cached reply");
    assert_eq!(cb_res(&got[3].2).status, Nfsstat4::SeqMisordered);
    assert_eq!(cb_res(&got[4].2).status, Nfsstat4::BadSlot);
    assert_eq!(got[5].1, ReplyHeader::Accepted(AcceptStat::ProgUnavail));
    assert_eq!(got[6].1, ReplyHeader::Accepted(AcceptStat::GarbageArgs));
    assert_eq!(cb_res(&got[7].2).status, Nfsstat4::Ok);

    assert_eq!(c.callback_calls(), n as u64);
    let log = c.callbacks();
    assert_eq!(log.len(), n);
    assert_eq!(log[0], CbEvent::Null);
    assert!(matches!(&log[1], CbEvent::Compound { ops, status: Nfsstat4::Ok } if ops.len() == 2));
    assert_eq!(log[5], CbEvent::Rejected);
    drop(c);
    let created = timeout(LIMIT, server).await.unwrap().unwrap().unwrap();
    assert_ne!(created.flags & CREATE_SESSION4_FLAG_CONN_BACK_CHAN, 0);
    assert_eq!(created.back_chan_attrs.maxrequests, CB_SLOTS);
}

#[tokio::test]
async fn a_lost_reply_retires_its_slot() {
    let (l, addr) = listen().await;
    let (tx, _rx) = mpsc::unbounded_channel();
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        serve(s, Vec::new(), tx).await
    });
    let c = Nfs4Client::connect(
        addr,
        &cfg(Duration::from_millis(300)),
        &Nfs4Config::default(),
    )
    .await
    .unwrap();
    assert_eq!(c.slot_count() as u32, GRANTED_SLOTS);
    // Without a back channel the session asked for none.
    let created_flags = c.session().flags;
    assert_eq!(created_flags & CREATE_SESSION4_FLAG_CONN_BACK_CHAN, 0);
    // Slot 0 after RECLAIM_COMPLETE has id 1; two plain calls move it on.
    for _ in 0..2 {
        c.root_fh().await.unwrap();
    }
    let s = c.slot().await.unwrap();
    assert_eq!((s.id(), s.seqid()), (0, 3));
    drop(s);
    // Unanswered calls: each retires the slot it took.
    for _ in 0..GRANTED_SLOTS {
        assert!(matches!(
            c.compound(&[ArgOp::PutRootFh, ArgOp::LookupP]).await,
            Err(ClientError::Timeout)
        ));
    }
    // No slot left: calls fail at once rather than wait.
    match timeout(LIMIT, c.root_fh()).await.unwrap() {
        Err(ClientError::Protocol(m)) => assert!(m.contains("slot"), "{m}"),
        other => panic!("{other:?}"),
    }
    drop(c);
    timeout(LIMIT, server).await.unwrap().unwrap();
}
