//! HTTPRoute filters into the model: `RequestHeaderModifier`,
//! `ResponseHeaderModifier`, `RequestRedirect`, `URLRewrite` and
//! `RequestMirror`, on rules and on backendRefs.
//!
//! The gateway-api crate generates one set of types for rule filters and an
//! identically shaped, separately named set for backendRef filters; one
//! macro body translates both so the two cannot drift apart.
//!
//! `ExtensionRef` and `CORS` are rejected with an error naming the filter:
//! switchyard does not implement them, and silently dropping a filter would
//! serve traffic the user did not ask for. Value checks (header names,
//! redirect codes, paths) are left to `validate_resource`.

use crate::convert::{non_negative, opt_port};
use crate::error::Problem;
use switchyard_proto::model::{
    BackendRef, Filter, HeaderModifier, HeaderValue, PathModifier, RequestMirror, RequestRedirect,
    UrlRewrite,
};

/// The value of `field` of a filter, required because its `type` says so.
fn required<T>(value: Option<T>, f: &str, field: &str, ty: &str) -> Result<T, Problem> {
    value.ok_or_else(|| {
        Problem::invalid(
            format!("{f}.{field}"),
            format!("required when type is {ty}"),
        )
    })
}

/// A path modifier from its `type` and the two optional values.
fn path_modifier(
    f: &str,
    full_path: bool,
    replace_full_path: Option<String>,
    replace_prefix_match: Option<String>,
) -> Result<PathModifier, Problem> {
    if full_path {
        required(replace_full_path, f, "replaceFullPath", "ReplaceFullPath")
            .map(PathModifier::ReplaceFullPath)
    } else {
        required(
            replace_prefix_match,
            f,
            "replacePrefixMatch",
            "ReplacePrefixMatch",
        )
        .map(PathModifier::ReplacePrefixMatch)
    }
}

fn unsupported(f: &str, ty: &str) -> Problem {
    Problem::invalid(
        format!("{f}.type"),
        format!(
            "filter type {ty} is not supported by switchyard (supported: RequestHeaderModifier, \
             ResponseHeaderModifier, RequestRedirect, URLRewrite, RequestMirror)"
        ),
    )
}

