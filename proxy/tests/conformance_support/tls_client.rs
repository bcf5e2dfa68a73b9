//! How a case that `requires_tls` is sent: a TLS handshake for the case's
//! SNI (`request.tls.sni`), the certificate verified against the runner's
//! test CA, then one request in the case's protocol.
//!
//! - No `request.protocol`: HTTP/1.1 (ALPN `http/1.1`), the request as
//!   built, its `Host` header the case's `host`.
//! - `protocol: h2`: HTTP/2, as the suite's `H2Protocol` transport speaks
//!   it (`golang.org/x/net/http2.Transport`): ALPN `h2` alone, and the
//!   handshake must settle on it; the case's `host` goes in `:authority`
//!   (an absolute `https://host/path` URI) and no `Host` header is sent.
//!
//! The SNI and the Host are separate on purpose: the misdirected-request
//! cases send one name in each.
//!
//! Does not own: judging the reply (`judge.rs`), retries (`run_case`).

use crate::support::client::{Conn, Reply};
use anyhow::{Context, Result, bail, ensure};
use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use std::net::SocketAddr;
use switchyard_test_support::listener_tls::{TestCa, connect};

/// The protocol a case asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    Http1,
    H2,
}

impl Protocol {
    /// `request.protocol` of a case; an unknown value is an error, so a
    /// file the runner cannot honour fails instead of running as HTTP/1.1.
    pub(crate) fn of(request: &Value) -> Result<Protocol> {
        match &request["protocol"] {
            Value::Null => Ok(Protocol::Http1),
            Value::String(p) if p == "h2" => Ok(Protocol::H2),
            other => bail!("request.protocol {other} is not supported (only h2)"),
        }
    }

    fn alpn(self) -> &'static [u8] {
        match self {
            Protocol::Http1 => b"http/1.1",
            Protocol::H2 => b"h2",
        }
    }
}

/// Sends `req` (built by `build_request`, with its `Host` header) to
/// `addr` over TLS for `sni`, in `protocol`.
pub(crate) async fn send(
    ca: &TestCa,
    addr: SocketAddr,
    sni: &str,
    protocol: Protocol,
    req: Request<Full<Bytes>>,
) -> Result<Reply> {
    let tls = connect(&ca.client(&[protocol.alpn()]), addr, sni)
        .await
        .with_context(|| format!("TLS handshake with {addr} for {sni}"))?;
    let negotiated = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    match protocol {
        Protocol::Http1 => Conn::over(tls).await?.send(req).await,
        Protocol::H2 => {
            ensure!(
                negotiated.as_deref() == Some(b"h2".as_slice()),
                "ALPN settled on {:?}, not h2",
                negotiated.map(|p| String::from_utf8_lossy(&p).into_owned())
            );
            let (mut sender, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                    .await
                    .context("HTTP/2 handshake")?;
            tokio::spawn(conn);
            let resp = sender.send_request(as_h2(req)?).await.context("request")?;
            let (parts, body) = resp.into_parts();
            let body = body.collect().await.context("response body")?.to_bytes();
            Ok(Reply {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        }
    }
}

/// The HTTP/1.1 request as Go's HTTP/2 client sends it: the `Host`
/// header becomes the `:authority` of an absolute URI.
fn as_h2(req: Request<Full<Bytes>>) -> Result<Request<Full<Bytes>>> {
    let (mut parts, body) = req.into_parts();
    let host = parts
        .headers
        .remove(http::header::HOST)
        .context("the request has no Host")?;
    let host = host.to_str().context("Host is not text")?;
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    parts.uri = format!("https://{host}{path}")
        .parse()
        .with_context(|| format!("https://{host}{path} is not a URI"))?;
    parts.version = http::Version::HTTP_2;
    Ok(Request::from_parts(parts, body))
}
