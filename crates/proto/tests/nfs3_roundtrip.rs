//! Every NFSv3 type round-trips encode -> decode, and no decoder panics or
//! over-reads on arbitrary bytes.

use proptest::collection::vec;
use proptest::prelude::*;
use rnfsd_proto::nfs3::*;
use rnfsd_xdr::{from_slice, to_vec, Dec, Xdr, XdrError};

fn fh() -> impl Strategy<Value = NfsFh3> {
    vec(any::<u8>(), 0..=NFS3_FHSIZE).prop_map(NfsFh3::new)
}

fn name() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..40)
}

fn verf() -> impl Strategy<Value = Verf3> {
    any::<[u8; 8]>().prop_map(Verf3)
}

fn time() -> impl Strategy<Value = Nfstime3> {
    (any::<u32>(), any::<u32>()).prop_map(|(seconds, nseconds)| Nfstime3 { seconds, nseconds })
}

fn ftype() -> impl Strategy<Value = Ftype3> {
    (1u32..=7).prop_map(|v| Ftype3::from_u32(v).unwrap())
}

fn stable() -> impl Strategy<Value = StableHow> {
    (0u32..=2).prop_map(|v| StableHow::from_u32(v).unwrap())
}

fn status_fail() -> impl Strategy<Value = Nfsstat3> {
    proptest::sample::select(Nfsstat3::ALL[1..].to_vec())
}

fn spec() -> impl Strategy<Value = Specdata3> {
    (any::<u32>(), any::<u32>()).prop_map(|(specdata1, specdata2)| Specdata3 {
        specdata1,
        specdata2,
    })
}

fn fattr() -> impl Strategy<Value = Fattr3> {
    (
        ftype(),
        any::<(u32, u32, u32, u32)>(),
        any::<(u64, u64)>(),
        spec(),
        any::<(u64, u64)>(),
        (time(), time(), time()),
    )
        .prop_map(
            |(ftype, (mode, nlink, uid, gid), (size, used), rdev, (fsid, fileid), (a, m, c))| {
                Fattr3 {
                    ftype,
                    mode,
                    nlink,
                    uid,
                    gid,
                    size,
                    used,
                    rdev,
                    fsid,
                    fileid,
                    atime: a,
                    mtime: m,
                    ctime: c,
                }
            },
        )
}

fn post_op_attr() -> impl Strategy<Value = PostOpAttr> {
    proptest::option::of(fattr())
}

fn wcc_attr() -> impl Strategy<Value = WccAttr> {
    (any::<u64>(), time(), time()).prop_map(|(size, mtime, ctime)| WccAttr { size, mtime, ctime })
}

fn wcc() -> impl Strategy<Value = WccData> {
    (proptest::option::of(wcc_attr()), post_op_attr())
        .prop_map(|(before, after)| WccData { before, after })
}

fn set_time() -> impl Strategy<Value = SetTime3> {
    prop_oneof![
        Just(SetTime3::DontChange),
        Just(SetTime3::ServerTime),
        time().prop_map(SetTime3::ClientTime),
    ]
}

fn sattr() -> impl Strategy<Value = Sattr3> {
    (
        any::<Option<u32>>(),
        any::<Option<u32>>(),
        any::<Option<u32>>(),
        any::<Option<u64>>(),
        set_time(),
        set_time(),
    )
        .prop_map(|(mode, uid, gid, size, atime, mtime)| Sattr3 {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        })
}

fn dirop() -> impl Strategy<Value = Diropargs3> {
    (fh(), name()).prop_map(|(dir, name)| Diropargs3 { dir, name })
}

fn res<T: std::fmt::Debug, F: std::fmt::Debug>(
    ok: impl Strategy<Value = T>,
    fail: impl Strategy<Value = F>,
) -> impl Strategy<Value = NfsRes<T, F>> {
    prop_oneof![
        ok.prop_map(NfsRes::Ok),
        (status_fail(), fail).prop_map(|(s, f)| NfsRes::Fail(s, f)),
    ]
}

fn create_ok() -> impl Strategy<Value = Create3ResOk> {
    (proptest::option::of(fh()), post_op_attr(), wcc()).prop_map(
        |(obj, obj_attributes, dir_wcc)| Create3ResOk {
            obj,
            obj_attributes,
            dir_wcc,
        },
    )
}

fn entry() -> impl Strategy<Value = Entry3> {
    (any::<u64>(), name(), any::<u64>()).prop_map(|(fileid, name, cookie)| Entry3 {
        fileid,
        name,
        cookie,
    })
}

