//! GETATTR and ACCESS (RFC 8881 §18.7, §18.1), for export objects and
//! pseudo directories.

use rnfsd_fs::{Attr, Backend, Call, Fh, FileType, FsStat, PathConf, Time};
use rnfsd_proto::nfs4::*;
use rnfsd_xdr::Enc;

use super::compound::Compound;
use super::cur::{Cur, Obj};
use super::fattr::{self, Subject, WRITE_ONLY};
use super::status::of_fs;
use crate::state::pseudo::Pseudo;
use crate::state::Export;

/// ACCESS4 bits (§18.1.1), the same values as NFSv3's.
const ACCESS4_READ: u32 = 0x01;
const ACCESS4_LOOKUP: u32 = 0x02;
const ACCESS4_MODIFY: u32 = 0x04;
const ACCESS4_EXTEND: u32 = 0x08;
const ACCESS4_DELETE: u32 = 0x10;
const ACCESS4_EXECUTE: u32 = 0x20;
const ACCESS4_ALL: u32 = 0x3f;
/// XAREAD, XAWRITE and XALIST (RFC 8276 §8.4.2.1).
const ACCESS4_XA: u32 = ACCESS4_XAREAD | ACCESS4_XAWRITE | ACCESS4_XALIST;

/// The ACCESS4 bits the backend is asked for the extended attribute bits
/// of `want`.
fn xa_needs(want: u32) -> u32 {
    let mut n = 0;
    if want & (ACCESS4_XAREAD | ACCESS4_XALIST) != 0 {
        n |= ACCESS4_READ;
    }
    if want & ACCESS4_XAWRITE != 0 {
        n |= ACCESS4_MODIFY;
    }
    n
}

/// The extended attribute bits that the granted bits `g` give.
fn xa_granted(g: u32) -> u32 {
    let mut x = 0;
    if g & ACCESS4_READ != 0 {
        x |= ACCESS4_XAREAD | ACCESS4_XALIST;
    }
    if g & ACCESS4_MODIFY != 0 {
        x |= ACCESS4_XAWRITE;
    }
    x
}

/// What of its filesystem an object's attributes may need: statfs and
/// pathconf, fetched only for the attributes that need them, and shared by
/// the entries of one READDIR on one filesystem.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct FsFacts {
    pub fsstat: Option<FsStat>,
    pub pathconf: Option<PathConf>,
    /// NFSv4.2's clone_blksize (RFC 7862 §12.2.1).
    pub clone_blksize: Option<u32>,
    /// maxfilesize (§5.8.2.21): the filesystem's, from FSINFO's.
    pub maxfilesize: Option<u64>,
}

impl FsFacts {
    /// What `want` needs, asked of the backend about `fh`.
    pub fn of(
        backend: &dyn Backend,
        call: &Call<'_>,
        fh: &Fh,
        want: &Bitmap4,
    ) -> Result<FsFacts, Nfsstat4> {
        // Most requests (GETATTR's common masks) need none of them.
        if !fattr::needs_facts(want) {
            return Ok(FsFacts::default());
        }
        let fsstat = match fattr::needs_fsstat(want) {
            true => Some(backend.fsstat(call, fh).map_err(of_fs)?.0),
            false => None,
        };
        let pathconf = match fattr::needs_pathconf(want) {
            true => Some(backend.pathconf(call, fh).map_err(of_fs)?.0),
            false => None,
        };
        let clone_blksize = match want.contains(FATTR4_CLONE_BLKSIZE) {
            true => Some(backend.clone_blksize(call, fh).map_err(of_fs)?),
            false => None,
        };
        let maxfilesize = match want.contains(FATTR4_MAXFILESIZE) {
            true => Some(backend.fsinfo(call, fh).map_err(of_fs)?.0.maxfilesize),
            false => None,
        };
        Ok(FsFacts {
            fsstat,
            pathconf,
            clone_blksize,
            maxfilesize,
        })
    }

