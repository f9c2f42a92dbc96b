//! NFSv4.1 COMPOUND as a server reads it (RFC 8881 §16.2): the head, then
//! each operation until one fails to decode or is unknown. Decoding never
//! panics, never yields more operations than the count nor any after a
//! failed one, and every operation that decodes re-encodes to the bytes it
//! used and decodes back to itself. The same bytes also go to the decoders
//! of the other direction (COMPOUND4res, as a client reads it) and of the
//! callback program (CB_COMPOUND arguments and results).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnfsd_proto::nfs4::cb::{CbCompoundArgs, CbCompoundRes};
use rnfsd_proto::nfs4::{plain_args_len, ArgOp, CompoundHead, CompoundRes, NFS4_OPAQUE_LIMIT};
use rnfsd_xdr::{Dec, Enc};

/// Bound on decoded results and callback operations (ours, for the owned
/// decoders only; the server's reader has none to apply).
const MAX_OPS: usize = 64;

fuzz_target!(|data: &[u8]| {
    compound(data);
    let _ = CompoundRes::decode(&mut Dec::new(data), NFS4_OPAQUE_LIMIT, MAX_OPS);
    if let Ok(a) = CbCompoundArgs::decode(&mut Dec::new(data), NFS4_OPAQUE_LIMIT, MAX_OPS) {
        let mut e = Enc::new();
        a.encode(&mut e);
        let back = CbCompoundArgs::decode(&mut Dec::new(e.as_slice()), NFS4_OPAQUE_LIMIT, MAX_OPS);
        assert_eq!(back.as_ref(), Ok(&a));
    }
    if let Ok(r) = CbCompoundRes::decode(&mut Dec::new(data), NFS4_OPAQUE_LIMIT, MAX_OPS) {
        let mut e = Enc::new();
        r.encode(&mut e);
        let back = CbCompoundRes::decode(&mut Dec::new(e.as_slice()), NFS4_OPAQUE_LIMIT, MAX_OPS);
        assert_eq!(back.as_ref(), Ok(&r));
    }
});

fn compound(data: &[u8]) {
    let mut d = Dec::new(data);
    let Ok(head) = CompoundHead::decode(&mut d, NFS4_OPAQUE_LIMIT) else {
        return;
    };
    assert!(head.tag.len() <= NFS4_OPAQUE_LIMIT);
    let mut seen = 0u64;
    let mut stopped = false;
    let mut ops = head.ops(&mut d);
    let mut start = ops.position();
    while let Some(op) = ops.next() {
        assert!(!stopped, "an operation after a failed or unknown one");
        seen += 1;
        let end = ops.position();
        match op.arg {
            Ok(ArgOp::Illegal { opnum }) => {
                assert_eq!(opnum, op.opnum);
                stopped = true;
            }
            Ok(a) => {
                assert_eq!(a.opnum(), op.opnum);
                let mut e = Enc::new();
                a.encode(&mut e);
                assert_eq!(e.len(), end - start, "{a:?} re-encodes to another size");
                let mut d2 = Dec::new(e.as_slice());
                let n = d2.u32().expect("own opnum");
                assert_eq!(ArgOp::decode(&mut d2, n).as_ref(), Ok(&a));
                assert_eq!(d2.remaining(), 0);
                // Skipping the arguments without building them (how the
                // server routes a compound) reads exactly as far.
                if let Some(r) = plain_args_len(&data[start + 4..], op.opnum) {
                    assert_eq!(r, Ok(end - start - 4), "{a:?}");
                }
            }
            Err(_) => stopped = true,
        }
        start = end;
    }
    assert!(seen <= u64::from(head.nops));
    assert!(ops.left() <= head.nops);
}
