//! CPU affinity helpers (Linux `sched_setaffinity`/`sched_getaffinity`),
//! used to pin a pool's workers, and the transport's event loops, to a CPU.

use std::io;

use crate::sys::{self, CpuSet, CPU_SETSIZE};

/// Pin the calling thread to CPU `cpu` (a kernel CPU number).
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= CPU_SETSIZE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cpu {cpu} out of range"),
        ));
    }
    let mut set = CpuSet::new();
    set.set(cpu);
    sys::sched_setaffinity(&set)
}

/// The CPUs the calling thread may run on, ascending.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let set = sys::sched_getaffinity()?;
    Ok((0..CPU_SETSIZE).filter(|&c| set.is_set(c)).collect())
}
