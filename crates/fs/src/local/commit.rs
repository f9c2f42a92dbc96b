//! Durability before the reply (RFC 1813 §4.8): a COMMIT, a stable WRITE,
//! and on a `sync` export every namespace change and SETATTR, are on
//! stable storage before the reply says so, as knfsd's `commit_metadata`
//! does for its default `sync` exports.
//!
//! Every sync goes through the export's group committer
//! (`crate::durable`): requests for the same object that arrive together
//! share one sync, and the syncs in flight are bounded. Metadata changes on
//! a filesystem with an ordered journal (`journal.rs`) share one journal
//! commit, whatever objects they touched.

use std::os::fd::AsRawFd;
use std::sync::Arc;

use super::files::{Access, OpenFile};
use super::flusher::Running;
use super::sys::{self, Key};
use super::{errno, io_errno, LocalFs, Obj};
use crate::{Call, FsResult};

/// What one sync makes durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum SyncOf {
    /// One object: (identity, full sync rather than data only).
    Object(Key, bool),
    /// Every metadata change on the export's filesystem so far.
    Journal,
}

impl LocalFs {
    /// Runs `sync` for object `key` through the committer, sharing it with
    /// concurrent requests for the same object. `full`: fsync (data and
    /// metadata) rather than fdatasync; a full sync answers data requests
    /// too, never the other way round.
    pub(super) fn commit_with(
        &self,
        key: Key,
        full: bool,
        sync: impl FnOnce() -> std::io::Result<()>,
    ) -> FsResult<()> {
        self.committer
            .sync(&SyncOf::Object(key, full), sync)
            .map_err(|e| self.sync_failed(e))
    }

    /// Whatever failed to reach stable storage, clients resend.
    fn sync_failed(&self, e: i32) -> crate::FsError {
        if !matches!(e, libc::EAGAIN | libc::EINTR) {
            self.verifier.reset(&std::io::Error::from_raw_os_error(e));
        }
        errno(e)
    }

    /// Makes every metadata change on `dev` so far durable with one shared
    /// journal commit, if the export's filesystem is `dev` and has an
    /// ordered journal; Ok(false) if it cannot (sync per object then).
    /// A call served by the transport's pools owes that commit to the
    /// export's commit threads (`crate::owed`) while anything else commits;
    /// the rest of this (leading or joining a commit through the group
    /// committer) is for a call that commits alone (`Commits::lead`) and
    /// for a caller that cannot be answered later, such as the library's
    /// own tests.
    ///
    /// `made`: an object this call made, whose last change is the call's.
    /// When it is a regular file (CREATE) and the request leads a commit
    /// alone, the file is synced instead of the marker: it and its
    /// directory entry were changed in one transaction, and an fsync of a
    /// regular file waits for that file's last transaction only (ext4
    /// `i_sync_tid`, the XFS inode's log sequence), not at all if another
    /// request's commit already carried it, where the marker's change
    /// would add a journal handle and force the next transaction. (A
    /// directory's fsync on ext4 forces the running transaction like the
    /// marker's: measured no faster, so MKDIR keeps the marker.) Requests
    /// that joined a commit may have changed anything, so a shared commit
    /// stays the marker's.
    fn commit_journal(
        &self,
        call: &Call<'_>,
        devs: &[u64],
        made: Option<&Obj<'_>>,
    ) -> FsResult<bool> {
        let Some(j) = self
            .journal
            .as_ref()
            .filter(|j| devs.iter().all(|&d| d == j.dev))
        else {
            return Ok(false);
        };
        // The call's thread need not sleep for the commit when its caller
        // can send the reply once the commit is done (`crate::owed`),
        // unless nothing else commits: then it commits itself (`lead`).
        let _lead = match &self.journal_commits {
            Some(c) => match c.lead(call.owing()) {
                None if call.owe(c) => return Ok(true),
                lead => lead,
            },
            None => None,
        };
        // As the server: the marker is its own, and a caller who may change
        // a directory may not be allowed to touch it.
        self.as_server()?;
        let file = made.filter(|o| o.st.is_reg());
        self.committer
            .sync_depth_alone(&SyncOf::Journal, super::journal::DEPTH, |alone| {
                // Opened only when used (a file the server cannot open, for
                // example mode 0 without root, takes the marker).
                let own = file
                    .filter(|_| alone)
                    .and_then(|o| sys::reopen(o.raw(), libc::O_RDONLY | libc::O_NONBLOCK).ok());
                match own {
                    Some(f) => sys::fsync(f.as_raw_fd()),
                    None => j.commit(),
                }
            })
            .map_err(|e| self.sync_failed(e))?;
        Ok(true)
    }

