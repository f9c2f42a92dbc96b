//! Dispatch: header checks, auth, program lookup, reply framing.
//!
//! Follows RFC 5531 §9 and the order of Linux's `svc_process_common`
//! (net/sunrpc/svc.c): header, RPC version, credentials, program, version,
//! procedure, then the handler. A header too short to answer is dropped.

use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use rnfsd_proto::rpc::{
    encode_accepted, encode_denied, AcceptStat, AuthStat, AuthSys, RejectStat, AUTH_NONE, AUTH_SYS,
    MAX_AUTH_BYTES, MSG_CALL, RPC_VERSION,
};
use rnfsd_xdr::{Dec, Enc};

use rnfsd_fs::owed::Owed;
use rnfsd_transport::{Later, Reply, Responder};

use super::{Auth, CacheClass, CallCtx, Proc, ProcError, Program};
use crate::drc::{Drc, Key, Lookup};
use crate::state::Server;

/// Room for the longest reply header we write (a PROG_MISMATCH accepted
/// reply: xid, type, stat, null verifier, accept_stat, low, high).
const MAX_REPLY_HEADER: usize = 32;

/// Server-wide dispatch settings from the configuration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Policy {
    /// Accept AUTH_NONE for every procedure. When false, AUTH_NONE is
    /// answered AUTH_ERROR TOOWEAK except where `auth_none_always_ok` says.
    pub allow_auth_none: bool,
}

/// Procedures that take AUTH_NONE whatever the policy: every NULL
/// procedure (RFC 5531 §8.2 pings), the whole port mapper (an unauthenticated
/// service by design, RFC 1833), MOUNT EXPORT (`showmount -e` sends
/// AUTH_NONE) and the status monitor (statd and sm-notify send SM_NOTIFY
/// with AUTH_NONE; SM_NOTIFY is checked against the caller's address).
fn auth_none_always_ok(prog: u32, proc_: u32) -> bool {
    proc_ == 0
        || prog == rnfsd_proto::portmap::PROGRAM
        || prog == rnfsd_proto::nsm::PROGRAM
        || (prog == rnfsd_proto::mount::PROGRAM && proc_ == rnfsd_proto::mount::PROC_EXPORT)
}

/// Why the credential or verifier was not accepted.
enum AuthFail {
    /// The credential or verifier ran past the record (knfsd: SVC_GARBAGE).
    Garbage,
    Denied(AuthStat),
}

/// Decode cred and verifier (RFC 5531 §8.2, appendix A), as knfsd's
/// `svcauth_null_accept` / `svcauth_unix_accept` do.
fn decode_auth(d: &mut Dec<'_>) -> Result<Auth, AuthFail> {
    let flavor = d.u32().map_err(|_| AuthFail::Garbage)?;
    let auth = match flavor {
        AUTH_NONE => {
            let len = d.u32().map_err(|_| AuthFail::Garbage)?;
            if len != 0 {
                return Err(AuthFail::Denied(AuthStat::BadCred));
            }
            Auth::None
        }
        AUTH_SYS => {
            let len = d.u32().map_err(|_| AuthFail::Garbage)? as usize;
            if len > MAX_AUTH_BYTES {
                return Err(AuthFail::Denied(AuthStat::BadCred));
            }
            let body = d.opaque_fixed(len).map_err(|_| AuthFail::Garbage)?;
            // The body must be exactly one authsys_parms within its bounds.
            let sys: AuthSys =
                rnfsd_xdr::from_slice(body).map_err(|_| AuthFail::Denied(AuthStat::BadCred))?;
            Auth::Sys(sys)
        }
        // knfsd answers any flavor it has no handler for with BADCRED.
        _ => return Err(AuthFail::Denied(AuthStat::BadCred)),
    };
    // Both flavors take only a null verifier.
    let vflavor = d.u32().map_err(|_| AuthFail::Garbage)?;
    let vlen = d.u32().map_err(|_| AuthFail::Garbage)?;
    if vflavor != AUTH_NONE || vlen != 0 {
        return Err(AuthFail::Denied(AuthStat::BadVerf));
    }
    Ok(auth)
}

