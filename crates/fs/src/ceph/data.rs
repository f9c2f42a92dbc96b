//! READ, WRITE and COMMIT through files each cached inode opens once.
//!
//! Files are opened as the server (root) and the caller's right is decided
//! per call from the attributes and the POSIX ACL (`acl.rs`), as knfsd
//! decides it: the owner may always read and write (the client checked at
//! open time, and a chmod since must not break an open file), and a READ
//! is allowed with execute permission.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::attr::{access3, to_attr};
use super::ffi::{File, Statx};
use super::{err, Inner, Node};
use crate::access::{ACCESS3_EXECUTE, ACCESS3_MODIFY, ACCESS3_READ};
use crate::limits::ceph::MAX_READ;
use crate::{Attr, Cred, Fh, FsError, FsResult, PreAttr, Stable, Wcc};

/// Test builds only (the `test-hooks` feature): with
/// `RNFSD_TEST_CEPH_KEEP_WRITERS` set a committed file stays open for
/// writing, so a head killed after its COMMITs has written back only what
/// those syncs did (the last close of a file starts a write-back of its
/// own, which would hide a sync that skipped the file).
#[cfg(feature = "test-hooks")]
fn keep_writers() -> bool {
    std::env::var_os("RNFSD_TEST_CEPH_KEEP_WRITERS").is_some()
}

#[cfg(not(feature = "test-hooks"))]
fn keep_writers() -> bool {
    false
}

impl Inner {
    /// Whether `cred` may use `n`'s data: one of the ACCESS3 `bits`.
    pub(super) fn may_data(
        &self,
        cred: &Cred,
        n: &Arc<Node>,
        st: &Statx,
        bits: u32,
    ) -> FsResult<()> {
        if u32::from(st.mode) & libc::S_IFMT != libc::S_IFREG {
            return Err(FsError::Errno(if super::attr::is_dir(st) {
                libc::EISDIR
            } else {
                libc::EINVAL
            }));
        }
        if cred.uid == 0 || cred.uid == st.uid || access3(false, self.rwx(n, st, cred)?, bits) != 0
        {
            Ok(())
        } else {
            Err(FsError::Errno(libc::EACCES))
        }
    }

    fn file(&self, n: &Arc<Node>, write: bool) -> FsResult<Arc<File>> {
        // A READ takes the read open first: no lock on its way.
        if !write {
            if let Some(f) = n.rd.get() {
                return Ok(f.clone());
            }
        }
        if let Some(f) = n.writer() {
            return Ok(f);
        }
        let flags = if write { libc::O_RDWR } else { libc::O_RDONLY };
        let f = Arc::new(
            self.m
                .open_file(&n.inode, flags, self.server_perm()?)
                .map_err(err)?,
        );
        if write {
            // Two calls may open at once: keep the first, drop the other.
            let mut w = n.wr.lock().unwrap_or_else(|e| e.into_inner());
            return Ok(w.get_or_insert(f).clone());
        }
        Ok(n.rd.get_or_init(|| f).clone())
    }

    /// Appends up to `count` bytes at `offset` to `buf`; returns eof.
    pub(super) fn read(
        self: &Arc<Self>,
        cred: &Cred,
        fh: &Fh,
        offset: u64,
        count: u32,
        buf: &mut Vec<u8>,
    ) -> FsResult<(bool, Attr)> {
        let n = self.resolve(fh)?;
        let st = self.attrs(&n)?;
        self.may_data(cred, &n, &st, ACCESS3_READ | ACCESS3_EXECUTE)?;
        let f = self.file(&n, false)?;
        let want = count.min(MAX_READ) as usize;
        let start = buf.len();
        buf.resize(start + want, 0);
        let mut got = 0;
        // libcephfs may return short reads inside the file: read on.
        let r = loop {
            if got == want {
                break Ok(());
            }
            match self
                .m
                .read(&f, offset + got as u64, &mut buf[start + got..])
            {
                Ok(0) => break Ok(()),
                Ok(k) => got += k,
                Err(e) => break Err(err(e)),
            }
        };
        buf.truncate(start + got);
        r?;
        let after = self.attrs(&n).unwrap_or(st);
        let eof = offset.saturating_add(got as u64) >= after.size;
        Ok((eof, to_attr(&after, self.opts.fsid)))
    }

    pub(super) fn write(
        self: &Arc<Self>,
        cred: &Cred,
        fh: &Fh,
        offset: u64,
        data: &[u8],
        stable: Stable,
    ) -> FsResult<(u32, Stable, Wcc)> {
        let n = self.resolve(fh)?;
        let st = self.attrs(&n)?;
        self.may_data(cred, &n, &st, ACCESS3_MODIFY)?;
        let before = PreAttr::from(&to_attr(&st, self.opts.fsid));
        let f = self.file(&n, true)?;
        let mut done = 0;
        while done < data.len() {
            let k = self
                .m
                .write(&f, offset + done as u64, &data[done..])
                .map_err(|e| self.failed(e))?;
            if k == 0 {
                return Err(FsError::Errno(libc::EIO));
            }
            done += k;
        }
        let got = if stable == Stable::Unstable {
            n.dirty.store(true, Ordering::Release);
            Stable::Unstable
        } else {
            self.sync(&n)?;
            Stable::FileSync
        };
        Ok((
            done as u32,
            got,
            Wcc {
                before: Some(before),
                after: self.post(&n),
            },
        ))
    }

    /// A write-back failure: every client's uncommitted data is suspect,
    /// so every later WRITE and COMMIT reply carries a new verifier.
    fn failed(&self, e: i32) -> FsError {
        if matches!(e, libc::EIO | libc::ENOSPC | libc::EDQUOT) {
            self.verifier.reset(&super::ffi::errstr(e));
        }
        err(e)
    }

    /// Makes `n`'s data durable, sharing one sync among the calls that
    /// wait for the same inode at once, and one sync of the mount among
    /// those that wait for different inodes (`sync_node`).
    fn sync(&self, n: &Arc<Node>) -> FsResult<()> {
        // Cleared before the sync: a write landing during it sets it again.
        let was = n.dirty.swap(false, Ordering::AcqRel);
        let r = self.committer.sync(&n.ino, || {
            self.sync_node(n).map_err(std::io::Error::from_raw_os_error)
        });
        r.map_err(|e| {
            if was {
                n.dirty.store(true, Ordering::Release);
            }
            self.failed(e)
        })?;
        // Committed and clean: stop writing through this head until the
        // next WRITE. While it holds the file open for writing the MDS keeps
        // a writable range for it, and if this head then dies the MDS
        // "recovers" the file, setting its mtime to the newest data
        // object's: a time set later (tar, cp -p, rsync -t) would be lost.
        if !n.dirty.load(Ordering::Acquire) && !keep_writers() {
            n.close_writer();
        }
        Ok(())
    }

    pub(super) fn commit(self: &Arc<Self>, _cred: &Cred, fh: &Fh) -> FsResult<Wcc> {
        let n = self.resolve(fh)?;
        let st = self.attrs(&n)?;
        let before = PreAttr::from(&to_attr(&st, self.opts.fsid));
        self.sync(&n)?;
        Ok(Wcc {
            before: Some(before),
            after: self.post(&n),
        })
    }
}
