//! Namespace changes: CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR, RENAME, LINK.

use std::ffi::CString;
use std::io;
use std::os::fd::AsRawFd;

use super::{check_name, errno, io_errno, sys, FdRef, LocalFs, Obj, SYMLINK_MAX};
use crate::{Attr, CreateHow, Created, Cred, Fh, FsResult, NodeKind, SetAttr, SetTime, Time, Wcc};

impl LocalFs {
    /// Finishes a create-type call: stat, fix the mode the process umask
    /// changed, apply the rest of `set`, make the handle, remember the name.
    pub(super) fn finish_create(
        &self,
        cred: &Cred,
        dir: &Obj<'_>,
        name: &[u8],
        c: &CString,
        set: &SetAttr,
    ) -> FsResult<Created> {
        let fd = sys::open_path(dir.raw(), c)?;
        let st = sys::fstat(fd.as_raw_fd())?;
        let o = Obj {
            fd: FdRef::Owned(fd),
            st,
        };
        let mut set = set.clone();
        // The process umask only clears permission bits; keep a setgid bit a
        // new directory inherited (as knfsd, which creates without umask).
        if let Some(m) = set.mode {
            let inherited = if st.is_dir() {
                st.mode & libc::S_ISGID
            } else {
                0
            };
            let want = (m & 0o7777) | inherited;
            set.mode = (want != st.mode & 0o7777).then_some(want);
        }
        set.uid = set.uid.filter(|&u| u != st.uid);
        set.gid = set.gid.filter(|&g| g != st.gid);
        if set != SetAttr::default() {
            self.apply_set(cred, &o, &set)?;
        }
        self.created(dir, name, &o)
    }

    pub(super) fn created(&self, dir: &Obj<'_>, name: &[u8], o: &Obj<'_>) -> FsResult<Created> {
        self.srv()?;
        let st = sys::fstat(o.raw())?;
        let fh = self.make_fh(o.raw(), &st)?;
        self.locs.insert(st.key(), dir.st.key(), name);
        Ok(Created {
            fh,
            attr: self.attr(&st),
            dir: self.wcc(&dir.st, dir.raw()),
        })
    }
}

pub(super) fn create(
    fs: &LocalFs,
    cred: &Cred,
    dir: &Fh,
    name: &[u8],
    how: &CreateHow,
) -> FsResult<Created> {
    let c = check_name(name, false)?;
    fs.srv()?;
    let d = fs.dir(dir)?;
    fs.usr(cred)?;
    let mknod = |mode: u32| -> io::Result<()> {
        // SAFETY: valid C string; S_IFREG creates a regular file.
        sys::cvt(unsafe { libc::mknodat(d.raw(), c.as_ptr(), libc::S_IFREG | mode, 0) })?;
        Ok(())
    };
    match how {
        CreateHow::Unchecked(set) | CreateHow::Guarded(set) => {
            let guarded = matches!(how, CreateHow::Guarded(_));
            match mknod(set.mode.unwrap_or(0o666) & 0o7777) {
                Ok(()) => fs.finish_create(cred, &d, name, &c, set),
                Err(e) if io_errno(&e) == libc::EEXIST && !guarded => {
                    // UNCHECKED over an existing regular file: only the
                    // size is applied, as knfsd does (RFC 1813 §3.3.8).
                    let fd = sys::open_path(d.raw(), &c)?;
                    let st = sys::fstat(fd.as_raw_fd())?;
                    if !st.is_reg() {
                        return Err(errno(libc::EEXIST));
                    }
                    let o = Obj {
                        fd: FdRef::Owned(fd),
                        st,
                    };
                    if set.size.is_some() {
                        let s = SetAttr {
                            size: set.size,
                            ..SetAttr::default()
                        };
                        fs.apply_set(cred, &o, &s)?;
                    }
                    fs.created(&d, name, &o)
                }
                Err(e) => Err(e.into()),
            }
        }
        CreateHow::Exclusive(verf) => {
            // The verifier lives in mtime/atime seconds as in knfsd (top
            // bit cleared so any filesystem can store the times).
            let vm = u32::from_be_bytes([verf[0], verf[1], verf[2], verf[3]]) & 0x7fff_ffff;
            let va = u32::from_be_bytes([verf[4], verf[5], verf[6], verf[7]]) & 0x7fff_ffff;
            match mknod(0) {
                Ok(()) => {
                    let fd = sys::open_path(d.raw(), &c)?;
                    let t = |s: u32| {
                        SetTime::ClientTime(Time {
                            sec: i64::from(s),
                            nsec: 0,
                        })
                    };
                    if let Err(e) = sys::set_times(fd.as_raw_fd(), &t(va), &t(vm)) {
                        // SAFETY: valid C string.
                        unsafe { libc::unlinkat(d.raw(), c.as_ptr(), 0) };
                        return Err(e.into());
                    }
                    let st = sys::fstat(fd.as_raw_fd())?;
                    let o = Obj {
                        fd: FdRef::Owned(fd),
                        st,
                    };
                    fs.created(&d, name, &o)
                }
                Err(e) if io_errno(&e) == libc::EEXIST => {
                    let fd = sys::open_path(d.raw(), &c)?;
                    let st = sys::fstat(fd.as_raw_fd())?;
                    let same = st.is_reg()
                        && st.mtime.sec == i64::from(vm)
                        && st.atime.sec == i64::from(va)
                        && st.size == 0;
                    if !same {
                        return Err(errno(libc::EEXIST));
                    }
                    let o = Obj {
                        fd: FdRef::Owned(fd),
                        st,
                    };
                    fs.created(&d, name, &o)
                }
                Err(e) => Err(e.into()),
            }
        }
    }
}

