//! A slow client is the client's problem, never the backend's: the
//! backend is timed from the end of the request body, a client that
//! stalls its upload gets 408 (or, once the response has started, a cut
//! response), the failure is counted as the client's
//! (`errors{blame="downstream",kind="client_body_timeout"}`), and the
//! endpoint is never ejected for it.
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

mod support;

use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use support::echo::start_echo;
use support::raw::read_reply;
use support::*;
use switchyard_proto::model::BackendKey;
use switchyard_proxy::{DataPlane, DataPlaneSettings, OutlierSettings, ServingConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

const NS: &str = "slow";
const REQUEST_TIMEOUT: Duration = Duration::from_millis(300);
const BODY_IDLE: Duration = Duration::from_millis(400);

fn settings() -> DataPlaneSettings {
    DataPlaneSettings {
        request_timeout: REQUEST_TIMEOUT,
        request_body_idle_timeout: BODY_IDLE,
        // One gateway failure would eject: any blame on the endpoint shows.
        outlier: OutlierSettings {
            consecutive_failures: 1,
            ..OutlierSettings::default()
        },
        ..test_settings()
    }
}

/// A proxy with its own registry in front of one backend at `addr`.
struct Slow {
    proxy: Proxy,
    registry: Registry,
}

impl Slow {
    async fn start(addr: SocketAddr) -> Slow {
        let mut registry = Registry::default();
        let dp = DataPlane::new(settings(), &mut registry);
        let mut text = simple_gateway_yaml(NS);
        text.push_str("---\n");
        text.push_str(&simple_route_yaml(NS, "app", "app"));
        let (mut snapshot, routes) = snapshot_of(1, parse_yaml(&text));
        snapshot.gateway_classes.push(gateway_class());
        snapshot.namespaces.push(namespace(NS, &[]));
        snapshot.services.push(service(NS, "app", 8080, 1));
        snapshot.endpoint_slices = slices(NS, "app", &[addr], 1);
        dp.install(ServingConfig {
            snapshot: Arc::new(snapshot),
            routes,
        });
        wait_healthy(&dp, &[(BackendKey::new(NS, "app", 8080), 1)]).await;
        let listener = switchyard_proxy::bind_reuseport("127.0.0.1:0".parse().unwrap()).unwrap();
        Slow {
            proxy: Proxy::serve(dp, vec![(simple_listener(NS), listener)]),
            registry,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.proxy.addrs[0]
    }

    /// The value of `series` in the text exposition; 0 when absent.
    fn metric(&self, series: &str) -> f64 {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
        let prefix = format!("{series} ");
        text.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .map_or(0.0, |v| v.trim().parse().unwrap())
    }

    fn client_timeouts(&self) -> f64 {
        self.metric(
            "switchyard_proxy_errors_total{blame=\"downstream\",kind=\"client_body_timeout\"}",
        )
    }

    fn ejections(&self) -> f64 {
        self.metric("switchyard_proxy_outlier_ejections_total{backend=\"slow/app:8080\"}")
    }

    fn upstream_timeouts(&self) -> f64 {
        self.metric("switchyard_proxy_errors_total{blame=\"upstream\",kind=\"timeout\"}")
    }
}

/// Sends a POST head announcing `length` body bytes.
async fn post_head(addr: SocketAddr, path: &str, length: usize) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head =
        format!("POST {path} HTTP/1.1\r\nHost: app.example\r\nContent-Length: {length}\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_upload_is_not_a_slow_backend() {
    let echo = start_echo(NS, "app", 0).await;
    let slow = Slow::start(echo.addr).await;
    let mut stream = post_head(slow.addr(), "/upload", 10).await;
    // Ten bytes over about 0.8 s: well past the request timeout, while no
    // pause comes near the body idle timeout.
    let started = Instant::now();
    for byte in b"0123456789" {
        // This sleep is the test: a client that pauses between bytes.
        tokio::time::sleep(Duration::from_millis(80)).await;
        stream.write_all(&[*byte]).await.unwrap();
    }
    let took = started.elapsed();
    assert!(took > REQUEST_TIMEOUT * 2, "upload took only {took:?}");
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).await.unwrap();
    assert_eq!(
        &head,
        b"HTTP/1.1 200",
        "{:?}",
        String::from_utf8_lossy(&head)
    );
    let bodies = echo.bodies.lock().unwrap().clone();
    assert_eq!(bodies, vec![("/upload".to_owned(), "0123456789".into())]);
    assert_eq!(slow.upstream_timeouts(), 0.0);
    assert_eq!(slow.client_timeouts(), 0.0);
    slow.proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_upload_is_408_counted_as_the_clients_fault() {
    let echo = start_echo(NS, "app", 0).await;
    let slow = Slow::start(echo.addr).await;
    let mut stream = post_head(slow.addr(), "/upload", 10).await;
    stream.write_all(b"012").await.unwrap();
    let started = Instant::now();
    let reply = read_reply(&mut stream).await.unwrap();
    let took = started.elapsed();
    assert_eq!(reply.status, 408, "{reply:?}");
    assert_eq!(reply.header("connection"), Some("close"), "{reply:?}");
    assert!(
        took >= BODY_IDLE && took < BODY_IDLE + Duration::from_secs(2),
        "408 after {took:?}"
    );
    assert_eq!(slow.client_timeouts(), 1.0);
    assert_eq!(slow.upstream_timeouts(), 0.0);
    assert_eq!(slow.ejections(), 0.0, "the endpoint was blamed");
    // The endpoint still takes traffic at once.
    let reply = support::client::send(slow.addr(), support::client::get("app.example", "/after"))
        .await
        .unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
    slow.proxy.shutdown().await;
}

/// A backend that answers `/early` with a chunked head and one chunk
/// before reading the request body, then waits; anything else (health
/// checks) gets `200 ok` and a close.
async fn start_early_answerer() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                if buf.starts_with(b"POST /early ") {
                    let _ = stream
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nearly\r\n",
                        )
                        .await;
                    // Read whatever comes until the proxy gives up.
                    while let Ok(n) = stream.read(&mut chunk).await {
                        if n == 0 {
                            return;
                        }
                    }
                } else {
                    let _ = stream
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                        )
                        .await;
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_after_the_response_started_cuts_the_response_and_blames_the_client() {
    let backend = start_early_answerer().await;
    let slow = Slow::start(backend).await;
    let mut stream = post_head(slow.addr(), "/early", 10).await;
    stream.write_all(b"012").await.unwrap();
    let started = Instant::now();
    let reply = read_reply(&mut stream).await.unwrap();
    let took = started.elapsed();
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.body, b"early");
    assert!(
        !reply.complete,
        "the cut response looked complete: {reply:?}"
    );
    assert!(took >= BODY_IDLE, "cut after {took:?}");
    eventually(
        "the client's fault counted",
        Duration::from_secs(5),
        || async {
            let n = slow.client_timeouts();
            anyhow::ensure!(n == 1.0, "{n}");
            Ok(())
        },
    )
    .await
    .unwrap();
    assert_eq!(
        slow.metric("switchyard_proxy_upstream_body_errors_total{backend=\"slow/app:8080\"}"),
        0.0
    );
    assert_eq!(slow.ejections(), 0.0);
    slow.proxy.shutdown().await;
}
