//! The event loops: accept, read and reassemble records, submit them to the
//! pool, finish queued replies on writability, apply backpressure.

use crate::conn::{Conn, Work};
use crate::record::RecordReader;
use crate::sys;
use crate::{
    bump, Handle, HandleInner, IdleConn, Inline, Limits, LoopNotify, LoopStats, Msg, PoolLayout,
    Request, Route, Service, Shared, State, TransportConfig, WorkerStats, DRAINING, FINAL, RUNNING,
};
use crossbeam_utils::CachePadded;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use rnfsd_pool::{affinity, Pool, PoolConfig, SubmitError, Threads};
use std::collections::VecDeque;
use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

const WAKER: Token = Token(usize::MAX);

/// Where `evict_oldest_idle` made room.
enum Evicted {
    Here,
    Elsewhere,
    None,
}
const LISTENER_BASE: usize = usize::MAX / 2;
/// Bytes per read syscall (one per-loop buffer, reused).
const READ_CHUNK: usize = 64 << 10;
/// Over the buffered-bytes budget, a connection with nothing outstanding
/// may still make a call whose reply is at most this large.
const FREE_REPLY: usize = 64 << 10;
/// Fragment bodies still owing this much are read straight into the record.
const DIRECT_MIN: usize = 16 << 10;
/// Reads per connection per turn, so one flooding client cannot starve the
/// others of its loop (16 × 64 KiB = 1 MiB).
const READ_BUDGET: usize = 16;
/// Reply bytes a loop gathers for one connection before sending them.
const BATCH_BYTES: usize = 256 << 10;
/// Retry interval while the pool queue is full.
const STALL_RETRY: Duration = Duration::from_millis(1);
/// Pause after an accept error such as EMFILE (the listener stays readable
/// but edge-triggered, so we must come back by timer).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

pub(crate) fn start(
    cfg: TransportConfig,
    pool_cfg: PoolConfig,
    service: Arc<dyn Service>,
) -> io::Result<Handle> {
    let mut listeners = cfg.listeners;
    for a in &cfg.listen {
        listeners.push(TcpListener::bind(a)?);
    }
    if listeners.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "rnfsd-transport: no listen address",
        ));
    }
    let mut addrs = Vec::with_capacity(listeners.len());
    for l in &listeners {
        l.set_nonblocking(true)?;
        addrs.push(l.local_addr()?);
    }
    let n = cfg.event_threads.max(1);
    let mut polls = Vec::with_capacity(n);
    let mut loops = Vec::with_capacity(n);
    for _ in 0..n {
        let p = Poll::new()?;
        loops.push(LoopNotify {
            waker: Waker::new(p.registry(), WAKER)?,
            inbox: Mutex::new(Vec::new()),
        });
        polls.push(p);
    }
    if let Some(p) = polls.first() {
        for (j, l) in listeners.iter().enumerate() {
            p.registry().register(
                &mut SourceFd(&l.as_raw_fd()),
                Token(LISTENER_BASE + j),
                Interest::READABLE,
            )?;
        }
    }
    // CPU of each loop (and of its pool, if per loop), when pinning.
    let cpus: Vec<Option<usize>> = if cfg.pin_loops {
        match affinity::allowed_cpus() {
            Ok(c) if !c.is_empty() => (0..n).map(|i| c.get(i % c.len()).copied()).collect(),
            Ok(_) => vec![None; n],
            Err(e) => {
                tracing::warn!("pin_loops: cannot read CPU affinity: {e}; not pinning");
                vec![None; n]
            }
        }
    } else {
        vec![None; n]
    };
    let pools: Vec<Arc<Pool<Work>>> = match cfg.pools {
        PoolLayout::Shared => vec![Arc::new(Pool::new(pool_cfg.clone())?)],
        PoolLayout::PerLoop => {
            let mut v = Vec::with_capacity(n);
            for (i, cpu) in cpus.iter().enumerate() {
                let c = split_pool(&pool_cfg, n, i, *cpu);
                // On error the pools already made shut down as they drop.
                v.push(Arc::new(Pool::new(c)?));
            }
            v
        }
    };
    // The blocking pool: shared by the loops, not pinned (its threads
    // mostly sleep in fsync).
    let blocking = if cfg.blocking_threads > 0 {
        Some(Arc::new(Pool::new(PoolConfig {
            threads: Threads::Adaptive {
                min: 1,
                max: cfg.blocking_threads,
            },
            name: "rnfsd-sync".into(),
            cpu: None,
            nice: cfg.blocking_nice,
            ..pool_cfg.clone()
        })?))
    } else {
        None
    };
    let shared = Arc::new(Shared {
        service,
        limits: Limits {
            max_connections: cfg.max_connections.max(1),
            max_connections_per_client: cfg.max_connections_per_client,
            max_record: cfg.max_record,
            max_inflight_per_conn: cfg.max_inflight_per_conn.max(1),
            max_conn_output: cfg.max_conn_output,
            max_buffered_bytes: cfg.max_buffered_bytes,
            idle_timeout: cfg.idle_timeout,
            shutdown_timeout: cfg.shutdown_timeout,
            run_inline: cfg.run_inline,
            reply_batch: cfg.reply_batch,
        },
        loops,
        loop_cpus: cpus.clone(),
        stats: WorkerStats::default(),
        loop_stats: (0..n)
            .map(|_| CachePadded::new(LoopStats::default()))
            .collect(),
        open: AtomicUsize::new(0),
        per_client: Mutex::new(std::collections::HashMap::new()),
        next_conn_id: AtomicU64::new(1),
        phase: AtomicU8::new(RUNNING),
        drained: Mutex::new(0),
        drained_cv: Condvar::new(),
    });
    let mut threads = Vec::with_capacity(n);
    let mut listeners = Some(listeners);
    for (idx, poll) in polls.into_iter().enumerate() {
        let ls = if idx == 0 {
            listeners.take().unwrap_or_default()
        } else {
            Vec::new()
        };
        let pool = pools.get(idx % pools.len()).cloned();
        let cpu = cpus.get(idx).copied().flatten();
        let Some(pool) = pool else {
            return Err(io::Error::other("rnfsd-transport: no pool"));
        };
        let el = EventLoop::new(idx, poll, shared.clone(), pool, blocking.clone(), ls);
        let t = std::thread::Builder::new()
            .name(format!("rnfsd-evloop-{idx}"))
            .spawn(move || {
                if let Some(c) = cpu {
                    if let Err(e) = affinity::pin_current_thread(c) {
                        tracing::warn!("cannot pin event loop {idx} to cpu {c}: {e}");
                    }
                }
                el.run()
            });
        match t {
            Ok(t) => threads.push(t),
            Err(e) => {
                // Stop what started; the handle's shutdown does it all.
                let h = Handle {
                    inner: Arc::new(HandleInner {
                        shared,
                        pools,
                        addrs,
                        threads: Mutex::new(threads),
                        state: Mutex::new(State::Running),
                        state_cv: Condvar::new(),
                    }),
                };
                h.shutdown();
                return Err(e);
            }
        }
    }
    // Shut down and counted with the others.
    let mut pools = pools;
    pools.extend(blocking);
    Ok(Handle {
        inner: Arc::new(HandleInner {
            shared,
            pools,
            addrs,
            threads: Mutex::new(threads),
            state: Mutex::new(State::Running),
            state_cv: Condvar::new(),
        }),
    })
}

