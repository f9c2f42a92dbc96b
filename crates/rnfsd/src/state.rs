//! Server-wide state shared by every call.

use std::sync::Arc;

use rnfsd_fs::Backend;

/// One exported directory.
pub struct Export {
    /// Stable across restarts (derived from the path unless configured).
    pub id: u32,
    /// The absolute path clients mount (MNT argument), like knfsd.
    pub path: String,
    pub backend: Arc<dyn Backend>,
    pub read_only: bool,
}

/// What every handler can reach.
pub struct Server {
    pub exports: Vec<Export>,
    /// RFC 1813 writeverf3: constant for this server instance, changes on
    /// restart so clients resend uncommitted writes.
    pub write_verifier: [u8; 8],
    /// Largest READ/WRITE/READDIR transfer advertised in FSINFO.
    pub max_io: u32,
}

impl Server {
    /// The export a handle belongs to.
    pub fn export_of(&self, fh: &[u8]) -> Option<&Export> {
        let id = rnfsd_fs::export_id_of(fh)?;
        self.exports.iter().find(|e| e.id == id)
    }
}
