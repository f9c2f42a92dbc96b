//! Built-in port mapper (`--portmap`): PMAP version 2 (RFC 1833 §3) and
//! the read side of RPCBIND versions 3 and 4 (RFC 1833 §2), answering for
//! this server's own programs only.
//!
//! SET and UNSET are refused (answered false): the table is this process's
//! listeners, fixed at start. CALLIT and the other forwarding procedures
//! are not served (PROC_UNAVAIL): they are a reflection/amplification risk
//! and no NFS client needs them.

use std::net::SocketAddr;

use rnfsd_proto::portmap::{
    universal_addr, Mapping, PmapList, Rpcb, RpcbList, RpcbString, IPPROTO_TCP, IPPROTO_UDP,
};

use crate::programs::{CallCtx, Program, Version};
pub use crate::state::portmap::{Proto, Registration};
use crate::state::Server;
use rnfsd_rpc::proc_entry;
use rnfsd_rpc::{CacheClass, ProcError};

/// Bound on registrations (programs × versions × listeners).
pub const MAX_REGISTRATIONS: usize = 256;

/// Set what `server`'s GETPORT, GETADDR and DUMP report. Called once at
/// start, after the listeners are bound (so ephemeral ports are known).
pub fn set_registrations(server: &Server, mut regs: Vec<Registration>) {
    regs.truncate(MAX_REGISTRATIONS);
    let mut g = server
        .registrations
        .write()
        .unwrap_or_else(|p| p.into_inner());
    *g = regs;
}

