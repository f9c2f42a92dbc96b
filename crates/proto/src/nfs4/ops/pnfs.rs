//! pNFS operations: GETDEVICEINFO, GETDEVICELIST, LAYOUTCOMMIT, LAYOUTGET,
//! LAYOUTRETURN (RFC 8881 §18.40-§18.44). A server without pNFS answers
//! them NFS4ERR_NOTSUPP; they are decoded whole anyway, so a COMPOUND
//! reader never loses its place.
//!
//! layouttype4 and layoutiomode4 are kept as numbers: an unknown layout
//! type is NFS4ERR_UNKNOWN_LAYOUTTYPE and a bad iomode NFS4ERR_BADIOMODE
//! (§18.43.3), not a decode failure.

use rnfsd_xdr::{xdr_struct, Dec, Enc, Result, Xdr, XdrError};

use crate::mount::bounded_opaque;
use crate::nfs4::{
    decode_array, encode_array, fail_status, Bitmap4, DeviceId4, NfsRes4, Nfsstat4, Nfstime4,
    Stateid4, Verifier4, MAX_DEVICE_IDS, MAX_LAYOUTS, MAX_LAYOUT_BODY,
};

// layouttype4 (RFC 8881 §3.3.13).
pub const LAYOUT4_NFSV4_1_FILES: u32 = 1;
pub const LAYOUT4_OSD2_OBJECTS: u32 = 2;
pub const LAYOUT4_BLOCK_VOLUME: u32 = 3;
// layoutiomode4 (RFC 8881 §3.3.20).
pub const LAYOUTIOMODE4_READ: u32 = 1;
pub const LAYOUTIOMODE4_RW: u32 = 2;
pub const LAYOUTIOMODE4_ANY: u32 = 3;

bounded_opaque!(
    /// A layout-type-specific body (loc_body, lou_body, lrf_body,
    /// da_addr_body; RFC 8881 §3.3.15-§3.3.18), at most `MAX_LAYOUT_BODY`
    /// bytes.
    LayoutBody,
    MAX_LAYOUT_BODY
);

xdr_struct! {
    /// device_addr4 (RFC 8881 §3.3.15).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct DeviceAddr4 { pub layout_type: u32, pub addr_body: LayoutBody }
}

xdr_struct! {
    /// layout_content4 (RFC 8881 §3.3.16).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct LayoutContent4 { pub layout_type: u32, pub body: LayoutBody }
}

xdr_struct! {
    /// layout4 (RFC 8881 §3.3.17).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Layout4 { pub offset: u64, pub length: u64, pub iomode: u32, pub content: LayoutContent4 }
}

xdr_struct! {
    /// layoutupdate4 (RFC 8881 §3.3.18).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct LayoutUpdate4 { pub layout_type: u32, pub body: LayoutBody }
}

xdr_struct! {
    /// GETDEVICEINFO4args (RFC 8881 §18.40).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct GetDeviceInfo4Args {
        pub device_id: DeviceId4,
        pub layout_type: u32,
        pub maxcount: u32,
        pub notify_types: Bitmap4,
    }
}

xdr_struct! {
    /// GETDEVICEINFO4resok (RFC 8881 §18.40).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct GetDeviceInfo4ResOk { pub device_addr: DeviceAddr4, pub notification: Bitmap4 }
}

/// GETDEVICEINFO4res (RFC 8881 §18.40): NFS4ERR_TOOSMALL carries the size
/// needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GetDeviceInfo4Res {
    Ok(GetDeviceInfo4ResOk),
    TooSmall {
        mincount: u32,
    },
    /// Any other status; TOOSMALL encodes as SERVERFAULT.
    Fail(Nfsstat4),
}

impl GetDeviceInfo4Res {
    pub fn status(&self) -> Nfsstat4 {
        match self {
            GetDeviceInfo4Res::Ok(_) => Nfsstat4::Ok,
            GetDeviceInfo4Res::TooSmall { .. } => Nfsstat4::TooSmall,
            GetDeviceInfo4Res::Fail(s) => *s,
        }
    }
}

