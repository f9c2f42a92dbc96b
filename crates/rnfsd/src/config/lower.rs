//! The options of the lower crates (transport, pool, fs backends, lock
//! manager, duplicate reply cache), made from the configuration: the one
//! place where `[server]` and `[[export]]` values become them.
//!
//! Every field is written out, with no `..Default::default()`: a value the
//! server has a key for comes from that key, and a field it has none for
//! takes the lower crate's default by name, so a field added below has to
//! be decided on here. The lower crates' `Default`s are for their own
//! tests and the bench; the test at the end holds them to the server's
//! defaults where both exist.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use rnfsd_fs::cache::Caches;
use rnfsd_fs::ceph::CephOptions;
use rnfsd_fs::local::{self, LocalOptions};
use rnfsd_fs::WriteVerifier;
use rnfsd_pool::{PoolConfig, Threads};
use rnfsd_transport::{TransportConfig, UdpConfig};

use super::{CephfsConfig, HandleMode, MaxWaking, ResolvedExport, ServerConfig};
use super::{Handoff, PoolLayout, WakeOrder, WorkerSpin};

/// The NFS listeners' transport: `listen` bound, or `listeners` (socket
/// activation) used as they are.
pub fn transport(
    s: &ServerConfig,
    listen: Vec<SocketAddr>,
    listeners: Vec<TcpListener>,
) -> TransportConfig {
    TransportConfig {
        listen,
        listeners,
        event_threads: s.event_loops(),
        max_connections: s.max_connections,
        max_connections_per_client: s.max_connections_per_client,
        max_record: s.max_record() as usize,
        max_inflight_per_conn: s.max_inflight_per_conn,
        max_conn_output: s.max_conn_output,
        max_buffered_bytes: s.max_buffered_bytes,
        budget_hog_time: Duration::from_secs(s.budget_hog_secs),
        idle_timeout: Duration::from_secs(s.idle_timeout_secs),
        shutdown_timeout: Duration::from_secs(s.shutdown_timeout_secs),
        pools: match s.pools {
            PoolLayout::Shared => rnfsd_transport::PoolLayout::Shared,
            PoolLayout::PerLoop => rnfsd_transport::PoolLayout::PerLoop,
        },
        pin_loops: s.pin(),
        blocking_threads: s.blocking_threads,
        blocking_nice: (s.blocking_nice != 0).then_some(s.blocking_nice),
        blocking_sched_batch: s.sync_sched_batch,
        blocking_lazy_wake: (s.blocking_lazy_wake_us > 0)
            .then(|| Duration::from_micros(s.blocking_lazy_wake_us)),
        run_inline: s.run_inline,
        alone_per_turn: s.inline_large_writes_per_turn,
        reply_batch: s.reply_batch,
        recycled_buffers: s.recycled_buffers,
    }
}

/// The port mapper's transport on `listen`: its calls are tiny and rare,
/// so small records, and one thread not worth dividing or pinning.
pub fn portmap_transport(s: &ServerConfig, listen: Vec<SocketAddr>) -> TransportConfig {
    TransportConfig {
        max_record: 64 * 1024,
        pools: rnfsd_transport::PoolLayout::Shared,
        pin_loops: false,
        blocking_threads: 0,
        ..transport(s, listen, Vec::new())
    }
}

/// The NFS worker pool before any per-loop split.
pub fn pool(s: &ServerConfig) -> PoolConfig {
    let base = PoolConfig::default();
    PoolConfig {
        threads: match s.threads {
            Some(n) => Threads::Fixed(n),
            None => Threads::Adaptive {
                min: s.min_threads,
                max: s.max_threads,
            },
        },
        idle_timeout: Duration::from_secs(s.thread_idle_secs),
        queue_limit: s.queue_limit,
        max_waking: match s.max_waking {
            MaxWaking::N(n) => n,
            MaxWaking::Unlimited => rnfsd_pool::UNLIMITED,
        },
        wake_order: match s.wake_order {
            WakeOrder::Lifo => rnfsd_pool::WakeOrder::Lifo,
            WakeOrder::Fifo => rnfsd_pool::WakeOrder::Fifo,
        },
        handoff: match s.handoff {
            Handoff::Direct => rnfsd_pool::Handoff::Direct,
            Handoff::Double => rnfsd_pool::Handoff::Double,
        },
        // Not server keys: the pool's own (the transport sets the CPU,
        // nice value and the rest of the blocking pool).
        name: base.name,
        stack_size: base.stack_size,
        cpu: base.cpu,
        nice: base.nice,
        sched_batch: base.sched_batch,
        lazy_wake: base.lazy_wake,
        spin: Duration::from_micros(s.worker_spin_us),
        spin_when: match s.worker_spin {
            WorkerSpin::Off => rnfsd_pool::SpinWhen::Never,
            WorkerSpin::Alone => rnfsd_pool::SpinWhen::Alone,
            WorkerSpin::Always => rnfsd_pool::SpinWhen::Always,
        },
    }
}

