//! Structural validation of resources, the one gate every apply goes
//! through (on the client and again on the leader).
//!
//! It checks what a single object can get wrong on its own: names, ports,
//! regexes, weights, filter shapes. It deliberately does not check
//! references between objects (a backendRef to a Service that does not
//! exist is legal Gateway API and answers 500 at request time).
//!
//! # Layout
//!
//! - this file: [`ValidationError`], [`ValidationRules`], the checker, and
//!   the kinds other than HTTPRoute;
//! - `route`: HTTPRoutes (rules, matches, filters, backendRefs);
//! - `regex`: route regexes and their cost budget.

mod regex;
mod route;

pub use regex::{
    MAX_REGEX_BYTES_PER_MATCH, MAX_REGEX_BYTES_PER_PROXY, MAX_REGEX_BYTES_PER_ROUTE,
    compile_route_regex,
};

use super::backend::{EndpointSlice, ReferenceGrant, Service};
use super::backend_tls::{BackendTlsPolicy, SubjectAltName};
use super::gateway::{Gateway, GatewayClass, RouteNamespaces};
use super::meta::ObjectMeta;
use super::policy::parse_duration;
use super::resource::Resource;
use regex::parse_route_regex;
use route::validate_route;
use std::collections::BTreeSet;
use std::fmt;

/// Most backendRefs' weight the Gateway API allows.
pub const MAX_WEIGHT: u32 = 1_000_000;

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
        // Whether a Secret can be served is the listener's status
        // (`gateway_api::tls`), not a reason to refuse storing it.
        Resource::Secret(_) => Ok(()),
        // Likewise a ConfigMap's certificates are the policy's status.
        Resource::ConfigMap(_) => Ok(()),
        Resource::BackendTlsPolicy(o) => validate_backend_tls_policy(&c, o),
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
        for (j, r) in l
            .tls
            .iter()
            .flat_map(|t| t.certificate_refs.iter())
            .enumerate()
        {
            c.dns_subdomain(&format!("{f}.tls.certificateRefs[{j}].name"), &r.name)?;
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

/// What the CRD's schema refuses (the API server would not store such a
/// policy): no targets, a hostname that is not a DNS name, both or neither
/// of `caCertificateRefs` and `wellKnownCACertificates`, more than the
/// schema's 16 targets, 8 CA references or 5 subject alternative names.
fn validate_backend_tls_policy(c: &Checker, o: &BackendTlsPolicy) -> Result<(), ValidationError> {
    if o.target_refs.is_empty() || o.target_refs.len() > 16 {
        return Err(c.fail("spec.targetRefs", "between 1 and 16 entries are required"));
    }
    for (i, t) in o.target_refs.iter().enumerate() {
        if t.kind.is_empty() || t.name.is_empty() {
            return Err(c.fail(
                format!("spec.targetRefs[{i}]"),
                "kind and name are required",
            ));
        }
    }
    let v = &o.validation;
    let wildcard_free = v.hostname.strip_prefix("*.").is_none() && !v.hostname.contains('*');
    if !wildcard_free || v.hostname.parse::<std::net::IpAddr>().is_ok() {
        return Err(c.fail(
            "spec.validation.hostname",
            format!(
                "{:?} must be a DNS name (no wildcard, no IP address)",
                v.hostname
            ),
        ));
    }
    c.hostname("spec.validation.hostname", &v.hostname)?;
    match (
        v.ca_certificate_refs.is_empty(),
        &v.well_known_ca_certificates,
    ) {
        (false, Some(_)) => {
            return Err(c.fail(
                "spec.validation",
                "caCertificateRefs and wellKnownCACertificates are exclusive: give one",
            ));
        }
        (true, None) => {
            return Err(c.fail(
                "spec.validation",
                "one of caCertificateRefs or wellKnownCACertificates is required",
            ));
        }
        _ => {}
    }
    if v.ca_certificate_refs.len() > 8 {
        return Err(c.fail("spec.validation.caCertificateRefs", "at most 8 entries"));
    }
    if v.subject_alt_names.len() > 5 {
        return Err(c.fail("spec.validation.subjectAltNames", "at most 5 entries"));
    }
    for (i, san) in v.subject_alt_names.iter().enumerate() {
        let field = format!("spec.validation.subjectAltNames[{i}]");
        match san {
            SubjectAltName::Hostname(h) => c.hostname(&format!("{field}.hostname"), h)?,
            SubjectAltName::Uri(u) if !u.contains(':') => {
                return Err(c.fail(format!("{field}.uri"), format!("{u:?} is not a URI")));
            }
            SubjectAltName::Uri(_) => {}
        }
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
mod tests;
