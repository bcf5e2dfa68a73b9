//! One HTTPRoute match compiled for the hot path: path (exact, segment-wise
//! prefix, full-match regex), headers, query parameters and method.
//!
//! It owns whether a single match accepts a request, and the numbers the
//! precedence order reads (path kind and length, condition counts). It does
//! not order matches against each other (see `precedence`) nor decide
//! anything about hostnames (see `hostname`).
//!
//! Request paths arrive normalized (the server's `path` module); exact and
//! prefix values are put in the same form when compiled (hex upper-cased,
//! encoded unreserved characters decoded, dot segments resolved), so
//! `/%7Euser` in a route and `/~user` in a request are one path. Regexes
//! see the normalized path too. Regexes come compiled from `regexes`.

use super::regexes::RegexPlan;
use crate::server::path;
use crate::settings::{EncodedSlashes, PathSettings};
use http::{HeaderName, Method};
use regex_automata::meta::Regex;
use std::borrow::Cow;
use std::sync::Arc;
use switchyard_proto::model::{PathMatch, RouteMatch, StringMatchType};

/// A compiled path condition.
#[derive(Debug)]
pub(crate) enum PathCond {
    /// The whole path, case-sensitive.
    Exact(String),
    /// Whole segments of a prefix. `trimmed` has no trailing `/` (empty for
    /// the prefix `/`); `declared_len` is the length as written, which is
    /// what "longest prefix" counts.
    Prefix {
        /// The prefix without its trailing `/`.
        trimmed: String,
        /// Characters in the prefix as the route wrote it.
        declared_len: usize,
    },
    /// Anchored regex over the whole path.
    Regex(Arc<Regex>),
    /// The pattern did not compile, or is over the proxy's regex budget:
    /// matches nothing (noted at compile time).
    Never,
}

impl PathCond {
    fn matches(&self, path: &str) -> bool {
        match self {
            PathCond::Exact(p) => path == p,
            PathCond::Prefix { trimmed, .. } => prefix_matches(trimmed, path),
            PathCond::Regex(re) => re.is_match(path),
            PathCond::Never => false,
        }
    }
}

