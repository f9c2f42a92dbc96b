//! NFSv4.1 client (RFC 8881): program 100003 version 4, COMPOUND only.
//!
//! Two layers:
//! - [`Nfs4Rpc`]: COMPOUNDs as given, no session: for EXCHANGE_ID and
//!   CREATE_SESSION, and for tests that send what a real client would not
//!   (no SEQUENCE, another minor version, raw bytes).
//! - [`Nfs4Client`]: a client ID and a session (EXCHANGE_ID,
//!   CREATE_SESSION, RECLAIM_COMPLETE on `connect`). [`Nfs4Client::compound`]
//!   puts SEQUENCE first on a slot of the session's slot table;
//!   [`Nfs4Client::compound_on`] sends on a slot and sequence id the caller
//!   chooses, for reply-cache tests. The helpers in `calls` (lookup, open,
//!   read, ...) build the usual compounds and turn a failure into
//!   [`ClientError::Nfs4`].
//!
//! With [`Nfs4Config::back_channel`] the session asks for a back channel on
//! the connection that created it (CREATE_SESSION4_FLAG_CONN_BACK_CHAN) and
//! that connection answers the server's CB_NULL and CB_COMPOUND calls
//! (`callback`).
//!
//! Every reply is decoded with bounds: at most as many results as
//! operations sent, tags of at most NFS4_OPAQUE_LIMIT bytes, and the
//! proto crate's bounds inside each result.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// The wire types (`rnfsd_proto::nfs4`), so one import serves both.
pub use rnfsd_proto::nfs4::*;
use rnfsd_proto::rpc::AuthSys;
use rnfsd_xdr::{Dec, Enc};

use crate::client::Client;
use crate::conn::{CallHandler, ClientConfig, RpcConnection};
use crate::error::ClientError;

mod attrs;
mod callback;
mod calls;
mod calls42;
mod prepared;
mod slots;

pub use attrs::{
    check_vals, common_mask, decodable, AttrLayout, AttrVal, Attrs4, SetAttrs4, COMMON_ATTRS,
};
pub use callback::{CbEvent, CB_LOG_LEN, CB_MAX_MSG, CB_MAX_OPS, CB_SLOTS};
pub use calls::{
    OpenArgs, OpenHow, Opened, DEFAULT_DIR_COUNT, DEFAULT_DIR_MAXCOUNT, DEFAULT_IO_SIZE,
};
pub use prepared::{check_compound_res, check_prepared_res, PreparedOps, ReplyCheck};
pub use slots::{Slot, MAX_SLOTS};

/// Fore-channel slots asked for by default (the server may grant fewer).
pub const DEFAULT_SLOTS: u32 = 64;
/// Operations per COMPOUND asked for by default (ca_maxoperations).
pub const DEFAULT_MAX_OPS: u32 = 64;
/// Largest request and reply asked for by default: a 1 MiB WRITE or READ
/// with its compound around it.
pub const DEFAULT_MAX_MSG: u32 = (1 << 20) + 64 * 1024;
/// Largest reply the server is asked to keep in its reply cache
/// (ca_maxresponsesize_cached).
pub const DEFAULT_MAX_CACHED: u32 = 64 * 1024;
/// The callback program number offered by default (RFC 5662's transient
/// placeholder; any number the client serves would do).
pub const DEFAULT_CB_PROGRAM: u32 = cb::NFS4_CALLBACK;
/// Tag sent with every COMPOUND by default.
pub const DEFAULT_TAG: &[u8] = b"rnfsd-client";

