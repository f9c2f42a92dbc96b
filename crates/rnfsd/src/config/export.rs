//! The `[[export]]` tables, and their resolution: canonical paths, stable
//! ids, client lists and backends.

use std::path::{Path, PathBuf};

use serde::Deserialize;

// Declared beside the server state, which keeps them for each export.
pub use crate::backend::{CephfsConfig, HandleMode, ResolvedBackend};

use super::{err, ConfigError};

/// The words `handle_mode` and `--handle-mode` take.
impl std::str::FromStr for HandleMode {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s {
            "auto" => Ok(HandleMode::Auto),
            "kernel" => Ok(HandleMode::Kernel),
            "path" => Ok(HandleMode::Path),
            _ => err(format!(
                "handle_mode must be \"auto\", \"kernel\" or \"path\", not {s:?}"
            )),
        }
    }
}

fn yes() -> bool {
    true
}

fn nobody() -> u32 {
    crate::access::NOBODY
}

/// One `[[export.client]]` table: options for the clients `match` names
/// (an address, a network or "*"); options left out are the export's.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    #[serde(rename = "match")]
    pub match_: String,
    #[serde(default)]
    pub read_only: Option<bool>,
    #[serde(default)]
    pub root_squash: Option<bool>,
    #[serde(default)]
    pub all_squash: Option<bool>,
    #[serde(default)]
    pub anonuid: Option<u32>,
    #[serde(default)]
    pub anongid: Option<u32>,
    #[serde(default)]
    pub secure: Option<bool>,
    /// A member of an exports(5) `@netgroup` (not a TOML key): it ranks
    /// after networks, as in nfs-utils.
    #[serde(skip)]
    pub netgroup: bool,
}

/// exports(5) `mountpoint`/`mp`: export only while a filesystem is mounted
/// there, so an unmounted disk's empty mount point directory (on the root
/// filesystem) is never exported. Checked at start and at every reload.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum MountPoint {
    /// No check (`false`).
    #[default]
    Off,
    /// The export's path must be a mount point (`true`, exports(5) `mp`).
    Export,
    /// This absolute path must be a mount point (`mp=PATH`).
    At(PathBuf),
}

impl MountPoint {
    /// `mp=PATH`'s PATH: absolute, so it cannot depend on the working
    /// directory.
    pub fn at(p: &str) -> Result<MountPoint, String> {
        match Path::new(p).is_absolute() {
            true => Ok(MountPoint::At(p.into())),
            false => Err(format!("mountpoint {p:?} is not an absolute path")),
        }
    }
}

impl<'de> Deserialize<'de> for MountPoint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = MountPoint;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("true, false or an absolute path")
            }
            fn visit_bool<E>(self, b: bool) -> Result<MountPoint, E> {
                Ok(if b {
                    MountPoint::Export
                } else {
                    MountPoint::Off
                })
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<MountPoint, E> {
                MountPoint::at(s).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// Whether `path` is the root of a mount. The kernel says so
/// (STATX_ATTR_MOUNT_ROOT, Linux 5.8; it sees bind mounts of a directory
/// of the same filesystem too); before that, `path/..` has another mount
/// id, or (nfs-utils' `is_mountpoint`) another device or the same inode.
pub fn is_mount_point(path: &Path) -> std::io::Result<bool> {
    use rustix::fs::{statx, AtFlags, StatxAttributes, StatxFlags, CWD};
    let want = StatxFlags::BASIC_STATS | StatxFlags::MNT_ID;
    let st = statx(CWD, path, AtFlags::empty(), want)?;
    if st.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT) {
        return Ok(st.stx_attributes.contains(StatxAttributes::MOUNT_ROOT));
    }
    let up = statx(CWD, path.join(".."), AtFlags::empty(), want)?;
    let same_inode = (st.stx_dev_major, st.stx_dev_minor, st.stx_ino)
        == (up.stx_dev_major, up.stx_dev_minor, up.stx_ino);
    let mnt_ids = StatxFlags::MNT_ID.bits();
    if st.stx_mask & up.stx_mask & mnt_ids != 0 {
        return Ok(st.stx_mnt_id != up.stx_mnt_id || same_inode);
    }
    let other_dev = (st.stx_dev_major, st.stx_dev_minor) != (up.stx_dev_major, up.stx_dev_minor);
    Ok(other_dev || same_inode)
}

/// Which backend serves an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    #[default]
    Local,
    Cephfs,
}

