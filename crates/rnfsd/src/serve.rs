//! `rnfsd serve` as a library: the composition root. `ServerBuilder`
//! puts a server together from a `Config` (exports, lock manager, admin
//! socket, metrics, RPC services, listeners, port mapper registration),
//! each step a function of its own; `Running` is the server until
//! `shutdown`, and applies reloads. The binary adds only what belongs to
//! the process: logging, limits, privileges, signals and systemd.
//!
//! ```no_run
//! # fn main() -> Result<(), rnfsd::serve::Error> {
//! let mut cfg = rnfsd::config::Config::default();
//! cfg.server.listen = vec!["127.0.0.1:0".parse().unwrap()];
//! cfg.exports.push(rnfsd::config::ExportConfig::new("/srv/a"));
//! let running = rnfsd::serve::ServerBuilder::new(cfg)?.start()?;
//! println!("{:?}", running.nfs_addrs());
//! running.shutdown();
//! # Ok(()) }
//! ```

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rnfsd_fs::cache::Caches;
use rnfsd_fs::WriteVerifier;

use crate::admin::{self, AdminSocket};
use crate::comma_list as list;
use crate::config::Idmap;
use crate::config::{self, lower, Config, ConfigError, ResolvedExport, ServerConfig};
use crate::listeners::{self, Listeners, Services};
use crate::metrics::{self, MetricsServer};
use crate::programs::mount::MOUNT;
use crate::programs::nfs3::NFS3;
use crate::programs::nfs4::NFS4;
use crate::programs::nlm::NLM;
use crate::programs::nsm::NSM;
use crate::programs::portmap::{self, Registration, PORTMAP};
use crate::programs::Program;
use crate::state::idmap::IdMap;
use crate::state::nfs4::Nfs4;
use crate::state::Server;
use crate::{keys, live, rpcbind};
use rnfsd_lockd::hosts::Host;
use rnfsd_rpc::{Policy, RpcService};

/// Why the server did not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The configuration cannot be served (exit status 2, as clap's).
    Config(String),
    /// Something of the host failed: a socket, a file, a descriptor.
    Runtime(String),
}

impl Error {
    fn config(e: impl std::fmt::Display) -> Error {
        Error::Config(e.to_string())
    }
    fn runtime(e: impl std::fmt::Display) -> Error {
        Error::Runtime(e.to_string())
    }

