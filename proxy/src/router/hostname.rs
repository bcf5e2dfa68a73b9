//! Hostnames on the request side: the request's host and the wildcard
//! suffixes a lookup tries. The patterns and their intersection are the
//! model's ([`HostPattern`]); which listener or route wins is decided by
//! the callers, which use its ordering and lookups.

use std::borrow::Cow;

/// Hostname patterns are the model's (the Gateway API rule is shared with
/// status); the router adds request-side lookups.
pub(crate) use switchyard_proto::model::gateway_api::HostPattern;

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
