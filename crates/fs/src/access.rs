//! What a caller may do, decided the same way by every backend: RFC 1813
//! ACCESS3 bits from mode bits, and the checks on a name a client sends.

use std::ffi::CString;

use crate::{Cred, FsError, FsResult};

/// Longest name component (RFC 1813 PATHCONF name_max).
pub const NAME_MAX: usize = 255;

/// Checks a name from the client: one component, no NUL, at most NAME_MAX
/// bytes; `dots` = whether "." and ".." are allowed (LOOKUP and READDIR
/// only; elsewhere EACCES as knfsd answers).
pub fn check_name(name: &[u8], dots: bool) -> FsResult<CString> {
    if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
        return Err(FsError::Errno(libc::EINVAL));
    }
    if name.len() > NAME_MAX {
        return Err(FsError::Errno(libc::ENAMETOOLONG));
    }
    if !dots && (name == b"." || name == b"..") {
        return Err(FsError::Errno(libc::EACCES));
    }
    CString::new(name).map_err(|_| FsError::Errno(libc::EINVAL))
}

pub const ACCESS3_READ: u32 = 0x1;
pub const ACCESS3_LOOKUP: u32 = 0x2;
pub const ACCESS3_MODIFY: u32 = 0x4;
pub const ACCESS3_EXTEND: u32 = 0x8;
pub const ACCESS3_DELETE: u32 = 0x10;
pub const ACCESS3_EXECUTE: u32 = 0x20;

/// RFC 1813 ACCESS3 bits `cred` holds on an object with `mode`, `uid` and `gid`, from the mode
/// bits as knfsd maps them (directories: READ=r, LOOKUP=x, MODIFY/EXTEND/
/// DELETE=w+x; others: READ=r, MODIFY/EXTEND=w, EXECUTE=x). Root gets all
/// but EXECUTE on a non-directory with no x bit at all.
pub fn access_bits(dir: bool, mode: u32, uid: u32, gid: u32, cred: &Cred, want: u32) -> u32 {
    rwx_access3(dir, mode_rwx(dir, mode, uid, gid, cred), want)
}

/// The ACCESS3 bits of `want` that the r, w and x permissions `rwx` (4, 2
/// and 1) give, as knfsd maps them: for a directory READ=r, LOOKUP=x,
/// MODIFY/EXTEND/DELETE=w+x; otherwise READ=r, MODIFY/EXTEND=w,
/// EXECUTE=x. For a backend that decides r, w and x its own way (CephFS's
/// ACLs).
pub fn rwx_access3(dir: bool, rwx: u32, want: u32) -> u32 {
    let (r, w, x) = (rwx & 4 != 0, rwx & 2 != 0, rwx & 1 != 0);
    let mut g = 0;
    if r {
        g |= ACCESS3_READ;
    }
    if dir {
        if x {
            g |= ACCESS3_LOOKUP;
        }
        if w && x {
            g |= ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE;
        }
    } else {
        if w {
            g |= ACCESS3_MODIFY | ACCESS3_EXTEND;
        }
        if x {
            g |= ACCESS3_EXECUTE;
        }
    }
    g & want
}

/// The r, w and x permissions (4, 2, 1: the values of R_OK, W_OK and X_OK)
/// the mode bits alone give `cred`: its class's bits; root all but x on a
/// non-directory with no x bit at all.
pub fn mode_rwx(dir: bool, mode: u32, uid: u32, gid: u32, cred: &Cred) -> u32 {
    if cred.uid == 0 {
        return if dir || mode & 0o111 != 0 { 7 } else { 6 };
    }
    if uid == cred.uid {
        (mode >> 6) & 7
    } else if gid == cred.gid || cred.gids.contains(&gid) {
        (mode >> 3) & 7
    } else {
        mode & 7
    }
}
