//! NFSv4.2's data operations (RFC 7862 §15) against the real server over
//! TCP, through the v4 client library at minor version 2: SEEK over a
//! sparse file, ALLOCATE and DEALLOCATE seen in the file's blocks on the
//! host, READ_PLUS with holes, COPY within the server (and a short copy
//! past `nfs4_copy_sync_max`), CLONE where the filesystem shares blocks
//! (XFS) and NFS4ERR_NOTSUPP where not, and 4.2's numbers ILLEGAL in 4.1.

use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use crate::common;

use common::blockdev::{unavailable, LoopFs};
use common::nfs::*;
use common::nfs4::{open_rw, status};
use common::{export_table, write_config, TempDir, TestServer};
use rnfsd_client::{Nfs4Client, Nfs4Config};
use rnfsd_proto::nfs4::*;
use rnfsd_stats::Snapshot;
use rnfsd_xdr::Dec;

const MIB: u64 = 1 << 20;

/// A server of `dir` with NFSv4 on, `server_keys` in [server] and
/// `export_keys` in the export's table.
fn server(dir: &Path, cfgdir: &TempDir, server_keys: &str, export_keys: &str) -> TestServer {
    let cfg = write_config(
        cfgdir.path(),
        &format!(
            "[server]\nnfs4 = true\nregister_rpcbind = false\n{server_keys}\n{}",
            export_table(dir, export_keys)
        ),
    );
    TestServer::start_config(Path::new(&cfg), dir, TempDir::new("v42-state"), &[])
}

/// A session whose compounds say minor version 2.
async fn client(srv: &TestServer) -> Nfs4Client {
    common::nfs4::client_as(srv, 0, "v42", &Nfs4Config::default())
        .await
        .with_minor(2)
}

/// What lseek says on the host: the first data or hole at or after `at`.
fn host_seek(f: &std::fs::File, at: u64, data: bool) -> Option<u64> {
    let whence = if data {
        libc::SEEK_DATA
    } else {
        libc::SEEK_HOLE
    };
    // SAFETY: lseek on a descriptor the test owns.
    let r = unsafe { libc::lseek(f.as_raw_fd(), at as libc::off_t, whence) };
    (r >= 0).then_some(r as u64)
}

fn snapshot(srv: &TestServer) -> Snapshot {
    let a = rnfsd::admin::query(&srv.state.path().join("admin.sock"), "snapshot")
        .expect("admin socket");
    Snapshot::from_json(&a).expect("snapshot JSON")
}

fn op_calls(srv: &TestServer, name: &str) -> u64 {
    snapshot(srv).proc("nfs4_op", name).map_or(0, |p| p.calls)
}

/// The change attribute.
async fn change(c: &Nfs4Client, fh: &NfsFh4) -> u64 {
    c.getattr_decoded(fh)
        .await
        .expect("GETATTR")
        .change()
        .expect("change")
}

