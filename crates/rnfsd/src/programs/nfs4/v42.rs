//! NFSv4.2's data operations (RFC 7862 §15), minor version 2 only: SEEK,
//! ALLOCATE, DEALLOCATE, READ_PLUS, COPY within the server, CLONE, and
//! OFFLOAD_STATUS / OFFLOAD_CANCEL. Stateids are checked as READ's and
//! WRITE's (`io::checked`); changes are durable before the reply as
//! WRITE's are (the journal commit a `sync` export owes, `c.owe`).
//!
//! COPY of at most `nfs4_copy_sync_max` bytes is synchronous. A longer
//! one the client lets run asynchronously (ca_synchronous false) runs on
//! a copier thread (`state::copy`): the reply carries its copy stateid at
//! once, the copy goes in chunks of `nfs4_copy_sync_max` bytes, at most
//! `COPY_CHUNK` (OFFLOAD_CANCEL stops it at the next), and CB_OFFLOAD
//! reports it (§15.2.3, §16.1). Any other
//! longer COPY (synchronous asked, no back channel, or the copier bounds
//! `nfs4_copies_max` / `nfs4_copies_per_client` reached) is a synchronous
//! short copy of `nfs4_copy_sync_max` bytes, which the client continues
//! from: progress, and no request thread copies for long. (knfsd goes
//! asynchronous whenever allowed and answers NFS4ERR_DELAY past its
//! bound; a short copy here saves the round trip of a CB_OFFLOAD for
//! small copies and a retry past the bound.) COPY_NOTIFY and a COPY
//! naming a source server (an inter-server copy, §4) are
//! NFS4ERR_NOTSUPP: this server copies only between its own files.

use rnfsd_fs::{Call, Content, FsError, Stable};
use rnfsd_proto::nfs4::*;
use rnfsd_xdr::Enc;

use super::compound::Compound;
use super::cur::Cur;
use super::io::{checked, max_io, read_first, recall_first, stable_how_of, MAX_OFFSET};
use super::open::{key_of, regular, File};
use super::session::sid;
use super::status::{of_fs, of_state};
use crate::state::copy::{Busy, Job, Outcome};
use crate::state::deleg::Access;
use rnfsd_v4state::FileKey;

/// The most bytes an asynchronous copy copies between checks for
/// OFFLOAD_CANCEL (and its client's going): a fraction of a second on a
/// disk. Its chunks are `nfs4_copy_sync_max` bytes up to this.
pub(super) const COPY_CHUNK: u64 = 16 << 20;

/// Segments one READ_PLUS reply holds at most (each hole costs 20 bytes
/// of the reply, each data segment 16 and its data).
pub(super) const MAX_READ_PLUS_EXTENTS: usize = 64;

fn res<T>(r: Result<T, Nfsstat4>) -> NfsRes4<T> {
    match r {
        Ok(v) => NfsRes4::Ok(v),
        Err(s) => NfsRes4::Fail(s),
    }
}

fn status(r: Result<(), Nfsstat4>) -> Nfsstat4 {
    r.err().unwrap_or(Nfsstat4::Ok)
}

/// SEEK (§15.11): the first data or hole at or after sa_offset. An offset
/// at or past end of file is NFS4ERR_NXIO; no data after it is NFS4_OK
/// with sr_eof (§15.11.3), the offset then the file's size; sr_eof is
/// also set when what was found is the hole at end of file.
pub(super) fn seek(c: &mut Compound<'_, '_>, a: Seek4Args) -> Seek4Res {
    res((|| {
        let f = checked(c, &a.stateid, false)?;
        let _reading = read_first(c, &f)?;
        let what = match a.what {
            DataContent4::Data => Content::Data,
            DataContent4::Hole => Content::Hole,
        };
        let call = f.obj.call(c.ctx);
        let (at, attr) = f
            .obj
            .exp
            .backend
            .seek(&call, &f.obj.fh, a.offset, what)
            .map_err(of_fs)?;
        Ok(match at {
            Some(at) => Seek4ResOk {
                eof: at >= attr.size,
                offset: at,
            },
            None => Seek4ResOk {
                eof: true,
                offset: attr.size,
            },
        })
    })())
}

