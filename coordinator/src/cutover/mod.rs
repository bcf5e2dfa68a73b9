//! The cutover engine: the leader's soft state about the fleet (leases,
//! readiness evidence, applied generations) and the pure decision of what
//! to propose next.
//!
//! Owns: deciding *when* a pending transition commits, times out, or a proxy
//! expires. Does not own: proposing those decisions (the leader loop turns
//! each [`Decision`] into a Raft command), clocks (every call takes `now_ms`)
//! or any IO. Nothing here is replicated: a new leader starts it afresh with
//! [`CutoverEngine::new`], every lease renewed and no evidence, and proxies
//! resend their evidence when they reconnect.

mod evidence;
mod leases;
mod verdict;

#[cfg(test)]
mod tests;

pub use evidence::{BackendEvidence, required_backends};
pub use leases::Leases;
pub use verdict::{Verdict, evaluate};

use crate::state::ReplicatedState;
use std::collections::BTreeMap;
use switchyard_proto::model::{BackendKey, ObjectName, OnTimeout};

/// Timing knobs of the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineSettings {
    /// A proxy whose last heartbeat is older than this stops counting and is
    /// expired.
    pub lease_ttl_ms: u64,
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            lease_ttl_ms: 3_000,
        }
    }
}

/// What the leader should propose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The pending generation met its policy (or timed out with `force`).
    Commit {
        /// The route.
        route: ObjectName,
        /// The pending generation.
        generation: u64,
        /// True when forced by the on-timeout action.
        forced: bool,
        /// The evidence summary at the time, for logs.
        summary: String,
    },
    /// The pending generation timed out with `keep-old`.
    Abandon {
        /// The route.
        route: ObjectName,
        /// The pending generation.
        generation: u64,
        /// Why (shown in status).
        reason: String,
    },
    /// A proxy's lease expired.
    ExpireProxy {
        /// The proxy id.
        id: String,
    },
}

/// Test-only switches that break one decision rule on purpose, so the
/// seeded simulation (`chaos-tests`) can prove each of its invariant
/// checkers catches a broken engine. Compiled only with the
/// `fault-injection` feature; every switch is off by default, and off
/// means the engine behaves exactly as without the feature.
#[cfg(feature = "fault-injection")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineFaults {
    /// Commit every pending transition, evidence or not (breaks invariant 1).
    pub commit_without_evidence: bool,
    /// Commit nothing while any route's policy is unmet (breaks invariant 6).
    pub global_route_blocking: bool,
}

/// The leader's view of the fleet.
#[derive(Debug, Clone)]
pub struct CutoverEngine {
    settings: EngineSettings,
    #[cfg(feature = "fault-injection")]
    faults: EngineFaults,
    /// When this coordinator became leader.
    leader_since_ms: u64,
    leases: Leases,
    /// Each proxy's latest report: when it arrived, and what it said. A
    /// report replaces the previous one whole (proxies send everything they
    /// keep warm each time), and one older than a lease TTL does not count.
    evidence: BTreeMap<String, (u64, BTreeMap<BackendKey, BackendEvidence>)>,
    applied: BTreeMap<String, BTreeMap<ObjectName, u64>>,
}

impl CutoverEngine {
    /// A fresh engine for a coordinator that just became leader at `now_ms`:
    /// every registered proxy gets a full lease (a failover never expires
    /// live proxies) and no evidence is known yet.
    pub fn new(settings: EngineSettings, state: &ReplicatedState, now_ms: u64) -> Self {
        let mut leases = Leases::default();
        for proxy in state.proxies.values() {
            leases.renew(&proxy.id, &proxy.zone, now_ms);
        }
        CutoverEngine {
            settings,
            #[cfg(feature = "fault-injection")]
            faults: EngineFaults::default(),
            leader_since_ms: now_ms,
            leases,
            evidence: BTreeMap::new(),
            applied: BTreeMap::new(),
        }
    }

    /// Brings leases in line with the replicated registry: a proxy that
    /// registered since gets a fresh lease (so one that never heartbeats
    /// still expires), one that left loses its lease and evidence.
    pub fn sync(&mut self, state: &ReplicatedState, now_ms: u64) {
        for proxy in state.proxies.values() {
            if !self.leases.knows(&proxy.id) {
                self.leases.renew(&proxy.id, &proxy.zone, now_ms);
            }
        }
        let gone: Vec<String> = self
            .leases
            .ids()
            .filter(|id| !state.proxies.contains_key(*id))
            .cloned()
            .collect();
        for id in gone {
            self.forget(&id);
        }
    }

    /// Test-only: breaks decision rules on purpose (see [`EngineFaults`]).
    #[cfg(feature = "fault-injection")]
    pub fn set_faults(&mut self, faults: EngineFaults) {
        self.faults = faults;
    }

    /// Lease length.
    pub fn settings(&self) -> EngineSettings {
        self.settings
    }

    /// A heartbeat from `proxy`. Returns false when the proxy is not
    /// registered in `state` (it must register again).
    pub fn heartbeat(
        &mut self,
        state: &ReplicatedState,
        proxy: &str,
        applied: BTreeMap<ObjectName, u64>,
        now_ms: u64,
    ) -> bool {
        let Some(record) = state.proxies.get(proxy) else {
            return false;
        };
        self.leases.renew(proxy, &record.zone, now_ms);
        self.applied.insert(proxy.to_string(), applied);
        true
    }

