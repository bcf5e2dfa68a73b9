//! Status write-back against a fake API server: the exact server-side
//! apply requests (method, content type, field manager, force, the body's
//! conditions), other controllers' entries kept, no write when nothing
//! changed, a retry after 409, and the publisher end to end.
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

mod live_support;

use live_support::{Clients, WAIT, fast, fleet, publish_clean};
use serde_json::{Value, json};
use switchyard_kubeconfig::live::{
    CUTOVER_CONDITION, DesiredState, FIELD_MANAGER, LEADER_TERM_CONDITION, ProxyService,
    REQUIRED_PERMISSIONS, StatusPublisher, World, WriteOutcome, route_parent_statuses,
    watch_clusters_with, write_route_status,
};
use switchyard_proto::model::{
    CONTROLLER_NAME, HttpRoute, Kind, ObjectName, Resource, RouteStatus,
};
use switchyard_test_support::eventually;
use switchyard_test_support::fake_kube::{FakeApiServer, Recorded};
use switchyard_test_support::fixtures::{GW, shop};
use tokio::sync::watch;

/// The lease of a leader of Raft term 1 that never loses it.
const LEADING: fn() -> Option<u64> = || Some(1);

fn other_controllers_status() -> Value {
    json!({"parents": [{
        "controllerName": "example.com/other",
        "parentRef": {"name": "other"},
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                        "message": "theirs", "lastTransitionTime": "2020-01-01T00:00:00Z"}]
    }]})
}

async fn desired(server: &FakeApiServer) -> DesiredState {
    let (tx, rx) = watch::channel(None);
    let sources = vec![server.source("east")];
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        watch_clusters_with(sources, CONTROLLER_NAME, fast(), tx, async {
            let _ = stopped.await;
        })
        .await;
    });
    let state = eventually("desired state", WAIT, async || rx.borrow().clone())
        .await
        .unwrap();
    drop(stop);
    task.await.expect("watchers stop");
    state
}

fn route_of(state: &DesiredState) -> HttpRoute {
    state
        .resources
        .iter()
        .find_map(|r| match r {
            Resource::HttpRoute(r) => Some(r.clone()),
            _ => None,
        })
        .expect("route served")
}

fn ready_row() -> RouteStatus {
    RouteStatus {
        namespace: "shop".into(),
        name: "app".into(),
        active_generation: Some(7),
        applied: Some("3 of 3 proxies at generation 7".into()),
        ready: true,
        ..RouteStatus::default()
    }
}

/// The proxies' LoadBalancer Service, with an address assigned.
fn proxy_service() -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "proxy", "namespace": "switchyard"},
           "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
           "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}})
}

fn body_of(r: &Recorded) -> &Value {
    r.body.as_ref().expect("json body")
}

fn assert_server_side_apply(p: &Recorded, path: &str) {
    assert_eq!(p.path, path);
    assert_eq!(
        p.content_type.as_deref(),
        Some("application/apply-patch+yaml")
    );
    assert_eq!(
        p.query.get("fieldManager").map(String::as_str),
        Some(FIELD_MANAGER)
    );
    assert_eq!(p.query.get("force").map(String::as_str), Some("true"));
    let (g, r, v) = p.permission().expect("a resource request");
    assert!(REQUIRED_PERMISSIONS.contains(&(g.as_str(), r.as_str(), v.as_str())));
}

