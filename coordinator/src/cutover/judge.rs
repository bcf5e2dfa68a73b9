//! The judgement of one pass: verdicts on pending transitions and the
//! decisions they lead to, with the fleet's side (who is live, whose
//! evidence is current, which proxies are ready for each backend) worked
//! out once per pass rather than once per route.
//!
//! Owns: [`CutoverEngine::judge`] / [`CutoverEngine::decide`] (pure: same
//! inputs, same decisions), [`CutoverEngine::verdict`], the new leader's
//! grace, and each transition's wait. Does not own: when a pass runs
//! (`super::pass`) or the soft state it reads (`super`).

use super::pass::Scope;
use super::verdict::{Tally, Zones};
use super::{BackendEvidence, CutoverEngine, Decision, Verdict};
use crate::state::{DecisionBasis, ReplicatedState};
use imbl::OrdMap;
use std::collections::BTreeMap;
use std::sync::Arc;
use switchyard_proto::model::{
    BackendKey, HttpRoute, ObjectName, OnTimeout, ReadinessPolicy, RouteRecord, Transition,
};

/// What one pass decided, and what it cost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Judgement {
    /// Everything to propose now.
    pub decisions: Vec<Decision>,
    /// Pending transitions whose verdict was evaluated (the pass's work;
    /// routes without a pending transition are never visited).
    pub evaluated: usize,
    /// Of those, the ones found waiting without reading any evidence: the
    /// policy could not be met even were every proxy with current
    /// evidence ready (some live proxy has none yet).
    pub bounded: usize,
    /// The earliest time (engine clock) a pending transition still
    /// waiting would time out, if some proxy stays live.
    pub next_timeout_ms: Option<u64>,
}

impl Judgement {
    /// Notes a transition still waiting that times out at `due_ms`.
    fn times_out_at(&mut self, due_ms: u64) {
        self.next_timeout_ms = Some(self.next_timeout_ms.map_or(due_ms, |t| t.min(due_ms)));
    }
}

/// Judges the routes applies leave pending ([`CutoverEngine::apply_judge`]).
/// Its view of the fleet is taken from the state before the applies: an
/// apply changes resources and routes, never the registered proxies, so
/// who is live and whose evidence is current are the same after it.
pub(super) struct ApplyJudge<'a> {
    engine: &'a CutoverEngine,
    view: FleetView<'a>,
}

impl ApplyJudge<'_> {
    /// The commits of `routes`, as a pass would make them: each route
    /// `state` (the state after an apply) has pending whose policy the
    /// fleet's current evidence already meets.
    pub(super) fn commits_ready<'r>(
        &mut self,
        state: &ReplicatedState,
        routes: impl IntoIterator<Item = &'r ObjectName>,
    ) -> Vec<Decision> {
        let mut commits = Vec::new();
        for name in routes {
            let Some(record) = state.routes.get(name) else {
                continue;
            };
            let Some(pending) = &record.pending else {
                continue;
            };
            let needed = self.engine.required_backends(state, &pending.target.spec);
            if self.engine.may_bound() && self.view.cannot_meet(&pending.settings.policy, &needed) {
                continue;
            }
            let (met, tally) = weigh(&mut self.view, pending, &needed);
            if met {
                let summary = summary(&self.view, state, pending, &needed, &tally);
                commits.push(self.engine.commit_on_evidence(
                    name,
                    pending.target.generation,
                    summary,
                    needed,
                ));
            }
        }
        commits
    }
}

/// How many of the distinct evidence sets seen last a proxy's set is
/// compared with before it counts as a new one.
const SETS_SEARCHED: usize = 8;

/// A live proxy with current evidence, as a pass sees it (by its zone:
/// a verdict counts ready proxies per zone).
#[derive(Debug, Clone, Copy)]
struct Holder<'a> {
    zone: &'a str,
    /// Its evidence set's index in [`FleetView::sets`].
    set: usize,
}

/// The fleet as one pass sees it.
struct FleetView<'a> {
    /// Live proxies, id to zone.
    live: BTreeMap<&'a str, &'a str>,
    /// `live` counted per zone.
    zones: Zones<'a>,
    /// Live proxies whose evidence is current and names some backend (the
    /// only ones that can be ready for a backend), in proxy order.
    current: Vec<Holder<'a>>,
    /// The distinct evidence sets of `current`. Proxies that took the same
    /// whole set share one (a fleet warmed on one configuration reports
    /// the same set, taken by digest), so a backend is looked up once per
    /// set rather than once per proxy.
    sets: Vec<&'a OrdMap<Arc<BackendKey>, BackendEvidence>>,
    /// Per backend asked about so far: its evidence in each of `sets`.
    by_backend: BTreeMap<BackendKey, Vec<Option<&'a BackendEvidence>>>,
    /// Per policy asked about so far: whether it could be met were every
    /// proxy in `current` ready (see [`FleetView::cannot_meet`]).
    could_meet: Vec<(ReadinessPolicy, bool)>,
}

