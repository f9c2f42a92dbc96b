//! MOUNT program (RFC 1813 appendix I), program 100005.
//!
//! Version 3 is the one NFSv3 clients use. Versions 1 and 2 are served too
//! (like rpc.mountd) because `showmount` asks with version 1: their DUMP,
//! UMNT, UMNTALL and EXPORT are the same calls; their MNT would hand out an
//! NFSv2 handle, and NFSv2 is not served, so it answers ACCES.

use std::net::IpAddr;

use rnfsd_fs::{Backend, Fh, FileType, FsError};
use rnfsd_proto::mount::{
    DirPath, ExportNode, Exports, FHandle3, FhStatus, MountList, MountRes3, MountStat3, Name,
    FHSIZE3, MNTNAMLEN, MNTPATHLEN,
};
use rnfsd_proto::rpc::AUTH_SYS;

use crate::access::Denied;
use crate::limits::MAX_MOUNT_ENTRIES;
use crate::programs::{CallCtx, Program, Version};
use crate::state::mounts::MountTable;
use crate::state::{Export, Server};
use rnfsd_rpc::proc_entry;
use rnfsd_rpc::{CacheClass, ProcError};

/// Most bytes one mountlist entry encodes to: marker, hostname, directory.
const MAX_MOUNT_ENTRY_BYTES: usize = 4 + 4 + MNTNAMLEN + 1 + 4 + MNTPATHLEN;
const MAX_DUMP_REPLY: usize = MAX_MOUNT_ENTRIES * MAX_MOUNT_ENTRY_BYTES + 4;
/// EXPORT lists every export; paths are bounded, export count is not known
/// statically, so this is a capacity hint (the encoder grows past it).
const EXPORT_REPLY_HINT: usize = 4096;

/// Runs `f` on the server's mount list (`Server::mounts`).
fn with_table<R>(server: &Server, f: impl FnOnce(&mut MountTable) -> R) -> R {
    // A panic while holding the lock cannot leave the table inconsistent
    // (every method is a single VecDeque operation), so ignore poisoning.
    let mut g = server
        .mounts
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    f(&mut g)
}

/// The name a client is listed under: its address, IPv4-mapped shown as IPv4.
fn host_of(ctx: &CallCtx<'_>) -> String {
    let ip = match ctx.peer.ip() {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    };
    let mut s = ip.to_string();
    s.truncate(MNTNAMLEN);
    s
}

fn stat_of(e: FsError) -> MountStat3 {
    match e {
        FsError::Errno(libc::ENOENT) => MountStat3::NoEnt,
        FsError::Errno(libc::EACCES) => MountStat3::Acces,
        FsError::Errno(libc::EPERM) => MountStat3::Perm,
        FsError::Errno(libc::ENOTDIR) => MountStat3::NotDir,
        FsError::Errno(libc::ENAMETOOLONG) => MountStat3::NameTooLong,
        FsError::Errno(libc::EINVAL) => MountStat3::Inval,
        FsError::Errno(_) => MountStat3::Io,
        FsError::NotSupported => MountStat3::NotSupp,
        FsError::BadHandle | FsError::Stale | FsError::NotSync | FsError::BadCookie => {
            MountStat3::ServerFault
        }
    }
}

/// The path's components after the leading '/', with empty ones (repeated
/// or trailing slashes) skipped. None for a relative path or one with `.`
/// or `..`, which could name something outside what was asked for.
fn components(path: &[u8]) -> Option<Vec<&[u8]>> {
    let rest = path.strip_prefix(b"/")?;
    let mut v = Vec::new();
    for c in rest.split(|&b| b == b'/') {
        match c {
            b"" => {}
            b"." | b".." => return None,
            c => v.push(c),
        }
    }
    Some(v)
}

