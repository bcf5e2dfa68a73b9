//! Two fake clusters: the endpoints of one exported Service in both serve
//! its clusterset ServiceImport, each tagged with its cluster and zone; an
//! endpoints-only cluster is never asked for Gateway API objects; a
//! cluster that goes away keeps its endpoints and is reported unreachable
//! with the error. Also `connect` from a kubeconfig file with two
//! contexts, which name one cluster by its API server.

mod live_support;

use live_support::mcs::{export, exporting_shop};
use live_support::{Clients, WAIT, fast};
use switchyard_kubeconfig::live::{DesiredState, connect, watch_clusters_with};
use switchyard_proto::model::{CONTROLLER_NAME, EndpointSlice, Resource};
use switchyard_test_support::eventually;
use switchyard_test_support::fake_kube::FakeApiServer;
use switchyard_test_support::fixtures::shop;
use tokio::sync::watch;

fn slices(state: &DesiredState) -> Vec<(String, String, String, String)> {
    state
        .resources
        .iter()
        .filter_map(|r| match r {
            Resource::EndpointSlice(EndpointSlice {
                meta,
                endpoints,
                cluster,
                ..
            }) => Some((
                meta.name.clone(),
                cluster.clone().unwrap_or_default(),
                endpoints[0].addresses[0].clone(),
                endpoints[0].zone.clone().unwrap_or_default(),
            )),
            _ => None,
        })
        .collect()
}

fn t(a: &str, b: &str, c: &str, d: &str) -> (String, String, String, String) {
    (a.into(), b.into(), c.into(), d.into())
}

#[tokio::test]
async fn two_clusters_merge_and_an_unreachable_one_keeps_its_endpoints() {
    let east = FakeApiServer::start(exporting_shop("2026-01-01T00:00:00Z")).await;
    // West serves the same exported Service from its own pods, in another
    // zone; it is watched for backends only.
    let west = FakeApiServer::start(vec![
        shop::namespace(),
        shop::service("blue"),
        shop::slice("blue-w1", "blue", "10.1.0.1", "zone-b", true),
        export("blue", "2026-01-02T00:00:00Z"),
    ])
    .await;
    let (tx, rx) = watch::channel(None);
    let sources = vec![east.source("east"), west.source("west").endpoints_only()];
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        watch_clusters_with(sources, CONTROLLER_NAME, fast(), tx, async {
            let _ = stopped.await;
        })
        .await;
    });
    let state = eventually("merged state", WAIT, async || rx.borrow().clone())
        .await
        .unwrap();
    assert_eq!(
        slices(&state),
        [
            t("blue-a1.east.clusterset", "east", "10.0.0.1", "zone-a"),
            t("blue-w1.west.clusterset", "west", "10.1.0.1", "zone-b"),
        ]
    );
    let services: Vec<String> = state
        .resources
        .iter()
        .filter(|r| matches!(r, Resource::Service(_)))
        .map(|r| r.meta().name.clone())
        .collect();
    assert_eq!(
        services,
        ["blue.clusterset"],
        "one import for both clusters"
    );
    let west_paths: Vec<String> = west.requests().into_iter().map(|r| r.path).collect();
    assert!(
        west_paths
            .iter()
            .all(|p| !p.contains("gateway.networking.k8s.io")),
        "{west_paths:?}"
    );
    for c in &state.clusters {
        assert!(c.reachable, "{c:?}");
        assert_eq!(c.contributed, ["shop/blue.clusterset"], "{c:?}");
    }

    // West goes away: its endpoints stay, it is reported unreachable.
    west.stop();
    let state = eventually("west unreachable", WAIT, async || {
        rx.borrow()
            .clone()
            .filter(|s| s.clusters.iter().any(|c| c.name == "west" && !c.reachable))
    })
    .await
    .unwrap();
    let west_health = state
        .clusters
        .iter()
        .find(|c| c.name == "west")
        .expect("west");
    let error = west_health
        .last_error
        .as_deref()
        .expect("the error is reported");
    assert!(!error.is_empty());
    assert_eq!(west_health.contributed, ["shop/blue.clusterset"]);
    assert!(
        state
            .clusters
            .iter()
            .any(|c| c.name == "east" && c.reachable)
    );
    assert!(slices(&state).contains(&t("blue-w1.west.clusterset", "west", "10.1.0.1", "zone-b")));

    // East keeps working meanwhile.
    east.apply(shop::slice("blue-a1", "blue", "10.0.0.1", "zone-a", false));
    eventually("east still watched", WAIT, async || {
        rx.borrow().clone().filter(|s| {
            s.resources.iter().any(|r| {
                matches!(r, Resource::EndpointSlice(e) if e.cluster.as_deref() == Some("east") && !e.endpoints[0].ready)
            })
        })
    })
    .await.unwrap();

    // West comes back with nothing changed: its resumed watches have no
    // event to send, and the probe marks it reachable again.
    west.resume().await;
    let state = eventually("west reachable again", WAIT, async || {
        rx.borrow()
            .clone()
            .filter(|s| s.clusters.iter().all(|c| c.reachable))
    })
    .await
    .unwrap();
    let west_health = state
        .clusters
        .iter()
        .find(|c| c.name == "west")
        .expect("west");
    assert_eq!(west_health.last_error, None);
    assert!(west.requests().iter().any(|r| r.path == "/version"));
    drop(stop);
    task.await.expect("watchers stop");
}

#[tokio::test]
async fn connect_reads_a_kubeconfig_context() {
    let server = FakeApiServer::start(shop::cluster()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config");
    let url = format!("http://{}", server.addr);
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: east\nclusters:\n- name: c\n  cluster: {{server: \"{url}\"}}\nusers:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: east\n  context: {{cluster: c, user: u}}\n- name: west\n  context: {{cluster: c, user: u}}\n"
        ),
    )
    .expect("write kubeconfig");
    let default = connect(&path, None).await.expect("current context");
    let west = connect(&path, Some("west")).await.expect("named context");
    // Both contexts reach one cluster: one id, its API server's, whatever
    // the contexts are called.
    assert_eq!(default.name, server.addr.to_string());
    assert_eq!(west.name, default.name);
    // The client really talks to the server the context names.
    let (tx, rx) = watch::channel(None);
    let task = tokio::spawn(async move {
        watch_clusters_with(
            vec![west],
            CONTROLLER_NAME,
            fast(),
            tx,
            std::future::pending::<()>(),
        )
        .await;
    });
    let state = eventually("state through the kubeconfig client", WAIT, async || {
        rx.borrow().clone()
    })
    .await
    .unwrap();
    assert_eq!(state.clusters[0].name, server.addr.to_string());
    task.abort();
    let missing = connect(&path, Some("nope"))
        .await
        .expect_err("no such context");
    assert!(missing.to_string().contains("nope"), "{missing}");
}