    /// Whether these answer everything `want` needs.
    pub fn cover(&self, want: &Bitmap4) -> bool {
        (self.fsstat.is_some() || !fattr::needs_fsstat(want))
            && (self.pathconf.is_some() || !fattr::needs_pathconf(want))
            && (self.clone_blksize.is_some() || !want.contains(FATTR4_CLONE_BLKSIZE))
            && (self.maxfilesize.is_some() || !want.contains(FATTR4_MAXFILESIZE))
    }
}

/// The attributes of an export object, with what `want` also needs.
pub(super) fn obj_fattr(
    c: &Compound<'_, '_>,
    o: &Obj,
    attr: &Attr,
    want: &Bitmap4,
    e: &mut Enc,
) -> Result<(), Nfsstat4> {
    // Most requests (GETATTR's common masks) need none of them: no
    // backend call is made, nor facts built.
    if !fattr::needs_facts(want) {
        let none = FsFacts::default();
        export_fattr(c, &o.exp, &o.fh, attr, o.is_root(), &none, want, e);
        return Ok(());
    }
    let call = o.call(c.ctx);
    let facts = FsFacts::of(o.exp.backend.as_ref(), &call, &o.fh, want)?;
    export_fattr(c, &o.exp, &o.fh, attr, o.is_root(), &facts, want, e);
    Ok(())
}

/// The attributes of object `fh` of export `exp` (its root if `root`),
/// whose filesystem's facts `want` needs are in `facts`.
#[allow(clippy::too_many_arguments)]
pub(super) fn export_fattr(
    c: &Compound<'_, '_>,
    exp: &Export,
    fh: &Fh,
    attr: &Attr,
    root: bool,
    facts: &FsFacts,
    want: &Bitmap4,
    e: &mut Enc,
) {
    let mounted_on_fileid = match root {
        true => Pseudo::fileid_of_path(&exp.path),
        false => attr.fileid,
    };
    let s = Subject {
        attr,
        fsid: (u64::from(exp.id), attr.fsid),
        fh: &fh.0,
        mounted_on_fileid,
        fsstat: facts.fsstat,
        pathconf: facts.pathconf,
        lease: c.nfs4.lease.as_secs().min(u64::from(u32::MAX)) as u32,
        max_io: u64::from(c.ctx.server.max_io),
        owners: fattr::owners(c),
        xattr: (c.minor >= 2).then(|| exp.backend.xattr_support()),
        minor: c.minor,
        clone_blksize: facts.clone_blksize.unwrap_or(0),
        maxfilesize: facts.maxfilesize.unwrap_or(fattr::MAXFILESIZE),
    };
    fattr::encode(e, want, &s);
}

/// fsid of the pseudo-filesystem: its own (§7.5), unlike any export's
/// (whose major is an export id, below 2^32).
pub(super) const PSEUDO_FSID: (u64, u64) = (0xffff_ffff_0000_0000, 0);

/// A pseudo directory's attributes: read-only, owned by root, times of
/// the server's start.
pub(super) fn pseudo_attr(c: &Compound<'_, '_>, i: usize) -> Attr {
    let node = c.pseudo().node(i);
    let fileid = node.map_or(0, |n| n.fileid);
    let nlink = 2 + node.map_or(0, |n| n.children.len() as u32);
    let t = Time {
        sec: i64::from(c.nfs4.state.boot()),
        nsec: 0,
    };
    Attr {
        ftype: FileType::Directory,
        mode: 0o555,
        nlink,
        uid: 0,
        gid: 0,
        size: 4096,
        used: 4096,
        rdev: (0, 0),
        fsid: 0,
        fileid,
        atime: t,
        mtime: t,
        ctime: t,
    }
}

pub(super) fn pseudo_fattr(c: &Compound<'_, '_>, i: usize, want: &Bitmap4, e: &mut Enc) {
    let attr = pseudo_attr(c, i);
    let fh = c.pseudo().handle(i).unwrap_or_default();
    let s = Subject {
        attr: &attr,
        fsid: PSEUDO_FSID,
        fh: &fh,
        mounted_on_fileid: attr.fileid,
        fsstat: None,
        pathconf: None,
        lease: c.nfs4.lease.as_secs().min(u64::from(u32::MAX)) as u32,
        max_io: u64::from(c.ctx.server.max_io),
        owners: fattr::owners(c),
        // No extended attributes on the pseudo-filesystem.
        xattr: (c.minor >= 2).then_some(false),
        minor: c.minor,
        clone_blksize: 0,
        maxfilesize: fattr::MAXFILESIZE,
    };
    fattr::encode(e, want, &s);
}

