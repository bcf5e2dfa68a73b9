//! TLS to backends (BackendTLSPolicy): a Service port a policy covers is
//! spoken to over TLS verified against the policy's CA ConfigMap, with the
//! policy's hostname as SNI — health checks too (the backends here speak
//! nothing but TLS, so a healthy backend proves the handshake); ALPN
//! follows the port's protocol; `subjectAltNames` replace the hostname for
//! verification; a certificate from another CA never turns healthy; and a
//! policy whose CA does not resolve is never connected to at all, never
//! spoken to in plaintext.
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;
use support::client::{Conn, get};
use support::*;
use switchyard_proto::model::{
    BackendKey, BackendTlsPolicy, BackendTlsValidation, ConfigMap, ConfigSnapshot, HttpRoute,
    LocalObjectRef, ObjectMeta, PolicyTargetRef, ServicePort, SubjectAltName, UpstreamProtocol,
};
use switchyard_test_support::listener_tls::TestCa;
use switchyard_test_support::tls_backend::TlsBackend;

const NS: &str = "btls";

fn key() -> BackendKey {
    BackendKey::new(NS, "secure", 8443)
}

fn policy(hostname: &str, sans: &[&str]) -> BackendTlsPolicy {
    BackendTlsPolicy {
        meta: ObjectMeta::named(NS, "secure-tls"),
        target_refs: vec![PolicyTargetRef {
            group: String::new(),
            kind: "Service".into(),
            name: "secure".into(),
            section_name: None,
        }],
        validation: BackendTlsValidation {
            ca_certificate_refs: vec![LocalObjectRef {
                group: String::new(),
                kind: "ConfigMap".into(),
                name: "secure-ca".into(),
            }],
            well_known_ca_certificates: None,
            hostname: hostname.into(),
            subject_alt_names: sans
                .iter()
                .map(|s| SubjectAltName::Hostname(s.to_string()))
                .collect(),
        },
    }
}

/// Gateway, route `app` → Service `secure`:8443 (endpoint `backend`),
/// the policy, and the ConfigMap `secure-ca` holding `ca_pem` (none when
/// `None`).
fn config(
    backend: &TlsBackend,
    policy: BackendTlsPolicy,
    ca_pem: Option<&str>,
    app_protocol: Option<&str>,
) -> (ConfigSnapshot, Vec<HttpRoute>) {
    let yaml = format!(
        "{}\n---\n{}",
        simple_gateway_yaml(NS),
        simple_route_yaml(NS, "app", "secure").replace("port: 8080", "port: 8443")
    );
    let (mut snapshot, routes) = snapshot_of(1, parse_yaml(&yaml));
    snapshot.gateway_classes.push(gateway_class());
    snapshot.namespaces.push(namespace(NS, &[]));
    let mut svc = service(NS, "secure", 8443, 1);
    svc.ports = vec![ServicePort {
        // The name the fixture's slices give their port.
        name: Some("http".into()),
        port: 8443,
        target_port: None,
        app_protocol: app_protocol.map(Into::into),
    }];
    snapshot.services.push(svc);
    snapshot
        .endpoint_slices
        .extend(slices(NS, "secure", &[backend.addr], 1));
    snapshot.backend_tls_policies.push(policy);
    if let Some(pem) = ca_pem {
        snapshot.config_maps.push(ConfigMap {
            meta: ObjectMeta::named(NS, "secure-ca"),
            ca_certificate: Some(pem.into()),
        });
    }
    (snapshot, routes)
}

async fn start(snapshot: ConfigSnapshot, routes: Vec<HttpRoute>) -> Proxy {
    let proxy = Proxy::start(test_settings(), vec![simple_listener(NS)]).await;
    proxy.install(snapshot, routes);
    proxy
}

