//! NFSv4.1 basic data types (RFC 8881 §3.2, §3.3) and the structures shared
//! by the session operations (§18.35, §18.36).

use rnfsd_xdr::{pad4, xdr_enum, xdr_struct, Dec, Enc, Result, Xdr, XdrError};

use super::{
    decode_array, decode_at_most_one, decode_fixed, encode_array, Bitmap4, MAX_NAME, MAX_NETADDR,
    MAX_PATH, MAX_PATH_COMPONENTS, MAX_SEC_OID, MAX_SMALL_ARRAY, NFS4_DEVICEID4_SIZE, NFS4_FHSIZE,
    NFS4_OPAQUE_LIMIT, NFS4_OTHER_SIZE, NFS4_SESSIONID_SIZE, NFS4_VERIFIER_SIZE, RPCSEC_GSS,
};
use crate::mount::bounded_opaque;
use crate::rpc::{AuthSys, AUTH_NONE, AUTH_SYS};

/// nfs_fh4: opaque<NFS4_FHSIZE> (RFC 8881 §3.2).
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct NfsFh4(pub Vec<u8>);

impl NfsFh4 {
    /// Bytes this handle takes on the wire.
    pub fn xdr_len(&self) -> usize {
        4 + pad4(self.0.len())
    }
}

impl Xdr for NfsFh4 {
    fn encode(&self, e: &mut Enc) {
        e.opaque(&self.0);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(NfsFh4(d.opaque(NFS4_FHSIZE)?.to_vec()))
    }
}

/// Declares a fixed-size opaque newtype (`opaque x[N]`, no length word).
macro_rules! fixed_opaque {
    ($(#[$m:meta])* $name:ident, $n:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, PartialOrd, Ord)]
        pub struct $name(pub [u8; $n]);

        impl Xdr for $name {
            fn encode(&self, e: &mut Enc) {
                e.opaque_fixed(&self.0);
            }
            fn decode(d: &mut Dec<'_>) -> Result<Self> {
                decode_fixed::<{ $n }>(d).map($name)
            }
        }
    };
}

fixed_opaque!(
    /// verifier4: opaque[NFS4_VERIFIER_SIZE] (RFC 8881 §3.2).
    Verifier4,
    NFS4_VERIFIER_SIZE
);
fixed_opaque!(
    /// sessionid4: opaque[NFS4_SESSIONID_SIZE] (RFC 8881 §3.2).
    SessionId4,
    NFS4_SESSIONID_SIZE
);
fixed_opaque!(
    /// deviceid4: opaque[NFS4_DEVICEID4_SIZE] (RFC 8881 §3.3.14).
    DeviceId4,
    NFS4_DEVICEID4_SIZE
);

bounded_opaque!(
    /// utf8str_cs / utf8str_cis / utf8str_mixed (RFC 8881 §3.2): bytes, at
    /// most NFS4_OPAQUE_LIMIT. UTF-8 is not checked here: the server
    /// decides between NFS4ERR_INVAL and NFS4ERR_BADCHAR itself.
    Utf8Str,
    NFS4_OPAQUE_LIMIT
);
bounded_opaque!(
    /// component4 (RFC 8881 §3.2): one name, at most `MAX_NAME` bytes,
    /// not checked for UTF-8 (the server answers NFS4ERR_INVAL).
    Component4,
    MAX_NAME
);
bounded_opaque!(
    /// linktext4 (RFC 8881 §3.2): a symlink's target, at most `MAX_PATH`.
    LinkText4,
    MAX_PATH
);

/// pathname4: component4<> (RFC 8881 §3.2), at most
/// `MAX_PATH_COMPONENTS` components.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pathname4(pub Vec<Component4>);

impl Xdr for Pathname4 {
    fn encode(&self, e: &mut Enc) {
        encode_array(e, &self.0);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        decode_array(d, MAX_PATH_COMPONENTS, 4, Component4::decode).map(Pathname4)
    }
}

xdr_struct! {
    /// nfstime4 (RFC 8881 §3.3.1).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord, Hash)]
    pub struct Nfstime4 { pub seconds: i64, pub nseconds: u32 }
}

/// settime4 (RFC 8881 §3.3.3): switch on time_how4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settime4 {
    /// SET_TO_SERVER_TIME4 (0).
    ServerTime,
    /// SET_TO_CLIENT_TIME4 (1).
    ClientTime(Nfstime4),
}

