//! The bridge from the transport to RPC dispatch: one `Service` per set of
//! programs (NFS + MOUNT on the NFS listeners; the port mapper on 111).

use std::sync::Arc;
use std::time::Instant;

use rnfsd_stats::Registry;
use rnfsd_transport::{Inline, LoopCalls, Plan, Reply, Request, Route, Service};

use crate::drc::Drc;
use crate::rpc::dispatch::{dispatch, Answer, Policy};
use crate::rpc::Program;
use crate::state::Server;

pub struct RpcService {
    server: Arc<Server>,
    programs: Vec<&'static Program>,
    policy: Policy,
    /// Where calls are counted (none: not counted).
    stats: Option<Arc<Registry>>,
    /// Duplicate reply cache (none: every call runs).
    drc: Option<Arc<Drc>>,
    /// What inline calls may do beyond memory: open a handle's object,
    /// write UNSTABLE data (`rnfsd_fs::inline`, "speculates").
    leave: rnfsd_fs::inline::Leave,
}

impl RpcService {
    pub fn new(server: Arc<Server>, programs: Vec<&'static Program>, policy: Policy) -> Self {
        RpcService {
            server,
            programs,
            policy,
            stats: None,
            drc: None,
            leave: rnfsd_fs::inline::Leave::NONE,
        }
    }

    /// Let inline calls open a handle cache miss's object, and write
    /// UNSTABLE data, on the loop thread, backing off where that sleeps
    /// (`inline_misses`, `inline_write_max`).
    pub fn with_inline(mut self, leave: rnfsd_fs::inline::Leave) -> Self {
        self.leave = leave;
        self
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
}

impl RpcService {
    /// Dispatch, with the call and its outcome counted when statistics are
    /// on: one CPU lookup, two clock reads and a few per-core adds, nothing
    /// at all when counting is off. The outcome is read back from the reply,
    /// so dispatch itself knows nothing of statistics. `keep` decides, after
    /// the call, whether it counts (an inline attempt given up does not).
    fn run(
        &self,
        req: &mut Request,
        on_loop: Option<&rnfsd_fs::inline::Loop>,
        keep: impl FnOnce() -> bool,
    ) -> Option<Option<Reply>> {
        let mut run = || {
            dispatch(
                &self.server,
                &self.programs,
                &self.policy,
                self.drc.as_ref(),
                &req.data,
                req.peer,
                req.local,
                on_loop,
                &mut req.responder,
            )
        };
        let stats = self
            .stats
            .as_deref()
            .and_then(|r| r.shard().map(|s| (r, s)));
        let t0 = stats.map(|_| Instant::now());
        let answer = run();
        // A parked reply (it waits for the journal commit its call owes) is
        // counted now, as it will leave if that commit succeeds; its time
        // is the handler's, not the commit's.
        let (reply, parked) = match answer {
            Answer::Now(r) => (r, None),
            Answer::Parked(p) => (None, Some(p)),
        };
        // Only a pool job's call parks, never an inline attempt.
        if parked.is_none() && !keep() {
            return None;
        }
        if let (Some((reg, shard)), Some(t0)) = (stats, t0) {
            let us = u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX);
            let bytes = parked.as_ref().map(|p| p.reply()).or(reply.as_ref());
            reg.record(shard, &req.data, bytes.map(|r| &r.buf[..]), us);
        }
        if let Some(p) = parked {
            p.park();
        }
        Some(reply)
    }
}

impl Service for RpcService {
    fn call(&self, mut req: Request) -> Option<Reply> {
        self.run(&mut req, None, || true).flatten()
    }

    /// The NFS listener takes connections only from hosts some export
    /// lists (under the rules in force now: a SIGHUP applies to the next
    /// accept), so strangers cannot hold connection slots. The port
    /// mapper answers anyone, as rpcbind does.
    fn admit(&self, peer: &std::net::SocketAddr) -> bool {
        let serves_exports = self
            .programs
            .iter()
            .any(|p| p.prog == crate::programs::nfs3::NFS3.prog);
        !serves_exports
            || self
                .server
                .exports()
                .iter()
                .any(|e| e.access().lookup(peer.ip()).is_some())
    }

    fn plan(&self, record: &[u8]) -> Plan {
        let route = match crate::rpc::route(&self.server, &self.programs, record) {
            crate::rpc::Route::Quick => Route::Quick,
            crate::rpc::Route::Alone => Route::Alone,
            crate::rpc::Route::Pool => Route::Pool,
            crate::rpc::Route::Blocking => Route::Blocking,
        };
        Plan {
            route,
            reply_bound: self.reply_bound(record),
            tag: 0,
        }
    }

    fn loop_calls(self: Arc<Self>) -> Option<Box<dyn LoopCalls>> {
        let lp = rnfsd_fs::inline::Loop::new(self.leave);
        Some(Box::new(OnLoop(self, lp)))
    }
}

