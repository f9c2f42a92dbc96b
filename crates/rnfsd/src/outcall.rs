//! Calls rnfsd makes to other RPC servers (the system rpcbind at start, a
//! client's port mapper and lock manager for NLM callbacks, its status
//! monitor for SM_NOTIFY): one synchronous call over a stream with record
//! marking (RFC 5531 §11), AUTH_NONE, a bounded reply. Rare and off the
//! request path, so blocking I/O; a call to another host has a total
//! deadline (each connect, read and write gets what is left of it), so a
//! peer that trickles bytes cannot hold the calling thread.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::Instant;

use rnfsd_proto::rpc::{AcceptStat, CallHeader, OpaqueAuth, ReplyHeader, RPC_VERSION};
use rnfsd_xdr::{Dec, Enc};

/// Largest reply accepted (ours are a few words).
const MAX_REPLY: usize = 64 * 1024;

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_owned())
}

/// Calls `prog`/`vers`/`proc_` with the XDR `args`; returns the result's
/// bytes (after the accepted-success reply header).
pub fn call<S: Read + Write + ?Sized>(
    s: &mut S,
    xid: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    args: &[u8],
) -> io::Result<Vec<u8>> {
    let mut e = Enc::new();
    e.u32(0); // record mark, patched below
    CallHeader {
        xid,
        rpcvers: RPC_VERSION,
        prog,
        vers,
        proc_,
        cred: OpaqueAuth::NONE,
        verf: OpaqueAuth::NONE,
    }
    .encode(&mut e);
    e.raw(args);
    let len = (e.len() - 4) as u32;
    e.patch_u32(0, 0x8000_0000 | len);
    s.write_all(e.as_slice())?;
    s.flush()?;

    let mut rec = Vec::new();
    loop {
        let mut mark = [0u8; 4];
        s.read_exact(&mut mark)?;
        let m = u32::from_be_bytes(mark);
        let n = (m & 0x7fff_ffff) as usize;
        if rec.len() + n > MAX_REPLY {
            return Err(invalid("reply too large"));
        }
        let start = rec.len();
        rec.resize(start + n, 0);
        s.read_exact(&mut rec[start..])?;
        if m & 0x8000_0000 != 0 {
            break;
        }
    }
    let mut d = Dec::new(&rec);
    let (rxid, h) = ReplyHeader::decode(&mut d).map_err(|_| invalid("bad reply header"))?;
    if rxid != xid {
        return Err(invalid("reply xid mismatch"));
    }
    match h {
        ReplyHeader::Accepted(AcceptStat::Success) => Ok(rec[d.position()..].to_vec()),
        other => Err(io::Error::other(format!("call refused: {other:?}"))),
    }
}

/// What is left until `deadline` (TimedOut once it has passed).
fn left(deadline: Instant) -> io::Result<std::time::Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "deadline passed"))
}

/// A stream whose every read and write waits at most until `deadline`.
struct Until<'a> {
    s: &'a TcpStream,
    deadline: Instant,
}

fn timed_out(e: io::Error) -> io::Error {
    match e.kind() {
        io::ErrorKind::WouldBlock => io::Error::new(io::ErrorKind::TimedOut, "deadline passed"),
        _ => e,
    }
}

impl Read for Until<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.s.set_read_timeout(Some(left(self.deadline)?))?;
        (&*self.s).read(buf).map_err(timed_out)
    }
}

impl Write for Until<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.s.set_write_timeout(Some(left(self.deadline)?))?;
        (&*self.s).write(buf).map_err(timed_out)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// An IPv4-mapped IPv6 address as IPv4 (so an address from a dual-stack
/// socket and an IPv4 one are of one family).
fn canon(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// A TCP connection to `to`, from the local address `from` when given
/// (and still ours: else from the one routing picks), made by `deadline`.
fn connect(to: SocketAddr, from: Option<IpAddr>, deadline: Instant) -> io::Result<TcpStream> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    let to = SocketAddr::new(canon(to.ip()), to.port());
    let family = match to {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    let fd = rustix::net::socket_with(family, SocketType::STREAM, SocketFlags::CLOEXEC, None)?;
    if let Some(src) = from.map(canon).filter(|s| s.is_ipv4() == to.is_ipv4()) {
        if let Err(e) = rustix::net::bind(&fd, &SocketAddr::new(src, 0)) {
            tracing::debug!(%src, "outgoing call not bound to {src}: {e}");
        }
    }
    let s = TcpStream::from(fd);
    // SO_SNDTIMEO bounds a blocking connect too (socket(7): EINPROGRESS).
    s.set_write_timeout(Some(left(deadline)?))?;
    match rustix::net::connect(&s, &to) {
        Ok(()) => {}
        Err(rustix::io::Errno::INPROGRESS | rustix::io::Errno::AGAIN) => {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))
        }
        Err(e) => return Err(e.into()),
    }
    s.set_nodelay(true)?;
    Ok(s)
}

