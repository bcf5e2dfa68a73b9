//! `HTTPRoute` as the model holds it: parent references, hostnames, ordered
//! rules of matches, filters and weighted backend references.
//!
//! The semantics (precedence, wildcard hostnames, prefix segments) live in
//! the proxy's router; this module is only the shape.

use super::backend::{BackendKey, MCS_GROUP, service_import_name};
use super::meta::{Kind, ObjectMeta};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// An HTTPRoute, or a GRPCRoute in its HTTP form ([`RouteKind`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpRoute {
    /// Which Gateway API kind declared the route.
    #[serde(default)]
    pub kind: RouteKind,
    /// Metadata (annotations may carry a cutover policy).
    pub meta: ObjectMeta,
    /// `spec.parentRefs`.
    #[serde(default)]
    pub parent_refs: Vec<ParentRef>,
    /// `spec.hostnames`.
    #[serde(default)]
    pub hostnames: Vec<String>,
    /// `spec.rules`, in order.
    #[serde(default)]
    pub rules: Vec<RouteRule>,
}

/// The Gateway API kind a route was declared as.
///
/// A GRPCRoute is stored as the HTTPRoute it is equivalent to: a gRPC call
/// is an HTTP/2 `POST /<service>/<method>`, so its method matches are path
/// matches (`kubeconfig` translates them) and its header matches, filters
/// and weighted backends are the HTTP ones. What the kind changes is how
/// the proxy speaks to the backends — HTTP/2 (h2c), warmed with
/// `grpc.health.v1.Health/Check` — and which status the route gets.
///
/// Routes of both kinds share one name space: the coordinator keeps one
/// route record per `namespace/name` and refuses a route whose name is
/// taken by a route of the other kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum RouteKind {
    /// `HTTPRoute`.
    #[default]
    Http,
    /// `GRPCRoute`.
    Grpc,
}

impl RouteKind {
    /// The stored kind.
    pub fn kind(self) -> Kind {
        match self {
            RouteKind::Http => Kind::HTTPRoute,
            RouteKind::Grpc => Kind::GRPCRoute,
        }
    }
}

impl HttpRoute {
    /// The Service ports this spec sends client traffic to: every Service
    /// or ServiceImport backendRef with a port and a weight above 0, its
    /// namespace defaulted to the route's (a ServiceImport as its stored
    /// Service, [`service_import_name`]). Mirrors are not included (their
    /// answers never reach a client). Whether the Services exist is not
    /// checked here.
    pub fn traffic_backends(&self) -> BTreeSet<BackendKey> {
        self.rules
            .iter()
            .flat_map(|rule| &rule.backend_refs)
            .filter(|b| b.weight > 0)
            .filter_map(|b| {
                let namespace = b.namespace.as_deref().unwrap_or(&self.meta.namespace);
                Some(BackendKey::new(namespace, b.stored_service()?, b.port?))
            })
            .collect()
    }

    /// The Service ports of [`HttpRoute::traffic_backends`] plus those
    /// `RequestMirror` filters copy requests to (on rules and on
    /// backendRefs): every backend the route's requests reach.
    pub fn reached_backends(&self) -> BTreeSet<BackendKey> {
        let mut out = self.traffic_backends();
        for rule in &self.rules {
            let filters = rule
                .filters
                .iter()
                .chain(rule.backend_refs.iter().flat_map(|b| &b.filters));
            for filter in filters {
                if let Filter::RequestMirror(m) = filter {
                    let b = &m.backend_ref;
                    let namespace = b.namespace.as_deref().unwrap_or(&self.meta.namespace);
                    if let (Some(service), Some(port)) = (b.stored_service(), b.port) {
                        out.insert(BackendKey::new(namespace, service, port));
                    }
                }
            }
        }
        out
    }
}

/// A reference from a route to a Gateway (or one of its listeners).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentRef {
    /// API group; `gateway.networking.k8s.io` by default.
    pub group: String,
    /// Kind; `Gateway` by default.
    pub kind: String,
    /// Namespace; the route's own when absent.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Gateway name.
    pub name: String,
    /// Listener name to attach to.
    #[serde(default)]
    pub section_name: Option<String>,
    /// Listener port to attach to.
    #[serde(default)]
    pub port: Option<u16>,
}

/// One rule of a route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RouteRule {
    /// Optional rule name.
    #[serde(default)]
    pub name: Option<String>,
    /// `matches` (ORed). Empty means "prefix `/`".
    #[serde(default)]
    pub matches: Vec<RouteMatch>,
    /// Filters applied to every request the rule takes.
    #[serde(default)]
    pub filters: Vec<Filter>,
    /// Weighted backends. Empty means every request gets 500.
    #[serde(default)]
    pub backend_refs: Vec<BackendRef>,
}

/// One match: every present condition must hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RouteMatch {
    /// Path condition; `None` means prefix `/`.
    #[serde(default)]
    pub path: Option<PathMatch>,
    /// Header conditions (names case-insensitive).
    #[serde(default)]
    pub headers: Vec<HeaderMatch>,
    /// Query parameter conditions (names exact).
    #[serde(default)]
    pub query_params: Vec<QueryParamMatch>,
    /// HTTP method, upper case.
    #[serde(default)]
    pub method: Option<String>,
}

/// A path condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PathMatch {
    /// The whole path, case-sensitive.
    Exact(String),
    /// Whole `/` segments of a prefix.
    PathPrefix(String),
    /// A regular expression (Rust `regex` syntax) over the whole path.
    RegularExpression(String),
}

/// How a string value is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum StringMatchType {
    /// Equal.
    #[default]
    Exact,
    /// Regular expression over the whole value.
    RegularExpression,
}

