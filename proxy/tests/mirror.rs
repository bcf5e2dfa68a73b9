//! Request mirrors get a full copy of the request, body included (fixed
//! length or chunked), and a mirror that never answers does not delay the
//! main response.
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

mod support;

use bytes::Bytes;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::client::{get, send};
use support::echo::{start_echo, start_scripted};
use support::*;
use switchyard_proto::model::{BackendKey, ConfigSnapshot, HttpRoute};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NS: &str = "mirror";

const ROUTE: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app, namespace: mirror}
spec:
  parentRefs: [{name: gw}]
  rules:
  - filters:
    - type: RequestMirror
      requestMirror:
        backendRef: {name: shadow, port: 8080}
    backendRefs: [{name: app, port: 8080}]
"#;

fn config(app: SocketAddr, shadow: SocketAddr) -> (ConfigSnapshot, Vec<HttpRoute>) {
    let mut text = simple_gateway_yaml(NS);
    text.push_str("---\n");
    text.push_str(ROUTE);
    let (mut snapshot, routes) = snapshot_of(1, parse_yaml(&text));
    snapshot.gateway_classes.push(gateway_class());
    snapshot.namespaces.push(namespace(NS, &[]));
    for (name, addr) in [("app", app), ("shadow", shadow)] {
        snapshot.services.push(service(NS, name, 8080, 1));
        snapshot
            .endpoint_slices
            .extend(slices(NS, name, &[addr], 1));
    }
    (snapshot, routes)
}

async fn body_arrives(bodies: &Arc<Mutex<Vec<(String, Bytes)>>>, uri: &str, want: &[u8]) {
    let bodies = Arc::clone(bodies);
    eventually(
        &format!("body of {uri} mirrored"),
        Duration::from_secs(5),
        || {
            let found = bodies
                .lock()
                .unwrap()
                .iter()
                .find(|(u, _)| u == uri)
                .map(|(_, b)| b.clone());
            async move {
                let body = found.ok_or_else(|| anyhow::anyhow!("not yet"))?;
                anyhow::ensure!(body.as_ref() == want, "got {body:?}");
                Ok(())
            }
        },
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrors_get_the_body_too() {
    let app = start_echo(NS, "app", 0).await;
    let shadow = start_echo(NS, "shadow", 0).await;
    let proxy = Proxy::start(test_settings(), vec![simple_listener(NS)]).await;
    let addr = proxy.addrs[0];
    let (snapshot, routes) = config(app.addr, shadow.addr);
    proxy.install(snapshot, routes);
    proxy
        .wait_healthy(&[
            (BackendKey::new(NS, "app", 8080), 1),
            (BackendKey::new(NS, "shadow", 8080), 1),
        ])
        .await;

    // Fixed length.
    let req = http::Request::post("/upload")
        .header("host", "app.example")
        .body(http_body_util::Full::new(Bytes::from_static(
            b"hello mirror",
        )))
        .unwrap();
    let reply = send(addr, req).await.unwrap();
    assert_eq!(reply.status, 200);
    body_arrives(&app.bodies, "/upload", b"hello mirror").await;
    body_arrives(&shadow.bodies, "/upload", b"hello mirror").await;

    // Chunked.
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(
            b"POST /chunked HTTP/1.1\r\nHost: app.example\r\nTransfer-Encoding: chunked\r\n\
              Connection: close\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        )
        .await
        .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
        .await
        .unwrap()
        .unwrap();
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
    body_arrives(&app.bodies, "/chunked", b"hello world").await;
    body_arrives(&shadow.bodies, "/chunked", b"hello world").await;
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_that_never_answers_does_not_delay_the_response() {
    let app = start_echo(NS, "app", 0).await;
    let (shadow, _stop) = start_scripted().await;
    let proxy = Proxy::start(test_settings(), vec![simple_listener(NS)]).await;
    let addr = proxy.addrs[0];
    let (snapshot, routes) = config(app.addr, shadow);
    proxy.install(snapshot, routes);
    proxy
        .wait_healthy(&[
            (BackendKey::new(NS, "app", 8080), 1),
            (BackendKey::new(NS, "shadow", 8080), 1),
        ])
        .await;
    for _ in 0..5 {
        let started = Instant::now();
        // The scripted mirror hangs on /hang; the echo answers at once.
        let reply = send(addr, get("app.example", "/hang")).await.unwrap();
        assert_eq!(reply.status, 200);
        assert_eq!(reply.pod().unwrap(), app.pod);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "main response waited for the mirror: {:?}",
            started.elapsed()
        );
    }
    assert!(proxy.dp.mirrors_in_flight() >= 1);
    proxy.shutdown().await;
}
