//! The fore channel's slot table (RFC 8881 §2.10.6.1): one slot per
//! outstanding COMPOUND, each with the sequence id the server last
//! accepted on it.
//!
//! A call takes the lowest free slot and sends that slot's sequence id plus
//! one; when its SEQUENCE succeeds the server holds the new id, which the
//! slot keeps. A call whose reply never came (timeout, lost connection, an
//! undecodable reply) leaves the slot's state at the server unknown, so the
//! slot is retired rather than guessed at; once every slot is retired the
//! session fails its calls.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Semaphore;

use crate::error::ClientError;

/// Most fore-channel slots a client uses, whatever the server grants.
pub const MAX_SLOTS: u32 = 1024;

struct Table {
    /// The sequence id the server last accepted on each slot (0 before the
    /// first call: RFC 8881 §2.10.6.1, a new slot's first id is 1).
    seqids: Vec<u32>,
    busy: Vec<bool>,
    free: BinaryHeap<Reverse<u32>>,
    /// Slots still usable (not retired).
    usable: usize,
    /// The server's last sr_target_highest_slotid.
    target_highest: u32,
}

/// The slots of one session.
pub(crate) struct SlotTable {
    table: Mutex<Table>,
    /// One permit per free slot.
    ready: Semaphore,
}

impl SlotTable {
    pub(crate) fn new(n: u32) -> Arc<Self> {
        let n = n.clamp(1, MAX_SLOTS);
        Arc::new(SlotTable {
            table: Mutex::new(Table {
                seqids: vec![0; n as usize],
                busy: vec![false; n as usize],
                free: (0..n).map(Reverse).collect(),
                usable: n as usize,
                target_highest: n - 1,
            }),
            ready: Semaphore::new(n as usize),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // Every update is a few field writes; a panic cannot leave it torn.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().seqids.len()
    }

    pub(crate) fn target_highest(&self) -> u32 {
        self.lock().target_highest
    }

    /// Wait for a free slot and take the lowest.
    pub(crate) async fn acquire(self: &Arc<Self>) -> Result<Slot, ClientError> {
        if self.lock().usable == 0 {
            return Err(ClientError::Protocol(
                "every session slot was lost with its reply".into(),
            ));
        }
        let permit = self
            .ready
            .acquire()
            .await
            .map_err(|_| ClientError::Protocol("every session slot was lost".into()))?;
        // Released by hand when the slot comes back (`Slot::drop`).
        permit.forget();
        let mut t = self.lock();
        let Some(Reverse(id)) = t.free.pop() else {
            // Permits and free slots move together; not reachable.
            return Err(ClientError::Protocol("slot table out of step".into()));
        };
        if let Some(b) = t.busy.get_mut(id as usize) {
            *b = true;
        }
        let seqid = t.seqids.get(id as usize).copied().unwrap_or(0);
        Ok(Slot {
            table: self.clone(),
            id,
            seqid,
            lost: false,
        })
    }

    /// The highest slot with a call outstanding (at least `id`): SEQUENCE's
    /// sa_highest_slotid (RFC 8881 §18.46.3).
    fn highest_busy(&self, id: u32) -> u32 {
        let t = self.lock();
        let top = t.busy.iter().rposition(|&b| b).unwrap_or(0) as u32;
        top.max(id)
    }

    fn set_target(&self, target: u32) {
        self.lock().target_highest = target;
    }

    fn release(&self, id: u32, seqid: u32, lost: bool) {
        let mut t = self.lock();
        if let Some(b) = t.busy.get_mut(id as usize) {
            *b = false;
        }
        if lost {
            t.usable = t.usable.saturating_sub(1);
            if t.usable == 0 {
                // Wake the waiters so they fail instead of hanging.
                self.ready.close();
            }
            return;
        }
        if let Some(s) = t.seqids.get_mut(id as usize) {
            *s = seqid;
        }
        t.free.push(Reverse(id));
        drop(t);
        self.ready.add_permits(1);
    }
}

/// One slot, held for one call (or, in tests, for several sends of the
/// same call). Returned to the table when dropped.
pub struct Slot {
    table: Arc<SlotTable>,
    id: u32,
    seqid: u32,
    lost: bool,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("id", &self.id)
            .field("seqid", &self.seqid)
            .finish()
    }
}

impl Slot {
    /// sa_slotid.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The sequence id the server last accepted on this slot.
    pub fn seqid(&self) -> u32 {
        self.seqid
    }

    /// The id a new request on this slot carries.
    pub fn next_seqid(&self) -> u32 {
        self.seqid.wrapping_add(1)
    }

    /// sa_highest_slotid for a call on this slot.
    pub(crate) fn highest_slotid(&self) -> u32 {
        self.table.highest_busy(self.id)
    }

    /// The server accepted `seqid` on this slot (its SEQUENCE succeeded).
    pub(crate) fn accepted(&mut self, seqid: u32, target_highest: u32) {
        self.seqid = seqid;
        self.table.set_target(target_highest);
    }

    /// The slot's state at the server is unknown: retire it.
    pub(crate) fn lose(&mut self) {
        self.lost = true;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.table.release(self.id, self.seqid, self.lost);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lowest_free_slot_first_and_seqids_kept() {
        let t = SlotTable::new(3);
        let mut a = t.acquire().await.unwrap();
        let b = t.acquire().await.unwrap();
        assert_eq!((a.id(), b.id()), (0, 1));
        assert_eq!(a.next_seqid(), 1);
        assert_eq!(a.highest_slotid(), 1);
        a.accepted(1, 2);
        drop(a);
        let a = t.acquire().await.unwrap();
        assert_eq!((a.id(), a.seqid(), a.next_seqid()), (0, 1, 2));
        drop(b);
        assert_eq!(a.highest_slotid(), 0);
    }

    #[tokio::test]
    async fn a_full_table_waits_and_a_lost_slot_is_retired() {
        let t = SlotTable::new(1);
        let mut a = t.acquire().await.unwrap();
        let t2 = t.clone();
        let waiter = tokio::spawn(async move { t2.acquire().await.map(|s| s.id()) });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        a.lose();
        drop(a);
        assert!(waiter.await.unwrap().is_err());
        assert!(t.acquire().await.is_err());
    }

    #[test]
    fn slot_count_is_clamped() {
        assert_eq!(SlotTable::new(0).len(), 1);
        assert_eq!(SlotTable::new(u32::MAX).len(), MAX_SLOTS as usize);
    }
}
