//! GatewayClass and Gateway status as the publisher writes it to a fake
//! API server that applies status with server-side apply semantics, one
//! test per Gateway API rule, named after the conformance test or spec
//! clause it follows.
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

mod live_support;

use live_support::{Clients, desired_once, fleet, publish_clean};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use switchyard_kubeconfig::live::{
    ProxyService, SUPPORTED_FEATURES, StatusPublisher, UNCLAIMED_FEATURES, WriteOutcome,
    write_class_status,
};
use switchyard_proto::model::{CONTROLLER_NAME, ObjectName};
use switchyard_test_support::fake_kube::FakeApiServer;
use switchyard_test_support::fixtures::{GW, gateway, listener, shop};

const LEADING: fn() -> Option<u64> = || Some(1);

fn proxy_service(ingress: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "proxy", "namespace": "switchyard"},
           "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
           "status": {"loadBalancer": {"ingress": ingress}}})
}

fn publisher(server: &FakeApiServer) -> StatusPublisher {
    StatusPublisher::new(vec![server.source("east")], CONTROLLER_NAME).with_proxy_service(Some(
        ProxyService {
            cluster: "east".into(),
            service: ObjectName::new("switchyard", "proxy"),
        },
    ))
}

/// `shop` with Gateway `gw` replaced by one with `spec`'s listeners and
/// extra fields, and an assigned proxy address.
async fn cluster_with_gateway(spec: Value) -> FakeApiServer {
    let mut objects = shop::cluster();
    objects.retain(|o| !(o["kind"] == "Gateway" && o["metadata"]["name"] == "gw"));
    let mut gateway = shop::gateway();
    for (k, v) in spec.as_object().unwrap() {
        gateway["spec"][k] = v.clone();
    }
    objects.push(gateway);
    objects.push(proxy_service(json!([{"ip": "203.0.113.7"}])));
    FakeApiServer::start(objects).await
}

async fn published_gateway(server: &FakeApiServer) -> Value {
    let state = desired_once(server).await;
    publish_clean(&mut publisher(server), &state, &[], &fleet(3), &LEADING).await;
    server.get(GW, "Gateway", "shop", "gw").unwrap()["status"].clone()
}

fn condition<'a>(conditions: &'a Value, type_: &str) -> &'a Value {
    conditions
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap_or_else(|| panic!("no {type_} in {conditions}"))
}

fn listener_status<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name)
        .unwrap_or_else(|| panic!("no listener {name} in {status}"))
}

#[tokio::test]
async fn gatewayclass_accepted_with_supported_features_gep_2162_and_another_controllers_untouched()
{
    let server = cluster_with_gateway(json!({})).await;
    let state = desired_once(&server).await;
    publish_clean(&mut publisher(&server), &state, &[], &fleet(3), &LEADING).await;
    let class = server.get(GW, "GatewayClass", "", "switchyard").unwrap();
    let accepted = condition(&class["status"]["conditions"], "Accepted");
    assert_eq!(accepted["status"], "True");
    assert_eq!(accepted["observedGeneration"], 1);
    let features: Vec<&str> = class["status"]["supportedFeatures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(features, SUPPORTED_FEATURES);
    // Another controller's class: read, never written.
    let before = server.requests().len();
    let outcome = write_class_status(&server.client("t"), "east", "other", CONTROLLER_NAME, 1)
        .await
        .unwrap();
    assert_eq!(outcome, WriteOutcome::Unchanged);
    assert!(
        server.requests()[before..]
            .iter()
            .all(|r| r.method == "GET")
    );
    let other = server.get(GW, "GatewayClass", "", "other").unwrap();
    assert!(other.get("status").is_none(), "{other}");
}

#[test]
fn supported_features_are_the_conformance_cases_features_but_the_unclaimed() {
    // The cases in tests/data/gateway-api/ name the features they need;
    // every one is claimed or listed as unclaimed with a reason.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/gateway-api");
    let mut named = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let case: Value = yaml_serde::from_str(&std::fs::read_to_string(&path).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            for f in case["features"].as_array().into_iter().flatten() {
                named.insert(f.as_str().unwrap().to_string());
            }
        }
    }
    let mut ours: BTreeSet<String> = SUPPORTED_FEATURES.iter().map(|f| f.to_string()).collect();
    ours.extend(UNCLAIMED_FEATURES.iter().map(|(f, _)| f.to_string()));
    assert_eq!(ours, named);
}

