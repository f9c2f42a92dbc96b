//! The pool crate's thin syscall module: safe wrappers over the few libc
//! calls it needs (CPU affinity, CPU count, current CPU, nice value,
//! scheduling policy); its only `unsafe`.

use std::io;

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
