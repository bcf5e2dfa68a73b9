//! HTTP/2 to backends: a Service port with `appProtocol:
//! kubernetes.io/h2c` is spoken to over HTTP/2 with prior knowledge — the
//! health check too (the backend here speaks nothing else, so a backend
//! that turns healthy proves it) — whatever the client spoke; requests
//! share one upstream connection as streams; the target reaches the
//! backend as `:authority` and path; response trailers (gRPC's status)
//! reach an HTTP/2 client; and a port without the `appProtocol` stays
//! HTTP/1.1.
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

mod support;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use support::client::{Conn, get};
use support::*;
use switchyard_proto::model::{BackendKey, ServicePort, UpstreamProtocol};
use switchyard_proxy::{DataPlane, ServingConfig};
use tokio::net::TcpListener;

const NS: &str = "h2c";

/// An HTTP/2-only backend (prior knowledge): answers every request with a
/// JSON description of it and a `grpc-status: 0` trailer; counts the
/// connections it accepted.
async fn start_h2c_backend() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let accepted = Arc::clone(&connections);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            accepted.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|req: Request<Incoming>| async move {
                    let seen = serde_json::json!({
                        "version": format!("{:?}", req.version()),
                        "authority": req.uri().authority().map(|a| a.to_string()),
                        "path": req.uri().path_and_query().map(|p| p.to_string()),
                        "te": req.headers().get("te").map(|v| v.to_str().unwrap().to_owned()),
                    });
                    let mut trailers = HeaderMap::new();
                    trailers.insert("grpc-status", HeaderValue::from_static("0"));
                    let frames = vec![
                        Ok::<_, Infallible>(Frame::data(Bytes::from(seen.to_string()))),
                        Ok(Frame::trailers(trailers)),
                    ];
                    let body = StreamBody::new(futures::stream::iter(frames));
                    Ok::<_, Infallible>(Response::new(body))
                });
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, connections)
}

struct Fixture {
    proxy: Proxy,
    registry: Registry,
    h2_connections: Arc<AtomicUsize>,
}

/// Route `app` to Service `grpc` (port 8080, h2c) for `/h2/`, everything
/// else to Service `plain` (HTTP/1.1 echo).
async fn start() -> (Fixture, support::echo::Echo) {
    let (h2_addr, h2_connections) = start_h2c_backend().await;
    let plain = support::echo::start_echo(NS, "plain", 0).await;
    let yaml = format!(
        r#"{}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: app, namespace: {NS}}}
spec:
  parentRefs: [{{name: gw}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /h2}}}}]
    backendRefs: [{{name: grpc, port: 8080}}]
  - backendRefs: [{{name: plain, port: 8080}}]
"#,
        simple_gateway_yaml(NS)
    );
    let (mut snapshot, routes) = snapshot_of(1, parse_yaml(&yaml));
    snapshot.gateway_classes.push(gateway_class());
    snapshot.namespaces.push(namespace(NS, &[]));
    let mut grpc = service(NS, "grpc", 8080, 1);
    grpc.ports = vec![ServicePort {
        name: Some("http".into()),
        port: 8080,
        target_port: None,
        app_protocol: Some(UpstreamProtocol::H2C.into()),
    }];
    snapshot.services.push(grpc);
    snapshot.services.push(service(NS, "plain", 8080, 1));
    snapshot
        .endpoint_slices
        .extend(slices(NS, "grpc", &[h2_addr], 1));
    snapshot
        .endpoint_slices
        .extend(slices(NS, "plain", &[plain.addr], 1));
    let mut registry = Registry::default();
    let dp = DataPlane::new(test_settings(), &mut registry);
    dp.install(ServingConfig {
        snapshot: Arc::new(snapshot),
        routes,
    });
    let socket = switchyard_proxy::bind_reuseport("127.0.0.1:0".parse().unwrap()).unwrap();
    let proxy = Proxy::serve(dp, vec![(simple_listener(NS), socket)]);
    // The h2c backend answers nothing but HTTP/2: healthy means the
    // health check spoke HTTP/2 to it.
    proxy
        .wait_healthy(&[
            (BackendKey::new(NS, "grpc", 8080), 1),
            (BackendKey::new(NS, "plain", 8080), 1),
        ])
        .await;
    let fixture = Fixture {
        proxy,
        registry,
        h2_connections,
    };
    (fixture, plain)
}

impl Fixture {
    /// `switchyard_proxy_upstream_connections_opened_total` for backend
    /// `service`:8080.
    fn opened(&self, service: &str) -> u64 {
        let mut text = String::new();
        encode(&mut text, &self.registry).unwrap();
        text.lines()
            .filter(|l| l.starts_with("switchyard_proxy_upstream_connections_opened_total{"))
            .filter(|l| l.contains(&format!("backend=\"{NS}/{service}:8080\"")))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2c_port_is_spoken_to_over_http2_on_one_shared_connection() {
    let (f, _plain) = start().await;
    let addr = f.proxy.addrs[0];
    // An HTTP/1.1 client, 40 concurrent requests.
    let mut tasks = Vec::new();
    for i in 0..40 {
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::connect(addr).await.unwrap();
            conn.send(get("app.example", &format!("/h2/item?n={i}")))
                .await
                .unwrap()
        }));
    }
    for (i, task) in tasks.into_iter().enumerate() {
        let reply = task.await.unwrap();
        assert_eq!(reply.status, 200);
        let seen = reply.json().unwrap();
        assert_eq!(seen["version"], "HTTP/2.0", "{seen}");
        assert_eq!(seen["authority"], "app.example", "{seen}");
        assert_eq!(seen["path"], format!("/h2/item?n={i}"), "{seen}");
    }
    // Every request (and every health check) went over as a stream of one
    // connection.
    assert_eq!(f.h2_connections.load(Ordering::Relaxed), 1);
    assert_eq!(f.opened("grpc"), 1);
    f.proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trailers_reach_an_http2_client_and_grpc_requests_say_te_trailers() {
    let (f, _plain) = start().await;
    let tcp = tokio::net::TcpStream::connect(f.proxy.addrs[0])
        .await
        .unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .unwrap();
    tokio::spawn(conn);
    let req = Request::post("http://app.example/h2/pkg.Service/Method")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(Bytes::from_static(b"\0\0\0\0\0")))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let collected = resp.into_body().collect().await.unwrap();
    let trailers = collected
        .trailers()
        .cloned()
        .expect("trailers passed through");
    assert_eq!(trailers["grpc-status"], "0");
    let seen: serde_json::Value = serde_json::from_slice(&collected.to_bytes()).unwrap();
    assert_eq!(seen["te"], "trailers", "{seen}");
    assert_eq!(seen["path"], "/h2/pkg.Service/Method");
    f.proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_without_the_app_protocol_stays_http1() {
    let (f, plain) = start().await;
    let reply = support::client::send(f.proxy.addrs[0], get("app.example", "/plain"))
        .await
        .unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json().unwrap()["proto"], "HTTP/1.1");
    assert!(plain.count("/plain") >= 1);
    f.proxy.shutdown().await;
}
