//! `GRPCRoute` into the model: the HTTP route it is equivalent to, with
//! [`RouteKind::Grpc`].
//!
//! A gRPC call is an HTTP/2 `POST /<service>/<method>`, so a method match
//! is a path match:
//!
//! | `method` (type `Exact`, the default) | path |
//! | --- | --- |
//! | service and method | `Exact /<service>/<method>` |
//! | service only | `PathPrefix /<service>` (every method) |
//! | method only | `RegularExpression /[^/]+/<method>` |
//!
//! Type `RegularExpression` makes one expression of both parts, a missing
//! one `[^/]+`. Exact names are checked against the CRD's patterns (a
//! service is dot-separated identifiers, a method one identifier), so they
//! never carry a `/` or a regex metacharacter other than the service's
//! dots — which only ever land in an exact or prefix path. A rule without
//! matches, or a match without `method`, takes every call.
//!
//! Parent refs, backendRefs and filters have the same shape as the
//! HTTPRoute's (the gateway-api crate generates separate types for them),
//! so they go through one JSON re-reading into the HTTPRoute types and the
//! same translation ([`crate::route`], [`crate::filter`]): a GRPCRoute
//! filter switchyard does not serve (`ExtensionRef`) is refused the same
//! way. Header matches are HTTP header matches.

use crate::convert::{indexed, object_meta};
use crate::error::Problem;
use crate::route::{backend_ref, header_match, parent_ref};
use gateway_api::apis::standard::grpcroutes::{
    GrpcRoute as K8sGrpcRoute, GrpcRouteRules, GrpcRouteRulesMatches, GrpcRouteRulesMatchesMethod,
    GrpcRouteRulesMatchesMethodType as MethodType,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use switchyard_proto::model::{
    HttpRoute, Kind, PathMatch, Resource, RouteKind, RouteMatch, RouteRule,
};

/// Translates a GRPCRoute.
pub(crate) fn grpc_route(o: K8sGrpcRoute) -> Result<Resource, Problem> {
    let meta = object_meta(o.metadata, Kind::GRPCRoute)?;
    let parent_refs = indexed(o.spec.parent_refs, "spec.parentRefs", |f, p| {
        parent_ref(f, same_shape(f, p)?)
    })?;
    let rules = indexed(o.spec.rules, "spec.rules", rule)?;
    Ok(Resource::HttpRoute(HttpRoute {
        kind: RouteKind::Grpc,
        meta,
        parent_refs,
        hostnames: o.spec.hostnames.unwrap_or_default(),
        rules,
    }))
}

/// Re-reads a GRPCRoute part as the identically shaped HTTPRoute type.
fn same_shape<T: Serialize, U: DeserializeOwned>(f: &str, part: T) -> Result<U, Problem> {
    serde_json::to_value(part)
        .and_then(serde_json::from_value)
        .map_err(|e| Problem::invalid(f, format!("cannot be read as its HTTPRoute form: {e}")))
}

fn rule(f: &str, r: GrpcRouteRules) -> Result<RouteRule, Problem> {
    let matches = match r.matches {
        None => vec![every_call()],
        Some(ms) => indexed(Some(ms), &format!("{f}.matches"), route_match)?,
    };
    let filters = indexed(r.filters, &format!("{f}.filters"), |f, filter| {
        crate::filter::route_filter(f, same_shape(f, filter)?)
    })?;
    let backend_refs = indexed(r.backend_refs, &format!("{f}.backendRefs"), |f, b| {
        backend_ref(f, same_shape(f, b)?)
    })?;
    Ok(RouteRule {
        name: r.name,
        matches,
        filters,
        backend_refs,
    })
}

fn every_call() -> RouteMatch {
    RouteMatch {
        path: Some(PathMatch::PathPrefix("/".to_string())),
        ..RouteMatch::default()
    }
}

fn route_match(f: &str, m: GrpcRouteRulesMatches) -> Result<RouteMatch, Problem> {
    let path = match m.method {
        None => PathMatch::PathPrefix("/".to_string()),
        Some(method) => method_path(&format!("{f}.method"), method)?,
    };
    Ok(RouteMatch {
        path: Some(path),
        headers: m
            .headers
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, h)| Ok(header_match(same_shape(&format!("{f}.headers[{i}]"), h)?)))
            .collect::<Result<_, Problem>>()?,
        query_params: Vec::new(),
        method: None,
    })
}

/// The path condition of a method match (see the module's table).
fn method_path(f: &str, m: GrpcRouteRulesMatchesMethod) -> Result<PathMatch, Problem> {
    let service = m.service.filter(|s| !s.is_empty());
    let method = m.method.filter(|s| !s.is_empty());
    if service.is_none() && method.is_none() {
        return Err(Problem::invalid(f, "one of service and method is required"));
    }
    if matches!(m.r#type, Some(MethodType::RegularExpression)) {
        let part =
            |p: Option<String>| p.map_or_else(|| "[^/]+".to_string(), |p| format!("(?:{p})"));
        return Ok(PathMatch::RegularExpression(format!(
            "/{}/{}",
            part(service),
            part(method)
        )));
    }
    if let Some(s) = &service
        && !is_service_name(s)
    {
        return Err(Problem::invalid(
            format!("{f}.service"),
            format!("{s:?} is not a gRPC service name (dot-separated identifiers)"),
        ));
    }
    if let Some(m) = &method
        && !is_identifier(m)
    {
        return Err(Problem::invalid(
            format!("{f}.method"),
            format!("{m:?} is not a gRPC method name (an identifier)"),
        ));
    }
    Ok(match (service, method) {
        (Some(s), Some(m)) => PathMatch::Exact(format!("/{s}/{m}")),
        (Some(s), None) => PathMatch::PathPrefix(format!("/{s}")),
        (None, Some(m)) => PathMatch::RegularExpression(format!("/[^/]+/{m}")),
        (None, None) => unreachable!("checked above"),
    })
}

