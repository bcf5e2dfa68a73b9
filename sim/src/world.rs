//! The world outside the cores: backends (whether they are really healthy,
//! whether they flap or never come up, whether their Service and slice are
//! in the store yet) and the Kubernetes-shaped resources a user applies —
//! Services, EndpointSlices and HTTPRoutes.
//!
//! It also keeps the *reference* endpoint generation of every backend: the
//! log index of the last entry that created, changed or deleted its
//! Service or slice, recorded by the simulation as it appends — written
//! from the design, not read from the cores — so the invariant checkers
//! judge evidence against what the endpoints really are.
//!
//! Deliberately not modelled: gateways, listeners, matches, filters — the
//! cutover logic only looks at which backends a spec sends traffic to.

use super::rng::Rng;
use std::collections::BTreeMap;
use switchyard_proto::model::{
    ANNOTATION_ON_TIMEOUT, ANNOTATION_POLICY, ANNOTATION_TIMEOUT, BackendKey, BackendRef, Endpoint,
    EndpointPort, EndpointSlice, HttpRoute, ObjectMeta, Resource, RouteRule, SERVICE_NAME_LABEL,
    Service, ServicePort,
};

/// Namespace of every simulated object.
pub const NAMESPACE: &str = "sim";
/// The one Service port backends use.
pub const PORT: u16 = 80;

/// Readiness policies route changes pick from.
const POLICIES: &[&str] = &[
    "all",
    "majority",
    "1",
    "2",
    "60%",
    "per-zone:all",
    "per-zone:1",
    "per-zone:majority",
];

/// One backend as it really is.
#[derive(Debug, Clone)]
pub struct Backend {
    /// Whether its endpoints answer health checks right now.
    pub healthy: bool,
    /// Never becomes healthy (a broken deployment).
    pub never: bool,
    /// Goes up and down during the fault phase.
    pub flappy: bool,
    /// Bumped on every endpoint change, so each slice differs.
    pub version: u32,
    /// Endpoints in its slice.
    pub endpoints: u32,
    /// Log index at which its Service was stored; `None` until then (a
    /// route may arrive before its Service).
    pub service_at: Option<u64>,
    /// Whether its slice is in the store (a deleted slice means its pods
    /// are gone: nothing answers).
    pub slice_present: bool,
    /// Reference endpoint generation: log index of the last change to its
    /// Service or slice.
    pub changed_at: u64,
}

/// Every backend, by number (`b{n}`).
#[derive(Debug, Clone, Default)]
pub struct World {
    /// Backends, indexed by number.
    pub backends: Vec<Backend>,
}

impl World {
    /// The backend key of backend `n`.
    pub fn key(n: usize) -> BackendKey {
        BackendKey::new(NAMESPACE, format!("b{n}"), PORT)
    }

    /// The number of a backend key made by [`World::key`].
    pub fn number(key: &BackendKey) -> Option<usize> {
        key.service.name.strip_prefix('b')?.parse().ok()
    }

    /// Whether the backend's endpoints answer health checks now. Unknown
    /// backends, and backends whose slice is deleted, never do.
    pub fn healthy(&self, key: &BackendKey) -> bool {
        Self::number(key)
            .and_then(|n| self.backends.get(n))
            .is_some_and(|b| b.healthy && !b.never && b.slice_present)
    }

    /// The reference endpoint generation a commit's evidence must cover,
    /// or `None` when the backend's Service is not stored (nothing can be
    /// ready for it).
    pub fn reference_generation(&self, key: &BackendKey) -> Option<u64> {
        let b = self.backends.get(Self::number(key)?)?;
        b.service_at.map(|_| b.changed_at)
    }

    /// The entry at `index` stored `resources` or deleted `keys`: record
    /// which backends' endpoints it changed.
    pub fn note_stored(&mut self, index: u64, resources: &[Resource]) {
        for resource in resources {
            let (n, is_slice) = match resource {
                Resource::Service(s) => (Self::number_of(&s.meta.name), false),
                Resource::EndpointSlice(e) => (
                    e.meta.name.strip_suffix("-slice").and_then(Self::number_of),
                    true,
                ),
                _ => continue,
            };
            let Some(b) = n.and_then(|n| self.backends.get_mut(n)) else {
                continue;
            };
            if is_slice {
                b.slice_present = true;
            } else {
                b.service_at.get_or_insert(index);
            }
            b.changed_at = index;
        }
    }

