//! Route records (active generation plus an optional pending transition)
//! and the configuration snapshot coordinators stream to proxies.

use super::backend::{BackendKey, EndpointSlice, ReferenceGrant, Service};
use super::backend_tls::{BackendTlsPolicy, ConfigMap};
use super::gateway::{Gateway, GatewayClass, Namespace};
use super::meta::{Kind, ObjectName};
use super::pairs;
use super::policy::CutoverSettings;
use super::resource::Resource;
use super::route::HttpRoute;
use super::secret::Secret;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One generation of a route's spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteGeneration {
    /// The Raft log index of the apply that created this spec. Log indexes
    /// only grow, so a generation names exactly one spec of its route
    /// forever: across withdraws, abandons, delete and re-create, restarts
    /// and snapshots (design invariant 8).
    pub generation: u64,
    /// The spec of that generation.
    pub spec: HttpRoute,
}

/// A route change waiting for readiness evidence.
///
/// It holds no timestamp: its timeout is a duration
/// (`settings.timeout_ms`) that the leader times on its own monotonic clock
/// from when it first sees the transition, so no decision ever compares
/// two machines' clocks (design invariant 10). Entries written before
/// that carried `created_ms`/`deadline_ms`; serde ignores them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// The generation and spec to cut over to.
    pub target: RouteGeneration,
    /// Policy, timeout and on-timeout action in force for it.
    pub settings: CutoverSettings,
}

/// What the replicated state holds for one route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteRecord {
    /// `namespace/name`.
    pub name: ObjectName,
    /// The generation proxies route by; `None` until the first commit.
    pub active: Option<RouteGeneration>,
    /// The transition in progress, if any.
    pub pending: Option<Transition>,
    /// Why the last transition ended without a commit, if it did.
    #[serde(default)]
    pub last_failure: Option<String>,
    /// True when the active generation was committed by `on-timeout:
    /// force` (its backends were not shown ready).
    #[serde(default)]
    pub forced: bool,
    /// The configuration version (log index) at which the active
    /// generation became active: a proxy that served every active
    /// generation of a configuration at least this new serves this one
    /// (see `HeartbeatRequest.applied_through`). 0 in records written
    /// before it was kept: the active generation's own number stands in
    /// for it (the apply that made it, never later than its commit).
    #[serde(default)]
    pub active_since: u64,
}

impl RouteRecord {
    /// The route's kind, from its newest spec (a record holds routes of
    /// one kind: the coordinator refuses a route whose name a route of the
    /// other kind holds). `HTTPRoute` for a record without any spec.
    pub fn kind(&self) -> Kind {
        let newest = self
            .pending
            .as_ref()
            .map(|p| &p.target)
            .or(self.active.as_ref());
        newest.map_or(Kind::HTTPRoute, |g| g.spec.kind.kind())
    }

    /// The configuration version since which the active generation is
    /// active (see [`RouteRecord::active_since`]); `None` without one.
    pub fn active_since(&self) -> Option<u64> {
        let active = self.active.as_ref()?;
        Some(self.active_since.max(active.generation))
    }

    /// The newest generation this route has had (active or pending).
    pub fn newest_generation(&self) -> u64 {
        let active = self.active.as_ref().map_or(0, |a| a.generation);
        let pending = self.pending.as_ref().map_or(0, |p| p.target.generation);
        active.max(pending)
    }
}

/// Everything a proxy needs, as of one configuration version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ConfigSnapshot {
    /// Monotonic version: the Raft log index that produced this state.
    pub version: u64,
    /// GatewayClasses.
    #[serde(default)]
    pub gateway_classes: Vec<GatewayClass>,
    /// Gateways.
    #[serde(default)]
    pub gateways: Vec<Gateway>,
    /// Namespaces (for `allowedRoutes` selectors).
    #[serde(default)]
    pub namespaces: Vec<Namespace>,
    /// ReferenceGrants.
    #[serde(default)]
    pub reference_grants: Vec<ReferenceGrant>,
    /// Services.
    #[serde(default)]
    pub services: Vec<Service>,
    /// EndpointSlices.
    #[serde(default)]
    pub endpoint_slices: Vec<EndpointSlice>,
    /// Secrets (listener certificates).
    #[serde(default)]
    pub secrets: Vec<Secret>,
    /// ConfigMaps (authorities BackendTLSPolicies trust).
    #[serde(default)]
    pub config_maps: Vec<ConfigMap>,
    /// BackendTLSPolicies.
    #[serde(default)]
    pub backend_tls_policies: Vec<BackendTlsPolicy>,
    /// Routes with their active and pending generations.
    #[serde(default)]
    pub routes: Vec<RouteRecord>,
    /// Endpoint generation of every Service known to the store (see
    /// [`EndpointGenerations`]).
    #[serde(default)]
    pub endpoint_generations: EndpointGenerations,
}

