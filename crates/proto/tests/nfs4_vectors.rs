//! NFSv4.1 messages written out by hand, word by word, from the XDR in
//! RFC 5662 (not with this crate's encoder): each decodes to the expected
//! value and that value encodes back to the same bytes.

use rnfsd_proto::nfs4::cb::*;
use rnfsd_proto::nfs4::*;
use rnfsd_proto::rpc::AuthSys;
use rnfsd_xdr::{to_vec, Dec, Enc, XdrError};

/// Big-endian words.
fn w(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|x| x.to_be_bytes()).collect()
}

/// Decode one operation's arguments as a server does (number, then
/// arguments), check the whole buffer is used, and that it encodes back.
fn decode_arg(b: &[u8]) -> ArgOp<'_> {
    let mut d = Dec::new(b);
    let opnum = d.u32().unwrap();
    let op = ArgOp::decode(&mut d, opnum).unwrap();
    assert_eq!(d.remaining(), 0, "{op:?} left bytes");
    let mut e = Enc::new();
    op.encode(&mut e);
    assert_eq!(e.as_slice(), b, "{op:?} re-encodes differently");
    op
}

fn check_res(b: &[u8], expect: &ResOp) {
    assert_eq!(to_vec(expect), b);
    assert_eq!(rnfsd_xdr::from_slice::<ResOp>(b).as_ref(), Ok(expect));
}

const SESSION: [u8; 16] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16];

fn sequence_args() -> Vec<u8> {
    [
        w(&[53]),         // argop: OP_SEQUENCE
        SESSION.to_vec(), // sa_sessionid
        w(&[7, 0, 3, 1]), // sa_sequenceid, sa_slotid, sa_highest_slotid, sa_cachethis
    ]
    .concat()
}

#[test]
fn sequence() {
    let b = sequence_args();
    assert_eq!(
        decode_arg(&b),
        ArgOp::Sequence(Sequence4Args {
            sessionid: SessionId4(SESSION),
            sequenceid: 7,
            slotid: 0,
            highest_slotid: 3,
            cachethis: true,
        })
    );
    let res = [
        w(&[53, 0]),                                  // resop, NFS4_OK
        SESSION.to_vec(),                             // sr_sessionid
        w(&[7, 0, 15, 15, SEQ4_STATUS_CB_PATH_DOWN]), // seq, slot, highest, target, flags
    ]
    .concat();
    check_res(
        &res,
        &ResOp::Sequence(NfsRes4::Ok(Sequence4ResOk {
            sessionid: SessionId4(SESSION),
            sequenceid: 7,
            slotid: 0,
            highest_slotid: 15,
            target_highest_slotid: 15,
            status_flags: 1,
        })),
    );
    // A failed SEQUENCE is its status alone.
    check_res(
        &w(&[53, 10052]),
        &ResOp::Sequence(NfsRes4::Fail(Nfsstat4::BadSession)),
    );
}

