//! The `dispatch` fuzz target's harness: the export, the input layout and
//! the checks on every reply. Shared by the fuzz target and by
//! crates/rnfsd/tests/it/hostile_regressions.rs (both include this file by
//! path), so a saved input replays exactly as the fuzzer ran it.
//!
//! Input: byte 0 is a flags byte.
//! - bit 0: policy allows AUTH_NONE.
//! - bit 1: structured: bytes 1..5 are (program, version, procedure, uid)
//!   selectors and the rest the arguments, behind a valid header with an
//!   AUTH_SYS credential (AUTH_NONE if bit 4). Otherwise the rest is a raw
//!   record.
//! - bit 2 (structured): put the export's root handle before the arguments
//!   (nearly every NFS procedure starts with a handle).
//! - bit 3: dispatch to the port mapper table instead of NFS + MOUNT.
//!
//! Checked on every reply: the 4 record-mark bytes are reserved, the reply
//! header decodes and carries the call's xid, a SUCCESS body stays within the
//! procedure's declared `max_reply`, and (v3) decodes as the RFC result type.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use rnfsd::access::ExportAccess;
use rnfsd::programs::mount::MOUNT;
use rnfsd::programs::nfs3::NFS3;
use rnfsd::programs::nfs4::NFS4;
use rnfsd::programs::portmap::PORTMAP;
use rnfsd::programs::Program;
use rnfsd::state::nfs4::Nfs4;
use rnfsd::state::{Export, Server};
use rnfsd_fs::local::{HandleMode, LocalFs, LocalOptions};
use rnfsd_proto::rpc::{AcceptStat, AuthSys, ReplyHeader, AUTH_NONE, AUTH_SYS, MSG_CALL};
use rnfsd_proto::{mount, nfs3};
use rnfsd_rpc::{Drc, DrcConfig, Policy, RpcService};
use rnfsd_xdr::{Dec, Enc, Xdr};

/// A server with one `LocalFs` export and the root handle MNT gave, and
/// its services: NFS + MOUNT and the port mapper, each under both
/// AUTH_NONE policies, sharing one duplicate reply cache.
pub struct Env {
    /// [NFS + MOUNT, port mapper] × [AUTH_NONE refused, allowed].
    services: [[RpcService<Server>; 2]; 2],
    root_fh: Vec<u8>,
    peer: SocketAddr,
    local: SocketAddr,
}

impl Env {
    /// Export `dir` (canonical, UTF-8) and MNT it as a client would.
    pub fn new(dir: &Path) -> Env {
        let path = dir.to_str().expect("utf-8 export dir").to_owned();
        // A fixed key: handles in the corpus stay valid from run to run.
        let opts = LocalOptions {
            handle_mode: HandleMode::Auto,
            handle_key: [7; 32],
            ..LocalOptions::default()
        };
        let fs = LocalFs::open(dir, 1, opts).expect("open export");
        let server = Arc::new(Server::new(
            vec![Export::new(
                1,
                path.clone(),
                Arc::new(fs),
                ExportAccess::allow_all(false),
            )],
            Arc::new(rnfsd_fs::WriteVerifier::new([1; 8])),
            1 << 20,
            // READ data copied: the reply is all bytes, for the checks.
            None,
        ));
        // NFSv4.1 with its state in memory (no records), minor version 2
        // off so every reply decodes with the 4.1 types.
        let v4 =
            rnfsd_v4state::State::new(rnfsd_v4state::Config::default(), 1).expect("NFSv4 state");
        server.set_nfs4(Arc::new(Nfs4::new(
            v4,
            &server.exports(),
            false,
            rnfsd::state::idmap::IdMap::numeric(),
            None,
            None,
        )));
        let drc = Arc::new(Drc::new(DrcConfig::default()));
        let svc = |progs: Vec<&'static Program>, allow_auth_none| {
            RpcService::new(server.clone(), progs, Policy { allow_auth_none })
                .with_drc(Some(drc.clone()))
        };
        let mut env = Env {
            services: [
                [
                    svc(vec![&NFS3, &NFS4, &MOUNT], false),
                    svc(vec![&NFS3, &NFS4, &MOUNT], true),
                ],
                [svc(vec![&PORTMAP], false), svc(vec![&PORTMAP], true)],
            ],
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
        let r = env.run(false, false, &rec).expect("MNT reply");
        let mut d = Dec::new(&r[4..]);
        let _ = ReplyHeader::decode(&mut d).expect("MNT header");
        match mount::MountRes3::decode(&mut d).expect("MNT result") {
            mount::MountRes3::Ok { fhandle, .. } => env.root_fh = fhandle.0,
            mount::MountRes3::Err(e) => panic!("MNT failed: {e:?}"),
        }
        env
    }

    /// The record planned and answered as over TCP (`RpcService::answer`).
    fn run(&self, portmap: bool, allow_auth_none: bool, rec: &[u8]) -> Option<Vec<u8>> {
        self.services[usize::from(portmap)][usize::from(allow_auth_none)]
            .answer(rec, self.peer, self.local)
            .map(|r| r.buf)
    }

