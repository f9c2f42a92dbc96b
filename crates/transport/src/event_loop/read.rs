//! Reading connections: records reassembled from what the sockets hold,
//! answered on the loop when they can be (run to completion) or handed to a
//! pool, within the in-flight, output and buffered-bytes bounds.

use super::*;
use crate::limits::{BATCH_BYTES, DIRECT_MIN, FREE_REPLY, READ_BUDGET, READ_CHUNK};

enum ReadOutcome {
    /// Read something; go on.
    More,
    /// Nothing more now (would block, or backpressure).
    Stop,
    /// Read less than asked: the socket is empty for now. Its next bytes
    /// (or its EOF) raise a new edge-triggered event, so no read is spent
    /// to see EAGAIN (one syscall per call when each connection carries
    /// one). Not once an event said the peer closed: an EOF that arrived
    /// with the data raises no further event.
    Drained,
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

impl EventLoop {
    pub(super) fn process_run(&mut self) {
        let budget = self.shared.limits.max_buffered_bytes as u64;
        if budget > 0 {
            self.buffered_seen = self.shared.stats.buffered();
            self.added_since = 0;
            self.budget_turn();
        }
        for _ in 0..self.run.len() {
            let Some(i) = self.run.pop_front() else {
                break;
            };
            if let Some(Some(e)) = self.conns.get_mut(i) {
                e.scheduled = false;
                self.read_conn(i);
            }
        }
        if self.evict_pending {
            self.evict_pending = false;
            self.evict_marked(true);
        }
    }

    /// Past the budget (or with connections waiting for their client's
    /// share), the periodic check of the shares when it is due; the
    /// connections waiting for their share are retried after each check
    /// (by any loop).
    fn budget_turn(&mut self) {
        let now = Instant::now();
        self.pressed = self.shared.clients.pressed(now);
        if !self.over_budget() && self.share_wait.is_empty() {
            return;
        }
        if self.shared.clients.check_if_due(now) {
            self.evict_marked(true);
        }
        let epoch = self.shared.clients.epoch();
        if epoch != self.epoch_seen {
            self.epoch_seen = epoch;
            for i in std::mem::take(&mut self.share_wait) {
                if let Some(Some(e)) = self.conns.get_mut(i) {
                    e.share_wait = false;
                    self.schedule(i);
                }
            }
        }
    }

    /// The budget is spent: the bytes held across all loops when last
    /// summed, plus what this loop added since (summed again once that
    /// reaches a sixteenth of the budget, so other loops' additions are
    /// seen then; summing every per-CPU cell per call would cost a cache
    /// line per CPU on each one).
    pub(super) fn over_budget(&mut self) -> bool {
        let budget = self.shared.limits.max_buffered_bytes as u64;
        if budget == 0 {
            return false;
        }
        if self.added_since >= budget / 16 {
            self.buffered_seen = self.shared.stats.buffered();
            self.added_since = 0;
        }
        self.buffered_seen + self.added_since > budget
    }

    /// Close this loop's connections of clients marked for disconnection;
    /// with `tell`, ask the other loops to do the same.
    pub(super) fn evict_marked(&mut self, tell: bool) {
        if tell {
            for (j, n) in self.shared.loops.iter().enumerate() {
                if j != self.idx {
                    n.send(Msg::Evict);
                }
            }
        }
        for i in 0..self.conns.len() {
            if matches!(self.conns.get(i), Some(Some(e)) if e.conn.client.evicted()) {
                self.close(i);
            }
        }
    }

    /// Count connection `i`'s record bytes (partial and whole records not
    /// yet handed on) against the budget, as they are now: after each
    /// submission, and when reading stops.
    fn sync_held(&mut self, i: usize) {
        let Some(Some(e)) = self.conns.get_mut(i) else {
            return;
        };
        let now = e.rd.held();
        if now > e.held {
            e.conn.hold(now - e.held);
            self.added_since += (now - e.held) as u64;
        } else {
            e.conn.let_go(e.held - now);
        }
        e.held = now;
    }

