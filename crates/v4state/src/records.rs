//! The durable records of confirmed clients (RFC 8881 §8.4.3: the server
//! must know after a restart which clients may reclaim), as knfsd keeps
//! them through nfsdcld / nfsdcltrack: one small file per client in a
//! directory, named by a hash of the client's owner, holding its owner
//! and client id. Each is written (temporary file, fsync, rename, fsync
//! of the directory) before the CREATE_SESSION reply that confirms the
//! client, and removed when the client is destroyed or expires (only if
//! it still holds that client's id: a restarted client's new record
//! replaces the old one under the same name). The directory also holds
//! the boot verifier, advanced at each start.
//!
//! File format (text):
//!
//! ```text
//! rnfsd nfsv4 client 1
//! clientid 0123456789abcdef
//! owner 6c696e7578...
//! ```

use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::ids::ClientId;
use crate::shards::locked;

const MAGIC: &str = "rnfsd nfsv4 client 1";
const BOOT_FILE: &str = "boot";
const PREFIX: &str = "client-";

/// The record directory.
pub struct Records {
    dir: PathBuf,
    /// Serialises writes and removals (nothing else is taken under it).
    io: Mutex<()>,
}

/// What a start found in the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// This instance's boot verifier (advanced and written durably).
    pub boot: u32,
    /// The owners of the clients confirmed before the restart: they, and
    /// only they, may reclaim in the grace period.
    pub previous: Vec<Vec<u8>>,
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

fn name_of(owner: &[u8]) -> String {
    let h = blake3::hash(owner);
    format!("{PREFIX}{}", hex(&h.as_bytes()[..16]))
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Writes `text` to `dir/name` whole and durably.
fn write_atomic(dir: &Path, name: &str, text: &str) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(name))?;
    // The rename must survive a power cut too: a lost record is a client
    // refused its reclaims.
    sync_dir(dir)
}

/// Parses a record: its client id and owner.
fn parse(text: &str) -> Option<(ClientId, Vec<u8>)> {
    let mut lines = text.lines();
    if lines.next()? != MAGIC {
        return None;
    }
    let id = lines.next()?.strip_prefix("clientid ")?;
    let id = u64::from_str_radix(id, 16).ok()?;
    let owner = unhex(lines.next()?.strip_prefix("owner ")?)?;
    Some((ClientId(id), owner))
}

/// The records are the server's: written as the process, whatever
/// caller's filesystem identity the thread last took on for a backend
/// call (the local backend switches it lazily and leaves it).
fn as_server() {
    rnfsd_fs::local::reset_thread_creds();
}

