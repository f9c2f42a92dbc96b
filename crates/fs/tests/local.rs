//! Tests of the local-directory backend against real directories under /tmp.
//! Most run in both handle modes. Tests that need root skip (and say so)
//! when not run as root.

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use rnfsd_fs::local::{HandleMode, LocalFs, LocalOptions};
use rnfsd_fs::*;

const KEY: [u8; 32] = [0x5a; 32];

/// Both handle modes; Kernel only where it can work (root).
fn modes() -> Vec<HandleMode> {
    if is_root() {
        vec![HandleMode::Kernel, HandleMode::Path]
    } else {
        skip("kernel handle mode needs root");
        vec![HandleMode::Path]
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn opts(mode: HandleMode) -> LocalOptions {
    LocalOptions {
        handle_mode: mode,
        handle_key: KEY,
        ..LocalOptions::default()
    }
}

fn open(dir: &Path, mode: HandleMode) -> LocalFs {
    LocalFs::open(dir, 7, opts(mode)).unwrap()
}

fn root() -> Cred {
    Cred::default()
}

/// A call on a pool thread as `cred`, whose reply leaves at once (it owes
/// no commit).
fn pool(cred: &Cred) -> Call<'_> {
    Call::thread(cred, false)
}

fn user(uid: u32) -> Cred {
    Cred {
        uid,
        gid: uid,
        gids: vec![uid],
    }
}

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("rnfsd-fs-")
        .tempdir_in("/tmp")
        .unwrap()
}

fn set() -> SetAttr {
    SetAttr::default()
}

fn mode(m: u32) -> SetAttr {
    SetAttr {
        mode: Some(m),
        ..SetAttr::default()
    }
}

fn create(fs: &LocalFs, dir: &Fh, name: &str) -> Created {
    fs.create(
        &pool(&root()),
        dir,
        name.as_bytes(),
        &CreateHow::Unchecked(mode(0o644)),
    )
    .unwrap()
}

fn mkdir(fs: &LocalFs, dir: &Fh, name: &str) -> Fh {
    fs.mkdir(&pool(&root()), dir, name.as_bytes(), &mode(0o755))
        .unwrap()
        .fh
}

fn lookup(fs: &LocalFs, dir: &Fh, name: &str) -> FsResult<(Fh, Attr)> {
    fs.lookup(&pool(&root()), dir, name.as_bytes())
        .map(|(f, a, _)| (f, a))
}

fn read_all(fs: &LocalFs, fh: &Fh) -> Vec<u8> {
    let mut buf = Vec::new();
    fs.read(&pool(&root()), fh, 0, 1 << 20, &mut buf).unwrap();
    buf
}

fn skip(why: &str) {
    eprintln!("SKIPPED: {why}");
}

#[test]
fn modes_resolve_as_asked() {
    let d = tmp();
    let p = LocalFs::open(d.path(), 1, opts(HandleMode::Path)).unwrap();
    assert_eq!(p.handle_mode(), HandleMode::Path);
    let a = LocalFs::open(d.path(), 1, opts(HandleMode::Auto)).unwrap();
    assert_ne!(a.handle_mode(), HandleMode::Auto);
    if is_root() {
        assert_eq!(a.handle_mode(), HandleMode::Kernel);
        assert_eq!(
            open(d.path(), HandleMode::Kernel).handle_mode(),
            HandleMode::Kernel
        );
    }
    // The root handle is the same in both modes and carries the export id.
    assert_eq!(p.root(), a.root());
    assert_eq!(export_id_of(&p.root().0), Some(1));
    assert!(p.root().0.len() <= MAX_HANDLE);
    assert!(LocalFs::open(&d.path().join("nope"), 1, opts(HandleMode::Path)).is_err());
}

#[test]
fn basic_file_io_and_attrs() {
    for m in modes() {
        let d = tmp();
        let fs = open(d.path(), m);
        let r = fs.root();
        let ra = fs.getattr(&pool(&root()), &r).unwrap();
        assert_eq!(ra.ftype, FileType::Directory);
        assert_eq!(ra.fileid, fs::metadata(d.path()).unwrap().ino());
        let c = create(&fs, &r, "f");
        assert!(c.fh.0.len() <= MAX_HANDLE);
        assert_eq!(export_id_of(&c.fh.0), Some(7));
        assert_eq!(c.attr.ftype, FileType::Regular);
        assert_eq!(c.attr.mode, 0o644);
        assert!(c.dir.before.is_some() && c.dir.after.is_some());
        let (n, st, w) = fs
            .write(&pool(&root()), &c.fh, 0, b"hello world", Stable::Unstable)
            .unwrap();
        assert_eq!((n, st), (11, Stable::Unstable));
        assert_eq!(w.before.unwrap().size, 0);
        assert_eq!(w.after.unwrap().size, 11);
        let mut buf = Vec::new();
        let (eof, a) = fs.read(&pool(&root()), &c.fh, 6, 100, &mut buf).unwrap();
        assert_eq!((&buf[..], eof, a.size), (&b"world"[..], true, 11));
        buf.clear();
        let (eof, _) = fs.read(&pool(&root()), &c.fh, 0, 5, &mut buf).unwrap();
        assert_eq!((&buf[..], eof), (&b"hello"[..], false));
        buf.clear();
        let (eof, _) = fs.read(&pool(&root()), &c.fh, 100, 5, &mut buf).unwrap();
        assert!(eof && buf.is_empty());
        assert_eq!(
            fs.read(&pool(&root()), &r, 0, 5, &mut buf).err(),
            Some(FsError::Errno(libc::EISDIR))
        );
        assert_eq!(fs::read(d.path().join("f")).unwrap(), b"hello world");
        let (fh, a) = lookup(&fs, &r, "f").unwrap();
        assert_eq!(fh, c.fh, "lookup gives the same handle as create");
        assert_eq!(a.fileid, fs::metadata(d.path().join("f")).unwrap().ino());
        assert_eq!(
            lookup(&fs, &r, "missing").err(),
            Some(FsError::Errno(libc::ENOENT))
        );
        assert_eq!(
            lookup(&fs, &c.fh, "x").err(),
            Some(FsError::Errno(libc::ENOTDIR))
        );
        // Commit and stable writes.
        let (_, st, _) = fs
            .write(&pool(&root()), &c.fh, 0, b"H", Stable::FileSync)
            .unwrap();
        assert_eq!(st, Stable::FileSync);
        let (_, st, _) = fs
            .write(&pool(&root()), &c.fh, 1, b"E", Stable::DataSync)
            .unwrap();
        assert_eq!(st, Stable::DataSync);
        let w = fs.commit(&pool(&root()), &c.fh, 0, 0).unwrap();
        assert_eq!(w.after.unwrap().size, 11);
        assert_eq!(fs::read(d.path().join("f")).unwrap(), b"HEllo world");
        assert_eq!(
            fs.write(&pool(&root()), &r, 0, b"x", Stable::Unstable)
                .err(),
            Some(FsError::Errno(libc::EISDIR))
        );
    }
}

#[test]
fn dot_and_dotdot() {
    for m in modes() {
        let d = tmp();
        let fs = open(d.path(), m);
        let r = fs.root();
        assert_eq!(
            lookup(&fs, &r, "..").unwrap().0,
            r,
            ".. at the root stays at the root"
        );
        assert_eq!(lookup(&fs, &r, ".").unwrap().0, r);
        let a = mkdir(&fs, &r, "a");
        let b = mkdir(&fs, &a, "b");
        assert_eq!(lookup(&fs, &b, "..").unwrap().0, a);
        assert_eq!(lookup(&fs, &a, "..").unwrap().0, r);
        assert_eq!(lookup(&fs, &b, ".").unwrap().0, b);
        // "." and ".." cannot be created or removed.
        let e = Some(FsError::Errno(libc::EACCES));
        assert_eq!(fs.mkdir(&pool(&root()), &r, b"..", &set()).err(), e);
        assert_eq!(fs.remove(&pool(&root()), &r, b"..").err(), e);
        assert_eq!(fs.rmdir(&pool(&root()), &a, b".").err(), e);
        assert_eq!(fs.rename(&pool(&root()), &a, b"b", &r, b"..").err(), e);
    }
}

