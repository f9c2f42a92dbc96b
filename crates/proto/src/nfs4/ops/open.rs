//! Open and delegation state: OPEN, OPEN_CONFIRM, OPEN_DOWNGRADE, CLOSE,
//! DELEGPURGE, DELEGRETURN, WANT_DELEGATION, GET_DIR_DELEGATION (RFC 8881
//! §18), and open_delegation4, which CB_PUSH_DELEG carries too.

use rnfsd_xdr::{xdr_enum, xdr_struct, Dec, Enc, Result, Xdr, XdrError};

use crate::nfs4::{
    Bitmap4, ChangeInfo4, Component4, Fattr4, NfsRes4, Nfsace4, Nfstime4, OpenOwner4, Stateid4,
    Verifier4,
};

/// createhow4 (RFC 8881 §18.16): how OPEN creates a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateHow4 {
    Unchecked(Fattr4),
    Guarded(Fattr4),
    /// EXCLUSIVE4, deprecated in 4.1 but still valid.
    Exclusive(Verifier4),
    /// EXCLUSIVE4_1: the verifier and attributes together.
    Exclusive41 {
        verf: Verifier4,
        attrs: Fattr4,
    },
}

impl Xdr for CreateHow4 {
    fn encode(&self, e: &mut Enc) {
        match self {
            CreateHow4::Unchecked(a) => {
                e.u32(0);
                a.encode(e);
            }
            CreateHow4::Guarded(a) => {
                e.u32(1);
                a.encode(e);
            }
            CreateHow4::Exclusive(v) => {
                e.u32(2);
                v.encode(e);
            }
            CreateHow4::Exclusive41 { verf, attrs } => {
                e.u32(3);
                verf.encode(e);
                attrs.encode(e);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        match d.u32()? {
            0 => Ok(CreateHow4::Unchecked(Fattr4::decode(d)?)),
            1 => Ok(CreateHow4::Guarded(Fattr4::decode(d)?)),
            2 => Ok(CreateHow4::Exclusive(Verifier4::decode(d)?)),
            3 => Ok(CreateHow4::Exclusive41 {
                verf: Verifier4::decode(d)?,
                attrs: Fattr4::decode(d)?,
            }),
            _ => Err(XdrError::BadDiscriminant),
        }
    }
}

/// openflag4 (RFC 8881 §18.16): switch on opentype4.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenFlag4 {
    NoCreate,
    Create(CreateHow4),
}

impl Xdr for OpenFlag4 {
    fn encode(&self, e: &mut Enc) {
        match self {
            OpenFlag4::NoCreate => e.u32(0),
            OpenFlag4::Create(h) => {
                e.u32(1);
                h.encode(e);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        match d.u32()? {
            0 => Ok(OpenFlag4::NoCreate),
            1 => Ok(OpenFlag4::Create(CreateHow4::decode(d)?)),
            _ => Err(XdrError::BadDiscriminant),
        }
    }
}

xdr_enum! {
    /// open_delegation_type4 (RFC 8881 §18.16).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum OpenDelegationType4 {
        None = 0,
        Read = 1,
        Write = 2,
        NoneExt = 3,
    }
}

/// open_claim4 (RFC 8881 §18.16): what the open is based on, switch on
/// open_claim_type4.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenClaim4 {
    /// CLAIM_NULL: a name in the current (directory) filehandle.
    Null(Component4),
    /// CLAIM_PREVIOUS: reclaim after a server restart.
    Previous(OpenDelegationType4),
    /// CLAIM_DELEGATE_CUR.
    DelegateCur {
        delegate_stateid: Stateid4,
        file: Component4,
    },
    /// CLAIM_DELEGATE_PREV.
    DelegatePrev(Component4),
    /// CLAIM_FH: the current filehandle is the file.
    Fh,
    /// CLAIM_DELEG_CUR_FH.
    DelegCurFh(Stateid4),
    /// CLAIM_DELEG_PREV_FH.
    DelegPrevFh,
}

impl Xdr for OpenClaim4 {
    fn encode(&self, e: &mut Enc) {
        match self {
            OpenClaim4::Null(f) => {
                e.u32(0);
                f.encode(e);
            }
            OpenClaim4::Previous(t) => {
                e.u32(1);
                t.encode(e);
            }
            OpenClaim4::DelegateCur {
                delegate_stateid,
                file,
            } => {
                e.u32(2);
                delegate_stateid.encode(e);
                file.encode(e);
            }
            OpenClaim4::DelegatePrev(f) => {
                e.u32(3);
                f.encode(e);
            }
            OpenClaim4::Fh => e.u32(4),
            OpenClaim4::DelegCurFh(s) => {
                e.u32(5);
                s.encode(e);
            }
            OpenClaim4::DelegPrevFh => e.u32(6),
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(match d.u32()? {
            0 => OpenClaim4::Null(Component4::decode(d)?),
            1 => OpenClaim4::Previous(OpenDelegationType4::decode(d)?),
            2 => OpenClaim4::DelegateCur {
                delegate_stateid: Stateid4::decode(d)?,
                file: Component4::decode(d)?,
            },
            3 => OpenClaim4::DelegatePrev(Component4::decode(d)?),
            4 => OpenClaim4::Fh,
            5 => OpenClaim4::DelegCurFh(Stateid4::decode(d)?),
            6 => OpenClaim4::DelegPrevFh,
            _ => return Err(XdrError::BadDiscriminant),
        })
    }
}

xdr_struct! {
    /// OPEN4args (RFC 8881 §18.16).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Open4Args {
        pub seqid: u32,
        pub share_access: u32,
        pub share_deny: u32,
        pub owner: OpenOwner4,
        pub openhow: OpenFlag4,
        pub claim: OpenClaim4,
    }
}

/// nfs_space_limit4 (RFC 8881 §18.16): switch on limit_by4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NfsSpaceLimit4 {
    /// NFS_LIMIT_SIZE.
    Size(u64),
    /// NFS_LIMIT_BLOCKS.
    Blocks {
        num_blocks: u32,
        bytes_per_block: u32,
    },
}