    /// Makes what `f` wrote durable (a COMMIT, a stable WRITE; `full`: fsync
    /// rather than fdatasync), where it can without this thread waiting for
    /// a journal commit: the file's data is written back and waited for
    /// (`OpenFile::write_back`; by the commit thread, with the rest of its
    /// batch, for a cached writer: `WriteBack`), then the journal
    /// commit that carries what the writeback changed (size, block map,
    /// unwritten extents converted before the pages' writeback ended) is
    /// owed to the export's commit threads (`crate::owed`), which send the
    /// reply once it is done. As ext4's own fsync (`ext4_sync_file`: write
    /// and wait, then commit the inode's transaction): the commit comes
    /// after the data reached the device, and its commit block's cache
    /// flush (REQ_PREFLUSH) covers that data; XFS's likewise with its log
    /// force (`journal::data_covered`: not with a realtime device).
    /// Otherwise, and when nothing else commits (`owed::Commits::lead`),
    /// the file is synced here through the group committer.
    pub(super) fn sync_data(
        &self,
        call: &Call<'_>,
        o: &Obj<'_>,
        f: &Arc<OpenFile>,
        full: bool,
    ) -> FsResult<()> {
        self.sync_data_then(call, o, f, full, None)
    }

    /// As `sync_data`, and the reply waits for `flush` too (a flush of
    /// closed writers running when a COMMIT came, `flusher::Running`;
    /// its failure fails the call): when the call owes its commit, the
    /// commit thread waits for it after the file's writeback (no request
    /// thread sleeps for it), else this thread does, after the sync.
    pub(super) fn sync_data_then(
        &self,
        call: &Call<'_>,
        o: &Obj<'_>,
        f: &Arc<OpenFile>,
        full: bool,
        flush: Option<Running>,
    ) -> FsResult<()> {
        let key = o.st.key();
        let owing = match (&self.journal, &self.journal_commits) {
            (Some(j), Some(c)) if j.covers_data && j.dev == key.dev && call.may_owe() => Some(c),
            _ => None,
        };
        let mut flush = flush;
        let _lead = match owing {
            Some(c) => match c.lead(call.owing()) {
                None => {
                    // A cached writer's writeback is started here and
                    // waited for by the commit thread; its descriptor
                    // stays inside the cache's budget meanwhile (an entry
                    // in use is never evicted). An uncached one, one with
                    // more unsynced than `owed_writeback_bytes` (its wait
                    // would hold back every call of the batch), or one of
                    // a call owing already, is waited for here.
                    let data = if f.is_cached()
                        && f.unsynced_bytes() <= self.opts.owed_writeback_bytes
                        && self.opts.owed_writeback_bytes > 0
                        && !call.owing()
                    {
                        sys::start_writeback(f.fd.as_raw_fd())
                            .map_err(|e| self.sync_failed(io_errno(&e)))?;
                        Some(f.clone())
                    } else {
                        f.write_back().map_err(|e| self.sync_failed(io_errno(&e)))?;
                        None
                    };
                    let owed = match (data, flush.take()) {
                        (None, None) => call.owe(c),
                        (data, flush) => {
                            match call.owe_after(c, Box::new(WriteBack { data, flush })) {
                                Ok(()) => true,
                                // Not taken (the call owes work before its
                                // commit already): done here.
                                Err(b) => {
                                    b.finish().map_err(errno)?;
                                    call.owe(c)
                                }
                            }
                        }
                    };
                    if owed {
                        return Ok(());
                    }
                    None
                }
                lead => lead,
            },
            None => None,
        };
        self.commit_with(key, full, || f.sync(!full))?;
        match flush {
            Some(r) => r.wait().map_err(errno),
            None => Ok(()),
        }
    }

