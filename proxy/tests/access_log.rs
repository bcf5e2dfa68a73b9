//! The access log through a real data plane writing to a file: a routed
//! request, an unrouted 404, a request to a backend whose endpoint refuses
//! connections, a malformed path (400), a head over the limit (431, which
//! hyper answers itself) and a WebSocket tunnel each get one JSON line
//! with what happened to them; the lines are all in the file once `serve`
//! has returned.

mod support;

use serde_json::Value;
use std::net::SocketAddr;
use std::time::Duration;
use support::client::{Conn, get};
use support::echo::start_echo;
use support::raw::exchange;
use support::upgrade::{Mode, open, start_upgrade_echo, websocket_request};
use support::*;
use switchyard_proto::model::{BackendKey, ConfigSnapshot, HttpRoute, ObjectName};
use switchyard_proxy::{AccessLogTarget, DataPlaneSettings, HealthSettings};

const NS: &str = "acc";

/// Routes by hostname: `app.example` to `app`, `dead.example` to `dead`,
/// `ws.example` to `ws`; every other host has no route.
fn config(app: SocketAddr, dead: SocketAddr, ws: SocketAddr) -> (ConfigSnapshot, Vec<HttpRoute>) {
    let mut text = simple_gateway_yaml(NS);
    for name in ["app", "dead", "ws"] {
        text.push_str(&format!(
            r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: {NS}}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [{name}.example]
  rules:
  - backendRefs: [{{name: {name}, port: 8080}}]
"#
        ));
    }
    let (mut snapshot, routes) = snapshot_of(1, parse_yaml(&text));
    snapshot.gateway_classes.push(gateway_class());
    snapshot.namespaces.push(namespace(NS, &[]));
    for (name, addr) in [("app", app), ("dead", dead), ("ws", ws)] {
        snapshot.services.push(service(NS, name, 8080, 1));
        snapshot
            .endpoint_slices
            .extend(slices(NS, name, &[addr], 1));
        snapshot
            .endpoint_generations
            .bump(ObjectName::new(NS, name), 1);
    }
    (snapshot, routes)
}

fn key(name: &str) -> BackendKey {
    BackendKey::new(NS, name, 8080)
}

/// The one line whose `field` is `value`.
fn line<'a>(lines: &'a [Value], field: &str, value: &str) -> &'a Value {
    let found: Vec<_> = lines.iter().filter(|l| l[field] == value).collect();
    assert_eq!(found.len(), 1, "{field}={value} in {lines:#?}");
    found[0]
}

fn ms(line: &Value, field: &str) -> f64 {
    line[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} in {line}"))
}

