//! fattr4 (RFC 8881 §5): the attributes we serve, written straight into
//! the reply in bit order, and what each comes from.

use rnfsd_fs::{Attr, FileType, FsStat, PathConf, SetAttr, SetTime, Time};
use rnfsd_proto::nfs4::*;
use rnfsd_xdr::{Dec, Enc, Xdr};

use super::compound::Compound;
use crate::state::idmap::{IdError, IdMap, Kind};

/// Every attribute we return (§5.6 REQUIRED, and the §5.7 RECOMMENDED
/// ones Linux reads). `time_access_set` and `time_modify_set` are
/// settable only (§5.7: GETATTR of them is NFS4ERR_INVAL).
pub(super) const SUPPORTED: &[u32] = &[
    FATTR4_SUPPORTED_ATTRS,
    FATTR4_TYPE,
    FATTR4_FH_EXPIRE_TYPE,
    FATTR4_CHANGE,
    FATTR4_SIZE,
    FATTR4_LINK_SUPPORT,
    FATTR4_SYMLINK_SUPPORT,
    FATTR4_NAMED_ATTR,
    FATTR4_FSID,
    FATTR4_UNIQUE_HANDLES,
    FATTR4_LEASE_TIME,
    FATTR4_RDATTR_ERROR,
    FATTR4_ACLSUPPORT,
    FATTR4_CANSETTIME,
    FATTR4_CASE_INSENSITIVE,
    FATTR4_CASE_PRESERVING,
    FATTR4_CHOWN_RESTRICTED,
    FATTR4_FILEHANDLE,
    FATTR4_FILEID,
    FATTR4_FILES_AVAIL,
    FATTR4_FILES_FREE,
    FATTR4_FILES_TOTAL,
    FATTR4_HOMOGENEOUS,
    FATTR4_MAXFILESIZE,
    FATTR4_MAXLINK,
    FATTR4_MAXNAME,
    FATTR4_MAXREAD,
    FATTR4_MAXWRITE,
    FATTR4_MODE,
    FATTR4_NO_TRUNC,
    FATTR4_NUMLINKS,
    FATTR4_OWNER,
    FATTR4_OWNER_GROUP,
    FATTR4_RAWDEV,
    FATTR4_SPACE_AVAIL,
    FATTR4_SPACE_FREE,
    FATTR4_SPACE_TOTAL,
    FATTR4_SPACE_USED,
    FATTR4_TIME_ACCESS,
    FATTR4_TIME_ACCESS_SET,
    FATTR4_TIME_DELTA,
    FATTR4_TIME_METADATA,
    FATTR4_TIME_MODIFY,
    FATTR4_TIME_MODIFY_SET,
    FATTR4_MOUNTED_ON_FILEID,
    FATTR4_SUPPATTR_EXCLCREAT,
];

/// NFSv4.2's attributes we return, to minor version 2 only (RFC 7862
/// §12.2): clone_blksize, space_freed, change_attr_type.
pub(super) const SUPPORTED_42: &[u32] = &[
    FATTR4_CLONE_BLKSIZE,
    FATTR4_SPACE_FREED,
    FATTR4_CHANGE_ATTR_TYPE,
    // RFC 8276 §8.4 (knfsd's NFSD4_2_SUPPORTED_ATTRS_WORD2).
    FATTR4_XATTR_SUPPORT,
    // RFC 9754 §4.
    FATTR4_OPEN_ARGUMENTS,
];

/// open_arguments (RFC 9754 §4): the OPEN arguments we take, as its five
/// bitmaps (each one word: every bit number is below 32). Every access
/// and deny; the delegation wants besides the kind (as knfsd: ANY,
/// NO_DELEG, CANCEL; not the "when" flags, which we accept but never act
/// on, nor delegated timestamps or OPEN_XOR_DELEGATION); every claim but
/// the two of delegations kept across a client's restart; every create
/// mode.
const OPEN_ARGUMENTS: [&[u32]; 5] = [
    &[
        OPEN_ARGS_SHARE_ACCESS_READ,
        OPEN_ARGS_SHARE_ACCESS_WRITE,
        OPEN_ARGS_SHARE_ACCESS_BOTH,
    ],
    &[
        OPEN_ARGS_SHARE_DENY_NONE,
        OPEN_ARGS_SHARE_DENY_READ,
        OPEN_ARGS_SHARE_DENY_WRITE,
        OPEN_ARGS_SHARE_DENY_BOTH,
    ],
    &[
        OPEN_ARGS_SHARE_ACCESS_WANT_ANY_DELEG,
        OPEN_ARGS_SHARE_ACCESS_WANT_NO_DELEG,
        OPEN_ARGS_SHARE_ACCESS_WANT_CANCEL,
    ],
    &[
        OPEN_ARGS_OPEN_CLAIM_NULL,
        OPEN_ARGS_OPEN_CLAIM_PREVIOUS,
        OPEN_ARGS_OPEN_CLAIM_DELEGATE_CUR,
        OPEN_ARGS_OPEN_CLAIM_FH,
        OPEN_ARGS_OPEN_CLAIM_DELEG_CUR_FH,
    ],
    &[
        OPEN_ARGS_CREATEMODE_UNCHECKED4,
        OPEN_ARGS_CREATE_MODE_GUARDED,
        OPEN_ARGS_CREATEMODE_EXCLUSIVE4,
        OPEN_ARGS_CREATE_MODE_EXCLUSIVE4_1,
    ],
];

