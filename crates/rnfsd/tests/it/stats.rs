//! End to end: the statistics of a real server, read through its admin
//! socket, `rnfsd stats` and the Prometheus endpoint, after a known
//! sequence of calls from several connections at once.

use crate::common;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;

use common::nfs::*;
use common::{TempDir, TestServer};
use rnfsd_client::nfs3::*;
use rnfsd_client::{Auth, ClientError, MountClient, NfsClient};
use rnfsd_stats::Snapshot;

const CLIENTS: usize = 4;
const GETATTRS: usize = 50;
const MISSING: usize = 10;
const IO: usize = 1000;

fn sock(srv: &TestServer) -> PathBuf {
    srv.state.path().join("admin.sock")
}

fn snapshot(srv: &TestServer) -> Snapshot {
    let a = rnfsd::admin::query(&sock(srv), "snapshot").expect("admin socket");
    Snapshot::from_json(&a).expect("snapshot JSON")
}

fn start(tag: &str, extra: &[&str]) -> (TempDir, TestServer) {
    let dir = TempDir::new(tag);
    for i in 0..CLIENTS {
        std::fs::write(dir.path().join(format!("f{i}")), vec![b'a'; IO]).expect("write");
    }
    let mut args = vec!["--no-rpcbind"];
    args.extend_from_slice(extra);
    let srv = TestServer::start_with(dir.path(), &args);
    (dir, srv)
}

/// Per client (own connection): MNT, GETATTR ×50, LOOKUP of a missing name
/// ×10 and of its file, WRITE and READ of 1000 bytes, then one each of
/// PROG_UNAVAIL, PROG_MISMATCH, PROC_UNAVAIL, GARBAGE_ARGS and AUTH_ERROR
/// (TOOWEAK: AUTH_NONE on GETATTR). All clients at once.
async fn workload(srv: &TestServer) {
    let mut tasks = Vec::new();
    for i in 0..CLIENTS {
        let client = connect(srv).await;
        let export = export_path(srv);
        tasks.push(tokio::spawn(async move {
            let root = MountClient::new(client.clone())
                .mnt(export)
                .await
                .expect("MNT")
                .fhandle;
            let root = NfsFh3::new(root);
            let nfs = NfsClient::new(client.clone());
            for _ in 0..GETATTRS {
                getattr(&nfs, &root).await;
            }
            for k in 0..MISSING {
                let r = lookup_res(&nfs, &root, &format!("missing{k}"))
                    .await
                    .unwrap();
                assert_eq!(r.status(), Nfsstat3::NoEnt);
            }
            let f = lookup(&nfs, &root, &format!("f{i}")).await;
            write(&nfs, &f, 0, &[b'b'; IO]).await;
            let r = ok("READ", read_res(&nfs, &f, 0, IO as u32).await);
            assert_eq!(r.data.len(), IO);
            let args = rnfsd_xdr::to_vec(&GetAttr3Args {
                object: root.clone(),
            });
            assert!(matches!(
                client.call_raw(200_123, 1, 0, &[]).await,
                Err(ClientError::ProgUnavail)
            ));
            assert!(matches!(
                client.call_raw(NFS_PROGRAM, 2, 0, &[]).await,
                Err(ClientError::ProgMismatch { .. })
            ));
            assert!(matches!(
                client.call_raw(NFS_PROGRAM, 3, 99, &args).await,
                Err(ClientError::ProcUnavail)
            ));
            assert!(matches!(
                client.call_raw(NFS_PROGRAM, 3, NFSPROC3_GETATTR, &[]).await,
                Err(ClientError::GarbageArgs)
            ));
            let weak = client.with_auth(Auth::none());
            assert!(weak
                .call_raw(NFS_PROGRAM, 3, NFSPROC3_GETATTR, &args)
                .await
                .is_err());
        }));
    }
    for t in tasks {
        t.await.expect("client task");
    }
}

