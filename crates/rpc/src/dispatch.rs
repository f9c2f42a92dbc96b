//! Dispatch: header checks, auth, the row, the handler, reply framing.
//!
//! Follows RFC 5531 §9 and the order of Linux's `svc_process_common`
//! (net/sunrpc/svc.c): header, RPC version, credentials, program, version,
//! procedure, then the handler. A header too short to answer is dropped.

use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

use rnfsd_proto::rpc::{
    encode_accepted, encode_denied, AcceptStat, AuthStat, RejectStat, RPC_VERSION,
};
use rnfsd_stats::Outcome;
use rnfsd_transport::{Later, Reply, Responder};
use rnfsd_xdr::{Dec, Enc};

use crate::auth::{self, Auth, AuthFail};
use crate::back::BackChannel;
use crate::ctx::{CallCtx, LoopState, ProcError, State, Wait};
use crate::drc::{Drc, Key, Lookup};
use crate::header::{self, FIXED};
use crate::limits::{INITIAL_REPLY, MAX_REPLY_HEADER};
use crate::table::{CacheClass, Miss, Programs, Row};

/// Where a success reply's result body starts after the record mark: we
/// always answer with a null verifier (xid, REPLY, MSG_ACCEPTED, flavor,
/// length 0, SUCCESS).
const BODY_AT: usize = 4 + 24;

const _: () = assert!(BODY_AT - 4 <= MAX_REPLY_HEADER);

/// Server-wide dispatch settings from the configuration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Policy {
    /// Accept AUTH_NONE for every procedure. When false, AUTH_NONE is
    /// answered AUTH_ERROR TOOWEAK except for rows marked `auth_none`.
    pub allow_auth_none: bool,
}

/// What dispatch answers a call with.
pub enum Answer {
    /// The reply to send now (None: nothing to send).
    Now(Option<Reply>),
    /// A reply that may leave only once what its handler parked it on is
    /// over: its worker goes on meanwhile.
    Parked(Parked),
}

/// A reply waiting for what its handler parked it on (a journal commit),
/// with what to send instead if that fails, and the duplicate reply cache
/// entry the call still holds in progress (so a retransmission meanwhile
/// is dropped).
pub struct Parked {
    reply: Reply,
    fail: Reply,
    until: Box<dyn Wait>,
    later: Later,
    drc: Option<(Arc<Drc>, Key)>,
}

impl Answer {
    /// The reply to send now, for callers that count nothing: a parked
    /// one is left to be sent when it may (None now).
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
    /// The reply that leaves if what it waits for succeeds.
    pub fn reply(&self) -> &Reply {
        &self.reply
    }

    /// Send the reply (or the failure) from the thread that sees the wait
    /// end, and keep it in the duplicate reply cache then.
    pub fn park(self) {
        let Parked {
            reply,
            fail,
            until,
            later,
            drc,
        } = self;
        until.then(Box::new(move |ok| {
            let reply = if ok { reply } else { fail };
            if let Some((c, key)) = drc {
                c.finish(&key, &reply.buf);
            }
            later.send(Some(reply));
        }));
    }
}

/// A call as the service hands it to dispatch.
pub(crate) struct Incoming<'r, S: State> {
    pub record: &'r [u8],
    /// The row the event loop planned for it (its number), if any.
    pub planned: Option<usize>,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    /// The connection's id (`Request::conn_id`).
    pub conn_id: u64,
    /// The service's back channel, if it has one.
    pub back: Option<&'r BackChannel>,
    pub on_loop: Option<&'r S::Loop>,
    /// When statistics time the call: its start.
    pub t0: Option<Instant>,
}

/// What dispatch did, for statistics: the call's program, version and
/// procedure (when its header was read), what it answered, and the data
/// it moved.
pub(crate) struct Dispatched {
    pub answer: Answer,
    pub call: Option<(u32, u32, u32)>,
    pub outcome: Outcome,
    pub moved: (u64, u64),
    /// The handler's last clock reading (`CallCtx::clock_read`), if any.
    pub ended: Option<Instant>,
}

