//! Read-only views of the replicated state: what a route spec needs
//! evidence for, the configuration snapshot proxies receive and the
//! per-route status rows. Evidence and applied counts are the leader's soft
//! state and are filled in by the cutover engine, not here.

use super::ReplicatedState;
use std::collections::{BTreeMap, BTreeSet};
use switchyard_proto::model::gateway_api::{BackendTransport, Topology};
use switchyard_proto::model::{
    BackendKey, CONTROLLER_NAME, ConfigSnapshot, ConfigSnapshotRef, HttpRoute, Kind, ObjectName,
    ProxyStatus, Resource, ResourceKey, RouteRecord, RouteStatus,
};

impl ReplicatedState {
    /// The backend's current endpoint generation, or `None` when its
    /// Service or that Service's port does not exist.
    pub fn endpoint_generation(&self, backend: &BackendKey) -> Option<u64> {
        let key = ResourceKey {
            kind: Kind::Service,
            name: backend.service.clone(),
        };
        match self.resources.get(&key) {
            Some(Resource::Service(service))
                if service.ports.iter().any(|p| p.port == backend.port) =>
            {
                // Test-only fault: the old rule, newest revision of what
                // remains.
                #[cfg(feature = "fault-injection")]
                if super::faults::get().endpoint_generation_from_revisions {
                    return Some(self.revision_generation(service));
                }
                Some(self.endpoint_generations.of(&backend.service))
            }
            _ => None,
        }
    }

    /// The old endpoint generation: the newest revision among the Service
    /// and its remaining slices (test-only fault).
    #[cfg(feature = "fault-injection")]
    fn revision_generation(&self, service: &switchyard_proto::model::Service) -> u64 {
        self.resources
            .values()
            .filter_map(|r| match r {
                Resource::EndpointSlice(s)
                    if s.meta.namespace == service.meta.namespace
                        && s.service_name() == Some(service.meta.name.as_str()) =>
                {
                    Some(s.meta.revision)
                }
                _ => None,
            })
            .fold(service.meta.revision, u64::max)
    }

    /// Why `backend` cannot be warmed, if it cannot: `Service ns/x not
    /// found` or `Service ns/x has no port 80`.
    pub fn backend_problem(&self, backend: &BackendKey) -> Option<String> {
        if self.endpoint_generation(backend).is_some() {
            return None;
        }
        let key = ResourceKey {
            kind: Kind::Service,
            name: backend.service.clone(),
        };
        Some(if self.resources.contains_key(&key) {
            format!("Service {} has no port {}", backend.service, backend.port)
        } else {
            format!("Service {} not found", backend.service)
        })
    }

    /// Why the proxies will not connect to `backend` though its Service
    /// and port exist: the BackendTLSPolicy covering it cannot be used, or
    /// its port says TLS with no policy (`gateway_api::backend_tls`, the
    /// rule the proxies follow). Costs a range over the stored policies and
    /// a look-up of the CA ConfigMaps of those targeting the Service.
    pub fn backend_transport_problem(&self, backend: &BackendKey) -> Option<String> {
        let key = ResourceKey {
            kind: Kind::Service,
            name: backend.service.clone(),
        };
        let Some(Resource::Service(service)) = self.resources.get(&key) else {
            return None;
        };
        let port = service.ports.iter().find(|p| p.port == backend.port)?;
        let policies: Vec<&Resource> = self
            .stored_backend_tls_policies()
            .filter(|r| match r {
                Resource::BackendTlsPolicy(p) => {
                    p.target_services().any(|(s, _)| s == backend.service)
                }
                _ => false,
            })
            .collect();
        let maps: Vec<&Resource> = policies
            .iter()
            .filter_map(|r| match r {
                Resource::BackendTlsPolicy(p) => Some(p),
                _ => None,
            })
            .flat_map(|p| {
                p.validation.ca_certificate_refs.iter().filter_map(|c| {
                    self.resources.get(&ResourceKey {
                        kind: Kind::ConfigMap,
                        name: ObjectName::new(p.meta.namespace.clone(), c.name.clone()),
                    })
                })
            })
            .collect();
        let topology = Topology::of_resources(policies.into_iter().chain(maps), CONTROLLER_NAME);
        match topology.backend_transport(service, port) {
            BackendTransport::Refused(why) => Some(why),
            _ => None,
        }
    }

    /// Every backend a route spec sends traffic to, with the endpoint
    /// generation evidence must cover — `None` for a backend whose Service
    /// or port does not exist. Such a backend is still required: a route
    /// that arrives before its Service (normal with a live cluster watch)
    /// must not commit to a backend that answers 500.
    pub fn required_backends(&self, spec: &HttpRoute) -> BTreeMap<BackendKey, Option<u64>> {
        spec.traffic_backends()
            .into_iter()
            .map(|key| {
                let generation = self.endpoint_generation(&key);
                (key, generation)
            })
            .collect()
    }

