//! Per-thread filesystem credentials (act-as-caller).
//!
//! setfsuid/setfsgid and the raw setgroups syscall change only the calling
//! thread (glibc's setgroups() would signal every thread to change all of
//! them). The last set identity is cached per thread so a run of calls from
//! one user costs no syscalls. Worker threads keep the last caller's
//! filesystem identity between calls; `reset_thread_creds` restores the
//! server's if other code on the thread needs it.

use std::cell::RefCell;

use super::sys;
use crate::limits::local::MAX_GROUPS;
use crate::{Cred, FsError, FsResult};

/// What this thread's filesystem identity is known to be. None = unknown
/// (a failed change left it undetermined): the next change always calls.
struct State {
    uid: Option<u32>,
    gid: Option<u32>,
    groups: Option<Vec<u32>>,
    /// The groups to restore in `reset_thread_creds`.
    orig_groups: Option<Vec<u32>>,
}

/// The process's supplementary groups, captured before any worker changed
/// its own (see `capture_process_groups`).
static PROCESS_GROUPS: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();

/// Records the process's groups; called when a backend opens, before any
/// worker thread acts as a caller.
pub fn capture_process_groups() {
    if let Some(g) = get_groups() {
        let _ = PROCESS_GROUPS.set(g);
    }
}

impl State {
    /// Read, not assumed: a thread started by a worker inherits that
    /// worker's current (caller's) fsuid, fsgid and groups, so "never changed
    /// on this thread" does not mean "the server's identity".
    fn current() -> State {
        // setfsuid/setfsgid with an invalid id (-1) change nothing and
        // return the thread's current value.
        let (uid, gid) = (sys::setfsuid(u32::MAX), sys::setfsgid(u32::MAX));
        State {
            uid: Some(uid),
            gid: Some(gid),
            groups: get_groups(),
            orig_groups: PROCESS_GROUPS.get().cloned(),
        }
    }
}

fn get_groups() -> Option<Vec<u32>> {
    sys::getgroups().ok()
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::current());
}

// One syscall per change, no read-back: callers are either root whose
// switches were proved to work at open (`verify_switching`; root without
// CAP_SETUID/CAP_SETGID cannot switch and the kernel says so only by
// leaving the id unchanged) or switch back to their own euid/egid, which
// always succeeds.

/// Proves, once at start-up, that this process can act as a caller: a
/// changed fsuid and fsgid read back as changed, and the supplementary
/// groups can be set. Root without CAP_SETUID/CAP_SETGID (a container with
/// `drop: [ALL]`, a systemd unit with a narrow CapabilityBoundingSet)
/// fails here instead of silently serving every request as root.
pub fn verify_switching() -> std::io::Result<()> {
    const PROBE: u32 = 65534;
    // Raw setfsuid/setfsgid change only this thread's filesystem ids; each
    // returns the previous value, so the second call both restores the
    // original and reports whether the first took.
    let (uid_took, gid_took) = {
        let u = sys::setfsuid(PROBE);
        let u_now = sys::setfsuid(u);
        let g = sys::setfsgid(PROBE);
        let g_now = sys::setfsgid(g);
        (u_now == PROBE || u == PROBE, g_now == PROBE || g == PROBE)
    };
    // Setting the groups we already have changes nothing but still needs
    // CAP_SETGID.
    let groups_ok = get_groups().is_some_and(|g| set_groups(&g).is_ok());
    if uid_took && gid_took && groups_ok {
        return Ok(());
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        "running as root but cannot switch to a caller's identity (CAP_SETUID and \
         CAP_SETGID are needed): refusing to serve every request as root; grant them, \
         or run unprivileged (act_as_caller = false, as a non-root user)",
    ))
}

fn set_fsuid(uid: u32) -> FsResult<()> {
    sys::setfsuid(uid);
    Ok(())
}

fn set_fsgid(gid: u32) -> FsResult<()> {
    sys::setfsgid(gid);
    Ok(())
}

/// Thread-local (raw SYS_setgroups, see `sys::setgroups_thread`).
fn set_groups(groups: &[u32]) -> FsResult<()> {
    sys::setgroups_thread(groups)
        .map_err(|e| FsError::Errno(e.raw_os_error().unwrap_or(libc::EPERM)))
}

/// Runs file operations as `cred` on this thread.
pub fn become_caller(cred: &Cred) -> FsResult<()> {
    if cred.uid == u32::MAX || cred.gid == u32::MAX || cred.gids.len() > MAX_GROUPS {
        return Err(FsError::Errno(libc::EPERM));
    }
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if s.groups.as_deref() != Some(&cred.gids[..]) {
            s.groups = None;
            set_groups(&cred.gids)?;
            s.groups = Some(cred.gids.clone());
        }
        if s.gid != Some(cred.gid) {
            s.gid = None;
            set_fsgid(cred.gid)?;
            s.gid = Some(cred.gid);
        }
        if s.uid != Some(cred.uid) {
            s.uid = None;
            set_fsuid(cred.uid)?;
            s.uid = Some(cred.uid);
        }
        Ok(())
    })
}

/// Runs file operations as the server (`uid`/`gid` = the process's euid and
/// egid). Supplementary groups are left alone: they do not matter to root.
pub fn become_server(uid: u32, gid: u32) -> FsResult<()> {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if s.uid != Some(uid) {
            s.uid = None;
            set_fsuid(uid)?;
            s.uid = Some(uid);
        }
        if s.gid != Some(gid) {
            s.gid = None;
            set_fsgid(gid)?;
            s.gid = Some(gid);
        }
        Ok(())
    })
}

/// Restores this thread's filesystem identity and groups to the process's.
pub fn reset_thread_creds() {
    let (uid, gid) = (sys::geteuid(), sys::getegid());
    let _ = become_server(uid, gid);
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if let Some(g) = s.orig_groups.clone() {
            if s.groups.as_ref() != Some(&g) {
                s.groups = None;
                if set_groups(&g).is_ok() {
                    s.groups = Some(g);
                }
            }
        }
    });
}
