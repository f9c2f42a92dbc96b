//! LOOKUP, READLINK and READDIR(PLUS).

use std::collections::HashMap;
use std::sync::Arc;

use super::attr::{is_dir, to_attr};
use super::ffi::Statx;
use super::{btime, err, perm, Inner, Node};
use crate::access::check_name;
use crate::limits::ceph::{LISTING_MAX_ENTRIES, MAX_DIR_ENTRIES};
use crate::{Attr, Cred, DirEntry, DirPage, Fh, FsError, FsResult};

/// A directory's mtime and ctime: every entry made, removed or renamed in
/// it changes both (the MDS stamps them), and the getattr that reads them
/// asks the MDS once this head lost the directory's shared capability.
type Stamp = ((i64, i64), (i64, i64));

fn stamp(st: &Statx) -> Stamp {
    (
        (st.mtime.tv_sec, st.mtime.tv_nsec),
        (st.ctime.tv_sec, st.ctime.tv_nsec),
    )
}

/// One directory's entries as libcephfs last listed them, valid while its
/// stamp is the directory's: listing a directory from libcephfs asks the
/// MDS once per subdirectory in it (for its recursive statistics), every
/// time, where a page from here costs one cached getattr per entry
/// (READDIRPLUS) or nothing (READDIR).
pub(super) struct Listing {
    stamp: Stamp,
    /// False for a directory too large to keep (`entries` empty).
    whole: bool,
    entries: Vec<Listed>,
    /// Cookie -> index of the entry after it.
    after: HashMap<u64, usize>,
}

struct Listed {
    name: Vec<u8>,
    ino: u64,
    btime: (i64, u32),
    /// The entry's cookie (the offset after it).
    next: u64,
}

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
        let max = max_entries.clamp(1, MAX_DIR_ENTRIES);
        let now = stamp(&dst);
        // A listing kept is read only by a caller that may read the
        // directory (libcephfs's opendir checks it otherwise).
        let listing = match self.listings.get(&d.ino) {
            _ if self.rwx(&d, &dst, cred)? & 4 == 0 => None,
            Some(l) if l.stamp == now => Some(l),
            _ if cookie == 0 => self.list(&d, cred, now)?,
            _ => None,
        };
        if let Some(page) = listing.and_then(|l| self.page(&l, &d, &dst, cookie, max, plus)) {
            return Ok(page);
        }
        let mut stream = self.m.opendir(&d.inode, &*perm(cred)?).map_err(err)?;
        if cookie != 0 {
            stream.seek(cookie);
        }
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

    /// Lists `d` whole from libcephfs (its stamp `now` read before) and
    /// keeps it (only as too large when it holds more than
    /// `LISTING_MAX_ENTRIES`).
    fn list(
        self: &Arc<Self>,
        d: &Arc<Node>,
        cred: &Cred,
        now: Stamp,
    ) -> FsResult<Option<Arc<Listing>>> {
        let mut stream = self.m.opendir(&d.inode, &*perm(cred)?).map_err(err)?;
        let mut entries = Vec::new();
        while let Some(e) = stream.read_entry().map_err(err)? {
            if entries.len() == LISTING_MAX_ENTRIES {
                // Too large to keep: remembered as such until it changes
                // (no listing is tried again meanwhile).
                entries.clear();
                break;
            }
            let dot = e.name == b"." || e.name == b"..";
            entries.push(Listed {
                btime: btime(&e.st),
                ino: e.st.ino,
                next: e.next,
                name: e.name,
            });
            // Its inode, for READDIRPLUS pages from the listing.
            if !dot {
                self.node(e.inode, &e.st);
            }
        }
        let after = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.next, i + 1))
            .collect();
        let whole = !entries.is_empty();
        let l = Arc::new(Listing {
            stamp: now,
            whole,
            entries,
            after,
        });
        self.listings.insert(d.ino, l.clone());
        Ok(Some(l))
    }

    /// The page after `cookie` from listing `l` of `d` (attributes `dst`),
    /// each entry's attributes asked of libcephfs for READDIRPLUS; None
    /// when the cookie is not one of the listing's or an entry's inode is
    /// no longer cached here (the page is then listed from libcephfs).
    fn page(
        self: &Arc<Self>,
        l: &Listing,
        d: &Arc<Node>,
        dst: &Statx,
        cookie: u64,
        max: usize,
        plus: bool,
    ) -> Option<DirPage> {
        if !l.whole {
            return None;
        }
        let from = if cookie == 0 {
            0
        } else {
            *l.after.get(&cookie)?
        };
        let at_root = d.ino == self.root.ino;
        let mut entries = Vec::new();
        for e in l.entries.get(from..)?.iter().take(max) {
            let plus = if !plus {
                None
            } else if e.name == b"." || e.name == b".." && at_root {
                // ".." of the export root names the root (see lookup).
                Some((self.fh_of(dst), to_attr(dst, self.opts.fsid)))
            } else {
                let n = if e.ino == self.root.ino {
                    self.root.clone()
                } else {
                    self.nodes.get(&e.ino)?
                };
                if n.btime != e.btime {
                    return None;
                }
                let st = self.m.getattr(&n.inode, self.server_perm().ok()?).ok()?;
                if st.nlink == 0 || btime(&st) != e.btime {
                    return None;
                }
                Some((self.fh_of(&st), to_attr(&st, self.opts.fsid)))
            };
            let fileid = if e.name == b"." || e.name == b".." && at_root {
                dst.ino
            } else {
                e.ino
            };
            entries.push(DirEntry {
                fileid,
                name: e.name.clone(),
                cookie: e.next,
                plus,
            });
        }
        Some(DirPage {
            verifier: [0; 8],
            eof: from + entries.len() >= l.entries.len(),
            entries,
            dir_attr: Some(to_attr(dst, self.opts.fsid)),
        })
    }
}