impl Records {
    /// Opens `dir` (made, mode 0700, if missing): advances the boot
    /// verifier and lists the clients of the previous run.
    pub fn open(dir: &Path) -> io::Result<(Records, Loaded)> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let last: u32 = std::fs::read_to_string(dir.join(BOOT_FILE))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        // Distinct from every earlier run's: above the last one, and the
        // clock's seconds should the file be lost.
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as u32);
        let mut boot = last.wrapping_add(1).max(now);
        if boot == 0 || boot == u32::MAX {
            boot = 1;
        }
        write_atomic(dir, BOOT_FILE, &format!("{boot}\n"))?;
        let mut previous = Vec::new();
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            let name = e.file_name();
            let name = name.to_string_lossy();
            if !name.starts_with(PREFIX) {
                continue;
            }
            if name.ends_with(".tmp") {
                // A write cut short: its client was never confirmed.
                let _ = std::fs::remove_file(e.path());
                continue;
            }
            match std::fs::read_to_string(e.path())
                .ok()
                .and_then(|t| parse(&t))
            {
                Some((_, owner)) => previous.push(owner),
                None => {
                    tracing::warn!(file = %e.path().display(), "nfsv4: unreadable client record ignored")
                }
            }
        }
        previous.sort();
        previous.dedup();
        Ok((
            Records {
                dir: dir.to_path_buf(),
                io: Mutex::new(()),
            },
            Loaded { boot, previous },
        ))
    }

    /// Records confirmed client `id` of `owner`, durably.
    pub(crate) fn write(&self, owner: &[u8], id: ClientId) -> io::Result<()> {
        as_server();
        let _g = locked(&self.io);
        let text = format!("{MAGIC}\nclientid {:016x}\nowner {}\n", id.0, hex(owner));
        write_atomic(&self.dir, &name_of(owner), &text)
    }

    /// Removes the record of `owner` if it is client `id`'s.
    pub(crate) fn remove(&self, owner: &[u8], id: ClientId) -> io::Result<()> {
        as_server();
        let _g = locked(&self.io);
        let path = self.dir.join(name_of(owner));
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        if parse(&text).is_some_and(|(i, _)| i == id) {
            std::fs::remove_file(&path)?;
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Removes the records made by other runs than `boot` (at the end of
    /// the grace period: clients of the previous run that did not come
    /// back). Returns how many went.
    pub(crate) fn sweep(&self, boot: u32) -> io::Result<usize> {
        as_server();
        let _g = locked(&self.io);
        let mut n = 0;
        for e in std::fs::read_dir(&self.dir)? {
            let e = e?;
            if !e.file_name().to_string_lossy().starts_with(PREFIX) {
                continue;
            }
            let old = std::fs::read_to_string(e.path())
                .ok()
                .and_then(|t| parse(&t))
                .is_some_and(|(id, _)| id.boot() != boot);
            if old {
                std::fs::remove_file(e.path())?;
                n += 1;
            }
        }
        if n > 0 {
            sync_dir(&self.dir)?;
        }
        Ok(n)
    }

    /// The owners recorded now (tests and diagnostics).
    pub fn owners(&self) -> io::Result<Vec<(ClientId, Vec<u8>)>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(&self.dir)? {
            let e = e?;
            let name = e.file_name();
            if !name.to_string_lossy().starts_with(PREFIX) {
                continue;
            }
            if let Some(r) = std::fs::read_to_string(e.path())
                .ok()
                .and_then(|t| parse(&t))
            {
                out.push(r);
            }
        }
        out.sort();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_boot() {
        let d = tempfile::tempdir().unwrap();
        let (r, l) = Records::open(d.path()).unwrap();
        assert!(l.previous.is_empty());
        let b1 = l.boot;
        let id = ClientId(((b1 as u64) << 32) | 5);
        r.write(b"linux client \x00\xff", id).unwrap();
        r.write(b"other", ClientId(((b1 as u64) << 32) | 6))
            .unwrap();
        // Removing with another id leaves it (a newer record of the owner).
        r.remove(b"other", ClientId(1)).unwrap();
        assert_eq!(r.owners().unwrap().len(), 2);
        r.remove(b"other", ClientId(((b1 as u64) << 32) | 6))
            .unwrap();
        drop(r);
        let (r, l) = Records::open(d.path()).unwrap();
        assert!(l.boot > b1, "each start a new boot verifier");
        assert_eq!(l.previous, vec![b"linux client \x00\xff".to_vec()]);
        // The same owner again in this run: replaced, and kept by sweep.
        r.write(
            b"linux client \x00\xff",
            ClientId(((l.boot as u64) << 32) | 1),
        )
        .unwrap();
        r.write(b"gone", id).unwrap();
        assert_eq!(r.sweep(l.boot).unwrap(), 1);
        let left = r.owners().unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].1, b"linux client \x00\xff".to_vec());
    }

    #[test]
    fn garbage_is_ignored() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("client-zz"), "nonsense").unwrap();
        std::fs::write(d.path().join("client-yy.tmp"), "half").unwrap();
        std::fs::write(d.path().join("boot"), "12\n").unwrap();
        let (_, l) = Records::open(d.path()).unwrap();
        assert!(l.previous.is_empty());
        assert!(l.boot >= 13);
        assert!(!d.path().join("client-yy.tmp").exists());
    }
}
