//! Start the real binary and talk raw RPC to it over a plain TcpStream:
//! NFS NULL, MOUNT MNT/EXPORT/DUMP/UMNT, RPC-level errors, clean SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rnfsd_proto::mount::{DirPath, Exports, MountList, MountRes3, MountStat3};
use rnfsd_proto::portmap::{Mapping, PmapList};
use rnfsd_proto::rpc::{
    AcceptStat, AuthStat, AuthSys, CallHeader, OpaqueAuth, RejectStat, ReplyHeader, AUTH_SYS,
};
use rnfsd_xdr::{Dec, Enc, Xdr};

struct Server {
    child: Child,
    port: u16,
    line: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(args: &[&str], port_file: &Path) -> Result<Server, String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rnfsd"))
        .arg("serve")
        .args(args)
        .arg("--port-file")
        .arg(port_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    // The start line is printed once the listeners are bound.
    let out = child.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(out).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(l) if !l.is_empty() => l,
        _ => {
            let _ = child.kill();
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            let _ = child.wait();
            return Err(format!("server did not start: {err}"));
        }
    };
    let port = std::fs::read_to_string(port_file)
        .map_err(|e| e.to_string())
        .and_then(|t| t.trim().parse::<u16>().map_err(|e| e.to_string()));
    let port = match port {
        Ok(p) => p,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("port file: {e}"));
        }
    };
    Ok(Server { child, port, line })
}

fn sys_cred() -> Vec<u8> {
    rnfsd_xdr::to_vec(&AuthSys {
        stamp: 1,
        machine_name: b"smoke".to_vec(),
        uid: 0,
        gid: 0,
        gids: vec![],
    })
}

/// Send one call, return (reply header, result bytes).
fn call(
    s: &mut TcpStream,
    xid: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    sys: bool,
    args: &[u8],
) -> (ReplyHeader, Vec<u8>) {
    let cred = sys_cred();
    let mut e = Enc::new();
    e.u32(0);
    CallHeader {
        xid,
        rpcvers: 2,
        prog,
        vers,
        proc_,
        cred: if sys {
            OpaqueAuth {
                flavor: AUTH_SYS,
                body: &cred,
            }
        } else {
            OpaqueAuth::NONE
        },
        verf: OpaqueAuth::NONE,
    }
    .encode(&mut e);
    e.raw(args);
    let n = e.len() as u32 - 4;
    e.patch_u32(0, 0x8000_0000 | n);
    s.write_all(e.as_slice()).unwrap();
    let mut mark = [0u8; 4];
    s.read_exact(&mut mark).unwrap();
    let m = u32::from_be_bytes(mark);
    assert!(m & 0x8000_0000 != 0, "single-fragment reply");
    let mut rec = vec![0; (m & 0x7fff_ffff) as usize];
    s.read_exact(&mut rec).unwrap();
    let mut d = Dec::new(&rec);
    let (rxid, h) = ReplyHeader::decode(&mut d).unwrap();
    assert_eq!(rxid, xid);
    (h, d.rest().to_vec())
}

const OK: ReplyHeader = ReplyHeader::Accepted(AcceptStat::Success);

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port))).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