/// Writes open_arguments4: each bitmap as one word (`OPEN_ARGUMENTS`'s
/// bits are below 32; a test holds them to it).
fn open_arguments(e: &mut Enc) {
    for set in OPEN_ARGUMENTS {
        e.u32(1);
        e.u32(
            set.iter()
                .fold(0u32, |w, &b| w | 1u32.checked_shl(b).unwrap_or(0)),
        );
    }
}

/// change_attr_type4 (RFC 7862 §12.2.3): NFS4_CHANGE_TYPE_IS_TIME_METADATA,
/// as `change` is the ctime.
const CHANGE_TYPE_IS_TIME_METADATA: u32 = 3;

/// The attributes an EXCLUSIVE4_1 create may set with its verifier
/// (§18.16.3; the times hold the verifier until the first SETATTR).
pub(super) const EXCLCREAT: &[u32] = &[FATTR4_SIZE, FATTR4_MODE, FATTR4_OWNER, FATTR4_OWNER_GROUP];

/// Write-only attributes: asking GETATTR for them is NFS4ERR_INVAL.
pub(super) const WRITE_ONLY: &[u32] = &[FATTR4_TIME_ACCESS_SET, FATTR4_TIME_MODIFY_SET];

/// The largest file where no filesystem is asked (the pseudo-filesystem):
/// the VFS's limit. An export's is its filesystem's (FSINFO's
/// maxfilesize), so a client refuses a write past it at once rather than
/// taking it into its cache for the server to fail later.
pub(super) const MAXFILESIZE: u64 = i64::MAX as u64;

/// Attributes a client may set (SETATTR, CREATE, OPEN's createattrs):
/// size, mode, owner, owner_group, and the two times (§5.6, §5.7).
pub(super) const SETTABLE: &[u32] = &[
    FATTR4_SIZE,
    FATTR4_MODE,
    FATTR4_OWNER,
    FATTR4_OWNER_GROUP,
    FATTR4_TIME_ACCESS_SET,
    FATTR4_TIME_MODIFY_SET,
];

/// How owner strings are said and read in this call: the server's id
/// map, and whether the call may wait for a name lookup (not on an event
/// loop).
#[derive(Clone, Copy)]
pub(super) struct Owners<'a> {
    pub map: &'a IdMap,
    pub may_wait: bool,
}

impl Owners<'_> {
    /// An owner or owner_group string as an id (§5.9): a decimal number,
    /// or with names "user@domain"; empty is NFS4ERR_INVAL (as knfsd's
    /// `nfsd_map_name_to_uid`), anything else unknown NFS4ERR_BADOWNER.
    fn id_of(&self, kind: Kind, s: &[u8]) -> Result<u32, Nfsstat4> {
        self.map.id_of(kind, s, self.may_wait).map_err(|e| match e {
            IdError::Empty => Nfsstat4::Inval,
            IdError::BadOwner => Nfsstat4::BadOwner,
            IdError::WouldWait => Nfsstat4::Delay,
        })
    }

    /// Writes the owner string of `id`: its name, or its number.
    fn put(&self, e: &mut Enc, kind: Kind, id: u32) {
        if !self.map.maps_names() {
            return id_string(e, id);
        }
        match self.map.name_of(kind, id, self.may_wait) {
            Some(name) => e.opaque(&name),
            None => id_string(e, id),
        }
    }
}

fn set_time(t: Settime4) -> Result<SetTime, Nfsstat4> {
    Ok(match t {
        Settime4::ServerTime => SetTime::ServerTime,
        // §3.3.1: nseconds beyond a second is NFS4ERR_INVAL.
        Settime4::ClientTime(t) if t.nseconds >= 1_000_000_000 => return Err(Nfsstat4::Inval),
        Settime4::ClientTime(t) => SetTime::ClientTime(Time {
            sec: t.seconds,
            nsec: t.nseconds,
        }),
    })
}

/// fattr4 a client sends to set attributes, as the backend takes them,
/// and the mask of what it sets (SETATTR's and CREATE's attrsset).
/// An attribute we support but cannot set is NFS4ERR_INVAL, one we do
/// not support NFS4ERR_ATTRNOTSUPP (§18.30.3); values that do not
/// decode, or bytes left over, NFS4ERR_BADXDR.
pub(super) fn decode_settable(
    f: &Fattr4,
    owners: &Owners<'_>,
) -> Result<(SetAttr, Bitmap4), Nfsstat4> {
    let supported = supported();
    for bit in f.attrmask.iter() {
        if !supported.contains(bit) {
            return Err(Nfsstat4::AttrNotSupp);
        }
        if !SETTABLE.contains(&bit) {
            return Err(Nfsstat4::Inval);
        }
    }
    let mut d = Dec::new(&f.attr_vals);
    let mut set = SetAttr::default();
    let bad = |_| Nfsstat4::BadXdr;
    for bit in f.attrmask.iter() {
        match bit {
            FATTR4_SIZE => set.size = Some(d.u64().map_err(bad)?),
            FATTR4_MODE => {
                let m = d.u32().map_err(bad)?;
                // §6.2.4: bits above the twelve mode bits are invalid.
                if m & !0o7777 != 0 {
                    return Err(Nfsstat4::Inval);
                }
                set.mode = Some(m);
            }
            FATTR4_OWNER => {
                let s = d.opaque(NFS4_OPAQUE_LIMIT).map_err(bad)?;
                set.uid = Some(owners.id_of(Kind::User, s)?);
            }
            FATTR4_OWNER_GROUP => {
                let s = d.opaque(NFS4_OPAQUE_LIMIT).map_err(bad)?;
                set.gid = Some(owners.id_of(Kind::Group, s)?);
            }
            FATTR4_TIME_ACCESS_SET => set.atime = set_time(Settime4::decode(&mut d).map_err(bad)?)?,
            FATTR4_TIME_MODIFY_SET => set.mtime = set_time(Settime4::decode(&mut d).map_err(bad)?)?,
            _ => return Err(Nfsstat4::Inval),
        }
    }
    if d.remaining() != 0 {
        return Err(Nfsstat4::BadXdr);
    }
    Ok((set, f.attrmask))
}