/// A [`ConfigSnapshot`] of borrowed objects: encodes to the very same
/// JSON (same fields, same order) without copying a store first. The
/// endpoint generations are any value that serializes as
/// [`EndpointGenerations`] does (a coordinator's persistent map of them).
#[derive(Debug, Serialize)]
pub struct ConfigSnapshotRef<'a, G: Serialize> {
    /// See [`ConfigSnapshot::version`].
    pub version: u64,
    /// GatewayClasses.
    pub gateway_classes: Vec<&'a GatewayClass>,
    /// Gateways.
    pub gateways: Vec<&'a Gateway>,
    /// Namespaces.
    pub namespaces: Vec<&'a Namespace>,
    /// ReferenceGrants.
    pub reference_grants: Vec<&'a ReferenceGrant>,
    /// Services.
    pub services: Vec<&'a Service>,
    /// EndpointSlices.
    pub endpoint_slices: Vec<&'a EndpointSlice>,
    /// Secrets.
    pub secrets: Vec<&'a Secret>,
    /// ConfigMaps.
    pub config_maps: Vec<&'a ConfigMap>,
    /// BackendTLSPolicies.
    pub backend_tls_policies: Vec<&'a BackendTlsPolicy>,
    /// Routes with their active and pending generations.
    pub routes: Vec<&'a RouteRecord>,
    /// Endpoint generation of every Service.
    pub endpoint_generations: &'a G,
}

impl<'a, G: Serialize> ConfigSnapshotRef<'a, G> {
    /// An empty snapshot at `version` with these generations.
    pub fn new(version: u64, endpoint_generations: &'a G) -> Self {
        ConfigSnapshotRef {
            version,
            gateway_classes: Vec::new(),
            gateways: Vec::new(),
            namespaces: Vec::new(),
            reference_grants: Vec::new(),
            services: Vec::new(),
            endpoint_slices: Vec::new(),
            secrets: Vec::new(),
            config_maps: Vec::new(),
            backend_tls_policies: Vec::new(),
            routes: Vec::new(),
            endpoint_generations,
        }
    }

    /// Files `resource` under its kind, as [`ConfigSnapshot::add`] does;
    /// an HTTPRoute is not filed (routes come as records) and is handed
    /// back.
    pub fn add(&mut self, resource: &'a Resource) -> Option<&'a HttpRoute> {
        match resource {
            Resource::GatewayClass(o) => self.gateway_classes.push(o),
            Resource::Gateway(o) => self.gateways.push(o),
            Resource::ReferenceGrant(o) => self.reference_grants.push(o),
            Resource::Namespace(o) => self.namespaces.push(o),
            Resource::Service(o) => self.services.push(o),
            Resource::EndpointSlice(o) => self.endpoint_slices.push(o),
            Resource::Secret(o) => self.secrets.push(o),
            Resource::ConfigMap(o) => self.config_maps.push(o),
            Resource::BackendTlsPolicy(o) => self.backend_tls_policies.push(o),
            Resource::HttpRoute(route) => return Some(route),
        }
        None
    }
}

/// Per-Service endpoint generations: the log index of the last change to a
/// Service or to any of its EndpointSlices (created, changed or deleted).
///
/// A generation only grows, also when a slice is deleted or a Service is
/// deleted and re-created, so readiness evidence about an older endpoint
/// set never passes for the current one. The replicated state maintains
/// it; the snapshot carries the same map to proxies, so both sides speak of
/// the same numbers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(transparent)]
pub struct EndpointGenerations(#[serde(with = "pairs")] pub BTreeMap<ObjectName, u64>);

impl EndpointGenerations {
    /// The Service's generation (0 when it never changed through the log:
    /// a fixed configuration read from a file).
    pub fn of(&self, service: &ObjectName) -> u64 {
        self.0.get(service).copied().unwrap_or(0)
    }

    /// Records a change to `service` at log `index`; never lowers it.
    pub fn bump(&mut self, service: ObjectName, index: u64) {
        let generation = self.0.entry(service).or_default();
        *generation = (*generation).max(index);
    }
}

impl ConfigSnapshot {
    /// Files `resource` under its kind — the one place that knows which
    /// list holds which kind. An HTTPRoute is handed back: routes travel as
    /// records with generations, which only the caller can give them.
    pub fn add(&mut self, resource: Resource) -> Option<HttpRoute> {
        match resource {
            Resource::GatewayClass(o) => self.gateway_classes.push(o),
            Resource::Gateway(o) => self.gateways.push(o),
            Resource::ReferenceGrant(o) => self.reference_grants.push(o),
            Resource::Namespace(o) => self.namespaces.push(o),
            Resource::Service(o) => self.services.push(o),
            Resource::EndpointSlice(o) => self.endpoint_slices.push(o),
            Resource::Secret(o) => self.secrets.push(o),
            Resource::ConfigMap(o) => self.config_maps.push(o),
            Resource::BackendTlsPolicy(o) => self.backend_tls_policies.push(o),
            Resource::HttpRoute(route) => return Some(route),
        }
        None
    }

    /// The endpoint generation of a backend, from
    /// [`ConfigSnapshot::endpoint_generations`]. `None` when the Service or
    /// the port does not exist (such a backend is never warm and never
    /// ready; the router answers 500 for it).
    pub fn endpoint_generation(&self, backend: &BackendKey) -> Option<u64> {
        let service = self.services.iter().find(|s| {
            s.meta.namespace == backend.service.namespace && s.meta.name == backend.service.name
        })?;
        service
            .ports
            .iter()
            .any(|p| p.port == backend.port)
            .then(|| self.endpoint_generations.of(&backend.service))
    }
}
