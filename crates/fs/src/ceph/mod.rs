//! The CephFS backend: an export served from a CephFS directory through
//! libcephfs's low-level API (`ceph_ll_*`), as nfs-ganesha's FSAL_CEPH does,
//! so several rnfsd heads can serve one filesystem.
//!
//! # Handles valid on every head
//! A handle holds the export id, the CephFS filesystem id, the inode number
//! and the inode's creation time (see `crate::handle`, kind CEPH), sealed
//! with the server's handle key: nothing of the head that minted it (no
//! device number, mount id or boot time). Any head with the same key and
//! export id resolves it with `ceph_ll_lookup_inode`, which asks the MDS for
//! inodes this client never saw. The creation time catches a reused inode
//! number (CephFS has no generation numbers); an inode gone or unlinked is
//! Stale. Attributes carry the configured fsid, the same on every head;
//! READDIR cookies are CephFS's own directory offsets, valid everywhere.
//!
//! # What each head keeps
//! A bounded cache inode number -> referenced inode and open file
//! (`inode_cache_entries`); directory listings valid while the directory's
//! mtime and ctime are unchanged (`dir.rs`); its own write verifier and
//! reply cache. Writes
//! go through libcephfs's buffer cache; COMMIT and stable writes sync the
//! inode (group commit per inode), and a sync error resets the verifier.
//! On a `sync` export every namespace change and SETATTR waits for the MDS
//! to journal it (`ceph_ll_sync_inode` on the changed directories and
//! inode) before the reply.
//!
//! # Group commit across inodes
//! COMMITs and stable WRITEs of different files that wait at once share
//! one sync of the whole mount (`sync_node`, at most `mount_syncs` at
//! once): one MDS journal flush for all their size updates, where a sync
//! per inode asks the MDS for a journal flush each. Each call then still
//! syncs its own inode, which finds nothing left to do (or does it: the
//! inode's own answer, as without the group). Creates sync their own new
//! inode: a sync of the mount would also wait for every file's data.
//!
//! # Time limits
//! Every call runs under a time limit (`calls.rs`; `ceph_call!` below): on
//! the server worker while the cluster answers, on a timed pool once a
//! call is stuck. libcephfs blocks while no MDS is active, and a client
//! then gets JUKEBOX and retries, rather than a server worker stuck for
//! good.
//!
//! # Layout
//! `ffi.rs` is the only unsafe code (dlopen of libcephfs.so.2); `attr.rs`,
//! `dir.rs`, `data.rs` and `namespace.rs` hold the procedures by area;
//! `lock.rs` byte-range locks for the lock manager.

mod acl;
mod attr;
mod calls;
mod data;
mod dir;
pub mod ffi;
mod lock;
mod namespace;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::cache::{GenMap, Lru};
use crate::durable::Committer;
use crate::handle::{Decoded, Sealer};
use crate::{
    Attr, Backend, BackendStats, CacheStat, Call, CreateHow, Created, Cred, DirPage, Fh, FsError,
    FsInfo, FsResult, FsStat, NodeKind, PathConf, SetAttr, Stable, Time, Wcc, WriteVerifier,
};
use calls::Calls;
use ffi::{Mount, MountArgs, Perm, Statx};

