//! (Part of the binary, declared in main.rs.) The transport glue of
//! `rnfsd serve`: the NFS listeners (TCP, or the sockets of socket
//! activation), the port mapper on TCP and UDP, and the lock manager over
//! UDP, each with its event loops and worker pools.

use super::*;
use rnfsd::config::lower;
use rnfsd_transport::{Handle, Transport, UdpHandle, UdpTransport};

pub struct Running {
    nfs: Handle,
    portmap: Option<Handle>,
    /// The port mapper over UDP too (`server.udp`).
    portmap_udp: Option<UdpHandle>,
    /// NLM and NSM over UDP on the NFS addresses (`server.udp`).
    lock_udp: Option<UdpHandle>,
}

impl Running {
    pub fn nfs_addrs(&self) -> Vec<SocketAddr> {
        self.nfs.local_addrs()
    }
    pub fn portmap_addrs(&self) -> Vec<SocketAddr> {
        self.portmap
            .as_ref()
            .map(|h| h.local_addrs())
            .unwrap_or_default()
    }
    pub fn lock_udp_addrs(&self) -> Vec<SocketAddr> {
        self.lock_udp
            .as_ref()
            .map(|h| h.local_addrs())
            .unwrap_or_default()
    }
    pub fn portmap_udp_addrs(&self) -> Vec<SocketAddr> {
        self.portmap_udp
            .as_ref()
            .map(|h| h.local_addrs())
            .unwrap_or_default()
    }
    /// Include the transports' connection and pool counters in `stats`.
    pub fn add_stats_sources(&self, stats: &rnfsd_stats::Registry) {
        let h = self.nfs.clone();
        stats.add_source("nfs", move || (h.stats(), h.pool_stats()));
        if let Some(p) = &self.portmap {
            let h = p.clone();
            stats.add_source("portmap", move || (h.stats(), h.pool_stats()));
        }
        if let Some(u) = &self.portmap_udp {
            let h = u.clone();
            stats.add_source("portmap-udp", move || {
                (h.stats().as_transport_stats(), Default::default())
            });
        }
        if let Some(u) = &self.lock_udp {
            let h = u.clone();
            stats.add_source("nlm-udp", move || {
                (h.stats().as_transport_stats(), Default::default())
            });
        }
    }

    /// Stop accepting, finish in-flight calls, flush replies.
    pub fn shutdown(self) {
        if let Some(u) = &self.lock_udp {
            u.shutdown();
        }
        if let Some(u) = &self.portmap_udp {
            u.shutdown();
        }
        if let Some(p) = &self.portmap {
            p.shutdown();
        }
        self.nfs.shutdown();
    }
}

/// `activated`: listeners from socket activation, used instead of
/// binding `listen` when there are any.
pub fn start(
    cfg: &Config,
    nfs: Arc<RpcService>,
    portmap: Arc<RpcService>,
    locks: Option<Arc<RpcService>>,
    activated: Vec<std::net::TcpListener>,
) -> Result<Running, Failure> {
    let s = &cfg.server;
    let tc = if activated.is_empty() {
        lower::transport(s, s.listen.clone(), Vec::new())
    } else {
        lower::transport(s, Vec::new(), activated)
    };
    let nfs = Transport::start(tc, lower::pool(s), nfs)
        .map_err(|e| runtime_err(format!("listening on {}: {e}", list(&s.listen))))?;
    // NLM and NSM over UDP on the NFS ports: the lock daemons of Linux
    // and the BSDs may call over UDP. Small calls, answered on the
    // receiving thread.
    let lock_udp = match locks {
        Some(svc) => match UdpTransport::start(lower::udp(s, nfs.local_addrs()), svc) {
            Ok(h) => Some(h),
            Err(e) => {
                nfs.shutdown();
                return Err(runtime_err(format!(
                    "lock manager on UDP {}: {e}",
                    list(&nfs.local_addrs())
                )));
            }
        },
        None => None,
    };
    let (portmap, portmap_udp) = if s.portmap {
        // Port 111 of every address NFS listens on, once each.
        let mut addrs: Vec<SocketAddr> = Vec::new();
        for a in &nfs.local_addrs() {
            let p = SocketAddr::new(a.ip(), rnfsd_proto::portmap::PMAP_PORT);
            if !addrs.contains(&p) {
                addrs.push(p);
            }
        }
        // Over UDP as well: the lock daemons and status monitors ask
        // the port mapper over UDP. Its calls are answered on the
        // receiving thread (no pool).
        let udp = if s.udp {
            match UdpTransport::start(lower::udp(s, addrs.clone()), portmap.clone()) {
                Ok(h) => Some(h),
                Err(e) => {
                    nfs.shutdown();
                    return Err(runtime_err(format!(
                        "port mapper on UDP {}: {e}",
                        list(&addrs)
                    )));
                }
            }
        } else {
            None
        };
        let tc = lower::portmap_transport(s, addrs.clone());
        match Transport::start(tc, lower::portmap_pool(), portmap) {
            Ok(h) => (Some(h), udp),
            Err(e) => {
                if let Some(u) = &udp {
                    u.shutdown();
                }
                nfs.shutdown();
                return Err(runtime_err(format!("port mapper on {}: {e}", list(&addrs))));
            }
        }
    } else {
        (None, None)
    };
    Ok(Running {
        nfs,
        portmap,
        portmap_udp,
        lock_udp,
    })
}
