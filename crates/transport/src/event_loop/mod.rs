//! The event loops: accept, read and reassemble records, submit them to the
//! pool, finish queued replies on writability, apply backpressure.
//!
//! Here: starting the loops, the loop itself (poll, phases of a shutdown,
//! closing, the idle sweep). `accept.rs`: taking connections within the
//! connection bound. `read.rs`: reading records and answering or
//! submitting them within the in-flight and buffered-bytes bounds.

use crate::conn::Conn;
use crate::limits::{READ_CHUNK, STALL_RETRY};
use crate::record::RecordReader;
use crate::sys;
use crate::work::Work;
use crate::{
    bump, IdleConn, Inline, Limits, LoopCalls, LoopNotify, LoopStats, Msg, PoolLayout, Request,
    Responder, Route, Service, Shared, TransportConfig, WorkerStats, DRAINING, FINAL, RUNNING,
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
/// The blocking pool's `lazy_wake` timer (`Pool::lazy_timer`), on loop 0.
const LAZY_TIMER: Token = Token(usize::MAX - 1);

const LISTENER_BASE: usize = usize::MAX / 2;

pub(crate) fn start(
    cfg: TransportConfig,
    pool_cfg: PoolConfig,
    service: Arc<dyn Service>,
) -> Result<Started, (io::Error, Option<Started>)> {
    let mut listeners = cfg.listeners;
    for a in &cfg.listen {
        listeners.push(TcpListener::bind(a).map_err(|e| (e, None))?);
    }
    if listeners.is_empty() {
        let e = io::Error::new(
            io::ErrorKind::InvalidInput,
            "rnfsd-transport: no listen address",
        );
        return Err((e, None));
    }
    let mut addrs = Vec::with_capacity(listeners.len());
    for l in &listeners {
        l.set_nonblocking(true).map_err(|e| (e, None))?;
        addrs.push(l.local_addr().map_err(|e| (e, None))?);
    }
    let n = cfg.event_threads.max(1);
    let mut polls = Vec::with_capacity(n);
    let mut loops = Vec::with_capacity(n);
    for _ in 0..n {
        let p = Poll::new().map_err(|e| (e, None))?;
        loops.push(LoopNotify {
            waker: Waker::new(p.registry(), WAKER).map_err(|e| (e, None))?,
            inbox: Mutex::new(Vec::new()),
        });
        polls.push(p);
    }
    if let Some(p) = polls.first() {
        for (j, l) in listeners.iter().enumerate() {
            p.registry()
                .register(
                    &mut SourceFd(&l.as_raw_fd()),
                    Token(LISTENER_BASE + j),
                    Interest::READABLE,
                )
                .map_err(|e| (e, None))?;
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
        PoolLayout::Shared => vec![Arc::new(
            Pool::new(pool_cfg.clone()).map_err(|e| (e, None))?,
        )],
        PoolLayout::PerLoop => {
            let mut v = Vec::with_capacity(n);
            for (i, cpu) in cpus.iter().enumerate() {
                let c = split_pool(&pool_cfg, n, i, *cpu);
                // On error the pools already made shut down as they drop.
                v.push(Arc::new(Pool::new(c).map_err(|e| (e, None))?));
            }
            v
        }
    };
    // The blocking pool: shared by the loops, not pinned (its threads
    // mostly sleep in fsync).
    let blocking = if cfg.blocking_threads > 0 {
        Some(Arc::new(
            Pool::new(PoolConfig {
                threads: Threads::Adaptive {
                    min: 1,
                    max: cfg.blocking_threads,
                },
                name: "rnfsd-sync".into(),
                cpu: None,
                nice: cfg.blocking_nice,
                sched_batch: cfg.blocking_sched_batch,
                lazy_wake: cfg.blocking_lazy_wake,
                // Its threads wait in fsync: nothing to spin for.
                spin: std::time::Duration::ZERO,
                ..pool_cfg.clone()
            })
            .map_err(|e| (e, None))?,
        ))
    } else {
        None
    };
    // Loop 0 polls the blocking pool's lazy_wake timer: a job left to a
    // running worker is woken for once overdue, even with no traffic.
    if let (Some(b), Some(p)) = (&blocking, polls.first()) {
        if let Some(fd) = b.lazy_timer() {
            p.registry()
                .register(&mut SourceFd(&fd), LAZY_TIMER, Interest::READABLE)
                .map_err(|e| (e, None))?;
        }
    }
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
            alone_per_turn: cfg.alone_per_turn,
            reply_batch: cfg.reply_batch,
            recycled_buffers: cfg.recycled_buffers,
        },
        loops,
        loop_cpus: cpus.clone(),
        stats: WorkerStats::default(),
        loop_stats: (0..n)
            .map(|_| CachePadded::new(LoopStats::default()))
            .collect(),
        open: AtomicUsize::new(0),
        clients: crate::budget::Clients::new(
            cfg.max_connections_per_client,
            cfg.max_buffered_bytes,
            // The least share: one largest record and one read, so a
            // client's large READ always fits.
            cfg.max_record.saturating_add(READ_CHUNK),
            cfg.budget_hog_time,
        ),
        next_conn_id: AtomicU64::new(1),
        phase: AtomicU8::new(RUNNING),
        drained: Mutex::new(0),
        drained_cv: Condvar::new(),
    });
    if pools.is_empty() {
        return Err((io::Error::other("rnfsd-transport: no pool"), None));
    }
    let mut threads = Vec::with_capacity(n);
    let mut listeners = Some(listeners);
    for (idx, poll) in polls.into_iter().enumerate() {
        let ls = if idx == 0 {
            listeners.take().unwrap_or_default()
        } else {
            Vec::new()
        };
        // `pools` has one pool at least (checked above).
        let pool = pools[idx % pools.len()].clone();
        let cpu = cpus.get(idx).copied().flatten();
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
                // What started is stopped by its handle's shutdown.
                let mut pools = pools;
                pools.extend(blocking);
                let started = Started {
                    shared,
                    pools,
                    addrs,
                    threads,
                };
                return Err((e, Some(started)));
            }
        }
    }
    // Shut down and counted with the others.
    let mut pools = pools;
    pools.extend(blocking);
    Ok(Started {
        shared,
        pools,
        addrs,
        threads,
    })
}

