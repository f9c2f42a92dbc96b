//! NFS version 4.1 (RFC 8881), program 100003 version 4: NULL and
//! COMPOUND. COMPOUND runs its operations one by one through one
//! declarative table (`ops::OPS`, like knfsd's `nfsd4_ops[]`), each row
//! naming its handler, in the file of its kind:
//!
//! - `session`: EXCHANGE_ID, CREATE_SESSION, SEQUENCE, DESTROY_SESSION,
//!   BIND_CONN_TO_SESSION, DESTROY_CLIENTID, RECLAIM_COMPLETE,
//!   TEST_STATEID, FREE_STATEID, BACKCHANNEL_CTL;
//! - `fh`: the current and saved filehandles (PUTFH, PUTROOTFH,
//!   PUTPUBFH, GETFH, SAVEFH, RESTOREFH), LOOKUP and LOOKUPP through the
//!   pseudo-filesystem, SECINFO and SECINFO_NO_NAME;
//! - `attr`: GETATTR and ACCESS, and fattr4 (`fattr`);
//! - `setattr`: SETATTR, VERIFY, NVERIFY;
//! - `dir`: CREATE, LINK, REMOVE, RENAME, READLINK, READDIR;
//! - `open`: OPEN, OPEN_DOWNGRADE, CLOSE, DELEGRETURN;
//! - `io`: READ, WRITE, COMMIT;
//! - `lock`: LOCK, LOCKT, LOCKU;
//! - `xattr`: GETXATTR, SETXATTR, LISTXATTRS, REMOVEXATTR (NFSv4.2's
//!   extended attributes, RFC 8276).
//! - `v42`: NFSv4.2's SEEK, ALLOCATE, DEALLOCATE, READ_PLUS, COPY,
//!   CLONE, OFFLOAD_STATUS, OFFLOAD_CANCEL (RFC 7862, minor version 2).
//!
//! `compound` is the driver: the SEQUENCE rules, the session's bounds,
//! the slot's reply cache, the current filehandle and stateid.
//!
//! Served only with `nfs4` on: NFSv3 and NFSv4 are separate tables of one
//! program, so a client asking for a version we do not serve learns the
//! range of both (`rnfsd_rpc::Programs`).

use rnfsd_proto::nfs4::{NFS4_PROGRAM, NFS_V4};
use rnfsd_rpc::{proc_entry, CacheClass, Class};

use crate::programs::{Proc, Program, Version};

mod attr;
mod compound;
mod cur;
mod dir;
mod fattr;
mod fh;
mod io;
mod lock;
mod open;
mod ops;
mod session;
mod setattr;
mod status;
mod v42;
mod xattr;

pub use ops::{op_descs, OPS_STATS_PROG, OPS_STATS_VERS};

pub use crate::state::nfs4::MAX_COMPOUND_REPLY;

pub static NFS4: Program = Program {
    name: "nfs4",
    prog: NFS4_PROGRAM,
    versions: &[Version {
        vers: NFS_V4,
        procs: &PROCS,
    }],
};

// Exactly-once is the session's (its slots' reply cache, RFC 8881
// §2.10.6), never the duplicate request cache's: COMPOUND is `None`.
// Where a compound runs its arguments say (`compound::route`).
static PROCS: [Proc; 2] = [
    proc_entry!(
        "NULL",
        (),
        compound::null,
        CacheClass::None,
        0,
        Class::Quick
    ),
    proc_entry!(
        raw "COMPOUND",
        compound::run,
        CacheClass::None,
        MAX_COMPOUND_REPLY,
        Class::By(compound::route)
    ),
];
