//! Export access control end to end: squashing, per-client options from
//! the configuration file, privileged ports, and SIGHUP reload without
//! dropping connections.

use crate::common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use common::nfs::*;
use common::{write_config, TempDir, TestServer};
use rnfsd_client::nfs3::*;
use rnfsd_client::{Auth, Client, ClientConfig, ClientError, MountClient, NfsClient};
use rnfsd_proto::mount::MountStat3;

fn world_writable(dir: &Path, name: &str) {
    let p = dir.join(name);
    std::fs::create_dir(&p).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn root_is_squashed_by_default() {
    let dir = TempDir::new("acc-rootsquash");
    world_writable(dir.path(), "pub");
    std::fs::write(dir.path().join("rootonly"), b"x").unwrap();
    std::fs::set_permissions(
        dir.path().join("rootonly"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let srv = TestServer::start_defaults(dir.path(), &["--no-rpcbind"]);
    bounded(async {
        let m = mount(&srv).await;
        let p = lookup(&m.nfs, &m.root, "pub").await;
        // Root's file lands as nobody.
        create_file(&m.nfs, &p, "f").await;
        let md = std::fs::metadata(dir.path().join("pub/f")).unwrap();
        assert_eq!((md.uid(), md.gid()), (65534, 65534));
        // Root cannot read a 0600 root file, and ACCESS says so too.
        let fh = lookup(&m.nfs, &m.root, "rootonly").await;
        fail(
            "READ 0600 as squashed root",
            read_res(&m.nfs, &fh, 0, 10).await,
            Nfsstat3::Acces,
        );
        let a = ok(
            "ACCESS",
            m.nfs
                .access(&Access3Args {
                    object: fh,
                    access: ACCESS3_READ | ACCESS3_MODIFY,
                })
                .await,
        );
        assert_eq!(a.access, 0, "ACCESS answered for unsquashed root");
        // A non-root user keeps its identity.
        let user = m.nfs.with_auth(Auth::unix(1000, 1000));
        create_file(&user, &p, "g").await;
        let md = std::fs::metadata(dir.path().join("pub/g")).unwrap();
        assert_eq!((md.uid(), md.gid()), (1000, 1000));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn no_root_squash_all_squash_and_anonuid() {
    let dir = TempDir::new("acc-squash-opts");
    let other = TempDir::new("acc-squash-opts-2");
    world_writable(other.path(), "pub");
    let cfgdir = TempDir::new("acc-squash-cfg");
    let cfg = write_config(
        cfgdir.path(),
        &format!(
            "[[export]]\npath = \"{}\"\nsecure = false\nall_squash = true\nanonuid = 4321\nanongid = 4322\n",
            other.path().display()
        ),
    );
    let srv = TestServer::start_with(
        dir.path(),
        &["--no-rpcbind", "--no-root-squash", "--config", &cfg],
    );
    bounded(async {
        let m = mount(&srv).await;
        create_file(&m.nfs, &m.root, "asroot").await;
        assert_eq!(
            std::fs::metadata(dir.path().join("asroot")).unwrap().uid(),
            0
        );
        let o = mnt_from(&m.client, other.path().to_str().unwrap())
            .await
            .expect("MNT");
        let p = lookup(&m.nfs, &o, "pub").await;
        let user = m.nfs.with_auth(Auth::unix(1000, 1000));
        create_file(&user, &p, "u").await;
        create_file(&m.nfs, &p, "r").await;
        for n in ["u", "r"] {
            let md = std::fs::metadata(other.path().join("pub").join(n)).unwrap();
            assert_eq!((md.uid(), md.gid()), (4321, 4322), "{n}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn auth_none_runs_as_the_anonymous_user() {
    let dir = TempDir::new("acc-authnone");
    world_writable(dir.path(), "pub");
    let srv = TestServer::start_with(
        dir.path(),
        &[
            "--no-rpcbind",
            "--allow-auth-none",
            "--no-root-squash",
            "--anonuid",
            "777",
            "--anongid",
            "778",
        ],
    );
    bounded(async {
        let m = mount(&srv).await;
        let p = lookup(&m.nfs, &m.root, "pub").await;
        create_file(&m.nfs.with_auth(Auth::none()), &p, "n").await;
        let md = std::fs::metadata(dir.path().join("pub/n")).unwrap();
        assert_eq!((md.uid(), md.gid()), (777, 778));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn read_only_client_gets_rofs_other_client_writes() {
    let dir = TempDir::new("acc-roclient");
    std::fs::write(dir.path().join("f"), b"orig").unwrap();
    let cfgdir = TempDir::new("acc-roclient-cfg");
    let second = TempDir::new("acc-roclient-2");
    std::fs::write(second.path().join("f"), b"orig").unwrap();
    let cfg = write_config(
        cfgdir.path(),
        &format!(
            "[[export]]\npath = \"{}\"\nsecure = false\nroot_squash = false\nclients = [\"127.0.0.1\"]\n\
             [[export.client]]\nmatch = \"127.0.0.2\"\nread_only = true\n",
            second.path().display()
        ),
    );
    let srv = TestServer::start_with(
        dir.path(),
        &["--no-rpcbind", "--no-root-squash", "--config", &cfg],
    );
    bounded(async {
        let path = second.path().to_str().unwrap();
        let rw = connect(&srv).await;
        let ro = client_from(&srv, "127.0.0.2").await;
        let unlisted = client_from(&srv, "127.0.0.3").await;
        let h_rw = mnt_from(&rw, path).await.expect("MNT rw");
        let h_ro = mnt_from(&ro, path).await.expect("MNT ro");
        assert!(matches!(
            mnt_from(&unlisted, path).await,
            Err(ClientError::Mount(MountStat3::Acces))
        ));
        let (nrw, nro) = (NfsClient::new(rw), NfsClient::new(ro));
        let f_ro = lookup(&nro, &h_ro, "f").await;
        let args = Write3Args {
            file: f_ro.clone(),
            offset: 0,
            count: 1,
            stable: StableHow::FileSync,
            data: b"X".to_vec(),
        };
        fail(
            "WRITE from ro client",
            nro.write(&args).await,
            Nfsstat3::RoFs,
        );
        fail(
            "CREATE from ro client",
            create_res(&nro, &h_ro, "n").await,
            Nfsstat3::RoFs,
        );
        // Reads work for it.
        assert_eq!(nro.read_all(&f_ro).await.unwrap(), b"orig");
        // The listed read-write client writes.
        let f_rw = lookup(&nrw, &h_rw, "f").await;
        write(&nrw, &f_rw, 0, b"W").await;
        assert_eq!(std::fs::read(second.path().join("f")).unwrap(), b"Wrig");
        // EXPORT lists the clients.
        let x = MountClient::new(connect(&srv).await)
            .export()
            .await
            .unwrap();
        let e = x
            .iter()
            .find(|e| e.dir.0 == path.as_bytes())
            .expect("listed");
        let groups: Vec<_> = e.groups.iter().map(|g| g.0.clone()).collect();
        assert_eq!(groups, [b"127.0.0.1".to_vec(), b"127.0.0.2".to_vec()]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn secure_export_needs_a_privileged_port() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIP secure_export_needs_a_privileged_port: needs root to bind < 1024");
        return;
    }
    let dir = TempDir::new("acc-secure");
    let srv = TestServer::start_with(
        dir.path(),
        &["--no-rpcbind", "--no-root-squash", "--secure"],
    );
    bounded(async {
        let path = export_path(&srv);
        // Unprivileged port: MNT refused, and so is NFS with a good handle.
        let low = Client::connect(
            srv.addr,
            &ClientConfig {
                privileged_port: true,
                ..config(1)
            },
        )
        .await
        .expect("connect from a reserved port");
        let fh = mnt_from(&low, &path)
            .await
            .expect("MNT from a reserved port");
        ok(
            "GETATTR reserved port",
            NfsClient::new(low)
                .getattr(&GetAttr3Args { object: fh.clone() })
                .await,
        );
        let high = connect(&srv).await;
        assert!(matches!(
            mnt_from(&high, &path).await,
            Err(ClientError::Mount(MountStat3::Acces))
        ));
        fail(
            "GETATTR from an unprivileged port",
            NfsClient::new(high)
                .getattr(&GetAttr3Args { object: fh })
                .await,
            Nfsstat3::Perm,
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sighup_applies_new_client_list_without_dropping_connections() {
    let dir = TempDir::new("acc-reload");
    let cfgdir = TempDir::new("acc-reload-cfg");
    std::fs::write(dir.path().join("f"), b"x").unwrap();
    let conf = |extra: &str| {
        format!(
            "[[export]]\npath = \"{}\"\nsecure = false\nroot_squash = false\n{extra}",
            dir.path().display()
        )
    };
    let cfg = write_config(cfgdir.path(), &conf("clients = [\"127.0.0.0/8\"]\n"));
    // DIR (required by the harness) is the config directory; the export
    // under test comes from the file, which the reload re-reads.
    let srv = TestServer::start_with(cfgdir.path(), &["--no-rpcbind", "--config", &cfg]);
    bounded(async {
        let path = dir.path().to_str().unwrap().to_owned();
        let a = client_from(&srv, "127.0.0.2").await;
        let fh = mnt_from(&a, &path).await.expect("MNT before reload");
        let nfs = NfsClient::new(a.clone());
        let f = lookup(&nfs, &fh, "f").await;
        write(&nfs, &f, 0, b"1").await;

        // Now 127.0.0.2 is read-only, and 127.0.0.3 is not listed.
        write_config(
            cfgdir.path(),
            &conf("clients = [\"127.0.0.1\"]\n[[export.client]]\nmatch = \"127.0.0.2\"\nread_only = true\n"),
        );
        let b = client_from(&srv, "127.0.0.3").await;
        let nb = NfsClient::new(b);
        ok("GETATTR before reload", nb.getattr(&GetAttr3Args { object: f.clone() }).await);
        srv.hup();
        // Same connection: the new rules apply to its next call.
        let mut applied = false;
        for _ in 0..100 {
            let r = nfs
                .write(&Write3Args {
                    file: f.clone(),
                    offset: 0,
                    count: 1,
                    stable: StableHow::FileSync,
                    data: b"2".to_vec(),
                })
                .await
                .expect("connection survived the reload");
            if r.status() == Nfsstat3::RoFs {
                applied = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(applied, "reload not applied; log: {}", log_tail(&srv, 20));
        assert!(!a.is_closed());
        fail("GETATTR unlisted after reload", nb.getattr(&GetAttr3Args { object: f }).await, Nfsstat3::Stale);

        // A reload that also adds an export applies both, live: the same
        // connection mounts the new export (reload_exports.rs has more).
        let extra = TempDir::new("acc-reload-extra");
        write_config(
            cfgdir.path(),
            &format!("{}[[export]]\npath = \"{}\"\nsecure = false\n", conf("clients = [\"*\"]\n"), extra.path().display()),
        );
        srv.hup();
        let mut mounted = None;
        for _ in 0..100 {
            if let Ok(fh) = mnt_from(&a, extra.path().to_str().unwrap()).await {
                mounted = Some(fh);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let new_root = mounted.unwrap_or_else(|| panic!("new export not mountable; log: {}", log_tail(&srv, 20)));
        ok("GETATTR of the added export", nfs.getattr(&GetAttr3Args { object: new_root }).await);
        // And "*" may now write the first export again.
        ok("CREATE after the second reload", create_res(&nfs, &fh, "n").await);
    })
    .await;
}

/// Sets a POSIX access ACL through its xattr (the format of
/// `system.posix_acl_access`: version 2, then tag, perm, id entries) so the
/// test needs no acl tools. `user` adds named-user entries, `groups`
/// named-group ones.
fn set_acl(
    path: &Path,
    owner: u16,
    user: &[(u32, u16)],
    group: u16,
    groups: &[(u32, u16)],
    mask: u16,
    other: u16,
) {
    const UNDEF: u32 = u32::MAX;
    let mut v = 2u32.to_le_bytes().to_vec();
    let mut e = |tag: u16, perm: u16, id: u32| {
        v.extend(tag.to_le_bytes());
        v.extend(perm.to_le_bytes());
        v.extend(id.to_le_bytes());
    };
    e(0x01, owner, UNDEF);
    for &(uid, perm) in user {
        e(0x02, perm, uid);
    }
    e(0x04, group, UNDEF);
    for &(gid, perm) in groups {
        e(0x08, perm, gid);
    }
    e(0x10, mask, UNDEF);
    e(0x20, other, UNDEF);
    let p = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: valid C strings and a buffer of the given length.
    let r = unsafe {
        libc::setxattr(
            p.as_ptr(),
            c"system.posix_acl_access".as_ptr(),
            v.as_ptr().cast(),
            v.len(),
            0,
        )
    };
    assert_eq!(r, 0, "setxattr ACL: {}", std::io::Error::last_os_error());
}

/// Undoes a command when dropped (chattr -i, umount), however the test ends.
struct Undo(Vec<&'static str>, std::path::PathBuf);

impl Drop for Undo {
    fn drop(&mut self) {
        let _ = std::process::Command::new(self.0[0])
            .args(&self.0[1..])
            .arg(&self.1)
            .status();
    }
}

fn sh(cmd: &str, args: &[&str], path: &Path) {
    let st = std::process::Command::new(cmd)
        .args(args)
        .arg(path)
        .status()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(st.success(), "{cmd} {args:?} {}", path.display());
}

async fn access_as(srv: &TestServer, uid: u32, name: &str, bits: u32) -> u32 {
    access_with(srv, Auth::unix(uid, uid), name, bits).await
}

async fn access_with(srv: &TestServer, auth: Auth, name: &str, bits: u32) -> u32 {
    let s = mount(srv).await;
    let mut cfg = config(1);
    cfg.auth = auth;
    let user = NfsClient::new(Client::connect(srv.addr, &cfg).await.expect("connect"));
    let fh = lookup(&s.nfs, &s.root, name).await;
    ok(
        "ACCESS",
        user.access(&Access3Args {
            object: fh,
            access: bits,
        })
        .await,
    )
    .access
}

/// ACCESS answers what the kernel will do at open (hardening item 7):
/// POSIX ACL grants and denials, immutable files and read-only mounts,
/// not just the mode bits.
#[tokio::test(flavor = "multi_thread")]
async fn access_is_the_kernels_answer() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "SKIP access_is_the_kernels_answer: needs root (ACLs for others, chattr, mounts)"
        );
        return;
    }
    let rw = ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND;
    let dir = TempDir::new("acc-kernel");
    let d = dir.path();
    // Mode 0600 root's, but an ACL entry grants uid 1000 rw.
    std::fs::write(d.join("granted"), b"g").unwrap();
    set_acl(&d.join("granted"), 6, &[(1000, 6)], 0, &[], 6, 0);
    // Mode says rw for everyone, an ACL entry denies uid 1000 everything.
    std::fs::write(d.join("denied"), b"d").unwrap();
    set_acl(&d.join("denied"), 6, &[(1000, 0)], 6, &[], 6, 6);
    // Group 3001's file, mode (mask) rw for the group; its ACL gives group
    // 3001 r and group 3002 w: a caller in both may read and may write, but
    // no one entry grants both, so a single r+w question is refused.
    std::fs::write(d.join("two-groups"), b"t").unwrap();
    std::os::unix::fs::chown(d.join("two-groups"), None, Some(3001)).unwrap();
    set_acl(&d.join("two-groups"), 6, &[], 4, &[(3002, 2)], 6, 0);
    // Execute: an ACL entry grants uid 1000 rwx, with the mask (the group
    // bits) giving x; capped by a mask without x (mode 0664: no x bit at
    // all), nobody may execute, root included.
    std::fs::write(d.join("acl-exec"), b"x").unwrap();
    set_acl(&d.join("acl-exec"), 6, &[(1000, 7)], 4, &[], 7, 4);
    std::fs::write(d.join("no-exec"), b"n").unwrap();
    set_acl(&d.join("no-exec"), 6, &[(1000, 7)], 6, &[], 6, 4);
    // World-writable but immutable.
    std::fs::write(d.join("immutable"), b"i").unwrap();
    std::fs::set_permissions(d.join("immutable"), std::fs::Permissions::from_mode(0o666)).unwrap();
    sh("chattr", &["+i"], &d.join("immutable"));
    let _thaw = Undo(vec!["chattr", "-i"], d.join("immutable"));
    // A world-writable file and directory seen through a read-only bind mount.
    let ro_src = TempDir::new("acc-kernel-src");
    std::fs::write(ro_src.path().join("w"), b"w").unwrap();
    std::fs::set_permissions(
        ro_src.path().join("w"),
        std::fs::Permissions::from_mode(0o666),
    )
    .unwrap();
    world_writable(ro_src.path(), "wd");
    let ro = TempDir::new("acc-kernel-ro");
    sh(
        "mount",
        &["--bind", ro_src.path().to_str().unwrap()],
        ro.path(),
    );
    let _umount = Undo(vec!["umount"], ro.path().to_path_buf());
    sh("mount", &["-o", "remount,bind,ro"], ro.path());

    let srv = TestServer::start_with(d, &["--no-rpcbind"]);
    let ro_srv = TestServer::start_with(ro.path(), &["--no-rpcbind"]);
    bounded(async {
        assert_eq!(
            access_as(&srv, 1000, "granted", rw).await,
            rw,
            "ACL grants uid 1000 rw"
        );
        assert_eq!(
            access_as(&srv, 1001, "granted", rw).await,
            0,
            "others: none"
        );
        assert_eq!(
            access_as(&srv, 1000, "denied", rw).await,
            0,
            "ACL denies uid 1000"
        );
        assert_eq!(access_as(&srv, 1001, "denied", rw).await, rw);
        let rx = ACCESS3_READ | ACCESS3_EXECUTE;
        assert_eq!(
            access_as(&srv, 1000, "acl-exec", rx).await,
            rx,
            "ACL grants uid 1000 x through the mask"
        );
        assert_eq!(access_as(&srv, 1001, "acl-exec", rx).await, ACCESS3_READ);
        assert_eq!(
            access_as(&srv, 1000, "no-exec", rx).await,
            ACCESS3_READ,
            "a mask without x caps the ACL entry"
        );
        assert_eq!(
            access_with(&srv, Auth::sys(1000, 3001, &[3002], "t"), "two-groups", rw).await,
            rw,
            "r from one group entry, w from another"
        );
        assert_eq!(
            access_with(&srv, Auth::sys(1000, 3001, &[], "t"), "two-groups", rw).await,
            ACCESS3_READ,
            "group 3001 alone: read only"
        );
        assert_eq!(
            access_as(&srv, 1000, "immutable", rw).await,
            ACCESS3_READ,
            "immutable: read only"
        );
        assert_eq!(
            access_as(&ro_srv, 1000, "w", rw).await,
            ACCESS3_READ,
            "read-only mount: read only"
        );
        let dir_bits = ACCESS3_READ | ACCESS3_LOOKUP | ACCESS3_MODIFY | ACCESS3_DELETE;
        assert_eq!(
            access_as(&ro_srv, 1000, "wd", dir_bits).await,
            ACCESS3_READ | ACCESS3_LOOKUP,
            "read-only mount: a directory can be listed, not changed"
        );
    })
    .await;
}

/// A directory the caller may read but not search (r without x) is listed,
/// as `ls` lists it locally (hardening item 6); READDIRPLUS gives no
/// handle or attributes for its entries, since the caller could not LOOKUP
/// them, and LOOKUP itself is refused.
#[tokio::test(flavor = "multi_thread")]
async fn readable_unsearchable_directory_is_listed_without_handles() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIP readable_unsearchable_directory: needs root (act as uid 1000)");
        return;
    }
    let dir = TempDir::new("acc-rnox");
    let d = dir.path().join("d");
    std::fs::create_dir(&d).unwrap();
    for n in ["a", "b"] {
        std::fs::write(d.join(n), b"x").unwrap();
    }
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o744)).unwrap();
    let srv = TestServer::start_with(dir.path(), &["--no-rpcbind"]);
    bounded(async {
        let s = mount(&srv).await;
        let fh = lookup(&s.nfs, &s.root, "d").await;
        let mut cfg = config(1);
        cfg.auth = Auth::unix(1000, 1000);
        let user = NfsClient::new(Client::connect(srv.addr, &cfg).await.expect("connect"));
        let r = ok(
            "READDIR of r-x-less directory",
            user.readdir(&ReadDir3Args {
                dir: fh.clone(),
                cookie: 0,
                cookieverf: Verf3([0; 8]),
                count: 4096,
            })
            .await,
        );
        let mut names: Vec<_> = r.entries.iter().map(|e| e.name.clone()).collect();
        names.sort();
        assert_eq!(
            names,
            vec![b".".to_vec(), b"..".to_vec(), b"a".to_vec(), b"b".to_vec()]
        );
        let r = ok(
            "READDIRPLUS of r-x-less directory",
            user.readdirplus(&ReadDirPlus3Args {
                dir: fh.clone(),
                cookie: 0,
                cookieverf: Verf3([0; 8]),
                dircount: 4096,
                maxcount: 65536,
            })
            .await,
        );
        assert_eq!(r.entries.len(), 4);
        for e in r
            .entries
            .iter()
            .filter(|e| e.name != b"." && e.name != b"..")
        {
            assert!(
                e.name_handle.is_none() && e.name_attributes.is_none(),
                "READDIRPLUS leaked a handle or attributes of {:?}",
                String::from_utf8_lossy(&e.name)
            );
        }
        fail(
            "LOOKUP in r-x-less directory",
            user.lookup(&Lookup3Args {
                what: dirop(&fh, "a"),
            })
            .await,
            Nfsstat3::Acces,
        );
    })
    .await;
}

/// LINK of a file the caller neither owns nor may read: knfsd allows it
/// (vfs_link leaves fs.protected_hardlinks to the client's kernel, which
/// checks its own setting before sending LINK), and so must rnfsd on a host
/// with fs.protected_hardlinks = 1 (Debian's default), while the target
/// directory's permissions stay the caller's. xfstests' generic/597.
#[tokio::test(flavor = "multi_thread")]
async fn link_leaves_protected_hardlinks_to_the_client_as_knfsd_does() {
    let setting = std::fs::read_to_string("/proc/sys/fs/protected_hardlinks").unwrap_or_default();
    if setting.trim() != "1" {
        eprintln!(
            "skipped: fs.protected_hardlinks is not 1 here ({setting:?}): nothing to override"
        );
        return;
    }
    let dir = TempDir::new("acc-hardlink");
    world_writable(dir.path(), "pub");
    let closed = dir.path().join("closed");
    std::fs::create_dir(&closed).unwrap();
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o755)).unwrap();
    let target = dir.path().join("pub/target");
    std::fs::write(&target, b"secret").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(&target, Some(2000), Some(2000)).unwrap();
    let srv = TestServer::start_defaults(dir.path(), &["--no-rpcbind"]);
    bounded(async {
        let m = mount(&srv).await;
        let user = m.nfs.with_auth(Auth::unix(1000, 1000));
        let p = lookup(&user, &m.root, "pub").await;
        let t = lookup(&user, &p, "target").await;
        let r = ok(
            "LINK of another user's unreadable file",
            user.link(&Link3Args {
                file: t.clone(),
                link: dirop(&p, "hardlink"),
            })
            .await,
        );
        assert_eq!(r.file_attributes.expect("LINK file attrs").nlink, 2);
        assert_eq!(
            std::fs::metadata(dir.path().join("pub/hardlink"))
                .unwrap()
                .ino(),
            std::fs::metadata(&target).unwrap().ino()
        );
        // The directory's permissions are still the caller's.
        let c = lookup(&user, &m.root, "closed").await;
        fail(
            "LINK into a directory the caller may not write",
            user.link(&Link3Args {
                file: t.clone(),
                link: dirop(&c, "hardlink"),
            })
            .await,
            Nfsstat3::Acces,
        );
        // And the capability is gone again: the same caller may not chmod
        // the file it does not own.
        fail(
            "SETATTR mode by a non-owner after the LINK",
            setattr_res(
                &user,
                &t,
                Sattr3 {
                    mode: Some(0o666),
                    ..Default::default()
                },
                SattrGuard3::default(),
            )
            .await,
            Nfsstat3::Perm,
        );
    })
    .await;
}
