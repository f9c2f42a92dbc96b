//! End to end, NFSv4.1 (RFC 8881) against the real server over TCP, with
//! compounds built from rnfsd-proto: minor versions, the sessionless
//! rules, EXCHANGE_ID and CREATE_SESSION, SEQUENCE's reply cache, the
//! pseudo-filesystem, and one handle format for NFSv3 and NFSv4.

use crate::common;

use common::nfs::*;
use common::{TempDir, TestServer};
use rnfsd_client::{Auth, ClientConfig, ClientError, RpcConnection};
use rnfsd_proto::nfs4::*;
use rnfsd_proto::rpc::AuthSys;
use rnfsd_xdr::{Dec, Enc, Xdr};

const NFS4: u32 = 100003;
const COMPOUND: u32 = 1;

async fn connect(srv: &TestServer) -> RpcConnection {
    let cfg = ClientConfig {
        auth: Auth::sys(0, 0, &[], "nfs4-e2e"),
        ..ClientConfig::default()
    };
    RpcConnection::connect(srv.addr, &cfg)
        .await
        .expect("connect")
}

fn args(minor: u32, ops: &[ArgOp<'_>]) -> Vec<u8> {
    let mut e = Enc::new();
    encode_compound(&mut e, b"e2e", minor, ops);
    e.into_vec()
}

async fn raw(c: &RpcConnection, body: &[u8]) -> Vec<u8> {
    c.call_raw(NFS4, 4, COMPOUND, body).await.expect("COMPOUND")
}

async fn compound(c: &RpcConnection, minor: u32, ops: &[ArgOp<'_>]) -> CompoundRes {
    let r = raw(c, &args(minor, ops)).await;
    CompoundRes::decode(&mut Dec::new(&r), 64, 64).expect("COMPOUND4res")
}

/// EXCHANGE_ID and CREATE_SESSION: the session's id.
async fn session(c: &RpcConnection, owner: &[u8]) -> SessionId4 {
    session_with(c, owner, 0).await
}

/// As `session`, with CREATE_SESSION's `flags` (a back channel).
async fn session_with(c: &RpcConnection, owner: &[u8], flags: u32) -> SessionId4 {
    let eid = ArgOp::ExchangeId(Box::new(ExchangeId4Args {
        clientowner: ClientOwner4 {
            verifier: Verifier4([7; 8]),
            ownerid: Opaque1024(owner.to_vec()),
        },
        flags: 0,
        state_protect: StateProtect4A::None,
        client_impl_id: None,
    }));
    let r = compound(c, 1, &[eid]).await;
    let ResOp::ExchangeId(NfsRes4::Ok(ok)) = &r.results[0] else {
        panic!("EXCHANGE_ID: {r:?}");
    };
    assert_eq!(ok.flags & EXCHGID4_FLAG_CONFIRMED_R, 0, "a new client");
    let chan = ChannelAttrs4 {
        headerpadsize: 0,
        maxrequestsize: 1 << 20,
        maxresponsesize: 1 << 20,
        maxresponsesize_cached: 8192,
        maxoperations: 16,
        maxrequests: 8,
        rdma_ird: None,
    };
    let cs = ArgOp::CreateSession(Box::new(CreateSession4Args {
        clientid: ok.clientid,
        sequence: ok.sequenceid,
        flags,
        fore_chan_attrs: chan,
        back_chan_attrs: chan,
        cb_program: 0x4000_0000,
        sec_parms: vec![CallbackSecParms4::Sys(AuthSys {
            stamp: 1,
            machine_name: b"e2e".to_vec(),
            uid: 0,
            gid: 0,
            gids: vec![],
        })],
    }));
    let r = compound(c, 1, &[cs]).await;
    let ResOp::CreateSession(NfsRes4::Ok(ok)) = &r.results[0] else {
        panic!("CREATE_SESSION: {r:?}");
    };
    assert!(ok.fore_chan_attrs.maxrequests >= 1 && ok.fore_chan_attrs.maxrequests <= 8);
    assert!(ok.fore_chan_attrs.maxresponsesize_cached <= 8192);
    assert_eq!(ok.flags & flags, flags, "the flags asked for granted");
    ok.sessionid
}

fn seq(id: SessionId4, seqid: u32, slot: u32, cachethis: bool) -> ArgOp<'static> {
    ArgOp::Sequence(Sequence4Args {
        sessionid: id,
        sequenceid: seqid,
        slotid: slot,
        highest_slotid: 0,
        cachethis,
    })
}

fn getattr(bits: &[u32]) -> ArgOp<'static> {
    let mut b = Bitmap4::new();
    for &x in bits {
        b.insert(x);
    }
    ArgOp::GetAttr(GetAttr4Args { attr_request: b })
}

