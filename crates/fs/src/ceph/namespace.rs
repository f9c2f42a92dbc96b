//! Namespace changes: CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR, RENAME,
//! LINK. Each is made as the caller (libcephfs checks its rights), and on a
//! `sync` export journaled by the MDS before the reply (RFC 1813 §4.8).

use std::sync::Arc;

use super::attr::{to_attr, to_setattr};
use super::ffi::{Inode, Statx};
use super::{err, perm, Inner, Node};
use crate::access::check_name;
use crate::{
    Attr, CreateHow, Created, Cred, Fh, FsError, FsResult, NodeKind, PreAttr, SetAttr, SetTime,
    Time, Wcc,
};

fn pre(st: &Statx, fsid: u64) -> PreAttr {
    PreAttr::from(&to_attr(st, fsid))
}

/// The verifier of an EXCLUSIVE create, kept in mtime/atime seconds as
/// knfsd keeps it (top bit cleared so the times are valid everywhere).
fn verifier_times(verf: &[u8; 8]) -> (i64, i64) {
    let m = u32::from_be_bytes([verf[0], verf[1], verf[2], verf[3]]) & 0x7fff_ffff;
    let a = u32::from_be_bytes([verf[4], verf[5], verf[6], verf[7]]) & 0x7fff_ffff;
    (i64::from(m), i64::from(a))
}

/// The private name an EXCLUSIVE create makes its file under before it
/// links it: in the same directory (a link stays in its quota realm), the
/// same for every try of one create (the verifier and the name), on any
/// head. Left only if a head died mid-create and the client never retried
/// (or another file took the name meanwhile).
fn exclusive_name(verf: &[u8; 8], name: &[u8]) -> Vec<u8> {
    let h = blake3::hash(name);
    let mut n = b".rnfsd-excl-".to_vec();
    for b in verf.iter().chain(&h.as_bytes()[..8]) {
        n.extend_from_slice(format!("{b:02x}").as_bytes());
    }
    n
}

/// Test builds only (the `test-hooks` feature, which the server's
/// integration tests turn on): an EXCLUSIVE create of the name in
/// `RNFSD_TEST_CEPH_ABORT_EXCLUSIVE` aborts the process once its file
/// exists under its private name, before the verifier is set: a head
/// killed mid-create, at a moment a test knows.
#[cfg(feature = "test-hooks")]
fn abort_point(name: &[u8]) {
    if std::env::var_os("RNFSD_TEST_CEPH_ABORT_EXCLUSIVE")
        .is_some_and(|n| n.as_encoded_bytes() == name)
    {
        std::process::abort();
    }
}

impl Inner {
    /// The directory a change happens in, with its attributes before.
    fn parent(self: &Arc<Self>, dir: &Fh) -> FsResult<(Arc<Node>, Statx)> {
        let d = self.resolve(dir)?;
        let st = self.attrs(&d)?;
        if !super::attr::is_dir(&st) {
            return Err(FsError::Errno(libc::ENOTDIR));
        }
        Ok((d, st))
    }

    fn dir_wcc(&self, d: &Arc<Node>, before: &Statx) -> Wcc {
        Wcc {
            before: Some(pre(before, self.opts.fsid)),
            after: self.post(d),
        }
    }

    /// Finishes a create-type call: the rest of `set` (what creation did
    /// not already give), journaling, the handle, the cache entry.
    /// `alone`: the new object came from one create request (CREATE,
    /// MKDIR, SYMLINK, MKNOD), which libcephfs lists among the unsafe
    /// requests of the object it made as well as the directory's; a sync
    /// of the object alone waits for that request's journaling, and not,
    /// as the directory's would, for every later change in the directory
    /// (other creates there: a convoy under parallel creates).
    #[allow(clippy::too_many_arguments)]
    fn made(
        self: &Arc<Self>,
        cred: &Cred,
        d: &Arc<Node>,
        dbefore: &Statx,
        inode: Inode,
        st: Statx,
        set: &SetAttr,
        alone: bool,
    ) -> FsResult<(Created, Arc<Node>)> {
        let mut set = set.clone();
        set.mode = set
            .mode
            .map(|m| m & 0o7777)
            .filter(|&m| m != u32::from(st.mode) & 0o7777);
        set.uid = set.uid.filter(|&u| u != st.uid);
        set.gid = set.gid.filter(|&g| g != st.gid);
        let n = self.node(inode, &st);
        if set != SetAttr::default() {
            let (mut x, mask) = to_setattr(&set);
            self.m
                .setattr(&n.inode, &mut x, mask, &*perm(cred)?)
                .map_err(err)?;
        }
        match alone {
            true => self.journal(&[&n])?,
            false => self.journal(&[d, &n])?,
        }
        let attr = self.attr(&n)?;
        Ok((
            Created {
                fh: self.fh_of(&st),
                attr,
                dir: self.dir_wcc(d, dbefore),
            },
            n,
        ))
    }

