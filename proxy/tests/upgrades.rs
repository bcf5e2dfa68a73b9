//! HTTP/1.1 upgrades through a real proxy: a WebSocket handshake the
//! backend accepts becomes a tunnel that echoes bytes both ways; one the
//! backend refuses reaches the client as the backend's answer; tunnels
//! stay on their backend through a route cutover; the proxy's drain closes
//! them at its deadline; and requests that only look like upgrades are
//! ordinary requests, as before.
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

mod support;

use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use support::echo::start_echo;
use support::upgrade::{
    Mode, UpgradeEcho, closed, echo, open, send_head, start_upgrade_echo, websocket_request,
};
use support::*;
use switchyard_proto::model::{BackendKey, ConfigSnapshot, HttpRoute, Resource};
use switchyard_proxy::{DataPlane, DataPlaneSettings, bind_reuseport};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

const NS: &str = "upgrades";
const HOST: &str = "app.example";

/// Services `name -> addr`, and the route sending everything to `route_to`.
fn config(
    version: u64,
    backends: &[(&str, SocketAddr)],
    route_to: &str,
) -> (ConfigSnapshot, Vec<HttpRoute>) {
    let (mut snapshot, _) = snapshot_of(version, parse_yaml(&simple_gateway_yaml(NS)));
    snapshot.gateway_classes.push(gateway_class());
    snapshot.namespaces.push(namespace(NS, &[]));
    for (name, addr) in backends {
        snapshot.services.push(service(NS, name, 8080, 1));
        snapshot
            .endpoint_slices
            .extend(slices(NS, name, &[*addr], 1));
    }
    let routes = parse_yaml(&simple_route_yaml(NS, "app", route_to))
        .into_iter()
        .filter_map(|r| match r {
            Resource::HttpRoute(r) => Some(r),
            _ => None,
        })
        .collect();
    (snapshot, routes)
}

fn key(name: &str) -> BackendKey {
    BackendKey::new(NS, name, 8080)
}

/// A proxy with its own metrics registry, routing to `route_to` among
/// `backends` (all warm).
struct Gateway {
    proxy: Proxy,
    registry: Registry,
}

impl Gateway {
    async fn start(
        settings: DataPlaneSettings,
        backends: &[(&str, SocketAddr)],
        route_to: &str,
    ) -> Gateway {
        let mut registry = Registry::default();
        let dp = DataPlane::new(settings, &mut registry);
        let others: Vec<BackendKey> = backends
            .iter()
            .filter(|(name, _)| *name != route_to)
            .map(|(name, _)| key(name))
            .collect();
        dp.set_warming(others.iter().cloned().collect());
        let (snapshot, routes) = config(1, backends, route_to);
        dp.install(switchyard_proxy::ServingConfig {
            snapshot: Arc::new(snapshot),
            routes,
        });
        let all: Vec<(BackendKey, u32)> = backends.iter().map(|(name, _)| (key(name), 1)).collect();
        wait_healthy(&dp, &all).await;
        let listener = bind_reuseport("127.0.0.1:0".parse().unwrap()).unwrap();
        let proxy = Proxy::serve(dp, vec![(simple_listener(NS), listener)]);
        Gateway { proxy, registry }
    }

    fn addr(&self) -> SocketAddr {
        self.proxy.addrs[0]
    }

    /// The value of `series` (name plus labels), 0 when it does not exist.
    fn metric(&self, series: &str) -> f64 {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
        let prefix = format!("{series} ");
        text.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .map_or(0.0, |v| v.trim().parse().unwrap())
    }

    fn upgrades(&self, backend: &str, outcome: &str) -> f64 {
        self.metric(&format!(
            "switchyard_proxy_upgrades_total{{backend=\"{NS}/{backend}:8080\",outcome=\"{outcome}\"}}"
        ))
    }

    fn tunnels_open(&self) -> f64 {
        self.metric("switchyard_proxy_tunnels_open")
    }

    fn tunnel_bytes(&self, direction: &str) -> f64 {
        self.metric(&format!(
            "switchyard_proxy_tunnel_bytes_total{{direction=\"{direction}\"}}"
        ))
    }

