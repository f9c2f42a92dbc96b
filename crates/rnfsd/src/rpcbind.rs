//! Registration with a system rpcbind, so clients that ask the port mapper
//! (mount.nfs without `port=`) find us.
//!
//! rpcbind only accepts SET/UNSET from local callers: by default that means
//! its AF_LOCAL socket (/run/rpcbind.sock), where we use RPCBIND v4
//! (RFC 1833 §2); a TCP connection from 127.0.0.1 counts only in its `-L`
//! mode, which we try second with PMAP v2 (RFC 1833 §3). Failure to reach
//! any of them is normal (no rpcbind running) and logged at debug level.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use rnfsd_proto::portmap::{
    universal_addr, Mapping, Rpcb, RpcbString, PMAPPROC_SET, PMAPPROC_UNSET, PMAP_VERSION, PROGRAM,
    RPCBPROC_SET, RPCBPROC_UNSET, RPCB_VERSION4,
};
use rnfsd_xdr::Dec;

use crate::programs::portmap::Registration;

/// How long any one exchange with rpcbind may take.
const TIMEOUT: Duration = Duration::from_secs(2);

/// Where a system port mapper may be reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// rpcbind's local socket: RPCBIND v4.
    Unix(PathBuf),
    /// A port mapper over TCP: PMAP v2.
    Tcp(SocketAddr),
}

/// The usual places, in the order tried.
pub fn default_endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::Unix("/run/rpcbind.sock".into()),
        Endpoint::Unix("/var/run/rpcbind.sock".into()),
        Endpoint::Tcp(SocketAddr::from(([127, 0, 0, 1], 111))),
    ]
}

trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

fn connect(ep: &Endpoint) -> io::Result<Box<dyn Stream>> {
    match ep {
        Endpoint::Unix(p) => {
            let s = UnixStream::connect(p)?;
            s.set_read_timeout(Some(TIMEOUT))?;
            s.set_write_timeout(Some(TIMEOUT))?;
            Ok(Box::new(s))
        }
        Endpoint::Tcp(a) => {
            let s = TcpStream::connect_timeout(a, TIMEOUT)?;
            s.set_read_timeout(Some(TIMEOUT))?;
            s.set_write_timeout(Some(TIMEOUT))?;
            s.set_nodelay(true)?;
            Ok(Box::new(s))
        }
    }
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_owned())
}

/// One call to the port mapper (AUTH_NONE); returns its boolean result.
fn call_bool(s: &mut dyn Stream, xid: u32, vers: u32, proc_: u32, args: &[u8]) -> io::Result<bool> {
    let res = crate::outcall::call(s, xid, PROGRAM, vers, proc_, args)?;
    Dec::new(&res)
        .bool()
        .map_err(|_| invalid("bad boolean result"))
}

fn rpcb_arg(r: &Registration, with_addr: bool) -> Vec<u8> {
    rnfsd_xdr::to_vec(&Rpcb {
        prog: r.prog,
        vers: r.vers,
        netid: RpcbString(r.netid().into()),
        addr: RpcbString(if with_addr {
            universal_addr(&r.addr)
        } else {
            String::new()
        }),
        owner: RpcbString("superuser".into()),
    })
}

fn pmap_arg(r: &Registration) -> Vec<u8> {
    rnfsd_xdr::to_vec(&Mapping {
        prog: r.prog,
        vers: r.vers,
        prot: r.proto.ipproto(),
        port: u32::from(r.addr.port()),
    })
}

/// SET (after an UNSET clearing any stale entry of a previous run) or UNSET
/// every registration through one endpoint. PMAP v2 has no IPv6, so over
/// TCP only IPv4 registrations are sent. A registration's protocol goes
/// out as given (netid "udp"/"udp6", or protocol 17 in PMAP v2): callers
/// register UDP entries only for programs they serve over UDP.
fn exchange(ep: &Endpoint, regs: &[Registration], set: bool) -> io::Result<usize> {
    let mut s = connect(ep)?;
    let mut done = 0;
    let mut xid = std::process::id().wrapping_mul(0x9e37_79b9);
    for (i, r) in regs.iter().enumerate() {
        xid = xid.wrapping_add(1);
        let ok = match ep {
            Endpoint::Unix(_) => {
                let _ = call_bool(
                    &mut *s,
                    xid,
                    RPCB_VERSION4,
                    RPCBPROC_UNSET,
                    &rpcb_arg(r, false),
                )?;
                if set {
                    xid = xid.wrapping_add(1);
                    call_bool(
                        &mut *s,
                        xid,
                        RPCB_VERSION4,
                        RPCBPROC_SET,
                        &rpcb_arg(r, true),
                    )?
                } else {
                    true
                }
            }
            Endpoint::Tcp(_) => {
                if r.addr.is_ipv6() {
                    continue;
                }
                // PMAP v2 UNSET ignores the protocol (RFC 1833 §3.2): once
                // per program version, or it would undo the SET of the
                // same version over the other protocol.
                let first = !regs[..i]
                    .iter()
                    .any(|p| !p.addr.is_ipv6() && (p.prog, p.vers) == (r.prog, r.vers));
                if first || !set {
                    let _ = call_bool(&mut *s, xid, PMAP_VERSION, PMAPPROC_UNSET, &pmap_arg(r))?;
                }
                if set {
                    xid = xid.wrapping_add(1);
                    call_bool(&mut *s, xid, PMAP_VERSION, PMAPPROC_SET, &pmap_arg(r))?
                } else {
                    true
                }
            }
        };
        if ok {
            done += 1;
        } else {
            tracing::warn!(
                ?ep,
                prog = r.prog,
                vers = r.vers,
                "rpcbind refused registration"
            );
        }
    }
    Ok(done)
}