impl BackendKind {
    /// The word the configuration uses for it.
    pub fn word(self) -> &'static str {
        match self {
            BackendKind::Local => "local",
            BackendKind::Cephfs => "cephfs",
        }
    }
}

/// One `[[export]]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportConfig {
    /// The directory; its canonical absolute path is what clients mount.
    pub path: PathBuf,
    #[serde(default)]
    pub read_only: bool,
    /// Clients allowed with the export's options: addresses, networks
    /// (addr/len) or "*". Unset and no `[[export.client]]` tables: the
    /// loopback addresses only (`access::DEFAULT_CLIENTS`).
    #[serde(default)]
    pub clients: Option<Vec<String>>,
    /// Map uid 0 (and gid 0) to anonuid/anongid (exports(5) root_squash).
    #[serde(default = "yes")]
    pub root_squash: bool,
    /// Map every caller to anonuid/anongid.
    #[serde(default)]
    pub all_squash: bool,
    #[serde(default = "nobody")]
    pub anonuid: u32,
    #[serde(default = "nobody")]
    pub anongid: u32,
    /// Require a privileged source port (< 1024) from clients (exports(5)
    /// `secure`, the default as with knfsd).
    #[serde(default = "yes")]
    pub secure: bool,
    /// Per-client options (`[[export.client]]` tables).
    #[serde(default, rename = "client")]
    pub client_rules: Vec<ClientConfig>,
    /// A fixed export id (it is in every handle); default: a hash of the
    /// canonical path, stable across restarts.
    #[serde(default)]
    pub id: Option<u32>,
    #[serde(default)]
    pub handle_mode: HandleMode,
    /// Let clients cross into filesystems mounted below the export.
    #[serde(default)]
    pub cross_mounts: bool,
    /// Export only while a filesystem is mounted at the path (`true`) or
    /// at another path (`"PATH"`); else it is left out, with an error in
    /// the log, until a reload finds it mounted.
    #[serde(default)]
    pub mountpoint: MountPoint,
    /// exports(5) `sync` (default): namespace changes and SETATTR are on
    /// stable storage before the reply (RFC 1813 §4.8). `false` is
    /// exports(5) `async`: faster, and a crash of the server's host can
    /// undo changes clients were told were done.
    #[serde(default = "yes")]
    pub sync: bool,
    /// Where the files live: "local" (`path` is a directory of this host)
    /// or "cephfs" (`path` is only the name clients mount; the files are
    /// in CephFS, see the `[export.cephfs]` table).
    #[serde(default)]
    pub backend: BackendKind,
    /// The CephFS to serve (`backend = "cephfs"`).
    #[serde(default)]
    pub cephfs: Option<CephfsConfig>,
    /// Where an export from an exports(5) file was read ("FILE:LINE").
    /// Such an export may end up with no client (all its names failed to
    /// resolve): nobody can use it, and a reload can add them back.
    #[serde(skip)]
    pub origin: Option<String>,
}

