//! backendRefs: whether each one is valid (known kind, existing Service and
//! port, cross-namespace references permitted by a ReferenceGrant) and the
//! weighted choice between them.
//!
//! It owns reference validity and weights only. What a rule does with an
//! invalid choice (answer 500) is the table's; endpoints, health and
//! warm-up belong to the upstream side.

use std::collections::HashMap;
use switchyard_proto::model::{BackendKey, BackendRef, ConfigSnapshot, ReferenceGrant, Service};

/// The API group of HTTPRoute, as ReferenceGrants name it.
pub(crate) const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// Services and grants indexed for resolving backendRefs.
pub(crate) struct BackendIndex<'a> {
    services: HashMap<(&'a str, &'a str), &'a Service>,
    grants: &'a [ReferenceGrant],
}

impl<'a> BackendIndex<'a> {
    /// Indexes the snapshot's Services and ReferenceGrants.
    pub(crate) fn new(snapshot: &'a ConfigSnapshot) -> BackendIndex<'a> {
        let services = snapshot
            .services
            .iter()
            .map(|s| ((s.meta.namespace.as_str(), s.meta.name.as_str()), s))
            .collect();
        BackendIndex {
            services,
            grants: &snapshot.reference_grants,
        }
    }

    /// Resolves a backendRef of a route in `route_ns` to a Service port, or
    /// says why it is invalid (the reason ends up in 500 answers and notes).
    pub(crate) fn resolve(&self, route_ns: &str, r: &BackendRef) -> Result<BackendKey, String> {
        let ns = r.namespace.as_deref().unwrap_or(route_ns);
        if !r.is_service() {
            return Err(format!(
                "backendRef {ns}/{} has unsupported kind {:?} (group {:?}); only core Service is served",
                r.name, r.kind, r.group
            ));
        }
        let Some(port) = r.port else {
            return Err(format!("backendRef Service {ns}/{} has no port", r.name));
        };
        if ns != route_ns && !self.granted(route_ns, ns, &r.name) {
            return Err(format!(
                "backendRef Service {ns}/{} is in another namespace and no ReferenceGrant in {ns} permits HTTPRoutes from {route_ns}",
                r.name
            ));
        }
        let Some(service) = self.services.get(&(ns, r.name.as_str())) else {
            return Err(format!("backendRef Service {ns}/{} does not exist", r.name));
        };
        if !service.ports.iter().any(|p| p.port == port) {
            return Err(format!(
                "backendRef Service {ns}/{} has no port {port}",
                r.name
            ));
        }
        Ok(BackendKey::new(ns, r.name.clone(), port))
    }

    /// Whether a grant living in `target_ns` lets HTTPRoutes of `route_ns`
    /// refer to the Service `name`. Grants in other namespaces never count.
    fn granted(&self, route_ns: &str, target_ns: &str, name: &str) -> bool {
        self.grants.iter().any(|g| {
            g.meta.namespace == target_ns
                && g.permits(GATEWAY_GROUP, "HTTPRoute", route_ns, "", "Service", name)
        })
    }
}

/// Picks an index by weight with `random % total`. Weight 0 is never
/// picked; `None` when every weight is 0.
pub(crate) fn pick_weighted(
    weights: impl Iterator<Item = u32> + Clone,
    random: u64,
) -> Option<usize> {
    let total: u64 = weights.clone().map(u64::from).sum();
    if total == 0 {
        return None;
    }
    let mut point = random % total;
    for (i, w) in weights.enumerate() {
        let w = u64::from(w);
        if point < w {
            return Some(i);
        }
        point -= w;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_proto::model::{GrantFrom, GrantTo, ObjectMeta, ServicePort};

    fn snapshot(grants: Vec<ReferenceGrant>) -> ConfigSnapshot {
        let svc = |ns: &str, name: &str| Service {
            meta: ObjectMeta::named(ns, name),
            ports: vec![ServicePort {
                name: None,
                port: 8080,
                target_port: None,
            }],
        };
        ConfigSnapshot {
            services: vec![svc("infra", "v1"), svc("web", "web-backend")],
            reference_grants: grants,
            ..Default::default()
        }
    }

    fn grant(
        ns: &str,
        from_group: &str,
        from_kind: &str,
        from_ns: &str,
        to_kind: &str,
        name: Option<&str>,
    ) -> ReferenceGrant {
        ReferenceGrant {
            meta: ObjectMeta::named(ns, "g"),
            from: vec![GrantFrom {
                group: from_group.into(),
                kind: from_kind.into(),
                namespace: from_ns.into(),
            }],
            to: vec![GrantTo {
                group: String::new(),
                kind: to_kind.into(),
                name: name.map(Into::into),
            }],
        }
    }

    fn cross(name: &str) -> BackendRef {
        BackendRef {
            namespace: Some("web".into()),
            ..BackendRef::service(name, 8080)
        }
    }

    #[test]
    fn same_namespace_service_port_resolves() {
        let s = snapshot(vec![]);
        let idx = BackendIndex::new(&s);
        assert_eq!(
            idx.resolve("infra", &BackendRef::service("v1", 8080)),
            Ok(BackendKey::new("infra", "v1", 8080))
        );
    }

    #[test]
    fn unknown_kind_missing_service_and_missing_port_are_invalid() {
        let s = snapshot(vec![]);
        let idx = BackendIndex::new(&s);
        let kind = BackendRef {
            kind: "UnknownKind".into(),
            ..BackendRef::service("v1", 8080)
        };
        assert!(
            idx.resolve("infra", &kind)
                .unwrap_err()
                .contains("unsupported kind")
        );
        let group = BackendRef {
            group: "example.com".into(),
            ..BackendRef::service("v1", 8080)
        };
        assert!(idx.resolve("infra", &group).is_err());
        assert!(
            idx.resolve("infra", &BackendRef::service("nonexistent", 8080))
                .unwrap_err()
                .contains("does not exist")
        );
        assert!(
            idx.resolve("infra", &BackendRef::service("v1", 9999))
                .unwrap_err()
                .contains("no port 9999")
        );
        let no_port = BackendRef {
            port: None,
            ..BackendRef::service("v1", 8080)
        };
        assert!(idx.resolve("infra", &no_port).is_err());
    }

    #[test]
    fn cross_namespace_needs_a_grant_in_the_target_namespace() {
        let without = snapshot(vec![]);
        assert!(
            BackendIndex::new(&without)
                .resolve("infra", &cross("web-backend"))
                .unwrap_err()
                .contains("ReferenceGrant")
        );

        let good = snapshot(vec![grant(
            "web",
            GATEWAY_GROUP,
            "HTTPRoute",
            "infra",
            "Service",
            None,
        )]);
        assert_eq!(
            BackendIndex::new(&good).resolve("infra", &cross("web-backend")),
            Ok(BackendKey::new("web", "web-backend", 8080))
        );
        let named = snapshot(vec![grant(
            "web",
            GATEWAY_GROUP,
            "HTTPRoute",
            "infra",
            "Service",
            Some("web-backend"),
        )]);
        assert!(
            BackendIndex::new(&named)
                .resolve("infra", &cross("web-backend"))
                .is_ok()
        );

        // Each grant below is wrong in exactly one way.
        let wrong = [
            grant(
                "infra",
                GATEWAY_GROUP,
                "HTTPRoute",
                "infra",
                "Service",
                None,
            ),
            grant("web", "wrong.group", "HTTPRoute", "infra", "Service", None),
            grant("web", GATEWAY_GROUP, "Gateway", "infra", "Service", None),
            grant("web", GATEWAY_GROUP, "HTTPRoute", "other", "Service", None),
            grant("web", GATEWAY_GROUP, "HTTPRoute", "infra", "Secret", None),
            grant(
                "web",
                GATEWAY_GROUP,
                "HTTPRoute",
                "infra",
                "Service",
                Some("other"),
            ),
        ];
        for g in wrong {
            let s = snapshot(vec![g.clone()]);
            assert!(
                BackendIndex::new(&s)
                    .resolve("infra", &cross("web-backend"))
                    .is_err(),
                "{g:?}"
            );
        }
    }

    #[test]
    fn weighted_pick_uses_random_modulo_total() {
        let w = [7u32, 3, 0];
        let pick = |r| pick_weighted(w.iter().copied(), r);
        assert_eq!(pick(0), Some(0));
        assert_eq!(pick(6), Some(0));
        assert_eq!(pick(7), Some(1));
        assert_eq!(pick(9), Some(1));
        assert_eq!(pick(10), Some(0));
        // Weight 0 is never chosen, whatever the random number.
        assert!((0..1000).all(|r| pick(r) != Some(2)));
        assert_eq!(pick_weighted([0u32, 0].iter().copied(), 5), None);
    }
}
