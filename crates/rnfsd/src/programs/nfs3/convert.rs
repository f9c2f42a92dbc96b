//! Conversions between the backend's types and NFSv3's wire types: the
//! errno -> nfsstat3 map (after knfsd's `nfserrno()`), fattr3, wcc_data,
//! times, sattr3 and stable_how.

use rnfsd_fs::{Attr, Fh, FileType, FsError, SetAttr, SetTime, Stable, Time, Wcc};
use rnfsd_proto::nfs3::*;

// Linux errno values (the backend passes raw Linux errnos).
mod errno {
    pub const EPERM: i32 = 1;
    pub const ENOENT: i32 = 2;
    pub const EIO: i32 = 5;
    pub const ENXIO: i32 = 6;
    pub const E2BIG: i32 = 7;
    pub const EBADF: i32 = 9;
    pub const EAGAIN: i32 = 11;
    pub const ENOMEM: i32 = 12;
    pub const EACCES: i32 = 13;
    pub const EEXIST: i32 = 17;
    pub const EXDEV: i32 = 18;
    pub const ENODEV: i32 = 19;
    pub const ENOTDIR: i32 = 20;
    pub const EISDIR: i32 = 21;
    pub const EINVAL: i32 = 22;
    pub const ENFILE: i32 = 23;
    pub const EMFILE: i32 = 24;
    pub const ETXTBSY: i32 = 26;
    pub const EFBIG: i32 = 27;
    pub const ENOSPC: i32 = 28;
    pub const EROFS: i32 = 30;
    pub const EMLINK: i32 = 31;
    pub const ENAMETOOLONG: i32 = 36;
    pub const ENOTEMPTY: i32 = 39;
    pub const EOPNOTSUPP: i32 = 95;
    pub const ETIMEDOUT: i32 = 110;
    pub const ESTALE: i32 = 116;
    pub const EUCLEAN: i32 = 117;
    pub const EREMOTEIO: i32 = 121;
    pub const EDQUOT: i32 = 122;
    pub const ENOKEY: i32 = 126;
}

/// Linux errno -> nfsstat3, following knfsd's `nfserrno()` table
/// (fs/nfsd/vfs.c). Anything not in it (ELOOP, EBUSY, ...) is NFS3ERR_IO, as
/// there. One deliberate difference: EMFILE, which knfsd never sees (it has
/// no per-process descriptor limit), is NFS3ERR_JUKEBOX, so a client retries
/// once descriptors free up rather than failing the application.
pub(super) fn nfsstat3_of_errno(e: i32) -> Nfsstat3 {
    use errno::*;
    match e {
        EPERM | ENOKEY => Nfsstat3::Perm,
        ENOENT => Nfsstat3::NoEnt,
        EIO | ETXTBSY | EREMOTEIO | EUCLEAN => Nfsstat3::Io,
        ENXIO => Nfsstat3::NxIo,
        E2BIG | EFBIG => Nfsstat3::FBig,
        EBADF | ESTALE => Nfsstat3::Stale,
        EACCES => Nfsstat3::Acces,
        EEXIST => Nfsstat3::Exist,
        EXDEV => Nfsstat3::XDev,
        EMLINK => Nfsstat3::MLink,
        ENODEV => Nfsstat3::NoDev,
        ENOTDIR => Nfsstat3::NotDir,
        EISDIR => Nfsstat3::IsDir,
        EINVAL => Nfsstat3::Inval,
        ENOSPC => Nfsstat3::NoSpc,
        EROFS => Nfsstat3::RoFs,
        ENAMETOOLONG => Nfsstat3::NameTooLong,
        ENOTEMPTY => Nfsstat3::NotEmpty,
        EDQUOT => Nfsstat3::DQuot,
        // EAGAIN == EWOULDBLOCK on Linux.
        ETIMEDOUT | EAGAIN | ENOMEM | EMFILE => Nfsstat3::Jukebox,
        // EOPNOTSUPP == ENOTSUP on Linux.
        EOPNOTSUPP => Nfsstat3::NotSupp,
        ENFILE => Nfsstat3::ServerFault,
        _ => Nfsstat3::Io,
    }
}

