//! Test support: an ext4 filesystem on a loop device, for tests that need a
//! real block device (writeback errors, power cuts). Needs root; every step
//! is a command with its status checked; everything is undone on drop.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use super::TempDir;

/// Why a block-device test cannot run here, or None.
pub fn unavailable(tools: &[&str]) -> Option<String> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root (loop devices, mounts)".into());
    }
    for t in tools
        .iter()
        .chain(&["losetup", "mkfs.ext4", "mount", "umount"])
    {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Some(format!("{t} is not installed"));
        }
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("no loop device support (/dev/loop-control)".into());
    }
    None
}

pub fn run(cmd: &str, args: &[&str]) -> String {
    let o = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        o.status.success(),
        "{cmd} {args:?}: {}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

/// An ext4 filesystem on a loop device over a sparse image file.
pub struct LoopFs {
    pub dir: TempDir,
    pub image: PathBuf,
    pub dev: String,
    pub mnt: PathBuf,
    /// A tmpfs holding the image, when the image's space is limited.
    pub tmpfs: Option<PathBuf>,
    /// "ext4" or "xfs".
    fstype: &'static str,
    mounted: bool,
}

impl LoopFs {
    /// An image of `size_mib` on the ordinary temp filesystem.
    pub fn new(tag: &str, size_mib: u64) -> LoopFs {
        let dir = TempDir::new(tag);
        let image = dir.path().join("fs.img");
        Self::make(dir, image, size_mib, None, "ext4")
    }

    /// An image of `size_mib` in `image_dir`, a directory of another
    /// filesystem: freezing that one (`fsfreeze`) holds this one's writes
    /// to its device while its changes in memory go on.
    pub fn in_dir(tag: &str, image_dir: &Path, size_mib: u64) -> LoopFs {
        let dir = TempDir::new(tag);
        let image = image_dir.join(format!("{tag}.img"));
        Self::make(dir, image, size_mib, None, "ext4")
    }

    /// ext4 with fast commits (`-O fast_commit`): its fsyncs log changed
    /// inodes in fast-commit blocks instead of committing the journal.
    pub fn ext4_fast_commit(tag: &str, size_mib: u64) -> LoopFs {
        let dir = TempDir::new(tag);
        let image = dir.path().join("fs.img");
        Self::make(dir, image, size_mib, None, "ext4-fc")
    }

    /// XFS instead of ext4 (XFS reuses a freed inode number at once, which
    /// ext4 avoids for a while). Needs mkfs.xfs; at least 300 MiB.
    pub fn xfs(tag: &str, size_mib: u64) -> LoopFs {
        let dir = TempDir::new(tag);
        let image = dir.path().join("fs.img");
        Self::make(dir, image, size_mib, None, "xfs")
    }

    /// An image of `size_mib` on a tmpfs of `room_mib`: once the tmpfs is
    /// full, writes to blocks of the device the image does not hold fail
    /// (EIO to the filesystem above), as a thin-provisioned volume that ran
    /// out of space does. Every block of the image is held after mkfs, so
    /// no metadata write can fail (a failed one aborts ext4's journal and
    /// the filesystem turns read-only); `preallocated` gives back the
    /// blocks of the one file whose data writes are meant to fail.
    pub fn thin(tag: &str, size_mib: u64, room_mib: u64) -> LoopFs {
        let dir = TempDir::new(tag);
        let t = dir.path().join("tmpfs");
        std::fs::create_dir(&t).expect("tmpfs dir");
        run(
            "mount",
            &[
                "-t",
                "tmpfs",
                "-o",
                &format!("size={room_mib}m"),
                "tmpfs",
                t.to_str().unwrap(),
            ],
        );
        let image = t.join("fs.img");
        let fs = Self::make(dir, image, size_mib, Some(t), "ext4");
        // mkfs may leave blocks unwritten (or discard them, which punches
        // holes in the image): hold them all now. Content is unchanged.
        run(
            "fallocate",
            &[
                "-l",
                &format!("{}", size_mib << 20),
                fs.image.to_str().unwrap(),
            ],
        );
        fs
    }

    fn make(
        dir: TempDir,
        image: PathBuf,
        size_mib: u64,
        tmpfs: Option<PathBuf>,
        fstype: &'static str,
    ) -> LoopFs {
        let f = std::fs::File::create(&image).expect("image");
        f.set_len(size_mib << 20).expect("sparse image");
        drop(f);
        let dev = run("losetup", &["-f", "--show", image.to_str().unwrap()]);
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).expect("mountpoint");
        let mut fs = LoopFs {
            dir,
            image,
            dev,
            mnt,
            tmpfs,
            fstype,
            mounted: false,
        };
        if fstype == "xfs" {
            run("mkfs.xfs", &["-q", "-f", &fs.dev]);
        } else {
            let features = if fstype == "ext4-fc" {
                "fast_commit"
            } else {
                "has_journal"
            };
            run(
                "mkfs.ext4",
                &[
                    "-q",
                    "-F",
                    "-E",
                    "lazy_itable_init=0,lazy_journal_init=0,nodiscard",
                    "-O",
                    features,
                    &fs.dev,
                ],
            );
            fs.fstype = "ext4";
        }
        fs.mount();
        fs
    }

    pub fn mount(&mut self) {
        run(
            "mount",
            &[
                "-t",
                self.fstype,
                "-o",
                if self.fstype == "ext4" {
                    "errors=continue"
                } else {
                    "defaults"
                },
                &self.dev,
                self.mnt.to_str().unwrap(),
            ],
        );
        self.mounted = true;
    }

    pub fn umount(&mut self) {
        if self.mounted {
            run("umount", &[self.mnt.to_str().unwrap()]);
            self.mounted = false;
        }
    }

    /// `mnt/name`, created as a directory.
    pub fn subdir(&self, name: &str) -> PathBuf {
        let p = self.mnt.join(name);
        std::fs::create_dir_all(&p).expect("subdir");
        p
    }

    /// Fills the tmpfs under a thin image until it has no room left, to the
    /// last page.
    pub fn exhaust(&self) {
        let Some(t) = &self.tmpfs else {
            panic!("not a thin image")
        };
        let mut f = std::fs::File::create(t.join("filler")).expect("filler");
        use std::io::Write;
        for size in [1 << 20, 4096] {
            let chunk = vec![0xa5u8; size];
            while f.write_all(&chunk).is_ok() {}
        }
    }

    /// A file of `len` bytes whose blocks are allocated (unwritten extents)
    /// and whose metadata is on the device. On a thin image its blocks are
    /// then given back (holes in the image, found with `filefrag`), so once
    /// the image's tmpfs is full only this file's data writes fail.
    pub fn preallocated(&self, rel: &str, len: u64) -> PathBuf {
        let p = self.mnt.join(rel);
        let f = std::fs::File::create(&p).expect("file");
        use std::os::fd::AsRawFd;
        // SAFETY: plain fallocate on a file we own.
        let r = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, len as libc::off_t) };
        assert_eq!(r, 0, "fallocate: {}", std::io::Error::last_os_error());
        f.sync_all().expect("fsync");
        drop(f);
        run("sync", &[]);
        if self.tmpfs.is_some() {
            for (off, len) in physical_extents(&p) {
                let (off, len) = (off.to_string(), len.to_string());
                let image = self.image.to_str().unwrap();
                run("fallocate", &["-p", "-o", &off, "-l", &len, image]);
            }
        }
        p
    }
}

