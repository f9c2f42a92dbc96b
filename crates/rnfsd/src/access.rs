//! Export access control: which clients may use an export, with which
//! options, and as whom (the semantics of knfsd's exports(5)).
//!
//! Each export has a list of client specifications (an address, a CIDR
//! network, or `*`), each with its options. A client is matched as
//! nfs-utils' mountd orders it: a single address first, then networks in
//! the order given, then netgroup members (an exports(5) `@group`, expanded
//! to its members' addresses at load), then `*`. The per-call check is a short linear scan over
//! precomputed (network, mask) pairs plus building the squashed credential:
//! no allocation beyond the credential's group list, no lock, no shared
//! write (the rules sit behind an `ArcSwap` in [`crate::state::Export`]).

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use rnfsd_fs::Cred;

use rnfsd_rpc::Auth;

/// knfsd's default anonymous uid and gid (nobody / nogroup).
pub const NOBODY: u32 = 65534;

/// Ports below this are "privileged" (knfsd: IPPORT_RESERVED).
pub const RESERVED_PORT: u16 = 1024;

/// The clients an export allows when its configuration names none: the
/// loopback addresses, matching the default listen address. A server later
/// made to listen on a public address then refuses remote clients (with a
/// log line) until they are listed, instead of exporting to everyone.
pub const DEFAULT_CLIENTS: [&str; 2] = ["127.0.0.0/8", "::1"];

/// One client specification, kept in IPv6 space (IPv4 as ::ffff:a.b.c.d)
/// so an IPv4 rule also matches an IPv4-mapped peer on a dual-stack socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSpec {
    net: u128,
    /// Prefix length in IPv6 bits (IPv4 /n is 96 + n); 0 = anyone.
    prefix: u8,
    /// As written, for EXPORT (showmount -e) and logs.
    text: String,
    /// A member of an exports(5) netgroup: it ranks after networks, as
    /// MCL_NETGROUP after MCL_SUBNETWORK in nfs-utils, whatever its prefix.
    netgroup: bool,
}

fn mask(prefix: u8) -> u128 {
    if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(prefix.min(128)))
    }
}

