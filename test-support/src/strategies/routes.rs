//! Routes: hostile ones over every match, filter and backendRef field,
//! and well-formed ones over the shared name pool.

use super::{hostname, meta, name, namespace, pick, port};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::BoxedStrategy;
use switchyard_proto::model::validate::MAX_WEIGHT;
use switchyard_proto::model::*;

/// Path matches: exact, prefix and regular expressions, good and bad.
pub fn path_match() -> BoxedStrategy<PathMatch> {
    let path = pick(&["/", "/a", "/a/", "a", "", "/%2e%2e/x"]);
    let regex = pick(&[
        "/v[0-9]+",
        ".*",
        "(",
        "[z-a]",
        "a{1000}",
        r"\p{Unknown}",
        "(?P<x",
    ]);
    prop_oneof![
        path.clone().prop_map(PathMatch::Exact),
        path.prop_map(PathMatch::PathPrefix),
        regex.prop_map(PathMatch::RegularExpression),
    ]
    .boxed()
}

/// Exact or regular-expression header and query matching.
pub fn match_type() -> BoxedStrategy<StringMatchType> {
    prop_oneof![
        Just(StringMatchType::Exact),
        Just(StringMatchType::RegularExpression)
    ]
    .boxed()
}

/// A route match: optional path, headers, query parameters, method.
pub fn route_match() -> BoxedStrategy<RouteMatch> {
    let header_name = pick(&["x-a", "Version", "bad name", "", "ü"]);
    let value = pick(&["one", "", "(", "a|b", "[z-a]"]);
    let header =
        (match_type(), header_name, value.clone()).prop_map(|(match_type, name, value)| {
            HeaderMatch {
                match_type,
                name,
                value,
            }
        });
    let query =
        (match_type(), pick(&["q", "", "a b"]), value).prop_map(|(match_type, name, value)| {
            QueryParamMatch {
                match_type,
                name,
                value,
            }
        });
    (
        prop::option::of(path_match()),
        prop::collection::vec(header, 0..3),
        prop::collection::vec(query, 0..2),
        prop::option::of(pick(&["GET", "POST", "get", "BREW", ""])),
    )
        .prop_map(|(path, headers, query_params, method)| RouteMatch {
            path,
            headers,
            query_params,
            method,
        })
        .boxed()
}

/// A backendRef without filters (mirrors point at these).
pub fn plain_backend_ref() -> BoxedStrategy<BackendRef> {
    (
        prop_oneof![4 => Just(String::new()), 1 => pick(&["core", "example.com"])],
        prop_oneof![4 => Just("Service".to_string()), 1 => pick(&["Other", ""])],
        prop::option::of(namespace()),
        name(),
        prop::option::of(port()),
        select(&[0u32, 1, 100, MAX_WEIGHT, MAX_WEIGHT + 1, u32::MAX][..]),
    )
        .prop_map(|(group, kind, namespace, name, port, weight)| BackendRef {
            group,
            kind,
            namespace,
            name,
            port,
            weight,
            filters: Vec::new(),
        })
        .boxed()
}

/// A redirect's or rewrite's path change.
pub fn path_modifier() -> BoxedStrategy<PathModifier> {
    let p = pick(&["/", "/new", "new", ""]);
    prop_oneof![
        p.clone().prop_map(PathModifier::ReplaceFullPath),
        p.prop_map(PathModifier::ReplacePrefixMatch),
    ]
    .boxed()
}

