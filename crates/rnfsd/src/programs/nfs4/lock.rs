//! LOCK, LOCKT, LOCKU (RFC 8881 §18.10-§18.12) through `rnfsd_v4state`,
//! whose byte-range locks are the kernel's OFD locks on the server's
//! files, the same the NLM server takes: NFSv3 (NLM) clients, NFSv4
//! clients and local programs see each other's locks. The blocking
//! types (READW_LT, WRITEW_LT) are answered as the others: we send no
//! CB_NOTIFY_LOCK, and OPEN does not offer it (no
//! OPEN4_RESULT_MAY_NOTIFY_LOCK), so a client polls.

use rnfsd_proto::nfs4::*;
use rnfsd_v4state::{BackendLockFile, ClientHandle, Denied, LockArgs, LocktArgs, V4Error};

use super::compound::Compound;
use super::cur::Cur;
use super::open::{cur_file, regular_file, sid4, File};
use super::session::sid;
use super::status::of_state;

/// A LOCK or LOCKT that did not take.
enum Refused {
    Status(Nfsstat4),
    Denied(Lock4Denied),
}

impl From<Nfsstat4> for Refused {
    fn from(s: Nfsstat4) -> Self {
        Refused::Status(s)
    }
}

impl From<V4Error> for Refused {
    fn from(e: V4Error) -> Self {
        match e {
            V4Error::Denied(d) => Refused::Denied(denied(&d)),
            e => Refused::Status(of_state(&e)),
        }
    }
}

/// LOCK4denied: the lock in the way, and its owner when it is one of
/// our NFSv4 lock owners (an NLM client's or a local program's: client
/// id 0 and an empty owner, as knfsd sends).
fn denied(d: &Denied) -> Lock4Denied {
    let (clientid, owner) = match &d.owner {
        Some((id, o)) => (id.0, o.clone()),
        None => (0, Vec::new()),
    };
    Lock4Denied {
        offset: d.offset,
        length: d.length,
        locktype: match d.write {
            true => NfsLockType4::Write,
            false => NfsLockType4::Read,
        },
        owner: LockOwner4 {
            clientid,
            owner: Opaque1024(owner),
        },
    }
}

fn is_write(t: NfsLockType4) -> bool {
    matches!(t, NfsLockType4::Write | NfsLockType4::WriteW)
}

/// The lock owner's descriptor on `f` is opened as the caller may
/// (knfsd's NFSD_MAY_LOCK); `holder`: see `LockOpen::holder`.
fn opener(f: &File, holder: bool) -> BackendLockFile<'_> {
    BackendLockFile {
        backend: &f.obj.exp.backend,
        cred: &f.obj.grant.cred,
        fh: &f.obj.fh,
        holder,
    }
}

/// Whether client `h` holds a write delegation on `f` that is being
/// recalled: the Linux client then sends the locks it kept under it
/// (as LOCKs) before its DELEGRETURN, and a LOCK answered NFS4ERR_DELAY
/// (a new open of the file would break the server's own write lease)
/// would keep it from returning the delegation until its revocation.
fn returning_holder(c: &Compound<'_, '_>, h: &ClientHandle, f: &File) -> bool {
    c.nfs4
        .state
        .write_holder(&f.key, None)
        .is_some_and(|w| w.recalled && w.recall.client.id() == h.id())
}

/// LOCK (§18.10): a new lock owner from an open stateid
/// (open_to_lock_owner4; its seqids and client id are 4.0's, unused in
/// 4.1), or an existing lock stateid. The lock stateid becomes the
/// current stateid.
pub(super) fn lock(c: &mut Compound<'_, '_>, a: Lock4Args) -> Lock4Res {
    match take(c, &a) {
        Ok(s) => {
            c.cur_sid = Some(s);
            Lock4Res::Ok(s)
        }
        Err(Refused::Denied(d)) => Lock4Res::Denied(d),
        Err(Refused::Status(s)) => Lock4Res::Fail(s),
    }
}

