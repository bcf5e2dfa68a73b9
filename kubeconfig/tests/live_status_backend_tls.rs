//! BackendTLSPolicy status on a live cluster, through the watchers and the
//! status publisher against a fake API server with server-side apply
//! semantics: each served policy gets one `status.ancestors` entry of
//! ours per Gateway of ours its Service is routed from, with `Accepted`
//! and `ResolvedRefs` as the model's rule decides them (a valid CA, a
//! missing CA ConfigMap, the newer of two policies on one Service);
//! another controller's entries stay; an unchanged status is not written
//! again; a policy served from its last good version reports that
//! version's generation; and an entry of ours on a policy no longer
//! served is swept.
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

mod live_support;

use live_support::backend_tls::{ca_config_map, condition, our_ancestors, policy, shop_with};
use live_support::{Clients, WAIT, desired_once, fleet, publish_clean, watching};
use serde_json::{Value, json};
use std::time::Duration;
use switchyard_kubeconfig::live::{FIELD_MANAGER, REQUIRED_PERMISSIONS, StatusPublisher};
use switchyard_proto::model::{CONTROLLER_NAME, Kind};
use switchyard_test_support::eventually;
use switchyard_test_support::fake_kube::FakeApiServer;
use switchyard_test_support::fixtures::{GW, OTHER_CONTROLLER};

const LEADING: fn() -> Option<u64> = || Some(1);

const STATUS_PATH: &str = "/apis/gateway.networking.k8s.io/v1/namespaces/shop/backendtlspolicies";

