//! proptest strategies for every NFSv4.1 type, shared by the nfs4 test
//! files: the basic types and every operation's arguments here, results
//! and callback operations in `res`.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use rnfsd_proto::nfs4::*;
use rnfsd_proto::rpc::AuthSys;

pub mod res;

pub fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..=max)
}

pub fn fh() -> impl Strategy<Value = NfsFh4> {
    bytes(NFS4_FHSIZE).prop_map(NfsFh4)
}

pub fn verifier() -> impl Strategy<Value = Verifier4> {
    any::<[u8; 8]>().prop_map(Verifier4)
}

pub fn sessionid() -> impl Strategy<Value = SessionId4> {
    any::<[u8; 16]>().prop_map(SessionId4)
}

pub fn stateid() -> impl Strategy<Value = Stateid4> {
    (any::<u32>(), any::<[u8; 12]>()).prop_map(|(seqid, other)| Stateid4 { seqid, other })
}

pub fn bitmap() -> impl Strategy<Value = Bitmap4> {
    vec(any::<u32>(), 0..=MAX_BITMAP_WORDS).prop_map(|w| Bitmap4::from_words(&w).unwrap())
}

pub fn fattr() -> impl Strategy<Value = Fattr4> {
    (bitmap(), bytes(40)).prop_map(|(attrmask, attr_vals)| Fattr4 {
        attrmask,
        attr_vals,
    })
}

pub fn component() -> impl Strategy<Value = Component4> {
    bytes(24).prop_map(Component4)
}

pub fn utf8() -> impl Strategy<Value = Utf8Str> {
    bytes(24).prop_map(Utf8Str)
}

pub fn opaque1024() -> impl Strategy<Value = Opaque1024> {
    bytes(40).prop_map(Opaque1024)
}

pub fn time() -> impl Strategy<Value = Nfstime4> {
    (any::<i64>(), any::<u32>()).prop_map(|(seconds, nseconds)| Nfstime4 { seconds, nseconds })
}

pub fn cinfo() -> impl Strategy<Value = ChangeInfo4> {
    (any::<bool>(), any::<u64>(), any::<u64>()).prop_map(|(atomic, before, after)| ChangeInfo4 {
        atomic,
        before,
        after,
    })
}

pub fn owner() -> impl Strategy<Value = StateOwner4> {
    (any::<u64>(), opaque1024()).prop_map(|(clientid, owner)| StateOwner4 { clientid, owner })
}

pub fn netaddr() -> impl Strategy<Value = Netaddr4> {
    (bytes(12), bytes(30)).prop_map(|(n, a)| Netaddr4 {
        netid: NetStr(n),
        addr: NetStr(a),
    })
}

pub fn ace() -> impl Strategy<Value = Nfsace4> {
    (any::<(u32, u32, u32)>(), utf8()).prop_map(|((acetype, flag, access_mask), who)| Nfsace4 {
        acetype,
        flag,
        access_mask,
        who,
    })
}

pub fn impl_id() -> impl Strategy<Value = NfsImplId4> {
    (utf8(), utf8(), time()).prop_map(|(domain, name, date)| NfsImplId4 { domain, name, date })
}

pub fn sp_ops() -> impl Strategy<Value = StateProtectOps4> {
    (bitmap(), bitmap()).prop_map(|(must_enforce, must_allow)| StateProtectOps4 {
        must_enforce,
        must_allow,
    })
}

pub fn oids() -> impl Strategy<Value = Vec<SecOid4>> {
    vec(bytes(12).prop_map(SecOid4), 0..3)
}

pub fn sp4a() -> impl Strategy<Value = StateProtect4A> {
    prop_oneof![
        Just(StateProtect4A::None),
        sp_ops().prop_map(StateProtect4A::MachCred),
        (sp_ops(), oids(), oids(), any::<(u32, u32)>()).prop_map(|(ops, h, en, (w, n))| {
            StateProtect4A::Ssv(SsvSpParms4 {
                ops,
                hash_algs: h,
                encr_algs: en,
                window: w,
                num_gss_handles: n,
            })
        }),
    ]
}

