//! Attribute numbers (RFC 8881 §5.8, RFC 7862 §12.2), bitmap4 and fattr4
//! (RFC 8881 §3.2, §3.3.7). The values inside an fattr4 stay encoded
//! here; what each attribute means is the server's business.

use std::fmt;

use rnfsd_xdr::{pad4, Dec, Enc, Result, Xdr};

use super::MAX_ATTRLIST;

// REQUIRED attributes (RFC 8881 §5.6).
pub const FATTR4_SUPPORTED_ATTRS: u32 = 0;
pub const FATTR4_TYPE: u32 = 1;
pub const FATTR4_FH_EXPIRE_TYPE: u32 = 2;
pub const FATTR4_CHANGE: u32 = 3;
pub const FATTR4_SIZE: u32 = 4;
pub const FATTR4_LINK_SUPPORT: u32 = 5;
pub const FATTR4_SYMLINK_SUPPORT: u32 = 6;
pub const FATTR4_NAMED_ATTR: u32 = 7;
pub const FATTR4_FSID: u32 = 8;
pub const FATTR4_UNIQUE_HANDLES: u32 = 9;
pub const FATTR4_LEASE_TIME: u32 = 10;
pub const FATTR4_RDATTR_ERROR: u32 = 11;
pub const FATTR4_FILEHANDLE: u32 = 19;
pub const FATTR4_SUPPATTR_EXCLCREAT: u32 = 75;

// RECOMMENDED attributes (RFC 8881 §5.7).
pub const FATTR4_ACL: u32 = 12;
pub const FATTR4_ACLSUPPORT: u32 = 13;
pub const FATTR4_ARCHIVE: u32 = 14;
pub const FATTR4_CANSETTIME: u32 = 15;
pub const FATTR4_CASE_INSENSITIVE: u32 = 16;
pub const FATTR4_CASE_PRESERVING: u32 = 17;
pub const FATTR4_CHOWN_RESTRICTED: u32 = 18;
pub const FATTR4_FILEID: u32 = 20;
pub const FATTR4_FILES_AVAIL: u32 = 21;
pub const FATTR4_FILES_FREE: u32 = 22;
pub const FATTR4_FILES_TOTAL: u32 = 23;
pub const FATTR4_FS_LOCATIONS: u32 = 24;
pub const FATTR4_HIDDEN: u32 = 25;
pub const FATTR4_HOMOGENEOUS: u32 = 26;
pub const FATTR4_MAXFILESIZE: u32 = 27;
pub const FATTR4_MAXLINK: u32 = 28;
pub const FATTR4_MAXNAME: u32 = 29;
pub const FATTR4_MAXREAD: u32 = 30;
pub const FATTR4_MAXWRITE: u32 = 31;
pub const FATTR4_MIMETYPE: u32 = 32;
pub const FATTR4_MODE: u32 = 33;
pub const FATTR4_NO_TRUNC: u32 = 34;
pub const FATTR4_NUMLINKS: u32 = 35;
pub const FATTR4_OWNER: u32 = 36;
pub const FATTR4_OWNER_GROUP: u32 = 37;
pub const FATTR4_QUOTA_AVAIL_HARD: u32 = 38;
pub const FATTR4_QUOTA_AVAIL_SOFT: u32 = 39;
pub const FATTR4_QUOTA_USED: u32 = 40;
pub const FATTR4_RAWDEV: u32 = 41;
pub const FATTR4_SPACE_AVAIL: u32 = 42;
pub const FATTR4_SPACE_FREE: u32 = 43;
pub const FATTR4_SPACE_TOTAL: u32 = 44;
pub const FATTR4_SPACE_USED: u32 = 45;
pub const FATTR4_SYSTEM: u32 = 46;
pub const FATTR4_TIME_ACCESS: u32 = 47;
pub const FATTR4_TIME_ACCESS_SET: u32 = 48;
pub const FATTR4_TIME_BACKUP: u32 = 49;
pub const FATTR4_TIME_CREATE: u32 = 50;
pub const FATTR4_TIME_DELTA: u32 = 51;
pub const FATTR4_TIME_METADATA: u32 = 52;
pub const FATTR4_TIME_MODIFY: u32 = 53;
pub const FATTR4_TIME_MODIFY_SET: u32 = 54;
pub const FATTR4_MOUNTED_ON_FILEID: u32 = 55;