impl<'a> FleetView<'a> {
    /// O(P).
    fn new(engine: &'a CutoverEngine, state: &'a ReplicatedState, now_ms: u64) -> Self {
        let live: BTreeMap<&str, &str> = engine.live_in(state, now_ms).collect();
        let ttl = engine.settings.lease_ttl_ms;
        // Evidence is current only if it arrived within one lease TTL;
        // an empty set (a proxy that has not warmed anything yet) makes
        // no proxy ready, and leaving it out lets the bound see that.
        // In proxy order, as `live` is.
        let mut sets: Vec<&OrdMap<Arc<BackendKey>, BackendEvidence>> = Vec::new();
        let mut current = Vec::new();
        for (proxy, zone) in &live {
            let Some(report) = engine.evidence.get(*proxy) else {
                continue;
            };
            let backends = report.backends.map();
            if now_ms.saturating_sub(report.received_ms) >= ttl || backends.is_empty() {
                continue;
            }
            // The last few sets seen: shared sets come in long runs, and
            // a bounded search keeps a fleet of distinct sets O(P).
            let set = sets
                .iter()
                .enumerate()
                .rev()
                .take(SETS_SEARCHED)
                .find(|(_, set)| set.ptr_eq(backends))
                .map(|(i, _)| i)
                .unwrap_or_else(|| {
                    sets.push(backends);
                    sets.len() - 1
                });
            current.push(Holder { zone, set });
        }
        FleetView {
            zones: Zones::of(&live),
            live,
            current,
            sets,
            by_backend: BTreeMap::new(),
            could_meet: Vec::new(),
        }
    }

    /// Whether a transition under `policy` needing `needed` is surely not
    /// met, without reading any evidence: it needs some backend (so only
    /// proxies with current evidence can be ready) and the policy fails
    /// even were all of those ready. While a fleet comes up — proxies
    /// registered, their first evidence not yet in — that is every
    /// pending route under a policy such as `all`, and a pass then costs
    /// O(1) per route instead of O(P). O(P) once per distinct policy in a
    /// pass.
    fn cannot_meet(
        &mut self,
        policy: &ReadinessPolicy,
        needed: &BTreeMap<BackendKey, Option<u64>>,
    ) -> bool {
        if needed.is_empty() {
            return false;
        }
        let could = match self.could_meet.iter().find(|(p, _)| p == policy) {
            Some((_, could)) => *could,
            None => {
                let could =
                    Tally::of_zones(self.current.iter().map(|h| h.zone)).meets(policy, &self.zones);
                self.could_meet.push((*policy, could));
                could
            }
        };
        !could
    }

    /// The live proxies ready for every backend in `needed` (each at its
    /// endpoint generation; one that does not exist is ready nowhere),
    /// tallied by zone. O(backends × proxies with current evidence), each
    /// backend looked up once per pass in each distinct evidence set.
    fn ready(&mut self, needed: &BTreeMap<BackendKey, Option<u64>>) -> Tally<'a> {
        let mut ready: Option<Vec<Holder<'a>>> = None;
        for (backend, generation) in needed {
            let Some(generation) = *generation else {
                return Tally::default();
            };
            if !self.by_backend.contains_key(backend) {
                let found = self.sets.iter().map(|set| set.get(backend)).collect();
                self.by_backend.insert(backend.clone(), found);
            }
            let found = &self.by_backend[backend];
            let ready_in = |set: usize| found[set].is_some_and(|e| e.ready_at(generation));
            match &mut ready {
                None => {
                    ready = Some(
                        self.current
                            .iter()
                            .filter(|h| ready_in(h.set))
                            .copied()
                            .collect(),
                    );
                }
                Some(list) => list.retain(|h| ready_in(h.set)),
            }
            if ready.as_ref().is_some_and(Vec::is_empty) {
                break;
            }
        }
        match ready {
            Some(ready) => Tally::of_zones(ready.iter().map(|h| h.zone)),
            // Nothing needed: every live proxy is ready.
            None => Tally::of_zones(self.live.values().copied()),
        }
    }
}

impl CutoverEngine {
    /// Whether the new leader's grace period is still running: until every
    /// registered proxy has had a lease TTL to reconnect, or all of them
    /// have, no readiness is judged.
    pub(super) fn in_grace(&self, state: &ReplicatedState, now_ms: u64) -> bool {
        let waited = now_ms.saturating_sub(self.leader_since_ms) >= self.settings.lease_ttl_ms;
        !waited
            && !state
                .proxies
                .keys()
                .all(|id| self.leases.seen_since(id, self.leader_since_ms))
    }

