//! The current and saved filehandles (RFC 8881 §16.2.3.1.1): PUTFH,
//! PUTROOTFH, PUTPUBFH, GETFH, SAVEFH, RESTOREFH; LOOKUP and LOOKUPP,
//! which cross between the pseudo-filesystem and the exports (§7.4);
//! SECINFO and SECINFO_NO_NAME (AUTH_SYS).

use rnfsd_fs::{Fh, FileType};
use rnfsd_proto::nfs4::*;

use super::compound::Compound;
use super::cur::{self, Cur, Obj};
use super::status::of_fs;
use crate::state::pseudo::{Child, Pseudo};

/// AUTH_SYS's flavour number (RFC 5531).
const AUTH_SYS: u32 = 1;

pub(super) fn putfh(c: &mut Compound<'_, '_>, a: PutFh4Args) -> Nfsstat4 {
    match cur::of_handle(c.ctx, || c.pseudo(), a.object.0) {
        Ok(cur) => {
            c.set_cur(cur);
            Nfsstat4::Ok
        }
        Err(s) => s,
    }
}

/// PUTROOTFH and PUTPUBFH (§18.21, §18.20: the public filehandle is the
/// root here, as knfsd's).
pub(super) fn putrootfh(c: &mut Compound<'_, '_>) -> Nfsstat4 {
    let root = match c.pseudo().root_export() {
        Some(id) => match cur::export_root(c.ctx, id) {
            Ok(o) => Cur::Obj(o),
            Err(s) => return s,
        },
        None => Cur::Pseudo(Pseudo::ROOT),
    };
    c.set_cur(root);
    Nfsstat4::Ok
}

pub(super) fn getfh(c: &mut Compound<'_, '_>) -> GetFh4Res {
    match c.cur() {
        Ok(cur) => NfsRes4::Ok(NfsFh4(cur.handle(c.pseudo()))),
        Err(s) => NfsRes4::Fail(s),
    }
}

pub(super) fn savefh(c: &mut Compound<'_, '_>) -> Nfsstat4 {
    c.saved = c.cur.clone();
    c.saved_sid = c.cur_sid;
    Nfsstat4::Ok
}

/// RESTOREFH (§18.27): the saved filehandle and stateid become current.
pub(super) fn restorefh(c: &mut Compound<'_, '_>) -> Nfsstat4 {
    match c.saved.clone() {
        Some(s) => {
            c.cur = Some(s);
            c.cur_sid = c.saved_sid;
            Nfsstat4::Ok
        }
        None => Nfsstat4::RestoreFh,
    }
}

/// A name as LOOKUP, CREATE, REMOVE and the rest take it (§18.13.3,
/// knfsd's check_filename): empty is NFS4ERR_INVAL, "." and ".."
/// NFS4ERR_BADNAME, a slash NFS4ERR_BADNAME, not UTF-8 NFS4ERR_INVAL.
pub(super) fn check_name(name: &[u8]) -> Result<(), Nfsstat4> {
    if name.is_empty() {
        return Err(Nfsstat4::Inval);
    }
    if name == b"." || name == b".." || name.contains(&b'/') {
        return Err(Nfsstat4::BadName);
    }
    if name.len() > 255 {
        return Err(Nfsstat4::NameTooLong);
    }
    if std::str::from_utf8(name).is_err() {
        return Err(Nfsstat4::Inval);
    }
    Ok(())
}

/// Why an export object cannot be looked in: NFS4ERR_SYMLINK for a
/// symbolic link, NFS4ERR_NOTDIR for anything else but a directory
/// (§18.13.3).
pub(super) fn not_a_dir(c: &Compound<'_, '_>, o: &Obj) -> Result<(), Nfsstat4> {
    let call = o.call(c.ctx);
    match o.exp.backend.getattr(&call, &o.fh).map_err(of_fs)?.ftype {
        FileType::Directory => Ok(()),
        FileType::Symlink => Err(Nfsstat4::Symlink),
        _ => Err(Nfsstat4::NotDir),
    }
}

/// `name` in the current directory.
pub(super) fn lookup_in(c: &Compound<'_, '_>, dir: &Cur, name: &[u8]) -> Result<Cur, Nfsstat4> {
    check_name(name)?;
    match dir {
        Cur::Pseudo(i) => match c.pseudo().child(*i, name) {
            Some(Child::Dir(j)) => Ok(Cur::Pseudo(j)),
            Some(Child::Export(id)) => cur::export_root(c.ctx, id).map(Cur::Obj),
            None => Err(Nfsstat4::NoEnt),
        },
        Cur::Obj(o) => {
            let call = o.call(c.ctx);
            match o.exp.backend.lookup(&call, &o.fh, name) {
                Ok((fh, _, _)) => Ok(Cur::Obj(Obj {
                    exp: o.exp.clone(),
                    fh,
                    grant: o.grant.clone(),
                })),
                Err(e) => {
                    let s = of_fs(e);
                    if s == Nfsstat4::NotDir {
                        not_a_dir(c, o)?;
                    }
                    Err(s)
                }
            }
        }
    }
}

