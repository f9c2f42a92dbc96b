//! fattr4 values (RFC 8881 §5.6, §5.7): decoding the attributes a client
//! asks for into [`Attrs4`], and encoding the settable ones of
//! [`SetAttrs4`] for SETATTR, OPEN and CREATE.
//!
//! An fattr4's values sit back to back in bit order with nothing to say
//! where one ends, so an attribute of a type not decoded here stops the
//! whole decode: ask only for the attributes [`Attrs4::decode`] knows
//! (see [`decodable`]).

use std::collections::BTreeMap;

use rnfsd_proto::nfs4::*;
use rnfsd_xdr::{Dec, Enc, Xdr};

use crate::error::ClientError;

/// Most u32 items of a list-valued attribute (layout types).
pub const MAX_ATTR_LIST: usize = 64;

/// One decoded attribute value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttrVal {
    U32(u32),
    U64(u64),
    Bool(bool),
    Time(Nfstime4),
    /// fsid4, and change_policy4 (two u64s as well).
    Pair(u64, u64),
    /// utf8 strings (owner, owner_group, mimetype) and the filehandle.
    Bytes(Vec<u8>),
    Bitmap(Bitmap4),
    Spec(Specdata4),
    List(Vec<u32>),
}

/// The XDR shape of an attribute's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    U32,
    U64,
    Bool,
    Time,
    Pair,
    Str,
    Fh,
    Bitmap,
    Spec,
    List,
}

/// The shape of attribute `bit`'s value, for the attributes decoded here
/// (RFC 8881 §5.6, §5.7, §5.8; RFC 7862 §12.2; RFC 8276 §8.4).
const fn kind(bit: u32) -> Option<Kind> {
    Some(match bit {
        FATTR4_SUPPORTED_ATTRS | FATTR4_SUPPATTR_EXCLCREAT => Kind::Bitmap,
        FATTR4_TYPE | FATTR4_FH_EXPIRE_TYPE | FATTR4_LEASE_TIME | FATTR4_RDATTR_ERROR => Kind::U32,
        FATTR4_ACLSUPPORT | FATTR4_MAXLINK | FATTR4_MAXNAME | FATTR4_MODE | FATTR4_NUMLINKS => {
            Kind::U32
        }
        FATTR4_LAYOUT_BLKSIZE
        | FATTR4_LAYOUT_ALIGNMENT
        | FATTR4_FS_CHARSET_CAP
        | FATTR4_CLONE_BLKSIZE
        | FATTR4_CHANGE_ATTR_TYPE => Kind::U32,
        FATTR4_CHANGE | FATTR4_SIZE | FATTR4_FILEID | FATTR4_FILES_AVAIL | FATTR4_FILES_FREE => {
            Kind::U64
        }
        FATTR4_FILES_TOTAL | FATTR4_MAXFILESIZE | FATTR4_MAXREAD | FATTR4_MAXWRITE => Kind::U64,
        FATTR4_QUOTA_AVAIL_HARD | FATTR4_QUOTA_AVAIL_SOFT | FATTR4_QUOTA_USED => Kind::U64,
        FATTR4_SPACE_AVAIL | FATTR4_SPACE_FREE | FATTR4_SPACE_TOTAL | FATTR4_SPACE_USED => {
            Kind::U64
        }
        FATTR4_MOUNTED_ON_FILEID | FATTR4_RETENTION_HOLD | FATTR4_SPACE_FREED => Kind::U64,
        FATTR4_LINK_SUPPORT
        | FATTR4_SYMLINK_SUPPORT
        | FATTR4_NAMED_ATTR
        | FATTR4_UNIQUE_HANDLES
        | FATTR4_ARCHIVE
        | FATTR4_CANSETTIME
        | FATTR4_CASE_INSENSITIVE
        | FATTR4_CASE_PRESERVING
        | FATTR4_CHOWN_RESTRICTED
        | FATTR4_HIDDEN
        | FATTR4_HOMOGENEOUS
        | FATTR4_NO_TRUNC
        | FATTR4_SYSTEM
        | FATTR4_XATTR_SUPPORT => Kind::Bool,
        FATTR4_TIME_ACCESS
        | FATTR4_TIME_BACKUP
        | FATTR4_TIME_CREATE
        | FATTR4_TIME_DELTA
        | FATTR4_TIME_METADATA
        | FATTR4_TIME_MODIFY
        | FATTR4_DIR_NOTIF_DELAY
        | FATTR4_DIRENT_NOTIF_DELAY => Kind::Time,
        FATTR4_FSID | FATTR4_CHANGE_POLICY => Kind::Pair,
        FATTR4_MIMETYPE | FATTR4_OWNER | FATTR4_OWNER_GROUP => Kind::Str,
        FATTR4_FILEHANDLE => Kind::Fh,
        FATTR4_RAWDEV => Kind::Spec,
        FATTR4_FS_LAYOUT_TYPES | FATTR4_LAYOUT_TYPES => Kind::List,
        _ => return None,
    })
}

