//! One ONC RPC connection over TCP (RFC 5531), pipelined.
//!
//! Calls are encoded by the calling task, handed to a writer task that
//! coalesces whatever is queued into one `write`, and matched to replies by
//! xid in a reader task; so any number of calls (up to `max_in_flight`) can be
//! outstanding and replies may come back in any order.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rnfsd_proto::rpc::{
    AcceptStat, CallHeader, OpaqueAuth, RejectStat, ReplyHeader, MSG_CALL, RPC_VERSION,
};
use rnfsd_xdr::{Dec, Enc, Xdr};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::AbortHandle;

use crate::auth::Auth;
use crate::error::ClientError;
use crate::record::{read_record, RecordError, LAST_FRAGMENT, MAX_FRAGMENT};

/// Default largest reply record accepted (fits a 1 MiB READ with room).
pub const DEFAULT_MAX_REPLY: usize = 4 << 20;
/// Default per-call timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default bound on calls outstanding on one connection.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1024;

/// Upper clamp for `max_in_flight` (keeps the semaphore and map sane).
const MAX_IN_FLIGHT_LIMIT: usize = 1 << 16;
/// Queued calls are coalesced into one write up to about this many bytes.
const WRITE_BATCH: usize = 64 * 1024;
/// Read buffer: many small replies per `read` syscall.
const READ_BUF: usize = 64 * 1024;
/// Initial capacity of a call message (header + small arguments).
const CALL_CAPACITY: usize = 256;

/// Settings for connections and clients. Start from `Default` and change
/// fields.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Credential sent with every call unless a view overrides it.
    pub auth: Auth,
    /// Per-call timeout; `None` waits forever (until the connection dies).
    pub timeout: Option<Duration>,
    /// Timeout for establishing each TCP connection.
    pub connect_timeout: Duration,
    /// Largest reply record accepted; a larger one is a protocol error that
    /// closes the connection.
    pub max_reply: usize,
    /// Most calls outstanding per connection (clamped to 1..=65536); further
    /// calls wait for a slot.
    pub max_in_flight: usize,
    /// Bind the local end to a reserved port (< 1024), as exports marked
    /// "secure" require. Needs root (or CAP_NET_BIND_SERVICE).
    pub privileged_port: bool,
    /// Number of TCP connections a [`crate::Client`] opens (nconnect).
    pub connections: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            auth: Auth::none(),
            timeout: Some(DEFAULT_TIMEOUT),
            connect_timeout: Duration::from_secs(10),
            max_reply: DEFAULT_MAX_REPLY,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            privileged_port: false,
            connections: 1,
        }
    }
}

type ReplySlot = oneshot::Sender<Result<Vec<u8>, ClientError>>;

/// Answers RPC calls the peer sends over this connection (an NFSv4.1 back
/// channel, RFC 8881 §2.10.3.1): given the whole call record (from the
/// xid), returns the whole reply message (from the xid) to send back, or
/// `None` to drop the call. It runs on the connection's reader task, so it
/// must be quick and must not wait for replies on the same connection.
pub type CallHandler = Arc<dyn Fn(&[u8]) -> Option<Vec<u8>> + Send + Sync>;

struct State {
    pending: HashMap<u32, ReplySlot>,
    closed: Option<ClientError>,
    /// With a handler, records whose msg_type is CALL go to it instead of
    /// being matched as replies.
    on_call: Option<CallHandler>,
}

/// What the reader, the writer and the callers share.
struct Shared {
    state: Mutex<State>,
    closed: AtomicBool,
    next_xid: AtomicU32,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the map inconsistent
        // (single inserts/removes), so poisoning is ignored.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Allocate an xid and register its reply slot, unless closed.
    fn register(&self, slot: ReplySlot) -> Result<u32, ClientError> {
        let mut st = self.lock();
        if let Some(e) = &st.closed {
            return Err(e.clone());
        }
        // Skipping xids still in use only matters after 2^32 calls with one
        // stuck outstanding; the loop is bounded by max_in_flight.
        loop {
            let xid = self.next_xid.fetch_add(1, Ordering::Relaxed);
            if let std::collections::hash_map::Entry::Vacant(v) = st.pending.entry(xid) {
                v.insert(slot);
                return Ok(xid);
            }
        }
    }