#[tokio::test(flavor = "multi_thread")]
async fn seek_read_plus_allocate_and_deallocate_on_a_sparse_file() {
    let dir = TempDir::new("v42-sparse");
    let cfgdir = TempDir::new("v42-sparse-cfg");
    // Data, hole, data, hole to the end of file.
    let path = dir.path().join("sparse");
    let f = std::fs::File::create(&path).unwrap();
    f.write_all_at(&[b'a'; 4096], 0).unwrap();
    f.write_all_at(&[b'b'; 4096], 256 * 1024).unwrap();
    f.set_len(512 * 1024).unwrap();
    f.sync_all().unwrap();
    let size = 512 * 1024;
    let host = std::fs::File::open(&path).unwrap();
    let holes = host_seek(&host, 0, false).is_some_and(|h| h < size);
    std::fs::write(dir.path().join("alloc"), b"").unwrap();
    let srv = server(dir.path(), &cfgdir, "", "");
    bounded(async {
        let c = client(&srv).await;
        let (fh, sid) = open_rw(&c, &srv, "sparse").await;

        // SEEK answers what lseek on the host answers.
        for at in [0, 4096, 100_000, 256 * 1024, 256 * 1024 + 4096, size - 1] {
            for (what, data) in [(DataContent4::Data, true), (DataContent4::Hole, false)] {
                let r = c.seek(&fh, &sid, at, what).await.expect("SEEK");
                match host_seek(&host, at, data) {
                    Some(h) => assert_eq!((r.offset, r.eof), (h, h >= size), "{what:?} from {at}"),
                    // No data after `at`: NFS4_OK with eof (§15.11.3).
                    None => assert_eq!((r.offset, r.eof), (size, true), "{what:?} from {at}"),
                }
            }
        }
        let r = c.seek(&fh, &sid, size, DataContent4::Data).await;
        assert_eq!(status(r), Nfsstat4::NxIo, "at end of file");

        // READ_PLUS: the file's bytes, holes as holes where it has them.
        let rp = c
            .read_plus(&fh, &sid, 0, size as u32)
            .await
            .expect("READ_PLUS");
        assert!(rp.eof);
        let mut got = vec![0xffu8; size as usize];
        let mut at = 0u64;
        let mut hole_segments = 0;
        for seg in &rp.contents {
            match seg {
                ReadPlusContent::Data { offset, data } => {
                    assert_eq!(*offset, at, "segments follow one another");
                    got[at as usize..at as usize + data.len()].copy_from_slice(data);
                    at += data.len() as u64;
                }
                ReadPlusContent::Hole { offset, length } => {
                    assert_eq!(*offset, at);
                    got[at as usize..(at + length) as usize].fill(0);
                    at += length;
                    hole_segments += 1;
                }
            }
        }
        assert_eq!(at, size);
        assert_eq!(got, std::fs::read(&path).unwrap());
        if holes {
            assert!(
                hole_segments >= 2,
                "holes sent as holes: {:?}",
                rp.contents.len()
            );
        } else {
            eprintln!("note: the temp filesystem keeps no holes; READ_PLUS sent data only");
        }
        // Past end of file: nothing, and eof.
        let rp = c
            .read_plus(&fh, &sid, size + 10, 100)
            .await
            .expect("READ_PLUS");
        assert!(rp.eof && rp.contents.is_empty());

        // ALLOCATE grows the file and holds its blocks; DEALLOCATE frees
        // them (the size stays); each moves the change attribute.
        let (afh, asid) = open_rw(&c, &srv, "alloc").await;
        let apath = dir.path().join("alloc");
        let c0 = change(&c, &afh).await;
        c.allocate(&afh, &asid, 0, 2 * MIB).await.expect("ALLOCATE");
        let m = std::fs::metadata(&apath).unwrap();
        assert_eq!(m.len(), 2 * MIB);
        assert!(m.blocks() * 512 >= 2 * MIB, "blocks held: {}", m.blocks());
        let c1 = change(&c, &afh).await;
        assert_ne!(c0, c1, "ALLOCATE moved the change attribute");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&apath)
            .unwrap()
            .write_all_at(&[7u8; 8192], MIB)
            .unwrap();
        let before = std::fs::metadata(&apath).unwrap().blocks();
        c.deallocate(&afh, &asid, 0, MIB + 4096)
            .await
            .expect("DEALLOCATE");
        let m = std::fs::metadata(&apath).unwrap();
        assert_eq!(m.len(), 2 * MIB, "a punch keeps the size");
        assert!(
            (before - m.blocks()) * 512 >= MIB,
            "blocks freed: {} -> {}",
            before,
            m.blocks()
        );
        assert_ne!(change(&c, &afh).await, c1, "DEALLOCATE moved it");
        let data = std::fs::read(&apath).unwrap();
        assert!(data[..(MIB + 4096) as usize].iter().all(|&b| b == 0));
        assert_eq!(
            &data[(MIB + 4096) as usize..(MIB + 8192) as usize],
            &[7u8; 4096]
        );
        let rp = c.read_plus(&afh, &asid, 0, 4096).await.expect("READ_PLUS");
        assert!(
            matches!(
                rp.contents.first(),
                Some(ReadPlusContent::Hole { offset: 0, .. })
            ),
            "a punched range reads as a hole: {:?}",
            rp.contents.first().map(|_| ())
        );
        let r = c.allocate(&afh, &asid, 0, 0).await;
        assert_eq!(status(r), Nfsstat4::Inval, "a zero length");

        // On a `sync` export a COPY is durable before the reply, even one
        // the client did not ask to be synchronous.
        let r = c
            .copy(&fh, &sid, 0, &afh, &asid, 0, 4096, false)
            .await
            .expect("COPY");
        assert_eq!(r.response.count, 4096);
        assert_eq!(r.response.committed, StableHow4::FileSync);

        // Every one was counted under its own name.
        for op in ["SEEK", "READ_PLUS", "ALLOCATE", "DEALLOCATE"] {
            assert!(op_calls(&srv, op) >= 1, "{op} counted");
        }

        // In a 4.1 compound 4.2's numbers are no operations.
        let c41 = c.with_minor(1);
        let r = c41
            .compound(&[
                ArgOp::PutFh(PutFh4Args { object: fh.clone() }),
                ArgOp::Seek(Seek4Args {
                    stateid: sid,
                    offset: 0,
                    what: DataContent4::Data,
                }),
            ])
            .await
            .expect("COMPOUND");
        assert_eq!(r.status, Nfsstat4::OpIllegal);
        assert!(matches!(r.results.last(), Some(ResOp::Illegal(_))));
    })
    .await;
}

