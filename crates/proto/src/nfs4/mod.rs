//! NFS version 4.1 (RFC 8881, XDR in RFC 5662), program 100003 version 4:
//! the COMPOUND procedure's operations and the callback program, with
//! encode and decode both ways.
//!
//! Layout:
//! - this file: program and operation numbers, `Nfsstat4`, protocol
//!   constants, and the bounds every decoder applies;
//! - [`types`]: the basic data types (RFC 8881 §3) and the session types
//!   shared by several operations;
//! - [`attr`]: attribute numbers (§5.8), `Bitmap4` and `Fattr4`;
//! - [`ops`]: `ArgOp` / `ResOp`, every operation of §18 (3..58) and RFC
//!   8276's extended attribute operations (72..75), split by family in
//!   `ops/*.rs`;
//! - [`compound`]: COMPOUND4args decoded one operation at a time, and the
//!   COMPOUND4res writer;
//! - [`cb`]: the callback program (§20).
//!
//! Every variable-length item is bounded on decode, before anything is
//! allocated: by the RFC's own limit where it has one (`NFS4_FHSIZE`,
//! `NFS4_OPAQUE_LIMIT`), otherwise by the `MAX_*` constants below, and
//! always by the bytes present (`Dec::opaque`, `Dec::array_len`).
//!
//! Decoders do not know the COMPOUND's minor version: the dispatcher
//! decides which operations a minor version allows (RFC 8881 §16.2.3).

use rnfsd_xdr::{xdr_enum, Dec, Enc, Result, Xdr, XdrError};

pub mod attr;
pub mod cb;
pub mod compound;
pub mod ops;
pub mod types;

pub use attr::*;
pub use compound::*;
pub use ops::*;
pub use types::*;

pub const NFS4_PROGRAM: u32 = 100003;
pub const NFS_V4: u32 = 4;
/// Minor versions this crate's types describe (4.2 only by constants).
pub const NFS4_MINOR_VERSION_1: u32 = 1;
pub const NFS4_MINOR_VERSION_2: u32 = 2;

/// Procedures (RFC 8881 §16).
pub const NFSPROC4_NULL: u32 = 0;
pub const NFSPROC4_COMPOUND: u32 = 1;

/// RFC 8881 §3.2 sizes.
pub const NFS4_FHSIZE: usize = 128;
pub const NFS4_VERIFIER_SIZE: usize = 8;
pub const NFS4_OPAQUE_LIMIT: usize = 1024;
pub const NFS4_SESSIONID_SIZE: usize = 16;
pub const NFS4_DEVICEID4_SIZE: usize = 16;
pub const NFS4_OTHER_SIZE: usize = 12;

/// RPCSEC_GSS flavor number (RFC 2203), used by SECINFO and
/// callback_sec_parms4.
pub const RPCSEC_GSS: u32 = 6;

