//! Forwarding headers: `X-Forwarded-For`, `Forwarded` (RFC 7239) and
//! `X-Forwarded-Proto` on every request sent upstream.
//!
//! Trusted hops ([`crate::DataPlaneSettings::trusted_hops`], default 0):
//! a forwarding header is evidence only where a proxy we trust wrote it.
//! Each trusted proxy in front appends one entry, so of the incoming list
//! the proxy keeps the last `trusted_hops` entries and drops the ones
//! before them (whatever the client claimed), then appends the peer
//! address of the connection. With 0 — the proxy is the edge — a client's
//! `X-Forwarded-For: 6.6.6.6` is dropped and the backend sees only the real
//! peer. This is stricter than appending to whatever arrived (Envoy's
//! default): a backend that reads the first entry cannot be lied to.
//!
//! `X-Forwarded-Proto` (and `Forwarded`'s `proto=`) is the scheme the
//! client used to reach this proxy: `https` on a listener that terminates
//! TLS, else `http`. An incoming `X-Forwarded-Proto` is kept only when
//! `trusted_hops > 0` (a TLS-terminating proxy in front says `https`).
//!
//! With no trusted hops, the values depend only on the connection, so they
//! are built once per connection ([`Peer`]) and the hot path copies handles.
//!
//! Not here: when in the request stack this runs (after hop-by-hop
//! stripping, before route filters, so a filter may still override).

use http::HeaderMap;
use http::header::{self, HeaderName, HeaderValue};
use std::net::{IpAddr, SocketAddr};

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// The forwarding entries one client connection contributes, built when
/// it is accepted.
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    /// `203.0.113.7` or `2001:db8::1`.
    xff: HeaderValue,
    /// `for=203.0.113.7;proto=http` or `for="[2001:db8::1]";proto=https`.
    forwarded: HeaderValue,
}

/// The scheme a client connection speaks: `http` or `https`.
pub(crate) type Scheme = &'static str;

