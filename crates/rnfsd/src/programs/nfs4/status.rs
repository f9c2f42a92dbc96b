//! The one place a backend error or a state error becomes an nfsstat4
//! (RFC 8881 §15; knfsd's `nfserrno` for errnos).

use rnfsd_fs::FsError;
use rnfsd_proto::nfs4::Nfsstat4;
use rnfsd_v4state::V4Error;

/// A Linux errno as NFSv4 says it.
pub(super) fn of_errno(e: i32) -> Nfsstat4 {
    use libc::*;
    match e {
        EPERM | ENOKEY => Nfsstat4::Perm,
        ENOENT => Nfsstat4::NoEnt,
        EIO | ETXTBSY | EREMOTEIO | EUCLEAN => Nfsstat4::Io,
        ENXIO | ENODEV => Nfsstat4::NxIo,
        E2BIG | EFBIG => Nfsstat4::FBig,
        EBADF | ESTALE => Nfsstat4::Stale,
        EACCES => Nfsstat4::Access,
        EEXIST => Nfsstat4::Exist,
        EXDEV => Nfsstat4::XDev,
        EMLINK => Nfsstat4::MLink,
        ENOTDIR => Nfsstat4::NotDir,
        EISDIR => Nfsstat4::IsDir,
        EINVAL => Nfsstat4::Inval,
        ENOSPC => Nfsstat4::NoSpc,
        EROFS => Nfsstat4::RoFs,
        ENAMETOOLONG => Nfsstat4::NameTooLong,
        ENOTEMPTY => Nfsstat4::NotEmpty,
        EDQUOT => Nfsstat4::DQuot,
        ELOOP => Nfsstat4::Symlink,
        // EAGAIN == EWOULDBLOCK on Linux.
        ETIMEDOUT | EAGAIN | ENOMEM | EMFILE => Nfsstat4::Delay,
        ENFILE => Nfsstat4::Resource,
        // EOPNOTSUPP == ENOTSUP on Linux.
        EOPNOTSUPP => Nfsstat4::NotSupp,
        _ => Nfsstat4::Io,
    }
}

/// A backend error.
pub(super) fn of_fs(e: FsError) -> Nfsstat4 {
    match e {
        FsError::Errno(n) => of_errno(n),
        FsError::BadHandle => Nfsstat4::BadHandle,
        FsError::Stale => Nfsstat4::Stale,
        // SETATTR's guard: NFSv4 has none of its own (VERIFY does it).
        FsError::NotSync => Nfsstat4::NotSame,
        FsError::BadCookie => Nfsstat4::BadCookie,
        FsError::NotSupported => Nfsstat4::NotSupp,
    }
}

/// A state error: its number is the nfsstat4's.
pub(super) fn of_state(e: &V4Error) -> Nfsstat4 {
    let n = e.code();
    Nfsstat4::from_u32(n).unwrap_or_else(|| {
        debug_assert!(false, "v4state error {n} is no nfsstat4");
        Nfsstat4::ServerFault
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_error_is_an_nfsstat4() {
        let all = [
            V4Error::Perm,
            V4Error::Grace,
            V4Error::BadSession,
            V4Error::TooManyOps,
            V4Error::ReqTooBig,
            V4Error::SeqFalseRetry,
            V4Error::DelegRevoked,
        ];
        for e in all {
            assert_eq!(of_state(&e) as u32, e.code(), "{e}");
        }
        assert_eq!(of_fs(FsError::Errno(libc::ENOENT)), Nfsstat4::NoEnt);
        assert_eq!(of_fs(FsError::Stale), Nfsstat4::Stale);
    }
}
