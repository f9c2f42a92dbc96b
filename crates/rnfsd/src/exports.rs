//! knfsd's /etc/exports format (exports(5)), parsed into [`ExportConfig`]s.
//!
//! ```text
//! /srv/www -sync,rw server @trusted @external(ro)   # comment
//! "/srv/my dir" 10.0.0.0/255.0.0.0(rw,no_root_squash) \
//!               2001:db8::/64(ro)
//! ```
//!
//! One export per logical line: a path, optional `-opts` defaults for the
//! line's clients, then clients each optionally followed by `(opts)`.
//! Defaults are knfsd's (ro, sync, root_squash, secure, anonuid/anongid
//! 65534), not the TOML file's. Host names and netgroups are resolved here,
//! at load and at reload, never per call; wildcard host names would need
//! reverse DNS per call and get no access (fail closed). Options rnfsd
//! does not implement are warnings when ignoring them is harmless and
//! errors otherwise. docs/exports.md has the whole table.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use crate::config::{ClientConfig, ConfigError, ExportConfig};

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
fn netgroup_hosts(out: &str) -> Vec<String> {
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

/// The exports of one file and what was ignored or could not be resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    pub exports: Vec<ExportConfig>,
    /// `FILE:LINE: ...` lines for the log.
    pub warnings: Vec<String>,
}

/// Reads and parses the exports(5) file at `path`.
pub fn load(path: &Path, r: &dyn Resolver) -> Result<Parsed, ConfigError> {
    let bytes = std::fs::read(path)
        .map_err(|e| ConfigError(format!("cannot read exports file {}: {e}", path.display())))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| ConfigError(format!("{}: not UTF-8 text", path.display())))?;
    parse(&text, &path.display().to_string(), r)
}

/// Parses exports(5) `text`; `source` names it in messages.
pub fn parse(text: &str, source: &str, r: &dyn Resolver) -> Result<Parsed, ConfigError> {
    let mut p = Parser {
        source,
        r,
        out: Parsed::default(),
    };
    let mut paths: Vec<(PathBuf, usize)> = Vec::new();
    for line in tokenize(text).map_err(|(n, m)| p.err(n, m))? {
        let e = p.export(&line)?;
        let key = normalize(&e.path);
        if let Some((_, first)) = paths.iter().find(|(k, _)| *k == key) {
            // exportfs merges such lines; one line per path keeps the
            // per-export options (sync, fsid, crossmnt) in one place.
            return Err(p.err(
                line[0].line,
                format!(
                    "{} is already exported on line {first}: put all its clients on one line",
                    e.path.display()
                ),
            ));
        }
        paths.push((key, line[0].line));
        p.out.exports.push(e);
    }
    Ok(p.out)
}

fn normalize(p: &Path) -> PathBuf {
    p.components().collect()
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Token {
    text: String,
    line: usize,
}

/// Logical lines of tokens: `#` comments (outside quotes) dropped,
/// backslash-newline joins lines, `"..."` quotes whitespace (quotes
/// removed). Each token keeps the line it starts on.
fn tokenize(text: &str) -> Result<Vec<Vec<Token>>, (usize, String)> {
    let mut lines = Vec::new();
    let mut cur: Vec<Token> = Vec::new();
    let mut tok: Option<Token> = None;
    let mut quoted = false;
    let mut n = 1;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if quoted {
            match c {
                '"' => quoted = false,
                '\n' => return Err((n, "unterminated quote".into())),
                c => tok
                    .get_or_insert(Token {
                        text: String::new(),
                        line: n,
                    })
                    .text
                    .push(c),
            }
            continue;
        }
        match c {
            '\\' if chars.peek() == Some(&'\n') => {
                chars.next();
                cur.extend(tok.take());
                n += 1;
            }
            '#' => {
                while chars.peek().is_some_and(|&c| c != '\n') {
                    chars.next();
                }
            }
            '\n' => {
                cur.extend(tok.take());
                if !cur.is_empty() {
                    lines.push(std::mem::take(&mut cur));
                }
                n += 1;
            }
            c if c.is_whitespace() => cur.extend(tok.take()),
            '"' => {
                quoted = true;
                tok.get_or_insert(Token {
                    text: String::new(),
                    line: n,
                });
            }
            c => tok
                .get_or_insert(Token {
                    text: String::new(),
                    line: n,
                })
                .text
                .push(c),
        }
    }
    if quoted {
        return Err((n, "unterminated quote".into()));
    }
    cur.extend(tok.take());
    if !cur.is_empty() {
        lines.push(cur);
    }
    Ok(lines)
}

/// A path with exports(5) `\ooo` octal escapes decoded.
fn unescape_path(s: &str) -> Result<PathBuf, String> {
    use std::os::unix::ffi::OsStringExt;
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let digits = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        let v = digits
            .map(|d| d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0')))
            .and_then(|v| u8::try_from(v).ok())
            .filter(|&v| v != 0)
            .ok_or_else(|| {
                format!(
                    "path {s:?}: a backslash must start a three-digit octal escape such as \\040"
                )
            })?;
        out.push(v);
        i += 4;
    }
    Ok(PathBuf::from(std::ffi::OsString::from_vec(out)))
}

