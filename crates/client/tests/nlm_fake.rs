//! NlmClient and NsmClient against a fake lock manager / status monitor:
//! every procedure reaches the server with its program, version, number
//! and arguments, and one-way calls return without a reply.

use std::net::SocketAddr;
use std::time::Duration;

use rnfsd_client::nlm::*;
use rnfsd_client::nsm::{self, Mon, MonId, MyId, SmPriv, SmRes, SmStat, SmStatRes, SmString};
use rnfsd_client::record::{encode_fragments, read_record};
use rnfsd_client::{ClientConfig, NlmClient, NsmClient};
use rnfsd_proto::rpc::{encode_accepted, AcceptStat, CallHeader, Incoming};
use rnfsd_xdr::{Dec, Enc, Xdr};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(10);

fn lock() -> Nlm4Lock {
    Nlm4Lock {
        caller_name: CallerName(b"client".to_vec()),
        fh: NetObj(vec![7; 16]),
        oh: NetObj(b"42@client".to_vec()),
        svid: 42,
        l_offset: 1 << 40,
        l_len: 0,
    }
}

fn cookie() -> NetObj {
    NetObj(vec![1, 2, 3, 4])
}

/// Decode the arguments of one call and write its results; `false` for a
/// one-way call that gets no reply. Panics (failing the test) on arguments
/// that are not what the client was asked to send.
fn handle(prog: u32, proc_: u32, d: &mut Dec<'_>, e: &mut Enc) -> bool {
    let res = |stat| Nlm4Res {
        cookie: cookie(),
        stat,
    };
    let rest = d.rest();
    match (prog, proc_) {
        (PROGRAM, PROC_NULL) | (nsm::PROGRAM, nsm::PROC_NULL) => {}
        (PROGRAM, PROC_TEST) => {
            let a = rnfsd_xdr::from_slice::<Nlm4TestArgs>(rest).unwrap();
            assert_eq!(a.alock, lock());
            Nlm4TestRes {
                cookie: a.cookie,
                stat: Nlm4TestRply::Denied(Nlm4Holder {
                    exclusive: true,
                    svid: 9,
                    oh: NetObj(b"other".to_vec()),
                    l_offset: 0,
                    l_len: 0,
                }),
            }
            .encode(e);
        }
        (PROGRAM, PROC_LOCK) | (PROGRAM, PROC_NM_LOCK) => {
            let a = rnfsd_xdr::from_slice::<Nlm4LockArgs>(rest).unwrap();
            assert!(a.block && a.exclusive && !a.reclaim);
            assert_eq!((a.alock, a.state), (lock(), 3));
            res(Nlm4Stats::Blocked).encode(e);
        }
        (PROGRAM, PROC_CANCEL) => {
            let a = rnfsd_xdr::from_slice::<Nlm4CancArgs>(rest).unwrap();
            assert_eq!(a.alock, lock());
            res(Nlm4Stats::Granted).encode(e);
        }
        (PROGRAM, PROC_UNLOCK) => {
            let a = rnfsd_xdr::from_slice::<Nlm4UnlockArgs>(rest).unwrap();
            assert_eq!(a.alock, lock());
            res(Nlm4Stats::Granted).encode(e);
        }
        (PROGRAM, PROC_GRANTED) => {
            rnfsd_xdr::from_slice::<Nlm4TestArgs>(rest).unwrap();
            res(Nlm4Stats::Granted).encode(e);
        }
        (PROGRAM, PROC_SHARE) | (PROGRAM, PROC_UNSHARE) => {
            let a = rnfsd_xdr::from_slice::<Nlm4ShareArgs>(rest).unwrap();
            assert_eq!(a.share.mode, FshMode::DenyWrite);
            Nlm4ShareRes {
                cookie: a.cookie,
                stat: Nlm4Stats::Granted,
                sequence: 1,
            }
            .encode(e);
        }
        (PROGRAM, PROC_FREE_ALL) => {
            let a = rnfsd_xdr::from_slice::<Nlm4Notify>(rest).unwrap();
            assert_eq!(a.name.0, b"client");
        }
        (PROGRAM, PROC_TEST_MSG) => {
            rnfsd_xdr::from_slice::<Nlm4TestArgs>(rest).unwrap();
            return false;
        }
        (PROGRAM, PROC_LOCK_MSG) => {
            rnfsd_xdr::from_slice::<Nlm4LockArgs>(rest).unwrap();
            // Some servers answer a _MSG call with a void reply anyway;
            // the client must drop it quietly.
            return true;
        }
        (PROGRAM, PROC_TEST_RES) => {
            rnfsd_xdr::from_slice::<Nlm4TestRes>(rest).unwrap();
            return false;
        }
        (PROGRAM, PROC_UNLOCK_MSG | PROC_CANCEL_MSG | PROC_GRANTED_MSG) => return false,
        (PROGRAM, PROC_LOCK_RES..=PROC_GRANTED_RES) => {
            rnfsd_xdr::from_slice::<Nlm4Res>(rest).unwrap();
            return false;
        }
        (nsm::PROGRAM, nsm::SM_STAT) => {
            let a = rnfsd_xdr::from_slice::<nsm::SmName>(rest).unwrap();
            assert_eq!(a.mon_name.0, b"peer");
            SmStatRes {
                res_stat: SmRes::StatSucc,
                state: 5,
            }
            .encode(e);
        }
        (nsm::PROGRAM, nsm::SM_MON) => {
            let a = rnfsd_xdr::from_slice::<Mon>(rest).unwrap();
            assert_eq!(a.priv_, SmPriv([3; 16]));
            SmStatRes {
                res_stat: SmRes::StatFail,
                state: 5,
            }
            .encode(e);
        }
        (nsm::PROGRAM, nsm::SM_UNMON) => {
            rnfsd_xdr::from_slice::<MonId>(rest).unwrap();
            SmStat { state: 5 }.encode(e);
        }
        (nsm::PROGRAM, nsm::SM_UNMON_ALL) => {
            rnfsd_xdr::from_slice::<MyId>(rest).unwrap();
            SmStat { state: 7 }.encode(e);
        }
        (nsm::PROGRAM, nsm::SM_SIMU_CRASH) => assert!(rest.is_empty()),
        (nsm::PROGRAM, nsm::SM_NOTIFY) => {
            rnfsd_xdr::from_slice::<nsm::StatChge>(rest).unwrap();
        }
        // The status callback, sent to a registered (prog, vers, proc).
        (PROGRAM, 16) => {
            rnfsd_xdr::from_slice::<nsm::Status>(rest).unwrap();
        }
        p => panic!("unexpected call {p:?}"),
    }
    true
}

