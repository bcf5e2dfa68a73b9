//! The proxy's control-plane client: watch configuration from any
//! coordinator, register and heartbeat with the leader, report per-backend
//! readiness from the data plane, and decide — through the [`guard`] —
//! which route generations the data plane routes by.
//!
//! Owns: the conversation with the coordinators and the apply guard. Does
//! not own: warming itself (the data plane's pools and health checks do it
//! when told which backends to keep warm) or routing.
//!
//! Static stability: when every coordinator is down nothing here touches
//! the data plane, so it keeps serving its last configuration.

pub mod coordinators;
pub mod guard;

use crate::{DataPlane, ServingConfig};
use coordinators::{CoordinatorAddress, Coordinators};
use guard::ApplyGuard;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::BTreeSet;
use std::future::Future;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchyard_proto::model::{BackendKey, ConfigSnapshot, ObjectName};
use switchyard_proto::pb;
use tokio::sync::{Notify, watch};

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
    /// Pause between reconnect attempts.
    pub reconnect_backoff: Duration,
    /// Mutual TLS as this proxy (its certificate must name `proxy_id`),
    /// or `--insecure`.
    pub security: switchyard_tls::Security,
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
            "switchyard_proxy_config_version",
            "Configuration version (coordinator log index) last received",
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

/// This process's monotonic clock in milliseconds: the apply guard's wait
/// limit is a duration on this machine, so a wall-clock step (NTP, an
/// operator, a skewed VM) never lengthens or cuts it.
fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// State shared by the client's tasks.
struct Shared {
    config: ControlConfig,
    coordinators: Coordinators,
    dataplane: Arc<DataPlane>,
    metrics: ControlMetrics,
    /// Route generations currently served (for heartbeats).
    applied: Mutex<Vec<pb::AppliedGeneration>>,
    /// Backends evidence is reported for (served + warming).
    reported: Mutex<BTreeSet<BackendKey>>,
    /// Ask the membership task to report evidence now.
    report_now: Notify,
    /// Newest configuration version this proxy's watch stream has shown.
    held_version: AtomicU64,
    /// This run's current registration (`RegisterReply.registration`), 0
    /// before the first. Heartbeats, reports and the goodbye name it.
    registration: AtomicU64,
    /// Set when heartbeats show the watch stream lagging behind the
    /// leader: the watcher reconnects, to the leader.
    watch_lagging: Notify,
}

/// Runs the client until `shutdown` resolves, then deregisters.
pub async fn run(
    config: ControlConfig,
    dataplane: Arc<DataPlane>,
    metrics: ControlMetrics,
    shutdown: impl Future<Output = ()>,
) {
    let coordinators = Coordinators::new(
        &config.coordinators,
        &config.zone,
        config.rpc_timeout,
        config.security.clone(),
    );
    let shared = Arc::new(Shared {
        config,
        coordinators,
        dataplane,
        metrics,
        applied: Mutex::new(Vec::new()),
        reported: Mutex::new(BTreeSet::new()),
        report_now: Notify::new(),
        held_version: AtomicU64::new(0),
        registration: AtomicU64::new(0),
        watch_lagging: Notify::new(),
    });
    let (snapshots_tx, snapshots_rx) = watch::channel(None);
    let watcher = tokio::spawn(watch_config(shared.clone(), snapshots_tx));
    let membership = tokio::spawn(membership(shared.clone()));
    let applier = tokio::spawn(apply_loop(shared.clone(), snapshots_rx));
    shutdown.await;
    watcher.abort();
    applier.abort();
    membership.abort();
    deregister(&shared).await;
}

