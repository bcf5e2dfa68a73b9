//! Backends: Services, their EndpointSlices, and the ReferenceGrants that
//! allow routes to reach across namespaces.

use super::meta::{ObjectMeta, ObjectName};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The EndpointSlice label naming the Service a slice belongs to.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The API group of the Multi-Cluster Services API (KEP-1645):
/// `ServiceExport`, and `ServiceImport` as a backendRef kind (GEP-1748).
pub const MCS_GROUP: &str = "multicluster.x-k8s.io";

/// What a clusterset `ServiceImport` `namespace/name` is stored as: a
/// Service named `name.clusterset` in the same namespace, whose
/// EndpointSlices are those of every cluster exporting `name`. Kubernetes
/// Service names are DNS labels (no `.`), so this name never collides with
/// a Service read from a cluster.
pub fn service_import_name(name: &str) -> String {
    format!("{name}.clusterset")
}

/// A Service port: the unit a backendRef points at, `namespace/name:port`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BackendKey {
    /// The Service.
    #[serde(flatten)]
    pub service: ObjectName,
    /// The Service port.
    pub port: u16,
}

impl BackendKey {
    /// Builds a key from its parts.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>, port: u16) -> Self {
        BackendKey {
            service: ObjectName::new(namespace, name),
            port,
        }
    }

    /// Parses `namespace/name:port`.
    pub fn parse(text: &str) -> Option<BackendKey> {
        let (ns, rest) = text.split_once('/')?;
        let (name, port) = rest.rsplit_once(':')?;
        if ns.is_empty() || name.is_empty() {
            return None;
        }
        Some(BackendKey::new(ns, name, port.parse().ok()?))
    }
}

impl fmt::Display for BackendKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}:{}",
            self.service.namespace, self.service.name, self.port
        )
    }
}

/// A Service: named ports that map to endpoint ports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Service {
    /// Metadata; `switchyard.io/health-path` and friends tune health checks.
    pub meta: ObjectMeta,
    /// `spec.ports`.
    #[serde(default)]
    pub ports: Vec<ServicePort>,
}

/// One Service port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServicePort {
    /// Port name (EndpointSlice ports are matched by it).
    #[serde(default)]
    pub name: Option<String>,
    /// The Service port number backendRefs use.
    pub port: u16,
    /// The endpoints' port when given as a number; `None` means "same as
    /// `port`" or a named target port resolved through EndpointSlices.
    #[serde(default)]
    pub target_port: Option<u16>,
    /// `appProtocol`: how the proxy speaks to the endpoints
    /// ([`UpstreamProtocol::of`]); `None` is HTTP/1.1.
    #[serde(default)]
    pub app_protocol: Option<String>,
}

/// The protocol the proxy speaks to a Service port's endpoints, from its
/// `appProtocol` (Gateway API GEP-1911): `kubernetes.io/h2c` is HTTP/2
/// over cleartext with prior knowledge; anything else (none, `http`,
/// `kubernetes.io/ws`, unknown values) is HTTP/1.1, which also carries
/// WebSocket upgrades. A backend of a GRPCRoute is [`UpstreamProtocol::Grpc`]
/// whatever its `appProtocol` says: gRPC needs HTTP/2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum UpstreamProtocol {
    /// HTTP/1.1, keep-alive, upgrades.
    #[default]
    Http1,
    /// HTTP/2 prior knowledge (h2c), one multiplexed connection per
    /// endpoint.
    H2c,
    /// gRPC: h2c as [`UpstreamProtocol::H2c`], health-checked with
    /// `grpc.health.v1.Health/Check` unless the Service names an HTTP
    /// health path.
    Grpc,
}

impl UpstreamProtocol {
    /// The `appProtocol` value for HTTP/2 over cleartext.
    pub const H2C: &'static str = "kubernetes.io/h2c";

    /// The protocol for a port's `appProtocol`.
    pub fn of(app_protocol: Option<&str>) -> UpstreamProtocol {
        match app_protocol {
            Some(p) if p.eq_ignore_ascii_case(Self::H2C) => UpstreamProtocol::H2c,
            _ => UpstreamProtocol::Http1,
        }
    }

