//! Fuzzer inputs as ordinary tests (no libFuzzer, no special flags): every
//! file under fuzz/seeds/dispatch and fuzz/regressions/dispatch is fed to
//! `rnfsd::rpc::dispatch` over a real `LocalFs` export, laid out exactly as
//! the `dispatch` fuzz target reads it (fuzz/fuzz_targets/dispatch.rs), and
//! the reply checked the same way. A crash the fuzzer finds is saved under
//! fuzz/regressions/dispatch/ and so stays covered by `cargo test`.
//!
//! The 10-minute fuzzing runs recorded in docs/fuzzing.md found no crash, so
//! the regressions directory is empty for now; the seeds still exercise
//! every NFSv3, MOUNT and port mapper procedure through this path.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::TempDir;
use rnfsd::access::ExportAccess;
use rnfsd::drc::{Drc, DrcConfig};
use rnfsd::programs::mount::MOUNT;
use rnfsd::programs::nfs3::NFS3;
use rnfsd::programs::portmap::PORTMAP;
use rnfsd::rpc::dispatch::{dispatch, Policy};
use rnfsd::rpc::Program;
use rnfsd::state::{Export, Server};
use rnfsd_fs::local::{HandleMode, LocalFs, LocalOptions};
use rnfsd_proto::rpc::{AcceptStat, AuthSys, ReplyHeader, AUTH_NONE, AUTH_SYS, MSG_CALL};
use rnfsd_proto::{mount, nfs3};
use rnfsd_xdr::{Dec, Enc, Xdr};

struct Env {
    _dir: TempDir,
    server: Server,
    drc: Drc,
    root_fh: Vec<u8>,
    peer: SocketAddr,
    local: SocketAddr,
}

fn call(prog: u32, vers: u32, proc_: u32, sys: bool, uid: u32, args: &[u8]) -> Vec<u8> {
    let mut e = Enc::new();
    for w in [0x0102_0304, MSG_CALL, 2, prog, vers, proc_] {
        e.u32(w);
    }
    if sys {
        e.u32(AUTH_SYS);
        e.opaque(&rnfsd_xdr::to_vec(&AuthSys {
            stamp: 1,
            machine_name: b"fuzz".to_vec(),
            uid,
            gid: uid,
            gids: vec![uid, 100],
        }));
    } else {
        e.u32(AUTH_NONE);
        e.u32(0);
    }
    e.u32(AUTH_NONE);
    e.u32(0);
    e.raw(args);
    e.into_vec()
}

fn env() -> Env {
    let dir = TempDir::new("hostile-regress");
    let path = dir.path().to_str().expect("utf-8").to_owned();
    let opts = LocalOptions {
        handle_mode: HandleMode::Auto,
        handle_key: [7; 32],
        ..LocalOptions::default()
    };
    let fs = LocalFs::open(dir.path(), 1, opts).expect("open export");
    let server = Server {
        exports: vec![Export::new(
            1,
            path.clone(),
            Arc::new(fs),
            ExportAccess::allow_all(false),
        )],
        write_verifier: [1; 8],
        max_io: 1 << 20,
    };
    let mut env = Env {
        _dir: dir,
        server,
        drc: Drc::new(DrcConfig::default()),
        root_fh: Vec::new(),
        peer: "127.0.0.1:700".parse().expect("addr"),
        local: "127.0.0.1:2049".parse().expect("addr"),
    };
    let rec = call(
        mount::PROGRAM,
        3,
        mount::PROC_MNT,
        true,
        0,
        &rnfsd_xdr::to_vec(&mount::DirPath(path.into_bytes())),
    );
    let r = run(&env, &[&NFS3, &MOUNT], Policy::default(), &rec).expect("MNT reply");
    let mut d = Dec::new(&r[4..]);
    ReplyHeader::decode(&mut d).expect("MNT header");
    match mount::MountRes3::decode(&mut d).expect("MNT result") {
        mount::MountRes3::Ok { fhandle, .. } => env.root_fh = fhandle.0,
        mount::MountRes3::Err(e) => panic!("MNT failed: {e:?}"),
    }
    env
}