    pub(super) fn create(
        self: &Arc<Self>,
        cred: &Cred,
        dir: &Fh,
        name: &[u8],
        how: &CreateHow,
    ) -> FsResult<Created> {
        check_name(name, false)?;
        let (d, before) = self.parent(dir)?;
        let (set, guarded) = match how {
            CreateHow::Unchecked(s) => (s, false),
            CreateHow::Guarded(s) => (s, true),
            CreateHow::Exclusive(verf) => {
                return self.create_exclusive(cred, &d, &before, name, verf)
            }
        };
        let p = perm(cred)?;
        let mode = libc::S_IFREG | (set.mode.unwrap_or(0o666) & 0o7777);
        let flags = libc::O_CREAT | libc::O_EXCL | libc::O_RDWR;
        // O_EXCL for UNCHECKED too: the client's attributes go only to a
        // file this call made. One that was there gets only the size, as
        // knfsd does: a racing open(O_CREAT) must not chmod another's file.
        // A few tries: the file may go between the create and the lookup.
        for _ in 0..3 {
            match self.m.create(&d.inode, name, mode, flags, &p) {
                Ok((inode, file, st)) => {
                    let (c, n) = self.made(cred, &d, &before, inode, st, set, true)?;
                    // The open creation made serves the writes that follow
                    // (until their COMMIT).
                    n.wr.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(Arc::new(file));
                    return Ok(c);
                }
                Err(libc::EEXIST) if !guarded => match self.m.lookup(&d.inode, name, &p) {
                    Ok((inode, st)) => {
                        if u32::from(st.mode) & libc::S_IFMT != libc::S_IFREG {
                            return Err(FsError::Errno(libc::EEXIST));
                        }
                        let size = SetAttr {
                            size: set.size,
                            ..SetAttr::default()
                        };
                        return Ok(self.made(cred, &d, &before, inode, st, &size, false)?.0);
                    }
                    Err(libc::ENOENT) => continue,
                    Err(e) => return Err(err(e)),
                },
                Err(e) => return Err(err(e)),
            }
        }
        // Made and removed by others all along: the client retries.
        Err(FsError::Errno(libc::EAGAIN))
    }

