//! The server's fixed bounds on the request path, each with what it bounds
//! and why this value, and the relations the code relies on between them,
//! the wire (rnfsd-proto) and the layers below (rnfsd-fs, rnfsd-rpc),
//! checked at compile time. Configured bounds and their defaults are the
//! `[server]` key table's (`config/server.rs`, `state.rs`), with their own
//! checks there and in `config/validate.rs`.
//!
//! Imports no module of this crate: every layer may use it.

use rnfsd_fs::limits as fs;
use rnfsd_proto::{mount, nfs3, rpc};

/// The transfer sizes (`max_io`) a configuration may set: RFC 1813 leaves
/// it to the server; below a page is silly, and above 16 MiB a single
/// call pins too much memory per worker. Transfers themselves stop at the
/// wire's `MAX_DATA` (`programs::nfs3::max_io`).
pub const MIN_MAX_IO: u32 = 4096;
pub const MAX_MAX_IO: u32 = 16 << 20;

/// Most bytes a WRITE call's record holds besides its data: the call's
/// fixed header, a credential and a verifier at their bound, WRITE3args up
/// to its data (handle, offset, count, stable_how, the data's length) and
/// the data's XDR padding. `max_record` must leave this much beyond
/// `max_io`.
pub const MAX_WRITE_OVERHEAD: usize = rnfsd_rpc::header::FIXED
    + 2 * (4 + 4 + rpc::MAX_AUTH_BYTES)
    + nfs3::NFS_FH3_MAX_LEN
    + 8
    + 4
    + 4
    + 4
    + 3;

/// Entries asked of a backend for one READDIR or READDIRPLUS reply at
/// most: bounds the page a backend builds for one call.
pub const MAX_DIR_BATCH: usize = 4096;

/// Reply room a large result (READ, READDIR, READDIRPLUS) reserves beyond
/// the count it asks for, against the transport's `max_buffered_bytes`:
/// the record mark, the RPC reply header and the result's head (status,
/// attributes, counts), with room to spare.
pub const ROOM_HEAD: usize = 1024;

/// MOUNT's remembered (host, path) mounts at most; the oldest is forgotten
/// first. The list is advisory (RFC 1813 appendix I: DUMP "may not be
/// accurate"); the bound keeps DUMP's reply and the table small.
pub const MAX_MOUNT_ENTRIES: usize = 256;

/// NLM callbacks (GRANTED, *_RES) being sent at once; past it a callback
/// is dropped: the client asks again on its own (GRANTED) or its *_MSG
/// times out and is retransmitted. Each takes a thread for up to a few
/// timeouts, so a flood of *_MSG calls cannot make threads without end.
pub const MAX_CALLBACKS: usize = 64;

// `max_io` is clamped to MIN_MAX_IO..=MAX_DATA (`clamp` needs min <= max),
// and every valid configuration reaches MIN_MAX_IO.
const _: () = assert!(MIN_MAX_IO as usize <= nfs3::MAX_DATA && MIN_MAX_IO <= MAX_MAX_IO);
// A backend serves the largest READ a client may ask for in one call.
const _: () = assert!(
    fs::local::MAX_READ as usize >= nfs3::MAX_DATA && fs::ceph::MAX_READ as usize >= nfs3::MAX_DATA
);
// A backend gives as many entries as asked, and a client decoding with
// our bounds takes every entry of a reply.
const _: () = assert!(
    1 <= MAX_DIR_BATCH
        && MAX_DIR_BATCH <= fs::local::MAX_DIR_ENTRIES
        && MAX_DIR_BATCH <= fs::ceph::MAX_DIR_ENTRIES
        && MAX_DIR_BATCH <= nfs3::MAX_DIR_ENTRIES
);
// Every handle a backend makes fits nfs_fh3 and MOUNT's fhandle3.
const _: () = assert!(rnfsd_fs::MAX_HANDLE <= nfs3::NFS3_FHSIZE);
const _: () = assert!(rnfsd_fs::MAX_HANDLE <= mount::FHSIZE3);
// Every AUTH_SYS credential's groups are accepted by the local backend.
const _: () = assert!(fs::local::MAX_GROUPS >= rpc::MAX_AUTH_GIDS);
// Every name and symlink target the local backend makes fits the wire
// (READDIR would stop at a longer name; READLINK refuses a longer target).
const _: () = assert!(rnfsd_fs::access::NAME_MAX <= nfs3::MAX_NAME);
const _: () = assert!(fs::local::SYMLINK_MAX <= nfs3::MAX_PATH);
// DUMP's mount list decodes within a client's list bound.
const _: () = assert!(MAX_MOUNT_ENTRIES <= mount::MAX_LIST);

// A READ of the smallest transfer size is a call the transport takes from
// an idle connection however full the buffered-bytes budget is (its reply
// room is at most `FREE_REPLY`), as docs/security.md promises for small
// READs.
const _: () = assert!(MIN_MAX_IO as usize + ROOM_HEAD <= rnfsd_transport::limits::FREE_REPLY);
