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

/// A host that held locks: its NLM caller name, where it called from,
/// and the address it called (the name it knows this server by).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub name: Vec<u8>,
    pub addr: IpAddr,
    pub server: IpAddr,
}

pub struct Hosts {
    file: PathBuf,
    set: Mutex<BTreeMap<Vec<u8>, Host>>,
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
                    set.insert(h.name.clone(), h);
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

    fn save(&self, set: &BTreeMap<Vec<u8>, Host>) {
        let text: String = set
            .values()
            .map(|h| format!("{} {} {}\n", hex(&h.name), h.addr, h.server))
            .collect();
        if let Err(e) = write_atomic(&self.file, &text) {
            tracing::warn!(file = %self.file.display(), "lock manager: hosts not saved: {e}");
        }
    }

    /// `h` took a lock: remembered (written at once when new: a crash
    /// right after must still find it).
    pub fn add(&self, h: Host) {
        let mut set = self.set.lock().unwrap_or_else(|e| e.into_inner());
        if set.get(&h.name) == Some(&h) || set.len() >= MAX_HOSTS {
            return;
        }
        set.insert(h.name.clone(), h);
        self.save(&set);
    }

    /// The address `name` took its locks from, if it holds any.
    pub fn addr_of(&self, name: &[u8]) -> Option<IpAddr> {
        let set = self.set.lock().unwrap_or_else(|e| e.into_inner());
        set.get(name).map(|h| h.addr)
    }

    /// `name` freed its locks (FREE_ALL, or its reboot notice).
    pub fn remove(&self, name: &[u8]) {
        let mut set = self.set.lock().unwrap_or_else(|e| e.into_inner());
        if set.remove(name).is_some() {
            self.save(&set);
        }
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
        h.remove(b"b");
        drop(h);
        let (_, before, s2) = Hosts::load(d.path()).unwrap();
        assert_eq!(before, vec![a]);
        assert_eq!(s2, s1 + 2);
        assert_eq!(unhex("zz"), None);
    }
}