#[test]
fn bad_names() {
    let d = tmp();
    let fs = open(d.path(), HandleMode::Path);
    let r = fs.root();
    let inval = Some(FsError::Errno(libc::EINVAL));
    for n in [&b""[..], b"a/b", b"/", b"a\0b"] {
        assert_eq!(fs.lookup(&pool(&root()), &r, n).err(), inval);
        assert_eq!(
            fs.create(&pool(&root()), &r, n, &CreateHow::Unchecked(set()))
                .err(),
            inval
        );
    }
    let long = vec![b'x'; 256];
    assert_eq!(
        fs.lookup(&pool(&root()), &r, &long).err(),
        Some(FsError::Errno(libc::ENAMETOOLONG))
    );
    assert_eq!(
        fs.mkdir(&pool(&root()), &r, &long, &set()).err(),
        Some(FsError::Errno(libc::ENAMETOOLONG))
    );
    let ok = vec![b'x'; 255];
    assert!(fs.mkdir(&pool(&root()), &r, &ok, &set()).is_ok());
    assert_eq!(
        fs.symlink(&pool(&root()), &r, b"s", &vec![b'a'; 5000], &set())
            .err(),
        Some(FsError::Errno(libc::ENAMETOOLONG))
    );
    assert_eq!(
        fs.symlink(&pool(&root()), &r, b"s", b"a\0b", &set()).err(),
        inval
    );
}

#[test]
fn handles_survive_restart_and_renames() {
    for m in modes() {
        let d = tmp();
        let (file, dir) = {
            let fs = open(d.path(), m);
            let r = fs.root();
            let a = mkdir(&fs, &r, "a");
            let b = mkdir(&fs, &a, "b");
            let f = create(&fs, &b, "file");
            fs.write(&pool(&root()), &f.fh, 0, b"data", Stable::FileSync)
                .unwrap();
            (f.fh, b)
        };
        let ino = fs::metadata(d.path().join("a/b/file")).unwrap().ino();
        // Simulated restart: a fresh backend with the same key.
        let fs = open(d.path(), m);
        assert_eq!(
            fs.getattr(&pool(&root()), &file).unwrap().fileid,
            ino,
            "{m:?}"
        );
        assert_eq!(read_all(&fs, &file), b"data");
        // Renames done behind the server's back: the object and a parent.
        fs::rename(d.path().join("a/b/file"), d.path().join("a/b/renamed")).unwrap();
        assert_eq!(
            fs.getattr(&pool(&root()), &file).unwrap().fileid,
            ino,
            "{m:?}"
        );
        fs::rename(d.path().join("a"), d.path().join("z")).unwrap();
        fs::create_dir(d.path().join("y")).unwrap();
        fs::rename(d.path().join("z/b"), d.path().join("y/b2")).unwrap();
        assert_eq!(
            fs.getattr(&pool(&root()), &file).unwrap().fileid,
            ino,
            "{m:?}"
        );
        assert_eq!(read_all(&fs, &file), b"data");
        assert_eq!(lookup(&fs, &dir, "renamed").unwrap().0, file);
        // And after another restart, found without any remembered path.
        let fs = open(d.path(), m);
        assert_eq!(read_all(&fs, &file), b"data");
        let y = lookup(&fs, &fs.root(), "y").unwrap().0;
        // Renames through the server.
        fs.rename(&pool(&root()), &dir, b"renamed", &y, b"moved")
            .unwrap();
        assert_eq!(fs.getattr(&pool(&root()), &file).unwrap().fileid, ino);
        let fs = open(d.path(), m);
        assert_eq!(fs.getattr(&pool(&root()), &file).unwrap().fileid, ino);
        assert_eq!(
            fs.getattr(&pool(&root()), &dir).unwrap().ftype,
            FileType::Directory
        );
    }
}

#[test]
fn forged_and_tampered_handles() {
    for m in modes() {
        let d = tmp();
        let fs = open(d.path(), m);
        let f = create(&fs, &fs.root(), "f").fh;
        for i in 0..f.0.len() {
            let mut b = f.0.clone();
            b[i] ^= 1;
            assert_eq!(
                fs.getattr(&pool(&root()), &Fh(b)).err(),
                Some(FsError::BadHandle),
                "byte {i}"
            );
        }
        let mut long = f.0.clone();
        long.push(0);
        assert_eq!(
            fs.getattr(&pool(&root()), &Fh(long)).err(),
            Some(FsError::BadHandle)
        );
        assert_eq!(
            fs.getattr(&pool(&root()), &Fh(vec![])).err(),
            Some(FsError::BadHandle)
        );
        assert_eq!(
            fs.getattr(&pool(&root()), &Fh(vec![0; 64])).err(),
            Some(FsError::BadHandle)
        );
        assert_eq!(
            fs.getattr(&pool(&root()), &Fh(f.0[..f.0.len() - 1].to_vec()))
                .err(),
            Some(FsError::BadHandle)
        );
        // Another key rejects the handle.
        let other = LocalFs::open(
            d.path(),
            7,
            LocalOptions {
                handle_key: [1; 32],
                ..opts(m)
            },
        )
        .unwrap();
        assert_eq!(
            other.getattr(&pool(&root()), &f).err(),
            Some(FsError::BadHandle)
        );
        // Another export id rejects it.
        let other = LocalFs::open(d.path(), 8, opts(m)).unwrap();
        assert_eq!(
            other.getattr(&pool(&root()), &f).err(),
            Some(FsError::BadHandle)
        );
    }
}

#[test]
fn handles_outside_the_export_are_refused() {
    for m in modes() {
        let top = tmp();
        let exp = top.path().join("export");
        fs::create_dir(&exp).unwrap();
        fs::write(top.path().join("secret"), b"s").unwrap();
        fs::create_dir(top.path().join("outdir")).unwrap();
        fs::write(top.path().join("outdir/x"), b"x").unwrap();
        let fs = open(&exp, m);
        for p in ["secret", "outdir", "outdir/x"] {
            let fh = fs.handle_for_path_unchecked(&top.path().join(p)).unwrap();
            let r = fs.getattr(&pool(&root()), &fh);
            assert!(
                matches!(r, Err(FsError::Stale | FsError::BadHandle)),
                "{m:?} {p}: {r:?}"
            );
            let mut buf = Vec::new();
            assert!(fs.read(&pool(&root()), &fh, 0, 10, &mut buf).is_err());
            assert!(fs.lookup(&pool(&root()), &fh, b"x").is_err());
        }
        // A directory moved out of the export after its handle was issued.
        let inside = mkdir(&fs, &fs.root(), "in");
        let g = create(&fs, &inside, "g").fh;
        let fs = open(&exp, m);
        fs::rename(exp.join("in"), top.path().join("moved_out")).unwrap();
        assert!(fs.getattr(&pool(&root()), &inside).is_err(), "{m:?}");
        assert!(fs.getattr(&pool(&root()), &g).is_err(), "{m:?}");
    }
}

#[test]
fn deleted_objects_are_stale() {
    for m in modes() {
        let d = tmp();
        let fs = open(d.path(), m);
        let r = fs.root();
        let f = create(&fs, &r, "f").fh;
        let g = create(&fs, &r, "g").fh;
        let sub = mkdir(&fs, &r, "sub");
        let w = fs.remove(&pool(&root()), &r, b"f").unwrap();
        assert!(w.before.is_some() && w.after.is_some());
        assert_eq!(
            fs.getattr(&pool(&root()), &f).err(),
            Some(FsError::Stale),
            "{m:?}"
        );
        fs::remove_file(d.path().join("g")).unwrap();
        assert_eq!(
            fs.getattr(&pool(&root()), &g).err(),
            Some(FsError::Stale),
            "{m:?}"
        );
        fs.rmdir(&pool(&root()), &r, b"sub").unwrap();
        assert_eq!(
            fs.getattr(&pool(&root()), &sub).err(),
            Some(FsError::Stale),
            "{m:?}"
        );
        // A new file reusing the inode number does not revive the handle.
        let n = create(&fs, &r, "new");
        assert_eq!(
            fs.getattr(&pool(&root()), &g).err(),
            Some(FsError::Stale),
            "{m:?}"
        );
        assert!(fs.getattr(&pool(&root()), &n.fh).is_ok());
        // Still stale after a restart.
        let fs = open(d.path(), m);
        assert_eq!(fs.getattr(&pool(&root()), &f).err(), Some(FsError::Stale));
    }
}

