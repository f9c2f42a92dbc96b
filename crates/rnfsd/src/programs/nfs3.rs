//! NFS version 3 program (RFC 1813), program 100003, as one declarative
//! table (`NFS3`), like knfsd's `nfsd_procedures3[]`.
//!
//! Every handler: route the handle to its export (short handle ->
//! NFS3ERR_BADHANDLE, unknown export -> NFS3ERR_STALE, as knfsd), refuse
//! changes on a read-only export with NFS3ERR_ROFS, call the export's
//! backend, and answer with post-op attributes and wcc_data in every reply
//! that carries them, failures included (fetched best-effort).

use rnfsd_fs::{
    Attr, Backend, CreateHow, Created, Cred, DirPage, Fh, FileType, FsError, NodeKind, SetAttr,
    SetTime, Stable, Time, Wcc,
};
use rnfsd_proto::nfs3::*;
use rnfsd_xdr::{pad4, Dec, Enc, Xdr};

use crate::access::{Denied, Grant};
use crate::proc_entry;
use crate::rpc::{CacheClass, CallCtx, Class, Proc, ProcError, Program, Version};
use crate::state::Export;
use crate::state::Server;

#[cfg(test)]
mod tests;

/// Largest transfer we ever do, whatever the configuration says: the wire
/// types bound READ/WRITE data by `MAX_DATA`.
fn max_io(ctx: &CallCtx<'_>) -> u32 {
    ctx.server.max_io.clamp(4096, MAX_DATA as u32)
}

/// FSINFO dtpref: what we like READDIR counts to be (knfsd uses a page;
/// larger means fewer round trips on big directories).
const DTPREF: u32 = 64 * 1024;
/// Most entries asked of a backend for one READDIR/READDIRPLUS reply.
const MAX_DIR_BATCH: usize = 4096;

// Upper bounds on each result body, for the table (see `Proc::max_reply`).
const ST: usize = 4;
const PATTR: usize = POST_OP_ATTR_MAX_LEN;
const WCC: usize = WCC_DATA_MAX_LEN;
const CREATE_MAX: usize = ST + POST_OP_FH3_MAX_LEN + PATTR + WCC;
const READ_MAX: usize = ST + PATTR + 4 + 4 + 4 + MAX_DATA;
const READDIR_MAX: usize = MAX_DATA;

pub static NFS3: Program = Program {
    name: "nfs",
    prog: NFS_PROGRAM,
    versions: &[Version {
        vers: NFS_V3,
        procs: &PROCS,
    }],
};

static PROCS: [Proc; 22] = [
    proc_entry!("NULL", (), null, CacheClass::None, 0, Class::Quick),
    proc_entry!(
        "GETATTR",
        GetAttr3Args,
        getattr,
        CacheClass::None,
        ST + FATTR3_LEN,
        Class::Quick
    ),
    proc_entry!(
        "SETATTR",
        SetAttr3Args,
        setattr,
        CacheClass::Reply,
        ST + WCC,
        Class::SlowIf(on_sync_export)
    ),
    proc_entry!(
        "LOOKUP",
        Lookup3Args,
        lookup,
        CacheClass::None,
        ST + NFS_FH3_MAX_LEN + 2 * PATTR,
        Class::Quick
    ),
    proc_entry!(
        "ACCESS",
        Access3Args,
        access,
        CacheClass::None,
        ST + PATTR + 4,
        Class::Quick
    ),
    proc_entry!(
        "READLINK",
        ReadLink3Args,
        readlink,
        CacheClass::None,
        ST + PATTR + 4 + MAX_PATH
    ),
    Proc {
        name: "READ",
        run: read_run,
        cache: CacheClass::None,
        max_reply: READ_MAX,
        class: Class::Quick,
    },
    Proc {
        name: "WRITE",
        run: write_run,
        cache: CacheClass::Reply,
        max_reply: ST + WCC + 4 + 4 + 8,
        class: Class::SlowIf(write_is_stable),
    },
    proc_entry!(
        "CREATE",
        Create3Args,
        create,
        CacheClass::Reply,
        CREATE_MAX,
        Class::SlowIf(on_sync_export)
    ),
    proc_entry!(
        "MKDIR",
        Mkdir3Args,
        mkdir,
        CacheClass::Reply,
        CREATE_MAX,
        Class::SlowIf(on_sync_export)
    ),
    proc_entry!(
        "SYMLINK",
        Symlink3Args,
        symlink,
        CacheClass::Reply,
        CREATE_MAX,
        Class::SlowIf(on_sync_export)
    ),
    proc_entry!(
        "MKNOD",
        Mknod3Args,
        mknod,
        CacheClass::Reply,
        CREATE_MAX,
        Class::SlowIf(on_sync_export)
    ),
    proc_entry!(
        "REMOVE",
        Remove3Args,
        remove,
        CacheClass::Reply,
        ST + WCC,
        Class::SlowIf(on_sync_export)
    ),
    proc_entry!(
        "RMDIR",
        Rmdir3Args,
        rmdir,
        CacheClass::Reply,
        ST + WCC,
        Class::SlowIf(on_sync_export)
    ),
    proc_entry!(
        "RENAME",
        Rename3Args,
        rename,
        CacheClass::Reply,
        ST + 2 * WCC,
        Class::SlowIf(on_sync_export)
    ),
    proc_entry!(
        "LINK",
        Link3Args,
        link,
        CacheClass::Reply,
        ST + PATTR + WCC,
        Class::SlowIf(on_sync_export)
    ),
    proc_entry!(
        "READDIR",
        ReadDir3Args,
        readdir,
        CacheClass::None,
        READDIR_MAX,
        Class::Slow
    ),
    proc_entry!(
        "READDIRPLUS",
        ReadDirPlus3Args,
        readdirplus,
        CacheClass::None,
        READDIR_MAX,
        Class::Slow
    ),
    proc_entry!(
        "FSSTAT",
        FsStat3Args,
        fsstat,
        CacheClass::None,
        ST + PATTR + 6 * 8 + 4,
        Class::Quick
    ),
    proc_entry!(
        "FSINFO",
        FsInfo3Args,
        fsinfo,
        CacheClass::None,
        ST + PATTR + 7 * 4 + 8 + 8 + 4,
        Class::Quick
    ),
    proc_entry!(
        "PATHCONF",
        PathConf3Args,
        pathconf,
        CacheClass::None,
        ST + PATTR + 2 * 4 + 4 * 4,
        Class::Quick
    ),
    proc_entry!(
        "COMMIT",
        Commit3Args,
        commit,
        CacheClass::None,
        ST + WCC + 8,
        Class::Slow
    ),
];

