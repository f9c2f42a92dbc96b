//! Persistent and per-instance secrets: the handle key (kept in the state
//! directory so handles stay valid across restarts) and the write verifier
//! (new for every server instance, RFC 1813 §3.3.7).

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

pub const KEY_FILE: &str = "handle.key";
pub const KEY_LEN: usize = 32;

/// The default state directory: /var/lib/rnfsd for root, else
/// $XDG_STATE_HOME/rnfsd, else ~/.local/state/rnfsd.
pub fn default_state_dir() -> PathBuf {
    let root = rustix::process::geteuid().is_root();
    state_dir_for(
        root,
        std::env::var_os("XDG_STATE_HOME").map(PathBuf::from),
        std::env::var_os("HOME").map(PathBuf::from),
    )
}

fn state_dir_for(root: bool, xdg: Option<PathBuf>, home: Option<PathBuf>) -> PathBuf {
    if root {
        return PathBuf::from("/var/lib/rnfsd");
    }
    // XDG: a relative value is invalid and must be ignored.
    if let Some(x) = xdg.filter(|x| x.is_absolute()) {
        return x.join("rnfsd");
    }
    match home {
        Some(h) => h.join(".local/state/rnfsd"),
        None => PathBuf::from("/tmp/rnfsd-state"),
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Read `dir/handle.key`, creating the directory (0700) and a fresh random
/// key (0600) on first run. A key file of the wrong size is an error rather
/// than being replaced: replacing it would silently make every handle
/// clients hold stale.
pub fn load_or_create_handle_key(dir: &Path) -> io::Result<[u8; KEY_LEN]> {
    let path = dir.join(KEY_FILE);
    match fs::read(&path) {
        Ok(b) => {
            let key: [u8; KEY_LEN] = b.as_slice().try_into().map_err(|_| {
                invalid(format!(
                    "{} holds {} bytes, not {KEY_LEN}: remove it to make a new key \
                     (clients' handles will go stale)",
                    path.display(),
                    b.len()
                ))
            })?;
            let mode = fs::metadata(&path)?.permissions().mode();
            if mode & 0o077 != 0 {
                tracing::warn!(path = %path.display(), mode = format!("{mode:o}"),
                    "handle key is readable by others: anyone who reads it can forge handles");
            }
            return Ok(key);
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    fs::create_dir_all(dir)?;
    let mut key = [0u8; KEY_LEN];
    fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
    // Write a temporary file then rename, so a crash never leaves a short key.
    let tmp = dir.join(format!("{KEY_FILE}.tmp{}", std::process::id()));
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(&key)?;
        f.sync_all()?;
    }
    // Another instance may have created the key meanwhile: hard_link fails
    // then, and we use theirs.
    match fs::hard_link(&tmp, &path) {
        Ok(()) => {
            let _ = fs::remove_file(&tmp);
            tracing::info!(path = %path.display(), "created a new handle key");
            if let Ok(d) = fs::File::open(dir) {
                let _ = d.sync_all();
            }
            Ok(key)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let _ = fs::remove_file(&tmp);
            load_or_create_handle_key(dir)
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// RFC 1813 writeverf3: different for every server instance (so clients
/// resend uncommitted writes after a restart), constant within one.
pub fn new_write_verifier() -> [u8; 8] {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    // The pid separates two instances started in the same nanosecond tick.
    let v = now ^ (u64::from(std::process::id()) << 40);
    v.to_be_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_created_once_and_kept() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("state/sub");
        let k1 = load_or_create_handle_key(&dir).unwrap();
        let k2 = load_or_create_handle_key(&dir).unwrap();
        assert_eq!(k1, k2);
        assert_ne!(k1, [0; KEY_LEN]);
        let meta = fs::metadata(dir.join(KEY_FILE)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(meta.len(), KEY_LEN as u64);
        // No temporary files left behind.
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        // A different directory gets a different key.
        assert_ne!(
            load_or_create_handle_key(&d.path().join("other")).unwrap(),
            k1
        );
    }

    #[test]
    fn damaged_key_is_an_error_not_replaced() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join(KEY_FILE), b"short").unwrap();
        let e = load_or_create_handle_key(d.path()).unwrap_err();
        assert!(e.to_string().contains("5 bytes"), "{e}");
        assert_eq!(fs::read(d.path().join(KEY_FILE)).unwrap(), b"short");
    }

    #[test]
    fn state_dir_defaults() {
        let h = Some(PathBuf::from("/home/u"));
        assert_eq!(
            state_dir_for(true, None, h.clone()),
            PathBuf::from("/var/lib/rnfsd")
        );
        assert_eq!(
            state_dir_for(false, Some("/x/state".into()), h.clone()),
            PathBuf::from("/x/state/rnfsd")
        );
        assert_eq!(
            state_dir_for(false, Some("rel".into()), h.clone()),
            PathBuf::from("/home/u/.local/state/rnfsd")
        );
        assert_eq!(
            state_dir_for(false, None, h),
            PathBuf::from("/home/u/.local/state/rnfsd")
        );
    }

    #[test]
    fn write_verifiers_differ_between_instances() {
        let a = new_write_verifier();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_ne!(a, new_write_verifier());
    }
}