    /// The process exit status for it.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Config(_) => 2,
            Error::Runtime(_) => 1,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Config(m) | Error::Runtime(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

/// A server being put together; `start` runs it.
pub struct ServerBuilder {
    cfg: Config,
    exports: Vec<ResolvedExport>,
    state_dir: PathBuf,
    key: [u8; 32],
    cache_fds: Option<usize>,
    socket_activation: bool,
}

impl ServerBuilder {
    /// Resolves the exports and loads (or creates) the handle key in the
    /// state directory: the steps that need the privileges the process
    /// started with, so a caller that drops privileges does so after this.
    pub fn new(cfg: Config) -> Result<ServerBuilder, Error> {
        let exports = config::resolve_exports(&cfg.exports).map_err(Error::config)?;
        let s = &cfg.server;
        let state_dir = s.state_dir.clone().unwrap_or_else(keys::default_state_dir);
        let key = keys::load_or_create_handle_key(&state_dir)
            .map_err(|e| Error::runtime(format!("handle key in {}: {e}", state_dir.display())))?;
        Ok(ServerBuilder {
            cfg,
            exports,
            state_dir,
            key,
            cache_fds: None,
            socket_activation: false,
        })
    }

    /// Sizes the caches' descriptor budget from the open-files limit
    /// `nofile` (`ServerConfig::cache_fd_budget`), and grows the process's
    /// descriptor table for it now. Without it, `start` takes the budget
    /// from the limit as it is then, and the table grows on demand.
    pub fn fd_budget(mut self, nofile: u64) -> Result<ServerBuilder, Error> {
        let s = &self.cfg.server;
        let cache_fds = s.cache_fd_budget(nofile).map_err(Error::config)?;
        let fd_table = presize_fd_table((cache_fds as u64 + s.fd_reserve()).min(nofile));
        tracing::info!(
            nofile,
            cache_fds,
            fd_table,
            "descriptor budget of the caches"
        );
        self.cache_fds = Some(cache_fds);
        Ok(self)
    }

    /// Serve NFS on the sockets systemd passed (if it passed any) instead
    /// of binding `server.listen`.
    pub fn socket_activation(mut self, on: bool) -> ServerBuilder {
        self.socket_activation = on;
        self
    }

    /// Starts everything, in the order that makes each step findable by the
    /// next: exports, lock manager, admin socket, metrics, services,
    /// listeners, port mapper registration, restart notices.
    pub fn start(self) -> Result<Running, Error> {
        let s = &self.cfg.server;
        let cache_fds = match self.cache_fds {
            Some(n) => n,
            None => s.cache_fd_budget(nofile()).map_err(Error::config)?,
        };
        // The counters belong to the process, not to a configuration: a
        // reload keeps them.
        let stats = Arc::new(rnfsd_stats::Registry::new(s.stats, {
            let mut d = metrics::proc_descs(&[&NFS3, &NFS4, &MOUNT, &PORTMAP, &NLM, &NSM]);
            d.extend(crate::programs::nfs4::op_descs());
            d
        }));
        let opener = live::Opener {
            key: self.key,
            caches: Caches::new(cache_fds),
            verifier: Arc::new(WriteVerifier::new(keys::new_write_verifier())),
            stats: stats.clone(),
            head: head_name(&self.state_dir),
            not_exported: live::NotExported::default(),
        };
        let opened = open_exports(s, &self.exports, &opener)?;
        let server = Arc::new(nfs_server(s, opener.verifier.clone()));
        server.set_exports(opened);
        let restarted = start_locks(s, &self.state_dir, &server, &stats)?;
        start_nfs4(s, &self.state_dir, &server, &stats)?;
        let admin = start_admin(s, &self.state_dir, &server, &stats, &opener)?;
        let metrics = match s.metrics {
            Some(a) => Some(
                MetricsServer::start(a, stats.clone())
                    .map_err(|e| Error::runtime(format!("metrics on {a}: {e}")))?,
            ),
            None => None,
        };
        let policy = Policy {
            allow_auth_none: s.allow_auth_none,
        };
        let services = Services {
            nfs: Arc::new(nfs_service(s, &server, policy, &stats)),
            portmap: Arc::new(portmap_service(&server, policy, &stats)),
            locks_udp: (s.nlm && s.udp).then(|| Arc::new(lock_service(&server, policy, &stats))),
        };
        let listeners = start_listeners(s, services, self.socket_activation)?;
        listeners.add_stats_sources(&stats);
        let rpcbind = register(s, &server, &listeners);
        if let Some(n) = server.nfs4() {
            if let Some(m) = server.locks() {
                share_grace(m, n);
            }
            n.state.start_grace();
        }
        // Once NLM can be found: the grace period starts, and clients told
        // of our restart reclaim at once.
        if let Some(m) = server.locks() {
            m.start_grace();
            if let Some((hosts, state)) = restarted {
                crate::programs::nsm::notify_restart(m, hosts, state, s.nlm_notify_parallel);
            }
        }
        Ok(Running {
            cfg: self.cfg,
            server,
            opener,
            listeners,
            admin,
            metrics,
            rpcbind,
        })
    }
}

/// Grows this process's descriptor table now to hold `want` descriptors
/// (at most 65,536), and returns the number asked for. The kernel grows it
/// on demand, and a growth in a process with threads waits for an RCU grace
/// period (milliseconds; `expand_fdtable`): on an event loop opening a
/// handle cache miss, that is a stall, and it quiets the loop's
/// speculation (`rnfsd_fs::inline`). The table never shrinks, so once is
/// enough. Failure costs only those stalls later.
fn presize_fd_table(want: u64) -> u64 {
    let want = want.min(1 << 16);
    let top = want.saturating_sub(1) as i32;
    let grown = rustix::fs::open(
        "/",
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .and_then(|fd| rustix::io::fcntl_dupfd_cloexec(&fd, top));
    if let Err(e) = grown {
        tracing::warn!(want, "could not grow the descriptor table up front: {e}");
    }
    want
}

/// The open-files limit as it is now.
fn nofile() -> u64 {
    let r = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    r.current.unwrap_or(libc::RLIM_INFINITY)
}

/// This head's identity for its sessions: host name and state directory.
fn head_name(state_dir: &Path) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    let dir = std::fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.to_owned());
    format!("{host}:{}", dir.display())
}

/// The NFS server's state, with no export yet.
pub fn nfs_server(s: &ServerConfig, verifier: Arc<WriteVerifier>) -> Server {
    Server::new(
        Vec::new(),
        verifier,
        s.max_io,
        // A pipe holds the largest READ's data.
        (s.splice_pipes > 0)
            .then(|| rnfsd_transport::PipePool::new(s.splice_pipes, s.max_io as usize)),
    )
    .with_inline_write_max(s.inline_write_max)
    .with_inline_write_alone_max(s.inline_write_alone_max)
    .with_inline_changes(s.inline_changes)
    .with_inline_misses(s.inline_misses)
}

/// Opens every export's backend.
fn open_exports(
    s: &ServerConfig,
    exports: &[ResolvedExport],
    opener: &live::Opener,
) -> Result<Vec<Arc<crate::state::Export>>, Error> {
    // Those whose mount point is not mounted are left out (logged).
    let opened = opener.open_all(s, exports).map_err(Error::runtime)?;
    if opened.is_empty() {
        tracing::warn!(
            "nothing is exported yet: add [[export]] tables or `exports = FILE` to the \
             configuration, then reload (SIGHUP)"
        );
    }
    Ok(opened)
}

/// The lock manager (with `nlm`): hosts that took locks before a restart
/// get a grace period to reclaim them (its clock starts once the
/// listeners are up); returns them and our new NSM state, for the notice
/// that we restarted.
fn start_locks(
    s: &ServerConfig,
    state_dir: &Path,
    server: &Server,
    stats: &rnfsd_stats::Registry,
) -> Result<Option<(Vec<Host>, i32)>, Error> {
    if !s.nlm {
        return Ok(None);
    }
    let dir = state_dir.join("nlm");
    let (hosts, before, state) = rnfsd_lockd::hosts::Hosts::load(&dir)
        .map_err(|e| Error::runtime(format!("lock manager state in {}: {e}", dir.display())))?;
    let grace = (!before.is_empty()).then(|| Duration::from_secs(s.nlm_grace_secs));
    if let Some(g) = grace {
        tracing::info!(
            hosts = before.len(),
            secs = g.as_secs(),
            "lock manager: grace period for reclaims"
        );
    }
    let m = rnfsd_lockd::LockManager::with_hosts(lower::locks(s), grace, Some(hosts), state);
    let gauges = m.clone();
    stats.set_locks(move || {
        let c = gauges.counts();
        rnfsd_stats::LockCounts {
            files: c.files,
            ranges: c.ranges,
            waiters: c.waiters,
            shares: c.shares,
        }
    });
    server.set_locks(m);
    server
        .nlm_callbacks
        .set_per_client(s.nlm_callbacks_per_client);
    Ok(Some((before, state)))
}

/// The admin socket `rnfsd stats` and `rnfsd exportfs` read.
fn start_admin(
    s: &ServerConfig,
    state_dir: &Path,
    server: &Arc<Server>,
    stats: &Arc<rnfsd_stats::Registry>,
    opener: &live::Opener,
) -> Result<AdminSocket, Error> {
    // Before any thread that creates files exists (it narrows the umask).
    let path = s
        .admin_socket
        .clone()
        .unwrap_or_else(|| state_dir.join(admin::DEFAULT_NAME));
    let (view, left) = (server.clone(), opener.not_exported.clone());
    let sources = admin::Sources {
        stats: stats.clone(),
        exports: Arc::new(move || live::exportfs(&view, &left)),
    };
    AdminSocket::start(&path, sources)
        .map_err(|e| Error::runtime(format!("admin socket {}: {e}", path.display())))
}

/// NLM and NSM (with `nlm`), which share the NFS port over TCP and UDP.
fn lock_programs(s: &ServerConfig) -> Vec<&'static Program> {
    if s.nlm {
        vec![&NLM, &NSM]
    } else {
        Vec::new()
    }
}