/// WRITE args: a handle, offset, count, then stable_how (RFC 1813 §3.3.7).
fn write_is_stable(_: &Server, d: &mut Dec<'_>) -> bool {
    let stable = d
        .opaque(NFS3_FHSIZE)
        .and_then(|_| d.u64())
        .and_then(|_| d.u32())
        .and_then(|_| d.u32());
    matches!(stable, Ok(s) if s != StableHow::Unstable as u32)
}

/// The first argument of a namespace change or SETATTR is a handle (of the
/// directory, or of the object); its export says whether it syncs.
fn on_sync_export(server: &Server, d: &mut Dec<'_>) -> bool {
    d.opaque(NFS3_FHSIZE)
        .ok()
        .and_then(|fh| server.export_of(fh))
        .is_some_and(|e| e.sync)
}

// ---------------------------------------------------------------------------
// Error mapping

// Linux errno values (the backend passes raw Linux errnos).
mod errno {
    pub const EPERM: i32 = 1;
    pub const ENOENT: i32 = 2;
    pub const EIO: i32 = 5;
    pub const ENXIO: i32 = 6;
    pub const E2BIG: i32 = 7;
    pub const EBADF: i32 = 9;
    pub const EAGAIN: i32 = 11;
    pub const ENOMEM: i32 = 12;
    pub const EACCES: i32 = 13;
    pub const EEXIST: i32 = 17;
    pub const EXDEV: i32 = 18;
    pub const ENODEV: i32 = 19;
    pub const ENOTDIR: i32 = 20;
    pub const EISDIR: i32 = 21;
    pub const EINVAL: i32 = 22;
    pub const ENFILE: i32 = 23;
    pub const EMFILE: i32 = 24;
    pub const ETXTBSY: i32 = 26;
    pub const EFBIG: i32 = 27;
    pub const ENOSPC: i32 = 28;
    pub const EROFS: i32 = 30;
    pub const EMLINK: i32 = 31;
    pub const ENAMETOOLONG: i32 = 36;
    pub const ENOTEMPTY: i32 = 39;
    pub const EOPNOTSUPP: i32 = 95;
    pub const ETIMEDOUT: i32 = 110;
    pub const ESTALE: i32 = 116;
    pub const EUCLEAN: i32 = 117;
    pub const EREMOTEIO: i32 = 121;
    pub const EDQUOT: i32 = 122;
    pub const ENOKEY: i32 = 126;
}

/// Linux errno -> nfsstat3, following knfsd's `nfserrno()` table
/// (fs/nfsd/vfs.c). Anything not in it (ELOOP, EBUSY, ...) is NFS3ERR_IO, as
/// there. One deliberate difference: EMFILE, which knfsd never sees (it has
/// no per-process descriptor limit), is NFS3ERR_JUKEBOX, so a client retries
/// once descriptors free up rather than failing the application.
pub fn nfsstat3_of_errno(e: i32) -> Nfsstat3 {
    use errno::*;
    match e {
        EPERM | ENOKEY => Nfsstat3::Perm,
        ENOENT => Nfsstat3::NoEnt,
        EIO | ETXTBSY | EREMOTEIO | EUCLEAN => Nfsstat3::Io,
        ENXIO => Nfsstat3::NxIo,
        E2BIG | EFBIG => Nfsstat3::FBig,
        EBADF | ESTALE => Nfsstat3::Stale,
        EACCES => Nfsstat3::Acces,
        EEXIST => Nfsstat3::Exist,
        EXDEV => Nfsstat3::XDev,
        EMLINK => Nfsstat3::MLink,
        ENODEV => Nfsstat3::NoDev,
        ENOTDIR => Nfsstat3::NotDir,
        EISDIR => Nfsstat3::IsDir,
        EINVAL => Nfsstat3::Inval,
        ENOSPC => Nfsstat3::NoSpc,
        EROFS => Nfsstat3::RoFs,
        ENAMETOOLONG => Nfsstat3::NameTooLong,
        ENOTEMPTY => Nfsstat3::NotEmpty,
        EDQUOT => Nfsstat3::DQuot,
        // EAGAIN == EWOULDBLOCK on Linux.
        ETIMEDOUT | EAGAIN | ENOMEM | EMFILE => Nfsstat3::Jukebox,
        // EOPNOTSUPP == ENOTSUP on Linux.
        EOPNOTSUPP => Nfsstat3::NotSupp,
        ENFILE => Nfsstat3::ServerFault,
        _ => Nfsstat3::Io,
    }
}

