//! The zero-drop acceptance sequence (Knative's ingress `TestUpdate`) and
//! its variants, against real processes: a continuous prober through three
//! proxies, cutovers with `--wait` semantics, and zero failed requests as
//! the first assertion of every test.

use std::path::PathBuf;
use std::time::Duration;
use switchyard::client::WaitError;
use switchyard::demo::fleet::{Fleet, FleetOptions};
use switchyard::demo::manifests;
use switchyard::demo::prober::Prober;
use switchyard::demo::{DemoOptions, render, run, run_on, start_serving};
use switchyard_harness::http_get;

mod scenario;
use scenario::{SERIAL, rounds};

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_switchyard"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_cutovers_drop_nothing() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let started = std::time::Instant::now();
    let mut options = DemoOptions::acceptance(binary());
    options.header_updates = rounds(10);
    options.backend_swaps = rounds(10);
    let report = run(options).await?;
    println!("{}", render(&report));
    scenario::report(
        "acceptance",
        "acceptance sequence (Knative TestUpdate)",
        &report.probe,
        report.cutovers.len(),
        "none",
        started,
    );
    assert_eq!(
        report.probe.failed, 0,
        "failed requests: {:?}",
        report.probe.failures
    );
    assert_eq!(report.cutovers.len(), rounds(20));
    assert!(
        report.probe.sent > 100,
        "the prober barely ran: {}",
        report.probe.sent
    );
    assert!(
        report.warnings.is_empty(),
        "a clean run logged {} WARN/ERROR lines:\n{}",
        report.warnings.len(),
        report.warnings.join("\n")
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_during_cutovers_drops_nothing() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let mut options = DemoOptions::acceptance(binary());
    options.header_updates = rounds(4);
    options.backend_swaps = rounds(5);
    options.kill_leader_every = Some(3);
    let started = std::time::Instant::now();
    let report = run(options).await?;
    println!("{}", render(&report));
    scenario::report(
        "acceptance",
        "leader killed during cutovers",
        &report.probe,
        report.cutovers.len(),
        "leader kill -9 ×3",
        started,
    );
    assert_eq!(
        report.probe.failed, 0,
        "failed requests: {:?}",
        report.probe.failures
    );
    let killed = report.cutovers.iter().filter(|c| c.leader_killed).count();
    assert_eq!(
        killed,
        rounds(9) / 3,
        "the leader was to be killed during cutovers 3, 6 and 9"
    );
    Ok(())
}

/// A proxy that joins late — here stopped for 3 s from its start; at
/// 10,000 routes, one whose lease ran out while it installed the store —
/// is neither counted when the first route commits nor serving when the
/// prober starts. The sequence waits for it to be counted, and to serve
/// the first route, before it probes: its connections would otherwise be
/// refused (a proxy listens only once configured), every one a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_late_to_join_is_waited_for_before_probing() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let started = std::time::Instant::now();
    let mut fleet =
        tokio::task::block_in_place(|| Fleet::start(FleetOptions::three_zones(binary())))?;
    fleet.proxies[2].pause();
    let late = fleet.proxies[2]
        .pid()
        .ok_or_else(|| anyhow::anyhow!("proxy-c has no pid"))?;
    // By PID, from another thread: the sequence holds the fleet meanwhile.
    let resume = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(3));
        std::process::Command::new("kill")
            .args(["-CONT", &late.to_string()])
            .status()
    });
    let mut options = DemoOptions::acceptance(binary());
    options.header_updates = 2;
    options.backend_swaps = 2;
    let outcome = run_on(&mut fleet, &options).await;
    let resumed = resume
        .join()
        .map_err(|_| anyhow::anyhow!("the resuming thread panicked"))??;
    assert!(resumed.success(), "kill -CONT {late}: {resumed}");
    let report = outcome?;
    scenario::report(
        "acceptance",
        "a proxy late to join is waited for before probing",
        &report.probe,
        report.cutovers.len(),
        "proxy SIGSTOP from its start, SIGCONT after 3 s",
        started,
    );
    assert_eq!(
        report.probe.failed, 0,
        "failed requests: {:?}",
        report.probe.failures
    );
    assert_eq!(report.cutovers.len(), 4);
    let status = fleet.client().fetch_status().await?;
    assert!(
        status.proxies.iter().any(|p| p.id == "proxy-c" && p.live),
        "the late proxy is not counted: {:?}",
        status.proxies
    );
    Ok(())
}

