//! Dispatch through a service over a toy state: header checks, credentials,
//! rows, handler errors, panics, the duplicate reply cache, parked replies,
//! plans, and statistics, each through the public API.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::Arc;

use rnfsd_proto::rpc::{
    AcceptStat, AuthStat, AuthSys, RejectStat, ReplyHeader, AUTH_NONE, AUTH_SYS, MSG_CALL,
    MSG_REPLY,
};
use rnfsd_rpc::{
    proc_entry, Auth, CacheClass, CallCtx, Class, Drc, DrcConfig, LoopState, Policy, Proc,
    ProcError, Program, Route, RpcService, State, Version, Wait,
};
use rnfsd_transport::{Plan, Service};
use rnfsd_xdr::{Dec, Enc};

/// The toy server: nothing shared but a counter.
struct Toy;

struct NoLoop;
impl LoopState for NoLoop {}

impl State for Toy {
    type Loop = NoLoop;
    fn new_loop(&self) -> Option<NoLoop> {
        None
    }
}

type Ctx<'a> = CallCtx<'a, Toy>;

const NOBODY: u32 = 65534;

fn null(_: &Ctx<'_>, _: ()) -> Result<(), ProcError> {
    Ok(())
}
/// Echoes its u32 argument plus the caller's uid.
fn echo(ctx: &Ctx<'_>, x: u32) -> Result<Echoed, ProcError> {
    Ok(Echoed {
        x,
        uid: match &ctx.auth {
            Auth::Sys(s) => s.uid,
            Auth::None => NOBODY,
        },
    })
}
fn fail_with(enc: &mut Enc, e: ProcError) -> Result<(), ProcError> {
    // Write part of a result first: it must not reach the wire.
    enc.u32(0xdead_beef);
    Err(e)
}
fn explode(_: &Ctx<'_>, _: ()) -> Result<(), ProcError> {
    panic!("boom")
}

rnfsd_xdr::xdr_struct! {
    #[derive(Debug)]
    pub struct Echoed { pub x: u32, pub uid: u32 }
}

/// The number the arguments start with, reserved as reply room.
fn room_of(_: &Toy, d: &mut Dec<'_>) -> usize {
    d.u32().map_or(0, |n| n as usize)
}

/// Pool when the argument is even, on the loop when odd.
fn by_arg(_: &Toy, d: &mut Dec<'_>) -> Route {
    match d.u32() {
        Ok(n) if n % 2 == 1 => Route::Quick,
        _ => Route::Pool,
    }
}

static V3: &[Proc<Toy>] = &[
    proc_entry!("NULL", (), null, CacheClass::None, 0),
    proc_entry!("ECHO", u32, echo, CacheClass::None, 8),
    proc_entry!("OPEN", (), null, CacheClass::None, 0).auth_none(),
    proc_entry!("ROOM", u32, echo, CacheClass::None, 8, Class::By(by_arg)).room(room_of),
];
static TEST_PROG: Program<Toy> = Program {
    name: "test",
    prog: 400_000,
    versions: &[
        Version { vers: 2, procs: V3 },
        Version { vers: 3, procs: V3 },
        Version { vers: 5, procs: V3 },
    ],
};
const fn failing(name: &'static str, run: rnfsd_rpc::ProcFn<Toy>) -> Proc<Toy> {
    Proc {
        name,
        run,
        cache: CacheClass::None,
        max_reply: 4,
        class: Class::Pool,
        room: rnfsd_rpc::Room::Small,
        auth_none: false,
    }
}
static FAIL_PROG: Program<Toy> = Program {
    name: "fail",
    prog: 400_001,
    versions: &[Version {
        vers: 1,
        procs: &[
            proc_entry!("NULL", (), null, CacheClass::None, 0),
            failing("GARBAGE", |_, _, e| fail_with(e, ProcError::GarbageArgs)),
            failing("SYSERR", |_, _, e| fail_with(e, ProcError::SystemErr)),
            failing("TOOWEAK", |_, _, e| fail_with(e, ProcError::TooWeak)),
            failing("DROP", |_, _, e| fail_with(e, ProcError::Drop)),
            proc_entry!("PANIC", (), explode, CacheClass::None, 0),
        ],
    }],
};

