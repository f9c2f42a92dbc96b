//! The RPC layer against small fake servers written here with tokio: reply
//! reordering, fragmentation, connection loss, timeouts, size limits, RPC
//! rejections, credentials, and the MOUNT / portmap clients' wire formats.

use std::net::SocketAddr;
use std::time::Duration;

use rnfsd_client::mount::{DirPath, ExportNode, MountStat3, Name};
use rnfsd_client::portmap::{IPPROTO_TCP, PROGRAM as PMAP_PROGRAM};
use rnfsd_client::record::{encode_fragments, read_record};
use rnfsd_client::{Auth, AuthStat, Client, ClientConfig, ClientError, MountClient, RpcConnection};
use rnfsd_proto::rpc::{
    encode_accepted, encode_denied, AcceptStat, AuthSys, CallHeader, Incoming, RejectStat,
    AUTH_NONE, AUTH_SYS,
};
use rnfsd_xdr::{Dec, Enc};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

/// Every test is bounded: a hang is a failure, not a stuck suite.
const LIMIT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
struct Call {
    xid: u32,
    rpcvers: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    cred_flavor: u32,
    cred_body: Vec<u8>,
    args: Vec<u8>,
}

async fn listen() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

async fn accept(l: &TcpListener) -> (BufReader<OwnedReadHalf>, OwnedWriteHalf) {
    let (s, _) = l.accept().await.unwrap();
    let (r, w) = s.into_split();
    (BufReader::new(r), w)
}

/// The next call, or None when the client closed the connection.
async fn read_call(r: &mut BufReader<OwnedReadHalf>) -> Option<Call> {
    let mut rec = Vec::new();
    if !read_record(r, 1 << 22, &mut rec).await.ok()? {
        return None;
    }
    let mut d = Dec::new(&rec);
    match CallHeader::decode(&mut d).unwrap() {
        Incoming::Call(h) => Some(Call {
            xid: h.xid,
            rpcvers: h.rpcvers,
            prog: h.prog,
            vers: h.vers,
            proc_: h.proc_,
            cred_flavor: h.cred.flavor,
            cred_body: h.cred.body.to_vec(),
            args: d.rest().to_vec(),
        }),
        Incoming::NotACall { .. } => panic!("client sent a non-call"),
    }
}

fn success(xid: u32, results: &[u8]) -> Vec<u8> {
    let mut e = Enc::new();
    encode_accepted(&mut e, xid, AcceptStat::Success);
    e.raw(results);
    e.into_vec()
}

fn u32_results(v: u32) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

/// Send a reply record split into `frag`-byte fragments.
async fn send(w: &mut OwnedWriteHalf, payload: &[u8], frag: usize) {
    w.write_all(&encode_fragments(payload, frag)).await.unwrap();
}

fn arg_u32(c: &Call) -> u32 {
    let mut d = Dec::new(&c.args);
    d.u32().unwrap()
}

fn cfg(timeout: Option<Duration>) -> ClientConfig {
    ClientConfig {
        timeout,
        ..ClientConfig::default()
    }
}

async fn conn(addr: SocketAddr, c: &ClientConfig) -> RpcConnection {
    RpcConnection::connect(addr, c).await.unwrap()
}

#[tokio::test]
async fn replies_in_reverse_order_and_fragmented_reach_their_callers() {
    const N: u32 = 32;
    let (l, addr) = listen().await;
    let server = tokio::spawn(async move {
        let (mut r, mut w) = accept(&l).await;
        let mut calls = Vec::new();
        for _ in 0..N {
            calls.push(read_call(&mut r).await.unwrap());
        }
        // All calls arrived before any reply: the client pipelines.
        for c in calls.iter().rev() {
            assert_eq!((c.rpcvers, c.prog, c.vers, c.proc_), (2, 400_000, 1, 7));
            send(&mut w, &success(c.xid, &u32_results(arg_u32(c) * 3)), 5).await;
        }
        let xids: std::collections::HashSet<u32> = calls.iter().map(|c| c.xid).collect();
        assert_eq!(xids.len(), N as usize, "xids must be unique");
    });
    let c = conn(addr, &cfg(Some(LIMIT))).await;
    let futs = (0..N).map(|i| {
        let c = c.clone();
        async move { c.call::<u32, u32>(400_000, 1, 7, &i).await }
    });
    let res = timeout(LIMIT, futures_join_all(futs)).await.unwrap();
    for (i, r) in res.into_iter().enumerate() {
        assert_eq!(r.unwrap(), i as u32 * 3);
    }
    assert_eq!(c.pending(), 0);
    server.await.unwrap();
}

