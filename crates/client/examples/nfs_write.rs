//! Writes a file through NFSv3 or NFSv4.1 as another client would, for
//! the kernel-client `deleg` workload's host side (tests/kernel-client/
//! ns.sh): `nfs_write 3|4 ADDR EXPORT RELPATH TEXT` overwrites RELPATH
//! (under the export at EXPORT) from offset 0 with TEXT, FILE_SYNC,
//! retrying while the server answers NFS3ERR_JUKEBOX / NFS4ERR_DELAY (a
//! delegation being recalled), 50 s at most. NFSv3 finds the export's
//! root by MOUNT on the same address.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rnfsd_client::nfs3::{NfsFh3, StableHow};
use rnfsd_client::nfs4::OpenArgs;
use rnfsd_client::{Auth, ClientConfig, MountClient, Nfs4Client, Nfs4Config, NfsClient};
use rnfsd_proto::nfs4::{StableHow4, OPEN4_SHARE_ACCESS_WRITE};

const GIVE_UP: Duration = Duration::from_secs(50);

async fn retry<T, F, Fut>(what: &str, mut f: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, rnfsd_client::ClientError>>,
{
    let t0 = Instant::now();
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if t0.elapsed() < GIVE_UP => {
                eprintln!("{what}: {e}; again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(format!("{what}: {e}")),
        }
    }
}

async fn run(args: &[String]) -> Result<(), String> {
    let [vers, addr, export, rel, text] = args else {
        return Err("usage: nfs_write 3|4 ADDR EXPORT RELPATH TEXT".into());
    };
    let addr: SocketAddr = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
    let cfg = ClientConfig {
        auth: Auth::sys(0, 0, &[], "nfs-write"),
        ..ClientConfig::default()
    };
    let data = text.as_bytes();
    match vers.as_str() {
        "3" => {
            let m = MountClient::connect(addr, &cfg)
                .await
                .map_err(|e| e.to_string())?;
            let root = m.mnt(export).await.map_err(|e| format!("MNT: {e}"))?;
            let c = NfsClient::connect(addr, &cfg)
                .await
                .map_err(|e| e.to_string())?;
            let root = NfsFh3 { data: root.fhandle };
            let (fh, _) = c
                .lookup_path(&root, rel)
                .await
                .map_err(|e| format!("LOOKUP: {e}"))?;
            retry("WRITE", || c.write_all(&fh, data, StableHow::FileSync)).await?;
        }
        "4" => {
            let c = Nfs4Client::connect(addr, &cfg, &Nfs4Config::default())
                .await
                .map_err(|e| e.to_string())?;
            let (dir, name) = match rel.rsplit_once('/') {
                Some((d, n)) => (format!("{export}/{d}"), n.to_string()),
                None => (export.clone(), rel.clone()),
            };
            let dir = c
                .lookup_path(&dir)
                .await
                .map_err(|e| format!("LOOKUP: {e}"))?;
            let a = OpenArgs {
                access: OPEN4_SHARE_ACCESS_WRITE,
                owner: Some(b"nfs-write".to_vec()),
                ..OpenArgs::read(name)
            };
            let o = retry("OPEN", || c.open(&dir, &a)).await?;
            retry("WRITE", || {
                c.write(&o.fh, &o.stateid, 0, data, StableHow4::FileSync)
            })
            .await?;
            c.close(&o.fh, &o.stateid)
                .await
                .map_err(|e| format!("CLOSE: {e}"))?;
        }
        v => return Err(format!("version {v}: 3 or 4")),
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nfs_write: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
