//! A leader stopped gracefully (SIGTERM) hands over at once and records
//! nothing on its way out; a coordinator cut off from a quorum says so in
//! its status instead of showing stale data silently.
//!
//! Before: the stopping leader drained its gRPC streams with Raft and the
//! cutover engine still running — it expired proxy leases ("proxy lease
//! expired … p1" about 2 s after SIGTERM) while proxies could no longer
//! reach it, and for 3–6 s status named the dead leader and "proxies:
//! (none)".

use std::path::PathBuf;
use std::time::{Duration, Instant};
use switchyard::client::AdminClient;
use switchyard::demo::fleet::FleetOptions;
use switchyard::demo::start_serving;
use switchyard_test_support::eventually;

// Only `SERIAL` of the shared scenario helpers is used here.
#[allow(dead_code)]
mod scenario;
use scenario::SERIAL;

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_switchyard"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_stopped_gracefully_hands_over_and_expires_nobody() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let (mut fleet, prober) = start_serving(FleetOptions::three_zones(binary()), &[]).await?;
    let old = fleet.wait_leader(Duration::from_secs(20)).await?;
    let others: Vec<String> = (0..3)
        .filter(|i| *i != old)
        .map(|i| fleet.coordinator_addresses[i].clone())
        .collect();
    let mut survivors = AdminClient::new(
        others.clone(),
        Duration::from_secs(2),
        fleet.admin_security().clone(),
    );
    let stopped = Instant::now();
    fleet.coordinators[old].ask_to_stop();
    // The survivors name a new leader, and see every proxy live, soon.
    let old_id = old as u64 + 1;
    let handed_over = eventually(
        "a new leader after the leader's SIGTERM",
        Duration::from_secs(20),
        async || -> anyhow::Result<_> {
            let status = survivors.fetch_status().await?;
            anyhow::ensure!(
                status.leader.is_some_and(|l| l != old_id) && status.answered_by != old_id,
                "leader {:?}, answered by {}",
                status.leader,
                status.answered_by
            );
            Ok(status)
        },
    )
    .await?;
    let took = stopped.elapsed();
    let code =
        tokio::task::block_in_place(|| fleet.coordinators[old].terminate(Duration::from_secs(10)));
    assert_eq!(code, Some(0), "the old leader did not exit cleanly");
    eprintln!("new leader {:?} after {took:?}", handed_over.leader);
    assert!(
        took < Duration::from_secs(4),
        "status named the stopped leader for {took:?} (election timeout is at most 600 ms)"
    );
    // This sleep is the test: over 3 s (longer than a proxy lease) the new
    // leader must expire nobody.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = survivors.fetch_status().await?;
    assert_eq!(status.proxies.len(), 3, "{:?}", status.proxies);
    assert!(
        status.proxies.iter().all(|p| p.live),
        "{:?}",
        status.proxies
    );
    let expiries: Vec<String> = fleet
        .coordinators
        .iter()
        .flat_map(|c| c.log_lines())
        .filter(|l| l.contains("expired"))
        .collect();
    assert!(expiries.is_empty(), "{expiries:?}");
    let probe = prober.stop().await;
    assert_eq!(probe.failed, 0, "failed requests: {:?}", probe.failures);

    // One of the two left stops too: the last one cannot reach a quorum,
    // and its status says its view may be stale.
    let second = (0..3)
        .find(|i| *i != old && fleet.coordinators[*i].is_running())
        .unwrap_or(0);
    tokio::task::block_in_place(|| fleet.coordinators[second].terminate(Duration::from_secs(10)));
    let last = (0..3)
        .find(|i| *i != old && *i != second)
        .map(|i| fleet.coordinator_addresses[i].clone())
        .unwrap_or_default();
    let mut alone = AdminClient::new(
        vec![last],
        Duration::from_secs(2),
        fleet.admin_security().clone(),
    );
    let stale = eventually(
        "a coordinator without a quorum to say its status may be stale",
        Duration::from_secs(10),
        async || {
            // A status that cannot be read fails the test, as before.
            let status = alone.fetch_status_here().await.expect("status");
            let shown = format!("{status:?}");
            status.stale.ok_or(shown)
        },
    )
    .await?;
    assert!(stale.contains("may be stale"), "{stale}");
    Ok(())
}
