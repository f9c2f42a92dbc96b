//! Least privilege: at start-up, before any other thread exists (the
//! capability sets are per thread and inherited), every capability the
//! requests do not need is dropped from every set, and no_new_privs is set.
//!
//! Why: acting as a caller changes only fsuid/fsgid/groups, and the kernel
//! then drops only the filesystem capabilities (CAP_FS_MASK). Anything else
//! left effective applies to every NFS user: CAP_SYS_RESOURCE would let
//! them ignore quotas and use ext4's root-reserved blocks (knfsd drops it
//! in `nfsd_setuser` for this reason), CAP_SYS_ADMIN far more.

use caps::{CapSet, Capability, CapsHashSet};

/// What requests need: the filesystem capabilities a root caller has
/// (the kernel drops them while acting as a non-root caller), the identity
/// switch itself, and binding reserved ports (rpcbind registration and its
/// removal at shutdown come from a reserved port).
pub const KEPT: [Capability; 10] = [
    Capability::CAP_CHOWN,
    Capability::CAP_DAC_OVERRIDE,
    Capability::CAP_DAC_READ_SEARCH,
    Capability::CAP_FOWNER,
    Capability::CAP_FSETID,
    Capability::CAP_MKNOD,
    Capability::CAP_SETUID,
    Capability::CAP_SETGID,
    Capability::CAP_NET_BIND_SERVICE,
    // NFSv4 delegations' file leases on files the caller does not own
    // (only the server takes leases: no NFS call can).
    Capability::CAP_LEASE,
];

/// Drops every capability not in `KEPT` from the bounding, ambient,
/// inheritable, permitted and effective sets of this thread (so of every
/// thread started after), and sets no_new_privs. Returns the capabilities
/// still effective. Must run before the first thread is spawned.
pub fn drop_unneeded() -> Result<Vec<Capability>, String> {
    let keep: CapsHashSet = KEPT.into_iter().collect();
    let err =
        |what: &str, e: caps::errors::CapsError| format!("dropping capabilities ({what}): {e}");
    // Bounding first: dropping from it needs CAP_SETPCAP, still effective.
    // Without it (an ordinary user; or a service manager that already
    // bounded the set, as systemd's CapabilityBoundingSet= does) nothing
    // can be gained back anyway: no_new_privs below closes exec.
    let effective = caps::read(None, CapSet::Effective).map_err(|e| err("read effective", e))?;
    if effective.contains(&Capability::CAP_SETPCAP) {
        let bounding = caps::read(None, CapSet::Bounding).map_err(|e| err("read bounding", e))?;
        for c in bounding.difference(&keep) {
            caps::drop(None, CapSet::Bounding, *c).map_err(|e| err("bounding", e))?;
        }
    }
    caps::clear(None, CapSet::Ambient).map_err(|e| err("ambient", e))?;
    caps::clear(None, CapSet::Inheritable).map_err(|e| err("inheritable", e))?;
    let permitted = caps::read(None, CapSet::Permitted).map_err(|e| err("read permitted", e))?;
    let now: CapsHashSet = permitted.intersection(&keep).copied().collect();
    // Effective must stay within permitted: narrow it first.
    caps::set(None, CapSet::Effective, &now).map_err(|e| err("effective", e))?;
    caps::set(None, CapSet::Permitted, &now).map_err(|e| err("permitted", e))?;
    rustix::thread::set_no_new_privs(true).map_err(|e| format!("no_new_privs: {e}"))?;
    let mut left: Vec<Capability> = caps::read(None, CapSet::Effective)
        .map_err(|e| err("read effective", e))?
        .into_iter()
        .collect();
    left.sort_by_key(|c| c.index());
    Ok(left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_that_bypasses_a_callers_limits_is_kept() {
        for c in [
            Capability::CAP_SYS_RESOURCE,
            Capability::CAP_SYS_ADMIN,
            Capability::CAP_SETPCAP,
            Capability::CAP_LINUX_IMMUTABLE,
            Capability::CAP_SYS_PTRACE,
        ] {
            assert!(!KEPT.contains(&c), "{c} must not be kept");
        }
    }
}