fn accepted(xid: u32, stat: AcceptStat) -> Vec<u8> {
    let mut e = Enc::from_vec(rnfsd_transport::reply_buffer(MAX_REPLY_HEADER));
    encode_accepted(&mut e, xid, stat);
    e.into_vec()
}

fn denied(xid: u32, stat: RejectStat) -> Vec<u8> {
    let mut e = Enc::from_vec(rnfsd_transport::reply_buffer(MAX_REPLY_HEADER));
    encode_denied(&mut e, xid, stat);
    e.into_vec()
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = p.downcast_ref::<&str>() {
        s
    } else if let Some(s) = p.downcast_ref::<String>() {
        s
    } else {
        "(non-string panic)"
    }
}

/// What dispatch answers a call with.
pub enum Answer {
    /// The reply to send now (None: nothing to send).
    Now(Option<Reply>),
    /// A reply that may leave only once the journal commit its call owes
    /// is done (`rnfsd_fs::owed`): its worker goes on meanwhile.
    Parked(Parked),
}

/// A reply waiting for the journal commit its call owes, with what to send
/// instead if that commit fails, and the duplicate reply cache entry the
/// call still holds in progress (so a retransmission meanwhile is dropped).
pub struct Parked {
    reply: Reply,
    fail: Reply,
    owed: Owed,
    later: Later,
    drc: Option<(Arc<Drc>, Key)>,
}

impl Answer {
    /// The reply to send now, for callers that count nothing: a parked
    /// one is left to be sent when its commit ends (None now).
    pub fn now_or_park(self) -> Option<Reply> {
        match self {
            Answer::Now(r) => r,
            Answer::Parked(p) => {
                p.park();
                None
            }
        }
    }
}

impl Parked {
    /// The reply that leaves if the commit succeeds.
    pub fn reply(&self) -> &Reply {
        &self.reply
    }

    /// Send the reply (or the failure) from the thread that sees the commit
    /// end, and keep it in the duplicate reply cache then.
    pub fn park(self) {
        let Parked {
            reply,
            fail,
            owed,
            later,
            drc,
        } = self;
        owed.then(Box::new(move |r| {
            let reply = if r.is_ok() { reply } else { fail };
            if let Some((c, key)) = drc {
                c.finish(&key, &reply.buf);
            }
            later.send(Some(reply));
        }));
    }
}

