//! Extended attributes, an NFSv4.2 extension (RFC 8276 §8.4): GETXATTR,
//! SETXATTR, LISTXATTRS and REMOVEXATTR, in minor version 2 compounds
//! only (the driver answers them NFS4ERR_OP_ILLEGAL in 4.1's).
//!
//! Only the `user.` namespace: the wire names are without the prefix,
//! which the backend adds (RFC 8276 §5.1; knfsd does the same), so a
//! client can reach no other namespace. Bounds are Linux's
//! (`rnfsd_fs::xattr`): a name of at most 250 bytes (255 with the prefix,
//! else NFS4ERR_NAMETOOLONG), a value of at most 64 KiB (else
//! NFS4ERR_XATTR2BIG), and no more than the session's reply holds.
//! Changes follow SETATTR's rules: NFS4ERR_ROFS on a read-only export, and
//! on a `sync` export durable before the reply (`Compound::owe`). Their
//! change_info4 is the object's change attribute (its ctime, which Linux
//! moves on every xattr change) before and after, not atomic (see `dir`).
//! The pseudo-filesystem has no extended attributes (NFS4ERR_NOTSUPP), nor
//! does an export whose backend or filesystem lacks them.

use rnfsd_fs::xattr::{full_name, XattrSet, XATTR_SIZE_MAX};
use rnfsd_fs::FsError;
use rnfsd_proto::nfs4::*;
use rnfsd_xdr::{pad4, Enc, Xdr};

use super::compound::Compound;
use super::cur::{Cur, Obj};
use super::dir::cinfo;
use super::open::{before_change, Changed};
use super::status::of_fs;

/// Bytes of a GETXATTR result besides the value: the status and the
/// value's length word.
const GETXATTR_OVERHEAD: usize = 8;
/// Bytes of a LISTXATTRS result besides the names: the status, cookie,
/// name count and eof.
const LISTXATTRS_OVERHEAD: usize = 4 + 8 + 4 + 4;

/// A backend error as RFC 8276 §8.2 says it: no such attribute
/// NFS4ERR_NOXATTR, a value too large NFS4ERR_XATTR2BIG (for a get, one
/// the reply cannot hold).
fn of_xattr(e: FsError) -> Nfsstat4 {
    match e {
        FsError::Errno(libc::ENODATA) => Nfsstat4::NoXattr,
        FsError::Errno(libc::E2BIG | libc::ERANGE) => Nfsstat4::Xattr2Big,
        e => of_fs(e),
    }
}

/// The current object, when it may have extended attributes.
fn xattr_obj(c: &Compound<'_, '_>) -> Result<Obj, Nfsstat4> {
    match c.cur()? {
        Cur::Pseudo(_) => Err(Nfsstat4::NotSupp),
        Cur::Obj(o) if !o.exp.backend.xattr_support() => Err(Nfsstat4::NotSupp),
        Cur::Obj(o) => Ok(o.clone()),
    }
}

/// A name's checks before anything is looked at (knfsd checks it as it
/// decodes): empty or with a NUL NFS4ERR_INVAL (RFC 8881 §14.2 for a
/// component4), too long NFS4ERR_NAMETOOLONG.
fn check_key(name: &[u8]) -> Result<(), Nfsstat4> {
    full_name(name).map(|_| ()).map_err(of_fs)
}

/// GETXATTR (RFC 8276 §8.4.1), its value written straight into the reply.
pub(super) fn getxattr(c: &mut Compound<'_, '_>, a: GetXattr4Args, e: &mut Enc) -> Nfsstat4 {
    let room = c.reply_room(e).saturating_sub(GETXATTR_OVERHEAD);
    match get(c, &a, room) {
        Ok(v) => {
            e.u32(Nfsstat4::Ok as u32);
            e.opaque(&v);
            Nfsstat4::Ok
        }
        Err(s) => {
            e.u32(s as u32);
            s
        }
    }
}

fn get(c: &Compound<'_, '_>, a: &GetXattr4Args, room: usize) -> Result<Vec<u8>, Nfsstat4> {
    check_key(&a.name.0)?;
    let o = xattr_obj(c)?;
    let call = o.call(c.ctx);
    // Padding included: the value must fit the reply as encoded.
    let max = XATTR_SIZE_MAX.min(room & !3);
    o.exp
        .backend
        .getxattr(&call, &o.fh, &a.name.0, max)
        .map_err(of_xattr)
}

