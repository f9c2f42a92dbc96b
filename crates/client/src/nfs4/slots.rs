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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::error::ClientError;

/// Most fore-channel slots a client uses, whatever the server grants.
pub const MAX_SLOTS: u32 = 1024;

/// Bits of slot state per word of `free` and `busy`.
const WORD: usize = 64;

struct Table {
    /// The sequence id the server last accepted on each slot (0 before the
    /// first call: RFC 8881 §2.10.6.1, a new slot's first id is 1).
    seqids: Vec<u32>,
    /// One bit per slot: free to take. A retired slot is neither free nor
    /// busy ([`SlotTable::busy`]).
    free: Vec<u64>,
    /// Slots still usable (not retired).
    usable: usize,
    /// The server's last sr_target_highest_slotid.
    target_highest: u32,
    /// Callers waiting for a slot to come free.
    waiting: usize,
}

impl Table {
    /// Takes the lowest free slot and marks it in `busy`.
    fn take(&mut self, busy: &[AtomicU64]) -> Option<u32> {
        let (i, w) = self.free.iter_mut().enumerate().find(|(_, w)| **w != 0)?;
        let b = w.trailing_zeros() as usize;
        *w &= !(1 << b);
        set_bit(busy, i, b, true);
        Some((i * WORD + b) as u32)
    }

    /// Clears `id`'s busy bit; sets its free bit unless it is retired.
    fn put(&mut self, busy: &[AtomicU64], id: u32, retire: bool) {
        let (i, b) = (id as usize / WORD, id as usize % WORD);
        set_bit(busy, i, b, false);
        if !retire {
            if let Some(x) = self.free.get_mut(i) {
                *x |= 1 << b;
            }
        }
    }
}

/// Sets or clears bit `b` of word `i`. Only a holder of the table's lock
/// writes `busy`, so a load and a store suffice (no read-modify-write).
fn set_bit(busy: &[AtomicU64], i: usize, b: usize, on: bool) {
    if let Some(x) = busy.get(i) {
        let w = x.load(Ordering::Relaxed);
        x.store(
            if on { w | 1 << b } else { w & !(1 << b) },
            Ordering::Relaxed,
        );
    }
}

/// The slots of one session.
pub(crate) struct SlotTable {
    table: Mutex<Table>,
    /// One bit per slot: taken by a call. Written under `table`'s lock,
    /// read without it for SEQUENCE's sa_highest_slotid (a snapshot, as
    /// it was under the lock: calls come and go around it either way).
    busy: Box<[AtomicU64]>,
    /// Wakes a caller waiting for a slot (one per slot returned), or all
    /// of them once every slot is retired.
    freed: Notify,
}