/// The attributes NFSv3's fattr3 carries, in fattr4's order: what a
/// client's GETATTR of a file asks (Linux's nfs4_fattr_bitmap, less
/// mounted_on_fileid).
pub const FATTR3_ATTRS: [u32; 14] = [
    FATTR4_TYPE,
    FATTR4_CHANGE,
    FATTR4_SIZE,
    FATTR4_FSID,
    FATTR4_FILEID,
    FATTR4_MODE,
    FATTR4_NUMLINKS,
    FATTR4_OWNER,
    FATTR4_OWNER_GROUP,
    FATTR4_RAWDEV,
    FATTR4_SPACE_USED,
    FATTR4_TIME_ACCESS,
    FATTR4_TIME_METADATA,
    FATTR4_TIME_MODIFY,
];
pub const FATTR4_DIR_NOTIF_DELAY: u32 = 56;
pub const FATTR4_DIRENT_NOTIF_DELAY: u32 = 57;
pub const FATTR4_DACL: u32 = 58;
pub const FATTR4_SACL: u32 = 59;
pub const FATTR4_CHANGE_POLICY: u32 = 60;
pub const FATTR4_FS_STATUS: u32 = 61;
pub const FATTR4_FS_LAYOUT_TYPES: u32 = 62;
pub const FATTR4_LAYOUT_HINT: u32 = 63;
pub const FATTR4_LAYOUT_TYPES: u32 = 64;
pub const FATTR4_LAYOUT_BLKSIZE: u32 = 65;
pub const FATTR4_LAYOUT_ALIGNMENT: u32 = 66;
pub const FATTR4_FS_LOCATIONS_INFO: u32 = 67;
pub const FATTR4_MDSTHRESHOLD: u32 = 68;
pub const FATTR4_RETENTION_GET: u32 = 69;
pub const FATTR4_RETENTION_SET: u32 = 70;
pub const FATTR4_RETENTEVT_GET: u32 = 71;
pub const FATTR4_RETENTEVT_SET: u32 = 72;
pub const FATTR4_RETENTION_HOLD: u32 = 73;
pub const FATTR4_MODE_SET_MASKED: u32 = 74;
pub const FATTR4_FS_CHARSET_CAP: u32 = 76;

// NFSv4.2 (RFC 7862 §12.2).
pub const FATTR4_CLONE_BLKSIZE: u32 = 77;
pub const FATTR4_SPACE_FREED: u32 = 78;
pub const FATTR4_CHANGE_ATTR_TYPE: u32 = 79;
pub const FATTR4_SEC_LABEL: u32 = 80;
/// RFC 8275 §4 (umask), an NFSv4.2 extension.
pub const FATTR4_MODE_UMASK: u32 = 81;
/// RFC 8276 §8.4 (extended attributes), an NFSv4.2 extension.
pub const FATTR4_XATTR_SUPPORT: u32 = 82;
/// RFC 9754 §4 (open_arguments4: what OPEN takes), an NFSv4.2 extension.
pub const FATTR4_OPEN_ARGUMENTS: u32 = 86;

// open_arguments4's bit numbers (RFC 9754 §4.1): one enum per bitmap.
pub const OPEN_ARGS_SHARE_ACCESS_READ: u32 = 1;
pub const OPEN_ARGS_SHARE_ACCESS_WRITE: u32 = 2;
pub const OPEN_ARGS_SHARE_ACCESS_BOTH: u32 = 3;
pub const OPEN_ARGS_SHARE_DENY_NONE: u32 = 0;
pub const OPEN_ARGS_SHARE_DENY_READ: u32 = 1;
pub const OPEN_ARGS_SHARE_DENY_WRITE: u32 = 2;
pub const OPEN_ARGS_SHARE_DENY_BOTH: u32 = 3;
pub const OPEN_ARGS_SHARE_ACCESS_WANT_ANY_DELEG: u32 = 3;
pub const OPEN_ARGS_SHARE_ACCESS_WANT_NO_DELEG: u32 = 4;
pub const OPEN_ARGS_SHARE_ACCESS_WANT_CANCEL: u32 = 5;
pub const OPEN_ARGS_SHARE_ACCESS_WANT_SIGNAL_DELEG_WHEN_RESRC_AVAIL: u32 = 17;
pub const OPEN_ARGS_SHARE_ACCESS_WANT_PUSH_DELEG_WHEN_UNCONTENDED: u32 = 18;
pub const OPEN_ARGS_SHARE_ACCESS_WANT_DELEG_TIMESTAMPS: u32 = 20;
pub const OPEN_ARGS_SHARE_ACCESS_WANT_OPEN_XOR_DELEGATION: u32 = 21;
pub const OPEN_ARGS_OPEN_CLAIM_NULL: u32 = 0;
pub const OPEN_ARGS_OPEN_CLAIM_PREVIOUS: u32 = 1;
pub const OPEN_ARGS_OPEN_CLAIM_DELEGATE_CUR: u32 = 2;
pub const OPEN_ARGS_OPEN_CLAIM_DELEGATE_PREV: u32 = 3;
pub const OPEN_ARGS_OPEN_CLAIM_FH: u32 = 4;
pub const OPEN_ARGS_OPEN_CLAIM_DELEG_CUR_FH: u32 = 5;
pub const OPEN_ARGS_OPEN_CLAIM_DELEG_PREV_FH: u32 = 6;
pub const OPEN_ARGS_CREATEMODE_UNCHECKED4: u32 = 0;
pub const OPEN_ARGS_CREATE_MODE_GUARDED: u32 = 1;
pub const OPEN_ARGS_CREATEMODE_EXCLUSIVE4: u32 = 2;
pub const OPEN_ARGS_CREATE_MODE_EXCLUSIVE4_1: u32 = 3;

