//! Client IDs, sessions and stateids: EXCHANGE_ID, CREATE_SESSION,
//! DESTROY_SESSION, SEQUENCE, BIND_CONN_TO_SESSION, BACKCHANNEL_CTL,
//! DESTROY_CLIENTID, RECLAIM_COMPLETE, FREE_STATEID, TEST_STATEID,
//! SET_SSV (RFC 8881 §18.33-§18.51), and NFSv4.0's RENEW, SETCLIENTID and
//! SETCLIENTID_CONFIRM, which a 4.1 server answers NFS4ERR_NOTSUPP.

use rnfsd_xdr::{xdr_enum, xdr_struct, Dec, Enc, Result, Xdr, XdrError};

use crate::nfs4::{
    decode_array, decode_at_most_one, encode_array, fail_status, types::decode_sec_parms,
    CallbackSecParms4, ChannelAttrs4, ClientOwner4, Netaddr4, NfsImplId4, NfsRes4, Nfsstat4,
    Opaque1024, ServerOwner4, SessionId4, StateProtect4A, StateProtect4R, Stateid4, Verifier4,
    MAX_TEST_STATEIDS, NFS4_SESSIONID_SIZE,
};

/// EXCHANGE_ID4args (RFC 8881 §18.35).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeId4Args {
    pub clientowner: ClientOwner4,
    pub flags: u32,
    pub state_protect: StateProtect4A,
    /// eia_client_impl_id<1>.
    pub client_impl_id: Option<NfsImplId4>,
}

impl Xdr for ExchangeId4Args {
    fn encode(&self, e: &mut Enc) {
        self.clientowner.encode(e);
        e.u32(self.flags);
        self.state_protect.encode(e);
        // T<1> has the wire form of optional data.
        self.client_impl_id.encode(e);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(ExchangeId4Args {
            clientowner: ClientOwner4::decode(d)?,
            flags: d.u32()?,
            state_protect: StateProtect4A::decode(d)?,
            client_impl_id: decode_at_most_one(d)?,
        })
    }
}

/// EXCHANGE_ID4resok (RFC 8881 §18.35).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeId4ResOk {
    pub clientid: u64,
    pub sequenceid: u32,
    pub flags: u32,
    pub state_protect: StateProtect4R,
    pub server_owner: ServerOwner4,
    /// eir_server_scope<NFS4_OPAQUE_LIMIT>.
    pub server_scope: Opaque1024,
    /// eir_server_impl_id<1>.
    pub server_impl_id: Option<NfsImplId4>,
}

impl Xdr for ExchangeId4ResOk {
    fn encode(&self, e: &mut Enc) {
        e.u64(self.clientid);
        e.u32(self.sequenceid);
        e.u32(self.flags);
        self.state_protect.encode(e);
        self.server_owner.encode(e);
        self.server_scope.encode(e);
        self.server_impl_id.encode(e);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(ExchangeId4ResOk {
            clientid: d.u64()?,
            sequenceid: d.u32()?,
            flags: d.u32()?,
            state_protect: StateProtect4R::decode(d)?,
            server_owner: ServerOwner4::decode(d)?,
            server_scope: Opaque1024::decode(d)?,
            server_impl_id: decode_at_most_one(d)?,
        })
    }
}
pub type ExchangeId4Res = NfsRes4<ExchangeId4ResOk>;

/// CREATE_SESSION4args (RFC 8881 §18.36).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateSession4Args {
    pub clientid: u64,
    pub sequence: u32,
    pub flags: u32,
    pub fore_chan_attrs: ChannelAttrs4,
    pub back_chan_attrs: ChannelAttrs4,
    /// The callback program number the client serves (the CB program's
    /// number on the back channel).
    pub cb_program: u32,
    /// At most `MAX_SMALL_ARRAY` entries.
    pub sec_parms: Vec<CallbackSecParms4>,
}

impl Xdr for CreateSession4Args {
    fn encode(&self, e: &mut Enc) {
        e.u64(self.clientid);
        e.u32(self.sequence);
        e.u32(self.flags);
        self.fore_chan_attrs.encode(e);
        self.back_chan_attrs.encode(e);
        e.u32(self.cb_program);
        encode_array(e, &self.sec_parms);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(CreateSession4Args {
            clientid: d.u64()?,
            sequence: d.u32()?,
            flags: d.u32()?,
            fore_chan_attrs: ChannelAttrs4::decode(d)?,
            back_chan_attrs: ChannelAttrs4::decode(d)?,
            cb_program: d.u32()?,
            sec_parms: decode_sec_parms(d)?,
        })
    }
}