fn entry_plus() -> impl Strategy<Value = EntryPlus3> {
    (
        any::<u64>(),
        name(),
        any::<u64>(),
        post_op_attr(),
        proptest::option::of(fh()),
    )
        .prop_map(
            |(fileid, name, cookie, name_attributes, name_handle)| EntryPlus3 {
                fileid,
                name,
                cookie,
                name_attributes,
                name_handle,
            },
        )
}

fn mknod_data() -> impl Strategy<Value = MknodData3> {
    prop_oneof![
        (sattr(), spec()).prop_map(|(s, d)| MknodData3::Chr(s, d)),
        (sattr(), spec()).prop_map(|(s, d)| MknodData3::Blk(s, d)),
        sattr().prop_map(MknodData3::Sock),
        sattr().prop_map(MknodData3::Fifo),
        proptest::sample::select(vec![Ftype3::Reg, Ftype3::Dir, Ftype3::Lnk])
            .prop_map(MknodData3::Other),
    ]
}

/// Encode, decode the whole buffer back, compare; the size helpers agree.
fn round_trip<T: Xdr + PartialEq + std::fmt::Debug>(v: &T) -> Result<(), TestCaseError> {
    let b = to_vec(v);
    prop_assert_eq!(b.len() % 4, 0);
    let back: T = from_slice(&b).map_err(|e| TestCaseError::fail(format!("{e}: {v:?}")))?;
    prop_assert_eq!(&back, v);
    // Every proper prefix is short, never a panic or a different value.
    if !b.is_empty() {
        let cut = b.len() - 1;
        prop_assert!(from_slice::<T>(&b[..cut]).is_err());
    }
    Ok(())
}

