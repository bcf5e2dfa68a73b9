//! Route records (active generation plus an optional pending transition)
//! and the configuration snapshot coordinators stream to proxies.

use super::backend::{BackendKey, EndpointSlice, ReferenceGrant, Service};
use super::gateway::{Gateway, GatewayClass, Namespace};
use super::meta::ObjectName;
use super::policy::CutoverSettings;
use super::route::HttpRoute;
use serde::{Deserialize, Serialize};

/// One generation of a route's spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteGeneration {
    /// Per-route generation, starting at 1, strictly increasing.
    pub generation: u64,
    /// The spec of that generation.
    pub spec: HttpRoute,
}

/// A route change waiting for readiness evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// The generation and spec to cut over to.
    pub target: RouteGeneration,
    /// Policy, timeout and on-timeout action in force for it.
    pub settings: CutoverSettings,
    /// When it was created (leader clock, ms since the Unix epoch).
    pub created_ms: u64,
    /// When it times out (ms since the Unix epoch).
    pub deadline_ms: u64,
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
}

impl RouteRecord {
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
    /// Routes with their active and pending generations.
    #[serde(default)]
    pub routes: Vec<RouteRecord>,
}

impl ConfigSnapshot {
    /// The endpoint generation of a backend: the newest `meta.revision`
    /// among its Service and that Service's EndpointSlices. `None` when the
    /// Service or the port does not exist (such a backend can never be
    /// ready; the router answers 500 for it).
    pub fn endpoint_generation(&self, backend: &BackendKey) -> Option<u64> {
        let service = self.services.iter().find(|s| {
            s.meta.namespace == backend.service.namespace && s.meta.name == backend.service.name
        })?;
        if !service.ports.iter().any(|p| p.port == backend.port) {
            return None;
        }
        let slices = self.endpoint_slices.iter().filter(|e| {
            e.meta.namespace == backend.service.namespace
                && e.service_name() == Some(backend.service.name.as_str())
        });
        Some(
            slices
                .map(|e| e.meta.revision)
                .fold(service.meta.revision, u64::max),
        )
    }
}
