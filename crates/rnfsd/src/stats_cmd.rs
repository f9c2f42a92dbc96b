//! `rnfsd stats`: read a running server's counters through its admin socket.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use rnfsd_stats::{format, Snapshot};

use crate::admin;

/// Which running server to ask: its admin socket.
#[derive(Debug, Clone, Default, Args)]
pub struct AdminArgs {
    /// The server's admin socket. [default: STATE_DIR/admin.sock]
    #[arg(long, value_name = "PATH", conflicts_with = "state_dir")]
    pub socket: Option<PathBuf>,

    /// The server's state directory (its admin.sock is used).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

impl AdminArgs {
    pub fn socket_path(&self) -> PathBuf {
        if let Some(p) = &self.socket {
            return p.clone();
        }
        self.state_dir
            .clone()
            .unwrap_or_else(crate::keys::default_state_dir)
            .join(admin::DEFAULT_NAME)
    }

    /// The server's answer to `cmd`; its `error: ` answers are errors.
    pub fn ask(&self, cmd: &str) -> Result<String, String> {
        let p = self.socket_path();
        let a = admin::query(&p, cmd).map_err(|e| {
            format!(
                "admin socket {}: {e} (is rnfsd running? see --socket/--state-dir)",
                p.display()
            )
        })?;
        if let Some(e) = a.strip_prefix("error: ") {
            return Err(format!("server: {}", e.trim_end()));
        }
        Ok(a)
    }
}

#[derive(Debug, Clone, Default, Args)]
pub struct StatsArgs {
    #[command(flatten)]
    pub server: AdminArgs,

    /// Print /proc/net/rpc/nfsd-style lines (io, th, net, rpc, proc3).
    #[arg(long, conflicts_with_all = ["watch", "json", "prometheus"])]
    pub raw: bool,

    /// Print the JSON snapshot as the server sent it.
    #[arg(long, conflicts_with_all = ["watch", "prometheus"])]
    pub json: bool,

    /// Print the Prometheus text exposition.
    #[arg(long, conflicts_with = "watch")]
    pub prometheus: bool,

    /// Live view: rates and latencies per second, refreshed every second.
    #[arg(long)]
    pub watch: bool,

    /// With --watch: stop after N refreshes.
    #[arg(long, value_name = "N", requires = "watch")]
    pub count: Option<u64>,

    /// Zero the server's counters (then print nothing).
    #[arg(long, conflicts_with_all = ["raw", "json", "prometheus", "watch"])]
    pub reset: bool,
}

impl StatsArgs {
    pub fn socket_path(&self) -> PathBuf {
        self.server.socket_path()
    }
}

fn ask(args: &StatsArgs, cmd: &str) -> Result<String, String> {
    args.server.ask(cmd)
}

fn snapshot(args: &StatsArgs) -> Result<Snapshot, String> {
    Snapshot::from_json(&ask(args, "snapshot")?).map_err(|e| format!("bad snapshot: {e}"))
}

/// Run the command; output goes to `out`.
pub fn run(args: &StatsArgs, out: &mut dyn Write) -> Result<(), String> {
    let w = |out: &mut dyn Write, s: &str| out.write_all(s.as_bytes()).map_err(|e| e.to_string());
    if args.reset {
        ask(args, "reset")?;
        return Ok(());
    }
    if args.json {
        return w(out, &ask(args, "snapshot")?);
    }
    if args.prometheus {
        return w(out, &ask(args, "prometheus")?);
    }
    if args.raw {
        return w(out, &format::raw(&snapshot(args)?));
    }
    if !args.watch {
        return w(out, &format::report(&snapshot(args)?));
    }
    let clear = std::io::stdout().is_terminal();
    let mut prev = snapshot(args)?;
    let mut next = Instant::now();
    let mut n = 0u64;
    while args.count.is_none_or(|c| n < c) {
        next += Duration::from_secs(1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let cur = snapshot(args)?;
        let frame = format::watch_frame(&prev, &cur);
        if clear {
            w(out, "\x1b[H\x1b[2J")?;
        } else if n > 0 {
            w(out, "\n")?;
        }
        w(out, &frame)?;
        out.flush().map_err(|e| e.to_string())?;
        prev = cur;
        n += 1;
    }
    Ok(())
}
