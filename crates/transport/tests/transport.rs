//! Transport tests over real TCP on 127.0.0.1, port 0, with a toy service.
//!
//! Request payload: id (u32 BE), op (u8), arg (u32 BE), padding.
//! ops: 0 echo; 1 sleep `arg` ms then echo; 2 reply `arg` zero bytes after
//! the id; 3 no reply; 4 "may block": waits until the test opens the gate,
//! then replies with the id and the name of the thread that ran it; 5
//! "quick": replies with the id and the running thread's name, answered on
//! the loop thread (`LoopCalls::call`) unless `arg` is 1 (given back: a worker
//! runs it); 6 "spliced": replies with the id, then `arg` pattern bytes
//! sent from a pipe (splice), then pad to 4 bytes; 7 "alone": as 5, but
//! routed `Alone` (on the loop when nothing else there is ready, or within
//! `alone_per_turn`); 8
//! "later": the reply is deferred (`Responder::defer`) and sent by another thread
//! `arg` ms later; 9 "large": as 2, but planned with `arg` + 8 bytes of
//! reply room (`Plan::reply_bound`, counted against `max_buffered_bytes`
//! while it runs, as a READ's); 10 "slow large": planned as 9, but sleeps
//! 1 s and replies with the id alone. Op 5 with `arg` 2 answered on the loop also leaves
//! work for the end of the loop's turn (`LoopCalls::turn_ends`), which takes
//! `TURN_END_WORK`. 11 "quick echo": as 0, answered on the loop thread.

use rnfsd_pool::Threads;
use rnfsd_transport::{
    reply_buffer, Handle, Inline, LoopCalls, PipePool, Plan, PoolConfig, PoolLayout, Reply,
    Request, Route, Service, Spliced, Transport, TransportConfig,
};
use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

struct Toy {
    calls: AtomicUsize,
    /// Calls per connection id for conn ids < 64.
    per_conn: [AtomicUsize; 64],
    /// Op 4 waits for this (bounded).
    gate: (std::sync::Mutex<bool>, std::sync::Condvar),
    /// Op 6's pipes.
    pipes: Arc<PipePool>,
    /// Work op 5 with arg 2 left for the turn's end, and work done there.
    left: AtomicUsize,
    done_at_turn_end: AtomicUsize,
    /// Turn ends called off an event loop thread (checked by the test, not
    /// asserted on the loop, whose panic would only stall the client).
    turn_ends_off_loop: AtomicUsize,
}

/// How long the work left for a turn's end takes.
const TURN_END_WORK: Duration = Duration::from_millis(300);

impl Default for Toy {
    fn default() -> Self {
        Toy {
            calls: AtomicUsize::new(0),
            per_conn: std::array::from_fn(|_| AtomicUsize::new(0)),
            gate: Default::default(),
            pipes: PipePool::new(4, 256 << 10),
            left: AtomicUsize::new(0),
            done_at_turn_end: AtomicUsize::new(0),
            turn_ends_off_loop: AtomicUsize::new(0),
        }
    }
}

/// Op 6's data: byte `i` of a reply with id `id`.
fn pattern(id: u32, i: usize) -> u8 {
    (id as usize).wrapping_mul(31).wrapping_add(i % 253) as u8
}

impl Toy {
    fn open_gate(&self) {
        *self.gate.0.lock().unwrap() = true;
        self.gate.1.notify_all();
    }
}

/// The toy's calls on one event loop.
struct ToyLoop(Arc<Toy>);

impl LoopCalls for ToyLoop {
    fn call(&mut self, req: Request) -> Inline {
        // Only a pool job's call may be answered later.
        assert!(!req.responder.can_defer());
        if req.data.get(8) == Some(&1) {
            return Inline::Defer(req);
        }
        if req.data.get(4) == Some(&5) && req.data.get(8) == Some(&2) {
            self.0.left.fetch_add(1, Ordering::SeqCst);
        }
        Inline::Done(self.0.call(req))
    }

    fn turn_ends(&mut self, _more: bool) {
        if !thread::current()
            .name()
            .unwrap_or("")
            .starts_with("rnfsd-evloop")
        {
            self.0.turn_ends_off_loop.fetch_add(1, Ordering::SeqCst);
        }
        let n = self.0.left.swap(0, Ordering::SeqCst);
        if n > 0 {
            thread::sleep(TURN_END_WORK);
            self.0.done_at_turn_end.fetch_add(n, Ordering::SeqCst);
        }
    }
}

impl Service for Toy {
    fn plan(&self, record: &[u8]) -> Plan {
        let route = match record.get(4) {
            Some(4) => Route::Blocking,
            Some(5 | 11) => Route::Quick,
            Some(7) => Route::Alone,
            _ => Route::Pool,
        };
        let reply_bound = match (record.get(4), record.get(5..9)) {
            (Some(9 | 10), Some(a)) => u32::from_be_bytes([a[0], a[1], a[2], a[3]]) as usize + 8,
            _ => 0,
        };
        Plan {
            route,
            reply_bound,
            ..Plan::default()
        }
    }

    fn loop_calls(self: Arc<Self>) -> Option<Box<dyn LoopCalls>> {
        Some(Box::new(ToyLoop(self)))
    }

    fn call(&self, req: Request) -> Option<Reply> {
        if req.data.get(4) == Some(&6) {
            self.calls.fetch_add(1, Ordering::SeqCst);
            return Some(self.spliced(&req.data));
        }
        self.call_bytes(req).map(Reply::from)
    }
}

impl Toy {
    /// Op 6: the data goes through a pipe when one is free, else in the
    /// buffer (the same bytes on the wire either way).
    fn spliced(&self, d: &[u8]) -> Reply {
        let id = u32::from_be_bytes(d[..4].try_into().unwrap());
        let n = u32::from_be_bytes(d[5..9].try_into().unwrap()) as usize;
        let data: Vec<u8> = (0..n).map(|i| pattern(id, i)).collect();
        let pad = (4 - n % 4) % 4;
        let mut r = reply_buffer(4);
        r.extend_from_slice(&d[..4]);
        match self.pipes.lease() {
            Some(mut pipe) if pipe.capacity() >= n => {
                let mut off = 0;
                while off < n {
                    off += rustix::io::write(pipe.write_end().unwrap(), &data[off..]).unwrap();
                }
                pipe.filled(n);
                Reply {
                    buf: r,
                    spliced: Some(Spliced { pipe, pad }),
                }
            }
            _ => {
                r.extend_from_slice(&data);
                r.resize(r.len() + pad, 0);
                r.into()
            }
        }
    }

    fn call_bytes(&self, mut req: Request) -> Option<Vec<u8>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(c) = self.per_conn.get(req.conn_id as usize) {
            c.fetch_add(1, Ordering::SeqCst);
        }
        let d = &req.data;
        let op = d.get(4).copied().unwrap_or(0);
        let arg = d
            .get(5..9)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
            .unwrap_or(0);
        match op {
            1 => {
                thread::sleep(Duration::from_millis(arg as u64));
                let mut r = reply_buffer(d.len());
                r.extend_from_slice(d);
                Some(r)
            }
            2 | 9 => {
                let mut r = reply_buffer(4 + arg as usize);
                r.extend_from_slice(d.get(..4).unwrap_or(&[0; 4]));
                r.resize(8 + arg as usize, 0);
                Some(r)
            }
            3 => None,
            10 => {
                thread::sleep(Duration::from_secs(1));
                let mut r = reply_buffer(4);
                r.extend_from_slice(d.get(..4).unwrap_or(&[0; 4]));
                Some(r)
            }
            8 => {
                let later = req.responder.defer().expect("a pool job's call");
                assert!(req.responder.defer().is_none(), "taken twice");
                let mut r = reply_buffer(d.len());
                r.extend_from_slice(d);
                thread::spawn(move || {
                    thread::sleep(Duration::from_millis(arg as u64));
                    later.send(Some(r.into()));
                });
                None
            }
            5 | 7 => {
                let mut r = reply_buffer(64);
                r.extend_from_slice(d.get(..4).unwrap_or(&[0; 4]));
                r.extend_from_slice(thread::current().name().unwrap_or("").as_bytes());
                Some(r)
            }
            4 => {
                let g = self.gate.0.lock().unwrap();
                let _g = self
                    .gate
                    .1
                    .wait_timeout_while(g, Duration::from_secs(10), |open| !*open)
                    .unwrap();
                let mut r = reply_buffer(64);
                r.extend_from_slice(d.get(..4).unwrap_or(&[0; 4]));
                r.extend_from_slice(thread::current().name().unwrap_or("").as_bytes());
                Some(r)
            }
            _ => {
                let mut r = reply_buffer(d.len());
                r.extend_from_slice(d);
                Some(r)
            }
        }
    }
}

