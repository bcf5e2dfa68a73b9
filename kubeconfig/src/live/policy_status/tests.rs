use super::*;
use crate::parse_documents;
use serde_json::{Value, json};
use switchyard_proto::model::CONTROLLER_NAME;
use switchyard_test_support::fixtures::{self, listener};
use switchyard_test_support::listener_tls::TestCa;

/// Our Gateway `shop/gw` and another controller's `shop/other`; route
/// `shop/app` on both, to `blue` port `port`; Service `blue` with ports
/// 80 (`http`) and 443 (`https`), Service `idle` no route uses; ConfigMap
/// `ca` with a CA certificate.
fn cluster(port: u16) -> Vec<Value> {
    let ca = TestCa::new("backend-ca");
    vec![
        fixtures::gateway_class("ours", CONTROLLER_NAME),
        fixtures::gateway_class("theirs", fixtures::OTHER_CONTROLLER),
        fixtures::gateway("shop", "gw", "ours", json!([listener("http", 80, "HTTP")])),
        fixtures::gateway(
            "shop",
            "other",
            "theirs",
            json!([listener("http", 80, "HTTP")]),
        ),
        fixtures::route(
            "shop",
            "app",
            json!({"parentRefs": [{"name": "gw"}, {"name": "other"}],
                   "rules": [{"backendRefs": [{"name": "blue", "port": port}]}]}),
        ),
        fixtures::service(
            "shop",
            "blue",
            json!([{"name": "http", "port": 80}, {"name": "https", "port": 443}]),
        ),
        fixtures::service("shop", "idle", json!([{"port": 443}])),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "ca", "namespace": "shop"},
               "data": {"ca.crt": ca.cert_pem}}),
    ]
}

/// A policy `shop/<name>` (generation 3) on Service `service`, port
/// `section` if given, trusting ConfigMap `ca`.
fn policy(name: &str, service: &str, section: Option<&str>) -> Value {
    let mut target = json!({"group": "", "kind": "Service", "name": service});
    if let Some(section) = section {
        target["sectionName"] = json!(section);
    }
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "BackendTLSPolicy",
           "metadata": {"name": name, "namespace": "shop", "generation": 3},
           "spec": {"targetRefs": [target],
                    "validation": {"caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "ca"}],
                                   "hostname": "blue.shop.svc"}}})
}

fn resources(objects: Vec<Value>) -> Vec<Resource> {
    parse_documents("test", &fixtures::yaml(&objects)).unwrap()
}

fn ancestors_of(resources: &[Resource], name: &str) -> Vec<PolicyAncestorStatus> {
    let world = World::new(resources, CONTROLLER_NAME);
    let policy = resources
        .iter()
        .find_map(|r| match r {
            Resource::BackendTlsPolicy(p) if p.meta.name == name => Some(p),
            _ => None,
        })
        .unwrap();
    backend_tls_ancestors(policy, &world, CONTROLLER_NAME)
}

#[test]
fn a_policy_on_a_routed_service_is_reported_on_our_gateway_only() {
    let mut objects = cluster(80);
    objects.push(policy("tls", "blue", None));
    let all = resources(objects);
    let ancestors = ancestors_of(&all, "tls");
    assert_eq!(ancestors.len(), 1, "{ancestors:?}");
    assert_eq!(ancestors[0].gateway, ObjectName::new("shop", "gw"));
    assert_eq!(ancestors[0].controller_name, CONTROLLER_NAME);
    let summary: Vec<(&str, &str, &str, Option<i64>)> = ancestors[0]
        .conditions
        .iter()
        .map(|c| {
            (
                c.type_.as_str(),
                c.status.as_str(),
                c.reason.as_str(),
                c.observed_generation,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("Accepted", "True", "Accepted", Some(3)),
            ("ResolvedRefs", "True", "ResolvedRefs", Some(3)),
        ]
    );
}

#[test]
fn a_policy_no_served_route_sends_to_has_no_ancestor() {
    let mut objects = cluster(80);
    objects.push(policy("tls", "idle", None));
    assert_eq!(ancestors_of(&resources(objects), "tls"), []);
}

#[test]
fn a_section_name_counts_only_for_the_port_the_route_uses() {
    let mut objects = cluster(80);
    objects.push(policy("other-port", "blue", Some("https")));
    objects.push(policy("this-port", "blue", Some("http")));
    let all = resources(objects);
    assert_eq!(ancestors_of(&all, "other-port"), []);
    assert_eq!(ancestors_of(&all, "this-port").len(), 1);
}

#[test]
fn the_conditions_are_the_topologys() {
    let mut objects = cluster(80);
    let mut broken = policy("tls", "blue", None);
    broken["spec"]["validation"]["caCertificateRefs"][0]["name"] = json!("missing");
    objects.push(broken);
    let all = resources(objects);
    let world = World::new(&all, CONTROLLER_NAME);
    let verdict = world
        .topology
        .backend_tls_policy_conditions(&ObjectName::new("shop", "tls"))
        .unwrap();
    let ancestors = ancestors_of(&all, "tls");
    let accepted = &ancestors[0].conditions[0];
    let resolved = &ancestors[0].conditions[1];
    let (reason, message) = verdict.accepted.unwrap_err();
    assert_eq!(
        (accepted.reason.as_str(), &accepted.message),
        (reason, &message)
    );
    assert_eq!(accepted.status, ConditionStatus::False);
    let (reason, _) = verdict.resolved_refs.unwrap_err();
    assert_eq!(resolved.reason, reason);
    assert_eq!(resolved.reason, "InvalidCACertificateRef");
}
