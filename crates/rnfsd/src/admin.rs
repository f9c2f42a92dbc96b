//! The local admin socket: a Unix stream socket, owner-only (0600), with a
//! one-line protocol. A client sends one command line and reads the answer
//! until the server closes:
//!
//! - `snapshot`: every counter as one JSON object (`rnfsd_stats::Snapshot`)
//! - `prometheus`: the Prometheus text exposition
//! - `raw`: /proc/net/rpc/nfsd-style lines
//! - `report`: the nfsstat-like report
//! - `reset`: zero the counters; answers `ok`
//! - `exports`: what is exported now, as `exportfs -v` prints it
//! - `help`: this list
//!
//! Bounds: command lines of 256 bytes, 5 s to send one, 4 clients at once
//! (more are answered `error: busy`).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rnfsd_stats::{format, Registry};

use crate::endpoint::{linger_close, spawn_accept_loop, AcceptLoop};

/// The socket's name in the state directory when not configured.
pub const DEFAULT_NAME: &str = "admin.sock";
const MAX_LINE: u64 = 256;
const IO_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_CLIENTS: usize = 4;

const HELP: &str = "commands: snapshot | prometheus | raw | report | reset | exports | help\n";

/// What the socket reads from the server: its counters and a view of the
/// exports in force.
#[derive(Clone)]
pub struct Sources {
    pub stats: Arc<Registry>,
    pub exports: Arc<dyn Fn() -> String + Send + Sync>,
}

/// The answer to one command line.
pub fn answer(cmd: &str, src: &Sources) -> String {
    let stats = &src.stats;
    match cmd.trim() {
        "exports" => (src.exports)(),
        "snapshot" => {
            let mut s = stats.snapshot().to_json();
            s.push('\n');
            s
        }
        "prometheus" => format::prometheus(&stats.snapshot()),
        "raw" => format::raw(&stats.snapshot()),
        "report" => format::report(&stats.snapshot()),
        "reset" => {
            stats.reset();
            tracing::info!("statistics reset through the admin socket");
            "ok\n".to_owned()
        }
        "help" | "" => HELP.to_owned(),
        other => format!(
            "error: unknown command {:?}; {HELP}",
            other.chars().take(40).collect::<String>()
        ),
    }
}

/// The running admin socket; `shutdown` (or drop) stops it and removes the
/// socket file.
pub struct AdminSocket {
    path: PathBuf,
    accept: Option<AcceptLoop>,
}

/// Bind `path` with no permission for group or others from the first
/// instant: the umask is narrowed around bind(2) (the process is still
/// single-threaded when main calls this), then the mode is set explicitly.
fn bind_private(path: &Path) -> io::Result<UnixListener> {
    use rustix::{fs::Mode, process::umask};
    let old = umask(Mode::from_raw_mode(0o177));
    let l = UnixListener::bind(path);
    umask(old);
    let l = l?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(l)
}