fn peer() -> SocketAddr {
    "127.0.0.1:700".parse().unwrap()
}
fn local() -> SocketAddr {
    "127.0.0.1:2049".parse().unwrap()
}

fn sys(uid: u32) -> Vec<u8> {
    rnfsd_xdr::to_vec(&AuthSys {
        stamp: 1,
        machine_name: b"client".to_vec(),
        uid,
        gid: 100,
        gids: vec![100, 10],
    })
}

/// A call record with the given header words, credential and tail.
fn call(
    xid: u32,
    rpcvers: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    cred: (u32, &[u8]),
    tail: &[u8],
) -> Vec<u8> {
    let mut e = Enc::new();
    for w in [xid, MSG_CALL, rpcvers, prog, vers, proc_] {
        e.u32(w);
    }
    e.u32(cred.0);
    e.opaque(cred.1);
    e.u32(AUTH_NONE);
    e.u32(0);
    e.raw(tail);
    e.into_vec()
}

fn service(policy: Policy) -> RpcService<Toy> {
    RpcService::new(Arc::new(Toy), vec![&TEST_PROG, &FAIL_PROG], policy)
}

/// Planned as the event loop plans it, and also unplanned (as UDP calls
/// arrive): both must answer alike.
fn run_with(policy: Policy, req: &[u8]) -> Option<Vec<u8>> {
    let svc = service(policy);
    let planned = svc.answer(req, peer(), local()).map(|r| r.buf);
    let unplanned = svc
        .call(rnfsd_transport::Request {
            data: req.to_vec(),
            peer: peer(),
            local: local(),
            conn_id: 1,
            plan: Plan::default(),
            responder: Default::default(),
        })
        .map(|r| r.buf);
    assert_eq!(planned, unplanned, "a plan changed the answer");
    planned
}

fn run(req: &[u8]) -> Option<Vec<u8>> {
    run_with(Policy::default(), req)
}

/// Checks the reserved bytes and decodes the header; returns the results.
fn reply(v: &[u8]) -> (u32, ReplyHeader, Vec<u8>) {
    assert_eq!(&v[..4], &[0, 0, 0, 0], "record mark bytes reserved");
    let mut d = Dec::new(&v[4..]);
    let (xid, h) = ReplyHeader::decode(&mut d).unwrap();
    (xid, h, d.rest().to_vec())
}

#[test]
fn success_with_auth_sys() {
    let c = sys(1000);
    let r = run(&call(7, 2, 400_000, 3, 1, (AUTH_SYS, &c), &[0, 0, 0, 42])).unwrap();
    let (xid, h, body) = reply(&r);
    assert_eq!(xid, 7);
    assert_eq!(h, ReplyHeader::Accepted(AcceptStat::Success));
    assert_eq!(body, [0, 0, 0, 42, 0, 0, 3, 0xe8]);
}

#[test]
fn null_with_auth_none() {
    let r = run(&call(8, 2, 400_000, 3, 0, (AUTH_NONE, &[]), &[])).unwrap();
    let (xid, h, body) = reply(&r);
    assert_eq!((xid, h), (8, ReplyHeader::Accepted(AcceptStat::Success)));
    assert!(body.is_empty());
}

#[test]
fn unparseable_records_are_dropped() {
    assert_eq!(run(&[]), None);
    assert_eq!(run(&[0, 0, 0, 1]), None);
    assert_eq!(run(&[0, 0, 0, 1, 0, 0]), None);
    // Readable xid and type, short fixed header: dropped like knfsd.
    assert_eq!(run(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2]), None);
    // A REPLY is never answered.
    let mut c = call(9, 2, 400_000, 3, 0, (AUTH_NONE, &[]), &[]);
    c[7] = MSG_REPLY as u8;
    assert_eq!(run(&c), None);
    // Nor an unknown message type.
    c[7] = 9;
    assert_eq!(run(&c), None);
}

#[test]
fn wrong_rpc_version_is_rpc_mismatch() {
    let r = run(&call(10, 3, 400_000, 3, 0, (AUTH_NONE, &[]), &[])).unwrap();
    let (xid, h, _) = reply(&r);
    assert_eq!(xid, 10);
    assert_eq!(
        h,
        ReplyHeader::Denied(RejectStat::RpcMismatch { low: 2, high: 2 })
    );
    // Even when nothing after the version is present.
    let r = run(&[
        0, 0, 0, 11, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ])
    .unwrap();
    assert_eq!(
        reply(&r).1,
        ReplyHeader::Denied(RejectStat::RpcMismatch { low: 2, high: 2 })
    );
}

