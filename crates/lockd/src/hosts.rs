//! The hosts that took locks here, kept in the state directory with this
//! server's NSM state number, so a restarted server knows whether clients
//! may want their locks back (then a grace period) and whom to tell that
//! it restarted (SM_NOTIFY to each host's status monitor, XNFS chapter
//! 11), as knfsd's statd and sm-notify do with /var/lib/nfs/sm.
//!
//! The list is in memory; a writer thread puts it in the file (whole:
//! temporary file, fsync, rename, fsync of the directory) after each
//! change, changes made while it writes going into its next write. A lock
//! call only changes the memory and wakes it: no file I/O on the request
//! path. A new host is on disk a write's time (a few milliseconds) after
//! its first lock; a crash within that window loses its record, as a lost
//! SM_MON would with knfsd.

use std::collections::BTreeMap;
use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Bound on remembered hosts (beyond it new hosts are not remembered: a
/// restart then cannot tell them, and their locks are lost like a
/// server's without NSM). One client address takes one record per server
/// address it called, so clients cannot fill it by sending names.
pub const MAX_HOSTS: usize = 4096;

/// Longest caller name kept (longer ones are cut): it is only for the
/// logs, and each byte is written to the file on every change.
pub const MAX_NAME: usize = 255;

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
    shared: Arc<Shared>,
}

struct Shared {
    file: PathBuf,
    set: Mutex<BTreeMap<Key, Host>>,
    writer: Mutex<Writer>,
    /// Signals a change to the writer and a finished write to `sync`.
    cv: Condvar,
    /// When the list was last found full (its error is logged once a
    /// minute).
    full_logged: Mutex<Option<Instant>>,
}

/// The writer thread's progress: changes counted, changes on disk.
#[derive(Default)]
struct Writer {
    changed: u64,
    written: u64,
    started: bool,
    stop: bool,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
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
        let shared = Arc::new(Shared {
            file,
            set: Mutex::new(set),
            writer: Mutex::default(),
            cv: Condvar::new(),
            full_logged: Mutex::new(None),
        });
        Ok((Hosts { shared }, before, state))
    }

    /// The list changed: the writer puts it on disk (started on the first
    /// change; when it cannot start, the caller writes).
    fn changed(&self) {
        let sh = &self.shared;
        let mut w = locked(&sh.writer);
        w.changed += 1;
        if !w.started {
            let s = sh.clone();
            let spawned = std::thread::Builder::new()
                .name("rnfsd-nlm-hosts".into())
                .spawn(move || s.write_loop());
            match spawned {
                Ok(_) => w.started = true,
                Err(e) => {
                    tracing::warn!("lock manager: no hosts writer thread ({e}): written in line");
                    let n = w.changed;
                    drop(w);
                    sh.save();
                    locked(&sh.writer).written = n;
                    return;
                }
            }
        }
        sh.cv.notify_all();
    }

    /// Waits (at most `timeout`) until every change made so far is on
    /// disk: at shutdown, and for tests. False on timeout.
    pub fn sync(&self, timeout: Duration) -> bool {
        let sh = &self.shared;
        let deadline = Instant::now() + timeout;
        let mut w = locked(&sh.writer);
        let want = w.changed;
        while w.written < want {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            w = sh
                .cv
                .wait_timeout(w, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        true
    }

    /// `h` took a lock: remembered (written at once when new: a crash
    /// right after must still find it). A client address has one record
    /// per server address it called, whatever names it gives.
    pub fn add(&self, h: Host) {
        let mut set = locked(&self.shared.set);
        let k = key(&h);
        let mut name = h.name;
        name.truncate(MAX_NAME);
        let h = Host {
            name,
            addr: k.0,
            server: k.1,
        };
        if let Some(known) = set.get_mut(&k) {
            // Known: a new name is kept for the logs, not worth a write.
            known.name = h.name;
            return;
        }
        if set.len() >= MAX_HOSTS {
            drop(set);
            self.log_full(k.0);
            return;
        }
        set.insert(k, h);
        drop(set);
        self.changed();
    }

    fn log_full(&self, addr: IpAddr) {
        let mut last = locked(&self.shared.full_logged);
        if last.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
            *last = Some(Instant::now());
            tracing::error!(
                client = %addr,
                max = MAX_HOSTS,
                "lock manager: the hosts list is full: this client is not remembered, and a \
                 restart will not tell it to reclaim its locks (logged once a minute)"
            );
        }
    }

    /// The client at `addr` freed its locks (FREE_ALL, or its reboot
    /// notice): its records go.
    pub fn forget(&self, addr: IpAddr) {
        let addr = crate::canon(addr);
        let mut set = locked(&self.shared.set);
        let before = set.len();
        set.retain(|k, _| k.0 != addr);
        let gone = set.len() != before;
        drop(set);
        if gone {
            self.changed();
        }
    }

    /// The records kept now.
    pub fn list(&self) -> Vec<Host> {
        locked(&self.shared.set).values().cloned().collect()
    }
}