/// One client's options (exports(5) names; knfsd's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Opts {
    read_only: bool,
    root_squash: bool,
    all_squash: bool,
    anonuid: u32,
    anongid: u32,
    secure: bool,
    // Per export in rnfsd, per client in exports(5): clients must agree.
    sync: bool,
    fsid: Option<u32>,
    crossmnt: bool,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            read_only: true,
            root_squash: true,
            all_squash: false,
            anonuid: crate::access::NOBODY,
            anongid: crate::access::NOBODY,
            secure: true,
            sync: true,
            fsid: None,
            crossmnt: false,
        }
    }
}

/// Why an option rnfsd does not implement can be ignored.
fn harmless(name: &str) -> Option<&'static str> {
    Some(match name {
        "wdelay" | "no_wdelay" => "rnfsd does not delay writes to gather them",
        "subtree_check" | "no_subtree_check" => {
            "rnfsd always confines handles to the export, which is stronger than subtree_check"
        }
        "hide" | "nohide" => "exports below this one are not shown through it (as hide)",
        "secure_locks" | "auth_nlm" | "insecure_locks" | "no_auth_nlm" => {
            "rnfsd serves no NLM lock manager"
        }
        "mountpoint" | "mp" => "rnfsd does not check that the export is a mount point",
        "nordirplus" => "rnfsd always answers READDIRPLUS",
        "acl" | "no_acl" => "rnfsd serves no NFSACL protocol; permission checks are the kernel's",
        "pnfs" | "no_pnfs" | "security_label" | "refer" | "replicas" => {
            "it is for NFSv4; rnfsd serves NFSv3"
        }
        _ => return None,
    })
}

struct Parser<'a> {
    source: &'a str,
    r: &'a dyn Resolver,
    out: Parsed,
}

/// A client as written, before resolution.
enum Who {
    /// An address, a network or `*`: a `ClientSpec` text.
    Spec(String),
    Host(String),
    Netgroup(String),
    Wildcard(String),
}

