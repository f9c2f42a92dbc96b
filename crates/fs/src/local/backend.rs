//! The local backend's procedures, one line each: which file of this
//! module serves each `Backend` method (as knfsd's `nfsd_procedures3[]`
//! table names each procedure's function, one layer down).

use std::os::fd::BorrowedFd;
use std::sync::Arc;

use super::{attr, data, dir, lock, namespace, space, xattr, LocalFs};
use crate::{
    Attr, Backend, BackendStats, CacheStat, Call, Content, CreateHow, Created, DirPage, Extent, Fh,
    FsInfo, FsResult, FsStat, NodeKind, PathConf, SetAttr, Stable, Time, Wcc,
};

impl Backend for LocalFs {
    fn root(&self) -> Fh {
        self.root_fh.clone()
    }

    fn sees_every_change(&self) -> bool {
        true
    }

    fn changes_inline(&self) -> bool {
        true
    }

    fn getattr(&self, call: &Call<'_>, fh: &Fh) -> FsResult<Attr> {
        attr::getattr(self, call, fh)
    }

    fn setattr(
        &self,
        call: &Call<'_>,
        fh: &Fh,
        set: &SetAttr,
        guard: Option<Time>,
    ) -> FsResult<Wcc> {
        attr::setattr(self, call, fh, set, guard)
    }

    fn lookup(&self, call: &Call<'_>, dir: &Fh, name: &[u8]) -> FsResult<(Fh, Attr, Option<Attr>)> {
        dir::lookup(self, call, dir, name)
    }

    fn access(&self, call: &Call<'_>, fh: &Fh, want: u32) -> FsResult<(u32, Attr)> {
        attr::access(self, call, fh, want)
    }

    fn readlink(&self, call: &Call<'_>, fh: &Fh) -> FsResult<(Vec<u8>, Attr)> {
        attr::readlink(self, call, fh)
    }

    fn read(
        &self,
        call: &Call<'_>,
        fh: &Fh,
        offset: u64,
        count: u32,
        buf: &mut Vec<u8>,
    ) -> FsResult<(bool, Attr)> {
        data::read(self, call, fh, offset, count, buf)
    }

    fn read_to_pipe(
        &self,
        call: &Call<'_>,
        fh: &Fh,
        offset: u64,
        count: u32,
        pipe: BorrowedFd<'_>,
    ) -> FsResult<(u32, bool, Attr)> {
        data::read_to_pipe(self, call, fh, offset, count, pipe)
    }

    fn write(
        &self,
        call: &Call<'_>,
        fh: &Fh,
        offset: u64,
        data: &[u8],
        stable: Stable,
    ) -> FsResult<(u32, Stable, Wcc)> {
        data::write(self, call, fh, offset, data, stable)
    }

    fn create(&self, call: &Call<'_>, dir: &Fh, name: &[u8], how: &CreateHow) -> FsResult<Created> {
        namespace::create(self, call, dir, name, how)
    }

    fn mkdir(&self, call: &Call<'_>, dir: &Fh, name: &[u8], set: &SetAttr) -> FsResult<Created> {
        namespace::mkdir(self, call, dir, name, set)
    }

    fn symlink(
        &self,
        call: &Call<'_>,
        dir: &Fh,
        name: &[u8],
        target: &[u8],
        set: &SetAttr,
    ) -> FsResult<Created> {
        namespace::symlink(self, call, dir, name, target, set)
    }

    fn mknod(
        &self,
        call: &Call<'_>,
        dir: &Fh,
        name: &[u8],
        kind: NodeKind,
        set: &SetAttr,
    ) -> FsResult<Created> {
        namespace::mknod(self, call, dir, name, kind, set)
    }

    fn remove(&self, call: &Call<'_>, dir: &Fh, name: &[u8]) -> FsResult<Wcc> {
        namespace::remove(self, call, dir, name)
    }

    fn rmdir(&self, call: &Call<'_>, dir: &Fh, name: &[u8]) -> FsResult<Wcc> {
        namespace::rmdir(self, call, dir, name)
    }

    fn rename(
        &self,
        call: &Call<'_>,
        from_dir: &Fh,
        from: &[u8],
        to_dir: &Fh,
        to: &[u8],
    ) -> FsResult<(Wcc, Wcc)> {
        namespace::rename(self, call, from_dir, from, to_dir, to)
    }

    fn link(&self, call: &Call<'_>, file: &Fh, dir: &Fh, name: &[u8]) -> FsResult<(Attr, Wcc)> {
        namespace::link(self, call, file, dir, name)
    }

    fn readdir(
        &self,
        call: &Call<'_>,
        dir: &Fh,
        cookie: u64,
        verifier: [u8; 8],
        max_entries: usize,
        plus: bool,
    ) -> FsResult<DirPage> {
        dir::readdir(self, call, dir, cookie, verifier, max_entries, plus)
    }

    fn fsstat(&self, call: &Call<'_>, fh: &Fh) -> FsResult<(FsStat, Attr)> {
        attr::fsstat(self, call, fh)
    }

    fn fsinfo(&self, call: &Call<'_>, fh: &Fh) -> FsResult<(FsInfo, Attr)> {
        attr::fsinfo(self, call, fh)
    }

    fn pathconf(&self, call: &Call<'_>, fh: &Fh) -> FsResult<(PathConf, Attr)> {
        attr::pathconf(self, call, fh)
    }

