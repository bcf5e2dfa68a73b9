//! A plain hyper HTTP/1.1 client for tests: one request per connection, or
//! one keep-alive connection used for many requests. It never retries and
//! never follows redirects, so every error is visible to the test.

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use tokio::net::TcpStream;

/// A response read to its end.
#[derive(Debug)]
pub struct Reply {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// Body.
    pub body: Bytes,
}

impl Reply {
    /// The body as JSON (the echo server's description of the request).
    pub fn json(&self) -> Result<serde_json::Value> {
        serde_json::from_slice(&self.body).with_context(|| {
            format!(
                "body is not JSON (status {}): {:?}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The echo pod that answered.
    pub fn pod(&self) -> Result<String> {
        Ok(self.json()?["pod"]
            .as_str()
            .context("no pod in body")?
            .to_owned())
    }

    /// Whether the server announced it closes the connection.
    pub fn closes(&self) -> bool {
        self.headers
            .get_all(header::CONNECTION)
            .iter()
            .any(|v| v.as_bytes().eq_ignore_ascii_case(b"close"))
    }
}

/// `GET path` with `Host: host`.
pub fn get(host: &str, path: &str) -> Request<Full<Bytes>> {
    Request::get(path)
        .header(header::HOST, host)
        .body(Full::new(Bytes::new()))
        .unwrap()
}

/// One keep-alive HTTP/1.1 connection.
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
}

impl Conn {
    /// Connects to `addr`.
    pub async fn connect(addr: SocketAddr) -> Result<Conn> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connect {addr}"))?;
        stream.set_nodelay(true)?;
        Conn::over(stream).await
    }

    /// Speaks HTTP/1.1 over an established stream (a TLS stream, say).
    pub async fn over<IO>(io: IO) -> Result<Conn>
    where
        IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn { sender })
    }

    /// Whether the server closed the connection.
    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }

    /// Sends one request and reads the whole response. Any failure is an
    /// error: nothing is retried.
    pub async fn send(&mut self, req: Request<Full<Bytes>>) -> Result<Reply> {
        if self.sender.is_closed() {
            bail!("connection closed by the server between requests");
        }
        self.sender.ready().await.context("connection not ready")?;
        let resp = self.sender.send_request(req).await.context("request")?;
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.context("response body")?.to_bytes();
        Ok(Reply {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }
}

/// Sends `req` on a fresh connection.
pub async fn send(addr: SocketAddr, req: Request<Full<Bytes>>) -> Result<Reply> {
    Conn::connect(addr).await?.send(req).await
}