impl Parser<'_> {
    fn err(&self, line: usize, m: impl std::fmt::Display) -> ConfigError {
        ConfigError(format!("{}:{line}: {m}", self.source))
    }

    fn warn(&mut self, line: usize, m: impl std::fmt::Display) {
        let w = format!("{}:{line}: {m}", self.source);
        if !self.out.warnings.contains(&w) {
            self.out.warnings.push(w);
        }
    }

    /// Applies a comma-separated option list to `o`.
    fn options(&mut self, o: &mut Opts, list: &str, line: usize) -> Result<(), ConfigError> {
        for opt in list.split(',').filter(|s| !s.is_empty()) {
            let (name, val) = match opt.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (opt, None),
            };
            let takes_value = matches!(name, "mountpoint" | "mp" | "refer" | "replicas");
            if let Some(why) = harmless(name).filter(|_| val.is_none() || takes_value) {
                self.warn(line, format!("option {opt:?} ignored: {why}"));
                continue;
            }
            let num = |v: Option<&str>| {
                v.and_then(|v| v.parse::<u32>().ok()).ok_or_else(|| {
                    self.err(
                        line,
                        format!("option {opt:?}: not a number from 0 to {}", u32::MAX),
                    )
                })
            };
            match (name, val) {
                ("rw", None) => o.read_only = false,
                ("ro", None) => o.read_only = true,
                ("sync", None) => o.sync = true,
                ("async", None) => o.sync = false,
                ("root_squash", None) => o.root_squash = true,
                ("no_root_squash", None) => o.root_squash = false,
                ("all_squash", None) => o.all_squash = true,
                ("no_all_squash", None) => o.all_squash = false,
                ("secure", None) => o.secure = true,
                ("insecure", None) => o.secure = false,
                ("crossmnt", None) => o.crossmnt = true,
                ("anonuid", v) => o.anonuid = num(v)?,
                ("anongid", v) => o.anongid = num(v)?,
                ("fsid", Some(v)) => self.fsid(o, v, opt, line)?,
                ("sec", Some(v)) => self.sec(v, opt, line)?,
                ("xprtsec", Some("none")) => self.warn(
                    line,
                    format!("option {opt:?} ignored: rnfsd serves plain TCP"),
                ),
                ("xprtsec", _) => {
                    let m =
                        "rnfsd has no RPC-over-TLS; clients would expect an encrypted transport";
                    return Err(self.err(line, format!("option {opt:?}: {m}")));
                }
                _ => return Err(self.err(line, format!("unknown option {opt:?}"))),
            }
        }
        Ok(())
    }

    /// `fsid=N` is the export id. `fsid=0`/`root` marks the NFSv4
    /// pseudo-root, meaningless for v3. A UUID keeps knfsd's handles stable
    /// when the device number changes; rnfsd's default id (a hash of the
    /// path) never depended on the device, and ids are 32 bits: ignored.
    fn fsid(&mut self, o: &mut Opts, v: &str, opt: &str, line: usize) -> Result<(), ConfigError> {
        if v == "root" || (v.bytes().all(|b| b.is_ascii_digit()) && v.parse() == Ok(0u32)) {
            let m = "it marks the NFSv4 pseudo-root, which NFSv3 has no use for";
            self.warn(
                line,
                format!("option {opt:?} ignored: {m}; the id stays the hash of the path"),
            );
        } else if let Ok(n) = v.parse::<u32>() {
            o.fsid = Some(n);
        } else if is_uuid(v) {
            let m = "rnfsd export ids are 32-bit; the id stays the hash of the path, which does not depend on the device either";
            self.warn(line, format!("option {opt:?} ignored: {m}"));
        } else {
            let m = format!("fsid must be a number up to {}, root or a UUID", u32::MAX);
            return Err(self.err(line, format!("option {opt:?}: {m}")));
        }
        Ok(())
    }

    /// `sec=flavor:flavor...`: AUTH_SYS is what rnfsd serves; Kerberos
    /// would be a promise of authentication rnfsd cannot keep.
    fn sec(&mut self, v: &str, opt: &str, line: usize) -> Result<(), ConfigError> {
        for f in v.split(':') {
            match f {
                "sys" => {}
                "none" => self.warn(
                    line,
                    format!("option {opt:?}: flavor \"none\" ignored: AUTH_NONE is server.allow_auth_none"),
                ),
                _ => {
                    return Err(self.err(
                        line,
                        format!("option {opt:?}: flavor {f:?} is not served (rnfsd serves sec=sys only)"),
                    ))
                }
            }
        }
        if !v.split(':').any(|f| f == "sys") {
            return Err(self.err(line, format!("option {opt:?}: rnfsd serves sec=sys only")));
        }
        Ok(())
    }

    fn export(&mut self, line: &[Token]) -> Result<ExportConfig, ConfigError> {
        let first = &line[0];
        let at = first.line;
        let path = unescape_path(&first.text).map_err(|m| self.err(at, m))?;
        if !path.is_absolute() {
            return Err(self.err(at, format!("export path {:?} is not absolute", first.text)));
        }
        let mut defaults = Opts::default();
        let mut rest = &line[1..];
        if let Some(t) = rest.first().filter(|t| t.text.starts_with('-')) {
            self.options(&mut defaults, &t.text[1..], t.line)?;
            rest = &rest[1..];
        }
        let world = Token {
            text: "*".into(),
            line: at,
        };
        // (client token, its options)
        let mut clients: Vec<(&Token, &str, Opts)> = Vec::new();
        for t in rest {
            if t.text.starts_with('-') {
                return Err(self.err(
                    t.line,
                    format!(
                        "{:?}: default options (-opts) must come right after the path",
                        t.text
                    ),
                ));
            }
            let (name, list) = match t.text.split_once('(') {
                None => (t.text.as_str(), None),
                Some((n, l)) => match l.strip_suffix(')') {
                    Some(l) if !l.contains(['(', ')']) => (n, Some(l)),
                    _ => return Err(self.err(t.line, format!("{:?}: options must be (opt,opt,...) right after the client, with no space", t.text))),
                },
            };
            let name = if name.is_empty() {
                self.warn(t.line, format!("no client before {:?}: it applies to every host (*), as exportfs does; write *{} to say so", t.text, t.text));
                "*"
            } else {
                name
            };
            let mut o = defaults;
            if let Some(l) = list {
                self.options(&mut o, l, t.line)?;
            }
            clients.push((t, name, o));
        }
        if clients.is_empty() {
            self.warn(at, format!("{} has no clients: exported to every host (*), as exportfs does; write * to say so", path.display()));
            clients.push((&world, "*", defaults));
        }
        // rnfsd keeps these per export.
        let (t0, _, o0) = clients[0];
        if let Some((t, _, _)) = clients
            .iter()
            .find(|(_, _, o)| (o.sync, o.fsid, o.crossmnt) != (o0.sync, o0.fsid, o0.crossmnt))
        {
            return Err(self.err(
                t.line,
                format!("clients {:?} and {:?} of {} differ in sync/async, fsid or crossmnt, which rnfsd sets per export", t0.text, t.text, path.display()),
            ));
        }
        let mut rules: Vec<(ClientConfig, String, usize)> = Vec::new();
        for (t, name, o) in &clients {
            for spec in self.resolve(name, t.line)? {
                let c = ClientConfig {
                    match_: spec,
                    read_only: Some(o.read_only),
                    root_squash: Some(o.root_squash),
                    all_squash: Some(o.all_squash),
                    anonuid: Some(o.anonuid),
                    anongid: Some(o.anongid),
                    secure: Some(o.secure),
                };
                match rules.iter().find(|(r, _, _)| r.match_ == c.match_) {
                    None => rules.push((c, t.text.clone(), t.line)),
                    Some((r, _, _)) if *r == c => {}
                    Some((_, other, l)) => {
                        return Err(self.err(
                            t.line,
                            format!("client {} (from {:?}) is also given by {other:?} on line {l}, with other options", c.match_, t.text),
                        ))
                    }
                }
            }
        }
        Ok(ExportConfig {
            read_only: defaults.read_only,
            clients: Some(Vec::new()),
            root_squash: defaults.root_squash,
            all_squash: defaults.all_squash,
            anonuid: defaults.anonuid,
            anongid: defaults.anongid,
            secure: defaults.secure,
            client_rules: rules.into_iter().map(|(c, _, _)| c).collect(),
            id: o0.fsid,
            cross_mounts: o0.crossmnt,
            sync: o0.sync,
            origin: Some(format!("{}:{at}", self.source)),
            ..ExportConfig::new(path)
        })
    }

    /// The `ClientSpec` texts a client name stands for (none, with a
    /// warning, when it cannot be resolved: no access).
    fn resolve(&mut self, name: &str, line: usize) -> Result<Vec<String>, ConfigError> {
        let who = classify(name).map_err(|m| self.err(line, m))?;
        Ok(match who {
            Who::Spec(s) => {
                crate::access::ClientSpec::parse(&s).map_err(|m| self.err(line, m))?;
                vec![s]
            }
            Who::Wildcard(w) => {
                self.warn(line, format!("client {w:?} not given access: wildcard host names need a reverse DNS lookup per client, which rnfsd does not do; list the addresses or networks"));
                Vec::new()
            }
            Who::Host(h) => self.host(&h, line, ""),
            Who::Netgroup(g) => match self.r.netgroup(&g) {
                Err(e) => {
                    self.warn(line, format!("netgroup @{g} not given access: {e}"));
                    Vec::new()
                }
                Ok(members) => {
                    let mut v = Vec::new();
                    let from = format!(" (in netgroup @{g})");
                    for m in members {
                        if m.is_empty() {
                            self.warn(line, format!("netgroup @{g}: a member with an empty host field (any host) is not given access"));
                        } else if m == "-" {
                            // netgroup(5): "-" is no valid value, no host.
                        } else if let Ok(ip) = m.parse::<IpAddr>() {
                            v.push(ip.to_string());
                        } else {
                            v.extend(self.host(&m, line, &from));
                        }
                    }
                    v
                }
            },
        })
    }

    fn host(&mut self, h: &str, line: usize, from: &str) -> Vec<String> {
        match self.r.host(h) {
            Ok(v) if !v.is_empty() => v.iter().map(|ip| ip.to_string()).collect(),
            Ok(_) => {
                self.warn(
                    line,
                    format!("host {h:?}{from} has no address: not given access"),
                );
                Vec::new()
            }
            Err(e) => {
                self.warn(
                    line,
                    format!("host {h:?}{from} does not resolve ({e}): not given access"),
                );
                Vec::new()
            }
        }
    }
}

