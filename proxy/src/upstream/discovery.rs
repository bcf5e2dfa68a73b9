//! Endpoint discovery: which socket addresses serve a backend
//! (`namespace/name:port`) according to a configuration snapshot.
//!
//! Pure: a snapshot in, an [`EndpointSet`] out ([`Discovery`] indexes a
//! snapshot once for many backends). It does not check whether
//! endpoints are reachable (that is the health checker's job) and keeps no
//! state between snapshots.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use switchyard_proto::model::gateway_api::{BackendTransport, Topology};
use switchyard_proto::model::{
    ANNOTATION_HEALTH_PATH, BackendKey, ConfigSnapshot, Endpoint, EndpointSlice, ObjectName,
    RouteKind, Service, ServicePort, UpstreamProtocol,
};

/// Health path used when a Service has no `switchyard.io/health-path`.
pub const DEFAULT_HEALTH_PATH: &str = "/";

/// The gRPC health-checking protocol's method: what a gRPC backend is
/// probed with when its Service names no health path.
pub const GRPC_HEALTH_PATH: &str = "/grpc.health.v1.Health/Check";

/// What the snapshot says about one backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointSet {
    /// The Service's endpoint generation in the snapshot
    /// (`ConfigSnapshot::endpoint_generations`): the generation readiness
    /// reports refer to, the same number the coordinators judge by.
    pub generation: u64,
    /// Endpoints eligible for traffic by their conditions (ready ones;
    /// serving-but-terminating ones only when none is ready), sorted,
    /// without duplicates.
    pub addrs: Vec<SocketAddr>,
    /// Path the proxy health-checks.
    pub health_path: String,
    /// What the proxy speaks to the endpoints (the port's `appProtocol`).
    pub protocol: UpstreamProtocol,
    /// Plaintext, or TLS as the port's BackendTLSPolicy says (or refused
    /// when that policy cannot be used).
    pub transport: BackendTransport,
}

/// Resolves `backend` in `snapshot`. A missing Service or port yields an
/// empty set (generation 0 when the Service is missing). Builds an index
/// of the snapshot first: to resolve many backends, build one
/// [`Discovery`] and ask it.
pub fn resolve(snapshot: &ConfigSnapshot, backend: &BackendKey) -> EndpointSet {
    let grpc = grpc_backends(snapshot).contains(backend);
    Discovery::new(snapshot).resolve(backend, grpc)
}

/// The backends some GRPCRoute sends or mirrors calls to (its active or pending
/// generation): they are spoken to as [`UpstreamProtocol::Grpc`]. One pass
/// over the route records; only GRPCRoutes' backends are collected.
pub fn grpc_backends(snapshot: &ConfigSnapshot) -> HashSet<BackendKey> {
    let mut out = HashSet::new();
    for record in &snapshot.routes {
        let specs = record
            .active
            .iter()
            .chain(record.pending.as_ref().map(|p| &p.target));
        for generation in specs {
            if generation.spec.kind == RouteKind::Grpc {
                out.extend(generation.spec.reached_backends());
            }
        }
    }
    out
}

/// A snapshot's Services and EndpointSlices indexed by Service, built once
/// per snapshot: resolving every backend is then O(backends + slices),
/// where a scan per backend was O(backends × slices) — quadratic in the
/// routes of a large store.
#[derive(Debug)]
pub struct Discovery<'a> {
    snapshot: &'a ConfigSnapshot,
    services: HashMap<(&'a str, &'a str), &'a Service>,
    slices: HashMap<(&'a str, &'a str), Vec<&'a EndpointSlice>>,
    /// The Gateway API rules, only when some BackendTLSPolicy exists (the
    /// one question asked of them here is which policy covers a port).
    topology: Option<Topology<'a>>,
}

