//! Bad input from clients and bad behaviour from backends get the right
//! answer, quickly, and the proxy keeps serving good requests afterwards.
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};
use support::client::{get, send};
use support::echo::{start_echo, start_scripted};
use support::*;
use switchyard_proto::model::{BackendKey, ConfigSnapshot, HttpRoute};
use switchyard_proxy::DataPlaneSettings;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const NS: &str = "bad";
const HEADER_READ_TIMEOUT: Duration = Duration::from_millis(500);
const REQUEST_TIMEOUT: Duration = Duration::from_millis(700);

fn settings() -> DataPlaneSettings {
    DataPlaneSettings {
        max_header_bytes: 16 * 1024,
        header_read_timeout: HEADER_READ_TIMEOUT,
        request_timeout: REQUEST_TIMEOUT,
        ..test_settings()
    }
}

const ROUTE: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app, namespace: bad}
spec:
  parentRefs: [{name: gw}]
  hostnames: [app.example]
  rules:
  - matches: [{path: {type: PathPrefix, value: /reset}}, {path: {type: PathPrefix, value: /hang}}]
    backendRefs: [{name: scripted, port: 8080}]
  - matches: [{path: {type: PathPrefix, value: /dead}}]
    backendRefs: [{name: dead, port: 8080}]
  - backendRefs: [{name: good, port: 8080}]
"#;

fn config(
    good: SocketAddr,
    scripted: SocketAddr,
    dead: SocketAddr,
) -> (ConfigSnapshot, Vec<HttpRoute>) {
    let mut text = simple_gateway_yaml(NS);
    text.push_str("---\n");
    text.push_str(ROUTE);
    let (mut snapshot, routes) = snapshot_of(1, parse_yaml(&text));
    snapshot.gateway_classes.push(gateway_class());
    snapshot.namespaces.push(namespace(NS, &[]));
    for (name, addr) in [("good", good), ("scripted", scripted), ("dead", dead)] {
        snapshot.services.push(service(NS, name, 8080, 1));
        snapshot
            .endpoint_slices
            .extend(slices(NS, name, &[addr], 1));
    }
    (snapshot, routes)
}

/// A port nothing listens on.
async fn closed_port() -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap()
}

/// Writes `bytes`, then reads until EOF (or 3 s); returns what was read.
async fn raw_exchange(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    // The server may answer and close before reading everything.
    let _ = stream.write_all(bytes).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(3), stream.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

async fn assert_good(addr: SocketAddr) {
    let reply = send(addr, get("app.example", "/ok")).await.unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
    assert!(reply.pod().unwrap().starts_with("good"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_the_right_status_quickly_and_the_proxy_stays_up() {
    let good = start_echo(NS, "good", 0).await;
    let (scripted, _stop) = start_scripted().await;
    let dead = closed_port().await;
    let proxy = Proxy::start(settings(), vec![simple_listener(NS)]).await;
    let addr = proxy.addrs[0];
    let (snapshot, routes) = config(good.addr, scripted, dead);
    proxy.install(snapshot, routes);
    proxy
        .wait_healthy(&[
            (BackendKey::new(NS, "good", 8080), 1),
            (BackendKey::new(NS, "scripted", 8080), 1),
        ])
        .await;
    assert_good(addr).await;

    // Oversized request head: 431 (hyper's answer when the head outgrows
    // the limit), connection closed.
    let started = Instant::now();
    let big = "x".repeat(32 * 1024);
    let request = format!("GET / HTTP/1.1\r\nHost: app.example\r\nX-Big: {big}\r\n\r\n");
    let answer = raw_exchange(addr, request.as_bytes()).await;
    assert!(
        answer.starts_with("HTTP/1.1 431"),
        "oversized head got {answer:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_good(addr).await;

    // Malformed HTTP: 400.
    let answer = raw_exchange(addr, b"GET / HTTP/1.1\r\nBad Header Line\r\n\r\n").await;
    assert!(
        answer.starts_with("HTTP/1.1 400"),
        "malformed got {answer:?}"
    );
    let answer = raw_exchange(addr, b"\x16\x03\x01\x02\x00garbage\r\n\r\n").await;
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 400"),
        "binary garbage got {answer:?}"
    );
    assert_good(addr).await;

    // Unknown host: the router's 404, with a generic reason (clients are
    // not told which listeners or routes exist).
    let reply = send(addr, get("nobody.example", "/")).await.unwrap();
    assert_eq!(reply.status, 404);
    assert_eq!(reply.headers["x-switchyard-reason"], "no matching route");
    assert_good(addr).await;

    // A backend that resets connections: 502, quickly.
    let started = Instant::now();
    let reply = send(addr, get("app.example", "/reset")).await.unwrap();
    assert_eq!(reply.status, 502, "{reply:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_good(addr).await;

    // A backend that never answers: 504 once the request timeout passed.
    let started = Instant::now();
    let reply = send(addr, get("app.example", "/hang")).await.unwrap();
    let took = started.elapsed();
    assert_eq!(reply.status, 504, "{reply:?}");
    assert!(
        took >= REQUEST_TIMEOUT && took < REQUEST_TIMEOUT + Duration::from_secs(2),
        "504 after {took:?}"
    );
    assert_good(addr).await;

    // A backend with no reachable endpoint: never passes a health check,
    // so 503 with a reason, without trying. The reason does not name the
    // Service.
    let reply = send(addr, get("app.example", "/dead")).await.unwrap();
    assert_eq!(reply.status, 503, "{reply:?}");
    let reason = reply.headers["x-switchyard-reason"].to_str().unwrap();
    assert_eq!(reason, "backend has no ready endpoint");
    assert_good(addr).await;

    // A head sent one byte at a time is cut off by the header read
    // timeout (hyper may say 408 first).
    let started = Instant::now();
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let writer = tokio::spawn(async move {
        let head = format!(
            "GET / HTTP/1.1\r\nHost: app.example\r\nX-Slow: {}\r\n\r\n",
            "s".repeat(200)
        );
        for byte in head.bytes() {
            if write.write_all(&[byte]).await.is_err() {
                return;
            }
            // This sleep is the test: a byte every 25 ms.
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    });
    let mut out = Vec::new();
    let read_result =
        tokio::time::timeout(Duration::from_secs(3), read.read_to_end(&mut out)).await;
    let took = started.elapsed();
    writer.abort();
    assert!(read_result.is_ok(), "slow head not cut off within 3 s");
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "slow head got {text:?}"
    );
    assert!(
        took < HEADER_READ_TIMEOUT + Duration::from_millis(1500),
        "cut off after {took:?}"
    );
    // A client that connects and says nothing is cut off too.
    let started = Instant::now();
    let answer = raw_exchange(addr, b"").await;
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer:?}"
    );
    assert!(started.elapsed() < HEADER_READ_TIMEOUT + Duration::from_millis(1500));
    assert_good(addr).await;

    proxy.shutdown().await;
}

#[tokio::test]
async fn before_any_configuration_the_proxy_says_why_it_cannot_serve() {
    let proxy = Proxy::start(test_settings(), vec![simple_listener(NS)]).await;
    assert!(!proxy.dp.has_config());
    let reply = send(proxy.addrs[0], get("app.example", "/")).await.unwrap();
    assert_eq!(reply.status, 503);
    assert_eq!(
        reply.headers["x-switchyard-reason"],
        "no configuration received yet"
    );
    proxy.shutdown().await;
}