/// The one place a backend error becomes an nfsstat3.
pub fn nfsstat3_of(e: FsError) -> Nfsstat3 {
    match e {
        FsError::Errno(n) => nfsstat3_of_errno(n),
        FsError::BadHandle => Nfsstat3::BadHandle,
        FsError::Stale => Nfsstat3::Stale,
        FsError::NotSync => Nfsstat3::NotSync,
        FsError::BadCookie => Nfsstat3::BadCookie,
        FsError::NotSupported => Nfsstat3::NotSupp,
    }
}

// ---------------------------------------------------------------------------
// Type conversions

/// nfstime3 seconds are unsigned 32-bit: times before 1970 clamp to 0 and
/// times after 2106 to the largest value.
pub fn nfstime3_of(t: Time) -> Nfstime3 {
    if t.sec < 0 {
        Nfstime3::default()
    } else if t.sec > i64::from(u32::MAX) {
        Nfstime3 {
            seconds: u32::MAX,
            nseconds: 999_999_999,
        }
    } else {
        Nfstime3 {
            seconds: t.sec as u32,
            nseconds: t.nsec.min(999_999_999),
        }
    }
}

pub fn time_of(t: Nfstime3) -> Time {
    Time {
        sec: i64::from(t.seconds),
        nsec: t.nseconds.min(999_999_999),
    }
}

fn ftype3_of(t: FileType) -> Ftype3 {
    match t {
        FileType::Regular => Ftype3::Reg,
        FileType::Directory => Ftype3::Dir,
        FileType::BlockDev => Ftype3::Blk,
        FileType::CharDev => Ftype3::Chr,
        FileType::Symlink => Ftype3::Lnk,
        FileType::Socket => Ftype3::Sock,
        FileType::Fifo => Ftype3::Fifo,
    }
}

pub fn fattr3_of(a: &Attr) -> Fattr3 {
    Fattr3 {
        ftype: ftype3_of(a.ftype),
        mode: a.mode & 0o7777,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        size: a.size,
        used: a.used,
        rdev: Specdata3 {
            specdata1: a.rdev.0,
            specdata2: a.rdev.1,
        },
        fsid: a.fsid,
        fileid: a.fileid,
        atime: nfstime3_of(a.atime),
        mtime: nfstime3_of(a.mtime),
        ctime: nfstime3_of(a.ctime),
    }
}

pub fn wcc_data_of(w: &Wcc) -> WccData {
    WccData {
        before: w.before.map(|b| WccAttr {
            size: b.size,
            mtime: nfstime3_of(b.mtime),
            ctime: nfstime3_of(b.ctime),
        }),
        after: w.after.as_ref().map(fattr3_of),
    }
}

fn set_time_of(t: SetTime3) -> SetTime {
    match t {
        SetTime3::DontChange => SetTime::DontChange,
        SetTime3::ServerTime => SetTime::ServerTime,
        SetTime3::ClientTime(t) => SetTime::ClientTime(time_of(t)),
    }
}

pub fn setattr_of(s: &Sattr3) -> SetAttr {
    SetAttr {
        mode: s.mode.map(|m| m & 0o7777),
        uid: s.uid,
        gid: s.gid,
        size: s.size,
        atime: set_time_of(s.atime),
        mtime: set_time_of(s.mtime),
    }
}

fn stable_of(s: StableHow) -> Stable {
    match s {
        StableHow::Unstable => Stable::Unstable,
        StableHow::DataSync => Stable::DataSync,
        StableHow::FileSync => Stable::FileSync,
    }
}

fn stable_how_of(s: Stable) -> StableHow {
    match s {
        Stable::Unstable => StableHow::Unstable,
        Stable::DataSync => StableHow::DataSync,
        Stable::FileSync => StableHow::FileSync,
    }
}

fn fh3_of(fh: Fh) -> NfsFh3 {
    NfsFh3::new(fh.0)
}

// ---------------------------------------------------------------------------
// Common steps

/// Route a handle to its export and check the caller may use it; returns
/// the export, the handle and what the caller runs as. Handles longer than
/// NFS3_FHSIZE never get here (they fail to decode: GARBAGE_ARGS, as in
/// knfsd).
///
/// As knfsd: a client the export does not list gets NFS3ERR_STALE (its
/// export lookup fails with ENOENT in `nfsd_set_fh_dentry`), and one calling
/// from an unprivileged port on a `secure` export gets NFS3ERR_PERM
/// (`nfsd_setuser_and_check_port`).
fn resolve<'s>(ctx: &CallCtx<'s>, fh: NfsFh3) -> Result<(&'s Export, Fh, Grant), Nfsstat3> {
    if fh.data.len() < 5 {
        return Err(Nfsstat3::BadHandle);
    }
    let server = ctx.server;
    let Some(e) = server.export_of(&fh.data) else {
        return Err(Nfsstat3::Stale);
    };
    match e.access().check(ctx.peer, &ctx.auth) {
        Ok(g) => Ok((e, Fh(fh.data), g)),
        Err(Denied::NotListed) => {
            tracing::debug!(peer = %ctx.peer, export = e.path, "client not listed: STALE");
            Err(Nfsstat3::Stale)
        }
        Err(Denied::InsecurePort) => {
            tracing::debug!(peer = %ctx.peer, export = e.path, "request from insecure port: PERM");
            Err(Nfsstat3::Perm)
        }
    }
}