#[test]
fn unknown_program_version_procedure() {
    let c = sys(0);
    let r = run(&call(1, 2, 123, 3, 0, (AUTH_SYS, &c), &[])).unwrap();
    assert_eq!(reply(&r).1, ReplyHeader::Accepted(AcceptStat::ProgUnavail));
    let r = run(&call(1, 2, 400_000, 4, 0, (AUTH_SYS, &c), &[])).unwrap();
    assert_eq!(
        reply(&r).1,
        ReplyHeader::Accepted(AcceptStat::ProgMismatch { low: 2, high: 5 })
    );
    let r = run(&call(1, 2, 400_000, 3, 4, (AUTH_SYS, &c), &[])).unwrap();
    assert_eq!(reply(&r).1, ReplyHeader::Accepted(AcceptStat::ProcUnavail));
    let r = run(&call(1, 2, 400_000, 3, u32::MAX, (AUTH_SYS, &c), &[])).unwrap();
    assert_eq!(reply(&r).1, ReplyHeader::Accepted(AcceptStat::ProcUnavail));
}

fn auth_err(r: Option<Vec<u8>>) -> ReplyHeader {
    reply(&r.unwrap()).1
}

#[test]
fn bad_credentials() {
    let bad = |s| ReplyHeader::Denied(RejectStat::AuthError(s));
    // AUTH_NONE with a body.
    assert_eq!(
        auth_err(run(&call(
            1,
            2,
            400_000,
            3,
            0,
            (AUTH_NONE, &[1, 2, 3, 4]),
            &[]
        ))),
        bad(AuthStat::BadCred)
    );
    // Unknown flavors (AUTH_SHORT, AUTH_DH, RPCSEC_GSS).
    for f in [2, 3, 6, 0xffff_ffff] {
        assert_eq!(
            auth_err(run(&call(1, 2, 400_000, 3, 0, (f, &[]), &[]))),
            bad(AuthStat::BadCred)
        );
    }
    // AUTH_SYS: truncated body, trailing bytes, too many gids, long name.
    let good = sys(5);
    let short = &good[..good.len() - 4];
    let mut trailing = good.clone();
    trailing.extend_from_slice(&[0; 4]);
    let mut many = Enc::new();
    many.u32(0);
    many.opaque(b"h");
    many.u32(0);
    many.u32(0);
    many.u32(17);
    for _ in 0..17 {
        many.u32(0);
    }
    let mut long = Enc::new();
    long.u32(0);
    long.opaque(&[b'a'; 256]);
    long.u32(0);
    long.u32(0);
    long.u32(0);
    for c in [short, &trailing[..], many.as_slice(), long.as_slice(), &[]] {
        assert_eq!(
            auth_err(run(&call(
                1,
                2,
                400_000,
                3,
                1,
                (AUTH_SYS, c),
                &[0, 0, 0, 1]
            ))),
            bad(AuthStat::BadCred),
            "cred {c:?}"
        );
    }
    // A body over RFC 5531's 400 bytes.
    let mut huge = Enc::new();
    for w in [1, MSG_CALL, 2, 400_000, 3, 0, AUTH_SYS, 404] {
        huge.u32(w);
    }
    huge.raw(&[0; 404]);
    huge.u32(0);
    huge.u32(0);
    assert_eq!(auth_err(run(huge.as_slice())), bad(AuthStat::BadCred));
}

#[test]
fn bad_verifier_is_badverf() {
    for v in [[AUTH_SYS, 4, 0], [AUTH_NONE, 4, 0]] {
        let mut e = Enc::new();
        for w in [3, MSG_CALL, 2, 400_000, 3, 0, AUTH_NONE, 0] {
            e.u32(w);
        }
        for w in v {
            e.u32(w);
        }
        assert_eq!(
            auth_err(run(e.as_slice())),
            ReplyHeader::Denied(RejectStat::AuthError(AuthStat::BadVerf))
        );
    }
}

