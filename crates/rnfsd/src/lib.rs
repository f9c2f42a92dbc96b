//! rnfsd: a userspace NFSv3 server.
//!
//! Layers, data flowing one way: transport (rnfsd-transport: sockets, record
//! marking, event loops, worker pool) → `rpc` (call header, auth, dispatch)
//! → `programs` (nfs3, mount, portmap tables) → fs (rnfsd-fs backends).
//!
//! `serve` puts them together (`ServerBuilder`), from a `config::Config`
//! that `cli` reads; `listeners` starts the sockets.

pub mod access;
pub mod activation;
pub mod admin;
pub mod advice;
pub mod cli;
pub mod config;
pub mod docs_gen;
pub mod drc;
mod endpoint;
pub mod exports;
pub mod keys;
pub mod listeners;
pub mod live;
pub mod metrics;
pub mod outcall;
pub mod privileges;
pub mod programs;
pub mod rpc;
pub mod rpcbind;
pub mod serve;
pub mod service;
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
