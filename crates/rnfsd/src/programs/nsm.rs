//! NSM, the status monitor (program 100024, XNFS chapter 11), built in:
//! it answers a client's reboot notice (SM_NOTIFY: that host's locks are
//! freed) and tells clients that this server restarted (SM_NOTIFY to each
//! host that held locks before, so they reclaim within the grace period;
//! many at once, as sm-notify).
//!
//! The monitoring calls (SM_MON, SM_UNMON, SM_UNMON_ALL) are a local
//! lock manager's requests to its own statd; ours needs none, as lockd and
//! statd are one process here. They answer success with our state so a
//! caller that tries them is not stuck, and record nothing.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use rnfsd_proto::nsm::*;

use crate::programs::{CallCtx, Program, Version};
use rnfsd_lockd::hosts::Host;
use rnfsd_lockd::LockManager;
use rnfsd_rpc::proc_entry;
use rnfsd_rpc::{CacheClass, ProcError};

fn state(ctx: &CallCtx<'_>) -> i32 {
    ctx.server.locks().map_or(1, |m| m.state())
}

fn null(_: &CallCtx<'_>, _: ()) -> Result<(), ProcError> {
    Ok(())
}

fn stat(ctx: &CallCtx<'_>, _: SmName) -> Result<SmStatRes, ProcError> {
    Ok(SmStatRes {
        res_stat: SmRes::StatSucc,
        state: state(ctx),
    })
}

fn mon(ctx: &CallCtx<'_>, _: Mon) -> Result<SmStatRes, ProcError> {
    stat(ctx, SmName::default())
}

fn unmon(ctx: &CallCtx<'_>, _: MonId) -> Result<SmStat, ProcError> {
    Ok(SmStat { state: state(ctx) })
}

fn unmon_all(ctx: &CallCtx<'_>, _: MyId) -> Result<SmStat, ProcError> {
    Ok(SmStat { state: state(ctx) })
}

fn simu_crash(_: &CallCtx<'_>, _: ()) -> Result<(), ProcError> {
    Ok(())
}

/// SM_NOTIFY from a client's statd: it rebooted, its old locks are gone
/// with its processes. Only the locks taken from the address it calls
/// from go: a host can speak only for itself. The name it sends (its
/// statd's idea of its name, which may not be the caller_name its kernel
/// locks with) is logged, not believed.
fn notify(ctx: &CallCtx<'_>, a: StatChge) -> Result<(), ProcError> {
    if let Some(m) = ctx.server.locks() {
        tracing::info!(peer = %ctx.peer, name = %String::from_utf8_lossy(&a.mon_name.0), state = a.state, "SM_NOTIFY: client restarted");
        m.free_client(ctx.peer.ip());
    }
    Ok(())
}

/// Every row answers AUTH_NONE: statd and sm-notify send SM_NOTIFY with it
/// (checked against the caller's address instead).
static PROCS: &[crate::programs::Proc] = &[
    proc_entry!("NULL", (), null, CacheClass::None, 0),
    proc_entry!("STAT", SmName, stat, CacheClass::None, 8).auth_none(),
    proc_entry!("MON", Mon, mon, CacheClass::None, 8).auth_none(),
    proc_entry!("UNMON", MonId, unmon, CacheClass::None, 4).auth_none(),
    proc_entry!("UNMON_ALL", MyId, unmon_all, CacheClass::None, 4).auth_none(),
    proc_entry!("SIMU_CRASH", (), simu_crash, CacheClass::None, 0).auth_none(),
    proc_entry!("NOTIFY", StatChge, notify, CacheClass::None, 0).auth_none(),
];

pub static NSM: Program = Program {
    name: "nsm",
    prog: PROGRAM,
    versions: &[Version {
        vers: VERSION,
        procs: PROCS,
    }],
};

/// How long telling one host may take (its port mapper and status
/// monitor, retries included), at most: within the grace period anyway.
const NOTIFY_PER_HOST: Duration = Duration::from_secs(30);

/// Longest pause between two tries at one host.
const MAX_BACKOFF: Duration = Duration::from_secs(8);

