//! Server-wide state shared by every call.

use std::sync::Arc;

use arc_swap::ArcSwap;
use rnfsd_fs::Backend;

use crate::access::ExportAccess;

/// One exported directory.
pub struct Export {
    /// Stable across restarts (derived from the path unless configured).
    pub id: u32,
    /// The absolute path clients mount (MNT argument), like knfsd.
    pub path: String,
    pub backend: Arc<dyn Backend>,
    /// exports(5) `sync`: its namespace changes wait for stable storage (so
    /// they run in the blocking pool).
    pub sync: bool,
    /// Who may use the export and how. Swapped whole on a configuration
    /// reload (SIGHUP); a call reads it without a lock or a shared write.
    access: ArcSwap<ExportAccess>,
}

impl Export {
    pub fn new(
        id: u32,
        path: impl Into<String>,
        backend: Arc<dyn Backend>,
        access: ExportAccess,
    ) -> Export {
        Export {
            id,
            path: path.into(),
            backend,
            sync: true,
            access: ArcSwap::from_pointee(access),
        }
    }

    /// As `new`, for an `async` export (`sync = false`).
    pub fn with_sync(mut self, sync: bool) -> Export {
        self.sync = sync;
        self
    }

    /// The current access rules.
    pub fn access(&self) -> arc_swap::Guard<Arc<ExportAccess>> {
        self.access.load()
    }

    /// Replace the access rules (configuration reload). Calls already
    /// running finish under the old rules.
    pub fn set_access(&self, access: ExportAccess) {
        self.access.store(Arc::new(access));
    }
}

/// What every handler can reach.
pub struct Server {
    pub exports: Vec<Export>,
    /// RFC 1813 writeverf3: new at each start and reset by the backends on
    /// stable-storage errors, so clients resend uncommitted writes. Shared
    /// with every export's backend.
    pub write_verifier: Arc<rnfsd_fs::WriteVerifier>,
    /// Largest READ/WRITE/READDIR transfer advertised in FSINFO.
    pub max_io: u32,
    /// Pipes for READs answered by splice (None: READ data is copied).
    pub pipes: Option<Arc<rnfsd_transport::PipePool>>,
}

impl Server {
    /// The export a handle belongs to.
    pub fn export_of(&self, fh: &[u8]) -> Option<&Export> {
        let id = rnfsd_fs::export_id_of(fh)?;
        self.exports.iter().find(|e| e.id == id)
    }
}
