//! The back channel (RFC 8881 §2.10.3.1) end to end, over real TCP on
//! 127.0.0.1: an RPC service with a [`BackChannel`] on the transport, a
//! toy program whose BIND handler keeps its caller's back channel, and a
//! test client (a std `TcpStream` speaking record marking) that is also
//! the callback server: it makes calls and answers the server's calls on
//! the same socket.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rnfsd_proto::rpc::{
    encode_accepted, encode_denied, AcceptStat, AuthStat, AuthSys, RejectStat, ReplyHeader,
    AUTH_NONE, AUTH_SYS, MSG_CALL, MSG_REPLY,
};
use rnfsd_rpc::{
    proc_entry, Auth, BackChannel, BackChannelConfig, BackConn, CacheClass, CallCtx, CallError,
    Class, LoopState, Policy, Proc, Program, RpcService, State, Version,
};
use rnfsd_transport::{Handle, PoolConfig, Transport, TransportConfig};
use rnfsd_xdr::{Dec, Enc};

/// The toy server: the back channels its BIND calls kept.
#[derive(Default)]
struct Toy {
    bound: Mutex<Vec<BackConn>>,
}

struct Lp;
impl LoopState for Lp {}

impl State for Toy {
    type Loop = Lp;
    fn new_loop(&self) -> Option<Lp> {
        Some(Lp)
    }
}

type Ctx<'a> = CallCtx<'a, Toy>;

fn null(_: &Ctx<'_>, _: ()) -> Result<(), rnfsd_rpc::ProcError> {
    Ok(())
}

/// Keeps the caller's back channel; answers its connection id, or 0 when
/// it has none.
fn bind(ctx: &Ctx<'_>, _: ()) -> Result<u64, rnfsd_rpc::ProcError> {
    match ctx.back_channel() {
        Some(b) => {
            assert_eq!(b.id(), ctx.conn_id());
            ctx.server.bound.lock().unwrap().push(b);
            Ok(ctx.conn_id())
        }
        None => Ok(0),
    }
}

fn echo(_: &Ctx<'_>, x: u32) -> Result<u32, rnfsd_rpc::ProcError> {
    Ok(x)
}

/// On the event loop: whether a back channel is offered there (never).
fn quick(ctx: &Ctx<'_>, _: ()) -> Result<u32, rnfsd_rpc::ProcError> {
    assert!(ctx.on_loop.is_some(), "runs on the loop");
    Ok(ctx.back_channel().is_some() as u32)
}

const PROG: u32 = 400_100;
const BIND: u32 = 1;
const ECHO: u32 = 2;
const QUICK: u32 = 3;

static PROCS: &[Proc<Toy>] = &[
    proc_entry!("NULL", (), null, CacheClass::None, 0),
    proc_entry!("BIND", (), bind, CacheClass::None, 8),
    proc_entry!("ECHO", u32, echo, CacheClass::None, 4),
    proc_entry!("QUICK", (), quick, CacheClass::None, 4, Class::Quick),
];
static TOY_PROG: Program<Toy> = Program {
    name: "toy",
    prog: PROG,
    versions: &[Version {
        vers: 1,
        procs: PROCS,
    }],
};

/// The program the test client serves on its side (CB_NULL-like calls).
const CB_PROG: u32 = 0x4000_0123;

struct Server {
    toy: Arc<Toy>,
    bc: BackChannel,
    reg: Arc<rnfsd_stats::Registry>,
    h: Handle,
}

fn server_with(cfg: BackChannelConfig) -> Server {
    let toy = Arc::new(Toy::default());
    let bc = BackChannel::new(cfg);
    let reg = Arc::new(rnfsd_stats::Registry::new(
        rnfsd_stats::Mode::Shared,
        Vec::new(),
    ));
    let svc = RpcService::new(
        toy.clone(),
        vec![&TOY_PROG],
        Policy {
            allow_auth_none: true,
        },
    )
    .with_back_channel(bc.clone())
    .with_stats(reg.clone());
    let h = Transport::start(
        TransportConfig {
            listen: vec!["127.0.0.1:0".parse().unwrap()],
            ..Default::default()
        },
        PoolConfig::default(),
        Arc::new(svc),
    )
    .unwrap();
    Server { toy, bc, reg, h }
}

