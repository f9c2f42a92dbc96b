//! NFSv4.2's data operations on local files (RFC 7862): SEEK and the
//! data/hole layout READ_PLUS sends (lseek SEEK_DATA / SEEK_HOLE),
//! ALLOCATE and DEALLOCATE (fallocate), COPY (copy_file_range, which
//! shares blocks where the filesystem can) and CLONE (FICLONERANGE).
//! None runs on an event loop: each may wait for the disk.

use std::os::fd::{AsRawFd, RawFd};

use super::files::Access;
use super::sys;
use super::sys42;
use super::{errno, io_errno, LocalFs, Obj};
use crate::{Attr, Call, Content, Extent, Fh, FsError, FsResult, SetTime, Stable, Wcc};

/// Bytes one copy_file_range is asked for: a copy of more is several,
/// each short enough that the kernel's own loop ends soon.
const COPY_CHUNK: u64 = 8 << 20;
/// The buffer of a copy by read and write (where copy_file_range cannot:
/// another filesystem, a kernel without it).
const COPY_BUF: usize = 1 << 20;

fn not_on_loop(call: &Call<'_>) -> FsResult<()> {
    if call.inline() {
        return Err(call.give_up());
    }
    Ok(())
}

pub(super) fn seek(
    fs: &LocalFs,
    call: &Call<'_>,
    fh: &Fh,
    offset: u64,
    what: Content,
) -> FsResult<(Option<u64>, Attr)> {
    not_on_loop(call)?;
    let (o, f) = fs.open_regular(call, fh, Access::Read)?;
    if offset >= o.st.size {
        return Err(errno(libc::ENXIO));
    }
    let at = sys42::seek(f.fd.as_raw_fd(), offset, what == Content::Data)?;
    Ok((at, fs.attr(&o.st)))
}

pub(super) fn layout(
    fs: &LocalFs,
    call: &Call<'_>,
    fh: &Fh,
    offset: u64,
    len: u64,
    max: usize,
) -> FsResult<(Vec<Extent>, Attr)> {
    not_on_loop(call)?;
    let (o, f) = fs.open_regular(call, fh, Access::Read)?;
    let fd = f.fd.as_raw_fd();
    let end = offset.saturating_add(len).min(o.st.size);
    let mut v = Vec::new();
    let mut at = offset;
    while at < end && v.len() < max {
        let data = sys42::seek(fd, at, true)?.map_or(end, |d| d.min(end));
        if data > at {
            v.push(Extent {
                offset: at,
                len: data - at,
                data: false,
            });
            at = data;
            continue;
        }
        // `at` holds data: it runs to the next hole (one at end of file
        // at the latest).
        let hole = sys42::seek(fd, at, false)?.map_or(end, |h| h.min(end));
        let hole = if hole > at { hole } else { end };
        v.push(Extent {
            offset: at,
            len: hole - at,
            data: true,
        });
        at = hole;
    }
    Ok((v, fs.attr(&o.st)))
}

/// After a change the filesystem may not have timed (fallocate does not
/// everywhere): the change attribute (ctime) must move, so the times are
/// set to now when ctime did not. The change is made already: a failure
/// here is logged, not the call's.
fn moved(o: &Obj<'_>, fd: RawFd) {
    let r = sys::fstat(fd).and_then(|st| match st.ctime == o.st.ctime {
        true => sys::set_times(fd, &SetTime::DontChange, &SetTime::ServerTime),
        false => Ok(()),
    });
    if let Err(e) = r {
        tracing::debug!(error = %e, "could not move the change attribute");
    }
}

/// fallocate with `mode` on the regular file `fh`, as a write would.
fn space(
    fs: &LocalFs,
    call: &Call<'_>,
    fh: &Fh,
    offset: u64,
    len: u64,
    mode: libc::c_int,
) -> FsResult<Wcc> {
    not_on_loop(call)?;
    let (o, f) = fs.open_regular(call, fh, Access::Write)?;
    let fd = f.fd.as_raw_fd();
    if let Err(e) = sys42::fallocate(fd, mode, offset, len) {
        f.write_failed(&e);
        return Err(e.into());
    }
    // What COMMIT must sync (a punch changed data).
    f.wrote(0);
    moved(&o, fd);
    // On a `sync` export durable before the reply: a punch whose edges are
    // not block-aligned zeroes their partial blocks in the page cache,
    // which a journal commit alone does not write (XFS, data=writeback).
    if fs.opts.sync {
        fs.sync_data(call, &o, &f, true)?;
    }
    Ok(fs.wcc(&o.st, fd))
}

pub(super) fn allocate(
    fs: &LocalFs,
    call: &Call<'_>,
    fh: &Fh,
    offset: u64,
    len: u64,
) -> FsResult<Wcc> {
    space(fs, call, fh, offset, len, 0)
}

