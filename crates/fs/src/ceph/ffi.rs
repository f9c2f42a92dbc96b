//! The thin libcephfs layer: the one place the CephFS backend uses `unsafe`.
//!
//! libcephfs.so.2 is opened with dlopen at the first CephFS export, not
//! linked: the server builds and runs on hosts without Ceph, and only an
//! export that asks for CephFS needs the library (Debian: `libcephfs2`).
//! Hand-written rather than a bindings crate: we call about 35 functions of
//! the stable `ceph_ll_*` API and one struct, and the young `cephfs-sys`
//! needs libclang at build time for what fits on two screens.
//!
//! Every wrapper returns `Err(errno)` (positive) for libcephfs's negative
//! returns. libcephfs serializes on its client lock, so one mount is used
//! from many threads at once; each `Inode`, `File` and `Dir` holds a
//! reference to its mount, so the mount is released last.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

#[repr(C)]
pub struct CMount {
    _p: [u8; 0],
}
#[repr(C)]
pub struct CInode {
    _p: [u8; 0],
}
#[repr(C)]
pub struct CFh {
    _p: [u8; 0],
}
#[repr(C)]
pub struct CPerm {
    _p: [u8; 0],
}
#[repr(C)]
pub struct CDir {
    _p: [u8; 0],
}

/// `struct inodeno_t` (ceph_ll_client.h), passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct InodeNo {
    pub val: u64,
}

/// `struct ceph_statx` (ceph_ll_client.h).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Statx {
    pub mask: u32,
    pub blksize: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub mode: u16,
    pub ino: u64,
    pub size: u64,
    pub blocks: u64,
    pub dev: libc::dev_t,
    pub rdev: libc::dev_t,
    pub atime: libc::timespec,
    pub ctime: libc::timespec,
    pub mtime: libc::timespec,
    pub btime: libc::timespec,
    pub version: u64,
}

impl Default for Statx {
    fn default() -> Self {
        let z = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        Statx {
            mask: 0,
            blksize: 0,
            nlink: 0,
            uid: 0,
            gid: 0,
            mode: 0,
            ino: 0,
            size: 0,
            blocks: 0,
            dev: 0,
            rdev: 0,
            atime: z,
            ctime: z,
            mtime: z,
            btime: z,
            version: 0,
        }
    }
}

pub const STATX_BASIC: c_uint = 0x7ff;
pub const STATX_BTIME: c_uint = 0x800;
/// What every attribute fetch asks for: fattr3 and the creation time that
/// handles carry.
pub const WANT: c_uint = STATX_BASIC | STATX_BTIME;

pub const SETATTR_MODE: c_int = 1 << 0;
pub const SETATTR_UID: c_int = 1 << 1;
pub const SETATTR_GID: c_int = 1 << 2;
pub const SETATTR_MTIME: c_int = 1 << 3;
pub const SETATTR_ATIME: c_int = 1 << 4;
pub const SETATTR_SIZE: c_int = 1 << 5;
pub const SETATTR_MTIME_NOW: c_int = 1 << 7;
pub const SETATTR_ATIME_NOW: c_int = 1 << 8;

macro_rules! ceph_fns {
    ($($name:ident: fn($($arg:ty),*) -> $ret:ty;)*) => {
        #[allow(non_snake_case)]
        struct Fns {
            $($name: unsafe extern "C" fn($($arg),*) -> $ret,)*
        }
        impl Fns {
            fn load(lib: &libloading::Library) -> Result<Fns, String> {
                Ok(Fns {
                    $($name: {
                        let sym = concat!(stringify!($name), "\0");
                        // SAFETY: the symbol is declared above with its
                        // prototype from libcephfs.h (Ceph 16 and later);
                        // the library is never unloaded (static LIB).
                        let f = unsafe {
                            lib.get::<unsafe extern "C" fn($($arg),*) -> $ret>(sym.as_bytes())
                        }
                        .map_err(|e| format!("libcephfs: {}: {e}", stringify!($name)))?;
                        *f
                    },)*
                })
            }
        }
    };
}