/// Alternately long and short records of op `op`, each with its own bytes,
/// pipelined on one connection: every reply is exactly its record, so no
/// byte of a reply or record whose buffer was kept (`recycled_buffers`)
/// reaches the next one.
fn recycled_buffers_carry_nothing_over(op: u8, recycled: usize) {
    let sv = server_with(
        TransportConfig {
            recycled_buffers: recycled,
            ..TransportConfig::default()
        },
        pool(2),
    );
    let mut s = connect(sv.addr);
    let body = |id: u32| {
        let mut v = payload(id, op, 0, 0);
        let n = if id.is_multiple_of(2) {
            3000
        } else {
            7 + id as usize % 5
        };
        v.extend((0..n).map(|i| pattern(id, i)));
        v
    };
    for round in 0..4u32 {
        let ids: Vec<u32> = (round * 100..round * 100 + 100).collect();
        let wire: Vec<u8> = ids.iter().flat_map(|&id| record(&body(id))).collect();
        s.write_all(&wire).unwrap();
        let mut got: Vec<Vec<u8>> = (0..ids.len())
            .map(|_| read_record(&mut s).unwrap())
            .collect();
        got.sort_by_key(|r| id_of(r));
        for (id, r) in ids.iter().zip(&got) {
            assert_eq!(r, &body(*id), "reply {id} is its record, no more");
        }
    }
}

#[test]
fn recycled_buffers_carry_nothing_from_one_call_to_the_next() {
    // On the loop (records and replies kept there), on the workers
    // (replies), and with none kept.
    recycled_buffers_carry_nothing_over(11, 256);
    recycled_buffers_carry_nothing_over(0, 256);
    recycled_buffers_carry_nothing_over(11, 0);
}

fn payload(id: u32, op: u8, arg: u32, pad: usize) -> Vec<u8> {
    let mut v = id.to_be_bytes().to_vec();
    v.push(op);
    v.extend_from_slice(&arg.to_be_bytes());
    v.resize(v.len() + pad, 0xab);
    v
}

fn record(body: &[u8]) -> Vec<u8> {
    let mut v = (0x8000_0000u32 | body.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(body);
    v
}

/// Read one record (any number of fragments).
fn read_record(s: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let mut h = [0u8; 4];
        s.read_exact(&mut h)?;
        let v = u32::from_be_bytes(h);
        let len = (v & 0x7fff_ffff) as usize;
        let start = out.len();
        out.resize(start + len, 0);
        s.read_exact(&mut out[start..])?;
        if v & 0x8000_0000 != 0 {
            return Ok(out);
        }
    }
}

fn id_of(r: &[u8]) -> u32 {
    u32::from_be_bytes([r[0], r[1], r[2], r[3]])
}

/// Records 0..n, each op `op` with `arg`, back to back (one pipelined burst).
fn burst(n: u32, op: u8, arg: u32) -> Vec<u8> {
    (0..n)
        .flat_map(|id| record(&payload(id, op, arg, 0)))
        .collect()
}

/// Read `n` replies; their ids, sorted.
fn read_ids(s: &mut TcpStream, n: usize) -> Vec<u32> {
    let mut got: Vec<u32> = (0..n).map(|_| id_of(&read_record(s).unwrap())).collect();
    got.sort();
    got
}

struct Server {
    h: Handle,
    svc: Arc<Toy>,
    addr: SocketAddr,
}

fn server_with(cfg: TransportConfig, pool: PoolConfig) -> Server {
    let svc = Arc::new(Toy::default());
    let cfg = TransportConfig {
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        ..cfg
    };
    let h = Transport::start(cfg, pool, svc.clone()).unwrap();
    let addr = h.local_addrs()[0];
    Server { h, svc, addr }
}

/// A server with `run_inline` as given and two workers.
fn server_inline(inline: bool) -> Server {
    server_with(
        TransportConfig {
            run_inline: inline,
            ..TransportConfig::default()
        },
        pool(2),
    )
}

fn pool(n: usize) -> PoolConfig {
    PoolConfig {
        threads: Threads::Fixed(n),
        ..PoolConfig::default()
    }
}

fn server() -> Server {
    server_with(TransportConfig::default(), pool(4))
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(2));
    }
}

/// The server closed the connection: EOF or reset on read.
fn assert_closed(s: &mut TcpStream) {
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(0) => {}
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
        other => panic!("expected close, got {other:?}"),
    }
}

#[test]
fn single_fragment_record() {
    let sv = server();
    let mut s = connect(sv.addr);
    let p = payload(7, 0, 0, 100);
    s.write_all(&record(&p)).unwrap();
    assert_eq!(read_record(&mut s).unwrap(), p);
    let st = sv.h.stats();
    assert_eq!((st.records_in, st.connections_accepted), (1, 1));
    sv.h.shutdown();
}

/// Bytes and the peer's FIN arriving together: a whole call is answered,
/// and the connection is closed, also after a partial record that gets
/// no reply (no reply, so no send-side wakeup to bring the loop back). A
/// read that returned less than asked must not end the turn there, since
/// no further event comes. Many connections at once, so the loop is busy
/// while later ones' data and FIN both land.
#[test]
fn bytes_sent_with_the_fin_are_answered_then_closed() {
    let sv = server();
    let mut socks = Vec::new();
    for k in 0..100u32 {
        let mut s = connect(sv.addr);
        let p = payload(k, 0, 0, 40);
        let mut wire = record(&p);
        if k % 2 == 1 {
            wire.truncate(wire.len() - 1); // a partial record: no reply
        }
        s.write_all(&wire).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        socks.push((s, (k % 2 == 0).then_some(p)));
    }
    for (s, want) in &mut socks {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        if let Some(p) = want {
            assert_eq!(&read_record(s).unwrap(), p);
        }
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).expect("closed, not timed out");
        assert!(rest.is_empty());
    }
    sv.h.shutdown();
}

#[test]
fn multi_fragment_record_split_across_writes() {
    let sv = server();
    let mut s = connect(sv.addr);
    let p = payload(9, 0, 0, 3000);
    let (a, rest) = p.split_at(10);
    let (b, c) = rest.split_at(1000);
    let mut wire = Vec::new();
    for (last, part) in [(false, a), (false, &[][..]), (false, b), (true, c)] {
        let mark = if last { 0x8000_0000u32 } else { 0 } | part.len() as u32;
        wire.extend_from_slice(&mark.to_be_bytes());
        wire.extend_from_slice(part);
    }
    // Dribble it: headers and bodies cut at odd places.
    for chunk in wire.chunks(777) {
        s.write_all(chunk).unwrap();
        thread::sleep(Duration::from_millis(3));
    }
    assert_eq!(read_record(&mut s).unwrap(), p);
    // And byte by byte.
    let p2 = payload(10, 0, 0, 20);
    for b in record(&p2) {
        s.write_all(&[b]).unwrap();
    }
    assert_eq!(read_record(&mut s).unwrap(), p2);
    sv.h.shutdown();
}

/// A large fragment's body is awaited with a raised SO_RCVLOWAT: a sender
/// that pauses mid-fragment, fragments of many sizes, and small calls
/// right behind a large one (the mark must be lowered again, or they would
/// never poll readable) all arrive whole.
#[test]
fn large_fragments_with_pauses_then_small_calls_arrive_whole() {
    let sv = server();
    let mut s = connect(sv.addr);
    let big = payload(1, 0, 0, 1 << 20);
    // One fragment, sent in pieces with pauses inside the body.
    let wire = record(&big);
    for (k, chunk) in wire.chunks(200_000).enumerate() {
        s.write_all(chunk).unwrap();
        if k % 2 == 0 {
            thread::sleep(Duration::from_millis(30));
        }
    }
    // A small call right behind it, nothing after: it must not wait for
    // more bytes.
    let small = payload(2, 0, 0, 10);
    s.write_all(&record(&small)).unwrap();
    // Replies may come in any order (a pool runs them).
    assert_eq!(two_replies(&mut s), [big, small]);
    // A record of three large fragments and a small one, each header
    // followed by a pause, then a small call.
    let p = payload(3, 0, 0, 700_000);
    let parts = [
        &p[..300_000],
        &p[300_000..320_000],
        &p[320_000..699_000],
        &p[699_000..],
    ];
    for (k, part) in parts.iter().enumerate() {
        let mark = if k == parts.len() - 1 {
            0x8000_0000u32
        } else {
            0
        } | part.len() as u32;
        s.write_all(&mark.to_be_bytes()).unwrap();
        thread::sleep(Duration::from_millis(20));
        let (a, b) = part.split_at(part.len() / 3);
        s.write_all(a).unwrap();
        thread::sleep(Duration::from_millis(20));
        s.write_all(b).unwrap();
    }
    let small = payload(4, 0, 0, 0);
    s.write_all(&record(&small)).unwrap();
    assert_eq!(two_replies(&mut s), [p, small]);
    sv.h.shutdown();
}

