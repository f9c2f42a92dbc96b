//! Thin wrappers over the `*at` syscalls the local backend uses. Every open
//! adds O_CLOEXEC; every stat is statx with AT_SYMLINK_NOFOLLOW.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use crate::{FileType, Time};

/// Identity of an object: (st_dev, st_ino).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    pub dev: u64,
    pub ino: u64,
}

/// The parts of statx the backend uses.
#[derive(Debug, Clone, Copy)]
pub struct Stat {
    /// Full st_mode including the type bits.
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub blocks: u64,
    pub rdev: (u32, u32),
    pub dev: u64,
    pub ino: u64,
    pub mnt_id: u64,
    pub atime: Time,
    pub mtime: Time,
    pub ctime: Time,
    /// Birth time, where the filesystem keeps one (ext4, XFS, btrfs; and
    /// overlayfs passes its layer's through).
    pub btime: Option<Time>,
}

impl Stat {
    pub fn key(&self) -> Key {
        Key {
            dev: self.dev,
            ino: self.ino,
        }
    }
    pub fn fmt(&self) -> u32 {
        self.mode & libc::S_IFMT
    }
    pub fn is_dir(&self) -> bool {
        self.fmt() == libc::S_IFDIR
    }
    pub fn is_reg(&self) -> bool {
        self.fmt() == libc::S_IFREG
    }
    pub fn is_lnk(&self) -> bool {
        self.fmt() == libc::S_IFLNK
    }
    pub fn ftype(&self) -> FileType {
        match self.fmt() {
            libc::S_IFDIR => FileType::Directory,
            libc::S_IFBLK => FileType::BlockDev,
            libc::S_IFCHR => FileType::CharDev,
            libc::S_IFLNK => FileType::Symlink,
            libc::S_IFSOCK => FileType::Socket,
            libc::S_IFIFO => FileType::Fifo,
            _ => FileType::Regular,
        }
    }
}