#[test]
fn exchange_id() {
    let b = [
        w(&[42]),                           // OP_EXCHANGE_ID
        b"verifier".to_vec(),               // co_verifier
        w(&[18]),                           // co_ownerid length
        b"Linux NFSv4.1 host\0\0".to_vec(), // co_ownerid + 2 pad bytes
        w(&[0x101]),                        // eia_flags: SUPP_MOVED_REFER | BIND_PRINC_STATEID
        w(&[0]),                            // state protection SP4_NONE
        w(&[1]),                            // eia_client_impl_id<1>: one
        w(&[10]),
        b"kernel.org\0\0".to_vec(), // nii_domain
        w(&[11]),
        b"Linux 6.1.0\0".to_vec(), // nii_name
        w(&[0, 0, 0]),             // nii_date: seconds (hyper), nseconds
    ]
    .concat();
    assert_eq!(
        decode_arg(&b),
        ArgOp::ExchangeId(Box::new(ExchangeId4Args {
            clientowner: ClientOwner4 {
                verifier: Verifier4(*b"verifier"),
                ownerid: Opaque1024(b"Linux NFSv4.1 host".to_vec()),
            },
            flags: EXCHGID4_FLAG_SUPP_MOVED_REFER | EXCHGID4_FLAG_BIND_PRINC_STATEID,
            state_protect: StateProtect4A::None,
            client_impl_id: Some(NfsImplId4 {
                domain: Utf8Str(b"kernel.org".to_vec()),
                name: Utf8Str(b"Linux 6.1.0".to_vec()),
                date: Nfstime4::default(),
            }),
        }))
    );

    // SP4_MACH_CRED: two bitmaps, decoded so the server can refuse it.
    let mach = [
        w(&[42]),
        b"verifier".to_vec(),
        w(&[0]),          // empty owner
        w(&[0]),          // flags
        w(&[1]),          // SP4_MACH_CRED
        w(&[1, 1 << 12]), // spo_must_enforce: {OP_LOCK... bit 12}
        w(&[2, 0, 1]),    // spo_must_allow: {32}
        w(&[0]),          // no impl id
    ]
    .concat();
    let ArgOp::ExchangeId(a) = decode_arg(&mach) else {
        panic!("not EXCHANGE_ID");
    };
    let StateProtect4A::MachCred(ops) = a.state_protect else {
        panic!("not SP4_MACH_CRED: {:?}", a.state_protect);
    };
    assert!(ops.must_enforce.contains(OP_LOCK));
    assert_eq!(ops.must_allow.iter().collect::<Vec<_>>(), vec![32]);
    // An impl id array of two is too long.
    let mut two = mach.clone();
    let n = two.len();
    two[n - 1] = 2;
    let mut d = Dec::new(&two[4..]);
    assert_eq!(ArgOp::decode(&mut d, 42), Err(XdrError::TooLong));

    let res = [
        w(&[42, 0]),                    // resop, NFS4_OK
        w(&[0x1234_5678, 0x9abc_def0]), // eir_clientid
        w(&[1]),                        // eir_sequenceid
        w(&[EXCHGID4_FLAG_USE_NON_PNFS]),
        w(&[0]),    // SP4_NONE
        w(&[0, 0]), // so_minor_id
        w(&[5]),
        b"rnfsd\0\0\0".to_vec(), // so_major_id
        w(&[5]),
        b"scope\0\0\0".to_vec(), // eir_server_scope
        w(&[0]),                 // no eir_server_impl_id
    ]
    .concat();
    check_res(
        &res,
        &ResOp::ExchangeId(NfsRes4::Ok(ExchangeId4ResOk {
            clientid: 0x1234_5678_9abc_def0,
            sequenceid: 1,
            flags: EXCHGID4_FLAG_USE_NON_PNFS,
            state_protect: StateProtect4R::None,
            server_owner: ServerOwner4 {
                minor_id: 0,
                major_id: Opaque1024(b"rnfsd".to_vec()),
            },
            server_scope: Opaque1024(b"scope".to_vec()),
            server_impl_id: None,
        })),
    );
}

#[test]
fn create_session_with_auth_sys_callback() {
    let chan = |req, resp| w(&[0, req, resp, 4096, 8, 64, 0]); // ca_* then ca_rdma_ird<1> empty
    let b = [
        w(&[43]),    // OP_CREATE_SESSION
        w(&[0, 42]), // csa_clientid
        w(&[1]),     // csa_sequence
        w(&[CREATE_SESSION4_FLAG_CONN_BACK_CHAN]),
        chan(1 << 20, 1 << 20),
        chan(4096, 4096),
        w(&[0x4000_0000]), // csa_cb_program
        w(&[1]),           // csa_sec_parms: one
        w(&[1]),           // AUTH_SYS
        w(&[99, 4]),       // stamp, machinename length
        b"host".to_vec(),
        w(&[1000, 100]), // uid, gid
        w(&[2, 10, 20]), // gids
    ]
    .concat();
    let attrs = |req, resp| ChannelAttrs4 {
        headerpadsize: 0,
        maxrequestsize: req,
        maxresponsesize: resp,
        maxresponsesize_cached: 4096,
        maxoperations: 8,
        maxrequests: 64,
        rdma_ird: None,
    };
    assert_eq!(
        decode_arg(&b),
        ArgOp::CreateSession(Box::new(CreateSession4Args {
            clientid: 42,
            sequence: 1,
            flags: 2,
            fore_chan_attrs: attrs(1 << 20, 1 << 20),
            back_chan_attrs: attrs(4096, 4096),
            cb_program: NFS4_CALLBACK,
            sec_parms: vec![CallbackSecParms4::Sys(AuthSys {
                stamp: 99,
                machine_name: b"host".to_vec(),
                uid: 1000,
                gid: 100,
                gids: vec![10, 20],
            })],
        }))
    );
}

