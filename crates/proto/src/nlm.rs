//! Network Lock Manager (NLM), program 100021: version 4 (Open Group XNFS
//! Version 3W chapter 14, "Network Lock Manager Protocol, Version 4", the
//! NFSv3-era protocol with 64-bit ranges) and versions 1 and 3 (XNFS
//! chapter 10 / nlm_prot.x, 32-bit ranges).
//!
//! The two families are separate Rust types (`Nlm4*` for version 4, `Nlm*`
//! for versions 1 and 3), so a v1 body can never be decoded or encoded as a
//! v4 one by mistake. A server works on the v4 types: `From<Nlm*Args>`
//! widens v1/v3 arguments, and `to_v1` narrows v4 results for the reply.
//!
//! The byte-range helpers ([`range_end`], [`to_fcntl_range`],
//! [`from_fcntl_range`]) turn NLM's (offset, length) into what fcntl(2)
//! takes, with every overflow decided explicitly.

use rnfsd_xdr::{Dec, Enc, Result, Xdr};

use crate::mount::bounded_opaque;

pub const PROGRAM: u32 = 100021;
/// Version 1 (XNFS ch. 10): 32-bit ranges, no SHARE/UNSHARE/NM_LOCK/FREE_ALL.
pub const VERSION1: u32 = 1;
/// Version 3: version 1 plus SHARE, UNSHARE, NM_LOCK and FREE_ALL; same
/// types.
pub const VERSION3: u32 = 3;
/// Version 4 (XNFS ch. 14): version 3's procedures with 64-bit ranges.
pub const VERSION4: u32 = 4;

/// Procedures (XNFS ch. 10 and 14; the same numbers in every version).
pub const PROC_NULL: u32 = 0;
pub const PROC_TEST: u32 = 1;
pub const PROC_LOCK: u32 = 2;
pub const PROC_CANCEL: u32 = 3;
pub const PROC_UNLOCK: u32 = 4;
pub const PROC_GRANTED: u32 = 5;
pub const PROC_TEST_MSG: u32 = 6;
pub const PROC_LOCK_MSG: u32 = 7;
pub const PROC_CANCEL_MSG: u32 = 8;
pub const PROC_UNLOCK_MSG: u32 = 9;
pub const PROC_GRANTED_MSG: u32 = 10;
pub const PROC_TEST_RES: u32 = 11;
pub const PROC_LOCK_RES: u32 = 12;
pub const PROC_CANCEL_RES: u32 = 13;
pub const PROC_UNLOCK_RES: u32 = 14;
pub const PROC_GRANTED_RES: u32 = 15;
pub const PROC_SHARE: u32 = 20;
pub const PROC_UNSHARE: u32 = 21;
pub const PROC_NM_LOCK: u32 = 22;
pub const PROC_FREE_ALL: u32 = 23;

/// XNFS ch. 10 "Data Types": MAXNETOBJ_SZ, the bound of every `netobj`.
pub const MAXNETOBJ_SZ: usize = 1024;
/// XNFS ch. 10 "Data Types": LM_MAXSTRLEN, the bound of `caller_name`.
pub const LM_MAXSTRLEN: usize = 1024;
/// nlm_prot.x: LM_MAXNAMELEN (LM_MAXSTRLEN + 1), the bound of
/// `nlm_notify.name`.
pub const LM_MAXNAMELEN: usize = LM_MAXSTRLEN + 1;
/// Largest offset or length a v1/v3 reply carries: Linux lockd treats the
/// 32-bit fields as signed and clamps to this (fs/lockd/xdr.c
/// `loff_t_to_s32`, NLM_OFFSET_MAX).
pub const NLM_OFFSET_MAX: u32 = 0x7fff_ffff;

