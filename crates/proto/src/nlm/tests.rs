use super::*;
use proptest::prelude::*;
use rnfsd_xdr::XdrError;

/// Round trip, and every truncation of the encoding is an error.
fn rt<T: Xdr + PartialEq + std::fmt::Debug>(v: &T) -> Vec<u8> {
    let b = rnfsd_xdr::to_vec(v);
    assert_eq!(&rnfsd_xdr::from_slice::<T>(&b).unwrap(), v);
    for cut in 0..b.len() {
        assert!(
            rnfsd_xdr::from_slice::<T>(&b[..cut]).is_err(),
            "{v:?} cut {cut}"
        );
    }
    b
}

fn lock4() -> Nlm4Lock {
    Nlm4Lock {
        caller_name: CallerName(b"host".to_vec()),
        fh: NetObj(vec![0xaa; 3]),
        oh: NetObj(b"o".to_vec()),
        svid: -2,
        l_offset: 0x1_0000_0002,
        l_len: 5,
    }
}

fn lock1() -> NlmLock {
    NlmLock {
        caller_name: CallerName(b"client".to_vec()),
        fh: NetObj(vec![1; 32]),
        oh: NetObj(b"12@client".to_vec()),
        svid: 12,
        l_offset: 0xffff_fff0,
        l_len: 0,
    }
}

fn holder4() -> Nlm4Holder {
    Nlm4Holder {
        exclusive: true,
        svid: 4,
        oh: NetObj(b"owner".to_vec()),
        l_offset: 10,
        l_len: 20,
    }
}

fn share() -> Nlm4Share {
    Nlm4Share {
        caller_name: CallerName(b"pc".to_vec()),
        fh: NetObj(vec![2; 8]),
        oh: NetObj(b"oh".to_vec()),
        mode: FshMode::DenyWrite,
        access: FshAccess::ReadWrite,
    }
}

fn cookie() -> NetObj {
    NetObj(vec![0, 0, 0, 9])
}

#[test]
fn lock_call_wire_format() {
    // XNFS ch. 14 nlm4_lockargs field order: cookie, block, exclusive,
    // alock (caller_name, fh, oh, svid, l_offset, l_len), reclaim, state.
    let a = Nlm4LockArgs {
        cookie: NetObj(vec![1, 2]),
        block: true,
        exclusive: false,
        alock: lock4(),
        reclaim: false,
        state: 7,
    };
    #[rustfmt::skip]
    let want: &[u8] = &[
        0, 0, 0, 2, 1, 2, 0, 0,               // cookie
        0, 0, 0, 1,                           // block
        0, 0, 0, 0,                           // exclusive
        0, 0, 0, 4, b'h', b'o', b's', b't',   // caller_name
        0, 0, 0, 3, 0xaa, 0xaa, 0xaa, 0,      // fh
        0, 0, 0, 1, b'o', 0, 0, 0,            // oh
        0xff, 0xff, 0xff, 0xfe,               // svid -2
        0, 0, 0, 1, 0, 0, 0, 2,               // l_offset
        0, 0, 0, 0, 0, 0, 0, 5,               // l_len
        0, 0, 0, 0,                           // reclaim
        0, 0, 0, 7,                           // state
    ];
    assert_eq!(rt(&a), want);
}

#[test]
fn v1_lock_wire_format() {
    // nlm_lock: 32-bit l_offset and l_len.
    let l = NlmLock {
        caller_name: CallerName(b"h".to_vec()),
        fh: NetObj(vec![]),
        oh: NetObj(vec![]),
        svid: 1,
        l_offset: 3,
        l_len: 0xffff_ffff,
    };
    #[rustfmt::skip]
    let want: &[u8] = &[
        0, 0, 0, 1, b'h', 0, 0, 0,
        0, 0, 0, 0,
        0, 0, 0, 0,
        0, 0, 0, 1,
        0, 0, 0, 3,
        0xff, 0xff, 0xff, 0xff,
    ];
    assert_eq!(rt(&l), want);
}

