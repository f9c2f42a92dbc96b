//! The namespace: CREATE, LINK, REMOVE, RENAME and READLINK (RFC 8881
//! §18.4, §18.9, §18.25, §18.26, §18.24). READDIR is not yet served:
//! NFS4ERR_NOTSUPP.
//!
//! Changes go to the export's backend as NFSv3's do (the same calls, the
//! same `sync` export rule: `Compound::owe`). Pseudo directories are
//! read-only (NFS4ERR_ROFS); a change between the pseudo-filesystem and an
//! export, or between two exports, is NFS4ERR_XDEV.
//!
//! change_info4 carries the directory's change attribute (its ctime,
//! `fattr::change`) from the backend's wcc data. `atomic` is always
//! false: a backend takes those attributes around the change (a stat,
//! the change, a stat) without holding the directory against other
//! changes, so another change may fall between them (nfs-ganesha answers
//! false for the same reason; knfsd holds the directory's inode lock and
//! answers true). A client then revalidates the directory.

use rnfsd_fs::{Call, FsError, NodeKind, Wcc};
use rnfsd_proto::nfs4::*;
use rnfsd_xdr::Enc;

use super::compound::Compound;
use super::cur::{Cur, Obj};
use super::fattr;
use super::fh::{check_name, not_a_dir};
use super::status::of_fs;

/// The current filehandle as a directory to change in. A pseudo
/// directory is read-only; so is an export read-only for the caller,
/// unless the handle is no directory at all (NFS4ERR_NOTDIR first, as
/// knfsd checks the type before the export's mode).
fn dir_to_change(c: &Compound<'_, '_>) -> Result<Obj, Nfsstat4> {
    match c.cur()? {
        Cur::Pseudo(_) => Err(Nfsstat4::RoFs),
        Cur::Obj(o) => match o.writable() {
            Ok(()) => Ok(o.clone()),
            Err(s) => {
                not_a_dir(c, o)?;
                Err(s)
            }
        },
    }
}

/// A backend's NFS4ERR_NOTDIR made precise: NFS4ERR_SYMLINK when `dir`
/// is a symbolic link (§18.13.3; knfsd's `nfsd_mode_check`).
fn dir_error(c: &Compound<'_, '_>, dir: &Obj, s: Nfsstat4) -> Nfsstat4 {
    if s == Nfsstat4::NotDir {
        if let Err(t) = not_a_dir(c, dir) {
            return t;
        }
    }
    s
}

/// change_info4 of directory `dir` from the wcc data of a change to it
/// (see the module text for `atomic`). Without attributes after, they
/// are asked for; without attributes before, `before` is 0, which no
/// client has cached, so it revalidates.
fn cinfo(w: &Wcc, dir: &Obj, call: &Call<'_>) -> ChangeInfo4 {
    let after = match &w.after {
        Some(a) => fattr::change(a),
        None => dir
            .exp
            .backend
            .getattr(call, &dir.fh)
            .map_or(0, |a| fattr::change(&a)),
    };
    ChangeInfo4 {
        atomic: false,
        before: w.before.map_or(0, |p| fattr::change_of(p.ctime)),
        after,
    }
}

/// CREATE (§18.4): a directory, symbolic link, device, socket or fifo
/// (regular files are OPEN's: NFS4ERR_BADTYPE). The new object becomes
/// the current filehandle.
pub(super) fn create(c: &mut Compound<'_, '_>, a: Create4Args) -> Create4Res {
    match create_in(c, a) {
        Ok(r) => NfsRes4::Ok(r),
        Err(s) => NfsRes4::Fail(s),
    }
}

