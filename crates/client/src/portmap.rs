//! Portmapper v2 client (RFC 1833 §3), for testing rnfsd's built-in
//! portmapper and its rpcbind registration.
//!
//! The wire types are `rnfsd_proto::portmap`'s, re-exported here.

use crate::typed::typed_client;
use std::net::Ipv4Addr;

use crate::conn::ClientConfig;
use crate::error::ClientError;

pub use rnfsd_proto::portmap::*;

typed_client!(
    /// Portmapper v2 calls over a [`Client`].
    PortmapClient,
    PROGRAM,
    PMAP_VERSION
);

impl PortmapClient {
    /// Connect to the portmapper at 127.0.0.1:111.
    pub async fn connect_local(cfg: &ClientConfig) -> Result<Self, ClientError> {
        Self::connect((Ipv4Addr::LOCALHOST, PMAP_PORT).into(), cfg).await
    }

    /// PMAPPROC_NULL.
    pub async fn null(&self) -> Result<(), ClientError> {
        self.call(PMAPPROC_NULL, &()).await
    }

    /// PMAPPROC_GETPORT: the port `prog`/`vers` is registered on for
    /// protocol `prot` ([`IPPROTO_TCP`] / [`IPPROTO_UDP`]); 0 if none.
    pub async fn getport(&self, prog: u32, vers: u32, prot: u32) -> Result<u32, ClientError> {
        let m = Mapping {
            prog,
            vers,
            prot,
            port: 0,
        };
        self.call(PMAPPROC_GETPORT, &m).await
    }

    /// PMAPPROC_SET: register a mapping; true on success.
    pub async fn set(&self, m: Mapping) -> Result<bool, ClientError> {
        self.call(PMAPPROC_SET, &m).await
    }

    /// PMAPPROC_UNSET: remove mappings for `m.prog`/`m.vers`; true on
    /// success.
    pub async fn unset(&self, m: Mapping) -> Result<bool, ClientError> {
        self.call(PMAPPROC_UNSET, &m).await
    }

    /// PMAPPROC_DUMP: every registered mapping.
    pub async fn dump(&self) -> Result<Vec<Mapping>, ClientError> {
        Ok(self.call::<_, PmapList>(PMAPPROC_DUMP, &()).await?.0)
    }
}