/// Everything served on the NFS addresses over TCP.
fn nfs_programs(s: &ServerConfig) -> Vec<&'static Program> {
    let mut v: Vec<&'static Program> = vec![&NFS3, &MOUNT];
    if s.nfs4 {
        v.push(&NFS4);
    }
    v.extend(lock_programs(s));
    v
}

/// NLM and NFSv4 share one grace period after a restart: NLM grants only
/// reclaims while NFSv4's lasts, and NFSv4's does not end early (when
/// its last known client says RECLAIM_COMPLETE) while NLM's clients may
/// still reclaim.
fn share_grace(m: &Arc<rnfsd_lockd::LockManager>, n: &Nfs4) {
    let g = n.state.grace().clone();
    m.share_grace(Box::new(move || g.in_grace()));
    if m.grace_left().is_none() {
        return;
    }
    let hold = n.state.grace().hold();
    let m = Arc::downgrade(m);
    let spawned = std::thread::Builder::new()
        .name("grace-share".into())
        .spawn(move || {
            // Until NLM's own grace period is over (or the manager gone).
            while let Some(left) = m.upgrade().and_then(|m| m.grace_left()) {
                std::thread::sleep(left.min(Duration::from_secs(1)));
            }
            drop(hold);
        });
    if let Err(e) = spawned {
        // Without the thread NFSv4's grace may end before NLM's.
        tracing::warn!("grace sharing thread: {e}");
    }
}