/// Keeps a watch stream open to some coordinator and publishes every newer
/// snapshot. Older or equal versions (a lagging coordinator) are dropped.
async fn watch_config(shared: Arc<Shared>, tx: watch::Sender<Option<Arc<ConfigSnapshot>>>) {
    let mut held = 0u64;
    let mut attempt = 0usize;
    let mut to_leader = false;
    loop {
        let order = shared.coordinators.order();
        let address = match shared.coordinators.leader_or_first() {
            Some(leader) if to_leader => leader,
            _ => order[attempt % order.len().max(1)].clone(),
        };
        attempt += 1;
        let lagging = shared.watch_lagging.notified();
        let outcome = tokio::select! {
            outcome = stream_from(&shared, &address, &mut held, &tx) => outcome,
            _ = lagging => Err("its configuration lags behind the leader's".to_string()),
        };
        // After a failure, try where the leader is; a stream that ended
        // cleanly just moves on to the next coordinator.
        to_leader = outcome.is_err();
        match outcome {
            Ok(()) => {
                tracing::warn!(coordinator = %address, "configuration stream ended; reconnecting")
            }
            Err(e) => {
                shared.metrics.coordinator_errors.inc();
                tracing::warn!(coordinator = %address, error = %e, "configuration stream failed; trying the next coordinator");
            }
        }
        tokio::time::sleep(shared.config.reconnect_backoff).await;
    }
}

async fn stream_from(
    shared: &Shared,
    address: &str,
    held: &mut u64,
    tx: &watch::Sender<Option<Arc<ConfigSnapshot>>>,
) -> Result<(), String> {
    let mut client = shared.coordinators.client(address, true)?;
    let request = pb::WatchRequest {
        proxy_id: shared.config.proxy_id.clone(),
        known_version: *held,
    };
    let mut stream = client
        .watch(request)
        .await
        .map_err(|s| s.message().to_string())?
        .into_inner();
    tracing::info!(coordinator = %address, "watching configuration");
    while let Some(update) = stream
        .message()
        .await
        .map_err(|s| s.message().to_string())?
    {
        if update.version <= *held {
            tracing::debug!(
                version = update.version,
                held = *held,
                "ignoring a configuration no newer than ours"
            );
            continue;
        }
        if update.snapshot_json.is_empty() {
            // Only the version moved (a registration, say): what we hold
            // is current. Noting it keeps the lag check honest.
            *held = update.version;
            shared.held_version.store(*held, Ordering::Relaxed);
            shared.metrics.config_version.set(update.version as i64);
            continue;
        }
        let snapshot: ConfigSnapshot = serde_json::from_slice(&update.snapshot_json)
            .map_err(|e| format!("configuration {} does not decode: {e}", update.version))?;
        *held = update.version;
        shared.held_version.store(*held, Ordering::Relaxed);
        shared.metrics.config_version.set(update.version as i64);
        tracing::info!(
            version = update.version,
            coordinator = update.coordinator_id,
            "configuration received"
        );
        tx.send_replace(Some(Arc::new(snapshot)));
    }
    Ok(())
}

/// Feeds the data plane: on every new snapshot, install it (routes as the
/// guard decides) and keep the right backends warm; on every readiness
/// change, let the guard apply what became warm.
async fn apply_loop(
    shared: Arc<Shared>,
    mut snapshots: watch::Receiver<Option<Arc<ConfigSnapshot>>>,
) {
    let mut guard = ApplyGuard::new(shared.config.apply_wait_limit.as_millis() as u64);
    let mut readiness = shared.dataplane.readiness_changes();
    let mut current: Option<Arc<ConfigSnapshot>> = None;
    loop {
        let new_snapshot = tokio::select! {
            r = snapshots.changed() => {
                if r.is_err() { return; }
                true
            }
            r = readiness.changed() => {
                if r.is_err() { return; }
                false
            }
            // Waiting generations are re-checked against the local limit.
            _ = tokio::time::sleep(Duration::from_millis(100)) => false,
        };
        if new_snapshot {
            current = snapshots.borrow_and_update().clone();
        }
        let Some(snapshot) = current.clone() else {
            continue;
        };
        let dataplane = &shared.dataplane;
        let warm = |b: &BackendKey| match snapshot.endpoint_generation(b) {
            // A backend that does not exist answers 500 whatever happens.
            None => true,
            Some(generation) => dataplane
                .readiness(b)
                .is_some_and(|r| r.healthy > 0 && r.endpoints_generation >= generation),
        };
        // Decide first, so a new snapshot whose routes are already warm is
        // compiled once, with the new generations in it. Backends the data
        // plane does not know yet are not warm: they wait for the install
        // below to start their health checks.
        let report = guard.decide(&snapshot, &warm, now_ms());
        shared
            .metrics
            .waiting_routes
            .set(report.waiting.len() as i64);
        for (route, generation) in &report.forced {
            shared.metrics.forced_applies.inc();
            tracing::warn!(route = %route, generation, "applying a committed generation before its backends are warm here: local wait limit reached");
        }
        for (route, generation) in &report.applied {
            tracing::info!(route = %route, generation, "now routing by generation");
        }
        if new_snapshot || !report.applied.is_empty() {
            let warming = guard.warming(&snapshot);
            shared.dataplane.install(ServingConfig {
                snapshot: snapshot.clone(),
                routes: guard.routes(),
            });
            shared.dataplane.set_warming(warming.clone());
            set_reported(&shared, &guard, warming);
        }
        if new_snapshot || !report.applied.is_empty() {
            *shared.applied.lock().unwrap_or_else(|e| e.into_inner()) = applied_pb(&guard);
            shared.report_now.notify_one();
        }
        if report.waiting.is_empty() {
            // Every route of this configuration is served at its committed
            // generation: `/ready` may say so.
            dataplane.mark_synced();
        }
    }
}

