//! The whole server path below the transport: `rnfsd::rpc::dispatch` over a
//! real `Server` with a `LocalFs` export in a temp directory, NFSv3 + MOUNT
//! (and the port mapper table), so every decoder and every handler sees
//! arbitrary bytes, with the duplicate reply cache in the path (the
//! structured mode's fixed xid makes repeated calls replays). The input
//! layout and the checks on every reply are in ../harness/dispatch.rs.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

#[path = "../harness/dispatch.rs"]
mod harness;

/// Wipe the export every this many calls so the disk use stays bounded.
const WIPE_EVERY: u64 = 4096;

fn env() -> &'static (harness::Env, PathBuf) {
    static ENV: OnceLock<(harness::Env, PathBuf)> = OnceLock::new();
    ENV.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("rnfsd-fuzz-export-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create export dir");
        let dir = dir.canonicalize().expect("canonical export dir");
        (harness::Env::new(&dir), dir)
    })
}

/// Remove everything below the export (best effort: chmod first so
/// directories a call made unreadable can be emptied).
fn wipe(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700));
            wipe(&p);
            let _ = std::fs::remove_dir(&p);
        } else {
            let _ = std::fs::remove_file(&p);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let (env, dir) = env();
    static CALLS: AtomicU64 = AtomicU64::new(0);
    if CALLS.fetch_add(1, Ordering::Relaxed) % WIPE_EVERY == WIPE_EVERY - 1 {
        wipe(dir);
    }
    let _ = harness::feed(env, data);
});
