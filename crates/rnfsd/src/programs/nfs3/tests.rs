//! Unit tests of the NFSv3 table through its wire encoding, with an
//! in-memory fake backend (errno mapping, budgets, failure attributes).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rnfsd_fs::{
    Attr, Backend, Call, CreateHow, Created, DirEntry, DirPage, Fh, FileType, FsError, FsInfo,
    FsResult, FsStat, NodeKind, PathConf, PreAttr, SetAttr, SetTime, Stable, Time, Wcc,
};
use rnfsd_proto::nfs3::*;
use rnfsd_proto::rpc::AuthSys;
use rnfsd_xdr::{from_slice, to_vec, Dec, Enc, Xdr};

use super::convert::*;
use super::*;
use crate::access::ExportAccess;
use crate::state::{Export, Server};
use rnfsd_rpc::{Auth, ProcError};

const ROOT: u64 = 1;
const FILE: u64 = 2;
const VERF: [u8; 8] = [7; 8];
const WVERF: [u8; 8] = *b"wverf!!!";

/// What the fake saw last, for checking argument conversion.
#[derive(Default)]
struct Seen {
    create: Option<CreateHow>,
    setattr: Option<(SetAttr, Option<Time>)>,
    write: Option<(u64, usize, Stable)>,
    mknod: Option<NodeKind>,
    read_count: Option<u32>,
    readdir_max: Option<usize>,
}

struct FakeFs {
    export_id: u32,
    names: Vec<Vec<u8>>,
    /// When set, every method but getattr fails with it.
    fail: Mutex<Option<FsError>>,
    /// When set, getattr fails too (no post-op attributes possible).
    getattr_fails: Mutex<bool>,
    /// Bytes the file holds.
    file_len: u64,
    seen: Mutex<Seen>,
    /// When set, every change owes a journal commit of these, as the
    /// local backend's do on a `sync` export (`rnfsd_fs::owed`).
    owes: Mutex<Option<Arc<rnfsd_fs::owed::Commits>>>,
}

impl FakeFs {
    fn new(export_id: u32, n: usize) -> Arc<Self> {
        Arc::new(FakeFs {
            export_id,
            // Varied lengths so padding is exercised.
            names: (0..n)
                .map(|i| format!("f{i}-{}", "x".repeat(i % 17)).into_bytes())
                .collect(),
            fail: Mutex::new(None),
            getattr_fails: Mutex::new(false),
            file_len: 10_000,
            seen: Mutex::new(Seen::default()),
            owes: Mutex::new(None),
        })
    }

    /// A change was made by `call`: owe its commit when told to.
    fn changed(&self, call: &Call<'_>) {
        if let Some(c) = &*self.owes.lock().unwrap() {
            assert!(call.owe(c), "the table offered no commit to owe");
        }
    }

    fn fh(&self, id: u64) -> Fh {
        let mut v = vec![1];
        v.extend_from_slice(&self.export_id.to_be_bytes());
        v.extend_from_slice(&id.to_be_bytes());
        Fh(v)
    }

    fn id_of(&self, fh: &Fh) -> FsResult<u64> {
        if fh.0.len() != 13 || fh.0[0] != 1 {
            return Err(FsError::BadHandle);
        }
        let mut b = [0u8; 8];
        b.copy_from_slice(&fh.0[5..13]);
        Ok(u64::from_be_bytes(b))
    }

    fn attr(&self, id: u64) -> Attr {
        Attr {
            ftype: if id == ROOT {
                FileType::Directory
            } else {
                FileType::Regular
            },
            mode: 0o755,
            nlink: 1,
            uid: 0,
            gid: 0,
            size: if id == FILE { self.file_len } else { 4096 },
            used: 4096,
            rdev: (0, 0),
            fsid: 7,
            fileid: id,
            atime: Time { sec: 1000, nsec: 1 },
            mtime: Time { sec: 2000, nsec: 2 },
            ctime: Time { sec: 3000, nsec: 3 },
        }
    }

    fn check(&self, fh: &Fh) -> FsResult<u64> {
        let id = self.id_of(fh)?;
        if let Some(e) = *self.fail.lock().unwrap() {
            return Err(e);
        }
        Ok(id)
    }

    fn wcc(&self, id: u64) -> Wcc {
        let a = self.attr(id);
        Wcc {
            before: Some(PreAttr::from(&a)),
            after: Some(a),
        }
    }

    fn created(&self, dir: u64) -> Created {
        Created {
            fh: self.fh(500),
            attr: self.attr(500),
            dir: self.wcc(dir),
        }
    }
}

impl Backend for FakeFs {
    /// In memory: nothing waits.
    fn changes_inline(&self) -> bool {
        true
    }

    fn root(&self) -> Fh {
        self.fh(ROOT)
    }
    fn getattr(&self, _c: &Call<'_>, fh: &Fh) -> FsResult<Attr> {
        let id = self.id_of(fh)?;
        if *self.getattr_fails.lock().unwrap() {
            return Err(FsError::Errno(5));
        }
        Ok(self.attr(id))
    }
    fn setattr(&self, c: &Call<'_>, fh: &Fh, set: &SetAttr, guard: Option<Time>) -> FsResult<Wcc> {
        let id = self.check(fh)?;
        self.changed(c);
        self.seen.lock().unwrap().setattr = Some((set.clone(), guard));
        Ok(self.wcc(id))
    }
    fn lookup(&self, _c: &Call<'_>, dir: &Fh, name: &[u8]) -> FsResult<(Fh, Attr, Option<Attr>)> {
        let d = self.check(dir)?;
        if name == b"file" {
            Ok((self.fh(FILE), self.attr(FILE), Some(self.attr(d))))
        } else {
            Err(FsError::Errno(2))
        }
    }
    fn access(&self, _c: &Call<'_>, fh: &Fh, want: u32) -> FsResult<(u32, Attr)> {
        let id = self.check(fh)?;
        Ok((want, self.attr(id)))
    }
    fn readlink(&self, _c: &Call<'_>, fh: &Fh) -> FsResult<(Vec<u8>, Attr)> {
        let id = self.check(fh)?;
        Ok((b"target".to_vec(), self.attr(id)))
    }
    fn read(
        &self,
        _c: &Call<'_>,
        fh: &Fh,
        offset: u64,
        count: u32,
        buf: &mut Vec<u8>,
    ) -> FsResult<(bool, Attr)> {
        let id = self.check(fh)?;
        self.seen.lock().unwrap().read_count = Some(count);
        let end = (offset + u64::from(count)).min(self.file_len);
        for i in offset..end {
            buf.push(i as u8);
        }
        Ok((end >= self.file_len, self.attr(id)))
    }
    fn write(
        &self,
        _c: &Call<'_>,
        fh: &Fh,
        offset: u64,
        data: &[u8],
        stable: Stable,
    ) -> FsResult<(u32, Stable, Wcc)> {
        let id = self.check(fh)?;
        self.seen.lock().unwrap().write = Some((offset, data.len(), stable));
        Ok((data.len() as u32, Stable::Unstable, self.wcc(id)))
    }
    fn create(&self, c: &Call<'_>, dir: &Fh, _n: &[u8], how: &CreateHow) -> FsResult<Created> {
        let d = self.check(dir)?;
        self.changed(c);
        self.seen.lock().unwrap().create = Some(how.clone());
        Ok(self.created(d))
    }
    fn mkdir(&self, c: &Call<'_>, dir: &Fh, _n: &[u8], _s: &SetAttr) -> FsResult<Created> {
        let d = self.check(dir)?;
        self.changed(c);
        Ok(self.created(d))
    }
    fn symlink(
        &self,
        c: &Call<'_>,
        dir: &Fh,
        _n: &[u8],
        _t: &[u8],
        _s: &SetAttr,
    ) -> FsResult<Created> {
        let d = self.check(dir)?;
        self.changed(c);
        Ok(self.created(d))
    }
    fn mknod(
        &self,
        c: &Call<'_>,
        dir: &Fh,
        _n: &[u8],
        kind: NodeKind,
        _s: &SetAttr,
    ) -> FsResult<Created> {
        let d = self.check(dir)?;
        self.changed(c);
        self.seen.lock().unwrap().mknod = Some(kind);
        Ok(self.created(d))
    }
    fn remove(&self, c: &Call<'_>, dir: &Fh, _n: &[u8]) -> FsResult<Wcc> {
        let d = self.check(dir)?;
        self.changed(c);
        Ok(self.wcc(d))
    }
    fn rmdir(&self, c: &Call<'_>, dir: &Fh, _n: &[u8]) -> FsResult<Wcc> {
        let d = self.check(dir)?;
        self.changed(c);
        Ok(self.wcc(d))
    }
    fn rename(
        &self,
        c: &Call<'_>,
        from: &Fh,
        _f: &[u8],
        to: &Fh,
        _t: &[u8],
    ) -> FsResult<(Wcc, Wcc)> {
        let f = self.check(from)?;
        let t = self.check(to)?;
        self.changed(c);
        Ok((self.wcc(f), self.wcc(t)))
    }
    fn link(&self, c: &Call<'_>, file: &Fh, dir: &Fh, _n: &[u8]) -> FsResult<(Attr, Wcc)> {
        let f = self.check(file)?;
        let d = self.check(dir)?;
        self.changed(c);
        Ok((self.attr(f), self.wcc(d)))
    }
    fn readdir(
        &self,
        _c: &Call<'_>,
        dir: &Fh,
        cookie: u64,
        verifier: [u8; 8],
        max_entries: usize,
        plus: bool,
    ) -> FsResult<DirPage> {
        let d = self.check(dir)?;
        self.seen.lock().unwrap().readdir_max = Some(max_entries);
        if cookie != 0 && verifier != VERF {
            return Err(FsError::BadCookie);
        }
        let start = usize::try_from(cookie).map_err(|_| FsError::BadCookie)?;
        if start > self.names.len() {
            return Err(FsError::BadCookie);
        }
        let end = (start + max_entries).min(self.names.len());
        let entries = (start..end)
            .map(|i| DirEntry {
                fileid: 100 + i as u64,
                name: self.names[i].clone(),
                cookie: i as u64 + 1,
                plus: plus.then(|| (self.fh(100 + i as u64), self.attr(100 + i as u64))),
            })
            .collect();
        Ok(DirPage {
            verifier: VERF,
            entries,
            eof: end == self.names.len(),
            dir_attr: Some(self.attr(d)),
        })
    }
    fn fsstat(&self, _c: &Call<'_>, fh: &Fh) -> FsResult<(FsStat, Attr)> {
        let id = self.check(fh)?;
        Ok((
            FsStat {
                tbytes: 1,
                fbytes: 2,
                abytes: 3,
                tfiles: 4,
                ffiles: 5,
                afiles: 6,
                invarsec: 0,
            },
            self.attr(id),
        ))
    }
    fn fsinfo(&self, _c: &Call<'_>, fh: &Fh) -> FsResult<(FsInfo, Attr)> {
        let id = self.check(fh)?;
        Ok((
            FsInfo {
                maxfilesize: u64::MAX,
                time_delta: Time { sec: 0, nsec: 1 },
                link: true,
                symlink: true,
                homogeneous: true,
                cansettime: true,
            },
            self.attr(id),
        ))
    }
    fn pathconf(&self, _c: &Call<'_>, fh: &Fh) -> FsResult<(PathConf, Attr)> {
        let id = self.check(fh)?;
        Ok((
            PathConf {
                linkmax: 32000,
                name_max: 255,
                no_trunc: true,
                chown_restricted: true,
                case_insensitive: false,
                case_preserving: true,
            },
            self.attr(id),
        ))
    }
    fn commit(&self, _c: &Call<'_>, fh: &Fh, _o: u64, _n: u32) -> FsResult<Wcc> {
        let id = self.check(fh)?;
        Ok(self.wcc(id))
    }
}