/// Serve one connection; returns the (prog, vers, proc) of every call seen.
async fn start() -> (SocketAddr, tokio::task::JoinHandle<Vec<(u32, u32, u32)>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let h = tokio::spawn(async move {
        let mut seen = Vec::new();
        let (s, _) = l.accept().await.unwrap();
        let (r, mut w) = s.into_split();
        let mut r = BufReader::new(r);
        let mut rec = Vec::new();
        while read_record(&mut r, 1 << 20, &mut rec).await.unwrap() {
            let mut d = Dec::new(&rec);
            let Incoming::Call(h) = CallHeader::decode(&mut d).unwrap() else {
                panic!("not a call");
            };
            seen.push((h.prog, h.vers, h.proc_));
            let mut e = Enc::new();
            encode_accepted(&mut e, h.xid, AcceptStat::Success);
            if handle(h.prog, h.proc_, &mut d, &mut e) {
                w.write_all(&encode_fragments(e.as_slice(), 1 << 16))
                    .await
                    .unwrap();
            }
        }
        seen
    });
    (addr, h)
}

#[tokio::test]
async fn nlm_and_nsm_procedures_against_fake_server() {
    let (addr, server) = start().await;
    let cfg = ClientConfig {
        timeout: Some(LIMIT),
        ..ClientConfig::default()
    };
    let nlm = NlmClient::connect(addr, &cfg).await.unwrap();
    let nsm = NsmClient::new(nlm.client().clone());
    let run = async {
        nlm.null().await.unwrap();
        let test = Nlm4TestArgs {
            cookie: cookie(),
            exclusive: true,
            alock: lock(),
        };
        let r = nlm.test(&test).await.unwrap();
        assert_eq!(r.cookie, cookie());
        assert_eq!(r.stat.stat(), Nlm4Stats::Denied);
        let la = Nlm4LockArgs {
            cookie: cookie(),
            block: true,
            exclusive: true,
            alock: lock(),
            reclaim: false,
            state: 3,
        };
        assert_eq!(nlm.lock(&la).await.unwrap().stat, Nlm4Stats::Blocked);
        assert_eq!(nlm.nm_lock(&la).await.unwrap().stat, Nlm4Stats::Blocked);
        let ca = Nlm4CancArgs {
            cookie: cookie(),
            block: true,
            exclusive: true,
            alock: lock(),
        };
        assert_eq!(nlm.cancel(&ca).await.unwrap().stat, Nlm4Stats::Granted);
        let ua = Nlm4UnlockArgs {
            cookie: cookie(),
            alock: lock(),
        };
        assert_eq!(nlm.unlock(&ua).await.unwrap().stat, Nlm4Stats::Granted);
        assert_eq!(nlm.granted(&test).await.unwrap().stat, Nlm4Stats::Granted);
        let sa = Nlm4ShareArgs {
            cookie: cookie(),
            share: Nlm4Share {
                caller_name: CallerName(b"client".to_vec()),
                fh: NetObj(vec![7; 16]),
                oh: NetObj(b"o".to_vec()),
                mode: FshMode::DenyWrite,
                access: FshAccess::Read,
            },
            reclaim: false,
        };
        assert_eq!(nlm.share(&sa).await.unwrap().sequence, 1);
        assert_eq!(nlm.unshare(&sa).await.unwrap().stat, Nlm4Stats::Granted);
        nlm.free_all(&Nlm4Notify {
            name: NotifyName(b"client".to_vec()),
            state: 4,
        })
        .await
        .unwrap();

        // One-way calls return at once; the server answers none but
        // LOCK_MSG, whose stray reply is dropped.
        nlm.test_msg(&test).await.unwrap();
        nlm.lock_msg(&la).await.unwrap();
        nlm.cancel_msg(&ca).await.unwrap();
        nlm.unlock_msg(&ua).await.unwrap();
        nlm.granted_msg(&test).await.unwrap();
        nlm.test_res(&r).await.unwrap();
        let res = Nlm4Res {
            cookie: cookie(),
            stat: Nlm4Stats::Granted,
        };
        nlm.lock_res(&res).await.unwrap();
        nlm.cancel_res(&res).await.unwrap();
        nlm.unlock_res(&res).await.unwrap();
        nlm.granted_res(&res).await.unwrap();

        let s = nsm.stat("peer").await.unwrap();
        assert_eq!((s.res_stat, s.state), (SmRes::StatSucc, 5));
        let my_id = MyId {
            my_name: SmString(b"localhost".to_vec()),
            my_prog: PROGRAM,
            my_vers: VERSION4,
            my_proc: 16,
        };
        let mon_id = MonId {
            mon_name: SmString(b"peer".to_vec()),
            my_id: my_id.clone(),
        };
        let m = nsm
            .mon(&Mon {
                mon_id: mon_id.clone(),
                priv_: SmPriv([3; 16]),
            })
            .await
            .unwrap();
        assert_eq!(m.res_stat, SmRes::StatFail);
        assert_eq!(nsm.unmon(&mon_id).await.unwrap().state, 5);
        assert_eq!(nsm.unmon_all(&my_id).await.unwrap().state, 7);
        nsm.simu_crash().await.unwrap();
        nsm.notify(&nsm::StatChge {
            mon_name: SmString(b"me".to_vec()),
            state: 9,
        })
        .await
        .unwrap();
        nsm.status_callback(
            &my_id,
            &nsm::Status {
                mon_name: SmString(b"peer".to_vec()),
                state: 6,
                priv_: SmPriv([3; 16]),
            },
        )
        .await
        .unwrap();
        // Calls still pair with their replies after the stray one.
        nlm.null().await.unwrap();
    };
    timeout(LIMIT, run).await.expect("client calls hung");
    drop(nsm);
    drop(nlm);
    let seen = timeout(LIMIT, server).await.unwrap().unwrap();
    let nlm_procs: Vec<u32> = seen
        .iter()
        .filter(|c| c.0 == PROGRAM && c.2 != 16)
        .map(|c| {
            assert_eq!(c.1, VERSION4);
            c.2
        })
        .collect();
    assert_eq!(
        nlm_procs,
        [0, 1, 2, 22, 3, 4, 5, 20, 21, 23, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0]
    );
    let nsm_procs: Vec<u32> = seen
        .iter()
        .filter(|c| c.0 == nsm::PROGRAM)
        .map(|c| {
            assert_eq!(c.1, nsm::VERSION);
            c.2
        })
        .collect();
    assert_eq!(nsm_procs, [1, 2, 3, 4, 5, 6]);
}
