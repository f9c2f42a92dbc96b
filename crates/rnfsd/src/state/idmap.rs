//! NFSv4 owner and owner_group strings (RFC 8881 §5.9).
//!
//! By default (`nfs4_idmap = "numeric"`) an id is its decimal number: what
//! the Linux client sends and expects under AUTH_SYS (its and knfsd's
//! `nfs4_disable_idmapping`). With `nfs4_idmap = "names"`, for clients that
//! map names (Linux with idmapping on, other systems), an id is
//! "name@domain" from the system's user and group databases (NSS), as
//! nfsidmap says it; numeric strings are still accepted, and an id with no
//! name is sent as its number.
//!
//! NSS may wait (LDAP, sssd), so a lookup is never made on an event loop
//! (`may_wait` false): there an id not cached is sent as its number (the
//! Linux client maps a numeric string to the same id) and queued, bounded,
//! for one resolver thread, so later answers carry the name. Each
//! direction of each kind is cached, bounded by `nfs4_idmap_cache`
//! entries; an insert into a full cache drops one entry (bounded reclaim).
//! Hand-written: no maintained crate caches NSS both ways with these rules.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};

/// Ids waiting for the resolver thread at most; more are dropped (asked
/// again by a later miss).
const RESOLVE_QUEUE: usize = 256;

/// Longest owner string accepted or made (a user or group name and a
/// domain).
pub const MAX_OWNER: usize = 512;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    User,
    Group,
}

/// Why an owner string names no id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdError {
    /// An empty string (NFS4ERR_INVAL, as knfsd).
    Empty,
    /// Not a number, or not a known name of our domain (NFS4ERR_BADOWNER).
    BadOwner,
    /// The name is not cached and this call may not wait for NSS
    /// (NFS4ERR_DELAY).
    WouldWait,
}

/// One direction of one kind, bounded.
struct Cache<K, V> {
    map: Mutex<HashMap<K, V>>,
    bound: usize,
}

impl<K: Eq + Hash + Clone, V: Clone> Cache<K, V> {
    fn new(bound: usize) -> Self {
        Cache {
            map: Mutex::new(HashMap::new()),
            bound: bound.max(1),
        }
    }

    fn locked(&self) -> MutexGuard<'_, HashMap<K, V>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get<Q: Eq + Hash + ?Sized>(&self, k: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
    {
        self.locked().get(k).cloned()
    }

    fn insert(&self, k: K, v: V) {
        let mut m = self.locked();
        if m.len() >= self.bound && !m.contains_key(&k) {
            if let Some(old) = m.keys().next().cloned() {
                m.remove(&old);
            }
        }
        m.insert(k, v);
        debug_assert!(m.len() <= self.bound);
    }
}

/// The names side: caches, our domain, the resolver's queue.
struct Names {
    domain: String,
    names: [Cache<u32, Arc<[u8]>>; 2],
    ids: [Cache<Vec<u8>, u32>; 2],
    /// The resolver's queue (None: its thread could not start).
    resolve: Option<SyncSender<(Kind, u32)>>,
}

fn slot(k: Kind) -> usize {
    match k {
        Kind::User => 0,
        Kind::Group => 1,
    }
}

pub struct IdMap {
    names: Option<Arc<Names>>,
}

impl IdMap {
    /// Ids as numbers only.
    pub fn numeric() -> IdMap {
        IdMap { names: None }
    }

    /// Ids as "name@domain", each cache bounded by `bound` entries.
    pub fn names(domain: String, bound: usize) -> IdMap {
        let n = Arc::new_cyclic(|weak| {
            let (tx, rx) = sync_channel(RESOLVE_QUEUE);
            let weak = weak.clone();
            let spawned = std::thread::Builder::new()
                .name("nfs4-idmap".into())
                .spawn(move || resolver(rx, weak));
            Names {
                domain,
                names: [Cache::new(bound), Cache::new(bound)],
                ids: [Cache::new(bound), Cache::new(bound)],
                resolve: spawned.ok().map(|_| tx),
            }
        });
        IdMap { names: Some(n) }
    }

