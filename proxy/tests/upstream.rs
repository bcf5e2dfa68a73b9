//! Upstream behaviour through the real data path: health checks decide
//! which endpoints get traffic and what readiness says, readiness watchers
//! wake up, connect failures are retried on another endpoint, a bodiless
//! idempotent request whose kept-alive connection closed under it goes
//! again, keep-alive connections are reused, HTTP/2 clients are served,
//! the admin endpoint answers.

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use support::client::{Conn, get, send};
use support::echo::{start_echo, start_scripted};
use support::*;
use switchyard_proto::model::{
    ANNOTATION_HEALTH_PATH, BackendKey, ConfigSnapshot, HttpRoute, ObjectName,
};
use switchyard_proxy::{DataPlaneSettings, HealthSettings};

const NS: &str = "up";

fn config(
    addrs: &[std::net::SocketAddr],
    health_path: Option<&str>,
) -> (ConfigSnapshot, Vec<HttpRoute>) {
    let mut text = simple_gateway_yaml(NS);
    text.push_str("---\n");
    text.push_str(&simple_route_yaml(NS, "app", "app"));
    let (mut snapshot, routes) = snapshot_of(1, parse_yaml(&text));
    snapshot.gateway_classes.push(gateway_class());
    snapshot.namespaces.push(namespace(NS, &[]));
    let mut svc = service(NS, "app", 8080, 3);
    if let Some(path) = health_path {
        svc.meta
            .annotations
            .insert(ANNOTATION_HEALTH_PATH.to_owned(), path.to_owned());
    }
    snapshot.services.push(svc);
    snapshot.endpoint_slices = slices(NS, "app", addrs, 5);
    // As the coordinators' state would have it after the slices' apply.
    snapshot
        .endpoint_generations
        .bump(ObjectName::new(NS, "app"), 5);
    (snapshot, routes)
}

fn key() -> BackendKey {
    BackendKey::new(NS, "app", 8080)
}

