//! GRPCRoute end to end, through real processes: three coordinators and one
//! `switchyard proxy` process, configured with `apply` of Kubernetes YAML,
//! called by a stock tonic client over h2c, with gRPC backends that speak
//! nothing but HTTP/2 (`switchyard_test_support::grpc`).
//!
//! - method and header matches pick the backend; unary and
//!   server-streaming calls pass through; a call no rule matches is
//!   `UNIMPLEMENTED`; backends are warmed with `grpc.health.v1.Health/Check`
//!   (counted on the backend) without any `appProtocol` on their Services;
//! - the acceptance sequence for gRPC: 10 route changes, each to a fresh
//!   backend that says `NOT_SERVING` (and refuses calls) for its first
//!   moments, under back-to-back unary calls — 0 failed calls, and every
//!   new backend serves calls after its cutover.
//!
//! No process may log a WARN or ERROR line.

mod single_proxy;

use single_proxy::{apply_ready, fleet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use switchyard::demo::manifests::{self, NAMESPACE};
use switchyard_test_support::eventually;
use switchyard_test_support::grpc::{GrpcBackend, GrpcClient};

const AUTHORITY: &str = "calls.example";

/// GRPCRoute `calls` with `rules` (YAML list items, indented two spaces).
fn grpc_route(rules: &str) -> String {
    format!(
        r#"---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata:
  name: calls
  namespace: {NAMESPACE}
  annotations: {{switchyard.io/cutover-timeout: 30s}}
spec:
  parentRefs: [{{name: gateway}}]
  rules:
{rules}"#
    )
}

/// A rule sending every call to `backend`.
fn everything_to(backend: &str) -> String {
    format!("  - backendRefs: [{{name: {backend}, port: 80}}]\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_route_matches_methods_and_headers_and_passes_unary_and_streaming_calls()
-> anyhow::Result<()> {
    let (mut fleet, proxy) = fleet().await?;
    let echo = GrpcBackend::start("echo").await?;
    let gold = GrpcBackend::start("gold").await?;
    let rules = "  - matches:\n    - method: {service: echo.Echo, method: Say}\n      headers: [{name: x-tier, value: gold}]\n    backendRefs: [{name: gold, port: 80}]\n  - matches:\n    - method: {service: echo.Echo}\n    backendRefs: [{name: echo, port: 80}]\n";
    let yaml = format!(
        "{}{}{}{}",
        manifests::base(),
        manifests::backend("echo", echo.addr),
        manifests::backend("gold", gold.addr),
        grpc_route(rules)
    );
    apply_ready(&mut fleet, &yaml).await?;
    assert!(
        echo.health_checks() > 0,
        "echo was not warmed by gRPC health checks"
    );
    assert!(
        gold.health_checks() > 0,
        "gold was not warmed by gRPC health checks"
    );

    let mut client = GrpcClient::connect(proxy, AUTHORITY).await?;
    let answer = eventually(
        "a unary call through the proxy",
        Duration::from_secs(20),
        async || {
            client
                .clone()
                .unary("/echo.Echo/Say", "hi")
                .await
                .map_err(anyhow::Error::from)
        },
    )
    .await?;
    assert_eq!(answer, "echo /echo.Echo/Say");
    // The header match takes the more specific rule.
    assert_eq!(
        client
            .unary_with("/echo.Echo/Say", "hi", &[("x-tier", "gold")])
            .await?,
        "gold /echo.Echo/Say"
    );
    // Another method of the service: the service-wide rule.
    assert_eq!(
        client
            .unary_with("/echo.Echo/Shout", "hi", &[("x-tier", "gold")])
            .await?,
        "echo /echo.Echo/Shout"
    );
    let streamed = client.server_stream("/echo.Echo/Stream", 5).await?;
    assert_eq!(
        streamed,
        (0..5)
            .map(|i| format!("echo /echo.Echo/Stream {i}"))
            .collect::<Vec<_>>()
    );
    // No rule takes another service: the proxy's 404 is UNIMPLEMENTED.
    let unmatched = client.unary("/other.Svc/Call", "hi").await.unwrap_err();
    assert_eq!(
        unmatched.code(),
        tonic::Code::Unimplemented,
        "{unmatched:?}"
    );

    let warnings = fleet.warnings();
    assert!(warnings.is_empty(), "WARN/ERROR lines: {warnings:#?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_grpc_backend_switches_under_back_to_back_calls_fail_no_call() -> anyhow::Result<()> {
    const SWITCHES: usize = 10;
    const CALLERS: usize = 2;
    let (mut fleet, proxy) = fleet().await?;
    let mut backends = vec![GrpcBackend::start("b0").await?];
    let yaml = format!(
        "{}{}{}",
        manifests::base(),
        manifests::backend("b0", backends[0].addr),
        grpc_route(&everything_to("b0"))
    );
    apply_ready(&mut fleet, &yaml).await?;
    let client = GrpcClient::connect(proxy, AUTHORITY).await?;
    eventually("the first call", Duration::from_secs(20), async || {
        client
            .clone()
            .unary("/echo.Echo/Say", "hi")
            .await
            .map_err(anyhow::Error::from)
    })
    .await?;

    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicU64::new(0));
    let mut callers = Vec::new();
    for _ in 0..CALLERS {
        let (mut client, stop, ok) = (client.clone(), Arc::clone(&stop), Arc::clone(&ok));
        callers.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            // Bounded: 10 switches take seconds, not 200,000 calls.
            for _ in 0..200_000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                match client.unary("/echo.Echo/Say", "hi").await {
                    Ok(_) => {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(status) => failures.push(format!("{status:?}")),
                }
            }
            failures
        }));
    }
    for i in 1..=SWITCHES {
        let name = format!("b{i}");
        // NOT_SERVING, refusing calls, for a moment: a cutover before the
        // proxy's health check saw it serving would fail calls.
        let fresh = GrpcBackend::start_serving_after(&name, Duration::from_millis(500)).await?;
        let yaml = format!(
            "{}{}",
            manifests::backend(&name, fresh.addr),
            grpc_route(&everything_to(&name))
        );
        backends.push(fresh);
        apply_ready(&mut fleet, &yaml).await?;
        let calls_before = backends[i].calls();
        eventually(
            "calls reaching the new backend",
            Duration::from_secs(10),
            async || {
                anyhow::ensure!(backends[i].calls() > calls_before, "no call yet");
                anyhow::Ok(())
            },
        )
        .await?;
    }
    stop.store(true, Ordering::Relaxed);
    let mut failures = Vec::new();
    for caller in callers {
        failures.extend(caller.await?);
    }
    assert!(failures.is_empty(), "failed calls: {failures:?}");
    let ok = ok.load(Ordering::Relaxed);
    assert!(ok > 100, "the callers barely ran: {ok} calls");
    for backend in &backends[1..] {
        assert!(backend.health_checks() > 0);
    }
    println!("{SWITCHES} GRPCRoute switches: {ok} unary calls, 0 failed");
    let warnings = fleet.warnings();
    assert!(warnings.is_empty(), "WARN/ERROR lines: {warnings:#?}");
    Ok(())
}
