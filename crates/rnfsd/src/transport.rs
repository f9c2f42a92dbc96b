//! (Part of the binary, declared in main.rs.) The transport glue of
//! `rnfsd serve`: the NFS listeners (TCP, or the sockets of socket
//! activation), the port mapper on TCP and UDP, and the lock manager over
//! UDP, each with its event loops and worker pools.

use super::*;
use rnfsd_pool::{PoolConfig, Threads};
use rnfsd_transport::{
    Handle, PoolLayout, Transport, TransportConfig, UdpConfig, UdpHandle, UdpTransport,
};

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

fn transport_config(s: &config::ServerConfig, listen: Vec<SocketAddr>) -> TransportConfig {
    TransportConfig {
        listen,
        event_threads: s.event_loops(),
        max_connections: s.max_connections,
        max_connections_per_client: s.max_connections_per_client,
        max_record: s.max_record() as usize,
        max_inflight_per_conn: s.max_inflight_per_conn,
        max_conn_output: s.max_conn_output,
        max_buffered_bytes: s.max_buffered_bytes,
        idle_timeout: Duration::from_secs(s.idle_timeout_secs),
        shutdown_timeout: Duration::from_secs(s.shutdown_timeout_secs),
        pools: match s.pools {
            config::PoolLayout::Shared => PoolLayout::Shared,
            config::PoolLayout::PerLoop => PoolLayout::PerLoop,
        },
        pin_loops: s.pin(),
        blocking_threads: s.blocking_threads,
        blocking_nice: (s.blocking_nice != 0).then_some(s.blocking_nice),
        blocking_sched_batch: s.sync_sched_batch,
        blocking_lazy_wake: (s.blocking_lazy_wake_us > 0)
            .then(|| Duration::from_micros(s.blocking_lazy_wake_us)),
        run_inline: s.run_inline,
        alone_per_turn: s.inline_large_writes_per_turn,
        reply_batch: s.reply_batch,
        ..TransportConfig::default()
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
    let pool = s.pool_config();
    let tc = if activated.is_empty() {
        transport_config(s, s.listen.clone())
    } else {
        TransportConfig {
            listeners: activated,
            ..transport_config(s, Vec::new())
        }
    };
    let nfs = Transport::start(tc, pool, nfs)
        .map_err(|e| runtime_err(format!("listening on {}: {e}", list(&s.listen))))?;
    // NLM and NSM over UDP on the NFS ports: the lock daemons of Linux
    // and the BSDs may call over UDP. Small calls, answered on the
    // receiving thread.
    let lock_udp = match locks {
        Some(svc) => {
            let uc = UdpConfig {
                listen: nfs.local_addrs(),
                threads: s.udp_threads,
                ..UdpConfig::default()
            };
            match UdpTransport::start(uc, svc) {
                Ok(h) => Some(h),
                Err(e) => {
                    nfs.shutdown();
                    return Err(runtime_err(format!(
                        "lock manager on UDP {}: {e}",
                        list(&nfs.local_addrs())
                    )));
                }
            }
        }
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
        // Port mapper calls are tiny and rare: one thread, small records.
        let mut tc = transport_config(s, addrs.clone());
        tc.max_record = 64 * 1024;
        // Its one thread is not worth dividing or pinning.
        tc.pools = PoolLayout::Shared;
        tc.pin_loops = false;
        tc.blocking_threads = 0;
        let pool = PoolConfig {
            threads: Threads::Fixed(1),
            queue_limit: 64,
            name: "rnfsd-portmap".into(),
            ..PoolConfig::default()
        };
        // Over UDP as well: the lock daemons and status monitors ask
        // the port mapper over UDP. Its calls are answered on the
        // receiving thread (no pool).
        let udp = if s.udp {
            let uc = UdpConfig {
                listen: addrs.clone(),
                threads: s.udp_threads,
                ..UdpConfig::default()
            };
            match UdpTransport::start(uc, portmap.clone()) {
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
        match Transport::start(tc, pool, portmap) {
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