// Our bounds on the RFC's unbounded items.
/// component4: a file name. Longer than a server's maxname (255) but
/// short enough to bound: names up to this answer NFS4ERR_NAMETOOLONG,
/// longer ones NFS4ERR_BADXDR.
pub const MAX_NAME: usize = 1024;
/// linktext4: a symlink's target.
pub const MAX_PATH: usize = 4096;
/// Components in one pathname4.
pub const MAX_PATH_COMPONENTS: usize = 256;
/// READ/WRITE data, as NFSv3's `MAX_DATA`.
pub const MAX_DATA: usize = 1 << 20;
/// attrlist4: the encoded attribute values of one fattr4.
pub const MAX_ATTRLIST: usize = 1 << 16;
/// Entries in one decoded READDIR result.
pub const MAX_DIR_ENTRIES: usize = 1 << 16;
/// sec_oid4 (a GSS mechanism OID; Kerberos 5's is 11 bytes).
pub const MAX_SEC_OID: usize = 128;
/// Items in the small arrays (OIDs, callback security parameters,
/// SECINFO flavors, GSS handles).
pub const MAX_SMALL_ARRAY: usize = 16;
/// Stateids in one TEST_STATEID.
pub const MAX_TEST_STATEIDS: usize = 1024;
/// netaddr4's netid and universal address strings.
pub const MAX_NETADDR: usize = 256;
/// pNFS opaque bodies (layout, device address, layout update).
pub const MAX_LAYOUT_BODY: usize = 1 << 16;
/// Layouts in one LAYOUTGET result, device IDs in one GETDEVICELIST.
pub const MAX_LAYOUTS: usize = 64;
pub const MAX_DEVICE_IDS: usize = 1024;
/// xattrvalue4 (RFC 8276 §8.3): above Linux's XATTR_SIZE_MAX (64 KiB), so
/// a larger value still decodes and the server answers NFS4ERR_XATTR2BIG,
/// not NFS4ERR_BADXDR; a request is bounded by its session anyway.
pub const MAX_XATTR_VALUE: usize = MAX_DATA;
/// Names in one decoded LISTXATTRS result (Linux lists at most 64 KiB of
/// names, each at least "user.x\0": under 10,000).
pub const MAX_XATTR_NAMES: usize = 1 << 14;

// Operation numbers (RFC 8881 §16.2, nfs_opnum4).
pub const OP_ACCESS: u32 = 3;
pub const OP_CLOSE: u32 = 4;
pub const OP_COMMIT: u32 = 5;
pub const OP_CREATE: u32 = 6;
pub const OP_DELEGPURGE: u32 = 7;
pub const OP_DELEGRETURN: u32 = 8;
pub const OP_GETATTR: u32 = 9;
pub const OP_GETFH: u32 = 10;
pub const OP_LINK: u32 = 11;
pub const OP_LOCK: u32 = 12;
pub const OP_LOCKT: u32 = 13;
pub const OP_LOCKU: u32 = 14;
pub const OP_LOOKUP: u32 = 15;
pub const OP_LOOKUPP: u32 = 16;
pub const OP_NVERIFY: u32 = 17;
pub const OP_OPEN: u32 = 18;
pub const OP_OPENATTR: u32 = 19;
/// NFSv4.0 only, like RENEW, SETCLIENTID, SETCLIENTID_CONFIRM and
/// RELEASE_LOCKOWNER: "must not implement" in 4.1 (RFC 8881 §17), whose
/// server answers NFS4ERR_NOTSUPP (§15.2); XDR in RFC 5662.
pub const OP_OPEN_CONFIRM: u32 = 20;
pub const OP_OPEN_DOWNGRADE: u32 = 21;
pub const OP_PUTFH: u32 = 22;
pub const OP_PUTPUBFH: u32 = 23;
pub const OP_PUTROOTFH: u32 = 24;
pub const OP_READ: u32 = 25;
pub const OP_READDIR: u32 = 26;
pub const OP_READLINK: u32 = 27;
pub const OP_REMOVE: u32 = 28;
pub const OP_RENAME: u32 = 29;
pub const OP_RENEW: u32 = 30;
pub const OP_RESTOREFH: u32 = 31;
pub const OP_SAVEFH: u32 = 32;
pub const OP_SECINFO: u32 = 33;
pub const OP_SETATTR: u32 = 34;
pub const OP_SETCLIENTID: u32 = 35;
pub const OP_SETCLIENTID_CONFIRM: u32 = 36;
pub const OP_VERIFY: u32 = 37;
pub const OP_WRITE: u32 = 38;
pub const OP_RELEASE_LOCKOWNER: u32 = 39;
pub const OP_BACKCHANNEL_CTL: u32 = 40;
pub const OP_BIND_CONN_TO_SESSION: u32 = 41;
pub const OP_EXCHANGE_ID: u32 = 42;
pub const OP_CREATE_SESSION: u32 = 43;
pub const OP_DESTROY_SESSION: u32 = 44;
pub const OP_FREE_STATEID: u32 = 45;
pub const OP_GET_DIR_DELEGATION: u32 = 46;
pub const OP_GETDEVICEINFO: u32 = 47;
pub const OP_GETDEVICELIST: u32 = 48;
pub const OP_LAYOUTCOMMIT: u32 = 49;
pub const OP_LAYOUTGET: u32 = 50;
pub const OP_LAYOUTRETURN: u32 = 51;
pub const OP_SECINFO_NO_NAME: u32 = 52;
pub const OP_SEQUENCE: u32 = 53;
pub const OP_SET_SSV: u32 = 54;
pub const OP_TEST_STATEID: u32 = 55;
pub const OP_WANT_DELEGATION: u32 = 56;
pub const OP_DESTROY_CLIENTID: u32 = 57;
pub const OP_RECLAIM_COMPLETE: u32 = 58;
// NFSv4.2 (RFC 7862 §15): the data operations have types (`ops::v42`);
// COPY_NOTIFY, IO_ADVISE, LAYOUTERROR, LAYOUTSTATS and WRITE_SAME decode
// as `ArgOp::Illegal`.
pub const OP_ALLOCATE: u32 = 59;
pub const OP_COPY: u32 = 60;
pub const OP_COPY_NOTIFY: u32 = 61;
pub const OP_DEALLOCATE: u32 = 62;
pub const OP_IO_ADVISE: u32 = 63;
pub const OP_LAYOUTERROR: u32 = 64;
pub const OP_LAYOUTSTATS: u32 = 65;
pub const OP_OFFLOAD_CANCEL: u32 = 66;
pub const OP_OFFLOAD_STATUS: u32 = 67;
pub const OP_READ_PLUS: u32 = 68;
pub const OP_SEEK: u32 = 69;
pub const OP_WRITE_SAME: u32 = 70;
pub const OP_CLONE: u32 = 71;
// Extended attributes, an NFSv4.2 extension (RFC 8276 §8).
pub const OP_GETXATTR: u32 = 72;
pub const OP_SETXATTR: u32 = 73;
pub const OP_LISTXATTRS: u32 = 74;
pub const OP_REMOVEXATTR: u32 = 75;
pub const OP_ILLEGAL: u32 = 10044;

