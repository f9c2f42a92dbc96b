//! `copy`: one NFSv4.2 COPY within the server (RFC 7862 §15.2) of a whole
//! file, timed from the first COPY to its end (the synchronous reply, or
//! the CB_OFFLOAD of an asynchronous copy), then to the end of the COMMIT
//! that makes it durable. Synchronous short copies are continued as a
//! client does. Prints one JSON object: bytes, calls, whether the server
//! copied asynchronously, the two times.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rnfsd_client::nfs4::{OpenArgs, OpenHow};
use rnfsd_client::{Auth, ClientConfig, Nfs4Client, Nfs4Config};
use rnfsd_proto::nfs4::cb::OffloadInfo4;
use rnfsd_proto::nfs4::*;

/// How long an asynchronous copy may take before the bench gives up.
const OFFLOAD_WAIT: Duration = Duration::from_secs(600);

#[derive(clap::Args, Clone, Debug)]
pub struct CopyArgs {
    /// Server address.
    #[arg(long, default_value = "127.0.0.1:2049")]
    pub addr: SocketAddr,
    /// The export's path from the server's root.
    #[arg(long)]
    pub export: String,
    /// The source file's name in the export (it must exist).
    #[arg(long)]
    pub src: String,
    /// The destination's name in the export (it must exist; empty).
    #[arg(long)]
    pub dst: String,
    /// Ask for a synchronous copy (ca_synchronous): short copies the
    /// bench continues, never an asynchronous one.
    #[arg(long)]
    pub synchronous: bool,
}

type Res<T> = Result<T, String>;

fn why(what: &str) -> impl Fn(rnfsd_client::ClientError) -> String + '_ {
    move |e| format!("{what}: {e}")
}

pub async fn copy_cmd(a: CopyArgs) -> Res<()> {
    let cfg = ClientConfig {
        auth: Auth::sys(0, 0, &[], "rnfsd-bench"),
        ..ClientConfig::default()
    };
    let v4 = Nfs4Config {
        back_channel: true,
        ..Nfs4Config::default()
    };
    let c = Nfs4Client::connect(a.addr, &cfg, &v4)
        .await
        .map_err(why("session"))?
        .with_minor(2);
    let root = c.lookup_path(&a.export).await.map_err(why("export"))?;
    let open = |name: &str| OpenArgs {
        name: name.as_bytes().to_vec(),
        access: OPEN4_SHARE_ACCESS_BOTH,
        deny: OPEN4_SHARE_DENY_NONE,
        how: OpenHow::NoCreate,
        owner: None,
    };
    let s = c.open(&root, &open(&a.src)).await.map_err(why("OPEN"))?;
    let d = c.open(&root, &open(&a.dst)).await.map_err(why("OPEN"))?;
    let t0 = Instant::now();
    let mut done = 0u64;
    let mut calls = 0u64;
    let mut asynchronous = false;
    loop {
        // Count 0: to the source's end of file.
        let r = c
            .copy(
                &s.fh,
                &s.stateid,
                done,
                &d.fh,
                &d.stateid,
                done,
                0,
                a.synchronous,
            )
            .await
            .map_err(why("COPY"))?;
        calls += 1;
        if let Some(sid) = r.response.callback_id {
            asynchronous = true;
            done += wait_offload(&c, &sid).await?;
            break;
        }
        if r.response.count == 0 {
            break;
        }
        done += r.response.count;
    }
    let copied = t0.elapsed();
    c.commit(&d.fh, 0, 0).await.map_err(why("COMMIT"))?;
    let committed = t0.elapsed();
    c.close(&d.fh, &d.stateid).await.map_err(why("CLOSE"))?;
    c.close(&s.fh, &s.stateid).await.map_err(why("CLOSE"))?;
    println!(
        "{{\"bytes\":{done},\"calls\":{calls},\"asynchronous\":{asynchronous},\"copy_s\":{:.4},\"copy_commit_s\":{:.4}}}",
        copied.as_secs_f64(),
        committed.as_secs_f64()
    );
    Ok(())
}

/// The CB_OFFLOAD of copy `sid`: the bytes it copied.
async fn wait_offload(c: &Nfs4Client, sid: &Stateid4) -> Res<u64> {
    let t = Instant::now();
    loop {
        if let Some(o) = c.offloads().into_iter().find(|o| o.stateid == *sid) {
            return match o.info {
                OffloadInfo4::Ok(w) => Ok(w.count),
                OffloadInfo4::Fail { status, .. } => Err(format!("copy failed: {status:?}")),
            };
        }
        if t.elapsed() > OFFLOAD_WAIT {
            return Err("no CB_OFFLOAD".into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}
