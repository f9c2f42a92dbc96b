//! Clients, sessions and stateids (RFC 8881 §18.33-§18.51): the
//! protocol's side; the rules themselves are `rnfsd_v4state`'s.

use rnfsd_proto::nfs4::*;
use rnfsd_rpc::Auth;
use rnfsd_v4state::{
    BindDir, ChannelAttrs, ClientId, ConnDir, CreateSessionArgs, ExchangeIdArgs, Principal,
    SessionId, Stateid, Verifier,
};

use super::compound::Compound;
use super::status::of_state;

/// EXCHANGE_ID flags a client may send (§18.35.3); any other is
/// NFS4ERR_INVAL.
const EID_FLAGS_FROM_CLIENT: u32 = EXCHGID4_FLAG_SUPP_MOVED_REFER
    | EXCHGID4_FLAG_SUPP_MOVED_MIGR
    | EXCHGID4_FLAG_BIND_PRINC_STATEID
    | EXCHGID4_FLAG_MASK_PNFS
    | EXCHGID4_FLAG_UPD_CONFIRMED_REC_A;

/// CREATE_SESSION flags we know (§18.36.3).
const CS_FLAGS: u32 = CREATE_SESSION4_FLAG_PERSIST
    | CREATE_SESSION4_FLAG_CONN_BACK_CHAN
    | CREATE_SESSION4_FLAG_CONN_RDMA;

/// The caller as sessions compare callers (§2.4.3, §18.35.4: a client
/// record belongs to the principal that made it). AUTH_SYS has no
/// principal but its uid and gid (knfsd compares those); AUTH_NONE none.
fn principal(c: &Compound<'_, '_>) -> Principal {
    match &c.ctx.auth {
        Auth::Sys(s) => {
            let mut p = Vec::with_capacity(9);
            p.push(1);
            p.extend_from_slice(&s.uid.to_be_bytes());
            p.extend_from_slice(&s.gid.to_be_bytes());
            Principal(p)
        }
        Auth::None => Principal(vec![0]),
    }
}

pub(super) fn exchange_id(c: &mut Compound<'_, '_>, a: ExchangeId4Args) -> ExchangeId4Res {
    if a.flags & !EID_FLAGS_FROM_CLIENT != 0 {
        return NfsRes4::Fail(Nfsstat4::Inval);
    }
    // SP4_MACH_CRED and SP4_SSV need RPCSEC_GSS (§2.10.8.3): refused.
    if !matches!(a.state_protect, StateProtect4A::None) {
        return NfsRes4::Fail(Nfsstat4::NotSupp);
    }
    let p = principal(c);
    let r = c.nfs4.state.exchange_id(&ExchangeIdArgs {
        owner: &a.clientowner.ownerid.0,
        verifier: Verifier(a.clientowner.verifier.0),
        principal: &p,
        update: a.flags & EXCHGID4_FLAG_UPD_CONFIRMED_REC_A != 0,
    });
    match r {
        Ok(ok) => {
            // No pNFS: a plain NFSv4.1 server (§13.1).
            let mut flags = EXCHGID4_FLAG_USE_NON_PNFS;
            if ok.confirmed {
                flags |= EXCHGID4_FLAG_CONFIRMED_R;
            }
            NfsRes4::Ok(ExchangeId4ResOk {
                clientid: ok.clientid.0,
                sequenceid: ok.sequenceid,
                flags,
                state_protect: StateProtect4R::None,
                server_owner: ServerOwner4 {
                    minor_id: 0,
                    major_id: Opaque1024(c.nfs4.owner.clone()),
                },
                server_scope: Opaque1024(c.nfs4.owner.clone()),
                server_impl_id: Some(NfsImplId4 {
                    domain: Utf8Str(b"rnfsd.dev".to_vec()),
                    name: Utf8Str(format!("rnfsd {}", env!("CARGO_PKG_VERSION")).into_bytes()),
                    date: Nfstime4 {
                        seconds: 0,
                        nseconds: 0,
                    },
                }),
            })
        }
        Err(e) => NfsRes4::Fail(of_state(&e)),
    }
}

fn chan_in(a: &ChannelAttrs4) -> ChannelAttrs {
    ChannelAttrs {
        header_pad_size: a.headerpadsize,
        max_request_size: a.maxrequestsize,
        max_response_size: a.maxresponsesize,
        max_response_size_cached: a.maxresponsesize_cached,
        max_operations: a.maxoperations,
        max_requests: a.maxrequests,
    }
}

fn chan_out(a: &ChannelAttrs) -> ChannelAttrs4 {
    ChannelAttrs4 {
        headerpadsize: a.header_pad_size,
        maxrequestsize: a.max_request_size,
        maxresponsesize: a.max_response_size,
        maxresponsesize_cached: a.max_response_size_cached,
        maxoperations: a.max_operations,
        maxrequests: a.max_requests,
        rdma_ird: None,
    }
}

