//! File data: READ, WRITE, COMMIT.

use std::os::fd::{AsRawFd, OwnedFd};

use super::perm::{access_bits, ACCESS3_EXECUTE};
use super::{errno, io_errno, sys, LocalFs, Obj, MAX_READ};
use crate::{Attr, Cred, Fh, FsResult, Stable, Wcc};

impl LocalFs {
    /// Opens a regular file's data as the caller (READ, WRITE): EISDIR for a
    /// directory, EINVAL for anything else that is not a regular file.
    /// Returns the resolved object (its attributes before the call, for
    /// wcc) and the open file.
    pub(super) fn open_regular(
        &self,
        cred: &Cred,
        fh: &Fh,
        flags: libc::c_int,
    ) -> FsResult<(Obj<'_>, OwnedFd)> {
        self.srv()?;
        let o = self.resolve(fh)?;
        if o.st.is_dir() {
            return Err(errno(libc::EISDIR));
        }
        if !o.st.is_reg() {
            return Err(errno(libc::EINVAL));
        }
        self.usr(cred)?;
        let f = self.open_data(cred, &o, flags)?;
        Ok((o, f))
    }

    /// Opens a regular file's data as the caller; if that is refused and the
    /// caller owns the file (or, for reading, may execute it), opens it with
    /// the server's credentials, as knfsd's owner override does (a client
    /// may write a file it created read-only: permissions are checked at
    /// open time on the client).
    pub(super) fn open_data(
        &self,
        cred: &Cred,
        o: &Obj<'_>,
        flags: libc::c_int,
    ) -> FsResult<OwnedFd> {
        match sys::reopen(o.raw(), flags) {
            Ok(f) => Ok(f),
            Err(e) if io_errno(&e) == libc::EACCES && self.opts.act_as_caller => {
                let reading = flags & libc::O_ACCMODE == libc::O_RDONLY;
                let may_exec = access_bits(&o.st, cred, ACCESS3_EXECUTE) != 0;
                if o.st.uid != cred.uid && !(reading && may_exec) {
                    return Err(e.into());
                }
                self.srv()?;
                let r = sys::reopen(o.raw(), flags);
                self.usr(cred)?;
                Ok(r?)
            }
            Err(e) => Err(e.into()),
        }
    }
}

pub(super) fn read(
    fs: &LocalFs,
    cred: &Cred,
    fh: &Fh,
    offset: u64,
    count: u32,
    buf: &mut Vec<u8>,
) -> FsResult<(bool, Attr)> {
    buf.clear();
    // `resolve` (in open_regular) has just stat'ed the object: no second
    // statx before the pread.
    let (o, f) = fs.open_regular(cred, fh, libc::O_RDONLY)?;
    // RFC 1813 §3.3.6: a READ at or past end of file is no data and eof,
    // whatever the offset (pread would say EINVAL above i64::MAX).
    if offset >= o.st.size {
        return Ok((true, fs.attr(&o.st)));
    }
    // The kernel refuses offset + count beyond i64::MAX (EINVAL).
    let room = (i64::MAX as u64).saturating_sub(offset);
    let want = u64::from(count.min(MAX_READ)).min(room) as usize;
    let n = sys::pread_full(f.as_raw_fd(), offset, want, buf)?;
    let st = sys::fstat(f.as_raw_fd())?;
    let eof = offset.saturating_add(n as u64) >= st.size;
    Ok((eof, fs.attr(&st)))
}

pub(super) fn write(
    fs: &LocalFs,
    cred: &Cred,
    fh: &Fh,
    offset: u64,
    data: &[u8],
    stable: Stable,
) -> FsResult<(u32, Stable, Wcc)> {
    if u32::try_from(data.len()).is_err() {
        return Err(errno(libc::EINVAL));
    }
    let (o, f) = fs.open_regular(cred, fh, libc::O_WRONLY)?;
    let n = sys::pwrite_full(f.as_raw_fd(), offset, data)?;
    let fd = f.as_raw_fd();
    // SAFETY: plain fdatasync/fsync on an owned fd.
    match stable {
        Stable::Unstable => {}
        Stable::DataSync => {
            sys::cvt(unsafe { libc::fdatasync(fd) })?;
        }
        Stable::FileSync => {
            sys::cvt(unsafe { libc::fsync(fd) })?;
        }
    }
    Ok((n as u32, stable, fs.wcc(&o.st, fd)))
}

pub(super) fn commit(
    fs: &LocalFs,
    _cred: &Cred,
    fh: &Fh,
    _offset: u64,
    _count: u32,
) -> FsResult<Wcc> {
    fs.srv()?;
    let o = fs.resolve(fh)?;
    if !(o.st.is_reg() || o.st.is_dir()) {
        return Err(errno(libc::EINVAL));
    }
    // The whole file is flushed (allowed by RFC 1813 §3.3.21); as the
    // server, since flushing exposes nothing.
    let f = sys::reopen(o.raw(), libc::O_RDONLY | libc::O_NONBLOCK)?;
    // SAFETY: plain fsync on an owned fd.
    sys::cvt(unsafe { libc::fsync(f.as_raw_fd()) })?;
    Ok(fs.wcc(&o.st, f.as_raw_fd()))
}
