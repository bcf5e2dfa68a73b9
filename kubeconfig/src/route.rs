//! `HTTPRoute` into the model, applying the defaults the API server would
//! (so a route read from a file and the same route read from a cluster
//! translate identically):
//!
//! - parentRef `group` `gateway.networking.k8s.io`, `kind` `Gateway`;
//! - a rule without `matches` gets one match, path prefix `/`; a match
//!   without `path` gets path prefix `/`; a path without `type` is a
//!   `PathPrefix`, without `value` it is `/`;
//! - header and query param matches are `Exact` unless typed;
//! - backendRef `group` core (empty), `kind` `Service`, `weight` 1.
//!
//! Filters are in [`crate::filter`]. This module deliberately does not
//! check regexes, hostnames or backend existence: `validate_resource` does
//! the first two and references are resolved by the control plane. Rule
//! `timeouts` are not carried by the model and are ignored.

use crate::convert::{GATEWAY_GROUP, indexed, non_negative, object_meta, opt_port};
use crate::error::Problem;
use crate::filter::{backend_filter, route_filter};
use gateway_api::apis::standard::httproutes::{
    HttpRoute as K8sHttpRoute, HttpRouteParentRefs, HttpRouteRules, HttpRouteRulesBackendRefs,
    HttpRouteRulesMatches, HttpRouteRulesMatchesHeaders,
    HttpRouteRulesMatchesHeadersType as HeaderType, HttpRouteRulesMatchesMethod as Method,
    HttpRouteRulesMatchesPath, HttpRouteRulesMatchesPathType as PathType,
    HttpRouteRulesMatchesQueryParamsType as QueryType,
};
use switchyard_proto::model::{
    BackendRef, HeaderMatch, HttpRoute, Kind, ParentRef, PathMatch, QueryParamMatch, Resource,
    RouteKind, RouteMatch, RouteRule, StringMatchType,
};

/// Translates an HTTPRoute.
pub(crate) fn http_route(o: K8sHttpRoute) -> Result<Resource, Problem> {
    let meta = object_meta(o.metadata, Kind::HTTPRoute)?;
    let parent_refs = indexed(o.spec.parent_refs, "spec.parentRefs", parent_ref)?;
    let rules = indexed(o.spec.rules, "spec.rules", rule)?;
    Ok(Resource::HttpRoute(HttpRoute {
        kind: RouteKind::Http,
        meta,
        parent_refs,
        hostnames: o.spec.hostnames.unwrap_or_default(),
        rules,
    }))
}

pub(crate) fn parent_ref(f: &str, p: HttpRouteParentRefs) -> Result<ParentRef, Problem> {
    Ok(ParentRef {
        group: p.group.unwrap_or_else(|| GATEWAY_GROUP.to_string()),
        kind: p.kind.unwrap_or_else(|| "Gateway".to_string()),
        namespace: p.namespace,
        name: p.name,
        section_name: p.section_name,
        port: opt_port(&format!("{f}.port"), p.port)?,
    })
}

fn rule(f: &str, r: HttpRouteRules) -> Result<RouteRule, Problem> {
    let matches = match r.matches {
        None => vec![RouteMatch {
            path: Some(default_path()),
            ..RouteMatch::default()
        }],
        Some(ms) => ms.into_iter().map(route_match).collect(),
    };
    Ok(RouteRule {
        name: r.name,
        matches,
        filters: indexed(r.filters, &format!("{f}.filters"), route_filter)?,
        backend_refs: indexed(r.backend_refs, &format!("{f}.backendRefs"), backend_ref)?,
    })
}

fn default_path() -> PathMatch {
    PathMatch::PathPrefix("/".to_string())
}

fn route_match(m: HttpRouteRulesMatches) -> RouteMatch {
    RouteMatch {
        path: Some(m.path.map_or_else(default_path, path_match)),
        headers: m
            .headers
            .unwrap_or_default()
            .into_iter()
            .map(header_match)
            .collect(),
        query_params: m
            .query_params
            .unwrap_or_default()
            .into_iter()
            .map(|q| QueryParamMatch {
                match_type: match q.r#type {
                    Some(QueryType::RegularExpression) => StringMatchType::RegularExpression,
                    Some(QueryType::Exact) | None => StringMatchType::Exact,
                },
                name: q.name,
                value: q.value,
            })
            .collect(),
        method: m.method.map(|method| method_name(&method).to_string()),
    }
}

/// One header match; GRPCRoute header matches have the same shape and
/// come here too (`grpc_route`).
pub(crate) fn header_match(h: HttpRouteRulesMatchesHeaders) -> HeaderMatch {
    HeaderMatch {
        match_type: match h.r#type {
            Some(HeaderType::RegularExpression) => StringMatchType::RegularExpression,
            Some(HeaderType::Exact) | None => StringMatchType::Exact,
        },
        name: h.name,
        value: h.value,
    }
}

fn path_match(p: HttpRouteRulesMatchesPath) -> PathMatch {
    let value = p.value.unwrap_or_else(|| "/".to_string());
    match p.r#type {
        Some(PathType::Exact) => PathMatch::Exact(value),
        Some(PathType::RegularExpression) => PathMatch::RegularExpression(value),
        Some(PathType::PathPrefix) | None => PathMatch::PathPrefix(value),
    }
}

fn method_name(m: &Method) -> &'static str {
    match m {
        Method::Get => "GET",
        Method::Head => "HEAD",
        Method::Post => "POST",
        Method::Put => "PUT",
        Method::Delete => "DELETE",
        Method::Connect => "CONNECT",
        Method::Options => "OPTIONS",
        Method::Trace => "TRACE",
        Method::Patch => "PATCH",
    }
}

pub(crate) fn backend_ref(f: &str, b: HttpRouteRulesBackendRefs) -> Result<BackendRef, Problem> {
    Ok(BackendRef {
        group: b.group.unwrap_or_default(),
        kind: b.kind.unwrap_or_else(|| "Service".to_string()),
        namespace: b.namespace,
        name: b.name,
        port: opt_port(&format!("{f}.port"), b.port)?,
        weight: match b.weight {
            Some(w) => non_negative(&format!("{f}.weight"), w)?,
            None => 1,
        },
        filters: indexed(b.filters, &format!("{f}.filters"), backend_filter)?,
    })
}
