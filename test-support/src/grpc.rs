//! gRPC for tests: a backend that speaks gRPC over h2c, and a client built
//! on tonic.
//!
//! The backend is hyper serving HTTP/2 with prior knowledge, with gRPC's
//! framing done by hand (a message is a flag byte, a 4-byte length and the
//! payload; the status travels in trailers). Every message is a
//! `google.protobuf.StringValue` (field 1, a string), which prost encodes
//! for `String` — so the client is stock tonic with its prost codec and
//! needs no generated code. It serves:
//!
//! - `/grpc.health.v1.Health/Check`: `NOT_SERVING` until the backend's
//!   `serving_after` delay has passed, then `SERVING` (counted);
//! - `/<service>/Stream`: server streaming, as many messages as the request
//!   says (`"3"`), each `"<backend> <path> <i>"`;
//! - any other `/<service>/<method>`: unary, answering `"<backend> <path>"`
//!   — or `UNAVAILABLE` while not yet serving, so a call routed to a
//!   backend before its health check passed fails visibly.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body_util::BodyExt;
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tonic::codegen::http::uri::PathAndQuery;

/// A running gRPC backend; it stops when dropped.
pub struct GrpcBackend {
    /// Where it listens (127.0.0.1).
    pub addr: SocketAddr,
    stats: Arc<Stats>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct Stats {
    health_checks: AtomicU64,
    calls: AtomicU64,
    /// The `:authority` of the last call other than a health check.
    last_authority: Mutex<Option<String>>,
}

impl Drop for GrpcBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl GrpcBackend {
    /// Starts backend `name`, serving at once.
    pub async fn start(name: &str) -> std::io::Result<GrpcBackend> {
        GrpcBackend::start_serving_after(name, Duration::ZERO).await
    }

    /// Starts backend `name`, which says `NOT_SERVING` (and refuses calls
    /// with `UNAVAILABLE`) for `delay`.
    pub async fn start_serving_after(name: &str, delay: Duration) -> std::io::Result<GrpcBackend> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let stats = Arc::new(Stats::default());
        let backend = Arc::new(Backend {
            name: name.to_string(),
            serving_from: Instant::now() + delay,
            stats: Arc::clone(&stats),
        });
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let backend = Arc::clone(&backend);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let backend = Arc::clone(&backend);
                        async move { Ok::<_, Infallible>(backend.answer(req).await) }
                    });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(GrpcBackend { addr, stats, task })
    }

    /// Health checks answered so far.
    pub fn health_checks(&self) -> u64 {
        self.stats.health_checks.load(Ordering::Relaxed)
    }

    /// Calls other than health checks received so far.
    pub fn calls(&self) -> u64 {
        self.stats.calls.load(Ordering::Relaxed)
    }

    /// The `:authority` of the last call other than a health check
    /// (`None` before the first, or when it came without one).
    pub fn last_authority(&self) -> Option<String> {
        self.stats
            .last_authority
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

struct Backend {
    name: String,
    serving_from: Instant,
    stats: Arc<Stats>,
}

/// A response body of frames known in advance: the messages, then the
/// trailers.
pub struct GrpcBody(std::collections::VecDeque<Frame<Bytes>>);

impl hyper::body::Body for GrpcBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        std::task::Poll::Ready(self.0.pop_front().map(Ok))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }
}

impl Backend {
    async fn answer(&self, req: Request<Incoming>) -> Response<GrpcBody> {
        let path = req.uri().path().to_string();
        let authority = req.uri().authority().map(|a| a.to_string());
        let Ok(body) = req.into_body().collect().await else {
            return reply(Vec::new(), 13, "request body failed");
        };
        let request = decode_string(&body.to_bytes()).unwrap_or_default();
        let serving = Instant::now() >= self.serving_from;
        if path == "/grpc.health.v1.Health/Check" {
            self.stats.health_checks.fetch_add(1, Ordering::Relaxed);
            // HealthCheckResponse { status: SERVING (1) | NOT_SERVING (2) }.
            let status = if serving { 1 } else { 2 };
            return reply(vec![Bytes::from(vec![0x08, status])], 0, "");
        }
        self.stats.calls.fetch_add(1, Ordering::Relaxed);
        *self
            .stats
            .last_authority
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = authority;
        if !serving {
            return reply(Vec::new(), 14, "not serving yet");
        }
        let messages = if path.ends_with("/Stream") {
            let count: usize = request.parse().unwrap_or(1);
            (0..count)
                .map(|i| encode_string(&format!("{} {path} {i}", self.name)))
                .collect()
        } else {
            vec![encode_string(&format!("{} {path}", self.name))]
        };
        reply(messages, 0, "")
    }
}

