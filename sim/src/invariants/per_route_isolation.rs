//! Invariant 6 — per-route isolation: a stuck transition never delays
//! another route.
//!
//! Checked at every leader decision, two ways:
//!
//! - counterfactual: for each route B with a pending transition, what the
//!   engine decides about B must be exactly what it decides about B when
//!   every other route's pending transition is removed — nothing about
//!   route A can change B's outcome;
//! - as stated: once the new leader's grace period is over by time (a lease
//!   TTL after it took over), a route whose policy is met (by the engine's
//!   own per-route verdict) is committed by this very decision.

use super::{Check, Violation};
use switchyard_coordinator::cutover::{CutoverEngine, Decision};
use switchyard_coordinator::state::ReplicatedState;
use switchyard_proto::model::ObjectName;

const NAME: &str = "invariant 6: per-route isolation";

/// Counts what it checked.
#[derive(Debug, Default)]
pub struct PerRouteIsolation {
    /// Route decisions compared with their counterfactual.
    pub compared: u64,
}

impl PerRouteIsolation {
    /// Checks one decision of the leader that took over at `since_ms`.
    pub fn on_decide(
        &mut self,
        engine: &CutoverEngine,
        state: &ReplicatedState,
        now_ms: u64,
        since_ms: u64,
        decisions: &[Decision],
    ) -> Check {
        let pending: Vec<&ObjectName> = state
            .routes
            .iter()
            .filter(|(_, r)| r.pending.is_some())
            .map(|(name, _)| name)
            .collect();
        for route in pending {
            let mine = about(decisions, route);
            if state
                .routes
                .values()
                .filter(|r| r.pending.is_some())
                .count()
                > 1
            {
                let mut alone = state.clone();
                let others: Vec<_> = alone
                    .routes
                    .keys()
                    .filter(|n| *n != route)
                    .cloned()
                    .collect();
                for name in others {
                    if let Some(record) = alone.routes.get_mut(&name) {
                        std::sync::Arc::make_mut(record).pending = None;
                    }
                }
                let theirs = about(&engine.decide(&alone, now_ms), route);
                self.compared += 1;
                if mine != theirs {
                    return Err(Violation {
                        invariant: NAME,
                        detail: format!(
                            "{route}: decided {mine:?} with the other routes' transitions present, {theirs:?} without them"
                        ),
                    });
                }
            }
            let settled = now_ms.saturating_sub(since_ms) >= engine.settings().lease_ttl_ms;
            let met = engine.verdict(state, route, now_ms).is_some_and(|v| v.met);
            let committed = mine
                .iter()
                .any(|d| matches!(d, Decision::Commit { forced: false, .. }));
            if settled && met && !committed {
                return Err(Violation {
                    invariant: NAME,
                    detail: format!(
                        "{route}: policy met at t={now_ms} but not committed (decided {mine:?}; pending elsewhere: {:?})",
                        state
                            .routes
                            .iter()
                            .filter(|(n, r)| *n != route && r.pending.is_some())
                            .map(|(n, _)| n.to_string())
                            .collect::<Vec<_>>()
                    ),
                });
            }
        }
        Ok(())
    }
}

/// The decisions about `route`.
fn about(decisions: &[Decision], route: &ObjectName) -> Vec<Decision> {
    decisions
        .iter()
        .filter(|d| match d {
            Decision::Commit { route: r, .. } | Decision::Abandon { route: r, .. } => r == route,
            Decision::ExpireProxy { .. } => false,
        })
        .cloned()
        .collect()
}