#[tokio::test]
async fn route_status_is_server_side_applied_keeping_other_controllers_entries() {
    let mut route = shop::route("blue", 5);
    route["status"] = other_controllers_status();
    let mut objects = shop::cluster();
    objects.retain(|o| o["kind"] != "HTTPRoute");
    objects.push(route);
    let server = FakeApiServer::start(objects).await;
    let state = desired(&server).await;
    let route = route_of(&state);
    let world = World::new(&state.resources, CONTROLLER_NAME);
    let parents = route_parent_statuses(&route, &world, Some(&ready_row()), None, CONTROLLER_NAME);
    let client = server.client("status");
    let name = ObjectName::new("shop", "app");
    let before = server.requests().len();

    let outcome = write_route_status(
        &client,
        "east",
        Kind::HTTPRoute,
        &name,
        CONTROLLER_NAME,
        &parents,
        1,
    )
    .await
    .expect("status written");
    assert_eq!(outcome, WriteOutcome::Written);
    let requests: Vec<Recorded> = server.requests().split_off(before);
    let shape: Vec<(&str, &str)> = requests
        .iter()
        .map(|r| (r.method.as_str(), r.path.as_str()))
        .collect();
    let path = "/apis/gateway.networking.k8s.io/v1/namespaces/shop/httproutes/app";
    let status_path = format!("{path}/status");
    assert_eq!(shape, [("GET", path), ("PATCH", status_path.as_str())]);
    let patch = &requests[1];
    assert_server_side_apply(patch, &status_path);
    let body = patch.body.as_ref().expect("json body");
    assert_eq!(body["apiVersion"], GW);
    assert_eq!(body["kind"], "HTTPRoute");
    assert_eq!(body["metadata"]["name"], "app");
    assert!(
        body["metadata"]["resourceVersion"].is_string(),
        "optimistic lock"
    );
    let parents = body["status"]["parents"].as_array().expect("parents");
    assert_eq!(parents.len(), 2);
    assert_eq!(parents[0], other_controllers_status()["parents"][0]);
    let ours = &parents[1];
    assert_eq!(ours["controllerName"], CONTROLLER_NAME);
    assert_eq!(ours["parentRef"]["name"], "gw");
    let conditions: Vec<(String, String, String)> = ours["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .map(|c| {
            assert_eq!(c["observedGeneration"], 5);
            assert!(c["lastTransitionTime"].is_string());
            (
                c["type"].as_str().unwrap_or("").to_string(),
                c["status"].as_str().unwrap_or("").to_string(),
                c["reason"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let expected = [
        ("Accepted", "True", "Accepted"),
        ("ResolvedRefs", "True", "ResolvedRefs"),
        (CUTOVER_CONDITION, "True", "Ready"),
        (LEADER_TERM_CONDITION, "True", "Written"),
    ]
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()));
    assert_eq!(conditions, expected);
    assert_eq!(
        ours["conditions"][2]["message"],
        "3 of 3 proxies at generation 7"
    );

    // The same status again: read, compare, no write.
    let before = server.requests().len();
    let outcome = write_route_status(
        &client,
        "east",
        Kind::HTTPRoute,
        &name,
        CONTROLLER_NAME,
        &route_parent_statuses(&route, &world, Some(&ready_row()), None, CONTROLLER_NAME),
        1,
    )
    .await
    .expect("read");
    assert_eq!(outcome, WriteOutcome::Unchanged);
    let methods: Vec<String> = server.requests()[before..]
        .iter()
        .map(|r| r.method.clone())
        .collect();
    assert_eq!(methods, ["GET"]);
}

#[tokio::test]
async fn a_conflict_is_retried_from_a_fresh_read() {
    let server = FakeApiServer::start(shop::cluster()).await;
    let state = desired(&server).await;
    let route = route_of(&state);
    let world = World::new(&state.resources, CONTROLLER_NAME);
    let pending = RouteStatus {
        pending_generation: Some(8),
        policy: Some("all".into()),
        evidence: Some("1 of 3 proxies ready".into()),
        ready: false,
        ..ready_row()
    };
    let parents = route_parent_statuses(&route, &world, Some(&pending), None, CONTROLLER_NAME);
    server.conflict_next_patches(1);
    let before = server.requests().len();
    let outcome = write_route_status(
        &server.client("status"),
        "east",
        Kind::HTTPRoute,
        &ObjectName::new("shop", "app"),
        CONTROLLER_NAME,
        &parents,
        1,
    )
    .await
    .expect("written on the second try");
    assert_eq!(outcome, WriteOutcome::Written);
    let methods: Vec<String> = server.requests()[before..]
        .iter()
        .map(|r| r.method.clone())
        .collect();
    assert_eq!(methods, ["GET", "PATCH", "GET", "PATCH"]);
    let stored = server.get(GW, "HTTPRoute", "shop", "app").expect("route");
    let cutover = &stored["status"]["parents"][0]["conditions"][2];
    assert_eq!(cutover["type"], CUTOVER_CONDITION);
    assert_eq!(cutover["status"], "Unknown");
    assert_eq!(cutover["reason"], "Pending");
}

#[tokio::test]
async fn the_publisher_writes_classes_routes_and_gateways_once() {
    let mut objects = shop::cluster();
    objects.push(proxy_service());
    let server = FakeApiServer::start(objects).await;
    let state = desired(&server).await;
    let mut publisher = StatusPublisher::new(vec![server.source("east")], CONTROLLER_NAME)
        .with_proxy_service(Some(ProxyService {
            cluster: "east".into(),
            service: ObjectName::new("switchyard", "proxy"),
        }));
    let before = server.requests().len();
    publish_clean(&mut publisher, &state, &[ready_row()], &fleet(3), &LEADING).await;
    let new = server.requests().split_off(before);
    let patched: Vec<&str> = new
        .iter()
        .filter(|r| r.method == "PATCH")
        .map(|r| r.path.as_str())
        .collect();
    assert_eq!(
        patched,
        [
            "/apis/gateway.networking.k8s.io/v1/gatewayclasses/switchyard/status",
            "/apis/gateway.networking.k8s.io/v1/namespaces/shop/gateways/gw/status",
            "/apis/gateway.networking.k8s.io/v1/namespaces/shop/httproutes/app/status",
        ]
    );
    let gateway_patch = new
        .iter()
        .find(|r| r.method == "PATCH" && r.path.contains("gateways"))
        .expect("patch");
    assert_server_side_apply(gateway_patch, patched[1]);
    assert_eq!(
        body_of(gateway_patch)["status"]["addresses"],
        json!([{"type": "IPAddress", "value": "203.0.113.7"}])
    );
    let body = gateway_patch.body.as_ref().expect("body");
    assert_eq!(body["status"]["conditions"][1]["type"], "Programmed");
    assert_eq!(body["status"]["conditions"][1]["status"], "True");
    assert_eq!(body["status"]["listeners"][0]["attachedRoutes"], 1);
    assert_eq!(
        body["status"]["listeners"][0]["conditions"][0]["observedGeneration"],
        2
    );

    // Nothing changed: no write, and the only read is the proxies'
    // Service (once per publish: its addresses may change).
    let before = server.requests().len();
    publish_clean(&mut publisher, &state, &[ready_row()], &fleet(3), &LEADING).await;
    let reads: Vec<String> = server.requests()[before..]
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(reads, ["GET /api/v1/namespaces/switchyard/services/proxy"]);
    // A change in one route's progress writes that route only.
    let pending = RouteStatus {
        pending_generation: Some(8),
        ready: false,
        ..ready_row()
    };
    publish_clean(&mut publisher, &state, &[pending], &fleet(3), &LEADING).await;
    let patched: Vec<String> = server.requests()[before..]
        .iter()
        .filter(|r| r.method == "PATCH")
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(
        patched,
        ["/apis/gateway.networking.k8s.io/v1/namespaces/shop/httproutes/app/status"]
    );
    // ... and the cutover that started is an Event on the route.
    let events = server.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["metadata"]["name"], "app.cutover-8-started");
    assert_eq!(events[0]["reason"], "CutoverStarted");
    assert_eq!(events[0]["regarding"]["uid"], "uid-shop-app");
}