/// The last operation of NFSv4.1.
pub const LAST_NFS41_OP: u32 = OP_RECLAIM_COMPLETE;

// ACCESS4 bits (RFC 8881 §18.1).
pub const ACCESS4_READ: u32 = 0x0001;
pub const ACCESS4_LOOKUP: u32 = 0x0002;
pub const ACCESS4_MODIFY: u32 = 0x0004;
pub const ACCESS4_EXTEND: u32 = 0x0008;
pub const ACCESS4_DELETE: u32 = 0x0010;
pub const ACCESS4_EXECUTE: u32 = 0x0020;
// ACCESS4 bits for extended attributes, an NFSv4.2 extension (RFC 8276
// §8.4.2.1): read, write (and remove), list.
pub const ACCESS4_XAREAD: u32 = 0x0040;
pub const ACCESS4_XAWRITE: u32 = 0x0080;
pub const ACCESS4_XALIST: u32 = 0x0100;

// OPEN share access and deny (RFC 8881 §18.16).
pub const OPEN4_SHARE_ACCESS_READ: u32 = 0x0001;
pub const OPEN4_SHARE_ACCESS_WRITE: u32 = 0x0002;
pub const OPEN4_SHARE_ACCESS_BOTH: u32 = 0x0003;
pub const OPEN4_SHARE_DENY_NONE: u32 = 0x0000;
pub const OPEN4_SHARE_DENY_READ: u32 = 0x0001;
pub const OPEN4_SHARE_DENY_WRITE: u32 = 0x0002;
pub const OPEN4_SHARE_DENY_BOTH: u32 = 0x0003;
pub const OPEN4_SHARE_ACCESS_WANT_DELEG_MASK: u32 = 0xFF00;
pub const OPEN4_SHARE_ACCESS_WANT_NO_PREFERENCE: u32 = 0x0000;
pub const OPEN4_SHARE_ACCESS_WANT_READ_DELEG: u32 = 0x0100;
pub const OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG: u32 = 0x0200;
pub const OPEN4_SHARE_ACCESS_WANT_ANY_DELEG: u32 = 0x0300;
pub const OPEN4_SHARE_ACCESS_WANT_NO_DELEG: u32 = 0x0400;
pub const OPEN4_SHARE_ACCESS_WANT_CANCEL: u32 = 0x0500;
pub const OPEN4_SHARE_ACCESS_WANT_SIGNAL_DELEG_WHEN_RESRC_AVAIL: u32 = 0x10000;
pub const OPEN4_SHARE_ACCESS_WANT_PUSH_DELEG_WHEN_UNCONTENDED: u32 = 0x20000;
/// RFC 9754 §5 (an NFSv4.2 extension): the client would take delegated
/// timestamps with its delegation.
pub const OPEN4_SHARE_ACCESS_WANT_DELEG_TIMESTAMPS: u32 = 0x100000;

