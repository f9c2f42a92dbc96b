//! End to end, NFSv4.1's namespace operations (RFC 8881 §18.4, §18.9,
//! §18.23-§18.26, §18.30) through our v4.1 client against the real
//! server: what they change is checked on the server's disk; read-only
//! exports and the pseudo-filesystem refuse changes; exports do not mix.

use crate::common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use common::nfs::bounded;
use common::nfs4::{path_of, rw_and_ro_exports as start, status};
use common::TestServer;
use rnfsd_client::nfs4::SetAttrs4;
use rnfsd_client::{Nfs4Client, Nfs4Config};
use rnfsd_proto::nfs4::*;

async fn client(srv: &TestServer) -> Nfs4Client {
    common::nfs4::client_as(srv, 0, "nfs4-ns", &Nfs4Config::default()).await
}

#[tokio::test(flavor = "multi_thread")]
async fn namespace_changes_reach_the_disk() {
    let (rw, _ro, _cfg, srv) = start("nfs4ns-changes");
    bounded(async {
        let c = client(&srv).await;
        let root = c.lookup_path(&path_of(&rw)).await.expect("export root");

        // CREATE a directory with a mode, and a symlink.
        let d = c.mkdir(&root, "d", 0o750).await.expect("mkdir");
        let m = std::fs::metadata(rw.path().join("d")).unwrap();
        assert!(m.is_dir());
        assert_eq!(m.permissions().mode() & 0o7777, 0o750);
        let l = c.symlink(&root, "l", "d/target").await.expect("symlink");
        assert_eq!(
            std::fs::read_link(rw.path().join("l")).unwrap().to_str(),
            Some("d/target")
        );
        assert_eq!(c.readlink(&l).await.unwrap(), b"d/target");
        // A second CREATE of the same name.
        assert_eq!(status(c.mkdir(&root, "d", 0o755).await), Nfsstat4::Exist);
        // READLINK of a directory (§18.24.3).
        assert_eq!(status(c.readlink(&d).await), Nfsstat4::WrongType);

        // LINK and RENAME; REMOVE of a file and of an empty directory.
        std::fs::write(rw.path().join("d/f"), b"data").unwrap();
        let f = c.lookup_from(&d, "f").await.unwrap();
        c.link(&f, &root, "f-link").await.expect("link");
        assert_eq!(std::fs::metadata(rw.path().join("d/f")).unwrap().nlink(), 2);
        c.rename(&root, "f-link", &d, "g").await.expect("rename");
        assert!(!rw.path().join("f-link").exists());
        assert_eq!(std::fs::read(rw.path().join("d/g")).unwrap(), b"data");
        assert_eq!(status(c.remove(&root, "d").await), Nfsstat4::NotEmpty);
        c.remove(&d, "f").await.expect("remove f");
        c.remove(&d, "g").await.expect("remove g");
        c.remove(&root, "d").await.expect("remove d");
        assert!(!rw.path().join("d").exists());
        assert_eq!(status(c.remove(&root, "d").await), Nfsstat4::NoEnt);

        // SETATTR: mode and size, as the disk shows.
        std::fs::write(rw.path().join("s"), b"0123456789").unwrap();
        let s = c.lookup_from(&root, "s").await.unwrap();
        c.setattr(
            &s,
            &Stateid4::default(),
            &SetAttrs4 {
                mode: Some(0o600),
                size: Some(3),
                ..SetAttrs4::default()
            },
        )
        .await
        .expect("setattr");
        let m = std::fs::metadata(rw.path().join("s")).unwrap();
        assert_eq!((m.permissions().mode() & 0o7777, m.len()), (0o600, 3));
        let a = c.getattr_decoded(&s).await.unwrap();
        assert_eq!((a.mode(), a.size()), (Some(0o600), Some(3)));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn readdir_lists_every_entry_once_across_pages() {
    let (rw, _ro, _cfg, srv) = start("nfs4ns-readdir");
    let n = 700;
    for i in 0..n {
        std::fs::write(rw.path().join(format!("file-{i:04}")), b"").unwrap();
    }
    bounded(async {
        let c = client(&srv).await;
        let root = c.lookup_path(&path_of(&rw)).await.unwrap();
        let mut mask = Bitmap4::new();
        mask.insert(FATTR4_FILEID);
        mask.insert(FATTR4_TYPE);
        let entries = c.readdir_all(&root, &mask).await.expect("readdir");
        let mut names: Vec<String> = entries
            .iter()
            .map(|e| String::from_utf8(e.name.0.clone()).unwrap())
            .collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "each entry once, no . or ..");
        assert!(
            entries.iter().all(|e| e.cookie > 2),
            "cookies 0-2 are reserved"
        );
        // Each entry's fileid is its inode.
        let e = entries.iter().find(|e| e.name.0 == b"file-0042").unwrap();
        let mut d = rnfsd_xdr::Dec::new(&e.attrs.attr_vals);
        assert_eq!(d.u32().unwrap(), 1, "regular file");
        let ino = std::fs::metadata(rw.path().join("file-0042"))
            .unwrap()
            .ino();
        assert_eq!(d.u64().unwrap(), ino);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn read_only_exports_the_pseudo_fs_and_export_boundaries_refuse_changes() {
    let (rw, ro, _cfg, srv) = start("nfs4ns-refuse");
    bounded(async {
        let c = client(&srv).await;
        let root = c.lookup_path(&path_of(&rw)).await.unwrap();
        let ro_root = c.lookup_path(&path_of(&ro)).await.unwrap();
        assert_eq!(status(c.mkdir(&ro_root, "x", 0o755).await), Nfsstat4::RoFs);
        assert_eq!(status(c.remove(&ro_root, "f").await), Nfsstat4::RoFs);
        assert!(ro.path().join("f").exists());
        // The pseudo root holds no files of its own.
        let pseudo = c.root_fh().await.unwrap();
        assert_eq!(status(c.mkdir(&pseudo, "x", 0o755).await), Nfsstat4::RoFs);
        // Into or out of a read-only export: NFS4ERR_ROFS first, as knfsd
        // checks the directories before the devices.
        std::fs::write(rw.path().join("mine"), b"").unwrap();
        let mine = c.lookup_from(&root, "mine").await.unwrap();
        assert_eq!(status(c.link(&mine, &ro_root, "x").await), Nfsstat4::RoFs);
        assert_eq!(
            status(c.rename(&ro_root, "f", &root, "f").await),
            Nfsstat4::RoFs
        );
        // A link in a writable export to a file of another export:
        // NFS4ERR_XDEV (§18.9.3).
        let ro_f = c.lookup_from(&ro_root, "f").await.unwrap();
        assert_eq!(status(c.link(&ro_f, &root, "x").await), Nfsstat4::XDev);
        assert!(!rw.path().join("x").exists());
        // Names CREATE refuses.
        assert_eq!(status(c.mkdir(&root, "..", 0o755).await), Nfsstat4::BadName);
        assert_eq!(status(c.mkdir(&root, "", 0o755).await), Nfsstat4::Inval);
    })
    .await;
}