/// How often the NFSv4 reaper looks for expired leases, and how many
/// stateids it frees in one pass (small batches, off the request path).
const NFS4_REAP_EVERY: Duration = Duration::from_secs(1);
const NFS4_REAP_BATCH: usize = 512;

/// The NFSv4 state (with `nfs4`): client records in `state_dir/nfs4`,
/// whose previous clients may reclaim in the grace period.
fn start_nfs4(
    s: &ServerConfig,
    state_dir: &Path,
    server: &Arc<Server>,
    stats: &Arc<rnfsd_stats::Registry>,
) -> Result<(), Error> {
    if !s.nfs4 {
        return Ok(());
    }
    let dir = state_dir.join("nfs4");
    let state = rnfsd_v4state::State::with_records(lower::nfs4(s), &dir)
        .map_err(|e| Error::runtime(format!("NFSv4 client records in {}: {e}", dir.display())))?;
    let reaper = state
        .spawn_reaper(NFS4_REAP_EVERY, NFS4_REAP_BATCH)
        .map_err(|e| Error::runtime(format!("NFSv4 reaper: {e}")))?;
    let st = state.clone();
    stats.set_nfs4(move || {
        let c = st.counts();
        rnfsd_stats::Nfs4Counts {
            clients: c.clients,
            sessions: c.sessions,
            stateids: c.stateids,
            reply_cache_bytes: c.reply_cache_bytes,
            in_grace: c.in_grace,
            clients_expired: c.clients_expired,
            replays: c.replays,
            reaped_stateids: c.reaped_stateids,
            delegations: c.delegations,
            write_delegations: c.write_delegations,
            recalls: c.recalls,
            delegations_revoked: c.delegations_revoked,
        }
    });
    let deleg = crate::state::deleg::Delegations::new(
        &state,
        s.nfs4_delegations,
        s.nfs4_max_clients,
        s.nfs4_max_leases,
    )
    .map_err(|e| Error::runtime(format!("NFSv4 recall sender: {e}")))?;
    let mut n = Nfs4::new(
        state,
        &server.exports(),
        s.nfs4_minor2,
        idmap_of(s),
        Some(reaper),
        crate::state::nfs4::OpStats::of(
            stats.clone(),
            crate::programs::nfs4::OPS_STATS_PROG,
            crate::programs::nfs4::OPS_STATS_VERS,
        ),
    )
    .with_copy_sync_max(s.nfs4_copy_sync_max)
    .with_copies(s.nfs4_copies_max, s.nfs4_copies_per_client);
    n.set_delegations(deleg);
    server.set_nfs4(Arc::new(n));
    Ok(())
}