// OPEN result flags (RFC 8881 §18.16).
pub const OPEN4_RESULT_CONFIRM: u32 = 0x0002;
pub const OPEN4_RESULT_LOCKTYPE_POSIX: u32 = 0x0004;
pub const OPEN4_RESULT_PRESERVE_UNLINKED: u32 = 0x0008;
pub const OPEN4_RESULT_MAY_NOTIFY_LOCK: u32 = 0x0020;

// EXCHANGE_ID flags (RFC 8881 §18.35).
pub const EXCHGID4_FLAG_SUPP_MOVED_REFER: u32 = 0x0000_0001;
pub const EXCHGID4_FLAG_SUPP_MOVED_MIGR: u32 = 0x0000_0002;
pub const EXCHGID4_FLAG_BIND_PRINC_STATEID: u32 = 0x0000_0100;
pub const EXCHGID4_FLAG_USE_NON_PNFS: u32 = 0x0001_0000;
pub const EXCHGID4_FLAG_USE_PNFS_MDS: u32 = 0x0002_0000;
pub const EXCHGID4_FLAG_USE_PNFS_DS: u32 = 0x0004_0000;
pub const EXCHGID4_FLAG_MASK_PNFS: u32 = 0x0007_0000;
pub const EXCHGID4_FLAG_UPD_CONFIRMED_REC_A: u32 = 0x4000_0000;
pub const EXCHGID4_FLAG_CONFIRMED_R: u32 = 0x8000_0000;

// CREATE_SESSION flags (RFC 8881 §18.36).
pub const CREATE_SESSION4_FLAG_PERSIST: u32 = 0x0001;
pub const CREATE_SESSION4_FLAG_CONN_BACK_CHAN: u32 = 0x0002;
pub const CREATE_SESSION4_FLAG_CONN_RDMA: u32 = 0x0004;

// SEQUENCE status flags (RFC 8881 §18.46).
pub const SEQ4_STATUS_CB_PATH_DOWN: u32 = 0x0001;
pub const SEQ4_STATUS_CB_GSS_CONTEXTS_EXPIRING: u32 = 0x0002;
pub const SEQ4_STATUS_CB_GSS_CONTEXTS_EXPIRED: u32 = 0x0004;
pub const SEQ4_STATUS_EXPIRED_ALL_STATE_REVOKED: u32 = 0x0008;
pub const SEQ4_STATUS_EXPIRED_SOME_STATE_REVOKED: u32 = 0x0010;
pub const SEQ4_STATUS_ADMIN_STATE_REVOKED: u32 = 0x0020;
pub const SEQ4_STATUS_RECALLABLE_STATE_REVOKED: u32 = 0x0040;
pub const SEQ4_STATUS_LEASE_MOVED: u32 = 0x0080;
pub const SEQ4_STATUS_RESTART_RECLAIM_NEEDED: u32 = 0x0100;
pub const SEQ4_STATUS_CB_PATH_DOWN_SESSION: u32 = 0x0200;
pub const SEQ4_STATUS_BACKCHANNEL_FAULT: u32 = 0x0400;
pub const SEQ4_STATUS_DEVID_CHANGED: u32 = 0x0800;
pub const SEQ4_STATUS_DEVID_DELETED: u32 = 0x1000;

