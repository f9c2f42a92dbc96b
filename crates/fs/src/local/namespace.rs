//! Namespace changes: CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR, RENAME, LINK.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};

use super::sys::Stat;
use super::{check_name, errno, io_errno, sys, FdRef, LocalFs, Obj, SYMLINK_MAX};
use crate::limits::local::INLINE_FREE_MAX;
use crate::{Attr, Call, CreateHow, Created, Fh, FsResult, NodeKind, SetAttr, SetTime, Time, Wcc};

impl LocalFs {
    /// Finishes a create-type call: stat, fix the mode the process umask
    /// changed, apply the rest of `set`, make the handle, remember the name.
    pub(super) fn finish_create(
        &self,
        call: &Call<'_>,
        dir: &Obj<'_>,
        name: &[u8],
        c: &CString,
        set: &SetAttr,
    ) -> FsResult<Created> {
        let fd = sys::open_path(dir.raw(), c)?;
        let st = sys::fstat(fd.as_raw_fd())?;
        let mut o = Obj::owned(fd, st, dir.verified);
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
            self.apply_set(call, &o, &set)?;
            o.st = sys::fstat(o.raw())?;
        }
        self.created(call, dir, name, o)
    }

    /// The reply of a create-type call: the new object's handle and
    /// attributes (it enters the handle cache: the client uses it next) and
    /// the directory's wcc. `o.st` must be the object's attributes after
    /// the call's last change to it (a sync changes none).
    /// On a `sync` export the object and its directory are durable first.
    pub(super) fn created(
        &self,
        call: &Call<'_>,
        dir: &Obj<'_>,
        name: &[u8],
        o: Obj<'_>,
    ) -> FsResult<Created> {
        self.sync_made(call, dir, &o)?;
        let st = o.st;
        let fh = self.make_fh(call, o.raw(), &st)?;
        self.locs.insert(st.key(), dir.st.key(), name);
        if let FdRef::Owned(fd) = o.fd {
            self.remember(call, &fh, fd, &st, dir);
        }
        Ok(Created {
            fh,
            attr: self.attr(&st),
            dir: self.wcc(&dir.st, dir.raw()),
        })
    }

    /// After `name` (whose stat before the change was `st`) left `dir`:
    /// forget its location, and when that was its last link, close the
    /// descriptors the open-file cache holds for it (its space is freed
    /// once nothing holds it; no flush, its data is gone).
    fn unlinked(&self, dir: &Obj<'_>, name: &[u8], st: &Stat) {
        self.locs.remove_at(&st.key(), &dir.st.key(), name);
        if st.nlink <= 1 {
            self.files.forget(st.key());
        }
    }
}

/// An EXCLUSIVE create whose file appears with its verifier already in its
/// times: made unnamed (O_TMPFILE), stamped, then linked in, so no crash or
/// failure can leave the name without the verifier (a retry would then get
/// EEXIST for its own create). Where the filesystem has no O_TMPFILE, or
/// must not be given one (`tmpfile` false: ext4 with fast commits), a
/// mknod then the times (a failure in between removes the file).
fn exclusive_create(
    d: &Obj<'_>,
    c: &CString,
    atime: &SetTime,
    mtime: &SetTime,
    tmpfile: bool,
) -> std::io::Result<()> {
    let by_name = || {
        sys::mknodat(d.raw(), c, libc::S_IFREG, 0)?;
        let fd = sys::open_path(d.raw(), c)?;
        if let Err(e) = sys::set_times(fd.as_raw_fd(), atime, mtime) {
            let _ = sys::unlinkat(d.raw(), c, 0);
            return Err(e);
        }
        Ok(())
    };
    if !tmpfile {
        return by_name();
    }
    match sys::openat(d.raw(), sys::DOT, libc::O_TMPFILE | libc::O_WRONLY, 0) {
        Ok(tmp) => {
            sys::set_times(tmp.as_raw_fd(), atime, mtime)?;
            sys::link_fd(tmp.as_raw_fd(), d.raw(), c)
        }
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
            ) =>
        {
            by_name()
        }
        Err(e) => Err(e),
    }
}

impl<'a> Obj<'a> {
    /// An object this call opened itself.
    fn owned(fd: OwnedFd, st: Stat, verified: u64) -> Obj<'a> {
        Obj {
            fd: FdRef::Owned(fd),
            st,
            verified,
        }
    }
}

