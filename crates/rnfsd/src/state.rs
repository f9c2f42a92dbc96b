//! Server-wide state shared by every call, with what each program keeps
//! in it (`mounts`, `portmap`, `nlm`, `nfs4` with `pseudo` and `idmap`).

pub mod copy;
pub mod deleg;
pub mod idmap;
pub mod lease;
pub mod mounts;
pub mod nfs4;
pub mod nlm;
pub mod portmap;
pub mod pseudo;
mod watch;

use std::sync::Arc;

use arc_swap::ArcSwap;
use rnfsd_fs::{Backend, Fh};

use crate::access::ExportAccess;
use crate::backend::{HandleMode, ResolvedBackend};
use crate::limits::{MAX_MAX_IO, MIN_MAX_IO};
use mounts::MountTable;
use nlm::Callbacks;
use portmap::Registration;

/// `max_io`'s default: the largest READ/WRITE/READDIR transfer.
pub const DEFAULT_MAX_IO: u32 = 1 << 20;
/// `inline_write_max`'s default: 4 KiB WRITEs gain 1.2x-1.5x on the loop,
/// 1 MiB ones make a loop's other calls wait (docs/request-path.md).
pub const DEFAULT_INLINE_WRITE_MAX: u32 = 64 << 10;
/// `inline_write_alone_max`'s default: `max_io`'s, so every UNSTABLE WRITE
/// may run on a loop that has nothing else ready (docs/request-path.md).
pub const DEFAULT_INLINE_WRITE_ALONE_MAX: u32 = DEFAULT_MAX_IO;

// The default transfer size is one a configuration may set (a multiple of
// 4 in the range `config/validate.rs` checks), and whole: below the
// wire's bound, so it is not clamped (`programs::nfs3::max_io`).
const _: () = assert!(MIN_MAX_IO <= DEFAULT_MAX_IO && DEFAULT_MAX_IO <= MAX_MAX_IO);
const _: () = assert!(DEFAULT_MAX_IO.is_multiple_of(4));
const _: () = assert!(DEFAULT_MAX_IO as usize <= rnfsd_proto::nfs3::MAX_DATA);
// By default the small WRITEs run on the loop, the larger ones when it
// has nothing else ready, up to the largest a client sends.
const _: () = assert!(DEFAULT_INLINE_WRITE_MAX <= DEFAULT_INLINE_WRITE_ALONE_MAX);
const _: () = assert!(DEFAULT_INLINE_WRITE_ALONE_MAX <= DEFAULT_MAX_IO);