fn registrations(ctx: &CallCtx<'_>) -> Vec<Registration> {
    ctx.server
        .registrations
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// The registrations a program's GETPORT/GETADDR should answer from: the
/// exact version if present, else (like rpcbind's find_service) any
/// version of the program, so the client then learns the supported range
/// from the program itself with PROG_MISMATCH.
fn find(
    regs: &[Registration],
    prog: u32,
    vers: u32,
    proto: Proto,
    v6: bool,
) -> Option<Registration> {
    let family = |r: &&Registration| r.addr.is_ipv6() == v6 && r.proto == proto;
    regs.iter()
        .filter(family)
        .find(|r| r.prog == prog && r.vers == vers)
        .or_else(|| regs.iter().filter(family).find(|r| r.prog == prog))
        .copied()
}

/// The address a client should use: the registered one, or, when that is
/// a wildcard, the address the client reached us at with the registered port.
fn reachable_addr(ctx: &CallCtx<'_>, r: &Registration) -> SocketAddr {
    if r.addr.ip().is_unspecified() {
        SocketAddr::new(ctx.local.ip(), r.addr.port())
    } else {
        r.addr
    }
}

fn null(_: &CallCtx<'_>, _: ()) -> Result<(), ProcError> {
    Ok(())
}

fn pmap_set(ctx: &CallCtx<'_>, m: Mapping) -> Result<bool, ProcError> {
    tracing::debug!(peer = %ctx.peer, ?m, "refusing portmap SET/UNSET");
    Ok(false)
}

fn pmap_getport(ctx: &CallCtx<'_>, m: Mapping) -> Result<u32, ProcError> {
    let proto = match m.prot {
        IPPROTO_TCP => Proto::Tcp,
        IPPROTO_UDP => Proto::Udp,
        _ => return Ok(0),
    };
    let regs = registrations(ctx);
    let r = find(&regs, m.prog, m.vers, proto, false)
        .or_else(|| find(&regs, m.prog, m.vers, proto, true));
    Ok(r.map_or(0, |r| u32::from(r.addr.port())))
}

fn pmap_dump(ctx: &CallCtx<'_>, _: ()) -> Result<PmapList, ProcError> {
    let mut out: Vec<Mapping> = Vec::new();
    for r in registrations(ctx) {
        let m = Mapping {
            prog: r.prog,
            vers: r.vers,
            prot: r.proto.ipproto(),
            port: u32::from(r.addr.port()),
        };
        if !out.contains(&m) {
            out.push(m);
        }
    }
    Ok(PmapList(out))
}

fn rpcb_set(ctx: &CallCtx<'_>, r: Rpcb) -> Result<bool, ProcError> {
    tracing::debug!(peer = %ctx.peer, prog = r.prog, "refusing rpcbind SET/UNSET");
    Ok(false)
}

/// RFC 1833 §2.2 RPCBPROC_GETADDR: the universal address, or "" when the
/// program is not registered on that netid.
fn rpcb_getaddr(ctx: &CallCtx<'_>, q: Rpcb) -> Result<RpcbString, ProcError> {
    let regs = registrations(ctx);
    let found = match q.netid.0.as_str() {
        // An empty netid means "the transport of this call" (RFC 1833
        // §2.2). The call does not tell us which: TCP, else UDP (a
        // program served over UDP only is still found).
        "" => {
            let v6 = ctx.local.is_ipv6();
            find(&regs, q.prog, q.vers, Proto::Tcp, v6)
                .or_else(|| find(&regs, q.prog, q.vers, Proto::Udp, v6))
        }
        n => match Proto::from_netid(n) {
            Some((proto, v6)) => find(&regs, q.prog, q.vers, proto, v6),
            None => None,
        },
    };
    Ok(RpcbString(
        found
            .map(|r| universal_addr(&reachable_addr(ctx, &r)))
            .unwrap_or_default(),
    ))
}

fn rpcb_dump(ctx: &CallCtx<'_>, _: ()) -> Result<RpcbList, ProcError> {
    Ok(RpcbList(
        registrations(ctx)
            .iter()
            .map(|r| Rpcb {
                prog: r.prog,
                vers: r.vers,
                netid: RpcbString(r.netid().into()),
                addr: RpcbString(universal_addr(&reachable_addr(ctx, r))),
                owner: RpcbString("superuser".into()),
            })
            .collect(),
    ))
}

const LIST_REPLY: usize = 4 + MAX_REGISTRATIONS * (4 + 8 + 4 + 8 + 4 + 64 + 4 + 12);

/// Every row answers AUTH_NONE: a port mapper is unauthenticated by design
/// (RFC 1833).
static PMAP_V2: &[crate::programs::Proc] = &[
    proc_entry!("NULL", (), null, CacheClass::None, 0),
    proc_entry!("SET", Mapping, pmap_set, CacheClass::None, 4).auth_none(),
    proc_entry!("UNSET", Mapping, pmap_set, CacheClass::None, 4).auth_none(),
    proc_entry!("GETPORT", Mapping, pmap_getport, CacheClass::None, 4).auth_none(),
    proc_entry!("DUMP", (), pmap_dump, CacheClass::None, LIST_REPLY).auth_none(),
];

static RPCB_V3_V4: &[crate::programs::Proc] = &[
    proc_entry!("NULL", (), null, CacheClass::None, 0),
    proc_entry!("SET", Rpcb, rpcb_set, CacheClass::None, 4).auth_none(),
    proc_entry!("UNSET", Rpcb, rpcb_set, CacheClass::None, 4).auth_none(),
    proc_entry!("GETADDR", Rpcb, rpcb_getaddr, CacheClass::None, 4 + 64).auth_none(),
    proc_entry!("DUMP", (), rpcb_dump, CacheClass::None, LIST_REPLY).auth_none(),
];

pub static PORTMAP: Program = Program {
    name: "portmap",
    prog: rnfsd_proto::portmap::PROGRAM,
    versions: &[
        Version {
            vers: 2,
            procs: PMAP_V2,
        },
        Version {
            vers: 3,
            procs: RPCB_V3_V4,
        },
        Version {
            vers: 4,
            procs: RPCB_V3_V4,
        },
    ],
};

#[cfg(test)]
mod tests {
    use super::*;
    use rnfsd_rpc::Auth;

    fn regs() -> Vec<Registration> {
        let a: SocketAddr = "0.0.0.0:2049".parse().unwrap();
        let b: SocketAddr = "[::1]:2049".parse().unwrap();
        let pm: SocketAddr = "0.0.0.0:111".parse().unwrap();
        vec![
            Registration::tcp(100000, 2, pm),
            Registration::tcp(100003, 3, a),
            Registration::tcp(100005, 1, a),
            Registration::tcp(100005, 3, a),
            Registration::tcp(100003, 3, b),
            Registration::udp(100000, 2, pm),
            Registration::udp(100021, 4, "0.0.0.0:4045".parse().unwrap()),
        ]
    }

    fn server() -> Server {
        Server::new(
            vec![],
            std::sync::Arc::new(rnfsd_fs::WriteVerifier::new([0; 8])),
            4096,
            None,
        )
    }

    fn ctx(s: &Server) -> CallCtx<'_> {
        CallCtx::new(
            1,
            "127.0.0.1:900".parse().unwrap(),
            "127.0.0.1:111".parse().unwrap(),
            Auth::None,
            s,
            None,
            false,
        )
    }

    #[test]
    fn answers_from_the_registry() {
        let s = server();
        set_registrations(&s, regs());
        let c = ctx(&s);
        let q = |prog, vers, prot| Mapping {
            prog,
            vers,
            prot,
            port: 0,
        };
        assert_eq!(pmap_getport(&c, q(100003, 3, 6)).unwrap(), 2049);
        assert_eq!(pmap_getport(&c, q(100005, 3, 6)).unwrap(), 2049);
        // Another version of a known program: its port, like rpcbind.
        assert_eq!(pmap_getport(&c, q(100003, 2, 6)).unwrap(), 2049);
        // NFS is not served over UDP; the lock manager only over UDP.
        assert_eq!(pmap_getport(&c, q(100003, 3, 17)).unwrap(), 0);
        assert_eq!(pmap_getport(&c, q(100021, 4, 6)).unwrap(), 0);
        assert_eq!(pmap_getport(&c, q(100021, 4, 17)).unwrap(), 4045);
        assert_eq!(pmap_getport(&c, q(100000, 2, 17)).unwrap(), 111);
        assert_eq!(pmap_getport(&c, q(100000, 2, 99)).unwrap(), 0);
        assert_eq!(pmap_getport(&c, q(100000, 2, 6)).unwrap(), 111);
        assert!(!pmap_set(&c, q(100021, 4, 6)).unwrap());

        let d = pmap_dump(&c, ()).unwrap();
        // The v6 listener repeats the v4 NFS mapping: listed once.
        assert_eq!(d.0.len(), 6);
        assert!(d
            .0
            .iter()
            .any(|m| (m.prog, m.prot, m.port) == (100000, 17, 111)));

        let ga = |prog, vers, netid: &str| {
            rpcb_getaddr(
                &c,
                Rpcb {
                    prog,
                    vers,
                    netid: RpcbString(netid.into()),
                    ..Default::default()
                },
            )
            .unwrap()
            .0
        };
        // Wildcard listener: the address the client reached us at.
        assert_eq!(ga(100003, 3, "tcp"), "127.0.0.1.8.1");
        assert_eq!(ga(100003, 3, ""), "127.0.0.1.8.1");
        assert_eq!(ga(100003, 3, "tcp6"), "::1.8.1");
        assert_eq!(ga(100005, 3, "tcp6"), "");
        assert_eq!(ga(100005, 3, "udp"), "");
        assert_eq!(ga(100021, 4, "udp"), "127.0.0.1.15.205");
        assert_eq!(ga(100021, 4, "tcp"), "");
        assert_eq!(ga(100021, 4, "udp6"), "");
        assert_eq!(ga(100021, 4, ""), "127.0.0.1.15.205");
        assert_eq!(ga(7, 1, "tcp"), "");

        let l = rpcb_dump(&c, ()).unwrap();
        assert_eq!(l.0.len(), 7);
        assert_eq!(l.0[4].netid.0, "tcp6");
        assert_eq!(l.0[6].netid.0, "udp");
        assert_eq!(l.0[1].addr.0, "127.0.0.1.8.1");
        assert!(rnfsd_xdr::to_vec(&l).len() <= LIST_REPLY);
    }

    #[test]
    fn each_server_has_its_own_registrations() {
        let (a, b) = (server(), server());
        set_registrations(&a, regs());
        let nfs = Mapping {
            prog: 100003,
            vers: 3,
            prot: IPPROTO_TCP,
            port: 0,
        };
        assert_eq!(pmap_getport(&ctx(&a), nfs).unwrap(), 2049);
        assert_eq!(pmap_getport(&ctx(&b), nfs).unwrap(), 0);
        assert!(pmap_dump(&ctx(&b), ()).unwrap().0.is_empty());
        let one = vec![Registration::tcp(
            100005,
            3,
            "0.0.0.0:20048".parse().unwrap(),
        )];
        set_registrations(&b, one.clone());
        assert_eq!(registrations(&ctx(&b)), one);
        // Setting the other server's left this one's as they were.
        assert_eq!(registrations(&ctx(&a)), regs());
    }
}
