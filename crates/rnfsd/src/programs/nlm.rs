//! NLM, the network lock manager (program 100021; XNFS chapters 9-10):
//! version 4 (64-bit ranges) and versions 1 and 3 (32-bit ranges, the same
//! calls: their arguments are widened to version 4's and the results
//! narrowed back). The locks themselves are `rnfsd_lockd`'s.
//!
//! The file handle in a lock is the NFS handle the client holds, so the
//! export, its client rules and the caller's credentials are found as for
//! NFS: a client an export does not list gets NLM4_STALE_FH. A client is
//! the address it calls from, as in knfsd: the caller_name it writes is
//! only a name (any client may send any name).

use std::net::IpAddr;
use std::sync::Arc;

use rnfsd_fs::lock::{LockKind, LockRange};
use rnfsd_fs::Fh;
use rnfsd_proto::nlm::*;

use crate::access::Grant;
use crate::programs::{CallCtx, Program, Version};
use crate::state::nlm::Callbacks;
use crate::state::ExportRef;
use rnfsd_lockd::{FileRef, Holder, LockReq, Outcome, Owner, ShareReq};
use rnfsd_rpc::proc_entry;
use rnfsd_rpc::{CacheClass, ProcError};

fn stat_of(o: &Outcome) -> Nlm4Stats {
    match o {
        Outcome::Granted => Nlm4Stats::Granted,
        Outcome::Denied(_) => Nlm4Stats::Denied,
        Outcome::NoLocks => Nlm4Stats::DeniedNoLocks,
        Outcome::Blocked => Nlm4Stats::Blocked,
        Outcome::Grace => Nlm4Stats::DeniedGracePeriod,
        Outcome::Stale => Nlm4Stats::StaleFh,
        Outcome::RoFs => Nlm4Stats::Rofs,
        Outcome::FBig => Nlm4Stats::Fbig,
        Outcome::Failed => Nlm4Stats::Failed,
    }
}

/// Why a call did not reach its file.
enum Refused {
    /// The handle is of no export in force.
    NoExport,
    /// The handle's export does not take this caller.
    Access(crate::access::Denied),
}

/// The export, handle and grant (credentials, read-only) of a lock's file.
fn resolve(ctx: &CallCtx<'_>, fh: &NetObj) -> Result<(ExportRef, Fh, Grant), Refused> {
    let e = ctx.server.export_of(&fh.0).ok_or(Refused::NoExport)?;
    match e.access().check(ctx.peer, &ctx.auth) {
        Ok(g) => Ok((e, Fh(fh.0.clone()), g)),
        Err(d) => Err(Refused::Access(d)),
    }
}

/// A call's result, and whether its caller passed the export's client
/// check: only then does a `*_MSG` call get its result sent back (a
/// callback is a connection to the caller's hosts; a call that failed
/// the check must not make us open one).
struct Checked<R> {
    res: R,
    answer: bool,
}

impl<R> Checked<R> {
    fn map<T>(self, f: impl FnOnce(R) -> T) -> Checked<T> {
        Checked {
            res: f(self.res),
            answer: self.answer,
        }
    }
}

/// The client a call comes from: its address.
fn client(ctx: &CallCtx<'_>) -> IpAddr {
    rnfsd_lockd::canon(ctx.peer.ip())
}

fn request(ctx: &CallCtx<'_>, l: &Nlm4Lock, exclusive: bool) -> LockReq {
    LockReq {
        owner: Owner {
            addr: client(ctx),
            oh: l.oh.0.clone(),
            svid: l.svid as u32,
        },
        kind: if exclusive {
            LockKind::Exclusive
        } else {
            LockKind::Shared
        },
        range: LockRange {
            start: l.l_offset,
            len: l.l_len,
        },
    }
}