#[tokio::test]
async fn gateway_invalid_route_kind_narrows_supported_kinds_and_resolved_refs_false() {
    // Conformance GatewayInvalidRouteKind.
    let mut only_invalid = listener("only-invalid", 8080, "HTTP");
    only_invalid["allowedRoutes"] = json!({"kinds": [{"kind": "FooRoute"}]});
    let mut mixed = listener("mixed", 8081, "HTTP");
    mixed["allowedRoutes"] = json!({"kinds": [{"kind": "FooRoute"}, {"kind": "HTTPRoute"}]});
    let server = cluster_with_gateway(json!({"listeners": [only_invalid, mixed]})).await;
    let status = published_gateway(&server).await;
    let only = listener_status(&status, "only-invalid");
    assert_eq!(only["supportedKinds"], json!([]));
    let resolved = condition(&only["conditions"], "ResolvedRefs");
    assert_eq!(
        (&resolved["status"], &resolved["reason"]),
        (&json!("False"), &json!("InvalidRouteKinds"))
    );
    let mixed = listener_status(&status, "mixed");
    assert_eq!(
        mixed["supportedKinds"],
        json!([{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}])
    );
    assert_eq!(
        condition(&mixed["conditions"], "ResolvedRefs")["reason"],
        "InvalidRouteKinds"
    );
}

#[tokio::test]
async fn gateway_with_attached_routes_sets_attached_routes_on_every_listener() {
    // Conformance GatewayWithAttachedRoutes: every listener reports its
    // count, unsupported ones (0) included.
    let listeners = json!([
        listener("http", 80, "HTTP"),
        listener("other-http", 8080, "HTTP"),
        listener("https", 443, "HTTPS")
    ]);
    let server = cluster_with_gateway(json!({ "listeners": listeners })).await;
    let status = published_gateway(&server).await;
    // shop's route names gw without a sectionName: both HTTP listeners.
    assert_eq!(listener_status(&status, "http")["attachedRoutes"], 1);
    assert_eq!(listener_status(&status, "other-http")["attachedRoutes"], 1);
    assert_eq!(listener_status(&status, "https")["attachedRoutes"], 0);
}

#[tokio::test]
async fn gateway_addresses_come_from_the_proxy_service_and_address_not_assigned_until_then() {
    let server = cluster_with_gateway(json!({})).await;
    server.apply(proxy_service(json!([])));
    let state = desired_once(&server).await;
    let mut publisher = publisher(&server);
    publish_clean(&mut publisher, &state, &[], &fleet(3), &LEADING).await;
    let status = server.get(GW, "Gateway", "shop", "gw").unwrap()["status"].clone();
    let programmed = condition(&status["conditions"], "Programmed");
    assert_eq!(
        (&programmed["status"], &programmed["reason"]),
        (&json!("False"), &json!("AddressNotAssigned"))
    );
    assert_eq!(status["addresses"], json!([]));
    // The load balancer assigns an address: the next publish reports it.
    server.apply(proxy_service(
        json!([{"ip": "203.0.113.7"}, {"hostname": "lb.example.net"}]),
    ));
    publish_clean(&mut publisher, &state, &[], &fleet(3), &LEADING).await;
    let status = server.get(GW, "Gateway", "shop", "gw").unwrap()["status"].clone();
    assert_eq!(
        status["addresses"],
        json!([{"type": "IPAddress", "value": "203.0.113.7"},
               {"type": "Hostname", "value": "lb.example.net"}])
    );
    assert_eq!(
        condition(&status["conditions"], "Programmed")["status"],
        "True"
    );
}

#[tokio::test]
async fn gateway_static_addresses_unsupported_type_is_not_accepted_and_so_not_programmed() {
    // Conformance GatewayStaticAddresses, first step; and "a Gateway not
    // Accepted is not Programmed".
    let server = cluster_with_gateway(json!({"addresses": [
        {"type": "test/fake-invalid-type", "value": "fake address"}
    ]}))
    .await;
    let status = published_gateway(&server).await;
    let accepted = condition(&status["conditions"], "Accepted");
    assert_eq!(
        (&accepted["status"], &accepted["reason"]),
        (&json!("False"), &json!("UnsupportedAddress"))
    );
    let programmed = condition(&status["conditions"], "Programmed");
    assert_eq!(programmed["status"], "False");
    assert_eq!(programmed["reason"], "Invalid");
    assert_eq!(status["addresses"], json!([]));
}

#[tokio::test]
async fn gateway_static_addresses_a_requested_address_of_the_service_is_honoured() {
    let server = cluster_with_gateway(json!({"addresses": [
        {"type": "IPAddress", "value": "203.0.113.7"}
    ]}))
    .await;
    server.apply(proxy_service(
        json!([{"ip": "203.0.113.7"}, {"ip": "203.0.113.8"}]),
    ));
    let status = published_gateway(&server).await;
    assert_eq!(
        status["addresses"],
        json!([{"type": "IPAddress", "value": "203.0.113.7"}])
    );
    assert_eq!(
        condition(&status["conditions"], "Programmed")["status"],
        "True"
    );
}

