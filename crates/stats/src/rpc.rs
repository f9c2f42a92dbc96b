//! What a call's outcome is counted as (RFC 5531 §9), and the names of
//! the statuses counted (RFC 5531 auth_stat, RFC 1813 nfsstat3).

/// NFS's program number: its version 3 results' statuses are counted by
/// name.
pub const NFS_PROGRAM: u32 = 100_003;

/// How dispatch answered a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// No reply (a duplicate in progress, a record with no header).
    Dropped,
    /// accept_stat SUCCESS, and the first word of the result body (the
    /// program's status, where its results start with one).
    Success {
        status: Option<u32>,
    },
    ProgUnavail,
    ProgMismatch,
    ProcUnavail,
    GarbageArgs,
    SystemErr,
    RpcMismatch,
    AuthError(u32),
}

/// RFC 5531 auth_stat values (0..=14) by name; others count as "other".
pub const AUTH_STATS: [&str; 15] = [
    "AUTH_OK",
    "AUTH_BADCRED",
    "AUTH_REJECTEDCRED",
    "AUTH_BADVERF",
    "AUTH_REJECTEDVERF",
    "AUTH_TOOWEAK",
    "AUTH_INVALIDRESP",
    "AUTH_FAILED",
    "AUTH_KERB_GENERIC",
    "AUTH_TIMEEXPIRE",
    "AUTH_TKT_FILE",
    "AUTH_DECODE",
    "AUTH_NET_ADDR",
    "RPCSEC_GSS_CREDPROBLEM",
    "RPCSEC_GSS_CTXPROBLEM",
];
pub const AUTH_SLOTS: usize = AUTH_STATS.len() + 1;

#[inline]
pub fn auth_index(a: u32) -> usize {
    (a as usize).min(AUTH_STATS.len())
}

pub fn auth_stat_name(i: usize) -> &'static str {
    AUTH_STATS.get(i).copied().unwrap_or("other")
}

/// nfsstat3 (RFC 1813 §2.6) values and names, in slot order.
pub const NFS_STATUSES: [(u32, &str); 29] = [
    (0, "NFS3_OK"),
    (1, "NFS3ERR_PERM"),
    (2, "NFS3ERR_NOENT"),
    (5, "NFS3ERR_IO"),
    (6, "NFS3ERR_NXIO"),
    (13, "NFS3ERR_ACCES"),
    (17, "NFS3ERR_EXIST"),
    (18, "NFS3ERR_XDEV"),
    (19, "NFS3ERR_NODEV"),
    (20, "NFS3ERR_NOTDIR"),
    (21, "NFS3ERR_ISDIR"),
    (22, "NFS3ERR_INVAL"),
    (27, "NFS3ERR_FBIG"),
    (28, "NFS3ERR_NOSPC"),
    (30, "NFS3ERR_ROFS"),
    (31, "NFS3ERR_MLINK"),
    (63, "NFS3ERR_NAMETOOLONG"),
    (66, "NFS3ERR_NOTEMPTY"),
    (69, "NFS3ERR_DQUOT"),
    (70, "NFS3ERR_STALE"),
    (71, "NFS3ERR_REMOTE"),
    (10001, "NFS3ERR_BADHANDLE"),
    (10002, "NFS3ERR_NOT_SYNC"),
    (10003, "NFS3ERR_BAD_COOKIE"),
    (10004, "NFS3ERR_NOTSUPP"),
    (10005, "NFS3ERR_TOOSMALL"),
    (10006, "NFS3ERR_SERVERFAULT"),
    (10007, "NFS3ERR_BADTYPE"),
    (10008, "NFS3ERR_JUKEBOX"),
];
pub const NFS_SLOTS: usize = NFS_STATUSES.len() + 1;

/// The first `SMALL_STATUSES` rows of `NFS_STATUSES` are the values below
/// `SMALL_END`, found through `SMALL`; the rest are 10001, 10002, ... in
/// order, found by subtraction.
const SMALL_STATUSES: usize = 21;
const SMALL_END: u32 = 72;

/// Slots of the values below `SMALL_END` (the unassigned ones go to
/// "other").
const SMALL: [u8; SMALL_END as usize] = {
    let mut t = [NFS_STATUSES.len() as u8; SMALL_END as usize];
    let mut i = 0;
    while i < SMALL_STATUSES {
        t[NFS_STATUSES[i].0 as usize] = i as u8;
        i += 1;
    }
    t
};

// The table has the shape `SMALL` and `nfs_index` rely on, and every slot
// (the "other" one included) fits `SMALL`'s u8.
const _: () = {
    let mut i = 0;
    while i < NFS_STATUSES.len() {
        let v = NFS_STATUSES[i].0;
        if i < SMALL_STATUSES {
            assert!(v < SMALL_END);
        } else {
            assert!(v == 10001 + (i - SMALL_STATUSES) as u32);
        }
        i += 1;
    }
    assert!(NFS_STATUSES.len() == SMALL_STATUSES + 8);
    assert!(NFS_SLOTS <= u8::MAX as usize + 1);
};

/// The slot of an nfsstat3 value; unknown values share the last.
#[inline]
pub fn nfs_index(st: u32) -> usize {
    match st {
        0..SMALL_END => SMALL[st as usize] as usize,
        10001..=10008 => SMALL_STATUSES + (st - 10001) as usize,
        _ => NFS_STATUSES.len(),
    }
}

pub fn nfsstat3_name(i: usize) -> &'static str {
    NFS_STATUSES.get(i).map_or("other", |s| s.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nfs_index_maps_every_status() {
        for (i, (v, _)) in NFS_STATUSES.iter().enumerate() {
            assert_eq!(nfs_index(*v), i, "{v}");
        }
        for v in [3, 4, 72, 10000, 10009, u32::MAX] {
            assert_eq!(nfs_index(v), NFS_STATUSES.len());
        }
        assert_eq!(nfsstat3_name(nfs_index(2)), "NFS3ERR_NOENT");
        assert_eq!(nfsstat3_name(NFS_STATUSES.len()), "other");
        assert_eq!(auth_index(99), AUTH_STATS.len());
        assert_eq!(auth_stat_name(5), "AUTH_TOOWEAK");
    }
}