impl Xdr for GetDeviceInfo4Res {
    fn encode(&self, e: &mut Enc) {
        match self {
            GetDeviceInfo4Res::Ok(r) => {
                Nfsstat4::Ok.encode(e);
                r.encode(e);
            }
            GetDeviceInfo4Res::TooSmall { mincount } => {
                Nfsstat4::TooSmall.encode(e);
                e.u32(*mincount);
            }
            GetDeviceInfo4Res::Fail(s) => fail_status(*s, &[Nfsstat4::TooSmall]).encode(e),
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(match Nfsstat4::decode(d)? {
            Nfsstat4::Ok => GetDeviceInfo4Res::Ok(GetDeviceInfo4ResOk::decode(d)?),
            Nfsstat4::TooSmall => GetDeviceInfo4Res::TooSmall { mincount: d.u32()? },
            s => GetDeviceInfo4Res::Fail(s),
        })
    }
}

xdr_struct! {
    /// GETDEVICELIST4args (RFC 8881 §18.41).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct GetDeviceList4Args {
        pub layout_type: u32,
        pub maxdevices: u32,
        pub cookie: u64,
        pub cookieverf: Verifier4,
    }
}

/// GETDEVICELIST4resok (RFC 8881 §18.41): at most `MAX_DEVICE_IDS` IDs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetDeviceList4ResOk {
    pub cookie: u64,
    pub cookieverf: Verifier4,
    pub deviceid_list: Vec<DeviceId4>,
    pub eof: bool,
}

impl Xdr for GetDeviceList4ResOk {
    fn encode(&self, e: &mut Enc) {
        e.u64(self.cookie);
        self.cookieverf.encode(e);
        encode_array(e, &self.deviceid_list);
        e.bool(self.eof);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(GetDeviceList4ResOk {
            cookie: d.u64()?,
            cookieverf: Verifier4::decode(d)?,
            deviceid_list: decode_array(d, MAX_DEVICE_IDS, 16, DeviceId4::decode)?,
            eof: d.bool()?,
        })
    }
}
pub type GetDeviceList4Res = NfsRes4<GetDeviceList4ResOk>;

/// LAYOUTCOMMIT4args (RFC 8881 §18.42). newoffset4 and newtime4 are
/// `switch (bool)` unions: the optional-data encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutCommit4Args {
    pub offset: u64,
    pub length: u64,
    pub reclaim: bool,
    pub stateid: Stateid4,
    pub last_write_offset: Option<u64>,
    pub time_modify: Option<Nfstime4>,
    pub layoutupdate: LayoutUpdate4,
}

impl Xdr for LayoutCommit4Args {
    fn encode(&self, e: &mut Enc) {
        e.u64(self.offset);
        e.u64(self.length);
        e.bool(self.reclaim);
        self.stateid.encode(e);
        self.last_write_offset.encode(e);
        self.time_modify.encode(e);
        self.layoutupdate.encode(e);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(LayoutCommit4Args {
            offset: d.u64()?,
            length: d.u64()?,
            reclaim: d.bool()?,
            stateid: Stateid4::decode(d)?,
            last_write_offset: Option::decode(d)?,
            time_modify: Option::decode(d)?,
            layoutupdate: LayoutUpdate4::decode(d)?,
        })
    }
}
/// LAYOUTCOMMIT4res: the resok is newsize4, a `switch (bool)` size.
pub type LayoutCommit4Res = NfsRes4<Option<u64>>;

xdr_struct! {
    /// LAYOUTGET4args (RFC 8881 §18.43).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct LayoutGet4Args {
        pub signal_layout_avail: bool,
        pub layout_type: u32,
        pub iomode: u32,
        pub offset: u64,
        pub length: u64,
        pub minlength: u64,
        pub stateid: Stateid4,
        pub maxcount: u32,
    }
}