/// What `start` started: a handle is made of it (`handle.rs`).
pub(crate) struct Started {
    pub shared: Arc<Shared>,
    pub pools: Vec<Arc<Pool<Work>>>,
    pub addrs: Vec<SocketAddr>,
    pub threads: Vec<std::thread::JoinHandle<()>>,
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
    /// In the `share_wait` list (its next call does not fit its client's
    /// share of the budget, or the budget is spent and its client is at
    /// or over its share).
    share_wait: bool,
    /// Peer finished sending.
    eof: bool,
    /// An event said the peer closed or the socket failed: its EOF or
    /// error may sit behind the data, so reads go on to the end (a short
    /// read no longer means nothing more will come).
    peer_closed: bool,
    /// Bytes of the partial record and of the whole records not yet
    /// handed on, counted against `max_buffered_bytes`.
    held: usize,
    /// The socket's SO_RCVLOWAT, when above 1 (waiting for a large
    /// fragment's body in one wakeup).
    lowat: usize,
    /// `Service::disconnected` was called (at EOF, or on close).
    told_gone: bool,
}

struct EventLoop {
    idx: usize,
    poll: Poll,
    shared: Arc<Shared>,
    pool: Arc<Pool<Work>>,
    /// Calls that may wait for stable storage go here, when there is one.
    blocking: Option<Arc<Pool<Work>>>,
    /// The calls this loop answers itself (run to completion), when
    /// `run_inline` is on; asked of the service on the loop's thread.
    calls: Option<Box<dyn LoopCalls>>,
    /// `Route::Alone` calls this turn may still run with others ready
    /// (`TransportConfig::alone_per_turn`, refilled each turn).
    alone_left: usize,
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
    /// Connections whose next record the full pool refused (retried every
    /// `STALL_RETRY`).
    stalled: Vec<usize>,
    /// Connections waiting for their client's share of the budget (their
    /// next call has no room in the budget nor in the share, or the budget
    /// is spent and their client is at or over its share): retried after
    /// each check of the shares (`budget.rs`).
    share_wait: Vec<usize>,
    /// The check of the shares last seen.
    epoch_seen: u64,
    /// A check marked clients for disconnection mid-turn.
    evict_pending: bool,
    /// The budget was under pressure when this turn began
    /// (`Clients::pressed`): calls take room only within their share.
    pressed: bool,
    /// Bytes buffered across all loops when last summed, and what this
    /// loop added since (records read, reply room reserved): summing every
    /// per-CPU cell per call would cost a cache line per CPU on each one.
    buffered_seen: u64,
    added_since: u64,
    /// Most bytes the next direct read takes (64 KiB while the budget is
    /// spent, so a client overshoots its share by one read at most).
    read_limit: usize,
    warned_budget: bool,
    scratch: Box<[u8]>,
    evbuf: Vec<(Token, bool, bool, bool)>,
    rr: usize,
    accept_paused_until: Option<Instant>,
    warned_limit: bool,
    /// When a connection could first have been idle for `idle_timeout`
    /// (None: no connection): the loop sleeps until then, not a fixed tick,
    /// so a loop with no client or only busy ones makes no idle wakeups.
    next_sweep: Option<Instant>,
    /// The least time between two sweeps.
    sweep_every: Duration,
    phase: u8,
    final_deadline: Option<Instant>,
}