fn server() -> Server {
    server_with(BackChannelConfig::default())
}

impl Server {
    /// The back channel the BIND of connection `id` kept.
    fn bound(&self, id: u64) -> BackConn {
        let b = self.toy.bound.lock().unwrap();
        b.iter().find(|b| b.id() == id).cloned().expect("bound")
    }
}

/// A CALL of the server's, as the client reads it.
#[derive(Debug)]
struct Cb {
    xid: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    cred: (u32, Vec<u8>),
    args: Vec<u8>,
}

/// What the client reads: the server's REPLY to one of its calls, or a
/// CALL of the server's.
#[derive(Debug)]
enum In {
    Reply { xid: u32, body: Vec<u8> },
    Call(Cb),
}

struct Client {
    s: TcpStream,
    xid: u32,
}

fn record(body: &[u8]) -> Vec<u8> {
    let mut v = (0x8000_0000u32 | body.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(body);
    v
}

fn call_body(xid: u32, proc_: u32, args: &[u8]) -> Vec<u8> {
    let mut e = Enc::new();
    for w in [xid, MSG_CALL, 2, PROG, 1, proc_, AUTH_NONE, 0, AUTH_NONE, 0] {
        e.u32(w);
    }
    e.raw(args);
    e.into_vec()
}

/// An accepted REPLY to the server's call `xid`.
fn accepted(xid: u32, stat: AcceptStat, body: &[u8]) -> Vec<u8> {
    let mut e = Enc::new();
    encode_accepted(&mut e, xid, stat);
    e.raw(body);
    record(e.as_slice())
}

fn denied(xid: u32, stat: RejectStat) -> Vec<u8> {
    let mut e = Enc::new();
    encode_denied(&mut e, xid, stat);
    record(e.as_slice())
}

impl Client {
    fn connect(sv: &Server) -> Client {
        let s = TcpStream::connect(sv.h.local_addrs()[0]).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Client { s, xid: 1 }
    }

    fn send_call(&mut self, proc_: u32, args: &[u8]) -> u32 {
        self.xid += 1;
        self.s
            .write_all(&record(&call_body(self.xid, proc_, args)))
            .unwrap();
        self.xid
    }

    fn read(&mut self) -> In {
        let mut h = [0u8; 4];
        self.s.read_exact(&mut h).unwrap();
        let v = u32::from_be_bytes(h);
        assert!(v & 0x8000_0000 != 0, "one fragment");
        let mut b = vec![0u8; (v & 0x7fff_ffff) as usize];
        self.s.read_exact(&mut b).unwrap();
        let mut d = Dec::new(&b);
        let xid = d.u32().unwrap();
        match d.u32().unwrap() {
            MSG_REPLY => {
                let mut d = Dec::new(&b);
                let (_, h) = ReplyHeader::decode(&mut d).unwrap();
                assert_eq!(h, ReplyHeader::Accepted(AcceptStat::Success));
                In::Reply {
                    xid,
                    body: d.rest().to_vec(),
                }
            }
            MSG_CALL => {
                assert_eq!(d.u32().unwrap(), 2, "RPC version 2");
                let (prog, vers, proc_) = (d.u32().unwrap(), d.u32().unwrap(), d.u32().unwrap());
                let flavor = d.u32().unwrap();
                let cred = d.opaque(400).unwrap().to_vec();
                assert_eq!((d.u32().unwrap(), d.u32().unwrap()), (AUTH_NONE, 0));
                In::Call(Cb {
                    xid,
                    prog,
                    vers,
                    proc_,
                    cred: (flavor, cred),
                    args: d.rest().to_vec(),
                })
            }
            t => panic!("msg_type {t}"),
        }
    }

    /// A call of ours and its reply's body (no server call meanwhile).
    fn call(&mut self, proc_: u32, args: &[u8]) -> Vec<u8> {
        let xid = self.send_call(proc_, args);
        match self.read() {
            In::Reply { xid: x, body } if x == xid => body,
            other => panic!("expected the reply to {xid}, got {other:?}"),
        }
    }

    /// BIND: the server keeps our back channel; our connection's id.
    fn bind(&mut self) -> u64 {
        let b = self.call(BIND, &[]);
        u64::from_be_bytes(b[..8].try_into().unwrap())
    }

    /// The next server call (no reply of ours meanwhile).
    fn server_call(&mut self) -> Cb {
        match self.read() {
            In::Call(cb) => cb,
            other => panic!("expected a server call, got {other:?}"),
        }
    }
}

fn secs(n: u64) -> Instant {
    Instant::now() + Duration::from_secs(n)
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let end = secs(10);
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_callback_and_its_reply_on_the_callers_connection() {
    let sv = server();
    let mut c = Client::connect(&sv);
    let id = c.bind();
    assert_ne!(id, 0);
    let cb = sv.bound(id);
    assert!(cb.is_open());
    // A CB_NULL-like ping, from a background thread as a recall would be.
    let t = {
        let cb = cb.clone();
        thread::spawn(move || cb.call(CB_PROG, 1, 0, &Auth::None, &[], secs(10)))
    };
    let Cb {
        xid,
        prog,
        vers,
        proc_,
        cred,
        args,
    } = c.server_call();
    assert_eq!((prog, vers, proc_), (CB_PROG, 1, 0));
    assert_eq!(cred, (AUTH_NONE, vec![]));
    assert!(args.is_empty());
    c.s.write_all(&accepted(xid, AcceptStat::Success, &[]))
        .unwrap();
    assert_eq!(t.join().unwrap(), Ok(vec![]));
    // With AUTH_SYS and arguments; the results come back as sent.
    let sys = AuthSys {
        stamp: 9,
        machine_name: b"server".to_vec(),
        uid: 0,
        gid: 0,
        gids: vec![1, 2],
    };
    let t = {
        let cb = cb.clone();
        let sys = sys.clone();
        thread::spawn(move || cb.call(CB_PROG, 1, 1, &Auth::Sys(sys), &[1, 2, 3, 4], secs(10)))
    };
    let Cb {
        xid: xid2,
        proc_,
        cred,
        args,
        ..
    } = c.server_call();
    assert_ne!(xid2, xid);
    assert_eq!(proc_, 1);
    assert_eq!(cred.0, AUTH_SYS);
    assert_eq!(rnfsd_xdr::from_slice::<AuthSys>(&cred.1).unwrap(), sys);
    assert_eq!(args, [1, 2, 3, 4]);
    c.s.write_all(&accepted(
        xid2,
        AcceptStat::Success,
        &[0, 0, 0, 7, 9, 9, 9, 9],
    ))
    .unwrap();
    assert_eq!(t.join().unwrap(), Ok(vec![0, 0, 0, 7, 9, 9, 9, 9]));
    // Our own calls go on as ever.
    assert_eq!(c.call(ECHO, &[0, 0, 0, 5]), [0, 0, 0, 5]);
    let st = sv.bc.stats();
    assert_eq!(
        (st.sent, st.replied, st.pending, st.unmatched),
        (2, 2, 0, 0)
    );
}

#[test]
fn error_replies_are_told_apart() {
    let sv = server();
    let mut c = Client::connect(&sv);
    let cb = sv.bound(c.bind());
    type Answer = Box<dyn Fn(u32) -> Vec<u8>>;
    let answers: Vec<(Answer, CallError)> = vec![
        (
            Box::new(|x| accepted(x, AcceptStat::ProcUnavail, &[])),
            CallError::Accepted(AcceptStat::ProcUnavail),
        ),
        (
            Box::new(|x| accepted(x, AcceptStat::ProgMismatch { low: 4, high: 4 }, &[])),
            CallError::Accepted(AcceptStat::ProgMismatch { low: 4, high: 4 }),
        ),
        (
            Box::new(|x| denied(x, RejectStat::AuthError(AuthStat::TooWeak))),
            CallError::Denied(RejectStat::AuthError(AuthStat::TooWeak)),
        ),
        (
            // A REPLY whose header breaks off after its reply_stat.
            Box::new(|x| {
                record(&[x.to_be_bytes(), 1u32.to_be_bytes(), 0u32.to_be_bytes()].concat())
            }),
            CallError::Garbage,
        ),
    ];
    for (answer, want) in answers {
        let p = cb.start(CB_PROG, 1, 9, &Auth::None, &[], secs(10)).unwrap();
        let xid = c.server_call().xid;
        assert_eq!(xid, p.xid());
        c.s.write_all(&answer(xid)).unwrap();
        assert_eq!(p.wait(), Err(want));
    }
    let st = sv.bc.stats();
    assert_eq!((st.sent, st.replied, st.failed, st.pending), (4, 0, 4, 0));
}

#[test]
fn a_client_that_never_answers_times_out_and_its_call_is_freed() {
    let sv = server();
    let mut c = Client::connect(&sv);
    let cb = sv.bound(c.bind());
    let t0 = Instant::now();
    let r = cb.call(
        CB_PROG,
        1,
        0,
        &Auth::None,
        &[],
        t0 + Duration::from_millis(300),
    );
    let took = t0.elapsed();
    assert_eq!(r, Err(CallError::Timeout));
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "{took:?}"
    );
    let st = sv.bc.stats();
    assert_eq!((st.timed_out, st.pending), (1, 0));
    // A call nobody waits for is freed once past its deadline too.
    let p = cb
        .start(
            CB_PROG,
            1,
            0,
            &Auth::None,
            &[],
            Instant::now() + Duration::from_millis(100),
        )
        .unwrap();
    assert_eq!(sv.bc.stats().pending, 1);
    thread::sleep(Duration::from_millis(150));
    assert_eq!(sv.bc.stats().pending, 0);
    assert!(p.is_done());
    let late = p.xid();
    assert_eq!(p.wait(), Err(CallError::Timeout));
    // The client answers both at last: too late, dropped and counted.
    let x1 = c.server_call().xid;
    let x2 = c.server_call().xid;
    assert_eq!(x2, late);
    for x in [x1, x2] {
        c.s.write_all(&accepted(x, AcceptStat::Success, &[]))
            .unwrap();
    }
    wait_until("the late replies", || sv.bc.stats().unmatched == 2);
    let st = sv.bc.stats();
    assert_eq!((st.timed_out, st.replied, st.pending), (2, 0, 0));
    // And the connection still serves calls.
    assert_eq!(c.call(ECHO, &[0, 0, 0, 1]), [0, 0, 0, 1]);
}

#[test]
fn a_client_that_closes_fails_its_pending_calls_at_once() {
    let sv = server();
    let mut c = Client::connect(&sv);
    let cb = sv.bound(c.bind());
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let cb = cb.clone();
            thread::spawn(move || {
                let r = cb.call(CB_PROG, 1, 0, &Auth::None, &[], secs(30));
                (r, Instant::now())
            })
        })
        .collect();
    for _ in 0..3 {
        c.server_call();
    }
    assert_eq!(sv.bc.stats().pending, 3);
    let closed_at = Instant::now();
    drop(c);
    for w in waiters {
        let (r, at) = w.join().unwrap();
        assert_eq!(r, Err(CallError::Closed));
        assert!(at - closed_at < Duration::from_secs(2), "failed at once");
    }
    let st = sv.bc.stats();
    assert_eq!((st.closed, st.pending), (3, 0));
    // Nothing more can go there.
    assert!(!cb.is_open());
    assert_eq!(
        cb.call(CB_PROG, 1, 0, &Auth::None, &[], secs(10)),
        Err(CallError::Closed)
    );
    assert_eq!(sv.bc.stats().closed, 4);
}