/// Another controller's ancestor entry, as it wrote it.
fn theirs() -> Value {
    json!({"controllerName": OTHER_CONTROLLER,
           "ancestorRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                           "namespace": "shop", "name": "other"},
           "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                           "message": "theirs", "lastTransitionTime": "2020-01-01T00:00:00Z"}]})
}

/// Publishes once, as the leader of term 1, what the watchers read from
/// `server`; returns the publisher for another round.
async fn publish_once(server: &FakeApiServer) -> StatusPublisher {
    let state = desired_once(server).await;
    let mut publisher = StatusPublisher::new(vec![server.source("east")], CONTROLLER_NAME)
        .verify_every(Duration::ZERO);
    publish_clean(&mut publisher, &state, &[], &fleet(1), &LEADING).await;
    publisher
}

fn stored_policy(server: &FakeApiServer, name: &str) -> Value {
    server.get(GW, "BackendTLSPolicy", "shop", name).unwrap()
}

fn status_patches(server: &FakeApiServer, name: &str) -> usize {
    let path = format!("{STATUS_PATH}/{name}/status");
    server
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH" && r.path == path)
        .count()
}

#[tokio::test]
async fn a_policy_with_a_valid_ca_is_accepted_on_the_gateway_its_route_attaches_to() {
    let mut tls = policy("tls", "blue", "ca", "2026-01-01T00:00:00Z");
    tls["status"] = json!({"ancestors": [theirs()]});
    let server = FakeApiServer::start(shop_with(vec![ca_config_map("ca"), tls])).await;
    let publisher = publish_once(&server).await;

    let stored = stored_policy(&server, "tls");
    let ours = our_ancestors(&stored);
    assert_eq!(ours.len(), 1, "one Gateway of ours: {stored}");
    assert_eq!(
        ours[0]["ancestorRef"],
        json!({"group": "gateway.networking.k8s.io", "kind": "Gateway",
               "namespace": "shop", "name": "gw"})
    );
    assert_eq!(
        condition(&ours[0], "Accepted"),
        ("True".into(), "Accepted".into(), 4)
    );
    assert_eq!(
        condition(&ours[0], "ResolvedRefs"),
        ("True".into(), "ResolvedRefs".into(), 4)
    );
    // The other controller's entry is kept as it was, first.
    assert_eq!(stored["status"]["ancestors"][0], theirs());

    // Written by server-side apply, as our field manager, with a
    // permission the ClusterRole grants.
    let path = format!("{STATUS_PATH}/tls/status");
    let requests = server.requests();
    let patch = requests
        .iter()
        .find(|r| r.method == "PATCH" && r.path == path)
        .unwrap();
    assert_eq!(
        patch.content_type.as_deref(),
        Some("application/apply-patch+yaml")
    );
    assert_eq!(
        patch.query.get("fieldManager").map(String::as_str),
        Some(FIELD_MANAGER)
    );
    assert_eq!(patch.query.get("force").map(String::as_str), Some("true"));
    for r in requests
        .iter()
        .filter(|r| r.path.contains("backendtlspolicies"))
    {
        let (g, res, v) = r.permission().unwrap();
        assert!(
            REQUIRED_PERMISSIONS.contains(&(g.as_str(), res.as_str(), v.as_str())),
            "{g} {res} {v} is not granted"
        );
    }

    // Read again (verify_every is zero): nothing changed, nothing written.
    let mut publisher = publisher;
    let state = desired_once(&server).await;
    publish_clean(&mut publisher, &state, &[], &fleet(1), &LEADING).await;
    assert_eq!(status_patches(&server, "tls"), 1);
}

#[tokio::test]
async fn a_policy_whose_ca_config_map_is_missing_is_not_accepted_and_its_ref_unresolved() {
    let tls = policy("tls", "blue", "no-such-ca", "2026-01-01T00:00:00Z");
    let server = FakeApiServer::start(shop_with(vec![ca_config_map("ca"), tls])).await;
    publish_once(&server).await;

    let ours = our_ancestors(&stored_policy(&server, "tls"));
    assert_eq!(ours.len(), 1, "{ours:?}");
    assert_eq!(ours[0]["ancestorRef"]["name"], "gw");
    assert_eq!(
        condition(&ours[0], "ResolvedRefs"),
        ("False".into(), "InvalidCACertificateRef".into(), 4)
    );
    assert_eq!(
        condition(&ours[0], "Accepted"),
        ("False".into(), "NoValidCACertificate".into(), 4)
    );
}

#[tokio::test]
async fn of_two_policies_on_one_service_the_newer_is_conflicted() {
    let older = policy("older", "blue", "ca", "2026-01-01T00:00:00Z");
    let newer = policy("newer", "blue", "ca", "2026-02-01T00:00:00Z");
    // Listed in name order, the newer first: age decides, not order.
    let server = FakeApiServer::start(shop_with(vec![ca_config_map("ca"), newer, older])).await;
    publish_once(&server).await;

    let older = our_ancestors(&stored_policy(&server, "older"));
    let newer = our_ancestors(&stored_policy(&server, "newer"));
    assert_eq!((older.len(), newer.len()), (1, 1));
    assert_eq!(
        condition(&older[0], "Accepted"),
        ("True".into(), "Accepted".into(), 4)
    );
    assert_eq!(
        condition(&newer[0], "Accepted"),
        ("False".into(), "Conflicted".into(), 4)
    );
    // Its references resolve all the same.
    assert_eq!(condition(&newer[0], "ResolvedRefs").0, "True");
}

#[tokio::test]
async fn a_policy_no_longer_served_loses_our_entry_and_keeps_theirs() {
    // An earlier leader wrote our entry on a policy of Service
    // `unrelated`, which no route of ours sends to (any more).
    let mut stale = policy("stale", "unrelated", "ca", "2026-01-01T00:00:00Z");
    let mut ours = theirs();
    ours["controllerName"] = json!(CONTROLLER_NAME);
    ours["ancestorRef"]["name"] = json!("gw");
    stale["status"] = json!({"ancestors": [theirs(), ours]});
    let server = FakeApiServer::start(shop_with(vec![ca_config_map("ca"), stale])).await;
    let state = desired_once(&server).await;
    assert!(
        state.resources.iter().all(|r| r.meta().name != "stale"),
        "the policy is not served"
    );
    // A new leader's first publish sweeps it.
    let mut publisher = StatusPublisher::new(vec![server.source("east")], CONTROLLER_NAME);
    publish_clean(&mut publisher, &state, &[], &fleet(1), &LEADING).await;

    let stored = stored_policy(&server, "stale");
    assert_eq!(our_ancestors(&stored), Vec::<Value>::new(), "{stored}");
    assert_eq!(stored["status"]["ancestors"], json!([theirs()]));
}

#[tokio::test]
async fn a_policy_served_from_its_last_good_version_reports_that_generation() {
    let good = policy("tls", "blue", "ca", "2026-01-01T00:00:00Z");
    let server = FakeApiServer::start(shop_with(vec![ca_config_map("ca"), good.clone()])).await;
    let (rx, task) = watching(&server);
    eventually("the policy served", WAIT, async || {
        let state = rx.borrow().clone()?;
        state
            .resources
            .iter()
            .any(|r| r.kind() == Kind::BackendTLSPolicy)
            .then_some(())
    })
    .await
    .unwrap();
    // Generation 5 cannot be read (a Hostname subjectAltName without its
    // hostname): generation 4 keeps being served.
    let mut bad = good;
    bad["metadata"]["generation"] = json!(5);
    bad["spec"]["validation"]["subjectAltNames"] = json!([{"type": "Hostname"}]);
    server.apply(bad);
    let state = eventually("the new version rejected", WAIT, async || {
        let state = rx.borrow().clone()?;
        state
            .rejected
            .iter()
            .any(|r| r.key.kind == Kind::BackendTLSPolicy)
            .then_some(state)
    })
    .await
    .unwrap();
    task.abort();
    let mut publisher = StatusPublisher::new(vec![server.source("east")], CONTROLLER_NAME);
    publish_clean(&mut publisher, &state, &[], &fleet(1), &LEADING).await;

    let ours = our_ancestors(&stored_policy(&server, "tls"));
    assert_eq!(ours.len(), 1, "{ours:?}");
    assert_eq!(
        condition(&ours[0], "Accepted"),
        ("True".into(), "Accepted".into(), 4)
    );
}