#[test]
fn v4_types_round_trip() {
    rt(&holder4());
    rt(&lock4());
    rt(&Nlm4TestArgs {
        cookie: cookie(),
        exclusive: true,
        alock: lock4(),
    });
    rt(&Nlm4TestRes {
        cookie: cookie(),
        stat: Nlm4TestRply::Denied(holder4()),
    });
    for s in [
        Nlm4Stats::Granted,
        Nlm4Stats::DeniedNoLocks,
        Nlm4Stats::Blocked,
        Nlm4Stats::DeniedGracePeriod,
        Nlm4Stats::Deadlck,
        Nlm4Stats::Rofs,
        Nlm4Stats::StaleFh,
        Nlm4Stats::Fbig,
        Nlm4Stats::Failed,
    ] {
        let b = rt(&Nlm4TestRes {
            cookie: cookie(),
            stat: Nlm4TestRply::Stat(s),
        });
        assert_eq!(b.len(), 8 + 4);
        rt(&Nlm4Res {
            cookie: cookie(),
            stat: s,
        });
    }
    rt(&Nlm4LockArgs {
        cookie: cookie(),
        block: true,
        exclusive: true,
        alock: lock4(),
        reclaim: true,
        state: 3,
    });
    rt(&Nlm4CancArgs {
        cookie: cookie(),
        block: false,
        exclusive: true,
        alock: lock4(),
    });
    rt(&Nlm4UnlockArgs {
        cookie: cookie(),
        alock: lock4(),
    });
    rt(&share());
    rt(&Nlm4ShareArgs {
        cookie: cookie(),
        share: share(),
        reclaim: true,
    });
    rt(&Nlm4ShareRes {
        cookie: cookie(),
        stat: Nlm4Stats::Granted,
        sequence: -1,
    });
    rt(&Nlm4Notify {
        name: NotifyName(b"rebooted.example".to_vec()),
        state: 5,
    });
}

#[test]
fn v1_types_round_trip() {
    let h = NlmHolder {
        exclusive: false,
        svid: 1,
        oh: NetObj(b"x".to_vec()),
        l_offset: 1,
        l_len: 2,
    };
    rt(&h);
    rt(&lock1());
    rt(&NlmTestArgs {
        cookie: cookie(),
        exclusive: false,
        alock: lock1(),
    });
    rt(&NlmTestRes {
        cookie: cookie(),
        stat: NlmTestRply::Denied(h),
    });
    rt(&NlmTestRes {
        cookie: cookie(),
        stat: NlmTestRply::Stat(NlmStats::Granted),
    });
    rt(&NlmLockArgs {
        cookie: cookie(),
        block: false,
        exclusive: true,
        alock: lock1(),
        reclaim: false,
        state: 1,
    });
    rt(&NlmCancArgs {
        cookie: cookie(),
        block: true,
        exclusive: false,
        alock: lock1(),
    });
    rt(&NlmUnlockArgs {
        cookie: cookie(),
        alock: lock1(),
    });
    rt(&NlmRes {
        cookie: cookie(),
        stat: NlmStats::DeniedGracePeriod,
    });
    rt(&NlmShareRes {
        cookie: cookie(),
        stat: NlmStats::Blocked,
        sequence: 0,
    });
}

#[test]
fn test_reply_denied_needs_a_holder() {
    // stat DENIED with nothing after it is short, not a holder-less reply.
    assert_eq!(
        rnfsd_xdr::from_slice::<Nlm4TestRply>(&[0, 0, 0, 1]),
        Err(XdrError::Short)
    );
    // Stat(Denied) still encodes valid bytes (with a default holder).
    let b = rnfsd_xdr::to_vec(&Nlm4TestRply::Stat(Nlm4Stats::Denied));
    assert_eq!(
        rnfsd_xdr::from_slice::<Nlm4TestRply>(&b),
        Ok(Nlm4TestRply::Denied(Nlm4Holder::default()))
    );
    let b = rnfsd_xdr::to_vec(&NlmTestRply::Stat(NlmStats::Denied));
    assert!(rnfsd_xdr::from_slice::<NlmTestRply>(&b).is_ok());
}

#[test]
fn statuses_are_bounded_per_version() {
    // 5 (DEADLCK) exists in v4 only; 10 nowhere.
    assert_eq!(
        rnfsd_xdr::from_slice::<Nlm4Stats>(&[0, 0, 0, 5]),
        Ok(Nlm4Stats::Deadlck)
    );
    assert_eq!(
        rnfsd_xdr::from_slice::<NlmStats>(&[0, 0, 0, 5]),
        Err(XdrError::BadDiscriminant)
    );
    assert_eq!(
        rnfsd_xdr::from_slice::<Nlm4Stats>(&[0, 0, 0, 10]),
        Err(XdrError::BadDiscriminant)
    );
    assert_eq!(
        rnfsd_xdr::from_slice::<FshMode>(&[0, 0, 0, 4]),
        Err(XdrError::BadDiscriminant)
    );
}

