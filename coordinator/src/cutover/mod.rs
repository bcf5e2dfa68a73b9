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
//!
//! # Cost
//!
//! A decision pass ([`CutoverEngine::judge`]) visits pending routes only
//! (the state's derived pending index), and computes the live set and each
//! needed backend's evidence once per pass, not per route: O(P) for the
//! fleet plus, per pending route, O(its backends × proxies with evidence
//! for them). The leader loop runs a pass only when the state, the fleet
//! (a proxy coming back, a registration, changed evidence) or the clock
//! (a lease, evidence or grace period running out, a timeout) gives it
//! something new to see (`pass`). Everything per proxy is kept behind an
//! `Arc`, so a copy of the engine costs O(P): the leader loop copies it
//! under its lock and judges the copy without it.

mod decision;
mod evidence;
#[cfg(feature = "fault-injection")]
mod faults;
mod judge;
mod leases;
mod names;
mod pass;
mod sockets;
mod verdict;
mod with_apply;

#[cfg(test)]
mod tests;

pub use decision::Decision;
pub use evidence::BackendEvidence;
#[cfg(feature = "fault-injection")]
pub use faults::EngineFaults;
pub use judge::Judgement;
pub use leases::Leases;
pub use sockets::FleetSockets;
pub use verdict::Verdict;
pub use with_apply::MAX_ROUTES_JUDGED_WITH_APPLY;

use crate::state::ReplicatedState;
use imbl::OrdMap;
use std::collections::BTreeMap;
use std::sync::Arc;
use switchyard_proto::incremental::{Changed, HeldSet, KnownSets, Missed, NotHeld, SetUpdate};
use switchyard_proto::model::{BackendKey, ObjectName, RouteRecord};
use switchyard_proto::{AppliedUpdate, EvidenceUpdate};

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
#[derive(Debug, Clone, PartialEq)]
struct Report {
    /// When it arrived (engine clock).
    received_ms: u64,
    /// Everything the proxy keeps warm, as it said (whole, or as changes
    /// on what it said before).
    backends: HeldSet<Arc<BackendKey>, BackendEvidence>,
}

/// One proxy's applied generations, as its heartbeats said them.
#[derive(Debug, Clone, Default)]
struct Applied {
    /// `HeartbeatRequest.applied_through`. 0: `set` lists every route
    /// generation the proxy serves. Otherwise the configuration version
    /// whose active generations the proxy serves, except for the routes
    /// `set` lists (with the generation served instead; 0 for none).
    through: u64,
    set: HeldSet<Arc<ObjectName>, u64>,
}

impl Applied {
    /// Whether the proxy serves `route` (whose record is `record`) at
    /// `generation` or newer. O(log E) for E routes the set lists.
    fn serves(&self, route: &ObjectName, record: &RouteRecord, generation: u64) -> bool {
        match self.set.map().get(route) {
            Some(served) => *served >= generation,
            // Not listed: the proxy serves the active generation of its
            // configuration `through`, which holds this record's active
            // generation once it is at least as new as its activation.
            None => {
                self.through != 0
                    && record
                        .active
                        .as_ref()
                        .is_some_and(|a| a.generation >= generation)
                    && record
                        .active_since()
                        .is_some_and(|since| since <= self.through)
            }
        }
    }
}

/// What the engine made of a heartbeat or a readiness report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heard {
    /// Whether it came from the proxy's current registration (false: the
    /// proxy must register again; nothing it said was kept).
    pub known: bool,
    /// The sequence of the proxy's set (applied generations, evidence)
    /// held after it: the answer's `applied_seq` or `seq`.
    pub held_seq: u64,
    /// Whether a pass or a status could see anything new: the proxy live
    /// again or first heard by this leader, or its set changed. A renewal
    /// that changes nothing is no news.
    pub news: bool,
    /// The set was named by a digest this leader does not know yet, and
    /// another proxy was asked for that set whole a moment ago
    /// ([`Missed::Awaited`]): naming it again once that set came will be
    /// taken, where sending it whole would cost the leader a copy of its
    /// entries. Otherwise false.
    pub awaits_set: bool,
}