/// The byte ranges of the device that hold `path`'s blocks, from
/// `filefrag -v` (whose table gives physical block ranges).
fn physical_extents(path: &Path) -> Vec<(u64, u64)> {
    let out = run("filefrag", &["-v", path.to_str().unwrap()]);
    let block: u64 = out
        .split("blocks of ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("filefrag: block size");
    let ranges: Vec<(u64, u64)> = out
        .lines()
        .filter_map(|l| {
            // "   0:        0..    2047:      34816..     36863:   2048: ..."
            let cols: Vec<&str> = l.split(':').map(str::trim).collect();
            let (first, last) = cols.get(2)?.split_once("..")?;
            let (first, last): (u64, u64) = (first.trim().parse().ok()?, last.trim().parse().ok()?);
            Some((first * block, (last - first + 1) * block))
        })
        .collect();
    assert!(!ranges.is_empty(), "filefrag found no extent:\n{out}");
    ranges
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        }
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
        if let Some(t) = &self.tmpfs {
            let _ = Command::new("umount").arg("-l").arg(t).status();
        }
    }
}

/// `echo 3 > /proc/sys/vm/drop_caches` after a sync of nothing in
/// particular: clean pages and unused inodes of every filesystem go.
pub fn drop_caches() {
    let _ = std::fs::write("/proc/sys/vm/drop_caches", "3");
}