impl Xdr for Settime4 {
    fn encode(&self, e: &mut Enc) {
        match self {
            Settime4::ServerTime => e.u32(0),
            Settime4::ClientTime(t) => {
                e.u32(1);
                t.encode(e);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        match d.u32()? {
            0 => Ok(Settime4::ServerTime),
            1 => Ok(Settime4::ClientTime(Nfstime4::decode(d)?)),
            _ => Err(XdrError::BadDiscriminant),
        }
    }
}

xdr_struct! {
    /// specdata4: device major/minor (RFC 8881 §3.3.4).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
    pub struct Specdata4 { pub specdata1: u32, pub specdata2: u32 }
}

xdr_struct! {
    /// fsid4 (RFC 8881 §3.3.5).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
    pub struct Fsid4 { pub major: u64, pub minor: u64 }
}

xdr_struct! {
    /// change_info4 (RFC 8881 §3.3.8).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct ChangeInfo4 { pub atomic: bool, pub before: u64, pub after: u64 }
}

xdr_enum! {
    /// nfs_ftype4 (RFC 8881 §3.2).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum NfsFtype4 {
        Reg = 1,
        Dir = 2,
        Blk = 3,
        Chr = 4,
        Lnk = 5,
        Sock = 6,
        Fifo = 7,
        AttrDir = 8,
        NamedAttr = 9,
    }
}

/// stateid4 (RFC 8881 §3.3.12, §8.2): a sequence number and 12 bytes the server
/// chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Stateid4 {
    pub seqid: u32,
    pub other: [u8; NFS4_OTHER_SIZE],
}

impl Stateid4 {
    /// Bytes on the wire.
    pub const XDR_LEN: usize = 16;
    /// The special stateids (RFC 8881 §8.2.3): "other" all zeros or all
    /// ones is reserved; these four combinations are the defined ones.
    pub const ANONYMOUS: Stateid4 = Stateid4 {
        seqid: 0,
        other: [0; NFS4_OTHER_SIZE],
    };
    pub const READ_BYPASS: Stateid4 = Stateid4 {
        seqid: u32::MAX,
        other: [0xff; NFS4_OTHER_SIZE],
    };
    pub const CURRENT: Stateid4 = Stateid4 {
        seqid: 1,
        other: [0; NFS4_OTHER_SIZE],
    };
    pub const INVALID: Stateid4 = Stateid4 {
        seqid: u32::MAX,
        other: [0; NFS4_OTHER_SIZE],
    };

    /// True for any stateid whose "other" is all zeros or all ones, the
    /// reserved space; only the four constants above are valid in it.
    pub fn is_special(&self) -> bool {
        self.other.iter().all(|&b| b == 0) || self.other.iter().all(|&b| b == 0xff)
    }
}

impl Xdr for Stateid4 {
    fn encode(&self, e: &mut Enc) {
        e.u32(self.seqid);
        e.opaque_fixed(&self.other);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        let seqid = d.u32()?;
        let other = decode_fixed::<NFS4_OTHER_SIZE>(d)?;
        Ok(Stateid4 { seqid, other })
    }
}

bounded_opaque!(
    /// opaque<NFS4_OPAQUE_LIMIT> (RFC 8881 §3.3.10, §2.4, §2.5): the
    /// `owner` bytes of a state_owner4, client_owner4's co_ownerid,
    /// server_owner4's so_major_id and EXCHANGE_ID's server scope.
    Opaque1024,
    NFS4_OPAQUE_LIMIT
);

xdr_struct! {
    /// state_owner4, and its aliases open_owner4 and lock_owner4 (RFC 8881
    /// §3.3.10).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct StateOwner4 { pub clientid: u64, pub owner: Opaque1024 }
}
pub type OpenOwner4 = StateOwner4;
pub type LockOwner4 = StateOwner4;

xdr_struct! {
    /// client_owner4 (RFC 8881 §2.4).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct ClientOwner4 { pub verifier: Verifier4, pub ownerid: Opaque1024 }
}

xdr_struct! {
    /// server_owner4 (RFC 8881 §2.5).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct ServerOwner4 { pub minor_id: u64, pub major_id: Opaque1024 }
}

xdr_struct! {
    /// nfs_impl_id4 (RFC 8881 §3.3.21).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct NfsImplId4 { pub domain: Utf8Str, pub name: Utf8Str, pub date: Nfstime4 }
}

bounded_opaque!(
    /// A netaddr4 string (r_netid or r_addr, RFC 1833), at most
    /// `MAX_NETADDR` bytes.
    NetStr,
    MAX_NETADDR
);

xdr_struct! {
    /// netaddr4 (RFC 8881 §3.3.9).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Netaddr4 { pub netid: NetStr, pub addr: NetStr }
}