pub fn sp4r() -> impl Strategy<Value = StateProtect4R> {
    prop_oneof![
        Just(StateProtect4R::None),
        sp_ops().prop_map(StateProtect4R::MachCred),
        (
            sp_ops(),
            any::<(u32, u32, u32, u32)>(),
            vec(bytes(8).prop_map(GssHandle4), 0..3)
        )
            .prop_map(
                |(ops, (a, b, c, w), handles)| StateProtect4R::Ssv(SsvProtInfo4 {
                    ops,
                    hash_alg: a,
                    encr_alg: b,
                    ssv_len: c,
                    window: w,
                    handles,
                })
            ),
    ]
}

pub fn chan() -> impl Strategy<Value = ChannelAttrs4> {
    (any::<[u32; 6]>(), any::<Option<u32>>()).prop_map(|(a, rdma_ird)| ChannelAttrs4 {
        headerpadsize: a[0],
        maxrequestsize: a[1],
        maxresponsesize: a[2],
        maxresponsesize_cached: a[3],
        maxoperations: a[4],
        maxrequests: a[5],
        rdma_ird,
    })
}

pub fn gss_svc() -> impl Strategy<Value = RpcGssSvc> {
    select(vec![
        RpcGssSvc::None,
        RpcGssSvc::Integrity,
        RpcGssSvc::Privacy,
    ])
}

pub fn sec_parms() -> impl Strategy<Value = Vec<CallbackSecParms4>> {
    let one = prop_oneof![
        Just(CallbackSecParms4::None),
        (any::<(u32, u32, u32)>(), bytes(16), vec(any::<u32>(), 0..4)).prop_map(
            |((stamp, uid, gid), machine_name, gids)| CallbackSecParms4::Sys(AuthSys {
                stamp,
                machine_name,
                uid,
                gid,
                gids,
            })
        ),
        (gss_svc(), bytes(8), bytes(8)).prop_map(|(service, a, b)| CallbackSecParms4::Gss(
            GssCbHandles4 {
                service,
                handle_from_server: GssHandle4(a),
                handle_from_client: GssHandle4(b),
            }
        )),
    ];
    vec(one, 0..3)
}

pub fn status() -> impl Strategy<Value = Nfsstat4> {
    select(Nfsstat4::ALL.to_vec())
}

/// A status for a failed result: not OK, nor one whose arm has a body.
pub fn fail_status() -> impl Strategy<Value = Nfsstat4> {
    select(Nfsstat4::ALL.to_vec()).prop_filter("body-carrying status", |s| {
        !matches!(
            s,
            Nfsstat4::Ok
                | Nfsstat4::Denied
                | Nfsstat4::ClidInUse
                | Nfsstat4::TooSmall
                | Nfsstat4::LayoutTryLater
        )
    })
}

pub fn res<T: std::fmt::Debug>(ok: impl Strategy<Value = T>) -> impl Strategy<Value = NfsRes4<T>> {
    prop_oneof![
        ok.prop_map(NfsRes4::Ok),
        fail_status().prop_map(NfsRes4::Fail)
    ]
}

pub fn stable() -> impl Strategy<Value = StableHow4> {
    (0u32..=2).prop_map(|v| StableHow4::from_u32(v).unwrap())
}

pub fn lock_type() -> impl Strategy<Value = NfsLockType4> {
    (1u32..=4).prop_map(|v| NfsLockType4::from_u32(v).unwrap())
}

pub fn deleg_type() -> impl Strategy<Value = OpenDelegationType4> {
    (0u32..=3).prop_map(|v| OpenDelegationType4::from_u32(v).unwrap())
}

pub fn create_type() -> impl Strategy<Value = CreateType4> {
    let spec = any::<(u32, u32)>().prop_map(|(a, b)| Specdata4 {
        specdata1: a,
        specdata2: b,
    });
    prop_oneof![
        bytes(30).prop_map(|l| CreateType4::Lnk(LinkText4(l))),
        spec.clone().prop_map(CreateType4::Blk),
        spec.prop_map(CreateType4::Chr),
        Just(CreateType4::Sock),
        Just(CreateType4::Fifo),
        Just(CreateType4::Dir),
        any::<u32>()
            .prop_filter("has an arm", |t| !(2..=7).contains(t))
            .prop_map(CreateType4::Other),
    ]
}

