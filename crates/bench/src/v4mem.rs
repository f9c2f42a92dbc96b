//! `v4-memory`: what NFSv4.1 state costs a server in memory, read from its
//! resident set (VmRSS) as the state grows: per idle client (EXCHANGE_ID
//! and CREATE_SESSION on a connection of its own, as each client host has)
//! beside per bare connection, and per open file (an open stateid of one
//! owner). Each step's figure is the growth over the step divided by its
//! count, so allocator slack is spread over thousands.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use rnfsd_client::nfs4::*;
use rnfsd_client::{Auth, Client, ClientConfig, Nfs4Client, Nfs4Config, Nfs4Rpc};

use crate::proc_cost::rss_kib;
use crate::workload::WALK_MAX_TIME;

/// Clients at most (each a connection: the bench's and the server's
/// descriptors are bounded by the open-files limit).
const MAX_CLIENTS: usize = 8_000;
/// Opens at most (below the server's default stateids per client).
const MAX_OPENS: usize = 16_000;
/// Slots per session, as the Linux client asks for (its
/// `max_session_slots` default).
const LINUX_SLOTS: u32 = 64;

#[derive(clap::Args, Debug)]
pub struct MemArgs {
    /// Server address (NFSv4.1 on it).
    #[arg(long, default_value = "127.0.0.1:2049")]
    pub addr: SocketAddr,
    /// The export's path from the server's root (its pseudo file system).
    #[arg(long)]
    pub export: String,
    /// PID of the server on this machine (its VmRSS is read).
    #[arg(long)]
    pub server_pid: u32,
    /// Idle clients to make.
    #[arg(long, default_value_t = 1_000)]
    pub clients: usize,
    /// Files of the export's tree to keep open at once (regular files).
    #[arg(long, default_value_t = 10_000)]
    pub opens: usize,
    /// Series name (e.g. rnfsd, ganesha).
    #[arg(long, default_value = "server")]
    pub label: String,
    /// Append one JSON object with the figures to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

fn config() -> ClientConfig {
    ClientConfig {
        auth: Auth::unix(0, 0),
        connections: 1,
        ..ClientConfig::default()
    }
}

/// The server's VmRSS in bytes, after a moment for replies to settle.
async fn rss(pid: u32) -> Result<u64, String> {
    tokio::time::sleep(Duration::from_millis(300)).await;
    rss_kib(pid)
        .map(|k| k * 1024)
        .ok_or_else(|| format!("no VmRSS for process {pid}"))
}

/// An error of `what`, for `map_err`.
fn why(what: &'static str) -> impl Fn(rnfsd_client::ClientError) -> String {
    move |e| format!("{what}: {e}")
}

fn per(grew: u64, before: u64, n: usize) -> f64 {
    grew.saturating_sub(before) as f64 / n.max(1) as f64
}

pub async fn mem_cmd(a: MemArgs) -> Result<(), String> {
    let n = a.clients.clamp(1, MAX_CLIENTS);
    let m = a.opens.clamp(1, MAX_OPENS);

    // Bare connections, each having made one call (the server's buffers
    // for it exist).
    let base = rss(a.server_pid).await?;
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        let c = Client::connect(a.addr, &config())
            .await
            .map_err(why("connect"))?;
        Nfs4Rpc::new(c.clone()).null().await.map_err(why("NULL"))?;
        conns.push(c);
    }
    let with_conns = rss(a.server_pid).await?;

    // A client and a session on each, then idle.
    let v4 = Nfs4Config {
        slots: LINUX_SLOTS,
        ..Nfs4Config::default()
    };
    let mut clients = Vec::with_capacity(n);
    for c in conns {
        clients.push(
            Nfs4Client::establish(c, &v4)
                .await
                .map_err(why("EXCHANGE_ID and CREATE_SESSION"))?,
        );
    }
    let with_clients = rss(a.server_pid).await?;

    // Open files: first every file opened and closed once (the caches the
    // OPEN path fills, filled), then opened and kept.
    let c = clients.first().ok_or("no client")?;
    let root = c.lookup_path(&a.export).await.map_err(why("LOOKUP"))?;
    let files = walk_files(c, &root, m).await?;
    if files.len() < m {
        eprintln!("only {} regular files under the export", files.len());
    }
    open_each(c, &files, false).await?;
    let warm = rss(a.server_pid).await?;
    let held = open_each(c, &files, true).await?;
    let with_opens = rss(a.server_pid).await?;
    for o in &held {
        let _ = c.close(&o.fh, &o.stateid).await;
    }
    for c in &clients {
        let _ = c.shutdown().await;
    }

    let per_conn = per(with_conns, base, n);
    let per_client = per(with_clients, with_conns, n);
    let per_open = per(with_opens, warm, held.len());
    println!(
        "{:<12} {:>8} {:>14} {:>16} {:>8} {:>14}",
        "config", "clients", "B/connection", "B/idle client", "opens", "B/open file"
    );
    println!(
        "{:<12} {:>8} {:>14.0} {:>16.0} {:>8} {:>14.0}",
        a.label,
        n,
        per_conn,
        per_client,
        held.len(),
        per_open
    );
    if let Some(path) = &a.json {
        use std::io::Write;
        let row = serde_json::json!({
            "label": a.label,
            "workload": "v4-memory",
            "clients": n,
            "opens": held.len(),
            "slots": LINUX_SLOTS,
            "rss_base": base,
            "rss_connections": with_conns,
            "rss_clients": with_clients,
            "rss_warm": warm,
            "rss_opens": with_opens,
            "bytes_per_connection": per_conn,
            "bytes_per_idle_client": per_client,
            "bytes_per_open": per_open,
        });
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        writeln!(f, "{row}").map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// Each file opened for reading (by one owner), in turn; kept open, or
/// closed at once (at most one open at a time: what the pass fills is the
/// caches, not open state).
async fn open_each(
    c: &Nfs4Client,
    files: &[(NfsFh4, Vec<u8>)],
    keep: bool,
) -> Result<Vec<Opened>, String> {
    let mut out = Vec::with_capacity(if keep { files.len() } else { 0 });
    for (dir, name) in files {
        let o = c
            .open(dir, &OpenArgs::read(name.clone()))
            .await
            .map_err(why("OPEN"))?;
        match keep {
            true => out.push(o),
            false => c
                .close(&o.fh, &o.stateid)
                .await
                .map(drop)
                .map_err(why("CLOSE"))?,
        }
    }
    Ok(out)
}

/// Up to `m` regular files under `root` (directory handle and name).
async fn walk_files(
    c: &Nfs4Client,
    root: &NfsFh4,
    m: usize,
) -> Result<Vec<(NfsFh4, Vec<u8>)>, String> {
    let items = crate::v41::walk(c, root, m * 2 + 64, WALK_MAX_TIME)
        .await
        .map_err(|e| format!("walking the tree: {e}"))?;
    Ok(items
        .into_iter()
        .filter(|i| i.ftype == Some(NfsFtype4::Reg))
        .take(m)
        .map(|i| (i.dir, i.name))
        .collect())
}