/// Handle one request record: the reply (with 4 bytes reserved at the
/// front for the record mark), None to send nothing, or a reply parked
/// until the journal commit its call owes is done.
///
/// With a duplicate reply cache, a retransmitted non-idempotent call
/// (`CacheClass::Reply`) gets the first execution's reply, or no reply
/// while that execution still runs (see `crate::drc`).
#[allow(clippy::too_many_arguments)] // one struct per call in the RPC crate to come
pub fn dispatch(
    server: &Server,
    programs: &[&Program],
    policy: &Policy,
    drc: Option<&Arc<Drc>>,
    req: &[u8],
    peer: SocketAddr,
    local: SocketAddr,
    on_loop: Option<&rnfsd_fs::inline::Loop>,
    responder: &mut Responder,
) -> Answer {
    let mut d = Dec::new(req);
    // Without an xid there is nothing to answer to.
    let Ok(xid) = d.u32() else {
        return Answer::Now(None);
    };
    let Ok(mtype) = d.u32() else {
        return Answer::Now(None);
    };
    if mtype != MSG_CALL {
        tracing::debug!(xid, mtype, %peer, "dropping non-CALL message");
        return Answer::Now(None);
    }
    // knfsd drops a call whose fixed header is short (svc.c err_short_len).
    let (rpcvers, prog, vers, proc_) = match (d.u32(), d.u32(), d.u32(), d.u32()) {
        (Ok(a), Ok(b), Ok(c), Ok(e)) => (a, b, c, e),
        _ => {
            tracing::debug!(xid, %peer, "dropping call with short header");
            return Answer::Now(None);
        }
    };
    if rpcvers != RPC_VERSION {
        return Answer::Now(Some(
            denied(
                xid,
                RejectStat::RpcMismatch {
                    low: RPC_VERSION,
                    high: RPC_VERSION,
                },
            )
            .into(),
        ));
    }
    let auth = match decode_auth(&mut d) {
        Ok(a) => a,
        Err(AuthFail::Garbage) => {
            return Answer::Now(Some(accepted(xid, AcceptStat::GarbageArgs).into()))
        }
        Err(AuthFail::Denied(s)) => {
            tracing::debug!(xid, %peer, ?s, "credential rejected");
            return Answer::Now(Some(denied(xid, RejectStat::AuthError(s)).into()));
        }
    };
    let Some(program) = programs.iter().find(|p| p.prog == prog) else {
        return Answer::Now(Some(accepted(xid, AcceptStat::ProgUnavail).into()));
    };
    let Some(version) = program.versions.iter().find(|v| v.vers == vers) else {
        let low = program.versions.iter().map(|v| v.vers).min().unwrap_or(0);
        let high = program.versions.iter().map(|v| v.vers).max().unwrap_or(0);
        return Answer::Now(Some(
            accepted(xid, AcceptStat::ProgMismatch { low, high }).into(),
        ));
    };
    let Some(proc) = version.procs.get(proc_ as usize) else {
        return Answer::Now(Some(accepted(xid, AcceptStat::ProcUnavail).into()));
    };
    if auth == Auth::None && !policy.allow_auth_none && !auth_none_always_ok(prog, proc_) {
        return Answer::Now(Some(
            denied(xid, RejectStat::AuthError(AuthStat::TooWeak)).into(),
        ));
    }

    // As knfsd's nfsd_cache_lookup: after auth, before the handler.
    let cached = match (drc, proc.cache) {
        (Some(c), CacheClass::Reply) => {
            let key = Key::new(xid, peer, prog, vers, proc_, d.rest());
            match c.begin(&key) {
                Lookup::New => Some((c, key)),
                Lookup::Replay(r) => {
                    tracing::debug!(xid, %peer, proc = proc.name, "duplicate: replaying reply");
                    return Answer::Now(Some(r.into()));
                }
                Lookup::InProgress => {
                    tracing::debug!(xid, %peer, proc = proc.name, "duplicate in progress: dropped");
                    return Answer::Now(None);
                }
            }
        }
        _ => None,
    };
    let ctx = CallCtx {
        xid,
        peer,
        local,
        auth,
        server,
        on_loop,
        // A call run by a pool job may leave the journal commit it owes to
        // its export's commit threads, and its reply with it
        // (`rnfsd_fs::owed`).
        may_owe: responder.can_defer(),
        spliced: Default::default(),
        owed: Default::default(),
    };
    let (mut reply, ran) = execute(&ctx, program, vers, proc, &mut d);
    // Only a handler's own reply is kept; RPC-level failures run again if
    // retransmitted (knfsd: RC_NOCACHE on those paths). Replies of cached
    // procedures are all bytes (nothing spliced). Nor the reply of an
    // attempt on the event loop that gave up (an UNSTABLE WRITE on a quiet
    // loop): the call runs again in a pool and must not meet its own entry
    // there.
    let gave_up = on_loop.is_some_and(|l| l.gave_up());
    let keep = ran && reply.as_ref().is_some_and(|r| r.spliced.is_none()) && !gave_up;
    if let Some((owed, fail_body)) = ctx.owed.take() {
        let fail = failure(xid, Some(fail_body));
        match (reply, responder.defer()) {
            (Some(reply), Some(later)) => {
                let drc = match cached {
                    Some((c, key)) if keep => Some((c.clone(), key)),
                    Some((c, key)) => {
                        c.abandon(&key);
                        None
                    }
                    None => None,
                };
                return Answer::Parked(Parked {
                    reply,
                    fail,
                    owed,
                    later,
                    drc,
                });
            }
            // No reply, or no one to send it later: wait here.
            (r, _) => reply = if owed.wait().is_ok() { r } else { Some(fail) },
        }
    }
    if let Some((c, key)) = cached {
        match &reply {
            Some(r) if keep => c.finish(&key, &r.buf),
            _ => c.abandon(&key),
        }
    }
    Answer::Now(reply)
}

