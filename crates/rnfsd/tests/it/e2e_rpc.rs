//! End to end: ONC RPC (RFC 5531) error paths and record marking against the
//! real server, through the client's raw-call API and plain TCP sockets.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::nfs::*;
use common::{TempDir, TestServer};
use rnfsd_client::nfs3::*;
use rnfsd_client::{Auth, AuthStat, Client, ClientError};
use rnfsd_proto::rpc::{AcceptStat, AuthSys, RejectStat, ReplyHeader};
use rnfsd_xdr::{Dec, Enc};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const MOUNT_PROGRAM: u32 = 100005;

fn start(tag: &str) -> (TempDir, TestServer) {
    let dir = TempDir::new(tag);
    std::fs::write(dir.path().join("f"), b"x").expect("write");
    let srv = TestServer::start_with(dir.path(), &["--no-rpcbind"]);
    (dir, srv)
}

/// A GETATTR argument for `fh`, encoded.
fn getattr_args(fh: &NfsFh3) -> Vec<u8> {
    rnfsd_xdr::to_vec(&GetAttr3Args { object: fh.clone() })
}

/// The call body after the xid: msg_type CALL, `rpcvers`, program, version,
/// procedure, credential, verifier, arguments.
#[allow(clippy::too_many_arguments)]
fn call_body(
    rpcvers: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    cred: (u32, &[u8]),
    verf: (u32, &[u8]),
    args: &[u8],
) -> Vec<u8> {
    let mut e = Enc::new();
    e.u32(0);
    e.u32(rpcvers);
    e.u32(prog);
    e.u32(vers);
    e.u32(proc_);
    e.u32(cred.0);
    e.opaque(cred.1);
    e.u32(verf.0);
    e.opaque(verf.1);
    e.raw(args);
    e.into_vec()
}

fn auth_sys_body(p: &AuthSys) -> Vec<u8> {
    rnfsd_xdr::to_vec(p)
}

fn root_sys() -> AuthSys {
    AuthSys {
        stamp: 1,
        machine_name: b"e2e".to_vec(),
        uid: 0,
        gid: 0,
        gids: vec![],
    }
}

fn decode_reply(rec: &[u8]) -> ReplyHeader {
    let mut d = Dec::new(rec);
    ReplyHeader::decode(&mut d)
        .unwrap_or_else(|e| panic!("undecodable reply header {rec:02x?}: {e}"))
        .1
}

