//! ONC RPC v2 message header (RFC 5531 §9) and AUTH_SYS credentials (§A).

use rnfsd_xdr::{Dec, Enc, Result, Xdr, XdrError};

pub const RPC_VERSION: u32 = 2;

pub const MSG_CALL: u32 = 0;
pub const MSG_REPLY: u32 = 1;

pub const AUTH_NONE: u32 = 0;
pub const AUTH_SYS: u32 = 1;

/// RFC 5531 §8.2: opaque_auth bodies are at most 400 bytes.
pub const MAX_AUTH_BYTES: usize = 400;
/// RFC 5531 appendix A: machinename<255>, gids<16>.
pub const MAX_MACHINE_NAME: usize = 255;
pub const MAX_AUTH_GIDS: usize = 16;

/// accept_stat (RFC 5531 §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptStat {
    Success,
    ProgUnavail,
    ProgMismatch { low: u32, high: u32 },
    ProcUnavail,
    GarbageArgs,
    SystemErr,
}

/// auth_stat (RFC 5531 §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum AuthStat {
    Ok = 0,
    BadCred = 1,
    RejectedCred = 2,
    BadVerf = 3,
    RejectedVerf = 4,
    TooWeak = 5,
    InvalidResp = 6,
    Failed = 7,
}

impl AuthStat {
    pub fn from_u32(v: u32) -> Option<Self> {
        use AuthStat::*;
        Some(match v {
            0 => Ok,
            1 => BadCred,
            2 => RejectedCred,
            3 => BadVerf,
            4 => RejectedVerf,
            5 => TooWeak,
            6 => InvalidResp,
            7 => Failed,
            _ => return None,
        })
    }
}

/// reject_stat bodies (RFC 5531 §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectStat {
    RpcMismatch { low: u32, high: u32 },
    AuthError(AuthStat),
}

/// An opaque_auth as received: flavor and a borrowed body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpaqueAuth<'a> {
    pub flavor: u32,
    pub body: &'a [u8],
}

impl<'a> OpaqueAuth<'a> {
    pub const NONE: OpaqueAuth<'static> = OpaqueAuth {
        flavor: AUTH_NONE,
        body: &[],
    };

    pub fn decode(d: &mut Dec<'a>) -> Result<Self> {
        let flavor = d.u32()?;
        let body = d.opaque(MAX_AUTH_BYTES)?;
        Ok(OpaqueAuth { flavor, body })
    }

    pub fn encode(&self, e: &mut Enc) {
        e.u32(self.flavor);
        e.opaque(self.body);
    }
}

/// authsys_parms (RFC 5531 appendix A).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthSys {
    pub stamp: u32,
    pub machine_name: Vec<u8>,
    pub uid: u32,
    pub gid: u32,
    pub gids: Vec<u32>,
}

impl Xdr for AuthSys {
    fn encode(&self, e: &mut Enc) {
        e.u32(self.stamp);
        e.opaque(&self.machine_name);
        e.u32(self.uid);
        e.u32(self.gid);
        e.u32(self.gids.len() as u32);
        for g in &self.gids {
            e.u32(*g);
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        let stamp = d.u32()?;
        let machine_name = d.opaque(MAX_MACHINE_NAME)?.to_vec();
        let uid = d.u32()?;
        let gid = d.u32()?;
        let n = d.array_len(MAX_AUTH_GIDS, 4)?;
        let mut gids = Vec::with_capacity(n);
        for _ in 0..n {
            gids.push(d.u32()?);
        }
        Ok(AuthSys {
            stamp,
            machine_name,
            uid,
            gid,
            gids,
        })
    }
}

/// The fixed part of a CALL message (RFC 5531 §9 call_body). Arguments
/// follow in the decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallHeader<'a> {
    pub xid: u32,
    pub rpcvers: u32,
    pub prog: u32,
    pub vers: u32,
    pub proc_: u32,
    pub cred: OpaqueAuth<'a>,
    pub verf: OpaqueAuth<'a>,
}

/// What decoding the start of a record found.
#[derive(Debug)]
pub enum Incoming<'a> {
    Call(CallHeader<'a>),
    /// A REPLY where a CALL was expected, or any other msg_type: dropped.
    NotACall {
        xid: u32,
    },
}