#[test]
fn symlinks_are_never_followed() {
    for m in modes() {
        let d = tmp();
        let fs = open(d.path(), m);
        let r = fs.root();
        let s = fs
            .symlink(&pool(&root()), &r, b"etc", b"/etc", &set())
            .unwrap();
        assert_eq!(s.attr.ftype, FileType::Symlink);
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("pw")).unwrap();
        let before = fs::metadata("/etc/passwd").unwrap();
        let (fh, a) = lookup(&fs, &r, "etc").unwrap();
        assert_eq!(a.ftype, FileType::Symlink);
        assert_eq!(fh, s.fh);
        assert_eq!(fs.readlink(&pool(&root()), &fh).unwrap().0, b"/etc");
        assert_eq!(
            lookup(&fs, &fh, "passwd").err(),
            Some(FsError::Errno(libc::ENOTDIR))
        );
        assert_eq!(
            fs.create(&pool(&root()), &fh, b"x", &CreateHow::Unchecked(set()))
                .err(),
            Some(FsError::Errno(libc::ENOTDIR))
        );
        assert!(fs
            .readdir(&pool(&root()), &fh, 0, [0; 8], 10, false)
            .is_err());
        // Creating over a symlink never opens its target.
        let trunc = SetAttr {
            size: Some(0),
            ..set()
        };
        assert_eq!(
            fs.create(&pool(&root()), &r, b"pw", &CreateHow::Unchecked(trunc))
                .err(),
            Some(FsError::Errno(libc::EEXIST))
        );
        let pw = lookup(&fs, &r, "pw").unwrap().0;
        let mut buf = Vec::new();
        assert_eq!(
            fs.read(&pool(&root()), &pw, 0, 10, &mut buf).err(),
            Some(FsError::Errno(libc::EINVAL))
        );
        assert!(fs
            .write(&pool(&root()), &pw, 0, b"x", Stable::Unstable)
            .is_err());
        assert!(fs
            .setattr(
                &pool(&root()),
                &pw,
                &SetAttr {
                    size: Some(0),
                    ..set()
                },
                None
            )
            .is_err());
        assert!(fs.mkdir(&pool(&root()), &fh, b"d", &set()).is_err());
        // chmod of a symlink is ignored (as knfsd), never applied to the target.
        fs.setattr(&pool(&root()), &pw, &mode(0o600), None).unwrap();
        let after = fs::metadata("/etc/passwd").unwrap();
        assert_eq!(after.len(), before.len());
        assert_eq!(after.mode(), before.mode());
        assert_eq!(
            fs.readlink(&pool(&root()), &r).err(),
            Some(FsError::Errno(libc::EINVAL))
        );
        // A symlink's handle survives a restart like any other.
        let fs = open(d.path(), m);
        assert_eq!(fs.readlink(&pool(&root()), &pw).unwrap().0, b"/etc/passwd");
    }
}

fn page_all(fs: &LocalFs, dir: &Fh, max: usize, plus: bool) -> Vec<DirEntry> {
    let mut out = Vec::new();
    let (mut cookie, mut verf) = (0u64, [0u8; 8]);
    for _ in 0..10_000 {
        let p = fs
            .readdir(&pool(&root()), dir, cookie, verf, max, plus)
            .unwrap();
        assert!(p.entries.len() <= max);
        assert!(p.dir_attr.is_some());
        verf = p.verifier;
        if let Some(e) = p.entries.last() {
            cookie = e.cookie;
        }
        out.extend(p.entries);
        if p.eof {
            return out;
        }
    }
    panic!("readdir never reached eof");
}

#[test]
fn readdir_pages_return_every_name_once() {
    for m in modes() {
        let d = tmp();
        for i in 0..200 {
            fs::write(d.path().join(format!("name{i:03}")), b"").unwrap();
        }
        fs::create_dir(d.path().join("sub")).unwrap();
        let fs = open(d.path(), m);
        let r = fs.root();
        for max in 1..=3 {
            for plus in [false, true] {
                let es = page_all(&fs, &r, max, plus);
                let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
                for e in &es {
                    *seen.entry(e.name.clone()).or_default() += 1;
                }
                assert_eq!(seen.len(), 203, "{m:?} max {max} plus {plus}");
                assert!(seen.values().all(|&n| n == 1));
                assert!(seen.contains_key(&b"."[..]) && seen.contains_key(&b".."[..]));
                let root_ino = fs::metadata(d.path()).unwrap().ino();
                for e in &es {
                    if e.name == b".." || e.name == b"." {
                        assert_eq!(e.fileid, root_ino);
                    }
                    if plus {
                        let (fh, a) = e.plus.as_ref().expect("plus attrs");
                        assert_eq!(a.fileid, e.fileid);
                        if e.name == b".." || e.name == b"." {
                            assert_eq!(*fh, r);
                        } else {
                            assert_eq!(
                                *fh,
                                lookup(&fs, &r, std::str::from_utf8(&e.name).unwrap())
                                    .unwrap()
                                    .0
                            );
                        }
                    } else {
                        assert!(e.plus.is_none());
                    }
                }
            }
        }
        // Subdirectory ".." is its parent.
        let sub = lookup(&fs, &r, "sub").unwrap().0;
        let es = page_all(&fs, &sub, 5, true);
        let dd = es.iter().find(|e| e.name == b"..").unwrap();
        assert_eq!(dd.plus.as_ref().unwrap().0, r);
        // Verifier checks.
        let p = fs.readdir(&pool(&root()), &r, 0, [0; 8], 2, false).unwrap();
        let c = p.entries[1].cookie;
        let mut bad = p.verifier;
        bad[0] ^= 1;
        assert_eq!(
            fs.readdir(&pool(&root()), &r, c, bad, 2, false).err(),
            Some(FsError::BadCookie)
        );
        assert!(fs
            .readdir(&pool(&root()), &r, c, p.verifier, 2, false)
            .is_ok());
        assert!(fs.readdir(&pool(&root()), &r, c, [0; 8], 2, false).is_ok());
        // The verifier stays the same across a restart.
        let fs2 = open(d.path(), m);
        assert_eq!(
            fs2.readdir(&pool(&root()), &r, 0, [0; 8], 1, false)
                .unwrap()
                .verifier,
            p.verifier
        );
        let f = lookup(&fs, &r, "name000").unwrap().0;
        assert_eq!(
            fs.readdir(&pool(&root()), &f, 0, [0; 8], 2, false).err(),
            Some(FsError::Errno(libc::ENOTDIR))
        );
    }
}

#[test]
fn readdir_survives_changes_between_pages() {
    let d = tmp();
    for i in 0..100 {
        fs::write(d.path().join(format!("n{i}")), b"").unwrap();
    }
    let fs = open(d.path(), HandleMode::Path);
    let r = fs.root();
    let p = fs
        .readdir(&pool(&root()), &r, 0, [0; 8], 30, false)
        .unwrap();
    let first: Vec<_> = p.entries.iter().map(|e| e.name.clone()).collect();
    // Remove a name not yet returned and add one; the cookie stays valid.
    let later = (0..100)
        .map(|i| format!("n{i}"))
        .find(|n| !first.contains(&n.clone().into_bytes()))
        .unwrap();
    fs::remove_file(d.path().join(&later)).unwrap();
    let mut names: Vec<Vec<u8>> = first;
    let mut cookie = p.entries.last().unwrap().cookie;
    loop {
        let p = fs
            .readdir(&pool(&root()), &r, cookie, p.verifier, 30, false)
            .unwrap();
        names.extend(p.entries.iter().map(|e| e.name.clone()));
        if p.eof {
            break;
        }
        cookie = p.entries.last().unwrap().cookie;
    }
    let set: std::collections::HashSet<_> = names.iter().collect();
    assert_eq!(set.len(), names.len(), "no duplicates");
    assert_eq!(names.len(), 101, "99 files + . + ..");
}

