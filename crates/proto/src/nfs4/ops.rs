//! The arguments and results of every NFSv4.1 operation (RFC 8881 §18,
//! opnums 3..58, and the NFSv4.0-only ones a 4.1 server refuses), of
//! NFSv4.2's data operations (RFC 7862 §15, `v42`) and of its extended
//! attribute operations (RFC 8276, 72..75, `xattr`), as
//! nfs_argop4 (`ArgOp`) and nfs_resop4 (`ResOp`) from RFC 5662.
//!
//! A server reads each operation's number itself (so it still has the
//! number when the arguments fail to decode and the answer is
//! NFS4ERR_BADXDR for that operation, RFC 8881 §15.2) and calls
//! `ArgOp::decode(d, opnum)`; an opnum outside those decodes to
//! `ArgOp::Illegal`, answered with ILLEGAL4res (§18.52). `ResOp::error`
//! builds the result of a failed operation of any number.

use rnfsd_xdr::{Dec, Enc, Result, Xdr, XdrError};

use super::*;

pub mod data;
pub mod dir;
pub mod fh;
pub mod lock;
pub mod open;
pub mod pnfs;
pub mod session;
pub mod v42;
pub mod xattr;

pub use data::*;
pub use dir::*;
pub use fh::*;
pub use lock::*;
pub use open::*;
pub use pnfs::*;
pub use session::*;
pub use v42::*;
pub use xattr::*;

/// What every operation result has: a status, and a form for failure.
pub trait OpResult: Sized {
    /// The result of an operation that failed with `status` before it
    /// produced anything (a body-carrying status such as NFS4ERR_DENIED
    /// encodes as NFS4ERR_SERVERFAULT, as does NFS4_OK for results whose
    /// NFS4_OK arm has a body).
    fn from_status(status: Nfsstat4) -> Self;
    fn status(&self) -> Nfsstat4;
}

impl OpResult for Nfsstat4 {
    fn from_status(status: Nfsstat4) -> Self {
        status
    }
    fn status(&self) -> Nfsstat4 {
        *self
    }
}

impl<T> OpResult for NfsRes4<T> {
    fn from_status(status: Nfsstat4) -> Self {
        NfsRes4::Fail(status)
    }
    fn status(&self) -> Nfsstat4 {
        NfsRes4::status(self)
    }
}

/// Implements `OpResult` for a result enum with a `Fail(Nfsstat4)` arm
/// and an inherent `status()`.
macro_rules! op_result_with_fail {
    ($($t:ty),*) => {$(
        impl OpResult for $t {
            fn from_status(status: Nfsstat4) -> Self {
                <$t>::Fail(status)
            }
            fn status(&self) -> Nfsstat4 {
                <$t>::status(self)
            }
        }
    )*};
}
op_result_with_fail!(
    Lock4Res,
    LockT4Res,
    SetClientId4Res,
    GetDeviceInfo4Res,
    LayoutGet4Res,
    Copy4Res
);

impl OpResult for SetAttr4Res {
    fn from_status(status: Nfsstat4) -> Self {
        SetAttr4Res::fail(status)
    }
    fn status(&self) -> Nfsstat4 {
        self.status
    }
}

