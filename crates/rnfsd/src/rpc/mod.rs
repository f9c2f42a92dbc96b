//! The RPC layer (RFC 5531): call header, credentials, dispatch through
//! declarative program tables, and reply framing.

pub mod dispatch;

use std::cell::Cell;
use std::net::SocketAddr;

use rnfsd_transport::Spliced;

use rnfsd_xdr::{Dec, Enc};

use crate::state::Server;

/// The credential a call carried, after decoding (RFC 5531 §8.2, appendix A).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    None,
    Sys(rnfsd_proto::rpc::AuthSys),
}

/// Everything a procedure handler may look at besides its arguments.
pub struct CallCtx<'a> {
    pub xid: u32,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub auth: Auth,
    pub server: &'a Server,
    /// The event loop the call is tried on (memory only, or give up), or
    /// None on a thread that may sleep.
    pub on_loop: Option<&'a rnfsd_fs::inline::Loop>,
    /// The reply may leave later from another thread, so a change may owe
    /// its journal commit instead of waiting for it (a pool job's call).
    pub may_owe: bool,
    /// Set by a handler whose result ends in data waiting in a pipe (READ
    /// by splice): it follows the encoded result on the wire.
    pub spliced: Cell<Option<Spliced>>,
    /// Set by a handler whose call owes a journal commit
    /// (`rnfsd_fs::owed`): the commit, and the result body to answer
    /// instead should it fail.
    pub owed: Cell<Option<(rnfsd_fs::owed::Owed, Vec<u8>)>>,
}

impl CallCtx<'_> {
    /// The backend's view of this call, as `cred`.
    pub fn fs_call<'c>(&'c self, cred: &'c rnfsd_fs::Cred) -> rnfsd_fs::Call<'c> {
        match self.on_loop {
            Some(l) => rnfsd_fs::Call::on_loop(cred, l),
            None => rnfsd_fs::Call::thread(cred, self.may_owe),
        }
    }
}

/// An RPC-level failure a handler reports instead of a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcError {
    /// The arguments did not decode (RFC 5531 GARBAGE_ARGS).
    GarbageArgs,
    /// The server could not run the call (RFC 5531 SYSTEM_ERR).
    SystemErr,
    /// Send no reply at all (for example a duplicate still in progress).
    Drop,
    /// The credential is not acceptable for this call (AUTH_ERROR TOOWEAK).
    TooWeak,
    /// The program does not serve this procedure (RFC 5531 PROC_UNAVAIL).
    ProcUnavail,
}

/// Decodes the arguments from `args`, runs the procedure, encodes the result
/// body into `out` (after the reply header the dispatcher wrote).
pub type ProcFn = fn(&CallCtx<'_>, &mut Dec<'_>, &mut Enc) -> Result<(), ProcError>;

/// How a reply cache would keep this procedure's replies (knfsd's
/// RC_NOCACHE / RC_REPLSTAT / RC_REPLBUFF), for the duplicate reply cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheClass {
    /// Idempotent: never cached.
    None,
    /// Non-idempotent with a reply worth keeping whole.
    Reply,
}

/// Where a call runs. Calls that may wait for the disk or stable storage run
/// in the blocking pool (when there is one, shared by every event loop), so
/// they never hold the workers that quick calls need (seed 002); calls that
/// usually answer from memory are first tried on the event loop thread
/// that read them (run to completion), and go to the blocking pool only if
/// they would have to wait.
#[derive(Clone, Copy)]
pub enum Class {
    /// Read-only and usually answered from memory: tried on the loop thread.
    Quick,
    /// The loop's pool.
    Pool,
    /// May wait for the disk or stable storage (COMMIT, READDIR): the
    /// blocking pool.
    Slow,
    /// Wherever the arguments say: a change on a `sync` export in the
    /// blocking pool, on an `async` one tried on the loop thread
    /// (`inline_changes`) or else the loop's pool; a stable WRITE in the blocking
    /// pool, a small UNSTABLE one tried on the loop thread, a large one
    /// there when nothing else of the loop is ready or within
    /// `inline_large_writes_per_turn`. Must be cheap:
    /// it runs on the event loop for every such record.
    By(fn(&Server, &mut Dec<'_>) -> Route),
}

/// Where the call in a record goes (see [`Class`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Quick,
    /// Tried on the loop thread when nothing else of that loop is ready,
    /// or a bounded number of times a turn when something is (a large
    /// UNSTABLE WRITE), else the loop's pool.
    Alone,
    Pool,
    Blocking,
}

/// One procedure of one program version: the row of a declarative table,
/// like knfsd's `nfsd_procedures3[]`.
pub struct Proc {
    pub name: &'static str,
    pub run: ProcFn,
    pub cache: CacheClass,
    /// Upper bound on the encoded result body in bytes.
    pub max_reply: usize,
    pub class: Class,
}

/// Where the call in `record` runs (see [`Class`]). Anything that does not
/// decode goes to the pool: dispatch will refuse it there.
pub fn route(server: &Server, programs: &[&Program], record: &[u8]) -> Route {
    let mut d = Dec::new(record);
    let Ok(rnfsd_proto::rpc::Incoming::Call(h)) = rnfsd_proto::rpc::CallHeader::decode(&mut d)
    else {
        return Route::Pool;
    };
    let proc = programs
        .iter()
        .find(|p| p.prog == h.prog)
        .and_then(|p| p.versions.iter().find(|v| v.vers == h.vers))
        .and_then(|v| v.procs.get(h.proc_ as usize));
    match proc.map(|p| p.class) {
        None | Some(Class::Pool) => Route::Pool,
        Some(Class::Quick) => Route::Quick,
        Some(Class::Slow) => Route::Blocking,
        Some(Class::By(f)) => f(server, &mut d),
    }
}

pub struct Version {
    pub vers: u32,
    /// Indexed by procedure number.
    pub procs: &'static [Proc],
}

pub struct Program {
    pub name: &'static str,
    pub prog: u32,
    pub versions: &'static [Version],
}

/// Build a table row from an argument type, a handler and a result type:
/// decode (bounded; failure = GARBAGE_ARGS), run, encode.
///
/// `proc_entry!("GETATTR", GetAttrArgs, getattr, CacheClass::None, 200)`
/// where `fn getattr(ctx: &CallCtx, args: GetAttrArgs) -> Result<R, ProcError>`
/// and `R: Xdr`; a sixth argument gives its [`Class`] (default `Pool`).
#[macro_export]
macro_rules! proc_entry {
    // A handler that decodes its own arguments and encodes its own reply
    // (READ and WRITE: their data is never copied).
    (raw $name:expr, $run:path, $cache:expr, $max:expr, $class:expr) => {
        $crate::rpc::Proc {
            name: $name,
            run: $run,
            cache: $cache,
            max_reply: $max,
            class: $class,
        }
    };
    ($name:expr, $args:ty, $handler:path, $cache:expr, $max:expr) => {
        $crate::proc_entry!(
            $name,
            $args,
            $handler,
            $cache,
            $max,
            $crate::rpc::Class::Pool
        )
    };
    ($name:expr, $args:ty, $handler:path, $cache:expr, $max:expr, $class:expr) => {
        $crate::rpc::Proc {
            name: $name,
            run: |ctx, dec, enc| {
                let args = <$args as rnfsd_xdr::Xdr>::decode(dec)
                    .map_err(|_| $crate::rpc::ProcError::GarbageArgs)?;
                let res = $handler(ctx, args)?;
                rnfsd_xdr::Xdr::encode(&res, enc);
                Ok(())
            },
            cache: $cache,
            max_reply: $max,
            class: $class,
        }
    };
}
