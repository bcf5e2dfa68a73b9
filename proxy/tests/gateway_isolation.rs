//! Gateways isolated from one another, through the real proxy: several
//! Gateways merged on one socket for port 80 (`--listener 80=ADDR`, as the
//! fleet runs them), real HTTP over 127.0.0.1. A Gateway's routes answer
//! only on its own listener (issue 13 item 3: before, every Gateway's
//! routes answered through every listener of the port), and a listener
//! that clashes with an older Gateway's (`Conflicted`, HostnameConflict)
//! is not served at all.

mod support;

use support::client::{get, send};
use support::echo::start_echo;
use support::*;
use switchyard_proto::model::gateway_api::{ConflictReason, ListenerRef, Topology};
use switchyard_proto::model::{BackendKey, ObjectName};
use switchyard_proxy::router::ListenerKey;

const NS: &str = "iso";

/// Gateway `a` takes every host of example.com, `b` one exact host, and
/// the youngest, `c`, asks for `b`'s host again. Each has a catch-all
/// route to its own backend; `b`'s route takes `/b` only, so a request
/// for `b`'s host elsewhere shows whether anyone else's route answers.
fn world() -> String {
    let gateway = |name: &str, created: &str, hostname: &str| {
        format!(
            r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {name}, namespace: {NS}, creationTimestamp: "{created}"}}
spec:
  gatewayClassName: {CLASS}
  listeners:
  - {{name: web, port: 80, protocol: HTTP, hostname: "{hostname}"}}
"#
        )
    };
    let route = |name: &str, gateway: &str, path: &str, backend: &str| {
        format!(
            r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: {NS}}}
spec:
  parentRefs: [{{name: {gateway}}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: "{path}"}}}}]
    backendRefs: [{{name: {backend}, port: 8080}}]
"#
        )
    };
    [
        gateway("a", "2026-01-01T00:00:00Z", "*.example.com"),
        gateway("b", "2026-01-02T00:00:00Z", "b.example.com"),
        gateway("c", "2026-01-03T00:00:00Z", "b.example.com"),
        route("a-all", "a", "/", "alpha"),
        route("b-only", "b", "/b", "bravo"),
        route("c-all", "c", "/", "charlie"),
    ]
    .join("---\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateways_routes_answer_only_on_its_own_listener_and_a_conflicted_one_serves_nothing() {
    let alpha = start_echo(NS, "alpha", 0).await;
    let bravo = start_echo(NS, "bravo", 0).await;
    let charlie = start_echo(NS, "charlie", 0).await;
    let (mut snapshot, routes) = snapshot_of(1, parse_yaml(&world()));
    snapshot.gateway_classes.push(gateway_class());
    snapshot.namespaces.push(namespace(NS, &[]));
    for (name, echo) in [("alpha", &alpha), ("bravo", &bravo), ("charlie", &charlie)] {
        snapshot.services.push(service(NS, name, 8080, 1));
        snapshot
            .endpoint_slices
            .extend(slices(NS, name, &[echo.addr], 1));
    }

    // What the status writers read: c's listener is Conflicted, b wins.
    let topology = Topology::of_snapshot(&snapshot);
    let conflicts = topology.listener_conflicts();
    let c_web = ListenerRef::new(ObjectName::new(NS, "c"), "web");
    assert_eq!(conflicts.keys().collect::<Vec<_>>(), vec![&c_web]);
    assert_eq!(conflicts[&c_web].reason, ConflictReason::HostnameConflict);
    assert_eq!(conflicts[&c_web].winner.gateway, ObjectName::new(NS, "b"));

    // One socket for port 80 carrying every Gateway's listeners on it.
    let merged = ListenerKey {
        gateway: None,
        port: 80,
    };
    let proxy = Proxy::start(test_settings(), vec![merged]).await;
    let addr = proxy.addrs[0];
    proxy.install(snapshot, routes);
    // charlie is not served at all: only alpha and bravo are warmed.
    proxy
        .wait_healthy(&[
            (BackendKey::new(NS, "alpha", 8080), 1),
            (BackendKey::new(NS, "bravo", 8080), 1),
        ])
        .await;

    let pod_of = |host: &'static str, path: &'static str| async move {
        let reply = send(addr, get(host, path))
            .await
            .expect("the proxy answers");
        if reply.status.is_success() {
            reply
                .pod()
                .expect("an echo answered")
                .split('-')
                .next()
                .map(String::from)
        } else {
            assert_eq!(reply.status, 404, "{host}{path}: {reply:?}");
            None
        }
    };
    // a's hosts go to a's route; b's host to b's route.
    assert_eq!(pod_of("a.example.com", "/").await.as_deref(), Some("alpha"));
    assert_eq!(
        pod_of("x.example.com", "/b").await.as_deref(),
        Some("alpha")
    );
    assert_eq!(
        pod_of("b.example.com", "/b/x").await.as_deref(),
        Some("bravo")
    );
    // b's host outside b's routes: 404. Neither a's catch-all (its wildcard
    // covers the host) nor c's (its listener asks for this very host)
    // answers through b's listener.
    assert_eq!(pod_of("b.example.com", "/").await, None);
    assert_eq!(pod_of("b.example.com", "/anything").await, None);
    assert_eq!(
        charlie.count("/"),
        0,
        "the conflicted listener's route was served"
    );
    assert_eq!(alpha.count("/anything"), 0);
    assert!(
        proxy
            .dp
            .listener_sockets()
            .is_some_and(|s| s.iter().all(|s| s.bound)),
        "{:?}",
        proxy.dp.listener_sockets()
    );
    proxy.shutdown().await;
}