rnfsd_xdr::xdr_enum! {
    /// nlm4_stats (XNFS ch. 14, "Basic Data Types").
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Nlm4Stats {
        Granted = 0,
        Denied = 1,
        DeniedNoLocks = 2,
        Blocked = 3,
        DeniedGracePeriod = 4,
        Deadlck = 5,
        Rofs = 6,
        StaleFh = 7,
        Fbig = 8,
        Failed = 9,
    }
}

rnfsd_xdr::xdr_enum! {
    /// nlm_stats of versions 1 and 3 (XNFS ch. 10): only 0..=4 exist.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum NlmStats {
        Granted = 0,
        Denied = 1,
        DeniedNoLocks = 2,
        Blocked = 3,
        DeniedGracePeriod = 4,
    }
}

impl From<NlmStats> for Nlm4Stats {
    fn from(s: NlmStats) -> Self {
        match s {
            NlmStats::Granted => Nlm4Stats::Granted,
            NlmStats::Denied => Nlm4Stats::Denied,
            NlmStats::DeniedNoLocks => Nlm4Stats::DeniedNoLocks,
            NlmStats::Blocked => Nlm4Stats::Blocked,
            NlmStats::DeniedGracePeriod => Nlm4Stats::DeniedGracePeriod,
        }
    }
}

impl From<Nlm4Stats> for NlmStats {
    /// A v4-only status in a v1/v3 reply, as Linux lockd casts it
    /// (fs/lockd/svcproc.c `cast_to_nlm`): a deadlock is a plain denial,
    /// anything else (ROFS, STALE_FH, FBIG, FAILED) is "no locks".
    fn from(s: Nlm4Stats) -> Self {
        match s {
            Nlm4Stats::Granted => NlmStats::Granted,
            Nlm4Stats::Denied | Nlm4Stats::Deadlck => NlmStats::Denied,
            Nlm4Stats::Blocked => NlmStats::Blocked,
            Nlm4Stats::DeniedGracePeriod => NlmStats::DeniedGracePeriod,
            Nlm4Stats::DeniedNoLocks
            | Nlm4Stats::Rofs
            | Nlm4Stats::StaleFh
            | Nlm4Stats::Fbig
            | Nlm4Stats::Failed => NlmStats::DeniedNoLocks,
        }
    }
}

rnfsd_xdr::xdr_enum! {
    /// fsh4_mode / fsh_mode (XNFS ch. 10 and 14): the deny mode of a DOS share.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub enum FshMode {
        #[default]
        DenyNone = 0,
        DenyRead = 1,
        DenyWrite = 2,
        DenyReadWrite = 3,
    }
}

rnfsd_xdr::xdr_enum! {
    /// fsh4_access / fsh_access (XNFS ch. 10 and 14): the access a DOS share wants.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub enum FshAccess {
        #[default]
        None = 0,
        Read = 1,
        Write = 2,
        ReadWrite = 3,
    }
}

bounded_opaque!(
    /// netobj: opaque<MAXNETOBJ_SZ> (cookies, file handles, owner handles).
    NetObj,
    MAXNETOBJ_SZ
);
bounded_opaque!(
    /// caller_name: string<LM_MAXSTRLEN>, the client's host name. Kept as
    /// bytes: the protocol does not promise UTF-8.
    CallerName,
    LM_MAXSTRLEN
);
bounded_opaque!(
    /// nlm_notify.name: string<LM_MAXNAMELEN>.
    NotifyName,
    LM_MAXNAMELEN
);

// ---- Version 4 (XNFS chapter 14) ----

rnfsd_xdr::xdr_struct! {
    /// nlm4_holder (XNFS ch. 14): who holds a conflicting lock (TEST).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Nlm4Holder {
        pub exclusive: bool,
        pub svid: i32,
        pub oh: NetObj,
        pub l_offset: u64,
        pub l_len: u64,
    }
}

rnfsd_xdr::xdr_struct! {
    /// nlm4_lock (XNFS ch. 14). `svid` identifies the process on the client;
    /// `l_len` 0 means "to end of file and beyond".
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Nlm4Lock {
        pub caller_name: CallerName,
        pub fh: NetObj,
        pub oh: NetObj,
        pub svid: i32,
        pub l_offset: u64,
        pub l_len: u64,
    }
}