pub(super) fn create(
    fs: &LocalFs,
    call: &Call<'_>,
    dir: &Fh,
    name: &[u8],
    how: &CreateHow,
) -> FsResult<Created> {
    let c = check_name(name, false)?;
    let d = fs.dir(call, dir)?;
    fs.as_caller(call.cred)?;
    // A size may truncate the file UNCHECKED finds there.
    let sized = matches!(how, CreateHow::Unchecked(s) | CreateHow::Guarded(s) if s.size.is_some());
    fs.changing(call, sized)?;
    let mknod = |mode: u32| sys::mknodat(d.raw(), &c, libc::S_IFREG | mode, 0);
    match how {
        CreateHow::Unchecked(set) | CreateHow::Guarded(set) => {
            let guarded = matches!(how, CreateHow::Guarded(_));
            match mknod(set.mode.unwrap_or(0o666) & 0o7777) {
                Ok(()) => fs.finish_create(call, &d, name, &c, set),
                Err(e) if io_errno(&e) == libc::EEXIST && !guarded => {
                    // UNCHECKED over an existing regular file: only the
                    // size is applied, as knfsd does (RFC 1813 §3.3.8).
                    let fd = sys::open_path(d.raw(), &c)?;
                    let st = sys::fstat(fd.as_raw_fd())?;
                    if !st.is_reg() {
                        return Err(errno(libc::EEXIST));
                    }
                    let mut o = Obj::owned(fd, st, d.verified);
                    if set.size.is_some() {
                        let s = SetAttr {
                            size: set.size,
                            ..SetAttr::default()
                        };
                        fs.apply_set(call, &o, &s)?;
                        o.st = sys::fstat(o.raw())?;
                    }
                    fs.created(call, &d, name, o)
                }
                Err(e) => Err(e.into()),
            }
        }
        CreateHow::Exclusive(verf) => {
            // The verifier lives in mtime/atime seconds as in knfsd (top
            // bit cleared so any filesystem can store the times).
            let vm = u32::from_be_bytes([verf[0], verf[1], verf[2], verf[3]]) & 0x7fff_ffff;
            let va = u32::from_be_bytes([verf[4], verf[5], verf[6], verf[7]]) & 0x7fff_ffff;
            let t = |s: u32| {
                SetTime::ClientTime(Time {
                    sec: i64::from(s),
                    nsec: 0,
                })
            };
            match exclusive_create(&d, &c, &t(va), &t(vm), fs.tmpfile_creates) {
                Ok(()) => {
                    let fd = sys::open_path(d.raw(), &c)?;
                    let st = sys::fstat(fd.as_raw_fd())?;
                    fs.created(call, &d, name, Obj::owned(fd, st, d.verified))
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
                    fs.created(call, &d, name, Obj::owned(fd, st, d.verified))
                }
                Err(e) => Err(e.into()),
            }
        }
    }
}

pub(super) fn mkdir(
    fs: &LocalFs,
    call: &Call<'_>,
    dir: &Fh,
    name: &[u8],
    set: &SetAttr,
) -> FsResult<Created> {
    let c = check_name(name, false)?;
    let d = fs.dir(call, dir)?;
    fs.as_caller(call.cred)?;
    fs.changing(call, false)?;
    sys::mkdirat(d.raw(), &c, set.mode.unwrap_or(0o777) & 0o7777)?;
    fs.finish_create(call, &d, name, &c, set)
}

pub(super) fn symlink(
    fs: &LocalFs,
    call: &Call<'_>,
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
    let d = fs.dir(call, dir)?;
    fs.as_caller(call.cred)?;
    fs.changing(call, false)?;
    sys::symlinkat(&t, d.raw(), &c)?;
    let set = SetAttr {
        mode: None,
        ..set.clone()
    };
    fs.finish_create(call, &d, name, &c, &set)
}

pub(super) fn mknod(
    fs: &LocalFs,
    call: &Call<'_>,
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
    let d = fs.dir(call, dir)?;
    fs.as_caller(call.cred)?;
    fs.changing(call, false)?;
    sys::mknodat(d.raw(), &c, fmt | (set.mode.unwrap_or(0o666) & 0o7777), dev)?;
    fs.finish_create(call, &d, name, &c, set)
}

