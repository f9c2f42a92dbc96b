//! `rnfsd-bench ceiling`: a no-work RPC server, the machine's ceiling for
//! calls/s at a load shape. It answers MOUNT's MNT with a fixed handle and
//! every other call with an empty success (NULL's reply, RFC 5531 §9), and
//! does nothing else: no decoding past the header, no credentials, no
//! filesystem. `scripts/compare.sh --servers ...,ceiling` runs the `null`
//! workload against it beside rnfsd, so "the machine, not the server, is the
//! limit" is measured in the same run instead of assumed. Not a server for
//! clients.
//!
//! The loop is written by hand, not taken from rnfsd's transport or a
//! framework: a ceiling must cost less than the servers it bounds, so it is
//! a few event loops (mio, as rnfsd's) that read what a socket holds, answer
//! every whole record in it and write the answers together (one `write` per
//! 256 KiB of them). The
//! replies are encoded with the project's own `rnfsd-proto` encoders.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use rnfsd_client::record::LAST_FRAGMENT;
use rnfsd_proto::mount::{self, FHandle3, MountRes3};
use rnfsd_proto::rpc::{encode_accepted, AcceptStat, AUTH_SYS};
use rnfsd_xdr::{Enc, Xdr};

#[derive(clap::Args, Clone, Debug)]
pub struct CeilingArgs {
    /// Address to listen on (port 0: any free port; see --port-file).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: String,
    /// Write the bound port here once listening.
    #[arg(long)]
    pub port_file: Option<PathBuf>,
    /// Event loops (default: one per CPU, as rnfsd).
    #[arg(long)]
    pub loops: Option<usize>,
    /// Connections held at most; more are closed at once.
    #[arg(long, default_value_t = 1024)]
    pub max_conns: usize,
}

/// A record larger than this closes its connection: NULL and MNT calls
/// are a few hundred bytes.
const MAX_RECORD: usize = 64 * 1024;
/// Bytes read per `read`.
const READ_CHUNK: usize = 64 * 1024;
/// Answers gathered before they are written (a client sending faster than
/// it reads is not read further until they are).
const MAX_OUT: usize = 256 * 1024;
/// Handle returned by MNT (any fixed bytes do: nothing is resolved).
const FAKE_FH: [u8; 32] = [7; 32];
const WAKE: Token = Token(usize::MAX);

pub fn ceiling_cmd(a: CeilingArgs) -> Result<(), String> {
    let listener = TcpListener::bind(&a.listen).map_err(|e| format!("bind {}: {e}", a.listen))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let loops = a
        .loops
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, 64);
    let mut handoff: Vec<(Sender<TcpStream>, Arc<Waker>)> = Vec::with_capacity(loops);
    let conns = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for i in 0..loops {
        let poll = Poll::new().map_err(|e| e.to_string())?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKE).map_err(|e| e.to_string())?);
        let (tx, rx) = channel();
        handoff.push((tx, waker));
        let conns = conns.clone();
        std::thread::Builder::new()
            .name(format!("ceiling-{i}"))
            .spawn(move || event_loop(poll, rx, &conns))
            .map_err(|e| e.to_string())?;
    }
    if let Some(p) = &a.port_file {
        std::fs::write(p, port.to_string()).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    eprintln!("rnfsd-bench ceiling: listening on port {port}, {loops} loops");
    let mut next = 0usize;
    for s in listener.incoming() {
        let Ok(s) = s else { continue };
        if conns.load(std::sync::atomic::Ordering::Relaxed) >= a.max_conns {
            continue; // dropped: closed
        }
        if s.set_nodelay(true).is_err() || s.set_nonblocking(true).is_err() {
            continue;
        }
        conns.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, waker) = &handoff[next % loops];
        next = next.wrapping_add(1);
        if tx.send(s).is_ok() {
            let _ = waker.wake();
        }
    }
    Ok(())
}

struct Conn {
    s: TcpStream,
    inb: Vec<u8>,
    out: Vec<u8>,
    /// Bytes of `out` already written (the rest waits for WRITABLE).
    sent: usize,
}

