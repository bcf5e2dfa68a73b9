//! Structural validation of resources, the one gate every apply goes
//! through (on the client and again on the leader).
//!
//! It checks what a single object can get wrong on its own: names, ports,
//! regexes, weights, filter shapes. It deliberately does not check
//! references between objects (a backendRef to a Service that does not
//! exist is legal Gateway API and answers 500 at request time).
//!
//! Regex cost: route regexes are compiled here exactly as the proxy
//! compiles them ([`compile_route_regex`]), and their compiled heap size is
//! bounded per match ([`MAX_REGEX_BYTES_PER_MATCH`]) and summed per route
//! ([`MAX_REGEX_BYTES_PER_ROUTE`]); an apply over either is refused naming
//! the rule and match. A single Unicode `\w` compiles to about 50 KB, so
//! `\w{200}` (11 MB) is refused while ordinary patterns take a few KB.
//! The proxy also holds every served route together to
//! [`MAX_REGEX_BYTES_PER_PROXY`].

use super::backend::{EndpointSlice, ReferenceGrant, Service};
use super::gateway::{Gateway, GatewayClass, RouteNamespaces};
use super::meta::ObjectMeta;
use super::policy::{CutoverSettings, parse_duration};
use super::resource::Resource;
use super::route::{
    BackendRef, Filter, HttpRoute, PathMatch, PathModifier, RouteRule, StringMatchType,
};
use regex_automata::meta;
use regex_automata::nfa::thompson::WhichCaptures;
use regex_automata::util::syntax;
use std::collections::BTreeSet;
use std::fmt;

/// Most backendRefs' weight the Gateway API allows.
pub const MAX_WEIGHT: u32 = 1_000_000;

/// Compiled heap one regex of a route match may take.
pub const MAX_REGEX_BYTES_PER_MATCH: usize = 256 * 1024;

/// Compiled heap all regexes of one route may take together.
pub const MAX_REGEX_BYTES_PER_ROUTE: usize = 1024 * 1024;

/// Compiled heap all distinct regexes of the routes one proxy serves may
/// take together. The proxy enforces it (oldest routes first; the regex
/// matches of a route past it never match and are noted).
pub const MAX_REGEX_BYTES_PER_PROXY: usize = 32 * 1024 * 1024;

/// Cache each compiled regex may grow per searching thread at run time
/// (the lazy DFA's transition table); not part of the compiled size.
const REGEX_CACHE_BYTES: usize = 512 * 1024;

/// Checks a route regex's syntax only. The pattern must stand on its own:
/// `a)|(.*` would otherwise escape the anchoring group.
fn parse_route_regex(pattern: &str) -> Result<(), String> {
    syntax::parse(pattern).map(|_| ()).map_err(|e| {
        // regex's messages draw a caret under the pattern over several
        // lines; errors here are one line.
        let text = e.to_string();
        let last = text.lines().last().unwrap_or_default().trim().to_string();
        format!("invalid regular expression {pattern:?}: {last}")
    })
}

/// A route regex, compiled the one way the proxy and validation share:
/// anchored to the whole input (`^(?:pattern)$`), Rust `regex` syntax,
/// at most [`MAX_REGEX_BYTES_PER_MATCH`] compiled. The error is one line.
pub fn compile_route_regex(pattern: &str) -> Result<meta::Regex, String> {
    parse_route_regex(pattern)?;
    let config = meta::Config::new()
        .nfa_size_limit(Some(MAX_REGEX_BYTES_PER_MATCH))
        .onepass_size_limit(Some(MAX_REGEX_BYTES_PER_MATCH))
        .hybrid_cache_capacity(REGEX_CACHE_BYTES)
        .which_captures(WhichCaptures::Implicit);
    let too_big = || {
        format!(
            "regular expression {pattern:?} compiles to more than {} KiB, the most one match may use",
            MAX_REGEX_BYTES_PER_MATCH / 1024
        )
    };
    let regex = meta::Builder::new()
        .configure(config)
        .syntax(syntax::Config::new().utf8(true))
        .build(&format!("^(?:{pattern})$"))
        .map_err(|e| {
            if e.size_limit().is_some() {
                too_big()
            } else {
                format!("invalid regular expression {pattern:?}: {e}")
            }
        })?;
    if regex.memory_usage() > MAX_REGEX_BYTES_PER_MATCH {
        return Err(too_big());
    }
    Ok(regex)
}