fn applied_pb(guard: &ApplyGuard) -> Vec<pb::AppliedGeneration> {
    guard
        .generations()
        .into_iter()
        .map(
            |(name, generation): (ObjectName, u64)| pb::AppliedGeneration {
                namespace: name.namespace,
                name: name.name,
                generation,
            },
        )
        .collect()
}

fn set_reported(shared: &Shared, guard: &ApplyGuard, warming: BTreeSet<BackendKey>) {
    let mut set = warming;
    for route in guard.routes() {
        set.extend(route.traffic_backends());
    }
    *shared.reported.lock().unwrap_or_else(|e| e.into_inner()) = set;
}

/// Registers, then heartbeats and reports evidence to the leader until
/// aborted; registers again whenever the leader no longer knows us.
async fn membership(shared: Arc<Shared>) {
    let mut readiness = shared.dataplane.readiness_changes();
    let mut lag_rounds = 0u32;
    // Since when this proxy has been trying to (re)register.
    let mut unregistered_since = tokio::time::Instant::now();
    'register: loop {
        let Some(reply) = register(&shared, unregistered_since).await else {
            tokio::time::sleep(shared.config.reconnect_backoff).await;
            continue 'register;
        };
        let interval = Duration::from_millis(reply.heartbeat_interval_ms.max(50));
        loop {
            // Evidence first: a new leader learns readiness as soon as it
            // hears from us, then the heartbeat renews the lease.
            if !report(&shared).await || !heartbeat(&shared, &mut lag_rounds).await {
                unregistered_since = tokio::time::Instant::now();
                continue 'register;
            }
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = shared.report_now.notified() => {}
                _ = readiness.changed() => {}
            }
        }
    }
}

/// How long registering may fail for want of a leader before it is worth
/// a warning: elections (a start-up, a failover) take about a second.
const REGISTRATION_PATIENCE: Duration = Duration::from_secs(5);

async fn register(
    shared: &Shared,
    unregistered_since: tokio::time::Instant,
) -> Option<pb::RegisterReply> {
    let request = pb::RegisterRequest {
        proxy: Some(pb::ProxyIdentity {
            id: shared.config.proxy_id.clone(),
            zone: shared.config.zone.clone(),
            admin_address: shared.config.admin_address.clone(),
        }),
    };
    let address = shared.coordinators.leader_or_first()?;
    let mut client = shared.coordinators.client(&address, false).ok()?;
    match client.register(request).await {
        Ok(reply) => {
            let reply = reply.into_inner();
            shared
                .registration
                .store(reply.registration, Ordering::Relaxed);
            tracing::info!(coordinator = %address, registration = reply.registration, "registered with the coordinators");
            Some(reply)
        }
        Err(status) => {
            shared.metrics.coordinator_errors.inc();
            shared.coordinators.note_error(&address, &status);
            let waiting_for_leader = status.code() == tonic::Code::Unavailable
                && unregistered_since.elapsed() < REGISTRATION_PATIENCE;
            if waiting_for_leader {
                tracing::info!(coordinator = %address, error = %status.message(), "registration not possible yet (no leader); retrying");
            } else {
                tracing::warn!(coordinator = %address, error = %status.message(), "registration failed; retrying");
            }
            None
        }
    }
}