/// GETATTR (§18.7), written straight into the reply.
pub(super) fn getattr(c: &mut Compound<'_, '_>, a: GetAttr4Args, e: &mut Enc) -> Nfsstat4 {
    if WRITE_ONLY.iter().any(|&w| a.attr_request.contains(w)) {
        e.u32(Nfsstat4::Inval as u32);
        return Nfsstat4::Inval;
    }
    let status_at = e.len();
    e.u32(Nfsstat4::Ok as u32);
    // Borrowed, not cloned: no handle copy and no shared reference count
    // touched on the hot path.
    let c: &Compound<'_, '_> = c;
    let r = match &c.cur {
        Some(Cur::Pseudo(i)) => {
            pseudo_fattr(c, *i, &a.attr_request, e);
            Ok(())
        }
        Some(Cur::Obj(o)) => {
            let call = o.call(c.ctx);
            match o.exp.backend.getattr(&call, &o.fh) {
                Ok(attr) => match holders_attrs(c, o, &attr, &a.attr_request) {
                    Ok(None) => obj_fattr(c, o, &attr, &a.attr_request, e),
                    Ok(Some(attr)) => obj_fattr(c, o, &attr, &a.attr_request, e),
                    Err(s) => Err(s),
                },
                Err(err) => Err(of_fs(err)),
            }
        }
        None => Err(Nfsstat4::NoFileHandle),
    };
    match r {
        Ok(()) => Nfsstat4::Ok,
        Err(s) => {
            e.truncate(status_at);
            e.u32(s as u32);
            s
        }
    }
}

/// A GETATTR of size or change of a file under another client's write
/// delegation (RFC 8881 §10.4.3, as knfsd's
/// nfsd4_deleg_getattr_conflict): the holder is asked by CB_GETATTR, on
/// a worker thread, waiting `CB_GETATTR_WAIT` at most. If it changed the
/// file (its change or size differs from the server's at the grant),
/// the file's times are moved to now, so the change attribute moves on,
/// and the size answered is the holder's. A holder that does not answer
/// is recalled, and a file whose delegation is being recalled answers
/// NFS4ERR_DELAY until it is returned. None: the server's own attributes
/// are the truth.
fn holders_attrs(
    c: &Compound<'_, '_>,
    o: &Obj,
    attr: &Attr,
    want: &Bitmap4,
) -> Result<Option<Attr>, Nfsstat4> {
    let (d, st) = (&c.nfs4.deleg, &c.nfs4.state);
    if !d.enabled
        || !st.any_write_delegation()
        || attr.ftype != FileType::Regular
        || !(want.contains(FATTR4_SIZE) || want.contains(FATTR4_CHANGE))
    {
        return Ok(None);
    }
    let key = rnfsd_v4state::FileKey {
        fsid: attr.fsid,
        fileid: attr.fileid,
    };
    let by = c.client().ok().map(|h| h.id());
    let Some(h) = st.write_holder(&key, by) else {
        return Ok(None);
    };
    if h.recalled {
        return Err(Nfsstat4::Delay);
    }
    let answer = match c.ctx.on_loop {
        // An event loop does not wait: the compound runs again on a
        // worker (this status is never sent).
        Some(l) if l.0.give_up_to_wait() => return Err(Nfsstat4::Delay),
        // Past giving up (the compound changed state before): recalled.
        Some(_) => None,
        None => d.cb_getattr(h.recall.client.id(), &h.recall.fh),
    };
    let Some(a) = answer else {
        return match d.access(st, key, by, true) {
            Err(crate::state::deleg::Recalling) => Err(Nfsstat4::Delay),
            // Revoked or returned meanwhile: the server's are the truth.
            Ok(_) => Ok(None),
        };
    };
    if a.change == h.change && a.size == attr.size {
        return Ok(None);
    }
    // Modified under the delegation: mtime (and so ctime) moves to now,
    // as knfsd's, set as the file's owner (who may always set it to
    // now), so the change attribute moves past what any client saw.
    // Should that fail, the change answered is one past the server's,
    // which the holder's writes will pass.
    let owner = rnfsd_fs::Cred {
        uid: attr.uid,
        gid: attr.gid,
        gids: Vec::new(),
    };
    let touch = rnfsd_fs::SetAttr {
        mtime: rnfsd_fs::SetTime::ServerTime,
        ..rnfsd_fs::SetAttr::default()
    };
    let ocall = Call::thread(&owner, false);
    // The file's inotify watch must not take this for a local change.
    let own = d.own_change(key);
    let mut now = match o.exp.backend.setattr(&ocall, &o.fh, &touch, None) {
        Ok(w) => w.after.unwrap_or_else(|| attr.clone()),
        Err(_) => attr.clone(),
    };
    drop(own);
    if fattr::change(&now) == fattr::change(attr) {
        let ns = fattr::change(attr).wrapping_add(1);
        now.ctime = Time {
            sec: (ns / 1_000_000_000) as i64,
            nsec: (ns % 1_000_000_000) as u32,
        };
    }
    now.size = a.size;
    Ok(Some(now))
}