/// One exported directory.
pub struct Export {
    /// Stable across restarts (derived from the path unless configured).
    pub id: u32,
    /// The absolute path clients mount (MNT argument), like knfsd.
    pub path: String,
    pub backend: Arc<dyn Backend>,
    /// The backend's root handle, made once (NFSv4 compares the current
    /// filehandle with it on every GETATTR).
    pub root_fh: Fh,
    /// exports(5) `sync`: its namespace changes wait for stable storage (so
    /// they run in the blocking pool).
    pub sync: bool,
    /// How its backend was opened (fixed for the export's life: a reload
    /// that changes them opens a new backend).
    pub handle_mode: HandleMode,
    /// exports(5) `crossmnt`.
    pub cross_mounts: bool,
    /// Which backend serves it, as configured.
    pub backend_cfg: ResolvedBackend,
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
            root_fh: backend.root(),
            backend,
            sync: true,
            handle_mode: HandleMode::Auto,
            cross_mounts: false,
            backend_cfg: ResolvedBackend::Local,
            access: ArcSwap::from_pointee(access),
        }
    }

    /// As `new`, for an `async` export (`sync = false`).
    pub fn with_sync(mut self, sync: bool) -> Export {
        self.sync = sync;
        self
    }

    /// As `new`, recording how the backend was opened.
    pub fn with_layout(mut self, mode: HandleMode, cross_mounts: bool) -> Export {
        self.handle_mode = mode;
        self.cross_mounts = cross_mounts;
        self
    }

    /// As `new`, recording the backend's configuration.
    pub fn with_backend(mut self, b: ResolvedBackend) -> Export {
        self.backend_cfg = b;
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

/// The exports in force: replaced whole when a reload adds or removes one.
type ExportList = Arc<Vec<Arc<Export>>>;

/// One export, borrowed from the list in force when the call started: a
/// reload that removes it does not pull it from under a running call, and
/// holding it costs no shared reference count (an arc-swap guard).
pub struct ExportRef {
    list: arc_swap::Guard<ExportList>,
    i: usize,
}

/// A second hold on the same export (SAVEFH): one shared count, not a
/// new load.
impl Clone for ExportRef {
    fn clone(&self) -> Self {
        ExportRef {
            list: arc_swap::Guard::from_inner(Arc::clone(&self.list)),
            i: self.i,
        }
    }
}

impl std::ops::Deref for ExportRef {
    type Target = Export;
    fn deref(&self) -> &Export {
        &self.list[self.i]
    }
}

/// What every handler can reach.
pub struct Server {
    exports: ArcSwap<Vec<Arc<Export>>>,
    /// RFC 1813 writeverf3: new at each start and reset by the backends on
    /// stable-storage errors, so clients resend uncommitted writes. Shared
    /// with every export's backend.
    pub write_verifier: Arc<rnfsd_fs::WriteVerifier>,
    /// Largest READ/WRITE/READDIR transfer advertised in FSINFO.
    pub max_io: u32,
    /// Pipes for READs answered by splice (None: READ data is copied).
    pub pipes: Option<Arc<rnfsd_transport::PipePool>>,
    /// Largest UNSTABLE WRITE tried on the event loop (`inline_write_max`).
    pub inline_write_max: u32,
    /// Largest tried there when nothing else of the loop is ready, or
    /// within the loop's per-turn count (`inline_write_alone_max`).
    pub inline_write_alone_max: u32,
    /// Namespace changes and SETATTR of `async` exports are tried on the
    /// event loop (`inline_changes`).
    pub inline_changes: bool,
    /// A call on the event loop may open a handle cache miss's object
    /// there (`inline_misses`).
    pub inline_misses: bool,
    /// The lock manager (NLM), when it is served.
    locks: std::sync::OnceLock<Arc<rnfsd_lockd::LockManager>>,
    /// NFSv4.1, when it is served (`nfs4`).
    nfs4: std::sync::OnceLock<Arc<nfs4::Nfs4>>,
    /// MOUNT's list of who mounted what (DUMP).
    pub(crate) mounts: std::sync::Mutex<MountTable>,
    /// What the built-in port mapper answers: set once the listeners are
    /// bound (`portmap::set_registrations`).
    pub(crate) registrations: std::sync::RwLock<Vec<Registration>>,
    /// NLM callbacks (GRANTED, *_RES) this server has in flight.
    pub(crate) nlm_callbacks: Callbacks,
}

impl Server {
    pub fn new(
        exports: Vec<Export>,
        write_verifier: Arc<rnfsd_fs::WriteVerifier>,
        max_io: u32,
        pipes: Option<Arc<rnfsd_transport::PipePool>>,
    ) -> Server {
        Server {
            exports: ArcSwap::from_pointee(exports.into_iter().map(Arc::new).collect()),
            write_verifier,
            max_io,
            pipes,
            inline_write_max: DEFAULT_INLINE_WRITE_MAX,
            inline_write_alone_max: DEFAULT_INLINE_WRITE_ALONE_MAX,
            inline_changes: true,
            inline_misses: false,
            locks: std::sync::OnceLock::new(),
            nfs4: std::sync::OnceLock::new(),
            mounts: Default::default(),
            registrations: Default::default(),
            nlm_callbacks: Default::default(),
        }
    }

    /// UNSTABLE WRITEs of at most `n` bytes are tried on the event loop.
    pub fn with_inline_write_max(mut self, n: u32) -> Server {
        self.inline_write_max = n;
        self
    }

    /// Larger UNSTABLE WRITEs of at most `n` bytes are routed `Alone`:
    /// tried on the event loop when nothing else of it is ready, or within
    /// its per-turn count.
    pub fn with_inline_write_alone_max(mut self, n: u32) -> Server {
        self.inline_write_alone_max = n;
        self
    }

    /// Whether namespace changes and SETATTR of `async` exports are tried
    /// on the event loop.
    pub fn with_inline_changes(mut self, on: bool) -> Server {
        self.inline_changes = on;
        self
    }

    /// Whether a call on the event loop may open a handle cache miss's
    /// object there, backing off where that sleeps.
    pub fn with_inline_misses(mut self, on: bool) -> Server {
        self.inline_misses = on;
        self
    }

    /// What calls tried on an event loop may do beyond memory.
    pub fn leave(&self) -> rnfsd_fs::inline::Leave {
        rnfsd_fs::inline::Leave {
            misses: self.inline_misses,
            writes: self.inline_write_max > 0,
            changes: self.inline_changes,
        }
    }

    /// Serve NLM with `m` (once, at start).
    pub fn set_locks(&self, m: Arc<rnfsd_lockd::LockManager>) {
        let _ = self.locks.set(m);
    }

    /// The lock manager, if NLM is served.
    pub fn locks(&self) -> Option<&Arc<rnfsd_lockd::LockManager>> {
        self.locks.get()
    }

    /// Serve NFSv4 with `n` (once, at start).
    pub fn set_nfs4(&self, n: Arc<nfs4::Nfs4>) {
        let _ = self.nfs4.set(n);
    }

    /// The NFSv4 side, if NFSv4 is served.
    pub fn nfs4(&self) -> Option<&Arc<nfs4::Nfs4>> {
        self.nfs4.get()
    }

    /// The exports in force now.
    pub fn exports(&self) -> arc_swap::Guard<ExportList> {
        self.exports.load()
    }

    /// Put a new set of exports in force (configuration reload). Calls
    /// already running finish with the exports they started with; a
    /// removed export's backend is dropped when the last of them ends.
    pub fn set_exports(&self, exports: Vec<Arc<Export>>) {
        if let Some(n) = self.nfs4.get() {
            n.set_exports(&exports);
        }
        self.exports.store(Arc::new(exports));
    }

    /// The export with id `id` in force now.
    pub fn export_by_id(&self, id: u32) -> Option<ExportRef> {
        let list = self.exports.load();
        let i = list.iter().position(|e| e.id == id)?;
        Some(ExportRef { list, i })
    }

    /// The export a handle belongs to (None: not exported now).
    pub fn export_of(&self, fh: &[u8]) -> Option<ExportRef> {
        let id = rnfsd_fs::export_id_of(fh)?;
        let list = self.exports.load();
        let i = list.iter().position(|e| e.id == id)?;
        Some(ExportRef { list, i })
    }
}

/// One event loop's state for the calls it answers itself: the backends'
/// run-to-completion state of that loop (`rnfsd_fs::inline`).
pub struct NfsLoop(pub rnfsd_fs::inline::Loop);

impl rnfsd_rpc::LoopState for NfsLoop {
    fn turn_begins(&self) {
        self.0.turn_begins();
    }

    fn turn_ends(&self, more: bool) {
        self.0.turn_ends(more);
    }

    fn begin_call(&self) {
        self.0.begin_call();
    }

    fn gave_up(&self) -> bool {
        self.0.gave_up()
    }

    fn end_call(&self) -> bool {
        self.0.end_call()
    }
}

/// The server as its RPC services see it: each event loop gets the
/// backends' loop state, with what its calls may do beyond memory.
impl rnfsd_rpc::State for Server {
    type Loop = NfsLoop;

    fn new_loop(&self) -> Option<NfsLoop> {
        Some(NfsLoop(rnfsd_fs::inline::Loop::new(self.leave())))
    }

    /// An NFSv4 session's connection closed: it is no longer bound to it
    /// (RFC 8881 §2.10.3.1), so a bound connection cannot outlive its
    /// socket.
    fn disconnected(&self, conn_id: u64) {
        if let Some(n) = self.nfs4() {
            n.state.conn_closed(rnfsd_v4state::ConnId(conn_id));
        }
    }
}

/// Connections are taken only from hosts some export lists (under the
/// rules in force now: a SIGHUP applies to the next accept), so strangers
/// cannot hold connection slots. For the NFS listeners; the port mapper
/// answers anyone, as rpcbind does.
pub fn admit_listed(server: &Server, peer: &std::net::SocketAddr) -> bool {
    server
        .exports()
        .iter()
        .any(|e| e.access().lookup(peer.ip()).is_some())
}
