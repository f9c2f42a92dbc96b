//! End to end, NFSv4 owner strings with `nfs4_idmap = "names"` (RFC 8881
//! §5.9): GETATTR says "user@domain" (after the resolver has looked up a
//! name an event loop would not), SETATTR takes names of our domain and
//! numbers, and refuses other domains with NFS4ERR_BADOWNER.

use crate::common;

use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use common::nfs::bounded;
use common::{write_config, TempDir, TestServer};
use rnfsd_client::nfs4::SetAttrs4;
use rnfsd_client::{Auth, ClientConfig, ClientError, Nfs4Client, Nfs4Config};
use rnfsd_proto::nfs4::*;

#[tokio::test(flavor = "multi_thread")]
async fn owners_are_names_of_the_configured_domain() {
    let dir = TempDir::new("nfs4-idmap");
    let path = dir.path().canonicalize().unwrap();
    let file = path.join("f");
    std::fs::write(&file, b"x").unwrap();
    // Group 1 (daemon on Debian): SETATTR below moves it back to root's.
    std::os::unix::fs::chown(&file, Some(0), Some(1)).unwrap();
    let cfgdir = TempDir::new("nfs4-idmap-cfg");
    let cfg = write_config(
        cfgdir.path(),
        "[server]\nnfs4_idmap = \"names\"\nnfs4_idmap_domain = \"example.org\"\n",
    );
    let srv = TestServer::start_with(
        &path,
        &["--no-rpcbind", "--no-root-squash", "--config", &cfg],
    );
    bounded(async {
        let cfg = ClientConfig {
            auth: Auth::sys(0, 0, &[], "nfs4-idmap"),
            ..ClientConfig::default()
        };
        let c = Nfs4Client::connect(srv.addr, &cfg, &Nfs4Config::default())
            .await
            .expect("NFSv4.1 session");
        let root = c.lookup_path(path.to_str().unwrap()).await.unwrap();
        let fh = c.lookup_from(&root, "f").await.expect("LOOKUP f");

        // A GETATTR may run on an event loop, which sends a name it has
        // not cached as its number and has it looked up for next time.
        named(&c, &fh, false).await;
        let set = |owner: Option<&[u8]>, group: Option<&[u8]>| SetAttrs4 {
            owner: owner.map(<[u8]>::to_vec),
            owner_group: group.map(<[u8]>::to_vec),
            ..SetAttrs4::default()
        };
        c.setattr(
            &fh,
            &Stateid4::ANONYMOUS,
            &set(None, Some(b"root@EXAMPLE.ORG")),
        )
        .await
        .expect("a name of our domain, any case");
        assert_eq!(std::fs::metadata(&file).unwrap().gid(), 0);
        c.setattr(&fh, &Stateid4::ANONYMOUS, &set(Some(b"0"), None))
            .await
            .expect("numbers are still ids");
        for bad in [
            &b"root@example.com"[..],
            b"root",
            b"no-such-user-x@example.org",
        ] {
            match c
                .setattr(&fh, &Stateid4::ANONYMOUS, &set(Some(bad), None))
                .await
            {
                Err(ClientError::Nfs4 { status, .. }) => assert_eq!(
                    status,
                    Nfsstat4::BadOwner,
                    "{}",
                    String::from_utf8_lossy(bad)
                ),
                other => panic!("{}: {other:?}", String::from_utf8_lossy(bad)),
            }
        }
        named(&c, &fh, true).await;
    })
    .await;
}

/// Waits until GETATTR says root's name for the owner (or the group): a
/// number until then, and the name within 10 s.
async fn named(c: &Nfs4Client, fh: &NfsFh4, group: bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let a = c.getattr_decoded(fh).await.unwrap();
        let got = match group {
            false => a.owner(),
            true => a.owner_group(),
        };
        let got = got.unwrap().to_vec();
        if got == b"root@example.org" {
            return;
        }
        assert_eq!(got, b"0", "a number until the name is cached");
        assert!(Instant::now() < deadline, "the name never came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
