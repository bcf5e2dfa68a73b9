//! HTTPRoute filters compiled once per rule and per backendRef: header
//! edits, redirects, URL rewrites and mirror shares, plus the path
//! arithmetic they share (`ReplaceFullPath`, `ReplacePrefixMatch`).
//!
//! It owns what each filter does to a request or a response. It does not
//! resolve mirror backendRefs to Services (see `backends`) nor decide which
//! rule runs (see `table`).

use super::HeaderEdits;
use http::{HeaderName, HeaderValue, StatusCode};
use switchyard_proto::model::{self as model, BackendRef, Filter, PathModifier};

impl HeaderEdits {
    /// Applies the edits in Gateway API order: `set` overwrites, `add`
    /// appends to an existing value as one `old,new` field, `remove` deletes.
    pub fn apply(&self, headers: &mut http::HeaderMap) {
        for (name, value) in &self.set {
            headers.insert(name.clone(), value.clone());
        }
        for (name, value) in &self.add {
            match joined(headers, name, value) {
                Some(joined) => {
                    headers.insert(name.clone(), joined);
                }
                None => {
                    headers.append(name.clone(), value.clone());
                }
            }
        }
        for name in &self.remove {
            headers.remove(name);
        }
    }

    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.add.is_empty() && self.remove.is_empty()
    }

    /// Appends `other`'s edits after this one's (route filters, then
    /// backendRef filters).
    pub(crate) fn extend(&mut self, other: &HeaderEdits) {
        self.set.extend(other.set.iter().cloned());
        self.add.extend(other.add.iter().cloned());
        self.remove.extend(other.remove.iter().cloned());
    }

    fn compile(m: &model::HeaderModifier, problems: &mut Vec<String>) -> HeaderEdits {
        let pair = |h: &model::HeaderValue, problems: &mut Vec<String>| match (
            HeaderName::from_bytes(h.name.as_bytes()),
            HeaderValue::from_str(&h.value),
        ) {
            (Ok(n), Ok(v)) => Some((n, v)),
            _ => {
                problems.push(format!(
                    "header {:?}: {:?} is not valid; skipped",
                    h.name, h.value
                ));
                None
            }
        };
        let set = m.set.iter().filter_map(|h| pair(h, problems)).collect();
        let add = m.add.iter().filter_map(|h| pair(h, problems)).collect();
        let remove = m
            .remove
            .iter()
            .filter_map(|n| match HeaderName::from_bytes(n.as_bytes()) {
                Ok(n) => Some(n),
                Err(_) => {
                    problems.push(format!("header name {n:?} is not valid; skipped"));
                    None
                }
            })
            .collect();
        HeaderEdits { set, add, remove }
    }
}

/// The existing values of `name` followed by `value`, as one comma-joined
/// field; `None` when the header is absent.
fn joined(
    headers: &http::HeaderMap,
    name: &HeaderName,
    value: &HeaderValue,
) -> Option<HeaderValue> {
    let mut buf = Vec::new();
    for old in headers.get_all(name) {
        buf.extend_from_slice(old.as_bytes());
        buf.push(b',');
    }
    if buf.is_empty() {
        return None;
    }
    buf.extend_from_slice(value.as_bytes());
    // Every part is already a valid value and ',' is allowed, so this only
    // fails on an invariant break; the caller then appends a second field.
    HeaderValue::from_bytes(&buf).ok()
}

/// A `RequestRedirect` filter.
#[derive(Debug, Clone)]
pub(crate) struct Redirect {
    scheme: Option<String>,
    hostname: Option<String>,
    port: Option<u16>,
    path: Option<PathModifier>,
    /// 302 unless the filter says otherwise.
    pub(crate) status: StatusCode,
}

/// What the request looked like, for building a redirect or a rewrite.
pub(crate) struct RequestView<'a> {
    /// Hostname without port (lower-cased).
    pub(crate) host: &'a str,
    /// Path.
    pub(crate) path: &'a str,
    /// Raw query, if any.
    pub(crate) query: Option<&'a str>,
    /// The prefix `ReplacePrefixMatch` replaces, from the winning match.
    pub(crate) prefix: Option<&'a str>,
    /// The Gateway listener port.
    pub(crate) listener_port: u16,
    /// The scheme the request came in with (`https` on a TLS listener):
    /// a redirect keeps it unless the filter names one.
    pub(crate) scheme: &'static str,
}