#[test]
fn bounds_are_errors_not_allocations() {
    let mut e = Enc::new();
    e.opaque(&[0; MAXNETOBJ_SZ + 1]);
    assert_eq!(
        rnfsd_xdr::from_slice::<NetObj>(e.as_slice()),
        Err(XdrError::TooLong)
    );
    let mut e = Enc::new();
    e.opaque(&[0; MAXNETOBJ_SZ]);
    assert!(rnfsd_xdr::from_slice::<NetObj>(e.as_slice()).is_ok());
    // An oversized caller_name inside a LOCK call.
    let mut a = Nlm4LockArgs {
        alock: lock4(),
        ..Default::default()
    };
    a.alock.caller_name = CallerName(vec![b'h'; LM_MAXSTRLEN + 1]);
    assert_eq!(
        rnfsd_xdr::from_slice::<Nlm4LockArgs>(&rnfsd_xdr::to_vec(&a)),
        Err(XdrError::TooLong)
    );
    // An oversized fh.
    let mut a = Nlm4UnlockArgs::default();
    a.alock.fh = NetObj(vec![0; MAXNETOBJ_SZ + 1]);
    assert_eq!(
        rnfsd_xdr::from_slice::<Nlm4UnlockArgs>(&rnfsd_xdr::to_vec(&a)),
        Err(XdrError::TooLong)
    );
    // A hostile length word with no data behind it.
    assert_eq!(
        rnfsd_xdr::from_slice::<NetObj>(&[0xff, 0xff, 0xff, 0xff]),
        Err(XdrError::TooLong)
    );
    assert_eq!(
        rnfsd_xdr::from_slice::<NetObj>(&[0, 0, 4, 0]),
        Err(XdrError::Short)
    );
    // notify names allow LM_MAXNAMELEN (one more than caller_name).
    let n = Nlm4Notify {
        name: NotifyName(vec![b'n'; LM_MAXNAMELEN]),
        state: 1,
    };
    rt(&n);
    let mut e = Enc::new();
    e.opaque(&[b'n'; LM_MAXNAMELEN + 1]);
    e.i32(1);
    assert_eq!(
        rnfsd_xdr::from_slice::<Nlm4Notify>(e.as_slice()),
        Err(XdrError::TooLong)
    );
    // A boolean that is not 0 or 1.
    let mut b = rnfsd_xdr::to_vec(&Nlm4LockArgs::default());
    b[7] = 2; // block
    assert_eq!(
        rnfsd_xdr::from_slice::<Nlm4LockArgs>(&b),
        Err(XdrError::BadBool)
    );
}

#[test]
fn range_end_cases() {
    assert_eq!(range_end(0, 0), None);
    assert_eq!(range_end(100, 0), None);
    assert_eq!(range_end(100, 1), Some(101));
    assert_eq!(range_end(u64::MAX - 1, 1), Some(u64::MAX));
    // Ends exactly at 2^64: the last byte is u64::MAX, i.e. to EOF.
    assert_eq!(range_end(u64::MAX, 1), None);
    assert_eq!(range_end(1, u64::MAX), None);
    assert_eq!(range_end(u64::MAX, u64::MAX), None);
}

#[test]
fn fcntl_ranges() {
    let max = i64::MAX as u64;
    assert_eq!(to_fcntl_range(0, 0), Ok((0, 0)));
    assert_eq!(to_fcntl_range(5, 10), Ok((5, 10)));
    // Last byte exactly i64::MAX: representable.
    assert_eq!(to_fcntl_range(max, 1), Ok((i64::MAX, 1)));
    assert_eq!(to_fcntl_range(1, max), Ok((1, i64::MAX)));
    assert_eq!(to_fcntl_range(0, max + 1), Ok((0, 0)));
    // Past i64::MAX: to EOF, as Linux lockd does.
    assert_eq!(to_fcntl_range(2, max), Ok((2, 0)));
    assert_eq!(to_fcntl_range(max, 2), Ok((i64::MAX, 0)));
    assert_eq!(to_fcntl_range(0, u64::MAX), Ok((0, 0)));
    assert_eq!(to_fcntl_range(10, u64::MAX), Ok((10, 0)));
    // An offset fcntl cannot hold: NLM4_FBIG.
    assert_eq!(to_fcntl_range(max + 1, 0), Err(RangeTooLarge));
    assert_eq!(to_fcntl_range(u64::MAX, 1), Err(RangeTooLarge));
    assert_eq!(Nlm4Stats::from(RangeTooLarge), Nlm4Stats::Fbig);

    assert_eq!(from_fcntl_range(5, 10), (5, 10));
    assert_eq!(from_fcntl_range(5, 0), (5, 0));
    assert_eq!(from_fcntl_range(i64::MAX, 0), (max, 0));
    assert_eq!(from_fcntl_range(10, -4), (6, 4));
    assert_eq!(from_fcntl_range(2, -4), (0, 2));
    assert_eq!(from_fcntl_range(-3, 4), (0, 4));
}

