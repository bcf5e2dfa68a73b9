//! Invariant 10 — one clock per decision.
//!
//! Every time-based decision must rest on the deciding leader's own clock
//! alone (every machine's clock in the simulation starts at another
//! moment, so a reading taken on one machine means nothing on another):
//!
//! - a timeout (abandon, or forced commit) only once the transition has
//!   been pending for its whole timeout *as this leader observed it*, on
//!   its clock, while some proxy was live (the clock restarts while none
//!   is, and with every new leader: it may wait longer, never shorter);
//! - a lease expiry only once this leader has not heard from that
//!   registration for a whole TTL on its clock.
//!
//! The observations are the checker's own, made where the leader loop
//! looks (its start and each decision pass), against the reference lease
//! model.

use super::{Check, Violation};
use crate::lease_model::LeaseModel;
use std::collections::BTreeMap;
use switchyard_coordinator::cutover::Decision;
use switchyard_coordinator::state::ReplicatedState;
use switchyard_proto::model::ObjectName;

const NAME: &str = "invariant 10: one clock per decision";

/// What the current leader has observed, on its clock.
#[derive(Debug, Default)]
pub struct OneClockPerDecision {
    term: u64,
    /// Pending (route, generation) to since when it has been observed
    /// pending with a proxy live.
    pending_since: BTreeMap<(ObjectName, u64), u64>,
    /// Timeouts and expiries checked.
    pub checked: u64,
}

impl OneClockPerDecision {
    /// A new leader of `term` took office at `now_ms` (its clock).
    pub fn new_leader(
        &mut self,
        term: u64,
        state: &ReplicatedState,
        leases: &LeaseModel,
        now_ms: u64,
        ttl_ms: u64,
    ) {
        self.term = term;
        self.pending_since.clear();
        self.observe(term, state, leases, now_ms, ttl_ms);
    }

    /// The leader of `term` looks at `state` at `now_ms`.
    pub fn observe(
        &mut self,
        term: u64,
        state: &ReplicatedState,
        leases: &LeaseModel,
        now_ms: u64,
        ttl_ms: u64,
    ) {
        if term != self.term {
            return;
        }
        let nobody_live = leases.live(state, now_ms, ttl_ms).is_empty();
        let pending: Vec<(ObjectName, u64)> = state
            .routes
            .iter()
            .filter_map(|(name, r)| {
                r.pending
                    .as_ref()
                    .map(|p| (name.clone(), p.target.generation))
            })
            .collect();
        self.pending_since.retain(|key, _| pending.contains(key));
        for key in pending {
            let since = self.pending_since.entry(key).or_insert(now_ms);
            if nobody_live {
                *since = now_ms;
            }
        }
    }

    /// Checks the time-based decisions of the leader of `term` at `now_ms`.
    pub fn on_decide(
        &mut self,
        term: u64,
        state: &ReplicatedState,
        leases: &LeaseModel,
        now_ms: u64,
        ttl_ms: u64,
        decisions: &[Decision],
    ) -> Check {
        let fail = |detail: String| Violation {
            invariant: NAME,
            detail: format!("leader of term {term} at its t={now_ms}: {detail}"),
        };
        for decision in decisions {
            let timed_out = match decision {
                Decision::Commit {
                    route,
                    generation,
                    forced: true,
                    ..
                }
                | Decision::Abandon {
                    route, generation, ..
                } => Some((route, *generation)),
                _ => None,
            };
            if let Some((route, generation)) = timed_out {
                self.checked += 1;
                let timeout = state
                    .routes
                    .get(route)
                    .and_then(|r| r.pending.as_ref())
                    .filter(|p| p.target.generation == generation)
                    .map(|p| p.settings.timeout_ms)
                    .ok_or_else(|| {
                        fail(format!(
                            "timed out {route} generation {generation}, which is not pending"
                        ))
                    })?;
                let since = self
                    .pending_since
                    .get(&(route.clone(), generation))
                    .copied()
                    .ok_or_else(|| {
                        fail(format!(
                            "timed out {route} generation {generation} before observing it"
                        ))
                    })?;
                let waited = now_ms.saturating_sub(since);
                if waited < timeout {
                    return Err(fail(format!(
                        "timed out {route} generation {generation} after {waited}ms of its {timeout}ms (observed pending since {since}): {decision:?}"
                    )));
                }
            }
            if let Decision::ExpireProxy { id, .. } = decision {
                self.checked += 1;
                let heard = leases.last_heard(id);
                if heard.is_some_and(|t| now_ms.saturating_sub(t) < ttl_ms) {
                    return Err(fail(format!(
                        "expired {id}, last heard at {heard:?}, within one {ttl_ms}ms lease"
                    )));
                }
            }
        }
        Ok(())
    }
}