fn take(c: &Compound<'_, '_>, a: &Lock4Args) -> Result<Stateid4, Refused> {
    let h = c.client()?;
    let f = regular_file(c)?;
    let locker = match &a.locker {
        Locker4::OpenOwner(o) => rnfsd_v4state::Locker4::New {
            open: sid(&c.stateid(&o.open_stateid)?),
            owner: &o.lock_owner.owner.0,
        },
        Locker4::LockOwner(l) => {
            rnfsd_v4state::Locker4::Existing(sid(&c.stateid(&l.lock_stateid)?))
        }
    };
    let s = c.nfs4.state.lock(
        &h,
        &LockArgs {
            locker,
            file: f.key,
            write: is_write(a.locktype),
            offset: a.offset,
            length: a.length,
            reclaim: a.reclaim,
        },
        &opener(&f, returning_holder(c, &h, &f)),
    )?;
    Ok(sid4(s))
}

/// LOCKT (§18.11): whether the lock owner could take the lock (its own
/// locks never conflict); the owner's client id is the session's in 4.1.
pub(super) fn lockt(c: &mut Compound<'_, '_>, a: LockT4Args) -> LockT4Res {
    let r = (|| -> Result<(), Refused> {
        let h = c.client()?;
        let f = regular_file(c)?;
        c.nfs4.state.lockt(
            &h,
            &LocktArgs {
                owner: &a.owner.owner.0,
                file: f.key,
                write: is_write(a.locktype),
                offset: a.offset,
                length: a.length,
            },
            // A test through a fresh description: the holder's own
            // locks are in its client, not here.
            &opener(&f, false),
        )?;
        Ok(())
    })();
    match r {
        Ok(()) => LockT4Res::Ok,
        Err(Refused::Denied(d)) => LockT4Res::Denied(d),
        Err(Refused::Status(s)) => LockT4Res::Fail(s),
    }
}

/// LOCKU (§18.12): the range let go (holding nothing there is no error);
/// the lock stateid, its seqid bumped, becomes the current stateid. A
/// stateid of another file than the current one is NFS4ERR_BAD_STATEID,
/// after its own checks (knfsd checks the stateid before the filehandle).
pub(super) fn locku(c: &mut Compound<'_, '_>, a: LockU4Args) -> Stateid4Res {
    let r = (|| {
        let h = c.client()?;
        let s = sid(&c.stateid(&a.lock_stateid)?);
        let state = &c.nfs4.state;
        let file = match c.cur()? {
            Cur::Pseudo(_) => None,
            Cur::Obj(_) => cur_file(c)?.map(|f| f.key),
        };
        let Some(file) = file else {
            state
                .check_stateid(&h, &s, None)
                .map_err(|e| of_state(&e))?;
            return Err(Nfsstat4::BadStateid);
        };
        state
            .locku(&h, &s, file, a.offset, a.length)
            .map(sid4)
            .map_err(|e| of_state(&e))
    })();
    match r {
        Ok(s) => {
            c.cur_sid = Some(s);
            NfsRes4::Ok(s)
        }
        Err(s) => NfsRes4::Fail(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rnfsd_v4state::ClientId;

    #[test]
    fn denied_names_the_lock_and_its_owner() {
        let d = denied(&Denied {
            offset: 10,
            length: u64::MAX,
            write: true,
            owner: Some((ClientId(0x1234), b"lo".to_vec())),
        });
        assert_eq!(d.locktype, NfsLockType4::Write);
        assert_eq!(d.owner.clientid, 0x1234);
        assert_eq!(d.owner.owner.0, b"lo");
        assert_eq!((d.offset, d.length), (10, u64::MAX));
        let nlm = denied(&Denied {
            offset: 0,
            length: 5,
            write: false,
            owner: None,
        });
        assert_eq!(nlm.locktype, NfsLockType4::Read);
        assert_eq!((nlm.owner.clientid, nlm.owner.owner.0.len()), (0, 0));
        match Refused::from(V4Error::Grace) {
            Refused::Status(s) => assert_eq!(s, Nfsstat4::Grace),
            Refused::Denied(_) => panic!("grace is a status"),
        }
    }

    #[test]
    fn blocking_types_lock_as_the_others() {
        assert!(is_write(NfsLockType4::Write) && is_write(NfsLockType4::WriteW));
        assert!(!is_write(NfsLockType4::Read) && !is_write(NfsLockType4::ReadW));
    }
}