#[tokio::test(flavor = "multi_thread")]
async fn rpc_level_rejections() {
    let (_dir, srv) = start("e2e-rpc");
    bounded(async {
        let s = mount(&srv).await;
        let c = &s.client;
        let args = getattr_args(&s.root);

        // RFC 5531 §9: RPC version other than 2 -> RPC_MISMATCH {2, 2}.
        for v in [1u32, 3, 0xffff_ffff] {
            let body = call_body(v, NFS_PROGRAM, 3, 0, (0, &[]), (0, &[]), &[]);
            let rec = c.call_message(&body).await.expect("reply to bad rpcvers");
            assert_eq!(
                decode_reply(&rec),
                ReplyHeader::Denied(RejectStat::RpcMismatch { low: 2, high: 2 }),
                "rpcvers {v}"
            );
        }
        // Unknown program.
        match c.call_raw(200_123, 1, 0, &[]).await {
            Err(ClientError::ProgUnavail) => {}
            other => panic!("unknown program: {other:?}"),
        }
        // NFS versions 2, 5 and others -> PROG_MISMATCH {3, 4} (NFSv3
        // and NFSv4 are served).
        for v in [2u32, 5, 1, 0] {
            match c.call_raw(NFS_PROGRAM, v, 0, &[]).await {
                Err(ClientError::ProgMismatch { low: 3, high: 4 }) => {}
                other => panic!("NFS version {v}: {other:?}"),
            }
        }
        // Procedure 99 and 22 (one past COMMIT).
        for p in [22u32, 99, 0xffff_ffff] {
            match c.call_raw(NFS_PROGRAM, 3, p, &args).await {
                Err(ClientError::ProcUnavail) => {}
                other => panic!("NFS procedure {p}: {other:?}"),
            }
        }
        // Truncated arguments -> GARBAGE_ARGS, for several procedures.
        for (p, a) in [
            (NFSPROC3_GETATTR, &args[..args.len() - 2]),
            (NFSPROC3_GETATTR, &[][..]),
            (NFSPROC3_LOOKUP, &args[..]),
            (NFSPROC3_READ, &args[..]),
            (NFSPROC3_WRITE, &args[..]),
            (NFSPROC3_SETATTR, &args[..]),
        ] {
            match c.call_raw(NFS_PROGRAM, 3, p, a).await {
                Err(ClientError::GarbageArgs) => {}
                other => panic!("procedure {p} with {} argument bytes: {other:?}", a.len()),
            }
        }
        // A length word claiming more than is there.
        let mut lying = Enc::new();
        lying.u32(0xffff_fff0);
        lying.raw(&[1, 2, 3, 4]);
        match c
            .call_raw(NFS_PROGRAM, 3, NFSPROC3_GETATTR, &lying.into_vec())
            .await
        {
            Err(ClientError::GarbageArgs) => {}
            other => panic!("GETATTR with a lying length: {other:?}"),
        }
        // A bad enum discriminant (stable_how 7) in WRITE.
        let mut w = Enc::new();
        rnfsd_xdr::Xdr::encode(&s.root, &mut w);
        w.u64(0);
        w.u32(1);
        w.u32(7);
        w.opaque(&[1]);
        match c
            .call_raw(NFS_PROGRAM, 3, NFSPROC3_WRITE, &w.into_vec())
            .await
        {
            Err(ClientError::GarbageArgs) => {}
            other => panic!("WRITE with stable_how 7: {other:?}"),
        }
        // MOUNT: garbage MNT path (length past the end).
        match c.call_raw(MOUNT_PROGRAM, 3, 1, &[0, 0, 1, 0, b'/']).await {
            Err(ClientError::GarbageArgs) => {}
            other => panic!("MNT with garbage: {other:?}"),
        }
        // The connection is still fine after all of that.
        assert_eq!(getattr(&s.nfs, &s.root).await.ftype, Ftype3::Dir);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn auth_errors() {
    let (_dir, srv) = start("e2e-auth");
    bounded(async {
        let s = mount(&srv).await;
        let c = &s.client;
        let args = getattr_args(&s.root);
        let expect_auth = |what: &str, r: Result<Vec<u8>, ClientError>, want: AuthStat| match r {
            Err(ClientError::AuthError(st)) if st == want => {}
            other => panic!("{what}: expected AUTH_ERROR {want:?}, got {other:?}"),
        };

        // AUTH_SYS bodies that do not decode.
        for (what, body) in [
            ("3 bytes", vec![1u8, 2, 3]),
            ("empty", vec![]),
            ("stamp only", vec![0, 0, 0, 1]),
            (
                "trailing bytes",
                [auth_sys_body(&root_sys()), vec![0, 0, 0, 0]].concat(),
            ),
        ] {
            let r = c
                .with_auth(Auth::raw(1, &body))
                .call_raw(NFS_PROGRAM, 3, NFSPROC3_GETATTR, &args)
                .await;
            expect_auth(&format!("AUTH_SYS body {what}"), r, AuthStat::BadCred);
        }
        // RFC 5531 appendix A: at most 16 gids, a machine name of at most
        // 255 bytes; the whole body at most 400 bytes (§8.2).
        let too_many_gids = Auth::sys(0, 0, &[1; 17], "e2e");
        let r = c
            .with_auth(too_many_gids)
            .call_raw(NFS_PROGRAM, 3, NFSPROC3_GETATTR, &args)
            .await;
        expect_auth("17 gids", r, AuthStat::BadCred);
        let sixteen = Auth::sys(0, 0, &[1; 16], "e2e");
        c.with_auth(sixteen)
            .call_raw(NFS_PROGRAM, 3, NFSPROC3_GETATTR, &args)
            .await
            .expect("16 gids are fine");
        let long_name = Auth::sys(0, 0, &[], &"m".repeat(256));
        let r = c
            .with_auth(long_name)
            .call_raw(NFS_PROGRAM, 3, NFSPROC3_GETATTR, &args)
            .await;
        expect_auth("256-byte machine name", r, AuthStat::BadCred);
        let r = c
            .with_auth(Auth::raw(1, &[0u8; 404]))
            .call_raw(NFS_PROGRAM, 3, NFSPROC3_GETATTR, &args)
            .await;
        expect_auth("404-byte credential", r, AuthStat::BadCred);

        // Flavors we do not speak: AUTH_SHORT(2), AUTH_DH(3), RPCSEC_GSS(6), 42.
        for flavor in [2u32, 3, 6, 42] {
            let r = c
                .with_auth(Auth::raw(flavor, &[]))
                .call_raw(NFS_PROGRAM, 3, NFSPROC3_GETATTR, &args)
                .await;
            expect_auth(&format!("flavor {flavor}"), r, AuthStat::BadCred);
        }
        // AUTH_NONE with a body.
        let r = c
            .with_auth(Auth::raw(0, &[0, 0, 0, 0]))
            .call_raw(NFS_PROGRAM, 3, NFSPROC3_GETATTR, &args)
            .await;
        expect_auth("AUTH_NONE with a body", r, AuthStat::BadCred);

        // AUTH_NONE on a non-NULL NFS procedure: TOOWEAK (the default policy,
        // see `rnfsd serve --help`, --allow-auth-none), also for MNT.
        let none = c.with_auth(Auth::none());
        let r = none.call_raw(NFS_PROGRAM, 3, NFSPROC3_GETATTR, &args).await;
        expect_auth("AUTH_NONE GETATTR", r, AuthStat::TooWeak);
        let r = none
            .call_raw(
                MOUNT_PROGRAM,
                3,
                1,
                &rnfsd_xdr::to_vec(&rnfsd_client::mount::DirPath(
                    export_path(&srv).into_bytes(),
                )),
            )
            .await;
        expect_auth("AUTH_NONE MNT", r, AuthStat::TooWeak);
        none.call_raw(NFS_PROGRAM, 3, 0, &[])
            .await
            .expect("AUTH_NONE NULL is fine");

        // A verifier other than AUTH_NONE with AUTH_SYS: BADVERF.
        let cred = auth_sys_body(&root_sys());
        let body = call_body(
            2,
            NFS_PROGRAM,
            3,
            NFSPROC3_GETATTR,
            (1, &cred),
            (1, &cred),
            &args,
        );
        let rec = c.call_message(&body).await.expect("reply");
        assert_eq!(
            decode_reply(&rec),
            ReplyHeader::Denied(RejectStat::AuthError(AuthStat::BadVerf)),
            "AUTH_SYS verifier"
        );
        // The same call with a proper verifier works.
        let body = call_body(
            2,
            NFS_PROGRAM,
            3,
            NFSPROC3_GETATTR,
            (1, &cred),
            (0, &[]),
            &args,
        );
        let rec = c.call_message(&body).await.expect("reply");
        assert_eq!(
            decode_reply(&rec),
            ReplyHeader::Accepted(AcceptStat::Success)
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn allow_auth_none_policy() {
    let dir = TempDir::new("e2e-authnone");
    std::fs::write(dir.path().join("f"), b"x").expect("write");
    let srv = TestServer::start_with(dir.path(), &["--no-rpcbind", "--allow-auth-none"]);
    bounded(async {
        let s = mount(&srv).await;
        let none = s.nfs.with_auth(Auth::none());
        let a = getattr(&none, &s.root).await;
        assert_eq!(a.ftype, Ftype3::Dir);
        // AUTH_NONE is nobody: creating in root's 0755 directory is refused.
        let r = none
            .create(&Create3Args {
                where_: dirop(&s.root, "anon"),
                how: CreateHow3::Unchecked(Sattr3::default()),
            })
            .await
            .expect("CREATE rpc");
        assert_eq!(r.status(), Nfsstat3::Acces);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn pipelined_calls_over_four_connections() {
    let (dir, srv) = start("e2e-pipeline");
    for i in 0..16 {
        std::fs::write(dir.path().join(format!("f{i}")), vec![b'x'; i]).expect("write");
    }
    bounded(async {
        let s = mount(&srv).await;
        let mut files = Vec::new();
        for i in 0..16 {
            let fh = lookup(&s.nfs, &s.root, &format!("f{i}")).await;
            let a = getattr(&s.nfs, &fh).await;
            files.push((fh, a.fileid, a.size));
        }
        let files = Arc::new(files);
        let c4 = connect_n(&srv, 4).await;
        assert_eq!(c4.connections().len(), 4);
        let nfs = rnfsd_client::NfsClient::new(c4.clone());
        let mut set = tokio::task::JoinSet::new();
        for i in 0..2000usize {
            let nfs = nfs.clone();
            let files = files.clone();
            set.spawn(async move {
                let (fh, id, size) = &files[i % files.len()];
                let a = nfs
                    .getattr(&GetAttr3Args { object: fh.clone() })
                    .await
                    .map_err(|e| format!("call {i}: {e}"))?;
                match a {
                    NfsRes::Ok(r)
                        if r.obj_attributes.fileid == *id && r.obj_attributes.size == *size =>
                    {
                        Ok(())
                    }
                    other => Err(format!("call {i}: wrong answer {other:?}")),
                }
            });
        }
        let mut n = 0;
        while let Some(r) = set.join_next().await {
            r.expect("task").unwrap_or_else(|e| panic!("{e}"));
            n += 1;
        }
        assert_eq!(n, 2000);
        // Every connection carried calls and none is left waiting.
        for conn in c4.connections() {
            assert!(!conn.is_closed());
            assert_eq!(conn.pending(), 0);
        }
    })
    .await;
}

/// Read one record (all fragments) from a raw socket, with a deadline.
async fn read_record(sock: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let mut mark = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(10), sock.read_exact(&mut mark))
            .await
            .map_err(|_| std::io::Error::other("timeout"))??;
        let m = u32::from_be_bytes(mark);
        let len = (m & 0x7fff_ffff) as usize;
        assert!(len <= 1 << 20, "reply fragment of {len} bytes");
        let mut buf = vec![0u8; len];
        sock.read_exact(&mut buf).await?;
        out.extend_from_slice(&buf);
        if m & 0x8000_0000 != 0 {
            return Ok(out);
        }
    }
}

fn null_call(xid: u32) -> Vec<u8> {
    let mut v = xid.to_be_bytes().to_vec();
    v.extend(call_body(2, NFS_PROGRAM, 3, 0, (0, &[]), (0, &[]), &[]));
    v
}

fn framed(msg: &[u8]) -> Vec<u8> {
    let mut v = (0x8000_0000u32 | msg.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(msg);
    v
}

/// Wait until the server closes `sock` (EOF or reset), discarding input.
async fn expect_closed(sock: &mut TcpStream, what: &str) {
    let mut buf = [0u8; 4096];
    let r = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match sock.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(r.is_ok(), "{what}: server kept the connection open");
}

#[tokio::test(flavor = "multi_thread")]
async fn record_marking() {
    let (_dir, srv) = start("e2e-records");
    bounded(async {
        let mut sock = TcpStream::connect(srv.addr).await.expect("connect");
        // A call split over three fragments (RFC 5531 §11).
        let msg = null_call(0x1111);
        let (a, rest) = msg.split_at(5);
        let (b, c) = rest.split_at(17);
        let mut wire = Vec::new();
        for (frag, last) in [(a, false), (b, false), (c, true)] {
            let m = frag.len() as u32 | if last { 0x8000_0000 } else { 0 };
            wire.extend_from_slice(&m.to_be_bytes());
            wire.extend_from_slice(frag);
        }
        sock.write_all(&wire).await.expect("write");
        let rec = read_record(&mut sock)
            .await
            .expect("reply to fragmented call");
        assert_eq!(&rec[..4], &0x1111u32.to_be_bytes());
        assert_eq!(
            decode_reply(&rec),
            ReplyHeader::Accepted(AcceptStat::Success)
        );

        // Two calls in one write, dribbled a byte at a time: both answered.
        let mut two = framed(&null_call(0x2222));
        two.extend(framed(&null_call(0x3333)));
        for b in &two {
            sock.write_all(std::slice::from_ref(b))
                .await
                .expect("write");
        }
        let mut xids = vec![
            read_record(&mut sock).await.expect("reply"),
            read_record(&mut sock).await.expect("reply"),
        ]
        .into_iter()
        .map(|r| u32::from_be_bytes([r[0], r[1], r[2], r[3]]))
        .collect::<Vec<_>>();
        xids.sort();
        assert_eq!(xids, [0x2222, 0x3333]);

        // A REPLY message sent to the server is dropped (no answer), and the
        // connection goes on.
        let mut reply = 0x4444u32.to_be_bytes().to_vec();
        reply.extend([0, 0, 0, 1, 0, 0, 0, 0]);
        sock.write_all(&framed(&reply)).await.expect("write");
        sock.write_all(&framed(&null_call(0x5555)))
            .await
            .expect("write");
        let rec = read_record(&mut sock)
            .await
            .expect("reply after dropped message");
        assert_eq!(&rec[..4], &0x5555u32.to_be_bytes());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_connections_do_not_hurt_others() {
    let (_dir, srv) = start("e2e-garbage");
    bounded(async {
        let s = mount(&srv).await;
        let before = getattr(&s.nfs, &s.root).await;

        // 1. A record mark announcing ~2 GiB: over the record limit, closed.
        let mut huge = TcpStream::connect(srv.addr).await.expect("connect");
        huge.write_all(&0xffff_fff0u32.to_be_bytes())
            .await
            .expect("write");
        huge.write_all(&[0u8; 1024]).await.expect("write");
        expect_closed(&mut huge, "2 GiB record").await;

        // 2. Endless non-final fragments: the record grows past the limit.
        let mut frags = TcpStream::connect(srv.addr).await.expect("connect");
        let chunk = {
            let mut v = (60_000u32).to_be_bytes().to_vec();
            v.extend(vec![0u8; 60_000]);
            v
        };
        let w = tokio::time::timeout(Duration::from_secs(20), async {
            for _ in 0..40 {
                if frags.write_all(&chunk).await.is_err() {
                    break;
                }
            }
        })
        .await;
        assert!(w.is_ok(), "server neither read nor closed a growing record");
        expect_closed(&mut frags, "2.4 MB of fragments").await;

        // 3. Random bytes on several connections at once.
        let mut rng = 0x1234_5678_9abc_def0u64;
        let mut socks = Vec::new();
        for _ in 0..8 {
            let mut sock = TcpStream::connect(srv.addr).await.expect("connect");
            let junk: Vec<u8> = (0..4096)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng as u8
                })
                .collect();
            let _ = sock.write_all(&junk).await;
            socks.push(sock);
        }
        // 4. Short records: too short for a call header.
        let mut short = TcpStream::connect(srv.addr).await.expect("connect");
        for len in [0usize, 1, 4, 7, 12, 39] {
            let _ = short.write_all(&framed(&vec![0u8; len])).await;
        }
        // 5. A client that connects and closes at once, and one that
        // half-closes after a partial record.
        drop(TcpStream::connect(srv.addr).await.expect("connect"));
        let mut half = TcpStream::connect(srv.addr).await.expect("connect");
        half.write_all(&[0x80, 0, 0, 100, 1, 2, 3])
            .await
            .expect("write");
        half.shutdown().await.expect("shutdown");

        // The well-behaved client is unaffected, and new ones get in.
        let after = getattr(&s.nfs, &s.root).await;
        assert_eq!(before.fileid, after.fileid);
        let fresh = mount(&srv).await;
        assert_eq!(getattr(&fresh.nfs, &fresh.root).await.fileid, before.fileid);
        let c: Client = connect(&srv).await;
        let () = c.call(NFS_PROGRAM, 3, 0, &()).await.expect("NULL");
        drop(socks);
        drop(short);
    })
    .await;
}

/// WRITE payloads arrive byte-exact whatever the record marking: one
/// fragment, many small ones, large ones (read straight into the record),
/// mixes, several calls in one burst and the burst cut at odd places; at
/// odd offsets and sizes up to 1 MiB (RFC 5531 §11, RFC 1813 §3.3.7).
#[tokio::test(flavor = "multi_thread")]
async fn writes_split_in_many_fragments_arrive_exact() {
    let (dir, srv) = start("e2e-write-frags");
    bounded(async {
        let s = mount(&srv).await;
        let fh = ok(
            "CREATE",
            s.nfs
                .create(&Create3Args {
                    where_: dirop(&s.root, "w"),
                    how: CreateHow3::Unchecked(sattr_mode(0o644)),
                })
                .await,
        )
        .obj
        .expect("handle");
        const SIZE: usize = (1 << 20) + 4099;
        let content: Vec<u8> = (0..SIZE as u64)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect();
        // (offset, len, fragment sizes cycled over the record).
        let plans: [(usize, usize, &[usize]); 6] = [
            (0, 1 << 20, &[usize::MAX]),
            (1 << 20, 4099, &[1, 2, 3, 1000]),
            (3, 200_001, &[17_000, 40_000, 5]),
            (200_004, 300_000, &[65_536, 16_384, 16_383, 1]),
            (500_004, 548_572, &[300_000, 7, 248_565]),
            (777, 4, &[1]),
        ];
        let cred = auth_sys_body(&root_sys());
        let mut wire = Vec::new();
        for (i, &(off, len, frags)) in plans.iter().enumerate() {
            let args = rnfsd_xdr::to_vec(&Write3Args {
                file: fh.clone(),
                offset: off as u64,
                count: len as u32,
                stable: StableHow::FileSync,
                data: content[off..off + len].to_vec(),
            });
            let mut msg = (0x5000 + i as u32).to_be_bytes().to_vec();
            msg.extend(call_body(2, NFS_PROGRAM, 3, 7, (1, &cred), (0, &[]), &args));
            let mut rest = &msg[..];
            for &f in frags.iter().cycle() {
                let n = f.min(rest.len());
                let (part, tail) = rest.split_at(n);
                rest = tail;
                let last = rest.is_empty();
                let m = n as u32 | if last { 0x8000_0000 } else { 0 };
                wire.extend_from_slice(&m.to_be_bytes());
                wire.extend_from_slice(part);
                if last {
                    break;
                }
            }
        }
        let mut sock = TcpStream::connect(srv.addr).await.expect("connect");
        // The whole burst, cut at odd places.
        for chunk in wire.chunks(99_991) {
            sock.write_all(chunk).await.expect("write");
        }
        // Calls of one connection may be answered in any order.
        let mut seen = Vec::new();
        for _ in 0..plans.len() {
            let rec = read_record(&mut sock).await.expect("WRITE reply");
            let i = u32::from_be_bytes([rec[0], rec[1], rec[2], rec[3]]).wrapping_sub(0x5000);
            assert!((i as usize) < plans.len() && !seen.contains(&i), "xid {i}");
            seen.push(i);
            assert_eq!(
                decode_reply(&rec),
                ReplyHeader::Accepted(AcceptStat::Success)
            );
            // nfsstat3 follows the 24-byte accepted reply header.
            assert_eq!(&rec[24..28], &[0, 0, 0, 0], "WRITE {i} status");
        }
        let got = std::fs::read(dir.path().join("w")).expect("read back");
        assert_eq!(got.len(), SIZE);
        assert!(got == content, "file content differs from what was written");
    })
    .await;
}
