//! The data plane's Prometheus metrics, registered once under the
//! `switchyard_proxy` prefix.
//!
//! It owns metric names, labels and help texts; it does not decide when to
//! count (the server and upstream code do) nor how to expose them (the
//! [`crate::admin`] endpoint does).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

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
}

impl Metrics {
    /// Creates the metrics and registers them in `registry` under
    /// `switchyard_proxy_`.
    pub fn register(registry: &mut Registry) -> Metrics {
        let m = Metrics {
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
        };
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
            "Requests the proxy failed itself, by who is to blame",
            m.errors.clone(),
        );
        r.register("mirrors", "Mirror copies by outcome", m.mirrors.clone());
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
        m
    }

    /// Counts one answered request.
    pub fn record_request(&self, route: &str, backend: &str, status: http::StatusCode) {
        let class = match status.as_u16() {
            100..=199 => "1xx",
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        };
        self.requests
            .get_or_create(&RequestLabels {
                route: route.to_owned(),
                backend: backend.to_owned(),
                status_class: class.to_owned(),
            })
            .inc();
    }
}

/// Labels for `backend`, built once per backend and cloned on use.
pub fn backend_labels(backend: &switchyard_proto::model::BackendKey) -> BackendLabels {
    BackendLabels {
        backend: backend.to_string(),
    }
}