/// A file of `len` bytes no two MiB alike.
fn pattern(len: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn copy_within_the_server_and_a_short_copy_past_the_bound() {
    let dir = TempDir::new("v42-copy");
    let cfgdir = TempDir::new("v42-copy-cfg");
    let src = pattern(5 * MIB + 123);
    std::fs::write(dir.path().join("src"), &src).unwrap();
    std::fs::write(dir.path().join("dst"), b"").unwrap();
    std::fs::write(dir.path().join("big"), b"").unwrap();
    // Two MiB per COPY at most; an `async` export (a `sync` one makes
    // every copy durable before the reply).
    let srv = server(
        dir.path(),
        &cfgdir,
        &format!("nfs4_copy_sync_max = {}", 2 * MIB),
        "sync = false",
    );
    bounded(async {
        let c = client(&srv).await;
        let (sfh, ssid) = open_rw(&c, &srv, "src").await;
        let (dfh, dsid) = open_rw(&c, &srv, "dst").await;
        let len = src.len() as u64;

        // Within the bound: all of it at once, synchronous and durable.
        let r = c
            .copy(&sfh, &ssid, 0, &dfh, &dsid, 0, MIB + 5, true)
            .await
            .expect("COPY");
        assert_eq!(r.response.count, MIB + 5);
        assert_eq!(r.response.callback_id, None, "a synchronous copy");
        assert_eq!(r.response.committed, StableHow4::FileSync);
        assert!(r.requires.synchronous);
        let got = std::fs::read(dir.path().join("dst")).unwrap();
        assert_eq!(got, src[..(MIB + 5) as usize]);

        // Past the bound (count 0: to end of file): short copies, which
        // the client continues from where each ended.
        let (bfh, bsid) = open_rw(&c, &srv, "big").await;
        let mut done = 0u64;
        let mut calls = 0;
        let mut verf = None;
        while done < len {
            let r = c
                .copy(&sfh, &ssid, done, &bfh, &bsid, done, 0, false)
                .await
                .expect("COPY");
            let n = r.response.count;
            assert!(n > 0 && n <= 2 * MIB, "copied {n}");
            if done + n < len {
                assert_eq!(n, 2 * MIB, "a short copy stops at the bound");
            }
            assert_eq!(r.response.committed, StableHow4::Unstable);
            verf = Some(r.response.writeverf);
            done += n;
            calls += 1;
        }
        assert_eq!(calls, 3);
        let v = c.commit(&bfh, 0, 0).await.expect("COMMIT");
        assert_eq!(Some(v), verf, "COPY's verifier is WRITE's");
        let got = std::fs::read(dir.path().join("big")).unwrap();
        assert!(got == src, "copied byte for byte");
        assert!(op_calls(&srv, "COPY") >= 4);

        // Outside the source, overlapping itself, or from another server.
        let r = c
            .copy(&sfh, &ssid, len - 10, &dfh, &dsid, 0, 11, true)
            .await;
        assert_eq!(status(r), Nfsstat4::Inval);
        let r = c.copy(&sfh, &ssid, 0, &sfh, &ssid, 100, 200, true).await;
        assert_eq!(status(r), Nfsstat4::Inval);
        let inter = Copy4Args {
            src_stateid: ssid,
            dst_stateid: dsid,
            src_offset: 0,
            dst_offset: 0,
            count: 10,
            consecutive: true,
            synchronous: true,
            source_server: vec![Netloc4::Name(Utf8Str(b"elsewhere".to_vec()))],
        };
        let r = c
            .run(&[
                ArgOp::PutFh(PutFh4Args {
                    object: sfh.clone(),
                }),
                ArgOp::SaveFh,
                ArgOp::PutFh(PutFh4Args {
                    object: dfh.clone(),
                }),
                ArgOp::Copy(inter),
            ])
            .await;
        assert_eq!(status(r), Nfsstat4::NotSupp, "no inter-server copy");
        // A stateid of another file is refused as WRITE refuses it.
        let r = c.copy(&sfh, &ssid, 0, &dfh, &ssid, 0, 10, true).await;
        assert_eq!(status(r), Nfsstat4::BadStateid);

        // An open stateid names no copy (and this client, with no back
        // channel, got only synchronous ones).
        let r = c
            .run(&[
                ArgOp::PutFh(PutFh4Args {
                    object: dfh.clone(),
                }),
                ArgOp::OffloadStatus(Offload4Args { stateid: dsid }),
            ])
            .await;
        assert_eq!(status(r), Nfsstat4::BadStateid);

        // CLONE as the host's filesystem can: shared blocks, or NOTSUPP.
        let host_clones = host_can_clone(dir.path());
        let r = c.clone_range(&sfh, &ssid, 0, &dfh, &dsid, 0, 0).await;
        match host_clones {
            true => r.expect("CLONE"),
            false => assert_eq!(status(r), Nfsstat4::NotSupp, "no reflinks here"),
        }
    })
    .await;
}

/// Whether FICLONE works in `dir` (the test's own probe of its host).
fn host_can_clone(dir: &Path) -> bool {
    let a = dir.join(".probe-a");
    let b = dir.join(".probe-b");
    std::fs::write(&a, [1u8; 4096]).unwrap();
    let fa = std::fs::File::open(&a).unwrap();
    let fb = std::fs::File::create(&b).unwrap();
    // FICLONE: _IOW(0x94, 9, int).
    // SAFETY: the ioctl takes the source descriptor as its argument.
    let r = unsafe { libc::ioctl(fb.as_raw_fd(), 0x4004_9409, fa.as_raw_fd()) };
    let _ = std::fs::remove_file(&a);
    let _ = std::fs::remove_file(&b);
    r == 0
}

#[tokio::test(flavor = "multi_thread")]
async fn clone_shares_blocks_on_xfs() {
    if common::skip("CLONE on XFS", unavailable(&["mkfs.xfs"])) {
        return;
    }
    let fs = LoopFs::xfs("v42clone", 320);
    let export = fs.subdir("export");
    let cfgdir = TempDir::new("v42-clone-cfg");
    let src = pattern(8 * MIB);
    std::fs::write(export.join("src"), &src).unwrap();
    std::fs::write(export.join("dst"), b"").unwrap();
    // SAFETY: the test's own sync.
    unsafe { libc::sync() };
    if !host_can_clone(&export) {
        eprintln!("skipped: this XFS was made without reflink");
        return;
    }
    let srv = server(&export, &cfgdir, "", "");
    bounded(async {
        let c = client(&srv).await;
        let (sfh, ssid) = open_rw(&c, &srv, "src").await;
        let (dfh, dsid) = open_rw(&c, &srv, "dst").await;

        // clone_blksize: the filesystem's block size.
        let mut want = Bitmap4::new();
        want.insert(FATTR4_CLONE_BLKSIZE);
        let f = c.getattr(&dfh, &want).await.expect("GETATTR");
        let blk = Dec::new(&f.attr_vals).u32().expect("clone_blksize");
        assert_eq!(u64::from(blk), fs_block_size(&export));

        let free = || fs_free(&export);
        let before = free();
        c.clone_range(&sfh, &ssid, 0, &dfh, &dsid, 0, 0)
            .await
            .expect("CLONE");
        assert!(std::fs::read(export.join("dst")).unwrap() == src);
        let used = before.saturating_sub(free());
        assert!(used < 2 * MIB, "shared, not copied: {used} bytes used");
        // COPY shares blocks here too (copy_file_range reflinks).
        let r = c
            .copy(&sfh, &ssid, 0, &dfh, &dsid, 0, 0, true)
            .await
            .expect("COPY");
        assert_eq!(r.response.count, 8 * MIB);

        // Not aligned to clone_blksize: the filesystem's NFS4ERR_INVAL.
        let r = c.clone_range(&sfh, &ssid, 1, &dfh, &dsid, 0, 4096).await;
        assert_eq!(status(r), Nfsstat4::Inval);
    })
    .await;
}

fn statfs(p: &Path) -> libc::statfs {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: statfs fills the struct it is given.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statfs(c.as_ptr(), &mut s) }, 0);
    s
}

fn fs_block_size(p: &Path) -> u64 {
    statfs(p).f_bsize as u64
}

fn fs_free(p: &Path) -> u64 {
    let s = statfs(p);
    s.f_bfree * s.f_bsize as u64
}
