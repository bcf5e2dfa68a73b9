//! backendRefs: whether one resolves to a Service port — a kind switchyard
//! serves (a core Service, or a Multi-Cluster Services `ServiceImport` as
//! GEP-1748 has it), a cross-namespace reference permitted by a
//! ReferenceGrant in the target's namespace, an existing Service with that
//! port — and why not.

use super::{GATEWAY_GROUP, Topology};
use crate::model::backend::{BackendKey, MCS_GROUP};
use crate::model::meta::Kind;
use crate::model::route::{BackendRef, HttpRoute};
use std::fmt;

/// Why a backendRef does not resolve (the route's `ResolvedRefs` is then
/// `False` with [`Unresolved::reason`], and the router answers 500 for it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unresolved {
    /// Neither a core Service nor a ServiceImport.
    InvalidKind {
        /// `namespace/name` of the ref.
        target: String,
        /// Its group (empty: core).
        group: String,
        /// Its kind.
        kind: String,
    },
    /// Cross-namespace without a ReferenceGrant in the target namespace.
    RefNotPermitted {
        /// `namespace/name` of the ref.
        target: String,
        /// The route's namespace.
        from: String,
        /// The route's kind (grants name it).
        kind: Kind,
    },
    /// The Service, or its port, does not exist (or the ref has no port).
    BackendNotFound {
        /// `namespace/name` of the ref.
        target: String,
        /// What is missing.
        what: String,
    },
}

impl Unresolved {
    /// The Gateway API reason for `ResolvedRefs: False`.
    pub fn reason(&self) -> &'static str {
        match self {
            Unresolved::InvalidKind { .. } => "InvalidKind",
            Unresolved::RefNotPermitted { .. } => "RefNotPermitted",
            Unresolved::BackendNotFound { .. } => "BackendNotFound",
        }
    }
}

impl fmt::Display for Unresolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unresolved::InvalidKind {
                target,
                group,
                kind,
            } => {
                let group = if group.is_empty() { "core" } else { group };
                write!(
                    f,
                    "backendRef {target}: kind {group}/{kind} is not supported (only core Service and {MCS_GROUP}/ServiceImport)"
                )
            }
            Unresolved::RefNotPermitted { target, from, kind } => {
                let ns = target.split('/').next().unwrap_or_default();
                write!(
                    f,
                    "backendRef {target}: no ReferenceGrant in {ns} permits {kind}s from {from}"
                )
            }
            Unresolved::BackendNotFound { target, what } => {
                write!(f, "backendRef {target}: {what}")
            }
        }
    }
}

