//! What a configuration means to a simulated proxy: the generation it
//! serves for each route and the readiness evidence it reports.
//!
//! A real proxy serves each route's active generation once its backends
//! are warm, and reports evidence for the backends of every active and
//! pending generation, at the endpoint generation its configuration
//! carries. An agent has no data path: every endpoint counts as healthy
//! (healthy = total = the endpoints its slices list as ready), so it warms
//! at once.
//!
//! Pure. [`View::of`] reads a whole snapshot (O(state), for a resync and
//! as the reference the incremental path is tested against);
//! [`Builder`] keeps the indexes that let a delta change the view in
//! O(change) — 200 agents in one process taking every change must not
//! each walk the store, or the tool measures itself. The view's maps are
//! persistent, so publishing a view and diffing it against what the
//! leader acknowledged cost O(change) too.

use imbl::{HashMap, HashSet, OrdMap};
use std::collections::BTreeSet;
use switchyard_proto::model::{
    BackendEvidence, BackendKey, ConfigDelta, ConfigSnapshot, EndpointSlice, Kind, ObjectName,
    Resource, RouteRecord, Service,
};

/// Evidence for one backend: healthy = total = the ready endpoints.
pub type Evidence = BackendEvidence;

/// What an agent serves and would report, at one version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// Configuration version the view was taken from.
    pub version: u64,
    /// Every route's served (active) generation.
    pub applied: OrdMap<ObjectName, u64>,
    /// Evidence per backend of every active and pending generation; only
    /// backends whose Service and port exist.
    pub evidence: OrdMap<BackendKey, Evidence>,
}

impl View {
    /// The view of `snapshot` at `version`, in one pass over it.
    pub fn of(version: u64, snapshot: &ConfigSnapshot) -> View {
        let mut builder = Builder::of(snapshot);
        builder.view.version = version;
        builder.view
    }
}

/// A delta that does not fit what the builder holds: it removes what is
/// not held. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the delta removes {0}, which is not held")]
pub struct NotHeld(String);

/// The view plus the indexes that let a delta update it in O(change).
/// Every map is persistent: a clone is O(1), so agents that received the
/// same snapshot can start from one builder (see `watch::Shared`)
/// and each pays only for what its own deltas change.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Builder {
    view: View,
    /// Per route: the backends its active and pending specs send traffic
    /// to.
    routes: HashMap<ObjectName, Vec<BackendKey>>,
    /// Per Service: the routes with a backend on it.
    users: HashMap<ObjectName, HashSet<ObjectName>>,
    /// Per Service: its ports.
    ports: HashMap<ObjectName, Vec<u16>>,
    /// Per EndpointSlice: its Service and ready endpoints.
    slices: HashMap<ObjectName, (ObjectName, u32)>,
    /// Per Service: ready endpoints over its slices.
    ready: HashMap<ObjectName, u32>,
    /// Per Service: its endpoint generation.
    generations: HashMap<ObjectName, u64>,
}

impl Builder {
    /// Everything of `snapshot` (O(state)).
    pub fn of(snapshot: &ConfigSnapshot) -> Builder {
        let mut b = Builder::default();
        let mut touched = BTreeSet::new();
        for s in &snapshot.services {
            b.put_service(s, &mut touched);
        }
        for slice in &snapshot.endpoint_slices {
            b.put_slice(slice, &mut touched);
        }
        for (service, generation) in &snapshot.endpoint_generations.0 {
            b.generations.insert(service.clone(), *generation);
        }
        for record in &snapshot.routes {
            b.put_route(record, &mut touched);
        }
        b.refresh(&touched);
        b.view.version = snapshot.version;
        b
    }

    /// The view at `version`: O(1), its maps are shared.
    pub fn view(&self, version: u64) -> View {
        View {
            version,
            ..self.view.clone()
        }
    }