xdr_struct! {
    /// CREATE_SESSION4resok (RFC 8881 §18.36).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct CreateSession4ResOk {
        pub sessionid: SessionId4,
        pub sequence: u32,
        pub flags: u32,
        pub fore_chan_attrs: ChannelAttrs4,
        pub back_chan_attrs: ChannelAttrs4,
    }
}
pub type CreateSession4Res = NfsRes4<CreateSession4ResOk>;

xdr_struct! {
    /// DESTROY_SESSION4args (RFC 8881 §18.37).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct DestroySession4Args { pub sessionid: SessionId4 }
}

/// SEQUENCE4args (RFC 8881 §18.46).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sequence4Args {
    pub sessionid: SessionId4,
    pub sequenceid: u32,
    pub slotid: u32,
    pub highest_slotid: u32,
    pub cachethis: bool,
}

/// SEQUENCE4resok (RFC 8881 §18.46).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sequence4ResOk {
    pub sessionid: SessionId4,
    pub sequenceid: u32,
    pub slotid: u32,
    pub highest_slotid: u32,
    pub target_highest_slotid: u32,
    pub status_flags: u32,
}

/// SEQUENCE4args on the wire: sessionid4, three uint32 and a bool.
const SEQUENCE4ARGS_LEN: usize = NFS4_SESSIONID_SIZE + 4 * 4;
/// SEQUENCE4resok on the wire: sessionid4 and five uint32.
const SEQUENCE4RESOK_LEN: usize = NFS4_SESSIONID_SIZE + 5 * 4;

/// The big-endian word at byte `at` of a fixed-size record.
fn word<const N: usize>(b: &[u8; N], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Reads a fixed-size record whole (one bounds check, not one per field).
fn fixed<'a, const N: usize>(d: &mut Dec<'a>) -> Result<&'a [u8; N]> {
    d.opaque_fixed(N)?.try_into().map_err(|_| XdrError::Short)
}

// Every compound's first operation: read and written a record at a time,
// the same bytes field by field decoding reads.
impl Xdr for Sequence4Args {
    fn encode(&self, e: &mut Enc) {
        let mut b = [0u8; SEQUENCE4ARGS_LEN];
        b[..16].copy_from_slice(&self.sessionid.0);
        b[16..20].copy_from_slice(&self.sequenceid.to_be_bytes());
        b[20..24].copy_from_slice(&self.slotid.to_be_bytes());
        b[24..28].copy_from_slice(&self.highest_slotid.to_be_bytes());
        b[28..32].copy_from_slice(&u32::from(self.cachethis).to_be_bytes());
        e.raw(&b);
    }
    #[inline]
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        let b = fixed::<SEQUENCE4ARGS_LEN>(d)?;
        let mut sessionid = [0u8; NFS4_SESSIONID_SIZE];
        sessionid.copy_from_slice(&b[..NFS4_SESSIONID_SIZE]);
        // RFC 4506 §4.4: only 0 and 1 are booleans.
        let cachethis = match word(b, 28) {
            0 => false,
            1 => true,
            _ => return Err(XdrError::BadBool),
        };
        Ok(Sequence4Args {
            sessionid: SessionId4(sessionid),
            sequenceid: word(b, 16),
            slotid: word(b, 20),
            highest_slotid: word(b, 24),
            cachethis,
        })
    }
}

impl Xdr for Sequence4ResOk {
    #[inline]
    fn encode(&self, e: &mut Enc) {
        let mut b = [0u8; SEQUENCE4RESOK_LEN];
        b[..16].copy_from_slice(&self.sessionid.0);
        let words = [
            self.sequenceid,
            self.slotid,
            self.highest_slotid,
            self.target_highest_slotid,
            self.status_flags,
        ];
        for (i, w) in words.iter().enumerate() {
            b[16 + 4 * i..20 + 4 * i].copy_from_slice(&w.to_be_bytes());
        }
        e.raw(&b);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        let b = fixed::<SEQUENCE4RESOK_LEN>(d)?;
        let mut sessionid = [0u8; NFS4_SESSIONID_SIZE];
        sessionid.copy_from_slice(&b[..NFS4_SESSIONID_SIZE]);
        Ok(Sequence4ResOk {
            sessionid: SessionId4(sessionid),
            sequenceid: word(b, 16),
            slotid: word(b, 20),
            highest_slotid: word(b, 24),
            target_highest_slotid: word(b, 28),
            status_flags: word(b, 32),
        })
    }
}
pub type Sequence4Res = NfsRes4<Sequence4ResOk>;