/// Runs `f` with the lock manager and the lock's file, or answers why not.
/// A call that would keep others from writing (`write`: an exclusive lock,
/// a share with write access or denying write) on a read-only export is
/// NLM4_ROFS, as knfsd answers when it opens the file for writing.
fn with_file(
    ctx: &CallCtx<'_>,
    fh: &NetObj,
    write: bool,
    f: impl FnOnce(&rnfsd_lockd::LockManager, &FileRef<'_>) -> Outcome,
) -> Checked<Outcome> {
    let refused = |res, answer| Checked { res, answer };
    let Some(m) = ctx.server.locks() else {
        return refused(Outcome::NoLocks, true);
    };
    let (e, fh, grant) = match resolve(ctx, fh) {
        Ok(v) => v,
        // The caller is listed (by another export: it got in), its
        // handle is stale: it may be told so.
        Err(Refused::NoExport) => return refused(Outcome::Stale, true),
        Err(Refused::Access(crate::access::Denied::NotListed)) => {
            return refused(Outcome::Stale, false)
        }
        Err(Refused::Access(crate::access::Denied::InsecurePort)) => {
            return refused(Outcome::Failed, false)
        }
    };
    if write && grant.read_only {
        return refused(Outcome::RoFs, true);
    }
    let file = FileRef {
        backend: &e.backend,
        cred: &grant.cred,
        export: e.id,
        fh: &fh,
    };
    Checked {
        res: f(m, &file),
        answer: true,
    }
}

fn null(_: &CallCtx<'_>, _: ()) -> Result<(), ProcError> {
    Ok(())
}

fn test4(ctx: &CallCtx<'_>, a: Nlm4TestArgs) -> Result<Nlm4TestRes, ProcError> {
    Ok(test(ctx, a).res)
}

fn test(ctx: &CallCtx<'_>, a: Nlm4TestArgs) -> Checked<Nlm4TestRes> {
    let req = request(ctx, &a.alock, a.exclusive);
    with_file(ctx, &a.alock.fh, false, |m, f| m.test(f, &req)).map(|o| test_res(a.cookie, o))
}

fn test_res(cookie: NetObj, o: Outcome) -> Nlm4TestRes {
    let stat = match o {
        Outcome::Denied(Some(Holder {
            exclusive,
            svid,
            oh,
            start,
            len,
        })) => Nlm4TestRply::Denied(Nlm4Holder {
            exclusive,
            svid: svid as i32,
            oh: NetObj(oh),
            l_offset: start,
            l_len: len,
        }),
        Outcome::Denied(None) => Nlm4TestRply::Denied(Nlm4Holder::default()),
        o => Nlm4TestRply::Stat(stat_of(&o)),
    };
    Nlm4TestRes { cookie, stat }
}

fn lock4(ctx: &CallCtx<'_>, a: Nlm4LockArgs) -> Result<Nlm4Res, ProcError> {
    Ok(lock_v4(ctx, a).res)
}

fn lock_v4(ctx: &CallCtx<'_>, a: Nlm4LockArgs) -> Checked<Nlm4Res> {
    lock(ctx, a, VERSION4)
}
fn lock_v1(ctx: &CallCtx<'_>, a: Nlm4LockArgs) -> Checked<Nlm4Res> {
    lock(ctx, a, VERSION1)
}
fn lock_v3(ctx: &CallCtx<'_>, a: Nlm4LockArgs) -> Checked<Nlm4Res> {
    lock(ctx, a, VERSION3)
}

/// LOCK of NLM version `vers` (its GRANTED goes out in that version).
fn lock(ctx: &CallCtx<'_>, a: Nlm4LockArgs, vers: u32) -> Checked<Nlm4Res> {
    let req = request(ctx, &a.alock, a.exclusive);
    let c = with_file(ctx, &a.alock.fh, a.exclusive, |m, f| {
        // Built only for a request that may wait (a no-op closure
        // allocates nothing).
        let callback: Box<dyn FnOnce() + Send> = match a.block {
            true => granted_callback(ctx, f, &req, &a, vers),
            false => Box::new(|| {}),
        };
        let o = m.lock(f, &req, a.block, a.reclaim, callback);
        if matches!(o, Outcome::Granted | Outcome::Blocked) {
            m.note_host(rnfsd_lockd::hosts::Host {
                name: a.alock.caller_name.0.clone(),
                addr: req.owner.addr,
                server: ctx.local.ip(),
            });
        }
        o
    });
    c.map(|o| res(a.cookie, &o))
}

fn res(cookie: NetObj, o: &Outcome) -> Nlm4Res {
    Nlm4Res {
        cookie,
        stat: stat_of(o),
    }
}

fn cancel4(ctx: &CallCtx<'_>, a: Nlm4CancArgs) -> Result<Nlm4Res, ProcError> {
    Ok(cancel(ctx, a).res)
}

fn cancel(ctx: &CallCtx<'_>, a: Nlm4CancArgs) -> Checked<Nlm4Res> {
    let req = request(ctx, &a.alock, a.exclusive);
    with_file(ctx, &a.alock.fh, false, |m, f| {
        m.cancel(f.export, f.fh, &req)
    })
    .map(|o| res(a.cookie, &o))
}

fn unlock4(ctx: &CallCtx<'_>, a: Nlm4UnlockArgs) -> Result<Nlm4Res, ProcError> {
    Ok(unlock(ctx, a).res)
}

fn unlock(ctx: &CallCtx<'_>, a: Nlm4UnlockArgs) -> Checked<Nlm4Res> {
    let req = request(ctx, &a.alock, false);
    with_file(ctx, &a.alock.fh, false, |m, f| {
        m.unlock(f.export, f.fh, &req.owner, req.range)
    })
    .map(|o| res(a.cookie, &o))
}

/// GRANTED to a server: we hold no client-side locks (XNFS: a server
/// answers it only as a client), so nothing waits for it.
fn granted4(ctx: &CallCtx<'_>, a: Nlm4TestArgs) -> Result<Nlm4Res, ProcError> {
    Ok(granted(ctx, a).res)
}

fn granted(_: &CallCtx<'_>, a: Nlm4TestArgs) -> Checked<Nlm4Res> {
    Checked {
        res: res(a.cookie, &Outcome::Denied(None)),
        answer: true,
    }
}

fn share_req(ctx: &CallCtx<'_>, s: &Nlm4Share) -> ShareReq {
    ShareReq {
        addr: client(ctx),
        oh: s.oh.0.clone(),
        access: s.access as u32,
        deny: s.mode as u32,
    }
}

fn share4(ctx: &CallCtx<'_>, a: Nlm4ShareArgs) -> Result<Nlm4ShareRes, ProcError> {
    let req = share_req(ctx, &a.share);
    // fsh4 bits: 2 is write (access), deny write (mode).
    let write = req.access & 2 != 0 || req.deny & 2 != 0;
    let o = with_file(ctx, &a.share.fh, write, |m, f| {
        let o = m.share(f, &req, a.reclaim);
        // A share is reclaimed after a restart as a lock is.
        if o == Outcome::Granted {
            m.note_host(rnfsd_lockd::hosts::Host {
                name: a.share.caller_name.0.clone(),
                addr: req.addr,
                server: ctx.local.ip(),
            });
        }
        o
    })
    .res;
    Ok(Nlm4ShareRes {
        cookie: a.cookie,
        stat: stat_of(&o),
        sequence: 0,
    })
}

fn unshare4(ctx: &CallCtx<'_>, a: Nlm4ShareArgs) -> Result<Nlm4ShareRes, ProcError> {
    let req = share_req(ctx, &a.share);
    let o = with_file(ctx, &a.share.fh, false, |m, f| {
        m.unshare(f.export, f.fh, req.addr, &req.oh)
    })
    .res;
    Ok(Nlm4ShareRes {
        cookie: a.cookie,
        stat: stat_of(&o),
        sequence: 0,
    })
}

/// FREE_ALL (XNFS 10.14): the client rebooted; the locks it took from
/// the address it calls from go, and only those (the name it sends is
/// logged, not believed).
fn free_all(ctx: &CallCtx<'_>, a: Nlm4Notify) -> Result<(), ProcError> {
    if let Some(m) = ctx.server.locks() {
        tracing::debug!(peer = %ctx.peer, name = %String::from_utf8_lossy(&a.name.0), "FREE_ALL");
        m.free_client(ctx.peer.ip());
    }
    Ok(())
}

/// After a reload (SIGHUP): the locks, waits and shares of exports no
/// longer served, and of clients their export no longer lists, are freed.
pub fn release_unlisted(server: &crate::state::Server) {
    let Some(m) = server.locks() else {
        return;
    };
    let exports = server.exports();
    let n = m.release_where(|id, addr| {
        exports
            .iter()
            .any(|e| e.id == id && e.access().lookup(addr).is_some())
    });
    if n > 0 {
        tracing::info!(
            files = n,
            "lock manager: locks of removed exports or clients freed"
        );
    }
}

// Versions 1 and 3: the same handlers on widened arguments.

fn test1(ctx: &CallCtx<'_>, a: NlmTestArgs) -> Result<NlmTestRes, ProcError> {
    Ok(test4(ctx, a.into())?.to_v1())
}
fn lock1(ctx: &CallCtx<'_>, a: NlmLockArgs) -> Result<NlmRes, ProcError> {
    Ok(lock_v1(ctx, a.into()).res.to_v1())
}
fn lock3(ctx: &CallCtx<'_>, a: NlmLockArgs) -> Result<NlmRes, ProcError> {
    Ok(lock_v3(ctx, a.into()).res.to_v1())
}
fn cancel1(ctx: &CallCtx<'_>, a: NlmCancArgs) -> Result<NlmRes, ProcError> {
    Ok(cancel4(ctx, a.into())?.to_v1())
}
fn unlock1(ctx: &CallCtx<'_>, a: NlmUnlockArgs) -> Result<NlmRes, ProcError> {
    Ok(unlock4(ctx, a.into())?.to_v1())
}
fn granted1(ctx: &CallCtx<'_>, a: NlmTestArgs) -> Result<NlmRes, ProcError> {
    Ok(granted4(ctx, a.into())?.to_v1())
}
fn share1(ctx: &CallCtx<'_>, a: NlmShareArgs) -> Result<NlmShareRes, ProcError> {
    Ok(share4(ctx, a)?.to_v1())
}
fn unshare1(ctx: &CallCtx<'_>, a: NlmShareArgs) -> Result<NlmShareRes, ProcError> {
    Ok(unshare4(ctx, a)?.to_v1())
}

/// Procedures a server does not serve: the *_RES answers (we send no
/// *_MSG) and NM_LOCK.
fn unavailable(_: &CallCtx<'_>, _: ()) -> Result<(), ProcError> {
    Err(ProcError::ProcUnavail)
}

/// The asynchronous calls (XNFS 10.1: the BSD and macOS lock daemons):
/// the call is answered at once with no result, and the result goes back
/// as the caller's own *_RES procedure, in the background.
fn answer_async<R: rnfsd_xdr::Xdr>(
    ctx: &CallCtx<'_>,
    vers: u32,
    proc_: u32,
    res: &R,
) -> Result<(), ProcError> {
    callback(
        &ctx.server.nlm_callbacks,
        Callback {
            to: ctx.peer.ip(),
            from: ctx.local.ip(),
            vers,
            proc_,
            body: rnfsd_xdr::to_vec(res),
            on_reply: None,
        },
    );
    Ok(())
}

/// What a callback does with the client's answer (its result's bytes).
type OnReply = Box<dyn FnOnce(&[u8]) + Send>;

/// A call back to a client's lock manager.
struct Callback {
    /// The client.
    to: IpAddr,
    /// Our address it called (the callback leaves from it: the Linux
    /// client takes GRANTED only from the server it locked with).
    from: IpAddr,
    vers: u32,
    proc_: u32,
    body: Vec<u8>,
    /// Given the result's bytes when the client answered.
    on_reply: Option<OnReply>,
}

/// Sends `cb` to the client's lock manager (found through its port
/// mapper), from a short-lived thread, all of it within
/// `CALLBACK_DEADLINE`.
fn callback(callbacks: &Callbacks, cb: Callback) {
    let ip = rnfsd_lockd::canon(cb.to);
    let proc_ = cb.proc_;
    let Some(slot) = callbacks.slot(ip) else {
        tracing::debug!(client = %ip, proc_, "NLM callback dropped: too many in flight");
        return;
    };
    let spawned = std::thread::Builder::new()
        .name("rnfsd-nlm-cb".into())
        .spawn(move || {
            let deadline = std::time::Instant::now() + CALLBACK_DEADLINE;
            let r = crate::outcall::call_registered(
                ip,
                Some(cb.from),
                PROGRAM,
                cb.vers,
                proc_,
                &cb.body,
                deadline,
            );
            match (r, cb.on_reply) {
                (Ok(res), Some(then)) => then(&res),
                (Ok(_), None) => {}
                (Err(e), _) => {
                    tracing::debug!(client = %ip, proc_, "NLM callback not delivered: {e}")
                }
            }
            drop(slot);
        });
    // Not started: the closure, and with it the slot, is dropped.
    if let Err(e) = spawned {
        tracing::debug!("NLM callback not sent: {e}");
    }
}

/// An asynchronous call of version `$vers`: the checked handler on the
/// version 4 arguments, its result (in `$vers`'s form, by `$conv`) sent
/// back as procedure `$res` when the caller passed the client check.
macro_rules! msg_call {
    ($name:ident, $vers:expr, $args:ty, $checked:ident, $conv:expr, $res:expr) => {
        fn $name(ctx: &CallCtx<'_>, a: $args) -> Result<(), ProcError> {
            let c = $checked(ctx, a.into());
            if !c.answer {
                tracing::debug!(peer = %ctx.peer, "NLM *_MSG refused by the export: no answer sent");
                return Ok(());
            }
            answer_async(ctx, $vers, $res, &($conv)(c.res))
        }
    };
}

fn v4<R>(r: R) -> R {
    r
}
fn test_v1(r: Nlm4TestRes) -> NlmTestRes {
    r.to_v1()
}
fn res_v1(r: Nlm4Res) -> NlmRes {
    r.to_v1()
}

msg_call!(test_msg4, VERSION4, Nlm4TestArgs, test, v4, PROC_TEST_RES);
msg_call!(
    lock_msg4,
    VERSION4,
    Nlm4LockArgs,
    lock_v4,
    v4,
    PROC_LOCK_RES
);
msg_call!(
    cancel_msg4,
    VERSION4,
    Nlm4CancArgs,
    cancel,
    v4,
    PROC_CANCEL_RES
);
msg_call!(
    unlock_msg4,
    VERSION4,
    Nlm4UnlockArgs,
    unlock,
    v4,
    PROC_UNLOCK_RES
);
msg_call!(
    granted_msg4,
    VERSION4,
    Nlm4TestArgs,
    granted,
    v4,
    PROC_GRANTED_RES
);
msg_call!(
    test_msg1,
    VERSION1,
    NlmTestArgs,
    test,
    test_v1,
    PROC_TEST_RES
);
msg_call!(
    lock_msg1,
    VERSION1,
    NlmLockArgs,
    lock_v1,
    res_v1,
    PROC_LOCK_RES
);
msg_call!(
    cancel_msg1,
    VERSION1,
    NlmCancArgs,
    cancel,
    res_v1,
    PROC_CANCEL_RES
);
msg_call!(
    unlock_msg1,
    VERSION1,
    NlmUnlockArgs,
    unlock,
    res_v1,
    PROC_UNLOCK_RES
);
msg_call!(
    granted_msg1,
    VERSION1,
    NlmTestArgs,
    granted,
    res_v1,
    PROC_GRANTED_RES
);
msg_call!(
    test_msg3,
    VERSION3,
    NlmTestArgs,
    test,
    test_v1,
    PROC_TEST_RES
);
msg_call!(
    lock_msg3,
    VERSION3,
    NlmLockArgs,
    lock_v3,
    res_v1,
    PROC_LOCK_RES
);
msg_call!(
    cancel_msg3,
    VERSION3,
    NlmCancArgs,
    cancel,
    res_v1,
    PROC_CANCEL_RES
);
msg_call!(
    unlock_msg3,
    VERSION3,
    NlmUnlockArgs,
    unlock,
    res_v1,
    PROC_UNLOCK_RES
);
msg_call!(
    granted_msg3,
    VERSION3,
    NlmTestArgs,
    granted,
    res_v1,
    PROC_GRANTED_RES
);

const NETOBJ: usize = 4 + MAXNETOBJ_SZ;
const RES: usize = NETOBJ + 4;
const TEST_RES: usize = NETOBJ + 4 + 4 + 4 + NETOBJ + 16;

macro_rules! unavailable_row {
    ($name:expr) => {
        proc_entry!($name, (), unavailable, CacheClass::None, 0)
    };
}

static V4_PROCS: &[crate::programs::Proc] = &[
    proc_entry!("NULL", (), null, CacheClass::None, 0),
    proc_entry!("TEST", Nlm4TestArgs, test4, CacheClass::None, TEST_RES),
    proc_entry!("LOCK", Nlm4LockArgs, lock4, CacheClass::Reply, RES),
    proc_entry!("CANCEL", Nlm4CancArgs, cancel4, CacheClass::Reply, RES),
    proc_entry!("UNLOCK", Nlm4UnlockArgs, unlock4, CacheClass::Reply, RES),
    proc_entry!("GRANTED", Nlm4TestArgs, granted4, CacheClass::None, RES),
    proc_entry!("TEST_MSG", Nlm4TestArgs, test_msg4, CacheClass::None, 0),
    proc_entry!("LOCK_MSG", Nlm4LockArgs, lock_msg4, CacheClass::Reply, 0),
    proc_entry!(
        "CANCEL_MSG",
        Nlm4CancArgs,
        cancel_msg4,
        CacheClass::Reply,
        0
    ),
    proc_entry!(
        "UNLOCK_MSG",
        Nlm4UnlockArgs,
        unlock_msg4,
        CacheClass::Reply,
        0
    ),
    proc_entry!(
        "GRANTED_MSG",
        Nlm4TestArgs,
        granted_msg4,
        CacheClass::None,
        0
    ),
    unavailable_row!("TEST_RES"),
    unavailable_row!("LOCK_RES"),
    unavailable_row!("CANCEL_RES"),
    unavailable_row!("UNLOCK_RES"),
    unavailable_row!("GRANTED_RES"),
    unavailable_row!("16"),
    unavailable_row!("17"),
    unavailable_row!("18"),
    unavailable_row!("19"),
    proc_entry!("SHARE", Nlm4ShareArgs, share4, CacheClass::Reply, RES + 4),
    proc_entry!(
        "UNSHARE",
        Nlm4ShareArgs,
        unshare4,
        CacheClass::Reply,
        RES + 4
    ),
    unavailable_row!("NM_LOCK"),
    proc_entry!("FREE_ALL", Nlm4Notify, free_all, CacheClass::None, 0),
];

/// Versions 1 and 3 share procedures 0-15 (their *_MSG handlers answer
/// in their own version); version 3 adds 20-23.
macro_rules! v1_table {
    ($lk:ident, $t:ident, $l:ident, $c:ident, $u:ident, $g:ident; $($extra:expr),* $(,)?) => {
        &[
            proc_entry!("NULL", (), null, CacheClass::None, 0),
            proc_entry!("TEST", NlmTestArgs, test1, CacheClass::None, TEST_RES),
            proc_entry!("LOCK", NlmLockArgs, $lk, CacheClass::Reply, RES),
            proc_entry!("CANCEL", NlmCancArgs, cancel1, CacheClass::Reply, RES),
            proc_entry!("UNLOCK", NlmUnlockArgs, unlock1, CacheClass::Reply, RES),
            proc_entry!("GRANTED", NlmTestArgs, granted1, CacheClass::None, RES),
            proc_entry!("TEST_MSG", NlmTestArgs, $t, CacheClass::None, 0),
            proc_entry!("LOCK_MSG", NlmLockArgs, $l, CacheClass::Reply, 0),
            proc_entry!("CANCEL_MSG", NlmCancArgs, $c, CacheClass::Reply, 0),
            proc_entry!("UNLOCK_MSG", NlmUnlockArgs, $u, CacheClass::Reply, 0),
            proc_entry!("GRANTED_MSG", NlmTestArgs, $g, CacheClass::None, 0),
            unavailable_row!("TEST_RES"),
            unavailable_row!("LOCK_RES"),
            unavailable_row!("CANCEL_RES"),
            unavailable_row!("UNLOCK_RES"),
            unavailable_row!("GRANTED_RES"),
            $($extra),*
        ]
    };
}

static V1_PROCS: &[crate::programs::Proc] =
    v1_table!(lock1, test_msg1, lock_msg1, cancel_msg1, unlock_msg1, granted_msg1;);

static V3_PROCS: &[crate::programs::Proc] = v1_table!(
    lock3, test_msg3, lock_msg3, cancel_msg3, unlock_msg3, granted_msg3;
    unavailable_row!("16"),
    unavailable_row!("17"),
    unavailable_row!("18"),
    unavailable_row!("19"),
    proc_entry!("SHARE", NlmShareArgs, share1, CacheClass::Reply, RES + 4),
    proc_entry!(
        "UNSHARE",
        NlmShareArgs,
        unshare1,
        CacheClass::Reply,
        RES + 4
    ),
    unavailable_row!("NM_LOCK"),
    proc_entry!("FREE_ALL", NlmNotify, free_all, CacheClass::None, 0),
);

pub static NLM: Program = Program {
    name: "nlm",
    prog: PROGRAM,
    versions: &[
        Version {
            vers: VERSION1,
            procs: V1_PROCS,
        },
        Version {
            vers: VERSION3,
            procs: V3_PROCS,
        },
        Version {
            vers: VERSION4,
            procs: V4_PROCS,
        },
    ],
};

/// How long a callback may take, all of it (the port mapper's answer, the
/// call and its reply).
const CALLBACK_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// The GRANTED callback (XNFS 10.3) for a blocked lock: when it runs, a
/// short-lived thread asks the client's port mapper for its NLM TCP port
/// in the version the client locked with and sends GRANTED there, from
/// the address the client called. Not reaching the client is harmless: it
/// asks again on its own (the Linux client every 30 s) and gets the lock,
/// which it already holds. A client that answers anything but
/// NLM4_GRANTED no longer wants the lock (its process gave up waiting):
/// it is released, as Linux lockd's `nlmsvc_grant_reply` does, or it would
/// stay held for no one.
fn granted_callback(
    ctx: &CallCtx<'_>,
    f: &FileRef<'_>,
    req: &LockReq,
    a: &Nlm4LockArgs,
    vers: u32,
) -> Box<dyn FnOnce() + Send> {
    let body = match vers {
        VERSION4 => rnfsd_xdr::to_vec(&Nlm4TestArgs {
            cookie: a.cookie.clone(),
            exclusive: a.exclusive,
            alock: a.alock.clone(),
        }),
        // Widened from 32 bits: they fit back.
        _ => rnfsd_xdr::to_vec(&NlmTestArgs {
            cookie: a.cookie.clone(),
            exclusive: a.exclusive,
            alock: NlmLock {
                caller_name: a.alock.caller_name.clone(),
                fh: a.alock.fh.clone(),
                oh: a.alock.oh.clone(),
                svid: a.alock.svid,
                l_offset: a.alock.l_offset as u32,
                l_len: a.alock.l_len as u32,
            },
        }),
    };
    let m = ctx.server.locks().map(Arc::downgrade);
    let (export, fh, owner, range) = (f.export, f.fh.clone(), req.owner.clone(), req.range);
    let on_reply = move |res: &[u8]| {
        let stat = match vers {
            VERSION4 => rnfsd_xdr::from_slice::<Nlm4Res>(res).map(|r| r.stat),
            _ => rnfsd_xdr::from_slice::<NlmRes>(res).map(|r| r.stat.into()),
        };
        // An answer we cannot read is no refusal.
        let Ok(stat) = stat else {
            return;
        };
        if stat != Nlm4Stats::Granted {
            tracing::info!(client = %owner.addr, ?stat, "GRANTED refused by the client: lock released");
            if let Some(m) = m.and_then(|m| m.upgrade()) {
                m.release(export, &fh, &owner, range);
            }
        }
    };
    let callbacks = ctx.server.nlm_callbacks.clone();
    let cb = Callback {
        to: ctx.peer.ip(),
        from: ctx.local.ip(),
        vers,
        proc_: PROC_GRANTED,
        body,
        on_reply: Some(Box::new(on_reply)),
    };
    Box::new(move || callback(&callbacks, cb))
}