/// Two replies, in the order of their ids.
fn two_replies(s: &mut TcpStream) -> [Vec<u8>; 2] {
    let mut r = [read_record(s).unwrap(), read_record(s).unwrap()];
    r.sort_by_key(|v| id_of(v));
    r
}

/// A sender that stops inside a large fragment and closes its side is
/// seen at once (the low-water mark does not hide end of stream): the
/// partial record is dropped and the connection closed.
#[test]
fn end_of_stream_inside_a_large_fragment_closes() {
    let sv = server();
    let mut s = connect(sv.addr);
    let wire = record(&payload(1, 0, 0, 1 << 20));
    s.write_all(&wire[..300_000]).unwrap();
    thread::sleep(Duration::from_millis(50));
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let t0 = Instant::now();
    assert_closed(&mut s);
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "close took {:?}",
        t0.elapsed()
    );
    sv.h.shutdown();
}

#[test]
fn record_over_max_record_closes_connection() {
    let sv = server_with(
        TransportConfig {
            max_record: 1000,
            ..TransportConfig::default()
        },
        pool(2),
    );
    // One fragment claiming too much: closed before the body is sent.
    let mut s = connect(sv.addr);
    s.write_all(&(0x8000_0000u32 | 2000).to_be_bytes()).unwrap();
    assert_closed(&mut s);
    // Fragments that only together exceed it.
    let mut s = connect(sv.addr);
    let mut wire = (600u32).to_be_bytes().to_vec();
    wire.extend_from_slice(&[1; 600]);
    wire.extend_from_slice(&(0x8000_0000u32 | 600).to_be_bytes());
    s.write_all(&wire).unwrap();
    assert_closed(&mut s);
    // Exactly max_record is fine.
    let mut s = connect(sv.addr);
    let p = payload(1, 0, 0, 1000 - 9);
    s.write_all(&record(&p)).unwrap();
    assert_eq!(read_record(&mut s).unwrap(), p);
    let st = sv.h.stats();
    assert_eq!(st.records_too_big, 2);
    assert_eq!(sv.svc.calls.load(Ordering::SeqCst), 1);
    sv.h.shutdown();
}

fn pipelined(sv: &Server, n: u32, sleepy: bool) {
    let mut s = connect(sv.addr);
    let mut w = s.try_clone().unwrap();
    let writer = thread::spawn(move || {
        let mut wire = Vec::new();
        for id in 0..n {
            // Every 7th request sleeps, so replies overtake each other.
            let (op, arg) = if sleepy && id % 7 == 0 {
                (1, 2)
            } else {
                (0, 0)
            };
            wire.extend(record(&payload(id, op, arg, (id % 50) as usize)));
        }
        for chunk in wire.chunks(4096) {
            w.write_all(chunk).unwrap();
        }
    });
    let mut seen = HashSet::new();
    let mut in_order = true;
    for k in 0..n {
        let r = read_record(&mut s).unwrap();
        let id = id_of(&r);
        in_order &= id == k;
        assert_eq!(
            r,
            payload(id, r[4], if r[4] == 1 { 2 } else { 0 }, (id % 50) as usize)
        );
        assert!(seen.insert(id), "duplicate reply {id}");
    }
    writer.join().unwrap();
    assert_eq!(seen.len(), n as usize);
    if sleepy {
        assert!(!in_order, "sleepy requests should let others overtake them");
    }
}

#[test]
fn thousand_pipelined_requests_on_one_connection() {
    let sv = server();
    pipelined(&sv, 1000, true);
    // A worker counts a reply just after its write returns, so the client
    // can read the last reply a moment before it is counted.
    wait_until("every reply counted", Duration::from_secs(5), || {
        let st = sv.h.stats();
        (st.records_in, st.replies_out) == (1000, 1000)
    });
    let st = sv.h.stats();
    assert_eq!((st.records_in, st.replies_out), (1000, 1000));
    sv.h.shutdown();
}

#[test]
fn pipelining_through_a_tiny_pool_queue() {
    // queue_limit 2 with one worker: the loop must stall and retry.
    let sv = server_with(
        TransportConfig::default(),
        PoolConfig {
            queue_limit: 2,
            ..pool(1)
        },
    );
    pipelined(&sv, 300, false);
    assert!(sv.h.pool_stats().rejected_full > 0);
    sv.h.shutdown();
}

#[test]
fn many_connections_two_event_loops_shared_pool() {
    let sv = server_with(
        TransportConfig {
            event_threads: 2,
            pools: PoolLayout::Shared,
            ..TransportConfig::default()
        },
        PoolConfig::default(),
    );
    let addr = sv.addr;
    let ts: Vec<_> = (0..8)
        .map(|t| {
            thread::spawn(move || {
                let mut conns: Vec<TcpStream> = (0..8).map(|_| connect(addr)).collect();
                for round in 0..5u32 {
                    for (k, c) in conns.iter_mut().enumerate() {
                        for j in 0..4u32 {
                            let id = t * 1000 + k as u32 * 100 + round * 10 + j;
                            c.write_all(&record(&payload(id, 0, 0, 16))).unwrap();
                        }
                    }
                    for (k, c) in conns.iter_mut().enumerate() {
                        let mut got: Vec<u32> =
                            (0..4).map(|_| id_of(&read_record(c).unwrap())).collect();
                        got.sort();
                        let base = t * 1000 + k as u32 * 100 + round * 10;
                        assert_eq!(got, (base..base + 4).collect::<Vec<_>>());
                    }
                }
            })
        })
        .collect();
    for t in ts {
        t.join().unwrap();
    }
    let st = sv.h.stats();
    assert_eq!(st.connections_accepted, 64);
    assert_eq!(st.records_in, 64 * 20);
    let each = sv.h.pool_stats_each();
    assert_eq!(each.len(), 1, "one shared pool");
    assert_eq!(each[0].jobs_run(), 64 * 20);
    sv.h.shutdown();
    assert_eq!(sv.h.stats().connections_open, 0);
}

#[test]
fn per_loop_with_one_loop_is_the_configured_pool() {
    let sv = server_with(TransportConfig::default(), pool(3));
    assert_eq!(TransportConfig::default().pools, PoolLayout::PerLoop);
    let each = sv.h.pool_stats_each();
    assert_eq!((each.len(), each[0].threads), (1, 3));
    sv.h.shutdown();
}

