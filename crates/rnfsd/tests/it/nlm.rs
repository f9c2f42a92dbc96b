//! The lock manager end to end through our client: NLM v4 over the NFS
//! port (TCP), owners conflicting and releasing, a local program's lock,
//! a blocked lock taken once free, FREE_ALL, DOS shares, NLM and NSM over
//! UDP (rpcinfo), and a restart's grace period with reclaims.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use std::time::{Duration, Instant};

use common::nfs::*;
use common::{write_config, TempDir, TestServer};
use rnfsd_client::{Auth, NlmClient, UdpClient};
use rnfsd_proto::nlm::*;
use rnfsd_proto::rpc::{AcceptStat, CallHeader};

/// A local program (another process) trying a whole-file POSIX lock:
/// whether it got it (it holds it until killed).
fn local_lock(path: &std::path::Path) -> (std::process::Child, bool) {
    let script = "import fcntl, sys\nf = open(sys.argv[1], 'r+')\n\
                  fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n\
                  print('locked', flush=True)\nsys.stdin.read()\n";
    let mut c = Command::new("python3")
        .args(["-c", script])
        .arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 (the local program)");
    let mut line = String::new();
    let _ = BufReader::new(c.stdout.take().unwrap()).read_line(&mut line);
    (c, line.trim() == "locked")
}

