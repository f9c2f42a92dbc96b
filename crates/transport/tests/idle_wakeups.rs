//! An idle server sleeps: its event loops make no wakeups while they have
//! no connection, or only connections far from their idle timeout.
//!
//! A test binary of its own: the loops are found by their thread names in
//! /proc/self/task, so no other server may run in this process.

use rnfsd_pool::Threads;
use rnfsd_transport::{
    reply_buffer, PoolConfig, Reply, Request, Service, Transport, TransportConfig,
};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Echoes every record.
struct Echo;

impl Service for Echo {
    fn call(&self, req: Request) -> Option<Reply> {
        let mut v = reply_buffer(req.data.len());
        v.extend_from_slice(&req.data);
        Some(Reply::from(v))
    }
}

/// Voluntary context switches of this process's event loop threads.
fn loop_switches() -> u64 {
    let mut n = 0;
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("rnfsd-evloop") {
            continue;
        }
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        n += status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    n
}

/// The loops' switches over `d` (they sweep every second at most).
fn switches_over(d: Duration) -> u64 {
    let before = loop_switches();
    std::thread::sleep(d);
    loop_switches() - before
}

#[test]
fn idle_loops_make_no_wakeups() {
    let cfg = TransportConfig {
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        event_threads: 2,
        ..TransportConfig::default()
    };
    let pool = PoolConfig {
        threads: Threads::Fixed(1),
        ..PoolConfig::default()
    };
    let h = Transport::start(cfg, pool, std::sync::Arc::new(Echo)).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // No connection: nothing to sweep. Two loops with a 1 s tick made 5
    // or more in 2.5 s.
    let none = switches_over(Duration::from_millis(2500));
    assert!(none <= 1, "{none} wakeups with no connection");
    // One connection, used once, 6 minutes from its idle timeout.
    let mut s = TcpStream::connect(h.local_addrs()[0]).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = b"ping0000".to_vec();
    let mut rec = (0x8000_0000u32 | body.len() as u32).to_be_bytes().to_vec();
    rec.extend_from_slice(&body);
    s.write_all(&rec).unwrap();
    let mut back = vec![0u8; rec.len()];
    s.read_exact(&mut back).unwrap();
    assert_eq!(back, rec);
    std::thread::sleep(Duration::from_millis(200));
    let one = switches_over(Duration::from_millis(2500));
    assert!(one <= 1, "{one} wakeups with one idle connection");
    drop(s);
    h.shutdown();
}
