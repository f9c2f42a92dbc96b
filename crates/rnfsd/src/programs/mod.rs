//! RPC programs: one declarative table each.

pub mod mount;
pub mod nfs3;
pub mod nlm;
pub mod nsm;
pub mod portmap;