pub fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub fn cvt_long(r: libc::c_long) -> io::Result<libc::c_long> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub fn err(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

/// A C string from bytes the caller already checked; EINVAL on an inner NUL.
pub fn cstr(b: &[u8]) -> io::Result<CString> {
    CString::new(b).map_err(|_| err(libc::EINVAL))
}

pub const EMPTY: &CStr = c"";
pub const DOT: &CStr = c".";
pub const DOTDOT: &CStr = c"..";

fn ts(sec: i64, nsec: u32) -> Time {
    Time { sec, nsec }
}

pub fn statx_at(dir: RawFd, name: &CStr, flags: libc::c_int) -> io::Result<Stat> {
    // SAFETY: zeroed statx is a valid all-integers struct.
    let mut sx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: name is a valid C string and sx a valid out-pointer.
    cvt(unsafe {
        libc::statx(
            dir,
            name.as_ptr(),
            flags | libc::AT_SYMLINK_NOFOLLOW | libc::AT_STATX_SYNC_AS_STAT,
            libc::STATX_BASIC_STATS | libc::STATX_MNT_ID | libc::STATX_BTIME,
            &mut sx,
        )
    })?;
    Ok(Stat {
        mode: u32::from(sx.stx_mode),
        nlink: sx.stx_nlink,
        uid: sx.stx_uid,
        gid: sx.stx_gid,
        size: sx.stx_size,
        blocks: sx.stx_blocks,
        rdev: (sx.stx_rdev_major, sx.stx_rdev_minor),
        dev: (u64::from(sx.stx_dev_major) << 32) | u64::from(sx.stx_dev_minor),
        ino: sx.stx_ino,
        mnt_id: sx.stx_mnt_id,
        atime: ts(sx.stx_atime.tv_sec, sx.stx_atime.tv_nsec),
        mtime: ts(sx.stx_mtime.tv_sec, sx.stx_mtime.tv_nsec),
        ctime: ts(sx.stx_ctime.tv_sec, sx.stx_ctime.tv_nsec),
        btime: (sx.stx_mask & libc::STATX_BTIME != 0)
            .then(|| ts(sx.stx_btime.tv_sec, sx.stx_btime.tv_nsec)),
    })
}

/// Stat of an fd (O_PATH fds included).
pub fn fstat(fd: RawFd) -> io::Result<Stat> {
    statx_at(fd, EMPTY, libc::AT_EMPTY_PATH)
}

pub fn openat(dir: RawFd, name: &CStr, flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
    // SAFETY: name is a valid C string; the returned fd is owned by us.
    let fd = cvt(unsafe { libc::openat(dir, name.as_ptr(), flags | libc::O_CLOEXEC, mode) })?;
    // SAFETY: fd was just returned by openat and is not owned elsewhere.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An O_PATH handle on `name` in `dir`, never following a final symlink.
pub fn open_path(dir: RawFd, name: &CStr) -> io::Result<OwnedFd> {
    openat(dir, name, libc::O_PATH | libc::O_NOFOLLOW, 0)
}

/// Opens the object an (O_PATH) fd refers to with real access flags, through
/// its /proc magic link. The permission check is made with the thread's
/// current filesystem credentials. Callers only do this for regular files
/// and directories (never devices or symlinks).
pub fn reopen(fd: RawFd, flags: libc::c_int) -> io::Result<OwnedFd> {
    let link = ProcFd::new(fd);
    openat(link.dir, link.name(), flags | libc::O_NOCTTY, 0)
}

/// The magic link /proc/self/fd/N of an fd, as (dirfd, name) for an `*at`
/// call: "N" in the held /proc/self/fd directory when there is one (one
/// lookup instead of walking four components, one of them the `self`
/// symlink: a readlink by that walk was 12 % of the server's CPU on
/// GETATTRs of uncached handles), else the whole path. No allocation.
pub struct ProcFd {
    pub dir: RawFd,
    buf: [u8; 32],
    len: usize,
}

impl ProcFd {
    pub fn new(fd: RawFd) -> ProcFd {
        match proc_fd_dir() {
            Some(d) => ProcFd::with(d, b"", fd),
            None => ProcFd::full(fd),
        }
    }

    /// The whole path, for calls that take no directory (the xattr ones).
    pub fn full(fd: RawFd) -> ProcFd {
        ProcFd::with(libc::AT_FDCWD, b"/proc/self/fd/", fd)
    }

    fn with(dir: RawFd, prefix: &[u8], fd: RawFd) -> ProcFd {
        let mut buf = [0u8; 32];
        buf[..prefix.len()].copy_from_slice(prefix);
        let mut digits = [0u8; 10];
        let mut n = fd.unsigned_abs();
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let d = &digits[i..];
        buf[prefix.len()..prefix.len() + d.len()].copy_from_slice(d);
        // buf[len] stays 0: the terminating NUL (14 + 10 + 1 <= 32).
        ProcFd {
            dir,
            buf,
            len: prefix.len() + d.len(),
        }
    }

    pub fn name(&self) -> &CStr {
        CStr::from_bytes_with_nul(&self.buf[..=self.len]).unwrap_or(c"")
    }
}

/// getxattr(2) of the object an (O_PATH) fd refers to, through its /proc
/// magic link (O_PATH descriptors have no fgetxattr): the value's length
/// (with an empty `buf`, the length it has), ERANGE if `buf` is too
/// small. Checked with the thread's filesystem credentials. Callers only
/// do this for regular files and directories.
pub fn getxattr_fd(fd: RawFd, name: &CStr, buf: &mut [u8]) -> io::Result<usize> {
    let p = ProcFd::full(fd);
    // SAFETY: both strings are NUL-terminated; `buf` is valid for writes
    // of `buf.len()` bytes.
    let r = unsafe {
        libc::getxattr(
            p.name().as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    usize::try_from(r).map_err(|_| io::Error::last_os_error())
}

/// setxattr(2), as `getxattr_fd`; `flags` 0, XATTR_CREATE or
/// XATTR_REPLACE.
pub fn setxattr_fd(fd: RawFd, name: &CStr, value: &[u8], flags: libc::c_int) -> io::Result<()> {
    let p = ProcFd::full(fd);
    // SAFETY: both strings are NUL-terminated; `value` is valid for reads
    // of `value.len()` bytes.
    let r = unsafe {
        libc::setxattr(
            p.name().as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            flags,
        )
    };
    match r {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// listxattr(2), as `getxattr_fd`: the bytes of NUL-terminated names
/// written to `buf`, ERANGE if it is too small.
pub fn listxattr_fd(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    let p = ProcFd::full(fd);
    // SAFETY: the path is NUL-terminated; `buf` is valid for writes of
    // `buf.len()` bytes.
    let r = unsafe { libc::listxattr(p.name().as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    usize::try_from(r).map_err(|_| io::Error::last_os_error())
}

/// removexattr(2), as `getxattr_fd`.
pub fn removexattr_fd(fd: RawFd, name: &CStr) -> io::Result<()> {
    let p = ProcFd::full(fd);
    // SAFETY: both strings are NUL-terminated.
    let r = unsafe { libc::removexattr(p.name().as_ptr(), name.as_ptr()) };
    match r {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// /proc/self/fd of this process, opened once (O_PATH). It names the fd
/// table of the process that opened it, so a child made by fork(3) (rnfsd
/// never forks; a program using this crate might) goes back to the path:
/// a flag set by a fork handler, so a call costs one atomic load, not a
/// getpid.
fn proc_fd_dir() -> Option<RawFd> {
    static DIR: OnceLock<Option<OwnedFd>> = OnceLock::new();
    static FORKED: AtomicBool = AtomicBool::new(false);
    extern "C" fn forked() {
        FORKED.store(true, Ordering::Relaxed);
    }
    let held = DIR.get_or_init(|| {
        // Registered before the open, so no fork can come between the two.
        // SAFETY: the child handler only stores to an atomic, which is
        // async-signal-safe as a handler run after fork must be.
        unsafe { libc::pthread_atfork(None, None, Some(forked)) };
        openat(
            libc::AT_FDCWD,
            c"/proc/self/fd",
            libc::O_PATH | libc::O_DIRECTORY,
            0,
        )
        .ok()
    });
    if FORKED.load(Ordering::Relaxed) {
        return None;
    }
    held.as_ref().map(|f| f.as_raw_fd())
}

/// FS_IOC_GETVERSION (inode generation) on an fd opened for reading.
pub fn generation(fd: RawFd) -> Option<u32> {
    let mut v: libc::c_long = 0;
    // SAFETY: the ioctl writes one long to v (the uapi declares `long` but
    // ext4 writes an int; v is zeroed first so either works).
    let r = unsafe { libc::ioctl(fd, libc::FS_IOC_GETVERSION, &mut v as *mut libc::c_long) };
    if r < 0 {
        None
    } else {
        Some(v as u32)
    }
}

pub fn fchownat_empty(fd: RawFd, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
    let u = uid.unwrap_or(u32::MAX);
    let g = gid.unwrap_or(u32::MAX);
    // SAFETY: empty C string with AT_EMPTY_PATH operates on fd itself.
    cvt(unsafe { libc::fchownat(fd, EMPTY.as_ptr(), u, g, libc::AT_EMPTY_PATH) })?;
    Ok(())
}

/// chmod of the object an O_PATH fd refers to (fchmodat2 with AT_EMPTY_PATH,
/// falling back to the /proc magic link on kernels before 6.6).
pub fn fchmod_path(fd: RawFd, mode: u32) -> io::Result<()> {
    // SAFETY: raw fchmodat2(fd, "", mode, AT_EMPTY_PATH): valid C string.
    let r = unsafe {
        libc::syscall(
            libc::SYS_fchmodat2,
            fd,
            EMPTY.as_ptr(),
            mode as libc::c_uint,
            libc::AT_EMPTY_PATH,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::ENOSYS) {
        return Err(e);
    }
    let link = ProcFd::new(fd);
    // SAFETY: valid C string.
    cvt(unsafe { libc::fchmodat(link.dir, link.name().as_ptr(), mode, 0) })?;
    Ok(())
}

fn timespec(t: &crate::SetTime) -> libc::timespec {
    match t {
        crate::SetTime::DontChange => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        crate::SetTime::ServerTime => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        crate::SetTime::ClientTime(t) => libc::timespec {
            tv_sec: t.sec,
            // nseconds >= 1e9 are invalid: clamp (the XDR layer should too).
            tv_nsec: i64::from(t.nsec.min(999_999_999)),
        },
    }
}

/// utimensat on the object an O_PATH fd refers to (never a symlink target).
pub fn set_times(fd: RawFd, atime: &crate::SetTime, mtime: &crate::SetTime) -> io::Result<()> {
    let ts = [timespec(atime), timespec(mtime)];
    // SAFETY: empty path + AT_EMPTY_PATH names fd; ts holds two timespecs.
    cvt(unsafe { libc::utimensat(fd, EMPTY.as_ptr(), ts.as_ptr(), libc::AT_EMPTY_PATH) })?;
    Ok(())
}

/// The kernel's path for an open fd (readlink of /proc/self/fd/N). A path
/// longer than PATH_MAX is ENAMETOOLONG.
pub fn fd_path(fd: RawFd) -> io::Result<Vec<u8>> {
    let link = ProcFd::new(fd);
    // Not zeroed: this runs on every proof of confinement.
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); libc::PATH_MAX as usize + 1];
    // SAFETY: buf is writable for buf.len() bytes; the name is a C string.
    let n = unsafe {
        libc::readlinkat(
            link.dir,
            link.name().as_ptr(),
            buf.as_mut_ptr().cast::<libc::c_char>(),
            buf.len(),
        )
    };
    let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
    if n >= buf.len() {
        return Err(err(libc::ENAMETOOLONG));
    }
    // SAFETY: readlinkat wrote the first n (< buf.len()) bytes.
    Ok(unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n) }.to_vec())
}

pub fn readlink_fd(fd: RawFd) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: buf is writable for buf.len() bytes.
    let n = unsafe {
        libc::readlinkat(
            fd,
            EMPTY.as_ptr(),
            buf.as_mut_ptr().cast::<libc::c_char>(),
            buf.len(),
        )
    };
    let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
    buf.truncate(n);
    Ok(buf)
}

/// pread until `count` bytes or end of file; appends to `buf`.
pub fn pread_full(fd: RawFd, offset: u64, count: usize, buf: &mut Vec<u8>) -> io::Result<usize> {
    buf.reserve(count);
    let mut done = 0usize;
    while done < count {
        let off = offset
            .checked_add(done as u64)
            .and_then(|o| i64::try_from(o).ok())
            .ok_or_else(|| err(libc::EINVAL))?;
        let spare = buf.spare_capacity_mut();
        let want = (count - done).min(spare.len());
        // SAFETY: spare has at least `want` writable (uninitialised) bytes.
        let n = unsafe { libc::pread(fd, spare.as_mut_ptr().cast(), want, off) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            break;
        }
        let n = n as usize;
        // SAFETY: the kernel initialised n <= want bytes of spare capacity.
        unsafe { buf.set_len(buf.len() + n) };
        done += n;
    }
    Ok(done)
}

/// One `preadv2(RWF_NOWAIT)` of up to `count` bytes at `offset`, appended
/// to `buf`: only what the page cache holds (EAGAIN when the first page is
/// not there). Short reads are the caller's to judge.
pub fn pread_nowait(fd: RawFd, offset: u64, count: usize, buf: &mut Vec<u8>) -> io::Result<usize> {
    let off = i64::try_from(offset).map_err(|_| err(libc::EINVAL))?;
    buf.reserve(count);
    let spare = buf.spare_capacity_mut();
    let want = count.min(spare.len());
    let iov = libc::iovec {
        iov_base: spare.as_mut_ptr().cast(),
        iov_len: want,
    };
    // SAFETY: iov points at `want` writable (uninitialised) bytes of buf.
    let n = unsafe { libc::preadv2(fd, &iov, 1, off, libc::RWF_NOWAIT) };
    let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
    // SAFETY: the kernel initialised n <= want bytes of spare capacity.
    unsafe { buf.set_len(buf.len() + n) };
    Ok(n)
}

/// splice(2) from the file `fd` at `offset` into the pipe `pipe` until
/// `count` bytes, end of file, or a full pipe: the page cache's pages go
/// into the pipe by reference, not copied. Returns the bytes moved.
pub fn splice_to_pipe(fd: RawFd, offset: u64, pipe: RawFd, count: usize) -> io::Result<usize> {
    let mut done = 0usize;
    while done < count {
        let mut off = offset
            .checked_add(done as u64)
            .and_then(|o| i64::try_from(o).ok())
            .ok_or_else(|| err(libc::EINVAL))?;
        // SAFETY: plain descriptors and a valid offset pointer; the pipe is
        // non-blocking, so a full pipe answers EAGAIN.
        let n = unsafe {
            libc::splice(
                fd,
                &mut off,
                pipe,
                std::ptr::null_mut(),
                count - done,
                libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock if done > 0 => break,
                _ => return Err(e),
            }
        }
        if n == 0 {
            break;
        }
        done += n as usize;
    }
    Ok(done)
}

/// Does the page cache hold every page of `len` bytes at `offset`?
/// cachestat(2) (Linux 6.5); false where it is missing, so the caller
/// takes the path that may wait.
pub fn all_cached(fd: RawFd, offset: u64, len: u64) -> bool {
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct CacheStat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    // Syscalls added since Linux 5.1 share one number on every
    // architecture; libc lacks this one for x86_64.
    const SYS_CACHESTAT: libc::c_long = 451;
    if len == 0 {
        return true;
    }
    const PAGE: u64 = 4096;
    let first = offset / PAGE;
    let last = offset.saturating_add(len - 1) / PAGE;
    let range = Range {
        off: first * PAGE,
        len: (last - first + 1) * PAGE,
    };
    let mut st = CacheStat::default();
    // SAFETY: valid pointers to a range and a result struct of the layout
    // the kernel expects; flags must be 0.
    let r = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd,
            &range as *const Range,
            &mut st as *mut CacheStat,
            0u32,
        )
    };
    // The page size is 4 KiB on the hosts we run on; a larger one only
    // makes us count fewer pages than asked, so the answer is "no".
    r == 0 && st.nr_cache > last - first
}

/// openat2 with RESOLVE_CACHED (Linux 5.12): the open is done from the
/// dentry cache or not at all (EAGAIN), so it never waits for a disk.
/// Kernels without it answer EAGAIN too (the caller then takes its slow
/// path).
pub fn openat_cached(dir: RawFd, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    const RESOLVE_CACHED: u64 = 0x20;
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: RESOLVE_CACHED,
    };
    // SAFETY: raw openat2 with a valid C string and a valid open_how of the
    // size passed; the returned fd is ours.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            name.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENOSYS | libc::E2BIG | libc::EINVAL) => err(libc::EAGAIN),
            _ => e,
        });
    }
    // SAFETY: fd was just returned and is not owned elsewhere.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

pub fn pwrite_full(fd: RawFd, offset: u64, data: &[u8]) -> io::Result<usize> {
    let mut done = 0usize;
    while done < data.len() {
        let off = offset
            .checked_add(done as u64)
            .and_then(|o| i64::try_from(o).ok())
            .ok_or_else(|| err(libc::EFBIG))?;
        let rest = &data[done..];
        // SAFETY: rest is a valid readable slice.
        let n = unsafe { libc::pwrite(fd, rest.as_ptr().cast(), rest.len(), off) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            if done > 0 {
                break;
            }
            return Err(e);
        }
        if n == 0 {
            break;
        }
        done += n as usize;
    }
    Ok(done)
}

/// A file handle as name_to_handle_at fills it (MAX_HANDLE_SZ = 128 bytes).
#[repr(C)]
pub struct KHandle {
    pub handle_bytes: libc::c_uint,
    pub handle_type: libc::c_int,
    pub f_handle: [u8; 128],
}

impl KHandle {
    pub fn new() -> Self {
        KHandle {
            handle_bytes: 128,
            handle_type: 0,
            f_handle: [0; 128],
        }
    }
    pub fn bytes(&self) -> &[u8] {
        let n = (self.handle_bytes as usize).min(self.f_handle.len());
        &self.f_handle[..n]
    }
}

/// name_to_handle_at(dir, name) without following symlinks; returns the
/// handle and the mount id.
pub fn name_to_handle(dir: RawFd, name: &CStr, flags: libc::c_int) -> io::Result<(KHandle, i32)> {
    let mut h = KHandle::new();
    let mut mnt: libc::c_int = 0;
    // SAFETY: h is a file_handle header followed by 128 bytes, as declared
    // in handle_bytes; mnt is a valid out-pointer.
    cvt(unsafe {
        libc::name_to_handle_at(
            dir,
            name.as_ptr(),
            (&mut h as *mut KHandle).cast::<libc::file_handle>(),
            &mut mnt,
            flags,
        )
    })?;
    Ok((h, mnt))
}

/// open_by_handle_at(mount_fd, handle, flags). Needs CAP_DAC_READ_SEARCH.
pub fn open_by_handle(
    mount_fd: RawFd,
    htype: i32,
    bytes: &[u8],
    flags: libc::c_int,
) -> io::Result<OwnedFd> {
    let mut h = KHandle::new();
    if bytes.len() > h.f_handle.len() {
        return Err(err(libc::EINVAL));
    }
    h.f_handle[..bytes.len()].copy_from_slice(bytes);
    h.handle_bytes = bytes.len() as libc::c_uint;
    h.handle_type = htype;
    // SAFETY: h is a well-formed file_handle with handle_bytes valid bytes.
    let fd = cvt(unsafe {
        libc::open_by_handle_at(
            mount_fd,
            (&mut h as *mut KHandle).cast::<libc::file_handle>(),
            flags | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: fd was just returned and is ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One raw directory entry from getdents64.
pub struct RawEntry {
    pub ino: u64,
    /// Offset of the next entry (the cookie that resumes after this one).
    pub off: i64,
    pub dtype: u8,
    pub name: Vec<u8>,
}

/// Reads a directory with getdents64 through a bounded buffer.
pub struct DirReader {
    fd: OwnedFd,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    end: bool,
}

impl DirReader {
    /// `fd` must be open O_RDONLY|O_DIRECTORY.
    pub fn new(fd: OwnedFd, buf_size: usize) -> Self {
        DirReader {
            fd,
            buf: vec![0; buf_size.max(1024)],
            pos: 0,
            len: 0,
            end: false,
        }
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn seek(&mut self, off: u64) -> io::Result<()> {
        let off = i64::try_from(off).map_err(|_| err(libc::EINVAL))?;
        // SAFETY: plain lseek on an owned fd.
        let r = unsafe { libc::lseek(self.fd.as_raw_fd(), off, libc::SEEK_SET) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        self.pos = 0;
        self.len = 0;
        self.end = false;
        Ok(())
    }

    pub fn next_entry(&mut self) -> io::Result<Option<RawEntry>> {
        loop {
            if self.pos < self.len {
                // linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, name.
                let rec = &self.buf[self.pos..self.len];
                if rec.len() < 19 {
                    return Err(err(libc::EIO));
                }
                let ino = u64::from_ne_bytes(rec[0..8].try_into().map_err(|_| err(libc::EIO))?);
                let off = i64::from_ne_bytes(rec[8..16].try_into().map_err(|_| err(libc::EIO))?);
                let reclen = usize::from(u16::from_ne_bytes([rec[16], rec[17]]));
                if reclen < 19 || reclen > rec.len() {
                    return Err(err(libc::EIO));
                }
                let dtype = rec[18];
                let name_area = &rec[19..reclen];
                let nl = name_area
                    .iter()
                    .position(|&c| c == 0)
                    .unwrap_or(name_area.len());
                let name = name_area[..nl].to_vec();
                self.pos += reclen;
                return Ok(Some(RawEntry {
                    ino,
                    off,
                    dtype,
                    name,
                }));
            }
            if self.end {
                return Ok(None);
            }
            // SAFETY: buf is writable for buf.len() bytes.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_getdents64,
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr(),
                    self.buf.len(),
                )
            };
            let n = cvt_long(n)? as usize;
            self.pos = 0;
            self.len = n.min(self.buf.len());
            if n == 0 {
                self.end = true;
            }
        }
    }
}

pub fn makedev(major: u32, minor: u32) -> libc::dev_t {
    libc::makedev(major, minor)
}

pub fn fsync(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain fsync on a descriptor the caller owns.
    cvt(unsafe { libc::fsync(fd) })?;
    Ok(())
}

pub fn fdatasync(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain fdatasync on a descriptor the caller owns.
    cvt(unsafe { libc::fdatasync(fd) })?;
    Ok(())
}

/// Writes back the file's dirty pages and waits for that writeback,
/// reporting (and, as fsync does, consuming for this descriptor) a
/// writeback error it has not seen yet. Data only: what the writeback
/// changed in the file's metadata (size, block map) becomes durable with
/// the next journal commit (`journal.rs`).
pub fn write_back(fd: RawFd) -> io::Result<()> {
    let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
        | libc::SYNC_FILE_RANGE_WRITE
        | libc::SYNC_FILE_RANGE_WAIT_AFTER;
    // SAFETY: plain sync_file_range on a descriptor the caller owns; offset
    // and length 0 mean the whole file.
    cvt(unsafe { libc::sync_file_range(fd, 0, 0, flags) })?;
    Ok(())
}

/// Starts writeback of the file's dirty pages and waits for none of it
/// (`SYNC_FILE_RANGE_WRITE` alone: no wait, so no writeback error is
/// consumed; a later fsync still reports it).
pub fn start_writeback(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain sync_file_range on a descriptor the caller owns; offset
    // and length 0 mean the whole file.
    cvt(unsafe { libc::sync_file_range(fd, 0, 0, libc::SYNC_FILE_RANGE_WRITE) })?;
    Ok(())
}

/// Flushes the whole filesystem `fd` is on.
pub fn syncfs(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain syncfs on a descriptor the caller owns.
    cvt(unsafe { libc::syncfs(fd) })?;
    Ok(())
}

/// The filesystem type (statfs f_type) of the filesystem `fd` is on.
pub fn fs_type(fd: RawFd) -> io::Result<i64> {
    // SAFETY: an all-zero statfs is valid; fstatfs fills it.
    let mut v: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: v is a valid out-pointer.
    cvt(unsafe { libc::fstatfs(fd, &mut v) })?;
    Ok(v.f_type as i64)
}

/// Whether this process has a file-size limit (RLIMIT_FSIZE): a write or
/// truncate past it raises SIGXFSZ.
pub fn fsize_limited() -> bool {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into `r`, which outlives the call.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut r) };
    rc != 0 || r.rlim_cur != libc::RLIM_INFINITY
}

pub fn ftruncate(fd: RawFd, len: i64) -> io::Result<()> {
    // SAFETY: plain ftruncate on a descriptor the caller owns.
    cvt(unsafe { libc::ftruncate(fd, len) })?;
    Ok(())
}

pub fn fstatvfs(fd: RawFd) -> io::Result<libc::statvfs> {
    // SAFETY: an all-zero statvfs is valid; fstatvfs fills it.
    let mut v: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: v is a valid out-pointer (works on O_PATH fds via fstatfs).
    cvt(unsafe { libc::fstatvfs(fd, &mut v) })?;
    Ok(v)
}

/// fpathconf(_PC_LINK_MAX); None where the filesystem has no limit.
pub fn link_max(fd: RawFd) -> Option<u32> {
    // SAFETY: fpathconf only reads the fd (works on O_PATH via fstatfs).
    let n = unsafe { libc::fpathconf(fd, libc::_PC_LINK_MAX) };
    u32::try_from(n).ok()
}

pub fn mknodat(dir: RawFd, name: &CStr, mode: u32, dev: libc::dev_t) -> io::Result<()> {
    // SAFETY: name is a valid C string.
    cvt(unsafe { libc::mknodat(dir, name.as_ptr(), mode, dev) })?;
    Ok(())
}

pub fn mkdirat(dir: RawFd, name: &CStr, mode: u32) -> io::Result<()> {
    // SAFETY: name is a valid C string.
    cvt(unsafe { libc::mkdirat(dir, name.as_ptr(), mode) })?;
    Ok(())
}

pub fn symlinkat(target: &CStr, dir: RawFd, name: &CStr) -> io::Result<()> {
    // SAFETY: both are valid C strings.
    cvt(unsafe { libc::symlinkat(target.as_ptr(), dir, name.as_ptr()) })?;
    Ok(())
}

pub fn unlinkat(dir: RawFd, name: &CStr, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: name is a valid C string.
    cvt(unsafe { libc::unlinkat(dir, name.as_ptr(), flags) })?;
    Ok(())
}

pub fn renameat(from_dir: RawFd, from: &CStr, to_dir: RawFd, to: &CStr) -> io::Result<()> {
    // SAFETY: both names are valid C strings.
    cvt(unsafe { libc::renameat(from_dir, from.as_ptr(), to_dir, to.as_ptr()) })?;
    Ok(())
}

/// A new name `name` in `dir` for the object `fd` refers to. linkat(fd, "",
/// AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH; the /proc magic link does the
/// same for any caller.
pub fn link_fd(fd: RawFd, dir: RawFd, name: &CStr) -> io::Result<()> {
    let src = ProcFd::new(fd);
    // SAFETY: both are valid C strings.
    cvt(unsafe {
        libc::linkat(
            src.dir,
            src.name().as_ptr(),
            dir,
            name.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    })?;
    Ok(())
}

/// Runs `f` again with CAP_FOWNER effective on this thread, then drops it:
/// the kernel clears the filesystem capabilities while fsuid is not 0, and
/// a raised one would serve every later caller on this thread. Where the
/// process is not permitted CAP_FOWNER, nothing is raised and `refused` is
/// the answer.
pub fn with_fowner<T>(refused: io::Error, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    use rustix::thread::{capabilities, set_capabilities, CapabilitySet};
    let Ok(sets) = capabilities(None) else {
        return Err(refused);
    };
    if sets.effective.contains(CapabilitySet::FOWNER)
        || !sets.permitted.contains(CapabilitySet::FOWNER)
    {
        return Err(refused);
    }
    let mut raised = sets;
    raised.effective |= CapabilitySet::FOWNER;
    if set_capabilities(None, raised).is_err() {
        return Err(refused);
    }
    let r = f();
    if let Err(e) = set_capabilities(None, sets) {
        // Lowering never fails; if it did, the thread would go on with a
        // capability none of its callers has.
        tracing::error!("cannot drop CAP_FOWNER again ({e}): exiting");
        std::process::abort();
    }
    r
}

/// Whether this thread's filesystem identity may access the object `fd`
/// refers to with `mode` (R_OK, W_OK, X_OK): the kernel's own answer, POSIX
/// ACLs, read-only mounts and immutable files included (faccessat2 with
/// AT_EACCESS judges with the fsuid/fsgid/groups, as an open would).
pub fn may_access(fd: RawFd, mode: libc::c_int) -> io::Result<()> {
    // SAFETY: raw faccessat2(fd, "", mode, AT_EMPTY_PATH|AT_EACCESS) with a
    // valid empty C string.
    let r = unsafe {
        libc::syscall(
            libc::SYS_faccessat2,
            fd,
            EMPTY.as_ptr(),
            mode,
            libc::AT_EMPTY_PATH | libc::AT_EACCESS,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::ENOSYS) {
        return Err(e);
    }
    // Before Linux 5.8: the same question through the /proc magic link.
    let link = ProcFd::new(fd);
    // SAFETY: valid C string.
    cvt(unsafe { libc::faccessat(link.dir, link.name().as_ptr(), mode, libc::AT_EACCESS) })?;
    Ok(())
}

/// Mount `mnt_id`'s line of /proc/self/mountinfo, if it is listed.
fn mountinfo_line(mnt_id: u64) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines()
        .find(|l| l.split(' ').next().and_then(|id| id.parse::<u64>().ok()) == Some(mnt_id))
        .map(str::to_owned)
}

/// Whether mount `mnt_id` shows its filesystem's own root (the fourth field
/// of /proc/self/mountinfo is "/"), rather than a bind-mounted subtree.
pub fn mount_shows_fs_root(mnt_id: u64) -> bool {
    mountinfo_line(mnt_id).is_some_and(|l| l.split(' ').nth(3) == Some("/"))
}

/// The superblock options of mount `mnt_id` (the last field of its
/// /proc/self/mountinfo line: "... - fstype source superoptions").
pub fn super_options(mnt_id: u64) -> Option<String> {
    let line = mountinfo_line(mnt_id)?;
    let (_, tail) = line.split_once(" - ")?;
    tail.split(' ').nth(2).map(str::to_owned)
}

/// fcntl OFD lock commands (locks owned by the open file description, not
/// the process: one per NLM lock owner).
#[derive(Clone, Copy)]
pub enum OfdCmd {
    /// F_OFD_SETLK: take or release without waiting.
    Set,
    /// F_OFD_GETLK: the first conflicting lock, if any.
    Get,
}

/// `l_type` (F_RDLCK, F_WRLCK or F_UNLCK) on `start`/`len` (0 = to end of
/// file). Returns the kernel's answer: for `Get` the conflicting lock's
/// type and range (F_UNLCK: none). EAGAIN from `Set`: a conflict.
pub fn ofd_lock(
    fd: RawFd,
    cmd: OfdCmd,
    l_type: libc::c_int,
    start: i64,
    len: i64,
) -> io::Result<(libc::c_int, i64, i64)> {
    // SAFETY: an all-zero flock is valid (l_pid must be 0 for OFD locks).
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = l_type as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start;
    fl.l_len = len;
    let c = match cmd {
        OfdCmd::Set => libc::F_OFD_SETLK,
        OfdCmd::Get => libc::F_OFD_GETLK,
    };
    // SAFETY: fl is a valid flock the kernel reads (and for GETLK writes).
    cvt(unsafe { libc::fcntl(fd, c, &mut fl as *mut libc::flock) })?;
    Ok((libc::c_int::from(fl.l_type), fl.l_start, fl.l_len))
}

// Credentials (used by `creds`). setfsuid/setfsgid and SYS_setgroups are the
// raw syscalls: they change only the calling thread, where glibc's
// setgroups() would change every thread of the process.

pub fn geteuid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

pub fn getegid() -> u32 {
    // SAFETY: getegid has no preconditions and cannot fail.
    unsafe { libc::getegid() }
}

/// Raw setfsuid: sets this thread's filesystem uid and returns the previous
/// one. An invalid id (u32::MAX) changes nothing: a pure read. A refused
/// change is visible only as an unchanged value on the next call.
pub fn setfsuid(uid: u32) -> u32 {
    // SAFETY: setfsuid takes an integer and touches no memory of ours.
    unsafe { libc::syscall(libc::SYS_setfsuid, uid) as u32 }
}

/// Raw setfsgid: as `setfsuid`, for the filesystem gid.
pub fn setfsgid(gid: u32) -> u32 {
    // SAFETY: setfsgid takes an integer and touches no memory of ours.
    unsafe { libc::syscall(libc::SYS_setfsgid, gid) as u32 }
}

/// This thread's supplementary groups.
pub fn getgroups() -> io::Result<Vec<u32>> {
    // SAFETY: getgroups with size 0 and a null buffer only returns the count.
    let n = cvt(unsafe { libc::getgroups(0, std::ptr::null_mut()) })?;
    let mut g = vec![0u32; n as usize];
    // SAFETY: g has room for n groups.
    let m = cvt(unsafe { libc::getgroups(n, g.as_mut_ptr()) })?;
    g.truncate(m as usize);
    Ok(g)
}

/// Sets this thread's supplementary groups (raw SYS_setgroups: this thread
/// only, unlike glibc's setgroups()).
pub fn setgroups_thread(groups: &[u32]) -> io::Result<()> {
    // SAFETY: groups is a valid slice of `groups.len()` gid_t values, which
    // the kernel only reads.
    cvt_long(unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) })?;
    Ok(())
}

pub use crate::sleeps::thread_sleeps;

/// F_SETSIG: the signal the kernel sends when a lease on `fd` breaks
/// (with `si_fd` set, so the receiver knows which).
pub fn set_sig(fd: RawFd, sig: libc::c_int) -> io::Result<()> {
    // linux/fcntl.h's (asm-generic; the libc crate lacks it).
    const F_SETSIG: libc::c_int = 10;
    // SAFETY: fcntl with an int argument on a descriptor the caller owns.
    cvt(unsafe { libc::fcntl(fd, F_SETSIG, sig) })?;
    Ok(())
}

/// F_SETLEASE: takes (F_RDLCK, F_WRLCK) or drops (F_UNLCK) a file lease
/// on `fd`. EAGAIN: the file is open in a conflicting way.
pub fn set_lease(fd: RawFd, kind: libc::c_int) -> io::Result<()> {
    // SAFETY: fcntl with an int argument on a descriptor the caller owns.
    cvt(unsafe { libc::fcntl(fd, libc::F_SETLEASE, kind) })?;
    Ok(())
}

/// F_SETOWN_EX to thread `tid`: signals for `fd` (a lease break's) go to
/// that thread only.
pub fn set_owner_thread(fd: RawFd, tid: libc::pid_t) -> io::Result<()> {
    // linux/fcntl.h's (asm-generic; the libc crate lacks them).
    const F_SETOWN_EX: libc::c_int = 15;
    const F_OWNER_TID: libc::c_int = 0;
    #[repr(C)]
    struct FOwnerEx {
        kind: libc::c_int,
        pid: libc::pid_t,
    }
    let o = FOwnerEx {
        kind: F_OWNER_TID,
        pid: tid,
    };
    // SAFETY: fcntl with a pointer to a valid struct f_owner_ex.
    cvt(unsafe { libc::fcntl(fd, F_SETOWN_EX, &o as *const FOwnerEx) })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleep_counts_as_a_voluntary_switch_and_a_quick_syscall_does_not() {
        let a = thread_sleeps();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = thread_sleeps();
        assert!(b > a, "slept: {a} -> {b}");
        // getpid never sleeps; a preemption would be involuntary.
        let before = thread_sleeps();
        for _ in 0..100 {
            std::hint::black_box(std::process::id());
        }
        assert_eq!(thread_sleeps(), before);
    }

    #[test]
    fn proc_fd_names_the_fd_in_the_held_directory() {
        let name = ProcFd::new(1234);
        assert!(name.dir >= 0, "/proc/self/fd should be held here");
        assert_eq!(name.name().to_bytes(), b"1234");
        assert_eq!(ProcFd::new(0).name().to_bytes(), b"0");
        assert_eq!(
            ProcFd::new(i32::MAX).name().to_bytes(),
            i32::MAX.to_string().as_bytes()
        );
    }

    #[test]
    fn a_forked_child_goes_back_to_the_path() {
        assert!(ProcFd::new(3).dir >= 0, "held in the parent");
        // SAFETY: the child touches no lock and no allocator (an atomic
        // load, stack buffers) before _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let l = ProcFd::new(3);
            let ok = l.dir == libc::AT_FDCWD && l.name().to_bytes() == b"/proc/self/fd/3";
            // SAFETY: leaves the child at once, running no Rust destructors.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child just forked.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{status}"
        );
        assert!(ProcFd::new(3).dir >= 0, "still held in the parent");
    }

    #[test]
    fn magic_links_through_the_held_directory() {
        let dir = std::env::temp_dir().canonicalize().unwrap();
        let c = CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
        let fd = open_path(libc::AT_FDCWD, &c).unwrap();
        // readlink gives the kernel's path, reopen a real descriptor of the
        // same object.
        assert_eq!(
            fd_path(fd.as_raw_fd()).unwrap(),
            dir.as_os_str().as_encoded_bytes()
        );
        let rd = reopen(fd.as_raw_fd(), libc::O_RDONLY | libc::O_DIRECTORY).unwrap();
        let (a, b) = (
            fstat(fd.as_raw_fd()).unwrap(),
            fstat(rd.as_raw_fd()).unwrap(),
        );
        assert_eq!(a.key(), b.key());
    }
}