#[test]
fn client_that_never_reads_does_not_block_others_and_memory_is_bounded() {
    const REPLY: u32 = 64 << 10;
    let (max_out, max_inflight) = (256 << 10, 8);
    let sv = server_with(
        TransportConfig {
            max_conn_output: max_out,
            max_inflight_per_conn: max_inflight,
            ..TransportConfig::default()
        },
        pool(2),
    );
    // The hog: asks for 64 KiB replies as fast as it can, never reads.
    let hog = connect(sv.addr);
    hog.set_write_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let hog_thread = {
        let (stop, sent) = (stop.clone(), sent.clone());
        let mut hog = hog.try_clone().unwrap();
        thread::spawn(move || {
            let req = record(&payload(1, 2, REPLY, 0));
            let mut id = 0usize;
            while !stop.load(Ordering::SeqCst) {
                match hog.write(&req) {
                    Ok(n) => id += n,
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
                sent.store(id, Ordering::SeqCst);
            }
        })
    };
    // Let the hog fill every buffer on the way.
    wait_until(
        "hog has some replies queued",
        Duration::from_secs(10),
        || sv.h.stats().reply_bytes_queued > 0,
    );
    // Another client is served normally meanwhile.
    let mut other = connect(sv.addr);
    for id in 0..200 {
        let p = payload(id, 0, 0, 32);
        other.write_all(&record(&p)).unwrap();
        assert_eq!(read_record(&mut other).unwrap(), p);
    }
    // The hog's requests stop being read: its call count plateaus.
    let hog_id = 1usize; // first connection accepted
    let plateau = |sv: &Server| sv.svc.per_conn[hog_id].load(Ordering::SeqCst);
    let mut last = plateau(&sv);
    let t0 = Instant::now();
    loop {
        thread::sleep(Duration::from_millis(300));
        let now = plateau(&sv);
        if now == last {
            break;
        }
        last = now;
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "hog never throttled"
        );
    }
    let st = sv.h.stats();
    let bound = (max_out + max_inflight * (REPLY as usize + 8)) as u64;
    assert!(st.reply_bytes_queued <= bound, "{st:?} bound {bound}");
    assert!(st.reply_bytes_queued > 0, "{st:?}");
    // The server has stopped reading the hog's socket altogether (the hog
    // may still be filling kernel buffers).
    let b1 = sv.h.stats().bytes_in;
    thread::sleep(Duration::from_millis(300));
    assert_eq!(b1, sv.h.stats().bytes_in, "server kept reading the hog");
    assert!(
        sent.load(Ordering::SeqCst) as u64 > b1,
        "hog was not throttled"
    );
    // Workers are free: no worker is stuck on the hog's socket.
    let ps = sv.h.pool_stats();
    assert_eq!(ps.running + ps.waking, 0, "{ps:?}");
    stop.store(true, Ordering::SeqCst);
    // Shutdown does not hang on the hog (its replies cannot be flushed, and
    // shutdown_timeout bounds the wait).
    drop(hog);
    hog_thread.join().unwrap();
    sv.h.shutdown();
}

#[test]
fn shutdown_completes_requests_in_flight() {
    let sv = server_with(TransportConfig::default(), pool(2));
    let mut s = connect(sv.addr);
    s.write_all(&burst(10, 1, 100)).unwrap();
    wait_until("all received", Duration::from_secs(5), || {
        sv.h.stats().records_in == 10
    });
    let h = sv.h.clone();
    let stopper = thread::spawn(move || h.shutdown());
    let mut got = HashSet::new();
    for _ in 0..10 {
        got.insert(id_of(&read_record(&mut s).unwrap()));
    }
    assert_eq!(got, (0..10).collect());
    assert_closed(&mut s);
    stopper.join().unwrap();
    sv.h.wait();
    assert!(TcpStream::connect(sv.addr).is_err(), "still accepting");
    let st = sv.h.stats();
    assert_eq!((st.connections_open, st.replies_out), (0, 10));
}

#[test]
fn wait_returns_after_shutdown_from_another_thread() {
    let sv = server();
    let h = sv.h.clone();
    let t = thread::spawn(move || {
        thread::sleep(Duration::from_millis(50));
        h.shutdown();
    });
    sv.h.wait();
    t.join().unwrap();
}

#[test]
fn half_closed_client_gets_all_replies_then_eof() {
    let sv = server();
    let mut s = connect(sv.addr);
    for id in 0..5 {
        s.write_all(&record(&payload(id, 1, 20, 0))).unwrap();
    }
    s.write_all(&record(&payload(99, 3, 0, 0))).unwrap(); // no reply
    s.shutdown(Shutdown::Write).unwrap();
    let mut got: Vec<u32> = (0..5)
        .map(|_| id_of(&read_record(&mut s).unwrap()))
        .collect();
    got.sort();
    assert_eq!(got, vec![0, 1, 2, 3, 4]);
    assert_closed(&mut s);
    wait_until("closed", Duration::from_secs(5), || {
        sv.h.stats().connections_open == 0
    });
    sv.h.shutdown();
}

/// Replies deferred to be sent later by another thread (`Responder::defer`: a
/// journal commit's replies) all arrive, and the connection stays open
/// until the last is sent: a half-closed client gets every reply, then EOF.
/// Meanwhile the calls count as in flight, so they bound what the loop
/// reads (`max_inflight_per_conn`).
#[test]
fn replies_sent_later_by_another_thread_arrive_before_the_close() {
    let sv = server_with(
        TransportConfig {
            max_inflight_per_conn: 4,
            ..TransportConfig::default()
        },
        pool(2),
    );
    let mut s = connect(sv.addr);
    s.write_all(&burst(16, 8, 30)).unwrap();
    s.write_all(&record(&payload(99, 0, 0, 0))).unwrap();
    // At most 4 in flight: 16 calls parked 30 ms each take 4 rounds.
    let t0 = Instant::now();
    s.shutdown(Shutdown::Write).unwrap();
    let got = read_ids(&mut s, 17);
    assert_eq!(got, (0..16).chain([99]).collect::<Vec<u32>>());
    assert!(
        t0.elapsed() >= Duration::from_millis(110),
        "{:?}: more than max_inflight_per_conn calls were parked at once",
        t0.elapsed()
    );
    assert_closed(&mut s);
    wait_until("closed", Duration::from_secs(5), || {
        sv.h.stats().connections_open == 0
    });
    assert_eq!(sv.svc.calls.load(Ordering::SeqCst), 17);
    sv.h.shutdown();
}

/// At `max_connections` the oldest idle connection makes room (knfsd's
/// svc_check_conn_limits); a new one is refused only when none is idle.
#[test]
fn at_max_connections_the_oldest_idle_one_makes_room() {
    let sv = server_with(
        TransportConfig {
            max_connections: 2,
            ..TransportConfig::default()
        },
        pool(2),
    );
    let mut a = connect(sv.addr);
    let mut b = connect(sv.addr);
    for (id, s) in [&mut a, &mut b].into_iter().enumerate() {
        let p = payload(id as u32, 0, 0, 0);
        s.write_all(&record(&p)).unwrap();
        assert_eq!(read_record(s).unwrap(), p);
        thread::sleep(Duration::from_millis(20));
    }
    // Both idle: a (the older) is closed for c.
    let mut c = connect(sv.addr);
    let p = payload(3, 0, 0, 0);
    c.write_all(&record(&p)).unwrap();
    assert_eq!(read_record(&mut c).unwrap(), p);
    assert_closed(&mut a);
    assert_eq!(sv.h.stats().connections_evicted, 1);
    // b and c busy (a call sleeping in each): nothing idle, d is refused.
    for (id, s) in [(4u32, &mut b), (5, &mut c)] {
        s.write_all(&record(&payload(id, 1, 1500, 0))).unwrap();
    }
    thread::sleep(Duration::from_millis(200));
    let mut d = connect(sv.addr);
    assert_closed(&mut d);
    assert_eq!(sv.h.stats().connections_refused, 1);
    assert_eq!(read_record(&mut b).unwrap(), payload(4, 1, 1500, 0));
    assert_eq!(read_record(&mut c).unwrap(), payload(5, 1, 1500, 0));
    sv.h.shutdown();
}

#[test]
fn idle_connections_are_closed() {
    let sv = server_with(
        TransportConfig {
            idle_timeout: Duration::from_millis(100),
            ..TransportConfig::default()
        },
        pool(1),
    );
    let mut s = connect(sv.addr);
    let p = payload(1, 0, 0, 0);
    s.write_all(&record(&p)).unwrap();
    assert_eq!(read_record(&mut s).unwrap(), p);
    let t0 = Instant::now();
    assert_closed(&mut s);
    assert!(t0.elapsed() < Duration::from_secs(2));
    sv.h.shutdown();
}

/// 8 threads × 8 connections, 5 rounds of 4 pipelined requests each.
fn drive_64_connections(addr: SocketAddr) {
    let ts: Vec<_> = (0..8)
        .map(|t| {
            thread::spawn(move || {
                let mut conns: Vec<TcpStream> = (0..8).map(|_| connect(addr)).collect();
                for round in 0..5u32 {
                    for (k, c) in conns.iter_mut().enumerate() {
                        for j in 0..4u32 {
                            let id = t * 1000 + k as u32 * 100 + round * 10 + j;
                            c.write_all(&record(&payload(id, (j == 0) as u8, 1, 16)))
                                .unwrap();
                        }
                    }
                    for (k, c) in conns.iter_mut().enumerate() {
                        let mut got: Vec<u32> =
                            (0..4).map(|_| id_of(&read_record(c).unwrap())).collect();
                        got.sort();
                        let base = t * 1000 + k as u32 * 100 + round * 10;
                        assert_eq!(got, (base..base + 4).collect::<Vec<_>>());
                    }
                }
            })
        })
        .collect();
    for t in ts {
        t.join().unwrap();
    }
}