/// The Linux client's exclusive create: OPEN4_CREATE with EXCLUSIVE4_1 and
/// the mode attribute, CLAIM_NULL by name.
#[test]
fn open_claim_null_exclusive4_1() {
    let b = [
        w(&[18]), // OP_OPEN
        w(&[0]),  // seqid (unused in 4.1)
        w(&[OPEN4_SHARE_ACCESS_BOTH | OPEN4_SHARE_ACCESS_WANT_NO_DELEG]),
        w(&[OPEN4_SHARE_DENY_NONE]),
        w(&[0x0102_0304, 0x0506_0708]), // owner.clientid
        w(&[12]),
        b"open id:\0\0\0\x01".to_vec(),         // owner.owner
        w(&[1]),                                // OPEN4_CREATE
        w(&[3]),                                // EXCLUSIVE4_1
        b"\xde\xad\xbe\xef\0\0\0\x01".to_vec(), // cva_verf
        w(&[2, 0, 1 << 1]),                     // cva_attrs.attrmask: {FATTR4_MODE (33)}
        w(&[4, 0o644]),                         // attr_vals: mode4
        w(&[0]),                                // CLAIM_NULL
        w(&[7]),
        b"newfile\0".to_vec(), // file
    ]
    .concat();
    let ArgOp::Open(a) = decode_arg(&b) else {
        panic!("not OPEN");
    };
    assert_eq!(a.share_access & 0xff, OPEN4_SHARE_ACCESS_BOTH);
    assert_eq!(a.owner.clientid, 0x0102_0304_0506_0708);
    assert_eq!(a.claim, OpenClaim4::Null(Component4(b"newfile".to_vec())));
    let OpenFlag4::Create(CreateHow4::Exclusive41 { verf, attrs }) = a.openhow else {
        panic!("not EXCLUSIVE4_1: {:?}", a.openhow);
    };
    assert_eq!(verf, Verifier4([0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 1]));
    assert!(attrs.attrmask.contains(FATTR4_MODE));
    assert_eq!(attrs.attr_vals, 0o644u32.to_be_bytes());

    // CLAIM_FH without create: the current filehandle is the file.
    let fh = [
        w(&[18, 0, OPEN4_SHARE_ACCESS_READ, 0, 0, 0, 0]),
        w(&[0]), // OPEN4_NOCREATE
        w(&[4]), // CLAIM_FH
    ]
    .concat();
    let ArgOp::Open(a) = decode_arg(&fh) else {
        panic!("not OPEN");
    };
    assert_eq!((a.openhow, a.claim), (OpenFlag4::NoCreate, OpenClaim4::Fh));

    // An unknown claim type is bad XDR, not a panic or an allocation.
    let mut bad = fh.clone();
    let n = bad.len();
    bad[n - 1] = 9;
    assert_eq!(
        ArgOp::decode(&mut Dec::new(&bad[4..]), OP_OPEN),
        Err(XdrError::BadDiscriminant)
    );
}