#[test]
fn create_modes() {
    for m in modes() {
        let d = tmp();
        let fs = open(d.path(), m);
        let r = fs.root();
        let f = create(&fs, &r, "f").fh;
        fs.write(&pool(&root()), &f, 0, b"12345", Stable::Unstable)
            .unwrap();
        // UNCHECKED over an existing file: same file, size applied.
        let c = fs
            .create(
                &pool(&root()),
                &r,
                b"f",
                &CreateHow::Unchecked(SetAttr {
                    size: Some(2),
                    mode: Some(0o600),
                    ..set()
                }),
            )
            .unwrap();
        assert_eq!(c.fh, f);
        assert_eq!(c.attr.size, 2);
        assert_eq!(
            c.attr.mode, 0o644,
            "only the size is applied to an existing file"
        );
        assert_eq!(
            fs.create(&pool(&root()), &r, b"f", &CreateHow::Guarded(set()))
                .err(),
            Some(FsError::Errno(libc::EEXIST))
        );
        let g = fs
            .create(&pool(&root()), &r, b"g", &CreateHow::Guarded(mode(0o640)))
            .unwrap();
        assert_eq!(g.attr.mode, 0o640);
        // Mode is not reduced by the server's umask.
        let h = fs
            .create(&pool(&root()), &r, b"h", &CreateHow::Unchecked(mode(0o777)))
            .unwrap();
        assert_eq!(h.attr.mode, 0o777);
        // UNCHECKED over a directory fails.
        mkdir(&fs, &r, "dir");
        assert_eq!(
            fs.create(&pool(&root()), &r, b"dir", &CreateHow::Unchecked(set()))
                .err(),
            Some(FsError::Errno(libc::EEXIST))
        );
        // EXCLUSIVE: a retry with the same verifier gets the same file.
        let v1 = *b"\x81\x02\x03\x04\x05\x06\x07\x08";
        let e1 = fs
            .create(&pool(&root()), &r, b"x", &CreateHow::Exclusive(v1))
            .unwrap();
        assert_eq!(e1.attr.mtime.sec, 0x0102_0304);
        assert_eq!(e1.attr.atime.sec, 0x0506_0708);
        let e2 = fs
            .create(&pool(&root()), &r, b"x", &CreateHow::Exclusive(v1))
            .unwrap();
        assert_eq!(e1.fh, e2.fh);
        let fs2 = open(d.path(), m);
        assert_eq!(
            fs2.create(&pool(&root()), &r, b"x", &CreateHow::Exclusive(v1))
                .unwrap()
                .fh,
            e1.fh
        );
        let v2 = *b"abcdefgh";
        assert_eq!(
            fs.create(&pool(&root()), &r, b"x", &CreateHow::Exclusive(v2))
                .err(),
            Some(FsError::Errno(libc::EEXIST))
        );
        assert_eq!(
            fs.create(&pool(&root()), &r, b"f", &CreateHow::Exclusive(v1))
                .err(),
            Some(FsError::Errno(libc::EEXIST))
        );
        // After the client's SETATTR the verifier no longer matches.
        fs.setattr(
            &pool(&root()),
            &e1.fh,
            &SetAttr {
                mtime: SetTime::ServerTime,
                ..set()
            },
            None,
        )
        .unwrap();
        assert_eq!(
            fs.create(&pool(&root()), &r, b"x", &CreateHow::Exclusive(v1))
                .err(),
            Some(FsError::Errno(libc::EEXIST))
        );
        assert_eq!(
            fs.create(&pool(&root()), &f, b"y", &CreateHow::Guarded(set()))
                .err(),
            Some(FsError::Errno(libc::ENOTDIR))
        );
    }
}

#[test]
fn sparse_file_beyond_4gib() {
    for m in modes() {
        let d = tmp();
        let fs = open(d.path(), m);
        let f = create(&fs, &fs.root(), "big").fh;
        let off = (5u64 << 30) + 123;
        let (n, _, w) = fs
            .write(&pool(&root()), &f, off, b"far away", Stable::Unstable)
            .unwrap();
        assert_eq!(n, 8);
        let a = w.after.unwrap();
        assert_eq!(a.size, off + 8);
        assert!(a.used < 1 << 20, "sparse");
        let mut buf = Vec::new();
        let (eof, _) = fs.read(&pool(&root()), &f, off, 100, &mut buf).unwrap();
        assert_eq!((&buf[..], eof), (&b"far away"[..], true));
        buf.clear();
        let (eof, _) = fs.read(&pool(&root()), &f, 1 << 32, 4, &mut buf).unwrap();
        assert_eq!((&buf[..], eof), (&[0u8; 4][..], false));
        assert!(fs
            .write(&pool(&root()), &f, u64::MAX - 2, b"abcd", Stable::Unstable)
            .is_err());
        fs.setattr(
            &pool(&root()),
            &f,
            &SetAttr {
                size: Some(6 << 30),
                ..set()
            },
            None,
        )
        .unwrap();
        assert_eq!(fs.getattr(&pool(&root()), &f).unwrap().size, 6 << 30);
    }
}

#[test]
fn setattr_semantics() {
    for m in modes() {
        let d = tmp();
        let fs = open(d.path(), m);
        let r = fs.root();
        let f = create(&fs, &r, "f").fh;
        fs.write(&pool(&root()), &f, 0, b"0123456789", Stable::Unstable)
            .unwrap();
        let a = fs.getattr(&pool(&root()), &f).unwrap();
        // Guard mismatch.
        let wrong = Time {
            sec: a.ctime.sec - 5,
            nsec: 0,
        };
        assert_eq!(
            fs.setattr(&pool(&root()), &f, &mode(0o600), Some(wrong))
                .err(),
            Some(FsError::NotSync)
        );
        assert_eq!(fs.getattr(&pool(&root()), &f).unwrap().mode, 0o644);
        let t = Time {
            sec: 1_000_000_000,
            nsec: 123,
        };
        let w = fs
            .setattr(
                &pool(&root()),
                &f,
                &SetAttr {
                    mode: Some(0o4751),
                    uid: Some(1234),
                    gid: Some(4321),
                    size: Some(4),
                    atime: SetTime::ClientTime(t),
                    mtime: SetTime::ClientTime(t),
                },
                Some(a.ctime),
            )
            .unwrap();
        assert_eq!(w.before.unwrap().size, 10);
        let a = w.after.unwrap();
        if is_root() {
            assert_eq!((a.uid, a.gid), (1234, 4321));
        }
        assert_eq!((a.mode, a.size, a.mtime, a.atime), (0o4751, 4, t, t));
        let w = fs
            .setattr(
                &pool(&root()),
                &f,
                &SetAttr {
                    mtime: SetTime::ServerTime,
                    ..set()
                },
                None,
            )
            .unwrap();
        assert!(w.after.unwrap().mtime.sec > 1_000_000_000);
        assert_eq!(
            fs.setattr(
                &pool(&root()),
                &r,
                &SetAttr {
                    size: Some(0),
                    ..set()
                },
                None
            )
            .err(),
            Some(FsError::Errno(libc::EISDIR))
        );
        fs.mknod(&pool(&root()), &r, b"p", NodeKind::Fifo, &set())
            .unwrap();
        let p = lookup(&fs, &r, "p").unwrap().0;
        assert_eq!(
            fs.setattr(
                &pool(&root()),
                &p,
                &SetAttr {
                    size: Some(0),
                    ..set()
                },
                None
            )
            .err(),
            Some(FsError::Errno(libc::EINVAL))
        );
        // The directory's mode.
        fs.setattr(&pool(&root()), &r, &mode(0o711), None).unwrap();
        assert_eq!(
            fs::metadata(d.path()).unwrap().permissions().mode() & 0o7777,
            0o711
        );
    }
}

