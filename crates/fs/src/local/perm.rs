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
        self.as_caller(cred)?;
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
    /// never cache a grant the server then refuses. First one question for
    /// all the permissions (r, w, x) the mode bits predict: a yes grants
    /// each of them (one ACL entry or class held them all, or a capability
    /// did). Then one question per permission still unknown (a no to the
    /// first, or a permission the mode bits deny but an ACL may give): the
    /// kernel decides every bit either way, in one syscall where the mode
    /// bits are right. Leaves the thread as the caller.
    pub(super) fn kernel_access(&self, cred: &Cred, o: &Obj<'_>, want: u32) -> FsResult<u32> {
        self.as_caller(cred)?;
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
        let need_x = want & xbit != 0 || (dir && want & wbits != 0);
        let need = [
            (want & ACCESS3_READ != 0, libc::R_OK),
            (need_x, libc::X_OK),
            (want & wbits != 0, libc::W_OK),
        ]
        .iter()
        .filter(|(n, _)| *n)
        .fold(0, |m, (_, b)| m | b);
        let st = &o.st;
        let predicted = need & crate::access::mode_rwx(dir, st.mode, st.uid, st.gid, cred) as i32;
        // Granted, and denied (a no to a question of one permission).
        let (known, denied) = match predicted {
            0 => (0, 0),
            p if ask(p) => (p, 0),
            p if p.count_ones() == 1 => (0, p),
            _ => (0, 0),
        };
        // A regular file without any x bit is executable by no one, so the
        // kernel is not asked: ACL entries other than the owner's are
        // capped by the group bits (the mask), and CAP_DAC_OVERRIDE grants
        // execute on a non-directory only with an x bit somewhere
        // (generic_permission). Most files, asked EXECUTE by every Linux
        // client's ACCESS, then cost one question, not two.
        let never = if st.is_reg() && st.mode & 0o111 == 0 {
            libc::X_OK
        } else {
            0
        };
        let has = |m: i32| need & m != 0 && (denied | never) & m == 0 && (known & m != 0 || ask(m));
        let mut g = 0;
        if has(libc::R_OK) {
            g |= ACCESS3_READ;
        }
        let x = has(libc::X_OK);
        if x {
            g |= xbit;
        }
        if (!dir || x) && has(libc::W_OK) {
            g |= wbits;
        }
        Ok(g & want)
    }
}

pub(super) use crate::access::{
    ACCESS3_DELETE, ACCESS3_EXECUTE, ACCESS3_EXTEND, ACCESS3_LOOKUP, ACCESS3_MODIFY, ACCESS3_READ,
};

/// `crate::access::access_bits` for a local object.
pub(super) fn access_bits(st: &Stat, cred: &Cred, want: u32) -> u32 {
    crate::access::access_bits(st.is_dir(), st.mode, st.uid, st.gid, cred, want)
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