fn create_in(c: &mut Compound<'_, '_>, a: Create4Args) -> Result<Create4ResOk, Nfsstat4> {
    let name = &a.objname.0;
    check_name(name)?;
    let kind = match &a.objtype {
        CreateType4::Dir | CreateType4::Lnk(_) => None,
        CreateType4::Blk(d) => Some(NodeKind::Block {
            major: d.specdata1,
            minor: d.specdata2,
        }),
        CreateType4::Chr(d) => Some(NodeKind::Char {
            major: d.specdata1,
            minor: d.specdata2,
        }),
        CreateType4::Sock => Some(NodeKind::Socket),
        CreateType4::Fifo => Some(NodeKind::Fifo),
        CreateType4::Other(_) => return Err(Nfsstat4::BadType),
    };
    let (set, mut attrset) = fattr::decode_settable(&a.createattrs)?;
    // None of these has a size to set: refused before anything is made
    // (knfsd would make the object, then fail setting it).
    if set.size.is_some() {
        return Err(Nfsstat4::Inval);
    }
    if let CreateType4::Lnk(t) = &a.objtype {
        // As NFSv3's SYMLINK here: an empty target or one with a NUL.
        if t.0.is_empty() || t.0.contains(&0) {
            return Err(Nfsstat4::Inval);
        }
        // A symbolic link's mode is not set (Linux keeps 0777).
        attrset.remove(FATTR4_MODE);
    }
    let dir = dir_to_change(c)?;
    let call = dir.call(c.ctx);
    let b = dir.exp.backend.as_ref();
    let made = match (&a.objtype, kind) {
        (CreateType4::Lnk(t), _) => b.symlink(&call, &dir.fh, name, &t.0, &set),
        (_, Some(k)) => b.mknod(&call, &dir.fh, name, k, &set),
        _ => b.mkdir(&call, &dir.fh, name, &set),
    };
    let res = made.map(|m| (cinfo(&m.dir, &dir, &call), m.fh));
    c.owe(&call);
    drop(call);
    let (cinfo, fh) = res.map_err(|e| dir_error(c, &dir, of_fs(e)))?;
    c.set_cur(Cur::Obj(Obj {
        exp: dir.exp,
        fh,
        grant: dir.grant,
    }));
    Ok(Create4ResOk { cinfo, attrset })
}

/// LINK (§18.9): the saved filehandle (a file) gets name `newname` in
/// the current one (a directory).
pub(super) fn link(c: &mut Compound<'_, '_>, a: Link4Args) -> Link4Res {
    match link_in(c, &a) {
        Ok(r) => NfsRes4::Ok(r),
        Err(s) => NfsRes4::Fail(s),
    }
}

fn link_in(c: &mut Compound<'_, '_>, a: &Link4Args) -> Result<ChangeInfo4, Nfsstat4> {
    let name = &a.newname.0;
    check_name(name)?;
    let src = c.saved.clone().ok_or(Nfsstat4::NoFileHandle)?;
    let dir = dir_to_change(c)?;
    let src = match src {
        Cur::Obj(o) if o.exp.id == dir.exp.id => o,
        // A pseudo directory, or another export: another filesystem.
        _ => return Err(Nfsstat4::XDev),
    };
    let call = dir.call(c.ctx);
    let res = dir
        .exp
        .backend
        .link(&call, &src.fh, &dir.fh, name)
        .map(|(_, w)| cinfo(&w, &dir, &call));
    c.owe(&call);
    res.map_err(|e| dir_error(c, &dir, of_fs(e)))
}

/// The grace period refuses REMOVE and RENAME (§18.25.3, §18.26.3): the
/// name may be one a reclaim needs (as knfsd and nfs-ganesha).
fn not_in_grace(c: &Compound<'_, '_>) -> Result<(), Nfsstat4> {
    match c.nfs4.state.grace().in_grace() {
        true => Err(Nfsstat4::Grace),
        false => Ok(()),
    }
}

/// REMOVE (§18.25): a non-directory, or an empty directory.
pub(super) fn remove(c: &mut Compound<'_, '_>, a: Remove4Args) -> Remove4Res {
    match remove_in(c, &a) {
        Ok(r) => NfsRes4::Ok(r),
        Err(s) => NfsRes4::Fail(s),
    }
}

