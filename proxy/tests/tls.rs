//! HTTPS listeners through a real data plane: a client that verifies the
//! certificate gets its answer over HTTP/1.1 and HTTP/2 (ALPN); the
//! certificate follows SNI among the listeners of a port, and a name no
//! listener serves gets no certificate at all, and a request whose Host
//! belongs to another listener than its connection's SNI gets 421; a
//! listener whose
//! certificate does not resolve refuses connections and never answers in
//! plaintext; a rotated Secret reaches new connections while clients keep
//! sending, with no failed request.
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

mod support;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use support::client::{Conn, get};
use support::echo::start_echo;
use support::*;
use switchyard_proto::model::{BackendKey, ConfigSnapshot, HttpRoute};
use switchyard_proxy::router::ListenerKey;
use switchyard_proxy::{DataPlane, ServingConfig};
use switchyard_test_support::listener_tls::{ServerCert, TestCa, connect};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const NS: &str = "tls";

fn gateway_yaml() -> String {
    format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: {NS}}}
spec:
  gatewayClassName: {CLASS}
  listeners:
  - {{name: a, port: 443, protocol: HTTPS, hostname: a.example, tls: {{certificateRefs: [{{name: cert-a}}]}}}}
  - {{name: b, port: 443, protocol: HTTPS, hostname: "*.b.example", tls: {{certificateRefs: [{{name: cert-b}}]}}}}
  - {{name: broken, port: 8443, protocol: HTTPS, tls: {{certificateRefs: [{{name: missing}}]}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: app, namespace: {NS}}}
spec:
  parentRefs: [{{name: gw}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /moved}}}}]
    filters:
    - type: RequestRedirect
      requestRedirect: {{hostname: elsewhere.b.example}}
  - backendRefs: [{{name: app, port: 8080}}]
"#
    )
}

/// The configuration at `version` with `cert_a` and `cert_b` in their
/// Secrets, routing to the echo at `backend`.
fn config(
    version: u64,
    cert_a: &ServerCert,
    cert_b: &ServerCert,
    backend: SocketAddr,
) -> (ConfigSnapshot, Vec<HttpRoute>) {
    let (mut snapshot, routes) = snapshot_of(version, parse_yaml(&gateway_yaml()));
    snapshot.gateway_classes.push(gateway_class());
    snapshot.namespaces.push(namespace(NS, &[]));
    snapshot.services.push(service(NS, "app", 8080, 1));
    snapshot
        .endpoint_slices
        .extend(slices(NS, "app", &[backend], 1));
    snapshot.secrets.push(cert_a.secret(NS, "cert-a"));
    snapshot.secrets.push(cert_b.secret(NS, "cert-b"));
    (snapshot, routes)
}

fn port_key(port: u16) -> ListenerKey {
    ListenerKey {
        gateway: None,
        port,
    }
}

/// A proxy serving ports 443 (`addrs[0]`) and 8443 (`addrs[1]`).
struct Fixture {
    proxy: Proxy,
    registry: Registry,
    ca: TestCa,
    backend: support::echo::Echo,
}

impl Fixture {
    async fn start() -> (Fixture, ServerCert, ServerCert) {
        Fixture::start_with(test_settings()).await
    }

    async fn start_with(
        settings: switchyard_proxy::DataPlaneSettings,
    ) -> (Fixture, ServerCert, ServerCert) {
        let backend = start_echo(NS, "app", 0).await;
        let ca = TestCa::new("test CA");
        let cert_a = ca.server(&["a.example"]);
        let cert_b = ca.server(&["*.b.example"]);
        let mut registry = Registry::default();
        let dp = DataPlane::new(settings, &mut registry);
        let (snapshot, routes) = config(1, &cert_a, &cert_b, backend.addr);
        dp.install(ServingConfig {
            snapshot: Arc::new(snapshot),
            routes,
        });
        let listeners = [443, 8443]
            .map(|port| {
                let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
                (
                    port_key(port),
                    switchyard_proxy::bind_reuseport(addr).unwrap(),
                )
            })
            .into();
        let proxy = Proxy::serve(dp, listeners);
        proxy
            .wait_healthy(&[(BackendKey::new(NS, "app", 8080), 1)])
            .await;
        let fixture = Fixture {
            proxy,
            registry,
            ca,
            backend,
        };
        (fixture, cert_a, cert_b)
    }