/// Declares `Nfsstat4` and its `ALL` table from one list.
macro_rules! nfsstat4 {
    ($($v:ident = $n:expr,)*) => {
        xdr_enum! {
            /// nfsstat4 (RFC 8881 §15.1; 10088.. from RFC 7862 §11.1 and
            /// RFC 8276 §8.2).
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
            pub enum Nfsstat4 { $($v = $n,)* }
        }
        impl Nfsstat4 {
            /// Every value, for tests and tables.
            pub const ALL: &'static [Nfsstat4] = &[$(Nfsstat4::$v,)*];
        }
    };
}

nfsstat4! {
    Ok = 0,
    Perm = 1,
    NoEnt = 2,
    Io = 5,
    NxIo = 6,
    Access = 13,
    Exist = 17,
    XDev = 18,
    NotDir = 20,
    IsDir = 21,
    Inval = 22,
    FBig = 27,
    NoSpc = 28,
    RoFs = 30,
    MLink = 31,
    NameTooLong = 63,
    NotEmpty = 66,
    DQuot = 69,
    Stale = 70,
    BadHandle = 10001,
    BadCookie = 10003,
    NotSupp = 10004,
    TooSmall = 10005,
    ServerFault = 10006,
    BadType = 10007,
    Delay = 10008,
    Same = 10009,
    Denied = 10010,
    Expired = 10011,
    Locked = 10012,
    Grace = 10013,
    FhExpired = 10014,
    ShareDenied = 10015,
    WrongSec = 10016,
    ClidInUse = 10017,
    Resource = 10018,
    Moved = 10019,
    NoFileHandle = 10020,
    MinorVersMismatch = 10021,
    StaleClientId = 10022,
    StaleStateid = 10023,
    OldStateid = 10024,
    BadStateid = 10025,
    BadSeqid = 10026,
    NotSame = 10027,
    LockRange = 10028,
    Symlink = 10029,
    RestoreFh = 10030,
    LeaseMoved = 10031,
    AttrNotSupp = 10032,
    NoGrace = 10033,
    ReclaimBad = 10034,
    ReclaimConflict = 10035,
    BadXdr = 10036,
    LocksHeld = 10037,
    OpenMode = 10038,
    BadOwner = 10039,
    BadChar = 10040,
    BadName = 10041,
    BadRange = 10042,
    LockNotSupp = 10043,
    OpIllegal = 10044,
    Deadlock = 10045,
    FileOpen = 10046,
    AdminRevoked = 10047,
    CbPathDown = 10048,
    BadIoMode = 10049,
    BadLayout = 10050,
    BadSessionDigest = 10051,
    BadSession = 10052,
    BadSlot = 10053,
    CompleteAlready = 10054,
    ConnNotBoundToSession = 10055,
    DelegAlreadyWanted = 10056,
    BackChanBusy = 10057,
    LayoutTryLater = 10058,
    LayoutUnavailable = 10059,
    NoMatchingLayout = 10060,
    RecallConflict = 10061,
    UnknownLayoutType = 10062,
    SeqMisordered = 10063,
    SequencePos = 10064,
    ReqTooBig = 10065,
    RepTooBig = 10066,
    RepTooBigToCache = 10067,
    RetryUncachedRep = 10068,
    UnsafeCompound = 10069,
    TooManyOps = 10070,
    OpNotInSession = 10071,
    HashAlgUnsupp = 10072,
    ClientIdBusy = 10074,
    PnfsIoHole = 10075,
    SeqFalseRetry = 10076,
    BadHighSlot = 10077,
    DeadSession = 10078,
    EncrAlgUnsupp = 10079,
    PnfsNoLayout = 10080,
    NotOnlyOp = 10081,
    WrongCred = 10082,
    WrongType = 10083,
    DirDelegUnavail = 10084,
    RejectDeleg = 10085,
    ReturnConflict = 10086,
    DelegRevoked = 10087,
    PartnerNotSupp = 10088,
    PartnerNoAuth = 10089,
    UnionNotSupp = 10090,
    OffloadDenied = 10091,
    WrongLfs = 10092,
    BadLabel = 10093,
    OffloadNoReqs = 10094,
    NoXattr = 10095,
    Xattr2Big = 10096,
}

