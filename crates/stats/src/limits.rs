//! The counters' bounds, each with what it bounds and why this value, and
//! the relations the code relies on, checked at compile time.

/// Shards (per-core copies of every counter) at most; memory: about
/// 25 KiB per procedure per shard. More CPUs than this share shards,
/// which stays correct (adds are atomic).
pub const MAX_SHARDS: usize = 16;

/// Counters per `Line`: one 128-byte line pair (adjacent-line prefetch
/// makes 128 the safe unit against false sharing) of `u64` cells.
pub const SLOTS_PER_LINE: usize = 16;

// The shard of a call is its CPU masked by the shard count, which is the
// CPU count rounded up to a power of two: the bound must be one itself,
// or the rounding would pass it.
const _: () = assert!(MAX_SHARDS.is_power_of_two());
// A line is exactly its 128-byte alignment: no padding, no line shared.
const _: () = assert!(SLOTS_PER_LINE * std::mem::size_of::<u64>() == 128);
