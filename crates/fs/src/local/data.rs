//! File data: READ, WRITE, COMMIT, through the open-file cache
//! (`files.rs`): a cached call costs a statx, a permission check for the
//! caller and the read or write itself; no open, no close.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::Arc;

use super::files::{Access, OpenFile};
use super::{errno, sys, LocalFs, Obj, MAX_READ};
use crate::{Attr, Call, Fh, FsResult, Stable, Wcc};

impl LocalFs {
    /// The cached descriptor of a regular file for `access`, opened (as the
    /// server) on a miss. Permission is the caller's business: see
    /// `may_use_data`.
    pub(super) fn open_file(
        &self,
        call: &Call<'_>,
        o: &Obj<'_>,
        access: Access,
    ) -> FsResult<Arc<OpenFile>> {
        let key = o.st.key();
        if let Some(f) = self.files.get(key, access) {
            return Ok(f);
        }
        // On the event loop a miss opens for reading, or for an UNSTABLE
        // write when writes may run there too: a handoff would redo the
        // handle's open, which the loop could not cache at a full bound.
        if call.inline() && !(call.may_speculate() && (access == Access::Read || call.may_write()))
        {
            return Err(call.give_up());
        }
        // Under a write lease of ours (an NFSv4 write delegation), a copy
        // of its descriptor: an open would break it. Only the holder gets
        // here; everyone else's access recalls the delegation first.
        let fd = match self.leased_fd(key) {
            Some(fd) => fd?,
            None => {
                self.as_server()?;
                // Reopening a pinned inode almost never sleeps.
                super::speculating(call, || sys::reopen(o.raw(), access.flags()))?
            }
        };
        Ok(self
            .files
            .insert(key, access, fd, self.verifier.clone(), call.runs_on_loop()))
    }

    /// A regular file's object (attributes before the call, for wcc) and its
    /// descriptor for `access`, the caller's permission checked: EISDIR for
    /// a directory, EINVAL for anything else that is not a regular file.
    pub(super) fn open_regular(
        &self,
        call: &Call<'_>,
        fh: &Fh,
        access: Access,
    ) -> FsResult<(Obj<'_>, Arc<OpenFile>)> {
        let o = self.resolve(call, fh)?;
        if o.st.is_dir() {
            return Err(errno(libc::EISDIR));
        }
        if !o.st.is_reg() {
            return Err(errno(libc::EINVAL));
        }
        let f = self.open_file(call, &o, access)?;
        self.may_use_data(call.cred, &o, access)?;
        Ok((o, f))
    }
}

pub(super) fn read(
    fs: &LocalFs,
    call: &Call<'_>,
    fh: &Fh,
    offset: u64,
    count: u32,
    buf: &mut Vec<u8>,
) -> FsResult<(bool, Attr)> {
    let (o, f) = fs.open_regular(call, fh, Access::Read)?;
    let Some(want) = read_span(&o, offset, count) else {
        return Ok((true, fs.attr(&o.st)));
    };
    let n = if call.inline() {
        // From the page cache only: anything else waits for the disk.
        match sys::pread_nowait(f.fd.as_raw_fd(), offset, want, buf) {
            Ok(n) if n == want || offset.saturating_add(n as u64) >= o.st.size => n,
            _ => return Err(call.give_up()),
        }
    } else {
        sys::pread_full(f.fd.as_raw_fd(), offset, want, buf)?
    };
    read_end(fs, &o, f.fd.as_raw_fd(), offset, n)
}

/// Bytes a READ of `count` at `offset` asks of the file, or None when it
/// starts at or past end of file (RFC 1813 §3.3.6: no data and eof, for
/// any offset; pread would say EINVAL above i64::MAX).
fn read_span(o: &Obj<'_>, offset: u64, count: u32) -> Option<usize> {
    if offset >= o.st.size {
        return None;
    }
    // The kernel refuses offset + count beyond i64::MAX (EINVAL).
    let room = (i64::MAX as u64).saturating_sub(offset);
    Some(u64::from(count.min(MAX_READ)).min(room) as usize)
}

/// Eof and attributes after `n` bytes read at `offset`: the size seen
/// before reading decides eof; a file that grew meanwhile is stat'ed again
/// so the attributes cover the data sent.
fn read_end(
    fs: &LocalFs,
    o: &Obj<'_>,
    fd: std::os::fd::RawFd,
    offset: u64,
    n: usize,
) -> FsResult<(bool, Attr)> {
    let end = offset.saturating_add(n as u64);
    let st = if end > o.st.size {
        sys::fstat(fd)?
    } else {
        o.st
    };
    Ok((end >= st.size, fs.attr(&st)))
}