/// A header condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderMatch {
    /// How to compare.
    #[serde(default)]
    pub match_type: StringMatchType,
    /// Header name (case-insensitive).
    pub name: String,
    /// Value or pattern.
    pub value: String,
}

/// A query parameter condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryParamMatch {
    /// How to compare.
    #[serde(default)]
    pub match_type: StringMatchType,
    /// Parameter name (exact).
    pub name: String,
    /// Value or pattern.
    pub value: String,
}

/// A route or backend filter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Filter {
    /// Change request headers before forwarding.
    RequestHeaderModifier(HeaderModifier),
    /// Change response headers before answering.
    ResponseHeaderModifier(HeaderModifier),
    /// Answer with a redirect instead of forwarding.
    RequestRedirect(RequestRedirect),
    /// Rewrite host and/or path before forwarding.
    UrlRewrite(UrlRewrite),
    /// Send a copy of the request to another backend; its answer is dropped.
    RequestMirror(RequestMirror),
}

/// Header edits: `set` overwrites, `add` appends, `remove` deletes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct HeaderModifier {
    /// Headers to overwrite.
    #[serde(default)]
    pub set: Vec<HeaderValue>,
    /// Headers to append to.
    #[serde(default)]
    pub add: Vec<HeaderValue>,
    /// Header names to delete.
    #[serde(default)]
    pub remove: Vec<String>,
}

/// A header name and value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderValue {
    /// Name.
    pub name: String,
    /// Value.
    pub value: String,
}

/// A path replacement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PathModifier {
    /// Replace the whole path.
    ReplaceFullPath(String),
    /// Replace the matched `PathPrefix`.
    ReplacePrefixMatch(String),
}

/// `RequestRedirect`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RequestRedirect {
    /// `http` or `https`; the request's when absent.
    #[serde(default)]
    pub scheme: Option<String>,
    /// Host; the request's when absent.
    #[serde(default)]
    pub hostname: Option<String>,
    /// Path change.
    #[serde(default)]
    pub path: Option<PathModifier>,
    /// Port; derived from the scheme or the listener when absent.
    #[serde(default)]
    pub port: Option<u16>,
    /// Status code (301, 302, 303, 307, 308); 302 when absent.
    #[serde(default)]
    pub status_code: Option<u16>,
}

/// `URLRewrite`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct UrlRewrite {
    /// New Host header.
    #[serde(default)]
    pub hostname: Option<String>,
    /// Path change.
    #[serde(default)]
    pub path: Option<PathModifier>,
}

/// `RequestMirror`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestMirror {
    /// Where the copy goes.
    pub backend_ref: BackendRef,
    /// Share of requests mirrored, in percent (100 when absent).
    #[serde(default)]
    pub percent: Option<u32>,
    /// Share as a fraction `numerator/denominator`, if given that way.
    #[serde(default)]
    pub fraction: Option<(u32, u32)>,
}

/// A weighted reference to a backend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendRef {
    /// API group; empty (core) for a Service.
    #[serde(default)]
    pub group: String,
    /// Kind; `Service` by default.
    pub kind: String,
    /// Namespace; the route's own when absent.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Service name.
    pub name: String,
    /// Service port; required for Services.
    #[serde(default)]
    pub port: Option<u16>,
    /// Weight; 1 by default, 0 gets no traffic.
    pub weight: u32,
    /// Filters applied only when this backend is chosen.
    #[serde(default)]
    pub filters: Vec<Filter>,
}

impl BackendRef {
    /// A plain Service reference with weight 1.
    pub fn service(name: impl Into<String>, port: u16) -> Self {
        BackendRef {
            group: String::new(),
            kind: "Service".into(),
            namespace: None,
            name: name.into(),
            port: Some(port),
            weight: 1,
            filters: Vec::new(),
        }
    }

    /// Whether this names a core `Service`.
    pub fn is_service(&self) -> bool {
        self.group.is_empty() && self.kind == "Service"
    }

    /// Whether this names a clusterset `ServiceImport` (GEP-1748): the
    /// endpoints of every cluster exporting the Service of that name.
    pub fn is_service_import(&self) -> bool {
        self.group == MCS_GROUP && self.kind == "ServiceImport"
    }

    /// The name of the stored Service whose endpoints this ref sends to:
    /// its own name for a Service, [`service_import_name`] for a
    /// ServiceImport, `None` for kinds switchyard does not serve.
    pub fn stored_service(&self) -> Option<String> {
        if self.is_service() {
            Some(self.name.clone())
        } else if self.is_service_import() {
            Some(service_import_name(&self.name))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod reached_tests {
    use super::*;

    fn mirror_to(name: &str) -> Filter {
        Filter::RequestMirror(RequestMirror {
            backend_ref: BackendRef::service(name, 9000),
            percent: None,
            fraction: None,
        })
    }

    #[test]
    fn reached_backends_add_mirrors_on_rules_and_backend_refs() {
        let route = HttpRoute {
            kind: RouteKind::Grpc,
            meta: ObjectMeta::named("shop", "calls"),
            parent_refs: Vec::new(),
            hostnames: Vec::new(),
            rules: vec![RouteRule {
                filters: vec![mirror_to("audit")],
                backend_refs: vec![BackendRef {
                    filters: vec![mirror_to("shadow")],
                    ..BackendRef::service("echo", 9000)
                }],
                ..RouteRule::default()
            }],
        };
        let key = |n: &str| BackendKey::new("shop", n, 9000);
        assert_eq!(route.traffic_backends(), BTreeSet::from([key("echo")]));
        assert_eq!(
            route.reached_backends(),
            BTreeSet::from([key("audit"), key("echo"), key("shadow")])
        );
    }
}