/// Durations are numbers, not negative, and the total covers the head.
fn timed(line: &Value) {
    let headers = ms(line, "duration_headers_ms");
    let total = ms(line, "duration_ms");
    assert!(headers >= 0.0 && total >= headers, "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_gets_one_line_saying_what_happened_to_it() {
    let app = start_echo(NS, "app", 0).await;
    let doomed = start_echo(NS, "dead", 0).await;
    let dead = doomed.addr;
    let ws = start_upgrade_echo("ws-0", Mode::Switch).await;
    // Health checks run once, at start: the dead endpoint stays "healthy"
    // after it stops, so requests reach it and fail to connect.
    let settings = DataPlaneSettings {
        health: HealthSettings {
            interval: Duration::from_secs(3600),
            ..test_settings().health
        },
        max_header_bytes: 16 * 1024,
        ..test_settings()
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.json");
    let proxy = Proxy::start(settings, vec![simple_listener(NS)]).await;
    proxy
        .dp
        .open_access_log(&AccessLogTarget::File(path.clone()))
        .unwrap();
    assert!(
        proxy
            .dp
            .open_access_log(&AccessLogTarget::File(path.clone()))
            .is_err(),
        "a second access log"
    );
    let (snapshot, routes) = config(app.addr, dead, ws.addr);
    proxy.install(snapshot, routes);
    proxy
        .wait_healthy(&[(key("app"), 1), (key("dead"), 1), (key("ws"), 1)])
        .await;
    doomed.kill().await;
    assert!(
        tokio::net::TcpStream::connect(dead).await.is_err(),
        "the dead endpoint still accepts"
    );
    let addr = proxy.addrs[0];

    // Routed, with a body, on a path the proxy normalizes.
    let mut conn = Conn::connect(addr).await.unwrap();
    let req = http::Request::post("/shop/../cart?item=1")
        .header("host", "app.example")
        .body(http_body_util::Full::new(bytes::Bytes::from_static(
            b"hello",
        )))
        .unwrap();
    let routed = conn.send(req).await.unwrap();
    assert_eq!(routed.status, 200);
    // No route for this host.
    let unrouted = conn.send(get("nobody.example", "/x")).await.unwrap();
    assert_eq!(unrouted.status, 404);
    // The endpoint refuses connections.
    let failed = conn.send(get("dead.example", "/")).await.unwrap();
    assert_eq!(failed.status, 502);
    // A path the proxy refuses (an encoded slash).
    let bad = conn.send(get("app.example", "/a%2Fb")).await.unwrap();
    assert_eq!(bad.status, 400);
    drop(conn);
    // A head over the limit: hyper answers 431 before any request exists.
    let big = "x".repeat(32 * 1024);
    let head = format!("GET / HTTP/1.1\r\nHost: app.example\r\nX-Big: {big}\r\n\r\n");
    let refused = exchange(addr, head.as_bytes()).await.unwrap();
    assert_eq!(refused.status, 431);
    // A WebSocket handshake the backend accepts: a tunnel.
    let (switched, stream) = open(addr, &websocket_request("ws.example", "/chat", ""))
        .await
        .unwrap();
    assert_eq!(switched.status, 101);
    drop(stream);

    // The drain ends with the log flushed.
    proxy.shutdown().await;
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    // Health checks are not requests of clients: six lines, no more.
    assert_eq!(lines.len(), 6, "{text}");
    for l in &lines {
        let ts = l["timestamp"].as_str().unwrap();
        assert!(
            ts.len() == 27 && ts.as_bytes()[10] == b'T' && ts.ends_with('Z'),
            "{ts}"
        );
        assert_eq!(l["listener"], "acc/gw:80");
        assert!(
            l["client"].as_str().unwrap().starts_with("127.0.0.1:"),
            "{l}"
        );
    }

    let l = line(&lines, "route", "acc/app");
    assert_eq!(l["status"], 200);
    assert_eq!(l["method"], "POST");
    assert_eq!(l["host"], "app.example");
    assert_eq!(l["path"], "/cart", "normalized, without the query");
    assert_eq!(l["version"], "HTTP/1.1");
    assert_eq!(l["rule"], 0);
    assert_eq!(l["backend"], "acc/app:8080");
    assert_eq!(l["endpoint"], app.addr.to_string());
    assert_eq!(l["bytes_received"], 5);
    assert_eq!(l["bytes_sent"], routed.body.len() as u64);
    assert_eq!(l["complete"], true);
    assert_eq!(l["upgrade"], false);
    assert!(l["error"].is_null() && l["direct"].is_null(), "{l}");
    timed(l);

    let l = line(&lines, "host", "nobody.example");
    assert_eq!(l["status"], 404);
    assert_eq!(l["path"], "/x");
    assert!(l["route"].is_null() && l["backend"].is_null(), "{l}");
    assert!(l["endpoint"].is_null() && l["rule"].is_null(), "{l}");
    assert_eq!(l["direct"]["kind"], "no_route");
    assert_eq!(l["bytes_sent"], unrouted.body.len() as u64);
    timed(l);

    let l = line(&lines, "route", "acc/dead");
    assert_eq!(l["status"], 502);
    assert_eq!(l["backend"], "acc/dead:8080");
    assert_eq!(l["endpoint"], dead.to_string());
    assert_eq!(l["error"]["kind"], "connect");
    assert_eq!(l["error"]["blame"], "upstream");
    let detail = l["error"]["detail"].as_str().unwrap();
    assert!(detail.contains("connect failed"), "{detail}");
    timed(l);

    let l = line(&lines, "path", "/a%2Fb");
    assert_eq!(l["status"], 400);
    assert!(l["route"].is_null(), "{l}");
    assert_eq!(l["error"]["blame"], "downstream");
    timed(l);

    let l = line(&lines, "route", "acc/ws");
    assert_eq!(l["status"], 101);
    assert_eq!(l["upgrade"], true);
    assert_eq!(l["endpoint"], ws.addr.to_string());
    assert_eq!(l["path"], "/chat");
    timed(l);

    let l = lines.iter().find(|l| l["status"] == 431).unwrap();
    assert!(l["method"].is_null() && l["path"].is_null(), "{l}");
    assert!(l["duration_ms"].is_null(), "{l}");
    assert_eq!(l["error"]["kind"], "head_too_large");
}
