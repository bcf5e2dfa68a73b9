//! Fake backends on 127.0.0.1: the Gateway API suite's echo server (JSON
//! description of the request, `X-Echo-Set-Header`, a log of request
//! URIs), plus misbehaving ones (resets every connection, never answers).

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::json;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// A running echo server.
pub struct Echo {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its pod name (`<service>-<rs>-<pod>`).
    pub pod: String,
    /// Request URIs it answered, in order (the suite's "Echoing back
    /// request made to <uri>" log).
    pub log: Arc<Mutex<Vec<String>>>,
    /// When set, `/health` answers 503.
    pub unhealthy: Arc<AtomicBool>,
    /// Requests answered.
    pub served: Arc<AtomicUsize>,
    /// TCP connections accepted.
    pub connections: Arc<AtomicUsize>,
    /// TCP connections currently open.
    pub open: Arc<AtomicUsize>,
    /// Request bodies received, with their URIs.
    pub bodies: Arc<Mutex<Vec<(String, Bytes)>>>,
    /// Delayed (`?delay_ms=`) requests being answered right now.
    pub active: Arc<AtomicUsize>,
    /// Whether the accept loop still holds the listener.
    listening: Arc<AtomicBool>,
    stop: watch::Sender<bool>,
}

impl Drop for Echo {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

impl Echo {
    /// Stops the server and returns once it is dead: the listener closed
    /// (connects are refused) and every connection's task past its last
    /// answer. Dropping an `Echo` only asks; a connection whose task has
    /// not run since could still answer one more request.
    pub async fn kill(self) {
        let _ = self.stop.send(true);
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while self.listening.load(Ordering::Acquire) || self.open.load(Ordering::Acquire) > 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "echo {} still serving 5 s after it was stopped",
                self.pod
            );
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }

    /// How many logged request URIs equal `uri`.
    pub fn count(&self, uri: &str) -> usize {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|u| *u == uri)
            .count()
    }
}

#[derive(Clone)]
struct EchoState {
    namespace: String,
    pod: String,
    log: Arc<Mutex<Vec<String>>>,
    unhealthy: Arc<AtomicBool>,
    served: Arc<AtomicUsize>,
    active: Arc<AtomicUsize>,
    bodies: Arc<Mutex<Vec<(String, Bytes)>>>,
}

/// Starts an echo server for one pod of `namespace/service`.
pub async fn start_echo(namespace: &str, service: &str, replica: usize) -> Echo {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let pod = format!("{service}-5d8f7c6b9{replica}-x{replica}k4p");
    let state = EchoState {
        namespace: namespace.to_owned(),
        pod: pod.clone(),
        log: Arc::default(),
        unhealthy: Arc::default(),
        served: Arc::default(),
        active: Arc::default(),
        bodies: Arc::default(),
    };
    let connections = Arc::new(AtomicUsize::new(0));
    let open = Arc::new(AtomicUsize::new(0));
    let (stop, mut stopped) = watch::channel(false);
    let listening = Arc::new(AtomicBool::new(true));
    let echo = Echo {
        addr,
        pod,
        log: Arc::clone(&state.log),
        unhealthy: Arc::clone(&state.unhealthy),
        served: Arc::clone(&state.served),
        connections: Arc::clone(&connections),
        open: Arc::clone(&open),
        active: Arc::clone(&state.active),
        bodies: Arc::clone(&state.bodies),
        listening: Arc::clone(&listening),
        stop,
    };
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = stopped.changed() => None,
                accepted = listener.accept() => Some(accepted),
            };
            let (stream, _) = match accepted {
                None => {
                    drop(listener);
                    listening.store(false, Ordering::Release);
                    return;
                }
                Some(Ok(pair)) => pair,
                Some(Err(_)) => continue,
            };
            connections.fetch_add(1, Ordering::Relaxed);
            open.fetch_add(1, Ordering::Relaxed);
            let open = Arc::clone(&open);
            let state = state.clone();
            let mut stopped = stopped.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let state = state.clone();
                    async move { Ok::<_, Infallible>(answer(&state, req).await) }
                });
                {
                    let conn = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc);
                    tokio::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => {}
                        _ = stopped.changed() => {}
                    }
                    // The connection (its socket) is dropped here, before
                    // it stops counting as open.
                }
                open.fetch_sub(1, Ordering::Release);
            });
        }
    });
    echo
}