fn component(name: &str) -> Component4 {
    Component4(name.as_bytes().to_vec())
}

/// The values of a GETATTR result that asked for `type` and `fsid`, and
/// optionally `fileid`.
fn type_fsid(r: &ResOp) -> (u32, (u64, u64)) {
    let ResOp::GetAttr(NfsRes4::Ok(f)) = r else {
        panic!("GETATTR: {r:?}");
    };
    let mut d = Dec::new(&f.attr_vals);
    let t = d.u32().unwrap();
    let fsid = (d.u64().unwrap(), d.u64().unwrap());
    (t, fsid)
}

fn start(tag: &str) -> (TempDir, TestServer) {
    let dir = TempDir::new(tag);
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/f"), b"hello").unwrap();
    let srv = TestServer::start_with(dir.path(), &["--no-rpcbind"]);
    (dir, srv)
}

#[tokio::test(flavor = "multi_thread")]
async fn minor_versions_and_the_sessionless_rules() {
    let (_dir, srv) = start("nfs4-minor");
    bounded(async {
        let c = connect(&srv).await;
        // RFC 8881 §16.2.3: minor version 0 (and 3) is refused with no
        // results; the tag comes back.
        for minor in [0, 3] {
            let r = compound(&c, minor, &[ArgOp::PutRootFh]).await;
            assert_eq!(r.status, Nfsstat4::MinorVersMismatch, "minor {minor}");
            assert!(r.results.is_empty());
            assert_eq!(r.tag, b"e2e");
        }
        // No SEQUENCE first: only the operations that make a session
        // (RFC 8881 §2.10.6.2, §18.46.3).
        let r = compound(&c, 1, &[ArgOp::PutRootFh, ArgOp::GetFh]).await;
        assert_eq!(r.status, Nfsstat4::OpNotInSession);
        assert_eq!(r.results.len(), 1);
        // EXCHANGE_ID must be alone (§18.35.3).
        let eid = ArgOp::ExchangeId(Box::new(ExchangeId4Args {
            clientowner: ClientOwner4 {
                verifier: Verifier4([1; 8]),
                ownerid: Opaque1024(b"alone".to_vec()),
            },
            flags: 0,
            state_protect: StateProtect4A::None,
            client_impl_id: None,
        }));
        let r = compound(&c, 1, &[eid, ArgOp::PutRootFh]).await;
        assert_eq!(r.status, Nfsstat4::NotOnlyOp);
        // An empty compound is fine (§16.2.3).
        let r = compound(&c, 1, &[]).await;
        assert_eq!((r.status, r.results.len()), (Nfsstat4::Ok, 0));
        // An unknown session.
        let r = compound(&c, 1, &[seq(SessionId4([9; 16]), 1, 0, false)]).await;
        assert_eq!(r.status, Nfsstat4::BadSession);
        // Garbage where the head should be: GARBAGE_ARGS.
        match c.call_raw(NFS4, 4, COMPOUND, &[0, 0, 0, 200]).await {
            Err(ClientError::GarbageArgs) => {}
            other => panic!("garbage compound: {other:?}"),
        }
    })
    .await;
}