    fn https(&self) -> SocketAddr {
        self.proxy.addrs[0]
    }

    fn broken(&self) -> SocketAddr {
        self.proxy.addrs[1]
    }

    /// `switchyard_proxy_tls_connections_total{outcome}`.
    fn tls_connections(&self, outcome: &str) -> u64 {
        let mut text = String::new();
        encode(&mut text, &self.registry).unwrap();
        let prefix = format!("switchyard_proxy_tls_connections_total{{outcome=\"{outcome}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .map_or(0, |v| v.trim().parse().unwrap())
    }
}

/// The leaf certificate the server presented.
fn leaf_of<IO>(tls: &tokio_rustls::client::TlsStream<IO>) -> CertificateDer<'static> {
    tls.get_ref().1.peer_certificates().unwrap()[0]
        .clone()
        .into_owned()
}

fn leaf_pem(cert: &ServerCert) -> CertificateDer<'static> {
    CertificateDer::pem_slice_iter(cert.chain_pem.as_bytes())
        .next()
        .unwrap()
        .unwrap()
}

/// Bytes a plaintext HTTP request gets back from `addr` (until close or
/// 2 s).
async fn plaintext_answer(addr: SocketAddr) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let _ = s
        .write_all(b"GET /plaintext-probe HTTP/1.1\r\nHost: a.example\r\n\r\n")
        .await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut out)).await;
    out
}

#[tokio::test]
async fn a_verifying_client_gets_its_answer_over_http1_and_h2() {
    let (f, cert_a, _) = Fixture::start().await;
    let client = f.ca.client(&[b"http/1.1"]);
    let tls = connect(&client, f.https(), "a.example").await.unwrap();
    assert_eq!(leaf_of(&tls), leaf_pem(&cert_a));
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let mut conn = Conn::over(tls).await.unwrap();
    let reply = conn.send(get("a.example", "/hello")).await.unwrap();
    assert_eq!(reply.status, 200);
    let seen = reply.json().unwrap();
    assert_eq!(seen["path"], "/hello");
    assert_eq!(seen["headers"]["x-forwarded-proto"][0], "https", "{seen}");
    // A redirect keeps the scheme the client used.
    let reply = conn.send(get("a.example", "/moved")).await.unwrap();
    assert_eq!(reply.status, 302);
    assert_eq!(
        reply.headers["location"],
        "https://elsewhere.b.example/moved"
    );

    let h2 = f.ca.client(&[b"h2", b"http/1.1"]);
    let tls = connect(&h2, f.https(), "a.example").await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, conn) = hyper::client::conn::http2::handshake::<_, _, Full<Bytes>>(
        TokioExecutor::new(),
        TokioIo::new(tls),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let req = http::Request::get("https://a.example/h2")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let seen: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(seen["path"], "/h2");
    assert!(f.tls_connections("handshake") >= 2);
    f.proxy.shutdown().await;
}

#[tokio::test]
async fn the_certificate_follows_sni_and_an_unknown_name_gets_none() {
    let (f, cert_a, cert_b) = Fixture::start().await;
    let client = f.ca.client(&[]);
    let tls = connect(&client, f.https(), "shop.b.example").await.unwrap();
    assert_eq!(leaf_of(&tls), leaf_pem(&cert_b));
    let tls = connect(&client, f.https(), "a.example").await.unwrap();
    assert_eq!(leaf_of(&tls), leaf_pem(&cert_a));
    // No listener on the port serves this name: no certificate, no
    // handshake, and nothing in plaintext.
    let failed_before = f.tls_connections("handshake_failed");
    let refused = connect(&client, f.https(), "c.example").await;
    assert!(
        refused.is_err(),
        "a name no listener serves got a certificate"
    );
    eventually_count(&f, "handshake_failed", failed_before + 1).await;
    // A client speaking plain HTTP to the TLS port gets no HTTP answer.
    let answer = plaintext_answer(f.https()).await;
    assert!(
        !answer.starts_with(b"HTTP/"),
        "plaintext answer on an HTTPS listener: {:?}",
        String::from_utf8_lossy(&answer)
    );
    assert_eq!(
        f.backend.count("/plaintext-probe"),
        0,
        "the backend saw the plaintext request"
    );
    f.proxy.shutdown().await;
}

