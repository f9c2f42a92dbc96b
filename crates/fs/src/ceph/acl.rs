//! POSIX ACLs in the permission a caller holds on a file's data and in
//! ACCESS, as the kernel's `posix_acl_permission` decides them (the local
//! backend asks the kernel). libcephfs checks ACLs itself for what a caller
//! does as itself (lookups, namespace changes, SETATTR: `client_acl_type`
//! is set at mount), but files are opened once, as the server, so READ,
//! WRITE, ACCESS and lock opens decide here, from the ACL the inode holds.

use std::sync::Arc;

use super::ffi::Statx;
use super::{err, Inner, Node};
use crate::{Cred, FsResult};

/// The access ACL's extended attribute (Linux's posix_acl_xattr format:
/// a version word, then (tag, perm, id) entries, all little-endian).
pub(super) const ACCESS_XATTR: &str = "system.posix_acl_access";

const VERSION: u32 = 2;
const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;

#[derive(Clone, Copy)]
struct Entry {
    tag: u16,
    perm: u32,
    id: u32,
}

fn entries(acl: &[u8]) -> Option<Vec<Entry>> {
    let (head, body) = acl.split_first_chunk::<4>()?;
    if u32::from_le_bytes(*head) != VERSION || body.len() % 8 != 0 {
        return None;
    }
    Some(
        body.chunks_exact(8)
            .map(|e| Entry {
                tag: u16::from_le_bytes([e[0], e[1]]),
                perm: u32::from(u16::from_le_bytes([e[2], e[3]]) & 7),
                id: u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
            })
            .collect(),
    )
}

/// Whether `acl` gives `cred` (not root) every permission of `want` (r, w,
/// x as 4, 2, 1) on an object owned by `uid`:`gid`: the owner's entry for
/// the owner; else a named user's entry, capped by the mask; else any
/// entry of a group the caller is in that holds all of `want` (capped by
/// the mask), and no access at all if the caller is in such a group but
/// none holds it; else the other entry. A malformed ACL gives nothing
/// (libcephfs refuses such a file with EIO).
fn permits(acl: &[Entry], uid: u32, gid: u32, cred: &Cred, want: u32) -> bool {
    let find = |tag: u16| acl.iter().find(|e| e.tag == tag).map(|e| e.perm);
    let mask = find(MASK).unwrap_or(7);
    let has = |p: u32| p & want == want;
    if cred.uid == uid {
        return find(USER_OBJ).is_some_and(has);
    }
    if let Some(e) = acl.iter().find(|e| e.tag == USER && e.id == cred.uid) {
        return has(e.perm & mask);
    }
    let in_group = |g: u32| cred.gid == g || cred.gids.contains(&g);
    let mut member = false;
    for e in acl {
        let mine = match e.tag {
            GROUP_OBJ => in_group(gid),
            GROUP => in_group(e.id),
            _ => false,
        };
        if mine {
            member = true;
            if has(e.perm & mask) {
                return true;
            }
        }
    }
    !member && find(OTHER).is_some_and(has)
}

/// The r, w and x permissions (4, 2, 1) `acl` gives `cred` (not root), each
/// asked alone; none for a malformed ACL.
pub(super) fn acl_rwx(acl: &[u8], uid: u32, gid: u32, cred: &Cred) -> u32 {
    let Some(acl) = entries(acl) else {
        return 0;
    };
    [4, 2, 1]
        .into_iter()
        .filter(|&w| permits(&acl, uid, gid, cred, w))
        .sum()
}

