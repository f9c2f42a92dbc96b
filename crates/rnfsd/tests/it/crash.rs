//! Power-cut crash test (the durability issue, item 5). The export is ext4
//! or XFS on a loop device. Clients write UNSTABLE + COMMIT, write FILE_SYNC,
//! create, rename and remove under load; at a random moment the filesystem
//! is shut down without flushing its log (`xfs_io -x -c shutdown`, the
//! FS_IOC_SHUTDOWN ioctl xfstests uses to simulate a crash), the server
//! gets SIGKILL, the filesystem is remounted (journal replay) and the
//! server restarted on it. Every byte acknowledged by a COMMIT whose
//! verifier matched its WRITEs, every stable WRITE and every acknowledged
//! namespace change must be there, and the verifier must differ after the
//! restart.
//!
//! NFSv3 and NFSv4.1 clients share the rounds: with several clients every
//! other one speaks NFSv4.1 (which ones alternates by round), doing its
//! role through OPEN, WRITE (UNSTABLE4 then COMMIT, or FILE_SYNC4),
//! CREATE, RENAME, REMOVE, LINK, SETATTR and OPEN EXCLUSIVE4_1; a client
//! alone speaks NFSv3 in rounds 0-11 of every 24 and NFSv4.1 in rounds
//! 12-23. The modes NFSv4.1 creates and SETATTRs set are checked too.
//! The server's NFSv4 client records are on a second filesystem of the
//! same kind, cut at the same moment, while new clients are made until
//! the cut: after the restart every client whose CREATE_SESSION was
//! acknowledged must be allowed to reclaim (OPEN CLAIM_PREVIOUS in the
//! grace period), one never seen must not.
//!
//! Rounds: `RNFSD_CRASH_ROUNDS` (default 6; the full run is 20):
//! ext4 twice then XFS twice (in the full run, ext4 with fast commits in
//! rounds 4 and 5 of every 8); data and names, then names only; round 4
//! of every 6 only creates files and directories, round 5 has one client
//! alone; rounds 0, 2 and 8 of every 12 only write data.
//!
//! Knobs for longer or narrower runs (unset, a run is CI's; `Knobs`):
//! `RNFSD_CRASH_FIRST` (first round number), `RNFSD_CRASH_FS` (every round
//! on `ext4`, `xfs` or `ext4-fc`), `RNFSD_CRASH_KIND` (every round one
//! load: `mixed`, `data`, `names`, `creates`, `alone-names`,
//! `alone-sync`), `RNFSD_CRASH_CLIENTS` (clients of a round that has
//! several), `RNFSD_CRASH_WRITE_BLOCKS` (4 KiB blocks per WRITE),
//! `RNFSD_CRASH_WRITE_BEHIND` (the server's `--write-behind-bytes`,
//! 8192 unless given), `RNFSD_CRASH_MOMENT_MS` (`500-3000`: the cut's
//! range),
//! `RNFSD_CRASH_PROTO` (`v3`, `v4` or `both`, the default: the
//! protocol of every client),
//! `RNFSD_CRASH_LOOP_DIO=1` (the loop device in direct-I/O mode) and
//! `RNFSD_CRASH_KEEP_GOING=1` (every loss of every round reported with the
//! lost files' state; the test fails at the end, listing the rounds).

use crate::common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::blockdev::{extents, run, unavailable, LoopFs};
use common::nfs::*;
use common::TestServer;
use rnfsd_client::nfs3::*;
use rnfsd_client::nfs4::{OpenArgs, OpenHow, SetAttrs4};
use rnfsd_client::{Client, ClientError, Nfs4Client, Nfs4Config, NfsClient};
use rnfsd_proto::nfs4::{
    ArgOp, NfsFh4, NfsRes4, Nfsstat4, Open4Args, OpenClaim4, OpenDelegationType4, OpenFlag4,
    PutFh4Args, ResOp, StableHow4, Stateid4, Verifier4, OPEN4_SHARE_ACCESS_BOTH,
    OPEN4_SHARE_DENY_NONE,
};

const BLOCK: usize = 4096;
const BLOCKS: u64 = 8;
const MAGIC: u32 = 0x5241_4e44;

/// What the server acknowledged, and what it may or may not have done.
#[derive(Default)]
struct Acked {
    /// (file, block) -> the generation acknowledged durable.
    blocks: HashMap<(String, u64), u32>,
    present: HashSet<String>,
    absent: HashSet<String>,
    /// Names an unanswered call may have changed: not checked.
    uncertain: HashSet<String>,
    verifiers: HashSet<[u8; 8]>,
    /// Files made by an acknowledged EXCLUSIVE create -> the (mtime,
    /// atime) seconds their verifier must have left.
    exclusive: HashMap<String, (i64, i64)>,
    /// Objects whose mode an acknowledged create or SETATTR set (NFSv4.1
    /// clients) -> that mode.
    modes: HashMap<String, u32>,
    /// Owners of the NFSv4.1 clients whose CREATE_SESSION was
    /// acknowledged: the server must know them after the restart.
    owners: Vec<Vec<u8>>,
    ops: u64,
    /// Of `ops`, those acknowledged to NFSv4.1 clients.
    ops4: u64,
    /// COMMITs and FILE_SYNC WRITEs acknowledged, and the WRITEs and bytes
    /// they made durable (for a report).
    commits: u64,
    file_syncs: u64,
    writes: u64,
    bytes: u64,
    /// Set just before the cut: a reply that arrives from then on is not
    /// counted (after a real power cut no reply arrives at all, but a
    /// filesystem being shut down can still let an fsync racing the
    /// shutdown return success for a change the shutdown then discards).
    cutting: bool,
}

/// A block's content: magic, file id, block, generation, then a fill byte
/// derived from them.
fn block(file: u32, b: u64, gen: u32) -> Vec<u8> {
    let mut v = vec![(file as u64 * 31 + b * 7 + u64::from(gen)) as u8; BLOCK];
    for (i, w) in [MAGIC, file, b as u32, gen].iter().enumerate() {
        v[i * 4..i * 4 + 4].copy_from_slice(&w.to_be_bytes());
    }
    v
}

/// The generation a block on disk holds, if it is a whole block we wrote.
fn read_gen(data: &[u8], file: u32, b: u64) -> Option<u32> {
    let w = |i: usize| u32::from_be_bytes(data[i * 4..i * 4 + 4].try_into().unwrap());
    if data.len() < BLOCK || w(0) != MAGIC || w(1) != file || w(2) != b as u32 {
        return None;
    }
    (block(file, b, w(3)) == data[..BLOCK]).then_some(w(3))
}

fn file_id(name: &str) -> u32 {
    name.bytes()
        .fold(17u32, |h, c| h.wrapping_mul(31) ^ u32::from(c))
}

/// `create_file` that does not panic: None once the server is gone (the
/// cut came first).
async fn try_create(nfs: &NfsClient, root: &NfsFh3, name: &str) -> Option<NfsFh3> {
    match nfs
        .create(&Create3Args {
            where_: dirop(root, name),
            how: CreateHow3::Unchecked(sattr_mode(0o644)),
        })
        .await
    {
        Ok(NfsRes::Ok(c)) => c.obj,
        _ => None,
    }
}

/// `n` blocks from block `u * n` on, of generation `gen`: one WRITE's data.
fn unit(file: u32, u: u64, n: u64, gen: u32) -> Vec<u8> {
    (u * n..(u + 1) * n)
        .flat_map(|b| block(file, b, gen))
        .collect()
}

/// A COMMIT of generation `gen` of `units` (`n` blocks each) answered
/// with verifier `commit`, its WRITEs having carried `verfs`: acknowledged
/// only if every WRITE carried the COMMIT's verifier (otherwise a client
/// resends them: RFC 1813 §3.3.7, RFC 8881 §18.3.3). False once the cut
/// has begun (the reply is not counted).
#[allow(clippy::too_many_arguments)]
fn ack_commit(
    acked: &Mutex<Acked>,
    name: &str,
    units: std::ops::Range<u64>,
    n: u64,
    gen: u32,
    verfs: &HashSet<[u8; 8]>,
    commit: [u8; 8],
    v4: bool,
) -> bool {
    let mut a = acked.lock().unwrap();
    if a.cutting {
        return false;
    }
    a.verifiers.insert(commit);
    if verfs.len() == 1 && verfs.contains(&commit) {
        for u in units.clone() {
            for b in u * n..(u + 1) * n {
                a.blocks.insert((name.to_owned(), b), gen);
            }
        }
        a.ops += 1;
        a.ops4 += u64::from(v4);
        a.commits += 1;
        a.writes += units.end - units.start;
        a.bytes += (units.end - units.start) * n * BLOCK as u64;
    }
    true
}

