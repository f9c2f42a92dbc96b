//! READ, WRITE, COMMIT (RFC 8881 §18.22, §18.32, §18.3): the backend
//! calls NFSv3's READ, WRITE and COMMIT make (the same write verifier,
//! the same journal commit owed by a stable write on a `sync` export),
//! behind the stateid checks of `rnfsd_v4state` (`check_io`: special
//! stateids, share reservations, NFS4ERR_OPENMODE).

use rnfsd_fs::Stable;
use rnfsd_proto::nfs4::*;
use rnfsd_xdr::Enc;

use super::compound::Compound;
use super::open::{regular_file, File};
use super::session::sid;
use super::status::{of_fs, of_state};
use crate::limits::MIN_MAX_IO;
use crate::state::deleg::Recalling;

/// The largest READ or WRITE: the server's `max_io`, as NFSv3's (and
/// the maxread/maxwrite attributes say).
pub(super) fn max_io(c: &Compound<'_, '_>) -> usize {
    c.ctx.server.max_io.clamp(MIN_MAX_IO, MAX_DATA as u32) as usize
}

/// The largest offset a file reaches (the filesystem's off_t).
pub(super) const MAX_OFFSET: u64 = i64::MAX as u64;

/// The current file, its stateid checked for reading or writing it.
pub(super) fn checked(c: &Compound<'_, '_>, s: &Stateid4, write: bool) -> Result<File, Nfsstat4> {
    let h = c.client()?;
    let f = regular_file(c)?;
    let s = sid(&c.stateid(s)?);
    c.nfs4
        .state
        .check_io(&h, &s, f.key, write)
        .map_err(|e| of_state(&e))?;
    Ok(f)
}

/// READ (§18.22): the data read straight into the reply, no more than
/// the session's reply may hold.
pub(super) fn read(c: &mut Compound<'_, '_>, a: Read4Args, e: &mut Enc) -> Nfsstat4 {
    let r = checked(c, &a.stateid, false).and_then(|f| {
        let _reading = read_first(c, &f)?;
        read_into(c, &f, &a, e)
    });
    match r {
        Ok(()) => Nfsstat4::Ok,
        Err(s) => {
            e.u32(s as u32);
            s
        }
    }
}

fn read_into(c: &Compound<'_, '_>, f: &File, a: &Read4Args, e: &mut Enc) -> Result<(), Nfsstat4> {
    // The row wrote the opnum; ReadWriter writes it with the head.
    let opnum_at = e.len() - 4;
    e.truncate(opnum_at);
    let room = c.reply_room(e).saturating_sub(ReadWriter::HEAD_LEN + 3) & !3;
    let count = (a.count as usize).min(max_io(c)).min(room);
    let w = ReadWriter::begin(e);
    let buf = e.buf_mut();
    buf.reserve(count + 3);
    let call = f.obj.call(c.ctx);
    match f
        .obj
        .exp
        .backend
        .read(&call, &f.obj.fh, a.offset, count as u32, buf)
    {
        Ok((eof, _)) => {
            let n = w.finish(e, eof, count);
            c.ctx.moved(u64::from(n), 0);
            Ok(())
        }
        Err(err) => {
            w.abandon(e);
            e.u32(OP_READ);
            Err(of_fs(err))
        }
    }
}

fn stable_of(s: StableHow4) -> Stable {
    match s {
        StableHow4::Unstable => Stable::Unstable,
        StableHow4::DataSync => Stable::DataSync,
        StableHow4::FileSync => Stable::FileSync,
    }
}

pub(super) fn stable_how_of(s: Stable) -> StableHow4 {
    match s {
        Stable::Unstable => StableHow4::Unstable,
        Stable::DataSync => StableHow4::DataSync,
        Stable::FileSync => StableHow4::FileSync,
    }
}

/// WRITE (§18.32): DATA_SYNC4 and FILE_SYNC4 are durable before the
/// reply (the backend's sync; on a `sync` export the journal commit it
/// owes is waited for, as NFSv3's). The server's write verifier, NFSv3's.
pub(super) fn write(c: &mut Compound<'_, '_>, a: Write4ArgsRef<'_>) -> Write4Res {
    match write_data(c, &a) {
        Ok(r) => NfsRes4::Ok(r),
        Err(s) => NfsRes4::Fail(s),
    }
}

