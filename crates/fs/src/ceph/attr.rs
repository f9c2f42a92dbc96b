//! GETATTR, SETATTR, ACCESS, FSSTAT and what FSINFO and PATHCONF say.

use std::sync::Arc;

use super::ffi::{self, Statx};
use super::{err, perm, Inner};
use crate::{
    Attr, Cred, Fh, FileType, FsError, FsInfo, FsResult, FsStat, PathConf, PreAttr, SetAttr,
    SetTime, Time, Wcc,
};

fn time(t: &libc::timespec) -> Time {
    Time {
        sec: t.tv_sec,
        nsec: t.tv_nsec as u32,
    }
}

fn ftype(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFBLK => FileType::BlockDev,
        libc::S_IFCHR => FileType::CharDev,
        libc::S_IFSOCK => FileType::Socket,
        libc::S_IFIFO => FileType::Fifo,
        _ => FileType::Regular,
    }
}

/// fattr3 from libcephfs's statx; `fsid` is the export's configured one.
pub(super) fn to_attr(st: &Statx, fsid: u64) -> Attr {
    let mode = u32::from(st.mode);
    Attr {
        ftype: ftype(mode),
        mode: mode & 0o7777,
        nlink: st.nlink,
        uid: st.uid,
        gid: st.gid,
        size: st.size,
        used: st.blocks.saturating_mul(512),
        rdev: (libc::major(st.rdev), libc::minor(st.rdev)),
        fsid,
        fileid: st.ino,
        atime: time(&st.atime),
        mtime: time(&st.mtime),
        ctime: time(&st.ctime),
    }
}

pub(super) fn is_dir(st: &Statx) -> bool {
    u32::from(st.mode) & libc::S_IFMT == libc::S_IFDIR
}

/// The ACCESS3 bits of `want` that the r, w and x permissions `rwx` give
/// (`crate::access::rwx_access3`, knfsd's mapping).
pub(super) fn access3(dir: bool, rwx: u32, want: u32) -> u32 {
    crate::access::rwx_access3(dir, rwx, want)
}

/// CephFS's default `max_file_size` (1 TiB); the MDS refuses larger.
const MAX_FILE_SIZE: u64 = 1 << 40;

pub(super) const FSINFO: FsInfo = FsInfo {
    maxfilesize: MAX_FILE_SIZE,
    time_delta: Time { sec: 0, nsec: 1 },
    link: true,
    symlink: true,
    homogeneous: true,
    cansettime: true,
};

pub(super) const PATHCONF: PathConf = PathConf {
    linkmax: u32::MAX,
    name_max: crate::access::NAME_MAX as u32,
    no_trunc: true,
    chown_restricted: true,
    case_insensitive: false,
    case_preserving: true,
};

/// libcephfs's setattr mask and values for a sattr3.
pub(super) fn to_setattr(set: &SetAttr) -> (Statx, i32) {
    let mut st = Statx::default();
    let mut mask = 0;
    if let Some(m) = set.mode {
        st.mode = (m & 0o7777) as u16;
        mask |= ffi::SETATTR_MODE;
    }
    if let Some(u) = set.uid {
        st.uid = u;
        mask |= ffi::SETATTR_UID;
    }
    if let Some(g) = set.gid {
        st.gid = g;
        mask |= ffi::SETATTR_GID;
    }
    if let Some(s) = set.size {
        st.size = s;
        mask |= ffi::SETATTR_SIZE;
    }
    let ts = |t: Time| libc::timespec {
        tv_sec: t.sec,
        tv_nsec: i64::from(t.nsec),
    };
    // libcephfs takes the *_NOW flags for its permission check (write
    // access suffices, as for utimensat(UTIME_NOW)) and stores the time it
    // is given: give it the time now (the kernel client's test found 1970).
    // Read once, and only when asked for (most SETATTRs set no time to now).
    let mut clock = None;
    let mut now = || {
        *clock.get_or_insert_with(|| {
            let d = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            libc::timespec {
                tv_sec: d.as_secs() as i64,
                tv_nsec: i64::from(d.subsec_nanos()),
            }
        })
    };
    match set.atime {
        SetTime::DontChange => {}
        SetTime::ServerTime => {
            st.atime = now();
            mask |= ffi::SETATTR_ATIME | ffi::SETATTR_ATIME_NOW;
        }
        SetTime::ClientTime(t) => {
            st.atime = ts(t);
            mask |= ffi::SETATTR_ATIME;
        }
    }
    match set.mtime {
        SetTime::DontChange => {}
        SetTime::ServerTime => {
            st.mtime = now();
            mask |= ffi::SETATTR_MTIME | ffi::SETATTR_MTIME_NOW;
        }
        SetTime::ClientTime(t) => {
            st.mtime = ts(t);
            mask |= ffi::SETATTR_MTIME;
        }
    }
    (st, mask)
}

impl Inner {
    pub(super) fn setattr(
        self: &Arc<Self>,
        cred: &Cred,
        fh: &Fh,
        set: &SetAttr,
        guard: Option<Time>,
    ) -> FsResult<Wcc> {
        let n = self.resolve(fh)?;
        let before = self.attrs(&n)?;
        // RFC 1813 §3.3.2: the guard is the ctime the client last saw.
        if guard.is_some_and(|g| g != time(&before.ctime)) {
            return Err(FsError::NotSync);
        }
        let before = PreAttr::from(&to_attr(&before, self.opts.fsid));
        let (mut st, mask) = to_setattr(set);
        if mask != 0 {
            // libcephfs checks the caller's right to each change (owner
            // for mode and times, root for chown, write for size).
            self.m
                .setattr(&n.inode, &mut st, mask, &*perm(cred)?)
                .map_err(err)?;
            self.journal(&[&n])?;
        }
        Ok(Wcc {
            before: Some(before),
            after: self.post(&n),
        })
    }

    pub(super) fn access(
        self: &Arc<Self>,
        cred: &Cred,
        fh: &Fh,
        want: u32,
    ) -> FsResult<(u32, Attr)> {
        let n = self.resolve(fh)?;
        let st = self.attrs(&n)?;
        let granted = access3(is_dir(&st), self.rwx(&n, &st, cred)?, want);
        Ok((granted, to_attr(&st, self.opts.fsid)))
    }

    pub(super) fn fsstat(self: &Arc<Self>, fh: &Fh) -> FsResult<(FsStat, Attr)> {
        let n = self.resolve(fh)?;
        let a = self.attr(&n)?;
        let v = self.m.statfs(&self.root.inode).map_err(err)?;
        let unit = if v.f_frsize != 0 {
            v.f_frsize
        } else {
            v.f_bsize
        };
        Ok((
            FsStat {
                tbytes: v.f_blocks.saturating_mul(unit),
                fbytes: v.f_bfree.saturating_mul(unit),
                abytes: v.f_bavail.saturating_mul(unit),
                tfiles: v.f_files,
                ffiles: v.f_ffree,
                afiles: v.f_favail,
                invarsec: 0,
            },
            a,
        ))
    }
}