/// The records in a run of one-fragment records.
fn flood_len(mut b: &[u8]) -> u64 {
    let mut n = 0;
    while b.len() >= 4 {
        let len = (u32::from_be_bytes(b[..4].try_into().unwrap()) & 0x7fff_ffff) as usize;
        b = &b[4 + len..];
        n += 1;
    }
    n
}

#[test]
fn a_flood_of_unknown_replies_is_dropped_and_grows_nothing() {
    let sv = server();
    let mut c = Client::connect(&sv);
    let mut other = Client::connect(&sv);
    let cb = sv.bound(c.bind());
    other.bind();
    // One real call pending on `c`; its xid answered on the other
    // connection matches nothing.
    let p = cb.start(CB_PROG, 1, 0, &Auth::None, &[], secs(30)).unwrap();
    let xid = c.server_call().xid;
    let unknown = |n: u32| {
        let mut v = Vec::new();
        for i in 0..n {
            let x = i.wrapping_mul(2_654_435_761) ^ 0x5555;
            if x == xid {
                continue;
            }
            v.extend_from_slice(&accepted(x, AcceptStat::Success, &[0; 8]));
        }
        v
    };
    let mut other_flood = unknown(5000);
    other_flood.extend_from_slice(&accepted(xid, AcceptStat::Success, &[]));
    other.s.write_all(&other_flood).unwrap();
    let own_flood = unknown(2500);
    c.s.write_all(&own_flood).unwrap();
    // Calls still answered, behind the flood.
    assert_eq!(other.call(ECHO, &[0, 0, 0, 2]), [0, 0, 0, 2]);
    let want = flood_len(&other_flood) + flood_len(&own_flood);
    wait_until("the flood", || {
        sv.bc.stats().unmatched >= want && sv.reg.snapshot().rpc.dropped >= want
    });
    let st = sv.bc.stats();
    assert_eq!((st.unmatched, st.pending, st.replied), (want, 1, 0));
    assert!(!p.is_done());
    // Counted as any record dropped; not as calls.
    let rpc = sv.reg.snapshot().rpc;
    assert_eq!((rpc.dropped, rpc.records), (want, 3 + want));
    // The real one, on its own connection, still matches.
    c.s.write_all(&accepted(xid, AcceptStat::Success, &[1, 2, 3, 4]))
        .unwrap();
    assert_eq!(p.wait(), Ok(vec![1, 2, 3, 4]));
    assert_eq!(sv.h.stats().back_replies_in, want + 1);
}