// Replaying a failure (proptest 1.12): it prints the minimal failing input
// and saves the case in tests/nfs3_roundtrip.proptest-regressions (no lib.rs
// above tests/, so next to this file), which every later run tries first.
// PROPTEST_RNG_SEED=<u64> fixes the run's seed (otherwise drawn at random
// and not printed); PROPTEST_CASES=<n> overrides `with_cases` below (the
// macro applies the PROPTEST_ variables to the block's config too).
proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn basic_types(a in fattr(), w in wcc(), s in sattr(), d in dirop(), v in verf(),
                   g in proptest::option::of(time()), p in proptest::option::of(fh())) {
        round_trip(&a)?;
        round_trip(&w)?;
        round_trip(&s)?;
        round_trip(&d)?;
        round_trip(&v)?;
        round_trip(&g)?;
        round_trip(&p)?;
    }

    #[test]
    fn getattr_setattr_lookup_access(
        f in fh(), s in sattr(), g in proptest::option::of(time()), d in dirop(), acc in any::<u32>(),
        r1 in res(fattr().prop_map(|a| GetAttr3ResOk { obj_attributes: a }), Just(())),
        r2 in res(wcc().prop_map(|w| SetAttr3ResOk { obj_wcc: w }), wcc()),
        r3 in res((fh(), post_op_attr(), post_op_attr()).prop_map(|(object, obj_attributes, dir_attributes)|
            Lookup3ResOk { object, obj_attributes, dir_attributes }), post_op_attr()),
        r4 in res((post_op_attr(), any::<u32>()).prop_map(|(obj_attributes, access)|
            Access3ResOk { obj_attributes, access }), post_op_attr()),
    ) {
        round_trip(&GetAttr3Args { object: f.clone() })?;
        round_trip(&SetAttr3Args { object: f.clone(), new_attributes: s, guard: g })?;
        round_trip(&Lookup3Args { what: d })?;
        round_trip(&Access3Args { object: f, access: acc })?;
        round_trip(&r1)?;
        round_trip(&r2)?;
        round_trip(&r3)?;
        round_trip(&r4)?;
    }

    #[test]
    fn readlink_read_write(
        f in fh(), off in any::<u64>(), cnt in any::<u32>(), st in stable(), data in vec(any::<u8>(), 0..300),
        r1 in res((post_op_attr(), vec(any::<u8>(), 0..100)).prop_map(|(symlink_attributes, data)|
            ReadLink3ResOk { symlink_attributes, data }), post_op_attr()),
        r2 in res((post_op_attr(), any::<u32>(), any::<bool>(), vec(any::<u8>(), 0..300)).prop_map(
            |(file_attributes, count, eof, data)| Read3ResOk { file_attributes, count, eof, data }), post_op_attr()),
        r3 in res((wcc(), any::<u32>(), stable(), verf()).prop_map(|(file_wcc, count, committed, verf)|
            Write3ResOk { file_wcc, count, committed, verf }), wcc()),
    ) {
        round_trip(&ReadLink3Args { symlink: f.clone() })?;
        round_trip(&Read3Args { file: f.clone(), offset: off, count: cnt })?;
        let w = Write3Args { file: f, offset: off, count: cnt, stable: st, data };
        round_trip(&w)?;
        // The borrowed decoder sees the same thing.
        let b = to_vec(&w);
        let mut dec = Dec::new(&b);
        let r = Write3ArgsRef::decode(&mut dec).unwrap();
        prop_assert!(dec.finish().is_ok());
        prop_assert_eq!(r.data, &w.data[..]);
        prop_assert_eq!(&r.file, &w.file);
        round_trip(&r1)?;
        round_trip(&r2)?;
        round_trip(&r3)?;
    }

    #[test]
    fn create_family(
        d in dirop(), s in sattr(), v in verf(), target in vec(any::<u8>(), 0..100), m in mknod_data(),
        how in 0u8..3, r in res(create_ok(), wcc()),
    ) {
        let how = match how {
            0 => CreateHow3::Unchecked(s.clone()),
            1 => CreateHow3::Guarded(s.clone()),
            _ => CreateHow3::Exclusive(v),
        };
        round_trip(&Create3Args { where_: d.clone(), how })?;
        round_trip(&Mkdir3Args { where_: d.clone(), attributes: s.clone() })?;
        round_trip(&Symlink3Args { where_: d.clone(), symlink_attributes: s, symlink_data: target })?;
        round_trip(&Mknod3Args { where_: d, what: m })?;
        round_trip(&r)?;
    }

    #[test]
    fn remove_rename_link(
        a in dirop(), b in dirop(), f in fh(),
        r1 in res(wcc().prop_map(|dir_wcc| Remove3ResOk { dir_wcc }), wcc()),
        rw in (wcc(), wcc()).prop_map(|(fromdir_wcc, todir_wcc)| Rename3Wcc { fromdir_wcc, todir_wcc }),
        lb in (post_op_attr(), wcc()).prop_map(|(file_attributes, linkdir_wcc)| Link3Body { file_attributes, linkdir_wcc }),
        st in status_fail(),
    ) {
        round_trip(&Remove3Args { object: a.clone() })?;
        round_trip(&Rmdir3Args { object: b.clone() })?;
        round_trip(&Rename3Args { from: a.clone(), to: b })?;
        round_trip(&Link3Args { file: f, link: a })?;
        round_trip(&r1)?;
        round_trip(&Rename3Res::Ok(rw.clone()))?;
        round_trip(&Rename3Res::Fail(st, rw))?;
        round_trip(&Link3Res::Ok(lb.clone()))?;
        round_trip(&Link3Res::Fail(st, lb))?;
    }

    #[test]
    fn readdir_family(
        f in fh(), c in any::<u64>(), v in verf(), n1 in any::<u32>(), n2 in any::<u32>(),
        r1 in res((post_op_attr(), verf(), vec(entry(), 0..20), any::<bool>()).prop_map(
            |(dir_attributes, cookieverf, entries, eof)| ReadDir3ResOk { dir_attributes, cookieverf, entries, eof }),
            post_op_attr()),
        r2 in res((post_op_attr(), verf(), vec(entry_plus(), 0..10), any::<bool>()).prop_map(
            |(dir_attributes, cookieverf, entries, eof)| ReadDirPlus3ResOk { dir_attributes, cookieverf, entries, eof }),
            post_op_attr()),
    ) {
        round_trip(&ReadDir3Args { dir: f.clone(), cookie: c, cookieverf: v, count: n1 })?;
        round_trip(&ReadDirPlus3Args { dir: f, cookie: c, cookieverf: v, dircount: n1, maxcount: n2 })?;
        round_trip(&r1)?;
        round_trip(&r2)?;
        // The size helpers match the encoding exactly.
        if let NfsRes::Ok(ok) = &r1 {
            let fixed = to_vec(&ReadDir3ResOk { entries: vec![], ..ok.clone() }).len();
            let sum: usize = ok.entries.iter().map(Entry3::xdr_len).sum();
            prop_assert_eq!(to_vec(ok).len(), fixed + sum);
        }
        if let NfsRes::Ok(ok) = &r2 {
            let fixed = to_vec(&ReadDirPlus3ResOk { entries: vec![], ..ok.clone() }).len();
            let sum: usize = ok.entries.iter().map(EntryPlus3::xdr_len).sum();
            prop_assert_eq!(to_vec(ok).len(), fixed + sum);
        }
    }

    #[test]
    fn fs_info_family(
        f in fh(), off in any::<u64>(), cnt in any::<u32>(), pa in post_op_attr(),
        u in any::<(u64, u64, u64, u64, u64, u64)>(), w in any::<(u32, u32, u32, u32, u32, u32, u32)>(),
        t in time(), bools in any::<(bool, bool, bool, bool)>(), v in verf(), wc in wcc(), st in status_fail(),
    ) {
        round_trip(&FsStat3Args { fsroot: f.clone() })?;
        round_trip(&FsInfo3Args { fsroot: f.clone() })?;
        round_trip(&PathConf3Args { object: f.clone() })?;
        round_trip(&Commit3Args { file: f, offset: off, count: cnt })?;
        round_trip(&FsStat3Res::Ok(FsStat3ResOk { obj_attributes: pa.clone(), tbytes: u.0, fbytes: u.1,
            abytes: u.2, tfiles: u.3, ffiles: u.4, afiles: u.5, invarsec: w.0 }))?;
        round_trip(&FsInfo3Res::Ok(FsInfo3ResOk { obj_attributes: pa.clone(), rtmax: w.0, rtpref: w.1,
            rtmult: w.2, wtmax: w.3, wtpref: w.4, wtmult: w.5, dtpref: w.6, maxfilesize: u.0,
            time_delta: t, properties: w.1 }))?;
        round_trip(&PathConf3Res::Ok(PathConf3ResOk { obj_attributes: pa.clone(), linkmax: w.0,
            name_max: w.1, no_trunc: bools.0, chown_restricted: bools.1, case_insensitive: bools.2,
            case_preserving: bools.3 }))?;
        round_trip(&PathConf3Res::Fail(st, pa))?;
        round_trip(&Commit3Res::Ok(Commit3ResOk { file_wcc: wc.clone(), verf: v }))?;
        round_trip(&Commit3Res::Fail(st, wc))?;
    }
}