#[test]
fn per_loop_pools_serve_many_connections_and_stats_sum() {
    let sv = server_with(
        TransportConfig {
            event_threads: 2,
            pools: PoolLayout::PerLoop,
            ..TransportConfig::default()
        },
        pool(5),
    );
    drive_64_connections(sv.addr);
    let st = sv.h.stats();
    assert_eq!((st.connections_accepted, st.records_in), (64, 64 * 20));
    let each = sv.h.pool_stats_each();
    // Fixed(5) over 2 loops: ceil(5/2) = 3 threads per pool.
    assert_eq!(each.len(), 2);
    assert_eq!(each.iter().map(|p| p.threads).collect::<Vec<_>>(), [3, 3]);
    // Connections are dealt round-robin, so each pool ran half the requests.
    for p in &each {
        assert_eq!(p.jobs_run(), 32 * 20, "{p:?}");
    }
    let sum = sv.h.pool_stats();
    assert_eq!((sum.threads, sum.jobs_run()), (6, 64 * 20));
    assert_eq!(
        sum.threads_started,
        each.iter().map(|p| p.threads_started).sum()
    );
    assert_eq!(sv.svc.calls.load(Ordering::SeqCst), 64 * 20);
    sv.h.shutdown();
    assert_eq!(sv.h.stats().connections_open, 0);
    assert_eq!(sv.h.pool_stats().threads, 0, "pool workers left running");
}

#[test]
fn per_loop_pools_divide_adaptive_counts() {
    let sv = server_with(
        TransportConfig {
            event_threads: 2,
            pools: PoolLayout::PerLoop,
            ..TransportConfig::default()
        },
        PoolConfig {
            threads: Threads::Adaptive { min: 3, max: 4 },
            ..PoolConfig::default()
        },
    );
    // min ceil(3/2) = 2 per pool, started up front.
    let each = sv.h.pool_stats_each();
    assert_eq!(each.iter().map(|p| p.threads).collect::<Vec<_>>(), [2, 2]);
    // max ceil(4/2) = 2 per pool: 64 connections of slow requests never
    // grow a pool past 2.
    drive_64_connections(sv.addr);
    for p in sv.h.pool_stats_each() {
        assert_eq!(p.threads_started, 2, "{p:?}");
    }
    sv.h.shutdown();
}

#[test]
fn per_loop_shutdown_completes_requests_in_flight_on_every_pool() {
    let sv = server_with(
        TransportConfig {
            event_threads: 2,
            pools: PoolLayout::PerLoop,
            ..TransportConfig::default()
        },
        pool(2),
    );
    // Two connections: one per loop, so each pool has sleepers in flight.
    let mut ss = [connect(sv.addr), connect(sv.addr)];
    for (k, s) in ss.iter_mut().enumerate() {
        let mut wire = Vec::new();
        for id in 0..6 {
            wire.extend(record(&payload(k as u32 * 100 + id, 1, 100, 0)));
        }
        s.write_all(&wire).unwrap();
    }
    wait_until("all received", Duration::from_secs(5), || {
        sv.h.stats().records_in == 12
    });
    let h = sv.h.clone();
    let stopper = thread::spawn(move || h.shutdown());
    for (k, s) in ss.iter_mut().enumerate() {
        let mut got = HashSet::new();
        for _ in 0..6 {
            got.insert(id_of(&read_record(s).unwrap()));
        }
        let base = k as u32 * 100;
        assert_eq!(got, (base..base + 6).collect());
        assert_closed(s);
    }
    stopper.join().unwrap();
    let each = sv.h.pool_stats_each();
    assert_eq!(
        each.iter().map(|p| p.jobs_run()).collect::<Vec<_>>(),
        [6, 6]
    );
    assert_eq!(sv.h.stats().replies_out, 12);
    assert!(TcpStream::connect(sv.addr).is_err(), "still accepting");
}

/// Replies with the CPUs the worker thread may run on.
struct WhereAmI;

impl Service for WhereAmI {
    fn call(&self, _req: Request) -> Option<Reply> {
        let cpus = rnfsd_pool::affinity::allowed_cpus().unwrap_or_default();
        let mut r = reply_buffer(4 * cpus.len());
        for c in cpus {
            r.extend_from_slice(&(c as u32).to_be_bytes());
        }
        Some(r.into())
    }
}

#[test]
fn connections_go_to_the_loop_on_their_cpu_and_pinned_pools_run_there() {
    let allowed = rnfsd_pool::affinity::allowed_cpus().unwrap();
    let h = Transport::start(
        TransportConfig {
            listen: vec!["127.0.0.1:0".parse().unwrap()],
            event_threads: 2,
            pools: PoolLayout::PerLoop,
            pin_loops: true,
            ..TransportConfig::default()
        },
        pool(2),
        Arc::new(WhereAmI),
    )
    .unwrap();
    let addr = h.local_addrs()[0];
    // Each connection is made from a CPU and goes to the loop pinned there
    // (SO_INCOMING_CPU: on loopback, the client's CPU), in an order that
    // round-robin would not give; one round trip each before the next.
    // The calls are sent from that CPU too: when the loop accepts after the
    // first call has arrived (a loaded machine), SO_INCOMING_CPU is the
    // CPU that call came from.
    let mut conns = Vec::new();
    for (i, k) in [1, 0, 0, 1].into_iter().enumerate() {
        let want = allowed[k % allowed.len()];
        let s = thread::spawn(move || {
            rnfsd_pool::affinity::pin_current_thread(want).unwrap();
            let mut s = connect(addr);
            for _ in 0..3 {
                s.write_all(&record(&payload(0, 0, 0, 0))).unwrap();
                let r = read_record(&mut s).unwrap();
                assert_eq!(r, (want as u32).to_be_bytes(), "connection {i}");
            }
            s
        })
        .join()
        .unwrap();
        conns.push(s);
    }
    // Eight more from one CPU: steering yields to balance, so the loops
    // end within two connections of each other.
    let first = allowed[0];
    let mut per_cpu = std::collections::HashMap::<u32, usize>::new();
    for _ in 0..8 {
        let (s, r) = thread::spawn(move || {
            rnfsd_pool::affinity::pin_current_thread(first).unwrap();
            let mut s = connect(addr);
            s.write_all(&record(&payload(0, 0, 0, 0))).unwrap();
            let r = read_record(&mut s).unwrap();
            (s, r)
        })
        .join()
        .unwrap();
        *per_cpu
            .entry(u32::from_be_bytes([r[0], r[1], r[2], r[3]]))
            .or_default() += 1;
        conns.push(s);
    }
    if allowed.len() >= 2 {
        // 2 and 2 before; the first CPU's loop may lead by up to 2.
        let a = per_cpu.get(&(allowed[0] as u32)).copied().unwrap_or(0) + 2;
        let b = per_cpu.get(&(allowed[1] as u32)).copied().unwrap_or(0) + 2;
        assert!(a >= b && a - b <= 2, "{per_cpu:?}");
    }
    h.shutdown();
}