xdr_struct! {
    /// nfsace4 (RFC 8881 §6.2.1), needed by OPEN's delegation result.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Nfsace4 { pub acetype: u32, pub flag: u32, pub access_mask: u32, pub who: Utf8Str }
}

bounded_opaque!(
    /// sec_oid4 (RFC 8881 §3.2): a GSS mechanism OID, at most
    /// `MAX_SEC_OID` bytes.
    SecOid4,
    MAX_SEC_OID
);
bounded_opaque!(
    /// gsshandle4_t (RFC 8881 §18.35), at most NFS4_OPAQUE_LIMIT bytes.
    GssHandle4,
    NFS4_OPAQUE_LIMIT
);

xdr_enum! {
    /// rpc_gss_svc_t (RFC 2203).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum RpcGssSvc {
        None = 1,
        Integrity = 2,
        Privacy = 3,
    }
}

xdr_struct! {
    /// state_protect_ops4 (RFC 8881 §18.35).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct StateProtectOps4 { pub must_enforce: Bitmap4, pub must_allow: Bitmap4 }
}

/// ssv_sp_parms4 (RFC 8881 §18.35): decoded so that a server without SSV
/// can answer it with an error.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SsvSpParms4 {
    pub ops: StateProtectOps4,
    pub hash_algs: Vec<SecOid4>,
    pub encr_algs: Vec<SecOid4>,
    pub window: u32,
    pub num_gss_handles: u32,
}

impl Xdr for SsvSpParms4 {
    fn encode(&self, e: &mut Enc) {
        self.ops.encode(e);
        encode_array(e, &self.hash_algs);
        encode_array(e, &self.encr_algs);
        e.u32(self.window);
        e.u32(self.num_gss_handles);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(SsvSpParms4 {
            ops: StateProtectOps4::decode(d)?,
            hash_algs: decode_array(d, MAX_SMALL_ARRAY, 4, SecOid4::decode)?,
            encr_algs: decode_array(d, MAX_SMALL_ARRAY, 4, SecOid4::decode)?,
            window: d.u32()?,
            num_gss_handles: d.u32()?,
        })
    }
}

/// state_protect4_a (RFC 8881 §18.35): EXCHANGE_ID's requested state
/// protection, switch on state_protect_how4.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateProtect4A {
    None,
    MachCred(StateProtectOps4),
    Ssv(SsvSpParms4),
}

impl Xdr for StateProtect4A {
    fn encode(&self, e: &mut Enc) {
        match self {
            StateProtect4A::None => e.u32(0),
            StateProtect4A::MachCred(o) => {
                e.u32(1);
                o.encode(e);
            }
            StateProtect4A::Ssv(p) => {
                e.u32(2);
                p.encode(e);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        match d.u32()? {
            0 => Ok(StateProtect4A::None),
            1 => Ok(StateProtect4A::MachCred(StateProtectOps4::decode(d)?)),
            2 => Ok(StateProtect4A::Ssv(SsvSpParms4::decode(d)?)),
            _ => Err(XdrError::BadDiscriminant),
        }
    }
}

/// ssv_prot_info4 (RFC 8881 §18.35).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SsvProtInfo4 {
    pub ops: StateProtectOps4,
    pub hash_alg: u32,
    pub encr_alg: u32,
    pub ssv_len: u32,
    pub window: u32,
    pub handles: Vec<GssHandle4>,
}

impl Xdr for SsvProtInfo4 {
    fn encode(&self, e: &mut Enc) {
        self.ops.encode(e);
        e.u32(self.hash_alg);
        e.u32(self.encr_alg);
        e.u32(self.ssv_len);
        e.u32(self.window);
        encode_array(e, &self.handles);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(SsvProtInfo4 {
            ops: StateProtectOps4::decode(d)?,
            hash_alg: d.u32()?,
            encr_alg: d.u32()?,
            ssv_len: d.u32()?,
            window: d.u32()?,
            handles: decode_array(d, MAX_SMALL_ARRAY, 4, GssHandle4::decode)?,
        })
    }
}

/// state_protect4_r (RFC 8881 §18.35): the protection the server granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateProtect4R {
    None,
    MachCred(StateProtectOps4),
    Ssv(SsvProtInfo4),
}

