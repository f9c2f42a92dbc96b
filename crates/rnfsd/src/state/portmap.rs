//! What the built-in port mapper answers from (`Server::registrations`):
//! this process's own programs, one entry per version, protocol and
//! listener.

use std::net::SocketAddr;

use rnfsd_proto::portmap::{IPPROTO_TCP, IPPROTO_UDP};

/// The transport of a registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Proto {
    #[default]
    Tcp,
    Udp,
}

impl Proto {
    /// PMAP v2's protocol number (RFC 1833 §3.1).
    pub fn ipproto(self) -> u32 {
        match self {
            Proto::Tcp => IPPROTO_TCP,
            Proto::Udp => IPPROTO_UDP,
        }
    }

    /// The netid of RPCBIND v3/v4 (RFC 1833 §2.1) for this protocol and
    /// address family.
    pub fn netid(self, v6: bool) -> &'static str {
        match (self, v6) {
            (Proto::Tcp, false) => "tcp",
            (Proto::Tcp, true) => "tcp6",
            (Proto::Udp, false) => "udp",
            (Proto::Udp, true) => "udp6",
        }
    }

    /// The protocol and address family (v6) of an RPCBIND netid.
    pub fn from_netid(netid: &str) -> Option<(Proto, bool)> {
        [Proto::Tcp, Proto::Udp]
            .into_iter()
            .flat_map(|p| [(p, false), (p, true)])
            .find(|(p, v6)| p.netid(*v6) == netid)
    }
}

/// One program version this process serves over `proto` at `addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    pub prog: u32,
    pub vers: u32,
    pub addr: SocketAddr,
    pub proto: Proto,
}

impl Registration {
    pub fn tcp(prog: u32, vers: u32, addr: SocketAddr) -> Self {
        Registration {
            prog,
            vers,
            addr,
            proto: Proto::Tcp,
        }
    }

    pub fn udp(prog: u32, vers: u32, addr: SocketAddr) -> Self {
        Registration {
            prog,
            vers,
            addr,
            proto: Proto::Udp,
        }
    }

    /// RPCBIND's netid for this entry ("tcp", "tcp6", "udp", "udp6").
    pub fn netid(&self) -> &'static str {
        self.proto.netid(self.addr.is_ipv6())
    }
}
