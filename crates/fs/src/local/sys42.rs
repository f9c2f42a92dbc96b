//! The system calls of NFSv4.2's data operations (RFC 7862): lseek's
//! SEEK_DATA and SEEK_HOLE, fallocate, copy_file_range and the
//! FICLONERANGE ioctl. Thin wrappers: each takes a descriptor and plain
//! numbers and returns `io::Result`.

use std::io;
use std::os::fd::RawFd;

use super::sys::{cvt, err};

fn off(v: u64) -> io::Result<libc::off_t> {
    libc::off_t::try_from(v).map_err(|_| err(libc::EINVAL))
}

/// lseek(fd, offset, SEEK_DATA or SEEK_HOLE): the offset found, or None
/// where the kernel says ENXIO (no data at or after `offset`, or
/// `offset` at or past end of file).
pub fn seek(fd: RawFd, offset: u64, data: bool) -> io::Result<Option<u64>> {
    let whence = if data {
        libc::SEEK_DATA
    } else {
        libc::SEEK_HOLE
    };
    // SAFETY: lseek takes a descriptor and numbers; no memory is passed.
    let r = unsafe { libc::lseek(fd, off(offset)?, whence) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENXIO) => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some(r as u64))
}

/// fallocate(fd, mode, offset, len).
pub fn fallocate(fd: RawFd, mode: libc::c_int, offset: u64, len: u64) -> io::Result<()> {
    // SAFETY: fallocate takes a descriptor and numbers.
    cvt(unsafe { libc::fallocate(fd, mode, off(offset)?, off(len)?) })?;
    Ok(())
}

/// One copy_file_range(2) of up to `len` bytes from `src` at `src_off`
/// to `dst` at `dst_off` (the descriptors' own offsets untouched): the
/// bytes copied, 0 at the source's end of file.
pub fn copy_range(
    src: RawFd,
    src_off: u64,
    dst: RawFd,
    dst_off: u64,
    len: usize,
) -> io::Result<usize> {
    let mut so = off(src_off)?;
    let mut d_o = off(dst_off)?;
    loop {
        // SAFETY: the offsets are locals this call reads and updates;
        // the descriptors are the caller's, open for the call.
        let n = unsafe { libc::copy_file_range(src, &mut so, dst, &mut d_o, len, 0) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// FICLONERANGE: `len` bytes of `src` at `src_off` shared into `dst` at
/// `dst_off` (0: to the source's end of file). EOPNOTSUPP (or EXDEV,
/// EINVAL) where the filesystem cannot.
pub fn clone_range(src: RawFd, src_off: u64, dst: RawFd, dst_off: u64, len: u64) -> io::Result<()> {
    let arg = libc::file_clone_range {
        src_fd: i64::from(src),
        src_offset: src_off,
        src_length: len,
        dest_offset: dst_off,
    };
    // SAFETY: FICLONERANGE reads a struct file_clone_range, which `arg`
    // is (libc declares the kernel's layout), alive for the call.
    cvt(unsafe {
        libc::ioctl(
            dst,
            libc::FICLONERANGE,
            &arg as *const libc::file_clone_range,
        )
    })?;
    Ok(())
}

/// The filesystem's block size (statfs f_bsize): CLONE's granularity.
pub fn block_size(fd: RawFd) -> io::Result<u32> {
    // SAFETY: statfs is plain data; zeroes are a valid value.
    let mut v: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `v` is a statfs the call fills.
    cvt(unsafe { libc::fstatfs(fd, &mut v) })?;
    Ok(u32::try_from(v.f_bsize).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn seek_finds_data_and_holes_of_a_sparse_file() {
        let d = tempfile::tempdir().unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(d.path().join("s"))
            .unwrap();
        let fd = f.as_raw_fd();
        std::os::unix::fs::FileExt::write_at(&f, b"x", 1 << 20).unwrap();
        let size = (1 << 20) + 1;
        // Data starts at or before the byte written, a hole at the end.
        let data = seek(fd, 0, true).unwrap().unwrap();
        assert!(data <= 1 << 20);
        assert_eq!(seek(fd, 1 << 20, false).unwrap(), Some(size));
        assert_eq!(seek(fd, size, true).unwrap(), None);
        assert_eq!(seek(fd, size + 5, false).unwrap(), None);
        assert_eq!(
            copy_range(fd, 0, fd, 0, 1).unwrap_err().raw_os_error(),
            Some(libc::EINVAL),
            "overlapping ranges of one file"
        );
        assert!(block_size(fd).unwrap() >= 512);
    }
}