pub(super) fn lookup(c: &mut Compound<'_, '_>, a: Lookup4Args) -> Nfsstat4 {
    // Within an export (the common case) the current object only changes
    // its handle: nothing else of it is copied.
    if let Some(Cur::Obj(o)) = &c.cur {
        let found = (|| {
            check_name(&a.objname.0)?;
            let call = o.call(c.ctx);
            match o.exp.backend.lookup(&call, &o.fh, &a.objname.0) {
                Ok((fh, _, _)) => Ok(fh),
                Err(e) => {
                    let s = of_fs(e);
                    if s == Nfsstat4::NotDir {
                        not_a_dir(c, o)?;
                    }
                    Err(s)
                }
            }
        })();
        let fh = match found {
            Ok(fh) => fh,
            Err(s) => return s,
        };
        if let Some(Cur::Obj(o)) = &mut c.cur {
            o.fh = fh;
        }
        c.cur_sid = None;
        return Nfsstat4::Ok;
    }
    let dir = match c.cur() {
        Ok(d) => d.clone(),
        Err(s) => return s,
    };
    match lookup_in(c, &dir, &a.objname.0) {
        Ok(cur) => {
            c.set_cur(cur);
            Nfsstat4::Ok
        }
        Err(s) => s,
    }
}

/// LOOKUPP (§18.14): an export's root leads back into the pseudo
/// directory it hangs from; the pseudo root has no parent (NFS4ERR_NOENT).
pub(super) fn lookupp(c: &mut Compound<'_, '_>) -> Nfsstat4 {
    let dir = match c.cur() {
        Ok(d) => d.clone(),
        Err(s) => return s,
    };
    let parent = match dir {
        Cur::Pseudo(i) if i == Pseudo::ROOT => return Nfsstat4::NoEnt,
        Cur::Pseudo(i) => match c.pseudo().node(i) {
            Some(n) => Cur::Pseudo(n.parent),
            None => return Nfsstat4::Stale,
        },
        Cur::Obj(o) if o.is_root() => match c.pseudo().parent_of_export(o.exp.id) {
            Some((_, [])) => return Nfsstat4::NoEnt,
            Some((p, _)) => Cur::Pseudo(p),
            None => return Nfsstat4::NoEnt,
        },
        Cur::Obj(o) => {
            let call = o.call(c.ctx);
            match o.exp.backend.lookup(&call, &o.fh, b"..") {
                Ok((fh, _, _)) => Cur::Obj(Obj {
                    exp: o.exp.clone(),
                    fh: Fh(fh.0),
                    grant: o.grant.clone(),
                }),
                Err(e) => {
                    let s = of_fs(e);
                    if s == Nfsstat4::NotDir {
                        if let Err(s) = not_a_dir(c, &o) {
                            return s;
                        }
                    }
                    return s;
                }
            }
        }
    };
    c.set_cur(parent);
    Nfsstat4::Ok
}

fn flavours() -> SecInfo4Res {
    NfsRes4::Ok(SecInfo4ResOk(vec![SecInfo4::Flavor(AUTH_SYS)]))
}

/// SECINFO (§18.29): the name must exist; the current filehandle is
/// consumed (§2.6.3.1.1.8).
pub(super) fn secinfo(c: &mut Compound<'_, '_>, a: SecInfo4Args) -> SecInfo4Res {
    let dir = match c.cur() {
        Ok(d) => d.clone(),
        Err(s) => return NfsRes4::Fail(s),
    };
    if let Err(s) = lookup_in(c, &dir, &a.name.0) {
        return NfsRes4::Fail(s);
    }
    c.cur = None;
    flavours()
}

/// SECINFO_NO_NAME (§18.45): of the current filehandle, or of its parent.
pub(super) fn secinfo_no_name(c: &mut Compound<'_, '_>, a: SecInfoStyle4) -> SecInfo4Res {
    if a == SecInfoStyle4::Parent {
        let st = lookupp(c);
        if st != Nfsstat4::Ok {
            return NfsRes4::Fail(st);
        }
    }
    c.cur = None;
    flavours()
}
