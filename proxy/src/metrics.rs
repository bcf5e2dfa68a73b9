//! The data plane's Prometheus metrics, registered once under the
//! `switchyard_proxy` prefix.
//!
//! It owns metric names, labels and help texts; it does not decide when to
//! count (the server and upstream code do) nor how to expose them (the
//! binary's admin endpoint, `switchyard_admin_http`, does).

use crate::router::RespondKind;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::{OnceLock, PoisonError, RwLock};
use switchyard_proto::model::ObjectName;

/// Labels of a finished request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RequestLabels {
    /// `namespace/name` of the route that took it; empty when none did.
    pub route: String,
    /// `namespace/name:port` of the backend; empty for direct answers.
    pub backend: String,
    /// `2xx`, `3xx`, `4xx` or `5xx`.
    pub status_class: String,
}

/// Labels naming one backend.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct BackendLabels {
    /// `namespace/name:port`.
    pub backend: String,
}

/// Labels of a request the proxy failed itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ErrorLabels {
    /// Who is to blame: `upstream`, `downstream` or `internal`.
    pub blame: String,
    /// Short error kind, e.g. `connect`, `timeout`.
    pub kind: String,
}

/// Labels of a mirror copy.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct MirrorLabels {
    /// `namespace/name:port` of the mirror backend.
    pub backend: String,
    /// `sent`, `failed` or `skipped`.
    pub result: String,
}

/// Labels of an answer the router gave itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct DirectLabels {
    /// [`RespondKind::label`]: `no_listener`, `no_route`, `redirect`,
    /// `invalid_backend`.
    pub kind: String,
}

/// Labels of a limit hit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct LimitLabels {
    /// Which limit, [`Limit::label`].
    pub limit: String,
}

/// A limit the proxy enforces on its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `max_connections`: a connection was closed right after accept.
    Connections,
    /// `header_read_timeout`: a connection was closed because no complete
    /// request head arrived in time.
    HeaderTimeout,
    /// `max_header_bytes`: an HTTP/1 request head was answered 431.
    HeaderSize,
}

impl Limit {
    /// Every limit, in declaration order.
    pub const ALL: [Limit; 3] = [Limit::Connections, Limit::HeaderTimeout, Limit::HeaderSize];

    /// The `limit` label value.
    pub fn label(self) -> &'static str {
        match self {
            Limit::Connections => "connections",
            Limit::HeaderTimeout => "header_timeout",
            Limit::HeaderSize => "header_size",
        }
    }
}

/// Labels of an upgrade request routed to a backend.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct UpgradeLabels {
    /// `namespace/name:port`.
    pub backend: String,
    /// [`UpgradeOutcome::label`].
    pub outcome: String,
}

/// How an upgrade request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpgradeOutcome {
    /// The backend switched protocols and both connections were handed
    /// over: bytes flow.
    Tunnelled,
    /// The backend answered something else, which the client got.
    Refused,
    /// No tunnel for another reason: the backend failed or answered an
    /// unusable 101, the proxy drains, or a side's connection broke during
    /// the switch.
    Failed,
}

impl UpgradeOutcome {
    /// The `outcome` label value.
    pub fn label(self) -> &'static str {
        match self {
            UpgradeOutcome::Tunnelled => "tunnelled",
            UpgradeOutcome::Refused => "refused",
            UpgradeOutcome::Failed => "failed",
        }
    }
}

/// Labels of tunnelled bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct DirectionLabels {
    /// `client_to_backend` or `backend_to_client`.
    pub direction: String,
}

/// Labels of client connections on TLS listeners.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct TlsLabels {
    /// [`TlsOutcome::label`].
    pub outcome: String,
}

/// How a client connection on a listener key that is not plain HTTP began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsOutcome {
    /// The TLS handshake completed; HTTP follows.
    Handshake,
    /// The handshake failed (no certificate for the SNI name, a client
    /// that does not speak TLS, no common cipher suite...).
    Failed,
    /// No handshake within the header read timeout.
    Timeout,
    /// The listener cannot be served (certificates that do not resolve,
    /// an unsupported protocol): closed at once, never served in
    /// plaintext.
    Refused,
}

impl TlsOutcome {
    /// Every outcome, in declaration order.
    pub const ALL: [TlsOutcome; 4] = [
        TlsOutcome::Handshake,
        TlsOutcome::Failed,
        TlsOutcome::Timeout,
        TlsOutcome::Refused,
    ];

