//! The proxy's control-plane client: watch configuration from any
//! coordinator, apply it to the data plane through the [`guard`], and keep
//! this proxy's membership (registration, heartbeats, readiness evidence)
//! with the leader.
//!
//! # Layout
//!
//! The flow is config → data plane → evidence → coordinators:
//!
//! - `watch`: the configuration stream from any coordinator — which
//!   coordinator to watch, resuming from the version held, lag behind the
//!   leader. `assembly`: chunks into whole updates, deltas applied on the
//!   configuration held, versions in sequence.
//! - `apply`: the apply loop — every snapshot and readiness change goes
//!   through the pure [`guard`] into the data plane.
//! - `membership`: register, heartbeat, report readiness, deregister —
//!   all with the leader.
//! - [`coordinators`]: channels per coordinator, preference order, leader
//!   hints. [`error`]: what went wrong, told apart. [`backoff`]: how long
//!   to wait before trying again.
//!
//! This file owns the configuration ([`ControlConfig`]), the metrics, the
//! state the three tasks share, and [`run`], which starts them and
//! deregisters on shutdown. It does not own warming itself (the data
//! plane's pools and health checks do it when told which backends to keep
//! warm) or routing.
//!
//! Static stability: when every coordinator is down nothing here touches
//! the data plane, so it keeps serving its last configuration.

mod apply;
mod assembly;
pub mod backoff;
pub mod coordinators;
pub mod error;
pub mod guard;
mod membership;
mod watch;

#[cfg(test)]
mod tests;

use crate::DataPlane;
use backoff::BackoffPolicy;
use coordinators::{CoordinatorAddress, Coordinators};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::BTreeSet;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchyard_proto::model::{BackendKey, ConfigSnapshot, ObjectName};
use tokio::sync::{Notify, watch as channel};
use tracing::Instrument;

/// How the proxy reaches the control plane.
#[derive(Debug, Clone)]
pub struct ControlConfig {
    /// This proxy's id.
    pub proxy_id: String,
    /// Its zone.
    pub zone: String,
    /// Its admin address (reported for operators).
    pub admin_address: String,
    /// The coordinators.
    pub coordinators: Vec<CoordinatorAddress>,
    /// Deadline of every unary RPC.
    pub rpc_timeout: Duration,
    /// Longest a committed generation waits for local warm-up before it is
    /// applied anyway.
    pub apply_wait_limit: Duration,
    /// The initial reconnect back-off: after a failed watch or
    /// registration the pause is drawn at random below this, and the
    /// ceiling doubles per further failure up to
    /// [`backoff::MAX_RECONNECT_BACKOFF`]; a stream that delivers or a
    /// registration that succeeds starts it over (see [`backoff`]).
    pub reconnect_backoff: Duration,
    /// Mutual TLS as this proxy (its certificate must name `proxy_id`),
    /// or `--insecure`.
    pub security: switchyard_tls::Security,
}

impl ControlConfig {
    /// The reconnect policy [`ControlConfig::reconnect_backoff`] means.
    pub fn backoff_policy(&self) -> BackoffPolicy {
        BackoffPolicy::starting_at(self.reconnect_backoff)
    }
}

/// Metrics of the control-plane client.
#[derive(Clone, Default)]
pub struct ControlMetrics {
    config_version: Gauge,
    forced_applies: Counter,
    waiting_routes: Gauge,
    coordinator_errors: Counter,
}

impl ControlMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = ControlMetrics::default();
        registry.register(
            "switchyard_proxy_config_version_received",
            "Configuration version (coordinator log index) last received from a coordinator (switchyard_proxy_config_version: the one served)",
            m.config_version.clone(),
        );
        registry.register(
            "switchyard_proxy_forced_applies",
            "Committed route generations applied before this proxy had warmed their backends (local wait limit hit)",
            m.forced_applies.clone(),
        );
        registry.register(
            "switchyard_proxy_waiting_routes",
            "Committed route generations waiting for local warm-up",
            m.waiting_routes.clone(),
        );
        registry.register(
            "switchyard_proxy_coordinator_errors",
            "Failed calls to coordinators",
            m.coordinator_errors.clone(),
        );
        m
    }
}

/// State shared by the client's tasks.
/// What this proxy serves, as its heartbeats say it
/// (`HeartbeatRequest.applied_through`): the active generation of every
/// route of configuration `through`, except the routes `exceptions` lists
/// with the generation served instead (0: none). While the proxy keeps up
/// nothing is listed, so a heartbeat costs the leader O(1) whatever the
/// store holds.
#[derive(Debug, Clone, Default, PartialEq)]
struct AppliedThrough {
    /// The configuration version; 0 before the first one.
    through: u64,
    exceptions: imbl::OrdMap<ObjectName, u64>,
}

