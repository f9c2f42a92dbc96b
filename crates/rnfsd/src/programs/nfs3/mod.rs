//! NFS version 3 program (RFC 1813), program 100003, as one declarative
//! table (`NFS3`), like knfsd's `nfsd_procedures3[]`: each row names the
//! handler, in the file of its kind (`attr`, `dir`, `data`, `namespace`).
//!
//! Every handler: route the handle to its export (short handle ->
//! NFS3ERR_BADHANDLE, unknown export -> NFS3ERR_STALE, as knfsd), refuse
//! changes on a read-only export with NFS3ERR_ROFS, call the export's
//! backend, and answer with post-op attributes and wcc_data in every reply
//! that carries them, failures included (fetched best-effort).

use rnfsd_proto::nfs3::*;
use rnfsd_xdr::Dec;

use crate::limits::{MIN_MAX_IO, ROOM_HEAD};
use crate::programs::{CallCtx, Proc, Program, Version};
use crate::state::Server;
use rnfsd_rpc::proc_entry;
use rnfsd_rpc::{CacheClass, Class, Route, MAX_REPLY_HEADER};

mod attr;
mod common;
mod convert;
mod data;
mod dir;
mod namespace;
#[cfg(test)]
mod tests;

/// Largest transfer we ever do, whatever the configuration says: the wire
/// types bound READ/WRITE data by `MAX_DATA`.
pub(super) fn max_io(ctx: &CallCtx<'_>) -> u32 {
    ctx.server.max_io.clamp(MIN_MAX_IO, MAX_DATA as u32)
}

/// FSINFO dtpref: what we like READDIR counts to be (knfsd uses a page;
/// larger means fewer round trips on big directories).
pub(super) const DTPREF: u32 = 64 * 1024;

// Upper bounds on each result body, for the table (see `Proc::max_reply`).
pub(super) const ST: usize = 4;
pub(super) const PATTR: usize = POST_OP_ATTR_MAX_LEN;
const WCC: usize = WCC_DATA_MAX_LEN;
const CREATE_MAX: usize = ST + POST_OP_FH3_MAX_LEN + PATTR + WCC;
const READ_MAX: usize = ST + PATTR + 4 + 4 + 4 + MAX_DATA;
const READDIR_MAX: usize = MAX_DATA;

pub static NFS3: Program = Program {
    name: "nfs",
    prog: NFS_PROGRAM,
    versions: &[Version {
        vers: NFS_V3,
        procs: &PROCS,
    }],
};

static PROCS: [Proc; 22] = [
    proc_entry!("NULL", (), attr::null, CacheClass::None, 0, Class::Quick),
    proc_entry!(
        "GETATTR",
        GetAttr3Args,
        attr::getattr,
        CacheClass::None,
        ST + FATTR3_LEN,
        Class::Quick
    ),
    proc_entry!(
        "SETATTR",
        SetAttr3Args,
        attr::setattr,
        CacheClass::Reply,
        ST + WCC,
        Class::By(sync_route)
    ),
    proc_entry!(
        "LOOKUP",
        Lookup3Args,
        dir::lookup,
        CacheClass::None,
        ST + NFS_FH3_MAX_LEN + 2 * PATTR,
        Class::Quick
    ),
    proc_entry!(
        "ACCESS",
        Access3Args,
        attr::access,
        CacheClass::None,
        ST + PATTR + 4,
        Class::Quick
    ),
    proc_entry!(
        "READLINK",
        ReadLink3Args,
        dir::readlink,
        CacheClass::None,
        ST + PATTR + 4 + MAX_PATH
    ),
    proc_entry!(
        raw "READ",
        data::read_run,
        CacheClass::None,
        READ_MAX,
        Class::Quick
    )
    .room(read_room),
    proc_entry!(
        raw "WRITE",
        data::write_run,
        CacheClass::Reply,
        ST + WCC + 4 + 4 + 8,
        Class::By(write_route)
    ),
    proc_entry!(
        "CREATE",
        Create3Args,
        namespace::create,
        CacheClass::Reply,
        CREATE_MAX,
        Class::By(sync_route)
    ),
    proc_entry!(
        "MKDIR",
        Mkdir3Args,
        namespace::mkdir,
        CacheClass::Reply,
        CREATE_MAX,
        Class::By(sync_route)
    ),
    proc_entry!(
        "SYMLINK",
        Symlink3Args,
        namespace::symlink,
        CacheClass::Reply,
        CREATE_MAX,
        Class::By(sync_route)
    ),
    proc_entry!(
        "MKNOD",
        Mknod3Args,
        namespace::mknod,
        CacheClass::Reply,
        CREATE_MAX,
        Class::By(sync_route)
    ),
    proc_entry!(
        "REMOVE",
        Remove3Args,
        namespace::remove,
        CacheClass::Reply,
        ST + WCC,
        Class::By(sync_route)
    ),
    proc_entry!(
        "RMDIR",
        Rmdir3Args,
        namespace::rmdir,
        CacheClass::Reply,
        ST + WCC,
        Class::By(sync_route)
    ),
    proc_entry!(
        "RENAME",
        Rename3Args,
        namespace::rename,
        CacheClass::Reply,
        ST + 2 * WCC,
        Class::By(sync_route)
    ),
    proc_entry!(
        "LINK",
        Link3Args,
        namespace::link,
        CacheClass::Reply,
        ST + PATTR + WCC,
        Class::By(sync_route)
    ),
    proc_entry!(
        "READDIR",
        ReadDir3Args,
        dir::readdir,
        CacheClass::None,
        READDIR_MAX,
        Class::Slow
    )
    .room(readdir_room),
    proc_entry!(
        "READDIRPLUS",
        ReadDirPlus3Args,
        dir::readdirplus,
        CacheClass::None,
        READDIR_MAX,
        Class::Slow
    )
    .room(readdirplus_room),
    proc_entry!(
        "FSSTAT",
        FsStat3Args,
        attr::fsstat,
        CacheClass::None,
        ST + PATTR + 6 * 8 + 4,
        Class::Quick
    ),
    proc_entry!(
        "FSINFO",
        FsInfo3Args,
        attr::fsinfo,
        CacheClass::None,
        ST + PATTR + 7 * 4 + 8 + 8 + 4,
        Class::Quick
    ),
    proc_entry!(
        "PATHCONF",
        PathConf3Args,
        attr::pathconf,
        CacheClass::None,
        ST + PATTR + 2 * 4 + 4 * 4,
        Class::Quick
    ),
    proc_entry!(
        "COMMIT",
        Commit3Args,
        data::commit,
        CacheClass::None,
        ST + WCC + 8,
        Class::Slow
    ),
];