#[test]
fn open_result_with_a_read_delegation() {
    let other = [7u8; 12];
    let res = [
        w(&[18, 0]), // OP_OPEN, NFS4_OK
        w(&[1]),
        other.to_vec(),      // stateid
        w(&[1, 0, 5, 0, 6]), // cinfo: atomic, before 5, after 6
        w(&[OPEN4_RESULT_LOCKTYPE_POSIX]),
        w(&[0]), // attrset: no words
        w(&[1]), // OPEN_DELEGATE_READ
        w(&[1]),
        other.to_vec(),           // delegation stateid
        w(&[0]),                  // recall FALSE
        w(&[0, 0, ACCESS4_READ]), // ace: ALLOWED, no flags, mask
        w(&[9]),
        b"EVERYONE@\0\0\0".to_vec(),
    ]
    .concat();
    let sid = Stateid4 { seqid: 1, other };
    check_res(
        &res,
        &ResOp::Open(NfsRes4::Ok(Open4ResOk {
            stateid: sid,
            cinfo: ChangeInfo4 {
                atomic: true,
                before: 5,
                after: 6,
            },
            rflags: OPEN4_RESULT_LOCKTYPE_POSIX,
            attrset: Bitmap4::new(),
            delegation: OpenDelegation4::Read(OpenReadDelegation4 {
                stateid: sid,
                recall: false,
                permissions: Nfsace4 {
                    acetype: 0,
                    flag: 0,
                    access_mask: 1,
                    who: Utf8Str(b"EVERYONE@".to_vec()),
                },
            }),
        })),
    );
}

#[test]
fn lock_new_owner_and_denied() {
    let b = [
        w(&[12]),            // OP_LOCK
        w(&[2]),             // WRITE_LT
        w(&[0]),             // reclaim FALSE
        w(&[0, 100, 0, 50]), // offset 100, length 50
        w(&[1]),             // new_lock_owner TRUE: open_to_lock_owner4
        w(&[0]),             // open_seqid
        w(&[1]),
        [9u8; 12].to_vec(), // open_stateid
        w(&[0]),            // lock_seqid
        w(&[0, 42, 4]),
        b"lck1".to_vec(), // lock_owner
    ]
    .concat();
    let ArgOp::Lock(a) = decode_arg(&b) else {
        panic!("not LOCK");
    };
    assert_eq!(
        (a.locktype, a.offset, a.length),
        (NfsLockType4::Write, 100, 50)
    );
    let Locker4::OpenOwner(o) = a.locker else {
        panic!("not a new lock owner");
    };
    assert_eq!(o.lock_owner.owner.0, b"lck1");

    let denied = [
        w(&[12, 10010]),       // OP_LOCK, NFS4ERR_DENIED
        w(&[0, 0, 0, 200, 1]), // offset, length, READ_LT
        w(&[0, 7, 0]),         // owner: clientid 7, empty
    ]
    .concat();
    check_res(
        &denied,
        &ResOp::Lock(Lock4Res::Denied(Lock4Denied {
            offset: 0,
            length: 200,
            locktype: NfsLockType4::Read,
            owner: StateOwner4 {
                clientid: 7,
                owner: Opaque1024::default(),
            },
        })),
    );
}