xdr_enum! {
    /// channel_dir_from_client4 (RFC 8881 §18.34).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum ChannelDirFromClient4 {
        Fore = 1,
        Back = 2,
        ForeOrBoth = 3,
        BackOrBoth = 7,
    }
}

xdr_enum! {
    /// channel_dir_from_server4 (RFC 8881 §18.34).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum ChannelDirFromServer4 {
        Fore = 1,
        Back = 2,
        Both = 3,
    }
}

xdr_struct! {
    /// BIND_CONN_TO_SESSION4args (RFC 8881 §18.34).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct BindConnToSession4Args {
        pub sessid: SessionId4,
        pub dir: ChannelDirFromClient4,
        pub use_conn_in_rdma_mode: bool,
    }
}

xdr_struct! {
    /// BIND_CONN_TO_SESSION4resok (RFC 8881 §18.34).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct BindConnToSession4ResOk {
        pub sessid: SessionId4,
        pub dir: ChannelDirFromServer4,
        pub use_conn_in_rdma_mode: bool,
    }
}
pub type BindConnToSession4Res = NfsRes4<BindConnToSession4ResOk>;

/// BACKCHANNEL_CTL4args (RFC 8881 §18.33).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackchannelCtl4Args {
    pub cb_program: u32,
    /// At most `MAX_SMALL_ARRAY` entries.
    pub sec_parms: Vec<CallbackSecParms4>,
}

impl Xdr for BackchannelCtl4Args {
    fn encode(&self, e: &mut Enc) {
        e.u32(self.cb_program);
        encode_array(e, &self.sec_parms);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(BackchannelCtl4Args {
            cb_program: d.u32()?,
            sec_parms: decode_sec_parms(d)?,
        })
    }
}

xdr_struct! {
    /// DESTROY_CLIENTID4args (RFC 8881 §18.50).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct DestroyClientId4Args { pub clientid: u64 }
}

xdr_struct! {
    /// RECLAIM_COMPLETE4args (RFC 8881 §18.51).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ReclaimComplete4Args { pub one_fs: bool }
}

xdr_struct! {
    /// FREE_STATEID4args (RFC 8881 §18.38).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct FreeStateid4Args { pub stateid: Stateid4 }
}

/// TEST_STATEID4args (RFC 8881 §18.48): at most `MAX_TEST_STATEIDS`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TestStateid4Args {
    pub stateids: Vec<Stateid4>,
}

impl Xdr for TestStateid4Args {
    fn encode(&self, e: &mut Enc) {
        encode_array(e, &self.stateids);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        let stateids = decode_array(d, MAX_TEST_STATEIDS, Stateid4::XDR_LEN, Stateid4::decode)?;
        Ok(TestStateid4Args { stateids })
    }
}

/// TEST_STATEID4resok (RFC 8881 §18.48): one status per stateid.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TestStateid4ResOk {
    pub status_codes: Vec<Nfsstat4>,
}

impl Xdr for TestStateid4ResOk {
    fn encode(&self, e: &mut Enc) {
        encode_array(e, &self.status_codes);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        let status_codes = decode_array(d, MAX_TEST_STATEIDS, 4, Nfsstat4::decode)?;
        Ok(TestStateid4ResOk { status_codes })
    }
}
pub type TestStateid4Res = NfsRes4<TestStateid4ResOk>;

xdr_struct! {
    /// SET_SSV4args (RFC 8881 §18.47): decoded so that a server without
    /// SSV can answer it; both bounded by NFS4_OPAQUE_LIMIT.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct SetSsv4Args { pub ssv: Opaque1024, pub digest: Opaque1024 }
}
/// SET_SSV4res: the resok is the digest.
pub type SetSsv4Res = NfsRes4<Opaque1024>;

xdr_struct! {
    /// RENEW4args (RFC 5662; NFSv4.0 only, RFC 8881 §17).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Renew4Args { pub clientid: u64 }
}

xdr_struct! {
    /// nfs_client_id4 (RFC 5662): NFSv4.0's client owner.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct NfsClientId4 { pub verifier: Verifier4, pub id: Opaque1024 }
}

