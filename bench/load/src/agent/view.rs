//! What a configuration means to a simulated proxy: the generation it
//! serves for each route and the readiness evidence it reports.
//!
//! A real proxy serves each route's active generation once its backends
//! are warm, and reports evidence for the backends of every active and
//! pending generation, at the endpoint generation its configuration
//! carries. An agent has no data path: every endpoint counts as healthy
//! (healthy = total = the endpoints its slices list as ready), so it warms
//! at once. Pure: a snapshot in, a [`View`] out, in one pass over the
//! snapshot (O(state)).

use std::collections::{BTreeMap, HashMap};
use switchyard_proto::model::{BackendKey, ConfigSnapshot, ObjectName};
use switchyard_proto::pb;

/// Evidence for one backend: (endpoint generation, endpoints).
pub type Evidence = (u64, u32);

/// What an agent serves and would report, at one version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// Configuration version the view was taken from.
    pub version: u64,
    /// Every route's served (active) generation.
    pub applied: Vec<pb::AppliedGeneration>,
    /// Evidence per backend of every active and pending generation; only
    /// backends whose Service and port exist.
    pub evidence: BTreeMap<BackendKey, Evidence>,
}

impl View {
    /// The view of `snapshot` at `version`.
    pub fn of(version: u64, snapshot: &ConfigSnapshot) -> View {
        let mut ports: HashMap<ObjectName, Vec<u16>> = HashMap::new();
        for s in &snapshot.services {
            ports
                .entry(s.meta.object_name())
                .or_default()
                .extend(s.ports.iter().map(|p| p.port));
        }
        let mut endpoints: HashMap<ObjectName, u32> = HashMap::new();
        for slice in &snapshot.endpoint_slices {
            if let Some(service) = slice.service_name() {
                let ready = slice.endpoints.iter().filter(|e| e.ready).count() as u32;
                *endpoints
                    .entry(ObjectName::new(slice.meta.namespace.clone(), service))
                    .or_default() += ready;
            }
        }
        let mut applied = Vec::with_capacity(snapshot.routes.len());
        let mut evidence = BTreeMap::new();
        for record in &snapshot.routes {
            if let Some(active) = &record.active {
                applied.push(pb::AppliedGeneration::from((
                    record.name.clone(),
                    active.generation,
                )));
            }
            let specs = record
                .active
                .iter()
                .map(|a| &a.spec)
                .chain(record.pending.iter().map(|p| &p.target.spec));
            for backend in specs.flat_map(|s| s.traffic_backends()) {
                let exists = ports
                    .get(&backend.service)
                    .is_some_and(|p| p.contains(&backend.port));
                if !exists {
                    continue;
                }
                let generation = snapshot.endpoint_generations.of(&backend.service);
                let count = endpoints.get(&backend.service).copied().unwrap_or(0);
                evidence.insert(backend, (generation, count));
            }
        }
        View {
            version,
            applied,
            evidence,
        }
    }
}

/// What to report while evidence is held back (`hold`): only backends
/// already reported, at what was reported for them — so transitions to new
/// backends or endpoint sets stay pending. Without `hold`, the view's.
pub fn reportable(
    view: &View,
    reported: &BTreeMap<BackendKey, Evidence>,
    hold: bool,
) -> BTreeMap<BackendKey, Evidence> {
    if !hold {
        return view.evidence.clone();
    }
    view.evidence
        .keys()
        .filter_map(|b| reported.get(b).map(|e| (b.clone(), *e)))
        .collect()
}

/// The report's entries.
pub fn backends(evidence: &BTreeMap<BackendKey, Evidence>) -> Vec<pb::BackendReadiness> {
    evidence
        .iter()
        .map(|(b, (generation, count))| pb::BackendReadiness {
            backend: b.to_string(),
            endpoints_generation: *generation,
            healthy: *count,
            total: *count,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes;
    use switchyard_proto::model::{Resource, RouteGeneration, RouteRecord, Transition};

    fn snapshot(routes: usize) -> ConfigSnapshot {
        let mut s = ConfigSnapshot::default();
        for r in routes::resources(routes).unwrap() {
            if let Some(route) = s.add(r) {
                s.routes.push(RouteRecord {
                    name: route.meta.object_name(),
                    active: Some(RouteGeneration {
                        generation: 7,
                        spec: route,
                    }),
                    pending: None,
                    last_failure: None,
                    forced: false,
                });
            }
        }
        for svc in &s.services {
            s.endpoint_generations.bump(svc.meta.object_name(), 4);
        }
        s
    }

    #[test]
    fn every_route_is_served_and_its_backend_reported_with_its_endpoints() {
        let view = View::of(9, &snapshot(3));
        assert_eq!(view.applied.len(), 3);
        assert!(view.applied.iter().all(|a| a.generation == 7));
        assert_eq!(view.evidence.len(), 3);
        assert!(view.evidence.values().all(|e| *e == (4, 1)));
    }

    #[test]
    fn a_pending_backend_is_reported_unless_held_back() {
        let mut s = snapshot(2);
        let fresh = routes::update(0, routes::Variant::Fresh(1)).unwrap();
        let mut target = None;
        for r in fresh {
            match r {
                Resource::HttpRoute(route) => target = Some(route),
                other => {
                    s.add(other);
                }
            }
        }
        s.routes[0].pending = Some(Transition {
            target: RouteGeneration {
                generation: 8,
                spec: target.unwrap(),
            },
            settings: Default::default(),
        });
        let before = View::of(9, &snapshot(2));
        let view = View::of(10, &s);
        assert_eq!(view.evidence.len(), 3, "the fresh backend too");
        let held = reportable(&view, &before.evidence, true);
        assert_eq!(held, before.evidence);
        assert_eq!(reportable(&view, &before.evidence, false), view.evidence);
        assert_eq!(backends(&view.evidence).len(), 3);
    }
}
