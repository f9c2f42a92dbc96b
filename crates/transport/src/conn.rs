//! A connection as shared between its event loop (reads, flushes, closes)
//! and the workers running its requests (write replies directly).

use crate::api::ReplySink;
use crate::budget::Client;
use crate::pipe::PipeLease;
use crate::record::{LAST_FRAGMENT, MAX_FRAGMENT};
use crate::{Msg, Reply, SendError, Shared, Spliced};
use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};
use std::os::fd::AsFd;

use rustix::io::Errno;
use rustix::net::{sendmsg, SendAncillaryBuffer, SendFlags};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard};

/// One piece of queued output.
pub(crate) enum Out {
    /// Bytes from `.1` on; `.2`: the last piece of its reply.
    Bytes(Vec<u8>, usize, bool),
    /// What a reply's pipe still holds (always followed by its pad, if
    /// any, as `Bytes`).
    Pipe(PipeLease, bool),
}

/// Reply bytes not yet accepted by the socket. Bounded indirectly: the loop
/// stops reading requests once `bytes` passes `max_conn_output`, so at most
/// `max_conn_output` + the replies of `max_inflight_per_conn` requests.
#[derive(Default)]
pub(crate) struct OutQ {
    bufs: VecDeque<Out>,
    bytes: usize,
    /// The connection is closed (or its write side failed): drop replies.
    pub closed: bool,
}

pub(crate) struct Conn {
    pub id: u64,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub sock: TcpStream,
    /// The event loop that owns this connection, and its token there.
    pub loop_idx: usize,
    pub token: usize,
    /// The write side: one lock so two replies' bytes never interleave.
    out: Mutex<OutQ>,
    /// Output is queued: the loop must flush it on writability.
    want_write: AtomicBool,
    /// Mirror of `out.bytes` for lock-free backpressure checks.
    queued: AtomicUsize,
    /// Requests submitted to the pool and not yet finished.
    pub inflight: AtomicUsize,
    /// The loop stopped reading for backpressure and wants a notification
    /// when it may read again (whoever swaps it to false sends it).
    pub paused: AtomicBool,
    /// The peer finished sending: the loop closes once all is answered.
    pub eof: AtomicBool,
    /// The client (address) whose share of `max_buffered_bytes` this
    /// connection's bytes count against, with the whole budget's.
    pub client: Arc<Client>,
    pub shared: Arc<Shared>,
}

impl Conn {
    /// `(loop_idx, token)`: the owning loop and the connection's token there.
    pub fn new(
        id: u64,
        sock: TcpStream,
        peer: SocketAddr,
        local: SocketAddr,
        (loop_idx, token): (usize, usize),
        client: Arc<Client>,
        shared: Arc<Shared>,
    ) -> Conn {
        Conn {
            id,
            peer,
            local,
            sock,
            loop_idx,
            token,
            out: Mutex::new(OutQ::default()),
            want_write: AtomicBool::new(false),
            queued: AtomicUsize::new(0),
            inflight: AtomicUsize::new(0),
            paused: AtomicBool::new(false),
            eof: AtomicBool::new(false),
            client,
            shared,
        }
    }

    /// Request bytes (records, reply room) now held against the budget,
    /// the whole one and this client's.
    pub(crate) fn hold(&self, n: usize) {
        self.shared.stats.held_in.add(n as u64);
        self.client.add(n as u64);
    }

    /// Request bytes let go (a record taken on, a call done).
    pub(crate) fn let_go(&self, n: usize) {
        self.shared.stats.held_out.add(n as u64);
        self.client.let_go(n as u64);
    }

    /// Reply bytes queued on this connection.
    fn queue_in(&self, n: usize) {
        self.shared.stats.queued_in.add(n as u64);
        self.client.add(n as u64);
    }

    /// Queued reply bytes sent or dropped.
    fn queue_out(&self, n: usize) {
        self.shared.stats.queued_out.add(n as u64);
        self.client.let_go(n as u64);
    }

    fn lock_out(&self) -> MutexGuard<'_, OutQ> {
        // Nothing panics under this lock except allocation failure.
        self.out.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn queued_bytes(&self) -> usize {
        self.queued.load(SeqCst)
    }

    pub fn wants_write(&self) -> bool {
        self.want_write.load(SeqCst)
    }

    /// May the loop read more requests? (Backpressure bounds.)
    pub fn can_read(&self) -> bool {
        let l = &self.shared.limits;
        self.inflight.load(SeqCst) < l.max_inflight_per_conn
            && self.queued.load(SeqCst) <= l.max_conn_output
    }

    /// Tell the owning loop to look at this connection again.
    pub fn notify(&self) {
        if let Some(n) = self.shared.loops.get(self.loop_idx) {
            n.send(Msg::Check {
                token: self.token,
                id: self.id,
            });
        }
    }

    /// A request finished (reply sent or queued, or none).
    pub(crate) fn finish_one(&self) {
        self.finish_n(1);
    }

