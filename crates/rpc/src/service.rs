//! The bridge from the transport: one [`RpcService`] per set of programs
//! (for NFS: NFS, MOUNT and the lock manager on the NFS listeners; the port
//! mapper on 111). It plans each record once on the event loop (its row,
//! where it runs, its reply room), answers quick calls there with that
//! loop's own state, and everything else on a pool's worker.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use rnfsd_stats::Registry;
use rnfsd_transport::{Inline, LoopCalls, Plan, Reply, Request, Route, Service};

use crate::back::BackChannel;
use crate::ctx::{LoopState, State};
use crate::dispatch::{Answer, Dispatched, Dispatcher, Incoming, Policy};
use crate::drc::Drc;
use crate::header;
use crate::table::{Program, Programs};

/// An RPC server for `programs` over the state `S`.
pub struct RpcService<S: State> {
    state: Arc<S>,
    programs: Programs<S>,
    policy: Policy,
    /// Where calls are counted (none: not counted).
    stats: Option<Arc<Registry>>,
    /// Duplicate reply cache (none: every call runs).
    drc: Option<Arc<Drc>>,
    /// Whether a connection from a peer may take a slot.
    admit: fn(&S, &SocketAddr) -> bool,
    /// Calls this server sent on its clients' connections, awaiting their
    /// REPLYs (none: REPLY records are dropped, as any non-call).
    back: Option<BackChannel>,
}

impl<S: State> RpcService<S> {
    pub fn new(state: Arc<S>, programs: Vec<&'static Program<S>>, policy: Policy) -> Self {
        RpcService {
            state,
            programs: Programs::new(programs),
            policy,
            stats: None,
            drc: None,
            admit: |_, _| true,
            back: None,
        }
    }

    /// Call clients on their own connections (RFC 8881 §2.10.3.1): REPLY
    /// records go to `back` (not to dispatch, which drops them), and a
    /// pool job's handler gets its connection's back channel
    /// (`CallCtx::back_channel`). Give each service its own.
    pub fn with_back_channel(mut self, back: BackChannel) -> Self {
        self.back = Some(back);
        self
    }

    pub fn back_channel(&self) -> Option<&BackChannel> {
        self.back.as_ref()
    }

    /// Answer retransmitted non-idempotent calls from `drc`.
    pub fn with_drc(mut self, drc: Option<Arc<Drc>>) -> Self {
        self.drc = drc;
        self
    }

    /// Count this service's calls in `stats` (shared by every service of
    /// the server, and independent of the configuration objects).
    pub fn with_stats(mut self, stats: Arc<Registry>) -> Self {
        self.stats = Some(stats);
        self
    }

    /// Take connections only from peers `admit` allows (asked once per
    /// connection, at accept; must be cheap).
    pub fn with_admit(mut self, admit: fn(&S, &SocketAddr) -> bool) -> Self {
        self.admit = admit;
        self
    }

    pub fn programs(&self) -> &[&'static Program<S>] {
        self.programs.list()
    }

    pub fn state(&self) -> &Arc<S> {
        &self.state
    }

    /// Answer one record on this thread as a pool job would after the
    /// event loop planned it, where nobody can send a reply later (a reply
    /// that must wait is waited for here): for tests and fuzzing.
    pub fn answer(&self, record: &[u8], peer: SocketAddr, local: SocketAddr) -> Option<Reply> {
        let mut req = Request {
            data: record.to_vec(),
            peer,
            local,
            conn_id: 0,
            plan: self.plan(record),
            responder: Default::default(),
        };
        self.run(&mut req, None).flatten()
    }

    /// Dispatch, with the call and its outcome counted when statistics are
    /// on: one CPU lookup, two clock reads and a few per-core adds, nothing
    /// at all when counting is off. A call tried on a loop that gave up is
    /// neither answered nor counted: None (it runs again in a pool).
    fn run(&self, req: &mut Request, on_loop: Option<&S::Loop>) -> Option<Option<Reply>> {
        let stats = self
            .stats
            .as_deref()
            .and_then(|r| r.shard().map(|s| (r, s)));
        let t0 = stats.map(|_| Instant::now());
        let d = Dispatcher {
            state: &*self.state,
            programs: &self.programs,
            policy: self.policy,
            drc: self.drc.as_ref(),
        };
        let inc = Incoming {
            record: &req.data,
            planned: planned_row(req.plan),
            peer: req.peer,
            local: req.local,
            conn_id: req.conn_id,
            back: self.back.as_ref(),
            on_loop,
            t0,
        };
        let Dispatched {
            answer,
            call,
            outcome,
            moved,
            ended,
        } = d.dispatch(inc, &mut req.responder);
        // Only a pool job's call parks, never one tried on a loop.
        let (reply, parked) = match answer {
            Answer::Now(r) => (r, None),
            Answer::Parked(p) => (None, Some(p)),
        };
        if parked.is_none() && on_loop.is_some_and(|l| l.gave_up()) {
            return None;
        }
        // A parked reply is counted now, as it will leave if what it waits
        // for succeeds; its time is the handler's, not the wait's.
        if let (Some((reg, shard)), Some(t0)) = (stats, t0) {
            let end = ended.unwrap_or_else(Instant::now);
            let us =
                u64::try_from(end.saturating_duration_since(t0).as_micros()).unwrap_or(u64::MAX);
            reg.record(shard, call, outcome, moved, us);
        }
        if let Some(p) = parked {
            p.park();
        }
        Some(reply)
    }
}

