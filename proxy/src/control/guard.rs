//! The apply guard: which generation of each route this proxy routes by.
//!
//! Invariant 3 of the design: a proxy never routes by a generation whose
//! backends it has not warmed itself. A committed generation that is not
//! warm yet waits — the previous generation keeps serving — up to a local
//! limit, after which it is applied anyway (counted and logged by the
//! caller). Invariant 4: the generation a route is served at never goes
//! back — not even across a delete: the guard remembers the last generation
//! of a route that left the configuration, so a stale snapshot (or a
//! lagging coordinator) cannot bring an older spec back. A re-created route
//! always has a newer generation (generations are log indexes).
//!
//! Pure: the caller passes the snapshot, what is warm, and the time.

use std::collections::{BTreeMap, BTreeSet};
use switchyard_proto::model::{BackendKey, ConfigSnapshot, HttpRoute, ObjectName, RouteGeneration};

/// Whether one backend is warm on this proxy, as the data plane says.
pub trait Warmth {
    /// True when the backend has at least one endpoint that passed this
    /// proxy's own health check at the snapshot's endpoint set — or when it
    /// does not exist in the snapshot at all (the router answers 500 for it
    /// whatever happens, so waiting would only block the route).
    fn is_warm(&self, backend: &BackendKey) -> bool;
}

impl<F: Fn(&BackendKey) -> bool> Warmth for F {
    fn is_warm(&self, backend: &BackendKey) -> bool {
        self(backend)
    }
}

/// One route's served generation and, if a newer committed one waits for
/// warm-up, since when.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Served {
    current: Option<RouteGeneration>,
    waiting_since_ms: Option<(u64, u64)>,
}

/// What changed in one [`ApplyGuard::decide`] call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GuardReport {
    /// Routes whose served generation moved, with the new generation.
    pub applied: Vec<(ObjectName, u64)>,
    /// Routes applied only because the local wait limit ran out.
    pub forced: Vec<(ObjectName, u64)>,
    /// Routes still waiting for warm-up: (route, generation, waited ms).
    pub waiting: Vec<(ObjectName, u64, u64)>,
}

/// Test-only switches that break one rule of the guard on purpose, so the
/// seeded simulation (`sim/`) can prove its invariant checkers catch
/// a broken guard. Compiled only with the `fault-injection` feature; every
/// switch is off by default, and off means no change in behaviour.
#[cfg(feature = "fault-injection")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GuardFaults {
    /// Apply committed generations without waiting for warm-up (breaks
    /// invariant 3).
    pub ignores_warmth: bool,
    /// Accept generations older than the served one (breaks invariant 4).
    pub allows_regression: bool,
}

/// Per-route served generations.
#[derive(Debug, Clone, Default)]
pub struct ApplyGuard {
    served: BTreeMap<ObjectName, Served>,
    /// Routes that left the configuration: the last generation served.
    /// Only a newer generation may serve them again.
    gone: BTreeMap<ObjectName, u64>,
    wait_limit_ms: u64,
    #[cfg(feature = "fault-injection")]
    faults: GuardFaults,
}

impl ApplyGuard {
    /// A guard that applies a committed generation at the latest
    /// `wait_limit_ms` after it first saw it, warm or not.
    pub fn new(wait_limit_ms: u64) -> Self {
        ApplyGuard {
            served: BTreeMap::new(),
            gone: BTreeMap::new(),
            wait_limit_ms,
            #[cfg(feature = "fault-injection")]
            faults: GuardFaults::default(),
        }
    }

    /// Test-only: breaks guard rules on purpose (see [`GuardFaults`]).
    #[cfg(feature = "fault-injection")]
    pub fn set_faults(&mut self, faults: GuardFaults) {
        self.faults = faults;
    }