#[test]
fn mkdir_symlink_mknod_link() {
    for m in modes() {
        let d = tmp();
        let fs = open(d.path(), m);
        let r = fs.root();
        let c = fs.mkdir(&pool(&root()), &r, b"d", &mode(0o750)).unwrap();
        assert_eq!((c.attr.ftype, c.attr.mode), (FileType::Directory, 0o750));
        // A setgid directory's bit is inherited by new subdirectories.
        let sg = fs.mkdir(&pool(&root()), &r, b"sg", &mode(0o2775)).unwrap();
        assert_eq!(sg.attr.mode, 0o2775);
        let sub = fs
            .mkdir(&pool(&root()), &sg.fh, b"sub", &mode(0o755))
            .unwrap();
        assert_eq!(sub.attr.mode, 0o2755);
        assert_eq!(
            fs.mkdir(&pool(&root()), &r, b"d", &set()).err(),
            Some(FsError::Errno(libc::EEXIST))
        );
        let t = Time {
            sec: 12345,
            nsec: 0,
        };
        let s = fs
            .symlink(
                &pool(&root()),
                &r,
                b"s",
                b"some/where",
                &SetAttr {
                    mtime: SetTime::ClientTime(t),
                    ..set()
                },
            )
            .unwrap();
        assert_eq!(s.attr.mtime, t);
        assert_eq!(fs.readlink(&pool(&root()), &s.fh).unwrap().0, b"some/where");
        assert_eq!(
            fs.symlink(&pool(&root()), &r, b"s", b"x", &set()).err(),
            Some(FsError::Errno(libc::EEXIST))
        );
        let fifo = fs
            .mknod(&pool(&root()), &r, b"fifo", NodeKind::Fifo, &mode(0o600))
            .unwrap();
        assert_eq!((fifo.attr.ftype, fifo.attr.mode), (FileType::Fifo, 0o600));
        let sock = fs
            .mknod(&pool(&root()), &r, b"sock", NodeKind::Socket, &set())
            .unwrap();
        assert_eq!(sock.attr.ftype, FileType::Socket);
        if is_root() {
            let cd = fs
                .mknod(
                    &pool(&root()),
                    &r,
                    b"null",
                    NodeKind::Char { major: 1, minor: 3 },
                    &set(),
                )
                .unwrap();
            assert_eq!((cd.attr.ftype, cd.attr.rdev), (FileType::CharDev, (1, 3)));
            let bd = fs
                .mknod(
                    &pool(&root()),
                    &r,
                    b"blk",
                    NodeKind::Block {
                        major: 7,
                        minor: 200,
                    },
                    &set(),
                )
                .unwrap();
            assert_eq!(
                (bd.attr.ftype, bd.attr.rdev),
                (FileType::BlockDev, (7, 200))
            );
            // Reading a device node through the server is refused.
            let mut buf = Vec::new();
            assert_eq!(
                fs.read(&pool(&root()), &cd.fh, 0, 1, &mut buf).err(),
                Some(FsError::Errno(libc::EINVAL))
            );
        }
        // Hard link.
        let f = create(&fs, &r, "f").fh;
        let (a, w) = fs.link(&pool(&root()), &f, &c.fh, b"f2").unwrap();
        assert_eq!(a.nlink, 2);
        assert!(w.after.is_some());
        assert_eq!(lookup(&fs, &c.fh, "f2").unwrap().1.fileid, a.fileid);
        assert_eq!(
            fs.link(&pool(&root()), &f, &r, b"f").err(),
            Some(FsError::Errno(libc::EEXIST))
        );
        assert_eq!(
            fs.link(&pool(&root()), &c.fh, &r, b"dl").err(),
            Some(FsError::Errno(libc::EISDIR))
        );
        assert_eq!(
            fs.link(&pool(&root()), &f, &f, b"x").err(),
            Some(FsError::Errno(libc::ENOTDIR))
        );
        // Removing the first name keeps the handle working through the other.
        fs.remove(&pool(&root()), &r, b"f").unwrap();
        let fs = open(d.path(), m);
        assert_eq!(fs.getattr(&pool(&root()), &f).unwrap().nlink, 1);
    }
}

#[test]
fn remove_rmdir_rename() {
    for m in modes() {
        let d = tmp();
        let fs = open(d.path(), m);
        let r = fs.root();
        let dir = mkdir(&fs, &r, "d");
        create(&fs, &dir, "inner");
        assert_eq!(
            fs.remove(&pool(&root()), &r, b"d").err(),
            Some(FsError::Errno(libc::EISDIR))
        );
        assert_eq!(
            fs.rmdir(&pool(&root()), &r, b"d").err(),
            Some(FsError::Errno(libc::ENOTEMPTY))
        );
        let f = create(&fs, &r, "f").fh;
        assert_eq!(
            fs.rmdir(&pool(&root()), &r, b"f").err(),
            Some(FsError::Errno(libc::ENOTDIR))
        );
        assert_eq!(
            fs.remove(&pool(&root()), &r, b"nope").err(),
            Some(FsError::Errno(libc::ENOENT))
        );
        assert_eq!(
            fs.remove(&pool(&root()), &f, b"x").err(),
            Some(FsError::Errno(libc::ENOTDIR))
        );
        // Rename over an existing file.
        let g = create(&fs, &r, "g").fh;
        fs.write(&pool(&root()), &f, 0, b"from f", Stable::Unstable)
            .unwrap();
        let (w1, w2) = fs.rename(&pool(&root()), &r, b"f", &r, b"g").unwrap();
        assert!(w1.after.is_some() && w2.after.is_some());
        assert_eq!(lookup(&fs, &r, "g").unwrap().0, f);
        assert_eq!(fs.getattr(&pool(&root()), &g).err(), Some(FsError::Stale));
        assert_eq!(
            lookup(&fs, &r, "f").err(),
            Some(FsError::Errno(libc::ENOENT))
        );
        // Rename to itself (and onto another link of itself) is a no-op.
        fs.rename(&pool(&root()), &r, b"g", &r, b"g").unwrap();
        fs.link(&pool(&root()), &f, &r, b"g2").unwrap();
        fs.rename(&pool(&root()), &r, b"g", &r, b"g2").unwrap();
        assert!(lookup(&fs, &r, "g").is_ok() && lookup(&fs, &r, "g2").is_ok());
        // Across directories.
        let (w1, w2) = fs.rename(&pool(&root()), &r, b"g", &dir, b"moved").unwrap();
        assert_ne!(w1.after.unwrap().mtime, Time::default());
        assert!(w2.before.is_some());
        assert_eq!(lookup(&fs, &dir, "moved").unwrap().0, f);
        assert_eq!(read_all(&fs, &f), b"from f");
        // Directory over a non-empty directory; file over a directory.
        let e = mkdir(&fs, &r, "e");
        assert_eq!(
            fs.rename(&pool(&root()), &r, b"e", &r, b"d").err(),
            Some(FsError::Errno(libc::ENOTEMPTY))
        );
        assert_eq!(
            fs.rename(&pool(&root()), &r, b"g2", &r, b"e").err(),
            Some(FsError::Errno(libc::EISDIR))
        );
        assert_eq!(
            fs.rename(&pool(&root()), &r, b"e", &r, b"g2").err(),
            Some(FsError::Errno(libc::ENOTDIR))
        );
        assert_eq!(
            fs.rename(&pool(&root()), &r, b"d", &dir, b"sub").err(),
            Some(FsError::Errno(libc::EINVAL))
        );
        // Directory over an empty directory; the moved dir's handle lives on.
        fs.rmdir(&pool(&root()), &dir, b"moved").err();
        let x = mkdir(&fs, &r, "x");
        fs.rename(&pool(&root()), &r, b"x", &r, b"e").unwrap();
        assert_eq!(lookup(&fs, &r, "e").unwrap().0, x);
        let rr = fs.getattr(&pool(&root()), &e);
        assert_eq!(rr.clone().err(), Some(FsError::Stale), "{rr:?} {m:?}");
        let fs = open(d.path(), m);
        assert_eq!(
            fs.getattr(&pool(&root()), &x).unwrap().ftype,
            FileType::Directory
        );
    }
}

/// FSINFO's maxfilesize is the export filesystem's own limit: a file may
/// be exactly that long and not a byte longer (ext4: 16 TiB less a
/// block), or the VFS's where the filesystem has none smaller (tmpfs).
#[test]
fn maxfilesize_is_the_filesystems() {
    let d = tmp();
    let fs = open(d.path(), HandleMode::Path);
    let (i, _) = fs.fsinfo(&pool(&root()), &fs.root()).unwrap();
    let f = std::fs::File::create(d.path().join("big")).unwrap();
    f.set_len(i.maxfilesize)
        .expect("a file of maxfilesize bytes");
    if i.maxfilesize < i64::MAX as u64 {
        let e = f.set_len(i.maxfilesize + 1).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EFBIG), "{e}");
    }
}