pub fn open_args() -> impl Strategy<Value = Open4Args> {
    let how = prop_oneof![
        fattr().prop_map(CreateHow4::Unchecked),
        fattr().prop_map(CreateHow4::Guarded),
        verifier().prop_map(CreateHow4::Exclusive),
        (verifier(), fattr()).prop_map(|(verf, attrs)| CreateHow4::Exclusive41 { verf, attrs }),
    ];
    let flag = prop_oneof![Just(OpenFlag4::NoCreate), how.prop_map(OpenFlag4::Create)];
    let claim = prop_oneof![
        component().prop_map(OpenClaim4::Null),
        deleg_type().prop_map(OpenClaim4::Previous),
        (stateid(), component()).prop_map(|(delegate_stateid, file)| OpenClaim4::DelegateCur {
            delegate_stateid,
            file
        }),
        component().prop_map(OpenClaim4::DelegatePrev),
        Just(OpenClaim4::Fh),
        stateid().prop_map(OpenClaim4::DelegCurFh),
        Just(OpenClaim4::DelegPrevFh),
    ];
    (any::<(u32, u32, u32)>(), owner(), flag, claim).prop_map(
        |((seqid, share_access, share_deny), owner, openhow, claim)| Open4Args {
            seqid,
            share_access,
            share_deny,
            owner,
            openhow,
            claim,
        },
    )
}

pub fn delegation() -> impl Strategy<Value = OpenDelegation4> {
    let limit = prop_oneof![
        any::<u64>().prop_map(NfsSpaceLimit4::Size),
        any::<(u32, u32)>().prop_map(|(n, b)| NfsSpaceLimit4::Blocks {
            num_blocks: n,
            bytes_per_block: b
        }),
    ];
    let why = (0u32..=8)
        .prop_filter("has a flag", |w| *w != 1 && *w != 2)
        .prop_map(|w| OpenNoneDelegation4::Why(WhyNoDelegation4::from_u32(w).unwrap()));
    prop_oneof![
        Just(OpenDelegation4::None),
        (stateid(), any::<bool>(), ace()).prop_map(|(stateid, recall, permissions)| {
            OpenDelegation4::Read(OpenReadDelegation4 {
                stateid,
                recall,
                permissions,
            })
        }),
        (stateid(), any::<bool>(), limit, ace()).prop_map(|(stateid, recall, space_limit, p)| {
            OpenDelegation4::Write(OpenWriteDelegation4 {
                stateid,
                recall,
                space_limit,
                permissions: p,
            })
        }),
        any::<bool>().prop_map(
            |b| OpenDelegation4::NoneExt(OpenNoneDelegation4::Contention {
                server_will_push_deleg: b
            })
        ),
        any::<bool>().prop_map(|b| OpenDelegation4::NoneExt(OpenNoneDelegation4::Resource {
            server_will_signal_avail: b
        })),
        why.prop_map(OpenDelegation4::NoneExt),
    ]
}

pub fn lock_denied() -> impl Strategy<Value = Lock4Denied> {
    (any::<(u64, u64)>(), lock_type(), owner()).prop_map(|((offset, length), locktype, owner)| {
        Lock4Denied {
            offset,
            length,
            locktype,
            owner,
        }
    })
}

pub fn locker() -> impl Strategy<Value = Locker4> {
    prop_oneof![
        (any::<u32>(), stateid(), any::<u32>(), owner()).prop_map(|(a, s, b, o)| {
            Locker4::OpenOwner(OpenToLockOwner4 {
                open_seqid: a,
                open_stateid: s,
                lock_seqid: b,
                lock_owner: o,
            })
        }),
        (stateid(), any::<u32>()).prop_map(|(lock_stateid, lock_seqid)| Locker4::LockOwner(
            ExistLockOwner4 {
                lock_stateid,
                lock_seqid
            }
        )),
    ]
}

pub fn layout_body() -> impl Strategy<Value = LayoutBody> {
    bytes(20).prop_map(LayoutBody)
}