/// LAYOUTGET4resok (RFC 8881 §18.43): at most `MAX_LAYOUTS` layouts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutGet4ResOk {
    pub return_on_close: bool,
    pub stateid: Stateid4,
    pub layouts: Vec<Layout4>,
}

impl Xdr for LayoutGet4ResOk {
    fn encode(&self, e: &mut Enc) {
        e.bool(self.return_on_close);
        self.stateid.encode(e);
        encode_array(e, &self.layouts);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(LayoutGet4ResOk {
            return_on_close: d.bool()?,
            stateid: Stateid4::decode(d)?,
            // offset 8, length 8, iomode 4, type 4, body length 4.
            layouts: decode_array(d, MAX_LAYOUTS, 28, Layout4::decode)?,
        })
    }
}

/// LAYOUTGET4res (RFC 8881 §18.43): NFS4ERR_LAYOUTTRYLATER carries a flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutGet4Res {
    Ok(LayoutGet4ResOk),
    TryLater {
        will_signal_layout_avail: bool,
    },
    /// Any other status; LAYOUTTRYLATER encodes as SERVERFAULT.
    Fail(Nfsstat4),
}

impl LayoutGet4Res {
    pub fn status(&self) -> Nfsstat4 {
        match self {
            LayoutGet4Res::Ok(_) => Nfsstat4::Ok,
            LayoutGet4Res::TryLater { .. } => Nfsstat4::LayoutTryLater,
            LayoutGet4Res::Fail(s) => *s,
        }
    }
}

impl Xdr for LayoutGet4Res {
    fn encode(&self, e: &mut Enc) {
        match self {
            LayoutGet4Res::Ok(r) => {
                Nfsstat4::Ok.encode(e);
                r.encode(e);
            }
            LayoutGet4Res::TryLater {
                will_signal_layout_avail,
            } => {
                Nfsstat4::LayoutTryLater.encode(e);
                e.bool(*will_signal_layout_avail);
            }
            LayoutGet4Res::Fail(s) => fail_status(*s, &[Nfsstat4::LayoutTryLater]).encode(e),
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(match Nfsstat4::decode(d)? {
            Nfsstat4::Ok => LayoutGet4Res::Ok(LayoutGet4ResOk::decode(d)?),
            Nfsstat4::LayoutTryLater => LayoutGet4Res::TryLater {
                will_signal_layout_avail: d.bool()?,
            },
            s => LayoutGet4Res::Fail(s),
        })
    }
}

xdr_struct! {
    /// layoutreturn_file4 (RFC 8881 §18.44).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct LayoutReturnFile4 {
        pub offset: u64,
        pub length: u64,
        pub stateid: Stateid4,
        pub body: LayoutBody,
    }
}

/// layoutreturn4 (RFC 8881 §18.44): switch on layoutreturn_type4.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutReturn4 {
    File(LayoutReturnFile4),
    Fsid,
    All,
}

impl Xdr for LayoutReturn4 {
    fn encode(&self, e: &mut Enc) {
        match self {
            LayoutReturn4::File(f) => {
                e.u32(1);
                f.encode(e);
            }
            LayoutReturn4::Fsid => e.u32(2),
            LayoutReturn4::All => e.u32(3),
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        match d.u32()? {
            1 => Ok(LayoutReturn4::File(LayoutReturnFile4::decode(d)?)),
            2 => Ok(LayoutReturn4::Fsid),
            3 => Ok(LayoutReturn4::All),
            _ => Err(XdrError::BadDiscriminant),
        }
    }
}

xdr_struct! {
    /// LAYOUTRETURN4args (RFC 8881 §18.44).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct LayoutReturn4Args {
        pub reclaim: bool,
        pub layout_type: u32,
        pub iomode: u32,
        pub layoutreturn: LayoutReturn4,
    }
}
/// LAYOUTRETURN4res: the resok is layoutreturn_stateid, a `switch (bool)`
/// stateid.
pub type LayoutReturn4Res = NfsRes4<Option<Stateid4>>;