    /// EXCLUSIVE (RFC 1813 §3.3.8), atomic across heads: the file is made
    /// under a private name of this create (`exclusive_name`), given the
    /// verifier (in its times, as knfsd keeps it), and only then linked
    /// under `name` (a link fails on an existing name), and the private
    /// name removed. The client's retry, on this head or on another after
    /// this one died at any step, goes on from the private file, or finds
    /// `name` holding its verifier.
    fn create_exclusive(
        self: &Arc<Self>,
        cred: &Cred,
        d: &Arc<Node>,
        before: &Statx,
        name: &[u8],
        verf: &[u8; 8],
    ) -> FsResult<Created> {
        let p = perm(cred)?;
        let (vm, va) = verifier_times(verf);
        let ours = |st: &Statx| {
            u32::from(st.mode) & libc::S_IFMT == libc::S_IFREG
                && st.mtime.tv_sec == vm
                && st.atime.tv_sec == va
                && st.size == 0
        };
        let tmp = exclusive_name(verf, name);
        // Taken already: a retry of this create finds its verifier (and
        // removes the private name, still a second link where a head died
        // before it did). Without making a file first: lock-file users
        // fail here often.
        match self.m.lookup(&d.inode, name, &p) {
            Ok((inode, st)) => {
                let (ours, left) = (ours(&st), st.nlink > 1);
                let tmp = (ours && left).then_some(&tmp[..]);
                return self.exclusive_found(cred, d, before, tmp, inode, st, ours);
            }
            Err(libc::ENOENT) => {}
            Err(e) => return Err(err(e)),
        }
        let (inode, file, st) = match self.m.create(
            &d.inode,
            &tmp,
            libc::S_IFREG | 0o600,
            libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
            &p,
        ) {
            Ok((i, f, st)) => (i, Some(f), st),
            Err(libc::EEXIST) => {
                // An earlier try of this create: the caller's own empty file.
                let (i, st) = self.m.lookup(&d.inode, &tmp, &p).map_err(err)?;
                if u32::from(st.mode) & libc::S_IFMT != libc::S_IFREG
                    || st.uid != cred.uid
                    || st.size != 0
                {
                    return Err(FsError::Errno(libc::EEXIST));
                }
                (i, None, st)
            }
            Err(e) => return Err(err(e)),
        };
        #[cfg(feature = "test-hooks")]
        abort_point(name);
        if !ours(&st) {
            let t = |s| SetTime::ClientTime(Time { sec: s, nsec: 0 });
            let (mut x, mask) = to_setattr(&SetAttr {
                atime: t(va),
                mtime: t(vm),
                ..SetAttr::default()
            });
            self.m.setattr(&inode, &mut x, mask, &p).map_err(err)?;
        }
        match self.m.link(&inode, &d.inode, name, &p) {
            Ok(()) => {}
            Err(libc::EEXIST) => {
                // Made meanwhile: by a retry of this create on another head,
                // or by someone else.
                drop(file);
                let (i, st) = self.m.lookup(&d.inode, name, &p).map_err(err)?;
                let ours = ours(&st);
                return self.exclusive_found(cred, d, before, Some(&tmp), i, st, ours);
            }
            Err(e) => {
                let _ = self.m.unlink(&d.inode, &tmp, &p);
                return Err(err(e));
            }
        }
        match self.m.unlink(&d.inode, &tmp, &p) {
            Ok(()) | Err(libc::ENOENT) => {}
            Err(e) => return Err(err(e)),
        }
        let st = self.m.getattr(&inode, self.server_perm()?).map_err(err)?;
        let (c, n) = self.made(cred, d, before, inode, st, &SetAttr::default(), false)?;
        if let Some(f) = file {
            n.wr.lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert(Arc::new(f));
        }
        Ok(c)
    }

    /// EXCLUSIVE found `name` taken: by this very create (its verifier),
    /// or by another file. The private name `tmp` goes first.
    #[allow(clippy::too_many_arguments)]
    fn exclusive_found(
        self: &Arc<Self>,
        cred: &Cred,
        d: &Arc<Node>,
        before: &Statx,
        tmp: Option<&[u8]>,
        inode: Inode,
        st: Statx,
        ours: bool,
    ) -> FsResult<Created> {
        if let Some(tmp) = tmp {
            match self.m.unlink(&d.inode, tmp, &*perm(cred)?) {
                Ok(()) | Err(libc::ENOENT) => {}
                Err(e) => return Err(err(e)),
            }
        }
        if !ours {
            return Err(FsError::Errno(libc::EEXIST));
        }
        Ok(self
            .made(cred, d, before, inode, st, &SetAttr::default(), false)?
            .0)
    }

    pub(super) fn mkdir(
        self: &Arc<Self>,
        cred: &Cred,
        dir: &Fh,
        name: &[u8],
        set: &SetAttr,
    ) -> FsResult<Created> {
        check_name(name, false)?;
        let (d, before) = self.parent(dir)?;
        let mode = set.mode.unwrap_or(0o777) & 0o7777;
        let (inode, st) = self
            .m
            .mkdir(&d.inode, name, mode, &*perm(cred)?)
            .map_err(err)?;
        Ok(self.made(cred, &d, &before, inode, st, set, true)?.0)
    }

    pub(super) fn symlink(
        self: &Arc<Self>,
        cred: &Cred,
        dir: &Fh,
        name: &[u8],
        target: &[u8],
        set: &SetAttr,
    ) -> FsResult<Created> {
        check_name(name, false)?;
        if target.is_empty() || target.len() > libc::PATH_MAX as usize - 1 {
            return Err(FsError::Errno(libc::ENAMETOOLONG));
        }
        let (d, before) = self.parent(dir)?;
        let (inode, st) = self
            .m
            .symlink(&d.inode, name, target, &*perm(cred)?)
            .map_err(err)?;
        // A symlink's mode means nothing (Linux ignores it).
        let set = SetAttr {
            mode: None,
            ..set.clone()
        };
        Ok(self.made(cred, &d, &before, inode, st, &set, true)?.0)
    }