/// A gRPC response: the messages framed, then `grpc-status` trailers.
fn reply(messages: Vec<Bytes>, status: u32, message: &str) -> Response<GrpcBody> {
    let mut frames: std::collections::VecDeque<Frame<Bytes>> = messages
        .into_iter()
        .map(|m| {
            let mut framed = BytesMut::with_capacity(5 + m.len());
            framed.put_u8(0);
            framed.put_u32(u32::try_from(m.len()).unwrap_or(u32::MAX));
            framed.put_slice(&m);
            Frame::data(framed.freeze())
        })
        .collect();
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from(status));
    if let Ok(m) = HeaderValue::from_str(message)
        && !message.is_empty()
    {
        trailers.insert("grpc-message", m);
    }
    frames.push_back(Frame::trailers(trailers));
    let mut response = Response::new(GrpcBody(frames));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    response
}

/// `StringValue { value }` as protobuf: field 1, length-delimited.
fn encode_string(value: &str) -> Bytes {
    let mut out = BytesMut::new();
    out.put_u8(0x0a);
    let mut len = value.len();
    while len >= 0x80 {
        out.put_u8((len as u8 & 0x7f) | 0x80);
        len >>= 7;
    }
    out.put_u8(len as u8);
    out.put_slice(value.as_bytes());
    out.freeze()
}

/// The string of the first framed `StringValue` message of a request body
/// (an empty message is the empty string).
fn decode_string(body: &[u8]) -> Option<String> {
    let mut body = body;
    if body.len() < 5 {
        return None;
    }
    body.advance(5);
    if body.is_empty() {
        return Some(String::new());
    }
    if body.get_u8() != 0x0a {
        return None;
    }
    let mut len = 0usize;
    for shift in (0..35).step_by(7) {
        let byte = *body.first()?;
        body.advance(1);
        len |= usize::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
    }
    String::from_utf8(body.get(..len)?.to_vec()).ok()
}

/// A tonic client over one HTTP/2 connection (h2c) to `addr`, sending
/// `:authority` `authority`.
#[derive(Clone)]
pub struct GrpcClient {
    inner: tonic::client::Grpc<tonic::transport::Channel>,
}

/// Why [`GrpcClient::connect_exact`] could not connect.
#[derive(Debug)]
pub enum ConnectError {
    /// The `:authority` is not a valid URI authority.
    Authority(String),
    /// The connection failed.
    Transport(tonic::transport::Error),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Authority(a) => write!(f, "{a:?} is not a URI authority"),
            ConnectError::Transport(e) => write!(f, "connect: {e}"),
        }
    }
}

impl std::error::Error for ConnectError {}