    /// The domain names are said in, if ids are names.
    pub fn domain(&self) -> Option<&str> {
        self.names.as_ref().map(|n| n.domain.as_str())
    }

    /// Whether ids are said by name (else always by number).
    #[inline]
    pub fn maps_names(&self) -> bool {
        self.names.is_some()
    }

    /// The owner string of `id`, or None: say its number.
    pub fn name_of(&self, kind: Kind, id: u32, may_wait: bool) -> Option<Arc<[u8]>> {
        let n = self.names.as_ref()?;
        if let Some(s) = n.names[slot(kind)].get(&id) {
            return (!s.is_empty()).then_some(s);
        }
        if !may_wait {
            if let Some(tx) = &n.resolve {
                // Full: dropped, a later miss asks again.
                let _ = tx.try_send((kind, id));
            }
            return None;
        }
        let s = n.lookup_name(kind, id);
        (!s.is_empty()).then_some(s)
    }

    /// The id an owner string names: a decimal number always; with names,
    /// "name@domain" of our domain (case aside) known to NSS.
    pub fn id_of(&self, kind: Kind, s: &[u8], may_wait: bool) -> Result<u32, IdError> {
        if s.is_empty() {
            return Err(IdError::Empty);
        }
        if let Some(id) = numeric(s) {
            return Ok(id);
        }
        let n = self.names.as_ref().ok_or(IdError::BadOwner)?;
        if s.len() > MAX_OWNER {
            return Err(IdError::BadOwner);
        }
        if let Some(id) = n.ids[slot(kind)].get(s) {
            return Ok(id);
        }
        let text = std::str::from_utf8(s).map_err(|_| IdError::BadOwner)?;
        let (name, domain) = text.rsplit_once('@').ok_or(IdError::BadOwner)?;
        if name.is_empty() || !domain.eq_ignore_ascii_case(&n.domain) {
            return Err(IdError::BadOwner);
        }
        if !may_wait {
            return Err(IdError::WouldWait);
        }
        let id = nss_id(kind, name).ok_or(IdError::BadOwner)?;
        n.ids[slot(kind)].insert(s.to_vec(), id);
        Ok(id)
    }
}

impl Names {
    /// Asks NSS and caches the answer; empty: the id has no name.
    fn lookup_name(&self, kind: Kind, id: u32) -> Arc<[u8]> {
        let s: Arc<[u8]> = match nss_name(kind, id) {
            Some(name) if name.len() + 1 + self.domain.len() <= MAX_OWNER => {
                Arc::from(format!("{name}@{}", self.domain).into_bytes())
            }
            _ => Arc::from(Vec::new()),
        };
        self.names[slot(kind)].insert(id, s.clone());
        s
    }
}

/// Looks up what event loops could not, until the map goes.
fn resolver(rx: Receiver<(Kind, u32)>, names: std::sync::Weak<Names>) {
    while let Ok((kind, id)) = rx.recv() {
        let Some(n) = names.upgrade() else { return };
        if n.names[slot(kind)].get(&id).is_none() {
            n.lookup_name(kind, id);
        }
    }
}

