//! Strategies for operation results and the callback program.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use rnfsd_proto::nfs4::cb::*;
use rnfsd_proto::nfs4::*;

use super::*;

pub fn entry() -> impl Strategy<Value = Entry4> {
    (any::<u64>(), component(), fattr()).prop_map(|(cookie, name, attrs)| Entry4 {
        cookie,
        name,
        attrs,
    })
}

pub fn res_op() -> impl Strategy<Value = ResOp> {
    let st = |f: fn(Nfsstat4) -> ResOp| status().prop_map(f);
    let sid_res = || res(stateid());
    let a = prop_oneof![
        res(any::<(u32, u32)>().prop_map(|(supported, access)| Access4ResOk { supported, access }))
            .prop_map(ResOp::Access),
        sid_res().prop_map(ResOp::Close),
        res(verifier()).prop_map(ResOp::Commit),
        res((cinfo(), bitmap()).prop_map(|(cinfo, attrset)| Create4ResOk { cinfo, attrset }))
            .prop_map(ResOp::Create),
        st(ResOp::DelegPurge),
        st(ResOp::DelegReturn),
        res(fattr()).prop_map(ResOp::GetAttr),
        res(fh()).prop_map(ResOp::GetFh),
        res(cinfo()).prop_map(ResOp::Link),
        prop_oneof![
            stateid().prop_map(Lock4Res::Ok),
            lock_denied().prop_map(Lock4Res::Denied),
            fail_status().prop_map(Lock4Res::Fail),
        ]
        .prop_map(ResOp::Lock),
        prop_oneof![
            Just(LockT4Res::Ok),
            lock_denied().prop_map(LockT4Res::Denied),
            fail_status().prop_map(LockT4Res::Fail),
        ]
        .prop_map(ResOp::LockT),
        sid_res().prop_map(ResOp::LockU),
        st(ResOp::Lookup),
        st(ResOp::LookupP),
        st(ResOp::NVerify),
        res(
            (stateid(), cinfo(), any::<u32>(), bitmap(), delegation()).prop_map(
                |(stateid, cinfo, rflags, attrset, delegation)| Open4ResOk {
                    stateid,
                    cinfo,
                    rflags,
                    attrset,
                    delegation
                }
            )
        )
        .prop_map(ResOp::Open),
        st(ResOp::OpenAttr),
        sid_res().prop_map(ResOp::OpenConfirm),
        sid_res().prop_map(ResOp::OpenDowngrade),
        st(ResOp::PutFh),
        st(ResOp::PutPubFh),
        st(ResOp::PutRootFh),
        res((any::<bool>(), bytes(64)).prop_map(|(eof, data)| Read4ResOk { eof, data }))
            .prop_map(ResOp::Read),
        res((verifier(), vec(entry(), 0..4), any::<bool>()).prop_map(
            |(cookieverf, entries, eof)| ReadDir4ResOk {
                cookieverf,
                entries,
                eof
            }
        ))
        .prop_map(ResOp::ReadDir),
        res(bytes(30).prop_map(LinkText4)).prop_map(ResOp::ReadLink),
        res(cinfo()).prop_map(ResOp::Remove),
        res((cinfo(), cinfo()).prop_map(|(s, t)| Rename4ResOk {
            source_cinfo: s,
            target_cinfo: t
        }))
        .prop_map(ResOp::Rename),
        st(ResOp::Renew),
        st(ResOp::RestoreFh),
        st(ResOp::SaveFh),
    ];
    let b = prop_oneof![
        res(secinfo()).prop_map(ResOp::SecInfo),
        (status(), bitmap())
            .prop_map(|(status, attrsset)| ResOp::SetAttr(SetAttr4Res { status, attrsset })),
        prop_oneof![
            (any::<u64>(), verifier()).prop_map(|(clientid, v)| SetClientId4Res::Ok {
                clientid,
                setclientid_confirm: v
            }),
            netaddr().prop_map(SetClientId4Res::ClidInUse),
            fail_status().prop_map(SetClientId4Res::Fail),
        ]
        .prop_map(ResOp::SetClientId),
        st(ResOp::SetClientIdConfirm),
        st(ResOp::Verify),
        res(
            (any::<u32>(), stable(), verifier()).prop_map(|(count, committed, writeverf)| {
                Write4ResOk {
                    count,
                    committed,
                    writeverf,
                }
            })
        )
        .prop_map(ResOp::Write),
        st(ResOp::ReleaseLockOwner),
        st(ResOp::BackchannelCtl),
        res((
            sessionid(),
            select(vec![
                ChannelDirFromServer4::Fore,
                ChannelDirFromServer4::Back,
                ChannelDirFromServer4::Both
            ]),
            any::<bool>()
        )
            .prop_map(|(sessid, dir, r)| BindConnToSession4ResOk {
                sessid,
                dir,
                use_conn_in_rdma_mode: r
            }))
        .prop_map(ResOp::BindConnToSession),
        res((
            any::<(u64, u32, u32)>(),
            sp4r(),
            any::<u64>(),
            opaque1024(),
            opaque1024(),
            proptest::option::of(impl_id())
        )
            .prop_map(
                |((clientid, sequenceid, flags), sp, minor, major, scope, iid)| {
                    ExchangeId4ResOk {
                        clientid,
                        sequenceid,
                        flags,
                        state_protect: sp,
                        server_owner: ServerOwner4 {
                            minor_id: minor,
                            major_id: major,
                        },
                        server_scope: scope,
                        server_impl_id: iid,
                    }
                }
            ))
        .prop_map(ResOp::ExchangeId),
        res(
            (sessionid(), any::<(u32, u32)>(), chan(), chan()).prop_map(|(s, (q, f), a, b)| {
                CreateSession4ResOk {
                    sessionid: s,
                    sequence: q,
                    flags: f,
                    fore_chan_attrs: a,
                    back_chan_attrs: b,
                }
            })
        )
        .prop_map(ResOp::CreateSession),
        st(ResOp::DestroySession),
        st(ResOp::FreeStateid),
    ];
    let c = prop_oneof![
        res(prop_oneof![
            (verifier(), stateid(), bitmap(), bitmap(), bitmap()).prop_map(|(v, s, n, c, d)| {
                GetDirDelegation4NonFatal::Ok(GetDirDelegation4ResOk {
                    cookieverf: v,
                    stateid: s,
                    notification: n,
                    child_attributes: c,
                    dir_attributes: d,
                })
            }),
            any::<bool>().prop_map(|w| GetDirDelegation4NonFatal::Unavail {
                will_signal_deleg_avail: w
            }),
        ])
        .prop_map(ResOp::GetDirDelegation),
        prop_oneof![
            (any::<u32>(), layout_body(), bitmap()).prop_map(|(t, body, n)| {
                GetDeviceInfo4Res::Ok(GetDeviceInfo4ResOk {
                    device_addr: DeviceAddr4 {
                        layout_type: t,
                        addr_body: body,
                    },
                    notification: n,
                })
            }),
            any::<u32>().prop_map(|mincount| GetDeviceInfo4Res::TooSmall { mincount }),
            fail_status().prop_map(GetDeviceInfo4Res::Fail),
        ]
        .prop_map(ResOp::GetDeviceInfo),
        res((
            any::<u64>(),
            verifier(),
            vec(any::<[u8; 16]>(), 0..4),
            any::<bool>()
        )
            .prop_map(|(cookie, cookieverf, ids, eof)| GetDeviceList4ResOk {
                cookie,
                cookieverf,
                deviceid_list: ids.into_iter().map(DeviceId4).collect(),
                eof
            }))
        .prop_map(ResOp::GetDeviceList),
        res(any::<Option<u64>>()).prop_map(ResOp::LayoutCommit),
        prop_oneof![
            (
                any::<bool>(),
                stateid(),
                vec((any::<(u64, u64, u32, u32)>(), layout_body()), 0..3)
            )
                .prop_map(|(r, s, ls)| LayoutGet4Res::Ok(LayoutGet4ResOk {
                    return_on_close: r,
                    stateid: s,
                    layouts: ls
                        .into_iter()
                        .map(|((o, l, io, t), body)| Layout4 {
                            offset: o,
                            length: l,
                            iomode: io,
                            content: LayoutContent4 {
                                layout_type: t,
                                body
                            }
                        })
                        .collect()
                })),
            any::<bool>().prop_map(|w| LayoutGet4Res::TryLater {
                will_signal_layout_avail: w
            }),
            fail_status().prop_map(LayoutGet4Res::Fail),
        ]
        .prop_map(ResOp::LayoutGet),
        res(proptest::option::of(stateid())).prop_map(ResOp::LayoutReturn),
        res(secinfo()).prop_map(ResOp::SecInfoNoName),
        res(
            (sessionid(), any::<[u32; 5]>()).prop_map(|(s, v)| Sequence4ResOk {
                sessionid: s,
                sequenceid: v[0],
                slotid: v[1],
                highest_slotid: v[2],
                target_highest_slotid: v[3],
                status_flags: v[4],
            })
        )
        .prop_map(ResOp::Sequence),
        res(opaque1024()).prop_map(ResOp::SetSsv),
        res(vec(status(), 0..5).prop_map(|status_codes| TestStateid4ResOk { status_codes }))
            .prop_map(ResOp::TestStateid),
        res(delegation()).prop_map(ResOp::WantDelegation),
        st(ResOp::DestroyClientId),
        st(ResOp::ReclaimComplete),
        fail_status().prop_map(ResOp::Illegal),
    ];
    prop_oneof![a, b, c]
}