#[tokio::test]
async fn a_route_no_longer_served_loses_our_entry_and_keeps_theirs() {
    let mut route = shop::route("blue", 5);
    route["status"] = other_controllers_status();
    let mut objects = shop::cluster();
    objects.retain(|o| o["kind"] != "HTTPRoute");
    objects.push(route);
    let server = FakeApiServer::start(objects).await;
    let state = desired(&server).await;
    let mut publisher = StatusPublisher::new(vec![server.source("east")], CONTROLLER_NAME);
    publish_clean(&mut publisher, &state, &[ready_row()], &fleet(1), &LEADING).await;
    let stored = server.get(GW, "HTTPRoute", "shop", "app").expect("route");
    assert_eq!(
        stored["status"]["parents"].as_array().map(Vec::len),
        Some(2)
    );

    // The route now only names the other controller's Gateway.
    let mut detached = stored.clone();
    detached["spec"]["parentRefs"] = json!([{"name": "other"}]);
    server.apply(detached);
    let state = desired(&server).await;
    assert!(
        state
            .resources
            .iter()
            .all(|r| !matches!(r, Resource::HttpRoute(_)))
    );
    publish_clean(&mut publisher, &state, &[], &fleet(1), &LEADING).await;
    let stored = server.get(GW, "HTTPRoute", "shop", "app").expect("route");
    assert_eq!(stored["status"], other_controllers_status());

    // Served again, then deleted: the withdrawal finds it gone, no error.
    server.apply(shop::route("blue", 6));
    let served = desired(&server).await;
    publish_clean(&mut publisher, &served, &[ready_row()], &fleet(1), &LEADING).await;
    server.delete(GW, "HTTPRoute", "shop", "app");
    let before = server.requests().len();
    publish_clean(&mut publisher, &state, &[], &fleet(1), &LEADING).await;
    // (The Gateway is rewritten too: its listener has no route now.)
    let tried: Vec<String> = server.requests()[before..]
        .iter()
        .filter(|r| r.path.contains("httproutes"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(
        tried,
        ["GET /apis/gateway.networking.k8s.io/v1/namespaces/shop/httproutes/app"]
    );
    // ... and forgets it.
    let before = server.requests().len();
    publish_clean(&mut publisher, &state, &[], &fleet(1), &LEADING).await;
    assert_eq!(server.requests().len(), before);
}

#[tokio::test]
async fn a_grpc_routes_status_is_written_to_the_grpc_route() {
    let mut objects = shop::cluster();
    for o in &mut objects {
        if o["kind"] == "HTTPRoute" {
            o["kind"] = json!("GRPCRoute");
        }
    }
    let server = FakeApiServer::start(objects).await;
    let state = desired(&server).await;
    assert!(
        state
            .resources
            .iter()
            .any(|r| r.key().to_string() == "GRPCRoute shop/app"),
        "the GRPCRoute is served"
    );
    let mut publisher = StatusPublisher::new(vec![server.source("east")], CONTROLLER_NAME);
    let before = server.requests().len();
    publish_clean(&mut publisher, &state, &[ready_row()], &fleet(3), &LEADING).await;
    let new = server.requests().split_off(before);
    let path = "/apis/gateway.networking.k8s.io/v1/namespaces/shop/grpcroutes/app/status";
    let patch = new
        .iter()
        .find(|r| r.method == "PATCH" && r.path == path)
        .unwrap_or_else(|| panic!("no status patch of the GRPCRoute in {new:#?}"));
    assert_server_side_apply(patch, path);
    let parents = &body_of(patch)["status"]["parents"];
    assert_eq!(parents[0]["controllerName"], CONTROLLER_NAME);
    let accepted = parents[0]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Accepted")
        .unwrap();
    assert_eq!(accepted["status"], "True", "{parents}");
    assert!(
        !new.iter().any(|r| r.path.contains("/httproutes/")),
        "nothing written to an HTTPRoute"
    );
    // A cutover that starts is an Event regarding the GRPCRoute.
    let pending = RouteStatus {
        pending_generation: Some(8),
        ready: false,
        ..ready_row()
    };
    publish_clean(&mut publisher, &state, &[pending], &fleet(3), &LEADING).await;
    let events = server.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["reason"], "CutoverStarted");
    assert_eq!(events[0]["regarding"]["kind"], "GRPCRoute");
    assert_eq!(events[0]["regarding"]["uid"], "uid-shop-app");
}