/// `SUPPORTED` as a bitmap (made once: GETATTR asks for it every call).
pub(super) fn supported() -> Bitmap4 {
    static B: std::sync::LazyLock<Bitmap4> = std::sync::LazyLock::new(|| bits(SUPPORTED));
    *B
}

/// The attributes of minor version `minor`: `SUPPORTED`, and
/// `SUPPORTED_42` from 4.2 (a 4.1 client knows no such numbers).
pub(super) fn supported_for(minor: u32) -> Bitmap4 {
    static B42: std::sync::LazyLock<Bitmap4> = std::sync::LazyLock::new(|| {
        let mut b = bits(SUPPORTED);
        for &n in SUPPORTED_42 {
            b.insert(n);
        }
        b
    });
    match minor {
        0 | 1 => supported(),
        _ => *B42,
    }
}

pub(super) fn bits(list: &[u32]) -> Bitmap4 {
    let mut b = Bitmap4::new();
    for &n in list {
        b.insert(n);
    }
    b
}

/// The attributes that need a statfs of the filesystem.
const FSSTAT_ATTRS: [u32; 6] = [
    FATTR4_FILES_AVAIL,
    FATTR4_FILES_FREE,
    FATTR4_FILES_TOTAL,
    FATTR4_SPACE_AVAIL,
    FATTR4_SPACE_FREE,
    FATTR4_SPACE_TOTAL,
];

/// Whether `want` asks for any of them.
pub(super) fn needs_fsstat(want: &Bitmap4) -> bool {
    static B: std::sync::LazyLock<Bitmap4> = std::sync::LazyLock::new(|| bits(&FSSTAT_ATTRS));
    want.meets(&B)
}

/// What `encode` answers of a request in minor version `minor`, with a
/// statfs made or not (`fsstat`): the supported attributes but the
/// write-only ones, and without a statfs none of its attributes (the
/// four combinations made once: GETATTR's mask is cut with one `and` per
/// word).
fn answerable(minor: u32, fsstat: bool) -> &'static Bitmap4 {
    static B: std::sync::LazyLock<[Bitmap4; 4]> = std::sync::LazyLock::new(|| {
        std::array::from_fn(|i| {
            let mut m = supported_for(if i & 2 != 0 { 2 } else { 1 });
            for &w in WRITE_ONLY {
                m.remove(w);
            }
            if i & 1 == 0 {
                for a in FSSTAT_ATTRS {
                    m.remove(a);
                }
            }
            m
        })
    });
    &B[usize::from(minor >= 2) * 2 + usize::from(fsstat)]
}

/// Whether `want` asks for anything of its filesystem beyond its
/// attributes: a statfs, pathconf, clone_blksize or maxfilesize
/// (`FsFacts::of`'s four questions, answered no at once).
pub(super) fn needs_facts(want: &Bitmap4) -> bool {
    static B: std::sync::LazyLock<Bitmap4> = std::sync::LazyLock::new(|| {
        let mut b = bits(&FSSTAT_ATTRS);
        for a in [
            FATTR4_MAXLINK,
            FATTR4_MAXNAME,
            FATTR4_CLONE_BLKSIZE,
            FATTR4_MAXFILESIZE,
        ] {
            b.insert(a);
        }
        b
    });
    want.meets(&B)
}

/// Attributes that need the filesystem's pathconf.
pub(super) fn needs_pathconf(want: &Bitmap4) -> bool {
    want.contains(FATTR4_MAXLINK) || want.contains(FATTR4_MAXNAME)
}

/// What an object's attributes are made from.
pub(super) struct Subject<'a> {
    pub attr: &'a Attr,
    /// fsid4: the export's id and the backend's filesystem (§5.8.1.9:
    /// each export its own, so the client sees each as a filesystem).
    pub fsid: (u64, u64),
    pub fh: &'a [u8],
    /// The fileid of what it is mounted on: its own, unless it is an
    /// export's root (§5.8.2.23).
    pub mounted_on_fileid: u64,
    pub fsstat: Option<FsStat>,
    pub pathconf: Option<PathConf>,
    /// lease_time (seconds), maxread/maxwrite (bytes).
    pub lease: u32,
    pub max_io: u64,
    pub owners: Owners<'a>,
    /// xattr_support, in a minor version 2 compound only (None: the
    /// attribute is not supported there).
    pub xattr: Option<bool>,
    /// The compound's minor version: which attributes exist.
    pub minor: u32,
    /// clone_blksize (0: none known).
    pub clone_blksize: u32,
    /// maxfilesize: the filesystem's largest file.
    pub maxfilesize: u64,
}