ceph_fns! {
    ceph_create: fn(*mut *mut CMount, *const c_char) -> c_int;
    ceph_conf_read_file: fn(*mut CMount, *const c_char) -> c_int;
    ceph_conf_set: fn(*mut CMount, *const c_char, *const c_char) -> c_int;
    ceph_init: fn(*mut CMount) -> c_int;
    ceph_select_filesystem: fn(*mut CMount, *const c_char) -> c_int;
    ceph_mount: fn(*mut CMount, *const c_char) -> c_int;
    ceph_unmount: fn(*mut CMount) -> c_int;
    ceph_release: fn(*mut CMount) -> c_int;
    ceph_get_fs_cid: fn(*mut CMount) -> i64;
    ceph_umask: fn(*mut CMount, libc::mode_t) -> libc::mode_t;
    ceph_set_uuid: fn(*mut CMount, *const c_char) -> ();
    ceph_start_reclaim: fn(*mut CMount, *const c_char, c_uint) -> c_int;
    ceph_finish_reclaim: fn(*mut CMount) -> ();
    ceph_userperm_new: fn(libc::uid_t, libc::gid_t, c_int, *mut libc::gid_t) -> *mut CPerm;
    ceph_userperm_destroy: fn(*mut CPerm) -> ();
    ceph_ll_lookup_root: fn(*mut CMount, *mut *mut CInode) -> c_int;
    ceph_ll_lookup_inode: fn(*mut CMount, InodeNo, *mut *mut CInode) -> c_int;
    ceph_ll_lookup: fn(*mut CMount, *mut CInode, *const c_char, *mut *mut CInode, *mut Statx, c_uint, c_uint, *const CPerm) -> c_int;
    ceph_ll_put: fn(*mut CMount, *mut CInode) -> c_int;
    ceph_ll_getattr: fn(*mut CMount, *mut CInode, *mut Statx, c_uint, c_uint, *const CPerm) -> c_int;
    ceph_ll_setattr: fn(*mut CMount, *mut CInode, *mut Statx, c_int, *const CPerm) -> c_int;
    ceph_ll_open: fn(*mut CMount, *mut CInode, c_int, *mut *mut CFh, *const CPerm) -> c_int;
    ceph_ll_close: fn(*mut CMount, *mut CFh) -> c_int;
    ceph_ll_read: fn(*mut CMount, *mut CFh, i64, u64, *mut c_char) -> c_int;
    ceph_ll_write: fn(*mut CMount, *mut CFh, i64, u64, *const c_char) -> c_int;
    ceph_ll_fsync: fn(*mut CMount, *mut CFh, c_int) -> c_int;
    ceph_ll_sync_inode: fn(*mut CMount, *mut CInode, c_int) -> c_int;
    ceph_sync_fs: fn(*mut CMount) -> c_int;
    ceph_ll_create: fn(*mut CMount, *mut CInode, *const c_char, libc::mode_t, c_int, *mut *mut CInode, *mut *mut CFh, *mut Statx, c_uint, c_uint, *const CPerm) -> c_int;
    ceph_ll_mknod: fn(*mut CMount, *mut CInode, *const c_char, libc::mode_t, libc::dev_t, *mut *mut CInode, *mut Statx, c_uint, c_uint, *const CPerm) -> c_int;
    ceph_ll_mkdir: fn(*mut CMount, *mut CInode, *const c_char, libc::mode_t, *mut *mut CInode, *mut Statx, c_uint, c_uint, *const CPerm) -> c_int;
    ceph_ll_symlink: fn(*mut CMount, *mut CInode, *const c_char, *const c_char, *mut *mut CInode, *mut Statx, c_uint, c_uint, *const CPerm) -> c_int;
    ceph_ll_link: fn(*mut CMount, *mut CInode, *mut CInode, *const c_char, *const CPerm) -> c_int;
    ceph_ll_unlink: fn(*mut CMount, *mut CInode, *const c_char, *const CPerm) -> c_int;
    ceph_ll_rmdir: fn(*mut CMount, *mut CInode, *const c_char, *const CPerm) -> c_int;
    ceph_ll_rename: fn(*mut CMount, *mut CInode, *const c_char, *mut CInode, *const c_char, *const CPerm) -> c_int;
    ceph_ll_getxattr: fn(*mut CMount, *mut CInode, *const c_char, *mut c_void, usize, *const CPerm) -> c_int;
    ceph_ll_setxattr: fn(*mut CMount, *mut CInode, *const c_char, *const c_void, usize, c_int, *const CPerm) -> c_int;
    ceph_ll_readlink: fn(*mut CMount, *mut CInode, *mut c_char, usize, *const CPerm) -> c_int;
    ceph_ll_statfs: fn(*mut CMount, *mut CInode, *mut libc::statvfs) -> c_int;
    ceph_ll_opendir: fn(*mut CMount, *mut CInode, *mut *mut CDir, *const CPerm) -> c_int;
    ceph_ll_releasedir: fn(*mut CMount, *mut CDir) -> c_int;
    ceph_readdirplus_r: fn(*mut CMount, *mut CDir, *mut libc::dirent, *mut Statx, c_uint, c_uint, *mut *mut CInode) -> c_int;
    ceph_telldir: fn(*mut CMount, *mut CDir) -> i64;
    ceph_seekdir: fn(*mut CMount, *mut CDir, i64) -> ();
    ceph_ll_getlk: fn(*mut CMount, *mut CFh, *mut libc::flock, u64) -> c_int;
    ceph_ll_setlk: fn(*mut CMount, *mut CFh, *mut libc::flock, u64, c_int) -> c_int;
}

