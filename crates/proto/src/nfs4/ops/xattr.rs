//! Extended attributes, an NFSv4.2 extension (RFC 8276 §8): GETXATTR,
//! SETXATTR, LISTXATTRS and REMOVEXATTR. Names are component4s (the
//! `user.` namespace's names without the prefix, §5.1); values are
//! bounded by `MAX_XATTR_VALUE` on decode, names by `MAX_NAME` like every
//! component4, and LISTXATTRS results by `MAX_XATTR_NAMES` names.

use rnfsd_xdr::{xdr_struct, Dec, Enc, Result, Xdr};

use crate::mount::bounded_opaque;
use crate::nfs4::{
    decode_array, encode_array, ChangeInfo4, Component4, NfsRes4, MAX_XATTR_NAMES, MAX_XATTR_VALUE,
};

/// setxattr_option4 (RFC 8276 §8.4.2): carried as its number, so a server
/// can answer an unknown one NFS4ERR_INVAL as knfsd does, not BADXDR.
pub const SETXATTR4_EITHER: u32 = 0;
pub const SETXATTR4_CREATE: u32 = 1;
pub const SETXATTR4_REPLACE: u32 = 2;

bounded_opaque!(
    /// xattrvalue4: opaque<> (RFC 8276 §8.3), at most `MAX_XATTR_VALUE`
    /// bytes on decode.
    XattrValue4,
    MAX_XATTR_VALUE
);

xdr_struct! {
    /// GETXATTR4args (RFC 8276 §8.4.1).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct GetXattr4Args { pub name: Component4 }
}
/// GETXATTR4res: the value.
pub type GetXattr4Res = NfsRes4<XattrValue4>;

xdr_struct! {
    /// SETXATTR4args (RFC 8276 §8.4.2); `option` is a setxattr_option4.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct SetXattr4Args { pub option: u32, pub key: Component4, pub value: XattrValue4 }
}
/// SETXATTR4res: the object's change_info4.
pub type SetXattr4Res = NfsRes4<ChangeInfo4>;

xdr_struct! {
    /// LISTXATTRS4args (RFC 8276 §8.4.3).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ListXattrs4Args { pub cookie: u64, pub maxcount: u32 }
}

/// LISTXATTRS4resok (RFC 8276 §8.4.3): at most `MAX_XATTR_NAMES` names.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListXattrs4ResOk {
    pub cookie: u64,
    pub names: Vec<Component4>,
    pub eof: bool,
}

impl Xdr for ListXattrs4ResOk {
    fn encode(&self, e: &mut Enc) {
        e.u64(self.cookie);
        encode_array(e, &self.names);
        e.bool(self.eof);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(ListXattrs4ResOk {
            cookie: d.u64()?,
            names: decode_array(d, MAX_XATTR_NAMES, 4, Component4::decode)?,
            eof: d.bool()?,
        })
    }
}
pub type ListXattrs4Res = NfsRes4<ListXattrs4ResOk>;

xdr_struct! {
    /// REMOVEXATTR4args (RFC 8276 §8.4.4).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct RemoveXattr4Args { pub name: Component4 }
}
/// REMOVEXATTR4res: the object's change_info4.
pub type RemoveXattr4Res = NfsRes4<ChangeInfo4>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nfs4::{ArgOp, ResOp, OP_GETXATTR, OP_LISTXATTRS, OP_REMOVEXATTR, OP_SETXATTR};
    use rnfsd_xdr::XdrError;

    fn roundtrip(a: ArgOp<'_>) {
        let mut e = Enc::new();
        a.encode(&mut e);
        let mut d = Dec::new(e.as_slice());
        let n = d.u32().unwrap();
        assert_eq!(ArgOp::decode(&mut d, n).unwrap(), a);
        assert_eq!(d.remaining(), 0);
    }

    #[test]
    fn arguments_round_trip_by_their_numbers() {
        let name = Component4(b"colour".to_vec());
        roundtrip(ArgOp::GetXattr(GetXattr4Args { name: name.clone() }));
        roundtrip(ArgOp::SetXattr(SetXattr4Args {
            option: SETXATTR4_CREATE,
            key: name.clone(),
            value: XattrValue4(b"blue".to_vec()),
        }));
        roundtrip(ArgOp::ListXattrs(ListXattrs4Args {
            cookie: 7,
            maxcount: 8192,
        }));
        roundtrip(ArgOp::RemoveXattr(RemoveXattr4Args { name }));
    }

    #[test]
    fn setxattr_wire_form() {
        let a = SetXattr4Args {
            option: SETXATTR4_REPLACE,
            key: Component4(b"ab".to_vec()),
            value: XattrValue4(vec![1, 2, 3, 4, 5]),
        };
        let b = rnfsd_xdr::to_vec(&a);
        assert_eq!(
            b,
            [
                0, 0, 0, 2, // option
                0, 0, 0, 2, b'a', b'b', 0, 0, // key
                0, 0, 0, 5, 1, 2, 3, 4, 5, 0, 0, 0, // value
            ]
        );
    }

    #[test]
    fn values_and_name_lists_are_bounded() {
        let mut e = Enc::new();
        e.u32(SETXATTR4_EITHER);
        e.opaque(b"k");
        e.u32(MAX_XATTR_VALUE as u32 + 1);
        e.raw(&vec![0; MAX_XATTR_VALUE + 4]);
        assert_eq!(
            rnfsd_xdr::from_slice::<SetXattr4Args>(e.as_slice()),
            Err(XdrError::TooLong)
        );
        let mut e = Enc::new();
        e.u64(0);
        e.u32(MAX_XATTR_NAMES as u32 + 1);
        e.raw(&vec![0; 4 * (MAX_XATTR_NAMES + 2)]);
        assert!(rnfsd_xdr::from_slice::<ListXattrs4ResOk>(e.as_slice()).is_err());
    }

    #[test]
    fn results_round_trip() {
        let list = ResOp::ListXattrs(NfsRes4::Ok(ListXattrs4ResOk {
            cookie: 2,
            names: vec![Component4(b"a".to_vec()), Component4(b"bcd".to_vec())],
            eof: true,
        }));
        let set = ResOp::SetXattr(NfsRes4::Ok(ChangeInfo4 {
            atomic: false,
            before: 1,
            after: 2,
        }));
        let get = ResOp::GetXattr(NfsRes4::Ok(XattrValue4(b"v".to_vec())));
        for r in [list, set, get] {
            let b = rnfsd_xdr::to_vec(&r);
            assert_eq!(rnfsd_xdr::from_slice::<ResOp>(&b), Ok(r));
        }
        for op in [OP_GETXATTR, OP_SETXATTR, OP_LISTXATTRS, OP_REMOVEXATTR] {
            let r = ResOp::error(op, crate::nfs4::Nfsstat4::NoXattr);
            assert_eq!(r.opnum(), op);
            let b = rnfsd_xdr::to_vec(&r);
            assert_eq!(b.len(), 8, "a failure is its status alone");
        }
    }
}