/// A callback security flavour we can send with (§18.36.3): AUTH_NONE
/// or AUTH_SYS.
fn usable_cb_sec(p: &[CallbackSecParms4]) -> bool {
    p.iter()
        .any(|s| matches!(s, CallbackSecParms4::None | CallbackSecParms4::Sys(_)))
}

pub(super) fn create_session(c: &mut Compound<'_, '_>, a: CreateSession4Args) -> CreateSession4Res {
    if a.flags & !CS_FLAGS != 0 {
        return NfsRes4::Fail(Nfsstat4::Inval);
    }
    // ca_rdma_ird is for RDMA connections only: on TCP it is ignored,
    // and the channels we grant carry none (§18.36.3, knfsd).
    // A back channel we could not authenticate on is no back channel
    // (§18.36.4: the server may refuse; it then says so in SEQUENCE).
    let mut flags = a.flags & !(CREATE_SESSION4_FLAG_PERSIST | CREATE_SESSION4_FLAG_CONN_RDMA);
    if !usable_cb_sec(&a.sec_parms) {
        flags &= !CREATE_SESSION4_FLAG_CONN_BACK_CHAN;
    }
    let p = principal(c);
    let r = c.nfs4.state.create_session(&CreateSessionArgs {
        clientid: ClientId(a.clientid),
        sequence: a.sequence,
        principal: &p,
        flags,
        fore: chan_in(&a.fore_chan_attrs),
        back: chan_in(&a.back_chan_attrs),
        cb_program: a.cb_program,
        conn: c.conn(),
    });
    if let Ok(s) = &r {
        if s.flags & CREATE_SESSION4_FLAG_CONN_BACK_CHAN != 0 {
            probe_back_channel(c, a.clientid, a.cb_program, &a.sec_parms, s.sessionid.0);
        }
    }
    match r {
        Ok(s) => NfsRes4::Ok(CreateSession4ResOk {
            sessionid: SessionId4(s.sessionid.0),
            sequence: s.sequence,
            flags: s.flags,
            fore_chan_attrs: chan_out(&s.fore),
            back_chan_attrs: chan_out(&s.back),
        }),
        Err(e) => NfsRes4::Fail(of_state(&e)),
    }
}

pub(super) fn destroy_session(c: &mut Compound<'_, '_>, a: DestroySession4Args) -> Nfsstat4 {
    let id = SessionId(a.sessionid.0);
    let in_it = c.session() == Some(id);
    // §18.37.3: without SEQUENCE, the connection must be bound to it.
    if c.ticket.is_none() && c.nfs4.state.conn_binding(&id, c.conn()).is_none() {
        return match c.nfs4.state.back_channel(&id) {
            Some(_) => Nfsstat4::ConnNotBoundToSession,
            None => Nfsstat4::BadSession,
        };
    }
    match c.nfs4.state.destroy_session(&id, in_it) {
        Ok(()) => Nfsstat4::Ok,
        Err(e) => of_state(&e),
    }
}

pub(super) fn bind_conn(
    c: &mut Compound<'_, '_>,
    a: BindConnToSession4Args,
) -> BindConnToSession4Res {
    if a.use_conn_in_rdma_mode {
        // No RDMA here; the answer says so (§18.34.3).
    }
    let dir = match a.dir {
        ChannelDirFromClient4::Fore => BindDir::Fore,
        ChannelDirFromClient4::Back => BindDir::Back,
        ChannelDirFromClient4::ForeOrBoth => BindDir::ForeOrBoth,
        ChannelDirFromClient4::BackOrBoth => BindDir::BackOrBoth,
    };
    let id = SessionId(a.sessid.0);
    let r = c.nfs4.state.bind_conn_to_session(&id, c.conn(), dir);
    // A back channel on this connection now: probe it (a client whose
    // path was down rebinds to bring it up, §18.34.3).
    if let (Ok(ConnDir::Back | ConnDir::Both), Some((_, prog, _))) =
        (&r, c.nfs4.state.back_channel(&id))
    {
        if let Some(cid) = c.nfs4.state.session_client(&id) {
            probe_back_channel(c, cid.0, prog, &[CallbackSecParms4::None], id.0);
        }
    }
    match r {
        Ok(d) => NfsRes4::Ok(BindConnToSession4ResOk {
            sessid: a.sessid,
            dir: match d {
                ConnDir::Fore => ChannelDirFromServer4::Fore,
                ConnDir::Back => ChannelDirFromServer4::Back,
                ConnDir::Both => ChannelDirFromServer4::Both,
            },
            use_conn_in_rdma_mode: false,
        }),
        Err(e) => NfsRes4::Fail(of_state(&e)),
    }
}

pub(super) fn backchannel_ctl(c: &mut Compound<'_, '_>, a: BackchannelCtl4Args) -> Nfsstat4 {
    // §18.33.3: the flavours must include one we can use.
    if !usable_cb_sec(&a.sec_parms) {
        return Nfsstat4::Inval;
    }
    // Callbacks (recalls) use the new credential and program from now.
    if let (Ok(h), Some(cred)) = (c.client(), cb_cred(&a.sec_parms)) {
        c.nfs4.deleg.set_cred(h.id(), cred, a.cb_program);
    }
    Nfsstat4::Ok
}