/// READ, READDIR and READDIRPLUS answer up to the count they ask for (at
/// most `max_io`; RFC 1813 §3.3.6, §3.3.16, §3.3.17): that much, and room
/// for the result's head, is reserved while they run. Read from the
/// arguments' fixed fields after the handle; arguments that do not decode
/// reserve `max_io` (the call fails anyway).
fn room(server: &Server, d: &mut Dec<'_>, skip: usize) -> usize {
    let max = server.max_io as usize;
    let count = (|| {
        d.opaque(NFS3_FHSIZE).ok()?;
        d.opaque_fixed(skip).ok()?;
        d.u32().ok()
    })();
    count.map_or(max, |c| (c as usize).min(max)) + ROOM_HEAD
}

// Beyond its count a READ's reply holds the record mark, the RPC reply
// header, READ3resok's head and the data's XDR padding; a READDIR's or
// READDIRPLUS's result is within its count (RFC 1813 §3.3.16, §3.3.17).
const _: () = assert!(ROOM_HEAD >= 4 + MAX_REPLY_HEADER + data::READ_HEAD + 3);

/// READ3args: file, offset, count.
fn read_room(server: &Server, d: &mut Dec<'_>) -> usize {
    room(server, d, 8)
}

/// READDIR3args: dir, cookie, cookieverf, count.
fn readdir_room(server: &Server, d: &mut Dec<'_>) -> usize {
    room(server, d, 8 + 8)
}

/// READDIRPLUS3args: dir, cookie, cookieverf, dircount, maxcount.
fn readdirplus_room(server: &Server, d: &mut Dec<'_>) -> usize {
    room(server, d, 8 + 8 + 4)
}

/// WRITE args: a handle, offset, count, then stable_how (RFC 1813 §3.3.7).
/// A stable WRITE waits for the disk: the blocking pool. An UNSTABLE one
/// up to `inline_write_max` is tried on the loop where its export's
/// backend can write there; a larger one up to `inline_write_alone_max`
/// too (`Route::Alone`), when nothing else of that loop is ready or
/// within `inline_large_writes_per_turn` (a loop copies a bounded number of
/// megabytes while its other connections wait); else the loop's pool.
/// `inline_write_max` 0 turns both off.
fn write_route(server: &Server, d: &mut Dec<'_>) -> Route {
    let args = d
        .opaque(NFS3_FHSIZE)
        .and_then(|fh| Ok((fh, d.u64()?, d.u32()?, d.u32()?)));
    let Ok((fh, _offset, count, stable)) = args else {
        return Route::Pool;
    };
    if stable != StableHow::Unstable as u32 {
        return Route::Blocking;
    }
    let on_loop = count > 0
        && server.inline_write_max > 0
        && server
            .export_of(fh)
            .is_some_and(|e| e.backend.changes_inline());
    match count {
        _ if !on_loop => Route::Pool,
        c if c <= server.inline_write_max => Route::Quick,
        c if c <= server.inline_write_alone_max => Route::Alone,
        _ => Route::Pool,
    }
}

/// The first argument of a namespace change or SETATTR is a handle (of the
/// directory, or of the object); on a `sync` export the change waits for
/// stable storage (the blocking pool, where its reply may wait without its
/// thread: `rnfsd_fs::owed`; on the loop it measured slower, its changes
/// meeting the directory's lock); on an `async` one it is tried on the
/// loop (`inline_changes`) where the backend can make it there, else it
/// goes to the loop's pool.
fn sync_route(server: &Server, d: &mut Dec<'_>) -> Route {
    let Some(e) = d
        .opaque(NFS3_FHSIZE)
        .ok()
        .and_then(|fh| server.export_of(fh))
    else {
        return Route::Pool;
    };
    if e.sync {
        Route::Blocking
    } else if server.inline_changes && e.backend.changes_inline() {
        Route::Quick
    } else {
        Route::Pool
    }
}
