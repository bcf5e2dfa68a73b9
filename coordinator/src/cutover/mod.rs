//! The cutover engine: the leader's soft state about the fleet (leases,
//! readiness evidence, applied generations, when it first saw each pending
//! transition) and the pure decision of what to propose next.
//!
//! Owns: deciding *when* a pending transition commits, times out, or a proxy
//! expires, and what each decision rests on ([`Decision::command`] turns it
//! into the fenced Raft command; the leader loop and the simulation both use
//! it). Does not own: proposing (the leader loop), clocks (every call takes
//! `now_ms`) or any IO. Nothing here is replicated: a new leader starts it
//! afresh with [`CutoverEngine::new`], every lease renewed and no evidence,
//! and proxies resend their evidence when they reconnect.
//!
//! # Time
//!
//! `now_ms` is the leader's *monotonic* clock (milliseconds since some
//! point of its own), never a wall clock, and no timestamp from another
//! machine enters a decision (design invariant 10): leases and evidence age
//! are measured from when this engine heard from a proxy, and a
//! transition's timeout from when this engine first saw it. A new leader
//! therefore restarts every timeout: it may wait longer than the user
//! asked, never shorter. While no proxy is live the timeout does not run at
//! all — there is nobody to judge readiness, and abandoning the change
//! would lose it (a bootstrap, or a full restart of the proxy fleet).

mod decision;
mod evidence;
#[cfg(feature = "fault-injection")]
mod faults;
mod leases;
mod sockets;
mod verdict;

#[cfg(test)]
mod tests;

pub use decision::Decision;
pub use evidence::BackendEvidence;
#[cfg(feature = "fault-injection")]
pub use faults::EngineFaults;
pub use leases::Leases;
pub use sockets::FleetSockets;
pub use verdict::{Verdict, evaluate};

use crate::state::{DecisionBasis, ReplicatedState};
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

/// One proxy's latest readiness report.
#[derive(Debug, Clone)]
struct Report {
    /// When it arrived (engine clock).
    received_ms: u64,
    /// Everything the proxy keeps warm, as it said.
    backends: BTreeMap<BackendKey, BackendEvidence>,
}

/// The leader's view of the fleet.
#[derive(Debug, Clone)]
pub struct CutoverEngine {
    settings: EngineSettings,
    #[cfg(feature = "fault-injection")]
    faults: EngineFaults,
    /// The term of the leadership this engine serves; every decision
    /// carries it.
    term: u64,
    /// When this coordinator became leader.
    leader_since_ms: u64,
    leases: Leases,
    /// The registration (log index) each known proxy's soft state belongs
    /// to. When a proxy registers again, what it said before is dropped.
    registrations: BTreeMap<String, u64>,
    /// Each proxy's latest report. A report replaces the previous one whole
    /// (proxies send everything they keep warm each time), and one older
    /// than a lease TTL does not count.
    evidence: BTreeMap<String, Report>,
    applied: BTreeMap<String, BTreeMap<ObjectName, u64>>,
    /// Each proxy's listener sockets, from its latest readiness report.
    sockets: FleetSockets,
    /// Per pending route: the generation and when this engine first saw it
    /// pending with at least one live proxy (its timeout runs from there).
    first_seen: BTreeMap<ObjectName, (u64, u64)>,
}

impl CutoverEngine {
    /// A fresh engine for a coordinator that just became leader of `term`
    /// at `now_ms`: every registered proxy gets a full lease (a failover
    /// never expires live proxies) and no evidence is known yet.
    pub fn new(settings: EngineSettings, state: &ReplicatedState, now_ms: u64, term: u64) -> Self {
        let mut engine = CutoverEngine {
            settings,
            #[cfg(feature = "fault-injection")]
            faults: EngineFaults::default(),
            term,
            leader_since_ms: now_ms,
            leases: Leases::default(),
            registrations: BTreeMap::new(),
            evidence: BTreeMap::new(),
            applied: BTreeMap::new(),
            sockets: FleetSockets::default(),
            first_seen: BTreeMap::new(),
        };
        engine.sync(state, now_ms);
        engine
    }

    /// The term this engine decides for.
    pub fn term(&self) -> u64 {
        self.term
    }