#[test]
fn truncated_credentials_are_garbage_args() {
    let full = call(4, 2, 400_000, 3, 0, (AUTH_SYS, &sys(1)), &[]);
    // Cut inside the credential body, and inside the verifier.
    for cut in [28, 32, 40, full.len() - 4, full.len() - 1] {
        let r = run(&full[..cut]).unwrap();
        let (xid, h, body) = reply(&r);
        assert_eq!(xid, 4);
        assert_eq!(
            h,
            ReplyHeader::Accepted(AcceptStat::GarbageArgs),
            "cut {cut}"
        );
        assert!(body.is_empty());
    }
}

#[test]
fn auth_none_is_too_weak_except_where_allowed() {
    let weak = ReplyHeader::Denied(RejectStat::AuthError(AuthStat::TooWeak));
    let req = call(5, 2, 400_000, 3, 1, (AUTH_NONE, &[]), &[0, 0, 0, 1]);
    assert_eq!(auth_err(run(&req)), weak);
    let r = run_with(
        Policy {
            allow_auth_none: true,
        },
        &req,
    )
    .unwrap();
    let (_, h, body) = reply(&r);
    assert_eq!(h, ReplyHeader::Accepted(AcceptStat::Success));
    // AUTH_NONE runs as nobody.
    assert_eq!(body, [0, 0, 0, 1, 0, 0, 0xff, 0xfe]);
    // A row marked for it takes AUTH_NONE whatever the policy.
    let open = call(5, 2, 400_000, 3, 2, (AUTH_NONE, &[]), &[]);
    assert_eq!(
        reply(&run(&open).unwrap()).1,
        ReplyHeader::Accepted(AcceptStat::Success)
    );
}

#[test]
fn bad_arguments_are_garbage_args() {
    let c = sys(1);
    // ECHO wants a u32 and gets two bytes.
    let r = run(&call(6, 2, 400_000, 3, 1, (AUTH_SYS, &c), &[0, 1])).unwrap();
    let (xid, h, body) = reply(&r);
    assert_eq!(
        (xid, h),
        (6, ReplyHeader::Accepted(AcceptStat::GarbageArgs))
    );
    assert!(body.is_empty());
}

#[test]
fn handler_errors_map_to_rpc_errors() {
    let c = sys(1);
    let go = |p| run(&call(12, 2, 400_001, 1, p, (AUTH_SYS, &c), &[]));
    for (p, want) in [
        (1, ReplyHeader::Accepted(AcceptStat::GarbageArgs)),
        (2, ReplyHeader::Accepted(AcceptStat::SystemErr)),
        (
            3,
            ReplyHeader::Denied(RejectStat::AuthError(AuthStat::TooWeak)),
        ),
        (5, ReplyHeader::Accepted(AcceptStat::SystemErr)),
    ] {
        let r = go(p).unwrap();
        let (xid, h, body) = reply(&r);
        assert_eq!((xid, h), (12, want), "proc {p}");
        assert!(body.is_empty(), "partial result leaked for proc {p}");
    }
    assert_eq!(go(4), None);
}

#[test]
fn panic_does_not_escape_and_server_keeps_working() {
    let c = sys(1);
    for _ in 0..3 {
        let r = run(&call(13, 2, 400_001, 1, 5, (AUTH_SYS, &c), &[])).unwrap();
        assert_eq!(reply(&r).1, ReplyHeader::Accepted(AcceptStat::SystemErr));
    }
    let r = run(&call(14, 2, 400_000, 3, 1, (AUTH_SYS, &c), &[0, 0, 0, 3])).unwrap();
    assert_eq!(reply(&r).1, ReplyHeader::Accepted(AcceptStat::Success));
}

static RUNS: AtomicU32 = AtomicU32::new(0);
fn counted(_: &Ctx<'_>, x: u32) -> Result<u32, ProcError> {
    Ok(x + RUNS.fetch_add(1, SeqCst))
}
fn counted_fail(_: &Ctx<'_>, _: ()) -> Result<(), ProcError> {
    RUNS.fetch_add(1, SeqCst);
    Err(ProcError::SystemErr)
}
static DRC_PROG: Program<Toy> = Program {
    name: "drc",
    prog: 400_002,
    versions: &[Version {
        vers: 1,
        procs: &[
            proc_entry!("NULL", (), null, CacheClass::None, 0),
            proc_entry!("IDEM", u32, counted, CacheClass::None, 4),
            proc_entry!("NONIDEM", u32, counted, CacheClass::Reply, 4),
            proc_entry!("FAILS", (), counted_fail, CacheClass::Reply, 0),
        ],
    }],
};