/// Join futures without pulling in the `futures` crate.
async fn futures_join_all<F, T>(futs: impl IntoIterator<Item = F>) -> Vec<T>
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let handles: Vec<_> = futs.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

#[tokio::test]
async fn many_calls_in_flight_with_shuffled_replies() {
    const N: u32 = 600;
    let (l, addr) = listen().await;
    let server = tokio::spawn(async move {
        let (mut r, mut w) = accept(&l).await;
        let mut batch = Vec::new();
        let mut served = 0;
        while served < N {
            batch.push(read_call(&mut r).await.unwrap());
            // Answer in groups of 7, each group backwards, all in one write.
            if batch.len() == 7 || served + batch.len() as u32 == N {
                let mut out = Vec::new();
                for c in batch.drain(..).rev() {
                    out.extend(encode_fragments(&success(c.xid, &c.args), 4096));
                    served += 1;
                }
                w.write_all(&out).await.unwrap();
            }
        }
    });
    let c = conn(addr, &cfg(Some(LIMIT))).await;
    let futs = (0..N).map(|i| {
        let c = c.clone();
        async move { c.call::<u64, u64>(1, 1, 1, &(u64::from(i) << 20)).await }
    });
    let res = timeout(LIMIT, futures_join_all(futs)).await.unwrap();
    for (i, r) in res.into_iter().enumerate() {
        assert_eq!(r.unwrap(), (i as u64) << 20);
    }
    server.await.unwrap();
}

#[tokio::test]
async fn connection_drop_fails_pending_calls() {
    let (l, addr) = listen().await;
    let server = tokio::spawn(async move {
        let (mut r, w) = accept(&l).await;
        for _ in 0..3 {
            read_call(&mut r).await.unwrap();
        }
        drop((r, w));
    });
    // No timeout: only the connection loss can end these calls.
    let c = conn(addr, &cfg(None)).await;
    let futs = (0..3u32).map(|i| {
        let c = c.clone();
        async move { c.call::<u32, u32>(1, 1, 1, &i).await }
    });
    let res = timeout(LIMIT, futures_join_all(futs)).await.unwrap();
    for r in res {
        assert!(matches!(r, Err(ClientError::Disconnected(_))), "{r:?}");
    }
    server.await.unwrap();
    assert!(c.is_closed());
    let later = timeout(LIMIT, c.call::<u32, u32>(1, 1, 1, &0))
        .await
        .unwrap();
    assert!(
        matches!(later, Err(ClientError::Disconnected(_))),
        "{later:?}"
    );
}

#[tokio::test]
async fn connection_drop_mid_record_fails_pending_call() {
    let (l, addr) = listen().await;
    let server = tokio::spawn(async move {
        let (mut r, mut w) = accept(&l).await;
        let c = read_call(&mut r).await.unwrap();
        let rec = encode_fragments(&success(c.xid, &u32_results(1)), 1 << 20);
        w.write_all(&rec[..rec.len() - 2]).await.unwrap();
    });
    let c = conn(addr, &cfg(None)).await;
    let r = timeout(LIMIT, c.call::<(), u32>(1, 1, 1, &()))
        .await
        .unwrap();
    assert!(matches!(r, Err(ClientError::Disconnected(_))), "{r:?}");
    server.await.unwrap();
}

#[tokio::test]
async fn lost_reply_times_out_and_late_reply_is_ignored() {
    let (l, addr) = listen().await;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let (mut r, mut w) = accept(&l).await;
        let lost = read_call(&mut r).await.unwrap();
        let ok = read_call(&mut r).await.unwrap();
        send(&mut w, &success(ok.xid, &u32_results(2)), 64).await;
        // After the client gave up on `lost`, answer it anyway.
        rx.await.unwrap();
        send(&mut w, &success(lost.xid, &u32_results(1)), 64).await;
        let next = read_call(&mut r).await.unwrap();
        send(&mut w, &success(next.xid, &u32_results(3)), 64).await;
    });
    let c = conn(addr, &cfg(Some(Duration::from_millis(300)))).await;
    let lost = c.call::<u32, u32>(1, 1, 1, &1);
    let c2 = c.clone();
    let ok = async move {
        // Let the first call go out first.
        tokio::time::sleep(Duration::from_millis(20)).await;
        c2.call::<u32, u32>(1, 1, 1, &2).await
    };
    let (lost, ok) = tokio::join!(lost, ok);
    assert!(matches!(lost, Err(ClientError::Timeout)), "{lost:?}");
    assert_eq!(ok.unwrap(), 2);
    assert_eq!(c.pending(), 0, "timed-out call must leave no slot behind");
    tx.send(()).unwrap();
    let next = timeout(LIMIT, c.call::<u32, u32>(1, 1, 1, &3))
        .await
        .unwrap();
    assert_eq!(
        next.unwrap(),
        3,
        "late reply must not be taken for the next call"
    );
    server.await.unwrap();
}