/// Decode `T` from `b`: must not panic, and must not claim more bytes than given.
fn try_decode<T: Xdr>(b: &[u8]) {
    let mut d = Dec::new(b);
    if T::decode(&mut d).is_ok() {
        assert!(d.position() <= b.len());
    }
}

fn decode_all(b: &[u8]) {
    try_decode::<Nfsstat3>(b);
    try_decode::<Fattr3>(b);
    try_decode::<WccData>(b);
    try_decode::<Sattr3>(b);
    try_decode::<Diropargs3>(b);
    try_decode::<CreateHow3>(b);
    try_decode::<MknodData3>(b);
    try_decode::<GetAttr3Args>(b);
    try_decode::<SetAttr3Args>(b);
    try_decode::<Lookup3Args>(b);
    try_decode::<Access3Args>(b);
    try_decode::<ReadLink3Args>(b);
    try_decode::<Read3Args>(b);
    try_decode::<Write3Args>(b);
    let _ = Write3ArgsRef::decode(&mut Dec::new(b));
    try_decode::<Create3Args>(b);
    try_decode::<Mkdir3Args>(b);
    try_decode::<Symlink3Args>(b);
    try_decode::<Mknod3Args>(b);
    try_decode::<Remove3Args>(b);
    try_decode::<Rmdir3Args>(b);
    try_decode::<Rename3Args>(b);
    try_decode::<Link3Args>(b);
    try_decode::<ReadDir3Args>(b);
    try_decode::<ReadDirPlus3Args>(b);
    try_decode::<FsStat3Args>(b);
    try_decode::<FsInfo3Args>(b);
    try_decode::<PathConf3Args>(b);
    try_decode::<Commit3Args>(b);
    try_decode::<GetAttr3Res>(b);
    try_decode::<SetAttr3Res>(b);
    try_decode::<Lookup3Res>(b);
    try_decode::<Access3Res>(b);
    try_decode::<ReadLink3Res>(b);
    try_decode::<Read3Res>(b);
    try_decode::<Write3Res>(b);
    try_decode::<Create3Res>(b);
    try_decode::<Remove3Res>(b);
    try_decode::<Rename3Res>(b);
    try_decode::<Link3Res>(b);
    try_decode::<ReadDir3Res>(b);
    try_decode::<ReadDirPlus3Res>(b);
    try_decode::<FsStat3Res>(b);
    try_decode::<FsInfo3Res>(b);
    try_decode::<PathConf3Res>(b);
    try_decode::<Commit3Res>(b);
}

