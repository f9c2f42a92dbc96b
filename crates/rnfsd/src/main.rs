//! rnfsd: export local directories over NFSv3/TCP. The process around
//! the server (`rnfsd::serve`): subcommands, logging, the open-files
//! limit, privileges, signals and systemd's notifications.

use std::process::ExitCode;

use clap::Parser;
use sd_notify::NotifyState;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use rnfsd::cli::{Cli, Command, ServeArgs};
use rnfsd::serve::{Error, ServerBuilder};

fn main() -> ExitCode {
    let runtime = |e: &dyn std::fmt::Display| Error::Runtime(e.to_string());
    let r = match Cli::parse().command {
        Command::CheckConfig { file } => {
            rnfsd::config::check(&file).map_err(|e| Error::Config(e.0))
        }
        Command::Stats(a) => rnfsd::stats_cmd::run(&a, &mut std::io::stdout().lock())
            .map(|()| String::new())
            .map_err(|e| runtime(&e)),
        Command::Exportfs(a) => a.ask("exports").map_err(|e| runtime(&e)),
        Command::GenerateDocs { out } => rnfsd::docs_gen::generate(&out)
            .map(|files| files.iter().map(|f| format!("{}\n", f.display())).collect())
            .map_err(|e| runtime(&format!("writing docs to {}: {e}", out.display()))),
        Command::Serve(args) => serve(&args).map(|()| String::new()),
    };
    match r {
        Ok(out) => {
            // Not for serve: its stdout may be a pipe its reader closed.
            if !out.is_empty() {
                print!("{out}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rnfsd: error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn init_logging(level: &str) -> Result<(), Error> {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var("RUST_LOG") {
        Ok(v) if !v.is_empty() => {
            EnvFilter::try_new(&v).map_err(|e| Error::Config(format!("RUST_LOG={v:?}: {e}")))?
        }
        _ => EnvFilter::try_new(level)
            .map_err(|e| Error::Config(format!("log level {level:?}: {e}")))?,
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
    let want = Rlimit {
        current: r.maximum,
        maximum: r.maximum,
    };
    match cur < max && setrlimit(Resource::Nofile, want).is_ok() {
        true => max,
        false => cur,
    }
}

fn serve(args: &ServeArgs) -> Result<(), Error> {
    // First, before any thread starts (they inherit the mask): the
    // signal of NFSv4 delegations' lease breaks, read by one thread
    // (`state/lease.rs`), would end the process in any other.
    rnfsd_fs::lease::block_signal()
        .map_err(|e| Error::Runtime(format!("blocking the lease break signal: {e}")))?;
    let cfg = args.to_config().map_err(|e| Error::Config(e.0))?;
    init_logging(&cfg.server.log_level)?;
    for w in &cfg.warnings {
        tracing::warn!("{w}");
    }
    // Before anything is announced, so a harness's early SIGTERM is a clean
    // shutdown rather than death by the default action.
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|e| Error::Runtime(format!("installing signal handlers: {e}")))?;
    let builder = ServerBuilder::new(cfg)?;
    let nofile = raise_nofile();
    // Before the first thread is started: they inherit what is left.
    let kept = rnfsd::privileges::drop_unneeded().map_err(Error::Runtime)?;
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
    let builder = builder.fd_budget(nofile)?.socket_activation(true);
    let mut running = builder.start()?;
    // Port file first: a harness that saw the start line may read it.
    if let (Some(p), Some(a)) = (&args.port_file, running.nfs_addrs().first()) {
        rnfsd::serve::write_port_file(p, a.port())
            .map_err(|e| Error::Runtime(format!("port file {}: {e}", p.display())))?;
    }
    let _ = running.announce(&mut std::io::stdout().lock());
    // systemd (Type=notify): listeners bound, handle key loaded, exports
    // open. Without NOTIFY_SOCKET this does nothing.
    notify(&[NotifyState::Ready, NotifyState::Status(&running.status())]);
    for sig in signals.forever() {
        if sig != SIGHUP {
            tracing::info!(signal = sig, "signal received");
            break;
        }
        let mut st = vec![NotifyState::Reloading];
        st.extend(NotifyState::monotonic_usec_now().ok());
        notify(&st);
        running.reload(args.to_config());
        notify(&[NotifyState::Ready, NotifyState::Status(&running.status())]);
    }
    notify(&[NotifyState::Stopping]);
    tracing::info!("shutting down");
    running.shutdown();
    tracing::info!("stopped");
    Ok(())
}

/// Tell the service manager (systemd's NOTIFY_SOCKET) our state; a failure
/// is logged, never fatal.
fn notify(state: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(state) {
        tracing::warn!("sd_notify: {e}");
    }
}