/// Segment-wise prefix test: `/abc` matches `/abc`, `/abc/`, `/abc/def`,
/// never `/abcd`.
pub(crate) fn prefix_matches(trimmed: &str, path: &str) -> bool {
    match path.strip_prefix(trimmed) {
        Some(rest) => rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

/// How a header or query value is compared.
#[derive(Debug)]
pub(crate) enum ValueCond {
    /// Equal bytes.
    Exact(String),
    /// Anchored regex over the whole value.
    Regex(Arc<Regex>),
    /// Bad pattern (or over budget): never matches.
    Never,
}

impl ValueCond {
    fn matches(&self, value: &str) -> bool {
        match self {
            ValueCond::Exact(v) => v == value,
            ValueCond::Regex(re) => re.is_match(value),
            ValueCond::Never => false,
        }
    }
}

/// One match of a rule, ready to evaluate.
#[derive(Debug)]
pub(crate) struct CompiledMatch {
    /// Path condition (`/` prefix when the route gave none).
    pub(crate) path: PathCond,
    /// Header conditions; names parsed (thus lower-cased) once.
    pub(crate) headers: Vec<(HeaderName, ValueCond)>,
    /// Query conditions; names compared exactly.
    pub(crate) query: Vec<(String, ValueCond)>,
    /// Method condition.
    pub(crate) method: Option<Method>,
}

fn value_cond(
    kind: StringMatchType,
    value: &str,
    regexes: &RegexPlan,
    problems: &mut Vec<String>,
) -> ValueCond {
    match kind {
        StringMatchType::Exact => ValueCond::Exact(value.to_string()),
        StringMatchType::RegularExpression => match regexes.get(value) {
            Ok(re) => ValueCond::Regex(re),
            Err(e) => {
                problems.push(e);
                ValueCond::Never
            }
        },
    }
}

/// A route's exact or prefix path value in the form request paths are
/// normalized to. Slashes are not merged here (a request with merging
/// off keeps them too) and encoded slashes stay; a value that cannot be
/// normalized is kept as written (no normalized request can equal it).
fn normal_value(value: &str) -> String {
    let settings = PathSettings {
        merge_slashes: false,
        encoded_slashes: EncodedSlashes::Keep,
    };
    match path::normalize(value, &settings) {
        Ok(normal) => normal.into_owned(),
        Err(_) => value.to_string(),
    }
}

impl CompiledMatch {
    /// The match used when a rule lists none: every request (prefix `/`).
    pub(crate) fn catch_all() -> CompiledMatch {
        CompiledMatch {
            path: PathCond::Prefix {
                trimmed: String::new(),
                declared_len: 1,
            },
            headers: Vec::new(),
            query: Vec::new(),
            method: None,
        }
    }

    /// Compiles one match. Problems (bad regexes, bad header names) are
    /// pushed to `problems`; the affected condition then never matches, so a
    /// broken match can only take less traffic, never more.
    pub(crate) fn compile(
        m: &RouteMatch,
        regexes: &RegexPlan,
        problems: &mut Vec<String>,
    ) -> CompiledMatch {
        let path = match &m.path {
            None => CompiledMatch::catch_all().path,
            Some(PathMatch::Exact(p)) => PathCond::Exact(normal_value(p)),
            Some(PathMatch::PathPrefix(p)) => PathCond::Prefix {
                trimmed: normal_value(p).trim_end_matches('/').to_string(),
                declared_len: p.len(),
            },
            Some(PathMatch::RegularExpression(p)) => match regexes.get(p) {
                Ok(re) => PathCond::Regex(re),
                Err(e) => {
                    problems.push(e);
                    PathCond::Never
                }
            },
        };
        // The spec: when several conditions name the same header (or query
        // parameter), only the first one counts.
        let mut headers: Vec<(HeaderName, ValueCond)> = Vec::new();
        let mut never = false;
        for h in &m.headers {
            match HeaderName::from_bytes(h.name.as_bytes()) {
                Ok(name) if !headers.iter().any(|(n, _)| *n == name) => {
                    let cond = value_cond(h.match_type, &h.value, regexes, problems);
                    headers.push((name, cond));
                }
                Ok(_) => {}
                Err(_) => {
                    problems.push(format!("bad header name {:?} in a match", h.name));
                    never = true;
                }
            }
        }
        let mut query: Vec<(String, ValueCond)> = Vec::new();
        for q in &m.query_params {
            if !query.iter().any(|(n, _)| *n == q.name) {
                let cond = value_cond(q.match_type, &q.value, regexes, problems);
                query.push((q.name.clone(), cond));
            }
        }
        let method = match &m.method {
            None => None,
            Some(text) => match Method::from_bytes(text.as_bytes()) {
                Ok(method) => Some(method),
                Err(_) => {
                    problems.push(format!("bad method {text:?} in a match"));
                    never = true;
                    None
                }
            },
        };
        CompiledMatch {
            path: if never { PathCond::Never } else { path },
            headers,
            query,
            method,
        }
    }

    /// Whether every condition holds for the request.
    pub(crate) fn matches(&self, req: &http::request::Parts) -> bool {
        if !self.path.matches(req.uri.path()) {
            return false;
        }
        if self.method.as_ref().is_some_and(|m| *m != req.method) {
            return false;
        }
        let headers_ok = self.headers.iter().all(|(name, cond)| {
            // Any value of a repeated header may satisfy the condition.
            req.headers
                .get_all(name)
                .iter()
                .any(|v| v.to_str().is_ok_and(|v| cond.matches(v)))
        });
        if !headers_ok {
            return false;
        }
        let query = req.uri.query().unwrap_or("");
        self.query
            .iter()
            .all(|(name, cond)| query_value(query, name).is_some_and(|v| cond.matches(&v)))
    }

    /// The prefix a `ReplacePrefixMatch` replaces for requests taken by this
    /// match: the `PathPrefix` without its trailing `/`, or the whole path
    /// of an `Exact` match. `None` for regex matches.
    pub(crate) fn replaceable_prefix(&self) -> Option<&str> {
        match &self.path {
            PathCond::Prefix { trimmed, .. } => Some(trimmed),
            PathCond::Exact(p) => Some(p.trim_end_matches('/')),
            PathCond::Regex(_) | PathCond::Never => None,
        }
    }
}

/// The first value of query parameter `name` (names compared exactly after
/// percent-decoding), percent-decoded. The first occurrence wins, as the
/// Gateway API asks.
fn query_value<'q>(query: &'q str, name: &str) -> Option<Cow<'q, str>> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(k) == name).then(|| percent_decode(v))
    })
}

