//! Header hygiene between the client and upstream connections: hop-by-hop
//! headers (and which `Connection` options are obeyed), cookies split by
//! HTTP/2, and the `x-switchyard-reason` value.
//!
//! Not here: Host (`host`), forwarding headers (`forwarded`), route
//! filters (set/add/remove), which the router compiles into `HeaderEdits`
//! and which run after this, so nothing here can strip what a filter set.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// Name of the header that says why the proxy answered itself.
pub const REASON_HEADER: HeaderName = HeaderName::from_static("x-switchyard-reason");

/// Headers that describe one connection, never the message (RFC 9110
/// §7.6.1), plus the legacy `proxy-connection` and `keep-alive`.
const HOP_BY_HOP_COUNT: usize = 7;
const HOP_BY_HOP: [HeaderName; HOP_BY_HOP_COUNT] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Headers a `Connection` option can never remove: the ones framing and
/// routing depend on, credentials, content metadata, and the forwarding
/// headers trusted hops wrote. RFC 9110 §7.6.1 forbids listing headers
/// meant for every recipient as connection options; a sender that does
/// (`Connection: host`) is refused that option, not obeyed.
fn is_end_to_end(name: &str) -> bool {
    matches!(
        name,
        "host"
            | "content-length"
            | "content-type"
            | "content-encoding"
            | "content-range"
            | "authorization"
            | "cookie"
            | "set-cookie"
            | "location"
            | "cache-control"
            | "forwarded"
            | "x-forwarded-for"
            | "x-forwarded-proto"
            | "x-forwarded-host"
    )
}

/// Removes hop-by-hop headers: the fixed list, and the headers the
/// `Connection` header names unless they are end-to-end headers (see
/// `is_end_to_end`). `Transfer-Encoding` goes because hyper frames each
/// hop itself; `Content-Length` stays.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // One pass over the names (no hashing) finds which hop-by-hop headers
    // are there: most requests carry none, and a keep-alive backend's
    // response only `Connection: keep-alive`. Only those are removed —
    // each removal is a hash and a probe.
    let mut present = [false; HOP_BY_HOP_COUNT];
    let mut any = false;
    for name in headers.keys() {
        if let Some(i) = hop_by_hop_index(name) {
            present[i] = true;
            any = true;
        }
    }
    if !any {
        return;
    }
    // `Connection` options other than the usual ones name more headers to
    // drop; allocates only for those.
    let mut named: Vec<HeaderName> = Vec::new();
    if present[0] {
        for value in headers.get_all(header::CONNECTION) {
            let Ok(text) = value.to_str() else { continue };
            for token in text.split(',').map(str::trim) {
                if ["keep-alive", "close", "upgrade", ""]
                    .iter()
                    .any(|usual| token.eq_ignore_ascii_case(usual))
                {
                    continue;
                }
                let Ok(name) = HeaderName::from_bytes(token.as_bytes()) else {
                    continue;
                };
                if is_hop_by_hop(&name) || is_end_to_end(name.as_str()) {
                    continue;
                }
                named.push(name);
            }
        }
    }
    for name in named {
        headers.remove(name);
    }
    for (name, there) in HOP_BY_HOP.into_iter().zip(present) {
        if there {
            headers.remove(name);
        }
    }
}

/// Whether `name` is one of [`HOP_BY_HOP`].
fn is_hop_by_hop(name: &HeaderName) -> bool {
    hop_by_hop_index(name).is_some()
}

/// The position of `name` in [`HOP_BY_HOP`], if it is one.
fn hop_by_hop_index(name: &HeaderName) -> Option<usize> {
    HOP_BY_HOP.iter().position(|h| h == name)
}

/// HTTP/2 clients may split `cookie` into several fields; HTTP/1.1 allows
/// only one, joined with `; ` (RFC 9113 §8.2.3).
pub fn join_cookies(headers: &mut HeaderMap) {
    let values: Vec<HeaderValue> = headers.get_all(header::COOKIE).iter().cloned().collect();
    if values.len() < 2 {
        return;
    }
    let mut joined = Vec::new();
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            joined.extend_from_slice(b"; ");
        }
        joined.extend_from_slice(v.as_bytes());
    }
    if let Ok(value) = HeaderValue::from_bytes(&joined) {
        headers.insert(header::COOKIE, value);
    }
}

/// `reason` as a header value; characters a header cannot carry become `?`.
pub fn reason_value(reason: &str) -> HeaderValue {
    HeaderValue::from_str(reason).unwrap_or_else(|_| {
        let cleaned: String = reason
            .chars()
            .map(|c| {
                if c == ' ' || c.is_ascii_graphic() {
                    c
                } else {
                    '?'
                }
            })
            .collect();
        HeaderValue::from_str(&cleaned).unwrap_or(HeaderValue::from_static("unprintable reason"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_hop_by_hop_and_connection_named() {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, "keep-alive, X-Secret".parse().unwrap());
        h.insert("x-secret", "1".parse().unwrap());
        h.insert("keep-alive", "timeout=5".parse().unwrap());
        h.insert(header::TRANSFER_ENCODING, "chunked".parse().unwrap());
        h.insert("x-echo-set-header", "A:b".parse().unwrap());
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert_eq!(h["x-echo-set-header"], "A:b");
    }

    #[test]
    fn connection_cannot_strip_end_to_end_headers() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            "host, Content-Length, authorization, x-forwarded-for, x-drop"
                .parse()
                .unwrap(),
        );
        h.insert(header::HOST, "h.example".parse().unwrap());
        h.insert(header::CONTENT_LENGTH, "3".parse().unwrap());
        h.insert(header::AUTHORIZATION, "Bearer t".parse().unwrap());
        h.insert("x-forwarded-for", "10.0.0.1".parse().unwrap());
        h.insert("x-drop", "1".parse().unwrap());
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 4, "{h:?}");
        assert!(!h.contains_key("x-drop"));
        assert!(!h.contains_key(header::CONNECTION));
        assert_eq!(h[header::HOST], "h.example");
        assert_eq!(h[header::CONTENT_LENGTH], "3");
    }

    #[test]
    fn hop_by_hop_names_match_the_list() {
        for name in HOP_BY_HOP {
            assert!(is_hop_by_hop(&name), "{name}");
        }
        assert!(!is_hop_by_hop(&header::CONTENT_LENGTH));
        assert!(!is_hop_by_hop(&HeaderName::from_static("x-secret")));
    }

    #[test]
    fn each_hop_by_hop_header_alone_is_stripped() {
        for name in HOP_BY_HOP {
            let mut h = HeaderMap::new();
            h.insert(name.clone(), "x".parse().unwrap());
            h.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
            strip_hop_by_hop(&mut h);
            assert_eq!(h.len(), 1, "{name}");
        }
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
        h.insert("x-other", "1".parse().unwrap());
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 2);
    }

    #[test]
    fn cookies_joined() {
        let mut h = HeaderMap::new();
        h.append(header::COOKIE, "a=1".parse().unwrap());
        h.append(header::COOKIE, "b=2".parse().unwrap());
        join_cookies(&mut h);
        assert_eq!(h.get_all(header::COOKIE).iter().count(), 1);
        assert_eq!(h[header::COOKIE], "a=1; b=2");
    }

    #[test]
    fn reason_values_are_always_valid() {
        assert_eq!(reason_value("no route"), "no route");
        assert_eq!(reason_value("bad\nline"), "bad?line");
    }
}
