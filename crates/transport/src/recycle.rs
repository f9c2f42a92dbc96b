//! Recycled request records and reply buffers. Each event loop and pool
//! worker keeps a bounded list of the small buffers it let go (a reply
//! written, a record whose call is done) and takes from it before asking
//! the allocator. With many calls in flight on one connection more blocks
//! of one size are live at once than glibc's per-thread cache keeps (7 a
//! size), so malloc and free went to the arena's bins for each call's
//! reply and record (bench-results/nfs4-compound-instructions/).
//!
//! A buffer is kept only if its capacity is within
//! [`MIN_RECYCLED_CAPACITY`]..=[`MAX_RECYCLED_CAPACITY`] (a large READ's
//! reply or WRITE's record goes back to the allocator) and its list holds
//! fewer than its thread's limit (`TransportConfig::recycled_buffers`;
//! threads the transport did not start keep none). A buffer is cleared
//! when kept: its length is 0, so none of its old bytes can be read
//! again (the next user sees only what it writes).

use std::cell::RefCell;

use crate::limits::{MAX_RECYCLED_CAPACITY, MIN_RECYCLED_CAPACITY};

struct Lists {
    /// Most buffers each list keeps (0: none).
    replies_max: usize,
    records_max: usize,
    replies: Vec<Vec<u8>>,
    records: Vec<Vec<u8>>,
}

thread_local! {
    // Thread-local as malloc's own cache is: an allocator's concern that
    // carries nothing of any call.
    static LISTS: RefCell<Lists> = const {
        RefCell::new(Lists {
            replies_max: 0,
            records_max: 0,
            replies: Vec::new(),
            records: Vec::new(),
        })
    };
}

/// This thread keeps at most `replies` reply buffers and `records` record
/// buffers (the lists' own room is reserved now, so keeping one never
/// allocates).
pub(crate) fn set_limits(replies: usize, records: usize) {
    let _ = LISTS.try_with(|l| {
        let l = &mut *l.borrow_mut();
        l.replies_max = replies;
        l.records_max = records;
        l.replies.truncate(replies);
        l.records.truncate(records);
        let (nr, nc) = (replies - l.replies.len(), records - l.records.len());
        l.replies.reserve_exact(nr);
        l.records.reserve_exact(nc);
    });
}

/// An empty kept buffer of at least `capacity` bytes, if this thread has
/// one on top of its list; a kept one too small is let go (the lists are
/// not searched).
fn take(capacity: usize, records: bool) -> Option<Vec<u8>> {
    if capacity > MAX_RECYCLED_CAPACITY {
        return None;
    }
    LISTS
        .try_with(|l| {
            let l = &mut *l.borrow_mut();
            let list = if records {
                &mut l.records
            } else {
                &mut l.replies
            };
            list.pop().filter(|v| v.capacity() >= capacity)
        })
        .ok()
        .flatten()
}

/// Keep `v`, cleared, if it is of a size kept and its list has room; else
/// it goes back to the allocator.
fn give(mut v: Vec<u8>, records: bool) {
    if !(MIN_RECYCLED_CAPACITY..=MAX_RECYCLED_CAPACITY).contains(&v.capacity()) {
        return;
    }
    v.clear();
    let _ = LISTS.try_with(|l| {
        let l = &mut *l.borrow_mut();
        let (list, max) = if records {
            (&mut l.records, l.records_max)
        } else {
            (&mut l.replies, l.replies_max)
        };
        if list.len() < max {
            list.push(v);
        }
    });
}

/// An empty reply buffer of at least `capacity` bytes.
pub(crate) fn take_reply(capacity: usize) -> Vec<u8> {
    take(capacity, false).unwrap_or_else(|| Vec::with_capacity(capacity))
}

/// A written reply's buffer.
pub(crate) fn give_reply(v: Vec<u8>) {
    give(v, false)
}

/// An empty record buffer of at least `capacity` bytes, if one is kept.
pub(crate) fn take_record(capacity: usize) -> Option<Vec<u8>> {
    take(capacity, true)
}

/// A consumed record's buffer.
pub(crate) fn give_record(v: Vec<u8>) {
    give(v, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_buffer_comes_back_cleared_and_the_lists_are_bounded() {
        std::thread::spawn(|| {
            // Threads the transport did not start keep nothing.
            give_reply(vec![7u8; 100]);
            assert!(take(10, false).is_none());
            set_limits(2, 1);
            let v = vec![0xaau8; 1000];
            let p1 = v.as_ptr();
            give_reply(v);
            let mut r = take_reply(500);
            assert_eq!(r.as_ptr(), p1, "the same allocation again");
            assert!(r.is_empty(), "cleared: none of its old bytes");
            r.extend_from_slice(b"new");
            assert_eq!(r, b"new");
            // Bounded: two replies, one record.
            for _ in 0..3 {
                give_reply(Vec::with_capacity(64));
                give_record(Vec::with_capacity(64));
            }
            LISTS.with(|l| {
                let l = l.borrow();
                assert_eq!((l.replies.len(), l.records.len()), (2, 1));
            });
            // Too large or too small to keep; too small for the asker.
            give_record(Vec::with_capacity(MAX_RECYCLED_CAPACITY + 1));
            assert_eq!(take_record(64).map(|v| v.capacity() >= 64), Some(true));
            give_record(Vec::with_capacity(MIN_RECYCLED_CAPACITY - 1));
            assert!(take_record(1).is_none());
            give_record(Vec::with_capacity(64));
            assert!(take_record(65).is_none());
            assert!(take_record(MAX_RECYCLED_CAPACITY + 1).is_none());
            // 0: off.
            set_limits(0, 0);
            give_reply(Vec::with_capacity(64));
            assert!(take(1, false).is_none());
        })
        .join()
        .unwrap();
    }
}
