//! `switchyard coordinator --kubernetes`: one real coordinator process fed
//! by a fake Kubernetes API server. What the cluster serves reaches Raft
//! (the route in `status`, its Services and slices in the proxies'
//! configuration), the route's status is written back with server-side
//! apply, a restart's first plan re-applies nothing, and a route deleted
//! in the cluster is deleted from switchyard. An unreadable kubeconfig
//! stops the coordinator before it serves.

mod support;

use anyhow::Context;
use serde_json::Value;
use std::time::Duration;
use support::{BIN, eventually_blocking, status_at, write};
use switchyard_harness::{Process, ProcessSpec, free_port};
use switchyard_proto::model::ConfigSnapshot;
use switchyard_proto::pb::WatchRequest;
use switchyard_proto::pb::fleet_service_client::FleetServiceClient;
use switchyard_test_support::fake_kube::FakeApiServer;
use switchyard_test_support::fixtures::{GW, shop};

/// The `shop/app` row of `status -o json`, if any.
fn app_row(status: &Value) -> Option<Value> {
    status["routes"]
        .as_array()?
        .iter()
        .find(|r| r["namespace"] == "shop" && r["name"] == "app")
        .cloned()
}

/// `line` without terminal colour codes (`ESC [ ... m`).
fn plain(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|c| *c == 'm');
        } else {
            out.push(c);
        }
    }
    out
}

/// The first configuration snapshot a proxy watching `address` receives.
fn snapshot(address: &str) -> anyhow::Result<ConfigSnapshot> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut client = FleetServiceClient::connect(format!("http://{address}")).await?;
        let request = WatchRequest {
            proxy_id: "kube-wiring-test".into(),
            known_version: 0,
            accepts_deltas: false,
            accepts_lz4: false,
        };
        let mut stream = client.watch(request).await?.into_inner();
        let update = tokio::time::timeout(Duration::from_secs(5), stream.message())
            .await
            .context("no snapshot within 5s")??
            .context("watch ended without a snapshot")?;
        Ok(serde_json::from_slice(&update.snapshot_json)?)
    })
}

#[test]
fn a_live_cluster_drives_the_coordinator_and_gets_status_back() -> anyhow::Result<()> {
    // The shared `shop` cluster: route `shop/app` to Service `blue` (one
    // ready endpoint) on our Gateway and another controller's, and a
    // Service with a slice that no route uses. The fake runs on its own
    // runtime: this test blocks on the CLI.
    let kube = FakeApiServer::start_on_own_runtime(shop::cluster());
    let dir = tempfile::tempdir()?;
    let kubeconfig = write(dir.path(), "kubeconfig.yaml", &kube.kubeconfig("fake-ctx"));
    let address = format!("127.0.0.1:{}", free_port());
    let data = dir.path().join("data");
    let args: Vec<String> = [
        "coordinator",
        "--id",
        "1",
        "--peers",
        &format!("1={address}"),
        "--listen",
        &address,
        "--data-dir",
        &data.to_string_lossy(),
        "--heartbeat-interval",
        "50ms",
        "--election-timeout-min",
        "300ms",
        "--election-timeout-max",
        "600ms",
        "--insecure",
        "--kubernetes",
        &format!("fake={kubeconfig}#fake-ctx"),
        "--kubernetes-status-interval",
        "1s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut coordinator = Process::start(ProcessSpec::new("coordinator-1", BIN, args))?;
    let wait = Duration::from_secs(20);

    // The route reaches Raft: a first generation, pending (no proxies).
    let row = eventually_blocking("route shop/app in status", wait, || {
        app_row(&status_at(&address)?).context("no row for shop/app")
    })?;
    let generation = row["pending_generation"].clone();
    assert!(generation.as_u64().is_some(), "{row}");

    // Its Service and slice reach the proxies' configuration (tagged with
    // the cluster's name); the Service no served route uses does not.
    let snap = eventually_blocking("services in the configuration", wait, || {
        let snap = snapshot(&address)?;
        let found = snap
            .endpoint_slices
            .iter()
            .any(|s| s.meta.name == "blue-a1");
        anyhow::ensure!(found, "slices: {:?}", snap.endpoint_slices);
        Ok(snap)
    })?;
    let services: Vec<&str> = snap.services.iter().map(|s| s.meta.name.as_str()).collect();
    assert_eq!(services, ["blue"], "{snap:?}");
    assert_eq!(snap.endpoint_slices[0].cluster.as_deref(), Some("fake"));

    // Status goes back with server-side apply, our controller's entry.
    let route_status = "/apis/gateway.networking.k8s.io/v1/namespaces/shop/httproutes/app/status";
    let patch = eventually_blocking("a status PATCH of the route", wait, || {
        kube.requests()
            .into_iter()
            .find(|r| r.method == "PATCH" && r.path == route_status)
    })?;
    let parents = &patch.body.as_ref().expect("a JSON body")["status"]["parents"];
    assert_eq!(
        parents[0]["controllerName"], "switchyard.io/gateway-controller",
        "{parents}"
    );
    let gateway_status = "/apis/gateway.networking.k8s.io/v1/namespaces/shop/gateways/gw/status";
    eventually_blocking("a status PATCH of the Gateway", wait, || {
        kube.requests()
            .iter()
            .any(|r| r.method == "PATCH" && r.path == gateway_status)
    })?;
    // Writing status changes the object in the cluster, not its spec: no
    // new plan follows, so no new generation (over two status intervals).
    // This sleep is the test: nothing may happen during it, and there is
    // no event to wait for instead (an unchanged status is not written).
    std::thread::sleep(Duration::from_secs(2));
    let row = app_row(&status_at(&address)?).expect("route still stored");
    assert_eq!(row["pending_generation"], generation, "{row}");
    assert!(
        !coordinator.log_text().contains("clusters changed"),
        "{}",
        coordinator.log_text()
    );

    // A restart is a new term on the same log: its first plan finds
    // everything already stored.
    coordinator.restart()?;
    let log = eventually_blocking("the first plan after the restart", wait, || {
        let log = coordinator.log_text();
        let after = log
            .split("--- restarted ---")
            .nth(1)
            .unwrap_or("")
            .to_string();
        after.contains("first plan of this term").then_some(after)
    })?;
    let first = plain(
        log.lines()
            .find(|l| l.contains("first plan of this term"))
            .expect("found above"),
    );
    assert!(
        first.contains("to_apply=0") && first.contains("to_delete=0"),
        "{first}"
    );
    let row = app_row(&status_at(&address)?).expect("route still stored");
    assert_eq!(row["pending_generation"], generation, "{row}");

    // A route deleted in the cluster is deleted from switchyard.
    kube.delete(GW, "HTTPRoute", "shop", "app");
    eventually_blocking("route shop/app gone from status", wait, || {
        let row = app_row(&status_at(&address)?);
        anyhow::ensure!(row.is_none(), "still there: {row:?}");
        Ok(())
    })?;
    Ok(())
}

#[test]
fn an_unreadable_kubeconfig_stops_the_coordinator_before_it_starts() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let missing = dir.path().join("missing.yaml");
    let data = dir.path().join("data");
    let out = support::cli(&[
        "coordinator",
        "--id",
        "1",
        "--peers",
        "1=127.0.0.1:1",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        &data.to_string_lossy(),
        "--kubernetes",
        &format!("{}#ctx", missing.display()),
        "--insecure",
    ])?;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("--kubernetes"), "{}", out.stderr);
    assert!(!out.stdout.contains("LISTENING"), "{}", out.stdout);
    Ok(())
}
