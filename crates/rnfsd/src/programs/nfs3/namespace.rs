//! Namespace changes: CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR,
//! RENAME and LINK (RFC 1813 §3.3.8-3.3.15).

use rnfsd_fs::{Backend, Call, CreateHow, Created, Fh, NodeKind, SetAttr};
use rnfsd_proto::nfs3::*;

use super::common::{
    before_change, check_name, fail_wcc, fs_call, owing, post_attr, resolve, resolve_or_fail,
    Changed,
};
use super::convert::*;
use crate::programs::CallCtx;
use rnfsd_rpc::ProcError;

/// The shared tail of CREATE, MKDIR, SYMLINK and MKNOD: resolve the
/// directory, refuse read-only, check the name, run `op`, map the result.
pub(super) fn make_node(
    ctx: &CallCtx<'_>,
    where_: Diropargs3,
    op: impl FnOnce(&dyn Backend, &Call<'_>, &Fh, &[u8]) -> Result<Created, Nfsstat3>,
) -> Create3Res {
    let (exp, dir, g) = match resolve(ctx, where_.dir) {
        Ok(v) => v,
        Err(s) => return NfsRes::Fail(s, WccData::default()),
    };
    let cred = g.cred;
    let call = fs_call(ctx, &cred);
    if g.read_only {
        return NfsRes::Fail(Nfsstat3::RoFs, fail_wcc(&exp, &call, &dir));
    }
    if let Err(s) = check_name(&where_.name) {
        return NfsRes::Fail(s, fail_wcc(&exp, &call, &dir));
    }
    let res = match op(exp.backend.as_ref(), &call, &dir, &where_.name) {
        Ok(c) => NfsRes::Ok(Create3ResOk {
            obj: Some(fh3_of(c.fh)),
            obj_attributes: Some(fattr3_of(&c.attr)),
            dir_wcc: wcc_data_of(&c.dir),
        }),
        Err(s) => NfsRes::Fail(s, fail_wcc(&exp, &call, &dir)),
    };
    owing(ctx, &call, res)
}

pub(super) fn create(ctx: &CallCtx<'_>, a: Create3Args) -> Result<Create3Res, ProcError> {
    let how = match &a.how {
        CreateHow3::Unchecked(s) => CreateHow::Unchecked(setattr_of(s)),
        CreateHow3::Guarded(s) => CreateHow::Guarded(setattr_of(s)),
        CreateHow3::Exclusive(v) => CreateHow::Exclusive(v.0),
    };
    let unchecked = matches!(how, CreateHow::Unchecked(_));
    Ok(make_node(ctx, a.where_, |b, call, dir, name| {
        // UNCHECKED over an existing file sets its attributes (a size
        // truncates it): a change like SETATTR.
        let _changing = match unchecked {
            true => before_change(ctx, b, call, Changed::Name(dir, name))?,
            false => None,
        };
        b.create(call, dir, name, &how).map_err(nfsstat3_of)
    }))
}

pub(super) fn mkdir(ctx: &CallCtx<'_>, a: Mkdir3Args) -> Result<Mkdir3Res, ProcError> {
    let set = setattr_of(&a.attributes);
    Ok(make_node(ctx, a.where_, |b, call, dir, name| {
        b.mkdir(call, dir, name, &set).map_err(nfsstat3_of)
    }))
}

pub(super) fn symlink(ctx: &CallCtx<'_>, a: Symlink3Args) -> Result<Symlink3Res, ProcError> {
    let set = setattr_of(&a.symlink_attributes);
    let target = a.symlink_data;
    Ok(make_node(ctx, a.where_, |b, call, dir, name| {
        // As knfsd: an empty target or one with a NUL is invalid.
        if target.is_empty() || target.contains(&0) {
            return Err(Nfsstat3::Inval);
        }
        b.symlink(call, dir, name, &target, &set)
            .map_err(nfsstat3_of)
    }))
}

pub(super) fn mknod(ctx: &CallCtx<'_>, a: Mknod3Args) -> Result<Mknod3Res, ProcError> {
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
    Ok(make_node(ctx, a.where_, |b, call, dir, name| match kind {
        Some(k) => b.mknod(call, dir, name, k, &set).map_err(nfsstat3_of),
        None => Err(Nfsstat3::BadType),
    }))
}

/// REMOVE and RMDIR.
pub(super) fn unlink(ctx: &CallCtx<'_>, what: Diropargs3, is_dir: bool) -> Remove3Res {
    let (exp, dir, g) = match resolve(ctx, what.dir) {
        Ok(v) => v,
        Err(s) => return NfsRes::Fail(s, WccData::default()),
    };
    let cred = g.cred;
    let call = fs_call(ctx, &cred);
    if g.read_only {
        return NfsRes::Fail(Nfsstat3::RoFs, fail_wcc(&exp, &call, &dir));
    }
    if let Err(s) = check_name(&what.name) {
        return NfsRes::Fail(s, fail_wcc(&exp, &call, &dir));
    }
    let _changing = match before_change(
        ctx,
        exp.backend.as_ref(),
        &call,
        Changed::Name(&dir, &what.name),
    ) {
        Ok(c) => c,
        Err(s) => return NfsRes::Fail(s, fail_wcc(&exp, &call, &dir)),
    };
    let r = if is_dir {
        exp.backend.rmdir(&call, &dir, &what.name)
    } else {
        exp.backend.remove(&call, &dir, &what.name)
    };
    let res = match r {
        Ok(w) => NfsRes::Ok(Remove3ResOk {
            dir_wcc: wcc_data_of(&w),
        }),
        Err(e) => NfsRes::Fail(nfsstat3_of(e), fail_wcc(&exp, &call, &dir)),
    };
    owing(ctx, &call, res)
}

pub(super) fn remove(ctx: &CallCtx<'_>, a: Remove3Args) -> Result<Remove3Res, ProcError> {
    Ok(unlink(ctx, a.object, false))
}

pub(super) fn rmdir(ctx: &CallCtx<'_>, a: Rmdir3Args) -> Result<Rmdir3Res, ProcError> {
    Ok(unlink(ctx, a.object, true))
}

pub(super) fn rename(ctx: &CallCtx<'_>, a: Rename3Args) -> Result<Rename3Res, ProcError> {
    let from = resolve(ctx, a.from.dir);
    let to = resolve(ctx, a.to.dir);
    let ((fexp, fdir, g), (texp, tdir, _)) = match (from, to) {
        (Ok(f), Ok(t)) => (f, t),
        // Report wcc for whichever directory did resolve.
        (f, t) => {
            let (mut s, mut body) = (Nfsstat3::Stale, Rename3Wcc::default());
            match &t {
                Ok((e, d, g)) => body.todir_wcc = fail_wcc(e, &fs_call(ctx, &g.cred), d),
                Err(e) => s = *e,
            }
            match &f {
                Ok((e, d, g)) => body.fromdir_wcc = fail_wcc(e, &fs_call(ctx, &g.cred), d),
                Err(e) => s = *e,
            }
            return Ok(NfsRes::Fail(s, body));
        }
    };
    // Both directories are of one export (else XDEV below), so one grant.
    let cred = g.cred;
    let call = fs_call(ctx, &cred);
    let fail = |s: Nfsstat3| {
        NfsRes::Fail(
            s,
            Rename3Wcc {
                fromdir_wcc: fail_wcc(&fexp, &call, &fdir),
                todir_wcc: fail_wcc(&texp, &call, &tdir),
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
    // The file renamed, and one renamed over.
    let moving = before_change(
        ctx,
        fexp.backend.as_ref(),
        &call,
        Changed::Name(&fdir, &a.from.name),
    );
    let over = before_change(
        ctx,
        texp.backend.as_ref(),
        &call,
        Changed::Name(&tdir, &a.to.name),
    );
    let _changing = match (moving, over) {
        (Ok(m), Ok(o)) => (m, o),
        (Err(s), _) | (_, Err(s)) => return Ok(fail(s)),
    };
    let res = match fexp
        .backend
        .rename(&call, &fdir, &a.from.name, &tdir, &a.to.name)
    {
        Ok((fw, tw)) => NfsRes::Ok(Rename3Wcc {
            fromdir_wcc: wcc_data_of(&fw),
            todir_wcc: wcc_data_of(&tw),
        }),
        Err(e) => fail(nfsstat3_of(e)),
    };
    Ok(owing(ctx, &call, res))
}

pub(super) fn link(ctx: &CallCtx<'_>, a: Link3Args) -> Result<Link3Res, ProcError> {
    let (fexp, file, g) = resolve_or_fail!(ctx, a.file);
    let cred = g.cred;
    let call = fs_call(ctx, &cred);
    let (dexp, dir, _) = match resolve(ctx, a.link.dir) {
        Ok(v) => v,
        Err(s) => {
            return Ok(NfsRes::Fail(
                s,
                Link3Body {
                    file_attributes: post_attr(&fexp, &call, &file),
                    linkdir_wcc: WccData::default(),
                },
            ))
        }
    };
    let fail = |s: Nfsstat3| {
        NfsRes::Fail(
            s,
            Link3Body {
                file_attributes: post_attr(&fexp, &call, &file),
                linkdir_wcc: fail_wcc(&dexp, &call, &dir),
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
    let _changing = match before_change(ctx, fexp.backend.as_ref(), &call, Changed::Fh(&file)) {
        Ok(c) => c,
        Err(s) => return Ok(fail(s)),
    };
    let res = match dexp.backend.link(&call, &file, &dir, &a.link.name) {
        Ok((attr, w)) => NfsRes::Ok(Link3Body {
            file_attributes: Some(fattr3_of(&attr)),
            linkdir_wcc: wcc_data_of(&w),
        }),
        Err(e) => fail(nfsstat3_of(e)),
    };
    Ok(owing(ctx, &call, res))
}
