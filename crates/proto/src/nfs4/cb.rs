//! The NFSv4.1 callback program (RFC 8881 §19, §20): CB_NULL and
//! CB_COMPOUND, sent by the server over the session's back channel. The
//! program number is the client's, from CREATE_SESSION's csa_cb_program
//! (or BACKCHANNEL_CTL's bca_cb_program); `NFS4_CALLBACK` is only the
//! XDR's placeholder.
//!
//! The server encodes `CbCompoundArgs` and decodes `CbCompoundRes`; both
//! directions exist for tests and for a client.

use rnfsd_xdr::{xdr_struct, Dec, Enc, Result, Xdr, XdrError};

use super::{
    decode_array, encode_array, Bitmap4, Fattr4, Fsid4, LockOwner4, NfsFh4, NfsRes4, Nfsstat4,
    OpResult, OpenDelegation4, SessionId4, Stateid4, WriteResponse4, MAX_ATTRLIST,
};
use crate::mount::bounded_opaque;

/// The transient program number in RFC 5662's callback program; the real
/// one is the client's csa_cb_program.
pub const NFS4_CALLBACK: u32 = 0x4000_0000;
pub const NFS_CB: u32 = 1;

/// Procedures (RFC 8881 §19).
pub const CB_NULL: u32 = 0;
pub const CB_COMPOUND: u32 = 1;

// Callback operation numbers (RFC 8881 §20, nfs_cb_opnum4).
pub const OP_CB_GETATTR: u32 = 3;
pub const OP_CB_RECALL: u32 = 4;
pub const OP_CB_LAYOUTRECALL: u32 = 5;
pub const OP_CB_NOTIFY: u32 = 6;
pub const OP_CB_PUSH_DELEG: u32 = 7;
pub const OP_CB_RECALL_ANY: u32 = 8;
pub const OP_CB_RECALLABLE_OBJ_AVAIL: u32 = 9;
pub const OP_CB_RECALL_SLOT: u32 = 10;
pub const OP_CB_SEQUENCE: u32 = 11;
pub const OP_CB_WANTS_CANCELLED: u32 = 12;
pub const OP_CB_NOTIFY_LOCK: u32 = 13;
pub const OP_CB_NOTIFY_DEVICEID: u32 = 14;
/// NFSv4.2's CB_OFFLOAD (RFC 7862 §16.1), sent at minor version 2.
pub const OP_CB_OFFLOAD: u32 = 15;
pub const OP_CB_ILLEGAL: u32 = 10044;

// CB_RECALL_ANY type mask bits (RFC 8881 §20.6).
pub const RCA4_TYPE_MASK_RDATA_DLG: u32 = 0;
pub const RCA4_TYPE_MASK_WDATA_DLG: u32 = 1;
pub const RCA4_TYPE_MASK_DIR_DLG: u32 = 2;
pub const RCA4_TYPE_MASK_FILE_LAYOUT: u32 = 3;
pub const RCA4_TYPE_MASK_BLK_LAYOUT: u32 = 4;

/// Our bound on notify4 entries in CB_NOTIFY / CB_NOTIFY_DEVICEID, and on
/// referring call lists and calls in CB_SEQUENCE.
pub const MAX_CB_LIST: usize = 64;

xdr_struct! {
    /// CB_GETATTR4args (RFC 8881 §20.1).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct CbGetAttr4Args { pub fh: NfsFh4, pub attr_request: Bitmap4 }
}

xdr_struct! {
    /// CB_RECALL4args (RFC 8881 §20.2).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct CbRecall4Args { pub stateid: Stateid4, pub truncate: bool, pub fh: NfsFh4 }
}

xdr_struct! {
    /// layoutrecall_file4 (RFC 8881 §20.3).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct LayoutRecallFile4 { pub fh: NfsFh4, pub offset: u64, pub length: u64, pub stateid: Stateid4 }
}

/// layoutrecall4 (RFC 8881 §20.3): switch on layoutrecall_type4.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutRecall4 {
    File(LayoutRecallFile4),
    Fsid(Fsid4),
    All,
}