/// `(status, reason)` of condition `type_` of listener `name`.
fn listener_condition(status: &Value, name: &str, type_: &str) -> (String, String) {
    let c = condition(&listener_status(status, name)["conditions"], type_);
    (
        c["status"].as_str().unwrap().to_string(),
        c["reason"].as_str().unwrap().to_string(),
    )
}

#[tokio::test]
async fn gateway_listener_conflicted_the_younger_gateways_listener_on_a_taken_port_and_hostname() {
    // Listener compatibility (GEP-1713, merged Gateways): two of our
    // Gateways with a hostname-less HTTP listener on :80 clash; the older
    // keeps the port, the younger's listener is Conflicted/HostnameConflict
    // and not Programmed (the router does not serve it either).
    let server = cluster_with_gateway(json!({})).await;
    let mut older = shop::gateway();
    older["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
    server.apply(older);
    let mut younger = gateway(
        "shop",
        "late",
        "switchyard",
        json!([listener("http", 80, "HTTP")]),
    );
    younger["metadata"]["creationTimestamp"] = json!("2026-06-01T00:00:00Z");
    server.apply(younger);
    let state = desired_once(&server).await;
    publish_clean(&mut publisher(&server), &state, &[], &fleet(3), &LEADING).await;
    let gw = server.get(GW, "Gateway", "shop", "gw").unwrap()["status"].clone();
    let late = server.get(GW, "Gateway", "shop", "late").unwrap()["status"].clone();
    assert_eq!(
        listener_condition(&gw, "http", "Conflicted"),
        ("False".into(), "NoConflicts".into())
    );
    assert_eq!(
        listener_condition(&gw, "http", "Programmed"),
        ("True".into(), "Programmed".into())
    );
    assert_eq!(
        listener_condition(&late, "http", "Conflicted"),
        ("True".into(), "HostnameConflict".into())
    );
    assert_eq!(
        listener_condition(&late, "http", "Programmed"),
        ("False".into(), "Invalid".into())
    );
    let message = condition(&listener_status(&late, "http")["conditions"], "Conflicted")["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("shop/gw"), "names the winner: {message}");
}

#[tokio::test]
async fn gateway_listener_programmed_only_when_the_proxies_bound_its_port_else_port_unavailable() {
    let listeners = json!([
        listener("http", 80, "HTTP"),
        listener("admin", 8080, "HTTP")
    ]);
    let server = cluster_with_gateway(json!({ "listeners": listeners })).await;
    let state = desired_once(&server).await;
    let mut publisher = publisher(&server);
    // proxy-1 cannot bind :80; nobody has a socket for :8080.
    let mut proxies = fleet(2);
    if let Some(sockets) = proxies[1].listeners.as_mut() {
        sockets[0].bound = false;
        sockets[0].error = Some("Address in use (os error 98)".into());
    }
    publish_clean(&mut publisher, &state, &[], &proxies, &LEADING).await;
    let status = server.get(GW, "Gateway", "shop", "gw").unwrap()["status"].clone();
    assert_eq!(
        listener_condition(&status, "http", "Programmed"),
        ("False".into(), "PortUnavailable".into())
    );
    let message = condition(
        &listener_status(&status, "http")["conditions"],
        "Programmed",
    )["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("proxy-1") && message.contains("Address in use"),
        "{message}"
    );
    assert_eq!(
        listener_condition(&status, "admin", "Programmed"),
        ("False".into(), "PortUnavailable".into())
    );
    // The proxy binds it: the next publish says Programmed.
    let bound = fleet(2);
    publish_clean(&mut publisher, &state, &[], &bound, &LEADING).await;
    let status = server.get(GW, "Gateway", "shop", "gw").unwrap()["status"].clone();
    assert_eq!(
        listener_condition(&status, "http", "Programmed"),
        ("True".into(), "Programmed".into())
    );
    // Live proxies that never reported their sockets: not claimed either way.
    let silent: Vec<_> = bound
        .into_iter()
        .map(|mut p| {
            p.listeners = None;
            p
        })
        .collect();
    publish_clean(&mut publisher, &state, &[], &silent, &LEADING).await;
    let status = server.get(GW, "Gateway", "shop", "gw").unwrap()["status"].clone();
    assert_eq!(
        listener_condition(&status, "http", "Programmed"),
        ("False".into(), "Pending".into())
    );
}