rnfsd_xdr::xdr_struct! {
    /// nlm4_testargs: TEST, TEST_MSG and GRANTED(_MSG).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Nlm4TestArgs {
        pub cookie: NetObj,
        pub exclusive: bool,
        pub alock: Nlm4Lock,
    }
}

/// nlm4_testrply (XNFS ch. 14): `union switch (nlm4_stats stat) { case
/// NLM4_DENIED: nlm4_holder holder; default: void; }`.
///
/// `Stat(Nlm4Stats::Denied)` is not a value the decoder makes; encoding it
/// writes a default holder so the bytes stay valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nlm4TestRply {
    Denied(Nlm4Holder),
    Stat(Nlm4Stats),
}

impl Nlm4TestRply {
    pub fn stat(&self) -> Nlm4Stats {
        match self {
            Nlm4TestRply::Denied(_) => Nlm4Stats::Denied,
            Nlm4TestRply::Stat(s) => *s,
        }
    }
}

impl Xdr for Nlm4TestRply {
    fn encode(&self, e: &mut Enc) {
        match self {
            Nlm4TestRply::Denied(h) => {
                Nlm4Stats::Denied.encode(e);
                h.encode(e);
            }
            Nlm4TestRply::Stat(Nlm4Stats::Denied) => {
                Nlm4Stats::Denied.encode(e);
                Nlm4Holder::default().encode(e);
            }
            Nlm4TestRply::Stat(s) => s.encode(e),
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        match Nlm4Stats::decode(d)? {
            Nlm4Stats::Denied => Ok(Nlm4TestRply::Denied(Nlm4Holder::decode(d)?)),
            s => Ok(Nlm4TestRply::Stat(s)),
        }
    }
}

rnfsd_xdr::xdr_struct! {
    /// nlm4_testres: the TEST result and TEST_RES argument.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Nlm4TestRes {
        pub cookie: NetObj,
        pub stat: Nlm4TestRply,
    }
}

rnfsd_xdr::xdr_struct! {
    /// nlm4_lockargs: LOCK and LOCK_MSG. `state` is the client's NSM state
    /// number, for reboot recovery (XNFS ch. 11).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Nlm4LockArgs {
        pub cookie: NetObj,
        pub block: bool,
        pub exclusive: bool,
        pub alock: Nlm4Lock,
        pub reclaim: bool,
        pub state: i32,
    }
}

rnfsd_xdr::xdr_struct! {
    /// nlm4_cancargs: CANCEL and CANCEL_MSG.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Nlm4CancArgs {
        pub cookie: NetObj,
        pub block: bool,
        pub exclusive: bool,
        pub alock: Nlm4Lock,
    }
}

rnfsd_xdr::xdr_struct! {
    /// nlm4_unlockargs: UNLOCK and UNLOCK_MSG.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Nlm4UnlockArgs {
        pub cookie: NetObj,
        pub alock: Nlm4Lock,
    }
}

rnfsd_xdr::xdr_struct! {
    /// nlm4_res: the result of LOCK, CANCEL, UNLOCK, GRANTED, NM_LOCK and
    /// the argument of the *_RES callbacks but TEST_RES.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Nlm4Res {
        pub cookie: NetObj,
        pub stat: Nlm4Stats,
    }
}

rnfsd_xdr::xdr_struct! {
    /// nlm4_share (XNFS ch. 14): a DOS-style share reservation. The same
    /// layout as version 3's `nlm_share`.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Nlm4Share {
        pub caller_name: CallerName,
        pub fh: NetObj,
        pub oh: NetObj,
        pub mode: FshMode,
        pub access: FshAccess,
    }
}

