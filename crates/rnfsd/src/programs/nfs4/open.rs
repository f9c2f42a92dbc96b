//! OPEN, OPEN_DOWNGRADE, CLOSE, DELEGRETURN (RFC 8881 §18.16-§18.20, §18.6). Not yet served: NFS4ERR_NOTSUPP.

use rnfsd_proto::nfs4::*;

use super::compound::Compound;

pub(super) fn open(_c: &mut Compound<'_, '_>, _a: Open4Args) -> Open4Res {
    OpResult::from_status(Nfsstat4::NotSupp)
}

pub(super) fn open_downgrade(_c: &mut Compound<'_, '_>, _a: OpenDowngrade4Args) -> Stateid4Res {
    OpResult::from_status(Nfsstat4::NotSupp)
}

pub(super) fn close(_c: &mut Compound<'_, '_>, _a: Close4Args) -> Stateid4Res {
    OpResult::from_status(Nfsstat4::NotSupp)
}

pub(super) fn delegreturn(_c: &mut Compound<'_, '_>, _a: DelegReturn4Args) -> Nfsstat4 {
    OpResult::from_status(Nfsstat4::NotSupp)
}