impl Heard {
    const UNKNOWN: Heard = Heard {
        known: false,
        held_seq: 0,
        news: false,
        awaits_set: false,
    };
}

/// The live proxies at one moment, id to zone, borrowed from the state
/// they were read from ([`CutoverEngine::live_proxies`]).
pub type LiveProxies<'s> = BTreeMap<&'s str, &'s str>;

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
    /// Whether the end of this leader's grace period was reported (see
    /// [`CutoverEngine::grace_just_ended`]).
    grace_reported: bool,
    leases: Leases,
    /// The registration (log index) each known proxy's soft state belongs
    /// to. When a proxy registers again, what it said before is dropped.
    /// This and the other per-proxy maps are persistent maps: a copy of
    /// the engine (each look of the leader loop, each status) shares them
    /// and costs O(1) whatever the fleet's size; a change while a copy is
    /// alive copies only the path to what changed.
    registrations: OrdMap<String, u64>,
    /// Each proxy's latest report. A report replaces the previous one
    /// (whole, or by the changes it lists), and one older than a lease TTL
    /// does not count.
    evidence: OrdMap<String, Arc<Report>>,
    /// Each proxy's applied generations, from its heartbeats.
    applied: OrdMap<String, Arc<Applied>>,
    /// The large applied sets and evidence lately sent whole, by digest:
    /// a proxy whose set another proxy already sent names it by digest,
    /// and it is taken without its entries (a new leader then is not sent every
    /// proxy's whole sets again; see `switchyard_proto::incremental`).
    known_applied: KnownSets<Arc<ObjectName>, u64>,
    known_evidence: KnownSets<Arc<BackendKey>, BackendEvidence>,
    /// The route names `applied` holds, one copy each (see `names`).
    route_names: names::Interner<ObjectName>,
    /// The backends `evidence` holds, one copy each.
    backend_names: names::Interner<BackendKey>,
    /// Each proxy's listener sockets, from its latest readiness report.
    sockets: FleetSockets,
    /// Per pending route: the generation and when this engine first saw it
    /// pending with at least one live proxy (its timeout runs from there).
    /// Behind an `Arc` so a copy of the engine does not copy it; a pass
    /// changes its own copy and hands it back.
    first_seen: Arc<BTreeMap<ObjectName, (u64, u64)>>,
    /// While no proxy is live, the latest sync that saw nobody live: the
    /// timeouts do not run, and the first sync that sees a proxy live
    /// again starts every pending route's timeout afresh (so the pause
    /// costs nothing per route while it lasts).
    paused_at_ms: Option<u64>,
    /// Bumped whenever the fleet soft state changes in a way a verdict can
    /// see (a registration adopted or forgotten, a proxy live again or back
    /// after a leader change, different evidence): the leader loop passes
    /// again when it moved.
    changes: u64,
    /// What the leader loop's passes have seen (see `pass`).
    passes: pass::Passes,
    /// Since when the leader has had no quorum acknowledgement, while it
    /// still leads in this term (see `pass`): no pass runs meanwhile.
    quorum_lost_ms: Option<u64>,
    /// What the next pass must judge: every pending route, or — when only
    /// evidence changed since the last pass — those that use one of these
    /// backends (see `pass`).
    scope: pass::Scope,
}

impl CutoverEngine {
    /// A fresh engine for a coordinator that just became leader of `term`
    /// at `now_ms`: every registered proxy gets a full lease (a failover
    /// never expires live proxies) and no evidence is known yet.
    pub fn new(settings: EngineSettings, state: &ReplicatedState, now_ms: u64, term: u64) -> Self {
        let mut engine = Self::leading(settings, state, now_ms, term);
        engine.sync_routes(state, now_ms);
        engine
    }