/// Resolve a MNT path: the export whose path is the longest component-wise
/// prefix, then LOOKUP down from its root one directory at a time (no
/// symlinks followed, as knfsd requires a real subdirectory).
fn resolve(ctx: &CallCtx<'_>, path: &[u8]) -> Result<Fh, MountStat3> {
    let want = components(path).ok_or(MountStat3::NoEnt)?;
    let list = ctx.server.exports();
    let mut best: Option<(&Export, usize)> = None;
    for ex in list.iter() {
        let Some(ec) = components(ex.path.as_bytes()) else {
            continue;
        };
        if ec.len() <= want.len()
            && ec.iter().zip(&want).all(|(a, b)| a == b)
            && best.is_none_or(|(_, n)| ec.len() > n)
        {
            best = Some((ex, ec.len()));
        }
    }
    let (ex, depth) = best.ok_or(MountStat3::NoEnt)?;
    // As rpc.mountd: a client the export does not list ("unmatched host")
    // or one on an unprivileged port of a `secure` export ("illegal port")
    // gets MNT3ERR_ACCES.
    let cred = match ex.access().check(ctx.peer, &ctx.auth) {
        Ok(g) => g.cred,
        Err(d) => {
            let why = match d {
                Denied::NotListed => "unmatched host",
                Denied::InsecurePort => "illegal port",
            };
            tracing::warn!(
                peer = %ctx.peer,
                export = ex.path,
                "refused mount request: {why}"
            );
            return Err(MountStat3::Acces);
        }
    };
    let backend: &dyn Backend = ex.backend.as_ref();
    let mut fh = backend.root();
    for name in want.iter().skip(depth) {
        let (child, attr, _) = backend
            .lookup(&rnfsd_fs::Call::thread(&cred, false), &fh, name)
            .map_err(stat_of)?;
        if attr.ftype != FileType::Directory {
            return Err(MountStat3::NotDir);
        }
        fh = child;
    }
    if fh.0.len() > FHSIZE3 {
        tracing::error!(len = fh.0.len(), "backend issued a handle over 64 bytes");
        return Err(MountStat3::ServerFault);
    }
    Ok(fh)
}

fn null(_: &CallCtx<'_>, _: ()) -> Result<(), ProcError> {
    Ok(())
}

fn mnt(ctx: &CallCtx<'_>, path: DirPath) -> Result<MountRes3, ProcError> {
    match resolve(ctx, &path.0) {
        Ok(fh) => {
            let host = host_of(ctx);
            tracing::info!(%host, path = %String::from_utf8_lossy(&path.0), "mount");
            with_table(ctx.server, |t| t.add(&host, &path.0));
            Ok(MountRes3::Ok {
                fhandle: FHandle3(fh.0),
                auth_flavors: vec![AUTH_SYS],
            })
        }
        Err(s) => {
            tracing::info!(
                peer = %ctx.peer,
                path = %String::from_utf8_lossy(&path.0),
                ?s,
                "mount refused"
            );
            Ok(MountRes3::Err(s))
        }
    }
}

fn mnt_v1(_: &CallCtx<'_>, _: DirPath) -> Result<FhStatus, ProcError> {
    // NFSv2 is not served, so an NFSv2 handle is of no use to anyone.
    Ok(FhStatus::Err(libc::EACCES as u32))
}

fn dump(ctx: &CallCtx<'_>, _: ()) -> Result<MountList, ProcError> {
    Ok(with_table(ctx.server, |t| t.list()))
}

fn umnt(ctx: &CallCtx<'_>, path: DirPath) -> Result<(), ProcError> {
    let host = host_of(ctx);
    with_table(ctx.server, |t| t.remove(&host, &path.0));
    Ok(())
}

fn umntall(ctx: &CallCtx<'_>, _: ()) -> Result<(), ProcError> {
    let host = host_of(ctx);
    with_table(ctx.server, |t| t.remove_host(&host));
    Ok(())
}

fn export(ctx: &CallCtx<'_>, _: ()) -> Result<Exports, ProcError> {
    // Every export with its client list, as rpc.mountd answers showmount -e.
    Ok(Exports(
        ctx.server
            .exports()
            .iter()
            // No rules (an exports(5) line whose names did not resolve):
            // an empty group list would read as "everyone".
            .filter(|e| !e.access().rules().is_empty())
            .map(|e| ExportNode {
                dir: DirPath(e.path.as_bytes().to_vec()),
                groups: e
                    .access()
                    .rules()
                    .iter()
                    .map(|r| {
                        let mut n = r.spec.as_str().as_bytes().to_vec();
                        n.truncate(MNTNAMLEN);
                        Name(n)
                    })
                    .collect(),
            })
            .collect(),
    ))
}

