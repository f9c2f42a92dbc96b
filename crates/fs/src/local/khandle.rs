//! Which inode a kernel file handle names, for the filesystems whose handle
//! layout is fixed and known (each one's `encode_fh`). READDIRPLUS makes an
//! entry's attributes and its handle by name, in two calls; a rename
//! between them would pair one object's handle with another's attributes
//! (RFC 1813 §3.3.17 gives the attributes of the object the handle names).
//! Comparing the inode inside the handle with the attributes' finds that
//! race without a third syscall; where the layout is not known, the caller
//! opens the name once and asks both questions of the descriptor.

/// statfs f_type values (linux/magic.h).
const EXT4_SUPER_MAGIC: i64 = 0xEF53;
const XFS_SUPER_MAGIC: i64 = 0x5846_5342;
const TMPFS_MAGIC: i64 = 0x0102_1994;
const BTRFS_SUPER_MAGIC: i64 = 0x9123_683E;

/// FILEID_INO32_GEN and FILEID_INO32_GEN_PARENT (linux/exportfs.h).
const INO32_GEN: i32 = 1;
const INO32_GEN_PARENT: i32 = 2;
/// XFS: the same types with XFS_FILEID_TYPE_64FLAG, a u64 inode first.
const XFS_INO64_GEN: i32 = 0x81;
const XFS_INO64_GEN_PARENT: i32 = 0x82;
/// btrfs: BTRFS_FID_NON_CONNECTABLE, _CONNECTABLE, _CONNECTABLE_ROOT; a
/// u64 objectid (the inode number statx reports) first.
const BTRFS_FIDS: [i32; 3] = [0x4d, 0x4e, 0x4f];

/// How an export's filesystem lays out its handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Layout {
    /// ext2, ext3, ext4: `generic_encode_ino32_fh`, u32 inode then u32
    /// generation.
    Ext4,
    /// `xfs_fs_encode_fh`: u32 or (with the 64-bit flag) u64 inode first.
    Xfs,
    /// `shmem_encode_fh`: u32 generation, then the inode's low and high u32.
    Tmpfs,
    /// `btrfs_encode_fh`: u64 objectid first.
    Btrfs,
    Unknown,
}

impl Layout {
    pub fn of(fs_magic: i64) -> Layout {
        match fs_magic {
            EXT4_SUPER_MAGIC => Layout::Ext4,
            XFS_SUPER_MAGIC => Layout::Xfs,
            TMPFS_MAGIC => Layout::Tmpfs,
            BTRFS_SUPER_MAGIC => Layout::Btrfs,
            _ => Layout::Unknown,
        }
    }

    /// The inode number `bytes` (of kernel handle type `htype`) names, when
    /// this layout is known for that type; None means "cannot tell".
    pub fn ino(self, htype: i32, bytes: &[u8]) -> Option<u64> {
        let u32_at = |i: usize| {
            let b = bytes.get(i..i + 4)?;
            Some(u64::from(u32::from_ne_bytes(b.try_into().ok()?)))
        };
        let u64_at = |i: usize| {
            let b = bytes.get(i..i + 8)?;
            Some(u64::from_ne_bytes(b.try_into().ok()?))
        };
        match (self, htype) {
            (Layout::Ext4 | Layout::Xfs, INO32_GEN | INO32_GEN_PARENT) => u32_at(0),
            (Layout::Xfs, XFS_INO64_GEN | XFS_INO64_GEN_PARENT) => u64_at(0),
            (Layout::Tmpfs, INO32_GEN) if bytes.len() == 12 => {
                Some(u32_at(4)? | (u32_at(8)? << 32))
            }
            (Layout::Btrfs, t) if BTRFS_FIDS.contains(&t) => u64_at(0),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ne32(v: &[u32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    #[test]
    fn known_layouts_give_the_inode() {
        let ext = ne32(&[1234, 99]);
        assert_eq!(Layout::Ext4.ino(1, &ext), Some(1234));
        assert_eq!(Layout::Xfs.ino(1, &ext), Some(1234));
        let mut x64 = (5u64 << 33 | 7).to_ne_bytes().to_vec();
        x64.extend(ne32(&[3]));
        assert_eq!(Layout::Xfs.ino(0x81, &x64), Some(5 << 33 | 7));
        // tmpfs: generation first, then the inode's halves.
        assert_eq!(Layout::Tmpfs.ino(1, &ne32(&[77, 9, 1])), Some(1 << 32 | 9));
        let mut b = 42u64.to_ne_bytes().to_vec();
        b.extend(5u64.to_ne_bytes());
        b.extend(ne32(&[1]));
        assert_eq!(Layout::Btrfs.ino(0x4d, &b), Some(42));
    }

    #[test]
    fn unknown_types_and_short_handles_tell_nothing() {
        assert_eq!(Layout::Unknown.ino(1, &ne32(&[1, 2])), None);
        assert_eq!(Layout::Ext4.ino(0x81, &[0; 12]), None);
        assert_eq!(Layout::Ext4.ino(1, &[0; 3]), None);
        assert_eq!(Layout::Tmpfs.ino(1, &ne32(&[1, 2])), None);
        assert_eq!(Layout::Xfs.ino(0x81, &[0; 7]), None);
        assert_eq!(Layout::of(0x6969), Layout::Unknown); // NFS
        assert_eq!(Layout::of(0xEF53), Layout::Ext4);
    }
}
