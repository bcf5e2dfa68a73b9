//! Chaos scenarios against real processes: every one runs a prober through
//! the proxies the whole time, and zero failed requests is always the first
//! assertion; then the scenario's own state checks. Faults: a leader cut
//! off from its peers, all coordinators killed mid-transition, a paused
//! proxy, a coordinator restarted again and again, a flapping backend.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;
use switchyard::demo::fleet::{Fleet, FleetOptions};
use switchyard::demo::manifests;
use switchyard::demo::start_serving;
use switchyard_harness::http_get;
use switchyard_test_support::eventually;
use switchyard_test_support::eventually::holds;

mod scenario;
use scenario::{SERIAL, rounds};
use switchyard_proto::model::ObjectName;

fn options() -> FleetOptions {
    FleetOptions::three_zones(PathBuf::from(env!("CARGO_BIN_EXE_switchyard")))
}

fn app() -> ObjectName {
    ObjectName::new(manifests::NAMESPACE, manifests::ROUTE)
}

/// Applies a new backend `name` (started with `flags`) and the route to it;
/// returns the apply's targets and index.
async fn cut_over_to(
    fleet: &mut Fleet,
    name: &str,
    flags: &[&str],
) -> anyhow::Result<(BTreeMap<ObjectName, u64>, u64)> {
    let address = tokio::task::block_in_place(|| fleet.start_backend(name, flags))?;
    fleet
        .apply(&format!(
            "{}{}",
            manifests::backend(name, address),
            manifests::route(name, "h0", "60s")
        ))
        .await
}

