//! Hostnames: exact and wildcard patterns, the request's host, listener and
//! route hostname intersection, and specificity.
//!
//! It owns only the string rules of Gateway API hostnames (wildcards cover
//! one or more leading labels, never the bare suffix; the Host port is
//! ignored; comparison is case-insensitive). Which listener or route wins is
//! decided by the callers, which use [`HostPattern`] ordering and lookups.

use std::borrow::Cow;

/// A hostname pattern from a listener or a route, lower-cased.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum HostPattern {
    /// `foo.example.com`: this host only.
    Exact(String),
    /// `*.example.com`, stored as the suffix `.example.com` so a lookup can
    /// slice the request host at each dot without allocating.
    Wildcard(String),
}

impl HostPattern {
    /// Parses `foo.example.com` or `*.example.com` (case-insensitive).
    pub(crate) fn parse(text: &str) -> HostPattern {
        let lower = text.to_ascii_lowercase();
        match lower.strip_prefix('*') {
            Some(suffix) => HostPattern::Wildcard(suffix.to_string()),
            None => HostPattern::Exact(lower),
        }
    }

    /// Whether `host` (already normalized by [`request_host`]) matches.
    pub(crate) fn matches(&self, host: &str) -> bool {
        match self {
            HostPattern::Exact(h) => h == host,
            // At least one label must precede the suffix: `*.example.com`
            // does not match `example.com` (nor `.example.com`).
            HostPattern::Wildcard(suffix) => {
                host.len() > suffix.len() && host.ends_with(suffix.as_str())
            }
        }
    }

    /// The intersection of a route hostname with a listener hostname: the
    /// more specific of the two when one covers the other, else `None`.
    pub(crate) fn intersect(&self, listener: &HostPattern) -> Option<HostPattern> {
        match (self, listener) {
            (HostPattern::Exact(r), l) => l.matches(r).then(|| self.clone()),
            (HostPattern::Wildcard(_), HostPattern::Exact(l)) => {
                self.matches(l).then(|| listener.clone())
            }
            (HostPattern::Wildcard(r), HostPattern::Wildcard(l)) => {
                if r.ends_with(l.as_str()) {
                    Some(self.clone())
                } else if l.ends_with(r.as_str()) {
                    Some(listener.clone())
                } else {
                    None
                }
            }
        }
    }
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostPattern::Exact(h) => f.write_str(h),
            HostPattern::Wildcard(s) => write!(f, "*{s}"),
        }
    }
}

/// The suffixes a wildcard pattern could be stored under for `host`,
/// longest first: for `a.b.example.com`, `.b.example.com`, `.example.com`,
/// `.com`. Longest first is the Gateway API order "more specific wildcard
/// wins".
pub(crate) fn wildcard_suffixes(host: &str) -> impl Iterator<Item = &str> {
    host.char_indices()
        .filter(|&(i, c)| c == '.' && i > 0)
        .map(move |(i, _)| &host[i..])
}

/// The request's hostname for matching: from the `Host` header, else the
/// URI authority (HTTP/2, absolute-form), without port, lower-cased. Empty
/// when the request names no host; then only hostname-less listeners and
/// routes match.
pub(crate) fn request_host(req: &http::request::Parts) -> Cow<'_, str> {
    let raw = req
        .headers
        .get(http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| req.uri.authority().map(|a| a.as_str()))
        .unwrap_or("");
    let bare = strip_port(raw);
    if bare.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(bare.to_ascii_lowercase())
    } else {
        Cow::Borrowed(bare)
    }
}

/// `host:port` → `host`; IPv6 literals keep their brackets (`[::1]:80` →
/// `[::1]`), and a trailing dot of a fully qualified name is dropped.
fn strip_port(authority: &str) -> &str {
    // Userinfo is not allowed in Host but may appear in an absolute URI.
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if authority.starts_with('[') {
        match authority.find(']') {
            Some(end) => &authority[..=end],
            None => authority,
        }
    } else {
        authority.split_once(':').map_or(authority, |(h, _)| h)
    };
    host.strip_suffix('.').unwrap_or(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(host: Option<&str>, uri: &str) -> http::request::Parts {
        let mut b = http::Request::builder().uri(uri);
        if let Some(h) = host {
            b = b.header("host", h);
        }
        b.body(()).expect("valid request").into_parts().0
    }

    #[test]
    fn wildcard_matches_one_or_more_labels_but_not_the_suffix_itself() {
        let w = HostPattern::parse("*.bar.com");
        assert!(w.matches("foo.bar.com"));
        assert!(w.matches("multiple.prefixes.bar.com"));
        assert!(!w.matches("bar.com"));
        assert!(!w.matches(".bar.com"));
        assert!(!w.matches("foobar.com"));
        let e = HostPattern::parse("Foo.Bar.com");
        assert!(e.matches("foo.bar.com"));
        assert!(!e.matches("x.foo.bar.com"));
    }

    #[test]
    fn intersection_keeps_the_more_specific_side() {
        let p = HostPattern::parse;
        assert_eq!(
            p("a.bar.com").intersect(&p("*.bar.com")),
            Some(p("a.bar.com"))
        );
        assert_eq!(
            p("*.bar.com").intersect(&p("a.bar.com")),
            Some(p("a.bar.com"))
        );
        assert_eq!(
            p("*.a.bar.com").intersect(&p("*.bar.com")),
            Some(p("*.a.bar.com"))
        );
        assert_eq!(
            p("*.bar.com").intersect(&p("*.a.bar.com")),
            Some(p("*.a.bar.com"))
        );
        assert_eq!(p("*.bar.com").intersect(&p("*.foo.com")), None);
        assert_eq!(p("bar.com").intersect(&p("*.bar.com")), None);
        assert_eq!(p("a.com").intersect(&p("b.com")), None);
    }

    #[test]
    fn request_host_ignores_port_and_case() {
        assert_eq!(request_host(&parts(Some("Foo.COM:8080"), "/")), "foo.com");
        assert_eq!(request_host(&parts(Some("[::1]:80"), "/")), "[::1]");
        assert_eq!(
            request_host(&parts(Some("example.org."), "/")),
            "example.org"
        );
        assert_eq!(
            request_host(&parts(None, "http://h.example:81/x")),
            "h.example"
        );
        assert_eq!(request_host(&parts(None, "/x")), "");
    }

    #[test]
    fn suffixes_are_longest_first() {
        let s: Vec<_> = wildcard_suffixes("a.b.example.com").collect();
        assert_eq!(s, vec![".b.example.com", ".example.com", ".com"]);
        assert_eq!(wildcard_suffixes(".com").count(), 0);
    }
}
