//! The RPC layer's bounds on the request path, each with what it bounds
//! and why this value, and the relations the code relies on, checked at
//! compile time. Wire constants stay in rnfsd-proto; the duplicate reply
//! cache's configured bounds (`DrcConfig`) come from the server's
//! configuration.

/// Room for the longest reply header dispatch writes: an accepted
/// PROG_MISMATCH (xid, REPLY, MSG_ACCEPTED, a null verifier's flavor and
/// length, accept_stat, low, high). Every reply buffer starts this large.
pub const MAX_REPLY_HEADER: usize = 32;

/// Bytes first reserved for a reply body: most replies fit, and a large
/// one (READ, READDIR) grows to what its request asks for, never to its
/// procedure's bound. With the record mark and the header the buffer is
/// 1 KiB, within glibc's per-thread cache of freed blocks (up to 1,032
/// bytes): a bigger one goes to the general allocator on every call (a
/// COMPOUND's reply buffer, sized from here, was 1.5 % of a GETATTR's
/// server CPU).
pub const INITIAL_REPLY: usize = 1024 - MAX_REPLY_HEADER - 4;

/// Duplicate reply cache: argument bytes covered by a call's checksum
/// (knfsd's RC_CSUMLEN): enough to tell apart calls with equal xids.
pub const CSUM_LEN: usize = 256;
/// Duplicate reply cache: independent buckets (locks and LRU lists), so
/// calls of different clients rarely share a lock.
pub const BUCKETS: usize = 64;
/// Duplicate reply cache: bytes charged per entry besides its reply (key,
/// map slot, LRU slot), so entries without a reply count too.
pub const ENTRY_OVERHEAD: usize = 160;
/// Duplicate reply cache: expired replies are looked for on every this
/// many calls of a bucket (finding the oldest costs a tree walk)...
pub const EXPIRE_EVERY: u64 = 16;
/// ... and at most this many dropped then (bounded work under the lock).
pub const EXPIRE_BATCH: usize = 32;

/// Back channel (RFC 8881 §2.10.3.1): calls awaiting a REPLY on one
/// connection (`BackChannelConfig::max_pending_per_conn`). A session's
/// back channel has the slots CREATE_SESSION granted (RFC 8881 §18.36,
/// ca_maxrequests) and its layer sends no more at once: this leaves room
/// for a few sessions on one connection.
pub const BC_MAX_PENDING_PER_CONN: usize = 16;
/// Back channel: calls awaiting a REPLY on all connections
/// (`BackChannelConfig::max_pending`); each holds its record's xid and a
/// slot, about 100 bytes, so the table stays under half a MiB.
pub const BC_MAX_PENDING: usize = 4096;
/// Back channel: the longest a call waits for its REPLY
/// (`BackChannelConfig::max_wait`); a later deadline is brought to this.
/// Past a lease several times over (RFC 8881 §8.3; knfsd's is 90 s): no
/// callback is worth waiting for longer.
pub const BC_MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// The longest accepted reply header: 8 words (PROG_MISMATCH); and the
/// longest denied one: 6 words (RPC_MISMATCH: xid, REPLY, MSG_DENIED,
/// reject_stat, low, high). `tests::reply_headers_fit` encodes each.
const LONGEST_ACCEPTED: usize = 8 * 4;
const LONGEST_DENIED: usize = 6 * 4;
const _: () = assert!(MAX_REPLY_HEADER >= LONGEST_ACCEPTED && MAX_REPLY_HEADER >= LONGEST_DENIED);

// The memory bound is split over the buckets, and every entry costs
// something, so a bucket's bound bounds its entries too.
const _: () = assert!(BUCKETS > 0 && ENTRY_OVERHEAD > 0);
// One connection's calls fit the bound on all of them.
const _: () = assert!(BC_MAX_PENDING_PER_CONN > 0 && BC_MAX_PENDING >= BC_MAX_PENDING_PER_CONN);
const _: () = assert!(BC_MAX_WAIT.as_secs() > 0);

// Expiry keeps up with one new entry per call: a pass every EXPIRE_EVERY
// calls drops up to EXPIRE_BATCH.
const _: () = assert!(EXPIRE_EVERY > 0 && EXPIRE_BATCH as u64 >= EXPIRE_EVERY);

#[cfg(test)]
mod tests {
    use super::*;
    use rnfsd_proto::rpc::{encode_accepted, encode_denied, AcceptStat, AuthStat, RejectStat};
    use rnfsd_xdr::Enc;

    /// Every reply header dispatch can write fits `MAX_REPLY_HEADER`, and
    /// the longest ones are as long as the compile-time checks say.
    #[test]
    fn reply_headers_fit() {
        let accepted = [
            AcceptStat::Success,
            AcceptStat::ProgUnavail,
            AcceptStat::ProgMismatch { low: 2, high: 3 },
            AcceptStat::ProcUnavail,
            AcceptStat::GarbageArgs,
            AcceptStat::SystemErr,
        ]
        .map(|s| {
            let mut e = Enc::new();
            encode_accepted(&mut e, 7, s);
            e.len()
        });
        let denied = [
            RejectStat::RpcMismatch { low: 2, high: 2 },
            RejectStat::AuthError(AuthStat::TooWeak),
        ]
        .map(|s| {
            let mut e = Enc::new();
            encode_denied(&mut e, 7, s);
            e.len()
        });
        assert_eq!(accepted.iter().max(), Some(&LONGEST_ACCEPTED));
        assert_eq!(denied.iter().max(), Some(&LONGEST_DENIED));
        for n in accepted.iter().chain(&denied) {
            assert!(*n <= MAX_REPLY_HEADER, "{n} > {MAX_REPLY_HEADER}");
        }
    }
}