/// MNT3 result: status, handle, one flavor.
const MNT_REPLY: usize = 4 + 4 + FHSIZE3 + 4 + 4 * 4;

/// Versions 1 and 2: same rows as 3 except MNT.
static V1_PROCS: &[crate::programs::Proc] = &[
    proc_entry!("NULL", (), null, CacheClass::None, 0),
    proc_entry!("MNT", DirPath, mnt_v1, CacheClass::None, 36),
    proc_entry!("DUMP", (), dump, CacheClass::None, MAX_DUMP_REPLY),
    proc_entry!("UMNT", DirPath, umnt, CacheClass::None, 0),
    proc_entry!("UMNTALL", (), umntall, CacheClass::None, 0),
    // `showmount -e` sends AUTH_NONE.
    proc_entry!("EXPORT", (), export, CacheClass::None, EXPORT_REPLY_HINT).auth_none(),
];

/// RFC 1813 appendix I, in procedure-number order.
static V3_PROCS: &[crate::programs::Proc] = &[
    proc_entry!("NULL", (), null, CacheClass::None, 0),
    proc_entry!("MNT", DirPath, mnt, CacheClass::None, MNT_REPLY),
    proc_entry!("DUMP", (), dump, CacheClass::None, MAX_DUMP_REPLY),
    proc_entry!("UMNT", DirPath, umnt, CacheClass::None, 0),
    proc_entry!("UMNTALL", (), umntall, CacheClass::None, 0),
    // `showmount -e` sends AUTH_NONE.
    proc_entry!("EXPORT", (), export, CacheClass::None, EXPORT_REPLY_HINT).auth_none(),
];

