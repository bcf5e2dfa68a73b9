//! TLS to backends end to end, through real processes: three coordinators
//! and one `switchyard proxy` process, configured with `apply` of
//! Kubernetes YAML (BackendTLSPolicy, its CA ConfigMap, Services,
//! EndpointSlices, an HTTPRoute), with backends that speak nothing but TLS
//! (`switchyard_test_support::tls_backend`).
//!
//! A backend whose certificate does not verify, or whose policy's CA does
//! not resolve, never takes the route (the latter is never even connected
//! to, and the cutover's failure names the policy and the missing CA).
//!
//! The acceptance sequence for TLS backends: 10 route changes, each to a
//! fresh TLS backend that answers 503 for its first moments, under
//! back-to-back requests — 0 failed requests; every new backend completed
//! verified handshakes (the proxy's warming) before it took traffic, and
//! its traffic arrived over TLS with the policy's hostname as SNI.
//!
//! No process may log a WARN or ERROR line.

mod single_proxy;

use single_proxy::{apply_ready, fleet};
use std::time::Duration;
use switchyard::demo::manifests::{self, NAMESPACE, VERSION_HEADER};
use switchyard::demo::prober::Prober;
use switchyard_test_support::listener_tls::TestCa;
use switchyard_test_support::tls_backend::TlsBackend;
use tokio::time::Instant;

/// The ConfigMap holding the backends' CA.
fn ca_config_map(ca: &TestCa) -> String {
    let pem = ca.cert_pem.trim_end().replace('\n', "\n    ");
    format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: backend-ca, namespace: {NAMESPACE}}}\ndata:\n  ca.crt: |\n    {pem}\n"
    )
}

/// A BackendTLSPolicy for Service `name`, trusting `backend-ca`, verifying
/// `<name>.backends.test`.
fn tls_policy(name: &str) -> String {
    format!(
        r#"---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {{name: {name}-tls, namespace: {NAMESPACE}}}
spec:
  targetRefs: [{{group: "", kind: Service, name: {name}}}]
  validation:
    caCertificateRefs: [{{group: "", kind: ConfigMap, name: backend-ca}}]
    hostname: {name}.backends.test
"#
    )
}

async fn tls_backend(ca: &TestCa, name: &str, unready_for: Duration) -> TlsBackend {
    let host = format!("{name}.backends.test");
    TlsBackend::start(name, &ca.server(&[&host]), unready_for).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_switches_to_fresh_tls_backends_under_back_to_back_requests_fail_none()
-> anyhow::Result<()> {
    const SWITCHES: usize = 10;
    let (mut fleet, proxy) = fleet().await?;
    let ca = TestCa::new("backends CA");
    let mut backends = vec![tls_backend(&ca, "b0", Duration::ZERO).await];
    let yaml = format!(
        "{}{}{}{}{}",
        manifests::base(),
        ca_config_map(&ca),
        manifests::backend("b0", backends[0].addr),
        tls_policy("b0"),
        manifests::route("b0", "v0", "30s")
    );
    apply_ready(&mut fleet, &yaml).await?;
    assert!(backends[0].handshakes() > 0, "b0 was not warmed over TLS");

    let prober = Prober::start(
        vec![format!("http://{proxy}")],
        4,
        VERSION_HEADER,
        Duration::from_secs(300),
    );
    let first = prober
        .observe_after(Instant::now(), Duration::from_secs(20))
        .await;
    assert_eq!(first.map(|o| o.backend).as_deref(), Some("b0"));

    for i in 1..=SWITCHES {
        let name = format!("b{i}");
        // 503 for a moment: a cutover before the proxy's health checks
        // (over verified TLS) saw it serving would fail requests.
        let fresh = tls_backend(&ca, &name, Duration::from_millis(500)).await;
        let yaml = format!(
            "{}{}{}",
            manifests::backend(&name, fresh.addr),
            tls_policy(&name),
            manifests::route(&name, &format!("v{i}"), "30s")
        );
        backends.push(fresh);
        apply_ready(&mut fleet, &yaml).await?;
        assert!(
            backends[i].handshakes() > 0,
            "{name} Ready without a TLS handshake"
        );
        let seen = prober
            .observe_after(Instant::now(), Duration::from_secs(10))
            .await;
        assert_eq!(
            seen.map(|o| o.backend).as_deref(),
            Some(name.as_str()),
            "requests after the cutover go to {name}"
        );
    }
    let report = prober.stop().await;
    assert_eq!(report.failed, 0, "failed requests: {:#?}", report.failures);
    assert!(report.sent > 100, "the prober barely ran: {report:?}");
    println!(
        "{SWITCHES} switches between TLS backends: {} requests, 0 failed",
        report.sent
    );
    let warnings = fleet.warnings();
    assert!(warnings.is_empty(), "WARN/ERROR lines: {warnings:#?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_whose_certificate_does_not_verify_or_whose_ca_is_missing_never_takes_the_route()
-> anyhow::Result<()> {
    let (mut fleet, proxy) = fleet().await?;
    let ca = TestCa::new("backends CA");
    let good = tls_backend(&ca, "good", Duration::ZERO).await;
    let yaml = format!(
        "{}{}{}{}{}",
        manifests::base(),
        ca_config_map(&ca),
        manifests::backend("good", good.addr),
        tls_policy("good"),
        manifests::route("good", "v0", "2s")
    );
    apply_ready(&mut fleet, &yaml).await?;
    let prober = Prober::start(
        vec![format!("http://{proxy}")],
        2,
        VERSION_HEADER,
        Duration::from_secs(120),
    );
    // A backend whose certificate another CA signed: it accepts
    // connections, but no handshake verifies.
    let rogue_ca = TestCa::new("another CA");
    let rogue = tls_backend(&rogue_ca, "rogue", Duration::ZERO).await;
    let yaml = format!(
        "{}{}{}",
        manifests::backend("rogue", rogue.addr),
        tls_policy("rogue"),
        manifests::route("rogue", "v1", "2s")
    );
    let (targets, index) = fleet.apply(&yaml).await?;
    let outcome = fleet
        .client()
        .wait_ready(&targets, index, Duration::from_secs(30), |_| {})
        .await;
    assert!(
        outcome.is_err(),
        "the route was cut over to a backend whose certificate does not verify"
    );
    assert!(
        rogue.accepted() > 0,
        "the proxy never tried the rogue backend"
    );
    assert_eq!(rogue.handshakes(), 0);

    // A policy whose CA ConfigMap does not exist: the proxy never
    // connects, and the cutover's failure says why.
    let orphan = tls_backend(&ca, "orphan", Duration::ZERO).await;
    let yaml = format!(
        "{}{}{}",
        manifests::backend("orphan", orphan.addr),
        tls_policy("orphan").replace("name: backend-ca", "name: no-such-ca"),
        manifests::route("orphan", "v2", "2s")
    );
    let (targets, index) = fleet.apply(&yaml).await?;
    let error = fleet
        .client()
        .wait_ready(&targets, index, Duration::from_secs(30), |_| {})
        .await
        .expect_err("cut over to a backend whose policy cannot be used")
        .to_string();
    assert!(
        error.contains("BackendTLSPolicy demo/orphan-tls cannot be used"),
        "{error}"
    );
    assert!(error.contains("no-such-ca"), "{error}");
    assert_eq!(orphan.accepted(), 0, "a refused backend was connected to");
    let report = prober.stop().await;
    assert_eq!(report.failed, 0, "failed requests: {:#?}", report.failures);
    assert!(report.sent > 10, "{report:?}");
    Ok(())
}
