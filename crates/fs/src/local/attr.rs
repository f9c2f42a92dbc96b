//! Attributes: GETATTR, SETATTR, ACCESS, READLINK, FSSTAT, FSINFO, PATHCONF.

use std::os::fd::AsRawFd;

use super::files::Access;
use super::perm::access_bits;
use super::{errno, sys, LocalFs, Obj, NAME_MAX};
use crate::{
    Attr, Call, Fh, FsError, FsInfo, FsResult, FsStat, PathConf, SetAttr, SetTime, Time, Wcc,
};

impl LocalFs {
    /// Applies a sattr3 to an object (caller credentials).
    pub(super) fn apply_set(&self, call: &Call<'_>, o: &Obj<'_>, set: &SetAttr) -> FsResult<()> {
        let fd = o.raw();
        if set.uid.is_some() || set.gid.is_some() {
            sys::fchownat_empty(fd, set.uid, set.gid)?;
        }
        // knfsd ignores mode changes on symlinks (Linux has no lchmod).
        if let Some(m) = set.mode {
            if !o.st.is_lnk() {
                sys::fchmod_path(fd, m & 0o7777)?;
            }
        }
        if let Some(size) = set.size {
            if o.st.is_dir() {
                return Err(errno(libc::EISDIR));
            }
            if !o.st.is_reg() {
                return Err(errno(libc::EINVAL));
            }
            let len = i64::try_from(size).map_err(|_| errno(libc::EFBIG))?;
            // As a WRITE would: the cached writer, the caller's permission
            // (owner override included); leaves the thread as the caller.
            let f = self.open_file(call, o, Access::Write)?;
            self.may_use_data(call.cred, o, Access::Write)?;
            sys::ftruncate(f.fd.as_raw_fd(), len)?;
        }
        if set.atime != SetTime::DontChange || set.mtime != SetTime::DontChange {
            sys::set_times(fd, &set.atime, &set.mtime)?;
        }
        Ok(())
    }
}

pub(super) fn getattr(fs: &LocalFs, call: &Call<'_>, fh: &Fh) -> FsResult<Attr> {
    let o = fs.resolve(call, fh)?;
    Ok(fs.attr(&o.st))
}

pub(super) fn setattr(
    fs: &LocalFs,
    call: &Call<'_>,
    fh: &Fh,
    set: &SetAttr,
    guard: Option<Time>,
) -> FsResult<Wcc> {
    let o = fs.resolve(call, fh)?;
    // RFC 1813 §3.3.2: the guard is checked against the current ctime.
    if guard.is_some_and(|g| g != o.st.ctime) {
        return Err(FsError::NotSync);
    }
    fs.as_caller(call.cred)?;
    fs.changing(call, set.size.is_some())?;
    fs.apply_set(call, &o, set)?;
    fs.sync_attrs(call, &o)?;
    Ok(fs.wcc(&o.st, o.raw()))
}

pub(super) fn access(fs: &LocalFs, call: &Call<'_>, fh: &Fh, want: u32) -> FsResult<(u32, Attr)> {
    let o = fs.resolve(call, fh)?;
    let bits = if fs.opts.act_as_caller {
        fs.kernel_access(call.cred, &o, want)?
    } else {
        // Every call is the server user's: the bits say what the caller
        // would have, as the client's own cache expects.
        access_bits(&o.st, call.cred, want)
    };
    Ok((bits, fs.attr(&o.st)))
}

pub(super) fn readlink(fs: &LocalFs, call: &Call<'_>, fh: &Fh) -> FsResult<(Vec<u8>, Attr)> {
    let o = fs.resolve(call, fh)?;
    if !o.st.is_lnk() {
        return Err(errno(libc::EINVAL));
    }
    let target = sys::readlink_fd(o.raw())?;
    Ok((target, fs.attr(&o.st)))
}

pub(super) fn fsstat(fs: &LocalFs, call: &Call<'_>, fh: &Fh) -> FsResult<(FsStat, Attr)> {
    let o = fs.resolve(call, fh)?;
    let v = sys::fstatvfs(o.raw())?;
    let fr = v.f_frsize;
    Ok((
        FsStat {
            tbytes: v.f_blocks.saturating_mul(fr),
            fbytes: v.f_bfree.saturating_mul(fr),
            abytes: v.f_bavail.saturating_mul(fr),
            tfiles: v.f_files,
            ffiles: v.f_ffree,
            afiles: v.f_favail,
            invarsec: 0,
        },
        fs.attr(&o.st),
    ))
}

/// The VFS's limit on a file's size.
const VFS_MAX_FILE_SIZE: u64 = i64::MAX as u64;

/// The largest file the filesystem of directory `root` takes (its
/// s_maxbytes, which knfsd reports as maxfilesize: 16 TiB less a block on
/// ext4 with 4 KiB blocks), found once by bisection with ftruncate(2) on an
/// unnamed file there (O_TMPFILE, gone on close). A client told a larger
/// one accepts writes past the limit into its cache that the server later
/// fails (EFBIG), as xfstests' generic/285 found. The VFS's limit where no
/// such file can be made (a read-only filesystem, no O_TMPFILE) or a
/// file-size rlimit would make the probe itself fail.
pub(super) fn probe_max_file_size(root: std::os::fd::RawFd) -> u64 {
    if sys::fsize_limited() {
        return VFS_MAX_FILE_SIZE;
    }
    let Ok(f) = sys::openat(
        root,
        c".",
        libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC,
        0o600,
    ) else {
        return VFS_MAX_FILE_SIZE;
    };
    let fits = |n: u64| sys::ftruncate(f.as_raw_fd(), n as i64);
    match fits(VFS_MAX_FILE_SIZE) {
        Ok(()) => return VFS_MAX_FILE_SIZE,
        Err(e) if e.raw_os_error() != Some(libc::EFBIG) => return VFS_MAX_FILE_SIZE,
        Err(_) => {}
    }
    // fits(lo), not fits(hi): 63 steps at most.
    let (mut lo, mut hi) = (0u64, VFS_MAX_FILE_SIZE);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match fits(mid) {
            Ok(()) => lo = mid,
            Err(_) => hi = mid,
        }
    }
    lo
}

pub(super) fn fsinfo(fs: &LocalFs, call: &Call<'_>, fh: &Fh) -> FsResult<(FsInfo, Attr)> {
    let o = fs.resolve(call, fh)?;
    Ok((
        FsInfo {
            maxfilesize: fs.max_file_size,
            time_delta: Time { sec: 0, nsec: 1 },
            link: true,
            symlink: true,
            homogeneous: true,
            cansettime: true,
        },
        fs.attr(&o.st),
    ))
}

pub(super) fn pathconf(fs: &LocalFs, call: &Call<'_>, fh: &Fh) -> FsResult<(PathConf, Attr)> {
    let o = fs.resolve(call, fh)?;
    let v = sys::fstatvfs(o.raw())?;
    Ok((
        PathConf {
            linkmax: sys::link_max(o.raw()).unwrap_or(u32::MAX),
            name_max: u32::try_from(v.f_namemax).unwrap_or(NAME_MAX as u32),
            no_trunc: true,
            chown_restricted: true,
            case_insensitive: false,
            case_preserving: true,
        },
        fs.attr(&o.st),
    ))
}