/// ALLOCATE (§15.1) and DEALLOCATE (§15.4): the backend's fallocate,
/// behind WRITE's stateid check. A zero length is NFS4ERR_INVAL; a range
/// past the largest offset NFS4ERR_FBIG for ALLOCATE (it would grow the
/// file there), and is cut there for DEALLOCATE (nothing lies beyond).
fn space(c: &mut Compound<'_, '_>, s: &Stateid4, offset: u64, length: u64, free: bool) -> Nfsstat4 {
    status((|| {
        if length == 0 {
            return Err(Nfsstat4::Inval);
        }
        let end = offset.checked_add(length);
        let length = match end {
            Some(e) if e <= MAX_OFFSET => length,
            _ if free && offset < MAX_OFFSET => MAX_OFFSET - offset,
            _ => return Err(Nfsstat4::FBig),
        };
        let f = checked(c, s, true)?;
        f.obj.writable()?;
        let _changing = recall_first(c, &f)?;
        let ctx = c.ctx;
        let call = f.obj.call(ctx);
        let b = &f.obj.exp.backend;
        let r = match free {
            false => b.allocate(&call, &f.obj.fh, offset, length),
            true => b.deallocate(&call, &f.obj.fh, offset, length),
        };
        c.owe(&call);
        r.map(drop).map_err(of_fs)
    })())
}

pub(super) fn allocate(c: &mut Compound<'_, '_>, a: Allocate4Args) -> Nfsstat4 {
    space(c, &a.stateid, a.offset, a.length, false)
}

pub(super) fn deallocate(c: &mut Compound<'_, '_>, a: Deallocate4Args) -> Nfsstat4 {
    space(c, &a.stateid, a.offset, a.length, true)
}

/// READ_PLUS (§15.10): the file from rpa_offset as data and hole
/// segments, holes sent as holes; no more data than READ would send
/// (`max_io`, the session's reply size) and at most
/// `MAX_READ_PLUS_EXTENTS` segments. A backend that cannot tell holes
/// answers with one data segment, as READ.
pub(super) fn read_plus(c: &mut Compound<'_, '_>, a: ReadPlus4Args, e: &mut Enc) -> Nfsstat4 {
    let r = checked(c, &a.stateid, false).and_then(|f| {
        let _reading = read_first(c, &f)?;
        read_plus_into(c, &f, &a, e)
    });
    match r {
        Ok(()) => Nfsstat4::Ok,
        Err(s) => {
            e.u32(s as u32);
            s
        }
    }
}