fn server_with(exports: Vec<(Arc<FakeFs>, bool)>, max_io: u32) -> Server {
    Server::new(
        exports
            .into_iter()
            .map(|(fs, read_only)| {
                Export::new(
                    fs.export_id,
                    format!("/export{}", fs.export_id),
                    fs,
                    ExportAccess::allow_all(read_only),
                )
            })
            .collect(),
        std::sync::Arc::new(rnfsd_fs::WriteVerifier::new(WVERF)),
        max_io,
        None,
    )
}

fn server(fs: &Arc<FakeFs>, read_only: bool) -> Server {
    server_with(vec![(fs.clone(), read_only)], 64 * 1024)
}

fn ctx(server: &Server) -> CallCtx<'_> {
    CallCtx::new(
        1,
        "127.0.0.1:700".parse().unwrap(),
        "127.0.0.1:2049".parse().unwrap(),
        Auth::Sys(AuthSys {
            uid: 1000,
            gid: 1000,
            ..AuthSys::default()
        }),
        server,
        None,
        false,
    )
}

/// Run procedure `p` through the table on encoded `args`; decode the reply
/// body as `R`. Returns the decoded reply and its encoded length.
fn call_raw<R: Xdr>(ctx: &CallCtx<'_>, p: u32, args: &[u8]) -> (R, usize) {
    let row = &NFS3.versions[0].procs[p as usize];
    let mut d = Dec::new(args);
    let mut e = Enc::new();
    (row.run)(ctx, &mut d, &mut e).unwrap();
    assert_eq!(d.remaining(), 0, "{} left arguments unread", row.name);
    assert!(
        e.len() <= row.max_reply,
        "{} reply over max_reply",
        row.name
    );
    let r = from_slice::<R>(e.as_slice()).unwrap();
    (r, e.len())
}

fn call<A: Xdr, R: Xdr>(ctx: &CallCtx<'_>, p: u32, args: &A) -> (R, usize) {
    call_raw(ctx, p, &to_vec(args))
}

/// READ through the table: the reply and its encoded length.
fn read3(c: &CallCtx<'_>, file: NfsFh3, offset: u64, count: u32) -> (Read3Res, usize) {
    call(
        c,
        NFSPROC3_READ,
        &Read3Args {
            file,
            offset,
            count,
        },
    )
}

/// WRITE through the table; `count` is sent as given, not `data.len()`.
fn write3(
    c: &CallCtx<'_>,
    file: NfsFh3,
    offset: u64,
    count: u32,
    stable: StableHow,
    data: Vec<u8>,
) -> (Write3Res, usize) {
    let a = Write3Args {
        file,
        offset,
        count,
        stable,
        data,
    };
    call(c, NFSPROC3_WRITE, &a)
}

/// READDIR through the table.
fn readdir3(
    c: &CallCtx<'_>,
    dir: NfsFh3,
    cookie: u64,
    cookieverf: Verf3,
    count: u32,
) -> (ReadDir3Res, usize) {
    let a = ReadDir3Args {
        dir,
        cookie,
        cookieverf,
        count,
    };
    call(c, NFSPROC3_READDIR, &a)
}

/// READDIRPLUS through the table.
fn readdirplus3(
    c: &CallCtx<'_>,
    dir: NfsFh3,
    cookie: u64,
    cookieverf: Verf3,
    dircount: u32,
    maxcount: u32,
) -> (ReadDirPlus3Res, usize) {
    let a = ReadDirPlus3Args {
        dir,
        cookie,
        cookieverf,
        dircount,
        maxcount,
    };
    call(c, NFSPROC3_READDIRPLUS, &a)
}

/// REMOVE through the table.
fn remove3(c: &CallCtx<'_>, object: Diropargs3) -> Remove3Res {
    call(c, NFSPROC3_REMOVE, &Remove3Args { object }).0
}

/// RMDIR through the table.
fn rmdir3(c: &CallCtx<'_>, object: Diropargs3) -> Rmdir3Res {
    call(c, NFSPROC3_RMDIR, &Rmdir3Args { object }).0
}

fn nfh(fs: &FakeFs, id: u64) -> NfsFh3 {
    NfsFh3::new(fs.fh(id).0)
}

fn dirop(fs: &FakeFs, name: &str) -> Diropargs3 {
    Diropargs3 {
        dir: nfh(fs, ROOT),
        name: name.as_bytes().to_vec(),
    }
}

#[test]
fn table_is_complete_and_classified() {
    let procs = NFS3.versions[0].procs;
    assert_eq!(procs.len(), 22);
    let names = [
        "NULL",
        "GETATTR",
        "SETATTR",
        "LOOKUP",
        "ACCESS",
        "READLINK",
        "READ",
        "WRITE",
        "CREATE",
        "MKDIR",
        "SYMLINK",
        "MKNOD",
        "REMOVE",
        "RMDIR",
        "RENAME",
        "LINK",
        "READDIR",
        "READDIRPLUS",
        "FSSTAT",
        "FSINFO",
        "PATHCONF",
        "COMMIT",
    ];
    let cached = [2, 7, 8, 9, 10, 11, 12, 13, 14, 15];
    for (i, p) in procs.iter().enumerate() {
        assert_eq!(p.name, names[i]);
        let want = if cached.contains(&i) {
            CacheClass::Reply
        } else {
            CacheClass::None
        };
        assert_eq!(p.cache, want, "{}", p.name);
    }
    assert_eq!(NFS3.prog, 100003);
    assert_eq!(NFS3.versions[0].vers, 3);
}

#[test]
fn errno_table_follows_knfsd() {
    let cases = [
        (1, Nfsstat3::Perm),
        (2, Nfsstat3::NoEnt),
        (5, Nfsstat3::Io),
        (6, Nfsstat3::NxIo),
        (7, Nfsstat3::FBig),
        (9, Nfsstat3::Stale),
        (11, Nfsstat3::Jukebox),
        (12, Nfsstat3::Jukebox),
        (13, Nfsstat3::Acces),
        (16, Nfsstat3::Io), // EBUSY: not in knfsd's table
        (17, Nfsstat3::Exist),
        (18, Nfsstat3::XDev),
        (19, Nfsstat3::NoDev),
        (20, Nfsstat3::NotDir),
        (21, Nfsstat3::IsDir),
        (22, Nfsstat3::Inval),
        (23, Nfsstat3::ServerFault),
        (24, Nfsstat3::Jukebox),
        (26, Nfsstat3::Io),
        (27, Nfsstat3::FBig),
        (28, Nfsstat3::NoSpc),
        (30, Nfsstat3::RoFs),
        (31, Nfsstat3::MLink),
        (36, Nfsstat3::NameTooLong),
        (39, Nfsstat3::NotEmpty),
        (40, Nfsstat3::Io), // ELOOP: not in knfsd's table
        (95, Nfsstat3::NotSupp),
        (110, Nfsstat3::Jukebox),
        (116, Nfsstat3::Stale),
        (117, Nfsstat3::Io),
        (121, Nfsstat3::Io),
        (122, Nfsstat3::DQuot),
        (126, Nfsstat3::Perm),
        (0, Nfsstat3::Io),
        (-1, Nfsstat3::Io),
        (9999, Nfsstat3::Io),
    ];
    for (e, s) in cases {
        assert_eq!(nfsstat3_of(FsError::Errno(e)), s, "errno {e}");
    }
    assert_eq!(nfsstat3_of(FsError::BadHandle), Nfsstat3::BadHandle);
    assert_eq!(nfsstat3_of(FsError::Stale), Nfsstat3::Stale);
    assert_eq!(nfsstat3_of(FsError::NotSync), Nfsstat3::NotSync);
    assert_eq!(nfsstat3_of(FsError::BadCookie), Nfsstat3::BadCookie);
    assert_eq!(nfsstat3_of(FsError::NotSupported), Nfsstat3::NotSupp);
}

