//! Durability before the reply: on a `sync` export every namespace change
//! and SETATTR asks for syncs (the object and its directory) before it
//! returns; on an `async` export none do; COMMIT and stable WRITEs sync on
//! both. Counted with the backend's group-commit counters.

use rnfsd_fs::local::{HandleMode, LocalFs, LocalOptions};
use rnfsd_fs::{Backend, Call, CreateHow, Cred, Fh, SetAttr, Stable};

fn root() -> Cred {
    Cred::default()
}

/// A call on a pool thread as `cred`, whose reply leaves at once (it owes
/// no commit).
fn pool(cred: &Cred) -> Call<'_> {
    Call::thread(cred, false)
}

fn open(dir: &std::path::Path, sync: bool) -> LocalFs {
    // SAFETY: geteuid cannot fail.
    let mode = if unsafe { libc::geteuid() } == 0 {
        HandleMode::Kernel
    } else {
        HandleMode::Path
    };
    LocalFs::open(
        dir,
        3,
        LocalOptions {
            handle_mode: mode,
            handle_key: [5; 32],
            sync,
            ..LocalOptions::default()
        },
    )
    .unwrap()
}

fn requests(fs: &LocalFs) -> u64 {
    fs.stats().commits.requests
}

/// Runs `f` and returns how many sync requests it made.
fn counted(fs: &LocalFs, f: impl FnOnce()) -> u64 {
    let before = requests(fs);
    f();
    requests(fs) - before
}

fn create(fs: &LocalFs, dir: &Fh, name: &[u8]) -> Fh {
    fs.create(
        &pool(&root()),
        dir,
        name,
        &CreateHow::Unchecked(SetAttr::default()),
    )
    .unwrap()
    .fh
}

#[test]
fn sync_exports_sync_every_change_and_async_ones_none() {
    for sync in [true, false] {
        let d = tempfile::tempdir().unwrap();
        let fs = open(d.path(), sync);
        let r = fs.root();
        let per = |n: u64| if sync { n } else { 0 };
        // The new file and its directory.
        assert_eq!(
            counted(&fs, || drop(create(&fs, &r, b"f"))),
            per(2),
            "CREATE sync={sync}"
        );
        let sub = fs
            .mkdir(&pool(&root()), &r, b"d", &SetAttr::default())
            .unwrap()
            .fh;
        assert_eq!(
            counted(&fs, || drop(fs.symlink(
                &pool(&root()),
                &sub,
                b"l",
                b"t",
                &SetAttr::default()
            ))),
            per(1),
            "SYMLINK: the filesystem (a symlink cannot be opened to be synced)"
        );
        let f = create(&fs, &sub, b"g");
        assert_eq!(
            counted(&fs, || drop(fs.link(&pool(&root()), &f, &r, b"g2"))),
            per(2),
            "LINK: the file and the directory"
        );
        assert_eq!(
            counted(&fs, || drop(fs.rename(
                &pool(&root()),
                &sub,
                b"g",
                &r,
                b"g3"
            ))),
            per(2),
            "RENAME across directories: both"
        );
        // A directory moved to another directory: its own `..` changed as
        // well, which only a sync of the whole filesystem covers here (no
        // ordered journal to commit it with the rename).
        let sub2 = fs
            .mkdir(&pool(&root()), &sub, b"e", &SetAttr::default())
            .unwrap()
            .fh;
        drop(sub2);
        assert_eq!(
            counted(&fs, || drop(fs.rename(
                &pool(&root()),
                &sub,
                b"e",
                &r,
                b"e2"
            ))),
            per(1),
            "RENAME of a directory across directories: the filesystem"
        );
        assert_eq!(
            counted(&fs, || drop(fs.remove(&pool(&root()), &r, b"g2"))),
            per(1),
            "REMOVE: the directory"
        );
        let set = SetAttr {
            mode: Some(0o600),
            ..SetAttr::default()
        };
        assert_eq!(
            counted(&fs, || drop(fs.setattr(&pool(&root()), &f, &set, None))),
            per(1),
            "SETATTR"
        );
        // Data durability does not depend on sync/async.
        assert_eq!(
            counted(&fs, || drop(fs.write(
                &pool(&root()),
                &f,
                0,
                b"x",
                Stable::FileSync
            ))),
            1
        );
        assert_eq!(
            counted(&fs, || drop(fs.write(
                &pool(&root()),
                &f,
                0,
                b"y",
                Stable::Unstable
            ))),
            0
        );
        assert_eq!(
            counted(&fs, || drop(fs.commit(&pool(&root()), &f, 0, 0))),
            1
        );
        let s = fs.stats().commits;
        assert_eq!(s.errors, 0);
        assert!(s.syncs <= s.requests);
    }
}

/// EXCLUSIVE creates carry their verifier from the moment the name exists:
/// a retransmission matches, another verifier gets EEXIST.
#[test]
fn exclusive_create_appears_with_its_verifier() {
    let d = tempfile::tempdir().unwrap();
    let fs = open(d.path(), true);
    let r = fs.root();
    let v = *b"verifier";
    let c = fs
        .create(&pool(&root()), &r, b"x", &CreateHow::Exclusive(v))
        .unwrap();
    assert_eq!(c.attr.size, 0);
    // The times hold the verifier (top bits cleared), so a retry matches.
    let again = fs
        .create(&pool(&root()), &r, b"x", &CreateHow::Exclusive(v))
        .unwrap();
    assert_eq!(again.fh, c.fh);
    assert!(fs
        .create(
            &pool(&root()),
            &r,
            b"x",
            &CreateHow::Exclusive(*b"another!")
        )
        .is_err());
    let m = std::fs::metadata(d.path().join("x")).unwrap();
    use std::os::unix::fs::MetadataExt;
    let vm = u32::from_be_bytes([v[0], v[1], v[2], v[3]]) & 0x7fff_ffff;
    assert_eq!(m.mtime(), i64::from(vm));
}
