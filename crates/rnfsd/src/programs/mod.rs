//! RPC programs: one declarative table each (rnfsd-rpc's [`rnfsd_rpc::Program`]),
//! over this server's state ([`Server`]).

use crate::state::Server;

mod fscall;
pub mod mount;
pub mod nfs3;
pub mod nfs4;
pub mod nlm;
pub mod nsm;
pub mod portmap;

/// A call's context as these programs see it.
pub type CallCtx<'a> = rnfsd_rpc::CallCtx<'a, Server>;
/// A program table over this server's state.
pub type Program = rnfsd_rpc::Program<Server>;
/// A version of a program table.
pub type Version = rnfsd_rpc::Version<Server>;
/// A row of a program table.
pub type Proc = rnfsd_rpc::Proc<Server>;