#[tokio::test]
async fn oversized_reply_is_a_protocol_error() {
    let (l, addr) = listen().await;
    let server = tokio::spawn(async move {
        let (mut r, mut w) = accept(&l).await;
        let c = read_call(&mut r).await.unwrap();
        let mut body = Enc::new();
        body.opaque(&[7u8; 2000]);
        // Fragments of 300 bytes: each is small, the record is not.
        send(&mut w, &success(c.xid, body.as_slice()), 300).await;
        // Hold the socket open: the client must not wait for more.
        let _ = read_call(&mut r).await;
    });
    let small = ClientConfig {
        max_reply: 1024,
        timeout: Some(LIMIT),
        ..ClientConfig::default()
    };
    let c = conn(addr, &small).await;
    let r = timeout(LIMIT, c.call_raw(1, 1, 1, &[])).await.unwrap();
    assert!(matches!(r, Err(ClientError::Protocol(_))), "{r:?}");
    assert!(c.is_closed());
    drop(c);
    server.await.unwrap();
}

#[tokio::test]
async fn fragmented_reply_at_limit_is_accepted() {
    let (l, addr) = listen().await;
    let server = tokio::spawn(async move {
        let (mut r, mut w) = accept(&l).await;
        let c = read_call(&mut r).await.unwrap();
        let header_len = success(c.xid, &[]).len();
        let mut body = Enc::new();
        body.opaque(&vec![5u8; 1024 - header_len - 4]);
        let rec = success(c.xid, body.as_slice());
        assert_eq!(rec.len(), 1024);
        send(&mut w, &rec, 100).await;
    });
    let small = ClientConfig {
        max_reply: 1024,
        timeout: Some(LIMIT),
        ..ClientConfig::default()
    };
    let c = conn(addr, &small).await;
    let r = c.call_raw(1, 1, 1, &[]).await.unwrap();
    assert_eq!(r.len(), 1024 - 24);
    server.await.unwrap();
}

#[tokio::test]
async fn rpc_rejections_map_to_errors() {
    let (l, addr) = listen().await;
    let server = tokio::spawn(async move {
        let (mut r, mut w) = accept(&l).await;
        while let Some(c) = read_call(&mut r).await {
            let mut e = Enc::new();
            match c.proc_ {
                1 => encode_accepted(&mut e, c.xid, AcceptStat::ProgUnavail),
                2 => encode_accepted(&mut e, c.xid, AcceptStat::ProgMismatch { low: 2, high: 4 }),
                3 => encode_accepted(&mut e, c.xid, AcceptStat::ProcUnavail),
                4 => encode_accepted(&mut e, c.xid, AcceptStat::GarbageArgs),
                5 => encode_accepted(&mut e, c.xid, AcceptStat::SystemErr),
                6 => encode_denied(&mut e, c.xid, RejectStat::RpcMismatch { low: 2, high: 2 }),
                7 => encode_denied(&mut e, c.xid, RejectStat::AuthError(AuthStat::TooWeak)),
                // Success with trailing junk after the u32 result.
                8 => {
                    encode_accepted(&mut e, c.xid, AcceptStat::Success);
                    e.u32(1);
                    e.u32(2);
                }
                // Not a reply header at all (msg_type CALL).
                _ => {
                    e.u32(c.xid);
                    e.u32(0);
                }
            }
            send(&mut w, e.as_slice(), 1 << 16).await;
        }
    });
    let c = conn(addr, &cfg(Some(LIMIT))).await;
    let call = |p| {
        let c = c.clone();
        async move { c.call::<(), u32>(9, 9, p, &()).await }
    };
    assert!(matches!(call(1).await, Err(ClientError::ProgUnavail)));
    assert!(matches!(
        call(2).await,
        Err(ClientError::ProgMismatch { low: 2, high: 4 })
    ));
    assert!(matches!(call(3).await, Err(ClientError::ProcUnavail)));
    assert!(matches!(call(4).await, Err(ClientError::GarbageArgs)));
    assert!(matches!(call(5).await, Err(ClientError::SystemErr)));
    assert!(matches!(
        call(6).await,
        Err(ClientError::RpcMismatch { low: 2, high: 2 })
    ));
    assert!(matches!(
        call(7).await,
        Err(ClientError::AuthError(AuthStat::TooWeak))
    ));
    assert!(matches!(
        call(8).await,
        Err(ClientError::Decode(rnfsd_xdr::XdrError::Trailing))
    ));
    assert!(matches!(call(9).await, Err(ClientError::Protocol(_))));
    assert!(call(4).await.unwrap_err().is_rpc_rejection());
    drop(c);
    timeout(LIMIT, server).await.unwrap().unwrap();
}

