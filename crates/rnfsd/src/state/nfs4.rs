//! What the NFSv4.1 program keeps in the server: the protocol state
//! (clients, sessions, stateids, leases: `rnfsd_v4state`), the
//! pseudo-filesystem joining the exports, and the server's identity as
//! EXCHANGE_ID gives it (RFC 8881 §2.5, §18.35).

use super::idmap::IdMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rnfsd_v4state::{Reaper, State};

use super::copy::Copies;
use super::deleg::Delegations;
use super::pseudo::Pseudo;
use super::Export;

/// Upper bound on a COMPOUND reply body: the largest reply a session may
/// have (`rnfsd_v4state::Limits::max_response_size` is clamped to it).
pub const MAX_COMPOUND_REPLY: usize = (1 << 20) + 64 * 1024;

/// `nfs4_copy_sync_max`'s default: 32 MiB, well under a second of
/// copy_file_range on a disk (and instant where it shares blocks).
pub const DEFAULT_COPY_SYNC_MAX: u64 = 32 << 20;

/// The NFSv4 side of the server.
pub struct Nfs4 {
    pub state: Arc<State>,
    pseudo: ArcSwap<Pseudo>,
    /// server_owner4.so_major_id and eir_server_scope: this host's name,
    /// so a client sees every address of one server as the same server
    /// (trunking, §2.10.5) and two hosts as two.
    pub owner: Vec<u8>,
    /// The lease (`nfs4_lease_secs`): the `lease_time` attribute.
    pub lease: Duration,
    /// Minor version 2 is answered: its data operations served
    /// (`programs::nfs4::v42`), the rest NFS4ERR_NOTSUPP.
    pub minor2: bool,
    /// Owner strings (`nfs4_idmap`).
    pub idmap: IdMap,
    /// Bytes one COPY copies at most (`nfs4_copy_sync_max`); a larger one
    /// is answered with a short copy the client continues.
    pub copy_sync_max: u64,
    /// Asynchronous copies (`nfs4_copies_max`, `nfs4_copies_per_client`).
    pub copies: Copies,
    /// Where each operation is counted (None: not counted).
    pub stats: Option<OpStats>,
    /// Delegations: back channels, recalls, the check before a change.
    pub deleg: Delegations,
    /// Frees expired clients' state off the request path; stops when
    /// dropped.
    _reaper: Option<Reaper>,
}

/// The statistics registry and the rows of NFSv4's operations in it
/// (found once: finding them walks every registered version).
pub struct OpStats {
    pub reg: Arc<rnfsd_stats::Registry>,
    pub rows: rnfsd_stats::Rows,
}

impl OpStats {
    /// The rows registered as program `prog`, version `vers` (the
    /// operation table's: `programs::nfs4::OPS_STATS_PROG`), if any.
    pub fn of(reg: Arc<rnfsd_stats::Registry>, prog: u32, vers: u32) -> Option<OpStats> {
        let rows = reg.rows(prog, vers)?;
        Some(OpStats { reg, rows })
    }
}

impl Nfs4 {
    /// The NFSv4 side for `state`, with the pseudo-filesystem of
    /// `exports`.
    pub fn new(
        state: Arc<State>,
        exports: &[Arc<Export>],
        minor2: bool,
        idmap: IdMap,
        reaper: Option<Reaper>,
        stats: Option<OpStats>,
    ) -> Nfs4 {
        let lease = state.config().lease_time;
        let deleg = Delegations::off();
        let copies = Copies::new(
            super::copy::DEFAULT_COPIES_MAX,
            super::copy::DEFAULT_COPIES_PER_CLIENT,
            2 * lease,
            state.boot(),
        );
        Nfs4 {
            copies,
            deleg,
            state,
            pseudo: ArcSwap::from_pointee(pseudo_of(exports)),
            owner: host_name(),
            lease,
            minor2,
            idmap,
            copy_sync_max: DEFAULT_COPY_SYNC_MAX,
            stats,
            _reaper: reaper,
        }
    }

    /// With COPY bounded at `bytes` per call.
    pub fn with_copy_sync_max(mut self, bytes: u64) -> Nfs4 {
        self.copy_sync_max = bytes.max(1);
        self
    }

    /// With at most `max` asynchronous copies at once, `per_client` of one
    /// client.
    pub fn with_copies(mut self, max: usize, per_client: usize) -> Nfs4 {
        self.copies = Copies::new(max, per_client, 2 * self.lease, self.state.boot());
        self
    }

    /// Delegations as `nfs4_delegations` says (off until this is called).
    pub fn set_delegations(&mut self, d: Delegations) {
        self.deleg = d;
    }

    /// The pseudo-filesystem in force (a compound keeps the one it
    /// started with).
    pub fn pseudo(&self) -> arc_swap::Guard<Arc<Pseudo>> {
        self.pseudo.load()
    }

    /// The exports changed: rebuild the pseudo-filesystem.
    pub fn set_exports(&self, exports: &[Arc<Export>]) {
        self.pseudo.store(Arc::new(pseudo_of(exports)));
    }
}

fn pseudo_of(exports: &[Arc<Export>]) -> Pseudo {
    Pseudo::build(exports.iter().map(|e| (e.id, e.path.as_str())))
}

fn host_name() -> Vec<u8> {
    rustix::system::uname().nodename().to_bytes().to_vec()
}