/// Any route filter: header modifiers, redirects, rewrites, mirrors.
pub fn filter() -> BoxedStrategy<Filter> {
    let header_value = (pick(&["x-a", "bad name", ""]), pick(&["v", "", "\n"]))
        .prop_map(|(name, value)| HeaderValue { name, value });
    let modifier = (
        prop::collection::vec(header_value.clone(), 0..2),
        prop::collection::vec(header_value, 0..2),
        prop::collection::vec(pick(&["x-b", "bad name", ""]), 0..2),
    )
        .prop_map(|(set, add, remove)| HeaderModifier { set, add, remove });
    let redirect = (
        prop::option::of(pick(&["http", "https", "ftp"])),
        prop::option::of(hostname()),
        prop::option::of(path_modifier()),
        prop::option::of(port()),
        prop::option::of(select(&[301u16, 302, 303, 307, 308, 200, 999, 0][..])),
    )
        .prop_map(
            |(scheme, hostname, path, port, status_code)| RequestRedirect {
                scheme,
                hostname,
                path,
                port,
                status_code,
            },
        );
    let rewrite = (
        prop::option::of(hostname()),
        prop::option::of(path_modifier()),
    )
        .prop_map(|(hostname, path)| UrlRewrite { hostname, path });
    let mirror = (
        plain_backend_ref(),
        prop::option::of(select(&[0u32, 50, 100, 101, u32::MAX][..])),
        prop::option::of(select(
            &[(1u32, 2u32), (0, 0), (3, 2), (u32::MAX, u32::MAX)][..],
        )),
    )
        .prop_map(|(backend_ref, percent, fraction)| RequestMirror {
            backend_ref,
            percent,
            fraction,
        });
    prop_oneof![
        modifier.clone().prop_map(Filter::RequestHeaderModifier),
        modifier.prop_map(Filter::ResponseHeaderModifier),
        redirect.prop_map(Filter::RequestRedirect),
        rewrite.prop_map(Filter::UrlRewrite),
        mirror.prop_map(Filter::RequestMirror),
    ]
    .boxed()
}

/// A route rule: matches, filters and backendRefs with their own filters.
pub fn rule() -> BoxedStrategy<RouteRule> {
    let backend = (plain_backend_ref(), prop::collection::vec(filter(), 0..2)).prop_map(
        |(mut b, filters)| {
            b.filters = filters;
            b
        },
    );
    (
        prop::option::of(pick(&["r", ""])),
        prop::collection::vec(route_match(), 0..3),
        prop::collection::vec(filter(), 0..3),
        prop::collection::vec(backend, 0..3),
    )
        .prop_map(|(name, matches, filters, backend_refs)| RouteRule {
            name,
            matches,
            filters,
            backend_refs,
        })
        .boxed()
}

/// A parentRef to a Gateway over the name pools.
pub fn parent_ref() -> BoxedStrategy<ParentRef> {
    (
        prop::option::of(namespace()),
        name(),
        prop::option::of(pick(&["http", "nope"])),
        prop::option::of(port()),
    )
        .prop_map(|(namespace, name, section_name, port)| ParentRef {
            group: "gateway.networking.k8s.io".into(),
            kind: "Gateway".into(),
            namespace,
            name,
            section_name,
            port,
        })
        .boxed()
}

/// An HTTPRoute over the pools (mostly invalid somewhere).
pub fn http_route() -> BoxedStrategy<HttpRoute> {
    (
        meta(false),
        prop::collection::vec(parent_ref(), 0..2),
        prop::collection::vec(hostname(), 0..2),
        prop::collection::vec(rule(), 0..3),
    )
        .prop_map(|(meta, parent_refs, hostnames, rules)| HttpRoute {
            kind: Default::default(),
            meta,
            parent_refs,
            hostnames,
            rules,
        })
        .boxed()
}

/// A well-formed route over the shared name pool, with few enough
/// variations that sequences both re-apply identical specs and change
/// them. Hostile resources alone are nearly always rejected, and then
/// transitions, supersedes and withdrawals would go untested.
pub fn valid_route() -> BoxedStrategy<Resource> {
    let backend = (pick(&["blue", "green"]), 0u32..3).prop_map(|(name, weight)| BackendRef {
        weight,
        ..BackendRef::service(name, 80)
    });
    let rule = (
        prop::option::of(pick(&["/", "/a"])),
        prop::collection::vec(backend, 0..3),
    )
        .prop_map(|(prefix, backend_refs)| RouteRule {
            matches: prefix
                .map(|p| RouteMatch {
                    path: Some(PathMatch::PathPrefix(p)),
                    ..Default::default()
                })
                .into_iter()
                .collect(),
            backend_refs,
            ..Default::default()
        });
    (
        pick(&["default", "demo"]),
        pick(&["a", "b", "web"]),
        prop::option::of(pick(&["all", "majority", "per-zone:1"])),
        prop::collection::vec(rule, 1..3),
    )
        .prop_map(|(ns, name, policy, rules)| {
            let mut meta = ObjectMeta::named(ns, name);
            if let Some(p) = policy {
                meta.annotations.insert(ANNOTATION_POLICY.into(), p);
            }
            Resource::HttpRoute(HttpRoute {
                kind: Default::default(),
                meta,
                parent_refs: Vec::new(),
                hostnames: Vec::new(),
                rules,
            })
        })
        .boxed()
}