#[tokio::test]
async fn a_host_of_another_listener_than_the_sni_is_misdirected() {
    let (f, _, _) = Fixture::start().await;
    let client = f.ca.client(&[b"http/1.1"]);
    // The certificate for *.b.example covers shop.b.example only; a client
    // reusing the connection for a.example (another listener, another
    // certificate) is told to use a connection of its own.
    let tls = connect(&client, f.https(), "shop.b.example").await.unwrap();
    let mut conn = Conn::over(tls).await.unwrap();
    let reply = conn.send(get("a.example", "/x")).await.unwrap();
    assert_eq!(reply.status, 421);
    // The same connection still serves its own listener's hosts.
    let reply = conn.send(get("other.b.example", "/x")).await.unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(
        f.backend.count("/x"),
        1,
        "only the request of the right listener went through"
    );
    let mut text = String::new();
    encode(&mut text, &f.registry).unwrap();
    assert!(
        text.lines()
            .any(|l| l
                .starts_with("switchyard_proxy_direct_responses_total{kind=\"misdirected\"} 1")),
        "{text}"
    );
    f.proxy.shutdown().await;
}

async fn eventually_count(f: &Fixture, outcome: &str, at_least: u64) {
    for _ in 0..100 {
        if f.tls_connections(outcome) >= at_least {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "tls_connections{{outcome={outcome}}} = {}, expected at least {at_least}",
        f.tls_connections(outcome)
    );
}

#[tokio::test]
async fn a_listener_whose_certificate_does_not_resolve_refuses_connections() {
    let (f, _, _) = Fixture::start().await;
    // Port 8443's only listener names a Secret that does not exist.
    let answer = plaintext_answer(f.broken()).await;
    assert!(
        answer.is_empty(),
        "a refused listener answered: {:?}",
        String::from_utf8_lossy(&answer)
    );
    let client = f.ca.client(&[]);
    assert!(connect(&client, f.broken(), "a.example").await.is_err());
    eventually_count(&f, "refused", 2).await;
    assert_eq!(
        f.backend.count("/plaintext-probe"),
        0,
        "the backend saw the plaintext request"
    );
    let notes: Vec<String> = f
        .proxy
        .dp
        .compile_notes()
        .into_iter()
        .filter(|n| n.contains("broken"))
        .collect();
    assert!(
        notes.iter().any(|n| n.contains("InvalidCertificateRef")),
        "{notes:?}"
    );
    f.proxy.shutdown().await;
}

#[tokio::test]
async fn a_rotated_certificate_reaches_new_connections_without_a_failed_request() {
    let (f, cert_a, cert_b) = Fixture::start().await;
    let f = Arc::new(f);
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    for i in 0..8 {
        let (f, stop, ok) = (Arc::clone(&f), Arc::clone(&stop), Arc::clone(&ok));
        clients.push(tokio::spawn(async move {
            let connector = f.ca.client(&[b"http/1.1"]);
            let mut failures = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                // Half the clients keep one connection for a while (the
                // rotation must not break it), half reconnect each time.
                let requests = if i % 2 == 0 { 20 } else { 1 };
                let result = async {
                    let tls = connect(&connector, f.https(), "a.example").await?;
                    let mut conn = Conn::over(tls).await?;
                    for _ in 0..requests {
                        let reply = conn.send(get("a.example", "/rotate")).await?;
                        anyhow::ensure!(reply.status == 200, "status {}", reply.status);
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    anyhow::Ok(())
                }
                .await;
                if let Err(error) = result {
                    failures.push(format!("{error:#}"));
                }
            }
            failures
        }));
    }
    drop(cert_a);
    for round in 0..10u64 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let current = f.ca.server(&["a.example"]);
        let (snapshot, routes) = config(2 + round, &current, &cert_b, f.backend.addr);
        f.proxy.install(snapshot, routes);
        // A new connection gets the new certificate at once.
        let tls = connect(&f.ca.client(&[]), f.https(), "a.example")
            .await
            .unwrap();
        assert_eq!(leaf_of(&tls), leaf_pem(&current), "round {round}");
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.store(true, Ordering::Relaxed);
    let mut failures = Vec::new();
    for c in clients {
        failures.extend(c.await.unwrap());
    }
    assert!(failures.is_empty(), "failed during rotation: {failures:?}");
    assert!(
        ok.load(Ordering::Relaxed) > 100,
        "too little traffic to tell"
    );
    let f = Arc::into_inner(f).expect("clients finished");
    f.proxy.shutdown().await;
}

#[tokio::test]
async fn a_conflicted_https_listener_is_refused_on_its_own_gateways_socket() {
    let ca = TestCa::new("test CA");
    let cert = ca.server(&["a.example"]);
    // Two Gateways on port 9443: `a-plain` (HTTP) keeps the port, the
    // HTTPS listener of `b-tls` is Conflicted (ProtocolConflict).
    let yaml = format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: a-plain, namespace: {NS}}}
