//! CPU affinity helpers (Linux `sched_setaffinity`/`sched_getaffinity`),
//! used to pin a pool's workers, and the transport's event loops, to a CPU.

use std::io;

/// Pin the calling thread to CPU `cpu` (a kernel CPU number).
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    // CPU_SET on an index past the set's size is out of bounds in C.
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cpu {cpu} out of range"),
        ));
    }
    // SAFETY: cpu_set_t is plain bits; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` < CPU_SETSIZE (checked above), so CPU_SET stays in `set`.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 = the calling thread; `set` is a valid, initialized
    // cpu_set_t of the size we pass.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The CPUs the calling thread may run on, ascending.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain bits; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 = the calling thread; the kernel writes at most
    // size_of::<cpu_set_t>() bytes into `set`.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: every index tested is < CPU_SETSIZE, inside `set`.
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}
