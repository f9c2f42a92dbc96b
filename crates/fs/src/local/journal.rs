//! One journal commit answers every metadata change made before it.
//!
//! ext4 (with a journal) and XFS keep one log per filesystem and commit it
//! in order: an fsync waits for the commit of the transaction holding the
//! inode's last change, and that commit carries every earlier transaction
//! (jbd2 commits transactions one after another; XFS forces its log up to
//! a sequence number). So a sync that changes a marker inode *after*
//! several namespace changes completed and then fsyncs it makes all of
//! them durable at once, whichever objects they touched. On a `sync`
//! export this turns one sync per changed object (the new inode, its
//! directory, both directories of a RENAME) into one shared journal commit
//! for every change that arrives together (RFC 1813 §4.8; knfsd's
//! `commit_metadata` is per inode). A CREATE whose commit nobody else can
//! join syncs the file it made instead (`commit.rs`).
//!
//! The marker is an unnamed file (O_TMPFILE) in the export root: on the
//! same filesystem, invisible to clients, freed at exit or by the journal
//! replay after a crash; one descriptor per export, held like the export
//! root's own (outside the caches' descriptor budget). Calls served by the
//! transport's pools do not wait for the commit while anything else
//! commits: they owe it to the export's commit threads (`commit_threads`,
//! `crate::owed`), which send their replies once it is done; a call alone
//! commits itself. Metadata only: file data is written
//! back first, then the commit after it covers it (ext4, and XFS without
//! a realtime device: `commit.rs`, `sync_data`; elsewhere the
//! file's own fsync). Other
//! filesystems (btrfs, whose fsync logs one inode; ext2 or ext4 without a
//! journal; tmpfs; FUSE) keep one sync per object.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use std::sync::Arc;

use super::sys;
use crate::owed::Commits;
use crate::{SetTime, WriteVerifier};

const EXT4_SUPER_MAGIC: i64 = 0xEF53;
const XFS_SUPER_MAGIC: i64 = 0x5846_5342;

/// Journal commits in flight per filesystem: as many as the export's sync
/// slots (`max_syncs_in_flight`) allow. A request must reach a transaction
/// that has not begun to commit; only the kernel knows which that is, so
/// a new commit never waits for one already running (jbd2 and the XFS log
/// merge the concurrent ones), and requests gather into a shared one only
/// once every slot is taken. Measured against one at a time (fs_mark, 64
/// streams, 5 alternated rounds): 1.40x.
pub(super) const DEPTH: usize = usize::MAX;

pub(super) struct Journal {
    marker: OwnedFd,
    /// The filesystem (st_dev) the marker is on; only changes there are
    /// covered.
    pub(super) dev: u64,
    /// A commit after a file's data was written back makes that data
    /// durable too (`commit.rs`, `sync_data`): ext4 (jbd2), and XFS
    /// without a realtime device (`data_covered`).
    pub(super) covers_data: bool,
}

impl Journal {
    /// A marker for the filesystem of `root`, if its journal commits every
    /// change in order; None otherwise (or if no marker can be made there,
    /// for example a read-only export).
    pub(super) fn open(root: RawFd, dev: u64, mnt_id: u64) -> Option<Journal> {
        if !ordered_journal(root, dev) {
            return None;
        }
        let covers_data = data_covered(root, mnt_id);
        let marker = sys::openat(
            root,
            c".",
            libc::O_TMPFILE | libc::O_RDWR | libc::O_NOFOLLOW,
            0o600,
        )
        .ok()?;
        Some(Journal {
            marker,
            dev,
            covers_data,
        })
    }

    /// Commits the journal: a fresh change to the marker (in the running
    /// transaction, which is at least as new as every change made before
    /// this call), then its fsync.
    pub(super) fn commit(&self) -> io::Result<()> {
        let fd = self.marker.as_raw_fd();
        sys::set_times(fd, &SetTime::ServerTime, &SetTime::ServerTime)?;
        sys::fsync(fd)
    }
}