/// The row number a plan's tag carries (0: not planned).
fn planned_row(p: Plan) -> Option<usize> {
    p.tag.checked_sub(1).and_then(|r| usize::try_from(r).ok())
}

impl<S: State> Service for RpcService<S> {
    fn call(&self, mut req: Request) -> Option<Reply> {
        self.run(&mut req, None).flatten()
    }

    /// Reads the record's header once (`header::peek`): its row, where the
    /// row says the call runs and what reply room it reserves, both from
    /// the arguments' start where the row asks; the row's number goes back
    /// to dispatch in the plan's tag. A record with no answerable header or
    /// no row goes to the pool, where dispatch answers why.
    fn plan(&self, record: &[u8]) -> Plan {
        let Some(h) = header::peek(record) else {
            // Not a call. A REPLY goes to the back channel, if any; a call
            // pays nothing for this.
            if self.back.is_some() && header::is_reply(record) {
                return Plan {
                    route: Route::Reply,
                    ..Plan::default()
                };
            }
            return Plan::default();
        };
        let (Some(args_at), rnfsd_proto::rpc::RPC_VERSION) = (h.args_at, h.rpcvers) else {
            return Plan::default();
        };
        let Ok((i, row)) = self.programs.find(h.prog, h.vers, h.proc_) else {
            return Plan::default();
        };
        let args = record.get(args_at..).unwrap_or_default();
        Plan {
            route: self.programs.route(&self.state, row, args),
            reply_bound: self.programs.room(&self.state, row, args),
            tag: i as u64 + 1,
        }
    }

    fn loop_calls(self: Arc<Self>) -> Option<Box<dyn LoopCalls>> {
        let lp = self.state.new_loop()?;
        Some(Box::new(OnLoop { svc: self, lp }))
    }

    fn admit(&self, peer: &SocketAddr) -> bool {
        (self.admit)(&self.state, peer)
    }

    /// A REPLY to one of our back-channel calls; one matching none is
    /// dropped, and counted as any record dropped.
    fn reply_received(&self, conn_id: u64, record: Vec<u8>) {
        let matched = self
            .back
            .as_ref()
            .is_some_and(|b| b.deliver(conn_id, record));
        if !matched {
            if let Some((reg, shard)) = self
                .stats
                .as_deref()
                .and_then(|r| r.shard().map(|s| (r, s)))
            {
                reg.record(shard, None, rnfsd_stats::Outcome::Dropped, (0, 0), 0);
            }
        }
    }

    fn disconnected(&self, conn_id: u64) {
        if let Some(b) = &self.back {
            b.disconnected(conn_id);
        }
        self.state.disconnected(conn_id);
    }
}

/// A service's calls on one event loop, with that loop's own state.
struct OnLoop<S: State> {
    svc: Arc<RpcService<S>>,
    lp: S::Loop,
}

/// A quick call on the event loop thread: the handler answers from memory
/// or gives up, and a call given up runs again in a pool, uncounted here.
impl<S: State> LoopCalls for OnLoop<S> {
    fn turn_begins(&mut self) {
        self.lp.turn_begins();
    }

    fn turn_ends(&mut self, more: bool) {
        self.lp.turn_ends(more);
    }

    fn call(&mut self, mut req: Request) -> Inline {
        debug_assert!(!req.responder.can_defer(), "a loop's call cannot park");
        debug_assert!(matches!(req.plan.route, Route::Quick | Route::Alone));
        self.lp.begin_call();
        let r = self.svc.run(&mut req, Some(&self.lp));
        self.lp.end_call();
        match r {
            Some(reply) => Inline::Done(reply),
            None => Inline::Defer(req),
        }
    }
}
