//! inotify watches on leased files (`lease`): a Linux read lease is not
//! broken by chmod, chown, utimes, link, unlink or rename, so a watch
//! on each leased file tells the server of those (IN_ATTRIB: mode,
//! owner, both times, link count, extended attributes; IN_MODIFY: the
//! mtime alone; IN_MOVE_SELF: a rename of the file; IN_DELETE_SELF;
//! IN_UNMOUNT). Not IN_ACCESS: it tells every read as it tells a change
//! of the atime alone, and reads of a delegated file come at the
//! server's READ rate. One inotify instance serves every watch; the
//! thread reading lease breaks reads it too ([`poll_in`]).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::event::{PollFd, PollFlags};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

use crate::lease::Lease;

/// A watch's descriptor in its [`Watches`].
pub type Wd = i32;

/// Most events read in one [`Watches::read`].
const MAX_EVENTS_READ: usize = 1024;
/// Bytes read at once: many events of a watch on a file (no name).
const READ_BUF: usize = 4096;

/// The events watched: what changes a file's attributes or name
/// without opening it for writing.
fn mask() -> WatchFlags {
    WatchFlags::ATTRIB | WatchFlags::MODIFY | WatchFlags::MOVE_SELF | WatchFlags::DELETE_SELF
}

/// The events read since the last [`Watches::read`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Events {
    /// The watches that saw a change (in order, repeats kept).
    pub changed: Vec<Wd>,
    /// The queue overflowed: events were lost, any watch may have seen
    /// one.
    pub overflow: bool,
}

/// One inotify instance (non-blocking).
#[derive(Debug)]
pub struct Watches {
    fd: OwnedFd,
}

impl Watches {
    pub fn new() -> io::Result<Watches> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        Ok(Watches { fd })
    }

    /// Watches the file `lease` is held on, whatever its name now (the
    /// descriptor's /proc link, which follows renames and unlinks).
    /// ENOSPC when `/proc/sys/fs/inotify/max_user_watches` is reached.
    /// The same file watched twice gives the same descriptor.
    pub fn add(&self, lease: &Lease) -> io::Result<Wd> {
        let path = format!("/proc/self/fd/{}", lease.raw_fd());
        Ok(inotify::add_watch(&self.fd, path, mask())?)
    }

    /// Stops watch `wd` (gone already, with its file: nothing to do).
    pub fn remove(&self, wd: Wd) {
        let _ = inotify::remove_watch(&self.fd, wd);
    }

    /// The events waiting (without waiting).
    pub fn read(&self) -> io::Result<Events> {
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); READ_BUF];
        let mut r = inotify::Reader::new(&self.fd, &mut buf);
        let mut out = Events::default();
        while out.changed.len() < MAX_EVENTS_READ {
            let ev = match r.next() {
                Ok(ev) => ev,
                Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => break,
                Err(e) => return Err(e.into()),
            };
            let f = ev.events();
            if f.contains(ReadFlags::QUEUE_OVERFLOW) {
                out.overflow = true;
            } else if f.intersects(
                ReadFlags::ATTRIB
                    | ReadFlags::MODIFY
                    | ReadFlags::MOVE_SELF
                    | ReadFlags::DELETE_SELF
                    | ReadFlags::UNMOUNT,
            ) {
                out.changed.push(ev.wd());
            }
            // IN_IGNORED (a watch removed) tells nothing new.
        }
        Ok(out)
    }
}

