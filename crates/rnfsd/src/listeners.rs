//! The sockets `rnfsd serve` answers on: the NFS listeners (TCP, or the
//! sockets of socket activation), the port mapper on TCP and UDP, and the
//! lock manager over UDP, each with its event loops and worker pools (the
//! rnfsd-transport crate). Their options come from `config::lower`.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use rnfsd_transport::{Handle, Transport, UdpHandle, UdpTransport};

use crate::comma_list as list;
use crate::config::{lower, ServerConfig};
use crate::state::Server;
use rnfsd_rpc::RpcService;

/// What the listeners serve.
pub struct Services {
    /// NFS, MOUNT and (with `nlm`) NLM and NSM, on the NFS addresses.
    pub nfs: Arc<RpcService<Server>>,
    /// The port mapper (started with `portmap`).
    pub portmap: Arc<RpcService<Server>>,
    /// NLM and NSM over UDP on the NFS addresses (None: not served).
    pub locks_udp: Option<Arc<RpcService<Server>>>,
}

/// The running listeners.
pub struct Listeners {
    nfs: Handle,
    portmap: Option<Handle>,
    /// The port mapper over UDP too (`server.udp`).
    portmap_udp: Option<UdpHandle>,
    /// NLM and NSM over UDP on the NFS addresses (`server.udp`).
    lock_udp: Option<UdpHandle>,
}

fn addrs_of<H>(h: &Option<H>, f: impl Fn(&H) -> Vec<SocketAddr>) -> Vec<SocketAddr> {
    h.as_ref().map(f).unwrap_or_default()
}

impl Listeners {
    pub fn nfs_addrs(&self) -> Vec<SocketAddr> {
        self.nfs.local_addrs()
    }
    pub fn portmap_addrs(&self) -> Vec<SocketAddr> {
        addrs_of(&self.portmap, Handle::local_addrs)
    }
    pub fn lock_udp_addrs(&self) -> Vec<SocketAddr> {
        addrs_of(&self.lock_udp, UdpHandle::local_addrs)
    }
    pub fn portmap_udp_addrs(&self) -> Vec<SocketAddr> {
        addrs_of(&self.portmap_udp, UdpHandle::local_addrs)
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

/// Starts every listener `s` asks for. `activated`: listeners from socket
/// activation, used instead of binding `s.listen` when there are any. On
/// an error, those already started are stopped.
pub fn start(
    s: &ServerConfig,
    services: Services,
    activated: Vec<TcpListener>,
) -> Result<Listeners, String> {
    let tc = match activated.is_empty() {
        true => lower::transport(s, s.listen.clone(), Vec::new()),
        false => lower::transport(s, Vec::new(), activated),
    };
    let nfs = Transport::start(tc, lower::pool(s), services.nfs)
        .map_err(|e| format!("listening on {}: {e}", list(&s.listen)))?;
    let mut l = Listeners {
        nfs,
        portmap: None,
        portmap_udp: None,
        lock_udp: None,
    };
    // NLM and NSM over UDP on the NFS ports: the lock daemons of Linux
    // and the BSDs may call over UDP. Small calls, answered on the
    // receiving thread.
    if let Some(svc) = services.locks_udp {
        let addrs = l.nfs.local_addrs();
        match UdpTransport::start(lower::udp(s, addrs.clone()), svc) {
            Ok(h) => l.lock_udp = Some(h),
            Err(e) => {
                l.shutdown();
                return Err(format!("lock manager on UDP {}: {e}", list(&addrs)));
            }
        }
    }
    if s.portmap {
        if let Err(e) = start_portmap(s, &mut l, services.portmap) {
            l.shutdown();
            return Err(e);
        }
    }
    Ok(l)
}

/// The port mapper on port 111 of every address NFS listens on (once
/// each), over TCP and (with `udp`) UDP.
fn start_portmap(
    s: &ServerConfig,
    l: &mut Listeners,
    svc: Arc<RpcService<Server>>,
) -> Result<(), String> {
    let mut addrs: Vec<SocketAddr> = Vec::new();
    for a in &l.nfs.local_addrs() {
        let p = SocketAddr::new(a.ip(), rnfsd_proto::portmap::PMAP_PORT);
        if !addrs.contains(&p) {
            addrs.push(p);
        }
    }
    // Over UDP as well: the lock daemons and status monitors ask the port
    // mapper over UDP. Its calls are answered on the receiving thread (no
    // pool).
    if s.udp {
        let h = UdpTransport::start(lower::udp(s, addrs.clone()), svc.clone())
            .map_err(|e| format!("port mapper on UDP {}: {e}", list(&addrs)))?;
        l.portmap_udp = Some(h);
    }
    let tc = lower::portmap_transport(s, addrs.clone());
    let h = Transport::start(tc, lower::portmap_pool(), svc)
        .map_err(|e| format!("port mapper on {}: {e}", list(&addrs)))?;
    l.portmap = Some(h);
    Ok(())
}
