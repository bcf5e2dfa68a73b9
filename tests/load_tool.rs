//! The load tool (`bench/load`) against real coordinator processes, small:
//! 30 routes and 4 simulated agents, in plaintext and under mutual TLS
//! (every agent with its own certificate). Every figure must be produced
//! and make sense — each agent resynced, every change Ready, updates
//! committed, transitions pending at the leader kill committed by the new
//! leader — and the table must show each one. In plaintext the run also
//! takes the acceptance sequence through three real proxies, with the
//! other routes stored and the agents connected: 0 failed requests. No
//! figure is compared with a time: that is what the tool reports, not
//! what a test can promise.

use std::path::PathBuf;
use std::time::Duration;
use switchyard_load::cluster::ClusterSpec;
use switchyard_load::{Options, report::Report};

fn options(tls: bool, acceptance: bool) -> Options {
    Options {
        routes: 30,
        agents: 4,
        cluster: ClusterSpec::Start {
            binary: PathBuf::from(env!("CARGO_BIN_EXE_switchyard")),
            tls,
            extra_args: Vec::new(),
            log_filter: "warn".into(),
        },
        batch: 25,
        changes: 4,
        cpu_reference_routes: 10,
        clients: 4,
        seconds: 1.0,
        pending: 3,
        wait: Duration::from_secs(60),
        acceptance,
        keep_logs: None,
        command: "load_tool test".into(),
    }
}

fn check(report: &Report) {
    let table = report.table();
    let bulk = report.bulk.as_ref().expect(&table);
    // 3 base objects and 10 routes (3 objects each) went in before, for
    // the CPU reference; the bulk apply stores the other 20 routes.
    assert_eq!(bulk.objects, 3 * 20, "{table}");
    assert_eq!(bulk.applies, 3, "25 objects per apply: {table}");

    let resync = report.resync.as_ref().expect(&table);
    assert_eq!((resync.agents, resync.resynced), (4, 4), "{table}");
    assert_eq!(resync.times.count, 4);
    assert!(resync.times.p50 <= resync.times.p99 && resync.times.p99 <= resync.times.max);

    let ready = report.ready.as_ref().expect(&table);
    assert_eq!(ready.ready.count, 4, "every change Ready: {table}");
    assert!(ready.ready.p50 > Duration::ZERO);
    assert_eq!(ready.committed.count, 4, "every apply answered: {table}");
    assert!(
        ready.committed.max <= ready.ready.max,
        "an apply's reply comes before its Ready: {table}"
    );

    let throughput = report.throughput.as_ref().expect(&table);
    assert_eq!(throughput.clients, 4);
    assert!(throughput.commits > 0, "{table}");
    let cutovers = throughput.cutovers.expect("the leader was started here");
    assert!(
        cutovers <= throughput.commits,
        "no more cutovers than applies: {table}"
    );
    assert_eq!(
        throughput.errors, 0,
        "every apply a new generation: {table}"
    );

    let cpu = report.cpu.as_ref().expect(&table);
    assert!(cpu.at_reference > 0.0 && cpu.at_full > 0.0, "{table}");
    assert_eq!(cpu.reference_routes, 10);

    let memory = report.memory.as_ref().expect(&table);
    assert!(memory.rss > 0 && memory.hwm >= memory.rss, "{table}");

    let disk = report.disk.as_ref().expect(&table);
    assert!(disk.live_bytes > 0 && disk.dir_bytes > 0, "{table}");
    // 4 changes for the CPU reference, 4 for apply → Ready and 4 for CPU
    // at full size, then the throughput clients' commits.
    assert_eq!(disk.updates, 12 + throughput.commits, "{table}");

    let failover = report.failover.as_ref().expect(&table);
    assert_eq!(failover.pending, 3, "{table}");

    for figure in [
        "bulk apply",
        "full resync",
        "apply → Ready",
        "committed route updates",
        "CPU per update",
        "RSS",
        "data directory",
        "leader kill",
    ] {
        let row = table
            .lines()
            .find(|l| l.contains(figure))
            .unwrap_or_else(|| panic!("no row for {figure}: {table}"));
        assert!(!row.contains("failed"), "{row}");
    }
    assert!(table.starts_with("`load_tool test`"), "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_figure_is_produced_against_real_coordinators() {
    let report = switchyard_load::run(&options(false, true)).await.unwrap();
    check(&report);
    // The acceptance sequence through three real proxies, with the other
    // routes stored and the agents connected: not one request fails.
    let table = report.table();
    let acceptance = report
        .acceptance
        .as_ref()
        .expect("asked for")
        .as_ref()
        .expect(&table);
    assert_eq!(acceptance.failed, 0, "{table}");
    assert_eq!(acceptance.cutovers, 20, "{table}");
    assert!(acceptance.sent > 100, "{table}");
    assert_eq!(acceptance.warnings, 0, "{table}");
    assert!(
        table.contains("| acceptance sequence at this size | 0 failed of"),
        "{table}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_figure_is_produced_with_mutual_tls_and_a_certificate_per_agent() {
    let report = switchyard_load::run(&options(true, false)).await.unwrap();
    check(&report);
    assert!(report.acceptance.is_none());
}
