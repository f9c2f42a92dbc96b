//! rnfsd: export local directories over NFSv3/TCP.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use rnfsd::cli::{Cli, Command, ServeArgs};
use rnfsd::config::{self, Config};
use rnfsd::programs::mount::MOUNT;
use rnfsd::programs::nfs3::NFS3;
use rnfsd::programs::nlm::NLM;
use rnfsd::programs::nsm::NSM;
use rnfsd::programs::portmap::{self, Registration, PORTMAP};
use rnfsd::rpc::dispatch::Policy;
use rnfsd::rpc::Program;
use rnfsd::service::RpcService;
use rnfsd::state::Server;
use rnfsd::{admin, keys, live, metrics, rpcbind};
use rnfsd_fs::cache::Caches;
use rnfsd_fs::WriteVerifier;

/// Exit status for a configuration or usage problem (as clap uses).
const EXIT_CONFIG: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::CheckConfig { file } => check_config(&file),
        Command::Stats(a) => match rnfsd::stats_cmd::run(&a, &mut std::io::stdout().lock()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("rnfsd: error: {e}");
                ExitCode::from(1)
            }
        },
        Command::Exportfs(a) => match a.ask("exports") {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("rnfsd: error: {e}");
                ExitCode::from(1)
            }
        },
        Command::GenerateDocs { out } => match rnfsd::docs_gen::generate(&out) {
            Ok(files) => {
                for f in files {
                    println!("{}", f.display());
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("rnfsd: error: writing docs to {}: {e}", out.display());
                ExitCode::from(1)
            }
        },
        Command::Serve(args) => match serve(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("rnfsd: error: {}", e.msg);
                ExitCode::from(e.code)
            }
        },
    }
}

struct Failure {
    msg: String,
    code: u8,
}

fn config_err(e: impl std::fmt::Display) -> Failure {
    Failure {
        msg: e.to_string(),
        code: EXIT_CONFIG,
    }
}

fn runtime_err(e: impl std::fmt::Display) -> Failure {
    Failure {
        msg: e.to_string(),
        code: 1,
    }
}

