//! An HTTPS Gateway listener end to end, through real processes: three
//! coordinators and one `switchyard proxy` process, configured with
//! `apply` of plain Kubernetes YAML — a Gateway whose listener is HTTPS,
//! the `kubernetes.io/tls` Secret it names (`stringData`), a Service, its
//! EndpointSlice and a route. A client that verifies the certificate
//! against the test CA gets the backend's 200 over TLS; a plaintext
//! request on the same port gets no HTTP answer; a new Secret applied
//! while clients keep sending reaches new connections, with no failed
//! request; and no process logs a WARN or ERROR line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use switchyard::demo::fleet::{Fleet, FleetOptions};
use switchyard::demo::manifests::{self, GATEWAY_PORT, NAMESPACE};
use switchyard_harness::free_port;
use switchyard_test_support::eventually;
use switchyard_test_support::listener_tls::{ServerCert, TestCa, connect};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const HOST: &str = "shop.example";

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_switchyard"))
}

/// The demo's GatewayClass and Namespace, and its Gateway with an HTTPS
/// listener naming Secret `shop-cert`.
fn gateway() -> String {
    manifests::base_with_listener(&format!(
        "  - name: https\n    port: {GATEWAY_PORT}\n    protocol: HTTPS\n    tls:\n      certificateRefs: [{{name: shop-cert}}]\n"
    ))
}

/// The Secret `shop-cert` holding `cert`, as `kubectl create secret tls`
/// would (here with `stringData`).
fn secret(cert: &ServerCert) -> String {
    let indent = |pem: &str| pem.trim_end().replace('\n', "\n    ");
    format!(
        r#"---
apiVersion: v1
kind: Secret
metadata: {{name: shop-cert, namespace: {NAMESPACE}}}
type: kubernetes.io/tls
stringData:
  tls.crt: |
    {}
  tls.key: |
    {}
"#,
        indent(&cert.chain_pem),
        indent(&cert.key_pem)
    )
}

/// One GET over a new verified TLS connection; the leaf certificate the
/// proxy presented, or why it failed.
async fn get(ca: &TestCa, addr: SocketAddr) -> anyhow::Result<Vec<u8>> {
    let tls = connect(&ca.client(&[b"http/1.1"]), addr, HOST).await?;
    let leaf = tls.get_ref().1.peer_certificates().unwrap_or_default()[0].to_vec();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await?;
    tokio::spawn(conn);
    let request = hyper::Request::get("/")
        .header("host", HOST)
        .body(http_body_util::Empty::<bytes::Bytes>::new())?;
    let response = tokio::time::timeout(Duration::from_secs(10), sender.send_request(request))
        .await
        .map_err(|_| anyhow::anyhow!("no answer within 10 s"))??;
    anyhow::ensure!(
        response.status() == 200
            && response
                .headers()
                .get("x-backend")
                .is_some_and(|b| b == "v1"),
        "status {}, headers {:?}",
        response.status(),
        response.headers()
    );
    Ok(leaf)
}

fn leaf_der(cert: &ServerCert) -> Vec<u8> {
    use rustls_pki_types::pem::PemObject;
    rustls_pki_types::CertificateDer::pem_slice_iter(cert.chain_pem.as_bytes())
        .next()
        .and_then(Result::ok)
        .map(|c| c.to_vec())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_listener_serves_verified_tls_and_takes_a_new_certificate_under_load()
-> anyhow::Result<()> {
    let mut options = FleetOptions::three_zones(binary());
    options.proxies.clear();
    let mut fleet = tokio::task::block_in_place(|| Fleet::start(options))?;
    fleet.wait_leader(Duration::from_secs(30)).await?;
    let backend = tokio::task::block_in_place(|| fleet.start_backend("v1", &[]))?;
    let listen = format!("127.0.0.1:{}", free_port());
    let addr: SocketAddr = listen.parse()?;
    let proxy = tokio::task::block_in_place(|| fleet.start_proxy_on("edge", "zone-a", &listen))?;
    fleet.proxies.push(proxy);

    let ca = TestCa::new("shop CA");
    let first = ca.server(&[HOST]);
    let yaml = format!(
        "{}{}{}{}",
        gateway(),
        secret(&first),
        manifests::backend("v1", backend),
        manifests::route("v1", "h0", "30s")
    );
    let (targets, index) = fleet.apply(&yaml).await?;
    fleet
        .client()
        .wait_ready(&targets, index, Duration::from_secs(60), |_| {})
        .await?;
    let leaf = eventually(
        "a verified answer over TLS",
        Duration::from_secs(20),
        async || get(&ca, addr).await,
    )
    .await?;
    assert_eq!(leaf, leaf_der(&first));

    // Plain HTTP on the HTTPS port: no HTTP answer, whatever the client
    // sends.
    let mut plain = TcpStream::connect(addr).await?;
    plain
        .write_all(b"GET / HTTP/1.1\r\nHost: shop.example\r\n\r\n")
        .await?;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), plain.read_to_end(&mut answer)).await;
    assert!(
        !answer.starts_with(b"HTTP/"),
        "plaintext answer: {:?}",
        String::from_utf8_lossy(&answer)
    );

    // A new certificate while clients keep connecting.
    let ca = Arc::new(ca);
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut clients = Vec::new();
    for _ in 0..4 {
        let (ca, stop, ok, failed) = (
            Arc::clone(&ca),
            Arc::clone(&stop),
            Arc::clone(&ok),
            Arc::clone(&failed),
        );
        clients.push(tokio::spawn(async move {
            let mut errors = Vec::new();
            for _ in 0..100_000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                match get(&ca, addr).await {
                    Ok(_) => ok.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        errors.push(format!("{e:#}"));
                        failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
            errors
        }));
    }
    let second = ca.server(&[HOST]);
    fleet.apply(&secret(&second)).await?;
    let wanted = leaf_der(&second);
    eventually(
        "the new certificate on new connections",
        Duration::from_secs(20),
        async || {
            let leaf = get(&ca, addr).await?;
            anyhow::ensure!(leaf == wanted, "still the old certificate");
            anyhow::Ok(())
        },
    )
    .await?;
    stop.store(true, Ordering::Relaxed);
    let mut errors = Vec::new();
    for c in clients {
        errors.extend(c.await?);
    }
    assert!(errors.is_empty(), "failed during the rotation: {errors:?}");
    assert!(ok.load(Ordering::Relaxed) > 0);
    assert_eq!(failed.load(Ordering::Relaxed), 0);

    let warnings = fleet.warnings();
    assert!(warnings.is_empty(), "WARN/ERROR lines: {warnings:#?}");
    Ok(())
}