/// A whole request read as a server does, answered with CompoundWriter,
/// against a reply written by hand.
#[test]
fn compound_sequence_putfh_write_getattr() {
    let data = b"hello, world";
    let req = [
        w(&[4]),
        b"wrt1".to_vec(), // tag
        w(&[1, 4]),       // minorversion 1, four operations
        sequence_args(),
        w(&[22, 3]),
        b"fh1\0".to_vec(), // PUTFH
        w(&[38, 0]),
        [0u8; 12].to_vec(), // WRITE: anonymous stateid
        w(&[0, 4096, 2]),   // offset, FILE_SYNC4
        w(&[12]),
        data.to_vec(),                // data
        w(&[9, 1, 1 << FATTR4_SIZE]), // GETATTR {size}
    ]
    .concat();
    let mut d = Dec::new(&req);
    let head = CompoundHead::decode(&mut d, 64).unwrap();
    assert_eq!(
        (head.tag, head.minorversion, head.nops),
        (&b"wrt1"[..], 1, 4)
    );
    let ops: Vec<_> = head.ops(&mut d).collect();
    assert_eq!(d.remaining(), 0);
    let nums: Vec<_> = ops.iter().map(|o| o.opnum).collect();
    assert_eq!(nums, [OP_SEQUENCE, OP_PUTFH, OP_WRITE, OP_GETATTR]);
    let Ok(ArgOp::Write(wr)) = &ops[2].arg else {
        panic!("not WRITE: {:?}", ops[2]);
    };
    // Borrowed from the request, not copied.
    let at = wr.data.as_ptr() as usize - req.as_ptr() as usize;
    assert_eq!(&req[at..at + data.len()], data);
    assert_eq!(
        (wr.offset, wr.stable, wr.stateid),
        (4096, StableHow4::FileSync, Stateid4::ANONYMOUS)
    );

    // The server's answer: SEQUENCE and PUTFH succeed, WRITE is refused.
    let mut e = Enc::new();
    let mut cw = CompoundWriter::begin(&mut e, head.tag);
    for op in &ops {
        let r = match &op.arg {
            Ok(ArgOp::Sequence(s)) => ResOp::Sequence(NfsRes4::Ok(Sequence4ResOk {
                sessionid: s.sessionid,
                sequenceid: s.sequenceid,
                slotid: s.slotid,
                highest_slotid: 3,
                target_highest_slotid: 3,
                status_flags: 0,
            })),
            Ok(ArgOp::PutFh(_)) => ResOp::PutFh(Nfsstat4::Ok),
            _ => ResOp::error(op.opnum, Nfsstat4::RoFs),
        };
        if cw.push(&mut e, &r) != Nfsstat4::Ok {
            break;
        }
    }
    assert_eq!(cw.finish(&mut e), Nfsstat4::RoFs);
    let reply = [
        w(&[30]), // status NFS4ERR_ROFS
        w(&[4]),
        b"wrt1".to_vec(), // tag echoed
        w(&[3]),          // three results
        w(&[53, 0]),
        SESSION.to_vec(),
        w(&[7, 0, 3, 3, 0]),
        w(&[22, 0]),  // PUTFH OK
        w(&[38, 30]), // WRITE ROFS
    ]
    .concat();
    assert_eq!(e.as_slice(), reply);
}

#[test]
fn compound_stops_at_an_unknown_or_truncated_operation() {
    let req = [
        w(&[0, 1, 3]),        // no tag, minorversion 1, three operations
        w(&[24]),             // PUTROOTFH
        w(&[OP_COPY_NOTIFY]), // a 4.2 operation without types here
        w(&[10]),             // GETFH, never reached
    ]
    .concat();
    let mut d = Dec::new(&req);
    let head = CompoundHead::decode(&mut d, 0).unwrap();
    let ops: Vec<_> = head.ops(&mut d).collect();
    assert_eq!(ops.len(), 2);
    assert_eq!(
        ops[1].arg,
        Ok(ArgOp::Illegal {
            opnum: OP_COPY_NOTIFY
        })
    );
    assert_eq!(
        to_vec(&ResOp::error(ops[1].opnum, Nfsstat4::OpIllegal)),
        w(&[10044, 10044])
    );

    // READ whose arguments end early: that operation is BADXDR.
    let req = [w(&[0, 1, 2, 24, 25, 0]), [0u8; 12].to_vec(), w(&[0])].concat();
    let mut d = Dec::new(&req);
    let head = CompoundHead::decode(&mut d, 0).unwrap();
    let ops: Vec<_> = head.ops(&mut d).collect();
    assert_eq!(ops[1].opnum, OP_READ);
    assert_eq!(ops[1].arg, Err(XdrError::Short));
    assert_eq!(
        to_vec(&ResOp::error(OP_READ, Nfsstat4::BadXdr)),
        w(&[25, 10036])
    );
}

#[test]
fn readdir_result_built_in_place() {
    let attrs = Fattr4 {
        attrmask: Bitmap4::from_bits(&[FATTR4_FILEID]).unwrap(),
        attr_vals: w(&[0, 77]),
    };
    let mut e = Enc::new();
    let mut rw = ReaddirWriter::begin(&mut e, Verifier4(*b"cookieve"), 0, 4096);
    assert!(rw.push(&mut e, 3, b"a.txt", &attrs));
    rw.finish(&mut e, true);
    let expect = [
        w(&[26, 0]),          // OP_READDIR, NFS4_OK
        b"cookieve".to_vec(), // cookieverf
        w(&[1, 0, 3]),        // entry follows, cookie 3
        w(&[5]),
        b"a.txt\0\0\0".to_vec(),
        w(&[1, 1 << 20]), // attrmask {FATTR4_FILEID}
        w(&[8, 0, 77]),   // attr_vals: fileid 77
        w(&[0, 1]),       // no more entries, eof
    ]
    .concat();
    assert_eq!(e.as_slice(), expect);
}