/// The exact counts `workload` must leave.
fn check_counts(s: &Snapshot) {
    let n = CLIENTS as u64;
    let per_client = 1 + GETATTRS + MISSING + 1 + 1 + 1 + 5;
    assert_eq!(s.rpc.records, n * per_client as u64, "{s:#?}");
    assert_eq!(s.rpc.success, n * (per_client as u64 - 5));
    assert_eq!(s.rpc.prog_unavail, n);
    assert_eq!(s.rpc.prog_mismatch, n);
    assert_eq!(s.rpc.proc_unavail, n);
    assert_eq!(s.rpc.garbage_args, n);
    assert_eq!(s.rpc.auth_errors.get("AUTH_TOOWEAK"), Some(&n));
    assert_eq!(s.rpc.auth_errors.len(), 1);
    assert_eq!(
        (s.rpc.dropped, s.rpc.system_err, s.rpc.bad_reply),
        (0, 0, 0)
    );
    let calls = |prog: &str, name: &str| s.proc(prog, name).map(|p| p.calls);
    // Calls that name a served procedure count, whatever their outcome.
    assert_eq!(calls("nfs", "GETATTR"), Some(n * (GETATTRS as u64 + 2)));
    assert_eq!(calls("nfs", "LOOKUP"), Some(n * (MISSING as u64 + 1)));
    assert_eq!(calls("nfs", "READ"), Some(n));
    assert_eq!(calls("nfs", "WRITE"), Some(n));
    assert_eq!(calls("nfs", "NULL"), Some(0));
    assert_eq!(
        s.program_calls("nfs"),
        n * (GETATTRS as u64 + 2 + MISSING as u64 + 3)
    );
    let mnt = s
        .procs
        .iter()
        .find(|p| p.program == "mount" && p.version == 3 && p.name == "MNT")
        .unwrap();
    assert_eq!(mnt.calls, n);
    assert_eq!(s.program_calls("mount"), n);
    assert_eq!(s.nfs_status("NFS3_OK"), n * (GETATTRS as u64 + 3));
    assert_eq!(s.nfs_status("NFS3ERR_NOENT"), n * MISSING as u64);
    assert_eq!(s.nfs_replies.len(), 2);
    assert_eq!(s.io.read_bytes, n * IO as u64);
    assert_eq!(s.io.write_bytes, n * IO as u64);
    let ga = s.proc("nfs", "GETATTR").unwrap();
    assert_eq!(ga.latency.count, n * (GETATTRS as u64 + 2));
    assert!(ga.latency.max_us >= ga.p99_us && ga.p99_us >= ga.p50_us);
    let t = s.transports.iter().find(|t| t.name == "nfs").unwrap();
    assert_eq!(t.connections.opened, n);
    assert_eq!(t.connections.refused, 0);
    assert!(t.pool.threads >= 1);
    // Every call ran once: on a worker, or on the loop thread (run to
    // completion); those offered to the loop and sent on ran on a worker.
    assert_eq!(
        t.pool.jobs_woken + t.pool.jobs_inline + t.connections.records_inline,
        n * per_client as u64
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exact_counts_from_concurrent_clients() {
    let (_d, srv) = start("stats", &[]);
    let m = std::fs::metadata(sock(&srv)).expect("admin socket exists");
    assert_eq!(m.permissions().mode() & 0o777, 0o600);
    let s0 = snapshot(&srv);
    assert_eq!(s0.mode, rnfsd_stats::Mode::Percore);
    assert_eq!(s0.rpc.records, 0);
    bounded(workload(&srv)).await;
    let s = snapshot(&srv);
    check_counts(&s);

    // The command line reads the same socket.
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_rnfsd"))
            .arg("stats")
            .arg("--state-dir")
            .arg(srv.state.path())
            .args(args)
            .output()
            .expect("run rnfsd stats");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).expect("UTF-8")
    };
    let report = run(&[]);
    let row = report
        .lines()
        .find(|l| l.starts_with("getattr "))
        .unwrap_or_else(|| panic!("{report}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[1], (CLIENTS * (GETATTRS + 2)).to_string());
    assert!(report.contains("Server mount v3: 4 calls"), "{report}");
    let raw = run(&["--raw"]);
    let proc3 = raw
        .lines()
        .find(|l| l.starts_with("proc3 22 "))
        .expect("proc3");
    let f: Vec<u64> = proc3
        .split(' ')
        .skip(2)
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!(f.len(), 22);
    assert_eq!(f[1], s.proc("nfs", "GETATTR").unwrap().calls);
    assert_eq!(f[3], s.proc("nfs", "LOOKUP").unwrap().calls);
    let rpc_line = format!(
        "rpc {} {} {} {} 0",
        s.rpc.records,
        5 * CLIENTS,
        4 * CLIENTS,
        CLIENTS
    );
    assert!(raw.lines().any(|l| l == rpc_line), "{raw} vs {rpc_line}");
    assert!(raw.contains(&format!("io {} {}", CLIENTS * IO, CLIENTS * IO)));
    let watch = run(&["--watch", "--count", "2"]);
    assert_eq!(watch.matches("rnfsd: up ").count(), 2, "{watch}");
    let json = Snapshot::from_json(&run(&["--json"])).expect("--json");
    assert_eq!(json.rpc.records, s.rpc.records);

    // Reset through the socket (the command line's --reset).
    run(&["--reset"]);
    let s = snapshot(&srv);
    assert_eq!(s.rpc.records, 0);
    assert_eq!(s.program_calls("nfs"), 0);
    assert_eq!(s.transports[0].connections.opened, 0);
    assert!(s.since_reset_secs < s.uptime_secs);
}

/// The `shared` mode counts the same; `off` counts no call.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shared_counts_the_same_and_off_counts_nothing() {
    let (_d, srv) = start("stats-shared", &["--stats", "shared"]);
    bounded(workload(&srv)).await;
    let s = snapshot(&srv);
    assert_eq!((s.mode, s.shards), (rnfsd_stats::Mode::Shared, 1));
    check_counts(&s);
    drop(srv);

    let (_d, srv) = start("stats-off", &["--stats", "off"]);
    bounded(workload(&srv)).await;
    let s = snapshot(&srv);
    assert_eq!(s.mode, rnfsd_stats::Mode::Off);
    assert_eq!(s.rpc.records, 0);
    assert_eq!(s.program_calls("nfs"), 0);
    // Transport and pool counters are still there.
    assert_eq!(s.transports[0].connections.opened, CLIENTS as u64);
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn prometheus_endpoint_parses() {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let (_d, srv) = start("stats-prom", &["--metrics", &addr]);
    bounded(workload(&srv)).await;
    let mut c = std::net::TcpStream::connect(&addr).expect("metrics endpoint");
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut r = String::new();
    c.read_to_string(&mut r).unwrap();
    assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
    let body = &r[r.find("\r\n\r\n").unwrap() + 4..];
    let scrape = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_owned())))
        .expect("exposition parses");
    let value = |name: &str, labels: &[(&str, &str)]| {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .map(|s| match &s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => *v,
                other => panic!("{name}: {other:?}"),
            })
    };
    let n = CLIENTS as f64;
    assert_eq!(
        value(
            "rnfsd_rpc_calls_total",
            &[
                ("program", "nfs"),
                ("version", "3"),
                ("procedure", "GETATTR")
            ]
        ),
        Some(n * (GETATTRS as f64 + 2.0))
    );
    assert_eq!(
        value("rnfsd_nfs_replies_total", &[("status", "NFS3ERR_NOENT")]),
        Some(n * MISSING as f64)
    );
    assert_eq!(
        value("rnfsd_rpc_errors_total", &[("error", "garbage_args")]),
        Some(n)
    );
    assert_eq!(value("rnfsd_read_bytes_total", &[]), Some(n * IO as f64));
    assert_eq!(
        value("rnfsd_connections_opened_total", &[("listener", "nfs")]),
        Some(n)
    );
    assert!(value("rnfsd_pool_threads", &[("pool", "nfs")]).unwrap() >= 1.0);
    let h = scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == "rnfsd_request_duration_seconds"
                && s.labels.get("program") == Some("nfs")
                && s.labels.get("procedure") == Some("LOOKUP")
        })
        .expect("LOOKUP histogram");
    let prometheus_parse::Value::Histogram(b) = &h.value else {
        panic!("{:?}", h.value)
    };
    let inf = b.iter().find(|x| x.less_than.is_infinite()).unwrap();
    assert_eq!(inf.count, n * (MISSING as f64 + 1.0));
}
