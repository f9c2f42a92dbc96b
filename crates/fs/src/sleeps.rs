//! The calling thread's sleeps, as an event loop's speculation reads them
//! (`inline`) and the local backend's steps are watched by them: a thin
//! syscall module.

/// Times this thread has given up its CPU to wait (its voluntary context
/// switches): a step that raised it slept, for example on a disk read.
pub fn thread_sleeps() -> u64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` is a valid, writable rusage; RUSAGE_THREAD only reads
    // the calling thread's counters.
    let r = unsafe { libc::getrusage(libc::RUSAGE_THREAD, ru.as_mut_ptr()) };
    if r != 0 {
        return 0;
    }
    // SAFETY: getrusage succeeded and filled the struct (it was zeroed
    // before in any case).
    let ru = unsafe { ru.assume_init() };
    ru.ru_nvcsw as u64
}
