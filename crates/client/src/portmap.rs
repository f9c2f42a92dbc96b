//! Portmapper v2 client (RFC 1833 §3), for testing rnfsd's built-in
//! portmapper and its rpcbind registration.
//!
//! Wire types are private to the client for now; they duplicate what
//! `rnfsd_proto::portmap` will hold.

use std::net::{Ipv4Addr, SocketAddr};

use rnfsd_xdr::{Dec, Enc, Result as XdrResult, Xdr, XdrError};

use crate::auth::Auth;
use crate::client::Client;
use crate::conn::ClientConfig;
use crate::error::ClientError;

pub const PMAP_PROGRAM: u32 = 100000;
pub const PMAP_V2: u32 = 2;
pub const PMAP_PORT: u16 = 111;

pub const PMAPPROC_NULL: u32 = 0;
pub const PMAPPROC_SET: u32 = 1;
pub const PMAPPROC_UNSET: u32 = 2;
pub const PMAPPROC_GETPORT: u32 = 3;
pub const PMAPPROC_DUMP: u32 = 4;

pub const IPPROTO_TCP: u32 = 6;
pub const IPPROTO_UDP: u32 = 17;

/// Bound on a DUMP reply's list length.
const MAX_MAPPINGS: usize = 65536;

/// `mapping` (RFC 1833 §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mapping {
    pub prog: u32,
    pub vers: u32,
    pub prot: u32,
    pub port: u32,
}

impl Xdr for Mapping {
    fn encode(&self, e: &mut Enc) {
        e.u32(self.prog);
        e.u32(self.vers);
        e.u32(self.prot);
        e.u32(self.port);
    }
    fn decode(d: &mut Dec<'_>) -> XdrResult<Self> {
        Ok(Mapping {
            prog: d.u32()?,
            vers: d.u32()?,
            prot: d.u32()?,
            port: d.u32()?,
        })
    }
}

/// `pmaplist`: DUMP's linked list, flattened.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MappingList(pub Vec<Mapping>);

impl Xdr for MappingList {
    fn encode(&self, e: &mut Enc) {
        for m in &self.0 {
            e.bool(true);
            m.encode(e);
        }
        e.bool(false);
    }
    fn decode(d: &mut Dec<'_>) -> XdrResult<Self> {
        let mut v = Vec::new();
        while d.bool()? {
            if v.len() >= MAX_MAPPINGS {
                return Err(XdrError::TooLong);
            }
            v.push(Mapping::decode(d)?);
        }
        Ok(MappingList(v))
    }
}

/// Portmapper v2 calls over a [`Client`].
#[derive(Clone, Debug)]
pub struct PortmapClient {
    client: Client,
}

impl PortmapClient {
    pub fn new(client: Client) -> Self {
        PortmapClient { client }
    }

    pub async fn connect(addr: SocketAddr, cfg: &ClientConfig) -> Result<Self, ClientError> {
        Ok(Self::new(Client::connect(addr, cfg).await?))
    }

    /// Connect to the portmapper at 127.0.0.1:111.
    pub async fn connect_local(cfg: &ClientConfig) -> Result<Self, ClientError> {
        Self::connect((Ipv4Addr::LOCALHOST, PMAP_PORT).into(), cfg).await
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn with_auth(&self, auth: Auth) -> Self {
        Self::new(self.client.with_auth(auth))
    }

    async fn call<A: Xdr, R: Xdr>(&self, proc_: u32, args: &A) -> Result<R, ClientError> {
        self.client.call(PMAP_PROGRAM, PMAP_V2, proc_, args).await
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
        Ok(self.call::<_, MappingList>(PMAPPROC_DUMP, &()).await?.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_list_round_trips() {
        let l = MappingList(vec![
            Mapping {
                prog: 100003,
                vers: 3,
                prot: IPPROTO_TCP,
                port: 2049,
            },
            Mapping {
                prog: 100005,
                vers: 3,
                prot: IPPROTO_TCP,
                port: 20048,
            },
        ]);
        let b = rnfsd_xdr::to_vec(&l);
        assert_eq!(rnfsd_xdr::from_slice::<MappingList>(&b), Ok(l));
        assert!(rnfsd_xdr::from_slice::<MappingList>(&b[..b.len() - 4]).is_err());
    }
}
