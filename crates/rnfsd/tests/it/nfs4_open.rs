//! NFSv4.1 OPEN, CLOSE, OPEN_DOWNGRADE, DELEGRETURN, READ, WRITE, COMMIT,
//! LOCK, LOCKT and LOCKU against the real server over TCP, with
//! compounds built from `rnfsd_proto::nfs4` (RFC 8881 §18): create modes,
//! file types, share reservations, stateids, locks seen by NLM and local
//! programs, a read-only export, and reclaims after a restart.

use std::os::fd::AsRawFd;
use std::path::Path;

use crate::common;
use common::nfs4::chan;

use common::nfs::*;
use common::{export_table, write_config, TempDir, TestServer};
use rnfsd_client::{Client, NlmClient};
use rnfsd_proto::nfs4::*;
use rnfsd_proto::nlm::Nlm4Stats;
use rnfsd_xdr::{Dec, Enc};

/// COMPOUND's procedure number.
const COMPOUND: u32 = 1;

/// A v4.1 client: one session, slot 0.
struct V4 {
    c: Client,
    session: SessionId4,
    seq: u32,
    clientid: u64,
}

async fn compound(c: &Client, ops: &[ArgOp<'_>]) -> CompoundRes {
    let mut e = Enc::new();
    encode_compound(&mut e, b"t", 1, ops);
    let rep = c
        .call_raw(NFS4_PROGRAM, NFS_V4, COMPOUND, e.as_slice())
        .await
        .expect("COMPOUND");
    CompoundRes::decode(&mut Dec::new(&rep), 64, ops.len()).expect("COMPOUND4res")
}

impl V4 {
    /// A client `owner` with a session; `complete`: it sends
    /// RECLAIM_COMPLETE (it has nothing to reclaim).
    async fn new(srv: &TestServer, owner: &str, complete: bool) -> V4 {
        let c = connect(srv).await;
        let r = compound(
            &c,
            &[ArgOp::ExchangeId(Box::new(ExchangeId4Args {
                clientowner: ClientOwner4 {
                    verifier: Verifier4([1; 8]),
                    ownerid: Opaque1024(owner.as_bytes().to_vec()),
                },
                flags: 0,
                state_protect: StateProtect4A::None,
                client_impl_id: None,
            }))],
        )
        .await;
        let Some(ResOp::ExchangeId(NfsRes4::Ok(x))) = r.results.first() else {
            panic!("EXCHANGE_ID: {r:?}");
        };
        let clientid = x.clientid;
        let r = compound(
            &c,
            &[ArgOp::CreateSession(Box::new(CreateSession4Args {
                clientid,
                sequence: x.sequenceid,
                flags: 0,
                fore_chan_attrs: chan(),
                back_chan_attrs: chan(),
                cb_program: 0x4000_0000,
                sec_parms: vec![CallbackSecParms4::None],
            }))],
        )
        .await;
        let Some(ResOp::CreateSession(NfsRes4::Ok(s))) = r.results.first() else {
            panic!("CREATE_SESSION: {r:?}");
        };
        let mut v = V4 {
            c,
            session: s.sessionid,
            seq: 1,
            clientid,
        };
        if complete {
            let (st, _) = v
                .call(vec![ArgOp::ReclaimComplete(ReclaimComplete4Args {
                    one_fs: false,
                })])
                .await;
            assert_eq!(st, Nfsstat4::Ok, "RECLAIM_COMPLETE");
        }
        v
    }

    /// `ops` after a SEQUENCE: the compound's status and the results
    /// after SEQUENCE's.
    async fn call(&mut self, ops: Vec<ArgOp<'_>>) -> (Nfsstat4, Vec<ResOp>) {
        let mut all = vec![ArgOp::Sequence(Sequence4Args {
            sessionid: self.session,
            sequenceid: self.seq,
            slotid: 0,
            highest_slotid: 0,
            cachethis: false,
        })];
        all.extend(ops);
        let r = compound(&self.c, &all).await;
        self.seq += 1;
        assert!(
            matches!(r.results.first(), Some(ResOp::Sequence(NfsRes4::Ok(_)))),
            "SEQUENCE: {:?}",
            r.results.first()
        );
        (r.status, r.results.into_iter().skip(1).collect())
    }

    /// The handle of `path` (through the pseudo-filesystem).
    async fn handle(&mut self, path: &Path) -> NfsFh4 {
        let mut ops = vec![ArgOp::PutRootFh];
        for c in path.components().skip(1) {
            ops.push(ArgOp::Lookup(Lookup4Args {
                objname: Component4(c.as_os_str().as_encoded_bytes().to_vec()),
            }));
        }
        ops.push(ArgOp::GetFh);
        let (st, r) = self.call(ops).await;
        assert_eq!(st, Nfsstat4::Ok, "LOOKUP of {}", path.display());
        match r.last() {
            Some(ResOp::GetFh(NfsRes4::Ok(fh))) => fh.clone(),
            other => panic!("GETFH: {other:?}"),
        }
    }

    /// OPEN in `dir` (or of `dir` itself for claims by handle), then GETFH.
    async fn open(
        &mut self,
        dir: &NfsFh4,
        owner: &str,
        access: u32,
        deny: u32,
        openhow: OpenFlag4,
        claim: OpenClaim4,
    ) -> Result<(Open4ResOk, NfsFh4), Nfsstat4> {
        let (st, r) = self
            .call(vec![
                ArgOp::PutFh(PutFh4Args {
                    object: dir.clone(),
                }),
                ArgOp::Open(Box::new(Open4Args {
                    seqid: 0,
                    share_access: access,
                    share_deny: deny,
                    owner: StateOwner4 {
                        clientid: self.clientid,
                        owner: Opaque1024(owner.as_bytes().to_vec()),
                    },
                    openhow,
                    claim,
                })),
                ArgOp::GetFh,
            ])
            .await;
        match (&r[..], st) {
            ([_, ResOp::Open(NfsRes4::Ok(o)), ResOp::GetFh(NfsRes4::Ok(fh))], Nfsstat4::Ok) => {
                Ok((o.clone(), fh.clone()))
            }
            (_, s) => Err(s),
        }
    }

    /// One operation on `fh`: its result.
    async fn on(&mut self, fh: &NfsFh4, op: ArgOp<'_>) -> ResOp {
        let (_, mut r) = self
            .call(vec![ArgOp::PutFh(PutFh4Args { object: fh.clone() }), op])
            .await;
        assert_eq!(r.len(), 2, "PUTFH failed: {r:?}");
        r.pop().expect("a result")
    }
}

/// OPEN of `n` in `root` for both, by owner "o".
async fn ob(
    v: &mut V4,
    root: &NfsFh4,
    n: &str,
    how: OpenFlag4,
) -> Result<(Open4ResOk, NfsFh4), Nfsstat4> {
    v.open(root, "o", BOTH, 0, how, null(n)).await
}

fn name(n: &str) -> Component4 {
    Component4(n.as_bytes().to_vec())
}

fn null(n: &str) -> OpenClaim4 {
    OpenClaim4::Null(name(n))
}

fn attrs(mode: Option<u32>) -> Fattr4 {
    let mut f = Fattr4::default();
    if let Some(m) = mode {
        f.attrmask.insert(FATTR4_MODE);
        let mut e = Enc::new();
        e.u32(m);
        f.attr_vals = e.into_vec();
    }
    f
}

fn guarded(mode: u32) -> OpenFlag4 {
    OpenFlag4::Create(CreateHow4::Guarded(attrs(Some(mode))))
}

const BOTH: u32 = OPEN4_SHARE_ACCESS_BOTH;
const READ: u32 = OPEN4_SHARE_ACCESS_READ;
const WRITE: u32 = OPEN4_SHARE_ACCESS_WRITE;

fn read_op(s: Stateid4, offset: u64, count: u32) -> ArgOp<'static> {
    ArgOp::Read(Read4Args {
        stateid: s,
        offset,
        count,
    })
}

