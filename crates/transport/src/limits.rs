//! The transport's internal bounds on the request path, each with why it
//! is what it is, and how they relate (checked at compile time). The bounds
//! an operator sets are `TransportConfig`'s fields.

use std::time::Duration;

/// Bytes per read syscall (one per-loop buffer, reused).
pub const READ_CHUNK: usize = 64 << 10;
/// Reads per connection per turn, so one flooding client cannot starve the
/// others of its loop (16 × 64 KiB = 1 MiB).
pub const READ_BUDGET: usize = 16;
/// Fragment bodies still owing this much are read straight into the
/// record (one copy from the socket, not two); smaller ones go through the
/// loop's buffer.
pub const DIRECT_MIN: usize = 16 << 10;
/// Over the buffered-bytes budget, a connection with nothing outstanding
/// may still make a call whose reply is at most this large.
pub const FREE_REPLY: usize = 64 << 10;
/// Reply bytes a loop gathers for one connection before sending them.
pub const BATCH_BYTES: usize = 256 << 10;
/// A reply this large (a READ's data) is not held by its worker: it leaves
/// at once, with whatever is held.
pub const MAX_HELD_REPLY: usize = 16 << 10;
/// A call this large (a WRITE of 16 KiB or more) is not short: replies are
/// not held while it runs, nor is its own (a 1 MiB WRITE's pwrite takes
/// hundreds of microseconds, and a client with a few such calls in flight
/// would stall waiting for replies held behind them).
pub const MAX_SHORT_RECORD: usize = 16 << 10;
/// The default `max_record`: a 1 MiB WRITE and its headers.
pub const DEFAULT_MAX_RECORD: usize = (1 << 20) + (64 << 10);
/// The default `max_conn_output`.
pub const DEFAULT_MAX_CONN_OUTPUT: usize = 4 << 20;
/// Largest buffer a thread keeps for reuse (`recycle.rs`): a 4 KiB reply
/// and its record mark, so small replies and records are kept, a large
/// READ's reply or WRITE's record goes back to the allocator.
pub const MAX_RECYCLED_CAPACITY: usize = (4 << 10) + 4;
/// Smallest buffer kept: a reply holds an RPC reply header (24 bytes) and
/// its record mark at least; anything smaller (a READ's XDR pad) is not
/// worth a place.
pub const MIN_RECYCLED_CAPACITY: usize = 28;
/// Most reply buffers a pool worker keeps (at most `recycled_buffers`): it
/// runs one call at a time, taking one reply buffer and giving one back,
/// so a few suffice; with up to `max_threads` workers, 256 each could hold
/// a megabyte apiece after a burst of queued replies flushed there.
pub const WORKER_RECYCLED_REPLIES: usize = 8;
/// The default `recycled_buffers`: replies a thread keeps, and records
/// (at most 1 MiB of each with `MAX_RECYCLED_CAPACITY`): more than one
/// connection's `max_inflight_per_conn` (64) calls at once.
pub const DEFAULT_RECYCLED_BUFFERS: usize = 256;
/// Retry interval while the pool queue is full.
pub const STALL_RETRY: Duration = Duration::from_millis(1);
/// Pause after an accept error such as EMFILE (the listener stays readable
/// but edge-triggered, so we must come back by timer).
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// The check's period (an eighth of `hog_after`, within these): often
/// enough that a share follows the clients coming and going and that
/// connections waiting for their share are retried soon after it allows
/// (they are retried after each check), rarely enough to cost little (one
/// pass over the clients, and one retry of each waiting connection).
pub const CHECK_EVERY_MAX: Duration = Duration::from_millis(25);
pub const CHECK_EVERY_MIN: Duration = Duration::from_millis(5);
/// A client that held bytes this lately still counts among the clients
/// sharing the budget (at least; twice `hog_after` if longer), so that the
/// share a hog is held to does not grow back between another client's
/// calls.
pub const ACTIVE_FOR_MIN: Duration = Duration::from_secs(1);
/// How often an idle UDP thread looks at the stop flag, should the
/// socket's shutdown not wake it (it does on Linux: a receive on a socket
/// shut for reading returns at once). Long, so an idle server does not
/// wake for it.
pub const UDP_POLL: Duration = Duration::from_secs(5);

// A large fragment's body goes straight into its record; the loop's buffer
// takes everything smaller, so it must hold such a piece.
const _: () = assert!(DIRECT_MIN <= READ_CHUNK);
// A turn reads at most 1 MiB of one connection (the doc above).
const _: () = assert!(READ_BUDGET * READ_CHUNK == 1 << 20);
// A held reply never outgrows the short calls it may wait for by much.
const _: () = assert!(MAX_HELD_REPLY >= MAX_SHORT_RECORD);
// A loop's batch of replies for one connection fits that connection's
// output bound, so a batch alone never makes it stop being read.
const _: () = assert!(BATCH_BYTES <= DEFAULT_MAX_CONN_OUTPUT);
// A free reply is one a batch can carry.
const _: () = assert!(FREE_REPLY <= BATCH_BYTES);
// The default record holds a 1 MiB WRITE with room for its headers, and a
// direct read never targets a record smaller than its threshold.
const _: () = assert!(DEFAULT_MAX_RECORD > (1 << 20) && DEFAULT_MAX_RECORD >= DIRECT_MIN);
const _: () = assert!(MIN_RECYCLED_CAPACITY <= MAX_RECYCLED_CAPACITY);
const _: () = assert!(CHECK_EVERY_MIN.as_nanos() <= CHECK_EVERY_MAX.as_nanos());
const _: () = assert!(CHECK_EVERY_MIN.as_nanos() > 0 && STALL_RETRY.as_nanos() > 0);