/// SETXATTR (RFC 8276 §8.4.2).
pub(super) fn setxattr(c: &mut Compound<'_, '_>, a: SetXattr4Args) -> SetXattr4Res {
    match set(c, &a) {
        Ok(ci) => NfsRes4::Ok(ci),
        Err(s) => NfsRes4::Fail(s),
    }
}

fn set(c: &mut Compound<'_, '_>, a: &SetXattr4Args) -> Result<ChangeInfo4, Nfsstat4> {
    // An unknown option is NFS4ERR_INVAL, as knfsd answers.
    let how = match a.option {
        SETXATTR4_EITHER => XattrSet::Either,
        SETXATTR4_CREATE => XattrSet::Create,
        SETXATTR4_REPLACE => XattrSet::Replace,
        _ => return Err(Nfsstat4::Inval),
    };
    check_key(&a.key.0)?;
    if a.value.0.len() > XATTR_SIZE_MAX {
        return Err(Nfsstat4::Xattr2Big);
    }
    let o = xattr_obj(c)?;
    o.writable()?;
    // It changes the file's attributes (ctime): other clients'
    // delegations go first, as for SETATTR (RFC 8881 §10.4.1).
    let _changing = before_change(c, &o, Changed::Fh(&o.fh))?;
    let call = o.call(c.ctx);
    let r = o
        .exp
        .backend
        .setxattr(&call, &o.fh, &a.key.0, &a.value.0, how);
    c.owe(&call);
    let w = r.map_err(of_xattr)?;
    Ok(cinfo(&w, &o, &call))
}

/// LISTXATTRS (RFC 8276 §8.4.3): names after `cookie` (the count of names
/// already returned, as knfsd's), as many as `maxcount` and the reply
/// allow. A cookie past the end is NFS4ERR_BADCOOKIE; room for not even
/// one name NFS4ERR_TOOSMALL.
pub(super) fn listxattrs(c: &mut Compound<'_, '_>, a: ListXattrs4Args, e: &mut Enc) -> Nfsstat4 {
    let room = c.reply_room(e);
    match list(c, &a, room) {
        Ok(ok) => {
            NfsRes4::Ok(ok).encode(e);
            Nfsstat4::Ok
        }
        Err(s) => {
            e.u32(s as u32);
            s
        }
    }
}

fn list(
    c: &Compound<'_, '_>,
    a: &ListXattrs4Args,
    room: usize,
) -> Result<ListXattrs4ResOk, Nfsstat4> {
    let o = xattr_obj(c)?;
    let call = o.call(c.ctx);
    // More names than Linux lists at once (XATTR_LIST_MAX): TOOSMALL, as
    // knfsd answers.
    let names = o.exp.backend.listxattr(&call, &o.fh).map_err(|e| match e {
        FsError::Errno(libc::ERANGE) => Nfsstat4::TooSmall,
        e => of_xattr(e),
    })?;
    page(names, a, room)
}

/// The page of `names` LISTXATTRS `a` answers within `room` reply bytes.
fn page(
    names: Vec<Vec<u8>>,
    a: &ListXattrs4Args,
    room: usize,
) -> Result<ListXattrs4ResOk, Nfsstat4> {
    let start = usize::try_from(a.cookie).map_err(|_| Nfsstat4::BadCookie)?;
    if start > names.len() {
        return Err(Nfsstat4::BadCookie);
    }
    // maxcount bounds LISTXATTRS4resok (RFC 8276 §8.4.3.2): cookie, count,
    // names and eof.
    let budget = (a.maxcount as usize)
        .saturating_add(4)
        .min(room)
        .saturating_sub(LISTXATTRS_OVERHEAD);
    let mut used = 0usize;
    let mut out = Vec::new();
    let total = names.len();
    for n in names.into_iter().skip(start) {
        let len = 4 + pad4(n.len());
        if used + len > budget || out.len() >= MAX_XATTR_NAMES {
            break;
        }
        used += len;
        out.push(Component4(n));
    }
    let eof = start + out.len() == total;
    if out.is_empty() && !eof {
        return Err(Nfsstat4::TooSmall);
    }
    Ok(ListXattrs4ResOk {
        cookie: (start + out.len()) as u64,
        names: out,
        eof,
    })
}