impl<'a> Discovery<'a> {
    /// Indexes `snapshot`.
    pub fn new(snapshot: &'a ConfigSnapshot) -> Self {
        let services = snapshot
            .services
            .iter()
            .map(|s| ((s.meta.namespace.as_str(), s.meta.name.as_str()), s))
            .collect();
        let mut slices: HashMap<(&str, &str), Vec<&EndpointSlice>> = HashMap::new();
        for slice in &snapshot.endpoint_slices {
            if let Some(service) = slice.service_name() {
                slices
                    .entry((slice.meta.namespace.as_str(), service))
                    .or_default()
                    .push(slice);
            }
        }
        let topology =
            (!snapshot.backend_tls_policies.is_empty()).then(|| Topology::of_snapshot(snapshot));
        Discovery {
            snapshot,
            services,
            slices,
            topology,
        }
    }

    fn service(&self, backend: &BackendKey) -> Option<&'a Service> {
        self.services
            .get(&(
                backend.service.namespace.as_str(),
                backend.service.name.as_str(),
            ))
            .copied()
    }

    /// What the snapshot says about `backend`; see [`resolve`]. `grpc`:
    /// a GRPCRoute uses it ([`grpc_backends`]).
    pub fn resolve(&self, backend: &BackendKey, grpc: bool) -> EndpointSet {
        let Some(service) = self.service(backend) else {
            return EndpointSet {
                generation: 0,
                addrs: Vec::new(),
                health_path: DEFAULT_HEALTH_PATH.to_owned(),
                protocol: UpstreamProtocol::Http1,
                transport: BackendTransport::Plaintext,
            };
        };
        let health_path = health_path(service, grpc);
        let slices = self
            .slices
            .get(&(service.meta.namespace.as_str(), service.meta.name.as_str()))
            .map_or(&[][..], Vec::as_slice);
        let generation = self.snapshot.endpoint_generations.of(&backend.service);
        let Some(port) = service.ports.iter().find(|p| p.port == backend.port) else {
            return EndpointSet {
                generation,
                addrs: Vec::new(),
                health_path,
                protocol: UpstreamProtocol::Http1,
                transport: BackendTransport::Plaintext,
            };
        };
        // KEP-1669, as kube-proxy does it: ready endpoints; only when a
        // backend has none, the ones still serving while terminating (a
        // rolling update's last pods), rather than none at all.
        let mut ready = BTreeSet::new();
        let mut terminating = BTreeSet::new();
        for slice in slices {
            if slice.address_type == "FQDN" {
                // Resolving names is not the data plane's business; FQDN
                // slices are skipped rather than half-supported.
                continue;
            }
            let Some(target) = slice_port(slice, port) else {
                continue;
            };
            for endpoint in &slice.endpoints {
                let class = match condition(endpoint) {
                    Condition::Ready => &mut ready,
                    Condition::ServingTerminating => &mut terminating,
                    Condition::Out => continue,
                };
                if let Some(ip) = endpoint
                    .addresses
                    .first()
                    .and_then(|a| a.parse::<IpAddr>().ok())
                {
                    class.insert(SocketAddr::new(ip, target));
                }
            }
        }
        let addrs = if ready.is_empty() { terminating } else { ready };
        EndpointSet {
            generation,
            addrs: addrs.into_iter().collect(),
            health_path,
            protocol: if grpc {
                UpstreamProtocol::Grpc
            } else {
                UpstreamProtocol::of(port.app_protocol.as_deref())
            },
            transport: self.topology.as_ref().map_or_else(
                || BackendTransport::without_policy(port),
                |t| t.backend_transport(service, port),
            ),
        }
    }
}

/// Every backend's endpoint generation in one snapshot, indexed once: the
/// answer of [`ConfigSnapshot::endpoint_generation`] (`None` when the
/// Service or its port does not exist) without a scan of every Service per
/// question. Owned, so the apply loop keeps it with its snapshot.
#[derive(Debug, Default)]
pub struct BackendGenerations(HashMap<ObjectName, (Vec<u16>, u64)>);

impl BackendGenerations {
    /// Indexes `snapshot`'s Services.
    pub fn new(snapshot: &ConfigSnapshot) -> Self {
        BackendGenerations(
            snapshot
                .services
                .iter()
                .map(|s| {
                    let name = s.meta.object_name();
                    let generation = snapshot.endpoint_generations.of(&name);
                    (name, (s.ports.iter().map(|p| p.port).collect(), generation))
                })
                .collect(),
        )
    }