/// The credential callbacks use: the first of `sec` we can send.
fn cb_cred(sec: &[CallbackSecParms4]) -> Option<Auth> {
    sec.iter().find_map(|s| match s {
        CallbackSecParms4::Sys(a) => Some(Auth::Sys(a.clone())),
        CallbackSecParms4::None => Some(Auth::None),
        _ => None,
    })
}

pub(super) fn destroy_clientid(c: &mut Compound<'_, '_>, a: DestroyClientId4Args) -> Nfsstat4 {
    let id = ClientId(a.clientid);
    // §18.50.3: not from a session of the client itself.
    if c.client().is_ok_and(|h| h.id() == id) {
        return Nfsstat4::ClientIdBusy;
    }
    match c.nfs4.state.destroy_clientid(id) {
        Ok(()) => Nfsstat4::Ok,
        Err(e) => of_state(&e),
    }
}

pub(super) fn reclaim_complete(c: &mut Compound<'_, '_>, a: ReclaimComplete4Args) -> Nfsstat4 {
    let h = match c.client() {
        Ok(h) => h,
        Err(s) => return s,
    };
    if a.one_fs && c.cur.is_none() {
        return Nfsstat4::NoFileHandle;
    }
    match c.nfs4.state.reclaim_complete(&h, a.one_fs) {
        Ok(()) => Nfsstat4::Ok,
        Err(e) => of_state(&e),
    }
}

pub(super) fn sid(s: &Stateid4) -> Stateid {
    Stateid {
        seqid: s.seqid,
        other: s.other,
    }
}

pub(super) fn test_stateid(c: &mut Compound<'_, '_>, a: TestStateid4Args) -> TestStateid4Res {
    let h = match c.client() {
        Ok(h) => h,
        Err(s) => return NfsRes4::Fail(s),
    };
    let sids: Vec<Stateid> = a.stateids.iter().map(sid).collect();
    let status_codes = c
        .nfs4
        .state
        .test_stateids(&h, &sids)
        .iter()
        .map(|r| match r {
            Ok(()) => Nfsstat4::Ok,
            Err(e) => of_state(e),
        })
        .collect();
    NfsRes4::Ok(TestStateid4ResOk { status_codes })
}

pub(super) fn free_stateid(c: &mut Compound<'_, '_>, a: FreeStateid4Args) -> Nfsstat4 {
    let h = match c.client() {
        Ok(h) => h,
        Err(s) => return s,
    };
    let s = match c.stateid(&a.stateid) {
        Ok(s) => s,
        Err(e) => return e,
    };
    match c.nfs4.state.free_stateid(&h, &sid(&s)) {
        Ok(()) => Nfsstat4::Ok,
        Err(e) => of_state(&e),
    }
}

/// CB_NULL probes in flight at once (each a short thread: CREATE_SESSION
/// is rare, and past this bound a session's back channel goes unprobed).
const MAX_PROBES: usize = 16;
/// How long a client has to answer the probe.
const PROBE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
static PROBES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A session with a back channel on this connection: probe it with
/// CB_NULL (RFC 8881 §18.36.4, as knfsd's nfsd4_probe_callback), off the
/// request path; a client that does not answer sees
/// SEQ4_STATUS_CB_PATH_DOWN in its SEQUENCE replies until one does.
pub(super) fn probe_back_channel(
    c: &Compound<'_, '_>,
    clientid: u64,
    cb_program: u32,
    sec: &[CallbackSecParms4],
    session: [u8; 16],
) {
    use std::sync::atomic::Ordering;
    let Some(bc) = c.ctx.back_channel() else {
        return;
    };
    let Ok(client) = c.nfs4.state.client(ClientId(clientid)) else {
        return;
    };
    let Some(cred) = cb_cred(sec) else {
        return;
    };
    // Recalls go over this connection (set before the probe answers:
    // delegations wait for that answer).
    c.nfs4.deleg.set_path(
        client.id(),
        bc.clone(),
        cred.clone(),
        cb_program,
        session,
        c.minor,
    );
    if PROBES.fetch_add(1, Ordering::AcqRel) >= MAX_PROBES {
        PROBES.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let state = c.nfs4.state.clone();
    let spawned = std::thread::Builder::new()
        .name("nfsv4-cb-probe".into())
        .spawn(move || {
            let deadline = std::time::Instant::now() + PROBE_WAIT;
            let r = bc.call(cb_program, cb::NFS_CB, cb::CB_NULL, &cred, &[], deadline);
            if let Err(e) = &r {
                tracing::info!(clientid = format!("{clientid:#x}"), error = ?e,
                    "nfsv4: back channel probe failed");
            }
            state.set_callback_down(&client, r.is_err());
            PROBES.fetch_sub(1, Ordering::AcqRel);
        });
    if spawned.is_err() {
        PROBES.fetch_sub(1, Ordering::AcqRel);
    }
}
