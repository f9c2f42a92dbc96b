//! Confinement: attacks a client could try to reach or change anything
//! outside an export, each a separate case against the real server over TCP.
//! Every case checks both the answer and, where something could have
//! leaked or changed on disk, the disk.

use crate::common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use common::nfs::*;
use common::{TempDir, TestServer};
use rnfsd_client::nfs3::*;
use rnfsd_client::{Auth, ClientError, MountClient};

/// A server on a fresh export, root not squashed (the attacks below are
/// strongest as root), plus a directory outside the export with a secret.
struct Setup {
    dir: TempDir,
    outside: TempDir,
    srv: TestServer,
}

fn start(tag: &str) -> Setup {
    start_with(tag, &[])
}

fn start_with(tag: &str, extra: &[&str]) -> Setup {
    let dir = TempDir::new(tag);
    let outside = TempDir::new(&format!("{tag}-outside"));
    std::fs::write(outside.path().join("secret"), b"secret data").expect("secret");
    let mut args = vec!["--no-rpcbind", "--no-root-squash"];
    args.extend_from_slice(extra);
    let srv = TestServer::start_with(dir.path(), &args);
    Setup { dir, outside, srv }
}

fn secret_intact(s: &Setup) {
    let p = s.outside.path().join("secret");
    assert_eq!(
        std::fs::read(&p).expect("secret still there"),
        b"secret data"
    );
    let md = std::fs::symlink_metadata(&p).expect("stat secret");
    assert_eq!(md.mode() & 0o7777, 0o644, "secret mode unchanged");
    assert_eq!(md.uid(), 0, "secret owner unchanged");
}

fn outside_names(s: &Setup) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(s.outside.path())
        .expect("read outside")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn raw_dirop(dir: &NfsFh3, name: &[u8]) -> Diropargs3 {
    Diropargs3 {
        dir: dir.clone(),
        name: name.to_vec(),
    }
}

const NOT_OK_NAME: &[Nfsstat3] = &[
    Nfsstat3::Acces,
    Nfsstat3::Exist,
    Nfsstat3::Inval,
    Nfsstat3::Perm,
    Nfsstat3::NotEmpty,
    Nfsstat3::NoEnt,
];

fn symlink_args(dir: &NfsFh3, name: &str, target: &[u8]) -> Symlink3Args {
    Symlink3Args {
        where_: dirop(dir, name),
        symlink_attributes: Sattr3::default(),
        symlink_data: target.to_vec(),
    }
}

// ---------------------------------------------------------------------------
// '..' and odd names

