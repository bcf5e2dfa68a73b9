//! Services that list the same pods share one endpoint each: one health
//! check and one connection pool per `ip:port` (and health path), however
//! many Services and routes send to it; the endpoint lives as long as some
//! backend lists it, and a Service whose health path changes keeps its
//! endpoints in traffic until the new path's probes say otherwise — but
//! counts them as readiness evidence only once a probe of the new path
//! passed.

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use support::client::{get, send};
use support::echo::start_echo;
use support::*;
use switchyard_proto::model::{
    ANNOTATION_HEALTH_PATH, BackendKey, ConfigSnapshot, HttpRoute, ObjectName,
};

const NS: &str = "shared";
const SERVICES: usize = 5;

/// `SERVICES` Services, each listing the same pod, and one route per
/// Service on its own path prefix `/s<i>`; only the first `routes` routes.
fn config(pod: std::net::SocketAddr, routes: usize) -> (ConfigSnapshot, Vec<HttpRoute>) {
    let mut text = simple_gateway_yaml(NS);
    for i in 0..routes {
        text.push_str(&format!(
            r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r{i}, namespace: {NS}}}
spec:
  parentRefs: [{{name: gw}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /s{i}}}}}]
    backendRefs: [{{name: s{i}, port: 8080}}]
"#
        ));
    }
    let (mut snapshot, routes) = snapshot_of(1, parse_yaml(&text));
    snapshot.gateway_classes.push(gateway_class());
    snapshot.namespaces.push(namespace(NS, &[]));
    for i in 0..SERVICES {
        let name = format!("s{i}");
        snapshot.services.push(service(NS, &name, 8080, 1));
        snapshot
            .endpoint_slices
            .extend(slices(NS, &name, &[pod], 1));
        snapshot
            .endpoint_generations
            .bump(ObjectName::new(NS, &name), 1);
    }
    (snapshot, routes)
}