/// Loop `idx`'s share of `cfg` under `PoolLayout::PerLoop` (see there):
/// counts divided by `loops`, rounded up.
pub fn split_pool(cfg: &PoolConfig, loops: usize, idx: usize, cpu: Option<usize>) -> PoolConfig {
    let loops = loops.max(1);
    let part = |x: usize| x.div_ceil(loops);
    PoolConfig {
        threads: match cfg.threads {
            Threads::Fixed(t) => Threads::Fixed(part(t).max(1)),
            Threads::Adaptive { min, max } => Threads::Adaptive {
                min: part(min),
                max: part(max).max(1),
            },
        },
        queue_limit: part(cfg.queue_limit).max(1),
        // One loop: exactly the configured pool, name included.
        name: if loops > 1 {
            format!("{}{idx}", cfg.name)
        } else {
            cfg.name.clone()
        },
        cpu: cpu.or(cfg.cpu),
        ..cfg.clone()
    }
}

/// Loop-private state of one connection.
struct Entry {
    conn: Arc<Conn>,
    rd: RecordReader,
    last_active: Instant,
    /// In the `run` list (avoid duplicates).
    scheduled: bool,
    /// In the `stalled` list (pool queue was full).
    stalled: bool,
    /// Peer finished sending.
    eof: bool,
    /// Bytes of a partial record counted against `max_buffered_bytes`.
    held: usize,
    /// The socket's SO_RCVLOWAT, when above 1 (waiting for a large
    /// fragment's body in one wakeup).
    lowat: usize,
}

impl Entry {
    /// The socket has less than the large fragment still owes: ask the
    /// kernel not to report it readable before the rest is in, so the body
    /// is read in one wakeup, not one per segment (1 MiB WRITE, one stream:
    /// 3.7 -> 2.8 context switches, docs/request-path.md). At most half the
    /// current receive buffer: a low-water mark the buffer must grow to fit
    /// also clamps the receive window (`tcp_set_rcvlowat`). It cannot stall
    /// a connection: the kernel reports readable early when the receive
    /// memory nears its limit or the window closes (`tcp_epollin_ready`),
    /// and at end of stream or error.
    fn wait_for_fragment(&mut self) {
        let sock = &self.conn.sock;
        let buf = rustix::net::sockopt::socket_recv_buffer_size(sock).unwrap_or(0);
        let want = self.rd.frag_owed().min(buf / 2).max(1);
        if want != self.lowat.max(1) && sys::set_rcvlowat(sock, want).is_ok() {
            self.lowat = want;
        }
    }

