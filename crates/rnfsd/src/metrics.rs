//! The statistics registry's view of our program tables, and the opt-in
//! Prometheus endpoint: a small HTTP/1.1 responder for `GET /metrics` on
//! one std thread, one connection at a time, every read and write bounded
//! in size and time.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rnfsd_stats::{format, ProcDesc, Registry};

use crate::endpoint::{linger_close, spawn_accept_loop, AcceptLoop};
use crate::programs::Program;

/// One row per procedure of every version of `programs`, in table order.
pub fn proc_descs(programs: &[&'static Program]) -> Vec<ProcDesc> {
    let mut v = Vec::new();
    for p in programs {
        for ver in p.versions {
            for (i, pr) in ver.procs.iter().enumerate() {
                v.push(ProcDesc {
                    program: p.name,
                    prog: p.prog,
                    vers: ver.vers,
                    proc_: i as u32,
                    name: pr.name,
                });
            }
        }
    }
    v
}

/// Largest request head we read; a scraper's is a few hundred bytes.
const MAX_HEAD: usize = 8 * 1024;
/// A client gets this long to send its request and take the answer.
const IO_TIMEOUT: Duration = Duration::from_secs(2);

/// The running endpoint. `shutdown` (or drop) stops it.
pub struct MetricsServer {
    addr: SocketAddr,
    accept: AcceptLoop,
}

impl MetricsServer {
    pub fn start(addr: SocketAddr, stats: Arc<Registry>) -> io::Result<MetricsServer> {
        let l = TcpListener::bind(addr)?;
        let addr = l.local_addr()?;
        let accept = spawn_accept_loop(
            "rnfsd-metrics",
            l.try_clone()?.into(),
            move || l.accept().map(|(c, _)| c),
            move |c| {
                if let Err(e) = serve_one(c, &stats) {
                    tracing::debug!("metrics request: {e}");
                }
            },
        )?;
        Ok(MetricsServer { addr, accept })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn shutdown(&mut self) {
        self.accept.stop();
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Read up to the end of the request head (bounded), answer, close.
fn serve_one(mut c: TcpStream, stats: &Registry) -> io::Result<()> {
    c.set_read_timeout(Some(IO_TIMEOUT))?;
    c.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = c.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_HEAD {
            respond(
                &mut c,
                "431 Request Header Fields Too Large",
                "text/plain",
                "",
            )?;
            return linger_close(&c);
        }
    }
    let line = head
        .split(|&b| b == b'\r' || b == b'\n')
        .next()
        .unwrap_or(&[]);
    let mut parts = line.split(|&b| b == b' ');
    let (method, target) = (parts.next().unwrap_or(&[]), parts.next().unwrap_or(&[]));
    let path = target.split(|&b| b == b'?').next().unwrap_or(&[]);
    match (method, path) {
        (b"GET", b"/metrics") => respond(
            &mut c,
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            &format::prometheus(&stats.snapshot()),
        ),
        (b"GET", _) => respond(&mut c, "404 Not Found", "text/plain", "see /metrics\n"),
        _ => respond(&mut c, "405 Method Not Allowed", "text/plain", ""),
    }
}

fn respond(c: &mut TcpStream, status: &str, ctype: &str, body: &str) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes())?;
    c.write_all(body.as_bytes())?;
    c.flush()
}

/// A backend's counters as the statistics snapshot carries them.
/// `verifier_resets` is the server's (one verifier for every export).
pub fn export_counts(
    path: &str,
    b: &rnfsd_fs::BackendStats,
    verifier_resets: u64,
) -> rnfsd_stats::ExportCounts {
    rnfsd_stats::ExportCounts {
        path: path.to_owned(),
        caches: b
            .caches
            .iter()
            .map(|c| rnfsd_stats::CacheCounts {
                name: c.name.to_owned(),
                capacity: c.capacity,
                entries: c.counts.entries,
                hits: c.counts.hits,
                misses: c.counts.misses,
                inserts: c.counts.inserts,
                refused: c.counts.refused,
                evicted_inline: c.counts.evicted_inline,
                evicted_reclaim: c.counts.evicted_reclaim,
                removed: c.counts.removed,
            })
            .collect(),
        fds_cached: b.fds_cached,
        fd_limit: b.fd_limit,
        sync_requests: b.commits.requests,
        syncs: b.commits.syncs,
        sync_errors: b.commits.errors,
        syncs_peak_in_flight: b.commits.peak_in_flight,
        sync_requests_parked: b.commits.parked,
        syncs_led: b.commits.led,
        sync_writebacks_waited: b.commits.waited_before,
        flushes: b.flushes,
        write_behinds: b.write_behinds,
        write_behinds_on_loop: b.write_behinds_on_loop,
        scans_waited: b.scans_waited,
        scans_busy: b.scans_busy,
        scan_passes: b.scan_passes,
        calls_jukebox: b.calls_jukebox,
        stalls: b.stalls,
        verifier_resets,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::programs::{mount::MOUNT, nfs3::NFS3, portmap::PORTMAP};

    fn get(addr: SocketAddr, req: &str) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(req.as_bytes()).unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        s
    }

    #[test]
    fn descs_cover_every_table_row() {
        let d = proc_descs(&[&NFS3, &MOUNT, &PORTMAP]);
        let nfs: Vec<_> = d.iter().filter(|p| p.program == "nfs").collect();
        assert_eq!(nfs.len(), 22);
        assert_eq!(nfs[1].name, "GETATTR");
        assert_eq!(nfs[21].proc_, 21);
        // Registry::new checks rows are contiguous and start at 0.
        let r = Registry::new(rnfsd_stats::Mode::Percore, d);
        assert!(r.procs().len() > 22);
    }

    #[test]
    fn serves_metrics_and_refuses_the_rest() {
        let reg = Arc::new(Registry::new(
            rnfsd_stats::Mode::Percore,
            proc_descs(&[&NFS3]),
        ));
        let mut m = MetricsServer::start("127.0.0.1:0".parse().unwrap(), reg).unwrap();
        let a = m.local_addr();
        let r = get(a, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.contains("text/plain; version=0.0.4"));
        let body = &r[r.find("\r\n\r\n").unwrap() + 4..];
        let len: usize = r
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(body.len(), len);
        assert!(body.contains(
            "rnfsd_rpc_calls_total{program=\"nfs\",version=\"3\",procedure=\"GETATTR\"} 0"
        ));
        assert!(get(a, "GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get(a, "POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
        let big = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(10_000));
        assert!(get(a, &big).starts_with("HTTP/1.1 431"));
        m.shutdown();
        assert!(TcpStream::connect(a).is_err(), "listener closed");
    }
}