fn read_plus_into(
    c: &Compound<'_, '_>,
    f: &File,
    a: &ReadPlus4Args,
    e: &mut Enc,
) -> Result<(), Nfsstat4> {
    // The row wrote the opnum; ReadPlusWriter writes it with the head.
    let opnum_at = e.len() - 4;
    e.truncate(opnum_at);
    // Reply bytes left for segments.
    let mut budget = c.reply_room(e).saturating_sub(ReadPlusWriter::HEAD_LEN);
    let count = (a.count as usize).min(max_io(c)) as u64;
    let call = f.obj.call(c.ctx);
    let b = &f.obj.exp.backend;
    let fh = &f.obj.fh;
    let fail = |e: &mut Enc, s: Nfsstat4| {
        e.u32(OP_READ_PLUS);
        Err(s)
    };
    let (extents, size) = match b.layout(&call, fh, a.offset, count, MAX_READ_PLUS_EXTENTS) {
        Ok((x, attr)) => (x, Some(attr.size)),
        Err(FsError::NotSupported) => (
            vec![rnfsd_fs::Extent {
                offset: a.offset,
                len: count,
                data: true,
            }],
            None,
        ),
        Err(err) => return fail(e, of_fs(err)),
    };
    let mut w = ReadPlusWriter::begin(e);
    // Past end of file: no segments, and eof (as READ, §15.10.3).
    let mut eof = size.is_some_and(|s| a.offset >= s);
    for x in &extents {
        if !x.data {
            if budget < ReadPlusWriter::HOLE_LEN {
                eof = false;
                break;
            }
            w.hole(e, x.offset, x.len);
            budget -= ReadPlusWriter::HOLE_LEN;
            eof = size.is_some_and(|s| x.offset + x.len >= s);
            continue;
        }
        let room = budget.saturating_sub(ReadPlusWriter::DATA_HEAD_LEN + 3) & !3;
        let want = x.len.min(room as u64) as usize;
        if want == 0 {
            eof = false;
            break;
        }
        let seg = w.data_begin(e, x.offset);
        let before = e.len();
        let buf = e.buf_mut();
        buf.reserve(want + 3);
        match b.read(&call, fh, x.offset, want as u32, buf) {
            Ok((read_eof, _)) => {
                if e.len() == before {
                    // Nothing there (the file shrank): no empty segment.
                    w.data_abandon(e, seg);
                    eof = read_eof;
                    break;
                }
                let n = w.data_end(e, seg, want) as usize;
                c.ctx.moved(n as u64, 0);
                budget = budget.saturating_sub(ReadPlusWriter::DATA_HEAD_LEN + n + 3);
                eof = read_eof;
                if n < want || read_eof {
                    break;
                }
            }
            Err(err) => {
                w.abandon(e);
                return fail(e, of_fs(err));
            }
        }
    }
    w.finish(e, eof);
    Ok(())
}

/// The saved filehandle's file, its stateid checked as READ's (COPY's and
/// CLONE's source, §15.2.3, §15.13.3).
fn checked_saved(c: &Compound<'_, '_>, s: &Stateid4) -> Result<File, Nfsstat4> {
    let h = c.client()?;
    let o = match c.saved.as_ref().ok_or(Nfsstat4::NoFileHandle)? {
        Cur::Pseudo(_) => return Err(Nfsstat4::IsDir),
        Cur::Obj(o) => o,
    };
    let attr = o
        .exp
        .backend
        .getattr(&o.call(c.ctx), &o.fh)
        .map_err(of_fs)?;
    regular(attr.ftype)?;
    let f = File {
        obj: o.clone(),
        key: key_of(&attr),
        attr,
    };
    let s = sid(&c.stateid(s)?);
    c.nfs4
        .state
        .check_io(&h, &s, f.key, false)
        .map_err(|e| of_state(&e))?;
    Ok(f)
}

/// COPY's and CLONE's files: the source (saved filehandle) readable, the
/// destination (current) writable, both of one export (another is
/// another filesystem: NFS4ERR_XDEV, as knfsd).
fn src_dst(c: &Compound<'_, '_>, src: &Stateid4, dst: &Stateid4) -> Result<(File, File), Nfsstat4> {
    let s = checked_saved(c, src)?;
    // Another client's write delegation on the source goes first; the
    // destination's with the write (`recall_first`).
    drop(read_first(c, &s)?);
    let d = checked(c, dst, true)?;
    d.obj.writable()?;
    if s.obj.exp.id != d.obj.exp.id {
        return Err(Nfsstat4::XDev);
    }
    Ok((s, d))
}

/// The bytes a COPY or CLONE of `count` (0: to the source's end of file)
/// from `src_off` covers: NFS4ERR_INVAL when the range is not within the
/// source (§15.2.3, §15.13.3), or when source and destination are one file
/// and the ranges overlap; NFS4ERR_FBIG past the largest offset.
fn range(s: &File, d: &File, src_off: u64, dst_off: u64, count: u64) -> Result<u64, Nfsstat4> {
    range_keys(s.key, s.attr.size, d.key, src_off, dst_off, count)
}

