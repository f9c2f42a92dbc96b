//! Pipes that carry reply data from the page cache to a socket with no
//! user-space copy (splice(2)): a file's pages go into a pipe by reference,
//! and from the pipe into the socket's buffers by reference. A bounded pool:
//! each pipe is two descriptors, and one is held by each spliced reply
//! until the socket has taken all of it.
//!
//! Written here rather than taken from a crate: the lease must follow a
//! reply through the connection's output queue, which no crate models.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use rustix::pipe::{fcntl_setpipe_size, pipe_with, splice, PipeFlags, SpliceFlags};

struct Pipe {
    r: OwnedFd,
    w: OwnedFd,
    cap: usize,
}

/// At most `max` pipes of at least `size` bytes each, made on demand and
/// reused once empty.
pub struct PipePool {
    free: Mutex<Vec<Pipe>>,
    /// Pipes in existence (free or leased).
    made: AtomicUsize,
    max: usize,
    size: usize,
    /// A pipe could not be made or sized: said once in the log.
    warned: AtomicBool,
}

impl PipePool {
    /// `max` pipes (0: none, every lease fails) of `size` bytes: the
    /// largest reply body one pipe must hold.
    pub fn new(max: usize, size: usize) -> Arc<PipePool> {
        Arc::new(PipePool {
            free: Mutex::new(Vec::new()),
            made: AtomicUsize::new(0),
            max,
            size,
            warned: AtomicBool::new(false),
        })
    }

    /// Pipes in existence (free or leased).
    pub fn pipes(&self) -> usize {
        self.made.load(Relaxed)
    }

    /// An empty pipe, or None when all `max` are leased or the kernel
    /// refuses one (the caller copies instead).
    pub fn lease(self: &Arc<Self>) -> Option<PipeLease> {
        let reused = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let pipe = match reused {
            Some(p) => p,
            None => {
                // Reserve a slot first, so the bound holds under races.
                let won = self
                    .made
                    .fetch_update(Relaxed, Relaxed, |n| (n < self.max).then_some(n + 1))
                    .is_ok();
                if !won {
                    return None;
                }
                match make_pipe(self.size) {
                    Ok(p) => p,
                    Err(e) => {
                        self.made.fetch_sub(1, Relaxed);
                        if !self.warned.swap(true, Relaxed) {
                            tracing::warn!(
                                "cannot make a {} byte pipe for spliced replies ({e}); \
                                 such replies are copied instead",
                                self.size
                            );
                        }
                        return None;
                    }
                }
            }
        };
        Some(PipeLease {
            pipe: Some(pipe),
            pool: self.clone(),
            held: 0,
            spoiled: false,
        })
    }

    fn give_back(&self, p: Pipe) {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).push(p);
    }
}

fn make_pipe(size: usize) -> io::Result<Pipe> {
    let (r, w) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
    // The kernel rounds up to a power of two pages; a pipe it will not make
    // that large (pipe-max-size, or the user's pipe page quota) is useless
    // here: replies would come out short.
    let cap = fcntl_setpipe_size(&w, size)?;
    if cap < size {
        return Err(io::Error::other(format!("pipe sized {cap}")));
    }
    Ok(Pipe { r, w, cap })
}

/// One pipe, lent to one reply. Dropped empty, it goes back to the pool;
/// dropped with data in it (a connection closed mid-reply, a fill that
/// failed part way), it is closed and the pool may make a new one.
pub struct PipeLease {
    pipe: Option<Pipe>,
    pool: Arc<PipePool>,
    held: usize,
    spoiled: bool,
}

impl PipeLease {
    /// Bytes the pipe can hold.
    pub fn capacity(&self) -> usize {
        self.pipe.as_ref().map_or(0, |p| p.cap)
    }

    /// The end to fill (splice a file into).
    pub fn write_end(&self) -> Option<BorrowedFd<'_>> {
        self.pipe.as_ref().map(|p| p.w.as_fd())
    }

    /// `n` more bytes were put in the pipe.
    pub fn filled(&mut self, n: usize) {
        self.held += n;
    }

    /// Bytes in the pipe not yet sent.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Move what the pipe holds into `sock` without blocking. `more`: more
    /// output follows (SPLICE_F_MORE, as MSG_MORE). Ok(0) only when nothing
    /// is held.
    pub(crate) fn splice_to(&mut self, sock: BorrowedFd<'_>, more: bool) -> io::Result<usize> {
        let Some(p) = &self.pipe else {
            return Err(io::ErrorKind::BrokenPipe.into());
        };
        if self.held == 0 {
            return Ok(0);
        }
        let mut flags = SpliceFlags::MOVE | SpliceFlags::NONBLOCK;
        if more {
            flags |= SpliceFlags::MORE;
        }
        let n = splice(&p.r, None, sock, None, self.held, flags)?;
        if n == 0 {
            // The pipe is empty though we count bytes in it: never spin.
            self.spoiled = true;
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.held -= n.min(self.held);
        Ok(n)
    }
}

impl Drop for PipeLease {
    fn drop(&mut self) {
        let Some(p) = self.pipe.take() else {
            return;
        };
        // Whatever the filler did (a fill that failed part way leaves bytes
        // nobody counted), only a pipe the kernel says is empty is reused.
        let empty =
            self.held == 0 && !self.spoiled && matches!(rustix::io::ioctl_fionread(&p.r), Ok(0));
        if empty {
            self.pool.give_back(p);
        } else {
            drop(p);
            self.pool.made.fetch_sub(1, Relaxed);
        }
    }
}

impl std::fmt::Debug for PipeLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipeLease")
            .field("held", &self.held)
            .field("capacity", &self.capacity())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn bounded_and_reused_when_empty() {
        let pool = PipePool::new(2, 64 << 10);
        let a = pool.lease().expect("first");
        let b = pool.lease().expect("second");
        assert!(a.capacity() >= 64 << 10);
        assert!(pool.lease().is_none(), "over the bound");
        drop(a);
        let c = pool.lease().expect("reused");
        assert_eq!(pool.pipes(), 2);
        drop((b, c));
        assert_eq!(pool.pipes(), 2);
    }

    #[test]
    fn a_pipe_with_data_is_not_reused() {
        let pool = PipePool::new(1, 4096);
        let mut a = pool.lease().unwrap();
        rustix::io::write(a.write_end().unwrap(), b"left over").unwrap();
        a.filled(9);
        drop(a);
        assert_eq!(pool.pipes(), 0, "closed, not pooled");
        // Bytes the lease was never told of count too.
        let b = pool.lease().expect("a new one");
        rustix::io::write(b.write_end().unwrap(), b"x").unwrap();
        drop(b);
        assert_eq!(pool.pipes(), 0);
        let c = pool.lease().unwrap();
        drop(c);
        assert_eq!(pool.pipes(), 1);
    }

    #[test]
    fn splices_into_a_socket() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut rx, _) = l.accept().unwrap();
        let pool = PipePool::new(1, 64 << 10);
        let mut p = pool.lease().unwrap();
        let data: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
        let mut off = 0;
        while off < data.len() {
            off += rustix::io::write(p.write_end().unwrap(), &data[off..]).unwrap();
        }
        p.filled(data.len());
        tx.write_all(b"head").unwrap();
        while p.held() > 0 {
            match p.splice_to(tx.as_fd(), false) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        drop(tx);
        let mut got = Vec::new();
        rx.read_to_end(&mut got).unwrap();
        assert_eq!(&got[..4], b"head");
        assert_eq!(&got[4..], &data[..]);
        drop(p);
        assert_eq!(pool.pipes(), 1, "empty again: pooled");
    }
}
