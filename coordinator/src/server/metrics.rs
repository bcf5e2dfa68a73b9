//! Coordinator metrics (Prometheus, via `prometheus-client`): Raft term,
//! leader and indexes; pending transitions; time from apply to commit and to
//! Ready; live proxies per zone; evidence received; decision passes and
//! the transitions they judged; requests refused for a limit. The binary serves the registry on `--admin-listen`; this module
//! only keeps the values.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;

/// Label of per-zone gauges.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ZoneLabel {
    /// The zone.
    pub zone: String,
}

/// Label of `limit_hits`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabel {
    /// Which limit: `objects_per_apply`, `routes`, `endpoints`,
    /// `object_bytes` or `config_bytes`.
    pub limit: String,
}

/// Label of `open_streams`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StreamLabel {
    /// `watch` (proxies' configuration) or `status` (`status --watch`).
    pub stream: String,
}

/// Label of `config_encodings`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EncodingLabel {
    /// `delta` (one per change, shared by every watcher), `full` (a
    /// whole snapshot, at most one per version), or `delta-lz4` /
    /// `full-lz4`: the compressed form of one, made at most once, for the
    /// watchers that read it.
    pub kind: String,
}

/// Label of `proxy_sets`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProxySetLabel {
    /// `evidence` (readiness reports) or `applied` (heartbeats).
    pub set: String,
    /// How it came: `whole`, `digest` (named by digest) or `changes`.
    pub form: String,
    /// `taken`, or `refused` (changes on a set not held, a digest not
    /// known: the proxy sends again).
    pub outcome: String,
}

/// The `limit` label values, created at registration so every series
/// reads 0 before its first hit (rates and alerts need a starting point).
/// `--max-message-bytes` is not among them: tonic refuses an oversized
/// message while decoding it, before any handler of ours runs.
const LIMITS: [&str; 5] = [
    "objects_per_apply",
    "routes",
    "endpoints",
    "object_bytes",
    "config_bytes",
];

/// Every coordinator metric.
#[derive(Clone)]
pub struct CoordinatorMetrics {
    pub(crate) term: Gauge,
    pub(crate) leader: Gauge,
    pub(crate) is_leader: Gauge,
    pub(crate) last_log_index: Gauge,
    pub(crate) applied_index: Gauge,
    pub(crate) pending_transitions: Gauge,
    pub(crate) live_proxies: Family<ZoneLabel, Gauge>,
    pub(crate) evidence_reports: Counter,
    pub(crate) apply_to_commit: Histogram,
    pub(crate) apply_to_ready: Histogram,
    pub(crate) commits: Counter,
    pub(crate) abandons: Counter,
    pub(crate) expired_proxies: Counter,
    pub(crate) limit_hits: Family<LimitLabel, Counter>,
    pub(crate) open_streams: Family<StreamLabel, Gauge>,
    pub(crate) config_encodings: Family<EncodingLabel, Counter>,
    pub(crate) proxy_sets: Family<ProxySetLabel, Counter>,
    pub(crate) pass_seconds: Histogram,
    pub(crate) pass_judged: Counter,
    pub(crate) applies_per_entry: Histogram,
    pub(crate) paced_answers: Counter,
    pub(crate) digest_waits: Counter,
}

fn latency_buckets() -> Histogram {
    // 5 ms .. ~80 s: cutovers range from "already warm" to "waited for a
    // slow backend up to its timeout".
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.005, 2.0, 15,
    ))
}