/// On a routing failure there is no object to report attributes of.
macro_rules! resolve_or_fail {
    ($ctx:expr, $fh:expr) => {
        match resolve($ctx, $fh) {
            Ok(v) => v,
            Err(s) => return Ok(NfsRes::Fail(s, Default::default())),
        }
    };
}

/// Best-effort post-op attributes for failure replies.
fn post_attr(exp: &Export, cred: &Cred, fh: &Fh) -> PostOpAttr {
    exp.backend.getattr(cred, fh).ok().map(|a| fattr3_of(&a))
}

/// wcc_data for a failure: no pre-op attributes, post-op best-effort.
fn fail_wcc(exp: &Export, cred: &Cred, fh: &Fh) -> WccData {
    WccData {
        before: None,
        after: post_attr(exp, cred, fh),
    }
}

/// The backend contract rejects these too; checking here keeps a path
/// separator or NUL from ever reaching a backend (knfsd rejects them while
/// decoding filename3).
fn check_name(name: &[u8]) -> Result<(), Nfsstat3> {
    if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
        return Err(Nfsstat3::Inval);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Handlers

fn null(_ctx: &CallCtx<'_>, _a: ()) -> Result<(), ProcError> {
    Ok(())
}

fn getattr(ctx: &CallCtx<'_>, a: GetAttr3Args) -> Result<GetAttr3Res, ProcError> {
    let (exp, fh, g) = resolve_or_fail!(ctx, a.object);
    let cred = g.cred;
    Ok(match exp.backend.getattr(&cred, &fh) {
        Ok(attr) => NfsRes::Ok(GetAttr3ResOk {
            obj_attributes: fattr3_of(&attr),
        }),
        Err(e) => NfsRes::Fail(nfsstat3_of(e), ()),
    })
}

fn setattr(ctx: &CallCtx<'_>, a: SetAttr3Args) -> Result<SetAttr3Res, ProcError> {
    let (exp, fh, g) = resolve_or_fail!(ctx, a.object);
    let cred = g.cred;
    if g.read_only {
        return Ok(NfsRes::Fail(Nfsstat3::RoFs, fail_wcc(exp, &cred, &fh)));
    }
    let set = setattr_of(&a.new_attributes);
    let guard = a.guard.map(time_of);
    Ok(match exp.backend.setattr(&cred, &fh, &set, guard) {
        Ok(w) => NfsRes::Ok(SetAttr3ResOk {
            obj_wcc: wcc_data_of(&w),
        }),
        Err(e) => NfsRes::Fail(nfsstat3_of(e), fail_wcc(exp, &cred, &fh)),
    })
}

fn lookup(ctx: &CallCtx<'_>, a: Lookup3Args) -> Result<Lookup3Res, ProcError> {
    let (exp, dir, g) = resolve_or_fail!(ctx, a.what.dir);
    let cred = g.cred;
    if let Err(s) = check_name(&a.what.name) {
        return Ok(NfsRes::Fail(s, post_attr(exp, &cred, &dir)));
    }
    Ok(match exp.backend.lookup(&cred, &dir, &a.what.name) {
        Ok((fh, attr, dir_attr)) => NfsRes::Ok(Lookup3ResOk {
            object: fh3_of(fh),
            obj_attributes: Some(fattr3_of(&attr)),
            dir_attributes: dir_attr.as_ref().map(fattr3_of),
        }),
        Err(e) => NfsRes::Fail(nfsstat3_of(e), post_attr(exp, &cred, &dir)),
    })
}

fn access(ctx: &CallCtx<'_>, a: Access3Args) -> Result<Access3Res, ProcError> {
    let (exp, fh, g) = resolve_or_fail!(ctx, a.object);
    let cred = g.cred;
    Ok(match exp.backend.access(&cred, &fh, a.access) {
        Ok((mut granted, attr)) => {
            granted &= a.access;
            if g.read_only {
                // Nothing on a read-only export may be changed (knfsd's
                // nfsd_permission answers ROFS for MAY_WRITE).
                granted &= !(ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE);
            }
            NfsRes::Ok(Access3ResOk {
                obj_attributes: Some(fattr3_of(&attr)),
                access: granted,
            })
        }
        Err(e) => NfsRes::Fail(nfsstat3_of(e), post_attr(exp, &cred, &fh)),
    })
}

fn readlink(ctx: &CallCtx<'_>, a: ReadLink3Args) -> Result<ReadLink3Res, ProcError> {
    let (exp, fh, g) = resolve_or_fail!(ctx, a.symlink);
    let cred = g.cred;
    Ok(match exp.backend.readlink(&cred, &fh) {
        // A target longer than nfspath3's bound would not decode at the client.
        Ok((data, attr)) if data.len() > MAX_PATH => {
            NfsRes::Fail(Nfsstat3::NameTooLong, Some(fattr3_of(&attr)))
        }
        Ok((data, attr)) => NfsRes::Ok(ReadLink3ResOk {
            symlink_attributes: Some(fattr3_of(&attr)),
            data,
        }),
        Err(e) => NfsRes::Fail(nfsstat3_of(e), post_attr(exp, &cred, &fh)),
    })
}

/// READ3resok up to its data: status, post_op_attr (present), count, eof
/// and the opaque's length. Reserved before the read and filled after it.
const READ_HEAD: usize = ST + PATTR + 4 + 4 + 4;

fn read_run(ctx: &CallCtx<'_>, dec: &mut Dec<'_>, enc: &mut Enc) -> Result<(), ProcError> {
    let a = Read3Args::decode(dec).map_err(|_| ProcError::GarbageArgs)?;
    read_into(ctx, a, enc);
    Ok(())
}

/// The data is read straight into the reply, behind a reserved header (no
/// user-space copy of READ data); the reply grows to exactly what the
/// request's count needs.
fn read_into(ctx: &CallCtx<'_>, a: Read3Args, enc: &mut Enc) {
    let (exp, fh, g) = match resolve(ctx, a.file) {
        Ok(v) => v,
        Err(s) => return Read3Res::Fail(s, None).encode(enc),
    };
    let cred = g.cred;
    let count = a.count.min(max_io(ctx)) as usize;
    let start = enc.len();
    let buf = enc.buf_mut();
    buf.resize(start + READ_HEAD, 0);
    buf.reserve(count + 3);
    let r = exp.backend.read(&cred, &fh, a.offset, count as u32, buf);
    match r {
        Ok((eof, attr)) => {
            let got = buf.len() - start - READ_HEAD;
            // Never send more than asked, whatever the backend did.
            let n = got.min(count);
            buf.truncate(start + READ_HEAD + n);
            buf.resize(start + READ_HEAD + pad4(n), 0);
            let mut h = Enc::with_capacity(READ_HEAD);
            h.u32(Nfsstat3::Ok as u32);
            Some(fattr3_of(&attr)).encode(&mut h);
            h.u32(n as u32);
            h.bool(eof && n == got);
            h.u32(n as u32);
            buf[start..start + READ_HEAD].copy_from_slice(h.as_slice());
        }
        Err(e) => {
            buf.truncate(start);
            Read3Res::Fail(nfsstat3_of(e), post_attr(exp, &cred, &fh)).encode(enc);
        }
    }
}

/// WRITE decodes its data borrowed from the request (no copy of up to
/// `MAX_DATA` bytes before the backend writes it).
fn write_run(ctx: &CallCtx<'_>, dec: &mut Dec<'_>, enc: &mut Enc) -> Result<(), ProcError> {
    let a = Write3ArgsRef::decode(dec).map_err(|_| ProcError::GarbageArgs)?;
    write(ctx, a).encode(enc);
    Ok(())
}

fn write(ctx: &CallCtx<'_>, a: Write3ArgsRef<'_>) -> Write3Res {
    let (exp, fh, g) = match resolve(ctx, a.file) {
        Ok(v) => v,
        Err(s) => return NfsRes::Fail(s, WccData::default()),
    };
    let cred = g.cred;
    if g.read_only {
        return NfsRes::Fail(Nfsstat3::RoFs, fail_wcc(exp, &cred, &fh));
    }
    // RFC 1813 §3.3.7: count is the number of bytes in data.
    if a.count as usize != a.data.len() {
        return NfsRes::Fail(Nfsstat3::Inval, fail_wcc(exp, &cred, &fh));
    }
    // Past our advertised wtmax we write a prefix; the reply's count tells
    // the client to send the rest (knfsd truncates the same way).
    let n = a.data.len().min(max_io(ctx) as usize);
    let data = &a.data[..n];
    // Read before writing: a verifier reset while this write is under way
    // (a storage error that may have lost it) then shows at COMMIT.
    let verf = Verf3(ctx.server.write_verifier.get());
    match exp
        .backend
        .write(&cred, &fh, a.offset, data, stable_of(a.stable))
    {
        Ok((written, committed, wcc)) => NfsRes::Ok(Write3ResOk {
            file_wcc: wcc_data_of(&wcc),
            count: written.min(n as u32),
            // RFC 1813 §3.3.7: committed must be at least what was asked.
            committed: stable_how_of(committed).max(a.stable),
            verf,
        }),
        Err(e) => NfsRes::Fail(nfsstat3_of(e), fail_wcc(exp, &cred, &fh)),
    }
}

/// The shared tail of CREATE, MKDIR, SYMLINK and MKNOD: resolve the
/// directory, refuse read-only, check the name, run `op`, map the result.
fn make_node(
    ctx: &CallCtx<'_>,
    where_: Diropargs3,
    op: impl FnOnce(&dyn Backend, &Cred, &Fh, &[u8]) -> Result<Created, Nfsstat3>,
) -> Create3Res {
    let (exp, dir, g) = match resolve(ctx, where_.dir) {
        Ok(v) => v,
        Err(s) => return NfsRes::Fail(s, WccData::default()),
    };
    let cred = g.cred;
    if g.read_only {
        return NfsRes::Fail(Nfsstat3::RoFs, fail_wcc(exp, &cred, &dir));
    }
    if let Err(s) = check_name(&where_.name) {
        return NfsRes::Fail(s, fail_wcc(exp, &cred, &dir));
    }
    match op(exp.backend.as_ref(), &cred, &dir, &where_.name) {
        Ok(c) => NfsRes::Ok(Create3ResOk {
            obj: Some(fh3_of(c.fh)),
            obj_attributes: Some(fattr3_of(&c.attr)),
            dir_wcc: wcc_data_of(&c.dir),
        }),
        Err(s) => NfsRes::Fail(s, fail_wcc(exp, &cred, &dir)),
    }
}

fn create(ctx: &CallCtx<'_>, a: Create3Args) -> Result<Create3Res, ProcError> {
    let how = match &a.how {
        CreateHow3::Unchecked(s) => CreateHow::Unchecked(setattr_of(s)),
        CreateHow3::Guarded(s) => CreateHow::Guarded(setattr_of(s)),
        CreateHow3::Exclusive(v) => CreateHow::Exclusive(v.0),
    };
    Ok(make_node(ctx, a.where_, |b, cred, dir, name| {
        b.create(cred, dir, name, &how).map_err(nfsstat3_of)
    }))
}

fn mkdir(ctx: &CallCtx<'_>, a: Mkdir3Args) -> Result<Mkdir3Res, ProcError> {
    let set = setattr_of(&a.attributes);
    Ok(make_node(ctx, a.where_, |b, cred, dir, name| {
        b.mkdir(cred, dir, name, &set).map_err(nfsstat3_of)
    }))
}

fn symlink(ctx: &CallCtx<'_>, a: Symlink3Args) -> Result<Symlink3Res, ProcError> {
    let set = setattr_of(&a.symlink_attributes);
    let target = a.symlink_data;
    Ok(make_node(ctx, a.where_, |b, cred, dir, name| {
        // As knfsd: an empty target or one with a NUL is invalid.
        if target.is_empty() || target.contains(&0) {
            return Err(Nfsstat3::Inval);
        }
        b.symlink(cred, dir, name, &target, &set)
            .map_err(nfsstat3_of)
    }))
}

fn mknod(ctx: &CallCtx<'_>, a: Mknod3Args) -> Result<Mknod3Res, ProcError> {
    let (kind, set) = match &a.what {
        MknodData3::Chr(s, d) => (
            Some(NodeKind::Char {
                major: d.specdata1,
                minor: d.specdata2,
            }),
            setattr_of(s),
        ),
        MknodData3::Blk(s, d) => (
            Some(NodeKind::Block {
                major: d.specdata1,
                minor: d.specdata2,
            }),
            setattr_of(s),
        ),
        MknodData3::Sock(s) => (Some(NodeKind::Socket), setattr_of(s)),
        MknodData3::Fifo(s) => (Some(NodeKind::Fifo), setattr_of(s)),
        // RFC 1813 §3.3.11: regular files, directories and symlinks are
        // made by their own procedures.
        MknodData3::Other(_) => (None, SetAttr::default()),
    };
    Ok(make_node(ctx, a.where_, |b, cred, dir, name| match kind {
        Some(k) => b.mknod(cred, dir, name, k, &set).map_err(nfsstat3_of),
        None => Err(Nfsstat3::BadType),
    }))
}

/// REMOVE and RMDIR.
fn unlink(ctx: &CallCtx<'_>, what: Diropargs3, is_dir: bool) -> Remove3Res {
    let (exp, dir, g) = match resolve(ctx, what.dir) {
        Ok(v) => v,
        Err(s) => return NfsRes::Fail(s, WccData::default()),
    };
    let cred = g.cred;
    if g.read_only {
        return NfsRes::Fail(Nfsstat3::RoFs, fail_wcc(exp, &cred, &dir));
    }
    if let Err(s) = check_name(&what.name) {
        return NfsRes::Fail(s, fail_wcc(exp, &cred, &dir));
    }
    let r = if is_dir {
        exp.backend.rmdir(&cred, &dir, &what.name)
    } else {
        exp.backend.remove(&cred, &dir, &what.name)
    };
    match r {
        Ok(w) => NfsRes::Ok(Remove3ResOk {
            dir_wcc: wcc_data_of(&w),
        }),
        Err(e) => NfsRes::Fail(nfsstat3_of(e), fail_wcc(exp, &cred, &dir)),
    }
}

fn remove(ctx: &CallCtx<'_>, a: Remove3Args) -> Result<Remove3Res, ProcError> {
    Ok(unlink(ctx, a.object, false))
}

fn rmdir(ctx: &CallCtx<'_>, a: Rmdir3Args) -> Result<Rmdir3Res, ProcError> {
    Ok(unlink(ctx, a.object, true))
}

fn rename(ctx: &CallCtx<'_>, a: Rename3Args) -> Result<Rename3Res, ProcError> {
    let from = resolve(ctx, a.from.dir);
    let to = resolve(ctx, a.to.dir);
    let ((fexp, fdir, g), (texp, tdir, _)) = match (from, to) {
        (Ok(f), Ok(t)) => (f, t),
        // Report wcc for whichever directory did resolve.
        (f, t) => {
            let (mut s, mut body) = (Nfsstat3::Stale, Rename3Wcc::default());
            match &t {
                Ok((e, d, g)) => body.todir_wcc = fail_wcc(e, &g.cred, d),
                Err(e) => s = *e,
            }
            match &f {
                Ok((e, d, g)) => body.fromdir_wcc = fail_wcc(e, &g.cred, d),
                Err(e) => s = *e,
            }
            return Ok(NfsRes::Fail(s, body));
        }
    };
    // Both directories are of one export (else XDEV below), so one grant.
    let cred = g.cred;
    let fail = |s: Nfsstat3| {
        NfsRes::Fail(
            s,
            Rename3Wcc {
                fromdir_wcc: fail_wcc(fexp, &cred, &fdir),
                todir_wcc: fail_wcc(texp, &cred, &tdir),
            },
        )
    };
    if fexp.id != texp.id {
        return Ok(fail(Nfsstat3::XDev));
    }
    if g.read_only {
        return Ok(fail(Nfsstat3::RoFs));
    }
    if let Err(s) = check_name(&a.from.name).and_then(|_| check_name(&a.to.name)) {
        return Ok(fail(s));
    }
    Ok(
        match fexp
            .backend
            .rename(&cred, &fdir, &a.from.name, &tdir, &a.to.name)
        {
            Ok((fw, tw)) => NfsRes::Ok(Rename3Wcc {
                fromdir_wcc: wcc_data_of(&fw),
                todir_wcc: wcc_data_of(&tw),
            }),
            Err(e) => fail(nfsstat3_of(e)),
        },
    )
}

fn link(ctx: &CallCtx<'_>, a: Link3Args) -> Result<Link3Res, ProcError> {
    let (fexp, file, g) = resolve_or_fail!(ctx, a.file);
    let cred = g.cred;
    let (dexp, dir, _) = match resolve(ctx, a.link.dir) {
        Ok(v) => v,
        Err(s) => {
            return Ok(NfsRes::Fail(
                s,
                Link3Body {
                    file_attributes: post_attr(fexp, &cred, &file),
                    linkdir_wcc: WccData::default(),
                },
            ))
        }
    };
    let fail = |s: Nfsstat3| {
        NfsRes::Fail(
            s,
            Link3Body {
                file_attributes: post_attr(fexp, &cred, &file),
                linkdir_wcc: fail_wcc(dexp, &cred, &dir),
            },
        )
    };
    if fexp.id != dexp.id {
        return Ok(fail(Nfsstat3::XDev));
    }
    if g.read_only {
        return Ok(fail(Nfsstat3::RoFs));
    }
    if let Err(s) = check_name(&a.link.name) {
        return Ok(fail(s));
    }
    Ok(match dexp.backend.link(&cred, &file, &dir, &a.link.name) {
        Ok((attr, w)) => NfsRes::Ok(Link3Body {
            file_attributes: Some(fattr3_of(&attr)),
            linkdir_wcc: wcc_data_of(&w),
        }),
        Err(e) => fail(nfsstat3_of(e)),
    })
}

/// Bytes of a READDIR/READDIRPLUS reply that are not entries: status,
/// dir_attributes, cookieverf, the final value_follows and eof.
fn dir_reply_fixed(with_attr: bool) -> usize {
    ST + 4 + if with_attr { FATTR3_LEN } else { 0 } + 8 + 4 + 4
}

/// How many entries to ask a backend for: as many as could fit if every
/// name were a single byte (`min_entry` bytes each), so a reply is never
/// short because we asked for too few, bounded by `MAX_DIR_BATCH`.
fn dir_batch(budget: usize, min_entry: usize) -> usize {
    (budget / min_entry.max(1)).clamp(1, MAX_DIR_BATCH)
}

fn readdir(ctx: &CallCtx<'_>, a: ReadDir3Args) -> Result<ReadDir3Res, ProcError> {
    let (exp, dir, g) = resolve_or_fail!(ctx, a.dir);
    let cred = g.cred;
    // RFC 1813 §3.3.16: count bounds the whole READDIR3resok; we count the
    // status word too.
    let count = a.count.min(max_io(ctx)) as usize;
    let budget = count.saturating_sub(dir_reply_fixed(true));
    let max_entries = dir_batch(budget, entry3_len(1));
    let page = match exp
        .backend
        .readdir(&cred, &dir, a.cookie, a.cookieverf.0, max_entries, false)
    {
        Ok(p) => p,
        Err(e) => return Ok(NfsRes::Fail(nfsstat3_of(e), post_attr(exp, &cred, &dir))),
    };
    let dir_attributes = page.dir_attr.as_ref().map(fattr3_of);
    let mut used = dir_reply_fixed(dir_attributes.is_some());
    if used > count {
        return Ok(NfsRes::Fail(Nfsstat3::TooSmall, dir_attributes));
    }
    let total = page.entries.len();
    let mut entries = Vec::with_capacity(total.min(max_entries));
    for ent in page.entries {
        let len = entry3_len(ent.name.len());
        if used + len > count || ent.name.len() > MAX_NAME {
            break;
        }
        used += len;
        entries.push(Entry3 {
            fileid: ent.fileid,
            name: ent.name,
            cookie: ent.cookie,
        });
    }
    if entries.is_empty() && total > 0 {
        return Ok(NfsRes::Fail(Nfsstat3::TooSmall, dir_attributes));
    }
    let eof = page.eof && entries.len() == total;
    Ok(NfsRes::Ok(ReadDir3ResOk {
        dir_attributes,
        cookieverf: Verf3(page.verifier),
        entries,
        eof,
    }))
}

fn readdirplus(ctx: &CallCtx<'_>, a: ReadDirPlus3Args) -> Result<ReadDirPlus3Res, ProcError> {
    let (exp, dir, g) = resolve_or_fail!(ctx, a.dir);
    let cred = g.cred;
    let maxcount = a.maxcount.min(max_io(ctx)) as usize;
    let dircount = a.dircount as usize;
    // Estimate with attributes and a handle as long as the directory's
    // present, which is what a backend normally gives.
    let fh_len = 4 + pad4(dir.0.len());
    let budget = maxcount.saturating_sub(dir_reply_fixed(true));
    let max_entries = dir_batch(budget, entry3_len(1) + 4 + FATTR3_LEN + 4 + fh_len)
        .min(dir_batch(dircount, 8 + 4 + 4 + 8));
    let page: DirPage =
        match exp
            .backend
            .readdir(&cred, &dir, a.cookie, a.cookieverf.0, max_entries, true)
        {
            Ok(p) => p,
            Err(e) => return Ok(NfsRes::Fail(nfsstat3_of(e), post_attr(exp, &cred, &dir))),
        };
    let dir_attributes = page.dir_attr.as_ref().map(fattr3_of);
    let mut used = dir_reply_fixed(dir_attributes.is_some());
    if used > maxcount {
        return Ok(NfsRes::Fail(Nfsstat3::TooSmall, dir_attributes));
    }
    let mut dir_used = 0usize;
    let total = page.entries.len();
    let mut entries = Vec::with_capacity(total.min(max_entries));
    for ent in page.entries {
        if ent.name.len() > MAX_NAME {
            break;
        }
        let (name_attributes, name_handle) = match ent.plus {
            Some((fh, attr)) => (Some(fattr3_of(&attr)), Some(fh3_of(fh))),
            None => (None, None),
        };
        let e = EntryPlus3 {
            fileid: ent.fileid,
            name: ent.name,
            cookie: ent.cookie,
            name_attributes,
            name_handle,
        };
        let len = e.xdr_len();
        // RFC 1813 §3.3.17: dircount bounds fileid, name and cookie only.
        // It is a hint; the first entry always goes if maxcount allows.
        if used + len > maxcount || (!entries.is_empty() && dir_used + e.dir_len() > dircount) {
            break;
        }
        used += len;
        dir_used += e.dir_len();
        entries.push(e);
    }
    if entries.is_empty() && total > 0 {
        return Ok(NfsRes::Fail(Nfsstat3::TooSmall, dir_attributes));
    }
    let eof = page.eof && entries.len() == total;
    Ok(NfsRes::Ok(ReadDirPlus3ResOk {
        dir_attributes,
        cookieverf: Verf3(page.verifier),
        entries,
        eof,
    }))
}

fn fsstat(ctx: &CallCtx<'_>, a: FsStat3Args) -> Result<FsStat3Res, ProcError> {
    let (exp, fh, g) = resolve_or_fail!(ctx, a.fsroot);
    let cred = g.cred;
    Ok(match exp.backend.fsstat(&cred, &fh) {
        Ok((s, attr)) => NfsRes::Ok(FsStat3ResOk {
            obj_attributes: Some(fattr3_of(&attr)),
            tbytes: s.tbytes,
            fbytes: s.fbytes,
            abytes: s.abytes,
            tfiles: s.tfiles,
            ffiles: s.ffiles,
            afiles: s.afiles,
            invarsec: s.invarsec,
        }),
        Err(e) => NfsRes::Fail(nfsstat3_of(e), post_attr(exp, &cred, &fh)),
    })
}

fn fsinfo(ctx: &CallCtx<'_>, a: FsInfo3Args) -> Result<FsInfo3Res, ProcError> {
    let (exp, fh, g) = resolve_or_fail!(ctx, a.fsroot);
    let cred = g.cred;
    let io = max_io(ctx);
    Ok(match exp.backend.fsinfo(&cred, &fh) {
        Ok((i, attr)) => {
            let mut properties = 0;
            for (on, bit) in [
                (i.link, FSF3_LINK),
                (i.symlink, FSF3_SYMLINK),
                (i.homogeneous, FSF3_HOMOGENEOUS),
                (i.cansettime, FSF3_CANSETTIME),
            ] {
                if on {
                    properties |= bit;
                }
            }
            NfsRes::Ok(FsInfo3ResOk {
                obj_attributes: Some(fattr3_of(&attr)),
                rtmax: io,
                rtpref: io,
                rtmult: 4096,
                wtmax: io,
                wtpref: io,
                wtmult: 4096,
                dtpref: DTPREF.min(io),
                maxfilesize: i.maxfilesize,
                time_delta: nfstime3_of(i.time_delta),
                properties,
            })
        }
        Err(e) => NfsRes::Fail(nfsstat3_of(e), post_attr(exp, &cred, &fh)),
    })
}

fn pathconf(ctx: &CallCtx<'_>, a: PathConf3Args) -> Result<PathConf3Res, ProcError> {
    let (exp, fh, g) = resolve_or_fail!(ctx, a.object);
    let cred = g.cred;
    Ok(match exp.backend.pathconf(&cred, &fh) {
        Ok((p, attr)) => NfsRes::Ok(PathConf3ResOk {
            obj_attributes: Some(fattr3_of(&attr)),
            linkmax: p.linkmax,
            name_max: p.name_max,
            no_trunc: p.no_trunc,
            chown_restricted: p.chown_restricted,
            case_insensitive: p.case_insensitive,
            case_preserving: p.case_preserving,
        }),
        Err(e) => NfsRes::Fail(nfsstat3_of(e), post_attr(exp, &cred, &fh)),
    })
}

fn commit(ctx: &CallCtx<'_>, a: Commit3Args) -> Result<Commit3Res, ProcError> {
    let (exp, fh, g) = resolve_or_fail!(ctx, a.file);
    let cred = g.cred;
    if g.read_only {
        // knfsd verifies COMMIT's handle with MAY_WRITE, so ROFS.
        return Ok(NfsRes::Fail(Nfsstat3::RoFs, fail_wcc(exp, &cred, &fh)));
    }
    Ok(match exp.backend.commit(&cred, &fh, a.offset, a.count) {
        // Read after the sync: a reset it caused (or that happened while
        // it ran) is in this reply.
        Ok(w) => NfsRes::Ok(Commit3ResOk {
            file_wcc: wcc_data_of(&w),
            verf: Verf3(ctx.server.write_verifier.get()),
        }),
        Err(e) => NfsRes::Fail(nfsstat3_of(e), fail_wcc(exp, &cred, &fh)),
    })
}
