//! Reading a call's header and its reply's outcome from the wire bytes
//! (RFC 5531 §9; NFSv3 results RFC 1813 §3.3). Every read is bounded.

pub const NFS_PROGRAM: u32 = 100_003;
pub const NFS3_READ: u32 = 6;
pub const NFS3_WRITE: u32 = 7;

#[inline]
pub fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    let w = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallHeader {
    pub rpcvers: u32,
    pub prog: u32,
    pub vers: u32,
    pub proc_: u32,
}

/// The fixed call header (xid, CALL, rpcvers, prog, vers, proc), if the
/// record holds one.
#[inline]
pub fn call_header(req: &[u8]) -> Option<CallHeader> {
    if u32_at(req, 4)? != 0 {
        return None;
    }
    Some(CallHeader {
        rpcvers: u32_at(req, 8)?,
        prog: u32_at(req, 12)?,
        vers: u32_at(req, 16)?,
        proc_: u32_at(req, 20)?,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome<'a> {
    /// accept_stat SUCCESS and the result body.
    Success(&'a [u8]),
    ProgUnavail,
    ProgMismatch,
    ProcUnavail,
    GarbageArgs,
    SystemErr,
    RpcMismatch,
    AuthError(u32),
    Unparsed,
}

/// Classify a reply message (without the record mark).
#[inline]
pub fn outcome(r: &[u8]) -> Outcome<'_> {
    // xid, REPLY(1), reply_stat
    let (Some(1), Some(stat)) = (u32_at(r, 4), u32_at(r, 8)) else {
        return Outcome::Unparsed;
    };
    match stat {
        // MSG_ACCEPTED: verifier (flavor, opaque body), accept_stat.
        0 => {
            let Some(vlen) = u32_at(r, 16) else {
                return Outcome::Unparsed;
            };
            let Some(at) = (vlen as usize)
                .checked_add(3)
                .map(|x| x & !3)
                .and_then(|x| x.checked_add(20))
            else {
                return Outcome::Unparsed;
            };
            match u32_at(r, at) {
                Some(0) => Outcome::Success(r.get(at + 4..).unwrap_or(&[])),
                Some(1) => Outcome::ProgUnavail,
                Some(2) => Outcome::ProgMismatch,
                Some(3) => Outcome::ProcUnavail,
                Some(4) => Outcome::GarbageArgs,
                Some(5) => Outcome::SystemErr,
                _ => Outcome::Unparsed,
            }
        }
        // MSG_DENIED: RPC_MISMATCH or AUTH_ERROR with an auth_stat.
        1 => match (u32_at(r, 12), u32_at(r, 16)) {
            (Some(0), _) => Outcome::RpcMismatch,
            (Some(1), Some(a)) => Outcome::AuthError(a),
            _ => Outcome::Unparsed,
        },
        _ => Outcome::Unparsed,
    }
}

/// Offset past a post_op_attr (bool, then fattr3 of 84 bytes if true).
fn skip_post_op_attr(b: &[u8], off: usize) -> Option<usize> {
    Some(off + 4 + if u32_at(b, off)? != 0 { 84 } else { 0 })
}

/// READ3resok's count: status, post_op_attr, count.
pub fn read_count(body: &[u8]) -> Option<u32> {
    u32_at(body, skip_post_op_attr(body, 4)?)
}

/// WRITE3resok's count: status, wcc_data (pre_op_attr: bool + 24 bytes;
/// post_op_attr), count.
pub fn write_count(body: &[u8]) -> Option<u32> {
    let pre = 4 + 4 + if u32_at(body, 4)? != 0 { 24 } else { 0 };
    u32_at(body, skip_post_op_attr(body, pre)?)
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

/// Slots of the values below 72 (the unassigned ones go to "other").
const SMALL: [u8; 72] = {
    let mut t = [NFS_STATUSES.len() as u8; 72];
    let mut i = 0;
    while i < 21 {
        t[NFS_STATUSES[i].0 as usize] = i as u8;
        i += 1;
    }
    t
};

/// The slot of an nfsstat3 value; unknown values share the last.
#[inline]
pub fn nfs_index(st: u32) -> usize {
    match st {
        0..=71 => SMALL[st as usize] as usize,
        10001..=10008 => 21 + (st - 10001) as usize,
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

    fn words(w: &[u32]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_be_bytes()).collect()
    }

    #[test]
    fn outcomes() {
        assert_eq!(outcome(&[]), Outcome::Unparsed);
        assert_eq!(outcome(&words(&[1, 0, 0])), Outcome::Unparsed);
        let ok = words(&[1, 1, 0, 0, 0, 0, 7]);
        assert_eq!(outcome(&ok), Outcome::Success(&ok[24..]));
        // A non-empty verifier body is skipped (padded to 4).
        let v = words(&[1, 1, 0, 1, 3, 0xaabbcc00, 4]);
        assert_eq!(outcome(&v), Outcome::GarbageArgs);
        assert_eq!(
            outcome(&words(&[1, 1, 0, 0, 0xffff_fff0])),
            Outcome::Unparsed
        );
        assert_eq!(outcome(&words(&[1, 1, 1, 0, 2, 2])), Outcome::RpcMismatch);
        assert_eq!(outcome(&words(&[1, 1, 1, 1, 5])), Outcome::AuthError(5));
        assert_eq!(outcome(&words(&[1, 1, 1, 1])), Outcome::Unparsed);
        assert_eq!(outcome(&words(&[1, 0, 0, 0, 0, 0])), Outcome::Unparsed);
    }

    #[test]
    fn read_write_counts() {
        // READ ok without attributes: status, false, count, eof, len.
        assert_eq!(read_count(&words(&[0, 0, 4096, 1, 4096])), Some(4096));
        let mut with = words(&[0, 1]);
        with.extend_from_slice(&[0; 84]);
        with.extend_from_slice(&words(&[77, 0]));
        assert_eq!(read_count(&with), Some(77));
        assert_eq!(read_count(&words(&[0, 1, 5])), None);
        // WRITE ok: status, pre (true + 24), post (false), count.
        let mut w = words(&[0, 1]);
        w.extend_from_slice(&[0; 24]);
        w.extend_from_slice(&words(&[0, 512, 2]));
        assert_eq!(write_count(&w), Some(512));
        assert_eq!(write_count(&words(&[0, 0, 0, 9])), Some(9));
        assert_eq!(write_count(&words(&[0])), None);
    }

    #[test]
    fn headers() {
        assert_eq!(call_header(&words(&[9, 0, 2, 100003, 3])), None);
        assert_eq!(call_header(&words(&[9, 1, 2, 100003, 3, 1])), None);
        assert_eq!(
            call_header(&words(&[9, 0, 2, 100003, 3, 1, 0])),
            Some(CallHeader {
                rpcvers: 2,
                prog: 100003,
                vers: 3,
                proc_: 1
            })
        );
    }
}