fn key(i: usize) -> BackendKey {
    BackendKey::new(NS, format!("s{i}"), 8080)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_listing_the_same_pod_share_one_health_check_and_one_pool() {
    let pod = start_echo(NS, "pod", 0).await;
    let proxy = Proxy::start(test_settings(), vec![simple_listener(NS)]).await;
    let (snapshot, routes) = config(pod.addr, SERVICES);
    proxy.install(snapshot, routes);
    let all: Vec<(BackendKey, u32)> = (0..SERVICES).map(|i| (key(i), 1)).collect();
    proxy.wait_healthy(&all).await;
    assert_eq!(
        proxy.dp.endpoint_count(),
        1,
        "one endpoint for five Services"
    );

    // Traffic through every route, one request at a time: the one pool
    // serves all of them and the health checks. (A probe that happens to
    // be in flight during a request makes the pool open a second
    // connection; one pool per Service would have opened at least five,
    // one per health check.)
    for i in 0..SERVICES {
        let reply = send(proxy.addrs[0], get("x", &format!("/s{i}/")))
            .await
            .unwrap();
        assert_eq!(reply.status, 200, "route r{i}");
    }
    let opened = pod.connections.load(Ordering::Relaxed);
    assert!(
        opened <= 2,
        "{opened} upstream connections for five Services' traffic and checks"
    );

    // Four routes go: their backends let go, the endpoint stays for the
    // fifth — still healthy, still pooled.
    let (snapshot, routes) = config(pod.addr, 1);
    proxy.install(snapshot, routes);
    assert_eq!(proxy.dp.endpoint_count(), 1);
    let r = proxy.dp.readiness(&key(0)).expect("s0 still served");
    assert_eq!((r.healthy, r.total), (1, 1));
    let reply = send(proxy.addrs[0], get("x", "/s0/")).await.unwrap();
    assert_eq!(reply.status, 200);
    assert!(pod.connections.load(Ordering::Relaxed) <= opened + 1);

    // The last route goes: nothing lists the pod, the endpoint is retired.
    let (snapshot, _) = config(pod.addr, 0);
    proxy.install(snapshot, Vec::new());
    let dp = Arc::clone(&proxy.dp);
    eventually("endpoint retired", Duration::from_secs(5), || {
        let dp = Arc::clone(&dp);
        async move {
            anyhow::ensure!(
                dp.endpoint_count() == 0,
                "{} endpoints",
                dp.endpoint_count()
            );
            Ok(())
        }
    })
    .await
    .unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_health_path_keeps_the_endpoint_in_traffic_until_its_first_probe() {
    let pod = start_echo(NS, "pod", 0).await;
    let proxy = Proxy::start(test_settings(), vec![simple_listener(NS)]).await;
    let (snapshot, routes) = config(pod.addr, 2);
    proxy.install(snapshot.clone(), routes.clone());
    proxy.wait_healthy(&[(key(0), 1), (key(1), 1)]).await;
    assert_eq!(proxy.dp.endpoint_count(), 1);

    let mut changed = snapshot;
    changed.version = 2;
    changed.services[0]
        .meta
        .annotations
        .insert(ANNOTATION_HEALTH_PATH.to_owned(), "/health".to_owned());
    // A change to a Service moves its endpoint generation (the
    // coordinators' rule), which is what makes the proxy look again.
    changed
        .endpoint_generations
        .bump(ObjectName::new(NS, "s0"), 2);
    proxy.install(changed.clone(), routes.clone());
    // Right after the install, before any probe of the new path could have
    // answered: the endpoint is still in traffic.
    let reply = send(proxy.addrs[0], get("app.example", "/s0/x"))
        .await
        .unwrap();
    assert_eq!(reply.status, 200, "still in traffic");
    // s1 still lists the pod at the old path: two endpoints now.
    assert_eq!(proxy.dp.endpoint_count(), 2);

    // The new path fails: the endpoint leaves traffic once its probes say
    // so, while s1 (old path) is unaffected.
    pod.unhealthy.store(true, Ordering::Relaxed);
    let dp = Arc::clone(&proxy.dp);
    eventually("s0 unhealthy at /health", Duration::from_secs(10), || {
        let dp = Arc::clone(&dp);
        async move {
            let r = dp.readiness(&key(0)).expect("served");
            anyhow::ensure!(r.healthy == 0, "{r:?}");
            Ok(())
        }
    })
    .await
    .unwrap();
    let r = proxy.dp.readiness(&key(1)).expect("served");
    assert_eq!((r.healthy, r.total), (1, 1), "s1 is checked at / and stays");
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_endpoint_takes_traffic_at_once_but_is_evidence_only_after_its_own_probe() {
    let pod = start_echo(NS, "pod", 0).await;
    // Failing probes never take it out of traffic in this test: what is
    // shown is the difference between traffic and evidence.
    let mut settings = test_settings();
    settings.health.unhealthy_threshold = 1_000;
    let proxy = Proxy::start(settings, vec![simple_listener(NS)]).await;
    let (snapshot, routes) = config(pod.addr, 1);
    proxy.install(snapshot.clone(), routes.clone());
    proxy.wait_healthy(&[(key(0), 1)]).await;

    // The new health path fails for now.
    pod.unhealthy.store(true, Ordering::Relaxed);
    let mut changed = snapshot;
    changed.version = 2;
    changed.services[0]
        .meta
        .annotations
        .insert(ANNOTATION_HEALTH_PATH.to_owned(), "/health".to_owned());
    changed
        .endpoint_generations
        .bump(ObjectName::new(NS, "s0"), 2);
    proxy.install(changed, routes);
    let reply = send(proxy.addrs[0], get("app.example", "/s0/x"))
        .await
        .unwrap();
    assert_eq!(reply.status, 200, "in traffic on its predecessor's health");
    let r = proxy.dp.readiness(&key(0)).expect("served");
    assert_eq!(
        (r.healthy, r.total),
        (0, 1),
        "not evidence before a probe of its own"
    );
    // Several failed probes later: still in traffic, still no evidence.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = proxy.dp.readiness(&key(0)).expect("served");
    assert_eq!((r.healthy, r.total), (0, 1), "{r:?}");
    let reply = send(proxy.addrs[0], get("app.example", "/s0/x"))
        .await
        .unwrap();
    assert_eq!(reply.status, 200);

    // The new path answers: its probe vouches for it.
    pod.unhealthy.store(false, Ordering::Relaxed);
    proxy.wait_healthy(&[(key(0), 1)]).await;
    proxy.shutdown().await;
}
