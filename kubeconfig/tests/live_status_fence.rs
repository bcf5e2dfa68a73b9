//! Status writes fenced by leadership, against a fake API server: a
//! deposed leader's stale write is refused by the newer term stored on
//! the object, a publish stops the moment the lease is gone, and cutover
//! Events carry the Gateway's `spec.infrastructure` (GEP-1867).
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

mod live_support;

use live_support::{Clients, desired_once, fleet, publish_clean};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use switchyard_kubeconfig::live::{ClusterSource, Fenced, StatusPublisher, Stopped};
use switchyard_proto::model::{CONTROLLER_NAME, RouteStatus};
use switchyard_test_support::fake_kube::FakeApiServer;
use switchyard_test_support::fixtures::{GW, shop};

fn source(server: &FakeApiServer, tag: &str) -> ClusterSource {
    ClusterSource::new("east", server.client(tag))
}

fn row(active: u64, pending: Option<u64>) -> RouteStatus {
    RouteStatus {
        namespace: "shop".into(),
        name: "app".into(),
        active_generation: Some(active),
        pending_generation: pending,
        ready: pending.is_none(),
        ..RouteStatus::default()
    }
}

#[tokio::test]
async fn a_deposed_leaders_stale_status_write_is_refused() {
    let server = FakeApiServer::start(shop::cluster()).await;
    let state = desired_once(&server).await;
    // The new leader (term 8) writes: 3 live proxies.
    let mut new_leader = StatusPublisher::new(vec![source(&server, "new")], CONTROLLER_NAME);
    let term_8 = || Some(8);
    publish_clean(&mut new_leader, &state, &[row(1, None)], &fleet(3), &term_8).await;
    let written = server.get(GW, "Gateway", "shop", "gw").unwrap();
    // The old leader (term 7) still believes it leads and has a stale
    // view (no live proxy): its writes are refused, it stops.
    let mut old_leader = StatusPublisher::new(vec![source(&server, "old")], CONTROLLER_NAME);
    let term_7 = || Some(7);
    let out = old_leader
        .publish(&state, &[row(1, Some(2))], &fleet(0), &term_7)
        .await;
    assert_eq!(
        out.stopped,
        Some(Stopped::Fenced(Fenced { stored: 8, ours: 7 }))
    );
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let patches_by_old = server
        .requests()
        .iter()
        .filter(|r| r.client.as_deref() == Some("old") && r.method != "GET")
        .count();
    assert_eq!(patches_by_old, 0, "the deposed leader wrote nothing");
    assert_eq!(server.get(GW, "Gateway", "shop", "gw").unwrap(), written);
    assert!(server.events().is_empty());
}

#[tokio::test]
async fn a_publish_stops_at_the_first_write_after_leadership_is_gone() {
    let server = FakeApiServer::start(shop::cluster()).await;
    let state = desired_once(&server).await;
    let asked = AtomicUsize::new(0);
    // Leading for the check at the start and two writes, then not.
    let lease = || (asked.fetch_add(1, Ordering::SeqCst) < 3).then_some(1);
    let mut publisher = StatusPublisher::new(vec![source(&server, "a")], CONTROLLER_NAME);
    let out = publisher
        .publish(&state, &[row(1, None)], &fleet(3), &lease)
        .await;
    assert_eq!(out.stopped, Some(Stopped::NotLeading));
    let patches = server
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH")
        .count();
    assert_eq!(patches, 2, "class and Gateway written, the route not");
    assert_eq!(
        asked.load(Ordering::SeqCst),
        4,
        "nothing asked after the no"
    );
    let route = server.get(GW, "HTTPRoute", "shop", "app").unwrap();
    assert!(route.get("status").is_none(), "{route}");
    // Not leading at all: not even a read.
    let before = server.requests().len();
    let never = || None;
    let out = publisher
        .publish(&state, &[row(1, None)], &fleet(3), &never)
        .await;
    assert_eq!(out.stopped, Some(Stopped::NotLeading));
    assert_eq!(server.requests().len(), before);
}

#[tokio::test]
async fn cutover_events_carry_the_gateways_infrastructure_gep_1867_and_are_created_once() {
    let mut objects = shop::cluster();
    for o in &mut objects {
        if o["kind"] == "Gateway" && o["metadata"]["name"] == "gw" {
            o["spec"]["infrastructure"] = json!({
                "labels": {"team": "shop"},
                "annotations": {"example.com/owner": "payments"}
            });
        }
    }
    let server = FakeApiServer::start(objects).await;
    let state = desired_once(&server).await;
    let lease = || Some(1);
    let mut publisher = StatusPublisher::new(vec![source(&server, "a")], CONTROLLER_NAME);
    publish_clean(&mut publisher, &state, &[row(1, None)], &fleet(3), &lease).await;
    assert!(server.events().is_empty(), "no transition seen yet");
    publish_clean(
        &mut publisher,
        &state,
        &[row(1, Some(2))],
        &fleet(3),
        &lease,
    )
    .await;
    publish_clean(&mut publisher, &state, &[row(2, None)], &fleet(3), &lease).await;
    let events = server.events();
    let reasons: Vec<&str> = events
        .iter()
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["CutoverCommitted", "CutoverStarted"], "by name");
    for e in &events {
        assert_eq!(e["metadata"]["labels"]["team"], "shop");
        assert_eq!(
            e["metadata"]["annotations"]["example.com/owner"],
            "payments"
        );
        assert_eq!(e["regarding"]["kind"], "HTTPRoute");
        assert_eq!(e["regarding"]["name"], "app");
    }
    // A new leader that sees the same commit again creates nothing new.
    let mut next = StatusPublisher::new(vec![source(&server, "b")], CONTROLLER_NAME);
    publish_clean(&mut next, &state, &[row(1, Some(2))], &fleet(3), &lease).await;
    publish_clean(&mut next, &state, &[row(2, None)], &fleet(3), &lease).await;
    assert_eq!(server.events().len(), 2);
}