impl RpcService {
    /// READ, READDIR and READDIRPLUS answer up to the count they ask for
    /// (at most `max_io`; RFC 1813 §3.3.6, §3.3.16, §3.3.17): that much is
    /// reserved while they run; other replies are small. Read from the
    /// call header (RFC 5531 §8) and the arguments' fixed fields, bounded;
    /// anything malformed reserves `max_io` (the call will fail anyway).
    fn reply_bound(&self, record: &[u8]) -> usize {
        let word = |i: usize| {
            record
                .get(i..i.checked_add(4)?)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
        };
        let max = self.server.max_io as usize;
        let (Some(prog), Some(proc_)) = (word(12), word(20)) else {
            return 0;
        };
        if prog != crate::programs::nfs3::NFS3.prog as usize || !matches!(proc_, 6 | 16 | 17) {
            return 0;
        }
        // Skip the credential and the verifier (flavor, length, body).
        let skip = |at: usize| -> Option<usize> {
            let len = word(at + 4)?;
            at.checked_add(8)?.checked_add(len.checked_add(3)? & !3)
        };
        let count = (|| {
            let args = skip(skip(24)?)?;
            let fh = args
                .checked_add(4)?
                .checked_add(word(args)?.checked_add(3)? & !3)?;
            match proc_ {
                6 => word(fh + 8),   // offset, count
                16 => word(fh + 16), // cookie, cookieverf, count
                _ => word(fh + 20),  // cookie, cookieverf, dircount, maxcount
            }
        })();
        count.map_or(max, |c| c.min(max)) + 1024
    }
}

/// The service's calls on one event loop, with that loop's state.
struct OnLoop(Arc<RpcService>, rnfsd_fs::inline::Loop);

/// A quick call on the event loop thread: the backend answers from
/// memory or gives up (`rnfsd_fs::inline`), and a call given up runs
/// again in the pool, uncounted here.
impl LoopCalls for OnLoop {
    fn turn_begins(&mut self) {
        self.1.turn_begins();
    }

    fn turn_ends(&mut self, more: bool) {
        self.1.turn_ends(more);
    }

    fn call(&mut self, mut req: Request) -> Inline {
        let lp = &self.1;
        lp.begin_call();
        let r = self.0.run(&mut req, Some(lp), || !lp.gave_up());
        lp.end_call();
        match r {
            Some(reply) => Inline::Done(reply),
            None => Inline::Defer(req),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::programs::mount::MOUNT;
    use rnfsd_proto::rpc::{AcceptStat, CallHeader, OpaqueAuth, ReplyHeader};
    use rnfsd_xdr::{Dec, Enc};

    #[test]
    fn calls_reach_dispatch() {
        let s = Arc::new(Server::new(
            vec![],
            std::sync::Arc::new(rnfsd_fs::WriteVerifier::new([0; 8])),
            4096,
            None,
        ));
        let svc = RpcService::new(s, vec![&MOUNT], Policy::default());
        let mut e = Enc::new();
        CallHeader {
            xid: 77,
            rpcvers: 2,
            prog: 100005,
            vers: 3,
            proc_: 0,
            cred: OpaqueAuth::NONE,
            verf: OpaqueAuth::NONE,
        }
        .encode(&mut e);
        let req = |prog_vers: Vec<u8>| Request {
            data: prog_vers,
            peer: "127.0.0.1:1000".parse().unwrap(),
            local: "127.0.0.1:2049".parse().unwrap(),
            conn_id: 1,
            plan: Plan::default(),
            responder: Default::default(),
        };
        let r = svc.call(req(e.as_slice().to_vec())).unwrap();
        let (xid, h) = ReplyHeader::decode(&mut Dec::new(&r.buf[4..])).unwrap();
        assert_eq!((xid, h), (77, ReplyHeader::Accepted(AcceptStat::Success)));
        // NFS is not in this service's list.
        let mut b = e.into_vec();
        b[12..16].copy_from_slice(&100003u32.to_be_bytes());
        let r = svc.call(req(b)).unwrap();
        let (_, h) = ReplyHeader::decode(&mut Dec::new(&r.buf[4..])).unwrap();
        assert_eq!(h, ReplyHeader::Accepted(AcceptStat::ProgUnavail));
    }

    #[test]
    fn with_stats_counts_calls() {
        let s = Arc::new(Server::new(
            vec![],
            std::sync::Arc::new(rnfsd_fs::WriteVerifier::new([0; 8])),
            4096,
            None,
        ));
        let reg = Arc::new(rnfsd_stats::Registry::new(
            rnfsd_stats::Mode::Percore,
            crate::metrics::proc_descs(&[&MOUNT]),
        ));
        let svc = RpcService::new(s, vec![&MOUNT], Policy::default()).with_stats(reg.clone());
        let mut e = Enc::new();
        CallHeader {
            xid: 1,
            rpcvers: 2,
            prog: 100005,
            vers: 3,
            proc_: 0,
            cred: OpaqueAuth::NONE,
            verf: OpaqueAuth::NONE,
        }
        .encode(&mut e);
        for _ in 0..3 {
            let r = svc.call(Request {
                data: e.as_slice().to_vec(),
                peer: "127.0.0.1:1000".parse().unwrap(),
                local: "127.0.0.1:2049".parse().unwrap(),
                conn_id: 1,
                plan: Plan::default(),
                responder: Default::default(),
            });
            assert!(r.is_some());
        }
        let n = reg.snapshot();
        assert_eq!((n.rpc.records, n.rpc.success), (3, 3));
        let null3 = n
            .procs
            .iter()
            .find(|p| p.version == 3 && p.proc_ == 0)
            .unwrap();
        assert_eq!(null3.calls, 3);
    }
}
