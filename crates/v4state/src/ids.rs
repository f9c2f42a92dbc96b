//! Identifiers: client ids, session ids, stateids, and how they are made.
//!
//! Each carries this server instance's boot verifier, so one issued
//! before a restart is recognised as stale rather than mistaken for a
//! new one. Session ids and stateid `other`s also carry a keyed BLAKE3 MAC
//! over the rest (the key is random per instance), so they cannot be
//! guessed from the ones a client sees.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// A client id (clientid4): the boot verifier in the high 32 bits, a
/// counter in the low ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientId(pub u64);

impl ClientId {
    /// The boot verifier of the instance that issued it.
    pub fn boot(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

/// A client's verifier (verifier4): changes when the client restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Verifier(pub [u8; 8]);

/// Who the caller is, as the protocol layer names it (an AUTH_SYS uid, a
/// GSS principal...): compared for equality only (§18.35.5's principal
/// checks).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Principal(pub Vec<u8>);

/// A session id (sessionid4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionId(pub [u8; 16]);

/// A transport connection, as the embedder numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// The file a piece of state is on, as the caller names it: the
/// filesystem (an export or device id) and the file in it (an inode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileKey {
    pub fsid: u64,
    pub fileid: u64,
}

/// A stateid4: `other` names the state, `seqid` its version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stateid {
    pub seqid: u32,
    pub other: [u8; 12],
}

/// The special stateids of RFC 8881 §8.2.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// All zeros: I/O without an open (share reservations still apply).
    Anonymous,
    /// All ones: a READ that bypasses share reservations.
    Bypass,
    /// seqid 1, other zero: the compound's current stateid (the caller
    /// substitutes it; it never reaches this crate's checks).
    Current,
    /// seqid `u32::MAX`, other zero, or any other seqid with a reserved
    /// `other`: NFS4ERR_BAD_STATEID wherever used.
    Invalid,
}

impl Stateid {
    pub const ANONYMOUS: Stateid = Stateid {
        seqid: 0,
        other: [0; 12],
    };
    pub const BYPASS: Stateid = Stateid {
        seqid: u32::MAX,
        other: [0xff; 12],
    };
    pub const CURRENT: Stateid = Stateid {
        seqid: 1,
        other: [0; 12],
    };
    pub const INVALID: Stateid = Stateid {
        seqid: u32::MAX,
        other: [0; 12],
    };

    /// Which special stateid this is, None for a regular one.
    pub fn special(&self) -> Option<Special> {
        if self.other == [0; 12] {
            return Some(match self.seqid {
                0 => Special::Anonymous,
                1 => Special::Current,
                _ => Special::Invalid,
            });
        }
        if self.other == [0xff; 12] {
            return Some(match self.seqid {
                u32::MAX => Special::Bypass,
                _ => Special::Invalid,
            });
        }
        None
    }
}

/// The seqid after `s`: 0 is skipped on wrap, as it means "the current
/// one" in a 4.1 stateid (§8.2.2).
pub(crate) fn next_seqid(s: u32) -> u32 {
    match s.wrapping_add(1) {
        0 => 1,
        n => n,
    }
}

/// Makes ids for one server instance.
pub(crate) struct Minter {
    pub(crate) boot: u32,
    key: [u8; 32],
    clients: AtomicU32,
    sessions: AtomicU32,
    stateids: AtomicU32,
}

impl Minter {
    pub(crate) fn new(boot: u32, key: [u8; 32]) -> Minter {
        // Client ids carry no MAC: their counter starts where the random
        // key says, so two instances with one boot verifier (heads of one
        // filesystem started in the same second) do not hand out the same
        // ids, and a client moving from one to the other after a failover
        // cannot take over another client's id (its CREATE_SESSION there
        // is NFS4ERR_STALE_CLIENTID).
        let first = blake3::keyed_hash(&key, b"clients");
        let mut c = [0u8; 4];
        c.copy_from_slice(&first.as_bytes()[..4]);
        Minter {
            boot,
            key,
            clients: AtomicU32::new(u32::from_be_bytes(c)),
            sessions: AtomicU32::new(1),
            stateids: AtomicU32::new(1),
        }
    }

    fn mac(&self, what: &[u8], body: &[u8]) -> blake3::Hash {
        let mut h = blake3::Hasher::new_keyed(&self.key);
        h.update(what);
        h.update(body);
        h.finalize()
    }

    /// A new client id. The counter wraps after 2^32 ids in one run; the
    /// caller skips an id still in use.
    pub(crate) fn client_id(&self) -> ClientId {
        let n = self.clients.fetch_add(1, Ordering::Relaxed);
        ClientId(((self.boot as u64) << 32) | n as u64)
    }

