//! Load loops on our client library. Every loop is bounded by a deadline and
//! a call count, and stops by itself.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rnfsd_client::nfs3::NfsRes;
use rnfsd_client::nfs3::{
    Access3Args, Diropargs3, Ftype3, GetAttr3Args, Lookup3Args, NfsFh3, Read3Args,
    ReadDirPlus3Args, StableHow, Verf3, Write3ArgsRef, ACCESS3_DELETE, ACCESS3_EXECUTE,
    ACCESS3_EXTEND, ACCESS3_LOOKUP, ACCESS3_MODIFY, ACCESS3_READ,
};
use rnfsd_client::{check, ClientError, NfsClient};

use crate::session;
use crate::stats::histogram;

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

/// One item of a prepared tree: a directory, a name in it, the object and
/// its type (when READDIRPLUS gave attributes).
#[derive(Debug, Clone)]
pub struct TreeItem {
    pub dir: NfsFh3,
    pub name: Vec<u8>,
    pub fh: NfsFh3,
    pub ftype: Option<Ftype3>,
}

/// Upper bound on a tree walk's wall time; the walk is also bounded by its
/// object count.
pub const WALK_MAX_TIME: Duration = Duration::from_secs(600);

/// Walk the tree under `root` (READDIRPLUS) and list every object, up to
/// `limit` items or `max_time`, whichever comes first (a note on stderr
/// then).
pub async fn walk(
    nfs: &NfsClient,
    root: &NfsFh3,
    limit: usize,
    max_time: Duration,
) -> Result<Vec<TreeItem>, ClientError> {
    let deadline = Instant::now() + max_time;
    let mut out = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(d) = dirs.pop() {
        if Instant::now() >= deadline {
            eprintln!(
                "walk stopped by its {} s bound after {} objects",
                max_time.as_secs(),
                out.len()
            );
            return Ok(out);
        }
        for e in nfs.readdirplus_all(&d).await? {
            if e.name == b"." || e.name == b".." {
                continue;
            }
            let Some(fh) = e.name_handle.clone() else {
                continue;
            };
            let ftype = e.name_attributes.as_ref().map(|a| a.ftype);
            if ftype == Some(Ftype3::Dir) {
                dirs.push(fh.clone());
            }
            out.push(TreeItem {
                dir: d.clone(),
                name: e.name.clone(),
                fh,
                ftype,
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
    /// NFS NULL: the ceiling of a call that does no work.
    Null,
    /// GETATTR of the export root, or of --handles objects of the tree.
    Getattr,
    /// ACCESS asking READ|LOOKUP|MODIFY|EXTEND|DELETE|EXECUTE, of the export
    /// root or of --handles objects.
    Access,
    /// LOOKUP of (directory, name) of --handles objects.
    Lookup,
    /// READ of 4096 bytes at offset 0 of --handles regular files.
    Read,
    /// WRITE of 4096 bytes UNSTABLE at offset 0 of --handles regular files
    /// (rewrites their first bytes).
    Write,
    /// rsync-like metadata walk: per object ACCESS (x2), GETATTR, LOOKUP, and
    /// a READDIRPLUS of its directory every 16 objects (the SVC_MAX_WAKING
    /// thread's load).
    Traverse,
    /// NFSv4.1 only (`--vers 4.1`): OPEN for reading by name, READ of 4096
    /// bytes at offset 0, CLOSE, of --handles regular files: three
    /// compounds, each counted as a call.
    OpenReadClose,
}

impl Mix {
    pub fn name(self) -> &'static str {
        match self {
            Mix::Null => "null",
            Mix::Getattr => "getattr",
            Mix::Access => "access",
            Mix::Lookup => "lookup",
            Mix::Read => "read",
            Mix::Write => "write",
            Mix::Traverse => "traverse",
            Mix::OpenReadClose => "open-read-close",
        }
    }

    /// Whether the mix needs the tree walked first.
    pub fn walks(self, handles: usize) -> bool {
        self == Mix::Traverse || handles > 0
    }

    /// Whether `handles` 0 sends every call to the export root's handle.
    pub fn uses_root(self, handles: usize) -> bool {
        handles == 0 && matches!(self, Mix::Getattr | Mix::Access)
    }
}

/// Most objects --handles may name: a bound on the walk and the arrays.
pub const MAX_HANDLES: usize = 10_000_000;

/// Check `--mix`, `--handles` and `--tree-limit` together.
pub fn validate(mix: Mix, handles: usize, tree_limit: usize) -> Result<(), String> {
    let m = mix.name();
    match mix {
        Mix::Null | Mix::Traverse if handles > 0 => Err(format!(
            "--handles does not apply to --mix {m} (null sends no handle; traverse visits the walked tree)"
        )),
        Mix::Lookup | Mix::Read | Mix::Write | Mix::OpenReadClose if handles == 0 => Err(format!(
            "--mix {m} needs --handles N > 0 (objects of the tree; `rnfsd-bench prepare` makes one)"
        )),
        _ if handles > MAX_HANDLES => Err(format!("--handles is at most {MAX_HANDLES}")),
        _ if handles > tree_limit => Err(format!(
            "--handles {handles} exceeds --tree-limit {tree_limit}: the sample is drawn from the walked objects"
        )),
        _ => Ok(()),
    }
}

/// xorshift64*: a cheap per-stream generator, no shared state.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        // splitmix64 of the seed: nearby seeds give unrelated streams, and
        // the state is never 0 (xorshift's fixed point).
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        XorShift((z ^ (z >> 31)) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in 0..n (n > 0), by multiply-shift rather than modulo.
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// `n` distinct indices of `0..m` (n <= m), one from each of `n` equal
/// strata of the range at a pseudo-random place inside it: the sample
/// spans the whole walk, not its first directories, and a given seed always
/// picks the same ones.
pub fn sample_indices(m: usize, n: usize, seed: u64) -> Vec<usize> {
    let n = n.min(m);
    let mut rng = XorShift::new(seed);
    (0..n)
        .map(|i| {
            let lo = (i as u128 * m as u128 / n as u128) as usize;
            let hi = ((i as u128 + 1) * m as u128 / n as u128) as usize;
            lo + rng.below(hi - lo)
        })
        .collect()
}

/// The seed of the handle sample: fixed so reruns use the same objects.
pub(crate) const SAMPLE_SEED: u64 = 0x5eed_0000_0000_0001;

/// Which walked objects `mix` may use: regular files for read and write,
/// anything for the rest.
fn eligible(mix: Mix, it: &TreeItem) -> bool {
    match mix {
        Mix::Read | Mix::Write | Mix::OpenReadClose => it.ftype == Some(Ftype3::Reg),
        _ => true,
    }
}

/// `n` objects for `mix` sampled across the walk (see [`sample_indices`]).
pub fn sample(items: &[TreeItem], mix: Mix, n: usize) -> Result<Vec<TreeItem>, String> {
    let pool: Vec<&TreeItem> = items.iter().filter(|it| eligible(mix, it)).collect();
    if pool.len() < n {
        let what = match mix {
            Mix::Read | Mix::Write | Mix::OpenReadClose => {
                format!("regular files (of {} objects walked)", items.len())
            }
            _ => "objects".into(),
        };
        return Err(format!(
            "--handles {n}: the walk found only {} {what}; prepare a larger tree or raise --tree-limit",
            pool.len()
        ));
    }
    Ok(sample_indices(pool.len(), n, SAMPLE_SEED)
        .into_iter()
        .map(|i| pool[i].clone())
        .collect())
}

/// Why an NFSv4.1-only mix is refused over NFSv3.
pub const NFS41_ONLY: &str = "--mix open-read-close is NFSv4.1 only: add --vers 4.1";

/// Bytes per READ and WRITE of the read and write mixes.
pub const IO_BYTES: usize = 4096;

/// Every ACCESS3 bit a client asks for an open of a file or a directory.
pub const ACCESS_ALL: u32 = ACCESS3_READ
    | ACCESS3_LOOKUP
    | ACCESS3_MODIFY
    | ACCESS3_EXTEND
    | ACCESS3_DELETE
    | ACCESS3_EXECUTE;

/// A mix with its call arguments built once, so a call allocates nothing on
/// our side beyond what the client library does (WRITE clones its handle).
#[derive(Debug)]
pub enum Load {
    Null,
    Getattr(Vec<GetAttr3Args>),
    Access(Vec<Access3Args>),
    Lookup(Vec<Lookup3Args>),
    Read(Vec<Read3Args>),
    Write(Vec<NfsFh3>, Vec<u8>),
    Traverse(Vec<TreeItem>),
}

impl Load {
    /// The arguments of `mix`: to `root` when `handles` is 0 (getattr,
    /// access), else to `handles` objects sampled from `items` (the walk).
    pub fn build(
        mix: Mix,
        root: &NfsFh3,
        items: Vec<TreeItem>,
        handles: usize,
    ) -> Result<Load, String> {
        let objs = if handles == 0 || mix == Mix::Traverse {
            Vec::new()
        } else {
            sample(&items, mix, handles)?
        };
        let fhs = || -> Vec<NfsFh3> {
            if mix.uses_root(handles) {
                vec![root.clone()]
            } else {
                objs.iter().map(|o| o.fh.clone()).collect()
            }
        };
        Ok(match mix {
            Mix::Null => Load::Null,
            Mix::Getattr => Load::Getattr(
                fhs()
                    .into_iter()
                    .map(|object| GetAttr3Args { object })
                    .collect(),
            ),
            Mix::Access => Load::Access(
                fhs()
                    .into_iter()
                    .map(|object| Access3Args {
                        object,
                        access: ACCESS_ALL,
                    })
                    .collect(),
            ),
            Mix::Lookup => Load::Lookup(
                objs.iter()
                    .map(|o| Lookup3Args {
                        what: Diropargs3 {
                            dir: o.dir.clone(),
                            name: o.name.clone(),
                        },
                    })
                    .collect(),
            ),
            Mix::Read => Load::Read(
                fhs()
                    .into_iter()
                    .map(|file| Read3Args {
                        file,
                        offset: 0,
                        count: IO_BYTES as u32,
                    })
                    .collect(),
            ),
            Mix::Write => Load::Write(fhs(), vec![0x5a; IO_BYTES]),
            Mix::Traverse if items.is_empty() => {
                return Err("the export is empty: `rnfsd-bench prepare DIR` first".into())
            }
            Mix::Traverse => Load::Traverse(items),
            Mix::OpenReadClose => return Err(NFS41_ONLY.into()),
        })
    }

    /// The arguments of `mix` to the given handles (`run --handles-file`):
    /// getattr, access, read and write only (lookup needs names).
    pub fn from_handles(mix: Mix, fhs: Vec<NfsFh3>) -> Result<Load, String> {
        if fhs.is_empty() {
            return Err("no handles".into());
        }
        Ok(match mix {
            Mix::Getattr => Load::Getattr(
                fhs.into_iter()
                    .map(|object| GetAttr3Args { object })
                    .collect(),
            ),
            Mix::Access => Load::Access(
                fhs.into_iter()
                    .map(|object| Access3Args {
                        object,
                        access: ACCESS_ALL,
                    })
                    .collect(),
            ),
            Mix::Read => Load::Read(
                fhs.into_iter()
                    .map(|file| Read3Args {
                        file,
                        offset: 0,
                        count: IO_BYTES as u32,
                    })
                    .collect(),
            ),
            Mix::Write => Load::Write(fhs, vec![0x5a; IO_BYTES]),
            m => {
                return Err(format!(
                    "--handles-file applies to getattr, access, read and write, not --mix {}",
                    m.name()
                ))
            }
        })
    }

    /// How many distinct targets the calls pick from (0 for null).
    pub fn targets(&self) -> usize {
        match self {
            Load::Null => 0,
            Load::Getattr(v) => v.len(),
            Load::Access(v) => v.len(),
            Load::Lookup(v) => v.len(),
            Load::Read(v) => v.len(),
            Load::Write(v, _) => v.len(),
            Load::Traverse(v) => v.len(),
        }
    }
}

/// A count bound on each stream besides the deadline: far above what 600 s
/// at any rate reaches, so it only stops a loop gone wrong.
const MAX_CALLS_PER_STREAM: u64 = 1 << 32;

/// Run `streams` concurrent call loops for `dur` and gather latency. Stream
/// `s` calls through `stream_client(clients, s)`: one shared client, or one
/// per stream (a connection each).
pub async fn run(
    clients: &[NfsClient],
    load: Arc<Load>,
    streams: usize,
    dur: Duration,
) -> RunResult {
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for s in 0..streams {
        let Some(nfs) = session::stream_client(clients, s).cloned() else {
            break;
        };
        let stop = stop.clone();
        let errors = errors.clone();
        let load = load.clone();
        tasks.push(tokio::spawn(async move {
            let mut h = histogram();
            let mut calls = 0u64;
            let mut rng = XorShift::new(s as u64);
            let mut i = s.wrapping_mul(7919);
            while !stop.load(Ordering::Relaxed) && calls < MAX_CALLS_PER_STREAM {
                let ok = match &*load {
                    Load::Traverse(items) => {
                        let it = &items[i % items.len()];
                        i += 1;
                        traverse_step(&nfs, it, i, &mut h, &mut calls).await
                    }
                    l => timed(one_call(&nfs, l, &mut rng), &mut h, &mut calls).await,
                };
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
    let mut lat = histogram();
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

/// One element of `v` chosen by `rng` (v is never empty: `Load::build`).
fn pick<'a, T>(v: &'a [T], rng: &mut XorShift) -> Option<&'a T> {
    v.get(rng.below(v.len()))
}

/// One call of a single-procedure mix to a randomly chosen target.
async fn one_call(nfs: &NfsClient, load: &Load, rng: &mut XorShift) -> bool {
    match load {
        Load::Null => nfs.null().await.is_ok(),
        Load::Getattr(v) => match pick(v, rng) {
            Some(a) => succeeded(nfs.getattr(a).await),
            None => false,
        },
        Load::Access(v) => match pick(v, rng) {
            Some(a) => succeeded(nfs.access(a).await),
            None => false,
        },
        Load::Lookup(v) => match pick(v, rng) {
            Some(a) => succeeded(nfs.lookup(a).await),
            None => false,
        },
        Load::Read(v) => match pick(v, rng) {
            Some(a) => succeeded(nfs.read(a).await),
            None => false,
        },
        Load::Write(v, data) => match pick(v, rng) {
            Some(f) => succeeded(
                nfs.write_ref(&Write3ArgsRef {
                    file: f.clone(),
                    offset: 0,
                    count: data.len() as u32,
                    stable: StableHow::Unstable,
                    data,
                })
                .await,
            ),
            None => false,
        },
        // Traverse runs its own steps (run); never one call.
        Load::Traverse(_) => false,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn item(i: usize, ftype: Ftype3) -> TreeItem {
        TreeItem {
            dir: NfsFh3::new(vec![0xd, (i / 100) as u8]),
            name: format!("n{i}").into_bytes(),
            fh: NfsFh3::new((i as u32).to_be_bytes().to_vec()),
            ftype: Some(ftype),
        }
    }

    #[test]
    fn sample_is_distinct_spread_and_deterministic() {
        let (m, n) = (10_000, 100);
        let s = sample_indices(m, n, 7);
        assert_eq!(s.len(), n);
        // One per stratum: strictly increasing (so distinct), each inside
        // its hundredth of the walk, so the last directories are reached.
        for (i, &x) in s.iter().enumerate() {
            assert!((i * 100..(i + 1) * 100).contains(&x), "{i}: {x}");
        }
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(s, sample_indices(m, n, 7));
        assert_ne!(s, sample_indices(m, n, 8));
        // Not simply the stratum starts.
        assert!(s.iter().enumerate().any(|(i, &x)| x != i * 100));
    }

    #[test]
    fn sample_edges() {
        assert_eq!(sample_indices(5, 5, 1), vec![0, 1, 2, 3, 4]);
        assert_eq!(sample_indices(5, 9, 1), vec![0, 1, 2, 3, 4]);
        assert!(sample_indices(0, 3, 1).is_empty());
        assert!(sample_indices(10, 0, 1).is_empty());
        let s = sample_indices(7, 3, 3);
        assert_eq!(s.len(), 3);
        assert!(s.windows(2).all(|w| w[0] < w[1]) && s[2] < 7);
    }

    #[test]
    fn read_and_write_sample_only_regular_files() {
        // A walk of 10 directories then 90 files, as the DFS lists a
        // prepared tree: the files are sampled from across all of it.
        let items: Vec<TreeItem> = (0..100)
            .map(|i| item(i, if i < 10 { Ftype3::Dir } else { Ftype3::Reg }))
            .collect();
        for mix in [Mix::Read, Mix::Write] {
            let s = sample(&items, mix, 30).unwrap();
            assert_eq!(s.len(), 30);
            assert!(s.iter().all(|t| t.ftype == Some(Ftype3::Reg)));
            assert!(s
                .iter()
                .any(|t| t.name == b"n99" || t.name == b"n98" || t.name == b"n97"));
        }
        // Any object for getattr, including directories.
        let g = sample(&items, Mix::Getattr, 100).unwrap();
        assert_eq!(g.len(), 100);
        let e = sample(&items, Mix::Read, 91).unwrap_err();
        assert!(e.contains("only 90 regular files"), "{e}");
    }

    #[test]
    fn arguments_validated() {
        assert!(validate(Mix::Getattr, 0, 50_000).is_ok());
        assert!(validate(Mix::Access, 0, 50_000).is_ok());
        assert!(validate(Mix::Null, 0, 50_000).is_ok());
        assert!(validate(Mix::Traverse, 0, 50_000).is_ok());
        assert!(validate(Mix::Getattr, 1000, 50_000).is_ok());
        for m in [Mix::Lookup, Mix::Read, Mix::Write] {
            assert!(validate(m, 0, 50_000)
                .unwrap_err()
                .contains("needs --handles"));
            assert!(validate(m, 10, 50_000).is_ok());
        }
        assert!(validate(Mix::Null, 5, 50_000).is_err());
        assert!(validate(Mix::Traverse, 5, 50_000).is_err());
        assert!(validate(Mix::Getattr, 60_000, 50_000)
            .unwrap_err()
            .contains("--tree-limit"));
        assert!(validate(Mix::Getattr, MAX_HANDLES + 1, usize::MAX).is_err());
    }

    #[test]
    fn loads_use_the_root_only_with_zero_handles() {
        let root = NfsFh3::new(vec![1, 2, 3]);
        let items: Vec<TreeItem> = (0..50).map(|i| item(i, Ftype3::Reg)).collect();
        match Load::build(Mix::Getattr, &root, items.clone(), 0).unwrap() {
            Load::Getattr(v) => assert_eq!(
                v,
                vec![GetAttr3Args {
                    object: root.clone()
                }]
            ),
            l => panic!("{l:?}"),
        }
        match Load::build(Mix::Access, &root, items.clone(), 10).unwrap() {
            Load::Access(v) => {
                assert_eq!(v.len(), 10);
                assert!(v.iter().all(|a| a.object != root && a.access == ACCESS_ALL));
            }
            l => panic!("{l:?}"),
        }
        match Load::build(Mix::Lookup, &root, items.clone(), 5).unwrap() {
            Load::Lookup(v) => assert_eq!(v.len(), 5),
            l => panic!("{l:?}"),
        }
        match Load::build(Mix::Write, &root, items.clone(), 5).unwrap() {
            Load::Write(v, d) => assert_eq!((v.len(), d.len()), (5, IO_BYTES)),
            l => panic!("{l:?}"),
        }
        assert_eq!(
            Load::build(Mix::Read, &root, items.clone(), 7)
                .unwrap()
                .targets(),
            7
        );
        assert_eq!(
            Load::build(Mix::Null, &root, Vec::new(), 0)
                .unwrap()
                .targets(),
            0
        );
        assert!(Load::build(Mix::Traverse, &root, Vec::new(), 0).is_err());
        assert!(Mix::Getattr.uses_root(0) && !Mix::Getattr.uses_root(1));
        assert!(!Mix::Null.uses_root(0) && !Mix::Lookup.uses_root(0));
    }

    #[test]
    fn xorshift_below_stays_in_range_and_covers_it() {
        let mut r = XorShift::new(0);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            seen[r.below(10)] += 1;
        }
        assert!(seen.iter().all(|&c| c > 800), "{seen:?}");
        assert_eq!(XorShift::new(3).next_u64(), XorShift::new(3).next_u64());
        assert_ne!(XorShift::new(3).next_u64(), XorShift::new(4).next_u64());
    }
}