impl Drop for Hosts {
    /// The writer finishes what is pending, then ends.
    fn drop(&mut self) {
        locked(&self.shared.writer).stop = true;
        self.shared.cv.notify_all();
    }
}

impl Shared {
    /// Writes the list as it is now.
    fn save(&self) {
        let text: String = locked(&self.set)
            .values()
            .map(|h| format!("{} {} {}\n", hex(&h.name), h.addr, h.server))
            .collect();
        if let Err(e) = write_atomic(&self.file, &text) {
            tracing::warn!(file = %self.file.display(), "lock manager: hosts not saved: {e}");
        }
    }

    /// The writer thread: one write per wakeup, covering every change
    /// made before it began.
    fn write_loop(&self) {
        loop {
            let target = {
                let mut w = locked(&self.writer);
                while w.written == w.changed && !w.stop {
                    w = self.cv.wait(w).unwrap_or_else(|e| e.into_inner());
                }
                if w.written == w.changed {
                    return;
                }
                w.changed
            };
            self.save();
            let mut w = locked(&self.writer);
            w.written = w.written.max(target);
            self.cv.notify_all();
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
        h.forget("::1".parse().unwrap());
        assert!(h.sync(Duration::from_secs(10)));
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
        assert!(h.sync(Duration::from_secs(10)));
        drop(h);
        let (_, before, _) = Hosts::load(d.path()).unwrap();
        let addrs: Vec<String> = before.iter().map(|h| h.addr.to_string()).collect();
        assert_eq!(addrs, ["10.0.0.3", "10.0.0.4", "10.0.0.5"]);
    }

    /// Recording a host does no file I/O: the writer thread does it. The
    /// temporary file here is a FIFO no one reads, where writing blocks.
    #[test]
    fn hosts_are_written_off_the_request_path() {
        let d = tempfile::tempdir().unwrap();
        let (h, _, _) = Hosts::load(d.path()).unwrap();
        let fifo = std::ffi::CString::new(d.path().join("hosts.tmp").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let h = Arc::new(h);
        let (tx, rx) = std::sync::mpsc::channel();
        let adder = h.clone();
        std::thread::spawn(move || {
            for i in 0..50u8 {
                adder.add(Host {
                    name: vec![b'x'; 1000],
                    addr: IpAddr::from([10, 1, 0, i]),
                    server: "10.0.0.1".parse().unwrap(),
                });
            }
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(5))
            .expect("adding hosts waited for the file");
        assert!(!h.sync(Duration::from_millis(100)), "the writer is stuck");
        assert!(h.list().iter().all(|h| h.name.len() == MAX_NAME));
        // A reader lets the stuck write through (it then fails: a FIFO has
        // no fsync); with the FIFO gone, the next change is written.
        use std::os::unix::fs::OpenOptionsExt;
        let reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(d.path().join("hosts.tmp"))
            .unwrap();
        assert!(h.sync(Duration::from_secs(10)), "the stuck write ended");
        drop(reader);
        std::fs::remove_file(d.path().join("hosts.tmp")).unwrap();
        h.add(Host {
            name: b"last".to_vec(),
            addr: IpAddr::from([10, 1, 1, 0]),
            server: "10.0.0.1".parse().unwrap(),
        });
        assert!(h.sync(Duration::from_secs(10)));
        drop(h);
        let (_, before, _) = Hosts::load(d.path()).unwrap();
        assert_eq!(before.len(), 51);
    }
}