/// Declares `ArgOp` from the operations with arguments and those without.
/// Arguments larger than 64 bytes are boxed: every operation's value moves
/// through the decoder and the operation table, so the enum's size is
/// copied for each (a GETATTR's compound moved 232 bytes per operation,
/// twice, when EXCHANGE_ID's arguments set it).
macro_rules! arg_ops {
    (
        args { $($av:ident($aty:ty) = $aop:ident,)* }
        void { $($vv:ident = $vop:ident,)* }
    ) => {
        /// nfs_argop4 (RFC 5662): one operation of a COMPOUND, borrowing
        /// bulk data (WRITE's) from the received record.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum ArgOp<'a> {
            $($av($aty),)*
            $($vv,)*
            /// OP_ILLEGAL, or any number that is not an operation here; its
            /// arguments, if any, are not read. Decoders do not know the
            /// minor version: the server refuses 4.2's operations in a 4.1
            /// compound.
            Illegal { opnum: u32 },
        }

        impl<'a> ArgOp<'a> {
            /// The operation's number (the received one for `Illegal`).
            pub fn opnum(&self) -> u32 {
                match self {
                    $(ArgOp::$av(_) => $aop,)*
                    $(ArgOp::$vv => $vop,)*
                    ArgOp::Illegal { opnum } => *opnum,
                }
            }

            /// Decode the arguments of operation `opnum`, whose number the
            /// caller has read (RFC 5662 nfs_argop4). Never fails for an
            /// unknown number: that is `Illegal`.
            pub fn decode(d: &mut Dec<'a>, opnum: u32) -> Result<Self> {
                Ok(match opnum {
                    $($aop => ArgOp::$av(<$aty>::decode(d)?),)*
                    $($vop => ArgOp::$vv,)*
                    _ => ArgOp::Illegal { opnum },
                })
            }

            /// Encode the whole nfs_argop4: number, then arguments.
            pub fn encode(&self, e: &mut Enc) {
                e.u32(self.opnum());
                match self {
                    $(ArgOp::$av(a) => a.encode(e),)*
                    _ => {}
                }
            }
        }
    };
}

