//! COMPOUND (RFC 8881 §16.2): the arguments are read one operation at a
//! time, so a server allocates nothing for the operation count it was
//! sent and stops at the first operation that fails (§15.2, §16.2.3); the
//! result is written as it is produced, its status and count filled in at
//! the end.
//!
//! ```
//! use rnfsd_proto::nfs4::*;
//! use rnfsd_xdr::{Dec, Enc};
//!
//! let mut req = Enc::new();
//! CompoundHead { tag: b"t", minorversion: 1, nops: 1 }.encode(&mut req);
//! ArgOp::PutRootFh.encode(&mut req);
//!
//! let mut d = Dec::new(req.as_slice());
//! let head = CompoundHead::decode(&mut d, 64).unwrap();
//! let mut reply = Enc::new();
//! let mut w = CompoundWriter::begin(&mut reply, head.tag);
//! for op in head.ops(&mut d) {
//!     let res = match op.arg {
//!         Ok(ArgOp::PutRootFh) => ResOp::PutRootFh(Nfsstat4::Ok),
//!         Ok(a) => ResOp::error(a.opnum(), Nfsstat4::NotSupp),
//!         Err(_) => ResOp::error(op.opnum, Nfsstat4::BadXdr),
//!     };
//!     if w.push(&mut reply, &res) != Nfsstat4::Ok {
//!         break;
//!     }
//! }
//! assert_eq!(w.finish(&mut reply), Nfsstat4::Ok);
//! ```

use rnfsd_xdr::{Dec, Enc, Result, Xdr, XdrError};

use super::{
    ArgOp, Nfsstat4, ResOp, MAX_BITMAP_WORDS, MAX_NAME, NFS4_FHSIZE, OP_ACCESS, OP_CLOSE,
    OP_GETATTR, OP_GETFH, OP_ILLEGAL, OP_LOOKUP, OP_LOOKUPP, OP_OPEN_DOWNGRADE, OP_PUTFH,
    OP_PUTPUBFH, OP_PUTROOTFH, OP_READ, OP_READLINK, OP_RESTOREFH, OP_SAVEFH, OP_SEQUENCE,
};

/// COMPOUND4args up to its operations (RFC 8881 §16.2.1): the tag
/// (utf8str_cs, borrowed, to echo in the reply), the minor version, and
/// how many operations the client says follow. The count is not checked
/// against anything: the server compares it with the session's
/// ca_maxoperations and reads operations only as it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompoundHead<'a> {
    pub tag: &'a [u8],
    pub minorversion: u32,
    pub nops: u32,
}

impl<'a> CompoundHead<'a> {
    /// Decodes the head; a tag longer than `max_tag` is an error.
    #[inline(always)]
    pub fn decode(d: &mut Dec<'a>, max_tag: usize) -> Result<Self> {
        let tag = d.opaque(max_tag)?;
        let minorversion = d.u32()?;
        let nops = d.u32()?;
        Ok(CompoundHead {
            tag,
            minorversion,
            nops,
        })
    }

    /// Encodes the head; the caller then encodes `nops` operations.
    pub fn encode(&self, e: &mut Enc) {
        e.opaque(self.tag);
        e.u32(self.minorversion);
        e.u32(self.nops);
    }

    /// The operations that follow, decoded one at a time from `d`.
    pub fn ops<'d>(&self, d: &'d mut Dec<'a>) -> OpIter<'d, 'a> {
        OpIter {
            d,
            left: self.nops,
            done: false,
        }
    }
}

/// One operation as read from the COMPOUND: its number, and its arguments
/// or why they did not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedOp<'a> {
    /// The number read, or OP_ILLEGAL if the record ended before it.
    pub opnum: u32,
    pub arg: Result<ArgOp<'a>>,
}

