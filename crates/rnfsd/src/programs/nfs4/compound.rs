//! The COMPOUND driver (RFC 8881 §16.2): minor versions, the SEQUENCE
//! rules (§2.10.6, §18.46), the session's bounds, the slot's reply cache,
//! and the current and saved filehandles and stateid each operation of
//! `ops::OPS` runs with.

use std::sync::Arc;
use std::time::Instant;

use rnfsd_fs::owed::Owed;
use rnfsd_proto::nfs4::plain_args_len;
use rnfsd_proto::nfs4::{
    is_v42_data_op, ArgOp, CompoundHead, CompoundWriter, GetAttr4Args, Nfsstat4, PutFh4Args, ResOp,
    Sequence4Args, Sequence4ResOk, SessionId4, Stateid4, LAST_NFS41_OP, OP_ALLOCATE,
    OP_BIND_CONN_TO_SESSION, OP_CREATE_SESSION, OP_DESTROY_CLIENTID, OP_DESTROY_SESSION,
    OP_EXCHANGE_ID, OP_ILLEGAL, OP_REMOVEXATTR, OP_SEQUENCE,
};
use rnfsd_proto::nfs4::{
    OpenClaim4, OpenFlag4, OP_ACCESS, OP_CLOSE, OP_GETATTR, OP_GETFH, OP_LOOKUP, OP_LOOKUPP,
    OP_OPEN_DOWNGRADE, OP_PUTFH, OP_PUTPUBFH, OP_PUTROOTFH, OP_READ, OP_RESTOREFH, OP_SAVEFH,
};
use rnfsd_rpc::{ProcError, Route, Wait};
use rnfsd_v4state::{ClientHandle, ConnId, SequenceArgs, Sequenced, SessionId, SlotTicket};
use rnfsd_xdr::{Dec, Enc, Xdr};

use super::cur::Cur;
use super::ops::{self, Needs};
use super::status::of_state;
use crate::programs::CallCtx;
use crate::state::nfs4::Nfs4;
use crate::state::pseudo::Pseudo;

/// Longest COMPOUND tag we echo (utf8str_cs has no bound of its own;
/// knfsd takes up to NFSD4_MAX_TAGLEN, 128).
pub(super) const MAX_TAG: usize = 128;

/// Operations a compound without SEQUENCE may carry (its first, if it
/// is allowed alone, and the one that gets NFS4ERR_NOT_ONLY_OP).
const MAX_SESSIONLESS_OPS: u32 = 1;

/// What a compound's operations share.
pub(super) struct Compound<'c, 'a> {
    pub ctx: &'c CallCtx<'a>,
    pub nfs4: &'c Nfs4,
    /// The pseudo-filesystem as the compound first looks at it (a guard,
    /// not a reference count: no cache line shared by every call is
    /// written), taken then: a compound of export handles alone (PUTFH
    /// and GETATTR) never does.
    pseudo: std::cell::OnceCell<arc_swap::Guard<Arc<Pseudo>>>,
    pub minor: u32,
    pub cur: Option<Cur>,
    pub saved: Option<Cur>,
    /// The current and saved stateids (§16.2.3.1.2).
    pub cur_sid: Option<Stateid4>,
    pub saved_sid: Option<Stateid4>,
    /// The slot the compound's SEQUENCE holds.
    pub ticket: Option<SlotTicket>,
    /// Operations in the compound, as the client said.
    pub nops: u32,
    /// The journal commit a change on a `sync` export left the reply
    /// owing (one: an older one is waited for when a newer comes).
    owed: Option<Owed>,
    /// An older one failed: the compound answers NFS4ERR_IO, as when the
    /// last one fails.
    owed_failed: bool,
    /// The operation running now (its number, its place in the compound,
    /// where its result starts in the reply), and the first that owed a
    /// commit: a failed commit's reply ends with it.
    op_now: OpAt,
    owed_by: Option<OpAt>,
    /// Where the COMPOUND4res starts in the reply.
    start: usize,
}

impl<'c, 'a> Compound<'c, 'a> {
    /// The session's client (NFS4ERR_OP_NOT_IN_SESSION never reaches
    /// here: the driver refuses state operations without SEQUENCE).
    pub fn client(&self) -> Result<ClientHandle, Nfsstat4> {
        self.ticket
            .as_ref()
            .map(|t| t.client())
            .ok_or(Nfsstat4::OpNotInSession)
    }

    /// The session the compound runs in.
    pub fn session(&self) -> Option<SessionId> {
        self.ticket.as_ref().map(|t| t.sessionid())
    }

