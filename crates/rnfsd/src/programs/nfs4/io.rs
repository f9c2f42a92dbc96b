//! READ, WRITE, COMMIT (RFC 8881 §18.22, §18.32, §18.3). Not yet served: NFS4ERR_NOTSUPP.

use rnfsd_proto::nfs4::*;
use rnfsd_xdr::Enc;

use super::compound::Compound;

pub(super) fn read(_c: &mut Compound<'_, '_>, _a: Read4Args, e: &mut Enc) -> Nfsstat4 {
    e.u32(Nfsstat4::NotSupp as u32);
    Nfsstat4::NotSupp
}

pub(super) fn write(_c: &mut Compound<'_, '_>, _a: Write4ArgsRef<'_>) -> Write4Res {
    OpResult::from_status(Nfsstat4::NotSupp)
}

pub(super) fn commit(_c: &mut Compound<'_, '_>, _a: Commit4Args) -> Commit4Res {
    OpResult::from_status(Nfsstat4::NotSupp)
}