    /// `n` requests finished (a batch of held replies sent).
    pub(crate) fn finish_n(&self, n: usize) {
        if n == 0 {
            return;
        }
        let prev = self.inflight.fetch_sub(n, SeqCst);
        debug_assert!(prev >= n, "finished {n} calls with {prev} in flight");
        // Resume a loop paused by backpressure, or let it close a
        // half-closed connection whose last request just finished.
        let resume = self.paused.load(SeqCst) && self.can_read() && self.paused.swap(false, SeqCst);
        if resume || (prev == n && self.eof.load(SeqCst)) {
            self.notify();
        }
    }

    /// Write the record mark into a reply's 4 reserved bytes; false (and
    /// logged) if it has no room for one or is over one fragment's size.
    fn mark(&self, r: &mut Reply) -> bool {
        let body = r.body_len();
        if r.buf.len() < 4 || body > MAX_FRAGMENT {
            tracing::error!(
                conn = self.id,
                len = body,
                "reply without record-mark room or over 2^31-1 bytes; dropped"
            );
            return false;
        }
        // RFC 5531 §11: one fragment, marked last. `body` ≤ 2^31-1 (above).
        r.buf[..4].copy_from_slice(&(LAST_FRAGMENT | body as u32).to_be_bytes());
        true
    }

    /// Queue a marked reply's pieces.
    fn enqueue_locked(&self, q: &mut OutQ, r: Reply) {
        let n = r.body_len() + 4;
        q.bytes += n;
        self.queued.store(q.bytes, SeqCst);
        self.queue_in(n);
        match r.spliced {
            None => q.bufs.push_back(Out::Bytes(r.buf, 0, true)),
            Some(Spliced { pipe, pad }) => {
                q.bufs.push_back(Out::Bytes(r.buf, 0, false));
                q.bufs.push_back(Out::Pipe(pipe, pad == 0));
                if pad > 0 {
                    q.bufs.push_back(Out::Bytes(vec![0; pad], 0, true));
                }
            }
        }
    }

    /// Send one reply from a worker: write it now without blocking; queue
    /// what the socket does not take, for the loop to finish on
    /// writability. The first 4 bytes are overwritten by the record mark.
    /// False: nothing was or will be sent (closed, failed, or unmarkable).
    pub fn send(&self, mut reply: Reply) -> bool {
        if !self.mark(&mut reply) {
            return false;
        }
        let st = &self.shared.stats;
        let mut q = self.lock_out();
        if q.closed {
            return false;
        }
        if !q.bufs.is_empty() || reply.spliced.is_some() {
            self.enqueue_locked(&mut q, reply);
            if let Err(e) = self.flush_locked(&mut q) {
                self.fail_locked(&mut q, e);
                return false;
            }
            self.arm_locked(&mut q);
            return !q.closed;
        }
        // The common case: nothing queued, all bytes; no queue entry at all
        // if the socket takes them.
        let buf = reply.buf;
        let mut off = 0;
        loop {
            match (&self.sock).write(&buf[off..]) {
                Ok(0) => {
                    self.fail_locked(&mut q, io::ErrorKind::WriteZero.into());
                    return false;
                }
                Ok(n) => {
                    off += n;
                    st.bytes_out.add(n as u64);
                    st.writes_out.add(1);
                    if off == buf.len() {
                        st.replies_out.add(1);
                        drop(q);
                        crate::recycle::give_reply(buf);
                        return true;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.fail_locked(&mut q, e);
                    return false;
                }
            }
        }
        let rest = buf.len() - off;
        q.bufs.push_back(Out::Bytes(buf, off, true));
        q.bytes += rest;
        self.queued.store(q.bytes, SeqCst);
        self.queue_in(rest);
        self.arm_locked(&mut q);
        !q.closed
    }

    /// Output is queued: make sure the loop flushes it on writability.
    fn arm_locked(&self, q: &mut OutQ) {
        if !q.bufs.is_empty() && !self.want_write.swap(true, SeqCst) {
            // Just armed. The socket may have drained (its edge already
            // consumed by the loop, which saw the flag clear) between our
            // WouldBlock and the flag: retry once. If that blocks too, the
            // next writable edge comes after the flag was set.
            if let Err(e) = self.flush_locked(q) {
                self.fail_locked(q, e);
            }
        }
    }

    /// Send the replies the loop produced for this connection in one turn:
    /// queued together and written with as few `writev`s as the socket
    /// takes (replies coalesced); what it does not take waits for
    /// writability, as in `send`.
    pub fn send_batch(&self, replies: &mut Vec<Reply>) {
        let mut q = self.lock_out();
        if q.closed {
            replies.clear();
            return;
        }
        for mut r in replies.drain(..) {
            if self.mark(&mut r) {
                self.enqueue_locked(&mut q, r);
            }
        }
        if let Err(e) = self.flush_locked(&mut q) {
            self.fail_locked(&mut q, e);
            return;
        }
        self.arm_locked(&mut q);
    }

    /// Flush queued output (from the loop on writability). Returns false
    /// if the connection is closed or its write side just failed.
    pub fn flush(&self) -> bool {
        let mut q = self.lock_out();
        if q.closed {
            return false;
        }
        if let Err(e) = self.flush_locked(&mut q) {
            self.fail_locked(&mut q, e);
            return false;
        }
        true
    }

    fn flush_locked(&self, q: &mut OutQ) -> io::Result<()> {
        let st = &self.shared.stats;
        loop {
            let more = q.bufs.len() > 1;
            let Some(front) = q.bufs.front_mut() else {
                break;
            };
            if let Out::Pipe(p, last) = front {
                let n = match p.splice_to(self.sock.as_fd(), more) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                let (done, last) = (p.held() == 0, *last);
                self.account(q, n);
                if done {
                    q.bufs.pop_front();
                    if last {
                        st.replies_out.add(1);
                    }
                }
                continue;
            }
            // Consecutive byte pieces in one writev; MSG_MORE when a pipe's
            // bytes follow them (one segment with the data, not two).
            let mut iov = [IoSlice::new(&[]); 16];
            let mut k = 0;
            let mut then_pipe = false;
            for o in q.bufs.iter() {
                match o {
                    Out::Bytes(b, off, _) if k < iov.len() => {
                        iov[k] = IoSlice::new(b.get(*off..).unwrap_or_default());
                        k += 1;
                    }
                    Out::Bytes(..) => break,
                    Out::Pipe(..) => {
                        then_pipe = true;
                        break;
                    }
                }
            }
            let flags = if then_pipe {
                SendFlags::MORE | SendFlags::NOSIGNAL
            } else {
                SendFlags::NOSIGNAL
            };
            let n = match sendmsg(
                &self.sock,
                &iov[..k],
                &mut SendAncillaryBuffer::default(),
                flags,
            ) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => n,
                Err(e) if e == Errno::AGAIN => return Ok(()),
                Err(e) if e == Errno::INTR => continue,
                Err(e) => return Err(e.into()),
            };
            self.account(q, n);
            let mut left = n;
            while left > 0 {
                let Some(Out::Bytes(b, off, last)) = q.bufs.front_mut() else {
                    break;
                };
                let take = left.min(b.len() - *off);
                *off += take;
                left -= take;
                if *off == b.len() {
                    let last = *last;
                    if let Some(Out::Bytes(b, ..)) = q.bufs.pop_front() {
                        crate::recycle::give_reply(b);
                    }
                    if last {
                        st.replies_out.add(1);
                    }
                }
            }
        }
        self.want_write.store(false, SeqCst);
        Ok(())
    }