/// Decodes `%XX` escapes; malformed escapes are kept as written. Borrows
/// when there is nothing to decode, which is the common case.
fn percent_decode(text: &str) -> Cow<'_, str> {
    if !text.contains('%') {
        return Cow::Borrowed(text);
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_proto::model::{HeaderMatch, QueryParamMatch};

    fn req(method: &str, uri: &str, headers: &[(&str, &str)]) -> http::request::Parts {
        let mut b = http::Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).expect("valid request").into_parts().0
    }

    fn compiled(m: RouteMatch) -> CompiledMatch {
        let mut problems = Vec::new();
        let c = CompiledMatch::compile(&m, &RegexPlan::default(), &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        c
    }

    fn path(p: PathMatch) -> CompiledMatch {
        compiled(RouteMatch {
            path: Some(p),
            ..Default::default()
        })
    }

    #[test]
    fn prefix_matches_whole_segments_and_ignores_trailing_slash() {
        for prefix in ["/abc", "/abc/"] {
            let m = path(PathMatch::PathPrefix(prefix.into()));
            assert!(m.matches(&req("GET", "/abc", &[])), "{prefix}");
            assert!(m.matches(&req("GET", "/abc/", &[])), "{prefix}");
            assert!(m.matches(&req("GET", "/abc/def?x=1", &[])), "{prefix}");
            assert!(!m.matches(&req("GET", "/abcd", &[])), "{prefix}");
            assert!(!m.matches(&req("GET", "/ab", &[])), "{prefix}");
        }
        let root = path(PathMatch::PathPrefix("/".into()));
        assert!(root.matches(&req("GET", "/", &[])));
        assert!(root.matches(&req("GET", "/anything/at/all", &[])));
    }

    #[test]
    fn path_values_are_compared_in_normal_form() {
        let m = path(PathMatch::PathPrefix("/%7euser/%61".into()));
        assert!(m.matches(&req("GET", "/~user/a/x", &[])));
        let m = path(PathMatch::Exact("/caf%c3%a9".into()));
        assert!(m.matches(&req("GET", "/caf%C3%A9", &[])));
    }

    #[test]
    fn exact_is_case_sensitive_and_whole() {
        let m = path(PathMatch::Exact("/one".into()));
        assert!(m.matches(&req("GET", "/one?q=2", &[])));
        assert!(!m.matches(&req("GET", "/One", &[])));
        assert!(!m.matches(&req("GET", "/one/", &[])));
    }

    #[test]
    fn regex_must_match_the_whole_path() {
        let m = path(PathMatch::RegularExpression("/v[0-9]+".into()));
        assert!(m.matches(&req("GET", "/v12", &[])));
        assert!(!m.matches(&req("GET", "/v12/x", &[])));
        assert!(!m.matches(&req("GET", "/x/v12", &[])));
        let mut problems = Vec::new();
        let bad = RouteMatch {
            path: Some(PathMatch::RegularExpression("(".into())),
            ..Default::default()
        };
        let c = CompiledMatch::compile(&bad, &RegexPlan::default(), &mut problems);
        assert_eq!(problems.len(), 1);
        assert!(!c.matches(&req("GET", "/", &[])));
    }

    #[test]
    fn headers_are_case_insensitive_by_name_and_anded() {
        let m = compiled(RouteMatch {
            headers: vec![
                HeaderMatch {
                    match_type: StringMatchType::Exact,
                    name: "Version".into(),
                    value: "two".into(),
                },
                HeaderMatch {
                    match_type: StringMatchType::RegularExpression,
                    name: "color".into(),
                    value: "bl.e".into(),
                },
            ],
            ..Default::default()
        });
        assert!(m.matches(&req("GET", "/", &[("version", "two"), ("COLOR", "blue")])));
        assert!(!m.matches(&req("GET", "/", &[("version", "two")])));
        assert!(!m.matches(&req("GET", "/", &[("version", "Two"), ("color", "blue")])));
        assert!(!m.matches(&req("GET", "/", &[("version", "two"), ("color", "xblue")])));
    }

    #[test]
    fn duplicate_header_conditions_keep_the_first() {
        let hm = |v: &str| HeaderMatch {
            match_type: StringMatchType::Exact,
            name: "x".into(),
            value: v.into(),
        };
        let m = compiled(RouteMatch {
            headers: vec![hm("a"), hm("b")],
            ..Default::default()
        });
        assert_eq!(m.headers.len(), 1);
        assert!(m.matches(&req("GET", "/", &[("x", "a")])));
    }

    #[test]
    fn query_names_are_exact_and_first_value_wins() {
        let m = compiled(RouteMatch {
            query_params: vec![QueryParamMatch {
                match_type: StringMatchType::Exact,
                name: "animal".into(),
                value: "whale".into(),
            }],
            ..Default::default()
        });
        assert!(m.matches(&req("GET", "/?animal=whale", &[])));
        assert!(m.matches(&req("GET", "/?x=1&animal=wh%61le", &[])));
        assert!(!m.matches(&req("GET", "/?Animal=whale", &[])));
        assert!(!m.matches(&req("GET", "/?animal=dolphin&animal=whale", &[])));
        assert!(!m.matches(&req("GET", "/", &[])));
    }

    #[test]
    fn method_must_be_equal() {
        let m = compiled(RouteMatch {
            method: Some("POST".into()),
            ..Default::default()
        });
        assert!(m.matches(&req("POST", "/", &[])));
        assert!(!m.matches(&req("GET", "/", &[])));
    }
}
