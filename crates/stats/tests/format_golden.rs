//! Every renderer of `rnfsd_stats::format` against golden files, byte for
//! byte, on snapshots that set every field the renderers read. The goldens
//! were generated from the renderers before they were split into modules;
//! a change of output shows here as a diff.
//!
//! After an intended change of output, regenerate them with
//! `RNFSD_UPDATE_GOLDEN=1 cargo test -p rnfsd-stats --test format_golden`
//! and review the diff.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rnfsd_stats::format;
use rnfsd_stats::hist::{self, Hist};
use rnfsd_stats::snapshot::{
    ConnCounts, IoCounts, PoolCounts, ProcCounts, RpcCounts, TransportCounts,
};
use rnfsd_stats::{CacheCounts, ExportCounts, LockCounts, Mode, Snapshot};

/// A histogram of these samples (µs), as a snapshot builds it.
fn hist_of(samples: &[u64]) -> Hist {
    let mut dense = vec![0u64; hist::BUCKETS];
    for &us in samples {
        dense[hist::index(us)] += 1;
    }
    let max = samples.iter().copied().max().unwrap_or(0);
    Hist::from_dense(&dense, samples.iter().sum(), max)
}

/// Samples spread over every Prometheus bucket, `k` varying the mix.
fn spread(k: u64) -> Vec<u64> {
    let mut v = Vec::new();
    for (i, us) in [
        3, 12, 30, 70, 180, 400, 900, 2_000, 4_000, 9_000, 20_000, 45_000, 90_000, 200_000,
        450_000, 900_000, 2_000_000, 4_500_000, 9_000_000, 30_000_000,
    ]
    .into_iter()
    .enumerate()
    {
        for j in 0..(i as u64 * k) % 7 + 1 {
            v.push(us + j * 3);
        }
    }
    v
}

fn proc_row(
    program: &str,
    prog: u32,
    version: u32,
    proc_: u32,
    name: &str,
    lat: Hist,
) -> ProcCounts {
    ProcCounts {
        program: program.into(),
        prog,
        version,
        proc_,
        name: name.into(),
        calls: lat.count,
        p50_us: lat.quantile(0.5),
        p90_us: lat.quantile(0.9),
        p99_us: lat.quantile(0.99),
        latency: lat,
    }
}

fn procs(scale: u64) -> Vec<ProcCounts> {
    let mut v = Vec::new();
    for (i, name) in [
        "NULL", "GETATTR", "SETATTR", "LOOKUP", "ACCESS", "READLINK", "READ", "WRITE",
    ]
    .into_iter()
    .enumerate()
    {
        // READLINK stays at zero calls: the report still lists NFS rows.
        let lat = if name == "READLINK" {
            Hist::default()
        } else {
            hist_of(&spread(i as u64 + scale))
        };
        v.push(proc_row("nfs", 100_003, 3, i as u32, name, lat));
    }
    v.push(proc_row("mount", 100_005, 3, 0, "NULL", Hist::default()));
    v.push(proc_row(
        "mount",
        100_005,
        3,
        1,
        "MNT",
        hist_of(&[5, 7 * scale, 250]),
    ));
    // A program with no calls at all: left out of the report's tables.
    v.push(proc_row("nlm", 100_021, 4, 0, "NULL", Hist::default()));
    // Label values that need escaping.
    v.push(proc_row(
        "te\"st",
        400_000,
        1,
        0,
        "WE\\IRD\nNAME",
        hist_of(&[1, 2, scale]),
    ));
    v
}

fn transport(name: &str, k: u64) -> TransportCounts {
    TransportCounts {
        name: name.into(),
        connections: ConnCounts {
            open: k + 1,
            opened: k + 2,
            closed: k + 3,
            refused: k + 4,
            evicted: k + 5,
            buffered_bytes: k + 6,
            records_in: k + 7,
            records_too_big: k + 8,
            bytes_in: k * 1000 + 9,
            replies_out: k + 10,
            writes_out: k + 11,
            bytes_out: k * 1000 + 12,
            reply_bytes_queued: k + 13,
            records_inline: k + 14,
            records_deferred: k + 15,
        },
        pool: PoolCounts {
            threads: k + 21,
            idle: k + 22,
            waking: k + 23,
            running: k + 24,
            queued: k + 25,
            peak_waking: k + 26,
            wakeups: k + 27,
            wakeups_no_work: k + 28,
            jobs_woken: k + 29,
            jobs_inline: k + 30,
            jobs_panicked: k + 31,
            queue_time_ns: k * 1_000_000_007 + 32,
            rejected_full: k + 33,
            jobs_left: k + 34,
            overdue_kicks: k + 35,
            spins: k + 39,
            wakeups_spun: k + 40,
            threads_started: k + 36,
            threads_retired: k + 37,
            spawn_failures: k + 38,
        },
    }
}

