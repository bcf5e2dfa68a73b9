//! Invariant 1 — no commit without evidence.
//!
//! Every commit the leader decides that is not `forced` must have its
//! readiness policy met at that moment by proxies that (a) are live
//! registered members by the reference lease model and (b) really had —
//! in the very run of the proxy that registration belongs to — every
//! backend the new spec sends traffic to warm, at the backend's
//! *reference* endpoint generation or newer (the world's own record of the
//! last change to its Service or slice, so a generation that went down
//! after a slice deletion cannot pass), recently enough to be current
//! evidence (within one lease TTL plus the longest message delay). A
//! backend whose Service is not in the store can be ready nowhere. All of
//! it comes from the simulation's own records, never from the engine's
//! bookkeeping. A forced commit must be of a transition whose on-timeout
//! action is `force` (when it may time out is invariant 10's business).

use super::{Check, Violation};
use crate::lease_model::LeaseModel;
use crate::proxy::SimProxy;
use crate::truth::Truth;
use crate::world::World;
use std::collections::{BTreeMap, BTreeSet};
use switchyard_coordinator::cutover::Decision;
use switchyard_coordinator::state::ReplicatedState;
use switchyard_proto::model::{BackendKey, OnTimeout, ReadinessPolicy};

const NAME: &str = "invariant 1: no commit without evidence";

/// What the checker needs to judge one leader decision.
pub struct DecideContext<'a> {
    /// The leader's replicated state.
    pub state: &'a ReplicatedState,
    /// Reference leases of this leader (its clock).
    pub leases: &'a LeaseModel,
    /// Ground truth (simulation time).
    pub truth: &'a Truth,
    /// The proxies (for what they have warm right now, in messages).
    pub proxies: &'a [SimProxy],
    /// Which run of which proxy each registration was for.
    pub registrations: &'a BTreeMap<u64, (usize, u32)>,
    /// The backends and their reference endpoint generations.
    pub world: &'a World,
    /// Now, by the leader's clock.
    pub leader_now_ms: u64,
    /// Now, in simulation time.
    pub sim_now_ms: u64,
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
                ..
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
                if pending.settings.on_timeout != OnTimeout::Force {
                    return Err(fail(format!(
                        "forced without on-timeout force ({:?})",
                        pending.settings.on_timeout
                    )));
                }
                continue;
            }
            self.commits += 1;
            let needed: BTreeMap<BackendKey, Option<u64>> = pending
                .target
                .spec
                .traffic_backends()
                .into_iter()
                .map(|b| {
                    let g = cx.world.reference_generation(&b);
                    (b, g)
                })
                .collect();
            if let Some((missing, _)) = needed.iter().find(|(_, g)| g.is_none()) {
                return Err(fail(format!(
                    "it needs {missing}, whose Service is not in the store; engine said: {summary}"
                )));
            }
            let live = cx.leases.live(cx.state, cx.leader_now_ms, cx.ttl_ms);
            let since = cx.sim_now_ms.saturating_sub(cx.window_ms);
            // The run of the proxy each live registration belongs to.
            let run = |id: &String| {
                cx.state
                    .proxies
                    .get(id)
                    .and_then(|p| cx.registrations.get(&p.registered_index))
                    .copied()
            };
            let ready: BTreeSet<&String> = live
                .keys()
                .filter(|id| {
                    run(id).is_some_and(|(n, incarnation)| {
                        needed.iter().all(|(b, g)| {
                            g.is_some_and(|g| cx.truth.warm_since(n, incarnation, b, g, since))
                        })
                    })
                })
                .collect();
            if !policy_met(&pending.settings.policy, &live, &ready) {
                let facts: Vec<String> = live
                    .keys()
                    .flat_map(|id| {
                        needed.iter().map(move |(b, g)| {
                            let (n, incarnation) = run(id).unwrap_or((proxy_number(id), u32::MAX));
                            let last = cx.truth.last_warm(n, incarnation, b, g.unwrap_or(0));
                            let now = cx
                                .proxies
                                .get(n)
                                .map(|p| (p.up, p.incarnation, p.readiness(b, cx.world, cx.sim_now_ms)));
                            format!("{id} (run {incarnation}):{b}@{g:?} last warm {last:?}, now (up, run, readiness) {now:?}")
                        })
                    })
                    .collect();
                return Err(fail(format!(
                    "policy {} not met by ground truth at t={} (window since {since}): live {:?}, really ready {:?}; facts [{}]; engine said: {summary}",
                    pending.settings.policy,
                    cx.sim_now_ms,
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
