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
    /// Upper bound from sending a request upstream to receiving its
    /// response head; past it the client gets 504.
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
    /// During a drain, how long an idle HTTP/1 connection is given to send
    /// one more request (answered with `Connection: close`) before it is
    /// closed. Closing it at once would race a request already on the wire.
    pub drain_idle_grace: Duration,
    /// During a drain, how long in-flight requests may take before the
    /// remaining connections are closed anyway.
    pub drain_timeout: Duration,
    /// Mirror requests in flight at once; copies beyond it are skipped so a
    /// slow mirror can never pile up work.
    pub max_mirrors_in_flight: usize,
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
            drain_idle_grace: Duration::from_secs(2),
            drain_timeout: Duration::from_secs(30),
            max_mirrors_in_flight: 1024,
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
