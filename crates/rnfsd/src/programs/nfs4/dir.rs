//! The namespace: CREATE, LINK, REMOVE, RENAME, READLINK and READDIR
//! (RFC 8881 §18.4, §18.9, §18.25, §18.26, §18.24, §18.23).
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

use rnfsd_fs::{Call, DirPage, FsError, NodeKind, Wcc};
use rnfsd_proto::nfs4::*;
use rnfsd_xdr::{pad4, Dec, Enc, Xdr};

use super::attr::{export_fattr, pseudo_fattr, FsFacts};
use super::compound::Compound;
use super::cur::{self, Cur, Obj};
use super::fattr::{self, WRITE_ONLY};
use super::fh::{check_name, not_a_dir};
use super::open::{before_change, Changed};
use super::status::of_fs;
use super::MAX_COMPOUND_REPLY;
use crate::limits::MAX_DIR_BATCH;
use crate::state::pseudo::{Child, Node};

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
pub(super) fn cinfo(w: &Wcc, dir: &Obj, call: &Call<'_>) -> ChangeInfo4 {
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
    let (set, mut attrset) = fattr::decode_settable(&a.createattrs, &fattr::owners(c))?;
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
    // No recall: a name that exists makes CREATE fail (NFS4ERR_EXIST).
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
    let _changing = before_change(c, &src, Changed::Fh(&src.fh))?;
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
    let _changing = before_change(c, &dir, Changed::Name(&dir.fh, name))?;
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
    // The source directory is changed too: a read-only export is
    // NFS4ERR_ROFS before any NFS4ERR_XDEV (knfsd's nfsd_rename checks
    // both directories for writing first).
    if let Some(f) = &from {
        f.writable()?;
    }
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
    // The file renamed, and one renamed over.
    let _moving = before_change(c, &from, Changed::Name(&from.fh, &a.oldname.0))?;
    let _over = before_change(c, &to, Changed::Name(&to.fh, &a.newname.0))?;
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

/// A READDIR cookie is the backend's plus this: cookie 0 is the start and
/// 1 and 2 are reserved (§18.23.3), so no entry may have them, whatever a
/// backend's first offsets are. A backend's cookies are file offsets
/// (below 2^63), so adding this never wraps.
const COOKIE_BASE: u64 = 2;

// A backend's first entry after the start (its cookie at least 1) is past
// the reserved cookies.
const _: () = assert!(1 + COOKIE_BASE > 2);

/// The wire cookie of a backend's; None past u64 (no file offset is).
fn to_wire(backend: u64) -> Option<u64> {
    backend.checked_add(COOKIE_BASE)
}

/// The backend cookie of a wire cookie past the reserved ones.
fn of_wire(wire: u64) -> u64 {
    wire.saturating_sub(COOKIE_BASE)
}

/// Attributes READDIR answers from a directory entry itself, without
/// looking the entry up (what a client listing names asks: Linux asks
/// these two). mounted_on_fileid is the entry's fileid as the directory
/// holds it, which is what it means for an entry (§5.8.2.23).
const FROM_ENTRY: &[u32] = &[FATTR4_RDATTR_ERROR, FATTR4_MOUNTED_ON_FILEID];

/// READDIR (§18.23), written straight into the reply. An entry whose
/// attributes fail carries rdattr_error if asked for, else fails the
/// READDIR; one gone meanwhile is left out (as knfsd).
pub(super) fn readdir(c: &mut Compound<'_, '_>, a: ReadDir4Args, e: &mut Enc) -> Nfsstat4 {
    let at = e.len();
    match list(c, &a, e) {
        Ok(()) => Nfsstat4::Ok,
        Err(s) => {
            e.truncate(at);
            e.u32(s as u32);
            s
        }
    }
}

/// What one READDIR lists and within what.
struct Listing<'r> {
    a: &'r ReadDir4Args,
    /// The attributes asked that we support.
    want: Bitmap4,
    /// Bytes READDIR4resok may have.
    maxcount: usize,
}

