//! The fleet of the end-to-end tests that need one proxy on a known
//! address: three coordinators (three zones) and one `switchyard proxy`
//! process, `edge` in `zone-a`, and applying YAML until its routes are
//! Ready. Shared by the GRPCRoute and backend-TLS tests.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use switchyard::demo::fleet::{Fleet, FleetOptions};
use switchyard_harness::free_port;

/// The `switchyard` binary under test.
pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_switchyard"))
}

/// Three coordinators and one proxy; the proxy's data-plane address.
pub async fn fleet() -> anyhow::Result<(Fleet, SocketAddr)> {
    let mut options = FleetOptions::three_zones(binary());
    options.proxies.clear();
    let mut fleet = tokio::task::block_in_place(|| Fleet::start(options))?;
    fleet.wait_leader(Duration::from_secs(30)).await?;
    let listen = format!("127.0.0.1:{}", free_port());
    let proxy = tokio::task::block_in_place(|| fleet.start_proxy_on("edge", "zone-a", &listen))?;
    fleet.proxies.push(proxy);
    Ok((fleet, listen.parse()?))
}

/// Applies `yaml` and waits until every route in it is Ready.
pub async fn apply_ready(fleet: &mut Fleet, yaml: &str) -> anyhow::Result<()> {
    let (targets, index) = fleet.apply(yaml).await?;
    fleet
        .client()
        .wait_ready(&targets, index, Duration::from_secs(60), |_| {})
        .await?;
    Ok(())
}