fn remove_in(c: &mut Compound<'_, '_>, a: &Remove4Args) -> Result<ChangeInfo4, Nfsstat4> {
    let name = &a.target.0;
    check_name(name)?;
    not_in_grace(c)?;
    let dir = dir_to_change(c)?;
    let call = dir.call(c.ctx);
    let b = dir.exp.backend.as_ref();
    // A file's name first (the common case, one call); a backend refuses
    // a directory there before it changes anything.
    let res = match b.remove(&call, &dir.fh, name) {
        Err(FsError::Errno(libc::EISDIR)) => b.rmdir(&call, &dir.fh, name),
        r => r,
    }
    .map(|w| cinfo(&w, &dir, &call));
    c.owe(&call);
    res.map_err(|e| dir_error(c, &dir, of_fs(e)))
}

/// RENAME (§18.26): `oldname` in the saved directory becomes `newname`
/// in the current one.
pub(super) fn rename(c: &mut Compound<'_, '_>, a: Rename4Args) -> Rename4Res {
    match rename_in(c, &a) {
        Ok(r) => NfsRes4::Ok(r),
        Err(s) => NfsRes4::Fail(s),
    }
}

fn rename_in(c: &mut Compound<'_, '_>, a: &Rename4Args) -> Result<Rename4ResOk, Nfsstat4> {
    check_name(&a.oldname.0)?;
    check_name(&a.newname.0)?;
    not_in_grace(c)?;
    let from = match c.saved.clone().ok_or(Nfsstat4::NoFileHandle)? {
        Cur::Obj(o) => Some(o),
        Cur::Pseudo(_) => None,
    };
    let to = match dir_to_change(c) {
        Ok(to) => to,
        // Both in the pseudo-filesystem: read-only; one of them: XDEV.
        Err(Nfsstat4::RoFs) if from.is_some() && c.cur()?.obj().is_none() => {
            return Err(Nfsstat4::XDev)
        }
        Err(s) => return Err(s),
    };
    let from = match from {
        Some(f) if f.exp.id == to.exp.id => f,
        _ => return Err(Nfsstat4::XDev),
    };
    let call = to.call(c.ctx);
    let res = to
        .exp
        .backend
        .rename(&call, &from.fh, &a.oldname.0, &to.fh, &a.newname.0)
        .map(|(fw, tw)| Rename4ResOk {
            source_cinfo: cinfo(&fw, &from, &call),
            target_cinfo: cinfo(&tw, &to, &call),
        });
    c.owe(&call);
    res.map_err(|e| {
        let s = of_fs(e);
        match dir_error(c, &from, s) {
            t if t != s => t,
            _ => dir_error(c, &to, s),
        }
    })
}

/// READLINK (§18.24): anything but a symbolic link is
/// NFS4ERR_WRONG_TYPE (§18.24.4).
pub(super) fn readlink(c: &mut Compound<'_, '_>) -> ReadLink4Res {
    let o = match c.cur() {
        Ok(Cur::Obj(o)) => o.clone(),
        Ok(Cur::Pseudo(_)) => return NfsRes4::Fail(Nfsstat4::WrongType),
        Err(s) => return NfsRes4::Fail(s),
    };
    let call = o.call(c.ctx);
    match o.exp.backend.readlink(&call, &o.fh) {
        Ok((data, _)) => NfsRes4::Ok(LinkText4(data)),
        Err(e) => {
            let s = of_fs(e);
            let symlink = o
                .exp
                .backend
                .getattr(&call, &o.fh)
                .map(|a| a.ftype == rnfsd_fs::FileType::Symlink);
            match symlink {
                Ok(false) => NfsRes4::Fail(Nfsstat4::WrongType),
                _ => NfsRes4::Fail(s),
            }
        }
    }
}

pub(super) fn readdir(_c: &mut Compound<'_, '_>, _a: ReadDir4Args, e: &mut Enc) -> Nfsstat4 {
    e.u32(Nfsstat4::NotSupp as u32);
    Nfsstat4::NotSupp
}