impl GrpcClient {
    /// Connects (h2c, prior knowledge).
    pub async fn connect(
        addr: SocketAddr,
        authority: &str,
    ) -> Result<GrpcClient, tonic::transport::Error> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
            .origin(format!("http://{authority}").parse().unwrap_or_default())
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(10))
            .connect()
            .await?;
        Ok(GrpcClient {
            inner: tonic::client::Grpc::new(channel),
        })
    }

    /// [`GrpcClient::connect`], sending exactly `authority` as
    /// `:authority` (grpc-go's `WithAuthority`): one that is not a URI
    /// authority is an error, never replaced.
    pub async fn connect_exact(
        addr: SocketAddr,
        authority: &str,
    ) -> Result<GrpcClient, ConnectError> {
        let origin: tonic::codegen::http::Uri = format!("http://{authority}")
            .parse()
            .map_err(|_| ConnectError::Authority(authority.to_string()))?;
        if origin.authority().map(|a| a.as_str()) != Some(authority) {
            return Err(ConnectError::Authority(authority.to_string()));
        }
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .map_err(ConnectError::Transport)?
            .origin(origin)
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(10))
            .connect()
            .await
            .map_err(ConnectError::Transport)?;
        Ok(GrpcClient {
            inner: tonic::client::Grpc::new(channel),
        })
    }

    /// A unary call of any `path` (`/<service>/<method>`) with metadata
    /// whose names are only known at run time; names are lower-cased, as
    /// grpc-go's `metadata.New` does. A path or a metadata entry that
    /// cannot be sent is `INVALID_ARGUMENT` from the client, never dropped.
    pub async fn call(
        &mut self,
        path: &str,
        message: &str,
        metadata: &[(&str, &str)],
    ) -> Result<String, tonic::Status> {
        let path = PathAndQuery::try_from(path.to_string())
            .map_err(|_| tonic::Status::invalid_argument(format!("path {path:?}")))?;
        let mut request = tonic::Request::new(message.to_string());
        for (name, value) in metadata {
            let key =
                tonic::metadata::AsciiMetadataKey::from_bytes(name.to_ascii_lowercase().as_bytes())
                    .map_err(|_| {
                        tonic::Status::invalid_argument(format!("metadata name {name:?}"))
                    })?;
            let value = value
                .parse()
                .map_err(|_| tonic::Status::invalid_argument(format!("metadata {name}")))?;
            request.metadata_mut().insert(key, value);
        }
        self.inner
            .ready()
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        let codec = tonic_prost::ProstCodec::<String, String>::default();
        let response = self.inner.unary(request, path, codec).await?;
        Ok(response.into_inner())
    }

    /// A unary call of `path` (`/<service>/<method>`); the answer's string.
    pub async fn unary(
        &mut self,
        path: &'static str,
        message: &str,
    ) -> Result<String, tonic::Status> {
        self.unary_with(path, message, &[]).await
    }

    /// [`GrpcClient::unary`] with request metadata (`(name, value)`).
    pub async fn unary_with(
        &mut self,
        path: &'static str,
        message: &str,
        metadata: &[(&'static str, &str)],
    ) -> Result<String, tonic::Status> {
        self.inner
            .ready()
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        let mut request = tonic::Request::new(message.to_string());
        for (name, value) in metadata {
            let value = value
                .parse()
                .map_err(|_| tonic::Status::invalid_argument(format!("metadata {name}")))?;
            request.metadata_mut().insert(*name, value);
        }
        let codec = tonic_prost::ProstCodec::<String, String>::default();
        let response = self
            .inner
            .unary(request, PathAndQuery::from_static(path), codec)
            .await?;
        Ok(response.into_inner())
    }

    /// A server-streaming call of `path` asking for `count` messages; every
    /// message received, in order.
    pub async fn server_stream(
        &mut self,
        path: &'static str,
        count: usize,
    ) -> Result<Vec<String>, tonic::Status> {
        self.inner
            .ready()
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        let codec = tonic_prost::ProstCodec::<String, String>::default();
        let response = self
            .inner
            .server_streaming(
                tonic::Request::new(count.to_string()),
                PathAndQuery::from_static(path),
                codec,
            )
            .await?;
        let mut stream = response.into_inner();
        let mut out = Vec::new();
        while let Some(message) = stream.message().await? {
            out.push(message);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_values_round_trip_through_the_framing() {
        let long = "x".repeat(300);
        for value in ["", "v1 /a.B/C", long.as_str()] {
            let message = encode_string(value);
            let mut framed = vec![0];
            framed.extend((message.len() as u32).to_be_bytes());
            framed.extend(&message[..]);
            assert_eq!(decode_string(&framed).as_deref(), Some(value));
        }
    }

    #[tokio::test]
    async fn tonic_calls_the_backend_directly() {
        let backend = GrpcBackend::start("b1").await.unwrap();
        let mut client = GrpcClient::connect(backend.addr, "b1.test").await.unwrap();
        assert_eq!(
            client.unary("/echo.Echo/Say", "hi").await.unwrap(),
            "b1 /echo.Echo/Say"
        );
        assert_eq!(
            client.server_stream("/echo.Echo/Stream", 3).await.unwrap(),
            [
                "b1 /echo.Echo/Stream 0",
                "b1 /echo.Echo/Stream 1",
                "b1 /echo.Echo/Stream 2"
            ]
        );
        assert_eq!(backend.calls(), 2);
        let late = GrpcBackend::start_serving_after("b2", Duration::from_secs(60))
            .await
            .unwrap();
        let mut client = GrpcClient::connect(late.addr, "b2.test").await.unwrap();
        let refused = client.unary("/echo.Echo/Say", "hi").await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::Unavailable);
    }

    #[tokio::test]
    async fn an_exact_authority_and_run_time_metadata_reach_the_backend() {
        let backend = GrpcBackend::start("b1").await.unwrap();
        // The conformance suite's authority: a gRPC service name.
        let authority = "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho";
        let mut client = GrpcClient::connect_exact(backend.addr, authority)
            .await
            .unwrap();
        let path = String::from("/a.B/Echo");
        assert_eq!(
            client
                .call(&path, "", &[("Version", "one"), ("x-b", "2")])
                .await
                .unwrap(),
            "b1 /a.B/Echo"
        );
        assert_eq!(backend.last_authority().as_deref(), Some(authority));
        let bad = client.call("/a.B/Echo", "", &[("bad name", "v")]).await;
        assert_eq!(bad.unwrap_err().code(), tonic::Code::InvalidArgument);
        assert!(matches!(
            GrpcClient::connect_exact(backend.addr, "a b").await,
            Err(ConnectError::Authority(_))
        ));
    }
}
