//! What a hostile client sends, byte for byte, through a real proxy on
//! 127.0.0.1, and what comes out: the status, and what the backend
//! received (the echo backends describe every request they get).
//!
//! - Paths are normalized once, routed and forwarded normalized: every
//!   spelling of `/admin` reaches the admin backend as `/admin`, no
//!   spelling escapes a route or a rewrite, and what cannot be normalized
//!   safely is 400.
//! - Host: duplicates, a missing Host on HTTP/1.1 and malformed values are
//!   400; an absolute-form target routes by its authority; an HTTP/2
//!   `host` that disagrees with `:authority` is 400.
//! - `Connection` options cannot strip Host, Content-Length, Authorization
//!   or what a filter set.
//! - Forwarding headers carry the real peer, not the client's claims
//!   (and keep what trusted hops wrote).
//! - Reasons given to clients name no route, Service or namespace.
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

mod support;

use std::net::SocketAddr;
use support::echo::{Echo, start_echo};
use support::raw::{RawReply, exchange};
use support::*;
use switchyard_proto::model::BackendKey;
use switchyard_proxy::DataPlaneSettings;

const NS: &str = "hostile";

const ROUTES: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app-routes, namespace: hostile}
spec:
  parentRefs: [{name: gw}]
  hostnames: [app.example]
  rules:
  - matches: [{path: {type: PathPrefix, value: /admin}}]
    backendRefs: [{name: admin, port: 8080}]
  - matches: [{path: {type: PathPrefix, value: /rw}}]
    filters:
    - type: URLRewrite
      urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /internal}}
    backendRefs: [{name: public, port: 8080}]
  - matches: [{path: {type: PathPrefix, value: /broken}}]
    backendRefs: [{name: secret-missing-svc, port: 8080}]
  - matches: [{path: {type: PathPrefix, value: /down}}]
    backendRefs: [{name: secret-down-svc, port: 8080}]
  - filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: X-Filter, value: set-by-filter}]}
    backendRefs: [{name: public, port: 8080}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: other-routes, namespace: hostile}
spec:
  parentRefs: [{name: gw}]
  hostnames: [other.example]
  rules:
  - backendRefs: [{name: other, port: 8080}]
"#;

/// A proxy routing `app.example` and `other.example` to echo backends.
struct World {
    proxy: Proxy,
    _echos: Vec<Echo>,
}

impl World {
    async fn start(settings: DataPlaneSettings) -> World {
        let admin = start_echo(NS, "admin", 0).await;
        let public = start_echo(NS, "public", 0).await;
        let other = start_echo(NS, "other", 0).await;
        let down = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let down_addr = down.local_addr().unwrap();
        drop(down);
        let mut text = simple_gateway_yaml(NS);
        text.push_str("---\n");
        text.push_str(ROUTES);
        let (mut snapshot, routes) = snapshot_of(1, parse_yaml(&text));
        snapshot.gateway_classes.push(gateway_class());
        snapshot.namespaces.push(namespace(NS, &[]));
        for (name, addr) in [
            ("admin", admin.addr),
            ("public", public.addr),
            ("other", other.addr),
            ("secret-down-svc", down_addr),
        ] {
            snapshot.services.push(service(NS, name, 8080, 1));
            snapshot
                .endpoint_slices
                .extend(slices(NS, name, &[addr], 1));
        }
        let proxy = Proxy::start(settings, vec![simple_listener(NS)]).await;
        proxy.install(snapshot, routes);
        proxy
            .wait_healthy(&[
                (BackendKey::new(NS, "admin", 8080), 1),
                (BackendKey::new(NS, "public", 8080), 1),
                (BackendKey::new(NS, "other", 8080), 1),
            ])
            .await;
        World {
            proxy,
            _echos: vec![admin, public, other],
        }
    }

    fn addr(&self) -> SocketAddr {
        self.proxy.addrs[0]
    }

    /// `GET target` with the given header lines (each ending in CRLF).
    async fn get(&self, target: &str, header_lines: &str) -> RawReply {
        let request = format!("GET {target} HTTP/1.1\r\n{header_lines}Connection: close\r\n\r\n");
        exchange(self.addr(), request.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("{target}: {e:#}"))
    }

    /// `GET path` for `app.example`.
    async fn app(&self, path: &str) -> RawReply {
        self.get(path, "Host: app.example\r\n").await
    }
}