    /// Whether the endpoints are spoken to over HTTP/2.
    pub fn is_http2(self) -> bool {
        matches!(self, UpstreamProtocol::H2c | UpstreamProtocol::Grpc)
    }
}

/// An EndpointSlice: some endpoints of one Service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointSlice {
    /// Metadata; the label `kubernetes.io/service-name` names the Service.
    pub meta: ObjectMeta,
    /// `addressType` (`IPv4`, `IPv6` or `FQDN`).
    pub address_type: String,
    /// `ports`: name plus the port endpoints listen on.
    #[serde(default)]
    pub ports: Vec<EndpointPort>,
    /// `endpoints`.
    #[serde(default)]
    pub endpoints: Vec<Endpoint>,
    /// Cluster the slice was read from, for multi-cluster merges.
    #[serde(default)]
    pub cluster: Option<String>,
}

impl EndpointSlice {
    /// The Service this slice belongs to, from its label.
    pub fn service_name(&self) -> Option<&str> {
        self.meta.labels.get(SERVICE_NAME_LABEL).map(String::as_str)
    }
}

/// One EndpointSlice port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointPort {
    /// Port name, matching a Service port's name (`None` matches an unnamed
    /// Service port).
    #[serde(default)]
    pub name: Option<String>,
    /// The port endpoints listen on.
    pub port: u16,
}

/// One endpoint with EndpointSlice conditions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// Addresses (all for the same endpoint; switchyard uses the first).
    pub addresses: Vec<String>,
    /// `conditions.ready` (absent means ready).
    #[serde(default = "yes")]
    pub ready: bool,
    /// `conditions.serving` (absent means same as ready).
    #[serde(default = "yes")]
    pub serving: bool,
    /// `conditions.terminating`.
    #[serde(default)]
    pub terminating: bool,
    /// `zone`.
    #[serde(default)]
    pub zone: Option<String>,
}

fn yes() -> bool {
    true
}

/// A ReferenceGrant: lets objects in other namespaces refer to objects in
/// this one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReferenceGrant {
    /// Metadata; the namespace is the one granting access.
    pub meta: ObjectMeta,
    /// Who may refer.
    pub from: Vec<GrantFrom>,
    /// To what.
    pub to: Vec<GrantTo>,
}

/// `spec.from` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantFrom {
    /// Group of the referring kind.
    pub group: String,
    /// Referring kind (for example `HTTPRoute`).
    pub kind: String,
    /// Namespace of the referring objects.
    pub namespace: String,
}

/// `spec.to` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantTo {
    /// Group of the target kind (empty for core).
    pub group: String,
    /// Target kind (for example `Service`).
    pub kind: String,
    /// A single object name, or every object of the kind when `None`.
    #[serde(default)]
    pub name: Option<String>,
}

impl ReferenceGrant {
    /// Whether this grant lets a `from_kind` in `from_namespace` refer to
    /// the object `to_group/to_kind` named `to_name` in the grant's
    /// namespace.
    pub fn permits(
        &self,
        from_group: &str,
        from_kind: &str,
        from_namespace: &str,
        to_group: &str,
        to_kind: &str,
        to_name: &str,
    ) -> bool {
        let from = self
            .from
            .iter()
            .any(|f| f.group == from_group && f.kind == from_kind && f.namespace == from_namespace);
        let to = self.to.iter().any(|t| {
            t.group == to_group
                && t.kind == to_kind
                && t.name.as_deref().is_none_or(|n| n == to_name)
        });
        from && to
    }
}

/// What one proxy found out about one backend through its own data path:
/// readiness evidence, as reported to the leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendEvidence {
    /// The endpoint generation (`ConfigSnapshot::endpoint_generations`) of
    /// the endpoint set checked.
    pub endpoints_generation: u64,
    /// Endpoints that passed the proxy's own health check.
    pub healthy: u32,
    /// Endpoints eligible by their EndpointSlice conditions (the ones
    /// health-checked).
    pub total: u32,
}

impl BackendEvidence {
    /// Whether this evidence shows the backend ready at `generation`.
    pub fn ready_at(&self, generation: u64) -> bool {
        self.healthy > 0 && self.endpoints_generation >= generation
    }
}