/// READ by reference: as `read`, but the data goes from the page cache
/// into a pipe (splice), not into our memory.
pub(super) fn read_to_pipe(
    fs: &LocalFs,
    call: &Call<'_>,
    fh: &Fh,
    offset: u64,
    count: u32,
    pipe: BorrowedFd<'_>,
) -> FsResult<(u32, bool, Attr)> {
    let (o, f) = fs.open_regular(call, fh, Access::Read)?;
    let Some(want) = read_span(&o, offset, count) else {
        return Ok((0, true, fs.attr(&o.st)));
    };
    let fd = f.fd.as_raw_fd();
    // On the event loop only pages already cached: splice itself would
    // wait for the disk (SPLICE_F_NONBLOCK is about the pipe).
    if call.inline() && !sys::all_cached(fd, offset, (want as u64).min(o.st.size - offset)) {
        return Err(call.give_up());
    }
    let n = sys::splice_to_pipe(fd, offset, pipe.as_raw_fd(), want)?;
    let (eof, attr) = read_end(fs, &o, fd, offset, n)?;
    Ok((n as u32, eof, attr))
}

pub(super) fn write(
    fs: &LocalFs,
    call: &Call<'_>,
    fh: &Fh,
    offset: u64,
    data: &[u8],
    stable: Stable,
) -> FsResult<(u32, Stable, Wcc)> {
    if u32::try_from(data.len()).is_err() {
        return Err(errno(libc::EINVAL));
    }
    // On the event loop (`crate::inline`): only an UNSTABLE write, decided
    // before anything changes (`open_file` opens a missing writer there
    // only when misses may run too); its pwrite is watched like an open.
    if call.inline() && !(stable == Stable::Unstable && call.may_write()) {
        return Err(call.give_up());
    }
    let (o, f) = fs.open_regular(call, fh, Access::Write)?;
    let fd = f.fd.as_raw_fd();
    let n = match super::speculating(call, || sys::pwrite_full(fd, offset, data)) {
        Ok(n) => n,
        Err(e) => {
            f.write_failed(&e);
            fs.files.release(f, call.runs_on_loop());
            return Err(e.into());
        }
    };
    f.wrote(n as u64);
    if stable == Stable::Unstable {
        fs.files.behind().wrote(call, &f, n as u64);
    }
    // A stable write syncs everything written through this descriptor so
    // far (earlier UNSTABLE writes count as committed too), sharing the
    // sync with concurrent stable writes and COMMITs of the file.
    match stable {
        Stable::Unstable => {}
        Stable::DataSync => fs.sync_data(call, &o, &f, false)?,
        Stable::FileSync => fs.sync_data(call, &o, &f, true)?,
    }
    let wcc = fs.wcc(&o.st, fd);
    fs.files.release(f, call.runs_on_loop());
    Ok((n as u32, stable, wcc))
}

pub(super) fn commit(
    fs: &LocalFs,
    call: &Call<'_>,
    fh: &Fh,
    _offset: u64,
    _count: u32,
) -> FsResult<Wcc> {
    let o = fs.resolve(call, fh)?;
    if o.st.is_dir() {
        fs.sync_object(call, &o)?;
        return Ok(fs.wcc(&o.st, o.raw()));
    }
    if !o.st.is_reg() {
        return Err(errno(libc::EINVAL));
    }
    // The whole file is flushed (allowed by RFC 1813 §3.3.21), through the
    // descriptor that wrote it when it is still open (a sync error it saw
    // resets the verifier), else any descriptor of the file.
    let f = match fs.files.get(o.st.key(), Access::Write) {
        Some(f) => f,
        None => fs.open_file(call, &o, Access::Read)?,
    };
    // Writers closed before their data was committed (this file's among
    // them, perhaps) owe a flush whose error must show in this reply: run
    // now if still owed; if a flush took it and still runs, the reply
    // waits for that flush too (its syncfs may hold the only record of an
    // error whose inode was evicted meanwhile: flusher.rs).
    let running = fs.files.flusher().settle_or_running().map_err(errno)?;
    fs.sync_data_then(call, &o, &f, true, running)?;
    Ok(fs.wcc(&o.st, f.fd.as_raw_fd()))
}
