//! A session COMPOUND sent many times over (a load generator's GETATTR of
//! the same handle): its operations after SEQUENCE encoded once, and its
//! reply checked without building typed results.
//!
//! [`PreparedOps`] holds the operations' bytes; each call writes the
//! COMPOUND head and the SEQUENCE of its slot (the only parts that change)
//! and copies them after it: the same bytes [`encode_compound`] writes
//! for SEQUENCE plus the operations.
//!
//! [`check_compound_res`] walks COMPOUND4res (RFC 8881 §16.2.2) with the
//! bounds [`CompoundRes::decode`] applies and accepts exactly the replies
//! it accepts, with the same status and results, but allocates nothing:
//! results of fixed size (SEQUENCE, PUTFH, ACCESS, ...) are decoded by
//! their own typed decoders (which own nothing), GETATTR's fattr4 is read
//! as a bitmap and a bounded slice of values, and any other operation's
//! result is decoded with [`ResOp::decode`] and dropped. With `attrs`, a
//! GETATTR's values are also read attribute by attribute as
//! [`Attrs4::decode`] reads them ([`super::attrs::check_vals`]), as an
//! NFSv3 client's decode reads every field of fattr3.

use rnfsd_xdr::{Dec, Enc, Xdr};

use super::attrs::{check_vals, AttrLayout};
use super::*;

/// A session COMPOUND's operations after SEQUENCE, encoded once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedOps {
    /// The operations' XDR, back to back.
    bytes: Vec<u8>,
    /// The operation numbers of the whole COMPOUND, SEQUENCE first: what
    /// each result's resop must be.
    opnums: Vec<u32>,
    /// The layout of the first GETATTR's attributes, for checking a reply
    /// that returns just those ([`check_prepared_res`]).
    layout: Option<AttrLayout>,
}

impl PreparedOps {
    /// `ops` encoded as [`encode_compound`] encodes them.
    pub fn new(ops: &[ArgOp<'_>]) -> Self {
        let mut e = Enc::new();
        let mut opnums = Vec::with_capacity(ops.len() + 1);
        opnums.push(OP_SEQUENCE);
        let mut layout = None;
        for op in ops {
            op.encode(&mut e);
            opnums.push(op.opnum());
            if let (ArgOp::GetAttr(a), None) = (op, &layout) {
                layout = AttrLayout::new(&a.attr_request);
            }
        }
        PreparedOps {
            bytes: e.into_vec(),
            opnums,
            layout,
        }
    }

    /// The operations' bytes (SEQUENCE not included).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Operation numbers of the COMPOUND as sent: SEQUENCE, then these.
    pub fn opnums(&self) -> &[u32] {
        &self.opnums
    }

    /// Operations in the COMPOUND, SEQUENCE included.
    pub fn nops(&self) -> usize {
        self.opnums.len()
    }
}

/// Writes COMPOUND4args: the head, `seq`, then `p`'s operations.
pub(crate) fn encode_prepared(
    e: &mut Enc,
    tag: &[u8],
    minorversion: u32,
    seq: &Sequence4Args,
    p: &PreparedOps,
) {
    CompoundHead {
        tag,
        minorversion,
        nops: p.nops() as u32,
    }
    .encode(e);
    // SEQUENCE4args is written as one fixed-size record.
    e.u32(OP_SEQUENCE);
    seq.encode(e);
    e.raw(&p.bytes);
}

/// What [`check_compound_res`] found in a reply that decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyCheck {
    /// COMPOUND4res's status.
    pub status: Nfsstat4,
    /// Results in the reply.
    pub results: usize,
    /// The first result whose status is not NFS4_OK: its resop and status.
    pub first_failed: Option<(u32, Nfsstat4)>,
    /// Some result's resop is not the operation sent in its place.
    pub out_of_order: bool,
    /// A GETATTR's values are not the attributes its mask names (checked
    /// only when asked for; see [`check_compound_res`]).
    pub bad_attrs: bool,
    /// SEQUENCE's result when it came first and succeeded.
    pub sequence: Option<Sequence4ResOk>,
}