impl ExportConfig {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        ExportConfig {
            path: path.into(),
            read_only: false,
            clients: None,
            root_squash: true,
            all_squash: false,
            anonuid: crate::access::NOBODY,
            anongid: crate::access::NOBODY,
            secure: true,
            client_rules: Vec::new(),
            sync: true,
            id: None,
            handle_mode: HandleMode::Auto,
            cross_mounts: false,
            mountpoint: MountPoint::Off,
            backend: BackendKind::Local,
            cephfs: None,
            origin: None,
        }
    }

    /// The export's access rules: `clients` (or the loopback default) with
    /// the export's options, then each `[[export.client]]` table.
    pub fn access(&self) -> Result<crate::access::ExportAccess, ConfigError> {
        use crate::access::{ClientOpts, ClientSpec, ExportAccess, Rule, DEFAULT_CLIENTS};
        let at = |m: String| ConfigError(format!("export {}: {m}", self.path.display()));
        let base = ClientOpts {
            read_only: self.read_only,
            root_squash: self.root_squash,
            all_squash: self.all_squash,
            anonuid: self.anonuid,
            anongid: self.anongid,
            secure: self.secure,
        };
        let mut rules: Vec<Rule> = Vec::new();
        let default: Vec<String> = DEFAULT_CLIENTS.iter().map(|s| s.to_string()).collect();
        let listed = match &self.clients {
            Some(c) => c.as_slice(),
            None if self.client_rules.is_empty() => default.as_slice(),
            None => &[],
        };
        let mut push = |spec: ClientSpec, opts: ClientOpts| {
            if rules.iter().any(|r| r.spec == spec) {
                return Err(at(format!("client {spec} is listed twice")));
            }
            rules.push(Rule { spec, opts });
            Ok(())
        };
        for c in listed {
            push(ClientSpec::parse(c).map_err(at)?, base)?;
        }
        for c in &self.client_rules {
            let opts = ClientOpts {
                read_only: c.read_only.unwrap_or(base.read_only),
                root_squash: c.root_squash.unwrap_or(base.root_squash),
                all_squash: c.all_squash.unwrap_or(base.all_squash),
                anonuid: c.anonuid.unwrap_or(base.anonuid),
                anongid: c.anongid.unwrap_or(base.anongid),
                secure: c.secure.unwrap_or(base.secure),
            };
            let spec = ClientSpec::parse(&c.match_).map_err(at)?;
            push(if c.netgroup { spec.in_netgroup() } else { spec }, opts)?;
        }
        if rules.is_empty() && self.origin.is_none() {
            return Err(at(
                "clients is empty: no client could use it (list \"*\" to allow any)".into(),
            ));
        }
        Ok(ExportAccess::new(rules))
    }
}

/// An export after its path was resolved and its id fixed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedExport {
    pub id: u32,
    /// Canonical absolute path: the MNT argument.
    pub path: PathBuf,
    pub read_only: bool,
    pub handle_mode: HandleMode,
    pub cross_mounts: bool,
    pub sync: bool,
    /// Client list and options.
    pub access: crate::access::ExportAccess,
    pub backend: ResolvedBackend,
    /// Why it is not exported now: its `mountpoint` is not mounted. Its
    /// path is then as written (made absolute), not resolved: the
    /// directory may be missing until the filesystem is mounted.
    pub not_mounted: Option<String>,
}

