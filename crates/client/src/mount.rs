//! MOUNT v3 client (RFC 1813 appendix I).
//!
//! The wire types here are private to the client for now; they duplicate
//! what `rnfsd_proto::mount` will hold and should be replaced by it.

use std::net::SocketAddr;

use rnfsd_xdr::{Dec, Enc, Result as XdrResult, Xdr, XdrError};

use crate::auth::Auth;
use crate::client::Client;
use crate::conn::ClientConfig;
use crate::error::ClientError;

pub const MOUNT_PROGRAM: u32 = 100005;
pub const MOUNT_V3: u32 = 3;

pub const MOUNTPROC3_NULL: u32 = 0;
pub const MOUNTPROC3_MNT: u32 = 1;
pub const MOUNTPROC3_DUMP: u32 = 2;
pub const MOUNTPROC3_UMNT: u32 = 3;
pub const MOUNTPROC3_UMNTALL: u32 = 4;
pub const MOUNTPROC3_EXPORT: u32 = 5;

/// RFC 1813 §5.1: MNTPATHLEN, MNTNAMLEN, FHSIZE3.
pub const MNTPATHLEN: usize = 1024;
pub const MNTNAMLEN: usize = 255;
pub const FHSIZE3: usize = 64;

/// Bound on the auth flavor list of a MNT reply (the RFC leaves it open).
const MAX_FLAVORS: usize = 64;
/// Bound on DUMP / EXPORT list lengths (linked lists in XDR, decoded
/// iteratively; each entry also costs at least 12 bytes of reply).
const MAX_LIST: usize = 65536;

/// mountstat3 (RFC 1813 §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum MountStat3 {
    Ok = 0,
    Perm = 1,
    NoEnt = 2,
    Io = 5,
    Acces = 13,
    NotDir = 20,
    Inval = 22,
    NameTooLong = 63,
    NotSupp = 10004,
    ServerFault = 10006,
}

impl MountStat3 {
    pub fn from_u32(v: u32) -> Option<Self> {
        use MountStat3::*;
        Some(match v {
            0 => Ok,
            1 => Perm,
            2 => NoEnt,
            5 => Io,
            13 => Acces,
            20 => NotDir,
            22 => Inval,
            63 => NameTooLong,
            10004 => NotSupp,
            10006 => ServerFault,
            _ => return None,
        })
    }
}

impl Xdr for MountStat3 {
    fn encode(&self, e: &mut Enc) {
        e.u32(*self as u32)
    }
    fn decode(d: &mut Dec<'_>) -> XdrResult<Self> {
        MountStat3::from_u32(d.u32()?).ok_or(XdrError::BadDiscriminant)
    }
}

/// A `dirpath` argument (`string<MNTPATHLEN>`). Sent as given, even over the
/// limit, so servers' length checks can be tested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirPath(pub Vec<u8>);

impl Xdr for DirPath {
    fn encode(&self, e: &mut Enc) {
        e.opaque(&self.0)
    }
    fn decode(d: &mut Dec<'_>) -> XdrResult<Self> {
        Ok(DirPath(d.opaque(MNTPATHLEN)?.to_vec()))
    }
}

/// The successful MNT result (`mountres3_ok`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountOk {
    /// The export root's file handle (`fhandle3`, at most 64 bytes).
    pub fhandle: Vec<u8>,
    /// Flavors the server accepts for this export, preferred first.
    pub auth_flavors: Vec<u32>,
}

/// `mountres3`: the MNT reply union.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountRes3 {
    Ok(MountOk),
    Err(MountStat3),
}