impl Xdr for LayoutRecall4 {
    fn encode(&self, e: &mut Enc) {
        match self {
            LayoutRecall4::File(f) => {
                e.u32(1);
                f.encode(e);
            }
            LayoutRecall4::Fsid(f) => {
                e.u32(2);
                f.encode(e);
            }
            LayoutRecall4::All => e.u32(3),
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        match d.u32()? {
            1 => Ok(LayoutRecall4::File(LayoutRecallFile4::decode(d)?)),
            2 => Ok(LayoutRecall4::Fsid(Fsid4::decode(d)?)),
            3 => Ok(LayoutRecall4::All),
            _ => Err(XdrError::BadDiscriminant),
        }
    }
}

xdr_struct! {
    /// CB_LAYOUTRECALL4args (RFC 8881 §20.3); layout type and iomode are
    /// numbers, as in LAYOUTGET.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct CbLayoutRecall4Args {
        pub layout_type: u32,
        pub iomode: u32,
        pub changed: bool,
        pub recall: LayoutRecall4,
    }
}

bounded_opaque!(
    /// notifylist4 (RFC 8881 §20.4): a notify4's encoded values, at most
    /// `MAX_ATTRLIST` bytes.
    NotifyList4,
    MAX_ATTRLIST
);

xdr_struct! {
    /// notify4 (RFC 8881 §20.4): which notifications, then their values,
    /// left encoded.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Notify4 { pub mask: Bitmap4, pub vals: NotifyList4 }
}

fn decode_notify_list(d: &mut Dec<'_>) -> Result<Vec<Notify4>> {
    // mask count 4 + values length 4.
    decode_array(d, MAX_CB_LIST, 8, Notify4::decode)
}

/// CB_NOTIFY4args (RFC 8881 §20.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CbNotify4Args {
    pub stateid: Stateid4,
    pub fh: NfsFh4,
    pub changes: Vec<Notify4>,
}

impl Xdr for CbNotify4Args {
    fn encode(&self, e: &mut Enc) {
        self.stateid.encode(e);
        self.fh.encode(e);
        encode_array(e, &self.changes);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(CbNotify4Args {
            stateid: Stateid4::decode(d)?,
            fh: NfsFh4::decode(d)?,
            changes: decode_notify_list(d)?,
        })
    }
}

xdr_struct! {
    /// CB_PUSH_DELEG4args (RFC 8881 §20.5).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct CbPushDeleg4Args { pub fh: NfsFh4, pub delegation: OpenDelegation4 }
}

xdr_struct! {
    /// CB_RECALL_ANY4args (RFC 8881 §20.6), also
    /// CB_RECALLABLE_OBJ_AVAIL4args (§20.7).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct CbRecallAny4Args { pub objects_to_keep: u32, pub type_mask: Bitmap4 }
}

xdr_struct! {
    /// CB_RECALL_SLOT4args (RFC 8881 §20.8).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct CbRecallSlot4Args { pub target_highest_slotid: u32 }
}

xdr_struct! {
    /// referring_call4 (RFC 8881 §20.9).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ReferringCall4 { pub sequenceid: u32, pub slotid: u32 }
}

/// referring_call_list4 (RFC 8881 §20.9): at most `MAX_CB_LIST` calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferringCallList4 {
    pub sessionid: SessionId4,
    pub referring_calls: Vec<ReferringCall4>,
}

impl Xdr for ReferringCallList4 {
    fn encode(&self, e: &mut Enc) {
        self.sessionid.encode(e);
        encode_array(e, &self.referring_calls);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(ReferringCallList4 {
            sessionid: SessionId4::decode(d)?,
            referring_calls: decode_array(d, MAX_CB_LIST, 8, ReferringCall4::decode)?,
        })
    }
}

/// CB_SEQUENCE4args (RFC 8881 §20.9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CbSequence4Args {
    pub sessionid: SessionId4,
    pub sequenceid: u32,
    pub slotid: u32,
    pub highest_slotid: u32,
    pub cachethis: bool,
    /// At most `MAX_CB_LIST` lists.
    pub referring_call_lists: Vec<ReferringCallList4>,
}