fn stop(mut srv: Server) {
    // SAFETY: kill(2) on our own child's pid.
    let r = unsafe { libc::kill(srv.child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(r, 0);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(st) = srv.child.try_wait().unwrap() {
            assert!(st.success(), "exit status after SIGTERM: {st:?}");
            return;
        }
        assert!(Instant::now() < deadline, "server did not exit on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn serve_null_mount_and_shutdown() {
    let export = tempfile::tempdir().unwrap();
    std::fs::create_dir(export.path().join("sub")).unwrap();
    let state = tempfile::tempdir().unwrap();
    let pf = state.path().join("port");
    let canon: PathBuf = std::fs::canonicalize(export.path()).unwrap();
    let srv = start(
        &[
            export.path().to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--no-rpcbind",
            // The test's sockets use ordinary ports.
            "--insecure",
            "--state-dir",
            state.path().to_str().unwrap(),
            "--log-level",
            "warn",
        ],
        &pf,
    )
    .unwrap();
    assert!(
        srv.line.starts_with(&format!(
            "rnfsd: serving {} on 127.0.0.1:{} (nfs v3, mount v3",
            canon.display(),
            srv.port
        )),
        "start line: {}",
        srv.line
    );
    assert!(state.path().join("handle.key").exists());

    let mut s = connect(srv.port);
    // NFS NULL, with AUTH_NONE and with AUTH_SYS.
    assert_eq!(call(&mut s, 1, 100003, 3, 0, false, &[]), (OK, vec![]));
    assert_eq!(call(&mut s, 2, 100003, 3, 0, true, &[]), (OK, vec![]));
    // MOUNT NULL on the same port.
    assert_eq!(call(&mut s, 3, 100005, 3, 0, false, &[]), (OK, vec![]));
    // NFSv2 is not served; NFSv3 and NFSv4 are.
    assert_eq!(
        call(&mut s, 4, 100003, 2, 0, true, &[]).0,
        ReplyHeader::Accepted(AcceptStat::ProgMismatch { low: 3, high: 4 })
    );
    // MNT the export and a subdirectory.
    let path = canon.to_str().unwrap();
    let mnt = |s: &mut TcpStream, xid, p: &str| {
        let (h, body) = call(
            s,
            xid,
            100005,
            3,
            1,
            true,
            &rnfsd_xdr::to_vec(&DirPath(p.as_bytes().to_vec())),
        );
        assert_eq!(h, OK);
        rnfsd_xdr::from_slice::<MountRes3>(&body).unwrap()
    };
    let root = match mnt(&mut s, 5, path) {
        MountRes3::Ok {
            fhandle,
            auth_flavors,
        } => {
            assert_eq!(auth_flavors, vec![AUTH_SYS]);
            assert!(!fhandle.0.is_empty() && fhandle.0.len() <= 64);
            fhandle
        }
        e => panic!("MNT failed: {e:?}"),
    };
    match mnt(&mut s, 6, &format!("{path}/sub")) {
        MountRes3::Ok { fhandle, .. } => assert_ne!(fhandle, root),
        e => panic!("MNT sub failed: {e:?}"),
    }
    assert_eq!(
        mnt(&mut s, 7, "/definitely/not/exported"),
        MountRes3::Err(MountStat3::NoEnt)
    );
    // The root handle works for NFS GETATTR (proc 1): status NFS3_OK.
    let (h, body) = call(&mut s, 8, 100003, 3, 1, true, &rnfsd_xdr::to_vec(&root));
    assert_eq!(h, OK);
    assert_eq!(&body[..4], &[0, 0, 0, 0], "GETATTR of the root: NFS3_OK");

    // EXPORT answers AUTH_NONE; MNT with AUTH_NONE is too weak.
    let (h, body) = call(&mut s, 9, 100005, 3, 5, false, &[]);
    assert_eq!(h, OK);
    let ex = rnfsd_xdr::from_slice::<Exports>(&body).unwrap();
    assert_eq!(ex.0.len(), 1);
    assert_eq!(ex.0[0].dir.0, path.as_bytes());
    let (h, _) = call(
        &mut s,
        10,
        100005,
        3,
        1,
        false,
        &rnfsd_xdr::to_vec(&DirPath(path.as_bytes().to_vec())),
    );
    assert_eq!(
        h,
        ReplyHeader::Denied(RejectStat::AuthError(AuthStat::TooWeak))
    );

    // DUMP lists our mounts; UMNTALL clears them.
    let (h, body) = call(&mut s, 11, 100005, 3, 2, true, &[]);
    assert_eq!(h, OK);
    let dump = rnfsd_xdr::from_slice::<MountList>(&body).unwrap();
    assert_eq!(dump.0.len(), 2);
    assert!(dump.0.iter().all(|m| m.hostname.0 == b"127.0.0.1"));
    assert_eq!(call(&mut s, 12, 100005, 3, 4, true, &[]), (OK, vec![]));
    let (_, body) = call(&mut s, 13, 100005, 3, 2, true, &[]);
    assert!(rnfsd_xdr::from_slice::<MountList>(&body)
        .unwrap()
        .0
        .is_empty());

    // The port mapper is not served on the NFS port.
    assert_eq!(
        call(&mut s, 14, 100000, 2, 0, false, &[]).0,
        ReplyHeader::Accepted(AcceptStat::ProgUnavail)
    );
    drop(s);
    stop(srv);
}

#[test]
fn handles_survive_a_restart() {
    let export = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let pf = state.path().join("port");
    let path = std::fs::canonicalize(export.path()).unwrap();
    let args = [
        export.path().to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--no-rpcbind",
        "--insecure",
        "--state-dir",
        state.path().to_str().unwrap(),
        "--log-level",
        "warn",
    ];
    let mnt = |port| {
        let mut s = connect(port);
        let (h, body) = call(
            &mut s,
            1,
            100005,
            3,
            1,
            true,
            &rnfsd_xdr::to_vec(&DirPath(path.to_str().unwrap().as_bytes().to_vec())),
        );
        assert_eq!(h, OK);
        rnfsd_xdr::from_slice::<MountRes3>(&body).unwrap()
    };
    let srv = start(&args, &pf).unwrap();
    let first = mnt(srv.port);
    stop(srv);
    let _ = std::fs::remove_file(&pf);
    let srv = start(&args, &pf).unwrap();
    let second = mnt(srv.port);
    stop(srv);
    assert!(matches!(first, MountRes3::Ok { .. }));
    assert_eq!(first, second);
}

#[test]
fn config_errors_exit_2_with_a_message() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("c.toml");
    std::fs::write(&f, "[server]\nlisten_addr = \"x\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rnfsd"))
        .args(["serve", "--config", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown field") && err.contains("listen_addr"),
        "{err}"
    );

    std::fs::write(
        &f,
        format!(
            "[[export]]\npath = \"{}\"\nsecure = false\n",
            d.path().display()
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rnfsd"))
        .args(["check-config", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A server with `--portmap` listening on `ip`, with its export and state
/// directories; None (with a message) without root or with port 111 busy.
fn start_portmap(ip: &str) -> Option<(Server, tempfile::TempDir, tempfile::TempDir)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to bind port 111");
        return None;
    }
    let export = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let pf = state.path().join("port");
    let listen = format!("{ip}:0");
    match start(
        &[
            export.path().to_str().unwrap(),
            "--listen",
            &listen,
            "--portmap",
            "--state-dir",
            state.path().to_str().unwrap(),
            "--log-level",
            "warn",
        ],
        &pf,
    ) {
        Ok(s) => Some((s, export, state)),
        Err(e) if e.contains("in use") => {
            eprintln!("skipped: port 111 busy: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// `--portmap` binds port 111: needs root and a free port 111, so it is
/// skipped (with a message) where either is missing.
#[test]
fn builtin_portmapper_answers_getport_and_dump() {
    // A loopback address of its own, so a system rpcbind on 127.0.0.1 does
    // not collide with it unless it holds the wildcard.
    let Some((srv, _export, _state)) = start_portmap("127.0.0.3") else {
        return;
    };
    let mut s = TcpStream::connect("127.0.0.3:111").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let q = |prog, vers| {
        rnfsd_xdr::to_vec(&Mapping {
            prog,
            vers,
            prot: 6,
            port: 0,
        })
    };
    let (h, body) = call(&mut s, 1, 100000, 2, 3, false, &q(100003, 3));
    assert_eq!(h, OK);
    assert_eq!(
        u32::decode(&mut Dec::new(&body)).unwrap(),
        u32::from(srv.port)
    );
    let (_, body) = call(&mut s, 2, 100000, 2, 3, false, &q(100005, 3));
    assert_eq!(
        u32::decode(&mut Dec::new(&body)).unwrap(),
        u32::from(srv.port)
    );
    // The lock manager shares the NFS port; an unknown program has none.
    let (_, body) = call(&mut s, 3, 100000, 2, 3, false, &q(100021, 4));
    assert_eq!(
        u32::decode(&mut Dec::new(&body)).unwrap(),
        u32::from(srv.port)
    );
    let (_, body) = call(&mut s, 3, 100000, 2, 3, false, &q(100099, 1));
    assert_eq!(u32::decode(&mut Dec::new(&body)).unwrap(), 0);
    let (h, body) = call(&mut s, 4, 100000, 2, 4, false, &[]);
    assert_eq!(h, OK);
    let l = rnfsd_xdr::from_slice::<PmapList>(&body).unwrap();
    assert!(l.0.contains(&Mapping {
        prog: 100000,
        vers: 2,
        prot: 6,
        port: 111
    }));
    assert!(l
        .0
        .iter()
        .any(|m| m.prog == 100003 && m.port == u32::from(srv.port)));
    // SET is refused.
    let (_, body) = call(&mut s, 5, 100000, 2, 1, false, &q(100021, 4));
    assert_eq!(body, [0, 0, 0, 0]);
    drop(s);
    stop(srv);
}

/// Run `cmd` with `args`, killed after 20 s (`timeout(1)`); its stdout,
/// or why it failed.
fn run_bounded(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new("timeout")
        .arg("20")
        .arg(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd} {args:?}: {}: {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `--portmap` answers over UDP as well (one datagram per call): a hand
/// built PMAP GETPORT datagram, `rpcinfo -u`, and `rpcinfo -p` listing
/// the UDP entries. Root only, like the test above.
#[test]
fn builtin_portmapper_answers_over_udp() {
    // Its own loopback address (not the test above's): both may run at once.
    let Some((srv, _export, _state)) = start_portmap("127.0.0.7") else {
        return;
    };
    let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    u.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let pm: SocketAddr = "127.0.0.7:111".parse().unwrap();
    // GETPORT over UDP: retransmitted as a UDP client does (bounded).
    let getport = |xid: u32, prog: u32, vers: u32, prot: u32| -> u32 {
        let mut e = Enc::new();
        CallHeader {
            xid,
            rpcvers: 2,
            prog: 100000,
            vers: 2,
            proc_: 3,
            cred: OpaqueAuth::NONE,
            verf: OpaqueAuth::NONE,
        }
        .encode(&mut e);
        e.raw(&rnfsd_xdr::to_vec(&Mapping {
            prog,
            vers,
            prot,
            port: 0,
        }));
        let mut buf = [0u8; 1024];
        for _ in 0..5 {
            u.send_to(e.as_slice(), pm).unwrap();
            let Ok((n, from)) = u.recv_from(&mut buf) else {
                continue;
            };
            assert_eq!(from, pm);
            let mut d = Dec::new(&buf[..n]);
            let (rxid, h) = ReplyHeader::decode(&mut d).unwrap();
            assert_eq!((rxid, h), (xid, OK));
            return u32::decode(&mut d).unwrap();
        }
        panic!("no UDP reply from {pm}");
    };
    assert_eq!(getport(1, 100003, 3, 6), u32::from(srv.port));
    assert_eq!(getport(2, 100000, 2, 17), 111);
    // NFS is not served over UDP, so not mapped there.
    assert_eq!(getport(3, 100003, 3, 17), 0);

    let null = run_bounded("rpcinfo", &["-u", "127.0.0.7", "100000", "2"]).unwrap();
    assert!(null.contains("ready and waiting"), "{null}");
    let dump = run_bounded("rpcinfo", &["-p", "127.0.0.7"]).unwrap();
    let has = |prog: &str, vers: &str, proto: &str, port: &str| {
        dump.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() >= 4 && w[..4] == [prog, vers, proto, port]
        })
    };
    let nfs_port = srv.port.to_string();
    assert!(has("100000", "2", "udp", "111"), "{dump}");
    assert!(has("100000", "2", "tcp", "111"), "{dump}");
    assert!(has("100003", "3", "tcp", &nfs_port), "{dump}");
    assert!(!has("100003", "3", "udp", &nfs_port), "{dump}");
    stop(srv);
}
