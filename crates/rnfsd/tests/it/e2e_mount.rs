//! End to end: MOUNT v3 (RFC 1813 appendix I) against the real server over
//! TCP through our client library.

use crate::common;

use common::nfs::{bounded, connect, export_path, getattr, mount};
use common::{TempDir, TestServer};
use rnfsd_client::mount::{MountRes3, MountStat3};
use rnfsd_client::nfs3::{Ftype3, NfsFh3};
use rnfsd_client::{ClientError, MountClient, NfsClient};

const AUTH_SYS: u32 = 1;

fn start() -> (TempDir, TestServer) {
    let dir = TempDir::new("e2e-mount");
    std::fs::create_dir_all(dir.path().join("sub/deeper")).expect("mkdir sub");
    std::fs::write(dir.path().join("file"), b"x").expect("write file");
    let srv = TestServer::start_with(dir.path(), &["--no-rpcbind"]);
    (dir, srv)
}

fn mounted(list: &[rnfsd_client::mount::MountBody], path: &str) -> bool {
    list.iter()
        .any(|m| m.directory.0 == path.as_bytes() && m.hostname.0 == b"127.0.0.1")
}

#[tokio::test(flavor = "multi_thread")]
async fn null_and_mnt_of_export_root() {
    let (_dir, srv) = start();
    bounded(async {
        let m = MountClient::new(connect(&srv).await);
        m.null().await.expect("MOUNT NULL");
        let ok = m.mnt(export_path(&srv)).await.expect("MNT export root");
        assert!(
            !ok.fhandle.is_empty() && ok.fhandle.len() <= 64,
            "handle length {}",
            ok.fhandle.len()
        );
        assert!(
            ok.auth_flavors.contains(&AUTH_SYS),
            "flavors {:?} lack AUTH_SYS",
            ok.auth_flavors
        );
        // The handle works for NFS and names a directory.
        let nfs = NfsClient::new(m.client().clone());
        let a = getattr(&nfs, &NfsFh3::new(ok.fhandle.clone())).await;
        assert_eq!(a.ftype, Ftype3::Dir);
        // Trailing slash and repeated slashes name the same directory.
        let again = m
            .mnt(format!("{}/", export_path(&srv)))
            .await
            .expect("MNT with trailing slash");
        assert_eq!(again.fhandle, ok.fhandle, "same export, same handle");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mnt_errors() {
    let (_dir, srv) = start();
    bounded(async {
        let m = MountClient::new(connect(&srv).await);
        let p = export_path(&srv);
        let r = m.mnt_res(format!("{p}/does-not-exist")).await.expect("MNT");
        assert_eq!(r, MountRes3::Err(MountStat3::NoEnt));
        let r = m.mnt_res("/definitely/not/exported").await.expect("MNT");
        assert!(
            matches!(r, MountRes3::Err(MountStat3::NoEnt | MountStat3::Acces)),
            "path outside any export: {r:?}"
        );
        // A regular file is not a mountable directory.
        let r = m.mnt_res(format!("{p}/file")).await.expect("MNT");
        assert_eq!(r, MountRes3::Err(MountStat3::NotDir));
        // ".." must not escape the export.
        let r = m.mnt_res(format!("{p}/sub/../..")).await.expect("MNT");
        assert!(matches!(r, MountRes3::Err(_)), "MNT with '..': {r:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mnt_of_subdirectory() {
    let (_dir, srv) = start();
    bounded(async {
        let s = mount(&srv).await;
        let p = export_path(&srv);
        let sub = s.mount.mnt(format!("{p}/sub")).await.expect("MNT sub");
        let deeper = s
            .mount
            .mnt(format!("{p}/sub/deeper"))
            .await
            .expect("MNT sub/deeper");
        // Same object as a LOOKUP from the root finds.
        let (looked, _) = s.nfs.lookup_path(&s.root, "sub").await.expect("LOOKUP sub");
        let a1 = getattr(&s.nfs, &NfsFh3::new(sub.fhandle.clone())).await;
        let a2 = getattr(&s.nfs, &looked).await;
        assert_eq!(a1.ftype, Ftype3::Dir);
        assert_eq!(a1.fileid, a2.fileid);
        let a3 = getattr(&s.nfs, &NfsFh3::new(deeper.fhandle)).await;
        assert_ne!(a3.fileid, a1.fileid);
        assert!(sub.auth_flavors.contains(&AUTH_SYS));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dump_umnt_umntall() {
    let (_dir, srv) = start();
    bounded(async {
        let m = MountClient::new(connect(&srv).await);
        let p = export_path(&srv);
        let sub = format!("{p}/sub");
        assert!(!mounted(&m.dump().await.expect("DUMP"), &p));
        m.mnt(&p).await.expect("MNT");
        m.mnt(&sub).await.expect("MNT sub");
        let l = m.dump().await.expect("DUMP");
        assert!(mounted(&l, &p), "DUMP after MNT lacks {p}: {l:?}");
        assert!(mounted(&l, &sub), "DUMP after MNT lacks {sub}: {l:?}");

        m.umnt(&p).await.expect("UMNT");
        let l = m.dump().await.expect("DUMP");
        assert!(!mounted(&l, &p), "DUMP after UMNT still has {p}: {l:?}");
        assert!(mounted(&l, &sub), "UMNT of {p} removed {sub} too: {l:?}");
        // UMNT of something never mounted is harmless (void result).
        m.umnt("/never/mounted").await.expect("UMNT unknown");

        m.mnt(&p).await.expect("MNT again");
        m.umntall().await.expect("UMNTALL");
        let l = m.dump().await.expect("DUMP");
        assert!(
            !l.iter().any(|e| e.hostname.0 == b"127.0.0.1"),
            "DUMP after UMNTALL still lists us: {l:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn export_lists_the_export() {
    let (_dir, srv) = start();
    bounded(async {
        let m = MountClient::new(connect(&srv).await);
        let x = m.export().await.expect("EXPORT");
        let p = export_path(&srv);
        assert!(
            x.iter().any(|e| e.dir.0 == p.as_bytes()),
            "EXPORT {:?} lacks {p}",
            x.iter()
                .map(|e| String::from_utf8_lossy(&e.dir.0).into_owned())
                .collect::<Vec<_>>()
        );
        assert_eq!(x.len(), 1, "one export configured");
        // showmount -e sends AUTH_NONE: EXPORT must accept it.
        let anon = m.with_auth(rnfsd_client::Auth::none());
        anon.export().await.expect("EXPORT with AUTH_NONE");
        anon.null().await.expect("NULL with AUTH_NONE");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mount_version_1_and_unknown_version() {
    let (_dir, srv) = start();
    bounded(async {
        let c = connect(&srv).await;
        // MOUNT v4 does not exist: PROG_MISMATCH naming what is served.
        match c.call::<_, ()>(100005, 4, 0, &()).await {
            Err(ClientError::ProgMismatch { low, high }) => {
                assert!(low <= 3 && high >= 3, "range {low}..={high} lacks 3")
            }
            other => panic!("MOUNT v4 NULL: {other:?}"),
        }
        // Procedure 6 does not exist in MOUNT v3.
        match c.call_raw(100005, 3, 6, &[]).await {
            Err(ClientError::ProcUnavail) => {}
            other => panic!("MOUNT v3 proc 6: {other:?}"),
        }
    })
    .await;
}