/// A resource that is not well formed: which object, which field, why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ValidationError {
    /// `Kind namespace/name`.
    pub object: String,
    /// Field path, e.g. `spec.rules[0].backendRefs[1].port`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.object, self.field, self.message)
    }
}

/// Which rules a validation applies. The replicated state machine
/// validates every apply again, so a rule added later must not be applied
/// to log entries written before it: replicas replaying an old entry
/// would answer differently from those that applied it then. An apply
/// entry names the revision its proposer validated with
/// ([`ValidationRules::revision`]); entries without one use
/// [`ValidationRules::ORIGINAL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidationRules {
    /// Route regexes' compiled size is bounded (per match and per route).
    pub regex_budget: bool,
}

impl ValidationRules {
    /// The rules of entries written before rules had revisions.
    pub const ORIGINAL: ValidationRules = ValidationRules {
        regex_budget: false,
    };
    /// Today's rules.
    pub const CURRENT: ValidationRules = ValidationRules { regex_budget: true };

    /// Today's revision number, carried in apply entries.
    pub const CURRENT_REVISION: u32 = 1;

    /// The rules of `revision` (`None`: an entry from before revisions).
    pub fn revision(revision: Option<u32>) -> ValidationRules {
        match revision {
            None | Some(0) => Self::ORIGINAL,
            Some(_) => Self::CURRENT,
        }
    }
}

/// Collects the object name so each check only says field and message.
struct Checker {
    object: String,
    rules: ValidationRules,
}

impl Checker {
    fn fail(&self, field: impl Into<String>, message: impl Into<String>) -> ValidationError {
        ValidationError {
            object: self.object.clone(),
            field: field.into(),
            message: message.into(),
        }
    }

    fn dns_subdomain(&self, field: &str, value: &str) -> Result<(), ValidationError> {
        let ok = !value.is_empty()
            && value.len() <= 253
            && value.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            });
        if ok {
            Ok(())
        } else {
            Err(self.fail(
                field,
                format!(
                    "{value:?} is not a valid name (lowercase letters, digits, '-' and '.', at most 253 characters)"
                ),
            ))
        }
    }

    fn dns_label(&self, field: &str, value: &str) -> Result<(), ValidationError> {
        if value.len() > 63 || value.contains('.') {
            return Err(self.fail(
                field,
                format!("{value:?} is not a valid DNS label (at most 63 characters, no '.')"),
            ));
        }
        self.dns_subdomain(field, value)
    }

    fn port(&self, field: &str, port: u16) -> Result<(), ValidationError> {
        if port == 0 {
            Err(self.fail(field, "port must be between 1 and 65535"))
        } else {
            Ok(())
        }
    }

    /// Checks one route regex and adds its compiled size to `route_total`.
    fn regex(
        &self,
        field: &str,
        pattern: &str,
        route_total: &mut usize,
    ) -> Result<(), ValidationError> {
        if !self.rules.regex_budget {
            return parse_route_regex(pattern).map_err(|e| self.fail(field, e));
        }
        let regex = compile_route_regex(pattern).map_err(|e| self.fail(field, e))?;
        let size = regex.memory_usage();
        *route_total += size;
        if *route_total > MAX_REGEX_BYTES_PER_ROUTE {
            return Err(self.fail(
                field,
                format!(
                    "the route's regular expressions compile to {} KiB with this one ({} KiB), over the {} KiB one route may use",
                    route_total.div_ceil(1024),
                    size.div_ceil(1024),
                    MAX_REGEX_BYTES_PER_ROUTE / 1024
                ),
            ));
        }
        Ok(())
    }

    fn hostname(&self, field: &str, host: &str) -> Result<(), ValidationError> {
        let bare = host.strip_prefix("*.").unwrap_or(host);
        if host.contains(':') || bare.contains('*') {
            return Err(self.fail(
                field,
                format!("{host:?} is not a valid hostname (no port; '*' only as the first label)"),
            ));
        }
        self.dns_subdomain(field, bare)
    }
}

/// Checks one resource with today's rules. The error names the object and
/// the field.
pub fn validate_resource(resource: &Resource) -> Result<(), ValidationError> {
    validate_resource_with(resource, ValidationRules::CURRENT)
}

