//! Measures time from `apply` to Ready over many cutovers of one route
//! whose backend is already running and warm (so the proxies' health-check
//! interval is not part of the figure): 3 coordinators and 5 proxies as
//! real processes on loopback.
//!
//!     cargo build --release && cargo run --release --example cutover_latency
//!
//! `CUTOVERS` (default 100) sets the count; `TLS=0` runs the fleet with
//! `--insecure` instead of mutual TLS (to compare). Prints p50, p90, p99
//! and max.

use std::path::PathBuf;
use std::time::{Duration, Instant};
use switchyard::demo::fleet::{Fleet, FleetOptions};
use switchyard::demo::manifests;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let count: usize = std::env::var("CUTOVERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let binary = std::env::current_exe()?
        .parent()
        .and_then(|examples| examples.parent())
        .map(|dir| dir.join("switchyard"))
        .unwrap_or_else(|| PathBuf::from("target/release/switchyard"));
    anyhow::ensure!(
        binary.exists(),
        "build the binary first: {} is missing",
        binary.display()
    );
    let mut options = FleetOptions::three_zones(binary);
    let tls = std::env::var("TLS").as_deref() != Ok("0");
    options.tls = tls;
    options.proxies = ["a", "b", "c", "a", "b"]
        .iter()
        .enumerate()
        .map(|(i, z)| (format!("proxy-{i}"), format!("zone-{z}")))
        .collect();
    let mut fleet = tokio::task::block_in_place(|| Fleet::start(options))?;
    fleet.wait_leader(Duration::from_secs(20)).await?;
    let address = tokio::task::block_in_place(|| fleet.start_backend("v1", &[]))?;
    let base = format!("{}{}", manifests::base(), manifests::backend("v1", address));
    let (targets, index) = fleet
        .apply(&format!("{base}{}", manifests::route("v1", "h0", "30s")))
        .await?;
    let mut client = fleet.client();
    client
        .wait_ready(&targets, index, Duration::from_secs(60), |_| {})
        .await?;

    let mut samples = Vec::with_capacity(count);
    for i in 1..=count {
        let started = Instant::now();
        let (targets, index) = fleet
            .apply(&manifests::route("v1", &format!("h{i}"), "30s"))
            .await?;
        client
            .wait_ready(&targets, index, Duration::from_secs(30), |_| {})
            .await?;
        samples.push(started.elapsed());
    }
    samples.sort();
    let at =
        |q: f64| samples[((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1];
    let security = if tls { "mutual TLS" } else { "--insecure" };
    println!("cutovers: {count} (3 coordinators, 5 proxies, backend already warm, {security})");
    println!(
        "apply -> Ready: p50 {:?}  p90 {:?}  p99 {:?}  max {:?}",
        at(0.50),
        at(0.90),
        at(0.99),
        samples[samples.len() - 1]
    );
    Ok(())
}