/// What was registered where, to undo at exit.
#[derive(Debug)]
pub struct Registered {
    endpoint: Endpoint,
    regs: Vec<Registration>,
}

/// Register with the first endpoint that answers. None when no port mapper
/// could be reached (logged at debug level) or it refused everything.
pub fn register(endpoints: &[Endpoint], regs: &[Registration]) -> Option<Registered> {
    for ep in endpoints {
        match exchange(ep, regs, true) {
            Ok(0) => {
                tracing::debug!(?ep, "port mapper refused every registration");
            }
            Ok(n) => {
                tracing::info!(
                    ?ep,
                    registered = n,
                    "registered with the system port mapper"
                );
                return Some(Registered {
                    endpoint: ep.clone(),
                    regs: regs.to_vec(),
                });
            }
            Err(e) => tracing::debug!(?ep, error = %e, "port mapper not reachable"),
        }
    }
    None
}

impl Registered {
    /// UNSET what `register` set.
    pub fn unregister(&self) {
        match exchange(&self.endpoint, &self.regs, false) {
            Ok(_) => tracing::debug!(ep = ?self.endpoint, "unregistered from the port mapper"),
            Err(e) => tracing::warn!(ep = ?self.endpoint, error = %e, "unregister failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rnfsd_proto::portmap::IPPROTO_TCP;
    use rnfsd_proto::rpc::{encode_accepted, encode_denied, Incoming, RejectStat};
    use rnfsd_proto::rpc::{AcceptStat, CallHeader};
    use rnfsd_xdr::Enc;
    use std::net::TcpListener;
    use std::os::unix::net::UnixListener;
    use std::sync::mpsc;

    /// A fake port mapper: reads calls, records (vers, proc, args), answers
    /// `answer` (or a denied reply when None).
    fn serve<S: Read + Write>(
        mut s: S,
        answer: Option<bool>,
        tx: mpsc::Sender<(u32, u32, Vec<u8>)>,
    ) {
        loop {
            let mut mark = [0u8; 4];
            if s.read_exact(&mut mark).is_err() {
                return;
            }
            let n = (u32::from_be_bytes(mark) & 0x7fff_ffff) as usize;
            let mut rec = vec![0; n];
            s.read_exact(&mut rec).unwrap();
            let mut d = Dec::new(&rec);
            let Incoming::Call(h) = CallHeader::decode(&mut d).unwrap() else {
                panic!("not a call")
            };
            assert_eq!(h.prog, PROGRAM);
            tx.send((h.vers, h.proc_, d.rest().to_vec())).unwrap();
            let mut e = Enc::new();
            e.u32(0);
            match answer {
                Some(b) => {
                    encode_accepted(&mut e, h.xid, AcceptStat::Success);
                    e.bool(b);
                }
                None => encode_denied(
                    &mut e,
                    h.xid,
                    RejectStat::AuthError(rnfsd_proto::rpc::AuthStat::TooWeak),
                ),
            }
            let len = e.len() as u32 - 4;
            e.patch_u32(0, 0x8000_0000 | len);
            s.write_all(e.as_slice()).unwrap();
        }
    }

    fn regs() -> Vec<Registration> {
        let a: SocketAddr = "127.0.0.1:2049".parse().unwrap();
        vec![
            Registration::tcp(100003, 3, a),
            Registration::tcp(100005, 3, a),
            Registration::tcp(100003, 3, "[::1]:2049".parse().unwrap()),
        ]
    }

    /// A lock manager over TCP and UDP: the same version on both.
    fn nlm_regs() -> Vec<Registration> {
        let a: SocketAddr = "127.0.0.1:4045".parse().unwrap();
        vec![
            Registration::tcp(100021, 4, a),
            Registration::udp(100021, 4, a),
            Registration::udp(100021, 4, "[::1]:4045".parse().unwrap()),
        ]
    }

    #[test]
    fn udp_entries_carry_their_protocol() {
        // rpcbind v4: netids udp and udp6, UNSET per netid.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rpcbind.sock");
        let l = UnixListener::bind(&path).unwrap();
        let (tx, rx) = mpsc::channel();
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            serve(s, Some(true), tx);
        });
        let r = register(&[Endpoint::Unix(path)], &nlm_regs()).unwrap();
        t.join().unwrap();
        let sets: Vec<Rpcb> = rx
            .try_iter()
            .filter(|c| c.1 == RPCBPROC_SET)
            .map(|c| rnfsd_xdr::from_slice(&c.2).unwrap())
            .collect();
        let netids: Vec<_> = sets.iter().map(|r| r.netid.0.as_str()).collect();
        assert_eq!(netids, ["tcp", "udp", "udp6"]);
        assert_eq!(sets[1].addr.0, "127.0.0.1.15.205");
        drop(r);

        // PMAP v2: protocol 17; one UNSET for the version (it ignores the
        // protocol), so the UDP SET does not undo the TCP one.
        let (a, rx, t) = pmap_v2_server();
        let r = register(&[Endpoint::Tcp(a)], &nlm_regs()).unwrap();
        t.join().unwrap();
        let calls: Vec<_> = rx.try_iter().collect();
        assert_eq!(calls.iter().map(|c| c.1).collect::<Vec<_>>(), [2, 1, 1]);
        let m: Mapping = rnfsd_xdr::from_slice(&calls[2].2).unwrap();
        assert_eq!((m.prot, m.port), (17, 4045));
        drop(r);
    }

    #[test]
    fn registers_over_unix_socket_with_rpcbind_v4() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rpcbind.sock");
        let l = UnixListener::bind(&path).unwrap();
        let (tx, rx) = mpsc::channel();
        let t = std::thread::spawn(move || {
            for _ in 0..2 {
                let (s, _) = l.accept().unwrap();
                serve(s, Some(true), tx.clone());
            }
        });
        let missing = Endpoint::Unix(dir.path().join("nope.sock"));
        let r = register(&[missing, Endpoint::Unix(path)], &regs()).unwrap();
        let calls: Vec<_> = rx.try_iter().collect();
        // UNSET + SET per registration.
        assert_eq!(calls.len(), 6);
        assert!(calls.iter().all(|c| c.0 == RPCB_VERSION4));
        let procs: Vec<_> = calls.iter().map(|c| c.1).collect();
        assert_eq!(procs, [2, 1, 2, 1, 2, 1]);
        let set: Rpcb = rnfsd_xdr::from_slice(&calls[1].2).unwrap();
        assert_eq!(set.prog, 100003);
        assert_eq!(set.netid.0, "tcp");
        assert_eq!(set.addr.0, "127.0.0.1.8.1");
        let set6: Rpcb = rnfsd_xdr::from_slice(&calls[5].2).unwrap();
        assert_eq!(
            (set6.netid.0.as_str(), set6.addr.0.as_str()),
            ("tcp6", "::1.8.1")
        );
        r.unregister();
        t.join().unwrap();
        let calls: Vec<_> = rx.try_iter().collect();
        assert_eq!(calls.iter().map(|c| c.1).collect::<Vec<_>>(), [2, 2, 2]);
    }

