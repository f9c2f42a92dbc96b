//! Permission: the ACCESS3 bits a caller holds, and whether a caller may
//! use a file's data through a descriptor the server opened.

use super::files::Access;
use super::sys::{self, Stat};
use super::{io_errno, LocalFs, Obj};
use crate::{Cred, FsResult};

impl LocalFs {
    /// Whether the caller may read (or write) a regular file's data, as
    /// knfsd's nfsd_permission decides for READ and WRITE: the kernel's own
    /// answer for the caller's credentials (POSIX ACLs, read-only mounts and
    /// immutable files included), then, where that is EACCES, the owner
    /// override (a client may write a file it created read-only: permission
    /// was checked at open time on the client) and, for reading, execute
    /// permission in place of read. Leaves the thread as the caller.
    pub(super) fn may_use_data(&self, cred: &Cred, o: &Obj<'_>, access: Access) -> FsResult<()> {
        if !self.opts.act_as_caller {
            // Every call is the server user's, who opened the descriptor.
            return Ok(());
        }
        self.usr(cred)?;
        let mode = match access {
            Access::Read => libc::R_OK,
            Access::Write => libc::W_OK,
        };
        match sys::may_access(o.raw(), mode) {
            Ok(()) => Ok(()),
            Err(e) if io_errno(&e) == libc::EACCES => {
                if o.st.uid == cred.uid
                    || (access == Access::Read && sys::may_access(o.raw(), libc::X_OK).is_ok())
                {
                    Ok(())
                } else {
                    Err(e.into())
                }
            }
            Err(e) => Err(e.into()),
        }
    }
}

impl LocalFs {
    /// The ACCESS3 bits the caller holds, asked of the kernel as the caller
    /// (faccessat2 with AT_EACCESS under its fsuid, fsgid and groups), as
    /// knfsd's nfsd_access asks inode_permission: POSIX ACLs, read-only
    /// mounts and immutable files answer as they will at open, so clients
    /// never cache a grant the server then refuses. One question per
    /// permission asked for (r, w, x: at most three). Leaves the thread as
    /// the caller.
    pub(super) fn kernel_access(&self, cred: &Cred, o: &Obj<'_>, want: u32) -> FsResult<u32> {
        self.usr(cred)?;
        let ask = |mode| sys::may_access(o.raw(), mode).is_ok();
        let dir = o.st.is_dir();
        // Directories: LOOKUP is x; MODIFY, EXTEND and DELETE need w and x
        // (a name is changed in it). Others: EXECUTE is x, MODIFY and
        // EXTEND are w.
        let (xbit, wbits) = if dir {
            (
                ACCESS3_LOOKUP,
                ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE,
            )
        } else {
            (ACCESS3_EXECUTE, ACCESS3_MODIFY | ACCESS3_EXTEND)
        };
        let mut g = 0;
        if want & ACCESS3_READ != 0 && ask(libc::R_OK) {
            g |= ACCESS3_READ;
        }
        let need_x = want & xbit != 0 || (dir && want & wbits != 0);
        let x = need_x && ask(libc::X_OK);
        if x {
            g |= xbit;
        }
        if want & wbits != 0 && (!dir || x) && ask(libc::W_OK) {
            g |= wbits;
        }
        Ok(g & want)
    }
}

pub(super) const ACCESS3_READ: u32 = 0x1;
pub(super) const ACCESS3_LOOKUP: u32 = 0x2;
pub(super) const ACCESS3_MODIFY: u32 = 0x4;
pub(super) const ACCESS3_EXTEND: u32 = 0x8;
pub(super) const ACCESS3_DELETE: u32 = 0x10;
pub(super) const ACCESS3_EXECUTE: u32 = 0x20;

/// RFC 1813 ACCESS3 bits `cred` holds on an object with `st`, from the mode
/// bits as knfsd maps them (directories: READ=r, LOOKUP=x, MODIFY/EXTEND/
/// DELETE=w+x; others: READ=r, MODIFY/EXTEND=w, EXECUTE=x). Root gets all
/// but EXECUTE on a non-directory with no x bit at all.
pub(super) fn access_bits(st: &Stat, cred: &Cred, want: u32) -> u32 {
    let dir = st.is_dir();
    let all = if dir {
        ACCESS3_READ | ACCESS3_LOOKUP | ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE
    } else {
        ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_EXECUTE
    };
    if cred.uid == 0 {
        let mut g = all;
        if !dir && st.mode & 0o111 == 0 {
            g &= !ACCESS3_EXECUTE;
        }
        return g & want;
    }
    let perm = if st.uid == cred.uid {
        (st.mode >> 6) & 7
    } else if st.gid == cred.gid || cred.gids.contains(&st.gid) {
        (st.mode >> 3) & 7
    } else {
        st.mode & 7
    };
    let (r, w, x) = (perm & 4 != 0, perm & 2 != 0, perm & 1 != 0);
    let mut g = 0;
    if r {
        g |= ACCESS3_READ;
    }
    if dir {
        if x {
            g |= ACCESS3_LOOKUP;
        }
        if w && x {
            g |= ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE;
        }
    } else {
        if w {
            g |= ACCESS3_MODIFY | ACCESS3_EXTEND;
        }
        if x {
            g |= ACCESS3_EXECUTE;
        }
    }
    g & want
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Time;

    fn st(mode: u32, uid: u32, gid: u32) -> Stat {
        Stat {
            mode,
            nlink: 1,
            uid,
            gid,
            size: 0,
            blocks: 0,
            rdev: (0, 0),
            dev: 1,
            ino: 2,
            mnt_id: 3,
            atime: Time::default(),
            mtime: Time::default(),
            ctime: Time::default(),
            btime: None,
        }
    }

    fn cred(uid: u32, gid: u32, gids: &[u32]) -> Cred {
        Cred {
            uid,
            gid,
            gids: gids.to_vec(),
        }
    }

    #[test]
    fn access_mapping() {
        let all = 0x3f;
        let f = st(libc::S_IFREG | 0o640, 10, 20);
        assert_eq!(access_bits(&f, &cred(10, 1, &[]), all), 0x1 | 0x4 | 0x8);
        assert_eq!(access_bits(&f, &cred(11, 20, &[]), all), 0x1);
        assert_eq!(access_bits(&f, &cred(11, 1, &[20]), all), 0x1);
        assert_eq!(access_bits(&f, &cred(11, 1, &[]), all), 0);
        assert_eq!(access_bits(&f, &cred(0, 0, &[]), all), 0x1 | 0x4 | 0x8);
        let x = st(libc::S_IFREG | 0o701, 10, 20);
        assert_eq!(
            access_bits(&x, &cred(0, 0, &[]), all),
            0x1 | 0x4 | 0x8 | 0x20
        );
        assert_eq!(access_bits(&x, &cred(12, 1, &[]), all), 0x20);
        let d = st(libc::S_IFDIR | 0o750, 10, 20);
        assert_eq!(access_bits(&d, &cred(10, 1, &[]), all), 0x1f);
        assert_eq!(access_bits(&d, &cred(11, 20, &[]), all), 0x3);
        assert_eq!(access_bits(&d, &cred(0, 0, &[]), all), 0x1f);
        assert_eq!(access_bits(&d, &cred(10, 1, &[]), 0x2), 0x2);
    }
}