    fn unregister(&self, xid: u32) {
        self.lock().pending.remove(&xid);
    }

    fn complete(&self, xid: u32, rec: Vec<u8>) {
        let slot = self.lock().pending.remove(&xid);
        // No slot: a reply to a call that timed out or was cancelled, or an
        // xid we never sent; dropped.
        if let Some(s) = slot {
            let _ = s.send(Ok(rec));
        }
    }

    /// Mark closed (first reason wins) and fail every pending call.
    fn close(&self, why: ClientError) {
        let drained: Vec<ReplySlot> = {
            let mut st = self.lock();
            if st.closed.is_none() {
                st.closed = Some(why);
            }
            self.closed.store(true, Ordering::Release);
            st.pending.drain().map(|(_, s)| s).collect()
        };
        let err = self.closed_error();
        for s in drained {
            let _ = s.send(Err(err.clone()));
        }
    }

    fn closed_error(&self) -> ClientError {
        self.lock()
            .closed
            .clone()
            .unwrap_or_else(|| ClientError::Disconnected("connection closed".into()))
    }
}

struct Inner {
    shared: Arc<Shared>,
    tx: mpsc::Sender<Vec<u8>>,
    slots: Semaphore,
    reader: AbortHandle,
    local: SocketAddr,
    peer: SocketAddr,
    max_reply: usize,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The writer ends when `tx` drops; the reader must be stopped.
        self.reader.abort();
        self.shared.close(ClientError::Disconnected(
            "connection dropped by client".into(),
        ));
    }
}

/// Removes a call's reply slot if the call ends without its reply (timeout
/// or cancellation), so late replies are dropped and the map stays bounded.
struct PendingGuard<'a> {
    shared: &'a Shared,
    xid: u32,
    armed: bool,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.shared.unregister(self.xid);
        }
    }
}

impl Inner {
    /// Send one call message (record mark and xid slot at the front) and wait
    /// for the reply record with the same xid.
    async fn round_trip(
        &self,
        mut msg: Vec<u8>,
        timeout: Option<Duration>,
    ) -> Result<Vec<u8>, ClientError> {
        let fut = async {
            let _slot = self
                .slots
                .acquire()
                .await
                .map_err(|_| self.shared.closed_error())?;
            let (tx, rx) = oneshot::channel();
            let xid = self.shared.register(tx)?;
            let mut guard = PendingGuard {
                shared: &self.shared,
                xid,
                armed: true,
            };
            if let Some(w) = msg.get_mut(4..8) {
                w.copy_from_slice(&xid.to_be_bytes());
            }
            if self.tx.send(msg).await.is_err() {
                return Err(self.shared.closed_error());
            }
            let r = rx.await;
            // Whoever completed the slot already removed it.
            guard.armed = false;
            r.unwrap_or_else(|_| Err(self.shared.closed_error()))
        };
        within(timeout, fut).await
    }
}

impl Inner {
    /// Queue one call message and return without waiting for a reply. Its
    /// xid is not registered, so a reply that does come is dropped by the
    /// reader like any unmatched one.
    async fn send_only(
        &self,
        mut msg: Vec<u8>,
        timeout: Option<Duration>,
    ) -> Result<(), ClientError> {
        let fut = async {
            // Holding a slot while queueing keeps the writer queue within
            // max_in_flight, as for round trips.
            let _slot = self
                .slots
                .acquire()
                .await
                .map_err(|_| self.shared.closed_error())?;
            if self.shared.closed.load(Ordering::Acquire) {
                return Err(self.shared.closed_error());
            }
            let xid = self.shared.next_xid.fetch_add(1, Ordering::Relaxed);
            if let Some(w) = msg.get_mut(4..8) {
                w.copy_from_slice(&xid.to_be_bytes());
            }
            self.tx
                .send(msg)
                .await
                .map_err(|_| self.shared.closed_error())
        };
        within(timeout, fut).await
    }
}