/// Checks one resource with `rules` (see [`ValidationRules`]).
pub fn validate_resource_with(
    resource: &Resource,
    rules: ValidationRules,
) -> Result<(), ValidationError> {
    let meta = resource.meta();
    let c = Checker {
        object: format!("{} {}", resource.kind(), meta.object_name()),
        rules,
    };
    validate_meta(&c, meta, resource.kind().cluster_scoped())?;
    match resource {
        Resource::GatewayClass(o) => validate_gateway_class(&c, o),
        Resource::Gateway(o) => validate_gateway(&c, o),
        Resource::HttpRoute(o) => validate_route(&c, o),
        Resource::ReferenceGrant(o) => validate_grant(&c, o),
        Resource::Namespace(_) => Ok(()),
        Resource::Service(o) => validate_service(&c, o),
        Resource::EndpointSlice(o) => validate_slice(&c, o),
    }
}

fn validate_meta(
    c: &Checker,
    meta: &ObjectMeta,
    cluster_scoped: bool,
) -> Result<(), ValidationError> {
    c.dns_subdomain("metadata.name", &meta.name)?;
    if cluster_scoped {
        if !meta.namespace.is_empty() {
            return Err(c.fail(
                "metadata.namespace",
                "this kind is cluster-scoped: no namespace",
            ));
        }
    } else {
        c.dns_label("metadata.namespace", &meta.namespace)?;
    }
    Ok(())
}

fn validate_gateway_class(c: &Checker, o: &GatewayClass) -> Result<(), ValidationError> {
    if o.controller_name.is_empty() {
        return Err(c.fail("spec.controllerName", "required"));
    }
    Ok(())
}

fn validate_gateway(c: &Checker, o: &Gateway) -> Result<(), ValidationError> {
    if o.gateway_class_name.is_empty() {
        return Err(c.fail("spec.gatewayClassName", "required"));
    }
    if o.listeners.is_empty() {
        return Err(c.fail("spec.listeners", "at least one listener is required"));
    }
    let mut names = BTreeSet::new();
    for (i, l) in o.listeners.iter().enumerate() {
        let f = format!("spec.listeners[{i}]");
        c.dns_label(&format!("{f}.name"), &l.name)?;
        if !names.insert(&l.name) {
            return Err(c.fail(
                format!("{f}.name"),
                format!("duplicate listener name {:?}", l.name),
            ));
        }
        c.port(&format!("{f}.port"), l.port)?;
        if let Some(h) = &l.hostname {
            c.hostname(&format!("{f}.hostname"), h)?;
        }
        if let RouteNamespaces::Selector(s) = &l.allowed_routes.namespaces {
            for (j, e) in s.match_expressions.iter().enumerate() {
                if !matches!(
                    e.operator.as_str(),
                    "In" | "NotIn" | "Exists" | "DoesNotExist"
                ) {
                    return Err(c.fail(
                        format!(
                            "{f}.allowedRoutes.namespaces.selector.matchExpressions[{j}].operator"
                        ),
                        format!("unknown operator {:?}", e.operator),
                    ));
                }
            }
        }
    }
    Ok(())
}

fn validate_route(c: &Checker, o: &HttpRoute) -> Result<(), ValidationError> {
    CutoverSettings::from_annotations(&o.meta.annotations, CutoverSettings::default())
        .map_err(|(annotation, e)| c.fail(format!("metadata.annotations[{annotation}]"), e))?;
    for (i, p) in o.parent_refs.iter().enumerate() {
        let f = format!("spec.parentRefs[{i}]");
        c.dns_subdomain(&format!("{f}.name"), &p.name)?;
        if let Some(port) = p.port {
            c.port(&format!("{f}.port"), port)?;
        }
    }
    for (i, h) in o.hostnames.iter().enumerate() {
        c.hostname(&format!("spec.hostnames[{i}]"), h)?;
    }
    let mut regex_bytes = 0;
    for (i, rule) in o.rules.iter().enumerate() {
        validate_rule(c, &format!("spec.rules[{i}]"), rule, &mut regex_bytes)?;
    }
    Ok(())
}