impl Xdr for CbSequence4Args {
    fn encode(&self, e: &mut Enc) {
        self.sessionid.encode(e);
        e.u32(self.sequenceid);
        e.u32(self.slotid);
        e.u32(self.highest_slotid);
        e.bool(self.cachethis);
        encode_array(e, &self.referring_call_lists);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(CbSequence4Args {
            sessionid: SessionId4::decode(d)?,
            sequenceid: d.u32()?,
            slotid: d.u32()?,
            highest_slotid: d.u32()?,
            cachethis: d.bool()?,
            // session id 16 + call count 4.
            referring_call_lists: decode_array(d, MAX_CB_LIST, 20, ReferringCallList4::decode)?,
        })
    }
}

xdr_struct! {
    /// CB_SEQUENCE4resok (RFC 8881 §20.9).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct CbSequence4ResOk {
        pub sessionid: SessionId4,
        pub sequenceid: u32,
        pub slotid: u32,
        pub highest_slotid: u32,
        pub target_highest_slotid: u32,
    }
}

xdr_struct! {
    /// CB_WANTS_CANCELLED4args (RFC 8881 §20.10).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct CbWantsCancelled4Args {
        pub contended_wants_cancelled: bool,
        pub resourced_wants_cancelled: bool,
    }
}

xdr_struct! {
    /// CB_NOTIFY_LOCK4args (RFC 8881 §20.11).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct CbNotifyLock4Args { pub fh: NfsFh4, pub lock_owner: LockOwner4 }
}

/// CB_NOTIFY_DEVICEID4args (RFC 8881 §20.12).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CbNotifyDeviceId4Args {
    pub changes: Vec<Notify4>,
}

impl Xdr for CbNotifyDeviceId4Args {
    fn encode(&self, e: &mut Enc) {
        encode_array(e, &self.changes);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(CbNotifyDeviceId4Args {
            changes: decode_notify_list(d)?,
        })
    }
}

/// offload_info4 (RFC 7862 §16.1): how an asynchronous copy ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffloadInfo4 {
    /// NFS4_OK: the copy's write_response4 (wr_callback_id empty).
    Ok(WriteResponse4),
    /// Any other status, with the bytes copied before it.
    Fail { status: Nfsstat4, bytes_copied: u64 },
}