    /// Applies `delta`, all or nothing: O(change), plus the routes of each
    /// Service it touches.
    pub fn apply(&mut self, delta: &ConfigDelta) -> Result<(), NotHeld> {
        for key in &delta.removed {
            let held = match key.kind {
                Kind::HTTPRoute => self.routes.contains_key(&key.name),
                Kind::Service => self.ports.contains_key(&key.name),
                Kind::EndpointSlice => self.slices.contains_key(&key.name),
                // Not kept here: nothing to check.
                _ => true,
            };
            if !held {
                return Err(NotHeld(key.to_string()));
            }
        }
        if let Some(s) = delta
            .endpoint_generations_removed
            .iter()
            .find(|s| !self.generations.contains_key(*s))
        {
            return Err(NotHeld(format!("the endpoint generation of {s}")));
        }
        let mut touched = BTreeSet::new();
        for key in &delta.removed {
            match key.kind {
                Kind::HTTPRoute => self.remove_route(&key.name, &mut touched),
                Kind::Service => {
                    self.ports.remove(&key.name);
                    touched.insert(key.name.clone());
                }
                Kind::EndpointSlice => self.remove_slice(&key.name, &mut touched),
                _ => {}
            }
        }
        for resource in &delta.upserted {
            match resource {
                Resource::Service(s) => self.put_service(s, &mut touched),
                Resource::EndpointSlice(slice) => self.put_slice(slice, &mut touched),
                _ => {}
            }
        }
        for record in &delta.routes {
            self.put_route(record, &mut touched);
        }
        for (service, generation) in &delta.endpoint_generations {
            self.generations.insert(service.clone(), *generation);
            touched.insert(service.clone());
        }
        for service in &delta.endpoint_generations_removed {
            self.generations.remove(service);
            touched.insert(service.clone());
        }
        self.refresh(&touched);
        Ok(())
    }

    fn put_service(&mut self, s: &Service, touched: &mut BTreeSet<ObjectName>) {
        let name = s.meta.object_name();
        self.ports
            .insert(name.clone(), s.ports.iter().map(|p| p.port).collect());
        touched.insert(name);
    }

    fn put_slice(&mut self, slice: &EndpointSlice, touched: &mut BTreeSet<ObjectName>) {
        let name = slice.meta.object_name();
        self.remove_slice(&name, touched);
        if let Some(service) = slice.service_name() {
            let service = ObjectName::new(slice.meta.namespace.clone(), service);
            let ready = slice.endpoints.iter().filter(|e| e.ready).count() as u32;
            *self.ready.entry(service.clone()).or_default() += ready;
            touched.insert(service.clone());
            self.slices.insert(name, (service, ready));
        }
    }

    fn remove_slice(&mut self, name: &ObjectName, touched: &mut BTreeSet<ObjectName>) {
        if let Some((service, ready)) = self.slices.remove(name) {
            if let Some(count) = self.ready.get_mut(&service) {
                *count = count.saturating_sub(ready);
            }
            touched.insert(service);
        }
    }

    fn put_route(&mut self, record: &RouteRecord, touched: &mut BTreeSet<ObjectName>) {
        self.remove_route(&record.name, touched);
        let specs = record
            .active
            .iter()
            .map(|a| &a.spec)
            .chain(record.pending.iter().map(|p| &p.target.spec));
        let mut backends: Vec<BackendKey> = specs.flat_map(|s| s.traffic_backends()).collect();
        backends.sort();
        backends.dedup();
        for b in &backends {
            self.users
                .entry(b.service.clone())
                .or_default()
                .insert(record.name.clone());
            touched.insert(b.service.clone());
        }
        if let Some(active) = &record.active {
            self.view
                .applied
                .insert(record.name.clone(), active.generation);
        }
        self.routes.insert(record.name.clone(), backends);
    }

    fn remove_route(&mut self, name: &ObjectName, touched: &mut BTreeSet<ObjectName>) {
        self.view.applied.remove(name);
        let Some(backends) = self.routes.remove(name) else {
            return;
        };
        for b in backends {
            if let Some(users) = self.users.get_mut(&b.service) {
                users.remove(name);
                if users.is_empty() {
                    self.users.remove(&b.service);
                }
            }
            touched.insert(b.service);
        }
    }

    /// Evidence again for every backend on the `touched` Services.
    fn refresh(&mut self, touched: &BTreeSet<ObjectName>) {
        for service in touched {
            let stale: Vec<BackendKey> = self
                .view
                .evidence
                .range(
                    BackendKey {
                        service: service.clone(),
                        port: 0,
                    }..=BackendKey {
                        service: service.clone(),
                        port: u16::MAX,
                    },
                )
                .map(|(k, _)| k.clone())
                .collect();
            for key in stale {
                self.view.evidence.remove(&key);
            }
            let Some(ports) = self.ports.get(service) else {
                continue;
            };
            let generation = self.generations.get(service).copied().unwrap_or(0);
            let ready = self.ready.get(service).copied().unwrap_or(0);
            for route in self.users.get(service).into_iter().flatten() {
                for b in self.routes.get(route).into_iter().flatten() {
                    if &b.service == service && ports.contains(&b.port) {
                        let evidence = BackendEvidence {
                            endpoints_generation: generation,
                            healthy: ready,
                            total: ready,
                        };
                        self.view.evidence.insert(b.clone(), evidence);
                    }
                }
            }
        }
    }
}