/// Iterates over a COMPOUND's operations: at most `nops` of them, and
/// none after one that failed to decode (the reader has lost its place;
/// RFC 8881 §15.2 has the server answer that operation NFS4ERR_BADXDR and
/// stop). An unknown opnum decodes to `ArgOp::Illegal`, which also ends
/// the iteration, as its arguments cannot be skipped.
pub struct OpIter<'d, 'a> {
    d: &'d mut Dec<'a>,
    left: u32,
    done: bool,
}

impl<'d, 'a> OpIter<'d, 'a> {
    /// Operations the client said are still to come.
    pub fn left(&self) -> u32 {
        self.left
    }

    /// Offset in the record after the operations read so far.
    pub fn position(&self) -> usize {
        self.d.position()
    }
}

impl<'d, 'a> Iterator for OpIter<'d, 'a> {
    type Item = DecodedOp<'a>;

    fn next(&mut self) -> Option<DecodedOp<'a>> {
        if self.done || self.left == 0 {
            return None;
        }
        self.left -= 1;
        let opnum = match self.d.u32() {
            Ok(n) => n,
            Err(e) => {
                self.done = true;
                return Some(DecodedOp {
                    opnum: OP_ILLEGAL,
                    arg: Err(e),
                });
            }
        };
        let arg = ArgOp::decode(self.d, opnum);
        if matches!(arg, Err(_) | Ok(ArgOp::Illegal { .. })) {
            self.done = true;
        }
        Some(DecodedOp { opnum, arg })
    }
}

/// The bytes operation `opnum`'s arguments take at the start of `b` (a
/// multiple of 4), for operations whose arguments own nothing, read from
/// the slice without building them: what a router needing only the
/// operation numbers reads (building a PUTFH's or LOOKUP's arguments
/// allocates, a `Dec` per field costs several times this). `None`: not
/// one of these, decode it with [`ArgOp::decode`]; an error: they do not
/// fit. Lengths are bounded as the decoders bound them; fixed-size
/// arguments are stepped over whole (their fields are checked when the
/// operation is decoded to run).
#[inline]
pub fn plain_args_len(b: &[u8], opnum: u32) -> Option<Result<usize>> {
    // A counted item of `n` units of `unit` bytes, at most `max` units.
    let counted = |max: usize, unit: usize| -> Result<usize> {
        let w = b.get(..4).ok_or(XdrError::Short)?;
        let n = u32::from_be_bytes([w[0], w[1], w[2], w[3]]) as usize;
        if n > max {
            return Err(XdrError::TooLong);
        }
        let len = 4 + (n * unit).next_multiple_of(4);
        match len <= b.len() {
            true => Ok(len),
            false => Err(XdrError::Short),
        }
    };
    let fixed = |n: usize| match n <= b.len() {
        true => Ok(n),
        false => Err(XdrError::Short),
    };
    let r = match opnum {
        OP_GETFH | OP_LOOKUPP | OP_PUTROOTFH | OP_PUTPUBFH | OP_SAVEFH | OP_RESTOREFH
        | OP_READLINK => Ok(0),
        // sessionid4, sequenceid, slotid, highest_slotid, cachethis.
        OP_SEQUENCE => fixed(16 + 4 * 4),
        OP_PUTFH => counted(NFS4_FHSIZE, 1),
        OP_LOOKUP => counted(MAX_NAME, 1),
        // A bitmap4, bounded as `Bitmap4::decode` bounds it.
        OP_GETATTR => counted(MAX_BITMAP_WORDS, 4),
        OP_ACCESS => fixed(4),
        // stateid4 (16 bytes), offset, count.
        OP_READ => fixed(16 + 8 + 4),
        // seqid, stateid4.
        OP_CLOSE => fixed(4 + 16),
        // stateid4, seqid, share_access, share_deny.
        OP_OPEN_DOWNGRADE => fixed(16 + 3 * 4),
        _ => return None,
    };
    Some(r)
}