    /// Everything a proxy needs, as of `last_index`.
    pub fn config_snapshot(&self) -> ConfigSnapshot {
        let mut snapshot = ConfigSnapshot {
            version: self.last_index,
            routes: self
                .routes
                .values()
                .map(|r| RouteRecord::clone(r))
                .collect(),
            endpoint_generations: self.endpoint_generations.to_snapshot(),
            ..Default::default()
        };
        for resource in self.resources.values() {
            // Routes live in `self.routes`; `check_invariants` keeps them
            // out of `resources`, so nothing is handed back here.
            let _ = snapshot.add(resource.clone());
        }
        snapshot
    }

    /// [`ReplicatedState::config_snapshot`] encoded as JSON, byte for byte,
    /// from the state's own objects: no copy of the store is made first
    /// (at 10,000 routes with their Services and slices, the copy cost more
    /// than the encoding). O(state).
    pub fn config_snapshot_json(&self) -> serde_json::Result<Vec<u8>> {
        let mut snapshot = ConfigSnapshotRef::new(self.last_index, &self.endpoint_generations);
        snapshot.routes = self.routes.values().map(|r| &**r).collect();
        for resource in self.resources.values() {
            // Routes live in `self.routes` (see `config_snapshot`).
            let _ = snapshot.add(resource);
        }
        serde_json::to_vec(&snapshot)
    }

    /// One status row per route, from replicated state alone.
    pub fn route_statuses(&self) -> Vec<RouteStatus> {
        self.route_statuses_of(None)
    }

    /// One status row per route named in `only` (every route for `None`),
    /// from replicated state alone. A name not stored has no row.
    pub fn route_statuses_of(&self, only: Option<&BTreeSet<ObjectName>>) -> Vec<RouteStatus> {
        let topology = self.attachment_topology();
        let row = |r: &RouteRecord| RouteStatus {
            namespace: r.name.namespace.clone(),
            name: r.name.name.clone(),
            active_generation: r.active.as_ref().map(|a| a.generation),
            pending_generation: r.pending.as_ref().map(|p| p.target.generation),
            policy: r.pending.as_ref().map(|p| p.settings.policy.to_string()),
            last_failure: r.last_failure.clone(),
            forced: r.forced,
            not_served: not_served(&topology, r),
            ..Default::default()
        };
        match only {
            None => self.routes.values().map(|r| row(r)).collect(),
            Some(names) => names
                .iter()
                .filter_map(|n| self.routes.get(n))
                .map(|r| row(r))
                .collect(),
        }
    }

    /// The topology a route's attachment is worked out on: the Gateways,
    /// their classes and listeners' TLS references, Namespaces and grants
    /// — every kind but Services (which only backend resolution reads,
    /// never attachment), routes and EndpointSlices. Walks only the kinds
    /// it takes (the store is ordered by kind): a status of one route at
    /// 10,000 routes indexed 10,000 Services first.
    fn attachment_topology(&self) -> Topology<'_> {
        // Every kind but those, so a kind added later is in by default.
        let taken = |kind: &Kind| {
            !matches!(
                kind,
                Kind::Service | Kind::HTTPRoute | Kind::GRPCRoute | Kind::EndpointSlice
            )
        };
        let of_kind = |kind: Kind| {
            let first = ResourceKey {
                kind,
                name: ObjectName::new("", ""),
            };
            self.resources
                .range(first..)
                .take_while(move |(key, _)| key.kind == kind)
                .map(|(_, resource)| resource)
        };
        Topology::of_resources(
            Kind::ALL.into_iter().filter(taken).flat_map(of_kind),
            CONTROLLER_NAME,
        )
    }

    /// One status row per registered proxy; liveness is unknown here and
    /// reported as `true` (the leader overrides it from its leases).
    pub fn proxy_statuses(&self) -> Vec<ProxyStatus> {
        self.proxies
            .values()
            .map(|p| ProxyStatus {
                id: p.id.clone(),
                zone: p.zone.clone(),
                admin_address: p.admin_address.clone(),
                live: true,
                // The leader's soft state (filled in from its engine).
                listeners: None,
            })
            .collect()
    }
}

/// Why the newest spec of `record` attaches to no listener, by the Gateway
/// API rules proxies route by; `None` when it is served somewhere.
fn not_served(topology: &Topology<'_>, record: &RouteRecord) -> Option<String> {
    let spec = record
        .pending
        .as_ref()
        .map(|p| &p.target.spec)
        .or(record.active.as_ref().map(|a| &a.spec))?;
    if spec.parent_refs.is_empty() {
        return Some("it has no parentRefs".into());
    }
    let (attached, refused) = topology.attach_route(spec);
    if !attached.is_empty() {
        return None;
    }
    let why: Vec<String> = refused
        .iter()
        .map(|(i, why)| format!("parentRef {i}: {why}"))
        .collect();
    Some(why.join("; "))
}