#[tokio::test(flavor = "multi_thread")]
async fn locks_conflict_release_block_and_free() {
    let dir = TempDir::new("nlm");
    let srv = TestServer::start_with(dir.path(), &["--no-rpcbind"]);
    bounded(async {
        let s = mount(&srv).await;
        let (f, _) = create_file(&s.nfs, &s.root, "f").await;
        write(&s.nfs, &f, 0, b"0123456789").await;
        let nlm = NlmClient::new(s.client.clone());
        nlm.null().await.expect("NLM NULL on the NFS port");

        let a = nlm_lock(&f, "127.0.0.1", 1, 0, 5);
        let b = nlm_lock(&f, "hostb", 2, 4, 2);
        assert_eq!(lock(&nlm, &a, true, false).await, Nlm4Stats::Granted);
        assert_eq!(lock(&nlm, &b, false, false).await, Nlm4Stats::Denied);
        let t = nlm
            .test(&Nlm4TestArgs {
                cookie: NetObj(b"t".to_vec()),
                exclusive: false,
                alock: b.clone(),
            })
            .await
            .expect("TEST");
        match t.stat {
            Nlm4TestRply::Denied(h) => {
                assert!(h.exclusive);
                assert_eq!(
                    (h.svid, &h.oh.0[..], h.l_offset, h.l_len),
                    (1, &b"127.0.0.1:1"[..], 0, 5)
                );
            }
            other => panic!("TEST: {other:?}"),
        }
        // A local program meets the client's lock.
        let (mut c, got) = local_lock(&dir.path().join("f"));
        assert!(!got, "a local program took a range an NFS client holds");
        let _ = c.wait();

        // Blocked, then granted once a unlocks (the client's retry finds
        // it held: the server took it for it).
        assert_eq!(lock(&nlm, &b, true, true).await, Nlm4Stats::Blocked);
        assert_eq!(unlock(&nlm, &a).await, Nlm4Stats::Granted);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let st = lock(&nlm, &b, true, true).await;
            if st == Nlm4Stats::Granted {
                break;
            }
            assert_eq!(st, Nlm4Stats::Blocked);
            assert!(
                Instant::now() < deadline,
                "the blocked lock was never granted"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            lock(&nlm, &a, true, false).await,
            Nlm4Stats::Denied,
            "b holds 4..6"
        );

        // FREE_ALL frees the locks of the address it comes from, whatever
        // name it gives: hostb took its lock from 127.0.0.1, so one from
        // 127.0.0.5 naming it frees nothing of it.
        let stranger = NlmClient::new(client_from(&srv, "127.0.0.5").await);
        stranger
            .free_all(&Nlm4Notify {
                name: NotifyName(b"hostb".to_vec()),
                state: 3,
            })
            .await
            .expect("FREE_ALL");
        assert_eq!(
            lock(&nlm, &a, true, false).await,
            Nlm4Stats::Denied,
            "not freed by a stranger"
        );
        let b_here = nlm_lock(&f, "127.0.0.1", 9, 100, 1);
        assert_eq!(lock(&nlm, &b_here, true, false).await, Nlm4Stats::Granted);
        nlm.free_all(&Nlm4Notify {
            name: NotifyName(b"127.0.0.1".to_vec()),
            state: 3,
        })
        .await
        .expect("FREE_ALL");
        let again = nlm_lock(&f, "hostc", 3, 100, 1);
        assert_eq!(
            lock(&nlm, &again, true, false).await,
            Nlm4Stats::Granted,
            "127.0.0.1's locks freed"
        );
        assert_eq!(unlock(&nlm, &again).await, Nlm4Stats::Granted);
        let b_there = nlm_lock(&f, "hostd", 4, 4, 2);
        assert_eq!(
            lock(&stranger, &b_there, true, false).await,
            Nlm4Stats::Granted,
            "hostb's lock went with the rest of 127.0.0.1's"
        );

        // DOS share reservations (owners of one host: their handles differ).
        let share = |host: &str, access: FshAccess, mode: FshMode| Nlm4ShareArgs {
            cookie: NetObj(b"s".to_vec()),
            share: Nlm4Share {
                caller_name: CallerName(host.as_bytes().to_vec()),
                fh: NetObj(f.data.clone()),
                oh: NetObj(host.as_bytes().to_vec()),
                mode,
                access,
            },
            reclaim: false,
        };
        for (unshare, host, access, mode, want) in [
            (
                false,
                "x",
                FshAccess::ReadWrite,
                FshMode::DenyWrite,
                Nlm4Stats::Granted,
            ),
            (
                false,
                "y",
                FshAccess::Write,
                FshMode::DenyNone,
                Nlm4Stats::Denied,
            ),
            (
                true,
                "x",
                FshAccess::ReadWrite,
                FshMode::DenyWrite,
                Nlm4Stats::Granted,
            ),
            (
                false,
                "y",
                FshAccess::Write,
                FshMode::DenyNone,
                Nlm4Stats::Granted,
            ),
        ] {
            let args = share(host, access, mode);
            let r = if unshare {
                nlm.unshare(&args).await
            } else {
                nlm.share(&args).await
            };
            assert_eq!(
                r.expect("SHARE/UNSHARE").stat,
                want,
                "{host} {access:?} {mode:?}"
            );
        }

        // A handle of nothing exported.
        let mut bogus = f.clone();
        bogus.data[1] ^= 0xff;
        let l = nlm_lock(&bogus, "127.0.0.1", 1, 0, 1);
        assert_eq!(lock(&nlm, &l, true, false).await, Nlm4Stats::StaleFh);

        // `rnfsd stats` counts NLM calls and shows the lock table.
        let out = Command::new(env!("CARGO_BIN_EXE_rnfsd"))
            .args(["stats", "--json", "--state-dir"])
            .arg(srv.state.path())
            .output()
            .expect("rnfsd stats");
        let snap = rnfsd_stats::Snapshot::from_json(&String::from_utf8_lossy(&out.stdout))
            .expect("a JSON snapshot");
        let locks_called: u64 = snap
            .procs
            .iter()
            .filter(|p| p.prog == 100021 && p.name == "LOCK")
            .map(|p| p.calls)
            .sum();
        assert!(locks_called >= 8, "NLM LOCK calls counted: {locks_called}");
        let l = snap.locks.expect("lock gauges");
        assert_eq!((l.files, l.shares), (1, 1), "{l:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn nlm_and_nsm_answer_over_udp_and_tcp() {
    let dir = TempDir::new("nlm-udp");
    let srv = TestServer::start_with(dir.path(), &["--no-rpcbind"]);
    bounded(async {
        let s = mount(&srv).await;
        let (f, _) = create_file(&s.nfs, &s.root, "u").await;
        // Over UDP on the NFS port, through our UDP client.
        let udp = UdpClient::connect(srv.addr, Auth::unix(0, 0), Duration::from_secs(10))
            .await
            .expect("UDP socket");
        for (prog, vers) in [(100021, 1), (100021, 3), (100021, 4), (100024, 1)] {
            let () = udp
                .call(prog, vers, 0, &())
                .await
                .unwrap_or_else(|e| panic!("NULL of {prog} v{vers} over UDP: {e}"));
        }
        let a = nlm_lock(&f, "127.0.0.1", 1, 0, 0);
        let r: Nlm4Res = udp
            .call(
                PROGRAM,
                VERSION4,
                PROC_LOCK,
                &lock_args(&a, true, false, false),
            )
            .await
            .expect("LOCK over UDP");
        assert_eq!(r.stat, Nlm4Stats::Granted);
        // Seen over TCP: another owner is refused, then free after the
        // UDP UNLOCK.
        let nlm = NlmClient::new(s.client.clone());
        let b = nlm_lock(&f, "hostb", 2, 10, 1);
        assert_eq!(lock(&nlm, &b, true, false).await, Nlm4Stats::Denied);
        let r: Nlm4Res = udp
            .call(
                PROGRAM,
                VERSION4,
                PROC_UNLOCK,
                &Nlm4UnlockArgs {
                    cookie: NetObj(b"u".to_vec()),
                    alock: a,
                },
            )
            .await
            .expect("UNLOCK over UDP");
        assert_eq!(r.stat, Nlm4Stats::Granted);
        assert_eq!(lock(&nlm, &b, true, false).await, Nlm4Stats::Granted);
        // NSM over UDP (statd's AUTH_NONE) and TCP: our state, odd (up).
        let anon = UdpClient::connect(srv.addr, Auth::none(), Duration::from_secs(10))
            .await
            .expect("UDP socket");
        let st: rnfsd_proto::nsm::SmStatRes = anon
            .call(100024, 1, 1, &rnfsd_proto::nsm::SmName::default())
            .await
            .expect("SM_STAT over UDP");
        assert_eq!(st.res_stat, rnfsd_proto::nsm::SmRes::StatSucc);
        assert_eq!(st.state % 2, 1, "odd while up");
        let r: rnfsd_proto::nsm::SmStatRes = s
            .client
            .call(100024, 1, 1, &rnfsd_proto::nsm::SmName::default())
            .await
            .expect("SM_STAT over TCP");
        assert_eq!(r.state, st.state);
        // NFS itself is not served on UDP.
        let e = udp.call::<(), ()>(100003, 3, 0, &()).await.unwrap_err();
        assert!(matches!(e, rnfsd_client::ClientError::ProgUnavail), "{e}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_gives_a_grace_period_for_reclaims() {
    let dir = TempDir::new("nlm-grace");
    let cfgdir = TempDir::new("nlm-grace-cfg");
    let cfg = write_config(cfgdir.path(), "[server]\nnlm_grace_secs = 3\n");
    let mut srv = TestServer::start_with(
        dir.path(),
        &["--no-rpcbind", "--config", &cfg, "--no-root-squash"],
    );
    let (fh, l) = bounded(async {
        let s = mount(&srv).await;
        let (f, _) = create_file(&s.nfs, &s.root, "g").await;
        let nlm = NlmClient::new(s.client.clone());
        let l = nlm_lock(&f, "127.0.0.1", 1, 0, 0);
        assert_eq!(lock(&nlm, &l, true, false).await, Nlm4Stats::Granted);
        (f, l)
    })
    .await;
    // The host list survives; the locks died with the process.
    srv.restart();
    bounded(async {
        let c = connect(&srv).await;
        let nlm = NlmClient::new(c);
        let other = nlm_lock(&fh, "127.0.0.1", 2, 0, 1);
        assert_eq!(
            lock(&nlm, &other, true, false).await,
            Nlm4Stats::DeniedGracePeriod
        );
        let st = nlm
            .lock(&lock_args(&l, true, false, true))
            .await
            .expect("reclaim")
            .stat;
        assert_eq!(st, Nlm4Stats::Granted, "a reclaim within the grace period");
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let st = lock(&nlm, &nlm_lock(&fh, "hostz", 5, 10, 1), true, false).await;
            if st != Nlm4Stats::DeniedGracePeriod {
                // The reclaimed lock (0 to EOF) is still in force.
                assert_eq!(st, Nlm4Stats::Denied);
                break;
            }
            assert!(Instant::now() < deadline, "the grace period never ended");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
}

/// Serves one call on `l` (record marking): returns (prog, vers, proc,
/// argument bytes) and answers success with `result`.
fn serve_one(l: &std::net::TcpListener, result: &[u8]) -> (u32, u32, u32, Vec<u8>) {
    serve_one_from(l, result).0
}

/// As `serve_one`, also returning the caller's address.
fn serve_one_from(
    l: &std::net::TcpListener,
    result: &[u8],
) -> ((u32, u32, u32, Vec<u8>), std::net::SocketAddr) {
    use std::io::{Read, Write};
    // Bounded: a callback that never comes fails the test.
    l.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut s, peer) = loop {
        match l.accept() {
            Ok(c) => break c,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(Instant::now() < deadline, "no callback connection");
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut mark = [0u8; 4];
    s.read_exact(&mut mark).unwrap();
    let n = (u32::from_be_bytes(mark) & 0x7fff_ffff) as usize;
    let mut rec = vec![0; n.min(1 << 16)];
    s.read_exact(&mut rec).unwrap();
    let mut d = rnfsd_xdr::Dec::new(&rec);
    let rnfsd_proto::rpc::Incoming::Call(h) = CallHeader::decode(&mut d).unwrap() else {
        panic!("not a call");
    };
    let args = rec[d.position()..].to_vec();
    let mut e = rnfsd_xdr::Enc::new();
    e.u32(0);
    rnfsd_proto::rpc::encode_accepted(&mut e, h.xid, AcceptStat::Success);
    e.raw(result);
    let len = (e.len() - 4) as u32;
    e.patch_u32(0, 0x8000_0000 | len);
    s.write_all(e.as_slice()).unwrap();
    ((h.prog, h.vers, h.proc_, args), peer)
}

/// A listener on `ip`:111 where a test plays a client host's port mapper
/// (None, saying why, without root; or when a system rpcbind holds the
/// wildcard address, as the port mapper tests in smoke.rs).
fn client_port_mapper(what: &str, ip: &str) -> Option<std::net::TcpListener> {
    // SAFETY: geteuid cannot fail.
    let why = (unsafe { libc::geteuid() } != 0)
        .then(|| "needs root to play the client's port mapper on port 111".to_owned());
    if common::skip(what, why) {
        return None;
    }
    match std::net::TcpListener::bind((ip, 111)) {
        Ok(l) => Some(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            eprintln!("SKIP {what}: port 111 is taken on {ip}: {e}");
            None
        }
        Err(e) => panic!("bind {ip}:111: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn msg_calls_answer_through_the_callers_res_procedures() {
    // The "client" calls from 127.0.0.9, where this test plays its port
    // mapper (111) and its lock manager.
    let Some(pm) = client_port_mapper("NLM *_MSG", "127.0.0.9") else {
        return;
    };
    let nlm_l = std::net::TcpListener::bind("127.0.0.9:0").unwrap();
    let nlm_port = nlm_l.local_addr().unwrap().port();
    // One answer in version 4 (LOCK_MSG), then one in version 1
    // (UNLOCK_MSG): each found through the port mapper in its version.
    let fake = std::thread::spawn(move || {
        let mut answers = Vec::new();
        for (want_vers, want_proc) in [(4, PROC_LOCK_RES), (1, PROC_UNLOCK_RES)] {
            let (prog, vers, proc_, args) = serve_one(&pm, &u32::from(nlm_port).to_be_bytes());
            assert_eq!((prog, vers, proc_), (100000, 2, 3), "PMAP GETPORT");
            let m: rnfsd_proto::portmap::Mapping = rnfsd_xdr::from_slice(&args).unwrap();
            assert_eq!((m.prog, m.vers), (100021, want_vers));
            let (prog, vers, proc_, args) = serve_one(&nlm_l, &[]);
            assert_eq!((prog, vers, proc_), (100021, want_vers, want_proc));
            answers.push(args);
        }
        answers
    });
    let dir = TempDir::new("nlm-msg");
    let srv = TestServer::start_with(dir.path(), &["--no-rpcbind"]);
    let res = bounded(async {
        let s = mount(&srv).await;
        let (f, _) = create_file(&s.nfs, &s.root, "m").await;
        let c = client_from(&srv, "127.0.0.9").await;
        let nlm = NlmClient::new(c);
        let l = nlm_lock(&f, "127.0.0.9", 4, 0, 10);
        nlm.lock_msg(&lock_args(&l, true, false, false))
            .await
            .expect("LOCK_MSG");
        // Version 1: 32-bit range, the same lock, answered as UNLOCK_RES v1.
        let v1 = NlmUnlockArgs {
            cookie: NetObj(b"v1".to_vec()),
            alock: NlmLock {
                caller_name: l.caller_name.clone(),
                fh: l.fh.clone(),
                oh: l.oh.clone(),
                svid: l.svid,
                l_offset: 0,
                l_len: 10,
            },
        };
        // The connection stays open until the answer came back (a closed
        // connection's queued calls are dropped, as its replies would be).
        let fake = tokio::task::spawn_blocking(move || fake.join().expect("fake client"));
        // The second call only once the first answer is on its way, so the
        // fake sees them in order.
        tokio::time::sleep(Duration::from_millis(300)).await;
        nlm.client()
            .send(PROGRAM, VERSION1, PROC_UNLOCK_MSG, &v1)
            .await
            .expect("UNLOCK_MSG v1");
        let res = fake.await.unwrap();
        drop(nlm);
        res
    })
    .await;
    let lock_res: Nlm4Res = rnfsd_xdr::from_slice(&res[0]).unwrap();
    assert_eq!(
        (lock_res.stat, &lock_res.cookie.0[..]),
        (Nlm4Stats::Granted, &b"c"[..])
    );
    let unlock_res: NlmRes = rnfsd_xdr::from_slice(&res[1]).unwrap();
    assert_eq!(
        (unlock_res.stat, &unlock_res.cookie.0[..]),
        (NlmStats::Granted, &b"v1"[..])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_tells_the_hosts_that_held_locks() {
    let Some(pm) = client_port_mapper("NSM SM_NOTIFY at restart", "127.0.0.10") else {
        return;
    };
    let dir = TempDir::new("nsm-notify");
    let mut srv = TestServer::start_with(dir.path(), &["--no-rpcbind"]);
    // A client at 127.0.0.10 takes a lock: the server remembers the host.
    bounded(async {
        let s = mount(&srv).await;
        let (f, _) = create_file(&s.nfs, &s.root, "n").await;
        let nlm = NlmClient::new(client_from(&srv, "127.0.0.10").await);
        let l = nlm_lock(&f, "client10", 1, 0, 1);
        assert_eq!(lock(&nlm, &l, true, false).await, Nlm4Stats::Granted);
    })
    .await;
    let state_before: i32 = std::fs::read_to_string(srv.state.path().join("nlm/state"))
        .expect("NSM state kept")
        .trim()
        .parse()
        .unwrap();
    // Its status monitor: our fake, at a port its port mapper gives.
    let statd = std::net::TcpListener::bind("127.0.0.10:0").unwrap();
    let statd_port = statd.local_addr().unwrap().port();
    let fake = std::thread::spawn(move || {
        let (prog, vers, proc_, args) = serve_one(&pm, &u32::from(statd_port).to_be_bytes());
        assert_eq!((prog, vers, proc_), (100000, 2, 3), "PMAP GETPORT");
        let m: rnfsd_proto::portmap::Mapping = rnfsd_xdr::from_slice(&args).unwrap();
        assert_eq!((m.prog, m.vers), (100024, 1));
        let (prog, vers, proc_, args) = serve_one(&statd, &[]);
        assert_eq!((prog, vers, proc_), (100024, 1, 6), "SM_NOTIFY");
        rnfsd_xdr::from_slice::<rnfsd_proto::nsm::StatChge>(&args).unwrap()
    });
    srv.restart();
    let notice = tokio::task::spawn_blocking(move || fake.join().expect("fake statd"))
        .await
        .unwrap();
    assert_eq!(notice.state, state_before + 2, "the new state, odd: up");
    assert_eq!(
        notice.mon_name.0, b"127.0.0.1",
        "named as the client called us"
    );
}

/// The client addresses in the server's hosts file (its restart list),
/// sorted.
fn hosts_in_file(srv: &TestServer) -> Vec<String> {
    let text = std::fs::read_to_string(srv.state.path().join("nlm/hosts")).unwrap_or_default();
    let mut v: Vec<String> = text
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_owned))
        .collect();
    v.sort();
    v
}

/// Waits (at most 20 s) for the hosts file to list exactly `want`.
async fn wait_hosts_file(srv: &TestServer, want: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = hosts_in_file(srv);
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "hosts file: {got:?}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Two clients that send the same caller name, owner handle and svid (two
/// VMs cloned from one image, as Linux names its first owner "1@nodename")
/// are two owners: they conflict, and one's UNLOCK, FREE_ALL or SM_NOTIFY
/// under the other's name leaves the other's locks alone.
#[tokio::test(flavor = "multi_thread")]
async fn clients_with_one_name_are_two_hosts() {
    let dir = TempDir::new("nlm-names");
    let srv = TestServer::start_with(dir.path(), &["--no-rpcbind"]);
    bounded(async {
        let s = mount(&srv).await;
        let (f, _) = create_file(&s.nfs, &s.root, "n").await;
        let named = |offset, len| Nlm4Lock {
            caller_name: CallerName(b"ubuntu".to_vec()),
            fh: NetObj(f.data.clone()),
            oh: NetObj(b"1@ubuntu".to_vec()),
            svid: 1,
            l_offset: offset,
            l_len: len,
        };
        let a = NlmClient::new(client_from(&srv, "127.0.1.1").await);
        let b_conn = client_from(&srv, "127.0.1.2").await;
        let b = NlmClient::new(b_conn.clone());
        assert_eq!(
            lock(&a, &named(0, 10), true, false).await,
            Nlm4Stats::Granted
        );
        assert_eq!(
            lock(&b, &named(5, 1), true, false).await,
            Nlm4Stats::Denied,
            "the same owner triple from another address is another owner"
        );
        let t = b
            .test(&Nlm4TestArgs {
                cookie: NetObj(b"t".to_vec()),
                exclusive: false,
                alock: named(0, 1),
            })
            .await
            .expect("TEST");
        assert!(matches!(t.stat, Nlm4TestRply::Denied(_)), "{t:?}");
        assert_eq!(unlock(&b, &named(0, 0)).await, Nlm4Stats::Granted);
        assert_eq!(
            lock(&b, &named(20, 1), true, false).await,
            Nlm4Stats::Granted
        );
        // Each is its own host in the restart list.
        wait_hosts_file(&srv, &["127.0.1.1", "127.0.1.2"]).await;
        // b's FREE_ALL and reboot notice, naming "ubuntu", free b's locks.
        b.free_all(&Nlm4Notify {
            name: NotifyName(b"ubuntu".to_vec()),
            state: 3,
        })
        .await
        .expect("FREE_ALL");
        assert_eq!(
            lock(&b, &named(20, 1), true, false).await,
            Nlm4Stats::Granted
        );
        rnfsd_client::NsmClient::new(b_conn)
            .notify(&rnfsd_proto::nsm::StatChge {
                mon_name: rnfsd_proto::nsm::SmString(b"ubuntu".to_vec()),
                state: 5,
            })
            .await
            .expect("SM_NOTIFY");
        wait_hosts_file(&srv, &["127.0.1.1"]).await;
        let c = NlmClient::new(client_from(&srv, "127.0.1.3").await);
        let other = nlm_lock(&f, "c", 1, 5, 1);
        assert_eq!(
            lock(&c, &other, true, false).await,
            Nlm4Stats::Denied,
            "a's lock survives b's UNLOCK, FREE_ALL and SM_NOTIFY"
        );
        let other20 = nlm_lock(&f, "c", 1, 20, 1);
        assert_eq!(
            lock(&c, &other20, true, false).await,
            Nlm4Stats::Granted,
            "b's lock went with its reboot notice"
        );
        a.free_all(&Nlm4Notify {
            name: NotifyName(b"anything".to_vec()),
            state: 3,
        })
        .await
        .expect("FREE_ALL");
        assert_eq!(lock(&c, &other, true, false).await, Nlm4Stats::Granted);
    })
    .await;
}

/// NLM4 SHARE of `fh` by owner `oh` (read access, deny none): the status.
async fn share(nlm: &NlmClient, fh: &[u8], oh: &str) -> Nlm4Stats {
    nlm.share(&Nlm4ShareArgs {
        cookie: NetObj(b"s".to_vec()),
        share: Nlm4Share {
            caller_name: CallerName(b"h".to_vec()),
            fh: NetObj(fh.to_vec()),
            oh: NetObj(oh.as_bytes().to_vec()),
            mode: FshMode::DenyNone,
            access: FshAccess::Read,
        },
        reclaim: false,
    })
    .await
    .expect("SHARE")
    .stat
}

/// One client sending many caller names is still one client: it cannot
/// fill the lock table (another client still locks), its shares count in
/// its bound, and a SHARE of a handle of nothing is refused.
#[tokio::test(flavor = "multi_thread")]
async fn one_address_cannot_fill_the_lock_table() {
    let dir = TempDir::new("nlm-fill");
    let cfgdir = TempDir::new("nlm-fill-cfg");
    let cfg = write_config(
        cfgdir.path(),
        "[server]\nnlm_max_files = 16\nnlm_max_per_client = 8\n",
    );
    let srv = TestServer::start_with(
        dir.path(),
        &["--no-rpcbind", "--config", &cfg, "--no-root-squash"],
    );
    bounded(async {
        let s = mount(&srv).await;
        let mut files = Vec::new();
        for i in 0..20 {
            files.push(create_file(&s.nfs, &s.root, &format!("f{i}")).await.0);
        }
        let hog = NlmClient::new(client_from(&srv, "127.0.2.1").await);
        let mut granted = 0;
        for (i, f) in files.iter().enumerate() {
            let l = nlm_lock(f, &format!("name-{i}-{}", "x".repeat(900)), 1, 0, 1);
            match lock(&hog, &l, true, false).await {
                Nlm4Stats::Granted => granted += 1,
                st => assert_eq!(st, Nlm4Stats::DeniedNoLocks),
            }
        }
        assert_eq!(granted, 8, "one address, whatever names it sends");
        let other = NlmClient::new(client_from(&srv, "127.0.2.2").await);
        let l = nlm_lock(&files[19], "other", 1, 0, 1);
        assert_eq!(
            lock(&other, &l, true, false).await,
            Nlm4Stats::Granted,
            "room left for another client"
        );
        // Shares count in the same bound.
        assert_eq!(
            share(&hog, &files[0].data, "s").await,
            Nlm4Stats::DeniedNoLocks
        );
        assert_eq!(share(&other, &files[0].data, "s").await, Nlm4Stats::Granted);
        // A handle of no file: refused, not reserved.
        let mut junk = files[1].data.clone();
        if let Some(b) = junk.last_mut() {
            *b ^= 0xff;
        }
        assert_eq!(share(&other, &junk, "j").await, Nlm4Stats::StaleFh);
        // A client holding only a share is remembered for a restart, and
        // forgotten once it holds nothing.
        let sharer = NlmClient::new(client_from(&srv, "127.0.2.3").await);
        assert_eq!(
            share(&sharer, &files[2].data, "s").await,
            Nlm4Stats::Granted
        );
        wait_hosts_file(&srv, &["127.0.2.1", "127.0.2.2", "127.0.2.3"]).await;
        let unshare = sharer
            .unshare(&Nlm4ShareArgs {
                cookie: NetObj(b"u".to_vec()),
                share: Nlm4Share {
                    caller_name: CallerName(b"h".to_vec()),
                    fh: NetObj(files[2].data.clone()),
                    oh: NetObj(b"s".to_vec()),
                    mode: FshMode::DenyNone,
                    access: FshAccess::Read,
                },
                reclaim: false,
            })
            .await
            .expect("UNSHARE");
        assert_eq!(unshare.stat, Nlm4Stats::Granted);
        wait_hosts_file(&srv, &["127.0.2.1", "127.0.2.2"]).await;
    })
    .await;
}

/// The nlm4_res a fake client's lock manager answers GRANTED with.
fn granted_res(stat: Nlm4Stats) -> Vec<u8> {
    rnfsd_xdr::to_vec(&Nlm4Res {
        cookie: NetObj(b"c".to_vec()),
        stat,
    })
}

/// A client whose port mapper accepts connections and never answers (it
/// trickles nothing at all) gets many `*_MSG` answers stuck; another
/// client's GRANTED still goes out: one client holds only its share of
/// the callback places.
#[tokio::test(flavor = "multi_thread")]
async fn a_slow_client_cannot_hold_every_callback() {
    let Some(_slow_pm) = client_port_mapper("NLM callback bound", "127.0.3.1") else {
        return;
    };
    let Some(pm) = client_port_mapper("NLM callback bound", "127.0.3.2") else {
        return;
    };
    let nlm_l = std::net::TcpListener::bind("127.0.3.2:0").unwrap();
    let nlm_port = nlm_l.local_addr().unwrap().port();
    let dir = TempDir::new("nlm-cb-bound");
    let srv = TestServer::start_with(dir.path(), &["--no-rpcbind"]);
    bounded(async {
        let s = mount(&srv).await;
        let (f, _) = create_file(&s.nfs, &s.root, "cb").await;
        let slow = NlmClient::new(client_from(&srv, "127.0.3.1").await);
        for i in 0..70 {
            slow.test_msg(&Nlm4TestArgs {
                cookie: NetObj(format!("t{i}").into_bytes()),
                exclusive: true,
                alock: nlm_lock(&f, "slow", 1, 0, 1),
            })
            .await
            .expect("TEST_MSG");
        }
        // A blocked lock of another client, granted once the holder
        // unlocks: its GRANTED must reach it.
        let nlm = NlmClient::new(s.client.clone());
        let holder = nlm_lock(&f, "holder", 1, 0, 1);
        assert_eq!(lock(&nlm, &holder, true, false).await, Nlm4Stats::Granted);
        let waiter = NlmClient::new(client_from(&srv, "127.0.3.2").await);
        let w = nlm_lock(&f, "waiter", 2, 0, 1);
        assert_eq!(lock(&waiter, &w, true, true).await, Nlm4Stats::Blocked);
        let fake = std::thread::spawn(move || {
            let (prog, vers, proc_, _) = serve_one(&pm, &u32::from(nlm_port).to_be_bytes());
            assert_eq!((prog, vers, proc_), (100000, 2, 3), "PMAP GETPORT");
            let (prog, vers, proc_, args) = serve_one(&nlm_l, &granted_res(Nlm4Stats::Granted));
            assert_eq!((prog, vers, proc_), (100021, 4, PROC_GRANTED));
            rnfsd_xdr::from_slice::<Nlm4TestArgs>(&args).unwrap()
        });
        assert_eq!(unlock(&nlm, &holder).await, Nlm4Stats::Granted);
        let granted = tokio::task::spawn_blocking(move || fake.join().expect("GRANTED"))
            .await
            .unwrap();
        assert_eq!(granted.alock.svid, 2);
        drop(waiter);
    })
    .await;
}

/// After a restart, hosts that are gone (their port mappers take the
/// connection and never answer) do not delay the notice to a host that is
/// there: it is told well within the grace period and reclaims; the dead
/// ones are dropped from the hosts list once their notice gave up, and a
/// reclaim after the grace period is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_restart_tells_live_hosts_past_dead_ones() {
    let mut dead = Vec::new();
    for i in 10..20 {
        let Some(l) = client_port_mapper("SM_NOTIFY past dead hosts", &format!("127.0.4.{i}"))
        else {
            return;
        };
        dead.push(l);
    }
    let Some(pm) = client_port_mapper("SM_NOTIFY past dead hosts", "127.0.4.30") else {
        return;
    };
    const GRACE: u64 = 8;
    let dir = TempDir::new("nsm-dead");
    let cfgdir = TempDir::new("nsm-dead-cfg");
    let cfg = write_config(
        cfgdir.path(),
        &format!("[server]\nnlm_grace_secs = {GRACE}\n"),
    );
    let mut srv = TestServer::start_with(
        dir.path(),
        &["--no-rpcbind", "--config", &cfg, "--no-root-squash"],
    );
    let l = bounded(async {
        let s = mount(&srv).await;
        let (f, _) = create_file(&s.nfs, &s.root, "d").await;
        let nlm = NlmClient::new(client_from(&srv, "127.0.4.30").await);
        let l = nlm_lock(&f, "live", 1, 0, 1);
        assert_eq!(lock(&nlm, &l, true, false).await, Nlm4Stats::Granted);
        l
    })
    .await;
    srv.stop();
    // Ten hosts of the previous run that are gone, sorting first by name
    // and by address.
    let hosts = srv.state.path().join("nlm/hosts");
    let mut text = std::fs::read_to_string(&hosts).expect("hosts file");
    assert!(text.contains("127.0.4.30"), "{text}");
    for i in 10..20 {
        let name: String = format!("a-dead-{i}")
            .bytes()
            .map(|b| format!("{b:02x}"))
            .collect();
        text.push_str(&format!("{name} 127.0.4.{i} 127.0.0.1\n"));
    }
    std::fs::write(&hosts, text).unwrap();
    let statd = std::net::TcpListener::bind("127.0.4.30:0").unwrap();
    let statd_port = statd.local_addr().unwrap().port();
    let fake = std::thread::spawn(move || {
        let (prog, vers, proc_, _) = serve_one(&pm, &u32::from(statd_port).to_be_bytes());
        assert_eq!((prog, vers, proc_), (100000, 2, 3), "PMAP GETPORT");
        let (prog, vers, proc_, _) = serve_one(&statd, &[]);
        assert_eq!((prog, vers, proc_), (100024, 1, 6), "SM_NOTIFY");
        Instant::now()
    });
    let started = Instant::now();
    srv.respawn();
    let told = tokio::task::spawn_blocking(move || fake.join().expect("fake statd"))
        .await
        .unwrap();
    let took = told - started;
    assert!(
        took < Duration::from_secs(GRACE / 2),
        "the live host was told after {took:?}"
    );
    bounded(async {
        let nlm = NlmClient::new(client_from(&srv, "127.0.4.30").await);
        let reclaim = |l: &Nlm4Lock| lock_args(l, true, false, true);
        let st = nlm.lock(&reclaim(&l)).await.expect("reclaim").stat;
        assert_eq!(st, Nlm4Stats::Granted, "a reclaim within the grace period");
        // The dead hosts are forgotten once their notices gave up (at the
        // end of the grace period); the live one holds its lock.
        wait_hosts_file(&srv, &["127.0.4.30"]).await;
        let late = Nlm4Lock {
            svid: 2,
            l_offset: 5,
            ..l.clone()
        };
        let st = nlm.lock(&reclaim(&late)).await.expect("reclaim").stat;
        assert_eq!(st, Nlm4Stats::DeniedGracePeriod, "a reclaim after grace");
    })
    .await;
    drop(dead);
}

/// One RPC call in a datagram from local address `local` to `to`
/// (AUTH_SYS root): the reply, or None if none came within a second.
fn udp_call_from(
    local: &str,
    to: std::net::SocketAddr,
    prog: u32,
    vers: u32,
    proc_: u32,
    args: &[u8],
) -> Option<Vec<u8>> {
    let s = std::net::UdpSocket::bind((local, 0)).expect("UDP socket");
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let auth = Auth::unix(0, 0);
    let mut e = rnfsd_xdr::Enc::new();
    CallHeader {
        xid: 0x5eed,
        rpcvers: 2,
        prog,
        vers,
        proc_,
        cred: rnfsd_proto::rpc::OpaqueAuth {
            flavor: auth.flavor(),
            body: auth.body(),
        },
        verf: rnfsd_proto::rpc::OpaqueAuth::NONE,
    }
    .encode(&mut e);
    e.raw(args);
    s.send_to(e.as_slice(), to).expect("send");
    let mut buf = vec![0; 65536];
    s.recv(&mut buf).ok().map(|n| buf[..n].to_vec())
}

/// Connections taken on `l` within `wait` (a fake port mapper that
/// counts callbacks and answers none).
fn connections_within(l: &std::net::TcpListener, wait: Duration) -> usize {
    l.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + wait;
    let mut n = 0;
    while Instant::now() < deadline {
        match l.accept() {
            Ok(_) => n += 1,
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    n
}

/// The lock manager over UDP takes nothing from a host no export lists,
/// and a `*_MSG` call that fails its export's client check (from a host
/// listed only by another export) gets no `*_RES` callback: a callback is
/// a connection we open to the caller.
#[tokio::test(flavor = "multi_thread")]
async fn strangers_get_no_answers_and_no_callbacks() {
    let Some(pm_listed) = client_port_mapper("NLM strangers", "127.0.5.1") else {
        return;
    };
    let Some(pm_stranger) = client_port_mapper("NLM strangers", "127.0.5.2") else {
        return;
    };
    let (one, two) = (
        TempDir::new("nlm-strangers-1"),
        TempDir::new("nlm-strangers-2"),
    );
    let cfgdir = TempDir::new("nlm-strangers-cfg");
    let export = |p: &std::path::Path, client: &str| {
        format!(
            "[[export]]\npath = \"{}\"\nclients = [\"{client}\"]\nsecure = false\nroot_squash = false\n",
            p.display()
        )
    };
    let cfg = write_config(
        cfgdir.path(),
        &format!(
            "[server]\nregister_rpcbind = false\n{}{}",
            export(one.path(), "127.0.0.1"),
            export(two.path(), "127.0.5.1")
        ),
    );
    let srv = TestServer::start_config(
        std::path::Path::new(&cfg),
        one.path(),
        TempDir::new("nlm-strangers-state"),
        &[],
    );
    let (f_one, f_two) = bounded(async {
        let s = mount(&srv).await;
        let (f_one, _) = create_file(&s.nfs, &s.root, "one").await;
        let c = client_from(&srv, "127.0.5.1").await;
        let root = mnt_from(&c, two.path().to_str().unwrap())
            .await
            .expect("MNT of the second export");
        let nfs = rnfsd_client::NfsClient::new(c);
        let (f_two, _) = create_file(&nfs, &root, "two").await;
        (f_one, f_two)
    })
    .await;
    let test_args = |fh: &rnfsd_proto::nfs3::NfsFh3| {
        rnfsd_xdr::to_vec(&Nlm4TestArgs {
            cookie: NetObj(b"t".to_vec()),
            exclusive: true,
            alock: nlm_lock(fh, "x", 1, 0, 1),
        })
    };
    // A stranger over UDP: no answer, no callback.
    let to = srv.addr;
    assert_eq!(
        udp_call_from("127.0.5.2", to, PROGRAM, VERSION4, 0, &[]),
        None
    );
    let msg = test_args(&f_one);
    assert_eq!(
        udp_call_from("127.0.5.2", to, PROGRAM, VERSION4, PROC_TEST_MSG, &msg),
        None
    );
    // A listed host, over UDP and TCP, with a handle of the export that
    // does not list it: no callback either.
    let reply = udp_call_from("127.0.5.1", to, PROGRAM, VERSION4, PROC_TEST_MSG, &msg);
    assert!(reply.is_some(), "a listed host is answered over UDP");
    bounded(async {
        let nlm = NlmClient::new(client_from(&srv, "127.0.5.1").await);
        let a: Nlm4TestArgs = rnfsd_xdr::from_slice(&msg).unwrap();
        nlm.test_msg(&a).await.expect("TEST_MSG");
    })
    .await;
    let (listed, stranger) = std::thread::scope(|s| {
        let a = s.spawn(|| connections_within(&pm_listed, Duration::from_secs(2)));
        let b = s.spawn(|| connections_within(&pm_stranger, Duration::from_secs(2)));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!((listed, stranger), (0, 0), "callbacks to refused callers");
    // With a handle of its own export, the listed host is answered.
    let ok = test_args(&f_two);
    assert!(udp_call_from("127.0.5.1", to, PROGRAM, VERSION4, PROC_TEST_MSG, &ok).is_some());
    assert_eq!(
        connections_within(&pm_listed, Duration::from_secs(5)),
        1,
        "TEST_RES goes back to a caller its export lists"
    );
}

/// On a read-only export a client may not keep others from writing: an
/// exclusive LOCK, and a SHARE with write access or denying write, answer
/// NLM4_ROFS (as knfsd); shared locks, TEST and read shares work.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_export_refuses_write_locks() {
    let dir = TempDir::new("nlm-ro");
    std::fs::write(dir.path().join("ro"), b"0123456789").unwrap();
    let srv = TestServer::start_with(dir.path(), &["--no-rpcbind", "--read-only"]);
    bounded(async {
        let s = mount(&srv).await;
        let f = lookup(&s.nfs, &s.root, "ro").await;
        let nlm = NlmClient::new(s.client.clone());
        let l = nlm_lock(&f, "ro", 1, 0, 0);
        assert_eq!(lock(&nlm, &l, true, false).await, Nlm4Stats::Rofs);
        assert_eq!(
            lock(&nlm, &l, true, true).await,
            Nlm4Stats::Rofs,
            "blocking"
        );
        let t = nlm
            .test(&Nlm4TestArgs {
                cookie: NetObj(b"t".to_vec()),
                exclusive: true,
                alock: l.clone(),
            })
            .await
            .expect("TEST");
        assert_eq!(t.stat, Nlm4TestRply::Stat(Nlm4Stats::Granted));
        assert_eq!(lock(&nlm, &l, false, false).await, Nlm4Stats::Granted);
        let sh = |access, mode| Nlm4ShareArgs {
            cookie: NetObj(b"s".to_vec()),
            share: Nlm4Share {
                caller_name: CallerName(b"ro".to_vec()),
                fh: NetObj(f.data.clone()),
                oh: NetObj(b"1".to_vec()),
                mode,
                access,
            },
            reclaim: false,
        };
        for (access, mode, want) in [
            (FshAccess::Write, FshMode::DenyNone, Nlm4Stats::Rofs),
            (FshAccess::Read, FshMode::DenyWrite, Nlm4Stats::Rofs),
            (FshAccess::Read, FshMode::DenyNone, Nlm4Stats::Granted),
        ] {
            let st = nlm.share(&sh(access, mode)).await.expect("SHARE").stat;
            assert_eq!(st, want, "{access:?} {mode:?}");
        }
    })
    .await;
}

/// GRANTED leaves from the server address the client called (a
/// multi-homed server's routing would pick another, and the Linux client
/// takes GRANTED only from the server it locked with), in the NLM version
/// the client locked with; a client answering it with DENIED (it gave up
/// waiting) has the lock released.
#[tokio::test(flavor = "multi_thread")]
async fn granted_comes_from_the_address_called_and_denied_releases() {
    let Some(pm) = client_port_mapper("GRANTED details", "127.0.6.2") else {
        return;
    };
    let nlm_l = std::net::TcpListener::bind("127.0.6.2:0").unwrap();
    let nlm_port = nlm_l.local_addr().unwrap().port();
    // A second NFS address, 127.0.6.1, at a port found free.
    let second = std::net::TcpListener::bind("127.0.6.1:0").unwrap();
    let second_addr = second.local_addr().unwrap();
    drop(second);
    let listen = second_addr.to_string();
    let dir = TempDir::new("nlm-granted");
    let srv = TestServer::start_with(dir.path(), &["--no-rpcbind", "--listen", &listen]);
    bounded(async {
        let s = mount(&srv).await;
        let (f, _) = create_file(&s.nfs, &s.root, "g").await;
        let nlm = NlmClient::new(s.client.clone());
        let holder = nlm_lock(&f, "holder", 1, 0, 1);
        assert_eq!(lock(&nlm, &holder, true, false).await, Nlm4Stats::Granted);
        // The waiter calls the second address, in NLM version 1.
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.bind("127.0.6.2:0".parse().unwrap()).unwrap();
        let st = sock.connect(second_addr).await.expect("connect");
        let conn = rnfsd_client::RpcConnection::from_stream(st, &config(1)).expect("conn");
        let waiter = rnfsd_client::Client::from_connection(conn);
        let v1 = NlmLockArgs {
            cookie: NetObj(b"w".to_vec()),
            block: true,
            exclusive: true,
            alock: NlmLock {
                caller_name: CallerName(b"waiter".to_vec()),
                fh: NetObj(f.data.clone()),
                oh: NetObj(b"waiter:2".to_vec()),
                svid: 2,
                l_offset: 0,
                l_len: 1,
            },
            reclaim: false,
            state: 1,
        };
        let r: NlmRes = waiter
            .call(PROGRAM, VERSION1, PROC_LOCK, &v1)
            .await
            .expect("LOCK v1");
        assert_eq!(r.stat, NlmStats::Blocked);
        let fake = std::thread::spawn(move || {
            let ((prog, vers, proc_, args), from) =
                serve_one_from(&pm, &u32::from(nlm_port).to_be_bytes());
            assert_eq!((prog, vers, proc_), (100000, 2, 3), "PMAP GETPORT");
            let m: rnfsd_proto::portmap::Mapping = rnfsd_xdr::from_slice(&args).unwrap();
            assert_eq!((m.prog, m.vers), (100021, 1), "the version locked with");
            assert_eq!(from.ip().to_string(), "127.0.6.1", "port mapper query");
            let refused = rnfsd_xdr::to_vec(&NlmRes {
                cookie: NetObj(b"w".to_vec()),
                stat: NlmStats::Denied,
            });
            let ((prog, vers, proc_, args), from) = serve_one_from(&nlm_l, &refused);
            assert_eq!((prog, vers, proc_), (100021, 1, PROC_GRANTED));
            assert_eq!(from.ip().to_string(), "127.0.6.1", "GRANTED");
            rnfsd_xdr::from_slice::<NlmTestArgs>(&args).unwrap()
        });
        assert_eq!(unlock(&nlm, &holder).await, Nlm4Stats::Granted);
        let granted = tokio::task::spawn_blocking(move || fake.join().expect("GRANTED"))
            .await
            .unwrap();
        assert_eq!(granted.alock.svid, 2);
        assert_eq!(&granted.cookie.0[..], b"w");
        // Refused: released, so another owner gets the range.
        let other = NlmClient::new(client_from(&srv, "127.0.6.3").await);
        let l = nlm_lock(&f, "other", 3, 0, 1);
        let deadline = Instant::now() + Duration::from_secs(5);
        while lock(&other, &l, true, false).await != Nlm4Stats::Granted {
            assert!(
                Instant::now() < deadline,
                "the refused lock was never released"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        drop(waiter);
    })
    .await;
}

/// A reload that removes an export frees its locks: no one could UNLOCK
/// them any more (the handles are stale), and they would block local
/// programs for good.
#[tokio::test(flavor = "multi_thread")]
async fn a_reload_frees_the_locks_of_a_removed_export() {
    let (a, b, cfgdir) = (
        TempDir::new("nlm-reload-a"),
        TempDir::new("nlm-reload-b"),
        TempDir::new("nlm-reload-cfg"),
    );
    let cfg = write_config(cfgdir.path(), &common::export_table(a.path(), ""));
    let srv = TestServer::start_config(
        std::path::Path::new(&cfg),
        a.path(),
        TempDir::new("nlm-reload-state"),
        &["--no-rpcbind"],
    );
    bounded(async {
        let s = mount(&srv).await;
        let (f, _) = create_file(&s.nfs, &s.root, "held").await;
        let nlm = NlmClient::new(s.client.clone());
        let l = nlm_lock(&f, "127.0.0.1", 1, 0, 0);
        assert_eq!(lock(&nlm, &l, true, false).await, Nlm4Stats::Granted);
        let (mut c, got) = local_lock(&a.path().join("held"));
        assert!(!got, "the client's lock holds");
        let _ = c.wait();
        write_config(cfgdir.path(), &common::export_table(b.path(), ""));
        srv.hup();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (mut c, got) = local_lock(&a.path().join("held"));
            let _ = c.kill();
            let _ = c.wait();
            if got {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the removed export's lock was kept: {}",
                log_tail(&srv, 10)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
}