/// The port mapper's pool: one thread, a short queue.
pub fn portmap_pool() -> PoolConfig {
    PoolConfig {
        threads: Threads::Fixed(1),
        queue_limit: 64,
        name: "rnfsd-portmap".into(),
        ..PoolConfig::default()
    }
}

/// A UDP transport (port mapper, lock manager) on `listen`.
pub fn udp(s: &ServerConfig, listen: Vec<SocketAddr>) -> UdpConfig {
    UdpConfig {
        listen,
        threads: s.udp_threads,
        max_datagram: UdpConfig::default().max_datagram,
    }
}

/// What every export's backend shares: the handle key, the descriptor
/// budget and the write verifier.
pub struct Shared<'a> {
    pub key: [u8; 32],
    pub caches: &'a Arc<Caches>,
    pub verifier: &'a Arc<WriteVerifier>,
}

/// A local export's backend options.
pub fn local(s: &ServerConfig, e: &ResolvedExport, shared: &Shared<'_>) -> LocalOptions {
    let base = LocalOptions::default();
    LocalOptions {
        handle_mode: match e.handle_mode {
            HandleMode::Auto => local::HandleMode::Auto,
            HandleMode::Kernel => local::HandleMode::Kernel,
            HandleMode::Path => local::HandleMode::Path,
        },
        handle_key: shared.key,
        cross_mounts: e.cross_mounts,
        act_as_caller: s
            .act_as_caller
            .unwrap_or_else(|| rustix::process::geteuid().is_root()),
        path_cache_entries: s.path_cache_entries,
        verdict_cache_entries: s.verdict_cache_entries,
        handle_scan_limit: s.handle_scan_limit,
        handle_scan_waiters: s.handle_scan_waiters,
        handle_scan_wait: Duration::from_millis(s.handle_scan_wait_ms),
        // Not a server key: how long a proof of confinement holds.
        verify_ttl: base.verify_ttl,
        object_cache_entries: s.object_cache_entries,
        open_file_cache_entries: s.open_file_cache_entries,
        caches: Some(shared.caches.clone()),
        write_verifier: Some(shared.verifier.clone()),
        sync: e.sync,
        max_syncs_in_flight: s.max_syncs_in_flight,
        journal_commit_threads: s.journal_commit_threads,
        journal_commit_batch: s.sync_sched_batch,
        owed_writeback_bytes: s.owed_writeback_bytes,
        flush_delay: Duration::from_millis(s.flush_delay_ms),
        write_behind_bytes: s.write_behind_bytes,
    }
}

/// A CephFS export's backend options; `session_uuid` names this head's
/// session (see `live::Opener`).
pub fn ceph(
    s: &ServerConfig,
    e: &ResolvedExport,
    c: &CephfsConfig,
    shared: &Shared<'_>,
    session_uuid: String,
) -> Result<CephOptions, String> {
    let conf = c
        .conf
        .to_str()
        .ok_or_else(|| "cephfs.conf is not UTF-8".to_owned())?;
    Ok(CephOptions {
        conf: conf.to_owned(),
        client: c.client.clone(),
        fs: c.fs.clone(),
        root: c.root.clone(),
        handle_key: shared.key,
        fsid: u64::from(e.id),
        call_timeout: Duration::from_millis(s.ceph_call_timeout_ms),
        call_threads: s.ceph_call_threads,
        call_queue: s.ceph_call_threads.saturating_mul(8),
        inode_cache_entries: s.ceph_inode_cache_entries,
        listings: s.ceph_listings,
        // Not a server key.
        mount_timeout_secs: CephOptions::default().mount_timeout_secs,
        session_uuid: Some(session_uuid),
        write_verifier: Some(shared.verifier.clone()),
        sync: e.sync,
        max_syncs_in_flight: s.max_syncs_in_flight,
        mount_syncs: s.ceph_mount_syncs,
    })
}

