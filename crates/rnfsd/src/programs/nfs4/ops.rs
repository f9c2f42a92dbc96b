//! The operation table (like knfsd's `nfsd4_ops[]`): one row per
//! operation we serve, with its handler and the filehandles it needs.
//! An operation of RFC 8881 without a row is answered NFS4ERR_NOTSUPP:
//! NFSv4.0's SETCLIENTID, SETCLIENTID_CONFIRM, RENEW, OPEN_CONFIRM and
//! RELEASE_LOCKOWNER (§18.1: not in 4.1), pNFS's LAYOUT* and
//! GETDEVICE* (no layouts), OPENATTR (no named attributes),
//! DELEGPURGE, WANT_DELEGATION, GET_DIR_DELEGATION (no delegations yet),
//! SET_SSV (no SSV state protection); of NFSv4.2's, COPY_NOTIFY (no
//! inter-server copy), IO_ADVISE, WRITE_SAME, LAYOUTERROR, LAYOUTSTATS.
//! NFSv4.2's rows (`v42`, and RFC 8276's extended attribute ones in
//! `xattr`) run in minor version 2 only: in 4.1 their numbers are ILLEGAL
//! (`compound::run_op`).
//!
//! Handlers come in two forms. A typed one takes its decoded arguments
//! and returns its result, which the row encodes. A raw one (GETATTR,
//! READ, READDIR, GETXATTR, LISTXATTRS) writes its result itself, so attribute values and
//! data go straight into the reply.

use rnfsd_proto::nfs4::*;
use rnfsd_xdr::{Enc, Xdr};

use super::compound::Compound;
use super::{attr, dir, fh, io, lock, open, session, setattr, v42, xattr};

/// The filehandles an operation needs (NFS4ERR_NOFILEHANDLE without).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Needs {
    Nothing,
    Cur,
    /// LINK and RENAME: the saved filehandle too.
    CurAndSaved,
}

