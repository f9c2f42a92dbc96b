//! Connections to the server under test: mounting an export, and the
//! clients a measurement's streams call through (shared, or one
//! connection per stream with `--conns 0`).

use std::net::SocketAddr;

use rnfsd_client::nfs3::NfsFh3;
use rnfsd_client::{Auth, Client, ClientConfig, MountClient, NfsClient, MAX_CONNECTIONS};

/// A mounted session: a client with `conns` connections (one for the MNT and
/// the walk when `conns` is 0) and the export root.
pub struct Session {
    pub nfs: NfsClient,
    pub root: NfsFh3,
    pub addr: SocketAddr,
    /// As asked: 0 means a connection per stream, opened per measurement.
    pub conns: usize,
}

pub async fn connect(
    addr: SocketAddr,
    mount_addr: Option<SocketAddr>,
    export: &str,
    conns: usize,
) -> Result<Session, String> {
    let (client, _mnt, root) = mount(addr, mount_addr, export, conns).await?;
    Ok(Session {
        nfs: NfsClient::new(client),
        root,
        addr,
        conns,
    })
}

/// Most streams `--conns 0` opens a connection for: a bound on the bench's
/// sockets, well under the servers' connection limits (rnfsd: 1,024).
pub const MAX_PER_STREAM_CONNS: usize = 512;

/// The root credential every bench connection calls with.
pub(crate) fn bench_config(conns: usize) -> ClientConfig {
    ClientConfig {
        auth: Auth::unix(0, 0),
        connections: conns.clamp(1, MAX_CONNECTIONS),
        ..ClientConfig::default()
    }
}

/// The clients a measurement's streams call through: `shared`, or with
/// `--conns 0` (`conns` 0) one client of one connection per stream, opened
/// now (not timed). Stream `s` calls through `stream_client(clients, s)`.
pub(crate) async fn stream_clients(
    addr: SocketAddr,
    conns: usize,
    shared: &NfsClient,
    streams: usize,
) -> Result<Vec<NfsClient>, String> {
    if conns == 0 {
        per_stream_clients(addr, streams).await
    } else {
        Ok(vec![shared.clone()])
    }
}

/// Stream `s`'s client among `clients` (`stream_clients`): the shared one,
/// or the stream's own.
pub(crate) fn stream_client(clients: &[NfsClient], s: usize) -> Option<&NfsClient> {
    clients.get(s % clients.len().max(1))
}

/// One client of one connection per stream (`--conns 0`). The library's
/// `Client` spreads calls round-robin over its connections, so a stream
/// keeps to its own connection only through a client of its own.
pub(crate) async fn per_stream_clients(
    addr: SocketAddr,
    streams: usize,
) -> Result<Vec<NfsClient>, String> {
    check_streams(0, streams)?;
    let cfg = bench_config(1);
    let mut v = Vec::with_capacity(streams);
    for _ in 0..streams {
        let c = Client::connect(addr, &cfg).await.map_err(|e| {
            format!(
                "connect {addr} (connection {} of {streams}): {e}",
                v.len() + 1
            )
        })?;
        v.push(NfsClient::new(c));
    }
    Ok(v)
}

/// `--conns 0` opens one connection per stream, up to a bound.
pub fn check_streams(conns: usize, streams: usize) -> Result<(), String> {
    if conns == 0 && streams > MAX_PER_STREAM_CONNS {
        return Err(format!(
            "--conns 0 opens a connection per stream: at most {MAX_PER_STREAM_CONNS} streams"
        ));
    }
    Ok(())
}

/// Connections a measurement uses: `streams` with `--conns 0`, else the
/// shared client's (clamped to the library's bound).
pub fn actual_conns(conns: usize, streams: usize) -> usize {
    if conns == 0 {
        streams
    } else {
        conns.min(MAX_CONNECTIONS)
    }
}

/// Connect `conns` connections to `addr` as root and MNT `export`, on
/// `mount_addr` when MOUNT has a port of its own (nfs-ganesha), else on
/// the NFS connections. Returns the NFS client, the MOUNT client and the
/// export's root handle.
pub async fn mount(
    addr: SocketAddr,
    mount_addr: Option<SocketAddr>,
    export: &str,
    conns: usize,
) -> Result<(Client, Client, NfsFh3), String> {
    let cfg = bench_config(conns);
    let client = Client::connect(addr, &cfg)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    let mnt_client = match mount_addr {
        None => client.clone(),
        Some(m) => Client::connect(
            m,
            &ClientConfig {
                connections: 1,
                ..cfg.clone()
            },
        )
        .await
        .map_err(|e| format!("connect {m}: {e}"))?,
    };
    let root = MountClient::new(mnt_client.clone())
        .mnt(export)
        .await
        .map_err(|e| format!("MNT {export}: {e}"))?;
    Ok((client, mnt_client, NfsFh3::new(root.fhandle)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conns_zero_is_one_per_stream_and_bounded() {
        assert_eq!(actual_conns(0, 16), 16);
        assert_eq!(actual_conns(1, 64), 1);
        assert_eq!(actual_conns(4, 1), 4);
        assert_eq!(actual_conns(1000, 1), MAX_CONNECTIONS);
        assert!(check_streams(0, 256).is_ok());
        assert!(check_streams(0, MAX_PER_STREAM_CONNS + 1).is_err());
        assert!(check_streams(1, 100_000).is_ok());
    }
}
