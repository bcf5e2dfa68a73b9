//! Client limits of the data plane, through real sockets: at
//! `max_connections` a new connection is closed without an answer while
//! open ones keep working, and room comes back when one closes; every
//! limit hit shows in `switchyard_proxy_limit_hits_total` as `/metrics`
//! would expose it.
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

mod support;

use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use support::client::{Conn, get, send};
use support::echo::{Echo, start_echo};
use support::*;
use switchyard_proto::model::BackendKey;
use switchyard_proxy::{DataPlane, DataPlaneSettings, ServingConfig, bind_reuseport};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const NS: &str = "limits";
const HOST: &str = "app.example";

/// A configured, warm data plane with its own registry, serving one
/// listener on a fresh port, routing everything to one echo backend.
struct Limited {
    proxy: Proxy,
    registry: Registry,
    _echo: Echo,
}

impl Limited {
    async fn start(settings: DataPlaneSettings) -> Limited {
        let echo = start_echo(NS, "app", 0).await;
        let mut registry = Registry::default();
        let dp = DataPlane::new(settings, &mut registry);
        let mut text = simple_gateway_yaml(NS);
        text.push_str("---\n");
        text.push_str(&simple_route_yaml(NS, "app", "app"));
        let (mut snapshot, routes) = snapshot_of(1, parse_yaml(&text));
        snapshot.gateway_classes.push(gateway_class());
        snapshot.namespaces.push(namespace(NS, &[]));
        snapshot.services.push(service(NS, "app", 8080, 1));
        snapshot.endpoint_slices = slices(NS, "app", &[echo.addr], 1);
        dp.install(ServingConfig {
            snapshot: Arc::new(snapshot),
            routes,
        });
        wait_healthy(&dp, &[(BackendKey::new(NS, "app", 8080), 1)]).await;
        let listener = bind_reuseport("127.0.0.1:0".parse().unwrap()).unwrap();
        let proxy = Proxy::serve(dp, vec![(simple_listener(NS), listener)]);
        Limited {
            proxy,
            registry,
            _echo: echo,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.proxy.addrs[0]
    }

    /// The value of `series` (name plus labels) in the text exposition.
    fn metric(&self, series: &str) -> f64 {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
        let prefix = format!("{series} ");
        text.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
            .trim()
            .parse()
            .unwrap()
    }

    fn limit_hits(&self, limit: &str) -> f64 {
        self.metric(&format!(
            "switchyard_proxy_limit_hits_total{{limit=\"{limit}\"}}"
        ))
    }

    /// Waits until `limit` was hit `count` times. For hits hyper enforces:
    /// it may close the socket a moment before the connection's task sees
    /// the error and counts it.
    async fn wait_hits(&self, limit: &str, count: f64) {
        eventually(
            &format!("{limit} hits to reach {count}"),
            Duration::from_secs(5),
            || async {
                let hits = self.limit_hits(limit);
                anyhow::ensure!(hits == count, "{hits} hits");
                Ok(())
            },
        )
        .await
        .unwrap();
    }
}

/// Writes `bytes` on a new connection, then reads until the proxy closes
/// it; returns what was read. Panics if it is not closed within 5 s.
async fn exchange_until_closed(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    // The proxy may close before reading everything.
    let _ = stream.write_all(bytes).await;
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut out)).await;
    // A reset (unread request bytes at close) is a close too.
    assert!(read.is_ok(), "connection still open after 5 s");
    String::from_utf8_lossy(&out).into_owned()
}

async fn assert_served(conn: &mut Conn) {
    let reply = conn.send(get(HOST, "/")).await.unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_connections_a_new_connection_is_closed_counted_and_room_comes_back() {
    let limited = Limited::start(DataPlaneSettings {
        max_connections: 2,
        ..test_settings()
    })
    .await;
    let addr = limited.addr();
    assert_eq!(limited.limit_hits("connections"), 0.0);

    // Two connections held open, each proven served (so each holds a slot).
    let mut first = Conn::connect(addr).await.unwrap();
    let mut second = Conn::connect(addr).await.unwrap();
    assert_served(&mut first).await;
    assert_served(&mut second).await;

    // A third is closed without a response, and counted.
    let answer = exchange_until_closed(addr, b"GET / HTTP/1.1\r\nHost: app.example\r\n\r\n").await;
    assert_eq!(answer, "", "the connection past the limit got an answer");
    assert_eq!(limited.limit_hits("connections"), 1.0);

    // The two open ones are unaffected.
    assert_served(&mut first).await;
    assert_served(&mut second).await;

    // Once one closes (seen in the gauge, which drops after the slot is
    // freed), a new connection is served.
    drop(first);
    eventually(
        "the closed connection to leave the gauge",
        Duration::from_secs(5),
        || async {
            let open = limited.metric("switchyard_proxy_downstream_connections");
            anyhow::ensure!(open == 1.0, "{open} open");
            Ok(())
        },
    )
    .await
    .unwrap();
    let reply = send(addr, get(HOST, "/")).await.unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(limited.limit_hits("connections"), 1.0);

    drop(second);
    limited.proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_timeout_and_header_size_hits_are_counted() {
    let limited = Limited::start(DataPlaneSettings {
        header_read_timeout: Duration::from_millis(500),
        max_header_bytes: 16 * 1024,
        ..test_settings()
    })
    .await;
    let addr = limited.addr();
    assert_eq!(limited.limit_hits("header_timeout"), 0.0);
    assert_eq!(limited.limit_hits("header_size"), 0.0);

    // Connects and says nothing: closed by the proxy's own watchdog.
    let answer = exchange_until_closed(addr, b"").await;
    assert_eq!(answer, "");
    assert_eq!(limited.limit_hits("header_timeout"), 1.0);

    // One request, then half of a second head: hyper's header read timer
    // closes the connection after answering the first.
    let answer = exchange_until_closed(
        addr,
        b"GET / HTTP/1.1\r\nHost: app.example\r\n\r\nGET / HTTP/1.1\r\nHost: app.exa",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    limited.wait_hits("header_timeout", 2.0).await;

    // A head over max_header_bytes: hyper answers 431.
    let big = "x".repeat(32 * 1024);
    let request = format!("GET / HTTP/1.1\r\nHost: {HOST}\r\nX-Big: {big}\r\n\r\n");
    let answer = exchange_until_closed(addr, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer:?}");
    limited.wait_hits("header_size", 1.0).await;
    assert_eq!(limited.limit_hits("header_timeout"), 2.0);
    assert_eq!(limited.limit_hits("connections"), 0.0);

    limited.proxy.shutdown().await;
}
