//! ONC RPC over UDP: one datagram is one call, one datagram its reply
//! (RFC 5531 §11 defines record marking for TCP only; a datagram needs
//! none). For the port mapper and, later, the lock manager and status
//! monitor, which look each other up and talk over UDP.
//!
//! Each bound address gets `threads` threads doing blocking `recv_from`
//! and calling [`Service::call`] on that same thread: port mapper and lock
//! calls are small and answered from memory, so a pool handoff would cost
//! more than the call. There is no retransmission cache here: a UDP client
//! retransmits, and these programs' calls are idempotent or (NLM) carry
//! their own sequencing.
//!
//! On a wildcard address each datagram's destination is read
//! (IP_PKTINFO, the `sys` module): the reply leaves from it and the
//! service sees it as `Request::local`, as with TCP's accepted sockets.
//!
//! Bounds: a datagram larger than `max_datagram` is dropped (read into a
//! buffer one byte larger, so truncation is seen without MSG_TRUNC); a
//! reply larger than `max_datagram`, or one that is spliced, is dropped
//! (a UDP server cannot fragment a reply). Counters are plain atomics
//! shared by the threads: at port mapper rates a shared cache line costs
//! nothing worth striping.

use crate::limits::UDP_POLL as POLL;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::{Request, Service, TransportStats};

/// `Request::conn_id` of calls from the `i`-th bound socket: `UDP_CONN_ID
/// | i`, apart from the TCP transports' counters (which start at 0).
pub const UDP_CONN_ID: u64 = 1 << 63;

/// UDP transport configuration.
#[derive(Debug, Clone)]
pub struct UdpConfig {
    /// Addresses to bind (port 0 picks a free one).
    pub listen: Vec<SocketAddr>,
    /// Threads per bound address, each receiving and answering. Default 1.
    pub threads: usize,
    /// Largest call and largest reply, in bytes. Default 64 KiB (the most
    /// a UDP datagram carries is 65,507 bytes over IPv4).
    pub max_datagram: usize,
}

impl Default for UdpConfig {
    fn default() -> Self {
        UdpConfig {
            listen: Vec::new(),
            threads: 1,
            max_datagram: 64 * 1024,
        }
    }
}

/// Datagram counters, summed over the threads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UdpStats {
    /// Datagrams received (whatever became of them).
    pub datagrams_in: u64,
    pub bytes_in: u64,
    /// Replies sent.
    pub datagrams_out: u64,
    pub bytes_out: u64,
    /// Calls over `max_datagram`, dropped unread.
    pub dropped_too_big: u64,
    /// Calls from a peer `Service::admit` refused.
    pub dropped_refused: u64,
    /// Replies not sent: over `max_datagram`, spliced, or `send_to` failed.
    pub dropped_replies: u64,
    /// Calls the service answered with nothing (undecodable, or by choice).
    pub no_reply: u64,
}

impl UdpStats {
    /// The same counts in the TCP transport's terms, for the statistics
    /// registry: datagrams are records, refused datagrams are refused
    /// connections, and dropped calls and replies are `records_too_big`.
    pub fn as_transport_stats(&self) -> TransportStats {
        TransportStats {
            connections_refused: self.dropped_refused,
            records_in: self.datagrams_in,
            records_too_big: self.dropped_too_big + self.dropped_replies,
            bytes_in: self.bytes_in,
            replies_out: self.datagrams_out,
            writes_out: self.datagrams_out,
            bytes_out: self.bytes_out,
            ..Default::default()
        }
    }
}

#[derive(Default)]
struct Counters {
    datagrams_in: AtomicU64,
    bytes_in: AtomicU64,
    datagrams_out: AtomicU64,
    bytes_out: AtomicU64,
    dropped_too_big: AtomicU64,
    dropped_refused: AtomicU64,
    dropped_replies: AtomicU64,
    no_reply: AtomicU64,
}

fn add(c: &AtomicU64, n: usize) {
    c.fetch_add(n as u64, Ordering::Relaxed);
}

/// What the threads share.
#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    counters: Counters,
}