impl CoordinatorMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = CoordinatorMetrics {
            term: Gauge::default(),
            leader: Gauge::default(),
            is_leader: Gauge::default(),
            last_log_index: Gauge::default(),
            applied_index: Gauge::default(),
            pending_transitions: Gauge::default(),
            live_proxies: Family::default(),
            evidence_reports: Counter::default(),
            apply_to_commit: latency_buckets(),
            apply_to_ready: latency_buckets(),
            commits: Counter::default(),
            abandons: Counter::default(),
            expired_proxies: Counter::default(),
            limit_hits: Family::default(),
            open_streams: Family::default(),
            config_encodings: Family::default(),
            proxy_sets: Family::default(),
            // 0.1 ms .. ~3 s: a handful of pending routes up to a
            // bootstrap of 10,000 with hundreds of proxies.
            pass_seconds: Histogram::new(
                prometheus_client::metrics::histogram::exponential_buckets(0.0001, 2.0, 16),
            ),
            pass_judged: Counter::default(),
            paced_answers: Counter::default(),
            digest_waits: Counter::default(),
            // 1 .. 64: an apply alone up to a full group.
            applies_per_entry: Histogram::new(
                prometheus_client::metrics::histogram::exponential_buckets(1.0, 2.0, 7),
            ),
        };
        for limit in LIMITS {
            m.limit_hit_counter(limit);
        }
        let r = registry.sub_registry_with_prefix("switchyard_coordinator");
        r.register("raft_term", "Current Raft term", m.term.clone());
        r.register(
            "raft_leader",
            "Id of the current leader (0 when unknown)",
            m.leader.clone(),
        );
        r.register("raft_is_leader", "1 on the leader", m.is_leader.clone());
        r.register(
            "raft_last_log_index",
            "Index of the last log entry",
            m.last_log_index.clone(),
        );
        r.register(
            "raft_applied_index",
            "Index of the last applied entry",
            m.applied_index.clone(),
        );
        r.register(
            "pending_transitions",
            "Routes waiting for readiness",
            m.pending_transitions.clone(),
        );
        r.register(
            "live_proxies",
            "Proxies with a current lease, per zone (leader only)",
            m.live_proxies.clone(),
        );
        r.register(
            "evidence_reports",
            "Readiness reports received (leader)",
            m.evidence_reports.clone(),
        );
        r.register(
            "applies_per_entry",
            "Applies this coordinator proposed per Raft entry (more than one when clients' applies arrive while the previous group is being committed)",
            m.applies_per_entry.clone(),
        );
        r.register(
            "fleet_paced_answers",
            "Heartbeat answers this leader held while applies piled up, so the proxies' rounds spaced out (--paced-fleet-calls-per-second)",
            m.paced_answers.clone(),
        );
        r.register(
            "proxy_set_digest_waits",
            "Calls naming a set by a digest this leader did not know, held while another proxy was asked for that set whole (so it is taken by digest, not sent whole again)",
            m.digest_waits.clone(),
        );
        r.register(
            "apply_to_commit_seconds",
            "Time from the apply that created a transition to its commit (leader)",
            m.apply_to_commit.clone(),
        );
        r.register(
            "apply_to_ready_seconds",
            "Time from the apply that created a transition to every live proxy serving it (leader)",
            m.apply_to_ready.clone(),
        );
        r.register(
            "cutover_commits",
            "Transitions committed (leader)",
            m.commits.clone(),
        );
        r.register(
            "cutover_abandons",
            "Transitions abandoned after their timeout (leader)",
            m.abandons.clone(),
        );
        r.register(
            "expired_proxies",
            "Proxy leases expired (leader)",
            m.expired_proxies.clone(),
        );
        r.register(
            "limit_hits",
            "Requests refused for a limit, by limit (counted by the coordinator that took the request)",
            m.limit_hits.clone(),
        );
        r.register(
            "open_streams",
            "Server streams open on this coordinator, by stream (each holds a task until its client goes)",
            m.open_streams.clone(),
        );
        for stream in ["watch", "status"] {
            m.open_stream(stream);
        }
        r.register(
            "config_encodings",
            "Configuration payloads encoded for watch streams, by kind (delta: one per change; full: at most one per version), whatever the number of watchers",
            m.config_encodings.clone(),
        );
        for kind in ["delta", "full"] {
            m.config_encoding(kind);
        }
        r.register(
            "proxy_sets",
            "Proxies' sets received (leader), by set (evidence, applied), form (whole, digest: named by its digest and taken whole from another proxy's, changes) and outcome (taken, refused)",
            m.proxy_sets.clone(),
        );
        r.register(
            "decision_pass_seconds",
            "Time of one decision pass over the pending transitions, on its blocking thread (leader)",
            m.pass_seconds.clone(),
        );
        r.register(
            "decision_pass_judged",
            "Pending transitions judged by decision passes (leader)",
            m.pass_judged.clone(),
        );
        m
    }
}

