//! Test support: connect our client library to a [`TestServer`], MOUNT its
//! export and build NFSv3 arguments tersely.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use rnfsd_client::nfs3::*;
use rnfsd_client::{Auth, Client, ClientConfig, ClientError, MountClient, NfsClient};

use super::TestServer;

/// Bound on any single test body: a hung server must fail the test, not
/// stall the suite.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Per-call timeout used by the helpers' clients.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// Run `f` with [`TEST_TIMEOUT`]; panics if it takes longer.
pub async fn bounded<F: Future>(f: F) -> F::Output {
    match tokio::time::timeout(TEST_TIMEOUT, f).await {
        Ok(v) => v,
        Err(_) => panic!("test body exceeded {TEST_TIMEOUT:?}"),
    }
}

/// Client settings: AUTH_SYS root, short timeout, `conns` connections.
pub fn config(conns: usize) -> ClientConfig {
    ClientConfig {
        auth: Auth::unix(0, 0),
        timeout: Some(CALL_TIMEOUT),
        connect_timeout: Duration::from_secs(10),
        connections: conns,
        ..ClientConfig::default()
    }
}

/// A client connected to `srv` as root (AUTH_SYS 0/0), one connection.
pub async fn connect(srv: &TestServer) -> Client {
    connect_n(srv, 1).await
}

pub async fn connect_n(srv: &TestServer, conns: usize) -> Client {
    Client::connect(srv.addr, &config(conns))
        .await
        .unwrap_or_else(|e| panic!("connect to {}: {e}", srv.addr))
}

/// The export path as MOUNT expects it.
pub fn export_path(srv: &TestServer) -> String {
    srv.export
        .to_str()
        .expect("export path is UTF-8")
        .to_owned()
}

/// An NFS session on one server: the client, the typed NFS and MOUNT views
/// and the export's root handle.
pub struct Session {
    pub client: Client,
    pub mount: MountClient,
    pub nfs: NfsClient,
    pub root: NfsFh3,
}

/// Connect as root and MNT the export.
pub async fn mount(srv: &TestServer) -> Session {
    let client = connect(srv).await;
    let mount = MountClient::new(client.clone());
    let ok = mount
        .mnt(export_path(srv))
        .await
        .unwrap_or_else(|e| panic!("MNT {}: {e}", srv.export.display()));
    Session {
        nfs: NfsClient::new(client.clone()),
        mount,
        client,
        root: NfsFh3::new(ok.fhandle),
    }
}

// ---- argument builders ----

pub fn dirop(dir: &NfsFh3, name: &str) -> Diropargs3 {
    Diropargs3 {
        dir: dir.clone(),
        name: name.as_bytes().to_vec(),
    }
}

pub fn sattr_mode(mode: u32) -> Sattr3 {
    Sattr3 {
        mode: Some(mode),
        ..Sattr3::default()
    }
}

/// Expect an NFS3_OK result; on failure panic naming `what` and the status.
#[track_caller]
pub fn ok<T, F: std::fmt::Debug>(what: &str, r: Result<NfsRes<T, F>, ClientError>) -> T {
    match r {
        Ok(NfsRes::Ok(v)) => v,
        Ok(NfsRes::Fail(s, body)) => panic!("{what}: expected NFS3_OK, got {s} ({body:?})"),
        Err(e) => panic!("{what}: RPC failed: {e}"),
    }
}

/// Expect a failure with status `want`; returns the resfail body.
#[track_caller]
pub fn fail<T: std::fmt::Debug, F>(
    what: &str,
    r: Result<NfsRes<T, F>, ClientError>,
    want: Nfsstat3,
) -> F {
    fail_any(what, r, &[want]).1
}

/// Expect a failure with one of `want`; returns the status and body.
#[track_caller]
pub fn fail_any<T: std::fmt::Debug, F>(
    what: &str,
    r: Result<NfsRes<T, F>, ClientError>,
    want: &[Nfsstat3],
) -> (Nfsstat3, F) {
    match r {
        Ok(NfsRes::Fail(s, body)) if want.contains(&s) => (s, body),
        Ok(NfsRes::Fail(s, _)) => panic!("{what}: expected one of {want:?}, got {s}"),
        Ok(NfsRes::Ok(v)) => panic!("{what}: expected one of {want:?}, got NFS3_OK ({v:?})"),
        Err(e) => panic!("{what}: expected one of {want:?}, RPC failed: {e}"),
    }
}