#[test]
fn v1_arguments_widen() {
    let l: Nlm4Lock = lock1().into();
    assert_eq!(l.l_offset, 0xffff_fff0);
    assert_eq!(l.l_len, 0, "0 stays to-EOF");
    assert_eq!(l.caller_name, lock1().caller_name);
    assert_eq!((l.svid, &l.fh, &l.oh), (12, &lock1().fh, &lock1().oh));
    let mut big = lock1();
    big.l_len = u32::MAX;
    let l: Nlm4Lock = big.into();
    // Unsigned, not sign-extended.
    assert_eq!((l.l_offset, l.l_len), (0xffff_fff0, 0xffff_ffff));
    assert_eq!(range_end(l.l_offset, l.l_len), Some(0x1_ffff_ffef));

    let a: Nlm4LockArgs = NlmLockArgs {
        cookie: cookie(),
        block: true,
        exclusive: false,
        alock: lock1(),
        reclaim: true,
        state: 9,
    }
    .into();
    assert_eq!(
        a,
        Nlm4LockArgs {
            cookie: cookie(),
            block: true,
            exclusive: false,
            alock: lock1().into(),
            reclaim: true,
            state: 9,
        }
    );
    let t: Nlm4TestArgs = NlmTestArgs {
        cookie: cookie(),
        exclusive: true,
        alock: lock1(),
    }
    .into();
    assert!(t.exclusive);
    let c: Nlm4CancArgs = NlmCancArgs {
        cookie: cookie(),
        block: true,
        exclusive: true,
        alock: lock1(),
    }
    .into();
    assert!(c.block && c.exclusive);
    let u: Nlm4UnlockArgs = NlmUnlockArgs {
        cookie: cookie(),
        alock: lock1(),
    }
    .into();
    assert_eq!(u.alock.l_offset, 0xffff_fff0);
    let h: Nlm4Holder = NlmHolder {
        exclusive: true,
        svid: 1,
        oh: NetObj::default(),
        l_offset: u32::MAX,
        l_len: 7,
    }
    .into();
    assert_eq!((h.l_offset, h.l_len), (u64::from(u32::MAX), 7));
}

#[test]
fn v4_results_narrow() {
    let off_max = u64::from(NLM_OFFSET_MAX);
    let h = |l_offset, l_len| {
        Nlm4Holder {
            l_offset,
            l_len,
            ..holder4()
        }
        .to_v1()
    };
    let v = h(10, 20);
    assert_eq!(
        (v.l_offset, v.l_len, v.svid, v.exclusive),
        (10, 20, 4, true)
    );
    assert_eq!(v.oh, holder4().oh);
    // To EOF stays to EOF.
    assert_eq!((h(10, 0).l_offset, h(10, 0).l_len), (10, 0));
    assert_eq!(h(10, u64::MAX).l_len, 0);
    // Clamped to NLM_OFFSET_MAX, like Linux loff_t_to_s32.
    let v = h(1 << 40, 5);
    assert_eq!((v.l_offset, v.l_len), (NLM_OFFSET_MAX, 5));
    let v = h(0, 1 << 33);
    assert_eq!((v.l_offset, v.l_len), (0, NLM_OFFSET_MAX));
    let v = h(off_max, off_max);
    assert_eq!((v.l_offset, v.l_len), (NLM_OFFSET_MAX, NLM_OFFSET_MAX));

    // Statuses: cast_to_nlm.
    use Nlm4Stats as S;
    use NlmStats as V;
    for (a, b) in [
        (S::Granted, V::Granted),
        (S::Denied, V::Denied),
        (S::DeniedNoLocks, V::DeniedNoLocks),
        (S::Blocked, V::Blocked),
        (S::DeniedGracePeriod, V::DeniedGracePeriod),
        (S::Deadlck, V::Denied),
        (S::Rofs, V::DeniedNoLocks),
        (S::StaleFh, V::DeniedNoLocks),
        (S::Fbig, V::DeniedNoLocks),
        (S::Failed, V::DeniedNoLocks),
    ] {
        assert_eq!(NlmStats::from(a), b, "{a:?}");
        assert_eq!(
            Nlm4Res {
                cookie: cookie(),
                stat: a
            }
            .to_v1()
            .stat,
            b
        );
        let sr = Nlm4ShareRes {
            cookie: cookie(),
            stat: a,
            sequence: 3,
        }
        .to_v1();
        assert_eq!((sr.stat, sr.sequence), (b, 3));
    }
    for b in [
        V::Granted,
        V::Denied,
        V::DeniedNoLocks,
        V::Blocked,
        V::DeniedGracePeriod,
    ] {
        assert_eq!(NlmStats::from(Nlm4Stats::from(b)), b);
    }
    let t = Nlm4TestRes {
        cookie: cookie(),
        stat: Nlm4TestRply::Denied(Nlm4Holder {
            l_offset: 1 << 35,
            ..holder4()
        }),
    }
    .to_v1();
    assert_eq!(t.cookie, cookie());
    match t.stat {
        NlmTestRply::Denied(h) => assert_eq!(h.l_offset, NLM_OFFSET_MAX),
        s => panic!("{s:?}"),
    }
    assert_eq!(
        Nlm4TestRply::Stat(S::StaleFh).to_v1(),
        NlmTestRply::Stat(V::DeniedNoLocks)
    );
}