    /// [`CutoverEngine::new`] without looking at the routes yet (O(P), for
    /// a caller holding a lock): the first pass
    /// ([`CutoverEngine::run_pass`]) sees the pending routes, at the same
    /// time if it runs at once.
    pub fn leading(
        settings: EngineSettings,
        state: &ReplicatedState,
        now_ms: u64,
        term: u64,
    ) -> Self {
        let mut engine = CutoverEngine {
            settings,
            #[cfg(feature = "fault-injection")]
            faults: EngineFaults::default(),
            term,
            leader_since_ms: now_ms,
            grace_reported: false,
            leases: Leases::default(),
            registrations: OrdMap::new(),
            evidence: OrdMap::new(),
            applied: OrdMap::new(),
            known_applied: KnownSets::default(),
            known_evidence: KnownSets::default(),
            route_names: names::Interner::default(),
            backend_names: names::Interner::default(),
            sockets: FleetSockets::default(),
            first_seen: Arc::default(),
            paused_at_ms: None,
            changes: 0,
            passes: pass::Passes::default(),
            quorum_lost_ms: None,
            scope: pass::Scope::default(),
        };
        engine.sync_registry(state, now_ms);
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
        self.sync_registry(state, now_ms);
        self.sync_routes(state, now_ms);
    }

    /// The registry half of [`CutoverEngine::sync`]: O(P).
    fn sync_registry(&mut self, state: &ReplicatedState, now_ms: u64) {
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
    }

