//! Persistent and per-instance secrets: the handle key (kept in the state
//! directory so handles stay valid across restarts) and the write verifier
//! (new for every server instance, RFC 1813 §3.3.7).

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
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

/// Refuses a state directory another user could write to, or a key file
/// someone else owns: whoever writes the key there knows it and can forge
/// handles to any object of any export (as `sshd` refuses a key file
/// others can write). The default for an unprivileged server without a home
/// directory is under /tmp, where anyone could have made it first.
fn check_private(dir: &Path, key: Option<&fs::Metadata>) -> io::Result<()> {
    let euid = rustix::process::geteuid().as_raw();
    let m = fs::metadata(dir)?;
    let whose = |what: &str, uid: u32| {
        invalid(format!(
            "{what} is owned by uid {uid}, not by this server's uid {euid}: whoever owns it \
             can read or replace the handle key"
        ))
    };
    if m.uid() != euid {
        return Err(whose(&dir.display().to_string(), m.uid()));
    }
    if m.mode() & 0o022 != 0 {
        return Err(invalid(format!(
            "{} is writable by group or others (mode {:o}): they could replace the handle \
             key; chmod go-w it",
            dir.display(),
            m.mode() & 0o7777
        )));
    }
    match key {
        Some(k) if k.uid() != euid => {
            Err(whose(&dir.join(KEY_FILE).display().to_string(), k.uid()))
        }
        _ => Ok(()),
    }
}

/// Read `dir/handle.key`, creating the directory (0700) and a fresh random
/// key (0600) on first run. A key file of the wrong size is an error rather
/// than being replaced: replacing it would silently make every handle
/// clients hold stale. The directory must be this user's alone
/// (`check_private`).
pub fn load_or_create_handle_key(dir: &Path) -> io::Result<[u8; KEY_LEN]> {
    let path = dir.join(KEY_FILE);
    if dir.exists() {
        check_private(dir, fs::metadata(&path).ok().as_ref())?;
    }
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
    let existed = dir.is_dir();
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    if !existed {
        // Exactly 0o700 whatever the umask: another thread may have
        // narrowed it meanwhile (the admin socket's bind does).
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    check_private(dir, None)?;
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
    fn a_state_dir_others_can_write_or_own_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("s");
        load_or_create_handle_key(&dir).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o1777)).unwrap();
        let e = load_or_create_handle_key(&dir).unwrap_err();
        assert!(e.to_string().contains("writable by group or others"), "{e}");
        // Not made by us, whatever the mode: refused before a key is made.
        let other = d.path().join("t");
        fs::create_dir(&other).unwrap();
        fs::set_permissions(&other, fs::Permissions::from_mode(0o775)).unwrap();
        assert!(load_or_create_handle_key(&other).is_err());
        assert!(!other.join(KEY_FILE).exists());
        if !rustix::process::geteuid().is_root() {
            return; // chown below needs root
        }
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(dir.join(KEY_FILE), Some(4242), None).unwrap();
        let e = load_or_create_handle_key(&dir).unwrap_err();
        assert!(e.to_string().contains("owned by uid 4242"), "{e}");
        std::os::unix::fs::chown(dir.join(KEY_FILE), Some(0), None).unwrap();
        std::os::unix::fs::chown(&dir, Some(4242), None).unwrap();
        let e = load_or_create_handle_key(&dir).unwrap_err();
        assert!(e.to_string().contains("owned by uid 4242"), "{e}");
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
