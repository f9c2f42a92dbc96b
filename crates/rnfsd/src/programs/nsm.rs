//! NSM, the status monitor (program 100024, XNFS chapter 11), built in:
//! it answers a client's reboot notice (SM_NOTIFY: that host's locks are
//! freed) and tells clients that this server restarted (SM_NOTIFY to each
//! host that held locks before, so they reclaim within the grace period).
//!
//! The monitoring calls (SM_MON, SM_UNMON, SM_UNMON_ALL) are a local
//! lock manager's requests to its own statd; ours needs none, as lockd and
//! statd are one process here. They answer success with our state so a
//! caller that tries them is not stuck, and record nothing.

use std::net::IpAddr;

use rnfsd_proto::nsm::*;

use crate::programs::{CallCtx, Program, Version};
use rnfsd_lockd::hosts::Host;
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

/// How long telling one host may take, all of it.
const NOTIFY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Tells every host of the previous run that this server restarted into
/// NSM `state` (SM_NOTIFY to its status monitor, found through its port
/// mapper), in the background: their lock managers then reclaim. A host
/// that does not answer is skipped; its locks were lost with the restart
/// (as with knfsd's sm-notify giving up).
pub fn notify_restart(hosts: Vec<Host>, state: i32) {
    if hosts.is_empty() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("rnfsd-sm-notify".into())
        .spawn(move || {
            for h in hosts {
                match send_notify(&h, state) {
                    Ok(()) => tracing::info!(host = %String::from_utf8_lossy(&h.name), addr = %h.addr, "told of our restart (SM_NOTIFY)"),
                    Err(e) => tracing::warn!(host = %String::from_utf8_lossy(&h.name), addr = %h.addr, "SM_NOTIFY failed: {e}"),
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("SM_NOTIFY not sent: {e}");
    }
}

fn send_notify(h: &Host, state: i32) -> std::io::Result<()> {
    // We are known by the address the host called (the name its mount
    // used, in the common case of an address).
    let me = match h.server {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(h.server, IpAddr::V4),
        v4 => v4,
    };
    let args = rnfsd_xdr::to_vec(&StatChge {
        mon_name: SmString(me.to_string().into_bytes()),
        state,
    });
    let deadline = std::time::Instant::now() + NOTIFY_TIMEOUT;
    crate::outcall::call_registered(h.addr, None, PROGRAM, VERSION, SM_NOTIFY, &args, deadline)?;
    Ok(())
}