    /// How long after becoming leader the grace period ended, once: the
    /// first call that finds it over says so, later calls say nothing.
    /// O(P) until then, O(1) after.
    pub fn grace_just_ended(&mut self, state: &ReplicatedState, now_ms: u64) -> Option<u64> {
        if self.grace_reported || self.in_grace(state, now_ms) {
            return None;
        }
        self.grace_reported = true;
        Some(now_ms.saturating_sub(self.leader_since_ms))
    }

    /// The verdict on one route's pending transition, if it has one.
    /// O(P) for the fleet plus the route's own work; O(log R) for a route
    /// with nothing pending (a status asks of every route it shows).
    pub fn verdict(
        &self,
        state: &ReplicatedState,
        route: &ObjectName,
        now_ms: u64,
    ) -> Option<Verdict> {
        let record = state.routes.get(route)?;
        record.pending.as_ref()?;
        let mut view = FleetView::new(self, state, now_ms);
        self.verdict_in(&mut view, state, record)
            .map(|(verdict, _)| verdict)
    }

    /// The verdict on `record`'s pending transition within one pass's view
    /// of the fleet, with the backends it needs.
    fn verdict_in(
        &self,
        view: &mut FleetView<'_>,
        state: &ReplicatedState,
        record: &RouteRecord,
    ) -> Option<(Verdict, BTreeMap<BackendKey, Option<u64>>)> {
        let pending = record.pending.as_ref()?;
        let needed = self.required_backends(state, &pending.target.spec);
        let (met, tally) = weigh(view, pending, &needed);
        let summary = summary(view, state, pending, &needed, &tally);
        Some((Verdict { met, summary }, needed))
    }

    /// The commit of `route`'s pending `generation` on the evidence a
    /// verdict found for `needed` (each backend at the endpoint generation
    /// it covered), in this engine's term.
    fn commit_on_evidence(
        &self,
        route: &ObjectName,
        generation: u64,
        summary: String,
        needed: BTreeMap<BackendKey, Option<u64>>,
    ) -> Decision {
        let endpoints = needed
            .into_iter()
            .filter_map(|(backend, g)| g.map(|g| (backend, g)))
            .collect();
        Decision::Commit {
            route: route.clone(),
            generation,
            forced: false,
            summary,
            basis: DecisionBasis {
                term: self.term,
                endpoints,
            },
        }
    }