#[test]
fn times_clamp_to_nfstime3() {
    assert_eq!(
        nfstime3_of(Time { sec: -5, nsec: 7 }),
        Nfstime3 {
            seconds: 0,
            nseconds: 0
        }
    );
    assert_eq!(
        nfstime3_of(Time {
            sec: 1 << 40,
            nsec: 0
        }),
        Nfstime3 {
            seconds: u32::MAX,
            nseconds: 999_999_999
        }
    );
    assert_eq!(
        nfstime3_of(Time {
            sec: 12,
            nsec: 2_000_000_000
        }),
        Nfstime3 {
            seconds: 12,
            nseconds: 999_999_999
        }
    );
    let t = Nfstime3 {
        seconds: u32::MAX,
        nseconds: 5,
    };
    assert_eq!(
        time_of(t),
        Time {
            sec: i64::from(u32::MAX),
            nsec: 5
        }
    );
    assert_eq!(nfstime3_of(time_of(t)), t);
}

#[test]
fn null_is_empty() {
    let fs = FakeFs::new(1, 0);
    let s = server(&fs, false);
    let ((), n) = call(&ctx(&s), NFSPROC3_NULL, &());
    assert_eq!(n, 0);
}

#[test]
fn handles_are_routed_or_refused() {
    let fs = FakeFs::new(1, 0);
    let s = server(&fs, false);
    let c = ctx(&s);
    // Shorter than the export id: BADHANDLE.
    let (r, _): (GetAttr3Res, _) = call(
        &c,
        NFSPROC3_GETATTR,
        &GetAttr3Args {
            object: NfsFh3::new(vec![1, 0, 0]),
        },
    );
    assert_eq!(r, NfsRes::Fail(Nfsstat3::BadHandle, ()));
    // An export we do not have: STALE.
    let other = FakeFs::new(9, 0);
    let (r, _): (GetAttr3Res, _) = call(
        &c,
        NFSPROC3_GETATTR,
        &GetAttr3Args {
            object: nfh(&other, ROOT),
        },
    );
    assert_eq!(r, NfsRes::Fail(Nfsstat3::Stale, ()));
    // A handle the backend rejects: BADHANDLE from it.
    let mut bad = nfh(&fs, ROOT);
    bad.data[0] = 9;
    let (r, _): (GetAttr3Res, _) = call(&c, NFSPROC3_GETATTR, &GetAttr3Args { object: bad });
    assert_eq!(r, NfsRes::Fail(Nfsstat3::BadHandle, ()));
    // Longer than NFS3_FHSIZE: garbage arguments.
    let mut b = 65u32.to_be_bytes().to_vec();
    b.extend_from_slice(&[0; 68]);
    let mut e = Enc::new();
    let r = (NFS3.versions[0].procs[1].run)(&c, &mut Dec::new(&b), &mut e);
    assert_eq!(r, Err(ProcError::GarbageArgs));
    // Good handle.
    let (r, _): (GetAttr3Res, _) = call(
        &c,
        NFSPROC3_GETATTR,
        &GetAttr3Args {
            object: nfh(&fs, FILE),
        },
    );
    match r {
        NfsRes::Ok(ok) => {
            assert_eq!(ok.obj_attributes.fileid, FILE);
            assert_eq!(ok.obj_attributes.ftype, Ftype3::Reg);
            assert_eq!(ok.obj_attributes.mode, 0o755);
            assert_eq!(ok.obj_attributes.mtime.seconds, 2000);
        }
        other => panic!("{other:?}"),
    }
}

/// Page through a directory with READDIR at `count`; returns the names.
fn readdir_all(c: &CallCtx<'_>, fs: &FakeFs, count: u32) -> (Vec<Vec<u8>>, usize) {
    let mut cookie = 0;
    let mut verf = Verf3::default();
    let mut names = Vec::new();
    let mut calls = 0;
    loop {
        calls += 1;
        assert!(calls < 10_000, "no progress");
        let (r, len) = readdir3(c, nfh(fs, ROOT), cookie, verf, count);
        assert!(len <= count as usize, "reply {len} over count {count}");
        let NfsRes::Ok(ok) = r else { panic!("{r:?}") };
        assert!(ok.dir_attributes.is_some());
        verf = ok.cookieverf;
        if !ok.eof {
            assert!(!ok.entries.is_empty(), "empty non-eof page");
        }
        for e in &ok.entries {
            names.push(e.name.clone());
            cookie = e.cookie;
        }
        if ok.eof {
            return (names, calls);
        }
    }
}

#[test]
fn readdir_pages_every_name_once_within_count() {
    let fs = FakeFs::new(1, 300);
    let s = server(&fs, false);
    let c = ctx(&s);
    let (names, calls) = readdir_all(&c, &fs, 512);
    assert_eq!(names, fs.names);
    assert!(calls > 10, "{calls} calls for 300 names at 512 bytes");
    let uniq: HashSet<_> = names.iter().collect();
    assert_eq!(uniq.len(), 300);
    // Bigger counts still page exactly once, with fewer calls.
    let (names, calls2) = readdir_all(&c, &fs, 4096);
    assert_eq!(names, fs.names);
    assert!(calls2 < calls);
    // A count larger than max_io is capped by it (64 KiB here): one call.
    let (names, calls3) = readdir_all(&c, &fs, u32::MAX);
    assert_eq!(names, fs.names);
    assert_eq!(calls3, 1);
}

#[test]
fn readdir_fills_close_to_count() {
    // The batch asked of the backend is large enough that a page is never
    // short for lack of entries.
    let fs = FakeFs::new(1, 300);
    let s = server(&fs, false);
    let c = ctx(&s);
    let (r, len) = readdir3(&c, nfh(&fs, ROOT), 0, Verf3::default(), 512);
    let NfsRes::Ok(ok) = r else { panic!() };
    let next = ok.entries.len();
    // The next name would not have fit.
    assert!(len + entry3_len(fs.names[next].len()) > 512);
    assert!(fs.seen.lock().unwrap().readdir_max.unwrap() > next);
}

