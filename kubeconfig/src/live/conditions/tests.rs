use super::*;
use crate::parse_documents;
use serde_json::{Value, json};
use switchyard_proto::model::CONTROLLER_NAME;
use switchyard_test_support::fixtures::{self, listener};

/// Our GatewayClass with Gateway `shop/gw` (an HTTP listener for
/// `*.example.com`, an HTTPS one), another controller's Gateway
/// `shop/other`, Service `shop/blue` and Service `data/db`.
fn world() -> Vec<Value> {
    let mut http = listener("http", 80, "HTTP");
    http["hostname"] = json!("*.example.com");
    vec![
        fixtures::gateway_class("ours", CONTROLLER_NAME),
        fixtures::gateway_class("theirs", fixtures::OTHER_CONTROLLER),
        fixtures::gateway(
            "shop",
            "gw",
            "ours",
            json!([http, listener("tls", 443, "HTTPS")]),
        ),
        fixtures::gateway(
            "shop",
            "other",
            "theirs",
            json!([listener("http", 80, "HTTP")]),
        ),
        fixtures::service("shop", "blue", json!([{"port": 80}])),
        fixtures::service("data", "db", json!([{"port": 5432}])),
    ]
}

fn route(namespace: &str, extra: &str) -> HttpRoute {
    let yaml = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: app, namespace: {namespace}, generation: 4}}\n{extra}"
    );
    match parse_documents("route", &yaml).unwrap().remove(0) {
        Resource::HttpRoute(r) => r,
        other => panic!("{other:?}"),
    }
}

fn world_with(more: &str) -> Vec<Resource> {
    let world = fixtures::yaml(&world());
    parse_documents("world", &format!("{world}---\n{more}\n")).unwrap()
}

fn condition<'a>(s: &'a RouteParentStatus, type_: &str) -> &'a Condition {
    s.conditions.iter().find(|c| c.type_ == type_).unwrap()
}

fn ready() -> RouteStatus {
    RouteStatus {
        namespace: "shop".into(),
        name: "app".into(),
        active_generation: Some(7),
        applied: Some("3 of 3 proxies at generation 7".into()),
        ready: true,
        ..RouteStatus::default()
    }
}

const GOOD: &str = "spec:\n  parentRefs: [{name: gw, sectionName: http}, {name: other}]\n  hostnames: [app.example.com]\n  rules: [{backendRefs: [{name: blue, port: 80}]}]\n";

#[test]
fn an_attached_route_with_resolved_refs_and_a_finished_cutover() {
    let resources = world_with("");
    let world = World::new(&resources, CONTROLLER_NAME);
    let r = route("shop", GOOD);
    let status = route_parent_statuses(&r, &world, Some(&ready()), None, CONTROLLER_NAME);
    // Only our Gateway's parentRef gets an entry.
    assert_eq!(status.len(), 1);
    let s = &status[0];
    assert_eq!(s.parent_ref.name, "gw");
    assert_eq!(s.controller_name, CONTROLLER_NAME);
    let types: Vec<&str> = s.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, ["Accepted", "ResolvedRefs", CUTOVER_CONDITION]);
    let accepted = condition(s, "Accepted");
    assert_eq!(
        (accepted.status, accepted.reason.as_str()),
        (ConditionStatus::True, "Accepted")
    );
    assert_eq!(accepted.observed_generation, Some(4));
    assert_eq!(condition(s, "ResolvedRefs").reason, "ResolvedRefs");
    let cutover = condition(s, CUTOVER_CONDITION);
    assert_eq!(cutover.status, ConditionStatus::True);
    assert_eq!(cutover.reason, "Ready");
    assert_eq!(cutover.message, "3 of 3 proxies at generation 7");
}

#[test]
fn attachment_failures_have_their_gateway_api_reasons() {
    let resources = world_with("");
    let world = World::new(&resources, CONTROLLER_NAME);
    let cases = [
        (
            "shop",
            "spec:\n  parentRefs: [{name: gw, sectionName: nope}]\n",
            "NoMatchingParent",
        ),
        (
            "elsewhere",
            "spec:\n  parentRefs: [{name: gw, namespace: shop, sectionName: http}]\n",
            "NotAllowedByListeners",
        ),
        (
            "shop",
            "spec:\n  parentRefs: [{name: gw, sectionName: http}]\n  hostnames: [app.example.org]\n",
            "NoMatchingListenerHostname",
        ),
        (
            "shop",
            "spec:\n  parentRefs: [{name: gw, sectionName: tls}]\n",
            "NotAllowedByListeners",
        ),
    ];
    for (ns, spec, reason) in cases {
        let status = route_parent_statuses(&route(ns, spec), &world, None, None, CONTROLLER_NAME);
        let accepted = condition(&status[0], "Accepted");
        assert_eq!(accepted.status, ConditionStatus::False, "{spec}");
        assert_eq!(accepted.reason, reason, "{spec}: {}", accepted.message);
    }
}