#[test]
fn fsstat_fsinfo_pathconf_access() {
    let d = tmp();
    let fs = open(d.path(), HandleMode::Path);
    let r = fs.root();
    let (s, _) = fs.fsstat(&pool(&root()), &r).unwrap();
    assert!(s.tbytes > 0 && s.tbytes >= s.fbytes && s.fbytes >= s.abytes && s.tfiles > 0);
    let (i, _) = fs.fsinfo(&pool(&root()), &r).unwrap();
    assert!(i.maxfilesize >= 1 << 40);
    assert_eq!(i.time_delta, Time { sec: 0, nsec: 1 });
    assert!(i.link && i.symlink && i.homogeneous && i.cansettime);
    let (p, _) = fs.pathconf(&pool(&root()), &r).unwrap();
    assert_eq!(p.name_max, 255);
    assert!(p.linkmax > 1);
    assert!(p.no_trunc && p.chown_restricted && !p.case_insensitive && p.case_preserving);
    let f = fs
        .create(&pool(&root()), &r, b"f", &CreateHow::Unchecked(mode(0o640)))
        .unwrap()
        .fh;
    fs.setattr(
        &pool(&root()),
        &f,
        &SetAttr {
            uid: Some(1000),
            gid: Some(2000),
            ..set()
        },
        None,
    )
    .ok();
    let (g, a) = fs.access(&pool(&root()), &f, 0x3f).unwrap();
    assert_eq!(g, 0x1 | 0x4 | 0x8, "root: no EXECUTE without an x bit");
    assert_eq!(a.mode, 0o640);
    if is_root() {
        assert_eq!(fs.access(&pool(&user(1000)), &f, 0x3f).unwrap().0, 0xd);
        assert_eq!(
            fs.access(
                &pool(&Cred {
                    uid: 5,
                    gid: 5,
                    gids: vec![2000]
                }),
                &f,
                0x3f
            )
            .unwrap()
            .0,
            0x1
        );
        assert_eq!(fs.access(&pool(&user(5)), &f, 0x3f).unwrap().0, 0);
    }
    let (g, _) = fs.access(&pool(&root()), &r, 0x3f).unwrap();
    assert_eq!(g, 0x1f);
}

#[test]
fn acts_as_the_caller() {
    if !is_root() {
        return skip("act_as_caller needs root");
    }
    for m in modes() {
        let d = tmp();
        fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let fs = open(d.path(), m);
        let r = fs.root();
        let u = user(1000);
        // A root-owned 0755 directory refuses the user.
        assert_eq!(
            fs.create(&pool(&u), &r, b"f", &CreateHow::Unchecked(mode(0o644)))
                .err(),
            Some(FsError::Errno(libc::EACCES))
        );
        assert_eq!(
            fs.mkdir(&pool(&u), &r, b"d", &set()).err(),
            Some(FsError::Errno(libc::EACCES))
        );
        let open_dir = mkdir(&fs, &r, "pub");
        fs.setattr(&pool(&root()), &open_dir, &mode(0o777), None)
            .unwrap();
        // Files the user makes are theirs; a read-only one stays writable
        // to its owner (owner override), not to others.
        let c = fs
            .create(
                &pool(&u),
                &open_dir,
                b"ro",
                &CreateHow::Guarded(mode(0o444)),
            )
            .unwrap();
        assert_eq!((c.attr.uid, c.attr.gid, c.attr.mode), (1000, 1000, 0o444));
        assert_eq!(
            fs.write(&pool(&u), &c.fh, 0, b"mine", Stable::Unstable)
                .unwrap()
                .0,
            4
        );
        assert_eq!(
            fs.write(&pool(&user(1001)), &c.fh, 0, b"x", Stable::Unstable)
                .err(),
            Some(FsError::Errno(libc::EACCES))
        );
        let mut buf = Vec::new();
        fs.read(&pool(&user(1001)), &c.fh, 0, 10, &mut buf).unwrap();
        assert_eq!(buf, b"mine");
        // Group membership comes from the credential's groups.
        let p = fs
            .create(
                &pool(&root()),
                &open_dir,
                b"grp",
                &CreateHow::Unchecked(mode(0o660)),
            )
            .unwrap()
            .fh;
        fs.setattr(
            &pool(&root()),
            &p,
            &SetAttr {
                gid: Some(3000),
                ..set()
            },
            None,
        )
        .unwrap();
        assert_eq!(
            fs.write(&pool(&user(1001)), &p, 0, b"x", Stable::Unstable)
                .err(),
            Some(FsError::Errno(libc::EACCES))
        );
        let member = Cred {
            uid: 1001,
            gid: 1001,
            gids: vec![1001, 3000],
        };
        assert!(fs
            .write(&pool(&member), &p, 0, b"x", Stable::Unstable)
            .is_ok());
        // The user cannot give files away or make devices.
        assert_eq!(
            fs.setattr(
                &pool(&u),
                &c.fh,
                &SetAttr {
                    uid: Some(0),
                    ..set()
                },
                None
            )
            .err(),
            Some(FsError::Errno(libc::EPERM))
        );
        assert_eq!(
            fs.mknod(
                &pool(&u),
                &open_dir,
                b"null",
                NodeKind::Char { major: 1, minor: 3 },
                &set()
            )
            .err(),
            Some(FsError::Errno(libc::EPERM))
        );
        assert!(fs
            .mknod(&pool(&u), &open_dir, b"fifo", NodeKind::Fifo, &set())
            .is_ok());
        // Other users cannot remove the user's files from a sticky dir...
        fs.setattr(&pool(&root()), &open_dir, &mode(0o1777), None)
            .unwrap();
        assert_eq!(
            fs.remove(&pool(&user(1001)), &open_dir, b"ro").err(),
            Some(FsError::Errno(libc::EPERM))
        );
        // ...and a 0700 directory of another user cannot be searched.
        let priv_dir = fs
            .mkdir(&pool(&u), &open_dir, b"priv", &mode(0o700))
            .unwrap()
            .fh;
        create(&fs, &priv_dir, "x");
        assert_eq!(lookup(&fs, &priv_dir, "x").map(|_| ()), Ok(()));
        assert_eq!(
            fs.lookup(&pool(&user(1001)), &priv_dir, b"x").err(),
            Some(FsError::Errno(libc::EACCES))
        );
        assert_eq!(
            fs.readdir(&pool(&user(1001)), &priv_dir, 0, [0; 8], 10, false)
                .err(),
            Some(FsError::Errno(libc::EACCES))
        );
        // Handles still resolve for a caller without search permission on the
        // path (NFS checks permission on the object, not its ancestors).
        let x = lookup(&fs, &priv_dir, "x").unwrap().0;
        assert!(fs.getattr(&pool(&user(1001)), &x).is_ok());
        // Root again, on the same thread.
        assert!(fs.remove(&pool(&root()), &open_dir, b"ro").is_ok());
    }
    // Without act_as_caller everything runs as the server.
    let d = tmp();
    let fs = LocalFs::open(
        d.path(),
        7,
        LocalOptions {
            act_as_caller: false,
            ..opts(HandleMode::Path)
        },
    )
    .unwrap();
    let c = fs
        .create(
            &pool(&user(1000)),
            &fs.root(),
            b"f",
            &CreateHow::Unchecked(set()),
        )
        .unwrap();
    assert_eq!(c.attr.uid, 0);
    rnfsd_fs::local::reset_thread_creds();
}

struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let c = std::ffi::CString::new(self.0.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: valid C string.
        unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    }
}

fn mount(src: &str, fstype: &str, target: &Path, flags: libc::c_ulong) -> Option<Mount> {
    let s = std::ffi::CString::new(src).unwrap();
    let t = std::ffi::CString::new(target.as_os_str().as_encoded_bytes()).unwrap();
    let f = std::ffi::CString::new(fstype).unwrap();
    // SAFETY: valid C strings; no data.
    let r = unsafe { libc::mount(s.as_ptr(), t.as_ptr(), f.as_ptr(), flags, std::ptr::null()) };
    (r == 0).then(|| Mount(target.to_path_buf()))
}