/// What the handles share; the threads hold only `Shared`, so dropping
/// the last handle drops this and shuts down.
struct Inner {
    shared: Arc<Shared>,
    addrs: Vec<SocketAddr>,
    /// The bound sockets, shut for reading at shutdown to wake their threads
    /// (then let go: they close with the last thread, as before).
    sockets: Mutex<Vec<Arc<UdpSocket>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// Entry point: `UdpTransport::start(...)`.
pub struct UdpTransport;

impl UdpTransport {
    /// Bind every address, start the threads, serve until
    /// [`UdpHandle::shutdown`].
    pub fn start(cfg: UdpConfig, service: Arc<dyn Service>) -> io::Result<UdpHandle> {
        if cfg.threads == 0 || cfg.max_datagram == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "udp: threads and max_datagram must be at least 1",
            ));
        }
        let mut sockets = Vec::with_capacity(cfg.listen.len());
        for a in &cfg.listen {
            let s = UdpSocket::bind(a)?;
            s.set_read_timeout(Some(POLL))?;
            // A wildcard socket learns each datagram's destination, to
            // answer from it and report it as `Request::local`.
            let wild = a.ip().is_unspecified()
                && match crate::sys::enable(&s, a.is_ipv6()) {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!(%a, error = %e, "udp: no IP_PKTINFO: replies leave from the kernel's choice of address");
                        false
                    }
                };
            sockets.push((s, wild));
        }
        let addrs = sockets
            .iter()
            .map(|(s, _)| s.local_addr())
            .collect::<io::Result<Vec<_>>>()?;
        let sockets: Vec<(Arc<UdpSocket>, bool)> =
            sockets.into_iter().map(|(s, w)| (Arc::new(s), w)).collect();
        let inner = Arc::new(Inner {
            shared: Arc::default(),
            addrs,
            sockets: Mutex::new(sockets.iter().map(|(s, _)| s.clone()).collect()),
            threads: Mutex::new(Vec::new()),
        });
        let h = UdpHandle { inner };
        for (i, (s, wild)) in sockets.into_iter().enumerate() {
            for t in 0..cfg.threads {
                let (s, sh, service) = (s.clone(), h.inner.shared.clone(), service.clone());
                let max = cfg.max_datagram;
                let id = UDP_CONN_ID | i as u64;
                let spawned = std::thread::Builder::new()
                    .name(format!("rnfsd-udp{i}.{t}"))
                    .spawn(move || serve(&s, wild, &sh, &*service, max, id));
                match spawned {
                    Ok(j) => h
                        .inner
                        .threads
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(j),
                    Err(e) => {
                        h.shutdown();
                        return Err(e);
                    }
                }
            }
        }
        Ok(h)
    }
}

/// One thread's loop: receive, admit, call, reply, until stopped.
fn serve(s: &UdpSocket, wild: bool, sh: &Shared, service: &dyn Service, max: usize, conn_id: u64) {
    let Ok(bound) = s.local_addr() else {
        return;
    };
    let c = &sh.counters;
    // One byte more than allowed: a datagram that fills it was truncated.
    let mut buf = vec![0u8; max + 1];
    while !sh.stop.load(Ordering::Acquire) {
        let got = if wild {
            crate::sys::recv(s, &mut buf)
        } else {
            s.recv_from(&mut buf).map(|(n, p)| (n, p, None))
        };
        let (n, peer, dst) = match got {
            Ok(x) => x,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => {
                // E.g. ECONNREFUSED from an earlier reply's ICMP error:
                // nothing to do with the next datagram.
                tracing::debug!(%bound, error = %e, "udp recv_from");
                // Not a busy loop should the error persist.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if sh.stop.load(Ordering::Acquire) {
            break;
        }
        add(&c.datagrams_in, 1);
        add(&c.bytes_in, n);
        if n > max {
            add(&c.dropped_too_big, 1);
            tracing::debug!(%peer, max, "udp: call over max_datagram dropped");
            continue;
        }
        let local = match dst {
            Some(d) => {
                let ip = match d.ip {
                    IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(d.ip, IpAddr::V4),
                    ip => ip,
                };
                SocketAddr::new(ip, bound.port())
            }
            None => bound,
        };
        if !service.admit(&peer) {
            add(&c.dropped_refused, 1);
            continue;
        }
        let req = Request {
            data: buf[..n].to_vec(),
            peer,
            local,
            conn_id,
            // Not planned, and answered here or not at all.
            plan: Default::default(),
            responder: crate::Responder::now_only(),
        };
        let Some(reply) = service.call(req) else {
            add(&c.no_reply, 1);
            continue;
        };
        // The first 4 bytes are the record mark's room: not sent here.
        let body = reply.buf.get(4..).unwrap_or_default();
        if reply.spliced.is_some() || body.len() > max {
            add(&c.dropped_replies, 1);
            tracing::debug!(%peer, len = reply.body_len(), max, "udp: reply too large for a datagram, dropped");
            continue;
        }
        let sent = match &dst {
            Some(d) => crate::sys::send(s, body, peer, d),
            None => s.send_to(body, peer),
        };
        match sent {
            Ok(sent) => {
                add(&c.datagrams_out, 1);
                add(&c.bytes_out, sent);
            }
            Err(e) => {
                add(&c.dropped_replies, 1);
                tracing::debug!(%peer, error = %e, "udp send_to");
            }
        }
    }
}

/// A running UDP transport. Cheap to clone; all clones control the same
/// transport. Dropping the last clone shuts it down.
#[derive(Clone)]
pub struct UdpHandle {
    inner: Arc<Inner>,
}

impl UdpHandle {
    /// The bound addresses (useful with port 0).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.inner.addrs.clone()
    }

    pub fn stats(&self) -> UdpStats {
        let c = &self.inner.shared.counters;
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        UdpStats {
            datagrams_in: r(&c.datagrams_in),
            bytes_in: r(&c.bytes_in),
            datagrams_out: r(&c.datagrams_out),
            bytes_out: r(&c.bytes_out),
            dropped_too_big: r(&c.dropped_too_big),
            dropped_refused: r(&c.dropped_refused),
            dropped_replies: r(&c.dropped_replies),
            no_reply: r(&c.no_reply),
        }
    }

    /// Stop the threads and join them: each sees the stop flag after a
    /// wake-up datagram sent to its socket, or within 500 ms without it.
    /// A call being answered finishes first. Idempotent. Must not be
    /// called from a `Service::call`.
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }
}

