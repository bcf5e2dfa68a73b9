//! ServiceExport status on the fake API server (server-side apply of
//! `status`): the Multi-Cluster Services API's `Valid` and `Conflict`
//! conditions (KEP-1645 "ServiceExportConflict"), written to every export
//! of every cluster, the younger of two clashing exports `Conflict=True`
//! naming the winner, and cleared again once the clash is gone.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

mod live_support;

use live_support::mcs::{export, exporting_shop};
use live_support::{Clients, WAIT, fleet, publish_clean, watching_sources};
use serde_json::{Value, json};
use switchyard_kubeconfig::live::{DesiredState, StatusPublisher};
use switchyard_proto::model::CONTROLLER_NAME;
use switchyard_test_support::eventually;
use switchyard_test_support::fake_kube::FakeApiServer;
use switchyard_test_support::fixtures::{service, shop};
use tokio::sync::watch;

const LEADING: fn() -> Option<u64> = || Some(4);
const MCS: &str = "multicluster.x-k8s.io/v1alpha1";

/// `(status, reason, message)` of condition `type_` of `shop/blue`'s
/// ServiceExport in `server`.
fn export_condition(server: &FakeApiServer, type_: &str) -> (String, String, String) {
    let object = server.get(MCS, "ServiceExport", "shop", "blue").unwrap();
    let conditions = object["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let c: &Value = conditions
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap_or_else(|| panic!("no {type_} in {object}"));
    let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    (text("status"), text("reason"), text("message"))
}

/// The merged state once `pred` holds for it.
async fn state_where(
    rx: &watch::Receiver<Option<DesiredState>>,
    what: &str,
    pred: impl Fn(&DesiredState) -> bool,
) -> DesiredState {
    eventually(what, WAIT, async || rx.borrow().clone().filter(|s| pred(s)))
        .await
        .unwrap()
}

#[tokio::test]
async fn service_export_conflict_the_younger_clashing_export_says_why_until_it_is_fixed() {
    // East exports blue (port 80, unnamed) first; west's blue names port
    // 80 "web": a clash, so west's export is left out of the import.
    let east = FakeApiServer::start(exporting_shop("2026-01-01T00:00:00Z")).await;
    let west_service = |name: Value| {
        service(
            "shop",
            "blue",
            json!([{"port": 80, "name": name, "protocol": "TCP"}]),
        )
    };
    let west = FakeApiServer::start(vec![
        shop::namespace(),
        west_service(json!("web")),
        shop::slice("blue-w1", "blue", "10.1.0.1", "zone-b", true),
        export("blue", "2026-01-02T00:00:00Z"),
    ])
    .await;
    let (rx, watcher) = watching_sources(vec![
        east.source("east"),
        west.source("west").endpoints_only(),
    ]);
    let mut publisher = StatusPublisher::new(
        vec![east.source("east"), west.source("west")],
        CONTROLLER_NAME,
    );

    let state = state_where(&rx, "the clash", |s| !s.export_conflicts.is_empty()).await;
    assert_eq!(state.exports.len(), 2, "{:?}", state.exports);
    publish_clean(&mut publisher, &state, &[], &fleet(1), &LEADING).await;
    let (status, reason, message) = export_condition(&west, "Conflict");
    assert_eq!((status.as_str(), reason.as_str()), ("True", "PortConflict"));
    assert!(
        message.contains("east"),
        "names the winning cluster: {message}"
    );
    assert_eq!(export_condition(&west, "Valid").0, "True");
    let (status, reason, _) = export_condition(&east, "Conflict");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "NoConflicts"));
    // Fenced like every status write: our term is on it.
    assert_eq!(
        export_condition(&east, "switchyard.io/LeaderTerm").0,
        "True"
    );

    // West's port loses its name: no clash, the condition clears.
    west.apply(west_service(Value::Null));
    let state = state_where(&rx, "no clash", |s| s.export_conflicts.is_empty()).await;
    publish_clean(&mut publisher, &state, &[], &fleet(1), &LEADING).await;
    let (status, reason, _) = export_condition(&west, "Conflict");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "NoConflicts"));
    watcher.abort();
}