#[test]
fn never_crosses_mounts() {
    if !is_root() {
        return skip("mounting needs root");
    }
    for m in modes() {
        let d = tmp();
        fs::create_dir(d.path().join("tmpfs")).unwrap();
        fs::create_dir(d.path().join("bind")).unwrap();
        let Some(_t) = mount("none", "tmpfs", &d.path().join("tmpfs"), 0) else {
            return skip("mount(2) refused");
        };
        fs::write(d.path().join("tmpfs/inside"), b"t").unwrap();
        let outside = tmp();
        fs::write(outside.path().join("bound"), b"b").unwrap();
        let Some(_b) = mount(
            outside.path().to_str().unwrap(),
            "",
            &d.path().join("bind"),
            libc::MS_BIND,
        ) else {
            return skip("bind mount refused");
        };
        let fs = open(d.path(), m);
        let r = fs.root();
        for name in ["tmpfs", "bind"] {
            assert_eq!(
                lookup(&fs, &r, name).err(),
                Some(FsError::Errno(libc::EACCES)),
                "{m:?} {name}"
            );
        }
        let es = page_all(&fs, &r, 10, true);
        for name in [&b"tmpfs"[..], b"bind"] {
            let e = es.iter().find(|e| e.name == name).unwrap();
            assert!(e.plus.is_none(), "no handle for a mountpoint");
        }
        let h = fs
            .handle_for_path_unchecked(&d.path().join("bind/bound"))
            .unwrap();
        assert!(fs.getattr(&pool(&root()), &h).is_err());
        let h = fs
            .handle_for_path_unchecked(&d.path().join("tmpfs/inside"))
            .unwrap();
        assert!(fs.getattr(&pool(&root()), &h).is_err());
        // With cross_mounts the submounts are entered.
        let x = LocalFs::open(
            d.path(),
            7,
            LocalOptions {
                cross_mounts: true,
                ..opts(m)
            },
        )
        .unwrap();
        let (t, a) = x
            .lookup(&pool(&root()), &r, b"tmpfs")
            .map(|(f, a, _)| (f, a))
            .unwrap();
        assert_ne!(a.fsid, x.getattr(&pool(&root()), &r).unwrap().fsid);
        let (i, _) = x
            .lookup(&pool(&root()), &t, b"inside")
            .map(|(f, a, _)| (f, a))
            .unwrap();
        assert_eq!(read_all(&x, &i), b"t");
        assert_eq!(x.lookup(&pool(&root()), &t, b"..").unwrap().0, r);
        let x2 = LocalFs::open(
            d.path(),
            7,
            LocalOptions {
                cross_mounts: true,
                ..opts(m)
            },
        )
        .unwrap();
        assert_eq!(
            read_all(&x2, &i),
            b"t",
            "cross-mount handle survives a restart"
        );
    }
}

#[test]
fn path_mode_bounds() {
    // A tiny location map and scan limit still resolve within their reach.
    let d = tmp();
    let o = LocalOptions {
        path_cache_entries: 2,
        handle_scan_limit: 50,
        ..opts(HandleMode::Path)
    };
    let fs = LocalFs::open(d.path(), 7, o.clone()).unwrap();
    let r = fs.root();
    let mut dir = r.clone();
    let mut fhs = Vec::new();
    for i in 0..6 {
        dir = mkdir(&fs, &dir, &format!("d{i}"));
        fhs.push(create(&fs, &dir, "f").fh);
    }
    for (i, f) in fhs.iter().enumerate() {
        assert!(fs.getattr(&pool(&root()), f).is_ok(), "level {i}");
    }
    // Past the scan limit an object cannot be found after a restart.
    for i in 0..100 {
        fs::write(d.path().join(format!("filler{i}")), b"").unwrap();
    }
    let deep = fhs.last().unwrap();
    let fs = LocalFs::open(
        d.path(),
        7,
        LocalOptions {
            handle_scan_limit: 5,
            ..o
        },
    )
    .unwrap();
    assert_eq!(fs.getattr(&pool(&root()), deep).err(), Some(FsError::Stale));
}

