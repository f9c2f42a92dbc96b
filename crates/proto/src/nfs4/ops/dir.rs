//! Directory operations: CREATE, LINK, REMOVE, RENAME, READDIR, READLINK
//! (RFC 8881 §18), and `ReaddirWriter`, which builds a READDIR result in
//! the reply within the client's byte budget.

use rnfsd_xdr::{pad4, xdr_struct, Dec, Enc, Result, Xdr};

use crate::mount::decode_list;
use crate::nfs4::{
    Bitmap4, ChangeInfo4, Component4, Fattr4, LinkText4, NfsFtype4, NfsRes4, Nfsstat4, Specdata4,
    Verifier4, MAX_DIR_ENTRIES, OP_READDIR,
};

/// createtype4 (RFC 8881 §18.4): what CREATE makes. Regular files are made
/// by OPEN; their type and any unknown one has no body, and the server
/// answers NFS4ERR_BADTYPE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateType4 {
    Lnk(LinkText4),
    Blk(Specdata4),
    Chr(Specdata4),
    Sock,
    Fifo,
    Dir,
    /// A type without a union arm (NF4REG, NF4ATTRDIR, NF4NAMEDATTR, or no
    /// nfs_ftype4 at all); must not be one of the types above.
    Other(u32),
}

impl Xdr for CreateType4 {
    fn encode(&self, e: &mut Enc) {
        match self {
            CreateType4::Lnk(l) => {
                e.u32(NfsFtype4::Lnk as u32);
                l.encode(e);
            }
            CreateType4::Blk(s) => {
                e.u32(NfsFtype4::Blk as u32);
                s.encode(e);
            }
            CreateType4::Chr(s) => {
                e.u32(NfsFtype4::Chr as u32);
                s.encode(e);
            }
            CreateType4::Sock => e.u32(NfsFtype4::Sock as u32),
            CreateType4::Fifo => e.u32(NfsFtype4::Fifo as u32),
            CreateType4::Dir => e.u32(NfsFtype4::Dir as u32),
            CreateType4::Other(t) => e.u32(*t),
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        let t = d.u32()?;
        Ok(match NfsFtype4::from_u32(t) {
            Some(NfsFtype4::Lnk) => CreateType4::Lnk(LinkText4::decode(d)?),
            Some(NfsFtype4::Blk) => CreateType4::Blk(Specdata4::decode(d)?),
            Some(NfsFtype4::Chr) => CreateType4::Chr(Specdata4::decode(d)?),
            Some(NfsFtype4::Sock) => CreateType4::Sock,
            Some(NfsFtype4::Fifo) => CreateType4::Fifo,
            Some(NfsFtype4::Dir) => CreateType4::Dir,
            // The union's default arm is void: NFS4ERR_BADTYPE, not BADXDR.
            _ => CreateType4::Other(t),
        })
    }
}

xdr_struct! {
    /// CREATE4args (RFC 8881 §18.4).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Create4Args {
        pub objtype: CreateType4,
        pub objname: Component4,
        pub createattrs: Fattr4,
    }
}
xdr_struct! {
    /// CREATE4resok (RFC 8881 §18.4).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Create4ResOk { pub cinfo: ChangeInfo4, pub attrset: Bitmap4 }
}
pub type Create4Res = NfsRes4<Create4ResOk>;

xdr_struct! {
    /// LINK4args (RFC 8881 §18.9).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Link4Args { pub newname: Component4 }
}
/// LINK4res and REMOVE4res: the resok is the directory's change_info4.
pub type Link4Res = NfsRes4<ChangeInfo4>;

xdr_struct! {
    /// REMOVE4args (RFC 8881 §18.25).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Remove4Args { pub target: Component4 }
}
pub type Remove4Res = NfsRes4<ChangeInfo4>;

xdr_struct! {
    /// RENAME4args (RFC 8881 §18.26).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Rename4Args { pub oldname: Component4, pub newname: Component4 }
}
xdr_struct! {
    /// RENAME4resok (RFC 8881 §18.26).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Rename4ResOk { pub source_cinfo: ChangeInfo4, pub target_cinfo: ChangeInfo4 }
}
pub type Rename4Res = NfsRes4<Rename4ResOk>;

/// READLINK4res (RFC 8881 §18.24).
pub type ReadLink4Res = NfsRes4<LinkText4>;

xdr_struct! {
    /// READDIR4args (RFC 8881 §18.23).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ReadDir4Args {
        pub cookie: u64,
        pub cookieverf: Verifier4,
        pub dircount: u32,
        pub maxcount: u32,
        pub attr_request: Bitmap4,
    }
}

/// entry4 without its `nextentry` link (RFC 8881 §18.23).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry4 {
    pub cookie: u64,
    pub name: Component4,
    pub attrs: Fattr4,
}

/// READDIR4resok (RFC 8881 §18.23) with dirlist4 flattened: the entries
/// (the XDR linked list), then eof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadDir4ResOk {
    pub cookieverf: Verifier4,
    pub entries: Vec<Entry4>,
    pub eof: bool,
}

