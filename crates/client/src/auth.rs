//! Call credentials (RFC 5531 §8.2, appendix A).

use std::sync::Arc;

use rnfsd_proto::rpc::{AuthSys, OpaqueAuth, AUTH_NONE, AUTH_SYS};

/// A credential to send with calls. The body is encoded once here, so a call
/// only copies bytes; cloning is a reference-count bump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Auth {
    flavor: u32,
    body: Arc<[u8]>,
}

impl Default for Auth {
    fn default() -> Self {
        Auth::none()
    }
}

impl Auth {
    /// AUTH_NONE.
    pub fn none() -> Self {
        Auth {
            flavor: AUTH_NONE,
            body: Arc::from(&[][..]),
        }
    }

    /// AUTH_SYS from its parameters. Values the server must reject (more
    /// than 16 gids, a machine name over 255 bytes) are sent as given, so
    /// tests can exercise that rejection.
    pub fn sys(uid: u32, gid: u32, gids: &[u32], machine_name: &str) -> Self {
        Self::from_auth_sys(&AuthSys {
            stamp: 0,
            machine_name: machine_name.as_bytes().to_vec(),
            uid,
            gid,
            gids: gids.to_vec(),
        })
    }

    /// AUTH_SYS for `uid`/`gid` with no supplementary groups and machine
    /// name "rnfsd-client".
    pub fn unix(uid: u32, gid: u32) -> Self {
        Self::sys(uid, gid, &[], "rnfsd-client")
    }

    /// AUTH_SYS from a full `authsys_parms`.
    pub fn from_auth_sys(p: &AuthSys) -> Self {
        Auth {
            flavor: AUTH_SYS,
            body: Arc::from(rnfsd_xdr::to_vec(p)),
        }
    }

    /// Any flavor with any body, sent verbatim (for negative tests: unknown
    /// flavors, malformed AUTH_SYS bodies, bodies over 400 bytes).
    pub fn raw(flavor: u32, body: &[u8]) -> Self {
        Auth {
            flavor,
            body: Arc::from(body),
        }
    }

    pub fn flavor(&self) -> u32 {
        self.flavor
    }

    pub fn body(&self) -> &[u8] {
        &self.body
    }

    pub(crate) fn opaque(&self) -> OpaqueAuth<'_> {
        OpaqueAuth {
            flavor: self.flavor,
            body: &self.body,
        }
    }
}