fn range_keys(
    src: FileKey,
    size: u64,
    dst: FileKey,
    src_off: u64,
    dst_off: u64,
    count: u64,
) -> Result<u64, Nfsstat4> {
    if src_off > size {
        return Err(Nfsstat4::Inval);
    }
    let len = match count {
        0 => size - src_off,
        n if src_off.checked_add(n).is_some_and(|e| e <= size) => n,
        _ => return Err(Nfsstat4::Inval),
    };
    if dst_off.checked_add(len).is_none_or(|e| e > MAX_OFFSET) {
        return Err(Nfsstat4::FBig);
    }
    let overlap = src_off < dst_off + len && dst_off < src_off + len;
    if src == dst && len > 0 && overlap {
        return Err(Nfsstat4::Inval);
    }
    Ok(len)
}

/// COPY (§15.2) within the server: synchronously up to
/// `nfs4_copy_sync_max` bytes (a short copy beyond, which the client
/// continues), asynchronously past it when the client allows (see the
/// module's comment). A synchronous one is durable before the reply
/// (FILE_SYNC4) on a `sync` export and when the client asks for a
/// synchronous copy; else UNSTABLE4, and the client's COMMIT makes it
/// durable. An asynchronous one is as durable when CB_OFFLOAD reports it
/// (FILE_SYNC4 on a `sync` export, else UNSTABLE4). The write verifier is
/// WRITE's, read before copying.
pub(super) fn copy(c: &mut Compound<'_, '_>, a: Copy4Args) -> Copy4Res {
    match copy_sync(c, &a) {
        Ok(r) => Copy4Res::Ok(r),
        Err(s) => Copy4Res::Fail(s),
    }
}

fn copy_sync(c: &mut Compound<'_, '_>, a: &Copy4Args) -> Result<Copy4ResOk, Nfsstat4> {
    // An inter-server copy (§4): we copy only between our own files.
    if !a.source_server.is_empty() {
        return Err(Nfsstat4::NotSupp);
    }
    let (s, d) = src_dst(c, &a.src_stateid, &a.dst_stateid)?;
    let len = range(&s, &d, a.src_offset, a.dst_offset, a.count)?;
    // Delegations of the destination are returned before any write.
    let changing = recall_first(c, &d)?;
    let changing = match !a.synchronous && len > c.nfs4.copy_sync_max {
        true => match copy_async(c, a, &s, &d, len, changing)? {
            Ok(r) => return Ok(r),
            Err(back) => back,
        },
        false => changing,
    };
    let _changing = changing;
    let len = len.min(c.nfs4.copy_sync_max);
    let stable = match d.obj.exp.sync || a.synchronous {
        true => Stable::FileSync,
        false => Stable::Unstable,
    };
    // Read before copying, as WRITE's: a reset meanwhile shows at COMMIT.
    let verf = Verifier4(c.ctx.server.write_verifier.get());
    let (count, committed) = if len == 0 {
        (0, Stable::FileSync)
    } else {
        let ctx = c.ctx;
        let call = d.obj.call(ctx);
        let r = d.obj.exp.backend.copy_range(
            &call,
            &s.obj.fh,
            a.src_offset,
            &d.obj.fh,
            a.dst_offset,
            len,
            stable,
        );
        c.owe(&call);
        let (n, committed, _) = r.map_err(of_fs)?;
        ctx.moved(n, n);
        (n.min(len), committed)
    };
    Ok(Copy4ResOk {
        response: WriteResponse4 {
            callback_id: None,
            count,
            committed: stable_how_of(committed.max(stable)),
            writeverf: verf,
        },
        requires: CopyRequirements4 {
            consecutive: true,
            synchronous: true,
        },
    })
}

