//! Several connections to one server, used round-robin (like Linux's
//! `nconnect` mount option).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rnfsd_xdr::{Enc, Xdr};

use crate::auth::Auth;
use crate::conn::{ClientConfig, RpcConnection};
use crate::error::ClientError;

/// Most connections one [`Client`] will open.
pub const MAX_CONNECTIONS: usize = 64;

struct Pool {
    conns: Box<[RpcConnection]>,
    next: AtomicUsize,
}

/// An RPC client over one or more connections.
///
/// Each call goes to the next open connection in turn. Cloning is cheap and
/// shares the connections; [`Client::with_auth`] gives a clone that calls as
/// another user.
#[derive(Clone)]
pub struct Client {
    pool: Arc<Pool>,
    auth: Auth,
    timeout: Option<Duration>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("conns", &self.pool.conns)
            .field("auth_flavor", &self.auth.flavor())
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Client {
    /// Open `cfg.connections` connections (at least 1, at most
    /// [`MAX_CONNECTIONS`]) to `addr`.
    pub async fn connect(addr: SocketAddr, cfg: &ClientConfig) -> Result<Self, ClientError> {
        let n = cfg.connections.clamp(1, MAX_CONNECTIONS);
        let mut conns = Vec::with_capacity(n);
        for _ in 0..n {
            conns.push(RpcConnection::connect(addr, cfg).await?);
        }
        Ok(Self::from_connections(conns, cfg.auth.clone(), cfg.timeout))
    }

    /// A client over existing connections. Their own credentials are ignored;
    /// `auth` and `timeout` apply to every call.
    ///
    /// An empty `conns` yields a client whose calls all fail.
    pub fn from_connections(
        conns: Vec<RpcConnection>,
        auth: Auth,
        timeout: Option<Duration>,
    ) -> Self {
        Client {
            pool: Arc::new(Pool {
                conns: conns.into_boxed_slice(),
                next: AtomicUsize::new(0),
            }),
            auth,
            timeout,
        }
    }

    /// A client over one connection, keeping its credential and timeout.
    pub fn from_connection(conn: RpcConnection) -> Self {
        let auth = conn.auth().clone();
        let timeout = conn.timeout();
        Self::from_connections(vec![conn], auth, timeout)
    }

    /// A handle on the same connections that sends `auth` instead.
    pub fn with_auth(&self, auth: Auth) -> Self {
        Client {
            auth,
            ..self.clone()
        }
    }

    /// A handle on the same connections with another per-call timeout.
    pub fn with_timeout(&self, timeout: Option<Duration>) -> Self {
        Client {
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

    /// The underlying connections.
    pub fn connections(&self) -> &[RpcConnection] {
        &self.pool.conns
    }

    /// True when every connection has failed.
    pub fn is_closed(&self) -> bool {
        self.pool.conns.iter().all(|c| c.is_closed())
    }

    /// The next connection round-robin, skipping failed ones while any is
    /// still open (a failed one is returned only so its error is reported).
    pub(crate) fn pick(&self) -> Result<&RpcConnection, ClientError> {
        let conns = &self.pool.conns;
        let n = conns.len();
        if n == 0 {
            return Err(ClientError::Disconnected(
                "client has no connections".into(),
            ));
        }
        let start = self.pool.next.fetch_add(1, Ordering::Relaxed);
        let mut fallback = None;
        for i in 0..n {
            if let Some(c) = conns.get(start.wrapping_add(i) % n) {
                if !c.is_closed() {
                    return Ok(c);
                }
                fallback.get_or_insert(c);
            }
        }
        fallback.ok_or_else(|| ClientError::Disconnected("client has no connections".into()))
    }

    /// Call `prog`/`vers`/`proc_` with `args`, decoding the results as `R`.
    pub async fn call<A: Xdr, R: Xdr>(
        &self,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &A,
    ) -> Result<R, ClientError> {
        self.pick()?
            .call_with(&self.auth, self.timeout, prog, vers, proc_, args)
            .await
    }

    /// See [`RpcConnection::send`]: a one-way call, no reply awaited.
    pub async fn send<A: Xdr>(
        &self,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &A,
    ) -> Result<(), ClientError> {
        self.pick()?
            .send_with(&self.auth, self.timeout, prog, vers, proc_, args)
            .await
    }

    /// See [`RpcConnection::call_encoded`].
    pub async fn call_encoded<R: Xdr>(
        &self,
        prog: u32,
        vers: u32,
        proc_: u32,
        encode: impl FnOnce(&mut Enc),
    ) -> Result<R, ClientError> {
        self.pick()?
            .call_encoded_with(&self.auth, self.timeout, prog, vers, proc_, encode)
            .await
    }

    /// Call with argument bytes sent verbatim; returns the result bytes.
    pub async fn call_raw(
        &self,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &[u8],
    ) -> Result<Vec<u8>, ClientError> {
        self.pick()?
            .call_raw_with(&self.auth, self.timeout, prog, vers, proc_, args)
            .await
    }

    /// See [`RpcConnection::call_message`].
    pub async fn call_message(&self, after_xid: &[u8]) -> Result<Vec<u8>, ClientError> {
        self.pick()?
            .call_message_with(self.timeout, after_xid)
            .await
    }
}
