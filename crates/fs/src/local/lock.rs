//! NLM byte-range locks on the local filesystem: each owner gets its own
//! open file description of the file and locks through it with fcntl OFD
//! locks (F_OFD_SETLK/GETLK), so owners are the kernel's to keep apart,
//! local programs' POSIX and OFD locks conflict with NFS clients' as they
//! should, and dropping the description drops its locks.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use crate::lease::Lease;
use crate::lock::{Conflict, LockFile, LockKind, LockOpen, LockRange};
use crate::{Call, Fh, FsResult};

use super::files::Access;
use super::sys::{self, OfdCmd};
use super::{errno, LocalFs};

#[derive(Debug)]
struct OfdFile {
    fd: OwnedFd,
}

fn off(v: u64) -> FsResult<i64> {
    i64::try_from(v).map_err(|_| errno(libc::EFBIG))
}

fn kind_type(k: LockKind) -> libc::c_int {
    match k {
        LockKind::Shared => libc::F_RDLCK,
        LockKind::Exclusive => libc::F_WRLCK,
    }
}

impl LockFile for OfdFile {
    fn lock(&self, kind: LockKind, r: LockRange) -> FsResult<bool> {
        let fd = self.fd.as_raw_fd();
        match sys::ofd_lock(fd, OfdCmd::Set, kind_type(kind), off(r.start)?, off(r.len)?) {
            Ok(_) => Ok(true),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    fn unlock(&self, r: LockRange) -> FsResult<()> {
        let fd = self.fd.as_raw_fd();
        sys::ofd_lock(fd, OfdCmd::Set, libc::F_UNLCK, off(r.start)?, off(r.len)?)?;
        Ok(())
    }

    fn test(&self, kind: LockKind, r: LockRange) -> FsResult<Option<Conflict>> {
        let fd = self.fd.as_raw_fd();
        let (t, start, len) =
            sys::ofd_lock(fd, OfdCmd::Get, kind_type(kind), off(r.start)?, off(r.len)?)?;
        Ok(match t {
            libc::F_RDLCK | libc::F_WRLCK => Some(Conflict {
                kind: if t == libc::F_WRLCK {
                    LockKind::Exclusive
                } else {
                    LockKind::Shared
                },
                // The kernel never reports negative values for locks set
                // with the non-negative ranges we allow.
                range: LockRange {
                    start: u64::try_from(start).unwrap_or(0),
                    len: u64::try_from(len).unwrap_or(0),
                },
            }),
            _ => None,
        })
    }
}

pub(super) fn open_for_locks(
    fs: &LocalFs,
    call: &Call<'_>,
    fh: &Fh,
    how: LockOpen,
) -> FsResult<Arc<dyn LockFile>> {
    let o = fs.resolve(call, fh)?;
    if o.st.is_dir() {
        return Err(errno(libc::EISDIR));
    }
    if !o.st.is_reg() {
        return Err(errno(libc::EINVAL));
    }
    // knfsd's NFSD_MAY_LOCK: read permission or ownership.
    fs.may_use_data(call.cred, &o, Access::Read)?;
    // Read-write so an exclusive lock works (fcntl wants a writable file
    // for F_WRLCK); read-only where it cannot be (a read-only mount, an
    // immutable file, a running program: ETXTBSY), where only shared
    // locks can then be taken; read-only when only shared locks are
    // asked for: an open for writing would break a read lease, and so
    // recall a read delegation from its own holder's LOCK (the Linux
    // client then waits for the lock before it returns the delegation:
    // stuck until revocation).
    if how.holder {
        if let Some(fd) = fs.leased_fd(o.st.key()) {
            return Ok(Arc::new(OfdFile { fd: fd? }));
        }
    }
    let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
    if !how.write {
        return Ok(Arc::new(OfdFile {
            fd: sys::reopen(o.raw(), libc::O_RDONLY | flags)?,
        }));
    }
    let fd = match sys::reopen(o.raw(), libc::O_RDWR | flags) {
        Ok(fd) => fd,
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EROFS | libc::EACCES | libc::EPERM | libc::ETXTBSY)
            ) =>
        {
            sys::reopen(o.raw(), libc::O_RDONLY | flags)?
        }
        Err(e) => return Err(e.into()),
    };
    Ok(Arc::new(OfdFile { fd }))
}

/// A lease for an NFSv4 delegation on `fh` (`crate::lease`), on a
/// descriptor of its own: the server's other descriptors of the file
/// (its open-file cache's writers; for a write lease, its readers too)
/// make it fail with EAGAIN, as anyone else's do. A write lease's
/// descriptor is opened read-write and lent to the open-file cache
/// (`LocalFs::leased`): the delegation holder's own READs and WRITEs go
/// through copies of it, which break no lease.
pub(super) fn lease(
    fs: &LocalFs,
    call: &Call<'_>,
    fh: &Fh,
    write: bool,
    to: libc::pid_t,
) -> FsResult<Lease> {
    let o = fs.resolve(call, fh)?;
    if !o.st.is_reg() {
        return Err(errno(libc::EINVAL));
    }
    fs.drop_lent_copies(o.st.key());
    let access = match write {
        true => {
            // The open-file cache's own descriptors of the file (a reader
            // a sync export's create left, an idle writer) would refuse
            // the lease: they go (a dirty writer's flush is owed, as at
            // any eviction); the holder's I/O then copies the lease's.
            fs.files.forget(o.st.key());
            libc::O_RDWR
        }
        false => libc::O_RDONLY,
    };
    let fd = sys::reopen(o.raw(), access | libc::O_CLOEXEC | libc::O_NONBLOCK)?;
    let lease = take_lease(fd, write, to)?;
    if write {
        fs.lend_lease(o.st.key(), lease.shared());
    }
    Ok(lease)
}