/// The threads that commit `j` for calls that owe a commit
/// (`crate::owed`): as the server (the marker is its own); a failure
/// resets the write verifier, as a failed sync does (`commit.rs`).
/// `batch`: the threads run under SCHED_BATCH (`rnfsd_pool::sched`).
pub(super) fn commit_threads(
    j: &Arc<Journal>,
    threads: usize,
    batch: bool,
    verifier: &Arc<WriteVerifier>,
    uid: u32,
    gid: u32,
) -> io::Result<Arc<Commits>> {
    let (j, v) = (j.clone(), verifier.clone());
    Commits::start(
        "rnfsd-journal",
        threads,
        move || {
            let _ = super::creds::become_server(uid, gid);
            if batch {
                if let Err(e) = rnfsd_pool::sched::batch_current_thread() {
                    tracing::warn!("cannot set SCHED_BATCH on a journal commit thread: {e}");
                }
            }
        },
        move || j.commit(),
        move |e| v.reset(e),
    )
}

/// Whether the marker's commit, after a file's data was written back,
/// makes that data durable as the file's own fsync would. ext4's fsync
/// (`ext4_sync_file`) is that: write and wait, then a commit whose commit
/// block's cache flush covers the data. XFS's (`xfs_file_fsync`) is that
/// too, except that a realtime file's data on a separate realtime device
/// needs that device's cache flushed, which only the file's own fsync
/// does: so not on XFS mounted with a realtime device (`rtdev=`).
fn data_covered(root: RawFd, mnt_id: u64) -> bool {
    match sys::fs_type(root) {
        Ok(EXT4_SUPER_MAGIC) => true,
        Ok(XFS_SUPER_MAGIC) => sys::super_options(mnt_id)
            .is_some_and(|o| !o.split(',').any(|w| w.starts_with("rtdev="))),
        _ => false,
    }
}

/// XFS always; ext4 (whose magic ext2 and ext3 share) only when the
/// filesystem has a jbd2 journal, which the kernel lists under
/// /proc/fs/jbd2/<device>-<journal inode>. (ext4 with fast commits never
/// gets here: `LocalFs::open` asks `fast_commits_at` first.)
fn ordered_journal(root: RawFd, dev: u64) -> bool {
    match sys::fs_type(root) {
        Ok(XFS_SUPER_MAGIC) => true,
        Ok(EXT4_SUPER_MAGIC) => block_name(dev).is_some_and(|n| has_jbd2(&n)),
        _ => false,
    }
}

/// Whether the export's filesystem is ext4 making fsyncs fast commits,
/// where no `O_TMPFILE` file may be made, neither the marker nor an
/// EXCLUSIVE create's (its replay fails: `fast_commits`); unknown counts
/// as yes.
pub(super) fn fast_commits_at(root: RawFd, dev: u64) -> bool {
    matches!(sys::fs_type(root), Ok(EXT4_SUPER_MAGIC))
        && block_name(dev).is_none_or(|n| fast_commits(&n))
}

/// The block device's kernel name ("loop1", "vda2") of `dev`, as
/// `sys::Stat` encodes it: major in the high 32 bits.
fn block_name(dev: u64) -> Option<String> {
    let (major, minor) = (dev >> 32, dev & 0xffff_ffff);
    let link = std::fs::read_link(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    Some(link.file_name()?.to_str()?.to_owned())
}

/// Whether ext4 on `name` makes fsyncs fast commits (the `fast_commit`
/// feature, or the debug mount option `fc_debug_force`; ext4 lists the
/// latter in its options either way). There an fsync of an unlinked
/// inode, which the marker is, or of a file made with `O_TMPFILE` then
/// linked, leaves a journal that Linux 6.18 cannot replay after a
/// simulated crash (`xfs_io -x -c shutdown`; "JBD2: journal recovery
/// failed": the filesystem no longer mounts; docs/durability.md), so such
/// a filesystem syncs per object and makes EXCLUSIVE creates by name.
/// Unreadable options count as fast commits.
fn fast_commits(name: &str) -> bool {
    std::fs::read_to_string(format!("/proc/fs/ext4/{name}/options")).map_or(true, |o| {
        o.split_whitespace().any(|w| w == "fc_debug_force")
    })
}

fn has_jbd2(name: &str) -> bool {
    let prefix = format!("{name}-");
    std::fs::read_dir("/proc/fs/jbd2")
        .map(|d| {
            d.flatten().any(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with(&prefix))
            })
        })
        .unwrap_or(false)
}
