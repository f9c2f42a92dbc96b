//! Delegations (RFC 8881 §10.2-§10.4): granting one with an OPEN
//! (§18.16), DELEGRETURN (§18.6), the conflicts that recall one
//! (CB_RECALL, §20.2, sent by the embedder) and the revocation of one not
//! returned in time (§10.4.6: NFS4ERR_DELEG_REVOKED,
//! SEQ4_STATUS_RECALLABLE_STATE_REVOKED).
//!
//! Never unsafe: an access that conflicts with another client's
//! delegation (a write, a SETATTR of size, a REMOVE or RENAME, an OPEN
//! for write; for a write delegation any access) goes through
//! [`State::begin_access`] first, which answers "wait" (the caller
//! answers NFS4ERR_DELAY / NFS3ERR_JUKEBOX) and names the recalls to send
//! until the delegation is returned or revoked. While an access is in
//! progress on a file ([`Access`] lives) no delegation is granted on it,
//! so none is granted between an access's check and its change.
//!
//! Over `stateid` (a returned or freed delegation goes through
//! `release_stateid`); the reaper (`lease`) revokes recalled ones past
//! their deadline.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::error::V4Error;
use crate::files::DelegRef;
use crate::ids::{ClientId, FileKey, Stateid};
use crate::registry::{Client, ClientHandle};
use crate::shards::locked;
use crate::table::{Body, ClientState, Entry, Revoked, StateKind};
use crate::State;

/// After a recall, no delegation is granted on the file for this long
/// (a file under contention, §10.4: granting is the server's choice).
pub const RECALL_BACKOFF_MS: u64 = 30_000;
/// Files remembered as recalled lately, at most.
const MAX_CONTENDED: usize = 4096;

/// Why no delegation was granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoDeleg {
    /// The client's back channel has not answered CB_NULL, or is down.
    CallbackDown,
    /// Another open, an access in progress, a recent recall, or the
    /// grace period.
    Contention,
    /// A bound ([`Limits::delegations_per_client`],
    /// [`Limits::max_delegations`], stateids) is reached.
    ///
    /// [`Limits::delegations_per_client`]: crate::Limits::delegations_per_client
    /// [`Limits::max_delegations`]: crate::Limits::max_delegations
    Resource,
    /// The client holds one on the file already.
    Held,
}

/// A recall for the embedder to send (CB_RECALL over the client's back
/// channel).
#[derive(Debug, Clone)]
pub struct Recall {
    pub client: ClientHandle,
    pub stateid: Stateid,
    /// The file's handle as given to [`State::delegate`].
    pub fh: Arc<[u8]>,
    pub write: bool,
}

/// A write delegation held on a file ([`State::write_holder`]).
#[derive(Debug, Clone)]
pub struct WriteHolder {
    /// What recalling it would send (its client, stateid and file).
    pub recall: Recall,
    /// The file's change attribute when it was granted.
    pub change: u64,
    /// Recalled already.
    pub recalled: bool,
}

/// A recall in progress: revoked at `deadline_ms` if still held.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pending {
    client: ClientId,
    other: [u8; 12],
    deadline_ms: u64,
}

/// An access in progress on a file: while one lives, no delegation is
/// granted on it.
pub struct Access(On);

enum On {
    /// Counted on the file's entry (`busy`).
    File(Arc<State>, FileKey),
    /// Counted in a quick shard: no delegation existed anywhere when it
    /// began ([`State::quick_access`]).
    Quick(Arc<QuickShard>),
}

/// Accesses begun while no delegation existed anywhere, in shards of
/// their own cache line (no line all workers write: knfsd's per-CPU
/// counters lesson).
#[repr(align(128))]
#[derive(Debug, Default)]
pub(crate) struct QuickShard(AtomicUsize);

/// Quick shards (a power of two).
pub(crate) const QUICK_SHARDS: usize = 16;
/// A grant waits at most this many yields for quick accesses begun
/// before it to end, then declines (a server may always decline).
const QUICK_DRAIN_YIELDS: usize = 256;

