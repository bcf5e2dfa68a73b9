//! Errors the data plane answers requests with, each knowing who is to blame
//! (pingora-style), whether a retry would be safe, and which HTTP status it
//! becomes. The conversion to a response happens in one place:
//! [`ProxyError::status`] plus [`ProxyError::public_reason`] (what any
//! client may read) or [`ProxyError::reason`] (what operators read: names
//! backends; logged at debug, sent only when `expose_reasons` is on), used
//! by the server.
//!
//! Not here: routing outcomes (404, 500 for invalid backends, redirects),
//! which are the router's direct responses, not errors.

use crate::server::host::HostError;
use crate::server::path::PathError;
use std::net::SocketAddr;
use std::time::Duration;
use switchyard_proto::model::BackendKey;

/// A request refused before routing because it is malformed or ambiguous
/// (RFC 9112 asks for 400); the client's fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadRequest {
    /// The path cannot be normalized safely.
    #[error("{}", .0.as_str())]
    Path(PathError),
    /// Host, `:authority` or the absolute-form target is not acceptable.
    #[error("{}", .0.as_str())]
    Host(HostError),
}

impl BadRequest {
    fn kind(self) -> &'static str {
        match self {
            BadRequest::Path(e) => e.kind(),
            BadRequest::Host(e) => e.kind(),
        }
    }
}

/// How a backend's `101 Switching Protocols` was unusable; the backend's
/// fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadUpgrade {
    /// The request asked for no upgrade (or for one the proxy does not
    /// tunnel, whose headers it removed): the client cannot follow.
    #[error("switched protocols on a request that asked for no upgrade")]
    Unrequested,
    /// The 101 named no protocol (RFC 9110 §15.2.2 requires `Upgrade`).
    #[error("switched protocols without an Upgrade header")]
    NoProtocol,
    /// An HTTP/2 client's WebSocket CONNECT got a success that is not a
    /// switch: to that client a 2xx means an open tunnel.
    #[error("answered a WebSocket CONNECT with success but did not switch protocols")]
    NotSwitched,
}

/// Who caused a failed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blame {
    /// The backend: refused, reset, too slow, or no healthy endpoint.
    Upstream,
    /// The client: broke its request body off, sent garbage.
    Downstream,
    /// The proxy itself: not configured yet, inconsistent state.
    Internal,
}

impl Blame {
    /// Lower-case name for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Blame::Upstream => "upstream",
            Blame::Downstream => "downstream",
            Blame::Internal => "internal",
        }
    }
}

/// Why a connection to an upstream endpoint could not be made. Always
/// happens before any byte of the request is sent, so retrying elsewhere is
/// safe.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// TCP connect took longer than the connect timeout.
    #[error("connect timed out after {0:?}")]
    Timeout(Duration),
    /// TCP connect failed.
    #[error("connect failed: {0}")]
    Io(std::io::Error),
    /// The HTTP/1 handshake failed, or a pooled connection turned out closed.
    #[error("connection unusable: {0}")]
    Http(hyper::Error),
    /// The TLS handshake a BackendTLSPolicy asks for failed (the
    /// certificate did not verify, the backend does not speak TLS).
    #[error("{0}")]
    Tls(String),
    /// A BackendTLSPolicy covers the endpoint but cannot be used (its CA
    /// does not resolve): the proxy does not connect at all rather than
    /// speak plaintext.
    #[error("not connecting: {0}")]
    Refused(String),
}

// By hand rather than `#[from]`: the messages above already print the
// cause, and a `#[from]` would also make it the `source`, printed again by
// every chain printer.
impl From<std::io::Error> for ConnectError {
    fn from(e: std::io::Error) -> Self {
        ConnectError::Io(e)
    }
}

impl From<hyper::Error> for ConnectError {
    fn from(e: hyper::Error) -> Self {
        ConnectError::Http(e)
    }
}