fn run(env: &Env, progs: &[&Program], policy: Policy, rec: &[u8]) -> Option<Vec<u8>> {
    dispatch(
        &env.server,
        progs,
        &policy,
        Some(&env.drc),
        rec,
        env.peer,
        env.local,
    )
}

/// One fuzz input, as the `dispatch` target reads it. Returns the reply
/// header when there was a reply.
fn feed(env: &Env, data: &[u8]) -> Option<ReplyHeader> {
    let (&flags, rest) = data.split_first()?;
    let policy = Policy {
        allow_auth_none: flags & 1 != 0,
    };
    let progs: &[&Program] = if flags & 8 != 0 {
        &[&PORTMAP]
    } else {
        &[&NFS3, &MOUNT]
    };
    let owned;
    let rec: &[u8] = if flags & 2 != 0 {
        let [p, v, pr, u, args @ ..] = rest else {
            return None;
        };
        let prog = [nfs3::NFS_PROGRAM, mount::PROGRAM, 100000][*p as usize % 3];
        let uid = if *u == 0 { 0 } else { 1000 + *u as u32 };
        let mut a = Vec::new();
        if flags & 4 != 0 {
            a.extend(rnfsd_xdr::to_vec(&nfs3::NfsFh3::new(env.root_fh.clone())));
        }
        a.extend_from_slice(args);
        owned = call(prog, *v as u32, *pr as u32, flags & 16 == 0, uid, &a);
        &owned
    } else {
        rest
    };
    let reply = run(env, progs, policy, rec)?;
    assert!(
        reply.len() >= 4 && reply[..4] == [0; 4],
        "record mark bytes"
    );
    let mut d = Dec::new(&reply[4..]);
    let (xid, h) = ReplyHeader::decode(&mut d).expect("reply header decodes");
    assert_eq!(Some(xid), rnfsd_proto::rpc::peek_xid(rec));
    if h != ReplyHeader::Accepted(AcceptStat::Success) {
        assert_eq!(d.remaining(), 0, "error reply with a body");
        return Some(h);
    }
    let mut hd = Dec::new(rec);
    let words: Vec<u32> = (0..6).map_while(|_| hd.u32().ok()).collect();
    let [_, _, _, prog, vers, proc_] = words[..] else {
        panic!("SUCCESS for a call without a full header");
    };
    let p = progs
        .iter()
        .find(|p| p.prog == prog)
        .and_then(|p| p.versions.iter().find(|v| v.vers == vers))
        .and_then(|v| v.procs.get(proc_ as usize))
        .expect("SUCCESS for an unknown procedure");
    assert!(
        d.remaining() <= p.max_reply,
        "{} reply body {} > max_reply {}",
        p.name,
        d.remaining(),
        p.max_reply
    );
    Some(h)
}

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.is_file());
    v.sort();
    v
}

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// Set by any panic, even one dispatch catches and answers SYSTEM_ERR.
static PANICKED: AtomicBool = AtomicBool::new(false);

#[test]
fn dispatch_seeds_and_regressions() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICKED.store(true, Ordering::SeqCst);
        default(info)
    }));
    let env = env();
    let seeds = inputs(&fuzz_dir().join("seeds/dispatch"));
    assert!(seeds.len() >= 40, "dispatch seeds missing: {}", seeds.len());
    let mut successes = 0;
    for p in seeds
        .iter()
        .chain(&inputs(&fuzz_dir().join("regressions/dispatch")))
    {
        let data = std::fs::read(p).expect("read input");
        if feed(&env, &data) == Some(ReplyHeader::Accepted(AcceptStat::Success)) {
            successes += 1;
        }
    }
    // The seeds are valid calls of every procedure: most must succeed at the
    // RPC level (an NFS error status is still an RPC SUCCESS).
    assert!(successes * 2 > seeds.len(), "only {successes} successes");
    assert!(!PANICKED.load(Ordering::SeqCst), "a handler panicked");
}
