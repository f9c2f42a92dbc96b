//! The filesystem layer's fixed bounds, one group per module that uses
//! them, each with what it bounds and why this value; and the relations
//! the code relies on, checked at compile time. The configured bounds
//! (cache entries, descriptors, sync slots, scan limits) come from the
//! backends' options, whose defaults are the server's configuration.
//! Relations with the wire (handle size, transfer size, group count) are
//! checked in rnfsd, which sees both sides.

/// The sharded CLOCK cache (`cache::lru`).
pub mod lru {
    /// Fewest entries a shard is sized for: small caches use fewer shards.
    pub const MIN_PER_SHARD: usize = 64;
    /// Shards at most: enough that calls on different keys rarely share a
    /// lock, few enough that a reclaim pass over them stays short.
    pub const MAX_SHARDS: usize = 64;
    /// Slots a bounded eviction looks at per entry it wants to free: the
    /// cost of skipping entries in use or recently referenced.
    pub const SCAN_PER_EVICT: usize = 8;

    // Shard counts are `clamp(1, MAX_SHARDS)` of a division by the floor.
    const _: () = assert!(MIN_PER_SHARD > 0 && MAX_SHARDS >= 1);
    // An eviction at the bound looks at one slot at least, or it could
    // never free one.
    const _: () = assert!(SCAN_PER_EVICT >= 1);
}

/// The two-generation maps (`cache::genmap`).
pub mod genmap {
    /// Shards at most, and the fewest entries per shard: a rotation drops
    /// one shard's old generation whole, so shards stay small (about
    /// 10,000 entries at 10 million) to bound that work.
    pub const MAX_SHARDS: usize = 1024;
    pub const MIN_PER_SHARD: usize = 1024;

    // Shard counts are `clamp(1, MAX_SHARDS)` of a division by the floor.
    const _: () = assert!(MIN_PER_SHARD > 0 && MAX_SHARDS >= 1);
}

/// Margins below a bound, as fractions of it, shared by the descriptor
/// budget (`cache::budget`) and each cache's own bound (`cache::lru`).
pub mod margin {
    /// Past `bound - bound / HIGH_WATER` the reclaimer is woken (budget),
    /// a cache is trimmed and admission filters misses (lru): 1/64.
    pub const HIGH_WATER: usize = 64;
    /// Reclaim frees down to `bound - bound / TARGET`: 1/32, room for
    /// misses to insert without evicting inline; narrow, since every entry
    /// freed early may be a miss later.
    pub const TARGET: usize = 32;

    // The target lies at or below the high-water mark: a reclaim that
    // reached it does not wake the next, and `Lru::trim` (past high water,
    // down to the target) cannot underflow.
    const _: () = assert!(0 < TARGET && TARGET <= HIGH_WATER);
}

/// The background reclaimer (`cache::reclaim`).
pub mod reclaim {
    use std::time::Duration;

    /// Upkeep period while there is work.
    pub const TICK: Duration = Duration::from_millis(100);
    /// The longest upkeep period, reached after ticks that found nothing
    /// to do: an idle server wakes for upkeep less than once a second.
    pub const MAX_TICK: Duration = Duration::from_millis(1600);
    /// Entries one `reclaim` call frees at most (one shard lock each
    /// time); also what a call at the descriptor limit frees inline.
    pub const BATCH: usize = 32;
    /// Batches per tick at most, so one tick's work is bounded too.
    pub const MAX_BATCHES: usize = 1024;

    // The period doubles from TICK up to MAX_TICK (`next_wait`).
    const _: () = assert!(TICK.as_nanos() > 0 && TICK.as_nanos() <= MAX_TICK.as_nanos());
    const _: () = assert!(BATCH >= 1 && MAX_BATCHES >= 1);
}

/// Run to completion on the event loops (`inline`).
pub mod inline {
    use std::time::Duration;

    /// Jobs one loop turn may leave for its end; past it they go
    /// elsewhere, so a turn's end stays short.
    pub const AFTER_TURN_MAX: usize = 4;
    /// A speculative step that took at least this long is checked for a
    /// sleep; a shorter one held the loop's other calls for less than a
    /// handoff's wakeup across CPUs costs (about 35 µs here), sleep or not.
    pub const SLOW_STEP: Duration = Duration::from_micros(50);
    /// A step that slept quiets the loop's speculation this long at first,
    /// doubling while steps keep sleeping...
    pub const BACKOFF_MIN: Duration = Duration::from_millis(10);
    /// ... up to this: a loop waits for the disk about once a second at
    /// most in a cold storm.
    pub const BACKOFF_MAX: Duration = Duration::from_secs(1);

    // The backoff doubles from BACKOFF_MIN and halves back to it, within
    // BACKOFF_MAX (`Backoff::record`).
    const _: () =
        assert!(BACKOFF_MIN.as_nanos() > 0 && BACKOFF_MIN.as_nanos() <= BACKOFF_MAX.as_nanos());
}

/// The journal commit threads (`owed`).
pub mod owed {
    /// Commit threads per filesystem at most (`journal_commit_threads`).
    /// More than one asks the kernel for the next commit while one runs,
    /// so commits follow each other with no gap; but each then carries
    /// fewer calls, and on this disk the commit's cache flush, not the
    /// gap, is the cost. One thread, whose next batch gathers while it
    /// answers the last, ran fs_mark 0.98x-1.16x of four (FILE_SYNC
    /// writes 1.04x-1.35x) with a quarter to a third fewer journal commits
    /// and context switches (docs/durability.md, "One commit thread").
    pub const MAX_THREADS: usize = 8;

