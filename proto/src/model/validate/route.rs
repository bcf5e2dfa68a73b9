//! HTTPRoute validation: rules, matches (paths, headers, query
//! parameters, methods), filters, backendRefs and their weights, and the
//! cutover annotations.

use super::{Checker, MAX_WEIGHT, ValidationError};
use crate::model::policy::CutoverSettings;
use crate::model::route::{
    BackendRef, Filter, HttpRoute, PathMatch, PathModifier, RouteRule, StringMatchType,
};

pub(super) fn validate_route(c: &Checker, o: &HttpRoute) -> Result<(), ValidationError> {
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
    if b.is_service() || b.is_service_import() {
        match b.port {
            None => {
                return Err(c.fail(
                    format!("{f}.port"),
                    format!("required when referring to a {}", b.kind),
                ));
            }
            Some(p) => c.port(&format!("{f}.port"), p)?,
        }
    }
    Ok(())
}