arg_ops! {
    args {
        Access(Access4Args) = OP_ACCESS,
        Close(Close4Args) = OP_CLOSE,
        Commit(Commit4Args) = OP_COMMIT,
        Create(Box<Create4Args>) = OP_CREATE,
        DelegPurge(DelegPurge4Args) = OP_DELEGPURGE,
        DelegReturn(DelegReturn4Args) = OP_DELEGRETURN,
        GetAttr(GetAttr4Args) = OP_GETATTR,
        Link(Link4Args) = OP_LINK,
        Lock(Box<Lock4Args>) = OP_LOCK,
        LockT(LockT4Args) = OP_LOCKT,
        LockU(LockU4Args) = OP_LOCKU,
        Lookup(Lookup4Args) = OP_LOOKUP,
        NVerify(Verify4Args) = OP_NVERIFY,
        Open(Box<Open4Args>) = OP_OPEN,
        OpenAttr(OpenAttr4Args) = OP_OPENATTR,
        OpenConfirm(OpenConfirm4Args) = OP_OPEN_CONFIRM,
        OpenDowngrade(OpenDowngrade4Args) = OP_OPEN_DOWNGRADE,
        PutFh(PutFh4Args) = OP_PUTFH,
        Read(Read4Args) = OP_READ,
        ReadDir(ReadDir4Args) = OP_READDIR,
        Remove(Remove4Args) = OP_REMOVE,
        Rename(Rename4Args) = OP_RENAME,
        Renew(Renew4Args) = OP_RENEW,
        SecInfo(SecInfo4Args) = OP_SECINFO,
        SetAttr(Box<SetAttr4Args>) = OP_SETATTR,
        SetClientId(Box<SetClientId4Args>) = OP_SETCLIENTID,
        SetClientIdConfirm(SetClientIdConfirm4Args) = OP_SETCLIENTID_CONFIRM,
        Verify(Verify4Args) = OP_VERIFY,
        Write(Write4ArgsRef<'a>) = OP_WRITE,
        ReleaseLockOwner(ReleaseLockOwner4Args) = OP_RELEASE_LOCKOWNER,
        BackchannelCtl(BackchannelCtl4Args) = OP_BACKCHANNEL_CTL,
        BindConnToSession(BindConnToSession4Args) = OP_BIND_CONN_TO_SESSION,
        ExchangeId(Box<ExchangeId4Args>) = OP_EXCHANGE_ID,
        CreateSession(Box<CreateSession4Args>) = OP_CREATE_SESSION,
        DestroySession(DestroySession4Args) = OP_DESTROY_SESSION,
        FreeStateid(FreeStateid4Args) = OP_FREE_STATEID,
        GetDirDelegation(Box<GetDirDelegation4Args>) = OP_GET_DIR_DELEGATION,
        GetDeviceInfo(GetDeviceInfo4Args) = OP_GETDEVICEINFO,
        GetDeviceList(GetDeviceList4Args) = OP_GETDEVICELIST,
        LayoutCommit(Box<LayoutCommit4Args>) = OP_LAYOUTCOMMIT,
        LayoutGet(LayoutGet4Args) = OP_LAYOUTGET,
        LayoutReturn(Box<LayoutReturn4Args>) = OP_LAYOUTRETURN,
        SecInfoNoName(SecInfoStyle4) = OP_SECINFO_NO_NAME,
        Sequence(Sequence4Args) = OP_SEQUENCE,
        SetSsv(SetSsv4Args) = OP_SET_SSV,
        TestStateid(TestStateid4Args) = OP_TEST_STATEID,
        WantDelegation(WantDelegation4Args) = OP_WANT_DELEGATION,
        DestroyClientId(DestroyClientId4Args) = OP_DESTROY_CLIENTID,
        ReclaimComplete(ReclaimComplete4Args) = OP_RECLAIM_COMPLETE,
        GetXattr(GetXattr4Args) = OP_GETXATTR,
        SetXattr(SetXattr4Args) = OP_SETXATTR,
        ListXattrs(ListXattrs4Args) = OP_LISTXATTRS,
        RemoveXattr(RemoveXattr4Args) = OP_REMOVEXATTR,
        // NFSv4.2 (RFC 7862 §15).
        Allocate(Allocate4Args) = OP_ALLOCATE,
        Copy(Copy4Args) = OP_COPY,
        Deallocate(Deallocate4Args) = OP_DEALLOCATE,
        OffloadCancel(Offload4Args) = OP_OFFLOAD_CANCEL,
        OffloadStatus(Offload4Args) = OP_OFFLOAD_STATUS,
        ReadPlus(ReadPlus4Args) = OP_READ_PLUS,
        Seek(Seek4Args) = OP_SEEK,
        Clone(Clone4Args) = OP_CLONE,
    }
    void {
        GetFh = OP_GETFH,
        LookupP = OP_LOOKUPP,
        PutPubFh = OP_PUTPUBFH,
        PutRootFh = OP_PUTROOTFH,
        ReadLink = OP_READLINK,
        RestoreFh = OP_RESTOREFH,
        SaveFh = OP_SAVEFH,
    }
}

/// Declares `ResOp` from the operations and their result types.
macro_rules! res_ops {
    ($($v:ident($ty:ty) = $op:ident,)*) => {
        /// nfs_resop4 (RFC 5662): one operation's result.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum ResOp {
            $($v($ty),)*
            /// ILLEGAL4res (RFC 8881 §18.52), sent with resop OP_ILLEGAL.
            Illegal(Nfsstat4),
        }

        impl ResOp {
            pub fn opnum(&self) -> u32 {
                match self {
                    $(ResOp::$v(_) => $op,)*
                    ResOp::Illegal(_) => OP_ILLEGAL,
                }
            }

            pub fn status(&self) -> Nfsstat4 {
                match self {
                    $(ResOp::$v(r) => OpResult::status(r),)*
                    ResOp::Illegal(s) => *s,
                }
            }

            /// The result of operation `opnum` failing with `status`; for a
            /// number without a result type, ILLEGAL4res with `status` (which
            /// should be NFS4ERR_OP_ILLEGAL, or NFS4ERR_BADXDR).
            pub fn error(opnum: u32, status: Nfsstat4) -> ResOp {
                match opnum {
                    $($op => ResOp::$v(<$ty as OpResult>::from_status(status)),)*
                    _ => ResOp::Illegal(status),
                }
            }
        }

        impl Xdr for ResOp {
            fn encode(&self, e: &mut Enc) {
                e.u32(self.opnum());
                match self {
                    $(ResOp::$v(r) => r.encode(e),)*
                    // ILLEGAL4res is its status alone (RFC 8881 §18.52).
                    ResOp::Illegal(s) => s.encode(e),
                }
            }
            /// Reads resop then the result (RFC 5662 nfs_resop4); an
            /// unknown resop cannot be skipped, so it is an error.
            fn decode(d: &mut Dec<'_>) -> Result<Self> {
                Ok(match d.u32()? {
                    $($op => ResOp::$v(<$ty>::decode(d)?),)*
                    OP_ILLEGAL => ResOp::Illegal(Nfsstat4::decode(d)?),
                    _ => return Err(XdrError::BadDiscriminant),
                })
            }
        }
    };
}

