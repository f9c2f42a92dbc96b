//! Filehandle, attribute and security-flavor operations: ACCESS, GETATTR,
//! GETFH, LOOKUP, LOOKUPP, NVERIFY, OPENATTR, PUTFH, PUTPUBFH, PUTROOTFH,
//! RESTOREFH, SAVEFH, SECINFO, SECINFO_NO_NAME, SETATTR, VERIFY (RFC 8881
//! §18). Operations with no arguments have no type here.

use rnfsd_xdr::{xdr_enum, xdr_struct, Dec, Enc, Result, Xdr};

use crate::nfs4::{
    decode_array, encode_array, Bitmap4, Component4, Fattr4, NfsFh4, NfsRes4, Nfsstat4, RpcGssSvc,
    SecOid4, Stateid4, MAX_SMALL_ARRAY, RPCSEC_GSS,
};

xdr_struct! {
    /// ACCESS4args (RFC 8881 §18.1).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Access4Args { pub access: u32 }
}
xdr_struct! {
    /// ACCESS4resok (RFC 8881 §18.1).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Access4ResOk { pub supported: u32, pub access: u32 }
}
pub type Access4Res = NfsRes4<Access4ResOk>;

xdr_struct! {
    /// GETATTR4args (RFC 8881 §18.7).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct GetAttr4Args { pub attr_request: Bitmap4 }
}
/// GETATTR4res: the resok is the fattr4 itself.
pub type GetAttr4Res = NfsRes4<Fattr4>;

/// GETFH4res (RFC 8881 §18.8).
pub type GetFh4Res = NfsRes4<NfsFh4>;

xdr_struct! {
    /// LOOKUP4args (RFC 8881 §18.13).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Lookup4Args { pub objname: Component4 }
}

xdr_struct! {
    /// NVERIFY4args and VERIFY4args (RFC 8881 §18.15, §18.31).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Verify4Args { pub obj_attributes: Fattr4 }
}

xdr_struct! {
    /// OPENATTR4args (RFC 8881 §18.17).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct OpenAttr4Args { pub createdir: bool }
}

xdr_struct! {
    /// PUTFH4args (RFC 8881 §18.19).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PutFh4Args { pub object: NfsFh4 }
}

xdr_struct! {
    /// SECINFO4args (RFC 8881 §18.29).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct SecInfo4Args { pub name: Component4 }
}

xdr_struct! {
    /// rpcsec_gss_info (RFC 8881 §18.29).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct RpcsecGssInfo { pub oid: SecOid4, pub qop: u32, pub service: RpcGssSvc }
}

/// secinfo4 (RFC 8881 §18.29): a flavor, with mechanism details for
/// RPCSEC_GSS only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecInfo4 {
    Gss(RpcsecGssInfo),
    /// Any flavor but RPCSEC_GSS (AUTH_SYS, AUTH_NONE, ...): no body.
    Flavor(u32),
}

impl Xdr for SecInfo4 {
    fn encode(&self, e: &mut Enc) {
        match self {
            SecInfo4::Gss(g) => {
                e.u32(RPCSEC_GSS);
                g.encode(e);
            }
            SecInfo4::Flavor(f) => e.u32(*f),
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        match d.u32()? {
            RPCSEC_GSS => Ok(SecInfo4::Gss(RpcsecGssInfo::decode(d)?)),
            f => Ok(SecInfo4::Flavor(f)),
        }
    }
}

/// SECINFO4resok (RFC 8881 §18.29): secinfo4<>, at most
/// `MAX_SMALL_ARRAY` flavors.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SecInfo4ResOk(pub Vec<SecInfo4>);

impl Xdr for SecInfo4ResOk {
    fn encode(&self, e: &mut Enc) {
        encode_array(e, &self.0);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        decode_array(d, MAX_SMALL_ARRAY, 4, SecInfo4::decode).map(SecInfo4ResOk)
    }
}
/// SECINFO4res, also SECINFO_NO_NAME4res (RFC 8881 §18.45).
pub type SecInfo4Res = NfsRes4<SecInfo4ResOk>;

xdr_enum! {
    /// secinfo_style4: SECINFO_NO_NAME's argument (RFC 8881 §18.45).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum SecInfoStyle4 {
        CurrentFh = 0,
        Parent = 1,
    }
}

xdr_struct! {
    /// SETATTR4args (RFC 8881 §18.30).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct SetAttr4Args { pub stateid: Stateid4, pub obj_attributes: Fattr4 }
}

xdr_struct! {
    /// SETATTR4res (RFC 8881 §18.30): a struct, not a union; attrsset is
    /// sent whatever the status (empty when nothing was set).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct SetAttr4Res { pub status: Nfsstat4, pub attrsset: Bitmap4 }
}

impl SetAttr4Res {
    pub fn fail(status: Nfsstat4) -> Self {
        SetAttr4Res {
            status,
            attrsset: Bitmap4::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rnfsd_xdr::XdrError;

    #[test]
    fn secinfo_flavors_without_gss_have_no_body() {
        let r: SecInfo4Res = NfsRes4::Ok(SecInfo4ResOk(vec![SecInfo4::Flavor(1)]));
        assert_eq!(rnfsd_xdr::to_vec(&r), [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1]);
        let bad = [0, 0, 0, 2];
        assert_eq!(
            SecInfoStyle4::decode(&mut Dec::new(&bad)),
            Err(XdrError::BadDiscriminant)
        );
    }
}
