//! NSM (status monitor) version 1 client (XNFS Version 3W chapter 11),
//! program 100024.
//!
//! The wire types are `rnfsd_proto::nsm`'s, re-exported here.

use crate::typed::typed_client;

use crate::error::ClientError;

pub use rnfsd_proto::nsm::*;

typed_client!(
    /// NSM v1 calls over a [`Client`].
    NsmClient,
    PROGRAM,
    VERSION
);

impl NsmClient {
    /// SM_NULL.
    pub async fn null(&self) -> Result<(), ClientError> {
        self.call(PROC_NULL, &()).await
    }

    /// SM_STAT: can `mon_name` be monitored, and statd's state number.
    pub async fn stat(&self, mon_name: impl AsRef<[u8]>) -> Result<SmStatRes, ClientError> {
        let a = SmName {
            mon_name: SmString(mon_name.as_ref().to_vec()),
        };
        self.call(SM_STAT, &a).await
    }

    /// SM_MON: watch `mon.mon_id.mon_name` and call `my_id` back on change.
    pub async fn mon(&self, mon: &Mon) -> Result<SmStatRes, ClientError> {
        self.call(SM_MON, mon).await
    }

    /// SM_UNMON: stop one watch.
    pub async fn unmon(&self, id: &MonId) -> Result<SmStat, ClientError> {
        self.call(SM_UNMON, id).await
    }

    /// SM_UNMON_ALL: stop every watch registered with `id`.
    pub async fn unmon_all(&self, id: &MyId) -> Result<SmStat, ClientError> {
        self.call(SM_UNMON_ALL, id).await
    }

    /// SM_SIMU_CRASH: act as if this host had rebooted.
    pub async fn simu_crash(&self) -> Result<(), ClientError> {
        self.call(SM_SIMU_CRASH, &()).await
    }

    /// SM_NOTIFY: tell a peer's statd that `chg.mon_name` is now in
    /// `chg.state`.
    pub async fn notify(&self, chg: &StatChge) -> Result<(), ClientError> {
        self.call(SM_NOTIFY, chg).await
    }

    /// The callback statd makes to a registered `my_id` (its program,
    /// version and procedure) when a monitored host changes state; for
    /// testing a lock manager's handler of it. The connection must lead to
    /// that program's server.
    pub async fn status_callback(&self, to: &MyId, st: &Status) -> Result<(), ClientError> {
        self.client
            .call(to.my_prog, to.my_vers, to.my_proc, st)
            .await
    }
}
