//! Gateway API hostnames: exact and wildcard patterns and their
//! intersection.
//!
//! Only the string rules: wildcards cover one or more leading labels, never
//! the bare suffix; comparison is case-insensitive. Reading a request's
//! host is the proxy's business; which listener or route wins is the
//! router's, which orders and looks up [`HostPattern`]s.

/// A hostname pattern from a listener or a route, lower-cased.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HostPattern {
    /// `foo.example.com`: this host only.
    Exact(String),
    /// `*.example.com`, stored as the suffix `.example.com` so a lookup can
    /// slice the request host at each dot without allocating.
    Wildcard(String),
}

impl HostPattern {
    /// Parses `foo.example.com` or `*.example.com` (case-insensitive).
    pub fn parse(text: &str) -> HostPattern {
        let lower = text.to_ascii_lowercase();
        match lower.strip_prefix('*') {
            Some(suffix) => HostPattern::Wildcard(suffix.to_string()),
            None => HostPattern::Exact(lower),
        }
    }

    /// Whether `host` (lower-cased, without port) matches.
    pub fn matches(&self, host: &str) -> bool {
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
    pub fn intersect(&self, listener: &HostPattern) -> Option<HostPattern> {
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

/// A route's hostnames on a listener: the route's hostnames intersected
/// with the listener's, the listener's when the route has none; empty means
/// every host. `None` when they do not intersect at all (the route may not
/// attach there).
pub fn effective_hostnames(
    route_hostnames: &[String],
    listener: Option<&HostPattern>,
) -> Option<Vec<HostPattern>> {
    let route: Vec<HostPattern> = route_hostnames
        .iter()
        .map(|h| HostPattern::parse(h))
        .collect();
    match (route.is_empty(), listener) {
        (true, None) => Some(Vec::new()),
        (true, Some(l)) => Some(vec![l.clone()]),
        (false, None) => Some(route),
        (false, Some(l)) => {
            let mut out: Vec<HostPattern> = route.iter().filter_map(|r| r.intersect(l)).collect();
            out.sort();
            out.dedup();
            (!out.is_empty()).then_some(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_route_without_hostnames_takes_the_listeners() {
        let l = HostPattern::parse("*.example.com");
        assert_eq!(effective_hostnames(&[], Some(&l)), Some(vec![l.clone()]));
        assert_eq!(effective_hostnames(&[], None), Some(vec![]));
        assert_eq!(effective_hostnames(&["other.org".into()], Some(&l)), None);
    }

    #[test]
    fn listener_and_route_hostnames_intersect_like_the_gateway_api_says() {
        let meets = |listener: Option<&str>, route: &[&str]| {
            let route: Vec<String> = route.iter().map(|s| s.to_string()).collect();
            let listener = listener.map(HostPattern::parse);
            effective_hostnames(&route, listener.as_ref()).is_some()
        };
        assert!(meets(None, &["a.com"]));
        assert!(meets(Some("*.example.com"), &[]));
        assert!(meets(Some("*.example.com"), &["a.b.example.com"]));
        assert!(!meets(Some("*.example.com"), &["example.com"]));
        assert!(meets(Some("a.example.com"), &["*.example.com"]));
        assert!(meets(Some("*.example.com"), &["*.a.example.com"]));
        assert!(!meets(Some("a.example.com"), &["b.example.com"]));
    }
}