    /// The backend's endpoint generation, or `None` when its Service or
    /// port does not exist.
    pub fn of(&self, backend: &BackendKey) -> Option<u64> {
        let (ports, generation) = self.0.get(&backend.service)?;
        ports.contains(&backend.port).then_some(*generation)
    }
}

/// The port endpoints of `slice` listen on for Service port `port`: the
/// slice port with the same name. A slice that lists ports but not this
/// one does not serve it (Kubernetes semantics: a multi-cluster import
/// keeps only the ports each cluster exports compatibly); a slice without
/// any ports (hand-written files) listens on the Service's numeric target
/// port, else the Service port itself.
fn slice_port(slice: &EndpointSlice, port: &ServicePort) -> Option<u16> {
    if slice.ports.is_empty() {
        return Some(port.target_port.unwrap_or(port.port));
    }
    let name = port.name.as_deref().filter(|n| !n.is_empty());
    slice
        .ports
        .iter()
        .find(|p| p.name.as_deref().filter(|n| !n.is_empty()) == name)
        .map(|p| p.port)
}

/// How an endpoint's EndpointSlice conditions let it take traffic.
enum Condition {
    /// `ready`, or still `serving` while not terminating.
    Ready,
    /// `serving` and `terminating`: used only when no endpoint is ready.
    ServingTerminating,
    /// Neither.
    Out,
}

fn condition(endpoint: &Endpoint) -> Condition {
    if endpoint.ready || (endpoint.serving && !endpoint.terminating) {
        Condition::Ready
    } else if endpoint.serving {
        Condition::ServingTerminating
    } else {
        Condition::Out
    }
}