#[tokio::test(flavor = "multi_thread")]
async fn lookup_dotdot_at_export_root_is_the_root() {
    let s = start("conf-dotdot-root");
    bounded(async {
        let m = mount(&s.srv).await;
        let root = getattr(&m.nfs, &m.root).await;
        let mut fh = m.root.clone();
        for _ in 0..4 {
            fh = lookup(&m.nfs, &fh, "..").await;
            let a = getattr(&m.nfs, &fh).await;
            assert_eq!(a.fileid, root.fileid, "'..' of the root left the export");
        }
        let up = std::fs::metadata(s.dir.path().parent().unwrap()).unwrap();
        assert_ne!(root.fileid, up.ino());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dotdot_walk_from_subdirectory_mount_stays_inside() {
    let s = start("conf-dotdot-sub");
    std::fs::create_dir_all(s.dir.path().join("a/b")).unwrap();
    bounded(async {
        let c = connect(&s.srv).await;
        let mnt = MountClient::new(c.clone());
        let sub = format!("{}/a/b", export_path(&s.srv));
        let fh = NfsFh3::new(mnt.mnt(&sub).await.expect("MNT subdir").fhandle);
        let nfs = rnfsd_client::NfsClient::new(c);
        let root_ino = std::fs::metadata(s.dir.path()).unwrap().ino();
        let mut cur = fh;
        for _ in 0..6 {
            cur = lookup(&nfs, &cur, "..").await;
        }
        assert_eq!(getattr(&nfs, &cur).await.fileid, root_ino);
        // And a name of the export's parent is not found from there.
        let parent_entry = s.dir.path().file_name().unwrap().to_str().unwrap();
        fail_any(
            "LOOKUP sibling of export",
            lookup_res(&nfs, &cur, parent_entry).await,
            &[Nfsstat3::NoEnt],
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn lookup_name_with_slash_is_refused() {
    let s = start("conf-slash");
    std::fs::create_dir(s.dir.path().join("d")).unwrap();
    std::fs::write(s.dir.path().join("d/f"), b"x").unwrap();
    bounded(async {
        let m = mount(&s.srv).await;
        fail(
            "LOOKUP d/f",
            lookup_res(&m.nfs, &m.root, "d/f").await,
            Nfsstat3::Inval,
        );
        let abs = format!("{}/secret", s.outside.path().display());
        fail(
            "LOOKUP absolute",
            lookup_res(&m.nfs, &m.root, &abs).await,
            Nfsstat3::Inval,
        );
        fail(
            "LOOKUP ../x",
            lookup_res(&m.nfs, &m.root, "../x").await,
            Nfsstat3::Inval,
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn names_with_nul_are_refused() {
    let s = start("conf-nul");
    std::fs::write(s.dir.path().join("a"), b"x").unwrap();
    bounded(async {
        let m = mount(&s.srv).await;
        let r = m
            .nfs
            .lookup(&Lookup3Args {
                what: raw_dirop(&m.root, b"a\0b"),
            })
            .await;
        fail("LOOKUP a\\0b", r, Nfsstat3::Inval);
        let r = m
            .nfs
            .create(&Create3Args {
                where_: raw_dirop(&m.root, b"n\0"),
                how: CreateHow3::Unchecked(Sattr3::default()),
            })
            .await;
        fail("CREATE n\\0", r, Nfsstat3::Inval);
        assert!(!s.dir.path().join("n").exists());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn create_named_dot_or_dotdot_is_refused() {
    let s = start("conf-create-dots");
    bounded(async {
        let m = mount(&s.srv).await;
        for n in [".", ".."] {
            let r = m
                .nfs
                .create(&Create3Args {
                    where_: dirop(&m.root, n),
                    how: CreateHow3::Guarded(Sattr3::default()),
                })
                .await;
            fail_any(&format!("CREATE {n}"), r, NOT_OK_NAME);
        }
        assert_eq!(outside_names(&s), ["secret"]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mkdir_named_dotdot_is_refused() {
    let s = start("conf-mkdir-dots");
    bounded(async {
        let m = mount(&s.srv).await;
        for n in [".", ".."] {
            let r = m
                .nfs
                .mkdir(&Mkdir3Args {
                    where_: dirop(&m.root, n),
                    attributes: Sattr3::default(),
                })
                .await;
            fail_any(&format!("MKDIR {n}"), r, NOT_OK_NAME);
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn symlink_named_dot_is_refused() {
    let s = start("conf-symlink-dots");
    bounded(async {
        let m = mount(&s.srv).await;
        for n in [".", ".."] {
            let r = m.nfs.symlink(&symlink_args(&m.root, n, b"/etc")).await;
            fail_any(&format!("SYMLINK {n}"), r, NOT_OK_NAME);
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rename_to_or_from_dotdot_is_refused() {
    let s = start("conf-rename-dots");
    std::fs::write(s.dir.path().join("f"), b"data").unwrap();
    std::fs::create_dir(s.dir.path().join("d")).unwrap();
    bounded(async {
        let m = mount(&s.srv).await;
        let d = lookup(&m.nfs, &m.root, "d").await;
        for (from, fname, to, tname) in [
            (&m.root, "f", &m.root, ".."),
            (&m.root, "f", &d, ".."),
            (&d, "..", &m.root, "x"),
            (&m.root, ".", &m.root, "y"),
        ] {
            let r = m
                .nfs
                .rename(&Rename3Args {
                    from: dirop(from, fname),
                    to: dirop(to, tname),
                })
                .await;
            fail_any(&format!("RENAME {fname} -> {tname}"), r, NOT_OK_NAME);
        }
        assert_eq!(std::fs::read(s.dir.path().join("f")).unwrap(), b"data");
        assert!(s.dir.path().join("d").is_dir());
        assert_eq!(outside_names(&s), ["secret"]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn link_named_dotdot_is_refused() {
    let s = start("conf-link-dots");
    std::fs::write(s.dir.path().join("f"), b"data").unwrap();
    bounded(async {
        let m = mount(&s.srv).await;
        let f = lookup(&m.nfs, &m.root, "f").await;
        for n in [".", ".."] {
            let r = m
                .nfs
                .link(&Link3Args {
                    file: f.clone(),
                    link: dirop(&m.root, n),
                })
                .await;
            fail_any(&format!("LINK {n}"), r, NOT_OK_NAME);
        }
        assert_eq!(
            std::fs::metadata(s.dir.path().join("f")).unwrap().nlink(),
            1
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn remove_and_rmdir_of_dotdot_are_refused() {
    let s = start("conf-remove-dots");
    std::fs::create_dir(s.dir.path().join("d")).unwrap();
    bounded(async {
        let m = mount(&s.srv).await;
        let d = lookup(&m.nfs, &m.root, "d").await;
        for n in [".", ".."] {
            fail_any(
                &format!("REMOVE {n}"),
                remove_res(&m.nfs, &d, n).await,
                NOT_OK_NAME,
            );
            fail_any(
                &format!("RMDIR {n}"),
                rmdir_res(&m.nfs, &d, n).await,
                &[
                    Nfsstat3::Acces,
                    Nfsstat3::Inval,
                    Nfsstat3::NotEmpty,
                    Nfsstat3::Exist,
                ],
            );
        }
        assert!(s.dir.path().join("d").is_dir());
        assert!(s.dir.path().is_dir());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn name_of_256_bytes_is_nametoolong() {
    let s = start("conf-longname");
    bounded(async {
        let m = mount(&s.srv).await;
        let long = "a".repeat(256);
        fail(
            "LOOKUP 256",
            lookup_res(&m.nfs, &m.root, &long).await,
            Nfsstat3::NameTooLong,
        );
        fail(
            "CREATE 256",
            create_res(&m.nfs, &m.root, &long).await,
            Nfsstat3::NameTooLong,
        );
        // 255 is the limit, and works.
        create_file(&m.nfs, &m.root, &"b".repeat(255)).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn symlink_target_of_4096_bytes_is_refused() {
    let s = start("conf-longtarget");
    bounded(async {
        let m = mount(&s.srv).await;
        let t = vec![b'x'; 4096];
        let r = m.nfs.symlink(&symlink_args(&m.root, "l", &t)).await;
        fail("SYMLINK 4096", r, Nfsstat3::NameTooLong);
        assert!(std::fs::symlink_metadata(s.dir.path().join("l")).is_err());
        // The longest target Linux stores (4095) works.
        let t = vec![b'y'; 4095];
        ok(
            "SYMLINK 4095",
            m.nfs.symlink(&symlink_args(&m.root, "l", &t)).await,
        );
    })
    .await;
}

// ---------------------------------------------------------------------------
// Symlinks pointing outside are never followed

fn plant_links(s: &Setup) {
    std::os::unix::fs::symlink(s.outside.path(), s.dir.path().join("abs")).unwrap();
    std::os::unix::fs::symlink(
        s.outside.path().join("secret"),
        s.dir.path().join("abs_file"),
    )
    .unwrap();
    // Enough '..' to reach '/' from anywhere, then down to the secret.
    let rel = format!("../../../../../../../..{}", s.outside.path().display());
    std::os::unix::fs::symlink(&rel, s.dir.path().join("rel")).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn lookup_through_absolute_symlink_is_not_followed() {
    let s = start("conf-sym-abs");
    plant_links(&s);
    bounded(async {
        let m = mount(&s.srv).await;
        let (fh, a) = {
            let r = ok("LOOKUP abs", lookup_res(&m.nfs, &m.root, "abs").await);
            (r.object, r.obj_attributes.expect("attrs"))
        };
        assert_eq!(a.ftype, Ftype3::Lnk, "LOOKUP returned the link itself");
        fail(
            "LOOKUP abs/secret",
            lookup_res(&m.nfs, &fh, "secret").await,
            Nfsstat3::NotDir,
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn lookup_through_relative_dotdot_symlink_is_not_followed() {
    let s = start("conf-sym-rel");
    plant_links(&s);
    bounded(async {
        let m = mount(&s.srv).await;
        let fh = lookup(&m.nfs, &m.root, "rel").await;
        assert_eq!(getattr(&m.nfs, &fh).await.ftype, Ftype3::Lnk);
        fail(
            "LOOKUP rel/secret",
            lookup_res(&m.nfs, &fh, "secret").await,
            Nfsstat3::NotDir,
        );
        fail(
            "LOOKUP rel/..",
            lookup_res(&m.nfs, &fh, "..").await,
            Nfsstat3::NotDir,
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn read_of_symlink_to_outside_file_does_not_read_target() {
    let s = start("conf-sym-read");
    plant_links(&s);
    bounded(async {
        let m = mount(&s.srv).await;
        let fh = lookup(&m.nfs, &m.root, "abs_file").await;
        let r = read_res(&m.nfs, &fh, 0, 4096).await;
        if let Ok(NfsRes::Ok(ok)) = &r {
            panic!("READ of a symlink returned {:?}", ok.data);
        }
        fail("READ symlink", r, Nfsstat3::Inval);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn write_to_symlink_does_not_write_target() {
    let s = start("conf-sym-write");
    plant_links(&s);
    bounded(async {
        let m = mount(&s.srv).await;
        let fh = lookup(&m.nfs, &m.root, "abs_file").await;
        let r = m
            .nfs
            .write(&Write3Args {
                file: fh,
                offset: 0,
                count: 3,
                stable: StableHow::FileSync,
                data: b"pwn".to_vec(),
            })
            .await;
        fail("WRITE symlink", r, Nfsstat3::Inval);
    })
    .await;
    secret_intact(&s);
}

#[tokio::test(flavor = "multi_thread")]
async fn create_in_symlink_to_outside_directory_is_refused() {
    let s = start("conf-sym-create-in");
    plant_links(&s);
    bounded(async {
        let m = mount(&s.srv).await;
        let fh = lookup(&m.nfs, &m.root, "abs").await;
        fail(
            "CREATE in symlink",
            create_res(&m.nfs, &fh, "planted").await,
            Nfsstat3::NotDir,
        );
        let r = m
            .nfs
            .mkdir(&Mkdir3Args {
                where_: dirop(&fh, "planted_dir"),
                attributes: Sattr3::default(),
            })
            .await;
        fail("MKDIR in symlink", r, Nfsstat3::NotDir);
    })
    .await;
    assert_eq!(outside_names(&s), ["secret"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn create_over_dangling_symlink_does_not_create_target() {
    let s = start("conf-sym-dangling");
    let target = s.outside.path().join("created_by_attacker");
    std::os::unix::fs::symlink(&target, s.dir.path().join("dang")).unwrap();
    bounded(async {
        let m = mount(&s.srv).await;
        for how in [
            CreateHow3::Unchecked(sattr_mode(0o666)),
            CreateHow3::Guarded(sattr_mode(0o666)),
            CreateHow3::Exclusive(Verf3([1; 8])),
        ] {
            let r = m
                .nfs
                .create(&Create3Args {
                    where_: dirop(&m.root, "dang"),
                    how: how.clone(),
                })
                .await;
            fail(&format!("CREATE over symlink {how:?}"), r, Nfsstat3::Exist);
        }
    })
    .await;
    assert!(!target.exists(), "the symlink was followed");
    assert_eq!(outside_names(&s), ["secret"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn setattr_on_symlink_does_not_touch_target() {
    let s = start("conf-sym-setattr");
    plant_links(&s);
    bounded(async {
        let m = mount(&s.srv).await;
        let fh = lookup(&m.nfs, &m.root, "abs_file").await;
        // Size on a symlink is invalid; mode is ignored (no lchmod).
        fail_any(
            "SETATTR size on symlink",
            setattr_res(
                &m.nfs,
                &fh,
                Sattr3 {
                    size: Some(0),
                    ..Sattr3::default()
                },
                None,
            )
            .await,
            &[Nfsstat3::Inval],
        );
        let _ = setattr_res(&m.nfs, &fh, sattr_mode(0o777), None).await;
        let _ = setattr_res(
            &m.nfs,
            &fh,
            Sattr3 {
                uid: Some(1234),
                ..Sattr3::default()
            },
            None,
        )
        .await;
    })
    .await;
    secret_intact(&s);
}

#[tokio::test(flavor = "multi_thread")]
async fn readdirplus_reports_symlinks_not_their_targets() {
    let s = start("conf-sym-rdp");
    plant_links(&s);
    bounded(async {
        let m = mount(&s.srv).await;
        let entries = m.nfs.readdirplus_all(&m.root).await.expect("READDIRPLUS");
        let mut seen = 0;
        for e in entries {
            let n = String::from_utf8_lossy(&e.name).into_owned();
            if ["abs", "abs_file", "rel"].contains(&n.as_str()) {
                seen += 1;
                let a = e.name_attributes.expect("attributes");
                assert_eq!(a.ftype, Ftype3::Lnk, "{n}: target's attributes leaked");
                // Its handle, if any, is the link's.
                if let Some(h) = e.name_handle {
                    assert_eq!(getattr(&m.nfs, &h).await.ftype, Ftype3::Lnk);
                }
            }
        }
        assert_eq!(seen, 3);
    })
    .await;
}

// ---------------------------------------------------------------------------
// Across exports and mounts

/// Two exports: the DIR one and a second from a config file.
fn start_two(tag: &str) -> (Setup, TempDir, TempDir) {
    let second = TempDir::new(&format!("{tag}-second"));
    let cfgdir = TempDir::new(&format!("{tag}-cfg"));
    let cfg = cfgdir.path().join("rnfsd.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[export]]\npath = \"{}\"\nsecure = false\nroot_squash = false\n",
            second.path().display()
        ),
    )
    .unwrap();
    let s = start_with(tag, &["--config", cfg.to_str().unwrap()]);
    (s, second, cfgdir)
}

#[tokio::test(flavor = "multi_thread")]
async fn rename_into_another_export_is_xdev() {
    let (s, second, _cfg) = start_two("conf-rename-xdev");
    std::fs::write(s.dir.path().join("f"), b"data").unwrap();
    bounded(async {
        let m = mount(&s.srv).await;
        let other = NfsFh3::new(
            m.mount
                .mnt(second.path().to_str().unwrap())
                .await
                .expect("MNT second")
                .fhandle,
        );
        let r = m
            .nfs
            .rename(&Rename3Args {
                from: dirop(&m.root, "f"),
                to: dirop(&other, "f"),
            })
            .await;
        fail("RENAME across exports", r, Nfsstat3::XDev);
    })
    .await;
    assert!(s.dir.path().join("f").exists());
    assert!(!second.path().join("f").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn link_into_another_export_is_xdev() {
    let (s, second, _cfg) = start_two("conf-link-xdev");
    std::fs::write(s.dir.path().join("f"), b"data").unwrap();
    bounded(async {
        let m = mount(&s.srv).await;
        let other = NfsFh3::new(
            m.mount
                .mnt(second.path().to_str().unwrap())
                .await
                .expect("MNT second")
                .fhandle,
        );
        let f = lookup(&m.nfs, &m.root, "f").await;
        let r = m
            .nfs
            .link(&Link3Args {
                file: f,
                link: dirop(&other, "f"),
            })
            .await;
        fail("LINK across exports", r, Nfsstat3::XDev);
    })
    .await;
    assert!(!second.path().join("f").exists());
}

/// Unmounts on drop, before the TempDir holding the mountpoint goes.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn mountpoint_below_export_is_not_crossed() {
    let s = start("conf-mountpoint");
    let mp = s.dir.path().join("mnt");
    std::fs::create_dir(&mp).unwrap();
    let ok_mount = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "rnfsd-test"])
        .arg(&mp)
        .status()
        .map(|st| st.success())
        .unwrap_or(false);
    if !ok_mount {
        eprintln!("SKIP mountpoint_below_export_is_not_crossed: cannot mount tmpfs here");
        return;
    }
    let _guard = Mounted(mp.clone());
    std::fs::write(mp.join("inside_tmpfs"), b"x").unwrap();
    bounded(async {
        let m = mount(&s.srv).await;
        fail_any(
            "LOOKUP mountpoint",
            lookup_res(&m.nfs, &m.root, "mnt").await,
            &[Nfsstat3::Acces, Nfsstat3::XDev],
        );
        // READDIRPLUS lists the name but gives no handle into the mount.
        let entries = m.nfs.readdirplus_all(&m.root).await.expect("READDIRPLUS");
        let e = entries
            .iter()
            .find(|e| e.name == b"mnt")
            .expect("mnt listed");
        assert!(e.name_handle.is_none(), "handle into another filesystem");
        // MNT of the path below does not cross either.
        let r = m.mount.mnt(format!("{}/mnt", export_path(&s.srv))).await;
        assert!(r.is_err(), "MNT crossed into the tmpfs");
    })
    .await;
}

// ---------------------------------------------------------------------------
// Forged and foreign handles

#[tokio::test(flavor = "multi_thread")]
async fn handle_with_another_export_id_is_stale() {
    let s = start("conf-fh-id");
    bounded(async {
        let m = mount(&s.srv).await;
        let mut h = m.root.data.clone();
        h[4] ^= 0x5a;
        fail_any(
            "GETATTR forged export id",
            m.nfs
                .getattr(&GetAttr3Args {
                    object: NfsFh3::new(h),
                })
                .await,
            &[Nfsstat3::Stale, Nfsstat3::BadHandle],
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn handle_with_flipped_mac_is_refused() {
    let s = start("conf-fh-mac");
    std::fs::write(s.dir.path().join("f"), b"x").unwrap();
    bounded(async {
        let m = mount(&s.srv).await;
        let f = lookup(&m.nfs, &m.root, "f").await;
        for h in [&m.root, &f] {
            for i in 5..h.data.len() {
                let mut b = h.data.clone();
                b[i] ^= 0x01;
                let st = getattr_status(&m.nfs, &NfsFh3::new(b)).await.expect("rpc");
                assert!(
                    matches!(st, Nfsstat3::Stale | Nfsstat3::BadHandle),
                    "byte {i} flipped: {st}"
                );
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn handles_from_a_server_with_another_key_are_refused() {
    let s = start("conf-fh-key");
    std::fs::write(s.dir.path().join("f"), b"x").unwrap();
    // Same directory, same export id, different state dir = different key.
    let other = TestServer::start_with(s.dir.path(), &["--no-rpcbind", "--no-root-squash"]);
    bounded(async {
        let theirs = mount(&other).await;
        let their_file = lookup(&theirs.nfs, &theirs.root, "f").await;
        let ours = mount(&s.srv).await;
        for h in [&theirs.root, &their_file] {
            let st = getattr_status(&ours.nfs, h).await.expect("rpc");
            assert!(
                matches!(st, Nfsstat3::Stale | Nfsstat3::BadHandle),
                "foreign handle accepted: {st}"
            );
        }
    })
    .await;
}

// ---------------------------------------------------------------------------
// Privilege: devices, setuid, chown, sizes

#[tokio::test(flavor = "multi_thread")]
async fn mknod_device_as_squashed_root_is_denied() {
    let dir = TempDir::new("conf-mknod-squash");
    let pub_dir = dir.path().join("pub");
    std::fs::create_dir(&pub_dir).unwrap();
    std::fs::set_permissions(&pub_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    // root_squash is the default.
    let srv = TestServer::start_defaults(dir.path(), &["--no-rpcbind"]);
    bounded(async {
        let m = mount(&srv).await;
        let p = lookup(&m.nfs, &m.root, "pub").await;
        for (n, what) in [
            (
                "null",
                MknodData3::Chr(
                    Sattr3::default(),
                    Specdata3 {
                        specdata1: 1,
                        specdata2: 3,
                    },
                ),
            ),
            (
                "sda",
                MknodData3::Blk(
                    Sattr3::default(),
                    Specdata3 {
                        specdata1: 8,
                        specdata2: 0,
                    },
                ),
            ),
        ] {
            let r = m
                .nfs
                .mknod(&Mknod3Args {
                    where_: dirop(&p, n),
                    what,
                })
                .await;
            fail_any(&format!("MKNOD {n}"), r, &[Nfsstat3::Perm, Nfsstat3::Acces]);
            assert!(std::fs::symlink_metadata(pub_dir.join(n)).is_err());
        }
        // A FIFO needs no privilege: the refusal above is about devices.
        let r = m
            .nfs
            .mknod(&Mknod3Args {
                where_: dirop(&p, "fifo"),
                what: MknodData3::Fifo(Sattr3::default()),
            })
            .await;
        ok("MKNOD fifo", r);
        assert_eq!(
            std::fs::metadata(pub_dir.join("fifo")).unwrap().uid(),
            65534
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn setuid_create_as_squashed_root_is_not_root_owned() {
    let dir = TempDir::new("conf-setuid-squash");
    let pub_dir = dir.path().join("pub");
    std::fs::create_dir(&pub_dir).unwrap();
    std::fs::set_permissions(&pub_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let srv = TestServer::start_defaults(dir.path(), &["--no-rpcbind"]);
    bounded(async {
        let m = mount(&srv).await;
        let p = lookup(&m.nfs, &m.root, "pub").await;
        let r = m
            .nfs
            .create(&Create3Args {
                where_: dirop(&p, "suid"),
                how: CreateHow3::Guarded(Sattr3 {
                    mode: Some(0o4755),
                    uid: None,
                    ..Sattr3::default()
                }),
            })
            .await;
        ok("CREATE setuid as squashed root", r);
        // The file is the anonymous user's: a setuid bit on it grants
        // nothing a squashed caller did not have.
        let md = std::fs::metadata(pub_dir.join("suid")).unwrap();
        assert_eq!(md.uid(), 65534, "squashed root made a file it does not own");
        assert_eq!(md.gid(), 65534);
        // Asking for root ownership outright is refused.
        let r = m
            .nfs
            .create(&Create3Args {
                where_: dirop(&p, "suid0"),
                how: CreateHow3::Guarded(Sattr3 {
                    mode: Some(0o4755),
                    uid: Some(0),
                    ..Sattr3::default()
                }),
            })
            .await;
        fail_any("CREATE uid 0 as squashed root", r, &[Nfsstat3::Perm]);
        if let Ok(md) = std::fs::metadata(pub_dir.join("suid0")) {
            assert!(!(md.uid() == 0 && md.mode() & 0o4000 != 0));
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn chown_by_non_owner_is_perm() {
    let s = start("conf-chown");
    let f = s.dir.path().join("f");
    std::fs::write(&f, b"x").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
    bounded(async {
        let m = mount(&s.srv).await;
        let fh = lookup(&m.nfs, &m.root, "f").await;
        let user = m.nfs.with_auth(Auth::unix(1000, 1000));
        let r = setattr_res(
            &user,
            &fh,
            Sattr3 {
                uid: Some(1000),
                ..Sattr3::default()
            },
            None,
        )
        .await;
        fail("SETATTR uid by non-owner", r, Nfsstat3::Perm);
    })
    .await;
    assert_eq!(std::fs::metadata(&f).unwrap().uid(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn setattr_size_on_directory_is_refused() {
    let s = start("conf-dir-size");
    std::fs::create_dir(s.dir.path().join("d")).unwrap();
    bounded(async {
        let m = mount(&s.srv).await;
        let d = lookup(&m.nfs, &m.root, "d").await;
        let r = setattr_res(
            &m.nfs,
            &d,
            Sattr3 {
                size: Some(0),
                ..Sattr3::default()
            },
            None,
        )
        .await;
        fail_any(
            "SETATTR size on dir",
            r,
            &[Nfsstat3::IsDir, Nfsstat3::Inval],
        );
    })
    .await;
    assert!(s.dir.path().join("d").is_dir());
}

#[tokio::test(flavor = "multi_thread")]
async fn write_to_read_only_export_is_rofs() {
    let s = start_with("conf-ro", &["--read-only"]);
    std::fs::write(s.dir.path().join("f"), b"orig").unwrap();
    bounded(async {
        let m = mount(&s.srv).await;
        let fh = lookup(&m.nfs, &m.root, "f").await;
        let r = m
            .nfs
            .write(&Write3Args {
                file: fh,
                offset: 0,
                count: 3,
                stable: StableHow::FileSync,
                data: b"new".to_vec(),
            })
            .await;
        fail("WRITE on ro export", r, Nfsstat3::RoFs);
        fail(
            "CREATE on ro export",
            create_res(&m.nfs, &m.root, "n").await,
            Nfsstat3::RoFs,
        );
    })
    .await;
    assert_eq!(std::fs::read(s.dir.path().join("f")).unwrap(), b"orig");
}

#[tokio::test(flavor = "multi_thread")]
async fn write_from_unlisted_client_is_refused() {
    // Only 127.0.0.1 is listed; 127.0.0.2 is another loopback address.
    let s = start_with("conf-unlisted", &["--client", "127.0.0.1"]);
    std::fs::write(s.dir.path().join("f"), b"orig").unwrap();
    bounded(async {
        let m = mount(&s.srv).await;
        let fh = lookup(&m.nfs, &m.root, "f").await;
        // Its connection is closed at accept (it may not hold a slot), so
        // no call of it is even read. (A client unlisted by a SIGHUP while
        // connected gets STALE: the sighup test in security_access.rs.)
        let other = client_from(&s.srv, "127.0.0.2").await;
        let nfs = rnfsd_client::NfsClient::new(other.clone());
        let r = nfs
            .write(&Write3Args {
                file: fh.clone(),
                offset: 0,
                count: 3,
                stable: StableHow::FileSync,
                data: b"new".to_vec(),
            })
            .await;
        assert!(r.is_err(), "WRITE from unlisted client answered: {r:?}");
        let r = nfs.getattr(&GetAttr3Args { object: fh }).await;
        assert!(r.is_err(), "GETATTR from unlisted client answered: {r:?}");
        let r = MountClient::new(other).mnt(export_path(&s.srv)).await;
        assert!(r.is_err(), "MNT from unlisted client answered: {r:?}");
    })
    .await;
    assert_eq!(std::fs::read(s.dir.path().join("f")).unwrap(), b"orig");
}

/// A client connected from `local` (any 127.x.y.z), as root.
async fn client_from(srv: &TestServer, local: &str) -> rnfsd_client::Client {
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.bind(format!("{local}:0").parse().unwrap())
        .expect("bind");
    let st = sock.connect(srv.addr).await.expect("connect");
    let conn = rnfsd_client::RpcConnection::from_stream(st, &config(1)).expect("conn");
    rnfsd_client::Client::from_connection(conn)
}

// ---------------------------------------------------------------------------
// MOUNT paths

async fn mnt_status(srv: &TestServer, path: &str) -> Result<(), ClientError> {
    let c = connect(srv).await;
    MountClient::new(c).mnt(path).await.map(|_| ())
}

fn mount_err(r: Result<(), ClientError>) -> rnfsd_proto::mount::MountStat3 {
    match r {
        Err(ClientError::Mount(s)) => s,
        other => panic!("expected a MOUNT error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn mnt_of_slash_is_refused() {
    let s = start("conf-mnt-slash");
    bounded(async {
        let st = mount_err(mnt_status(&s.srv, "/").await);
        assert!(matches!(
            st,
            rnfsd_proto::mount::MountStat3::NoEnt | rnfsd_proto::mount::MountStat3::Acces
        ));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mnt_of_path_outside_any_export_is_refused() {
    let s = start("conf-mnt-outside");
    bounded(async {
        let out = s.outside.path().to_str().unwrap().to_owned();
        mount_err(mnt_status(&s.srv, &out).await);
        // A prefix of the export that is not a whole component.
        let mut p = export_path(&s.srv);
        p.pop();
        mount_err(mnt_status(&s.srv, &p).await);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mnt_with_dotdot_components_is_refused() {
    let s = start("conf-mnt-dotdot");
    std::fs::create_dir(s.dir.path().join("d")).unwrap();
    bounded(async {
        let e = export_path(&s.srv);
        for p in [
            format!("{e}/.."),
            format!("{e}/d/../.."),
            format!(
                "{e}/../{}",
                s.outside.path().file_name().unwrap().to_str().unwrap()
            ),
            format!("{e}/./d"),
        ] {
            mount_err(mnt_status(&s.srv, &p).await);
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mnt_of_symlink_inside_pointing_outside_is_refused() {
    let s = start("conf-mnt-symlink");
    plant_links(&s);
    bounded(async {
        let e = export_path(&s.srv);
        for l in ["abs", "rel"] {
            let st = mount_err(mnt_status(&s.srv, &format!("{e}/{l}")).await);
            assert_eq!(st, rnfsd_proto::mount::MountStat3::NotDir, "{l}");
        }
    })
    .await;
}