#[test]
fn unresolved_backend_refs_have_their_reasons() {
    let grant = "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {name: g, namespace: data}\nspec:\n  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: shop}]\n  to: [{group: \"\", kind: Service, name: db}]\n";
    let cases = [
        (
            "[{name: db, namespace: data, port: 5432}]",
            "",
            "RefNotPermitted",
        ),
        (
            "[{name: db, namespace: data, port: 5432}]",
            grant,
            "ResolvedRefs",
        ),
        ("[{name: gone, port: 80}]", "", "BackendNotFound"),
        ("[{name: blue, port: 81}]", "", "BackendNotFound"),
        (
            "[{name: blue, port: 80}, {group: example.com, kind: Bucket, name: b}]",
            "",
            "InvalidKind",
        ),
    ];
    for (refs, extra, reason) in cases {
        let resources = world_with(extra);
        let world = World::new(&resources, CONTROLLER_NAME);
        let spec = format!(
            "spec:\n  parentRefs: [{{name: gw, sectionName: http}}]\n  rules: [{{backendRefs: {refs}}}]\n"
        );
        let status =
            route_parent_statuses(&route("shop", &spec), &world, None, None, CONTROLLER_NAME);
        let resolved = condition(&status[0], "ResolvedRefs");
        assert_eq!(resolved.reason, reason, "{refs}: {}", resolved.message);
        let expected = if reason == "ResolvedRefs" {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        };
        assert_eq!(resolved.status, expected);
    }
}

#[test]
fn cutover_progress_pending_timeout_forced_and_unknown() {
    let resources = world_with("");
    let world = World::new(&resources, CONTROLLER_NAME);
    let r = route("shop", GOOD);
    let cutover = |s: Option<RouteStatus>| {
        let status = route_parent_statuses(&r, &world, s.as_ref(), None, CONTROLLER_NAME);
        condition(&status[0], CUTOVER_CONDITION).clone()
    };
    let c = cutover(None);
    assert_eq!(
        (c.status, c.reason.as_str()),
        (ConditionStatus::Unknown, "Pending")
    );
    let c = cutover(Some(RouteStatus {
        pending_generation: Some(8),
        policy: Some("all".into()),
        evidence: Some("2 of 3 proxies ready (zone-a 1/1, zone-b 1/2)".into()),
        ready: false,
        ..ready()
    }));
    assert_eq!(
        (c.status, c.reason.as_str()),
        (ConditionStatus::Unknown, "Pending")
    );
    assert_eq!(
        c.message,
        "generation 8 waiting for readiness (policy all): 2 of 3 proxies ready (zone-a 1/1, zone-b 1/2); active generation 7"
    );
    let c = cutover(Some(RouteStatus {
        last_failure: Some("generation 8 abandoned: cutover timed out after 30s".into()),
        ..ready()
    }));
    assert_eq!(
        (c.status, c.reason.as_str()),
        (ConditionStatus::False, "TimedOut")
    );
    let c = cutover(Some(RouteStatus {
        last_failure: Some("generation 8 was forced after its cutover timeout".into()),
        ..ready()
    }));
    assert_eq!(
        (c.status, c.reason.as_str()),
        (ConditionStatus::True, "Forced")
    );
    let c = cutover(Some(RouteStatus {
        ready: false,
        applied: Some("2 of 3 proxies at generation 7".into()),
        ..ready()
    }));
    assert_eq!(
        (c.status, c.reason.as_str()),
        (ConditionStatus::Unknown, "Applying")
    );
}

#[test]
fn route_fall_back_is_accepted_at_the_good_generation_and_partially_invalid_at_the_newest() {
    // The Gateway API's PartiallyInvalid "Fall Back" pattern.
    let resources = world_with("");
    let world = World::new(&resources, CONTROLLER_NAME);
    let mut good = route("shop", GOOD);
    good.meta.k8s_generation = Some(4);
    let why = "spec.rules[0].matches[0].path.value: invalid regular expression";
    let status = route_parent_statuses(
        &good,
        &world,
        None,
        Some(FallBack {
            why,
            newest_generation: Some(5),
        }),
        CONTROLLER_NAME,
    );
    let accepted = condition(&status[0], "Accepted");
    assert_eq!(
        (accepted.status, accepted.observed_generation),
        (ConditionStatus::True, Some(4))
    );
    let partial = condition(&status[0], PARTIALLY_INVALID_CONDITION);
    assert_eq!(partial.status, ConditionStatus::True);
    assert_eq!(partial.reason, "UnsupportedValue");
    assert_eq!(partial.observed_generation, Some(5));
    assert!(
        partial.message.starts_with("Fall Back"),
        "{}",
        partial.message
    );
    assert!(partial.message.contains(why), "{}", partial.message);
    let plain = route_parent_statuses(&good, &world, None, None, CONTROLLER_NAME);
    assert!(
        plain[0]
            .conditions
            .iter()
            .all(|c| c.type_ != PARTIALLY_INVALID_CONDITION)
    );
}

#[test]
fn a_route_never_read_is_not_accepted_on_our_parents_only() {
    let resources = world_with("");
    let world = World::new(&resources, CONTROLLER_NAME);
    let mut stub = route("shop", GOOD);
    stub.rules.clear();
    let mut foreign = stub.parent_refs[0].clone();
    foreign.name = "not-a-gateway-here".into();
    stub.parent_refs.push(foreign);
    let status = unread_route_parent_statuses(&stub, &world, "spec.rules: bad", CONTROLLER_NAME);
    assert_eq!(status.len(), 1, "{status:?}");
    let accepted = condition(&status[0], "Accepted");
    assert_eq!(
        (accepted.status, accepted.reason.as_str()),
        (ConditionStatus::False, "UnsupportedValue")
    );
    assert!(accepted.message.contains("spec.rules: bad"));
}