    fn programs(&self, portmap: bool) -> &[&'static Program] {
        self.services[usize::from(portmap)][0].programs()
    }
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

/// One input. Returns the reply header when there was a reply; panics on
/// a reply that breaks any of the checks above.
pub fn feed(env: &Env, data: &[u8]) -> Option<ReplyHeader> {
    let (&flags, rest) = data.split_first()?;
    let allow_auth_none = flags & 1 != 0;
    let portmap = flags & 8 != 0;
    let progs = env.programs(portmap);
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
    let reply = env.run(portmap, allow_auth_none, rec)?;
    assert!(
        reply.len() >= 4 && reply[..4] == [0; 4],
        "record mark bytes not reserved"
    );
    let mut d = Dec::new(&reply[4..]);
    let (xid, h) = ReplyHeader::decode(&mut d).expect("reply header decodes");
    assert_eq!(Some(xid), rnfsd_proto::rpc::peek_xid(rec), "reply xid");
    if h != ReplyHeader::Accepted(AcceptStat::Success) {
        assert_eq!(d.remaining(), 0, "error reply with a body");
        return Some(h);
    }
    // Which procedure ran: the header words after xid and msg type.
    let mut hd = Dec::new(rec);
    let words: Vec<u32> = (0..6).map_while(|_| hd.u32().ok()).collect();
    let [_, _, _, prog, vers, proc_] = words[..] else {
        panic!("SUCCESS for a call without a full header");
    };
    let p = progs
        .iter()
        .filter(|p| p.prog == prog)
        .find_map(|p| p.versions.iter().find(|v| v.vers == vers))
        .and_then(|v| v.procs.get(proc_ as usize))
        .expect("SUCCESS for an unknown procedure");
    let body = d.rest();
    assert!(
        body.len() <= p.max_reply,
        "{} reply body {} bytes > max_reply {}",
        p.name,
        body.len(),
        p.max_reply
    );
    check_result(prog, vers, proc_, body);
    Some(h)
}

/// Decode a v3 SUCCESS body as its RFC result type; it must use it all.
fn check_result(prog: u32, vers: u32, proc_: u32, body: &[u8]) {
    fn full<T: Xdr + std::fmt::Debug>(b: &[u8], what: &str) {
        if let Err(e) = rnfsd_xdr::from_slice::<T>(b) {
            panic!("{what} result does not decode ({e:?}): {b:02x?}");
        }
    }
    use nfs3::*;
    match (prog, vers) {
        (NFS_PROGRAM, 3) => match proc_ {
            0 => full::<()>(body, "NULL"),
            1 => full::<GetAttr3Res>(body, "GETATTR"),
            2 => full::<SetAttr3Res>(body, "SETATTR"),
            3 => full::<Lookup3Res>(body, "LOOKUP"),
            4 => full::<Access3Res>(body, "ACCESS"),
            5 => full::<ReadLink3Res>(body, "READLINK"),
            6 => full::<Read3Res>(body, "READ"),
            7 => full::<Write3Res>(body, "WRITE"),
            8 => full::<Create3Res>(body, "CREATE"),
            9 => full::<Mkdir3Res>(body, "MKDIR"),
            10 => full::<Symlink3Res>(body, "SYMLINK"),
            11 => full::<Mknod3Res>(body, "MKNOD"),
            12 => full::<Remove3Res>(body, "REMOVE"),
            13 => full::<Rmdir3Res>(body, "RMDIR"),
            14 => full::<Rename3Res>(body, "RENAME"),
            15 => full::<Link3Res>(body, "LINK"),
            16 => full::<ReadDir3Res>(body, "READDIR"),
            17 => full::<ReadDirPlus3Res>(body, "READDIRPLUS"),
            18 => full::<FsStat3Res>(body, "FSSTAT"),
            19 => full::<FsInfo3Res>(body, "FSINFO"),
            20 => full::<PathConf3Res>(body, "PATHCONF"),
            21 => full::<Commit3Res>(body, "COMMIT"),
            _ => {}
        },
        (NFS_PROGRAM, 4) => match proc_ {
            0 => full::<()>(body, "NULL"),
            1 => {
                let r = rnfsd_proto::nfs4::CompoundRes::decode(&mut Dec::new(body), 1024, 1 << 16);
                match r {
                    Ok(_) => {}
                    Err(e) => panic!("COMPOUND result does not decode ({e:?}): {body:02x?}"),
                }
            }
            _ => {}
        },
        (mount::PROGRAM, 3) => match proc_ {
            1 => full::<mount::MountRes3>(body, "MNT"),
            2 => full::<mount::MountList>(body, "DUMP"),
            0 | 3 | 4 => full::<()>(body, "MOUNT void"),
            5 => full::<mount::Exports>(body, "EXPORT"),
            _ => {}
        },
        _ => {}
    }
}