/// Builds a translator for one generated filter type. The arguments name
/// the generated enums: filter type, redirect path type, redirect scheme,
/// rewrite path type.
macro_rules! filter_translator {
    ($name:ident, $filter:ty, $ty:ident, $redirect_path:ident, $scheme:ident, $rewrite_path:ident) => {
        /// Translates one filter; `f` is its field path.
        pub(crate) fn $name(f: &str, filter: $filter) -> Result<Filter, Problem> {
            macro_rules! header_modifier {
                ($m:expr) => {{
                    let m = $m;
                    HeaderModifier {
                        set: m
                            .set
                            .unwrap_or_default()
                            .into_iter()
                            .map(|h| HeaderValue {
                                name: h.name,
                                value: h.value,
                            })
                            .collect(),
                        add: m
                            .add
                            .unwrap_or_default()
                            .into_iter()
                            .map(|h| HeaderValue {
                                name: h.name,
                                value: h.value,
                            })
                            .collect(),
                        remove: m.remove.unwrap_or_default(),
                    }
                }};
            }
            match filter.r#type {
                $ty::RequestHeaderModifier => {
                    let m = required(
                        filter.request_header_modifier,
                        f,
                        "requestHeaderModifier",
                        "RequestHeaderModifier",
                    )?;
                    Ok(Filter::RequestHeaderModifier(header_modifier!(m)))
                }
                $ty::ResponseHeaderModifier => {
                    let m = required(
                        filter.response_header_modifier,
                        f,
                        "responseHeaderModifier",
                        "ResponseHeaderModifier",
                    )?;
                    Ok(Filter::ResponseHeaderModifier(header_modifier!(m)))
                }
                $ty::RequestRedirect => {
                    let r = required(
                        filter.request_redirect,
                        f,
                        "requestRedirect",
                        "RequestRedirect",
                    )?;
                    let rf = format!("{f}.requestRedirect");
                    let path = match r.path {
                        None => None,
                        Some(p) => Some(path_modifier(
                            &format!("{rf}.path"),
                            matches!(p.r#type, $redirect_path::ReplaceFullPath),
                            p.replace_full_path,
                            p.replace_prefix_match,
                        )?),
                    };
                    let status_code = match r.status_code {
                        None => None,
                        Some(code) => Some(u16::try_from(code).map_err(|_| {
                            Problem::invalid(
                                format!("{rf}.statusCode"),
                                format!("{code} is not a redirect code"),
                            )
                        })?),
                    };
                    Ok(Filter::RequestRedirect(RequestRedirect {
                        scheme: r.scheme.map(|s| match s {
                            $scheme::Http => "http".to_string(),
                            $scheme::Https => "https".to_string(),
                        }),
                        hostname: r.hostname,
                        path,
                        port: opt_port(&format!("{rf}.port"), r.port)?,
                        status_code,
                    }))
                }
                $ty::UrlRewrite => {
                    let r = required(filter.url_rewrite, f, "urlRewrite", "URLRewrite")?;
                    let path = match r.path {
                        None => None,
                        Some(p) => Some(path_modifier(
                            &format!("{f}.urlRewrite.path"),
                            matches!(p.r#type, $rewrite_path::ReplaceFullPath),
                            p.replace_full_path,
                            p.replace_prefix_match,
                        )?),
                    };
                    Ok(Filter::UrlRewrite(UrlRewrite {
                        hostname: r.hostname,
                        path,
                    }))
                }
                $ty::RequestMirror => {
                    let m = required(filter.request_mirror, f, "requestMirror", "RequestMirror")?;
                    let mf = format!("{f}.requestMirror");
                    let b = m.backend_ref;
                    let backend_ref = BackendRef {
                        group: b.group.unwrap_or_default(),
                        kind: b.kind.unwrap_or_else(|| "Service".to_string()),
                        namespace: b.namespace,
                        name: b.name,
                        port: opt_port(&format!("{mf}.backendRef.port"), b.port)?,
                        weight: 1,
                        filters: Vec::new(),
                    };
                    let percent = match m.percent {
                        None => None,
                        Some(p) => Some(non_negative(&format!("{mf}.percent"), p)?),
                    };
                    let fraction = match m.fraction {
                        None => None,
                        Some(fr) => Some((
                            non_negative(&format!("{mf}.fraction.numerator"), fr.numerator)?,
                            non_negative(
                                &format!("{mf}.fraction.denominator"),
                                fr.denominator.unwrap_or(100),
                            )?,
                        )),
                    };
                    Ok(Filter::RequestMirror(RequestMirror {
                        backend_ref,
                        percent,
                        fraction,
                    }))
                }
                $ty::ExtensionRef => Err(unsupported(f, "ExtensionRef")),
                $ty::Cors => Err(unsupported(f, "CORS")),
            }
        }
    };
}

mod rule_level {
    use super::*;
    use gateway_api::apis::standard::httproutes::{
        HttpRouteRulesFilters, HttpRouteRulesFiltersRequestRedirectPathType as RedirectPath,
        HttpRouteRulesFiltersRequestRedirectScheme as Scheme, HttpRouteRulesFiltersType as Type,
        HttpRouteRulesFiltersUrlRewritePathType as RewritePath,
    };
    filter_translator!(
        route_filter,
        HttpRouteRulesFilters,
        Type,
        RedirectPath,
        Scheme,
        RewritePath
    );
}

mod backend_level {
    use super::*;
    use gateway_api::apis::standard::httproutes::{
        HttpRouteRulesBackendRefsFilters,
        HttpRouteRulesBackendRefsFiltersRequestRedirectPathType as RedirectPath,
        HttpRouteRulesBackendRefsFiltersRequestRedirectScheme as Scheme,
        HttpRouteRulesBackendRefsFiltersType as Type,
        HttpRouteRulesBackendRefsFiltersUrlRewritePathType as RewritePath,
    };
    filter_translator!(
        backend_filter,
        HttpRouteRulesBackendRefsFilters,
        Type,
        RedirectPath,
        Scheme,
        RewritePath
    );
}

pub(crate) use backend_level::backend_filter;
pub(crate) use rule_level::route_filter;