/// CREATE UNCHECKED `name` in `dir` with mode 0644; returns handle and attrs.
pub async fn create_file(nfs: &NfsClient, dir: &NfsFh3, name: &str) -> (NfsFh3, Fattr3) {
    let r = ok(
        &format!("CREATE {name}"),
        nfs.create(&Create3Args {
            where_: dirop(dir, name),
            how: CreateHow3::Unchecked(sattr_mode(0o644)),
        })
        .await,
    );
    let fh = r.obj.unwrap_or_else(|| panic!("CREATE {name}: no handle"));
    let attrs = match r.obj_attributes {
        Some(a) => a,
        None => getattr(nfs, &fh).await,
    };
    (fh, attrs)
}

/// MKDIR `name` in `dir` with mode 0755.
pub async fn mkdir(nfs: &NfsClient, dir: &NfsFh3, name: &str) -> NfsFh3 {
    let r = ok(
        &format!("MKDIR {name}"),
        nfs.mkdir(&Mkdir3Args {
            where_: dirop(dir, name),
            attributes: sattr_mode(0o755),
        })
        .await,
    );
    r.obj.unwrap_or_else(|| panic!("MKDIR {name}: no handle"))
}

/// GETATTR that must succeed.
pub async fn getattr(nfs: &NfsClient, fh: &NfsFh3) -> Fattr3 {
    ok(
        "GETATTR",
        nfs.getattr(&GetAttr3Args { object: fh.clone() }).await,
    )
    .obj_attributes
}

/// GETATTR status only.
pub async fn getattr_status(nfs: &NfsClient, fh: &NfsFh3) -> Result<Nfsstat3, ClientError> {
    Ok(nfs
        .getattr(&GetAttr3Args { object: fh.clone() })
        .await?
        .status())
}

/// WRITE FILE_SYNC that must write everything.
pub async fn write(nfs: &NfsClient, fh: &NfsFh3, offset: u64, data: &[u8]) {
    let s = nfs
        .write_at(fh, offset, data, StableHow::FileSync)
        .await
        .unwrap_or_else(|e| panic!("WRITE at {offset}: {e}"));
    assert_eq!(s.written, data.len() as u64);
}

/// COMMIT of the whole file that must succeed.
pub async fn commit(nfs: &NfsClient, fh: &NfsFh3) -> Commit3ResOk {
    ok(
        "COMMIT",
        nfs.commit(&Commit3Args {
            file: fh.clone(),
            offset: 0,
            count: 0,
        })
        .await,
    )
}

/// LOOKUP that must succeed; returns the handle.
pub async fn lookup(nfs: &NfsClient, dir: &NfsFh3, name: &str) -> NfsFh3 {
    nfs.lookup_name(dir, name)
        .await
        .unwrap_or_else(|e| panic!("LOOKUP {name}: {e}"))
        .object
}