pub fn cb_arg_op() -> impl Strategy<Value = CbArgOp> {
    let notify = || {
        vec(
            (bitmap(), bytes(16)).prop_map(|(mask, v)| Notify4 {
                mask,
                vals: NotifyList4(v),
            }),
            0..3,
        )
    };
    let recall_any = || {
        (any::<u32>(), bitmap()).prop_map(|(objects_to_keep, type_mask)| CbRecallAny4Args {
            objects_to_keep,
            type_mask,
        })
    };
    prop_oneof![
        (fh(), bitmap())
            .prop_map(|(fh, attr_request)| CbArgOp::GetAttr(CbGetAttr4Args { fh, attr_request })),
        (stateid(), any::<bool>(), fh()).prop_map(|(stateid, truncate, fh)| CbArgOp::Recall(
            CbRecall4Args {
                stateid,
                truncate,
                fh
            }
        )),
        (
            any::<(u32, u32, bool)>(),
            prop_oneof![
                (fh(), any::<(u64, u64)>(), stateid()).prop_map(
                    |(fh, (offset, length), stateid)| {
                        LayoutRecall4::File(LayoutRecallFile4 {
                            fh,
                            offset,
                            length,
                            stateid,
                        })
                    }
                ),
                any::<(u64, u64)>()
                    .prop_map(|(major, minor)| LayoutRecall4::Fsid(Fsid4 { major, minor })),
                Just(LayoutRecall4::All),
            ]
        )
            .prop_map(
                |((t, io, c), recall)| CbArgOp::LayoutRecall(CbLayoutRecall4Args {
                    layout_type: t,
                    iomode: io,
                    changed: c,
                    recall
                })
            ),
        (stateid(), fh(), notify()).prop_map(|(stateid, fh, changes)| CbArgOp::Notify(
            CbNotify4Args {
                stateid,
                fh,
                changes
            }
        )),
        (fh(), delegation())
            .prop_map(|(fh, delegation)| CbArgOp::PushDeleg(CbPushDeleg4Args { fh, delegation })),
        recall_any().prop_map(CbArgOp::RecallAny),
        recall_any().prop_map(CbArgOp::RecallableObjAvail),
        any::<u32>().prop_map(|t| CbArgOp::RecallSlot(CbRecallSlot4Args {
            target_highest_slotid: t
        })),
        (
            sessionid(),
            any::<(u32, u32, u32, bool)>(),
            vec(
                (sessionid(), vec(any::<(u32, u32)>(), 0..3)).prop_map(|(s, calls)| {
                    ReferringCallList4 {
                        sessionid: s,
                        referring_calls: calls
                            .into_iter()
                            .map(|(sequenceid, slotid)| ReferringCall4 { sequenceid, slotid })
                            .collect(),
                    }
                }),
                0..3
            )
        )
            .prop_map(
                |(s, (q, sl, h, c), lists)| CbArgOp::Sequence(CbSequence4Args {
                    sessionid: s,
                    sequenceid: q,
                    slotid: sl,
                    highest_slotid: h,
                    cachethis: c,
                    referring_call_lists: lists
                })
            ),
        any::<(bool, bool)>().prop_map(|(a, b)| CbArgOp::WantsCancelled(CbWantsCancelled4Args {
            contended_wants_cancelled: a,
            resourced_wants_cancelled: b
        })),
        (fh(), owner())
            .prop_map(|(fh, lock_owner)| CbArgOp::NotifyLock(CbNotifyLock4Args { fh, lock_owner })),
        notify().prop_map(|changes| CbArgOp::NotifyDeviceId(CbNotifyDeviceId4Args { changes })),
    ]
}

pub fn cb_res_op() -> impl Strategy<Value = CbResOp> {
    let st = |f: fn(Nfsstat4) -> CbResOp| status().prop_map(f);
    prop_oneof![
        res(fattr()).prop_map(CbResOp::GetAttr),
        st(CbResOp::Recall),
        st(CbResOp::LayoutRecall),
        st(CbResOp::Notify),
        st(CbResOp::PushDeleg),
        st(CbResOp::RecallAny),
        st(CbResOp::RecallableObjAvail),
        st(CbResOp::RecallSlot),
        res(
            (sessionid(), any::<[u32; 4]>()).prop_map(|(s, v)| CbSequence4ResOk {
                sessionid: s,
                sequenceid: v[0],
                slotid: v[1],
                highest_slotid: v[2],
                target_highest_slotid: v[3],
            })
        )
        .prop_map(CbResOp::Sequence),
        st(CbResOp::WantsCancelled),
        st(CbResOp::NotifyLock),
        st(CbResOp::NotifyDeviceId),
        fail_status().prop_map(CbResOp::Illegal),
    ]
}
