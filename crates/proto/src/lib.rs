//! Wire types shared by the rnfsd server and client: ONC RPC (RFC 5531),
//! NFSv3 and MOUNT v3 (RFC 1813), portmapper v2 (RFC 1833).
//!
//! Every type encodes and decodes both ways, so the server and our client use
//! one definition and a round-trip property test covers both directions.

pub mod mount;
pub mod nfs3;
pub mod portmap;
pub mod rpc;