/// `fut`, failed with [`ClientError::Timeout`] past `timeout` (if any).
async fn within<T>(
    timeout: Option<Duration>,
    fut: impl std::future::Future<Output = Result<T, ClientError>>,
) -> Result<T, ClientError> {
    match timeout {
        Some(t) => tokio::time::timeout(t, fut)
            .await
            .unwrap_or(Err(ClientError::Timeout)),
        None => fut.await,
    }
}

/// Start a call message: record mark placeholder, then the call header with
/// xid 0 (patched when the xid is allocated).
pub(crate) fn start_call(auth: &Auth, prog: u32, vers: u32, proc_: u32) -> Enc {
    let mut e = Enc::with_capacity(CALL_CAPACITY);
    e.u32(0);
    CallHeader {
        xid: 0,
        rpcvers: RPC_VERSION,
        prog,
        vers,
        proc_,
        cred: auth.opaque(),
        verf: OpaqueAuth::NONE,
    }
    .encode(&mut e);
    e
}

/// Fill in the record mark: the client always sends a single fragment.
fn finish_call(mut e: Enc) -> Result<Vec<u8>, ClientError> {
    let len = e.len() - 4;
    if len > MAX_FRAGMENT {
        return Err(ClientError::InvalidInput(format!(
            "call of {len} bytes exceeds one record fragment"
        )));
    }
    e.patch_u32(0, LAST_FRAGMENT | len as u32);
    Ok(e.into_vec())
}

/// Decode the reply header; on SUCCESS return the offset of the results.
/// RFC 5531 §9: everything but SUCCESS maps to an error.
pub(crate) fn reply_results_offset(rec: &[u8]) -> Result<usize, ClientError> {
    let mut d = Dec::new(rec);
    let (_xid, h) = ReplyHeader::decode(&mut d)
        .map_err(|e| ClientError::Protocol(format!("bad reply header: {e}")))?;
    match h {
        ReplyHeader::Accepted(AcceptStat::Success) => Ok(d.position()),
        ReplyHeader::Accepted(AcceptStat::ProgUnavail) => Err(ClientError::ProgUnavail),
        ReplyHeader::Accepted(AcceptStat::ProgMismatch { low, high }) => {
            Err(ClientError::ProgMismatch { low, high })
        }
        ReplyHeader::Accepted(AcceptStat::ProcUnavail) => Err(ClientError::ProcUnavail),
        ReplyHeader::Accepted(AcceptStat::GarbageArgs) => Err(ClientError::GarbageArgs),
        ReplyHeader::Accepted(AcceptStat::SystemErr) => Err(ClientError::SystemErr),
        ReplyHeader::Denied(RejectStat::RpcMismatch { low, high }) => {
            Err(ClientError::RpcMismatch { low, high })
        }
        ReplyHeader::Denied(RejectStat::AuthError(a)) => Err(ClientError::AuthError(a)),
    }
}

/// Decode results that must fill the rest of the record exactly.
pub(crate) fn decode_results<R: Xdr>(rec: &[u8]) -> Result<R, ClientError> {
    let off = reply_results_offset(rec)?;
    let body = rec.get(off..).unwrap_or(&[]);
    Ok(rnfsd_xdr::from_slice(body)?)
}

/// One TCP connection carrying pipelined RPC calls.
///
/// Cheap to clone: clones share the socket and differ only in the credential
/// and timeout they send with (see [`RpcConnection::with_auth`]). The socket
/// closes when the last clone is dropped.
#[derive(Clone)]
pub struct RpcConnection {
    inner: Arc<Inner>,
    auth: Auth,
    timeout: Option<Duration>,
}