    /// Makes an object's metadata (and data) durable: through its cached
    /// writer if it has one (so an error that descriptor saw is reported),
    /// else a cached read descriptor. A symlink or device node cannot be
    /// opened to be synced; for those the whole filesystem is (rare: a
    /// SETATTR of one).
    pub(super) fn sync_object(&self, call: &Call<'_>, o: &Obj<'_>) -> FsResult<()> {
        let key = o.st.key();
        if o.st.is_reg() || o.st.is_dir() {
            let f = match self.files.get(key, Access::Write) {
                Some(f) => f,
                None => self.open_file(call, o, Access::Read)?,
            };
            return self.commit_with(key, true, || f.sync(false));
        }
        self.commit_with(key, true, || sys::syncfs(self.root.as_raw_fd()))
    }

    /// On a `sync` export, makes a namespace change durable before the
    /// reply: the new or changed object and the directory. A new symlink or
    /// device node cannot be opened to be synced: with no ordered journal
    /// to commit it with its directory entry (ext2, ext4 without a journal
    /// or with fast commits) the whole filesystem is synced for it.
    pub(super) fn sync_change(
        &self,
        call: &Call<'_>,
        dir: &Obj<'_>,
        child: Option<&Obj<'_>>,
    ) -> FsResult<()> {
        self.sync_namespace(call, dir, child, false)
    }

    /// As `sync_change`, for an object the call made (CREATE, MKDIR,
    /// SYMLINK, MKNOD), whose change is its last.
    pub(super) fn sync_made(&self, call: &Call<'_>, dir: &Obj<'_>, made: &Obj<'_>) -> FsResult<()> {
        self.sync_namespace(call, dir, Some(made), true)
    }

    fn sync_namespace(
        &self,
        call: &Call<'_>,
        dir: &Obj<'_>,
        child: Option<&Obj<'_>>,
        made: bool,
    ) -> FsResult<()> {
        if !self.opts.sync {
            return Ok(());
        }
        let devs = [
            dir.st.key().dev,
            child.map_or(dir.st.key().dev, |c| c.st.key().dev),
        ];
        if self.commit_journal(call, &devs, child.filter(|_| made))? {
            return Ok(());
        }
        match child {
            Some(c) if c.st.is_reg() || c.st.is_dir() => self.sync_object(call, c)?,
            // A syncfs, which covers the directory too.
            Some(c) => return self.sync_object(call, c),
            None => {}
        }
        self.sync_object(call, dir)
    }

    /// On a `sync` export, makes a RENAME durable before the reply: both
    /// directories, the new name first (once it is durable the object
    /// cannot be lost). A directory moved to another directory changed its
    /// own `..` entry too: with no ordered journal to commit that with the
    /// rename, the whole filesystem is synced for it.
    pub(super) fn sync_rename(
        &self,
        call: &Call<'_>,
        from: &Obj<'_>,
        to: &Obj<'_>,
        moved_dir: bool,
    ) -> FsResult<()> {
        if !self.opts.sync
            || self.commit_journal(call, &[from.st.key().dev, to.st.key().dev], None)?
        {
            return Ok(());
        }
        if moved_dir && from.st.key() != to.st.key() {
            let key = to.st.key();
            return self.commit_with(key, true, || sys::syncfs(self.root.as_raw_fd()));
        }
        self.sync_object(call, to)?;
        if from.st.key() != to.st.key() {
            self.sync_object(call, from)?;
        }
        Ok(())
    }

    /// On a `sync` export, makes a SETATTR durable before the reply.
    pub(super) fn sync_attrs(&self, call: &Call<'_>, o: &Obj<'_>) -> FsResult<()> {
        if !self.opts.sync || self.commit_journal(call, &[o.st.key().dev], None)? {
            return Ok(());
        }
        self.sync_object(call, o)
    }
}

/// A cached writer's data, whose writeback the call started and the commit
/// thread waits for before the journal commit that covers it
/// (`crate::owed::Before`), and a flush of closed writers the reply must
/// not precede (`flusher::Running`). A failure
/// answers the call NFS3ERR_IO (its owed failure reply), the write
/// verifier reset for a storage error (`OpenFile::write_back`; the flush
/// resets it itself), as knfsd's `nfsd_commit` resets it on a failed
/// fsync.
struct WriteBack {
    data: Option<Arc<OpenFile>>,
    flush: Option<Running>,
}

impl crate::owed::Before for WriteBack {
    fn finish(&self) -> Result<(), i32> {
        if let Some(f) = &self.data {
            f.write_back().map_err(|e| io_errno(&e))?;
        }
        self.flush.as_ref().map_or(Ok(()), Running::wait)
    }
}
