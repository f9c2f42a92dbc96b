//! Credentials (RFC 5531 §8.2, appendix A), decoded as knfsd's
//! `svcauth_null_accept` and `svcauth_unix_accept` do.

use rnfsd_proto::rpc::{AuthStat, AuthSys, AUTH_NONE, AUTH_SYS, MAX_AUTH_BYTES};
use rnfsd_xdr::Dec;

/// The credential a call carried, after decoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    None,
    Sys(AuthSys),
}

/// Why the credential or verifier was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthFail {
    /// The credential or verifier ran past the record (knfsd: SVC_GARBAGE).
    Garbage,
    Denied(AuthStat),
}

/// Decodes the credential and verifier that start at `d` (right after the
/// fixed call header); `d` is left at the arguments.
pub(crate) fn decode(d: &mut Dec<'_>) -> Result<Auth, AuthFail> {
    let flavor = d.u32().map_err(|_| AuthFail::Garbage)?;
    let auth = match flavor {
        AUTH_NONE => {
            let len = d.u32().map_err(|_| AuthFail::Garbage)?;
            if len != 0 {
                return Err(AuthFail::Denied(AuthStat::BadCred));
            }
            Auth::None
        }
        AUTH_SYS => {
            let len = d.u32().map_err(|_| AuthFail::Garbage)? as usize;
            if len > MAX_AUTH_BYTES {
                return Err(AuthFail::Denied(AuthStat::BadCred));
            }
            let body = d.opaque_fixed(len).map_err(|_| AuthFail::Garbage)?;
            // The body must be exactly one authsys_parms within its bounds.
            let sys: AuthSys =
                rnfsd_xdr::from_slice(body).map_err(|_| AuthFail::Denied(AuthStat::BadCred))?;
            Auth::Sys(sys)
        }
        // knfsd answers any flavor it has no handler for with BADCRED.
        _ => return Err(AuthFail::Denied(AuthStat::BadCred)),
    };
    // Both flavors take only a null verifier.
    let vflavor = d.u32().map_err(|_| AuthFail::Garbage)?;
    let vlen = d.u32().map_err(|_| AuthFail::Garbage)?;
    if vflavor != AUTH_NONE || vlen != 0 {
        return Err(AuthFail::Denied(AuthStat::BadVerf));
    }
    Ok(auth)
}