/// A connection from `src` (any 127/8 address: all are local on Linux).
fn connect_from(src: &str, addr: SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let from: SocketAddr = format!("{src}:0").parse().unwrap();
    s.bind(&from.into()).unwrap();
    s.connect(&addr.into()).unwrap();
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

#[test]
fn connections_over_the_per_client_limit_are_refused() {
    let sv = server_with(
        TransportConfig {
            max_connections_per_client: 2,
            ..TransportConfig::default()
        },
        pool(2),
    );
    let echo = |s: &mut TcpStream, id: u32| {
        let p = payload(id, 0, 0, 0);
        s.write_all(&record(&p)).unwrap();
        assert_eq!(read_record(s).unwrap(), p);
    };
    let mut a = connect_from("127.0.0.1", sv.addr);
    let mut b = connect_from("127.0.0.1", sv.addr);
    echo(&mut a, 1);
    echo(&mut b, 2);
    // A third from the same address is refused ...
    let mut c = connect_from("127.0.0.1", sv.addr);
    assert_closed(&mut c);
    assert_eq!(sv.h.stats().connections_refused, 1);
    // ... while another address is still served.
    let mut o = connect_from("127.0.0.2", sv.addr);
    echo(&mut o, 3);
    // Closing one frees a slot for that address again.
    drop(a);
    wait_until("a closed", Duration::from_secs(5), || {
        sv.h.stats().connections_open == 2
    });
    let mut d = connect_from("127.0.0.1", sv.addr);
    echo(&mut d, 4);
    assert_eq!(sv.h.stats().connections_refused, 1);
    sv.h.shutdown();
}

/// Calls the service says may block run in the blocking pool: with every
/// one of them held, quick calls are still answered by the loop's pool.
#[test]
fn blocking_calls_run_in_their_own_pool() {
    let sv = server_with(
        TransportConfig {
            blocking_threads: 8,
            ..TransportConfig::default()
        },
        pool(2),
    );
    let mut slow = connect(sv.addr);
    for id in 0..6 {
        slow.write_all(&record(&payload(id, 4, 0, 0))).unwrap();
    }
    // Six held calls: more than the loop's pool has threads.
    wait_until("blocking calls started", Duration::from_secs(10), || {
        sv.svc.calls.load(Ordering::SeqCst) >= 6
    });
    let mut quick = connect(sv.addr);
    for id in 100..120 {
        quick.write_all(&record(&payload(id, 0, 0, 0))).unwrap();
        let r = read_record(&mut quick).expect("quick call answered while others block");
        assert_eq!(id_of(&r), id);
    }
    sv.svc.open_gate();
    for _ in 0..6 {
        let r = read_record(&mut slow).unwrap();
        let name = String::from_utf8_lossy(&r[4..]);
        assert!(name.starts_with("rnfsd-sync"), "ran on {name:?}");
    }
    sv.h.shutdown();
    sv.h.wait();
}

/// Run to completion: quick calls are answered on the loop thread that read
/// them (a pipelined burst leaves with few writes); a quick call the
/// service gives back runs on a worker; with `run_inline` off all do.
#[test]
fn quick_calls_run_on_the_loop_thread() {
    for inline in [true, false] {
        let sv = server_inline(inline);
        let mut s = connect(sv.addr);
        let mut burst = Vec::new();
        for id in 0..50u32 {
            let give_back = u32::from(id.is_multiple_of(10));
            burst.extend(record(&payload(id, 5, give_back, 0)));
        }
        s.write_all(&burst).unwrap();
        let mut on_loop = 0;
        for _ in 0..50 {
            let r = read_record(&mut s).unwrap();
            let name = String::from_utf8_lossy(&r[4..]).into_owned();
            let id = id_of(&r);
            if name.starts_with("rnfsd-evloop") {
                assert!(inline && !id.is_multiple_of(10), "call {id} ran on {name}");
                on_loop += 1;
            }
        }
        let t = sv.h.stats();
        if inline {
            assert_eq!(on_loop, 45);
            assert_eq!(t.records_inline, 45);
            assert_eq!(t.records_deferred, 5);
        } else {
            assert_eq!((on_loop, t.records_inline), (0, 0));
        }
        sv.h.shutdown();
        sv.h.wait();
    }
}

/// Work an inline call leaves for the end of its loop's turn runs there,
/// on the loop, after the turn's replies are sent: the reply does not wait
/// for it. With `run_inline` off nothing runs inline and nothing is left.
#[test]
fn work_left_for_the_turn_end_runs_after_the_replies_leave() {
    for inline in [true, false] {
        let sv = server_inline(inline);
        let mut s = connect(sv.addr);
        let t = Instant::now();
        s.write_all(&record(&payload(1, 5, 2, 0))).unwrap();
        let r = read_record(&mut s).unwrap();
        let waited = t.elapsed();
        assert_eq!(id_of(&r), 1);
        assert!(
            waited < TURN_END_WORK,
            "the reply waited {waited:?} for the turn's end"
        );
        let end = Instant::now() + Duration::from_secs(10);
        while inline && sv.svc.done_at_turn_end.load(Ordering::SeqCst) == 0 && Instant::now() < end
        {
            thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            sv.svc.done_at_turn_end.load(Ordering::SeqCst),
            usize::from(inline),
            "inline {inline}"
        );
        assert_eq!(
            sv.svc.turn_ends_off_loop.load(Ordering::SeqCst),
            0,
            "a turn's end ran off its event loop"
        );
        sv.h.shutdown();
        sv.h.wait();
    }
}

/// `Route::Alone`: a call is answered on the loop when nothing else of the
/// loop is ready (one call at a time), and goes to a worker when more
/// records of its connection wait behind it (a pipelined burst read in one
/// go: all but the last), unless the turn still has `alone_per_turn` left.
/// Returns how many of a burst of 20 ran on the loop.
fn alone_burst(alone_per_turn: usize) -> usize {
    let cfg = TransportConfig {
        alone_per_turn,
        ..TransportConfig::default()
    };
    let sv = server_with(cfg, pool(2));
    let mut s = connect(sv.addr);
    let ran_on_loop = |r: &[u8]| String::from_utf8_lossy(&r[4..]).starts_with("rnfsd-evloop");
    for id in 0..20u32 {
        s.write_all(&record(&payload(id, 7, 0, 0))).unwrap();
        let r = read_record(&mut s).unwrap();
        assert_eq!(id_of(&r), id);
        assert!(ran_on_loop(&r), "call {id} alone did not run on the loop");
    }
    let mut burst = Vec::new();
    for id in 100..120u32 {
        burst.extend(record(&payload(id, 7, 0, 0)));
    }
    s.write_all(&burst).unwrap();
    let mut on_loop = 0;
    for _ in 100..120 {
        let r = read_record(&mut s).unwrap();
        on_loop += usize::from(ran_on_loop(&r));
    }
    sv.h.shutdown();
    sv.h.wait();
    on_loop
}

#[test]
fn alone_calls_run_on_the_loop_only_when_nothing_else_waits() {
    // 20 small records arrive in one read: only the last has nothing
    // behind it (a few more if the kernel split the burst).
    let on_loop = alone_burst(0);
    assert!(on_loop <= 4, "{on_loop} of a burst of 20 ran on the loop");
}

#[test]
fn alone_calls_with_others_ready_run_on_the_loop_a_bounded_number_of_times_a_turn() {
    // The first 3 of the burst's turn with others behind them, then the
    // last; a split burst gives each of its turns 3 more.
    let on_loop = alone_burst(3);
    assert!(
        (4..=10).contains(&on_loop),
        "{on_loop} of a burst of 20 ran on the loop with 3 a turn"
    );
}

/// What op 6 answers for `id` with `n` data bytes (pad included).
fn spliced_reply(id: u32, n: usize) -> Vec<u8> {
    let mut v = id.to_be_bytes().to_vec();
    v.extend((0..n).map(|i| pattern(id, i)));
    v.resize(4 + n + (4 - n % 4) % 4, 0);
    v
}

#[test]
fn spliced_replies_and_plain_ones_arrive_whole_and_pipes_are_bounded() {
    let sv = server();
    let sizes = [0usize, 1, 3, 4095, 100_000, 200_001, 7];
    let n = 300u32;
    let mut s = connect(sv.addr);
    let mut w = s.try_clone().unwrap();
    let writer = thread::spawn(move || {
        let mut wire = Vec::new();
        for id in 0..n {
            let p = if id % 3 == 2 {
                payload(id, 0, 0, (id % 40) as usize)
            } else {
                payload(id, 6, sizes[id as usize % sizes.len()] as u32, 0)
            };
            wire.extend(record(&p));
        }
        w.write_all(&wire).unwrap();
    });
    // Read late: replies pile up in the socket and the output queue, pipes
    // with them; the pool's bound makes the rest go as copies.
    thread::sleep(Duration::from_millis(200));
    let mut seen = HashSet::new();
    for _ in 0..n {
        let r = read_record(&mut s).unwrap();
        let id = id_of(&r);
        let want = if id % 3 == 2 {
            payload(id, 0, 0, (id % 40) as usize)
        } else {
            spliced_reply(id, sizes[id as usize % sizes.len()])
        };
        assert!(
            r == want,
            "reply {id} differs ({} vs {} bytes)",
            r.len(),
            want.len()
        );
        assert!(seen.insert(id));
    }
    writer.join().unwrap();
    let made = sv.svc.pipes.pipes();
    assert!((1..=4).contains(&made), "{made} pipes");
    sv.h.shutdown();
}

#[test]
fn a_connection_closed_with_spliced_output_queued_frees_its_pipes() {
    let sv = server();
    {
        let mut s = connect(sv.addr);
        let mut wire = Vec::new();
        for id in 0..40 {
            wire.extend(record(&payload(id, 6, 200_000, 0)));
        }
        s.write_all(&wire).unwrap();
        // Never read: the output queue holds pipes until the close.
        wait_until("replies queued", Duration::from_secs(10), || {
            sv.h.stats().reply_bytes_queued > 0
        });
    }
    wait_until("connection closed", Duration::from_secs(10), || {
        sv.h.stats().connections_open == 0
    });
    // Every pipe is either pooled empty or gone: a new client gets its
    // data through them intact.
    let mut s = connect(sv.addr);
    for id in 0..8 {
        s.write_all(&record(&payload(id, 6, 100_000, 0))).unwrap();
        assert_eq!(read_record(&mut s).unwrap(), spliced_reply(id, 100_000));
    }
    assert!(sv.svc.pipes.pipes() <= 4);
    sv.h.shutdown();
}

/// A quick call the service gives back runs on its loop's pool when
/// nothing waits there (with pinned loops, the CPU the call arrived on),
/// and on the blocking pool when the loop's pool has work queued.
#[test]
fn given_back_calls_run_on_the_loop_pool_unless_it_is_busy() {
    let sv = server_with(
        TransportConfig {
            blocking_threads: 2,
            ..TransportConfig::default()
        },
        pool(1),
    );
    let mut s = connect(sv.addr);
    let name_of = |r: &[u8]| String::from_utf8_lossy(&r[4..]).into_owned();
    // Nothing waits: the loop's pool takes it.
    s.write_all(&record(&payload(1, 5, 1, 0))).unwrap();
    let r = read_record(&mut s).unwrap();
    assert!(!name_of(&r).starts_with("rnfsd-sync"), "{}", name_of(&r));
    // The loop pool's one worker sleeps and a second call waits behind it:
    // a call given back now goes to the blocking pool and overtakes both.
    let mut wire = record(&payload(2, 1, 300, 0));
    wire.extend(record(&payload(3, 1, 300, 0)));
    wire.extend(record(&payload(4, 5, 1, 0)));
    s.write_all(&wire).unwrap();
    let r = read_record(&mut s).unwrap();
    assert_eq!(id_of(&r), 4, "the given-back call answered first");
    assert!(name_of(&r).starts_with("rnfsd-sync"), "{}", name_of(&r));
    for _ in 0..2 {
        read_record(&mut s).unwrap();
    }
    sv.h.shutdown();
}

/// A burst of 32 pipelined short calls (`Route::Pool`) on one connection,
/// each 2 ms, through one worker: with `reply_batch` the worker holds each
/// reply while it goes straight on to the next call, so the replies leave
/// in batches (at most 16 each), not one write each; with it at 1 each
/// leaves alone. Every reply arrives either way.
fn burst_writes(reply_batch: usize) -> (u64, u64) {
    let sv = server_with(
        TransportConfig {
            reply_batch,
            ..TransportConfig::default()
        },
        pool(1),
    );
    let mut s = connect(sv.addr);
    s.write_all(&burst(32, 1, 2)).unwrap();
    assert_eq!(read_ids(&mut s, 32), (0..32).collect::<Vec<_>>());
    wait_until("every reply counted", Duration::from_secs(5), || {
        sv.h.stats().replies_out == 32
    });
    let st = sv.h.stats();
    sv.h.shutdown();
    (st.replies_out, st.writes_out)
}

#[test]
fn a_workers_replies_to_one_connection_leave_together() {
    let (replies, writes) = burst_writes(16);
    // The first call may start before the rest arrive; then 16 per write.
    assert!(writes <= 4, "{replies} replies in {writes} writes");
    let (replies, writes) = burst_writes(1);
    assert_eq!((replies, writes), (32, 32), "reply_batch 1: one write each");
}

/// A held reply never waits for a call that may wait for the disk: the
/// quick call's reply arrives while the blocking call after it (same
/// connection, same single worker, no blocking pool) is still held.
#[test]
fn a_held_reply_does_not_wait_behind_a_blocking_call() {
    let sv = server_with(TransportConfig::default(), pool(1));
    let mut s = connect(sv.addr);
    let mut wire = record(&payload(1, 0, 0, 0));
    wire.extend(record(&payload(2, 4, 0, 0)));
    let t0 = Instant::now();
    s.write_all(&wire).unwrap();
    let r = read_record(&mut s).expect("the quick call's reply while the other blocks");
    assert_eq!(id_of(&r), 1);
    // The gate holds the blocking call up to 10 s.
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "held behind the blocking call"
    );
    // The held reply leaves just before the blocking call starts: wait for
    // that call to be running (still behind the closed gate).
    wait_until("the blocking call running", Duration::from_secs(5), || {
        sv.svc.calls.load(Ordering::SeqCst) == 2
    });
    sv.svc.open_gate();
    assert_eq!(id_of(&read_record(&mut s).unwrap()), 2);
    sv.h.shutdown();
}

