//! The NFSv3 client's procedures and helpers against a tiny fake NFS server
//! (an in-test tokio task decoding arguments with the proto types).

use std::net::SocketAddr;
use std::time::Duration;

use rnfsd_client::nfs3::*;
use rnfsd_client::record::{encode_fragments, read_record};
use rnfsd_client::{check, ClientConfig, ClientError, NfsClient};
use rnfsd_proto::rpc::{encode_accepted, AcceptStat, CallHeader, Incoming};
use rnfsd_xdr::{Dec, Enc, Xdr};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(10);

const ROOT: u8 = 1;
const DIR_A: u8 = 2;
const FILE_B: u8 = 3;
const DIR_ENTRIES: u64 = 10;
const PAGE: usize = 3;
const MAX_WRITE_PER_CALL: usize = 1000;
const COOKIEVERF: Verf3 = Verf3(*b"cookieVF");

fn fh(n: u8) -> NfsFh3 {
    NfsFh3::new(vec![n; 8])
}

fn attr(ftype: Ftype3, fileid: u64, size: u64) -> Fattr3 {
    let t = Nfstime3::default();
    Fattr3 {
        ftype,
        mode: 0o644,
        nlink: 1,
        uid: 0,
        gid: 0,
        size,
        used: size,
        rdev: Specdata3::default(),
        fsid: 1,
        fileid,
        atime: t,
        mtime: t,
        ctime: t,
    }
}

fn content() -> Vec<u8> {
    (0..300_000u32).map(|i| (i % 251) as u8).collect()
}

struct Fake {
    file: Vec<u8>,
    written: Vec<u8>,
    writes: usize,
}

impl Fake {
    /// Results for one call; the fake checks what a client must send right.
    fn handle(&mut self, proc_: u32, d: &mut Dec<'_>, e: &mut Enc) {
        match proc_ {
            NFSPROC3_NULL => {}
            NFSPROC3_GETATTR => {
                let a = GetAttr3Args::decode(d).unwrap();
                let r: GetAttr3Res = match a.object.data.first() {
                    Some(&n) if a.object == fh(n) && (ROOT..=FILE_B).contains(&n) => {
                        NfsRes::Ok(GetAttr3ResOk {
                            obj_attributes: attr(Ftype3::Dir, n.into(), 0),
                        })
                    }
                    _ => NfsRes::Fail(Nfsstat3::Stale, ()),
                };
                r.encode(e);
            }
            NFSPROC3_LOOKUP => {
                let a = Lookup3Args::decode(d).unwrap();
                let hit = match (a.what.dir.data.first(), &a.what.name[..]) {
                    (Some(&ROOT), b"a") => Some((DIR_A, Ftype3::Dir)),
                    (Some(&DIR_A), b"b") => Some((FILE_B, Ftype3::Reg)),
                    _ => None,
                };
                let r: Lookup3Res = match hit {
                    Some((n, t)) => NfsRes::Ok(Lookup3ResOk {
                        object: fh(n),
                        obj_attributes: Some(attr(t, n.into(), 0)),
                        dir_attributes: None,
                    }),
                    None => NfsRes::Fail(Nfsstat3::NoEnt, None),
                };
                r.encode(e);
            }
            NFSPROC3_READ => {
                let a = Read3Args::decode(d).unwrap();
                assert_eq!(a.file, fh(FILE_B));
                let start = (a.offset as usize).min(self.file.len());
                let end = (start + a.count as usize).min(self.file.len());
                let data = self.file[start..end].to_vec();
                let r: Read3Res = NfsRes::Ok(Read3ResOk {
                    file_attributes: None,
                    count: data.len() as u32,
                    eof: end == self.file.len(),
                    data,
                });
                r.encode(e);
            }
            NFSPROC3_WRITE => {
                let a = Write3Args::decode(d).unwrap();
                assert_eq!(a.count as usize, a.data.len());
                // Short writes: at most MAX_WRITE_PER_CALL bytes taken.
                let n = a.data.len().min(MAX_WRITE_PER_CALL);
                let off = a.offset as usize;
                if self.written.len() < off + n {
                    self.written.resize(off + n, 0);
                }
                self.written[off..off + n].copy_from_slice(&a.data[..n]);
                self.writes += 1;
                // The third write only reaches UNSTABLE.
                let committed = if self.writes == 3 {
                    StableHow::Unstable
                } else {
                    a.stable
                };
                let r: Write3Res = NfsRes::Ok(Write3ResOk {
                    file_wcc: WccData::default(),
                    count: n as u32,
                    committed,
                    verf: Verf3(*b"writeVF1"),
                });
                r.encode(e);
            }
            NFSPROC3_READDIR | NFSPROC3_READDIRPLUS => {
                let plus = proc_ == NFSPROC3_READDIRPLUS;
                let (dir, cookie, verf) = if plus {
                    let a = ReadDirPlus3Args::decode(d).unwrap();
                    (a.dir, a.cookie, a.cookieverf)
                } else {
                    let a = ReadDir3Args::decode(d).unwrap();
                    (a.dir, a.cookie, a.cookieverf)
                };
                assert_eq!(dir, fh(DIR_A));
                // RFC 1813 §3.3.16: cookieverf is 0 on the first call and
                // echoed after.
                if cookie == 0 {
                    assert_eq!(verf, Verf3::default());
                } else {
                    assert_eq!(verf, COOKIEVERF);
                }
                // Cookies are entry index + 100.
                let first = if cookie == 0 { 0 } else { cookie - 99 };
                let ids: Vec<u64> = (first..DIR_ENTRIES).take(PAGE).collect();
                let eof = first + PAGE as u64 >= DIR_ENTRIES;
                if plus {
                    let r: ReadDirPlus3Res = NfsRes::Ok(ReadDirPlus3ResOk {
                        dir_attributes: None,
                        cookieverf: COOKIEVERF,
                        entries: ids
                            .iter()
                            .map(|&i| EntryPlus3 {
                                fileid: 1000 + i,
                                name: format!("f{i}").into_bytes(),
                                cookie: 100 + i,
                                name_attributes: Some(attr(Ftype3::Reg, 1000 + i, i)),
                                name_handle: Some(fh(50 + i as u8)),
                            })
                            .collect(),
                        eof,
                    });
                    r.encode(e);
                } else {
                    let r: ReadDir3Res = NfsRes::Ok(ReadDir3ResOk {
                        dir_attributes: None,
                        cookieverf: COOKIEVERF,
                        entries: ids
                            .iter()
                            .map(|&i| Entry3 {
                                fileid: 1000 + i,
                                name: format!("f{i}").into_bytes(),
                                cookie: 100 + i,
                            })
                            .collect(),
                        eof,
                    });
                    r.encode(e);
                }
            }
            NFSPROC3_FSINFO => {
                let _ = FsInfo3Args::decode(d).unwrap();
                let r: FsInfo3Res = NfsRes::Fail(Nfsstat3::ServerFault, None);
                r.encode(e);
            }
            p => panic!("fake does not do proc {p}"),
        }
        d.finish().unwrap();
    }
}

