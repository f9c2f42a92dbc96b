//! Load loops on our client library. Every loop is bounded by a deadline and
//! stops by itself.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rnfsd_client::nfs3::NfsRes;
use rnfsd_client::nfs3::{
    Access3Args, Diropargs3, GetAttr3Args, Lookup3Args, NfsFh3, ReadDirPlus3Args, Verf3,
    ACCESS3_LOOKUP, ACCESS3_READ,
};
use rnfsd_client::{check, ClientError, NfsClient};

/// What one run measured on the client side.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub calls: u64,
    pub errors: u64,
    pub elapsed: Duration,
    pub lat: Histogram<u64>,
}

impl RunResult {
    pub fn calls_per_s(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64()
    }
}

/// One item of a prepared tree: a directory, a name in it, and the object.
#[derive(Debug, Clone)]
pub struct TreeItem {
    pub dir: NfsFh3,
    pub name: Vec<u8>,
    pub fh: NfsFh3,
}

/// Walk the tree under `root` (READDIRPLUS) and list every object, up to
/// `limit` items.
pub async fn walk(
    nfs: &NfsClient,
    root: &NfsFh3,
    limit: usize,
) -> Result<Vec<TreeItem>, ClientError> {
    let mut out = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(d) = dirs.pop() {
        for e in nfs.readdirplus_all(&d).await? {
            if e.name == b"." || e.name == b".." {
                continue;
            }
            let Some(fh) = e.name_handle.clone() else {
                continue;
            };
            if e.name_attributes.as_ref().map(|a| a.ftype) == Some(rnfsd_client::nfs3::Ftype3::Dir)
            {
                dirs.push(fh.clone());
            }
            out.push(TreeItem {
                dir: d.clone(),
                name: e.name.clone(),
                fh,
            });
            if out.len() >= limit {
                return Ok(out);
            }
        }
    }
    Ok(out)
}

/// Which call mix a stream sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
pub enum Mix {
    /// GETATTR of one handle: the call-rate ceiling.
    Getattr,
    /// rsync-like metadata walk: per object ACCESS (x2), GETATTR, LOOKUP, and
    /// a READDIRPLUS of its directory every 16 objects (seed 000's load).
    Traverse,
}

/// Run `streams` concurrent call loops for `dur` and gather latency.
pub async fn run(
    nfs: &NfsClient,
    mix: Mix,
    root: &NfsFh3,
    items: Arc<Vec<TreeItem>>,
    streams: usize,
    dur: Duration,
) -> RunResult {
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for s in 0..streams {
        let nfs = nfs.clone();
        let stop = stop.clone();
        let errors = errors.clone();
        let root = root.clone();
        let items = items.clone();
        tasks.push(tokio::spawn(async move {
            let mut h = crate::ops::histogram();
            let mut calls = 0u64;
            let mut i = s.wrapping_mul(7919);
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                let ok = match mix {
                    Mix::Getattr => succeeded(
                        nfs.getattr(&GetAttr3Args {
                            object: root.clone(),
                        })
                        .await,
                    ),
                    Mix::Traverse => {
                        let it = &items[i % items.len()];
                        i += 1;
                        traverse_step(&nfs, it, i, &mut h, &mut calls).await
                    }
                };
                if mix == Mix::Getattr {
                    let _ = h.record(t.elapsed().as_micros().max(1) as u64);
                    calls += 1;
                }
                if !ok {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            (calls, h)
        }));
    }
    tokio::time::sleep(dur).await;
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    let mut lat = crate::ops::histogram();
    for t in tasks {
        if let Ok((c, h)) = t.await {
            total += c;
            let _ = lat.add(&h);
        }
    }
    RunResult {
        calls: total,
        errors: errors.load(Ordering::Relaxed),
        elapsed: start.elapsed(),
        lat,
    }
}

/// A call counts as failed on an RPC error and on an NFS error status alike
/// (`check`): a reply of NFS3ERR_* is not a success.
fn succeeded<T, F>(r: Result<NfsRes<T, F>, ClientError>) -> bool {
    matches!(r.map(check), Ok(Ok(_)))
}

async fn timed<F: std::future::Future<Output = bool>>(
    f: F,
    h: &mut Histogram<u64>,
    calls: &mut u64,
) -> bool {
    let t = Instant::now();
    let ok = f.await;
    let _ = h.record(t.elapsed().as_micros().max(1) as u64);
    *calls += 1;
    ok
}

async fn traverse_step(
    nfs: &NfsClient,
    it: &TreeItem,
    i: usize,
    h: &mut Histogram<u64>,
    calls: &mut u64,
) -> bool {
    let mut ok = true;
    let acc = |fh: &NfsFh3| Access3Args {
        object: fh.clone(),
        access: ACCESS3_READ | ACCESS3_LOOKUP,
    };
    ok &= timed(
        async { succeeded(nfs.access(&acc(&it.dir)).await) },
        h,
        calls,
    )
    .await;
    ok &= timed(
        async { succeeded(nfs.access(&acc(&it.fh)).await) },
        h,
        calls,
    )
    .await;
    ok &= timed(
        async {
            succeeded(
                nfs.getattr(&GetAttr3Args {
                    object: it.fh.clone(),
                })
                .await,
            )
        },
        h,
        calls,
    )
    .await;
    ok &= timed(
        async {
            succeeded(
                nfs.lookup(&Lookup3Args {
                    what: Diropargs3 {
                        dir: it.dir.clone(),
                        name: it.name.clone(),
                    },
                })
                .await,
            )
        },
        h,
        calls,
    )
    .await;
    if i.is_multiple_of(16) {
        ok &= timed(
            async {
                succeeded(
                    nfs.readdirplus(&ReadDirPlus3Args {
                        dir: it.dir.clone(),
                        cookie: 0,
                        cookieverf: Verf3([0; 8]),
                        dircount: 4096,
                        maxcount: 32768,
                    })
                    .await,
                )
            },
            h,
            calls,
        )
        .await;
    }
    ok
}