spec:
  gatewayClassName: {CLASS}
  listeners: [{{name: http, port: 9443, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: b-tls, namespace: {NS}}}
spec:
  gatewayClassName: {CLASS}
  listeners:
  - {{name: https, port: 9443, protocol: HTTPS, tls: {{certificateRefs: [{{name: cert-a}}]}}}}
"#
    );
    let (mut snapshot, routes) = snapshot_of(1, parse_yaml(&yaml));
    snapshot.gateway_classes.push(gateway_class());
    snapshot.namespaces.push(namespace(NS, &[]));
    snapshot.secrets.push(cert.secret(NS, "cert-a"));
    let mut registry = Registry::default();
    let dp = DataPlane::new(test_settings(), &mut registry);
    dp.install(ServingConfig {
        snapshot: Arc::new(snapshot),
        routes,
    });
    let loser = ListenerKey {
        gateway: Some(switchyard_proto::model::ObjectName::new(NS, "b-tls")),
        port: 9443,
    };
    let listeners = [loser, port_key(9443)]
        .map(|key| {
            let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
            (key, switchyard_proxy::bind_reuseport(addr).unwrap())
        })
        .into();
    let proxy = Proxy::serve(dp, listeners);
    // The conflicted HTTPS listener's own socket: closed, no plaintext.
    let answer = plaintext_answer(proxy.addrs[0]).await;
    assert!(
        answer.is_empty(),
        "a conflicted HTTPS listener answered: {:?}",
        String::from_utf8_lossy(&answer)
    );
    // The shared socket is the winner's: plain HTTP (404, no route).
    let answer = plaintext_answer(proxy.addrs[1]).await;
    assert!(
        answer.starts_with(b"HTTP/1.1 404"),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_client_that_never_completes_the_handshake_is_closed_at_the_header_read_timeout() {
    let settings = switchyard_proxy::DataPlaneSettings {
        header_read_timeout: Duration::from_millis(300),
        ..test_settings()
    };
    let (f, _, _) = Fixture::start_with(settings).await;
    let mut silent = TcpStream::connect(f.https()).await.unwrap();
    let mut out = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), silent.read_to_end(&mut out)).await;
    assert!(closed.is_ok(), "a silent client kept its connection");
    assert!(out.is_empty(), "{out:?}");
    eventually_count(&f, "handshake_timeout", 1).await;
    f.proxy.shutdown().await;
}
