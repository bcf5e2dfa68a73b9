//! A cluster whose Gateway API release has no BackendTLSPolicy (its list
//! is answered `404`) is a cluster without such policies, not a failing
//! one: its routes are served, the kind is reported absent, the status
//! publisher's sweep skips it, and nothing is logged as a warning or an
//! error — an operator of an older release must not be told something is
//! wrong.
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

mod live_support;

use live_support::logs::Logs;
use live_support::{Clients, desired_once, fleet, publish_clean};
use switchyard_kubeconfig::live::StatusPublisher;
use switchyard_proto::model::{CONTROLLER_NAME, Kind};
use switchyard_test_support::fake_kube::FakeApiServer;
use switchyard_test_support::fixtures::{GW, shop};

const LEADING: fn() -> Option<u64> = || Some(1);

#[tokio::test]
async fn a_cluster_without_the_backend_tls_policy_crd_is_served_without_a_warning() {
    let logs = Logs::capture();
    let server = FakeApiServer::start(shop::cluster()).await;
    server.remove_kind(GW, "BackendTLSPolicy");

    let state = desired_once(&server).await;
    assert!(
        state
            .resources
            .iter()
            .any(|r| r.kind() == Kind::HTTPRoute && r.meta().name == "app"),
        "the route is served"
    );
    let cluster = &state.clusters[0];
    assert!(
        cluster.listed && cluster.last_error.is_none(),
        "{cluster:?}"
    );
    // (The fake has no ServiceExports either: absent too.)
    assert!(
        cluster
            .absent_kinds
            .contains(&"BackendTLSPolicy".to_string()),
        "{cluster:?}"
    );

    let mut publisher = StatusPublisher::new(vec![server.source("east")], CONTROLLER_NAME);
    publish_clean(&mut publisher, &state, &[], &fleet(1), &LEADING).await;

    let asked = server
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/backendtlspolicies"))
        .count();
    assert!(asked >= 2, "the watcher and the sweep asked ({asked})");
    // The capture sees the watcher's own lines (so an empty list below
    // means nothing was warned, not that nothing was captured).
    assert!(
        logs.lines().iter().any(|l| l.contains("404")),
        "{:#?}",
        logs.lines()
    );
    assert_eq!(logs.warnings(), Vec::<String>::new());
}