    // Thread counts are `clamp(1, MAX_THREADS)`.
    const _: () = assert!(MAX_THREADS >= 1);
}

/// The local-directory backend (`local`).
pub mod local {
    use std::time::Duration;

    use crate::access::NAME_MAX;

    /// Longest chain of directories followed when walking or verifying a
    /// path (bounds the work of one handle's resolution).
    pub const MAX_DEPTH: usize = 2048;
    /// Extra open_by_handle_at attempts after a transient ENOMEM.
    pub const ENOMEM_RETRIES: u32 = 3;
    /// How long "not this object" (a handle whose object is gone) is
    /// trusted, so stale handles cannot make the server rescan...
    pub const NEGATIVE_TTL: Duration = Duration::from_secs(10);
    /// ... and how many such handles are remembered.
    pub const NEGATIVE_CAP: usize = 4096;
    /// Largest READ served in one call (bounds the buffer a READ fills;
    /// the server's transfer size is smaller).
    pub const MAX_READ: u32 = 4 << 20;
    /// Largest entry count one READDIR returns (bounds the page's memory).
    pub const MAX_DIR_ENTRIES: usize = 64 * 1024;
    /// Longest symlink target SYMLINK makes (PATH_MAX less its NUL).
    pub const SYMLINK_MAX: usize = 4095;
    /// A name whose removal frees more than this (its last link) is not
    /// removed or renamed over on an event loop: freeing the blocks may
    /// take milliseconds.
    pub const INLINE_FREE_MAX: u64 = 16 << 20;
    /// getdents64 buffer of one READDIR (bounds memory per directory
    /// being listed).
    pub const DIR_BUF: usize = 32 * 1024;
    /// Largest supplementary group list a call may act with (bounds the
    /// setgroups call; AUTH_SYS carries at most 16).
    pub const MAX_GROUPS: usize = 1024;

    /// The walk for lost handles (`scan`): deepest directory it descends
    /// into (one open descriptor per level).
    pub const MAX_SCAN_DEPTH: usize = 256;
    /// Its getdents buffer per level.
    pub const SCAN_BUF: usize = 8 * 1024;
    /// Inodes wanted at once at most; more answer JUKEBOX until some
    /// resolve.
    pub const MAX_WANTED: usize = 1 << 16;
    /// How long "not found by a complete walk" is trusted...
    pub const MISSING_TTL: Duration = Duration::from_secs(10);
    /// ... and how many such inodes are remembered.
    pub const MISSING_CAP: usize = 4096;
    /// Entries the walk visits between looks at whether new inodes are
    /// wanted.
    pub const REFRESH_EVERY: usize = 256;

    /// The open-file cache (`files`): written descriptors idle this long
    /// are closed, their flush owed to the flusher (knfsd's laundrette
    /// closes unused v3 files within about two seconds): a held writer
    /// blocks exec (ETXTBSY) and lease holders.
    pub const WRITE_IDLE_MS: u64 = 2000;
    /// Idle writers one tick closes at most (each may cost a flush).
    pub const MAX_IDLE_CLOSES: usize = 64;
    /// Writers an event loop let go of, waiting for the reclaimer to close
    /// them, at most; past it the loop closes them itself. Well inside
    /// the descriptors `fd_reserve` leaves beside the caches' budget.
    pub const LATER_MAX: usize = 64;
    /// Waiting writers at which the reclaimer is woken before its tick.
    pub const LATER_KICK: usize = 16;

    /// The longest linux_dirent64 record: inode, offset, length and type
    /// (19 bytes), a name of NAME_MAX bytes and its NUL, 8-byte aligned.
    const DIRENT_MAX: usize = (19 + NAME_MAX + 1).next_multiple_of(8);
    // getdents64 fails (EINVAL) when one record does not fit the buffer.
    const _: () = assert!(DIR_BUF >= DIRENT_MAX && SCAN_BUF >= DIRENT_MAX);
    // A location the walk records is one a handle's resolution can follow
    // back to the root.
    const _: () = assert!(MAX_SCAN_DEPTH <= MAX_DEPTH);
    // The reclaimer is kicked when the waiting writers reach LATER_KICK,
    // which they can only while at most LATER_MAX wait.
    const _: () = assert!(1 <= LATER_KICK && LATER_KICK <= LATER_MAX);
    const _: () = assert!(REFRESH_EVERY >= 1 && MAX_IDLE_CLOSES >= 1);
}

/// The CephFS backend (`ceph`).
pub mod ceph {
    /// Largest READ served in one call (bounds the buffer a READ fills;
    /// the server's transfer size is smaller).
    pub const MAX_READ: u32 = 4 << 20;
    /// Largest entry count one READDIR returns (bounds the page's memory).
    pub const MAX_DIR_ENTRIES: usize = 64 * 1024;
    /// The most entries one kept directory listing may hold (`ceph/dir.rs`;
    /// a larger directory is listed from libcephfs each time); how many
    /// listings are kept is `ceph_listings`.
    pub const LISTING_MAX_ENTRIES: usize = 1024;
}