fn event_loop(mut poll: Poll, rx: Receiver<TcpStream>, count: &std::sync::atomic::AtomicUsize) {
    let mut events = Events::with_capacity(256);
    let mut conns: HashMap<usize, Conn> = HashMap::new();
    let mut next_token = 0usize;
    loop {
        if poll.poll(&mut events, None).is_err() {
            continue;
        }
        for ev in events.iter() {
            if ev.token() == WAKE {
                while let Ok(s) = rx.try_recv() {
                    let t = next_token;
                    next_token = (next_token + 1) % (usize::MAX - 1);
                    let fd = s.as_raw_fd();
                    if poll
                        .registry()
                        .register(
                            &mut SourceFd(&fd),
                            Token(t),
                            // Edge-triggered (mio): WRITABLE fires only
                            // once a full socket drains, so it stays on.
                            Interest::READABLE | Interest::WRITABLE,
                        )
                        .is_ok()
                    {
                        let c = Conn {
                            s,
                            inb: Vec::with_capacity(READ_CHUNK),
                            out: Vec::with_capacity(4096),
                            sent: 0,
                        };
                        conns.insert(t, c);
                    } else {
                        count.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
                continue;
            }
            let t = ev.token().0;
            let Some(c) = conns.get_mut(&t) else { continue };
            if serve(c).is_err() {
                let fd = c.s.as_raw_fd();
                let _ = poll.registry().deregister(&mut SourceFd(&fd));
                conns.remove(&t);
                count.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
}

/// Reads what the socket holds, answers each whole record, writes the
/// answers. Err: close the connection (EOF, error, or a bad record).
/// Bounds: `inb` holds at most one partial record and one read; `out` is
/// written once it reaches `MAX_OUT`, and reading stops while it cannot be
/// (WRITABLE resumes it: the socket's data is still there).
fn serve(c: &mut Conn) -> io::Result<()> {
    let mut buf = [0u8; READ_CHUNK];
    // What an earlier call could not write goes first; while the client
    // reads slower than it sends, nothing more is read.
    if !flush(c)? {
        return Ok(());
    }
    loop {
        if c.out.len() >= MAX_OUT && !flush(c)? {
            return Ok(());
        }
        match c.s.read(&mut buf) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                c.inb.extend_from_slice(&buf[..n]);
                answer(&mut c.inb, &mut c.out)?;
                // A short read drained the socket: new data is a new edge.
                if n < buf.len() {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    flush(c).map(|_| ())
}

/// Writes what `out` holds: true when all of it went (the buffer is then
/// empty), false when the socket is full (WRITABLE resumes).
fn flush(c: &mut Conn) -> io::Result<bool> {
    while c.sent < c.out.len() {
        match c.s.write(&c.out[c.sent..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => c.sent += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    c.out.clear();
    c.sent = 0;
    Ok(true)
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    let w = b.get(at..at + 4)?;
    Some(u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
}

/// Answers every whole single-fragment record at the front of `inb`
/// (RFC 5531 §11 record marking) into `out`, and drops them from `inb`.
fn answer(inb: &mut Vec<u8>, out: &mut Vec<u8>) -> io::Result<()> {
    let bad = || io::Error::from(io::ErrorKind::InvalidData);
    let mut at = 0;
    while let Some(mark) = be32(inb, at) {
        // Only single-fragment records: the last-fragment bit must be set.
        if mark & LAST_FRAGMENT == 0 {
            return Err(bad());
        }
        let len = (mark & !LAST_FRAGMENT) as usize;
        if len > MAX_RECORD {
            return Err(bad());
        }
        if inb.len() - at - 4 < len {
            break;
        }
        let rec = &inb[at + 4..at + 4 + len];
        // Call header: xid, CALL, rpcvers, prog, vers, proc.
        let (Some(xid), Some(prog), Some(proc_)) = (be32(rec, 0), be32(rec, 12), be32(rec, 20))
        else {
            return Err(bad());
        };
        reply(out, xid, prog == mount::PROGRAM && proc_ == mount::PROC_MNT);
        at += 4 + len;
    }
    inb.drain(..at);
    Ok(())
}

/// An accepted, successful reply (AUTH_NONE verifier); MNT's carries a
/// handle and AUTH_SYS as its one flavour (RFC 1813 §5.2.1).
fn reply(out: &mut Vec<u8>, xid: u32, mnt: bool) {
    let start = out.len();
    let mut e = Enc::from_vec(std::mem::take(out));
    e.u32(0); // record mark, patched below
    encode_accepted(&mut e, xid, AcceptStat::Success);
    if mnt {
        MountRes3::Ok {
            fhandle: FHandle3(FAKE_FH.to_vec()),
            auth_flavors: vec![AUTH_SYS],
        }
        .encode(&mut e);
    }
    let len = (e.len() - start - 4) as u32;
    e.patch_u32(start, LAST_FRAGMENT | len);
    *out = e.into_vec();
}

#[cfg(test)]
mod tests {
    use super::*;
    use rnfsd_proto::rpc::{CallHeader, OpaqueAuth};

    const MOUNT_PROG: u32 = mount::PROGRAM;
    const MOUNTPROC3_MNT: u32 = mount::PROC_MNT;

    fn call(xid: u32, prog: u32, proc_: u32) -> Vec<u8> {
        let mut e = Enc::new();
        e.u32(0); // record mark
        CallHeader {
            xid,
            rpcvers: 2,
            prog,
            vers: 3,
            proc_,
            cred: OpaqueAuth::NONE,
            verf: OpaqueAuth::NONE,
        }
        .encode(&mut e);
        let len = e.len() as u32 - 4;
        e.patch_u32(0, LAST_FRAGMENT | len);
        e.into_vec()
    }

    #[test]
    fn answers_whole_records_and_keeps_a_partial_one() {
        let mut inb = call(5, 100_003, 0);
        inb.extend_from_slice(&call(6, MOUNT_PROG, MOUNTPROC3_MNT));
        let third = call(7, 100_003, 0);
        inb.extend_from_slice(&third[..10]);
        let mut out = Vec::new();
        answer(&mut inb, &mut out).unwrap();
        assert_eq!(inb, third[..10]);
        // NULL: mark + 6 words; MNT: + status, handle, one flavour.
        assert_eq!(be32(&out, 0), Some(LAST_FRAGMENT | 24));
        assert_eq!(be32(&out, 4), Some(5));
        let mnt = &out[28..];
        assert_eq!(be32(mnt, 0), Some(LAST_FRAGMENT | (24 + 8 + 32 + 8)));
        assert_eq!(be32(mnt, 4), Some(6));
        assert_eq!(be32(mnt, 28), Some(0));
        assert_eq!(be32(mnt, 32), Some(32));
    }

    /// Starts a ceiling server on a free port (its thread lives as long as
    /// the test process) and returns the port.
    fn start() -> u16 {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let pf = std::env::temp_dir().join(format!("ceiling-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_file(&pf);
        let args = CeilingArgs {
            listen: "127.0.0.1:0".into(),
            port_file: Some(pf.clone()),
            loops: Some(2),
            max_conns: 8,
        };
        std::thread::spawn(move || ceiling_cmd(args));
        let port = (0..200)
            .find_map(|_| {
                std::thread::sleep(std::time::Duration::from_millis(10));
                std::fs::read_to_string(&pf)
                    .ok()?
                    .trim()
                    .parse::<u16>()
                    .ok()
            })
            .expect("port file");
        let _ = std::fs::remove_file(&pf);
        port
    }

    /// Over real TCP: a burst of calls in one write gets every answer, in
    /// order, and a bad record closes only its own connection.
    #[test]
    fn answers_over_tcp() {
        let addr = ("127.0.0.1", start());
        let mut bad = TcpStream::connect(addr).unwrap();
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let mut burst = Vec::new();
        for xid in 0..100 {
            burst.extend_from_slice(&call(xid, 100_003, 0));
        }
        burst.extend_from_slice(&call(100, MOUNT_PROG, MOUNTPROC3_MNT));
        s.write_all(&burst).unwrap();
        bad.write_all(&[0, 0, 0, 4, 1, 2, 3, 4]).unwrap();
        let mut got = vec![0u8; 100 * 28 + 28 + 8 + 32 + 8];
        s.read_exact(&mut got).unwrap();
        for xid in 0..100u32 {
            assert_eq!(be32(&got, xid as usize * 28 + 4), Some(xid));
        }
        assert_eq!(be32(&got, 100 * 28 + 4), Some(100));
        assert_eq!(be32(&got, 100 * 28 + 28), Some(0));
        assert_eq!(be32(&got, 100 * 28 + 32), Some(32));
        // The bad connection is closed (EOF); the good one still answers.
        bad.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        assert_eq!(bad.read(&mut [0u8; 4]).unwrap(), 0);
        s.write_all(&call(7, 100_003, 0)).unwrap();
        let mut one = [0u8; 28];
        s.read_exact(&mut one).unwrap();
        assert_eq!(be32(&one, 4), Some(7));
    }

    /// A client that sends far more than it reads: the answers wait in
    /// bounded buffers and socket queues, and every one arrives, in order,
    /// once it reads (the loop resumes on WRITABLE, losing no readable data).
    #[test]
    fn a_client_that_reads_late_gets_every_answer() {
        const CALLS: u32 = 200_000;
        let s = TcpStream::connect(("127.0.0.1", start())).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        // A small receive queue, so that the server's sends fill up.
        let small: libc::c_int = 65536;
        // SAFETY: a valid socket and a pointer to an int of the size given.
        let rc = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&s),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&small as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0);
        let mut w = s.try_clone().unwrap();
        let sender = std::thread::spawn(move || {
            let mut burst = Vec::with_capacity(10_000 * 44);
            for first in (0..CALLS).step_by(10_000) {
                burst.clear();
                for xid in first..first + 10_000 {
                    burst.extend_from_slice(&call(xid, 100_003, 0));
                }
                w.write_all(&burst).unwrap();
            }
        });
        // Not reading for a second lets the answers outgrow the client's
        // small receive queue and the server's send queue (4 MB at most
        // here), so the server meets a full socket: a build that dropped
        // what it could not write fails here (checked by hand).
        std::thread::sleep(std::time::Duration::from_millis(1000));
        let mut r = std::io::BufReader::new(s);
        let mut one = [0u8; 28];
        for xid in 0..CALLS {
            r.read_exact(&mut one).unwrap();
            assert_eq!(be32(&one, 4), Some(xid));
        }
        sender.join().unwrap();
    }

    #[test]
    fn refuses_fragments_and_oversized_records() {
        let mut out = Vec::new();
        let mut frag = call(1, 100_003, 0);
        frag[0] &= 0x7f;
        assert!(answer(&mut frag, &mut out).is_err());
        let mut big = (LAST_FRAGMENT | (MAX_RECORD as u32 + 1))
            .to_be_bytes()
            .to_vec();
        assert!(answer(&mut big, &mut out).is_err());
        let mut short = (LAST_FRAGMENT | 8).to_be_bytes().to_vec();
        short.extend_from_slice(&[0; 8]);
        assert!(answer(&mut short, &mut out).is_err());
        assert!(out.is_empty());
    }
}
