//! SETATTR, VERIFY and NVERIFY (RFC 8881 §18.30, §18.31, §18.15). Not yet served: NFS4ERR_NOTSUPP.

use rnfsd_proto::nfs4::*;

use super::compound::Compound;

pub(super) fn setattr(_c: &mut Compound<'_, '_>, _a: SetAttr4Args) -> SetAttr4Res {
    OpResult::from_status(Nfsstat4::NotSupp)
}

pub(super) fn verify(_c: &mut Compound<'_, '_>, _a: Verify4Args) -> Nfsstat4 {
    OpResult::from_status(Nfsstat4::NotSupp)
}

pub(super) fn nverify(_c: &mut Compound<'_, '_>, _a: Verify4Args) -> Nfsstat4 {
    OpResult::from_status(Nfsstat4::NotSupp)
}