impl Drop for Access {
    fn drop(&mut self) {
        let (s, file) = match &self.0 {
            On::Quick(q) => {
                let was = q.0.fetch_sub(1, Ordering::Release);
                debug_assert!(was > 0);
                return;
            }
            On::File(s, f) => (s, f),
        };
        let mut files = s.files.shard(file);
        if let Some(f) = files.get_mut(file) {
            debug_assert!(f.busy > 0);
            f.busy = f.busy.saturating_sub(1);
            if f.is_empty() && f.lockers.is_empty() {
                files.remove(file);
            }
        }
    }
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            On::File(_, k) => write!(f, "Access({k:?})"),
            On::Quick(_) => write!(f, "Access(quick)"),
        }
    }
}

impl State {
    /// Grants `c` a delegation on `file` (which `c` has just opened; `fh`
    /// is its handle, for CB_RECALL), read or `write`: only while `c`'s
    /// back channel answered, outside the grace period, not on a file
    /// recalled lately, within the bounds, and (read) while no open has
    /// write access and no other delegation is a write one, or (write)
    /// while `c`'s open is the only one and no other client holds one; and
    /// never while an [`Access`] is in progress on the file.
    pub fn delegate(
        &self,
        c: &ClientHandle,
        file: FileKey,
        write: bool,
        fh: &[u8],
    ) -> Result<Stateid, NoDeleg> {
        self.delegate_at(c, file, write, fh, 0)
    }