    /// The pseudo-filesystem (the same for the rest of the compound once
    /// looked at).
    pub fn pseudo(&self) -> &Arc<Pseudo> {
        self.pseudo.get_or_init(|| self.nfs4.pseudo())
    }

    /// This connection, as sessions know it.
    pub fn conn(&self) -> ConnId {
        ConnId(self.ctx.conn_id())
    }

    /// The current filehandle (NFS4ERR_NOFILEHANDLE without one; the
    /// table checks first, so this only fails on a driver bug).
    pub fn cur(&self) -> Result<&Cur, Nfsstat4> {
        self.cur.as_ref().ok_or(Nfsstat4::NoFileHandle)
    }

    /// Sets the current filehandle; the current stateid goes with it
    /// (§16.2.3.1.2: operations that set the filehandle clear it).
    pub fn set_cur(&mut self, c: Cur) {
        self.cur = Some(c);
        self.cur_sid = None;
    }

    /// A stateid argument with the special current stateid (seqid 1,
    /// other all zeros) replaced by the compound's (§16.2.3.1.2);
    /// NFS4ERR_BAD_STATEID when there is none.
    pub fn stateid(&self, s: &Stateid4) -> Result<Stateid4, Nfsstat4> {
        if s.seqid == 1 && s.other == [0; 12] {
            return self.cur_sid.ok_or(Nfsstat4::BadStateid);
        }
        Ok(*s)
    }

    /// Bytes the reply `e` may still grow by within the session's
    /// ca_maxresponsesize (READ sends no more data than fits, §18.22.3).
    pub fn reply_room(&self, e: &Enc) -> usize {
        let max = self.ticket.as_ref().map_or(0, |t| t.max_response_size());
        max.saturating_sub(e.len().saturating_sub(self.start))
    }

    /// A change left the call owing a journal commit: the reply waits
    /// for it.
    pub fn owe(&mut self, call: &rnfsd_fs::Call<'_>) {
        if let Some(o) = call.take_owed() {
            self.owed_by.get_or_insert(self.op_now);
            if let Some(older) = self.owed.replace(o) {
                // Commits complete in order; waiting for the older one
                // here keeps one wait per reply. A failure is the
                // compound's (a write-back the commit thread waited for
                // fails its call alone: the newer commit may succeed).
                self.owed_failed |= older.wait().is_err();
            }
        }
    }
}

impl Compound<'_, '_> {
    /// An operation is about to change the state kept in memory (opens,
    /// stateids): on an event loop nothing of the compound may give up
    /// from here (it would run twice). NFS4ERR_DELAY if the attempt has
    /// given up already (the compound then runs again in a pool, and this
    /// status is never sent).
    pub fn memory_changes(&self) -> Result<(), Nfsstat4> {
        match self.ctx.on_loop {
            Some(l) if !l.0.memory_change_begins() => Err(Nfsstat4::Delay),
            _ => Ok(()),
        }
    }
}

/// Operations that change no file and usually answer from memory: a
/// compound of only these is tried on the event loop (run to completion),
/// as NFSv3's GETATTR, LOOKUP and READ are. OPEN of an existing file,
/// OPEN_DOWNGRADE and CLOSE change only the state in memory, after every
/// step that may give up (`Compound::memory_changes`); READ gives up
/// where its data is not in the page cache.
fn quick_op(arg: &ArgOp<'_>) -> bool {
    match arg {
        ArgOp::Open(a) => {
            matches!(a.openhow, OpenFlag4::NoCreate)
                && matches!(a.claim, OpenClaim4::Null(_) | OpenClaim4::Fh)
        }
        _ => quick_opnum(arg.opnum()),
    }
}

/// The quick operations but OPEN, which is quick or not by its arguments.
fn quick_opnum(n: u32) -> bool {
    matches!(
        n,
        OP_SEQUENCE
            | OP_PUTFH
            | OP_PUTROOTFH
            | OP_PUTPUBFH
            | OP_GETFH
            | OP_SAVEFH
            | OP_RESTOREFH
            | OP_GETATTR
            | OP_ACCESS
            | OP_LOOKUP
            | OP_LOOKUPP
            | OP_READ
            | OP_CLOSE
            | OP_OPEN_DOWNGRADE
    )
}