    /// Brings the served generations in line with `snapshot` and returns
    /// what changed. Routes gone from the snapshot stop being served.
    pub fn decide(
        &mut self,
        snapshot: &ConfigSnapshot,
        warm: &impl Warmth,
        now_ms: u64,
    ) -> GuardReport {
        let mut report = GuardReport::default();
        let names: BTreeSet<&ObjectName> = snapshot.routes.iter().map(|r| &r.name).collect();
        let gone = &mut self.gone;
        self.served.retain(|name, served| {
            let keep = names.contains(name);
            if !keep && let Some(current) = &served.current {
                let floor = gone.entry(name.clone()).or_default();
                *floor = (*floor).max(current.generation);
            }
            keep
        });
        for record in &snapshot.routes {
            let Some(active) = &record.active else {
                continue;
            };
            let served = self.served.entry(record.name.clone()).or_insert(Served {
                current: None,
                waiting_since_ms: None,
            });
            let held = served.current.as_ref().map_or(0, |g| g.generation);
            // A route back after leaving: the same generation is the same
            // spec (it left only in an older snapshot), an older one never.
            let floor = self.gone.get(&record.name).copied().unwrap_or(0);
            let stale = active.generation <= held || active.generation < floor;
            // Test-only fault: accept older generations.
            #[cfg(feature = "fault-injection")]
            let stale = if self.faults.allows_regression {
                active.generation == held
            } else {
                stale
            };
            if stale {
                // Never go back; equal means nothing to do.
                served.waiting_since_ms = None;
                continue;
            }
            let ready = active
                .spec
                .traffic_backends()
                .iter()
                .all(|b| warm.is_warm(b));
            // Test-only fault: treat every backend as warm.
            #[cfg(feature = "fault-injection")]
            let ready = ready || self.faults.ignores_warmth;
            let since = match served.waiting_since_ms {
                Some((generation, since)) if generation == active.generation => since,
                _ => now_ms,
            };
            let waited = now_ms.saturating_sub(since);
            if ready || waited >= self.wait_limit_ms {
                if !ready {
                    report.forced.push((record.name.clone(), active.generation));
                }
                report
                    .applied
                    .push((record.name.clone(), active.generation));
                served.current = Some(active.clone());
                served.waiting_since_ms = None;
                self.gone.remove(&record.name);
            } else {
                served.waiting_since_ms = Some((active.generation, since));
                report
                    .waiting
                    .push((record.name.clone(), active.generation, waited));
            }
        }
        report
    }

    /// The specs to route by, one per served route.
    pub fn routes(&self) -> Vec<HttpRoute> {
        self.served
            .values()
            .filter_map(|s| s.current.as_ref().map(|g| g.spec.clone()))
            .collect()
    }

    /// Route name to served generation (what heartbeats report).
    pub fn generations(&self) -> BTreeMap<ObjectName, u64> {
        self.served
            .iter()
            .filter_map(|(name, s)| s.current.as_ref().map(|g| (name.clone(), g.generation)))
            .collect()
    }