impl Xdr for OffloadInfo4 {
    fn encode(&self, e: &mut Enc) {
        match self {
            OffloadInfo4::Ok(w) => {
                Nfsstat4::Ok.encode(e);
                w.encode(e);
            }
            OffloadInfo4::Fail {
                status,
                bytes_copied,
            } => {
                status.encode(e);
                e.u64(*bytes_copied);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(match Nfsstat4::decode(d)? {
            Nfsstat4::Ok => OffloadInfo4::Ok(WriteResponse4::decode(d)?),
            status => OffloadInfo4::Fail {
                status,
                bytes_copied: d.u64()?,
            },
        })
    }
}

xdr_struct! {
    /// CB_OFFLOAD4args (RFC 7862 §16.1).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct CbOffload4Args { pub fh: NfsFh4, pub stateid: Stateid4, pub info: OffloadInfo4 }
}

/// Declares `CbArgOp` and `CbResOp` from one table.
macro_rules! cb_ops {
    ($($v:ident($aty:ty, $rty:ty) = $op:ident,)*) => {
        /// nfs_cb_argop4 (RFC 5662).
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum CbArgOp {
            $($v($aty),)*
            /// OP_CB_ILLEGAL or any unknown number; no arguments read.
            Illegal { opnum: u32 },
        }

        impl CbArgOp {
            pub fn opnum(&self) -> u32 {
                match self {
                    $(CbArgOp::$v(_) => $op,)*
                    CbArgOp::Illegal { opnum } => *opnum,
                }
            }

            /// The arguments of callback operation `opnum`, already read.
            pub fn decode(d: &mut Dec<'_>, opnum: u32) -> Result<Self> {
                Ok(match opnum {
                    $($op => CbArgOp::$v(<$aty>::decode(d)?),)*
                    _ => CbArgOp::Illegal { opnum },
                })
            }

            /// The whole nfs_cb_argop4: number, then arguments.
            pub fn encode(&self, e: &mut Enc) {
                e.u32(self.opnum());
                match self {
                    $(CbArgOp::$v(a) => a.encode(e),)*
                    CbArgOp::Illegal { .. } => {}
                }
            }
        }

        /// nfs_cb_resop4 (RFC 5662).
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum CbResOp {
            $($v($rty),)*
            /// CB_ILLEGAL4res (RFC 8881 §20.13).
            Illegal(Nfsstat4),
        }

        impl CbResOp {
            pub fn opnum(&self) -> u32 {
                match self {
                    $(CbResOp::$v(_) => $op,)*
                    CbResOp::Illegal(_) => OP_CB_ILLEGAL,
                }
            }

            pub fn status(&self) -> Nfsstat4 {
                match self {
                    $(CbResOp::$v(r) => OpResult::status(r),)*
                    CbResOp::Illegal(s) => *s,
                }
            }

            /// The result of callback operation `opnum` failing with
            /// `status` (CB_ILLEGAL4res for an unknown number).
            pub fn error(opnum: u32, status: Nfsstat4) -> CbResOp {
                match opnum {
                    $($op => CbResOp::$v(<$rty as OpResult>::from_status(status)),)*
                    _ => CbResOp::Illegal(status),
                }
            }
        }

        impl Xdr for CbResOp {
            fn encode(&self, e: &mut Enc) {
                e.u32(self.opnum());
                match self {
                    $(CbResOp::$v(r) => r.encode(e),)*
                    // CB_ILLEGAL4res is its status alone (RFC 8881 §20.11).
                    CbResOp::Illegal(s) => s.encode(e),
                }
            }
            fn decode(d: &mut Dec<'_>) -> Result<Self> {
                Ok(match d.u32()? {
                    $($op => CbResOp::$v(<$rty>::decode(d)?),)*
                    OP_CB_ILLEGAL => CbResOp::Illegal(Nfsstat4::decode(d)?),
                    _ => return Err(XdrError::BadDiscriminant),
                })
            }
        }
    };
}

cb_ops! {
    GetAttr(CbGetAttr4Args, NfsRes4<Fattr4>) = OP_CB_GETATTR,
    Recall(CbRecall4Args, Nfsstat4) = OP_CB_RECALL,
    LayoutRecall(CbLayoutRecall4Args, Nfsstat4) = OP_CB_LAYOUTRECALL,
    Notify(CbNotify4Args, Nfsstat4) = OP_CB_NOTIFY,
    PushDeleg(CbPushDeleg4Args, Nfsstat4) = OP_CB_PUSH_DELEG,
    RecallAny(CbRecallAny4Args, Nfsstat4) = OP_CB_RECALL_ANY,
    RecallableObjAvail(CbRecallAny4Args, Nfsstat4) = OP_CB_RECALLABLE_OBJ_AVAIL,
    RecallSlot(CbRecallSlot4Args, Nfsstat4) = OP_CB_RECALL_SLOT,
    Sequence(CbSequence4Args, NfsRes4<CbSequence4ResOk>) = OP_CB_SEQUENCE,
    WantsCancelled(CbWantsCancelled4Args, Nfsstat4) = OP_CB_WANTS_CANCELLED,
    NotifyLock(CbNotifyLock4Args, Nfsstat4) = OP_CB_NOTIFY_LOCK,
    NotifyDeviceId(CbNotifyDeviceId4Args, Nfsstat4) = OP_CB_NOTIFY_DEVICEID,
    Offload(CbOffload4Args, Nfsstat4) = OP_CB_OFFLOAD,
}

/// CB_COMPOUND4args (RFC 8881 §19.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CbCompoundArgs {
    pub tag: Vec<u8>,
    pub minorversion: u32,
    /// 0 for NFSv4.1 (callback_ident is a 4.0 notion, §19.2.3).
    pub callback_ident: u32,
    pub ops: Vec<CbArgOp>,
}

impl CbCompoundArgs {
    pub fn encode(&self, e: &mut Enc) {
        e.opaque(&self.tag);
        e.u32(self.minorversion);
        e.u32(self.callback_ident);
        e.u32(self.ops.len() as u32);
        for op in &self.ops {
            op.encode(e);
        }
    }