struct Lib {
    _lib: libloading::Library,
    f: Fns,
}

static LIB: OnceLock<Result<Lib, String>> = OnceLock::new();

fn lib() -> Result<&'static Fns, String> {
    let l = LIB.get_or_init(|| {
        // SAFETY: loading runs libcephfs's initializers, which have no
        // preconditions on us; we never unload it.
        let lib = unsafe { libloading::Library::new("libcephfs.so.2") }.map_err(|e| {
            format!(
                "cannot load libcephfs.so.2 ({e}): install libcephfs2 (Debian) to export CephFS"
            )
        })?;
        let f = Fns::load(&lib)?;
        Ok(Lib { _lib: lib, f })
    });
    l.as_ref().map(|l| &l.f).map_err(|e| e.clone())
}

fn rc(r: c_int) -> Result<c_int, i32> {
    if r < 0 {
        Err(-r)
    } else {
        Ok(r)
    }
}

fn cstr(b: &[u8]) -> Result<CString, i32> {
    CString::new(b).map_err(|_| libc::EINVAL)
}

/// One libcephfs client, mounted.
pub struct Mount {
    cm: *mut CMount,
    f: &'static Fns,
    /// Unmounted for the process's exit: nothing may call libcephfs on it.
    gone: AtomicBool,
}

// SAFETY: libcephfs's Client serializes every call on its client_lock; a
// ceph_mount_info is meant to be shared by threads (nfs-ganesha does).
unsafe impl Send for Mount {}
// SAFETY: as above.
unsafe impl Sync for Mount {}

/// Where and how to mount.
pub struct MountArgs<'a> {
    pub conf: &'a str,
    /// The cephx id (`admin` for client.admin).
    pub client: &'a str,
    /// None: the cluster's default filesystem.
    pub fs: Option<&'a str>,
    /// The directory inside CephFS that becomes our root.
    pub root: &'a str,
    /// Bound on each MDS/OSD wait libcephfs makes while mounting (seconds).
    pub mount_timeout_secs: u32,
    /// This head's session name: a session left by an earlier run under
    /// the same name (killed, crashed) is ended at mount, so its
    /// capabilities do not hold other clients up until its timeout.
    pub uuid: Option<&'a str>,
}

/// ceph_start_reclaim: end the old session rather than take its state.
const RECLAIM_RESET: c_uint = 1;