/// What a row runs: writes the operation's result (opnum included) and
/// returns its status.
pub(super) type RunFn = fn(&mut Compound<'_, '_>, ArgOp<'_>, &mut Enc) -> Nfsstat4;

/// One row.
pub(super) struct Op {
    pub num: u32,
    pub name: &'static str,
    pub needs: Needs,
    pub run: RunFn,
}

/// A row whose arguments are another operation's: the driver never
/// routes one here, as rows are found by the arguments' own number.
fn misrouted(num: u32) -> Nfsstat4 {
    debug_assert!(false, "operation {num} routed to another's row");
    Nfsstat4::ServerFault
}

/// Arguments as a handler takes them: the large ones, boxed in `ArgOp`,
/// unboxed.
trait Unbox<T> {
    fn unbox(self) -> T;
}

impl<T> Unbox<T> for T {
    fn unbox(self) -> T {
        self
    }
}

impl<T> Unbox<T> for Box<T> {
    fn unbox(self) -> T {
        *self
    }
}

macro_rules! op {
    // Raw: the handler writes its opnum and result.
    ($num:ident, $name:literal, $needs:ident, raw $v:ident($h:path)) => {
        Op {
            num: $num,
            name: $name,
            needs: Needs::$needs,
            run: |c, a, e| match a {
                ArgOp::$v(a) => {
                    e.u32($num);
                    $h(c, a, e)
                }
                _ => misrouted($num),
            },
        }
    };
    // Typed, with arguments.
    ($num:ident, $name:literal, $needs:ident, $v:ident($h:path)) => {
        Op {
            num: $num,
            name: $name,
            needs: Needs::$needs,
            run: |c, a, e| match a {
                ArgOp::$v(a) => {
                    let r = ResOp::$v($h(c, Unbox::unbox(a)));
                    r.encode(e);
                    r.status()
                }
                _ => misrouted($num),
            },
        }
    };
    // Typed, without arguments.
    ($num:ident, $name:literal, $needs:ident, $v:ident $h:path) => {
        Op {
            num: $num,
            name: $name,
            needs: Needs::$needs,
            run: |c, a, e| match a {
                ArgOp::$v => {
                    let r = ResOp::$v($h(c));
                    r.encode(e);
                    r.status()
                }
                _ => misrouted($num),
            },
        }
    };
}

/// Every row, in opnum order.
pub(super) static OPS: &[Op] = &[
    op!(OP_ACCESS, "ACCESS", Cur, Access(attr::access)),
    op!(OP_CLOSE, "CLOSE", Cur, Close(open::close)),
    op!(OP_COMMIT, "COMMIT", Cur, Commit(io::commit)),
    op!(OP_CREATE, "CREATE", Cur, Create(dir::create)),
    op!(
        OP_DELEGRETURN,
        "DELEGRETURN",
        Cur,
        DelegReturn(open::delegreturn)
    ),
    op!(OP_GETATTR, "GETATTR", Cur, raw GetAttr(attr::getattr)),
    op!(OP_GETFH, "GETFH", Cur, GetFh fh::getfh),
    op!(OP_LINK, "LINK", CurAndSaved, Link(dir::link)),
    op!(OP_LOCK, "LOCK", Cur, Lock(lock::lock)),
    op!(OP_LOCKT, "LOCKT", Cur, LockT(lock::lockt)),
    op!(OP_LOCKU, "LOCKU", Cur, LockU(lock::locku)),
    op!(OP_LOOKUP, "LOOKUP", Cur, Lookup(fh::lookup)),
    op!(OP_LOOKUPP, "LOOKUPP", Cur, LookupP fh::lookupp),
    op!(OP_NVERIFY, "NVERIFY", Cur, NVerify(setattr::nverify)),
    op!(OP_OPEN, "OPEN", Cur, Open(open::open)),
    op!(
        OP_OPEN_DOWNGRADE,
        "OPEN_DOWNGRADE",
        Cur,
        OpenDowngrade(open::open_downgrade)
    ),
    op!(OP_PUTFH, "PUTFH", Nothing, PutFh(fh::putfh)),
    op!(OP_PUTPUBFH, "PUTPUBFH", Nothing, PutPubFh fh::putrootfh),
    op!(OP_PUTROOTFH, "PUTROOTFH", Nothing, PutRootFh fh::putrootfh),
    op!(OP_READ, "READ", Cur, raw Read(io::read)),
    op!(OP_READDIR, "READDIR", Cur, raw ReadDir(dir::readdir)),
    op!(OP_READLINK, "READLINK", Cur, ReadLink dir::readlink),
    op!(OP_REMOVE, "REMOVE", Cur, Remove(dir::remove)),
    op!(OP_RENAME, "RENAME", CurAndSaved, Rename(dir::rename)),
    op!(OP_RESTOREFH, "RESTOREFH", Nothing, RestoreFh fh::restorefh),
    op!(OP_SAVEFH, "SAVEFH", Cur, SaveFh fh::savefh),
    op!(OP_SECINFO, "SECINFO", Cur, SecInfo(fh::secinfo)),
    op!(OP_SETATTR, "SETATTR", Cur, SetAttr(setattr::setattr)),
    op!(OP_VERIFY, "VERIFY", Cur, Verify(setattr::verify)),
    op!(OP_WRITE, "WRITE", Cur, Write(io::write)),
    op!(
        OP_BACKCHANNEL_CTL,
        "BACKCHANNEL_CTL",
        Nothing,
        BackchannelCtl(session::backchannel_ctl)
    ),
    op!(
        OP_BIND_CONN_TO_SESSION,
        "BIND_CONN_TO_SESSION",
        Nothing,
        BindConnToSession(session::bind_conn)
    ),
    op!(
        OP_EXCHANGE_ID,
        "EXCHANGE_ID",
        Nothing,
        ExchangeId(session::exchange_id)
    ),
    op!(
        OP_CREATE_SESSION,
        "CREATE_SESSION",
        Nothing,
        CreateSession(session::create_session)
    ),
    op!(
        OP_DESTROY_SESSION,
        "DESTROY_SESSION",
        Nothing,
        DestroySession(session::destroy_session)
    ),
    op!(
        OP_FREE_STATEID,
        "FREE_STATEID",
        Nothing,
        FreeStateid(session::free_stateid)
    ),
    op!(
        OP_SECINFO_NO_NAME,
        "SECINFO_NO_NAME",
        Cur,
        SecInfoNoName(fh::secinfo_no_name)
    ),
    op!(
        OP_TEST_STATEID,
        "TEST_STATEID",
        Nothing,
        TestStateid(session::test_stateid)
    ),
    op!(
        OP_DESTROY_CLIENTID,
        "DESTROY_CLIENTID",
        Nothing,
        DestroyClientId(session::destroy_clientid)
    ),
    op!(
        OP_RECLAIM_COMPLETE,
        "RECLAIM_COMPLETE",
        Nothing,
        ReclaimComplete(session::reclaim_complete)
    ),
    // NFSv4.2 (RFC 7862 §15).
    op!(OP_ALLOCATE, "ALLOCATE", Cur, Allocate(v42::allocate)),
    op!(OP_COPY, "COPY", CurAndSaved, Copy(v42::copy)),
    op!(
        OP_DEALLOCATE,
        "DEALLOCATE",
        Cur,
        Deallocate(v42::deallocate)
    ),
    op!(
        OP_OFFLOAD_CANCEL,
        "OFFLOAD_CANCEL",
        Cur,
        OffloadCancel(v42::offload_cancel)
    ),
    op!(
        OP_OFFLOAD_STATUS,
        "OFFLOAD_STATUS",
        Cur,
        OffloadStatus(v42::offload_status)
    ),
    op!(OP_READ_PLUS, "READ_PLUS", Cur, raw ReadPlus(v42::read_plus)),
    op!(OP_SEEK, "SEEK", Cur, Seek(v42::seek)),
    op!(OP_CLONE, "CLONE", CurAndSaved, Clone(v42::clone)),
    // RFC 8276 §8.4.
    op!(OP_GETXATTR, "GETXATTR", Cur, raw GetXattr(xattr::getxattr)),
    op!(OP_SETXATTR, "SETXATTR", Cur, SetXattr(xattr::setxattr)),
    op!(OP_LISTXATTRS, "LISTXATTRS", Cur, raw ListXattrs(xattr::listxattrs)),
    op!(
        OP_REMOVEXATTR,
        "REMOVEXATTR",
        Cur,
        RemoveXattr(xattr::removexattr)
    ),
];

/// Rows by opnum (filled from `OPS` at first use).
static BY_NUM: std::sync::OnceLock<[Option<u8>; LAST_OP as usize + 1]> = std::sync::OnceLock::new();

/// The highest opnum counted: NFSv4.2's last (RFC 8276's REMOVEXATTR).
const LAST_OP: u32 = OP_REMOVEXATTR;

/// The row of operation `opnum`.
pub(super) fn row(opnum: u32) -> Option<&'static Op> {
    let by = BY_NUM.get_or_init(|| {
        let mut t = [None; LAST_OP as usize + 1];
        for (i, op) in OPS.iter().enumerate() {
            debug_assert!(op.num <= LAST_OP && t[op.num as usize].is_none());
            t[op.num as usize] = Some(i as u8);
        }
        t
    });
    let i = (*by.get(opnum as usize)?)?;
    OPS.get(i as usize)
}