/// How [`Nfs4Client::connect`] sets up its client ID and session. Start
/// from `Default` and change fields.
#[derive(Debug, Clone)]
pub struct Nfs4Config {
    /// client_owner4's co_ownerid; `None` makes one unique to this call
    /// (process id, time, a counter), so each connect is a new client.
    pub owner: Option<Vec<u8>>,
    /// client_owner4's co_verifier; `None`: this process's start time.
    pub verifier: Option<Verifier4>,
    /// EXCHANGE_ID's eia_flags.
    pub exchange_flags: u32,
    /// Fore channel: ca_maxrequests (slots), clamped to 1..=[`MAX_SLOTS`].
    pub slots: u32,
    pub max_ops: u32,
    pub max_request: u32,
    pub max_response: u32,
    pub max_response_cached: u32,
    /// Ask for a back channel on the session's first connection and answer
    /// the callbacks that come over it.
    pub back_channel: bool,
    /// csa_cb_program.
    pub cb_program: u32,
    /// Send RECLAIM_COMPLETE after CREATE_SESSION (RFC 8881 §18.51: a new
    /// client must, before it may open).
    pub reclaim_complete: bool,
    /// SEQUENCE's sa_cachethis on [`Nfs4Client::compound`] calls.
    pub cachethis: bool,
    /// COMPOUND tag.
    pub tag: Vec<u8>,
    /// The minor version of the session's compounds (SEQUENCE and what
    /// follows): 1, or 2 for NFSv4.2's operations. EXCHANGE_ID and
    /// CREATE_SESSION are sent as 4.1's (a server of both takes either).
    pub minor: u32,
}

impl Default for Nfs4Config {
    fn default() -> Self {
        Nfs4Config {
            owner: None,
            verifier: None,
            exchange_flags: 0,
            slots: DEFAULT_SLOTS,
            max_ops: DEFAULT_MAX_OPS,
            max_request: DEFAULT_MAX_MSG,
            max_response: DEFAULT_MAX_MSG,
            max_response_cached: DEFAULT_MAX_CACHED,
            back_channel: false,
            cb_program: DEFAULT_CB_PROGRAM,
            reclaim_complete: true,
            cachethis: false,
            tag: DEFAULT_TAG.to_vec(),
            minor: NFS4_MINOR_VERSION_1,
        }
    }
}

/// An owner id no other connect of this process (or, very likely, of any
/// other) uses.
fn unique_owner() -> Vec<u8> {
    static N: AtomicU32 = AtomicU32::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "rnfsd-client/{}/{t}/{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
    .into_bytes()
}

/// This process's boot verifier: the same for every connect, so a server
/// sees one client instance per owner.
fn process_verifier() -> Verifier4 {
    static V: std::sync::OnceLock<Verifier4> = std::sync::OnceLock::new();
    *V.get_or_init(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Verifier4((t ^ u64::from(std::process::id()) << 48).to_be_bytes())
    })
}

/// Decode COMPOUND4res from `body`: at most `nops` results (what was
/// sent), nothing after them.
pub fn decode_compound_res(body: &[u8], nops: usize) -> Result<CompoundRes, ClientError> {
    let mut d = Dec::new(body);
    let r = CompoundRes::decode(&mut d, NFS4_OPAQUE_LIMIT, nops)?;
    d.finish()?;
    Ok(r)
}

/// `Ok` when the COMPOUND's status is NFS4_OK, else
/// [`ClientError::Nfs4`] naming the operation that failed (the last
/// result, RFC 8881 §16.2.3).
pub fn check4(res: &CompoundRes) -> Result<(), ClientError> {
    if res.status == Nfsstat4::Ok {
        return Ok(());
    }
    Err(ClientError::Nfs4 {
        op: res.results.last().map(|r| r.opnum()).unwrap_or(0),
        status: res.status,
    })
}

/// NFSv4 COMPOUNDs over a [`Client`], with no session of their own.
#[derive(Clone, Debug)]
pub struct Nfs4Rpc {
    client: Client,
    tag: Arc<[u8]>,
}

impl Nfs4Rpc {
    pub fn new(client: Client) -> Self {
        Nfs4Rpc {
            client,
            tag: Arc::from(DEFAULT_TAG),
        }
    }

    pub async fn connect(addr: SocketAddr, cfg: &ClientConfig) -> Result<Self, ClientError> {
        Ok(Self::new(Client::connect(addr, cfg).await?))
    }