    /// Between large fragments: readable again at the first byte.
    fn end_fragment_wait(&mut self) {
        if self.lowat > 1 && sys::set_rcvlowat(&self.conn.sock, 1).is_ok() {
            self.lowat = 0;
        }
    }
}

enum ReadOutcome {
    /// Read something; go on.
    More,
    /// Nothing more now (would block, or backpressure).
    Stop,
    /// The peer finished sending.
    Eof,
    /// Error or protocol violation: close.
    Close,
}

enum Submitted {
    /// All ready records are in the pool.
    All,
    /// Stopped: in-flight bound, pool full, or pool closed.
    Blocked,
}

struct EventLoop {
    idx: usize,
    poll: Poll,
    shared: Arc<Shared>,
    pool: Arc<Pool<Work>>,
    /// Calls that may wait for stable storage go here, when there is one.
    blocking: Option<Arc<Pool<Work>>>,
    /// Offer records to `Service::call_inline` (run to completion).
    run_inline: bool,
    /// Replies produced on this thread for the connection being read,
    /// sent together (reused buffer).
    batch: Vec<crate::Reply>,
    batch_bytes: usize,
    listeners: Vec<TcpListener>,
    conns: Vec<Option<Entry>>,
    free: Vec<usize>,
    /// Connections that may have readable data (or ready records) to
    /// process this turn.
    run: VecDeque<usize>,
    /// Connections whose next record the full pool refused, or that hold
    /// something while the buffered-bytes budget is spent.
    stalled: Vec<usize>,
    /// `max_buffered_bytes` is spent (computed once per turn).
    over_budget: bool,
    /// Bytes buffered across all loops when last summed, and the reply
    /// room this loop reserved since: summing every per-CPU cell per call
    /// would cost a cache line per CPU on each one.
    buffered_seen: u64,
    reserved_since: u64,
    warned_budget: bool,
    scratch: Box<[u8]>,
    evbuf: Vec<(Token, bool, bool)>,
    rr: usize,
    accept_paused_until: Option<Instant>,
    warned_limit: bool,
    next_sweep: Instant,
    sweep_every: Duration,
    phase: u8,
    final_deadline: Option<Instant>,
}

impl EventLoop {
    fn new(
        idx: usize,
        poll: Poll,
        shared: Arc<Shared>,
        pool: Arc<Pool<Work>>,
        blocking: Option<Arc<Pool<Work>>>,
        listeners: Vec<TcpListener>,
    ) -> EventLoop {
        let sweep_every = (shared.limits.idle_timeout / 4)
            .clamp(Duration::from_millis(10), Duration::from_secs(1));
        EventLoop {
            idx,
            poll,
            run_inline: shared.limits.run_inline,
            batch: Vec::new(),
            batch_bytes: 0,
            shared,
            pool,
            blocking,
            listeners,
            conns: Vec::new(),
            free: Vec::new(),
            run: VecDeque::new(),
            stalled: Vec::new(),
            over_budget: false,
            buffered_seen: 0,
            reserved_since: 0,
            warned_budget: false,
            scratch: vec![0u8; READ_CHUNK].into_boxed_slice(),
            evbuf: Vec::with_capacity(256),
            rr: 0,
            accept_paused_until: None,
            warned_limit: false,
            next_sweep: Instant::now() + sweep_every,
            sweep_every,
            phase: RUNNING,
            final_deadline: None,
        }
    }

    fn stats(&self) -> &LoopStats {
        // `loop_stats` has one cell per loop; idx < loops by construction.
        &self.shared.loop_stats[self.idx]
    }