/// True if [`Attrs4::decode`] can read attribute `bit`.
pub fn decodable(bit: u32) -> bool {
    kind(bit).is_some()
}

fn decode_val(d: &mut Dec<'_>, k: Kind) -> rnfsd_xdr::Result<AttrVal> {
    Ok(match k {
        Kind::U32 => AttrVal::U32(d.u32()?),
        Kind::U64 => AttrVal::U64(d.u64()?),
        Kind::Bool => AttrVal::Bool(d.bool()?),
        Kind::Time => AttrVal::Time(Nfstime4::decode(d)?),
        Kind::Pair => AttrVal::Pair(d.u64()?, d.u64()?),
        Kind::Str => AttrVal::Bytes(d.opaque(NFS4_OPAQUE_LIMIT)?.to_vec()),
        Kind::Fh => AttrVal::Bytes(d.opaque(NFS4_FHSIZE)?.to_vec()),
        Kind::Bitmap => AttrVal::Bitmap(Bitmap4::decode(d)?),
        Kind::Spec => AttrVal::Spec(Specdata4::decode(d)?),
        Kind::List => {
            let n = d.array_len(MAX_ATTR_LIST, 4)?;
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(d.u32()?);
            }
            AttrVal::List(v)
        }
    })
}

/// Bytes of a value of shape `k` when that is fixed and any bits are a
/// value (nfstime4 is seconds and nseconds); `None` for the shapes read
/// one by one.
const fn fixed_len(k: Kind) -> Option<usize> {
    match k {
        Kind::U32 => Some(4),
        Kind::U64 | Kind::Spec => Some(8),
        Kind::Time => Some(12),
        Kind::Pair => Some(16),
        Kind::Bool | Kind::Str | Kind::Fh | Kind::Bitmap | Kind::List => None,
    }
}

/// Attribute numbers with an entry in `FIXED`: past every one `kind`
/// knows (RFC 8276's xattr_support, 82, is the highest).
const FIXED_BITS: usize = 96;

/// `fixed_len(kind(bit))` by attribute number, 0 where none: one load per
/// attribute on the path every GETATTR reply takes.
static FIXED: [u8; FIXED_BITS] = {
    let mut t = [0u8; FIXED_BITS];
    let mut bit = 0;
    while bit < FIXED_BITS {
        if let Some(k) = kind(bit as u32) {
            if let Some(n) = fixed_len(k) {
                t[bit] = n as u8;
            }
        }
        bit += 1;
    }
    t
};

/// Steps over one value of a shape with no fixed length, with
/// `decode_val`'s reads and bounds, keeping nothing.
fn skip_val(d: &mut Dec<'_>, k: Kind) -> rnfsd_xdr::Result<()> {
    match k {
        Kind::Bool => d.bool().map(drop),
        Kind::Str => d.opaque(NFS4_OPAQUE_LIMIT).map(drop),
        Kind::Fh => d.opaque(NFS4_FHSIZE).map(drop),
        Kind::Bitmap => Bitmap4::decode(d).map(drop),
        // `array_len` has checked that the items are there.
        Kind::List => {
            let n = d.array_len(MAX_ATTR_LIST, 4)?;
            d.opaque_fixed(4 * n).map(drop)
        }
        k => d.opaque_fixed(fixed_len(k).unwrap_or(0)).map(drop),
    }
}