impl std::fmt::Debug for RpcConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcConnection")
            .field("local", &self.inner.local)
            .field("peer", &self.inner.peer)
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl RpcConnection {
    /// Connect to `addr` and start the reader and writer tasks. Must be
    /// called inside a tokio runtime.
    pub async fn connect(addr: SocketAddr, cfg: &ClientConfig) -> Result<Self, ClientError> {
        let stream = tokio::time::timeout(cfg.connect_timeout, connect_tcp(addr, cfg))
            .await
            .map_err(|_| ClientError::Timeout)??;
        Self::from_stream(stream, cfg)
    }

    /// Run RPC over an already connected stream.
    pub fn from_stream(stream: TcpStream, cfg: &ClientConfig) -> Result<Self, ClientError> {
        stream.set_nodelay(true)?;
        let local = stream.local_addr()?;
        let peer = stream.peer_addr()?;
        let (rd, wr) = stream.into_split();
        let max_in_flight = cfg.max_in_flight.clamp(1, MAX_IN_FLIGHT_LIMIT);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                pending: HashMap::with_capacity(max_in_flight.min(4096)),
                closed: None,
                on_call: None,
            }),
            closed: AtomicBool::new(false),
            next_xid: AtomicU32::new(initial_xid()),
        });
        // The semaphore admits at most max_in_flight calls, so this queue
        // never holds more and `send` never waits on it.
        let (tx, rx) = mpsc::channel(max_in_flight);
        // The reader holds a sender too, for replies to the peer's calls; it
        // is aborted when the connection is dropped, so the writer still
        // ends then.
        let reader =
            tokio::spawn(reader_task(rd, shared.clone(), cfg.max_reply, tx.clone())).abort_handle();
        tokio::spawn(writer_task(wr, rx, shared.clone()));
        Ok(RpcConnection {
            inner: Arc::new(Inner {
                shared,
                tx,
                slots: Semaphore::new(max_in_flight),
                reader,
                local,
                peer,
                max_reply: cfg.max_reply,
            }),
            auth: cfg.auth.clone(),
            timeout: cfg.timeout,
        })
    }

    /// A handle on the same connection that sends `auth` instead.
    pub fn with_auth(&self, auth: Auth) -> Self {
        RpcConnection {
            auth,
            ..self.clone()
        }
    }

    /// A handle on the same connection with another per-call timeout.
    pub fn with_timeout(&self, timeout: Option<Duration>) -> Self {
        RpcConnection {
            timeout,
            ..self.clone()
        }
    }

    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local
    }

    pub fn peer_addr(&self) -> SocketAddr {
        self.inner.peer
    }

    pub fn max_reply(&self) -> usize {
        self.inner.max_reply
    }

    /// True once the connection has failed or been closed; every call then
    /// fails at once.
    pub fn is_closed(&self) -> bool {
        self.inner.shared.closed.load(Ordering::Acquire)
    }

    /// Answer the calls the peer sends over this connection with `handler`
    /// (`None`: stop answering). See [`CallHandler`].
    pub fn set_call_handler(&self, handler: Option<CallHandler>) {
        self.inner.shared.lock().on_call = handler;
    }

    /// Number of calls waiting for a reply right now.
    pub fn pending(&self) -> usize {
        self.inner.shared.lock().pending.len()
    }

    /// Call `prog`/`vers`/`proc_` with `args`, decoding the results as `R`
    /// (which must use the whole reply body).
    pub async fn call<A: Xdr, R: Xdr>(
        &self,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &A,
    ) -> Result<R, ClientError> {
        self.call_with(&self.auth, self.timeout, prog, vers, proc_, args)
            .await
    }

    /// Call with pre-encoded argument bytes (sent verbatim, so they may be
    /// malformed on purpose); returns the raw result bytes after a SUCCESS
    /// reply header.
    pub async fn call_raw(
        &self,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &[u8],
    ) -> Result<Vec<u8>, ClientError> {
        self.call_raw_with(&self.auth, self.timeout, prog, vers, proc_, args)
            .await
    }

    /// Send an arbitrary message: the connection supplies the record mark
    /// and the xid, `after_xid` is everything that follows (msg_type, rpcvers,
    /// ...). Returns the whole reply record, header included, undecoded. For
    /// tests of malformed call headers; a server that drops the call makes
    /// this time out.
    pub async fn call_message(&self, after_xid: &[u8]) -> Result<Vec<u8>, ClientError> {
        self.call_message_with(self.timeout, after_xid).await
    }

    /// Like [`RpcConnection::call`], with the arguments written by `encode`
    /// straight into the call message (for argument types that borrow, such
    /// as `Write3ArgsRef`, or hand-made encodings).
    pub async fn call_encoded<R: Xdr>(
        &self,
        prog: u32,
        vers: u32,
        proc_: u32,
        encode: impl FnOnce(&mut Enc),
    ) -> Result<R, ClientError> {
        self.call_encoded_with(&self.auth, self.timeout, prog, vers, proc_, encode)
            .await
    }

    /// Send a call without waiting for any reply: for one-way procedures
    /// such as NLM's *_MSG and *_RES (XNFS ch. 10, whose answer comes back
    /// as a separate call, if at all). Ok means the call was queued for
    /// the socket, not that the server got it.
    pub async fn send<A: Xdr>(
        &self,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &A,
    ) -> Result<(), ClientError> {
        self.send_with(&self.auth, self.timeout, prog, vers, proc_, args)
            .await
    }

    pub(crate) async fn send_with<A: Xdr>(
        &self,
        auth: &Auth,
        timeout: Option<Duration>,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &A,
    ) -> Result<(), ClientError> {
        let mut e = start_call(auth, prog, vers, proc_);
        args.encode(&mut e);
        self.inner.send_only(finish_call(e)?, timeout).await
    }

    pub(crate) async fn call_with<A: Xdr, R: Xdr>(
        &self,
        auth: &Auth,
        timeout: Option<Duration>,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &A,
    ) -> Result<R, ClientError> {
        self.call_encoded_with(auth, timeout, prog, vers, proc_, |e| args.encode(e))
            .await
    }

    pub(crate) async fn call_encoded_with<R: Xdr>(
        &self,
        auth: &Auth,
        timeout: Option<Duration>,
        prog: u32,
        vers: u32,
        proc_: u32,
        encode: impl FnOnce(&mut Enc),
    ) -> Result<R, ClientError> {
        let mut e = start_call(auth, prog, vers, proc_);
        encode(&mut e);
        let rec = self.inner.round_trip(finish_call(e)?, timeout).await?;
        decode_results(&rec)
    }

    pub(crate) async fn call_raw_with(
        &self,
        auth: &Auth,
        timeout: Option<Duration>,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &[u8],
    ) -> Result<Vec<u8>, ClientError> {
        let mut e = start_call(auth, prog, vers, proc_);
        e.raw(args);
        let mut rec = self.inner.round_trip(finish_call(e)?, timeout).await?;
        let off = reply_results_offset(&rec)?;
        rec.drain(..off);
        Ok(rec)
    }

    /// Like `call_encoded_with`, but returns the reply record undecoded
    /// with the offset of its results (no copy of a large READ reply).
    pub(crate) async fn call_encoded_rec_with(
        &self,
        auth: &Auth,
        timeout: Option<Duration>,
        prog: u32,
        vers: u32,
        proc_: u32,
        encode: impl FnOnce(&mut Enc),
    ) -> Result<(Vec<u8>, usize), ClientError> {
        let mut e = start_call(auth, prog, vers, proc_);
        encode(&mut e);
        let rec = self.inner.round_trip(finish_call(e)?, timeout).await?;
        let off = reply_results_offset(&rec)?;
        Ok((rec, off))
    }

    pub(crate) async fn call_message_with(
        &self,
        timeout: Option<Duration>,
        after_xid: &[u8],
    ) -> Result<Vec<u8>, ClientError> {
        let mut e = Enc::with_capacity(8 + after_xid.len());
        e.u32(0);
        e.u32(0);
        e.raw(after_xid);
        self.inner.round_trip(finish_call(e)?, timeout).await
    }
}

