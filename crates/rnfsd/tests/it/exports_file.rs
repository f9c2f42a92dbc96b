//! An exports(5) file served end to end (`serve --exports FILE`): knfsd's
//! read-only default, per-client options, an unlisted client refused, an
//! escaped path, and the warnings in the log.

use crate::common;

use std::os::unix::fs::PermissionsExt;

use common::nfs::*;
use common::{TempDir, TestServer};
use rnfsd_client::nfs3::*;
use rnfsd_client::{ClientError, NfsClient};
use rnfsd_proto::mount::MountStat3;

#[tokio::test(flavor = "multi_thread")]
async fn exports_file_is_served() {
    // DIR is required by the harness; the exports file adds "my dir".
    let dir = TempDir::new("xf");
    let shared = dir.path().join("my dir");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(shared.join("f"), b"orig").unwrap();
    std::fs::set_permissions(shared.join("f"), std::fs::Permissions::from_mode(0o666)).unwrap();
    let cfgdir = TempDir::new("xf-cfg");
    let file = cfgdir.path().join("exports");
    // 127.0.0.1 gets knfsd's default (ro); 127.0.0.2 rw. Test clients call
    // from ordinary ports, hence insecure.
    std::fs::write(
        &file,
        format!(
            "# rnfsd test\n{}/my\\040dir -insecure,wdelay 127.0.0.1 \\\n  127.0.0.2(rw)\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let srv = TestServer::start_with(
        dir.path(),
        &["--no-rpcbind", "--exports", file.to_str().unwrap()],
    );
    bounded(async {
        let path = shared.to_str().unwrap();
        let ro = client_from(&srv, "127.0.0.1").await;
        let rw = client_from(&srv, "127.0.0.2").await;
        let unlisted = client_from(&srv, "127.0.0.3").await;
        assert!(matches!(
            mnt_from(&unlisted, path).await,
            Err(ClientError::Mount(MountStat3::Acces))
        ));
        let (nro, nrw) = (NfsClient::new(ro.clone()), NfsClient::new(rw.clone()));
        let h_ro = mnt_from(&ro, path).await.expect("MNT ro");
        let f_ro = lookup(&nro, &h_ro, "f").await;
        let args = Write3Args {
            file: f_ro.clone(),
            offset: 0,
            count: 1,
            stable: StableHow::FileSync,
            data: b"X".to_vec(),
        };
        fail_any(
            "WRITE from the ro client",
            nro.write(&args).await,
            &[Nfsstat3::RoFs, Nfsstat3::Acces],
        );
        assert_eq!(nro.read_all(&f_ro).await.unwrap(), b"orig");
        let h_rw = mnt_from(&rw, path).await.expect("MNT rw");
        let f_rw = lookup(&nrw, &h_rw, "f").await;
        write(&nrw, &f_rw, 0, b"W").await;
        assert_eq!(std::fs::read(shared.join("f")).unwrap(), b"Wrig");
    })
    .await;
    let log = std::fs::read_to_string(srv.state.path().join("server.log")).unwrap();
    let want = format!("{}:2: option \"wdelay\" ignored", file.display());
    assert!(log.contains(&want), "no {want:?} in the log:\n{log}");
}