fn list(c: &Compound<'_, '_>, a: &ReadDir4Args, e: &mut Enc) -> Result<(), Nfsstat4> {
    // As GETATTR (§5.7), and knfsd before anything else.
    if WRITE_ONLY.iter().any(|&w| a.attr_request.contains(w)) {
        return Err(Nfsstat4::Inval);
    }
    // A verifier with the first cookie is one the client cannot have
    // been given (knfsd).
    if a.cookie == 1 || a.cookie == 2 || (a.cookie == 0 && a.cookieverf.0 != [0; 8]) {
        return Err(Nfsstat4::BadCookie);
    }
    let l = Listing {
        a,
        want: a.attr_request.intersect(&fattr::supported()),
        maxcount: maxcount(c, a.maxcount, e.len()),
    };
    if l.maxcount < ReaddirWriter::FIXED_LEN {
        return Err(Nfsstat4::TooSmall);
    }
    match c.cur()? {
        Cur::Pseudo(i) => list_pseudo(c, *i, &l, e),
        Cur::Obj(o) => list_obj(c, &o.clone(), &l, e),
    }
}

/// The client's maxcount, within what the reply has room for: the
/// session's largest reply less what the reply holds already (`used`
/// counts the RPC header too, so this errs small) and the status word.
fn maxcount(c: &Compound<'_, '_>, asked: u32, used: usize) -> usize {
    let limit = c
        .ticket
        .as_ref()
        .map_or(MAX_COMPOUND_REPLY, |t| t.max_response_size());
    (asked as usize).min(limit.saturating_sub(used + 4))
}

/// Starts the result: READDIR's number (written already by the table,
/// and again by the writer), NFS4_OK and the verifier.
fn begin(e: &mut Enc, l: &Listing<'_>, verf: [u8; 8]) -> ReaddirWriter {
    e.truncate(e.len() - 4);
    ReaddirWriter::begin(e, Verifier4(verf), l.a.dircount, l.maxcount as u32)
}

/// The result's end: none written but one there was is NFS4ERR_TOOSMALL.
fn end(w: ReaddirWriter, e: &mut Enc, full: bool, eof: bool) -> Result<(), Nfsstat4> {
    if full && w.entries() == 0 {
        return Err(Nfsstat4::TooSmall);
    }
    w.finish(e, eof && !full);
    Ok(())
}

/// An entry whose attributes failed with `s`: rdattr_error if asked for,
/// else the READDIR fails (§18.23.3).
fn rdattr_error(want: &Bitmap4, s: Nfsstat4) -> Result<Fattr4, Nfsstat4> {
    if !want.contains(FATTR4_RDATTR_ERROR) {
        return Err(s);
    }
    let mut v = Enc::new();
    v.u32(s as u32);
    Ok(Fattr4 {
        attrmask: fattr::bits(&[FATTR4_RDATTR_ERROR]),
        attr_vals: v.into_vec(),
    })
}

/// fattr4 as `fattr` wrote it into `scratch`.
fn take_fattr(scratch: &mut Enc) -> Result<Fattr4, Nfsstat4> {
    let f = Fattr4::decode(&mut Dec::new(scratch.as_slice())).map_err(|_| Nfsstat4::ServerFault);
    scratch.truncate(0);
    f
}

