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

use super::{ClientConfig, ConfigError, ExportConfig, MountPoint};

mod resolve;
pub use resolve::{Resolver, SystemResolver};

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
/// The token being read, begun on line `n` if none is.
fn start(tok: &mut Option<Token>, n: usize) -> &mut Token {
    tok.get_or_insert(Token {
        text: String::new(),
        line: n,
    })
}

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
                c => start(&mut tok, n).text.push(c),
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
                start(&mut tok, n);
            }
            c => start(&mut tok, n).text.push(c),
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
#[derive(Debug, Clone, PartialEq, Eq)]
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
    mountpoint: MountPoint,
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
            mountpoint: MountPoint::Off,
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
        "secure_locks" | "auth_nlm" => {
            "rnfsd always checks lock (NLM) calls against the export's clients and credentials"
        }
        "insecure_locks" | "no_auth_nlm" => {
            "rnfsd still checks lock (NLM) calls' credentials (secure_locks): a client sending unauthenticated lock requests is refused"
        }
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
            let takes_value = matches!(name, "refer" | "replicas");
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
                ("mountpoint" | "mp", None) => o.mountpoint = MountPoint::Export,
                ("mountpoint" | "mp", Some(p)) => {
                    o.mountpoint = MountPoint::at(p)
                        .map_err(|m| self.err(line, format!("option {opt:?}: {m}")))?
                }
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
            let mut o = defaults.clone();
            if let Some(l) = list {
                self.options(&mut o, l, t.line)?;
            }
            let name = if name.is_empty() {
                // The classic "host (rw)" typo: exportfs gives the world
                // these options. Read-only and squashed it is kept.
                let what = format!(
                    "no client before {:?}: exportfs gives these options to every host (*)",
                    t.text
                );
                if let Some(open) = opens(&o) {
                    return Err(self.err(t.line, format!("{what}, here {open}: write *{} if that is meant, or remove the space after the client", t.text)));
                }
                self.warn(
                    t.line,
                    format!("{what}, as rnfsd does; write *{} to say so", t.text),
                );
                "*"
            } else {
                name
            };
            clients.push((t, name, o));
        }
        if clients.is_empty() {
            let what = format!(
                "{} has no clients: exportfs exports it to every host (*)",
                path.display()
            );
            if let Some(open) = opens(&defaults) {
                return Err(self.err(
                    at,
                    format!("{what}, here {open}: list the clients, or write * to say so"),
                ));
            }
            self.warn(
                at,
                format!("{what}, as rnfsd does (read-only); write * to say so"),
            );
            clients.push((&world, "*", defaults.clone()));
        }
        // rnfsd keeps these per export.
        let (t0, _, o0) = &clients[0];
        let per_export = |o: &Opts| (o.sync, o.fsid, o.crossmnt, o.mountpoint.clone());
        if let Some((t, _, _)) = clients
            .iter()
            .find(|(_, _, o)| per_export(o) != per_export(o0))
        {
            return Err(self.err(
                t.line,
                format!("clients {:?} and {:?} of {} differ in sync/async, fsid, crossmnt or mountpoint, which rnfsd sets per export", t0.text, t.text, path.display()),
            ));
        }
        let mut rules: Vec<(ClientConfig, String, usize)> = Vec::new();
        for (t, name, o) in &clients {
            // classify: a name starting with @ is a netgroup.
            let netgroup = name.starts_with('@');
            for spec in self.resolve(name, t.line)? {
                let c = ClientConfig {
                    match_: spec,
                    read_only: Some(o.read_only),
                    root_squash: Some(o.root_squash),
                    all_squash: Some(o.all_squash),
                    anonuid: Some(o.anonuid),
                    anongid: Some(o.anongid),
                    secure: Some(o.secure),
                    netgroup,
                };
                // A host also in a netgroup is two rules: the host's ranks
                // first.
                let same = |r: &ClientConfig| (&r.match_, r.netgroup) == (&c.match_, c.netgroup);
                match rules.iter().find(|(r, _, _)| same(r)) {
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
            mountpoint: o0.mountpoint.clone(),
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

/// The options that make an implicit `*` (a bare `(opts)`, a line with no
/// clients) a hole rather than a typo: "with rw, no_root_squash", or None.
fn opens(o: &Opts) -> Option<String> {
    let words: Vec<&str> = [
        (!o.read_only, "rw"),
        (!o.root_squash, "no_root_squash"),
        (!o.secure, "insecure"),
    ]
    .iter()
    .filter_map(|&(on, w)| on.then_some(w))
    .collect();
    (!words.is_empty()).then(|| format!("with {}", words.join(", ")))
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
mod tests;