    /// The entry at `index` deleted backend `n`'s slice.
    pub fn note_slice_deleted(&mut self, n: usize, index: u64) {
        if let Some(b) = self.backends.get_mut(n) {
            b.slice_present = false;
            b.changed_at = index;
        }
    }

    fn number_of(name: &str) -> Option<usize> {
        name.strip_prefix('b')?.parse().ok()
    }

    /// Adds a backend and returns its number and its Service and slice.
    pub fn add_backend(&mut self, rng: &mut Rng) -> (usize, Vec<Resource>) {
        let never = rng.chance(150);
        let backend = Backend {
            healthy: !never,
            never,
            flappy: rng.chance(250),
            version: 0,
            endpoints: 1 + rng.range(0, 3) as u32,
            service_at: None,
            slice_present: false,
            changed_at: 0,
        };
        let n = self.backends.len();
        self.backends.push(backend);
        let service = Resource::Service(Service {
            meta: ObjectMeta::named(NAMESPACE, format!("b{n}")),
            ports: vec![ServicePort {
                name: None,
                port: PORT,
                target_port: Some(8080),
                app_protocol: None,
            }],
        });
        (n, vec![service, self.slice(n)])
    }

    /// A changed endpoint set for backend `n` (a rollout).
    pub fn change_endpoints(&mut self, n: usize, rng: &mut Rng) -> Option<Resource> {
        let backend = self.backends.get_mut(n)?;
        backend.version += 1;
        backend.endpoints = 1 + rng.range(0, 3) as u32;
        Some(self.slice(n))
    }

    /// Backend `n`'s EndpointSlice as it is now.
    pub fn slice(&self, n: usize) -> Resource {
        let (version, count) = self
            .backends
            .get(n)
            .map_or((0, 1), |b| (b.version, b.endpoints));
        let mut meta = ObjectMeta::named(NAMESPACE, format!("b{n}-slice"));
        meta.labels
            .insert(SERVICE_NAME_LABEL.to_string(), format!("b{n}"));
        Resource::EndpointSlice(EndpointSlice {
            meta,
            address_type: "IPv4".into(),
            ports: vec![EndpointPort {
                name: None,
                port: 8080,
            }],
            endpoints: (0..count)
                .map(|k| Endpoint {
                    addresses: vec![format!("10.{}.{}.{}", n % 250, version % 250, k + 1)],
                    ready: true,
                    serving: true,
                    terminating: false,
                    zone: None,
                })
                .collect(),
            cluster: None,
        })
    }

    /// A spec for route `r` sending traffic to `backends` (number, weight),
    /// with a random readiness policy, timeout and on-timeout action.
    pub fn route(
        r: usize,
        backends: &[(usize, u32)],
        rng: &mut Rng,
        timeout_ms: (u64, u64),
    ) -> Resource {
        let mut annotations = BTreeMap::new();
        let policy = rng.pick(POLICIES).copied().unwrap_or("all");
        annotations.insert(ANNOTATION_POLICY.to_string(), policy.to_string());
        let timeout = rng.range(timeout_ms.0, timeout_ms.1 + 1);
        annotations.insert(ANNOTATION_TIMEOUT.to_string(), format!("{timeout}ms"));
        let on_timeout = if rng.chance(300) { "force" } else { "keep-old" };
        annotations.insert(ANNOTATION_ON_TIMEOUT.to_string(), on_timeout.to_string());
        let mut meta = ObjectMeta::named(NAMESPACE, format!("r{r}"));
        meta.annotations = annotations;
        Resource::HttpRoute(HttpRoute {
            kind: Default::default(),
            meta,
            parent_refs: vec![],
            hostnames: vec![],
            rules: vec![RouteRule {
                backend_refs: backends
                    .iter()
                    .map(|(n, weight)| {
                        let mut b = BackendRef::service(format!("b{n}"), PORT);
                        b.weight = *weight;
                        b
                    })
                    .collect(),
                ..Default::default()
            }],
        })
    }
}
