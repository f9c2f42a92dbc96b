//! Byte-range locks: LOCK, LOCKT, LOCKU (RFC 8881 §18.10-§18.12), and
//! NFSv4.0's RELEASE_LOCKOWNER (XDR in RFC 5662). LOCK and LOCKT answer a conflict with
//! NFS4ERR_DENIED and the conflicting lock, so their results are not the
//! plain status union.

use rnfsd_xdr::{xdr_enum, xdr_struct, Dec, Enc, Result, Xdr};

use crate::nfs4::{fail_status, LockOwner4, Nfsstat4, Stateid4};

xdr_enum! {
    /// nfs_lock_type4 (RFC 8881 §18.10).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum NfsLockType4 {
        Read = 1,
        Write = 2,
        /// Blocking read.
        ReadW = 3,
        /// Blocking write.
        WriteW = 4,
    }
}

xdr_struct! {
    /// open_to_lock_owner4 (RFC 8881 §3.3.11): the first lock of a lock
    /// owner, from an open stateid.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct OpenToLockOwner4 {
        pub open_seqid: u32,
        pub open_stateid: Stateid4,
        pub lock_seqid: u32,
        pub lock_owner: LockOwner4,
    }
}

xdr_struct! {
    /// exist_lock_owner4 (RFC 8881 §18.10): a lock owner with a lock
    /// stateid already.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ExistLockOwner4 { pub lock_stateid: Stateid4, pub lock_seqid: u32 }
}

/// locker4 (RFC 8881 §18.10): switch on bool new_lock_owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Locker4 {
    /// new_lock_owner TRUE.
    OpenOwner(OpenToLockOwner4),
    /// new_lock_owner FALSE.
    LockOwner(ExistLockOwner4),
}

impl Xdr for Locker4 {
    fn encode(&self, e: &mut Enc) {
        match self {
            Locker4::OpenOwner(o) => {
                e.bool(true);
                o.encode(e);
            }
            Locker4::LockOwner(l) => {
                e.bool(false);
                l.encode(e);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        if d.bool()? {
            Ok(Locker4::OpenOwner(OpenToLockOwner4::decode(d)?))
        } else {
            Ok(Locker4::LockOwner(ExistLockOwner4::decode(d)?))
        }
    }
}

xdr_struct! {
    /// LOCK4args (RFC 8881 §18.10).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Lock4Args {
        pub locktype: NfsLockType4,
        pub reclaim: bool,
        pub offset: u64,
        pub length: u64,
        pub locker: Locker4,
    }
}

xdr_struct! {
    /// LOCK4denied (RFC 8881 §18.10): the lock in the way.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Lock4Denied {
        pub offset: u64,
        pub length: u64,
        pub locktype: NfsLockType4,
        pub owner: LockOwner4,
    }
}

/// LOCK4res (RFC 8881 §18.10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lock4Res {
    Ok(Stateid4),
    Denied(Lock4Denied),
    /// Any other status; DENIED and OK encode as SERVERFAULT (their arms
    /// have a body this has not).
    Fail(Nfsstat4),
}

impl Lock4Res {
    pub fn status(&self) -> Nfsstat4 {
        match self {
            Lock4Res::Ok(_) => Nfsstat4::Ok,
            Lock4Res::Denied(_) => Nfsstat4::Denied,
            Lock4Res::Fail(s) => *s,
        }
    }
}

impl Xdr for Lock4Res {
    fn encode(&self, e: &mut Enc) {
        match self {
            Lock4Res::Ok(s) => {
                Nfsstat4::Ok.encode(e);
                s.encode(e);
            }
            Lock4Res::Denied(d) => {
                Nfsstat4::Denied.encode(e);
                d.encode(e);
            }
            Lock4Res::Fail(s) => fail_status(*s, &[Nfsstat4::Denied]).encode(e),
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(match Nfsstat4::decode(d)? {
            Nfsstat4::Ok => Lock4Res::Ok(Stateid4::decode(d)?),
            Nfsstat4::Denied => Lock4Res::Denied(Lock4Denied::decode(d)?),
            s => Lock4Res::Fail(s),
        })
    }
}

xdr_struct! {
    /// LOCKT4args (RFC 8881 §18.11).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct LockT4Args {
        pub locktype: NfsLockType4,
        pub offset: u64,
        pub length: u64,
        pub owner: LockOwner4,
    }
}

/// LOCKT4res (RFC 8881 §18.11): NFS4_OK has no body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockT4Res {
    Ok,
    Denied(Lock4Denied),
    /// Any other status; DENIED encodes as SERVERFAULT.
    Fail(Nfsstat4),
}

impl LockT4Res {
    pub fn status(&self) -> Nfsstat4 {
        match self {
            LockT4Res::Ok => Nfsstat4::Ok,
            LockT4Res::Denied(_) => Nfsstat4::Denied,
            LockT4Res::Fail(s) => *s,
        }
    }
}

impl Xdr for LockT4Res {
    fn encode(&self, e: &mut Enc) {
        match self {
            LockT4Res::Ok => Nfsstat4::Ok.encode(e),
            LockT4Res::Denied(d) => {
                Nfsstat4::Denied.encode(e);
                d.encode(e);
            }
            LockT4Res::Fail(s) => fail_status(*s, &[Nfsstat4::Denied]).encode(e),
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(match Nfsstat4::decode(d)? {
            Nfsstat4::Ok => LockT4Res::Ok,
            Nfsstat4::Denied => LockT4Res::Denied(Lock4Denied::decode(d)?),
            s => LockT4Res::Fail(s),
        })
    }
}

xdr_struct! {
    /// LOCKU4args (RFC 8881 §18.12). The result is `Stateid4Res`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct LockU4Args {
        pub locktype: NfsLockType4,
        pub seqid: u32,
        pub lock_stateid: Stateid4,
        pub offset: u64,
        pub length: u64,
    }
}

xdr_struct! {
    /// RELEASE_LOCKOWNER4args (RFC 5662): NFSv4.0 only (RFC 8881 §17).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ReleaseLockOwner4Args { pub lock_owner: LockOwner4 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denied_without_a_body_is_never_sent() {
        assert_eq!(
            rnfsd_xdr::to_vec(&Lock4Res::Fail(Nfsstat4::Denied)),
            (Nfsstat4::ServerFault as u32).to_be_bytes()
        );
        assert_eq!(
            rnfsd_xdr::to_vec(&LockT4Res::Fail(Nfsstat4::Ok)),
            (Nfsstat4::ServerFault as u32).to_be_bytes()
        );
        assert_eq!(
            rnfsd_xdr::to_vec(&LockT4Res::Fail(Nfsstat4::Grace)),
            (Nfsstat4::Grace as u32).to_be_bytes()
        );
    }
}