#[tokio::test]
async fn raw_calls_send_bytes_verbatim() {
    let (l, addr) = listen().await;
    let server = tokio::spawn(async move {
        let (mut r, mut w) = accept(&l).await;
        // call_raw: args arrive exactly as given (no padding added).
        let c = read_call(&mut r).await.unwrap();
        assert_eq!(c.args, vec![1, 2, 3]);
        send(&mut w, &success(c.xid, &[9, 9, 9, 9]), 64).await;
        // call_message: a header with rpcvers 3 gets RPC_MISMATCH.
        let c = read_call(&mut r).await.unwrap();
        assert_eq!(c.rpcvers, 3);
        let mut e = Enc::new();
        encode_denied(&mut e, c.xid, RejectStat::RpcMismatch { low: 2, high: 2 });
        send(&mut w, e.as_slice(), 64).await;
    });
    let c = conn(addr, &cfg(Some(LIMIT))).await;
    assert_eq!(
        c.call_raw(5, 1, 0, &[1, 2, 3]).await.unwrap(),
        vec![9, 9, 9, 9]
    );
    let mut m = Enc::new();
    for w in [0u32, 3, 5, 1, 0] {
        m.u32(w); // CALL, rpcvers 3, prog, vers, proc
    }
    for _ in 0..2 {
        m.u32(AUTH_NONE);
        m.u32(0);
    }
    let rec = c.call_message(m.as_slice()).await.unwrap();
    let mut d = Dec::new(&rec);
    let (_, h) = rnfsd_proto::rpc::ReplyHeader::decode(&mut d).unwrap();
    assert_eq!(
        h,
        rnfsd_proto::rpc::ReplyHeader::Denied(RejectStat::RpcMismatch { low: 2, high: 2 })
    );
    server.await.unwrap();
}

#[tokio::test]
async fn credentials_per_client_and_per_view() {
    let (l, addr) = listen().await;
    let server = tokio::spawn(async move {
        let (mut r, mut w) = accept(&l).await;
        // Reply with the caller's uid, or 0xffff_ffff for AUTH_NONE.
        while let Some(c) = read_call(&mut r).await {
            let uid = match c.cred_flavor {
                AUTH_SYS => {
                    let a: AuthSys = rnfsd_xdr::from_slice(&c.cred_body).unwrap();
                    assert_eq!(a.gids.len(), a.gid as usize);
                    a.uid
                }
                AUTH_NONE => u32::MAX,
                f => panic!("flavor {f}"),
            };
            send(&mut w, &success(c.xid, &u32_results(uid)), 64).await;
        }
    });
    let c = conn(addr, &cfg(Some(LIMIT))).await;
    assert_eq!(c.call::<(), u32>(1, 1, 1, &()).await.unwrap(), u32::MAX);
    let alice = c.with_auth(Auth::sys(1000, 2, &[10, 11], "host"));
    let bob = c.with_auth(Auth::unix(1001, 0));
    let (a, b) = tokio::join!(
        alice.call::<(), u32>(1, 1, 1, &()),
        bob.call::<(), u32>(1, 1, 1, &())
    );
    assert_eq!((a.unwrap(), b.unwrap()), (1000, 1001));
    // The original handle is unchanged.
    assert_eq!(c.call::<(), u32>(1, 1, 1, &()).await.unwrap(), u32::MAX);
    drop((c, alice, bob));
    timeout(LIMIT, server).await.unwrap().unwrap();
}

