//! The leader loop: while this coordinator leads, keep a cutover engine,
//! and propose whatever it decides (commit, abandon, expire a proxy).
//!
//! Woken by evidence and state changes, and at least every tick for leases
//! and deadlines. Losing leadership drops the engine; gaining it builds a
//! fresh one (every lease renewed, no evidence) — see `crate::cutover`.

use super::{Coordinator, now_ms};
use crate::cutover::{CutoverEngine, Decision};
use crate::state::Command;
use std::sync::Arc;
use std::time::Duration;

/// Longest wait between two decisions while leading.
const TICK: Duration = Duration::from_millis(50);

/// Runs until aborted.
pub(crate) async fn run(coordinator: Arc<Coordinator>) {
    let mut state_rx = coordinator.node.state();
    loop {
        tokio::select! {
            _ = coordinator.wake.notified() => {}
            _ = state_rx.changed() => {}
            _ = tokio::time::sleep(TICK) => {}
        }
        let decisions = decide(&coordinator);
        for decision in decisions {
            propose(&coordinator, decision).await;
        }
    }
}

/// Keeps the engine in step with leadership and asks it what to do.
fn decide(coordinator: &Coordinator) -> Vec<Decision> {
    let now = now_ms();
    let state = coordinator.node.state().borrow().clone();
    let mut guard = coordinator.engine.lock().unwrap_or_else(|e| e.into_inner());
    if !coordinator.node.is_leader() {
        if guard.take().is_some() {
            tracing::info!("lost leadership: cutover engine stopped");
            coordinator
                .status_changes
                .send_modify(|v| *v = v.wrapping_add(1));
        }
        return Vec::new();
    }
    let engine = guard.get_or_insert_with(|| {
        tracing::info!(
            proxies = state.proxies.len(),
            "became leader: cutover engine started, every proxy lease renewed"
        );
        CutoverEngine::new(coordinator.engine_settings(), &state, now)
    });
    engine.sync(&state, now);
    engine.decide(&state, now)
}

async fn propose(coordinator: &Coordinator, decision: Decision) {
    let command = match &decision {
        Decision::Commit {
            route,
            generation,
            forced,
            summary,
        } => {
            tracing::info!(route = %route, generation, forced, evidence = %summary, "committing cutover");
            Command::CommitTransition {
                route: route.clone(),
                generation: *generation,
                forced: *forced,
            }
        }
        Decision::Abandon {
            route,
            generation,
            reason,
        } => {
            tracing::warn!(route = %route, generation, reason = %reason, "abandoning cutover, old backend keeps serving");
            Command::AbandonTransition {
                route: route.clone(),
                generation: *generation,
                reason: reason.clone(),
            }
        }
        Decision::ExpireProxy { id } => {
            tracing::warn!(proxy = %id, "proxy lease expired: it no longer counts toward readiness");
            Command::RemoveProxy {
                id: id.clone(),
                reason: "lease expired".into(),
            }
        }
    };
    match coordinator.propose(command).await {
        Ok(response) => {
            if let Err(e) = response.0 {
                // A decision raced with a newer apply (superseded): harmless.
                tracing::debug!(error = %e, "decision no longer applies");
            }
            if let Decision::ExpireProxy { id } = decision {
                coordinator.with_engine(|e| e.forget(&id));
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not propose decision; will retry"),
    }
}
