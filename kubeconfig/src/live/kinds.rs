//! The kinds the watchers read, where the API serves them, and the RBAC
//! permissions the code needs — kept together so a new watched kind or a
//! new write cannot be added without its permission.
//!
//! What a cluster is watched for is per source ([`SourceRole`]): a
//! cluster that only runs backends is not asked for Gateway API objects.
//!
//! It deliberately does not talk to any cluster.

use kube::core::ApiResource;
use std::fmt;
use switchyard_proto::model::{Kind, MCS_GROUP};

/// The Gateway API group.
pub(crate) const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// The server-side-apply field manager of every status write. One manager
/// for everything switchyard writes, so its fields are recognisable in
/// `managedFields` and never mistaken for another controller's.
pub const FIELD_MANAGER: &str = "switchyard.io/gateway-controller";

/// Every `(apiGroup, resource, verb)` the live code uses, for the
/// ClusterRole in `deploy/` (a test checks the role grants exactly these):
///
/// - `list` and `watch` on each watched kind (the watchers);
/// - `get` on `httproutes`, `grpcroutes`, `gateways`, `gatewayclasses` and
///   `backendtlspolicies` (the status writers read the current status
///   first, to keep other controllers' `parents[]` / `ancestors[]`
///   entries, unchanged `lastTransitionTime`s and check the term fence;
///   Events read the route's uid and its Gateways' `spec.infrastructure`);
/// - `patch` on `httproutes/status`, `grpcroutes/status`,
///   `gateways/status`, `gatewayclasses/status` and
///   `backendtlspolicies/status` (server-side apply of status);
/// - `get` on `services` (the proxies' LoadBalancer Service: Gateway
///   addresses);
/// - `create` on `events.k8s.io` `events` (cutover Events);
/// - `list` on `httproutes`, `grpcroutes` and `backendtlspolicies` also
///   serves the sweep that removes our status entries from objects no
///   longer served.
///
/// `serviceexports` (Multi-Cluster Services) are watched, and read back
/// (`get`) before their `Valid`/`Conflict` status is applied; switchyard
/// derives the clusterset's imports itself, so ServiceImports are never
/// read.
///
/// Besides these, each cluster is probed with `GET /version`, a
/// non-resource URL every authenticated identity may read (the default
/// `system:public-info-viewer` role); discovery is not used.
pub const REQUIRED_PERMISSIONS: &[(&str, &str, &str)] = &[
    ("", "namespaces", "list"),
    ("", "namespaces", "watch"),
    ("", "services", "list"),
    ("", "services", "watch"),
    ("", "services", "get"),
    // Listener certificates (`kubernetes.io/tls` only, by field selector).
    ("", "secrets", "list"),
    ("", "secrets", "watch"),
    // Authorities BackendTLSPolicies trust (`ca.crt`). Cost: the watch is
    // cluster-wide, so every ConfigMap of the cluster is listed, sent and
    // cached (translated down to its `ca.crt`), not only the referenced
    // ones — there is no selector for "named by a policy", and a
    // per-object watch would need one watch per reference, re-planned on
    // every policy change. Only the ConfigMaps a served policy names are
    // kept in the desired set (`merge`), so the rest never reach Raft or
    // the proxies.
    ("", "configmaps", "list"),
    ("", "configmaps", "watch"),
    ("discovery.k8s.io", "endpointslices", "list"),
    ("discovery.k8s.io", "endpointslices", "watch"),
    (GATEWAY_GROUP, "gatewayclasses", "list"),
    (GATEWAY_GROUP, "gatewayclasses", "watch"),
    (GATEWAY_GROUP, "gatewayclasses", "get"),
    (GATEWAY_GROUP, "gatewayclasses/status", "patch"),
    (GATEWAY_GROUP, "gateways", "list"),
    (GATEWAY_GROUP, "gateways", "watch"),
    (GATEWAY_GROUP, "gateways", "get"),
    (GATEWAY_GROUP, "gateways/status", "patch"),
    (GATEWAY_GROUP, "httproutes", "list"),
    (GATEWAY_GROUP, "httproutes", "watch"),
    (GATEWAY_GROUP, "httproutes", "get"),
    (GATEWAY_GROUP, "httproutes/status", "patch"),
    (GATEWAY_GROUP, "grpcroutes", "list"),
    (GATEWAY_GROUP, "grpcroutes", "watch"),
    (GATEWAY_GROUP, "grpcroutes", "get"),
    (GATEWAY_GROUP, "grpcroutes/status", "patch"),
    (GATEWAY_GROUP, "backendtlspolicies", "list"),
    (GATEWAY_GROUP, "backendtlspolicies", "watch"),
    (GATEWAY_GROUP, "backendtlspolicies", "get"),
    (GATEWAY_GROUP, "backendtlspolicies/status", "patch"),
    (GATEWAY_GROUP, "referencegrants", "list"),
    (GATEWAY_GROUP, "referencegrants", "watch"),
    ("events.k8s.io", "events", "create"),
    (MCS_GROUP, "serviceexports", "list"),
    (MCS_GROUP, "serviceexports", "watch"),
    (MCS_GROUP, "serviceexports", "get"),
    (MCS_GROUP, "serviceexports/status", "patch"),
];

