//! Directories: LOOKUP, READDIR, READDIRPLUS.

use std::cell::Cell;
use std::ffi::CStr;
use std::os::fd::AsRawFd;
use std::time::Instant;

use super::resolve::Renamed;
use super::{check_name, errno, sys, LocalFs, Obj, MAX_DIR_ENTRIES};
use crate::limits::local::DIR_BUF;
use crate::{Attr, Call, DirEntry, DirPage, Fh, FsError, FsResult};

impl LocalFs {
    /// Entry handle and attributes for READDIRPLUS (server credentials;
    /// `readdir` asks only where the caller may search the directory).
    pub(super) fn plus_entry(
        &self,
        call: &Call<'_>,
        dir: &Obj<'_>,
        name: &[u8],
    ) -> Option<(Fh, Attr)> {
        if name == b"." || (name == b".." && dir.st.key() == self.root_key) {
            let st = sys::fstat(dir.raw()).ok()?;
            let fh = self.make_fh(call, dir.raw(), &st).ok()?;
            return Some((fh, self.attr(&st)));
        }
        let c = sys::cstr(name).ok()?;
        // The attributes and the handle are made by name, one after the
        // other; when a rename in between is seen, once more, then the
        // entry goes without them (the client LOOKUPs it).
        for _ in 0..2 {
            let before = Instant::now();
            let st = sys::statx_at(dir.raw(), &c, 0).ok()?;
            if !self.on_export_fs(&st) {
                return None;
            }
            // A cached object's handle is the cache's (no second walk).
            let fh = match self.objects.by_identity(&st.key(), before) {
                Some(o) => Fh(o.fh().to_vec()),
                None => match self.make_fh_at(dir.raw(), &c, &st) {
                    Ok(fh) => fh?,
                    Err(Renamed) => continue,
                },
            };
            if name != b".." {
                self.locs.insert(st.key(), dir.st.key(), name);
            }
            self.seen_inside(&st, dir);
            return Some((fh, self.attr(&st)));
        }
        None
    }

    /// LOOKUP of a name whose object the handle cache holds: one `statx`
    /// by name as the caller (the directory's search check, as the open in
    /// `lookup` makes) and the handle from the cache, found by identity
    /// (`ObjCache::by_identity`), instead of an open, a `statx`, a
    /// `name_to_handle_at` and a close. None: not cached (the `statx` was
    /// one syscall too many): the caller opens the name. Not called where
    /// `identity_first` says misses are frequent, or on a loop that may
    /// not speculate (the `statx` may read the directory from disk).
    fn lookup_cached(
        &self,
        call: &Call<'_>,
        d: &Obj<'_>,
        c: &CStr,
        name: &[u8],
    ) -> FsResult<Option<(Fh, Attr, Option<Attr>)>> {
        let before = Instant::now();
        let st = super::speculating(call, || sys::statx_at(d.raw(), c, 0))?;
        if !self.on_export_fs(&st) {
            return Ok(None);
        }
        let found = self.objects.by_identity(&st.key(), before);
        identity_seen(found.is_some());
        let Some(o) = found else {
            return Ok(None);
        };
        let fh = Fh(o.fh().to_vec());
        drop(o);
        self.objects.touch(&fh.0, call.runs_on_loop());
        self.locs.insert(st.key(), d.st.key(), name);
        Ok(Some((fh, self.attr(&st), Some(self.attr(&d.st)))))
    }
}

thread_local! {
    /// Whether this thread's LOOKUPs lately found their objects in the
    /// handle cache by identity: +2 a hit, -1 a miss, within
    /// +-`IDENTITY_MEMORY`. Per thread: no shared line written per call.
    static IDENTITY_SCORE: Cell<i32> = const { Cell::new(0) };
}

const IDENTITY_MEMORY: i32 = 64;

/// Whether LOOKUP tries the handle cache by identity before it opens the
/// name: a hit saves two syscalls (the open and its close) and a miss
/// costs one (the `statx`), so it pays while more than one in three hit.
/// Both ways see whether the object was cached, so the score follows the
/// load either way.
fn identity_first() -> bool {
    IDENTITY_SCORE.with(|s| s.get() >= 0)
}

fn identity_seen(hit: bool) {
    IDENTITY_SCORE.with(|s| {
        let d = if hit { 2 } else { -1 };
        s.set((s.get() + d).clamp(-IDENTITY_MEMORY, IDENTITY_MEMORY));
    });
}

