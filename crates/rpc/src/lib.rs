//! rnfsd-rpc: an ONC RPC server (RFC 5531) over rnfsd's transport, generic
//! over the server state its programs share. It knows nothing of NFS:
//! NFSv3, MOUNT, NLM, NSM and the port mapper are tables registered with
//! it.
//!
//! One call's path through it:
//! 1. On the event loop, [`RpcService`]'s `plan` reads the record's fixed
//!    header once (`header::peek`), finds the table row, and asks the row
//!    where the call runs ([`Class`]) and how much reply room it reserves
//!    ([`Room`]); the row's number travels with the record in the plan.
//! 2. Where the call runs (on the loop, with that loop's [`State::Loop`],
//!    or on a pool worker), dispatch decodes the credential, checks the
//!    policy, consults the duplicate reply cache, and runs the row's
//!    handler with a [`CallCtx`]; the handler may park its reply on a
//!    [`Wait`] (a journal commit) when the call's transport responder can
//!    send it later.
//! 3. The reply is framed once; statistics get what dispatch decoded and
//!    answered (`rnfsd_stats::Registry::record`), never the bytes again.
//!
//! The back channel (RFC 8881 §2.10.3.1): a service given a
//! [`BackChannel`] plans REPLY records (answers to calls the server sent
//! on a client's connection) to the transport's `Route::Reply` and hands
//! them to it, and a handler takes its connection's [`BackConn`] from
//! [`CallCtx::back_channel`] to call the client later (`back.rs`).
//!
//! Hand-written: the hot path (one header read, a row by number, no
//! allocation beyond the reply) is ours to keep short, and no RPC crate
//! serves synchronous handlers on our own event loops and pools.

mod auth;
mod back;
mod ctx;
mod dispatch;
pub mod drc;
pub mod header;
pub mod limits;
mod service;
mod table;

pub use auth::Auth;
pub use back::{
    BackChannel, BackChannelConfig, BackChannelStats, BackConn, CallError, PendingCall,
};
pub use ctx::{CallCtx, LoopState, Moved, Park, ProcError, State, Wait};
pub use dispatch::{Answer, Parked, Policy};
pub use drc::{Drc, DrcConfig};
pub use limits::MAX_REPLY_HEADER;
pub use service::RpcService;
pub use table::{CacheClass, Class, Miss, Proc, ProcFn, Program, Programs, Room, Row, Version};

/// Where a call runs, as a row's `Class::By` says.
pub use rnfsd_transport::Route;

/// The XDR codec the tables' rows decode and encode with (`proc_entry!`).
pub use rnfsd_xdr as xdr;