/// The echo pod's service and the path it received.
fn landed(reply: &RawReply) -> (String, String) {
    let json = reply.json().unwrap();
    let pod = json["pod"].as_str().unwrap().to_owned();
    let service = pod.split('-').next().unwrap().to_owned();
    (service, json["path"].as_str().unwrap().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spelling_of_a_path_routes_and_forwards_as_its_normal_form() {
    let world = World::start(test_settings()).await;
    for spelling in [
        "/foo/../admin",
        "/./admin",
        "/%61dmin",
        "//admin",
        "/%2e%2E/admin",
        "/x/%2E%2E/admin",
    ] {
        let reply = world.app(spelling).await;
        assert_eq!(reply.status, 200, "{spelling}: {reply:?}");
        assert_eq!(
            landed(&reply),
            ("admin".into(), "/admin".into()),
            "{spelling}"
        );
    }
    // Out of the admin prefix: the catch-all gets the normalized path.
    for (spelling, want) in [
        ("/admin/../public", "/public"),
        ("/admin/%2e%2e/x", "/x"),
        ("/admin/./../x?q=/../y", "/x?q=/../y"),
    ] {
        let reply = world.app(spelling).await;
        assert_eq!(reply.status, 200, "{spelling}: {reply:?}");
        assert_eq!(landed(&reply), ("public".into(), want.into()), "{spelling}");
    }
    // A rewrite works on the normalized path: nothing climbs out of it.
    let reply = world.app("/rw/../../etc/passwd").await;
    assert_eq!(landed(&reply), ("public".into(), "/etc/passwd".into()));
    let reply = world.app("/rw/a/./../b%7e").await;
    assert_eq!(landed(&reply), ("public".into(), "/internal/b~".into()));
    // Encodings that stay encoded are upper-cased; UTF-8 is encoded.
    let reply = world.app("/caf%c3%a9").await;
    assert_eq!(landed(&reply).1, "/caf%C3%A9");
    let reply = world.app("/caf\u{e9}").await;
    assert_eq!(landed(&reply).1, "/caf%C3%A9");
    // What cannot be normalized safely never reaches a backend.
    for spelling in [
        "/x/..%2fadmin",
        "/x/..%2Fadmin",
        "/x%5c..%5cadmin",
        "/a\\..\\admin",
        "/a%zz",
        "/a%4",
        "/admin%",
    ] {
        let reply = world.app(spelling).await;
        assert_eq!(reply.status, 400, "{spelling}: {reply:?}");
        assert!(
            reply.text().starts_with("bad request"),
            "{spelling}: {reply:?}"
        );
    }
    world.proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_must_be_one_valid_host_and_absolute_targets_win() {
    let world = World::start(test_settings()).await;
    let ok = world.get("/x", "Host: app.example\r\n").await;
    assert_eq!(ok.status, 200);
    for (what, lines) in [
        (
            "two Host headers",
            "Host: app.example\r\nHost: other.example\r\n",
        ),
        (
            "two equal Host headers",
            "Host: app.example\r\nHost: app.example\r\n",
        ),
        ("no Host", ""),
        ("userinfo", "Host: user@app.example\r\n"),
        ("port not a number", "Host: app.example:abc\r\n"),
        ("port too large", "Host: app.example:65536\r\n"),
    ] {
        let reply = world.get("/x", lines).await;
        assert_eq!(reply.status, 400, "{what}: {reply:?}");
        assert!(reply.text().contains("Host"), "{what}: {reply:?}");
    }
    // Absolute form: routed by the target, and the backend gets a Host
    // that agrees with it.
    let reply = world
        .get("http://other.example/abs", "Host: app.example\r\n")
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let json = reply.json().unwrap();
    assert!(json["pod"].as_str().unwrap().starts_with("other"), "{json}");
    assert_eq!(json["host"], "other.example");
    assert_eq!(json["path"], "/abs");
    assert_eq!(json["headers"]["host"].as_array().unwrap().len(), 1);
    let reply = world
        .get("http://user@other.example/abs", "Host: other.example\r\n")
        .await;
    assert_eq!(reply.status, 400, "{reply:?}");
    // HTTP/1.0 may omit Host: served (here: no route for an empty host).
    let reply = exchange(world.addr(), b"GET /x HTTP/1.0\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(reply.status, 404, "{reply:?}");
    world.proxy.shutdown().await;
}

/// Sends one HTTP/2 (prior knowledge) GET for `uri` with `host` headers.
async fn h2_get(addr: SocketAddr, uri: &str, hosts: &[&str]) -> (u16, String) {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let mut req = http::Request::get(uri);
    for h in hosts {
        req = req.header("host", *h);
    }
    let req = req
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_host_must_agree_with_authority() {
    let world = World::start(test_settings()).await;
    let addr = world.addr();
    let (status, body) = h2_get(addr, "http://app.example/h2", &[]).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = h2_get(addr, "http://app.example/h2", &["app.example:80"]).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = h2_get(addr, "http://app.example/h2", &["other.example"]).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains(":authority"), "{body}");
    let (status, body) = h2_get(addr, "http://app.example/h2", &["app.example:8080"]).await;
    assert_eq!(status, 400, "{body}");
    world.proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_options_cannot_strip_end_to_end_headers() {
    let world = World::start(test_settings()).await;
    let request = "POST /conn HTTP/1.1\r\n\
        Host: app.example\r\n\
        Connection: host, content-length, authorization, x-filter, x-forwarded-for, x-drop-me, close\r\n\
        Authorization: Bearer t0ken\r\n\
        X-Filter: from-client\r\n\
        X-Drop-Me: 1\r\n\
        Keep-Alive: timeout=5\r\n\
        Content-Length: 5\r\n\
        \r\n\
        hello";
    let reply = exchange(world.addr(), request.as_bytes()).await.unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
    let json = reply.json().unwrap();
    let headers = &json["headers"];
    assert_eq!(json["host"], "app.example", "{json}");
    assert_eq!(headers["content-length"][0], "5", "{json}");
    assert_eq!(headers["authorization"][0], "Bearer t0ken", "{json}");
    assert_eq!(headers["x-filter"][0], "set-by-filter", "{json}");
    assert_eq!(headers["x-forwarded-for"][0], "127.0.0.1", "{json}");
    for gone in ["x-drop-me", "keep-alive", "connection"] {
        assert!(
            headers.get(gone).is_none(),
            "{gone} reached the backend: {json}"
        );
    }
    world.proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarding_headers_name_the_peer_not_the_clients_claims() {
    let world = World::start(test_settings()).await;
    let lines = "Host: app.example\r\n\
        X-Forwarded-For: 6.6.6.6\r\n\
        Forwarded: for=6.6.6.6;proto=https\r\n\
        X-Forwarded-Proto: https\r\n";
    let reply = world.get("/fwd", lines).await;
    let headers = &reply.json().unwrap()["headers"];
    assert_eq!(headers["x-forwarded-for"], serde_json::json!(["127.0.0.1"]));
    assert_eq!(
        headers["forwarded"],
        serde_json::json!(["for=127.0.0.1;proto=http"])
    );
    assert_eq!(headers["x-forwarded-proto"], serde_json::json!(["http"]));
    // Without any: added.
    let reply = world.get("/fwd", "Host: app.example\r\n").await;
    let headers = &reply.json().unwrap()["headers"];
    assert_eq!(headers["x-forwarded-for"], serde_json::json!(["127.0.0.1"]));
    world.proxy.shutdown().await;

    // One trusted proxy in front: its entry stays, the client's before it
    // goes, the peer is appended.
    let world = World::start(DataPlaneSettings {
        trusted_hops: 1,
        ..test_settings()
    })
    .await;
    let lines = "Host: app.example\r\n\
        X-Forwarded-For: 6.6.6.6, 203.0.113.9\r\n\
        Forwarded: for=6.6.6.6, for=203.0.113.9;proto=https\r\n\
        X-Forwarded-Proto: https\r\n";
    let reply = world.get("/fwd", lines).await;
    let headers = &reply.json().unwrap()["headers"];
    assert_eq!(
        headers["x-forwarded-for"],
        serde_json::json!(["203.0.113.9, 127.0.0.1"])
    );
    assert_eq!(
        headers["forwarded"],
        serde_json::json!(["for=203.0.113.9;proto=https, for=127.0.0.1;proto=http"])
    );
    assert_eq!(headers["x-forwarded-proto"], serde_json::json!(["https"]));
    world.proxy.shutdown().await;
}

/// Names of the configuration a client must not learn.
const SECRETS: [&str; 6] = [
    "hostile",
    "app-routes",
    "secret-missing-svc",
    "secret-down-svc",
    "rule",
    "8080",
];

fn assert_generic(what: &str, reply: &RawReply, want_status: u16, want_reason: &str) {
    assert_eq!(reply.status, want_status, "{what}: {reply:?}");
    let reason = reply.header("x-switchyard-reason").unwrap_or_default();
    assert_eq!(reason, want_reason, "{what}");
    assert_eq!(reply.text().trim(), want_reason, "{what}");
    for secret in SECRETS {
        assert!(
            !reason.contains(secret),
            "{what}: {reason:?} names {secret}"
        );
        assert!(
            !reply.text().contains(secret),
            "{what}: body names {secret}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_get_generic_reasons_and_operators_can_opt_in() {
    let world = World::start(test_settings()).await;
    let reply = world.get("/", "Host: nobody.example\r\n").await;
    assert_generic("unknown host", &reply, 404, "no matching route");
    let reply = world.app("/broken").await;
    assert_generic(
        "missing Service",
        &reply,
        500,
        "the matching route has no valid backend",
    );
    let reply = world.app("/down").await;
    assert_generic(
        "no ready endpoint",
        &reply,
        503,
        "backend has no ready endpoint",
    );
    world.proxy.shutdown().await;

    let world = World::start(DataPlaneSettings {
        expose_reasons: true,
        ..test_settings()
    })
    .await;
    let reply = world.app("/broken").await;
    assert_eq!(reply.status, 500);
    let reason = reply.header("x-switchyard-reason").unwrap();
    assert!(reason.contains("hostile/app-routes"), "{reason}");
    let reply = world.app("/down").await;
    let reason = reply.header("x-switchyard-reason").unwrap();
    assert!(reason.contains("hostile/secret-down-svc:8080"), "{reason}");
    world.proxy.shutdown().await;
}