/// A fleet serving route `demo/app` from backend v1, with the prober
/// running through every proxy.
async fn serving_v1() -> anyhow::Result<(Fleet, Prober)> {
    start_serving(FleetOptions::three_zones(binary()), &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_that_never_becomes_healthy_times_out_and_keeps_the_old_one() -> anyhow::Result<()>
{
    let _serial = SERIAL.lock().await;
    let started = std::time::Instant::now();
    let (mut fleet, prober) = serving_v1().await?;
    let serving = fleet.client().fetch_status().await?.routes[0].active_generation;
    assert!(serving.is_some());
    let address =
        tokio::task::block_in_place(|| fleet.start_backend("dead", &["--never-healthy"]))?;
    let yaml = format!(
        "{}{}",
        manifests::backend("dead", address),
        manifests::route("dead", "h0", "3s")
    );
    let (targets, index) = fleet.apply(&yaml).await?;
    let waited = fleet
        .client()
        .wait_ready(&targets, index, Duration::from_secs(30), |_| {})
        .await;
    match waited {
        Err(WaitError::Failed { why, .. }) => {
            assert!(why.contains("timed out after 3000ms"), "{why}");
            assert!(why.contains("0 of 3 proxies ready"), "{why}");
        }
        other => panic!("expected the cutover to time out, got {other:?}"),
    }
    let status = fleet.client().fetch_status().await?;
    let row = &status.routes[0];
    assert_eq!(
        row.active_generation, serving,
        "the old generation stays active"
    );
    assert_eq!(row.pending_generation, None);
    assert!(
        row.last_failure
            .as_deref()
            .is_some_and(|f| f.contains("abandoned")),
        "{row:?}"
    );
    let seen = prober
        .observe_after(tokio::time::Instant::now(), Duration::from_secs(5))
        .await
        .expect("responses keep coming");
    assert_eq!(seen.backend, "v1");
    let report = prober.stop().await;
    scenario::report(
        "acceptance",
        "a backend that never becomes healthy times out and keeps the old one",
        &report,
        1,
        "new backend never healthy",
        started,
    );
    assert_eq!(report.failed, 0, "failed requests: {:?}", report.failures);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_that_answers_503_at_first_is_waited_for() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let started = std::time::Instant::now();
    let (mut fleet, prober) = serving_v1().await?;
    let address =
        tokio::task::block_in_place(|| fleet.start_backend("slow", &["--unhealthy-for", "3s"]))?;
    let cut_started = tokio::time::Instant::now();
    let yaml = format!(
        "{}{}",
        manifests::backend("slow", address),
        manifests::route("slow", "h0", "30s")
    );
    let (targets, index) = fleet.apply(&yaml).await?;
    fleet
        .client()
        .wait_ready(&targets, index, Duration::from_secs(30), |_| {})
        .await?;
    assert!(
        cut_started.elapsed() >= Duration::from_millis(2_500),
        "Ready before the backend was healthy"
    );
    let seen = prober
        .observe_after(tokio::time::Instant::now(), Duration::from_secs(5))
        .await
        .expect("responses keep coming");
    assert_eq!(seen.backend, "slow");
    let report = prober.stop().await;
    scenario::report(
        "acceptance",
        "a backend that answers 503 at first is waited for",
        &report,
        1,
        "new backend 503 for 3 s",
        started,
    );
    assert_eq!(report.failed, 0, "failed requests: {:?}", report.failures);

    // The leader's metrics saw both cutovers through to Ready.
    let leader = fleet.wait_leader(Duration::from_secs(5)).await?;
    let metrics = http_get(&fleet.coordinators[leader].address("admin")?, "/metrics")?;
    let value = |name: &str| -> f64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
            .unwrap_or(-1.0)
    };
    assert_eq!(
        value("switchyard_coordinator_raft_is_leader "),
        1.0,
        "{metrics}"
    );
    assert!(
        value("switchyard_coordinator_cutover_commits_total ") >= 2.0,
        "{metrics}"
    );
    assert!(
        value("switchyard_coordinator_apply_to_ready_seconds_count ") >= 1.0,
        "{metrics}"
    );
    assert!(
        value("switchyard_coordinator_evidence_reports_total ") >= 1.0,
        "{metrics}"
    );
    assert!(
        metrics.contains("switchyard_coordinator_live_proxies{zone=\"zone-a\"} 1"),
        "{metrics}"
    );
    Ok(())
}

/// The sequence's wait for every proxy to serve gives up at its bound and
/// names the proxy and why (here: nothing listens where it should).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_a_proxy_that_never_serves_names_it_and_why() {
    let silent = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.local_addr().expect("its address")
    };
    let url = format!("http://{silent}");
    let error = switchyard::demo::prober::wait_until_each_answers(
        std::slice::from_ref(&url),
        manifests::VERSION_HEADER,
        Duration::from_millis(300),
    )
    .await
    .expect_err("nothing listens there");
    let message = format!("{error:#}");
    assert!(
        message.contains(&format!("{url} does not serve the route after 300ms"))
            && message.contains("transport error"),
        "{message}"
    );
}
