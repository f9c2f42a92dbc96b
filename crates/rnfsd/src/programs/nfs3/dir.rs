//! Lookups and listings: LOOKUP, READLINK, READDIR and READDIRPLUS
//! (RFC 1813 §3.3.3, §3.3.5, §3.3.16, §3.3.17).

use rnfsd_fs::DirPage;
use rnfsd_proto::nfs3::*;
use rnfsd_xdr::pad4;

use super::common::{check_name, fs_call, post_attr, resolve_or_fail};
use super::convert::*;
use super::{max_io, ST};
use crate::limits::MAX_DIR_BATCH;
use crate::programs::CallCtx;
use rnfsd_rpc::ProcError;

pub(super) fn lookup(ctx: &CallCtx<'_>, a: Lookup3Args) -> Result<Lookup3Res, ProcError> {
    let (exp, dir, g) = resolve_or_fail!(ctx, a.what.dir);
    let cred = g.cred;
    let call = fs_call(ctx, &cred);
    if let Err(s) = check_name(&a.what.name) {
        return Ok(NfsRes::Fail(s, post_attr(&exp, &call, &dir)));
    }
    Ok(match exp.backend.lookup(&call, &dir, &a.what.name) {
        Ok((fh, attr, dir_attr)) => NfsRes::Ok(Lookup3ResOk {
            object: fh3_of(fh),
            obj_attributes: Some(fattr3_of(&attr)),
            dir_attributes: dir_attr.as_ref().map(fattr3_of),
        }),
        Err(e) => NfsRes::Fail(nfsstat3_of(e), post_attr(&exp, &call, &dir)),
    })
}

pub(super) fn readlink(ctx: &CallCtx<'_>, a: ReadLink3Args) -> Result<ReadLink3Res, ProcError> {
    let (exp, fh, g) = resolve_or_fail!(ctx, a.symlink);
    let cred = g.cred;
    let call = fs_call(ctx, &cred);
    Ok(match exp.backend.readlink(&call, &fh) {
        // A target longer than nfspath3's bound would not decode at the client.
        Ok((data, attr)) if data.len() > MAX_PATH => {
            NfsRes::Fail(Nfsstat3::NameTooLong, Some(fattr3_of(&attr)))
        }
        Ok((data, attr)) => NfsRes::Ok(ReadLink3ResOk {
            symlink_attributes: Some(fattr3_of(&attr)),
            data,
        }),
        Err(e) => NfsRes::Fail(nfsstat3_of(e), post_attr(&exp, &call, &fh)),
    })
}

/// Bytes of a READDIR/READDIRPLUS reply that are not entries: status,
/// dir_attributes, cookieverf, the final value_follows and eof.
pub(super) fn dir_reply_fixed(with_attr: bool) -> usize {
    ST + 4 + if with_attr { FATTR3_LEN } else { 0 } + 8 + 4 + 4
}

/// How many entries to ask a backend for: as many as could fit if every
/// name were a single byte (`min_entry` bytes each), so a reply is never
/// short because we asked for too few, bounded by `MAX_DIR_BATCH`.
pub(super) fn dir_batch(budget: usize, min_entry: usize) -> usize {
    (budget / min_entry.max(1)).clamp(1, MAX_DIR_BATCH)
}

