//! HTTP/1.1 upgrades for tests. A backend on 127.0.0.1 that switches
//! protocols and echoes every byte it gets over the switched connection
//! (framing-agnostic, like the proxy: no WebSocket library), or refuses
//! like a server that does not speak the protocol; and the client side:
//! an upgrade request over raw TCP, its head read back, bytes echoed.

use super::raw::{RawReply, parse};
use anyhow::{Context, Result, bail, ensure};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What an [`UpgradeEcho`] does with an upgrade request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `101 Switching Protocols`, then echo.
    Switch,
    /// `200 no upgrade here`, as a server that ignores `Upgrade` does.
    Refuse,
}

/// A running upgrade-echo backend. Any request with an `Upgrade` header
/// is an upgrade request; other requests (health checks) get `200 plain`,
/// except `/switch-anyway`, which gets a 101 nobody asked for (a broken
/// backend).
pub struct UpgradeEcho {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its name, sent back in `x-pod` on every answer.
    pub pod: String,
    /// Heads of the upgrade requests it got, in order.
    pub upgrades: Arc<Mutex<Vec<HeaderMap>>>,
    /// Switched connections still echoing.
    pub open: Arc<AtomicUsize>,
    stop: watch::Sender<bool>,
}

impl Drop for UpgradeEcho {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

impl UpgradeEcho {
    /// Switched connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }
}

#[derive(Clone)]
struct State {
    pod: String,
    mode: Mode,
    upgrades: Arc<Mutex<Vec<HeaderMap>>>,
    open: Arc<AtomicUsize>,
}

/// Starts an upgrade-echo backend named `pod`.
pub async fn start_upgrade_echo(pod: &str, mode: Mode) -> UpgradeEcho {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = State {
        pod: pod.to_owned(),
        mode,
        upgrades: Arc::default(),
        open: Arc::default(),
    };
    let (stop, mut stopped) = watch::channel(false);
    let echo = UpgradeEcho {
        addr,
        pod: pod.to_owned(),
        upgrades: Arc::clone(&state.upgrades),
        open: Arc::clone(&state.open),
        stop,
    };
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                _ = stopped.changed() => return,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(_) => continue,
                },
            };
            let state = state.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let state = state.clone();
                    async move { Ok::<_, Infallible>(answer(&state, req)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .with_upgrades()
                    .await;
            });
        }
    });
    echo
}

fn answer(state: &State, mut req: Request<Incoming>) -> Response<Full<Bytes>> {
    let pod = HeaderValue::from_str(&state.pod).unwrap();
    let Some(protocol) = req.headers().get(header::UPGRADE).cloned() else {
        if req.uri().path() == "/switch-anyway" {
            return switching(HeaderValue::from_static("websocket"), pod);
        }
        return text(StatusCode::OK, "plain", pod);
    };
    state.upgrades.lock().unwrap().push(req.headers().clone());
    if state.mode == Mode::Refuse {
        return text(StatusCode::OK, "no upgrade here", pod);
    }
    let on_upgrade = hyper::upgrade::on(&mut req);
    let open = Arc::clone(&state.open);
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        open.fetch_add(1, Ordering::Relaxed);
        let (mut reader, mut writer) = tokio::io::split(TokioIo::new(upgraded));
        let _ = tokio::io::copy(&mut reader, &mut writer).await;
        let _ = writer.shutdown().await;
        open.fetch_sub(1, Ordering::Relaxed);
    });
    switching(protocol, pod)
}

fn switching(protocol: HeaderValue, pod: HeaderValue) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(header::UPGRADE, protocol);
    h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert("x-pod", pod);
    resp
}

fn text(status: StatusCode, body: &'static str, pod: HeaderValue) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *resp.status_mut() = status;
    resp.headers_mut().insert("x-pod", pod);
    resp
}

/// A WebSocket opening handshake for `host` and `path` (RFC 6455 §1.3's
/// sample key), with `extra` header lines (each ending in `\r\n`).
pub fn websocket_request(host: &str, path: &str, extra: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    )
}

/// Writes `request` on `stream` and reads one response: its head, and a
/// body of `Content-Length` bytes. For a 101, `body` holds whatever
/// arrived right behind the head (the switched connection's first bytes).
pub async fn send_head(stream: &mut TcpStream, request: &str) -> Result<RawReply> {
    stream.write_all(request.as_bytes()).await?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = Duration::from_secs(5);
    let end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        let n = tokio::time::timeout(deadline, stream.read(&mut chunk))
            .await
            .context("no response head within 5 s")??;
        if n == 0 {
            bail!(
                "connection closed before a response head: {:?}",
                String::from_utf8_lossy(&buf)
            );
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let mut reply = parse(&buf[..end])?;
    let length: usize = reply
        .header("content-length")
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(0);
    if reply.status == 101 {
        reply.body = buf[end..].to_vec();
        return Ok(reply);
    }
    let mut body = buf[end..].to_vec();
    while body.len() < length {
        let n = tokio::time::timeout(deadline, stream.read(&mut chunk))
            .await
            .context("body not complete within 5 s")??;
        ensure!(n > 0, "connection closed mid-body");
        body.extend_from_slice(&chunk[..n]);
    }
    reply.body = body;
    Ok(reply)
}

/// Opens a connection to `addr` and sends `request` on it.
pub async fn open(addr: SocketAddr, request: &str) -> Result<(RawReply, TcpStream)> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let reply = send_head(&mut stream, request).await?;
    Ok((reply, stream))
}

/// Sends `message` over a switched connection and checks the same bytes
/// come back within 5 s.
pub async fn echo(stream: &mut TcpStream, message: &[u8]) -> Result<()> {
    let (mut reader, mut writer) = stream.split();
    let mut back = vec![0u8; message.len()];
    // Written and read at once: a message larger than the socket buffers
    // only gets through if its echo is read while it is still being sent.
    let exchange =
        async { tokio::try_join!(writer.write_all(message), reader.read_exact(&mut back)) };
    tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .context("no echo within 5 s")?
        .context("echo")?;
    ensure!(back == message, "echoed bytes differ");
    Ok(())
}

/// Waits until the peer closes `stream` (EOF or reset), at most 5 s;
/// bytes arriving instead are an error.
pub async fn closed(stream: &mut TcpStream) -> Result<()> {
    let mut buf = [0u8; 1024];
    match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
        Err(_) => bail!("still open after 5 s"),
        Ok(Ok(0)) | Ok(Err(_)) => Ok(()),
        Ok(Ok(n)) => bail!("unexpected bytes: {:?}", &buf[..n]),
    }
}
