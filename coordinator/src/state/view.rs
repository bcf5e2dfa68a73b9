//! Read-only views of the replicated state: the configuration snapshot
//! proxies receive and the per-route status rows. Evidence and applied
//! counts are the leader's soft state and are filled in by the cutover
//! engine, not here.

use super::ReplicatedState;
use switchyard_proto::model::{ConfigSnapshot, ProxyStatus, Resource, RouteStatus};

impl ReplicatedState {
    /// Everything a proxy needs, as of `last_index`.
    pub fn config_snapshot(&self) -> ConfigSnapshot {
        let mut snapshot = ConfigSnapshot {
            version: self.last_index,
            routes: self.routes.values().cloned().collect(),
            ..Default::default()
        };
        for resource in self.resources.values() {
            match resource.clone() {
                Resource::GatewayClass(o) => snapshot.gateway_classes.push(o),
                Resource::Gateway(o) => snapshot.gateways.push(o),
                Resource::ReferenceGrant(o) => snapshot.reference_grants.push(o),
                Resource::Namespace(o) => snapshot.namespaces.push(o),
                Resource::Service(o) => snapshot.services.push(o),
                Resource::EndpointSlice(o) => snapshot.endpoint_slices.push(o),
                // Routes live in `self.routes`; `check_invariants` keeps
                // them out of `resources`.
                Resource::HttpRoute(_) => {}
            }
        }
        snapshot
    }

    /// One status row per route, from replicated state alone.
    pub fn route_statuses(&self) -> Vec<RouteStatus> {
        self.routes
            .values()
            .map(|r| RouteStatus {
                namespace: r.name.namespace.clone(),
                name: r.name.name.clone(),
                active_generation: r.active.as_ref().map(|a| a.generation),
                pending_generation: r.pending.as_ref().map(|p| p.target.generation),
                policy: r.pending.as_ref().map(|p| p.settings.policy.to_string()),
                last_failure: r.last_failure.clone(),
                ..Default::default()
            })
            .collect()
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
            })
            .collect()
    }
}