rnfsd_xdr::xdr_struct! {
    /// nlm4_shareargs: SHARE and UNSHARE.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Nlm4ShareArgs {
        pub cookie: NetObj,
        pub share: Nlm4Share,
        pub reclaim: bool,
    }
}

rnfsd_xdr::xdr_struct! {
    /// nlm4_shareres: the SHARE and UNSHARE result.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Nlm4ShareRes {
        pub cookie: NetObj,
        pub stat: Nlm4Stats,
        pub sequence: i32,
    }
}

rnfsd_xdr::xdr_struct! {
    /// nlm4_notify: FREE_ALL, "host `name` rebooted into NSM `state`".
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Nlm4Notify {
        pub name: NotifyName,
        pub state: i32,
    }
}

// ---- Versions 1 and 3 (XNFS chapter 10, nlm_prot.x) ----

rnfsd_xdr::xdr_struct! {
    /// nlm_holder: 32-bit range.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct NlmHolder {
        pub exclusive: bool,
        pub svid: i32,
        pub oh: NetObj,
        pub l_offset: u32,
        pub l_len: u32,
    }
}

rnfsd_xdr::xdr_struct! {
    /// nlm_lock: 32-bit range (`unsigned l_offset, l_len`).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct NlmLock {
        pub caller_name: CallerName,
        pub fh: NetObj,
        pub oh: NetObj,
        pub svid: i32,
        pub l_offset: u32,
        pub l_len: u32,
    }
}

rnfsd_xdr::xdr_struct! {
    /// nlm_testargs.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct NlmTestArgs {
        pub cookie: NetObj,
        pub exclusive: bool,
        pub alock: NlmLock,
    }
}

/// nlm_testrply: like [`Nlm4TestRply`] over `nlm_stats`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NlmTestRply {
    Denied(NlmHolder),
    Stat(NlmStats),
}

impl NlmTestRply {
    pub fn stat(&self) -> NlmStats {
        match self {
            NlmTestRply::Denied(_) => NlmStats::Denied,
            NlmTestRply::Stat(s) => *s,
        }
    }
}

impl Xdr for NlmTestRply {
    fn encode(&self, e: &mut Enc) {
        match self {
            NlmTestRply::Denied(h) => {
                NlmStats::Denied.encode(e);
                h.encode(e);
            }
            NlmTestRply::Stat(NlmStats::Denied) => {
                NlmStats::Denied.encode(e);
                NlmHolder::default().encode(e);
            }
            NlmTestRply::Stat(s) => s.encode(e),
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        match NlmStats::decode(d)? {
            NlmStats::Denied => Ok(NlmTestRply::Denied(NlmHolder::decode(d)?)),
            s => Ok(NlmTestRply::Stat(s)),
        }
    }
}

rnfsd_xdr::xdr_struct! {
    /// nlm_testres.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct NlmTestRes {
        pub cookie: NetObj,
        pub stat: NlmTestRply,
    }
}

rnfsd_xdr::xdr_struct! {
    /// nlm_lockargs.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct NlmLockArgs {
        pub cookie: NetObj,
        pub block: bool,
        pub exclusive: bool,
        pub alock: NlmLock,
        pub reclaim: bool,
        pub state: i32,
    }
}

rnfsd_xdr::xdr_struct! {
    /// nlm_cancargs.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct NlmCancArgs {
        pub cookie: NetObj,
        pub block: bool,
        pub exclusive: bool,
        pub alock: NlmLock,
    }
}

rnfsd_xdr::xdr_struct! {
    /// nlm_unlockargs.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct NlmUnlockArgs {
        pub cookie: NetObj,
        pub alock: NlmLock,
    }
}

rnfsd_xdr::xdr_struct! {
    /// nlm_res.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct NlmRes {
        pub cookie: NetObj,
        pub stat: NlmStats,
    }
}