fn write_op(s: Stateid4, offset: u64, data: &[u8], stable: StableHow4) -> ArgOp<'_> {
    ArgOp::Write(Write4ArgsRef {
        stateid: s,
        offset,
        stable,
        data,
    })
}

fn close_op(s: Stateid4) -> ArgOp<'static> {
    ArgOp::Close(Close4Args {
        seqid: 0,
        open_stateid: s,
    })
}

fn status(r: &ResOp) -> Nfsstat4 {
    r.status()
}

/// A server of `dir` with NFSv4 on (`extra`: more export keys).
fn server(dir: &TempDir, cfgdir: &TempDir, state: TempDir, extra: &str) -> TestServer {
    let cfg = write_config(
        cfgdir.path(),
        &format!(
            "[server]\nnfs4 = true\nregister_rpcbind = false\n{}",
            export_table(dir.path(), extra)
        ),
    );
    TestServer::start_config(Path::new(&cfg), dir.path(), state, &[])
}

/// The mode GETATTR gives.
async fn mode_of(v: &mut V4, fh: &NfsFh4) -> u32 {
    let mut want = Bitmap4::new();
    want.insert(FATTR4_MODE);
    match v
        .on(fh, ArgOp::GetAttr(GetAttr4Args { attr_request: want }))
        .await
    {
        ResOp::GetAttr(NfsRes4::Ok(f)) => Dec::new(&f.attr_vals).u32().expect("mode"),
        other => panic!("GETATTR: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn open_creates_by_each_mode_and_refuses_what_is_no_file() {
    let dir = TempDir::new("nfs4-open");
    let cfgdir = TempDir::new("nfs4-open-cfg");
    let srv = server(&dir, &cfgdir, TempDir::new("nfs4-open-state"), "");
    std::fs::create_dir(dir.path().join("d")).unwrap();
    std::os::unix::fs::symlink("d", dir.path().join("l")).unwrap();
    let fifo = std::ffi::CString::new(dir.path().join("p").to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    bounded(async {
        let mut v = V4::new(&srv, "open-modes", true).await;
        let root = v.handle(dir.path()).await;

        // GUARDED4: made once, then NFS4ERR_EXIST; a change to the
        // directory; the mode asked; the open becomes the current state.
        let (g, gfh) = ob(&mut v, &root, "g", guarded(0o640))
            .await
            .expect("GUARDED4");
        assert_eq!(g.stateid.seqid, 1);
        assert_ne!(g.cinfo.before, g.cinfo.after, "the directory changed");
        assert!(g.attrset.contains(FATTR4_MODE));
        assert_eq!(
            g.rflags & OPEN4_RESULT_LOCKTYPE_POSIX,
            OPEN4_RESULT_LOCKTYPE_POSIX
        );
        assert_eq!(g.delegation, OpenDelegation4::None);
        assert_eq!(mode_of(&mut v, &gfh).await, 0o640);
        assert_eq!(
            ob(&mut v, &root, "g", guarded(0o640)).await.unwrap_err(),
            Nfsstat4::Exist
        );
        // The same owner opening again upgrades its stateid (seqid 2).
        let (again, _) = v
            .open(&root, "o", READ, 0, OpenFlag4::NoCreate, null("g"))
            .await
            .expect("open again");
        assert_eq!(
            (again.stateid.other, again.stateid.seqid),
            (g.stateid.other, 2)
        );

        // UNCHECKED4 over an existing file: opened, truncated by size 0.
        std::fs::write(dir.path().join("u"), b"old data").unwrap();
        let mut sized = Fattr4::default();
        sized.attrmask.insert(FATTR4_SIZE);
        sized.attr_vals = 0u64.to_be_bytes().to_vec();
        let (u, _) = ob(
            &mut v,
            &root,
            "u",
            OpenFlag4::Create(CreateHow4::Unchecked(sized.clone())),
        )
        .await
        .expect("UNCHECKED4 of an existing file");
        assert!(u.attrset.contains(FATTR4_SIZE));
        assert_eq!(std::fs::metadata(dir.path().join("u")).unwrap().len(), 0);
        // ... which a read-only open may not ask for.
        std::fs::write(dir.path().join("u"), b"old data").unwrap();
        let r = v
            .open(
                &root,
                "o2",
                READ,
                0,
                OpenFlag4::Create(CreateHow4::Unchecked(sized)),
                null("u"),
            )
            .await;
        assert_eq!(r.unwrap_err(), Nfsstat4::Inval);
        assert_eq!(std::fs::metadata(dir.path().join("u")).unwrap().len(), 8);

        // EXCLUSIVE4_1: the verifier and the attributes; a retry with the
        // same verifier opens the same file, another is NFS4ERR_EXIST.
        let excl = |verf: u8, mode: u32| {
            OpenFlag4::Create(CreateHow4::Exclusive41 {
                verf: Verifier4([verf; 8]),
                attrs: attrs(Some(mode)),
            })
        };
        let (x, xfh) = ob(&mut v, &root, "x", excl(7, 0o600))
            .await
            .expect("EXCLUSIVE4_1");
        for b in [FATTR4_TIME_ACCESS, FATTR4_TIME_MODIFY, FATTR4_MODE] {
            assert!(x.attrset.contains(b), "attrset {b}");
        }
        assert_eq!(mode_of(&mut v, &xfh).await, 0o600);
        let (_, again) = ob(&mut v, &root, "x", excl(7, 0o600))
            .await
            .expect("a retry");
        assert_eq!(again, xfh);
        assert_eq!(
            ob(&mut v, &root, "x", excl(8, 0o600)).await.unwrap_err(),
            Nfsstat4::Exist
        );
        // Only suppattr_exclcreat's attributes go with the verifier.
        let mut times = Fattr4::default();
        times.attrmask.insert(FATTR4_TIME_MODIFY_SET);
        times.attr_vals = 0u32.to_be_bytes().to_vec();
        let r = ob(
            &mut v,
            &root,
            "x2",
            OpenFlag4::Create(CreateHow4::Exclusive41 {
                verf: Verifier4([1; 8]),
                attrs: times,
            }),
        )
        .await;
        assert_eq!(r.unwrap_err(), Nfsstat4::Inval);
        // EXCLUSIVE4 likewise.
        let e4 = |verf: u8| OpenFlag4::Create(CreateHow4::Exclusive(Verifier4([verf; 8])));
        let (_, e4fh) = ob(&mut v, &root, "e", e4(3)).await.expect("EXCLUSIVE4");
        assert_eq!(ob(&mut v, &root, "e", e4(3)).await.expect("retry").1, e4fh);
        assert_eq!(
            ob(&mut v, &root, "e", e4(4)).await.unwrap_err(),
            Nfsstat4::Exist
        );

        // Not regular files (§18.16.3), and nothing there.
        for (n, want) in [
            ("d", Nfsstat4::IsDir),
            ("l", Nfsstat4::Symlink),
            ("p", Nfsstat4::WrongType),
            ("missing", Nfsstat4::NoEnt),
        ] {
            let r = v
                .open(&root, "o", READ, 0, OpenFlag4::NoCreate, null(n))
                .await;
            assert_eq!(r.unwrap_err(), want, "OPEN of {n}");
        }
        let r = v
            .open(&root, "o", READ, 0, OpenFlag4::NoCreate, null(".."))
            .await;
        assert_eq!(r.unwrap_err(), Nfsstat4::BadName);
        // Only CLAIM_NULL creates.
        let r = v
            .open(&gfh, "o", BOTH, 0, guarded(0o644), OpenClaim4::Fh)
            .await;
        assert_eq!(r.unwrap_err(), Nfsstat4::Inval);
        // CLAIM_FH opens the current filehandle.
        let (fh_open, same) = v
            .open(
                &gfh,
                "fh-owner",
                READ,
                0,
                OpenFlag4::NoCreate,
                OpenClaim4::Fh,
            )
            .await
            .expect("CLAIM_FH");
        assert_eq!(same, gfh);
        assert_eq!(fh_open.cinfo.before, 0);

        // No delegations: a client asking learns why; delegation claims
        // name no delegation of ours.
        let r = v
            .open(
                &root,
                "w",
                READ | OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
                0,
                OpenFlag4::NoCreate,
                null("g"),
            )
            .await
            .expect("OPEN wanting no delegation");
        assert_eq!(
            r.0.delegation,
            OpenDelegation4::NoneExt(OpenNoneDelegation4::Why(WhyNoDelegation4::NotWanted))
        );
        let r = v
            .open(
                &root,
                "w",
                READ | OPEN4_SHARE_ACCESS_WANT_READ_DELEG,
                0,
                OpenFlag4::NoCreate,
                null("g"),
            )
            .await
            .expect("OPEN wanting a delegation");
        assert!(matches!(r.0.delegation, OpenDelegation4::NoneExt(_)));
        // Seqid 0: whatever the open's seqid is now.
        let current = Stateid4 {
            seqid: 0,
            ..g.stateid
        };
        let r = v
            .open(
                &gfh,
                "o",
                READ,
                0,
                OpenFlag4::NoCreate,
                OpenClaim4::DelegCurFh(current),
            )
            .await;
        assert_eq!(r.unwrap_err(), Nfsstat4::BadStateid, "an open stateid");
        let r = v
            .open(
                &gfh,
                "o",
                READ,
                0,
                OpenFlag4::NoCreate,
                OpenClaim4::DelegPrevFh,
            )
            .await;
        assert_eq!(r.unwrap_err(), Nfsstat4::NotSupp);
        let r = v
            .on(
                &gfh,
                ArgOp::DelegReturn(DelegReturn4Args {
                    deleg_stateid: current,
                }),
            )
            .await;
        assert_eq!(status(&r), Nfsstat4::BadStateid);
        // Bad share bits.
        let r = v
            .open(&root, "o", 0, 0, OpenFlag4::NoCreate, null("g"))
            .await;
        assert_eq!(r.unwrap_err(), Nfsstat4::Inval);
        // A client must send RECLAIM_COMPLETE before a new OPEN (§18.51.3).
        let mut early = V4::new(&srv, "early", false).await;
        let r = early
            .open(&root, "o", READ, 0, OpenFlag4::NoCreate, null("g"))
            .await;
        assert_eq!(r.unwrap_err(), Nfsstat4::Grace);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shares_stateids_and_data() {
    let dir = TempDir::new("nfs4-io");
    let cfgdir = TempDir::new("nfs4-io-cfg");
    let srv = server(&dir, &cfgdir, TempDir::new("nfs4-io-state"), "");
    bounded(async {
        let mut a = V4::new(&srv, "io-a", true).await;
        let mut b = V4::new(&srv, "io-b", true).await;
        let root = a.handle(dir.path()).await;
        let broot = b.handle(dir.path()).await;

        // a holds the file open for both, denying writes to others.
        let (ao, fh) = a
            .open(
                &root,
                "a",
                BOTH,
                OPEN4_SHARE_DENY_WRITE,
                guarded(0o644),
                null("f"),
            )
            .await
            .expect("create");
        let deny = b
            .open(&broot, "b", WRITE, 0, OpenFlag4::NoCreate, null("f"))
            .await;
        assert_eq!(deny.unwrap_err(), Nfsstat4::ShareDenied);
        let deny = b
            .open(
                &broot,
                "b",
                READ,
                OPEN4_SHARE_DENY_READ,
                OpenFlag4::NoCreate,
                null("f"),
            )
            .await;
        assert_eq!(deny.unwrap_err(), Nfsstat4::ShareDenied, "a reads");
        let (bo, _) = b
            .open(&broot, "b", READ, 0, OpenFlag4::NoCreate, null("f"))
            .await
            .expect("a read open");
        // The anonymous stateid may not write what an open denies.
        let r = b
            .on(
                &fh,
                write_op(Stateid4::ANONYMOUS, 0, b"x", StableHow4::Unstable),
            )
            .await;
        assert_eq!(status(&r), Nfsstat4::Locked);
        // b's open is read-only.
        let r = b
            .on(&fh, write_op(bo.stateid, 0, b"x", StableHow4::Unstable))
            .await;
        assert_eq!(status(&r), Nfsstat4::OpenMode);

        // a writes, FILE_SYNC4: the server's write verifier, NFSv3's.
        let data = b"0123456789";
        let w = match a
            .on(&fh, write_op(ao.stateid, 5, data, StableHow4::FileSync))
            .await
        {
            ResOp::Write(NfsRes4::Ok(w)) => w,
            other => panic!("WRITE: {other:?}"),
        };
        assert_eq!((w.count, w.committed), (10, StableHow4::FileSync));
        let s3 = mount(&srv).await;
        let v3fh = rnfsd_proto::nfs3::NfsFh3 { data: fh.0.clone() };
        assert_eq!(commit(&s3.nfs, &v3fh).await.verf.0, w.writeverf.0);
        // UNSTABLE, then COMMIT with the same verifier.
        let r = a
            .on(&fh, write_op(ao.stateid, 15, b"!", StableHow4::Unstable))
            .await;
        assert_eq!(status(&r), Nfsstat4::Ok);
        match a
            .on(
                &fh,
                ArgOp::Commit(Commit4Args {
                    offset: 0,
                    count: 0,
                }),
            )
            .await
        {
            ResOp::Commit(NfsRes4::Ok(v)) => assert_eq!(v.0, w.writeverf.0),
            other => panic!("COMMIT: {other:?}"),
        }

        // b reads with its stateid: the data and eof; a short read within.
        let want: Vec<u8> = [&[0u8; 5][..], data, b"!"].concat();
        match b.on(&fh, read_op(bo.stateid, 0, 1000)).await {
            ResOp::Read(NfsRes4::Ok(r)) => assert_eq!((r.eof, r.data), (true, want.clone())),
            other => panic!("READ: {other:?}"),
        }
        match b.on(&fh, read_op(bo.stateid, 5, 3)).await {
            ResOp::Read(NfsRes4::Ok(r)) => assert_eq!((r.eof, &r.data[..]), (false, &b"012"[..])),
            other => panic!("READ: {other:?}"),
        }
        // The bypass stateid reads whatever the shares.
        let r = b.on(&fh, read_op(Stateid4::READ_BYPASS, 0, 4)).await;
        assert_eq!(status(&r), Nfsstat4::Ok);
        // Another client's stateid, a forged one, one of another file.
        let r = b.on(&fh, read_op(ao.stateid, 0, 4)).await;
        assert_eq!(status(&r), Nfsstat4::BadStateid);
        let mut forged = bo.stateid;
        forged.other[11] ^= 1;
        let r = b.on(&fh, read_op(forged, 0, 4)).await;
        assert_eq!(status(&r), Nfsstat4::BadStateid);
        let (other, ofh) = b
            .open(&broot, "b", BOTH, 0, guarded(0o644), null("g"))
            .await
            .expect("another file");
        let r = b.on(&fh, read_op(other.stateid, 0, 4)).await;
        assert_eq!(status(&r), Nfsstat4::BadStateid);
        // READ of a directory.
        let r = b.on(&broot, read_op(Stateid4::ANONYMOUS, 0, 4)).await;
        assert_eq!(status(&r), Nfsstat4::IsDir);

        // OPEN_DOWNGRADE goes back to what one of the owner's OPENs asked
        // for (knfsd's rule): first one with neither write nor a deny.
        let down_to = |s: Stateid4, access: u32, deny: u32| {
            ArgOp::OpenDowngrade(OpenDowngrade4Args {
                open_stateid: s,
                seqid: 0,
                share_access: access,
                share_deny: deny,
            })
        };
        let r = a.on(&fh, down_to(ao.stateid, READ, 0)).await;
        assert_eq!(status(&r), Nfsstat4::Inval, "no OPEN asked for that");
        let (up, _) = a
            .open(&root, "a", READ, 0, OpenFlag4::NoCreate, null("f"))
            .await
            .expect("a second OPEN by the owner");
        assert_eq!((up.stateid.other, up.stateid.seqid), (ao.stateid.other, 2));
        let down = match a.on(&fh, down_to(up.stateid, READ, 0)).await {
            ResOp::OpenDowngrade(NfsRes4::Ok(s)) => s,
            other => panic!("OPEN_DOWNGRADE: {other:?}"),
        };
        assert_eq!((down.other, down.seqid), (ao.stateid.other, 3));
        let r = a.on(&fh, read_op(ao.stateid, 0, 1)).await;
        assert_eq!(status(&r), Nfsstat4::OldStateid);
        // Nothing beyond what it holds now.
        let r = a.on(&fh, down_to(down, BOTH, 0)).await;
        assert_eq!(status(&r), Nfsstat4::Inval);
        b.open(&broot, "b", WRITE, 0, OpenFlag4::NoCreate, null("f"))
            .await
            .expect("no deny now");

        // CLOSE answers the invalid special stateid, which becomes the
        // current stateid; the closed one is gone. A CLOSE on another
        // file's handle is BAD_STATEID.
        let r = b
            .on(
                &ofh,
                close_op(Stateid4 {
                    seqid: 0,
                    ..bo.stateid
                }),
            )
            .await;
        assert_eq!(status(&r), Nfsstat4::BadStateid);
        let (st, r) = a
            .call(vec![
                ArgOp::PutFh(PutFh4Args { object: fh.clone() }),
                close_op(Stateid4 { seqid: 0, ..down }),
                read_op(Stateid4::CURRENT, 0, 1),
            ])
            .await;
        assert_eq!(r[1], ResOp::Close(NfsRes4::Ok(Stateid4::INVALID)));
        assert_eq!(
            (st, status(&r[2])),
            (Nfsstat4::BadStateid, Nfsstat4::BadStateid)
        );
        let r = a.on(&fh, read_op(down, 0, 1)).await;
        assert_eq!(status(&r), Nfsstat4::BadStateid);

        // OPEN, WRITE and CLOSE by the current stateid in one compound.
        let (st, r) = a
            .call(vec![
                ArgOp::PutFh(PutFh4Args {
                    object: root.clone(),
                }),
                ArgOp::Open(Box::new(Open4Args {
                    seqid: 0,
                    share_access: WRITE,
                    share_deny: 0,
                    owner: StateOwner4 {
                        clientid: 0,
                        owner: Opaque1024(b"cur".to_vec()),
                    },
                    openhow: guarded(0o600),
                    claim: null("cur"),
                })),
                write_op(Stateid4::CURRENT, 0, b"abc", StableHow4::DataSync),
                close_op(Stateid4::CURRENT),
            ])
            .await;
        assert_eq!(st, Nfsstat4::Ok, "{r:?}");
        assert_eq!(std::fs::read(dir.path().join("cur")).unwrap(), b"abc");
    })
    .await;
}

/// Holds an OFD lock on `path` in this process (as a local program).
fn ofd_lock(f: &std::fs::File, kind: i32, cmd: i32, start: i64, len: i64) -> libc::flock {
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as i16;
    fl.l_whence = libc::SEEK_SET as i16;
    fl.l_start = start;
    fl.l_len = len;
    let r = unsafe { libc::fcntl(f.as_raw_fd(), cmd, &mut fl) };
    assert!(r == 0 || (cmd == libc::F_OFD_SETLK && r == -1), "fcntl");
    fl
}

fn lock_op(kind: NfsLockType4, offset: u64, length: u64, locker: Locker4) -> ArgOp<'static> {
    ArgOp::Lock(Box::new(Lock4Args {
        locktype: kind,
        reclaim: false,
        offset,
        length,
        locker,
    }))
}

fn new_owner(open: Stateid4, owner: &str) -> Locker4 {
    Locker4::OpenOwner(OpenToLockOwner4 {
        open_seqid: 0,
        open_stateid: open,
        lock_seqid: 0,
        lock_owner: StateOwner4 {
            clientid: 0,
            owner: Opaque1024(owner.as_bytes().to_vec()),
        },
    })
}

fn existing(s: Stateid4) -> Locker4 {
    Locker4::LockOwner(ExistLockOwner4 {
        lock_stateid: s,
        lock_seqid: 0,
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn locks_are_seen_by_v4_clients_nlm_and_local_programs() {
    let dir = TempDir::new("nfs4-lock");
    let cfgdir = TempDir::new("nfs4-lock-cfg");
    let srv = server(&dir, &cfgdir, TempDir::new("nfs4-lock-state"), "");
    bounded(async {
        let mut a = V4::new(&srv, "lock-a", true).await;
        let mut b = V4::new(&srv, "lock-b", true).await;
        let root = a.handle(dir.path()).await;
        let broot = b.handle(dir.path()).await;
        let (ao, fh) = a
            .open(&root, "a", BOTH, 0, guarded(0o666), null("f"))
            .await
            .expect("create");
        let (bo, _) = b
            .open(&broot, "b", READ, 0, OpenFlag4::NoCreate, null("f"))
            .await
            .expect("open");

        // a write-locks 0..100 as a new lock owner.
        let la = match a
            .on(
                &fh,
                lock_op(NfsLockType4::Write, 0, 100, new_owner(ao.stateid, "la")),
            )
            .await
        {
            ResOp::Lock(Lock4Res::Ok(s)) => s,
            other => panic!("LOCK: {other:?}"),
        };
        assert_eq!(la.seqid, 1);
        // b meets it, and learns whose it is.
        let want = Lock4Denied {
            offset: 0,
            length: 100,
            locktype: NfsLockType4::Write,
            owner: StateOwner4 {
                clientid: a.clientid,
                owner: Opaque1024(b"la".to_vec()),
            },
        };
        let r = b
            .on(
                &fh,
                lock_op(NfsLockType4::ReadW, 50, 10, new_owner(bo.stateid, "lb")),
            )
            .await;
        assert_eq!(r, ResOp::Lock(Lock4Res::Denied(want.clone())));
        let r = b
            .on(
                &fh,
                ArgOp::LockT(LockT4Args {
                    locktype: NfsLockType4::Read,
                    offset: 99,
                    length: 1,
                    owner: StateOwner4 {
                        clientid: 0,
                        owner: Opaque1024(b"lb".to_vec()),
                    },
                }),
            )
            .await;
        assert_eq!(r, ResOp::LockT(LockT4Res::Denied(want)));
        // A local program sees the lock: the kernel holds it.
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.path().join("f"))
            .unwrap();
        let fl = ofd_lock(&f, libc::F_RDLCK, libc::F_OFD_GETLK, 0, 1);
        assert_eq!(
            fl.l_type as i32,
            libc::F_WRLCK,
            "the v4 lock, to the kernel"
        );
        // A write lock needs an open for writing; length 0 is invalid.
        let r = b
            .on(
                &fh,
                lock_op(NfsLockType4::Write, 200, 1, new_owner(bo.stateid, "lb")),
            )
            .await;
        assert_eq!(status(&r), Nfsstat4::OpenMode);
        let r = a
            .on(&fh, lock_op(NfsLockType4::Read, 0, 0, existing(la)))
            .await;
        assert_eq!(status(&r), Nfsstat4::Inval);

        // LOCKU: seqid 2; b's lock then takes.
        let lu = match a
            .on(
                &fh,
                ArgOp::LockU(LockU4Args {
                    locktype: NfsLockType4::Write,
                    seqid: 0,
                    lock_stateid: la,
                    offset: 0,
                    length: u64::MAX,
                }),
            )
            .await
        {
            ResOp::LockU(NfsRes4::Ok(s)) => s,
            other => panic!("LOCKU: {other:?}"),
        };
        assert_eq!((lu.other, lu.seqid), (la.other, 2));
        let lb = match b
            .on(
                &fh,
                lock_op(NfsLockType4::Read, 50, 10, new_owner(bo.stateid, "lb")),
            )
            .await
        {
            ResOp::Lock(Lock4Res::Ok(s)) => s,
            other => panic!("LOCK after LOCKU: {other:?}"),
        };

        // An NLM client meets b's lock, and b meets the NLM client's.
        let s3 = mount(&srv).await;
        let nlm = NlmClient::new(s3.client.clone());
        let v3fh = rnfsd_proto::nfs3::NfsFh3 { data: fh.0.clone() };
        let over_b = nlm_lock(&v3fh, "127.0.0.1", 1, 55, 1);
        assert_eq!(lock(&nlm, &over_b, true, false).await, Nlm4Stats::Denied);
        let elsewhere = nlm_lock(&v3fh, "127.0.0.1", 1, 1000, 10);
        assert_eq!(
            lock(&nlm, &elsewhere, true, false).await,
            Nlm4Stats::Granted
        );
        let r = a
            .on(&fh, lock_op(NfsLockType4::Read, 1005, 1, existing(lu)))
            .await;
        match r {
            ResOp::Lock(Lock4Res::Denied(d)) => {
                assert_eq!(
                    (d.offset, d.length, d.locktype),
                    (1000, 10, NfsLockType4::Write)
                );
                assert_eq!(
                    (d.owner.clientid, d.owner.owner.0.len()),
                    (0, 0),
                    "not ours"
                );
            }
            other => panic!("LOCK over an NLM lock: {other:?}"),
        }
        assert_eq!(unlock(&nlm, &elsewhere).await, Nlm4Stats::Granted);

        // A local program's lock likewise.
        ofd_lock(&f, libc::F_WRLCK, libc::F_OFD_SETLK, 2000, 0);
        let r = a
            .on(&fh, lock_op(NfsLockType4::Read, 3000, 1, existing(lu)))
            .await;
        assert!(matches!(r, ResOp::Lock(Lock4Res::Denied(_))), "{r:?}");
        drop(f);

        // CLOSE lets the open's locks go.
        let r = b.on(&fh, close_op(bo.stateid)).await;
        assert_eq!(status(&r), Nfsstat4::Ok);
        let r = a
            .on(&fh, lock_op(NfsLockType4::Write, 50, 10, existing(lu)))
            .await;
        assert!(matches!(r, ResOp::Lock(Lock4Res::Ok(_))), "{r:?}");
        // b's lock stateid went with its open.
        let r = b
            .on(
                &fh,
                ArgOp::LockU(LockU4Args {
                    locktype: NfsLockType4::Read,
                    seqid: 0,
                    lock_stateid: lb,
                    offset: 0,
                    length: 1,
                }),
            )
            .await;
        assert_eq!(status(&r), Nfsstat4::BadStateid);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_export_opens_for_reading_only() {
    let dir = TempDir::new("nfs4-ro");
    let cfgdir = TempDir::new("nfs4-ro-cfg");
    std::fs::write(dir.path().join("f"), b"data").unwrap();
    let srv = server(
        &dir,
        &cfgdir,
        TempDir::new("nfs4-ro-state"),
        "read_only = true\n",
    );
    bounded(async {
        let mut v = V4::new(&srv, "ro", true).await;
        let root = v.handle(dir.path()).await;
        let r = v
            .open(&root, "o", READ, 0, guarded(0o644), null("new"))
            .await;
        assert_eq!(r.unwrap_err(), Nfsstat4::RoFs);
        let r = v
            .open(&root, "o", BOTH, 0, OpenFlag4::NoCreate, null("f"))
            .await;
        assert_eq!(r.unwrap_err(), Nfsstat4::RoFs);
        let r = v
            .open(
                &root,
                "o",
                READ,
                OPEN4_SHARE_DENY_READ,
                OpenFlag4::NoCreate,
                null("f"),
            )
            .await;
        assert_eq!(r.unwrap_err(), Nfsstat4::RoFs, "denying reads needs write");
        let (o, fh) = v
            .open(&root, "o", READ, 0, OpenFlag4::NoCreate, null("f"))
            .await
            .expect("a read open");
        match v.on(&fh, read_op(o.stateid, 0, 10)).await {
            ResOp::Read(NfsRes4::Ok(r)) => assert_eq!(r.data, b"data"),
            other => panic!("READ: {other:?}"),
        }
        let r = v
            .on(
                &fh,
                write_op(Stateid4::ANONYMOUS, 0, b"x", StableHow4::FileSync),
            )
            .await;
        assert_eq!(status(&r), Nfsstat4::RoFs);
        let r = v
            .on(
                &fh,
                ArgOp::Commit(Commit4Args {
                    offset: 0,
                    count: 0,
                }),
            )
            .await;
        assert_eq!(status(&r), Nfsstat4::RoFs);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn after_a_restart_known_clients_reclaim_in_the_grace_period() {
    let dir = TempDir::new("nfs4-grace");
    let cfgdir = TempDir::new("nfs4-grace-cfg");
    let mut srv = server(&dir, &cfgdir, TempDir::new("nfs4-grace-state"), "");
    let fh = bounded(async {
        let mut v = V4::new(&srv, "reclaimer", true).await;
        let root = v.handle(dir.path()).await;
        let (o, fh) = v
            .open(&root, "o", BOTH, 0, guarded(0o644), null("f"))
            .await
            .expect("create");
        let r = v
            .on(
                &fh,
                lock_op(NfsLockType4::Write, 0, 10, new_owner(o.stateid, "l")),
            )
            .await;
        assert!(matches!(r, ResOp::Lock(Lock4Res::Ok(_))), "{r:?}");
        fh
    })
    .await;
    srv.restart();
    bounded(async {
        let mut other = V4::new(&srv, "newcomer", true).await;
        let root = other.handle(dir.path()).await;
        // In the grace period new state waits.
        let r = other
            .open(&root, "o", READ, 0, OpenFlag4::NoCreate, null("f"))
            .await;
        assert_eq!(r.unwrap_err(), Nfsstat4::Grace);
        // A client not known before may not reclaim.
        let mut stranger = V4::new(&srv, "stranger", false).await;
        let r = stranger
            .open(
                &fh,
                "o",
                READ,
                0,
                OpenFlag4::NoCreate,
                OpenClaim4::Previous(OpenDelegationType4::None),
            )
            .await;
        assert_eq!(r.unwrap_err(), Nfsstat4::ReclaimBad);
        // The known client reclaims its open and its lock.
        let mut v = V4::new(&srv, "reclaimer", false).await;
        let (o, _) = v
            .open(
                &fh,
                "o",
                BOTH,
                0,
                OpenFlag4::NoCreate,
                OpenClaim4::Previous(OpenDelegationType4::None),
            )
            .await
            .expect("CLAIM_PREVIOUS");
        let r = v
            .on(
                &fh,
                ArgOp::Lock(Box::new(Lock4Args {
                    locktype: NfsLockType4::Write,
                    reclaim: true,
                    offset: 0,
                    length: 10,
                    locker: new_owner(o.stateid, "l"),
                })),
            )
            .await;
        assert!(matches!(r, ResOp::Lock(Lock4Res::Ok(_))), "{r:?}");
        // Its RECLAIM_COMPLETE ends the grace period (no other client was
        // known); reclaims are then refused and new opens go.
        let (st, _) = v
            .call(vec![ArgOp::ReclaimComplete(ReclaimComplete4Args {
                one_fs: false,
            })])
            .await;
        assert_eq!(st, Nfsstat4::Ok);
        let r = v
            .open(
                &fh,
                "o2",
                READ,
                0,
                OpenFlag4::NoCreate,
                OpenClaim4::Previous(OpenDelegationType4::None),
            )
            .await;
        assert_eq!(r.unwrap_err(), Nfsstat4::NoGrace);
        let (ro, _) = other
            .open(&root, "o", READ, 0, OpenFlag4::NoCreate, null("f"))
            .await
            .expect("after the grace period");
        let r = other
            .on(
                &fh,
                lock_op(NfsLockType4::Read, 5, 1, new_owner(ro.stateid, "x")),
            )
            .await;
        assert!(
            matches!(r, ResOp::Lock(Lock4Res::Denied(_))),
            "the reclaimed lock holds: {r:?}"
        );
    })
    .await;
}
