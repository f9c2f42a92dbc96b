//! Transport: listening sockets, TCP record marking (RFC 5531 §11), event
//! loops, and the hand-off of each complete request to exactly one worker of
//! the pool. Knows nothing of RPC: it moves records.

use std::net::SocketAddr;

/// One complete request record (all fragments joined).
pub struct Request {
    pub data: Vec<u8>,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    /// Unique per connection for the life of the process.
    pub conn_id: u64,
}

/// What the transport calls, on a worker thread, for each request.
pub trait Service: Send + Sync + 'static {
    /// Handle one record. Return the reply, or None to send nothing.
    /// The returned buffer's first 4 bytes are reserved for the record mark:
    /// the transport overwrites them (saves a copy on the hot path), so the
    /// reply body starts at byte 4. Use `reply_buffer()` to start one.
    fn call(&self, req: Request) -> Option<Vec<u8>>;
}

/// A buffer with the 4 record-mark bytes reserved at its front.
pub fn reply_buffer(capacity: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(capacity + 4);
    v.extend_from_slice(&[0u8; 4]);
    v
}