/// The one place a backend error becomes an nfsstat3.
pub(super) fn nfsstat3_of(e: FsError) -> Nfsstat3 {
    match e {
        FsError::Errno(n) => nfsstat3_of_errno(n),
        FsError::BadHandle => Nfsstat3::BadHandle,
        FsError::Stale => Nfsstat3::Stale,
        FsError::NotSync => Nfsstat3::NotSync,
        FsError::BadCookie => Nfsstat3::BadCookie,
        FsError::NotSupported => Nfsstat3::NotSupp,
    }
}

/// nfstime3 seconds are unsigned 32-bit: times before 1970 clamp to 0 and
/// times after 2106 to the largest value.
pub(super) fn nfstime3_of(t: Time) -> Nfstime3 {
    if t.sec < 0 {
        Nfstime3::default()
    } else if t.sec > i64::from(u32::MAX) {
        Nfstime3 {
            seconds: u32::MAX,
            nseconds: 999_999_999,
        }
    } else {
        Nfstime3 {
            seconds: t.sec as u32,
            nseconds: t.nsec.min(999_999_999),
        }
    }
}

pub(super) fn time_of(t: Nfstime3) -> Time {
    Time {
        sec: i64::from(t.seconds),
        nsec: t.nseconds.min(999_999_999),
    }
}

fn ftype3_of(t: FileType) -> Ftype3 {
    match t {
        FileType::Regular => Ftype3::Reg,
        FileType::Directory => Ftype3::Dir,
        FileType::BlockDev => Ftype3::Blk,
        FileType::CharDev => Ftype3::Chr,
        FileType::Symlink => Ftype3::Lnk,
        FileType::Socket => Ftype3::Sock,
        FileType::Fifo => Ftype3::Fifo,
    }
}

pub(super) fn fattr3_of(a: &Attr) -> Fattr3 {
    Fattr3 {
        ftype: ftype3_of(a.ftype),
        mode: a.mode & 0o7777,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        size: a.size,
        used: a.used,
        rdev: Specdata3 {
            specdata1: a.rdev.0,
            specdata2: a.rdev.1,
        },
        fsid: a.fsid,
        fileid: a.fileid,
        atime: nfstime3_of(a.atime),
        mtime: nfstime3_of(a.mtime),
        ctime: nfstime3_of(a.ctime),
    }
}

pub(super) fn wcc_data_of(w: &Wcc) -> WccData {
    WccData {
        before: w.before.map(|b| WccAttr {
            size: b.size,
            mtime: nfstime3_of(b.mtime),
            ctime: nfstime3_of(b.ctime),
        }),
        after: w.after.as_ref().map(fattr3_of),
    }
}

fn set_time_of(t: SetTime3) -> SetTime {
    match t {
        SetTime3::DontChange => SetTime::DontChange,
        SetTime3::ServerTime => SetTime::ServerTime,
        SetTime3::ClientTime(t) => SetTime::ClientTime(time_of(t)),
    }
}

pub(super) fn setattr_of(s: &Sattr3) -> SetAttr {
    SetAttr {
        mode: s.mode.map(|m| m & 0o7777),
        uid: s.uid,
        gid: s.gid,
        size: s.size,
        atime: set_time_of(s.atime),
        mtime: set_time_of(s.mtime),
    }
}

pub(super) fn stable_of(s: StableHow) -> Stable {
    match s {
        StableHow::Unstable => Stable::Unstable,
        StableHow::DataSync => Stable::DataSync,
        StableHow::FileSync => Stable::FileSync,
    }
}

pub(super) fn stable_how_of(s: Stable) -> StableHow {
    match s {
        Stable::Unstable => StableHow::Unstable,
        Stable::DataSync => StableHow::DataSync,
        Stable::FileSync => StableHow::FileSync,
    }
}

pub(super) fn fh3_of(fh: Fh) -> NfsFh3 {
    NfsFh3::new(fh.0)
}