    /// [`delegate`](Self::delegate), the file's change attribute being
    /// `change` now (what a CB_GETATTR answer is compared with:
    /// [`State::write_holder`]).
    pub fn delegate_at(
        &self,
        c: &ClientHandle,
        file: FileKey,
        write: bool,
        fh: &[u8],
        change: u64,
    ) -> Result<Stateid, NoDeleg> {
        let cl = &c.0;
        if !cl.cb_up.load(Ordering::Acquire) || cl.cb_down.load(Ordering::Relaxed) {
            return Err(NoDeleg::CallbackDown);
        }
        let now = self.clock.now_ms();
        if self.in_grace() || self.contended(&file, now) {
            return Err(NoDeleg::Contention);
        }
        let mut st = locked(&cl.st);
        if cl.is_expired() || st.delegs >= self.cfg.limits.delegations_per_client {
            return Err(NoDeleg::Resource);
        }
        let max = self.cfg.limits.max_delegations;
        if self
            .delegations
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })
            .is_err()
        {
            return Err(NoDeleg::Resource);
        }
        // Accesses begun while there was none skipped the file table
        // (`quick_access`): from the count up no new one does, and this
        // waits for those begun before it.
        if !self.quick_drained() {
            self.delegations.fetch_sub(1, Ordering::AcqRel);
            return Err(NoDeleg::Contention);
        }
        let r = (|| {
            let mut files = self.files.shard(&file);
            let f = files.entry(file).or_default();
            if f.delegs.iter().any(|d| d.client == cl.id) {
                return Err(NoDeleg::Held);
            }
            let conflict = f.busy > 0
                || match write {
                    true => f.opens != 1 || !f.delegs.is_empty(),
                    false => f.written() || f.delegs.iter().any(|d| d.write),
                };
            if conflict {
                return Err(NoDeleg::Contention);
            }
            let other = st
                .add(
                    self,
                    Entry {
                        seqid: 1,
                        file,
                        revoked: None,
                        body: Body::Delegation {
                            write,
                            fh: Arc::from(fh),
                            recalled_ms: None,
                            change,
                        },
                    },
                )
                .map_err(|_| NoDeleg::Resource)?;
            f.delegs.push(DelegRef {
                client: cl.id,
                other,
                write,
            });
            if write {
                self.write_delegations.fetch_add(1, Ordering::AcqRel);
            }
            Ok(other)
        })();
        match r {
            Ok(other) => {
                st.delegs += 1;
                self.stats
                    .delegations_granted
                    .fetch_add(1, Ordering::Relaxed);
                Ok(Stateid { seqid: 1, other })
            }
            Err(e) => {
                self.delegations.fetch_sub(1, Ordering::AcqRel);
                let mut files = self.files.shard(&file);
                if files
                    .get(&file)
                    .is_some_and(|f| f.is_empty() && f.lockers.is_empty())
                {
                    files.remove(&file);
                }
                Err(e)
            }
        }
    }

    /// DELEGRETURN (§18.6): the delegation `sid` of `c` goes; `file` (the
    /// current filehandle's) must be its file (NFS4ERR_BAD_STATEID). The
    /// errors of a stateid check otherwise (NFS4ERR_DELEG_REVOKED for a
    /// revoked one: FREE_STATEID frees it).
    pub fn delegreturn(
        &self,
        c: &ClientHandle,
        sid: &Stateid,
        file: FileKey,
    ) -> Result<(), V4Error> {
        let mut st = locked(&c.0.st);
        let e = st.find_mut(self, c.0.is_expired(), sid)?;
        if e.kind() != StateKind::Delegation || e.file != file {
            return Err(V4Error::BadStateid);
        }
        let freed = self.release_stateid(&mut st, &sid.other);
        debug_assert!(freed.is_empty());
        Ok(())
    }

    /// Starts an access for which nothing need be looked up, recalled or
    /// kept: `Some` while no delegation exists anywhere (the common case
    /// of a server with no NFSv4 clients, or none delegated to), and then
    /// no delegation is granted until it ends (`delegate` waits for it).
    /// `None`: use [`begin_access`](Self::begin_access). `hint` spreads
    /// accesses over the shards (any value; the same file, the same one
    /// best).
    pub fn quick_access(&self, hint: u64) -> Option<Access> {
        // Dekker with `delegate`: each increments its own counter then
        // reads the other's, both SeqCst, so at least one sees the other.
        let q = &self.quick[(hint as usize) & (QUICK_SHARDS - 1)];
        q.0.fetch_add(1, Ordering::SeqCst);
        if self.delegations.load(Ordering::SeqCst) == 0 {
            return Some(Access(On::Quick(q.clone())));
        }
        q.0.fetch_sub(1, Ordering::Release);
        None
    }

    /// Whether the quick accesses in progress ended within a short wait.
    fn quick_drained(&self) -> bool {
        for _ in 0..QUICK_DRAIN_YIELDS {
            if self.quick.iter().all(|q| q.0.load(Ordering::SeqCst) == 0) {
                return true;
            }
            std::thread::yield_now();
        }
        false
    }

    /// Starts an access to `file` by client `by` (None: not an NFSv4
    /// client: NFSv3, NLM, the server's host), a change (`write`: WRITE,
    /// SETATTR, REMOVE, RENAME, LINK, an OPEN for write) or a read (an
    /// OPEN for read). Delegations of other clients that conflict (any,
    /// for a change; write ones, for a read) are recalled: while one is
    /// held the answer is `Err` with the recalls to send now (each is
    /// asked for once; the caller answers NFS4ERR_DELAY or
    /// NFS3ERR_JUKEBOX and the client retries). A recalled delegation not
    /// returned within the lease is revoked, and the access goes on.
    ///
    /// `Ok`: the access may proceed; no delegation is granted on the file
    /// until the [`Access`] is dropped.
    pub fn begin_access(
        self: &Arc<Self>,
        file: FileKey,
        by: Option<ClientId>,
        write: bool,
    ) -> Result<Access, Vec<Recall>> {
        let conflicting: Vec<DelegRef> = {
            let mut files = self.files.shard(&file);
            let f = files.entry(file).or_default();
            f.busy += 1;
            f.delegs
                .iter()
                .filter(|d| Some(d.client) != by && (write || d.write))
                .copied()
                .collect()
        };
        let access = Access(On::File(self.clone(), file));
        if conflicting.is_empty() {
            return Ok(access);
        }
        let (held, recalls) = self.break_delegs(&file, &conflicting);
        match held {
            false => Ok(access),
            true => Err(recalls),
        }
    }

    /// Whether any of `refs` (delegations on `file`) is still held, and
    /// the recalls to send for those not recalled yet; revokes those
    /// recalled longer than the lease ago.
    fn break_delegs(&self, file: &FileKey, refs: &[DelegRef]) -> (bool, Vec<Recall>) {
        let now = self.clock.now_ms();
        let lease = crate::ids::ms(self.cfg.lease_time);
        let mut held = false;
        let mut out = Vec::new();
        for d in refs {
            let c = locked(&self.registry).by_id.get(&d.client).cloned();
            // A client gone or expired holds nothing any more (the
            // reaper frees its delegations).
            let Some(c) = c.filter(|c| !c.is_expired()) else {
                continue;
            };
            let mut st = locked(&c.st);
            let Some(e) = st.stateids.get_mut(&d.other) else {
                continue;
            };
            if e.revoked.is_some() {
                continue;
            }
            let seqid = e.seqid;
            let Body::Delegation {
                write,
                fh,
                recalled_ms,
                ..
            } = &mut e.body
            else {
                continue;
            };
            match *recalled_ms {
                None => {
                    *recalled_ms = Some(now);
                    held = true;
                    out.push(Recall {
                        client: ClientHandle(c.clone()),
                        stateid: Stateid {
                            seqid,
                            other: d.other,
                        },
                        fh: fh.clone(),
                        write: *write,
                    });
                    self.stats.recalls.fetch_add(1, Ordering::Relaxed);
                    let mut r = locked(&self.recalled);
                    // Bounded: past it, the conflicting calls revoke.
                    if r.len() < self.cfg.limits.max_delegations.saturating_mul(2) {
                        r.push(Pending {
                            client: c.id,
                            other: d.other,
                            deadline_ms: now + lease,
                        });
                    }
                }
                Some(t) if now.saturating_sub(t) > lease => {
                    self.revoke_deleg(&c, &mut st, &d.other);
                }
                Some(_) => held = true,
            }
        }
        if !out.is_empty() {
            self.note_contended(file, now);
        }
        (held, out)
    }

    /// Revokes delegation `other` of `c` (recalled, not returned in
    /// time): NFS4ERR_DELEG_REVOKED until FREE_STATEID, and
    /// SEQ4_STATUS_RECALLABLE_STATE_REVOKED meanwhile.
    fn revoke_deleg(&self, c: &Client, st: &mut ClientState, other: &[u8; 12]) {
        let Some(e) = st.stateids.get_mut(other) else {
            return;
        };
        if e.revoked.is_some() || e.kind() != StateKind::Delegation {
            return;
        }
        e.revoked = Some(Revoked::Deleg);
        let file = e.file;
        st.revoked += 1;
        st.deleg_revoked += 1;
        st.delegs = st.delegs.saturating_sub(1);
        self.delegations.fetch_sub(1, Ordering::AcqRel);
        c.has_revoked.store(true, Ordering::Release);
        self.unlist_deleg(&file, other);
        self.stats
            .delegations_revoked
            .fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            clientid = format!("{:#x}", c.id.0),
            "nfsv4: delegation not returned in time: revoked"
        );
    }

    /// Whether `r` still needs sending: its delegation is held (not
    /// returned, revoked or gone with its client) and recalled.
    pub fn recall_outstanding(&self, r: &Recall) -> bool {
        let c = &r.client.0;
        if c.is_expired() {
            return false;
        }
        let st = locked(&c.st);
        matches!(
            st.stateids.get(&r.stateid.other),
            Some(Entry {
                revoked: None,
                body: Body::Delegation {
                    recalled_ms: Some(_),
                    ..
                },
                ..
            })
        )
    }

    /// Whether any write delegation is held (cheap: the gate of the
    /// checks every read makes).
    pub fn any_write_delegation(&self) -> bool {
        self.write_delegations.load(Ordering::Acquire) > 0
    }

    /// The write delegation on `file` of a client other than `not`, held
    /// (not revoked, its client not expired): its recall (for
    /// CB_GETATTR's client, handle and stateid), the file's change
    /// attribute when it was granted (RFC 8881 §10.4.3) and whether it
    /// is being recalled.
    pub fn write_holder(&self, file: &FileKey, not: Option<ClientId>) -> Option<WriteHolder> {
        if !self.any_write_delegation() {
            return None;
        }
        let d = {
            let files = self.files.shard(file);
            let f = files.get(file)?;
            f.delegs
                .iter()
                .find(|d| d.write && Some(d.client) != not)
                .copied()?
        };
        let c = locked(&self.registry).by_id.get(&d.client).cloned();
        let c = c.filter(|c| !c.is_expired())?;
        let st = locked(&c.st);
        let e = st.stateids.get(&d.other)?;
        match &e.body {
            Body::Delegation {
                write: true,
                fh,
                recalled_ms,
                change,
            } if e.revoked.is_none() => Some(WriteHolder {
                recall: Recall {
                    client: ClientHandle(c.clone()),
                    stateid: Stateid {
                        seqid: e.seqid,
                        other: d.other,
                    },
                    fh: fh.clone(),
                    write: true,
                },
                change: *change,
                recalled: recalled_ms.is_some(),
            }),
            _ => None,
        }
    }

    /// Whether any client holds a delegation on `file` (a revoked one is
    /// held no more).
    pub fn delegated(&self, file: &FileKey) -> bool {
        self.files
            .shard(file)
            .get(file)
            .is_some_and(|f| !f.delegs.is_empty())
    }

    /// Revokes every delegation on `file` now, recalled or not (the
    /// embedder can no longer keep the file from changing under them:
    /// its local lease was taken back). How many.
    pub fn revoke_delegations_on(&self, file: &FileKey) -> usize {
        let refs: Vec<DelegRef> = match self.files.shard(file).get(file) {
            Some(f) => f.delegs.clone(),
            None => return 0,
        };
        let mut n = 0;
        for d in refs {
            let c = locked(&self.registry).by_id.get(&d.client).cloned();
            // An expired client's go with it (the reaper's part).
            let Some(c) = c.filter(|c| !c.is_expired()) else {
                continue;
            };
            let mut st = locked(&c.st);
            if st.stateids.contains_key(&d.other) {
                self.revoke_deleg(&c, &mut st, &d.other);
                n += 1;
            }
        }
        n
    }

    /// Delegation `other` is no longer held on `file`.
    pub(crate) fn unlist_deleg(&self, file: &FileKey, other: &[u8; 12]) {
        let mut files = self.files.shard(file);
        if let Some(f) = files.get_mut(file) {
            if let Some(i) = f.delegs.iter().position(|d| d.other == *other) {
                if f.delegs.swap_remove(i).write {
                    self.write_delegations.fetch_sub(1, Ordering::AcqRel);
                }
            }
            if f.is_empty() && f.lockers.is_empty() {
                files.remove(file);
            }
        }
    }

    /// The reaper's part: revokes the recalled delegations past their
    /// deadline (the lease from the recall). How many.
    pub(crate) fn revoke_overdue(&self) -> usize {
        let now = self.clock.now_ms();
        let due: Vec<Pending> = {
            let mut r = locked(&self.recalled);
            if r.is_empty() {
                return 0;
            }
            let (due, keep) = r.drain(..).partition(|p| p.deadline_ms <= now);
            *r = keep;
            due
        };
        let mut n = 0;
        for p in due {
            let c = locked(&self.registry).by_id.get(&p.client).cloned();
            let Some(c) = c.filter(|c| !c.is_expired()) else {
                continue;
            };
            let mut st = locked(&c.st);
            let recalled = matches!(
                st.stateids.get(&p.other),
                Some(Entry {
                    revoked: None,
                    body: Body::Delegation {
                        recalled_ms: Some(_),
                        ..
                    },
                    ..
                })
            );
            if recalled {
                self.revoke_deleg(&c, &mut st, &p.other);
                n += 1;
            }
        }
        n
    }

    fn contended(&self, file: &FileKey, now: u64) -> bool {
        locked(&self.contended)
            .get(file)
            .is_some_and(|&t| now.saturating_sub(t) < RECALL_BACKOFF_MS)
    }

    fn note_contended(&self, file: &FileKey, now: u64) {
        let mut m = locked(&self.contended);
        if m.len() >= MAX_CONTENDED {
            m.retain(|_, t| now.saturating_sub(*t) < RECALL_BACKOFF_MS);
            if m.len() >= MAX_CONTENDED {
                // Forgetting only means a delegation may be granted on a
                // contended file, to be recalled again: never unsafe.
                m.clear();
            }
        }
        m.insert(*file, now);
    }
}
