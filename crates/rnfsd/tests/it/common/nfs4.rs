//! What NFSv4 tests share: a server with a writable and a read-only
//! export, paths as the server names them, the status of a failed call, a
//! session client and raw channel attributes.

use rnfsd_client::nfs4::{CbEvent, OpenArgs, OpenHow};
use rnfsd_client::{Auth, ClientConfig, ClientError, Nfs4Client, Nfs4Config};
use rnfsd_proto::nfs4::{
    ChannelAttrs4, NfsFh4, Nfsstat4, Stateid4, OPEN4_SHARE_ACCESS_BOTH,
    OPEN4_SHARE_ACCESS_WANT_NO_DELEG, OPEN4_SHARE_DENY_NONE,
};

use super::{write_config, TempDir, TestServer};

/// A directory's path as the server names it (canonical): the export's
/// path in the pseudo-filesystem.
pub fn path_of(d: &TempDir) -> String {
    d.path()
        .canonicalize()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned()
}

/// The handle of the export rooted at `d` (looked up through the
/// pseudo-filesystem by its path).
pub async fn root_of(c: &Nfs4Client, d: &TempDir) -> NfsFh4 {
    c.lookup_path(d.path().to_str().unwrap())
        .await
        .expect("export root")
}

/// The NFSv4 status a call failed with (a panic if it did not).
pub fn status(r: Result<impl std::fmt::Debug, ClientError>) -> Nfsstat4 {
    match r {
        Err(ClientError::Nfs4 { status, .. }) => status,
        other => panic!("expected an NFSv4 error, got {other:?}"),
    }
}

/// OPEN of the existing file `name` in the export root, for reading and
/// writing, wanting no delegation (a write delegation would make another
/// client's OPEN of the file wait for a recall these clients do not
/// answer): its handle and open stateid.
pub async fn open_rw(c: &Nfs4Client, srv: &TestServer, name: &str) -> (NfsFh4, Stateid4) {
    let root = c
        .lookup_path(srv.export.to_str().unwrap())
        .await
        .expect("export root");
    let o = c
        .open(
            &root,
            &OpenArgs {
                name: name.as_bytes().to_vec(),
                access: OPEN4_SHARE_ACCESS_BOTH | OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
                deny: OPEN4_SHARE_DENY_NONE,
                how: OpenHow::NoCreate,
                owner: None,
            },
        )
        .await
        .expect("OPEN");
    (o.fh, o.stateid)
}

/// Two exports: `rw` served as the command line's directory, `ro`
/// read-only from a config file (holding a file `f`); with the config's
/// directory and the server.
pub fn rw_and_ro_exports(tag: &str) -> (TempDir, TempDir, TempDir, TestServer) {
    let rw = TempDir::new(tag);
    let ro = TempDir::new(&format!("{tag}-ro"));
    std::fs::write(ro.path().join("f"), b"ro").unwrap();
    let cfgdir = TempDir::new(&format!("{tag}-cfg"));
    let cfg = write_config(
        cfgdir.path(),
        &format!(
            "[[export]]\npath = \"{}\"\nsecure = false\nroot_squash = false\nread_only = true\n",
            path_of(&ro)
        ),
    );
    let srv = TestServer::start_with(
        rw.path(),
        &["--no-rpcbind", "--no-root-squash", "--config", &cfg],
    );
    (rw, ro, cfgdir, srv)
}

/// An NFSv4 client of `srv` calling as `uid` (AUTH_SYS machine `name`),
/// its session as `v4` asks.
pub async fn client_as(srv: &TestServer, uid: u32, name: &str, v4: &Nfs4Config) -> Nfs4Client {
    let cfg = ClientConfig {
        auth: Auth::sys(uid, uid, &[], name),
        ..ClientConfig::default()
    };
    Nfs4Client::connect(srv.addr, &cfg, v4)
        .await
        .expect("NFSv4 session")
}

/// A session client named `name` (uid 0) with a back channel, once the
/// server's CB_NULL probe reached it (and its answer the server's state).
pub async fn back_channel_client(srv: &TestServer, name: &str) -> Nfs4Client {
    let v4 = Nfs4Config {
        back_channel: true,
        ..Nfs4Config::default()
    };
    let c = client_as(srv, 0, name, &v4).await;
    let t = std::time::Instant::now();
    while !c.callbacks().contains(&CbEvent::Null) {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(10),
            "no CB_NULL probe"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The probe's answer reaches the server's state a moment later.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    c
}

/// Channel attributes for a raw CREATE_SESSION.
pub fn chan() -> ChannelAttrs4 {
    ChannelAttrs4 {
        headerpadsize: 0,
        maxrequestsize: 1 << 20,
        maxresponsesize: 1 << 20,
        maxresponsesize_cached: 8192,
        maxoperations: 16,
        maxrequests: 4,
        rdma_ird: None,
    }
}
