//! The leader loop: while this coordinator leads, keep a cutover engine,
//! and propose whatever it decides (commit, abandon, expire a proxy).
//!
//! Woken by evidence and state changes, and at least every tick for leases
//! and deadlines. Losing leadership (or the quorum) drops the engine;
//! gaining it — or leading again in a later term — builds a fresh one
//! (every lease renewed, no evidence) — see `crate::cutover`. Decisions are
//! proposed on this node only, never forwarded: a decision is this
//! leader's, and the state machine would refuse it in another term anyway.
//! Each round also refreshes the gauges of [`super::metrics`].

use super::{Coordinator, now_ms};
use crate::cutover::{CutoverEngine, Decision};
use crate::raft::ProposeError;
use crate::state::ReplicatedState;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use switchyard_proto::model::ObjectName;

/// Longest wait between two decisions while leading.
const TICK: Duration = Duration::from_millis(50);

/// Commits waiting for every live proxy to serve them, for the
/// apply-to-Ready histogram: route to (generation, when this leader first
/// saw it pending, by its own clock).
type AwaitingReady = BTreeMap<ObjectName, (u64, u64)>;

/// Runs until aborted.
pub(crate) async fn run(coordinator: Arc<Coordinator>) {
    let mut state_rx = coordinator.node.state();
    let mut awaiting_ready = AwaitingReady::new();
    loop {
        tokio::select! {
            _ = coordinator.wake.notified() => {}
            _ = state_rx.changed() => {}
            _ = tokio::time::sleep(TICK) => {}
        }
        let state = coordinator.node.state().borrow().clone();
        let decisions = decide(&coordinator, &state, &mut awaiting_ready);
        refresh_gauges(&coordinator, &state);
        for decision in decisions {
            propose(&coordinator, decision, &mut awaiting_ready).await;
        }
    }
}

/// Keeps the engine in step with leadership and asks it what to do.
fn decide(
    coordinator: &Coordinator,
    state: &ReplicatedState,
    awaiting: &mut AwaitingReady,
) -> Vec<Decision> {
    let now = now_ms();
    let term = coordinator.node.metrics().borrow().current_term;
    let mut guard = coordinator.engine.lock().unwrap_or_else(|e| e.into_inner());
    // A leader that lost its quorum stops deciding, as if it were not
    // leading: it could commit nothing anyway, and its leases go stale while
    // proxies talk to the majority. If it gets its quorum back it starts
    // afresh, like a new leader.
    if !coordinator.leads_with_quorum() {
        if guard.take().is_some() {
            tracing::info!("lost leadership or quorum: cutover engine stopped");
            coordinator
                .status_changes
                .send_modify(|v| *v = v.wrapping_add(1));
        }
        awaiting.clear();
        return Vec::new();
    }
    if guard.as_ref().is_some_and(|e| e.term() != term) {
        // Leading again, in a later term: nothing of the earlier term's
        // soft state may carry over.
        *guard = None;
        awaiting.clear();
    }
    let engine = guard.get_or_insert_with(|| {
        tracing::info!(
            term,
            proxies = state.proxies.len(),
            "became leader: cutover engine started, every proxy lease renewed"
        );
        CutoverEngine::new(coordinator.engine_settings(), state, now, term)
    });
    engine.sync(state, now);
    awaiting.retain(|route, (generation, seen_ms)| {
        let still_active = state
            .routes
            .get(route)
            .and_then(|r| r.active.as_ref())
            .is_some_and(|a| a.generation == *generation);
        match engine.applied_summary(state, route, now) {
            Some((_, true)) if still_active => {
                let seconds = now.saturating_sub(*seen_ms) as f64 / 1000.0;
                coordinator.metrics.apply_to_ready.observe(seconds);
                false
            }
            _ => still_active,
        }
    });
    let live = engine.live_proxies(state, now);
    let mut per_zone: BTreeMap<&str, i64> = BTreeMap::new();
    for zone in live.values() {
        *per_zone.entry(zone.as_str()).or_default() += 1;
    }
    coordinator.metrics.live_proxies.clear();
    for (zone, count) in per_zone {
        coordinator
            .metrics
            .live_proxies
            .get_or_create(&super::metrics::ZoneLabel {
                zone: zone.to_string(),
            })
            .set(count);
    }
    let decisions = engine.decide(state, now);
    // Remember when each route about to be committed was first seen, for
    // the apply-to-commit and apply-to-Ready histograms.
    for decision in &decisions {
        if let Decision::Commit {
            route, generation, ..
        } = decision
            && let Some(seen) = engine.first_seen_ms(route, *generation)
        {
            awaiting.insert(route.clone(), (*generation, seen));
        }
    }
    decisions
}

fn refresh_gauges(coordinator: &Coordinator, state: &ReplicatedState) {
    let m = &coordinator.metrics;
    let raft = coordinator.node.metrics().borrow().clone();
    m.term.set(raft.current_term as i64);
    m.leader.set(raft.current_leader.unwrap_or(0) as i64);
    m.is_leader.set(i64::from(coordinator.node.is_leader()));
    m.last_log_index
        .set(raft.last_log_index.unwrap_or(0) as i64);
    m.applied_index
        .set(raft.last_applied.map_or(0, |l| l.index) as i64);
    let pending = state
        .routes
        .values()
        .filter(|r| r.pending.is_some())
        .count();
    m.pending_transitions.set(pending as i64);
}

async fn propose(coordinator: &Coordinator, decision: Decision, awaiting: &mut AwaitingReady) {
    match &decision {
        Decision::Commit {
            route,
            generation,
            forced,
            summary,
            ..
        } => {
            tracing::info!(route = %route, generation, forced, evidence = %summary, "committing cutover");
        }
        Decision::Abandon {
            route,
            generation,
            reason,
            ..
        } => {
            tracing::warn!(route = %route, generation, reason = %reason, "abandoning cutover, old backend keeps serving");
        }
        Decision::ExpireProxy { id, .. } => {
            tracing::warn!(proxy = %id, "proxy lease expired: it no longer counts toward readiness");
        }
    }
    let result = coordinator.propose_decision(decision.command()).await;
    let response = match result {
        Ok(response) => response,
        Err(ProposeError::NotLeader { .. }) => {
            // Deposed between deciding and proposing: the decision was this
            // leader's and goes with it.
            tracing::info!("no longer leader: decision dropped, the next leader decides afresh");
            if let Decision::Commit { route, .. } = &decision {
                awaiting.remove(route);
            }
            return;
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not propose decision; will decide again");
            return;
        }
    };
    if let Err(e) = response.0 {
        // A decision raced with a newer apply (superseded, endpoints moved
        // on) or outlived its term: harmless, the engine decides again.
        tracing::debug!(error = %e, "decision no longer applies");
        if let Decision::Commit { route, .. } = &decision {
            awaiting.remove(route);
        }
        return;
    }
    let m = &coordinator.metrics;
    match decision {
        Decision::Commit {
            route, generation, ..
        } => {
            m.commits.inc();
            if let Some((g, seen_ms)) = awaiting.get(&route)
                && *g == generation
            {
                m.apply_to_commit
                    .observe(now_ms().saturating_sub(*seen_ms) as f64 / 1000.0);
            }
        }
        Decision::Abandon { .. } => {
            m.abandons.inc();
        }
        Decision::ExpireProxy { id, .. } => {
            m.expired_proxies.inc();
            coordinator.with_engine(|e| e.forget(&id));
        }
    }
}
