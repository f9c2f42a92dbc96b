//! Accepting connections: the connection bound (the oldest idle connection
//! makes room, as knfsd's `svc_check_conn_limits`), steering a connection to
//! its loop, and registering it.

use super::*;
use crate::budget::Client;
use crate::limits::ACCEPT_BACKOFF;

/// Where `evict_oldest_idle` made room.
enum Evicted {
    Here,
    Elsewhere,
    None,
}

impl EventLoop {
    pub(super) fn accept(&mut self, j: usize) {
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
        let Some(client) = self.shared.admit_client(&peer) else {
            bump(&self.stats().refused, 1);
            tracing::debug!(
                "max_connections_per_client ({}) reached, or its connections are being \
                 closed; refusing {peer}",
                self.shared.limits.max_connections_per_client
            );
            return; // dropping `s` closes it
        };
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
            self.add_conn(s, peer, client);
        } else if let Some(n) = self.shared.loops.get(target) {
            n.send(Msg::NewConn(s, peer, client));
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

    pub(super) fn add_conn(&mut self, s: TcpStream, peer: SocketAddr, client: Arc<Client>) {
        // A client being disconnected for hogging the budget gets no new
        // connection meanwhile.
        if self.phase != RUNNING || client.evicted() {
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
            (self.idx, i),
            client,
            self.shared.clone(),
        ));
        tracing::debug!(conn = id, %peer, "connection opened");
        let now = Instant::now();
        if let Some(t) = now.checked_add(self.shared.limits.idle_timeout) {
            self.sweep_by(t);
        }
        if let Some(slot) = self.conns.get_mut(i) {
            *slot = Some(Entry {
                conn,
                rd: RecordReader::default(),
                lowat: 0,
                peer_closed: false,
                last_active: now,
                scheduled: false,
                stalled: false,
                share_wait: false,
                held: 0,
                eof: false,
                told_gone: false,
            });
        }
        self.schedule(i);
    }

    /// This loop's connection idle the longest (nothing in flight, nothing
    /// queued): a pass over this loop's connections, bounded by
    /// `max_connections`, no lock held; run only at the limit.
    pub(super) fn oldest_idle(&self) -> Option<IdleConn> {
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
}