mod accept;
mod read;

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
            calls: None,
            alone_left: 0,
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
            share_wait: Vec::new(),
            epoch_seen: 0,
            evict_pending: false,
            pressed: false,
            buffered_seen: 0,
            added_since: 0,
            read_limit: usize::MAX,
            warned_budget: false,
            scratch: vec![0u8; READ_CHUNK].into_boxed_slice(),
            evbuf: Vec::with_capacity(256),
            rr: 0,
            accept_paused_until: None,
            warned_limit: false,
            next_sweep: None,
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
        // The loop reads records and, for its own calls, writes replies.
        let keep = self.shared.limits.recycled_buffers;
        crate::recycle::set_limits(keep, keep);
        if self.shared.limits.run_inline {
            self.calls = self.shared.service.clone().loop_calls();
        }
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
            // Cheap (an atomic load) and saves the timer's own wakeup when
            // this loop is awake anyway.
            if let Some(b) = &self.blocking {
                b.kick_overdue();
            }
            self.alone_left = self.shared.limits.alone_per_turn;
            if let Some(c) = &mut self.calls {
                c.turn_begins();
            }
            self.evbuf.clear();
            for ev in events.iter() {
                let closed = ev.is_read_closed() || ev.is_error();
                let r = ev.is_readable() || closed;
                let w = ev.is_writable() || ev.is_write_closed() || ev.is_error();
                self.evbuf.push((ev.token(), r, w, closed));
            }
            for k in 0..self.evbuf.len() {
                let Some(&(t, r, w, closed)) = self.evbuf.get(k) else {
                    break;
                };
                if t == WAKER {
                    continue;
                }
                if t == LAZY_TIMER {
                    if let Some(b) = &self.blocking {
                        b.on_lazy_timer();
                    }
                    continue;
                }
                if t.0 >= LISTENER_BASE {
                    self.accept(t.0 - LISTENER_BASE);
                } else {
                    self.conn_event(t.0, r, w, closed);
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
            let more = !self.run.is_empty();
            if let Some(c) = &mut self.calls {
                c.turn_ends(more);
            }
            if self.next_sweep.is_some_and(|t| Instant::now() >= t) {
                self.sweep();
            }
        }
    }

    fn timeout(&self) -> Option<Duration> {
        if !self.run.is_empty() {
            return Some(Duration::ZERO);
        }
        let now = Instant::now();
        let stall = (!self.stalled.is_empty()).then(|| now + STALL_RETRY);
        // While the budget is spent (as last seen) or connections wait for
        // their share: the next check of the shares, which also finds
        // clients whose connections raise no events.
        let budget = self.shared.limits.max_buffered_bytes as u64;
        let check = (budget > 0
            && (!self.share_wait.is_empty() || self.buffered_seen + self.added_since > budget))
            .then(|| self.shared.clients.next_check().max(now));
        [
            self.next_sweep,
            stall,
            check,
            self.accept_paused_until,
            self.final_deadline,
        ]
        .into_iter()
        .flatten()
        .min()
        .map(|t| t.saturating_duration_since(now))
    }

    /// A connection just opened expires no sooner than `idle_timeout` from
    /// now.
    fn sweep_by(&mut self, t: Instant) {
        self.next_sweep = Some(self.next_sweep.map_or(t, |s| s.min(t)));
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
        self.share_wait.clear();
        for e in self.conns.iter_mut().flatten() {
            // Received but never handed to the pool: not in flight, dropped
            // (the client retransmits on its next connection).
            e.rd = RecordReader::default();
            e.scheduled = false;
            e.stalled = false;
            e.share_wait = false;
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

    fn close(&mut self, i: usize) {
        let Some(e) = self.conns.get_mut(i).and_then(Option::take) else {
            return;
        };
        let _ = self
            .poll
            .registry()
            .deregister(&mut SourceFd(&e.conn.sock.as_raw_fd()));
        e.conn.close();
        if !e.told_gone {
            self.shared.service.disconnected(e.conn.id);
        }
        e.conn.let_go(e.held);
        self.free.push(i);
        self.shared.release(&e.conn.peer);
        self.stats().open.fetch_sub(1, SeqCst);
        bump(&self.stats().closed, 1);
        tracing::debug!(conn = e.conn.id, peer = %e.conn.peer, "connection closed");
    }

    /// Connection `i` brings no more records (its peer finished sending):
    /// tell the service once, so nothing waits for its answers.
    fn tell_gone(&mut self, i: usize) {
        if let Some(Some(e)) = self.conns.get_mut(i) {
            if !e.told_gone {
                e.told_gone = true;
                self.shared.service.disconnected(e.conn.id);
            }
        }
    }

    fn drain_inbox(&mut self) {
        let msgs = match self.shared.loops.get(self.idx) {
            Some(n) => std::mem::take(&mut *n.inbox.lock().unwrap_or_else(|e| e.into_inner())),
            None => return,
        };
        for m in msgs {
            match m {
                Msg::NewConn(s, peer, client) => self.add_conn(s, peer, client),
                Msg::Evict => self.evict_marked(false),
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

    fn conn_event(&mut self, i: usize, readable: bool, writable: bool, closed: bool) {
        let Some(Some(e)) = self.conns.get_mut(i) else {
            return;
        };
        e.peer_closed |= closed;
        if writable && e.conn.wants_write() {
            let c = e.conn.clone();
            c.flush();
            self.after_change(i);
        }
        if readable && self.phase == RUNNING {
            self.schedule(i);
        }
    }

    /// Close connections idle for `idle_timeout` with nothing in flight;
    /// the next sweep is due when the first of the others could be (their
    /// `last_active` only moves forward), and at least `sweep_every` on.
    fn sweep(&mut self) {
        let now = Instant::now();
        let limit = self.shared.limits.idle_timeout;
        let mut first: Option<Instant> = None;
        for i in 0..self.conns.len() {
            let idle = match self.conns.get(i) {
                Some(Some(e)) => {
                    let idle = now.saturating_duration_since(e.last_active) >= limit
                        && e.conn.inflight.load(SeqCst) == 0;
                    // None past what an Instant holds: never due.
                    if let Some(due) = e.last_active.checked_add(limit).filter(|_| !idle) {
                        first = Some(first.map_or(due, |f| f.min(due)));
                    }
                    idle
                }
                _ => false,
            };
            if idle {
                tracing::debug!("closing idle connection");
                self.close(i);
            }
        }
        self.next_sweep = first.map(|f| f.max(now + self.sweep_every));
    }
}
