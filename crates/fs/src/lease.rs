//! Linux file leases (fcntl F_SETLEASE, F_SETSIG) for NFSv4 delegations:
//! while the server holds a lease on a file, a program on the server's
//! host that opens it for writing (or truncates it; for a write lease,
//! opens it at all) is held in the kernel until the server lets the
//! lease go or `/proc/sys/fs/lease-break-time` passes, and the server is
//! told by the real-time signal [`signal`] carrying the lease's
//! descriptor. Renames, unlinks, links and attribute changes do not
//! break an F_SETLEASE lease (only the kernel's own delegations, knfsd's
//! and F_SETDELEG's, are broken by those).
//!
//! The signal must be blocked in every thread ([`block_signal`] in main
//! before any thread starts) and read by one ([`LeaseBreaks`]): an
//! unblocked real-time signal would end the process.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::local::sys;

/// The real-time signal lease breaks are told by (SIGRTMIN+2: glibc
/// keeps the first two for itself; SIGRTMIN is its first free one).
pub fn signal() -> libc::c_int {
    libc::SIGRTMIN() + 2
}

/// Blocks [`signal`] in the calling thread and the threads it starts
/// from now on: call in main before any other thread exists.
pub fn block_signal() -> io::Result<()> {
    sys::block_signal(signal())
}

/// Whether [`signal`] is blocked in the calling thread (leases are taken
/// only then).
pub fn signal_blocked() -> bool {
    sys::signal_blocked(signal())
}

/// A lease the server holds on one file: dropping it closes its
/// descriptor, which lets the lease go.
#[derive(Debug)]
pub struct Lease {
    fd: OwnedFd,
    write: bool,
}

impl Lease {
    /// Takes a lease (`write`: F_WRLCK, else F_RDLCK) on `fd`, a
    /// read-only descriptor of a regular file of the caller's own,
    /// breaks told by [`signal`] to thread `to` ([`LeaseBreaks::thread`]).
    /// EAGAIN: the file is open in a way that conflicts (for writing; for
    /// a write lease, at all).
    pub fn take(fd: OwnedFd, write: bool, to: libc::pid_t) -> io::Result<Lease> {
        let raw = fd.as_raw_fd();
        sys::set_sig(raw, signal())?;
        let kind = match write {
            true => libc::F_WRLCK,
            false => libc::F_RDLCK,
        };
        sys::set_lease(raw, kind)?;
        // F_SETLEASE made the process the owner; the reader's thread
        // only, so no other thread (which might not block the signal)
        // ever gets it.
        let lease = Lease { fd, write };
        sys::set_owner_thread(raw, to)?;
        Ok(lease)
    }

    /// Its descriptor: the `si_fd` of its break's signal.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn is_write(&self) -> bool {
        self.write
    }
}

/// The lease breaks of this process, read by one thread (a signalfd of
/// [`signal`]).
#[derive(Debug)]
pub struct LeaseBreaks {
    fd: OwnedFd,
    tid: libc::pid_t,
}

/// Most signals read in one [`LeaseBreaks::wait`].
const MAX_BREAKS_READ: usize = 256;

impl LeaseBreaks {
    /// The breaks told to the calling thread, which alone must
    /// [`wait`](Self::wait) (a signalfd reads its own thread's signals).
    pub fn new() -> io::Result<LeaseBreaks> {
        Ok(LeaseBreaks {
            fd: sys::signalfd(signal())?,
            tid: sys::gettid(),
        })
    }

    /// The thread told of breaks, for [`Lease::take`].
    pub fn thread(&self) -> libc::pid_t {
        self.tid
    }

    /// Waits up to `timeout_ms` for breaks: the descriptors of the leases
    /// broken (none on timeout).
    pub fn wait(&self, timeout_ms: i32) -> io::Result<Vec<RawFd>> {
        if !sys::poll_in(self.fd.as_raw_fd(), timeout_ms)? {
            return Ok(Vec::new());
        }
        sys::read_signal_fds(self.fd.as_raw_fd(), MAX_BREAKS_READ)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let e = Lease::take(open(&p, libc::O_RDONLY).unwrap(), false, breaks.thread()).unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(libc::EAGAIN),
            "open for write: no lease"
        );
        drop(w);
        let lease = Lease::take(open(&p, libc::O_RDONLY).unwrap(), false, breaks.thread()).unwrap();
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
}