#[test]
fn reply_cache_replays_non_idempotent_calls_only() {
    let drc = Arc::new(Drc::new(DrcConfig::default()));
    let svc = RpcService::new(Arc::new(Toy), vec![&DRC_PROG], Policy::default())
        .with_drc(Some(drc.clone()));
    let go = |req: &[u8], peer| reply(&svc.answer(req, peer, local()).unwrap().buf).2;
    let c = sys(1);
    let non = call(20, 2, 400_002, 1, 2, (AUTH_SYS, &c), &[0, 0, 0, 100]);
    let first = go(&non, peer());
    // Same xid, peer and arguments: the first reply, not a second run.
    assert_eq!(go(&non, peer()), first);
    // Another source port is another client.
    assert_ne!(go(&non, "127.0.0.1:901".parse().unwrap()), first);
    // Another xid runs again.
    let non2 = call(21, 2, 400_002, 1, 2, (AUTH_SYS, &c), &[0, 0, 0, 100]);
    assert_ne!(go(&non2, peer()), first);
    // Idempotent procedures are never cached.
    let idem = call(22, 2, 400_002, 1, 1, (AUTH_SYS, &c), &[0, 0, 0, 100]);
    assert_ne!(go(&idem, peer()), go(&idem, peer()));
    // A failed call is not kept: the retransmission runs again.
    let fails = call(23, 2, 400_002, 1, 3, (AUTH_SYS, &c), &[]);
    let n = RUNS.load(SeqCst);
    go(&fails, peer());
    go(&fails, peer());
    assert_eq!(RUNS.load(SeqCst), n + 2);
    assert_eq!(drc.entries(), 3);
}

/// What a parked reply waits for, decided in advance.
struct Decided(bool);
impl Wait for Decided {
    fn then(self: Box<Self>, f: Box<dyn FnOnce(bool) + Send>) {
        f(self.0)
    }
    fn wait(self: Box<Self>) -> bool {
        self.0
    }
}
fn parks(ctx: &Ctx<'_>, ok: u32) -> Result<u32, ProcError> {
    ctx.park(Box::new(Decided(ok == 1)), vec![0, 0, 0, 5, 0, 0, 0, 0]);
    Ok(7)
}
static PARK_PROG: Program<Toy> = Program {
    name: "park",
    prog: 400_003,
    versions: &[Version {
        vers: 1,
        procs: &[
            proc_entry!("NULL", (), null, CacheClass::None, 0),
            proc_entry!("PARK", u32, parks, CacheClass::Reply, 8),
        ],
    }],
};

/// A reply parked on a wait leaves once it succeeds; if it fails, the
/// call answers the failure body its handler left (after a SUCCESS
/// header: it is the procedure's own error). Where nobody can send it
/// later, dispatch waits here.
#[test]
fn a_parked_reply_answers_its_failure_when_the_wait_fails() {
    let svc = RpcService::new(Arc::new(Toy), vec![&PARK_PROG], Policy::default());
    let c = sys(1);
    let (xid, h, body) = reply(
        &svc.answer(
            &call(30, 2, 400_003, 1, 1, (AUTH_SYS, &c), &[0, 0, 0, 1]),
            peer(),
            local(),
        )
        .unwrap()
        .buf,
    );
    assert_eq!((xid, h), (30, ReplyHeader::Accepted(AcceptStat::Success)));
    assert_eq!(body, [0, 0, 0, 7]);
    let (_, h, body) = reply(
        &svc.answer(
            &call(31, 2, 400_003, 1, 1, (AUTH_SYS, &c), &[0, 0, 0, 0]),
            peer(),
            local(),
        )
        .unwrap()
        .buf,
    );
    assert_eq!(h, ReplyHeader::Accepted(AcceptStat::Success));
    assert_eq!(body, [0, 0, 0, 5, 0, 0, 0, 0]);
}

