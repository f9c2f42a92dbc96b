//! The back channel at the transport (RFC 8881 §2.10.3.1), over real TCP
//! on 127.0.0.1: a service keeps a connection's handle, sends records of
//! its own on it, and gets the records its plan routes `Route::Reply`
//! from the loop, uncounted as calls.
//!
//! Records start with a 4-byte tag: "BIND" (a pool call that keeps its
//! connection's handle and answers "BOUND" and the connection id),
//! "GATE" (waits until the test opens the gate, answers "GATED"), "QUIK"
//! (answered on the loop, with whether a handle was offered there),
//! "RPLY" (not a call: planned `Route::Reply`); anything else is echoed.

use rnfsd_pool::Threads;
use rnfsd_transport::{
    reply_buffer, ConnHandle, Handle, Inline, LoopCalls, Plan, PoolConfig, Reply, Request, Route,
    SendError, Service, Transport, TransportConfig,
};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

#[derive(Default)]
struct Toy {
    calls: AtomicUsize,
    handles: Mutex<Vec<ConnHandle>>,
    replies: Mutex<Vec<(u64, Vec<u8>)>>,
    gone: Mutex<Vec<u64>>,
    gate: (Mutex<bool>, Condvar),
    /// GATE calls past their gate.
    gated: AtomicUsize,
}

impl Toy {
    fn open_gate(&self) {
        *self.gate.0.lock().unwrap() = true;
        self.gate.1.notify_all();
    }

    fn handle(&self) -> ConnHandle {
        self.handles
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("a BIND ran")
    }

    fn replies(&self) -> Vec<(u64, Vec<u8>)> {
        self.replies.lock().unwrap().clone()
    }

    fn gone(&self) -> Vec<u64> {
        self.gone.lock().unwrap().clone()
    }
}

fn answer(parts: &[&[u8]]) -> Reply {
    let mut r = reply_buffer(64);
    for p in parts {
        r.extend_from_slice(p);
    }
    r.into()
}

struct ToyLoop;

impl LoopCalls for ToyLoop {
    fn call(&mut self, req: Request) -> Inline {
        let offered = if req.responder.conn().is_some() {
            b"Y"
        } else {
            b"N"
        };
        Inline::Done(Some(answer(&[b"QUIK", offered])))
    }
}

impl Service for Toy {
    fn plan(&self, record: &[u8]) -> Plan {
        let route = match record.get(..4) {
            Some(b"RPLY") => Route::Reply,
            Some(b"QUIK") => Route::Quick,
            _ => Route::Pool,
        };
        Plan {
            route,
            ..Plan::default()
        }
    }

    fn loop_calls(self: Arc<Self>) -> Option<Box<dyn LoopCalls>> {
        Some(Box::new(ToyLoop))
    }

    fn call(&self, req: Request) -> Option<Reply> {
        self.calls.fetch_add(1, SeqCst);
        match req.data.get(..4) {
            Some(b"BIND") => {
                let h = req.responder.conn().expect("a pool job's call has one");
                assert_eq!(h.id(), req.conn_id);
                self.handles.lock().unwrap().push(h);
                Some(answer(&[b"BOUND", &req.conn_id.to_be_bytes()]))
            }
            Some(b"GATE") => {
                let g = self.gate.0.lock().unwrap();
                let _g = self
                    .gate
                    .1
                    .wait_timeout_while(g, Duration::from_secs(10), |open| !*open)
                    .unwrap();
                self.gated.fetch_add(1, SeqCst);
                Some(answer(&[b"GATED"]))
            }
            _ => Some(answer(&[&req.data])),
        }
    }

    fn reply_received(&self, conn_id: u64, record: Vec<u8>) {
        self.replies.lock().unwrap().push((conn_id, record));
    }

    fn disconnected(&self, conn_id: u64) {
        self.gone.lock().unwrap().push(conn_id);
    }
}

struct Server {
    toy: Arc<Toy>,
    h: Handle,
}

fn server_with(cfg: TransportConfig) -> Server {
    let toy = Arc::new(Toy::default());
    let cfg = TransportConfig {
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        ..cfg
    };
    let pool = PoolConfig {
        threads: Threads::Fixed(4),
        ..PoolConfig::default()
    };
    let h = Transport::start(cfg, pool, toy.clone()).unwrap();
    Server { toy, h }
}

fn server() -> Server {
    server_with(TransportConfig::default())
}