/// REMOVEXATTR (RFC 8276 §8.4.4).
pub(super) fn removexattr(c: &mut Compound<'_, '_>, a: RemoveXattr4Args) -> RemoveXattr4Res {
    match remove(c, &a) {
        Ok(ci) => NfsRes4::Ok(ci),
        Err(s) => NfsRes4::Fail(s),
    }
}

fn remove(c: &mut Compound<'_, '_>, a: &RemoveXattr4Args) -> Result<ChangeInfo4, Nfsstat4> {
    check_key(&a.name.0)?;
    let o = xattr_obj(c)?;
    o.writable()?;
    let _changing = before_change(c, &o, Changed::Fh(&o.fh))?;
    let call = o.call(c.ctx);
    let r = o.exp.backend.removexattr(&call, &o.fh, &a.name.0);
    c.owe(&call);
    let w = r.map_err(of_xattr)?;
    Ok(cinfo(&w, &o, &call))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<Vec<u8>> {
        n.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    fn args(cookie: u64, maxcount: u32) -> ListXattrs4Args {
        ListXattrs4Args { cookie, maxcount }
    }

    #[test]
    fn pages_follow_the_cookie_and_the_byte_budgets() {
        let all = names(&["a", "bb", "cccc", "ddddd"]);
        // Everything fits.
        let p = page(all.clone(), &args(0, 8192), 1 << 20).unwrap();
        assert_eq!(p.names.len(), 4);
        assert!(p.eof);
        assert_eq!(p.cookie, 4);
        // maxcount: cookie 8 + count 4 + eof 4 + two names of 8 bytes.
        let p = page(all.clone(), &args(0, 16 + 16), 1 << 20).unwrap();
        assert_eq!(
            p.names,
            vec![Component4(b"a".to_vec()), Component4(b"bb".to_vec())]
        );
        assert!(!p.eof);
        assert_eq!(p.cookie, 2);
        // On from the cookie: "cccc" (8) fits, "ddddd" (12) does not.
        let p = page(all.clone(), &args(2, 16 + 8), 1 << 20).unwrap();
        assert_eq!(p.names, vec![Component4(b"cccc".to_vec())]);
        assert_eq!(p.cookie, 3);
        // The reply's room bounds it too (status word included there).
        let p = page(all.clone(), &args(0, 8192), 4 + 16 + 8).unwrap();
        assert_eq!(p.names.len(), 1);
        // No room for one name.
        assert_eq!(
            page(all.clone(), &args(3, 20), 1 << 20),
            Err(Nfsstat4::TooSmall)
        );
        // The end, and past it.
        let p = page(all.clone(), &args(4, 20), 1 << 20).unwrap();
        assert!(p.names.is_empty() && p.eof);
        assert_eq!(
            page(all.clone(), &args(5, 8192), 1 << 20),
            Err(Nfsstat4::BadCookie)
        );
        assert_eq!(
            page(all, &args(u64::MAX, 8192), 1 << 20),
            Err(Nfsstat4::BadCookie)
        );
        // No names: an empty last page.
        let p = page(Vec::new(), &args(0, 8), 1 << 20).unwrap();
        assert!(p.names.is_empty() && p.eof && p.cookie == 0);
    }

    #[test]
    fn errors_as_rfc_8276_says() {
        assert_eq!(of_xattr(FsError::Errno(libc::ENODATA)), Nfsstat4::NoXattr);
        assert_eq!(of_xattr(FsError::Errno(libc::E2BIG)), Nfsstat4::Xattr2Big);
        assert_eq!(of_xattr(FsError::Errno(libc::ERANGE)), Nfsstat4::Xattr2Big);
        assert_eq!(of_xattr(FsError::Errno(libc::EEXIST)), Nfsstat4::Exist);
        assert_eq!(of_xattr(FsError::NotSupported), Nfsstat4::NotSupp);
        assert_eq!(check_key(b""), Err(Nfsstat4::Inval));
        assert_eq!(check_key(&[b'x'; 251]), Err(Nfsstat4::NameTooLong));
        assert_eq!(check_key(&[b'x'; 250]), Ok(()));
    }
}
