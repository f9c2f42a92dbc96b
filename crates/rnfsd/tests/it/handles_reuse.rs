//! Handles without a generation never reach the wrong object (the hardening
//! issue, item 8). On overlayfs (containers' filesystem) a file has no
//! generation the server can read, so path-mode handles used to carry 0,
//! which matched any object: a stale handle of a deleted file resolved to a
//! new file that reused its inode number, and a WRITE landed in it. The
//! upper layer here is XFS, which reuses a freed inode number at once.
//! Handles now carry the birth time where there is no generation; the old
//! handle must be STALE and the new file untouched.

use crate::common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use common::blockdev::{run, unavailable, LoopFs};
use common::nfs::*;
use common::TestServer;
use rnfsd_client::nfs3::*;

struct Umount(std::path::PathBuf);

impl Drop for Umount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

fn ino(p: &Path) -> u64 {
    std::fs::metadata(p).expect("stat").ino()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_inode_number_on_overlayfs_is_stale() {
    let ovl = std::fs::read_to_string("/proc/filesystems").is_ok_and(|f| f.contains("overlay"));
    let why =
        unavailable(&["mkfs.xfs"]).or_else(|| (!ovl).then(|| "no overlayfs in this kernel".into()));
    if common::skip("handles-reuse", why) {
        return;
    }
    let fs = LoopFs::xfs("ovl-reuse", 512);
    let m = &fs.mnt;
    for d in ["lower", "upper", "work", "merged"] {
        std::fs::create_dir(m.join(d)).expect("mkdir");
    }
    let opts = format!(
        "lowerdir={},upperdir={},workdir={}",
        m.join("lower").display(),
        m.join("upper").display(),
        m.join("work").display()
    );
    let merged = m.join("merged");
    run(
        "mount",
        &[
            "-t",
            "overlay",
            "overlay",
            "-o",
            &opts,
            merged.to_str().unwrap(),
        ],
    );
    let _umount = Umount(merged.clone());
    std::fs::write(merged.join("a"), b"old").expect("write a");
    let old_ino = ino(&merged.join("a"));
    let mut srv = TestServer::start_with(&merged, &["--no-rpcbind", "--handle-mode", "path"]);
    let old = bounded(async {
        let s = mount(&srv).await;
        lookup(&s.nfs, &s.root, "a").await
    })
    .await;
    // A restart (same handle key) forgets every cached descriptor and
    // remembered location: the old handle can only be found again by its
    // inode number, which the new file will have.
    srv.stop();
    std::fs::remove_file(merged.join("a")).expect("rm a");
    let mut reused = false;
    for i in 0..2000 {
        let p = merged.join(format!("n{i}"));
        std::fs::write(&p, b"new").expect("write");
        if ino(&p) == old_ino {
            reused = true;
            break;
        }
    }
    assert!(reused, "XFS did not reuse inode {old_ino} in 2,000 creates");
    srv.respawn();
    bounded(async {
        let s = mount(&srv).await;
        // The walk for a lost handle answers JUKEBOX until it is done.
        let mut w = None;
        for _ in 0..100 {
            let r = s
                .nfs
                .write(&Write3Args {
                    file: old.clone(),
                    offset: 0,
                    count: 5,
                    stable: StableHow::FileSync,
                    data: b"WRONG".to_vec(),
                })
                .await
                .expect("WRITE rpc");
            if matches!(r, NfsRes::Fail(Nfsstat3::Jukebox, _)) {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
            w = Some(r);
            break;
        }
        let w = w.expect("an answer other than JUKEBOX within 10 s");
        assert!(
            matches!(w, NfsRes::Fail(Nfsstat3::Stale, _)),
            "WRITE through the old handle reached the new file: {w:?}"
        );
    })
    .await;
    for i in 0..2000 {
        let p = merged.join(format!("n{i}"));
        if p.exists() {
            assert_eq!(std::fs::read(&p).expect("read"), b"new", "{}", p.display());
        }
    }
}