// Replaying a failure: as for the block above.
proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic(b in vec(any::<u8>(), 0..256)) {
        decode_all(&b);
    }

    /// Mostly-small words make booleans and discriminants valid more often,
    /// so decoders get deeper than the first field.
    #[test]
    fn small_words_never_panic(words in vec(prop_oneof![0u32..3, 0u32..80, any::<u32>()], 0..96)) {
        let b: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
        decode_all(&b);
    }
}

#[test]
fn hostile_lengths_are_rejected() {
    // A handle longer than NFS3_FHSIZE is garbage (as knfsd's decoder).
    let mut b = 65u32.to_be_bytes().to_vec();
    b.extend_from_slice(&[0u8; 68]);
    assert_eq!(from_slice::<GetAttr3Args>(&b), Err(XdrError::TooLong));
    // A name longer than MAX_NAME.
    let mut b = vec![0, 0, 0, 0];
    b.extend_from_slice(&((MAX_NAME + 1) as u32).to_be_bytes());
    b.extend_from_slice(&vec![b'a'; MAX_NAME + 4]);
    assert_eq!(from_slice::<Lookup3Args>(&b), Err(XdrError::TooLong));
    // WRITE data claiming 4 GiB with a few bytes present.
    let mut b = vec![0, 0, 0, 0];
    b.extend_from_slice(&[0u8; 8 + 4 + 4]);
    b.extend_from_slice(&u32::MAX.to_be_bytes());
    b.extend_from_slice(&[1, 2, 3, 4]);
    assert_eq!(from_slice::<Write3Args>(&b), Err(XdrError::TooLong));
    // WRITE data within MAX_DATA but beyond the bytes present.
    let n = b.len();
    b[n - 8..n - 4].copy_from_slice(&1000u32.to_be_bytes());
    assert_eq!(from_slice::<Write3Args>(&b), Err(XdrError::Short));
    // An unknown status.
    assert_eq!(
        from_slice::<GetAttr3Res>(&12345u32.to_be_bytes()),
        Err(XdrError::BadDiscriminant)
    );
}

#[test]
fn endless_dir_list_is_bounded_by_bytes() {
    // Status OK, no dir attributes, verifier, then value_follows = 1 with no
    // entry behind it: must be Short, not a loop or allocation.
    let mut b = vec![0u8; 4 + 4 + 8];
    b.extend_from_slice(&1u32.to_be_bytes());
    assert_eq!(from_slice::<ReadDir3Res>(&b), Err(XdrError::Short));
    // Many minimal entries decode to exactly that many.
    let mut b = vec![0u8; 4 + 4 + 8];
    for i in 0..1000u64 {
        b.extend_from_slice(&1u32.to_be_bytes());
        b.extend_from_slice(&i.to_be_bytes());
        b.extend_from_slice(&0u32.to_be_bytes());
        b.extend_from_slice(&(i + 1).to_be_bytes());
    }
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&1u32.to_be_bytes());
    match from_slice::<ReadDir3Res>(&b) {
        Ok(NfsRes::Ok(ok)) => {
            assert_eq!(ok.entries.len(), 1000);
            assert!(ok.eof);
            assert_eq!(ok.entries[999].cookie, 1000);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn wire_layout_of_a_lookup_reply() {
    let r = Lookup3Res::Ok(Lookup3ResOk {
        object: NfsFh3::new(vec![1, 2, 3, 4, 5]),
        obj_attributes: None,
        dir_attributes: None,
    });
    let b = to_vec(&r);
    assert_eq!(
        b,
        [0, 0, 0, 0, 0, 0, 0, 5, 1, 2, 3, 4, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    let f: Lookup3Res = NfsRes::Fail(Nfsstat3::NoEnt, None);
    assert_eq!(to_vec(&f), [0, 0, 0, 2, 0, 0, 0, 0]);
}

#[test]
fn mknod_with_void_arm() {
    let a = Mknod3Args {
        where_: Diropargs3 {
            dir: NfsFh3::new(vec![9; 8]),
            name: b"x".to_vec(),
        },
        what: MknodData3::Other(Ftype3::Reg),
    };
    let b = to_vec(&a);
    // Handle (4+8), name (4+4), then only the type word.
    assert_eq!(b.len(), 12 + 8 + 4);
    assert_eq!(from_slice::<Mknod3Args>(&b), Ok(a));
}