/// How to reach the filesystem and how much to keep.
#[derive(Clone)]
pub struct CephOptions {
    /// The Ceph configuration file (monitors, keyring).
    pub conf: String,
    /// The cephx client id (`admin` for client.admin).
    pub client: String,
    /// The CephFS filesystem name (None: the cluster's default).
    pub fs: Option<String>,
    /// The directory inside CephFS that is exported.
    pub root: String,
    /// Secret for handle MACs: the same file on every head.
    pub handle_key: [u8; 32],
    /// fsid in attributes: from config, the same on every head.
    pub fsid: u64,
    /// Limit on each libcephfs call before the client gets JUKEBOX.
    pub call_timeout: Duration,
    /// libcephfs calls running at once (on the workers while the cluster
    /// answers, on the timed pool while it does not), and calls waiting
    /// for a pool thread.
    pub call_threads: usize,
    pub call_queue: usize,
    /// Bound on cached inodes (each pins an inode in libcephfs's cache and
    /// may hold an open file).
    pub inode_cache_entries: usize,
    /// Directory listings kept (`ceph_listings`).
    pub listings: usize,
    /// Bound on each wait of the mount itself (seconds).
    pub mount_timeout_secs: u32,
    /// This head's CephFS session name, the same on every start of this
    /// head and different on every other head (see ffi::MountArgs::uuid).
    pub session_uuid: Option<String>,
    pub write_verifier: Option<Arc<WriteVerifier>>,
    /// exports(5) `sync`: namespace changes and SETATTR journaled before
    /// the reply.
    pub sync: bool,
    pub max_syncs_in_flight: usize,
    /// Syncs of the whole mount at once, each answering every COMMIT and
    /// stable WRITE that waits for it (`sync_node`); 0: each syncs its own
    /// inode only.
    pub mount_syncs: usize,
}

impl Default for CephOptions {
    fn default() -> Self {
        CephOptions {
            conf: "/etc/ceph/ceph.conf".into(),
            client: "admin".into(),
            fs: None,
            root: "/".into(),
            handle_key: [0; 32],
            fsid: 0,
            call_timeout: Duration::from_secs(5),
            call_threads: 32,
            call_queue: 256,
            inode_cache_entries: 16384,
            listings: 512,
            mount_timeout_secs: 30,
            session_uuid: None,
            write_verifier: None,
            sync: true,
            max_syncs_in_flight: 64,
            mount_syncs: 1,
        }
    }
}

/// One cached inode: its libcephfs reference, identity, and the files
/// opened for READ (once, on first use) and for WRITE (from the first
/// WRITE or the CREATE until the data is committed).
struct Node {
    inode: ffi::Inode,
    ino: u64,
    btime: (i64, u32),
    rd: OnceLock<Arc<ffi::File>>,
    /// Open for writing from the first WRITE until the data is committed.
    wr: std::sync::Mutex<Option<Arc<ffi::File>>>,
    /// Written UNSTABLE since the last sync: flushed before it is dropped.
    dirty: AtomicBool,
    inner: std::sync::Weak<Inner>,
}