fn cache(name: &str, k: u64) -> CacheCounts {
    CacheCounts {
        name: name.into(),
        capacity: k + 1000,
        entries: k + 500,
        hits: k * 3 + 7,
        misses: k + 2,
        inserts: k + 3,
        refused: k + 4,
        evicted_inline: k + 5,
        evicted_reclaim: k + 6,
        removed: k + 7,
    }
}

fn export(path: &str, k: u64, busy: bool) -> ExportCounts {
    ExportCounts {
        path: path.into(),
        caches: vec![cache("objects", k), cache("fi\"les", k + 100)],
        fds_cached: k + 40,
        fd_limit: 4096,
        // Zero on the quiet export: the report leaves those lines out.
        sync_requests: if busy { k + 90 } else { 0 },
        syncs: k + 11,
        sync_errors: k + 12,
        syncs_peak_in_flight: k + 13,
        sync_requests_parked: k + 14,
        syncs_led: k + 15,
        sync_writebacks_waited: k + 16,
        flushes: k + 17,
        write_behinds: k + 18,
        write_behinds_on_loop: k + 19,
        scans_waited: k + 20,
        scans_busy: k + 21,
        scan_passes: k + 22,
        verifier_resets: k + 23,
        calls_jukebox: if busy { k + 24 } else { 0 },
        stalls: if busy { k + 25 } else { 0 },
    }
}

/// Every field set, two listeners, two exports, locks, escaping.
fn rich() -> Snapshot {
    let mut auth_errors = BTreeMap::new();
    auth_errors.insert("AUTH_BADCRED".to_owned(), 3);
    auth_errors.insert("AUTH_TOOWEAK".to_owned(), 5);
    let mut nfs_replies = BTreeMap::new();
    nfs_replies.insert("NFS3_OK".to_owned(), 9000);
    nfs_replies.insert("NFS3ERR_NOENT".to_owned(), 321);
    nfs_replies.insert("NFS3ERR_JUKEBOX".to_owned(), 4);
    nfs_replies.insert("other".to_owned(), 1);
    Snapshot {
        mode: Mode::Percore,
        shards: 4,
        started_unix: 1_790_000_000,
        uptime_secs: 3725.75,
        since_reset_secs: 125.5,
        rpc: RpcCounts {
            records: 9700,
            success: 9400,
            dropped: 6,
            rpc_mismatch: 7,
            prog_unavail: 8,
            prog_mismatch: 9,
            proc_unavail: 10,
            garbage_args: 11,
            system_err: 12,
            auth_errors,
            bad_reply: 13,
        },
        nfs_replies,
        io: IoCounts {
            read_bytes: 5 * 1024 * 1024 * 1024 + 12345,
            write_bytes: 700,
        },
        procs: procs(1),
        transports: vec![transport("nfs", 100), transport("mo\"unt", 7)],
        exports: vec![
            export("/srv/a", 1000, true),
            export("/srv/we\"i\\rd", 2000, false),
        ],
        locks: Some(LockCounts {
            files: 2,
            ranges: 5,
            waiters: 1,
            shares: 3,
        }),
        nfs4: None,
    }
}

/// `rich` some seconds later: more calls, one listener gone, one new.
fn later() -> Snapshot {
    let mut s = rich();
    s.uptime_secs += 2.5;
    s.since_reset_secs += 2.5;
    s.rpc.records += 5000;
    s.rpc.dropped += 10;
    s.rpc.garbage_args += 3;
    s.io.read_bytes += 8 * 1024 * 1024;
    s.io.write_bytes += 3000;
    s.procs = procs(4);
    for (old, new) in rich().procs.iter().zip(s.procs.iter_mut()) {
        // Counters only grow: add the earlier samples back in.
        let mut buckets: BTreeMap<u32, u64> = old.latency.buckets.iter().copied().collect();
        for &(i, c) in &new.latency.buckets {
            *buckets.entry(i).or_default() += c;
        }
        new.latency = Hist {
            count: old.latency.count + new.latency.count,
            sum_us: old.latency.sum_us + new.latency.sum_us,
            max_us: old.latency.max_us.max(new.latency.max_us),
            buckets: buckets.into_iter().collect(),
        };
        new.calls = new.latency.count;
    }
    s.transports = vec![transport("nfs", 140), transport("nlm", 3)];
    s
}