/// The lock manager's bounds (`nlm_*`).
pub fn locks(s: &ServerConfig) -> rnfsd_lockd::Limits {
    rnfsd_lockd::Limits {
        max_files: s.nlm_max_files,
        max_waiters: s.nlm_max_waiters,
        max_per_client: s.nlm_max_per_client,
        // Not a server key.
        max_shares: rnfsd_lockd::Limits::default().max_shares,
        retry: Duration::from_millis(s.nlm_retry_ms),
    }
}

/// The duplicate reply cache, or None when `drc_max_bytes` is 0 (off).
pub fn drc(s: &ServerConfig) -> Option<rnfsd_rpc::DrcConfig> {
    (s.drc_max_bytes > 0).then(|| rnfsd_rpc::DrcConfig {
        expiry: Duration::from_secs(s.drc_expiry_secs),
        max_bytes: s.drc_max_bytes,
    })
}

/// The NFSv4 state's timing and bounds. Its grace period is NLM's
/// (`nlm_grace_secs`): one grace for both.
pub fn nfs4(s: &ServerConfig) -> rnfsd_v4state::Config {
    let d = rnfsd_v4state::Limits::default();
    rnfsd_v4state::Config {
        lease_time: Duration::from_secs(s.nfs4_lease_secs),
        grace_time: Duration::from_secs(s.nlm_grace_secs),
        limits: rnfsd_v4state::Limits {
            max_clients: s.nfs4_max_clients,
            sessions_per_client: s.nfs4_sessions_per_client,
            slots_per_session: s.nfs4_slots_per_session,
            open_owners_per_client: s.nfs4_owners_per_client,
            lock_owners_per_client: s.nfs4_owners_per_client,
            stateids_per_client: s.nfs4_stateids_per_client,
            total_stateids: s.nfs4_max_stateids,
            reply_cache_bytes: s.nfs4_reply_cache_bytes,
            delegations_per_client: s.nfs4_delegations_per_client,
            max_delegations: s.nfs4_max_delegations,
            // A max_io READ or WRITE and its compound (at most the
            // largest compound reply we build).
            max_request_size: (s.max_io + 4096).max(d.max_request_size),
            max_response_size: ((s.max_io + 4096).max(d.max_response_size) as usize)
                .min(crate::state::nfs4::MAX_COMPOUND_REPLY) as u32,
            ..d
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export() -> ResolvedExport {
        ResolvedExport {
            id: 7,
            path: "/srv/a".into(),
            read_only: false,
            handle_mode: HandleMode::Auto,
            cross_mounts: false,
            sync: true,
            access: crate::access::ExportAccess::allow_all(false),
            backend: super::super::ResolvedBackend::Local,
            not_mounted: None,
        }
    }

    fn shared_parts() -> (Arc<Caches>, Arc<WriteVerifier>) {
        (Caches::new(100), Arc::new(WriteVerifier::new([0; 8])))
    }

    // Where the server and a lower crate both have a default for the same
    // thing, the tests below hold them equal, so neither can drift alone.
    // Where they differ on purpose, the lower default is the plain one its
    // tests use and the server's the tuned one: the transport's
    // event_threads (1; the server one per CPU), pin_loops,
    // blocking_threads (0; 64), blocking_sched_batch, blocking_lazy_wake
    // and alone_per_turn (0; 4), and LocalOptions::journal_commit_batch.

    #[test]
    fn transport_and_pool_defaults_are_the_servers() {
        let s = ServerConfig::default();
        let (t, td) = (
            transport(&s, Vec::new(), Vec::new()),
            TransportConfig::default(),
        );
        assert_eq!(
            (
                t.max_connections,
                t.max_connections_per_client,
                t.max_record
            ),
            (
                td.max_connections,
                td.max_connections_per_client,
                td.max_record
            )
        );
        assert_eq!(
            (
                t.max_inflight_per_conn,
                t.max_conn_output,
                t.max_buffered_bytes,
                t.budget_hog_time
            ),
            (
                td.max_inflight_per_conn,
                td.max_conn_output,
                td.max_buffered_bytes,
                td.budget_hog_time
            )
        );
        assert_eq!(
            (
                t.idle_timeout,
                t.shutdown_timeout,
                t.pools,
                t.run_inline,
                t.reply_batch,
                t.recycled_buffers
            ),
            (
                td.idle_timeout,
                td.shutdown_timeout,
                td.pools,
                td.run_inline,
                td.reply_batch,
                td.recycled_buffers
            )
        );
        let (p, pd) = (pool(&s), PoolConfig::default());
        assert_eq!(
            (p.threads, p.idle_timeout, p.queue_limit, p.max_waking),
            (pd.threads, pd.idle_timeout, pd.queue_limit, pd.max_waking)
        );
        assert_eq!((p.wake_order, p.handoff), (pd.wake_order, pd.handoff));
        assert_eq!(udp(&s, Vec::new()).threads, UdpConfig::default().threads);
    }

    #[test]
    fn backend_defaults_are_the_servers() {
        let s = ServerConfig::default();
        let (caches, verifier) = shared_parts();
        let shared = Shared {
            key: [0; 32],
            caches: &caches,
            verifier: &verifier,
        };
        let (l, ld) = (local(&s, &export(), &shared), LocalOptions::default());
        assert_eq!(
            (
                l.act_as_caller,
                l.path_cache_entries,
                l.verdict_cache_entries
            ),
            (
                ld.act_as_caller,
                ld.path_cache_entries,
                ld.verdict_cache_entries
            )
        );
        assert_eq!(
            (
                l.handle_scan_limit,
                l.handle_scan_waiters,
                l.handle_scan_wait
            ),
            (
                ld.handle_scan_limit,
                ld.handle_scan_waiters,
                ld.handle_scan_wait
            )
        );
        assert_eq!(
            (l.object_cache_entries, l.open_file_cache_entries),
            (ld.object_cache_entries, ld.open_file_cache_entries)
        );
        assert_eq!(
            (l.max_syncs_in_flight, l.journal_commit_threads),
            (ld.max_syncs_in_flight, ld.journal_commit_threads)
        );
        assert_eq!(
            (l.owed_writeback_bytes, l.flush_delay, l.write_behind_bytes),
            (
                ld.owed_writeback_bytes,
                ld.flush_delay,
                ld.write_behind_bytes
            )
        );
        let uuid = "x".to_owned();
        let c = ceph(&s, &export(), &CephfsConfig::default(), &shared, uuid).unwrap();
        let cd = CephOptions::default();
        assert_eq!(
            (c.call_timeout, c.call_threads, c.call_queue),
            (cd.call_timeout, cd.call_threads, cd.call_queue)
        );
        assert_eq!(
            (
                c.inode_cache_entries,
                c.listings,
                c.max_syncs_in_flight,
                c.mount_syncs
            ),
            (
                cd.inode_cache_entries,
                cd.listings,
                cd.max_syncs_in_flight,
                cd.mount_syncs
            )
        );
        assert_eq!(
            (c.conf.as_str(), c.client.as_str(), c.root.as_str()),
            (cd.conf.as_str(), cd.client.as_str(), cd.root.as_str())
        );
    }

    #[test]
    fn lock_drc_and_stats_defaults_are_the_servers() {
        let s = ServerConfig::default();
        let (k, kd) = (locks(&s), rnfsd_lockd::Limits::default());
        assert_eq!(
            (k.max_files, k.max_waiters, k.max_per_client, k.retry),
            (kd.max_files, kd.max_waiters, kd.max_per_client, kd.retry)
        );
        assert_eq!(drc(&s), Some(rnfsd_rpc::DrcConfig::default()));
        assert_eq!(s.stats, rnfsd_stats::Mode::default());
    }

    #[test]
    fn keys_reach_the_lower_options() {
        let s = ServerConfig {
            max_connections: 5,
            threads: Some(3),
            blocking_nice: 4,
            blocking_lazy_wake_us: 0,
            flush_delay_ms: 7,
            act_as_caller: Some(false),
            drc_max_bytes: 0,
            ..ServerConfig::default()
        };
        let t = transport(&s, Vec::new(), Vec::new());
        assert_eq!((t.max_connections, t.blocking_nice), (5, Some(4)));
        assert_eq!(t.blocking_lazy_wake, None);
        let p = portmap_transport(&s, Vec::new());
        assert_eq!(
            (p.max_record, p.blocking_threads, p.pin_loops),
            (65536, 0, false)
        );
        assert_eq!(pool(&s).threads, Threads::Fixed(3));
        let (caches, verifier) = shared_parts();
        let shared = Shared {
            key: [9; 32],
            caches: &caches,
            verifier: &verifier,
        };
        let l = local(&s, &export(), &shared);
        assert_eq!(l.flush_delay, Duration::from_millis(7));
        assert!(!l.act_as_caller);
        assert_eq!(l.handle_key, [9; 32]);
        assert_eq!(drc(&s), None);
    }
}