/// The tables and settings dispatch works with.
pub(crate) struct Dispatcher<'s, S: State> {
    pub state: &'s S,
    pub programs: &'s Programs<S>,
    pub policy: Policy,
    pub drc: Option<&'s Arc<Drc>>,
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

/// The outcome statistics count for an accepted reply's status; a success
/// counts the program's status its result body starts with.
fn outcome_of(stat: AcceptStat, reply: &Reply) -> Outcome {
    match stat {
        AcceptStat::Success => Outcome::Success {
            status: body_status(&reply.buf),
        },
        AcceptStat::ProgUnavail => Outcome::ProgUnavail,
        AcceptStat::ProgMismatch { .. } => Outcome::ProgMismatch,
        AcceptStat::ProcUnavail => Outcome::ProcUnavail,
        AcceptStat::GarbageArgs => Outcome::GarbageArgs,
        AcceptStat::SystemErr => Outcome::SystemErr,
    }
}

/// The first word of a success reply's result body (a program's status,
/// where its results start with one), read at its fixed place.
fn body_status(buf: &[u8]) -> Option<u32> {
    let w = buf.get(BODY_AT..BODY_AT + 4)?;
    Some(u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
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

impl<S: State> Dispatcher<'_, S> {
    /// Handle one request record: the reply (with 4 bytes reserved at the
    /// front for the record mark), None to send nothing, or a reply parked
    /// until what its handler waits for is over.
    ///
    /// With a duplicate reply cache, a retransmitted non-idempotent call
    /// (`CacheClass::Reply`) gets the first execution's reply, or no reply
    /// while that execution still runs (see `crate::drc`).
    pub fn dispatch(&self, inc: Incoming<'_, S>, responder: &mut Responder) -> Dispatched {
        let now = |reply: Option<Vec<u8>>, call, outcome| Dispatched {
            answer: Answer::Now(reply.map(Reply::from)),
            call,
            outcome,
            moved: (0, 0),
            ended: None,
        };
        // The row the loop planned, or the header read now. Only records
        // with an RPC version 2 header and a known row are planned.
        let planned = inc
            .planned
            .and_then(|i| self.programs.row(i).map(|r| (i, r)));
        let (xid, row) = match planned {
            Some((_, r)) => {
                let Some(x) = inc.record.get(..4) else {
                    return now(None, None, Outcome::Dropped);
                };
                (u32::from_be_bytes([x[0], x[1], x[2], x[3]]), Ok(r))
            }
            None => {
                let Some(h) = header::peek(inc.record) else {
                    tracing::debug!(peer = %inc.peer, "dropping a record with no call header");
                    return now(None, None, Outcome::Dropped);
                };
                if h.rpcvers != RPC_VERSION {
                    let r = denied(
                        h.xid,
                        RejectStat::RpcMismatch {
                            low: RPC_VERSION,
                            high: RPC_VERSION,
                        },
                    );
                    return now(Some(r), None, Outcome::RpcMismatch);
                }
                (
                    h.xid,
                    self.programs
                        .find(h.prog, h.vers, h.proc_)
                        .map(|(_, r)| r)
                        .map_err(|m| (m, h)),
                )
            }
        };
        let call = match &row {
            Ok(r) => Some((r.program.prog, r.vers, r.proc_)),
            Err((_, h)) => Some((h.prog, h.vers, h.proc_)),
        };
        // The credential comes before the program is looked at.
        let mut d = Dec::new(inc.record.get(FIXED..).unwrap_or_default());
        let auth = match auth::decode(&mut d) {
            Ok(a) => a,
            Err(AuthFail::Garbage) => {
                let r = accepted(xid, AcceptStat::GarbageArgs);
                return now(Some(r), call, Outcome::GarbageArgs);
            }
            Err(AuthFail::Denied(s)) => {
                tracing::debug!(xid, peer = %inc.peer, ?s, "credential rejected");
                let r = denied(xid, RejectStat::AuthError(s));
                return now(Some(r), call, Outcome::AuthError(s as u32));
            }
        };
        let row = match row {
            Ok(r) => r,
            Err((m, _)) => {
                let stat = match m {
                    Miss::ProgUnavail => AcceptStat::ProgUnavail,
                    Miss::ProgMismatch { low, high } => AcceptStat::ProgMismatch { low, high },
                    Miss::ProcUnavail => AcceptStat::ProcUnavail,
                };
                let r = Reply::from(accepted(xid, stat));
                let outcome = outcome_of(stat, &r);
                return Dispatched {
                    answer: Answer::Now(Some(r)),
                    call,
                    outcome,
                    moved: (0, 0),
                    ended: None,
                };
            }
        };
        // Procedure 0 of every program is its NULL procedure: a ping
        // (RFC 5531 §8.2), answered under any credential.
        let none_ok = row.proc_ == 0 || row.proc.auth_none;
        if auth == Auth::None && !self.policy.allow_auth_none && !none_ok {
            let r = denied(xid, RejectStat::AuthError(AuthStat::TooWeak));
            return now(Some(r), call, Outcome::AuthError(AuthStat::TooWeak as u32));
        }
        self.run_row(xid, row, auth, d, inc, responder, call)
    }

    #[allow(clippy::too_many_arguments)] // the one step past the checks
    fn run_row(
        &self,
        xid: u32,
        row: Row<S>,
        auth: Auth,
        mut d: Dec<'_>,
        inc: Incoming<'_, S>,
        responder: &mut Responder,
        call: Option<(u32, u32, u32)>,
    ) -> Dispatched {
        let proc = row.proc;
        // As knfsd's nfsd_cache_lookup: after auth, before the handler.
        let cached = match (self.drc, proc.cache) {
            (Some(c), CacheClass::Reply) => {
                let key = Key::new(
                    xid,
                    inc.peer,
                    row.program.prog,
                    row.vers,
                    row.proc_,
                    d.rest(),
                );
                match c.begin(&key) {
                    Lookup::New => Some((c, key)),
                    Lookup::Replay(r) => {
                        tracing::debug!(xid, peer = %inc.peer, proc = proc.name, "duplicate: replaying reply");
                        let r = Reply::from(r);
                        // Only a handler's own success reply is kept.
                        let outcome = outcome_of(AcceptStat::Success, &r);
                        return Dispatched {
                            answer: Answer::Now(Some(r)),
                            call,
                            outcome,
                            moved: (0, 0),
                            ended: None,
                        };
                    }
                    Lookup::InProgress => {
                        tracing::debug!(xid, peer = %inc.peer, proc = proc.name, "duplicate in progress: dropped");
                        return Dispatched {
                            answer: Answer::Now(None),
                            call,
                            outcome: Outcome::Dropped,
                            moved: (0, 0),
                            ended: None,
                        };
                    }
                }
            }
            _ => None,
        };
        let ctx = CallCtx::new(
            xid,
            inc.peer,
            inc.local,
            auth,
            self.state,
            inc.on_loop,
            responder.can_defer(),
        )
        .on_conn(inc.conn_id, inc.back, responder)
        .timed_from(inc.t0);
        let (mut reply, outcome, ran) = execute(&ctx, row, &mut d);
        let mut ended = ctx.clock_last();
        let moved = ctx.moved_total();
        let moved = (moved.read, moved.written);
        let parked = ctx.take_parked();
        // It borrows the responder, which may now defer the reply.
        drop(ctx);
        // Only a handler's own reply is kept; RPC-level failures run again if
        // retransmitted (knfsd: RC_NOCACHE on those paths). Replies of cached
        // procedures are all bytes (nothing spliced). Nor the reply of an
        // attempt on the event loop that gave up: the call runs again in a
        // pool and must not meet its own entry there.
        let gave_up = inc.on_loop.is_some_and(|l| l.gave_up());
        let keep = ran && reply.as_ref().is_some_and(|r| r.spliced.is_none()) && !gave_up;
        if let Some(p) = parked {
            let fail = failure(xid, Some(p.fail_body));
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
                    return Dispatched {
                        answer: Answer::Parked(Parked {
                            reply,
                            fail,
                            until: p.until,
                            later,
                            drc,
                        }),
                        call,
                        outcome,
                        moved,
                        ended,
                    };
                }
                // No reply, or no one to send it later: wait here (the
                // call's time then ends after the wait, as it did before
                // handlers could end it).
                (r, _) => {
                    reply = if p.until.wait() { r } else { Some(fail) };
                    ended = None;
                }
            }
        }
        if let Some((c, key)) = cached {
            match &reply {
                Some(r) if keep => c.finish(&key, &r.buf),
                _ => c.abandon(&key),
            }
        }
        Dispatched {
            answer: Answer::Now(reply),
            call,
            outcome,
            moved,
            ended,
        }
    }
}

