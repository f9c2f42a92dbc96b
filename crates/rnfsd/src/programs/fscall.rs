//! The backend's view of a call, for every program that reaches the
//! backends (NFSv3, NFSv4): how it may run, and the journal commit a
//! change may leave it owing.

use rnfsd_fs::{Call, Cred};
use rnfsd_rpc::Wait;

use crate::programs::CallCtx;

/// The backend's view of a call: as `cred`, on the loop the call runs on
/// (memory only) or on a thread that may owe its commit when the reply
/// can leave later.
pub(crate) fn fs_call<'c>(ctx: &'c CallCtx<'_>, cred: &'c Cred) -> Call<'c> {
    match ctx.on_loop {
        Some(l) => Call::on_loop(cred, &l.0),
        None => Call::thread(cred, ctx.may_park),
    }
}

/// A change on a `sync` export may leave its call owing a journal commit
/// (`rnfsd_fs::owed`): its reply then leaves once that commit is done,
/// and `fail_body` (the result body saying NFS3ERR_IO) answers instead
/// if the commit fails. Parks the reply on the commit if the call owes
/// one. (NFSv4's compound parks its own, with its slot:
/// `nfs4::compound::SlotCommit`.)
pub(crate) fn park_owed(ctx: &CallCtx<'_>, call: &Call<'_>, fail_body: impl FnOnce() -> Vec<u8>) {
    if let Some(owed) = call.take_owed() {
        ctx.park(Box::new(Commit(owed)), fail_body());
    }
}

/// A journal commit a reply waits for, as the RPC layer waits.
struct Commit(rnfsd_fs::owed::Owed);

impl Wait for Commit {
    fn then(self: Box<Self>, f: Box<dyn FnOnce(bool) + Send>) {
        self.0.then(Box::new(move |r| f(r.is_ok())));
    }

    fn wait(self: Box<Self>) -> bool {
        self.0.wait().is_ok()
    }
}
