//! No NFSv4.1 decoder panics or over-reads on arbitrary bytes, and
//! whatever decodes re-encodes to the bytes it used and decodes back to
//! itself.

use proptest::collection::vec;
use proptest::prelude::*;
use rnfsd_proto::nfs4::cb::*;
use rnfsd_proto::nfs4::*;
use rnfsd_xdr::{from_slice, to_vec, Dec, Enc, Xdr};

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..=max)
}

// Replaying a failure: see nfs4_roundtrip.rs (the saved cases go to
// tests/nfs4_random.proptest-regressions).
proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Arbitrary bytes after a valid opnum: decoding never panics, and
    /// whatever decodes re-encodes to the bytes' length and decodes back
    /// to itself.
    #[test]
    fn arguments_from_random_bytes(opnum in 0u32..=60, body in bytes(160)) {
        let mut d = Dec::new(&body);
        if let Ok(op) = ArgOp::decode(&mut d, opnum) {
            let used = body.len() - d.remaining();
            let mut e = Enc::new();
            op.encode(&mut e);
            prop_assert_eq!(e.len(), 4 + used);
            let mut d2 = Dec::new(&e.as_slice()[4..]);
            prop_assert_eq!(ArgOp::decode(&mut d2, opnum), Ok(op));
        }
    }

    #[test]
    fn results_from_random_bytes(resop in 0u32..=60, body in bytes(160)) {
        let mut b = resop.to_be_bytes().to_vec();
        b.extend_from_slice(&body);
        let mut d = Dec::new(&b);
        if let Ok(r) = ResOp::decode(&mut d) {
            let e = to_vec(&r);
            prop_assert_eq!(e.len(), b.len() - d.remaining());
            prop_assert_eq!(from_slice::<ResOp>(&e), Ok(r));
        }
    }

    /// A COMPOUND head then operations with plausible numbers and random
    /// bodies: the reader stops at the first failure, never panics, and
    /// never yields more than the count.
    #[test]
    fn compound_from_random_bytes(nops in 0u32..6, parts in vec((3u32..=58, bytes(40)), 0..6), tail in bytes(16)) {
        let mut b = vec![0, 0, 0, 1, b't', 0, 0, 0, 0, 0, 0, 1];
        b.extend_from_slice(&nops.to_be_bytes());
        for (op, body) in &parts {
            b.extend_from_slice(&op.to_be_bytes());
            b.extend_from_slice(body);
        }
        b.extend_from_slice(&tail);
        let mut d = Dec::new(&b);
        let head = CompoundHead::decode(&mut d, 8).unwrap();
        let mut seen = 0;
        let mut failed = false;
        for op in head.ops(&mut d) {
            prop_assert!(!failed, "an operation after a failed one");
            seen += 1;
            failed = op.arg.is_err();
        }
        prop_assert!(seen <= nops);
        // And on the raw bytes alone.
        let raw = body_of(&parts);
        let mut d = Dec::new(&raw);
        if let Ok(h) = CompoundHead::decode(&mut d, 64) {
            prop_assert!(h.ops(&mut d).count() <= h.nops as usize);
        }
    }

    #[test]
    fn callbacks_from_random_bytes(opnum in 0u32..=16, body in bytes(120)) {
        let mut d = Dec::new(&body);
        if let Ok(a) = CbArgOp::decode(&mut d, opnum) {
            let mut e = Enc::new();
            a.encode(&mut e);
            prop_assert_eq!(e.len(), 4 + body.len() - d.remaining());
        }
        let mut b = opnum.to_be_bytes().to_vec();
        b.extend_from_slice(&body);
        if let Ok(r) = CbResOp::decode(&mut Dec::new(&b)) {
            prop_assert_eq!(from_slice::<CbResOp>(&to_vec(&r)), Ok(r));
        }
        let _ = CbCompoundArgs::decode(&mut Dec::new(&body), 64, 8);
        let _ = CbCompoundRes::decode(&mut Dec::new(&body), 64, 8);
        let _ = CompoundRes::decode(&mut Dec::new(&body), 64, 8);
    }
}

fn body_of(parts: &[(u32, Vec<u8>)]) -> Vec<u8> {
    parts.iter().flat_map(|(_, b)| b.iter().copied()).collect()
}