/// `[A-Za-z_][A-Za-z_0-9]*`: a method name, and each part of a service's.
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Dot-separated identifiers, an optional leading dot (the CRD's pattern).
fn is_service_name(s: &str) -> bool {
    let s = s.strip_prefix('.').unwrap_or(s);
    s.split('.').all(is_identifier)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_documents;
    use switchyard_proto::model::{BackendRef, Filter, ParentRef};

    const ROUTE: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: calls, namespace: shop}
spec:
  parentRefs: [{name: gw, sectionName: grpc}]
  hostnames: [calls.example]
  rules:
  - matches:
    - method: {service: echo.Echo, method: Say}
      headers: [{name: x-tier, value: gold}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: x-via, value: gw}]}
    backendRefs: [{name: gold, port: 9000, weight: 3}]
  - backendRefs: [{name: echo, port: 9000}]
"#;

    #[test]
    fn a_grpc_route_document_becomes_its_http_form() {
        let resources = parse_documents("calls.yaml", ROUTE).unwrap();
        let [Resource::HttpRoute(route)] = resources.as_slice() else {
            panic!("{resources:?}");
        };
        assert_eq!(route.kind, RouteKind::Grpc);
        assert_eq!(resources[0].key().to_string(), "GRPCRoute shop/calls");
        assert_eq!(route.hostnames, ["calls.example"]);
        assert_eq!(
            route.parent_refs,
            [ParentRef {
                group: "gateway.networking.k8s.io".into(),
                kind: "Gateway".into(),
                namespace: None,
                name: "gw".into(),
                section_name: Some("grpc".into()),
                port: None,
            }]
        );
        let first = &route.rules[0];
        assert_eq!(
            first.matches[0].path,
            Some(PathMatch::Exact("/echo.Echo/Say".into()))
        );
        assert_eq!(first.matches[0].headers[0].name, "x-tier");
        assert!(matches!(first.filters[0], Filter::RequestHeaderModifier(_)));
        assert_eq!(
            first.backend_refs[0],
            BackendRef {
                weight: 3,
                ..BackendRef::service("gold", 9000)
            }
        );
        // No matches: every call.
        assert_eq!(route.rules[1].matches, [every_call()]);
    }

    #[test]
    fn unserved_filters_and_unknown_fields_are_refused() {
        let extension = ROUTE.replace(
            "- type: RequestHeaderModifier\n      requestHeaderModifier: {set: [{name: x-via, value: gw}]}",
            "- type: ExtensionRef\n      extensionRef: {group: x.io, kind: Auth, name: a}",
        );
        assert_ne!(extension, ROUTE);
        let err = parse_documents("calls.yaml", &extension)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("spec.rules[0].filters[0].type") && err.contains("ExtensionRef"),
            "{err}"
        );
        let typo = ROUTE.replace("method: Say}", "methd: Say}");
        let err = parse_documents("calls.yaml", &typo)
            .unwrap_err()
            .to_string();
        assert!(err.contains("methd"), "{err}");
    }

    fn method(
        ty: Option<MethodType>,
        service: Option<&str>,
        method: Option<&str>,
    ) -> GrpcRouteRulesMatchesMethod {
        GrpcRouteRulesMatchesMethod {
            method: method.map(Into::into),
            service: service.map(Into::into),
            r#type: ty,
        }
    }

    #[test]
    fn exact_method_matches_become_paths() {
        let exact = |s, m| method_path("m", method(None, s, m)).unwrap();
        assert_eq!(
            exact(Some("grpc.health.v1.Health"), Some("Check")),
            PathMatch::Exact("/grpc.health.v1.Health/Check".into())
        );
        assert_eq!(
            exact(Some("echo.Echo"), None),
            PathMatch::PathPrefix("/echo.Echo".into())
        );
        assert_eq!(
            exact(None, Some("Say")),
            PathMatch::RegularExpression("/[^/]+/Say".into())
        );
    }

    #[test]
    fn regex_method_matches_become_one_expression() {
        let re =
            |s, m| method_path("m", method(Some(MethodType::RegularExpression), s, m)).unwrap();
        assert_eq!(
            re(Some("echo\\..*"), None),
            PathMatch::RegularExpression("/(?:echo\\..*)/[^/]+".into())
        );
        assert_eq!(
            re(None, Some("Say|Tell")),
            PathMatch::RegularExpression("/[^/]+/(?:Say|Tell)".into())
        );
    }

    #[test]
    fn bad_method_matches_are_refused_with_the_field() {
        let err = |s, m| {
            method_path("spec.rules[0].matches[0].method", method(None, s, m))
                .unwrap_err()
                .to_string()
        };
        assert!(
            err(None, None).contains("one of service and method"),
            "{}",
            err(None, None)
        );
        let slash = err(Some("a/b"), Some("M"));
        assert!(
            slash.contains("method.service") && slash.contains("\"a/b\""),
            "{slash}"
        );
        let dotted = err(Some("a.b"), Some("x.y"));
        assert!(dotted.contains("method.method"), "{dotted}");
        assert!(is_service_name(".a.b_c.D9"));
        assert!(!is_service_name("a..b") && !is_service_name("9a"));
    }
}