/// Returns false when the proxy must register again. Transport errors are
/// retried on the next round without re-registering.
async fn heartbeat(shared: &Shared, lag_rounds: &mut u32) -> bool {
    let applied = shared
        .applied
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let request = pb::HeartbeatRequest {
        proxy_id: shared.config.proxy_id.clone(),
        applied,
        config_version: shared.held_version.load(Ordering::Relaxed),
        registration: shared.registration.load(Ordering::Relaxed),
    };
    let Some(address) = shared.coordinators.leader_or_first() else {
        return true;
    };
    let Ok(mut client) = shared.coordinators.client(&address, false) else {
        return true;
    };
    match client.heartbeat(request).await {
        Ok(reply) => {
            let reply = reply.into_inner();
            let known = reply.known;
            let held = shared.held_version.load(Ordering::Relaxed);
            if reply.config_version > held {
                *lag_rounds += 1;
                // One round behind is normal (the stream is a moment
                // behind the leader); several in a row mean the watched
                // coordinator is not getting the leader's commits.
                if *lag_rounds >= 3 {
                    tracing::warn!(
                        held,
                        leader = reply.config_version,
                        "configuration stream is behind the leader; switching coordinator"
                    );
                    shared.watch_lagging.notify_one();
                    *lag_rounds = 0;
                }
            } else {
                *lag_rounds = 0;
            }
            if !known {
                tracing::warn!(coordinator = %address, "the leader does not know this proxy (lease expired or new leader); registering again");
            }
            known
        }
        Err(status) => {
            shared.metrics.coordinator_errors.inc();
            shared.coordinators.note_error(&address, &status);
            tracing::debug!(coordinator = %address, error = %status.message(), "heartbeat failed");
            true
        }
    }
}

/// Sends evidence for every reported backend. Returns false when the proxy
/// must register again.
async fn report(shared: &Shared) -> bool {
    let backends: Vec<pb::BackendReadiness> = shared
        .reported
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(|b| {
            shared.dataplane.readiness(b).map(|r| pb::BackendReadiness {
                backend: b.to_string(),
                endpoints_generation: r.endpoints_generation,
                healthy: r.healthy,
                total: r.total,
            })
        })
        .collect();
    // Sent even when empty: each report replaces the previous one on the
    // leader, so an empty one withdraws evidence for backends this proxy
    // no longer keeps warm.
    let request = pb::ReadinessReport {
        proxy_id: shared.config.proxy_id.clone(),
        backends,
        registration: shared.registration.load(Ordering::Relaxed),
    };
    let Some(address) = shared.coordinators.leader_or_first() else {
        return true;
    };
    let Ok(mut client) = shared.coordinators.client(&address, false) else {
        return true;
    };
    match client.report_readiness(request).await {
        Ok(reply) => reply.into_inner().known,
        Err(status) => {
            shared.metrics.coordinator_errors.inc();
            shared.coordinators.note_error(&address, &status);
            tracing::debug!(coordinator = %address, error = %status.message(), "readiness report failed");
            true
        }
    }
}

async fn deregister(shared: &Shared) {
    let Some(address) = shared.coordinators.leader_or_first() else {
        return;
    };
    let Ok(mut client) = shared.coordinators.client(&address, false) else {
        return;
    };
    let request = pb::DeregisterRequest {
        proxy_id: shared.config.proxy_id.clone(),
        registration: shared.registration.load(Ordering::Relaxed),
    };
    match client.deregister(request).await {
        Ok(_) => tracing::info!("deregistered from the coordinators"),
        Err(status) => {
            tracing::warn!(error = %status.message(), "could not deregister; the lease will expire instead")
        }
    }
}
