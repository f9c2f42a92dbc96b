//! A compound's current (and saved) filehandle (RFC 8881 §16.2.3.1.1):
//! a directory of the pseudo-filesystem, or an object of an export with
//! what the caller may do there.
//!
//! One handle format for NFSv3 and NFSv4: an export's handle here is the
//! backend's, the same bytes NFSv3 uses, so a handle from one works in
//! the other. A pseudo directory's is `state::pseudo`'s.

use rnfsd_fs::{Call, Fh};
use rnfsd_proto::nfs4::Nfsstat4;

use crate::access::{Denied, Grant};
use crate::programs::fscall::fs_call;
use crate::programs::CallCtx;
use crate::state::pseudo::Pseudo;
use crate::state::ExportRef;

/// An export's object and the caller's rights there.
#[derive(Clone)]
pub(super) struct Obj {
    pub exp: ExportRef,
    pub fh: Fh,
    pub grant: Grant,
}

impl Obj {
    /// The backend's view of a call on this object.
    pub fn call<'c>(&'c self, ctx: &'c CallCtx<'_>) -> Call<'c> {
        fs_call(ctx, &self.grant.cred)
    }

    /// The export's root.
    pub fn is_root(&self) -> bool {
        self.exp.root_fh.0 == self.fh.0
    }

    /// A change here: NFS4ERR_ROFS on an export read-only for the caller.
    pub fn writable(&self) -> Result<(), Nfsstat4> {
        match self.grant.read_only {
            true => Err(Nfsstat4::RoFs),
            false => Ok(()),
        }
    }
}

/// A filehandle a compound holds.
#[derive(Clone)]
pub(super) enum Cur {
    /// A pseudo directory: its index in the compound's tree.
    Pseudo(usize),
    Obj(Obj),
}

impl Cur {
    /// Its handle's bytes.
    pub fn handle(&self, pseudo: &Pseudo) -> Vec<u8> {
        match self {
            Cur::Pseudo(i) => pseudo.handle(*i).unwrap_or_default(),
            Cur::Obj(o) => o.fh.0.clone(),
        }
    }

    pub fn obj(&self) -> Option<&Obj> {
        match self {
            Cur::Obj(o) => Some(o),
            Cur::Pseudo(_) => None,
        }
    }
}

/// The caller's rights on export `exp`, checked as NFSv3 checks them:
/// a client the export does not list gets NFS4ERR_STALE for its handles
/// (knfsd), one from an unprivileged port on a `secure` export
/// NFS4ERR_PERM.
pub(super) fn grant(ctx: &CallCtx<'_>, exp: &ExportRef) -> Result<Grant, Nfsstat4> {
    match exp.access().check(ctx.peer, &ctx.auth) {
        Ok(g) => Ok(g),
        Err(Denied::NotListed) => {
            tracing::debug!(peer = %ctx.peer, export = exp.path, "client not listed: STALE");
            Err(Nfsstat4::Stale)
        }
        Err(Denied::InsecurePort) => {
            tracing::debug!(peer = %ctx.peer, export = exp.path, "request from insecure port: PERM");
            Err(Nfsstat4::Perm)
        }
    }
}

/// PUTFH's handle as a current filehandle. Too short to be any of ours:
/// NFS4ERR_BADHANDLE; a pseudo directory no longer there, or an export
/// not served now: NFS4ERR_STALE. The backend checks the handle itself
/// (its MAC) when it is used. `pseudo` gives the pseudo-filesystem, asked
/// for a pseudo directory's handle only.
pub(super) fn of_handle<'p>(
    ctx: &CallCtx<'_>,
    pseudo: impl FnOnce() -> &'p Pseudo,
    fh: Vec<u8>,
) -> Result<Cur, Nfsstat4> {
    if Pseudo::is_pseudo_handle(&fh) {
        return pseudo()
            .of_handle(&fh)
            .map(Cur::Pseudo)
            .ok_or(Nfsstat4::Stale);
    }
    if fh.len() < 5 {
        return Err(Nfsstat4::BadHandle);
    }
    let exp = ctx.server.export_of(&fh).ok_or(Nfsstat4::Stale)?;
    let grant = grant(ctx, &exp)?;
    Ok(Cur::Obj(Obj {
        exp,
        fh: Fh(fh),
        grant,
    }))
}

/// The root of export `id` (a junction crossed), for this caller.
pub(super) fn export_root(ctx: &CallCtx<'_>, id: u32) -> Result<Obj, Nfsstat4> {
    let exp = ctx.server.export_by_id(id).ok_or(Nfsstat4::NoEnt)?;
    let grant = match grant(ctx, &exp) {
        Ok(g) => g,
        // A client the export does not list does not see it.
        Err(Nfsstat4::Stale) => return Err(Nfsstat4::NoEnt),
        Err(e) => return Err(e),
    };
    let fh = exp.root_fh.clone();
    Ok(Obj { exp, fh, grant })
}