impl Node {
    fn writer(&self) -> Option<Arc<ffi::File>> {
        self.wr.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Closes the write open (outside the lock; calls in flight keep
    /// their reference until they end).
    fn close_writer(&self) {
        let f = self.wr.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(f);
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if !self.dirty.load(Ordering::Acquire) {
            return;
        }
        // Evicted or released with uncommitted data: sync now, and a
        // failure makes every client resend (new verifier).
        if let Some(i) = self.inner.upgrade() {
            if let Err(e) = i.m.sync_inode(&self.inode) {
                i.verifier.reset(&ffi::errstr(e));
            }
        }
    }
}

/// Everything a call needs, shared with the call pool's threads.
struct Inner {
    m: Arc<Mount>,
    sealer: Sealer,
    fscid: u64,
    root: Arc<Node>,
    root_fh: Fh,
    nodes: Lru<u64, Node>,
    /// Directory inode number -> its entries as last listed (`dir.rs`).
    listings: GenMap<u64, Arc<dir::Listing>>,
    verifier: Arc<WriteVerifier>,
    committer: Committer<u64>,
    /// The group commit of COMMITs and stable WRITEs (`sync_node`).
    mount_syncs: Committer<()>,
    /// The server's own identity for opening files (permission is decided
    /// per call for the caller; see `data.rs`).
    root_perm: Perm,
    opts: CephOptions,
}

/// A CephFS directory exported through libcephfs.
pub struct CephFs {
    inner: Arc<Inner>,
    calls: Arc<Calls>,
}

fn err(e: i32) -> FsError {
    // A missing inode is a stale handle (RFC 1813 NFS3ERR_STALE).
    if e == libc::ESTALE {
        FsError::Stale
    } else {
        FsError::Errno(e)
    }
}

thread_local! {
    /// The last caller's libcephfs identity on this thread: a worker
    /// usually serves the same caller again (one allocation saved a call).
    static PERM: std::cell::RefCell<Option<(Cred, std::rc::Rc<Perm>)>> =
        const { std::cell::RefCell::new(None) };
}

fn perm(cred: &Cred) -> FsResult<std::rc::Rc<Perm>> {
    PERM.with(|p| {
        let mut p = p.borrow_mut();
        if let Some((c, perm)) = p.as_ref() {
            if c == cred {
                return Ok(perm.clone());
            }
        }
        let perm = std::rc::Rc::new(Perm::new(cred.uid, cred.gid, &cred.gids).map_err(err)?);
        *p = Some((cred.clone(), perm.clone()));
        Ok(perm)
    })
}

fn btime(st: &Statx) -> (i64, u32) {
    (st.btime.tv_sec, st.btime.tv_nsec as u32)
}

impl CephFs {
    /// Mounts `opts.root` of the filesystem and serves it as `export_id`.
    pub fn open(export_id: u32, opts: CephOptions) -> Result<CephFs, String> {
        let m = Mount::open(&MountArgs {
            conf: &opts.conf,
            client: &opts.client,
            fs: opts.fs.as_deref(),
            root: &opts.root,
            mount_timeout_secs: opts.mount_timeout_secs,
            uuid: opts.session_uuid.as_deref(),
        })?;
        let fscid = u64::try_from(m.fs_cid()).map_err(|_| "no filesystem id".to_owned())?;
        let ri = m
            .lookup_root()
            .map_err(|e| format!("root: {}", ffi::errstr(e)))?;
        let root_perm = Perm::new(0, 0, &[]).map_err(ffi::errstr)?;
        let st = m
            .getattr(&ri, &root_perm)
            .map_err(|e| format!("root: {}", ffi::errstr(e)))?;
        if u32::from(st.mode) & libc::S_IFMT != libc::S_IFDIR {
            return Err(format!("{} is not a directory", opts.root));
        }
        let sealer = Sealer::new(&opts.handle_key, export_id);
        let root_fh = sealer.seal_ceph(fscid, st.ino, btime(&st));
        let verifier = opts
            .write_verifier
            .clone()
            .unwrap_or_else(|| Arc::new(WriteVerifier::new(rand_verifier())));
        let calls = Calls::new(
            "rnfsd-ceph",
            opts.call_threads,
            opts.call_threads,
            opts.call_queue,
            opts.call_timeout,
        );
        let inner = Arc::new_cyclic(|w| Inner {
            root: Arc::new(Node {
                inode: ri,
                ino: st.ino,
                btime: btime(&st),
                rd: OnceLock::new(),
                wr: std::sync::Mutex::new(None),
                dirty: AtomicBool::new(false),
                inner: w.clone(),
            }),
            m,
            sealer,
            fscid,
            root_fh,
            nodes: Lru::new(opts.inode_cache_entries),
            listings: GenMap::new(opts.listings),
            verifier,
            committer: Committer::new(opts.max_syncs_in_flight),
            mount_syncs: Committer::new(opts.mount_syncs),
            root_perm,
            opts,
        });
        Ok(CephFs { inner, calls })
    }
}

/// A start-time verifier for a backend used without the server's.
fn rand_verifier() -> [u8; 8] {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    (t ^ u64::from(std::process::id()).rotate_left(32)).to_be_bytes()
}

impl Inner {
    fn node(self: &Arc<Self>, inode: ffi::Inode, st: &Statx) -> Arc<Node> {
        if st.ino == self.root.ino {
            return self.root.clone();
        }
        if let Some(n) = self.nodes.get(&st.ino) {
            if n.btime == btime(st) {
                return n;
            }
            // The number was reused: the old object is gone.
            self.nodes.remove_if_same(&st.ino, &n);
        }
        let n = Arc::new(Node {
            inode,
            ino: st.ino,
            btime: btime(st),
            rd: OnceLock::new(),
            wr: std::sync::Mutex::new(None),
            dirty: AtomicBool::new(false),
            inner: Arc::downgrade(self),
        });
        let mut dropped = Vec::new();
        // Never on an event loop: a call there gives up before it reaches
        // the cluster (`Calls::direct`).
        let r = self.nodes.insert(st.ino, n, false, &mut dropped).into_arc();
        drop(dropped);
        r
    }

    fn fh_of(&self, st: &Statx) -> Fh {
        self.sealer.seal_ceph(self.fscid, st.ino, btime(st))
    }

    /// The object a handle names: from the cache, or asked of the MDS by
    /// inode number (any head's handle, also after a restart).
    fn resolve(self: &Arc<Self>, fh: &Fh) -> FsResult<Arc<Node>> {
        if fh.0 == self.root_fh.0 {
            return Ok(self.root.clone());
        }
        let (ino, bt) = match self.sealer.open(&fh.0)? {
            Decoded::Ceph { fscid, ino, btime } if fscid == self.fscid => (ino, btime),
            // Sealed with our key for another filesystem or backend.
            _ => return Err(FsError::Stale),
        };
        if let Some(n) = self.nodes.get(&ino) {
            return if n.btime == bt {
                Ok(n)
            } else {
                Err(FsError::Stale)
            };
        }
        let inode = self.m.lookup_inode(ino).map_err(|e| match e {
            libc::ENOENT | libc::ESTALE => FsError::Stale,
            e => FsError::Errno(e),
        })?;
        let st = self.m.getattr(&inode, self.server_perm()?).map_err(err)?;
        if btime(&st) != bt || st.nlink == 0 {
            return Err(FsError::Stale);
        }
        Ok(self.node(inode, &st))
    }

    /// The server's own identity (root): files are opened as it.
    fn server_perm(&self) -> FsResult<&Perm> {
        Ok(&self.root_perm)
    }

    /// Fresh attributes; an object unlinked behind our back is Stale (and
    /// leaves the cache, releasing its inode so the MDS can free it).
    fn attrs(&self, n: &Arc<Node>) -> FsResult<Statx> {
        let st = self.m.getattr(&n.inode, self.server_perm()?).map_err(err)?;
        if st.nlink == 0 {
            self.forget(n.ino);
            return Err(FsError::Stale);
        }
        Ok(st)
    }

    fn attr(&self, n: &Arc<Node>) -> FsResult<Attr> {
        Ok(attr::to_attr(&self.attrs(n)?, self.opts.fsid))
    }

    /// Post-op attributes where they can be had (RFC 1813 allows none).
    fn post(&self, n: &Arc<Node>) -> Option<Attr> {
        self.attr(n).ok()
    }

    fn forget(&self, ino: u64) {
        if let Some(n) = self.nodes.remove(&ino) {
            drop(n);
        }
    }

    /// Makes `n`'s data durable, as `ceph_ll_sync_inode` does, sharing
    /// the work with every COMMIT that waits at once (group commit, the
    /// XFS/blk-mq lesson: one flush answers a batch). A call that finds a
    /// slot free and nobody to share with syncs its inode alone. The others
    /// queue; one of them syncs the whole mount for the batch
    /// (`ceph_sync_fs`: all dirty data, and all dirty caps with one MDS
    /// journal flush, where each inode's sync asks for one), then each
    /// syncs its own inode: nothing is left to do then (no MDS or OSD round
    /// trip), and that sync's result is the call's, as without the group:
    /// the promise is the inode sync's, the batch only does its work early.
    fn sync_node(&self, n: &Node) -> Result<(), i32> {
        let depth = self.opts.mount_syncs;
        if depth == 0 {
            return self.m.sync_inode(&n.inode);
        }
        let mut own = false;
        let r = self.mount_syncs.sync_depth_alone(&(), depth, |alone| {
            own = alone;
            let r = if own {
                self.m.sync_inode(&n.inode)
            } else {
                self.m.sync_fs()
            };
            r.map_err(std::io::Error::from_raw_os_error)
        });
        match r {
            r if own => r,
            // Also after a failed batch: the inode's own sync says what
            // failed.
            _ => self.m.sync_inode(&n.inode),
        }
    }

    /// On a `sync` export, waits until `nodes`' changes are journaled.
    fn journal(&self, nodes: &[&Arc<Node>]) -> FsResult<()> {
        if !self.opts.sync {
            return Ok(());
        }
        for n in nodes {
            self.m.sync_inode(&n.inode).map_err(|e| {
                self.verifier.reset(&ffi::errstr(e));
                FsError::Errno(e)
            })?;
        }
        Ok(())
    }
}

/// One backend call under the time limit: run here, borrowing its
/// arguments, while the cluster answers; otherwise on the timed pool with
/// owned copies of the arguments named in `[..]` (the call may outlive the
/// worker's wait), the caller's credential named `|i, cred|` likewise. The
/// handles in `on [..]` are the objects it must not overtake a late call
/// on (`calls.rs`). The healthy path copies and allocates nothing.
macro_rules! ceph_call {
    ($self:ident, $call:ident, on [$($k:ident),*], [$($v:ident),*], |$i:ident, $cred:ident| $body:expr) => {{
        match $self.calls.direct($call, &[$($k),*])? {
            Some(_held) => {
                let $i = &$self.inner;
                let $cred = $call.cred;
                // The body borrows owned copies on the pool: here its `&`
                // of what is already a reference is the same body text.
                #[allow(clippy::needless_borrow)]
                let r = $body;
                r
            }
            None => {
                let keys = vec![$(calls::fh_key($k)),*];
                $(let $v = $v.to_owned();)*
                let $cred = $call.cred.clone();
                let inner = $self.inner.clone();
                $self.calls.pooled(keys, move || {
                    let $i = &inner;
                    $body
                })
            }
        }
    }};
    ($self:ident, $call:ident, on [$($k:ident),*], [$($v:ident),*], |$i:ident| $body:expr) => {{
        match $self.calls.direct($call, &[$($k),*])? {
            Some(_held) => {
                let $i = &$self.inner;
                #[allow(clippy::needless_borrow)]
                let r = $body;
                r
            }
            None => {
                let keys = vec![$(calls::fh_key($k)),*];
                $(let $v = $v.to_owned();)*
                let inner = $self.inner.clone();
                $self.calls.pooled(keys, move || {
                    let $i = &inner;
                    $body
                })
            }
        }
    }};
}

impl Backend for CephFs {
    fn root(&self) -> Fh {
        self.inner.root_fh.clone()
    }

    // attr.rs
    fn getattr(&self, call: &Call<'_>, fh: &Fh) -> FsResult<Attr> {
        ceph_call!(self, call, on[fh], [fh], |i| i.attr(&i.resolve(&fh)?))
    }

    fn setattr(
        &self,
        call: &Call<'_>,
        fh: &Fh,
        set: &SetAttr,
        guard: Option<Time>,
    ) -> FsResult<Wcc> {
        ceph_call!(self, call, on[fh], [fh, set], |i, cred| i
            .setattr(&cred, &fh, &set, guard))
    }

    fn access(&self, call: &Call<'_>, fh: &Fh, want: u32) -> FsResult<(u32, Attr)> {
        ceph_call!(self, call, on[fh], [fh], |i, cred| i
            .access(&cred, &fh, want))
    }

    fn fsstat(&self, call: &Call<'_>, fh: &Fh) -> FsResult<(FsStat, Attr)> {
        ceph_call!(self, call, on[fh], [fh], |i| i.fsstat(&fh))
    }

    fn fsinfo(&self, call: &Call<'_>, fh: &Fh) -> FsResult<(FsInfo, Attr)> {
        ceph_call!(self, call, on[fh], [fh], |i| Ok((
            attr::FSINFO,
            i.attr(&i.resolve(&fh)?)?
        )))
    }

    fn pathconf(&self, call: &Call<'_>, fh: &Fh) -> FsResult<(PathConf, Attr)> {
        ceph_call!(self, call, on[fh], [fh], |i| Ok((
            attr::PATHCONF,
            i.attr(&i.resolve(&fh)?)?
        )))
    }

    // dir.rs
    fn lookup(&self, call: &Call<'_>, dir: &Fh, name: &[u8]) -> FsResult<(Fh, Attr, Option<Attr>)> {
        ceph_call!(self, call, on[dir], [dir, name], |i, cred| i
            .lookup(&cred, &dir, &name))
    }

    fn readlink(&self, call: &Call<'_>, fh: &Fh) -> FsResult<(Vec<u8>, Attr)> {
        ceph_call!(self, call, on[fh], [fh], |i, cred| i.readlink(&cred, &fh))
    }

    fn readdir(
        &self,
        call: &Call<'_>,
        dir: &Fh,
        cookie: u64,
        _verifier: [u8; 8],
        max_entries: usize,
        plus: bool,
    ) -> FsResult<DirPage> {
        ceph_call!(self, call, on[dir], [dir], |i, cred| i.readdir(
            &cred,
            &dir,
            cookie,
            max_entries,
            plus
        ))
    }

    // data.rs
    fn read(
        &self,
        call: &Call<'_>,
        fh: &Fh,
        offset: u64,
        count: u32,
        buf: &mut Vec<u8>,
    ) -> FsResult<(bool, Attr)> {
        // Straight into the caller's buffer when run here; through a
        // buffer of the call's own on the pool.
        if let Some(_held) = self.calls.direct(call, &[fh])? {
            return self.inner.read(call.cred, fh, offset, count, buf);
        }
        let (cred, fh, inner) = (call.cred.clone(), fh.clone(), self.inner.clone());
        let (data, eof, a) = self.calls.pooled(vec![calls::fh_key(&fh)], move || {
            let mut data = Vec::new();
            let (eof, a) = inner.read(&cred, &fh, offset, count, &mut data)?;
            Ok((data, eof, a))
        })?;
        buf.extend_from_slice(&data);
        Ok((eof, a))
    }

    fn write(
        &self,
        call: &Call<'_>,
        fh: &Fh,
        offset: u64,
        data: &[u8],
        stable: Stable,
    ) -> FsResult<(u32, Stable, Wcc)> {
        ceph_call!(self, call, on[fh], [fh, data], |i, cred| i
            .write(&cred, &fh, offset, &data, stable))
    }

    fn commit(&self, call: &Call<'_>, fh: &Fh, _offset: u64, _count: u32) -> FsResult<Wcc> {
        ceph_call!(self, call, on[fh], [fh], |i, cred| i.commit(&cred, &fh))
    }

    // namespace.rs
    fn create(&self, call: &Call<'_>, dir: &Fh, name: &[u8], how: &CreateHow) -> FsResult<Created> {
        ceph_call!(self, call, on[dir], [dir, name, how], |i, cred| i
            .create(&cred, &dir, &name, &how))
    }

    fn mkdir(&self, call: &Call<'_>, dir: &Fh, name: &[u8], set: &SetAttr) -> FsResult<Created> {
        ceph_call!(self, call, on[dir], [dir, name, set], |i, cred| i
            .mkdir(&cred, &dir, &name, &set))
    }

    fn symlink(
        &self,
        call: &Call<'_>,
        dir: &Fh,
        name: &[u8],
        target: &[u8],
        set: &SetAttr,
    ) -> FsResult<Created> {
        ceph_call!(self, call, on[dir], [dir, name, target, set], |i, cred| i
            .symlink(&cred, &dir, &name, &target, &set))
    }

    fn mknod(
        &self,
        call: &Call<'_>,
        dir: &Fh,
        name: &[u8],
        kind: NodeKind,
        set: &SetAttr,
    ) -> FsResult<Created> {
        ceph_call!(self, call, on[dir], [dir, name, set], |i, cred| i
            .mknod(&cred, &dir, &name, kind, &set))
    }

    fn remove(&self, call: &Call<'_>, dir: &Fh, name: &[u8]) -> FsResult<Wcc> {
        ceph_call!(self, call, on[dir], [dir, name], |i, cred| i
            .remove(&cred, &dir, &name, false))
    }

    fn rmdir(&self, call: &Call<'_>, dir: &Fh, name: &[u8]) -> FsResult<Wcc> {
        ceph_call!(self, call, on[dir], [dir, name], |i, cred| i
            .remove(&cred, &dir, &name, true))
    }

    fn rename(
        &self,
        call: &Call<'_>,
        from_dir: &Fh,
        from: &[u8],
        to_dir: &Fh,
        to: &[u8],
    ) -> FsResult<(Wcc, Wcc)> {
        ceph_call!(self, call, on [from_dir, to_dir], [from_dir, from, to_dir, to], |i, cred| i
            .rename(&cred, &from_dir, &from, &to_dir, &to))
    }

    fn link(&self, call: &Call<'_>, file: &Fh, dir: &Fh, name: &[u8]) -> FsResult<(Attr, Wcc)> {
        ceph_call!(self, call, on [file, dir], [file, dir, name], |i, cred| i
            .link(&cred, &file, &dir, &name))
    }

    // lock.rs
    // CephFS locks need no particular open mode (and no lease to spare).
    fn open_for_locks(
        &self,
        call: &Call<'_>,
        fh: &Fh,
        _how: crate::lock::LockOpen,
    ) -> FsResult<Arc<dyn crate::lock::LockFile>> {
        let f = ceph_call!(self, call, on[fh], [fh], |i, cred| i
            .open_for_locks(&cred, &fh))?;
        Ok(Arc::new(lock::CephLocks::new(f, self.calls.clone())))
    }

    fn shutdown(&self) {
        // Calls still inside libcephfs (the cluster stopped answering
        // them) would use what an unmount frees: wait for them a while,
        // else leave the session to the MDS's timeout.
        if !self.calls.close(self.inner.opts.call_timeout) {
            tracing::warn!(
                "CephFS calls still wait for the cluster at exit: the session is left, and the MDS ends it at its timeout (or this head's next start does)"
            );
            self.inner.m.abandon();
            return;
        }
        // Written but uncommitted data first (as a close would), then the
        // session, so other heads get its capabilities at once.
        // Two passes: the first clears the CLOCK's second-chance bits.
        for _ in 0..2 {
            let mut nodes = Vec::new();
            self.inner
                .nodes
                .reclaim(self.inner.nodes.capacity(), &mut nodes);
            drop(nodes);
        }
        self.inner.m.unmount_for_exit();
    }

    fn stats(&self) -> BackendStats {
        let i = &self.inner;
        BackendStats {
            caches: vec![CacheStat {
                name: "inodes",
                capacity: i.nodes.capacity() as u64,
                counts: i.nodes.counts(),
            }],
            commits: i.committer.counts(),
            calls_jukebox: self.calls.timed_out.load(Ordering::Relaxed)
                + self.calls.refused.load(Ordering::Relaxed),
            stalls: self.calls.stalls.load(Ordering::Relaxed),
            ..Default::default()
        }
    }
}