/// The loop's plan: the row's route and room from the arguments' start,
/// and its number in the tag; nothing planned for records dispatch must
/// refuse.
#[test]
fn plans_read_the_header_once_and_ask_the_row() {
    let svc = service(Policy::default());
    let c = sys(1);
    let p = svc.plan(&call(1, 2, 400_000, 3, 3, (AUTH_SYS, &c), &[0, 0, 0, 9]));
    assert_eq!((p.route, p.reply_bound), (Route::Quick, 9));
    assert_ne!(p.tag, 0);
    let p2 = svc.plan(&call(1, 2, 400_000, 3, 3, (AUTH_SYS, &c), &[0, 0, 0, 8]));
    assert_eq!((p2.route, p2.reply_bound, p2.tag), (Route::Pool, 8, p.tag));
    let p = svc.plan(&call(1, 2, 400_000, 3, 1, (AUTH_SYS, &c), &[0, 0, 0, 9]));
    assert_eq!((p.route, p.reply_bound), (Route::Pool, 0));
    for bad in [
        call(1, 3, 400_000, 3, 1, (AUTH_SYS, &c), &[]),
        call(1, 2, 123, 3, 1, (AUTH_SYS, &c), &[]),
        call(1, 2, 400_000, 3, 9, (AUTH_SYS, &c), &[]),
        vec![0, 0, 0, 1],
    ] {
        assert_eq!(svc.plan(&bad), Plan::default());
    }
}

#[test]
fn with_stats_counts_calls_and_outcomes() {
    let descs = [(0, "NULL"), (1, "ECHO"), (2, "OPEN"), (3, "ROOM")]
        .into_iter()
        .map(|(i, name)| rnfsd_stats::ProcDesc {
            program: "test",
            prog: 400_000,
            vers: 3,
            proc_: i,
            name,
        })
        .collect();
    let reg = Arc::new(rnfsd_stats::Registry::new(
        rnfsd_stats::Mode::Percore,
        descs,
    ));
    let svc = service(Policy::default()).with_stats(reg.clone());
    let c = sys(1);
    for _ in 0..3 {
        svc.answer(
            &call(1, 2, 400_000, 3, 0, (AUTH_NONE, &[]), &[]),
            peer(),
            local(),
        )
        .unwrap();
    }
    svc.answer(
        &call(2, 2, 400_000, 3, 1, (AUTH_NONE, &[]), &[0, 0, 0, 1]),
        peer(),
        local(),
    )
    .unwrap();
    svc.answer(
        &call(3, 2, 400_009, 3, 1, (AUTH_SYS, &c), &[]),
        peer(),
        local(),
    )
    .unwrap();
    let n = reg.snapshot();
    assert_eq!((n.rpc.records, n.rpc.success), (5, 3));
    assert_eq!(n.rpc.auth_errors["AUTH_TOOWEAK"], 1);
    assert_eq!(n.rpc.prog_unavail, 1);
    assert_eq!(n.proc("test", "NULL").unwrap().calls, 3);
    assert_eq!(n.proc("test", "ECHO").unwrap().calls, 1);
}

static TEST_PROG_V7: Program<Toy> = Program {
    name: "test",
    prog: 400_000,
    versions: &[Version { vers: 7, procs: V3 }],
};

/// A program's versions served from two tables (as NFSv3 and NFSv4 are):
/// both answer, and PROG_MISMATCH names the range of both.
#[test]
fn versions_of_one_program_in_two_tables() {
    let svc = RpcService::new(
        Arc::new(Toy),
        vec![&TEST_PROG, &TEST_PROG_V7],
        Policy::default(),
    );
    let c = sys(1);
    let r = svc
        .answer(
            &call(1, 2, 400_000, 7, 1, (AUTH_SYS, &c), &[0, 0, 0, 5]),
            peer(),
            local(),
        )
        .unwrap();
    assert_eq!(reply(&r.buf).1, ReplyHeader::Accepted(AcceptStat::Success));
    let r = svc
        .answer(
            &call(2, 2, 400_000, 4, 0, (AUTH_SYS, &c), &[]),
            peer(),
            local(),
        )
        .unwrap();
    assert_eq!(
        reply(&r.buf).1,
        ReplyHeader::Accepted(AcceptStat::ProgMismatch { low: 2, high: 7 })
    );
}