/// Other clients' delegations of the file a change writes are recalled
/// first (RFC 8881 §10.4.1): NFS4ERR_DELAY until they are returned or
/// revoked; none is granted while the guard lives. Nothing asked of the
/// state while delegations are off.
pub(super) fn recall_first(
    c: &Compound<'_, '_>,
    f: &File,
) -> Result<Option<crate::state::deleg::Access>, Nfsstat4> {
    if !c.nfs4.deleg.enabled {
        return Ok(None);
    }
    let h = c.client()?;
    c.nfs4
        .deleg
        .access(&c.nfs4.state, f.key, Some(h.id()), true)
        .map_err(|Recalling| Nfsstat4::Delay)
}

/// Another client's write delegation of the file a read reads is
/// recalled first (§10.4): NFS4ERR_DELAY until it is returned or
/// revoked. Nothing while no write delegation is held anywhere.
pub(super) fn read_first(
    c: &Compound<'_, '_>,
    f: &File,
) -> Result<Option<crate::state::deleg::Access>, Nfsstat4> {
    if !c.nfs4.deleg.enabled || !c.nfs4.state.any_write_delegation() {
        return Ok(None);
    }
    let h = c.client()?;
    c.nfs4
        .deleg
        .access(&c.nfs4.state, f.key, Some(h.id()), false)
        .map_err(|Recalling| Nfsstat4::Delay)
}

fn write_data(c: &mut Compound<'_, '_>, a: &Write4ArgsRef<'_>) -> Result<Write4ResOk, Nfsstat4> {
    // Past the largest offset a file has (knfsd: OFFSET_MAX).
    let end = a.offset.checked_add(a.data.len() as u64);
    if end.is_none_or(|e| e > MAX_OFFSET) {
        return Err(Nfsstat4::FBig);
    }
    let f = checked(c, &a.stateid, true)?;
    f.obj.writable()?;
    let _changing = recall_first(c, &f)?;
    // Past our maxwrite we write a prefix; the count tells the client to
    // send the rest (as NFSv3's).
    let n = a.data.len().min(max_io(c));
    // Read before writing: a reset while this write is under way shows
    // at COMMIT.
    let verf = Verifier4(c.ctx.server.write_verifier.get());
    let ctx = c.ctx;
    let call = f.obj.call(ctx);
    let r = f.obj.exp.backend.write(
        &call,
        &f.obj.fh,
        a.offset,
        &a.data[..n],
        stable_of(a.stable),
    );
    c.owe(&call);
    let (written, committed, _) = r.map_err(of_fs)?;
    let count = written.min(n as u32);
    ctx.moved(0, u64::from(count));
    Ok(Write4ResOk {
        count,
        // At least what was asked (§18.32.3).
        committed: stable_how_of(committed).max(a.stable),
        writeverf: verf,
    })
}

/// COMMIT (§18.3).
pub(super) fn commit(c: &mut Compound<'_, '_>, a: Commit4Args) -> Commit4Res {
    let r = (|| {
        // An offset and count past the largest offset (knfsd's
        // nfsd_commit: NFS4ERR_INVAL).
        let end = a.offset.checked_add(u64::from(a.count));
        if a.offset > MAX_OFFSET || end.is_none() {
            return Err(Nfsstat4::Inval);
        }
        let f = regular_file(c)?;
        // knfsd opens the file to write for COMMIT: NFS4ERR_ROFS.
        f.obj.writable()?;
        let ctx = c.ctx;
        let call = f.obj.call(ctx);
        let r = f
            .obj
            .exp
            .backend
            .commit(&call, &f.obj.fh, a.offset, a.count);
        c.owe(&call);
        r.map_err(of_fs)?;
        // Read after the sync: a reset it caused is in this reply.
        Ok(Verifier4(ctx.server.write_verifier.get()))
    })();
    match r {
        Ok(v) => NfsRes4::Ok(v),
        Err(s) => NfsRes4::Fail(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_how_round_trips_in_order() {
        for s in [
            StableHow4::Unstable,
            StableHow4::DataSync,
            StableHow4::FileSync,
        ] {
            assert_eq!(stable_how_of(stable_of(s)), s);
        }
        assert!(StableHow4::Unstable < StableHow4::DataSync);
        assert!(StableHow4::DataSync < StableHow4::FileSync);
    }
}