    /// Decodes at most `max_ops` operations and a tag of at most `max_tag`
    /// bytes; an unknown operation ends the decode with an error, as its
    /// arguments cannot be skipped.
    pub fn decode(d: &mut Dec<'_>, max_tag: usize, max_ops: usize) -> Result<Self> {
        let tag = d.opaque(max_tag)?.to_vec();
        let minorversion = d.u32()?;
        let callback_ident = d.u32()?;
        let n = d.array_len(max_ops, 4)?;
        let mut ops = Vec::with_capacity(n);
        for _ in 0..n {
            let opnum = d.u32()?;
            match CbArgOp::decode(d, opnum)? {
                CbArgOp::Illegal { .. } => return Err(XdrError::BadDiscriminant),
                op => ops.push(op),
            }
        }
        Ok(CbCompoundArgs {
            tag,
            minorversion,
            callback_ident,
            ops,
        })
    }
}

/// CB_COMPOUND4res (RFC 8881 §19.2).
pub type CbCompoundRes = super::CompoundResOf<CbResOp>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cb_sequence_then_recall_round_trips() {
        let args = CbCompoundArgs {
            tag: b"cb".to_vec(),
            minorversion: 1,
            callback_ident: 0,
            ops: vec![
                CbArgOp::Sequence(CbSequence4Args {
                    sessionid: SessionId4([3; 16]),
                    sequenceid: 1,
                    slotid: 0,
                    highest_slotid: 0,
                    cachethis: false,
                    referring_call_lists: vec![],
                }),
                CbArgOp::Recall(CbRecall4Args {
                    stateid: Stateid4 {
                        seqid: 1,
                        other: [9; 12],
                    },
                    truncate: false,
                    fh: NfsFh4(vec![1, 2, 3]),
                }),
            ],
        };
        let mut e = Enc::new();
        args.encode(&mut e);
        let mut d = Dec::new(e.as_slice());
        assert_eq!(CbCompoundArgs::decode(&mut d, 16, 4), Ok(args));
        assert_eq!(d.remaining(), 0);
        assert_eq!(
            CbCompoundArgs::decode(&mut Dec::new(e.as_slice()), 16, 1),
            Err(XdrError::TooLong)
        );
    }

    #[test]
    fn cb_offload_round_trips_both_arms() {
        use crate::nfs4::{StableHow4, Verifier4};
        for info in [
            OffloadInfo4::Ok(WriteResponse4 {
                callback_id: None,
                count: 1 << 30,
                committed: StableHow4::Unstable,
                writeverf: Verifier4([7; 8]),
            }),
            OffloadInfo4::Fail {
                status: Nfsstat4::Io,
                bytes_copied: 4096,
            },
        ] {
            let op = CbArgOp::Offload(CbOffload4Args {
                fh: NfsFh4(vec![1; 8]),
                stateid: Stateid4 {
                    seqid: 1,
                    other: [4; 12],
                },
                info,
            });
            let mut e = Enc::new();
            op.encode(&mut e);
            let mut d = Dec::new(e.as_slice());
            let opnum = d.u32().unwrap();
            assert_eq!(opnum, OP_CB_OFFLOAD);
            assert_eq!(CbArgOp::decode(&mut d, opnum), Ok(op));
            assert_eq!(d.remaining(), 0);
        }
        // Cut short anywhere: an error, never a panic.
        let op = CbOffload4Args {
            fh: NfsFh4(vec![1; 8]),
            stateid: Stateid4 {
                seqid: 1,
                other: [4; 12],
            },
            info: OffloadInfo4::Fail {
                status: Nfsstat4::Io,
                bytes_copied: 1,
            },
        };
        let b = rnfsd_xdr::to_vec(&op);
        for n in 0..b.len() {
            assert!(rnfsd_xdr::from_slice::<CbOffload4Args>(&b[..n]).is_err());
        }
    }

    #[test]
    fn cb_error_results() {
        let r = CbResOp::error(OP_CB_SEQUENCE, Nfsstat4::BadSession);
        assert_eq!(r, CbResOp::Sequence(NfsRes4::Fail(Nfsstat4::BadSession)));
        assert_eq!(
            CbResOp::error(99, Nfsstat4::OpIllegal).opnum(),
            OP_CB_ILLEGAL
        );
        let b = rnfsd_xdr::to_vec(&r);
        assert_eq!(rnfsd_xdr::from_slice::<CbResOp>(&b), Ok(r));
    }
}