impl<'a> CallHeader<'a> {
    /// Decode the header of a received record. On a short or malformed header
    /// the caller cannot build a reply (no xid or no header) and drops the
    /// record, as RFC 5531 servers do.
    pub fn decode(d: &mut Dec<'a>) -> Result<Incoming<'a>> {
        let xid = d.u32()?;
        let mtype = d.u32()?;
        if mtype != MSG_CALL {
            return Ok(Incoming::NotACall { xid });
        }
        let rpcvers = d.u32()?;
        let prog = d.u32()?;
        let vers = d.u32()?;
        let proc_ = d.u32()?;
        let cred = OpaqueAuth::decode(d)?;
        let verf = OpaqueAuth::decode(d)?;
        Ok(Incoming::Call(CallHeader {
            xid,
            rpcvers,
            prog,
            vers,
            proc_,
            cred,
            verf,
        }))
    }

    pub fn encode(&self, e: &mut Enc) {
        e.u32(self.xid);
        e.u32(MSG_CALL);
        e.u32(self.rpcvers);
        e.u32(self.prog);
        e.u32(self.vers);
        e.u32(self.proc_);
        self.cred.encode(e);
        self.verf.encode(e);
    }
}

/// Encode an accepted reply header with a null verifier. For `Success` the
/// caller appends the results afterwards.
pub fn encode_accepted(e: &mut Enc, xid: u32, stat: AcceptStat) {
    e.u32(xid);
    e.u32(MSG_REPLY);
    e.u32(0); // MSG_ACCEPTED
    OpaqueAuth::NONE.encode(e);
    match stat {
        AcceptStat::Success => e.u32(0),
        AcceptStat::ProgUnavail => e.u32(1),
        AcceptStat::ProgMismatch { low, high } => {
            e.u32(2);
            e.u32(low);
            e.u32(high);
        }
        AcceptStat::ProcUnavail => e.u32(3),
        AcceptStat::GarbageArgs => e.u32(4),
        AcceptStat::SystemErr => e.u32(5),
    }
}

/// Encode a denied reply (RFC 5531 §9 rejected_reply).
pub fn encode_denied(e: &mut Enc, xid: u32, stat: RejectStat) {
    e.u32(xid);
    e.u32(MSG_REPLY);
    e.u32(1); // MSG_DENIED
    match stat {
        RejectStat::RpcMismatch { low, high } => {
            e.u32(0);
            e.u32(low);
            e.u32(high);
        }
        RejectStat::AuthError(a) => {
            e.u32(1);
            e.u32(a as u32);
        }
    }
}

/// A decoded reply header, for clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyHeader {
    Accepted(AcceptStat),
    Denied(RejectStat),
}

/// Decode a reply's xid (first word) without consuming anything else.
pub fn peek_xid(b: &[u8]) -> Option<u32> {
    b.get(..4)
        .map(|x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]))
}

impl ReplyHeader {
    /// Decode xid and reply header; results follow in `d` on success.
    pub fn decode(d: &mut Dec<'_>) -> Result<(u32, ReplyHeader)> {
        let xid = d.u32()?;
        if d.u32()? != MSG_REPLY {
            return Err(XdrError::BadDiscriminant);
        }
        match d.u32()? {
            0 => {
                let _verf = OpaqueAuth::decode(d)?;
                let st = match d.u32()? {
                    0 => AcceptStat::Success,
                    1 => AcceptStat::ProgUnavail,
                    2 => AcceptStat::ProgMismatch {
                        low: d.u32()?,
                        high: d.u32()?,
                    },
                    3 => AcceptStat::ProcUnavail,
                    4 => AcceptStat::GarbageArgs,
                    5 => AcceptStat::SystemErr,
                    _ => return Err(XdrError::BadDiscriminant),
                };
                Ok((xid, ReplyHeader::Accepted(st)))
            }
            1 => {
                let st = match d.u32()? {
                    0 => RejectStat::RpcMismatch {
                        low: d.u32()?,
                        high: d.u32()?,
                    },
                    1 => RejectStat::AuthError(
                        AuthStat::from_u32(d.u32()?).ok_or(XdrError::BadDiscriminant)?,
                    ),
                    _ => return Err(XdrError::BadDiscriminant),
                };
                Ok((xid, ReplyHeader::Denied(st)))
            }
            _ => Err(XdrError::BadDiscriminant),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_header_round_trip() {
        let sys = rnfsd_xdr::to_vec(&AuthSys {
            stamp: 1,
            machine_name: b"host".to_vec(),
            uid: 1000,
            gid: 100,
            gids: vec![1, 2, 3],
        });
        let h = CallHeader {
            xid: 7,
            rpcvers: 2,
            prog: 100003,
            vers: 3,
            proc_: 1,
            cred: OpaqueAuth {
                flavor: AUTH_SYS,
                body: &sys,
            },
            verf: OpaqueAuth::NONE,
        };
        let mut e = Enc::new();
        h.encode(&mut e);
        let mut d = Dec::new(e.as_slice());
        match CallHeader::decode(&mut d).unwrap() {
            Incoming::Call(c) => {
                assert_eq!(c, h);
                let a: AuthSys = rnfsd_xdr::from_slice(c.cred.body).unwrap();
                assert_eq!(a.gids, vec![1, 2, 3]);
            }
            _ => panic!("not a call"),
        }
    }

    #[test]
    fn reply_round_trip() {
        for st in [
            AcceptStat::Success,
            AcceptStat::ProgMismatch { low: 3, high: 3 },
            AcceptStat::GarbageArgs,
        ] {
            let mut e = Enc::new();
            encode_accepted(&mut e, 9, st);
            let (xid, h) = ReplyHeader::decode(&mut Dec::new(e.as_slice())).unwrap();
            assert_eq!((xid, h), (9, ReplyHeader::Accepted(st)));
        }
        let mut e = Enc::new();
        encode_denied(&mut e, 5, RejectStat::AuthError(AuthStat::TooWeak));
        let (_, h) = ReplyHeader::decode(&mut Dec::new(e.as_slice())).unwrap();
        assert_eq!(
            h,
            ReplyHeader::Denied(RejectStat::AuthError(AuthStat::TooWeak))
        );
    }

    #[test]
    fn too_many_gids_is_garbage() {
        let mut e = Enc::new();
        e.u32(0);
        e.opaque(b"h");
        e.u32(0);
        e.u32(0);
        e.u32(17);
        for _ in 0..17 {
            e.u32(0);
        }
        assert!(rnfsd_xdr::from_slice::<AuthSys>(e.as_slice()).is_err());
    }
}