impl CoordinatorMetrics {
    /// Whether this coordinator knows a leader (for `/ready`).
    pub fn leader_known(&self) -> bool {
        self.leader.get() != 0
    }

    /// The gauge of open `stream`s (`watch` or `status`).
    fn open_stream(&self, stream: &str) -> Gauge {
        self.open_streams
            .get_or_create(&StreamLabel {
                stream: stream.to_owned(),
            })
            .clone()
    }

    /// Counts a `stream` open for as long as the returned guard lives.
    pub(crate) fn stream_opened(&self, stream: &str) -> OpenStream {
        let gauge = self.open_stream(stream);
        gauge.inc();
        OpenStream(gauge)
    }

    /// Open streams of kind `stream` now.
    pub fn open_streams(&self, stream: &str) -> i64 {
        self.open_stream(stream).get()
    }

    fn config_encoding(&self, kind: &str) -> Counter {
        self.config_encodings
            .get_or_create(&EncodingLabel {
                kind: kind.to_owned(),
            })
            .clone()
    }

    /// Counts one proxy set received: `set` (`evidence` or `applied`),
    /// `form` (`whole`, `digest`, `changes`), taken or refused.
    pub(crate) fn proxy_set(&self, set: &str, form: &str, taken: bool) {
        self.proxy_sets
            .get_or_create(&ProxySetLabel {
                set: set.to_owned(),
                form: form.to_owned(),
                outcome: if taken { "taken" } else { "refused" }.to_owned(),
            })
            .inc();
    }

    /// Counts one configuration payload encoded (`delta` or `full`).
    pub(crate) fn config_encoded(&self, kind: &str) {
        self.config_encoding(kind).inc();
    }

    /// Configuration payloads of `kind` (see [`EncodingLabel`]) encoded so
    /// far.
    pub fn config_encodings(&self, kind: &str) -> u64 {
        self.config_encoding(kind).get()
    }

    /// Sets `live_proxies` from the live proxies (id to zone): one series
    /// per zone that has any, the others removed.
    pub fn set_live_proxies(&self, live: &crate::cutover::LiveProxies<'_>) {
        self.live_gauge().set(live);
    }

    /// The `live_proxies` gauge alone, to set from another thread.
    pub(crate) fn live_gauge(&self) -> LiveProxiesGauge {
        LiveProxiesGauge(self.live_proxies.clone())
    }

    /// Counts one request refused for `limit` (one of `LIMITS`).
    pub(crate) fn limit_hit(&self, limit: &str) {
        self.limit_hit_counter(limit).inc();
    }

    fn limit_hit_counter(&self, limit: &str) -> Counter {
        self.limit_hits
            .get_or_create(&LimitLabel {
                limit: limit.to_owned(),
            })
            .clone()
    }
}

/// One open server stream, counted in `open_streams` until dropped.
pub(crate) struct OpenStream(Gauge);

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A handle on the `live_proxies` gauge (shared with the registry).
#[derive(Clone)]
pub(crate) struct LiveProxiesGauge(Family<ZoneLabel, Gauge>);

impl LiveProxiesGauge {
    /// One series per zone that has live proxies, the others removed.
    pub(crate) fn set(&self, live: &crate::cutover::LiveProxies<'_>) {
        let mut per_zone: BTreeMap<&str, i64> = BTreeMap::new();
        for zone in live.values() {
            *per_zone.entry(zone).or_default() += 1;
        }
        self.0.clear();
        for (zone, count) in per_zone {
            self.0
                .get_or_create(&ZoneLabel {
                    zone: zone.to_owned(),
                })
                .set(count);
        }
    }
}
