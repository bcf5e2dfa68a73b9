//! Invariant 1 — no commit without evidence.
//!
//! Every commit the leader decides that is not `forced` must have its
//! readiness policy met at that moment by proxies that (a) are live
//! registered members by the reference lease model and (b) really had
//! every backend the new spec sends traffic to warm, at the backend's
//! current endpoint generation or newer, recently enough to be current
//! evidence (within one lease TTL plus the longest message delay). Both
//! come from the simulation's own records, never from the engine's
//! bookkeeping. A forced commit must come after the deadline of a
//! transition whose on-timeout action is `force`.

use super::{Check, Violation};
use crate::sim::lease_model::LeaseModel;
use crate::sim::proxy::SimProxy;
use crate::sim::truth::Truth;
use crate::sim::world::World;
use std::collections::{BTreeMap, BTreeSet};
use switchyard_coordinator::cutover::Decision;
use switchyard_coordinator::state::ReplicatedState;
use switchyard_proto::model::{BackendKey, ConfigSnapshot, OnTimeout, ReadinessPolicy};

const NAME: &str = "invariant 1: no commit without evidence";

/// What the checker needs to judge one leader decision.
pub struct DecideContext<'a> {
    /// The leader's replicated state.
    pub state: &'a ReplicatedState,
    /// Its configuration snapshot (endpoint generations).
    pub snapshot: &'a ConfigSnapshot,
    /// Reference leases of this leader.
    pub leases: &'a LeaseModel,
    /// Ground truth.
    pub truth: &'a Truth,
    /// The proxies (for what they have warm right now, in messages).
    pub proxies: &'a [SimProxy],
    /// The backends.
    pub world: &'a World,
    /// Now.
    pub now_ms: u64,
    /// Lease TTL.
    pub ttl_ms: u64,
    /// How old a fact may be and still be current.
    pub window_ms: u64,
}

/// Counts what it checked.
#[derive(Debug, Default)]
pub struct NoCommitWithoutEvidence {
    /// Commits decided on evidence and checked.
    pub commits: u64,
    /// Forced commits checked.
    pub forced: u64,
}

impl NoCommitWithoutEvidence {
    /// Checks every commit in `decisions`.
    pub fn on_decide(&mut self, cx: &DecideContext<'_>, decisions: &[Decision]) -> Check {
        for decision in decisions {
            let Decision::Commit {
                route,
                generation,
                forced,
                summary,
            } = decision
            else {
                continue;
            };
            let fail = |detail: String| Violation {
                invariant: NAME,
                detail: format!("commit of {route} generation {generation}: {detail}"),
            };
            let pending = cx
                .state
                .routes
                .get(route)
                .and_then(|r| r.pending.as_ref())
                .filter(|p| p.target.generation == *generation)
                .ok_or_else(|| fail("that generation is not pending".into()))?;
            if *forced {
                self.forced += 1;
                if cx.now_ms < pending.deadline_ms
                    || pending.settings.on_timeout != OnTimeout::Force
                {
                    return Err(fail(format!(
                        "forced at {} before its deadline {} or without on-timeout force ({:?})",
                        cx.now_ms, pending.deadline_ms, pending.settings.on_timeout
                    )));
                }
                continue;
            }
            self.commits += 1;
            let needed: BTreeMap<BackendKey, u64> = pending
                .target
                .spec
                .traffic_backends()
                .into_iter()
                .filter_map(|b| cx.snapshot.endpoint_generation(&b).map(|g| (b, g)))
                .collect();
            let live = cx.leases.live(cx.state, cx.now_ms, cx.ttl_ms);
            let since = cx.now_ms.saturating_sub(cx.window_ms);
            let ready: BTreeSet<&String> = live
                .keys()
                .filter(|id| {
                    let n = proxy_number(id);
                    needed
                        .iter()
                        .all(|(b, g)| cx.truth.warm_since(n, b, *g, since))
                })
                .collect();
            if !policy_met(&pending.settings.policy, &live, &ready) {
                let facts: Vec<String> = live
                    .keys()
                    .flat_map(|id| {
                        needed.iter().map(move |(b, g)| {
                            let n = proxy_number(id);
                            let last = cx.truth.last_warm(n, b, *g);
                            let now = cx
                                .proxies
                                .get(n)
                                .map(|p| (p.up, p.readiness(b, cx.world, cx.now_ms)));
                            format!("{id}:{b}@{g} last warm {last:?}, now (up, readiness) {now:?}")
                        })
                    })
                    .collect();
                return Err(fail(format!(
                    "policy {} not met by ground truth at t={} (window since {since}): live {:?}, really ready {:?}; facts [{}]; engine said: {summary}",
                    pending.settings.policy,
                    cx.now_ms,
                    live,
                    ready,
                    facts.join(", ")
                )));
            }
        }
        Ok(())
    }
}

/// The policy over `live` (id to zone) with `ready` of them ready; never
/// met with nobody live.
fn policy_met(
    policy: &ReadinessPolicy,
    live: &BTreeMap<String, String>,
    ready: &BTreeSet<&String>,
) -> bool {
    if live.is_empty() {
        return false;
    }
    if !policy.per_zone {
        return ready.len() >= policy.quorum.required(live.len());
    }
    let mut zones: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (id, zone) in live {
        let entry = zones.entry(zone).or_default();
        entry.1 += 1;
        if ready.contains(id) {
            entry.0 += 1;
        }
    }
    zones
        .values()
        .all(|(r, total)| *r >= policy.quorum.required(*total))
}

/// `p{n}` to `n`.
pub fn proxy_number(id: &str) -> usize {
    id.strip_prefix('p')
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX)
}
