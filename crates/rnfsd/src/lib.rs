//! rnfsd: a userspace NFSv3 server.
//!
//! Layers, data flowing one way: transport (rnfsd-transport: sockets, record
//! marking, event loops, worker pool) → rpc (rnfsd-rpc: call header, auth,
//! dispatch through program tables) → `programs` (nfs3, mount, nlm, nsm,
//! portmap tables over this server's `state`) → fs (rnfsd-fs backends).
//!
//! `serve` puts them together (`ServerBuilder`), from a `config::Config`
//! that `cli` reads; `listeners` starts the sockets.

pub mod access;
pub mod activation;
pub mod admin;
pub mod advice;
pub mod backend;
pub mod cli;
pub mod config;
pub mod docs_gen;
mod endpoint;
pub mod keys;
pub mod limits;
pub mod listeners;
pub mod live;
pub mod metrics;
pub mod outcall;
pub mod privileges;
pub mod programs;
pub mod rpcbind;
pub mod serve;
pub mod state;
pub mod stats_cmd;
mod sys;

/// "a, b, c" for log and error lines.
pub(crate) fn comma_list<T: std::fmt::Display>(v: &[T]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