impl Xdr for ReadDir4ResOk {
    fn encode(&self, e: &mut Enc) {
        self.cookieverf.encode(e);
        for ent in &self.entries {
            e.bool(true);
            e.u64(ent.cookie);
            ent.name.encode(e);
            ent.attrs.encode(e);
        }
        e.bool(false);
        e.bool(self.eof);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        let cookieverf = Verifier4::decode(d)?;
        // Each entry costs at least its marker in input; at most
        // MAX_DIR_ENTRIES are kept.
        let entries = decode_list(d, MAX_DIR_ENTRIES, |d| {
            Ok(Entry4 {
                cookie: d.u64()?,
                name: Component4::decode(d)?,
                attrs: Fattr4::decode(d)?,
            })
        })?;
        let eof = d.bool()?;
        Ok(ReadDir4ResOk {
            cookieverf,
            entries,
            eof,
        })
    }
}
pub type ReadDir4Res = NfsRes4<ReadDir4ResOk>;

/// Wire size of one entry4 with its value-follows marker: marker 4,
/// cookie 8, name 4+pad, attributes.
pub fn entry4_len(name_len: usize, attrs: &Fattr4) -> usize {
    4 + 8 + 4 + pad4(name_len) + attrs.xdr_len()
}

/// Writes a successful READDIR result (resop, NFS4_OK, READDIR4resok)
/// straight into the reply, one entry at a time, within the request's
/// budget (RFC 8881 §18.23.3):
/// - `maxcount` bounds the whole READDIR4resok (verifier, entries, list
///   end and eof) and is never exceeded; a caller whose reply space is
///   smaller passes that instead;
/// - `dircount` bounds the entries' cookies and names (as XDR, 8 + 4 +
///   padded name each); it is a hint, so the first entry is always let
///   through, and 0 means no such bound.
///
/// If nothing fits and the directory has more entries, the answer is
/// NFS4ERR_TOOSMALL: `abandon` then removes what `begin` wrote.
#[derive(Debug)]
pub struct ReaddirWriter {
    start: usize,
    used: usize,
    maxcount: usize,
    dir_used: usize,
    dircount: usize,
    entries: u32,
}

impl ReaddirWriter {
    /// Bytes of READDIR4resok besides its entries: verifier 8, list end 4,
    /// eof 4.
    pub const FIXED_LEN: usize = 16;

    /// Writes resop OP_READDIR, NFS4_OK and the cookie verifier.
    pub fn begin(e: &mut Enc, cookieverf: Verifier4, dircount: u32, maxcount: u32) -> Self {
        let start = e.len();
        e.u32(OP_READDIR);
        Nfsstat4::Ok.encode(e);
        cookieverf.encode(e);
        ReaddirWriter {
            start,
            used: Self::FIXED_LEN,
            maxcount: maxcount as usize,
            dir_used: 0,
            dircount: dircount as usize,
            entries: 0,
        }
    }

    /// Appends one entry if it fits both budgets; false (nothing written)
    /// if not, and the listing stops there.
    pub fn push(&mut self, e: &mut Enc, cookie: u64, name: &[u8], attrs: &Fattr4) -> bool {
        let len = entry4_len(name.len(), attrs);
        let dir_len = 8 + 4 + pad4(name.len());
        if self.used + len > self.maxcount {
            return false;
        }
        if self.dircount != 0 && self.entries > 0 && self.dir_used + dir_len > self.dircount {
            return false;
        }
        e.bool(true);
        e.u64(cookie);
        e.opaque(name);
        attrs.encode(e);
        self.used += len;
        self.dir_used += dir_len;
        self.entries += 1;
        true
    }

    /// Entries written so far.
    pub fn entries(&self) -> u32 {
        self.entries
    }

    /// READDIR4resok bytes so far, counting the list end and eof to come.
    pub fn used(&self) -> usize {
        self.used
    }

    /// Ends the list and writes eof.
    pub fn finish(self, e: &mut Enc, eof: bool) {
        e.bool(false);
        e.bool(eof);
    }

    /// Removes everything since `begin`, for the caller to write a failed
    /// result instead.
    pub fn abandon(self, e: &mut Enc) {
        e.truncate(self.start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nfs4::ResOp;

    fn attrs() -> Fattr4 {
        Fattr4 {
            attrmask: Bitmap4::from_bits(&[20]).unwrap_or_default(),
            attr_vals: vec![0; 8],
        }
    }

    #[test]
    fn writer_output_decodes_and_respects_maxcount() {
        let a = attrs();
        let one = entry4_len(3, &a);
        let max = ReaddirWriter::FIXED_LEN + 2 * one;
        let mut e = Enc::new();
        let mut w = ReaddirWriter::begin(&mut e, Verifier4([7; 8]), 0, max as u32);
        assert!(w.push(&mut e, 1, b"abc", &a));
        assert!(w.push(&mut e, 2, b"def", &a));
        assert!(!w.push(&mut e, 3, b"ghi", &a));
        assert_eq!(w.used(), max);
        w.finish(&mut e, false);
        let r = ResOp::decode(&mut Dec::new(e.as_slice())).unwrap();
        let ResOp::ReadDir(NfsRes4::Ok(ok)) = r else {
            panic!("not a READDIR result: {r:?}");
        };
        assert_eq!(ok.entries.len(), 2);
        assert_eq!(ok.entries[1].name.0, b"def");
        assert_eq!(e.len() - 8, max);
    }

    #[test]
    fn dircount_is_a_hint_that_passes_the_first_entry() {
        let a = attrs();
        let mut e = Enc::new();
        let mut w = ReaddirWriter::begin(&mut e, Verifier4::default(), 1, 4096);
        assert!(w.push(&mut e, 1, b"a-long-name", &a));
        assert!(!w.push(&mut e, 2, b"b", &a));
        assert_eq!(w.entries(), 1);
        w.abandon(&mut e);
        assert!(e.is_empty());
    }
}