impl Redirect {
    /// The `Location` of the redirect.
    ///
    /// Port rules (`apis/v1/httproute_types.go` L1207-1297): the filter's
    /// port; else the well-known port of the filter's scheme; else the
    /// listener port. The default port of the resulting scheme is left out.
    pub(crate) fn location(&self, req: &RequestView<'_>) -> String {
        let scheme = self.scheme.as_deref().unwrap_or(req.scheme);
        let port = match (self.port, &self.scheme) {
            (Some(p), _) => p,
            (None, Some(s)) => well_known_port(s).unwrap_or(req.listener_port),
            (None, None) => req.listener_port,
        };
        let host = self.hostname.as_deref().unwrap_or(req.host);
        let path = new_path(self.path.as_ref(), req.path, req.prefix);
        let mut out = format!("{scheme}://{host}");
        if well_known_port(scheme) != Some(port) {
            out.push(':');
            out.push_str(&port.to_string());
        }
        out.push_str(&path);
        if let Some(q) = req.query {
            out.push('?');
            out.push_str(q);
        }
        out
    }
}

fn well_known_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// The path after a path modifier. `prefix` is the matched prefix without
/// its trailing `/`; without one (a regex match) `ReplacePrefixMatch` keeps
/// the path, which compile notes.
pub(crate) fn new_path(
    modifier: Option<&PathModifier>,
    path: &str,
    prefix: Option<&str>,
) -> String {
    match (modifier, prefix) {
        (None, _) | (Some(PathModifier::ReplacePrefixMatch(_)), None) => path.to_string(),
        (Some(PathModifier::ReplaceFullPath(p)), _) => p.clone(),
        (Some(PathModifier::ReplacePrefixMatch(r)), Some(prefix)) => {
            replace_prefix(path, prefix, r)
        }
    }
}