/// nlm_share: the same fields and layout as `nlm4_share`.
pub type NlmShare = Nlm4Share;
/// nlm_shareargs: the same fields and layout as `nlm4_shareargs`.
pub type NlmShareArgs = Nlm4ShareArgs;
/// nlm_notify: the same fields and layout as `nlm4_notify`.
pub type NlmNotify = Nlm4Notify;

rnfsd_xdr::xdr_struct! {
    /// nlm_shareres: over `nlm_stats`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct NlmShareRes {
        pub cookie: NetObj,
        pub stat: NlmStats,
        pub sequence: i32,
    }
}

// ---- v1/v3 -> v4 (arguments, widened) ----

impl From<NlmLock> for Nlm4Lock {
    /// Unsigned widening: the wire fields are `unsigned` (XNFS ch. 10), and
    /// l_len 0 keeps its meaning (to end of file) in version 4. A range
    /// past 2^32 cannot be expressed in v1, so nothing is lost.
    fn from(l: NlmLock) -> Self {
        Nlm4Lock {
            caller_name: l.caller_name,
            fh: l.fh,
            oh: l.oh,
            svid: l.svid,
            l_offset: u64::from(l.l_offset),
            l_len: u64::from(l.l_len),
        }
    }
}

impl From<NlmHolder> for Nlm4Holder {
    fn from(h: NlmHolder) -> Self {
        Nlm4Holder {
            exclusive: h.exclusive,
            svid: h.svid,
            oh: h.oh,
            l_offset: u64::from(h.l_offset),
            l_len: u64::from(h.l_len),
        }
    }
}

impl From<NlmTestArgs> for Nlm4TestArgs {
    fn from(a: NlmTestArgs) -> Self {
        Nlm4TestArgs {
            cookie: a.cookie,
            exclusive: a.exclusive,
            alock: a.alock.into(),
        }
    }
}

impl From<NlmLockArgs> for Nlm4LockArgs {
    fn from(a: NlmLockArgs) -> Self {
        Nlm4LockArgs {
            cookie: a.cookie,
            block: a.block,
            exclusive: a.exclusive,
            alock: a.alock.into(),
            reclaim: a.reclaim,
            state: a.state,
        }
    }
}

impl From<NlmCancArgs> for Nlm4CancArgs {
    fn from(a: NlmCancArgs) -> Self {
        Nlm4CancArgs {
            cookie: a.cookie,
            block: a.block,
            exclusive: a.exclusive,
            alock: a.alock.into(),
        }
    }
}

impl From<NlmUnlockArgs> for Nlm4UnlockArgs {
    fn from(a: NlmUnlockArgs) -> Self {
        Nlm4UnlockArgs {
            cookie: a.cookie,
            alock: a.alock.into(),
        }
    }
}

// ---- v4 -> v1/v3 (results, narrowed) ----

impl Nlm4Holder {
    /// The holder for a v1/v3 TEST reply. As Linux lockd encodes it
    /// (fs/lockd/xdr.c, `loff_t_to_s32`): the offset is clamped to
    /// [`NLM_OFFSET_MAX`]; a range that runs to end of file (length 0, or
    /// an end past u64) stays length 0; any other length is clamped to
    /// [`NLM_OFFSET_MAX`]. The client then sees a conflict that starts no
    /// later and ends no earlier than it can express.
    pub fn to_v1(&self) -> NlmHolder {
        let clamp = |x: u64| x.min(u64::from(NLM_OFFSET_MAX)) as u32;
        NlmHolder {
            exclusive: self.exclusive,
            svid: self.svid,
            oh: self.oh.clone(),
            l_offset: clamp(self.l_offset),
            l_len: match range_end(self.l_offset, self.l_len) {
                None => 0,
                Some(_) => clamp(self.l_len),
            },
        }
    }
}

impl Nlm4TestRply {
    pub fn to_v1(&self) -> NlmTestRply {
        match self {
            Nlm4TestRply::Denied(h) => NlmTestRply::Denied(h.to_v1()),
            Nlm4TestRply::Stat(s) => NlmTestRply::Stat((*s).into()),
        }
    }
}