pub static MOUNT: Program = Program {
    name: "mount",
    prog: rnfsd_proto::mount::PROGRAM,
    versions: &[
        Version {
            vers: 1,
            procs: V1_PROCS,
        },
        Version {
            vers: 2,
            procs: V1_PROCS,
        },
        Version {
            vers: 3,
            procs: V3_PROCS,
        },
    ],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::{ClientOpts, ClientSpec, ExportAccess, Rule};
    use rnfsd_fs::*;
    use rnfsd_proto::rpc::AuthSys;
    use rnfsd_rpc::Auth;
    use std::collections::HashMap;
    use std::net::SocketAddr;
    use std::sync::Arc;

    /// A tree of names: handle = [1, export id (4), node index].
    struct Tree {
        id: u32,
        /// (parent, name) -> (child, type)
        names: HashMap<(u8, Vec<u8>), (u8, FileType)>,
        /// Node whose lookup is refused with EACCES.
        locked: Option<u8>,
    }

    impl Tree {
        fn fh(&self, n: u8) -> Fh {
            let mut v = vec![1];
            v.extend_from_slice(&self.id.to_be_bytes());
            v.push(n);
            Fh(v)
        }
        fn attr(t: FileType) -> Attr {
            Attr {
                ftype: t,
                mode: 0o755,
                nlink: 1,
                uid: 0,
                gid: 0,
                size: 0,
                used: 0,
                rdev: (0, 0),
                fsid: 1,
                fileid: 1,
                atime: Time::default(),
                mtime: Time::default(),
                ctime: Time::default(),
            }
        }
    }

    const NS: FsError = FsError::NotSupported;

    #[rustfmt::skip]
    impl Backend for Tree {
        fn root(&self) -> Fh { self.fh(0) }
        fn getattr(&self, _: &rnfsd_fs::Call<'_>, _: &Fh) -> FsResult<Attr> { Err(NS) }
        fn setattr(&self, _: &rnfsd_fs::Call<'_>, _: &Fh, _: &SetAttr, _: Option<Time>) -> FsResult<Wcc> { Err(NS) }
        fn lookup(&self, _: &rnfsd_fs::Call<'_>, dir: &Fh, name: &[u8]) -> FsResult<(Fh, Attr, Option<Attr>)> {
            let n = *dir.0.get(5).ok_or(FsError::BadHandle)?;
            if Some(n) == self.locked {
                return Err(FsError::Errno(libc::EACCES));
            }
            let (c, t) = self.names.get(&(n, name.to_vec())).ok_or(FsError::Errno(libc::ENOENT))?;
            Ok((self.fh(*c), Tree::attr(*t), None))
        }
        fn access(&self, _: &rnfsd_fs::Call<'_>, _: &Fh, _: u32) -> FsResult<(u32, Attr)> { Err(NS) }
        fn readlink(&self, _: &rnfsd_fs::Call<'_>, _: &Fh) -> FsResult<(Vec<u8>, Attr)> { Err(NS) }
        fn read(&self, _: &rnfsd_fs::Call<'_>, _: &Fh, _: u64, _: u32, _: &mut Vec<u8>) -> FsResult<(bool, Attr)> { Err(NS) }
        fn write(&self, _: &rnfsd_fs::Call<'_>, _: &Fh, _: u64, _: &[u8], _: Stable) -> FsResult<(u32, Stable, Wcc)> { Err(NS) }
        fn create(&self, _: &rnfsd_fs::Call<'_>, _: &Fh, _: &[u8], _: &CreateHow) -> FsResult<Created> { Err(NS) }
        fn mkdir(&self, _: &rnfsd_fs::Call<'_>, _: &Fh, _: &[u8], _: &SetAttr) -> FsResult<Created> { Err(NS) }
        fn symlink(&self, _: &rnfsd_fs::Call<'_>, _: &Fh, _: &[u8], _: &[u8], _: &SetAttr) -> FsResult<Created> { Err(NS) }
        fn mknod(&self, _: &rnfsd_fs::Call<'_>, _: &Fh, _: &[u8], _: NodeKind, _: &SetAttr) -> FsResult<Created> { Err(NS) }
        fn remove(&self, _: &rnfsd_fs::Call<'_>, _: &Fh, _: &[u8]) -> FsResult<Wcc> { Err(NS) }
        fn rmdir(&self, _: &rnfsd_fs::Call<'_>, _: &Fh, _: &[u8]) -> FsResult<Wcc> { Err(NS) }
        fn rename(&self, _: &rnfsd_fs::Call<'_>, _: &Fh, _: &[u8], _: &Fh, _: &[u8]) -> FsResult<(Wcc, Wcc)> { Err(NS) }
        fn link(&self, _: &rnfsd_fs::Call<'_>, _: &Fh, _: &Fh, _: &[u8]) -> FsResult<(Attr, Wcc)> { Err(NS) }
        fn readdir(&self, _: &rnfsd_fs::Call<'_>, _: &Fh, _: u64, _: [u8; 8], _: usize, _: bool) -> FsResult<DirPage> { Err(NS) }
        fn fsstat(&self, _: &rnfsd_fs::Call<'_>, _: &Fh) -> FsResult<(FsStat, Attr)> { Err(NS) }
        fn fsinfo(&self, _: &rnfsd_fs::Call<'_>, _: &Fh) -> FsResult<(FsInfo, Attr)> { Err(NS) }
        fn pathconf(&self, _: &rnfsd_fs::Call<'_>, _: &Fh) -> FsResult<(PathConf, Attr)> { Err(NS) }
        fn commit(&self, _: &rnfsd_fs::Call<'_>, _: &Fh, _: u64, _: u32) -> FsResult<Wcc> { Err(NS) }
    }

    fn server() -> Server {
        // /srv/a: sub (dir) -> deeper (dir); file (regular); link (symlink);
        // locked (dir whose lookups fail with EACCES).
        let mut names = HashMap::new();
        names.insert((0, b"sub".to_vec()), (1, FileType::Directory));
        names.insert((1, b"deeper".to_vec()), (2, FileType::Directory));
        names.insert((0, b"file".to_vec()), (3, FileType::Regular));
        names.insert((0, b"link".to_vec()), (4, FileType::Symlink));
        names.insert((0, b"locked".to_vec()), (5, FileType::Directory));
        let a = Tree {
            id: 10,
            names,
            locked: Some(5),
        };
        let b = Tree {
            id: 11,
            names: HashMap::new(),
            locked: None,
        };
        Server::new(
            vec![
                Export::new(10, "/srv/a", Arc::new(a), ExportAccess::allow_all(false)),
                Export::new(
                    11,
                    "/srv/a/sub/nested",
                    Arc::new(b),
                    ExportAccess::new(vec![
                        Rule {
                            spec: ClientSpec::parse("10.0.0.0/8").unwrap(),
                            opts: ClientOpts {
                                secure: false,
                                ..ClientOpts::default()
                            },
                        },
                        Rule {
                            spec: ClientSpec::parse("10.9.9.9").unwrap(),
                            opts: ClientOpts {
                                secure: true,
                                ..ClientOpts::default()
                            },
                        },
                    ]),
                ),
            ],
            std::sync::Arc::new(rnfsd_fs::WriteVerifier::new([0; 8])),
            1 << 20,
            None,
        )
    }

    fn ctx<'a>(s: &'a Server, peer: &str) -> CallCtx<'a> {
        CallCtx::new(
            1,
            peer.parse::<SocketAddr>().unwrap(),
            "127.0.0.1:2049".parse().unwrap(),
            Auth::Sys(AuthSys {
                uid: 0,
                ..Default::default()
            }),
            s,
            None,
            false,
        )
    }

    fn mount(s: &Server, peer: &str, path: &str) -> MountRes3 {
        mnt(&ctx(s, peer), DirPath(path.as_bytes().to_vec())).unwrap()
    }

    fn ok_handle(r: MountRes3) -> Vec<u8> {
        match r {
            MountRes3::Ok {
                fhandle,
                auth_flavors,
            } => {
                assert_eq!(auth_flavors, vec![AUTH_SYS]);
                fhandle.0
            }
            MountRes3::Err(e) => panic!("mount failed: {e:?}"),
        }
    }

    #[test]
    fn mnt_export_root_and_subdirectories() {
        let s = server();
        let p = "10.0.0.1:700";
        assert_eq!(ok_handle(mount(&s, p, "/srv/a")), vec![1, 0, 0, 0, 10, 0]);
        assert_eq!(ok_handle(mount(&s, p, "//srv/a/")), vec![1, 0, 0, 0, 10, 0]);
        assert_eq!(
            ok_handle(mount(&s, p, "/srv/a/sub")),
            vec![1, 0, 0, 0, 10, 1]
        );
        assert_eq!(
            ok_handle(mount(&s, p, "/srv/a/sub/deeper")),
            vec![1, 0, 0, 0, 10, 2]
        );
        // The nested export wins over walking inside /srv/a.
        assert_eq!(
            ok_handle(mount(&s, p, "/srv/a/sub/nested")),
            vec![1, 0, 0, 0, 11, 0]
        );
    }

    #[test]
    fn mnt_errors() {
        let s = server();
        let p = "10.0.0.2:700";
        for (path, want) in [
            ("/srv", MountStat3::NoEnt),
            ("/srv/ab", MountStat3::NoEnt),
            ("srv/a", MountStat3::NoEnt),
            ("", MountStat3::NoEnt),
            ("/srv/a/../a", MountStat3::NoEnt),
            ("/srv/a/./sub", MountStat3::NoEnt),
            ("/srv/a/missing", MountStat3::NoEnt),
            ("/srv/a/file", MountStat3::NotDir),
            ("/srv/a/link", MountStat3::NotDir),
            ("/srv/a/locked/x", MountStat3::Acces),
        ] {
            assert_eq!(mount(&s, p, path), MountRes3::Err(want), "{path}");
        }
        assert!(with_table(&s, |t| t
            .list()
            .0
            .iter()
            .all(|m| m.hostname.0 != b"10.0.0.2")));
    }

    #[test]
    fn dump_umnt_umntall() {
        let s = server();
        let p = "10.0.0.3:700";
        let c = ctx(&s, p);
        ok_handle(mount(&s, p, "/srv/a"));
        ok_handle(mount(&s, p, "/srv/a"));
        ok_handle(mount(&s, p, "/srv/a/sub"));
        // An IPv4-mapped peer is listed as IPv4.
        ok_handle(mount(&s, "[::ffff:10.0.0.3]:800", "/srv/a/sub/deeper"));
        let mine = |l: MountList| -> Vec<String> {
            l.0.into_iter()
                .filter(|m| m.hostname.0 == b"10.0.0.3")
                .map(|m| String::from_utf8(m.directory.0).unwrap())
                .collect()
        };
        assert_eq!(
            mine(dump(&c, ()).unwrap()),
            ["/srv/a", "/srv/a/sub", "/srv/a/sub/deeper"]
        );
        umnt(&c, DirPath(b"/srv/a/sub".to_vec())).unwrap();
        assert_eq!(mine(dump(&c, ()).unwrap()), ["/srv/a", "/srv/a/sub/deeper"]);
        umntall(&c, ()).unwrap();
        assert!(mine(dump(&c, ()).unwrap()).is_empty());
    }

    #[test]
    fn each_server_has_its_own_mount_list() {
        let (a, b) = (server(), server());
        let p = "10.0.0.6:700";
        ok_handle(mount(&a, p, "/srv/a"));
        let listed = |s: &Server| dump(&ctx(s, p), ()).unwrap().0.len();
        assert_eq!(listed(&a), 1);
        assert_eq!(listed(&b), 0);
        // UMNTALL to the other server leaves this one's list alone.
        umntall(&ctx(&b, p), ()).unwrap();
        assert_eq!(listed(&a), 1);
    }

    #[test]
    fn mount_table_is_bounded() {
        let mut t = MountTable::default();
        for i in 0..MAX_MOUNT_ENTRIES + 10 {
            t.add(&format!("h{i}"), b"/x");
        }
        assert_eq!(t.len(), MAX_MOUNT_ENTRIES);
        // The oldest went first.
        assert_eq!(t.list().0[0].hostname.0, b"h10");
        let enc = rnfsd_xdr::to_vec(&t.list());
        assert!(enc.len() <= MAX_DUMP_REPLY);
    }

    #[test]
    fn export_lists_every_export() {
        let s = server();
        let x = export(&ctx(&s, "10.0.0.4:1"), ()).unwrap();
        let dirs: Vec<_> = x.0.iter().map(|e| e.dir.0.clone()).collect();
        assert_eq!(dirs, [b"/srv/a".to_vec(), b"/srv/a/sub/nested".to_vec()]);
        assert_eq!(x.0[0].groups, [Name(b"*".to_vec())]);
        assert_eq!(
            x.0[1].groups,
            [Name(b"10.9.9.9".to_vec()), Name(b"10.0.0.0/8".to_vec())]
        );
    }

    #[test]
    fn mnt_checks_client_list_and_port() {
        let s = server();
        let nested = "/srv/a/sub/nested";
        // Listed network, any port.
        ok_handle(mount(&s, "10.1.1.1:40000", nested));
        // Not listed.
        assert_eq!(
            mount(&s, "192.168.1.1:700", nested),
            MountRes3::Err(MountStat3::Acces)
        );
        // The host rule (it wins over the network) is `secure`.
        assert_eq!(
            mount(&s, "10.9.9.9:40000", nested),
            MountRes3::Err(MountStat3::Acces)
        );
        ok_handle(mount(&s, "10.9.9.9:1023", nested));
        ok_handle(mount(&s, "10.9.9.8:40000", nested));
        // The parent export allows anyone.
        ok_handle(mount(&s, "192.168.1.1:700", "/srv/a"));
    }

    #[test]
    fn table_shape() {
        let v3 = MOUNT.versions.iter().find(|v| v.vers == 3).unwrap();
        let names: Vec<_> = v3.procs.iter().map(|p| p.name).collect();
        assert_eq!(names, ["NULL", "MNT", "DUMP", "UMNT", "UMNTALL", "EXPORT"]);
        assert_eq!(
            mnt_v1(&ctx(&server(), "10.0.0.5:1"), DirPath::default()).unwrap(),
            FhStatus::Err(13)
        );
    }
}