/// Starts an asynchronous copy of `len` bytes: the reply, or the
/// delegation guard back when the copy must be synchronous (no back
/// channel for CB_OFFLOAD, or the copier bounds reached).
#[allow(clippy::type_complexity)]
fn copy_async(
    c: &Compound<'_, '_>,
    a: &Copy4Args,
    s: &File,
    d: &File,
    len: u64,
    changing: Option<Access>,
) -> Result<Result<Copy4ResOk, Option<Access>>, Nfsstat4> {
    let h = c.client()?;
    if !c.nfs4.copies.enabled() || !c.nfs4.deleg.can_call(h.id()) {
        return Ok(Err(changing));
    }
    // Read before copying, as WRITE's: a reset meanwhile shows at COMMIT.
    let verf = Verifier4(c.ctx.server.write_verifier.get());
    let job = AsyncCopy {
        backend: d.obj.exp.backend.clone(),
        sync: d.obj.exp.sync,
        cred: d.obj.grant.cred.clone(),
        src: s.obj.fh.clone(),
        dst: d.obj.fh.clone(),
        src_off: a.src_offset,
        dst_off: a.dst_offset,
        len,
        chunk: c.nfs4.copy_sync_max.clamp(1, COPY_CHUNK),
        verf,
    };
    // The guard lives as long as the copy writes: no delegation of the
    // destination is granted meanwhile.
    let work = Box::new(move |j: &Job| {
        let _changing = changing;
        job.run(j)
    });
    let cb = c.nfs4.deleg.cb_sender();
    match c.nfs4.copies.start(&h, &d.obj.fh.0, cb, work) {
        Ok(sid) => Ok(Ok(Copy4ResOk {
            response: WriteResponse4 {
                callback_id: Some(sid),
                count: 0,
                committed: StableHow4::Unstable,
                writeverf: verf,
            },
            requires: CopyRequirements4 {
                consecutive: true,
                synchronous: false,
            },
        })),
        // The work (and the guard in it) is dropped: take a new guard.
        Err(Busy) => recall_first(c, d).map(Err),
    }
}

/// What an asynchronous copy needs off the request path.
struct AsyncCopy {
    backend: std::sync::Arc<dyn rnfsd_fs::Backend>,
    sync: bool,
    cred: rnfsd_fs::Cred,
    src: rnfsd_fs::Fh,
    dst: rnfsd_fs::Fh,
    src_off: u64,
    dst_off: u64,
    len: u64,
    chunk: u64,
    verf: Verifier4,
}

impl AsyncCopy {
    /// Copies in chunks until done, failed, cancelled or its client gone;
    /// then, on a `sync` export, commits what it copied (FILE_SYNC4). A
    /// failure after some bytes is a short copy (as knfsd's).
    fn run(self, j: &Job) -> Outcome {
        let call = Call::thread(&self.cred, false);
        let b = &self.backend;
        let mut done = 0u64;
        let mut failed = None;
        while done < self.len && !j.stopped() {
            let want = (self.len - done).min(self.chunk);
            let r = b.copy_range(
                &call,
                &self.src,
                self.src_off + done,
                &self.dst,
                self.dst_off + done,
                want,
                Stable::Unstable,
            );
            match r {
                Ok((n, _, _)) => {
                    let n = n.min(want);
                    done += n;
                    j.add(n);
                    if n < want {
                        break;
                    }
                }
                Err(e) => {
                    failed = Some(of_fs(e));
                    break;
                }
            }
        }
        let mut status = match failed {
            Some(s) if done == 0 => s,
            _ => Nfsstat4::Ok,
        };
        let mut committed = StableHow4::Unstable;
        if self.sync && done > 0 {
            match b.commit(&call, &self.dst, 0, 0) {
                Ok(_) => committed = StableHow4::FileSync,
                Err(e) => status = of_fs(e),
            }
        }
        Outcome {
            status,
            response: WriteResponse4 {
                callback_id: None,
                count: done,
                committed,
                writeverf: self.verf,
            },
        }
    }
}