/// One call to the RPC server at `to` (see `connect`), all of it done by
/// `deadline`. Returns the result's bytes.
#[allow(clippy::too_many_arguments)]
fn call_at(
    to: SocketAddr,
    from: Option<IpAddr>,
    xid: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    args: &[u8],
    deadline: Instant,
) -> io::Result<Vec<u8>> {
    let s = connect(to, from, deadline)?;
    call(&mut Until { s: &s, deadline }, xid, prog, vers, proc_, args)
}

/// Calls `prog`/`vers`/`proc_` of the RPC server on host `ip`, over TCP at
/// the port its port mapper (PMAP v2 GETPORT, RFC 1833 §3) gives: both
/// calls leave from the local address `from` when given (the address the
/// host called us at: a client may check it) and are over by `deadline`,
/// whatever the host does. Returns the result's bytes.
pub fn call_registered(
    ip: IpAddr,
    from: Option<IpAddr>,
    prog: u32,
    vers: u32,
    proc_: u32,
    args: &[u8],
    deadline: Instant,
) -> io::Result<Vec<u8>> {
    use rnfsd_proto::portmap::{Mapping, IPPROTO_TCP, PMAPPROC_GETPORT, PMAP_PORT, PMAP_VERSION};
    let xid = new_xid();
    let query = rnfsd_xdr::to_vec(&Mapping {
        prog,
        vers,
        prot: IPPROTO_TCP,
        port: 0,
    });
    let res = call_at(
        SocketAddr::new(ip, PMAP_PORT),
        from,
        xid,
        rnfsd_proto::portmap::PROGRAM,
        PMAP_VERSION,
        PMAPPROC_GETPORT,
        &query,
        deadline,
    )?;
    let port = Dec::new(&res)
        .u32()
        .ok()
        .and_then(|p| u16::try_from(p).ok())
        .filter(|&p| p != 0)
        .ok_or_else(|| io::Error::other(format!("program {prog} v{vers} is not registered")))?;
    call_at(
        SocketAddr::new(ip, port),
        from,
        xid.wrapping_add(1),
        prog,
        vers,
        proc_,
        args,
        deadline,
    )
}

/// A transaction id unlikely to repeat across restarts.
fn new_xid() -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    t.subsec_nanos() ^ (t.as_secs() as u32).rotate_left(16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::time::Duration;

    /// A server that sends one byte of its reply every 100 ms (a record
    /// that never ends) cannot hold a call past its deadline.
    #[test]
    fn a_trickling_peer_cannot_hold_a_call_past_its_deadline() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = l.local_addr().unwrap();
        let peer = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            // A record mark for a 60,000-byte fragment, then a trickle.
            let _ = s.write_all(&[0x80, 0, 0xea, 0x60]);
            for _ in 0..50 {
                if s.write_all(&[0]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let start = Instant::now();
        let deadline = start + Duration::from_millis(600);
        let e = call_at(to, None, 1, 100000, 2, 0, &[], deadline).unwrap_err();
        let took = start.elapsed();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(took < Duration::from_millis(1500), "took {took:?}");
        peer.join().unwrap();
    }

    /// An outgoing connection leaves from the local address asked for.
    #[test]
    fn calls_leave_from_the_address_asked_for() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = l.local_addr().unwrap();
        let from: IpAddr = "127.0.0.3".parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let _s = connect(to, Some(from), deadline).unwrap();
        let (_, peer) = l.accept().unwrap();
        assert_eq!(peer.ip(), from);
        // A mapped peer address is the IPv4 one.
        let mapped = SocketAddr::new("::ffff:127.0.0.1".parse().unwrap(), to.port());
        let _s = connect(mapped, Some("::ffff:127.0.0.4".parse().unwrap()), deadline).unwrap();
        assert_eq!(
            l.accept().unwrap().1.ip(),
            "127.0.0.4".parse::<IpAddr>().unwrap()
        );
    }
}
