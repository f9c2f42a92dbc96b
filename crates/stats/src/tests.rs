use super::*;
use std::sync::Arc;

fn descs() -> Vec<ProcDesc> {
    let mut v = Vec::new();
    for (i, name) in [
        "NULL", "GETATTR", "SETATTR", "LOOKUP", "ACCESS", "READLINK", "READ", "WRITE",
    ]
    .into_iter()
    .enumerate()
    {
        v.push(ProcDesc {
            program: "nfs",
            prog: 100_003,
            vers: 3,
            proc_: i as u32,
            name,
        });
    }
    for (i, name) in ["NULL", "MNT"].into_iter().enumerate() {
        v.push(ProcDesc {
            program: "mount",
            prog: 100_005,
            vers: 3,
            proc_: i as u32,
            name,
        });
    }
    v
}

const NFS3: u32 = 100_003;

/// The call dispatch decoded: program, version, procedure.
fn call(prog: u32, vers: u32, proc_: u32) -> Option<(u32, u32, u32)> {
    Some((prog, vers, proc_))
}

/// A success whose result body starts with `status`.
fn ok(status: u32) -> Outcome {
    Outcome::Success {
        status: Some(status),
    }
}

const NONE: (u64, u64) = (0, 0);

#[test]
fn records_every_outcome() {
    let r = Registry::new(Mode::Percore, descs());
    let s = r.shard().unwrap();
    let getattr = call(NFS3, 3, 1);
    r.record(s, getattr, ok(0), NONE, 10);
    r.record(s, getattr, ok(2), NONE, 20);
    r.record(s, getattr, ok(10008), NONE, 30);
    r.record(s, getattr, ok(12345), NONE, 40);
    // READ of 4096 bytes, WRITE of 100.
    r.record(s, call(NFS3, 3, 6), ok(0), (4096, 0), 5);
    r.record(s, call(NFS3, 3, 7), ok(0), (0, 100), 5);
    // A failed READ moves no bytes.
    r.record(s, call(NFS3, 3, 6), ok(2), NONE, 5);
    r.record(s, call(100_005, 3, 1), ok(0), NONE, 7);
    r.record(s, call(7, 1, 0), Outcome::ProgUnavail, NONE, 1);
    r.record(s, call(NFS3, 2, 0), Outcome::ProgMismatch, NONE, 1);
    r.record(s, call(NFS3, 3, 99), Outcome::ProcUnavail, NONE, 1);
    r.record(s, getattr, Outcome::GarbageArgs, NONE, 1);
    r.record(s, getattr, Outcome::SystemErr, NONE, 1);
    // An RPC version 3 header: no call to count against.
    r.record(s, None, Outcome::RpcMismatch, NONE, 1);
    r.record(s, getattr, Outcome::AuthError(5), NONE, 1);
    r.record(s, getattr, Outcome::AuthError(1), NONE, 1);
    // A record too short for a header, and a duplicate in progress.
    r.record(s, None, Outcome::Dropped, NONE, 1);
    r.record(s, getattr, Outcome::Dropped, NONE, 1);
    // A success of a program that does not start with a status.
    r.record(s, getattr, Outcome::Success { status: None }, NONE, 1);

    let n = r.snapshot();
    assert_eq!(n.rpc.records, 19);
    assert_eq!(n.rpc.success, 9);
    assert_eq!(n.nfs_status("NFS3_OK"), 3);
    assert_eq!(n.nfs_status("NFS3ERR_NOENT"), 2);
    assert_eq!(n.nfs_status("NFS3ERR_JUKEBOX"), 1);
    assert_eq!(n.nfs_status("other"), 1);
    assert_eq!(n.nfs_replies.values().sum::<u64>(), 7, "mount is not NFS");
    assert_eq!(n.io.read_bytes, 4096);
    assert_eq!(n.io.write_bytes, 100);
    assert_eq!(
        (n.rpc.prog_unavail, n.rpc.prog_mismatch, n.rpc.proc_unavail),
        (1, 1, 1)
    );
    assert_eq!((n.rpc.garbage_args, n.rpc.system_err), (1, 1));
    assert_eq!(n.rpc.rpc_mismatch, 1);
    assert_eq!(n.rpc.auth_errors["AUTH_TOOWEAK"], 1);
    assert_eq!(n.rpc.auth_errors["AUTH_BADCRED"], 1);
    assert_eq!(n.rpc.dropped, 2);
    // Dispatch always knows what it answered.
    assert_eq!(n.rpc.bad_reply, 0);
    let ga = n.proc("nfs", "GETATTR").unwrap();
    // Every call naming it with RPC version 2 counts, whatever the outcome.
    assert_eq!(ga.calls, 10);
    assert_eq!(ga.latency.count, 10);
    assert_eq!(ga.latency.max_us, 40);
    assert_eq!(ga.latency.sum_us, 100 + 6);
    assert_eq!(n.proc("nfs", "READ").unwrap().calls, 2);
    assert_eq!(n.proc("mount", "MNT").unwrap().calls, 1);
    assert_eq!(n.program_calls("nfs"), 13);
    // The JSON form round-trips.
    assert_eq!(Snapshot::from_json(&n.to_json()).unwrap(), n);
}

