//! Clocks that lie, on real processes: libfaketime (Debian's `faketime`,
//! `LD_PRELOAD`) shifts the wall clock of coordinators and proxies while
//! their monotonic clocks stay true (`DONT_FAKE_MONOTONIC=1`).
//!
//! Before the fix a transition's deadline was a wall-clock instant stamped
//! by the coordinator that took the apply and compared on the leader's
//! clock: with the leader ten minutes ahead, a 60 s cutover was abandoned
//! at once (and with `on-timeout: force` it switched to an unwarmed
//! backend). Now no timestamp leaves a machine and every duration is timed
//! on one machine's monotonic clock: skew and jumps change nothing.
//!
//! The throwaway CA's certificates are valid from an hour before they are
//! issued, so the skews here (at most 30 minutes back) keep mutual TLS
//! working — certificate validity is the one thing that must read a wall
//! clock.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use switchyard::client::AdminClient;
use switchyard::demo::fleet::{Fleet, FleetOptions};
use switchyard::demo::manifests;
use switchyard::demo::prober::Prober;
use switchyard::demo::start_serving;
use switchyard_test_support::eventually;

// Only `SERIAL` of the shared scenario helpers is used here.
#[allow(dead_code)]
mod scenario;
use scenario::SERIAL;

const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_switchyard"))
}

/// libfaketime's environment around `setting` (`FAKETIME=+600s`, or a
/// timestamp file).
fn faketime(setting: (&str, String)) -> Vec<(String, String)> {
    assert!(
        Path::new(LIBFAKETIME).exists(),
        "{LIBFAKETIME} is missing: install Debian's faketime package (.ci/run does)"
    );
    vec![
        ("LD_PRELOAD".into(), LIBFAKETIME.into()),
        ("DONT_FAKE_MONOTONIC".into(), "1".into()),
        (setting.0.into(), setting.1),
    ]
}

/// Applies a route to a backend that never becomes healthy, with a
/// `timeout` cutover that keeps the old backend, through `address` only;
/// then measures, on this test's monotonic clock, how long until the
/// transition ended. Returns that time and the route's last failure.
async fn time_a_doomed_cutover(
    fleet: &mut Fleet,
    through: &str,
    timeout: &str,
    during: impl AsyncFnOnce(),
) -> anyhow::Result<(Duration, String)> {
    let dead = tokio::task::block_in_place(|| fleet.start_backend("dead", &["--never-healthy"]))?;
    let yaml = format!(
        "{}{}",
        manifests::backend("dead", dead),
        manifests::route("dead", "doomed", timeout)
    );
    let resources = switchyard_kubeconfig::parse_documents("doomed.yaml", &yaml)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let resources_json = serde_json::to_vec(&resources)?;
    let mut client = AdminClient::new(
        vec![through.to_string()],
        Duration::from_secs(10),
        fleet.admin_security().clone(),
    );
    client
        .call(true, |mut c| {
            let request = switchyard_proto::pb::ApplyRequest {
                resources_json: resources_json.clone(),
            };
            async move { c.apply(request).await }
        })
        .await?;
    let applied = Instant::now();
    during().await;
    let within = Duration::from_secs(60).saturating_sub(applied.elapsed());
    let why = eventually("the transition to end", within, async || {
        // A status that cannot be read fails the test, as before.
        let status = fleet.client().fetch_status().await.expect("status");
        let row = &status.routes[0];
        match row.pending_generation {
            None => Ok(row.last_failure.clone().unwrap_or_default()),
            Some(_) => Err(format!("still pending: {row:?}")),
        }
    })
    .await?;
    Ok((applied.elapsed(), why))
}

fn no_failed_requests(probe: &switchyard::demo::prober::ProbeReport) {
    assert_eq!(probe.failed, 0, "failed requests: {:?}", probe.failures);
    assert!(probe.sent > 10, "the prober barely ran: {}", probe.sent);
}

async fn finish(fleet: Fleet, prober: Prober) {
    let probe = prober.stop().await;
    let expiries: Vec<String> = fleet
        .coordinators
        .iter()
        .flat_map(|c| c.log_lines())
        .filter(|l| l.contains("lease expired"))
        .collect();
    assert!(expiries.is_empty(), "a proxy lease expired: {expiries:?}");
    no_failed_requests(&probe);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coordinators_ten_minutes_apart_neither_cut_a_timeout_short_nor_stretch_it()
-> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let mut options = FleetOptions::three_zones(binary());
    options.coordinator_env = ["+0", "+600s", "-600s"]
        .iter()
        .map(|offset| faketime(("FAKETIME", offset.to_string())))
        .collect();
    let (mut fleet, prober) = start_serving(options, &[]).await?;
    // The apply goes through a coordinator whose clock differs from the
    // leader's by ten or twenty minutes.
    let leader = fleet.wait_leader(Duration::from_secs(20)).await?;
    let follower = (leader + 1) % 3;
    let through = fleet.coordinator_addresses[follower].clone();
    let (took, why) = time_a_doomed_cutover(&mut fleet, &through, "4s", async || {}).await?;
    assert!(
        took >= Duration::from_secs(4),
        "a 4 s cutover ended after {took:?}: {why}"
    );
    assert!(
        took < Duration::from_secs(15),
        "a 4 s cutover took {took:?} (a clock ten minutes off stretched it?): {why}"
    );
    assert!(why.contains("timed out after 4000ms"), "{why}");
    finish(fleet, prober).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wall_clock_jumps_both_ways_during_a_transition_change_nothing() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("faketime");
    std::fs::write(&file, "+0\n")?;
    // Every process re-reads the file on each clock reading: the test
    // moves every wall clock at once by rewriting it.
    let env = || {
        let mut env = faketime(("FAKETIME_TIMESTAMP_FILE", file.display().to_string()));
        env.push(("FAKETIME_NO_CACHE".into(), "1".into()));
        env
    };
    let mut options = FleetOptions::three_zones(binary());
    options.coordinator_env = vec![env(), env(), env()];
    options.proxy_env = env();
    let (mut fleet, prober) = start_serving(options, &[]).await?;
    let through = fleet.coordinator_addresses[0].clone();
    let jumps = async || {
        for (after, setting) in [(500, "+1800s"), (1_500, "-1800s"), (1_500, "+600s")] {
            // This sleep is the fault's schedule: the clocks jump at these
            // times while the transition runs.
            tokio::time::sleep(Duration::from_millis(after)).await;
            let _ = std::fs::write(&file, format!("{setting}\n"));
        }
    };
    let (took, why) = time_a_doomed_cutover(&mut fleet, &through, "6s", jumps).await?;
    assert!(
        took >= Duration::from_secs(6),
        "a 6 s cutover ended after {took:?} across clock jumps: {why}"
    );
    assert!(
        took < Duration::from_secs(20),
        "a 6 s cutover took {took:?}: {why}"
    );
    assert!(why.contains("timed out after 6000ms"), "{why}");
    // And a healthy cutover still goes through at once with the clocks off.
    std::fs::write(&file, "-1200s\n")?;
    let green = tokio::task::block_in_place(|| fleet.start_backend("green", &[]))?;
    let yaml = format!(
        "{}{}",
        manifests::backend("green", green),
        manifests::route("green", "v2", "30s")
    );
    let (targets, index) = fleet.apply(&yaml).await?;
    fleet
        .client()
        .wait_ready(&targets, index, Duration::from_secs(30), |_| {})
        .await?;
    finish(fleet, prober).await;
    Ok(())
}