/// A compound of SEQUENCE and quick operations whose arguments need not
/// be built to be read past (`plain_args_len`): the common GETATTR,
/// LOOKUP, ACCESS and READ compounds, routed without allocating and
/// without finding their exports (where a quick compound runs does not
/// depend on them), read from the bytes themselves: the head (a tag of
/// at most `MAX_TAG` bytes) and each operation's number and arguments.
/// False: look closer.
fn plainly_quick(args: &[u8]) -> bool {
    let word = |at: usize| {
        let w = args.get(at..at.checked_add(4)?)?;
        Some(u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
    };
    let Some(tag) = word(0).map(|n| n as usize).filter(|&n| n <= MAX_TAG) else {
        return false;
    };
    // The tag, then the minor version (the driver's to check), then nops.
    let mut at = 4 + tag.next_multiple_of(4) + 4;
    let Some(nops) = word(at) else { return false };
    at += 4;
    for i in 0..nops {
        let Some(n) = word(at) else { return false };
        at += 4;
        if (i == 0) != (n == OP_SEQUENCE) || !quick_opnum(n) {
            return false;
        }
        match args.get(at..).and_then(|b| plain_args_len(b, n)) {
            Some(Ok(len)) => at += len,
            _ => return false,
        }
    }
    true
}

/// Where a COMPOUND runs (read on the loop from its arguments): on the
/// loop when every operation is quick and the first is SEQUENCE (a try
/// that would wait gives its slot back, `SlotTicket::abandon`, and runs
/// again in a pool); in the blocking pool when it changes something on a
/// `sync` export (it waits for the journal, as NFSv3's changes there);
/// else in the loop's pool.
pub(super) fn route(server: &crate::state::Server, d: &mut Dec<'_>) -> Route {
    if plainly_quick(d.rest()) {
        return Route::Quick;
    }
    let Ok(head) = CompoundHead::decode(d, MAX_TAG) else {
        return Route::Pool;
    };
    let mut quick = true;
    let mut sync = false;
    for (i, op) in head.ops(d).enumerate() {
        let Ok(arg) = op.arg else {
            return Route::Pool;
        };
        let n = arg.opnum();
        if i == 0 && n != OP_SEQUENCE {
            return Route::Pool;
        }
        if let ArgOp::PutFh(a) = &arg {
            sync |= server.export_of(&a.object.0).is_some_and(|e| e.sync);
        }
        quick &= quick_op(&arg);
        if !quick && sync {
            return Route::Blocking;
        }
    }
    match quick {
        true => Route::Quick,
        false => Route::Pool,
    }
}

/// Whether the event loop trying this call gave it up (it would have
/// waited).
fn gave_up(ctx: &CallCtx<'_>) -> bool {
    use rnfsd_rpc::LoopState;
    ctx.on_loop.is_some_and(|l| l.gave_up())
}

/// NULL (§16.1).
pub(super) fn null(_ctx: &CallCtx<'_>, _a: ()) -> Result<(), ProcError> {
    Ok(())
}

/// COMPOUND (§16.2).
pub(super) fn run(ctx: &CallCtx<'_>, d: &mut Dec<'_>, e: &mut Enc) -> Result<(), ProcError> {
    let Some(nfs4) = ctx.server.nfs4() else {
        return Err(ProcError::ProcUnavail);
    };
    let args = d.rest();
    let head = CompoundHead::decode(d, MAX_TAG).map_err(|_| ProcError::GarbageArgs)?;
    let start = e.len();
    let mut w = CompoundWriter::begin(e, head.tag);
    let results_at = e.len();
    let minor_ok = head.minorversion == 1 || (head.minorversion == 2 && nfs4.minor2);
    if !minor_ok {
        // §16.2.3: no results.
        w.finish_with(e, Nfsstat4::MinorVersMismatch);
        return Ok(());
    }
    let mut c = Compound {
        ctx,
        nfs4,
        pseudo: std::cell::OnceCell::new(),
        minor: head.minorversion,
        cur: None,
        saved: None,
        cur_sid: None,
        saved_sid: None,
        ticket: None,
        nops: head.nops,
        owed: None,
        owed_failed: false,
        op_now: OpAt::default(),
        owed_by: None,
        start,
    };
    let mut cachethis = false;
    // The calling CPU's statistics cells and the operations' rows, looked
    // up once per compound.
    let shard = nfs4
        .stats
        .as_ref()
        .and_then(|st| Some((st.reg.shard()?, st.rows)));
    // One clock read per operation that may take time: each is timed from
    // the end of the last one timed (`untimed`), the first from the call's
    // start as the RPC layer read it; none without statistics.
    let mut t = shard.map(|_| ctx.started().unwrap_or_else(Instant::now));
    // The operations, read one at a time (§15.2: at most nops, none after
    // one that does not decode or is ILLEGAL, which stops the compound).
    for i in 0..head.nops {
        let op_start = e.len();
        let Ok(opnum) = d.u32() else {
            // The record ends before the operation's number (§15.2).
            w.push(e, &ResOp::error(OP_ILLEGAL, Nfsstat4::BadXdr));
            break;
        };
        c.op_now = OpAt {
            opnum,
            index: i,
            at: op_start,
        };
        let step = match opnum {
            OP_SEQUENCE | OP_PUTFH | OP_GETATTR => hot(&mut c, i, opnum, d, args, e, &mut w),
            _ => other(&mut c, i, opnum, d, e, &mut w),
        };
        let status = match step {
            Step::Ran(s) => s,
            Step::Sequenced(sa_cachethis) => {
                cachethis = sa_cachethis;
                Nfsstat4::Ok
            }
            Step::Replayed => return Ok(()),
            Step::BadArgs => {
                // §15.2: the operation that did not decode, and stop (an
                // NFSv4.2 number in 4.1 is no operation at all: ILLEGAL).
                let s = match c.minor < 2 && is_v42_data_op(opnum) {
                    true => Nfsstat4::OpIllegal,
                    false => Nfsstat4::BadXdr,
                };
                w.push(e, &ResOp::error(opnum, s));
                break;
            }
        };
        if let (Some(shard), Some(since)) = (shard, t.as_mut()) {
            match untimed(opnum) {
                true => count_untimed(&c, shard, opnum),
                false => {
                    let now = Instant::now();
                    let took = now.saturating_duration_since(*since);
                    *since = now;
                    // The call's time ends at the last operation's.
                    ctx.clock_read(now);
                    count(&c, shard, opnum, took);
                }
            }
        }
        if gave_up(ctx) {
            // Changed nothing: run again in a pool from the start.
            if let Some(t) = c.ticket.take() {
                t.abandon();
            }
            return Ok(());
        }
        if status != Nfsstat4::Ok {
            break;
        }
        // §2.10.6.4, §18.46.3: the reply within the session's bounds.
        if let Some(t) = &c.ticket {
            let len = e.len() - start;
            let over = if len > t.max_response_size() {
                Some(Nfsstat4::RepTooBig)
            } else if cachethis && len > t.cache_limit() {
                Some(Nfsstat4::RepTooBigToCache)
            } else {
                None
            };
            if let Some(s) = over {
                e.truncate(op_start);
                w.undo_last();
                w.push(e, &ResOp::error(opnum, s));
                break;
            }
        }
    }
    w.finish(e);
    if c.owed_failed {
        // What the failed change's operation answered may not hold (a
        // COMMIT's verifier was read before its write-back failed).
        let fail = io_reply(head.tag, e.as_slice(), results_at, c.owed_by);
        e.truncate(start);
        e.raw(&fail);
    }
    let slot = c.ticket.take().map(|t| {
        let body: Option<Arc<[u8]>> = cachethis.then(|| Arc::from(&e.as_slice()[start..]));
        (t, body)
    });
    match (c.owed.take(), slot) {
        (None, Some((t, body))) => {
            // Too big to cache was answered above; this cannot fail.
            let _ = t.finish(body);
        }
        (None, None) => {}
        (Some(owed), slot) => {
            let fail = io_reply(head.tag, e.as_slice(), results_at, c.owed_by);
            let slot = slot.map(|(t, body)| {
                let failed = cachethis.then(|| Arc::from(fail.as_slice()));
                (t, body, failed)
            });
            ctx.park(Box::new(SlotCommit { owed, slot }), fail);
        }
    }
    Ok(())
}

/// What running one operation came to.
enum Step {
    /// It ran (or was refused): its status.
    Ran(Nfsstat4),
    /// SEQUENCE took its slot; whether the reply is to be cached.
    Sequenced(bool),
    /// SEQUENCE found the reply cached and wrote it: the compound is done.
    Replayed,
    /// Its arguments did not decode (nothing written).
    BadArgs,
}

/// SEQUENCE, PUTFH and GETATTR (every GETATTR compound): their arguments
/// decoded by their own types' decoders (those `ArgOp::decode` calls), and
/// run as `other` runs them, but without building and moving an `ArgOp`
/// (the largest variant's size) three times over.
#[allow(clippy::too_many_arguments)]
fn hot(
    c: &mut Compound<'_, '_>,
    i: u32,
    opnum: u32,
    d: &mut Dec<'_>,
    args: &[u8],
    e: &mut Enc,
    w: &mut CompoundWriter,
) -> Step {
    match opnum {
        OP_SEQUENCE => {
            let Ok(sa) = Sequence4Args::decode(d) else {
                return Step::BadArgs;
            };
            if let Some(s) = refuse(c, i, opnum, false) {
                return Step::Ran(w.push(e, &ResOp::error(opnum, s)));
            }
            match sequence(c, &sa, args, e, w) {
                Seq::Go => Step::Sequenced(sa.cachethis),
                Seq::Replayed => Step::Replayed,
                Seq::Failed(s) => Step::Ran(s),
            }
        }
        OP_PUTFH => {
            let Ok(a) = PutFh4Args::decode(d) else {
                return Step::BadArgs;
            };
            // PUTFH's row needs no filehandle.
            if let Some(s) = refuse(c, i, opnum, false) {
                return Step::Ran(w.push(e, &ResOp::error(opnum, s)));
            }
            tracing::trace!(op = "PUTFH", "nfsv4 operation");
            let s = super::fh::putfh(c, a);
            e.u32(OP_PUTFH);
            e.u32(s as u32);
            Step::Ran(w.pushed(s))
        }
        _ => {
            debug_assert_eq!(opnum, OP_GETATTR);
            let Ok(a) = GetAttr4Args::decode(d) else {
                return Step::BadArgs;
            };
            // GETATTR's row needs the current filehandle.
            let missing = lacks(c, Needs::Cur).then_some(Nfsstat4::NoFileHandle);
            if let Some(s) = refuse(c, i, opnum, false).or(missing) {
                return Step::Ran(w.push(e, &ResOp::error(opnum, s)));
            }
            tracing::trace!(op = "GETATTR", "nfsv4 operation");
            e.u32(OP_GETATTR);
            Step::Ran(w.pushed(super::attr::getattr(c, a, e)))
        }
    }
}

/// Any other operation: decoded as `ArgOp`, run through its row.
fn other(
    c: &mut Compound<'_, '_>,
    i: u32,
    opnum: u32,
    d: &mut Dec<'_>,
    e: &mut Enc,
    w: &mut CompoundWriter,
) -> Step {
    let Ok(arg) = ArgOp::decode(d, opnum) else {
        return Step::BadArgs;
    };
    let illegal = matches!(arg, ArgOp::Illegal { .. });
    // SEQUENCE is always `hot`'s.
    debug_assert!(!matches!(arg, ArgOp::Sequence(_)));
    if let Some(s) = refuse(c, i, opnum, illegal) {
        Step::Ran(w.push(e, &ResOp::error(opnum, s)))
    } else {
        Step::Ran(run_op(c, arg, e, w))
    }
}

/// Whether the compound lacks a filehandle an operation `needs`.
fn lacks(c: &Compound<'_, '_>, needs: Needs) -> bool {
    match needs {
        Needs::Nothing => false,
        Needs::Cur => c.cur.is_none(),
        Needs::CurAndSaved => c.cur.is_none() || c.saved.is_none(),
    }
}

/// A reply waiting for the journal commit its changes owe, and the slot
/// its SEQUENCE holds: the slot stays in use until the commit ends, so a
/// retry meanwhile is NFS4ERR_DELAY (§2.10.6.2) and never the cached
/// reply of a change not yet durable; it then caches what the client is
/// sent (the reply, or NFS4ERR_IO if the commit failed). NFSv3's
/// duplicate reply cache keeps its entry in progress the same way.
struct SlotCommit {
    owed: Owed,
    slot: Option<HeldSlot>,
}

/// The ticket, the reply to cache and the failure's (when sa_cachethis).
type HeldSlot = (SlotTicket, Option<Arc<[u8]>>, Option<Arc<[u8]>>);

impl SlotCommit {
    fn end(slot: Option<HeldSlot>, ok: bool) {
        if let Some((t, body, failed)) = slot {
            // The reply was checked against the slot's cache; a failure
            // too big for it is not kept (a retry then gets
            // NFS4ERR_RETRY_UNCACHED_REP).
            let _ = t.finish(if ok { body } else { failed });
        }
    }
}

impl Wait for SlotCommit {
    fn then(self: Box<Self>, f: Box<dyn FnOnce(bool) + Send>) {
        let SlotCommit { owed, slot } = *self;
        owed.then(Box::new(move |r| {
            // The slot is free before the client can see the reply.
            SlotCommit::end(slot, r.is_ok());
            f(r.is_ok())
        }));
    }

    fn wait(self: Box<Self>) -> bool {
        let SlotCommit { owed, slot } = *self;
        let ok = owed.wait().is_ok();
        SlotCommit::end(slot, ok);
        ok
    }
}

/// Why operation `i` may not run where it is, if it may not.
/// `illegal`: the number is no operation's (`ArgOp::Illegal`).
fn refuse(c: &Compound<'_, '_>, i: u32, opnum: u32, illegal: bool) -> Option<Nfsstat4> {
    if opnum == OP_SEQUENCE {
        // §18.46.3: only first.
        return (i != 0).then_some(Nfsstat4::SequencePos);
    }
    if c.ticket.is_some() || illegal {
        return None;
    }
    // No SEQUENCE first: only the operations that make or end a session
    // or client may run, and alone (§18.35.3, §18.36.3, §18.34.3,
    // §18.50.3; DESTROY_SESSION may also follow SEQUENCE, §18.37.3).
    let sessionless = matches!(
        opnum,
        OP_EXCHANGE_ID
            | OP_CREATE_SESSION
            | OP_DESTROY_SESSION
            | OP_BIND_CONN_TO_SESSION
            | OP_DESTROY_CLIENTID
    );
    if !sessionless || i > 0 {
        return Some(Nfsstat4::OpNotInSession);
    }
    (c.nops > MAX_SESSIONLESS_OPS).then_some(Nfsstat4::NotOnlyOp)
}

/// One operation through its row of the table.
fn run_op(
    c: &mut Compound<'_, '_>,
    arg: ArgOp<'_>,
    e: &mut Enc,
    w: &mut CompoundWriter,
) -> Nfsstat4 {
    let opnum = arg.opnum();
    // NFSv4.2's operations are no operations of 4.1 (RFC 8881 §15.2).
    let row = ops::row(opnum).filter(|_| c.minor >= 2 || opnum <= LAST_NFS41_OP);
    let Some(row) = row else {
        if let ArgOp::Illegal { opnum } = arg {
            // NFSv4.2's operations without a row (COPY_NOTIFY: no
            // inter-server copy; IO_ADVISE, WRITE_SAME, LAYOUTERROR,
            // LAYOUTSTATS) are not served: a 4.2 client learns so per
            // operation and falls back.
            if c.minor == 2 && (OP_ALLOCATE..=OP_REMOVEXATTR).contains(&opnum) {
                e.u32(opnum);
                e.u32(Nfsstat4::NotSupp as u32);
                return w.pushed(Nfsstat4::NotSupp);
            }
        }
        // §15.2: an unknown operation is ILLEGAL.
        let r =
            if opnum == OP_ILLEGAL || matches!(arg, ArgOp::Illegal { .. }) || opnum > LAST_NFS41_OP
            {
                ResOp::Illegal(Nfsstat4::OpIllegal)
            } else {
                ResOp::error(opnum, Nfsstat4::NotSupp)
            };
        return w.push(e, &r);
    };
    if lacks(c, row.needs) {
        return w.push(e, &ResOp::error(opnum, Nfsstat4::NoFileHandle));
    }
    tracing::trace!(op = row.name, "nfsv4 operation");
    let status = (row.run)(c, arg, e);
    w.pushed(status)
}

/// Operations that only touch memory and take well under a microsecond:
/// counted at 0 µs without reading the clock (two reads of four in a
/// GETATTR compound); what they took goes to the next operation timed.
fn untimed(opnum: u32) -> bool {
    matches!(
        opnum,
        OP_SEQUENCE | OP_PUTFH | OP_PUTROOTFH | OP_PUTPUBFH | OP_GETFH | OP_SAVEFH | OP_RESTOREFH
    )
}

/// Counts operation `opnum`, which took `took`, in the statistics.
fn count(
    c: &Compound<'_, '_>,
    (shard, rows): (rnfsd_stats::Shard, rnfsd_stats::Rows),
    opnum: u32,
    took: std::time::Duration,
) {
    let Some(st) = &c.nfs4.stats else { return };
    let us = took.as_micros().min(u128::from(u64::MAX)) as u64;
    st.reg.record_in(shard, rows, ops::stats_row(opnum), us);
}

/// Counts operation `opnum`, untimed, at 0 µs.
fn count_untimed(
    c: &Compound<'_, '_>,
    (shard, rows): (rnfsd_stats::Shard, rnfsd_stats::Rows),
    opnum: u32,
) {
    let Some(st) = &c.nfs4.stats else { return };
    st.reg.record_in_untimed(shard, rows, ops::stats_row(opnum));
}

enum Seq {
    Go,
    Replayed,
    Failed(Nfsstat4),
}

/// SEQUENCE (§18.46): the slot taken, or its cached reply sent.
fn sequence(
    c: &mut Compound<'_, '_>,
    sa: &Sequence4Args,
    args: &[u8],
    e: &mut Enc,
    w: &mut CompoundWriter,
) -> Seq {
    let a = SequenceArgs {
        sessionid: SessionId(sa.sessionid.0),
        sequenceid: sa.sequenceid,
        slotid: sa.slotid,
        highest_slotid: sa.highest_slotid,
        conn: c.conn(),
        digest: digest(args),
        ops: c.nops,
        request_size: args.len().min(u32::MAX as usize) as u32,
    };
    match c.nfs4.state.sequence(&a) {
        Ok(Sequenced::New(t)) => {
            let ok = Sequence4ResOk {
                sessionid: SessionId4(t.sessionid().0),
                sequenceid: sa.sequenceid,
                slotid: sa.slotid,
                highest_slotid: t.highest_slotid,
                target_highest_slotid: t.target_highest_slotid,
                status_flags: t.status_flags,
            };
            c.ticket = Some(t);
            // SEQUENCE4res written as `ResOp::Sequence` writes it.
            e.u32(OP_SEQUENCE);
            e.u32(Nfsstat4::Ok as u32);
            ok.encode(e);
            w.pushed(Nfsstat4::Ok);
            Seq::Go
        }
        Ok(Sequenced::Replay(body)) => {
            // §2.10.6.1.3: the same reply, byte for byte.
            e.truncate(c.start);
            e.raw(&body);
            Seq::Replayed
        }
        Err(err) => Seq::Failed(w.push(e, &ResOp::error(OP_SEQUENCE, of_state(&err)))),
    }
}

/// A compound's fingerprint, telling a retry from a new request reusing
/// a slot's sequence id (NFS4ERR_SEQ_FALSE_RETRY, §2.10.6.1.3.1). A word
/// at a time, not SipHash (a fifth of a GETATTR's own work): a client
/// that forges a collision only confuses its own slot.
fn digest(args: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mix = |h: u64, w: u64| (h.rotate_left(5) ^ w).wrapping_mul(K);
    let mut chunks = args.chunks_exact(8);
    let mut h = mix(0, args.len() as u64);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = mix(h, u64::from_le_bytes(w));
    }
    let mut w = [0u8; 8];
    w[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    mix(h, u64::from_le_bytes(w))
}

/// An operation's place in the compound and in its reply.
#[derive(Debug, Clone, Copy, Default)]
struct OpAt {
    opnum: u32,
    index: u32,
    at: usize,
}

/// The reply when the journal commit a change owed failed: the results
/// of the operations before the first one that changed something (they
/// hold: SEQUENCE's among them, so the client sees its slot used), then
/// NFS4ERR_IO for that one, whose effects and those after it may not be
/// durable. `reply` is the reply as built, its results from
/// `results_at`.
fn io_reply(tag: &[u8], reply: &[u8], results_at: usize, failed: Option<OpAt>) -> Vec<u8> {
    let mut e = Enc::new();
    Nfsstat4::Io.encode(&mut e);
    e.opaque(tag);
    match failed {
        Some(op) if op.at >= results_at && op.at <= reply.len() => {
            e.u32(op.index + 1);
            e.raw(&reply[results_at..op.at]);
            ResOp::error(op.opnum, Nfsstat4::Io).encode(&mut e);
        }
        _ => e.u32(0),
    }
    e.into_vec()
}

#[cfg(test)]
mod tests {
    use super::{digest, plainly_quick, quick_op};
    use rnfsd_proto::nfs4::*;
    use rnfsd_xdr::Enc;

    fn open(how: OpenFlag4, claim: OpenClaim4) -> ArgOp<'static> {
        ArgOp::Open(Box::new(Open4Args {
            seqid: 0,
            share_access: OPEN4_SHARE_ACCESS_READ,
            share_deny: OPEN4_SHARE_DENY_NONE,
            owner: StateOwner4 {
                clientid: 1,
                owner: Opaque1024(b"owner".to_vec()),
            },
            openhow: how,
            claim,
        }))
    }

    fn plain(ops: &[ArgOp<'_>], cut: usize) -> bool {
        plain_tagged(b"", ops, cut)
    }

    fn plain_tagged(tag: &[u8], ops: &[ArgOp<'_>], cut: usize) -> bool {
        let mut e = Enc::new();
        encode_compound(&mut e, tag, 1, ops);
        let b = e.as_slice();
        plainly_quick(&b[..b.len() - cut])
    }

    #[test]
    fn plain_quick_compounds_are_routed_without_building_their_arguments() {
        let seq = ArgOp::Sequence(Sequence4Args {
            sessionid: SessionId4([7; 16]),
            sequenceid: 1,
            slotid: 0,
            highest_slotid: 0,
            cachethis: false,
        });
        let putfh = ArgOp::PutFh(PutFh4Args {
            object: NfsFh4(vec![1; 40]),
        });
        let getattr = ArgOp::GetAttr(GetAttr4Args {
            attr_request: Bitmap4::from_bits(&[FATTR4_SIZE, FATTR4_CHANGE]).unwrap(),
        });
        let lookup = ArgOp::Lookup(Lookup4Args {
            objname: Component4(b"name".to_vec()),
        });
        assert!(plain(&[seq.clone(), putfh.clone(), getattr.clone()], 0));
        assert!(plain(
            &[seq.clone(), putfh.clone(), lookup, ArgOp::GetFh],
            0
        ));
        // Not SEQUENCE first, SEQUENCE again, an OPEN (quick or not by its
        // arguments), a change, a short record: looked at closer.
        assert!(!plain(&[putfh.clone(), getattr.clone()], 0));
        assert!(!plain(&[seq.clone(), seq.clone()], 0));
        let open = open(OpenFlag4::NoCreate, OpenClaim4::Fh);
        assert!(!plain(&[seq.clone(), putfh.clone(), open], 0));
        assert!(!plain(
            &[
                seq.clone(),
                putfh.clone(),
                ArgOp::Remove(Remove4Args {
                    target: Component4(b"x".to_vec()),
                })
            ],
            0
        ));
        assert!(!plain(&[seq.clone(), putfh.clone(), getattr.clone()], 4));
        // A tag is stepped over (padding included) up to MAX_TAG bytes.
        let ops = [seq, putfh, getattr];
        assert!(plain_tagged(b"tag05", &ops, 0));
        assert!(plain_tagged(&[b'x'; super::MAX_TAG], &ops, 0));
        assert!(!plain_tagged(&[b'x'; super::MAX_TAG + 1], &ops, 0));
    }

    #[test]
    fn the_hot_path_needs_what_the_rows_need() {
        use super::super::ops::{row, Needs};
        assert_eq!(row(OP_PUTFH).map(|r| r.needs), Some(Needs::Nothing));
        assert_eq!(row(OP_GETATTR).map(|r| r.needs), Some(Needs::Cur));
    }

    #[test]
    fn digests_tell_compounds_apart() {
        let a = b"SEQUENCE PUTFH GETATTR, thirty-seven bytes".to_vec();
        assert_eq!(digest(&a), digest(&a.clone()));
        // Every byte counts, the tail past the last whole word too.
        for i in 0..a.len() {
            let mut b = a.clone();
            b[i] ^= 1;
            assert_ne!(digest(&a), digest(&b), "byte {i}");
        }
        // So does the length (zero padding is not the same request).
        let mut b = a.clone();
        b.push(0);
        assert_ne!(digest(&a), digest(&b));
        assert_ne!(digest(&[]), digest(&[0]));
    }

    #[test]
    fn opens_of_existing_files_reads_and_closes_are_tried_on_the_loop() {
        let name = || Component4(b"f".to_vec());
        assert!(quick_op(&open(
            OpenFlag4::NoCreate,
            OpenClaim4::Null(name())
        )));
        assert!(quick_op(&open(OpenFlag4::NoCreate, OpenClaim4::Fh)));
        let create = OpenFlag4::Create(CreateHow4::Unchecked(Fattr4::default()));
        assert!(!quick_op(&open(create, OpenClaim4::Null(name()))));
        let reclaim = OpenClaim4::Previous(OpenDelegationType4::None);
        assert!(!quick_op(&open(OpenFlag4::NoCreate, reclaim)));
        let read = ArgOp::Read(Read4Args {
            stateid: Stateid4::ANONYMOUS,
            offset: 0,
            count: 4096,
        });
        assert!(quick_op(&read));
        let close = ArgOp::Close(Close4Args {
            seqid: 0,
            open_stateid: Stateid4::ANONYMOUS,
        });
        assert!(quick_op(&close));
        let remove = ArgOp::Remove(Remove4Args { target: name() });
        assert!(!quick_op(&remove));
    }
}