xdr_struct! {
    /// cb_client4 (RFC 5662): NFSv4.0's callback address.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct CbClient4 { pub cb_program: u32, pub cb_location: Netaddr4 }
}

xdr_struct! {
    /// SETCLIENTID4args (RFC 5662; NFSv4.0 only, RFC 8881 §17).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct SetClientId4Args {
        pub client: NfsClientId4,
        pub callback: CbClient4,
        pub callback_ident: u32,
    }
}

/// SETCLIENTID4res (RFC 5662): NFS4ERR_CLID_INUSE carries the address in
/// use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetClientId4Res {
    Ok {
        clientid: u64,
        setclientid_confirm: Verifier4,
    },
    ClidInUse(Netaddr4),
    /// Any other status; CLID_INUSE encodes as SERVERFAULT.
    Fail(Nfsstat4),
}

impl SetClientId4Res {
    pub fn status(&self) -> Nfsstat4 {
        match self {
            SetClientId4Res::Ok { .. } => Nfsstat4::Ok,
            SetClientId4Res::ClidInUse(_) => Nfsstat4::ClidInUse,
            SetClientId4Res::Fail(s) => *s,
        }
    }
}

impl Xdr for SetClientId4Res {
    fn encode(&self, e: &mut Enc) {
        match self {
            SetClientId4Res::Ok {
                clientid,
                setclientid_confirm,
            } => {
                Nfsstat4::Ok.encode(e);
                e.u64(*clientid);
                setclientid_confirm.encode(e);
            }
            SetClientId4Res::ClidInUse(a) => {
                Nfsstat4::ClidInUse.encode(e);
                a.encode(e);
            }
            SetClientId4Res::Fail(s) => fail_status(*s, &[Nfsstat4::ClidInUse]).encode(e),
        }
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(match Nfsstat4::decode(d)? {
            Nfsstat4::Ok => SetClientId4Res::Ok {
                clientid: d.u64()?,
                setclientid_confirm: Verifier4::decode(d)?,
            },
            Nfsstat4::ClidInUse => SetClientId4Res::ClidInUse(Netaddr4::decode(d)?),
            s => SetClientId4Res::Fail(s),
        })
    }
}

xdr_struct! {
    /// SETCLIENTID_CONFIRM4args (RFC 5662; NFSv4.0 only).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct SetClientIdConfirm4Args { pub clientid: u64, pub setclientid_confirm: Verifier4 }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SEQUENCE's record-at-a-time forms read and write what field by
    /// field XDR does: sessionid4, then each uint32 big-endian.
    #[test]
    fn sequence_records_are_their_fields_in_order() {
        let a = Sequence4Args {
            sessionid: SessionId4(*b"0123456789abcdef"),
            sequenceid: 0x0102_0304,
            slotid: 5,
            highest_slotid: 0xffff_fffe,
            cachethis: true,
        };
        let mut e = Enc::new();
        a.sessionid.encode(&mut e);
        for w in [a.sequenceid, a.slotid, a.highest_slotid] {
            e.u32(w);
        }
        e.bool(a.cachethis);
        assert_eq!(rnfsd_xdr::to_vec(&a), e.as_slice());
        assert_eq!(rnfsd_xdr::from_slice::<Sequence4Args>(e.as_slice()), Ok(a));
        // Only 0 and 1 are booleans (RFC 4506 §4.4); a short record fails.
        let mut b = e.into_vec();
        b[31] = 2;
        assert_eq!(
            Sequence4Args::decode(&mut Dec::new(&b)),
            Err(XdrError::BadBool)
        );
        assert!(Sequence4Args::decode(&mut Dec::new(&b[..31])).is_err());

        let r = Sequence4ResOk {
            sessionid: a.sessionid,
            sequenceid: 1,
            slotid: 2,
            highest_slotid: 3,
            target_highest_slotid: 4,
            status_flags: 0x8000_0001,
        };
        let mut e = Enc::new();
        r.sessionid.encode(&mut e);
        for w in [1, 2, 3, 4, 0x8000_0001] {
            e.u32(w);
        }
        assert_eq!(rnfsd_xdr::to_vec(&r), e.as_slice());
        assert_eq!(rnfsd_xdr::from_slice::<Sequence4ResOk>(e.as_slice()), Ok(r));
        assert!(Sequence4ResOk::decode(&mut Dec::new(&e.as_slice()[..35])).is_err());
    }
}
