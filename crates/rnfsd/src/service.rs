//! The bridge from the transport to RPC dispatch: one `Service` per set of
//! programs (NFS + MOUNT on the NFS listeners; the port mapper on 111).

use std::sync::Arc;

use rnfsd_transport::{Request, Service};

use crate::rpc::dispatch::{dispatch, Policy};
use crate::rpc::Program;
use crate::state::Server;

pub struct RpcService {
    server: Arc<Server>,
    programs: Vec<&'static Program>,
    policy: Policy,
}

impl RpcService {
    pub fn new(server: Arc<Server>, programs: Vec<&'static Program>, policy: Policy) -> Self {
        RpcService {
            server,
            programs,
            policy,
        }
    }
}

impl Service for RpcService {
    fn call(&self, req: Request) -> Option<Vec<u8>> {
        dispatch(
            &self.server,
            &self.programs,
            &self.policy,
            &req.data,
            req.peer,
            req.local,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::programs::mount::MOUNT;
    use rnfsd_proto::rpc::{AcceptStat, CallHeader, OpaqueAuth, ReplyHeader};
    use rnfsd_xdr::{Dec, Enc};

    #[test]
    fn calls_reach_dispatch() {
        let s = Arc::new(Server {
            exports: vec![],
            write_verifier: [0; 8],
            max_io: 4096,
        });
        let svc = RpcService::new(s, vec![&MOUNT], Policy::default());
        let mut e = Enc::new();
        CallHeader {
            xid: 77,
            rpcvers: 2,
            prog: 100005,
            vers: 3,
            proc_: 0,
            cred: OpaqueAuth::NONE,
            verf: OpaqueAuth::NONE,
        }
        .encode(&mut e);
        let req = |prog_vers: Vec<u8>| Request {
            data: prog_vers,
            peer: "127.0.0.1:1000".parse().unwrap(),
            local: "127.0.0.1:2049".parse().unwrap(),
            conn_id: 1,
        };
        let r = svc.call(req(e.as_slice().to_vec())).unwrap();
        let (xid, h) = ReplyHeader::decode(&mut Dec::new(&r[4..])).unwrap();
        assert_eq!((xid, h), (77, ReplyHeader::Accepted(AcceptStat::Success)));
        // NFS is not in this service's list.
        let mut b = e.into_vec();
        b[12..16].copy_from_slice(&100003u32.to_be_bytes());
        let r = svc.call(req(b)).unwrap();
        let (_, h) = ReplyHeader::decode(&mut Dec::new(&r[4..])).unwrap();
        assert_eq!(h, ReplyHeader::Accepted(AcceptStat::ProgUnavail));
    }
}
