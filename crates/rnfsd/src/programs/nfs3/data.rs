//! READ, WRITE and COMMIT (RFC 1813 §3.3.6, §3.3.7, §3.3.21): the data
//! path, with READ and WRITE hand-decoded so their data is never copied.

use rnfsd_fs::FsError;
use rnfsd_proto::nfs3::*;
use rnfsd_transport::Spliced;
use rnfsd_xdr::{pad4, Dec, Enc, Xdr};

use super::common::{
    before_change, before_read, fail_wcc, fs_call, owing, post_attr, resolve, resolve_or_fail,
    Changed,
};
use super::convert::*;
use super::{max_io, PATTR, ST};
use crate::programs::CallCtx;
use rnfsd_rpc::ProcError;

/// READ3resok up to its data: status, post_op_attr (present), count, eof
/// and the opaque's length. Reserved before the read and filled after it.
pub(super) const READ_HEAD: usize = ST + PATTR + 4 + 4 + 4;

pub(super) fn read_run(
    ctx: &CallCtx<'_>,
    dec: &mut Dec<'_>,
    enc: &mut Enc,
) -> Result<(), ProcError> {
    let a = Read3Args::decode(dec).map_err(|_| ProcError::GarbageArgs)?;
    read_into(ctx, a, enc);
    Ok(())
}

/// READs this large or larger go by splice when a pipe is free: below it,
/// two more syscalls cost more than the copy they save.
const SPLICE_MIN: usize = 32 * 1024;

/// The data is read straight into the reply, behind a reserved header (no
/// user-space copy of READ data), or, for a large READ, spliced from the
/// page cache into a pipe that follows the reply to the socket (no copy at
/// all); the reply grows to exactly what the request's count needs.
fn read_into(ctx: &CallCtx<'_>, a: Read3Args, enc: &mut Enc) {
    let (exp, fh, g) = match resolve(ctx, a.file) {
        Ok(v) => v,
        Err(s) => return Read3Res::Fail(s, None).encode(enc),
    };
    let cred = g.cred;
    let call = fs_call(ctx, &cred);
    let _reading = match before_read(ctx, exp.backend.as_ref(), &call, &fh) {
        Ok(a) => a,
        Err(s) => return Read3Res::Fail(s, post_attr(&exp, &call, &fh)).encode(enc),
    };
    let count = a.count.min(max_io(ctx)) as usize;
    if count >= SPLICE_MIN {
        let pipe = ctx.server.pipes.as_ref().and_then(|p| p.lease());
        // A pipe slot holds at most one page: an unaligned READ spans one
        // page more than its count, and must fit whole or it would be short.
        let span = (a.offset % 4096) as usize + count;
        if let Some(mut pipe) = pipe.filter(|p| p.capacity() >= span) {
            let r = match pipe.write_end() {
                Some(w) => exp
                    .backend
                    .read_to_pipe(&call, &fh, a.offset, count as u32, w),
                None => Err(FsError::NotSupported),
            };
            match r {
                Ok((n, eof, attr)) => {
                    let n = n.min(count as u32);
                    pipe.filled(n as usize);
                    read_head(enc, n, eof, &attr);
                    let pad = pad4(n as usize) - n as usize;
                    ctx.moved(u64::from(n), 0);
                    ctx.splice(Spliced { pipe, pad });
                    return;
                }
                // The backend copies instead; an unused pipe goes back.
                Err(FsError::NotSupported) => {}
                Err(e) => {
                    return Read3Res::Fail(nfsstat3_of(e), post_attr(&exp, &call, &fh)).encode(enc)
                }
            }
        }
    }
    let start = enc.len();
    let buf = enc.buf_mut();
    buf.resize(start + READ_HEAD, 0);
    buf.reserve(count + 3);
    let r = exp.backend.read(&call, &fh, a.offset, count as u32, buf);
    match r {
        Ok((eof, attr)) => {
            let got = buf.len() - start - READ_HEAD;
            // Never send more than asked, whatever the backend did.
            let n = got.min(count);
            buf.truncate(start + READ_HEAD + n);
            buf.resize(start + READ_HEAD + pad4(n), 0);
            ctx.moved(n as u64, 0);
            let mut h = Enc::with_capacity(READ_HEAD);
            read_head(&mut h, n as u32, eof && n == got, &attr);
            buf[start..start + READ_HEAD].copy_from_slice(h.as_slice());
        }
        Err(e) => {
            buf.truncate(start);
            Read3Res::Fail(nfsstat3_of(e), post_attr(&exp, &call, &fh)).encode(enc);
        }
    }
}

