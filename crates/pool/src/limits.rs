//! The pool's own bounds, each with what it bounds and why this value,
//! and the relations the code relies on, checked at compile time. The
//! configured bounds (threads, queue, waking) are `PoolConfig`'s.

/// Cells of one `StripedCounter` at most (memory: 128 B each): more CPUs
/// than this share cells, which stays correct (adds are atomic).
pub const MAX_CELLS: usize = 64;

/// Queue and idle-stack slots a pool allocates up front at most; beyond
/// them both grow on demand, so a large `queue_limit` or thread bound
/// costs no memory until it is used.
pub const PREALLOC_MAX: usize = 4096;

// A counter's cell count is CPUs rounded up to a power of two (the CPU
// number is masked, not divided), so the bound must be one itself or the
// rounding would pass it.
const _: () = assert!(MAX_CELLS.is_power_of_two());

/// Submitted jobs the `SpinWhen::Alone` policy looks back over: one bit
/// each in a `u64` kept under the queue's lock (no cache line of its
/// own), so about 5 ms of calls at one in flight, a fraction of a
/// millisecond at many.
pub const SPIN_HISTORY: u32 = u64::BITS;

/// Of the last `SPIN_HISTORY` submitted jobs, how many may have found a
/// job queued or a worker busy for the calls still to count as coming
/// one at a time. Not zero: at one call in flight a call can still
/// arrive while the worker that answered the last one is between sending
/// its reply and going idle. With many calls in flight most submits
/// overlap.
pub const SPIN_OVERLAPS_MAX: u32 = 4;

const _: () = assert!(SPIN_OVERLAPS_MAX < SPIN_HISTORY);
