//! The pool crate's thin syscall module: safe wrappers over the few libc
//! calls it needs (CPU affinity, CPU count, current CPU, nice value,
//! scheduling policy, the `lazy_wake` timer); its only `unsafe`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// Number of CPUs a `CpuSet` can name.
pub const CPU_SETSIZE: usize = libc::CPU_SETSIZE as usize;

/// A `cpu_set_t`.
pub struct CpuSet(libc::cpu_set_t);

impl CpuSet {
    /// The empty set.
    pub fn new() -> CpuSet {
        // SAFETY: cpu_set_t is plain bits; all-zero is the empty set.
        CpuSet(unsafe { std::mem::zeroed() })
    }

    /// Adds `cpu`. Panics if `cpu >= CPU_SETSIZE` (CPU_SET past the set's
    /// size is out of bounds in C).
    pub fn set(&mut self, cpu: usize) {
        assert!(cpu < CPU_SETSIZE, "cpu {cpu} out of range");
        // SAFETY: `cpu` < CPU_SETSIZE (asserted above), so CPU_SET stays in
        // the set.
        unsafe { libc::CPU_SET(cpu, &mut self.0) };
    }

    /// Whether `cpu` is in the set; false past CPU_SETSIZE.
    pub fn is_set(&self, cpu: usize) -> bool {
        // SAFETY: `cpu` < CPU_SETSIZE (checked first), inside the set.
        cpu < CPU_SETSIZE && unsafe { libc::CPU_ISSET(cpu, &self.0) }
    }
}

/// Restricts the calling thread to the CPUs in `set`.
pub fn sched_setaffinity(set: &CpuSet) -> io::Result<()> {
    // SAFETY: pid 0 = the calling thread; `set` is a valid, initialized
    // cpu_set_t of the size we pass.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set.0) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets the calling thread's nice value (on Linux the nice value is per
/// thread, and `who = 0` names the caller).
pub fn set_thread_nice(nice: i32) -> io::Result<()> {
    // SAFETY: no pointers; acts on the calling thread only.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Puts the calling thread under SCHED_BATCH (static priority 0; the nice
/// value stays). No privilege is needed to move from SCHED_OTHER.
pub fn set_thread_sched_batch() -> io::Result<()> {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 = the calling thread (Linux applies the policy per
    // thread); `p` is a valid sched_param the kernel only reads.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &p) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A non-blocking CLOCK_MONOTONIC timerfd.
pub fn timerfd() -> io::Result<OwnedFd> {
    // SAFETY: no pointers; a new descriptor or -1.
    let fd = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Arms `fd` to expire once, `after` from now; `None` disarms it.
pub fn timerfd_set(fd: &OwnedFd, after: Option<Duration>) -> io::Result<()> {
    let d = after.unwrap_or(Duration::ZERO);
    let mut v = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: d.subsec_nanos() as libc::c_long,
        },
    };
    if after.is_some() && d.is_zero() {
        v.it_value.tv_nsec = 1; // zero would disarm
    }
    // SAFETY: `fd` is a live timerfd; `v` is a valid itimerspec the kernel
    // reads; the old value is not asked for (null).
    let r = unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &v, std::ptr::null_mut()) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Consumes `fd`'s expirations (so it stops polling readable); EAGAIN
/// (none) is fine.
pub fn timerfd_clear(fd: &OwnedFd) {
    let mut n = [0u8; 8];
    // SAFETY: reads at most 8 bytes into `n`, which is 8 bytes long.
    let _ = unsafe { libc::read(fd.as_raw_fd(), n.as_mut_ptr().cast(), n.len()) };
}

/// The CPUs the calling thread may run on.
pub fn sched_getaffinity() -> io::Result<CpuSet> {
    let mut set = CpuSet::new();
    // SAFETY: pid 0 = the calling thread; the kernel writes at most
    // size_of::<cpu_set_t>() bytes into `set`.
    let r =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set.0) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(set)
}

/// sysconf(_SC_NPROCESSORS_CONF); None when it gives no positive count.
pub fn nprocessors_conf() -> Option<usize> {
    // SAFETY: sysconf has no memory-safety preconditions; -1 is handled.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    if n > 0 {
        Some(n as usize)
    } else {
        None
    }
}

/// The CPU the calling thread runs on (glibc's sched_getcpu, a vDSO call
/// or rseq read, no syscall); None on failure.
#[inline]
pub fn sched_getcpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes no arguments and only reads the calling
    // thread's CPU number; it returns -1 on failure, handled below.
    let cpu = unsafe { libc::sched_getcpu() };
    if cpu < 0 {
        None
    } else {
        Some(cpu as usize)
    }
}
