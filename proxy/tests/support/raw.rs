//! Raw HTTP/1.1 over TCP for tests that must send exact bytes (framing,
//! Host, paths a client library would clean up), and a parser for the
//! answer read back to EOF.

use anyhow::{Context, Result, bail};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A response read to EOF.
#[derive(Debug)]
pub struct RawReply {
    /// Status code.
    pub status: u16,
    /// Header fields in order, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Body, de-chunked when the response was chunked.
    pub body: Vec<u8>,
    /// Whether a chunked body ended with its last chunk (false: cut off).
    pub complete: bool,
}

impl RawReply {
    /// The first value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

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

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Writes `bytes` on a new connection and reads until the server closes
/// it (send `Connection: close`), at most 5 s.
pub async fn exchange(addr: SocketAddr, bytes: &[u8]) -> Result<RawReply> {
    let mut stream = TcpStream::connect(addr).await?;
    // The server may answer and close before reading everything.
    let _ = stream.write_all(bytes).await;
    read_reply(&mut stream).await
}

/// Reads one response from `stream` until EOF (at most 5 s) and parses it.
pub async fn read_reply(stream: &mut TcpStream) -> Result<RawReply> {
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), async {
        let mut buf = [0u8; 8192];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) => return,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                // A reset after the head counts as the end of what arrived.
                Err(_) => return,
            }
        }
    })
    .await;
    if read.is_err() {
        bail!(
            "no EOF within 5 s; read so far: {:?}",
            String::from_utf8_lossy(&out)
        );
    }
    parse(&out)
}

/// Parses a response (head and body) from `bytes`.
pub fn parse(bytes: &[u8]) -> Result<RawReply> {
    let end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .with_context(|| format!("no response head in {:?}", String::from_utf8_lossy(bytes)))?;
    let head = std::str::from_utf8(&bytes[..end]).context("head is not text")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("bad status line {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let rest = &bytes[end + 4..];
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let (body, complete) = if chunked {
        dechunk(rest)
    } else {
        (rest.to_vec(), true)
    };
    Ok(RawReply {
        status,
        headers,
        body,
        complete,
    })
}

fn dechunk(mut rest: &[u8]) -> (Vec<u8>, bool) {
    let mut body = Vec::new();
    loop {
        let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") else {
            return (body, false);
        };
        let size_text = String::from_utf8_lossy(&rest[..line_end]);
        let Ok(size) = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
        else {
            return (body, false);
        };
        rest = &rest[line_end + 2..];
        if size == 0 {
            return (body, true);
        }
        if rest.len() < size + 2 {
            body.extend_from_slice(&rest[..rest.len().min(size)]);
            return (body, false);
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}