/// Connect, optionally from a reserved port.
async fn connect_tcp(addr: SocketAddr, cfg: &ClientConfig) -> Result<TcpStream, ClientError> {
    if !cfg.privileged_port {
        return Ok(TcpStream::connect(addr).await?);
    }
    // Like bindresvport(3): walk down the reserved range. A port can be free
    // to bind yet unusable for this peer (a TIME_WAIT twin), so connect
    // errors that name the address also move on to the next port.
    let mut last: Option<std::io::Error> = None;
    for port in (512..1024u16).rev() {
        let sock = if addr.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        sock.set_reuseaddr(true)?;
        let local: SocketAddr = if addr.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, port).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, port).into()
        };
        match sock.bind(local) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                last = Some(e);
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        match sock.connect(addr).await {
            Ok(s) => return Ok(s),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::AddrInUse | std::io::ErrorKind::AddrNotAvailable
                ) =>
            {
                last = Some(e);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(last
        .unwrap_or_else(|| std::io::Error::other("no reserved port available"))
        .into())
}

/// Start xids somewhere different per process and connection, so a server's
/// duplicate request cache does not confuse a new client with an old one.
fn initial_xid() -> u32 {
    static SALT: AtomicU32 = AtomicU32::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u32 ^ (d.as_secs() as u32).rotate_left(16))
        .unwrap_or(0);
    let s = SALT.fetch_add(0x9e37_79b9, Ordering::Relaxed);
    t ^ s ^ std::process::id().rotate_left(8)
}