impl Inner {
    /// The r, w and x permissions (4, 2, 1) `cred` holds on `n` (whose
    /// attributes are `st`): the mode bits, or the inode's access ACL where
    /// it has one. Root holds what the mode bits give it (all but x on a
    /// file with no x bit at all).
    pub(super) fn rwx(&self, n: &Arc<Node>, st: &Statx, cred: &Cred) -> FsResult<u32> {
        let (dir, mode) = (super::attr::is_dir(st), u32::from(st.mode));
        let by_mode = || crate::access::mode_rwx(dir, mode, st.uid, st.gid, cred);
        // The owner's entry is the owner's mode bits (a chmod keeps them
        // the same), and root passes any ACL: no ACL to read.
        if cred.uid == 0 || cred.uid == st.uid {
            return Ok(by_mode());
        }
        let acl = self
            .m
            .getxattr(&n.inode, ACCESS_XATTR, self.server_perm()?)
            .map_err(err)?;
        Ok(match acl {
            Some(a) => acl_rwx(&a, st.uid, st.gid, cred),
            None => by_mode(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(e: &[(u16, u16, u32)]) -> Vec<u8> {
        let mut v = VERSION.to_le_bytes().to_vec();
        for (t, p, id) in e {
            v.extend_from_slice(&t.to_le_bytes());
            v.extend_from_slice(&p.to_le_bytes());
            v.extend_from_slice(&id.to_le_bytes());
        }
        v
    }

    fn cred(uid: u32, gid: u32, gids: &[u32]) -> Cred {
        Cred {
            uid,
            gid,
            gids: gids.to_vec(),
        }
    }

    const ANY: u32 = u32::MAX;

    #[test]
    fn entries_decide_as_the_kernel_does() {
        // user::rw- user:2000:--- user:3000:rwx group::r-- group:50:-wx
        // mask::r-x other::r-- on a file of 1000:100.
        let a = acl(&[
            (USER_OBJ, 6, ANY),
            (USER, 0, 2000),
            (USER, 7, 3000),
            (GROUP_OBJ, 4, ANY),
            (GROUP, 3, 50),
            (MASK, 5, ANY),
            (OTHER, 4, ANY),
        ]);
        let rwx = |c: &Cred| acl_rwx(&a, 1000, 100, c);
        // The owner: its own entry, not masked.
        assert_eq!(rwx(&cred(1000, 1, &[])), 6);
        // A named user: its entry (nothing), not the other entry.
        assert_eq!(rwx(&cred(2000, 1, &[])), 0);
        // A named user capped by the mask.
        assert_eq!(rwx(&cred(3000, 1, &[])), 5);
        // The owning group; a named group capped by the mask (-wx & r-x).
        assert_eq!(rwx(&cred(4000, 100, &[])), 4);
        assert_eq!(rwx(&cred(4000, 1, &[50])), 1);
        // In both groups: each permission from whichever group has it.
        assert_eq!(rwx(&cred(4000, 100, &[50])), 5);
        // Nobody in particular: the other entry.
        assert_eq!(rwx(&cred(4000, 1, &[])), 4);
        // A group member whose groups hold nothing gets nothing, not other.
        let b = acl(&[
            (USER_OBJ, 7, ANY),
            (GROUP_OBJ, 0, ANY),
            (MASK, 7, ANY),
            (OTHER, 7, ANY),
        ]);
        assert_eq!(acl_rwx(&b, 1000, 100, &cred(4000, 100, &[])), 0);
        assert_eq!(acl_rwx(&b, 1000, 100, &cred(4000, 1, &[])), 7);
    }

    #[test]
    fn access3_maps_as_the_mode_bits_do() {
        // Each permission set, put in the mode's "other" class.
        let nobody = cred(2, 2, &[]);
        for dir in [false, true] {
            for p in 0..8 {
                assert_eq!(
                    super::super::attr::access3(dir, p, 0x3f),
                    crate::access::access_bits(dir, p, 1, 1, &nobody, 0x3f),
                    "dir {dir}, rwx {p:o}"
                );
            }
        }
    }

    #[test]
    fn malformed_acls_give_nothing() {
        let c = cred(4000, 1, &[]);
        assert_eq!(acl_rwx(&[], 1000, 100, &c), 0);
        let mut a = acl(&[(OTHER, 7, ANY)]);
        assert_eq!(acl_rwx(&a, 1000, 100, &c), 7);
        a.push(0);
        assert_eq!(acl_rwx(&a, 1000, 100, &c), 0);
        let mut v1 = acl(&[(OTHER, 7, ANY)]);
        v1[0] = 1;
        assert_eq!(acl_rwx(&v1, 1000, 100, &c), 0);
    }
}