/// An address as a 128-bit IPv6 number (IPv4 mapped).
fn key_of(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

impl ClientSpec {
    /// `*`, an address (`10.1.2.3`, `::1`) or a network (`10.0.0.0/8`,
    /// `fd00::/8`). Host names, wildcards and netgroups are not supported:
    /// resolving names per call would put DNS on the request path.
    pub fn parse(s: &str) -> Result<ClientSpec, String> {
        let text = s.trim().to_owned();
        if text == "*" {
            return Ok(ClientSpec {
                net: 0,
                prefix: 0,
                text,
                netgroup: false,
            });
        }
        let (addr, len) = match text.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (text.as_str(), None),
        };
        let ip: IpAddr = addr.parse().map_err(|_| {
            format!("client {text:?}: not an address, a network (addr/len) or \"*\" (host names are not supported)")
        })?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => max,
            Some(l) => l
                .parse::<u8>()
                .ok()
                .filter(|&n| n <= max)
                .ok_or_else(|| format!("client {text:?}: prefix length must be 0..={max}"))?,
        };
        let prefix = if ip.is_ipv4() { 96 + len } else { len };
        let net = key_of(ip);
        if net & !mask(prefix) != 0 {
            return Err(format!(
                "client {text:?}: address has bits set beyond the /{len} prefix"
            ));
        }
        Ok(ClientSpec {
            net,
            prefix,
            text,
            netgroup: false,
        })
    }

    /// The same addresses, as a netgroup member (ranked after networks).
    pub fn in_netgroup(self) -> ClientSpec {
        ClientSpec {
            netgroup: true,
            ..self
        }
    }

    pub fn matches(&self, ip: IpAddr) -> bool {
        key_of(ip) & mask(self.prefix) == self.net
    }

    /// Precedence class: single host, network, netgroup member, anyone.
    fn class(&self) -> u8 {
        match self.prefix {
            0 => 3,
            _ if self.netgroup => 2,
            128 => 0,
            _ => 1,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for ClientSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The options one client gets (exports(5) names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientOpts {
    /// Refuse every change (NFS3ERR_ROFS).
    pub read_only: bool,
    /// Map uid 0 to `anonuid` and gid 0 (primary or supplementary) to
    /// `anongid`.
    pub root_squash: bool,
    /// Map every caller to `anonuid`/`anongid` with no supplementary groups.
    pub all_squash: bool,
    pub anonuid: u32,
    pub anongid: u32,
    /// Require a source port below 1024.
    pub secure: bool,
}

impl Default for ClientOpts {
    /// The configuration defaults (see docs/security.md for why `read_only`
    /// differs from knfsd's; `secure` is knfsd's default).
    fn default() -> Self {
        ClientOpts {
            read_only: false,
            root_squash: true,
            all_squash: false,
            anonuid: NOBODY,
            anongid: NOBODY,
            secure: true,
        }
    }
}

impl ClientOpts {
    /// The identity the call runs as, after squashing (knfsd's
    /// `nfsd_setuser`). AUTH_NONE is the anonymous user.
    pub fn cred(&self, auth: &Auth) -> Cred {
        let anon = || Cred {
            uid: self.anonuid,
            gid: self.anongid,
            gids: Vec::new(),
        };
        let s = match auth {
            Auth::None => return anon(),
            Auth::Sys(s) => s,
        };
        if self.all_squash {
            return anon();
        }
        if !self.root_squash {
            return Cred {
                uid: s.uid,
                gid: s.gid,
                gids: s.gids.clone(),
            };
        }
        let g = |g: u32| if g == 0 { self.anongid } else { g };
        Cred {
            uid: if s.uid == 0 { self.anonuid } else { s.uid },
            gid: g(s.gid),
            gids: s.gids.iter().map(|&x| g(x)).collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub spec: ClientSpec,
    pub opts: ClientOpts,
}

/// Why a client may not use an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// No rule matches the client's address.
    NotListed,
    /// A `secure` rule matched, and the source port is 1024 or above.
    InsecurePort,
}

/// What a permitted call runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub cred: Cred,
    pub read_only: bool,
}

/// The rules of one export, most specific first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportAccess {
    rules: Vec<Rule>,
}

impl ExportAccess {
    /// Orders `rules` by precedence (hosts, networks, netgroup members,
    /// `*`), keeping the given order within each class.
    pub fn new(mut rules: Vec<Rule>) -> ExportAccess {
        rules.sort_by_key(|r| r.spec.class());
        ExportAccess { rules }
    }

    /// Anyone, from any port, without squashing: for embedding and unit
    /// tests, never a configuration default.
    pub fn allow_all(read_only: bool) -> ExportAccess {
        ExportAccess::new(vec![Rule {
            spec: ClientSpec {
                net: 0,
                prefix: 0,
                text: "*".into(),
                netgroup: false,
            },
            opts: ClientOpts {
                read_only,
                root_squash: false,
                secure: false,
                ..ClientOpts::default()
            },
        }])
    }

    /// The options of the first matching rule.
    pub fn lookup(&self, ip: IpAddr) -> Option<&ClientOpts> {
        self.rules
            .iter()
            .find(|r| r.spec.matches(ip))
            .map(|r| &r.opts)
    }

    /// The per-call check: is `peer` allowed, and as whom does `auth` run.
    pub fn check(&self, peer: SocketAddr, auth: &Auth) -> Result<Grant, Denied> {
        let o = self.lookup(peer.ip()).ok_or(Denied::NotListed)?;
        if o.secure && peer.port() >= RESERVED_PORT {
            return Err(Denied::InsecurePort);
        }
        Ok(Grant {
            cred: o.cred(auth),
            read_only: o.read_only,
        })
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rnfsd_proto::rpc::AuthSys;

    fn spec(s: &str) -> ClientSpec {
        ClientSpec::parse(s).unwrap()
    }
    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn specs_parse_and_match() {
        let any = spec("*");
        assert!(any.matches(ip("10.1.1.1")) && any.matches(ip("fe80::1")));
        let h = spec("127.0.0.1");
        assert!(h.matches(ip("127.0.0.1")));
        assert!(h.matches(ip("::ffff:127.0.0.1")), "mapped peer");
        assert!(!h.matches(ip("127.0.0.2")));
        let n = spec("10.0.0.0/8");
        assert!(n.matches(ip("10.255.0.1")) && !n.matches(ip("11.0.0.1")));
        assert!(!n.matches(ip("::a00:1")), "a v4 network is not v6 ::/8");
        let all4 = spec("0.0.0.0/0");
        assert!(all4.matches(ip("1.2.3.4")) && !all4.matches(ip("::1")));
        let v6 = spec("fd00::/8");
        assert!(v6.matches(ip("fd12::1")) && !v6.matches(ip("fe80::1")));
        assert!(spec("::1").matches(ip("::1")));
        assert!(spec("::/0").matches(ip("::1")));
        for bad in [
            "host.example.com",
            "*.example.com",
            "@group",
            "10.0.0.1/8",
            "10.0.0.0/33",
            "::1/129",
            "10.0.0.0/",
            "",
        ] {
            assert!(ClientSpec::parse(bad).is_err(), "{bad:?}");
        }
    }

    fn rule(s: &str, read_only: bool) -> Rule {
        Rule {
            spec: spec(s),
            opts: ClientOpts {
                read_only,
                secure: false,
                ..ClientOpts::default()
            },
        }
    }

    #[test]
    fn precedence_is_host_then_network_then_any() {
        let a = ExportAccess::new(vec![
            rule("*", true),
            rule("10.0.0.0/8", false),
            rule("10.1.0.0/16", true),
            rule("10.1.2.3", true),
            rule("10.9.9.9", false),
        ]);
        let ro = |s| a.lookup(ip(s)).unwrap().read_only;
        assert!(ro("10.1.2.3"), "host first");
        assert!(!ro("10.1.2.4"), "networks in the order given: /8 first");
        assert!(!ro("10.9.9.9"));
        assert!(ro("192.168.0.1"), "* last");
        let b = ExportAccess::new(vec![rule("10.0.0.0/8", false)]);
        assert!(b.lookup(ip("11.0.0.1")).is_none());
    }

    #[test]
    fn netgroup_members_rank_after_networks_before_any() {
        let member = |s: &str, read_only| Rule {
            spec: spec(s).in_netgroup(),
            ..rule(s, read_only)
        };
        let a = ExportAccess::new(vec![
            rule("*", true),
            member("10.1.2.3", false),
            member("192.168.0.7", false),
            rule("10.0.0.0/8", true),
            rule("10.9.9.9", false),
        ]);
        let ro = |s| a.lookup(ip(s)).unwrap().read_only;
        assert!(ro("10.1.2.3"), "the network outranks the netgroup member");
        assert!(!ro("192.168.0.7"), "the member outranks *");
        assert!(!ro("10.9.9.9"), "a listed host outranks the network");
        assert!(ro("172.16.0.1"));
        // A member and the same address listed as a host are two rules.
        assert_ne!(spec("10.1.2.3"), spec("10.1.2.3").in_netgroup());
    }

    fn sys(uid: u32, gid: u32, gids: &[u32]) -> Auth {
        Auth::Sys(AuthSys {
            stamp: 0,
            machine_name: b"c".to_vec(),
            uid,
            gid,
            gids: gids.to_vec(),
        })
    }

    #[test]
    fn squashing() {
        let mut o = ClientOpts {
            anonuid: 500,
            anongid: 600,
            ..ClientOpts::default()
        };
        let c = |o: &ClientOpts, a: &Auth| {
            let c = o.cred(a);
            (c.uid, c.gid, c.gids)
        };
        // root_squash (default): uid 0 and every gid 0 become anon.
        assert_eq!(c(&o, &sys(0, 0, &[0, 5])), (500, 600, vec![600, 5]));
        assert_eq!(c(&o, &sys(1000, 0, &[7])), (1000, 600, vec![7]));
        assert_eq!(c(&o, &sys(1000, 100, &[7])), (1000, 100, vec![7]));
        assert_eq!(c(&o, &Auth::None), (500, 600, vec![]));
        o.root_squash = false;
        assert_eq!(c(&o, &sys(0, 0, &[0])), (0, 0, vec![0]));
        assert_eq!(c(&o, &Auth::None), (500, 600, vec![]));
        o.all_squash = true;
        assert_eq!(c(&o, &sys(1000, 100, &[7, 8])), (500, 600, vec![]));
        assert_eq!(c(&o, &sys(0, 0, &[])), (500, 600, vec![]));
    }

    #[test]
    fn check_ports_and_listing() {
        let mut r = rule("127.0.0.1", true);
        r.opts.secure = true;
        let a = ExportAccess::new(vec![r, rule("127.0.0.2", false)]);
        let auth = sys(0, 0, &[]);
        let at = |s: &str| a.check(s.parse().unwrap(), &auth);
        assert_eq!(at("127.0.0.1:2000"), Err(Denied::InsecurePort));
        assert_eq!(at("127.0.0.1:1024"), Err(Denied::InsecurePort));
        let g = at("127.0.0.1:1023").unwrap();
        assert!(g.read_only);
        assert_eq!(g.cred.uid, NOBODY, "root squashed by default");
        assert!(!at("127.0.0.2:40000").unwrap().read_only);
        assert_eq!(at("127.0.0.3:700"), Err(Denied::NotListed));
        assert!(!at("[::ffff:127.0.0.2]:5000").unwrap().read_only);
        let open = ExportAccess::allow_all(false);
        let g = open.check("8.8.8.8:5".parse().unwrap(), &auth).unwrap();
        assert_eq!((g.cred.uid, g.read_only), (0, false));
    }
}