impl SlotTable {
    pub(crate) fn new(n: u32) -> Arc<Self> {
        let n = n.clamp(1, MAX_SLOTS) as usize;
        let words = n.div_ceil(WORD);
        let free = (0..words)
            .map(|i| match n - i * WORD {
                left if left >= WORD => u64::MAX,
                left => (1u64 << left) - 1,
            })
            .collect();
        Arc::new(SlotTable {
            table: Mutex::new(Table {
                seqids: vec![0; n],
                free,
                usable: n,
                target_highest: n as u32 - 1,
                waiting: 0,
            }),
            busy: (0..words).map(|_| AtomicU64::new(0)).collect(),
            freed: Notify::new(),
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
        let mut waited = false;
        loop {
            let mut freed = std::pin::pin!(self.freed.notified());
            {
                let mut t = self.lock();
                if waited {
                    t.waiting = t.waiting.saturating_sub(1);
                }
                if t.usable == 0 {
                    return Err(ClientError::Protocol(
                        "every session slot was lost with its reply".into(),
                    ));
                }
                if let Some(id) = t.take(&self.busy) {
                    let seqid = t.seqids.get(id as usize).copied().unwrap_or(0);
                    return Ok(Slot {
                        table: self.clone(),
                        id,
                        seqid,
                        target: None,
                        lost: false,
                    });
                }
                // Listed as a waiter before the table is let go: a slot
                // returned from now on wakes this caller (one per slot,
                // `release`).
                freed.as_mut().enable();
                t.waiting += 1;
            }
            // A caller dropped while waiting leaves `waiting` one too high:
            // at worst a return wakes no one; a wake-up it was given passes
            // to another waiter (tokio's Notify).
            waited = true;
            freed.await;
        }
    }

    /// The highest slot with a call outstanding (at least `id`): SEQUENCE's
    /// sa_highest_slotid (RFC 8881 §18.46.3).
    fn highest_busy(&self, id: u32) -> u32 {
        let top = self
            .busy
            .iter()
            .enumerate()
            .rev()
            .map(|(i, x)| (i, x.load(Ordering::Relaxed)))
            .find(|&(_, w)| w != 0)
            .map(|(i, w)| (i * WORD + (WORD - 1 - w.leading_zeros() as usize)) as u32);
        top.unwrap_or(0).max(id)
    }

    fn release(&self, id: u32, seqid: u32, target: Option<u32>, lost: bool) {
        let mut t = self.lock();
        if let Some(target) = target {
            t.target_highest = target;
        }
        t.put(&self.busy, id, lost);
        if lost {
            t.usable = t.usable.saturating_sub(1);
            if t.usable == 0 {
                drop(t);
                // Wake the waiters so they fail instead of hanging.
                self.freed.notify_waiters();
            }
            return;
        }
        if let Some(s) = t.seqids.get_mut(id as usize) {
            *s = seqid;
        }
        let wake = t.waiting > 0;
        drop(t);
        if wake {
            self.freed.notify_one();
        }
    }
}

/// One slot, held for one call (or, in tests, for several sends of the
/// same call). Returned to the table when dropped.
pub struct Slot {
    table: Arc<SlotTable>,
    id: u32,
    seqid: u32,
    /// sr_target_highest_slotid of the reply, recorded when the slot
    /// returns.
    target: Option<u32>,
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
        self.target = Some(target_highest);
    }

    /// The slot's state at the server is unknown: retire it.
    pub(crate) fn lose(&mut self) {
        self.lost = true;
    }

    /// A call on this slot ended without a reply that decoded: the slot
    /// is retired when dropped and must not carry another call.
    pub fn is_lost(&self) -> bool {
        self.lost
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.table
            .release(self.id, self.seqid, self.target, self.lost);
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

    #[tokio::test]
    async fn slots_past_one_word_are_taken_lowest_first_and_retired_ones_never() {
        let t = SlotTable::new(130);
        let mut held: Vec<Slot> = Vec::new();
        for i in 0..130 {
            let s = t.acquire().await.unwrap();
            assert_eq!(s.id(), i);
            held.push(s);
        }
        assert_eq!(held[0].highest_slotid(), 129);
        // Return 70 (retired) and 65 (kept); 129 and 0 stay busy.
        let mut s70 = held.remove(70);
        s70.lose();
        drop(s70);
        drop(held.remove(65));
        let again = t.acquire().await.unwrap();
        assert_eq!(again.id(), 65);
        drop(again);
        let tail: Vec<Slot> = held.drain(1..).collect();
        drop(tail);
        assert_eq!(held[0].highest_slotid(), 0);
        let mut ids = Vec::new();
        for _ in 0..128 {
            ids.push(t.acquire().await.unwrap());
        }
        assert!(ids.iter().all(|s| s.id() != 70 && s.id() != 0));
        assert_eq!(ids.last().map(|s| s.id()), Some(129));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_waiters_on_few_slots_all_get_one() {
        let t = SlotTable::new(2);
        let mut tasks = Vec::new();
        for _ in 0..40 {
            let t = t.clone();
            tasks.push(tokio::spawn(async move {
                for n in 0..200u32 {
                    let mut s = t.acquire().await.unwrap();
                    let next = s.next_seqid();
                    s.accepted(next, 1);
                    if n % 3 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            }));
        }
        let all = async {
            for h in tasks {
                h.await.unwrap();
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(20), all)
            .await
            .expect("a waiter was never woken");
        // Every call accepted one sequence id on one of the two slots.
        let (a, b) = (t.acquire().await.unwrap(), t.acquire().await.unwrap());
        assert_eq!(a.seqid() + b.seqid(), 40 * 200);
        assert_eq!(t.target_highest(), 1);
    }

    #[test]
    fn slot_count_is_clamped() {
        assert_eq!(SlotTable::new(0).len(), 1);
        assert_eq!(SlotTable::new(u32::MAX).len(), MAX_SLOTS as usize);
    }
}
