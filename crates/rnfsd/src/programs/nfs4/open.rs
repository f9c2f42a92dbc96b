//! OPEN, OPEN_DOWNGRADE, CLOSE, DELEGRETURN (RFC 8881 §18.16, §18.18,
//! §18.2, §18.6): the filesystem's side (the name looked up or the file
//! made, its type, the caller's permission, truncation); the open state
//! itself (owners, share reservations, stateids, grace) is
//! `rnfsd_v4state`'s, as are delegations: read and write delegations are granted
//! here (with `nfs4_delegations`) and returned by DELEGRETURN.
//!
//! Also the steps I/O and locks share: the current filehandle as a
//! regular file, and the key the state knows a file by.

use rnfsd_fs::{Attr, CreateHow, FileType, SetAttr, Time};
use rnfsd_proto::nfs4::*;
use rnfsd_v4state::{Claim, FileKey, NoDeleg, OpenArgs, StateKind, Stateid};

pub(super) use crate::state::deleg::Changed;
use crate::state::deleg::{Access, Recalling};

use super::compound::Compound;
use super::cur::{Cur, Obj};
use super::fattr::{self, EXCLCREAT};
use super::fh::{check_name, lookup_in};
use super::session::sid;
use super::status::{of_fs, of_state};

/// ACCESS3 bits asked of the backend (the same as ACCESS4's, §18.1).
const ACCESS_READ: u32 = 0x01;
const ACCESS_MODIFY: u32 = 0x04;
const ACCESS_EXECUTE: u32 = 0x20;

/// The want bits OPEN takes besides a delegation want (§18.16.3).
const WANT_WHEN: u32 = OPEN4_SHARE_ACCESS_WANT_SIGNAL_DELEG_WHEN_RESRC_AVAIL
    | OPEN4_SHARE_ACCESS_WANT_PUSH_DELEG_WHEN_UNCONTENDED;

/// The current filehandle as a file the state can name.
pub(super) struct File {
    pub obj: Obj,
    pub attr: Attr,
    pub key: FileKey,
}

/// The key the state knows a file by: the backend's (fsid, fileid), as
/// fattr4's fsid and fileid give it within the export.
pub(super) fn key_of(a: &Attr) -> FileKey {
    FileKey {
        fsid: a.fsid,
        fileid: a.fileid,
    }
}

/// An object that is not a regular file, as READ, WRITE, LOCK and OPEN
/// refuse it (§18.22.3, §18.32.3, §18.16.3): a directory NFS4ERR_ISDIR, a
/// symbolic link NFS4ERR_SYMLINK, anything else NFS4ERR_WRONG_TYPE.
pub(super) fn regular(t: FileType) -> Result<(), Nfsstat4> {
    match t {
        FileType::Regular => Ok(()),
        FileType::Directory => Err(Nfsstat4::IsDir),
        FileType::Symlink => Err(Nfsstat4::Symlink),
        _ => Err(Nfsstat4::WrongType),
    }
}

/// The current filehandle's file, if it is an export's object (a pseudo
/// directory holds no state).
pub(super) fn cur_file(c: &Compound<'_, '_>) -> Result<Option<File>, Nfsstat4> {
    match c.cur()? {
        Cur::Pseudo(_) => Ok(None),
        Cur::Obj(o) => {
            let attr = o
                .exp
                .backend
                .getattr(&o.call(c.ctx), &o.fh)
                .map_err(of_fs)?;
            Ok(Some(File {
                obj: o.clone(),
                key: key_of(&attr),
                attr,
            }))
        }
    }
}

/// The current filehandle as a regular file (a pseudo directory is a
/// directory).
pub(super) fn regular_file(c: &Compound<'_, '_>) -> Result<File, Nfsstat4> {
    let f = cur_file(c)?.ok_or(Nfsstat4::IsDir)?;
    regular(f.attr.ftype)?;
    Ok(f)
}