/// Tells every host of the previous run that this server restarted into
/// NSM `state` (SM_NOTIFY to its status monitor, found through its port
/// mapper), in the background: their lock managers then reclaim. Up to
/// `parallel` hosts at once, each retried until `NOTIFY_PER_HOST` and all
/// of it over by the end of the grace period (a notice after it is of no
/// use: reclaims are refused then), so hosts that are gone cannot use up
/// the grace period of those that are there (as sm-notify, which tells
/// them all at once). A host that does not answer is dropped from the
/// hosts list unless it holds locks again; at the end of the grace period
/// so is every host that reclaimed nothing.
pub fn notify_restart(m: &Arc<LockManager>, hosts: Vec<Host>, state: i32, parallel: usize) {
    if hosts.is_empty() {
        return;
    }
    let m = Arc::downgrade(m);
    let spawned = std::thread::Builder::new()
        .name("rnfsd-sm-notify".into())
        .spawn(move || notify_all(&m, hosts, state, parallel));
    if let Err(e) = spawned {
        tracing::warn!("SM_NOTIFY not sent: {e}");
    }
}

fn notify_all(m: &Weak<LockManager>, hosts: Vec<Host>, state: i32, parallel: usize) {
    let grace = m.upgrade().and_then(|m| m.grace_left());
    let all_by = Instant::now() + grace.filter(|g| !g.is_zero()).unwrap_or(NOTIFY_PER_HOST);
    let n = hosts.len();
    let queue = Mutex::new(VecDeque::from(hosts));
    let failed = Mutex::new(Vec::new());
    let work = || loop {
        let Some(h) = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front() else {
            return;
        };
        let by = all_by.min(Instant::now() + NOTIFY_PER_HOST);
        match notify_one(&h, state, by) {
            Ok(()) => {
                tracing::info!(host = %String::from_utf8_lossy(&h.name), addr = %h.addr, "told of our restart (SM_NOTIFY)")
            }
            Err(e) => {
                tracing::warn!(host = %String::from_utf8_lossy(&h.name), addr = %h.addr, "SM_NOTIFY failed: {e}");
                failed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(h.addr);
            }
        }
    };
    std::thread::scope(|sc| {
        let mut started = 0;
        for _ in 0..parallel.clamp(1, n) {
            match std::thread::Builder::new()
                .name("rnfsd-sm-notify".into())
                .spawn_scoped(sc, work)
            {
                Ok(_) => started += 1,
                Err(e) => {
                    tracing::warn!("SM_NOTIFY: fewer threads ({e})");
                    break;
                }
            }
        }
        if started == 0 {
            work();
        }
    });
    let failed = failed.into_inner().unwrap_or_else(|e| e.into_inner());
    tracing::info!(
        hosts = n,
        told = n - failed.len(),
        "lock manager: restart notices sent"
    );
    if let Some(m) = m.upgrade() {
        for a in failed {
            m.forget_if_idle(a);
        }
    }
    // The grace period over, hosts that reclaimed nothing are forgotten
    // (the manager is held only between naps).
    loop {
        let Some(m) = m.upgrade() else {
            return;
        };
        match m.grace_left() {
            Some(left) => {
                drop(m);
                std::thread::sleep(left);
            }
            None => {
                let n = m.prune_hosts();
                tracing::info!(
                    hosts = n,
                    "lock manager: hosts that reclaimed nothing forgotten"
                );
                return;
            }
        }
    }
}

/// Tells `h`, trying again (backing off) until `by`.
fn notify_one(h: &Host, state: i32, by: Instant) -> std::io::Result<()> {
    let mut pause = Duration::from_secs(1);
    loop {
        let e = match send_notify(h, state, by) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if Instant::now() + pause >= by {
            return Err(e);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(MAX_BACKOFF);
    }
}

fn send_notify(h: &Host, state: i32, by: Instant) -> std::io::Result<()> {
    // We are known by the address the host called (the name its mount
    // used, in the common case of an address), and call from it.
    let me = rnfsd_lockd::canon(h.server);
    let args = rnfsd_xdr::to_vec(&StatChge {
        mon_name: SmString(me.to_string().into_bytes()),
        state,
    });
    crate::outcall::call_registered(h.addr, Some(me), PROGRAM, VERSION, SM_NOTIFY, &args, by)?;
    Ok(())
}