impl AsFd for Watches {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A file's ctime (seconds, nanoseconds).
pub type Ctime = (i64, i64);

/// The ctime of the file open at `fd`.
pub fn ctime(fd: impl AsFd) -> io::Result<Ctime> {
    let st = rustix::fs::fstat(fd)?;
    Ok((st.st_ctime, st.st_ctime_nsec as i64))
}

/// The device of the file open at `fd` (`st_dev`).
pub fn device(fd: impl AsFd) -> io::Result<u64> {
    Ok(rustix::fs::fstat(fd)?.st_dev)
}

/// Filesystems whose ctimes are multigrain since Linux 6.13: a change
/// made after the ctime was read gets a later ctime, so two changes
/// never share one.
const FINE_CTIME_FS: &[&str] = &["ext4", "xfs", "btrfs", "tmpfs"];

/// Whether files on device `dev` get a distinct ctime for every change
/// (multigrain ctimes: one of [`FINE_CTIME_FS`] on Linux 6.13 or later).
/// Unknown means no.
pub fn fine_ctimes(dev: u64) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    if !release_at_least(&release, (6, 13)) {
        return false;
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
    fs_type_of(&mounts, major, minor).is_some_and(|t| FINE_CTIME_FS.contains(&t))
}

/// Whether kernel release `r` ("6.18.4-foo") is at least `want`.
fn release_at_least(r: &str, want: (u32, u32)) -> bool {
    let mut it = r.trim().split(|c: char| !c.is_ascii_digit());
    let major = it.next().and_then(|s| s.parse::<u32>().ok());
    let minor = it.next().and_then(|s| s.parse::<u32>().ok());
    match (major, minor) {
        (Some(a), Some(b)) => (a, b) >= want,
        _ => false,
    }
}

/// The filesystem type of device `major:minor` in mountinfo text `m`
/// (the first mount of it: bind mounts share the type).
fn fs_type_of(m: &str, major: u32, minor: u32) -> Option<&str> {
    let dev = format!("{major}:{minor}");
    m.lines().find_map(|l| {
        let mut f = l.split(' ');
        if f.nth(2)? != dev {
            return None;
        }
        let (_, after) = l.split_once(" - ")?;
        after.split(' ').next()
    })
}

/// Waits up to `timeout_ms` for any of `fds` to be readable: which are.
pub fn poll_in(fds: &[BorrowedFd<'_>], timeout_ms: i32) -> io::Result<Vec<bool>> {
    let mut p: Vec<PollFd<'_>> = fds.iter().map(|f| PollFd::new(f, PollFlags::IN)).collect();
    let t = rustix::event::Timespec {
        tv_sec: i64::from(timeout_ms / 1000),
        tv_nsec: i64::from(timeout_ms % 1000) * 1_000_000,
    };
    match rustix::event::poll(&mut p, Some(&t)) {
        Ok(_) | Err(rustix::io::Errno::INTR) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(p.iter().map(|p| !p.revents().is_empty()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits (at most 2 s) for events on `w`.
    fn events(w: &Watches) -> Events {
        let ready = poll_in(&[w.as_fd()], 2000).unwrap();
        assert_eq!(ready, [true], "no event");
        w.read().unwrap()
    }

    #[test]
    fn a_watch_tells_changes_reads_and_goes() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, b"x").unwrap();
        let lease = Lease::new(std::fs::File::open(&p).unwrap().into(), false);
        let w = Watches::new().unwrap();
        let wd = w.add(&lease).unwrap();
        assert_eq!(w.add(&lease).unwrap(), wd, "one watch per file");
        let c0 = ctime(lease.as_fd()).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(events(&w).changed, [wd]);
        assert_ne!(ctime(lease.as_fd()).unwrap(), c0);
        // A read is no event.
        std::fs::read(&p).unwrap();
        assert_eq!(poll_in(&[w.as_fd()], 100).unwrap(), [false]);
        // The mtime alone (IN_MODIFY).
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::open(&p).unwrap().set_modified(old).unwrap();
        assert_eq!(events(&w).changed, [wd]);
        // Renamed, the watch follows the file.
        let q = d.path().join("g");
        std::fs::rename(&p, &q).unwrap();
        assert_eq!(events(&w).changed, [wd]);
        std::fs::hard_link(&q, d.path().join("h")).unwrap();
        assert_eq!(events(&w).changed, [wd]);
        w.remove(wd);
        // IN_IGNORED only, then nothing.
        assert_eq!(events(&w), Events::default());
        std::fs::set_permissions(&q, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(poll_in(&[w.as_fd()], 100).unwrap(), [false]);
    }

    #[test]
    fn kernel_releases() {
        assert!(release_at_least("6.18.44-fc-v669\n", (6, 13)));
        assert!(release_at_least("6.13", (6, 13)));
        assert!(release_at_least("7.0.1", (6, 13)));
        assert!(!release_at_least("6.12.9", (6, 13)));
        assert!(!release_at_least("5.19.0", (6, 13)));
        assert!(!release_at_least("", (6, 13)));
    }

    #[test]
    fn filesystem_type_of_a_device() {
        let m = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
                 25 22 0:21 / /tmp rw shared:5 - tmpfs tmpfs rw\n\
                 26 22 0:45 / /x rw - fuse.sshfs a:b rw\n";
        assert_eq!(fs_type_of(m, 8, 1), Some("ext4"));
        assert_eq!(fs_type_of(m, 0, 21), Some("tmpfs"));
        assert_eq!(fs_type_of(m, 0, 45), Some("fuse.sshfs"));
        assert_eq!(fs_type_of(m, 9, 9), None);
    }
}