/// The default export id: FNV-1a over the canonical path. Hand-written so
/// it cannot change with a std or crate upgrade (ids are in every handle
/// clients hold).
pub fn export_id_for(path: &Path) -> u32 {
    use std::os::unix::ffi::OsStrExt;
    let mut h: u32 = 0x811c_9dc5;
    for &b in path.as_os_str().as_bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Canonicalize every export path, check it is a directory, assign ids and
/// reject duplicates.
pub fn resolve_exports(exports: &[ExportConfig]) -> Result<Vec<ResolvedExport>, ConfigError> {
    let mut out: Vec<ResolvedExport> = Vec::with_capacity(exports.len());
    for e in exports {
        let not_mounted = not_mounted(e)?;
        let (path, backend) = match &not_mounted {
            None => resolve_backend(e)?,
            Some(_) => (
                std::path::absolute(&e.path)
                    .map_err(|x| ConfigError(format!("export {}: {x}", e.path.display())))?,
                ResolvedBackend::Local,
            ),
        };
        if path.to_str().is_none() {
            return err(format!(
                "export {}: path is not valid UTF-8",
                path.display()
            ));
        }
        if path.as_os_str().len() > rnfsd_proto::mount::MNTPATHLEN {
            return err(format!(
                "export {}: path longer than MOUNT's 1024 bytes",
                path.display()
            ));
        }
        let id = e.id.unwrap_or_else(|| export_id_for(&path));
        if let Some(o) = out.iter().find(|o| o.path == path) {
            return err(format!(
                "export {} is listed twice (as {} and {})",
                path.display(),
                o.path.display(),
                e.path.display()
            ));
        }
        if let Some(o) = out.iter().find(|o| o.id == id) {
            return err(format!(
                "exports {} and {} have the same id {id}: set `id` on one of them",
                o.path.display(),
                path.display()
            ));
        }
        out.push(ResolvedExport {
            id,
            path,
            read_only: e.read_only,
            handle_mode: e.handle_mode,
            cross_mounts: e.cross_mounts,
            sync: e.sync,
            access: e.access()?,
            backend,
            not_mounted,
        });
    }
    Ok(out)
}

/// Why `e` is not to be exported now: its `mountpoint` is not mounted
/// (or cannot be looked at).
fn not_mounted(e: &ExportConfig) -> Result<Option<String>, ConfigError> {
    let at = match &e.mountpoint {
        MountPoint::Off => return Ok(None),
        _ if e.backend != BackendKind::Local => {
            return err(format!(
                "export {}: mountpoint is for local exports",
                e.path.display()
            ))
        }
        MountPoint::Export => &e.path,
        MountPoint::At(p) => p,
    };
    Ok(match is_mount_point(at) {
        Ok(true) => None,
        Ok(false) => Some(format!("{} is not a mount point", at.display())),
        Err(x) => Some(format!("{}: {x}", at.display())),
    })
}

/// The path clients mount and the backend: a local export's canonical
/// directory; a CephFS export's name as written (it names no local file).
fn resolve_backend(e: &ExportConfig) -> Result<(PathBuf, ResolvedBackend), ConfigError> {
    let at = |m: &str| ConfigError(format!("export {}: {m}", e.path.display()));
    match e.backend {
        BackendKind::Local => {
            if e.cephfs.is_some() {
                return Err(at("an [export.cephfs] table needs backend = \"cephfs\""));
            }
            let path = std::fs::canonicalize(&e.path).map_err(|x| at(&x.to_string()))?;
            if !path.is_dir() {
                return err(format!("export {}: not a directory", path.display()));
            }
            Ok((path, ResolvedBackend::Local))
        }
        BackendKind::Cephfs => {
            use std::path::Component;
            let clean = e.path.is_absolute()
                && e.path
                    .components()
                    .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
            if !clean {
                return Err(at(
                    "a CephFS export's path must be absolute, with no . or ..",
                ));
            }
            if e.id.is_none() {
                return Err(at("a CephFS export needs an `id`: the same number on every head (it is in every handle)"));
            }
            if e.handle_mode != HandleMode::Auto || e.cross_mounts {
                return Err(at("handle_mode and cross_mounts are for local exports"));
            }
            let c = e.cephfs.clone().unwrap_or_default();
            if !c.root.starts_with('/') {
                return Err(at("cephfs.root must be absolute"));
            }
            Ok((e.path.components().collect(), ResolvedBackend::Cephfs(c)))
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::*;
    use std::path::PathBuf;

    /// serde's defaults (the `default = ...` of each field) are
    /// `ExportConfig::new`'s and `CephfsConfig::default`'s, which the help
    /// and the DIR flags show.
    #[test]
    fn file_defaults_are_new() {
        let c = Config::from_toml("[[export]]\npath = \"/x\"\n").unwrap();
        assert_eq!(c.exports, vec![ExportConfig::new("/x")]);
        let t = "[[export]]\npath = \"/x\"\nbackend = \"cephfs\"\n[export.cephfs]\n";
        let c = Config::from_toml(t).unwrap();
        assert_eq!(c.exports[0].cephfs, Some(CephfsConfig::default()));
    }

    #[test]
    fn export_access_keys() {
        use crate::access::{ClientSpec, NOBODY};
        let c = Config::from_toml(
            r#"
            [server]
            drc_expiry_secs = 30
            drc_max_bytes = 0

            [[export]]
            path = "/srv/a"

            [[export]]
            path = "/srv/b"
            clients = ["10.0.0.0/8", "::1"]
            read_only = true
            all_squash = true
            anonuid = 1000
            anongid = 1001
            secure = true

            [[export.client]]
            match = "10.1.2.3"
            read_only = false
            root_squash = false

            [[export]]
            path = "/srv/c"
            [[export.client]]
            match = "*"
            "#,
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!((c.server.drc_expiry_secs, c.server.drc_max_bytes), (30, 0));
        let d = ServerConfig::default();
        assert_eq!((d.drc_expiry_secs, d.drc_max_bytes), (120, 32 << 20));
        // Defaults as knfsd's: loopback only, root squashed to nobody,
        // reserved ports only.
        let a = c.exports[0].access().unwrap();
        let lo = a.lookup("127.0.0.5".parse().unwrap()).unwrap();
        assert!(lo.root_squash && !lo.all_squash && lo.secure && !lo.read_only);
        assert_eq!((lo.anonuid, lo.anongid), (NOBODY, NOBODY));
        assert!(a.lookup("::1".parse().unwrap()).is_some());
        assert!(a.lookup("10.0.0.1".parse().unwrap()).is_none());
        let b = c.exports[1].access().unwrap();
        let host = b.lookup("10.1.2.3".parse().unwrap()).unwrap();
        assert!(!host.read_only && !host.root_squash);
        assert!(host.all_squash && host.secure, "inherited");
        assert_eq!(host.anonuid, 1000);
        let net = b.lookup("10.9.9.9".parse().unwrap()).unwrap();
        assert!(net.read_only && net.all_squash && net.secure);
        assert_eq!((net.anonuid, net.anongid), (1000, 1001));
        assert!(b.lookup("127.0.0.1".parse().unwrap()).is_none());
        // Client tables alone replace the loopback default.
        let cc = c.exports[2].access().unwrap();
        assert_eq!(cc.rules().len(), 1);
        assert_eq!(cc.rules()[0].spec, ClientSpec::parse("*").unwrap());

        let bad = |t: &str| {
            let c = Config::from_toml(t).map_err(|e| e.0)?;
            c.validate().map_err(|e| e.0)
        };
        assert!(
            bad("[[export]]\npath = \"/a\"\nclients = [\"example.com\"]")
                .unwrap_err()
                .contains("host names")
        );
        assert!(bad("[[export]]\npath = \"/a\"\nclients = []")
            .unwrap_err()
            .contains("empty"));
        assert!(bad(
            "[[export]]\npath = \"/a\"\nclients = [\"*\"]\n[[export.client]]\nmatch = \"*\""
        )
        .unwrap_err()
        .contains("twice"));
        assert!(
            bad("[[export]]\npath = \"/a\"\n[[export.client]]\nmatch = \"*\"\nrw = true")
                .unwrap_err()
                .contains("unknown")
        );
        assert!(
            bad("[[export]]\npath = \"/a\"\n[[export.client]]\nread_only = true")
                .unwrap_err()
                .contains("match")
        );
    }

    #[test]
    fn export_ids_are_stable_and_exports_resolve() {
        // Fixed values: changing the hash would invalidate clients' handles.
        assert_eq!(export_id_for(Path::new("")), 0x811c_9dc5);
        assert_eq!(export_id_for(Path::new("a")), 0xe40c_292c);
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        let f = d.path().join("f");
        std::fs::create_dir(&a).unwrap();
        std::fs::write(&f, b"").unwrap();
        let canon = std::fs::canonicalize(&a).unwrap();
        let with_dots = d.path().join("a/../a");
        let r = resolve_exports(&[ExportConfig::new(&with_dots)]).unwrap();
        assert_eq!(r[0].path, canon);
        assert_eq!(r[0].id, export_id_for(&canon));
        let again = resolve_exports(&[ExportConfig::new(&a)]).unwrap();
        assert_eq!(again[0].id, r[0].id);

        let mut fixed = ExportConfig::new(&a);
        fixed.id = Some(42);
        assert_eq!(resolve_exports(&[fixed.clone()]).unwrap()[0].id, 42);

        let e = |x: &[ExportConfig]| resolve_exports(x).unwrap_err().0;
        assert!(e(&[ExportConfig::new(&f)]).contains("not a directory"));
        assert!(e(&[ExportConfig::new(d.path().join("missing"))]).contains("missing"));
        assert!(e(&[ExportConfig::new(&a), ExportConfig::new(&with_dots)]).contains("twice"));
        let mut other = ExportConfig::new(d.path());
        other.id = Some(42);
        assert!(e(&[fixed, other]).contains("same id"));
    }

    #[test]
    fn mount_points() {
        let d = tempfile::tempdir().unwrap();
        let sub = d.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        assert!(is_mount_point(Path::new("/")).unwrap());
        assert!(is_mount_point(Path::new("/proc")).unwrap(), "procfs");
        assert!(!is_mount_point(&sub).unwrap());
        assert!(is_mount_point(&d.path().join("missing")).is_err());
    }

    #[test]
    fn mountpoint_key() {
        let m = |v: &str| {
            let t = format!("[[export]]\npath = \"/x\"\nmountpoint = {v}\n");
            Config::from_toml(&t).map(|c| c.exports[0].mountpoint.clone())
        };
        assert_eq!(m("false"), Ok(MountPoint::Off));
        assert_eq!(m("true"), Ok(MountPoint::Export));
        assert_eq!(m("\"/mnt/d\""), Ok(MountPoint::At("/mnt/d".into())));
        assert!(m("\"mnt\"").unwrap_err().0.contains("not an absolute path"));
        assert!(m("3")
            .unwrap_err()
            .0
            .contains("true, false or an absolute path"));
        assert_eq!(ExportConfig::new("/x").mountpoint, MountPoint::Off);

        // Not a mount point: kept, as written, with why; no error even
        // when the directory is missing (the disk did not mount).
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let with = |path: &Path, mp: MountPoint| ExportConfig {
            mountpoint: mp,
            ..ExportConfig::new(path)
        };
        let r = resolve_exports(&[
            with(&a, MountPoint::Export),
            with(
                &d.path().join("gone/x"),
                MountPoint::At(d.path().join("gone")),
            ),
            with(&a.join("../b/."), MountPoint::At("/proc".into())),
            with(d.path(), MountPoint::Off),
        ])
        .unwrap();
        let why = |i: usize| r[i].not_mounted.clone().unwrap_or_default();
        assert_eq!(why(0), format!("{} is not a mount point", a.display()));
        assert!(
            why(1).starts_with(&format!("{}: ", d.path().join("gone").display())),
            "{}",
            why(1)
        );
        assert_eq!(r[1].path, d.path().join("gone/x"));
        assert_eq!(r[2].not_mounted, None, "/proc is mounted");
        assert_eq!(r[2].path, std::fs::canonicalize(&b).unwrap(), "resolved");
        assert_eq!(r[3].not_mounted, None);
        let mut ceph = with(Path::new("/s"), MountPoint::Export);
        (ceph.backend, ceph.id) = (BackendKind::Cephfs, Some(1));
        let e = resolve_exports(&[ceph]).unwrap_err().0;
        assert!(e.contains("mountpoint is for local exports"), "{e}");
    }

    #[test]
    fn cephfs_exports() {
        let c = Config::from_toml(
            "[[export]]\npath = \"/shared\"\nid = 7\nbackend = \"cephfs\"\n\
             [export.cephfs]\nconf = \"/etc/ceph/x.conf\"\nfs = \"fs1\"\nroot = \"/vol\"\n",
        )
        .unwrap();
        c.validate().unwrap();
        let r = resolve_exports(&c.exports).unwrap();
        // The path names no local directory: kept as written.
        assert_eq!(r[0].path, PathBuf::from("/shared"));
        assert_eq!(r[0].id, 7);
        assert_eq!(
            r[0].backend,
            ResolvedBackend::Cephfs(CephfsConfig {
                conf: "/etc/ceph/x.conf".into(),
                client: "admin".into(),
                fs: Some("fs1".into()),
                root: "/vol".into(),
            })
        );
        // Defaults without a table.
        let c =
            Config::from_toml("[[export]]\npath = \"/s\"\nid = 1\nbackend = \"cephfs\"\n").unwrap();
        let r = resolve_exports(&c.exports).unwrap();
        assert_eq!(
            r[0].backend,
            ResolvedBackend::Cephfs(CephfsConfig::default())
        );
        let fails = |t: &str, want: &str| {
            let c = Config::from_toml(t).unwrap();
            let e = resolve_exports(&c.exports).unwrap_err().to_string();
            assert!(e.contains(want), "{t:?}: {e}");
        };
        fails(
            "[[export]]\npath = \"/s\"\nbackend = \"cephfs\"\n",
            "needs an `id`",
        );
        fails(
            "[[export]]\npath = \"s\"\nid = 1\nbackend = \"cephfs\"\n",
            "absolute",
        );
        fails(
            "[[export]]\npath = \"/a/../b\"\nid = 1\nbackend = \"cephfs\"\n",
            "absolute",
        );
        fails(
            "[[export]]\npath = \"/s\"\nid = 1\nbackend = \"cephfs\"\n[export.cephfs]\nroot = \"vol\"\n",
            "root must be absolute",
        );
        fails(
            "[[export]]\npath = \"/tmp\"\n[export.cephfs]\n",
            "needs backend",
        );
        assert!(Config::from_toml("[[export]]\npath = \"/s\"\nbackend = \"nfs\"\n").is_err());
        assert!(Config::from_toml(
            "[[export]]\npath = \"/s\"\nbackend = \"cephfs\"\n[export.cephfs]\nkeyring = \"x\"\n"
        )
        .is_err());
    }
}
