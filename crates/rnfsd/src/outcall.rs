//! Calls rnfsd makes to other RPC servers (the system rpcbind at start, a
//! client's port mapper and lock manager for NLM GRANTED callbacks): one
//! synchronous call over a stream with record marking (RFC 5531 §11),
//! AUTH_NONE, a bounded reply. Rare and off the request path, so plain
//! blocking I/O with the stream's timeouts is all it needs.

use std::io::{self, Read, Write};

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

/// Calls `prog`/`vers`/`proc_` of the RPC server on host `ip`, over TCP at
/// the port its port mapper (PMAP v2 GETPORT, RFC 1833 §3) gives; each
/// step bounded by `timeout`. Returns the result's bytes.
pub fn call_registered(
    ip: std::net::IpAddr,
    prog: u32,
    vers: u32,
    proc_: u32,
    args: &[u8],
    timeout: std::time::Duration,
) -> io::Result<Vec<u8>> {
    use rnfsd_proto::portmap::{Mapping, IPPROTO_TCP, PMAPPROC_GETPORT, PMAP_PORT, PMAP_VERSION};
    use std::net::{SocketAddr, TcpStream};
    let connect = |port: u16| -> io::Result<TcpStream> {
        let s = TcpStream::connect_timeout(&SocketAddr::new(ip, port), timeout)?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        Ok(s)
    };
    let xid = new_xid();
    let query = rnfsd_xdr::to_vec(&Mapping {
        prog,
        vers,
        prot: IPPROTO_TCP,
        port: 0,
    });
    let res = call(
        &mut connect(PMAP_PORT)?,
        xid,
        rnfsd_proto::portmap::PROGRAM,
        PMAP_VERSION,
        PMAPPROC_GETPORT,
        &query,
    )?;
    let port = Dec::new(&res)
        .u32()
        .ok()
        .and_then(|p| u16::try_from(p).ok())
        .filter(|&p| p != 0)
        .ok_or_else(|| io::Error::other(format!("program {prog} v{vers} is not registered")))?;
    call(
        &mut connect(port)?,
        xid.wrapping_add(1),
        prog,
        vers,
        proc_,
        args,
    )
}

/// A transaction id unlikely to repeat across restarts.
fn new_xid() -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    t.subsec_nanos() ^ (t.as_secs() as u32).rotate_left(16)
}
