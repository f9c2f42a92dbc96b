//! Extended attributes of the `user.` namespace (`crate::xattr`), through
//! the object's /proc magic link (`sys::getxattr_fd` and the like) under
//! the caller's credentials, so the kernel decides as for a local process:
//! read permission to get and list, write permission (and, in a sticky
//! directory, ownership) to set and remove. As Linux's VFS, only regular
//! files and directories have user attributes: on anything else a get
//! finds none, a list is empty, a set or removal is EPERM.

use super::{errno, sys, LocalFs, Obj};
use crate::xattr::{full_name, user_names, XattrSet, XATTR_LIST_MAX, XATTR_SIZE_MAX};
use crate::{Call, Fh, FsResult, Wcc};

/// Whether the object may have user attributes (Linux's
/// `xattr_permission`).
fn has_user_xattrs(o: &Obj<'_>) -> bool {
    o.st.is_reg() || o.st.is_dir()
}

/// Whether the export's filesystem takes user attributes: a get of one
/// no one sets answers "none" (ENODATA), not "not supported" (tmpfs before
/// Linux 6.6, some FUSE and network filesystems).
pub(super) fn probe(root: std::os::fd::RawFd) -> bool {
    let Ok(name) = full_name(b"rnfsd.probe") else {
        return false;
    };
    match sys::getxattr_fd(root, &name, &mut []) {
        Ok(_) => true,
        Err(e) => !matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP)),
    }
}

pub(super) fn getxattr(
    fs: &LocalFs,
    call: &Call<'_>,
    fh: &Fh,
    name: &[u8],
    max: usize,
) -> FsResult<Vec<u8>> {
    let full = full_name(name)?;
    let o = fs.resolve(call, fh)?;
    if !has_user_xattrs(&o) {
        return Err(errno(libc::ENODATA));
    }
    fs.as_caller(call.cred)?;
    let mut buf = vec![0; max.min(XATTR_SIZE_MAX)];
    let n = sys::getxattr_fd(o.raw(), &full, &mut buf)?;
    // An empty buffer asks the length: a value that would not fit.
    if n > buf.len() {
        return Err(errno(libc::ERANGE));
    }
    buf.truncate(n);
    Ok(buf)
}

pub(super) fn setxattr(
    fs: &LocalFs,
    call: &Call<'_>,
    fh: &Fh,
    name: &[u8],
    value: &[u8],
    how: XattrSet,
) -> FsResult<Wcc> {
    let full = full_name(name)?;
    if value.len() > XATTR_SIZE_MAX {
        return Err(errno(libc::E2BIG));
    }
    let o = fs.resolve(call, fh)?;
    if !has_user_xattrs(&o) {
        return Err(errno(libc::EPERM));
    }
    fs.as_caller(call.cred)?;
    fs.changing(call, false)?;
    let flags = match how {
        XattrSet::Either => 0,
        XattrSet::Create => libc::XATTR_CREATE,
        XattrSet::Replace => libc::XATTR_REPLACE,
    };
    sys::setxattr_fd(o.raw(), &full, value, flags)?;
    // A `sync` export: durable before the reply, as SETATTR.
    fs.sync_attrs(call, &o)?;
    Ok(fs.wcc(&o.st, o.raw()))
}

pub(super) fn listxattr(fs: &LocalFs, call: &Call<'_>, fh: &Fh) -> FsResult<Vec<Vec<u8>>> {
    let o = fs.resolve(call, fh)?;
    if !has_user_xattrs(&o) {
        return Ok(Vec::new());
    }
    fs.as_caller(call.cred)?;
    let mut buf = vec![0; XATTR_LIST_MAX];
    let n = sys::listxattr_fd(o.raw(), &mut buf)?;
    Ok(user_names(buf.get(..n).unwrap_or_default()))
}

pub(super) fn removexattr(fs: &LocalFs, call: &Call<'_>, fh: &Fh, name: &[u8]) -> FsResult<Wcc> {
    let full = full_name(name)?;
    let o = fs.resolve(call, fh)?;
    if !has_user_xattrs(&o) {
        return Err(errno(libc::EPERM));
    }
    fs.as_caller(call.cred)?;
    fs.changing(call, false)?;
    sys::removexattr_fd(o.raw(), &full)?;
    fs.sync_attrs(call, &o)?;
    Ok(fs.wcc(&o.st, o.raw()))
}
