//! Steps every NFSv3 handler shares: route a handle to its export and
//! check the caller may use it, best-effort attributes for failure replies,
//! and the name check.

use rnfsd_fs::{Backend, Call, Fh};
use rnfsd_proto::nfs3::*;
use rnfsd_xdr::{Enc, Xdr};

use super::convert::fattr3_of;
use crate::access::{Denied, Grant};
pub(super) use crate::programs::fscall::fs_call;
use crate::programs::fscall::park_owed;
use crate::programs::CallCtx;
pub(super) use crate::state::deleg::Changed;
use crate::state::deleg::Recalling;
use crate::state::{Export, ExportRef};

/// A change on a `sync` export may leave its call owing a journal commit:
/// its reply then leaves once that commit is done. If the commit fails,
/// the call answers NFS3ERR_IO with no attributes instead (RFC 1813 §4.8;
/// knfsd answers a failed `commit_metadata` with the error).
pub(super) fn owing<T: Xdr, F: Xdr + Default>(
    ctx: &CallCtx<'_>,
    call: &Call<'_>,
    res: NfsRes<T, F>,
) -> NfsRes<T, F> {
    park_owed(ctx, call, || {
        let mut e = Enc::new();
        NfsRes::<T, F>::Fail(Nfsstat3::Io, F::default()).encode(&mut e);
        e.into_vec()
    });
    res
}

/// Route a handle to its export and check the caller may use it; returns
/// the export, the handle and what the caller runs as. Handles longer than
/// NFS3_FHSIZE never get here (they fail to decode: GARBAGE_ARGS, as in
/// knfsd).
///
/// As knfsd: a client the export does not list gets NFS3ERR_STALE (its
/// export lookup fails with ENOENT in `nfsd_set_fh_dentry`), and one calling
/// from an unprivileged port on a `secure` export gets NFS3ERR_PERM
/// (`nfsd_setuser_and_check_port`).
pub(super) fn resolve(ctx: &CallCtx<'_>, fh: NfsFh3) -> Result<(ExportRef, Fh, Grant), Nfsstat3> {
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
        match $crate::programs::nfs3::common::resolve($ctx, $fh) {
            Ok(v) => v,
            Err(s) => return Ok(NfsRes::Fail(s, Default::default())),
        }
    };
}

pub(super) use resolve_or_fail;

/// The one check before every NFSv3 change (WRITE, SETATTR, REMOVE,
/// RENAME, LINK, CREATE UNCHECKED over a file) to `target`: NFSv4 delegations on it are recalled first,
/// and the call answered NFS3ERR_JUKEBOX until they are returned or
/// revoked (as knfsd). Hold the result until the change is made: no
/// delegation is granted on the file meanwhile. Nothing when NFSv4 or its
/// delegations are off.
pub(super) fn before_change(
    ctx: &CallCtx<'_>,
    backend: &dyn Backend,
    call: &Call<'_>,
    target: Changed<'_>,
) -> Result<Option<crate::state::deleg::Access>, Nfsstat3> {
    let Some(n) = ctx.server.nfs4() else {
        return Ok(None);
    };
    if !n.deleg.enabled {
        return Ok(None);
    }
    n.deleg
        .change(&n.state, backend, call, target, None)
        .map_err(|Recalling| Nfsstat3::Jukebox)
}

/// The check before every NFSv3 READ of `fh`: an NFSv4 write delegation
/// on it is recalled first, NFS3ERR_JUKEBOX meanwhile (its holder may
/// have written data the server has not seen). Nothing while no write
/// delegation is held anywhere.
pub(super) fn before_read(
    ctx: &CallCtx<'_>,
    backend: &dyn Backend,
    call: &Call<'_>,
    fh: &Fh,
) -> Result<Option<crate::state::deleg::Access>, Nfsstat3> {
    let Some(n) = ctx.server.nfs4() else {
        return Ok(None);
    };
    n.deleg
        .read(&n.state, backend, call, fh, None)
        .map_err(|Recalling| Nfsstat3::Jukebox)
}

/// Best-effort post-op attributes for failure replies.
pub(super) fn post_attr(exp: &Export, call: &Call<'_>, fh: &Fh) -> PostOpAttr {
    exp.backend.getattr(call, fh).ok().map(|a| fattr3_of(&a))
}

/// wcc_data for a failure: no pre-op attributes, post-op best-effort.
pub(super) fn fail_wcc(exp: &Export, call: &Call<'_>, fh: &Fh) -> WccData {
    WccData {
        before: None,
        after: post_attr(exp, call, fh),
    }
}

/// The backend contract rejects these too; checking here keeps a path
/// separator or NUL from ever reaching a backend (knfsd rejects them while
/// decoding filename3).
pub(super) fn check_name(name: &[u8]) -> Result<(), Nfsstat3> {
    if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
        return Err(Nfsstat3::Inval);
    }
    Ok(())
}