/// A FILE_SYNC WRITE of unit `u` (`n` blocks), generation `gen`,
/// answered with verifier `verf`. False once the cut has begun.
fn ack_stable(
    acked: &Mutex<Acked>,
    name: &str,
    u: u64,
    n: u64,
    gen: u32,
    verf: [u8; 8],
    v4: bool,
) -> bool {
    let mut a = acked.lock().unwrap();
    if a.cutting {
        return false;
    }
    for b in u * n..(u + 1) * n {
        a.blocks.insert((name.to_owned(), b), gen);
    }
    a.verifiers.insert(verf);
    a.ops += 1;
    a.ops4 += u64::from(v4);
    a.file_syncs += 1;
    a.writes += 1;
    a.bytes += n * BLOCK as u64;
    true
}

/// Rewrites the file's BLOCKS units (`n` blocks each, one WRITE) UNSTABLE,
/// then COMMITs, again and again; `append`: writes one new unit past the
/// end each time instead (so each COMMIT also makes a new size and new
/// blocks durable: the metadata its writeback changed).
async fn unstable_writer(
    nfs: NfsClient,
    root: NfsFh3,
    name: String,
    append: bool,
    n: u64,
    acked: Arc<Mutex<Acked>>,
) {
    let Some(fh) = try_create(&nfs, &root, &name).await else {
        return;
    };
    let id = file_id(&name);
    for gen in 1u32.. {
        let mut verfs = HashSet::new();
        let units = if append {
            u64::from(gen - 1)..u64::from(gen)
        } else {
            0..BLOCKS
        };
        for u in units.clone() {
            match nfs
                .write(&Write3Args {
                    file: fh.clone(),
                    offset: u * n * BLOCK as u64,
                    count: (n as usize * BLOCK) as u32,
                    stable: StableHow::Unstable,
                    data: unit(id, u, n, gen),
                })
                .await
            {
                Ok(NfsRes::Ok(r)) if r.count as usize == n as usize * BLOCK => {
                    verfs.insert(r.verf.0);
                }
                _ => return,
            }
        }
        match nfs
            .commit(&Commit3Args {
                file: fh.clone(),
                offset: 0,
                count: 0,
            })
            .await
        {
            Ok(NfsRes::Ok(r)) => {
                if !ack_commit(&acked, &name, units, n, gen, &verfs, r.verf.0, false) {
                    return;
                }
            }
            _ => return,
        }
    }
}

/// FILE_SYNC writes of one unit (`n` blocks) each, over the file's BLOCKS
/// units in turn; `append`: each one past the end.
async fn stable_writer(
    nfs: NfsClient,
    root: NfsFh3,
    name: String,
    append: bool,
    n: u64,
    acked: Arc<Mutex<Acked>>,
) {
    let Some(fh) = try_create(&nfs, &root, &name).await else {
        return;
    };
    let id = file_id(&name);
    for gen in 1u32.. {
        let u = if append {
            u64::from(gen - 1)
        } else {
            u64::from(gen) % BLOCKS
        };
        match nfs
            .write(&Write3Args {
                file: fh.clone(),
                offset: u * n * BLOCK as u64,
                count: (n as usize * BLOCK) as u32,
                stable: StableHow::FileSync,
                data: unit(id, u, n, gen),
            })
            .await
        {
            Ok(NfsRes::Ok(r))
                if r.count as usize == n as usize * BLOCK && r.committed == StableHow::FileSync =>
            {
                if !ack_stable(&acked, &name, u, n, gen, r.verf.0, false) {
                    return;
                }
            }
            _ => return,
        }
    }
}

/// CREATE c{n} (GUARDED and EXCLUSIVE in turn); every third is then
/// renamed to r{n}, every third removed.
async fn namespace(nfs: NfsClient, root: NfsFh3, tag: String, acked: Arc<Mutex<Acked>>) {
    for n in 0u64.. {
        let c = format!("{tag}c{n}");
        let r = format!("{tag}r{n}");
        acked.lock().unwrap().uncertain.insert(c.clone());
        // GUARDED and EXCLUSIVE creates in turn (the Linux client's
        // O_EXCL opens are EXCLUSIVE).
        let what = if n % 2 == 0 {
            Make::Guarded
        } else {
            Make::Exclusive(exclusive_verifier(n))
        };
        if !made(&nfs, &root, &c, &what).await {
            return;
        }
        {
            let mut a = acked.lock().unwrap();
            if a.cutting {
                return;
            }
            a.uncertain.remove(&c);
            a.present.insert(c.clone());
            a.ops += 1;
        }
        match n % 3 {
            1 => {
                {
                    let mut a = acked.lock().unwrap();
                    if a.cutting {
                        return;
                    }
                    a.uncertain.insert(c.clone());
                    a.uncertain.insert(r.clone());
                }
                let res = nfs
                    .rename(&Rename3Args {
                        from: dirop(&root, &c),
                        to: dirop(&root, &r),
                    })
                    .await;
                if !matches!(res, Ok(NfsRes::Ok(_))) {
                    return;
                }
                let mut a = acked.lock().unwrap();
                if a.cutting {
                    return;
                }
                a.uncertain.remove(&c);
                a.uncertain.remove(&r);
                a.present.remove(&c);
                a.absent.insert(c);
                a.present.insert(r);
                a.ops += 1;
            }
            2 => {
                acked.lock().unwrap().uncertain.insert(c.clone());
                let res = nfs
                    .remove(&Remove3Args {
                        object: dirop(&root, &c),
                    })
                    .await;
                if !matches!(res, Ok(NfsRes::Ok(_))) {
                    return;
                }
                let mut a = acked.lock().unwrap();
                if a.cutting {
                    return;
                }
                a.uncertain.remove(&c);
                a.present.remove(&c);
                a.absent.insert(c);
                a.ops += 1;
            }
            _ => {}
        }
    }
}

/// What `made` makes.
enum Make {
    Dir,
    Guarded,
    /// EXCLUSIVE with this verifier (the Linux client's `O_EXCL` open).
    Exclusive([u8; 8]),
}

/// A verifier for EXCLUSIVE create `n` (distinct per `n`).
fn exclusive_verifier(n: u64) -> [u8; 8] {
    (n.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1).to_be_bytes()
}

/// The (mtime, atime) seconds an EXCLUSIVE create's verifier leaves in
/// its file (the server's encoding, as knfsd's: the top bit cleared).
fn verifier_times(v: &[u8; 8]) -> (i64, i64) {
    let w = |i: usize| i64::from(u32::from_be_bytes(v[i..i + 4].try_into().unwrap()) & 0x7fff_ffff);
    (w(0), w(4))
}

/// MKDIR, or CREATE of a file; whether it succeeded.
async fn made(nfs: &NfsClient, root: &NfsFh3, name: &str, what: &Make) -> bool {
    let how = match what {
        Make::Dir => {
            let res = nfs
                .mkdir(&Mkdir3Args {
                    where_: dirop(root, name),
                    attributes: sattr_mode(0o755),
                })
                .await;
            return matches!(res, Ok(NfsRes::Ok(_)));
        }
        Make::Guarded => CreateHow3::Guarded(sattr_mode(0o644)),
        Make::Exclusive(v) => CreateHow3::Exclusive(Verf3(*v)),
    };
    let res = nfs
        .create(&Create3Args {
            where_: dirop(root, name),
            how,
        })
        .await;
    matches!(res, Ok(NfsRes::Ok(_)))
}

/// Files and directories made, nothing else: no later change of this
/// client commits the journal on a create's behalf, so only the create's
/// own sync makes it durable before the cut (a sync that covered only part
/// of the change, or none, loses names here).
async fn creates_only(nfs: NfsClient, root: NfsFh3, tag: String, acked: Arc<Mutex<Acked>>) {
    for n in 0u64.. {
        let c = format!("{tag}m{n}");
        acked.lock().unwrap().uncertain.insert(c.clone());
        // Directories, GUARDED and EXCLUSIVE files in turn.
        let what = match n % 4 {
            1 | 3 => Make::Dir,
            0 => Make::Guarded,
            _ => Make::Exclusive(exclusive_verifier(n)),
        };
        if !made(&nfs, &root, &c, &what).await {
            return;
        }
        let mut a = acked.lock().unwrap();
        if a.cutting {
            return;
        }
        a.uncertain.remove(&c);
        if let Make::Exclusive(v) = &what {
            a.exclusive.insert(c.clone(), verifier_times(v));
        }
        a.present.insert(c);
        a.ops += 1;
    }
}

// ---- NFSv4.1 clients (RFC 8881): the same loads through OPEN, WRITE,
// COMMIT, CREATE, RENAME, REMOVE, LINK and SETATTR, checked the same way.

/// An NFSv4.1 client of `srv` (EXCHANGE_ID, CREATE_SESSION,
/// RECLAIM_COMPLETE) with owner `owner`, and the export root's handle.
async fn connect4(srv: &TestServer, owner: &[u8]) -> (Nfs4Client, NfsFh4) {
    let v4 = Nfs4Config {
        owner: Some(owner.to_vec()),
        ..Nfs4Config::default()
    };
    let c = Nfs4Client::connect(srv.addr, &config(1), &v4)
        .await
        .unwrap_or_else(|e| panic!("NFSv4.1 session with {}: {e}", srv.addr));
    let root = c
        .lookup_path(srv.export.to_str().unwrap())
        .await
        .unwrap_or_else(|e| panic!("NFSv4.1 LOOKUP of the export: {e}"));
    (c, root)
}