// fattr4_fh_expire_type values (RFC 8881 §5.8.1.3).
pub const FH4_PERSISTENT: u32 = 0x00;
pub const FH4_NOEXPIRE_WITH_OPEN: u32 = 0x01;
pub const FH4_VOLATILE_ANY: u32 = 0x02;
pub const FH4_VOL_MIGRATION: u32 = 0x04;
pub const FH4_VOL_RENAME: u32 = 0x08;

/// Words a decoded bitmap4 may have: attribute 82 needs three; eight leave
/// room for every registered extension.
pub const MAX_BITMAP_WORDS: usize = 8;

/// bitmap4: uint32_t<> (RFC 8881 §3.2, layout in §3.3.7), at most `MAX_BITMAP_WORDS`
/// words, held inline (no allocation). Bit `n` is bit `n % 32` of word
/// `n / 32`.
///
/// Equality and the encoding keep the word count as received, trailing
/// zero words included; `same_bits` compares the bits alone.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Bitmap4 {
    len: u8,
    // Invariant: words[len..] are zero.
    words: [u32; MAX_BITMAP_WORDS],
}

impl Bitmap4 {
    /// The empty bitmap (zero words).
    #[inline]
    pub const fn new() -> Self {
        Bitmap4 {
            len: 0,
            words: [0; MAX_BITMAP_WORDS],
        }
    }

    /// A bitmap with exactly these words; `None` past `MAX_BITMAP_WORDS`.
    #[inline]
    pub fn from_words(w: &[u32]) -> Option<Self> {
        if w.len() > MAX_BITMAP_WORDS {
            return None;
        }
        let mut b = Bitmap4::new();
        b.words[..w.len()].copy_from_slice(w);
        b.len = w.len() as u8;
        Some(b)
    }

    /// A bitmap with these bits set and no more words than they need;
    /// `None` if a bit is past the capacity.
    pub fn from_bits(bits: &[u32]) -> Option<Self> {
        let mut b = Bitmap4::new();
        for &n in bits {
            if !b.insert(n) {
                return None;
            }
        }
        Some(b)
    }

    #[inline]
    pub fn words(&self) -> &[u32] {
        &self.words[..self.len as usize]
    }

    #[inline]
    pub fn contains(&self, bit: u32) -> bool {
        let w = (bit / 32) as usize;
        w < self.len as usize && self.words[w] & (1 << (bit % 32)) != 0
    }

    /// Set `bit`, growing the word count as needed; false (and nothing
    /// changed) if it is past the capacity.
    #[inline]
    pub fn insert(&mut self, bit: u32) -> bool {
        let w = (bit / 32) as usize;
        if w >= MAX_BITMAP_WORDS {
            return false;
        }
        self.words[w] |= 1 << (bit % 32);
        self.len = self.len.max(w as u8 + 1);
        true
    }

    #[inline]
    pub fn remove(&mut self, bit: u32) {
        let w = (bit / 32) as usize;
        if w < MAX_BITMAP_WORDS {
            self.words[w] &= !(1 << (bit % 32));
        }
    }

    /// No bit set (whatever the word count).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// The bits set in both, with as many words as `self`.
    #[inline]
    pub fn intersect(&self, other: &Bitmap4) -> Bitmap4 {
        let mut b = *self;
        for (a, o) in b.words.iter_mut().zip(other.words.iter()) {
            *a &= o;
        }
        b
    }