impl Topology<'_> {
    /// Resolves a backendRef of `route` to a Service port: a core Service,
    /// or a clusterset ServiceImport (GEP-1748) as the Service it is stored
    /// as ([`BackendRef::stored_service`]). A cross-namespace reference
    /// needs a ReferenceGrant from the route's own kind.
    pub fn resolve(&self, route: &HttpRoute, r: &BackendRef) -> Result<BackendKey, Unresolved> {
        let route_namespace = route.meta.namespace.as_str();
        let ns = r.namespace.as_deref().unwrap_or(route_namespace);
        let target = format!("{ns}/{}", r.name);
        let Some(stored) = r.stored_service() else {
            return Err(Unresolved::InvalidKind {
                target,
                group: r.group.clone(),
                kind: r.kind.clone(),
            });
        };
        if ns != route_namespace && !self.granted(route, ns, r) {
            return Err(Unresolved::RefNotPermitted {
                target,
                from: route_namespace.to_string(),
                kind: route.kind.kind(),
            });
        }
        let not_found = |what: String| Unresolved::BackendNotFound {
            target: target.clone(),
            what,
        };
        let Some(service) = self.services.get(&(ns, stored.as_str())) else {
            return Err(not_found(if r.is_service_import() {
                "ServiceImport not found (no watched cluster exports the Service)".into()
            } else {
                "Service not found".into()
            }));
        };
        let Some(port) = r.port else {
            return Err(not_found("port is required".into()));
        };
        if !service.ports.iter().any(|p| p.port == port) {
            return Err(not_found(format!("{} has no port {port}", r.kind)));
        }
        Ok(BackendKey::new(ns, stored, port))
    }

    /// Whether a grant living in `target_ns` lets routes of `route`'s kind
    /// and namespace refer to the object `r` names (its group and kind: a
    /// grant for Services does not cover ServiceImports). Grants in other
    /// namespaces never count.
    fn granted(&self, route: &HttpRoute, target_ns: &str, r: &BackendRef) -> bool {
        self.grants.iter().any(|g| {
            g.meta.namespace == target_ns
                && g.permits(
                    GATEWAY_GROUP,
                    route.kind.kind().as_str(),
                    &route.meta.namespace,
                    &r.group,
                    &r.kind,
                    &r.name,
                )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::backend::{GrantFrom, GrantTo, ReferenceGrant, Service, ServicePort};
    use crate::model::meta::ObjectMeta;
    use crate::model::route::RouteKind;
    use crate::model::snapshot::ConfigSnapshot;

    fn snapshot(grants: Vec<ReferenceGrant>) -> ConfigSnapshot {
        let svc = |ns: &str, name: &str| Service {
            meta: ObjectMeta::named(ns, name),
            ports: vec![ServicePort {
                name: None,
                port: 8080,
                target_port: None,
                app_protocol: None,
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

    fn route_in(ns: &str) -> HttpRoute {
        route_of(RouteKind::Http, ns)
    }

    fn route_of(kind: RouteKind, ns: &str) -> HttpRoute {
        HttpRoute {
            kind,
            meta: ObjectMeta::named(ns, "r"),
            parent_refs: Vec::new(),
            hostnames: Vec::new(),
            rules: Vec::new(),
        }
    }

    #[test]
    fn a_grpc_route_needs_a_grant_from_grpc_routes() {
        let from_http = snapshot(vec![grant(
            "web",
            GATEWAY_GROUP,
            "HTTPRoute",
            "infra",
            "Service",
            None,
        )]);
        let grpc = route_of(RouteKind::Grpc, "infra");
        let err = Topology::of_snapshot(&from_http)
            .resolve(&grpc, &cross("web-backend"))
            .unwrap_err();
        assert_eq!(err.reason(), "RefNotPermitted");
        assert!(
            err.to_string().contains("permits GRPCRoutes from infra"),
            "{err}"
        );
        let from_grpc = snapshot(vec![grant(
            "web",
            GATEWAY_GROUP,
            "GRPCRoute",
            "infra",
            "Service",
            None,
        )]);
        assert_eq!(
            Topology::of_snapshot(&from_grpc).resolve(&grpc, &cross("web-backend")),
            Ok(BackendKey::new("web", "web-backend", 8080))
        );
        // And the other way round: a GRPCRoute grant does not cover HTTPRoutes.
        assert!(
            Topology::of_snapshot(&from_grpc)
                .resolve(&route_in("infra"), &cross("web-backend"))
                .is_err()
        );
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
        let idx = Topology::of_snapshot(&s);
        assert_eq!(
            idx.resolve(&route_in("infra"), &BackendRef::service("v1", 8080)),
            Ok(BackendKey::new("infra", "v1", 8080))
        );
    }

    #[test]
    fn unknown_kind_missing_service_and_missing_port_are_invalid() {
        let s = snapshot(vec![]);
        let idx = Topology::of_snapshot(&s);
        let kind = BackendRef {
            kind: "UnknownKind".into(),
            ..BackendRef::service("v1", 8080)
        };
        assert_eq!(
            idx.resolve(&route_in("infra"), &kind).unwrap_err().reason(),
            "InvalidKind"
        );
        let group = BackendRef {
            group: "example.com".into(),
            ..BackendRef::service("v1", 8080)
        };
        assert!(idx.resolve(&route_in("infra"), &group).is_err());
        let missing = idx
            .resolve(
                &route_in("infra"),
                &BackendRef::service("nonexistent", 8080),
            )
            .unwrap_err();
        assert_eq!(missing.reason(), "BackendNotFound");
        assert!(
            missing.to_string().contains("Service not found"),
            "{missing}"
        );
        assert!(
            idx.resolve(&route_in("infra"), &BackendRef::service("v1", 9999))
                .unwrap_err()
                .to_string()
                .contains("no port 9999")
        );
        let no_port = BackendRef {
            port: None,
            ..BackendRef::service("v1", 8080)
        };
        assert!(idx.resolve(&route_in("infra"), &no_port).is_err());
    }

    #[test]
    fn cross_namespace_needs_a_grant_in_the_target_namespace() {
        let without = snapshot(vec![]);
        let refused = Topology::of_snapshot(&without)
            .resolve(&route_in("infra"), &cross("web-backend"))
            .unwrap_err();
        assert_eq!(refused.reason(), "RefNotPermitted");
        assert!(refused.to_string().contains("ReferenceGrant"), "{refused}");

        let good = snapshot(vec![grant(
            "web",
            GATEWAY_GROUP,
            "HTTPRoute",
            "infra",
            "Service",
            None,
        )]);
        assert_eq!(
            Topology::of_snapshot(&good).resolve(&route_in("infra"), &cross("web-backend")),
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
            Topology::of_snapshot(&named)
                .resolve(&route_in("infra"), &cross("web-backend"))
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
                Topology::of_snapshot(&s)
                    .resolve(&route_in("infra"), &cross("web-backend"))
                    .is_err(),
                "{g:?}"
            );
        }
    }

    #[test]
    fn a_service_import_resolves_to_its_stored_service_and_needs_its_own_grant() {
        use crate::model::backend::service_import_name;
        let mut s = snapshot(vec![]);
        let mut import = s.services[1].clone();
        import.meta.name = service_import_name("web-backend");
        s.services.push(import);
        let import_ref = |ns: Option<&str>| BackendRef {
            group: MCS_GROUP.into(),
            kind: "ServiceImport".into(),
            namespace: ns.map(Into::into),
            ..BackendRef::service("web-backend", 8080)
        };
        assert_eq!(
            Topology::of_snapshot(&s).resolve(&route_in("web"), &import_ref(None)),
            Ok(BackendKey::new("web", "web-backend.clusterset", 8080))
        );
        // A grant for Services does not cover ServiceImports...
        s.reference_grants = vec![grant(
            "web",
            GATEWAY_GROUP,
            "HTTPRoute",
            "infra",
            "Service",
            None,
        )];
        let refused = Topology::of_snapshot(&s)
            .resolve(&route_in("infra"), &import_ref(Some("web")))
            .unwrap_err();
        assert_eq!(refused.reason(), "RefNotPermitted");
        // ... one for ServiceImports does.
        s.reference_grants[0].to[0].group = MCS_GROUP.into();
        s.reference_grants[0].to[0].kind = "ServiceImport".into();
        assert!(
            Topology::of_snapshot(&s)
                .resolve(&route_in("infra"), &import_ref(Some("web")))
                .is_ok()
        );
        // Nobody exports "v1": not found, saying why.
        let missing = Topology::of_snapshot(&s)
            .resolve(
                &route_in("infra"),
                &BackendRef {
                    name: "v1".into(),
                    ..import_ref(None)
                },
            )
            .unwrap_err();
        assert_eq!(missing.reason(), "BackendNotFound");
        assert!(missing.to_string().contains("exports"), "{missing}");
    }
}