    /// A judge of the routes applies leave pending, with one view of the
    /// fleet for all of them (O(P) once, then each route's own work); none
    /// while this engine may not judge `state` or is in its grace.
    pub(super) fn apply_judge<'a>(
        &'a self,
        state: &'a ReplicatedState,
        now_ms: u64,
    ) -> Option<ApplyJudge<'a>> {
        if !self.may_judge(state) || self.in_grace(state, now_ms) {
            return None;
        }
        Some(ApplyJudge {
            engine: self,
            view: FleetView::new(self, state, now_ms),
        })
    }

    /// What `spec` needs evidence for (the state's rule; a test-only fault
    /// can bring back the old one).
    fn required_backends(
        &self,
        state: &ReplicatedState,
        spec: &HttpRoute,
    ) -> BTreeMap<BackendKey, Option<u64>> {
        #[allow(unused_mut)]
        let mut needed = state.required_backends(spec);
        #[cfg(feature = "fault-injection")]
        if self.faults.missing_backends_ready {
            needed.retain(|_, generation| generation.is_some());
        }
        needed
    }

    /// When this engine first saw `route`'s pending `generation` (its
    /// timeout runs from there), by its own clock.
    pub fn first_seen_ms(&self, route: &ObjectName, generation: u64) -> Option<u64> {
        self.first_seen
            .get(route)
            .filter(|(g, _)| *g == generation)
            // While nobody is live, every timeout restarts at each sync.
            .map(|(_, since)| self.paused_at_ms.unwrap_or(*since))
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
        self.judge(state, now_ms).decisions
    }

    /// [`CutoverEngine::decide`], with what the pass cost and when the next
    /// timeout falls due. O(P) plus, per pending route, its verdict.
    pub fn judge(&self, state: &ReplicatedState, now_ms: u64) -> Judgement {
        self.judge_within(state, now_ms, &Scope::Full)
    }

    /// [`CutoverEngine::judge`] over the pending routes `scope` covers
    /// (the proxies' expiry is judged whatever the scope).
    pub(super) fn judge_within(
        &self,
        state: &ReplicatedState,
        now_ms: u64,
        scope: &Scope,
    ) -> Judgement {
        let mut judgement = Judgement::default();
        if !self.may_judge(state) {
            return judgement;
        }
        for proxy in state.proxies.values() {
            if self
                .leases
                .is_expired(&proxy.id, now_ms, self.settings.lease_ttl_ms)
            {
                judgement.decisions.push(Decision::ExpireProxy {
                    id: proxy.id.clone(),
                    registration: proxy.registered_index,
                    term: self.term,
                });
            }
        }
        let grace = self.in_grace(state, now_ms);
        let mut view = FleetView::new(self, state, now_ms);
        let anybody_live = !view.live.is_empty();
        // Test-only fault: one stuck route blocks every route's commit.
        #[cfg(feature = "fault-injection")]
        let blocked = self.faults.global_route_blocking
            && state.pending_routes().any(|(_, record)| {
                self.verdict_in(&mut view, state, record)
                    .is_some_and(|(v, _)| !v.met)
            });
        for (name, record) in state.pending_routes() {
            let Some(pending) = &record.pending else {
                continue;
            };
            // The backends the verdict rests on, as the verdict finds them
            // (a ServiceImport's are its clusters' Services).
            let needed = self.required_backends(state, &pending.target.spec);
            if !scope.covers(needed.keys()) {
                continue;
            }
            judgement.evaluated += 1;
            let timeout = pending.settings.timeout_ms;
            let waited = self.waited_ms(name, pending.target.generation, now_ms);
            let timed_out = anybody_live && waited >= timeout;
            // Not met whatever the evidence says, and not timed out (which
            // would need the verdict's summary): it waits.
            if !timed_out && self.may_bound() && view.cannot_meet(&pending.settings.policy, &needed)
            {
                judgement.bounded += 1;
                if anybody_live {
                    judgement.times_out_at(now_ms + (timeout - waited));
                }
                continue;
            }
            let (met, tally) = weigh(&mut view, pending, &needed);
            let generation = pending.target.generation;
            // Test-only faults: commit without evidence / block globally.
            #[cfg(feature = "fault-injection")]
            let met = (met || self.faults.commit_without_evidence) && !blocked;
            if met && !grace {
                let summary = summary(&view, state, pending, &needed, &tally);
                judgement
                    .decisions
                    .push(self.commit_on_evidence(name, generation, summary, needed));
            } else if timed_out {
                judgement.decisions.push(timeout_decision(
                    name,
                    generation,
                    pending.settings.on_timeout,
                    timeout,
                    &pending.settings.policy.to_string(),
                    summary(&view, state, pending, &needed, &tally),
                    self.term,
                ));
            } else if anybody_live {
                judgement.times_out_at(now_ms + (timeout - waited));
            }
        }
        judgement
    }

    /// Whether a pass may find a route waiting by the bound alone
    /// ([`FleetView::cannot_meet`]); not under the test-only fault that
    /// commits without evidence.
    fn may_bound(&self) -> bool {
        #[cfg(feature = "fault-injection")]
        if self.faults.commit_without_evidence {
            return false;
        }
        true
    }
}

/// Whether `pending`'s policy is met by the proxies ready for `needed`,
/// with their count: the verdict without its summary, which only a
/// decision needs. O(backends × proxies with current evidence).
fn weigh<'a>(
    view: &mut FleetView<'a>,
    pending: &Transition,
    needed: &BTreeMap<BackendKey, Option<u64>>,
) -> (bool, Tally<'a>) {
    let tally = view.ready(needed);
    (tally.meets(&pending.settings.policy, &view.zones), tally)
}

/// The verdict's summary: the count per zone, then why a needed backend
/// cannot be ready anywhere, if one cannot.
fn summary(
    view: &FleetView<'_>,
    state: &ReplicatedState,
    pending: &Transition,
    needed: &BTreeMap<BackendKey, Option<u64>>,
    tally: &Tally<'_>,
) -> String {
    let problems: Vec<String> = needed
        .iter()
        .filter_map(|(backend, generation)| match generation {
            None => state.backend_problem(backend),
            Some(_) => state.backend_transport_problem(backend),
        })
        .collect();
    tally.summary(&pending.settings.policy, &view.zones, &problems)
}

/// What a timed-out transition gets: forced or abandoned, as it asked.
fn timeout_decision(
    route: &ObjectName,
    generation: u64,
    on_timeout: OnTimeout,
    timeout: u64,
    policy: &str,
    summary: String,
    term: u64,
) -> Decision {
    match on_timeout {
        OnTimeout::Force => Decision::Commit {
            route: route.clone(),
            generation,
            forced: true,
            summary,
            basis: DecisionBasis {
                term,
                endpoints: Vec::new(),
            },
        },
        OnTimeout::KeepOld => Decision::Abandon {
            route: route.clone(),
            generation,
            reason: format!("timed out after {timeout}ms waiting for policy {policy}: {summary}"),
            term,
        },
    }
}