/// What to report: while evidence is held back (`hold`), what was
/// reported before, unchanged — so transitions to new backends or
/// endpoint sets stay pending (backends that left the view meanwhile stay
/// too: the hold is short, and a whole report after it sets everything
/// right). Without `hold`, the view's. O(1) either way.
pub fn reportable(
    view: &View,
    reported: &OrdMap<BackendKey, Evidence>,
    hold: bool,
) -> OrdMap<BackendKey, Evidence> {
    if hold {
        reported.clone()
    } else {
        view.evidence.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes;
    use switchyard_proto::model::{Resource, RouteGeneration, RouteRecord, Transition};

    fn snapshot(routes: usize) -> ConfigSnapshot {
        let mut s = ConfigSnapshot::default();
        for r in routes::resources(routes, routes::Endpoints::MadeUp).unwrap() {
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
                    active_since: 0,
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
        assert!(view.applied.values().all(|g| *g == 7));
        assert_eq!(view.evidence.len(), 3);
        assert!(
            view.evidence
                .values()
                .all(|e| { (e.endpoints_generation, e.healthy, e.total) == (4, 1, 1) })
        );
    }

    #[test]
    fn a_pending_backend_is_reported_unless_held_back() {
        let mut s = snapshot(2);
        let fresh =
            routes::update(0, routes::Variant::Fresh(1), routes::Endpoints::MadeUp).unwrap();
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
    }

    /// A delta applied to the builder gives the view of the snapshot the
    /// delta leads to, whatever it changes: routes moved to fresh
    /// backends, pending generations, a route deleted, a Service deleted,
    /// a slice's endpoints and endpoint generations changed.
    #[test]
    fn a_delta_changes_the_view_as_a_fresh_look_at_the_new_snapshot_would() {
        let old = snapshot(6);
        let mut new = old.clone();
        new.version = 20;
        // Route 0 moves to a fresh backend; route 1 gets a pending one.
        for (i, n) in [(0usize, 1u64), (1, 2)] {
            let mut route = None;
            for r in
                routes::update(i, routes::Variant::Fresh(n), routes::Endpoints::MadeUp).unwrap()
            {
                match r {
                    Resource::HttpRoute(r) => route = Some(r),
                    other => {
                        new.add(other);
                    }
                }
            }
            let spec = route.unwrap();
            let record = new
                .routes
                .iter_mut()
                .find(|r| r.name == spec.meta.object_name())
                .unwrap();
            let target = RouteGeneration {
                generation: 19,
                spec,
            };
            if i == 0 {
                record.active = Some(target);
            } else {
                record.pending = Some(Transition {
                    target,
                    settings: Default::default(),
                });
            }
        }
        for service in new.services.clone() {
            new.endpoint_generations
                .bump(service.meta.object_name(), 18);
        }
        // Route 2 deleted; Service 3 deleted (its route stays, unserved).
        new.routes.retain(|r| r.name.name != routes::route_name(2));
        new.services.retain(|s| s.meta.name != "svc-00003");
        // Slice 4 loses its ready endpoint.
        for slice in &mut new.endpoint_slices {
            if slice.service_name() == Some("svc-00004") {
                for e in &mut slice.endpoints {
                    e.ready = false;
                }
            }
        }
        let delta = ConfigDelta::between(&old, &new);
        let mut builder = Builder::of(&old);
        builder.apply(&delta).unwrap();
        let incremental = builder.view(20);
        let fresh = View::of(20, &new);
        assert_eq!(incremental, fresh);
        assert!(!fresh.evidence.keys().any(|b| b.service.name == "svc-00003"));
        assert_eq!(fresh.applied.len(), 5);

        // And back: the reverse delta gives the old view again.
        let back = ConfigDelta::between(&new, &old);
        builder.apply(&back).unwrap();
        assert_eq!(builder.view(9), View::of(9, &old));
    }

    #[test]
    fn a_delta_removing_what_is_not_held_changes_nothing() {
        let old = snapshot(2);
        let mut builder = Builder::of(&old);
        let before = builder.view(1);
        let mut delta = ConfigDelta::between(&old, &snapshot(1));
        delta.removed.push(switchyard_proto::model::ResourceKey {
            kind: Kind::Service,
            name: ObjectName::new("nowhere", "svc"),
        });
        assert!(builder.apply(&delta).is_err());
        assert_eq!(builder.view(1), before);
    }
}