fn record(body: &[u8]) -> Vec<u8> {
    let mut v = (0x8000_0000u32 | body.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(body);
    v
}

fn read_record(s: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut h = [0u8; 4];
    s.read_exact(&mut h)?;
    let v = u32::from_be_bytes(h);
    assert!(v & 0x8000_0000 != 0, "one fragment");
    let mut b = vec![0u8; (v & 0x7fff_ffff) as usize];
    s.read_exact(&mut b)?;
    Ok(b)
}

fn connect(sv: &Server) -> TcpStream {
    let s = TcpStream::connect(sv.h.local_addrs()[0]).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// A BIND call: the server keeps the handle; returns the connection id.
fn bind(s: &mut TcpStream) -> u64 {
    s.write_all(&record(b"BIND")).unwrap();
    let r = read_record(s).unwrap();
    assert_eq!(&r[..5], b"BOUND");
    u64::from_be_bytes(r[5..13].try_into().unwrap())
}

fn wait_until(what: &str, f: impl FnMut() -> bool) {
    wait_within(what, Duration::from_secs(10), f)
}

fn wait_within(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

fn body(b: &[u8]) -> Vec<u8> {
    let mut v = reply_buffer(b.len());
    v.extend_from_slice(b);
    v
}

#[test]
fn a_record_sent_on_a_connection_is_answered_on_it() {
    let sv = server();
    let mut s = connect(&sv);
    let id = bind(&mut s);
    let h = sv.toy.handle();
    assert_eq!(h.id(), id);
    assert!(h.is_open());
    // Sent from another thread than the call's.
    let h2 = h.clone();
    thread::spawn(move || h2.send(body(b"PING1")).unwrap())
        .join()
        .unwrap();
    assert_eq!(read_record(&mut s).unwrap(), b"PING1");
    s.write_all(&record(b"RPLY1")).unwrap();
    wait_until("the reply", || !sv.toy.replies().is_empty());
    assert_eq!(sv.toy.replies(), vec![(id, b"RPLY1".to_vec())]);
    // The connection serves calls as before; the reply was no call.
    s.write_all(&record(b"ECHO")).unwrap();
    assert_eq!(read_record(&mut s).unwrap(), b"ECHO");
    assert_eq!(sv.toy.calls.load(SeqCst), 2);
    let st = sv.h.stats();
    assert_eq!((st.back_calls_out, st.back_replies_in), (1, 1));
    assert_eq!(st.records_in, 3);
    assert!(sv.toy.gone().is_empty());
}

#[test]
fn calls_on_the_loop_are_offered_no_handle() {
    let sv = server();
    let mut s = connect(&sv);
    s.write_all(&record(b"QUIK")).unwrap();
    assert_eq!(read_record(&mut s).unwrap(), b"QUIKN");
    assert_eq!(sv.h.stats().records_inline, 1);
}

#[test]
fn replies_take_no_in_flight_place_nor_pool_slot() {
    let sv = server_with(TransportConfig {
        max_inflight_per_conn: 1,
        ..Default::default()
    });
    let mut s = connect(&sv);
    bind(&mut s);
    // One call holds the connection's only in-flight place; the REPLYs
    // read with it still go on.
    let mut burst = record(b"GATE");
    for i in 0..20u8 {
        burst.extend_from_slice(&record(&[b'R', b'P', b'L', b'Y', i]));
    }
    s.write_all(&burst).unwrap();
    // Well within the gate's own 10 s.
    wait_within("20 replies", Duration::from_secs(3), || {
        sv.toy.replies().len() == 20
    });
    let got: Vec<u8> = sv.toy.replies().iter().map(|(_, r)| r[4]).collect();
    assert_eq!(got, (0..20).collect::<Vec<u8>>(), "in order");
    // Only BIND and GATE run as calls, and the gate is still shut.
    wait_until("the gated call", || sv.toy.calls.load(SeqCst) == 2);
    assert_eq!(sv.toy.gated.load(SeqCst), 0);
    sv.toy.open_gate();
    assert_eq!(read_record(&mut s).unwrap(), b"GATED");
    // Nothing counted in flight is left behind: calls go on.
    for _ in 0..3 {
        s.write_all(&record(b"ECHO")).unwrap();
        assert_eq!(read_record(&mut s).unwrap(), b"ECHO");
    }
    assert_eq!(sv.h.pool_stats().jobs_run(), 5);
    assert_eq!(sv.h.stats().back_replies_in, 20);
}

#[test]
fn replies_interleaved_with_pipelined_calls() {
    let sv = server();
    let mut s = connect(&sv);
    let id = bind(&mut s);
    let h = sv.toy.handle();
    let mut r = s.try_clone().unwrap();
    // The server sends 100 records while the client pipelines 100 calls,
    // each followed by its answer to the record it got last.
    let sender = thread::spawn(move || {
        for i in 0..100u32 {
            h.send(body(&[b"PING".as_slice(), &i.to_be_bytes()].concat()))
                .unwrap();
        }
    });
    let reader = thread::spawn(move || {
        let (mut pings, mut echoes) = (Vec::new(), 0);
        while pings.len() < 100 || echoes < 100 {
            let rec = read_record(&mut r).unwrap();
            match &rec[..4] {
                b"PING" => pings.push(rec),
                b"ECHO" => echoes += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        pings
    });
    for i in 0..100u32 {
        s.write_all(&record(&[b"ECHO".as_slice(), &i.to_be_bytes()].concat()))
            .unwrap();
    }
    sender.join().unwrap();
    let pings = reader.join().unwrap();
    let mut all = Vec::new();
    for p in &pings {
        let mut a = b"RPLY".to_vec();
        a.extend_from_slice(&p[4..8]);
        all.extend_from_slice(&record(&a));
        all.extend_from_slice(&record(b"ECHO"));
    }
    s.write_all(&all).unwrap();
    for _ in 0..100 {
        assert_eq!(read_record(&mut s).unwrap(), b"ECHO");
    }
    wait_until("100 replies", || sv.toy.replies().len() == 100);
    let want: Vec<(u64, Vec<u8>)> = (0..100u32)
        .map(|i| (id, [b"RPLY".as_slice(), &i.to_be_bytes()].concat()))
        .collect();
    assert_eq!(sv.toy.replies(), want);
    assert_eq!(sv.toy.calls.load(SeqCst), 201);
}

#[test]
fn a_handle_does_not_keep_its_connection() {
    let sv = server();
    let mut s = connect(&sv);
    let id = bind(&mut s);
    let h = sv.toy.handle();
    drop(s);
    wait_until("the close", || sv.h.stats().connections_open == 0);
    assert!(!h.is_open());
    assert_eq!(h.send(body(b"PING")), Err(SendError::Closed));
    assert_eq!(sv.toy.gone(), vec![id]);
    assert_eq!(sv.h.stats().back_calls_out, 0);
}

#[test]
fn end_of_stream_is_told_once_while_calls_still_run() {
    let sv = server();
    let mut s = connect(&sv);
    let id = bind(&mut s);
    let h = sv.toy.handle();
    s.write_all(&record(b"GATE")).unwrap();
    wait_until("the call to run", || sv.toy.calls.load(SeqCst) == 2);
    s.shutdown(Shutdown::Write).unwrap();
    // No answer can come any more: told at once, the call still running.
    wait_until("the end of stream", || sv.toy.gone() == vec![id]);
    assert!(!h.is_open());
    assert_eq!(h.send(body(b"PING")), Err(SendError::Closed));
    assert_eq!(sv.h.stats().connections_open, 1);
    sv.toy.open_gate();
    assert_eq!(read_record(&mut s).unwrap(), b"GATED");
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    wait_until("the close", || sv.h.stats().connections_open == 0);
    assert_eq!(sv.toy.gone(), vec![id], "told once");
}

#[test]
fn a_peer_that_does_not_read_fills_its_output() {
    let sv = server_with(TransportConfig {
        max_conn_output: 64 << 10,
        ..Default::default()
    });
    let mut s = connect(&sv);
    bind(&mut s);
    let h = sv.toy.handle();
    // The socket's buffers take some; past them, 64 KiB queued refuses.
    let big = body(&vec![7u8; 256 << 10]);
    let mut sent = 0;
    let refused = loop {
        match h.send(big.clone()) {
            Ok(()) => sent += 1,
            Err(e) => break e,
        }
        assert!(sent < 400, "never refused");
    };
    assert_eq!(refused, SendError::Full);
    assert!(h.is_open());
    // All that was taken arrives, whole, once read.
    for _ in 0..sent {
        assert_eq!(read_record(&mut s).unwrap().len(), 256 << 10);
    }
    // Taken again once the socket took the rest: the loop counts what a
    // write took just after the peer can read it, so wait for that count.
    wait_until("the output taken again", || match h.send(body(b"PING")) {
        Ok(()) => true,
        Err(SendError::Full) => false,
        Err(e) => panic!("a drained connection refused: {e:?}"),
    });
    assert_eq!(read_record(&mut s).unwrap(), b"PING");
}

#[test]
fn shutdown_tells_the_service_of_every_connection() {
    let sv = server();
    let mut a = connect(&sv);
    let mut b = connect(&sv);
    let ia = bind(&mut a);
    let ib = bind(&mut b);
    sv.h.shutdown();
    let mut gone = sv.toy.gone();
    gone.sort();
    assert_eq!(gone, vec![ia.min(ib), ia.max(ib)]);
    assert!(sv.toy.handles.lock().unwrap().iter().all(|h| !h.is_open()));
}
