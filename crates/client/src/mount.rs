//! MOUNT v3 client (RFC 1813 appendix I).
//!
//! The wire types are `rnfsd_proto::mount`'s, re-exported here.

use crate::typed::typed_client;

use crate::error::ClientError;

pub use rnfsd_proto::mount::*;

/// The successful MNT result (`mountres3_ok`) with the handle unwrapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountOk {
    /// The export root's file handle (`fhandle3`, at most 64 bytes).
    pub fhandle: Vec<u8>,
    /// Flavors the server accepts for this export, preferred first.
    pub auth_flavors: Vec<u32>,
}

typed_client!(
    /// MOUNT v3 calls over a [`Client`].
    MountClient,
    PROGRAM,
    VERSION
);

impl MountClient {
    /// MOUNTPROC3_NULL.
    pub async fn null(&self) -> Result<(), ClientError> {
        self.call(PROC_NULL, &()).await
    }

    /// MOUNTPROC3_MNT: the export's root handle and accepted flavors; a
    /// non-OK status becomes [`ClientError::Mount`].
    pub async fn mnt(&self, path: impl AsRef<[u8]>) -> Result<MountOk, ClientError> {
        match self.mnt_res(path).await? {
            MountRes3::Ok {
                fhandle,
                auth_flavors,
            } => Ok(MountOk {
                fhandle: fhandle.0,
                auth_flavors,
            }),
            MountRes3::Err(s) => Err(ClientError::Mount(s)),
        }
    }

    /// MOUNTPROC3_MNT returning the reply union as is.
    pub async fn mnt_res(&self, path: impl AsRef<[u8]>) -> Result<MountRes3, ClientError> {
        self.call(PROC_MNT, &DirPath(path.as_ref().to_vec())).await
    }

    /// MOUNTPROC3_DUMP: the server's mount list.
    pub async fn dump(&self) -> Result<Vec<MountBody>, ClientError> {
        Ok(self.call::<_, MountList>(PROC_DUMP, &()).await?.0)
    }

    /// MOUNTPROC3_UMNT.
    pub async fn umnt(&self, path: impl AsRef<[u8]>) -> Result<(), ClientError> {
        self.call(PROC_UMNT, &DirPath(path.as_ref().to_vec())).await
    }

    /// MOUNTPROC3_UMNTALL.
    pub async fn umntall(&self) -> Result<(), ClientError> {
        self.call(PROC_UMNTALL, &()).await
    }

    /// MOUNTPROC3_EXPORT: the export list.
    pub async fn export(&self) -> Result<Vec<ExportNode>, ClientError> {
        Ok(self.call::<_, Exports>(PROC_EXPORT, &()).await?.0)
    }
}