impl Nlm4TestRes {
    pub fn to_v1(&self) -> NlmTestRes {
        NlmTestRes {
            cookie: self.cookie.clone(),
            stat: self.stat.to_v1(),
        }
    }
}

impl Nlm4Res {
    pub fn to_v1(&self) -> NlmRes {
        NlmRes {
            cookie: self.cookie.clone(),
            stat: self.stat.into(),
        }
    }
}

impl Nlm4ShareRes {
    pub fn to_v1(&self) -> NlmShareRes {
        NlmShareRes {
            cookie: self.cookie.clone(),
            stat: self.stat.into(),
            sequence: self.sequence,
        }
    }
}

// ---- Byte ranges ----

/// The exclusive end of the range `offset, len`, or `None` for "to end of
/// file": `len` 0 (XNFS ch. 10 and 14, nlm_lock / nlm4_lock), and also an `offset + len` past
/// u64. Linux lockd does the same for the overflow (fs/lockd/xdr4.c: an end
/// that overflows is treated as OFFSET_MAX, i.e. to EOF); rejecting it
/// instead would refuse locks Linux clients expect to get, and a range that
/// ends beyond every representable byte covers exactly what "to EOF"
/// covers. `offset + len == 2^64` is exact, not an approximation.
pub fn range_end(offset: u64, len: u64) -> Option<u64> {
    if len == 0 {
        return None;
    }
    offset.checked_add(len)
}

/// An NLM range that fcntl(2) cannot express: its offset is above
/// `i64::MAX` (`off_t`). The server answers NLM4_FBIG.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeTooLarge;

impl From<RangeTooLarge> for Nlm4Stats {
    fn from(_: RangeTooLarge) -> Self {
        Nlm4Stats::Fbig
    }
}

impl std::fmt::Display for RangeTooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("lock offset beyond off_t")
    }
}

impl std::error::Error for RangeTooLarge {}

/// fcntl's `(l_start, l_len)` for an NLM range; `l_len` 0 is "to EOF" in
/// both. A range whose last byte (`offset + len - 1`) is past `i64::MAX`
/// becomes to-EOF, as Linux lockd does (`end < 0` → OFFSET_MAX): no file
/// has bytes there, so the lock covers the same bytes, and fcntl would
/// otherwise fail with EOVERFLOW. An offset above `i64::MAX` cannot be
/// expressed at all: [`RangeTooLarge`] (NLM4_FBIG).
pub fn to_fcntl_range(offset: u64, len: u64) -> std::result::Result<(i64, i64), RangeTooLarge> {
    let start = i64::try_from(offset).map_err(|_| RangeTooLarge)?;
    if range_end(offset, len).is_none() {
        return Ok((start, 0));
    }
    // len >= 1 here. Both l_len and the last byte must fit in off_t; when
    // either does not, the range reaches past i64::MAX.
    match i64::try_from(len) {
        Ok(l) if start.checked_add(l - 1).is_some() => Ok((start, l)),
        _ => Ok((start, 0)),
    }
}

/// The NLM `(l_offset, l_len)` of a range fcntl(F_GETLK) reported. A
/// negative `l_len` (POSIX: the bytes `start + len ..= start - 1`) is
/// normalised; a range that would start before 0 starts at 0. (Linux
/// F_GETLK always reports `l_len >= 0`; an empty range clipped at 0 would
/// come out as length 0, which NLM reads as to-EOF.)
pub fn from_fcntl_range(start: i64, len: i64) -> (u64, u64) {
    let start = i128::from(start.max(0));
    let len = i128::from(len);
    let (s, l) = if len < 0 {
        let s = (start + len).max(0);
        (s, start - s)
    } else {
        (start, len)
    };
    // Both lie in 0..=i64::MAX here.
    (s as u64, l as u64)
}

#[cfg(test)]
mod tests;
