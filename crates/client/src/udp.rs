//! RPC over UDP (RFC 5531; one datagram per call and reply), for the
//! programs served that way (the port mapper, NLM, NSM): one call at a
//! time on its own socket, retransmitted with the same xid until a reply
//! with that xid comes or the timeout passes.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rnfsd_xdr::Xdr;
use tokio::net::UdpSocket;

use crate::auth::Auth;
use crate::conn::decode_results;
use crate::error::ClientError;

/// Largest datagram taken (the server's bound).
const MAX_DATAGRAM: usize = 64 * 1024;
/// Resend after this long without a reply (UDP drops are silent).
const RETRANSMIT: Duration = Duration::from_millis(500);

/// A UDP RPC client for one server address.
pub struct UdpClient {
    sock: UdpSocket,
    auth: Auth,
    timeout: Duration,
    next_xid: std::sync::atomic::AtomicU32,
}

impl UdpClient {
    /// A socket on an ephemeral local port of the right family, calling
    /// `server` with `auth`; each call gives up after `timeout`.
    pub async fn connect(
        server: SocketAddr,
        auth: Auth,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        let local = if server.is_ipv4() {
            SocketAddr::from(([0u8; 4], 0))
        } else {
            SocketAddr::from(([0u16; 8], 0))
        };
        let sock = UdpSocket::bind(local).await?;
        sock.connect(server).await?;
        // Distinct from earlier runs' xids, so a late reply is not taken
        // for ours.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
            ^ std::process::id();
        Ok(UdpClient {
            sock,
            auth,
            timeout,
            next_xid: std::sync::atomic::AtomicU32::new(seed),
        })
    }

    /// Calls `prog`/`vers`/`proc_` with `args`; the decoded result.
    pub async fn call<A: Xdr, R: Xdr>(
        &self,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &A,
    ) -> Result<R, ClientError> {
        let xid = self
            .next_xid
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The TCP call builder's message, less its record mark (UDP has
        // none, RFC 5531 §11), with the xid in its slot.
        let mut e = crate::conn::start_call(&self.auth, prog, vers, proc_);
        e.patch_u32(4, xid);
        args.encode(&mut e);
        if e.len() - 4 > MAX_DATAGRAM {
            return Err(ClientError::InvalidInput(format!(
                "call of {} bytes exceeds one datagram ({MAX_DATAGRAM})",
                e.len() - 4
            )));
        }
        let deadline = Instant::now() + self.timeout;
        let mut buf = vec![0u8; MAX_DATAGRAM];
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(ClientError::Timeout);
            }
            self.sock.send(&e.as_slice()[4..]).await?;
            let wait = RETRANSMIT.min(deadline - now);
            let until = tokio::time::Instant::now() + wait;
            // Replies to earlier xids (retransmissions answered twice) are
            // skipped; ours ends the call.
            loop {
                match tokio::time::timeout_at(until, self.sock.recv(&mut buf)).await {
                    Err(_) => break,
                    Ok(Err(e)) => return Err(e.into()),
                    Ok(Ok(n)) => {
                        let rec = &buf[..n];
                        if rec.get(..4) == Some(&xid.to_be_bytes()[..]) {
                            return decode_results(rec);
                        }
                    }
                }
            }
        }
    }
}
