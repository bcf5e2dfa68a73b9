//! Readiness evidence and what a transition needs evidence for.
//!
//! A backend's *endpoint generation* is the newest revision among its
//! Service and EndpointSlices: evidence about an older endpoint set does not
//! count, so an endpoint change is always re-checked by the data plane.

use crate::state::ReplicatedState;
use std::collections::{BTreeMap, BTreeSet};
use switchyard_proto::model::{BackendKey, HttpRoute, ObjectName, Resource};

/// What one proxy said about one backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendEvidence {
    /// Endpoint generation the proxy checked.
    pub endpoints_generation: u64,
    /// Endpoints that passed the proxy's own health check.
    pub healthy: u32,
    /// Endpoints in that set.
    pub total: u32,
}

impl BackendEvidence {
    /// Whether this evidence shows the backend ready at `generation`.
    pub fn ready_at(&self, generation: u64) -> bool {
        self.healthy > 0 && self.endpoints_generation >= generation
    }
}

/// Current endpoint generation of every backend (Service port) in a state.
#[derive(Debug, Clone, Default)]
pub struct EndpointGenerations {
    services: BTreeMap<ObjectName, (BTreeSet<u16>, u64)>,
}

impl EndpointGenerations {
    /// Reads the Services and EndpointSlices of `state`.
    pub fn of(state: &ReplicatedState) -> Self {
        let mut services: BTreeMap<ObjectName, (BTreeSet<u16>, u64)> = BTreeMap::new();
        for resource in state.resources.values() {
            match resource {
                Resource::Service(s) => {
                    let entry = services.entry(s.meta.object_name()).or_default();
                    entry.0 = s.ports.iter().map(|p| p.port).collect();
                    entry.1 = entry.1.max(s.meta.revision);
                }
                Resource::EndpointSlice(slice) => {
                    if let Some(service) = slice.service_name() {
                        let key = ObjectName::new(slice.meta.namespace.clone(), service);
                        let entry = services.entry(key).or_default();
                        entry.1 = entry.1.max(slice.meta.revision);
                    }
                }
                _ => {}
            }
        }
        // A slice whose Service does not exist leaves an entry with no ports:
        // such a backend is not valid and is never required.
        EndpointGenerations { services }
    }

    /// The backend's current generation, or `None` when the Service or the
    /// port does not exist.
    pub fn generation(&self, backend: &BackendKey) -> Option<u64> {
        let (ports, generation) = self.services.get(&backend.service)?;
        ports.contains(&backend.port).then_some(*generation)
    }
}

/// The backends a route spec sends traffic to, with the endpoint generation
/// evidence must cover. Refs to Services or ports that do not exist are left
/// out: the data plane answers 500 for them whatever the fleet reports, so
/// waiting for them would only block the route.
pub fn required_backends(
    spec: &HttpRoute,
    generations: &EndpointGenerations,
) -> BTreeMap<BackendKey, u64> {
    spec.traffic_backends()
        .into_iter()
        .filter_map(|key| generations.generation(&key).map(|g| (key, g)))
        .collect()
}