/// What one watcher reads: a kind of the model, or the Multi-Cluster
/// Services `ServiceExport`, which is not stored but decides which
/// Services the clusterset imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Watched {
    /// A stored kind.
    Model(Kind),
    /// `multicluster.x-k8s.io/v1alpha1 ServiceExport`.
    ServiceExport,
}

impl fmt::Display for Watched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Watched::Model(kind) => kind.fmt(f),
            Watched::ServiceExport => f.write_str("ServiceExport"),
        }
    }
}

impl Watched {
    /// The kind's name, as errors and logs give it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Watched::Model(kind) => kind.as_str(),
            Watched::ServiceExport => "ServiceExport",
        }
    }

    /// Whether a CustomResourceDefinition serves this kind: a `404` on
    /// its list means "not installed in this cluster" (no such objects),
    /// not a failure. Core kinds always exist.
    pub(crate) fn is_custom(self) -> bool {
        match self {
            Watched::Model(kind) => coordinates(kind).0 == GATEWAY_GROUP,
            Watched::ServiceExport => true,
        }
    }
}

/// What a cluster is watched for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SourceRole {
    /// Gateway API configuration and backends: every kind.
    #[default]
    Full,
    /// Backends only: Services, EndpointSlices and ServiceExports. A
    /// cluster that runs workloads but no Gateways, typically without the
    /// Gateway API CRDs; its Gateway API objects, if any, are ignored.
    Endpoints,
}

/// Every kind a full source's watchers read, model kinds in
/// [`Kind::ALL`] order.
const FULL: [Watched; 12] = [
    Watched::Model(Kind::Namespace),
    Watched::Model(Kind::GatewayClass),
    Watched::Model(Kind::Secret),
    Watched::Model(Kind::ConfigMap),
    Watched::Model(Kind::Gateway),
    Watched::Model(Kind::ReferenceGrant),
    Watched::Model(Kind::Service),
    Watched::Model(Kind::BackendTLSPolicy),
    Watched::Model(Kind::EndpointSlice),
    Watched::Model(Kind::HTTPRoute),
    Watched::Model(Kind::GRPCRoute),
    Watched::ServiceExport,
];

/// What an endpoints-only source's watchers read.
const ENDPOINTS: [Watched; 3] = [
    Watched::Model(Kind::Service),
    Watched::Model(Kind::EndpointSlice),
    Watched::ServiceExport,
];

impl SourceRole {
    /// The kinds watched in a source of this role.
    pub(crate) fn watched(self) -> &'static [Watched] {
        match self {
            SourceRole::Full => &FULL,
            SourceRole::Endpoints => &ENDPOINTS,
        }
    }
}

/// The label selector of a kind's watch: EndpointSlices only with a
/// `kubernetes.io/service-name` label (slices of a Service; hand-made ones
/// for no Service cannot be a backend, so they are not even read).
pub(crate) fn label_selector(watched: Watched) -> Option<&'static str> {
    match watched {
        Watched::Model(Kind::EndpointSlice) => Some(switchyard_proto::model::SERVICE_NAME_LABEL),
        _ => None,
    }
}

/// The field selector of a kind's watch: Secrets only of type
/// `kubernetes.io/tls` (listener certificates), so no other secret of the
/// cluster is even read.
pub(crate) fn field_selector(watched: Watched) -> Option<&'static str> {
    match watched {
        Watched::Model(Kind::Secret) => Some("type=kubernetes.io/tls"),
        _ => None,
    }
}

/// `(group, version, plural)` of a watched kind.
pub(crate) fn watched_coordinates(watched: Watched) -> (&'static str, &'static str, &'static str) {
    match watched {
        Watched::Model(kind) => coordinates(kind),
        Watched::ServiceExport => (MCS_GROUP, "v1alpha1", "serviceexports"),
    }
}