/// Counting off: one shard, no exports, no locks, nothing counted.
fn off() -> Snapshot {
    let mut procs = procs(1);
    for p in &mut procs {
        p.calls = 0;
        p.latency = Hist::default();
        (p.p50_us, p.p90_us, p.p99_us) = (0, 0, 0);
    }
    Snapshot {
        mode: Mode::Off,
        shards: 1,
        started_unix: 1_790_000_000,
        uptime_secs: 42.0,
        since_reset_secs: 42.0,
        procs,
        transports: vec![transport("nfs", 0)],
        ..Snapshot::default()
    }
}

/// Every rendering this crate makes, by golden file name.
fn renderings() -> Vec<(&'static str, String)> {
    let (r, l, o) = (rich(), later(), off());
    vec![
        ("rich.prom", format::prometheus(&r)),
        ("rich.raw", format::raw(&r)),
        ("rich.report", format::report(&r)),
        ("later.prom", format::prometheus(&l)),
        ("later.report", format::report(&l)),
        ("off.prom", format::prometheus(&o)),
        ("off.raw", format::raw(&o)),
        ("off.report", format::report(&o)),
        ("empty.prom", format::prometheus(&Snapshot::default())),
        ("empty.raw", format::raw(&Snapshot::default())),
        ("empty.report", format::report(&Snapshot::default())),
        ("watch.rich-later", format::watch_frame(&r, &l)),
        // A reset in between: the frame shows totals.
        ("watch.later-rich", format::watch_frame(&l, &r)),
        ("watch.off-rich", format::watch_frame(&o, &r)),
        ("watch.rich-rich", format::watch_frame(&r, &r)),
    ]
}

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

#[test]
fn every_rendering_matches_its_golden_file() {
    let update = std::env::var_os("RNFSD_UPDATE_GOLDEN").is_some();
    let dir = golden_dir();
    let mut differ = Vec::new();
    for (name, text) in renderings() {
        let path = dir.join(format!("{name}.txt"));
        if update {
            std::fs::create_dir_all(&dir).expect("golden dir");
            std::fs::write(&path, &text).expect("write golden");
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!("{}: {e} (RNFSD_UPDATE_GOLDEN=1 writes it)", path.display())
        });
        if want != text {
            let line = want
                .lines()
                .zip(text.lines())
                .position(|(a, b)| a != b)
                .map_or(want.lines().count().min(text.lines().count()), |i| i);
            differ.push(format!(
                "{name}: first difference at line {}\n  want: {:?}\n  got:  {:?}",
                line + 1,
                want.lines().nth(line),
                text.lines().nth(line)
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// The goldens cover what they claim to: every family, every branch of
/// the report (so a golden regenerated from an empty output would fail).
#[test]
fn goldens_exercise_every_branch() {
    let r = format::prometheus(&rich());
    for needle in [
        "rnfsd_rpc_errors_total{error=\"auth_error\",auth_stat=\"AUTH_TOOWEAK\"} 5",
        "rnfsd_request_duration_seconds_bucket{program=\"te\\\"st\",version=\"1\",procedure=\"WE\\\\IRD\\nNAME\",le=\"+Inf\"} 3",
        "rnfsd_connections_open{listener=\"mo\\\"unt\"} 8",
        "rnfsd_pool_spawn_failures_total{pool=\"nfs\"} 138",
        "rnfsd_cache_removed_total{export=\"/srv/we\\\"i\\\\rd\",cache=\"fi\\\"les\"} 2107",
        "rnfsd_write_verifier_resets_total{export=\"/srv/a\"} 1023",
        "rnfsd_nlm_shares 3",
        "rnfsd_pool_queue_time_seconds_total{pool=\"nfs\"} 100.000000732",
    ] {
        assert!(r.contains(needle), "{needle} missing from\n{r}");
    }
    let rep = format::report(&rich());
    assert!(rep.contains(" durability: 1090 requests"), "{rep}");
    assert!(rep.contains(" remote backend: 1024 calls"), "{rep}");
    assert!(rep.contains("locks (NLM): 5 ranges in 2 files"), "{rep}");
    assert!(rep.contains("io: read 5.0 GiB (5368721465)"), "{rep}");
    assert!(rep.contains("up 1h02m, since reset 2m05s"), "{rep}");
    assert!(!rep.contains("Server nlm"), "{rep}");
    let off = format::report(&off());
    assert!(off.contains("(RPC counting is off"), "{off}");
    assert!(off.contains("(1 shard)"), "{off}");
    let w = format::watch_frame(&later(), &rich());
    assert!(
        w.contains("calls/s    9700000"),
        "a reset shows totals: {w}"
    );
}
