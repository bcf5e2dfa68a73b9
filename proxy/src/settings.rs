//! Tunables of the data plane, with defaults meant for production.
//!
//! Parsing them from flags is `main`'s job; this module only holds the
//! values and their documented meaning.

use std::time::Duration;

/// Everything the data plane can be tuned with.
#[derive(Debug, Clone)]
pub struct DataPlaneSettings {
    /// Upper bound on TCP connect to one upstream endpoint.
    pub connect_timeout: Duration,
    /// Upper bound from the end of the client's request body (or from
    /// sending the head, for requests without one) to receiving the
    /// response head; past it the client gets 504. While the body is still
    /// arriving, the clock runs only while the proxy waits on the backend
    /// (a backend that stops reading the body), never on the client.
    pub request_timeout: Duration,
    /// Largest request head (start line plus headers) accepted from a
    /// client, in bytes; larger heads get 431. HTTP/1 enforces at least
    /// 8192 (hyper's minimum read buffer), so smaller values act as 8192.
    pub max_header_bytes: usize,
    /// Client connections open at once, over all listeners. A connection
    /// accepted beyond it is closed at once without a response (and
    /// counted in `switchyard_proxy_limit_hits_total{limit="connections"}`);
    /// open ones are unaffected. Bounds the file descriptors and memory
    /// that idle or slow clients can pin.
    pub max_connections: usize,
    /// How long a client may take to send a complete request head. Also
    /// bounds how long a keep-alive connection may sit idle between requests
    /// (hyper starts the timer when it waits for the next head).
    pub header_read_timeout: Duration,
    /// Active health checks.
    pub health: HealthSettings,
    /// Passive outlier ejection.
    pub outlier: OutlierSettings,
    /// Attempts per request, counting the first. Only attempts that failed
    /// before any byte of the request was sent are retried, each on an
    /// endpoint not tried yet.
    pub max_attempts: usize,
    /// Idle upstream connections older than this are closed instead of
    /// reused. Keep it below the backends' own keep-alive timeout (Node.js
    /// closes idle connections after 5 s): reusing a connection the backend
    /// is closing fails a request after it was written, which cannot be
    /// retried safely.
    pub pool_idle_timeout: Duration,
    /// Idle upstream connections kept per endpoint.
    pub max_idle_per_endpoint: usize,
    /// Threads, each with a runtime of its own, that client connections
    /// are handed to in turn (`server::workers`); 1 serves them on the
    /// runtime `serve` runs on.
    pub workers: usize,
    /// During a drain, how long an idle HTTP/1 connection is given to send
    /// one more request (answered with `Connection: close`) before it is
    /// closed. Closing it at once would race a request already on the wire.
    pub drain_idle_grace: Duration,
    /// During a drain, how long in-flight requests may take before the
    /// remaining connections are closed anyway. Open tunnels (upgraded
    /// connections, e.g. WebSockets) get the same time, then are closed.
    pub drain_timeout: Duration,
    /// Mirror requests in flight at once; copies beyond it are skipped so a
    /// slow mirror can never pile up work.
    pub max_mirrors_in_flight: usize,
    /// How long the client's request body may pause (no bytes while the
    /// proxy is waiting for them) before the request is given up as the
    /// client's fault: 408 if no response has started, else a reset. The
    /// backend's `request_timeout` only starts once the body has ended.
    pub request_body_idle_timeout: Duration,
    /// How request paths are normalized before routing (see
    /// [`crate::server::path`]).
    pub paths: PathSettings,
    /// Proxies in front of this one whose forwarding headers are believed:
    /// the proxy keeps the last `trusted_hops` entries of an incoming
    /// `X-Forwarded-For` and `Forwarded` (those trusted proxies wrote them),
    /// drops the entries before them (the client wrote those), and appends
    /// the peer address. With `0` (the proxy is the edge) the backend sees
    /// exactly the peer. `X-Forwarded-Proto` from the client is kept only
    /// when `trusted_hops > 0` (`switchyard proxy --trusted-hops`).
    pub trusted_hops: usize,
    /// Send operators' detailed reasons (route, rule, Service names) to
    /// clients in `x-switchyard-reason` and the body. Off by default:
    /// clients get a generic reason and the details go to the debug log
    /// and metrics. For debugging setups where every client is trusted.
    pub expose_reasons: bool,
}