/// ACCESS (§18.1): the backend's answer, less what a read-only export
/// forbids; a pseudo directory may be read and searched only. In a minor
/// version 2 compound the extended attribute bits too (RFC 8276
/// §8.4.2.1), as knfsd decides them: XAREAD and XALIST as READ, XAWRITE
/// as MODIFY, on an export whose filesystem has them.
pub(super) fn access(c: &mut Compound<'_, '_>, a: Access4Args) -> Access4Res {
    let known = match c.minor >= 2 {
        true => ACCESS4_ALL | ACCESS4_XA,
        false => ACCESS4_ALL,
    };
    if a.access & !known != 0 {
        return NfsRes4::Fail(Nfsstat4::Inval);
    }
    let cur = match c.cur() {
        Ok(cur) => cur,
        Err(s) => return NfsRes4::Fail(s),
    };
    let granted = match cur {
        Cur::Pseudo(_) => a.access & (ACCESS4_READ | ACCESS4_LOOKUP | ACCESS4_EXECUTE),
        Cur::Obj(o) => {
            let call = o.call(c.ctx);
            let xa = a.access & ACCESS4_XA != 0 && o.exp.backend.xattr_support();
            let mut want = a.access & ACCESS4_ALL;
            if xa {
                want |= xa_needs(a.access);
            }
            match o.exp.backend.access(&call, &o.fh, want) {
                Ok((mut g, _)) => {
                    if o.grant.read_only {
                        g &= !(ACCESS4_MODIFY | ACCESS4_EXTEND | ACCESS4_DELETE);
                    }
                    if xa {
                        g |= xa_granted(g);
                    }
                    g & a.access
                }
                Err(err) => return NfsRes4::Fail(of_fs(err)),
            }
        }
    };
    NfsRes4::Ok(Access4ResOk {
        supported: a.access,
        access: granted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xattr_access_bits_follow_read_and_modify() {
        assert_eq!(xa_needs(ACCESS4_XALIST), ACCESS4_READ);
        assert_eq!(
            xa_needs(ACCESS4_XAREAD | ACCESS4_XAWRITE),
            ACCESS4_READ | ACCESS4_MODIFY
        );
        assert_eq!(xa_needs(ACCESS4_LOOKUP), 0);
        assert_eq!(xa_granted(ACCESS4_READ), ACCESS4_XAREAD | ACCESS4_XALIST);
        assert_eq!(xa_granted(ACCESS4_MODIFY | ACCESS4_LOOKUP), ACCESS4_XAWRITE);
        assert_eq!(xa_granted(ACCESS4_EXECUTE), 0);
    }
}