async fn fetch(proxy: &Proxy) -> (u16, serde_json::Value) {
    let mut conn = Conn::connect(proxy.addrs[0]).await.unwrap();
    let reply = conn.send(get("app.example", "/hello")).await.unwrap();
    let json = reply.json().unwrap_or(serde_json::Value::Null);
    (reply.status.as_u16(), json)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_under_a_policy_is_spoken_to_over_verified_tls_with_its_hostname() {
    let ca = TestCa::new("backend CA");
    let backend =
        TlsBackend::start("secure", &ca.server(&["secure.btls.test"]), Duration::ZERO).await;
    let (snapshot, routes) = config(
        &backend,
        policy("secure.btls.test", &[]),
        Some(&ca.cert_pem),
        None,
    );
    let proxy = start(snapshot, routes).await;
    proxy.wait_healthy(&[(key(), 1)]).await;
    let (status, seen) = fetch(&proxy).await;
    assert_eq!(status, 200, "{seen}");
    assert_eq!(seen["sni"], "secure.btls.test", "{seen}");
    assert_eq!(seen["alpn"], "http/1.1", "{seen}");
    assert_eq!(seen["version"], "HTTP/1.1", "{seen}");
    assert_eq!(seen["path"], "/hello", "{seen}");
    assert!(backend.handshakes() >= 1);
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_port_under_a_policy_negotiates_h2() {
    let ca = TestCa::new("backend CA");
    let backend =
        TlsBackend::start("secure", &ca.server(&["secure.btls.test"]), Duration::ZERO).await;
    let (snapshot, routes) = config(
        &backend,
        policy("secure.btls.test", &[]),
        Some(&ca.cert_pem),
        Some(UpstreamProtocol::H2C),
    );
    let proxy = start(snapshot, routes).await;
    proxy.wait_healthy(&[(key(), 1)]).await;
    let (status, seen) = fetch(&proxy).await;
    assert_eq!(status, 200, "{seen}");
    assert_eq!(seen["alpn"], "h2", "{seen}");
    assert_eq!(seen["version"], "HTTP/2.0", "{seen}");
    assert_eq!(seen["scheme"], "https", "{seen}");
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subject_alt_names_replace_the_hostname_for_verification() {
    let ca = TestCa::new("backend CA");
    // The certificate names the Service's internal name only.
    let cert = ca.server(&["secure.internal"]);
    let backend = TlsBackend::start("secure", &cert, Duration::ZERO).await;
    let with_san = policy("secure.btls.test", &["other.internal", "secure.internal"]);
    let (snapshot, routes) = config(&backend, with_san, Some(&ca.cert_pem), None);
    let proxy = start(snapshot, routes).await;
    proxy.wait_healthy(&[(key(), 1)]).await;
    let (status, seen) = fetch(&proxy).await;
    assert_eq!(status, 200, "{seen}");
    // SNI stays the policy's hostname.
    assert_eq!(seen["sni"], "secure.btls.test", "{seen}");
    proxy.shutdown().await;
}

/// Waits until `backend` saw `connections` TCP connections (health probes
/// at 50 ms), then checks the backend never turned healthy and requests
/// are refused by the proxy.
async fn assert_never_healthy(proxy: &Proxy, backend: &TlsBackend, connections: usize) {
    eventually(
        "health probes reach the backend",
        Duration::from_secs(10),
        || async {
            anyhow::ensure!(
                backend.accepted() >= connections,
                "{} accepted",
                backend.accepted()
            );
            Ok(())
        },
    )
    .await
    .unwrap();
    let readiness = proxy.dp.readiness(&key()).unwrap();
    assert_eq!(readiness.healthy, 0, "{readiness:?}");
    assert_eq!(readiness.total, 1, "{readiness:?}");
    let (status, _) = fetch(proxy).await;
    assert_eq!(status, 503);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_the_policy_does_not_trust_never_turns_healthy() {
    let trusted = TestCa::new("trusted CA");
    let other = TestCa::new("other CA");
    let backend = TlsBackend::start(
        "secure",
        &other.server(&["secure.btls.test"]),
        Duration::ZERO,
    )
    .await;
    let (snapshot, routes) = config(
        &backend,
        policy("secure.btls.test", &[]),
        Some(&trusted.cert_pem),
        None,
    );
    let proxy = start(snapshot, routes).await;
    assert_never_healthy(&proxy, &backend, 4).await;
    assert_eq!(backend.handshakes(), 0, "no handshake completed");
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_another_name_never_turns_healthy() {
    let ca = TestCa::new("backend CA");
    let backend = TlsBackend::start(
        "secure",
        &ca.server(&["somebody-else.test"]),
        Duration::ZERO,
    )
    .await;
    let (snapshot, routes) = config(
        &backend,
        policy("secure.btls.test", &[]),
        Some(&ca.cert_pem),
        None,
    );
    let proxy = start(snapshot, routes).await;
    assert_never_healthy(&proxy, &backend, 4).await;
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_whose_ca_does_not_resolve_is_never_connected_to() {
    let ca = TestCa::new("backend CA");
    let backend =
        TlsBackend::start("secure", &ca.server(&["secure.btls.test"]), Duration::ZERO).await;
    // A plaintext backend in the same snapshot: once it is healthy, the
    // health checkers have run; the refused endpoint's never connected.
    let plain = support::echo::start_echo(NS, "plain", 0).await;
    let (mut snapshot, routes) = config(&backend, policy("secure.btls.test", &[]), None, None);
    snapshot.services.push(service(NS, "plain", 8080, 1));
    snapshot
        .endpoint_slices
        .extend(slices(NS, "plain", &[plain.addr], 1));
    let proxy = start(snapshot, routes).await;
    proxy
        .dp
        .set_warming(keys(&[&BackendKey::new(NS, "plain", 8080)]));
    proxy
        .wait_healthy(&[(BackendKey::new(NS, "plain", 8080), 1)])
        .await;
    // Ten more health intervals of the refused endpoint.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(backend.accepted(), 0, "a refused endpoint was connected to");
    let readiness = proxy.dp.readiness(&key()).unwrap();
    assert_eq!(readiness.healthy, 0, "{readiness:?}");
    assert_eq!(readiness.total, 1, "the endpoint is known: {readiness:?}");
    let (status, _) = fetch(&proxy).await;
    assert_eq!(status, 503);
    assert_eq!(
        backend.accepted(),
        0,
        "a request reached a refused endpoint"
    );
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_ca_bundle_for_an_active_backend_drops_no_request() {
    // The policy's trust changes (a CA rotation adds the next CA to the
    // bundle): the endpoint is a new one (another data path), which keeps
    // taking traffic on its predecessor's health while its own probes run.
    let ca = TestCa::new("backend CA");
    let next = TestCa::new("next CA");
    let backend =
        TlsBackend::start("secure", &ca.server(&["secure.btls.test"]), Duration::ZERO).await;
    let (snapshot, routes) = config(
        &backend,
        policy("secure.btls.test", &[]),
        Some(&ca.cert_pem),
        None,
    );
    let proxy = start(snapshot.clone(), routes.clone()).await;
    proxy.wait_healthy(&[(key(), 1)]).await;

    let addr = proxy.addrs[0];
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let loop_stop = std::sync::Arc::clone(&stop);
    let requests = tokio::spawn(async move {
        let (mut ok, mut failed) = (0u32, Vec::new());
        let mut conn = Conn::connect(addr).await.unwrap();
        while !loop_stop.load(std::sync::atomic::Ordering::Relaxed) {
            match conn.send(get("app.example", "/during")).await {
                Ok(reply) if reply.status == 200 => ok += 1,
                Ok(reply) => failed.push(reply.status.as_u16()),
                Err(_) => {
                    failed.push(0);
                    conn = Conn::connect(addr).await.unwrap();
                }
            }
        }
        (ok, failed)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut rotated = snapshot;
    rotated.version = 2;
    rotated.config_maps[0].ca_certificate = Some(format!("{}{}", ca.cert_pem, next.cert_pem));
    // What the coordinators do on a ConfigMap change a policy trusts.
    rotated
        .endpoint_generations
        .bump(switchyard_proto::model::ObjectName::new(NS, "secure"), 2);
    proxy.install(rotated, routes);
    proxy.wait_healthy(&[(key(), 1)]).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (ok, failed) = requests.await.unwrap();
    assert!(
        failed.is_empty(),
        "failed requests (status, 0 = transport): {failed:?}"
    );
    assert!(ok > 20, "{ok} requests");
    proxy.shutdown().await;
}

/// A TLS-only backend whose certificate carries the URI SAN `cert_uri`,
/// behind a policy that asks for `spiffe://btls/secure`.
async fn behind_a_uri_san_policy(cert_uri: &str) -> (TlsBackend, Proxy) {
    let ca = TestCa::new("backend CA");
    let cert = ca.server_for_suite_hosts(&[cert_uri]);
    let backend = TlsBackend::start("secure", &cert, Duration::ZERO).await;
    let mut with_uri = policy("secure.btls.test", &[]);
    with_uri.validation.subject_alt_names =
        vec![SubjectAltName::Uri("spiffe://btls/secure".into())];
    let (snapshot, routes) = config(&backend, with_uri, Some(&ca.cert_pem), None);
    let proxy = start(snapshot, routes).await;
    (backend, proxy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_uri_subject_alt_name_verifies_a_certificate_that_carries_it() {
    // A SPIFFE-style certificate: a URI SAN and no DNS name at all.
    let (_backend, proxy) = behind_a_uri_san_policy("spiffe://btls/secure").await;
    proxy.wait_healthy(&[(key(), 1)]).await;
    let (status, seen) = fetch(&proxy).await;
    assert_eq!(status, 200, "{seen}");
    assert_eq!(seen["sni"], "secure.btls.test", "{seen}");
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_uri_subject_alt_name_the_certificate_lacks_never_turns_healthy() {
    let (backend, proxy) = behind_a_uri_san_policy("spiffe://btls/somebody-else").await;
    assert_never_healthy(&proxy, &backend, 4).await;
    assert_eq!(backend.handshakes(), 0, "no handshake completed");
    proxy.shutdown().await;
}