impl Mount {
    pub fn open(a: &MountArgs<'_>) -> Result<Arc<Mount>, String> {
        let f = lib()?;
        let c = |s: &str| CString::new(s).map_err(|_| format!("NUL in {s:?}"));
        let id = c(a.client)?;
        let mut cm: *mut CMount = ptr::null_mut();
        // SAFETY: cm is a valid out-pointer; id a NUL-terminated string.
        rc(unsafe { (f.ceph_create)(&mut cm, id.as_ptr()) })
            .map_err(|e| format!("ceph_create: {}", errstr(e)))?;
        // From here Drop unmounts (a no-op before mount) and releases.
        let m = Mount {
            cm,
            f,
            gone: AtomicBool::new(false),
        };
        // libcephfs gathers debug messages in memory at level 5 by default
        // and a log thread wakes for each: most of a cached call's cost. Off
        // unless the configuration file (read next, so it wins) asks.
        let debug = [
            "client",
            "ms",
            "objecter",
            "objectcacher",
            "monc",
            "auth",
            "rados",
        ]
        .map(|s| (format!("debug_{s}"), "0/0"));
        // Capabilities a head no longer uses go back after 1 s, not 5: a
        // writable range the MDS keeps for a head that then dies makes it
        // recover the file, and that resets a time set after the writes.
        let release = [("client_caps_release_delay".to_owned(), "1")];
        for (k, v) in debug.iter().chain(release.iter()) {
            let (kc, vc) = (c(k)?, c(v)?);
            // SAFETY: both strings NUL-terminated; cm valid.
            rc(unsafe { (f.ceph_conf_set)(m.cm, kc.as_ptr(), vc.as_ptr()) })
                .map_err(|e| format!("ceph_conf_set {k}: {}", errstr(e)))?;
        }
        let conf = c(a.conf)?;
        // SAFETY: m.cm was created above; conf is NUL-terminated.
        rc(unsafe { (f.ceph_conf_read_file)(m.cm, conf.as_ptr()) })
            .map_err(|e| format!("reading {}: {}", a.conf, errstr(e)))?;
        // After the file, so it wins: POSIX ACLs checked by libcephfs for
        // what callers do as themselves (lookups, namespace changes,
        // SETATTR), inherited from default ACLs at creation, updated by a
        // chmod, and readable for the backend's own checks (`acl.rs`), as a
        // kernel mount does by default (nfs-ganesha sets it too).
        let set = [
            ("client_mount_timeout", a.mount_timeout_secs.to_string()),
            ("client_acl_type", "posix_acl".to_owned()),
        ];
        for (k, v) in set {
            let (kc, vc) = (c(k)?, c(&v)?);
            // SAFETY: both strings NUL-terminated; cm valid.
            rc(unsafe { (f.ceph_conf_set)(m.cm, kc.as_ptr(), vc.as_ptr()) })
                .map_err(|e| format!("ceph_conf_set {k}: {}", errstr(e)))?;
        }
        // SAFETY: cm valid, configured.
        rc(unsafe { (f.ceph_init)(m.cm) }).map_err(|e| format!("ceph_init: {}", errstr(e)))?;
        if let Some(fs) = a.fs {
            let fsc = c(fs)?;
            // SAFETY: cm initialized; fsc NUL-terminated.
            rc(unsafe { (f.ceph_select_filesystem)(m.cm, fsc.as_ptr()) })
                .map_err(|e| format!("filesystem {fs}: {}", errstr(e)))?;
        }
        if let Some(u) = a.uuid {
            let uc = c(u)?;
            // SAFETY: cm initialized, not mounted; uc NUL-terminated.
            match rc(unsafe { (f.ceph_start_reclaim)(m.cm, uc.as_ptr(), RECLAIM_RESET) }) {
                // SAFETY: a reclaim was started on cm.
                Ok(_) => unsafe { (f.ceph_finish_reclaim)(m.cm) },
                // No earlier session under that name.
                Err(libc::ENOENT) => {}
                Err(e) => {
                    tracing::warn!(uuid = u, error = %errstr(e), "could not end this head's earlier CephFS session: its capabilities stay until the MDS times it out")
                }
            }
            // SAFETY: cm initialized, not mounted; uc NUL-terminated.
            unsafe { (f.ceph_set_uuid)(m.cm, uc.as_ptr()) };
        }
        // No umask of libcephfs's own (002 once ACLs are on): the client
        // applied its user's; a default ACL still applies at creation.
        // SAFETY: cm initialized.
        unsafe { (f.ceph_umask)(m.cm, 0) };
        let root = c(a.root)?;
        // SAFETY: cm initialized; root NUL-terminated.
        rc(unsafe { (f.ceph_mount)(m.cm, root.as_ptr()) })
            .map_err(|e| format!("mounting {}: {}", a.root, errstr(e)))?;
        Ok(Arc::new(m))
    }

    /// The CephFS filesystem id (fscid), the same for every client.
    pub fn fs_cid(&self) -> i64 {
        // SAFETY: cm is mounted.
        unsafe { (self.f.ceph_get_fs_cid)(self.cm) }
    }

    fn inode(self: &Arc<Self>, p: *mut CInode) -> Inode {
        Inode { p, m: self.clone() }
    }

    pub fn lookup_root(self: &Arc<Self>) -> Result<Inode, i32> {
        let mut p = ptr::null_mut();
        // SAFETY: cm mounted; p a valid out-pointer.
        rc(unsafe { (self.f.ceph_ll_lookup_root)(self.cm, &mut p) })?;
        Ok(self.inode(p))
    }

    /// Any client's inode number, also one this client never saw (ESTALE
    /// when it no longer exists).
    pub fn lookup_inode(self: &Arc<Self>, ino: u64) -> Result<Inode, i32> {
        let mut p = ptr::null_mut();
        // SAFETY: cm mounted; p a valid out-pointer.
        rc(unsafe { (self.f.ceph_ll_lookup_inode)(self.cm, InodeNo { val: ino }, &mut p) })?;
        Ok(self.inode(p))
    }