pub fn secinfo() -> impl Strategy<Value = SecInfo4ResOk> {
    let one = prop_oneof![
        any::<u32>()
            .prop_filter("not GSS", |f| *f != RPCSEC_GSS)
            .prop_map(SecInfo4::Flavor),
        (bytes(11), any::<u32>(), gss_svc()).prop_map(|(oid, qop, service)| SecInfo4::Gss(
            RpcsecGssInfo {
                oid: SecOid4(oid),
                qop,
                service
            }
        )),
    ];
    vec(one, 0..4).prop_map(SecInfo4ResOk)
}

/// Arguments of every operation but WRITE (which borrows; see
/// `write_and_compound_round_trip`), and ILLEGAL.
pub fn arg_op() -> impl Strategy<Value = ArgOp<'static>> {
    let a = prop_oneof![
        any::<u32>().prop_map(|access| ArgOp::Access(Access4Args { access })),
        (any::<u32>(), stateid()).prop_map(|(seqid, open_stateid)| ArgOp::Close(Close4Args {
            seqid,
            open_stateid
        })),
        any::<(u64, u32)>()
            .prop_map(|(offset, count)| ArgOp::Commit(Commit4Args { offset, count })),
        (create_type(), component(), fattr()).prop_map(|(objtype, objname, createattrs)| {
            ArgOp::Create(Box::new(Create4Args {
                objtype,
                objname,
                createattrs,
            }))
        }),
        any::<u64>().prop_map(|clientid| ArgOp::DelegPurge(DelegPurge4Args { clientid })),
        stateid().prop_map(|deleg_stateid| ArgOp::DelegReturn(DelegReturn4Args { deleg_stateid })),
        bitmap().prop_map(|attr_request| ArgOp::GetAttr(GetAttr4Args { attr_request })),
        component().prop_map(|newname| ArgOp::Link(Link4Args { newname })),
        (lock_type(), any::<bool>(), any::<(u64, u64)>(), locker()).prop_map(
            |(locktype, reclaim, (offset, length), locker)| ArgOp::Lock(Box::new(Lock4Args {
                locktype,
                reclaim,
                offset,
                length,
                locker
            }))
        ),
        (lock_type(), any::<(u64, u64)>(), owner()).prop_map(
            |(locktype, (offset, length), owner)| {
                ArgOp::LockT(LockT4Args {
                    locktype,
                    offset,
                    length,
                    owner,
                })
            }
        ),
        (lock_type(), any::<u32>(), stateid(), any::<(u64, u64)>()).prop_map(
            |(locktype, seqid, lock_stateid, (offset, length))| ArgOp::LockU(LockU4Args {
                locktype,
                seqid,
                lock_stateid,
                offset,
                length
            })
        ),
        component().prop_map(|objname| ArgOp::Lookup(Lookup4Args { objname })),
        fattr().prop_map(|a| ArgOp::NVerify(Verify4Args { obj_attributes: a })),
        open_args().prop_map(|a| ArgOp::Open(Box::new(a))),
        any::<bool>().prop_map(|createdir| ArgOp::OpenAttr(OpenAttr4Args { createdir })),
        (stateid(), any::<u32>()).prop_map(|(open_stateid, seqid)| ArgOp::OpenConfirm(
            OpenConfirm4Args {
                open_stateid,
                seqid
            }
        )),
        (stateid(), any::<(u32, u32, u32)>()).prop_map(|(open_stateid, (seqid, a, d))| {
            ArgOp::OpenDowngrade(OpenDowngrade4Args {
                open_stateid,
                seqid,
                share_access: a,
                share_deny: d,
            })
        }),
        fh().prop_map(|object| ArgOp::PutFh(PutFh4Args { object })),
        (stateid(), any::<(u64, u32)>()).prop_map(|(stateid, (offset, count))| ArgOp::Read(
            Read4Args {
                stateid,
                offset,
                count
            }
        )),
        (any::<u64>(), verifier(), any::<(u32, u32)>(), bitmap()).prop_map(
            |(cookie, cookieverf, (dircount, maxcount), attr_request)| ArgOp::ReadDir(
                ReadDir4Args {
                    cookie,
                    cookieverf,
                    dircount,
                    maxcount,
                    attr_request
                }
            )
        ),
        component().prop_map(|target| ArgOp::Remove(Remove4Args { target })),
        (component(), component())
            .prop_map(|(oldname, newname)| ArgOp::Rename(Rename4Args { oldname, newname })),
        any::<u64>().prop_map(|clientid| ArgOp::Renew(Renew4Args { clientid })),
        component().prop_map(|name| ArgOp::SecInfo(SecInfo4Args { name })),
        (stateid(), fattr()).prop_map(|(stateid, obj_attributes)| ArgOp::SetAttr(Box::new(
            SetAttr4Args {
                stateid,
                obj_attributes
            }
        ))),
    ];
    let b = prop_oneof![
        (
            verifier(),
            opaque1024(),
            any::<u32>(),
            netaddr(),
            any::<u32>()
        )
            .prop_map(|(verifier, id, cb_program, cb_location, callback_ident)| {
                ArgOp::SetClientId(Box::new(SetClientId4Args {
                    client: NfsClientId4 { verifier, id },
                    callback: CbClient4 {
                        cb_program,
                        cb_location,
                    },
                    callback_ident,
                }))
            }),
        (any::<u64>(), verifier()).prop_map(|(clientid, setclientid_confirm)| {
            ArgOp::SetClientIdConfirm(SetClientIdConfirm4Args {
                clientid,
                setclientid_confirm,
            })
        }),
        fattr().prop_map(|a| ArgOp::Verify(Verify4Args { obj_attributes: a })),
        owner()
            .prop_map(|lock_owner| ArgOp::ReleaseLockOwner(ReleaseLockOwner4Args { lock_owner })),
        (any::<u32>(), sec_parms()).prop_map(|(cb_program, sec_parms)| ArgOp::BackchannelCtl(
            BackchannelCtl4Args {
                cb_program,
                sec_parms
            }
        )),
        (
            sessionid(),
            select(vec![
                ChannelDirFromClient4::Fore,
                ChannelDirFromClient4::Back,
                ChannelDirFromClient4::ForeOrBoth,
                ChannelDirFromClient4::BackOrBoth
            ]),
            any::<bool>()
        )
            .prop_map(|(sessid, dir, rdma)| ArgOp::BindConnToSession(
                BindConnToSession4Args {
                    sessid,
                    dir,
                    use_conn_in_rdma_mode: rdma
                }
            )),
        (
            verifier(),
            opaque1024(),
            any::<u32>(),
            sp4a(),
            proptest::option::of(impl_id())
        )
            .prop_map(
                |(verifier, ownerid, flags, state_protect, client_impl_id)| {
                    ArgOp::ExchangeId(Box::new(ExchangeId4Args {
                        clientowner: ClientOwner4 { verifier, ownerid },
                        flags,
                        state_protect,
                        client_impl_id,
                    }))
                }
            ),
        (any::<(u64, u32, u32, u32)>(), chan(), chan(), sec_parms()).prop_map(
            |((clientid, sequence, flags, cb_program), f, b, sec_parms)| ArgOp::CreateSession(
                Box::new(CreateSession4Args {
                    clientid,
                    sequence,
                    flags,
                    fore_chan_attrs: f,
                    back_chan_attrs: b,
                    cb_program,
                    sec_parms
                })
            )
        ),
        sessionid().prop_map(|sessionid| ArgOp::DestroySession(DestroySession4Args { sessionid })),
        stateid().prop_map(|stateid| ArgOp::FreeStateid(FreeStateid4Args { stateid })),
        (any::<bool>(), bitmap(), time(), time(), bitmap(), bitmap()).prop_map(
            |(s, n, ct, dt, ca, da)| ArgOp::GetDirDelegation(Box::new(GetDirDelegation4Args {
                signal_deleg_avail: s,
                notification_types: n,
                child_attr_delay: ct,
                dir_attr_delay: dt,
                child_attributes: ca,
                dir_attributes: da
            }))
        ),
        (any::<[u8; 16]>(), any::<(u32, u32)>(), bitmap()).prop_map(|(id, (t, m), n)| {
            ArgOp::GetDeviceInfo(GetDeviceInfo4Args {
                device_id: DeviceId4(id),
                layout_type: t,
                maxcount: m,
                notify_types: n,
            })
        }),
        (any::<(u32, u32, u64)>(), verifier()).prop_map(|((t, m, c), v)| ArgOp::GetDeviceList(
            GetDeviceList4Args {
                layout_type: t,
                maxdevices: m,
                cookie: c,
                cookieverf: v
            }
        )),
    ];
    let c = prop_oneof![
        (
            any::<(u64, u64, bool)>(),
            stateid(),
            any::<Option<u64>>(),
            proptest::option::of(time()),
            any::<u32>(),
            layout_body()
        )
            .prop_map(
                |((o, l, r), s, lwo, tm, t, body)| ArgOp::LayoutCommit(Box::new(
                    LayoutCommit4Args {
                        offset: o,
                        length: l,
                        reclaim: r,
                        stateid: s,
                        last_write_offset: lwo,
                        time_modify: tm,
                        layoutupdate: LayoutUpdate4 {
                            layout_type: t,
                            body
                        }
                    }
                ))
            ),
        (
            any::<(bool, u32, u32, u64, u64, u64)>(),
            stateid(),
            any::<u32>()
        )
            .prop_map(
                |((s, t, io, o, l, ml), st, mc)| ArgOp::LayoutGet(LayoutGet4Args {
                    signal_layout_avail: s,
                    layout_type: t,
                    iomode: io,
                    offset: o,
                    length: l,
                    minlength: ml,
                    stateid: st,
                    maxcount: mc
                })
            ),
        (
            any::<(bool, u32, u32)>(),
            prop_oneof![
                (any::<(u64, u64)>(), stateid(), layout_body()).prop_map(|((o, l), s, body)| {
                    LayoutReturn4::File(LayoutReturnFile4 {
                        offset: o,
                        length: l,
                        stateid: s,
                        body,
                    })
                }),
                Just(LayoutReturn4::Fsid),
                Just(LayoutReturn4::All),
            ]
        )
            .prop_map(|((r, t, io), lr)| ArgOp::LayoutReturn(Box::new(
                LayoutReturn4Args {
                    reclaim: r,
                    layout_type: t,
                    iomode: io,
                    layoutreturn: lr
                }
            ))),
        select(vec![SecInfoStyle4::CurrentFh, SecInfoStyle4::Parent])
            .prop_map(ArgOp::SecInfoNoName),
        (sessionid(), any::<(u32, u32, u32, bool)>()).prop_map(|(sessionid, (q, s, h, c))| {
            ArgOp::Sequence(Sequence4Args {
                sessionid,
                sequenceid: q,
                slotid: s,
                highest_slotid: h,
                cachethis: c,
            })
        }),
        (opaque1024(), opaque1024())
            .prop_map(|(ssv, digest)| ArgOp::SetSsv(SetSsv4Args { ssv, digest })),
        vec(stateid(), 0..5).prop_map(|stateids| ArgOp::TestStateid(TestStateid4Args { stateids })),
        (
            any::<u32>(),
            prop_oneof![
                Just(DelegClaim4::Fh),
                Just(DelegClaim4::DelegPrevFh),
                deleg_type().prop_map(DelegClaim4::Previous)
            ]
        )
            .prop_map(|(want, claim)| ArgOp::WantDelegation(WantDelegation4Args { want, claim })),
        any::<u64>().prop_map(|clientid| ArgOp::DestroyClientId(DestroyClientId4Args { clientid })),
        any::<bool>().prop_map(|one_fs| ArgOp::ReclaimComplete(ReclaimComplete4Args { one_fs })),
        select(vec![
            ArgOp::GetFh,
            ArgOp::LookupP,
            ArgOp::PutPubFh,
            ArgOp::PutRootFh,
            ArgOp::ReadLink,
            ArgOp::RestoreFh,
            ArgOp::SaveFh
        ]),
        any::<u32>()
            .prop_filter("unknown", |n| !(3..=58).contains(n))
            .prop_map(|opnum| ArgOp::Illegal { opnum }),
    ];
    prop_oneof![a, b, c]
}