impl Xdr for NfsSpaceLimit4 {
    fn encode(&self, e: &mut Enc) {
        match self {
            NfsSpaceLimit4::Size(s) => {
                e.u32(1);
                e.u64(*s);
            }
            NfsSpaceLimit4::Blocks {
                num_blocks,
                bytes_per_block,
            } => {
                e.u32(2);
                e.u32(*num_blocks);
                e.u32(*bytes_per_block);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        match d.u32()? {
            1 => Ok(NfsSpaceLimit4::Size(d.u64()?)),
            2 => Ok(NfsSpaceLimit4::Blocks {
                num_blocks: d.u32()?,
                bytes_per_block: d.u32()?,
            }),
            _ => Err(XdrError::BadDiscriminant),
        }
    }
}

xdr_struct! {
    /// open_read_delegation4 (RFC 8881 §18.16).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct OpenReadDelegation4 { pub stateid: Stateid4, pub recall: bool, pub permissions: Nfsace4 }
}

xdr_struct! {
    /// open_write_delegation4 (RFC 8881 §18.16).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct OpenWriteDelegation4 {
        pub stateid: Stateid4,
        pub recall: bool,
        pub space_limit: NfsSpaceLimit4,
        pub permissions: Nfsace4,
    }
}

xdr_enum! {
    /// why_no_delegation4 (RFC 8881 §18.16).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum WhyNoDelegation4 {
        NotWanted = 0,
        Contention = 1,
        Resource = 2,
        NotSuppFtype = 3,
        WriteDelegNotSuppFtype = 4,
        NotSuppUpgrade = 5,
        NotSuppDowngrade = 6,
        Cancelled = 7,
        IsDir = 8,
    }
}

/// open_none_delegation4 (RFC 8881 §18.16): why no delegation was given,
/// with a flag for the two reasons that have one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenNoneDelegation4 {
    Contention {
        server_will_push_deleg: bool,
    },
    Resource {
        server_will_signal_avail: bool,
    },
    /// Any other reason (not Contention or Resource): no body.
    Why(WhyNoDelegation4),
}

impl Xdr for OpenNoneDelegation4 {
    fn encode(&self, e: &mut Enc) {
        match self {
            OpenNoneDelegation4::Contention {
                server_will_push_deleg,
            } => {
                WhyNoDelegation4::Contention.encode(e);
                e.bool(*server_will_push_deleg);
            }
            OpenNoneDelegation4::Resource {
                server_will_signal_avail,
            } => {
                WhyNoDelegation4::Resource.encode(e);
                e.bool(*server_will_signal_avail);
            }
            OpenNoneDelegation4::Why(w) => w.encode(e),
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(match WhyNoDelegation4::decode(d)? {
            WhyNoDelegation4::Contention => OpenNoneDelegation4::Contention {
                server_will_push_deleg: d.bool()?,
            },
            WhyNoDelegation4::Resource => OpenNoneDelegation4::Resource {
                server_will_signal_avail: d.bool()?,
            },
            w => OpenNoneDelegation4::Why(w),
        })
    }
}

/// open_delegation4 (RFC 8881 §18.16): switch on open_delegation_type4.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenDelegation4 {
    None,
    Read(OpenReadDelegation4),
    Write(OpenWriteDelegation4),
    NoneExt(OpenNoneDelegation4),
}