impl AdminSocket {
    pub fn start(path: &Path, src: Sources) -> io::Result<AdminSocket> {
        if path.exists() {
            // A live server answers; a stale file from a crash does not.
            if UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("{} is in use by a running server", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        let l = bind_private(path)?;
        let clients = Arc::new(AtomicUsize::new(0));
        let accept = spawn_accept_loop(
            "rnfsd-admin",
            l.try_clone()?.into(),
            move || l.accept().map(|(c, _)| c),
            move |mut c: UnixStream| {
                if clients.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
                    clients.fetch_sub(1, Ordering::AcqRel);
                    let _ = c.set_write_timeout(Some(IO_TIMEOUT));
                    let _ = c.write_all(b"error: busy\n");
                    return;
                }
                let (st, cl) = (src.clone(), clients.clone());
                let spawned = std::thread::Builder::new()
                    .name("rnfsd-admin-client".into())
                    .spawn(move || {
                        if let Err(e) = serve_one(c, &st) {
                            tracing::debug!("admin client: {e}");
                        }
                        cl.fetch_sub(1, Ordering::AcqRel);
                    });
                if let Err(e) = spawned {
                    clients.fetch_sub(1, Ordering::AcqRel);
                    tracing::warn!("admin socket: cannot start a client thread: {e}");
                }
            },
        )?;
        Ok(AdminSocket {
            path: path.to_owned(),
            accept: Some(accept),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn shutdown(&mut self) {
        if let Some(mut a) = self.accept.take() {
            a.stop();
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for AdminSocket {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn serve_one(c: UnixStream, src: &Sources) -> io::Result<()> {
    c.set_read_timeout(Some(IO_TIMEOUT))?;
    c.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new((&c).take(MAX_LINE)).read_line(&mut line)?;
    let mut w = &c;
    w.write_all(answer(&line, src).as_bytes())?;
    w.flush()?;
    linger_close(&c)
}

/// Send one command to the admin socket at `path` and return the answer.
pub fn query(path: &Path, cmd: &str) -> io::Result<String> {
    let mut c = UnixStream::connect(path)?;
    c.set_read_timeout(Some(Duration::from_secs(10)))?;
    c.set_write_timeout(Some(IO_TIMEOUT))?;
    c.write_all(cmd.as_bytes())?;
    c.write_all(b"\n")?;
    c.shutdown(std::net::Shutdown::Write)?;
    let mut s = String::new();
    // Bounded: a snapshot is well under a few MiB.
    (&mut c).take(64 << 20).read_to_string(&mut s)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::proc_descs;
    use crate::programs::nfs3::NFS3;
    use std::os::unix::fs::FileTypeExt;

    fn sources(reg: &Arc<Registry>) -> Sources {
        Sources {
            stats: reg.clone(),
            exports: Arc::new(|| "/srv/a\t<world>(ro)\n".to_owned()),
        }
    }

    /// A fresh directory, the socket's path in it, and a registry.
    fn fresh() -> (tempfile::TempDir, std::path::PathBuf, Arc<Registry>) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(DEFAULT_NAME);
        let reg = Arc::new(Registry::new(
            rnfsd_stats::Mode::Percore,
            proc_descs(&[&NFS3]),
        ));
        (d, p, reg)
    }

    #[test]
    fn socket_is_private_and_answers() {
        let (_d, p, reg) = fresh();
        let mut a = AdminSocket::start(&p, sources(&reg)).unwrap();
        let m = std::fs::metadata(&p).unwrap();
        assert!(m.file_type().is_socket());
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
        // A second server on the same path is refused.
        assert!(AdminSocket::start(&p, sources(&reg)).is_err());

        let s = rnfsd_stats::Snapshot::from_json(&query(&p, "snapshot").unwrap()).unwrap();
        assert_eq!(s.procs.len(), 22);
        assert!(query(&p, "prometheus")
            .unwrap()
            .contains("# TYPE rnfsd_rpc_calls_total counter"));
        assert!(query(&p, "raw").unwrap().contains("proc3 22 0"));
        assert_eq!(query(&p, "reset").unwrap(), "ok\n");
        assert_eq!(query(&p, "exports").unwrap(), "/srv/a\t<world>(ro)\n");
        assert!(query(&p, "bogus").unwrap().starts_with("error: unknown"));
        // An over-long line is cut at the bound, not buffered.
        assert!(query(&p, &"x".repeat(10_000))
            .unwrap()
            .starts_with("error: unknown"));
        a.shutdown();
        assert!(!p.exists(), "socket file removed");
        // A stale file (no server) is replaced.
        let stale = UnixListener::bind(&p).unwrap();
        drop(stale);
        let _a = AdminSocket::start(&p, sources(&reg)).unwrap();
        assert_eq!(query(&p, "help").unwrap(), HELP);
    }

    /// The socket file removed under a running server (its state
    /// directory deleted, /run cleaned): shutdown still ends the accept
    /// thread. It used to wake it by connecting to the path, and hung.
    #[test]
    fn shutdown_returns_when_the_socket_file_is_gone() {
        let (_d, p, reg) = fresh();
        let mut a = AdminSocket::start(&p, sources(&reg)).unwrap();
        assert_eq!(query(&p, "help").unwrap(), HELP);
        std::fs::remove_file(&p).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            a.shutdown();
            let _ = tx.send(());
        });
        assert!(
            rx.recv_timeout(std::time::Duration::from_secs(10)).is_ok(),
            "shutdown hung with the socket file gone"
        );
    }
}