    pub fn lookup(
        self: &Arc<Self>,
        dir: &Inode,
        name: &[u8],
        perm: &Perm,
    ) -> Result<(Inode, Statx), i32> {
        let n = cstr(name)?;
        let (mut p, mut st) = (ptr::null_mut(), Statx::default());
        // SAFETY: dir is a live referenced inode of this mount; out-pointers valid.
        rc(unsafe {
            (self.f.ceph_ll_lookup)(self.cm, dir.p, n.as_ptr(), &mut p, &mut st, WANT, 0, perm.p)
        })?;
        Ok((self.inode(p), st))
    }

    pub fn getattr(&self, i: &Inode, perm: &Perm) -> Result<Statx, i32> {
        let mut st = Statx::default();
        // SAFETY: i is a live inode of this mount; st a valid out-pointer.
        rc(unsafe { (self.f.ceph_ll_getattr)(self.cm, i.p, &mut st, WANT, 0, perm.p) })?;
        Ok(st)
    }

    pub fn setattr(&self, i: &Inode, st: &mut Statx, mask: c_int, perm: &Perm) -> Result<(), i32> {
        // SAFETY: i live; st valid for the call.
        rc(unsafe { (self.f.ceph_ll_setattr)(self.cm, i.p, st, mask, perm.p) }).map(drop)
    }

    pub fn open_file(self: &Arc<Self>, i: &Inode, flags: c_int, perm: &Perm) -> Result<File, i32> {
        let mut fh = ptr::null_mut();
        // SAFETY: i live; fh a valid out-pointer.
        rc(unsafe { (self.f.ceph_ll_open)(self.cm, i.p, flags, &mut fh, perm.p) })?;
        Ok(File {
            fh,
            m: self.clone(),
        })
    }

    /// Reads up to `buf.len()` bytes at `off`; returns the count.
    pub fn read(&self, f: &File, off: u64, buf: &mut [u8]) -> Result<usize, i32> {
        let off = i64::try_from(off).map_err(|_| libc::EINVAL)?;
        // SAFETY: f open on this mount; buf writable for its length.
        let n = rc(unsafe {
            (self.f.ceph_ll_read)(
                self.cm,
                f.fh,
                off,
                buf.len() as u64,
                buf.as_mut_ptr().cast(),
            )
        })?;
        Ok(n as usize)
    }

    pub fn write(&self, f: &File, off: u64, data: &[u8]) -> Result<usize, i32> {
        let off = i64::try_from(off).map_err(|_| libc::EFBIG)?;
        // SAFETY: f open on this mount; data readable for its length.
        let n = rc(unsafe {
            (self.f.ceph_ll_write)(self.cm, f.fh, off, data.len() as u64, data.as_ptr().cast())
        })?;
        Ok(n as usize)
    }

    pub fn fsync(&self, f: &File, data_only: bool) -> Result<(), i32> {
        // SAFETY: f open on this mount.
        rc(unsafe { (self.f.ceph_ll_fsync)(self.cm, f.fh, c_int::from(data_only)) }).map(drop)
    }

    /// Waits until the inode's changes (data, and for a directory its
    /// entries' creations and removals) are safe on the MDS journal and OSDs.
    pub fn sync_inode(&self, i: &Inode) -> Result<(), i32> {
        // SAFETY: i live.
        rc(unsafe { (self.f.ceph_ll_sync_inode)(self.cm, i.p, 0) }).map(drop)
    }

    /// Syncs everything of this mount at once (libcephfs's `_sync_fs`):
    /// starts the write-back of all dirty data and the flush of all dirty
    /// capabilities (one asks the MDS to flush its journal), asks the MDS
    /// to flush its journal, then waits for the unsafe requests, the cap
    /// flushes and the data. A data write-back error is not returned
    /// (libcephfs drops it; the data stays dirty): a sync of the inode
    /// after it gives that inode's answer.
    pub fn sync_fs(&self) -> Result<(), i32> {
        // SAFETY: the mount is live (self); no pointer argument.
        rc(unsafe { (self.f.ceph_sync_fs)(self.cm) }).map(drop)
    }

    /// Creates (O_CREAT with `oflags`) and opens `name`.
    pub fn create(
        self: &Arc<Self>,
        dir: &Inode,
        name: &[u8],
        mode: u32,
        oflags: c_int,
        perm: &Perm,
    ) -> Result<(Inode, File, Statx), i32> {
        let n = cstr(name)?;
        let (mut p, mut fh, mut st) = (ptr::null_mut(), ptr::null_mut(), Statx::default());
        // SAFETY: dir live; out-pointers valid.
        rc(unsafe {
            (self.f.ceph_ll_create)(
                self.cm,
                dir.p,
                n.as_ptr(),
                mode,
                oflags,
                &mut p,
                &mut fh,
                &mut st,
                WANT,
                0,
                perm.p,
            )
        })?;
        let file = File {
            fh,
            m: self.clone(),
        };
        Ok((self.inode(p), file, st))
    }