/// OPEN `name` for reading and writing, created UNCHECKED: its handle
/// and open stateid; None once the server is gone.
async fn open4(nfs: &Nfs4Client, root: &NfsFh4, name: &str) -> Option<(NfsFh4, Stateid4)> {
    let o = nfs.open(root, &OpenArgs::create(name)).await.ok()?;
    Some((o.fh, o.stateid))
}

/// `unstable_writer` over NFSv4.1: WRITE UNSTABLE4 under the open
/// stateid, then COMMIT; a block is acknowledged only when every WRITE
/// carried the COMMIT's verifier.
async fn unstable_writer4(
    nfs: Nfs4Client,
    root: NfsFh4,
    name: String,
    append: bool,
    n: u64,
    acked: Arc<Mutex<Acked>>,
) {
    let Some((fh, sid)) = open4(&nfs, &root, &name).await else {
        return;
    };
    let id = file_id(&name);
    for gen in 1u32.. {
        let mut verfs = HashSet::new();
        let units = if append {
            u64::from(gen - 1)..u64::from(gen)
        } else {
            0..BLOCKS
        };
        for u in units.clone() {
            let data = unit(id, u, n, gen);
            match nfs
                .write(&fh, &sid, u * n * BLOCK as u64, &data, StableHow4::Unstable)
                .await
            {
                Ok(w) if w.count as usize == data.len() => {
                    verfs.insert(w.writeverf.0);
                }
                _ => return,
            }
        }
        match nfs.commit(&fh, 0, 0).await {
            Ok(v) => {
                if !ack_commit(&acked, &name, units, n, gen, &verfs, v.0, true) {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}

/// `stable_writer` over NFSv4.1: WRITE FILE_SYNC4.
async fn stable_writer4(
    nfs: Nfs4Client,
    root: NfsFh4,
    name: String,
    append: bool,
    n: u64,
    acked: Arc<Mutex<Acked>>,
) {
    let Some((fh, sid)) = open4(&nfs, &root, &name).await else {
        return;
    };
    let id = file_id(&name);
    for gen in 1u32.. {
        let u = if append {
            u64::from(gen - 1)
        } else {
            u64::from(gen) % BLOCKS
        };
        let data = unit(id, u, n, gen);
        match nfs
            .write(&fh, &sid, u * n * BLOCK as u64, &data, StableHow4::FileSync)
            .await
        {
            Ok(w) if w.count as usize == data.len() && w.committed == StableHow4::FileSync => {
                if !ack_stable(&acked, &name, u, n, gen, w.writeverf.0, true) {
                    return;
                }
            }
            _ => return,
        }
    }
}

/// Modes the NFSv4.1 clients give: at create (a file by GUARDED4, a file
/// by EXCLUSIVE4_1, a directory by CREATE) and by SETATTR after.
const MODE_GUARDED: u32 = 0o644;
const MODE_EXCLUSIVE: u32 = 0o640;
const MODE_DIR: u32 = 0o755;
const MODE_SET_FILE: u32 = 0o600;
const MODE_SET_DIR: u32 = 0o700;

/// What `made4` makes.
enum Make4 {
    Dir,
    /// OPEN GUARDED4 with MODE_GUARDED.
    Guarded,
    /// OPEN EXCLUSIVE4_1 with this verifier and MODE_EXCLUSIVE (set after
    /// the verifier: a second change the reply waits for).
    Exclusive([u8; 8]),
}

impl Make4 {
    fn mode(&self) -> u32 {
        match self {
            Make4::Dir => MODE_DIR,
            Make4::Guarded => MODE_GUARDED,
            Make4::Exclusive(_) => MODE_EXCLUSIVE,
        }
    }
}

/// CREATE of a directory, or OPEN creating a file (then CLOSE): the new
/// object's handle; None when the create failed.
async fn made4(nfs: &Nfs4Client, root: &NfsFh4, name: &str, what: &Make4) -> Option<NfsFh4> {
    let how = match what {
        Make4::Dir => return nfs.mkdir(root, name, MODE_DIR).await.ok(),
        Make4::Guarded => OpenHow::Guarded(SetAttrs4::mode(MODE_GUARDED)),
        Make4::Exclusive(v) => OpenHow::Exclusive41(Verifier4(*v), SetAttrs4::mode(MODE_EXCLUSIVE)),
    };
    let o = nfs
        .open(
            root,
            &OpenArgs {
                how,
                ..OpenArgs::create(name)
            },
        )
        .await
        .ok()?;
    // The create was acknowledged with the OPEN; the CLOSE only ends the
    // open (a cut meanwhile changes nothing of it).
    let _ = nfs.close(&o.fh, &o.stateid).await;
    Some(o.fh)
}

/// Records an acknowledged create of `name` (unless the cut has begun).
fn ack_made4(acked: &Mutex<Acked>, name: &str, what: &Make4) -> bool {
    let mut a = acked.lock().unwrap();
    if a.cutting {
        return false;
    }
    a.uncertain.remove(name);
    if let Make4::Exclusive(v) = what {
        a.exclusive.insert(name.to_owned(), verifier_times(v));
    }
    a.modes.insert(name.to_owned(), what.mode());
    a.present.insert(name.to_owned());
    a.ops += 1;
    a.ops4 += 1;
    true
}

/// `namespace` over NFSv4.1 on a `sync` export: c{n} made by OPEN
/// GUARDED4, OPEN EXCLUSIVE4_1 or CREATE (a directory) in turn, then,
/// in turn, its mode changed by SETATTR, renamed to r{n}, removed, or
/// (a file) linked as l{n} too (a directory: SETATTR instead).
async fn namespace4(nfs: Nfs4Client, root: NfsFh4, tag: String, acked: Arc<Mutex<Acked>>) {
    for n in 0u64.. {
        let c = format!("{tag}c{n}");
        acked.lock().unwrap().uncertain.insert(c.clone());
        let what = match n % 3 {
            0 => Make4::Guarded,
            1 => Make4::Exclusive(exclusive_verifier(n)),
            _ => Make4::Dir,
        };
        let Some(fh) = made4(&nfs, &root, &c, &what).await else {
            return;
        };
        if !ack_made4(&acked, &c, &what) {
            return;
        }
        let dir = matches!(what, Make4::Dir);
        match n % 4 {
            1 => {
                let r = format!("{tag}r{n}");
                {
                    let mut a = acked.lock().unwrap();
                    a.uncertain.insert(c.clone());
                    a.uncertain.insert(r.clone());
                }
                if nfs.rename(&root, &c, &root, &r).await.is_err() {
                    return;
                }
                let mut a = acked.lock().unwrap();
                if a.cutting {
                    return;
                }
                a.uncertain.remove(&c);
                a.uncertain.remove(&r);
                a.present.remove(&c);
                a.absent.insert(c.clone());
                a.present.insert(r.clone());
                // The object's verifier and mode go with it.
                if let Some(t) = a.exclusive.remove(&c) {
                    a.exclusive.insert(r.clone(), t);
                }
                if let Some(m) = a.modes.remove(&c) {
                    a.modes.insert(r, m);
                }
                a.ops += 1;
                a.ops4 += 1;
            }
            2 => {
                acked.lock().unwrap().uncertain.insert(c.clone());
                if nfs.remove(&root, &c).await.is_err() {
                    return;
                }
                let mut a = acked.lock().unwrap();
                if a.cutting {
                    return;
                }
                a.uncertain.remove(&c);
                a.present.remove(&c);
                a.exclusive.remove(&c);
                a.modes.remove(&c);
                a.absent.insert(c);
                a.ops += 1;
                a.ops4 += 1;
            }
            3 if !dir => {
                let l = format!("{tag}l{n}");
                acked.lock().unwrap().uncertain.insert(l.clone());
                if nfs.link(&fh, &root, &l).await.is_err() {
                    return;
                }
                let mut a = acked.lock().unwrap();
                if a.cutting {
                    return;
                }
                a.uncertain.remove(&l);
                a.present.insert(l);
                a.ops += 1;
                a.ops4 += 1;
            }
            _ => {
                let mode = if dir { MODE_SET_DIR } else { MODE_SET_FILE };
                // The mode is either until the reply.
                acked.lock().unwrap().modes.remove(&c);
                let set = nfs
                    .setattr(&fh, &Stateid4::ANONYMOUS, &SetAttrs4::mode(mode))
                    .await;
                if set.is_err() {
                    return;
                }
                let mut a = acked.lock().unwrap();
                if a.cutting {
                    return;
                }
                a.modes.insert(c, mode);
                a.ops += 1;
                a.ops4 += 1;
            }
        }
    }
}

/// `creates_only` over NFSv4.1: directories (CREATE), OPEN GUARDED4
/// and OPEN EXCLUSIVE4_1 files in turn, nothing else.
async fn creates_only4(nfs: Nfs4Client, root: NfsFh4, tag: String, acked: Arc<Mutex<Acked>>) {
    for n in 0u64.. {
        let c = format!("{tag}m{n}");
        acked.lock().unwrap().uncertain.insert(c.clone());
        let what = match n % 4 {
            1 | 3 => Make4::Dir,
            0 => Make4::Guarded,
            _ => Make4::Exclusive(exclusive_verifier(n)),
        };
        if made4(&nfs, &root, &c, &what).await.is_none() || !ack_made4(&acked, &c, &what) {
            return;
        }
    }
}

/// Pause between two clients `new_clients` makes.
const NEW_CLIENT_EVERY: Duration = Duration::from_millis(20);
/// Clients `new_clients` makes at most in a round (the server keeps
/// `nfs4_max_clients`, 4096).
const NEW_CLIENTS_MAX: u64 = 200;

/// New NFSv4.1 clients (EXCHANGE_ID, CREATE_SESSION) one after another
/// until the cut, over one connection: each acknowledged CREATE_SESSION
/// wrote its client's record durably first (RFC 8881 §8.4.3), so every
/// owner recorded here must be known after the restart, also the last
/// ones before the cut.
async fn new_clients(client: Client, r: u64, acked: Arc<Mutex<Acked>>) {
    for k in 0..NEW_CLIENTS_MAX {
        let owner = format!("crash round {r} client {k}").into_bytes();
        let v4 = Nfs4Config {
            owner: Some(owner.clone()),
            reclaim_complete: false,
            ..Nfs4Config::default()
        };
        if Nfs4Client::establish(client.clone(), &v4).await.is_err() {
            return;
        }
        {
            let mut a = acked.lock().unwrap();
            if a.cutting {
                return;
            }
            a.owners.push(owner);
        }
        tokio::time::sleep(NEW_CLIENT_EVERY).await;
    }
}

/// The file the restarted server's known clients reclaim an open of
/// (made durable before the round's load).
const HELD: &str = "held";

/// After the restart, in the grace period: every owner whose
/// CREATE_SESSION was acknowledged may reclaim (OPEN CLAIM_PREVIOUS of
/// HELD succeeds: §8.4.2.1), an owner never seen may not; then an
/// UNSTABLE WRITE over NFSv4.1 carries a verifier none acknowledged
/// before. Returns how many owners were checked, and a line per owner
/// the server did not know.
async fn reclaims(
    srv: &TestServer,
    owners: &[Vec<u8>],
    verfs: &HashSet<[u8; 8]>,
    keep_going: bool,
) -> (usize, Vec<String>) {
    if owners.is_empty() {
        return (0, Vec::new());
    }
    let client = connect(srv).await;
    let held = format!("{}/{HELD}", srv.export.display());
    let session = |owner: &[u8]| {
        let v4 = Nfs4Config {
            owner: Some(owner.to_vec()),
            reclaim_complete: false,
            ..Nfs4Config::default()
        };
        let client = client.clone();
        async move {
            Nfs4Client::establish(client, &v4)
                .await
                .unwrap_or_else(|e| panic!("NFSv4.1 session after the restart: {e}"))
        }
    };
    let reclaim = |c: Nfs4Client, fh: NfsFh4| async move {
        let r = c
            .run(&[
                ArgOp::PutFh(PutFh4Args { object: fh }),
                ArgOp::Open(Box::new(Open4Args {
                    seqid: 0,
                    share_access: OPEN4_SHARE_ACCESS_BOTH,
                    share_deny: OPEN4_SHARE_DENY_NONE,
                    owner: c.open_owner(),
                    openhow: OpenFlag4::NoCreate,
                    claim: OpenClaim4::Previous(OpenDelegationType4::None),
                })),
            ])
            .await;
        match r {
            Ok(res) => match res.get(1) {
                Some(ResOp::Open(NfsRes4::Ok(o))) => Ok((c, o.stateid)),
                other => panic!("OPEN CLAIM_PREVIOUS: {other:?}"),
            },
            Err(ClientError::Nfs4 { status, .. }) => Err(status),
            Err(e) => panic!("OPEN CLAIM_PREVIOUS: {e}"),
        }
    };
    let stranger = session(b"crash: a client never seen").await;
    let fh = stranger
        .lookup_path(&held)
        .await
        .unwrap_or_else(|e| panic!("LOOKUP {held} after the restart: {e}"));
    // The check can fail: an owner the server never knew may not reclaim.
    let r = reclaim(stranger, fh.clone()).await.map(drop);
    assert!(
        matches!(r, Err(Nfsstat4::ReclaimBad | Nfsstat4::NoGrace)),
        "a client never seen reclaimed: {r:?}"
    );
    let mut lost = Vec::new();
    let mut open = None;
    for owner in owners {
        match reclaim(session(owner).await, fh.clone()).await {
            Ok(o) => open = Some(o),
            Err(s) => {
                let what = format!(
                    "client {:?}: CREATE_SESSION acknowledged, unknown after the restart (OPEN CLAIM_PREVIOUS: {s:?})",
                    String::from_utf8_lossy(owner)
                );
                assert!(keep_going, "{what}");
                lost.push(format!("LOST {what}"));
            }
        }
    }
    // The write verifier as NFSv4.1 clients see it changed too: they
    // resend what they had not seen COMMITted.
    if let Some((c, sid)) = open {
        let w = c
            .write(&fh, &sid, 0, &[1], StableHow4::Unstable)
            .await
            .unwrap_or_else(|e| panic!("NFSv4.1 WRITE after the restart: {e}"));
        assert!(
            !verfs.contains(&w.writeverf.0),
            "the NFSv4.1 write verifier did not change"
        );
    }
    (owners.len(), lost)
}

/// What `verify` found.
#[derive(Default)]
struct Checked {
    blocks: usize,
    names: usize,
    /// Modes checked (NFSv4.1 creates and SETATTRs).
    modes: usize,
    /// Every loss, described (keep-going mode; otherwise the first panics).
    report: Vec<String>,
    lost_blocks: usize,
    lost_names: usize,
    /// (file id, block) -> (file, generation acknowledged) of each lost
    /// block, for the search of the device (`on_the_device`).
    lost: HashMap<(u32, u64), (String, u32)>,
}

/// A file's extents as `extents` gives them: block size, list, filefrag's
/// output.
type Extents = (u64, Vec<common::blockdev::Extent>, String);

/// What a block read back holds, when it is not the generation
/// acknowledged: a label shared by a run of such blocks, and the
/// generation of ours it holds, if any.
fn content(d: Option<&[u8]>, file: u32, b: u64) -> (String, Option<u32>) {
    let Some(d) = d.filter(|d| d.len() == BLOCK) else {
        return ("past the end of the file".into(), None);
    };
    if d.iter().all(|&c| c == 0) {
        return ("zeros".into(), None);
    }
    if let Some(g) = read_gen(d, file, b) {
        return ("an older generation".into(), Some(g));
    }
    let w = |i: usize| u32::from_be_bytes(d[i * 4..i * 4 + 4].try_into().unwrap());
    if w(0) == MAGIC {
        return (
            format!("block {} of file {:#x} (generation {})", w(2), w(1), w(3)),
            None,
        );
    }
    let head: String = d[..16].iter().map(|c| format!("{c:02x}")).collect();
    (format!("other data ({head}...)"), None)
}

/// Where block `b` of a file lives, from its extents: a hole, or an
/// (unwritten) extent at a device block.
fn mapping(ext: &Option<Extents>, b: u64) -> String {
    let Some((bs, list, _)) = ext else {
        return "extents unknown".into();
    };
    let l = b * BLOCK as u64 / bs;
    match list
        .iter()
        .find(|e| e.logical <= l && l < e.logical + e.len)
    {
        None => "a hole".into(),
        Some(e) if e.flags.contains("unwritten") => "an unwritten extent".into(),
        Some(_) => "a written extent".into(),
    }
}

/// Checks the replayed filesystem against what was acknowledged. Unless
/// `keep_going`, the first loss panics; otherwise every loss is described:
/// per file its size and extents, per run of lost blocks what they hold.
fn verify(export: &Path, a: &Acked, keep_going: bool) -> Checked {
    use std::os::unix::fs::MetadataExt;
    let mut c = Checked {
        blocks: a.blocks.len(),
        ..Checked::default()
    };
    let mut files: BTreeMap<&str, Vec<(u64, u32)>> = BTreeMap::new();
    for ((name, b), gen) in &a.blocks {
        files.entry(name).or_default().push((*b, *gen));
    }
    for (name, mut blocks) in files {
        blocks.sort_unstable();
        let id = file_id(name);
        let path = export.join(name);
        let data = match std::fs::read(&path) {
            Ok(d) => d,
            Err(e) if keep_going => {
                c.report.push(format!(
                    "LOST {name}: {} acknowledged blocks, file unreadable: {e}",
                    blocks.len()
                ));
                c.lost_blocks += blocks.len();
                for (b, gen) in blocks {
                    c.lost.insert((id, b), (name.to_owned(), gen));
                }
                continue;
            }
            Err(e) => panic!("{name}: acknowledged data, file unreadable: {e}"),
        };
        // (block, acknowledged, what it holds, generation found)
        let mut bad = Vec::new();
        for &(b, gen) in &blocks {
            let off = (b as usize) * BLOCK;
            let d = data.get(off..off + BLOCK);
            match d.and_then(|d| read_gen(d, id, b)) {
                Some(g) if g >= gen => {}
                other if !keep_going => panic!(
                    "{name} block {b}: acknowledged generation {gen}, found {other:?} after the crash"
                ),
                _ => {
                    let (what, g) = content(d, id, b);
                    bad.push((b, gen, what, g));
                }
            }
        }
        if bad.is_empty() {
            continue;
        }
        c.lost_blocks += bad.len();
        let m = std::fs::metadata(&path).ok();
        let ext = extents(&path);
        c.report.push(format!(
            "LOST {name} (file {id:#x}): {} of {} acknowledged blocks; size {} (st_blocks {}), inode {}",
            bad.len(),
            blocks.len(),
            m.as_ref().map_or(0, |m| m.len()),
            m.as_ref().map_or(0, |m| m.blocks()),
            m.as_ref().map_or(0, |m| m.ino()),
        ));
        // Runs of consecutive blocks holding the same kind of thing in the
        // same kind of place.
        let mut i = 0;
        while i < bad.len() {
            let label = (bad[i].2.clone(), mapping(&ext, bad[i].0));
            let mut j = i + 1;
            while j < bad.len()
                && bad[j].0 == bad[j - 1].0 + 1
                && (bad[j].2.clone(), mapping(&ext, bad[j].0)) == label
            {
                j += 1;
            }
            let run = &bad[i..j];
            let acked: Vec<u32> = run.iter().map(|r| r.1).collect();
            let got: Vec<u32> = run.iter().filter_map(|r| r.3).collect();
            let span = |v: &[u32]| match (v.iter().min(), v.iter().max()) {
                (Some(a), Some(b)) if a == b => format!("{a}"),
                (Some(a), Some(b)) => format!("{a}-{b}"),
                _ => "-".into(),
            };
            c.report.push(format!(
                "  blocks {}-{} ({}): {} in {}; acknowledged generation {}{}",
                run[0].0,
                run[run.len() - 1].0,
                run.len(),
                label.0,
                label.1,
                span(&acked),
                if got.is_empty() {
                    String::new()
                } else {
                    format!(", found {}", span(&got))
                }
            ));
            i = j;
        }
        match &ext {
            Some((_, _, out)) => {
                for l in out.lines() {
                    c.report.push(format!("  | {l}"));
                }
            }
            None => c.report.push("  (filefrag failed)".into()),
        }
        for (b, gen, _, _) in bad {
            c.lost.insert((id, b), (name.to_owned(), gen));
        }
    }
    let lost_name = |c: &mut Checked, what: String| {
        assert!(keep_going, "{what}");
        c.lost_names += 1;
        // The first few by name; the count says the rest.
        if c.lost_names <= 20 {
            c.report.push(format!("LOST {what}"));
        }
    };
    for n in a.present.difference(&a.uncertain) {
        if !export.join(n).exists() {
            lost_name(
                &mut c,
                format!("{n}: acknowledged created, missing after the crash"),
            );
        }
        c.names += 1;
    }
    // The EXCLUSIVE verifier was made durable with its file (RFC 1813
    // §3.3.8: a retransmitted create is recognised by it).
    for (n, &(mtime, atime)) in &a.exclusive {
        if a.uncertain.contains(n) {
            continue;
        }
        match std::fs::metadata(export.join(n)) {
            Err(e) => lost_name(
                &mut c,
                format!("{n}: acknowledged EXCLUSIVE create, missing: {e}"),
            ),
            Ok(m) if (m.mtime(), m.atime()) != (mtime, atime) => lost_name(
                &mut c,
                format!(
                    "{n}: acknowledged EXCLUSIVE create without its verifier after the crash: times {:?}, verifier {:?}",
                    (m.mtime(), m.atime()),
                    (mtime, atime)
                ),
            ),
            Ok(_) => {}
        }
    }
    // The mode an acknowledged create or SETATTR set (NFSv4.1 clients).
    for (n, &mode) in &a.modes {
        if a.uncertain.contains(n) {
            continue;
        }
        c.modes += 1;
        match std::fs::symlink_metadata(export.join(n)) {
            Err(e) => lost_name(
                &mut c,
                format!("{n}: acknowledged mode {mode:o}, missing after the crash: {e}"),
            ),
            Ok(m) if m.mode() & 0o7777 != mode => lost_name(
                &mut c,
                format!(
                    "{n}: acknowledged mode {mode:o}, mode {:o} after the crash",
                    m.mode() & 0o7777
                ),
            ),
            Ok(_) => {}
        }
    }
    for n in a.absent.difference(&a.uncertain) {
        if export.join(n).exists() {
            lost_name(
                &mut c,
                format!("{n}: acknowledged removed or renamed, back after the crash"),
            );
        }
        c.names += 1;
    }
    if c.lost_names > 20 {
        c.report
            .push(format!("LOST {} more names", c.lost_names - 20));
    }
    c
}

/// Where the lost blocks' data is on the device: the image (below the
/// loop device) searched for every block of ours, against each lost
/// block's place in its file (`extents`). Tells data that never reached
/// the device from data that did but that the file no longer maps (or
/// maps as unwritten).
fn on_the_device(
    fs: &LoopFs,
    export: &Path,
    lost: &HashMap<(u32, u64), (String, u32)>,
) -> Vec<String> {
    use std::io::Read;
    // (file id, block) -> (newest generation seen, its byte offset)
    let mut seen: HashMap<(u32, u64), (u32, u64)> = HashMap::new();
    let mut f = match std::fs::File::open(&fs.image) {
        Ok(f) => f,
        Err(e) => return vec![format!("image {}: {e}", fs.image.display())],
    };
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    loop {
        let mut got = 0;
        while got < buf.len() {
            match f.read(&mut buf[got..]) {
                Ok(0) | Err(_) => break,
                Ok(k) => got += k,
            }
        }
        for (i, d) in buf[..got].chunks_exact(BLOCK).enumerate() {
            let w = |i: usize| u32::from_be_bytes(d[i * 4..i * 4 + 4].try_into().unwrap());
            if w(0) != MAGIC {
                continue;
            }
            let key = (w(1), u64::from(w(2)));
            if !lost.contains_key(&key) || read_gen(d, key.0, key.1) != Some(w(3)) {
                continue;
            }
            let off = at + (i * BLOCK) as u64;
            let e = seen.entry(key).or_insert((w(3), off));
            if w(3) > e.0 {
                *e = (w(3), off);
            }
        }
        if got < buf.len() {
            break;
        }
        at += got as u64;
    }
    // Per file: how many lost blocks have their acknowledged generation
    // (or later) on the device where the file maps them, elsewhere, only
    // an older one, or none at all.
    let mut per: BTreeMap<&str, [u64; 4]> = BTreeMap::new();
    let mut examples: BTreeMap<&str, String> = BTreeMap::new();
    let mut maps: HashMap<&str, Option<Extents>> = HashMap::new();
    for (&(id, b), (name, gen)) in lost {
        let ext = maps
            .entry(name.as_str())
            .or_insert_with(|| extents(&export.join(name)));
        let mapped_at = ext.as_ref().and_then(|(bs, list, _)| {
            let l = b * BLOCK as u64 / bs;
            list.iter()
                .find(|e| e.logical <= l && l < e.logical + e.len)
                .map(|e| (e.physical + (l - e.logical)) * bs)
        });
        let k = match seen.get(&(id, b)) {
            None => 3,
            Some(&(g, _)) if g < *gen => 2,
            Some(&(_, off)) if Some(off) == mapped_at => 0,
            Some(_) => 1,
        };
        per.entry(name.as_str()).or_default()[k] += 1;
        examples.entry(name.as_str()).or_insert_with(|| {
            format!(
                "block {b}: acknowledged {gen}, on the device {:?} (generation, byte), mapped at byte {mapped_at:?}",
                seen.get(&(id, b))
            )
        });
    }
    per.iter()
        .map(|(name, k)| {
            format!(
                "DEVICE {name}: of its lost blocks, {} have the acknowledged generation on the device where the file maps them, {} elsewhere (unmapped), {} only an older one, {} none; e.g. {}",
                k[0], k[1], k[2], k[3], examples[name]
            )
        })
        .collect()
}

/// The kernel log's lines (`dmesg`) with their times, seconds since boot
/// (a continuation line takes its first line's).
fn dmesg() -> Vec<(f64, String)> {
    let out = std::process::Command::new("dmesg")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mut t = 0.0;
    out.lines()
        .map(|l| {
            if let Some(v) = l
                .strip_prefix('[')
                .and_then(|r| r.split_once(']'))
                .and_then(|(v, _)| v.trim().parse().ok())
            {
                t = v;
            }
            (t, l.to_owned())
        })
        .collect()
}

/// A small deterministic generator: the shutdown moment of each round.
fn moment(round: u64) -> Duration {
    moment_in(round, (300, 1499))
}

/// `moment`, spread over `lo..=hi` milliseconds.
fn moment_in(round: u64, (lo, hi): (u64, u64)) -> Duration {
    let x = round
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407)
        >> 33;
    Duration::from_millis(lo + x % (hi - lo + 1))
}

/// What a round's clients do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Load {
    /// UNSTABLE + COMMIT and FILE_SYNC writers (half appending), and
    /// namespace clients.
    Mixed,
    /// Writers only: no namespace change commits the journal meanwhile.
    Data,
    /// Namespace clients only.
    Names,
    /// Files and directories made, nothing else.
    Creates,
    /// One client alone changing names.
    AloneNames,
    /// One client alone appending FILE_SYNC.
    AloneSync,
}

impl Load {
    /// CI's rotation (module doc).
    fn of_round(r: u64) -> Load {
        match r {
            _ if r % 12 == 5 => Load::AloneNames,
            _ if r % 6 == 5 => Load::AloneSync,
            _ if r % 6 == 4 => Load::Creates,
            _ if r % 2 == 1 => Load::Names,
            _ if matches!(r % 12, 0 | 2 | 8) => Load::Data,
            _ => Load::Mixed,
        }
    }

    fn parse(s: &str) -> Load {
        match s {
            "mixed" => Load::Mixed,
            "data" => Load::Data,
            "names" => Load::Names,
            "creates" => Load::Creates,
            "alone-names" => Load::AloneNames,
            "alone-sync" => Load::AloneSync,
            _ => panic!(
                "RNFSD_CRASH_KIND={s}: mixed, data, names, creates, alone-names or alone-sync"
            ),
        }
    }
}

/// Which protocol a round's clients speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protos {
    V3,
    V4,
    /// Both: with several clients, every other client NFSv4.1 (the
    /// others in the next round); a client alone speaks NFSv3 in rounds
    /// 0-11 of every 24, NFSv4.1 in rounds 12-23.
    Both,
}

impl Protos {
    /// Whether client `c` of round `r` speaks NFSv4.1.
    fn v4(self, r: u64, c: usize, alone: bool) -> bool {
        match self {
            Protos::V3 => false,
            Protos::V4 => true,
            Protos::Both if alone => (r / 12) % 2 == 1,
            Protos::Both => (c as u64 + r) % 2 == 1,
        }
    }
}

/// The test's knobs, from the environment (module doc); unset, a run is
/// CI's: 6 rounds, each on the filesystem and with the load of its number,
/// cut at 0.3-1.5 s, the first loss a panic.
#[derive(Clone, Copy)]
struct Knobs {
    first: u64,
    rounds: u64,
    /// "ext4", "xfs" or "ext4 fast_commit" for every round.
    fs: Option<&'static str>,
    load: Option<Load>,
    protos: Protos,
    clients: Option<usize>,
    /// 4 KiB blocks per WRITE.
    write_blocks: u64,
    /// The server's `--write-behind-bytes` (the test's 8 KiB unless given;
    /// the server's default is 4 MiB).
    write_behind: u64,
    moment_ms: (u64, u64),
    loop_dio: bool,
    keep_going: bool,
}

impl Knobs {
    fn from_env() -> Knobs {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let num = |k: &str| {
            var(k).map(|v| {
                v.parse::<u64>()
                    .unwrap_or_else(|_| panic!("{k}={v}: not a number"))
            })
        };
        let moment_ms = var("RNFSD_CRASH_MOMENT_MS").map_or((300, 1499), |v| {
            let r = v.split_once('-').and_then(|(a, b)| {
                Some((a.trim().parse::<u64>().ok()?, b.trim().parse::<u64>().ok()?))
            });
            match r {
                Some((a, b)) if a <= b => (a, b),
                _ => panic!("RNFSD_CRASH_MOMENT_MS={v}: LOW-HIGH milliseconds"),
            }
        });
        Knobs {
            first: num("RNFSD_CRASH_FIRST").unwrap_or(0),
            rounds: num("RNFSD_CRASH_ROUNDS").unwrap_or(6).clamp(1, 10_000),
            fs: var("RNFSD_CRASH_FS").map(|v| match v.as_str() {
                "ext4" => "ext4",
                "xfs" => "xfs",
                "ext4-fc" => "ext4 fast_commit",
                _ => panic!("RNFSD_CRASH_FS={v}: ext4, xfs or ext4-fc"),
            }),
            load: var("RNFSD_CRASH_KIND").map(|v| Load::parse(&v)),
            protos: match var("RNFSD_CRASH_PROTO").as_deref() {
                None | Some("both") => Protos::Both,
                Some("v3") => Protos::V3,
                Some("v4") => Protos::V4,
                Some(v) => panic!("RNFSD_CRASH_PROTO={v}: v3, v4 or both"),
            },
            clients: num("RNFSD_CRASH_CLIENTS").map(|n| n.clamp(1, 64) as usize),
            write_blocks: num("RNFSD_CRASH_WRITE_BLOCKS").map_or(1, |n| n.clamp(1, 64)),
            write_behind: num("RNFSD_CRASH_WRITE_BEHIND").unwrap_or(2 * BLOCK as u64),
            moment_ms,
            loop_dio: var("RNFSD_CRASH_LOOP_DIO").is_some_and(|v| v == "1"),
            keep_going: var("RNFSD_CRASH_KEEP_GOING").is_some_and(|v| v == "1"),
        }
    }
}

/// The power cut: the filesystem shut down without a log flush (and the
/// one holding the server's NFSv4 client records, `state_fs`, if any),
/// the load left to fail (bounded), the server killed, then the
/// filesystems remounted, which replays their journals (and panics,
/// "Structure needs cleaning", when a journal cannot be replayed).
async fn power_cut(
    fs: &mut LoopFs,
    state_fs: Option<&mut LoopFs>,
    srv: &mut TestServer,
    acked: &Mutex<Acked>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    before_replay: Option<&Path>,
) {
    acked.lock().unwrap().cutting = true;
    for f in std::iter::once(&*fs).chain(state_fs.as_deref()) {
        run("xfs_io", &["-x", "-c", "shutdown", f.mnt.to_str().unwrap()]);
    }
    // Calls now fail (EIO); the load ends by itself. Bounded all the same.
    let deadline = Instant::now() + Duration::from_secs(30);
    for t in tasks {
        let left = deadline.saturating_duration_since(Instant::now());
        let _ = tokio::time::timeout(left, t).await;
    }
    srv.kill();
    fs.umount();
    if let Some(f) = state_fs {
        f.umount();
        f.mount();
    }
    // A copy of the image as the cut left it, journal not yet replayed.
    if let Some(to) = before_replay {
        run(
            "cp",
            &[
                "--sparse=always",
                fs.image.to_str().unwrap(),
                to.to_str().unwrap(),
            ],
        );
    }
    fs.mount();
}

/// Whether rounds on ext4 with fast commits run: in the full run only
/// (`RNFSD_CRASH_ROUNDS` given), where the kernel has them. After
/// `xfs_io -x -c shutdown`, fast commits now and then leave a journal
/// superblock the kernel calls corrupted even when the server makes no
/// unlinked inode (2 of about 45 such rounds here, Linux 6.18): a shutdown
/// artefact, as far as can be told, that would make `.ci/run` flaky.
fn fast_commit_rounds() -> bool {
    let full = std::env::var("RNFSD_CRASH_ROUNDS").is_ok();
    let have = Path::new("/sys/fs/ext4/features/fast_commit").exists();
    if full && !have {
        eprintln!("this kernel's ext4 has no fast commits: no rounds with them");
    }
    full && have
}

/// One round; in keep-going mode, a description of what it lost (None:
/// nothing), where otherwise the first loss panics.
async fn round(r: u64, k: Knobs) -> Option<String> {
    // Rounds 2 and 3 of every 4 on XFS: its log commits differ from
    // ext4's jbd2, and `sync` exports rely on both. In the full run, every
    // other pair of ext4 rounds (4 and 5 of every 8) with fast commits,
    // whose fsyncs log inodes instead of committing the journal (and whose
    // replay fails after an fsync of an unlinked inode: the server must
    // make none).
    let kind = k.fs.unwrap_or_else(|| match r % 8 {
        2 | 3 | 6 | 7 => "xfs",
        4 | 5 if fast_commit_rounds() => "ext4 fast_commit",
        _ => "ext4",
    });
    let mut fs = match kind {
        "xfs" => LoopFs::xfs("crash", 512),
        "ext4" => LoopFs::new("crash", 512),
        _ => LoopFs::ext4_fast_commit("crash", 512),
    };
    if k.loop_dio {
        assert_eq!(
            fs.set_direct_io(true),
            Some(true),
            "{}: direct I/O not taken",
            fs.dev
        );
    }
    // The kernel log's last time before the round (its buffer is a ring:
    // a count of lines says nothing once it is full).
    let log_from = if k.keep_going {
        dmesg().last().map_or(0.0, |l| l.0)
    } else {
        0.0
    };
    let export = fs.subdir("export");
    // The file the NFSv4.1 clients reclaim after the restart, durable
    // before the load begins.
    {
        let f = std::fs::File::create(export.join(HELD)).expect("held file");
        f.sync_all().expect("fsync held file");
        std::fs::File::open(&export)
            .and_then(|d| d.sync_all())
            .expect("fsync export");
    }
    // The server's NFSv4 client records (its state directory's `nfs4`)
    // on a filesystem of the same kind cut at the same moment: a
    // filesystem of their own, so a record's fsync commits no journal on
    // the export's clients' behalf (which would hide a reply sent before
    // its own commit).
    let mut state_fs = match kind {
        "xfs" => LoopFs::xfs("crash-state", 300),
        "ext4" => LoopFs::new("crash-state", 64),
        _ => LoopFs::ext4_fast_commit("crash-state", 64),
    };
    let state = common::TempDir::new("crash-state-dir");
    let records = state_fs.subdir("nfs4");
    // Durable before the server starts: what the cut may take is the
    // server's own writes.
    for d in [&records, &state_fs.mnt] {
        std::fs::File::open(d)
            .and_then(|d| d.sync_all())
            .expect("fsync the records' directory");
    }
    std::os::unix::fs::symlink(&records, state.path().join("nfs4"))
        .expect("nfs4 records on the cut filesystem");
    // Write-behind after two blocks (its default, 4 MiB, is more than a
    // round writes to a file): the cut then also meets writeback that
    // write-behind started, which no acknowledged COMMIT may rely on.
    let mut srv = TestServer::start_in(
        &export,
        state,
        &[
            "--no-rpcbind",
            "--no-root-squash",
            "--write-behind-bytes",
            &k.write_behind.to_string(),
        ],
        &[],
    );
    let acked = Arc::new(Mutex::new(Acked::default()));
    let mut tasks = Vec::new();
    // Odd rounds change names only: no data sync commits the journal for
    // them, so a namespace change acknowledged before it was durable is
    // lost at the cut. Round 4 of every 6 only makes files and
    // directories: no later change of a client commits a create's change
    // for it. Rounds 0 and 8 (ext4) and 2 (XFS) of every 12 only write
    // data: no namespace change commits the journal meanwhile, so a
    // COMMIT or stable WRITE acknowledged before the journal carried its
    // new size and blocks is lost at the cut. Rounds 5 and 11 of every 12:
    // one client calling alone, so each change's own thread commits
    // (nothing else is committing: `owed::Commits::lead`): names in the
    // first, FILE_SYNC appends in the second.
    let load = k.load.unwrap_or(Load::of_round(r));
    let alone = matches!(load, Load::AloneNames | Load::AloneSync);
    let clients = if alone { 1 } else { k.clients.unwrap_or(6) };
    let n = k.write_blocks;
    for c in 0..clients {
        // Writers and namespace clients in CI's order for 6 clients; with
        // another number, in an order that gives 4 clients a COMMIT writer,
        // a FILE_SYNC appender, a namespace client and a COMMIT appender.
        let role = match k.clients {
            None => c,
            Some(_) => [0, 3, 4, 1, 2, 5][c % 6],
        };
        if k.protos.v4(r, c, alone) {
            // The same role over NFSv4.1, its files named v4...
            let owner = format!("crash round {r} v4 client {c}").into_bytes();
            let (nfs, root) = connect4(&srv, &owner).await;
            acked.lock().unwrap().owners.push(owner);
            let a = acked.clone();
            tasks.push(tokio::spawn(async move {
                let name = |p: &str| format!("v4{p}{c}");
                let data = load == Load::Data;
                match role {
                    _ if load == Load::AloneNames => namespace4(nfs, root, name("n"), a).await,
                    _ if load == Load::AloneSync => {
                        stable_writer4(nfs, root, name("s"), true, n, a).await
                    }
                    _ if load == Load::Creates => creates_only4(nfs, root, name("m"), a).await,
                    _ if load == Load::Names => namespace4(nfs, root, name("n"), a).await,
                    0 | 1 => unstable_writer4(nfs, root, name("u"), role == 1, n, a).await,
                    2 | 3 => stable_writer4(nfs, root, name("s"), role == 3, n, a).await,
                    4 if data => unstable_writer4(nfs, root, name("u"), true, n, a).await,
                    5 if data => stable_writer4(nfs, root, name("s"), true, n, a).await,
                    _ => namespace4(nfs, root, name("n"), a).await,
                }
            }));
            continue;
        }
        let s = mount(&srv).await;
        let (nfs, root, a) = (s.nfs.clone(), s.root.clone(), acked.clone());
        tasks.push(tokio::spawn(async move {
            let name = |p: &str| format!("{p}{c}");
            let data = load == Load::Data;
            match role {
                _ if load == Load::AloneNames => namespace(nfs, root, name("n"), a).await,
                _ if load == Load::AloneSync => {
                    stable_writer(nfs, root, name("s"), true, n, a).await
                }
                _ if load == Load::Creates => creates_only(nfs, root, name("m"), a).await,
                _ if load == Load::Names => namespace(nfs, root, name("n"), a).await,
                0 | 1 => unstable_writer(nfs, root, name("u"), role == 1, n, a).await,
                2 | 3 => stable_writer(nfs, root, name("s"), role == 3, n, a).await,
                4 if data => unstable_writer(nfs, root, name("u"), true, n, a).await,
                5 if data => stable_writer(nfs, root, name("s"), true, n, a).await,
                _ => namespace(nfs, root, name("n"), a).await,
            }
        }));
    }
    // New NFSv4.1 clients until the cut, where NFSv4.1 clients share the
    // round (a client alone keeps it alone).
    let v4 = (0..clients).any(|c| k.protos.v4(r, c, alone));
    if v4 && !alone {
        let (client, a) = (connect(&srv).await, acked.clone());
        tasks.push(tokio::spawn(new_clients(client, r, a)));
    }
    let at = moment_in(r, k.moment_ms);
    tokio::time::sleep(at).await;
    // Keep-going mode keeps the image as the cut left it, for a round that
    // loses anything (its journal can be read: `debugfs -R logdump`).
    let pre = fs.dir.path().join("before-replay.img");
    power_cut(
        &mut fs,
        Some(&mut state_fs),
        &mut srv,
        &acked,
        tasks,
        k.keep_going.then_some(pre.as_path()),
    )
    .await;
    let (checked, ops, ops4, owners, verfs, counts) = {
        let a = acked.lock().unwrap();
        let c = verify(&export, &a, k.keep_going);
        (
            c,
            a.ops,
            a.ops4,
            a.owners.clone(),
            a.verifiers.clone(),
            (a.commits, a.file_syncs, a.writes, a.bytes),
        )
    };
    let (blocks, names, modes) = (checked.blocks, checked.names, checked.modes);
    let what = format!(
        "round {r} ({kind}, {load:?}, {clients} clients, {} KiB WRITEs, write-behind {} B, {} direct I/O {}): \
         cut at {at:?}: {ops} acknowledged operations ({ops4} to NFSv4.1 clients): {} COMMITs and {} FILE_SYNC WRITEs acknowledging {} WRITEs, {:.1} MiB; \
         {} NFSv4.1 clients' CREATE_SESSION",
        n * 4,
        k.write_behind,
        fs.dev,
        if fs.direct_io() == Some(true) { "on" } else { "off" },
        counts.0,
        counts.1,
        counts.2,
        counts.3 as f64 / 1048576.0,
        owners.len()
    );
    let lost = if checked.report.is_empty() {
        None
    } else {
        // Everything that may tell whose loss it is: the files (above),
        // where their data is on the device, the kernel's log since the
        // round began, the device's and the filesystem's state, the
        // server's log.
        eprintln!(
            "{what}\nLOSS in round {r}: {} of {blocks} acknowledged blocks, {} of {names} names",
            checked.lost_blocks, checked.lost_names
        );
        for l in &checked.report {
            eprintln!("{l}");
        }
        for l in on_the_device(&fs, &export, &checked.lost) {
            eprintln!("{l}");
        }
        eprintln!("DMESG since the round began:");
        for (_, l) in dmesg().iter().filter(|l| l.0 > log_from) {
            eprintln!("  {l}");
        }
        eprintln!("STATE after the remount:\n{}", fs.state());
        // Both images kept: as the cut left it, and as replayed.
        let keep = Path::new("/tmp/rnfsd-crash-lost");
        let _ = std::fs::create_dir_all(keep);
        let (before, after) = (
            keep.join(format!("round-{r}-before-replay.img")),
            keep.join(format!("round-{r}-after-replay.img")),
        );
        // The first few lost rounds' only (512 MiB each, sparse).
        let kept = std::fs::read_dir(keep).map_or(0, |d| d.count());
        let moved = kept < 8 && std::fs::rename(&pre, &before).is_ok();
        let copied = moved
            && std::process::Command::new("cp")
                .args(["--sparse=always"])
                .arg(&fs.image)
                .arg(&after)
                .status()
                .is_ok_and(|s| s.success());
        eprintln!(
            "IMAGES: {} ({}), {} ({})",
            before.display(),
            if moved { "kept" } else { "not kept" },
            after.display(),
            if copied { "kept" } else { "not kept" }
        );
        let slog = std::fs::read_to_string(srv.state.path().join("server.log")).unwrap_or_default();
        let tail: Vec<&str> = slog.lines().rev().take(40).collect();
        eprintln!("SERVER LOG (last {} lines):", tail.len());
        for l in tail.iter().rev() {
            eprintln!("  {l}");
        }
        Some(format!(
            "{what}: lost {} of {blocks} blocks and {} of {names} names",
            checked.lost_blocks, checked.lost_names
        ))
    };
    assert!(
        ops > 0,
        "round {r}: nothing was acknowledged before the cut"
    );
    // After the restart the verifier differs: UNSTABLE writes from before
    // are resent by clients.
    srv.respawn();
    let s = mount(&srv).await;
    let verf = unstable_verf(&s.nfs, &s.root).await;
    assert!(
        !verfs.contains(&verf),
        "round {r}: the verifier did not change"
    );
    // The NFSv4.1 clients' records survived the cut: each may reclaim.
    let (records, lost_records) = reclaims(&srv, &owners, &verfs, k.keep_going).await;
    let lost = match (lost, lost_records.is_empty()) {
        (lost, true) => lost,
        (lost, false) => {
            eprintln!(
                "{what}\nLOSS in round {r}: {} of {records} client records",
                lost_records.len()
            );
            for l in &lost_records {
                eprintln!("{l}");
            }
            let more = format!(
                "{what}: lost {} of {records} client records",
                lost_records.len()
            );
            Some(lost.map_or(more.clone(), |l| format!("{l}; {more}")))
        }
    };
    eprintln!(
        "round {r} ({}): cut at {:?}: {ops} acknowledged operations ({ops4} NFSv4.1), {blocks} blocks, {names} names, {modes} modes and {records} client records checked",
        kind,
        at
    );
    if k.keep_going {
        eprintln!("  {what}");
    }
    srv.stop();
    lost
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_changes_survive_a_power_cut() {
    if common::skip("power-cut crash test", unavailable(&["xfs_io"])) {
        return;
    }
    let k = Knobs::from_env();
    let limit = Duration::from_secs(120);
    let mut failed = Vec::new();
    for r in k.first..k.first + k.rounds {
        if !k.keep_going {
            tokio::time::timeout(limit, round(r, k))
                .await
                .unwrap_or_else(|_| panic!("round {r} took over 120 s"));
            continue;
        }
        // Each round on its own task, so a round that panics (a mount
        // that fails, nothing acknowledged) is counted and the run goes on.
        let t = tokio::spawn(round(r, k));
        let abort = t.abort_handle();
        match tokio::time::timeout(limit, t).await {
            Ok(Ok(None)) => {}
            Ok(Ok(Some(lost))) => failed.push(lost),
            Ok(Err(e)) => {
                let why = match e.try_into_panic() {
                    Ok(p) => p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default(),
                    Err(e) => e.to_string(),
                };
                eprintln!("round {r} FAILED: {why}");
                failed.push(format!("round {r}: failed: {why}"));
            }
            Err(_) => {
                abort.abort();
                failed.push(format!("round {r}: took over 120 s"));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} rounds lost acknowledged changes or failed:\n{}",
        failed.len(),
        k.rounds,
        failed.join("\n")
    );
    if k.keep_going {
        eprintln!("rounds {}..{}: nothing lost", k.first, k.first + k.rounds);
    }
}

/// The journal commit is the server's own bookkeeping: a caller who may
/// change a directory but not the server's marker still gets its changes
/// made durable, and no error resets the write verifier.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_root_callers_changes_are_committed() {
    if common::skip(
        "journal commit as a non-root caller",
        unavailable(&["xfs_io"]),
    ) {
        return;
    }
    for xfs in [false, true] {
        let fs = if xfs {
            LoopFs::xfs("journal-user", 512)
        } else {
            LoopFs::new("journal-user", 256)
        };
        let export = fs.subdir("export");
        let sub = export.join("sub");
        std::fs::create_dir(&sub).unwrap();
        run("chown", &["1000:1000", sub.to_str().unwrap()]);
        let mut srv = TestServer::start_with(&export, &["--no-rpcbind"]);
        let s = mount(&srv).await;
        let user = s.nfs.with_auth(rnfsd_client::Auth::unix(1000, 1000));
        let d = lookup(&user, &s.root, "sub").await;
        let before = unstable_verf(&s.nfs, &s.root).await;
        let (f, _) = create_file(&user, &d, "f").await;
        let e = mkdir(&user, &d, "e").await;
        ok(
            "RENAME as uid 1000",
            user.rename(&Rename3Args {
                from: dirop(&d, "f"),
                to: dirop(&e, "g"),
            })
            .await,
        );
        ok(
            "SETATTR as uid 1000",
            user.setattr(&SetAttr3Args {
                object: f,
                new_attributes: sattr_mode(0o600),
                guard: None,
            })
            .await,
        );
        ok(
            "REMOVE as uid 1000",
            user.remove(&Remove3Args {
                object: dirop(&e, "g"),
            })
            .await,
        );
        let after = unstable_verf(&s.nfs, &s.root).await;
        assert_eq!(before, after, "xfs={xfs}: the write verifier was reset");
        srv.stop();
    }
}

/// The verifier an UNSTABLE WRITE to a scratch file (made on first use)
/// carries now.
async fn unstable_verf(nfs: &NfsClient, root: &NfsFh3) -> [u8; 8] {
    let fh = match nfs
        .lookup(&Lookup3Args {
            what: dirop(root, "scratch"),
        })
        .await
    {
        Ok(NfsRes::Ok(l)) => l.object,
        _ => create_file(nfs, root, "scratch").await.0,
    };
    let w = ok(
        "WRITE",
        nfs.write(&Write3Args {
            file: fh,
            offset: 0,
            count: 1,
            stable: StableHow::Unstable,
            data: vec![1],
        })
        .await,
    );
    w.verf.0
}

/// EXCLUSIVE create, WRITE and COMMIT of many files on an `async` export
/// on ext4 with fast commits (the shape of a build's `O_EXCL` opens and
/// fsyncs): a file made with `O_TMPFILE` there, then fsynced, leaves a
/// journal the kernel cannot replay. After the cut the filesystem must
/// mount again, and every COMMITted file hold its data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusive_creates_on_fast_commits_survive_a_power_cut() {
    if common::skip("fast-commit crash test", unavailable(&["xfs_io"])) {
        return;
    }
    if !fast_commit_rounds() {
        eprintln!("skipped: runs in the full crash run (RNFSD_CRASH_ROUNDS) only");
        return;
    }
    for r in 0..2u64 {
        let mut fs = LoopFs::ext4_fast_commit("crash-fc", 512);
        let export = fs.subdir("export");
        let mut srv = TestServer::start_with(&export, &["--no-rpcbind", "--async"]);
        let acked = Arc::new(Mutex::new(Acked::default()));
        let mut tasks = Vec::new();
        for k in 0..6u64 {
            let s = mount(&srv).await;
            let (nfs, root, a) = (s.nfs.clone(), s.root.clone(), acked.clone());
            tasks.push(tokio::spawn(async move {
                for n in 0u64.. {
                    let name = format!("x{k}_{n}");
                    let v = exclusive_verifier(n * 8 + k);
                    let made = nfs
                        .create(&Create3Args {
                            where_: dirop(&root, &name),
                            how: CreateHow3::Exclusive(Verf3(v)),
                        })
                        .await;
                    let Ok(NfsRes::Ok(Create3ResOk { obj: Some(fh), .. })) = made else {
                        return;
                    };
                    let id = file_id(&name);
                    let w = nfs
                        .write(&Write3Args {
                            file: fh.clone(),
                            offset: 0,
                            count: BLOCK as u32,
                            stable: StableHow::Unstable,
                            data: block(id, 0, 1),
                        })
                        .await;
                    let Ok(NfsRes::Ok(w)) = w else { return };
                    let c = nfs
                        .commit(&Commit3Args {
                            file: fh,
                            offset: 0,
                            count: 0,
                        })
                        .await;
                    let Ok(NfsRes::Ok(c)) = c else { return };
                    let mut a = a.lock().unwrap();
                    if a.cutting {
                        return;
                    }
                    if c.verf == w.verf {
                        a.blocks.insert((name, 0), 1);
                    }
                    a.ops += 1;
                }
            }));
        }
        tokio::time::sleep(moment(r + 100)).await;
        power_cut(&mut fs, None, &mut srv, &acked, tasks, None).await;
        let a = acked.lock().unwrap();
        assert!(
            a.ops > 0,
            "round {r}: nothing was acknowledged before the cut"
        );
        let blocks = verify(&export, &a, false).blocks;
        eprintln!(
            "fast commits, async, EXCLUSIVE creates: round {r}: {} files COMMITted, {blocks} blocks checked",
            a.ops
        );
    }
}
