//! Which backend serves an export and how it is opened, as configured.
//! `config` reads these; an export (`state::Export`) keeps them for its
//! life: a reload that changes them reopens the backend.

use std::path::PathBuf;

use serde::Deserialize;

/// How the local backend builds file handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HandleMode {
    /// Kernel handles (name_to_handle_at) where the filesystem and our
    /// privileges allow, else path-based.
    #[default]
    Auto,
    /// Kernel handles only (needs CAP_DAC_READ_SEARCH to open them).
    Kernel,
    /// Path/inode-based handles that work unprivileged.
    Path,
}

impl HandleMode {
    /// The word the configuration uses for it.
    pub fn word(self) -> &'static str {
        match self {
            HandleMode::Auto => "auto",
            HandleMode::Kernel => "kernel",
            HandleMode::Path => "path",
        }
    }
}

/// An `[export.cephfs]` table: which CephFS, as whom, and which directory.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CephfsConfig {
    /// The Ceph configuration file (monitors, keyring).
    #[serde(default = "ceph_conf")]
    pub conf: PathBuf,
    /// The cephx client id: "admin" is client.admin.
    #[serde(default = "ceph_client")]
    pub client: String,
    /// The filesystem's name (unset: the cluster's default).
    #[serde(default)]
    pub fs: Option<String>,
    /// The exported directory inside CephFS.
    #[serde(default = "ceph_root")]
    pub root: String,
}

impl Default for CephfsConfig {
    fn default() -> Self {
        CephfsConfig {
            conf: ceph_conf(),
            client: ceph_client(),
            fs: None,
            root: ceph_root(),
        }
    }
}

fn ceph_conf() -> PathBuf {
    PathBuf::from("/etc/ceph/ceph.conf")
}

fn ceph_client() -> String {
    "admin".into()
}

fn ceph_root() -> String {
    "/".into()
}

/// Which backend, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolvedBackend {
    Local,
    Cephfs(CephfsConfig),
}