async fn answer(state: &EchoState, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let uri = req.uri().to_string();
    let (parts, body) = req.into_parts();
    // Read the body (keep-alive needs it) and keep non-empty ones.
    if let Ok(collected) = body.collect().await {
        let bytes = collected.to_bytes();
        if !bytes.is_empty() {
            state.bodies.lock().unwrap().push((uri.clone(), bytes));
        }
    }
    if parts.uri.path() == "/health" && state.unhealthy.load(Ordering::Relaxed) {
        let mut resp = Response::new(Full::new(Bytes::from_static(b"unhealthy")));
        *resp.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        return resp;
    }
    // `?delay_ms=N`: answer late, to keep a request in flight.
    if let Some(ms) = parts
        .uri
        .query()
        .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("delay_ms=")))
        .and_then(|v| v.parse::<u64>().ok())
    {
        state.active.fetch_add(1, Ordering::Relaxed);
        // A slow backend is what was asked for, not a wait.
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        state.active.fetch_sub(1, Ordering::Relaxed);
    }
    state.log.lock().unwrap().push(uri.clone());
    state.served.fetch_add(1, Ordering::Relaxed);
    let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in &parts.headers {
        headers
            .entry(name.as_str().to_owned())
            .or_default()
            .push(String::from_utf8_lossy(value.as_bytes()).into_owned());
    }
    let host = parts
        .headers
        .get(http::header::HOST)
        .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
        .unwrap_or_default();
    let body = json!({
        "path": uri,
        "host": host,
        "method": parts.method.as_str(),
        "proto": format!("{:?}", parts.version),
        "headers": headers,
        "namespace": state.namespace,
        "pod": state.pod,
    });
    let mut resp = Response::new(Full::new(Bytes::from(body.to_string())));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for value in parts.headers.get_all("x-echo-set-header") {
        let Ok(text) = value.to_str() else { continue };
        for pair in text.split(',') {
            let Some((name, value)) = pair.split_once(':') else {
                continue;
            };
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.trim().as_bytes()),
                HeaderValue::from_str(value.trim()),
            ) {
                resp.headers_mut().append(name, value);
            }
        }
    }
    resp
}

/// A raw-TCP backend whose behaviour depends on the request path, for
/// failure tests: `/reset` resets the connection (RST) without answering,
/// `/hang` never answers, `/keepalive` is answered on a kept-alive
/// connection that then closes on its next request without answering it,
/// anything else (health checks included) gets `200 ok` and
/// `Connection: close`.
pub async fn start_scripted() -> (SocketAddr, watch::Sender<bool>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, mut stopped) = watch::channel(false);
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                _ = stopped.changed() => return,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(_) => continue,
                },
            };
            let mut stopped = stopped.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = scripted_connection(stream) => {}
                    _ = stopped.changed() => {}
                }
            });
        }
    });
    (addr, stop)
}

async fn scripted_connection(mut stream: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let head = String::from_utf8_lossy(&buf);
    let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
    match path.as_str() {
        "/keepalive" => {
            // Answered and kept alive; the connection's next request is
            // read and the connection closed without an answer, as when a
            // backend's idle timeout closes it while a request crosses.
            let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nkeepalive";
            if stream.write_all(answer).await.is_err() {
                return;
            }
            let mut next = [0u8; 4096];
            let _ = stream.read(&mut next).await;
            let _ = stream.shutdown().await;
        }
        "/reset" => {
            // Linger 0: close sends RST instead of FIN.
            let _ = stream.set_zero_linger();
        }
        "/hang" => std::future::pending::<()>().await,
        _ => {
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
                .await;
            let _ = stream.shutdown().await;
        }
    }
}
