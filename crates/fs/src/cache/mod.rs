//! Bounded caches shared by the backends (the dentry_unused soft-lockup
//! thread's lesson, docs/lessons.md: bounded per export,
//! reclaimed in small batches off the request path, never scanned whole
//! under a lock).
//!
//! * `lru`: sharded CLOCK cache for entries that hold descriptors (handle
//!   to object, open files), in-use entries never evicted.
//! * `budget`: the descriptor bound across every cache of every export.
//! * `reclaim`: the background thread that keeps the budget's margin and
//!   runs each cache's periodic upkeep.
//! * `genmap`: two-generation maps for entries without descriptors (object
//!   locations, short-lived verdicts).

pub mod budget;
pub mod genmap;
pub mod lru;
pub mod reclaim;

pub use budget::{FdBudget, Permit};
pub use genmap::{GenMap, TtlSet};
pub use lru::{Counts, Inserted, Lru};
pub use reclaim::{Caches, Reclaim};