/// Checks that `vals` are exactly the attributes `mask` names, each of a
/// type known here: what [`Attrs4::decode`] accepts, without building the
/// values (for a client that checks replies but keeps no attributes). A
/// run of fixed-size values is stepped over at once.
pub fn check_vals(mask: &Bitmap4, vals: &[u8]) -> Result<(), ClientError> {
    let short = |bit: u32, e: rnfsd_xdr::XdrError| {
        ClientError::Protocol(format!("attributes up to {bit} do not decode: {e}"))
    };
    let mut d = Dec::new(vals);
    // Bytes of fixed-size values not yet stepped over, and the last of
    // their attributes.
    let (mut run, mut last) = (0usize, 0u32);
    for (i, &word) in mask.words().iter().enumerate() {
        let mut rest = word;
        while rest != 0 {
            let bit = i as u32 * 32 + rest.trailing_zeros();
            rest &= rest - 1;
            if let Some(&n) = FIXED.get(bit as usize) {
                if n != 0 {
                    run += usize::from(n);
                    last = bit;
                    continue;
                }
            }
            let Some(k) = kind(bit) else {
                return Err(ClientError::Protocol(format!(
                    "attribute {bit} is not one this client decodes"
                )));
            };
            d.opaque_fixed(run).map_err(|e| short(last, e))?;
            run = 0;
            skip_val(&mut d, k).map_err(|e| short(bit, e))?;
        }
    }
    d.opaque_fixed(run).map_err(|e| short(last, e))?;
    if d.remaining() != 0 {
        return Err(ClientError::Protocol(format!(
            "{} bytes after the last attribute",
            d.remaining()
        )));
    }
    Ok(())
}

/// One step of an [`AttrLayout`]: a run of fixed-size values stepped over
/// at once, then, unless it is the last step, one value read by its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Step {
    run: usize,
    then: Option<Kind>,
}

/// What [`check_vals`] reads for one mask, worked out once: the runs of
/// fixed-size values and the values between them read one by one (for a
/// client that asks for the same attributes on every call). For the
/// attributes of NFSv3's fattr3 that is three steps instead of a look-up
/// per attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttrLayout {
    mask: Bitmap4,
    /// `mask` as XDR: a reply carrying these bytes carries this mask.
    mask_xdr: Vec<u8>,
    steps: Vec<Step>,
}

impl AttrLayout {
    /// The layout of `mask`'s values; `None` if it names an attribute not
    /// decoded here (which [`check_vals`] refuses whatever the values).
    pub fn new(mask: &Bitmap4) -> Option<Self> {
        let mut steps = Vec::new();
        let mut run = 0;
        for bit in mask.iter() {
            let k = kind(bit)?;
            match FIXED.get(bit as usize) {
                Some(&n) if n != 0 => run += usize::from(n),
                _ => {
                    steps.push(Step { run, then: Some(k) });
                    run = 0;
                }
            }
        }
        steps.push(Step { run, then: None });
        let mut e = Enc::new();
        mask.encode(&mut e);
        Some(AttrLayout {
            mask: *mask,
            mask_xdr: e.into_vec(),
            steps,
        })
    }

    /// The mask this is the layout of.
    pub fn mask(&self) -> &Bitmap4 {
        &self.mask
    }

    /// The mask's XDR: bytes that `Bitmap4::decode` reads as exactly
    /// [`Self::mask`], and no others do.
    pub(crate) fn mask_xdr(&self) -> &[u8] {
        &self.mask_xdr
    }

    /// True exactly when `check_vals(self.mask(), vals)` is `Ok`: the same
    /// reads with the same bounds.
    pub fn check(&self, vals: &[u8]) -> bool {
        let mut d = Dec::new(vals);
        for s in &self.steps {
            if d.opaque_fixed(s.run).is_err() {
                return false;
            }
            if let Some(k) = s.then {
                if skip_val(&mut d, k).is_err() {
                    return false;
                }
            }
        }
        d.remaining() == 0
    }
}

/// The decoded values of one fattr4, by attribute number, with accessors
/// for the common ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attrs4 {
    pub values: BTreeMap<u32, AttrVal>,
}

/// The attributes [`crate::Nfs4Client::getattr_decoded`] asks for: the
/// ones a client needs to tell what a file is.
pub const COMMON_ATTRS: &[u32] = &[
    FATTR4_TYPE,
    FATTR4_CHANGE,
    FATTR4_SIZE,
    FATTR4_FSID,
    FATTR4_FILEID,
    FATTR4_MODE,
    FATTR4_NUMLINKS,
    FATTR4_OWNER,
    FATTR4_OWNER_GROUP,
    FATTR4_SPACE_USED,
    FATTR4_TIME_ACCESS,
    FATTR4_TIME_METADATA,
    FATTR4_TIME_MODIFY,
    FATTR4_MOUNTED_ON_FILEID,
];

/// [`COMMON_ATTRS`] as a bitmap.
pub fn common_mask() -> Bitmap4 {
    // Every bit is below 64, well within the bitmap's capacity.
    Bitmap4::from_bits(COMMON_ATTRS).unwrap_or_default()
}

