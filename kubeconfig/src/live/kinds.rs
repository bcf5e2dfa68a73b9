//! The kinds the watchers read, where the API serves them, and the RBAC
//! permissions the code needs — kept together so a new watched kind or a
//! new write cannot be added without its permission.
//!
//! It deliberately does not talk to any cluster.

use kube::core::ApiResource;
use switchyard_proto::model::Kind;

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
/// - `get` on `httproutes`, `gateways` and `gatewayclasses` (the status
///   writers read the current status first, to keep other controllers'
///   `parents[]` entries, unchanged `lastTransitionTime`s and check the
///   term fence; Events read the route's uid and its Gateways'
///   `spec.infrastructure`);
/// - `patch` on `httproutes/status`, `gateways/status` and
///   `gatewayclasses/status` (server-side apply of status);
/// - `get` on `services` (the proxies' LoadBalancer Service: Gateway
///   addresses);
/// - `create` on `events.k8s.io` `events` (cutover Events);
/// - `list` on `httproutes` also serves the sweep that removes our status
///   entries from routes no longer served.
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
    (GATEWAY_GROUP, "referencegrants", "list"),
    (GATEWAY_GROUP, "referencegrants", "watch"),
    ("events.k8s.io", "events", "create"),
];

/// Every kind the watchers read, in [`Kind::ALL`] order.
pub(crate) const WATCHED: [Kind; 7] = Kind::ALL;

/// `(group, version, plural)` of a kind as the watchers read it.
pub(crate) fn coordinates(kind: Kind) -> (&'static str, &'static str, &'static str) {
    match kind {
        Kind::Namespace => ("", "v1", "namespaces"),
        Kind::Service => ("", "v1", "services"),
        Kind::EndpointSlice => ("discovery.k8s.io", "v1", "endpointslices"),
        Kind::GatewayClass => (GATEWAY_GROUP, "v1", "gatewayclasses"),
        Kind::Gateway => (GATEWAY_GROUP, "v1", "gateways"),
        Kind::HTTPRoute => (GATEWAY_GROUP, "v1", "httproutes"),
        // v1beta1 is served by every Gateway API release that has
        // ReferenceGrant; v1 only by recent ones. The schema is the same.
        Kind::ReferenceGrant => (GATEWAY_GROUP, "v1beta1", "referencegrants"),
    }
}

/// The dynamic API type of a kind, for `Api<DynamicObject>`.
pub(crate) fn api_resource(kind: Kind) -> ApiResource {
    let (group, version, plural) = coordinates(kind);
    let api_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    ApiResource {
        group: group.to_string(),
        version: version.to_string(),
        api_version,
        kind: kind.as_str().to_string(),
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
        for kind in WATCHED {
            let (group, _, plural) = coordinates(kind);
            assert!(granted(group, plural, "list"), "{kind}");
            assert!(granted(group, plural, "watch"), "{kind}");
        }
    }

    #[test]
    fn status_writes_can_read_and_patch() {
        for plural in ["httproutes", "gateways", "gatewayclasses"] {
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
        assert_eq!(api_resource(Kind::Service).api_version, "v1");
        assert_eq!(
            api_resource(Kind::HTTPRoute).api_version,
            "gateway.networking.k8s.io/v1"
        );
        assert_eq!(api_resource(Kind::EndpointSlice).kind, "EndpointSlice");
    }
}
