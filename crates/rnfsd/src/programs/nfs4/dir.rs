//! The namespace: CREATE, LINK, REMOVE, RENAME, READLINK, READDIR (RFC 8881 §18). Not yet served: NFS4ERR_NOTSUPP.

use rnfsd_proto::nfs4::*;
use rnfsd_xdr::Enc;

use super::compound::Compound;

pub(super) fn create(_c: &mut Compound<'_, '_>, _a: Create4Args) -> Create4Res {
    OpResult::from_status(Nfsstat4::NotSupp)
}

pub(super) fn link(_c: &mut Compound<'_, '_>, _a: Link4Args) -> Link4Res {
    OpResult::from_status(Nfsstat4::NotSupp)
}

pub(super) fn remove(_c: &mut Compound<'_, '_>, _a: Remove4Args) -> Remove4Res {
    OpResult::from_status(Nfsstat4::NotSupp)
}

pub(super) fn rename(_c: &mut Compound<'_, '_>, _a: Rename4Args) -> Rename4Res {
    OpResult::from_status(Nfsstat4::NotSupp)
}

pub(super) fn readlink(_c: &mut Compound<'_, '_>) -> ReadLink4Res {
    OpResult::from_status(Nfsstat4::NotSupp)
}

pub(super) fn readdir(_c: &mut Compound<'_, '_>, _a: ReadDir4Args, e: &mut Enc) -> Nfsstat4 {
    e.u32(Nfsstat4::NotSupp as u32);
    Nfsstat4::NotSupp
}
