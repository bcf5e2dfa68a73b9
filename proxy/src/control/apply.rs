//! The apply loop: feeds the data plane from the configuration stream,
//! through the [`ApplyGuard`].
//!
//! Owns: when to decide (a new snapshot, a readiness change, a tick for
//! the guard's local wait limit), installing what the guard decided
//! (routes, backends to keep warm), and publishing what is served — the
//! applied generations heartbeats carry and the backends reports cover.
//! Does not own: the decision itself (the pure guard: invariants 3 and 4),
//! where snapshots come from (`watch`), nor telling the coordinators
//! (`membership`).

use super::guard::ApplyGuard;
use super::{AppliedThrough, Shared};
use crate::ServingConfig;
use crate::upstream::discovery::BackendGenerations;
use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use switchyard_proto::model::{BackendKey, ConfigSnapshot};
use tokio::sync::watch;

/// How often waiting generations are re-checked against the local limit
/// when nothing else happens.
const WAIT_LIMIT_TICK: Duration = Duration::from_millis(100);

/// This process's monotonic clock in milliseconds: the apply guard's wait
/// limit is a duration on this machine, so a wall-clock step (NTP, an
/// operator, a skewed VM) never lengthens or cuts it.
fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// On every new snapshot, install it (routes as the guard decides) and keep
/// the right backends warm; on every readiness change, let the guard apply
/// what became warm. Ends when the watcher or the data plane goes.
pub(super) async fn run(
    shared: Arc<Shared>,
    mut snapshots: watch::Receiver<Option<Arc<ConfigSnapshot>>>,
) {
    let mut guard = ApplyGuard::new(shared.config.apply_wait_limit.as_millis() as u64);
    let mut readiness = shared.dataplane.readiness_changes();
    let mut current: Option<(Arc<ConfigSnapshot>, Arc<BackendGenerations>)> = None;
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
            _ = tokio::time::sleep(WAIT_LIMIT_TICK) => false,
        };
        if !new_snapshot {
            // A readiness change or a tick: the guard's decision and at
            // most the routes it let through compiled, here.
            if let Some((snapshot, generations)) = &current {
                step(&shared, &mut guard, snapshot, generations, false);
            }
            continue;
        }
        let Some(snapshot) = snapshots.borrow_and_update().clone() else {
            current = None;
            continue;
        };
        // A new snapshot, on a blocking thread: its endpoint generations
        // and its install cost O(routes), a second or more for 10,000 on
        // a busy machine, which on the runtime's thread would hold up
        // serving and the heartbeats that keep this proxy's lease.
        let shared_for_step = Arc::clone(&shared);
        let stepped = super::aside(move || {
            let generations = Arc::new(BackendGenerations::new(&snapshot));
            step(&shared_for_step, &mut guard, &snapshot, &generations, true);
            (guard, snapshot, generations)
        })
        .await;
        // None: the runtime is shutting down.
        let Some((stepped_guard, snapshot, generations)) = stepped else {
            return;
        };
        guard = stepped_guard;
        current = Some((snapshot, generations));
    }
}

/// One decision of the guard over `snapshot`, and what follows from it.
fn step(
    shared: &Shared,
    guard: &mut ApplyGuard,
    snapshot: &Arc<ConfigSnapshot>,
    generations: &BackendGenerations,
    new: bool,
) {
    let dataplane = &shared.dataplane;
    let warm = |b: &BackendKey| match generations.of(b) {
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
    let report = guard.decide(snapshot, &warm, now_ms());
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
    if new || !report.applied.is_empty() {
        let warming = guard.warming(snapshot);
        dataplane.install(ServingConfig {
            snapshot: snapshot.clone(),
            routes: guard.routes(),
        });
        dataplane.set_warming(warming.clone());
        *shared.reported.lock().unwrap_or_else(|e| e.into_inner()) = reported(guard, warming);
        {
            let mut served = shared.applied.lock().unwrap_or_else(|e| e.into_inner());
            // Said anew only when a served generation moved (or nothing
            // was said yet): what was true of the configuration named
            // stays true while nothing served changes, and a configuration
            // that changes nothing served then costs no heartbeat.
            if !report.applied.is_empty() || served.through == 0 {
                *served = applied(guard, snapshot);
            }
        }
        // A new leader, or the same one, should hear of it at once.
        shared.report_now.notify_one();
    }
    if report.waiting.is_empty() {
        // Every route of this configuration is served at its committed
        // generation: `/ready` may say so, once the configuration is at
        // least as new as this proxy's registration (the data plane
        // judges).
        let Some(through) = shared.served_through(snapshot) else {
            // A newer payload is on its way here.
            return;
        };
        if dataplane.mark_served_through(through) {
            tracing::info!(
                version = through,
                "registered again and serving every route at its committed generation: /ready answers 200 again"
            );
        }
    }
}

/// The served generations as heartbeats carry them: `snapshot`'s
/// version, and the routes whose served generation is not its active one
/// (0: not served) — a route held back while its backends warm, say.
/// O(R).
fn applied(guard: &ApplyGuard, snapshot: &ConfigSnapshot) -> AppliedThrough {
    let served = guard.generations();
    let exceptions = snapshot
        .routes
        .iter()
        .filter_map(|record| {
            let active = record.active.as_ref()?.generation;
            let serving = served.get(&record.name).copied().unwrap_or(0);
            (serving != active).then(|| (record.name.clone(), serving))
        })
        .collect();
    AppliedThrough {
        through: snapshot.version,
        exceptions,
    }
}

/// The backends evidence is reported for: those warming and those the
/// served routes send traffic to.
fn reported(guard: &ApplyGuard, warming: BTreeSet<BackendKey>) -> BTreeSet<BackendKey> {
    let mut set = warming;
    for route in guard.routes() {
        set.extend(route.traffic_backends());
    }
    set
}
