//! The one error type of every client call.

use std::fmt;
use std::io;
use std::sync::Arc;

use rnfsd_proto::mount::MountStat3;
use rnfsd_proto::nfs3::Nfsstat3;
use rnfsd_proto::nfs4::Nfsstat4;
use rnfsd_proto::rpc::AuthStat;
use rnfsd_xdr::XdrError;

/// Why a call failed.
///
/// The first group are the server's RPC-level answers (RFC 5531 §9
/// `accept_stat` other than SUCCESS, and `reject_stat`); then come local
/// failures. Program-level statuses (an NFS3ERR_* inside a successful RPC
/// reply) are not errors of the generic call: they come back inside the
/// decoded result type. Only the convenience helpers turn them into
/// [`ClientError::Mount`] / [`ClientError::Nfs`].
#[derive(Debug, Clone)]
pub enum ClientError {
    /// PROG_UNAVAIL: the server does not export this program.
    ProgUnavail,
    /// PROG_MISMATCH: the program exists in versions `low..=high`.
    ProgMismatch { low: u32, high: u32 },
    /// PROC_UNAVAIL: no such procedure in this program version.
    ProcUnavail,
    /// GARBAGE_ARGS: the server could not decode the arguments.
    GarbageArgs,
    /// SYSTEM_ERR: the server failed for a reason of its own.
    SystemErr,
    /// MSG_DENIED / RPC_MISMATCH: the server speaks RPC versions `low..=high`.
    RpcMismatch { low: u32, high: u32 },
    /// MSG_DENIED / AUTH_ERROR with the server's reason.
    AuthError(AuthStat),
    /// The reply header was fine but the results did not decode as the
    /// expected type (or had trailing bytes).
    Decode(XdrError),
    /// The server broke the protocol: undecodable reply header, a reply record
    /// over the configured maximum, or similar. The connection is closed.
    Protocol(String),
    /// A local I/O error, e.g. when connecting.
    Io(Arc<io::Error>),
    /// The connection was lost (peer closed it, or a read/write failed); all
    /// calls pending on it fail with this, and so does every later call.
    Disconnected(String),
    /// No reply within the call's timeout (or, from `connect`, no connection
    /// within `connect_timeout`).
    Timeout,
    /// MOUNT returned a non-OK `mountstat3` (helpers only).
    Mount(MountStat3),
    /// An NFSv3 helper got a non-OK `nfsstat3`.
    Nfs(Nfsstat3),
    /// An NFSv4.1 helper's COMPOUND failed: operation `op` (its number,
    /// 0 when the server returned no results) answered `status`.
    Nfs4 { op: u32, status: Nfsstat4 },
    /// A helper was given an argument it cannot send (e.g. an empty path
    /// component).
    InvalidInput(String),
}

impl ClientError {
    /// True for the server-sent RPC-level rejections (as opposed to local
    /// failures).
    pub fn is_rpc_rejection(&self) -> bool {
        matches!(
            self,
            ClientError::ProgUnavail
                | ClientError::ProgMismatch { .. }
                | ClientError::ProcUnavail
                | ClientError::GarbageArgs
                | ClientError::SystemErr
                | ClientError::RpcMismatch { .. }
                | ClientError::AuthError(_)
        )
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::ProgUnavail => f.write_str("RPC: program unavailable"),
            ClientError::ProgMismatch { low, high } => {
                write!(
                    f,
                    "RPC: program version mismatch (server has {low}..={high})"
                )
            }
            ClientError::ProcUnavail => f.write_str("RPC: procedure unavailable"),
            ClientError::GarbageArgs => f.write_str("RPC: garbage arguments"),
            ClientError::SystemErr => f.write_str("RPC: system error on server"),
            ClientError::RpcMismatch { low, high } => {
                write!(f, "RPC: RPC version mismatch (server has {low}..={high})")
            }
            ClientError::AuthError(s) => write!(f, "RPC: authentication error {s:?}"),
            ClientError::Decode(e) => write!(f, "reply decode error: {e}"),
            ClientError::Protocol(s) => write!(f, "protocol error: {s}"),
            ClientError::Io(e) => write!(f, "I/O error: {e}"),
            ClientError::Disconnected(s) => write!(f, "connection lost: {s}"),
            ClientError::Timeout => f.write_str("RPC call timed out"),
            ClientError::Mount(s) => write!(f, "MOUNT error {s:?}"),
            ClientError::Nfs(s) => write!(f, "NFS error {s}"),
            ClientError::Nfs4 { op, status } => write!(f, "NFSv4 error {status} from op {op}"),
            ClientError::InvalidInput(s) => write!(f, "invalid input: {s}"),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Io(e) => Some(&**e),
            ClientError::Decode(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        ClientError::Io(Arc::new(e))
    }
}

impl From<XdrError> for ClientError {
    fn from(e: XdrError) -> Self {
        ClientError::Decode(e)
    }
}
