//! Object identity and metadata shared by every resource kind.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The resource kinds switchyard stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Kind {
    /// `gateway.networking.k8s.io/v1 GatewayClass` (cluster-scoped).
    GatewayClass,
    /// `gateway.networking.k8s.io/v1 Gateway`.
    Gateway,
    /// `gateway.networking.k8s.io/v1 HTTPRoute`.
    HTTPRoute,
    /// `gateway.networking.k8s.io/v1 GRPCRoute` (stored as the HTTP route
    /// it is equivalent to, [`crate::model::RouteKind::Grpc`]).
    GRPCRoute,
    /// `gateway.networking.k8s.io/v1beta1 ReferenceGrant`.
    ReferenceGrant,
    /// `v1 Namespace` (cluster-scoped; its labels feed `allowedRoutes`).
    Namespace,
    /// `v1 Service`.
    Service,
    /// `discovery.k8s.io/v1 EndpointSlice`.
    EndpointSlice,
    /// `v1 Secret` (`kubernetes.io/tls`: listener certificates).
    Secret,
    /// `v1 ConfigMap` (`ca.crt`: authorities a BackendTLSPolicy trusts).
    ConfigMap,
    /// `gateway.networking.k8s.io/v1 BackendTLSPolicy`.
    BackendTLSPolicy,
}

impl Kind {
    /// Every kind, in the order an apply stores them.
    pub const ALL: [Kind; 11] = [
        Kind::Namespace,
        Kind::GatewayClass,
        Kind::Secret,
        Kind::ConfigMap,
        Kind::Gateway,
        Kind::ReferenceGrant,
        Kind::Service,
        Kind::BackendTLSPolicy,
        Kind::EndpointSlice,
        Kind::HTTPRoute,
        Kind::GRPCRoute,
    ];

    /// Whether objects of this kind are routes: kept as route records with
    /// generations and cutovers, one record per `namespace/name` whatever
    /// the route's kind.
    pub fn is_route(self) -> bool {
        matches!(self, Kind::HTTPRoute | Kind::GRPCRoute)
    }

    /// Whether objects of this kind live outside namespaces.
    pub fn cluster_scoped(self) -> bool {
        matches!(self, Kind::GatewayClass | Kind::Namespace)
    }

    /// The Kubernetes kind name.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::GatewayClass => "GatewayClass",
            Kind::Gateway => "Gateway",
            Kind::HTTPRoute => "HTTPRoute",
            Kind::GRPCRoute => "GRPCRoute",
            Kind::ReferenceGrant => "ReferenceGrant",
            Kind::Namespace => "Namespace",
            Kind::Service => "Service",
            Kind::EndpointSlice => "EndpointSlice",
            Kind::Secret => "Secret",
            Kind::ConfigMap => "ConfigMap",
            Kind::BackendTLSPolicy => "BackendTLSPolicy",
        }
    }

    /// Parses a Kubernetes kind name.
    pub fn parse(kind: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == kind)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `namespace/name` of an object; the namespace is empty for cluster-scoped
/// kinds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct ObjectName {
    /// Namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectName {
    /// Builds a name from its parts.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ObjectName {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

/// Kind plus name: the key of a stored resource.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ResourceKey {
    /// Kind of the object.
    pub kind: Kind,
    /// Its namespace and name.
    #[serde(flatten)]
    pub name: ObjectName,
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, self.name)
    }
}

/// The metadata switchyard keeps from an object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ObjectMeta {
    /// Namespace; empty for cluster-scoped objects.
    #[serde(default)]
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Labels (selectors match on them).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations (`switchyard.io/*` ones tune cutovers).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Creation time in milliseconds since the Unix epoch, when known; used
    /// only to order routes of equal precedence (older first).
    #[serde(default)]
    pub creation_timestamp_ms: Option<i64>,
    /// The Kubernetes `metadata.generation`, when the object came from a
    /// cluster; reported back in status `observedGeneration`.
    #[serde(default)]
    pub k8s_generation: Option<i64>,
    /// The id of the live cluster this object was read from (its
    /// `--kubernetes` source id), `None` for objects from files or
    /// `switchyard apply`. A new leader keeps a cluster's stored objects as
    /// they are until it has listed that cluster, so one cluster that
    /// cannot be reached never makes it delete what the previous leader
    /// stored from there.
    #[serde(default)]
    pub origin: Option<String>,
    /// Raft log index of the apply that last changed this object. Set by the
    /// coordinator's state machine; whatever a client sends is overwritten.
    /// Endpoint-set generations are derived from it.
    #[serde(default)]
    pub revision: u64,
}

impl ObjectMeta {
    /// Metadata with just a namespace and a name.
    pub fn named(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ObjectMeta {
            namespace: namespace.into(),
            name: name.into(),
            ..Default::default()
        }
    }

    /// `namespace/name`.
    pub fn object_name(&self) -> ObjectName {
        ObjectName::new(self.namespace.clone(), self.name.clone())
    }
}