    /// `n` queued bytes reached the socket.
    fn account(&self, q: &mut OutQ, n: usize) {
        let st = &self.shared.stats;
        st.bytes_out.add(n as u64);
        st.writes_out.add(1);
        self.queue_out(n);
        q.bytes -= n.min(q.bytes);
        self.queued.store(q.bytes, SeqCst);
    }

    /// The write side failed: drop queued replies, make the loop close us.
    fn fail_locked(&self, q: &mut OutQ, e: io::Error) {
        tracing::debug!(conn = self.id, peer = %self.peer, "write failed: {e}");
        self.discard_locked(q);
        self.notify();
    }

    fn discard_locked(&self, q: &mut OutQ) {
        q.closed = true;
        self.queue_out(q.bytes);
        q.bufs = VecDeque::new();
        q.bytes = 0;
        self.queued.store(0, SeqCst);
        self.want_write.store(false, SeqCst);
    }

    pub fn is_closed(&self) -> bool {
        self.lock_out().closed
    }

    /// Close from the loop: drop queued output; the peer sees FIN/RST now,
    /// and workers still running this connection's requests fail their
    /// writes fast. The fd itself closes when the last `Arc` goes.
    pub fn close(&self) {
        let mut q = self.lock_out();
        self.discard_locked(&mut q);
        drop(q);
        let _ = self.sock.shutdown(Shutdown::Both);
    }
}

/// How a deferred reply (`Responder::defer`) reaches its connection.
impl ReplySink for Conn {
    fn id(&self) -> u64 {
        self.id
    }

    fn begin(&self) {
        self.inflight.fetch_add(1, SeqCst);
    }

    fn send(&self, reply: Reply) {
        Conn::send(self, reply);
    }

    fn finish(&self) {
        self.finish_n(1);
    }

    /// A back channel's record: refused once the peer stopped sending (no
    /// answer can come) or stopped reading (`max_conn_output` queued).
    fn send_record(&self, record: Reply) -> Result<(), SendError> {
        if self.eof.load(SeqCst) {
            return Err(SendError::Closed);
        }
        if self.queued_bytes() > self.shared.limits.max_conn_output {
            return Err(SendError::Full);
        }
        if !self.send(record) {
            return Err(SendError::Closed);
        }
        self.shared.stats.back_calls_out.add(1);
        Ok(())
    }

    fn is_open(&self) -> bool {
        !self.eof.load(SeqCst) && !self.is_closed()
    }
}