/// The replicated view of route `demo/app` at one coordinator:
/// (active, pending) generations.
async fn generations_at(
    fleet: &Fleet,
    address: &str,
) -> anyhow::Result<(Option<u64>, Option<u64>)> {
    let mut client = switchyard::client::AdminClient::new(
        vec![address.to_string()],
        Duration::from_secs(2),
        fleet.admin_security().clone(),
    );
    let status = client.fetch_status_here().await?;
    let row = status
        .routes
        .iter()
        .find(|r| r.name == manifests::ROUTE)
        .ok_or_else(|| anyhow::anyhow!("no route at {address}"))?;
    Ok((row.active_generation, row.pending_generation))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_commits_nothing_and_the_majority_completes() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let started = std::time::Instant::now();
    let mut options = options();
    options.partitionable = true;
    let (mut fleet, prober) = start_serving(options, &[]).await?;
    let leader = fleet.wait_leader(Duration::from_secs(10)).await?;
    // The new backend stays unhealthy long enough that the transition is
    // still pending when the leader is cut off.
    let (targets, index) = cut_over_to(&mut fleet, "v2", &["--unhealthy-for", "2s"]).await?;
    fleet.isolate(leader)?;

    // The majority (asked directly) elects a leader and completes it.
    let majority: Vec<String> = (0..3)
        .filter(|i| *i != leader)
        .map(|i| fleet.coordinator_addresses[i].clone())
        .collect();
    let mut client = switchyard::client::AdminClient::new(
        majority,
        Duration::from_secs(10),
        fleet.admin_security().clone(),
    );
    client
        .wait_ready(&targets, index, Duration::from_secs(40), |_| {})
        .await?;
    let generation = targets[&app()];
    // The isolated side committed nothing.
    let (active, _) = generations_at(&fleet, &fleet.coordinator_addresses[leader]).await?;
    assert!(
        active < Some(generation),
        "the isolated coordinator committed generation {generation}"
    );

    // After healing every coordinator agrees.
    fleet.heal();
    for address in fleet.coordinator_addresses.clone() {
        let what = format!("{address} to converge");
        eventually(&what, Duration::from_secs(20), async || {
            let seen = generations_at(&fleet, &address).await.ok();
            holds(seen == Some((Some(generation), None)), || {
                format!("(active, pending) generations {seen:?}")
            })
        })
        .await?;
    }
    let report = prober.stop().await;
    scenario::report(
        "chaos",
        "a leader cut off commits nothing and the majority completes",
        &report,
        1,
        "leader cut off from peers (relay), then healed",
        started,
    );
    assert_eq!(report.failed, 0, "failed requests: {:?}", report.failures);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_coordinators_killed_mid_transition_resume_it() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let started = std::time::Instant::now();
    let (mut fleet, prober) = start_serving(options(), &[]).await?;
    let (targets, index) = cut_over_to(&mut fleet, "v2", &["--unhealthy-for", "2s"]).await?;
    for coordinator in &mut fleet.coordinators {
        coordinator.kill();
    }
    // Every coordinator is down: the proxies keep serving what they had.
    // This sleep is the fault: the coordinators stay down for a second
    // while the prober runs, with the transition pending.
    let before = prober.report();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        prober.report().sent > before.sent + 10,
        "the proxies stopped serving without coordinators"
    );
    for coordinator in &mut fleet.coordinators {
        tokio::task::block_in_place(|| coordinator.restart())?;
    }
    scenario::wait_serving(
        &fleet,
        &prober,
        &targets,
        index,
        Duration::from_secs(40),
        "v2",
    )
    .await?;
    let report = prober.stop().await;
    scenario::report(
        "chaos",
        "all coordinators killed mid transition resume it",
        &report,
        1,
        "all 3 coordinators kill -9, restarted",
        started,
    );
    assert_eq!(report.failed, 0, "failed requests: {:?}", report.failures);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_proxy_stops_counting_and_warms_before_serving_when_back() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let started = std::time::Instant::now();
    // Probe through proxies a and b only: a paused proxy would hang its
    // clients, which a load balancer's health check takes out.
    let (mut fleet, prober) = start_serving(options(), &[0, 1]).await?;
    fleet.proxies[2].pause();
    let cut_started = tokio::time::Instant::now();
    let (targets, index) = cut_over_to(&mut fleet, "v2", &[]).await?;
    // Policy `all`: the cutover waits for the paused proxy's lease (2 s) to
    // expire, then completes without it.
    fleet
        .client()
        .wait_ready(&targets, index, Duration::from_secs(30), |_| {})
        .await?;
    assert!(
        cut_started.elapsed() >= Duration::from_millis(1_500),
        "committed before the paused proxy's lease expired"
    );
    let status = fleet.client().fetch_status().await?;
    assert!(
        !status.proxies.iter().any(|p| p.id == "proxy-c" && p.live),
        "{:?}",
        status.proxies
    );

    fleet.proxies[2].resume();
    // Back: it registers again and, once it has warmed v2 itself, serves it.
    let url = fleet.proxy_urls()?[2].clone();
    let back = switchyard::demo::prober::Prober::start(
        vec![url],
        2,
        manifests::VERSION_HEADER,
        Duration::from_secs(60),
    );
    let seen = back
        .observe_after(tokio::time::Instant::now(), Duration::from_secs(20))
        .await
        .expect("the resumed proxy answers");
    let mut latest = seen;
    eventually(
        "the resumed proxy to move to v2",
        Duration::from_secs(20),
        async || {
            if latest.backend != "v2" {
                latest = back
                    .observe_after(latest.sent_at, Duration::from_secs(5))
                    .await
                    .expect("answers");
            }
            holds(latest.backend == "v2", || {
                format!("answered by {}", latest.backend)
            })
        },
    )
    .await?;
    let resumed = back.stop().await;
    assert_eq!(
        resumed.failed, 0,
        "requests through the resumed proxy failed: {:?}",
        resumed.failures
    );
    // It knew it had been dropped, and said so on /ready until it served
    // every committed generation (a load balancer took it out meanwhile).
    let metrics = fleet.proxies[2].address("admin")?;
    eventually(
        "the resumed proxy to be counted and caught up",
        Duration::from_secs(10),
        async || {
            let ready = http_get(&metrics, "/ready").unwrap_or_default();
            holds(ready == "ready\n", || format!("/ready: {ready:?}"))
        },
    )
    .await?;
    let log = fleet.proxies[2].log_text();
    let dropped = log
        .find("/ready answers 503 until it serves every committed generation")
        .expect("the resumed proxy did not learn its lease had run out");
    let back_in = log
        .find("/ready answers 200 again")
        .expect("the resumed proxy did not say it was counted and caught up");
    assert!(dropped < back_in, "{log}");
    let text = http_get(&metrics, "/metrics")?;
    assert!(
        text.lines()
            .any(|l| l.starts_with("switchyard_proxy_forced_applies_total 0")),
        "the resumed proxy applied a generation it had not warmed: {text}"
    );
    let report = prober.stop().await;
    scenario::report(
        "chaos",
        "a paused proxy stops counting and warms before serving when back",
        &report,
        1,
        "proxy SIGSTOP, SIGCONT",
        started,
    );
    assert_eq!(report.failed, 0, "failed requests: {:?}", report.failures);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_restarted_again_and_again_loses_no_acknowledged_apply() -> anyhow::Result<()>
{
    let _serial = SERIAL.lock().await;
    let started = std::time::Instant::now();
    let (mut fleet, prober) = start_serving(options(), &[]).await?;
    let mut acknowledged = Vec::new();
    let total = rounds(8);
    for round in 0..total {
        let victim = round % 3;
        fleet.coordinators[victim].kill();
        // Apply while it is down (through any coordinator), then bring it
        // back on the same data dir.
        let name = format!("extra-{round}");
        let yaml = manifests::route("v1", "h0", "60s").replace(
            &format!("name: {}\n", manifests::ROUTE),
            &format!("name: {name}\n"),
        );
        if fleet.apply(&yaml).await.is_ok() {
            acknowledged.push(name);
        }
        tokio::task::block_in_place(|| fleet.coordinators[victim].restart())?;
    }
    assert!(
        acknowledged.len() >= total * 3 / 4,
        "too few applies went through: {acknowledged:?}"
    );
    for address in fleet.coordinator_addresses.clone() {
        let what = format!("{address} to hold every acknowledged apply");
        eventually(&what, Duration::from_secs(20), async || {
            let mut client = switchyard::client::AdminClient::new(
                vec![address.clone()],
                Duration::from_secs(2),
                fleet.admin_security().clone(),
            );
            let names: Vec<String> = client
                .fetch_status_here()
                .await
                .map(|s| s.routes.into_iter().map(|r| r.name).collect())
                .unwrap_or_default();
            let missing: Vec<&String> =
                acknowledged.iter().filter(|n| !names.contains(n)).collect();
            holds(missing.is_empty(), || format!("missing {missing:?}"))
        })
        .await?;
    }
    let report = prober.stop().await;
    scenario::report(
        "chaos",
        "a coordinator restarted again and again loses no acknowledged apply",
        &report,
        0,
        "coordinator kill -9 and restart ×8",
        started,
    );
    assert_eq!(report.failed, 0, "failed requests: {:?}", report.failures);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_flapping_during_warm_up_is_waited_for() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let started = std::time::Instant::now();
    let (mut fleet, prober) = start_serving(options(), &[]).await?;
    let address =
        tokio::task::block_in_place(|| fleet.start_backend("v2", &["--unhealthy-for", "1s"]))?;
    let (targets, index) = fleet
        .apply(&format!(
            "{}{}",
            manifests::backend("v2", address),
            manifests::route("v2", "h0", "60s")
        ))
        .await?;
    // Killed and started again on the same address, twice, while the
    // proxies warm it.
    for _ in 0..rounds(2) {
        // This sleep is the fault's schedule (a flap every 300 ms), not a
        // wait for something.
        tokio::time::sleep(Duration::from_millis(300)).await;
        if let Some(backend) = fleet.backends.get_mut("v2") {
            backend.kill();
        }
        let listen = address.to_string();
        tokio::task::block_in_place(|| {
            fleet.start_backend("v2", &["--listen", &listen, "--unhealthy-for", "500ms"])
        })?;
    }
    scenario::wait_serving(
        &fleet,
        &prober,
        &targets,
        index,
        Duration::from_secs(40),
        "v2",
    )
    .await?;
    let report = prober.stop().await;
    scenario::report(
        "chaos",
        "a backend flapping during warm up is waited for",
        &report,
        1,
        "new backend kill -9 and restart ×2 during warm-up",
        started,
    );
    assert_eq!(report.failed, 0, "failed requests: {:?}", report.failures);
    Ok(())
}