impl Xdr for OpenDelegation4 {
    fn encode(&self, e: &mut Enc) {
        match self {
            OpenDelegation4::None => OpenDelegationType4::None.encode(e),
            OpenDelegation4::Read(r) => {
                OpenDelegationType4::Read.encode(e);
                r.encode(e);
            }
            OpenDelegation4::Write(w) => {
                OpenDelegationType4::Write.encode(e);
                w.encode(e);
            }
            OpenDelegation4::NoneExt(n) => {
                OpenDelegationType4::NoneExt.encode(e);
                n.encode(e);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(match OpenDelegationType4::decode(d)? {
            OpenDelegationType4::None => OpenDelegation4::None,
            OpenDelegationType4::Read => OpenDelegation4::Read(OpenReadDelegation4::decode(d)?),
            OpenDelegationType4::Write => OpenDelegation4::Write(OpenWriteDelegation4::decode(d)?),
            OpenDelegationType4::NoneExt => {
                OpenDelegation4::NoneExt(OpenNoneDelegation4::decode(d)?)
            }
        })
    }
}

xdr_struct! {
    /// OPEN4resok (RFC 8881 §18.16).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Open4ResOk {
        pub stateid: Stateid4,
        pub cinfo: ChangeInfo4,
        pub rflags: u32,
        pub attrset: Bitmap4,
        pub delegation: OpenDelegation4,
    }
}
pub type Open4Res = NfsRes4<Open4ResOk>;

xdr_struct! {
    /// OPEN_CONFIRM4args (RFC 5662; NFSv4.0 only, RFC 8881 §17): a 4.1
    /// server answers NFS4ERR_NOTSUPP.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct OpenConfirm4Args { pub open_stateid: Stateid4, pub seqid: u32 }
}

xdr_struct! {
    /// OPEN_DOWNGRADE4args (RFC 8881 §18.18).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct OpenDowngrade4Args {
        pub open_stateid: Stateid4,
        pub seqid: u32,
        pub share_access: u32,
        pub share_deny: u32,
    }
}

xdr_struct! {
    /// CLOSE4args (RFC 8881 §18.2).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Close4Args { pub seqid: u32, pub open_stateid: Stateid4 }
}
/// CLOSE4res, OPEN_CONFIRM4res, OPEN_DOWNGRADE4res, LOCKU4res: the resok
/// is a stateid.
pub type Stateid4Res = NfsRes4<Stateid4>;

xdr_struct! {
    /// DELEGPURGE4args (RFC 8881 §18.5).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct DelegPurge4Args { pub clientid: u64 }
}

xdr_struct! {
    /// DELEGRETURN4args (RFC 8881 §18.6).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct DelegReturn4Args { pub deleg_stateid: Stateid4 }
}

/// deleg_claim4 (RFC 8881 §18.49): the claims WANT_DELEGATION allows
/// (CLAIM_FH, CLAIM_DELEG_PREV_FH, CLAIM_PREVIOUS); others are not valid
/// XDR here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelegClaim4 {
    Fh,
    DelegPrevFh,
    Previous(OpenDelegationType4),
}

impl Xdr for DelegClaim4 {
    fn encode(&self, e: &mut Enc) {
        match self {
            DelegClaim4::Fh => e.u32(4),
            DelegClaim4::DelegPrevFh => e.u32(6),
            DelegClaim4::Previous(t) => {
                e.u32(1);
                t.encode(e);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        match d.u32()? {
            4 => Ok(DelegClaim4::Fh),
            6 => Ok(DelegClaim4::DelegPrevFh),
            1 => Ok(DelegClaim4::Previous(OpenDelegationType4::decode(d)?)),
            _ => Err(XdrError::BadDiscriminant),
        }
    }
}

xdr_struct! {
    /// WANT_DELEGATION4args (RFC 8881 §18.49).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct WantDelegation4Args { pub want: u32, pub claim: DelegClaim4 }
}
/// WANT_DELEGATION4res: the resok is an open_delegation4.
pub type WantDelegation4Res = NfsRes4<OpenDelegation4>;

xdr_struct! {
    /// GET_DIR_DELEGATION4args (RFC 8881 §18.39).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct GetDirDelegation4Args {
        pub signal_deleg_avail: bool,
        pub notification_types: Bitmap4,
        pub child_attr_delay: Nfstime4,
        pub dir_attr_delay: Nfstime4,
        pub child_attributes: Bitmap4,
        pub dir_attributes: Bitmap4,
    }
}

xdr_struct! {
    /// GET_DIR_DELEGATION4resok (RFC 8881 §18.39).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct GetDirDelegation4ResOk {
        pub cookieverf: Verifier4,
        pub stateid: Stateid4,
        pub notification: Bitmap4,
        pub child_attributes: Bitmap4,
        pub dir_attributes: Bitmap4,
    }
}

/// GET_DIR_DELEGATION4res_non_fatal (RFC 8881 §18.39): inside NFS4_OK,
/// either the delegation or why not (GDD4_UNAVAIL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetDirDelegation4NonFatal {
    Ok(GetDirDelegation4ResOk),
    Unavail { will_signal_deleg_avail: bool },
}

impl Xdr for GetDirDelegation4NonFatal {
    fn encode(&self, e: &mut Enc) {
        match self {
            GetDirDelegation4NonFatal::Ok(r) => {
                e.u32(0);
                r.encode(e);
            }
            GetDirDelegation4NonFatal::Unavail {
                will_signal_deleg_avail,
            } => {
                e.u32(1);
                e.bool(*will_signal_deleg_avail);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        match d.u32()? {
            0 => Ok(GetDirDelegation4NonFatal::Ok(
                GetDirDelegation4ResOk::decode(d)?,
            )),
            1 => Ok(GetDirDelegation4NonFatal::Unavail {
                will_signal_deleg_avail: d.bool()?,
            }),
            _ => Err(XdrError::BadDiscriminant),
        }
    }
}
pub type GetDirDelegation4Res = NfsRes4<GetDirDelegation4NonFatal>;