/// READ3resok up to its data (RFC 1813 §3.3.6): status, attributes, count,
/// eof, and the data's opaque length.
fn read_head(enc: &mut Enc, n: u32, eof: bool, attr: &rnfsd_fs::Attr) {
    enc.u32(Nfsstat3::Ok as u32);
    Some(fattr3_of(attr)).encode(enc);
    enc.u32(n);
    enc.bool(eof);
    enc.u32(n);
}

/// WRITE decodes its data borrowed from the request (no copy of up to
/// `MAX_DATA` bytes before the backend writes it).
pub(super) fn write_run(
    ctx: &CallCtx<'_>,
    dec: &mut Dec<'_>,
    enc: &mut Enc,
) -> Result<(), ProcError> {
    let a = Write3ArgsRef::decode(dec).map_err(|_| ProcError::GarbageArgs)?;
    write(ctx, a).encode(enc);
    Ok(())
}

pub(super) fn write(ctx: &CallCtx<'_>, a: Write3ArgsRef<'_>) -> Write3Res {
    let (exp, fh, g) = match resolve(ctx, a.file) {
        Ok(v) => v,
        Err(s) => return NfsRes::Fail(s, WccData::default()),
    };
    let cred = g.cred;
    let call = fs_call(ctx, &cred);
    if g.read_only {
        return NfsRes::Fail(Nfsstat3::RoFs, fail_wcc(&exp, &call, &fh));
    }
    // RFC 1813 §3.3.7: count is the number of bytes in data.
    if a.count as usize != a.data.len() {
        return NfsRes::Fail(Nfsstat3::Inval, fail_wcc(&exp, &call, &fh));
    }
    // Past our advertised wtmax we write a prefix; the reply's count tells
    // the client to send the rest (knfsd truncates the same way).
    let n = a.data.len().min(max_io(ctx) as usize);
    let data = &a.data[..n];
    let _changing = match before_change(ctx, exp.backend.as_ref(), &call, Changed::Fh(&fh)) {
        Ok(c) => c,
        Err(s) => return NfsRes::Fail(s, fail_wcc(&exp, &call, &fh)),
    };
    // Read before writing: a verifier reset while this write is under way
    // (a storage error that may have lost it) then shows at COMMIT.
    let verf = Verf3(ctx.server.write_verifier.get());
    let res = match exp
        .backend
        .write(&call, &fh, a.offset, data, stable_of(a.stable))
    {
        Ok((written, committed, wcc)) => NfsRes::Ok(Write3ResOk {
            file_wcc: wcc_data_of(&wcc),
            count: written.min(n as u32),
            // RFC 1813 §3.3.7: committed must be at least what was asked.
            committed: stable_how_of(committed).max(a.stable),
            verf,
        }),
        Err(e) => NfsRes::Fail(nfsstat3_of(e), fail_wcc(&exp, &call, &fh)),
    };
    if let NfsRes::Ok(ok) = &res {
        ctx.moved(0, u64::from(ok.count));
    }
    // A stable write may owe the journal commit that makes it durable.
    owing(ctx, &call, res)
}

pub(super) fn commit(ctx: &CallCtx<'_>, a: Commit3Args) -> Result<Commit3Res, ProcError> {
    let (exp, fh, g) = resolve_or_fail!(ctx, a.file);
    let cred = g.cred;
    let call = fs_call(ctx, &cred);
    if g.read_only {
        // knfsd verifies COMMIT's handle with MAY_WRITE, so ROFS.
        return Ok(NfsRes::Fail(Nfsstat3::RoFs, fail_wcc(&exp, &call, &fh)));
    }
    let res = match exp.backend.commit(&call, &fh, a.offset, a.count) {
        // Read after the sync: a reset it caused (or that happened while
        // it ran) is in this reply. When the journal commit is owed, its
        // writeback may be too (waited for by the commit thread): a
        // failure of either answers NFS3ERR_IO instead.
        Ok(w) => NfsRes::Ok(Commit3ResOk {
            file_wcc: wcc_data_of(&w),
            verf: Verf3(ctx.server.write_verifier.get()),
        }),
        Err(e) => NfsRes::Fail(nfsstat3_of(e), fail_wcc(&exp, &call, &fh)),
    };
    Ok(owing(ctx, &call, res))
}