    fn run(mut self) {
        let mut events = Events::with_capacity(256);
        loop {
            let phase = self.shared.phase.load(SeqCst);
            if phase >= DRAINING && self.phase < DRAINING {
                self.enter_draining();
            }
            if phase >= FINAL && self.phase < FINAL {
                self.enter_final();
            }
            if self.phase == FINAL {
                let late = self.final_deadline.is_some_and(|d| Instant::now() >= d);
                if late || self.conns.iter().all(Option::is_none) {
                    if late {
                        tracing::warn!("shutdown: closing connections with unsent replies");
                    }
                    for i in 0..self.conns.len() {
                        self.close(i);
                    }
                    self.drain_inbox();
                    return;
                }
            }
            let timeout = self.timeout();
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    tracing::error!("epoll_wait: {e}");
                    std::thread::sleep(Duration::from_millis(10));
                }
                continue;
            }
            self.evbuf.clear();
            for ev in events.iter() {
                let r = ev.is_readable() || ev.is_read_closed() || ev.is_error();
                let w = ev.is_writable() || ev.is_write_closed() || ev.is_error();
                self.evbuf.push((ev.token(), r, w));
            }
            for k in 0..self.evbuf.len() {
                let Some(&(t, r, w)) = self.evbuf.get(k) else {
                    break;
                };
                if t == WAKER {
                    continue;
                }
                if t.0 >= LISTENER_BASE {
                    self.accept(t.0 - LISTENER_BASE);
                } else {
                    self.conn_event(t.0, r, w);
                }
            }
            self.drain_inbox();
            if let Some(t) = self.accept_paused_until {
                if Instant::now() >= t {
                    self.accept_paused_until = None;
                    for j in 0..self.listeners.len() {
                        self.accept(j);
                    }
                }
            }
            if self.phase == RUNNING {
                for i in std::mem::take(&mut self.stalled) {
                    if let Some(Some(e)) = self.conns.get_mut(i) {
                        e.stalled = false;
                        self.schedule(i);
                    }
                }
                self.process_run();
            }
            if Instant::now() >= self.next_sweep {
                self.sweep();
            }
        }
    }

    fn timeout(&self) -> Option<Duration> {
        if !self.run.is_empty() {
            return Some(Duration::ZERO);
        }
        let now = Instant::now();
        let mut t = self.next_sweep.saturating_duration_since(now);
        if !self.stalled.is_empty() {
            t = t.min(STALL_RETRY);
        }
        if let Some(a) = self.accept_paused_until {
            t = t.min(a.saturating_duration_since(now));
        }
        if let Some(d) = self.final_deadline {
            t = t.min(d.saturating_duration_since(now));
        }
        Some(t)
    }

    fn enter_draining(&mut self) {
        self.phase = DRAINING;
        for l in std::mem::take(&mut self.listeners) {
            let _ = self
                .poll
                .registry()
                .deregister(&mut SourceFd(&l.as_raw_fd()));
        }
        self.run.clear();
        self.stalled.clear();
        for e in self.conns.iter_mut().flatten() {
            // Received but never handed to the pool: not in flight, dropped
            // (the client retransmits on its next connection).
            e.rd = RecordReader::default();
            e.scheduled = false;
            e.stalled = false;
        }
        let mut n = self
            .shared
            .drained
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *n += 1;
        drop(n);
        self.shared.drained_cv.notify_all();
    }

    fn enter_final(&mut self) {
        self.phase = FINAL;
        self.final_deadline = Some(Instant::now() + self.shared.limits.shutdown_timeout);
        for i in 0..self.conns.len() {
            if let Some(Some(e)) = self.conns.get(i) {
                let c = e.conn.clone();
                if c.wants_write() {
                    c.flush();
                }
                if c.queued_bytes() == 0 {
                    self.close(i);
                }
            }
        }
    }

    fn schedule(&mut self, i: usize) {
        if let Some(Some(e)) = self.conns.get_mut(i) {
            if !e.scheduled {
                e.scheduled = true;
                self.run.push_back(i);
            }
        }
    }

    fn accept(&mut self, j: usize) {
        if self.phase != RUNNING || self.accept_paused_until.is_some() {
            return;
        }
        loop {
            let Some(l) = self.listeners.get(j) else {
                return;
            };
            match l.accept() {
                Ok((s, peer)) => self.on_accept(s, peer),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) => {}
                Err(e) => {
                    tracing::warn!("accept: {e}; pausing accepts for {ACCEPT_BACKOFF:?}");
                    self.accept_paused_until = Some(Instant::now() + ACCEPT_BACKOFF);
                    return;
                }
            }
        }
    }

    fn on_accept(&mut self, s: TcpStream, peer: SocketAddr) {
        // Strangers never hold a slot: a peer no export lists is closed at
        // once, before it is counted.
        if !self.shared.service.admit(&peer) {
            bump(&self.stats().refused, 1);
            tracing::debug!("{peer} is not a listed client; closing");
            return; // dropping `s` closes it
        }
        let max = self.shared.limits.max_connections;
        // At the limit, the oldest idle connection makes room (knfsd's
        // svc_check_conn_limits): idle clients cannot lock out new ones.
        // One closing on another loop is counted as room already.
        let mut room = 0;
        if self.shared.open.load(SeqCst) >= max {
            match self.evict_oldest_idle() {
                Evicted::Here => bump(&self.stats().evicted, 1),
                Evicted::Elsewhere => {
                    bump(&self.stats().evicted, 1);
                    room = 1;
                }
                Evicted::None => {}
            }
        }
        if self.shared.open.load(SeqCst) >= max + room {
            bump(&self.stats().refused, 1);
            if !self.warned_limit {
                tracing::warn!("max_connections ({max}) reached; refusing {peer}");
                self.warned_limit = true;
            }
            return; // dropping `s` closes it
        }
        self.warned_limit = false;
        if !self.shared.admit_client(&peer) {
            bump(&self.stats().refused, 1);
            tracing::debug!(
                "max_connections_per_client ({}) reached; refusing {peer}",
                self.shared.limits.max_connections_per_client
            );
            return; // dropping `s` closes it
        }
        self.shared.open.fetch_add(1, SeqCst);
        if let Err(e) = s.set_nonblocking(true) {
            tracing::debug!("set_nonblocking for {peer}: {e}");
            self.shared.release(&peer);
            return;
        }
        // RPC is request/response: never delay a reply's last segment.
        let _ = s.set_nodelay(true);
        bump(&self.stats().accepted, 1);
        let target = self.steer(&s);
        if target == self.idx {
            self.add_conn(s, peer);
        } else if let Some(n) = self.shared.loops.get(target) {
            n.send(Msg::NewConn(s, peer));
        }
    }

    /// The loop for a new connection, counted in its `open` at once (so a
    /// burst of accepts balances). Where loops are pinned: the one on the
    /// CPU the connection's packets arrive on (SO_INCOMING_CPU: where its
    /// receive softirq ran; on loopback, the client's CPU), unless that
    /// would put it more than `STEER_SLACK` connections above the least
    /// loaded loop. The loop is then woken where the kernel received the
    /// call, with no wakeup across CPUs (on the 2-vCPU guest of our benchmarks one costs about
    /// 35 µs, three times a whole GETATTR). Otherwise the least loaded
    /// loop; loops not pinned, round-robin.
    fn steer(&mut self, s: &TcpStream) -> usize {
        // Two, not one: a client's idle connection (its MOUNT, or a second
        // one it keeps) must not push its busy one to another CPU.
        const STEER_SLACK: usize = 2;
        let n = self.shared.loops.len().max(1);
        let open = |i: usize| {
            self.shared
                .loop_stats
                .get(i)
                .map_or(usize::MAX, |l| l.open.load(SeqCst))
        };
        let target = if self.shared.loop_cpus.iter().all(Option::is_none) {
            let rr = self.rr % n;
            self.rr = self.rr.wrapping_add(1);
            rr
        } else {
            let least = (0..n).min_by_key(|&i| open(i)).unwrap_or(0);
            match rustix::net::sockopt::socket_incoming_cpu(s) {
                Ok(cpu) => (0..n)
                    .filter(|&i| {
                        self.shared.loop_cpus.get(i).copied().flatten() == Some(cpu as usize)
                    })
                    .min_by_key(|&i| open(i))
                    .filter(|&i| open(i) < open(least) + STEER_SLACK)
                    .unwrap_or(least),
                Err(_) => least,
            }
        };
        if let Some(l) = self.shared.loop_stats.get(target) {
            l.open.fetch_add(1, SeqCst);
        }
        target
    }

    fn add_conn(&mut self, s: TcpStream, peer: SocketAddr) {
        if self.phase != RUNNING {
            self.shared.release(&peer);
            self.stats().open.fetch_sub(1, SeqCst);
            return;
        }
        let local = match s.local_addr() {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!("local_addr for {peer}: {e}");
                self.shared.release(&peer);
                self.stats().open.fetch_sub(1, SeqCst);
                return;
            }
        };
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.conns.push(None);
                self.conns.len() - 1
            }
        };
        let fd = s.as_raw_fd();
        if let Err(e) = self.poll.registry().register(
            &mut SourceFd(&fd),
            Token(i),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            tracing::warn!("epoll register for {peer}: {e}");
            self.free.push(i);
            self.shared.release(&peer);
            self.stats().open.fetch_sub(1, SeqCst);
            return;
        }
        let id = self.shared.next_conn_id.fetch_add(1, SeqCst);
        let conn = Arc::new(Conn::new(
            id,
            s,
            peer,
            local,
            self.idx,
            i,
            self.shared.clone(),
        ));
        tracing::debug!(conn = id, %peer, "connection opened");
        if let Some(slot) = self.conns.get_mut(i) {
            *slot = Some(Entry {
                conn,
                rd: RecordReader::default(),
                lowat: 0,
                last_active: Instant::now(),
                scheduled: false,
                stalled: false,
                held: 0,
                eof: false,
            });
        }
        self.schedule(i);
    }

    /// This loop's connection idle the longest (nothing in flight, nothing
    /// queued): a pass over this loop's connections, bounded by
    /// `max_connections`, no lock held; run only at the limit.
    fn oldest_idle(&self) -> Option<IdleConn> {
        self.conns
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.as_ref().map(|e| (i, e)))
            .filter(|(_, e)| e.conn.inflight.load(SeqCst) == 0 && e.conn.queued_bytes() == 0)
            .min_by_key(|(_, e)| e.last_active)
            .map(|(token, e)| IdleConn {
                since: e.last_active,
                lp: self.idx,
                token,
                id: e.conn.id,
            })
    }

    /// Close the connection idle the longest on any loop (connections are
    /// steered by CPU, so the oldest is often on another loop). Other loops
    /// are asked at once and answered within `QUERY_WAIT` (one loop
    /// iteration; only a loop that is gone misses it). A remote victim
    /// closes when its loop reads the request, which comes before its next
    /// answer to us: the limit is exceeded by at most one, briefly.
    fn evict_oldest_idle(&mut self) -> Evicted {
        const QUERY_WAIT: Duration = Duration::from_millis(50);
        let (tx, rx) = std::sync::mpsc::channel();
        let mut asked = 0;
        for (j, n) in self.shared.loops.iter().enumerate() {
            let holds = self
                .shared
                .loop_stats
                .get(j)
                .is_some_and(|l| l.open.load(SeqCst) > 0);
            if j != self.idx && holds {
                n.send(Msg::OldestIdle(tx.clone()));
                asked += 1;
            }
        }
        drop(tx);
        let mut best = self.oldest_idle();
        let deadline = Instant::now() + QUERY_WAIT;
        for _ in 0..asked {
            let wait = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok(Some(c)) if best.is_none_or(|b| c.since < b.since) => best = Some(c),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        match best {
            Some(c) if c.lp == self.idx => {
                tracing::debug!("max_connections reached: closing the oldest idle connection");
                self.close(c.token);
                Evicted::Here
            }
            Some(c) => match self.shared.loops.get(c.lp) {
                Some(n) => {
                    n.send(Msg::CloseIdle {
                        token: c.token,
                        id: c.id,
                    });
                    Evicted::Elsewhere
                }
                None => Evicted::None,
            },
            None => Evicted::None,
        }
    }

    fn close(&mut self, i: usize) {
        let Some(e) = self.conns.get_mut(i).and_then(Option::take) else {
            return;
        };
        let _ = self
            .poll
            .registry()
            .deregister(&mut SourceFd(&e.conn.sock.as_raw_fd()));
        e.conn.close();
        self.shared.stats.held_out.add(e.held as u64);
        self.free.push(i);
        self.shared.release(&e.conn.peer);
        self.stats().open.fetch_sub(1, SeqCst);
        bump(&self.stats().closed, 1);
        tracing::debug!(conn = e.conn.id, peer = %e.conn.peer, "connection closed");
    }

    fn drain_inbox(&mut self) {
        let msgs = match self.shared.loops.get(self.idx) {
            Some(n) => std::mem::take(&mut *n.inbox.lock().unwrap_or_else(|e| e.into_inner())),
            None => return,
        };
        for m in msgs {
            match m {
                Msg::NewConn(s, peer) => self.add_conn(s, peer),
                Msg::OldestIdle(reply) => {
                    let _ = reply.send(self.oldest_idle());
                }
                Msg::CloseIdle { token, id } => {
                    let still = matches!(self.conns.get(token), Some(Some(e))
                        if e.conn.id == id
                            && e.conn.inflight.load(SeqCst) == 0
                            && e.conn.queued_bytes() == 0);
                    let victim = if still {
                        Some(token)
                    } else {
                        self.oldest_idle().map(|c| c.token)
                    };
                    if let Some(i) = victim {
                        tracing::debug!(
                            "max_connections reached: closing the oldest idle connection"
                        );
                        self.close(i);
                    }
                }
                Msg::Check { token, id } => {
                    let ok = matches!(self.conns.get(token), Some(Some(e)) if e.conn.id == id);
                    if ok {
                        self.after_change(token);
                    }
                }
            }
        }
    }

    /// Something changed on connection `i` (output drained, a request
    /// finished, a write failed): close it, or resume reading it.
    fn after_change(&mut self, i: usize) {
        let Some(Some(e)) = self.conns.get(i) else {
            return;
        };
        let c = &e.conn;
        let idle = c.inflight.load(SeqCst) == 0 && c.queued_bytes() == 0;
        if c.is_closed() || (self.phase == FINAL && c.queued_bytes() == 0) || (e.eof && idle) {
            self.close(i);
            return;
        }
        if self.phase == RUNNING
            && !e.eof
            && (!c.paused.load(SeqCst) || (c.can_read() && c.paused.swap(false, SeqCst)))
        {
            self.schedule(i);
        }
    }

    fn conn_event(&mut self, i: usize, readable: bool, writable: bool) {
        let Some(Some(e)) = self.conns.get(i) else {
            return;
        };
        if writable && e.conn.wants_write() {
            let c = e.conn.clone();
            c.flush();
            self.after_change(i);
        }
        if readable && self.phase == RUNNING {
            self.schedule(i);
        }
    }

    fn process_run(&mut self) {
        let budget = self.shared.limits.max_buffered_bytes as u64;
        if budget > 0 {
            self.buffered_seen = self.shared.stats.buffered();
            self.reserved_since = 0;
        }
        self.over_budget = budget > 0 && self.buffered_seen > budget;
        for _ in 0..self.run.len() {
            let Some(i) = self.run.pop_front() else {
                break;
            };
            if let Some(Some(e)) = self.conns.get_mut(i) {
                e.scheduled = false;
                self.read_conn(i);
            }
        }
    }

    /// Answer or hand ready records to the pool while the bounds allow;
    /// the replies answered here leave together at the end.
    fn submit_ready(&mut self, i: usize) -> Submitted {
        let r = self.submit_records(i);
        if !self.batch.is_empty() {
            match self.conns.get(i) {
                Some(Some(e)) => e.conn.send_batch(&mut self.batch),
                _ => self.batch.clear(),
            }
        }
        self.batch_bytes = 0;
        r
    }

    fn submit_records(&mut self, i: usize) -> Submitted {
        let Some(Some(e)) = self.conns.get_mut(i) else {
            return Submitted::Blocked;
        };
        while let Some(mut data) = e.rd.ready.pop_front() {
            let c = &e.conn;
            if !c.can_read() {
                e.rd.ready.push_front(data);
                // Over a bound (in-flight requests or queued reply bytes):
                // whoever brings us back under both notifies us.
                c.paused.store(true, SeqCst);
                if c.can_read() && c.paused.swap(false, SeqCst) {
                    continue;
                }
                return Submitted::Blocked;
            }
            // Budget: a call whose reply could be large is taken from a
            // connection with calls or replies outstanding only while the
            // bytes held plus that reply fit (knfsd reserves reply room
            // before it takes a request); a connection with nothing
            // outstanding is always served.
            let bound = self.shared.service.reply_bound(&data);
            let budget = self.shared.limits.max_buffered_bytes as u64;
            let outstanding = c.inflight.load(SeqCst) > 0 || c.queued_bytes() > 0;
            // The turn's sum plus what this loop reserved since, summed
            // again once that reaches a sixteenth of the budget (other
            // loops' reservations are seen then).
            if budget > 0 && bound > 0 && self.reserved_since >= budget / 16 {
                self.buffered_seen = self.shared.stats.buffered();
                self.reserved_since = 0;
            }
            if budget > 0
                && (outstanding || bound > FREE_REPLY)
                && self.buffered_seen + self.reserved_since + bound as u64 > budget
            {
                e.rd.ready.push_front(data);
                if !e.stalled {
                    e.stalled = true;
                    self.stalled.push(i);
                }
                if !self.warned_budget {
                    tracing::warn!(
                        "max_buffered_bytes ({budget}) reached: connections with calls or \
                         replies outstanding wait until it drains"
                    );
                    self.warned_budget = true;
                }
                return Submitted::Blocked;
            }
            self.reserved_since += bound as u64;
            let route = self.shared.service.route(&data);
            let mut deferred = false;
            // Run to completion: what the service can answer from memory is
            // answered here, with no handoff and no wakeup (knfsd's thread
            // that dequeues a request runs it); it takes microseconds, so
            // the loop's other connections hardly wait for it.
            if self.run_inline && route == Route::Quick {
                let req = Request {
                    data,
                    peer: c.peer,
                    local: c.local,
                    conn_id: c.id,
                };
                let st = &self.shared.loop_stats[self.idx];
                match self.shared.service.call_inline(req) {
                    Inline::Done(reply) => {
                        bump(&st.inline, 1);
                        if let Some(r) = reply {
                            self.batch_bytes += r.body_len();
                            self.batch.push(r);
                        }
                        // Bounded: past BATCH_BYTES the replies go now and
                        // count against the connection's output bound.
                        if self.batch_bytes >= BATCH_BYTES {
                            c.send_batch(&mut self.batch);
                            self.batch_bytes = 0;
                        }
                        continue;
                    }
                    Inline::Defer(req) => {
                        // It would have waited (a miss, data on disk): such
                        // calls go where waiting is expected.
                        bump(&st.deferred, 1);
                        data = req.data;
                        deferred = true;
                    }
                }
            }
            if !self.batch.is_empty() {
                // Replies before the handoff: keep the pipe moving.
                c.send_batch(&mut self.batch);
                self.batch_bytes = 0;
            }
            c.inflight.fetch_add(1, SeqCst);
            let mut w = Work::new(c.clone(), data, bound);
            // Only a short call's reply may wait for its worker's next call.
            w.may_hold = route == Route::Pool && !deferred;
            let pool = match &self.blocking {
                Some(b) if route == Route::Blocking => b,
                // A call given up on the loop (a cache miss, data not in
                // memory) runs on the loop's own pool when nothing waits
                // there: with pinned loops that is this CPU, where the call
                // arrived and its client waits, so no wakeup crosses CPUs.
                // Under load it goes to the blocking pool as before, whose
                // size does not shrink with the number of loops.
                Some(b) if deferred => match self.pool.submit_if_free(w) {
                    Ok(()) => continue,
                    Err(back) => {
                        w = back;
                        b
                    }
                },
                _ => &self.pool,
            };
            match pool.submit(w) {
                Ok(()) => {}
                Err(SubmitError::Full(mut w)) => {
                    let d = std::mem::take(&mut w.data);
                    drop(w); // uncounts the request
                    e.rd.ready.push_front(d);
                    if !e.stalled {
                        e.stalled = true;
                        self.stalled.push(i);
                    }
                    return Submitted::Blocked;
                }
                Err(SubmitError::Closed(_)) => {
                    e.rd.ready.clear();
                    return Submitted::Blocked;
                }
            }
        }
        Submitted::All
    }

    /// Read and submit records from connection `i` within the bounds.
    fn read_conn(&mut self, i: usize) {
        for _ in 0..READ_BUDGET {
            if let Submitted::Blocked = self.submit_ready(i) {
                return;
            }
            match self.read_once(i) {
                ReadOutcome::More => {}
                ReadOutcome::Stop => return,
                ReadOutcome::Eof => {
                    self.after_change(i);
                    return;
                }
                ReadOutcome::Close => {
                    self.close(i);
                    return;
                }
            }
        }
        // Budget used up: hand the ready records over, come back next turn.
        if let Submitted::All = self.submit_ready(i) {
            self.schedule(i);
        }
    }

    /// One read syscall on connection `i`, fed to its record reader.
    fn read_once(&mut self, i: usize) -> ReadOutcome {
        let Some(Some(e)) = self.conns.get_mut(i) else {
            return ReadOutcome::Stop;
        };
        if e.eof {
            return ReadOutcome::Stop;
        }
        let c = &e.conn;
        if !c.can_read() {
            c.paused.store(true, SeqCst);
            if !(c.can_read() && c.paused.swap(false, SeqCst)) {
                return ReadOutcome::Stop; // a worker or our own flush resumes us
            }
        }
        // Budget spent: only a connection with nothing outstanding is read
        // (knfsd reserves reply room before it takes a request); the
        // others are retried as it drains.
        if self.over_budget && (c.inflight.load(SeqCst) > 0 || c.queued_bytes() > 0) {
            if !e.stalled {
                e.stalled = true;
                self.stalled.push(i);
            }
            return ReadOutcome::Stop;
        }
        let out = self.read_into_record(i);
        // The partial record's bytes count against the budget.
        if let Some(Some(e)) = self.conns.get_mut(i) {
            let now = e.rd.partial_len();
            let st = &self.shared.stats;
            if now > e.held {
                st.held_in.add((now - e.held) as u64);
            } else {
                st.held_out.add((e.held - now) as u64);
            }
            e.held = now;
        }
        out
    }

    /// The read syscall of `read_once`.
    fn read_into_record(&mut self, i: usize) -> ReadOutcome {
        let max_record = self.shared.limits.max_record;
        let Some(Some(e)) = self.conns.get_mut(i) else {
            return ReadOutcome::Stop;
        };
        let c = &e.conn;
        // A large fragment body goes straight into its record (one copy
        // from the socket, not two); headers and small calls use scratch.
        if e.rd.direct_wanted(DIRECT_MIN) {
            let (d, r) = e.rd.read_direct(|v, max| sys::recv_append(&c.sock, v, max));
            let st = &self.shared.loop_stats[self.idx];
            bump(&st.bytes_in, d.bytes as u64);
            bump(&st.records_in, d.records as u64);
            if d.bytes > 0 {
                e.last_active = Instant::now();
            }
            return match r {
                Ok(()) if d.eof => {
                    e.eof = true;
                    e.rd = RecordReader::default(); // a partial record is lost
                    c.eof.store(true, SeqCst);
                    ReadOutcome::Eof
                }
                Ok(()) => ReadOutcome::More,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                    e.wait_for_fragment();
                    ReadOutcome::Stop
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => ReadOutcome::More,
                Err(err) => {
                    tracing::debug!(conn = c.id, peer = %c.peer, "read: {err}");
                    ReadOutcome::Close
                }
            };
        }
        e.end_fragment_wait();
        let c = &e.conn;
        match (&c.sock).read(&mut self.scratch) {
            Ok(0) => {
                e.eof = true;
                e.rd = RecordReader::default(); // a partial record is lost
                c.eof.store(true, SeqCst);
                ReadOutcome::Eof
            }
            Ok(n) => {
                e.last_active = Instant::now();
                let st = &self.shared.loop_stats[self.idx];
                bump(&st.bytes_in, n as u64);
                match e
                    .rd
                    .feed(self.scratch.get(..n).unwrap_or_default(), max_record)
                {
                    Ok(k) => {
                        bump(&st.records_in, k as u64);
                        ReadOutcome::More
                    }
                    Err(tb) => {
                        bump(&st.too_big, 1);
                        tracing::warn!(
                            conn = c.id,
                            peer = %c.peer,
                            "record of {} bytes exceeds max_record {max_record}; closing",
                            tb.claimed
                        );
                        ReadOutcome::Close
                    }
                }
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => ReadOutcome::Stop,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => ReadOutcome::More,
            Err(err) => {
                tracing::debug!(conn = c.id, peer = %c.peer, "read: {err}");
                ReadOutcome::Close
            }
        }
    }

    /// Close connections idle for `idle_timeout` with nothing in flight.
    fn sweep(&mut self) {
        let now = Instant::now();
        self.next_sweep = now + self.sweep_every;
        let limit = self.shared.limits.idle_timeout;
        for i in 0..self.conns.len() {
            let idle = match self.conns.get(i) {
                Some(Some(e)) => {
                    now.saturating_duration_since(e.last_active) >= limit
                        && e.conn.inflight.load(SeqCst) == 0
                }
                _ => false,
            };
            if idle {
                tracing::debug!("closing idle connection");
                self.close(i);
            }
        }
    }
}