impl Xdr for MountRes3 {
    fn encode(&self, e: &mut Enc) {
        match self {
            MountRes3::Ok(ok) => {
                e.u32(MountStat3::Ok as u32);
                e.opaque(&ok.fhandle);
                e.u32(ok.auth_flavors.len() as u32);
                for f in &ok.auth_flavors {
                    e.u32(*f);
                }
            }
            MountRes3::Err(s) => s.encode(e),
        }
    }
    fn decode(d: &mut Dec<'_>) -> XdrResult<Self> {
        match MountStat3::decode(d)? {
            MountStat3::Ok => {
                let fhandle = d.opaque(FHSIZE3)?.to_vec();
                let n = d.array_len(MAX_FLAVORS, 4)?;
                let mut auth_flavors = Vec::with_capacity(n);
                for _ in 0..n {
                    auth_flavors.push(d.u32()?);
                }
                Ok(MountRes3::Ok(MountOk {
                    fhandle,
                    auth_flavors,
                }))
            }
            s => Ok(MountRes3::Err(s)),
        }
    }
}

/// One `mountbody` of a DUMP reply: who has mounted what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    pub hostname: Vec<u8>,
    pub directory: Vec<u8>,
}

/// `mountlist`: DUMP's linked list, flattened.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MountList(pub Vec<MountEntry>);

impl Xdr for MountList {
    fn encode(&self, e: &mut Enc) {
        for m in &self.0 {
            e.bool(true);
            e.opaque(&m.hostname);
            e.opaque(&m.directory);
        }
        e.bool(false);
    }
    fn decode(d: &mut Dec<'_>) -> XdrResult<Self> {
        let mut v = Vec::new();
        while d.bool()? {
            if v.len() >= MAX_LIST {
                return Err(XdrError::TooLong);
            }
            let hostname = d.opaque(MNTNAMLEN)?.to_vec();
            let directory = d.opaque(MNTPATHLEN)?.to_vec();
            v.push(MountEntry {
                hostname,
                directory,
            });
        }
        Ok(MountList(v))
    }
}

/// One `exportnode` of an EXPORT reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportEntry {
    pub dir: Vec<u8>,
    /// Client names/groups allowed; empty means everyone.
    pub groups: Vec<Vec<u8>>,
}

/// `exports`: EXPORT's linked list of linked lists, flattened.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Exports(pub Vec<ExportEntry>);

impl Xdr for Exports {
    fn encode(&self, e: &mut Enc) {
        for x in &self.0 {
            e.bool(true);
            e.opaque(&x.dir);
            for g in &x.groups {
                e.bool(true);
                e.opaque(g);
            }
            e.bool(false);
        }
        e.bool(false);
    }
    fn decode(d: &mut Dec<'_>) -> XdrResult<Self> {
        let mut v = Vec::new();
        let mut total = 0usize;
        while d.bool()? {
            let dir = d.opaque(MNTPATHLEN)?.to_vec();
            let mut groups = Vec::new();
            while d.bool()? {
                total += 1;
                if total >= MAX_LIST {
                    return Err(XdrError::TooLong);
                }
                groups.push(d.opaque(MNTNAMLEN)?.to_vec());
            }
            total += 1;
            if total >= MAX_LIST {
                return Err(XdrError::TooLong);
            }
            v.push(ExportEntry { dir, groups });
        }
        Ok(Exports(v))
    }
}

/// MOUNT v3 calls over a [`Client`].
#[derive(Clone, Debug)]
pub struct MountClient {
    client: Client,
}

impl MountClient {
    pub fn new(client: Client) -> Self {
        MountClient { client }
    }

