//! The one reader of a call's fixed header (RFC 5531 §9 call_body), used
//! where the event loop plans a record and by dispatch for a record nobody
//! planned. It reads the fixed words and steps over the credential and the
//! verifier by their lengths; their contents are decoded once, by dispatch
//! (`auth.rs`).

use rnfsd_proto::rpc::{MAX_AUTH_BYTES, MSG_CALL, MSG_REPLY};
use rnfsd_xdr::Dec;

/// The fixed words of a call: xid, then (after msg_type CALL) rpcvers,
/// prog, vers, proc.
pub const FIXED: usize = 24;

/// A call's fixed header, and where its arguments begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peek {
    pub xid: u32,
    pub rpcvers: u32,
    pub prog: u32,
    pub vers: u32,
    pub proc_: u32,
    /// Offset of the arguments: past a credential and a verifier that fit
    /// the record and their bound. None when they do not (dispatch decodes
    /// them and answers why).
    pub args_at: Option<usize>,
}

/// The record's fixed header. None when there is nothing to answer: too
/// short for one, or not a CALL (RFC 5531 servers drop those, as knfsd's
/// `svc_process` does).
pub fn peek(record: &[u8]) -> Option<Peek> {
    let mut d = Dec::new(record);
    let xid = d.u32().ok()?;
    if d.u32().ok()? != MSG_CALL {
        return None;
    }
    let (rpcvers, prog, vers, proc_) = (d.u32().ok()?, d.u32().ok()?, d.u32().ok()?, d.u32().ok()?);
    let skip = |d: &mut Dec<'_>| -> Option<()> {
        let _flavor = d.u32().ok()?;
        d.opaque(MAX_AUTH_BYTES).ok().map(|_| ())
    };
    let args_at = skip(&mut d)
        .and_then(|()| skip(&mut d))
        .map(|()| d.position());
    Some(Peek {
        xid,
        rpcvers,
        prog,
        vers,
        proc_,
        args_at,
    })
}

/// Whether the record is a REPLY (msg_type 1, RFC 5531 §9): an answer to
/// a call this server sent (a back channel's).
pub fn is_reply(record: &[u8]) -> bool {
    record
        .get(4..8)
        .is_some_and(|w| w == MSG_REPLY.to_be_bytes().as_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[u32]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_be_bytes()).collect()
    }

    #[test]
    fn reads_the_fixed_words_and_steps_over_the_credential() {
        assert_eq!(peek(&words(&[9, 0, 2, 100003, 3])), None, "short");
        assert_eq!(peek(&words(&[9, 1, 2, 100003, 3, 1])), None, "a reply");
        assert!(is_reply(&words(&[9, 1, 0])));
        assert!(!is_reply(&words(&[9, 0, 2])) && !is_reply(&words(&[9])));
        let p = peek(&words(&[9, 0, 2, 100003, 3, 1, 1, 4, 7, 0, 0, 42])).unwrap();
        assert_eq!(
            (p.xid, p.rpcvers, p.prog, p.vers, p.proc_),
            (9, 2, 100003, 3, 1)
        );
        assert_eq!(p.args_at, Some(44));
        // A credential past the record, or over its bound.
        let p = peek(&words(&[9, 0, 2, 100003, 3, 1, 1, 40])).unwrap();
        assert_eq!(p.args_at, None);
        let p = peek(&words(&[9, 0, 2, 100003, 3, 1, 1, 404])).unwrap();
        assert_eq!(p.args_at, None);
    }

    proptest::proptest! {
        /// Any bytes: no panic, and an offset inside the record.
        /// (A failure prints its minimal input and is saved under
        /// proptest-regressions/; PROPTEST_RNG_SEED replays a run.)
        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            if let Some(p) = peek(&b) {
                proptest::prop_assert!(p.args_at.is_none_or(|a| a <= b.len()));
            }
        }
    }
}