/// A request the proxy could not complete.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// No [`crate::ServingConfig`] has been installed yet.
    #[error("no configuration received yet")]
    NoConfig,
    /// The route table names a backend the data plane does not track; a
    /// bug in keeping the two in step.
    #[error("backend {backend} is not tracked by the data plane")]
    BackendUnknown {
        /// The backend.
        backend: BackendKey,
    },
    /// Every endpoint of the backend is unknown, failing its health check,
    /// or already tried.
    #[error("backend {backend} has no ready endpoint")]
    NoReadyEndpoint {
        /// The backend.
        backend: BackendKey,
    },
    /// Connecting to the chosen endpoint failed (and no other endpoint was
    /// left to retry on).
    #[error("connecting to {endpoint} of {backend} failed: {cause}")]
    Connect {
        /// The backend.
        backend: BackendKey,
        /// The endpoint.
        endpoint: SocketAddr,
        /// What went wrong.
        cause: ConnectError,
    },
    /// The upstream connection failed after the request was (partly) sent:
    /// reset, closed, malformed response. Not safe to retry.
    #[error("upstream {endpoint} of {backend} failed: {cause}")]
    Upstream {
        /// The backend.
        backend: BackendKey,
        /// The endpoint.
        endpoint: SocketAddr,
        /// What hyper reported.
        cause: hyper::Error,
    },
    /// No response head within the request timeout.
    #[error("upstream {endpoint} of {backend} sent no response within {timeout:?}")]
    Timeout {
        /// The backend.
        backend: BackendKey,
        /// The endpoint.
        endpoint: SocketAddr,
        /// The timeout that passed.
        timeout: Duration,
    },
    /// The request was refused before routing.
    #[error("bad request: {0}")]
    BadRequest(BadRequest),
    /// The client paused its request body longer than the body idle
    /// timeout.
    #[error("client request body to {backend} paused longer than {idle:?}")]
    ClientTimeout {
        /// The backend the body was going to.
        backend: BackendKey,
        /// The idle timeout that passed.
        idle: Duration,
    },
    /// The client's request body failed while it was being forwarded.
    #[error("client request body failed while forwarding to {backend}: {cause}")]
    DownstreamBody {
        /// The backend.
        backend: BackendKey,
        /// What hyper reported.
        cause: hyper::Error,
    },
    /// The backend answered `101 Switching Protocols` in a way the proxy
    /// cannot pass on.
    #[error("upstream {endpoint} of {backend}: {why}")]
    BadUpgrade {
        /// The backend.
        backend: BackendKey,
        /// The endpoint.
        endpoint: SocketAddr,
        /// What was wrong with the 101.
        why: BadUpgrade,
    },
    /// An upgrade asked for while the proxy drains: a tunnel opened now
    /// would be cut at the drain deadline, so the client is sent elsewhere
    /// at once.
    #[error("upgrade to {backend} refused: the proxy is draining")]
    Draining {
        /// The backend the upgrade was for.
        backend: BackendKey,
    },
}

impl ProxyError {
    /// Who is to blame.
    pub fn blame(&self) -> Blame {
        match self {
            ProxyError::NoConfig
            | ProxyError::BackendUnknown { .. }
            | ProxyError::Draining { .. } => Blame::Internal,
            ProxyError::NoReadyEndpoint { .. }
            | ProxyError::Connect { .. }
            | ProxyError::Upstream { .. }
            | ProxyError::Timeout { .. }
            | ProxyError::BadUpgrade { .. } => Blame::Upstream,
            ProxyError::BadRequest(_)
            | ProxyError::ClientTimeout { .. }
            | ProxyError::DownstreamBody { .. } => Blame::Downstream,
        }
    }

    /// Whether sending the same request again (elsewhere) is safe: only when
    /// nothing of it reached an upstream.
    pub fn retry_safe(&self) -> bool {
        matches!(
            self,
            ProxyError::NoConfig
                | ProxyError::BackendUnknown { .. }
                | ProxyError::NoReadyEndpoint { .. }
                | ProxyError::Connect { .. }
                | ProxyError::BadRequest(_)
                | ProxyError::Draining { .. }
        )
    }

    /// The upstream endpoint the failure happened at, when one was
    /// chosen (after retries, the last one tried).
    pub fn endpoint(&self) -> Option<SocketAddr> {
        match self {
            ProxyError::Connect { endpoint, .. }
            | ProxyError::Upstream { endpoint, .. }
            | ProxyError::Timeout { endpoint, .. }
            | ProxyError::BadUpgrade { endpoint, .. } => Some(*endpoint),
            ProxyError::NoConfig
            | ProxyError::BackendUnknown { .. }
            | ProxyError::NoReadyEndpoint { .. }
            | ProxyError::BadRequest(_)
            | ProxyError::ClientTimeout { .. }
            | ProxyError::DownstreamBody { .. }
            | ProxyError::Draining { .. } => None,
        }
    }