/// NFSv4 owner strings as configured (`nfs4_idmap`).
fn idmap_of(s: &ServerConfig) -> IdMap {
    match s.nfs4_idmap {
        Idmap::Numeric => IdMap::numeric(),
        Idmap::Names => IdMap::names(
            s.nfs4_idmap_domain
                .clone()
                .unwrap_or_else(crate::state::idmap::default_domain),
            s.nfs4_idmap_cache,
        ),
    }
}

/// NFS, MOUNT (and NLM, NSM) over TCP.
pub fn nfs_service(
    s: &ServerConfig,
    server: &Arc<Server>,
    policy: Policy,
    stats: &Arc<rnfsd_stats::Registry>,
) -> RpcService<Server> {
    let drc = lower::drc(s).map(|c| Arc::new(rnfsd_rpc::Drc::new(c)));
    let svc = RpcService::new(server.clone(), nfs_programs(s), policy)
        .with_stats(stats.clone())
        .with_drc(drc)
        .with_admit(crate::state::admit_listed);
    // NFSv4.1 calls its clients back on their own connections.
    match s.nfs4 {
        true => svc.with_back_channel(rnfsd_rpc::BackChannel::new(Default::default())),
        false => svc,
    }
}

/// NLM and NSM over UDP: datagrams only from hosts some export lists,
/// as the NFS listeners take connections (a stranger's datagram would
/// otherwise make us call it back, or anyone it names as its source).
fn lock_service(
    server: &Arc<Server>,
    policy: Policy,
    stats: &Arc<rnfsd_stats::Registry>,
) -> RpcService<Server> {
    RpcService::new(server.clone(), vec![&NLM, &NSM], policy)
        .with_stats(stats.clone())
        .with_admit(crate::state::admit_listed)
}

/// The port mapper (with `portmap`).
fn portmap_service(
    server: &Arc<Server>,
    policy: Policy,
    stats: &Arc<rnfsd_stats::Registry>,
) -> RpcService<Server> {
    RpcService::new(server.clone(), vec![&PORTMAP], policy).with_stats(stats.clone())
}

/// The listeners, on systemd's sockets when `activation` and it passed
/// any, else on `server.listen`.
fn start_listeners(
    s: &ServerConfig,
    services: Services,
    activation: bool,
) -> Result<Listeners, Error> {
    let activated = match activation {
        true => crate::activation::listeners().map_err(Error::config)?,
        false => Vec::new(),
    };
    if !activated.is_empty() {
        tracing::info!(
            sockets = activated.len(),
            "socket activation: serving on the service manager's sockets; server.listen is not used"
        );
    }
    listeners::start(s, services, activated).map_err(Error::runtime)
}

/// Programs and versions served on `addr`, for the port mapper tables.
fn registrations_for(addr: SocketAddr, programs: &[&Program], udp: bool) -> Vec<Registration> {
    let mut v = Vec::new();
    for p in programs {
        for ver in p.versions {
            v.push(match udp {
                true => Registration::udp(p.prog, ver.vers, addr),
                false => Registration::tcp(p.prog, ver.vers, addr),
            });
        }
    }
    v
}

/// Tells the port mappers (ours, or the system's) where we are; returns
/// the system rpcbind registration to undo at shutdown.
fn register(s: &ServerConfig, server: &Server, l: &Listeners) -> Option<rpcbind::Registered> {
    let mut regs: Vec<Registration> = l
        .nfs_addrs()
        .iter()
        .flat_map(|a| registrations_for(*a, &nfs_programs(s), false))
        .collect();
    for a in l.lock_udp_addrs() {
        regs.extend(registrations_for(a, &lock_programs(s), true));
    }
    if s.portmap {
        for a in l.portmap_addrs() {
            regs.extend(registrations_for(a, &[&PORTMAP], false));
        }
        for a in l.portmap_udp_addrs() {
            regs.extend(registrations_for(a, &[&PORTMAP], true));
        }
        portmap::set_registrations(server, regs);
        None
    } else if s.register_rpcbind {
        rpcbind::register(&rpcbind::default_endpoints(), &regs)
    } else {
        None
    }
}

/// A started server.
pub struct Running {
    /// The configuration in force (its exports: the last one applied).
    cfg: Config,
    server: Arc<Server>,
    opener: live::Opener,
    listeners: Listeners,
    admin: AdminSocket,
    metrics: Option<MetricsServer>,
    rpcbind: Option<rpcbind::Registered>,
}