    fn commit(&self, call: &Call<'_>, fh: &Fh, offset: u64, count: u32) -> FsResult<Wcc> {
        data::commit(self, call, fh, offset, count)
    }

    fn seek(
        &self,
        call: &Call<'_>,
        fh: &Fh,
        offset: u64,
        what: Content,
    ) -> FsResult<(Option<u64>, Attr)> {
        space::seek(self, call, fh, offset, what)
    }

    fn layout(
        &self,
        call: &Call<'_>,
        fh: &Fh,
        offset: u64,
        len: u64,
        max: usize,
    ) -> FsResult<(Vec<Extent>, Attr)> {
        space::layout(self, call, fh, offset, len, max)
    }

    fn allocate(&self, call: &Call<'_>, fh: &Fh, offset: u64, len: u64) -> FsResult<Wcc> {
        space::allocate(self, call, fh, offset, len)
    }

    fn deallocate(&self, call: &Call<'_>, fh: &Fh, offset: u64, len: u64) -> FsResult<Wcc> {
        space::deallocate(self, call, fh, offset, len)
    }

    fn copy_range(
        &self,
        call: &Call<'_>,
        src: &Fh,
        src_off: u64,
        dst: &Fh,
        dst_off: u64,
        len: u64,
        stable: Stable,
    ) -> FsResult<(u64, Stable, Wcc)> {
        space::copy_range(self, call, src, src_off, dst, dst_off, len, stable)
    }

    fn clone_range(
        &self,
        call: &Call<'_>,
        src: &Fh,
        src_off: u64,
        dst: &Fh,
        dst_off: u64,
        len: u64,
    ) -> FsResult<Wcc> {
        space::clone_range(self, call, src, src_off, dst, dst_off, len)
    }

    fn clone_blksize(&self, call: &Call<'_>, fh: &Fh) -> FsResult<u32> {
        space::clone_blksize(self, call, fh)
    }

    fn open_for_locks(
        &self,
        call: &Call<'_>,
        fh: &Fh,
        how: crate::lock::LockOpen,
    ) -> FsResult<Arc<dyn crate::lock::LockFile>> {
        lock::open_for_locks(self, call, fh, how)
    }

    fn lease(
        &self,
        call: &Call<'_>,
        fh: &Fh,
        write: bool,
        to: libc::pid_t,
    ) -> FsResult<crate::lease::Lease> {
        lock::lease(self, call, fh, write, to)
    }

    fn xattr_support(&self) -> bool {
        self.xattrs
    }

    fn getxattr(&self, call: &Call<'_>, fh: &Fh, name: &[u8], max: usize) -> FsResult<Vec<u8>> {
        xattr::getxattr(self, call, fh, name, max)
    }

    fn setxattr(
        &self,
        call: &Call<'_>,
        fh: &Fh,
        name: &[u8],
        value: &[u8],
        how: crate::xattr::XattrSet,
    ) -> FsResult<Wcc> {
        xattr::setxattr(self, call, fh, name, value, how)
    }

    fn listxattr(&self, call: &Call<'_>, fh: &Fh) -> FsResult<Vec<Vec<u8>>> {
        xattr::listxattr(self, call, fh)
    }

    fn removexattr(&self, call: &Call<'_>, fh: &Fh, name: &[u8]) -> FsResult<Wcc> {
        xattr::removexattr(self, call, fh, name)
    }

    fn stats(&self) -> BackendStats {
        let (scans_waited, scans_busy, scan_passes) = self.scanner.counts();
        let budget = self.caches.budget();
        BackendStats {
            caches: vec![
                CacheStat {
                    name: "objects",
                    capacity: self.objects.capacity() as u64,
                    counts: self.objects.counts(),
                },
                // The handle cache's probation window: first misses not
                // admitted; a hit is a promotion to "objects".
                CacheStat {
                    name: "window",
                    capacity: self.objects.window_capacity() as u64,
                    counts: self.objects.window_counts(),
                },
                CacheStat {
                    name: "files",
                    capacity: self.files.capacity() as u64,
                    counts: self.files.counts(),
                },
                // Cached objects found by identity after a statx by name
                // (LOOKUP, READDIRPLUS): a hit saves an open or a
                // name_to_handle_at.
                {
                    let (capacity, counts) = self.objects.identity_counts();
                    CacheStat {
                        name: "identities",
                        capacity: capacity as u64,
                        counts,
                    }
                },
                // Entries only: the location map counts nothing on its
                // (miss-path) lookups.
                CacheStat {
                    name: "locations",
                    capacity: self.locs.capacity() as u64,
                    counts: crate::cache::Counts {
                        entries: self.locs.len() as u64,
                        ..Default::default()
                    },
                },
            ],
            fds_cached: budget.used() as u64,
            fd_limit: budget.limit() as u64,
            commits: self
                .journal_commits
                .as_ref()
                .map_or(self.committer.counts(), |c| {
                    self.committer.counts().plus(&c.counts())
                }),
            flushes: self.files.flusher().flushes(),
            write_behinds: self.files.behind().started(),
            write_behinds_on_loop: self.files.behind().started_on_loop(),
            scans_waited,
            scans_busy,
            scan_passes,
            ..BackendStats::default()
        }
    }
}