/// The check before a change to `target` through `obj`'s export
/// (WRITE, SETATTR, REMOVE, RENAME, LINK): other clients' delegations on
/// it are recalled first, NFS4ERR_DELAY meanwhile (§10.4.1). Hold the
/// result until the change is made.
pub(super) fn before_change(
    c: &Compound<'_, '_>,
    obj: &Obj,
    target: Changed<'_>,
) -> Result<Option<Access>, Nfsstat4> {
    let d = &c.nfs4.deleg;
    if !d.enabled {
        return Ok(None);
    }
    let by = c.client().ok().map(|h| h.id());
    let call = obj.call(c.ctx);
    d.change(&c.nfs4.state, obj.exp.backend.as_ref(), &call, target, by)
        .map_err(|Recalling| Nfsstat4::Delay)
}

pub(super) fn sid4(s: Stateid) -> Stateid4 {
    Stateid4 {
        seqid: s.seqid,
        other: s.other,
    }
}

/// OPEN's share_access and share_deny, checked (§18.16.3): access one of
/// READ, WRITE, BOTH; deny within BOTH; the want bits one of the
/// delegation wants and, for OPEN only (`open`), the two "when" flags.
/// Anything else is NFS4ERR_INVAL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Share {
    access: u32,
    deny: u32,
    /// OPEN4_SHARE_ACCESS_WANT_* (the delegation wanted).
    want: u32,
}

fn share(share_access: u32, share_deny: u32, open: bool) -> Result<Share, Nfsstat4> {
    let access = share_access & OPEN4_SHARE_ACCESS_BOTH;
    let want = share_access & OPEN4_SHARE_ACCESS_WANT_DELEG_MASK;
    let when = share_access & WANT_WHEN;
    let rest =
        share_access & !(OPEN4_SHARE_ACCESS_BOTH | OPEN4_SHARE_ACCESS_WANT_DELEG_MASK | WANT_WHEN);
    if access == 0
        || rest != 0
        || share_deny & !OPEN4_SHARE_DENY_BOTH != 0
        || want > OPEN4_SHARE_ACCESS_WANT_CANCEL
        || (!open && when != 0)
    {
        return Err(Nfsstat4::Inval);
    }
    Ok(Share {
        access,
        deny: share_deny,
        want,
    })
}

/// The delegation part of OPEN's reply when none is granted. A client
/// that said what it wants is told why not (§18.16.3, as knfsd): it asked
/// for none, it cancelled, or (any delegation) `why`: another client's
/// access or a recent recall (contention), or none to give.
fn no_delegation(want: u32, why: Option<NoDeleg>) -> OpenDelegation4 {
    match want {
        OPEN4_SHARE_ACCESS_WANT_NO_PREFERENCE => OpenDelegation4::None,
        OPEN4_SHARE_ACCESS_WANT_NO_DELEG => {
            OpenDelegation4::NoneExt(OpenNoneDelegation4::Why(WhyNoDelegation4::NotWanted))
        }
        OPEN4_SHARE_ACCESS_WANT_CANCEL => {
            OpenDelegation4::NoneExt(OpenNoneDelegation4::Why(WhyNoDelegation4::Cancelled))
        }
        _ => match why {
            Some(NoDeleg::Contention) => {
                OpenDelegation4::NoneExt(OpenNoneDelegation4::Contention {
                    server_will_push_deleg: false,
                })
            }
            _ => OpenDelegation4::NoneExt(OpenNoneDelegation4::Resource {
                server_will_signal_avail: false,
            }),
        },
    }
}

/// The delegation an OPEN with `share` may get (§10.4): a read one for
/// reading only, a write one for reading and writing, when it wants that
/// kind, any, or does not say; None: not one it may get. A write-only
/// open gets none (as knfsd): the holder of a write delegation serves
/// reads from its cache, which its open does not allow.
fn deleg_kind(share: Share) -> Option<bool> {
    let want = |kind| {
        matches!(
            share.want,
            OPEN4_SHARE_ACCESS_WANT_NO_PREFERENCE | OPEN4_SHARE_ACCESS_WANT_ANY_DELEG
        ) || share.want == kind
    };
    match share.access {
        OPEN4_SHARE_ACCESS_READ if want(OPEN4_SHARE_ACCESS_WANT_READ_DELEG) => Some(false),
        OPEN4_SHARE_ACCESS_BOTH if want(OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG) => Some(true),
        _ => None,
    }
}

