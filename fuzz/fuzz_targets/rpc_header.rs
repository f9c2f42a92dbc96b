//! RPC call header and credentials (RFC 5531 §9, appendix A): decode never
//! panics, respects its bounds, and decode∘encode is the identity on
//! everything that decodes. Also the client's reply-header decoder.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnfsd_proto::rpc::{
    encode_accepted, encode_denied, AuthSys, CallHeader, Incoming, ReplyHeader, AUTH_SYS,
    MAX_AUTH_BYTES, MAX_AUTH_GIDS, MAX_MACHINE_NAME,
};
use rnfsd_xdr::{Dec, Enc, Xdr};

fuzz_target!(|data: &[u8]| {
    let mut d = Dec::new(data);
    if let Ok(Incoming::Call(h)) = CallHeader::decode(&mut d) {
        assert!(h.cred.body.len() <= MAX_AUTH_BYTES);
        assert!(h.verf.body.len() <= MAX_AUTH_BYTES);
        let used = d.position();
        let mut e = Enc::new();
        h.encode(&mut e);
        assert_eq!(e.len(), used, "header re-encodes to another size");
        match CallHeader::decode(&mut Dec::new(e.as_slice())) {
            Ok(Incoming::Call(h2)) => assert_eq!(h2, h),
            other => panic!("re-decode failed: {other:?}"),
        }
        if h.cred.flavor == AUTH_SYS {
            auth_sys(h.cred.body);
        }
    }
    // The credential body decoder on its own, as dispatch uses it.
    auth_sys(data);

    // Client side: any reply header that decodes re-encodes to itself.
    let mut d = Dec::new(data);
    if let Ok((xid, h)) = ReplyHeader::decode(&mut d) {
        let mut e = Enc::new();
        match h {
            ReplyHeader::Accepted(s) => encode_accepted(&mut e, xid, s),
            ReplyHeader::Denied(s) => encode_denied(&mut e, xid, s),
        }
        let (x2, h2) = ReplyHeader::decode(&mut Dec::new(e.as_slice())).expect("re-decode");
        assert_eq!((x2, h2), (xid, h));
    }
});

fn auth_sys(b: &[u8]) {
    let mut d = Dec::new(b);
    if let Ok(s) = AuthSys::decode(&mut d) {
        assert!(s.gids.len() <= MAX_AUTH_GIDS);
        assert!(s.machine_name.len() <= MAX_MACHINE_NAME);
        let e = rnfsd_xdr::to_vec(&s);
        assert_eq!(e.len(), d.position());
        assert_eq!(rnfsd_xdr::from_slice::<AuthSys>(&e), Ok(s));
    }
}