fn is_uuid(v: &str) -> bool {
    let hex: Vec<u8> = v.bytes().filter(|b| !matches!(b, b'-' | b':')).collect();
    hex.len() == 32 && hex.iter().all(u8::is_ascii_hexdigit)
}

/// What kind of client `name` is (exports(5) "Machine Name Formats").
fn classify(name: &str) -> Result<Who, String> {
    if name == "*" {
        return Ok(Who::Spec("*".into()));
    }
    if let Some(g) = name.strip_prefix('@') {
        if g.is_empty() || g.starts_with('-') || g.contains(char::is_whitespace) {
            return Err(format!("client {name:?}: not a netgroup name"));
        }
        return Ok(Who::Netgroup(g.into()));
    }
    if let Some((addr, mask)) = name.split_once('/') {
        let ip: IpAddr = addr
            .parse()
            .map_err(|_| format!("client {name:?}: not an address/length or address/netmask"))?;
        let len = match mask.parse::<Ipv4Addr>() {
            Ok(m) if ip.is_ipv4() => {
                let bits = u32::from(m);
                if bits.leading_ones() + bits.trailing_zeros() != 32 {
                    return Err(format!("client {name:?}: netmask {m} is not contiguous"));
                }
                bits.leading_ones().to_string()
            }
            _ => mask.to_owned(),
        };
        return Ok(Who::Spec(format!("{addr}/{len}")));
    }
    if name.parse::<IpAddr>().is_ok() {
        return Ok(Who::Spec(name.into()));
    }
    if name.contains(['*', '?', '[']) {
        return Ok(Who::Wildcard(name.into()));
    }
    if name.starts_with('-')
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
    {
        return Err(format!(
            "client {name:?}: not an address, a network, a host name, @netgroup or *"
        ));
    }
    Ok(Who::Host(name.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::{ClientOpts, NOBODY};
    use std::collections::HashMap;

    /// Fixed answers: no DNS, no NIS.
    #[derive(Default)]
    struct Fake {
        hosts: HashMap<&'static str, Vec<&'static str>>,
        groups: HashMap<&'static str, Vec<&'static str>>,
    }

    impl Resolver for Fake {
        fn host(&self, name: &str) -> Result<Vec<IpAddr>, String> {
            let v = self.hosts.get(name).ok_or("Name or service not known")?;
            Ok(v.iter().map(|a| a.parse().unwrap()).collect())
        }
        fn netgroup(&self, name: &str) -> Result<Vec<String>, String> {
            let v = self.groups.get(name).ok_or("unknown netgroup")?;
            Ok(v.iter().map(|s| s.to_string()).collect())
        }
    }

    fn fake() -> Fake {
        let mut f = Fake::default();
        f.hosts.insert("master", vec!["192.0.2.10"]);
        f.hosts.insert("trusty", vec!["192.0.2.11", "2001:db8::11"]);
        f.hosts.insert("pc001", vec!["192.0.2.20"]);
        f.hosts.insert("server", vec!["192.0.2.30"]);
        f.hosts.insert("ext1", vec!["198.51.100.1"]);
        f.hosts.insert("noaddr", vec![]);
        f.groups.insert("trusted", vec!["master", "192.0.2.40"]);
        f.groups.insert("external", vec!["ext1", "", "gone"]);
        f
    }

    fn ok(text: &str) -> Parsed {
        parse(text, "F", &fake()).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    fn bad(text: &str) -> String {
        match parse(text, "F", &fake()) {
            Ok(p) => panic!("{text:?} parsed: {p:?}"),
            Err(e) => e.0,
        }
    }

    /// The effective options of `ip` on export `i`.
    fn opts(p: &Parsed, i: usize, ip: &str) -> Option<ClientOpts> {
        let a = p.exports[i].access().unwrap();
        a.lookup(ip.parse().unwrap()).copied()
    }

    fn knfsd_default() -> ClientOpts {
        ClientOpts {
            read_only: true,
            ..ClientOpts::default()
        }
    }

    fn warned(p: &Parsed, what: &str) -> bool {
        p.warnings.iter().any(|w| w.contains(what))
    }

    /// The `# sample /etc/exports file` of exports(5).
    #[test]
    fn man_page_sample() {
        let p = ok(r#"
# sample /etc/exports file
/               master(rw) trusty(rw,no_root_squash)
/projects       proj*.local.domain(rw)
/usr            *.local.domain(ro) @trusted(rw)
/home/joe       pc001(rw,all_squash,anonuid=150,anongid=100)
/pub            *(ro,insecure,all_squash)
/srv/www        -sync,rw server @trusted @external(ro)
/foo            2001:db8:9:e54::/64(rw) 192.0.2.0/24(rw)
/build          buildhost[0-9].local.domain(rw)
"#);
        let paths: Vec<_> = p.exports.iter().map(|e| e.path.to_str().unwrap()).collect();
        assert_eq!(
            paths,
            [
                "/",
                "/projects",
                "/usr",
                "/home/joe",
                "/pub",
                "/srv/www",
                "/foo",
                "/build"
            ]
        );
        let rw = ClientOpts {
            read_only: false,
            ..knfsd_default()
        };
        // /: master rw, trusty (both addresses) rw without squashing.
        assert_eq!(opts(&p, 0, "192.0.2.10"), Some(rw));
        let trusty = ClientOpts {
            root_squash: false,
            ..rw
        };
        assert_eq!(opts(&p, 0, "192.0.2.11"), Some(trusty));
        assert_eq!(opts(&p, 0, "2001:db8::11"), Some(trusty));
        assert_eq!(opts(&p, 0, "192.0.2.12"), None);
        assert_eq!(p.exports[0].access().unwrap().rules().len(), 3);
        // Wildcards get nobody, with a warning naming the line.
        assert!(p.exports[1].access().unwrap().rules().is_empty());
        assert!(warned(
            &p,
            "F:4: client \"proj*.local.domain\" not given access"
        ));
        assert!(warned(&p, "F:10: client \"buildhost[0-9].local.domain\""));
        assert!(p.exports[7].access().unwrap().rules().is_empty());
        // /usr: the netgroup's members, rw.
        assert!(warned(&p, "F:5: client \"*.local.domain\""));
        assert_eq!(opts(&p, 2, "192.0.2.10"), Some(rw));
        assert_eq!(opts(&p, 2, "192.0.2.40"), Some(rw));
        assert_eq!(p.exports[2].access().unwrap().rules().len(), 2);
        // /home/joe
        let joe = ClientOpts {
            read_only: false,
            all_squash: true,
            anonuid: 150,
            anongid: 100,
            ..knfsd_default()
        };
        assert_eq!(opts(&p, 3, "192.0.2.20"), Some(joe));
        // /pub: everyone, ro, any port, squashed.
        let public = ClientOpts {
            secure: false,
            all_squash: true,
            ..knfsd_default()
        };
        assert_eq!(opts(&p, 4, "203.0.113.9"), Some(public));
        assert_eq!(opts(&p, 4, "fe80::1"), Some(public));
        // /srv/www: -sync,rw for all; @external's own (ro) wins.
        let w = &p.exports[5];
        assert!(w.sync);
        assert_eq!(opts(&p, 5, "192.0.2.30"), Some(rw));
        assert_eq!(opts(&p, 5, "192.0.2.40"), Some(rw));
        assert_eq!(opts(&p, 5, "198.51.100.1"), Some(knfsd_default()));
        assert!(warned(
            &p,
            "F:8: netgroup @external: a member with an empty host field"
        ));
        assert!(warned(
            &p,
            "F:8: host \"gone\" (in netgroup @external) does not resolve"
        ));
        // /foo: networks.
        assert_eq!(opts(&p, 6, "2001:db8:9:e54::99"), Some(rw));
        assert_eq!(opts(&p, 6, "192.0.2.200"), Some(rw));
        assert_eq!(opts(&p, 6, "2001:db8:9:e55::1"), None);
        assert_eq!(opts(&p, 6, "192.0.3.1"), None);
        // Export-wide defaults and where each came from.
        for e in &p.exports {
            assert!(e.sync && !e.cross_mounts && e.id.is_none(), "{e:?}");
            // The export-wide options are the line's -opts: knfsd's ro
            // unless -rw.
            assert_eq!(e.read_only, e.path != Path::new("/srv/www"));
        }
        assert_eq!(p.exports[3].origin.as_deref(), Some("F:6"));
        assert_eq!(p.warnings.len(), 5, "{:#?}", p.warnings);
    }

    #[test]
    fn every_option() {
        let one = |o: &str| {
            let p = ok(&format!("/x 10.0.0.1({o})"));
            (opts(&p, 0, "10.0.0.1").unwrap(), p)
        };
        let d = knfsd_default();
        let cases: &[(&str, ClientOpts)] = &[
            ("", d),
            (
                "rw",
                ClientOpts {
                    read_only: false,
                    ..d
                },
            ),
            ("rw,ro", d),
            (
                "no_root_squash",
                ClientOpts {
                    root_squash: false,
                    ..d
                },
            ),
            ("no_root_squash,root_squash", d),
            (
                "all_squash",
                ClientOpts {
                    all_squash: true,
                    ..d
                },
            ),
            ("all_squash,no_all_squash", d),
            (
                "anonuid=7,anongid=8",
                ClientOpts {
                    anonuid: 7,
                    anongid: 8,
                    ..d
                },
            ),
            ("insecure", ClientOpts { secure: false, ..d }),
            ("insecure,secure", d),
        ];
        for (o, want) in cases {
            assert_eq!(one(o).0, *want, "{o}");
            assert!(one(o).1.warnings.is_empty(), "{o}");
        }
        assert_eq!((d.anonuid, d.anongid), (NOBODY, NOBODY));
        let e = |o: &str| one(o).1.exports.remove(0);
        assert!(e("sync").sync && e("").sync);
        assert!(!e("async").sync);
        assert!(e("crossmnt").cross_mounts && !e("").cross_mounts);
        assert_eq!(e("fsid=42").id, Some(42));
        assert_eq!(e("").id, None);
        // Harmless options: warned about, ignored.
        for o in [
            "wdelay",
            "no_wdelay",
            "subtree_check",
            "no_subtree_check",
            "hide",
            "nohide",
            "secure_locks",
            "auth_nlm",
            "insecure_locks",
            "no_auth_nlm",
            "mountpoint",
            "mp",
            "mountpoint=/x",
            "mp=/x",
            "nordirplus",
            "acl",
            "no_acl",
            "pnfs",
            "no_pnfs",
            "security_label",
            "refer=/a@h",
            "replicas=/a@h+g",
            "fsid=0",
            "fsid=root",
            "fsid=6ba7b810-9dad-11d1-80b4-00c04fd430c8",
            "xprtsec=none",
            "sec=sys:none",
        ] {
            let (got, p) = one(o);
            assert_eq!(got, d, "{o}");
            assert_eq!(p.exports[0].id, None, "{o}");
            let name = o.split([':']).next().unwrap();
            assert!(
                p.warnings
                    .iter()
                    .any(|w| w.starts_with("F:1: option") && w.contains(name)),
                "{o}: {:?}",
                p.warnings
            );
        }
        assert_eq!(
            one("wdelay").1.warnings,
            ["F:1: option \"wdelay\" ignored: rnfsd does not delay writes to gather them"]
        );
        assert!(
            one("sec=sys").1.warnings.is_empty(),
            "sec=sys is what rnfsd does"
        );
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            ("/x 10.0.0.1(bogus)", "F:1: unknown option \"bogus\""),
            ("\n\n/x a(rw) 10.0.0.1(anonuid=x)", "F:3: option \"anonuid=x\": not a number"),
            ("/x 10.0.0.1(anongid=-2)", "F:1: option \"anongid=-2\""),
            ("/x 10.0.0.1(anonuid)", "F:1: option \"anonuid\""),
            ("/x 10.0.0.1(fsid=abc)", "F:1: option \"fsid=abc\": fsid must be"),
            ("/x 10.0.0.1(fsid=99999999999)", "F:1: option \"fsid=99999999999\""),
            ("/x 10.0.0.1(sec=krb5p)", "F:1: option \"sec=krb5p\": flavor \"krb5p\""),
            ("/x 10.0.0.1(sec=sys:krb5)", "F:1: option \"sec=sys:krb5\""),
            ("/x 10.0.0.1(sec=none)", "F:1: option \"sec=none\": rnfsd serves sec=sys only"),
            ("/x 10.0.0.1(xprtsec=mtls)", "F:1: option \"xprtsec=mtls\""),
            ("/x 10.0.0.1(rw=10.0.0.2)", "F:1: unknown option \"rw=10.0.0.2\""),
            ("/x 10.0.0.1(wdelay=1)", "F:1: unknown option \"wdelay=1\""),
            ("/x -bogus 10.0.0.1", "F:1: unknown option \"bogus\""),
            ("# c\n/x 10.0.0.1 -rw", "F:2: \"-rw\": default options"),
            ("/x 10.0.0.1(rw", "F:1: \"10.0.0.1(rw\": options must be"),
            ("/x 10.0.0.1(rw)x", "F:1: \"10.0.0.1(rw)x\""),
            ("/x 10.0.0.1(rw)(ro)", "F:1: "),
            ("x 10.0.0.1", "F:1: export path \"x\" is not absolute"),
            ("/x\\1 *", "F:1: path \"/x\\\\1\": a backslash"),
            ("/x\\000 *", "F:1: path"),
            ("\"/x *", "F:1: unterminated quote"),
            ("/x \"a\nb\"", "F:1: unterminated quote"),
            ("/x 10.0.0.1/255.0.255.0", "F:1: client \"10.0.0.1/255.0.255.0\": netmask 255.0.255.0 is not contiguous"),
            ("/x 10.0.0.1/8", "F:1: client \"10.0.0.1/8\": address has bits set"),
            ("/x 10.0.0.0/33", "F:1: client \"10.0.0.0/33\""),
            ("/x ::/255.0.0.0", "F:1: client \"::/255.0.0.0\""),
            ("/x nothost/8", "F:1: client \"nothost/8\""),
            ("/x @", "F:1: client \"@\""),
            ("/x ho$t", "F:1: client \"ho$t\""),
            ("/x\n\n/x/ 10.0.0.1", "F:3: /x/ is already exported on line 1"),
            ("/x 10.0.0.1(sync) 10.0.0.2(async)", "F:1: clients \"10.0.0.1(sync)\" and \"10.0.0.2(async)\""),
            ("/x 10.0.0.1 \\\n 10.0.0.2(fsid=3)", "F:2: clients \"10.0.0.1\" and \"10.0.0.2(fsid=3)\""),
            ("/x -crossmnt 10.0.0.1 10.0.0.2(crossmnt) \\\n 10.0.0.3(nocrossmnt)", "F:2: unknown option \"nocrossmnt\""),
            ("/x 10.0.0.1(crossmnt) 10.0.0.2", "F:1: clients"),
            ("/x 10.0.0.1(ro) 10.0.0.1(rw)", "F:1: client 10.0.0.1 (from \"10.0.0.1(rw)\") is also given by \"10.0.0.1(ro)\" on line 1"),
            ("/x master(ro) @trusted(rw)", "F:1: client 192.0.2.10 (from \"@trusted(rw)\")"),
        ];
        for (text, want) in cases {
            let e = bad(text);
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn lines_comments_quotes_and_escapes() {
        let p = ok("  # only a comment\n\n\
                    /a 10.0.0.1(rw) # trailing comment 10.0.0.2\n\
                    /b \\\n   10.0.0.1 \\\n\t10.0.0.2(rw)\n\
                    \"/srv/my dir\" 10.0.0.3\n\
                    /srv/tab\\011and\\040space 10.0.0.4\n\
                    \"/q#h\" 10.0.0.5\n\
                    /c 10.0.0.6 # \\\n\
                    /d 10.0.0.7");
        let paths: Vec<_> = p.exports.iter().map(|e| e.path.to_str().unwrap()).collect();
        assert_eq!(
            paths,
            [
                "/a",
                "/b",
                "/srv/my dir",
                "/srv/tab\tand space",
                "/q#h",
                "/c",
                "/d"
            ]
        );
        assert_eq!(p.exports[0].access().unwrap().rules().len(), 1);
        assert_eq!(opts(&p, 1, "10.0.0.1"), Some(knfsd_default()));
        assert!(!opts(&p, 1, "10.0.0.2").unwrap().read_only);
        assert_eq!(p.exports[1].origin.as_deref(), Some("F:4"));
        assert_eq!(p.exports[2].origin.as_deref(), Some("F:7"));
        assert_eq!(p.exports[6].origin.as_deref(), Some("F:11"));
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        assert!(ok("").exports.is_empty());
        assert!(ok("# nothing\n").exports.is_empty());
    }

    #[test]
    fn defaults_bare_options_and_no_clients() {
        // -opts applies to every client of the line, each client's own
        // options on top.
        let p = ok("/x -rw,no_root_squash,anonuid=5 10.0.0.1 10.0.0.2(ro) 10.0.0.3(root_squash)");
        let base = ClientOpts {
            read_only: false,
            root_squash: false,
            anonuid: 5,
            ..knfsd_default()
        };
        assert_eq!(opts(&p, 0, "10.0.0.1"), Some(base));
        assert_eq!(
            opts(&p, 0, "10.0.0.2"),
            Some(ClientOpts {
                read_only: true,
                ..base
            })
        );
        assert_eq!(
            opts(&p, 0, "10.0.0.3"),
            Some(ClientOpts {
                root_squash: true,
                ..base
            })
        );
        let p = ok("/x -async,crossmnt,fsid=9 10.0.0.1 10.0.0.2(rw)");
        let e = &p.exports[0];
        assert_eq!((e.sync, e.cross_mounts, e.id), (false, true, Some(9)));
        // A bare (opts) is *(opts) (the classic "host (rw)" mistake).
        let p = ok("/x 10.0.0.1 (rw)");
        assert_eq!(opts(&p, 0, "10.0.0.1"), Some(knfsd_default()));
        assert!(!opts(&p, 0, "203.0.113.1").unwrap().read_only);
        assert!(
            p.warnings[0].starts_with("F:1: no client before \"(rw)\""),
            "{:?}",
            p.warnings
        );
        // No clients: everyone, with the defaults, and a warning.
        let p = ok("/x\n/y -rw");
        assert_eq!(opts(&p, 0, "203.0.113.1"), Some(knfsd_default()));
        assert!(!opts(&p, 1, "203.0.113.1").unwrap().read_only);
        assert_eq!(p.warnings.len(), 2);
        assert!(p.warnings[1].starts_with("F:2: /y has no clients"));
        // Same options twice is harmless (a name and its address).
        let p = ok("/x master(rw) 192.0.2.10(rw)");
        assert_eq!(p.exports[0].access().unwrap().rules().len(), 1);
    }

    #[test]
    fn client_forms() {
        let p = ok(
            "/x 10.1.0.0/255.255.0.0(rw) 10.2.0.0/16 172.16.0.0/255.240.0.0 \
                    0.0.0.0/0.0.0.0(insecure) fd00::/8(rw) ::1 fe80::1/128 10.3.3.3",
        );
        let a = p.exports[0].access().unwrap();
        let texts: Vec<_> = a.rules().iter().map(|r| r.spec.to_string()).collect();
        // Hosts first, then networks in order (exports(5) precedence).
        assert_eq!(
            texts,
            [
                "::1",
                "fe80::1/128",
                "10.3.3.3",
                "10.1.0.0/16",
                "10.2.0.0/16",
                "172.16.0.0/12",
                "0.0.0.0/0",
                "fd00::/8",
            ]
        );
        assert!(!opts(&p, 0, "10.1.2.3").unwrap().read_only);
        assert!(opts(&p, 0, "10.2.2.3").unwrap().read_only);
        assert!(opts(&p, 0, "172.31.0.1").is_some());
        assert!(!opts(&p, 0, "8.8.8.8").unwrap().secure);
        assert!(!opts(&p, 0, "::ffff:8.8.8.8").unwrap().secure, "mapped v4");
        assert!(!opts(&p, 0, "fd12::1").unwrap().read_only);
        assert!(opts(&p, 0, "fe80::2").is_none());
        // Names: unresolvable or addressless hosts, unknown netgroups.
        let p = ok("/x nowhere(rw) noaddr @nogroup 10.0.0.1");
        assert_eq!(p.exports[0].access().unwrap().rules().len(), 1);
        assert!(warned(
            &p,
            "F:1: host \"nowhere\" does not resolve (Name or service not known): not given access"
        ));
        assert!(warned(&p, "F:1: host \"noaddr\" has no address"));
        assert!(warned(
            &p,
            "F:1: netgroup @nogroup not given access: unknown netgroup"
        ));
        for w in ["h?st", "*", "a*"] {
            let p = ok(&format!("/x {w}"));
            assert_eq!(p.warnings.is_empty(), w == "*", "{w}");
        }
    }

    #[test]
    fn getent_output() {
        assert_eq!(
            netgroup_hosts("trusted   (master,,) (192.0.2.40,joe,dom) (,bob,) (-,x,)\n"),
            ["master", "192.0.2.40", "", "-"]
        );
        assert!(netgroup_hosts("").is_empty());
        assert_eq!(netgroup_hosts("g (a,,"), Vec::<String>::new());
        assert!(is_uuid("6ba7b810:9dad11d1:80b400c0:4fd430c8"));
        assert!(!is_uuid("6ba7b810"));
    }

    #[test]
    fn load_names_the_file() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("exports");
        let e = load(&f, &fake()).unwrap_err().0;
        assert!(
            e.contains("cannot read exports file") && e.contains(f.to_str().unwrap()),
            "{e}"
        );
        std::fs::write(&f, "/x 10.0.0.1(wdelay)\n/y 10.0.0.1(nope)\n").unwrap();
        let e = load(&f, &fake()).unwrap_err().0;
        assert_eq!(e, format!("{}:2: unknown option \"nope\"", f.display()));
    }
}