    /// Opens a WebSocket tunnel through the proxy; panics unless it
    /// switched.
    async fn tunnel(&self) -> (String, TcpStream) {
        let (reply, stream) = open(self.addr(), &websocket_request(HOST, "/chat", ""))
            .await
            .unwrap();
        assert_eq!(reply.status, 101, "{reply:?}");
        assert!(reply.body.is_empty(), "bytes before any were sent");
        let pod = reply.header("x-pod").unwrap().to_owned();
        (pod, stream)
    }

    async fn wait_tunnels_open(&self, n: f64) {
        eventually(
            &format!("{n} tunnels open"),
            Duration::from_secs(5),
            || async {
                let open = self.tunnels_open();
                anyhow::ensure!(open == n, "{open} open");
                Ok(())
            },
        )
        .await
        .unwrap();
    }
}

async fn wait_backend_open(backend: &UpgradeEcho, n: usize) {
    eventually(
        &format!("{n} switched connections at {}", backend.pod),
        Duration::from_secs(5),
        || async {
            let open = backend.open();
            anyhow::ensure!(open == n, "{open} open");
            Ok(())
        },
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_handshake_becomes_a_tunnel_that_echoes_both_ways() {
    let blue = start_upgrade_echo("blue", Mode::Switch).await;
    let gw = Gateway::start(test_settings(), &[("blue", blue.addr)], "blue").await;

    // The client does not wait for the 101 to send its first bytes: they
    // arrive with the handshake, and hyper must hand them over with the
    // connection.
    let handshake = websocket_request(HOST, "/chat", "") + "early";
    let (reply, mut tunnel) = open(gw.addr(), &handshake).await.unwrap();
    // The client gets the backend's 101, headers and all.
    assert_eq!(reply.status, 101, "{reply:?}");
    assert_eq!(reply.header("upgrade"), Some("websocket"));
    assert_eq!(reply.header("connection"), Some("upgrade"));
    assert_eq!(reply.header("x-pod"), Some("blue"));
    // The backend got the upgrade, the handshake's own headers and the
    // proxy's forwarding headers.
    let seen = blue.upgrades.lock().unwrap()[0].clone();
    assert_eq!(seen["upgrade"], "websocket");
    assert_eq!(seen["connection"], "upgrade");
    assert_eq!(seen["sec-websocket-key"], "dGhlIHNhbXBsZSBub25jZQ==");
    assert_eq!(seen["sec-websocket-version"], "13");
    assert_eq!(seen["x-forwarded-for"], "127.0.0.1");

    // The early bytes come back, maybe partly right behind the 101.
    let mut early = reply.body.clone();
    while early.len() < 5 {
        let mut byte = [0u8; 1];
        tokio::time::timeout(Duration::from_secs(5), tunnel.read_exact(&mut byte))
            .await
            .expect("early bytes echoed within 5 s")
            .unwrap();
        early.push(byte[0]);
    }
    assert_eq!(early, b"early");

    // Bytes both ways: a short message, then one larger than any socket
    // buffer, then another short one.
    echo(&mut tunnel, b"hello").await.unwrap();
    let big: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    echo(&mut tunnel, &big).await.unwrap();
    echo(&mut tunnel, b"bye").await.unwrap();
    let sent = (5 + 5 + big.len() + 3) as f64;
    assert_eq!(gw.upgrades("blue", "tunnelled"), 1.0);
    assert_eq!(gw.upgrades("blue", "refused"), 0.0);
    assert_eq!(gw.upgrades("blue", "failed"), 0.0);
    assert_eq!(gw.tunnels_open(), 1.0);
    // Everything the client got back went through the proxy's writes, and
    // everything it sent through its reads.
    assert_eq!(gw.tunnel_bytes("client_to_backend"), sent);
    assert_eq!(gw.tunnel_bytes("backend_to_client"), sent);
    assert_eq!(
        gw.metric("switchyard_proxy_requests_total{route=\"upgrades/app\",backend=\"upgrades/blue:8080\",status_class=\"1xx\"}"),
        1.0
    );

    // The client closes: the backend sees it, the tunnel is gone.
    drop(tunnel);
    wait_backend_open(&blue, 0).await;
    gw.wait_tunnels_open(0.0).await;
    gw.proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_that_refuses_the_upgrade_answers_the_client_and_no_tunnel_opens() {
    let blue = start_upgrade_echo("blue", Mode::Refuse).await;
    let gw = Gateway::start(test_settings(), &[("blue", blue.addr)], "blue").await;

    let (reply, mut conn) = open(gw.addr(), &websocket_request(HOST, "/chat", ""))
        .await
        .unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.text(), "no upgrade here");
    assert_eq!(reply.header("upgrade"), None);
    assert_eq!(reply.header("x-pod"), Some("blue"));
    // The backend was asked.
    assert_eq!(blue.upgrades.lock().unwrap().len(), 1);
    // The connection still speaks HTTP.
    let plain = format!("GET /next HTTP/1.1\r\nHost: {HOST}\r\n\r\n");
    let next = send_head(&mut conn, &plain).await.unwrap();
    assert_eq!(next.status, 200);
    assert_eq!(next.text(), "plain");

    assert_eq!(gw.upgrades("blue", "refused"), 1.0);
    assert_eq!(gw.upgrades("blue", "tunnelled"), 0.0);
    assert_eq!(gw.tunnels_open(), 0.0);
    assert_eq!(blue.open(), 0);
    gw.proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnels_stay_on_their_backend_through_a_route_cutover() {
    const TUNNELS: usize = 100;
    let blue = start_upgrade_echo("blue", Mode::Switch).await;
    let green = start_upgrade_echo("green", Mode::Switch).await;
    let backends = [("blue", blue.addr), ("green", green.addr)];
    let gw = Gateway::start(test_settings(), &backends, "blue").await;
    let dp = Arc::clone(&gw.proxy.dp);

    let mut tunnels = Vec::new();
    for _ in 0..TUNNELS {
        let (pod, mut stream) = gw.tunnel().await;
        assert_eq!(pod, "blue");
        echo(&mut stream, b"before").await.unwrap();
        tunnels.push(stream);
    }
    wait_backend_open(&blue, TUNNELS).await;
    assert_eq!(dp.endpoint_count(), 2);

    // Cut over to green; blue is neither served nor warming any more.
    let (snapshot, routes) = config(2, &backends, "green");
    gw.proxy.install(snapshot, routes);
    dp.set_warming(Default::default());
    assert_eq!(dp.readiness(&key("blue")), None);

    // Every tunnel still echoes, still through blue.
    for (i, stream) in tunnels.iter_mut().enumerate() {
        echo(stream, format!("after cutover #{i}").as_bytes())
            .await
            .unwrap();
    }
    assert_eq!(blue.open(), TUNNELS);
    assert_eq!(green.open(), 0);
    // New tunnels go to green.
    let (pod, mut fresh) = gw.tunnel().await;
    assert_eq!(pod, "green");
    echo(&mut fresh, b"new").await.unwrap();
    assert_eq!(gw.upgrades("blue", "tunnelled"), TUNNELS as f64);
    assert_eq!(gw.upgrades("green", "tunnelled"), 1.0);
    gw.wait_tunnels_open((TUNNELS + 1) as f64).await;
    // The retired endpoint lives on only for its tunnels.
    assert_eq!(dp.endpoint_count(), 2);

    drop(tunnels);
    wait_backend_open(&blue, 0).await;
    gw.wait_tunnels_open(1.0).await;
    eventually("blue's endpoint let go", Duration::from_secs(5), || {
        let dp = Arc::clone(&dp);
        async move {
            let n = dp.endpoint_count();
            anyhow::ensure!(n == 1, "{n} endpoints");
            Ok(())
        }
    })
    .await
    .unwrap();
    echo(&mut fresh, b"still here").await.unwrap();
    drop(fresh);
    gw.wait_tunnels_open(0.0).await;
    gw.proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_deadline_closes_open_tunnels_and_no_new_ones_open() {
    let blue = start_upgrade_echo("blue", Mode::Switch).await;
    let settings = DataPlaneSettings {
        drain_timeout: Duration::from_secs(1),
        // Longer than the deadline: the idle connection below must still
        // be open when it sends its upgrade.
        drain_idle_grace: Duration::from_secs(30),
        ..test_settings()
    };
    let mut gw = Gateway::start(settings.clone(), &[("blue", blue.addr)], "blue").await;
    let (_, mut tunnel) = gw.tunnel().await;
    echo(&mut tunnel, b"before").await.unwrap();
    // A keep-alive connection that served one plain request.
    let (reply, mut idle) = open(
        gw.addr(),
        &format!("GET / HTTP/1.1\r\nHost: {HOST}\r\n\r\n"),
    )
    .await
    .unwrap();
    assert_eq!(reply.status, 200);

    let started = tokio::time::Instant::now();
    let serving = gw.proxy.begin_shutdown();
    // The drain has begun once the listener is closed (new connections are
    // refused); connections learn it a task wake-up later. Without this
    // wait a loaded machine could send the upgrade below before.
    let addr = gw.addr();
    eventually(
        "the listener closed",
        Duration::from_secs(5),
        || async move {
            anyhow::ensure!(
                tokio::net::TcpStream::connect(addr).await.is_err(),
                "still accepting"
            );
            Ok(())
        },
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Draining: the tunnel keeps working...
    echo(&mut tunnel, b"while draining").await.unwrap();
    // ...and an upgrade asked for now is refused, the connection closed.
    let refused = send_head(&mut idle, &websocket_request(HOST, "/chat", ""))
        .await
        .unwrap();
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.header("connection"), Some("close"));
    assert_eq!(gw.upgrades("blue", "failed"), 1.0);
    assert_eq!(blue.upgrades.lock().unwrap().len(), 1);

    // At the deadline the tunnel is closed, on both sides.
    closed(&mut tunnel).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), serving)
        .await
        .expect("serve returned")
        .unwrap()
        .unwrap();
    let took = started.elapsed();
    assert!(
        took >= settings.drain_timeout,
        "tunnel closed before the drain deadline ({took:?})"
    );
    wait_backend_open(&blue, 0).await;
    assert_eq!(gw.tunnels_open(), 0.0);
    assert_eq!(gw.upgrades("blue", "tunnelled"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_that_only_look_like_upgrades_are_ordinary_requests() {
    let pod = start_echo(NS, "app", 0).await;
    let gw = Gateway::start(test_settings(), &[("app", pod.addr)], "app").await;
    let cases = [
        // `Connection: upgrade` and nothing else.
        "Connection: upgrade\r\n",
        // `Upgrade` that `Connection` does not name.
        "Upgrade: websocket\r\n",
        // h2c would switch the connection itself: never tunnelled.
        "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n",
        // A body: not an upgrade the proxy tunnels.
        "Connection: upgrade\r\nUpgrade: websocket\r\nContent-Length: 2\r\n\r\nhi",
    ];
    for extra in cases {
        // `extra` ends the head itself when it carries a body.
        let request = if extra.contains("\r\n\r\n") {
            format!("POST /plain HTTP/1.1\r\nHost: {HOST}\r\n{extra}")
        } else {
            format!("GET /plain HTTP/1.1\r\nHost: {HOST}\r\n{extra}\r\n")
        };
        let (reply, _conn) = open(gw.addr(), &request).await.unwrap();
        assert_eq!(reply.status, 200, "{extra:?}: {reply:?}");
        let seen = &reply.json().unwrap()["headers"];
        for hop in ["connection", "upgrade", "http2-settings"] {
            assert!(
                seen.get(hop).is_none(),
                "{extra:?}: backend saw {hop}: {seen}"
            );
        }
    }
    // Nothing was counted as an upgrade.
    assert_eq!(gw.upgrades("app", "refused"), 0.0);
    assert_eq!(gw.upgrades("app", "failed"), 0.0);
    assert_eq!(gw.upgrades("app", "tunnelled"), 0.0);
    gw.proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_101_nobody_asked_for_is_a_bad_gateway() {
    let blue = start_upgrade_echo("blue", Mode::Switch).await;
    let gw = Gateway::start(test_settings(), &[("blue", blue.addr)], "blue").await;
    let request = format!("GET /switch-anyway HTTP/1.1\r\nHost: {HOST}\r\n\r\n");
    let (reply, _conn) = open(gw.addr(), &request).await.unwrap();
    assert_eq!(reply.status, 502, "{reply:?}");
    assert_eq!(
        gw.metric("switchyard_proxy_errors_total{blame=\"upstream\",kind=\"bad_upgrade\"}"),
        1.0
    );
    assert_eq!(gw.tunnels_open(), 0.0);
    gw.proxy.shutdown().await;
}

/// An HTTP/2 connection to the proxy (prior knowledge).
async fn h2_client(
    addr: SocketAddr,
) -> hyper::client::conn::http2::SendRequest<http_body_util::Empty<bytes::Bytes>> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (sender, conn) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    sender
}

/// RFC 8441's WebSocket bootstrap: `CONNECT` with `:protocol websocket`.
/// Sent again until the proxy's SETTINGS (which enable it) have arrived.
async fn websocket_connect(
    sender: &mut hyper::client::conn::http2::SendRequest<http_body_util::Empty<bytes::Bytes>>,
) -> http::Response<hyper::body::Incoming> {
    let mut last = String::new();
    for _ in 0..50 {
        let mut request = http::Request::builder()
            .method(http::Method::CONNECT)
            .uri(format!("http://{HOST}/chat"))
            .header("sec-websocket-version", "13")
            .body(http_body_util::Empty::new())
            .unwrap();
        request
            .extensions_mut()
            .insert(hyper::ext::Protocol::from_static("websocket"));
        match sender.send_request(request).await {
            Ok(response) => return response,
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("extended CONNECT never went through: {last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_websocket_connect_is_tunnelled_to_an_http1_upgrade() {
    let blue = start_upgrade_echo("blue", Mode::Switch).await;
    let gw = Gateway::start(test_settings(), &[("blue", blue.addr)], "blue").await;
    let mut sender = h2_client(gw.addr()).await;

    let response = websocket_connect(&mut sender).await;
    // The 200 that opens an HTTP/2 tunnel, with the backend's headers but
    // not its answer to a key the client never sent.
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-pod"], "blue");
    assert!(!response.headers().contains_key("sec-websocket-accept"));
    assert!(!response.headers().contains_key("upgrade"));
    // The backend got an HTTP/1.1 upgrade with a key of the right shape.
    let seen = blue.upgrades.lock().unwrap()[0].clone();
    assert_eq!(seen["upgrade"], "websocket");
    assert_eq!(seen["connection"], "upgrade");
    assert_eq!(seen["sec-websocket-version"], "13");
    let key = seen["sec-websocket-key"].to_str().unwrap().to_owned();
    assert_eq!(key.len(), 24, "{key}");
    assert!(key.ends_with("=="), "{key}");

    let upgraded = hyper::upgrade::on(response).await.unwrap();
    let mut tunnel = hyper_util::rt::TokioIo::new(upgraded);
    use tokio::io::AsyncWriteExt;
    for message in [&b"hello"[..], &[7u8; 100_000][..], b"bye"] {
        tunnel.write_all(message).await.unwrap();
        let mut back = vec![0u8; message.len()];
        tokio::time::timeout(Duration::from_secs(5), tunnel.read_exact(&mut back))
            .await
            .expect("echoed within 5 s")
            .unwrap();
        assert_eq!(back, message);
    }
    assert_eq!(gw.upgrades("blue", "tunnelled"), 1.0);
    gw.wait_tunnels_open(1.0).await;

    // The same connection goes on serving ordinary requests beside it.
    let plain = http::Request::get(format!("http://{HOST}/next"))
        .body(http_body_util::Empty::new())
        .unwrap();
    let next = sender.send_request(plain).await.unwrap();
    assert_eq!(next.status(), 200);

    // Closing the stream closes the backend's side.
    tunnel.shutdown().await.unwrap();
    drop(tunnel);
    wait_backend_open(&blue, 0).await;
    gw.wait_tunnels_open(0.0).await;
    gw.proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_websocket_connect_the_backend_does_not_switch_is_a_bad_gateway() {
    // A 200 without a switch would look like an open tunnel to an HTTP/2
    // client: it gets 502 instead, and the failure is counted.
    let blue = start_upgrade_echo("blue", Mode::Refuse).await;
    let gw = Gateway::start(test_settings(), &[("blue", blue.addr)], "blue").await;
    let mut sender = h2_client(gw.addr()).await;
    let response = websocket_connect(&mut sender).await;
    assert_eq!(response.status(), 502);
    assert_eq!(blue.upgrades.lock().unwrap().len(), 1);
    assert_eq!(gw.upgrades("blue", "failed"), 1.0);
    assert_eq!(gw.tunnels_open(), 0.0);
    gw.proxy.shutdown().await;
}