impl Attrs4 {
    /// Decode every attribute of `f`; its values must be exactly the
    /// attributes its mask names, each of a type known here.
    pub fn decode(f: &Fattr4) -> Result<Self, ClientError> {
        let mut d = Dec::new(&f.attr_vals);
        let mut values = BTreeMap::new();
        for bit in f.attrmask.iter() {
            let k = kind(bit).ok_or_else(|| {
                ClientError::Protocol(format!("attribute {bit} is not one this client decodes"))
            })?;
            let v = decode_val(&mut d, k).map_err(|e| {
                ClientError::Protocol(format!("attribute {bit} does not decode: {e}"))
            })?;
            values.insert(bit, v);
        }
        if d.remaining() != 0 {
            return Err(ClientError::Protocol(format!(
                "{} bytes after the last attribute",
                d.remaining()
            )));
        }
        Ok(Attrs4 { values })
    }

    pub fn get(&self, bit: u32) -> Option<&AttrVal> {
        self.values.get(&bit)
    }

    fn u32(&self, bit: u32) -> Option<u32> {
        match self.get(bit)? {
            AttrVal::U32(v) => Some(*v),
            _ => None,
        }
    }

    fn u64(&self, bit: u32) -> Option<u64> {
        match self.get(bit)? {
            AttrVal::U64(v) => Some(*v),
            _ => None,
        }
    }

    fn bytes(&self, bit: u32) -> Option<&[u8]> {
        match self.get(bit)? {
            AttrVal::Bytes(v) => Some(v),
            _ => None,
        }
    }

    fn time(&self, bit: u32) -> Option<Nfstime4> {
        match self.get(bit)? {
            AttrVal::Time(t) => Some(*t),
            _ => None,
        }
    }

    pub fn supported_attrs(&self) -> Option<Bitmap4> {
        match self.get(FATTR4_SUPPORTED_ATTRS)? {
            AttrVal::Bitmap(b) => Some(*b),
            _ => None,
        }
    }

    /// The type; `None` if absent or not a valid nfs_ftype4.
    pub fn ftype(&self) -> Option<NfsFtype4> {
        NfsFtype4::from_u32(self.u32(FATTR4_TYPE)?)
    }

    pub fn change(&self) -> Option<u64> {
        self.u64(FATTR4_CHANGE)
    }

    pub fn size(&self) -> Option<u64> {
        self.u64(FATTR4_SIZE)
    }

    pub fn fsid(&self) -> Option<Fsid4> {
        match self.get(FATTR4_FSID)? {
            AttrVal::Pair(major, minor) => Some(Fsid4 {
                major: *major,
                minor: *minor,
            }),
            _ => None,
        }
    }

    pub fn lease_time(&self) -> Option<u32> {
        self.u32(FATTR4_LEASE_TIME)
    }

    pub fn rdattr_error(&self) -> Option<u32> {
        self.u32(FATTR4_RDATTR_ERROR)
    }

    pub fn filehandle(&self) -> Option<NfsFh4> {
        self.bytes(FATTR4_FILEHANDLE).map(|b| NfsFh4(b.to_vec()))
    }

    pub fn fileid(&self) -> Option<u64> {
        self.u64(FATTR4_FILEID)
    }

    pub fn mode(&self) -> Option<u32> {
        self.u32(FATTR4_MODE)
    }

    pub fn nlink(&self) -> Option<u32> {
        self.u32(FATTR4_NUMLINKS)
    }

    pub fn owner(&self) -> Option<&[u8]> {
        self.bytes(FATTR4_OWNER)
    }

    pub fn owner_group(&self) -> Option<&[u8]> {
        self.bytes(FATTR4_OWNER_GROUP)
    }

    pub fn space_used(&self) -> Option<u64> {
        self.u64(FATTR4_SPACE_USED)
    }

    pub fn atime(&self) -> Option<Nfstime4> {
        self.time(FATTR4_TIME_ACCESS)
    }

    /// time_metadata, NFSv3's ctime.
    pub fn ctime(&self) -> Option<Nfstime4> {
        self.time(FATTR4_TIME_METADATA)
    }

    pub fn mtime(&self) -> Option<Nfstime4> {
        self.time(FATTR4_TIME_MODIFY)
    }

    pub fn mounted_on_fileid(&self) -> Option<u64> {
        self.u64(FATTR4_MOUNTED_ON_FILEID)
    }
}