#[test]
fn readdir_too_small() {
    let fs = FakeFs::new(1, 5);
    let s = server(&fs, false);
    let c = ctx(&s);
    let fixed = 4 + 4 + FATTR3_LEN + 8 + 4 + 4;
    let first = entry3_len(fs.names[0].len());
    let rd =
        |count: u32| -> ReadDir3Res { readdir3(&c, nfh(&fs, ROOT), 0, Verf3::default(), count).0 };
    for count in [0, 10, fixed as u32, (fixed + first - 1) as u32] {
        match rd(count) {
            NfsRes::Fail(Nfsstat3::TooSmall, attr) => assert!(attr.is_some(), "count {count}"),
            other => panic!("count {count}: {other:?}"),
        }
    }
    match rd((fixed + first) as u32) {
        NfsRes::Ok(ok) => {
            assert_eq!(ok.entries.len(), 1);
            assert!(!ok.eof);
        }
        other => panic!("{other:?}"),
    }
    // An empty directory fits in the fixed part alone.
    let empty = FakeFs::new(2, 0);
    let s2 = server(&empty, false);
    let (r, len): (ReadDir3Res, _) = call(
        &ctx(&s2),
        NFSPROC3_READDIR,
        &ReadDir3Args {
            dir: nfh(&empty, ROOT),
            cookie: 0,
            cookieverf: Verf3::default(),
            count: fixed as u32,
        },
    );
    assert_eq!(len, fixed);
    match r {
        NfsRes::Ok(ok) => assert!(ok.eof && ok.entries.is_empty()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn readdir_bad_cookie_and_verifier() {
    let fs = FakeFs::new(1, 10);
    let s = server(&fs, false);
    let c = ctx(&s);
    let (r, _) = readdir3(&c, nfh(&fs, ROOT), 3, Verf3([1; 8]), 4096);
    match r {
        NfsRes::Fail(Nfsstat3::BadCookie, attr) => assert!(attr.is_some()),
        other => panic!("{other:?}"),
    }
    // The right verifier resumes after the cookie.
    let (r, _) = readdir3(&c, nfh(&fs, ROOT), 3, Verf3(VERF), 4096);
    match r {
        NfsRes::Ok(ok) => {
            assert_eq!(ok.cookieverf, Verf3(VERF));
            assert_eq!(ok.entries[0].name, fs.names[3]);
            assert_eq!(ok.entries.len(), 7);
            assert!(ok.eof);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn readdirplus_respects_dircount_and_maxcount() {
    let fs = FakeFs::new(1, 300);
    let s = server(&fs, false);
    let c = ctx(&s);
    for (dircount, maxcount) in [(512u32, 4096u32), (4096, 2048), (1024, 8192), (0, 1024)] {
        let mut cookie = 0;
        let mut verf = Verf3::default();
        let mut names = Vec::new();
        for _ in 0..10_000 {
            let (r, len) = readdirplus3(&c, nfh(&fs, ROOT), cookie, verf, dircount, maxcount);
            assert!(len <= maxcount as usize);
            let NfsRes::Ok(ok) = r else { panic!("{r:?}") };
            let dir_part: usize = ok.entries.iter().map(EntryPlus3::dir_len).sum();
            assert!(
                ok.entries.len() == 1 || dir_part <= dircount as usize,
                "dircount {dircount}: {dir_part}"
            );
            verf = ok.cookieverf;
            for e in &ok.entries {
                let a = e.name_attributes.as_ref().unwrap();
                assert_eq!(e.fileid, a.fileid);
                assert_eq!(e.name_handle.as_ref().unwrap().data, fs.fh(e.fileid).0);
                names.push(e.name.clone());
                cookie = e.cookie;
            }
            if ok.eof {
                break;
            }
            assert!(!ok.entries.is_empty());
        }
        assert_eq!(names, fs.names, "dircount {dircount} maxcount {maxcount}");
    }
    // maxcount below one entry with attributes and handle: TOOSMALL.
    let (r, _) = readdirplus3(&c, nfh(&fs, ROOT), 0, Verf3::default(), 4096, 200);
    assert_eq!(r.status(), Nfsstat3::TooSmall);
}

#[test]
fn read_only_export_refuses_changes() {
    let fs = FakeFs::new(1, 3);
    let s = server(&fs, true);
    let c = ctx(&s);
    let check_wcc = |r: Nfsstat3, w: &WccData| {
        assert_eq!(r, Nfsstat3::RoFs);
        assert!(w.after.is_some(), "post-op attributes missing");
    };
    let (r, _): (SetAttr3Res, _) = call(
        &c,
        NFSPROC3_SETATTR,
        &SetAttr3Args {
            object: nfh(&fs, FILE),
            new_attributes: Sattr3::default(),
            guard: None,
        },
    );
    let NfsRes::Fail(st, w) = r else { panic!() };
    check_wcc(st, &w);
    let (r, _) = write3(&c, nfh(&fs, FILE), 0, 3, StableHow::FileSync, vec![1, 2, 3]);
    let NfsRes::Fail(st, w) = r else { panic!() };
    check_wcc(st, &w);
    assert!(fs.seen.lock().unwrap().write.is_none());
    for (p, args) in [
        (
            NFSPROC3_CREATE,
            to_vec(&Create3Args {
                where_: dirop(&fs, "n"),
                how: CreateHow3::Unchecked(Sattr3::default()),
            }),
        ),
        (
            NFSPROC3_MKDIR,
            to_vec(&Mkdir3Args {
                where_: dirop(&fs, "n"),
                attributes: Sattr3::default(),
            }),
        ),
        (
            NFSPROC3_SYMLINK,
            to_vec(&Symlink3Args {
                where_: dirop(&fs, "n"),
                symlink_attributes: Sattr3::default(),
                symlink_data: b"t".to_vec(),
            }),
        ),
        (
            NFSPROC3_MKNOD,
            to_vec(&Mknod3Args {
                where_: dirop(&fs, "n"),
                what: MknodData3::Fifo(Sattr3::default()),
            }),
        ),
    ] {
        let (r, _): (Create3Res, _) = call_raw(&c, p, &args);
        let NfsRes::Fail(st, w) = r else { panic!() };
        check_wcc(st, &w);
    }
    for p in [NFSPROC3_REMOVE, NFSPROC3_RMDIR] {
        let (r, _): (Remove3Res, _) = call(
            &c,
            p,
            &Remove3Args {
                object: dirop(&fs, "n"),
            },
        );
        let NfsRes::Fail(st, w) = r else { panic!() };
        check_wcc(st, &w);
    }
    let (r, _): (Rename3Res, _) = call(
        &c,
        NFSPROC3_RENAME,
        &Rename3Args {
            from: dirop(&fs, "a"),
            to: dirop(&fs, "b"),
        },
    );
    let NfsRes::Fail(st, w) = r else { panic!() };
    check_wcc(st, &w.fromdir_wcc);
    check_wcc(st, &w.todir_wcc);
    let (r, _): (Link3Res, _) = call(
        &c,
        NFSPROC3_LINK,
        &Link3Args {
            file: nfh(&fs, FILE),
            link: dirop(&fs, "l"),
        },
    );
    let NfsRes::Fail(st, w) = r else { panic!() };
    check_wcc(st, &w.linkdir_wcc);
    assert!(w.file_attributes.is_some());
    let (r, _): (Commit3Res, _) = call(
        &c,
        NFSPROC3_COMMIT,
        &Commit3Args {
            file: nfh(&fs, FILE),
            offset: 0,
            count: 0,
        },
    );
    let NfsRes::Fail(st, w) = r else { panic!() };
    check_wcc(st, &w);
    // Reads still work, and ACCESS grants no change rights.
    let (r, _) = read3(&c, nfh(&fs, FILE), 0, 10);
    assert_eq!(r.status(), Nfsstat3::Ok);
    let (r, _): (Access3Res, _) = call(
        &c,
        NFSPROC3_ACCESS,
        &Access3Args {
            object: nfh(&fs, FILE),
            access: 0x3f,
        },
    );
    match r {
        NfsRes::Ok(ok) => assert_eq!(ok.access, ACCESS3_READ | ACCESS3_LOOKUP | ACCESS3_EXECUTE),
        other => panic!("{other:?}"),
    }
}

/// One call of every procedure but NULL; returns the status and whether
/// the reply carried every post-op attribute its failure body has room for
/// (pre-op attributes are never expected in a failure).
fn call_every(c: &CallCtx<'_>, fs: &FakeFs) -> Vec<(&'static str, Nfsstat3, bool)> {
    let f = || nfh(fs, FILE);
    let d = |n: &str| dirop(fs, n);
    let wcc_ok = |w: &WccData| w.after.is_some();
    let mut out = Vec::new();
    let (r, _): (GetAttr3Res, _) = call(c, 1, &GetAttr3Args { object: f() });
    out.push(("GETATTR", r.status(), true));
    let (r, _): (SetAttr3Res, _) = call(
        c,
        2,
        &SetAttr3Args {
            object: f(),
            new_attributes: Sattr3::default(),
            guard: None,
        },
    );
    out.push(match r {
        NfsRes::Ok(_) => ("SETATTR", Nfsstat3::Ok, true),
        NfsRes::Fail(s, w) => ("SETATTR", s, wcc_ok(&w)),
    });
    let (r, _): (Lookup3Res, _) = call(c, 3, &Lookup3Args { what: d("file") });
    out.push(match r {
        NfsRes::Ok(_) => ("LOOKUP", Nfsstat3::Ok, true),
        NfsRes::Fail(s, a) => ("LOOKUP", s, a.is_some()),
    });
    let (r, _): (Access3Res, _) = call(
        c,
        4,
        &Access3Args {
            object: f(),
            access: 1,
        },
    );
    out.push(match r {
        NfsRes::Ok(_) => ("ACCESS", Nfsstat3::Ok, true),
        NfsRes::Fail(s, a) => ("ACCESS", s, a.is_some()),
    });
    let (r, _): (ReadLink3Res, _) = call(c, 5, &ReadLink3Args { symlink: f() });
    out.push(match r {
        NfsRes::Ok(_) => ("READLINK", Nfsstat3::Ok, true),
        NfsRes::Fail(s, a) => ("READLINK", s, a.is_some()),
    });
    let (r, _) = read3(c, f(), 0, 100);
    out.push(match r {
        NfsRes::Ok(_) => ("READ", Nfsstat3::Ok, true),
        NfsRes::Fail(s, a) => ("READ", s, a.is_some()),
    });
    let (r, _) = write3(c, f(), 0, 1, StableHow::Unstable, vec![1]);
    out.push(match r {
        NfsRes::Ok(_) => ("WRITE", Nfsstat3::Ok, true),
        NfsRes::Fail(s, w) => ("WRITE", s, wcc_ok(&w)),
    });
    let creates: [(&str, u32, Vec<u8>); 4] = [
        (
            "CREATE",
            8,
            to_vec(&Create3Args {
                where_: d("n"),
                how: CreateHow3::Guarded(Sattr3::default()),
            }),
        ),
        (
            "MKDIR",
            9,
            to_vec(&Mkdir3Args {
                where_: d("n"),
                attributes: Sattr3::default(),
            }),
        ),
        (
            "SYMLINK",
            10,
            to_vec(&Symlink3Args {
                where_: d("n"),
                symlink_attributes: Sattr3::default(),
                symlink_data: b"t".to_vec(),
            }),
        ),
        (
            "MKNOD",
            11,
            to_vec(&Mknod3Args {
                where_: d("n"),
                what: MknodData3::Sock(Sattr3::default()),
            }),
        ),
    ];
    for (name, p, args) in creates {
        let (r, _): (Create3Res, _) = call_raw(c, p, &args);
        out.push(match r {
            NfsRes::Ok(ok) => (name, Nfsstat3::Ok, ok.obj.is_some()),
            NfsRes::Fail(s, w) => (name, s, wcc_ok(&w)),
        });
    }
    for (name, p) in [("REMOVE", 12), ("RMDIR", 13)] {
        let (r, _): (Remove3Res, _) = call(c, p, &Remove3Args { object: d("n") });
        out.push(match r {
            NfsRes::Ok(_) => (name, Nfsstat3::Ok, true),
            NfsRes::Fail(s, w) => (name, s, wcc_ok(&w)),
        });
    }
    let (r, _): (Rename3Res, _) = call(
        c,
        14,
        &Rename3Args {
            from: d("a"),
            to: d("b"),
        },
    );
    out.push(match r {
        NfsRes::Ok(_) => ("RENAME", Nfsstat3::Ok, true),
        NfsRes::Fail(s, w) => ("RENAME", s, wcc_ok(&w.fromdir_wcc) && wcc_ok(&w.todir_wcc)),
    });
    let (r, _): (Link3Res, _) = call(
        c,
        15,
        &Link3Args {
            file: f(),
            link: d("l"),
        },
    );
    out.push(match r {
        NfsRes::Ok(_) => ("LINK", Nfsstat3::Ok, true),
        NfsRes::Fail(s, w) => (
            "LINK",
            s,
            w.file_attributes.is_some() && wcc_ok(&w.linkdir_wcc),
        ),
    });
    let (r, _) = readdir3(c, nfh(fs, ROOT), 0, Verf3::default(), 4096);
    out.push(match r {
        NfsRes::Ok(_) => ("READDIR", Nfsstat3::Ok, true),
        NfsRes::Fail(s, a) => ("READDIR", s, a.is_some()),
    });
    let (r, _) = readdirplus3(c, nfh(fs, ROOT), 0, Verf3::default(), 4096, 8192);
    out.push(match r {
        NfsRes::Ok(_) => ("READDIRPLUS", Nfsstat3::Ok, true),
        NfsRes::Fail(s, a) => ("READDIRPLUS", s, a.is_some()),
    });
    let (r, _): (FsStat3Res, _) = call(c, 18, &FsStat3Args { fsroot: f() });
    out.push(match r {
        NfsRes::Ok(_) => ("FSSTAT", Nfsstat3::Ok, true),
        NfsRes::Fail(s, a) => ("FSSTAT", s, a.is_some()),
    });
    let (r, _): (FsInfo3Res, _) = call(c, 19, &FsInfo3Args { fsroot: f() });
    out.push(match r {
        NfsRes::Ok(_) => ("FSINFO", Nfsstat3::Ok, true),
        NfsRes::Fail(s, a) => ("FSINFO", s, a.is_some()),
    });
    let (r, _): (PathConf3Res, _) = call(c, 20, &PathConf3Args { object: f() });
    out.push(match r {
        NfsRes::Ok(_) => ("PATHCONF", Nfsstat3::Ok, true),
        NfsRes::Fail(s, a) => ("PATHCONF", s, a.is_some()),
    });
    let (r, _): (Commit3Res, _) = call(
        c,
        21,
        &Commit3Args {
            file: f(),
            offset: 0,
            count: 0,
        },
    );
    out.push(match r {
        NfsRes::Ok(_) => ("COMMIT", Nfsstat3::Ok, true),
        NfsRes::Fail(s, w) => ("COMMIT", s, wcc_ok(&w)),
    });
    out
}

#[test]
fn every_procedure_succeeds_on_the_happy_path() {
    let fs = FakeFs::new(1, 3);
    let s = server(&fs, false);
    let res = call_every(&ctx(&s), &fs);
    assert_eq!(res.len(), 21);
    for (name, st, extra) in res {
        assert_eq!(st, Nfsstat3::Ok, "{name}");
        assert!(extra, "{name}");
    }
}

#[test]
fn every_failure_carries_status_and_post_op_attributes() {
    let fs = FakeFs::new(1, 3);
    let s = server(&fs, false);
    let c = ctx(&s);
    for (err, want) in [
        (FsError::Errno(13), Nfsstat3::Acces),
        (FsError::Errno(28), Nfsstat3::NoSpc),
        (FsError::Stale, Nfsstat3::Stale),
        (FsError::NotSupported, Nfsstat3::NotSupp),
    ] {
        *fs.fail.lock().unwrap() = Some(err);
        let res = call_every(&c, &fs);
        for (name, st, attrs) in res {
            if name == "GETATTR" {
                // The fake's getattr is the one thing that keeps working.
                continue;
            }
            assert_eq!(st, want, "{name}");
            assert!(attrs, "{name}: failure without post-op attributes");
        }
    }
    // When even getattr fails the reply still decodes, without attributes.
    *fs.getattr_fails.lock().unwrap() = true;
    for (name, st, _) in call_every(&c, &fs) {
        if name != "GETATTR" {
            assert_eq!(st, Nfsstat3::NotSupp, "{name}");
        } else {
            assert_eq!(st, Nfsstat3::Io);
        }
    }
}

#[test]
fn unknown_export_fails_every_procedure_with_stale() {
    let fs = FakeFs::new(1, 3);
    let other = FakeFs::new(2, 3);
    let s = server(&other, false);
    for (name, st, _) in call_every(&ctx(&s), &fs) {
        assert_eq!(st, Nfsstat3::Stale, "{name}");
    }
}

#[test]
fn bad_names_never_reach_the_backend() {
    let fs = FakeFs::new(1, 0);
    let s = server(&fs, false);
    let c = ctx(&s);
    for name in ["", "a/b", "a\0b"] {
        let (r, _): (Create3Res, _) = call(
            &c,
            NFSPROC3_CREATE,
            &Create3Args {
                where_: dirop(&fs, name),
                how: CreateHow3::Unchecked(Sattr3::default()),
            },
        );
        assert_eq!(r.status(), Nfsstat3::Inval, "{name:?}");
        let (r, _): (Lookup3Res, _) = call(
            &c,
            NFSPROC3_LOOKUP,
            &Lookup3Args {
                what: dirop(&fs, name),
            },
        );
        assert_eq!(
            r,
            NfsRes::Fail(Nfsstat3::Inval, Some(fattr3_of(&fs.attr(ROOT))))
        );
    }
    assert!(fs.seen.lock().unwrap().create.is_none());
}

#[test]
fn read_caps_count_and_reports_eof() {
    let fs = FakeFs::new(1, 0);
    let s = server_with(vec![(fs.clone(), false)], 4096);
    let c = ctx(&s);
    let (r, _) = read3(&c, nfh(&fs, FILE), 100, 1 << 20);
    let NfsRes::Ok(ok) = r else { panic!() };
    assert_eq!(fs.seen.lock().unwrap().read_count, Some(4096));
    assert_eq!(ok.count, 4096);
    assert_eq!(ok.data.len(), 4096);
    assert_eq!(ok.data[0], 100);
    assert!(!ok.eof);
    let (r, _) = read3(&c, nfh(&fs, FILE), 9_000, 4096);
    let NfsRes::Ok(ok) = r else { panic!() };
    assert_eq!(ok.count, 1000);
    assert!(ok.eof);
    assert_eq!(ok.file_attributes.unwrap().size, 10_000);
}

#[test]
fn write_checks_count_caps_and_returns_the_verifier() {
    let fs = FakeFs::new(1, 0);
    let s = server_with(vec![(fs.clone(), false)], 4096);
    let c = ctx(&s);
    let w = |count: u32, len: usize, stable: StableHow| -> Write3Res {
        write3(&c, nfh(&fs, FILE), 8, count, stable, vec![0xab; len]).0
    };
    match w(10, 9, StableHow::Unstable) {
        NfsRes::Fail(Nfsstat3::Inval, wcc) => assert!(wcc.after.is_some()),
        other => panic!("{other:?}"),
    }
    match w(10_000, 10_000, StableHow::FileSync) {
        NfsRes::Ok(ok) => {
            assert_eq!(ok.count, 4096);
            // The fake claims Unstable; we never report less than asked.
            assert_eq!(ok.committed, StableHow::FileSync);
            assert_eq!(ok.verf, Verf3(WVERF));
            assert!(ok.file_wcc.before.is_some() && ok.file_wcc.after.is_some());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        fs.seen.lock().unwrap().write,
        Some((8, 4096, Stable::FileSync))
    );
    let (r, _): (Commit3Res, _) = call(
        &c,
        NFSPROC3_COMMIT,
        &Commit3Args {
            file: nfh(&fs, FILE),
            offset: 0,
            count: 0,
        },
    );
    match r {
        NfsRes::Ok(ok) => assert_eq!(ok.verf, Verf3(WVERF)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn arguments_are_converted_for_the_backend() {
    let fs = FakeFs::new(1, 0);
    let s = server(&fs, false);
    let c = ctx(&s);
    let sattr = Sattr3 {
        mode: Some(0o100644),
        uid: Some(5),
        gid: None,
        size: Some(77),
        atime: SetTime3::ServerTime,
        mtime: SetTime3::ClientTime(Nfstime3 {
            seconds: 9,
            nseconds: 10,
        }),
    };
    let want = SetAttr {
        mode: Some(0o644),
        uid: Some(5),
        gid: None,
        size: Some(77),
        atime: SetTime::ServerTime,
        mtime: SetTime::ClientTime(Time { sec: 9, nsec: 10 }),
    };
    let _: (SetAttr3Res, _) = call(
        &c,
        NFSPROC3_SETATTR,
        &SetAttr3Args {
            object: nfh(&fs, FILE),
            new_attributes: sattr.clone(),
            guard: Some(Nfstime3 {
                seconds: 3000,
                nseconds: 3,
            }),
        },
    );
    assert_eq!(
        fs.seen.lock().unwrap().setattr,
        Some((want.clone(), Some(Time { sec: 3000, nsec: 3 })))
    );
    let _: (Create3Res, _) = call(
        &c,
        NFSPROC3_CREATE,
        &Create3Args {
            where_: dirop(&fs, "g"),
            how: CreateHow3::Guarded(sattr),
        },
    );
    assert_eq!(
        fs.seen.lock().unwrap().create,
        Some(CreateHow::Guarded(want))
    );
    let (r, _): (Create3Res, _) = call(
        &c,
        NFSPROC3_CREATE,
        &Create3Args {
            where_: dirop(&fs, "x"),
            how: CreateHow3::Exclusive(Verf3(*b"12345678")),
        },
    );
    assert_eq!(
        fs.seen.lock().unwrap().create,
        Some(CreateHow::Exclusive(*b"12345678"))
    );
    match r {
        NfsRes::Ok(ok) => {
            assert_eq!(ok.obj.unwrap().data, fs.fh(500).0);
            assert_eq!(ok.obj_attributes.unwrap().fileid, 500);
            assert!(ok.dir_wcc.before.is_some());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn mknod_kinds_and_badtype() {
    let fs = FakeFs::new(1, 0);
    let s = server(&fs, false);
    let c = ctx(&s);
    let spec = Specdata3 {
        specdata1: 8,
        specdata2: 1,
    };
    for (what, kind) in [
        (
            MknodData3::Chr(Sattr3::default(), spec),
            NodeKind::Char { major: 8, minor: 1 },
        ),
        (
            MknodData3::Blk(Sattr3::default(), spec),
            NodeKind::Block { major: 8, minor: 1 },
        ),
        (MknodData3::Sock(Sattr3::default()), NodeKind::Socket),
        (MknodData3::Fifo(Sattr3::default()), NodeKind::Fifo),
    ] {
        let (r, _): (Mknod3Res, _) = call(
            &c,
            NFSPROC3_MKNOD,
            &Mknod3Args {
                where_: dirop(&fs, "dev"),
                what,
            },
        );
        assert_eq!(r.status(), Nfsstat3::Ok);
        assert_eq!(fs.seen.lock().unwrap().mknod.take(), Some(kind));
    }
    for t in [Ftype3::Reg, Ftype3::Dir, Ftype3::Lnk] {
        let (r, _): (Mknod3Res, _) = call(
            &c,
            NFSPROC3_MKNOD,
            &Mknod3Args {
                where_: dirop(&fs, "dev"),
                what: MknodData3::Other(t),
            },
        );
        match r {
            NfsRes::Fail(Nfsstat3::BadType, w) => assert!(w.after.is_some()),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(fs.seen.lock().unwrap().mknod, None);
}

#[test]
fn cross_export_rename_and_link_are_xdev() {
    let a = FakeFs::new(1, 0);
    let b = FakeFs::new(2, 0);
    let s = server_with(vec![(a.clone(), false), (b.clone(), false)], 65536);
    let c = ctx(&s);
    let (r, _): (Rename3Res, _) = call(
        &c,
        NFSPROC3_RENAME,
        &Rename3Args {
            from: dirop(&a, "x"),
            to: dirop(&b, "y"),
        },
    );
    let NfsRes::Fail(st, w) = r else { panic!() };
    assert_eq!(st, Nfsstat3::XDev);
    assert!(w.fromdir_wcc.after.is_some() && w.todir_wcc.after.is_some());
    let (r, _): (Link3Res, _) = call(
        &c,
        NFSPROC3_LINK,
        &Link3Args {
            file: nfh(&a, FILE),
            link: dirop(&b, "y"),
        },
    );
    assert_eq!(r.status(), Nfsstat3::XDev);
    // One side unknown: STALE, with wcc for the side that resolved.
    let gone = FakeFs::new(3, 0);
    let (r, _): (Rename3Res, _) = call(
        &c,
        NFSPROC3_RENAME,
        &Rename3Args {
            from: dirop(&a, "x"),
            to: dirop(&gone, "y"),
        },
    );
    let NfsRes::Fail(st, w) = r else { panic!() };
    assert_eq!(st, Nfsstat3::Stale);
    assert!(w.fromdir_wcc.after.is_some() && w.todir_wcc.after.is_none());
}

#[test]
fn fsinfo_advertises_server_transfer_sizes() {
    let fs = FakeFs::new(1, 0);
    let s = server_with(vec![(fs.clone(), false)], 1 << 20);
    let (r, _): (FsInfo3Res, _) = call(
        &ctx(&s),
        NFSPROC3_FSINFO,
        &FsInfo3Args {
            fsroot: nfh(&fs, ROOT),
        },
    );
    let NfsRes::Ok(ok) = r else { panic!() };
    assert_eq!(
        (ok.rtmax, ok.rtpref, ok.wtmax, ok.wtpref),
        (1 << 20, 1 << 20, 1 << 20, 1 << 20)
    );
    assert_eq!((ok.rtmult, ok.wtmult, ok.dtpref), (4096, 4096, 65536));
    assert_eq!(ok.maxfilesize, u64::MAX);
    assert_eq!(
        ok.time_delta,
        Nfstime3 {
            seconds: 0,
            nseconds: 1
        }
    );
    assert_eq!(
        ok.properties,
        FSF3_LINK | FSF3_SYMLINK | FSF3_HOMOGENEOUS | FSF3_CANSETTIME
    );
    assert!(ok.obj_attributes.is_some());
}

/// xorshift64*: deterministic bytes without a dev-dependency.
fn rng(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

#[test]
fn hostile_arguments_never_panic() {
    let fs = FakeFs::new(1, 50);
    let s = server(&fs, false);
    let c = ctx(&s);
    let valid_fh = to_vec(&nfh(&fs, ROOT));
    let mut st = 0x1234_5678_9abc_def1u64;
    for round in 0..3000 {
        let len = (rng(&mut st) % 200) as usize;
        let mut b: Vec<u8> = Vec::with_capacity(len + valid_fh.len());
        // Half the inputs start with a real handle so handlers run.
        if round % 2 == 0 {
            b.extend_from_slice(&valid_fh);
        }
        while b.len() < len {
            let w = rng(&mut st);
            // Small words make lengths, bools and discriminants plausible.
            let v = if w & 1 == 0 { (w >> 8) % 4 } else { w >> 32 } as u32;
            b.extend_from_slice(&v.to_be_bytes());
        }
        for row in NFS3.versions[0].procs {
            let mut e = Enc::new();
            if (row.run)(&c, &mut Dec::new(&b), &mut e).is_ok() {
                assert!(e.len() <= row.max_reply, "{}", row.name);
            }
        }
    }
}

/// The same table over the real local-directory backend.
mod local {
    use std::path::Path;

    use rnfsd_fs::local::{LocalFs, LocalOptions};

    use super::*;

    fn local_server(root: &Path, read_only: bool, max_io: u32) -> Server {
        let fs = LocalFs::open(root, 42, LocalOptions::default()).unwrap();
        Server::new(
            vec![Export::new(
                42,
                root.to_string_lossy(),
                Arc::new(fs),
                ExportAccess::allow_all(read_only),
            )],
            std::sync::Arc::new(rnfsd_fs::WriteVerifier::new(WVERF)),
            max_io,
            None,
        )
    }

    /// Calls as root, so the test owns whatever the temp dir holds.
    fn root_ctx(server: &Server) -> CallCtx<'_> {
        let mut c = ctx(server);
        c.auth = Auth::Sys(AuthSys::default());
        c
    }

    fn root_fh(s: &Server) -> NfsFh3 {
        NfsFh3::new(s.exports()[0].backend.root().0)
    }

    fn at(dir: &NfsFh3, name: &str) -> Diropargs3 {
        Diropargs3 {
            dir: dir.clone(),
            name: name.as_bytes().to_vec(),
        }
    }

    fn lookup_fh(c: &CallCtx<'_>, dir: &NfsFh3, name: &str) -> Lookup3Res {
        call(
            c,
            NFSPROC3_LOOKUP,
            &Lookup3Args {
                what: at(dir, name),
            },
        )
        .0
    }

    #[test]
    fn readdir_pages_300_names_at_count_512() {
        let tmp = tempfile::tempdir().unwrap();
        let mut want: Vec<Vec<u8>> = vec![b".".to_vec(), b"..".to_vec()];
        for i in 0..300 {
            let n = format!("file-{i}-{}", "y".repeat(i % 13));
            std::fs::write(tmp.path().join(&n), b"").unwrap();
            want.push(n.into_bytes());
        }
        let s = local_server(tmp.path(), false, 1 << 20);
        let c = root_ctx(&s);
        let mut cookie = 0;
        let mut verf = Verf3::default();
        let mut got = Vec::new();
        let mut calls = 0;
        loop {
            calls += 1;
            assert!(calls < 1000);
            let (r, len) = readdir3(&c, root_fh(&s), cookie, verf, 512);
            assert!(len <= 512, "{len}");
            let NfsRes::Ok(ok) = r else { panic!("{r:?}") };
            verf = ok.cookieverf;
            for e in ok.entries {
                cookie = e.cookie;
                got.push(e.name);
            }
            if ok.eof {
                break;
            }
        }
        assert!(calls > 10);
        let mut sorted = got.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), got.len(), "a name was sent twice");
        want.sort();
        assert_eq!(sorted, want);

        // READDIRPLUS the way the Linux client asks (dircount = maxcount/8).
        let (mut cookie, mut verf, mut n) = (0, Verf3::default(), 0);
        loop {
            let (r, len) = readdirplus3(&c, root_fh(&s), cookie, verf, 1024, 8192);
            assert!(len <= 8192);
            let NfsRes::Ok(ok) = r else { panic!("{r:?}") };
            verf = ok.cookieverf;
            for e in ok.entries {
                assert!(e.name_attributes.is_some() && e.name_handle.is_some());
                cookie = e.cookie;
                n += 1;
            }
            if ok.eof {
                break;
            }
        }
        assert_eq!(n, 302);
    }

    #[test]
    fn file_life_cycle_and_failures() {
        let tmp = tempfile::tempdir().unwrap();
        let s = local_server(tmp.path(), false, 64 * 1024);
        let c = root_ctx(&s);
        let root = root_fh(&s);

        // LOOKUP of a missing name: NOENT with the directory's attributes.
        match lookup_fh(&c, &root, "nope") {
            NfsRes::Fail(Nfsstat3::NoEnt, Some(a)) => assert_eq!(a.ftype, Ftype3::Dir),
            other => panic!("{other:?}"),
        }

        // CREATE, then GUARDED again: EXIST with directory wcc.
        let create = |how: CreateHow3| -> Create3Res {
            call(
                &c,
                NFSPROC3_CREATE,
                &Create3Args {
                    where_: at(&root, "f"),
                    how,
                },
            )
            .0
        };
        let fh = match create(CreateHow3::Guarded(Sattr3 {
            mode: Some(0o640),
            ..Sattr3::default()
        })) {
            NfsRes::Ok(ok) => {
                let a = ok.obj_attributes.unwrap();
                assert_eq!((a.ftype, a.mode, a.size), (Ftype3::Reg, 0o640, 0));
                assert!(ok.dir_wcc.after.is_some());
                ok.obj.unwrap()
            }
            other => panic!("{other:?}"),
        };
        match create(CreateHow3::Guarded(Sattr3::default())) {
            NfsRes::Fail(Nfsstat3::Exist, w) => assert!(w.after.is_some()),
            other => panic!("{other:?}"),
        }

        // WRITE, COMMIT, READ back.
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let (r, _) = write3(
            &c,
            fh.clone(),
            0,
            data.len() as u32,
            StableHow::Unstable,
            data.clone(),
        );
        match r {
            NfsRes::Ok(ok) => {
                assert_eq!(ok.count, 10_000);
                assert_eq!(ok.verf, Verf3(WVERF));
                assert_eq!(ok.file_wcc.after.unwrap().size, 10_000);
            }
            other => panic!("{other:?}"),
        }
        let (r, _): (Commit3Res, _) = call(
            &c,
            NFSPROC3_COMMIT,
            &Commit3Args {
                file: fh.clone(),
                offset: 0,
                count: 0,
            },
        );
        assert_eq!(r.status(), Nfsstat3::Ok);
        let (r, _) = read3(&c, fh.clone(), 5_000, 8_000);
        match r {
            NfsRes::Ok(ok) => {
                assert!(ok.eof);
                assert_eq!(ok.count, 5_000);
                assert_eq!(ok.data, &data[5_000..]);
            }
            other => panic!("{other:?}"),
        }

        // SETATTR with a wrong guard: NOT_SYNC; truncate with the right one.
        let ctime = match call::<_, GetAttr3Res>(
            &c,
            NFSPROC3_GETATTR,
            &GetAttr3Args { object: fh.clone() },
        )
        .0
        {
            NfsRes::Ok(ok) => ok.obj_attributes.ctime,
            other => panic!("{other:?}"),
        };
        let setattr = |guard: Nfstime3| -> SetAttr3Res {
            call(
                &c,
                NFSPROC3_SETATTR,
                &SetAttr3Args {
                    object: fh.clone(),
                    new_attributes: Sattr3 {
                        size: Some(3),
                        ..Sattr3::default()
                    },
                    guard: Some(guard),
                },
            )
            .0
        };
        let wrong = Nfstime3 {
            seconds: ctime.seconds.wrapping_sub(100),
            nseconds: 0,
        };
        match setattr(wrong) {
            NfsRes::Fail(Nfsstat3::NotSync, w) => assert_eq!(w.after.unwrap().size, 10_000),
            other => panic!("{other:?}"),
        }
        match setattr(ctime) {
            NfsRes::Ok(ok) => assert_eq!(ok.obj_wcc.after.unwrap().size, 3),
            other => panic!("{other:?}"),
        }

        // MKDIR, a file inside, RMDIR: NOTEMPTY.
        let d = match call::<_, Mkdir3Res>(
            &c,
            NFSPROC3_MKDIR,
            &Mkdir3Args {
                where_: at(&root, "d"),
                attributes: Sattr3::default(),
            },
        )
        .0
        {
            NfsRes::Ok(ok) => ok.obj.unwrap(),
            other => panic!("{other:?}"),
        };
        let (r, _): (Rename3Res, _) = call(
            &c,
            NFSPROC3_RENAME,
            &Rename3Args {
                from: at(&root, "f"),
                to: at(&d, "g"),
            },
        );
        match r {
            NfsRes::Ok(ok) => {
                assert!(ok.fromdir_wcc.after.is_some() && ok.todir_wcc.after.is_some())
            }
            other => panic!("{other:?}"),
        }
        let r = rmdir3(&c, at(&root, "d"));
        match r {
            NfsRes::Fail(Nfsstat3::NotEmpty, w) => assert!(w.after.is_some()),
            other => panic!("{other:?}"),
        }
        // READ of a directory fails with attributes.
        let (r, _) = read3(&c, d.clone(), 0, 10);
        match r {
            NfsRes::Fail(st, Some(_)) => assert_eq!(st, Nfsstat3::IsDir),
            other => panic!("{other:?}"),
        }

        // SYMLINK and READLINK.
        let (r, _): (Symlink3Res, _) = call(
            &c,
            NFSPROC3_SYMLINK,
            &Symlink3Args {
                where_: at(&root, "l"),
                symlink_attributes: Sattr3::default(),
                symlink_data: b"d/g".to_vec(),
            },
        );
        let l = match r {
            NfsRes::Ok(ok) => ok.obj.unwrap(),
            other => panic!("{other:?}"),
        };
        match call::<_, ReadLink3Res>(&c, NFSPROC3_READLINK, &ReadLink3Args { symlink: l }).0 {
            NfsRes::Ok(ok) => assert_eq!(ok.data, b"d/g"),
            other => panic!("{other:?}"),
        }

        // REMOVE the moved file, then RMDIR works.
        let r = remove3(&c, at(&d, "g"));
        assert_eq!(r.status(), Nfsstat3::Ok);
        let r = rmdir3(&c, at(&root, "d"));
        assert_eq!(r.status(), Nfsstat3::Ok);
        // The removed directory's handle is now stale.
        let (r, _): (GetAttr3Res, _) = call(&c, NFSPROC3_GETATTR, &GetAttr3Args { object: d });
        assert_eq!(r.status(), Nfsstat3::Stale);

        // FSSTAT / FSINFO / PATHCONF on the root.
        let (r, _): (FsInfo3Res, _) = call(
            &c,
            NFSPROC3_FSINFO,
            &FsInfo3Args {
                fsroot: root.clone(),
            },
        );
        match r {
            NfsRes::Ok(ok) => {
                assert_eq!(ok.rtmax, 64 * 1024);
                assert_ne!(ok.properties & FSF3_SYMLINK, 0);
            }
            other => panic!("{other:?}"),
        }
        let (r, _): (FsStat3Res, _) = call(
            &c,
            NFSPROC3_FSSTAT,
            &FsStat3Args {
                fsroot: root.clone(),
            },
        );
        assert_eq!(r.status(), Nfsstat3::Ok);
        let (r, _): (PathConf3Res, _) =
            call(&c, NFSPROC3_PATHCONF, &PathConf3Args { object: root });
        match r {
            NfsRes::Ok(ok) => assert_eq!(ok.name_max, 255),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn read_only_local_export() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("f"), b"hello").unwrap();
        let s = local_server(tmp.path(), true, 64 * 1024);
        let c = root_ctx(&s);
        let root = root_fh(&s);
        let f = match lookup_fh(&c, &root, "f") {
            NfsRes::Ok(ok) => ok.object,
            other => panic!("{other:?}"),
        };
        let (r, _) = write3(&c, f.clone(), 0, 1, StableHow::FileSync, vec![b'X']);
        match r {
            NfsRes::Fail(Nfsstat3::RoFs, w) => assert_eq!(w.after.unwrap().size, 5),
            other => panic!("{other:?}"),
        }
        let r = remove3(&c, at(&root, "f"));
        assert_eq!(r.status(), Nfsstat3::RoFs);
        assert_eq!(std::fs::read(tmp.path().join("f")).unwrap(), b"hello");
        let (r, _) = read3(&c, f, 0, 100);
        match r {
            NfsRes::Ok(ok) => assert_eq!(ok.data, b"hello"),
            other => panic!("{other:?}"),
        }
    }
}

/// Client lists and per-client options, checked on every handle.
mod access_checks {
    use super::*;
    use crate::access::{ClientOpts, ClientSpec, Rule};

    fn rules(v: &[(&str, ClientOpts)]) -> ExportAccess {
        ExportAccess::new(
            v.iter()
                .map(|(s, o)| Rule {
                    spec: ClientSpec::parse(s).unwrap(),
                    opts: *o,
                })
                .collect(),
        )
    }

    fn getattr_from(s: &Server, fs: &FakeFs, peer: &str) -> Nfsstat3 {
        let mut c = ctx(s);
        c.peer = peer.parse().unwrap();
        let (r, _): (GetAttr3Res, _) = call(
            &c,
            NFSPROC3_GETATTR,
            &GetAttr3Args {
                object: nfh(fs, FILE),
            },
        );
        r.status()
    }

    #[test]
    fn unlisted_is_stale_insecure_is_perm_ro_client_is_rofs() {
        let fs = FakeFs::new(1, 3);
        let s = server(&fs, false);
        let rw = ClientOpts {
            secure: false,
            ..ClientOpts::default()
        };
        let secure = ClientOpts { secure: true, ..rw };
        let ro = ClientOpts {
            read_only: true,
            ..rw
        };
        s.exports()[0].set_access(rules(&[
            ("127.0.0.1", rw),
            ("127.0.0.2", secure),
            ("127.0.0.3", ro),
        ]));
        assert_eq!(getattr_from(&s, &fs, "127.0.0.1:40000"), Nfsstat3::Ok);
        assert_eq!(getattr_from(&s, &fs, "127.0.0.9:40000"), Nfsstat3::Stale);
        assert_eq!(getattr_from(&s, &fs, "127.0.0.2:40000"), Nfsstat3::Perm);
        assert_eq!(getattr_from(&s, &fs, "127.0.0.2:1000"), Nfsstat3::Ok);
        assert_eq!(getattr_from(&s, &fs, "127.0.0.3:40000"), Nfsstat3::Ok);
        let mut c = ctx(&s);
        c.peer = "127.0.0.3:40000".parse().unwrap();
        let (r, _) = write3(&c, nfh(&fs, FILE), 0, 1, StableHow::FileSync, vec![1]);
        assert_eq!(r.status(), Nfsstat3::RoFs);
        assert!(fs.seen.lock().unwrap().write.is_none());
        // The same write from the read-write client goes through.
        c.peer = "127.0.0.1:40000".parse().unwrap();
        let (r, _) = write3(&c, nfh(&fs, FILE), 0, 1, StableHow::FileSync, vec![1]);
        assert_eq!(r.status(), Nfsstat3::Ok);
        // ACCESS never grants changes to a read-only client.
        c.peer = "127.0.0.3:40000".parse().unwrap();
        let (r, _): (Access3Res, _) = call(
            &c,
            NFSPROC3_ACCESS,
            &Access3Args {
                object: nfh(&fs, FILE),
                access: 0x3f,
            },
        );
        let NfsRes::Ok(ok) = r else { panic!() };
        assert_eq!(
            ok.access & (ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE),
            0
        );
    }
}

/// WRITE's row picks its route from the arguments: a stable WRITE waits for
/// the disk (the blocking pool), an UNSTABLE one up to `inline_write_max`
/// is tried on the loop, a larger one up to `inline_write_alone_max` there
/// when nothing else is ready, a larger one still goes to the loop's pool, and
/// arguments that do not decode go to the pool, where dispatch refuses them.
#[test]
fn write_routes_by_stability_and_size() {
    let fs = FakeFs::new(1, 1);
    let srv = server(&fs, false)
        .with_inline_write_max(64 << 10)
        .with_inline_write_alone_max(1 << 20);
    let route = |srv: &Server, count: u32, stable: StableHow| {
        let args = Write3Args {
            file: nfh(&fs, 1),
            offset: 0,
            count,
            stable,
            data: Vec::new(),
        };
        write_route(srv, &mut Dec::new(&to_vec(&args)))
    };
    assert_eq!(route(&srv, 4096, StableHow::Unstable), Route::Quick);
    assert_eq!(route(&srv, 64 << 10, StableHow::Unstable), Route::Quick);
    assert_eq!(
        route(&srv, (64 << 10) + 1, StableHow::Unstable),
        Route::Alone
    );
    assert_eq!(route(&srv, 1 << 20, StableHow::Unstable), Route::Alone);
    assert_eq!(route(&srv, (1 << 20) + 1, StableHow::Unstable), Route::Pool);
    assert_eq!(route(&srv, 1 << 20, StableHow::FileSync), Route::Blocking);
    assert_eq!(route(&srv, 4096, StableHow::FileSync), Route::Blocking);
    assert_eq!(route(&srv, 4096, StableHow::DataSync), Route::Blocking);
    assert_eq!(write_route(&srv, &mut Dec::new(&[0, 0])), Route::Pool);
    // A handle of no export here: no backend said it can write on a loop.
    let stranger = Write3Args {
        file: nfh(&FakeFs::new(99, 1), 1),
        offset: 0,
        count: 4096,
        stable: StableHow::Unstable,
        data: Vec::new(),
    };
    assert_eq!(
        write_route(&srv, &mut Dec::new(&to_vec(&stranger))),
        Route::Pool
    );
    let big = Write3Args {
        count: 1 << 20,
        ..stranger
    };
    assert_eq!(write_route(&srv, &mut Dec::new(&to_vec(&big))), Route::Pool);
    // inline_write_max 0 turns the larger ones off too.
    let off = server(&fs, false)
        .with_inline_write_max(0)
        .with_inline_write_alone_max(1 << 20);
    assert_eq!(route(&off, 4096, StableHow::Unstable), Route::Pool);
    assert_eq!(route(&off, 1 << 20, StableHow::Unstable), Route::Pool);
    let small_only = server(&fs, false)
        .with_inline_write_max(64 << 10)
        .with_inline_write_alone_max(0);
    assert_eq!(route(&small_only, 4096, StableHow::Unstable), Route::Quick);
    assert_eq!(
        route(&small_only, 1 << 20, StableHow::Unstable),
        Route::Pool
    );
    assert_eq!(route(&off, 0, StableHow::Unstable), Route::Pool);
}

/// A namespace change or SETATTR routes by its export: on a `sync` export
/// it waits for stable storage (the blocking pool); on an `async` one it is
/// tried on the loop where the backend can change there (`inline_changes`),
/// else the loop's pool; a handle of no export, or arguments that do not
/// decode, go to the pool, where dispatch refuses them.
#[test]
fn namespace_changes_route_by_their_export() {
    let fs = FakeFs::new(1, 1);
    let export = |sync: bool| {
        Server::new(
            vec![Export::new(
                fs.export_id,
                "/export1".to_string(),
                fs.clone(),
                ExportAccess::allow_all(false),
            )
            .with_sync(sync)],
            std::sync::Arc::new(rnfsd_fs::WriteVerifier::new(WVERF)),
            64 * 1024,
            None,
        )
    };
    let create = |srv: &Server, fs: &Arc<FakeFs>| {
        let args = Create3Args {
            where_: dirop(fs, "f"),
            how: CreateHow3::Guarded(Sattr3::default()),
        };
        sync_route(srv, &mut Dec::new(&to_vec(&args)))
    };
    assert_eq!(create(&export(true), &fs), Route::Blocking);
    assert_eq!(create(&export(false), &fs), Route::Quick);
    let off = export(false).with_inline_changes(false);
    assert_eq!(create(&off, &fs), Route::Pool);
    assert_eq!(create(&export(false), &FakeFs::new(99, 1)), Route::Pool);
    assert_eq!(
        sync_route(&export(false), &mut Dec::new(&[0, 0])),
        Route::Pool
    );
}

/// Every change that may owe its journal commit leaves, beside its reply,
/// the result it answers if that commit fails: its own resfail with
/// NFS3ERR_IO and no attributes (RFC 1813 §4.8). Run through the table
/// with an offer in force, as dispatch makes one for a pool job's call.
#[test]
fn changes_owing_a_commit_leave_an_io_failure_to_answer_with() {
    let fs = FakeFs::new(1, 0);
    let commits =
        rnfsd_fs::owed::Commits::start("test-commit", 1, || {}, || Ok(()), |_| {}).unwrap();
    *fs.owes.lock().unwrap() = Some(commits.clone());
    let srv = server(&fs, false);
    let mut c = ctx(&srv);
    // As dispatch makes it for a pool job's call, whose reply may leave later.
    c.may_park = true;
    let sattr = Sattr3::default();
    let fail_of = |what: &str, run: &dyn Fn() -> bool| -> Vec<u8> {
        assert!(run(), "{what} failed");
        let p = c
            .take_parked()
            .unwrap_or_else(|| panic!("{what} owes no commit"));
        assert!(p.until.wait());
        p.fail_body
    };
    fn io_fail<T: Xdr, F: Xdr + Default + PartialEq + std::fmt::Debug>(what: &str, b: &[u8]) {
        match from_slice::<NfsRes<T, F>>(b) {
            Ok(NfsRes::Fail(Nfsstat3::Io, f)) => assert_eq!(f, F::default(), "{what}"),
            _ => panic!("{what}: not an NFS3ERR_IO resfail"),
        }
    }
    let ok = |r: Create3Res| matches!(r, NfsRes::Ok(_));
    let b = fail_of("CREATE", &|| {
        let a = Create3Args {
            where_: dirop(&fs, "n"),
            how: CreateHow3::Unchecked(sattr.clone()),
        };
        ok(call(&c, NFSPROC3_CREATE, &a).0)
    });
    io_fail::<Create3ResOk, WccData>("CREATE", &b);
    let b = fail_of("MKDIR", &|| {
        let a = Mkdir3Args {
            where_: dirop(&fs, "n"),
            attributes: sattr.clone(),
        };
        ok(call(&c, NFSPROC3_MKDIR, &a).0)
    });
    io_fail::<Create3ResOk, WccData>("MKDIR", &b);
    let b = fail_of("SYMLINK", &|| {
        let a = Symlink3Args {
            where_: dirop(&fs, "n"),
            symlink_attributes: sattr.clone(),
            symlink_data: b"t".to_vec(),
        };
        ok(call(&c, NFSPROC3_SYMLINK, &a).0)
    });
    io_fail::<Create3ResOk, WccData>("SYMLINK", &b);
    let b = fail_of("MKNOD", &|| {
        let a = Mknod3Args {
            where_: dirop(&fs, "n"),
            what: MknodData3::Fifo(sattr.clone()),
        };
        ok(call(&c, NFSPROC3_MKNOD, &a).0)
    });
    io_fail::<Create3ResOk, WccData>("MKNOD", &b);
    let b = fail_of("REMOVE", &|| {
        matches!(remove3(&c, dirop(&fs, "n")), NfsRes::Ok(_))
    });
    io_fail::<Remove3ResOk, WccData>("REMOVE", &b);
    let b = fail_of("RMDIR", &|| {
        matches!(rmdir3(&c, dirop(&fs, "n")), NfsRes::Ok(_))
    });
    io_fail::<Remove3ResOk, WccData>("RMDIR", &b);
    let b = fail_of("RENAME", &|| {
        let a = Rename3Args {
            from: dirop(&fs, "n"),
            to: dirop(&fs, "m"),
        };
        matches!(
            call::<_, Rename3Res>(&c, NFSPROC3_RENAME, &a).0,
            NfsRes::Ok(_)
        )
    });
    io_fail::<Rename3Wcc, Rename3Wcc>("RENAME", &b);
    let b = fail_of("LINK", &|| {
        let a = Link3Args {
            file: nfh(&fs, FILE),
            link: dirop(&fs, "m"),
        };
        matches!(call::<_, Link3Res>(&c, NFSPROC3_LINK, &a).0, NfsRes::Ok(_))
    });
    io_fail::<Link3Body, Link3Body>("LINK", &b);
    let b = fail_of("SETATTR", &|| {
        let a = SetAttr3Args {
            object: nfh(&fs, FILE),
            new_attributes: Sattr3 {
                mode: Some(0o600),
                ..Sattr3::default()
            },
            guard: None,
        };
        matches!(
            call::<_, SetAttr3Res>(&c, NFSPROC3_SETATTR, &a).0,
            NfsRes::Ok(_)
        )
    });
    io_fail::<SetAttr3ResOk, WccData>("SETATTR", &b);
    // Without an offer nothing is owed, and nothing is left.
    *fs.owes.lock().unwrap() = None;
    c.may_park = false;
    assert!(matches!(remove3(&c, dirop(&fs, "n")), NfsRes::Ok(_)));
    assert!(c.take_parked().is_none());
    commits.stop();
}
