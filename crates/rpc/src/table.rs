//! Declarative program tables, like knfsd's `nfsd_procedures3[]`: one row
//! per procedure, naming its handler and everything the layers below the
//! handler need to know of it without reading its arguments twice: where
//! it runs, how much reply room it reserves, how a reply cache keeps it,
//! and whether it takes AUTH_NONE.

use rnfsd_transport::Route;
use rnfsd_xdr::{Dec, Enc};

use crate::ctx::{CallCtx, ProcError, State};

/// Decodes the arguments, runs the procedure, encodes the result body into
/// the encoder (after the reply header dispatch wrote).
pub type ProcFn<S> = fn(&CallCtx<'_, S>, &mut Dec<'_>, &mut Enc) -> Result<(), ProcError>;

/// How a reply cache keeps this procedure's replies (knfsd's RC_NOCACHE /
/// RC_REPLBUFF), for the duplicate reply cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheClass {
    /// Idempotent: never cached.
    None,
    /// Non-idempotent with a reply worth keeping whole.
    Reply,
}

/// Where a call runs. Calls that may wait for the disk or stable storage run
/// in the blocking pool (when there is one, shared by every event loop), so
/// they never hold the workers that quick calls need (the XFS aio_fsync /
/// blk-mq thread: batch what waits, apart from what does not); calls that
/// usually answer from memory are first tried on the event loop thread
/// that read them (run to completion), and go to a pool only if they
/// would have to wait.
pub enum Class<S: State> {
    /// Read-only and usually answered from memory: tried on the loop thread.
    Quick,
    /// The loop's pool.
    Pool,
    /// May wait for the disk or stable storage: the blocking pool.
    Slow,
    /// Wherever the arguments say (read from their start; must be cheap:
    /// it runs on the event loop for every such record).
    By(fn(&S, &mut Dec<'_>) -> Route),
}

/// Reply room reserved against the transport's `max_buffered_bytes` while
/// the call runs.
pub enum Room<S: State> {
    /// A small reply: nothing reserved.
    Small,
    /// What the arguments ask for (READ's count), read from their start;
    /// must be cheap.
    By(fn(&S, &mut Dec<'_>) -> usize),
}

/// One procedure of one program version: a row of a table.
pub struct Proc<S: State> {
    pub name: &'static str,
    pub run: ProcFn<S>,
    pub cache: CacheClass,
    /// Upper bound on the encoded result body in bytes.
    pub max_reply: usize,
    pub class: Class<S>,
    pub room: Room<S>,
    /// Answered under AUTH_NONE whatever the policy (NULL pings, and
    /// services that are unauthenticated by design).
    pub auth_none: bool,
}

impl<S: State> Proc<S> {
    /// The same row, reserving `room` for its reply.
    pub const fn room(mut self, room: fn(&S, &mut Dec<'_>) -> usize) -> Self {
        self.room = Room::By(room);
        self
    }

    /// The same row, answered under AUTH_NONE whatever the policy.
    pub const fn auth_none(mut self) -> Self {
        self.auth_none = true;
        self
    }
}

pub struct Version<S: State> {
    pub vers: u32,
    /// Indexed by procedure number.
    pub procs: &'static [Proc<S>],
}

pub struct Program<S: State> {
    pub name: &'static str,
    pub prog: u32,
    pub versions: &'static [Version<S>],
}

/// A row found for a call: its program, version number and procedure.
pub struct Row<S: State> {
    pub program: &'static Program<S>,
    pub vers: u32,
    pub proc_: u32,
    pub proc: &'static Proc<S>,
}

impl<S: State> Clone for Row<S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S: State> Copy for Row<S> {}

/// Why no row answers a call (RFC 5531 accept_stat).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Miss {
    ProgUnavail,
    ProgMismatch { low: u32, high: u32 },
    ProcUnavail,
}

/// The programs one service answers, with every row numbered so that a
/// planned record carries its row's number to dispatch.
pub struct Programs<S: State> {
    programs: Vec<&'static Program<S>>,
    rows: Vec<Row<S>>,
    /// (prog, vers, first row): each version's rows are contiguous.
    versions: Vec<(u32, u32, usize)>,
}

impl<S: State> Programs<S> {
    pub fn new(programs: Vec<&'static Program<S>>) -> Self {
        let mut rows = Vec::new();
        let mut versions = Vec::new();
        for p in &programs {
            for v in p.versions {
                versions.push((p.prog, v.vers, rows.len()));
                for (i, proc) in v.procs.iter().enumerate() {
                    rows.push(Row {
                        program: p,
                        vers: v.vers,
                        proc_: i as u32,
                        proc,
                    });
                }
            }
        }
        // A row number travels in 32 bits of a plan's tag.
        debug_assert!(rows.len() < u32::MAX as usize);
        Programs {
            programs,
            rows,
            versions,
        }
    }

    pub fn list(&self) -> &[&'static Program<S>] {
        &self.programs
    }

    /// The row answering `prog`, `vers`, `proc_` and its number, or why
    /// there is none (the order of knfsd's `svc_process_common`: program,
    /// version, procedure).
    pub fn find(&self, prog: u32, vers: u32, proc_: u32) -> Result<(usize, Row<S>), Miss> {
        let Some(&(_, _, first)) = self
            .versions
            .iter()
            .find(|(p, v, _)| *p == prog && *v == vers)
        else {
            // A program's versions may come from several tables (NFSv3
            // and NFSv4 are separate ones): the range covers them all.
            let served = self.versions.iter().filter(|(p, _, _)| *p == prog);
            let (low, high) = served
                .fold(None, |r: Option<(u32, u32)>, (_, v, _)| {
                    Some(r.map_or((*v, *v), |(l, h)| (l.min(*v), h.max(*v))))
                })
                .ok_or(Miss::ProgUnavail)?;
            return Err(Miss::ProgMismatch { low, high });
        };
        let i = first + proc_ as usize;
        match self.rows.get(i) {
            Some(r) if r.program.prog == prog && r.vers == vers && r.proc_ == proc_ => Ok((i, *r)),
            _ => Err(Miss::ProcUnavail),
        }
    }

    /// Row `i` (a number `find` gave).
    pub fn row(&self, i: usize) -> Option<Row<S>> {
        self.rows.get(i).copied()
    }

    /// Where the call of row `r` runs, given its arguments `args`.
    pub fn route(&self, state: &S, r: Row<S>, args: &[u8]) -> Route {
        match r.proc.class {
            Class::Quick => Route::Quick,
            Class::Pool => Route::Pool,
            Class::Slow => Route::Blocking,
            Class::By(f) => f(state, &mut Dec::new(args)),
        }
    }

    /// The reply room row `r`'s call reserves, given its arguments.
    pub fn room(&self, state: &S, r: Row<S>, args: &[u8]) -> usize {
        match r.proc.room {
            Room::Small => 0,
            Room::By(f) => f(state, &mut Dec::new(args)),
        }
    }
}

/// Build a table row from an argument type, a handler and a result type:
/// decode (bounded; failure = GARBAGE_ARGS), run, encode.
///
/// `proc_entry!("GETATTR", GetAttrArgs, getattr, CacheClass::None, 200)`
/// where `fn getattr(ctx: &CallCtx<S>, args: GetAttrArgs) -> Result<R,
/// ProcError>` and `R: Xdr`; a sixth argument gives its [`Class`] (default
/// `Pool`). `raw` rows name a handler that decodes its own arguments and
/// encodes its own reply (READ and WRITE: their data is never copied).
/// Rows start with small reply room and without AUTH_NONE; `.room(f)` and
/// `.auth_none()` change that.
#[macro_export]
macro_rules! proc_entry {
    (raw $name:expr, $run:path, $cache:expr, $max:expr, $class:expr) => {
        $crate::Proc {
            name: $name,
            run: $run,
            cache: $cache,
            max_reply: $max,
            class: $class,
            room: $crate::Room::Small,
            auth_none: false,
        }
    };
    ($name:expr, $args:ty, $handler:path, $cache:expr, $max:expr) => {
        $crate::proc_entry!($name, $args, $handler, $cache, $max, $crate::Class::Pool)
    };
    ($name:expr, $args:ty, $handler:path, $cache:expr, $max:expr, $class:expr) => {
        $crate::Proc {
            name: $name,
            run: |ctx, dec, enc| {
                let args = <$args as $crate::xdr::Xdr>::decode(dec)
                    .map_err(|_| $crate::ProcError::GarbageArgs)?;
                let res = $handler(ctx, args)?;
                $crate::xdr::Xdr::encode(&res, enc);
                Ok(())
            },
            cache: $cache,
            max_reply: $max,
            class: $class,
            room: $crate::Room::Small,
            auth_none: false,
        }
    };
}