#[tokio::test]
async fn in_flight_limit_holds_back_extra_calls() {
    let (l, addr) = listen().await;
    let server = tokio::spawn(async move {
        let (mut r, mut w) = accept(&l).await;
        let a = read_call(&mut r).await.unwrap();
        let b = read_call(&mut r).await.unwrap();
        // With max_in_flight 2 no third call may arrive yet.
        let third = timeout(Duration::from_millis(200), read_call(&mut r)).await;
        assert!(third.is_err(), "third call sent past the in-flight limit");
        for c in [a, b] {
            send(&mut w, &success(c.xid, &c.args), 64).await;
        }
        for _ in 0..3 {
            let c = read_call(&mut r).await.unwrap();
            send(&mut w, &success(c.xid, &c.args), 64).await;
        }
    });
    let c = conn(
        addr,
        &ClientConfig {
            max_in_flight: 2,
            timeout: Some(LIMIT),
            ..ClientConfig::default()
        },
    )
    .await;
    let futs = (0..5u32).map(|i| {
        let c = c.clone();
        async move { c.call::<u32, u32>(1, 1, 1, &i).await }
    });
    let res = timeout(LIMIT, futures_join_all(futs)).await.unwrap();
    let mut got: Vec<u32> = res.into_iter().map(|r| r.unwrap()).collect();
    got.sort_unstable();
    assert_eq!(got, vec![0, 1, 2, 3, 4]);
    server.await.unwrap();
}