    pub async fn connect(addr: SocketAddr, cfg: &ClientConfig) -> Result<Self, ClientError> {
        Ok(Self::new(Client::connect(addr, cfg).await?))
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The same connections, calling with `auth`.
    pub fn with_auth(&self, auth: Auth) -> Self {
        Self::new(self.client.with_auth(auth))
    }

    async fn call<A: Xdr, R: Xdr>(&self, proc_: u32, args: &A) -> Result<R, ClientError> {
        self.client.call(MOUNT_PROGRAM, MOUNT_V3, proc_, args).await
    }

    /// MOUNTPROC3_NULL.
    pub async fn null(&self) -> Result<(), ClientError> {
        self.call(MOUNTPROC3_NULL, &()).await
    }

    /// MOUNTPROC3_MNT: the export's root handle and accepted flavors; a
    /// non-OK status becomes [`ClientError::Mount`].
    pub async fn mnt(&self, path: impl AsRef<[u8]>) -> Result<MountOk, ClientError> {
        match self.mnt_res(path).await? {
            MountRes3::Ok(ok) => Ok(ok),
            MountRes3::Err(s) => Err(ClientError::Mount(s)),
        }
    }

    /// MOUNTPROC3_MNT returning the reply union as is.
    pub async fn mnt_res(&self, path: impl AsRef<[u8]>) -> Result<MountRes3, ClientError> {
        self.call(MOUNTPROC3_MNT, &DirPath(path.as_ref().to_vec()))
            .await
    }

    /// MOUNTPROC3_DUMP: the server's mount list.
    pub async fn dump(&self) -> Result<Vec<MountEntry>, ClientError> {
        Ok(self.call::<_, MountList>(MOUNTPROC3_DUMP, &()).await?.0)
    }

    /// MOUNTPROC3_UMNT.
    pub async fn umnt(&self, path: impl AsRef<[u8]>) -> Result<(), ClientError> {
        self.call(MOUNTPROC3_UMNT, &DirPath(path.as_ref().to_vec()))
            .await
    }

    /// MOUNTPROC3_UMNTALL.
    pub async fn umntall(&self) -> Result<(), ClientError> {
        self.call(MOUNTPROC3_UMNTALL, &()).await
    }

    /// MOUNTPROC3_EXPORT: the export list.
    pub async fn export(&self) -> Result<Vec<ExportEntry>, ClientError> {
        Ok(self.call::<_, Exports>(MOUNTPROC3_EXPORT, &()).await?.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountres_round_trips() {
        for r in [
            MountRes3::Ok(MountOk {
                fhandle: vec![1, 2, 3, 4, 5],
                auth_flavors: vec![1, 0],
            }),
            MountRes3::Err(MountStat3::Acces),
        ] {
            assert_eq!(
                rnfsd_xdr::from_slice::<MountRes3>(&rnfsd_xdr::to_vec(&r)),
                Ok(r)
            );
        }
    }

    #[test]
    fn oversized_fhandle_is_rejected() {
        let r = MountRes3::Ok(MountOk {
            fhandle: vec![0; FHSIZE3 + 1],
            auth_flavors: vec![],
        });
        assert_eq!(
            rnfsd_xdr::from_slice::<MountRes3>(&rnfsd_xdr::to_vec(&r)),
            Err(XdrError::TooLong)
        );
    }

    #[test]
    fn lists_round_trip() {
        let l = MountList(vec![
            MountEntry {
                hostname: b"h1".to_vec(),
                directory: b"/a".to_vec(),
            },
            MountEntry {
                hostname: b"h2".to_vec(),
                directory: b"/b/c".to_vec(),
            },
        ]);
        assert_eq!(
            rnfsd_xdr::from_slice::<MountList>(&rnfsd_xdr::to_vec(&l)),
            Ok(l)
        );
        let x = Exports(vec![
            ExportEntry {
                dir: b"/srv".to_vec(),
                groups: vec![b"*".to_vec(), b"10.0.0.0/8".to_vec()],
            },
            ExportEntry {
                dir: b"/x".to_vec(),
                groups: vec![],
            },
        ]);
        assert_eq!(
            rnfsd_xdr::from_slice::<Exports>(&rnfsd_xdr::to_vec(&x)),
            Ok(x)
        );
        assert_eq!(
            rnfsd_xdr::from_slice::<Exports>(&[0, 0, 0, 0]),
            Ok(Exports(vec![]))
        );
    }

    #[test]
    fn truncated_list_is_an_error() {
        let l = MountList(vec![MountEntry {
            hostname: b"h".to_vec(),
            directory: b"/d".to_vec(),
        }]);
        let b = rnfsd_xdr::to_vec(&l);
        for cut in 0..b.len() {
            assert!(rnfsd_xdr::from_slice::<MountList>(&b[..cut]).is_err());
        }
    }
}