fn validate_rule(
    c: &Checker,
    f: &str,
    rule: &RouteRule,
    regex_bytes: &mut usize,
) -> Result<(), ValidationError> {
    for (j, m) in rule.matches.iter().enumerate() {
        let mf = format!("{f}.matches[{j}]");
        match &m.path {
            Some(PathMatch::Exact(p)) | Some(PathMatch::PathPrefix(p)) if !p.starts_with('/') => {
                return Err(c.fail(
                    format!("{mf}.path.value"),
                    format!("path {p:?} must start with '/'"),
                ));
            }
            Some(PathMatch::RegularExpression(p)) => {
                c.regex(&format!("{mf}.path.value"), p, regex_bytes)?;
            }
            _ => {}
        }
        for (k, h) in m.headers.iter().enumerate() {
            if h.name.is_empty() || http_token_invalid(&h.name) {
                return Err(c.fail(
                    format!("{mf}.headers[{k}].name"),
                    format!("{:?} is not a header name", h.name),
                ));
            }
            if h.match_type == StringMatchType::RegularExpression {
                c.regex(&format!("{mf}.headers[{k}].value"), &h.value, regex_bytes)?;
            }
        }
        for (k, q) in m.query_params.iter().enumerate() {
            if q.name.is_empty() {
                return Err(c.fail(format!("{mf}.queryParams[{k}].name"), "required"));
            }
            if q.match_type == StringMatchType::RegularExpression {
                c.regex(
                    &format!("{mf}.queryParams[{k}].value"),
                    &q.value,
                    regex_bytes,
                )?;
            }
        }
        if let Some(method) = &m.method
            && !matches!(
                method.as_str(),
                "GET"
                    | "HEAD"
                    | "POST"
                    | "PUT"
                    | "DELETE"
                    | "CONNECT"
                    | "OPTIONS"
                    | "TRACE"
                    | "PATCH"
            )
        {
            return Err(c.fail(format!("{mf}.method"), format!("unknown method {method:?}")));
        }
    }
    for (j, filter) in rule.filters.iter().enumerate() {
        validate_filter(c, &format!("{f}.filters[{j}]"), filter)?;
    }
    let redirects = rule
        .filters
        .iter()
        .any(|f| matches!(f, Filter::RequestRedirect(_)));
    let rewrites = rule
        .filters
        .iter()
        .any(|f| matches!(f, Filter::UrlRewrite(_)));
    if redirects && rewrites {
        return Err(c.fail(
            format!("{f}.filters"),
            "RequestRedirect and URLRewrite cannot be combined",
        ));
    }
    for (j, b) in rule.backend_refs.iter().enumerate() {
        validate_backend_ref(c, &format!("{f}.backendRefs[{j}]"), b)?;
        for (k, filter) in b.filters.iter().enumerate() {
            validate_filter(c, &format!("{f}.backendRefs[{j}].filters[{k}]"), filter)?;
        }
    }
    Ok(())
}