/// Attributes to set (SETATTR, or the create attributes of OPEN and
/// CREATE). Unset fields are not sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetAttrs4 {
    pub size: Option<u64>,
    pub mode: Option<u32>,
    pub owner: Option<Vec<u8>>,
    pub owner_group: Option<Vec<u8>>,
    /// time_access_set.
    pub atime: Option<Settime4>,
    /// time_modify_set.
    pub mtime: Option<Settime4>,
}

impl SetAttrs4 {
    /// Only a mode.
    pub fn mode(mode: u32) -> Self {
        SetAttrs4 {
            mode: Some(mode),
            ..Default::default()
        }
    }

    /// The fattr4: the set attributes' bits, values in bit order
    /// (RFC 8881 §3.3.7).
    pub fn to_fattr(&self) -> Fattr4 {
        let mut mask = Bitmap4::new();
        let mut e = Enc::new();
        if let Some(s) = self.size {
            mask.insert(FATTR4_SIZE);
            e.u64(s);
        }
        if let Some(m) = self.mode {
            mask.insert(FATTR4_MODE);
            e.u32(m);
        }
        if let Some(o) = &self.owner {
            mask.insert(FATTR4_OWNER);
            e.opaque(o);
        }
        if let Some(g) = &self.owner_group {
            mask.insert(FATTR4_OWNER_GROUP);
            e.opaque(g);
        }
        if let Some(t) = &self.atime {
            mask.insert(FATTR4_TIME_ACCESS_SET);
            t.encode(&mut e);
        }
        if let Some(t) = &self.mtime {
            mask.insert(FATTR4_TIME_MODIFY_SET);
            t.encode(&mut e);
        }
        Fattr4 {
            attrmask: mask,
            attr_vals: e.into_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_in_bit_order_decode() {
        let mut e = Enc::new();
        e.u32(NfsFtype4::Reg as u32); // type
        e.u64(7); // size
        e.u64(1);
        e.u64(2); // fsid
        e.u32(0o644); // mode
        e.opaque(b"root"); // owner
        Nfstime4 {
            seconds: 5,
            nseconds: 6,
        }
        .encode(&mut e); // time_modify
        let f = Fattr4 {
            attrmask: Bitmap4::from_bits(&[
                FATTR4_TYPE,
                FATTR4_SIZE,
                FATTR4_FSID,
                FATTR4_MODE,
                FATTR4_OWNER,
                FATTR4_TIME_MODIFY,
            ])
            .unwrap(),
            attr_vals: e.into_vec(),
        };
        let a = Attrs4::decode(&f).unwrap();
        assert_eq!(a.ftype(), Some(NfsFtype4::Reg));
        assert_eq!(a.size(), Some(7));
        assert_eq!(a.fsid(), Some(Fsid4 { major: 1, minor: 2 }));
        assert_eq!(a.mode(), Some(0o644));
        assert_eq!(a.owner(), Some(&b"root"[..]));
        assert_eq!(a.mtime().map(|t| t.seconds), Some(5));
        assert_eq!(a.fileid(), None);
    }

    /// One attribute of every shape, and values for them in bit order.
    fn every_kind() -> Fattr4 {
        let bits = [
            FATTR4_SUPPORTED_ATTRS,
            FATTR4_TYPE,
            FATTR4_CHANGE,
            FATTR4_LINK_SUPPORT,
            FATTR4_FSID,
            FATTR4_FILEHANDLE,
            FATTR4_OWNER,
            FATTR4_RAWDEV,
            FATTR4_TIME_MODIFY,
            FATTR4_FS_LAYOUT_TYPES,
        ];
        let mut e = Enc::new();
        for &b in &bits {
            match kind(b).unwrap() {
                Kind::Bitmap => Bitmap4::from_bits(&[1, 3, 40]).unwrap().encode(&mut e),
                Kind::U32 => e.u32(2),
                Kind::U64 => e.u64(99),
                Kind::Bool => e.bool(true),
                Kind::Pair => {
                    e.u64(1);
                    e.u64(2);
                }
                Kind::Fh => e.opaque(&[7; 13]),
                Kind::Str => e.opaque(b"owner@dom"),
                Kind::Spec => {
                    e.u32(8);
                    e.u32(1);
                }
                Kind::Time => {
                    e.u64(1_700_000_000);
                    e.u32(999);
                }
                Kind::List => {
                    e.u32(2);
                    e.u32(1);
                    e.u32(4);
                }
            }
        }
        Fattr4 {
            attrmask: Bitmap4::from_bits(&bits).unwrap(),
            attr_vals: e.into_vec(),
        }
    }

    #[test]
    fn the_fixed_table_is_kind_and_fixed_len_and_covers_every_known_bit() {
        for bit in 0..(32 * MAX_BITMAP_WORDS) as u32 {
            let want = kind(bit).and_then(fixed_len).unwrap_or(0);
            match FIXED.get(bit as usize) {
                Some(&n) => assert_eq!(usize::from(n), want, "bit {bit}"),
                None => assert!(kind(bit).is_none(), "bit {bit} past the table"),
            }
        }
    }

    #[test]
    fn check_vals_accepts_what_decode_accepts() {
        let f = every_kind();
        assert!(Attrs4::decode(&f).is_ok());
        let same = |f: &Fattr4| {
            let ok = check_vals(&f.attrmask, &f.attr_vals).is_ok();
            assert_eq!(ok, Attrs4::decode(f).is_ok(), "{f:?}");
            let laid = AttrLayout::new(&f.attrmask).is_some_and(|l| l.check(&f.attr_vals));
            assert_eq!(laid, ok, "layout: {f:?}");
        };
        same(&f);
        for n in 0..f.attr_vals.len() {
            same(&Fattr4 {
                attrmask: f.attrmask,
                attr_vals: f.attr_vals[..n].to_vec(),
            });
        }
        for w in (0..f.attr_vals.len()).step_by(4) {
            for v in [0, 1, 2, 3, 4, 65, 1000, NFS4_FHSIZE as u32 + 1, u32::MAX] {
                let mut g = f.clone();
                g.attr_vals[w..w + 4].copy_from_slice(&v.to_be_bytes());
                same(&g);
            }
        }
        // An extra word, one attribute too few or too many in the mask, an
        // attribute not decoded here.
        let mut g = f.clone();
        g.attr_vals.extend_from_slice(&[0; 4]);
        same(&g);
        for b in [FATTR4_TYPE, FATTR4_SIZE, FATTR4_ACL] {
            let mut g = f.clone();
            if g.attrmask.contains(b) {
                g.attrmask.remove(b);
            } else {
                g.attrmask.insert(b);
            }
            same(&g);
        }
        assert!(check_vals(&Bitmap4::new(), &[]).is_ok());
        // A layout's mask bytes decode to its mask.
        let l = AttrLayout::new(&f.attrmask).unwrap();
        let mut d = Dec::new(l.mask_xdr());
        assert_eq!(Bitmap4::decode(&mut d).unwrap(), *l.mask());
        assert!(d.finish().is_ok());
    }

    #[test]
    fn unknown_short_or_long_values_are_errors() {
        let acl = Fattr4 {
            attrmask: Bitmap4::from_bits(&[FATTR4_ACL]).unwrap(),
            attr_vals: vec![0; 4],
        };
        assert!(Attrs4::decode(&acl).is_err());
        let short = Fattr4 {
            attrmask: Bitmap4::from_bits(&[FATTR4_SIZE]).unwrap(),
            attr_vals: vec![0; 4],
        };
        assert!(Attrs4::decode(&short).is_err());
        let long = Fattr4 {
            attrmask: Bitmap4::from_bits(&[FATTR4_MODE]).unwrap(),
            attr_vals: vec![0; 8],
        };
        assert!(Attrs4::decode(&long).is_err());
        let huge_list = Fattr4 {
            attrmask: Bitmap4::from_bits(&[FATTR4_LAYOUT_TYPES]).unwrap(),
            attr_vals: vec![0xff; 8],
        };
        assert!(Attrs4::decode(&huge_list).is_err());
    }

    #[test]
    fn set_attributes_encode_in_bit_order() {
        let s = SetAttrs4 {
            size: Some(3),
            mode: Some(0o600),
            mtime: Some(Settime4::ServerTime),
            ..Default::default()
        };
        let f = s.to_fattr();
        assert_eq!(
            f.attrmask.iter().collect::<Vec<_>>(),
            vec![FATTR4_SIZE, FATTR4_MODE, FATTR4_TIME_MODIFY_SET]
        );
        assert_eq!(
            f.attr_vals,
            [0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0x01, 0x80, 0, 0, 0, 0]
        );
        assert!(SetAttrs4::default().to_fattr().attrmask.is_empty());
    }
}