#[test]
fn handles_from_threads() {
    for m in modes() {
        let d = tmp();
        let fs = std::sync::Arc::new(open(d.path(), m));
        let r = fs.root();
        let hs: Vec<_> = (0..4)
            .map(|t| {
                let fs = fs.clone();
                let r = r.clone();
                std::thread::spawn(move || {
                    let dir = mkdir(&fs, &r, &format!("t{t}"));
                    for i in 0..20 {
                        let c = create(&fs, &dir, &format!("f{i}"));
                        let cred = if is_root() && i % 2 == 0 {
                            user(1000 + t)
                        } else {
                            root()
                        };
                        assert!(fs.getattr(&pool(&cred), &c.fh).is_ok());
                        fs.write(&pool(&root()), &c.fh, 0, b"x", Stable::Unstable)
                            .unwrap();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(page_all(&fs, &r, 100, true).len(), 6);
    }
}

/// Kernel mode after a restart must not need a scan for objects whose
/// dentries the host kernel still has: with a scan limit far below the tree's
/// size, a file deep in a wide tree still resolves (the kernel's own path of
/// the opened handle proves it lies inside the export).
#[test]
fn kernel_handles_resolve_after_restart_without_scanning() {
    if !is_root() {
        skip("kernel handle mode needs root");
        return;
    }
    let t = tmp();
    let fs = open(t.path(), HandleMode::Kernel);
    let mut handles = Vec::new();
    for d in 0..20 {
        let dir = mkdir(&fs, &fs.root(), &format!("d{d}"));
        for f in 0..20 {
            handles.push(create(&fs, &dir, &format!("f{f}")).fh);
        }
    }
    let restarted = LocalFs::open(
        t.path(),
        7,
        LocalOptions {
            handle_scan_limit: 5,
            ..opts(HandleMode::Kernel)
        },
    )
    .unwrap();
    for fh in handles.iter().rev().take(50) {
        restarted
            .getattr(&pool(&root()), fh)
            .expect("resolved without a scan");
    }
}

/// READDIRPLUS pairs each name's handle with that same object's attributes,
/// even while the names are swapped under it (RFC 1813 §3.3.17: the
/// attributes are those of the object the handle names).
#[test]
fn readdirplus_pairs_a_handle_with_its_own_attributes_under_renames() {
    for m in modes() {
        let d = tmp();
        fs::write(d.path().join("a"), b"1").unwrap();
        fs::write(d.path().join("b"), b"22").unwrap();
        let fs = open(d.path(), m);
        let r = fs.root();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let stop = stop.clone();
            let dir = fs::File::open(d.path()).unwrap();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) && n < 50_000_000 {
                    let _ = rustix::fs::renameat_with(
                        &dir,
                        "a",
                        &dir,
                        "b",
                        rustix::fs::RenameFlags::EXCHANGE,
                    );
                    n += 1;
                }
                n
            })
        };
        let start = std::time::Instant::now();
        let (mut checked, mut wrong) = (0u64, 0u64);
        while checked < 30_000 && start.elapsed() < std::time::Duration::from_secs(3) {
            let p = fs.readdir(&pool(&root()), &r, 0, [0; 8], 16, true).unwrap();
            for e in p
                .entries
                .iter()
                .filter(|e| e.name == b"a" || e.name == b"b")
            {
                let Some((fh, at)) = &e.plus else { continue };
                // Path mode re-walks the remembered name, which the swaps
                // keep changing: it may answer STALE; never a wrong object.
                let Ok(now) = fs.getattr(&pool(&root()), fh) else {
                    continue;
                };
                checked += 1;
                if now.fileid != at.fileid {
                    wrong += 1;
                }
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let swaps = swapper.join().unwrap();
        eprintln!("{m:?}: {checked} entries checked, {wrong} mismatched, {swaps} swaps");
        assert_eq!(
            wrong, 0,
            "{m:?}: a handle came with another object's attributes"
        );
        assert!(checked >= 1000, "{m:?}: only {checked} entries checked");
    }
}

/// `user.` extended attributes through the backend (NFSv4.2's xattr
/// operations), on an `async` and a `sync` export: the options, the
/// bounds, the namespace, symlinks and the caller's permission.
#[test]
fn user_xattrs() {
    use rnfsd_fs::xattr::{XattrSet, NAME_MAX, XATTR_SIZE_MAX};
    let d = tmp();
    for sync in [false, true] {
        let o = LocalOptions {
            sync,
            ..opts(HandleMode::Path)
        };
        let fs = LocalFs::open(d.path(), 7, o).unwrap();
        if !fs.xattr_support() {
            skip("/tmp's filesystem has no user xattrs");
            return;
        }
        let r = root();
        let c = pool(&r);
        let name = format!("f{sync}");
        let f = create(&fs, &fs.root(), &name).fh;
        let p = d.path().join(&name);
        let w = fs
            .setxattr(&c, &f, b"colour", b"blue", XattrSet::Create)
            .unwrap();
        assert_ne!(
            w.before.unwrap().ctime,
            w.after.unwrap().ctime,
            "ctime moves"
        );
        assert_eq!(fs.getxattr(&c, &f, b"colour", 64).unwrap(), b"blue");
        // The value is on the file as user.colour.
        let cp = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        let mut buf = [0u8; 16];
        // SAFETY: NUL-terminated strings; buf writable for its length.
        let n = unsafe {
            libc::getxattr(
                cp.as_ptr(),
                c"user.colour".as_ptr(),
                buf.as_mut_ptr().cast(),
                16,
            )
        };
        assert_eq!(&buf[..n as usize], b"blue");
        let err = |e: i32| Err(FsError::Errno(e));
        assert_eq!(fs.getxattr(&c, &f, b"colour", 3), err(libc::ERANGE));
        assert_eq!(fs.getxattr(&c, &f, b"colour", 0), err(libc::ERANGE));
        assert_eq!(
            fs.setxattr(&c, &f, b"colour", b"x", XattrSet::Create).err(),
            Some(FsError::Errno(libc::EEXIST))
        );
        assert_eq!(
            fs.setxattr(&c, &f, b"shape", b"x", XattrSet::Replace).err(),
            Some(FsError::Errno(libc::ENODATA))
        );
        fs.setxattr(&c, &f, b"shape", b"", XattrSet::Either)
            .unwrap();
        assert_eq!(fs.getxattr(&c, &f, b"shape", 0).unwrap(), b"");
        let mut names = fs.listxattr(&c, &f).unwrap();
        names.sort();
        assert_eq!(names, vec![b"colour".to_vec(), b"shape".to_vec()]);
        fs.removexattr(&c, &f, b"colour").unwrap();
        assert_eq!(fs.getxattr(&c, &f, b"colour", 64), err(libc::ENODATA));
        assert_eq!(
            fs.removexattr(&c, &f, b"colour").err(),
            Some(FsError::Errno(libc::ENODATA))
        );
        // Bounds.
        let long = vec![b'n'; NAME_MAX + 1];
        assert_eq!(fs.getxattr(&c, &f, &long, 64), err(libc::ENAMETOOLONG));
        let big = vec![0u8; XATTR_SIZE_MAX + 1];
        assert_eq!(
            fs.setxattr(&c, &f, b"big", &big, XattrSet::Either).err(),
            Some(FsError::Errno(libc::E2BIG))
        );
        // A symlink has none.
        let l = fs
            .symlink(&c, &fs.root(), format!("l{sync}").as_bytes(), b"x", &set())
            .unwrap()
            .fh;
        assert_eq!(fs.getxattr(&c, &l, b"colour", 64), err(libc::ENODATA));
        assert!(fs.listxattr(&c, &l).unwrap().is_empty());
        assert_eq!(
            fs.setxattr(&c, &l, b"a", b"1", XattrSet::Either).err(),
            Some(FsError::Errno(libc::EPERM))
        );
        // Another user may read (0644) but not write, as the kernel says.
        if is_root() {
            let u = user(4242);
            let uc = pool(&u);
            assert_eq!(fs.getxattr(&uc, &f, b"shape", 8).unwrap(), b"");
            assert_eq!(
                fs.setxattr(&uc, &f, b"mine", b"1", XattrSet::Either).err(),
                Some(FsError::Errno(libc::EACCES))
            );
        }
    }
}

/// NFSv4.2's data operations through the backend: SEEK and the layout
/// READ_PLUS reads agree with lseek on the host, ALLOCATE and DEALLOCATE
/// change the blocks the host sees and the change attribute (ctime),
/// copy_range copies byte for byte (short at the source's end of file),
/// clone_range shares or says NotSupported.
#[test]
fn seek_layout_allocate_deallocate_copy_and_clone() {
    use std::os::fd::AsRawFd;
    let d = tmp();
    let fs = open(d.path(), HandleMode::Path);
    let r = fs.root();
    let f = create(&fs, &r, "sparse").fh;
    let c = root();
    let call = pool(&c);
    fs.write(&call, &f, 0, &[1u8; 4096], Stable::FileSync)
        .unwrap();
    fs.write(&call, &f, 1 << 20, &[2u8; 4096], Stable::FileSync)
        .unwrap();
    fs.setattr(
        &call,
        &f,
        &SetAttr {
            size: Some(2 << 20),
            ..set()
        },
        None,
    )
    .unwrap();
    let host = fs::File::open(d.path().join("sparse")).unwrap();
    let hseek = |at: u64, data: bool| {
        let w = if data {
            libc::SEEK_DATA
        } else {
            libc::SEEK_HOLE
        };
        // SAFETY: lseek on the test's own descriptor.
        let n = unsafe { libc::lseek(host.as_raw_fd(), at as libc::off_t, w) };
        (n >= 0).then_some(n as u64)
    };
    for at in [0, 4096, 500_000, 1 << 20, (2 << 20) - 1] {
        for (what, data) in [(Content::Data, true), (Content::Hole, false)] {
            let (got, attr) = fs.seek(&call, &f, at, what).unwrap();
            assert_eq!(got, hseek(at, data), "{what:?} from {at}");
            assert_eq!(attr.size, 2 << 20);
        }
    }
    assert_eq!(
        fs.seek(&call, &f, 2 << 20, Content::Data).unwrap_err(),
        FsError::Errno(libc::ENXIO)
    );
    // The layout: extents that follow one another, data where lseek says.
    let (x, _) = fs.layout(&call, &f, 0, 3 << 20, 64).unwrap();
    let mut at = 0;
    for e in &x {
        assert_eq!(e.offset, at);
        assert_eq!(e.data, hseek(at, true) == Some(at), "extent at {at}");
        at += e.len;
    }
    assert_eq!(at, 2 << 20, "cut at end of file");
    let (x, _) = fs.layout(&call, &f, 0, 3 << 20, 1).unwrap();
    assert_eq!(x.len(), 1, "at most max extents");

    // ALLOCATE and DEALLOCATE, seen by the host.
    let a = create(&fs, &r, "alloc").fh;
    let p = d.path().join("alloc");
    let ctime = |p: &Path| {
        let m = fs::metadata(p).unwrap();
        (m.ctime(), m.ctime_nsec())
    };
    let c0 = ctime(&p);
    fs.allocate(&call, &a, 0, 1 << 20).unwrap();
    let m = fs::metadata(&p).unwrap();
    assert_eq!(m.len(), 1 << 20);
    assert!(m.blocks() * 512 >= 1 << 20);
    let c1 = ctime(&p);
    assert_ne!(c0, c1, "ALLOCATE moves ctime");
    fs.deallocate(&call, &a, 0, 1 << 20).unwrap();
    let m = fs::metadata(&p).unwrap();
    assert_eq!(m.len(), 1 << 20, "the size stays");
    assert!(m.blocks() * 512 < 1 << 20, "blocks {}", m.blocks());
    assert_ne!(c1, ctime(&p), "DEALLOCATE moves ctime");
    assert_eq!(
        fs.allocate(&call, &r, 0, 10).unwrap_err(),
        FsError::Errno(libc::EISDIR)
    );

    // copy_range: all of it, then short at the source's end of file.
    let dst = create(&fs, &r, "dst").fh;
    let (n, st, _) = fs
        .copy_range(&call, &f, 0, &dst, 0, 2 << 20, Stable::Unstable)
        .unwrap();
    assert_eq!((n, st), (2 << 20, Stable::Unstable));
    let (n, st, _) = fs
        .copy_range(&call, &f, (2 << 20) - 10, &dst, 5, 100, Stable::FileSync)
        .unwrap();
    assert_eq!((n, st), (10, Stable::FileSync));
    let mut want = fs::read(d.path().join("sparse")).unwrap();
    let tail = want[want.len() - 10..].to_vec();
    want[5..15].copy_from_slice(&tail);
    assert!(fs::read(d.path().join("dst")).unwrap() == want);

    // clone_range: shares where the filesystem can.
    match fs.clone_range(&call, &f, 0, &dst, 0, 0) {
        Ok(_) => assert!(
            fs::read(d.path().join("dst")).unwrap() == fs::read(d.path().join("sparse")).unwrap()
        ),
        Err(e) => assert_eq!(e, FsError::NotSupported, "ext4 and tmpfs have no reflinks"),
    }
    assert!(fs.clone_blksize(&call, &dst).unwrap() >= 512);
}