fn http_token_invalid(name: &str) -> bool {
    !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn validate_filter(c: &Checker, f: &str, filter: &Filter) -> Result<(), ValidationError> {
    match filter {
        Filter::RequestHeaderModifier(m) | Filter::ResponseHeaderModifier(m) => {
            let names = m.set.iter().chain(&m.add).map(|h| &h.name).chain(&m.remove);
            for name in names {
                if name.is_empty() || http_token_invalid(name) {
                    return Err(c.fail(f, format!("{name:?} is not a header name")));
                }
            }
        }
        Filter::RequestRedirect(r) => {
            if let Some(s) = &r.scheme
                && s != "http"
                && s != "https"
            {
                return Err(c.fail(
                    format!("{f}.requestRedirect.scheme"),
                    format!("{s:?} is not http or https"),
                ));
            }
            if let Some(code) = r.status_code
                && ![301, 302, 303, 307, 308].contains(&code)
            {
                return Err(c.fail(
                    format!("{f}.requestRedirect.statusCode"),
                    format!("{code} is not a redirect code"),
                ));
            }
            if let Some(port) = r.port {
                c.port(&format!("{f}.requestRedirect.port"), port)?;
            }
            if let Some(h) = &r.hostname {
                c.hostname(&format!("{f}.requestRedirect.hostname"), h)?;
            }
            validate_path_modifier(c, &format!("{f}.requestRedirect.path"), r.path.as_ref())?;
        }
        Filter::UrlRewrite(r) => {
            if let Some(h) = &r.hostname {
                c.hostname(&format!("{f}.urlRewrite.hostname"), h)?;
            }
            validate_path_modifier(c, &format!("{f}.urlRewrite.path"), r.path.as_ref())?;
        }
        Filter::RequestMirror(m) => {
            validate_backend_ref(c, &format!("{f}.requestMirror.backendRef"), &m.backend_ref)?;
            if let Some(p) = m.percent
                && p > 100
            {
                return Err(c.fail(format!("{f}.requestMirror.percent"), "must be 0..100"));
            }
            if let Some((n, d)) = m.fraction
                && (d == 0 || n > d)
            {
                return Err(c.fail(
                    format!("{f}.requestMirror.fraction"),
                    "numerator must be <= denominator, denominator > 0",
                ));
            }
        }
    }
    Ok(())
}

fn validate_path_modifier(
    c: &Checker,
    f: &str,
    m: Option<&PathModifier>,
) -> Result<(), ValidationError> {
    match m {
        Some(PathModifier::ReplaceFullPath(p)) | Some(PathModifier::ReplacePrefixMatch(p))
            if !p.starts_with('/') =>
        {
            Err(c.fail(f, format!("path {p:?} must start with '/'")))
        }
        _ => Ok(()),
    }
}

fn validate_backend_ref(c: &Checker, f: &str, b: &BackendRef) -> Result<(), ValidationError> {
    c.dns_subdomain(&format!("{f}.name"), &b.name)?;
    if let Some(ns) = &b.namespace {
        c.dns_label(&format!("{f}.namespace"), ns)?;
    }
    if b.weight > MAX_WEIGHT {
        return Err(c.fail(
            format!("{f}.weight"),
            format!("weight {} exceeds {MAX_WEIGHT}", b.weight),
        ));
    }
    if b.is_service() {
        match b.port {
            None => return Err(c.fail(format!("{f}.port"), "required when referring to a Service")),
            Some(p) => c.port(&format!("{f}.port"), p)?,
        }
    }
    Ok(())
}

fn validate_grant(c: &Checker, o: &ReferenceGrant) -> Result<(), ValidationError> {
    if o.from.is_empty() {
        return Err(c.fail("spec.from", "at least one entry is required"));
    }
    if o.to.is_empty() {
        return Err(c.fail("spec.to", "at least one entry is required"));
    }
    for (i, from) in o.from.iter().enumerate() {
        c.dns_label(&format!("spec.from[{i}].namespace"), &from.namespace)?;
    }
    Ok(())
}

fn validate_service(c: &Checker, o: &Service) -> Result<(), ValidationError> {
    let mut seen = BTreeSet::new();
    for (i, p) in o.ports.iter().enumerate() {
        c.port(&format!("spec.ports[{i}].port"), p.port)?;
        if let Some(t) = p.target_port {
            c.port(&format!("spec.ports[{i}].targetPort"), t)?;
        }
        if !seen.insert(p.port) {
            return Err(c.fail(
                format!("spec.ports[{i}].port"),
                format!("duplicate port {}", p.port),
            ));
        }
    }
    if let Some(path) = o
        .meta
        .annotations
        .get(super::policy::ANNOTATION_HEALTH_PATH)
        && !path.starts_with('/')
    {
        return Err(c.fail(
            format!(
                "metadata.annotations[{}]",
                super::policy::ANNOTATION_HEALTH_PATH
            ),
            format!("health path {path:?} must start with '/'"),
        ));
    }
    Ok(())
}

fn validate_slice(c: &Checker, o: &EndpointSlice) -> Result<(), ValidationError> {
    if o.service_name().is_none() {
        return Err(c.fail(
            format!("metadata.labels[{}]", super::backend::SERVICE_NAME_LABEL),
            "required: it names the Service this slice belongs to",
        ));
    }
    if !matches!(o.address_type.as_str(), "IPv4" | "IPv6" | "FQDN") {
        return Err(c.fail(
            "addressType",
            format!("{:?} is not IPv4, IPv6 or FQDN", o.address_type),
        ));
    }
    for (i, p) in o.ports.iter().enumerate() {
        c.port(&format!("ports[{i}].port"), p.port)?;
    }
    for (i, e) in o.endpoints.iter().enumerate() {
        if e.addresses.is_empty() {
            return Err(c.fail(
                format!("endpoints[{i}].addresses"),
                "at least one address is required",
            ));
        }
        for (j, a) in e.addresses.iter().enumerate() {
            let ok = match o.address_type.as_str() {
                "IPv4" => a.parse::<std::net::Ipv4Addr>().is_ok(),
                "IPv6" => a.parse::<std::net::Ipv6Addr>().is_ok(),
                _ => !a.is_empty(),
            };
            if !ok {
                return Err(c.fail(
                    format!("endpoints[{i}].addresses[{j}]"),
                    format!("{a:?} is not a valid {} address", o.address_type),
                ));
            }
        }
    }
    Ok(())
}

/// Parses a duration annotation value, for callers outside this module that
/// want the same rules.
pub fn duration_ms(text: &str) -> Result<u64, String> {
    parse_duration(text).map(|d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;

    fn route(rules: Vec<RouteRule>) -> Resource {
        Resource::HttpRoute(HttpRoute {
            meta: ObjectMeta::named("default", "r"),
            parent_refs: vec![],
            hostnames: vec![],
            rules,
        })
    }

    #[test]
    fn backend_ref_without_port_names_the_field() {
        let mut b = BackendRef::service("svc", 80);
        b.port = None;
        let err = validate_resource(&route(vec![RouteRule {
            backend_refs: vec![b],
            ..Default::default()
        }]))
        .unwrap_err();
        assert_eq!(err.object, "HTTPRoute default/r");
        assert_eq!(err.field, "spec.rules[0].backendRefs[0].port");
    }

    #[test]
    fn bad_regex_is_rejected() {
        let err = validate_resource(&route(vec![RouteRule {
            matches: vec![RouteMatch {
                path: Some(PathMatch::RegularExpression("/(".into())),
                ..Default::default()
            }],
            ..Default::default()
        }]))
        .unwrap_err();
        assert_eq!(err.field, "spec.rules[0].matches[0].path.value");
        assert!(err.message.contains("regular expression"), "{err}");
    }

    fn regex_match(pattern: &str) -> RouteMatch {
        RouteMatch {
            path: Some(PathMatch::RegularExpression(pattern.into())),
            ..Default::default()
        }
    }

    #[test]
    fn a_regex_that_escapes_its_anchors_is_rejected() {
        let err = validate_resource(&route(vec![RouteRule {
            matches: vec![regex_match("/a)|(.*")],
            ..Default::default()
        }]))
        .unwrap_err();
        assert!(err.message.contains("invalid regular expression"), "{err}");
        assert!(compile_route_regex("/a)|(.*").is_err());
        let ok = compile_route_regex("/v[0-9]+").unwrap();
        assert!(ok.is_match("/v12") && !ok.is_match("/v12/x") && !ok.is_match("x/v1"));
    }

    #[test]
    fn a_costly_regex_is_rejected_naming_rule_and_match() {
        let err = validate_resource(&route(vec![
            RouteRule::default(),
            RouteRule {
                matches: vec![regex_match("/ok"), regex_match("/rx1/\\w{200}")],
                ..Default::default()
            },
        ]))
        .unwrap_err();
        assert_eq!(err.object, "HTTPRoute default/r");
        assert_eq!(err.field, "spec.rules[1].matches[1].path.value");
        assert!(err.message.contains("the most one match may use"), "{err}");
    }

    #[test]
    fn regexes_are_summed_per_route() {
        // Each about 50 KB (Unicode `\w`), under the per-match limit; 21
        // of them pass 1 MiB.
        let matches: Vec<RouteMatch> = (0..40)
            .map(|i| regex_match(&format!("/rx{i}/\\w+")))
            .collect();
        let err = validate_resource(&route(vec![RouteRule {
            matches,
            ..Default::default()
        }]))
        .unwrap_err();
        assert!(err.field.starts_with("spec.rules[0].matches["), "{err}");
        assert!(err.message.contains("one route may use"), "{err}");
        // Few of them pass.
        validate_resource(&route(vec![RouteRule {
            matches: (0..5)
                .map(|i| regex_match(&format!("/rx{i}/\\w+")))
                .collect(),
            ..Default::default()
        }]))
        .unwrap();
    }

    #[test]
    fn names_and_annotations_are_checked() {
        let mut r = HttpRoute {
            meta: ObjectMeta::named("default", "Bad_Name"),
            parent_refs: vec![],
            hostnames: vec![],
            rules: vec![],
        };
        assert_eq!(
            validate_resource(&Resource::HttpRoute(r.clone()))
                .unwrap_err()
                .field,
            "metadata.name"
        );
        r.meta.name = "ok".into();
        r.meta
            .annotations
            .insert(ANNOTATION_POLICY.into(), "most".into());
        let err = validate_resource(&Resource::HttpRoute(r)).unwrap_err();
        assert!(err.field.contains(ANNOTATION_POLICY), "{err}");
    }

    #[test]
    fn a_valid_route_passes() {
        let mut b = BackendRef::service("svc", 80);
        b.weight = 0;
        validate_resource(&route(vec![RouteRule {
            backend_refs: vec![b],
            ..Default::default()
        }]))
        .unwrap();
    }
}