/// Whether removing the name of `st` frees a large file's blocks in the
/// call (`INLINE_FREE_MAX`).
fn frees_much(st: &Stat) -> bool {
    st.is_reg() && st.nlink <= 1 && st.blocks.saturating_mul(512) > INLINE_FREE_MAX
}

pub(super) fn remove(fs: &LocalFs, call: &Call<'_>, dir: &Fh, name: &[u8]) -> FsResult<Wcc> {
    let c = check_name(name, false)?;
    let d = fs.dir(call, dir)?;
    fs.as_caller(call.cred)?;
    let st = super::speculating(call, || sys::statx_at(d.raw(), &c, 0))?;
    if st.is_dir() {
        return Err(errno(libc::EISDIR));
    }
    fs.changing(call, frees_much(&st))?;
    sys::unlinkat(d.raw(), &c, 0)?;
    fs.unlinked(&d, name, &st);
    fs.sync_change(call, &d, None)?;
    Ok(fs.wcc(&d.st, d.raw()))
}

pub(super) fn rmdir(fs: &LocalFs, call: &Call<'_>, dir: &Fh, name: &[u8]) -> FsResult<Wcc> {
    let c = check_name(name, false)?;
    let d = fs.dir(call, dir)?;
    fs.as_caller(call.cred)?;
    fs.changing(call, false)?;
    let st = sys::statx_at(d.raw(), &c, 0)?;
    if !st.is_dir() {
        return Err(errno(libc::ENOTDIR));
    }
    sys::unlinkat(d.raw(), &c, libc::AT_REMOVEDIR)?;
    fs.unlinked(&d, name, &st);
    fs.sync_change(call, &d, None)?;
    Ok(fs.wcc(&d.st, d.raw()))
}

pub(super) fn rename(
    fs: &LocalFs,
    call: &Call<'_>,
    from_dir: &Fh,
    from: &[u8],
    to_dir: &Fh,
    to: &[u8],
) -> FsResult<(Wcc, Wcc)> {
    let cf = check_name(from, false)?;
    let ct = check_name(to, false)?;
    let d1 = fs.dir(call, from_dir)?;
    let d2 = fs.dir(call, to_dir)?;
    fs.as_caller(call.cred)?;
    let moved = super::speculating(call, || sys::statx_at(d1.raw(), &cf, 0))?;
    let replaced = super::speculating(call, || sys::statx_at(d2.raw(), &ct, 0)).ok();
    let frees = replaced
        .as_ref()
        .is_some_and(|r| r.key() != moved.key() && frees_much(r));
    fs.changing(call, frees)?;
    // Renaming a name onto a link of the same inode is a successful no-op
    // in the kernel, as POSIX asks.
    sys::renameat(d1.raw(), &cf, d2.raw(), &ct)?;
    if let Some(r) = replaced {
        if r.key() != moved.key() {
            fs.unlinked(&d2, to, &r);
        }
    }
    fs.locs.insert(moved.key(), d2.st.key(), to);
    fs.sync_rename(call, &d1, &d2, moved.is_dir())?;
    Ok((fs.wcc(&d1.st, d1.raw()), fs.wcc(&d2.st, d2.raw())))
}

pub(super) fn link(
    fs: &LocalFs,
    call: &Call<'_>,
    file: &Fh,
    dir: &Fh,
    name: &[u8],
) -> FsResult<(Attr, Wcc)> {
    let c = check_name(name, false)?;
    let f = fs.resolve(call, file)?;
    if f.st.is_dir() {
        return Err(errno(libc::EISDIR));
    }
    let d = fs.dir(call, dir)?;
    fs.as_caller(call.cred)?;
    fs.changing(call, false)?;
    match sys::link_fd(f.raw(), d.raw(), &c) {
        // fs.protected_hardlinks is the linkat syscall's check
        // (may_linkat), which knfsd's vfs_link never makes: the client's
        // kernel applies its own setting before it sends LINK. So the
        // server host's setting must not refuse what knfsd allows; the
        // directory's permissions are still the caller's.
        Err(e) if e.raw_os_error() == Some(libc::EPERM) && fs.opts.act_as_caller => {
            sys::with_fowner(e, || sys::link_fd(f.raw(), d.raw(), &c))?
        }
        r => r?,
    }
    fs.sync_change(call, &d, Some(&f))?;
    let st = sys::fstat(f.raw())?;
    Ok((fs.attr(&st), fs.wcc(&d.st, d.raw())))
}
