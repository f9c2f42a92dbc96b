//! Async ONC RPC (RFC 5531) client for testing and benchmarking rnfsd, with
//! MOUNT v3 and NFSv3 (RFC 1813), NFSv4.1 (RFC 8881) and portmapper v2
//! (RFC 1833) on top.
//!
//! Layers:
//! - [`RpcConnection`]: one TCP connection. Record marking (RFC 5531 §11)
//!   with a bounded reply size, xid matching so many calls are in flight at
//!   once and replies may arrive in any order, a per-call timeout, and
//!   connection loss failing every pending call.
//! - [`Client`]: N connections used round-robin (like `nconnect`).
//! - [`MountClient`], [`NfsClient`], [`PortmapClient`], [`NlmClient`] (NLM
//!   v4), [`NsmClient`] (status monitor): typed procedures over a
//!   [`Client`]; [`Client::send`] makes one-way calls (NLM *_MSG / *_RES). NFSv3 uses the wire types of [`nfs3`]
//!   (`rnfsd_proto::nfs3`, re-exported).
//! - [`Nfs4Client`] ([`nfs4`]): an NFSv4.1 client ID and session over a
//!   [`Client`] (EXCHANGE_ID, CREATE_SESSION with a slot table, optionally
//!   a back channel answering the server's callbacks), COMPOUNDs with
//!   SEQUENCE put first, helpers for the usual ones; [`Nfs4Rpc`] sends
//!   COMPOUNDs as given, without a session.
//!
//! Credentials ([`Auth`]: AUTH_NONE or AUTH_SYS) are set per client and can
//! be overridden with a cheap view: `client.with_auth(Auth::unix(1000, 1000))`
//! shares the connections but calls as uid 1000.
//!
//! Everything needs a tokio runtime.
//!
//! ```no_run
//! use rnfsd_client::nfs3::{NfsFh3, StableHow};
//! use rnfsd_client::{Auth, Client, ClientConfig, ClientError, MountClient, NfsClient};
//!
//! # async fn demo() -> Result<(), ClientError> {
//! let cfg = ClientConfig {
//!     auth: Auth::unix(0, 0),
//!     connections: 4,
//!     privileged_port: true,
//!     ..ClientConfig::default()
//! };
//! let client = Client::connect("127.0.0.1:2049".parse().unwrap(), &cfg).await?;
//!
//! // MOUNT the export to get its root file handle.
//! let mount = MountClient::new(client.clone());
//! let root = NfsFh3::new(mount.mnt("/srv/export").await?.fhandle);
//!
//! // Typed NFSv3 calls; helpers turn a non-OK nfsstat3 into ClientError::Nfs.
//! let nfs = NfsClient::new(client.clone());
//! let (file, attrs) = nfs.lookup_path(&root, "dir/file.txt").await?;
//! let data = nfs.read_all(&file).await?;
//! assert_eq!(data.len() as u64, attrs.size);
//!
//! // The same connections, calling as uid 1000.
//! let user = nfs.with_auth(Auth::sys(1000, 1000, &[1000], "bench"));
//! user.write_all(&file, b"hello", StableHow::FileSync).await?;
//!
//! // Any program by number: NFSv3 NULL (program 100003, version 3, proc 0).
//! let () = client.call(100003, 3, 0, &()).await?;
//!
//! // Malformed arguments on purpose: the server should say GARBAGE_ARGS.
//! match client.call_raw(100003, 3, 1, &[0xff; 3]).await {
//!     Err(ClientError::GarbageArgs) => {}
//!     other => panic!("unexpected {other:?}"),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! NFSv4.1: a session, then compounds.
//!
//! ```no_run
//! use rnfsd_client::nfs4::{ArgOp, OpenArgs, StableHow4};
//! use rnfsd_client::{Auth, ClientConfig, ClientError, Nfs4Client, Nfs4Config};
//!
//! # async fn demo() -> Result<(), ClientError> {
//! let cfg = ClientConfig { auth: Auth::unix(0, 0), ..ClientConfig::default() };
//! let addr = "127.0.0.1:2049".parse().unwrap();
//! let c = Nfs4Client::connect(addr, &cfg, &Nfs4Config::default()).await?;
//! let dir = c.lookup_path("/srv/export").await?;
//! let f = c.open(&dir, &OpenArgs::create("new-file")).await?;
//! c.write(&f.fh, &f.stateid, 0, b"hello", StableHow4::FileSync).await?;
//! c.close(&f.fh, &f.stateid).await?;
//! // Any compound: SEQUENCE is put first; statuses come back as sent.
//! let r = c.compound(&[ArgOp::PutRootFh, ArgOp::GetFh]).await?;
//! println!("{:?}", r.status);
//! c.shutdown().await?; // DESTROY_SESSION, DESTROY_CLIENTID
//! # Ok(())
//! # }
//! ```

mod auth;
mod client;
mod conn;
mod error;
pub mod mount;
pub mod nfs;
pub mod nfs4;
pub mod nlm;
pub mod nsm;
pub mod portmap;
pub mod record;
mod typed;
mod udp;

pub use auth::Auth;
pub use client::{Client, MAX_CONNECTIONS};
pub use conn::{
    CallHandler, ClientConfig, RpcConnection, DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_REPLY,
    DEFAULT_TIMEOUT,
};
pub use error::ClientError;
pub use mount::MountClient;
pub use nfs::{check, NfsClient};
pub use nfs4::{Nfs4Client, Nfs4Config, Nfs4Rpc};
pub use nlm::NlmClient;
pub use nsm::NsmClient;
pub use portmap::PortmapClient;
pub use rnfsd_proto::nfs3;
pub use rnfsd_proto::rpc::AuthStat;
pub use udp::UdpClient;