struct Shared {
    config: ControlConfig,
    coordinators: Coordinators,
    dataplane: Arc<DataPlane>,
    metrics: ControlMetrics,
    /// Route generations currently served, as heartbeats say them (apply
    /// writes, heartbeats read; a persistent map, so a heartbeat's copy is
    /// O(1)).
    applied: Mutex<AppliedThrough>,
    /// Backends evidence is reported for, served and warming (apply
    /// writes, reports read).
    reported: Mutex<BTreeSet<BackendKey>>,
    /// Apply asks membership to report evidence now (and the watch
    /// stream, when it names a new leader).
    report_now: Notify,
    /// The leader the watch stream named last, and whether that moved
    /// from one named before (membership then renews both sets with the
    /// new one at once: see [`Shared::leader_named`]).
    named_leader: Mutex<Option<String>>,
    leader_moved: AtomicBool,
    /// Newest configuration version the watch stream has shown, bare
    /// versions included (watch writes, heartbeats and apply read).
    held_version: AtomicU64,
    /// Version of the newest configuration payload the watch stream took
    /// (watch writes, apply reads): written before `held_version`, so that
    /// a reader that sees a version in `held_version` sees its payload's
    /// here ([`Shared::served_through`]).
    payload_version: AtomicU64,
    /// This run's current registration (`RegisterReply.registration`), 0
    /// before the first. Heartbeats, reports and the goodbye name it.
    registration: AtomicU64,
    /// Heartbeats tell the watcher when its stream lags behind the leader.
    lag: channel::Sender<watch::Lag>,
}

impl Shared {
    /// A coordinator named `address` the leader on the watch stream: calls
    /// go there from now on. When that is another leader than the one
    /// named before (a failover), membership is woken to send both sets
    /// to it at once — its grace ends when every proxy has heartbeated to
    /// it, and it judges readiness by the evidence — rather than after a
    /// back-off pause or a renewal interval. O(1).
    fn leader_named(&self, address: &str) {
        self.coordinators.follow_leader(address);
        let mut named = self.named_leader.lock().unwrap_or_else(|e| e.into_inner());
        if named.as_deref() == Some(address) {
            return;
        }
        let moved = named.is_some();
        *named = Some(address.to_string());
        drop(named);
        if moved {
            tracing::info!(leader = %address, "a coordinator named a new leader; reporting to it");
            self.leader_moved.store(true, Ordering::Relaxed);
            self.report_now.notify_one();
        }
    }

    /// The newest version `snapshot`, the configuration the apply loop
    /// serves from, stands for: the version the stream holds when it took
    /// no payload after `snapshot` (bare versions after a payload move the
    /// version without changing what a proxy sees); `None` while a newer
    /// payload is on its way to the apply loop. A proxy the leader dropped
    /// and that registered again by the log entry at R may have missed
    /// cutovers committed before R: it is counted again only once it
    /// serves every route of a configuration at least that new
    /// ([`crate::DataPlane::mark_served_through`]). O(1).
    fn served_through(&self, snapshot: &ConfigSnapshot) -> Option<u64> {
        // `held_version` first: the stream writes a payload's version
        // before it (`watch::taken`), so a held version that came with a
        // payload shows that payload here.
        let held = self.held_version.load(Ordering::Acquire);
        let payload = self.payload_version.load(Ordering::Acquire);
        (payload == snapshot.version).then_some(held)
    }

    /// Whether the watch stream named a new leader since the last call.
    fn take_leader_moved(&self) -> bool {
        self.leader_moved.swap(false, Ordering::Relaxed)
    }

    fn new(config: ControlConfig, dataplane: Arc<DataPlane>, metrics: ControlMetrics) -> Self {
        let coordinators = Coordinators::new(
            &config.coordinators,
            &config.zone,
            config.rpc_timeout,
            config.security.clone(),
        );
        Shared {
            config,
            coordinators,
            dataplane,
            metrics,
            applied: Mutex::new(AppliedThrough::default()),
            reported: Mutex::new(BTreeSet::new()),
            report_now: Notify::new(),
            named_leader: Mutex::new(None),
            leader_moved: AtomicBool::new(false),
            held_version: AtomicU64::new(0),
            payload_version: AtomicU64::new(0),
            registration: AtomicU64::new(0),
            lag: channel::Sender::new(watch::Lag::default()),
        }
    }
}

/// Runs the client until `shutdown` resolves, then deregisters.
pub async fn run(
    config: ControlConfig,
    dataplane: Arc<DataPlane>,
    metrics: ControlMetrics,
    shutdown: impl Future<Output = ()>,
) {
    // Every line the client logs names the proxy.
    let span = tracing::info_span!("control", proxy = %config.proxy_id);
    let shared = Arc::new(Shared::new(config, dataplane, metrics));
    let (snapshots_tx, snapshots_rx) = channel::channel(None);
    let watcher = tokio::spawn(watch::run(shared.clone(), snapshots_tx).instrument(span.clone()));
    let membership = tokio::spawn(membership::run(shared.clone()).instrument(span.clone()));
    let applier = tokio::spawn(apply::run(shared.clone(), snapshots_rx).instrument(span.clone()));
    shutdown.await;
    watcher.abort();
    applier.abort();
    membership.abort();
    membership::deregister(&shared).instrument(span).await;
}

/// Runs `work` on a blocking thread, in the current span (every line the
/// client logs names the proxy), and returns what it returned: for work
/// that grows with the store (decoding it, installing it), which on the
/// runtime's threads would hold up serving and the heartbeats that keep
/// this proxy's lease. A panic in `work` is raised again here; `None`
/// when the runtime is shutting down and dropped the work.
async fn aside<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let span = tracing::Span::current();
    match tokio::task::spawn_blocking(move || span.in_scope(work)).await {
        Ok(done) => Some(done),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => None,
    }
}