/// The last `lines` lines of the server's log (stderr), for failure
/// messages.
pub fn log_tail(srv: &TestServer, lines: usize) -> String {
    let log = std::fs::read_to_string(srv.state.path().join("server.log")).unwrap_or_default();
    let v: Vec<&str> = log.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

// ---- one-call wrappers: build the arguments, return the raw result ----

/// LOOKUP `name` in `dir`.
pub async fn lookup_res(
    nfs: &NfsClient,
    dir: &NfsFh3,
    name: &str,
) -> Result<Lookup3Res, ClientError> {
    nfs.lookup(&Lookup3Args {
        what: dirop(dir, name),
    })
    .await
}

/// READ `count` bytes at `offset`.
pub async fn read_res(
    nfs: &NfsClient,
    fh: &NfsFh3,
    offset: u64,
    count: u32,
) -> Result<Read3Res, ClientError> {
    nfs.read(&Read3Args {
        file: fh.clone(),
        offset,
        count,
    })
    .await
}

/// READ that must succeed: the data.
pub async fn read_data(nfs: &NfsClient, fh: &NfsFh3, offset: u64, count: u32) -> Vec<u8> {
    ok("READ", read_res(nfs, fh, offset, count).await).data
}

/// A client connected from local address `local` (another 127.x address,
/// so the server sees another host), one connection.
pub async fn client_from(srv: &TestServer, local: &str) -> Client {
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.bind(format!("{local}:0").parse().expect("local address"))
        .expect("bind");
    let st = sock.connect(srv.addr).await.expect("connect");
    let conn = rnfsd_client::RpcConnection::from_stream(st, &config(1)).expect("conn");
    Client::from_connection(conn)
}

/// MNT `path` on `c`: the root handle, or why not.
pub async fn mnt_from(c: &Client, path: &str) -> Result<NfsFh3, ClientError> {
    Ok(NfsFh3::new(
        MountClient::new(c.clone()).mnt(path).await?.fhandle,
    ))
}

/// SETATTR `attrs`, guarded by ctime `guard` when given.
pub async fn setattr_res(
    nfs: &NfsClient,
    fh: &NfsFh3,
    attrs: Sattr3,
    guard: SattrGuard3,
) -> Result<SetAttr3Res, ClientError> {
    nfs.setattr(&SetAttr3Args {
        object: fh.clone(),
        new_attributes: attrs,
        guard,
    })
    .await
}

/// REMOVE `name` from `dir`.
pub async fn remove_res(
    nfs: &NfsClient,
    dir: &NfsFh3,
    name: &str,
) -> Result<Remove3Res, ClientError> {
    nfs.remove(&Remove3Args {
        object: dirop(dir, name),
    })
    .await
}

/// RMDIR `name` from `dir`.
pub async fn rmdir_res(
    nfs: &NfsClient,
    dir: &NfsFh3,
    name: &str,
) -> Result<Rmdir3Res, ClientError> {
    nfs.rmdir(&Rmdir3Args {
        object: dirop(dir, name),
    })
    .await
}

/// CREATE UNCHECKED `name` in `dir` with default attributes.
pub async fn create_res(
    nfs: &NfsClient,
    dir: &NfsFh3,
    name: &str,
) -> Result<Create3Res, ClientError> {
    nfs.create(&Create3Args {
        where_: dirop(dir, name),
        how: CreateHow3::Unchecked(Sattr3::default()),
    })
    .await
}

/// READDIR from cookie 0 with a `count`-byte reply budget.
pub async fn readdir_res(
    nfs: &NfsClient,
    dir: &NfsFh3,
    count: u32,
) -> Result<ReadDir3Res, ClientError> {
    nfs.readdir(&ReadDir3Args {
        dir: dir.clone(),
        cookie: 0,
        cookieverf: Verf3::default(),
        count,
    })
    .await
}

/// An NLM v4 lock of `len` bytes at `offset` on `fh` for owner `svid` of
/// `host` (its owner handle "host:svid").
pub fn nlm_lock(
    fh: &NfsFh3,
    host: &str,
    svid: i32,
    offset: u64,
    len: u64,
) -> rnfsd_proto::nlm::Nlm4Lock {
    use rnfsd_proto::nlm::{CallerName, NetObj};
    rnfsd_proto::nlm::Nlm4Lock {
        caller_name: CallerName(host.as_bytes().to_vec()),
        fh: NetObj(fh.data.clone()),
        oh: NetObj(format!("{host}:{svid}").into_bytes()),
        svid,
        l_offset: offset,
        l_len: len,
    }
}

/// NLM4 LOCK arguments for `l` (cookie "c", NSM state 1).
pub fn lock_args(
    l: &rnfsd_proto::nlm::Nlm4Lock,
    exclusive: bool,
    block: bool,
    reclaim: bool,
) -> rnfsd_proto::nlm::Nlm4LockArgs {
    rnfsd_proto::nlm::Nlm4LockArgs {
        cookie: rnfsd_proto::nlm::NetObj(b"c".to_vec()),
        block,
        exclusive,
        alock: l.clone(),
        reclaim,
        state: 1,
    }
}

/// NLM4 LOCK of `l` (not a reclaim): the status.
pub async fn lock(
    nlm: &rnfsd_client::NlmClient,
    l: &rnfsd_proto::nlm::Nlm4Lock,
    exclusive: bool,
    block: bool,
) -> rnfsd_proto::nlm::Nlm4Stats {
    nlm.lock(&lock_args(l, exclusive, block, false))
        .await
        .expect("LOCK")
        .stat
}

/// NLM4 UNLOCK of `l`: the status.
pub async fn unlock(
    nlm: &rnfsd_client::NlmClient,
    l: &rnfsd_proto::nlm::Nlm4Lock,
) -> rnfsd_proto::nlm::Nlm4Stats {
    nlm.unlock(&rnfsd_proto::nlm::Nlm4UnlockArgs {
        cookie: rnfsd_proto::nlm::NetObj(b"u".to_vec()),
        alock: l.clone(),
    })
    .await
    .expect("UNLOCK")
    .stat
}

/// Clients creating files (`load-I-N`) in the export root until stopped,
/// each on its own connection: on a `sync` export they keep the journal
/// commit thread busy, so a call meanwhile finds a commit running.
pub struct CreateLoad {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Starts `clients` creating clients (see [`CreateLoad`]).
pub async fn create_load(srv: &TestServer, clients: usize) -> CreateLoad {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = Vec::new();
    for i in 0..clients {
        let (c, stop) = (mount(srv).await, stop.clone());
        tasks.push(tokio::spawn(async move {
            // Bounded: the test's own time limit ends it otherwise.
            for n in 0..100_000 {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                create_file(&c.nfs, &c.root, &format!("load-{i}-{n}")).await;
            }
        }));
    }
    CreateLoad { stop, tasks }
}

impl CreateLoad {
    /// Stops the clients and waits for them (a failed create fails here).
    pub async fn stop(self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.tasks {
            t.await.expect("create load");
        }
    }
}