/// Test settings whose health checks run once (at start) and then not for
/// an hour: what the proxy learns afterwards comes from traffic alone.
fn checked_once() -> DataPlaneSettings {
    DataPlaneSettings {
        health: HealthSettings {
            interval: Duration::from_secs(3600),
            ..test_settings().health
        },
        ..test_settings()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_checks_decide_traffic_and_readiness() {
    let pods = [
        start_echo(NS, "app", 0).await,
        start_echo(NS, "app", 1).await,
    ];
    let proxy = Proxy::start(test_settings(), vec![simple_listener(NS)]).await;
    let mut changes = proxy.dp.readiness_changes();
    let (snapshot, routes) = config(&[pods[0].addr, pods[1].addr], Some("/health"));
    proxy.install(snapshot, routes);
    // Readiness watchers wake up as endpoints pass their first check.
    tokio::time::timeout(Duration::from_secs(5), changes.changed())
        .await
        .expect("readiness changed")
        .unwrap();
    proxy.wait_healthy(&[(key(), 2)]).await;
    let r = proxy.dp.readiness(&key()).unwrap();
    assert_eq!(
        r.endpoints_generation, 5,
        "the snapshot's endpoint generation of the Service"
    );

    // Pod 1 starts failing its health check: after the threshold, only
    // pod 0 gets traffic and readiness says 1 of 2.
    pods[1].unhealthy.store(true, Ordering::Relaxed);
    let dp = Arc::clone(&proxy.dp);
    eventually("pod 1 unhealthy", Duration::from_secs(5), || {
        let dp = Arc::clone(&dp);
        async move {
            let r = dp.readiness(&key()).unwrap();
            anyhow::ensure!(r.healthy == 1 && r.total == 2, "{r:?}");
            Ok(())
        }
    })
    .await
    .unwrap();
    for _ in 0..20 {
        let reply = send(proxy.addrs[0], get("app.example", "/")).await.unwrap();
        assert_eq!(reply.status, 200);
        assert_eq!(reply.pod().unwrap(), pods[0].pod);
    }
    // Both failing: 503 with a reason, not a hang or a 502.
    pods[0].unhealthy.store(true, Ordering::Relaxed);
    let addr = proxy.addrs[0];
    eventually("no ready endpoint", Duration::from_secs(5), || async move {
        let reply = send(addr, get("app.example", "/")).await?;
        anyhow::ensure!(reply.status == 503, "{reply:?}");
        anyhow::ensure!(reply.headers.contains_key("x-switchyard-reason"));
        Ok(())
    })
    .await
    .unwrap();
    // Recovery takes `healthy_threshold` passes, then traffic returns.
    pods[0].unhealthy.store(false, Ordering::Relaxed);
    pods[1].unhealthy.store(false, Ordering::Relaxed);
    proxy.wait_healthy(&[(key(), 2)]).await;
    let reply = send(addr, get("app.example", "/")).await.unwrap();
    assert_eq!(reply.status, 200);
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_failures_are_retried_on_another_endpoint() {
    let live = start_echo(NS, "app", 0).await;
    let doomed = start_echo(NS, "app", 1).await;
    let doomed_addr = doomed.addr;
    // The dead endpoint still counts as healthy (checked once, at start):
    // only retries can save the requests that pick it.
    let proxy = Proxy::start(checked_once(), vec![simple_listener(NS)]).await;
    let (snapshot, routes) = config(&[live.addr, doomed_addr], None);
    proxy.install(snapshot, routes);
    proxy.wait_healthy(&[(key(), 2)]).await;
    doomed.kill().await;
    assert!(
        tokio::net::TcpStream::connect(doomed_addr).await.is_err(),
        "the dead endpoint still accepts"
    );
    for i in 0..40 {
        let reply = send(proxy.addrs[0], get("app.example", "/")).await.unwrap();
        assert_eq!(reply.status, 200, "request {i}: {reply:?}");
        assert_eq!(reply.pod().unwrap(), live.pod);
    }
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_alive_connection_closed_under_an_idempotent_request_sends_it_again() {
    // Answers `/keepalive` on a kept-alive connection, then closes that
    // connection on its next request without answering it.
    let (backend, _stop) = start_scripted().await;
    let proxy = Proxy::start(checked_once(), vec![simple_listener(NS)]).await;
    let (snapshot, routes) = config(&[backend], None);
    proxy.install(snapshot, routes);
    proxy.wait_healthy(&[(key(), 1)]).await;
    let addr = proxy.addrs[0];

    // A new connection, answered and kept in the pool.
    let first = send(addr, get("app.example", "/keepalive")).await.unwrap();
    assert_eq!(first.status, 200, "{first:?}");
    // The pooled connection is closed under the next GET: the proxy sends
    // it again on a new connection, and the client never sees the close.
    for i in 0..3 {
        let again = send(addr, get("app.example", "/keepalive")).await.unwrap();
        assert_eq!(again.status, 200, "request {i} after the first: {again:?}");
        assert_eq!(&again.body[..], b"keepalive");
    }
    // A request with a body is not sent twice: the backend may have acted
    // on it. The client gets the 502.
    let post = http::Request::post("/keepalive")
        .header("host", "app.example")
        .body(http_body_util::Full::new(bytes::Bytes::from_static(
            b"order",
        )))
        .unwrap();
    let refused = send(addr, post).await.unwrap();
    assert_eq!(refused.status, 502, "{refused:?}");
    assert_eq!(
        refused.headers["x-switchyard-reason"],
        "backend broke the connection"
    );
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_connections_are_reused_upstream() {
    let pod = start_echo(NS, "app", 0).await;
    let proxy = Proxy::start(test_settings(), vec![simple_listener(NS)]).await;
    let (snapshot, routes) = config(&[pod.addr], None);
    proxy.install(snapshot, routes);
    proxy.wait_healthy(&[(key(), 1)]).await;
    let addr = proxy.addrs[0];
    const CLIENTS: usize = 8;
    const REQUESTS: usize = 200;
    let mut loops = Vec::new();
    for _ in 0..CLIENTS {
        loops.push(tokio::spawn(async move {
            let mut conn = Conn::connect(addr).await.unwrap();
            for _ in 0..REQUESTS {
                let reply = conn.send(get("app.example", "/")).await.unwrap();
                assert_eq!(reply.status, 200);
            }
        }));
    }
    for l in loops {
        l.await.unwrap();
    }
    let opened = pod.connections.load(Ordering::Relaxed);
    let served = pod.served.load(Ordering::Relaxed);
    println!("{served} requests over {opened} upstream connections");
    assert!(served >= CLIENTS * REQUESTS);
    // About one upstream connection per concurrent client, plus slack for
    // health checks racing traffic for a pooled connection.
    assert!(opened <= CLIENTS + 4, "{opened} upstream connections");
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_prior_knowledge_clients_are_served() {
    let pod = start_echo(NS, "app", 0).await;
    let proxy = Proxy::start(test_settings(), vec![simple_listener(NS)]).await;
    let (snapshot, routes) = config(&[pod.addr], None);
    proxy.install(snapshot, routes);
    proxy.wait_healthy(&[(key(), 1)]).await;
    let stream = tokio::net::TcpStream::connect(proxy.addrs[0])
        .await
        .unwrap();
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    for _ in 0..3 {
        let req = http::Request::get("http://app.example/h2?x=1")
            .header("cookie", "a=1")
            .header("cookie", "b=2")
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap();
        let resp = sender.send_request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        let body = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .unwrap()
            .to_bytes();
        let echo: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(echo["path"], "/h2?x=1");
        assert_eq!(echo["host"], "app.example");
        assert_eq!(echo["proto"], "HTTP/1.1");
        assert_eq!(echo["headers"]["cookie"][0], "a=1; b=2");
    }
    proxy.shutdown().await;
}

#[tokio::test]
async fn admin_serves_metrics_and_readiness() {
    let mut registry = prometheus_client::registry::Registry::default();
    let dp = switchyard_proxy::DataPlane::new(test_settings(), &mut registry);
    let registry = Arc::new(registry);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let ready_dp = Arc::clone(&dp);
    let admin = tokio::spawn(switchyard_admin_http::serve(
        listener,
        registry,
        move || ready_dp.has_config(),
        async move {
            let _ = stopped.await;
        },
    ));
    let reply = send(addr, get("admin", "/ready")).await.unwrap();
    assert_eq!(reply.status, 503);
    dp.install(switchyard_proxy::ServingConfig {
        snapshot: Arc::new(ConfigSnapshot {
            version: 42,
            ..Default::default()
        }),
        routes: Vec::new(),
    });
    let reply = send(addr, get("admin", "/ready")).await.unwrap();
    assert_eq!(reply.status, 200);
    let reply = send(addr, get("admin", "/metrics")).await.unwrap();
    assert_eq!(reply.status, 200);
    let text = String::from_utf8_lossy(&reply.body);
    assert!(
        text.contains("switchyard_proxy_config_version 42"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE switchyard_proxy_downstream_connections gauge"),
        "{text}"
    );
    let reply = send(addr, get("admin", "/nope")).await.unwrap();
    assert_eq!(reply.status, 404);
    let _ = stop.send(());
    admin.await.unwrap().unwrap();
}

/// The coordinators bump a Service's endpoint generation on every change
/// to it or its slices, so the proxy resolves a backend again only when
/// its generation moved (an install of 10,000 routes that moved one
/// Service's endpoints resolves one backend). A configuration from a file
/// carries no generations (0) and is always resolved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_are_resolved_again_when_their_generation_moves() {
    let pods = [
        start_echo(NS, "app", 0).await,
        start_echo(NS, "app", 1).await,
    ];
    let proxy = Proxy::start(test_settings(), vec![simple_listener(NS)]).await;
    let (snapshot, routes) = config(&[pods[0].addr], None);
    proxy.install(snapshot, routes.clone());
    proxy.wait_healthy(&[(key(), 1)]).await;

    // Same generation, more slices: not what a coordinator sends; the
    // proxy takes the generation at its word and keeps the endpoint set.
    let (mut same, _) = config(&[pods[0].addr, pods[1].addr], None);
    same.version = 2;
    proxy.install(same.clone(), routes.clone());
    assert_eq!(proxy.dp.readiness(&key()).unwrap().total, 1);

    // The generation moves: the new endpoint is taken.
    same.version = 3;
    same.endpoint_generations
        .bump(ObjectName::new(NS, "app"), 6);
    proxy.install(same, routes.clone());
    proxy.wait_healthy(&[(key(), 2)]).await;

    // A file configuration (no generations at all) is always resolved.
    let (mut file, _) = config(&[pods[1].addr], None);
    file.endpoint_generations = Default::default();
    proxy.install(file.clone(), routes.clone());
    assert_eq!(proxy.dp.readiness(&key()).unwrap().total, 1);
    let (mut file2, _) = config(&[pods[0].addr, pods[1].addr], None);
    file2.endpoint_generations = Default::default();
    proxy.install(file2, routes);
    assert_eq!(proxy.dp.readiness(&key()).unwrap().total, 2);
    proxy.shutdown().await;
}
