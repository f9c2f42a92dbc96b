//! Extended attributes of the `user.` namespace, as every backend serves
//! them (NFSv4.2's GETXATTR, SETXATTR, LISTXATTRS, REMOVEXATTR, RFC 8276):
//! names are given and listed without the prefix, which the backend adds,
//! so no other namespace (`trusted.`, `security.`, `system.`) is ever
//! reached. Bounds are Linux's (`<linux/limits.h>`).

use std::ffi::CString;

use crate::{FsError, FsResult};

/// The namespace served, prefixed to every name.
pub const USER_PREFIX: &[u8] = b"user.";
/// Linux XATTR_NAME_MAX: the longest full name (prefix included).
pub const XATTR_NAME_MAX: usize = 255;
/// The longest name a client may give (the prefix is ours).
pub const NAME_MAX: usize = XATTR_NAME_MAX - USER_PREFIX.len();
/// Linux XATTR_SIZE_MAX: the largest value.
pub const XATTR_SIZE_MAX: usize = 1 << 16;
/// Linux XATTR_LIST_MAX: the largest list of names (all namespaces,
/// NUL-terminated) one listxattr returns.
pub const XATTR_LIST_MAX: usize = 1 << 16;

/// What SETXATTR may find (RFC 8276 §8.4.2 setxattr_option4; Linux's
/// XATTR_CREATE and XATTR_REPLACE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XattrSet {
    /// Create or replace.
    Either,
    /// Only a new one: EEXIST if present.
    Create,
    /// Only an existing one: ENODATA if absent.
    Replace,
}

/// The full name (`user.` + `name`) as the kernel takes it. Empty, or
/// with a NUL: EINVAL; longer than `NAME_MAX`: ENAMETOOLONG (knfsd's
/// checks; a '/' is allowed, it is no path).
pub fn full_name(name: &[u8]) -> FsResult<CString> {
    if name.is_empty() {
        return Err(FsError::Errno(libc::EINVAL));
    }
    if name.len() > NAME_MAX {
        return Err(FsError::Errno(libc::ENAMETOOLONG));
    }
    let mut full = Vec::with_capacity(USER_PREFIX.len() + name.len() + 1);
    full.extend_from_slice(USER_PREFIX);
    full.extend_from_slice(name);
    CString::new(full).map_err(|_| FsError::Errno(libc::EINVAL))
}

/// The `user.` names of a listxattr(2) buffer (NUL-terminated names of
/// every namespace), without the prefix, in the kernel's order.
pub fn user_names(list: &[u8]) -> Vec<Vec<u8>> {
    list.split(|&b| b == 0)
        .filter_map(|n| n.strip_prefix(USER_PREFIX))
        .filter(|n| !n.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_get_the_prefix_and_the_bounds() {
        assert_eq!(full_name(b"a").unwrap().as_bytes(), b"user.a");
        assert_eq!(full_name(b"").err(), Some(FsError::Errno(libc::EINVAL)));
        assert_eq!(full_name(b"a\0b").err(), Some(FsError::Errno(libc::EINVAL)));
        let longest = vec![b'n'; NAME_MAX];
        assert_eq!(
            full_name(&longest).unwrap().as_bytes().len(),
            XATTR_NAME_MAX
        );
        assert_eq!(
            full_name(&[b'n'; NAME_MAX + 1]).err(),
            Some(FsError::Errno(libc::ENAMETOOLONG))
        );
    }

    #[test]
    fn only_user_names_are_listed() {
        let list = b"security.selinux\0user.b\0trusted.x\0user.a\0user.\0";
        assert_eq!(user_names(list), vec![b"b".to_vec(), b"a".to_vec()]);
        assert!(user_names(b"").is_empty());
    }
}
