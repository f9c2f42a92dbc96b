//! NLM version 4 client (XNFS Version 3W chapter 14), program 100021.
//!
//! The wire types are `rnfsd_proto::nlm`'s, re-exported here. Synchronous
//! procedures wait for their result; the asynchronous ones (*_MSG, and the
//! *_RES callbacks a server sends back) are one-way calls through
//! [`Client::send`]: their answer, if any, arrives as a separate call to
//! the sender's own NLM service (XNFS ch. 10), which this client does not run.

use crate::typed::typed_client;

use rnfsd_xdr::Xdr;

use crate::error::ClientError;

pub use rnfsd_proto::nlm::*;

typed_client!(
    /// NLM v4 calls over a [`Client`].
    NlmClient,
    PROGRAM,
    VERSION4
);

impl NlmClient {
    async fn send<A: Xdr>(&self, proc_: u32, args: &A) -> Result<(), ClientError> {
        self.client.send(PROGRAM, VERSION4, proc_, args).await
    }

    /// NLM4_NULL.
    pub async fn null(&self) -> Result<(), ClientError> {
        self.call(PROC_NULL, &()).await
    }

    /// NLM4_TEST: would this lock be granted? A conflict comes back as
    /// [`Nlm4TestRply::Denied`] with its holder.
    pub async fn test(&self, args: &Nlm4TestArgs) -> Result<Nlm4TestRes, ClientError> {
        self.call(PROC_TEST, args).await
    }

    /// NLM4_LOCK. With `block`, a busy lock answers BLOCKED and the server
    /// later calls GRANTED back.
    pub async fn lock(&self, args: &Nlm4LockArgs) -> Result<Nlm4Res, ClientError> {
        self.call(PROC_LOCK, args).await
    }

    /// NLM4_CANCEL: withdraw a blocked LOCK.
    pub async fn cancel(&self, args: &Nlm4CancArgs) -> Result<Nlm4Res, ClientError> {
        self.call(PROC_CANCEL, args).await
    }

    /// NLM4_UNLOCK.
    pub async fn unlock(&self, args: &Nlm4UnlockArgs) -> Result<Nlm4Res, ClientError> {
        self.call(PROC_UNLOCK, args).await
    }

    /// NLM4_GRANTED: the server-to-client callback for a blocked lock.
    pub async fn granted(&self, args: &Nlm4TestArgs) -> Result<Nlm4Res, ClientError> {
        self.call(PROC_GRANTED, args).await
    }

    /// NLM4_SHARE: a DOS share reservation.
    pub async fn share(&self, args: &Nlm4ShareArgs) -> Result<Nlm4ShareRes, ClientError> {
        self.call(PROC_SHARE, args).await
    }

    /// NLM4_UNSHARE.
    pub async fn unshare(&self, args: &Nlm4ShareArgs) -> Result<Nlm4ShareRes, ClientError> {
        self.call(PROC_UNSHARE, args).await
    }

    /// NLM4_NM_LOCK: LOCK for a client that runs no status monitor (never
    /// blocks, not recovered after a reboot).
    pub async fn nm_lock(&self, args: &Nlm4LockArgs) -> Result<Nlm4Res, ClientError> {
        self.call(PROC_NM_LOCK, args).await
    }

    /// NLM4_FREE_ALL: drop every lock and share of host `args.name`.
    pub async fn free_all(&self, args: &Nlm4Notify) -> Result<(), ClientError> {
        self.call(PROC_FREE_ALL, args).await
    }

    /// NLM4_TEST_MSG (one-way; the answer is a TEST_RES call back).
    pub async fn test_msg(&self, args: &Nlm4TestArgs) -> Result<(), ClientError> {
        self.send(PROC_TEST_MSG, args).await
    }

    /// NLM4_LOCK_MSG (one-way).
    pub async fn lock_msg(&self, args: &Nlm4LockArgs) -> Result<(), ClientError> {
        self.send(PROC_LOCK_MSG, args).await
    }

    /// NLM4_CANCEL_MSG (one-way).
    pub async fn cancel_msg(&self, args: &Nlm4CancArgs) -> Result<(), ClientError> {
        self.send(PROC_CANCEL_MSG, args).await
    }

    /// NLM4_UNLOCK_MSG (one-way).
    pub async fn unlock_msg(&self, args: &Nlm4UnlockArgs) -> Result<(), ClientError> {
        self.send(PROC_UNLOCK_MSG, args).await
    }

    /// NLM4_GRANTED_MSG (one-way).
    pub async fn granted_msg(&self, args: &Nlm4TestArgs) -> Result<(), ClientError> {
        self.send(PROC_GRANTED_MSG, args).await
    }

    /// NLM4_TEST_RES: the answer to a TEST_MSG (one-way).
    pub async fn test_res(&self, res: &Nlm4TestRes) -> Result<(), ClientError> {
        self.send(PROC_TEST_RES, res).await
    }

    /// NLM4_LOCK_RES (one-way).
    pub async fn lock_res(&self, res: &Nlm4Res) -> Result<(), ClientError> {
        self.send(PROC_LOCK_RES, res).await
    }

    /// NLM4_CANCEL_RES (one-way).
    pub async fn cancel_res(&self, res: &Nlm4Res) -> Result<(), ClientError> {
        self.send(PROC_CANCEL_RES, res).await
    }

    /// NLM4_UNLOCK_RES (one-way).
    pub async fn unlock_res(&self, res: &Nlm4Res) -> Result<(), ClientError> {
        self.send(PROC_UNLOCK_RES, res).await
    }

    /// NLM4_GRANTED_RES: the client's answer to GRANTED_MSG (one-way).
    pub async fn granted_res(&self, res: &Nlm4Res) -> Result<(), ClientError> {
        self.send(PROC_GRANTED_RES, res).await
    }
}