    /// Whether a bit is set in both.
    #[inline]
    pub fn meets(&self, other: &Bitmap4) -> bool {
        self.words
            .iter()
            .zip(other.words.iter())
            .any(|(a, o)| a & o != 0)
    }

    /// The same bits set, whatever the word counts.
    #[inline]
    pub fn same_bits(&self, other: &Bitmap4) -> bool {
        self.words == other.words
    }

    /// The set bits, lowest first.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        // One step per set bit (GETATTR walks its mask on every call).
        self.words().iter().enumerate().flat_map(|(i, &w)| {
            let mut rest = w;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let b = rest.trailing_zeros();
                    rest &= rest - 1;
                    i as u32 * 32 + b
                })
            })
        })
    }

    /// Bytes on the wire.
    pub fn xdr_len(&self) -> usize {
        4 + 4 * self.len as usize
    }
}

impl fmt::Debug for Bitmap4 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bitmap4({} words: ", self.len)?;
        f.debug_set().entries(self.iter()).finish()?;
        f.write_str(")")
    }
}

impl Xdr for Bitmap4 {
    #[inline]
    fn encode(&self, e: &mut Enc) {
        e.u32(self.len as u32);
        for w in self.words() {
            e.u32(*w);
        }
    }
    #[inline]
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        // §3.2 puts no bound on the count; ours is MAX_BITMAP_WORDS.
        let n = d.array_len(MAX_BITMAP_WORDS, 4)?;
        let mut b = Bitmap4::new();
        for w in b.words.iter_mut().take(n) {
            *w = d.u32()?;
        }
        b.len = n as u8;
        Ok(b)
    }
}

/// fattr4 (RFC 8881 §3.3.7): which attributes, then their values encoded
/// back to back in bit order (attrlist4, at most `MAX_ATTRLIST` bytes).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fattr4 {
    pub attrmask: Bitmap4,
    pub attr_vals: Vec<u8>,
}

impl Fattr4 {
    /// Bytes on the wire.
    pub fn xdr_len(&self) -> usize {
        self.attrmask.xdr_len() + 4 + pad4(self.attr_vals.len())
    }
}

impl Xdr for Fattr4 {
    fn encode(&self, e: &mut Enc) {
        self.attrmask.encode(e);
        e.opaque(&self.attr_vals);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        let attrmask = Bitmap4::decode(d)?;
        let attr_vals = d.opaque(MAX_ATTRLIST)?.to_vec();
        Ok(Fattr4 {
            attrmask,
            attr_vals,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rnfsd_xdr::XdrError;

    #[test]
    fn bits_map_to_words() {
        let b = Bitmap4::from_bits(&[FATTR4_TYPE, FATTR4_SIZE, FATTR4_XATTR_SUPPORT]).unwrap();
        assert_eq!(b.words(), &[0b10010, 0, 1 << (82 - 64)]);
        assert!(b.contains(FATTR4_SIZE) && !b.contains(FATTR4_CHANGE));
        assert!(!b.contains(1000));
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![1, 4, 82]);
        assert!(Bitmap4::from_bits(&[32 * MAX_BITMAP_WORDS as u32]).is_none());
    }

    #[test]
    fn meets_is_a_common_bit_whatever_the_word_counts() {
        let a = Bitmap4::from_bits(&[FATTR4_TYPE, FATTR4_XATTR_SUPPORT]).unwrap();
        let b = Bitmap4::from_words(&[0, 0, 1 << (82 - 64), 0]).unwrap();
        assert!(a.meets(&b) && b.meets(&a));
        assert!(!a.meets(&Bitmap4::from_bits(&[FATTR4_SIZE]).unwrap()));
        assert!(!a.meets(&Bitmap4::new()));
    }

    #[test]
    fn word_count_is_kept_and_bounded() {
        let b = Bitmap4::from_words(&[1, 0]).unwrap();
        let b2 = Bitmap4::from_words(&[1]).unwrap();
        assert_ne!(b, b2);
        assert!(b.same_bits(&b2));
        assert_eq!(rnfsd_xdr::to_vec(&b), [0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0]);
        let mut long = vec![0, 0, 0, 9];
        long.extend_from_slice(&[0; 36]);
        assert_eq!(
            Bitmap4::decode(&mut Dec::new(&long)),
            Err(XdrError::TooLong)
        );
    }
}
