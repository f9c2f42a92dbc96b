//! The client's end of the back channel (RFC 8881 §2.10.3.1, §19, §20):
//! the server's CB_NULL and CB_COMPOUND calls arrive on the connection
//! that created the session and are answered on it.
//!
//! Minimal and bounded: CB_SEQUENCE is checked against a small slot table
//! (with the last reply of each slot kept for retries, §2.10.6.1), every
//! other operation gets a fixed answer (CB_RECALL is acknowledged; the
//! client returns the delegation with DELEGRETURN on the fore channel,
//! see `Nfs4Client::return_on_recall`; NFSv4.2's CB_OFFLOAD, RFC 7862
//! §16.1, is acknowledged in a minor version 2 CB_COMPOUND and refused as
//! illegal in a minor version 1 one, which does not have it), and what
//! arrived is kept in a short log for tests to inspect. A test may make the client ignore
//! CB_RECALL (no reply at all), as a client that went silent, and say
//! what CB_GETATTR answers (a write delegation holder's size and change,
//! §20.1; NFS4ERR_BADHANDLE by default) or that it goes unanswered.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rnfsd_proto::nfs4::cb::*;
use rnfsd_proto::nfs4::{
    Bitmap4, Fattr4, NfsRes4, Nfsstat4, SessionId4, FATTR4_CHANGE, FATTR4_SIZE,
    NFS4_MINOR_VERSION_1,
};

/// The highest callback minor version answered (RFC 7862's CB_OFFLOAD).
const CB_MINOR_MAX: u32 = 2;
use rnfsd_proto::rpc::{encode_accepted, encode_denied, AcceptStat, CallHeader, Incoming};
use rnfsd_proto::rpc::{RejectStat, RPC_VERSION};
use rnfsd_xdr::{Dec, Enc};

/// Back-channel slots this client offers (ca_maxrequests asked for).
pub const CB_SLOTS: u32 = 4;
/// Operations accepted in one CB_COMPOUND (ca_maxoperations asked for).
pub const CB_MAX_OPS: u32 = 16;
/// Largest CB_COMPOUND call and reply (ca_maxrequestsize and
/// ca_maxresponsesize asked for).
pub const CB_MAX_MSG: u32 = 16 * 1024;
/// Longest tag decoded from a CB_COMPOUND.
const CB_MAX_TAG: usize = 256;
/// Callbacks kept in the log; older ones are dropped.
pub const CB_LOG_LEN: usize = 64;

/// A callback the client received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CbEvent {
    Null,
    /// A CB_COMPOUND's operations and the status it was answered with.
    Compound {
        ops: Vec<CbArgOp>,
        status: Nfsstat4,
    },
    /// A call that did not decode, or to another program or version.
    Rejected,
}

struct CbSlot {
    seqid: u32,
    /// The last reply's results (CB_COMPOUND4res), for a retry.
    reply: Option<Vec<u8>>,
}

struct State {
    sessionid: Option<SessionId4>,
    slots: Vec<CbSlot>,
    log: VecDeque<CbEvent>,
    /// CB_GETATTR's answer: (size, change); None: NFS4ERR_BADHANDLE.
    getattr: Option<(u64, u64)>,
}

/// Shared by the connection's reader (which answers) and the client.
pub(crate) struct CbState {
    program: u32,
    state: Mutex<State>,
    calls: AtomicU64,
    /// Leave CB_COMPOUNDs carrying CB_RECALL unanswered.
    ignore_recalls: AtomicBool,
    /// Leave CB_COMPOUNDs carrying CB_GETATTR unanswered.
    ignore_getattrs: AtomicBool,
}

impl CbState {
    pub(crate) fn new(program: u32) -> Arc<Self> {
        Arc::new(CbState {
            program,
            state: Mutex::new(State {
                sessionid: None,
                slots: (0..CB_SLOTS)
                    .map(|_| CbSlot {
                        seqid: 0,
                        reply: None,
                    })
                    .collect(),
                log: VecDeque::new(),
                getattr: None,
            }),
            calls: AtomicU64::new(0),
            ignore_recalls: AtomicBool::new(false),
            ignore_getattrs: AtomicBool::new(false),
        })
    }

    pub(crate) fn set_ignore_recalls(&self, on: bool) {
        self.ignore_recalls.store(on, Ordering::Relaxed);
    }

    pub(crate) fn set_ignore_getattrs(&self, on: bool) {
        self.ignore_getattrs.store(on, Ordering::Relaxed);
    }