/// A client that sends a burst and half-closes gets every reply, held ones
/// included, before the server closes (held calls count as in flight).
#[test]
fn held_replies_go_out_before_a_half_closed_connection_closes() {
    let sv = server_with(TransportConfig::default(), pool(1));
    let mut s = connect(sv.addr);
    s.write_all(&burst(40, 1, 1)).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_ids(&mut s, 40), (0..40).collect::<Vec<_>>());
    assert_closed(&mut s);
    sv.h.shutdown();
}

// ---------- the buffered-bytes budget, shared among clients ----------

/// The budget of these tests; its least share is `max_record` + 64 KiB
/// (1.125 MiB by default), so a 1 MiB call always fits.
const BUDGET: usize = 4 << 20;

fn budget_server(hog_time: Duration) -> Server {
    server_with(
        TransportConfig {
            max_buffered_bytes: BUDGET,
            budget_hog_time: hog_time,
            ..TransportConfig::default()
        },
        pool(2),
    )
}

/// `conns` connections from 127.0.0.2 that each pipeline `calls` op-9
/// calls of 256 KiB and never read: together far over the budget.
fn never_reading_hog(addr: SocketAddr, conns: usize, calls: u32) -> Vec<TcpStream> {
    let burst: Vec<u8> = (0..calls)
        .flat_map(|id| record(&payload(id, 9, 256 << 10, 0)))
        .collect();
    (0..conns)
        .map(|_| {
            let mut s = connect_from("127.0.0.2", addr);
            s.write_all(&burst).unwrap();
            s
        })
        .collect()
}

/// Until there is no room in the budget for another of the hog's calls.
fn hog_fills_the_budget(sv: &Server) {
    wait_until("the hog fills the budget", Duration::from_secs(10), || {
        sv.h.stats().buffered_bytes + (256 << 10) + 8 > BUDGET as u64
    });
}

/// One op-9 call of `n` bytes on `s`; how long its reply took.
fn large_call(s: &mut TcpStream, id: u32, n: u32) -> Duration {
    let t = Instant::now();
    s.write_all(&record(&payload(id, 9, n, 0))).unwrap();
    let r = read_record(s).unwrap();
    assert_eq!((id_of(&r), r.len()), (id, 4 + n as usize));
    t.elapsed()
}

/// Read (and drop) what `s` holds until the server closes it: EOF or
/// reset within `within`.
fn wait_closed(s: &mut TcpStream, within: Duration) {
    let t0 = Instant::now();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut b = vec![0u8; 64 << 10];
    loop {
        match s.read(&mut b) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                assert!(
                    t0.elapsed() < within,
                    "connection still open after {within:?}"
                );
            }
            Err(_) => return,
        }
    }
}

/// Whether the server closed `s` (EOF or reset), reading and dropping
/// what it still holds; false if it is open with nothing to read.
fn server_closed(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut b = vec![0u8; 64 << 10];
    let closed = loop {
        match (&*s).read(&mut b) {
            Ok(0) => break true,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break false,
            Err(_) => break true,
        }
    };
    s.set_nonblocking(false).unwrap();
    closed
}