/// CLONE (§15.13): the backend's reflink where the filesystem has one,
/// NFS4ERR_NOTSUPP where not; a range not aligned to clone_blksize is
/// the filesystem's NFS4ERR_INVAL.
pub(super) fn clone(c: &mut Compound<'_, '_>, a: Clone4Args) -> Nfsstat4 {
    status((|| {
        let (s, d) = src_dst(c, &a.src_stateid, &a.dst_stateid)?;
        range(&s, &d, a.src_offset, a.dst_offset, a.count)?;
        let _changing = recall_first(c, &d)?;
        let ctx = c.ctx;
        let call = d.obj.call(ctx);
        let r = d.obj.exp.backend.clone_range(
            &call,
            &s.obj.fh,
            a.src_offset,
            &d.obj.fh,
            a.dst_offset,
            a.count,
        );
        c.owe(&call);
        r.map(drop).map_err(of_fs)
    })())
}

/// OFFLOAD_STATUS (§15.9): bytes copied so far, and the copy's status
/// once it finished (kept for two leases after). NFS4ERR_BAD_STATEID for
/// a stateid naming no copy of the client's (cancelled, forgotten, or
/// any other stateid), as knfsd.
pub(super) fn offload_status(c: &mut Compound<'_, '_>, a: Offload4Args) -> OffloadStatus4Res {
    let h = match c.client() {
        Ok(h) => h,
        Err(s) => return NfsRes4::Fail(s),
    };
    match c.nfs4.copies.status(&h, &a.stateid) {
        Some(st) => NfsRes4::Ok(OffloadStatus4ResOk {
            count: st.copied,
            complete: st.complete,
        }),
        None => NfsRes4::Fail(Nfsstat4::BadStateid),
    }
}

/// OFFLOAD_CANCEL (§15.8): the copy stops at its next chunk (what it
/// copied stays), no CB_OFFLOAD follows, its stateid is freed.
pub(super) fn offload_cancel(c: &mut Compound<'_, '_>, a: Offload4Args) -> Nfsstat4 {
    let h = match c.client() {
        Ok(h) => h,
        Err(s) => return s,
    };
    match c.nfs4.copies.cancel(&h, &a.stateid) {
        true => Nfsstat4::Ok,
        false => Nfsstat4::BadStateid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rnfsd_fs::{Attr, FileType, Time};

    fn file(fileid: u64, size: u64) -> (FileKey, Attr) {
        let attr = Attr {
            ftype: FileType::Regular,
            mode: 0o644,
            nlink: 1,
            uid: 0,
            gid: 0,
            size,
            used: 0,
            rdev: (0, 0),
            fsid: 1,
            fileid,
            atime: Time::default(),
            mtime: Time::default(),
            ctime: Time::default(),
        };
        (key_of(&attr), attr)
    }

    #[test]
    fn copy_ranges_within_the_source_and_never_overlapping_one_file() {
        let (sk, sa) = file(1, 100);
        let (dk, _) = file(2, 0);
        let r = |sk, dk, so, d_o, n| range_of(sk, &sa, dk, so, d_o, n);
        assert_eq!(r(sk, dk, 0, 0, 0), Ok(100), "0: to end of file");
        assert_eq!(r(sk, dk, 40, 0, 0), Ok(60));
        assert_eq!(r(sk, dk, 100, 0, 0), Ok(0));
        assert_eq!(r(sk, dk, 101, 0, 0), Err(Nfsstat4::Inval));
        assert_eq!(r(sk, dk, 50, 0, 51), Err(Nfsstat4::Inval));
        assert_eq!(r(sk, dk, 50, 0, 50), Ok(50));
        assert_eq!(r(sk, dk, 0, MAX_OFFSET, 1), Err(Nfsstat4::FBig));
        assert_eq!(r(sk, sk, 0, 10, 20), Err(Nfsstat4::Inval), "overlap");
        assert_eq!(r(sk, sk, 0, 20, 20), Ok(20), "adjacent");
    }

    fn range_of(
        sk: FileKey,
        sa: &Attr,
        dk: FileKey,
        so: u64,
        d_o: u64,
        n: u64,
    ) -> Result<u64, Nfsstat4> {
        range_keys(sk, sa.size, dk, so, d_o, n)
    }
}