    pub fn mknod(
        self: &Arc<Self>,
        dir: &Inode,
        name: &[u8],
        mode: u32,
        rdev: u64,
        perm: &Perm,
    ) -> Result<(Inode, Statx), i32> {
        let n = cstr(name)?;
        let (mut p, mut st) = (ptr::null_mut(), Statx::default());
        // SAFETY: dir live; out-pointers valid.
        rc(unsafe {
            (self.f.ceph_ll_mknod)(
                self.cm,
                dir.p,
                n.as_ptr(),
                mode,
                rdev,
                &mut p,
                &mut st,
                WANT,
                0,
                perm.p,
            )
        })?;
        Ok((self.inode(p), st))
    }

    pub fn mkdir(
        self: &Arc<Self>,
        dir: &Inode,
        name: &[u8],
        mode: u32,
        perm: &Perm,
    ) -> Result<(Inode, Statx), i32> {
        let n = cstr(name)?;
        let (mut p, mut st) = (ptr::null_mut(), Statx::default());
        // SAFETY: dir live; out-pointers valid.
        rc(unsafe {
            (self.f.ceph_ll_mkdir)(
                self.cm,
                dir.p,
                n.as_ptr(),
                mode,
                &mut p,
                &mut st,
                WANT,
                0,
                perm.p,
            )
        })?;
        Ok((self.inode(p), st))
    }

    pub fn symlink(
        self: &Arc<Self>,
        dir: &Inode,
        name: &[u8],
        target: &[u8],
        perm: &Perm,
    ) -> Result<(Inode, Statx), i32> {
        let (n, t) = (cstr(name)?, cstr(target)?);
        let (mut p, mut st) = (ptr::null_mut(), Statx::default());
        // SAFETY: dir live; strings NUL-terminated; out-pointers valid.
        rc(unsafe {
            (self.f.ceph_ll_symlink)(
                self.cm,
                dir.p,
                n.as_ptr(),
                t.as_ptr(),
                &mut p,
                &mut st,
                WANT,
                0,
                perm.p,
            )
        })?;
        Ok((self.inode(p), st))
    }

    pub fn link(&self, i: &Inode, dir: &Inode, name: &[u8], perm: &Perm) -> Result<(), i32> {
        let n = cstr(name)?;
        // SAFETY: both inodes live; n NUL-terminated.
        rc(unsafe { (self.f.ceph_ll_link)(self.cm, i.p, dir.p, n.as_ptr(), perm.p) }).map(drop)
    }

    pub fn unlink(&self, dir: &Inode, name: &[u8], perm: &Perm) -> Result<(), i32> {
        let n = cstr(name)?;
        // SAFETY: dir live; n NUL-terminated.
        rc(unsafe { (self.f.ceph_ll_unlink)(self.cm, dir.p, n.as_ptr(), perm.p) }).map(drop)
    }

    pub fn rmdir(&self, dir: &Inode, name: &[u8], perm: &Perm) -> Result<(), i32> {
        let n = cstr(name)?;
        // SAFETY: dir live; n NUL-terminated.
        rc(unsafe { (self.f.ceph_ll_rmdir)(self.cm, dir.p, n.as_ptr(), perm.p) }).map(drop)
    }

    pub fn rename(
        &self,
        from_dir: &Inode,
        from: &[u8],
        to_dir: &Inode,
        to: &[u8],
        perm: &Perm,
    ) -> Result<(), i32> {
        let (a, b) = (cstr(from)?, cstr(to)?);
        // SAFETY: both inodes live; names NUL-terminated.
        rc(unsafe {
            (self.f.ceph_ll_rename)(
                self.cm,
                from_dir.p,
                a.as_ptr(),
                to_dir.p,
                b.as_ptr(),
                perm.p,
            )
        })
        .map(drop)
    }

    pub fn readlink(&self, i: &Inode, perm: &Perm) -> Result<Vec<u8>, i32> {
        let mut buf = vec![0u8; libc::PATH_MAX as usize];
        // SAFETY: i live; buf writable for its length.
        let n = rc(unsafe {
            (self.f.ceph_ll_readlink)(self.cm, i.p, buf.as_mut_ptr().cast(), buf.len(), perm.p)
        })?;
        buf.truncate(n as usize);
        Ok(buf)
    }