/// One extent of a file, from `filefrag -v` (FIEMAP), in filesystem blocks.
#[derive(Debug, Clone)]
pub struct Extent {
    pub logical: u64,
    pub physical: u64,
    pub len: u64,
    /// filefrag's flags column ("unwritten", "last,eof", ...).
    pub flags: String,
}

/// `path`'s extents and the block size they count in, with `filefrag -v`'s
/// whole output (for a report); None if filefrag failed.
pub fn extents(path: &Path) -> Option<(u64, Vec<Extent>, String)> {
    let o = Command::new("filefrag").arg("-v").arg(path).output().ok()?;
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    if !o.status.success() {
        return None;
    }
    let block: u64 = out
        .split("blocks of ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())?;
    let list = out
        .lines()
        .filter_map(|l| {
            // "   1:   10..  11:   26996346..  26996347:   2:   26996358: last,unwritten,eof"
            let cols: Vec<&str> = l.split(':').map(str::trim).collect();
            let (lf, _) = cols.get(1)?.split_once("..")?;
            let (pf, _) = cols.get(2)?.split_once("..")?;
            Some(Extent {
                logical: lf.trim().parse().ok()?,
                physical: pf.trim().parse().ok()?,
                len: cols.get(3)?.parse().ok()?,
                flags: cols.last().map_or("", |f| f).to_owned(),
            })
        })
        .collect();
    Some((block, list, out))
}

impl LoopFs {
    /// Switches the loop device to direct I/O on its image (`losetup
    /// --direct-io=on`: no page cache of the image between the filesystem
    /// and the disk) or back; the kernel's view after it, as `direct_io`.
    pub fn set_direct_io(&self, on: bool) -> Option<bool> {
        let flag = format!("--direct-io={}", if on { "on" } else { "off" });
        run("losetup", &[&flag, &self.dev]);
        self.direct_io()
    }

    /// Whether the loop device does direct I/O on its image
    /// (`/sys/block/loopN/loop/dio`).
    pub fn direct_io(&self) -> Option<bool> {
        let name = self.dev.trim_start_matches("/dev/");
        std::fs::read_to_string(format!("/sys/block/{name}/loop/dio"))
            .ok()
            .map(|s| s.trim() == "1")
    }

    /// "ext4" or "xfs".
    pub fn fstype(&self) -> &'static str {
        self.fstype
    }

    /// The loop device's and the filesystem's state, for a report: the
    /// device's `losetup` line and queue settings, the mount's options, and
    /// the superblock's state (`dumpe2fs -h`, or `xfs_info`).
    pub fn state(&self) -> String {
        let sh = |cmd: &str, args: &[&str]| {
            Command::new(cmd).args(args).output().map_or_else(
                |e| format!("{cmd}: {e}\n"),
                |o| {
                    format!(
                        "{}{}",
                        String::from_utf8_lossy(&o.stdout),
                        String::from_utf8_lossy(&o.stderr)
                    )
                },
            )
        };
        let name = self.dev.trim_start_matches("/dev/");
        let mut s = sh(
            "losetup",
            &[
                "-l",
                "-O",
                "NAME,BACK-FILE,DIO,LOG-SEC,AUTOCLEAR,RO,SIZELIMIT",
                &self.dev,
            ],
        );
        for f in [
            "queue/write_cache",
            "queue/discard_max_bytes",
            "loop/backing_file",
        ] {
            let v = std::fs::read_to_string(format!("/sys/block/{name}/{f}")).unwrap_or_default();
            s += &format!("{f}: {}\n", v.trim());
        }
        let mnt = self.mnt.to_string_lossy().into_owned();
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        for l in mounts.lines().filter(|l| l.contains(&mnt)) {
            s += &format!("mount: {l}\n");
        }
        if self.fstype == "xfs" {
            s += &sh("xfs_info", &[&mnt]);
        } else {
            let h = sh("dumpe2fs", &["-h", &self.dev]);
            let keep = [
                "Filesystem state",
                "Errors behavior",
                "Filesystem features",
                "Journal features",
                "Journal sequence",
                "Journal start",
                "Journal errno",
                "Mount count",
                "Last mount time",
                "Last write time",
                "FS Error count",
                "First error",
                "Last error",
            ];
            for l in h.lines().filter(|l| keep.iter().any(|k| l.starts_with(k))) {
                s += l;
                s.push('\n');
            }
        }
        s
    }
}