/// The reply of a call whose parked wait failed: the result body its
/// handler left for that (`CallCtx::park`), or else SYSTEM_ERR.
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

/// Run the handler and frame its reply; with what statistics count of it,
/// and whether the handler completed (its reply is cacheable).
fn execute<S: State>(
    ctx: &CallCtx<'_, S>,
    row: Row<S>,
    d: &mut Dec<'_>,
) -> (Option<Reply>, Outcome, bool) {
    let xid = ctx.xid;
    let proc = row.proc;
    // Sized for most replies; a large one (READ, READDIR) grows to what its
    // request asks for, never to the procedure's bound.
    let mut e = Enc::from_vec(rnfsd_transport::reply_buffer(
        MAX_REPLY_HEADER.saturating_add(proc.max_reply.min(INITIAL_REPLY)),
    ));
    encode_accepted(&mut e, xid, AcceptStat::Success);
    debug_assert_eq!(e.len(), BODY_AT, "a success header with a null verifier");
    // A panicking handler must not take the worker thread (or the server)
    // with it: answer SYSTEM_ERR instead. The handler's state is its own
    // call's, so nothing shared is left half-updated by unwinding past it
    // except what sits behind a Mutex, which poisoning reports.
    let res = catch_unwind(AssertUnwindSafe(|| (proc.run)(ctx, d, &mut e)));
    let err = match res {
        Ok(Ok(())) => {
            let reply = Reply {
                buf: e.into_vec(),
                spliced: ctx.take_spliced(),
            };
            let outcome = outcome_of(AcceptStat::Success, &reply);
            return (Some(reply), outcome, true);
        }
        Ok(Err(err)) => err,
        Err(p) => {
            tracing::error!(
                xid,
                program = row.program.name,
                vers = row.vers,
                proc = proc.name,
                "handler panicked: {}",
                panic_message(p.as_ref())
            );
            ProcError::SystemErr
        }
    };
    // Discard any partly written result: the reply is the header alone.
    let stat = match err {
        ProcError::Drop => return (None, Outcome::Dropped, false),
        ProcError::GarbageArgs => AcceptStat::GarbageArgs,
        ProcError::SystemErr => AcceptStat::SystemErr,
        ProcError::ProcUnavail => AcceptStat::ProcUnavail,
        ProcError::TooWeak => {
            let r = denied(xid, RejectStat::AuthError(AuthStat::TooWeak));
            let outcome = Outcome::AuthError(AuthStat::TooWeak as u32);
            return (Some(r.into()), outcome, false);
        }
    };
    tracing::debug!(
        xid,
        program = row.program.name,
        proc = proc.name,
        ?stat,
        "call failed"
    );
    let mut v = e.into_vec();
    v.truncate(4);
    let mut e = Enc::from_vec(v);
    encode_accepted(&mut e, xid, stat);
    let reply = Reply::from(e.into_vec());
    let outcome = outcome_of(stat, &reply);
    (Some(reply), outcome, false)
}