    /// Short kind for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            ProxyError::NoConfig => "no_config",
            ProxyError::BackendUnknown { .. } => "backend_unknown",
            ProxyError::NoReadyEndpoint { .. } => "no_ready_endpoint",
            ProxyError::Connect { .. } => "connect",
            ProxyError::Upstream { .. } => "upstream",
            ProxyError::Timeout { .. } => "timeout",
            ProxyError::BadRequest(why) => why.kind(),
            ProxyError::ClientTimeout { .. } => "client_body_timeout",
            ProxyError::DownstreamBody { .. } => "downstream_body",
            ProxyError::BadUpgrade { .. } => "bad_upgrade",
            ProxyError::Draining { .. } => "draining",
        }
    }

    /// The status the client gets.
    pub fn status(&self) -> http::StatusCode {
        use http::StatusCode as S;
        match self {
            ProxyError::NoConfig
            | ProxyError::BackendUnknown { .. }
            | ProxyError::NoReadyEndpoint { .. }
            | ProxyError::Draining { .. } => S::SERVICE_UNAVAILABLE,
            ProxyError::Connect { .. }
            | ProxyError::Upstream { .. }
            | ProxyError::BadUpgrade { .. } => S::BAD_GATEWAY,
            ProxyError::Timeout { .. } => S::GATEWAY_TIMEOUT,
            ProxyError::BadRequest(_) | ProxyError::DownstreamBody { .. } => S::BAD_REQUEST,
            ProxyError::ClientTimeout { .. } => S::REQUEST_TIMEOUT,
        }
    }

    /// The reason any client may read: what kind of failure, never which
    /// route, Service or endpoint.
    pub fn public_reason(&self) -> &'static str {
        match self {
            ProxyError::NoConfig => "no configuration received yet",
            ProxyError::BackendUnknown { .. } => "backend unavailable",
            ProxyError::NoReadyEndpoint { .. } => "backend has no ready endpoint",
            ProxyError::Connect { .. } => "could not connect to the backend",
            ProxyError::Upstream { .. } => "backend broke the connection",
            ProxyError::Timeout { .. } => "backend did not answer in time",
            ProxyError::BadRequest(BadRequest::Path(e)) => e.public_reason(),
            ProxyError::BadRequest(BadRequest::Host(e)) => e.public_reason(),
            ProxyError::ClientTimeout { .. } => "request body paused too long",
            ProxyError::DownstreamBody { .. } => "request body from client failed",
            ProxyError::BadUpgrade { .. } => "backend switched protocols unusably",
            ProxyError::Draining { .. } => "proxy is shutting down",
        }
    }

    /// The operators' reason: names the backend but not endpoint
    /// addresses. Clients see it only with `expose_reasons` on.
    pub fn reason(&self) -> String {
        match self {
            ProxyError::NoConfig => "no configuration received yet".to_owned(),
            ProxyError::BackendUnknown { backend } => {
                format!("backend {backend} is not warmed by this proxy")
            }
            ProxyError::NoReadyEndpoint { backend } => {
                format!("backend {backend} has no ready endpoint")
            }
            ProxyError::Connect { backend, .. } => {
                format!("could not connect to backend {backend}")
            }
            ProxyError::Upstream { backend, .. } => {
                format!("backend {backend} broke the connection")
            }
            ProxyError::Timeout {
                backend, timeout, ..
            } => format!("backend {backend} did not answer within {timeout:?}"),
            ProxyError::BadRequest(why) => format!("bad request: {why}"),
            ProxyError::ClientTimeout { backend, idle } => {
                format!("request body to backend {backend} paused longer than {idle:?}")
            }
            ProxyError::DownstreamBody { .. } => "request body from client failed".to_owned(),
            ProxyError::BadUpgrade { backend, why, .. } => format!("backend {backend} {why}"),
            ProxyError::Draining { .. } => "proxy is shutting down: no new tunnels".to_owned(),
        }
    }
}

impl From<BadRequest> for ProxyError {
    fn from(why: BadRequest) -> Self {
        ProxyError::BadRequest(why)
    }
}