// Replaying a failure (proptest 1.12): it prints the minimal failing input and
// saves the case under crates/proto/proptest-regressions/, which every later
// run tries first. PROPTEST_RNG_SEED=<u64> fixes the run's seed (otherwise
// drawn at random and not printed); PROPTEST_CASES=<n> runs more cases.
proptest! {
    #[test]
    fn random_bytes_never_panic(v in proptest::collection::vec(any::<u8>(), 0..160)) {
        let _ = rnfsd_xdr::from_slice::<Nlm4LockArgs>(&v);
        let _ = rnfsd_xdr::from_slice::<Nlm4TestArgs>(&v);
        let _ = rnfsd_xdr::from_slice::<Nlm4TestRes>(&v);
        let _ = rnfsd_xdr::from_slice::<Nlm4ShareArgs>(&v);
        let _ = rnfsd_xdr::from_slice::<NlmLockArgs>(&v);
        let _ = rnfsd_xdr::from_slice::<NlmTestRes>(&v);
    }

    #[test]
    fn lock_args_round_trip(
        cookie in proptest::collection::vec(any::<u8>(), 0..16),
        name in proptest::collection::vec(any::<u8>(), 0..40),
        fh in proptest::collection::vec(any::<u8>(), 0..64),
        svid in any::<i32>(), off in any::<u64>(), len in any::<u64>(),
        flags in any::<[bool; 3]>(), state in any::<i32>(),
    ) {
        let a = Nlm4LockArgs {
            cookie: NetObj(cookie),
            block: flags[0],
            exclusive: flags[1],
            alock: Nlm4Lock {
                caller_name: CallerName(name),
                fh: NetObj(fh),
                oh: NetObj(b"oh".to_vec()),
                svid,
                l_offset: off,
                l_len: len,
            },
            reclaim: flags[2],
            state,
        };
        let b = rnfsd_xdr::to_vec(&a);
        prop_assert_eq!(rnfsd_xdr::from_slice::<Nlm4LockArgs>(&b).unwrap(), a);
    }

    #[test]
    fn fcntl_range_is_sound(off in any::<u64>(), len in any::<u64>()) {
        match to_fcntl_range(off, len) {
            Err(RangeTooLarge) => prop_assert!(off > i64::MAX as u64),
            Ok((s, l)) => {
                prop_assert_eq!(s as u64, off);
                prop_assert!(l >= 0);
                if l > 0 {
                    // What fcntl accepts: the last byte fits off_t.
                    prop_assert!(s.checked_add(l - 1).is_some());
                    prop_assert_eq!(l as u64, len);
                }
            }
        }
    }

    #[test]
    fn narrowed_holder_covers_no_less(off in any::<u64>(), len in any::<u64>()) {
        let v = Nlm4Holder { l_offset: off, l_len: len, ..Default::default() }.to_v1();
        prop_assert!(u64::from(v.l_offset) <= off.max(u64::from(NLM_OFFSET_MAX)));
        if range_end(off, len).is_none() {
            prop_assert_eq!(v.l_len, 0);
        }
    }
}
