//! LOCK, LOCKT, LOCKU (RFC 8881 §18.10-§18.12). Not yet served: NFS4ERR_NOTSUPP.

use rnfsd_proto::nfs4::*;

use super::compound::Compound;

pub(super) fn lock(_c: &mut Compound<'_, '_>, _a: Lock4Args) -> Lock4Res {
    OpResult::from_status(Nfsstat4::NotSupp)
}

pub(super) fn lockt(_c: &mut Compound<'_, '_>, _a: LockT4Args) -> LockT4Res {
    OpResult::from_status(Nfsstat4::NotSupp)
}

pub(super) fn locku(_c: &mut Compound<'_, '_>, _a: LockU4Args) -> Stateid4Res {
    OpResult::from_status(Nfsstat4::NotSupp)
}