/// SEQUENCE, PUTFH and GETATTR are read and run apart from the other
/// operations (the GETATTR compound's path): the same rules hold there.
#[tokio::test(flavor = "multi_thread")]
async fn the_getattr_compounds_operations_keep_the_compound_rules() {
    let (_dir, srv) = start("nfs4-hot");
    bounded(async {
        let c = connect(&srv).await;
        let fh = NfsFh4(vec![1; 40]);
        let putfh = || ArgOp::PutFh(PutFh4Args { object: fh.clone() });
        // Without SEQUENCE (§2.10.6.2): the first is refused alone.
        for ops in [
            vec![putfh(), getattr(&[FATTR4_TYPE])],
            vec![getattr(&[FATTR4_TYPE])],
        ] {
            let r = compound(&c, 1, &ops).await;
            assert_eq!((r.status, r.results.len()), (Nfsstat4::OpNotInSession, 1));
        }
        let id = session(&c, b"hot").await;
        // SEQUENCE only first (§18.46.3).
        let r = compound(&c, 1, &[seq(id, 1, 0, false), seq(id, 2, 1, false)]).await;
        assert_eq!((r.status, r.results.len()), (Nfsstat4::SequencePos, 2));
        // GETATTR without a current filehandle.
        let r = compound(&c, 1, &[seq(id, 2, 0, false), getattr(&[FATTR4_TYPE])]).await;
        assert_eq!((r.status, r.results.len()), (Nfsstat4::NoFileHandle, 2));
        assert!(matches!(r.results[1], ResOp::GetAttr(NfsRes4::Fail(_))));
        // A handle that is none of ours, then GETATTR never runs.
        let r = compound(
            &c,
            1,
            &[seq(id, 3, 0, false), putfh(), getattr(&[FATTR4_TYPE])],
        )
        .await;
        assert_eq!(r.results.len(), 2);
        assert!(matches!(r.results[1], ResOp::PutFh(s) if s == r.status && s != Nfsstat4::Ok));
        // The record cut inside PUTFH's handle: BADXDR for it (§15.2).
        let whole = args(1, &[seq(id, 4, 0, false), putfh(), getattr(&[FATTR4_TYPE])]);
        let cut = &whole[..whole.len() - 8 - 20];
        let r = raw(&c, cut).await;
        let r = CompoundRes::decode(&mut Dec::new(&r), 64, 64).expect("COMPOUND4res");
        assert_eq!((r.status, r.results.len()), (Nfsstat4::BadXdr, 2));
        assert_eq!(r.results[1], ResOp::PutFh(Nfsstat4::BadXdr));
        // The record ending where an operation's number should be: that
        // operation is ILLEGAL with BADXDR.
        let whole = args(1, &[seq(id, 5, 0, false), ArgOp::PutRootFh, ArgOp::GetFh]);
        let r = raw(&c, &whole[..whole.len() - 4]).await;
        let r = CompoundRes::decode(&mut Dec::new(&r), 64, 64).expect("COMPOUND4res");
        assert_eq!((r.status, r.results.len()), (Nfsstat4::BadXdr, 3));
        assert_eq!(r.results[2], ResOp::Illegal(Nfsstat4::BadXdr));
        // And the compound itself, with its SEQUENCE result as before.
        let r = compound(
            &c,
            1,
            &[
                seq(id, 6, 0, false),
                ArgOp::PutRootFh,
                getattr(&[FATTR4_TYPE]),
            ],
        )
        .await;
        assert_eq!((r.status, r.results.len()), (Nfsstat4::Ok, 3));
        let ResOp::Sequence(NfsRes4::Ok(s)) = &r.results[0] else {
            panic!("SEQUENCE: {r:?}");
        };
        assert_eq!((s.sessionid, s.sequenceid, s.slotid), (id, 6, 0));
        assert_eq!(type_fsid_type(&r.results[2]), 2, "the root is a directory");
    })
    .await;
}

