//! LOOKUP, READLINK and READDIR(PLUS).

use std::sync::Arc;

use super::attr::{is_dir, to_attr};
use super::{err, perm, Inner, Node};
use crate::access::check_name;
use crate::limits::ceph::MAX_DIR_ENTRIES;
use crate::{Attr, Cred, DirEntry, DirPage, Fh, FsError, FsResult};

impl Inner {
    fn dir(self: &Arc<Self>, fh: &Fh) -> FsResult<(Arc<Node>, crate::ceph::ffi::Statx)> {
        let d = self.resolve(fh)?;
        let st = self.attrs(&d)?;
        if !is_dir(&st) {
            return Err(FsError::Errno(libc::ENOTDIR));
        }
        Ok((d, st))
    }

    pub(super) fn lookup(
        self: &Arc<Self>,
        cred: &Cred,
        dir: &Fh,
        name: &[u8],
    ) -> FsResult<(Fh, Attr, Option<Attr>)> {
        check_name(name, true)?;
        let (d, dst) = self.dir(dir)?;
        let dattr = to_attr(&dst, self.opts.fsid);
        // ".." of the export root is the root itself: nothing above it
        // is reachable (RFC 1813 §3.3.3 leaves it to the server).
        if name == b".." && d.ino == self.root.ino || name == b"." {
            return Ok((self.fh_of(&dst), dattr.clone(), Some(dattr)));
        }
        let (inode, st) = self.m.lookup(&d.inode, name, &*perm(cred)?).map_err(err)?;
        let fh = self.fh_of(&st);
        self.node(inode, &st);
        Ok((fh, to_attr(&st, self.opts.fsid), Some(dattr)))
    }

    pub(super) fn readlink(self: &Arc<Self>, cred: &Cred, fh: &Fh) -> FsResult<(Vec<u8>, Attr)> {
        let n = self.resolve(fh)?;
        let st = self.attrs(&n)?;
        if u32::from(st.mode) & libc::S_IFMT != libc::S_IFLNK {
            return Err(FsError::Errno(libc::EINVAL));
        }
        let target = self.m.readlink(&n.inode, &*perm(cred)?).map_err(err)?;
        Ok((target, to_attr(&st, self.opts.fsid)))
    }

    /// Entries after `cookie`: CephFS's own directory offsets (hash order),
    /// the same on every head, so the verifier is constant and any head
    /// continues a listing another head began.
    pub(super) fn readdir(
        self: &Arc<Self>,
        cred: &Cred,
        dir: &Fh,
        cookie: u64,
        max_entries: usize,
        plus: bool,
    ) -> FsResult<DirPage> {
        let (d, dst) = self.dir(dir)?;
        let mut stream = self.m.opendir(&d.inode, &*perm(cred)?).map_err(err)?;
        if cookie != 0 {
            stream.seek(cookie);
        }
        let max = max_entries.clamp(1, MAX_DIR_ENTRIES);
        let mut entries = Vec::new();
        let mut eof = false;
        while entries.len() < max {
            let Some(e) = stream.read_entry().map_err(err)? else {
                eof = true;
                break;
            };
            let at_root = d.ino == self.root.ino;
            // ".." of the export root names the root (see lookup).
            let st = if e.name == b".." && at_root || e.name == b"." {
                dst
            } else {
                e.st
            };
            let fileid = st.ino;
            let plus = plus.then(|| {
                let fh = self.fh_of(&st);
                (fh, to_attr(&st, self.opts.fsid))
            });
            entries.push(DirEntry {
                fileid,
                name: e.name,
                cookie: e.next,
                plus,
            });
        }
        if !eof {
            // Full page: tell the client whether anything follows.
            eof = stream.read_entry().map_err(err)?.is_none();
        }
        Ok(DirPage {
            verifier: [0; 8],
            entries,
            eof,
            dir_attr: Some(to_attr(&dst, self.opts.fsid)),
        })
    }
}
