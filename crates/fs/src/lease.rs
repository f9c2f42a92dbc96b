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
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Weak};

/// The real-time signal lease breaks are told by (SIGRTMIN+2: glibc
/// keeps the first two for itself; SIGRTMIN is its first free one).
pub fn signal() -> libc::c_int {
    libc::SIGRTMIN() + 2
}

/// Blocks [`signal`] in the calling thread and the threads it starts
/// from now on: call in main before any other thread exists.
pub fn block_signal() -> io::Result<()> {
    block(signal())
}

/// Whether [`signal`] is blocked in the calling thread (leases are taken
/// only then).
pub fn signal_blocked() -> bool {
    blocked(signal())
}

/// A lease the server holds on one file: dropping it lets the lease go
/// (F_UNLCK, then its descriptor is closed).
///
/// A write lease's descriptor is shared ([`Lease::shared`]): the backend
/// serves the server's own reads and writes of the file through copies
/// of it (dup(2) breaks no lease; a new open(2) would break ours). Those
/// copies may outlive the lease, which is why dropping it unlocks first:
/// a lease lives as long as any copy of its open file.
#[derive(Debug)]
pub struct Lease {
    fd: Arc<OwnedFd>,
    write: bool,
}

impl Lease {
    /// `fd`, on which the backend has just taken a lease (`write`: a
    /// write lease) told to [`LeaseBreaks::thread`].
    pub(crate) fn new(fd: OwnedFd, write: bool) -> Lease {
        Lease {
            fd: Arc::new(fd),
            write,
        }
    }

    /// The lease's descriptor while the lease lives, for the backend's
    /// own opens of the file (a write lease's).
    pub(crate) fn shared(&self) -> Weak<OwnedFd> {
        Arc::downgrade(&self.fd)
    }

    /// Its descriptor itself, to read the file's attributes through
    /// without holding what holds the lease (a copy keeps the file open,
    /// not the lease).
    pub fn descriptor(&self) -> Arc<OwnedFd> {
        self.fd.clone()
    }

    /// Its descriptor: the `si_fd` of its break's signal.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn is_write(&self) -> bool {
        self.write
    }
}

impl AsFd for Lease {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // SAFETY: fcntl with an int argument on the lease's descriptor,
        // open until self.fd drops. An error (no lease left: the kernel
        // took it back after its break time) leaves nothing to undo.
        unsafe { libc::fcntl(self.fd.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
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
            fd: signal_fd(signal())?,
            tid: gettid(),
        })
    }

    /// The thread told of breaks (for `Backend::lease`).
    pub fn thread(&self) -> libc::pid_t {
        self.tid
    }

    /// Waits up to `timeout_ms` for breaks: the descriptors of the leases
    /// broken (none on timeout).
    pub fn wait(&self, timeout_ms: i32) -> io::Result<Vec<RawFd>> {
        if !poll_in(self.fd.as_raw_fd(), timeout_ms)? {
            return Ok(Vec::new());
        }
        self.read()
    }

    /// The descriptors of the leases broken since the last read
    /// (without waiting: for a thread that polls [`AsFd`] itself).
    pub fn read(&self) -> io::Result<Vec<RawFd>> {
        read_signal_fds(self.fd.as_raw_fd(), MAX_BREAKS_READ)
    }
}

impl AsFd for LeaseBreaks {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

// The system calls of signals, thin (as local/sys.rs's).

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    match r {
        r if r < 0 => Err(io::Error::last_os_error()),
        r => Ok(r),
    }
}

/// A signal set holding only `sig`.
fn sigset_of(sig: libc::c_int) -> io::Result<libc::sigset_t> {
    // SAFETY: an all-zero sigset_t is valid storage; sigemptyset
    // initialises it.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is a valid sigset_t.
    cvt(unsafe { libc::sigemptyset(&mut set) })?;
    // SAFETY: as above; sigaddset checks the number.
    cvt(unsafe { libc::sigaddset(&mut set, sig) })?;
    Ok(set)
}

/// Blocks `sig` in the calling thread (threads it starts inherit that).
fn block(sig: libc::c_int) -> io::Result<()> {
    let set = sigset_of(sig)?;
    // SAFETY: valid set; a null old set is allowed.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    match r {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// Whether `sig` is blocked in the calling thread.
fn blocked(sig: libc::c_int) -> bool {
    // SAFETY: an all-zero sigset_t is valid storage for the old mask.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: a null new set only reads the mask into `old`.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut old) };
    // SAFETY: `old` was filled by pthread_sigmask.
    r == 0 && unsafe { libc::sigismember(&old, sig) } == 1
}

/// A non-blocking signalfd for `sig` (which must be blocked in every
/// thread, or the kernel may deliver it to one instead).
fn signal_fd(sig: libc::c_int) -> io::Result<OwnedFd> {
    let set = sigset_of(sig)?;
    // SAFETY: valid set; -1 asks for a new descriptor.
    let fd = cvt(unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) })?;
    // SAFETY: signalfd returned a new descriptor we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Waits up to `timeout_ms` for `fd` to be readable: whether it is.
fn poll_in(fd: RawFd, timeout_ms: libc::c_int) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    match n {
        n if n < 0 => {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => Ok(false),
                _ => Err(e),
            }
        }
        0 => Ok(false),
        _ => Ok(true),
    }
}

/// The `si_fd` of each signal waiting on signalfd `fd` (without
/// waiting), at most `max`.
fn read_signal_fds(fd: RawFd, max: usize) -> io::Result<Vec<RawFd>> {
    let mut out = Vec::new();
    while out.len() < max {
        // SAFETY: an all-zero signalfd_siginfo is valid storage.
        let mut si: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let want = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: si is writable storage of `want` bytes.
        let n = unsafe { libc::read(fd, (&mut si as *mut libc::signalfd_siginfo).cast(), want) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(out),
                _ => Err(e),
            };
        }
        if n as usize != want {
            return Ok(out);
        }
        out.push(si.ssi_fd);
    }
    Ok(out)
}

/// The calling thread's id.
fn gettid() -> libc::pid_t {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}