fn type_fsid_type(r: &ResOp) -> u32 {
    let ResOp::GetAttr(NfsRes4::Ok(f)) = r else {
        panic!("GETATTR: {r:?}");
    };
    Dec::new(&f.attr_vals).u32().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_replay_from_the_slot_and_the_pseudo_fs_joins_the_export() {
    let (dir, srv) = start("nfs4-session");
    bounded(async {
        let c = connect(&srv).await;
        let sid = session(&c, b"e2e-client-1").await;

        // PUTROOTFH is the pseudo root, its own filesystem.
        let r = compound(
            &c,
            1,
            &[
                seq(sid, 1, 0, false),
                ArgOp::PutRootFh,
                getattr(&[FATTR4_TYPE, FATTR4_FSID]),
            ],
        )
        .await;
        assert_eq!(r.status, Nfsstat4::Ok, "{r:?}");
        let (t, pseudo_fsid) = type_fsid(&r.results[2]);
        assert_eq!(t, 2, "a directory");

        // LOOKUP down the export's path crosses into the export: another
        // fsid; LOOKUPP from its root comes back to the pseudo tree.
        let path = dir.path().canonicalize().unwrap();
        let mut ops = vec![seq(sid, 2, 0, false), ArgOp::PutRootFh];
        let comps: Vec<String> = path
            .iter()
            .skip(1)
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        for name in &comps {
            ops.push(ArgOp::Lookup(Lookup4Args {
                objname: component(name),
            }));
        }
        ops.push(getattr(&[FATTR4_TYPE, FATTR4_FSID]));
        ops.push(ArgOp::GetFh);
        ops.push(ArgOp::LookupP);
        ops.push(getattr(&[FATTR4_TYPE, FATTR4_FSID]));
        let r = compound(&c, 1, &ops).await;
        assert_eq!(r.status, Nfsstat4::Ok, "{r:?}");
        let n = r.results.len();
        let (t, export_fsid) = type_fsid(&r.results[n - 4]);
        assert_eq!(t, 2);
        assert_ne!(export_fsid, pseudo_fsid);
        let ResOp::GetFh(NfsRes4::Ok(root_fh)) = &r.results[n - 3] else {
            panic!("GETFH");
        };
        assert_eq!(type_fsid(&r.results[n - 1]).1, pseudo_fsid);

        // Each operation is counted in the statistics (nfsstat's v4
        // operation table): so far 2 SEQUENCEs, 2 PUTROOTFHs, 1 LOOKUPP.
        let snap = rnfsd::admin::query(&srv.state.path().join("admin.sock"), "snapshot")
            .expect("admin socket");
        let snap = rnfsd_stats::Snapshot::from_json(&snap).expect("snapshot");
        let calls = |name: &str| {
            snap.procs
                .iter()
                .find(|p| p.program == "nfs4_op" && p.name == name)
                .map(|p| p.calls)
        };
        assert_eq!(calls("SEQUENCE"), Some(2));
        assert_eq!(calls("PUTROOTFH"), Some(2));
        assert_eq!(calls("LOOKUPP"), Some(1));
        assert_eq!(calls("LOOKUP"), Some(comps.len() as u64));
        assert_eq!(calls("OPEN"), Some(0));
        // Those compounds change nothing: the event loops answered them
        // (run to completion, as NFSv3's GETATTR and LOOKUP).
        let inline: u64 = snap
            .transports
            .iter()
            .map(|t| t.connections.records_inline)
            .sum();
        assert!(inline >= 2, "compounds answered on the loop: {inline}");
        // The state's gauges: one client with one session, no stateids,
        // no grace (no client was known before this start).
        let n = snap.nfs4.expect("NFSv4 gauges");
        assert_eq!((n.clients, n.sessions, n.stateids), (1, 1, 0));
        assert!(!n.in_grace);

        // One handle format: NFSv3's root handle is NFSv4's.
        let v3 = mount(&srv).await;
        assert_eq!(v3.root.data, root_fh.0);

        // A retry of a cached request is answered byte for byte from the
        // slot, without running it again (RFC 8881 §2.10.6.1.3).
        let body = args(
            1,
            &[
                seq(sid, 3, 0, true),
                ArgOp::PutFh(PutFh4Args {
                    object: root_fh.clone(),
                }),
                ArgOp::Lookup(Lookup4Args {
                    objname: component("sub"),
                }),
                getattr(&[FATTR4_TYPE, FATTR4_FSID, FATTR4_CHANGE]),
            ],
        );
        let first = raw(&c, &body).await;
        std::fs::write(dir.path().join("sub/g"), b"changes sub's change attribute").unwrap();
        let again = raw(&c, &body).await;
        assert_eq!(first, again, "the retry comes from the reply cache");
        // The same slot and sequence id with another compound is a false
        // retry (§2.10.6.1.3.1).
        let other = args(1, &[seq(sid, 3, 0, true), ArgOp::PutRootFh]);
        let r = CompoundRes::decode(&mut Dec::new(&raw(&c, &other).await), 64, 8).unwrap();
        assert_eq!(r.status, Nfsstat4::SeqFalseRetry);
        // Skipping a sequence id is misordered.
        let r = compound(&c, 1, &[seq(sid, 99, 0, false)]).await;
        assert_eq!(r.status, Nfsstat4::SeqMisordered);
        // An uncached request's retry says so.
        let body = args(1, &[seq(sid, 4, 0, false), ArgOp::PutRootFh]);
        raw(&c, &body).await;
        let r = CompoundRes::decode(&mut Dec::new(&raw(&c, &body).await), 64, 8).unwrap();
        assert_eq!(r.status, Nfsstat4::RetryUncachedRep);

        // SEQUENCE only first.
        let r = compound(&c, 1, &[seq(sid, 5, 0, false), seq(sid, 6, 0, false)]).await;
        assert_eq!(r.status, Nfsstat4::SequencePos);
        // A handle of nothing of ours.
        let r = compound(
            &c,
            1,
            &[
                seq(sid, 6, 0, false),
                ArgOp::PutFh(PutFh4Args {
                    object: NfsFh4(vec![1, 2]),
                }),
            ],
        )
        .await;
        assert_eq!(r.status, Nfsstat4::BadHandle);
        // No current filehandle.
        let r = compound(&c, 1, &[seq(sid, 7, 0, false), ArgOp::GetFh]).await;
        assert_eq!(r.status, Nfsstat4::NoFileHandle);
        // Names LOOKUP refuses (§18.13.3). A compound whose later
        // operation fails still used its slot's sequence id.
        for (n, (name, want)) in [
            ("", Nfsstat4::Inval),
            (".", Nfsstat4::BadName),
            ("..", Nfsstat4::BadName),
            ("a/b", Nfsstat4::BadName),
            ("no-such", Nfsstat4::NoEnt),
        ]
        .into_iter()
        .enumerate()
        {
            let r = compound(
                &c,
                1,
                &[
                    seq(sid, 8 + n as u32, 0, false),
                    ArgOp::PutFh(PutFh4Args {
                        object: root_fh.clone(),
                    }),
                    ArgOp::Lookup(Lookup4Args {
                        objname: component(name),
                    }),
                ],
            )
            .await;
            assert_eq!(r.status, want, "LOOKUP {name:?}");
        }
    })
    .await;
}

/// maxfilesize is the export filesystem's, the same over NFSv4 as FSINFO's
/// over NFSv3 (a client told more takes writes the server must then fail:
/// xfstests' generic/285).
#[tokio::test(flavor = "multi_thread")]
async fn maxfilesize_is_the_export_filesystems_in_both_versions() {
    let (dir, srv) = start("nfs4-maxfilesize");
    bounded(async {
        let v3 = mount(&srv).await;
        let i = ok(
            "FSINFO",
            v3.nfs
                .fsinfo(&rnfsd_client::nfs3::FsInfo3Args {
                    fsroot: v3.root.clone(),
                })
                .await,
        );
        let c = connect(&srv).await;
        let sid = session(&c, b"e2e-maxfilesize").await;
        let r = compound(
            &c,
            1,
            &[
                seq(sid, 1, 0, false),
                ArgOp::PutFh(PutFh4Args {
                    object: NfsFh4(v3.root.data.clone()),
                }),
                getattr(&[FATTR4_MAXFILESIZE]),
            ],
        )
        .await;
        let ResOp::GetAttr(NfsRes4::Ok(f)) = &r.results[2] else {
            panic!("GETATTR: {r:?}");
        };
        let v4 = Dec::new(&f.attr_vals).u64().unwrap();
        assert_eq!(v4, i.maxfilesize);
        // The probe found the filesystem's limit where it has one below
        // the VFS's: a file may not pass it.
        if v4 < i64::MAX as u64 {
            let big = std::fs::File::create(dir.path().join("big")).unwrap();
            assert!(big.set_len(v4).is_ok() && big.set_len(v4 + 1).is_err());
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn minor_version_two_answers_its_unserved_operations_notsupp() {
    let (_dir, srv) = start("nfs4-minor2");
    bounded(async {
        let c = connect(&srv).await;
        let sid = session(&c, b"e2e-client-2").await;
        // SEQUENCE, PUTROOTFH, then WRITE_SAME (opnum 70, not served:
        // its arguments are never read).
        let mut e = Enc::new();
        CompoundHead {
            tag: b"",
            minorversion: 2,
            nops: 3,
        }
        .encode(&mut e);
        seq(sid, 1, 0, false).encode(&mut e);
        ArgOp::PutRootFh.encode(&mut e);
        e.u32(OP_WRITE_SAME);
        Stateid4::default().encode(&mut e);
        e.u64(0);
        e.u32(0);
        let r = raw(&c, e.as_slice()).await;
        let mut d = Dec::new(&r);
        assert_eq!(d.u32().unwrap(), Nfsstat4::NotSupp as u32);
        d.opaque(64).unwrap();
        assert_eq!(d.u32().unwrap(), 3, "three results");
        ResOp::decode(&mut d).unwrap();
        ResOp::decode(&mut d).unwrap();
        assert_eq!(
            (d.u32().unwrap(), d.u32().unwrap()),
            (OP_WRITE_SAME, Nfsstat4::NotSupp as u32)
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn client_records_are_written_as_the_server_after_a_squashed_caller() {
    // One worker thread and nothing run on the event loops, root
    // squashed: the LOOKUP below leaves that
    // thread's filesystem identity a user's, which cannot write the
    // state directory; CREATE_SESSION, which writes the client's record
    // there, must still succeed.
    let dir = TempDir::new("nfs4-creds");
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let srv = TestServer::start_defaults(
        dir.path(),
        &[
            "--no-rpcbind",
            "--threads",
            "1",
            "--pools",
            "shared",
            "--no-run-inline",
        ],
    );
    bounded(async {
        let v3 = mount(&srv).await;
        let user = v3.nfs.with_auth(Auth::sys(1000, 1000, &[], "u"));
        let (_fh, attr) = create_file(&user, &v3.root, "owned-by-1000").await;
        assert_eq!(attr.uid, 1000);
        // A LOOKUP as the user, on the one worker (a change of a `sync`
        // export ran in the blocking pool).
        lookup(&user, &v3.root, "owned-by-1000").await;
        let c = connect(&srv).await;
        session(&c, b"after-a-user").await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_back_channel_is_probed_and_a_silent_one_is_reported_down() {
    let (_dir, srv) = start("nfs4-backchannel");
    bounded(async {
        // Our client answers CB_NULL on its own connection.
        let cfg = ClientConfig {
            auth: Auth::sys(0, 0, &[], "nfs4-e2e"),
            ..ClientConfig::default()
        };
        let v4 = rnfsd_client::Nfs4Config {
            back_channel: true,
            ..rnfsd_client::Nfs4Config::default()
        };
        let c = rnfsd_client::Nfs4Client::connect(srv.addr, &cfg, &v4)
            .await
            .expect("session with a back channel");
        let t0 = std::time::Instant::now();
        while c.callback_calls() == 0 && t0.elapsed() < std::time::Duration::from_secs(5) {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(c.callback_calls() >= 1, "CB_NULL reached the client");
        c.run(&[ArgOp::PutRootFh]).await.unwrap();
        assert_eq!(c.status_flags() & SEQ4_STATUS_CB_PATH_DOWN, 0);

        // A client that never answers calls on its connection: once the
        // probe gives up, SEQUENCE says the path is down.
        let raw_conn = connect(&srv).await;
        let sid = session_with(
            &raw_conn,
            b"silent-client",
            CREATE_SESSION4_FLAG_CONN_BACK_CHAN,
        )
        .await;
        let mut seqid = 1;
        let t0 = std::time::Instant::now();
        let flags = loop {
            let r = compound(&raw_conn, 1, &[seq(sid, seqid, 0, false)]).await;
            seqid += 1;
            let ResOp::Sequence(NfsRes4::Ok(ok)) = &r.results[0] else {
                panic!("SEQUENCE: {r:?}");
            };
            if ok.status_flags & SEQ4_STATUS_CB_PATH_DOWN != 0
                || t0.elapsed() > std::time::Duration::from_secs(12)
            {
                break ok.status_flags;
            }
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        };
        assert_ne!(flags & SEQ4_STATUS_CB_PATH_DOWN, 0, "path down reported");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn no_nfs4_serves_nfsv3_only() {
    let dir = TempDir::new("nfs4-off");
    let srv = TestServer::start_with(dir.path(), &["--no-rpcbind", "--no-nfs4"]);
    bounded(async {
        let c = connect(&srv).await;
        // RFC 5531 §9: the versions served, NFSv3's alone.
        match c.call_raw(NFS4, 4, 0, &[]).await {
            Err(ClientError::ProgMismatch { low: 3, high: 3 }) => {}
            other => panic!("NFSv4 NULL with NFSv4 off: {other:?}"),
        }
        // And by default, both.
        let on = TestServer::start_with(dir.path(), &["--no-rpcbind"]);
        let c = connect(&on).await;
        c.call_raw(NFS4, 4, 0, &[]).await.expect("NFSv4 NULL");
        match c.call_raw(NFS4, 5, 0, &[]).await {
            Err(ClientError::ProgMismatch { low: 3, high: 4 }) => {}
            other => panic!("NFS version 5: {other:?}"),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn prepared_compounds_on_a_held_slot_carry_its_sequence_ids() {
    use rnfsd_client::nfs4::PreparedOps;
    let (dir, srv) = start("nfs4-prepared");
    bounded(async {
        let cfg = ClientConfig {
            auth: Auth::sys(0, 0, &[], "nfs4-e2e"),
            ..ClientConfig::default()
        };
        // An empty tag, as the Linux client sends.
        let v4 = rnfsd_client::Nfs4Config {
            slots: 4,
            tag: Vec::new(),
            ..rnfsd_client::Nfs4Config::default()
        };
        let c = rnfsd_client::Nfs4Client::connect(srv.addr, &cfg, &v4)
            .await
            .expect("session");
        let root = c
            .lookup_path(dir.path().to_str().unwrap())
            .await
            .expect("export root");
        let f = c.lookup_from(&root, "sub/f").await.expect("sub/f");
        let mask = Bitmap4::from_bits(&[FATTR4_TYPE, FATTR4_SIZE, FATTR4_OWNER]).unwrap();
        let ops = |fh: NfsFh4| {
            PreparedOps::new(&[
                ArgOp::PutFh(PutFh4Args { object: fh }),
                ArgOp::GetAttr(GetAttr4Args { attr_request: mask }),
            ])
        };
        let p = ops(f);
        let mut held = c.slot().await.expect("slot");
        let (id, first) = (held.id(), held.seqid());
        for n in 1..=5 {
            let r = c
                .compound_prepared_on(&mut held, &p, true)
                .await
                .expect("COMPOUND");
            assert!(r.all_ok(3), "{r:?}");
            assert_eq!(held.seqid(), first + n);
            let s = r.sequence.expect("SEQUENCE's result");
            assert_eq!((s.slotid, s.sequenceid), (id, first + n));
        }
        // Calls meanwhile take other slots.
        let other = c.slot().await.expect("another slot");
        assert_ne!(other.id(), id);
        drop(other);
        // A failed PUTFH is seen; SEQUENCE still took the next id.
        let bad = ops(NfsFh4(vec![0xab; 16]));
        let r = c
            .compound_prepared_on(&mut held, &bad, true)
            .await
            .expect("COMPOUND");
        assert!(!r.all_ok(3));
        assert_eq!(r.first_failed.map(|(op, _)| op), Some(OP_PUTFH), "{r:?}");
        assert_eq!(held.seqid(), first + 6);
        assert!(!held.is_lost());
        drop(held);
        // The table keeps the id for the slot's next taker.
        let again = c.slot().await.expect("slot");
        assert_eq!((again.id(), again.seqid()), (id, first + 6));
        drop(again);
        assert!(c.compound_prepared(&p, true).await.unwrap().all_ok(3));
    })
    .await;
}