    /// The routes half of [`CutoverEngine::sync`]: O(pending routes).
    fn sync_routes(&mut self, state: &ReplicatedState, now_ms: u64) {
        let nobody_live = !self.anybody_live(state, now_ms);
        let first_seen = Arc::make_mut(&mut self.first_seen);
        first_seen.retain(|route, (generation, _)| {
            state
                .routes
                .get(route)
                .and_then(|r| r.pending.as_ref())
                .is_some_and(|p| p.target.generation == *generation)
        });
        if nobody_live {
            // The timeout does not run while nobody can judge: each one
            // starts afresh at the first sync that sees a proxy live.
            self.paused_at_ms = Some(now_ms);
        } else if self.paused_at_ms.take().is_some() {
            for entry in first_seen.values_mut() {
                entry.1 = now_ms;
            }
        }
        for (name, record) in state.pending_routes() {
            if let Some(pending) = &record.pending {
                first_seen
                    .entry(name.clone())
                    .or_insert((pending.target.generation, now_ms));
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
            self.changes += 1;
            self.scope.widen();
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
    /// `state` and, if so, adopts it and renews the lease: `None` if it is
    /// not, else whether that is news (the proxy live again, or heard for
    /// the first time by this leader).
    fn heard(
        &mut self,
        state: &ReplicatedState,
        proxy: &str,
        registration: u64,
        now_ms: u64,
    ) -> Option<bool> {
        #[cfg(feature = "fault-injection")]
        let registration = match state.proxies.get(proxy) {
            Some(p) if self.faults.evidence_across_registrations => p.registered_index,
            _ => registration,
        };
        let record = state
            .proxies
            .get(proxy)
            .filter(|p| p.registered_index == registration)?;
        // A proxy live again, or heard for the first time by this leader
        // (which may end its grace), changes what a pass sees; a renewal of
        // a live lease does not.
        let ttl = self.settings.lease_ttl_ms;
        let news = !self.leases.is_live(proxy, now_ms, ttl)
            || !self.leases.seen_since(proxy, self.leader_since_ms);
        self.adopt_registration(proxy, &record.zone, registration, now_ms);
        self.leases.renew(proxy, &record.zone, now_ms);
        if news {
            self.changes += 1;
            self.scope.widen();
        }
        Some(news)
    }

    /// A heartbeat from `proxy`'s `registration` with every route
    /// generation it serves (a whole set, unnumbered). Returns false when
    /// that is not its current registration in `state` (it must register
    /// again; a message from an earlier run under the same id is ignored).
    pub fn heartbeat(
        &mut self,
        state: &ReplicatedState,
        proxy: &str,
        registration: u64,
        applied: BTreeMap<ObjectName, u64>,
        now_ms: u64,
    ) -> bool {
        let whole = SetUpdate::Whole {
            seq: 0,
            entries: applied.into_iter().collect(),
        };
        self.heartbeat_update(state, proxy, registration, whole, 0, now_ms)
            .known
    }

    /// A heartbeat from `proxy`'s `registration`, with its applied
    /// generations whole or as changes on the set held: every generation
    /// served (`through` 0), or those that differ from the active ones of
    /// configuration `through` (`HeartbeatRequest.applied_through`).
    /// Changes on another set than the one held renew the lease and
    /// change nothing else (not `through` either): the answer's
    /// `held_seq` tells the proxy to send its set whole.
    pub fn heartbeat_update(
        &mut self,
        state: &ReplicatedState,
        proxy: &str,
        registration: u64,
        applied: AppliedUpdate,
        through: u64,
        now_ms: u64,
    ) -> Heard {
        let Some(news) = self.heard(state, proxy, registration, now_ms) else {
            return Heard::UNKNOWN;
        };
        let named = applied.named_digest();
        let applied = applied.map_keys(|name| self.route_names.intern(name));
        let held = Arc::make_mut(self.applied.entry(proxy.to_string()).or_default());
        // Changes on another set change nothing (`NotHeld`): the answer's
        // sequence asks for the whole set.
        // Only whether anything changed: O(1) past the first changed key
        // (a new leader taking each proxy's whole set by digest).
        let taken = held
            .set
            .take_known_listing(applied, &mut self.known_applied, 0);
        let awaits_set = taken.is_err()
            && named.is_some_and(|d| self.known_applied.missed(&d, now_ms) == Missed::Awaited);
        let moved_on = taken.is_ok() && std::mem::replace(&mut held.through, through) != through;
        let changed = moved_on || taken.is_ok_and(|changed| changed != Changed::Keys(Vec::new()));
        Heard {
            known: true,
            held_seq: held.set.seq(),
            news: news || changed,
            awaits_set,
        }
    }

    /// Readiness evidence from `proxy`'s `registration`: everything it keeps
    /// warm now (a whole set, unnumbered). It replaces the proxy's previous
    /// report, so a backend the proxy stopped warming stops counting at
    /// once. Returns false (and keeps nothing) when that is not the proxy's
    /// current registration.
    pub fn report(
        &mut self,
        state: &ReplicatedState,
        proxy: &str,
        registration: u64,
        backends: Vec<(BackendKey, BackendEvidence)>,
        now_ms: u64,
    ) -> bool {
        let whole = SetUpdate::Whole {
            seq: 0,
            entries: backends,
        };
        self.report_update(state, proxy, registration, whole, now_ms)
            .known
    }

    /// Readiness evidence from `proxy`'s `registration`, whole or as
    /// changes on the report held. Taken, it is current from `now_ms` (an
    /// empty change renews it). Changes on another report than the one
    /// held keep nothing (what was held stays, and ages): the answer's
    /// `held_seq` tells the proxy to report whole.
    pub fn report_update(
        &mut self,
        state: &ReplicatedState,
        proxy: &str,
        registration: u64,
        backends: EvidenceUpdate,
        now_ms: u64,
    ) -> Heard {
        let Some(news) = self.heard(state, proxy, registration, now_ms) else {
            return Heard::UNKNOWN;
        };
        let ttl = self.settings.lease_ttl_ms;
        let previous = self.evidence.get(proxy);
        let stale = previous.is_none_or(|r| now_ms.saturating_sub(r.received_ms) >= ttl);
        // O(1): the held set is a persistent map.
        let mut held = previous.map(|r| r.backends.clone()).unwrap_or_default();
        let named = backends.named_digest();
        let backends = backends.map_keys(|backend| self.backend_names.intern(backend));
        // Listed up to the pending routes' bound: past it the scope
        // widens anyway (below), so a whole set taken by digest costs
        // O(pending), not O(its backends).
        let listing =
            held.take_known_listing(backends, &mut self.known_evidence, state.pending_bound());
        let changed = match listing {
            Ok(Changed::Keys(changed)) => Some(changed),
            Ok(Changed::MoreThan(_)) => None,
            Err(NotHeld { held, .. }) => {
                let awaits_set = named
                    .is_some_and(|d| self.known_evidence.missed(&d, now_ms) == Missed::Awaited);
                return Heard {
                    known: true,
                    held_seq: held,
                    news,
                    awaits_set,
                };
            }
        };
        // The same evidence again only keeps it current; anything else (or
        // evidence that had gone stale) is news to the next pass — which
        // need judge only the routes that use a backend whose evidence
        // changed (evidence back from stale: all of the proxy's).
        let news_here = changed.as_ref().is_none_or(|c| !c.is_empty()) || stale;
        if news_here {
            self.changes += 1;
            // Listing more backends than there are pending routes costs
            // more than judging every pending route: a proxy's whole set
            // reaching a new leader (10,000 backends from each of 200
            // proxies, while a handful of routes wait) widens the scope
            // instead of copying every key into it.
            let before = stale
                .then(|| self.evidence.get(proxy).map(|r| r.backends.map().clone()))
                .flatten();
            let listed = changed
                .as_ref()
                .map_or(usize::MAX, Vec::len)
                .saturating_add(if stale {
                    held.map().len() + before.as_ref().map_or(0, |m| m.len())
                } else {
                    0
                });
            if listed > state.pending_bound() {
                self.scope.widen();
            } else {
                self.scope
                    .narrow(changed.iter().flatten().map(|b| BackendKey::clone(b)));
                if stale {
                    // Everything this proxy holds counts again, and
                    // whatever it held before counted no more.
                    let keys = held
                        .map()
                        .keys()
                        .chain(before.iter().flat_map(|m| m.keys()));
                    self.scope.narrow(keys.map(|b| BackendKey::clone(b)));
                }
            }
        }
        let held_seq = held.seq();
        self.evidence.insert(
            proxy.to_string(),
            Arc::new(Report {
                received_ms: now_ms,
                backends: held,
            }),
        );
        Heard {
            known: true,
            held_seq,
            news: news || news_here,
            awaits_set: false,
        }
    }

    /// Forgets a proxy (it deregistered, was expired, or registered again).
    pub fn forget(&mut self, proxy: &str) {
        self.changes += 1;
        self.scope.widen();
        self.leases.remove(proxy);
        self.registrations.remove(proxy);
        self.evidence.remove(proxy);
        self.applied.remove(proxy);
        self.sockets.forget(proxy);
    }

    /// Ids and zones of proxies that are registered and whose lease is
    /// current at `now_ms`, borrowed from `state`: O(P) lookups, no copy
    /// of any id (this runs on every look of the leader loop and every
    /// status).
    pub fn live_proxies<'s>(&self, state: &'s ReplicatedState, now_ms: u64) -> LiveProxies<'s> {
        self.live_in(state, now_ms).collect()
    }

    /// [`CutoverEngine::live_proxies`], one at a time.
    fn live_in<'e, 's>(
        &'e self,
        state: &'s ReplicatedState,
        now_ms: u64,
    ) -> impl Iterator<Item = (&'s str, &'s str)> + use<'e, 's> {
        state
            .proxies
            .values()
            .filter(move |p| {
                self.registrations.get(&p.id) == Some(&p.registered_index)
                    && self
                        .leases
                        .is_live(&p.id, now_ms, self.settings.lease_ttl_ms)
            })
            .map(|p| (p.id.as_str(), p.zone.as_str()))
    }

    /// Whether any proxy is live at `now_ms`.
    fn anybody_live(&self, state: &ReplicatedState, now_ms: u64) -> bool {
        self.live_in(state, now_ms).next().is_some()
    }

    /// Whether this engine may judge: the state it is handed must be its
    /// own term's, so everything committed before the term (which comes
    /// before the new leader's blank entry) is applied.
    pub fn may_judge(&self, state: &ReplicatedState) -> bool {
        state.last_term == self.term
    }
}