/// Until records_in stops growing (for 300 ms).
fn records_settle(sv: &Server) -> u64 {
    let mut last = sv.h.stats().records_in;
    let t0 = Instant::now();
    loop {
        thread::sleep(Duration::from_millis(300));
        let now = sv.h.stats().records_in;
        if now == last {
            return now;
        }
        last = now;
        assert!(t0.elapsed() < Duration::from_secs(10), "never settled");
    }
}

/// One client (address) pins the budget with replies it never reads: it
/// is held to its share and not read, while a client within its share
/// keeps being read and its calls with 1 MiB replies (no room in the
/// budget) are answered at once.
#[test]
fn a_client_within_its_share_is_served_while_another_hogs_the_budget() {
    // The hog is never disconnected here: the share alone serves the other.
    let sv = budget_server(Duration::from_secs(600));
    let hog = never_reading_hog(sv.addr, 8, 64);
    hog_fills_the_budget(&sv);
    let before = records_settle(&sv);
    let calls = sv.svc.calls.load(Ordering::SeqCst);
    let mut good = connect_from("127.0.0.1", sv.addr);
    let mut worst = Duration::ZERO;
    for id in 0..20 {
        worst = worst.max(large_call(&mut good, id, 1 << 20));
        // Time for the hog's waiting calls to be retried in between.
        thread::sleep(Duration::from_millis(60));
    }
    eprintln!("1 MiB calls beside a hog: slowest {worst:?}");
    assert!(
        worst < Duration::from_secs(2),
        "a 1 MiB call took {worst:?}"
    );
    // Only the good client's records were read, and only its calls ran:
    // the room each of them frees does not go to the hog, over its share.
    let st = sv.h.stats();
    assert_eq!(st.records_in, before + 20, "{st:?}");
    assert_eq!(sv.svc.calls.load(Ordering::SeqCst), calls + 20);
    // Held to the budget plus the good client's share (one 1 MiB call at
    // a time) and one read.
    assert!(st.buffered_bytes <= (BUDGET + (2 << 20)) as u64, "{st:?}");
    assert_eq!(st.budget_clients_closed, 0);
    drop(hog);
    sv.h.shutdown();
}

/// A client over its share that drains nothing for `budget_hog_time` has
/// its connections closed, which frees the budget; its address may come
/// back, and the other client was served throughout.
#[test]
fn a_client_over_its_share_that_drains_nothing_is_disconnected() {
    let hog_time = Duration::from_millis(500);
    let sv = budget_server(hog_time);
    let hog = never_reading_hog(sv.addr, 8, 64);
    hog_fills_the_budget(&sv);
    let mut good = connect_from("127.0.0.1", sv.addr);
    let t = large_call(&mut good, 1, 1 << 20);
    eprintln!("1 MiB call beside a hog: {t:?}");
    assert!(t < Duration::from_secs(2), "a 1 MiB call took {t:?}");
    // The good client keeps calling meanwhile: the room each of its calls
    // frees must not go to the hog (which would then seem to drain). The
    // hog's sockets are not read until it is gone (that would drain it).
    let t0 = Instant::now();
    let mut id = 2;
    while sv.h.stats().connections_open > 1 {
        assert!(
            t0.elapsed() < hog_time + Duration::from_secs(5),
            "hog still connected after {:?}",
            t0.elapsed()
        );
        let t = large_call(&mut good, id, 1 << 20);
        assert!(t < Duration::from_secs(2), "a 1 MiB call took {t:?}");
        id += 1;
        thread::sleep(Duration::from_millis(20));
    }
    eprintln!("hog closed {:?} after the good call", t0.elapsed());
    wait_until("the hog's sockets closed", Duration::from_secs(5), || {
        hog.iter().all(server_closed)
    });
    wait_until("the budget freed", Duration::from_secs(5), || {
        sv.h.stats().buffered_bytes < (64 << 10)
    });
    let st = sv.h.stats();
    assert_eq!(st.budget_clients_closed, 1, "{st:?}");
    // The good client's connection was kept and still works; the hog's
    // address may connect again.
    assert!(large_call(&mut good, id, 1 << 20) < Duration::from_secs(2));
    let mut back = connect_from("127.0.0.2", sv.addr);
    let p = payload(3, 0, 0, 0);
    back.write_all(&record(&p)).unwrap();
    assert_eq!(read_record(&mut back).unwrap(), p);
    sv.h.shutdown();
}

/// Partial records count against the client's share: a client that sends
/// most of a large record on many connections and then nothing is not
/// read past its share (the server holds about the budget, not all it
/// sent), a client with a 1 MiB call is answered at once, and the
/// trickler is disconnected.
#[test]
fn a_client_trickling_partial_records_is_held_to_its_share_then_disconnected() {
    let hog_time = Duration::from_millis(500);
    let sv = budget_server(hog_time);
    // 16 records of 1 MiB, 900 KiB of each sent: 14 MiB against 4 MiB.
    let body = payload(7, 0, 0, (1 << 20) - 9);
    let mut trickle: Vec<TcpStream> = (0..16)
        .map(|_| {
            let mut s = connect_from("127.0.0.2", sv.addr);
            s.write_all(&record(&body)[..900 << 10]).unwrap();
            s
        })
        .collect();
    wait_until(
        "partial records fill the budget",
        Duration::from_secs(10),
        || sv.h.stats().buffered_bytes > BUDGET as u64,
    );
    // A byte more on each changes nothing.
    for s in trickle.iter_mut() {
        s.write_all(&[0xab]).unwrap();
    }
    let mut good = connect_from("127.0.0.1", sv.addr);
    let t = large_call(&mut good, 1, 1 << 20);
    let st = sv.h.stats();
    eprintln!("1 MiB call beside partial records: {t:?}; {st:?}");
    assert!(t < Duration::from_secs(2), "a 1 MiB call took {t:?}");
    // Not read past its share: the budget, one record read before it was
    // seen spent, and one read.
    assert!(
        st.bytes_in < (BUDGET + (1 << 20) + (2 << 20)) as u64,
        "{st:?}"
    );
    for s in trickle.iter_mut() {
        wait_closed(s, hog_time + Duration::from_secs(5));
    }
    let st = sv.h.stats();
    assert_eq!(st.budget_clients_closed, 1, "{st:?}");
    assert_eq!(st.records_in, 1, "{st:?}");
    sv.h.shutdown();
}

/// Under pressure, room that frees in the budget goes only to clients
/// within their share: a client over its share does not grow again.
#[test]
fn room_freed_under_pressure_goes_only_to_clients_within_their_share() {
    let sv = budget_server(Duration::from_secs(600));
    // The good client holds 1.5 MiB of reply room for a second ...
    let mut good = connect_from("127.0.0.1", sv.addr);
    good.write_all(&record(&payload(1, 10, 3 << 19, 0)))
        .unwrap();
    wait_until("the slow call runs", Duration::from_secs(5), || {
        sv.h.stats().buffered_bytes >= 3 << 19
    });
    // ... while the hog takes what it may: about its share (half the
    // budget, as the good client is active).
    let hog = never_reading_hog(sv.addr, 8, 64);
    // Taken all it may: no new call in three checks in a row (one quiet
    // check can be a busy machine's pause, not the share's limit).
    let mut calls = sv.svc.calls.load(Ordering::SeqCst);
    let mut quiet = 0;
    let end = Instant::now() + Duration::from_secs(30);
    while quiet < 3 && Instant::now() < end {
        thread::sleep(Duration::from_millis(200));
        let now = sv.svc.calls.load(Ordering::SeqCst);
        quiet = if now == calls { quiet + 1 } else { 0 };
        calls = now;
    }
    let held = sv.h.stats().buffered_bytes;
    assert!(held > (3 << 20), "{held}");
    // The slow call ends: 1.5 MiB of room, which the hog does not get.
    let r = read_record(&mut good).unwrap();
    assert_eq!(id_of(&r), 1);
    thread::sleep(Duration::from_millis(300));
    let st = sv.h.stats();
    assert_eq!(sv.svc.calls.load(Ordering::SeqCst), calls, "{st:?}");
    assert!(st.buffered_bytes < held - (1 << 20), "{st:?}");
    // The good client's next calls are served.
    assert!(large_call(&mut good, 2, 1 << 20) < Duration::from_secs(2));
    drop(hog);
    sv.h.shutdown();
}