    /// Readiness evidence from `proxy`: everything it keeps warm now. It
    /// replaces the proxy's previous report, so a backend the proxy stopped
    /// warming stops counting at once. Returns false (and keeps nothing)
    /// when the proxy is not registered.
    pub fn report(
        &mut self,
        state: &ReplicatedState,
        proxy: &str,
        backends: Vec<(BackendKey, BackendEvidence)>,
        now_ms: u64,
    ) -> bool {
        let Some(record) = state.proxies.get(proxy) else {
            return false;
        };
        self.leases.renew(proxy, &record.zone, now_ms);
        self.evidence
            .insert(proxy.to_string(), (now_ms, backends.into_iter().collect()));
        true
    }

    /// Forgets a proxy (it deregistered or was expired).
    pub fn forget(&mut self, proxy: &str) {
        self.leases.remove(proxy);
        self.evidence.remove(proxy);
        self.applied.remove(proxy);
    }

    /// Ids and zones of proxies that are registered and whose lease is
    /// current at `now_ms`.
    pub fn live_proxies(&self, state: &ReplicatedState, now_ms: u64) -> BTreeMap<String, String> {
        state
            .proxies
            .values()
            .filter(|p| {
                self.leases
                    .is_live(&p.id, now_ms, self.settings.lease_ttl_ms)
            })
            .map(|p| (p.id.clone(), p.zone.clone()))
            .collect()
    }

    /// Whether the new leader's grace period is still running: until every
    /// registered proxy has had a lease TTL to reconnect, or all of them
    /// have, no readiness is judged.
    fn in_grace(&self, state: &ReplicatedState, now_ms: u64) -> bool {
        let waited = now_ms.saturating_sub(self.leader_since_ms) >= self.settings.lease_ttl_ms;
        let all_back = state
            .proxies
            .keys()
            .all(|id| self.leases.seen_since(id, self.leader_since_ms));
        !(waited || all_back)
    }

    /// The verdict on one route's pending transition, if it has one.
    pub fn verdict(
        &self,
        state: &ReplicatedState,
        route: &ObjectName,
        now_ms: u64,
    ) -> Option<Verdict> {
        let pending = state.routes.get(route)?.pending.as_ref()?;
        let snapshot_view = evidence::EndpointGenerations::of(state);
        let needed = required_backends(&pending.target.spec, &snapshot_view);
        let live = self.live_proxies(state, now_ms);
        let ttl = self.settings.lease_ttl_ms;
        // Evidence is current only if it arrived within one lease TTL.
        let current = |proxy: &str| {
            self.evidence
                .get(proxy)
                .filter(|(received_ms, _)| now_ms.saturating_sub(*received_ms) < ttl)
                .map(|(_, backends)| backends)
        };
        Some(evaluate(&pending.settings.policy, &live, &needed, current))
    }

    /// "n of m proxies at generation g" for a route's newest generation, and
    /// whether every live proxy is there.
    pub fn applied_summary(
        &self,
        state: &ReplicatedState,
        route: &ObjectName,
        now_ms: u64,
    ) -> Option<(String, bool)> {
        let record = state.routes.get(route)?;
        let generation = record.newest_generation();
        let live = self.live_proxies(state, now_ms);
        let at = live
            .keys()
            .filter(|p| {
                self.applied
                    .get(*p)
                    .and_then(|a| a.get(route))
                    .is_some_and(|g| *g >= generation)
            })
            .count();
        let ready = record.pending.is_none() && !live.is_empty() && at == live.len();
        Some((
            format!("{at} of {} proxies at generation {generation}", live.len()),
            ready,
        ))
    }

    /// Everything the leader should propose now. Pure: the same inputs give
    /// the same decisions.
    pub fn decide(&self, state: &ReplicatedState, now_ms: u64) -> Vec<Decision> {
        let mut decisions = Vec::new();
        for proxy in state.proxies.values() {
            if self
                .leases
                .is_expired(&proxy.id, now_ms, self.settings.lease_ttl_ms)
            {
                decisions.push(Decision::ExpireProxy {
                    id: proxy.id.clone(),
                });
            }
        }
        let grace = self.in_grace(state, now_ms);
        // Test-only fault: one stuck route blocks every route's commit.
        #[cfg(feature = "fault-injection")]
        let blocked = self.faults.global_route_blocking
            && state
                .routes
                .keys()
                .any(|r| self.verdict(state, r, now_ms).is_some_and(|v| !v.met));
        for (name, record) in &state.routes {
            let Some(pending) = &record.pending else {
                continue;
            };
            let Some(verdict) = self.verdict(state, name, now_ms) else {
                continue;
            };
            let generation = pending.target.generation;
            let met = verdict.met;
            // Test-only faults: commit without evidence / block globally.
            #[cfg(feature = "fault-injection")]
            let met = (met || self.faults.commit_without_evidence) && !blocked;
            if met && !grace {
                decisions.push(Decision::Commit {
                    route: name.clone(),
                    generation,
                    forced: false,
                    summary: verdict.summary,
                });
            } else if now_ms >= pending.deadline_ms {
                let waited = pending.deadline_ms.saturating_sub(pending.created_ms);
                match pending.settings.on_timeout {
                    OnTimeout::Force => decisions.push(Decision::Commit {
                        route: name.clone(),
                        generation,
                        forced: true,
                        summary: verdict.summary,
                    }),
                    OnTimeout::KeepOld => decisions.push(Decision::Abandon {
                        route: name.clone(),
                        generation,
                        reason: format!(
                            "timed out after {waited}ms waiting for policy {}: {}",
                            pending.settings.policy, verdict.summary
                        ),
                    }),
                }
            }
        }
        decisions
    }
}
