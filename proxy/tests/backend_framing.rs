//! A backend response with both `Content-Length` and `Transfer-Encoding`
//! (RFC 9112 §6.1: an intermediary must remove the Content-Length): the
//! client gets the body as the transfer coding framed it, with no
//! `Content-Length`, and the upstream connection that carried it is never
//! used again (what follows on it cannot be trusted).
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use support::raw::exchange;
use support::*;
use switchyard_proto::model::BackendKey;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const NS: &str = "framing";

/// What the ambiguous backend saw.
#[derive(Default)]
struct Seen {
    /// A request arrived on a connection that had carried `/both`.
    reused_after_both: AtomicBool,
    /// `/after` requests answered.
    after: AtomicUsize,
}

/// A keep-alive backend: `/both` answers with `Content-Length: 5` and a
/// chunked body of 7 bytes (`smuggle`); anything else gets `200 ok` with a
/// plain Content-Length.
async fn start_ambiguous() -> (SocketAddr, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let shared = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream, Arc::clone(&shared)));
        }
    });
    (addr, seen)
}

async fn serve(mut stream: TcpStream, seen: Arc<Seen>) {
    let mut carried_both = false;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end + 4);
        if carried_both {
            seen.reused_after_both.store(true, Ordering::Relaxed);
        }
        let answer: &[u8] = if head.starts_with("GET /both ") {
            carried_both = true;
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n7\r\nsmuggle\r\n0\r\n\r\n"
        } else {
            if head.starts_with("GET /after ") {
                seen.after.fetch_add(1, Ordering::Relaxed);
            }
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        };
        if stream.write_all(answer).await.is_err() {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_length_is_removed_when_transfer_encoding_frames_the_body() {
    let (backend, seen) = start_ambiguous().await;
    let proxy = Proxy::start(test_settings(), vec![simple_listener(NS)]).await;
    let mut text = simple_gateway_yaml(NS);
    text.push_str("---\n");
    text.push_str(&simple_route_yaml(NS, "app", "app"));
    let (mut snapshot, routes) = snapshot_of(1, parse_yaml(&text));
    snapshot.gateway_classes.push(gateway_class());
    snapshot.namespaces.push(namespace(NS, &[]));
    snapshot.services.push(service(NS, "app", 8080, 1));
    snapshot.endpoint_slices = slices(NS, "app", &[backend], 1);
    proxy.install(snapshot, routes);
    proxy
        .wait_healthy(&[(BackendKey::new(NS, "app", 8080), 1)])
        .await;

    let reply = exchange(
        proxy.addrs[0],
        b"GET /both HTTP/1.1\r\nHost: app.example\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.header("content-length"), None, "{reply:?}");
    assert_eq!(reply.body, b"smuggle", "{reply:?}");
    assert!(reply.complete, "{reply:?}");

    // Later requests (one keep-alive client connection, so the proxy
    // would reuse a pooled upstream connection if it could) never travel
    // on the connection that carried the ambiguous response.
    let mut conn = support::client::Conn::connect(proxy.addrs[0])
        .await
        .unwrap();
    for _ in 0..10 {
        let reply = conn
            .send(support::client::get("app.example", "/after"))
            .await
            .unwrap();
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body.as_ref(), b"ok");
    }
    assert_eq!(seen.after.load(Ordering::Relaxed), 10);
    assert!(
        !seen.reused_after_both.load(Ordering::Relaxed),
        "a request was sent on the connection that carried the ambiguous response"
    );
    proxy.shutdown().await;
}