impl ReplyCheck {
    /// Every operation sent has a result, in order, each NFS4_OK, the
    /// COMPOUND's status NFS4_OK, and the attributes (if checked) well
    /// formed.
    pub fn all_ok(&self, sent: usize) -> bool {
        self.status == Nfsstat4::Ok
            && self.first_failed.is_none()
            && self.results == sent
            && !self.out_of_order
            && !self.bad_attrs
    }
}

/// Checks COMPOUND4res in `body` for a COMPOUND of `sent` operations:
/// accepts exactly what [`decode_compound_res`] accepts (at most
/// `sent.len()` results, tags of at most NFS4_OPAQUE_LIMIT bytes, the
/// proto crate's bounds in each result, nothing after), allocating
/// nothing for the operations it knows. With `attrs`, every successful
/// GETATTR's values are read as [`Attrs4::decode`] reads them; a failure
/// there sets `bad_attrs` rather than refusing the reply, so the slot
/// table's view of the reply is the typed decoder's.
pub fn check_compound_res(
    body: &[u8],
    sent: &[u32],
    attrs: bool,
) -> Result<ReplyCheck, ClientError> {
    Ok(walk(body, sent, attrs, None)?)
}

/// [`check_compound_res`] for a reply to `p`: a GETATTR's values that are
/// the attributes `p`'s GETATTR asked for are read by their layout,
/// worked out once ([`AttrLayout`]), any others as `check_compound_res`
/// reads them; the same replies accepted, the same [`ReplyCheck`].
pub fn check_prepared_res(
    body: &[u8],
    p: &PreparedOps,
    attrs: bool,
) -> Result<ReplyCheck, ClientError> {
    Ok(walk(body, &p.opnums, attrs, p.layout.as_ref())?)
}

/// `Nfsstat4::decode`, NFS4_OK first (nearly every status read).
fn stat4(d: &mut Dec<'_>) -> rnfsd_xdr::Result<Nfsstat4> {
    match d.u32()? {
        0 => Ok(Nfsstat4::Ok),
        v => Nfsstat4::from_u32(v).ok_or(rnfsd_xdr::XdrError::BadDiscriminant),
    }
}

