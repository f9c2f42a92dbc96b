//! The hosts that took locks here, kept in the state directory with this
//! server's NSM state number, so a restarted server knows whether clients
//! may want their locks back (then a grace period) and whom to tell that
//! it restarted (SM_NOTIFY to each host's status monitor, XNFS chapter
//! 11), as knfsd's statd and sm-notify do with /var/lib/nfs/sm.

use std::collections::BTreeMap;
use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Bound on remembered hosts (beyond it new hosts are not remembered: a
/// restart then cannot tell them, and their locks are lost like a
/// server's without NSM).
pub const MAX_HOSTS: usize = 4096;

/// A host that held locks: where it called from (what it is known by),
/// the address it called (the name it knows this server by), and the NLM
/// caller name it gave (for the logs only: any client may send any name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub name: Vec<u8>,
    pub addr: IpAddr,
    pub server: IpAddr,
}

/// One record per client address and server address it called.
type Key = (IpAddr, IpAddr);

fn key(h: &Host) -> Key {
    (crate::canon(h.addr), crate::canon(h.server))
}

pub struct Hosts {
    file: PathBuf,
    set: Mutex<BTreeMap<Key, Host>>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Writes `text` to `path` whole (temporary file, fsync, rename).
fn write_atomic(path: &Path, text: &str) -> io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    // The rename itself must survive a power cut: a lost host list means
    // no grace period and no notice, and the clients' locks are not
    // reclaimed.
    match path.parent() {
        Some(dir) => std::fs::File::open(dir)?.sync_all(),
        None => Ok(()),
    }
}

impl Hosts {
    /// Opens `dir` (made if missing): returns the list, the hosts of the
    /// previous run (kept: they are told, and may reclaim) and this run's
    /// NSM state number (odd: up; advanced by 2 at each start).
    pub fn load(dir: &Path) -> io::Result<(Hosts, Vec<Host>, i32)> {
        std::fs::create_dir_all(dir)?;
        let state_file = dir.join("state");
        let before: i32 = std::fs::read_to_string(&state_file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(-1);
        let state = (before | 1).wrapping_add(2);
        write_atomic(&state_file, &format!("{state}\n"))?;
        let file = dir.join("hosts");
        let mut set = BTreeMap::new();
        for line in std::fs::read_to_string(&file).unwrap_or_default().lines() {
            let mut f = line.split_whitespace();
            let parsed = (|| {
                let name = unhex(f.next()?)?;
                let addr = f.next()?.parse().ok()?;
                let server = f.next()?.parse().ok()?;
                Some(Host { name, addr, server })
            })();
            if let Some(h) = parsed {
                if set.len() < MAX_HOSTS {
                    set.insert(key(&h), h);
                }
            }
        }
        let before = set.values().cloned().collect();
        Ok((
            Hosts {
                file,
                set: Mutex::new(set),
            },
            before,
            state,
        ))
    }

    fn save(&self, set: &BTreeMap<Key, Host>) {
        let text: String = set
            .values()
            .map(|h| format!("{} {} {}\n", hex(&h.name), h.addr, h.server))
            .collect();
        if let Err(e) = write_atomic(&self.file, &text) {
            tracing::warn!(file = %self.file.display(), "lock manager: hosts not saved: {e}");
        }
    }

    /// `h` took a lock: remembered (written at once when new: a crash
    /// right after must still find it). A client address has one record
    /// per server address it called, whatever names it gives.
    pub fn add(&self, h: Host) {
        let mut set = self.set.lock().unwrap_or_else(|e| e.into_inner());
        let k = key(&h);
        let h = Host {
            addr: k.0,
            server: k.1,
            ..h
        };
        if let Some(known) = set.get_mut(&k) {
            // Known: a new name is kept for the logs, not worth a write.
            known.name = h.name;
            return;
        }
        if set.len() >= MAX_HOSTS {
            return;
        }
        set.insert(k, h);
        self.save(&set);
    }

    /// The client at `addr` freed its locks (FREE_ALL, or its reboot
    /// notice): its records go.
    pub fn forget(&self, addr: IpAddr) {
        let addr = crate::canon(addr);
        let mut set = self.set.lock().unwrap_or_else(|e| e.into_inner());
        let before = set.len();
        set.retain(|k, _| k.0 != addr);
        if set.len() != before {
            self.save(&set);
        }
    }

    /// The records kept now.
    pub fn list(&self) -> Vec<Host> {
        let set = self.set.lock().unwrap_or_else(|e| e.into_inner());
        set.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_state_survive_a_restart() {
        let d = tempfile::tempdir().unwrap();
        let (h, before, s1) = Hosts::load(d.path()).unwrap();
        assert!(before.is_empty());
        assert_eq!(s1 % 2, 1, "odd: up");
        let a = Host {
            name: b"client a".to_vec(),
            addr: "10.0.0.2".parse().unwrap(),
            server: "10.0.0.1".parse().unwrap(),
        };
        h.add(a.clone());
        h.add(Host {
            name: b"b".to_vec(),
            addr: "::1".parse().unwrap(),
            server: "::1".parse().unwrap(),
        });
        h.forget("::1".parse().unwrap());
        drop(h);
        let (_, before, s2) = Hosts::load(d.path()).unwrap();
        assert_eq!(before, vec![a]);
        assert_eq!(s2, s1 + 2);
        assert_eq!(unhex("zz"), None);
    }

    /// Two clients that give the same caller name are two hosts (each is
    /// told of a restart), and one client is one record whatever names it
    /// gives: names cannot fill the list.
    #[test]
    fn hosts_are_their_addresses() {
        let d = tempfile::tempdir().unwrap();
        let (h, _, _) = Hosts::load(d.path()).unwrap();
        let host = |name: &str, addr: &str| Host {
            name: name.as_bytes().to_vec(),
            addr: addr.parse().unwrap(),
            server: "10.0.0.1".parse().unwrap(),
        };
        h.add(host("ubuntu", "10.0.0.2"));
        h.add(host("ubuntu", "10.0.0.3"));
        for i in 0..MAX_HOSTS + 10 {
            h.add(host(&format!("name{i}"), "10.0.0.4"));
        }
        h.add(host("late", "::ffff:10.0.0.5"));
        let addrs: Vec<String> = h.list().iter().map(|h| h.addr.to_string()).collect();
        assert_eq!(addrs, ["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"]);
        h.forget("10.0.0.2".parse().unwrap());
        drop(h);
        let (_, before, _) = Hosts::load(d.path()).unwrap();
        let addrs: Vec<String> = before.iter().map(|h| h.addr.to_string()).collect();
        assert_eq!(addrs, ["10.0.0.3", "10.0.0.4", "10.0.0.5"]);
    }
}