/// What the proxy does with an encoded slash (`%2F`) or backslash
/// (`%5C`) in a request path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EncodedSlashes {
    /// Answer 400. A backend that decodes them would read a different path
    /// than the router matched (`/x/..%2Fadmin` is `/admin` to it).
    #[default]
    Reject,
    /// Keep them encoded (hex upper-cased) and never treat them as
    /// separators (Envoy's default, `KEEP_UNCHANGED`). Only for backends
    /// known not to decode them before routing.
    Keep,
}

/// Request path normalization; RFC 3986 normalization always happens,
/// these choose the two points the RFC leaves open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathSettings {
    /// Merge runs of `/` into one (`//admin` is `/admin`), as Envoy
    /// Gateway does by default and most backends do when they route.
    pub merge_slashes: bool,
    /// `%2F` and `%5C`.
    pub encoded_slashes: EncodedSlashes,
}

impl Default for PathSettings {
    fn default() -> Self {
        PathSettings {
            merge_slashes: true,
            encoded_slashes: EncodedSlashes::Reject,
        }
    }
}

impl Default for DataPlaneSettings {
    fn default() -> Self {
        DataPlaneSettings {
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(30),
            max_header_bytes: 64 * 1024,
            // Far above what one replica serves well, far below the file
            // descriptor limits containers get (each client connection
            // can also hold an upstream one).
            max_connections: 10_000,
            header_read_timeout: Duration::from_secs(30),
            health: HealthSettings::default(),
            outlier: OutlierSettings::default(),
            max_attempts: 3,
            pool_idle_timeout: Duration::from_secs(4),
            max_idle_per_endpoint: 256,
            workers: 1,
            drain_idle_grace: Duration::from_secs(2),
            drain_timeout: Duration::from_secs(30),
            max_mirrors_in_flight: 1024,
            request_body_idle_timeout: Duration::from_secs(30),
            paths: PathSettings::default(),
            trusted_hops: 0,
            expose_reasons: false,
        }
    }
}

/// Active health checks: `GET <health path>` on every endpoint through the
/// same pools real traffic uses.
#[derive(Debug, Clone)]
pub struct HealthSettings {
    /// Time between two checks of one endpoint.
    pub interval: Duration,
    /// Upper bound on one check (connect plus response head).
    pub timeout: Duration,
    /// Consecutive passing checks that bring an unhealthy endpoint back.
    /// (An endpoint never checked becomes healthy on its first pass.)
    pub healthy_threshold: u32,
    /// Consecutive failing checks that take a healthy endpoint out.
    pub unhealthy_threshold: u32,
}

impl Default for HealthSettings {
    fn default() -> Self {
        HealthSettings {
            interval: Duration::from_secs(2),
            timeout: Duration::from_secs(1),
            healthy_threshold: 2,
            unhealthy_threshold: 3,
        }
    }
}

/// Passive outlier ejection on real traffic.
#[derive(Debug, Clone)]
pub struct OutlierSettings {
    /// Consecutive gateway failures (connect error, reset, timeout) that
    /// eject an endpoint.
    pub consecutive_failures: u32,
    /// First ejection length; the n-th consecutive ejection lasts n times
    /// this, capped at `max_ejection_time`.
    pub base_ejection_time: Duration,
    /// Longest ejection.
    pub max_ejection_time: Duration,
}

impl Default for OutlierSettings {
    fn default() -> Self {
        OutlierSettings {
            consecutive_failures: 5,
            base_ejection_time: Duration::from_secs(10),
            max_ejection_time: Duration::from_secs(300),
        }
    }
}