/// Writes fattr4 for `want` (what we do not support is left out, as
/// §5.5 says): the mask answered, then the values in bit order.
pub(super) fn encode(e: &mut Enc, want: &Bitmap4, s: &Subject<'_>) {
    let mask = want.intersect(answerable(s.minor, s.fsstat.is_some()));
    // Trailing zero words dropped.
    let words = mask.words();
    let n = words.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
    let words = &words[..n];
    e.u32(n as u32);
    for &w in words {
        e.u32(w);
    }
    if !straight(e, words, s) {
        looped(e, words, s);
    }
}

/// Writes attrlist4 of the attributes of mask `words`, one value at a
/// time.
fn looped(e: &mut Enc, words: &[u32], s: &Subject<'_>) {
    let len_at = e.len();
    e.u32(0);
    let start = e.len();
    // The set bits in order, a word at a time (GETATTR's hot loop:
    // `Bitmap4::iter`'s adaptors cost several times this per bit).
    for (i, &word) in words.iter().enumerate() {
        let mut rest = word;
        while rest != 0 {
            let bit = i as u32 * 32 + rest.trailing_zeros();
            rest &= rest - 1;
            value(e, bit, s);
        }
    }
    let n = e.len() - start;
    e.patch_u32(len_at, n as u32);
}

/// The attributes NFSv3's fattr3 carries, and mounted_on_fileid: what
/// a client's GETATTR of an open or cached file asks (Linux's
/// nfs4_fattr_bitmap), each fixed in size but the owner strings.
const STRAIGHT: [u32; 15] = {
    let mut a = [FATTR4_MOUNTED_ON_FILEID; 15];
    let mut i = 0;
    while i < FATTR3_ATTRS.len() {
        a[i] = FATTR3_ATTRS[i];
        i += 1;
    }
    a
};

/// `STRAIGHT` as mask words (every bit is below 64).
const STRAIGHT_WORDS: [u32; 2] = {
    let mut w = [0u32; 2];
    let mut i = 0;
    while i < STRAIGHT.len() {
        w[(STRAIGHT[i] / 32) as usize] |= 1 << (STRAIGHT[i] % 32);
        i += 1;
    }
    w
};

/// The longest attrlist4 of `STRAIGHT`'s attributes: the fixed ones, and
/// each owner string as at most ten digits (4 + 12 bytes).
const STRAIGHT_MAX: usize = 4 + 8 + 8 + 16 + 8 + 4 + 4 + 16 + 16 + 8 + 8 + 12 + 12 + 12 + 8;

/// Writes the attribute values of a mask within `STRAIGHT` with numeric
/// owner strings (the common GETATTR) straight, at constant offsets into
/// one buffer written whole: no loop over the bits, no per-value check of
/// the reply's room. False (nothing written): any other mask, or owner
/// names, for `encode`'s loop. The same bytes as the loop writes.
fn straight(e: &mut Enc, words: &[u32], s: &Subject<'_>) -> bool {
    let (w0, w1) = match *words {
        [] => (0, 0),
        [a] => (a, 0),
        [a, b] => (a, b),
        _ => return false,
    };
    if w0 & !STRAIGHT_WORDS[0] != 0 || w1 & !STRAIGHT_WORDS[1] != 0 || s.owners.map.maps_names() {
        return false;
    }
    let has = |bit: u32| match bit < 32 {
        true => w0 & (1 << bit) != 0,
        false => w1 & (1 << (bit - 32)) != 0,
    };
    let a = s.attr;
    // The values after their length word.
    let mut b = [0u8; 4 + STRAIGHT_MAX];
    let mut p = 4;
    let mut put = |v: &[u8]| {
        b[p..p + v.len()].copy_from_slice(v);
        p += v.len();
    };
    if has(FATTR4_TYPE) {
        put(&ftype(a.ftype).to_be_bytes());
    }
    if has(FATTR4_CHANGE) {
        put(&change(a).to_be_bytes());
    }
    if has(FATTR4_SIZE) {
        put(&a.size.to_be_bytes());
    }
    if has(FATTR4_FSID) {
        put(&s.fsid.0.to_be_bytes());
        put(&s.fsid.1.to_be_bytes());
    }
    if has(FATTR4_FILEID) {
        put(&a.fileid.to_be_bytes());
    }
    if has(FATTR4_MODE) {
        put(&(a.mode & 0o7777).to_be_bytes());
    }
    if has(FATTR4_NUMLINKS) {
        put(&a.nlink.to_be_bytes());
    }
    for (bit, id) in [(FATTR4_OWNER, a.uid), (FATTR4_OWNER_GROUP, a.gid)] {
        if has(bit) {
            // Each length a constant: a few moves, no call to copy.
            match id_opaque(id) {
                (o, 0..=8) => put(&o[..8]),
                (o, 9..=12) => put(&o[..12]),
                (o, _) => put(&o),
            }
        }
    }
    if has(FATTR4_RAWDEV) {
        put(&a.rdev.0.to_be_bytes());
        put(&a.rdev.1.to_be_bytes());
    }
    if has(FATTR4_SPACE_USED) {
        put(&a.used.to_be_bytes());
    }
    for (bit, t) in [
        (FATTR4_TIME_ACCESS, a.atime),
        (FATTR4_TIME_METADATA, a.ctime),
        (FATTR4_TIME_MODIFY, a.mtime),
    ] {
        if has(bit) {
            put(&t.sec.to_be_bytes());
            put(&t.nsec.to_be_bytes());
        }
    }
    if has(FATTR4_MOUNTED_ON_FILEID) {
        put(&s.mounted_on_fileid.to_be_bytes());
    }
    let n = p;
    b[..4].copy_from_slice(&((n - 4) as u32).to_be_bytes());
    e.raw(&b[..n]);
    true
}