/// The reply of a call whose owed journal commit failed: the result body
/// its handler left for that (`CallCtx::owed`), or else SYSTEM_ERR.
fn failure(xid: u32, body: Option<Vec<u8>>) -> Reply {
    let Some(b) = body else {
        return accepted(xid, AcceptStat::SystemErr).into();
    };
    let mut e = Enc::from_vec(rnfsd_transport::reply_buffer(
        MAX_REPLY_HEADER.saturating_add(b.len()),
    ));
    encode_accepted(&mut e, xid, AcceptStat::Success);
    e.raw(&b);
    e.into_vec().into()
}

/// Bytes first reserved for a reply body.
const INITIAL_REPLY: usize = 1024;

/// Run the handler and frame its reply. The flag says whether the handler
/// completed (its reply is cacheable).
fn execute(
    ctx: &CallCtx<'_>,
    program: &Program,
    vers: u32,
    proc: &Proc,
    d: &mut Dec<'_>,
) -> (Option<Reply>, bool) {
    let xid = ctx.xid;
    // Sized for most replies; a large one (READ, READDIR) grows to what its
    // request asks for, never to the procedure's bound.
    let mut e = Enc::from_vec(rnfsd_transport::reply_buffer(
        MAX_REPLY_HEADER.saturating_add(proc.max_reply.min(INITIAL_REPLY)),
    ));
    encode_accepted(&mut e, xid, AcceptStat::Success);
    // A panicking handler must not take the worker thread (or the server)
    // with it: answer SYSTEM_ERR instead. The handler's state is its own
    // call's, so nothing shared is left half-updated by unwinding past it
    // except what sits behind a Mutex, which poisoning reports.
    let res = catch_unwind(AssertUnwindSafe(|| (proc.run)(ctx, d, &mut e)));
    let err = match res {
        Ok(Ok(())) => {
            let reply = Reply {
                buf: e.into_vec(),
                spliced: ctx.spliced.take(),
            };
            return (Some(reply), true);
        }
        Ok(Err(err)) => err,
        Err(p) => {
            tracing::error!(
                xid,
                program = program.name,
                vers,
                proc = proc.name,
                "handler panicked: {}",
                panic_message(p.as_ref())
            );
            ProcError::SystemErr
        }
    };
    // Discard any partly written result: the reply is the header alone.
    let stat = match err {
        ProcError::Drop => return (None, false),
        ProcError::GarbageArgs => AcceptStat::GarbageArgs,
        ProcError::SystemErr => AcceptStat::SystemErr,
        ProcError::ProcUnavail => AcceptStat::ProcUnavail,
        ProcError::TooWeak => {
            return (
                Some(denied(xid, RejectStat::AuthError(AuthStat::TooWeak)).into()),
                false,
            );
        }
    };
    tracing::debug!(
        xid,
        program = program.name,
        proc = proc.name,
        ?stat,
        "call failed"
    );
    let mut v = e.into_vec();
    v.truncate(4);
    let mut e = Enc::from_vec(v);
    encode_accepted(&mut e, xid, stat);
    (Some(e.into_vec().into()), false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc_entry;
    use crate::rpc::Version;
    use rnfsd_proto::rpc::{ReplyHeader, MSG_REPLY};

    fn server() -> Server {
        Server::new(
            Vec::new(),
            std::sync::Arc::new(rnfsd_fs::WriteVerifier::new([0; 8])),
            1 << 20,
            None,
        )
    }

    fn null(_: &CallCtx<'_>, _: ()) -> Result<(), ProcError> {
        Ok(())
    }
    /// Echoes its u32 argument plus the caller's uid.
    fn echo(ctx: &CallCtx<'_>, x: u32) -> Result<Echoed, ProcError> {
        Ok(Echoed {
            x,
            uid: match &ctx.auth {
                Auth::Sys(s) => s.uid,
                Auth::None => crate::access::NOBODY,
            },
        })
    }
    fn fail_with(enc: &mut Enc, e: ProcError) -> Result<(), ProcError> {
        // Write part of a result first: it must not reach the wire.
        enc.u32(0xdead_beef);
        Err(e)
    }
    fn explode(_: &CallCtx<'_>, _: ()) -> Result<(), ProcError> {
        panic!("boom")
    }

    rnfsd_xdr::xdr_struct! {
        #[derive(Debug)]
        pub struct Echoed { pub x: u32, pub uid: u32 }
    }

    static V3: &[Proc] = &[
        proc_entry!("NULL", (), null, CacheClass::None, 0),
        proc_entry!("ECHO", u32, echo, CacheClass::None, 8),
    ];
    static TEST_PROG: Program = Program {
        name: "test",
        prog: 400_000,
        versions: &[
            Version { vers: 2, procs: V3 },
            Version {
                vers: 3,
                procs: &[
                    proc_entry!("NULL", (), null, CacheClass::None, 0),
                    proc_entry!("ECHO", u32, echo, CacheClass::None, 8),
                ],
            },
            Version { vers: 5, procs: V3 },
        ],
    };
    static FAIL_PROG: Program = Program {
        name: "fail",
        prog: 400_001,
        versions: &[Version {
            vers: 1,
            procs: &[
                proc_entry!("NULL", (), null, CacheClass::None, 0),
                Proc {
                    name: "GARBAGE",
                    run: |_, _, e| fail_with(e, ProcError::GarbageArgs),
                    cache: CacheClass::None,
                    max_reply: 4,
                    class: crate::rpc::Class::Pool,
                },
                Proc {
                    name: "SYSERR",
                    run: |_, _, e| fail_with(e, ProcError::SystemErr),
                    cache: CacheClass::None,
                    max_reply: 4,
                    class: crate::rpc::Class::Pool,
                },
                Proc {
                    name: "TOOWEAK",
                    run: |_, _, e| fail_with(e, ProcError::TooWeak),
                    cache: CacheClass::None,
                    max_reply: 4,
                    class: crate::rpc::Class::Pool,
                },
                Proc {
                    name: "DROP",
                    run: |_, _, e| fail_with(e, ProcError::Drop),
                    cache: CacheClass::None,
                    max_reply: 4,
                    class: crate::rpc::Class::Pool,
                },
                proc_entry!("PANIC", (), explode, CacheClass::None, 0),
            ],
        }],
    };

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

    fn run_with(policy: Policy, req: &[u8]) -> Option<Vec<u8>> {
        let s = server();
        let a: SocketAddr = "127.0.0.1:700".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:2049".parse().unwrap();
        let mut now = Responder::now_only();
        dispatch(
            &s,
            &[&TEST_PROG, &FAIL_PROG],
            &policy,
            None,
            req,
            a,
            b,
            None,
            &mut now,
        )
        .now_or_park()
        .map(|r| r.buf)
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
        let r = run(&call(1, 2, 400_000, 3, 2, (AUTH_SYS, &c), &[])).unwrap();
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
        let mut e = Enc::new();
        for w in [3, MSG_CALL, 2, 400_000, 3, 0, AUTH_NONE, 0, AUTH_SYS, 4, 0] {
            e.u32(w);
        }
        assert_eq!(
            auth_err(run(e.as_slice())),
            ReplyHeader::Denied(RejectStat::AuthError(AuthStat::BadVerf))
        );
        let mut e = Enc::new();
        for w in [3, MSG_CALL, 2, 400_000, 3, 0, AUTH_NONE, 0, AUTH_NONE, 4, 0] {
            e.u32(w);
        }
        assert_eq!(
            auth_err(run(e.as_slice())),
            ReplyHeader::Denied(RejectStat::AuthError(AuthStat::BadVerf))
        );
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
        assert!(auth_none_always_ok(rnfsd_proto::mount::PROGRAM, 5));
        assert!(auth_none_always_ok(rnfsd_proto::portmap::PROGRAM, 3));
        assert!(!auth_none_always_ok(rnfsd_proto::mount::PROGRAM, 1));
        assert!(!auth_none_always_ok(100003, 1));
        assert!(auth_none_always_ok(rnfsd_proto::nsm::PROGRAM, 6));
        assert!(!auth_none_always_ok(rnfsd_proto::nlm::PROGRAM, 2));
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

    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    fn counted(_: &CallCtx<'_>, x: u32) -> Result<u32, ProcError> {
        Ok(x + RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
    }
    fn counted_fail(_: &CallCtx<'_>, _: ()) -> Result<(), ProcError> {
        RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Err(ProcError::SystemErr)
    }
    static DRC_PROG: Program = Program {
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
        let s = server();
        let drc = Drc::new(crate::drc::DrcConfig::default());
        let peer: SocketAddr = "127.0.0.1:900".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:2049".parse().unwrap();
        let drc = Arc::new(drc);
        let go = |req: &[u8], peer| {
            let r = dispatch(
                &s,
                &[&DRC_PROG],
                &Policy::default(),
                Some(&drc),
                req,
                peer,
                local,
                None,
                &mut Responder::now_only(),
            )
            .now_or_park();
            reply(&r.unwrap().buf).2
        };
        let c = sys(1);
        let non = call(20, 2, 400_002, 1, 2, (AUTH_SYS, &c), &[0, 0, 0, 100]);
        let first = go(&non, peer);
        // Same xid, peer and arguments: the first reply, not a second run.
        assert_eq!(go(&non, peer), first);
        // Another source port is another client.
        assert_ne!(go(&non, "127.0.0.1:901".parse().unwrap()), first);
        // Another xid runs again.
        let non2 = call(21, 2, 400_002, 1, 2, (AUTH_SYS, &c), &[0, 0, 0, 100]);
        assert_ne!(go(&non2, peer), first);
        // Idempotent procedures are never cached.
        let idem = call(22, 2, 400_002, 1, 1, (AUTH_SYS, &c), &[0, 0, 0, 100]);
        assert_ne!(go(&idem, peer), go(&idem, peer));
        // A failed call is not kept: the retransmission runs again.
        let fails = call(23, 2, 400_002, 1, 3, (AUTH_SYS, &c), &[]);
        let n = RUNS.load(std::sync::atomic::Ordering::SeqCst);
        go(&fails, peer);
        go(&fails, peer);
        assert_eq!(RUNS.load(std::sync::atomic::Ordering::SeqCst), n + 2);
        assert_eq!(drc.entries(), 3);
    }

    /// A call whose owed journal commit failed answers the failure its
    /// handler left (after a SUCCESS header: it is the procedure's own
    /// error), or SYSTEM_ERR if it left none.
    #[test]
    fn a_failed_commit_answers_the_failure_the_handler_left() {
        let (xid, h, body) = reply(&failure(7, Some(vec![0, 0, 0, 5, 0, 0, 0, 0])).buf);
        assert_eq!(xid, 7);
        assert_eq!(h, ReplyHeader::Accepted(AcceptStat::Success));
        assert_eq!(body, vec![0, 0, 0, 5, 0, 0, 0, 0]);
        let (_, h, body) = reply(&failure(8, None).buf);
        assert_eq!(h, ReplyHeader::Accepted(AcceptStat::SystemErr));
        assert!(body.is_empty());
    }

    #[test]
    fn random_records_never_panic() {
        // A cheap deterministic fuzz over mutated valid calls.
        let base = call(15, 2, 400_000, 3, 1, (AUTH_SYS, &sys(1)), &[0, 0, 0, 9]);
        let mut x: u32 = 0x1234_5678;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let mut m = base.clone();
            let i = x as usize % m.len();
            m[i] = (x >> 8) as u8;
            m.truncate(base.len() - (x as usize >> 24) % 8);
            let _ = run(&m);
        }
    }
}
