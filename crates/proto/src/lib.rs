//! Wire types shared by the rnfsd server and client: ONC RPC (RFC 5531),
//! NFSv3 and MOUNT v3 (RFC 1813), NFSv4.1 (RFC 8881), portmapper v2
//! (RFC 1833), and the lock manager: NLM v1/v3/v4 and NSM v1 (Open Group
//! XNFS Version 3W).
//!
//! Every type encodes and decodes both ways, so the server and our client use
//! one definition and a round-trip property test covers both directions.

pub mod mount;
pub mod nfs3;
pub mod nfs4;
pub mod nlm;
pub mod nsm;
pub mod portmap;
pub mod rpc;