/// Takes a lease (`write`: F_WRLCK, else F_RDLCK) on `fd`, a read-only
/// descriptor of a regular file, its break told by `lease::signal` to
/// thread `to`. EAGAIN: the file is open in a way that conflicts (for
/// writing; for a write lease, at all).
fn take_lease(fd: OwnedFd, write: bool, to: libc::pid_t) -> std::io::Result<Lease> {
    let raw = fd.as_raw_fd();
    sys::set_sig(raw, crate::lease::signal())?;
    let kind = match write {
        true => libc::F_WRLCK,
        false => libc::F_RDLCK,
    };
    sys::set_lease(raw, kind)?;
    // F_SETLEASE made the process the owner; the reader's thread only,
    // so no other thread (which might not block the signal) gets it.
    let lease = Lease::new(fd, write);
    sys::set_owner_thread(raw, to)?;
    Ok(lease)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::{block_signal, signal_blocked, LeaseBreaks};
    use std::io;
    use std::os::fd::FromRawFd;

    fn open(path: &std::path::Path, flags: libc::c_int) -> io::Result<OwnedFd> {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string; open returns a new descriptor or -1.
        let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) };
        match fd {
            -1 => Err(io::Error::last_os_error()),
            // SAFETY: a new descriptor we own.
            fd => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
        }
    }

    /// A read lease is refused while the file is open for writing, taken
    /// otherwise, and a non-blocking open for writing then breaks it
    /// (EWOULDBLOCK) with the signal naming the lease's descriptor.
    #[test]
    fn a_read_lease_breaks_on_an_open_for_write() {
        block_signal().unwrap();
        assert!(signal_blocked());
        let breaks = LeaseBreaks::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"x").unwrap();
        let w = open(&p, libc::O_WRONLY).unwrap();
        let e = take_lease(open(&p, libc::O_RDONLY).unwrap(), false, breaks.thread()).unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(libc::EAGAIN),
            "open for write: no lease"
        );
        drop(w);
        let lease = take_lease(open(&p, libc::O_RDONLY).unwrap(), false, breaks.thread()).unwrap();
        // A reader does not break a read lease.
        drop(open(&p, libc::O_RDONLY).unwrap());
        assert!(breaks.wait(0).unwrap().is_empty());
        let e = open(&p, libc::O_WRONLY | libc::O_NONBLOCK).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EWOULDBLOCK));
        assert_eq!(breaks.wait(5000).unwrap(), vec![lease.raw_fd()]);
        drop(lease);
        // Released: the writer gets through.
        open(&p, libc::O_WRONLY | libc::O_NONBLOCK).unwrap();
    }

    /// A write lease on a read-write descriptor: refused while anyone
    /// else has the file open, even for reading; copies of its
    /// descriptor (the server's own I/O for the holder) break nothing; a
    /// new open for reading does; dropped while a copy lives, it is gone
    /// (unlocked, not kept by the copy).
    #[test]
    fn a_write_lease_lends_its_descriptor_and_breaks_on_any_open() {
        block_signal().unwrap();
        let breaks = LeaseBreaks::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"x").unwrap();
        let r = open(&p, libc::O_RDONLY).unwrap();
        let e = take_lease(open(&p, libc::O_RDWR).unwrap(), true, breaks.thread()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EAGAIN), "open for reading");
        drop(r);
        let lease = take_lease(open(&p, libc::O_RDWR).unwrap(), true, breaks.thread()).unwrap();
        assert!(lease.is_write());
        let copy = lease.shared().upgrade().unwrap().try_clone().unwrap();
        // SAFETY: a valid buffer of 1 byte on a descriptor we own.
        let n = unsafe { libc::pwrite(copy.as_raw_fd(), b"y".as_ptr().cast(), 1, 0) };
        assert_eq!(n, 1);
        assert!(breaks.wait(0).unwrap().is_empty(), "a copy breaks nothing");
        let e = open(&p, libc::O_RDONLY | libc::O_NONBLOCK).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EWOULDBLOCK));
        assert_eq!(breaks.wait(5000).unwrap(), vec![lease.raw_fd()]);
        drop(lease);
        // Gone though the copy lives.
        open(&p, libc::O_RDONLY | libc::O_NONBLOCK).unwrap();
        drop(copy);
        assert_eq!(std::fs::read(&p).unwrap(), b"y");
    }
}
