//! Every NFSv4.1 operation's arguments and results, the basic types, and
//! the callback operations round-trip encode -> decode, alone and inside
//! a COMPOUND read one operation at a time.

mod nfs4_strategies;

use nfs4_strategies::res::*;
use nfs4_strategies::*;
use proptest::collection::vec;
use proptest::prelude::*;
use rnfsd_proto::nfs4::cb::*;
use rnfsd_proto::nfs4::*;
use rnfsd_xdr::{from_slice, to_vec, Dec, Enc, Xdr};

/// Encode, decode the whole buffer back, compare; a buffer one byte short
/// fails.
fn round_trip<T: Xdr + PartialEq + std::fmt::Debug>(v: &T) -> Result<(), TestCaseError> {
    let b = to_vec(v);
    prop_assert_eq!(b.len() % 4, 0);
    let back: T = from_slice(&b).map_err(|e| TestCaseError::fail(format!("{e}: {v:?}")))?;
    prop_assert_eq!(&back, v);
    if !b.is_empty() {
        prop_assert!(from_slice::<T>(&b[..b.len() - 1]).is_err());
    }
    Ok(())
}

/// The same for an operation's arguments, read as a server does: number,
/// then `ArgOp::decode`.
fn arg_round_trip(op: &ArgOp<'_>) -> Result<(), TestCaseError> {
    let mut e = Enc::new();
    op.encode(&mut e);
    let b = e.as_slice();
    prop_assert_eq!(b.len() % 4, 0);
    let mut d = Dec::new(b);
    let n = d.u32().map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(n, op.opnum());
    let back = ArgOp::decode(&mut d, n).map_err(|e| TestCaseError::fail(format!("{e}: {op:?}")))?;
    prop_assert_eq!(&back, op);
    prop_assert_eq!(d.remaining(), 0);
    // One byte short: the arguments (or the number) no longer decode.
    let mut d = Dec::new(&b[..b.len() - 1]);
    prop_assert!(d.u32().and_then(|n| ArgOp::decode(&mut d, n)).is_err());
    // Skipping the arguments without building them reads exactly as far.
    if let Some(r) = plain_args_len(&b[4..], n) {
        prop_assert!(r.is_ok(), "{op:?}");
        prop_assert_eq!(r.ok(), Some(b.len() - 4));
        if b.len() > 4 {
            prop_assert!(plain_args_len(&b[4..b.len() - 1], n).is_some_and(|r| r.is_err()));
        }
    }
    Ok(())
}

// Replaying a failure (proptest 1.12): it prints the minimal failing input
// and saves the case in tests/nfs4_roundtrip.proptest-regressions, which
// every later run tries first. PROPTEST_RNG_SEED=<u64> fixes the run's
// seed; PROPTEST_CASES=<n> overrides `with_cases` below.
proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arguments_round_trip(op in arg_op()) {
        arg_round_trip(&op)?;
    }

    #[test]
    fn results_round_trip(r in res_op()) {
        round_trip(&r)?;
        let s = r.status();
        prop_assert_eq!(ResOp::error(r.opnum(), s).opnum(), r.opnum());
    }

    #[test]
    fn callback_operations_round_trip(a in cb_arg_op(), r in cb_res_op()) {
        let mut e = Enc::new();
        a.encode(&mut e);
        let mut d = Dec::new(e.as_slice());
        let n = d.u32().unwrap();
        prop_assert_eq!(CbArgOp::decode(&mut d, n), Ok(a.clone()));
        prop_assert_eq!(d.remaining(), 0);
        round_trip(&r)?;
        let args = CbCompoundArgs { tag: b"cb".to_vec(), minorversion: 1, callback_ident: 0, ops: vec![a] };
        let mut e = Enc::new();
        args.encode(&mut e);
        prop_assert_eq!(CbCompoundArgs::decode(&mut Dec::new(e.as_slice()), 8, 1), Ok(args));
        let res = CbCompoundRes { status: r.status(), tag: vec![], results: vec![r] };
        let mut e = Enc::new();
        res.encode(&mut e);
        prop_assert_eq!(CbCompoundRes::decode(&mut Dec::new(e.as_slice()), 8, 1), Ok(res));
    }

    #[test]
    fn basic_types_round_trip(s in sp4a(), r in sp4r(), c in chan(), p in sec_parms(),
                              t in prop_oneof![Just(Settime4::ServerTime), time().prop_map(Settime4::ClientTime)],
                              path in vec(component(), 0..4), id in stateid(), f in fattr()) {
        round_trip(&s)?;
        round_trip(&r)?;
        round_trip(&c)?;
        for x in &p {
            round_trip(x)?;
        }
        round_trip(&t)?;
        round_trip(&Pathname4(path))?;
        round_trip(&id)?;
        round_trip(&f)?;
        prop_assert_eq!(to_vec(&f).len(), f.xdr_len());
    }

    /// A COMPOUND of any operations, WRITE (borrowed data) among them,
    /// read back one operation at a time as a server does, then as a whole.
    #[test]
    fn write_and_compound_round_trip(
        ops in vec(arg_op().prop_filter("known", |o| !matches!(o, ArgOp::Illegal { .. })), 0..6),
        w in proptest::option::of((stateid(), any::<u64>(), stable(), bytes(100), any::<proptest::sample::Index>())),
        tag in bytes(16), minor in any::<u32>(),
    ) {
        let mut ops = ops;
        let data = w.as_ref().map(|w| w.3.clone()).unwrap_or_default();
        if let Some((stateid, offset, stable, _, at)) = &w {
            let op = ArgOp::Write(Write4ArgsRef { stateid: *stateid, offset: *offset, stable: *stable, data: &data });
            arg_round_trip(&op)?;
            ops.insert(at.index(ops.len() + 1), op);
        }
        let mut e = Enc::new();
        encode_compound(&mut e, &tag, minor, &ops);
        let mut d = Dec::new(e.as_slice());
        let head = CompoundHead::decode(&mut d, 16).unwrap();
        prop_assert_eq!((head.tag, head.minorversion, head.nops as usize), (&tag[..], minor, ops.len()));
        let got: Vec<_> = head.ops(&mut d).collect();
        prop_assert_eq!(got.len(), ops.len());
        for (g, o) in got.iter().zip(&ops) {
            prop_assert_eq!(g.opnum, o.opnum());
            prop_assert_eq!(g.arg.as_ref(), Ok(o));
        }
        prop_assert_eq!(d.remaining(), 0);
        let (_, all) = decode_compound(&mut Dec::new(e.as_slice()), 16, 8).unwrap();
        prop_assert_eq!(all, ops);
    }
}