    pub(crate) fn set_getattr(&self, a: Option<(u64, u64)>) {
        self.lock().getattr = a;
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session is known: check CB_SEQUENCE against it, with at most
    /// `slots` slots (what the server accepted, at most [`CB_SLOTS`]).
    pub(crate) fn set_session(&self, sessionid: SessionId4, slots: u32) {
        let mut st = self.lock();
        st.sessionid = Some(sessionid);
        st.slots.truncate(slots.clamp(1, CB_SLOTS) as usize);
    }

    pub(crate) fn events(&self) -> Vec<CbEvent> {
        self.lock().log.iter().cloned().collect()
    }

    pub(crate) fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    fn record(&self, ev: CbEvent) {
        let mut st = self.lock();
        if st.log.len() >= CB_LOG_LEN {
            st.log.pop_front();
        }
        st.log.push_back(ev);
    }

    /// Answer one call record (from its xid): the reply message, or `None`
    /// when it cannot be answered (no call header).
    pub(crate) fn handle(&self, rec: &[u8]) -> Option<Vec<u8>> {
        let mut d = Dec::new(rec);
        let Ok(Incoming::Call(h)) = CallHeader::decode(&mut d) else {
            return None;
        };
        self.calls.fetch_add(1, Ordering::Relaxed);
        let mut e = Enc::new();
        if h.rpcvers != RPC_VERSION {
            encode_denied(
                &mut e,
                h.xid,
                RejectStat::RpcMismatch {
                    low: RPC_VERSION,
                    high: RPC_VERSION,
                },
            );
            self.record(CbEvent::Rejected);
            return Some(e.into_vec());
        }
        let stat = if h.prog != self.program {
            AcceptStat::ProgUnavail
        } else if h.vers != NFS_CB {
            AcceptStat::ProgMismatch {
                low: NFS_CB,
                high: NFS_CB,
            }
        } else {
            match h.proc_ {
                CB_NULL => {
                    encode_accepted(&mut e, h.xid, AcceptStat::Success);
                    self.record(CbEvent::Null);
                    return Some(e.into_vec());
                }
                CB_COMPOUND => {
                    match CbCompoundArgs::decode(&mut d, CB_MAX_TAG, CB_MAX_OPS as usize) {
                        Ok(args)
                            if (self.ignore_recalls.load(Ordering::Relaxed)
                                && args.ops.iter().any(|o| matches!(o, CbArgOp::Recall(_))))
                                || (self.ignore_getattrs.load(Ordering::Relaxed)
                                    && args
                                        .ops
                                        .iter()
                                        .any(|o| matches!(o, CbArgOp::GetAttr(_)))) =>
                        {
                            self.record(CbEvent::Compound {
                                ops: args.ops,
                                status: Nfsstat4::Delay,
                            });
                            return None;
                        }
                        Ok(args) => {
                            encode_accepted(&mut e, h.xid, AcceptStat::Success);
                            e.raw(&self.compound(args));
                            return Some(e.into_vec());
                        }
                        Err(_) => AcceptStat::GarbageArgs,
                    }
                }
                _ => AcceptStat::ProcUnavail,
            }
        };
        encode_accepted(&mut e, h.xid, stat);
        self.record(CbEvent::Rejected);
        Some(e.into_vec())
    }

    /// The encoded CB_COMPOUND4res for `args`; logs the call.
    fn compound(&self, args: CbCompoundArgs) -> Vec<u8> {
        let mut st = self.lock();
        let (bytes, status) = match answer_cached(&mut st, &args) {
            Some(cached) => (cached, Nfsstat4::Ok),
            None => {
                let mut results = Vec::new();
                let status = answer(&mut st, &args, &mut results);
                let res = CbCompoundRes {
                    status,
                    tag: args.tag.clone(),
                    results,
                };
                let mut e = Enc::new();
                res.encode(&mut e);
                let bytes = e.into_vec();
                // A new call on a slot: the slot moves on and keeps the
                // reply for a retry.
                if let (Some(CbArgOp::Sequence(s)), Some(CbResOp::Sequence(NfsRes4::Ok(_)))) =
                    (args.ops.first(), res.results.first())
                {
                    if let Some(slot) = st.slots.get_mut(s.slotid as usize) {
                        slot.seqid = s.sequenceid;
                        slot.reply = Some(bytes.clone());
                    }
                }
                (bytes, status)
            }
        };
        drop(st);
        self.record(CbEvent::Compound {
            ops: args.ops,
            status,
        });
        bytes
    }
}

/// The cached reply when `args` retries the last call on its slot.
fn answer_cached(st: &mut State, args: &CbCompoundArgs) -> Option<Vec<u8>> {
    let Some(CbArgOp::Sequence(s)) = args.ops.first() else {
        return None;
    };
    if st.sessionid.is_some_and(|id| id != s.sessionid) {
        return None;
    }
    let slot = st.slots.get(s.slotid as usize)?;
    if s.sequenceid == slot.seqid {
        slot.reply.clone()
    } else {
        None
    }
}

/// The results of every operation up to the first failure, and the
/// status of the last one (RFC 8881 §19.2).
fn answer(st: &mut State, args: &CbCompoundArgs, out: &mut Vec<CbResOp>) -> Nfsstat4 {
    if !(NFS4_MINOR_VERSION_1..=CB_MINOR_MAX).contains(&args.minorversion) {
        return Nfsstat4::MinorVersMismatch;
    }
    for (i, op) in args.ops.iter().enumerate() {
        let r = match op {
            CbArgOp::Sequence(s) if i == 0 => sequence(st, s),
            // CB_SEQUENCE anywhere but first (§20.9.3).
            CbArgOp::Sequence(_) => CbResOp::error(OP_CB_SEQUENCE, Nfsstat4::SequencePos),
            // Anything else first: not in a session (§20.9.3).
            other if i == 0 => CbResOp::error(other.opnum(), Nfsstat4::OpNotInSession),
            // Acknowledged and logged; the delegation goes back by
            // DELEGRETURN on the fore channel.
            CbArgOp::Recall(_) => CbResOp::Recall(Nfsstat4::Ok),
            CbArgOp::RecallAny(_) => CbResOp::RecallAny(Nfsstat4::Ok),
            CbArgOp::RecallableObjAvail(_) => CbResOp::RecallableObjAvail(Nfsstat4::Ok),
            CbArgOp::RecallSlot(_) => CbResOp::RecallSlot(Nfsstat4::Ok),
            CbArgOp::NotifyLock(_) => CbResOp::NotifyLock(Nfsstat4::Ok),
            CbArgOp::WantsCancelled(_) => CbResOp::WantsCancelled(Nfsstat4::Ok),
            CbArgOp::NotifyDeviceId(_) => CbResOp::NotifyDeviceId(Nfsstat4::Ok),
            CbArgOp::Notify(_) => CbResOp::Notify(Nfsstat4::Ok),
            CbArgOp::LayoutRecall(_) => CbResOp::LayoutRecall(Nfsstat4::NoMatchingLayout),
            CbArgOp::PushDeleg(_) => CbResOp::PushDeleg(Nfsstat4::RejectDeleg),
            CbArgOp::GetAttr(a) => CbResOp::GetAttr(match st.getattr {
                Some((size, change)) => NfsRes4::Ok(getattr_answer(&a.attr_request, size, change)),
                None => NfsRes4::Fail(Nfsstat4::BadHandle),
            }),
            // Minor version 2's own operation (RFC 7862 §16.1).
            CbArgOp::Offload(_) if args.minorversion < 2 => CbResOp::Illegal(Nfsstat4::OpIllegal),
            CbArgOp::Offload(_) => CbResOp::Offload(Nfsstat4::Ok),
            CbArgOp::Illegal { .. } => CbResOp::Illegal(Nfsstat4::OpIllegal),
        };
        let s = r.status();
        out.push(r);
        if s != Nfsstat4::Ok {
            return s;
        }
    }
    Nfsstat4::Ok
}

/// CB_GETATTR's fattr4 (§20.1): of the attributes asked, change and
/// size (the only ones a client answers, §10.4.3).
fn getattr_answer(want: &Bitmap4, size: u64, change: u64) -> Fattr4 {
    let mut mask = Bitmap4::new();
    let mut e = Enc::new();
    if want.contains(FATTR4_CHANGE) {
        mask.insert(FATTR4_CHANGE);
        e.u64(change);
    }
    if want.contains(FATTR4_SIZE) {
        mask.insert(FATTR4_SIZE);
        e.u64(size);
    }
    Fattr4 {
        attrmask: mask,
        attr_vals: e.into_vec(),
    }
}

/// CB_SEQUENCE (RFC 8881 §20.9.3): the session, the slot, then the
/// sequence id: one more than the slot's is a new call (a retry was
/// answered from the cache before this), anything else misordered.
fn sequence(st: &State, s: &CbSequence4Args) -> CbResOp {
    if st.sessionid.is_some_and(|id| id != s.sessionid) {
        return CbResOp::error(OP_CB_SEQUENCE, Nfsstat4::BadSession);
    }
    let nslots = st.slots.len() as u32;
    let Some(slot) = st.slots.get(s.slotid as usize) else {
        return CbResOp::error(OP_CB_SEQUENCE, Nfsstat4::BadSlot);
    };
    // A retry with its reply cached was answered already; any other id
    // but the next is misordered.
    if s.sequenceid != slot.seqid.wrapping_add(1) {
        return CbResOp::error(OP_CB_SEQUENCE, Nfsstat4::SeqMisordered);
    }
    CbResOp::Sequence(NfsRes4::Ok(CbSequence4ResOk {
        sessionid: s.sessionid,
        sequenceid: s.sequenceid,
        slotid: s.slotid,
        highest_slotid: nslots.saturating_sub(1),
        target_highest_slotid: nslots.saturating_sub(1),
    }))
}