    /// Brings the soft state in line with the replicated registry and
    /// routes: a proxy that registered (again) since gets a fresh lease and
    /// loses whatever its earlier registration said; one that left loses
    /// everything; a pending transition seen for the first time starts its
    /// timeout (only while some proxy is live).
    pub fn sync(&mut self, state: &ReplicatedState, now_ms: u64) {
        for proxy in state.proxies.values() {
            self.adopt_registration(&proxy.id, &proxy.zone, proxy.registered_index, now_ms);
        }
        let gone: Vec<String> = self
            .registrations
            .keys()
            .filter(|id| !state.proxies.contains_key(*id))
            .cloned()
            .collect();
        for id in gone {
            self.forget(&id);
        }
        let nobody_live = self.live_proxies(state, now_ms).is_empty();
        self.first_seen.retain(|route, (generation, _)| {
            state
                .routes
                .get(route)
                .and_then(|r| r.pending.as_ref())
                .is_some_and(|p| p.target.generation == *generation)
        });
        for (name, record) in &state.routes {
            let Some(pending) = &record.pending else {
                continue;
            };
            let entry = self
                .first_seen
                .entry(name.clone())
                .or_insert((pending.target.generation, now_ms));
            if nobody_live {
                // The timeout does not run while nobody can judge.
                entry.1 = now_ms;
            }
        }
    }