pub(super) fn mkdir(
    fs: &LocalFs,
    cred: &Cred,
    dir: &Fh,
    name: &[u8],
    set: &SetAttr,
) -> FsResult<Created> {
    let c = check_name(name, false)?;
    fs.srv()?;
    let d = fs.dir(dir)?;
    fs.usr(cred)?;
    let mode = set.mode.unwrap_or(0o777) & 0o7777;
    // SAFETY: valid C string.
    sys::cvt(unsafe { libc::mkdirat(d.raw(), c.as_ptr(), mode) })?;
    fs.finish_create(cred, &d, name, &c, set)
}

pub(super) fn symlink(
    fs: &LocalFs,
    cred: &Cred,
    dir: &Fh,
    name: &[u8],
    target: &[u8],
    set: &SetAttr,
) -> FsResult<Created> {
    let c = check_name(name, false)?;
    if target.len() > SYMLINK_MAX {
        return Err(errno(libc::ENAMETOOLONG));
    }
    let t = sys::cstr(target)?;
    fs.srv()?;
    let d = fs.dir(dir)?;
    fs.usr(cred)?;
    // SAFETY: valid C strings.
    sys::cvt(unsafe { libc::symlinkat(t.as_ptr(), d.raw(), c.as_ptr()) })?;
    let set = SetAttr {
        mode: None,
        ..set.clone()
    };
    fs.finish_create(cred, &d, name, &c, &set)
}

pub(super) fn mknod(
    fs: &LocalFs,
    cred: &Cred,
    dir: &Fh,
    name: &[u8],
    kind: NodeKind,
    set: &SetAttr,
) -> FsResult<Created> {
    let c = check_name(name, false)?;
    let (fmt, dev) = match kind {
        NodeKind::Fifo => (libc::S_IFIFO, 0),
        NodeKind::Socket => (libc::S_IFSOCK, 0),
        NodeKind::Block { major, minor } => (libc::S_IFBLK, sys::makedev(major, minor)),
        NodeKind::Char { major, minor } => (libc::S_IFCHR, sys::makedev(major, minor)),
    };
    fs.srv()?;
    let d = fs.dir(dir)?;
    fs.usr(cred)?;
    let mode = set.mode.unwrap_or(0o666) & 0o7777;
    // SAFETY: valid C string.
    sys::cvt(unsafe { libc::mknodat(d.raw(), c.as_ptr(), fmt | mode, dev) })?;
    fs.finish_create(cred, &d, name, &c, set)
}