    /// The calls a test port mapper saw: (version, procedure, args).
    type Calls = mpsc::Receiver<(u32, u32, Vec<u8>)>;

    /// A PMAP v2 port mapper on a free port that accepts one connection,
    /// answers every call `true` and reports (version, procedure, args).
    fn pmap_v2_server() -> (std::net::SocketAddr, Calls, std::thread::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        let (tx, rx) = mpsc::channel();
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            serve(s, Some(true), tx);
        });
        (a, rx, t)
    }

    #[test]
    fn registers_over_tcp_with_pmap_v2() {
        let (a, rx, t) = pmap_v2_server();
        let r = register(&[Endpoint::Tcp(a)], &regs()).unwrap();
        t.join().unwrap();
        let calls: Vec<_> = rx.try_iter().collect();
        // The IPv6 registration cannot be said in PMAP v2.
        assert_eq!(calls.len(), 4);
        assert!(calls.iter().all(|c| c.0 == PMAP_VERSION));
        let m: Mapping = rnfsd_xdr::from_slice(&calls[3].2).unwrap();
        assert_eq!(
            m,
            Mapping {
                prog: 100005,
                vers: 3,
                prot: IPPROTO_TCP,
                port: 2049
            }
        );
        drop(r);
    }

    #[test]
    fn refusals_and_absence_are_not_errors() {
        // Nobody listening.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        drop(l);
        assert!(register(&[Endpoint::Tcp(a)], &regs()).is_none());
        // Answers false to every SET.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        let (tx, _rx) = mpsc::channel();
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            serve(s, Some(false), tx);
        });
        assert!(register(&[Endpoint::Tcp(a)], &regs()).is_none());
        t.join().unwrap();
        // Denies the call outright.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        let (tx, _rx) = mpsc::channel();
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            serve(s, None, tx);
        });
        assert!(register(&[Endpoint::Tcp(a)], &regs()).is_none());
        t.join().unwrap();
    }
}