pub(super) fn readdir(ctx: &CallCtx<'_>, a: ReadDir3Args) -> Result<ReadDir3Res, ProcError> {
    let (exp, dir, g) = resolve_or_fail!(ctx, a.dir);
    let cred = g.cred;
    let call = fs_call(ctx, &cred);
    // RFC 1813 §3.3.16: count bounds the whole READDIR3resok; we count the
    // status word too.
    let count = a.count.min(max_io(ctx)) as usize;
    let budget = count.saturating_sub(dir_reply_fixed(true));
    let max_entries = dir_batch(budget, entry3_len(1));
    let page = match exp
        .backend
        .readdir(&call, &dir, a.cookie, a.cookieverf.0, max_entries, false)
    {
        Ok(p) => p,
        Err(e) => return Ok(NfsRes::Fail(nfsstat3_of(e), post_attr(&exp, &call, &dir))),
    };
    let dir_attributes = page.dir_attr.as_ref().map(fattr3_of);
    let mut used = dir_reply_fixed(dir_attributes.is_some());
    if used > count {
        return Ok(NfsRes::Fail(Nfsstat3::TooSmall, dir_attributes));
    }
    let total = page.entries.len();
    let mut entries = Vec::with_capacity(total.min(max_entries));
    for ent in page.entries {
        let len = entry3_len(ent.name.len());
        if used + len > count || ent.name.len() > MAX_NAME {
            break;
        }
        used += len;
        entries.push(Entry3 {
            fileid: ent.fileid,
            name: ent.name,
            cookie: ent.cookie,
        });
    }
    if entries.is_empty() && total > 0 {
        return Ok(NfsRes::Fail(Nfsstat3::TooSmall, dir_attributes));
    }
    let eof = page.eof && entries.len() == total;
    Ok(NfsRes::Ok(ReadDir3ResOk {
        dir_attributes,
        cookieverf: Verf3(page.verifier),
        entries,
        eof,
    }))
}

pub(super) fn readdirplus(
    ctx: &CallCtx<'_>,
    a: ReadDirPlus3Args,
) -> Result<ReadDirPlus3Res, ProcError> {
    let (exp, dir, g) = resolve_or_fail!(ctx, a.dir);
    let cred = g.cred;
    let call = fs_call(ctx, &cred);
    let maxcount = a.maxcount.min(max_io(ctx)) as usize;
    let dircount = a.dircount as usize;
    // Estimate with attributes and a handle as long as the directory's
    // present, which is what a backend normally gives.
    let fh_len = 4 + pad4(dir.0.len());
    let budget = maxcount.saturating_sub(dir_reply_fixed(true));
    let max_entries = dir_batch(budget, entry3_len(1) + 4 + FATTR3_LEN + 4 + fh_len)
        .min(dir_batch(dircount, 8 + 4 + 4 + 8));
    let page: DirPage =
        match exp
            .backend
            .readdir(&call, &dir, a.cookie, a.cookieverf.0, max_entries, true)
        {
            Ok(p) => p,
            Err(e) => return Ok(NfsRes::Fail(nfsstat3_of(e), post_attr(&exp, &call, &dir))),
        };
    let dir_attributes = page.dir_attr.as_ref().map(fattr3_of);
    let mut used = dir_reply_fixed(dir_attributes.is_some());
    if used > maxcount {
        return Ok(NfsRes::Fail(Nfsstat3::TooSmall, dir_attributes));
    }
    let mut dir_used = 0usize;
    let total = page.entries.len();
    let mut entries = Vec::with_capacity(total.min(max_entries));
    for ent in page.entries {
        if ent.name.len() > MAX_NAME {
            break;
        }
        let (name_attributes, name_handle) = match ent.plus {
            Some((fh, attr)) => (Some(fattr3_of(&attr)), Some(fh3_of(fh))),
            None => (None, None),
        };
        let e = EntryPlus3 {
            fileid: ent.fileid,
            name: ent.name,
            cookie: ent.cookie,
            name_attributes,
            name_handle,
        };
        let len = e.xdr_len();
        // RFC 1813 §3.3.17: dircount bounds fileid, name and cookie only.
        // It is a hint; the first entry always goes if maxcount allows.
        if used + len > maxcount || (!entries.is_empty() && dir_used + e.dir_len() > dircount) {
            break;
        }
        used += len;
        dir_used += e.dir_len();
        entries.push(e);
    }
    if entries.is_empty() && total > 0 {
        return Ok(NfsRes::Fail(Nfsstat3::TooSmall, dir_attributes));
    }
    let eof = page.eof && entries.len() == total;
    Ok(NfsRes::Ok(ReadDirPlus3ResOk {
        dir_attributes,
        cookieverf: Verf3(page.verifier),
        entries,
        eof,
    }))
}