impl Inner {
    fn shutdown(&self) {
        self.shared.stop.store(true, Ordering::Release);
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        if threads.is_empty() {
            return;
        }
        // A receive on a socket shut for reading returns at once (Linux's
        // datagram wait checks RCV_SHUTDOWN), whatever address it is bound
        // to; an unconnected socket reports ENOTCONN but is shut all the
        // same.
        let sockets = std::mem::take(&mut *self.sockets.lock().unwrap_or_else(|e| e.into_inner()));
        for sock in &sockets {
            let _ = rustix::net::shutdown(&**sock, rustix::net::Shutdown::Read);
        }
        drop(sockets);
        for t in threads {
            if t.join().is_err() {
                tracing::error!("udp thread panicked");
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{reply_buffer, Reply};
    use std::time::Instant;

    /// Echoes the call; "big" asks for a reply over the bound; "none"
    /// for no reply.
    struct Echo;
    impl Service for Echo {
        fn call(&self, req: Request) -> Option<Reply> {
            match &req.data[..] {
                b"none" => None,
                b"big" => {
                    let mut r = reply_buffer(2000);
                    r.resize(2004, 7);
                    Some(r.into())
                }
                d => {
                    let mut r = reply_buffer(d.len());
                    r.extend_from_slice(d);
                    Some(r.into())
                }
            }
        }
    }

    fn client() -> UdpSocket {
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c
    }

    fn start(max: usize) -> (UdpHandle, SocketAddr) {
        let cfg = UdpConfig {
            listen: vec!["127.0.0.1:0".parse().unwrap()],
            threads: 2,
            max_datagram: max,
        };
        let h = UdpTransport::start(cfg, Arc::new(Echo)).unwrap();
        let a = h.local_addrs()[0];
        assert_ne!(a.port(), 0);
        (h, a)
    }

    #[test]
    fn echoes_drops_what_it_must_and_keeps_serving() {
        let (h, a) = start(1024);
        let c = client();
        let mut buf = [0u8; 4096];
        c.send_to(b"hello", a).unwrap();
        let (n, from) = c.recv_from(&mut buf).unwrap();
        assert_eq!((&buf[..n], from), (&b"hello"[..], a));

        // Oversized call, a reply over the bound, no reply: all dropped,
        // and the threads still answer afterwards.
        c.send_to(&[1u8; 1025], a).unwrap();
        c.send_to(b"big", a).unwrap();
        c.send_to(b"none", a).unwrap();
        c.send_to(&[0xffu8; 1024], a).unwrap(); // exactly the bound: echoed
        let (n, _) = c.recv_from(&mut buf).unwrap();
        assert_eq!(n, 1024);
        c.send_to(b"again", a).unwrap();
        let (n, _) = c.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"again");

        // Another thread may still be counting the one it dropped.
        let deadline = Instant::now() + Duration::from_secs(5);
        let settled =
            |s: UdpStats| s.datagrams_out + s.dropped_too_big + s.dropped_replies + s.no_reply;
        while settled(h.stats()) < 6 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let s = h.stats();
        assert_eq!(s.datagrams_in, 6);
        assert_eq!(s.datagrams_out, 3);
        assert_eq!(s.dropped_too_big, 1);
        assert_eq!(s.dropped_replies, 1);
        assert_eq!(s.no_reply, 1);
        assert_eq!(s.as_transport_stats().records_in, 6);
        h.shutdown();
    }

    /// On a wildcard socket a reply leaves from the address the call was
    /// sent to, which the service sees as `Request::local`.
    #[test]
    fn wildcard_socket_answers_from_the_destination_address() {
        struct Where;
        impl Service for Where {
            fn call(&self, req: Request) -> Option<Reply> {
                let mut r = reply_buffer(64);
                r.extend_from_slice(req.local.to_string().as_bytes());
                Some(r.into())
            }
        }
        // IPv4, and IPv4 on a dual-stack IPv6 socket (v4-mapped), when
        // the host has IPv6.
        for wildcard in ["0.0.0.0:0", "[::]:0"] {
            let cfg = UdpConfig {
                listen: vec![wildcard.parse().unwrap()],
                ..Default::default()
            };
            let Ok(h) = UdpTransport::start(cfg, Arc::new(Where)) else {
                assert!(wildcard.starts_with('['));
                continue;
            };
            let port = h.local_addrs()[0].port();
            let c = client();
            let mut buf = [0u8; 64];
            for ip in ["127.0.0.1", "127.0.0.2"] {
                let to: SocketAddr = format!("{ip}:{port}").parse().unwrap();
                c.send_to(b"?", to).unwrap();
                let (n, from) = c.recv_from(&mut buf).unwrap();
                assert_eq!(from, to, "{wildcard}");
                assert_eq!(std::str::from_utf8(&buf[..n]).unwrap(), to.to_string());
            }
            h.shutdown();
        }
    }

    #[test]
    fn refused_peers_get_nothing() {
        struct Nobody;
        impl Service for Nobody {
            fn call(&self, _: Request) -> Option<Reply> {
                Some(reply_buffer(0).into())
            }
            fn admit(&self, _: &SocketAddr) -> bool {
                false
            }
        }
        let cfg = UdpConfig {
            listen: vec!["127.0.0.1:0".parse().unwrap()],
            ..Default::default()
        };
        let h = UdpTransport::start(cfg, Arc::new(Nobody)).unwrap();
        let c = client();
        c.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        c.send_to(b"x", h.local_addrs()[0]).unwrap();
        assert!(c.recv_from(&mut [0u8; 16]).is_err());
        assert_eq!(h.stats().dropped_refused, 1);
        h.shutdown();
    }

    #[test]
    fn shutdown_joins_promptly_and_is_idempotent() {
        let cfg = UdpConfig {
            listen: vec!["127.0.0.1:0".parse().unwrap(), "0.0.0.0:0".parse().unwrap()],
            threads: 2,
            ..Default::default()
        };
        let h = UdpTransport::start(cfg, Arc::new(Echo)).unwrap();
        assert_eq!(h.local_addrs().len(), 2);
        // Every thread waiting in its receive (a thread that has not yet
        // looked at the stop flag needs no wake).
        std::thread::sleep(Duration::from_millis(300));
        let t0 = Instant::now();
        h.shutdown();
        // Shutting the sockets for reading, not the 5 s poll, ends the
        // threads.
        assert!(
            t0.elapsed() < Duration::from_millis(400),
            "{:?}",
            t0.elapsed()
        );
        h.shutdown();
        // The port is free once shut down, even with the handle kept.
        UdpSocket::bind(h.local_addrs()[0]).expect("the port is let go at shutdown");
        let h2 = h.clone();
        drop(h);
        drop(h2);
    }

    #[test]
    fn zero_threads_or_bound_is_refused() {
        let cfg = UdpConfig {
            listen: vec!["127.0.0.1:0".parse().unwrap()],
            threads: 0,
            ..Default::default()
        };
        assert!(UdpTransport::start(cfg, Arc::new(Echo)).is_err());
    }
}