fn walk(
    body: &[u8],
    sent: &[u32],
    attrs: bool,
    layout: Option<&AttrLayout>,
) -> rnfsd_xdr::Result<ReplyCheck> {
    let mut d = Dec::new(body);
    let status = stat4(&mut d)?;
    d.opaque(NFS4_OPAQUE_LIMIT)?;
    let n = d.array_len(sent.len(), 8)?;
    let mut c = ReplyCheck {
        status,
        results: n,
        first_failed: None,
        out_of_order: false,
        bad_attrs: false,
        sequence: None,
    };
    for i in 0..n {
        let at = d.clone();
        let opnum = d.u32()?;
        let st = match opnum {
            OP_SEQUENCE => {
                let st = stat4(&mut d)?;
                if st == Nfsstat4::Ok {
                    // One fixed-size record, read whole.
                    let ok = Sequence4ResOk::decode(&mut d)?;
                    if i == 0 {
                        c.sequence = Some(ok);
                    }
                }
                st
            }
            OP_PUTFH | OP_PUTROOTFH | OP_LOOKUP | OP_SAVEFH | OP_RESTOREFH => stat4(&mut d)?,
            OP_ACCESS => Access4Res::decode(&mut d)?.status(),
            OP_GETATTR => {
                // Fattr4::decode's reads, without copying the values.
                let st = stat4(&mut d)?;
                if st == Nfsstat4::Ok {
                    // The mask asked for is recognised by its bytes (the
                    // bytes Bitmap4::decode reads as that mask), any
                    // other decoded.
                    let (laid, mask) = match layout.filter(|l| d.rest().starts_with(l.mask_xdr())) {
                        Some(l) => {
                            d.opaque_fixed(l.mask_xdr().len())?;
                            (Some(l), *l.mask())
                        }
                        None => {
                            let m = Bitmap4::decode(&mut d)?;
                            (layout.filter(|l| *l.mask() == m), m)
                        }
                    };
                    let vals = d.opaque(MAX_ATTRLIST)?;
                    let good = || match laid {
                        Some(l) => l.check(vals),
                        None => check_vals(&mask, vals).is_ok(),
                    };
                    if attrs && !good() {
                        c.bad_attrs = true;
                    }
                }
                st
            }
            _ => {
                // Decoded whole from its resop, as CompoundRes::decode
                // does, then stepped over.
                d = at;
                let r = ResOp::decode(&mut d)?;
                r.status()
            }
        };
        if sent.get(i) != Some(&opnum) {
            c.out_of_order = true;
        }
        if st != Nfsstat4::Ok && c.first_failed.is_none() {
            c.first_failed = Some((opnum, st));
        }
    }
    d.finish()?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fh(n: u8) -> NfsFh4 {
        NfsFh4(vec![n; 28])
    }

    fn seq_args(seqid: u32) -> Sequence4Args {
        Sequence4Args {
            sessionid: SessionId4([7; 16]),
            sequenceid: seqid,
            slotid: 3,
            highest_slotid: 9,
            cachethis: false,
        }
    }

    fn mask() -> Bitmap4 {
        Bitmap4::from_bits(&[
            FATTR4_TYPE,
            FATTR4_CHANGE,
            FATTR4_SIZE,
            FATTR4_FSID,
            FATTR4_MODE,
            FATTR4_OWNER,
            FATTR4_RAWDEV,
            FATTR4_TIME_MODIFY,
        ])
        .unwrap()
    }

    /// Values for `mask()`, in bit order.
    fn vals(owner: &[u8]) -> Vec<u8> {
        let mut e = Enc::new();
        e.u32(1); // type
        e.u64(42); // change
        e.u64(8); // size
        e.u64(1);
        e.u64(2); // fsid
        e.u32(0o644); // mode
        e.opaque(owner); // owner
        e.u32(0);
        e.u32(0); // rawdev
        e.u64(1_700_000_000);
        e.u32(5); // time_modify
        e.into_vec()
    }

    #[test]
    fn prepared_bytes_are_the_typed_encoders() {
        let sets: Vec<Vec<ArgOp<'static>>> = vec![
            vec![
                ArgOp::PutFh(PutFh4Args { object: fh(1) }),
                ArgOp::GetAttr(GetAttr4Args {
                    attr_request: mask(),
                }),
            ],
            vec![
                ArgOp::PutFh(PutFh4Args {
                    object: NfsFh4(vec![9; 5]),
                }),
                ArgOp::Access(Access4Args { access: 0x3f }),
            ],
            vec![
                ArgOp::PutRootFh,
                ArgOp::Lookup(Lookup4Args {
                    objname: Component4(b"abc".to_vec()),
                }),
                ArgOp::GetFh,
            ],
            vec![],
        ];
        for ops in sets {
            let p = PreparedOps::new(&ops);
            for (tag, minor, seqid, cachethis) in [
                (&b""[..], 1, 1, false),
                (&b"rnfsd-client"[..], 2, u32::MAX, true),
            ] {
                let seq = Sequence4Args {
                    cachethis,
                    ..seq_args(seqid)
                };
                let mut fast = Enc::new();
                encode_prepared(&mut fast, tag, minor, &seq, &p);
                let mut all = vec![ArgOp::Sequence(seq)];
                all.extend(ops.iter().cloned());
                let mut typed = Enc::new();
                encode_compound(&mut typed, tag, minor, &all);
                assert_eq!(fast.as_slice(), typed.as_slice());
                let ns: Vec<u32> = all.iter().map(|o| o.opnum()).collect();
                assert_eq!(p.opnums(), &ns[..]);
                assert_eq!(p.nops(), all.len());
            }
        }
    }

    fn seq_ok() -> ResOp {
        ResOp::Sequence(NfsRes4::Ok(Sequence4ResOk {
            sessionid: SessionId4([7; 16]),
            sequenceid: 5,
            slotid: 3,
            highest_slotid: 9,
            target_highest_slotid: 15,
            status_flags: 0x40,
        }))
    }

    fn getattr_ok(v: Vec<u8>) -> ResOp {
        ResOp::GetAttr(NfsRes4::Ok(Fattr4 {
            attrmask: mask(),
            attr_vals: v,
        }))
    }

    fn reply(status: Nfsstat4, results: Vec<ResOp>) -> Vec<u8> {
        let mut e = Enc::new();
        CompoundRes {
            status,
            tag: b"rnfsd-client".to_vec(),
            results,
        }
        .encode(&mut e);
        e.into_vec()
    }

    /// Replies to check against the typed decoder, with what was sent.
    fn cases() -> Vec<(Vec<u8>, Vec<u32>)> {
        let ga = vec![OP_SEQUENCE, OP_PUTFH, OP_GETATTR];
        let lk = vec![OP_SEQUENCE, OP_PUTFH, OP_LOOKUP, OP_GETFH, OP_GETATTR];
        let ok = Nfsstat4::Ok;
        vec![
            (
                reply(ok, vec![seq_ok(), ResOp::PutFh(ok), getattr_ok(vals(b"0"))]),
                ga.clone(),
            ),
            (
                reply(
                    ok,
                    vec![seq_ok(), ResOp::PutFh(ok), getattr_ok(vals(b"owner@x"))],
                ),
                ga.clone(),
            ),
            // Values that are not the mask's attributes: decodes, bad_attrs.
            (
                reply(
                    ok,
                    vec![seq_ok(), ResOp::PutFh(ok), getattr_ok(vec![0; 12])],
                ),
                ga.clone(),
            ),
            (
                reply(
                    Nfsstat4::Stale,
                    vec![seq_ok(), ResOp::PutFh(Nfsstat4::Stale)],
                ),
                ga.clone(),
            ),
            (
                reply(
                    Nfsstat4::Access,
                    vec![
                        seq_ok(),
                        ResOp::PutFh(ok),
                        ResOp::GetAttr(NfsRes4::Fail(Nfsstat4::Access)),
                    ],
                ),
                ga.clone(),
            ),
            (
                reply(
                    Nfsstat4::BadSession,
                    vec![ResOp::Sequence(NfsRes4::Fail(Nfsstat4::BadSession))],
                ),
                ga.clone(),
            ),
            // Status OK with fewer results than sent.
            (reply(ok, vec![seq_ok(), ResOp::PutFh(ok)]), ga.clone()),
            // Results not in the order sent.
            (
                reply(ok, vec![seq_ok(), getattr_ok(vals(b"0")), ResOp::PutFh(ok)]),
                ga.clone(),
            ),
            (reply(ok, vec![]), ga.clone()),
            (
                reply(
                    Nfsstat4::OpIllegal,
                    vec![ResOp::Illegal(Nfsstat4::OpIllegal)],
                ),
                ga.clone(),
            ),
            (
                reply(
                    ok,
                    vec![
                        seq_ok(),
                        ResOp::PutFh(ok),
                        ResOp::Lookup(ok),
                        ResOp::GetFh(NfsRes4::Ok(fh(3))),
                        getattr_ok(vals(b"1000")),
                    ],
                ),
                lk.clone(),
            ),
            (
                reply(
                    ok,
                    vec![
                        seq_ok(),
                        ResOp::PutFh(ok),
                        ResOp::Access(NfsRes4::Ok(Access4ResOk {
                            supported: 0x3f,
                            access: 0x1f,
                        })),
                    ],
                ),
                vec![OP_SEQUENCE, OP_PUTFH, OP_ACCESS],
            ),
        ]
    }

    /// The typed decoder's view, in `ReplyCheck`'s terms.
    fn typed(body: &[u8], sent: &[u32], attrs: bool) -> Option<ReplyCheck> {
        let r = decode_compound_res(body, sent.len()).ok()?;
        let sequence = match r.results.first() {
            Some(ResOp::Sequence(NfsRes4::Ok(ok))) => Some(*ok),
            _ => None,
        };
        Some(ReplyCheck {
            status: r.status,
            results: r.results.len(),
            first_failed: r
                .results
                .iter()
                .find(|x| x.status() != Nfsstat4::Ok)
                .map(|x| (x.opnum(), x.status())),
            out_of_order: r
                .results
                .iter()
                .enumerate()
                .any(|(i, x)| sent.get(i) != Some(&x.opnum())),
            bad_attrs: attrs
                && r.results.iter().any(|x| match x {
                    ResOp::GetAttr(NfsRes4::Ok(f)) => Attrs4::decode(f).is_err(),
                    _ => false,
                }),
            sequence,
        })
    }

    fn same(body: &[u8], sent: &[u32]) {
        // The layout of the mask the replies carry, and of another one.
        let layouts = [AttrLayout::new(&mask()), AttrLayout::new(&Bitmap4::new())];
        for attrs in [false, true] {
            let want = typed(body, sent, attrs);
            let fast = check_compound_res(body, sent, attrs).ok();
            assert_eq!(fast, want, "{body:?} attrs {attrs}");
            for l in &layouts {
                let laid = walk(body, sent, attrs, l.as_ref()).ok();
                assert_eq!(laid, want, "{body:?} attrs {attrs} layout {l:?}");
            }
        }
    }

    #[test]
    fn the_check_accepts_and_reports_what_the_typed_decoder_does() {
        let mut oks = 0;
        for (body, sent) in cases() {
            if typed(&body, &sent, true).is_some_and(|c| c.all_ok(sent.len())) {
                oks += 1;
            }
            same(&body, &sent);
            // Every truncation, and bytes after the end.
            for n in 0..body.len() {
                same(&body[..n], &sent);
            }
            let mut long = body.clone();
            long.extend_from_slice(&[0; 4]);
            same(&long, &sent);
            // Fewer operations sent than results.
            same(&body, &sent[..sent.len().saturating_sub(1)]);
            // Every word replaced by values that hit the bounds and
            // discriminants: statuses, opnums, lengths, bools.
            for w in (0..body.len()).step_by(4) {
                let orig = u32::from_be_bytes(body[w..w + 4].try_into().unwrap());
                for v in [
                    0,
                    1,
                    2,
                    3,
                    orig.wrapping_add(1),
                    orig.wrapping_sub(1),
                    orig.wrapping_add(4),
                    OP_GETATTR,
                    OP_PUTFH,
                    OP_READ,
                    OP_ILLEGAL,
                    10_000,
                    NFS4_FHSIZE as u32 + 1,
                    MAX_ATTRLIST as u32 + 1,
                    u32::MAX,
                ] {
                    let mut b = body.clone();
                    b[w..w + 4].copy_from_slice(&v.to_be_bytes());
                    same(&b, &sent);
                }
            }
        }
        // The first two replies (and the LOOKUP and ACCESS ones) are the
        // good ones.
        assert_eq!(oks, 4);
    }

    #[test]
    fn a_good_reply_reports_sequence_and_nothing_failed() {
        let (body, sent) = &cases()[0];
        let c = check_compound_res(body, sent, true).unwrap();
        assert!(c.all_ok(3));
        assert!(!c.all_ok(4));
        assert_eq!(c.sequence.map(|s| s.target_highest_slotid), Some(15));
        let (body, sent) = &cases()[2];
        let c = check_compound_res(body, sent, true).unwrap();
        assert!(c.bad_attrs && !c.all_ok(3));
        assert!(!check_compound_res(body, sent, false).unwrap().bad_attrs);
        let (body, sent) = &cases()[3];
        let c = check_compound_res(body, sent, true).unwrap();
        assert_eq!(c.first_failed, Some((OP_PUTFH, Nfsstat4::Stale)));
    }
}