pub(super) fn lookup(
    fs: &LocalFs,
    call: &Call<'_>,
    dir: &Fh,
    name: &[u8],
) -> FsResult<(Fh, Attr, Option<Attr>)> {
    let c = check_name(name, true)?;
    let d = fs.dir(call, dir)?;
    fs.as_caller(call.cred)?;
    let plain = name != b"." && name != b"..";
    let tried = plain && identity_first() && (!call.inline() || call.may_speculate());
    if tried {
        if let Some(found) = fs.lookup_cached(call, &d, &c, name)? {
            return Ok(found);
        }
    }
    // Every lookup needs search permission on the directory; opening
    // "." through it checks that for "." and ".." too.
    let (what, flags) = if name == b".." && d.st.key() == fs.root_key {
        (sys::DOT, libc::O_PATH | libc::O_NOFOLLOW)
    } else if name == b".." {
        (sys::DOTDOT, libc::O_PATH | libc::O_DIRECTORY)
    } else {
        (c.as_c_str(), libc::O_PATH | libc::O_NOFOLLOW)
    };
    let fd = if call.inline() {
        // From the dentry cache only (RESOLVE_CACHED), else give up.
        match sys::openat_cached(d.raw(), what, flags) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => return Err(call.give_up()),
            Err(e) => return Err(e.into()),
        }
    } else {
        sys::openat(d.raw(), what, flags, 0)?
    };
    let st = sys::fstat(fd.as_raw_fd())?;
    if !fs.on_export_fs(&st) {
        return Err(errno(libc::EACCES));
    }
    // Not tried by identity first: asked now, with no syscall. Our own
    // descriptor pins the inode, so a live cached object of the same
    // identity is this object (no name_to_handle_at).
    let cached = (plain && !tried)
        .then(|| fs.objects.by_identity(&st.key(), Instant::now()))
        .flatten();
    if plain && !tried {
        identity_seen(cached.is_some());
    }
    let fh = match cached {
        Some(o) => Fh(o.fh().to_vec()),
        None => fs.make_fh(call, fd.as_raw_fd(), &st)?,
    };
    if plain {
        fs.locs.insert(st.key(), d.st.key(), name);
    }
    let attr = fs.attr(&st);
    // Found in (or above, for "..") a directory inside the export: inside
    // as long as the directory is. The client's next call uses it.
    fs.remember(call, &fh, fd, &st, &d);
    // The directory's attributes from the stat taken moments ago: a lookup
    // changes nothing in it.
    Ok((fh, attr, Some(fs.attr(&d.st))))
}

pub(super) fn readdir(
    fs: &LocalFs,
    call: &Call<'_>,
    dir: &Fh,
    cookie: u64,
    verifier: [u8; 8],
    max_entries: usize,
    plus: bool,
) -> FsResult<DirPage> {
    let d = fs.dir(call, dir)?;
    // Cookies are getdents offsets; on ext4 (hash offsets) they stay
    // valid across changes to the directory, so the verifier only names
    // the directory (a keyed hash of its handle) and never changes. An
    // all-zero verifier is accepted with any cookie (a client that kept
    // none, e.g. after its own restart).
    let verf = fs.sealer.cookie_verifier(&dir.0);
    if cookie != 0 && verifier != verf && verifier != [0; 8] {
        return Err(FsError::BadCookie);
    }
    fs.as_caller(call.cred)?;
    // Reopened through its descriptor, not as "." under it: listing needs
    // read permission on the directory only, as locally (`ls` of a
    // directory with r but not x works).
    let rfd = sys::reopen(d.raw(), libc::O_RDONLY | libc::O_DIRECTORY)?;
    let mut rd = sys::DirReader::new(rfd, DIR_BUF);
    if cookie != 0 {
        rd.seek(cookie).map_err(|_| FsError::BadCookie)?;
    }
    let max = max_entries.min(MAX_DIR_ENTRIES);
    let mut raw = Vec::with_capacity(max.min(1024));
    let eof = loop {
        if raw.len() >= max {
            break rd.next_entry()?.is_none();
        }
        match rd.next_entry()? {
            Some(e) => raw.push(e),
            None => break true,
        }
    };
    drop(rd);
    // Handles and attributes only where the caller could LOOKUP the names:
    // none in a directory it may read but not search (knfsd's
    // encode_entryplus). Asked while the thread is still the caller.
    let plus = plus && (!fs.opts.act_as_caller || sys::may_access(d.raw(), libc::X_OK).is_ok());
    if plus {
        fs.as_server()?;
    }
    let at_root = d.st.key() == fs.root_key;
    let entries = raw
        .into_iter()
        .map(|e| {
            let fileid = if e.name == b".." && at_root {
                fs.root_key.ino
            } else {
                e.ino
            };
            let plus = if plus {
                fs.plus_entry(call, &d, &e.name)
            } else {
                None
            };
            DirEntry {
                fileid,
                name: e.name,
                cookie: e.off as u64,
                plus,
            }
        })
        .collect();
    Ok(DirPage {
        verifier: verf,
        entries,
        eof,
        dir_attr: fs.post(d.raw()),
    })
}
