//! Scheduling policy of threads that mostly wait for stable storage (the
//! blocking pool's workers, the journal commit threads).
//!
//! Under SCHED_BATCH a thread's wakeup does not preempt the thread running
//! on its CPU (the kernel skips wakeup preemption for it); it runs when that
//! thread sleeps or its slice ends. A thread that has just handed a reply to
//! a journal commit, or answers a batch after one, gains nothing by cutting
//! into an event loop that is answering warm calls: on 2 vCPUs at 16
//! fs_mark streams this took 0.4-0.9 context switches per file off
//! (docs/durability.md, "Sync threads under SCHED_BATCH").

use std::io;

use crate::sys;

/// Puts the calling thread under SCHED_BATCH.
pub fn batch_current_thread() -> io::Result<()> {
    sys::set_thread_sched_batch()
}