pub(super) fn remove(fs: &LocalFs, cred: &Cred, dir: &Fh, name: &[u8]) -> FsResult<Wcc> {
    let c = check_name(name, false)?;
    fs.srv()?;
    let d = fs.dir(dir)?;
    fs.usr(cred)?;
    let st = sys::statx_at(d.raw(), &c, 0)?;
    if st.is_dir() {
        return Err(errno(libc::EISDIR));
    }
    // SAFETY: valid C string.
    sys::cvt(unsafe { libc::unlinkat(d.raw(), c.as_ptr(), 0) })?;
    fs.locs.remove_at(&st.key(), &d.st.key(), name);
    Ok(fs.wcc(&d.st, d.raw()))
}

pub(super) fn rmdir(fs: &LocalFs, cred: &Cred, dir: &Fh, name: &[u8]) -> FsResult<Wcc> {
    let c = check_name(name, false)?;
    fs.srv()?;
    let d = fs.dir(dir)?;
    fs.usr(cred)?;
    let st = sys::statx_at(d.raw(), &c, 0)?;
    if !st.is_dir() {
        return Err(errno(libc::ENOTDIR));
    }
    // SAFETY: valid C string.
    sys::cvt(unsafe { libc::unlinkat(d.raw(), c.as_ptr(), libc::AT_REMOVEDIR) })?;
    fs.locs.remove_at(&st.key(), &d.st.key(), name);
    fs.verified.remove(&st.key());
    Ok(fs.wcc(&d.st, d.raw()))
}

pub(super) fn rename(
    fs: &LocalFs,
    cred: &Cred,
    from_dir: &Fh,
    from: &[u8],
    to_dir: &Fh,
    to: &[u8],
) -> FsResult<(Wcc, Wcc)> {
    let cf = check_name(from, false)?;
    let ct = check_name(to, false)?;
    fs.srv()?;
    let d1 = fs.dir(from_dir)?;
    let d2 = fs.dir(to_dir)?;
    fs.usr(cred)?;
    let moved = sys::statx_at(d1.raw(), &cf, 0)?;
    let replaced = sys::statx_at(d2.raw(), &ct, 0).ok();
    // SAFETY: valid C strings. Renaming a name onto a link of the same
    // inode is a successful no-op in the kernel, as POSIX asks.
    sys::cvt(unsafe { libc::renameat(d1.raw(), cf.as_ptr(), d2.raw(), ct.as_ptr()) })?;
    if let Some(r) = replaced {
        if r.key() != moved.key() {
            fs.locs.remove_at(&r.key(), &d2.st.key(), to);
            fs.verified.remove(&r.key());
        }
    }
    fs.locs.insert(moved.key(), d2.st.key(), to);
    Ok((fs.wcc(&d1.st, d1.raw()), fs.wcc(&d2.st, d2.raw())))
}

pub(super) fn link(
    fs: &LocalFs,
    cred: &Cred,
    file: &Fh,
    dir: &Fh,
    name: &[u8],
) -> FsResult<(Attr, Wcc)> {
    let c = check_name(name, false)?;
    fs.srv()?;
    let f = fs.resolve(file)?;
    if f.st.is_dir() {
        return Err(errno(libc::EISDIR));
    }
    let d = fs.dir(dir)?;
    fs.usr(cred)?;
    // linkat(fd, "", AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH; the /proc
    // magic link does the same for any caller.
    let src = sys::cstr(format!("/proc/self/fd/{}", f.raw()).as_bytes())?;
    // SAFETY: valid C strings.
    sys::cvt(unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            src.as_ptr(),
            d.raw(),
            c.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    })?;
    let st = sys::fstat(f.raw())?;
    Ok((fs.attr(&st), fs.wcc(&d.st, d.raw())))
}