impl std::fmt::Display for Nfsstat4 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Nfsstat4::Ok => f.write_str("NFS4_OK(0)"),
            s => write!(f, "NFS4ERR_{:?}({})", s, *s as u32),
        }
    }
}

/// The status union most results use (RFC 5662: `switch (nfsstat4 status)
/// { case NFS4_OK: resok; default: void; }`): `Ok` carries the resok body, `Fail`
/// any other status and nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NfsRes4<T> {
    Ok(T),
    Fail(Nfsstat4),
}

impl<T> NfsRes4<T> {
    pub fn status(&self) -> Nfsstat4 {
        match self {
            NfsRes4::Ok(_) => Nfsstat4::Ok,
            NfsRes4::Fail(s) => *s,
        }
    }
}

/// The status to send for a failure: never NFS4_OK (the peer would decode
/// a resok body that is not there), nor one of `reserved`, the statuses
/// whose union arm carries a body the failure does not have.
pub(crate) fn fail_status(s: Nfsstat4, reserved: &[Nfsstat4]) -> Nfsstat4 {
    if s == Nfsstat4::Ok || reserved.contains(&s) {
        Nfsstat4::ServerFault
    } else {
        s
    }
}

impl<T: Xdr> Xdr for NfsRes4<T> {
    fn encode(&self, e: &mut Enc) {
        match self {
            NfsRes4::Ok(v) => {
                Nfsstat4::Ok.encode(e);
                v.encode(e);
            }
            NfsRes4::Fail(s) => fail_status(*s, &[]).encode(e),
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        match Nfsstat4::decode(d)? {
            Nfsstat4::Ok => Ok(NfsRes4::Ok(T::decode(d)?)),
            s => Ok(NfsRes4::Fail(s)),
        }
    }
}

/// Decode a counted array (`T<>`) of at most `max` items, each at least
/// `min_item` bytes: the count is checked against both before allocating.
pub(crate) fn decode_array<T>(
    d: &mut Dec<'_>,
    max: usize,
    min_item: usize,
    mut f: impl FnMut(&mut Dec<'_>) -> Result<T>,
) -> Result<Vec<T>> {
    let n = d.array_len(max, min_item)?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(f(d)?);
    }
    Ok(v)
}

/// Encode a counted array.
pub(crate) fn encode_array<T: Xdr>(e: &mut Enc, items: &[T]) {
    e.u32(items.len() as u32);
    for it in items {
        it.encode(e);
    }
}

/// A fixed-size opaque (`opaque x[N]`) as a byte array.
pub(crate) fn decode_fixed<const N: usize>(d: &mut Dec<'_>) -> Result<[u8; N]> {
    let mut a = [0u8; N];
    a.copy_from_slice(d.opaque_fixed(N)?);
    Ok(a)
}

/// Decode an XDR `T<1>`, whose wire form (a count of 0 or 1, then the item)
/// is that of optional data, but whose count 2.. is too long, not a bad
/// boolean.
pub(crate) fn decode_at_most_one<T: Xdr>(d: &mut Dec<'_>) -> Result<Option<T>> {
    match d.u32()? {
        0 => Ok(None),
        1 => Ok(Some(T::decode(d)?)),
        _ => Err(XdrError::TooLong),
    }
}