/// A decimal id of at most 10 digits that fits in 32 bits.
fn numeric(s: &[u8]) -> Option<u32> {
    if s.len() > 10 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

fn nss_name(kind: Kind, id: u32) -> Option<String> {
    use nix::unistd::{Gid, Group, Uid, User};
    match kind {
        Kind::User => User::from_uid(Uid::from_raw(id)).ok()?.map(|u| u.name),
        Kind::Group => Group::from_gid(Gid::from_raw(id)).ok()?.map(|g| g.name),
    }
}

fn nss_id(kind: Kind, name: &str) -> Option<u32> {
    use nix::unistd::{Group, User};
    match kind {
        Kind::User => User::from_name(name).ok()?.map(|u| u.uid.as_raw()),
        Kind::Group => Group::from_name(name).ok()?.map(|g| g.gid.as_raw()),
    }
}

/// The domain ids are said in when the configuration names none: the
/// `Domain` of /etc/idmapd.conf, else the host's DNS domain, else
/// "localdomain" (nfsidmap's order).
pub fn default_domain() -> String {
    if let Ok(t) = std::fs::read_to_string("/etc/idmapd.conf") {
        if let Some(d) = idmapd_domain(&t) {
            return d;
        }
    }
    let host = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    match host.split_once('.') {
        Some((_, d)) if !d.is_empty() => d.to_ascii_lowercase(),
        _ => "localdomain".into(),
    }
}

/// `Domain = x` of idmapd.conf's [General] section.
fn idmapd_domain(conf: &str) -> Option<String> {
    let mut general = false;
    for line in conf.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            general = l.eq_ignore_ascii_case("[general]");
            continue;
        }
        if !general || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if let Some((k, v)) = l.split_once('=') {
            if k.trim().eq_ignore_ascii_case("domain") && !v.trim().is_empty() {
                return Some(v.trim().to_string());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_ids_in_both_modes_and_names_only_with_names() {
        let m = IdMap::numeric();
        assert_eq!(m.id_of(Kind::User, b"1001", true), Ok(1001));
        assert_eq!(m.id_of(Kind::User, b"", true), Err(IdError::Empty));
        assert_eq!(m.id_of(Kind::User, b"root@x", true), Err(IdError::BadOwner));
        assert_eq!(
            m.id_of(Kind::User, b"99999999999", true),
            Err(IdError::BadOwner)
        );
        assert_eq!(m.name_of(Kind::User, 0, true), None);

        let n = IdMap::names("example.org".into(), 8);
        assert_eq!(n.id_of(Kind::User, b"1001", true), Ok(1001));
        // root is uid 0 and group 0 on every system this runs on.
        assert_eq!(n.id_of(Kind::User, b"root@EXAMPLE.org", true), Ok(0));
        assert_eq!(n.id_of(Kind::Group, b"root@example.org", true), Ok(0));
        assert_eq!(
            n.id_of(Kind::User, b"root@other.org", true),
            Err(IdError::BadOwner)
        );
        assert_eq!(n.id_of(Kind::User, b"root", true), Err(IdError::BadOwner));
        assert_eq!(
            n.id_of(Kind::User, b"no-such-user-here@example.org", true),
            Err(IdError::BadOwner)
        );
        assert_eq!(
            n.id_of(Kind::User, b"no-such-user-here@example.org", false),
            Err(IdError::WouldWait)
        );
        assert_eq!(
            n.name_of(Kind::User, 0, true).as_deref(),
            Some(&b"root@example.org"[..])
        );
        // An id with no name goes as its number.
        assert_eq!(n.name_of(Kind::User, 4_000_000_001, true), None);
    }

    #[test]
    fn a_loop_never_asks_nss_and_the_resolver_fills_the_cache() {
        let n = IdMap::names("example.org".into(), 8);
        assert_eq!(n.name_of(Kind::Group, 0, false), None, "not cached yet");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            if let Some(s) = n.name_of(Kind::Group, 0, false) {
                assert_eq!(&*s, b"root@example.org");
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "resolver never filled it"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    #[test]
    fn caches_stay_within_their_bound() {
        let c: Cache<u32, u32> = Cache::new(3);
        for i in 0..100 {
            c.insert(i, i);
        }
        assert_eq!(c.locked().len(), 3);
        assert_eq!(c.get(&99), Some(99));
    }

    #[test]
    fn the_domain_comes_from_idmapd_conf_general_section() {
        let conf =
            "[Mapping]\nDomain = wrong\n[General]\n# Domain = commented\nDomain = lab.example\n";
        assert_eq!(idmapd_domain(conf).as_deref(), Some("lab.example"));
        assert_eq!(idmapd_domain("[General]\nVerbosity = 0\n"), None);
    }
}
