//! NULL, GETATTR, SETATTR, ACCESS and the file system queries FSSTAT,
//! FSINFO and PATHCONF (RFC 1813 §3.3.0-3.3.4, §3.3.18-3.3.20).

use rnfsd_proto::nfs3::*;

use super::common::{before_change, fail_wcc, fs_call, owing, post_attr, resolve_or_fail, Changed};
use super::convert::*;
use super::{max_io, DTPREF};
use crate::programs::CallCtx;
use rnfsd_rpc::ProcError;

pub(super) fn null(_ctx: &CallCtx<'_>, _a: ()) -> Result<(), ProcError> {
    Ok(())
}

pub(super) fn getattr(ctx: &CallCtx<'_>, a: GetAttr3Args) -> Result<GetAttr3Res, ProcError> {
    let (exp, fh, g) = resolve_or_fail!(ctx, a.object);
    let cred = g.cred;
    let call = fs_call(ctx, &cred);
    Ok(match exp.backend.getattr(&call, &fh) {
        Ok(attr) => NfsRes::Ok(GetAttr3ResOk {
            obj_attributes: fattr3_of(&attr),
        }),
        Err(e) => NfsRes::Fail(nfsstat3_of(e), ()),
    })
}

pub(super) fn setattr(ctx: &CallCtx<'_>, a: SetAttr3Args) -> Result<SetAttr3Res, ProcError> {
    let (exp, fh, g) = resolve_or_fail!(ctx, a.object);
    let cred = g.cred;
    let call = fs_call(ctx, &cred);
    if g.read_only {
        return Ok(NfsRes::Fail(Nfsstat3::RoFs, fail_wcc(&exp, &call, &fh)));
    }
    let set = setattr_of(&a.new_attributes);
    let guard = a.guard.map(time_of);
    let _changing = match before_change(ctx, exp.backend.as_ref(), &call, Changed::Fh(&fh)) {
        Ok(c) => c,
        Err(s) => return Ok(NfsRes::Fail(s, fail_wcc(&exp, &call, &fh))),
    };
    let res = match exp.backend.setattr(&call, &fh, &set, guard) {
        Ok(w) => NfsRes::Ok(SetAttr3ResOk {
            obj_wcc: wcc_data_of(&w),
        }),
        Err(e) => NfsRes::Fail(nfsstat3_of(e), fail_wcc(&exp, &call, &fh)),
    };
    Ok(owing(ctx, &call, res))
}

pub(super) fn access(ctx: &CallCtx<'_>, a: Access3Args) -> Result<Access3Res, ProcError> {
    let (exp, fh, g) = resolve_or_fail!(ctx, a.object);
    let cred = g.cred;
    let call = fs_call(ctx, &cred);
    Ok(match exp.backend.access(&call, &fh, a.access) {
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
        Err(e) => NfsRes::Fail(nfsstat3_of(e), post_attr(&exp, &call, &fh)),
    })
}

pub(super) fn fsstat(ctx: &CallCtx<'_>, a: FsStat3Args) -> Result<FsStat3Res, ProcError> {
    let (exp, fh, g) = resolve_or_fail!(ctx, a.fsroot);
    let cred = g.cred;
    let call = fs_call(ctx, &cred);
    Ok(match exp.backend.fsstat(&call, &fh) {
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
        Err(e) => NfsRes::Fail(nfsstat3_of(e), post_attr(&exp, &call, &fh)),
    })
}

pub(super) fn fsinfo(ctx: &CallCtx<'_>, a: FsInfo3Args) -> Result<FsInfo3Res, ProcError> {
    let (exp, fh, g) = resolve_or_fail!(ctx, a.fsroot);
    let cred = g.cred;
    let call = fs_call(ctx, &cred);
    let io = max_io(ctx);
    Ok(match exp.backend.fsinfo(&call, &fh) {
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
        Err(e) => NfsRes::Fail(nfsstat3_of(e), post_attr(&exp, &call, &fh)),
    })
}

pub(super) fn pathconf(ctx: &CallCtx<'_>, a: PathConf3Args) -> Result<PathConf3Res, ProcError> {
    let (exp, fh, g) = resolve_or_fail!(ctx, a.object);
    let cred = g.cred;
    let call = fs_call(ctx, &cred);
    Ok(match exp.backend.pathconf(&call, &fh) {
        Ok((p, attr)) => NfsRes::Ok(PathConf3ResOk {
            obj_attributes: Some(fattr3_of(&attr)),
            linkmax: p.linkmax,
            name_max: p.name_max,
            no_trunc: p.no_trunc,
            chown_restricted: p.chown_restricted,
            case_insensitive: p.case_insensitive,
            case_preserving: p.case_preserving,
        }),
        Err(e) => NfsRes::Fail(nfsstat3_of(e), post_attr(&exp, &call, &fh)),
    })
}
