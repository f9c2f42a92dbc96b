//! Scheduling policy of threads that mostly wait for stable storage (the
//! blocking pool's workers, the journal commit threads).
//!
//! Under SCHED_BATCH a thread's wakeup does not preempt the thread running
//! on its CPU (the kernel skips wakeup preemption for it): it runs when that
//! thread sleeps or its slice ends. A create whose reply waits for a journal
//! commit anyway, or a batch of replies after one, gains nothing by cutting
//! into an event loop's turn. On 2 vCPUs at 16 fs_mark streams this took
//! 0.14-0.46 context switches per file off, files/s unchanged within the
//! spread (docs/durability.md, "Sync threads under SCHED_BATCH").

use std::io;

use crate::sys;

/// Puts the calling thread under SCHED_BATCH.
pub fn batch_current_thread() -> io::Result<()> {
    sys::set_thread_sched_batch()
}
