//! The errors this crate returns, one per nfsstat4 it stands for
//! ([`V4Error::code`] gives the RFC 8881 number; the protocol layer puts
//! it on the wire).

use std::fmt;

use rnfsd_fs::FsError;

use crate::ids::ClientId;

/// A byte-range lock in the way (LOCK4denied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    pub offset: u64,
    /// `u64::MAX`: to the end of the file.
    pub length: u64,
    pub write: bool,
    /// The holder when it is one of our NFSv4 lock owners; None for a
    /// local program's or an NLM client's lock (LOCK4denied then carries
    /// client id 0 and an empty owner, as knfsd sends).
    pub owner: Option<(ClientId, Vec<u8>)>,
}

/// An nfsstat4 other than NFS4_OK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum V4Error {
    Perm,
    NoEnt,
    Io,
    Access,
    IsDir,
    Inval,
    FBig,
    NoSpc,
    RoFs,
    Stale,
    NotSupp,
    TooSmall,
    ServerFault,
    Delay,
    Denied(Box<Denied>),
    Expired,
    Locked,
    Grace,
    ShareDenied,
    ClidInUse,
    Resource,
    StaleClientId,
    StaleStateid,
    OldStateid,
    BadStateid,
    NotSame,
    NoGrace,
    ReclaimBad,
    LocksHeld,
    OpenMode,
    AdminRevoked,
    BadSession,
    BadSlot,
    CompleteAlready,
    ConnNotBoundToSession,
    SeqMisordered,
    ReqTooBig,
    RepTooBigToCache,
    RetryUncachedRep,
    TooManyOps,
    ClientIdBusy,
    SeqFalseRetry,
    DelegRevoked,
}

impl V4Error {
    /// The nfsstat4 number (RFC 8881 §15.1).
    pub fn code(&self) -> u32 {
        use V4Error::*;
        match self {
            Perm => 1,
            NoEnt => 2,
            Io => 5,
            Access => 13,
            IsDir => 21,
            Inval => 22,
            FBig => 27,
            NoSpc => 28,
            RoFs => 30,
            Stale => 70,
            NotSupp => 10004,
            TooSmall => 10005,
            ServerFault => 10006,
            Delay => 10008,
            Denied(_) => 10010,
            Expired => 10011,
            Locked => 10012,
            Grace => 10013,
            ShareDenied => 10015,
            ClidInUse => 10017,
            Resource => 10018,
            StaleClientId => 10022,
            StaleStateid => 10023,
            OldStateid => 10024,
            BadStateid => 10025,
            NotSame => 10027,
            NoGrace => 10033,
            ReclaimBad => 10034,
            LocksHeld => 10037,
            OpenMode => 10038,
            AdminRevoked => 10047,
            BadSession => 10052,
            BadSlot => 10053,
            CompleteAlready => 10054,
            ConnNotBoundToSession => 10055,
            SeqMisordered => 10063,
            ReqTooBig => 10065,
            RepTooBigToCache => 10067,
            RetryUncachedRep => 10068,
            TooManyOps => 10070,
            ClientIdBusy => 10074,
            SeqFalseRetry => 10076,
            DelegRevoked => 10087,
        }
    }

    /// A filesystem error from opening or locking a file, as NFSv4 says
    /// it (knfsd's nfserrno).
    pub fn from_fs(e: &FsError) -> V4Error {
        match e {
            FsError::Stale | FsError::BadHandle => V4Error::Stale,
            FsError::NotSupported => V4Error::NotSupp,
            FsError::Errno(n) => match *n {
                libc::EPERM => V4Error::Perm,
                libc::ENOENT => V4Error::NoEnt,
                libc::EACCES => V4Error::Access,
                libc::EISDIR => V4Error::IsDir,
                libc::EINVAL => V4Error::Inval,
                libc::EFBIG => V4Error::FBig,
                libc::ENOSPC => V4Error::NoSpc,
                libc::EROFS => V4Error::RoFs,
                libc::ESTALE => V4Error::Stale,
                // ETIMEDOUT: a backend call past its time limit (the
                // CephFS backend's, NFSv3's JUKEBOX): the client retries.
                libc::EAGAIN | libc::ETIMEDOUT => V4Error::Delay,
                // Out of descriptors or of kernel lock records.
                libc::EMFILE | libc::ENFILE | libc::ENOLCK | libc::ENOMEM => V4Error::Resource,
                _ => V4Error::Io,
            },
            FsError::NotSync | FsError::BadCookie => V4Error::ServerFault,
        }
    }
}

impl fmt::Display for V4Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            V4Error::Denied(d) => write!(
                f,
                "NFS4ERR_DENIED ({} lock at {} for {})",
                if d.write { "write" } else { "read" },
                d.offset,
                d.length
            ),
            other => write!(f, "{other:?} (nfsstat4 {})", other.code()),
        }
    }
}

impl std::error::Error for V4Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_rfc_8881_numbers() {
        // A few spot checks against RFC 8881 §15.1's table.
        assert_eq!(V4Error::ShareDenied.code(), 10015);
        assert_eq!(V4Error::BadSession.code(), 10052);
        assert_eq!(V4Error::SeqMisordered.code(), 10063);
        assert_eq!(V4Error::SeqFalseRetry.code(), 10076);
        assert_eq!(V4Error::ClientIdBusy.code(), 10074);
        assert_eq!(V4Error::LocksHeld.code(), 10037);
    }

    #[test]
    fn fs_errors_map() {
        assert_eq!(V4Error::from_fs(&FsError::Stale), V4Error::Stale);
        assert_eq!(
            V4Error::from_fs(&FsError::Errno(libc::EACCES)),
            V4Error::Access
        );
        assert_eq!(
            V4Error::from_fs(&FsError::Errno(libc::EMFILE)),
            V4Error::Resource
        );
        assert_eq!(V4Error::from_fs(&FsError::Errno(libc::EIO)), V4Error::Io);
        assert_eq!(
            V4Error::from_fs(&FsError::Errno(libc::ETIMEDOUT)),
            V4Error::Delay
        );
    }
}