impl Running {
    pub fn server(&self) -> &Arc<Server> {
        &self.server
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The addresses NFS answers on (the port chosen for port 0).
    pub fn nfs_addrs(&self) -> Vec<SocketAddr> {
        self.listeners.nfs_addrs()
    }

    /// "serving N export(s)", for the service manager's status.
    pub fn status(&self) -> String {
        format!("serving {} export(s)", self.server.exports().len())
    }

    /// Writes the start line (what is served where) and the first-run
    /// notes (`advice`).
    pub fn announce(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let s = &self.cfg.server;
        let paths: Vec<String> = self
            .server
            .exports()
            .iter()
            .map(|e| e.path.clone())
            .collect();
        let mut what = String::from("nfs v3, mount v3");
        if s.nfs4 {
            what.push_str(match s.nfs4_minor2 {
                true => ", nfs v4.1 and v4.2",
                false => ", nfs v4.1",
            });
        }
        if s.portmap {
            let l = &self.listeners;
            what.push_str(&format!(", portmap on {}", list(&l.portmap_addrs())));
            if !l.portmap_udp_addrs().is_empty() {
                what.push_str(" (and UDP)");
            }
        }
        what.push_str(&format!(
            ", stats {} at {}",
            s.stats,
            self.admin.path().display()
        ));
        if let Some(m) = &self.metrics {
            what.push_str(&format!(", metrics on http://{}/metrics", m.local_addr()));
        }
        let served = match paths.is_empty() {
            true => "nothing yet".to_owned(),
            false => paths.join(", "),
        };
        let bound = self.nfs_addrs();
        writeln!(out, "rnfsd: serving {served} on {} ({what})", list(&bound))?;
        for n in first_run_notes(&self.server, &bound) {
            writeln!(out, "rnfsd: note: {n}")?;
        }
        out.flush()
    }

    /// SIGHUP: puts `new`'s exports in force (added, removed, reopened or
    /// given new client options, connections kept; see `live`), or logs
    /// why not. The exports in force become `new`'s when that worked.
    pub fn reload(&mut self, new: Result<Config, ConfigError>) {
        let cfg = match new {
            Ok(c) => {
                for w in &c.warnings {
                    tracing::warn!("SIGHUP: {w}");
                }
                c
            }
            Err(e) => {
                tracing::error!("SIGHUP: configuration not reloaded: {e}");
                return;
            }
        };
        match live::apply(&self.server, &self.cfg, &cfg, &self.opener) {
            Ok(changes) => {
                for c in &changes {
                    tracing::info!("SIGHUP: {c}");
                }
                self.cfg.exports = cfg.exports;
                tracing::info!(
                    exports = self.server.exports().len(),
                    changes = changes.len(),
                    "SIGHUP: configuration reloaded"
                );
            }
            Err(e) => tracing::error!("SIGHUP: configuration not reloaded, nothing changed: {e}"),
        }
    }

    /// Unregisters, stops the listeners (in-flight calls finish, replies
    /// flush), then the backends, metrics and the admin socket.
    pub fn shutdown(mut self) {
        if let Some(r) = &self.rpcbind {
            r.unregister();
        }
        self.listeners.shutdown();
        // The hosts file is written in the background: all of it before
        // exit, so a restart tells every client.
        if let Some(m) = self.server.locks() {
            if !m.sync_hosts(Duration::from_secs(5)) {
                tracing::warn!("lock manager: hosts file not written in 5 s at shutdown");
            }
        }
        for e in self.server.exports().iter() {
            e.backend.shutdown();
        }
        if let Some(m) = &mut self.metrics {
            m.shutdown();
        }
        self.admin.shutdown();
    }
}

/// `advice::notes` for the exports in force.
fn first_run_notes(server: &Server, listen: &[SocketAddr]) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let euid = rustix::process::geteuid().as_raw();
    let exports = server.exports();
    let access: Vec<_> = exports.iter().map(|e| e.access()).collect();
    let facts: Vec<crate::advice::ExportFacts<'_>> = exports
        .iter()
        .zip(&access)
        .filter_map(|(e, a)| {
            let m = std::fs::metadata(&e.path).ok()?;
            Some(crate::advice::ExportFacts {
                path: &e.path,
                owner: m.uid(),
                mode: m.mode(),
                access: a,
            })
        })
        .collect();
    crate::advice::notes(euid, listen, &facts)
}

