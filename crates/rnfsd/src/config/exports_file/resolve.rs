//! Names in client specs, resolved when the file is read (start and
//! SIGHUP), never per call: host names by getaddrinfo, netgroups by
//! `getent netgroup` (no NSS bindings needed, no `unsafe`).

use std::net::IpAddr;

/// Name resolution for host names and netgroups, done once per load.
pub trait Resolver {
    /// Every address of host `name` (an error or none: it does not resolve).
    fn host(&self, name: &str) -> Result<Vec<IpAddr>, String>;
    /// The host fields of netgroup `name`'s members ("" for a member whose
    /// host field is empty, which netgroup(5) makes match any host).
    fn netgroup(&self, name: &str) -> Result<Vec<String>, String>;
}

/// The system's resolver: getaddrinfo(3) for hosts, `getent netgroup` for
/// netgroups (no libc netgroup calls, so no `unsafe`).
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn host(&self, name: &str) -> Result<Vec<IpAddr>, String> {
        use std::net::ToSocketAddrs;
        let mut v: Vec<IpAddr> = (name, 0u16)
            .to_socket_addrs()
            .map_err(|e| e.to_string())?
            .map(|a| a.ip())
            .collect();
        v.sort();
        v.dedup();
        Ok(v)
    }

    fn netgroup(&self, name: &str) -> Result<Vec<String>, String> {
        let out = std::process::Command::new("getent")
            .args(["netgroup", "--", name])
            .output()
            .map_err(|e| format!("running getent: {e}"))?;
        if !out.status.success() {
            return Err("unknown netgroup (getent netgroup found nothing)".into());
        }
        Ok(netgroup_hosts(&String::from_utf8_lossy(&out.stdout)))
    }
}

/// The host fields of `getent netgroup` output: `name (host,user,domain) ...`.
pub(super) fn netgroup_hosts(out: &str) -> Vec<String> {
    let mut v = Vec::new();
    let mut rest = out;
    while let Some(open) = rest.find('(') {
        let Some(close) = rest[open..].find(')') else {
            break;
        };
        let triple = &rest[open + 1..open + close];
        v.push(triple.split(',').next().unwrap_or("").trim().to_owned());
        rest = &rest[open + close + 1..];
    }
    v
}