/// Writes COMPOUND4res (RFC 8881 §16.2.2) as operations complete: `begin`
/// writes a placeholder status, the tag and a placeholder count; `push`
/// appends each result; `finish` fills in the status of the last result
/// (NFS4_OK if none, §16.2.3) and the count.
#[derive(Debug)]
pub struct CompoundWriter {
    status_at: usize,
    count_at: usize,
    count: u32,
    status: Nfsstat4,
}

impl CompoundWriter {
    #[inline]
    pub fn begin(e: &mut Enc, tag: &[u8]) -> Self {
        let status_at = e.len();
        e.u32(Nfsstat4::Ok as u32);
        e.opaque(tag);
        let count_at = e.len();
        e.u32(0);
        CompoundWriter {
            status_at,
            count_at,
            count: 0,
            status: Nfsstat4::Ok,
        }
    }

    /// Appends one result; returns its status, on which the caller stops
    /// unless it is NFS4_OK.
    pub fn push(&mut self, e: &mut Enc, r: &ResOp) -> Nfsstat4 {
        r.encode(e);
        self.pushed(r.status())
    }

    /// Counts a result the caller wrote itself (with `ReadWriter` or
    /// `ReaddirWriter`), with its status.
    #[inline]
    pub fn pushed(&mut self, status: Nfsstat4) -> Nfsstat4 {
        self.count += 1;
        self.status = status;
        status
    }

    /// Takes back the last result counted (the caller truncated what it
    /// wrote, to answer that operation otherwise: NFS4ERR_REP_TOO_BIG).
    pub fn undo_last(&mut self) {
        debug_assert!(self.count > 0);
        self.count = self.count.saturating_sub(1);
    }

    /// Results so far.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The last result's status (NFS4_OK before any).
    pub fn status(&self) -> Nfsstat4 {
        self.status
    }

    /// Fills in the status and count; returns the status.
    #[inline]
    pub fn finish(self, e: &mut Enc) -> Nfsstat4 {
        let s = self.status;
        self.finish_with(e, s)
    }

    /// Fills in the count and `status` (for a COMPOUND refused as a whole,
    /// such as NFS4ERR_MINOR_VERS_MISMATCH with no results, §16.2.3).
    #[inline]
    pub fn finish_with(self, e: &mut Enc, status: Nfsstat4) -> Nfsstat4 {
        e.patch_u32(self.status_at, status as u32);
        e.patch_u32(self.count_at, self.count);
        status
    }
}

/// A whole COMPOUND4res (RFC 8881 §16.2), owned: what a client (or a
/// test) decodes.
pub type CompoundRes = CompoundResOf<ResOp>;

/// A whole compound result, fore channel (`CompoundRes`) or back
/// (`CbCompoundRes`, §19.2): its status, tag and results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompoundResOf<R> {
    pub status: Nfsstat4,
    pub tag: Vec<u8>,
    pub results: Vec<R>,
}

impl<R: Xdr> CompoundResOf<R> {
    pub fn encode(&self, e: &mut Enc) {
        self.status.encode(e);
        e.opaque(&self.tag);
        e.u32(self.results.len() as u32);
        for r in &self.results {
            r.encode(e);
        }
    }

    /// Decodes at most `max_ops` results (the caller knows how many
    /// operations it sent) and a tag of at most `max_tag` bytes.
    pub fn decode(d: &mut Dec<'_>, max_tag: usize, max_ops: usize) -> Result<Self> {
        let status = Nfsstat4::decode(d)?;
        let tag = d.opaque(max_tag)?.to_vec();
        // A result is at least its resop and status.
        let n = d.array_len(max_ops, 8)?;
        let mut results = Vec::with_capacity(n);
        for _ in 0..n {
            results.push(R::decode(d)?);
        }
        Ok(CompoundResOf {
            status,
            tag,
            results,
        })
    }
}