pub(super) fn deallocate(
    fs: &LocalFs,
    call: &Call<'_>,
    fh: &Fh,
    offset: u64,
    len: u64,
) -> FsResult<Wcc> {
    space(
        fs,
        call,
        fh,
        offset,
        len,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
    )
}

/// Up to `len` bytes from `src` to `dst` by read and write.
fn copy_by_hand(src: RawFd, src_off: u64, dst: RawFd, dst_off: u64, len: u64) -> FsResult<u64> {
    let mut buf = Vec::with_capacity(COPY_BUF);
    let mut done = 0u64;
    while done < len {
        buf.clear();
        let want = (len - done).min(COPY_BUF as u64) as usize;
        let n = sys::pread_full(src, src_off + done, want, &mut buf)?;
        if n == 0 {
            break;
        }
        sys::pwrite_full(dst, dst_off + done, &buf[..n])?;
        done += n as u64;
    }
    Ok(done)
}

#[allow(clippy::too_many_arguments)]
pub(super) fn copy_range(
    fs: &LocalFs,
    call: &Call<'_>,
    src: &Fh,
    src_off: u64,
    dst: &Fh,
    dst_off: u64,
    len: u64,
    stable: Stable,
) -> FsResult<(u64, Stable, Wcc)> {
    not_on_loop(call)?;
    let (_, sf) = fs.open_regular(call, src, Access::Read)?;
    let (d, df) = fs.open_regular(call, dst, Access::Write)?;
    let (sfd, dfd) = (sf.fd.as_raw_fd(), df.fd.as_raw_fd());
    let mut done = 0u64;
    while done < len {
        let want = (len - done).min(COPY_CHUNK) as usize;
        match sys42::copy_range(sfd, src_off + done, dfd, dst_off + done, want) {
            Ok(0) => break,
            Ok(n) => done += n as u64,
            // Another filesystem, or no copy_file_range: by hand.
            Err(e) if matches!(io_errno(&e), libc::EXDEV | libc::EOPNOTSUPP | libc::ENOSYS) => {
                let r = copy_by_hand(sfd, src_off + done, dfd, dst_off + done, len - done);
                match r {
                    Ok(n) => done += n,
                    // A failed write resets the write verifier, as the
                    // copy_file_range arms do: COMMIT must not vouch for it.
                    Err(e) => {
                        if let FsError::Errno(n) = e {
                            df.write_failed(&std::io::Error::from_raw_os_error(n));
                        }
                        if done == 0 {
                            return Err(e);
                        }
                        tracing::debug!(error = %e, "copy ended early");
                    }
                }
                break;
            }
            // What was copied stays copied: a short copy.
            Err(e) if done > 0 => {
                df.write_failed(&e);
                break;
            }
            Err(e) => {
                df.write_failed(&e);
                return Err(e.into());
            }
        }
    }
    df.wrote(done);
    if stable == Stable::Unstable {
        fs.files.behind().wrote(call, &df, done);
    }
    if done > 0 {
        moved(&d, dfd);
    }
    match stable {
        Stable::Unstable => {}
        Stable::DataSync => fs.sync_data(call, &d, &df, false)?,
        Stable::FileSync => fs.sync_data(call, &d, &df, true)?,
    }
    Ok((done, stable, fs.wcc(&d.st, dfd)))
}

pub(super) fn clone_range(
    fs: &LocalFs,
    call: &Call<'_>,
    src: &Fh,
    src_off: u64,
    dst: &Fh,
    dst_off: u64,
    len: u64,
) -> FsResult<Wcc> {
    not_on_loop(call)?;
    let (_, sf) = fs.open_regular(call, src, Access::Read)?;
    let (d, df) = fs.open_regular(call, dst, Access::Write)?;
    let dfd = df.fd.as_raw_fd();
    if let Err(e) = sys42::clone_range(sf.fd.as_raw_fd(), src_off, dfd, dst_off, len) {
        return Err(match io_errno(&e) {
            libc::EOPNOTSUPP | libc::ENOTTY | libc::EXDEV | libc::ENOSYS => FsError::NotSupported,
            n => errno(n),
        });
    }
    df.wrote(len.max(1));
    moved(&d, dfd);
    // On a `sync` export the shared blocks are durable before the reply.
    if fs.opts.sync {
        fs.sync_data(call, &d, &df, true)?;
    }
    Ok(fs.wcc(&d.st, dfd))
}

pub(super) fn clone_blksize(fs: &LocalFs, call: &Call<'_>, fh: &Fh) -> FsResult<u32> {
    let o = fs.resolve(call, fh)?;
    Ok(sys42::block_size(o.raw())?)
}