#[test]
fn callbacks_interleave_with_pipelined_calls() {
    let sv = server();
    let mut c = Client::connect(&sv);
    let cb = sv.bound(c.bind());
    // Four threads send 25 callbacks each while the client pipelines 200
    // calls; the client answers each callback as it reads it.
    let senders: Vec<_> = (0..4u32)
        .map(|t| {
            let cb = cb.clone();
            thread::spawn(move || {
                for i in 0..25u32 {
                    let n = t * 100 + i;
                    let r = cb.call(CB_PROG, 1, 1, &Auth::None, &n.to_be_bytes(), secs(20));
                    // The client answers with its arguments doubled.
                    assert_eq!(r, Ok((2 * n).to_be_bytes().to_vec()));
                }
            })
        })
        .collect();
    let mut w = c.s.try_clone().unwrap();
    let writer = thread::spawn(move || {
        for i in 0..200u32 {
            w.write_all(&record(&call_body(1000 + i, ECHO, &i.to_be_bytes())))
                .unwrap();
        }
    });
    let (mut echoes, mut calls) = (Vec::new(), 0);
    while echoes.len() < 200 || calls < 100 {
        match c.read() {
            In::Reply { xid, body } => echoes.push((xid, body)),
            In::Call(Cb { xid, args, .. }) => {
                let n = u32::from_be_bytes(args[..4].try_into().unwrap());
                // The writer thread writes calls meanwhile: one write each.
                c.s.write_all(&accepted(xid, AcceptStat::Success, &(2 * n).to_be_bytes()))
                    .unwrap();
                calls += 1;
            }
        }
    }
    writer.join().unwrap();
    for s in senders {
        s.join().unwrap();
    }
    echoes.sort();
    let want: Vec<(u32, Vec<u8>)> = (0..200u32)
        .map(|i| (1000 + i, i.to_be_bytes().to_vec()))
        .collect();
    assert_eq!(echoes, want);
    let st = sv.bc.stats();
    assert_eq!(
        (st.sent, st.replied, st.unmatched, st.pending),
        (100, 100, 0, 0)
    );
}