/// msg_type of a record (RFC 5531 §9), if it has one.
fn msg_type(rec: &[u8]) -> Option<u32> {
    rec.get(4..8)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// Prefix `reply` (a whole reply message) with its record mark; `None` if
/// it cannot be one fragment.
fn framed(reply: &[u8]) -> Option<Vec<u8>> {
    if reply.len() > MAX_FRAGMENT {
        return None;
    }
    let mut out = Vec::with_capacity(reply.len() + 4);
    out.extend_from_slice(&(LAST_FRAGMENT | reply.len() as u32).to_be_bytes());
    out.extend_from_slice(reply);
    Some(out)
}

async fn reader_task(
    rd: OwnedReadHalf,
    shared: Arc<Shared>,
    max_reply: usize,
    tx: mpsc::Sender<Vec<u8>>,
) {
    let mut rd = BufReader::with_capacity(READ_BUF, rd);
    let why = loop {
        // Each record gets its own buffer: it moves to the caller.
        let mut rec = Vec::new();
        match read_record(&mut rd, max_reply, &mut rec).await {
            Ok(true) if msg_type(&rec) == Some(MSG_CALL) => {
                let handler = shared.lock().on_call.clone();
                match handler {
                    Some(h) => {
                        // One call at a time: the peer's back channel is
                        // bounded by its own slots, and this by the reader.
                        if let Some(reply) = h(&rec).as_deref().and_then(framed) {
                            if tx.send(reply).await.is_err() {
                                break ClientError::Disconnected("connection closed".into());
                            }
                        }
                    }
                    // No handler: as before, a CALL is taken for a
                    // malformed reply to whichever call has its xid.
                    None => {
                        if let Some(xid) = rnfsd_proto::rpc::peek_xid(&rec) {
                            shared.complete(xid, rec);
                        }
                    }
                }
            }
            Ok(true) => {
                // A record too short to carry an xid matches no call.
                if let Some(xid) = rnfsd_proto::rpc::peek_xid(&rec) {
                    shared.complete(xid, rec);
                }
            }
            Ok(false) => break ClientError::Disconnected("connection closed by server".into()),
            Err(e @ RecordError::TooLarge { .. }) => break ClientError::Protocol(e.to_string()),
            Err(e) => break ClientError::Disconnected(e.to_string()),
        }
    };
    shared.close(why);
}

async fn writer_task(mut wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Vec<u8>>, shared: Arc<Shared>) {
    let mut batch: Vec<u8> = Vec::with_capacity(WRITE_BATCH);
    while let Some(first) = rx.recv().await {
        if shared.closed.load(Ordering::Acquire) {
            break;
        }
        let res = if first.len() >= WRITE_BATCH || rx.is_empty() {
            // Nothing to coalesce with (or too big to copy): write in place.
            wr.write_all(&first).await
        } else {
            batch.clear();
            batch.extend_from_slice(&first);
            let mut big = None;
            while batch.len() < WRITE_BATCH {
                match rx.try_recv() {
                    Ok(m) if m.len() >= WRITE_BATCH => {
                        big = Some(m);
                        break;
                    }
                    Ok(m) => batch.extend_from_slice(&m),
                    Err(_) => break,
                }
            }
            let mut r = wr.write_all(&batch).await;
            if let (Ok(()), Some(b)) = (&r, big) {
                r = wr.write_all(&b).await;
            }
            r
        };
        if let Err(e) = res {
            shared.close(ClientError::Disconnected(format!("write failed: {e}")));
            break;
        }
    }
}