/// Where per-operation counts are kept in the statistics registry: a
/// program number of the transient range (never served on the wire),
/// named `nfs4_op`, version 1 (the minor version), one row per
/// operation with row `opnum - FIRST_OP`.
pub const OPS_STATS_PROG: u32 = 0x4000_0003;
pub const OPS_STATS_VERS: u32 = 1;
const FIRST_OP: u32 = OP_ACCESS;

/// The statistics rows of every NFSv4.1 and NFSv4.2 operation (RFC 8881
/// §18, RFC 7862 §15, RFC 8276 §8).
pub fn op_descs() -> Vec<rnfsd_stats::ProcDesc> {
    ALL_NAMES
        .iter()
        .map(|&(num, name)| rnfsd_stats::ProcDesc {
            program: "nfs4_op",
            prog: OPS_STATS_PROG,
            vers: OPS_STATS_VERS,
            proc_: num - FIRST_OP,
            name,
        })
        .collect()
}

/// The statistics row of operation `opnum`.
pub(super) fn stats_row(opnum: u32) -> u32 {
    opnum.wrapping_sub(FIRST_OP)
}

/// Every NFSv4.1 and NFSv4.2 operation's number and name.
const ALL_NAMES: &[(u32, &str)] = &[
    (OP_ACCESS, "ACCESS"),
    (OP_CLOSE, "CLOSE"),
    (OP_COMMIT, "COMMIT"),
    (OP_CREATE, "CREATE"),
    (OP_DELEGPURGE, "DELEGPURGE"),
    (OP_DELEGRETURN, "DELEGRETURN"),
    (OP_GETATTR, "GETATTR"),
    (OP_GETFH, "GETFH"),
    (OP_LINK, "LINK"),
    (OP_LOCK, "LOCK"),
    (OP_LOCKT, "LOCKT"),
    (OP_LOCKU, "LOCKU"),
    (OP_LOOKUP, "LOOKUP"),
    (OP_LOOKUPP, "LOOKUPP"),
    (OP_NVERIFY, "NVERIFY"),
    (OP_OPEN, "OPEN"),
    (OP_OPENATTR, "OPENATTR"),
    (OP_OPEN_CONFIRM, "OPEN_CONFIRM"),
    (OP_OPEN_DOWNGRADE, "OPEN_DOWNGRADE"),
    (OP_PUTFH, "PUTFH"),
    (OP_PUTPUBFH, "PUTPUBFH"),
    (OP_PUTROOTFH, "PUTROOTFH"),
    (OP_READ, "READ"),
    (OP_READDIR, "READDIR"),
    (OP_READLINK, "READLINK"),
    (OP_REMOVE, "REMOVE"),
    (OP_RENAME, "RENAME"),
    (OP_RENEW, "RENEW"),
    (OP_RESTOREFH, "RESTOREFH"),
    (OP_SAVEFH, "SAVEFH"),
    (OP_SECINFO, "SECINFO"),
    (OP_SETATTR, "SETATTR"),
    (OP_SETCLIENTID, "SETCLIENTID"),
    (OP_SETCLIENTID_CONFIRM, "SETCLIENTID_CONFIRM"),
    (OP_VERIFY, "VERIFY"),
    (OP_WRITE, "WRITE"),
    (OP_RELEASE_LOCKOWNER, "RELEASE_LOCKOWNER"),
    (OP_BACKCHANNEL_CTL, "BACKCHANNEL_CTL"),
    (OP_BIND_CONN_TO_SESSION, "BIND_CONN_TO_SESSION"),
    (OP_EXCHANGE_ID, "EXCHANGE_ID"),
    (OP_CREATE_SESSION, "CREATE_SESSION"),
    (OP_DESTROY_SESSION, "DESTROY_SESSION"),
    (OP_FREE_STATEID, "FREE_STATEID"),
    (OP_GET_DIR_DELEGATION, "GET_DIR_DELEGATION"),
    (OP_GETDEVICEINFO, "GETDEVICEINFO"),
    (OP_GETDEVICELIST, "GETDEVICELIST"),
    (OP_LAYOUTCOMMIT, "LAYOUTCOMMIT"),
    (OP_LAYOUTGET, "LAYOUTGET"),
    (OP_LAYOUTRETURN, "LAYOUTRETURN"),
    (OP_SECINFO_NO_NAME, "SECINFO_NO_NAME"),
    (OP_SEQUENCE, "SEQUENCE"),
    (OP_SET_SSV, "SET_SSV"),
    (OP_TEST_STATEID, "TEST_STATEID"),
    (OP_WANT_DELEGATION, "WANT_DELEGATION"),
    (OP_DESTROY_CLIENTID, "DESTROY_CLIENTID"),
    (OP_RECLAIM_COMPLETE, "RECLAIM_COMPLETE"),
    (OP_ALLOCATE, "ALLOCATE"),
    (OP_COPY, "COPY"),
    (OP_COPY_NOTIFY, "COPY_NOTIFY"),
    (OP_DEALLOCATE, "DEALLOCATE"),
    (OP_IO_ADVISE, "IO_ADVISE"),
    (OP_LAYOUTERROR, "LAYOUTERROR"),
    (OP_LAYOUTSTATS, "LAYOUTSTATS"),
    (OP_OFFLOAD_CANCEL, "OFFLOAD_CANCEL"),
    (OP_OFFLOAD_STATUS, "OFFLOAD_STATUS"),
    (OP_READ_PLUS, "READ_PLUS"),
    (OP_SEEK, "SEEK"),
    (OP_WRITE_SAME, "WRITE_SAME"),
    (OP_CLONE, "CLONE"),
    (OP_GETXATTR, "GETXATTR"),
    (OP_SETXATTR, "SETXATTR"),
    (OP_LISTXATTRS, "LISTXATTRS"),
    (OP_REMOVEXATTR, "REMOVEXATTR"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_found_by_its_number_and_named_once() {
        for op in OPS {
            let r = row(op.num).expect("row");
            assert_eq!((r.num, r.name), (op.num, op.name));
            assert!(ALL_NAMES.contains(&(op.num, op.name)), "{}", op.name);
        }
        assert!(row(OP_SETCLIENTID).is_none());
        assert!(row(OP_SEQUENCE).is_none(), "SEQUENCE is the driver's");
        assert!(row(9999).is_none());
        let mut nums: Vec<u32> = ALL_NAMES.iter().map(|n| n.0).collect();
        nums.dedup();
        assert_eq!(nums.len(), ALL_NAMES.len());
        assert_eq!(nums, (3..=LAST_OP).collect::<Vec<_>>());
    }
}