    /// Makes `registration` the one this engine keeps soft state for: if
    /// it is new, whatever an earlier registration said is dropped and the
    /// proxy gets a fresh lease.
    fn adopt_registration(&mut self, proxy: &str, zone: &str, registration: u64, now_ms: u64) {
        if self.registrations.get(proxy) != Some(&registration) {
            // Test-only fault: keep what the earlier registration said.
            #[cfg(feature = "fault-injection")]
            let keep = self.faults.evidence_across_registrations;
            #[cfg(not(feature = "fault-injection"))]
            let keep = false;
            if !keep {
                self.forget(proxy);
            }
            self.registrations.insert(proxy.to_string(), registration);
            self.leases.renew(proxy, zone, now_ms);
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

    /// Checks that `registration` is the proxy's current registration in
    /// `state` and, if so, adopts it and renews the lease.
    fn heard(
        &mut self,
        state: &ReplicatedState,
        proxy: &str,
        registration: u64,
        now_ms: u64,
    ) -> bool {
        #[cfg(feature = "fault-injection")]
        let registration = match state.proxies.get(proxy) {
            Some(p) if self.faults.evidence_across_registrations => p.registered_index,
            _ => registration,
        };
        let Some(record) = state
            .proxies
            .get(proxy)
            .filter(|p| p.registered_index == registration)
        else {
            return false;
        };
        self.adopt_registration(proxy, &record.zone, registration, now_ms);
        self.leases.renew(proxy, &record.zone, now_ms);
        true
    }

    /// A heartbeat from `proxy`'s `registration`. Returns false when that
    /// is not its current registration in `state` (it must register again;
    /// a message from an earlier run under the same id is ignored).
    pub fn heartbeat(
        &mut self,
        state: &ReplicatedState,
        proxy: &str,
        registration: u64,
        applied: BTreeMap<ObjectName, u64>,
        now_ms: u64,
    ) -> bool {
        if !self.heard(state, proxy, registration, now_ms) {
            return false;
        }
        self.applied.insert(proxy.to_string(), applied);
        true
    }

    /// Readiness evidence from `proxy`'s `registration`: everything it keeps
    /// warm now. It replaces the proxy's previous report, so a backend the
    /// proxy stopped warming stops counting at once. Returns false (and
    /// keeps nothing) when that is not the proxy's current registration.
    pub fn report(
        &mut self,
        state: &ReplicatedState,
        proxy: &str,
        registration: u64,
        backends: Vec<(BackendKey, BackendEvidence)>,
        now_ms: u64,
    ) -> bool {
        if !self.heard(state, proxy, registration, now_ms) {
            return false;
        }
        self.evidence.insert(
            proxy.to_string(),
            Report {
                received_ms: now_ms,
                backends: backends.into_iter().collect(),
            },
        );
        true
    }

    /// Forgets a proxy (it deregistered, was expired, or registered again).
    pub fn forget(&mut self, proxy: &str) {
        self.leases.remove(proxy);
        self.registrations.remove(proxy);
        self.evidence.remove(proxy);
        self.applied.remove(proxy);
        self.sockets.forget(proxy);
    }

    /// Ids and zones of proxies that are registered and whose lease is
    /// current at `now_ms`.
    pub fn live_proxies(&self, state: &ReplicatedState, now_ms: u64) -> BTreeMap<String, String> {
        state
            .proxies
            .values()
            .filter(|p| {
                self.registrations.get(&p.id) == Some(&p.registered_index)
                    && self
                        .leases
                        .is_live(&p.id, now_ms, self.settings.lease_ttl_ms)
            })
            .map(|p| (p.id.clone(), p.zone.clone()))
            .collect()
    }

    /// Whether this engine may judge: the state it is handed must be its
    /// own term's, so everything committed before the term (which comes
    /// before the new leader's blank entry) is applied.
    pub fn may_judge(&self, state: &ReplicatedState) -> bool {
        state.last_term == self.term
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
        let needed = self.required_backends(state, &pending.target.spec);
        let problems: Vec<String> = needed
            .iter()
            .filter(|(_, generation)| generation.is_none())
            .filter_map(|(backend, _)| state.backend_problem(backend))
            .collect();
        let live = self.live_proxies(state, now_ms);
        let ttl = self.settings.lease_ttl_ms;
        // Evidence is current only if it arrived within one lease TTL.
        let current = |proxy: &str| {
            self.evidence
                .get(proxy)
                .filter(|r| now_ms.saturating_sub(r.received_ms) < ttl)
                .map(|r| &r.backends)
        };
        Some(evaluate(
            &pending.settings.policy,
            &live,
            &needed,
            &problems,
            current,
        ))
    }

    /// What `spec` needs evidence for (the state's rule; a test-only fault
    /// can bring back the old one).
    fn required_backends(
        &self,
        state: &ReplicatedState,
        spec: &switchyard_proto::model::HttpRoute,
    ) -> BTreeMap<BackendKey, Option<u64>> {
        #[allow(unused_mut)]
        let mut needed = state.required_backends(spec);
        #[cfg(feature = "fault-injection")]
        if self.faults.missing_backends_ready {
            needed.retain(|_, generation| generation.is_some());
        }
        needed
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

    /// When this engine first saw `route`'s pending `generation` (its
    /// timeout runs from there), by its own clock.
    pub fn first_seen_ms(&self, route: &ObjectName, generation: u64) -> Option<u64> {
        self.first_seen
            .get(route)
            .filter(|(g, _)| *g == generation)
            .map(|(_, since)| *since)
    }

    /// How long `route`'s pending `generation` has waited, by this
    /// engine's clock (0 when it has not seen it yet).
    fn waited_ms(&self, route: &ObjectName, generation: u64, now_ms: u64) -> u64 {
        #[cfg(feature = "fault-injection")]
        if self.faults.timeout_from_leader_start {
            return now_ms.saturating_sub(self.leader_since_ms);
        }
        self.first_seen_ms(route, generation)
            .map_or(0, |since| now_ms.saturating_sub(since))
    }

    /// Everything the leader should propose now. Pure: the same inputs give
    /// the same decisions. Nothing before [`CutoverEngine::may_judge`].
    pub fn decide(&self, state: &ReplicatedState, now_ms: u64) -> Vec<Decision> {
        let mut decisions = Vec::new();
        if !self.may_judge(state) {
            return decisions;
        }
        for proxy in state.proxies.values() {
            if self
                .leases
                .is_expired(&proxy.id, now_ms, self.settings.lease_ttl_ms)
            {
                decisions.push(Decision::ExpireProxy {
                    id: proxy.id.clone(),
                    registration: proxy.registered_index,
                    term: self.term,
                });
            }
        }
        let grace = self.in_grace(state, now_ms);
        let anybody_live = !self.live_proxies(state, now_ms).is_empty();
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
            let timeout = pending.settings.timeout_ms;
            let timed_out = anybody_live && self.waited_ms(name, generation, now_ms) >= timeout;
            if met && !grace {
                let endpoints = self
                    .required_backends(state, &pending.target.spec)
                    .into_iter()
                    .filter_map(|(backend, g)| g.map(|g| (backend, g)))
                    .collect();
                decisions.push(Decision::Commit {
                    route: name.clone(),
                    generation,
                    forced: false,
                    summary: verdict.summary,
                    basis: DecisionBasis {
                        term: self.term,
                        endpoints,
                    },
                });
            } else if timed_out {
                match pending.settings.on_timeout {
                    OnTimeout::Force => decisions.push(Decision::Commit {
                        route: name.clone(),
                        generation,
                        forced: true,
                        summary: verdict.summary,
                        basis: DecisionBasis {
                            term: self.term,
                            endpoints: Vec::new(),
                        },
                    }),
                    OnTimeout::KeepOld => decisions.push(Decision::Abandon {
                        route: name.clone(),
                        generation,
                        reason: format!(
                            "timed out after {timeout}ms waiting for policy {}: {}",
                            pending.settings.policy, verdict.summary
                        ),
                        term: self.term,
                    }),
                }
            }
        }
        decisions
    }
}