#[test]
fn cb_compound_sequence_and_recall() {
    let other = [5u8; 12];
    let args = CbCompoundArgs {
        tag: vec![],
        minorversion: 1,
        callback_ident: 0,
        ops: vec![
            CbArgOp::Sequence(CbSequence4Args {
                sessionid: SessionId4(SESSION),
                sequenceid: 1,
                slotid: 0,
                highest_slotid: 0,
                cachethis: false,
                referring_call_lists: vec![ReferringCallList4 {
                    sessionid: SessionId4(SESSION),
                    referring_calls: vec![ReferringCall4 {
                        sequenceid: 9,
                        slotid: 2,
                    }],
                }],
            }),
            CbArgOp::Recall(CbRecall4Args {
                stateid: Stateid4 { seqid: 1, other },
                truncate: false,
                fh: NfsFh4(b"fh1".to_vec()),
            }),
        ],
    };
    let expect = [
        w(&[0, 1, 0, 2]), // no tag, minorversion 1, callback_ident 0, two ops
        w(&[11]),         // OP_CB_SEQUENCE
        SESSION.to_vec(),
        w(&[1, 0, 0, 0]), // sequenceid, slotid, highest, cachethis
        w(&[1]),          // one referring call list
        SESSION.to_vec(),
        w(&[1, 9, 2]), // one call: sequenceid 9, slot 2
        w(&[4]),       // OP_CB_RECALL
        w(&[1]),
        other.to_vec(),
        w(&[0, 3]), // truncate FALSE, fh length
        b"fh1\0".to_vec(),
    ]
    .concat();
    let mut e = Enc::new();
    args.encode(&mut e);
    assert_eq!(e.as_slice(), expect);
    assert_eq!(
        CbCompoundArgs::decode(&mut Dec::new(&expect), 0, 2),
        Ok(args)
    );

    let res = [
        w(&[0, 0, 2]), // NFS4_OK, no tag, two results
        w(&[11, 0]),
        SESSION.to_vec(),
        w(&[1, 0, 0, 0]),
        w(&[4, 0]), // CB_RECALL OK
    ]
    .concat();
    let r = CbCompoundRes::decode(&mut Dec::new(&res), 0, 2).unwrap();
    assert_eq!(r.results[1], CbResOp::Recall(Nfsstat4::Ok));
    assert_eq!(r.results[0].status(), Nfsstat4::Ok);
    // More results than operations sent is refused before allocating.
    assert_eq!(
        CbCompoundRes::decode(&mut Dec::new(&res), 0, 1),
        Err(XdrError::TooLong)
    );
    let mut e = Enc::new();
    r.encode(&mut e);
    assert_eq!(e.as_slice(), res);
}

#[test]
fn huge_counts_fail_without_allocating() {
    let decode = |opnum, b: &[u8]| ArgOp::decode(&mut Dec::new(b), opnum).map(|_| ());
    // TEST_STATEID claiming 2^32-1 stateids, with none present.
    assert_eq!(
        decode(OP_TEST_STATEID, &w(&[u32::MAX])),
        Err(XdrError::TooLong)
    );
    // Within the bound but past the bytes present.
    assert_eq!(
        decode(OP_TEST_STATEID, &w(&[1000, 0, 0])),
        Err(XdrError::Short)
    );
    // A bitmap of 9 words; a filehandle of 129 bytes.
    assert_eq!(decode(OP_GETATTR, &w(&[9])), Err(XdrError::TooLong));
    assert_eq!(decode(OP_PUTFH, &w(&[129])), Err(XdrError::TooLong));
    // A CREATE_SESSION with 2^32-1 callback security parameters.
    let b = [w(&[0, 1, 1, 0]), w(&[0; 14]), w(&[1, u32::MAX])].concat();
    assert_eq!(
        ArgOp::decode(&mut Dec::new(&b), OP_CREATE_SESSION),
        Err(XdrError::TooLong)
    );
}