    /// The same connections, sending `tag` on every COMPOUND.
    pub fn with_tag(&self, tag: &[u8]) -> Self {
        Nfs4Rpc {
            client: self.client.clone(),
            tag: Arc::from(tag),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn tag(&self) -> &[u8] {
        &self.tag
    }

    /// NFSPROC4_NULL.
    pub async fn null(&self) -> Result<(), ClientError> {
        self.client
            .call(NFS4_PROGRAM, NFS_V4, NFSPROC4_NULL, &())
            .await
    }

    /// The connection session set-up goes over (and a back channel, if
    /// any, lives on): the client's first.
    fn first(&self) -> Result<&RpcConnection, ClientError> {
        self.client
            .connections()
            .first()
            .ok_or_else(|| ClientError::Disconnected("client has no connections".into()))
    }

    /// COMPOUND of `ops` exactly as given (no SEQUENCE added) with
    /// `minorversion`, on the next connection.
    pub async fn compound(
        &self,
        minorversion: u32,
        ops: &[ArgOp<'_>],
    ) -> Result<CompoundRes, ClientError> {
        let conn = self.client.pick()?;
        self.compound_via(conn, minorversion, ops).await
    }

    /// [`Self::compound`] on the first connection.
    pub async fn compound_first(
        &self,
        minorversion: u32,
        ops: &[ArgOp<'_>],
    ) -> Result<CompoundRes, ClientError> {
        self.compound_via(self.first()?, minorversion, ops).await
    }

    /// [`Self::compound`] on connection `conn`.
    pub async fn compound_via(
        &self,
        conn: &RpcConnection,
        minorversion: u32,
        ops: &[ArgOp<'_>],
    ) -> Result<CompoundRes, ClientError> {
        let (rec, off) = conn
            .call_encoded_rec_with(
                self.client.auth(),
                self.client.timeout(),
                NFS4_PROGRAM,
                NFS_V4,
                NFSPROC4_COMPOUND,
                |e| encode_compound(e, &self.tag, minorversion, ops),
            )
            .await?;
        decode_compound_res(rec.get(off..).unwrap_or(&[]), ops.len())
    }

    /// COMPOUND with argument bytes sent verbatim (COMPOUND4args or
    /// anything else); returns the result bytes undecoded.
    pub async fn compound_bytes(&self, args: &[u8]) -> Result<Vec<u8>, ClientError> {
        self.client
            .call_raw(NFS4_PROGRAM, NFS_V4, NFSPROC4_COMPOUND, args)
            .await
    }

    /// EXCHANGE_ID alone (RFC 8881 §18.35), on the first connection.
    pub async fn exchange_id(
        &self,
        args: &ExchangeId4Args,
    ) -> Result<ExchangeId4ResOk, ClientError> {
        let r = self
            .compound_first(
                NFS4_MINOR_VERSION_1,
                &[ArgOp::ExchangeId(Box::new(args.clone()))],
            )
            .await?;
        check4(&r)?;
        match r.results.into_iter().next() {
            Some(ResOp::ExchangeId(NfsRes4::Ok(ok))) => Ok(ok),
            other => Err(unexpected("EXCHANGE_ID", other.as_ref())),
        }
    }

    /// CREATE_SESSION alone (RFC 8881 §18.36), on the first connection.
    pub async fn create_session(
        &self,
        args: &CreateSession4Args,
    ) -> Result<CreateSession4ResOk, ClientError> {
        let r = self
            .compound_first(
                NFS4_MINOR_VERSION_1,
                &[ArgOp::CreateSession(Box::new(args.clone()))],
            )
            .await?;
        check4(&r)?;
        match r.results.into_iter().next() {
            Some(ResOp::CreateSession(NfsRes4::Ok(ok))) => Ok(ok),
            other => Err(unexpected("CREATE_SESSION", other.as_ref())),
        }
    }
}

/// A reply whose results are not what the operations sent call for.
pub(crate) fn unexpected(what: &str, got: Option<&ResOp>) -> ClientError {
    match got {
        Some(r) => ClientError::Protocol(format!(
            "{what}: unexpected result for op {} ({})",
            r.opnum(),
            r.status()
        )),
        None => ClientError::Protocol(format!("{what}: result missing")),
    }
}

/// What CREATE_SESSION established.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionInfo {
    pub clientid: u64,
    pub sessionid: SessionId4,
    /// csr_flags.
    pub flags: u32,
    /// The channel attributes the server granted.
    pub fore: ChannelAttrs4,
    pub back: ChannelAttrs4,
}

struct Session {
    info: SessionInfo,
    exchange: ExchangeId4ResOk,
    slots: Arc<slots::SlotTable>,
    cb: Option<Arc<callback::CbState>>,
    cachethis: bool,
    /// sr_status_flags of the last SEQUENCE that succeeded.
    status_flags: AtomicU32,
    /// The owner bytes OPEN uses unless told otherwise.
    open_owner: Vec<u8>,
}

/// An NFSv4.1 client with one session. Cheap to clone: clones share the
/// connections and the session.
#[derive(Clone)]
pub struct Nfs4Client {
    rpc: Nfs4Rpc,
    session: Arc<Session>,
    rsize: u32,
    wsize: u32,
    /// The minor version of session compounds (1; 2 for NFSv4.2's
    /// operations: `with_minor`).
    minor: u32,
}

impl std::fmt::Debug for Nfs4Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nfs4Client")
            .field("rpc", &self.rpc)
            .field("session", &self.session.info)
            .finish()
    }
}

impl Nfs4Client {
    /// Connect (`cfg.connections` connections) and set up a session.
    pub async fn connect(
        addr: SocketAddr,
        cfg: &ClientConfig,
        v4: &Nfs4Config,
    ) -> Result<Self, ClientError> {
        Self::establish(Client::connect(addr, cfg).await?, v4).await
    }

    /// Set up a client ID and session over `client`'s connections:
    /// EXCHANGE_ID and CREATE_SESSION on the first (which carries the back
    /// channel, if asked for), then RECLAIM_COMPLETE if configured.
    pub async fn establish(client: Client, v4: &Nfs4Config) -> Result<Self, ClientError> {
        let rpc = Nfs4Rpc::new(client).with_tag(&v4.tag);
        let owner = v4.owner.clone().unwrap_or_else(unique_owner);
        let exchange = rpc
            .exchange_id(&ExchangeId4Args {
                clientowner: ClientOwner4 {
                    verifier: v4.verifier.unwrap_or_else(process_verifier),
                    ownerid: Opaque1024(owner.clone()),
                },
                flags: v4.exchange_flags,
                state_protect: StateProtect4A::None,
                client_impl_id: None,
            })
            .await?;
        let cb = v4
            .back_channel
            .then(|| callback::CbState::new(v4.cb_program));
        let first = rpc.first()?.clone();
        if let Some(cb) = &cb {
            // Installed before CREATE_SESSION: the server may call as soon
            // as the session exists.
            let state = cb.clone();
            let h: CallHandler = Arc::new(move |rec: &[u8]| state.handle(rec));
            first.set_call_handler(Some(h));
        }
        let slots = v4.slots.clamp(1, MAX_SLOTS);
        let fore = ChannelAttrs4 {
            headerpadsize: 0,
            maxrequestsize: v4.max_request,
            maxresponsesize: v4.max_response,
            maxresponsesize_cached: v4.max_response_cached,
            maxoperations: v4.max_ops,
            maxrequests: slots,
            rdma_ird: None,
        };
        let back = ChannelAttrs4 {
            headerpadsize: 0,
            maxrequestsize: CB_MAX_MSG,
            maxresponsesize: CB_MAX_MSG,
            maxresponsesize_cached: CB_MAX_MSG,
            maxoperations: CB_MAX_OPS,
            maxrequests: CB_SLOTS,
            rdma_ird: None,
        };
        let created = rpc
            .create_session(&CreateSession4Args {
                clientid: exchange.clientid,
                sequence: exchange.sequenceid,
                flags: if v4.back_channel {
                    CREATE_SESSION4_FLAG_CONN_BACK_CHAN
                } else {
                    0
                },
                fore_chan_attrs: fore,
                back_chan_attrs: back,
                cb_program: v4.cb_program,
                sec_parms: vec![CallbackSecParms4::Sys(AuthSys {
                    stamp: 0,
                    machine_name: b"rnfsd-client".to_vec(),
                    uid: 0,
                    gid: 0,
                    gids: Vec::new(),
                })],
            })
            .await;
        let created = match created {
            Ok(c) => c,
            Err(e) => {
                first.set_call_handler(None);
                return Err(e);
            }
        };
        if let Some(cb) = &cb {
            cb.set_session(created.sessionid, created.back_chan_attrs.maxrequests);
        }
        // Never more slots than asked for, whatever the server says.
        let granted = created.fore_chan_attrs.maxrequests.clamp(1, slots);
        let mut open_owner = b"open:".to_vec();
        open_owner.extend_from_slice(&owner);
        open_owner.truncate(NFS4_OPAQUE_LIMIT);
        let c = Nfs4Client {
            rpc,
            session: Arc::new(Session {
                info: SessionInfo {
                    clientid: exchange.clientid,
                    sessionid: created.sessionid,
                    flags: created.flags,
                    fore: created.fore_chan_attrs,
                    back: created.back_chan_attrs,
                },
                exchange,
                slots: slots::SlotTable::new(granted),
                cb,
                cachethis: v4.cachethis,
                status_flags: AtomicU32::new(0),
                open_owner,
            }),
            rsize: calls::DEFAULT_IO_SIZE,
            wsize: calls::DEFAULT_IO_SIZE,
            minor: v4.minor,
        };
        if v4.reclaim_complete {
            c.reclaim_complete(false).await?;
        }
        Ok(c)
    }

    pub fn rpc(&self) -> &Nfs4Rpc {
        &self.rpc
    }

    pub fn client(&self) -> &Client {
        self.rpc.client()
    }

    pub fn session(&self) -> &SessionInfo {
        &self.session.info
    }

    pub fn sessionid(&self) -> SessionId4 {
        self.session.info.sessionid
    }

    pub fn clientid(&self) -> u64 {
        self.session.info.clientid
    }

    /// What EXCHANGE_ID returned.
    pub fn exchange(&self) -> &ExchangeId4ResOk {
        &self.session.exchange
    }

    /// Slots in use by this client (what the server granted, at most what
    /// was asked for).
    pub fn slot_count(&self) -> usize {
        self.session.slots.len()
    }

    /// sr_target_highest_slotid of the last successful SEQUENCE.
    pub fn target_highest_slotid(&self) -> u32 {
        self.session.slots.target_highest()
    }

    /// sr_status_flags of the last successful SEQUENCE.
    pub fn status_flags(&self) -> u32 {
        self.session.status_flags.load(Ordering::Relaxed)
    }

    /// The callbacks received so far (at most [`CB_LOG_LEN`], oldest
    /// first); empty without a back channel.
    pub fn callbacks(&self) -> Vec<CbEvent> {
        self.session
            .cb
            .as_ref()
            .map(|c| c.events())
            .unwrap_or_default()
    }

    /// The CB_RECALLs received so far (from the log of
    /// [`callbacks`](Self::callbacks)), oldest first.
    pub fn recalls(&self) -> Vec<cb::CbRecall4Args> {
        self.callbacks()
            .into_iter()
            .flat_map(|e| match e {
                CbEvent::Compound { ops, .. } => ops,
                _ => Vec::new(),
            })
            .filter_map(|o| match o {
                cb::CbArgOp::Recall(r) => Some(r),
                _ => None,
            })
            .collect()
    }

    /// The CB_OFFLOADs received and acknowledged so far (RFC 7862 §16.1),
    /// oldest first.
    pub fn offloads(&self) -> Vec<cb::CbOffload4Args> {
        self.callbacks()
            .into_iter()
            .flat_map(|e| match e {
                CbEvent::Compound {
                    ops,
                    status: Nfsstat4::Ok,
                } => ops,
                _ => Vec::new(),
            })
            .filter_map(|o| match o {
                cb::CbArgOp::Offload(r) => Some(r),
                _ => None,
            })
            .collect()
    }

    /// Leave CB_RECALLs unanswered (`true`), as a client that went silent,
    /// or answer them again (`false`).
    pub fn ignore_recalls(&self, on: bool) {
        if let Some(c) = &self.session.cb {
            c.set_ignore_recalls(on);
        }
    }

    /// What CB_GETATTR answers from now on (§20.1): the file's `size`
    /// and `change` as this client, holding a write delegation, sees
    /// them; None: NFS4ERR_BADHANDLE (the default).
    pub fn answer_cb_getattr(&self, a: Option<(u64, u64)>) {
        if let Some(c) = &self.session.cb {
            c.set_getattr(a);
        }
    }

    /// Leave CB_GETATTRs unanswered (`true`), as a client that went
    /// silent, or answer them again (`false`).
    pub fn ignore_cb_getattrs(&self, on: bool) {
        if let Some(c) = &self.session.cb {
            c.set_ignore_getattrs(on);
        }
    }

    /// Answers every CB_RECALL (received so far and from now on) by
    /// returning the delegation (DELEGRETURN), as a client holding no
    /// dirty data does: a task checking every `every` until aborted.
    pub fn return_on_recall(&self, every: std::time::Duration) -> tokio::task::JoinHandle<()> {
        let c = self.clone();
        tokio::spawn(async move {
            let mut done = 0;
            loop {
                let r = c.recalls();
                for rec in r.iter().skip(done) {
                    // A failure (already returned, revoked) leaves nothing
                    // to return.
                    let _ = c.delegreturn(&rec.fh, &rec.stateid).await;
                }
                done = r.len();
                tokio::time::sleep(every).await;
            }
        })
    }

    /// Calls received on the back channel, answered or not.
    pub fn callback_calls(&self) -> u64 {
        self.session.cb.as_ref().map(|c| c.calls()).unwrap_or(0)
    }

    /// The open owner OPEN uses by default.
    pub fn open_owner(&self) -> OpenOwner4 {
        StateOwner4 {
            clientid: self.clientid(),
            owner: Opaque1024(self.session.open_owner.clone()),
        }
    }

    /// READ/WRITE chunk sizes for `read_all` / `write_all`, each clamped
    /// to 1..=`MAX_DATA`.
    pub fn with_io_size(&self, rsize: u32, wsize: u32) -> Self {
        let clamp = |v: u32| v.clamp(1, MAX_DATA as u32);
        Nfs4Client {
            rsize: clamp(rsize),
            wsize: clamp(wsize),
            ..self.clone()
        }
    }

    /// The same session, its compounds sent with minor version `minor`
    /// (the session is the client's whatever the minor version: RFC 7862
    /// §2 keeps 4.1's sessions for 4.2).
    pub fn with_minor(&self, minor: u32) -> Self {
        Nfs4Client {
            minor,
            ..self.clone()
        }
    }

    /// The minor version of session compounds.
    pub fn minor(&self) -> u32 {
        self.minor
    }

    /// Take a slot for [`Self::compound_on`]; waits while all are busy.
    pub async fn slot(&self) -> Result<Slot, ClientError> {
        self.session.slots.acquire().await
    }

    /// SEQUENCE then `ops`, on a free slot with its next sequence id. The
    /// result includes SEQUENCE's (first). RPC-level failures are `Err`;
    /// NFS statuses are in the result (see [`check4`]).
    pub async fn compound(&self, ops: &[ArgOp<'_>]) -> Result<CompoundRes, ClientError> {
        let mut slot = self.slot().await?;
        let seqid = slot.next_seqid();
        self.compound_on(&mut slot, seqid, self.session.cachethis, ops)
            .await
    }

    /// SEQUENCE on `slot` with `seqid` (the slot's next for a new request,
    /// its current one to retry the last: RFC 8881 §2.10.6.2), then `ops`,
    /// on the next connection. When SEQUENCE succeeds the slot takes
    /// `seqid`; when no reply decodes the slot is retired once dropped.
    pub async fn compound_on(
        &self,
        slot: &mut Slot,
        seqid: u32,
        cachethis: bool,
        ops: &[ArgOp<'_>],
    ) -> Result<CompoundRes, ClientError> {
        let conn = self.rpc.client.pick()?;
        self.compound_on_via(conn, slot, seqid, cachethis, ops)
            .await
    }

    /// [`Self::compound_on`] over connection `conn`.
    pub async fn compound_on_via(
        &self,
        conn: &RpcConnection,
        slot: &mut Slot,
        seqid: u32,
        cachethis: bool,
        ops: &[ArgOp<'_>],
    ) -> Result<CompoundRes, ClientError> {
        let nops = ops.len() + 1;
        let tag = &self.rpc.tag;
        let minor = self.minor;
        self.sequenced(
            conn,
            slot,
            seqid,
            cachethis,
            |e, seq| {
                CompoundHead {
                    tag,
                    minorversion: minor,
                    nops: nops as u32,
                }
                .encode(e);
                ArgOp::Sequence(*seq).encode(e);
                for op in ops {
                    op.encode(e);
                }
            },
            |body| decode_compound_res(body, nops),
            |r| match r.results.first() {
                Some(ResOp::Sequence(NfsRes4::Ok(ok))) => Some(*ok),
                _ => None,
            },
        )
        .await
    }

    /// SEQUENCE then `p`'s operations on a free slot, the reply checked by
    /// [`check_compound_res`] (with `attrs`, every GETATTR's values too)
    /// instead of decoded: the same bytes and slot handling as
    /// [`Self::compound`], for a caller that sends the same operations
    /// many times and needs only to know that every one succeeded
    /// ([`ReplyCheck::all_ok`]).
    pub async fn compound_prepared(
        &self,
        p: &PreparedOps,
        attrs: bool,
    ) -> Result<ReplyCheck, ClientError> {
        let mut slot = self.slot().await?;
        self.compound_prepared_on(&mut slot, p, attrs).await
    }

    /// [`Self::compound_prepared`] on a slot the caller holds (from
    /// [`Self::slot`]), with its next sequence id: for a caller that keeps
    /// one slot for many calls, one at a time, and so takes and returns
    /// none per call. A slot lost by an earlier call ([`Slot::is_lost`])
    /// is refused.
    pub async fn compound_prepared_on(
        &self,
        slot: &mut Slot,
        p: &PreparedOps,
        attrs: bool,
    ) -> Result<ReplyCheck, ClientError> {
        if slot.is_lost() {
            return Err(ClientError::InvalidInput(format!(
                "slot {} was lost with an earlier reply",
                slot.id()
            )));
        }
        let seqid = slot.next_seqid();
        let conn = self.rpc.client.pick()?;
        let tag = &self.rpc.tag;
        let minor = self.minor;
        self.sequenced(
            conn,
            slot,
            seqid,
            self.session.cachethis,
            |e, seq| prepared::encode_prepared(e, tag, minor, seq, p),
            |body| check_prepared_res(body, p, attrs),
            |r| r.sequence,
        )
        .await
    }

    /// One COMPOUND on `slot` with `seqid`: `encode` writes it given the
    /// SEQUENCE arguments, `parse` reads the reply's results, `seq_of`
    /// finds SEQUENCE's result in what it read. When SEQUENCE succeeds
    /// the slot takes `seqid`; when no reply decodes the slot is retired
    /// once dropped.
    #[allow(clippy::too_many_arguments)]
    async fn sequenced<T>(
        &self,
        conn: &RpcConnection,
        slot: &mut Slot,
        seqid: u32,
        cachethis: bool,
        encode: impl FnOnce(&mut Enc, &Sequence4Args),
        parse: impl FnOnce(&[u8]) -> Result<T, ClientError>,
        seq_of: impl FnOnce(&T) -> Option<Sequence4ResOk>,
    ) -> Result<T, ClientError> {
        let seq = Sequence4Args {
            sessionid: self.session.info.sessionid,
            sequenceid: seqid,
            slotid: slot.id(),
            highest_slotid: slot.highest_slotid(),
            cachethis,
        };
        let sent = conn
            .call_encoded_rec_with(
                self.rpc.client.auth(),
                self.rpc.client.timeout(),
                NFS4_PROGRAM,
                NFS_V4,
                NFSPROC4_COMPOUND,
                |e: &mut Enc| encode(e, &seq),
            )
            .await;
        let res = sent.and_then(|(rec, off)| parse(rec.get(off..).unwrap_or(&[])));
        match &res {
            Ok(r) => {
                if let Some(ok) = seq_of(r) {
                    slot.accepted(seqid, ok.target_highest_slotid);
                    // Written only when it changes: every call of every
                    // stream reads it, and a store would move the line.
                    let flags = &self.session.status_flags;
                    if flags.load(Ordering::Relaxed) != ok.status_flags {
                        flags.store(ok.status_flags, Ordering::Relaxed);
                    }
                }
            }
            // Refused before the server looked at the COMPOUND: the slot
            // is as it was.
            Err(e) if e.is_rpc_rejection() => {}
            Err(_) => slot.lose(),
        }
        res
    }

    /// `ops` after SEQUENCE; `Err(Nfs4)` unless every operation succeeded.
    /// Returns the results of `ops` (SEQUENCE's removed).
    pub async fn run(&self, ops: &[ArgOp<'_>]) -> Result<Vec<ResOp>, ClientError> {
        let r = self.compound(ops).await?;
        check4(&r)?;
        if r.results.len() != ops.len() + 1 {
            return Err(ClientError::Protocol(format!(
                "{} results for {} operations",
                r.results.len(),
                ops.len() + 1
            )));
        }
        let mut results = r.results;
        results.remove(0);
        Ok(results)
    }

    /// RECLAIM_COMPLETE (RFC 8881 §18.51).
    pub async fn reclaim_complete(&self, one_fs: bool) -> Result<(), ClientError> {
        self.run(&[ArgOp::ReclaimComplete(ReclaimComplete4Args { one_fs })])
            .await
            .map(drop)
    }

    /// DESTROY_SESSION (RFC 8881 §18.37) alone, on the first connection
    /// (a back channel, if any, ends with it). The client is of no more
    /// use for session calls afterwards.
    pub async fn destroy_session(&self) -> Result<(), ClientError> {
        let r = self
            .rpc
            .compound_first(
                NFS4_MINOR_VERSION_1,
                &[ArgOp::DestroySession(DestroySession4Args {
                    sessionid: self.session.info.sessionid,
                })],
            )
            .await?;
        check4(&r)
    }

    /// DESTROY_CLIENTID (RFC 8881 §18.50) alone: after the client's last
    /// session is destroyed.
    pub async fn destroy_clientid(&self) -> Result<(), ClientError> {
        let r = self
            .rpc
            .compound_first(
                NFS4_MINOR_VERSION_1,
                &[ArgOp::DestroyClientId(DestroyClientId4Args {
                    clientid: self.session.info.clientid,
                })],
            )
            .await?;
        check4(&r)
    }

    /// DESTROY_SESSION then DESTROY_CLIENTID; stops answering callbacks.
    pub async fn shutdown(&self) -> Result<(), ClientError> {
        self.destroy_session().await?;
        if let Ok(c) = self.rpc.first() {
            c.set_call_handler(None);
        }
        self.destroy_clientid().await
    }
}