#[test]
fn pending_calls_are_bounded_per_connection_and_in_all() {
    let sv = server_with(BackChannelConfig {
        max_pending_per_conn: 4,
        max_pending: 6,
        max_wait: Duration::from_secs(2),
    });
    let mut a = Client::connect(&sv);
    let mut b = Client::connect(&sv);
    let ca = sv.bound(a.bind());
    let cb = sv.bound(b.bind());
    let start = |c: &BackConn| c.start(CB_PROG, 1, 0, &Auth::None, &[], secs(3600));
    let mut on_a: Vec<_> = (0..4).map(|_| start(&ca).unwrap()).collect();
    assert_eq!(start(&ca).unwrap_err(), CallError::TooMany);
    let on_b: Vec<_> = (0..2).map(|_| start(&cb).unwrap()).collect();
    assert_eq!(start(&cb).unwrap_err(), CallError::TooMany, "6 in all");
    assert_eq!(sv.bc.stats().pending, 6);
    // One answered frees a place.
    let xid = a.server_call().xid;
    a.s.write_all(&accepted(xid, AcceptStat::Success, &[]))
        .unwrap();
    let first = on_a.remove(0);
    assert_eq!(first.xid(), xid);
    assert_eq!(first.wait(), Ok(vec![]));
    let again = start(&cb).unwrap();
    // One dropped frees its place at once.
    drop(on_a.pop());
    assert_eq!(sv.bc.stats().pending, 5);
    // An hour's deadline is brought to max_wait.
    let t0 = Instant::now();
    assert_eq!(again.wait(), Err(CallError::Timeout));
    assert!(t0.elapsed() < Duration::from_secs(10));
    for p in on_a.into_iter().chain(on_b) {
        assert_eq!(p.wait(), Err(CallError::Timeout));
    }
    let st = sv.bc.stats();
    assert_eq!(
        (st.refused, st.pending, st.replied, st.timed_out),
        (2, 0, 1, 5)
    );
}

#[test]
fn only_pool_calls_of_a_service_with_a_back_channel_get_one() {
    let sv = server();
    let mut c = Client::connect(&sv);
    // Tried on the event loop: no handle there.
    assert_eq!(c.call(QUICK, &[]), [0, 0, 0, 0]);
    assert_ne!(c.bind(), 0);
    // A service without a back channel offers none, and drops REPLYs as
    // any record that is not a call.
    let toy = Arc::new(Toy::default());
    let svc = RpcService::new(
        toy.clone(),
        vec![&TOY_PROG],
        Policy {
            allow_auth_none: true,
        },
    );
    let h = Transport::start(
        TransportConfig {
            listen: vec!["127.0.0.1:0".parse().unwrap()],
            ..Default::default()
        },
        PoolConfig::default(),
        Arc::new(svc),
    )
    .unwrap();
    let s = TcpStream::connect(h.local_addrs()[0]).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut c = Client { s, xid: 1 };
    c.s.write_all(&accepted(77, AcceptStat::Success, &[]))
        .unwrap();
    assert_eq!(c.bind(), 0);
    assert!(toy.bound.lock().unwrap().is_empty());
    assert_eq!(h.stats().back_replies_in, 0);
}