    /// The `outcome` label value.
    pub fn label(self) -> &'static str {
        match self {
            TlsOutcome::Handshake => "handshake",
            TlsOutcome::Failed => "handshake_failed",
            TlsOutcome::Timeout => "handshake_timeout",
            TlsOutcome::Refused => "refused",
        }
    }
}

fn latency_histogram() -> Histogram {
    // 0.5 ms .. ~16 s: covers loopback echo servers and slow backends alike.
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// Every metric the data plane updates.
#[derive(Debug)]
pub struct Metrics {
    /// Requests answered, by route, backend and status class.
    pub requests: Family<RequestLabels, Counter>,
    /// Time from sending a request upstream to its response head.
    pub upstream_latency: Family<BackendLabels, Histogram, fn() -> Histogram>,
    /// Failed connects to upstream endpoints.
    pub connect_errors: Family<BackendLabels, Counter>,
    /// Upstream connections opened.
    pub connections_opened: Family<BackendLabels, Counter>,
    /// Requests retried on another endpoint.
    pub retries: Family<BackendLabels, Counter>,
    /// Outlier ejections.
    pub ejections: Family<BackendLabels, Counter>,
    /// Endpoints currently passing the proxy's health check.
    pub healthy_endpoints: Family<BackendLabels, Gauge>,
    /// Requests the proxy failed itself, by blame.
    pub errors: Family<ErrorLabels, Counter>,
    /// Mirror copies, by outcome.
    pub mirrors: Family<MirrorLabels, Counter>,
    /// Version of the configuration snapshot currently served.
    pub config_version: Gauge,
    /// Open client connections.
    pub downstream_connections: Gauge,
    /// Upstream response bodies that broke off after the head was sent on.
    pub upstream_body_errors: Family<BackendLabels, Counter>,
    /// Client limit hits, by limit; count through
    /// [`record_limit_hit`](Self::record_limit_hit).
    pub limit_hits: Family<LimitLabels, Counter>,
    /// The `limit_hits` counters, resolved at registration (indexed like
    /// [`Limit::ALL`]) so a flood of refused connections neither allocates
    /// nor hashes, and every series reads 0 before its first hit.
    limit_counters: [Counter; 3],
    /// Request counters with empty route and backend, by status class.
    unrouted: [OnceLock<Counter>; 5],
    /// Answers the router gave itself, by kind; count through
    /// [`record_direct`](Self::record_direct).
    pub direct_responses: Family<DirectLabels, Counter>,
    /// The `direct_responses` counters, indexed like [`RespondKind::ALL`].
    direct_counters: [Counter; 5],
    /// `errors{blame="downstream",kind="client_body_timeout"}`, resolved
    /// once: a reset after the response started is counted from a body.
    client_body_timeouts: Counter,
    /// Time to install one configuration (compile, sync backends, swap).
    pub install_seconds: Histogram,
    /// Routes compiled by installs.
    pub routes_compiled: Counter,
    /// Routes taken as compiled from the previous table by installs.
    pub routes_reused: Counter,
    /// Upgrade requests routed to a backend, by backend and outcome; count
    /// through [`record_upgrade`](Self::record_upgrade).
    pub upgrades: Family<UpgradeLabels, Counter>,
    /// Tunnels open now (client and backend connections switched).
    pub tunnels_open: Gauge,
    /// Bytes copied through tunnels, by direction.
    pub tunnel_bytes: Family<DirectionLabels, Counter>,
    /// `tunnel_bytes` client to backend, resolved once: counted per read.
    tunnel_bytes_up: Counter,
    /// `tunnel_bytes` backend to client, resolved once: counted per write.
    tunnel_bytes_down: Counter,
    /// Client connections on TLS (or refused) listeners, by outcome;
    /// count through [`record_tls`](Self::record_tls).
    pub tls_connections: Family<TlsLabels, Counter>,
    /// The `tls_connections` counters, indexed like [`TlsOutcome::ALL`].
    tls_counters: [Counter; 4],
    /// Access log lines dropped because the writer's queue was full (or
    /// the writer had stopped); see [`crate::access_log`].
    pub access_log_dropped: Counter,
    /// Writes to the access log that failed (their lines are lost).
    pub access_log_write_errors: Counter,
}

impl Metrics {
    /// Creates the metrics and registers them in `registry` under
    /// `switchyard_proxy_`.
    pub fn register(registry: &mut Registry) -> Metrics {
        let mut m = Metrics {
            requests: Family::default(),
            upstream_latency: Family::new_with_constructor(latency_histogram),
            connect_errors: Family::default(),
            connections_opened: Family::default(),
            retries: Family::default(),
            ejections: Family::default(),
            healthy_endpoints: Family::default(),
            errors: Family::default(),
            mirrors: Family::default(),
            config_version: Gauge::default(),
            downstream_connections: Gauge::default(),
            upstream_body_errors: Family::default(),
            limit_hits: Family::default(),
            limit_counters: Default::default(),
            unrouted: Default::default(),
            direct_responses: Family::default(),
            direct_counters: Default::default(),
            client_body_timeouts: Counter::default(),
            // 0.1 ms .. ~3 s.
            install_seconds: Histogram::new(exponential_buckets(0.0001, 2.0, 15)),
            routes_compiled: Counter::default(),
            routes_reused: Counter::default(),
            upgrades: Family::default(),
            tunnels_open: Gauge::default(),
            tunnel_bytes: Family::default(),
            tunnel_bytes_up: Counter::default(),
            tunnel_bytes_down: Counter::default(),
            tls_connections: Family::default(),
            tls_counters: Default::default(),
            access_log_dropped: Counter::default(),
            access_log_write_errors: Counter::default(),
        };
        for (i, outcome) in TlsOutcome::ALL.into_iter().enumerate() {
            m.tls_counters[i] = m
                .tls_connections
                .get_or_create(&TlsLabels {
                    outcome: outcome.label().to_owned(),
                })
                .clone();
        }
        let direction = |d: &str| DirectionLabels {
            direction: d.to_owned(),
        };
        m.tunnel_bytes_up = m
            .tunnel_bytes
            .get_or_create(&direction("client_to_backend"))
            .clone();
        m.tunnel_bytes_down = m
            .tunnel_bytes
            .get_or_create(&direction("backend_to_client"))
            .clone();
        for (i, kind) in RespondKind::ALL.into_iter().enumerate() {
            m.direct_counters[i] = m
                .direct_responses
                .get_or_create(&DirectLabels {
                    kind: kind.label().to_owned(),
                })
                .clone();
        }
        m.client_body_timeouts = m
            .errors
            .get_or_create(&ErrorLabels {
                blame: "downstream".to_owned(),
                kind: "client_body_timeout".to_owned(),
            })
            .clone();
        for (i, limit) in Limit::ALL.into_iter().enumerate() {
            m.limit_counters[i] = m
                .limit_hits
                .get_or_create(&LimitLabels {
                    limit: limit.label().to_owned(),
                })
                .clone();
        }
        let r = registry.sub_registry_with_prefix("switchyard_proxy");
        r.register(
            "requests",
            "Requests answered, by route, backend and status class",
            m.requests.clone(),
        );
        r.register(
            "upstream_latency_seconds",
            "Time from sending a request upstream to its response head",
            m.upstream_latency.clone(),
        );
        r.register(
            "upstream_connect_errors",
            "Failed connects to upstream endpoints",
            m.connect_errors.clone(),
        );
        r.register(
            "upstream_connections_opened",
            "Upstream connections opened",
            m.connections_opened.clone(),
        );
        r.register(
            "upstream_retries",
            "Requests retried on another endpoint after a failure before sending",
            m.retries.clone(),
        );
        r.register(
            "outlier_ejections",
            "Endpoints ejected after consecutive failures",
            m.ejections.clone(),
        );
        r.register(
            "healthy_endpoints",
            "Endpoints passing the proxy's own health check",
            m.healthy_endpoints.clone(),
        );
        r.register(
            "errors",
            "Requests the proxy failed itself, by who is to blame and kind \
             (kind=client_body_timeout: the client paused its upload; never counted against a backend)",
            m.errors.clone(),
        );
        r.register(
            "direct_responses",
            "Answers the router gave itself (no listener, no route, redirect, invalid backend)",
            m.direct_responses.clone(),
        );
        r.register("mirrors", "Mirror copies by outcome", m.mirrors.clone());
        r.register(
            "config_install_seconds",
            "Time to install one configuration: compile the route table, sync backends, swap",
            m.install_seconds.clone(),
        );
        r.register(
            "routes_compiled",
            "Routes compiled by configuration installs (changed routes only)",
            m.routes_compiled.clone(),
        );
        r.register(
            "routes_reused",
            "Routes an install took as compiled from the previous route table (unchanged inputs)",
            m.routes_reused.clone(),
        );
        r.register(
            "config_version",
            "Version of the configuration snapshot served",
            m.config_version.clone(),
        );
        r.register(
            "downstream_connections",
            "Open client connections",
            m.downstream_connections.clone(),
        );
        r.register(
            "upstream_body_errors",
            "Upstream response bodies that broke off mid-stream",
            m.upstream_body_errors.clone(),
        );
        r.register(
            "limit_hits",
            "Client limit hits: connections refused at max-connections, connections closed at the \
             header read timeout (including idle keep-alive ones), HTTP/1 heads answered 431",
            m.limit_hits.clone(),
        );
        r.register(
            "upgrades",
            "HTTP/1.1 upgrade requests (WebSocket and the like) routed to a backend, by outcome: \
             tunnelled, refused (the backend answered without switching; the client got that \
             answer), failed (backend error, unusable 101, proxy draining, a side broke off)",
            m.upgrades.clone(),
        );
        r.register(
            "tunnels_open",
            "Tunnels open: client and backend connections switched to another protocol, bytes \
             copied both ways",
            m.tunnels_open.clone(),
        );
        r.register(
            "tunnel_bytes",
            "Bytes copied through tunnels, by direction",
            m.tunnel_bytes.clone(),
        );
        r.register(
            "tls_connections",
            "Client connections on HTTPS listeners, by outcome: handshake, handshake_failed, \
             handshake_timeout, refused (the listener cannot be served)",
            m.tls_connections.clone(),
        );
        r.register(
            "access_log_dropped",
            "Access log lines dropped because the writer fell behind (its queue was full); the \
             request was served",
            m.access_log_dropped.clone(),
        );
        r.register(
            "access_log_write_errors",
            "Writes to the access log that failed (disk full, closed pipe); their lines are lost",
            m.access_log_write_errors.clone(),
        );
        m
    }

    /// Counts one client connection on a TLS (or refused) listener.
    pub fn record_tls(&self, outcome: TlsOutcome) {
        // `TlsOutcome::ALL` lists the variants in declaration order.
        self.tls_counters[outcome as usize].inc();
    }

    /// Handles on the `tunnel_bytes` counters, client to backend and
    /// backend to client, resolved at registration so that a tunnel counts
    /// its bytes without building labels.
    pub fn tunnel_byte_counters(&self) -> (Counter, Counter) {
        (self.tunnel_bytes_up.clone(), self.tunnel_bytes_down.clone())
    }

    /// Counts one upgrade request to the backend labelled `backend`. Once
    /// per upgrade, so the label lookup is not on a per-byte path.
    pub fn record_upgrade(&self, backend: &BackendLabels, outcome: UpgradeOutcome) {
        self.upgrades
            .get_or_create(&UpgradeLabels {
                backend: backend.backend.clone(),
                outcome: outcome.label().to_owned(),
            })
            .inc();
    }

    /// Counts one answer the router gave itself.
    pub fn record_direct(&self, kind: RespondKind) {
        // `RespondKind::ALL` lists the variants in declaration order.
        self.direct_counters[kind as usize].inc();
    }

    /// Counts a client upload that paused past the body idle timeout
    /// after the response had started (the client gets a reset).
    pub fn record_client_body_timeout(&self) {
        self.client_body_timeouts.inc();
    }

    /// Counts one hit of `limit`.
    pub fn record_limit_hit(&self, limit: Limit) {
        // `Limit::ALL` lists the variants in declaration order, so the
        // discriminant is the index.
        self.limit_counters[limit as usize].inc();
    }

    /// Counts one answered request. Builds the label set and looks the
    /// counter up every time; the hot path uses
    /// [`record_unrouted`](Self::record_unrouted) and
    /// [`record_forwarded`](Self::record_forwarded) instead.
    pub fn record_request(&self, route: &str, backend: &str, status: http::StatusCode) {
        self.request_counter(route, backend, status_class(status))
            .inc();
    }

    /// Counts one request answered without a route (empty route and
    /// backend labels), through counters resolved once per status class.
    pub fn record_unrouted(&self, status: http::StatusCode) {
        let class = status_class(status);
        self.unrouted[class]
            .get_or_init(|| self.request_counter("", "", class).clone())
            .inc();
    }

    /// Counts one request `route` sent to the backend labelled `backend`,
    /// through `cache` (the backend's own), so that repeated requests
    /// neither allocate labels nor hash them.
    pub fn record_forwarded(
        &self,
        cache: &RequestCounterCache,
        route: &ObjectName,
        backend: &BackendLabels,
        status: http::StatusCode,
    ) {
        let class = status_class(status);
        let resolve = || self.request_counter(&route.to_string(), &backend.backend, class);
        {
            let routes = cache.routes.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(entry) = routes.iter().find(|e| e.route == *route) {
                entry.by_class[class].get_or_init(resolve).inc();
                return;
            }
        }
        let mut routes = cache.routes.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = routes.iter().find(|e| e.route == *route) {
            entry.by_class[class].get_or_init(resolve).inc();
            return;
        }
        if routes.len() >= MAX_CACHED_ROUTES {
            drop(routes);
            resolve().inc();
            return;
        }
        let entry = RouteCounters {
            route: route.clone(),
            by_class: Default::default(),
        };
        entry.by_class[class].get_or_init(resolve).inc();
        routes.push(entry);
    }

    fn request_counter(&self, route: &str, backend: &str, class: usize) -> Counter {
        self.requests
            .get_or_create(&RequestLabels {
                route: route.to_owned(),
                backend: backend.to_owned(),
                status_class: STATUS_CLASSES[class].to_owned(),
            })
            .clone()
    }
}

/// Label values of the status classes, indexed by [`status_class`].
const STATUS_CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// Index into [`STATUS_CLASSES`].
fn status_class(status: http::StatusCode) -> usize {
    match status.as_u16() {
        100..=199 => 0,
        200..=299 => 1,
        300..=399 => 2,
        400..=499 => 3,
        _ => 4,
    }
}

/// Routes a backend keeps counters for; beyond that (only after many
/// configuration changes) requests take the uncached path.
const MAX_CACHED_ROUTES: usize = 64;

/// Request counters of one backend, resolved once per route and status
/// class. The counters are handles into [`Metrics::requests`], so the
/// exposition is the same as with [`Metrics::record_request`]; a counter
/// appears there only once a request counted into it.
#[derive(Debug, Default)]
pub struct RequestCounterCache {
    routes: RwLock<Vec<RouteCounters>>,
}

#[derive(Debug)]
struct RouteCounters {
    route: ObjectName,
    by_class: [OnceLock<Counter>; 5],
}

/// Labels for `backend`, built once per backend and cloned on use.
pub fn backend_labels(backend: &switchyard_proto::model::BackendKey) -> BackendLabels {
    BackendLabels {
        backend: backend.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::StatusCode;

    fn count(m: &Metrics, route: &str, backend: &str, class: &str) -> u64 {
        m.requests
            .get_or_create(&RequestLabels {
                route: route.to_owned(),
                backend: backend.to_owned(),
                status_class: class.to_owned(),
            })
            .get()
    }

    #[test]
    fn cached_counters_are_the_family_counters() {
        let mut registry = Registry::default();
        let m = Metrics::register(&mut registry);
        let cache = RequestCounterCache::default();
        let route = ObjectName::new("ns", "r");
        let other = ObjectName::new("ns", "q");
        let backend = BackendLabels {
            backend: "ns/svc:80".to_owned(),
        };
        for _ in 0..3 {
            m.record_forwarded(&cache, &route, &backend, StatusCode::OK);
        }
        m.record_forwarded(&cache, &route, &backend, StatusCode::BAD_GATEWAY);
        m.record_forwarded(&cache, &other, &backend, StatusCode::OK);
        m.record_request("ns/r", "ns/svc:80", StatusCode::NO_CONTENT);
        m.record_unrouted(StatusCode::NOT_FOUND);
        m.record_unrouted(StatusCode::NOT_FOUND);
        m.record_request("", "", StatusCode::NOT_FOUND);
        assert_eq!(count(&m, "ns/r", "ns/svc:80", "2xx"), 4);
        assert_eq!(count(&m, "ns/r", "ns/svc:80", "5xx"), 1);
        assert_eq!(count(&m, "ns/q", "ns/svc:80", "2xx"), 1);
        assert_eq!(count(&m, "", "", "4xx"), 3);
    }

    #[test]
    fn counters_appear_only_once_used() {
        let mut registry = Registry::default();
        let m = Metrics::register(&mut registry);
        let cache = RequestCounterCache::default();
        let backend = BackendLabels {
            backend: "ns/svc:80".to_owned(),
        };
        m.record_forwarded(
            &cache,
            &ObjectName::new("ns", "r"),
            &backend,
            StatusCode::OK,
        );
        m.record_unrouted(StatusCode::NOT_FOUND);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let lines: Vec<_> = text
            .lines()
            .filter(|l| l.starts_with("switchyard_proxy_requests_total"))
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
    }
}