/// `(group, version, plural)` of a kind as the watchers read it.
pub(crate) fn coordinates(kind: Kind) -> (&'static str, &'static str, &'static str) {
    match kind {
        Kind::Namespace => ("", "v1", "namespaces"),
        Kind::Service => ("", "v1", "services"),
        Kind::Secret => ("", "v1", "secrets"),
        Kind::ConfigMap => ("", "v1", "configmaps"),
        Kind::BackendTLSPolicy => (GATEWAY_GROUP, "v1", "backendtlspolicies"),
        Kind::EndpointSlice => ("discovery.k8s.io", "v1", "endpointslices"),
        Kind::GatewayClass => (GATEWAY_GROUP, "v1", "gatewayclasses"),
        Kind::Gateway => (GATEWAY_GROUP, "v1", "gateways"),
        Kind::HTTPRoute => (GATEWAY_GROUP, "v1", "httproutes"),
        Kind::GRPCRoute => (GATEWAY_GROUP, "v1", "grpcroutes"),
        // v1beta1 is served by every Gateway API release that has
        // ReferenceGrant; v1 only by recent ones. The schema is the same.
        Kind::ReferenceGrant => (GATEWAY_GROUP, "v1beta1", "referencegrants"),
    }
}

/// The dynamic API type of a model kind, for `Api<DynamicObject>`.
pub(crate) fn api_resource(kind: Kind) -> ApiResource {
    watched_api_resource(Watched::Model(kind))
}

/// The dynamic API type of a watched kind, for `Api<DynamicObject>`.
pub(crate) fn watched_api_resource(watched: Watched) -> ApiResource {
    let (group, version, plural) = watched_coordinates(watched);
    let api_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    ApiResource {
        group: group.to_string(),
        version: version.to_string(),
        api_version,
        kind: watched.to_string(),
        plural: plural.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn granted(group: &str, resource: &str, verb: &str) -> bool {
        REQUIRED_PERMISSIONS.contains(&(group, resource, verb))
    }

    #[test]
    fn every_watched_kind_can_be_listed_and_watched() {
        for kind in SourceRole::Full.watched() {
            let (group, _, plural) = watched_coordinates(*kind);
            assert!(granted(group, plural, "list"), "{kind}");
            assert!(granted(group, plural, "watch"), "{kind}");
        }
    }

    #[test]
    fn status_writes_can_read_and_patch() {
        for plural in [
            "httproutes",
            "grpcroutes",
            "gateways",
            "gatewayclasses",
            "backendtlspolicies",
        ] {
            assert!(granted(GATEWAY_GROUP, plural, "get"));
            assert!(granted(GATEWAY_GROUP, &format!("{plural}/status"), "patch"));
        }
    }

    #[test]
    fn nothing_is_listed_twice_and_nothing_is_a_wildcard() {
        let set: BTreeSet<_> = REQUIRED_PERMISSIONS.iter().collect();
        assert_eq!(set.len(), REQUIRED_PERMISSIONS.len());
        for (g, r, v) in REQUIRED_PERMISSIONS {
            assert!(!g.contains('*') && !r.contains('*') && !v.contains('*'));
        }
    }

    #[test]
    fn api_versions_are_group_slash_version() {
        let model = api_resource;
        assert_eq!(model(Kind::Service).api_version, "v1");
        assert_eq!(
            model(Kind::HTTPRoute).api_version,
            "gateway.networking.k8s.io/v1"
        );
        assert_eq!(model(Kind::EndpointSlice).kind, "EndpointSlice");
        let export = watched_api_resource(Watched::ServiceExport);
        assert_eq!(export.api_version, "multicluster.x-k8s.io/v1alpha1");
        assert_eq!(export.plural, "serviceexports");
    }

    #[test]
    fn an_endpoints_source_watches_backends_only_and_crds_are_known() {
        let watched = SourceRole::Endpoints.watched();
        assert!(watched.contains(&Watched::Model(Kind::EndpointSlice)));
        assert!(!watched.contains(&Watched::Model(Kind::Gateway)));
        assert!(Watched::Model(Kind::HTTPRoute).is_custom());
        assert!(Watched::ServiceExport.is_custom());
        assert!(!Watched::Model(Kind::Service).is_custom());
        // Every model kind is watched by a full source.
        for kind in Kind::ALL {
            assert!(SourceRole::Full.watched().contains(&Watched::Model(kind)));
        }
    }
}