res_ops! {
    Access(Access4Res) = OP_ACCESS,
    Close(Stateid4Res) = OP_CLOSE,
    Commit(Commit4Res) = OP_COMMIT,
    Create(Create4Res) = OP_CREATE,
    DelegPurge(Nfsstat4) = OP_DELEGPURGE,
    DelegReturn(Nfsstat4) = OP_DELEGRETURN,
    GetAttr(GetAttr4Res) = OP_GETATTR,
    GetFh(GetFh4Res) = OP_GETFH,
    Link(Link4Res) = OP_LINK,
    Lock(Lock4Res) = OP_LOCK,
    LockT(LockT4Res) = OP_LOCKT,
    LockU(Stateid4Res) = OP_LOCKU,
    Lookup(Nfsstat4) = OP_LOOKUP,
    LookupP(Nfsstat4) = OP_LOOKUPP,
    NVerify(Nfsstat4) = OP_NVERIFY,
    Open(Open4Res) = OP_OPEN,
    OpenAttr(Nfsstat4) = OP_OPENATTR,
    OpenConfirm(Stateid4Res) = OP_OPEN_CONFIRM,
    OpenDowngrade(Stateid4Res) = OP_OPEN_DOWNGRADE,
    PutFh(Nfsstat4) = OP_PUTFH,
    PutPubFh(Nfsstat4) = OP_PUTPUBFH,
    PutRootFh(Nfsstat4) = OP_PUTROOTFH,
    Read(Read4Res) = OP_READ,
    ReadDir(ReadDir4Res) = OP_READDIR,
    ReadLink(ReadLink4Res) = OP_READLINK,
    Remove(Remove4Res) = OP_REMOVE,
    Rename(Rename4Res) = OP_RENAME,
    Renew(Nfsstat4) = OP_RENEW,
    RestoreFh(Nfsstat4) = OP_RESTOREFH,
    SaveFh(Nfsstat4) = OP_SAVEFH,
    SecInfo(SecInfo4Res) = OP_SECINFO,
    SetAttr(SetAttr4Res) = OP_SETATTR,
    SetClientId(SetClientId4Res) = OP_SETCLIENTID,
    SetClientIdConfirm(Nfsstat4) = OP_SETCLIENTID_CONFIRM,
    Verify(Nfsstat4) = OP_VERIFY,
    Write(Write4Res) = OP_WRITE,
    ReleaseLockOwner(Nfsstat4) = OP_RELEASE_LOCKOWNER,
    BackchannelCtl(Nfsstat4) = OP_BACKCHANNEL_CTL,
    BindConnToSession(BindConnToSession4Res) = OP_BIND_CONN_TO_SESSION,
    ExchangeId(ExchangeId4Res) = OP_EXCHANGE_ID,
    CreateSession(CreateSession4Res) = OP_CREATE_SESSION,
    DestroySession(Nfsstat4) = OP_DESTROY_SESSION,
    FreeStateid(Nfsstat4) = OP_FREE_STATEID,
    GetDirDelegation(GetDirDelegation4Res) = OP_GET_DIR_DELEGATION,
    GetDeviceInfo(GetDeviceInfo4Res) = OP_GETDEVICEINFO,
    GetDeviceList(GetDeviceList4Res) = OP_GETDEVICELIST,
    LayoutCommit(LayoutCommit4Res) = OP_LAYOUTCOMMIT,
    LayoutGet(LayoutGet4Res) = OP_LAYOUTGET,
    LayoutReturn(LayoutReturn4Res) = OP_LAYOUTRETURN,
    SecInfoNoName(SecInfo4Res) = OP_SECINFO_NO_NAME,
    Sequence(Sequence4Res) = OP_SEQUENCE,
    SetSsv(SetSsv4Res) = OP_SET_SSV,
    TestStateid(TestStateid4Res) = OP_TEST_STATEID,
    WantDelegation(WantDelegation4Res) = OP_WANT_DELEGATION,
    DestroyClientId(Nfsstat4) = OP_DESTROY_CLIENTID,
    ReclaimComplete(Nfsstat4) = OP_RECLAIM_COMPLETE,
    GetXattr(GetXattr4Res) = OP_GETXATTR,
    SetXattr(SetXattr4Res) = OP_SETXATTR,
    ListXattrs(ListXattrs4Res) = OP_LISTXATTRS,
    RemoveXattr(RemoveXattr4Res) = OP_REMOVEXATTR,
    Allocate(Nfsstat4) = OP_ALLOCATE,
    Copy(Copy4Res) = OP_COPY,
    Deallocate(Nfsstat4) = OP_DEALLOCATE,
    OffloadCancel(Nfsstat4) = OP_OFFLOAD_CANCEL,
    OffloadStatus(OffloadStatus4Res) = OP_OFFLOAD_STATUS,
    ReadPlus(ReadPlus4Res) = OP_READ_PLUS,
    Seek(Seek4Res) = OP_SEEK,
    Clone(Nfsstat4) = OP_CLONE,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_41_opnum_has_arguments_and_a_result() {
        for op in OP_ACCESS..=LAST_NFS41_OP {
            let r = ResOp::error(op, Nfsstat4::NotSupp);
            assert_eq!(r.opnum(), op, "result of {op}");
            assert_eq!(r.status(), Nfsstat4::NotSupp);
            let b = rnfsd_xdr::to_vec(&r);
            assert_eq!(&b[..4], op.to_be_bytes());
            assert_eq!(rnfsd_xdr::from_slice::<ResOp>(&b), Ok(r));
        }
        for op in OP_ALLOCATE..=OP_CLONE {
            let r = ResOp::error(op, Nfsstat4::NotSupp);
            assert_eq!(r.opnum() == op, is_v42_data_op(op), "result of {op}");
        }
        for op in [0, 1, 2, OP_COPY_NOTIFY, OP_ILLEGAL, u32::MAX] {
            let a = ArgOp::decode(&mut Dec::new(&[]), op).unwrap();
            assert_eq!(a, ArgOp::Illegal { opnum: op });
            assert_eq!(ResOp::error(op, Nfsstat4::OpIllegal).opnum(), OP_ILLEGAL);
        }
    }

    #[test]
    fn failed_setattr_still_sends_its_bitmap() {
        let r = ResOp::error(OP_SETATTR, Nfsstat4::Perm);
        assert_eq!(rnfsd_xdr::to_vec(&r), [0, 0, 0, 34, 0, 0, 0, 1, 0, 0, 0, 0]);
    }

    #[test]
    fn void_arguments_consume_nothing() {
        for op in [
            OP_GETFH,
            OP_LOOKUPP,
            OP_PUTPUBFH,
            OP_PUTROOTFH,
            OP_READLINK,
            OP_RESTOREFH,
            OP_SAVEFH,
        ] {
            let b = [0xffu8; 4];
            let mut d = Dec::new(&b);
            let a = ArgOp::decode(&mut d, op).unwrap();
            assert_eq!(a.opnum(), op);
            assert_eq!(d.remaining(), 4);
        }
    }
}