/// Encodes a whole COMPOUND4args (what a client sends).
pub fn encode_compound(e: &mut Enc, tag: &[u8], minorversion: u32, ops: &[ArgOp<'_>]) {
    CompoundHead {
        tag,
        minorversion,
        nops: ops.len() as u32,
    }
    .encode(e);
    for op in ops {
        op.encode(e);
    }
}

/// Decodes a whole COMPOUND4args into a vector of at most `max_ops`
/// operations (for tests and tools; a server iterates with
/// `CompoundHead::ops` instead). Any operation failing to decode, or an
/// unknown one, fails the whole.
pub fn decode_compound<'a>(
    d: &mut Dec<'a>,
    max_tag: usize,
    max_ops: usize,
) -> Result<(CompoundHead<'a>, Vec<ArgOp<'a>>)> {
    let head = CompoundHead::decode(d, max_tag)?;
    if head.nops as usize > max_ops {
        return Err(XdrError::TooLong);
    }
    let mut ops = Vec::new();
    for op in head.ops(d) {
        match op.arg? {
            ArgOp::Illegal { .. } => return Err(XdrError::BadDiscriminant),
            a => ops.push(a),
        }
    }
    if ops.len() != head.nops as usize {
        return Err(XdrError::Short);
    }
    Ok((head, ops))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nfs4::{NfsRes4, OP_PUTROOTFH, OP_SEQUENCE};

    #[test]
    fn a_huge_op_count_allocates_nothing_and_ends_with_the_bytes() {
        let mut e = Enc::new();
        CompoundHead {
            tag: b"",
            minorversion: 1,
            nops: u32::MAX,
        }
        .encode(&mut e);
        ArgOp::PutRootFh.encode(&mut e);
        let mut d = Dec::new(e.as_slice());
        let head = CompoundHead::decode(&mut d, 0).unwrap();
        let ops: Vec<_> = head.ops(&mut d).collect();
        assert_eq!(ops.len(), 2);
        assert_eq!(ops[0].arg, Ok(ArgOp::PutRootFh));
        assert_eq!(
            (ops[1].opnum, &ops[1].arg),
            (OP_ILLEGAL, &Err(XdrError::Short))
        );
    }

    #[test]
    fn long_tag_is_refused() {
        let mut e = Enc::new();
        CompoundHead {
            tag: b"abcdef",
            minorversion: 1,
            nops: 0,
        }
        .encode(&mut e);
        assert_eq!(
            CompoundHead::decode(&mut Dec::new(e.as_slice()), 5),
            Err(XdrError::TooLong)
        );
    }

    #[test]
    fn writer_patches_status_and_count() {
        let mut e = Enc::new();
        let mut w = CompoundWriter::begin(&mut e, b"tag");
        w.push(&mut e, &ResOp::PutRootFh(Nfsstat4::Ok));
        let s = w.push(&mut e, &ResOp::error(OP_SEQUENCE, Nfsstat4::BadSession));
        assert_eq!(s, Nfsstat4::BadSession);
        assert_eq!(w.finish(&mut e), Nfsstat4::BadSession);
        let r = CompoundRes::decode(&mut Dec::new(e.as_slice()), 16, 8).unwrap();
        assert_eq!(
            r,
            CompoundRes {
                status: Nfsstat4::BadSession,
                tag: b"tag".to_vec(),
                results: vec![
                    ResOp::PutRootFh(Nfsstat4::Ok),
                    ResOp::Sequence(NfsRes4::Fail(Nfsstat4::BadSession)),
                ],
            }
        );
        assert_eq!(r.results[0].opnum(), OP_PUTROOTFH);
    }

    #[test]
    fn minor_version_mismatch_has_no_results() {
        let mut e = Enc::new();
        let w = CompoundWriter::begin(&mut e, b"");
        w.finish_with(&mut e, Nfsstat4::MinorVersMismatch);
        assert_eq!(e.as_slice(), [0, 0, 0x27, 0x25, 0, 0, 0, 0, 0, 0, 0, 0]);
    }
}