/// `ReplacePrefixMatch` per the spec's table (L1173-1204): the matched
/// prefix and the replacement are both taken without trailing `/`, the rest
/// of the path is kept, and an empty result becomes `/`.
pub(crate) fn replace_prefix(path: &str, prefix: &str, replacement: &str) -> String {
    let prefix = prefix.trim_end_matches('/');
    let rest = path.strip_prefix(prefix).unwrap_or(path);
    let mut out = replacement.trim_end_matches('/').to_string();
    out.push_str(rest);
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// A `RequestMirror` before its backendRef is resolved.
#[derive(Debug, Clone)]
pub(crate) struct MirrorSpec {
    /// Where the copy goes.
    pub(crate) backend_ref: BackendRef,
    /// Mirror when the sample (high 32 bits of the request's random number)
    /// is below this; `1 << 32` means always.
    pub(crate) threshold: u64,
}

/// Mirror threshold for a share given as percent or fraction (fraction wins
/// when both are given; neither means 100%).
fn mirror_threshold(m: &model::RequestMirror) -> u64 {
    let (num, den) = match (m.fraction, m.percent) {
        (Some((n, d)), _) => (u64::from(n), u64::from(d)),
        (None, Some(p)) => (u64::from(p), 100),
        (None, None) => (1, 1),
    };
    if den == 0 || num >= den {
        return 1 << 32;
    }
    (num << 32) / den
}

/// Whether a mirror with `threshold` takes the request with this `random`.
/// Uses the high 32 bits so the choice is independent of the weighted
/// backend choice, which reads `random % total_weight`.
pub(crate) fn mirror_taken(threshold: u64, random: u64) -> bool {
    (random >> 32) < threshold
}

/// The filters of one level (a rule, or one backendRef), compiled.
#[derive(Debug, Clone, Default)]
pub(crate) struct FilterSet {
    /// RequestHeaderModifier edits.
    pub(crate) request: HeaderEdits,
    /// ResponseHeaderModifier edits.
    pub(crate) response: HeaderEdits,
    /// RequestRedirect: answer instead of forwarding.
    pub(crate) redirect: Option<Redirect>,
    /// URLRewrite hostname.
    pub(crate) rewrite_host: Option<String>,
    /// URLRewrite path.
    pub(crate) rewrite_path: Option<PathModifier>,
    /// RequestMirror filters, unresolved.
    pub(crate) mirrors: Vec<MirrorSpec>,
}

impl FilterSet {
    /// Compiles filters in order; problems go to `problems`.
    pub(crate) fn compile(filters: &[Filter], problems: &mut Vec<String>) -> FilterSet {
        let mut set = FilterSet::default();
        for f in filters {
            match f {
                Filter::RequestHeaderModifier(m) => {
                    set.request.extend(&HeaderEdits::compile(m, problems));
                }
                Filter::ResponseHeaderModifier(m) => {
                    set.response.extend(&HeaderEdits::compile(m, problems));
                }
                Filter::RequestRedirect(r) => {
                    let status = r
                        .status_code
                        .and_then(|c| StatusCode::from_u16(c).ok())
                        .filter(StatusCode::is_redirection)
                        .unwrap_or(StatusCode::FOUND);
                    set.redirect = Some(Redirect {
                        scheme: r.scheme.as_ref().map(|s| s.to_ascii_lowercase()),
                        hostname: r.hostname.clone(),
                        port: r.port,
                        path: r.path.clone(),
                        status,
                    });
                }
                Filter::UrlRewrite(r) => {
                    if r.hostname.is_some() {
                        set.rewrite_host.clone_from(&r.hostname);
                    }
                    if r.path.is_some() {
                        set.rewrite_path.clone_from(&r.path);
                    }
                }
                Filter::RequestMirror(m) => set.mirrors.push(MirrorSpec {
                    backend_ref: m.backend_ref.clone(),
                    threshold: mirror_threshold(m),
                }),
            }
        }
        set
    }

    /// Whether a path modifier here needs a prefix the match cannot give.
    pub(crate) fn needs_prefix(&self) -> bool {
        let redirect = self
            .redirect
            .as_ref()
            .is_some_and(|r| matches!(r.path, Some(PathModifier::ReplacePrefixMatch(_))));
        let rewrite = matches!(self.rewrite_path, Some(PathModifier::ReplacePrefixMatch(_)));
        redirect || rewrite
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_proto::model::{HeaderModifier, RequestMirror, RequestRedirect};

    fn hv(name: &str, value: &str) -> model::HeaderValue {
        model::HeaderValue {
            name: name.into(),
            value: value.into(),
        }
    }

    #[test]
    fn replace_prefix_follows_the_spec_table() {
        let table = [
            ("/foo/bar", "/foo", "/xyz", "/xyz/bar"),
            ("/foo/bar", "/foo", "/xyz/", "/xyz/bar"),
            ("/foo/bar", "/foo/", "/xyz", "/xyz/bar"),
            ("/foo/bar", "/foo/", "/xyz/", "/xyz/bar"),
            ("/foo", "/foo", "/xyz", "/xyz"),
            ("/foo/", "/foo", "/xyz", "/xyz/"),
            ("/foo/bar", "/foo", "", "/bar"),
            ("/foo/", "/foo", "", "/"),
            ("/foo", "/foo", "", "/"),
            ("/foo/", "/foo", "/", "/"),
            ("/foo", "/foo", "/", "/"),
            ("/foo/bar", "/", "/xyz", "/xyz/foo/bar"),
        ];
        for (path, prefix, replacement, want) in table {
            assert_eq!(
                replace_prefix(path, prefix, replacement),
                want,
                "{path} {prefix} {replacement}"
            );
        }
    }

    #[test]
    fn header_edits_set_add_remove() {
        let mut problems = Vec::new();
        let edits = HeaderEdits::compile(
            &HeaderModifier {
                set: vec![hv("X-Header-Set", "set-overwrites-values")],
                add: vec![hv("X-Header-Add", "add-appends-values"), hv("X-New", "n")],
                remove: vec!["X-Header-Remove".into()],
            },
            &mut problems,
        );
        assert!(problems.is_empty());
        let mut h = http::HeaderMap::new();
        h.insert("x-header-set", HeaderValue::from_static("old"));
        h.insert("x-header-add", HeaderValue::from_static("some-other-value"));
        h.insert("x-header-remove", HeaderValue::from_static("gone"));
        h.insert("another", HeaderValue::from_static("kept"));
        edits.apply(&mut h);
        assert_eq!(h["x-header-set"], "set-overwrites-values");
        assert_eq!(h.get_all("x-header-add").iter().count(), 1);
        assert_eq!(h["x-header-add"], "some-other-value,add-appends-values");
        assert_eq!(h["x-new"], "n");
        assert!(!h.contains_key("x-header-remove"));
        assert_eq!(h["another"], "kept");
    }

    #[test]
    fn invalid_header_values_are_skipped_with_a_problem() {
        let mut problems = Vec::new();
        let edits = HeaderEdits::compile(
            &HeaderModifier {
                set: vec![
                    hv("bad name", "v"),
                    hv("ok", "bad\nvalue"),
                    hv("ok", "fine"),
                ],
                ..Default::default()
            },
            &mut problems,
        );
        assert_eq!(problems.len(), 2);
        assert_eq!(edits.set.len(), 1);
    }

    fn redirect(r: RequestRedirect) -> Redirect {
        let mut problems = Vec::new();
        let set = FilterSet::compile(&[Filter::RequestRedirect(r)], &mut problems);
        set.redirect.expect("redirect compiled")
    }

    fn view<'a>(listener_port: u16, prefix: Option<&'a str>) -> RequestView<'a> {
        RequestView {
            host: "example.org",
            path: "/p/x",
            query: Some("q=1"),
            prefix,
            listener_port,
            scheme: "http",
        }
    }

    #[test]
    fn redirect_ports_follow_filter_then_scheme_then_listener() {
        let r = |scheme: Option<&str>, port: Option<u16>| {
            redirect(RequestRedirect {
                scheme: scheme.map(Into::into),
                port,
                ..Default::default()
            })
        };
        // Nothing set: listener port, left out when it is http's default.
        assert_eq!(
            r(None, None).location(&view(80, None)),
            "http://example.org/p/x?q=1"
        );
        assert_eq!(
            r(None, None).location(&view(8080, None)),
            "http://example.org:8080/p/x?q=1"
        );
        // Scheme set: its well-known port, not the listener's.
        assert_eq!(
            r(Some("https"), None).location(&view(8080, None)),
            "https://example.org/p/x?q=1"
        );
        assert_eq!(
            r(Some("http"), None).location(&view(8080, None)),
            "http://example.org/p/x?q=1"
        );
        // Port set: always it, unless it is the scheme default.
        assert_eq!(
            r(None, Some(8083)).location(&view(80, None)),
            "http://example.org:8083/p/x?q=1"
        );
        assert_eq!(
            r(Some("https"), Some(8443)).location(&view(80, None)),
            "https://example.org:8443/p/x?q=1"
        );
        assert_eq!(
            r(Some("https"), Some(443)).location(&view(80, None)),
            "https://example.org/p/x?q=1"
        );
        assert_eq!(
            r(None, Some(80)).location(&view(8080, None)),
            "http://example.org/p/x?q=1"
        );
    }

    #[test]
    fn redirect_host_path_and_status() {
        let r = redirect(RequestRedirect {
            hostname: Some("example.net".into()),
            path: Some(PathModifier::ReplacePrefixMatch("/new".into())),
            status_code: Some(301),
            ..Default::default()
        });
        assert_eq!(r.status, StatusCode::MOVED_PERMANENTLY);
        assert_eq!(
            r.location(&view(80, Some("/p"))),
            "http://example.net/new/x?q=1"
        );
        let full = redirect(RequestRedirect {
            path: Some(PathModifier::ReplaceFullPath("/full".into())),
            ..Default::default()
        });
        assert_eq!(full.status, StatusCode::FOUND);
        assert_eq!(
            full.location(&view(80, Some("/p"))),
            "http://example.org/full?q=1"
        );
    }

    #[test]
    fn mirror_shares() {
        let m = |percent: Option<u32>, fraction: Option<(u32, u32)>| {
            mirror_threshold(&RequestMirror {
                backend_ref: BackendRef::service("m", 80),
                percent,
                fraction,
            })
        };
        let all = m(None, None);
        assert!(mirror_taken(all, u64::MAX));
        let none = m(Some(0), None);
        assert!(!mirror_taken(none, 0));
        let fifth = m(Some(20), None);
        assert!(mirror_taken(fifth, 0));
        assert!(mirror_taken(fifth, ((1u64 << 32) / 5 - 1) << 32));
        assert!(!mirror_taken(fifth, ((1u64 << 32) / 5 + 1) << 32));
        // 25/50 behaves as 50%; the low bits (weight choice) are ignored.
        let half = m(None, Some((25, 50)));
        assert!(mirror_taken(half, 0x7fff_ffff_ffff_ffff));
        assert!(!mirror_taken(half, 0x8000_0000_0000_0000));
    }
}