    pub(super) fn mknod(
        self: &Arc<Self>,
        cred: &Cred,
        dir: &Fh,
        name: &[u8],
        kind: NodeKind,
        set: &SetAttr,
    ) -> FsResult<Created> {
        check_name(name, false)?;
        let (d, before) = self.parent(dir)?;
        let (fmt, rdev) = match kind {
            NodeKind::Fifo => (libc::S_IFIFO, 0),
            NodeKind::Socket => (libc::S_IFSOCK, 0),
            NodeKind::Block { major, minor } => (libc::S_IFBLK, libc::makedev(major, minor)),
            NodeKind::Char { major, minor } => (libc::S_IFCHR, libc::makedev(major, minor)),
        };
        let mode = fmt | (set.mode.unwrap_or(0o666) & 0o7777);
        let (inode, st) = self
            .m
            .mknod(&d.inode, name, mode, rdev, &*perm(cred)?)
            .map_err(err)?;
        Ok(self.made(cred, &d, &before, inode, st, set, true)?.0)
    }

    /// The inode number `name` names in `d`, if any (to drop our reference
    /// once it is unlinked, so the MDS can free it).
    fn child_ino(&self, d: &Arc<Node>, name: &[u8], cred: &Cred) -> Option<u64> {
        let p = perm(cred).ok()?;
        self.m.lookup(&d.inode, name, &p).ok().map(|(_, st)| st.ino)
    }

    pub(super) fn remove(
        self: &Arc<Self>,
        cred: &Cred,
        dir: &Fh,
        name: &[u8],
        is_dir: bool,
    ) -> FsResult<Wcc> {
        check_name(name, false)?;
        let (d, before) = self.parent(dir)?;
        let child = self.child_ino(&d, name, cred);
        let p = perm(cred)?;
        if is_dir {
            self.m.rmdir(&d.inode, name, &p).map_err(err)?;
        } else {
            self.m.unlink(&d.inode, name, &p).map_err(err)?;
        }
        if let Some(ino) = child {
            self.release_if_gone(ino);
        }
        self.journal(&[&d])?;
        Ok(self.dir_wcc(&d, &before))
    }

    /// After an unlink or a rename over it: drop our reference to `ino`
    /// when that was its last link (its uncommitted data is gone with it).
    fn release_if_gone(&self, ino: u64) {
        if let Some(n) = self.nodes.get(&ino) {
            let gone = self
                .server_perm()
                .ok()
                .and_then(|p| self.m.getattr(&n.inode, p).ok())
                .is_none_or(|st| st.nlink == 0);
            if gone {
                n.dirty.store(false, std::sync::atomic::Ordering::Release);
                self.forget(ino);
            }
        }
    }

    pub(super) fn rename(
        self: &Arc<Self>,
        cred: &Cred,
        from_dir: &Fh,
        from: &[u8],
        to_dir: &Fh,
        to: &[u8],
    ) -> FsResult<(Wcc, Wcc)> {
        check_name(from, false)?;
        check_name(to, false)?;
        let (fd, fbefore) = self.parent(from_dir)?;
        let (td, tbefore) = self.parent(to_dir)?;
        let replaced = self.child_ino(&td, to, cred);
        let p = perm(cred)?;
        if let Err(e) = self.m.rename(&fd.inode, from, &td.inode, to, &p) {
            // The MDS looks for entries in a directory target before it
            // compares types, so a file over a non-empty directory is
            // ENOTEMPTY there; rename(2) (the local backend's) says EISDIR.
            let file = |st: &Statx| u32::from(st.mode) & libc::S_IFMT != libc::S_IFDIR;
            if e == libc::ENOTEMPTY
                && self
                    .m
                    .lookup(&fd.inode, from, &p)
                    .is_ok_and(|(_, st)| file(&st))
            {
                return Err(err(libc::EISDIR));
            }
            return Err(err(e));
        }
        if let Some(ino) = replaced {
            self.release_if_gone(ino);
        }
        self.journal(&[&fd, &td])?;
        Ok((self.dir_wcc(&fd, &fbefore), self.dir_wcc(&td, &tbefore)))
    }

    pub(super) fn link(
        self: &Arc<Self>,
        cred: &Cred,
        file: &Fh,
        dir: &Fh,
        name: &[u8],
    ) -> FsResult<(Attr, Wcc)> {
        check_name(name, false)?;
        let n = self.resolve(file)?;
        let (d, before) = self.parent(dir)?;
        self.m
            .link(&n.inode, &d.inode, name, &*perm(cred)?)
            .map_err(err)?;
        self.journal(&[&d, &n])?;
        Ok((self.attr(&n)?, self.dir_wcc(&d, &before)))
    }
}