/// Writes `port` to `path` atomically (temp file + rename) so a harness
/// polling for it never reads a partial number.
pub fn write_port_file(path: &Path, port: u16) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, format!("{port}\n"))?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ExportConfig;
    use rnfsd_proto::rpc::{AcceptStat, CallHeader, OpaqueAuth, ReplyHeader};
    use rnfsd_xdr::{Dec, Enc};
    use std::io::Read;
    use std::net::TcpStream;

    /// NFS NULL over `s`; the reply's xid and accept status.
    fn null_call(s: &mut TcpStream, xid: u32) -> (u32, AcceptStat) {
        let mut e = Enc::new();
        e.u32(0);
        CallHeader {
            xid,
            rpcvers: 2,
            prog: rnfsd_proto::nfs3::NFS_PROGRAM,
            vers: 3,
            proc_: 0,
            cred: OpaqueAuth::NONE,
            verf: OpaqueAuth::NONE,
        }
        .encode(&mut e);
        let n = e.len() as u32 - 4;
        e.patch_u32(0, 0x8000_0000 | n);
        s.write_all(e.as_slice()).unwrap();
        let mut mark = [0u8; 4];
        s.read_exact(&mut mark).unwrap();
        let mut rec = vec![0; (u32::from_be_bytes(mark) & 0x7fff_ffff) as usize];
        s.read_exact(&mut rec).unwrap();
        match ReplyHeader::decode(&mut Dec::new(&rec)).unwrap() {
            (x, ReplyHeader::Accepted(stat)) => (x, stat),
            (_, h) => panic!("{h:?}"),
        }
    }

    /// Put together in this process, a server answers on the port it bound,
    /// says what it serves, takes a reload, and stops.
    #[test]
    fn builds_serves_reloads_and_stops() {
        let dir = tempfile::tempdir().unwrap();
        let export = dir.path().join("e");
        std::fs::create_dir(&export).unwrap();
        let mut cfg = Config::default();
        let s = &mut cfg.server;
        s.listen = vec!["127.0.0.1:0".parse().unwrap()];
        s.state_dir = Some(dir.path().join("state"));
        s.register_rpcbind = false;
        (s.event_threads, s.threads, s.blocking_threads) = (1, Some(2), 2);
        cfg.exports.push(ExportConfig::new(&export));

        let mut running = ServerBuilder::new(cfg.clone()).unwrap().start().unwrap();
        let addr = running.nfs_addrs()[0];
        assert_ne!(addr.port(), 0);
        let mut c = TcpStream::connect(addr).unwrap();
        assert_eq!(null_call(&mut c, 7), (7, AcceptStat::Success));

        let mut out = Vec::new();
        running.announce(&mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        let want = format!(
            "rnfsd: serving {} on {addr} (",
            export.canonicalize().unwrap().display()
        );
        assert!(out.starts_with(&want), "{out}");
        assert_eq!(running.status(), "serving 1 export(s)");

        let mut none = cfg.clone();
        none.exports.clear();
        running.reload(Ok(none));
        assert_eq!(running.status(), "serving 0 export(s)");
        running.reload(Err(ConfigError("bad".into())));
        assert_eq!(running.status(), "serving 0 export(s)");

        running.shutdown();
        assert!(TcpStream::connect(addr).is_err(), "still listening");
        assert!(!dir.path().join("state/admin.sock").exists());
    }

    #[test]
    fn errors_have_the_exit_status_of_their_kind() {
        let mut cfg = Config::default();
        cfg.exports
            .push(ExportConfig::new("/nonexistent/rnfsd-export"));
        let e = ServerBuilder::new(cfg).err().unwrap();
        assert!(matches!(e, Error::Config(_)), "{e:?}");
        assert_eq!(e.exit_code(), 2);
        assert_eq!(Error::Runtime(String::new()).exit_code(), 1);
    }
}