    /// An extended attribute's value; None when the inode has none of
    /// that name.
    pub fn getxattr(&self, i: &Inode, name: &str, perm: &Perm) -> Result<Option<Vec<u8>>, i32> {
        let n = cstr(name.as_bytes())?;
        // Room for an ACL of a few hundred entries at once; a larger value
        // is asked for its size first.
        let mut buf = vec![0u8; 4096];
        for _ in 0..4 {
            // SAFETY: i live; n NUL-terminated; buf writable for its length.
            let r = unsafe {
                (self.f.ceph_ll_getxattr)(
                    self.cm,
                    i.p,
                    n.as_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    perm.p,
                )
            };
            match rc(r) {
                Ok(len) => {
                    buf.truncate(len as usize);
                    return Ok(Some(buf));
                }
                Err(libc::ENODATA) => return Ok(None),
                Err(libc::ERANGE) => {
                    // SAFETY: as above; size 0 asks for the value's size.
                    let need = rc(unsafe {
                        (self.f.ceph_ll_getxattr)(
                            self.cm,
                            i.p,
                            n.as_ptr(),
                            ptr::null_mut(),
                            0,
                            perm.p,
                        )
                    })?;
                    buf.resize(need as usize, 0);
                }
                Err(e) => return Err(e),
            }
        }
        // Changing size under us all along.
        Err(libc::ERANGE)
    }

    /// Sets an extended attribute (`flags`: XATTR_CREATE, XATTR_REPLACE).
    pub fn setxattr(
        &self,
        i: &Inode,
        name: &str,
        value: &[u8],
        flags: c_int,
        perm: &Perm,
    ) -> Result<(), i32> {
        let n = cstr(name.as_bytes())?;
        // SAFETY: i live; n NUL-terminated; value readable for its length.
        rc(unsafe {
            (self.f.ceph_ll_setxattr)(
                self.cm,
                i.p,
                n.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                flags,
                perm.p,
            )
        })
        .map(drop)
    }

    pub fn statfs(&self, i: &Inode) -> Result<libc::statvfs, i32> {
        // SAFETY: statvfs is plain old data; zero is a valid value.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: i live; s a valid out-pointer.
        rc(unsafe { (self.f.ceph_ll_statfs)(self.cm, i.p, &mut s) })?;
        Ok(s)
    }

    pub fn opendir(self: &Arc<Self>, i: &Inode, perm: &Perm) -> Result<Dir, i32> {
        let mut d = ptr::null_mut();
        // SAFETY: i live; d a valid out-pointer.
        rc(unsafe { (self.f.ceph_ll_opendir)(self.cm, i.p, &mut d, perm.p) })?;
        Ok(Dir { d, m: self.clone() })
    }

    /// F_GETLK / F_SETLK(W) on an open file for lock owner `owner`.
    pub fn lock(&self, f: &File, fl: &mut libc::flock, owner: u64, get: bool) -> Result<(), i32> {
        // SAFETY: f open on this mount; fl valid for the call. Never
        // waits (sleep = 0): the lock manager queues blocked requests.
        rc(unsafe {
            if get {
                (self.f.ceph_ll_getlk)(self.cm, f.fh, fl, owner)
            } else {
                (self.f.ceph_ll_setlk)(self.cm, f.fh, fl, owner, 0)
            }
        })
        .map(drop)
    }
}

impl Mount {
    /// Ends the CephFS session now, at the process's exit: otherwise the
    /// MDS keeps it, and the capabilities it holds, until its timeout, and
    /// every other head waits for them. References still held are then
    /// dropped without calling libcephfs.
    pub fn unmount_for_exit(&self) {
        if !self.gone.swap(true, Ordering::AcqRel) {
            // SAFETY: cm mounted; nothing calls it after `gone` is set
            // (drops check it; the process exits next).
            unsafe { (self.f.ceph_unmount)(self.cm) };
        }
    }

    /// At the process's exit with calls still inside libcephfs: the
    /// session is left as it is (unmounting would free what those calls
    /// use), and nothing calls libcephfs on this mount any more.
    pub fn abandon(&self) {
        self.gone.store(true, Ordering::Release);
    }

    fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// Gives back one libcephfs object (`put` with this mount), unless the
    /// session already ended for the process's exit.
    fn release(&self, put: impl FnOnce(&Fns, *mut CMount)) {
        if !self.is_gone() {
            put(self.f, self.cm);
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if self.is_gone() {
            return;
        }
        // SAFETY: every Inode, File and Dir holds an Arc to this mount, so
        // none is left; unmount of an unmounted client is harmless.
        unsafe {
            (self.f.ceph_unmount)(self.cm);
            (self.f.ceph_release)(self.cm);
        }
    }
}

/// A referenced libcephfs inode (one `ceph_ll_put` when dropped).
pub struct Inode {
    p: *mut CInode,
    m: Arc<Mount>,
}

// SAFETY: an Inode pointer is a refcounted object of the mount's client,
// used only under that client's lock by libcephfs.
unsafe impl Send for Inode {}
// SAFETY: as above.
unsafe impl Sync for Inode {}

impl Drop for Inode {
    fn drop(&mut self) {
        // SAFETY: we hold exactly one reference, taken when this was made.
        self.m.release(|f, cm| unsafe {
            (f.ceph_ll_put)(cm, self.p);
        });
    }
}

/// An open libcephfs file (`ceph_ll_close` when dropped).
pub struct File {
    fh: *mut CFh,
    m: Arc<Mount>,
}

// SAFETY: libcephfs file handles are used under the client lock.
unsafe impl Send for File {}
// SAFETY: as above.
unsafe impl Sync for File {}

impl Drop for File {
    fn drop(&mut self) {
        // SAFETY: opened by ceph_ll_open/create and closed only here.
        self.m.release(|f, cm| unsafe {
            (f.ceph_ll_close)(cm, self.fh);
        });
    }
}

/// The caller's identity for libcephfs's permission checks.
pub struct Perm {
    p: *mut CPerm,
    f: &'static Fns,
}

// SAFETY: a UserPerm is immutable after creation.
unsafe impl Send for Perm {}
// SAFETY: as above; libcephfs only reads it.
unsafe impl Sync for Perm {}

impl Perm {
    pub fn new(uid: u32, gid: u32, gids: &[u32]) -> Result<Perm, i32> {
        let f = lib().map_err(|_| libc::ENOSYS)?;
        let mut g: Vec<libc::gid_t> = gids.to_vec();
        let n = c_int::try_from(g.len()).map_err(|_| libc::EINVAL)?;
        // SAFETY: g holds n gids; libcephfs copies them.
        let p = unsafe { (f.ceph_userperm_new)(uid, gid, n, g.as_mut_ptr()) };
        if p.is_null() {
            return Err(libc::ENOMEM);
        }
        Ok(Perm { p, f })
    }
}

impl Drop for Perm {
    fn drop(&mut self) {
        // SAFETY: made by ceph_userperm_new, destroyed once.
        unsafe { (self.f.ceph_userperm_destroy)(self.p) };
    }
}

/// One open directory stream (released when dropped).
pub struct Dir {
    d: *mut CDir,
    m: Arc<Mount>,
}

// SAFETY: a directory stream is used by one call on one thread at a time.
unsafe impl Send for Dir {}

/// One entry read by `Dir::read_entry`.
pub struct Entry {
    pub name: Vec<u8>,
    pub st: Statx,
    /// Position after this entry: the entry's READDIR cookie.
    pub next: u64,
    pub inode: Inode,
}

impl Dir {
    pub fn seek(&mut self, pos: u64) {
        // SAFETY: d open; any offset is accepted (a bad one ends the stream).
        unsafe { (self.m.f.ceph_seekdir)(self.m.cm, self.d, pos as i64) };
    }

    /// The next entry with its attributes, or None at the end.
    pub fn read_entry(&mut self) -> Result<Option<Entry>, i32> {
        // SAFETY: dirent is plain old data.
        let mut de: libc::dirent = unsafe { std::mem::zeroed() };
        let (mut st, mut p) = (Statx::default(), ptr::null_mut());
        // SAFETY: d open; out-pointers valid for the call.
        let r = rc(unsafe {
            (self.m.f.ceph_readdirplus_r)(self.m.cm, self.d, &mut de, &mut st, WANT, 0, &mut p)
        })?;
        if r == 0 {
            return Ok(None);
        }
        // SAFETY: libcephfs NUL-terminates d_name.
        let name = unsafe { CStr::from_ptr(de.d_name.as_ptr()) }
            .to_bytes()
            .to_vec();
        // SAFETY: d open.
        let next = unsafe { (self.m.f.ceph_telldir)(self.m.cm, self.d) } as u64;
        Ok(Some(Entry {
            name,
            st,
            next,
            inode: self.m.inode(p),
        }))
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        // SAFETY: opened by ceph_ll_opendir, released once.
        self.m.release(|f, cm| unsafe {
            (f.ceph_ll_releasedir)(cm, self.d);
        });
    }
}

/// strerror for a positive errno.
pub fn errstr(e: i32) -> String {
    std::io::Error::from_raw_os_error(e).to_string()
}