/// A write delegation's space_limit (§10.4.1): none. We reserve no
/// space for a client, so we promise none: the holder writes its data
/// back by CLOSE, as without a delegation, and a full filesystem is told
/// to the program that wrote (its close), never found after it.
const WRITE_DELEG_SPACE_LIMIT: NfsSpaceLimit4 = NfsSpaceLimit4::Size(0);

/// No rights granted by the delegation itself: the client asks ACCESS
/// (§10.4.1; knfsd sends the same empty ACE).
fn no_permissions() -> Nfsace4 {
    Nfsace4 {
        acetype: 0,
        flag: 0,
        access_mask: 0,
        who: Utf8Str(Vec::new()),
    }
}

/// The delegation OPEN's reply carries: a read or write one if the state
/// grants it (§10.4), else why not.
fn delegation(c: &Compound<'_, '_>, t: &Target, share: Share, reclaim: bool) -> OpenDelegation4 {
    let d = &c.nfs4.deleg;
    // A shared filesystem's other writers (CephFS's other heads) would
    // change the file without a recall: no delegation there.
    let kind = deleg_kind(share);
    if !d.enabled || reclaim || !t.obj.exp.backend.sees_every_change() {
        return no_delegation(share.want, None);
    }
    let Some(write) = kind else {
        return no_delegation(share.want, None);
    };
    let Ok(h) = c.client() else {
        return no_delegation(share.want, None);
    };
    if !d.has_path(h.id()) {
        return no_delegation(share.want, Some(NoDeleg::CallbackDown));
    }
    let call = t.obj.call(c.ctx);
    let backend = t.obj.exp.backend.as_ref();
    // The change attribute the holder starts from (a CB_GETATTR answer
    // is compared with it): the file's now, after any truncation.
    let change = match write {
        true => match backend.getattr(&call, &t.obj.fh) {
            Ok(a) => change_of(a.ctime),
            Err(_) => return no_delegation(share.want, Some(NoDeleg::Resource)),
        },
        false => change_of(t.attr.ctime),
    };
    match d.grant(
        &c.nfs4.state,
        backend,
        &call,
        &t.obj.fh,
        &h,
        key_of(&t.attr),
        write,
        change,
    ) {
        Ok(sid) if write => OpenDelegation4::Write(OpenWriteDelegation4 {
            stateid: sid4(sid),
            recall: false,
            space_limit: WRITE_DELEG_SPACE_LIMIT,
            permissions: no_permissions(),
        }),
        Ok(sid) => OpenDelegation4::Read(OpenReadDelegation4 {
            stateid: sid4(sid),
            recall: false,
            permissions: no_permissions(),
        }),
        Err(why) => no_delegation(share.want, Some(why)),
    }
}