    /// A new session id: boot, counter, 8 bytes of MAC.
    pub(crate) fn session_id(&self) -> SessionId {
        let n = self.sessions.fetch_add(1, Ordering::Relaxed);
        let mut id = [0u8; 16];
        id[..4].copy_from_slice(&self.boot.to_be_bytes());
        id[4..8].copy_from_slice(&n.to_be_bytes());
        let m = self.mac(b"session", &id[..8]);
        id[8..].copy_from_slice(&m.as_bytes()[..8]);
        SessionId(id)
    }

    /// A new stateid `other`: boot, counter, 4 bytes of MAC. The caller
    /// skips one still in use (the counter wraps after 2^32).
    pub(crate) fn stateid_other(&self) -> [u8; 12] {
        let n = self.stateids.fetch_add(1, Ordering::Relaxed);
        let mut o = [0u8; 12];
        o[..4].copy_from_slice(&self.boot.to_be_bytes());
        o[4..8].copy_from_slice(&n.to_be_bytes());
        let m = self.mac(b"stateid", &o[..8]);
        o[8..].copy_from_slice(&m.as_bytes()[..4]);
        o
    }

    /// Who made stateid `other` (the stateid checks say what each
    /// answer means to a client).
    pub(crate) fn origin(&self, other: &[u8; 12]) -> Origin {
        if other[..4] != self.boot.to_be_bytes() {
            return Origin::OtherInstance;
        }
        let m = self.mac(b"stateid", &other[..8]);
        if other[8..] != m.as_bytes()[..4] {
            return Origin::Forged;
        }
        Origin::Ours
    }
}

/// Who made a stateid `other`, by its boot verifier and MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// This instance.
    Ours,
    /// Another instance (one before a restart): its boot verifier differs.
    OtherInstance,
    /// No instance: its MAC is wrong.
    Forged,
}

/// A random key for the MACs (from /dev/urandom).
pub(crate) fn random_key() -> std::io::Result<[u8; 32]> {
    use std::io::Read;
    let mut k = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut k)?;
    Ok(k)
}

/// The state's clock: monotonic milliseconds since the state was made,
/// from the coarse monotonic clock (a tick's resolution, a few ms: leases
/// and grace count seconds, and SEQUENCE reads it twice per compound, so
/// the cheaper read is worth it). Tests move it forward instead of
/// sleeping.
#[derive(Debug)]
pub struct Clock {
    base_ms: u64,
    skew_ms: AtomicU64,
}

impl Default for Clock {
    fn default() -> Self {
        Clock {
            base_ms: coarse_ms(),
            skew_ms: AtomicU64::new(0),
        }
    }
}

/// CLOCK_MONOTONIC_COARSE in milliseconds.
fn coarse_ms() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
    (t.tv_sec.max(0) as u64) * 1000 + (t.tv_nsec.max(0) as u64) / 1_000_000
}

impl Clock {
    pub(crate) fn now_ms(&self) -> u64 {
        coarse_ms().saturating_sub(self.base_ms) + self.skew_ms.load(Ordering::Relaxed)
    }

    /// Moves this clock forward by `d` (tests).
    #[cfg(test)]
    pub(crate) fn advance(&self, d: Duration) {
        self.skew_ms
            .fetch_add(d.as_millis() as u64, Ordering::Relaxed);
    }
}

pub(crate) fn ms(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specials() {
        assert_eq!(Stateid::ANONYMOUS.special(), Some(Special::Anonymous));
        assert_eq!(Stateid::BYPASS.special(), Some(Special::Bypass));
        assert_eq!(Stateid::CURRENT.special(), Some(Special::Current));
        assert_eq!(Stateid::INVALID.special(), Some(Special::Invalid));
        let odd = Stateid {
            seqid: 7,
            other: [0xff; 12],
        };
        assert_eq!(odd.special(), Some(Special::Invalid));
        let m = Minter::new(5, [1; 32]);
        let s = Stateid {
            seqid: 1,
            other: m.stateid_other(),
        };
        assert_eq!(s.special(), None);
    }

    #[test]
    fn others_are_checked() {
        let m = Minter::new(5, [1; 32]);
        let o = m.stateid_other();
        assert_eq!(m.origin(&o), Origin::Ours);
        let mut forged = o;
        forged[6] ^= 1;
        assert_eq!(m.origin(&forged), Origin::Forged);
        let later = Minter::new(6, [2; 32]);
        assert_eq!(later.origin(&o), Origin::OtherInstance);
        assert_ne!(m.stateid_other(), o, "each is new");
        assert_eq!(m.client_id().boot(), 5);
        // Another instance with the same boot verifier (another head
        // started in the same second) hands out other client ids.
        let twin = Minter::new(5, [3; 32]);
        let mine: Vec<ClientId> = (0..1000).map(|_| m.client_id()).collect();
        assert!((0..1000).all(|_| !mine.contains(&twin.client_id())));
        assert_ne!(m.session_id(), m.session_id());
    }
}