/// A pseudo directory's cookie verifier: a hash of its entries, so a
/// listing begun before a reload changed them is NFS4ERR_NOT_SAME.
fn pseudo_verifier(n: &Node) -> [u8; 8] {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ n.fileid;
    for (name, _) in &n.children {
        for &b in name.iter().chain(b"/") {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h.max(1).to_be_bytes()
}

/// A pseudo directory's entries: its pseudo directories, and the exports
/// joined there (a junction: the export root's attributes, with
/// mounted_on_fileid, §7.7) that the client may see. Entry `j`'s cookie
/// is `j + 1 + COOKIE_BASE`.
fn list_pseudo(
    c: &Compound<'_, '_>,
    i: usize,
    l: &Listing<'_>,
    e: &mut Enc,
) -> Result<(), Nfsstat4> {
    let pseudo = c.pseudo().clone();
    let node = pseudo.node(i).ok_or(Nfsstat4::Stale)?;
    let verf = pseudo_verifier(node);
    let a = l.a;
    let from = match a.cookie {
        0 => 0,
        k => {
            if a.cookieverf.0 != verf && a.cookieverf.0 != [0; 8] {
                return Err(Nfsstat4::NotSame);
            }
            usize::try_from(of_wire(k)).map_err(|_| Nfsstat4::BadCookie)?
        }
    };
    if from > node.children.len() {
        return Err(Nfsstat4::BadCookie);
    }
    let mut w = begin(e, l, verf);
    let mut scratch = Enc::new();
    let mut full = false;
    for (j, (name, child)) in node.children.iter().enumerate().skip(from) {
        let attrs = match *child {
            Child::Dir(k) => {
                pseudo_fattr(c, k, &l.want, &mut scratch);
                take_fattr(&mut scratch)?
            }
            Child::Export(id) => match cur::export_root(c.ctx, id) {
                Ok(o) => match root_fattr(c, &o, &l.want, &mut scratch) {
                    Ok(()) => take_fattr(&mut scratch)?,
                    Err(s) => rdattr_error(&l.want, s)?,
                },
                // Not an export this client may see.
                Err(Nfsstat4::NoEnt) => continue,
                Err(s) => rdattr_error(&l.want, s)?,
            },
        };
        if !w.push(e, j as u64 + 1 + COOKIE_BASE, name, &attrs) {
            full = true;
            break;
        }
    }
    end(w, e, full, true)
}

/// An export root's attributes, as a junction shows them.
fn root_fattr(c: &Compound<'_, '_>, o: &Obj, want: &Bitmap4, e: &mut Enc) -> Result<(), Nfsstat4> {
    let call = o.call(c.ctx);
    let attr = o.exp.backend.getattr(&call, &o.fh).map_err(of_fs)?;
    let facts = FsFacts::of(o.exp.backend.as_ref(), &call, &o.fh, want)?;
    export_fattr(c, &o.exp, &o.fh, &attr, true, &facts, want, e);
    Ok(())
}

/// Bytes one entry's attributes may take, for how many entries to ask a
/// backend for: `want` encoded for an object with the longest owner
/// names and a handle as long as the directory's.
fn attrs_estimate(c: &Compound<'_, '_>, o: &Obj, want: &Bitmap4) -> usize {
    let attr = rnfsd_fs::Attr {
        ftype: rnfsd_fs::FileType::Regular,
        mode: 0,
        nlink: 0,
        uid: u32::MAX,
        gid: u32::MAX,
        size: 0,
        used: 0,
        rdev: (0, 0),
        fsid: 0,
        fileid: 0,
        atime: rnfsd_fs::Time::default(),
        mtime: rnfsd_fs::Time::default(),
        ctime: rnfsd_fs::Time::default(),
    };
    let facts = FsFacts {
        fsstat: Some(rnfsd_fs::FsStat {
            tbytes: 0,
            fbytes: 0,
            abytes: 0,
            tfiles: 0,
            ffiles: 0,
            afiles: 0,
            invarsec: 0,
        }),
        ..FsFacts::default()
    };
    let mut e = Enc::new();
    export_fattr(c, &o.exp, &o.fh, &attr, false, &facts, want, &mut e);
    e.len()
}

/// Bytes of an entry besides its attributes, for a name of this many
/// bytes: marker, cookie, name.
fn entry_fixed(name: usize) -> usize {
    4 + 8 + 4 + pad4(name)
}

/// A name length to estimate entries with.
const NAME_ESTIMATE: usize = 16;

/// How many entries to ask a backend for to fill `room` bytes with
/// entries of about `each` bytes (at least one, at most a batch).
fn batch(room: usize, each: usize) -> usize {
    (room / each.max(1)).clamp(1, MAX_DIR_BATCH)
}

/// An export directory's entries, from the backend in batches until the
/// reply is full or the directory ends ("." and ".." are not sent,
/// §18.23.4).
fn list_obj(c: &Compound<'_, '_>, o: &Obj, l: &Listing<'_>, e: &mut Enc) -> Result<(), Nfsstat4> {
    let a = l.a;
    let call = o.call(c.ctx);
    let b = o.exp.backend.as_ref();
    let from_entry = l.want.iter().all(|bit| FROM_ENTRY.contains(&bit));
    let each = entry_fixed(NAME_ESTIMATE)
        + match from_entry {
            true => fattr::bits(FROM_ENTRY).xdr_len() + 4 + 4 + 8,
            false => attrs_estimate(c, o, &l.want),
        };
    let start = match a.cookie {
        0 => 0,
        k => of_wire(k),
    };
    let room = l.maxcount - ReaddirWriter::FIXED_LEN;
    let first = b.readdir(
        &call,
        &o.fh,
        start,
        a.cookieverf.0,
        batch(room, each),
        !from_entry,
    );
    let mut page = match first {
        Ok(p) => p,
        Err(FsError::BadCookie) => return Err(bad_cookie(o, &call, a)),
        Err(err) => return Err(dir_error(c, o, of_fs(err))),
    };
    let verf = page.verifier;
    let mut w = begin(e, l, verf);
    let mut lister = Entries {
        c,
        o,
        call: &call,
        want: &l.want,
        from_entry,
        facts: Vec::new(),
        scratch: Enc::new(),
    };
    loop {
        let eof = page.eof;
        let (next, full) = lister.write(&mut w, e, page)?;
        if full {
            return end(w, e, true, false);
        }
        if eof {
            return end(w, e, false, true);
        }
        let Some(next) = next else {
            // A page with no entry that is not the end: nothing to go on from.
            return end(w, e, false, false);
        };
        let left = l.maxcount.saturating_sub(w.used());
        page = b
            .readdir(&call, &o.fh, next, verf, batch(left, each), !from_entry)
            .map_err(of_fs)?;
    }
}

/// NFS4ERR_BAD_COOKIE or NFS4ERR_NOT_SAME for a cookie the backend
/// refused: the verifier the client sent is the directory's no longer
/// (§18.23.3: NOT_SAME), or the cookie is no place in it.
fn bad_cookie(o: &Obj, call: &Call<'_>, a: &ReadDir4Args) -> Nfsstat4 {
    let now = o
        .exp
        .backend
        .readdir(call, &o.fh, 0, [0; 8], 1, false)
        .map(|p| p.verifier);
    match now {
        Ok(v) if a.cookieverf.0 != [0; 8] && v != a.cookieverf.0 => Nfsstat4::NotSame,
        _ => Nfsstat4::BadCookie,
    }
}

/// Writes an export directory's entries with their attributes.
struct Entries<'e, 'k, 'c, 'a> {
    c: &'e Compound<'c, 'a>,
    o: &'e Obj,
    call: &'e Call<'k>,
    want: &'e Bitmap4,
    /// `want` needs nothing but the entry (`FROM_ENTRY`).
    from_entry: bool,
    /// Filesystem facts by the backend's fsid, fetched once each.
    facts: Vec<(u64, FsFacts)>,
    scratch: Enc,
}

impl Entries<'_, '_, '_, '_> {
    /// Writes `page`'s entries while they fit; returns the backend cookie
    /// to go on from (None if the page had none) and whether one did not
    /// fit.
    fn write(
        &mut self,
        w: &mut ReaddirWriter,
        e: &mut Enc,
        page: DirPage,
    ) -> Result<(Option<u64>, bool), Nfsstat4> {
        let mut next = None;
        for ent in page.entries {
            if ent.name == b"." || ent.name == b".." {
                next = Some(ent.cookie);
                continue;
            }
            let Some(cookie) = to_wire(ent.cookie) else {
                tracing::warn!(
                    cookie = ent.cookie,
                    "a backend's READDIR cookie past NFSv4's"
                );
                return Err(Nfsstat4::ServerFault);
            };
            let Some(attrs) = self.attrs(ent.fileid, &ent.name, ent.plus)? else {
                next = Some(ent.cookie);
                continue;
            };
            if !w.push(e, cookie, &ent.name, &attrs) {
                return Ok((next, true));
            }
            next = Some(ent.cookie);
        }
        Ok((next, false))
    }

    /// An entry's attributes; None when it is gone.
    fn attrs(
        &mut self,
        fileid: u64,
        name: &[u8],
        plus: Option<(rnfsd_fs::Fh, rnfsd_fs::Attr)>,
    ) -> Result<Option<Fattr4>, Nfsstat4> {
        if self.from_entry {
            let mut v = Enc::new();
            let mut mask = Bitmap4::new();
            for &bit in FROM_ENTRY {
                if self.want.contains(bit) {
                    mask.insert(bit);
                    match bit {
                        FATTR4_RDATTR_ERROR => v.u32(Nfsstat4::Ok as u32),
                        _ => v.u64(fileid),
                    }
                }
            }
            return Ok(Some(Fattr4 {
                attrmask: mask,
                attr_vals: v.into_vec(),
            }));
        }
        let b = self.o.exp.backend.as_ref();
        let (fh, attr) = match plus {
            Some(p) => p,
            // The backend could not look it up while listing: we do, for
            // its attributes or why not.
            None => match b.lookup(self.call, &self.o.fh, name) {
                Ok((fh, attr, _)) => (fh, attr),
                Err(err) => match of_fs(err) {
                    Nfsstat4::NoEnt | Nfsstat4::Stale => return Ok(None),
                    Nfsstat4::Delay => return Err(Nfsstat4::Delay),
                    s => return rdattr_error(self.want, s).map(Some),
                },
            },
        };
        let facts = match self.facts.iter().find(|(fsid, _)| *fsid == attr.fsid) {
            Some((_, f)) => *f,
            None => match FsFacts::of(b, self.call, &fh, self.want) {
                Ok(f) => {
                    self.facts.push((attr.fsid, f));
                    f
                }
                Err(s) => return rdattr_error(self.want, s).map(Some),
            },
        };
        debug_assert!(facts.cover(self.want));
        export_fattr(
            self.c,
            &self.o.exp,
            &fh,
            &attr,
            false,
            &facts,
            self.want,
            &mut self.scratch,
        );
        take_fattr(&mut self.scratch).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_round_trip_past_the_reserved_ones() {
        for b in [1, 2, 3, 12, 0x7fff_ffff, i64::MAX as u64] {
            let w = to_wire(b).unwrap();
            assert!(w > 2, "{b} became reserved {w}");
            assert_eq!(of_wire(w), b);
        }
        assert_eq!(to_wire(u64::MAX), None);
    }

    #[test]
    fn batches_fill_the_room_within_bounds() {
        assert_eq!(batch(0, 100), 1);
        assert_eq!(batch(1000, 100), 10);
        assert_eq!(batch(usize::MAX, 1), MAX_DIR_BATCH);
        assert_eq!(batch(10, 0), 10);
    }

    #[test]
    fn rdattr_error_only_when_asked() {
        let want = fattr::bits(&[FATTR4_TYPE]);
        assert_eq!(rdattr_error(&want, Nfsstat4::Access), Err(Nfsstat4::Access));
        let want = fattr::bits(&[FATTR4_TYPE, FATTR4_RDATTR_ERROR]);
        let f = rdattr_error(&want, Nfsstat4::Access).unwrap();
        assert_eq!(
            f.attrmask.iter().collect::<Vec<_>>(),
            vec![FATTR4_RDATTR_ERROR]
        );
        assert_eq!(f.attr_vals, (Nfsstat4::Access as u32).to_be_bytes());
    }

    fn node(names: &[&str]) -> Node {
        Node {
            path: "/a".into(),
            parent: 0,
            children: names
                .iter()
                .map(|n| (n.as_bytes().to_vec(), Child::Export(1)))
                .collect(),
            fileid: 7,
        }
    }

    #[test]
    fn a_pseudo_verifier_changes_with_the_entries() {
        let v = pseudo_verifier(&node(&["x", "y"]));
        assert_eq!(v, pseudo_verifier(&node(&["x", "y"])));
        assert_ne!(v, pseudo_verifier(&node(&["x"])));
        assert_ne!(v, pseudo_verifier(&node(&["xy"])));
        assert_ne!(pseudo_verifier(&node(&[])), [0; 8]);
    }

    #[test]
    fn take_fattr_reads_what_fattr_wrote() {
        let mut e = Enc::new();
        Fattr4 {
            attrmask: fattr::bits(&[FATTR4_SIZE]),
            attr_vals: 5u64.to_be_bytes().to_vec(),
        }
        .encode(&mut e);
        let f = take_fattr(&mut e).unwrap();
        assert!(e.is_empty());
        assert_eq!(f.attr_vals, 5u64.to_be_bytes());
        e.u32(9);
        assert_eq!(take_fattr(&mut e), Err(Nfsstat4::ServerFault));
    }
}