fn check_config(file: &Path) -> ExitCode {
    let r = Config::load(file)
        .and_then(|mut c| {
            c.add_exports_file(&rnfsd::exports::SystemResolver)
                .map(|()| c)
        })
        .and_then(|c| c.validate().map(|()| c))
        .and_then(|c| config::resolve_exports(&c.exports).map(|x| (c, x)));
    match r {
        Ok((c, exports)) => {
            println!(
                "{}: ok: {} export(s), listen {}",
                file.display(),
                exports.len(),
                list(&c.server.listen)
            );
            // resolve_exports keeps the order of c.exports.
            for (e, from) in exports.iter().zip(&c.exports) {
                match &from.origin {
                    Some(o) => println!("  {} (id {}, {o})", e.path.display(), e.id),
                    None => println!("  {} (id {})", e.path.display(), e.id),
                }
            }
            for w in &c.warnings {
                println!("warning: {w}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rnfsd: error: {e}");
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

fn list<T: std::fmt::Display>(v: &[T]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn init_logging(l: &str) -> Result<(), Failure> {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var("RUST_LOG") {
        Ok(v) if !v.is_empty() => {
            EnvFilter::try_new(&v).map_err(|e| config_err(format!("RUST_LOG={v:?}: {e}")))?
        }
        _ => EnvFilter::try_new(l).map_err(|e| config_err(format!("log level {l:?}: {e}")))?,
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    Ok(())
}

/// Raises the open-files soft limit to the hard limit (caches and
/// connections are sized from it) and returns it.
fn raise_nofile() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    // getrlimit(RLIMIT_NOFILE) cannot fail. None = RLIM_INFINITY.
    let r = getrlimit(Resource::Nofile);
    let (cur, max) = (
        r.current.unwrap_or(libc::RLIM_INFINITY),
        r.maximum.unwrap_or(libc::RLIM_INFINITY),
    );
    if cur < max {
        let want = Rlimit {
            current: r.maximum,
            maximum: r.maximum,
        };
        if setrlimit(Resource::Nofile, want).is_ok() {
            return max;
        }
    }
    cur
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

/// SIGHUP: re-read the configuration (and the exports file) and put its
/// exports in force: added, removed, reopened or given new client options,
/// with connections kept (see `live`). `running` becomes the new file's
/// exports when that worked.
fn reload(args: &ServeArgs, running: &mut Config, server: &Server, opener: &live::Opener) {
    let cfg = match args.to_config() {
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
    match live::apply(server, running, &cfg, opener) {
        Ok(changes) => {
            for c in &changes {
                tracing::info!("SIGHUP: {c}");
            }
            running.exports = cfg.exports;
            tracing::info!(
                exports = server.exports().len(),
                changes = changes.len(),
                "SIGHUP: configuration reloaded"
            );
        }
        Err(e) => tracing::error!("SIGHUP: configuration not reloaded, nothing changed: {e}"),
    }
}

/// Programs and versions we serve on `addr`, for the port mapper tables.
fn registrations_for(addr: SocketAddr, programs: &[&Program], udp: bool) -> Vec<Registration> {
    let mut v = Vec::new();
    for p in programs {
        for ver in p.versions {
            v.push(if udp {
                Registration::udp(p.prog, ver.vers, addr)
            } else {
                Registration::tcp(p.prog, ver.vers, addr)
            });
        }
    }
    v
}

/// Write the port to `path` atomically (temp file + rename) so a harness
/// polling for it never reads a partial number.
fn write_port_file(path: &Path, port: u16) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, format!("{port}\n"))?;
    std::fs::rename(&tmp, path)
}

fn serve(args: &ServeArgs) -> Result<(), Failure> {
    let cfg = args.to_config().map_err(config_err)?;
    init_logging(&cfg.server.log_level)?;
    for w in &cfg.warnings {
        tracing::warn!("{w}");
    }
    // Before anything is announced, so a harness's early SIGTERM is a clean
    // shutdown rather than death by the default action.
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|e| runtime_err(format!("installing signal handlers: {e}")))?;
    let exports = config::resolve_exports(&cfg.exports).map_err(config_err)?;
    let s = &cfg.server;

    let state_dir = s.state_dir.clone().unwrap_or_else(keys::default_state_dir);
    let key = keys::load_or_create_handle_key(&state_dir)
        .map_err(|e| runtime_err(format!("handle key in {}: {e}", state_dir.display())))?;

    let nofile = raise_nofile();
    // Before the first thread is started: they inherit what is left.
    let kept = rnfsd::privileges::drop_unneeded().map_err(runtime_err)?;
    let kept: Vec<String> = kept.iter().map(|c| c.to_string()).collect();
    tracing::info!(kept = %kept.join(","), "capabilities: all others dropped from every set; no_new_privs");
    let euid = rustix::process::geteuid().as_raw();
    if euid != 0 {
        tracing::warn!(
            uid = euid,
            "running unprivileged: every call is done as this user whatever uid the client \
             claims, so whoever can make calls (any local user, on an insecure export) gets \
             this user's access to the exports"
        );
    }
    let cache_fds = s.cache_fd_budget(nofile).map_err(config_err)?;
    let fd_table = presize_fd_table((cache_fds as u64 + s.fd_reserve()).min(nofile));
    tracing::info!(
        nofile,
        cache_fds,
        fd_table,
        "descriptor budget of the caches"
    );
    // The counters belong to the process, not to a configuration: a reload
    // keeps them.
    let stats = Arc::new(rnfsd_stats::Registry::new(
        s.stats,
        metrics::proc_descs(&[&NFS3, &MOUNT, &PORTMAP, &NLM, &NSM]),
    ));
    let opener = live::Opener {
        key,
        caches: Caches::new(cache_fds),
        verifier: Arc::new(WriteVerifier::new(keys::new_write_verifier())),
        stats: stats.clone(),
        head: format!(
            "{}:{}",
            host_name(),
            std::fs::canonicalize(&state_dir)
                .unwrap_or_else(|_| state_dir.clone())
                .display()
        ),
    };
    let mut opened = Vec::with_capacity(exports.len());
    for e in &exports {
        opened.push(opener.open(s, e).map_err(runtime_err)?);
    }
    if opened.is_empty() {
        tracing::warn!(
            "nothing is exported yet: add [[export]] tables or `exports = FILE` to the \
             configuration, then reload (SIGHUP)"
        );
    }
    let server = Arc::new(
        Server::new(
            Vec::new(),
            opener.verifier.clone(),
            s.max_io,
            // A pipe holds the largest READ's data.
            (s.splice_pipes > 0)
                .then(|| rnfsd_transport::PipePool::new(s.splice_pipes, s.max_io as usize)),
        )
        .with_inline_write_max(s.inline_write_max)
        .with_inline_write_alone_max(s.inline_write_alone_max)
        .with_inline_changes(s.inline_changes),
    );
    server.set_exports(opened);
    // The lock manager: hosts that took locks before a restart get a grace
    // period to reclaim them and a notice that we restarted.
    let mut restarted_hosts = None;
    if s.nlm {
        let dir = state_dir.join("nlm");
        let (hosts, before, state) = rnfsd_lockd::hosts::Hosts::load(&dir)
            .map_err(|e| runtime_err(format!("lock manager state in {}: {e}", dir.display())))?;
        let grace = (!before.is_empty()).then(|| Duration::from_secs(s.nlm_grace_secs));
        if let Some(g) = grace {
            tracing::info!(
                hosts = before.len(),
                secs = g.as_secs(),
                "lock manager: grace period for reclaims"
            );
        }
        let limits = config::lower::locks(s);
        let m = rnfsd_lockd::LockManager::with_hosts(limits, grace, Some(hosts), state);
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
        restarted_hosts = Some((before, state));
    }
    let policy = Policy {
        allow_auth_none: s.allow_auth_none,
    };
    // Before any thread that creates files exists (it narrows the umask).
    let admin_path = s
        .admin_socket
        .clone()
        .unwrap_or_else(|| state_dir.join(admin::DEFAULT_NAME));
    let view = server.clone();
    let sources = admin::Sources {
        stats: stats.clone(),
        exports: Arc::new(move || live::exportfs(&view)),
    };
    let mut admin = admin::AdminSocket::start(&admin_path, sources)
        .map_err(|e| runtime_err(format!("admin socket {}: {e}", admin_path.display())))?;
    let mut metrics_server = match s.metrics {
        Some(a) => Some(
            metrics::MetricsServer::start(a, stats.clone())
                .map_err(|e| runtime_err(format!("metrics on {a}: {e}")))?,
        ),
        None => None,
    };
    let drc = config::lower::drc(s).map(|c| Arc::new(rnfsd::drc::Drc::new(c)));
    // NLM and NSM share the NFS port (over TCP, and UDP below).
    let lock_programs: Vec<&'static Program> = if s.nlm { vec![&NLM, &NSM] } else { Vec::new() };
    let mut nfs_programs: Vec<&'static Program> = vec![&NFS3, &MOUNT];
    nfs_programs.extend(&lock_programs);
    let lock_service = (!lock_programs.is_empty() && s.udp).then(|| {
        Arc::new(
            RpcService::new(server.clone(), lock_programs.clone(), policy)
                .with_stats(stats.clone()),
        )
    });
    let nfs_service = Arc::new(
        RpcService::new(server.clone(), nfs_programs.clone(), policy)
            .with_stats(stats.clone())
            .with_drc(drc)
            .with_inline(rnfsd_fs::inline::Leave {
                misses: s.inline_misses,
                writes: s.inline_write_max > 0,
                changes: s.inline_changes,
            }),
    );
    let portmap_service =
        Arc::new(RpcService::new(server.clone(), vec![&PORTMAP], policy).with_stats(stats.clone()));

    // systemd socket activation: its sockets instead of `listen`.
    let activated = rnfsd::activation::listeners().map_err(config_err)?;
    if !activated.is_empty() {
        tracing::info!(
            sockets = activated.len(),
            "socket activation: serving on the service manager's sockets; server.listen is not used"
        );
    }
    let running = transport::start(&cfg, nfs_service, portmap_service, lock_service, activated)?;
    running.add_stats_sources(&stats);
    let bound = running.nfs_addrs();

    // Tell the port mappers (ours or the system's) where we are.
    let mut regs: Vec<Registration> = bound
        .iter()
        .flat_map(|a| registrations_for(*a, &nfs_programs, false))
        .collect();
    for a in running.lock_udp_addrs() {
        regs.extend(registrations_for(a, &lock_programs, true));
    }

    let mut rpcbind_reg = None;
    if s.portmap {
        for a in running.portmap_addrs() {
            for vers in PORTMAP.versions {
                regs.push(Registration::tcp(PORTMAP.prog, vers.vers, a));
            }
        }
        for a in running.portmap_udp_addrs() {
            for vers in PORTMAP.versions {
                regs.push(Registration::udp(PORTMAP.prog, vers.vers, a));
            }
        }
        portmap::set_registrations(&server, regs);
    } else if s.register_rpcbind {
        rpcbind_reg = rpcbind::register(&rpcbind::default_endpoints(), &regs);
    }
    // Once NLM can be found: clients told of our restart reclaim at once.
    if let Some((hosts, state)) = restarted_hosts {
        rnfsd::programs::nsm::notify_restart(hosts, state);
    }

    // Port file first: a harness that saw the start line may read it.
    if let (Some(p), Some(a)) = (&args.port_file, bound.first()) {
        write_port_file(p, a.port())
            .map_err(|e| runtime_err(format!("port file {}: {e}", p.display())))?;
    }

    let paths: Vec<String> = server.exports().iter().map(|e| e.path.clone()).collect();
    let mut what = String::from("nfs v3, mount v3");
    if s.portmap {
        what.push_str(&format!(", portmap on {}", list(&running.portmap_addrs())));
        if !running.portmap_udp_addrs().is_empty() {
            what.push_str(" (and UDP)");
        }
    }
    what.push_str(&format!(", stats {} at {}", s.stats, admin_path.display()));
    if let Some(m) = &metrics_server {
        what.push_str(&format!(", metrics on http://{}/metrics", m.local_addr()));
    }
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "rnfsd: serving {} on {} ({what})",
            if paths.is_empty() {
                "nothing yet".to_owned()
            } else {
                paths.join(", ")
            },
            list(&bound)
        );
        for n in first_run_notes(&server, &bound, euid) {
            let _ = writeln!(out, "rnfsd: note: {n}");
        }
        let _ = out.flush();
    }
    // systemd (Type=notify): listeners bound, handle key loaded, exports
    // open. Without NOTIFY_SOCKET this does nothing.
    notify(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status(&format!("serving {} export(s)", paths.len())),
    ]);
    let mut running_cfg = cfg.clone();
    wait_for_shutdown_signal(&mut signals, || {
        let mut st = vec![sd_notify::NotifyState::Reloading];
        st.extend(sd_notify::NotifyState::monotonic_usec_now().ok());
        notify(&st);
        reload(args, &mut running_cfg, &server, &opener);
        let status = format!("serving {} export(s)", server.exports().len());
        notify(&[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status(&status),
        ]);
    });
    notify(&[sd_notify::NotifyState::Stopping]);
    tracing::info!("shutting down");
    if let Some(r) = &rpcbind_reg {
        r.unregister();
    }
    running.shutdown();
    for e in server.exports().iter() {
        e.backend.shutdown();
    }
    if let Some(m) = &mut metrics_server {
        m.shutdown();
    }
    admin.shutdown();
    tracing::info!("stopped");
    Ok(())
}

/// `advice::notes` for the exports in force.
fn first_run_notes(server: &Server, listen: &[SocketAddr], euid: u32) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let exports = server.exports();
    let access: Vec<_> = exports.iter().map(|e| e.access()).collect();
    let facts: Vec<rnfsd::advice::ExportFacts<'_>> = exports
        .iter()
        .zip(&access)
        .filter_map(|(e, a)| {
            let m = std::fs::metadata(&e.path).ok()?;
            Some(rnfsd::advice::ExportFacts {
                path: &e.path,
                owner: m.uid(),
                mode: m.mode(),
                access: a,
            })
        })
        .collect();
    rnfsd::advice::notes(euid, listen, &facts)
}

/// Tell the service manager (systemd's NOTIFY_SOCKET) our state; a failure
/// is logged, never fatal.
fn notify(state: &[sd_notify::NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(state) {
        tracing::warn!("sd_notify: {e}");
    }
}

/// Block until SIGINT or SIGTERM; SIGHUP runs `on_hup` (configuration
/// reload).
fn wait_for_shutdown_signal(signals: &mut Signals, mut on_hup: impl FnMut()) {
    for sig in signals.forever() {
        match sig {
            SIGHUP => on_hup(),
            _ => {
                tracing::info!(signal = sig, "signal received");
                return;
            }
        }
    }
}

/// The transport glue: listeners, event loops and worker pools.
mod transport;

/// This host's name (uname), for naming this head's sessions.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}
