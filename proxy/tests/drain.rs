//! Drain: when the proxy shuts down, requests in flight finish (HTTP/1.1
//! answers say `Connection: close`, HTTP/2 gets GOAWAY), idle keep-alive
//! connections close after the grace period, and no new connection is
//! accepted. When a backend stops being served, its requests in flight
//! finish and its connections close afterwards.
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use support::client::{Conn, get, send};
use support::echo::{Echo, start_echo};
use support::*;
use switchyard_proto::model::{BackendKey, ConfigSnapshot, HttpRoute, Resource};

const NS: &str = "drain";

fn config(backends: &[(&str, SocketAddr)], route_to: &str) -> (ConfigSnapshot, Vec<HttpRoute>) {
    let (mut snapshot, _) = snapshot_of(1, parse_yaml(&simple_gateway_yaml(NS)));
    snapshot.gateway_classes.push(gateway_class());
    snapshot.namespaces.push(namespace(NS, &[]));
    for (name, addr) in backends {
        snapshot.services.push(service(NS, name, 8080, 1));
        snapshot
            .endpoint_slices
            .extend(slices(NS, name, &[*addr], 1));
    }
    let routes = parse_yaml(&simple_route_yaml(NS, "app", route_to))
        .into_iter()
        .filter_map(|r| match r {
            Resource::HttpRoute(r) => Some(r),
            _ => None,
        })
        .collect();
    (snapshot, routes)
}

async fn wait_active(echo: &Echo, n: usize) {
    let active = Arc::clone(&echo.active);
    eventually(
        "slow requests reached the backend",
        Duration::from_secs(5),
        || {
            let active = Arc::clone(&active);
            async move {
                let now = active.load(Ordering::Relaxed);
                anyhow::ensure!(now == n, "{now} in progress");
                Ok(())
            }
        },
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_in_flight_requests_and_closes_idle_connections() {
    let pod = start_echo(NS, "app", 0).await;
    let mut proxy = Proxy::start(test_settings(), vec![simple_listener(NS)]).await;
    let addr = proxy.addrs[0];
    let (snapshot, routes) = config(&[("app", pod.addr)], "app");
    proxy.install(snapshot, routes);
    proxy
        .wait_healthy(&[(BackendKey::new(NS, "app", 8080), 1)])
        .await;

    // An idle keep-alive connection.
    let mut idle = Conn::connect(addr).await.unwrap();
    assert_eq!(
        idle.send(get("app.example", "/")).await.unwrap().status,
        200
    );
    // A slow HTTP/1.1 request and a slow HTTP/2 request in flight.
    let h1 = tokio::spawn(async move {
        let mut conn = Conn::connect(addr).await.unwrap();
        conn.send(get("app.example", "/slow?delay_ms=400"))
            .await
            .unwrap()
    });
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut h2_sender, h2_conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    let h2_conn = tokio::spawn(h2_conn);
    let h2 = tokio::spawn(async move {
        let req = http::Request::get("http://app.example/slow?delay_ms=400")
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap();
        let resp = h2_sender.send_request(req).await.unwrap();
        resp.status()
    });
    wait_active(&pod, 2).await;

    let started = tokio::time::Instant::now();
    let serving = proxy.begin_shutdown();
    let reply = h1.await.unwrap();
    assert_eq!(reply.status, 200);
    assert!(
        reply.closes(),
        "last HTTP/1.1 answer must say Connection: close"
    );
    assert_eq!(h2.await.unwrap(), 200);
    // GOAWAY: the HTTP/2 connection ends cleanly once its stream is done.
    tokio::time::timeout(Duration::from_secs(5), h2_conn)
        .await
        .expect("h2 connection closed")
        .unwrap()
        .unwrap();
    // The idle connection is closed after the grace period, not at once.
    tokio::time::timeout(Duration::from_secs(5), serving)
        .await
        .expect("serve returned")
        .unwrap()
        .unwrap();
    let took = started.elapsed();
    assert!(
        took >= test_settings().drain_idle_grace,
        "idle connection closed too early ({took:?})"
    );
    eventually("idle connection closed", Duration::from_secs(2), || {
        let closed = idle.is_closed();
        async move {
            anyhow::ensure!(closed, "still open");
            Ok(())
        }
    })
    .await
    .unwrap();
    // No new connections.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_that_stops_being_served_drains() {
    let blue = start_echo(NS, "blue", 0).await;
    let green = start_echo(NS, "green", 0).await;
    let proxy = Proxy::start(test_settings(), vec![simple_listener(NS)]).await;
    let addr = proxy.addrs[0];
    let backends = [("blue", blue.addr), ("green", green.addr)];
    let green_key = BackendKey::new(NS, "green", 8080);
    proxy.dp.set_warming(keys(&[&green_key]));
    let (snapshot, routes) = config(&backends, "blue");
    proxy.install(snapshot, routes);
    proxy
        .wait_healthy(&[(BackendKey::new(NS, "blue", 8080), 1), (green_key, 1)])
        .await;

    let slow =
        tokio::spawn(async move { send(addr, get("app.example", "/slow?delay_ms=400")).await });
    wait_active(&blue, 1).await;
    let (mut snapshot, routes) = config(&backends, "green");
    snapshot.version = 2;
    proxy.install(snapshot, routes);
    proxy.dp.set_warming(Default::default());
    assert_eq!(proxy.dp.readiness(&BackendKey::new(NS, "blue", 8080)), None);

    // New requests go to green while blue's request is still running.
    let reply = send(addr, get("app.example", "/")).await.unwrap();
    assert_eq!(reply.pod().unwrap(), green.pod);
    let reply = slow.await.unwrap().unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.pod().unwrap(), blue.pod);
    // Then blue's pool closes: no connection to it stays open.
    let open = Arc::clone(&blue.open);
    eventually("blue connections closed", Duration::from_secs(5), || {
        let open: Arc<AtomicUsize> = Arc::clone(&open);
        async move {
            let now = open.load(Ordering::Relaxed);
            anyhow::ensure!(now == 0, "{now} open");
            Ok(())
        }
    })
    .await
    .unwrap();
    proxy.shutdown().await;
}