impl Peer {
    /// The entries for a connection from `addr` speaking `scheme`. An
    /// IPv4 client seen through a dual-stack socket (`::ffff:1.2.3.4`) is
    /// written as IPv4.
    pub(crate) fn new(addr: SocketAddr, scheme: Scheme) -> Peer {
        let ip = match addr.ip() {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        let forwarded = match ip {
            IpAddr::V4(v4) => format!("for={v4};proto={scheme}"),
            IpAddr::V6(v6) => format!("for=\"[{v6}]\";proto={scheme}"),
        };
        Peer {
            xff: header_value(ip.to_string()),
            forwarded: header_value(forwarded),
        }
    }
}

/// An IP address text is always a valid header value.
fn header_value(text: String) -> HeaderValue {
    HeaderValue::try_from(text).unwrap_or(HeaderValue::from_static("unknown"))
}

/// Sets `X-Forwarded-For`, `Forwarded` and `X-Forwarded-Proto` for a
/// request from `peer` over `scheme` (see the module docs). `peer` is
/// `None` only when the socket could not say; the client's entries are
/// still dropped.
pub(crate) fn set_forwarding_headers(
    headers: &mut HeaderMap,
    peer: Option<&Peer>,
    scheme: Scheme,
    trusted_hops: usize,
) {
    let xff = peer.map(|p| &p.xff);
    append_trusted(headers, X_FORWARDED_FOR, xff, trusted_hops, split_plain);
    let fwd = peer.map(|p| &p.forwarded);
    append_trusted(headers, header::FORWARDED, fwd, trusted_hops, split_quoted);
    if trusted_hops == 0 || !headers.contains_key(X_FORWARDED_PROTO) {
        headers.insert(X_FORWARDED_PROTO, HeaderValue::from_static(scheme));
    }
}

/// Replaces header `name` with its last `trusted` list entries followed by
/// `own`.
fn append_trusted(
    headers: &mut HeaderMap,
    name: HeaderName,
    own: Option<&HeaderValue>,
    trusted: usize,
    split: fn(&str) -> Vec<&str>,
) {
    let kept: Option<String> = if trusted == 0 || !headers.contains_key(&name) {
        None
    } else {
        let mut entries: Vec<&str> = Vec::new();
        for value in headers.get_all(&name) {
            // A field that is not text cannot be split safely: it counts
            // as untrusted and everything before it is dropped too.
            match value.to_str() {
                Ok(text) => entries.extend(split(text)),
                Err(_) => entries.clear(),
            }
        }
        let skip = entries.len().saturating_sub(trusted);
        let kept = entries[skip..].join(", ");
        (!kept.is_empty()).then_some(kept)
    };
    let value = match (kept, own) {
        (None, Some(own)) => Some(own.clone()),
        (None, None) => None,
        (Some(kept), Some(own)) => {
            let joined = format!("{kept}, {}", String::from_utf8_lossy(own.as_bytes()));
            HeaderValue::try_from(joined).ok()
        }
        (Some(kept), None) => HeaderValue::try_from(kept).ok(),
    };
    // `insert` replaces every field of the name: one probe, not two.
    match value {
        Some(value) => {
            headers.insert(name, value);
        }
        None => {
            headers.remove(&name);
        }
    }
}

/// `a, b ,c` → `["a", "b", "c"]`, empty entries dropped.
fn split_plain(text: &str) -> Vec<&str> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// Like [`split_plain`] but commas inside quoted strings (RFC 7239
/// `for="[::1]:80"`, or any quoted value) do not split.
fn split_quoted(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(text[start..].trim());
    out.retain(|s| !s.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer() -> Peer {
        Peer::new("192.0.2.9:5555".parse().unwrap(), "http")
    }

    fn run(incoming: &[(&str, &str)], trusted: usize) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in incoming {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        set_forwarding_headers(&mut h, Some(&peer()), "http", trusted);
        h
    }

    #[test]
    fn at_the_edge_only_the_peer_is_written() {
        let h = run(
            &[
                ("x-forwarded-for", "6.6.6.6"),
                ("forwarded", "for=6.6.6.6"),
                ("x-forwarded-proto", "https"),
            ],
            0,
        );
        assert_eq!(h["x-forwarded-for"], "192.0.2.9");
        assert_eq!(h["forwarded"], "for=192.0.2.9;proto=http");
        assert_eq!(h["x-forwarded-proto"], "http");
        let h = run(&[], 0);
        assert_eq!(h["x-forwarded-for"], "192.0.2.9");
    }

    #[test]
    fn trusted_hops_keep_their_entries_and_drop_the_clients() {
        let h = run(
            &[
                ("x-forwarded-for", "6.6.6.6, 10.0.0.1"),
                ("x-forwarded-for", "10.0.0.2"),
                (
                    "forwarded",
                    "for=6.6.6.6, for=\"[2001:db8::1]:4711\";proto=https",
                ),
                ("x-forwarded-proto", "https"),
            ],
            2,
        );
        assert_eq!(h["x-forwarded-for"], "10.0.0.1, 10.0.0.2, 192.0.2.9");
        assert_eq!(
            h["forwarded"],
            "for=6.6.6.6, for=\"[2001:db8::1]:4711\";proto=https, for=192.0.2.9;proto=http"
        );
        assert_eq!(h["x-forwarded-proto"], "https");
    }

    #[test]
    fn ipv6_peers_are_quoted_and_mapped_ipv4_is_plain() {
        let p = Peer::new("[2001:db8::7]:1".parse().unwrap(), "http");
        assert_eq!(p.xff, "2001:db8::7");
        assert_eq!(p.forwarded, "for=\"[2001:db8::7]\";proto=http");
        let p = Peer::new("[::ffff:192.0.2.1]:1".parse().unwrap(), "http");
        assert_eq!(p.xff, "192.0.2.1");
    }

    #[test]
    fn a_tls_connection_says_https() {
        let peer = Peer::new("192.0.2.9:5555".parse().unwrap(), "https");
        let mut h = HeaderMap::new();
        h.insert(X_FORWARDED_PROTO, HeaderValue::from_static("http"));
        set_forwarding_headers(&mut h, Some(&peer), "https", 0);
        assert_eq!(h["x-forwarded-proto"], "https");
        assert_eq!(h["forwarded"], "for=192.0.2.9;proto=https");
    }

    #[test]
    fn quoted_commas_do_not_split() {
        assert_eq!(
            split_quoted("for=\"a,b\";by=x, for=c,,"),
            vec!["for=\"a,b\";by=x", "for=c"]
        );
    }
}