async fn start() -> (SocketAddr, tokio::task::JoinHandle<Fake>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let h = tokio::spawn(async move {
        let mut fake = Fake {
            file: content(),
            written: Vec::new(),
            writes: 0,
        };
        let (s, _) = l.accept().await.unwrap();
        let (r, mut w) = s.into_split();
        let mut r = BufReader::new(r);
        let mut rec = Vec::new();
        while read_record(&mut r, 4 << 20, &mut rec).await.unwrap() {
            let mut d = Dec::new(&rec);
            let Incoming::Call(h) = CallHeader::decode(&mut d).unwrap() else {
                panic!("not a call");
            };
            assert_eq!((h.prog, h.vers), (NFS_PROGRAM, NFS_V3));
            let mut e = Enc::new();
            encode_accepted(&mut e, h.xid, AcceptStat::Success);
            fake.handle(h.proc_, &mut d, &mut e);
            w.write_all(&encode_fragments(e.as_slice(), 1 << 16))
                .await
                .unwrap();
        }
        fake
    });
    (addr, h)
}

async fn client(addr: SocketAddr) -> NfsClient {
    let cfg = ClientConfig {
        timeout: Some(LIMIT),
        ..ClientConfig::default()
    };
    NfsClient::connect(addr, &cfg).await.unwrap()
}

#[tokio::test]
async fn procedures_and_helpers_against_fake_server() {
    let (addr, server) = start().await;
    let nfs = client(addr).await;
    let run = async {
        nfs.null().await.unwrap();

        // Raw procedure results keep failure statuses visible.
        let r = nfs.getattr(&GetAttr3Args { object: fh(99) }).await.unwrap();
        assert_eq!(r.status(), Nfsstat3::Stale);
        let r = nfs.fsinfo(&FsInfo3Args { fsroot: fh(ROOT) }).await.unwrap();
        assert!(matches!(
            check(r),
            Err(ClientError::Nfs(Nfsstat3::ServerFault))
        ));

        // lookup_path skips empty and "." components.
        let (b, a) = nfs.lookup_path(&fh(ROOT), "/a//./b").await.unwrap();
        assert_eq!((b, a.ftype, a.fileid), (fh(FILE_B), Ftype3::Reg, 3));
        let (root, a) = nfs.lookup_path(&fh(ROOT), "").await.unwrap();
        assert_eq!((root, a.fileid), (fh(ROOT), ROOT.into()));
        assert!(matches!(
            nfs.lookup_path(&fh(ROOT), "a/zz").await,
            Err(ClientError::Nfs(Nfsstat3::NoEnt))
        ));

        // read_all pages in rsize chunks to EOF.
        let small = nfs.with_io_size(64 * 1024, 4096);
        assert_eq!(small.read_all(&fh(FILE_B)).await.unwrap(), content());

        // write_all resends after short writes and reports the weakest
        // commitment.
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let s = small
            .write_all(&fh(FILE_B), &data, StableHow::FileSync)
            .await
            .unwrap();
        assert_eq!(s.written, data.len() as u64);
        assert_eq!(s.committed, StableHow::Unstable);
        assert_eq!(s.verf, Verf3(*b"writeVF1"));
        assert!(!s.verf_changed);

        // Directory helpers follow cookies and echo the cookie verifier.
        let names: Vec<Vec<u8>> = nfs
            .readdir_all(&fh(DIR_A))
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        let want: Vec<Vec<u8>> = (0..DIR_ENTRIES)
            .map(|i| format!("f{i}").into_bytes())
            .collect();
        assert_eq!(names, want);
        let plus = nfs.readdirplus_all(&fh(DIR_A)).await.unwrap();
        assert_eq!(plus.len() as u64, DIR_ENTRIES);
        assert!(plus
            .iter()
            .enumerate()
            .all(|(i, e)| e.name_handle == Some(fh(50 + i as u8))
                && e.name_attributes.as_ref().map(|a| a.size) == Some(i as u64)));
        data
    };
    let data = timeout(LIMIT, run).await.unwrap();
    drop(nfs);
    let fake = timeout(LIMIT, server).await.unwrap().unwrap();
    assert_eq!(fake.written, data);
    // 10,000 bytes at 1,000 per accepted write.
    assert_eq!(fake.writes, 10);
}
