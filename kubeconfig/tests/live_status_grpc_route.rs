//! On a live cluster a GRPCRoute gets our `status.parents` entry exactly
//! as its twin as an HTTPRoute does: the conformance suite waits for it
//! (`Accepted` `True`) before its first call.
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

mod live_support;

use live_support::{Clients, desired_once, fleet, publish_clean};
use serde_json::Value;
use switchyard_kubeconfig::live::StatusPublisher;
use switchyard_proto::model::CONTROLLER_NAME;
use switchyard_test_support::fake_kube::FakeApiServer;
use switchyard_test_support::fixtures::{GW, shop};

const LEADING: fn() -> Option<u64> = || Some(1);

/// shop's cluster with its route `app` as `kind`.
fn cluster_with_route_of_kind(kind: &str) -> Vec<Value> {
    let mut objects = shop::cluster();
    for o in &mut objects {
        if o["kind"] == "HTTPRoute" {
            o["kind"] = kind.into();
        }
    }
    objects
}

/// Our entries in the stored route's `status.parents`.
async fn published_entries(kind: &str) -> usize {
    let server = FakeApiServer::start(cluster_with_route_of_kind(kind)).await;
    let state = desired_once(&server).await;
    assert!(
        state.resources.iter().any(|r| r.meta().name == "app"),
        "the {kind} is served"
    );
    let mut publisher = StatusPublisher::new(vec![server.source("east")], CONTROLLER_NAME);
    publish_clean(&mut publisher, &state, &[], &fleet(1), &LEADING).await;
    let route = server.get(GW, kind, "shop", "app").unwrap();
    route["status"]["parents"].as_array().map_or(0, |parents| {
        parents
            .iter()
            .filter(|p| p["controllerName"] == CONTROLLER_NAME)
            .count()
    })
}

#[tokio::test]
async fn a_grpc_routes_status_is_written_as_an_http_routes_is() {
    assert_eq!(published_entries("HTTPRoute").await, 1);
    assert_eq!(published_entries("GRPCRoute").await, 1);
}

#[tokio::test]
async fn a_grpc_route_left_out_for_its_name_says_so_in_its_status() {
    // shop's HTTPRoute `app` and a GRPCRoute of the same name, both on our
    // Gateway: the HTTPRoute is served, the GRPCRoute is not, and its
    // status says why (the operator sees it in `kubectl get grpcroute`,
    // not only in the coordinators' log).
    let mut objects = shop::cluster();
    let mut twin = objects
        .iter()
        .find(|o| o["kind"] == "HTTPRoute")
        .unwrap()
        .clone();
    twin["kind"] = "GRPCRoute".into();
    twin["metadata"]["generation"] = 3.into();
    objects.push(twin);
    let server = FakeApiServer::start(objects).await;
    let state = desired_once(&server).await;
    assert_eq!(state.route_name_collisions.len(), 1);
    let mut publisher = StatusPublisher::new(vec![server.source("east")], CONTROLLER_NAME);
    publish_clean(&mut publisher, &state, &[], &fleet(1), &LEADING).await;

    let ours = |route: &Value| -> Vec<Value> {
        route["status"]["parents"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p["controllerName"] == CONTROLLER_NAME)
            .collect()
    };
    let grpc = ours(&server.get(GW, "GRPCRoute", "shop", "app").unwrap());
    assert_eq!(grpc.len(), 1, "{grpc:#?}");
    let accepted = grpc[0]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Accepted")
        .unwrap()
        .clone();
    assert_eq!(accepted["status"], "False", "{accepted}");
    assert_eq!(accepted["reason"], "RouteNameTaken", "{accepted}");
    assert_eq!(accepted["observedGeneration"], 3, "{accepted}");
    let message = accepted["message"].as_str().unwrap();
    assert!(message.contains("HTTPRoute shop/app"), "{message}");
    // The HTTPRoute is served and accepted.
    let http = ours(&server.get(GW, "HTTPRoute", "shop", "app").unwrap());
    assert_eq!(http.len(), 1);
    assert!(
        http[0]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Accepted" && c["status"] == "True"),
        "{http:#?}"
    );
}