#[test]
fn concurrent_adds_all_count_in_each_mode() {
    for mode in [Mode::Percore, Mode::Shared] {
        let r = Arc::new(Registry::new(mode, descs()));
        let hs: Vec<_> = (0..4)
            .map(|t| {
                let r = r.clone();
                std::thread::spawn(move || {
                    for i in 0..5000u64 {
                        let s = r.shard().unwrap();
                        r.record(s, call(NFS3, 3, 4), ok(0), NONE, (i + t) % 300);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let n = r.snapshot();
        assert_eq!(n.rpc.records, 20_000, "{mode}");
        assert_eq!(n.proc("nfs", "ACCESS").unwrap().calls, 20_000);
        assert_eq!(n.proc("nfs", "ACCESS").unwrap().latency.count, 20_000);
        assert_eq!(n.proc("nfs", "ACCESS").unwrap().latency.max_us, 299);
        assert_eq!(n.nfs_status("NFS3_OK"), 20_000);
    }
}

#[test]
fn off_counts_nothing_and_reset_zeroes() {
    let off = Registry::new(Mode::Off, descs());
    assert!(off.shard().is_none());
    let n = off.snapshot();
    assert_eq!(n.mode, Mode::Off);
    assert_eq!(n.procs.len(), descs().len());
    assert_eq!(n.rpc.records, 0);

    let r = Registry::new(Mode::Percore, descs());
    assert!(r.shards().is_power_of_two());
    let s = r.shard().unwrap();
    r.record(s, call(NFS3, 3, 1), ok(0), NONE, 3);
    r.add_source("nfs", || {
        let t = rnfsd_transport::TransportStats {
            connections_accepted: 10,
            connections_open: 2,
            ..Default::default()
        };
        let p = rnfsd_transport::PoolStats {
            threads: 3,
            wakeups: 7,
            jobs_left: 5,
            overdue_kicks: 1,
            spins: 9,
            wakeups_spun: 4,
            ..Default::default()
        };
        (t, p)
    });
    let n = r.snapshot();
    assert_eq!(n.rpc.records, 1);
    assert_eq!(n.transports[0].connections.opened, 10);
    // The blocking pool's one-handoff counters reach every output.
    assert_eq!(
        (
            n.transports[0].pool.jobs_left,
            n.transports[0].pool.overdue_kicks
        ),
        (5, 1)
    );
    let prom = crate::format::prometheus(&n);
    assert!(
        prom.contains("rnfsd_pool_jobs_left_total{pool=\"nfs\"} 5"),
        "{prom}"
    );
    assert!(
        prom.contains("rnfsd_pool_overdue_kicks_total{pool=\"nfs\"} 1"),
        "{prom}"
    );
    // So do the worker spin's.
    assert!(
        prom.contains("rnfsd_pool_spins_total{pool=\"nfs\"} 9"),
        "{prom}"
    );
    assert!(
        prom.contains("rnfsd_pool_wakeups_spun_total{pool=\"nfs\"} 4"),
        "{prom}"
    );
    assert!(
        crate::format::report(&n).contains("spins 9 (4 met a job)"),
        "{}",
        crate::format::report(&n)
    );
    r.reset();
    let n = r.snapshot();
    assert_eq!(n.rpc.records, 0);
    assert_eq!(n.proc("nfs", "GETATTR").unwrap().calls, 0);
    assert_eq!(
        n.proc("nfs", "GETATTR").unwrap().latency,
        hist::Hist::default()
    );
    assert!(n.nfs_replies.is_empty());
    // Transport counters restart from the reset; gauges stay.
    assert_eq!(n.transports[0].connections.opened, 0);
    assert_eq!(n.transports[0].connections.open, 2);
    assert_eq!(n.transports[0].pool.threads, 3);
    assert_eq!(n.transports[0].pool.wakeups, 0);
}

#[test]
fn mode_parses() {
    assert_eq!("percore".parse::<Mode>(), Ok(Mode::Percore));
    assert_eq!("shared".parse::<Mode>(), Ok(Mode::Shared));
    assert_eq!("off".parse::<Mode>(), Ok(Mode::Off));
    assert!("fast".parse::<Mode>().is_err());
    assert_eq!(Mode::default(), Mode::Percore);
}

fn sample() -> Snapshot {
    let r = Registry::new(Mode::Percore, descs());
    let s = r.shard().unwrap();
    for i in 0..1000u64 {
        r.record(s, call(NFS3, 3, 1), ok(0), NONE, i);
    }
    r.record(s, call(NFS3, 3, 3), ok(2), NONE, 12);
    r.record(s, call(NFS3, 3, 1), Outcome::AuthError(5), NONE, 1);
    r.add_source("nfs", Default::default);
    r.add_export(|| {
        Some(ExportCounts {
            path: "/srv/a".into(),
            caches: vec![CacheCounts {
                name: "objects".into(),
                capacity: 100,
                entries: 40,
                hits: 30,
                misses: 10,
                ..CacheCounts::default()
            }],
            fds_cached: 40,
            fd_limit: 64,
            scans_busy: 2,
            sync_requests: 40,
            syncs: 10,
            syncs_led: 2,
            sync_requests_parked: 36,
            sync_writebacks_waited: 7,
            syncs_peak_in_flight: 4,
            ..ExportCounts::default()
        })
    });
    r.set_locks(|| LockCounts {
        files: 1,
        ranges: 2,
        waiters: 3,
        shares: 0,
    });
    r.snapshot()
}

#[test]
fn prometheus_text_parses() {
    let n = sample();
    let text = format::prometheus(&n);
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("exposition parses");
    let find = |name: &str, labels: &[(&str, &str)]| -> Option<f64> {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .map(|s| match &s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => *v,
                prometheus_parse::Value::Histogram(h) => {
                    h.iter().map(|b| b.count).fold(0.0, f64::max)
                }
                prometheus_parse::Value::Summary(_) => f64::NAN,
            })
    };
    let ga = [
        ("program", "nfs"),
        ("version", "3"),
        ("procedure", "GETATTR"),
    ];
    assert_eq!(find("rnfsd_rpc_calls_total", &ga), Some(1001.0));
    assert_eq!(find("rnfsd_nlm_ranges", &[]), Some(2.0));
    assert_eq!(find("rnfsd_nlm_waiters", &[]), Some(3.0));
    assert_eq!(
        find("rnfsd_nfs_replies_total", &[("status", "NFS3ERR_NOENT")]),
        Some(1.0)
    );
    assert_eq!(
        find("rnfsd_nfs_replies_total", &[("status", "NFS3_OK")]),
        Some(1000.0)
    );
    assert_eq!(
        find(
            "rnfsd_rpc_errors_total",
            &[("error", "auth_error"), ("auth_stat", "AUTH_TOOWEAK")]
        ),
        Some(1.0)
    );
    assert_eq!(
        find("rnfsd_rpc_errors_total", &[("error", "garbage_args")]),
        Some(0.0)
    );
    assert_eq!(find("rnfsd_read_bytes_total", &[]), Some(0.0));
    assert_eq!(
        find("rnfsd_connections_open", &[("listener", "nfs")]),
        Some(0.0)
    );
    assert_eq!(find("rnfsd_pool_threads", &[("pool", "nfs")]), Some(0.0));
    let oc = [("export", "/srv/a"), ("cache", "objects")];
    assert_eq!(find("rnfsd_cache_hits_total", &oc), Some(30.0));
    assert_eq!(find("rnfsd_cache_capacity", &oc), Some(100.0));
    assert_eq!(find("rnfsd_cache_fds", &[("export", "/srv/a")]), Some(40.0));
    assert_eq!(
        find("rnfsd_handle_scan_busy_total", &[("export", "/srv/a")]),
        Some(2.0)
    );
    // The histogram: 1001 samples (0..1000 µs and 1 µs), +Inf holds all.
    let h = scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == "rnfsd_request_duration_seconds"
                && s.labels.get("procedure") == Some("GETATTR")
        })
        .expect("histogram series");
    let prometheus_parse::Value::Histogram(b) = &h.value else {
        panic!("not a histogram: {:?}", h.value);
    };
    let at = |le: f64| b.iter().find(|x| x.less_than == le).map(|x| x.count);
    // 0..=100 µs: 101 samples, plus the 1 µs AUTH_ERROR call.
    assert_eq!(at(0.0001), Some(102.0));
    // 500 µs shares the bucket [500, 501]: le counts whole buckets only.
    assert_eq!(at(0.0005), Some(501.0));
    assert_eq!(at(f64::INFINITY), Some(1001.0));
    let sum = scrape
        .samples
        .iter()
        .find(|s| s.metric == "rnfsd_request_duration_seconds_sum")
        .map(|s| &s.value);
    assert!(sum.is_some(), "sum series present");
    // Buckets are cumulative and every family has a TYPE line.
    for w in b.windows(2) {
        assert!(w[0].count <= w[1].count);
    }
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let name = l.split(['{', ' ']).next().unwrap();
        let base = name
            .trim_end_matches("_bucket")
            .trim_end_matches("_sum")
            .trim_end_matches("_count");
        assert!(
            text.contains(&format!("# TYPE {name} ")) || text.contains(&format!("# TYPE {base} ")),
            "no TYPE for {name}"
        );
    }
}

#[test]
fn raw_and_report_lines() {
    let n = sample();
    let raw = format::raw(&n);
    let lines: Vec<&str> = raw.lines().collect();
    assert!(lines.contains(&"io 0 0"));
    assert!(lines.contains(&"rpc 1002 1 0 1 0"), "{raw}");
    let proc3 = lines.iter().find(|l| l.starts_with("proc3 ")).unwrap();
    let f: Vec<u64> = proc3[6..].split(' ').map(|x| x.parse().unwrap()).collect();
    assert_eq!(f[0], 8, "count of procedures first");
    assert_eq!(&f[1..], &[0, 1001, 0, 1, 0, 0, 0, 0]);
    assert!(lines.iter().any(|l| l.starts_with("th 0 0 0.000")));
    assert!(lines.contains(&"net 1002 0 1002 0"));

    let rep = format::report(&n);
    assert!(
        rep.contains("locks (NLM): 2 ranges in 1 files, 3 waiting, 0 shares"),
        "{rep}"
    );
    assert!(rep.contains("Server nfs v3: 1002 calls"), "{rep}");
    let ga = rep.lines().find(|l| l.starts_with("getattr ")).unwrap();
    let cols: Vec<&str> = ga.split_whitespace().collect();
    assert_eq!(cols[1], "1001");
    // p50 of 0..999 plus one 1 µs call is 499.
    assert_eq!(cols[3], "499");
    assert_eq!(cols[6], "999", "max");
    assert!(!rep.contains("Server mount"), "mount had no calls");
    let ex = rep
        .lines()
        .find(|l| l.starts_with("export /srv/a:"))
        .unwrap();
    assert!(ex.contains("objects 40/100 hit 75.0%"), "{ex}");
    assert!(ex.contains("descriptors 40/64"), "{ex}");
    assert!(ex.contains("(0 waits, 2 jukebox)"), "{ex}");
    assert!(
        rep.contains(
            " durability: 40 requests, 10 syncs (0.25 per request; 2 led by a call alone), \
             36 replies parked on a journal commit (7 after a write-back the commit thread \
             waited for), 0 errors, at most 4 at once"
        ),
        "{rep}"
    );

    let mut later = n.clone();
    later.since_reset_secs += 2.0;
    later.rpc.records += 400;
    let f = format::watch_frame(&n, &later);
    assert!(f.contains("calls/s        200"), "{f}");
}

#[test]
fn an_untimed_part_counts_as_one_of_0_us() {
    let timed = Registry::new(Mode::Percore, descs());
    let untimed = Registry::new(Mode::Percore, descs());
    let rows = timed.rows(NFS3, 3).unwrap();
    for (r, zero) in [(&timed, false), (&untimed, true)] {
        let s = r.shard().unwrap();
        // Something timed first, so the maximum and sum are not zero.
        r.record_in(s, rows, 1, 250);
        for proc_ in [1, 3, 99] {
            match zero {
                true => r.record_in_untimed(s, rows, proc_),
                false => r.record_in(s, rows, proc_, 0),
            }
        }
    }
    let (a, b) = (timed.snapshot().procs, untimed.snapshot().procs);
    assert_eq!(a, b);
    let getattr = a
        .iter()
        .find(|p| p.name == "GETATTR" && p.prog == NFS3)
        .unwrap();
    assert_eq!(getattr.calls, 2);
}
