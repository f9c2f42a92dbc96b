//! READ, WRITE and COMMIT (RFC 1813 §3.3.6, §3.3.7, §3.3.21): the data
//! path, with READ and WRITE hand-decoded so their data is never copied.

use rnfsd_proto::nfs3::*;
use rnfsd_xdr::{pad4, Dec, Enc, Xdr};

use super::common::{fail_wcc, post_attr, resolve, resolve_or_fail};
use super::convert::*;
use super::{max_io, PATTR, ST};
use crate::rpc::{CallCtx, ProcError};

/// READ3resok up to its data: status, post_op_attr (present), count, eof
/// and the opaque's length. Reserved before the read and filled after it.
const READ_HEAD: usize = ST + PATTR + 4 + 4 + 4;

pub(super) fn read_run(
    ctx: &CallCtx<'_>,
    dec: &mut Dec<'_>,
    enc: &mut Enc,
) -> Result<(), ProcError> {
    let a = Read3Args::decode(dec).map_err(|_| ProcError::GarbageArgs)?;
    read_into(ctx, a, enc);
    Ok(())
}

/// The data is read straight into the reply, behind a reserved header (no
/// user-space copy of READ data); the reply grows to exactly what the
/// request's count needs.
pub(super) fn read_into(ctx: &CallCtx<'_>, a: Read3Args, enc: &mut Enc) {
    let (exp, fh, g) = match resolve(ctx, a.file) {
        Ok(v) => v,
        Err(s) => return Read3Res::Fail(s, None).encode(enc),
    };
    let cred = g.cred;
    let count = a.count.min(max_io(ctx)) as usize;
    let start = enc.len();
    let buf = enc.buf_mut();
    buf.resize(start + READ_HEAD, 0);
    buf.reserve(count + 3);
    let r = exp.backend.read(&cred, &fh, a.offset, count as u32, buf);
    match r {
        Ok((eof, attr)) => {
            let got = buf.len() - start - READ_HEAD;
            // Never send more than asked, whatever the backend did.
            let n = got.min(count);
            buf.truncate(start + READ_HEAD + n);
            buf.resize(start + READ_HEAD + pad4(n), 0);
            let mut h = Enc::with_capacity(READ_HEAD);
            h.u32(Nfsstat3::Ok as u32);
            Some(fattr3_of(&attr)).encode(&mut h);
            h.u32(n as u32);
            h.bool(eof && n == got);
            h.u32(n as u32);
            buf[start..start + READ_HEAD].copy_from_slice(h.as_slice());
        }
        Err(e) => {
            buf.truncate(start);
            Read3Res::Fail(nfsstat3_of(e), post_attr(exp, &cred, &fh)).encode(enc);
        }
    }
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
    if g.read_only {
        return NfsRes::Fail(Nfsstat3::RoFs, fail_wcc(exp, &cred, &fh));
    }
    // RFC 1813 §3.3.7: count is the number of bytes in data.
    if a.count as usize != a.data.len() {
        return NfsRes::Fail(Nfsstat3::Inval, fail_wcc(exp, &cred, &fh));
    }
    // Past our advertised wtmax we write a prefix; the reply's count tells
    // the client to send the rest (knfsd truncates the same way).
    let n = a.data.len().min(max_io(ctx) as usize);
    let data = &a.data[..n];
    // Read before writing: a verifier reset while this write is under way
    // (a storage error that may have lost it) then shows at COMMIT.
    let verf = Verf3(ctx.server.write_verifier.get());
    match exp
        .backend
        .write(&cred, &fh, a.offset, data, stable_of(a.stable))
    {
        Ok((written, committed, wcc)) => NfsRes::Ok(Write3ResOk {
            file_wcc: wcc_data_of(&wcc),
            count: written.min(n as u32),
            // RFC 1813 §3.3.7: committed must be at least what was asked.
            committed: stable_how_of(committed).max(a.stable),
            verf,
        }),
        Err(e) => NfsRes::Fail(nfsstat3_of(e), fail_wcc(exp, &cred, &fh)),
    }
}

pub(super) fn commit(ctx: &CallCtx<'_>, a: Commit3Args) -> Result<Commit3Res, ProcError> {
    let (exp, fh, g) = resolve_or_fail!(ctx, a.file);
    let cred = g.cred;
    if g.read_only {
        // knfsd verifies COMMIT's handle with MAY_WRITE, so ROFS.
        return Ok(NfsRes::Fail(Nfsstat3::RoFs, fail_wcc(exp, &cred, &fh)));
    }
    Ok(match exp.backend.commit(&cred, &fh, a.offset, a.count) {
        // Read after the sync: a reset it caused (or that happened while
        // it ran) is in this reply.
        Ok(w) => NfsRes::Ok(Commit3ResOk {
            file_wcc: wcc_data_of(&w),
            verf: Verf3(ctx.server.write_verifier.get()),
        }),
        Err(e) => NfsRes::Fail(nfsstat3_of(e), fail_wcc(exp, &cred, &fh)),
    })
}