#[tokio::test]
async fn client_spreads_calls_round_robin_and_skips_dead_connections() {
    const CONNS: usize = 3;
    let (l, addr) = listen().await;
    let server = tokio::spawn(async move {
        let mut tasks = Vec::new();
        for id in 0..CONNS as u32 {
            let (mut r, mut w) = accept(&l).await;
            tasks.push(tokio::spawn(async move {
                while let Some(c) = read_call(&mut r).await {
                    send(&mut w, &success(c.xid, &u32_results(id)), 64).await;
                    // Connection 1 dies after its first call.
                    if id == 1 {
                        return;
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    let client = Client::connect(
        addr,
        &ClientConfig {
            connections: CONNS,
            timeout: Some(LIMIT),
            ..ClientConfig::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(client.connections().len(), CONNS);
    let mut seen = [0usize; CONNS];
    for _ in 0..CONNS {
        let id = client.call::<(), u32>(1, 1, 1, &()).await.unwrap();
        seen[id as usize] += 1;
    }
    assert_eq!(seen, [1, 1, 1], "one call per connection");
    // Wait for connection 1 to be seen closed, then it must be skipped.
    timeout(LIMIT, async {
        while !client.connections()[1].is_closed() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    for _ in 0..6 {
        let id = client.call::<(), u32>(1, 1, 1, &()).await.unwrap();
        assert_ne!(id, 1);
    }
    drop(client);
    timeout(LIMIT, server).await.unwrap().unwrap();
}

#[tokio::test]
async fn privileged_source_ports_when_asked() {
    let (l, addr) = listen().await;
    let server = tokio::spawn(async move {
        let mut ports = Vec::new();
        for _ in 0..2 {
            let (s, peer) = l.accept().await.unwrap();
            drop(s);
            ports.push(peer.port());
        }
        ports
    });
    let c = ClientConfig {
        privileged_port: true,
        connections: 2,
        ..ClientConfig::default()
    };
    match Client::connect(addr, &c).await {
        Ok(client) => {
            let mine: Vec<u16> = client
                .connections()
                .iter()
                .map(|c| c.local_addr().port())
                .collect();
            assert!(mine.iter().all(|&p| p < 1024), "{mine:?}");
            assert_ne!(mine[0], mine[1]);
            assert_eq!(server.await.unwrap(), mine);
        }
        // Not root: nothing to check here (the project's tests run as root).
        Err(ClientError::Io(e)) if e.kind() == std::io::ErrorKind::PermissionDenied => {}
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test]
async fn cancelled_call_leaves_no_slot_and_stray_xids_are_ignored() {
    let (l, addr) = listen().await;
    let server = tokio::spawn(async move {
        let (mut r, mut w) = accept(&l).await;
        let abandoned = read_call(&mut r).await.unwrap();
        let c = read_call(&mut r).await.unwrap();
        // A reply nobody asked for, the abandoned call's reply, then the
        // real one: only the last may complete the live call.
        send(&mut w, &success(c.xid ^ 0x5555_5555, &u32_results(7)), 64).await;
        send(&mut w, &success(abandoned.xid, &u32_results(8)), 64).await;
        send(&mut w, &success(c.xid, &u32_results(9)), 64).await;
    });
    let c = conn(addr, &cfg(None)).await;
    let gave_up = timeout(Duration::from_millis(100), c.call::<(), u32>(1, 1, 1, &())).await;
    assert!(gave_up.is_err());
    assert_eq!(c.pending(), 0, "dropped call future must release its slot");
    let r = timeout(LIMIT, c.call::<(), u32>(1, 1, 1, &()))
        .await
        .unwrap();
    assert_eq!(r.unwrap(), 9);
    server.await.unwrap();
}

#[tokio::test]
async fn connect_refused_is_io_error() {
    let (l, addr) = listen().await;
    drop(l);
    let r = RpcConnection::connect(addr, &ClientConfig::default()).await;
    assert!(matches!(r, Err(ClientError::Io(_))), "{r:?}");
}

#[tokio::test]
async fn mount_client_wire_format() {
    let (l, addr) = listen().await;
    let server = tokio::spawn(async move {
        let (mut r, mut w) = accept(&l).await;
        while let Some(c) = read_call(&mut r).await {
            assert_eq!((c.prog, c.vers), (100005, 3));
            let mut e = Enc::new();
            match c.proc_ {
                0 | 3 | 4 => {}
                1 => {
                    let mut d = Dec::new(&c.args);
                    let path = d.opaque(1024).unwrap().to_vec();
                    d.finish().unwrap();
                    if path == b"/export" {
                        e.u32(0);
                        e.opaque(&[0xab; 32]);
                        e.u32(2);
                        e.u32(AUTH_SYS);
                        e.u32(AUTH_NONE);
                    } else {
                        e.u32(2); // MNT3ERR_NOENT
                    }
                }
                2 => {
                    e.bool(true);
                    e.opaque(b"client1");
                    e.opaque(b"/export");
                    e.bool(false);
                }
                5 => {
                    e.bool(true);
                    e.opaque(b"/export");
                    e.bool(true);
                    e.opaque(b"*");
                    e.bool(false);
                    e.bool(false);
                }
                p => panic!("proc {p}"),
            }
            send(&mut w, &success(c.xid, e.as_slice()), 64).await;
        }
    });
    let m = MountClient::connect(addr, &cfg(Some(LIMIT))).await.unwrap();
    m.null().await.unwrap();
    let ok = m.mnt("/export").await.unwrap();
    assert_eq!(ok.fhandle, vec![0xab; 32]);
    assert_eq!(ok.auth_flavors, vec![AUTH_SYS, AUTH_NONE]);
    assert!(matches!(
        m.mnt("/nope").await,
        Err(ClientError::Mount(MountStat3::NoEnt))
    ));
    let dump = m.dump().await.unwrap();
    assert_eq!(dump.len(), 1);
    assert_eq!(dump[0].directory.0, b"/export");
    assert_eq!(
        m.export().await.unwrap(),
        vec![ExportNode {
            dir: DirPath(b"/export".to_vec()),
            groups: vec![Name(b"*".to_vec())]
        }]
    );
    m.umnt("/export").await.unwrap();
    m.umntall().await.unwrap();
    drop(m);
    timeout(LIMIT, server).await.unwrap().unwrap();
}

#[tokio::test]
async fn portmap_getport_wire_format() {
    let (l, addr) = listen().await;
    let server = tokio::spawn(async move {
        let (mut r, mut w) = accept(&l).await;
        let c = read_call(&mut r).await.unwrap();
        assert_eq!((c.prog, c.vers, c.proc_), (PMAP_PROGRAM, 2, 3));
        let mut d = Dec::new(&c.args);
        let m: Vec<u32> = (0..4).map(|_| d.u32().unwrap()).collect();
        d.finish().unwrap();
        assert_eq!(m, vec![100003, 3, IPPROTO_TCP, 0]);
        send(&mut w, &success(c.xid, &u32_results(2049)), 64).await;
    });
    let stream = TcpStream::connect(addr).await.unwrap();
    let conn = RpcConnection::from_stream(stream, &cfg(Some(LIMIT))).unwrap();
    let pm = rnfsd_client::PortmapClient::new(Client::from_connection(conn));
    assert_eq!(pm.getport(100003, 3, IPPROTO_TCP).await.unwrap(), 2049);
    server.await.unwrap();
}