    /// Answer or hand ready records to the pool while the bounds allow;
    /// the replies answered here leave together at the end.
    fn submit_ready(&mut self, i: usize) -> Submitted {
        let r = self.submit_records(i);
        self.sync_held(i);
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
        while let Some(mut data) = e.rd.pop_ready() {
            let c = &e.conn;
            if !c.can_read() {
                // A REPLY read already takes no in-flight place: it goes
                // on (the socket is not read past the bound, so only
                // those read before it).
                if self.shared.service.plan(&data).route == Route::Reply {
                    bump(&self.shared.loop_stats[self.idx].back_replies_in, 1);
                    self.shared.service.reply_received(c.id, data);
                    continue;
                }
                e.rd.unpop(data);
                // Over a bound (in-flight requests or queued reply bytes):
                // whoever brings us back under both notifies us.
                c.paused.store(true, SeqCst);
                if c.can_read() && c.paused.swap(false, SeqCst) {
                    continue;
                }
                return Submitted::Blocked;
            }
            // Budget: a call whose reply could be large, or from a
            // connection with calls or replies outstanding, is taken while
            // the bytes held plus its reply room fit the budget (knfsd
            // reserves reply room before it takes a request) and the budget
            // is not under pressure; else while its client's bytes plus
            // that room fit the client's share (`budget.rs`). A connection
            // with nothing outstanding is always served a call with a small
            // reply.
            // The service reads the record once here: where it runs, how
            // much reply room it needs, and a word it gets back with it.
            // (A record pushed back below is planned again when retried.)
            let plan = self.shared.service.plan(&data);
            if plan.route == Route::Reply {
                // Not a call: an answer to the service's own record on this
                // connection, taken at once (not in flight, no pool slot).
                bump(&self.shared.loop_stats[self.idx].back_replies_in, 1);
                self.shared.service.reply_received(c.id, data);
                continue;
            }
            let bound = plan.reply_bound;
            let budget = self.shared.limits.max_buffered_bytes as u64;
            let outstanding = c.inflight.load(SeqCst) > 0 || c.queued_bytes() > 0;
            // The turn's sum plus what this loop added since, summed
            // again once that reaches a sixteenth of the budget (other
            // loops' additions are seen then).
            if budget > 0 && bound > 0 && self.added_since >= budget / 16 {
                self.buffered_seen = self.shared.stats.buffered();
                self.added_since = 0;
            }
            if budget > 0 && (outstanding || bound > FREE_REPLY) {
                let room = self.buffered_seen + self.added_since + bound as u64 <= budget;
                let clients = &self.shared.clients;
                // Under pressure (as of this turn), or with no room: the
                // client's share decides. Its bytes still count this record
                // (synced after the submissions).
                if !room || self.pressed {
                    if clients.check_if_due(Instant::now()) {
                        self.evict_pending = true;
                    }
                    // Taken if it fits the share, room or not: room in
                    // the budget does not go to a client over its share.
                    let share = clients.share();
                    if c.client.bytes().saturating_add(bound as u64) > share {
                        // Its client's bytes must fall first (or the share
                        // grow): retried after the next check.
                        e.rd.unpop(data);
                        c.client.waits();
                        if !e.share_wait {
                            e.share_wait = true;
                            self.share_wait.push(i);
                        }
                        if !self.warned_budget {
                            tracing::warn!(
                                "max_buffered_bytes ({budget}) reached: each client is held to \
                                 its share of it (now {share} bytes)"
                            );
                            self.warned_budget = true;
                        }
                        return Submitted::Blocked;
                    }
                }
            }
            self.added_since += bound as u64;
            let route = plan.route;
            let mut deferred = false;
            // Run to completion: what the service can answer from memory is
            // answered here, with no handoff and no wakeup (knfsd's thread
            // that dequeues a request runs it); it takes microseconds, so
            // the loop's other connections hardly wait for it.
            // `Alone`: inline when no other connection of this loop (the
            // rest of the turn's run queue) and no other record of this one
            // waits for it, or `alone_per_turn` times a turn when some do:
            // a handoff then costs two switches to save them one copy's
            // wait, and the copy is bounded per turn.
            let quiet = self.run.is_empty() && !e.rd.has_ready();
            let alone = route == Route::Alone && (quiet || self.alone_left > 0);
            if let Some(calls) = self
                .calls
                .as_mut()
                .filter(|_| route == Route::Quick || alone)
            {
                if alone && !quiet {
                    self.alone_left -= 1;
                }
                let req = Request {
                    data,
                    peer: c.peer,
                    local: c.local,
                    conn_id: c.id,
                    plan,
                    responder: Responder::now_only(),
                };
                let st = &self.shared.loop_stats[self.idx];
                match calls.call(req) {
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
                    Inline::Defer(mut req) => {
                        // It would have waited (a miss, data on disk): such
                        // calls go where waiting is expected.
                        bump(&st.deferred, 1);
                        data = std::mem::take(&mut req.data);
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
            let mut w = Work::new(c.clone(), data, plan);
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
                    e.rd.unpop(d);
                    if !e.stalled {
                        e.stalled = true;
                        self.stalled.push(i);
                    }
                    return Submitted::Blocked;
                }
                Err(SubmitError::Closed(_)) => {
                    e.rd.clear_ready();
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
                ReadOutcome::Stop => {
                    self.sync_held(i);
                    return;
                }
                ReadOutcome::Drained => {
                    self.submit_ready(i);
                    return;
                }
                ReadOutcome::Eof => {
                    self.sync_held(i);
                    self.tell_gone(i);
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
        // Budget spent: a client at or over its share is not read (its
        // bytes must fall first: replies drained, calls done; retried
        // after each check of the shares); the others are, 64 KiB at a
        // time.
        if self.over_budget() {
            let Some(Some(e)) = self.conns.get_mut(i) else {
                return ReadOutcome::Stop;
            };
            if e.conn.client.bytes() >= self.shared.clients.share() {
                e.conn.client.waits();
                if !e.share_wait {
                    e.share_wait = true;
                    self.share_wait.push(i);
                }
                return ReadOutcome::Stop;
            }
            self.read_limit = READ_CHUNK;
        } else {
            self.read_limit = usize::MAX;
        }
        // What it read counts against the budget once it is synced: after
        // the records it completed are handed on (`submit_ready`), so a
        // record read and handed on at once costs no count, or when
        // reading stops.
        self.read_into_record(i)
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
            let (d, r) =
                e.rd.read_direct(self.read_limit, |v, max| sys::recv_append(&c.sock, v, max));
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
                        if n < self.scratch.len() && !e.peer_closed {
                            ReadOutcome::Drained
                        } else {
                            ReadOutcome::More
                        }
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
}
