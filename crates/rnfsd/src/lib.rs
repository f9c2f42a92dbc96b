//! rnfsd: a userspace NFSv3 server.
//!
//! Layers, data flowing one way: transport (rnfsd-transport: sockets, record
//! marking, event loops, worker pool) → `rpc` (call header, auth, dispatch)
//! → `programs` (nfs3, mount, portmap tables) → fs (rnfsd-fs backends).

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
pub mod live;
pub mod metrics;
pub mod outcall;
pub mod privileges;
pub mod programs;
pub mod rpc;
pub mod rpcbind;
pub mod service;
pub mod state;
pub mod stats_cmd;
mod sys;