    /// Backends to keep warm besides the served ones: those of pending
    /// transitions and of committed generations still waiting.
    pub fn warming(&self, snapshot: &ConfigSnapshot) -> BTreeSet<BackendKey> {
        let mut out = BTreeSet::new();
        for record in &snapshot.routes {
            if let Some(pending) = &record.pending {
                out.extend(pending.target.spec.traffic_backends());
            }
            if let Some(active) = &record.active {
                out.extend(active.spec.traffic_backends());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_proto::model::*;

    fn spec(backend: &str) -> HttpRoute {
        HttpRoute {
            kind: Default::default(),
            meta: ObjectMeta::named("ns", "r"),
            parent_refs: vec![],
            hostnames: vec![],
            rules: vec![RouteRule {
                backend_refs: vec![BackendRef::service(backend, 80)],
                ..Default::default()
            }],
        }
    }

    fn snapshot(active: Option<(u64, &str)>, pending: Option<(u64, &str)>) -> ConfigSnapshot {
        let generation = |(g, b): (u64, &str)| RouteGeneration {
            generation: g,
            spec: spec(b),
        };
        ConfigSnapshot {
            routes: vec![RouteRecord {
                name: ObjectName::new("ns", "r"),
                active: active.map(generation),
                pending: pending.map(|p| Transition {
                    target: generation(p),
                    settings: CutoverSettings::default(),
                }),
                last_failure: None,
                forced: false,
                active_since: 0,
            }],
            ..Default::default()
        }
    }

    fn warm_only(names: &'static [&'static str]) -> impl Fn(&BackendKey) -> bool {
        move |b: &BackendKey| names.contains(&b.service.name.as_str())
    }

    #[test]
    fn a_committed_generation_waits_until_its_backends_are_warm() {
        let mut g = ApplyGuard::new(10_000);
        g.decide(&snapshot(Some((1, "blue")), None), &warm_only(&["blue"]), 0);
        assert_eq!(
            g.generations().values().copied().collect::<Vec<_>>(),
            vec![1]
        );

        let next = snapshot(Some((2, "green")), None);
        let report = g.decide(&next, &warm_only(&["blue"]), 100);
        assert_eq!(report.waiting.len(), 1);
        assert_eq!(g.routes()[0], spec("blue"), "old generation keeps serving");
        assert!(
            g.warming(&next)
                .contains(&BackendKey::new("ns", "green", 80))
        );

        let report = g.decide(&next, &warm_only(&["blue", "green"]), 200);
        assert_eq!(report.applied, vec![(ObjectName::new("ns", "r"), 2)]);
        assert_eq!(g.routes()[0], spec("green"));
    }

    #[test]
    fn the_wait_is_bounded_by_the_local_limit() {
        let mut g = ApplyGuard::new(1_000);
        g.decide(&snapshot(Some((1, "blue")), None), &warm_only(&["blue"]), 0);
        let next = snapshot(Some((2, "green")), None);
        assert!(
            g.decide(&next, &warm_only(&["blue"]), 10)
                .applied
                .is_empty()
        );
        assert!(
            g.decide(&next, &warm_only(&["blue"]), 1_009)
                .applied
                .is_empty()
        );
        let report = g.decide(&next, &warm_only(&["blue"]), 1_010);
        assert_eq!(report.forced, vec![(ObjectName::new("ns", "r"), 2)]);
    }

    #[test]
    fn generations_never_go_back_and_pending_is_never_served() {
        let mut g = ApplyGuard::new(0);
        g.decide(
            &snapshot(Some((3, "blue")), Some((4, "green"))),
            &warm_only(&["blue", "green"]),
            0,
        );
        assert_eq!(
            g.routes()[0],
            spec("blue"),
            "a pending generation is not served"
        );
        // An older snapshot (a lagging coordinator) changes nothing.
        let report = g.decide(&snapshot(Some((2, "red")), None), &warm_only(&["red"]), 5);
        assert!(report.applied.is_empty());
        assert_eq!(g.generations()[&ObjectName::new("ns", "r")], 3);
    }

    #[test]
    fn deleted_routes_stop_being_served() {
        let mut g = ApplyGuard::new(0);
        g.decide(&snapshot(Some((1, "blue")), None), &warm_only(&["blue"]), 0);
        g.decide(&ConfigSnapshot::default(), &warm_only(&[]), 1);
        assert!(g.routes().is_empty());
    }

    #[test]
    fn a_deleted_route_never_comes_back_older() {
        let mut g = ApplyGuard::new(0);
        g.decide(&snapshot(Some((5, "blue")), None), &warm_only(&["blue"]), 0);
        g.decide(&ConfigSnapshot::default(), &warm_only(&[]), 1);
        // A stale snapshot from before the delete changes nothing...
        let report = g.decide(&snapshot(Some((3, "red")), None), &warm_only(&["red"]), 2);
        assert!(report.applied.is_empty() && g.routes().is_empty());
        // ...while the route created again (a newer generation) is served.
        g.decide(
            &snapshot(Some((9, "green")), None),
            &warm_only(&["green"]),
            3,
        );
        assert_eq!(g.generations()[&ObjectName::new("ns", "r")], 9);
    }
}