impl Xdr for StateProtect4R {
    fn encode(&self, e: &mut Enc) {
        match self {
            StateProtect4R::None => e.u32(0),
            StateProtect4R::MachCred(o) => {
                e.u32(1);
                o.encode(e);
            }
            StateProtect4R::Ssv(p) => {
                e.u32(2);
                p.encode(e);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        match d.u32()? {
            0 => Ok(StateProtect4R::None),
            1 => Ok(StateProtect4R::MachCred(StateProtectOps4::decode(d)?)),
            2 => Ok(StateProtect4R::Ssv(SsvProtInfo4::decode(d)?)),
            _ => Err(XdrError::BadDiscriminant),
        }
    }
}

/// channel_attrs4 (RFC 8881 §18.36).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChannelAttrs4 {
    pub headerpadsize: u32,
    pub maxrequestsize: u32,
    pub maxresponsesize: u32,
    pub maxresponsesize_cached: u32,
    pub maxoperations: u32,
    pub maxrequests: u32,
    /// ca_rdma_ird<1>.
    pub rdma_ird: Option<u32>,
}

impl Xdr for ChannelAttrs4 {
    fn encode(&self, e: &mut Enc) {
        e.u32(self.headerpadsize);
        e.u32(self.maxrequestsize);
        e.u32(self.maxresponsesize);
        e.u32(self.maxresponsesize_cached);
        e.u32(self.maxoperations);
        e.u32(self.maxrequests);
        self.rdma_ird.encode(e);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(ChannelAttrs4 {
            headerpadsize: d.u32()?,
            maxrequestsize: d.u32()?,
            maxresponsesize: d.u32()?,
            maxresponsesize_cached: d.u32()?,
            maxoperations: d.u32()?,
            maxrequests: d.u32()?,
            rdma_ird: decode_at_most_one(d)?,
        })
    }
}

xdr_struct! {
    /// gss_cb_handles4 (RFC 8881 §18.36): decoded so that a server without
    /// RPCSEC_GSS callbacks can refuse it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct GssCbHandles4 {
        pub service: RpcGssSvc,
        pub handle_from_server: GssHandle4,
        pub handle_from_client: GssHandle4,
    }
}

/// callback_sec_parms4 (RFC 8881 §18.36): switch on the flavor; a flavor
/// other than these three is not valid XDR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallbackSecParms4 {
    None,
    Sys(AuthSys),
    Gss(GssCbHandles4),
}

impl CallbackSecParms4 {
    pub fn flavor(&self) -> u32 {
        match self {
            CallbackSecParms4::None => AUTH_NONE,
            CallbackSecParms4::Sys(_) => AUTH_SYS,
            CallbackSecParms4::Gss(_) => RPCSEC_GSS,
        }
    }
}

impl Xdr for CallbackSecParms4 {
    fn encode(&self, e: &mut Enc) {
        e.u32(self.flavor());
        match self {
            CallbackSecParms4::None => {}
            CallbackSecParms4::Sys(a) => a.encode(e),
            CallbackSecParms4::Gss(g) => g.encode(e),
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        match d.u32()? {
            AUTH_NONE => Ok(CallbackSecParms4::None),
            // AuthSys::decode bounds the machine name and the gids.
            AUTH_SYS => Ok(CallbackSecParms4::Sys(AuthSys::decode(d)?)),
            RPCSEC_GSS => Ok(CallbackSecParms4::Gss(GssCbHandles4::decode(d)?)),
            _ => Err(XdrError::BadDiscriminant),
        }
    }
}

/// callback_sec_parms4<>, bounded by `MAX_SMALL_ARRAY`.
pub(crate) fn decode_sec_parms(d: &mut Dec<'_>) -> Result<Vec<CallbackSecParms4>> {
    decode_array(d, MAX_SMALL_ARRAY, 4, CallbackSecParms4::decode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_stateids_are_special_and_distinct() {
        let all = [
            Stateid4::ANONYMOUS,
            Stateid4::READ_BYPASS,
            Stateid4::CURRENT,
            Stateid4::INVALID,
        ];
        for (i, a) in all.iter().enumerate() {
            assert!(a.is_special());
            assert_eq!(rnfsd_xdr::to_vec(a).len(), Stateid4::XDR_LEN);
            for b in &all[i + 1..] {
                assert_ne!(a, b);
            }
        }
        let mut s = Stateid4::ANONYMOUS;
        s.other[11] = 1;
        assert!(!s.is_special());
    }

    #[test]
    fn rdma_ird_count_two_is_too_long() {
        let mut b = vec![0u8; 24];
        b.extend_from_slice(&2u32.to_be_bytes());
        assert_eq!(
            ChannelAttrs4::decode(&mut Dec::new(&b)),
            Err(XdrError::TooLong)
        );
    }

    #[test]
    fn unknown_callback_flavor_is_bad_xdr() {
        let b = 3u32.to_be_bytes();
        assert_eq!(
            CallbackSecParms4::decode(&mut Dec::new(&b)),
            Err(XdrError::BadDiscriminant)
        );
    }
}