/// The Service's `switchyard.io/health-path`, else the gRPC health method
/// for a gRPC backend and `/` for others.
fn health_path(service: &Service, grpc: bool) -> String {
    let default = if grpc {
        GRPC_HEALTH_PATH
    } else {
        DEFAULT_HEALTH_PATH
    };
    service
        .meta
        .annotations
        .get(ANNOTATION_HEALTH_PATH)
        .filter(|p| p.starts_with('/'))
        .cloned()
        .unwrap_or_else(|| default.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_proto::model::{EndpointPort, ObjectMeta, SERVICE_NAME_LABEL};

    fn service(revision: u64, name: Option<&str>, target: Option<u16>) -> Service {
        let mut meta = ObjectMeta::named("ns", "svc");
        meta.revision = revision;
        Service {
            meta,
            ports: vec![ServicePort {
                name: name.map(str::to_owned),
                port: 80,
                target_port: target,
                app_protocol: None,
            }],
        }
    }

    fn endpoint(addr: &str, ready: bool, serving: bool, terminating: bool) -> Endpoint {
        Endpoint {
            addresses: vec![addr.to_owned()],
            ready,
            serving,
            terminating,
            zone: None,
        }
    }

    fn slice(
        name: &str,
        revision: u64,
        ports: Vec<EndpointPort>,
        eps: Vec<Endpoint>,
    ) -> EndpointSlice {
        let mut meta = ObjectMeta::named("ns", name);
        meta.revision = revision;
        meta.labels
            .insert(SERVICE_NAME_LABEL.to_owned(), "svc".to_owned());
        EndpointSlice {
            meta,
            address_type: "IPv4".to_owned(),
            ports,
            endpoints: eps,
            cluster: None,
        }
    }

    #[test]
    fn named_ports_conditions_and_generation() {
        let snapshot = ConfigSnapshot {
            services: vec![service(3, Some("http"), None)],
            endpoint_slices: vec![
                slice(
                    "a",
                    7,
                    vec![EndpointPort {
                        name: Some("http".into()),
                        port: 8080,
                    }],
                    vec![
                        endpoint("10.0.0.1", true, true, false),
                        endpoint("10.0.0.2", false, true, false),
                        endpoint("10.0.0.3", false, true, true),
                        endpoint("10.0.0.4", false, false, false),
                    ],
                ),
                slice("other", 99, vec![], vec![]),
            ],
            ..Default::default()
        };
        // The "other" slice also carries the label; make it a different service.
        let mut snapshot = snapshot;
        snapshot.endpoint_slices[1]
            .meta
            .labels
            .insert(SERVICE_NAME_LABEL.into(), "not-svc".into());
        snapshot
            .endpoint_generations
            .bump(switchyard_proto::model::ObjectName::new("ns", "svc"), 7);
        let set = resolve(&snapshot, &BackendKey::new("ns", "svc", 80));
        assert_eq!(set.generation, 7);
        assert_eq!(
            set.addrs,
            vec![
                "10.0.0.1:8080".parse().unwrap(),
                "10.0.0.2:8080".parse().unwrap()
            ]
        );
        assert_eq!(set.health_path, "/");
    }

    #[test]
    fn target_port_fallback_and_missing() {
        let mut svc = service(1, None, Some(9000));
        svc.meta
            .annotations
            .insert(ANNOTATION_HEALTH_PATH.into(), "/healthz".into());
        let snapshot = ConfigSnapshot {
            services: vec![svc],
            endpoint_slices: vec![slice(
                "a",
                2,
                vec![],
                vec![endpoint("127.0.0.1", true, true, false)],
            )],
            ..Default::default()
        };
        let set = resolve(&snapshot, &BackendKey::new("ns", "svc", 80));
        assert_eq!(set.addrs, vec!["127.0.0.1:9000".parse().unwrap()]);
        assert_eq!(set.health_path, "/healthz");
        assert!(
            resolve(&snapshot, &BackendKey::new("ns", "svc", 81))
                .addrs
                .is_empty()
        );
        let missing = resolve(&snapshot, &BackendKey::new("ns", "nope", 80));
        assert_eq!(missing.generation, 0);
        assert!(missing.addrs.is_empty());
    }

    #[test]
    fn terminating_but_serving_endpoints_serve_only_when_none_is_ready() {
        let snapshot = |eps: Vec<Endpoint>| ConfigSnapshot {
            services: vec![service(1, None, Some(8080))],
            endpoint_slices: vec![slice("a", 1, vec![], eps)],
            ..Default::default()
        };
        let backend = BackendKey::new("ns", "svc", 80);
        let draining = endpoint("10.0.0.2", false, true, true);
        let gone = endpoint("10.0.0.3", false, false, true);
        let with_ready = snapshot(vec![
            endpoint("10.0.0.1", true, true, false),
            draining.clone(),
            gone.clone(),
        ]);
        assert_eq!(
            resolve(&with_ready, &backend).addrs,
            vec!["10.0.0.1:8080".parse().unwrap()]
        );
        let rolling_out = snapshot(vec![draining, gone]);
        assert_eq!(
            resolve(&rolling_out, &backend).addrs,
            vec!["10.0.0.2:8080".parse().unwrap()],
            "KEP-1669: the serving terminating endpoint rather than none"
        );
    }

    #[test]
    fn a_slice_listing_other_ports_does_not_serve_this_one() {
        let named = |name: &str, port: u16| EndpointPort {
            name: Some(name.into()),
            port,
        };
        let snapshot = ConfigSnapshot {
            services: vec![service(1, Some("http"), None)],
            endpoint_slices: vec![
                slice(
                    "a",
                    1,
                    vec![named("http", 8080)],
                    vec![endpoint("10.0.0.1", true, true, false)],
                ),
                slice(
                    "b",
                    1,
                    vec![named("metrics", 9090)],
                    vec![endpoint("10.0.0.2", true, true, false)],
                ),
            ],
            ..Default::default()
        };
        assert_eq!(
            resolve(&snapshot, &BackendKey::new("ns", "svc", 80)).addrs,
            vec!["10.0.0.1:8080".parse().unwrap()]
        );
    }
}