fn time(e: &mut Enc, t: Time) {
    e.i64(t.sec);
    e.u32(t.nsec);
}

/// nfs_ftype4 (§5.8.1.2).
pub(super) fn ftype(t: FileType) -> u32 {
    match t {
        FileType::Regular => 1,
        FileType::Directory => 2,
        FileType::BlockDev => 3,
        FileType::CharDev => 4,
        FileType::Symlink => 5,
        FileType::Socket => 6,
        FileType::Fifo => 7,
    }
}

/// The change attribute (§5.8.1.4): ctime in nanoseconds, which moves on
/// every change of data or metadata and never goes back (a fine-grained
/// ctime, as ext4, XFS and CephFS keep).
pub(super) fn change(a: &Attr) -> u64 {
    change_of(a.ctime)
}

/// The change attribute of an object whose ctime is `ctime` (wcc data
/// keeps only the times of the attributes before a change).
pub(super) fn change_of(ctime: Time) -> u64 {
    (ctime.sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(u64::from(ctime.nsec))
}

/// How this compound says and reads owner strings: on an event loop it
/// may not wait for a name lookup.
pub(super) fn owners<'c>(c: &Compound<'c, '_>) -> Owners<'c> {
    Owners {
        map: &c.nfs4.idmap,
        may_wait: c.ctx.on_loop.is_none(),
    }
}

/// An id as owner and owner_group say it without id mapping: its
/// number (§5.9, RFC 8881 allows numeric strings under AUTH_SYS).
fn id_string(e: &mut Enc, id: u32) {
    // Written in one piece of a constant length: no call to copy a
    // variable length.
    let (out, n) = id_opaque(id);
    match n {
        0..=8 => e.raw(&out[..8]),
        9..=12 => e.raw(&out[..12]),
        _ => e.raw(&out),
    }
}

/// `id_string`'s opaque whole (length, at most ten digits, zero padding
/// to a multiple of four), and its length.
fn id_opaque(id: u32) -> ([u8; 4 + 12], usize) {
    let n = id.checked_ilog10().map_or(1, |l| l as usize + 1);
    let mut out = [0u8; 4 + 12];
    out[..4].copy_from_slice(&(n as u32).to_be_bytes());
    let mut rest = id;
    for d in out[4..4 + n].iter_mut().rev() {
        *d = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    (out, 4 + n.next_multiple_of(4))
}

fn value(e: &mut Enc, bit: u32, s: &Subject<'_>) {
    let a = s.attr;
    match bit {
        FATTR4_SUPPORTED_ATTRS => rnfsd_xdr::Xdr::encode(&supported_for(s.minor), e),
        FATTR4_TYPE => e.u32(ftype(a.ftype)),
        FATTR4_FH_EXPIRE_TYPE => e.u32(FH4_PERSISTENT),
        FATTR4_CHANGE => e.u64(change(a)),
        FATTR4_SIZE => e.u64(a.size),
        FATTR4_LINK_SUPPORT | FATTR4_SYMLINK_SUPPORT => e.bool(true),
        FATTR4_NAMED_ATTR => e.bool(false),
        FATTR4_FSID => {
            e.u64(s.fsid.0);
            e.u64(s.fsid.1);
        }
        FATTR4_UNIQUE_HANDLES => e.bool(true),
        FATTR4_LEASE_TIME => e.u32(s.lease),
        // Only READDIR reports a per-entry error (§5.8.1.12).
        FATTR4_RDATTR_ERROR => e.u32(Nfsstat4::Ok as u32),
        // No ACLs (§6.2.1.1): none of ALLOW, DENY, AUDIT, ALARM.
        FATTR4_ACLSUPPORT => e.u32(0),
        FATTR4_CANSETTIME => e.bool(true),
        FATTR4_CASE_INSENSITIVE => e.bool(s.pathconf.is_some_and(|p| p.case_insensitive)),
        FATTR4_CASE_PRESERVING => e.bool(s.pathconf.is_none_or(|p| p.case_preserving)),
        FATTR4_CHOWN_RESTRICTED => e.bool(true),
        FATTR4_FILEHANDLE => e.opaque(s.fh),
        FATTR4_FILEID => e.u64(a.fileid),
        FATTR4_FILES_AVAIL => e.u64(s.fsstat.map_or(0, |f| f.afiles)),
        FATTR4_FILES_FREE => e.u64(s.fsstat.map_or(0, |f| f.ffiles)),
        FATTR4_FILES_TOTAL => e.u64(s.fsstat.map_or(0, |f| f.tfiles)),
        FATTR4_HOMOGENEOUS => e.bool(true),
        FATTR4_MAXFILESIZE => e.u64(s.maxfilesize),
        FATTR4_MAXLINK => e.u32(s.pathconf.map_or(65_000, |p| p.linkmax)),
        FATTR4_MAXNAME => e.u32(s.pathconf.map_or(255, |p| p.name_max)),
        FATTR4_MAXREAD | FATTR4_MAXWRITE => e.u64(s.max_io),
        FATTR4_MODE => e.u32(a.mode & 0o7777),
        FATTR4_NO_TRUNC => e.bool(true),
        FATTR4_NUMLINKS => e.u32(a.nlink),
        FATTR4_OWNER => s.owners.put(e, Kind::User, a.uid),
        FATTR4_OWNER_GROUP => s.owners.put(e, Kind::Group, a.gid),
        FATTR4_RAWDEV => {
            e.u32(a.rdev.0);
            e.u32(a.rdev.1);
        }
        FATTR4_SPACE_AVAIL => e.u64(s.fsstat.map_or(0, |f| f.abytes)),
        FATTR4_SPACE_FREE => e.u64(s.fsstat.map_or(0, |f| f.fbytes)),
        FATTR4_SPACE_TOTAL => e.u64(s.fsstat.map_or(0, |f| f.tbytes)),
        FATTR4_SPACE_USED => e.u64(a.used),
        FATTR4_TIME_ACCESS => time(e, a.atime),
        // Nanosecond timestamps.
        FATTR4_TIME_DELTA => time(e, Time { sec: 0, nsec: 1 }),
        FATTR4_TIME_METADATA => time(e, a.ctime),
        FATTR4_TIME_MODIFY => time(e, a.mtime),
        FATTR4_MOUNTED_ON_FILEID => e.u64(s.mounted_on_fileid),
        FATTR4_SUPPATTR_EXCLCREAT => rnfsd_xdr::Xdr::encode(&bits(EXCLCREAT), e),
        FATTR4_XATTR_SUPPORT => e.bool(s.xattr.unwrap_or(false)),
        FATTR4_CLONE_BLKSIZE => e.u32(s.clone_blksize),
        // What removing the file frees: its blocks when this is its last
        // link (blocks it shares by reflink with another file stay).
        FATTR4_SPACE_FREED => e.u64(if a.nlink <= 1 { a.used } else { 0 }),
        FATTR4_CHANGE_ATTR_TYPE => e.u32(CHANGE_TYPE_IS_TIME_METADATA),
        FATTR4_OPEN_ARGUMENTS => open_arguments(e),
        _ => debug_assert!(false, "attribute {bit} is in SUPPORTED without a value"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr() -> Attr {
        Attr {
            ftype: FileType::Regular,
            mode: 0o100644,
            nlink: 1,
            uid: 1000,
            gid: 100,
            size: 5,
            used: 4096,
            rdev: (0, 0),
            fsid: 7,
            fileid: 42,
            atime: Time { sec: 1, nsec: 2 },
            mtime: Time { sec: 3, nsec: 4 },
            ctime: Time { sec: 5, nsec: 6 },
        }
    }

    fn subject(a: &Attr) -> Subject<'_> {
        Subject {
            attr: a,
            fsid: (1, 7),
            fh: b"handle",
            mounted_on_fileid: 42,
            fsstat: None,
            pathconf: None,
            lease: 90,
            max_io: 1 << 20,
            owners: Owners {
                map: numeric(),
                may_wait: true,
            },
            xattr: None,
            minor: 2,
            clone_blksize: 4096,
            maxfilesize: MAXFILESIZE,
        }
    }

    fn numeric() -> &'static IdMap {
        static M: std::sync::LazyLock<IdMap> = std::sync::LazyLock::new(IdMap::numeric);
        &M
    }

    fn owners() -> Owners<'static> {
        Owners {
            map: numeric(),
            may_wait: true,
        }
    }

    #[test]
    fn xattr_support_is_a_minor_2_attribute() {
        let a = attr();
        let want = bits(&[FATTR4_SUPPORTED_ATTRS, FATTR4_XATTR_SUPPORT]);
        let mut s = subject(&a);
        for (minor, x, present) in [
            (1, None, false),
            (2, Some(true), true),
            (2, Some(false), true),
        ] {
            s.minor = minor;
            s.xattr = x;
            let mut e = Enc::new();
            encode(&mut e, &want, &s);
            let f = Fattr4::decode(&mut Dec::new(e.as_slice())).unwrap();
            assert_eq!(f.attrmask.contains(FATTR4_XATTR_SUPPORT), present, "{x:?}");
            let mut d = Dec::new(&f.attr_vals);
            let sup = Bitmap4::decode(&mut d).unwrap();
            assert_eq!(sup.contains(FATTR4_XATTR_SUPPORT), present, "{x:?}");
            if present {
                assert_eq!(d.bool().unwrap(), x == Some(true));
            }
            assert_eq!(d.remaining(), 0);
        }
    }

    #[test]
    fn every_supported_attribute_has_a_value_and_the_length_is_right() {
        let a = attr();
        let mut e = Enc::new();
        encode(&mut e, &supported_for(2), &subject(&a));
        let f = Fattr4::decode(&mut Dec::new(e.as_slice())).unwrap();
        // No statfs asked: those six are left out, as are the write-only.
        assert!(!f.attrmask.contains(FATTR4_SPACE_FREE));
        assert!(!f.attrmask.contains(FATTR4_TIME_MODIFY_SET));
        assert!(f.attrmask.contains(FATTR4_MOUNTED_ON_FILEID));
        assert!(f.attrmask.contains(FATTR4_SUPPATTR_EXCLCREAT));
        assert!(f.attrmask.contains(FATTR4_CHANGE_ATTR_TYPE));
        // With a statfs the six are there; the write-only never are.
        let mut s = subject(&a);
        s.fsstat = Some(FsStat {
            tbytes: 1,
            fbytes: 2,
            abytes: 3,
            tfiles: 4,
            ffiles: 5,
            afiles: 6,
            invarsec: 0,
        });
        for minor in [1, 2] {
            s.minor = minor;
            let mut e = Enc::new();
            encode(&mut e, &supported_for(minor), &s);
            let f = Fattr4::decode(&mut Dec::new(e.as_slice())).unwrap();
            for b in FSSTAT_ATTRS {
                assert!(f.attrmask.contains(b), "{b} at minor {minor}");
            }
            assert!(!f.attrmask.contains(FATTR4_TIME_ACCESS_SET));
            assert!(!f.attrmask.contains(FATTR4_TIME_MODIFY_SET));
        }
    }

    /// open_arguments (RFC 9754 §4): a minor version 2 attribute, five
    /// one-word bitmaps that say what OPEN takes.
    #[test]
    fn open_arguments_says_what_open_takes() {
        for set in OPEN_ARGUMENTS {
            assert!(set.iter().all(|&b| b < 32), "{set:?} fits one word");
        }
        let a = attr();
        let want = bits(&[FATTR4_OPEN_ARGUMENTS]);
        let mut s = subject(&a);
        let mut e = Enc::new();
        encode(&mut e, &want, &s);
        let f = Fattr4::decode(&mut Dec::new(e.as_slice())).unwrap();
        assert!(f.attrmask.contains(FATTR4_OPEN_ARGUMENTS));
        let mut d = Dec::new(&f.attr_vals);
        let maps: Vec<Bitmap4> = (0..5).map(|_| Bitmap4::decode(&mut d).unwrap()).collect();
        assert_eq!(d.remaining(), 0);
        assert!(maps[0].contains(OPEN_ARGS_SHARE_ACCESS_BOTH));
        assert!(!maps[0].contains(0), "no access is not an access");
        assert!(maps[1].contains(OPEN_ARGS_SHARE_DENY_NONE));
        assert!(maps[2].contains(OPEN_ARGS_SHARE_ACCESS_WANT_ANY_DELEG));
        assert!(!maps[2].contains(OPEN_ARGS_SHARE_ACCESS_WANT_DELEG_TIMESTAMPS));
        assert!(maps[3].contains(OPEN_ARGS_OPEN_CLAIM_DELEG_CUR_FH));
        assert!(!maps[3].contains(OPEN_ARGS_OPEN_CLAIM_DELEG_PREV_FH));
        assert!(maps[4].contains(OPEN_ARGS_CREATE_MODE_EXCLUSIVE4_1));
        s.minor = 1;
        let mut e = Enc::new();
        encode(&mut e, &want, &s);
        let f = Fattr4::decode(&mut Dec::new(e.as_slice())).unwrap();
        assert!(!f.attrmask.contains(FATTR4_OPEN_ARGUMENTS), "not in 4.1");
    }

    #[test]
    fn v42_attributes_for_minor_version_2_only() {
        let a = attr();
        let want = bits(&[
            FATTR4_CLONE_BLKSIZE,
            FATTR4_SPACE_FREED,
            FATTR4_CHANGE_ATTR_TYPE,
        ]);
        let mut s = subject(&a);
        let mut e = Enc::new();
        encode(&mut e, &want, &s);
        let f = Fattr4::decode(&mut Dec::new(e.as_slice())).unwrap();
        let mut d = Dec::new(&f.attr_vals);
        assert_eq!(d.u32().unwrap(), 4096);
        assert_eq!(d.u64().unwrap(), 4096, "the last link frees its blocks");
        assert_eq!(d.u32().unwrap(), CHANGE_TYPE_IS_TIME_METADATA);
        assert_eq!(d.remaining(), 0);
        s.minor = 1;
        let mut e = Enc::new();
        encode(&mut e, &want, &s);
        let f = Fattr4::decode(&mut Dec::new(e.as_slice())).unwrap();
        assert!(f.attrmask.is_empty());
        assert!(!supported_for(1).contains(FATTR4_CLONE_BLKSIZE));
        assert!(supported_for(2).contains(FATTR4_CLONE_BLKSIZE));
    }

    #[test]
    fn values_in_bit_order() {
        let a = attr();
        let want = bits(&[FATTR4_OWNER, FATTR4_TYPE, FATTR4_SIZE, FATTR4_MODE, 200]);
        let mut e = Enc::new();
        encode(&mut e, &want, &subject(&a));
        let f = Fattr4::decode(&mut Dec::new(e.as_slice())).unwrap();
        assert_eq!(
            f.attrmask.iter().collect::<Vec<_>>(),
            vec![FATTR4_TYPE, FATTR4_SIZE, FATTR4_MODE, FATTR4_OWNER]
        );
        let mut d = Dec::new(&f.attr_vals);
        assert_eq!(d.u32().unwrap(), 1);
        assert_eq!(d.u64().unwrap(), 5);
        assert_eq!(d.u32().unwrap(), 0o644);
        assert_eq!(d.opaque(16).unwrap(), b"1000");
        assert_eq!(d.remaining(), 0);
    }

    type Val<'a> = (u32, &'a dyn Fn(&mut Enc));

    fn settable(bits_vals: &[Val<'_>]) -> Fattr4 {
        let mut e = Enc::new();
        let mut m = Bitmap4::new();
        for (b, f) in bits_vals {
            m.insert(*b);
            f(&mut e);
        }
        Fattr4 {
            attrmask: m,
            attr_vals: e.into_vec(),
        }
    }

    #[test]
    fn settable_attributes_decode_and_the_rest_are_refused() {
        let f = settable(&[
            (FATTR4_SIZE, &|e| e.u64(9)),
            (FATTR4_MODE, &|e| e.u32(0o640)),
            (FATTR4_OWNER, &|e| e.opaque(b"1001")),
            (FATTR4_TIME_MODIFY_SET, &|e| e.u32(0)),
        ]);
        let (set, mask) = decode_settable(&f, &owners()).unwrap();
        assert_eq!(set.size, Some(9));
        assert_eq!(set.mode, Some(0o640));
        assert_eq!(set.uid, Some(1001));
        assert_eq!(set.mtime, SetTime::ServerTime);
        assert_eq!(mask, f.attrmask);
        let f = settable(&[(FATTR4_TYPE, &|e| e.u32(1))]);
        assert_eq!(decode_settable(&f, &owners()), Err(Nfsstat4::Inval));
        let f = settable(&[(FATTR4_ACL, &|e| e.u32(0))]);
        assert_eq!(decode_settable(&f, &owners()), Err(Nfsstat4::AttrNotSupp));
        let f = settable(&[(FATTR4_OWNER, &|e| e.opaque(b"alice@x"))]);
        assert_eq!(decode_settable(&f, &owners()), Err(Nfsstat4::BadOwner));
        let f = settable(&[(FATTR4_OWNER_GROUP, &|e| e.opaque(b""))]);
        assert_eq!(decode_settable(&f, &owners()), Err(Nfsstat4::Inval));
        let f = settable(&[(FATTR4_SIZE, &|e| e.u32(1))]);
        assert_eq!(decode_settable(&f, &owners()), Err(Nfsstat4::BadXdr));
        let f = settable(&[(FATTR4_MODE, &|e| e.u64(0o644))]);
        assert_eq!(
            decode_settable(&f, &owners()),
            Err(Nfsstat4::BadXdr),
            "bytes left over"
        );
    }

    #[test]
    fn straight_writes_what_the_loop_writes() {
        let mut a = attr();
        a.uid = 4_000_000_000;
        a.rdev = (8, 1);
        let mut s = subject(&a);
        s.mounted_on_fileid = 77;
        // Every subset of STRAIGHT, and one bit more (the loop's).
        for set in 0u32..1 << STRAIGHT.len() {
            let bits: Vec<u32> = (0..STRAIGHT.len())
                .filter(|i| set & (1 << i) != 0)
                .map(|i| STRAIGHT[i])
                .collect();
            let mask = super::bits(&bits);
            let mut fast = Enc::new();
            assert!(straight(&mut fast, mask.words(), &s), "{bits:?}");
            let mut slow = Enc::new();
            looped(&mut slow, mask.words(), &s);
            assert_eq!(fast.as_slice(), slow.as_slice(), "{bits:?}");
        }
        let mut more = super::bits(&STRAIGHT);
        more.insert(FATTR4_FILEHANDLE);
        assert!(!straight(&mut Enc::new(), more.words(), &s));
        // The whole set at once (numeric owners: the test map has no names).
        assert!(straight(
            &mut Enc::new(),
            super::bits(&STRAIGHT).words(),
            &s
        ));
    }

    #[test]
    fn needs_facts_is_any_of_the_four_questions() {
        for bit in 0..32 * MAX_BITMAP_WORDS as u32 {
            let w = bits(&[bit]);
            let any = needs_fsstat(&w)
                || needs_pathconf(&w)
                || bit == FATTR4_CLONE_BLKSIZE
                || bit == FATTR4_MAXFILESIZE;
            assert_eq!(needs_facts(&w), any, "{bit}");
        }
    }

    #[test]
    fn ids_as_decimal_strings() {
        for n in [
            0u32,
            7,
            9,
            10,
            999,
            1000,
            9999,
            10_000,
            65534,
            99_999_999,
            100_000_000,
            u32::MAX,
        ] {
            // As an opaque: length, digits, zero padding.
            let mut e = Enc::new();
            id_string(&mut e, n);
            assert_eq!(e.len() % 4, 0);
            assert_eq!(
                Dec::new(e.as_slice()).opaque(16).unwrap(),
                n.to_string().as_bytes()
            );
        }
    }
}