/// The change attribute of a time (`fattr::change`'s rule).
fn change_of(t: Time) -> u64 {
    (t.sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(u64::from(t.nsec))
}

/// The file an OPEN ends on.
struct Target {
    obj: Obj,
    attr: Attr,
    /// This OPEN made it (an EXCLUSIVE retry with the same verifier too):
    /// its owner may open it whatever its mode (knfsd's owner override).
    created: bool,
    cinfo: ChangeInfo4,
    attrset: Bitmap4,
    /// UNCHECKED4 over an existing file with size 0: truncated once the
    /// open is granted (knfsd: not before, the OPEN may yet fail).
    truncate: bool,
}

fn no_cinfo() -> ChangeInfo4 {
    ChangeInfo4 {
        atomic: false,
        before: 0,
        after: 0,
    }
}

/// The attributes that hold an exclusive create's verifier (§18.16.3:
/// attrset names them, so the client sets them itself after).
fn verifier_attrs() -> Bitmap4 {
    fattr::bits(&[FATTR4_TIME_ACCESS, FATTR4_TIME_MODIFY])
}

/// The current filehandle as the file itself (CLAIM_FH, CLAIM_PREVIOUS).
fn this_file(c: &Compound<'_, '_>) -> Result<Target, Nfsstat4> {
    let f = cur_file(c)?.ok_or(Nfsstat4::IsDir)?;
    Ok(Target {
        obj: f.obj,
        attr: f.attr,
        created: false,
        cinfo: no_cinfo(),
        attrset: Bitmap4::new(),
        truncate: false,
    })
}

/// An existing file `name` in `dir` (no change to the directory: its
/// change attribute before and after are one).
fn existing(
    c: &Compound<'_, '_>,
    dir: &Cur,
    name: &[u8],
    truncate: bool,
    attrset: Bitmap4,
) -> Result<Target, Nfsstat4> {
    let cinfo = match dir {
        Cur::Obj(d) => match d.exp.backend.getattr(&d.call(c.ctx), &d.fh) {
            Ok(a) => ChangeInfo4 {
                atomic: true,
                before: fattr::change(&a),
                after: fattr::change(&a),
            },
            Err(e) => return Err(of_fs(e)),
        },
        Cur::Pseudo(_) => no_cinfo(),
    };
    let obj = match lookup_in(c, dir, name)? {
        Cur::Obj(o) => o,
        Cur::Pseudo(_) => return Err(Nfsstat4::IsDir),
    };
    let attr = obj
        .exp
        .backend
        .getattr(&obj.call(c.ctx), &obj.fh)
        .map_err(of_fs)?;
    Ok(Target {
        obj,
        attr,
        created: false,
        cinfo,
        attrset,
        truncate,
    })
}

/// Why a create in `dir` failed with NFS4ERR_NOTDIR: a symbolic link is
/// NFS4ERR_SYMLINK (§18.16.3, as LOOKUP's).
fn create_error(c: &Compound<'_, '_>, dir: &Obj, s: Nfsstat4) -> Nfsstat4 {
    if s == Nfsstat4::NotDir {
        if let Ok(a) = dir.exp.backend.getattr(&dir.call(c.ctx), &dir.fh) {
            if a.ftype == FileType::Symlink {
                return Nfsstat4::Symlink;
            }
        }
    }
    s
}

/// OPEN4_CREATE of `name` in the current directory (§18.16.3).
fn create(
    c: &mut Compound<'_, '_>,
    dir: &Cur,
    name: &[u8],
    how: &CreateHow4,
) -> Result<Target, Nfsstat4> {
    // The pseudo-filesystem is read-only.
    let Cur::Obj(d) = dir else {
        return Err(Nfsstat4::RoFs);
    };
    d.writable()?;
    let ctx = c.ctx;
    // UNCHECKED4: whether an existing file is truncated (knfsd: a size of
    // zero is applied to an existing file, other attributes and any other
    // size are not).
    let mut unchecked = None;
    let (how, attrset, after) = match how {
        CreateHow4::Unchecked(attrs) => {
            let (set, mask) = fattr::decode_settable(attrs, &fattr::owners(c))?;
            let truncate = set.size == Some(0);
            match d.exp.backend.lookup(&d.call(ctx), &d.fh, name) {
                Ok(_) => return existing(c, dir, name, truncate, truncated(truncate)),
                Err(e) => match of_fs(e) {
                    Nfsstat4::NoEnt => {}
                    s => return Err(create_error(c, d, s)),
                },
            }
            unchecked = Some(truncate);
            // Made as GUARDED4: one made meanwhile is opened instead.
            (CreateHow::Guarded(set), mask, None)
        }
        CreateHow4::Guarded(attrs) => {
            let (set, mask) = fattr::decode_settable(attrs, &fattr::owners(c))?;
            (CreateHow::Guarded(set), mask, None)
        }
        CreateHow4::Exclusive(v) => (CreateHow::Exclusive(v.0), verifier_attrs(), None),
        CreateHow4::Exclusive41 { verf, attrs } => {
            let (mut set, mask) = fattr::decode_settable(attrs, &fattr::owners(c))?;
            // Only suppattr_exclcreat's attributes go with the verifier.
            let allowed = fattr::bits(EXCLCREAT);
            if mask.iter().any(|b| !allowed.contains(b)) {
                return Err(Nfsstat4::Inval);
            }
            // The new file is empty: truncating it would stamp its times,
            // which hold the verifier.
            if set.size == Some(0) {
                set.size = None;
            }
            let mut attrset = verifier_attrs();
            for b in mask.iter() {
                attrset.insert(b);
            }
            (CreateHow::Exclusive(verf.0), attrset, Some(set))
        }
    };
    let call = d.call(ctx);
    let made = d.exp.backend.create(&call, &d.fh, name, &how);
    c.owe(&call);
    let made = match made.map_err(of_fs) {
        Ok(m) => m,
        Err(Nfsstat4::Exist) if unchecked.is_some() => {
            let truncate = unchecked.unwrap_or(false);
            return existing(c, dir, name, truncate, truncated(truncate));
        }
        Err(s) => return Err(create_error(c, d, s)),
    };
    let obj = Obj {
        exp: d.exp.clone(),
        fh: made.fh,
        grant: d.grant.clone(),
    };
    let mut attr = made.attr;
    // EXCLUSIVE4_1's attributes, set once the verifier is in place.
    if let Some(set) = after.filter(|s| *s != SetAttr::default()) {
        let call = obj.call(ctx);
        let r = obj.exp.backend.setattr(&call, &obj.fh, &set, None);
        c.owe(&call);
        if let Some(a) = r.map_err(of_fs)?.after {
            attr = a;
        }
    }
    let cinfo = match (made.dir.before, made.dir.after) {
        (Some(b), Some(a)) => ChangeInfo4 {
            // Not atomic: nothing held the directory against other
            // changes between the two looks.
            atomic: false,
            before: change_of(b.ctime),
            after: fattr::change(&a),
        },
        _ => no_cinfo(),
    };
    Ok(Target {
        obj,
        attr,
        created: true,
        cinfo,
        attrset,
        truncate: false,
    })
}

/// attrset of an UNCHECKED4 open of an existing file.
fn truncated(truncate: bool) -> Bitmap4 {
    match truncate {
        true => fattr::bits(&[FATTR4_SIZE]),
        false => Bitmap4::new(),
    }
}

/// Whether the caller may open `t` as `share` asks (knfsd's
/// do_open_permission): reading needs read or execute permission;
/// writing, and denying others reading, write permission and a writable
/// export (NFS4ERR_ROFS). The owner of a file this OPEN made may do
/// either whatever its mode (it may have made it read-only).
fn permitted(c: &Compound<'_, '_>, t: &Target, share: Share) -> Result<(), Nfsstat4> {
    let read = share.access & OPEN4_SHARE_ACCESS_READ != 0;
    let write =
        share.access & OPEN4_SHARE_ACCESS_WRITE != 0 || share.deny & OPEN4_SHARE_DENY_READ != 0;
    if write {
        t.obj.writable()?;
    }
    if t.created && t.attr.uid == t.obj.grant.cred.uid {
        return Ok(());
    }
    let mut want = 0;
    if read {
        want |= ACCESS_READ | ACCESS_EXECUTE;
    }
    if write {
        want |= ACCESS_MODIFY;
    }
    let (granted, _) = t
        .obj
        .exp
        .backend
        .access(&t.obj.call(c.ctx), &t.obj.fh, want)
        .map_err(of_fs)?;
    if (read && granted & (ACCESS_READ | ACCESS_EXECUTE) == 0)
        || (write && granted & ACCESS_MODIFY == 0)
    {
        return Err(Nfsstat4::Access);
    }
    Ok(())
}

/// The delegation stateid OPEN names (CLAIM_DELEGATE_CUR,
/// CLAIM_DELEG_CUR_FH: the client converts its delegated opens, as during
/// a recall, §10.2.1) must be a delegation of this client on `file`: the
/// stateid check's error, or NFS4ERR_BAD_STATEID for another kind or
/// file.
fn check_delegation(c: &Compound<'_, '_>, s: &Stateid4, file: FileKey) -> Result<(), Nfsstat4> {
    let h = c.client()?;
    let s = c.stateid(s)?;
    match c.nfs4.state.check_stateid(&h, &sid(&s), Some(file)) {
        Ok(i) if i.kind == StateKind::Delegation => Ok(()),
        Ok(_) => Err(Nfsstat4::BadStateid),
        Err(e) => Err(of_state(&e)),
    }
}

/// OPEN (§18.16).
pub(super) fn open(c: &mut Compound<'_, '_>, a: Open4Args) -> Open4Res {
    match open_file(c, &a) {
        Ok(r) => NfsRes4::Ok(r),
        Err(s) => NfsRes4::Fail(s),
    }
}

fn open_file(c: &mut Compound<'_, '_>, a: &Open4Args) -> Result<Open4ResOk, Nfsstat4> {
    let h = c.client()?;
    // RFC 9754's wish for delegated timestamps, in a 4.2 OPEN: declined
    // (a delegation granted is a plain one, OPEN_DELEGATE_READ or
    // _WRITE, which tells the client so), as any want may be.
    let access = match c.minor >= 2 {
        true => a.share_access & !OPEN4_SHARE_ACCESS_WANT_DELEG_TIMESTAMPS,
        false => a.share_access,
    };
    let share = share(access, a.share_deny, true)?;
    let how = match &a.openhow {
        OpenFlag4::Create(how) => Some(how),
        OpenFlag4::NoCreate => None,
    };
    // §18.16.3: only CLAIM_NULL creates.
    if how.is_some() && !matches!(a.claim, OpenClaim4::Null(_)) {
        return Err(Nfsstat4::Inval);
    }
    let reclaim = matches!(a.claim, OpenClaim4::Previous(_));
    // Opens under a delegation the client holds: not new state in the
    // grace period's sense (§9.11, knfsd).
    let under_deleg = matches!(
        a.claim,
        OpenClaim4::DelegateCur { .. } | OpenClaim4::DelegCurFh(_)
    );
    // §18.51.3: until its RECLAIM_COMPLETE a client may only reclaim.
    if !reclaim && !under_deleg && !h.reclaim_completed() {
        return Err(Nfsstat4::Grace);
    }
    // §8.4.2: only reclaims in the grace period, none after it; asked
    // before anything is made (the state asks again, with the client's
    // right to reclaim).
    let in_grace = c.nfs4.state.grace().in_grace();
    if in_grace && !reclaim && !under_deleg {
        return Err(Nfsstat4::Grace);
    }
    if !in_grace && reclaim {
        return Err(Nfsstat4::NoGrace);
    }
    let dir = c.cur()?.clone();
    let t = match &a.claim {
        OpenClaim4::Null(name) => {
            check_name(&name.0)?;
            match how {
                Some(how) => create(c, &dir, &name.0, how)?,
                None => existing(c, &dir, &name.0, false, Bitmap4::new())?,
            }
        }
        OpenClaim4::Fh | OpenClaim4::Previous(_) => this_file(c)?,
        OpenClaim4::DelegateCur {
            delegate_stateid,
            file,
        } => {
            let t = existing(c, &dir, &file.0, false, Bitmap4::new())?;
            check_delegation(c, delegate_stateid, key_of(&t.attr))?;
            t
        }
        OpenClaim4::DelegCurFh(s) => {
            let t = this_file(c)?;
            check_delegation(c, s, key_of(&t.attr))?;
            t
        }
        // Delegations kept across a client's restart: not supported, as
        // DELEGPURGE is not (§18.5.3; knfsd answers the same).
        OpenClaim4::DelegatePrev(_) | OpenClaim4::DelegPrevFh => {
            return Err(Nfsstat4::NotSupp);
        }
    };
    regular(t.attr.ftype)?;
    // A truncation without write access (knfsd).
    if t.truncate && share.access & OPEN4_SHARE_ACCESS_WRITE == 0 {
        return Err(Nfsstat4::Inval);
    }
    permitted(c, &t, share)?;
    c.memory_changes()?;
    // Other clients' delegations that conflict are recalled first
    // (§10.4.1): NFS4ERR_DELAY until returned or revoked. No delegation
    // is granted on the file while this open is made.
    let write = share.access & OPEN4_SHARE_ACCESS_WRITE != 0 || t.truncate;
    let in_progress = c
        .nfs4
        .deleg
        .access(&c.nfs4.state, key_of(&t.attr), Some(h.id()), write)
        .map_err(|Recalling| Nfsstat4::Delay)?;
    let opened = c
        .nfs4
        .state
        .open(
            &h,
            &OpenArgs {
                owner: &a.owner.owner.0,
                file: key_of(&t.attr),
                access: share.access,
                deny: share.deny,
                claim: match reclaim {
                    true => Claim::Previous,
                    false => Claim::New,
                },
            },
        )
        .map_err(|e| of_state(&e))?;
    if t.truncate {
        let ctx = c.ctx;
        let call = t.obj.call(ctx);
        let set = SetAttr {
            size: Some(0),
            ..SetAttr::default()
        };
        let r = t.obj.exp.backend.setattr(&call, &t.obj.fh, &set, None);
        c.owe(&call);
        if let Err(e) = r {
            // A new open goes again; an upgrade stays (its share bits were
            // the owner's to ask for).
            if !opened.upgraded {
                let _ = c.nfs4.state.close(&h, &opened.stateid);
            }
            return Err(of_fs(e));
        }
    }
    drop(in_progress);
    let delegation = match under_deleg {
        // The client holds its delegation already.
        true => OpenDelegation4::None,
        false => delegation(c, &t, share, reclaim),
    };
    let stateid = sid4(opened.stateid);
    c.set_cur(Cur::Obj(t.obj));
    c.cur_sid = Some(stateid);
    Ok(Open4ResOk {
        stateid,
        cinfo: t.cinfo,
        rflags: OPEN4_RESULT_LOCKTYPE_POSIX,
        attrset: t.attrset,
        delegation,
    })
}

/// An open stateid of the current file, as CLOSE and OPEN_DOWNGRADE take
/// it: the stateid's own errors first, then NFS4ERR_BAD_STATEID for one
/// of another kind or another file (knfsd's nfs4_preprocess_seqid_op).
///
/// `gone_ok` (CLOSE): a current file removed since it was opened (its
/// handle now stale, a RENAME over it or a REMOVE) is taken on the
/// stateid's word, so its open can still be closed (pynfs RNM21; knfsd
/// holds the inode of an open file).
fn open_stateid_here(
    c: &Compound<'_, '_>,
    s: &Stateid4,
    gone_ok: bool,
) -> Result<Stateid, Nfsstat4> {
    let h = c.client()?;
    let s = sid(&c.stateid(s)?);
    let file = match cur_file(c) {
        Ok(f) => Some(f.map(|f| f.key)),
        Err(Nfsstat4::Stale) if gone_ok => None,
        Err(e) => return Err(e),
    };
    let info = c
        .nfs4
        .state
        .check_stateid(&h, &s, None)
        .map_err(|e| of_state(&e))?;
    let here = file.is_none_or(|f| f == Some(info.file));
    if info.kind != StateKind::Open || !here {
        return Err(Nfsstat4::BadStateid);
    }
    Ok(s)
}

/// OPEN_DOWNGRADE (§18.18): delegation wants are ignored, as knfsd.
pub(super) fn open_downgrade(c: &mut Compound<'_, '_>, a: OpenDowngrade4Args) -> Stateid4Res {
    let r = (|| {
        let h = c.client()?;
        let share = share(a.share_access, a.share_deny, false)?;
        let s = open_stateid_here(c, &a.open_stateid, false)?;
        c.memory_changes()?;
        c.nfs4
            .state
            .open_downgrade(&h, &s, share.access, share.deny)
            .map(sid4)
            .map_err(|e| of_state(&e))
    })();
    match r {
        Ok(s) => {
            c.cur_sid = Some(s);
            NfsRes4::Ok(s)
        }
        Err(e) => NfsRes4::Fail(e),
    }
}

/// CLOSE (§18.2): the open goes, with its locks; 4.1 answers the invalid
/// special stateid (§18.2.3), which becomes the current stateid.
pub(super) fn close(c: &mut Compound<'_, '_>, a: Close4Args) -> Stateid4Res {
    let r = (|| {
        let h = c.client()?;
        let s = open_stateid_here(c, &a.open_stateid, true)?;
        c.memory_changes()?;
        c.nfs4.state.close(&h, &s).map_err(|e| of_state(&e))
    })();
    match r {
        Ok(()) => {
            c.cur_sid = Some(Stateid4::INVALID);
            NfsRes4::Ok(Stateid4::INVALID)
        }
        Err(e) => NfsRes4::Fail(e),
    }
}

/// DELEGRETURN (§18.6): the delegation on the current file goes (the
/// current filehandle must be a regular file first, as knfsd's).
pub(super) fn delegreturn(c: &mut Compound<'_, '_>, a: DelegReturn4Args) -> Nfsstat4 {
    let r = (|| {
        let f = regular_file(c)?;
        let h = c.client()?;
        let s = sid(&c.stateid(&a.deleg_stateid)?);
        c.nfs4
            .state
            .delegreturn(&h, &s, f.key)
            .map_err(|e| of_state(&e))?;
        // Its lease goes with the file's last delegation (a local
        // program waiting for it goes on).
        c.nfs4.deleg.returned(&c.nfs4.state, &f.key);
        Ok(())
    })();
    match r {
        Ok(()) => Nfsstat4::Ok,
        Err(s) => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_bits_are_checked() {
        let both = OPEN4_SHARE_ACCESS_BOTH;
        assert_eq!(
            share(
                both | OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
                OPEN4_SHARE_DENY_WRITE,
                true
            ),
            Ok(Share {
                access: both,
                deny: OPEN4_SHARE_DENY_WRITE,
                want: OPEN4_SHARE_ACCESS_WANT_NO_DELEG
            })
        );
        assert_eq!(share(0, 0, true), Err(Nfsstat4::Inval), "no access");
        assert_eq!(
            share(OPEN4_SHARE_ACCESS_WANT_READ_DELEG, 0, true),
            Err(Nfsstat4::Inval)
        );
        assert_eq!(share(1, 4, true), Err(Nfsstat4::Inval), "deny beyond BOTH");
        assert_eq!(
            share(1 | 0x600, 0, true),
            Err(Nfsstat4::Inval),
            "no such want"
        );
        assert_eq!(share(1 | 0x4, 0, true), Err(Nfsstat4::Inval), "a stray bit");
        let when = 1 | OPEN4_SHARE_ACCESS_WANT_ANY_DELEG | WANT_WHEN;
        assert!(share(when, 0, true).is_ok());
        assert_eq!(
            share(when, 0, false),
            Err(Nfsstat4::Inval),
            "OPEN_DOWNGRADE"
        );
        assert!(share(1 | OPEN4_SHARE_ACCESS_WANT_ANY_DELEG, 0, false).is_ok());
    }

    #[test]
    fn a_client_that_asks_learns_why_no_delegation() {
        assert_eq!(no_delegation(0, None), OpenDelegation4::None);
        assert_eq!(
            no_delegation(
                OPEN4_SHARE_ACCESS_WANT_READ_DELEG,
                Some(NoDeleg::Contention)
            ),
            OpenDelegation4::NoneExt(OpenNoneDelegation4::Contention {
                server_will_push_deleg: false
            })
        );
        assert_eq!(
            no_delegation(OPEN4_SHARE_ACCESS_WANT_NO_DELEG, None),
            OpenDelegation4::NoneExt(OpenNoneDelegation4::Why(WhyNoDelegation4::NotWanted))
        );
        assert_eq!(
            no_delegation(OPEN4_SHARE_ACCESS_WANT_CANCEL, None),
            OpenDelegation4::NoneExt(OpenNoneDelegation4::Why(WhyNoDelegation4::Cancelled))
        );
        for w in [
            OPEN4_SHARE_ACCESS_WANT_READ_DELEG,
            OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG,
            OPEN4_SHARE_ACCESS_WANT_ANY_DELEG,
        ] {
            assert_eq!(
                no_delegation(w, Some(NoDeleg::Resource)),
                OpenDelegation4::NoneExt(OpenNoneDelegation4::Resource {
                    server_will_signal_avail: false
                })
            );
        }
    }

    #[test]
    fn only_regular_files_open() {
        assert_eq!(regular(FileType::Regular), Ok(()));
        assert_eq!(regular(FileType::Directory), Err(Nfsstat4::IsDir));
        assert_eq!(regular(FileType::Symlink), Err(Nfsstat4::Symlink));
        for t in [
            FileType::Fifo,
            FileType::Socket,
            FileType::CharDev,
            FileType::BlockDev,
        ] {
            assert_eq!(regular(t), Err(Nfsstat4::WrongType));
        }
    }

    #[test]
    fn change_of_a_time_is_the_change_attribute() {
        let t = Time {
            sec: 1_700_000_000,
            nsec: 123,
        };
        let a = Attr {
            ftype: FileType::Regular,
            mode: 0,
            nlink: 1,
            uid: 0,
            gid: 0,
            size: 0,
            used: 0,
            rdev: (0, 0),
            fsid: 0,
            fileid: 1,
            atime: t,
            mtime: t,
            ctime: t,
        };
        assert_eq!(change_of(t), fattr::change(&a));
    }
}
